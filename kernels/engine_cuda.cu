/* engine_cuda.cu - the CUDA backend of the OCT engine (SPEC section 2).
 *
 * Per frame (one compute stream, one copy stream):
 *   host frame -> pinned staging (double-buffered, CPU memcpy overlaps DMA)
 *   -> d_raw (copy stream) -> [frame_mean: column sums] -> convert kernel
 *   (shift, background, window: x~) -> cuFFT R2C (CFD and the MSI FFT path)
 *   -> CFD sink kernel (|X|, cut-off, gray, en-face scatter, confocal sum)
 *   -> MSI: per chunk of spectra either one SGEMM with the matrix of shifted
 *      filtered masks (output stays in L2) or per-mask products + batched
 *      C2R, then the MSI sink kernel (|P| + lag sum + gray + scatter + confocal)
 *   -> D2H of the products into pinned staging (copy stream) -> caller.
 * Plans, handles, matrices and every device buffer are made in create; a
 * control change only refills them (the lag window grows the GEMM matrices
 * past their capacity, the one case that reallocates).
 */
#include <cuda_runtime.h>
#include <cufft.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine_internal.h"
#include "cuda_engine.h"

/* ------------------------------------------------------------------ */
/* error checking: every call, and the last error after every launch   */

static const char *cufft_str(cufftResult r)
{
    switch (r) {
    case CUFFT_SUCCESS: return "success";
    case CUFFT_INVALID_PLAN: return "invalid plan";
    case CUFFT_ALLOC_FAILED: return "allocation failed";
    case CUFFT_INVALID_TYPE: return "invalid type";
    case CUFFT_INVALID_VALUE: return "invalid value";
    case CUFFT_INTERNAL_ERROR: return "internal error";
    case CUFFT_EXEC_FAILED: return "exec failed";
    case CUFFT_SETUP_FAILED: return "setup failed";
    case CUFFT_INVALID_SIZE: return "invalid size";
    default: return "cuFFT error";
    }
}

#define CU(call)                                                                   \
    do {                                                                           \
        cudaError_t cu_err_ = (call);                                              \
        if (cu_err_ != cudaSuccess)                                                \
            return oct_error_set(e, cu_err_ == cudaErrorMemoryAllocation ? OCT_ENOMEM \
                                                                        : OCT_EDEVICE, \
                                 "%s:%d: %s: %s", __FILE__, __LINE__, #call,       \
                                 cudaGetErrorString(cu_err_));                     \
    } while (0)
#define FFT(call)                                                                  \
    do {                                                                           \
        cufftResult ff_err_ = (call);                                              \
        if (ff_err_ != CUFFT_SUCCESS)                                              \
            return oct_error_set(e, OCT_EDEVICE, "%s:%d: %s: cuFFT %s (%d)",         \
                                 __FILE__, __LINE__, #call, cufft_str(ff_err_),    \
                                 (int)ff_err_);                                    \
    } while (0)
#define BLAS(call)                                                                 \
    do {                                                                           \
        cublasStatus_t bl_err_ = (call);                                           \
        if (bl_err_ != CUBLAS_STATUS_SUCCESS)                                      \
            return oct_error_set(e, OCT_EDEVICE, "%s:%d: %s: cuBLAS %s",            \
                                 __FILE__, __LINE__, #call,                        \
                                 cublasGetStatusString(bl_err_));                  \
    } while (0)
#define LAUNCHED(what) CU(cudaGetLastError())
#define TRY(call)                                                                  \
    do {                                                                           \
        oct_err try_err_ = (call);                                                 \
        if (try_err_ != OCT_OK) return try_err_;                                   \
    } while (0)

/* ------------------------------------------------------------------ */
/* device code                                                          */

struct Gray {
    float gsc, con, bri;
    int logscale;
};

/* SPEC 2.5; same float operations as the CPU mapping. */
__device__ __forceinline__ uint8_t gray_of(float v, const Gray &g)
{
    float t = g.gsc * v;
    if (g.logscale) t = 20.0f * log10f(fmaxf(t, 1e-12f));
    float y = floorf(g.bri + g.con * t + 0.5f);
    y = fminf(fmaxf(y, 0.0f), 255.0f); /* NaN -> 0 through fmaxf */
    return (uint8_t)y;
}

template <typename T> struct Raw;
template <> struct Raw<uint16_t> {
    typedef ushort4 V;
    static __device__ __forceinline__ float cv(uint16_t v, int sh) { return (float)(v >> sh); }
};
template <> struct Raw<int16_t> {
    typedef short4 V;
    static __device__ __forceinline__ float cv(int16_t v, int sh) { return (float)((int)v >> sh); }
};
template <> struct Raw<float> {
    typedef float4 V;
    static __device__ __forceinline__ float cv(float v, int) { return v; }
};

/* Column sums of the converted raw samples for the frame-mean background. */
template <typename T>
__global__ void colsum_kernel(const T *__restrict__ raw, long long S, int M, int sh,
                              double *__restrict__ sum)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= M) return;
    float acc = 0.0f;
    for (long long j = blockIdx.y; j < S; j += gridDim.y) acc += Raw<T>::cv(raw[j * M + n], sh);
    atomicAdd(&sum[n], (double)acc);
}

/* x~[j][n] = w[n] * (x[j][n] - b[n]); four samples per thread.
 * bgmode 0 none, 1 reference (bg), 2 frame mean (bgsum / S). */
template <typename T>
__global__ void convert_kernel(const T *__restrict__ raw, float *__restrict__ x, long long n4,
                               int M, int sh, const float *__restrict__ w,
                               const float *__restrict__ bg, const double *__restrict__ bgsum,
                               double invS, int bgmode, int *__restrict__ bad)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    typename Raw<T>::V v = reinterpret_cast<const typename Raw<T>::V *>(raw)[i];
    int n = (int)((i * 4) & (M - 1));
    float r[4] = {Raw<T>::cv(v.x, sh), Raw<T>::cv(v.y, sh), Raw<T>::cv(v.z, sh),
                  Raw<T>::cv(v.w, sh)};
    float4 o;
    float *op = &o.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float b = 0.0f;
        if (bgmode == 1) b = bg[n + k];
        else if (bgmode == 2) b = (float)(bgsum[n + k] * invS);
        if (!isfinite(r[k])) atomicMin(bad, (int)((i * 4) / M));
        op[k] = w[n + k] * (r[k] - b);
    }
    reinterpret_cast<float4 *>(x)[i] = o;
}

/* Shifted filtered masks, one column (= M contiguous floats) per (slot, lag):
 * B[(s*nl + li)*M + n] = m~_{r(s)}[(n - l) mod M], l = W1 + li. */
