/* angio_cuda.cu - repeated B-scans and angiography on the GPU (SPEC 10.3);
 * the CPU twin and the definitions are in angio.c / angio.h.
 *
 * Per chunk of whole groups (S = groups * R * N spectra):
 *   cfd     the CFD transform X = R2C(x~) of the S spectra: the engine's own
 *           (oct_angio_cuda_run_x), else one R2C here, out of place from x~
 *   metrics per pixel: struct, median (register sort), sv, decor from the R
 *           magnitudes |X| (or the caller's magnitudes A)
 *   bands   xb[k][s][n] = g_k[n] x~[s][n]: one kernel reads x~ once (float4)
 *           and writes all K bands
 *   fft     one batched cuFFT R2C of the K * S band spectra
 *   ssada   per pixel (g, n, d): the magnitudes of the R repeats in each band
 *           straight from the complex spectra, the pair terms c(a, b) summed,
 *           1 - sum/(R-1) averaged over the K bands (no magnitude buffer)
 * With angio.align, angio_align_cuda.cu finds the shifts, resamples the
 * magnitudes (then the metrics above) and makes ssada from resampled bands.
 * A short last chunk has its own plans (made on first use, kept while its
 * size repeats), so no chunk transforms or clears more than its spectra.
 *
 * Bytes per chunk of 31.6 k spectra of 1024 samples, K = 4 (H200, ~4 TB/s):
 * bands 0.13 GB in + 0.52 GB out, FFT 0.52 + 0.52 GB, ssada 0.52 GB in,
 * metrics 0.13 GB in (complex X) + 16 MB per image out.  Packing two real
 * bands into one C2C (z = b1 + i b2) would move the same bytes (an R2C of M
 * points already writes M/2+1 complex values), so it is not done.
 *
 * cuda_path (angio.h): BANDS as above; LEGACY (A/B only) the round-5
 * kernels, one band kernel per band and the CFD magnitudes recomputed here
 * into a float buffer; FUSED bands, transforms and ssada of one position in
 * one block (angio_fused.cuh): x~ read once, only the ssada pixels written.
 */
#include <cuda_runtime.h>
#include <cufft.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "angio.h"
#include "angio_align_cuda.h"
#include "angio_fused.cuh"
#include "cuda_check.cuh"

#define ACU(call, what) OCT_CUDA_TRY(call, "angio cuda", what)
#define AFFT(call, what) OCT_CUFFT_TRY(call, "angio cuda", what)

/* A batched R2C plan of M points for `batch` transforms (0: none yet). */
struct r2c_plan {
    cufftHandle h;
    int batch;
};

/* Chunk buffers above this many bytes are split into more chunks. */
static const size_t CHUNK_BYTES = (size_t)2 << 30;

struct oct_angio_cuda {
    oct_angio_config c;
    uint32_t D;
    cudaStream_t stream;
    uint32_t chunk_groups;  /* groups per chunk */
    float *gains;           /* K x M */
    float *band;            /* K x S x M (S = chunk_groups R N); ssada only */
    cufftComplex *spec;     /* K x S x D band transforms; S x D the CFD transform */
    float *A;               /* S x D: CFD magnitudes (legacy) */
    float2 *tw;             /* M twiddles (fused) */
    size_t fused_shared;    /* bytes of shared memory per block (fused) */
    bool legacy, fused;
    r2c_plan bands[2], cfd[2]; /* [0] full chunk, [1] the short last one */
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

/* out[k][s][n] = g[k][n] x[s][n] for all K bands from one read of x: thread i
 * takes 4 samples (i in [0, S M / 4)); band k starts at out + k * bstride. */
__global__ void k_bands4(const float4 *__restrict__ x, const float4 *__restrict__ g,
                         float4 *__restrict__ out, size_t nvec, uint32_t qmask, uint32_t M4,
                         size_t bstride4, int K)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec)
        return;
    const uint32_t q = (uint32_t)i & qmask; /* float4 within the spectrum (M / 4 a power of 2) */
    const float4 v = x[i];
    for (int k = 0; k < K; k++) {
        const float4 w = g[(size_t)k * M4 + q];
        out[(size_t)k * bstride4 + i] = make_float4(v.x * w.x, v.y * w.y, v.z * w.z, v.w * w.w);
    }
}

