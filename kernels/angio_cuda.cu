/* angio_cuda.cu - repeated B-scans and angiography on the GPU (SPEC 10.3);
 * the CPU twin and the definitions are in angio.c / angio.h.
 *
 * Per chunk of whole groups (S = groups * R * N spectra):
 *   band    xb[k][s][n] = g_k[n] x~[s][n]            (one kernel, K x S x M)
 *   fft     one batched cuFFT R2C of the K * S band spectra
 *   ssada   per pixel (g, n, d): the magnitudes of the R repeats in each band
 *           straight from the complex spectra, the pair terms c(a, b) summed,
 *           1 - sum/(R-1) averaged over the K bands (no magnitude buffer)
 *   metrics per pixel: struct, median (register sort), sv, decor from the R
 *           CFD magnitudes A (given by the engine, or computed here with the
 *           same R2C plan on x~ when dA is NULL)
 * Threads run along d (the contiguous axis of A and of the spectra).
 */
#include <cuda_runtime.h>
#include <cufft.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "angio.h"
#include "angio_align_cuda.h"

#define ACU(call, what)                                                                      \
    do {                                                                                     \
        cudaError_t r_ = (call);                                                             \
        if (r_ != cudaSuccess)                                                               \
            return oct_error_set(e, OCT_EDEVICE, "angio cuda: %s: %s", what,                 \
                                 cudaGetErrorString(r_));                                    \
    } while (0)
#define AFFT(call, what)                                                                     \
    do {                                                                                     \
        cufftResult r_ = (call);                                                             \
        if (r_ != CUFFT_SUCCESS)                                                             \
            return oct_error_set(e, OCT_EDEVICE, "angio cuda: cuFFT %s failed (%d)", what,   \
                                 (int)r_);                                                   \
    } while (0)

struct oct_angio_cuda {
    oct_angio_config c;
    uint32_t D;
    cudaStream_t stream;
    uint32_t chunk_groups;  /* groups per chunk */
    float *gains;           /* K x M */
    float *band;            /* K x S x M (S = chunk_groups R N) */
    cufftComplex *spec;     /* K x S x D */
    float *A;               /* S x D: CFD magnitudes when the caller gives none */
    cufftHandle plan_bands; /* K S transforms */
    cufftHandle plan_cfd;   /* S transforms */
    bool have_bands, have_cfd;
    oct_angio_align_cuda *al; /* angio.align: angio_align_cuda.cu (NULL: off) */
};

__device__ __forceinline__ float pair_c(float a, float b)
{
    float den = a * a + b * b;
    return den > 0.0f ? 2.0f * a * b / den : 1.0f;
}

__device__ __forceinline__ float mag(cufftComplex z)
{
    return sqrtf(z.x * z.x + z.y * z.y);
}

__global__ void k_band(const float *__restrict__ x, const float *__restrict__ g,
                       float *__restrict__ out, uint32_t M, size_t S, int K)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)K * S * M;
    if (i >= total)
        return;
    uint32_t n = (uint32_t)(i % M);
    size_t s = (i / M) % S;
    int k = (int)(i / ((size_t)M * S));
    out[i] = g[(size_t)k * M + n] * x[s * M + n];
}

__global__ void k_mag(const cufftComplex *__restrict__ X, float *__restrict__ A, size_t S,
                      uint32_t D, uint32_t F)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * D)
        return;
    uint32_t d = (uint32_t)(i % D);
    A[i] = d < F ? 0.0f : sqrtf(X[i].x * X[i].x + X[i].y * X[i].y);
}

/* one thread per pixel (g, n, d) of the chunk */
__global__ void k_metrics(const float *__restrict__ A, uint32_t G, uint32_t R, uint32_t N,
                          uint32_t D, float *ost, float *omd, float *osv, float *odc,
                          size_t sg, size_t sn, size_t sd)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)G * N * D)
        return;
    uint32_t d = (uint32_t)(i % D);
    uint32_t n = (uint32_t)((i / D) % N);
    uint32_t g = (uint32_t)(i / ((size_t)D * N));
    const size_t img = (size_t)N * D;
    const float *p = A + (size_t)g * R * img + (size_t)n * D + d;
    float v[OCT_ANGIO_REPEATS_MAX];
    float s = 0.0f, c = 0.0f;
    for (uint32_t r = 0; r < R; r++) {
        v[r] = p[r * img];
        s += v[r];
        if (r)
            c += pair_c(v[r - 1], v[r]);
    }
    const float S = s / (float)R;
    const size_t at = (size_t)g * sg + (size_t)n * sn + (size_t)d * sd;
    if (ost)
        ost[at] = S;
    if (osv) {
        float q = 0.0f;
        for (uint32_t r = 0; r < R; r++)
            q += (v[r] - S) * (v[r] - S);
        osv[at] = q / (float)R;
    }
    if (odc)
        odc[at] = 1.0f - c / (float)(R - 1);
    if (omd) {
        for (uint32_t a = 1; a < R; a++) {
            float x = v[a];
            uint32_t k = a;
            for (; k > 0 && v[k - 1] > x; k--)
                v[k] = v[k - 1];
            v[k] = x;
        }
        omd[at] = (R & 1) ? v[R / 2] : 0.5f * (v[R / 2 - 1] + v[R / 2]);
    }
}