__global__ void build_matrix_kernel(const float *__restrict__ mf, int M, const int *__restrict__ ridx,
                                    int nslots, int nl, int W1, float *__restrict__ B)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)nslots * nl * M;
    if (i >= total) return;
    int n = (int)(i % M);
    long long c = i / M;
    int li = (int)(c % nl);
    int s = (int)(c / nl);
    int r = ridx ? ridx[s] : s;
    int l = W1 + li;
    B[i] = mf[(long long)r * M + ((n - l) & (M - 1))];
}

/* Y[(jl*nr + s)*K + k] = X[row(jl)*K + k] * conj(Mf[r(s)*K + k]) (FFT path). */
__global__ void mask_product_kernel(const float2 *__restrict__ X, int K, int nrows,
                                    const float2 *__restrict__ Mf, const int *__restrict__ ridx,
                                    int nr, float2 *__restrict__ Y)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)nrows * nr * K;
    if (i >= total) return;
    int k = (int)(i % K);
    long long p = i / K;
    int s = (int)(p % nr);
    long long jl = p / nr;
    int r = ridx ? ridx[s] : s;
    float2 a = X[jl * K + k], b = Mf[(long long)r * K + k];
    Y[i] = make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y);
}

/* Copies rows of length `len` elements (as T) of src into dst in list order. */
template <typename T>
__global__ void gather_rows_kernel(const T *__restrict__ src, const long long *__restrict__ rows,
                                   int nrows, int len, T *__restrict__ dst)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)nrows * len) return;
    int k = (int)(i % len);
    long long r = i / len;
    dst[i] = src[rows[r] * len + k];
}

/* Intensity sources: value of row jl (chunk-local), depth slot s. */
struct SrcCfd {
    const float2 *X;
    int K, M, F;
    __device__ __forceinline__ float operator()(long long jl, int d) const
    {
        if (d < F || d > M - F) return 0.0f;
        float2 z = X[jl * K + d];
        return sqrtf(z.x * z.x + z.y * z.y);
    }
};
struct SrcGemm {
    const float *C;
    int ncol, nl;
    __device__ __forceinline__ float operator()(long long jl, int s) const
    {
        const float *p = C + jl * ncol + (long long)s * nl;
        float a = 0.0f;
        for (int li = 0; li < nl; li++) a += fabsf(p[li]);
        return a;
    }
};
struct SrcFft {
    const float *P;
    int nr, M, W1, nl;
    float scale;
    __device__ __forceinline__ float operator()(long long jl, int s) const
    {
        const float *p = P + (jl * nr + s) * (long long)M;
        float a = 0.0f;
        for (int li = 0; li < nl; li++) a += fabsf(p[(W1 + li) & (M - 1)]);
        return a * scale;
    }
};

/* Where the intensities of one method go (NULL = product not wanted). */
struct Sink {
    int D, N, L;
    long long S;
    float *vol_f; uint8_t *vol_u; /* [S][D] */
    float *bs_f;  uint8_t *bs_u;  /* [D][N], L = 1 */
    float *xh_f;  uint8_t *xh_u;  int h; /* [D][N] */
    float *xv_f;  uint8_t *xv_u;  int v; /* [D][L] */
    float *en_f;  uint8_t *en_u;  const int *eidx; int Q; /* [Q][S] */
    float *cf_f;  uint8_t *cf_u;  /* [S] */
    Gray g[3];
};

enum { MODE_ALL = 0, MODE_SUB = 1, MODE_XS = 2 };

/* One warp per row.  MODE_ALL: rows are spectra j0.., the source has every
 * depth; MODE_SUB: spectra j0.., the source slots are the en-face depths;
 * MODE_XS: rows are gathered spectra (nh of line xsec_h, then those of
 * column xsec_v), the source has every depth. */