/* The same, one sample a thread (x~ not 16-byte aligned). */
__global__ void k_bands1(const float *__restrict__ x, const float *__restrict__ g,
                         float *__restrict__ out, size_t n, uint32_t mask, uint32_t M,
                         size_t bstride, int K)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint32_t q = (uint32_t)i & mask;
    const float v = x[i];
    for (int k = 0; k < K; k++)
        out[(size_t)k * bstride + i] = g[(size_t)k * M + q] * v;
}

/* legacy: one band (K = 1 per launch) */
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

/* legacy: magnitudes of the CFD transform */
__global__ void k_mag(const cufftComplex *__restrict__ X, float *__restrict__ A, size_t S,
                      uint32_t D, uint32_t F)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * D)
        return;
    uint32_t d = (uint32_t)(i % D);
    A[i] = d < F ? 0.0f : sqrtf(X[i].x * X[i].x + X[i].y * X[i].y);
}

/* Value of the CFD intensity at an element: a magnitude as given, or |X|
 * of the transform (0 below the cut-off F, as angio.c's). */
__device__ __forceinline__ float cfd_value(const float *p, size_t at, bool)
{
    return p[at];
}
__device__ __forceinline__ float cfd_value(const cufftComplex *p, size_t at, bool cut)
{
    return cut ? 0.0f : mag(p[at]);
}

/* One thread per pixel: blockIdx.x = row (g, n) of the chunk, d along
 * blockIdx.y * blockDim.x + threadIdx.x (no division per pixel). */
