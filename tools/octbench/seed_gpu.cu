/* seed_gpu.cu - the GPU seed baseline: the thesis' fine-grained GPU MSI
 * (Kapinchev 2016, Algorithms 5.8 and 5.15): one kernel per step, every
 * intermediate through device memory, results copied back synchronously.
 *
 * Per frame (all on the default stream):
 *   conversion kernel (u16 -> float), window kernel, cuFFT R2C of all
 *   spectra; then for each requested depth r: product kernel
 *   X * conj(Mf_r), batched C2R of all spectra, integration kernel (lag
 *   sum of |.| / M), and a synchronous cudaMemcpy of that depth's image.
 * The mask spectra Mf are computed once outside the timing (as the thesis
 * does).  Returns the median device ms per frame (CUDA events around the
 * whole frame, after warm-up), or < 0 when no device is usable.
 */
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>

extern "C" {
#include "bench.h"
}

#define SEED_CK(call)                                                                   \
    do {                                                                                \
        cudaError_t err_ = (call);                                                      \
        if (err_ != cudaSuccess) {                                                      \
            fprintf(stderr, "seed_gpu: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,     \
                    cudaGetErrorString(err_));                                          \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)
#define SEED_FFT(call)                                                                  \
    do {                                                                                \
        cufftResult r_ = (call);                                                        \
        if (r_ != CUFFT_SUCCESS) {                                                      \
            fprintf(stderr, "seed_gpu: %s:%d: %s: cuFFT error %d\n", __FILE__, __LINE__, \
                    #call, (int)r_);                                                    \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

__global__ static void seed_convert(const uint16_t *raw, float *x, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = (float)raw[i];
}

__global__ static void seed_window(float *x, const float *w, long long n, int M)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= w[i % M];
}

__global__ static void seed_product(const float2 *X, const float2 *Mr, float2 *Y, long long n, int K)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float2 a = X[i], b = Mr[i % K];
    Y[i] = make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y);
}

__global__ static void seed_integrate(const float *P, float *out, long long S, int M, int lo, int hi)
{
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= S) return;
    float a = 0.0f;
    for (int l = lo; l <= hi; l++) a += fabsf(P[j * M + ((l % M + M) % M)]);
    out[j] = a / (float)M;
}

static unsigned nblk(long long n) { return (unsigned)((n + 255) / 256); }

extern "C" double octbench_seed_gpu_msi(const octbench_opts *o, int samples, int ascans, int lines,
                                        int masks, int lag_lo, int lag_hi, const int *depths,
                                        int ndepths)
{
    double result = -1.0;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        cudaGetLastError();
        return -1.0;
    }
    const int M = samples, K = M / 2 + 1;
    const long long S = (long long)ascans * lines;
    if (M < 64 || (M & (M - 1)) || S < 1 || masks < 1 || ndepths < 1) return -1.0; /* depths NULL: 0..ndepths-1 */
    int warm = o && o->warmup > 0 ? o->warmup : 2;
    int reps = o && o->reps > 0 ? o->reps : 10;
    if (o && o->quick) reps = std::min(reps, 3);

    uint16_t *d_raw = NULL;
    float *d_x = NULL, *d_w = NULL, *d_m = NULL, *d_P = NULL, *d_out = NULL;
    float2 *d_X = NULL, *d_Mf = NULL, *d_Y = NULL;
    cufftHandle px = 0, pm = 0, pc = 0;
    bool hx = false, hm = false, hc = false;
    cudaEvent_t e0 = NULL, e1 = NULL;
    /* plain C arrays: octbench is linked by the C compiler (no libstdc++) */
    int ntimes = 0;
    float *h_out = (float *)malloc((size_t)S * ndepths * sizeof(float));
    double *times = (double *)malloc((size_t)(warm + reps) * sizeof(double));
    uint16_t *raw = (uint16_t *)malloc((size_t)S * M * sizeof(uint16_t));
    float *w = (float *)malloc((size_t)M * sizeof(float));
    float *mk = (float *)malloc((size_t)masks * M * sizeof(float));
    uint64_t st = 0x9e3779b97f4a7c15ull;
    if (!h_out || !times || !raw || !w || !mk) goto fail;


    /* the same kind of input as the engine workload: random u16 spectra */
    for (size_t i = 0; i < (size_t)S * M; i++) {
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        raw[i] = (uint16_t)(st >> 48);
    }
    for (int i = 0; i < M; i++) w[i] = 0.5f - 0.5f * cosf(2.0f * (float)M_PI * i / (M - 1));
    for (int r = 0; r < masks; r++)
        for (int i = 0; i < M; i++) mk[(size_t)r * M + i] = cosf(2.0f * (float)M_PI * (r + 1) * i / (2.0f * M));

    SEED_CK(cudaMalloc(&d_raw, (size_t)S * M * sizeof(uint16_t)));
    SEED_CK(cudaMalloc(&d_x, (size_t)S * M * sizeof(float)));
    SEED_CK(cudaMalloc(&d_P, (size_t)S * M * sizeof(float)));
    SEED_CK(cudaMalloc(&d_X, (size_t)S * K * sizeof(float2)));
    SEED_CK(cudaMalloc(&d_Y, (size_t)S * K * sizeof(float2)));
    SEED_CK(cudaMalloc(&d_w, (size_t)M * sizeof(float)));
    SEED_CK(cudaMalloc(&d_m, (size_t)masks * M * sizeof(float)));
    SEED_CK(cudaMalloc(&d_Mf, (size_t)masks * K * sizeof(float2)));
    SEED_CK(cudaMalloc(&d_out, (size_t)S * sizeof(float)));
    SEED_CK(cudaMemcpy(d_raw, raw, (size_t)S * M * sizeof(uint16_t), cudaMemcpyHostToDevice));
    SEED_CK(cudaMemcpy(d_w, w, (size_t)M * sizeof(float), cudaMemcpyHostToDevice));
    SEED_CK(cudaMemcpy(d_m, mk, (size_t)masks * M * sizeof(float), cudaMemcpyHostToDevice));
    SEED_FFT(cufftPlanMany(&px, 1, (int *)&M, NULL, 1, M, NULL, 1, K, CUFFT_R2C, (int)S));
    hx = true;
    SEED_FFT(cufftPlanMany(&pm, 1, (int *)&M, NULL, 1, M, NULL, 1, K, CUFFT_R2C, masks));
    hm = true;
    SEED_FFT(cufftPlanMany(&pc, 1, (int *)&M, NULL, 1, K, NULL, 1, M, CUFFT_C2R, (int)S));
    hc = true;

    SEED_FFT(cufftExecR2C(pm, d_m, (cufftComplex *)d_Mf));
    SEED_CK(cudaEventCreate(&e0));
    SEED_CK(cudaEventCreate(&e1));

    for (int it = 0; it < warm + reps; it++) {
        SEED_CK(cudaEventRecord(e0, 0));
        seed_convert<<<nblk(S * M), 256>>>(d_raw, d_x, S * M);
        SEED_CK(cudaGetLastError());
        seed_window<<<nblk(S * M), 256>>>(d_x, d_w, S * M, M);
        SEED_CK(cudaGetLastError());
        SEED_FFT(cufftExecR2C(px, d_x, (cufftComplex *)d_X));
        for (int q = 0; q < ndepths; q++) {
            int r = std::min(std::max(depths ? depths[q] : q, 0), masks - 1);
            seed_product<<<nblk(S * K), 256>>>(d_X, d_Mf + (size_t)r * K, d_Y, S * K, K);
            SEED_CK(cudaGetLastError());
            SEED_FFT(cufftExecC2R(pc, (cufftComplex *)d_Y, d_P));
            seed_integrate<<<nblk(S), 256>>>(d_P, d_out, S, M, lag_lo, lag_hi);
            SEED_CK(cudaGetLastError());
            SEED_CK(cudaMemcpy(h_out + (size_t)q * S, d_out, (size_t)S * sizeof(float),
                               cudaMemcpyDeviceToHost));
        }
        SEED_CK(cudaEventRecord(e1, 0));
        SEED_CK(cudaEventSynchronize(e1));
        float ms = 0;
        SEED_CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= warm) times[ntimes++] = ms;
    }
    std::sort(times, times + ntimes);
    result = times[ntimes / 2];
fail:
    if (hx) cufftDestroy(px);
    if (hm) cufftDestroy(pm);
    if (hc) cufftDestroy(pc);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(d_raw); cudaFree(d_x); cudaFree(d_P); cudaFree(d_X); cudaFree(d_Y);
    cudaFree(d_w); cudaFree(d_m); cudaFree(d_Mf); cudaFree(d_out);
    free(h_out); free(times); free(raw); free(w); free(mk);
    return result;
}