template <class Src>
__global__ void sink_kernel(Src src, Sink k, int mode, long long j0, long long nrows, int nh)
{
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= nrows) return;
    if (mode != MODE_SUB) {
        float *f1 = NULL, *f2 = NULL, *f3 = NULL, *f4 = NULL;
        uint8_t *u1 = NULL, *u2 = NULL, *u3 = NULL, *u4 = NULL;
        long long o1 = 0, o2 = 0, o3 = 0, o4 = 0; /* base offset, stride below */
        int st2 = 0, st3 = 0, st4 = 0;
        if (mode == MODE_XS) {
            long long gi = j0 + row; /* index in the gathered list */
            if (gi < nh) { f3 = k.xh_f; u3 = k.xh_u; o3 = gi; st3 = k.N; }
            else { f4 = k.xv_f; u4 = k.xv_u; o4 = gi - nh; st4 = k.L; }
        } else {
            long long j = j0 + row;
            int l = (int)(j / k.N), a = (int)(j % k.N);
            if (k.vol_f) { f1 = k.vol_f; u1 = k.vol_u; o1 = j * k.D; }
            if (k.bs_f) { f2 = k.bs_f; u2 = k.bs_u; o2 = j; st2 = k.N; }
            if (k.xh_f && l == k.h) { f3 = k.xh_f; u3 = k.xh_u; o3 = a; st3 = k.N; }
            if (k.xv_f && a == k.v) { f4 = k.xv_f; u4 = k.xv_u; o4 = l; st4 = k.L; }
        }
        if (f1 || f2 || f3 || f4) {
            const Gray g = k.g[0];
            for (int d = lane; d < k.D; d += 32) {
                float val = src(row, d);
                uint8_t gv = gray_of(val, g);
                if (f1) { f1[o1 + d] = val; u1[o1 + d] = gv; }
                if (f2) { long long o = o2 + (long long)d * st2; f2[o] = val; u2[o] = gv; }
                if (f3) { long long o = o3 + (long long)d * st3; f3[o] = val; u3[o] = gv; }
                if (f4) { long long o = o4 + (long long)d * st4; f4[o] = val; u4[o] = gv; }
            }
        }
    }
    if (mode != MODE_XS && (k.en_f || k.cf_f)) {
        long long j = j0 + row;
        float acc = 0.0f;
        for (int q = lane; q < k.Q; q += 32) {
            float val = src(row, mode == MODE_SUB ? q : k.eidx[q]);
            if (k.en_f) {
                long long o = (long long)q * k.S + j;
                k.en_f[o] = val;
                k.en_u[o] = gray_of(val, k.g[1]);
            }
            acc += val;
        }
        if (k.cf_f) {
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
            if (lane == 0) {
                k.cf_f[j] = acc;
                k.cf_u[j] = gray_of(acc, k.g[2]);
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* backend state                                                        */

namespace {

struct ProdBuf {
    float *f;    /* device f32 */
    uint8_t *u;  /* device u8 */
    size_t cap;  /* pixels */
    size_t off;  /* offset of this product in the pinned output staging (pixels) */
};

enum { EV_START, EV_CONV, EV_CFD, EV_MSI, EV_PROD, EV_COUNT };

struct CudaState {
    int device;
    uint64_t allocs;
    cudaStream_t s_comp, s_copy;
    cudaEvent_t ev[EV_COUNT];
    cudaEvent_t ev_h2d0, ev_h2d1, ev_d2h0, ev_d2h1;
    cudaEvent_t ev_stg[2];
    cufftHandle plan_x, plan_m, plan_c2r;
    bool have_plan_x, have_plan_m, have_plan_c2r;
    cublasHandle_t blas;
    bool have_blas;
    void *fft_work, *blas_work;
    size_t blas_work_bytes;

    /* geometry */
    int M, K, N, L, R;
    long long S;
    size_t frame_bytes;
    bool frame_on_device;

    /* input */
    void *d_raw;
    float *d_x;
    float *d_win, *d_bg;
    double *d_bgsum;
    int *d_bad;
    int *h_bad; /* pinned */
    float2 *d_X;

    /* MSI */
    float *d_mf;      /* R x M filtered masks */
    float2 *d_Mf;     /* R x K their spectra (FFT path) */
    float *d_Bfull, *d_Benf;
    size_t mat_cap;   /* floats of each matrix */
    int nl_cap;
    float *d_C;
    size_t C_cap;     /* floats */
    float2 *d_Y;
    float *d_P;
    long long CB;     /* C2R batch */
    float *d_xg;      /* gathered spectra (GEMM) */
    float2 *d_Xg;     /* gathered spectra (FFT) */
    long long *d_rows;
    long long *h_rows; /* pinned */
    int *d_eidx[OCT_METHOD_COUNT];
    size_t eidx_cap[OCT_METHOD_COUNT];
    bool matrices_ok; /* d_Bfull/d_Benf/d_Mf current */

    /* products */
    ProdBuf prod[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    uint8_t *h_out;   /* pinned staging for all products: f32 of each, then u8 of each */
    size_t h_out_bytes, out_pixels;

    /* staging of the frame */
    uint8_t *h_stage[2];
    size_t stage_bytes;
};

inline CudaState *ST(oct_engine *eng) { return (CudaState *)eng->be; }

template <typename T>
oct_err dmalloc(CudaState *s, T **p, size_t count, const char *what, oct_error *e)
{
    *p = NULL;
    if (count == 0) return OCT_OK;
    cudaError_t err = cudaMalloc((void **)p, count * sizeof(T));
    if (err != cudaSuccess) {
        *p = NULL;
        return oct_error_set(e, err == cudaErrorMemoryAllocation ? OCT_ENOMEM : OCT_EDEVICE,
                             "cuda: cannot allocate %zu bytes of device memory for %s: %s",
                             count * sizeof(T), what, cudaGetErrorString(err));
    }
    s->allocs++;
    return OCT_OK;
}

oct_err halloc(CudaState *s, void **p, size_t bytes, const char *what, oct_error *e)
{
    *p = NULL;
    if (bytes == 0) return OCT_OK;
    cudaError_t err = cudaHostAlloc(p, bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
        *p = NULL;
        return oct_error_set(e, OCT_ENOMEM, "cuda: cannot allocate %zu bytes of pinned host memory for %s: %s",
                             bytes, what, cudaGetErrorString(err));
    }
    s->allocs++;
    return OCT_OK;
}

inline unsigned blocks_for(long long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

bool msi_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) != 0; }
bool cfd_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_CFD)) != 0; }
int lag_count(const oct_engine *eng) { return eng->params.lag_hi - eng->params.lag_lo + 1; }

/* Pixels a product can take for this geometry, for any control values. */
size_t product_cap(const CudaState *s, int D, int kind)
{
    size_t S = (size_t)s->S;
    if (s->L == 1) return kind == OCT_KIND_BSCAN ? (size_t)D * s->N : 0;
    switch (kind) {
    case OCT_KIND_ENFACE: return (size_t)D * S;
    case OCT_KIND_CONFOCAL: return S;
    case OCT_KIND_XSEC_H: return (size_t)D * s->N;
    case OCT_KIND_XSEC_V: return (size_t)D * s->L;
    case OCT_KIND_VOLUME: return (size_t)D * S;
    default: return 0;
    }
}

/* GEMM matrices for up to nl lags: (re)allocates when nl exceeds the capacity. */
oct_err ensure_matrices(oct_engine *eng, int nl, oct_error *e)
{
    CudaState *s = ST(eng);
    if (nl <= s->nl_cap && s->d_Bfull) return OCT_OK;
    cudaFree(s->d_Bfull);
    cudaFree(s->d_Benf);
    cudaFree(s->d_C);
    s->d_Bfull = s->d_Benf = s->d_C = NULL;
    s->nl_cap = std::max(nl, std::min(s->M - 1, 41));
    s->mat_cap = (size_t)s->R * s->nl_cap * s->M;
    TRY(dmalloc(s, &s->d_Bfull, s->mat_cap, "the MSI mask matrix", e));
    TRY(dmalloc(s, &s->d_Benf, s->mat_cap, "the MSI en-face mask matrix", e));
    /* GEMM output chunk: about 3/4 of L2 (it is read back from L2 by the
     * sink kernel), but at least 32 rows of the widest matrix. */
    int l2 = 0;
    CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s->device));
    size_t cap = (size_t)l2 * 3 / 4 / sizeof(float);
    const char *env = getenv("OCT_CUDA_GEMM_CHUNK_MB"); /* tuning knob for octbench */
    if (env && *env) {
        double mb = atof(env);
        cap = mb <= 0 ? (size_t)s->S * s->R * s->nl_cap : (size_t)(mb * 1048576.0 / sizeof(float));
    }
    cap = std::max(cap, (size_t)s->R * s->nl_cap * 32);
    cap = std::min(cap, (size_t)s->S * s->R * s->nl_cap);
    s->C_cap = cap;
    TRY(dmalloc(s, &s->d_C, s->C_cap, "the MSI GEMM output", e));
    s->matrices_ok = false;
    return OCT_OK;
}