template <class T>
__global__ void k_metrics(const T *__restrict__ A, uint32_t R, uint32_t N, uint32_t D, uint32_t F,
                          float *ost, float *omd, float *osv, float *odc, size_t sg, size_t sn,
                          size_t sd)
{
    const uint32_t d = blockIdx.y * blockDim.x + threadIdx.x;
    if (d >= D)
        return;
    const uint32_t row = blockIdx.x, g = row / N, n = row - g * N;
    const size_t img = (size_t)N * D;
    const size_t base = (size_t)g * R * img + (size_t)n * D + d;
    const bool cut = d < F;
    /* struct and decor in one pass without an array (no local memory); sv
     * and median read the R values again (cache hits) */
    float s = 0.0f, c = 0.0f, prev = 0.0f;
    for (uint32_t r = 0; r < R; r++) {
        const float v = cfd_value(A, base + r * img, cut);
        s += v;
        if (r)
            c += pair_c(prev, v);
        prev = v;
    }
    const float S = s / (float)R;
    const size_t at = (size_t)g * sg + (size_t)n * sn + (size_t)d * sd;
    if (ost)
        ost[at] = S;
    if (osv) {
        float q = 0.0f;
        for (uint32_t r = 0; r < R; r++) {
            const float v = cfd_value(A, base + r * img, cut);
            q += (v - S) * (v - S);
        }
        osv[at] = q / (float)R;
    }
    if (odc)
        odc[at] = 1.0f - c / (float)(R - 1);
    if (omd) {
        float v[OCT_ANGIO_REPEATS_MAX];
        for (uint32_t r = 0; r < R; r++)
            v[r] = cfd_value(A, base + r * img, cut);
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

/* Grid as k_metrics'.  Below the cut-off every magnitude is 0, every pair
 * term 1: ssada is exactly 0 there. */
__global__ void k_ssada(const cufftComplex *__restrict__ X, uint32_t R, uint32_t N, uint32_t D,
                        uint32_t F, int K, size_t band_stride, float *out, size_t sg, size_t sn,
                        size_t sd)
{
    const uint32_t d = blockIdx.y * blockDim.x + threadIdx.x;
    if (d >= D)
        return;
    const uint32_t row = blockIdx.x, g = row / N, n = row - g * N;
    const size_t img = (size_t)N * D;
    float acc = 0.0f;
    if (d >= F)
        for (int k = 0; k < K; k++) {
            const cufftComplex *p =
                X + (size_t)k * band_stride + (size_t)g * R * img + (size_t)n * D + d;
            float c = 0.0f;
            float prev = mag(p[0]);
            for (uint32_t r = 1; r < R; r++) {
                float cur = mag(p[r * img]);
                c += pair_c(prev, cur);
                prev = cur;
            }
            acc += 1.0f - c / (float)(R - 1);
        }
    out[(size_t)g * sg + (size_t)n * sn + (size_t)d * sd] = acc / (float)K;
}

/* fused: one block per row (g, n) of the chunk; angio_fused.cuh */
__global__ void k_ssada_fused(const float *__restrict__ x, const float *__restrict__ gains,
                              const float2 *__restrict__ tw, uint32_t M, uint32_t logM, uint32_t R,
                              uint32_t N, int K, uint32_t F, float *out, size_t sg, size_t sn,
                              size_t sd)
{
    extern __shared__ float2 af_shared[]; /* float2: 8-byte aligned for the buffers */
    const uint32_t row = blockIdx.x, g = row / N, n = row - g * N;
    af_ssada_row(x + ((size_t)g * R * N + n) * M, (size_t)N * M, gains, tw, M, logM, R, K, F,
                 out + (size_t)g * sg + (size_t)n * sn, sd, (float *)af_shared, threadIdx.x,
                 blockDim.x);
}

static unsigned blocks_for(size_t n)
{
    return (unsigned)((n + 255) / 256);
}

static const unsigned PIX_THREADS = 128; /* along d */

static dim3 pixel_grid(size_t rows, uint32_t D)
{
    return dim3((unsigned)rows, (D + PIX_THREADS - 1) / PIX_THREADS);
}

static void plan_drop(r2c_plan *p)
{
    if (p->batch)
        cufftDestroy(p->h);
    p->batch = 0;
}

/* The R2C plan for `batch` transforms of M points, output rows of D: slot 0
 * for the full chunk, 1 for the short last one (re-planned when that size
 * changes: once for a fixed volume). */
static oct_err plan_get(oct_angio_cuda *a, r2c_plan *slots, bool full, int batch,
                        cufftHandle *h, oct_error *e)
{
    r2c_plan *p = &slots[full ? 0 : 1];
    if (p->batch != batch) {
        plan_drop(p);
        int n = (int)a->c.samples;
        cufftHandle nh;
        AFFT(cufftPlanMany(&nh, 1, &n, NULL, 1, n, NULL, 1, (int)a->D, CUFFT_R2C, batch),
             full ? "plan" : "plan (last chunk)");
        p->h = nh;
        p->batch = batch;
        cufftResult r = cufftSetStream(nh, a->stream);
        if (r != CUFFT_SUCCESS) {
            plan_drop(p);
            return oct_error_set(e, OCT_EDEVICE, "angio cuda: cuFFT set stream failed (%d)",
                                 (int)r);
        }
    }
    *h = p->h;
    return OCT_OK;
}

extern "C" void oct_angio_cuda_destroy(oct_angio_cuda *a)
{
    if (!a)
        return;
    for (int i = 0; i < 2; i++) {
        plan_drop(&a->bands[i]);
        plan_drop(&a->cfd[i]);
    }
    cudaFree(a->gains);
    cudaFree(a->band);
    cudaFree(a->spec);
    cudaFree(a->A);
    cudaFree(a->tw);
    oct_angio_align_cuda_destroy(a->al);
    free(a);
}

static oct_err create_inner(oct_angio_cuda *a, size_t max_spectra, oct_error *e)
{
    const oct_angio_config *c = &a->c;
    const uint32_t M = c->samples, D = a->D, RN = c->repeats * c->ascans;
    const int K = c->bands;
    const bool ssada = c->metrics & (1u << OCT_ANGIO_M_SSADA);
    a->legacy = c->cuda_path == OCT_ANGIO_CUDA_LEGACY;
    a->fused = ssada && c->cuda_path == OCT_ANGIO_CUDA_FUSED;
    /* band buffers and plans (alignment resamples the band images itself) */
    const bool bands = ssada && !a->fused && !c->align;
    if (c->cuda_chunk)
        max_spectra = c->cuda_chunk;
    /* bytes per spectrum of the chunk buffers */
    const size_t per = (bands ? (size_t)K * (sizeof(float) * M + sizeof(cufftComplex) * D)
                              : sizeof(cufftComplex) * D) +
                       (a->legacy ? sizeof(float) * D : 0);
    if (max_spectra > CHUNK_BYTES / per)
        max_spectra = CHUNK_BYTES / per;
    a->chunk_groups = (uint32_t)(max_spectra / RN) ? (uint32_t)(max_spectra / RN) : 1u;
    const size_t S = (size_t)a->chunk_groups * RN;
    if ((size_t)K * S > (size_t)INT32_MAX || S > UINT32_MAX / 2)
        return oct_error_set(e, OCT_EINVAL,
                             "angio cuda: one group of %u x %u spectra is too large for a chunk",
                             c->repeats, c->ascans);
    ACU(cudaMalloc(&a->gains, sizeof(float) * (size_t)K * M), "band gains");
    float *g = (float *)malloc(sizeof(float) * (size_t)K * M);
    if (!g)
        return oct_error_set(e, OCT_ENOMEM, "angio cuda: out of memory");
    oct_angio_band_gains(g, M, K, c->band_width);
    cudaError_t r = cudaMemcpy(a->gains, g, sizeof(float) * (size_t)K * M, cudaMemcpyHostToDevice);
    free(g);
    ACU(r, "band gains upload");
    if (bands)
        ACU(cudaMalloc(&a->band, sizeof(float) * (size_t)K * S * M), "band spectra");
    ACU(cudaMalloc(&a->spec, sizeof(cufftComplex) * (bands ? (size_t)K : 1) * S * D),
        "band transforms");
    if (a->legacy)
        ACU(cudaMalloc(&a->A, sizeof(float) * S * D), "CFD magnitudes");
    if (a->fused) {
        a->fused_shared = sizeof(float) * af_shared_floats(M, c->repeats);
        int dev = 0, optin = 0;
        ACU(cudaGetDevice(&dev), "device");
        ACU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
            "shared memory limit");
        if (a->fused_shared > (size_t)optin)
            return oct_error_set(e, OCT_EUNSUPPORTED,
                                 "angio cuda: cuda.angio_path = fused needs %zu bytes of shared "
                                 "memory per block for M = %u, R = %u; the device has %d: use "
                                 "the bands path",
                                 a->fused_shared, M, c->repeats, optin);
        /* the device's limit, not this plan's need: another plan (another
         * engine, other sizes) may need more than this one */
        ACU(cudaFuncSetAttribute(k_ssada_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, optin),
            "fused kernel shared memory");
        float2 *tw = (float2 *)malloc(sizeof(float2) * M);
        if (!tw)
            return oct_error_set(e, OCT_ENOMEM, "angio cuda: out of memory");
        af_twiddles(tw, M);
        r = cudaMalloc(&a->tw, sizeof(float2) * M);
        if (r == cudaSuccess)
            r = cudaMemcpy(a->tw, tw, sizeof(float2) * M, cudaMemcpyHostToDevice);
        free(tw);
        ACU(r, "twiddles");
    }
    /* the full chunk's band plan now; the CFD plan (not needed when the
     * engine passes its transform) and the last chunk's plans on first use */
    cufftHandle h;
    return bands ? plan_get(a, a->bands, true, (int)((size_t)K * S), &h, e) : OCT_OK;
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
    err = create_inner(a, max_spectra ? max_spectra : 1, e);
    if (!err && c->align)
        err = oct_angio_align_cuda_create(&a->al, c, stream, a->chunk_groups, e);
    if (err) {
        oct_angio_cuda_destroy(a);
        return err;
    }
    *out = a;
    return OCT_OK;
}

/* K bands of the chunk's S spectra into a->band ([k][s][n], S per band). */
static oct_err bands(oct_angio_cuda *a, const float *x, size_t S, oct_error *e)
{
    const uint32_t M = a->c.samples;
    const int K = a->c.bands;
    if (a->legacy) {
        for (int k = 0; k < K; k++)
            k_band<<<blocks_for(S * M), 256, 0, a->stream>>>(
                x, a->gains + (size_t)k * M, a->band + (size_t)k * S * M, M, S, 1);
    } else if (((uintptr_t)x & 15u) == 0) { /* M >= 64: every spectrum stays aligned */
        const size_t nvec = S * M / 4;
        k_bands4<<<blocks_for(nvec), 256, 0, a->stream>>>(
            (const float4 *)x, (const float4 *)a->gains, (float4 *)a->band, nvec, M / 4 - 1, M / 4,
            S * M / 4, K);
    } else {
        k_bands1<<<blocks_for(S * M), 256, 0, a->stream>>>(x, a->gains, a->band, S * M, M - 1, M,
                                                            S * M, K);
    }
    ACU(cudaGetLastError(), "band kernel launch");
    return OCT_OK;
}

/* One chunk of G groups; A (magnitudes) or X (transforms) or neither (X
 * computed here from x). */
static oct_err run_chunk(oct_angio_cuda *a, const float *A, const cufftComplex *X, const float *x,
                         uint32_t G, bool full, float *const img[OCT_ANGIO_M_COUNT],
                         const oct_angio_dout *o, oct_error *e)
{
    const oct_angio_config *c = &a->c;
    const uint32_t N = c->ascans, R = c->repeats, D = a->D;
    const uint32_t W = c->metrics, F = (uint32_t)c->freq_cutoff;
    const size_t S = (size_t)G * R * N, rows = (size_t)G * N;
    const dim3 grid = pixel_grid(rows, D);
    cufftHandle h;
    if (c->align) { /* shifts; magnitudes and ssada bands resampled (angio_align_cuda.cu) */
        const float *Aal = NULL;
        oct_err err = oct_angio_align_cuda_run(a->al, A, x, G, (W & 0xfu) ? &Aal : NULL,
                                               img[OCT_ANGIO_M_SSADA], o->stride_g, o->stride_n,
                                               o->stride_d, e);
        if (err)
            return err;
        if (W & 0xfu) {
            k_metrics<float><<<grid, PIX_THREADS, 0, a->stream>>>(
                Aal, R, N, D, F, img[OCT_ANGIO_M_STRUCT], img[OCT_ANGIO_M_MEDIAN],
                img[OCT_ANGIO_M_SV], img[OCT_ANGIO_M_DECOR], o->stride_g, o->stride_n,
                o->stride_d);
            ACU(cudaGetLastError(), "metrics kernel launch");
        }
        return OCT_OK;
    }
    if (W & 0xfu) {
        if (!A && !X) { /* the CFD transform, out of place from x~ */
            oct_err err = plan_get(a, a->cfd, full, (int)S, &h, e);
            if (err)
                return err;
            AFFT(cufftExecR2C(h, (cufftReal *)x, a->spec), "R2C (cfd)");
            X = a->spec;
            if (a->legacy) {
                k_mag<<<blocks_for(S * D), 256, 0, a->stream>>>(a->spec, a->A, S, D, F);
                A = a->A;
                X = NULL;
            }
        }
        if (A)
            k_metrics<float><<<grid, PIX_THREADS, 0, a->stream>>>(
                A, R, N, D, F, img[OCT_ANGIO_M_STRUCT], img[OCT_ANGIO_M_MEDIAN],
                img[OCT_ANGIO_M_SV], img[OCT_ANGIO_M_DECOR], o->stride_g, o->stride_n,
                o->stride_d);
        else
            k_metrics<cufftComplex><<<grid, PIX_THREADS, 0, a->stream>>>(
                X, R, N, D, F, img[OCT_ANGIO_M_STRUCT], img[OCT_ANGIO_M_MEDIAN],
                img[OCT_ANGIO_M_SV], img[OCT_ANGIO_M_DECOR], o->stride_g, o->stride_n,
                o->stride_d);
        ACU(cudaGetLastError(), "metrics kernel launch");
    }
    if ((W & (1u << OCT_ANGIO_M_SSADA)) && a->fused) {
        uint32_t logM = 0;
        while ((1u << logM) < c->samples)
            logM++;
        k_ssada_fused<<<(unsigned)rows, af_threads(c->samples), a->fused_shared, a->stream>>>(
            x, a->gains, a->tw, c->samples, logM, R, N, c->bands, F, img[OCT_ANGIO_M_SSADA],
            o->stride_g, o->stride_n, o->stride_d);
        ACU(cudaGetLastError(), "fused ssada kernel launch");
    } else if (W & (1u << OCT_ANGIO_M_SSADA)) {
        const int K = c->bands;
        oct_err err = bands(a, x, S, e);
        if (!err)
            err = plan_get(a, a->bands, full, (int)((size_t)K * S), &h, e);
        if (err)
            return err;
        AFFT(cufftExecR2C(h, a->band, a->spec), "R2C (bands)");
        k_ssada<<<grid, PIX_THREADS, 0, a->stream>>>(a->spec, R, N, D, F, K, S * D,
                                                     img[OCT_ANGIO_M_SSADA], o->stride_g,
                                                     o->stride_n, o->stride_d);
        ACU(cudaGetLastError(), "ssada kernel launch");
    }
    return OCT_OK;
}

static oct_err run(oct_angio_cuda *a, const float *dA, const cufftComplex *dX, const float *dxt,
                   uint32_t groups, const oct_angio_dout *o, oct_error *e)
{
    const oct_angio_config *c = &a->c;
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = a->D;
    const uint32_t W = c->metrics;
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        if ((W & (1u << m)) && !o->img[m])
            return oct_error_set(e, OCT_EINVAL, "angio cuda: no output buffer for metric %s",
                                 oct_angio_metric_name(m));
    if (!dxt && ((!dA && !dX) || (W & (1u << OCT_ANGIO_M_SSADA))))
        return oct_error_set(e, OCT_EINVAL, "angio cuda: %s needs the pre-processed spectra",
                             dA || dX ? "ssada" : "computing the CFD magnitudes");
    if (a->legacy && dxt)
        dX = NULL; /* the round-5 path recomputed the CFD here */
    for (uint32_t g0 = 0; g0 < groups; g0 += a->chunk_groups) {
        const uint32_t G = groups - g0 < a->chunk_groups ? groups - g0 : a->chunk_groups;
        const size_t first = (size_t)g0 * R * N; /* spectrum */
        float *img[OCT_ANGIO_M_COUNT];
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            img[m] = (W & (1u << m)) ? o->img[m] + (size_t)g0 * o->stride_g : NULL;
        oct_err err = run_chunk(a, dA ? dA + first * D : NULL, dX ? dX + first * D : NULL,
                                dxt ? dxt + first * M : NULL, G, G == a->chunk_groups, img, o,
                                e);
        if (err)
            return err;
    }
    return OCT_OK;
}

extern "C" oct_err oct_angio_cuda_run(oct_angio_cuda *a, const float *dA, const float *dxt,
                                      uint32_t groups, const oct_angio_dout *o, oct_error *e)
{
    return run(a, dA, NULL, dxt, groups, o, e);
}

extern "C" oct_err oct_angio_cuda_run_x(oct_angio_cuda *a, const void *dX, const float *dxt,
                                        uint32_t groups, const oct_angio_dout *o, oct_error *e)
{
    return run(a, NULL, (const cufftComplex *)dX, dxt, groups, o, e);
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
    oct_err err = oct_angio_cuda_create(&b->a, c, b->st, S < 32768 ? S : 32768, e);
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