__global__ void k_ssada(const cufftComplex *__restrict__ X, uint32_t G, uint32_t R, uint32_t N,
                        uint32_t D, uint32_t F, int K, size_t band_stride, float *out, size_t sg,
                        size_t sn, size_t sd)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)G * N * D)
        return;
    uint32_t d = (uint32_t)(i % D);
    uint32_t n = (uint32_t)((i / D) % N);
    uint32_t g = (uint32_t)(i / ((size_t)D * N));
    const size_t img = (size_t)N * D;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        const cufftComplex *p = X + (size_t)k * band_stride + (size_t)g * R * img + (size_t)n * D + d;
        float c = 0.0f;
        float prev = d < F ? 0.0f : sqrtf(p[0].x * p[0].x + p[0].y * p[0].y);
        for (uint32_t r = 1; r < R; r++) {
            float cur = d < F ? 0.0f : mag(p[r * img]);
            c += pair_c(prev, cur);
            prev = cur;
        }
        acc += 1.0f - c / (float)(R - 1);
    }
    out[(size_t)g * sg + (size_t)n * sn + (size_t)d * sd] = acc / (float)K;
}

static unsigned blocks_for(size_t n)
{
    return (unsigned)((n + 255) / 256);
}

extern "C" void oct_angio_cuda_destroy(oct_angio_cuda *a)
{
    if (!a)
        return;
    if (a->have_bands)
        cufftDestroy(a->plan_bands);
    if (a->have_cfd)
        cufftDestroy(a->plan_cfd);
    cudaFree(a->gains);
    cudaFree(a->band);
    cudaFree(a->spec);
    cudaFree(a->A);
    oct_angio_align_cuda_destroy(a->al);
    free(a);
}

static oct_err create_inner(oct_angio_cuda *a, size_t max_spectra, oct_error *e)
{
    const oct_angio_config *c = &a->c;
    const uint32_t M = c->samples, D = a->D, RN = c->repeats * c->ascans;
    a->chunk_groups = (uint32_t)(max_spectra / RN) ? (uint32_t)(max_spectra / RN) : 1u;
    const size_t S = (size_t)a->chunk_groups * RN;
    const int K = c->bands;
    const bool ssada = c->metrics & (1u << OCT_ANGIO_M_SSADA);
    ACU(cudaMalloc(&a->gains, sizeof(float) * (size_t)K * M), "band gains");
    float *g = (float *)malloc(sizeof(float) * (size_t)K * M);
    if (!g)
        return oct_error_set(e, OCT_ENOMEM, "angio cuda: out of memory");
    oct_angio_band_gains(g, M, K, c->band_width);
    cudaError_t r = cudaMemcpy(a->gains, g, sizeof(float) * (size_t)K * M, cudaMemcpyHostToDevice);
    free(g);
    ACU(r, "band gains upload");
    /* the band buffers double as the CFD buffers (K >= 1) */
    const size_t nb = ssada ? (size_t)K * S : S;
    ACU(cudaMalloc(&a->band, sizeof(float) * nb * M), "band spectra");
    ACU(cudaMalloc(&a->spec, sizeof(cufftComplex) * nb * D), "band transforms");
    ACU(cudaMalloc(&a->A, sizeof(float) * S * D), "CFD magnitudes");
    int n = (int)M;
    if (ssada) {
        AFFT(cufftPlanMany(&a->plan_bands, 1, &n, NULL, 1, (int)M, NULL, 1, (int)D, CUFFT_R2C,
                           (int)nb),
             "plan (bands)");
        a->have_bands = true;
        AFFT(cufftSetStream(a->plan_bands, a->stream), "set stream");
    }
    AFFT(cufftPlanMany(&a->plan_cfd, 1, &n, NULL, 1, (int)M, NULL, 1, (int)D, CUFFT_R2C, (int)S),
         "plan (cfd)");
    a->have_cfd = true;
    AFFT(cufftSetStream(a->plan_cfd, a->stream), "set stream");
    return OCT_OK;
}