/* Uploads the derived arrays of engine.c and rebuilds what depends on them. */
oct_err refresh(oct_engine *eng, unsigned changed, oct_error *e)
{
    CudaState *s = ST(eng);
    if (changed & OCT_CHG_WINDOW)
        CU(cudaMemcpyAsync(s->d_win, eng->window, (size_t)s->M * sizeof(float),
                           cudaMemcpyHostToDevice, s->s_comp));
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        if (!(changed & OCT_CHG_ENFACE) || !s->d_eidx[m] || eng->enface_n[m] == 0) continue;
        if (eng->enface_n[m] > s->eidx_cap[m])
            return oct_error_set(e, OCT_EINVAL, "cuda: %u en-face indices exceed the %zu depths",
                                 eng->enface_n[m], s->eidx_cap[m]);
        CU(cudaMemcpyAsync(s->d_eidx[m], eng->enface_idx[m], eng->enface_n[m] * sizeof(int32_t),
                           cudaMemcpyHostToDevice, s->s_comp));
    }
    if (s->R > 0 && (changed & (OCT_CHG_WINDOW | OCT_CHG_CUTOFF)))
        CU(cudaMemcpyAsync(s->d_mf, eng->masks_filt, (size_t)s->R * s->M * sizeof(float),
                           cudaMemcpyHostToDevice, s->s_comp));
    if (s->R > 0 && (changed & (OCT_CHG_WINDOW | OCT_CHG_CUTOFF | OCT_CHG_LAGS | OCT_CHG_ENFACE)))
        s->matrices_ok = false;
    /* the host arrays may change after we return: finish the copies */
    CU(cudaStreamSynchronize(s->s_comp));
    return OCT_OK;
}

/* Mask spectra / matrices for the current values (lazily, on the compute stream). */
oct_err prepare_msi(oct_engine *eng, oct_error *e)
{
    CudaState *s = ST(eng);
    if (s->matrices_ok || s->R == 0) return OCT_OK;
    if (eng->msi_path == OCT_MSI_FFT) {
        FFT(cufftExecR2C(s->plan_m, s->d_mf, (cufftComplex *)s->d_Mf));
    } else {
        int nl = lag_count(eng);
        TRY(ensure_matrices(eng, nl, e));
        long long tot = (long long)s->R * nl * s->M;
        build_matrix_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_mf, s->M, NULL, s->R, nl, eng->params.lag_lo, s->d_Bfull);
        LAUNCHED("build_matrix");
        uint32_t Q = eng->enface_n[OCT_METHOD_MSI];
        if (Q > 0 && s->L > 1) {
            tot = (long long)Q * nl * s->M;
            build_matrix_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                s->d_mf, s->M, s->d_eidx[OCT_METHOD_MSI], (int)Q, nl, eng->params.lag_lo,
                s->d_Benf);
            LAUNCHED("build_matrix");
        }
    }
    s->matrices_ok = true;
    return OCT_OK;
}

void free_state(CudaState *s)
{
    if (!s) return;
    if (s->have_plan_x) cufftDestroy(s->plan_x);
    if (s->have_plan_m) cufftDestroy(s->plan_m);
    if (s->have_plan_c2r) cufftDestroy(s->plan_c2r);
    if (s->have_blas) cublasDestroy(s->blas);
    void *dev[] = {s->fft_work, s->blas_work, s->d_raw, s->d_x, s->d_win, s->d_bg, s->d_bgsum,
                   s->d_bad, s->d_X, s->d_mf, s->d_Mf, s->d_Bfull, s->d_Benf, s->d_C, s->d_Y,
                   s->d_P, s->d_xg, s->d_Xg, s->d_rows, s->d_eidx[0], s->d_eidx[1]};
    for (void *p : dev) cudaFree(p);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            cudaFree(s->prod[m][k].f);
            cudaFree(s->prod[m][k].u);
        }
    cudaFreeHost(s->h_out);
    cudaFreeHost(s->h_stage[0]);
    cudaFreeHost(s->h_stage[1]);
    cudaFreeHost(s->h_bad);
    cudaFreeHost(s->h_rows);
    for (int i = 0; i < EV_COUNT; i++)
        if (s->ev[i]) cudaEventDestroy(s->ev[i]);
    cudaEvent_t more[] = {s->ev_h2d0, s->ev_h2d1, s->ev_d2h0, s->ev_d2h1, s->ev_stg[0], s->ev_stg[1]};
    for (cudaEvent_t ev : more)
        if (ev) cudaEventDestroy(ev);
    if (s->s_comp) cudaStreamDestroy(s->s_comp);
    if (s->s_copy) cudaStreamDestroy(s->s_copy);
    free(s);
}

oct_err cuda_create_inner(oct_engine *eng, CudaState *s, oct_error *e)
{
    const oct_geometry *g = &eng->setup.geom;
    s->device = eng->setup.device;
    TRY(oct_cuda_probe(s->device, eng->device_name, sizeof eng->device_name, e));
    CU(cudaSetDevice(s->device));
    s->M = (int)g->samples;
    s->K = s->M / 2 + 1;
    s->N = (int)g->ascans;
    s->L = (int)g->lines;
    s->S = (long long)g->ascans * g->lines;
    s->R = (int)eng->setup.mask_count;
    s->frame_bytes = (size_t)oct_geometry_frame_bytes(g);
    if (s->S > INT_MAX / 32)
        return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: %lld spectra per frame exceed the CUDA backend's limit of %d",
                             s->S, INT_MAX / 32);

    CU(cudaStreamCreateWithFlags(&s->s_comp, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_copy, cudaStreamNonBlocking));
    for (int i = 0; i < EV_COUNT; i++) CU(cudaEventCreate(&s->ev[i]));
    CU(cudaEventCreate(&s->ev_h2d0));
    CU(cudaEventCreate(&s->ev_h2d1));
    CU(cudaEventCreate(&s->ev_d2h0));
    CU(cudaEventCreate(&s->ev_d2h1));
    CU(cudaEventCreateWithFlags(&s->ev_stg[0], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_stg[1], cudaEventDisableTiming));

    /* MSI path: cost model (flop-equivalents per spectrum and depth).  GEMM:
     * 2*M*nl flops at ~50 TFLOP/s; FFT: ~16*M bytes through memory at
     * ~3 TB/s (~17 flops per byte), i.e. GEMM wins below ~136 lags; the
     * matrices must also fit comfortably. */
    eng->msi_path = OCT_MSI_GEMM;
    if (s->R > 0) {
        int nl = lag_count(eng);
        size_t mat_bytes = (size_t)s->R * std::max(nl, std::min(s->M - 1, 41)) * s->M * 4;
        if (eng->setup.msi_path == OCT_MSI_FFT) eng->msi_path = OCT_MSI_FFT;
        else if (eng->setup.msi_path == OCT_MSI_AUTO && (nl > 128 || mat_bytes > (1ull << 31)))
            eng->msi_path = OCT_MSI_FFT;
    }

    /* input */
    TRY(dmalloc(s, (uint8_t **)&s->d_raw, s->frame_bytes, "the raw frame", e));
    TRY(dmalloc(s, &s->d_x, (size_t)s->S * s->M, "the windowed spectra", e));
    TRY(dmalloc(s, &s->d_win, (size_t)s->M, "the window", e));
    TRY(dmalloc(s, &s->d_bg, (size_t)s->M, "the background", e));
    TRY(dmalloc(s, &s->d_bgsum, (size_t)s->M, "the frame-mean sums", e));
    TRY(dmalloc(s, &s->d_bad, 1, "a flag", e));
    TRY(halloc(s, (void **)&s->h_bad, sizeof(int), "a flag", e));
    TRY(dmalloc(s, &s->d_X, (size_t)s->S * s->K, "the spectra's DFT", e));
    if (eng->reference)
        CU(cudaMemcpy(s->d_bg, eng->reference, (size_t)s->M * sizeof(float), cudaMemcpyHostToDevice));
    else
        CU(cudaMemset(s->d_bg, 0, (size_t)s->M * sizeof(float)));

    /* cuFFT: plans without their own work areas; one shared area */
    size_t ws = 0, wmax = 0;
    long long n = s->M;
    FFT(cufftCreate(&s->plan_x));
    s->have_plan_x = true;
    FFT(cufftSetAutoAllocation(s->plan_x, 0));
    FFT(cufftMakePlanMany64(s->plan_x, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->S, &ws));
    wmax = std::max(wmax, ws);
    FFT(cufftSetStream(s->plan_x, s->s_comp));

    /* products and en-face index lists */
    size_t out_pixels = 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        int D = m == OCT_METHOD_CFD ? s->K : s->R;
        if (D == 0) continue;
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            ProdBuf *pb = &s->prod[m][k];
            pb->cap = product_cap(s, D, k);
            pb->off = out_pixels;
            out_pixels += pb->cap;
            TRY(dmalloc(s, &pb->f, pb->cap, "a product image", e));
            TRY(dmalloc(s, &pb->u, pb->cap, "a product image", e));
        }
        s->eidx_cap[m] = (size_t)D;
        TRY(dmalloc(s, &s->d_eidx[m], (size_t)D, "the en-face indices", e));
    }
    s->out_pixels = out_pixels;
    s->h_out_bytes = out_pixels * (1 + sizeof(float));
    TRY(halloc(s, (void **)&s->h_out, s->h_out_bytes, "the product staging", e));
    s->stage_bytes = std::min(s->frame_bytes, (size_t)8 << 20);
    TRY(halloc(s, (void **)&s->h_stage[0], s->stage_bytes, "the frame staging", e));
    TRY(halloc(s, (void **)&s->h_stage[1], s->stage_bytes, "the frame staging", e));

    /* gathered cross-section spectra: a line (N) and a column (L) */
    size_t ng = (size_t)s->N + s->L;
    TRY(dmalloc(s, &s->d_rows, ng, "the cross-section rows", e));
    TRY(halloc(s, (void **)&s->h_rows, ng * sizeof(long long), "the cross-section rows", e));

    if (s->R > 0) {
        TRY(dmalloc(s, &s->d_mf, (size_t)s->R * s->M, "the filtered masks", e));
        if (eng->msi_path == OCT_MSI_FFT) {
            TRY(dmalloc(s, &s->d_Mf, (size_t)s->R * s->K, "the mask spectra", e));
            FFT(cufftCreate(&s->plan_m));
            s->have_plan_m = true;
            FFT(cufftSetAutoAllocation(s->plan_m, 0));
            FFT(cufftMakePlanMany64(s->plan_m, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->R, &ws));
            wmax = std::max(wmax, ws);
            FFT(cufftSetStream(s->plan_m, s->s_comp));
            /* C2R batch: ~64 MiB of output, at least one spectrum's R masks */
            s->CB = (64ll << 20) / (s->M * 4);
            const char *cb = getenv("OCT_CUDA_C2R_BATCH"); /* tuning / tests: smaller chunks */
            if (cb && atoll(cb) > 0) s->CB = atoll(cb);
            s->CB = std::max((long long)s->R, s->CB);
            TRY(dmalloc(s, &s->d_Y, (size_t)s->CB * s->K, "the MSI products", e));
            TRY(dmalloc(s, &s->d_P, (size_t)s->CB * s->M, "the MSI correlations", e));
            CU(cudaMemset(s->d_Y, 0, (size_t)s->CB * s->K * sizeof(float2)));
            FFT(cufftCreate(&s->plan_c2r));
            s->have_plan_c2r = true;
            FFT(cufftSetAutoAllocation(s->plan_c2r, 0));
            FFT(cufftMakePlanMany64(s->plan_c2r, 1, &n, NULL, 1, s->K, NULL, 1, n, CUFFT_C2R, s->CB, &ws));
            wmax = std::max(wmax, ws);
            FFT(cufftSetStream(s->plan_c2r, s->s_comp));
            TRY(dmalloc(s, &s->d_Xg, ng * s->K, "the cross-section spectra", e));
        } else {
            TRY(ensure_matrices(eng, lag_count(eng), e));
            TRY(dmalloc(s, &s->d_xg, ng * s->M, "the cross-section spectra", e));
            BLAS(cublasCreate(&s->blas));
            s->have_blas = true;
            BLAS(cublasSetStream(s->blas, s->s_comp));
            /* our own workspace, so cuBLAS never allocates behind our back */
            s->blas_work_bytes = 32u << 20;
            TRY(dmalloc(s, (uint8_t **)&s->blas_work, s->blas_work_bytes, "the cuBLAS workspace", e));
            BLAS(cublasSetWorkspace(s->blas, s->blas_work, s->blas_work_bytes));
            BLAS(cublasSetMathMode(s->blas, eng->setup.precision == OCT_PRECISION_TF32
                                                ? CUBLAS_TF32_TENSOR_OP_MATH
                                                : CUBLAS_PEDANTIC_MATH));
        }
    }
    TRY(dmalloc(s, (uint8_t **)&s->fft_work, std::max(wmax, (size_t)256), "the cuFFT work area", e));
    FFT(cufftSetWorkArea(s->plan_x, s->fft_work));
    if (s->have_plan_m) FFT(cufftSetWorkArea(s->plan_m, s->fft_work));
    if (s->have_plan_c2r) FFT(cufftSetWorkArea(s->plan_c2r, s->fft_work));

    TRY(refresh(eng, OCT_CHG_ALL, e));
    TRY(prepare_msi(eng, e));
    CU(cudaStreamSynchronize(s->s_comp));
    return OCT_OK;
}

/* ------------------------------------------------------------------ */
/* per frame                                                            */