extern "C" oct_err oct_angio_cuda_create(oct_angio_cuda **out, const oct_angio_config *c,
                                         void *stream, size_t max_spectra, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_angio_config_check(c, e);
    if (err)
        return err;
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r != cudaSuccess || count == 0)
        return oct_error_set(e, OCT_EUNSUPPORTED, "angio cuda: no usable CUDA device (%s)",
                             r != cudaSuccess ? cudaGetErrorString(r) : "none found");
    oct_angio_cuda *a = (oct_angio_cuda *)calloc(1, sizeof *a);
    if (!a)
        return oct_error_set(e, OCT_ENOMEM, "angio cuda: out of memory");
    a->c = *c;
    a->D = c->samples / 2 + 1;
    a->stream = (cudaStream_t)stream;
    err = create_inner(a, max_spectra, e);
    if (!err && c->align)
        err = oct_angio_align_cuda_create(&a->al, c, stream, a->chunk_groups, e);
    if (err) {
        oct_angio_cuda_destroy(a);
        return err;
    }
    *out = a;
    return OCT_OK;
}

extern "C" oct_err oct_angio_cuda_run(oct_angio_cuda *a, const float *dA, const float *dxt,
                                      uint32_t groups, const oct_angio_dout *o, oct_error *e)
{
    const oct_angio_config *c = &a->c;
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = a->D;
    const uint32_t W = c->metrics, F = (uint32_t)c->freq_cutoff;
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        if ((W & (1u << m)) && !o->img[m])
            return oct_error_set(e, OCT_EINVAL, "angio cuda: no output buffer for metric %s",
                                 oct_angio_metric_name(m));
    if (!dxt && (!dA || (W & (1u << OCT_ANGIO_M_SSADA))))
        return oct_error_set(e, OCT_EINVAL, "angio cuda: %s needs the pre-processed spectra",
                             dA ? "ssada" : "computing the CFD magnitudes");
    const bool want_m = W & 0xfu;
    for (uint32_t g0 = 0; g0 < groups; g0 += a->chunk_groups) {
        const uint32_t G = groups - g0 < a->chunk_groups ? groups - g0 : a->chunk_groups;
        const size_t S = (size_t)G * R * N, px = (size_t)G * N * D;
        const float *x = dxt ? dxt + (size_t)g0 * R * N * M : NULL;
        const float *A = dA ? dA + (size_t)g0 * R * N * D : NULL;
        if (want_m && !A) { /* CFD magnitudes of x~ (the plan covers a full chunk) */
            ACU(cudaMemcpyAsync(a->band, x, sizeof(float) * S * M, cudaMemcpyDeviceToDevice,
                                a->stream),
                "copy spectra");
            if (S < (size_t)a->chunk_groups * R * N)
                ACU(cudaMemsetAsync(a->band + S * M, 0,
                                    sizeof(float) * ((size_t)a->chunk_groups * R * N - S) * M,
                                    a->stream),
                    "clear tail");
            AFFT(cufftExecR2C(a->plan_cfd, a->band, a->spec), "R2C (cfd)");
            k_mag<<<blocks_for(S * D), 256, 0, a->stream>>>(a->spec, a->A, S, D, F);
            A = a->A;
        }
        float *img[OCT_ANGIO_M_COUNT];
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            img[m] = (W & (1u << m)) ? o->img[m] + (size_t)g0 * o->stride_g : NULL;
        if (c->align) { /* shifts; A and the ssada bands resampled (angio_align_cuda.cu) */
            oct_err err = oct_angio_align_cuda_run(a->al, A, x, G, want_m ? &A : NULL,
                                                   img[OCT_ANGIO_M_SSADA], o->stride_g,
                                                   o->stride_n, o->stride_d, e);
            if (err)
                return err;
        }
        if (want_m)
            k_metrics<<<blocks_for(px), 256, 0, a->stream>>>(
                A, G, R, N, D, img[OCT_ANGIO_M_STRUCT], img[OCT_ANGIO_M_MEDIAN],
                img[OCT_ANGIO_M_SV], img[OCT_ANGIO_M_DECOR], o->stride_g, o->stride_n,
                o->stride_d);
        if ((W & (1u << OCT_ANGIO_M_SSADA)) && !c->align) {
            const size_t Sf = (size_t)a->chunk_groups * R * N; /* the plan's batch */
            const int K = c->bands;
            if (S < Sf)
                ACU(cudaMemsetAsync(a->band, 0, sizeof(float) * (size_t)K * Sf * M, a->stream),
                    "clear bands");
            /* band k of spectrum s at band[(k Sf + s) M]: one kernel per band keeps
             * the layout of the full plan for a short last chunk */
            for (int k = 0; k < K; k++)
                k_band<<<blocks_for(S * M), 256, 0, a->stream>>>(
                    x, a->gains + (size_t)k * M, a->band + (size_t)k * Sf * M, M, S, 1);
            AFFT(cufftExecR2C(a->plan_bands, a->band, a->spec), "R2C (bands)");
            k_ssada<<<blocks_for(px), 256, 0, a->stream>>>(
                a->spec, G, R, N, D, F, K, Sf * D, img[OCT_ANGIO_M_SSADA], o->stride_g,
                o->stride_n, o->stride_d);
        }
        ACU(cudaGetLastError(), "kernel launch");
    }
    return OCT_OK;
}