Sink make_sink(oct_engine *eng, int m, bool want[OCT_KIND_COUNT])
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    Sink k;
    memset(&k, 0, sizeof k);
    k.D = (int)eng->depths[m];
    k.N = s->N;
    k.L = s->L;
    k.S = s->S;
    ProdBuf *pb = s->prod[m];
    if (want[OCT_KIND_VOLUME]) { k.vol_f = pb[OCT_KIND_VOLUME].f; k.vol_u = pb[OCT_KIND_VOLUME].u; }
    if (want[OCT_KIND_BSCAN]) { k.bs_f = pb[OCT_KIND_BSCAN].f; k.bs_u = pb[OCT_KIND_BSCAN].u; }
    if (want[OCT_KIND_XSEC_H]) { k.xh_f = pb[OCT_KIND_XSEC_H].f; k.xh_u = pb[OCT_KIND_XSEC_H].u; }
    if (want[OCT_KIND_XSEC_V]) { k.xv_f = pb[OCT_KIND_XSEC_V].f; k.xv_u = pb[OCT_KIND_XSEC_V].u; }
    k.h = p->xsec_h;
    k.v = p->xsec_v;
    k.Q = (int)eng->enface_n[m];
    k.eidx = s->d_eidx[m];
    if (want[OCT_KIND_ENFACE] && k.Q > 0) { k.en_f = pb[OCT_KIND_ENFACE].f; k.en_u = pb[OCT_KIND_ENFACE].u; }
    if (want[OCT_KIND_CONFOCAL]) { k.cf_f = pb[OCT_KIND_CONFOCAL].f; k.cf_u = pb[OCT_KIND_CONFOCAL].u; }
    for (int c = 0; c < OCT_CLASS_COUNT; c++) {
        k.g[c].gsc = p->gsc[c];
        k.g[c].con = p->contrast[c];
        k.g[c].bri = p->brightness[c];
        k.g[c].logscale = p->scale == OCT_SCALE_LOG;
    }
    return k;
}

template <class Src>
oct_err launch_sink(CudaState *s, const Src &src, const Sink &k, int mode, long long j0,
                    long long nrows, int nh, oct_error *e)
{
    if (nrows <= 0) return OCT_OK;
    sink_kernel<Src><<<blocks_for(nrows * 32, 256), 256, 0, s->s_comp>>>(src, k, mode, j0, nrows, nh);
    LAUNCHED("sink");
    return OCT_OK;
}

/* Gathers the spectra of the wanted cross-sections: returns nh (line) + nv (column). */
oct_err gather_xsec(oct_engine *eng, bool want_h, bool want_v, int *nh, int *nv, oct_error *e)
{
    CudaState *s = ST(eng);
    /* pinned list (made in create), so the copy is truly asynchronous; the
     * previous frame's copy finished at its final synchronisation */
    long long *rows = s->h_rows;
    int n = 0;
    if (want_h)
        for (int a = 0; a < s->N; a++) rows[n++] = (long long)eng->params.xsec_h * s->N + a;
    *nh = n;
    if (want_v)
        for (int l = 0; l < s->L; l++) rows[n++] = (long long)l * s->N + eng->params.xsec_v;
    *nv = n - *nh;
    if (n == 0) return OCT_OK;
    CU(cudaMemcpyAsync(s->d_rows, rows, (size_t)n * sizeof(long long), cudaMemcpyHostToDevice,
                       s->s_comp));
    long long tot;
    if (eng->msi_path == OCT_MSI_FFT) {
        tot = (long long)n * s->K;
        gather_rows_kernel<float2><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_X, s->d_rows, n, s->K, s->d_Xg);
    } else {
        tot = (long long)n * s->M;
        gather_rows_kernel<float><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_x, s->d_rows, n, s->M, s->d_xg);
    }
    LAUNCHED("gather");
    return OCT_OK;
}

/* One MSI pass over nrows rows (spectra j0.. or gathered) with nslots depth
 * slots (all R, or the en-face list). */
oct_err msi_pass(oct_engine *eng, const Sink &k, int mode, long long nrows, int nh, oct_error *e)
{
    CudaState *s = ST(eng);
    int nl = lag_count(eng);
    bool sub = mode == MODE_SUB;
    int nslots = sub ? k.Q : s->R;
    if (nrows <= 0 || nslots <= 0) return OCT_OK;
    bool xs = mode == MODE_XS;
    if (eng->msi_path == OCT_MSI_GEMM) {
        const float *A = sub ? s->d_Benf : s->d_Bfull;
        const float *X = xs ? s->d_xg : s->d_x;
        int ncol = nslots * nl;
        long long cs_max = std::max(1ll, (long long)(s->C_cap / ncol));
        long long nch = (nrows + cs_max - 1) / cs_max;
        long long cs = (nrows + nch - 1) / nch;
        const float one = 1.0f, zero = 0.0f;
        for (long long j0 = 0; j0 < nrows; j0 += cs) {
            long long nj = std::min(cs, nrows - j0);
            /* C (ncol x nj, column-major) = A^T (ncol x M) * X (M x nj) */
            BLAS(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, s->M, &one, A,
                             s->M, X + j0 * s->M, s->M, &zero, s->d_C, ncol));
            SrcGemm src = {s->d_C, ncol, nl};
            TRY(launch_sink(s, src, k, mode, j0, nj, nh, e));
        }
    } else {
        const float2 *X = xs ? s->d_Xg : s->d_X;
        long long cs = std::max(1ll, s->CB / nslots);
        for (long long j0 = 0; j0 < nrows; j0 += cs) {
            long long nj = std::min(cs, nrows - j0);
            long long tot = nj * nslots * s->K;
            mask_product_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                X + j0 * s->K, s->K, (int)nj, s->d_Mf, sub ? s->d_eidx[OCT_METHOD_MSI] : NULL,
                nslots, s->d_Y);
            LAUNCHED("mask_product");
            FFT(cufftExecC2R(s->plan_c2r, (cufftComplex *)s->d_Y, s->d_P));
            SrcFft src = {s->d_P, nslots, s->M, eng->params.lag_lo, nl, 1.0f / (float)s->M};
            TRY(launch_sink(s, src, k, mode, j0, nj, nh, e));
        }
    }
    return OCT_OK;
}

/* The device work of one frame already in d_raw (compute stream, events). */
oct_err run_device(oct_engine *eng, bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT], oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    const oct_geometry *g = &eng->setup.geom;
    int sh = (int)g->sample_shift;
    CU(cudaEventRecord(s->ev[EV_START], s->s_comp));

    /* conversion + background + window */
    CU(cudaMemsetAsync(s->d_bad, 0x7f, sizeof(int), s->s_comp));
    int bgmode = p->background == OCT_BG_REFERENCE ? 1 : p->background == OCT_BG_FRAME_MEAN ? 2 : 0;
    long long n4 = s->S * s->M / 4;
    double invS = 1.0 / (double)s->S;
    if (bgmode == 2) {
        CU(cudaMemsetAsync(s->d_bgsum, 0, (size_t)s->M * sizeof(double), s->s_comp));
        dim3 grid(blocks_for(s->M, 256), (unsigned)std::min(s->S, 512ll));
        switch (g->sample_type) {
        case OCT_SAMPLE_U16: colsum_kernel<uint16_t><<<grid, 256, 0, s->s_comp>>>((const uint16_t *)s->d_raw, s->S, s->M, sh, s->d_bgsum); break;
        case OCT_SAMPLE_I16: colsum_kernel<int16_t><<<grid, 256, 0, s->s_comp>>>((const int16_t *)s->d_raw, s->S, s->M, sh, s->d_bgsum); break;
        default: colsum_kernel<float><<<grid, 256, 0, s->s_comp>>>((const float *)s->d_raw, s->S, s->M, 0, s->d_bgsum); break;
        }
        LAUNCHED("colsum");
    }
    switch (g->sample_type) {
    case OCT_SAMPLE_U16:
        convert_kernel<uint16_t><<<blocks_for(n4, 256), 256, 0, s->s_comp>>>(
            (const uint16_t *)s->d_raw, s->d_x, n4, s->M, sh, s->d_win, s->d_bg, s->d_bgsum, invS, bgmode, s->d_bad);
        break;
    case OCT_SAMPLE_I16:
        convert_kernel<int16_t><<<blocks_for(n4, 256), 256, 0, s->s_comp>>>(
            (const int16_t *)s->d_raw, s->d_x, n4, s->M, sh, s->d_win, s->d_bg, s->d_bgsum, invS, bgmode, s->d_bad);
        break;
    default:
        convert_kernel<float><<<blocks_for(n4, 256), 256, 0, s->s_comp>>>(
            (const float *)s->d_raw, s->d_x, n4, s->M, 0, s->d_win, s->d_bg, s->d_bgsum, invS, bgmode, s->d_bad);
        break;
    }
    LAUNCHED("convert");
    CU(cudaMemcpyAsync(s->h_bad, s->d_bad, sizeof(int), cudaMemcpyDeviceToHost, s->s_comp));
    CU(cudaEventRecord(s->ev[EV_CONV], s->s_comp));

    /* the spectra's DFT: CFD, and the MSI FFT path */
    bool cfd = cfd_on(eng), msi = msi_on(eng) && s->R > 0;
    if (cfd || (msi && eng->msi_path == OCT_MSI_FFT))
        FFT(cufftExecR2C(s->plan_x, s->d_x, (cufftComplex *)s->d_X));
    if (cfd) {
        Sink k = make_sink(eng, OCT_METHOD_CFD, want[OCT_METHOD_CFD]);
        SrcCfd src = {s->d_X, s->K, s->M, p->freq_cutoff};
        TRY(launch_sink(s, src, k, MODE_ALL, 0, s->S, 0, e));
    }
    CU(cudaEventRecord(s->ev[EV_CFD], s->s_comp));

    if (msi) {
        TRY(prepare_msi(eng, e));
        bool *w = want[OCT_METHOD_MSI];
        Sink k = make_sink(eng, OCT_METHOD_MSI, w);
        bool full = s->L == 1 ? w[OCT_KIND_BSCAN] : w[OCT_KIND_VOLUME];
        if (full) {
            /* every depth of every spectrum: the en-face, confocal and
             * cross-section products come from the same pass */
            TRY(msi_pass(eng, k, MODE_ALL, s->S, 0, e));
        } else if (s->L > 1) {
            if (k.en_f || k.cf_f) {
                Sink ke = k;
                ke.xh_f = ke.xv_f = NULL;
                TRY(msi_pass(eng, ke, MODE_SUB, s->S, 0, e));
            }
            if (k.xh_f || k.xv_f) {
                int nh = 0, nv = 0;
                TRY(gather_xsec(eng, k.xh_f != NULL, k.xv_f != NULL, &nh, &nv, e));
                TRY(msi_pass(eng, k, MODE_XS, nh + nv, nh, e));
            }
        }
    }
    CU(cudaEventRecord(s->ev[EV_MSI], s->s_comp));
    CU(cudaEventRecord(s->ev[EV_PROD], s->s_comp));
    return OCT_OK;
}

float ev_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) return 0.0f;
    return ms;
}

void device_times(CudaState *s, oct_stage_times *t)
{
    t->convert_ms = ev_ms(s->ev[EV_START], s->ev[EV_CONV]);
    t->cfd_ms = ev_ms(s->ev[EV_CONV], s->ev[EV_CFD]);
    t->msi_ms = ev_ms(s->ev[EV_CFD], s->ev[EV_MSI]);
    t->products_ms = ev_ms(s->ev[EV_MSI], s->ev[EV_PROD]);
    t->device_ms = ev_ms(s->ev[EV_START], s->ev[EV_PROD]);
}

void wanted(oct_engine *eng, bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT])
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            want[m][k] = (eng->params.methods & OCT_METHOD_BIT(m)) && eng->depths[m] > 0 &&
                         oct_product_wanted(eng, m, k);
}

oct_err check_bad(oct_engine *eng, oct_error *e)
{
    CudaState *s = ST(eng);
    int bad = *s->h_bad;
    if (bad >= 0 && bad < s->S)
        return oct_error_set(e, OCT_EINVAL,
                             "frame spectrum %d (line %d, A-scan %d) has a non-finite sample",
                             bad, bad / s->N, bad % s->N);
    return OCT_OK;
}

/* ------------------------------------------------------------------ */
/* backend ops                                                          */

oct_err cuda_create(oct_engine *eng, oct_error *e)
{
    CudaState *s = (CudaState *)calloc(1, sizeof *s);
    if (!s) return oct_error_set(e, OCT_ENOMEM, "cuda: out of memory for the backend state");
    eng->be = s;
    oct_err err = cuda_create_inner(eng, s, e);
    if (err != OCT_OK) {
        free_state(s);
        eng->be = NULL;
    }
    return err;
}

void cuda_destroy(oct_engine *eng)
{
    CudaState *s = ST(eng);
    if (!s) return;
    cudaSetDevice(s->device);
    cudaStreamSynchronize(s->s_comp);
    cudaStreamSynchronize(s->s_copy);
    free_state(s);
    eng->be = NULL;
}

oct_err cuda_update(oct_engine *eng, unsigned changed, oct_error *e)
{
    CudaState *s = ST(eng);
    CU(cudaSetDevice(s->device));
    TRY(refresh(eng, changed, e));
    if ((changed & OCT_CHG_LAGS) && eng->msi_path == OCT_MSI_GEMM && s->R > 0)
        TRY(ensure_matrices(eng, lag_count(eng), e));
    return OCT_OK;
}