/* ---- host convenience (tests, octbench) ---------------------------------------- */

struct host_bufs {
    float *x, *A, *out[OCT_ANGIO_M_COUNT];
    cudaEvent_t t0, t1;
    cudaStream_t st;
    oct_angio_cuda *a;
};

static void host_free(host_bufs *b)
{
    cudaFree(b->x);
    cudaFree(b->A);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        cudaFree(b->out[m]);
    if (b->t0)
        cudaEventDestroy(b->t0);
    if (b->t1)
        cudaEventDestroy(b->t1);
    oct_angio_cuda_destroy(b->a);
    if (b->st)
        cudaStreamDestroy(b->st);
}

static oct_err host_run(host_bufs *b, const oct_angio_config *c, const float *A, const float *xt,
                        uint32_t groups, const oct_angio_out *o, size_t stride_g,
                        double *device_ms, oct_error *e)
{
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = M / 2 + 1;
    const size_t S = (size_t)groups * R * N;
    ACU(cudaStreamCreate(&b->st), "stream");
    oct_err err = oct_angio_cuda_create(&b->a, c, b->st, S < 16384 ? S : 16384, e);
    if (err)
        return err;
    if (xt) {
        ACU(cudaMalloc(&b->x, sizeof(float) * S * M), "spectra");
        ACU(cudaMemcpy(b->x, xt, sizeof(float) * S * M, cudaMemcpyHostToDevice), "upload");
    }
    if (A) {
        ACU(cudaMalloc(&b->A, sizeof(float) * S * D), "intensities");
        ACU(cudaMemcpy(b->A, A, sizeof(float) * S * D, cudaMemcpyHostToDevice), "upload");
    }
    oct_angio_dout d = {{0}, stride_g, o->stride_n, o->stride_d};
    const size_t span = (size_t)(groups - 1) * stride_g + (size_t)N * D;
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        if (c->metrics & (1u << m)) {
            ACU(cudaMalloc(&b->out[m], sizeof(float) * span), "outputs");
            d.img[m] = b->out[m];
        }
    ACU(cudaEventCreate(&b->t0), "event");
    ACU(cudaEventCreate(&b->t1), "event");
    ACU(cudaEventRecord(b->t0, b->st), "event");
    err = oct_angio_cuda_run(b->a, b->A, b->x, groups, &d, e);
    if (err)
        return err;
    ACU(cudaEventRecord(b->t1, b->st), "event");
    ACU(cudaStreamSynchronize(b->st), "run");
    float ms = 0;
    ACU(cudaEventElapsedTime(&ms, b->t0, b->t1), "timing");
    if (device_ms)
        *device_ms = ms;
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        if (b->out[m])
            ACU(cudaMemcpy(o->img[m], b->out[m], sizeof(float) * span, cudaMemcpyDeviceToHost),
                "download");
    return OCT_OK;
}

extern "C" oct_err oct_angio_cuda_host(const oct_angio_config *c, const float *A, const float *xt,
                                       uint32_t groups, const oct_angio_out *o, size_t stride_g,
                                       double *device_ms, oct_error *e)
{
    if (groups == 0)
        return oct_error_set(e, OCT_EINVAL, "angio cuda: no groups");
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r != cudaSuccess || count == 0)
        return oct_error_set(e, OCT_EUNSUPPORTED, "angio cuda: no usable CUDA device (%s)",
                             r != cudaSuccess ? cudaGetErrorString(r) : "none found");
    host_bufs b;
    memset(&b, 0, sizeof b);
    oct_err err = host_run(&b, c, A, xt, groups, o, stride_g, device_ms, e);
    host_free(&b);
    return err;
}