oct_err cuda_process(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    CudaState *s = ST(eng);
    double t0 = oct_now_ms();
    CU(cudaSetDevice(s->device));
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    wanted(eng, want);

    /* frame -> pinned staging -> device: the CPU copy of chunk i+1 overlaps
     * the DMA of chunk i */
    s->frame_on_device = false;
    CU(cudaEventRecord(s->ev_h2d0, s->s_copy));
    const uint8_t *src = (const uint8_t *)frame;
    for (size_t off = 0, i = 0; off < s->frame_bytes; off += s->stage_bytes, i++) {
        size_t nb = std::min(s->stage_bytes, s->frame_bytes - off);
        int b = (int)(i & 1);
        if (i >= 2) CU(cudaEventSynchronize(s->ev_stg[b]));
        memcpy(s->h_stage[b], src + off, nb);
        CU(cudaMemcpyAsync((uint8_t *)s->d_raw + off, s->h_stage[b], nb, cudaMemcpyHostToDevice, s->s_copy));
        CU(cudaEventRecord(s->ev_stg[b], s->s_copy));
    }
    CU(cudaEventRecord(s->ev_h2d1, s->s_copy));
    CU(cudaStreamWaitEvent(s->s_comp, s->ev_h2d1, 0));
    s->frame_on_device = true;

    TRY(run_device(eng, want, e));

    /* products -> pinned staging (copy stream, after the compute) */
    bool f32 = (eng->params.products & OCT_PRODUCT_F32) != 0;
    float *h_f32 = (float *)s->h_out;
    uint8_t *h_u8 = s->h_out + s->out_pixels * sizeof(float);
    CU(cudaStreamWaitEvent(s->s_copy, s->ev[EV_PROD], 0));
    CU(cudaEventRecord(s->ev_d2h0, s->s_copy));
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            if (!want[m][k]) {
                img->present = false;
                continue;
            }
            TRY(oct_image_prepare(eng, m, k, img, e));
            ProdBuf *pb = &s->prod[m][k];
            if (img->count > pb->cap)
                return oct_error_set(e, OCT_ESIZE, "cuda: product %s/%s has %zu pixels, more than the %zu planned",
                                     oct_kind_name(k), oct_method_name(m), img->count, pb->cap);
            if (img->count == 0) continue;
            CU(cudaMemcpyAsync(h_u8 + pb->off, pb->u, img->count, cudaMemcpyDeviceToHost, s->s_copy));
            if (f32)
                CU(cudaMemcpyAsync(h_f32 + pb->off, pb->f,
                                   img->count * sizeof(float), cudaMemcpyDeviceToHost, s->s_copy));
        }
    CU(cudaEventRecord(s->ev_d2h1, s->s_copy));
    CU(cudaEventSynchronize(s->ev_d2h1));
    TRY(check_bad(eng, e));
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            if (!want[m][k] || img->count == 0) continue;
            ProdBuf *pb = &s->prod[m][k];
            memcpy(img->u8, h_u8 + pb->off, img->count);
            if (f32 && img->f32) memcpy(img->f32, h_f32 + pb->off, img->count * sizeof(float));
        }

    oct_stage_times *t = &eng->times;
    memset(t, 0, sizeof *t);
    t->h2d_ms = ev_ms(s->ev_h2d0, s->ev_h2d1);
    device_times(s, t);
    t->d2h_ms = ev_ms(s->ev_d2h0, s->ev_d2h1);
    t->total_ms = oct_now_ms() - t0;
    return OCT_OK;
}

} /* namespace */

/* ------------------------------------------------------------------ */
/* public                                                               */

extern "C" {

const oct_backend_ops oct_cuda_backend = {"cuda", cuda_create, cuda_destroy, cuda_update, cuda_process};

bool oct_cuda_built(void) { return true; }

oct_err oct_cuda_probe(int device, char *name, size_t name_len, oct_error *e)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error state */
        return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: no usable device: %s (%s)",
                             cudaGetErrorString(err), cudaGetErrorName(err));
    }
    if (count == 0) return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: no device found");
    if (device < 0 || device >= count)
        return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: device %d does not exist (%d device%s found)",
                             device, count, count == 1 ? "" : "s");
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: device %d: %s", device, cudaGetErrorString(err));
    if (prop.major < 9)
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "CUDA: device %d (%s) has compute capability %d.%d; this build needs 9.0 or newer",
                             device, prop.name, prop.major, prop.minor);
    if (name && name_len > 0) snprintf(name, name_len, "%s", prop.name);
    return OCT_OK;
}

uint64_t oct_cuda_alloc_count(const oct_engine *eng)
{
    if (!eng || eng->ops != &oct_cuda_backend || !eng->be) return 0;
    return ((const CudaState *)eng->be)->allocs;
}

oct_err oct_cuda_time_device(oct_engine *eng, int reps, double *median_ms, oct_stage_times *t,
                             oct_error *e)
{
    if (!eng || eng->ops != &oct_cuda_backend || !eng->be)
        return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!s->frame_on_device)
        return oct_error_set(e, OCT_ESTATE, "cuda: no frame on the device yet: process one first");
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    wanted(eng, want);
    /* plain C arrays: the library is linked by the C compiler (no libstdc++) */
    double *v = (double *)malloc((size_t)reps * 2 * sizeof(double));
    oct_stage_times *ts = (oct_stage_times *)malloc((size_t)reps * sizeof(oct_stage_times));
    if (!v || !ts) {
        free(v);
        free(ts);
        return oct_error_set(e, OCT_ENOMEM, "cuda: out of memory for %d timings", reps);
    }
    oct_err err = OCT_OK;
    for (int r = 0; r < reps && err == OCT_OK; r++) {
        err = run_device(eng, want, e);
        if (err == OCT_OK && cudaEventSynchronize(s->ev[EV_PROD]) != cudaSuccess)
            err = oct_error_set(e, OCT_EDEVICE, "cuda: %s", cudaGetErrorString(cudaGetLastError()));
        memset(&ts[r], 0, sizeof ts[r]);
        device_times(s, &ts[r]);
        ts[r].total_ms = ts[r].device_ms;
        v[r] = v[reps + r] = ts[r].device_ms;
    }
    if (err == OCT_OK) {
        std::sort(v + reps, v + 2 * reps);
        double med = v[reps + reps / 2];
        if (median_ms) *median_ms = med;
        if (t)
            for (int i = 0; i < reps; i++)
                if (v[i] == med) { *t = ts[i]; break; }
        err = check_bad(eng, e);
    }
    free(v);
    free(ts);
    return err;
}

} /* extern "C" */
