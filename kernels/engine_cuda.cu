/* engine_cuda.cu - the CUDA backend of the OCT engine (SPEC section 2).
 *
 * Per frame, pipelined over up to OCT_ENGINE_DEPTH_MAX frames in flight
 * (each in-flight frame owns a slot: device input buffer, device product
 * buffers, pinned output staging, events):
 *   copy stream:    host frame -> d_raw[slot] (directly from registered or
 *                   pinned memory, else through double-buffered pinned
 *                   staging filled by the CPU inside submit)
 *   compute stream: [frame_mean: column sums] -> convert kernel (shift,
 *                   background, window: x~, and for the split-TF32 MSI
 *                   product its [hi, hi, lo] TF32 parts)
 *                   -> MSI: per chunk of spectra one GEMM with the matrix of
 *                   shifted filtered masks (output stays in L2) or per-mask
 *                   products + batched C2R, then the MSI sink kernel
 *                   (|P| + lag sum + gray + en-face scatter + confocal)
 *   CFD stream:     cuFFT R2C + CFD sink (|X|, cut-off, gray, scatter,
 *                   confocal), concurrent with the (compute-bound) MSI GEMM
 *   output stream:  D2H of the products into the caller's pinned products
 *                   (oct_engine_products_create) or the slot's pinned staging.
 * Compute of successive frames is serialised on the compute stream (the
 * work buffers x~, X, C are shared); copies of frame n+1 and n-1 overlap it.
 * Plans, handles, matrices and every device buffer are made in create; a
 * control change only refills them (the lag window grows the GEMM matrices
 * past their capacity, the one case that reallocates).
 *
 * fp32 MSI GEMM: by default "3xTF32": a = a_hi + a_lo with a_hi = tf32(a),
 * a_lo = tf32(a - a_hi); one tensor-core GEMM with K = 3M computes
 * [A_hi | A_lo | A_hi] . [X_hi ; X_hi ; X_lo] = A.X up to ~2^-22 relative
 * (the dropped a_lo.x_lo term and the rounding of the lo parts), i.e. fp32
 * class (relative L2 ~9e-6 vs float64, SGEMM ~1e-7), at tensor-core speed.
 * OCT_SETUP_PLAIN_SGEMM / OCT_CUDA_SGEMM=1 use cublasSgemm; precision tf32
 * is one plain TF32 GEMM (K = M).
 */
#include <ctype.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <omp.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

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

/* Round to TF32 (10 explicit mantissa bits), to nearest, ties away: the
 * result is exactly representable, so every tensor-core path uses it as is. */
__device__ __forceinline__ float tf32_round(float x)
{
    uint32_t u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
}

/* x'[j][n] = x[j][n] - b[n], x~[j][n] = w[n] * x'[j][n]; four samples per
 * thread.  b: background vector (NULL = none).  Outputs (any may be NULL):
 * x (S x M: x~), x3 (S x 3M: per spectrum [hi | hi | lo] TF32 parts of x~
 * for the split-TF32 MSI GEMM), xp (S x M: x', input of the k-linearisation
 * and of the plain CMS GEMM), xp3 (S x 3M: TF32 parts of x' for the split CMS GEMM). */
__device__ __forceinline__ void store_split(float *dst, long long j, int n, int M, float4 o)
{
    float4 hi, lo;
    hi.x = tf32_round(o.x); lo.x = tf32_round(o.x - hi.x);
    hi.y = tf32_round(o.y); lo.y = tf32_round(o.y - hi.y);
    hi.z = tf32_round(o.z); lo.z = tf32_round(o.z - hi.z);
    hi.w = tf32_round(o.w); lo.w = tf32_round(o.w - hi.w);
    float4 *p = reinterpret_cast<float4 *>(dst + j * 3 * M + n);
    int M4 = M / 4;
    p[0] = hi;
    p[M4] = hi;
    p[2 * M4] = lo;
}

template <typename T>
__global__ void convert_kernel(const T *__restrict__ raw, float *__restrict__ x,
                               float *__restrict__ x3, float *__restrict__ xp,
                               float *__restrict__ xp3, long long n4, int M, int sh,
                               const float *__restrict__ w, const float *__restrict__ bg,
                               int *__restrict__ bad, long long jbase)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    typename Raw<T>::V v = reinterpret_cast<const typename Raw<T>::V *>(raw)[i];
    int n = (int)((i * 4) & (M - 1));
    long long j = (i * 4) / M;
    float r[4] = {Raw<T>::cv(v.x, sh), Raw<T>::cv(v.y, sh), Raw<T>::cv(v.z, sh),
                  Raw<T>::cv(v.w, sh)};
    float4 o, d;
    float *op = &o.x, *dp = &d.x;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float b = bg ? bg[n + k] : 0.0f;
        if (!isfinite(r[k])) atomicMin(bad, (int)(jbase + j));
        dp[k] = r[k] - b;
        op[k] = w[n + k] * dp[k];
    }
    if (x) reinterpret_cast<float4 *>(x)[i] = o;
    if (x3) store_split(x3, j, n, M, o);
    if (xp) reinterpret_cast<float4 *>(xp)[i] = d;
    if (xp3) store_split(xp3, j, n, M, d);
}

/* Frame-mean background: b[n] = sum[n] / S (as float, the CPU's order of operations). */
__global__ void bg_mean_kernel(const double *__restrict__ sum, double invS, int M, float *__restrict__ b)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < M) b[n] = (float)(sum[n] * invS);
}

/* Rolling background, step 1 (before the conversion): b = mean of the kept
 * history rows and this frame's mean.  state[0] = rows filled f (<= K),
 * state[1] = row w the next frame writes (when f = K it holds the oldest
 * frame, which drops out now).  Writes state[2..4] = f', w', w for the
 * commit step; nobody reads those here. */
__global__ void roll_mean_kernel(const double *__restrict__ sum, double invS,
                                 const double *__restrict__ ring, int M, int K,
                                 int *__restrict__ state, float *__restrict__ b)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int f = state[0], w = state[1];
    if (n < M) {
        double acc = sum[n] * invS;
        for (int i = 0; i < f; i++)
            if (!(f == K && i == w)) acc += ring[(long long)i * M + n];
        int kept = f < K ? f + 1 : K;
        b[n] = (float)(acc / kept);
    }
    if (n == 0) {
        state[2] = f < K ? f + 1 : K;
        state[3] = (w + 1) % K;
        state[4] = w;
    }
}

/* Rolling background, step 2 (after the conversion, which flags non-finite
 * samples): a rejected frame does not enter the history. */
__global__ void roll_commit_kernel(const double *__restrict__ sum, double invS, double *__restrict__ ring,
                                   int M, int *__restrict__ state, const int *__restrict__ bad,
                                   long long S)
{
    if (*bad < S) return;
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int row = state[4];
    if (n < M) ring[(long long)row * M + n] = sum[n] * invS;
    if (n == 0) {
        state[0] = state[2];
        state[1] = state[3];
    }
}

/* Fixed-pattern noise background (minimum-variance mean line): per sample
 * n, the mean of the segment of G spectra whose sum of squared deviations at
 * n is smallest (ties: lowest segment).  Block (32, FPN_WARPS): lanes are 32
 * consecutive samples (coalesced), warps take segments in turn; one-pass
 * sums in double, shifted by the segment's first value for stability, and
 * compared as G*ssd = G*sum(d^2) - sum(d)^2 (exact for integer samples
 * while below 2^53). */
enum { FPN_WARPS = 16 };
template <typename T>
__global__ void fpn_kernel(const T *__restrict__ raw, long long S, int M, int sh, int G,
                           float *__restrict__ b)
{
    __shared__ double s_key[FPN_WARPS][32], s_mean[FPN_WARPS][32];
    __shared__ long long s_seg[FPN_WARPS][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int n = blockIdx.x * 32 + tx;
    long long nseg = S < G ? 1 : S / G, len = S < G ? S : G;
    double best = INFINITY, bmean = 0.0;
    long long bseg = LLONG_MAX;
    if (n < M) {
        for (long long sg = ty; sg < nseg; sg += FPN_WARPS) {
            const T *p = raw + sg * len * M + n;
            double x0 = Raw<T>::cv(p[0], sh), s1 = 0.0, s2 = 0.0;
            for (long long i = 1; i < len; i++) {
                double d = (double)Raw<T>::cv(p[i * M], sh) - x0;
                s1 += d;
                s2 += d * d;
            }
            double key = (double)len * s2 - s1 * s1;
            if (key < best) { /* segments ascend per thread: strict < keeps the lowest */
                best = key;
                bmean = x0 + s1 / (double)len;
                bseg = sg;
            }
        }
    }
    s_key[ty][tx] = best;
    s_mean[ty][tx] = bmean;
    s_seg[ty][tx] = bseg;
    __syncthreads();
    if (ty == 0 && n < M) {
        for (int y = 1; y < FPN_WARPS; y++)
            if (s_key[y][tx] < best || (s_key[y][tx] == best && s_seg[y][tx] < bseg)) {
                best = s_key[y][tx];
                bmean = s_mean[y][tx];
                bseg = s_seg[y][tx];
            }
        b[n] = (float)bmean;
    }
}

/* k-linearisation of CFD: xk[j][n] = w[n] * sum_t wt[t][n] * xp[j][idx[t][n]]
 * (tables tap-major: coalesced).  One block per spectrum (grid-stride), the
 * spectrum staged in shared memory (M <= 8192 floats = 32 KiB); the tap
 * tables are shared by all spectra (L1/L2). */
__global__ void klin_kernel(const float *__restrict__ xp, const int *__restrict__ idx,
                            const float *__restrict__ wt, int T, const float *__restrict__ win,
                            int M, long long S, float *__restrict__ xk)
{
    extern __shared__ float row[];
    for (long long j = blockIdx.x; j < S; j += gridDim.x) {
        const float *src = xp + j * M;
        for (int n = threadIdx.x; n < M; n += blockDim.x) row[n] = src[n];
        __syncthreads();
        for (int n = threadIdx.x; n < M; n += blockDim.x) {
            float acc = 0.0f;
            for (int t = 0; t < T; t++) acc += wt[(long long)t * M + n] * row[idx[(long long)t * M + n]];
            xk[j * M + n] = win[n] * acc;
        }
        __syncthreads();
    }
}

/* Dispersion, step 1: Z[r][k] = X[r][k] for F <= k <= M/2, else 0 (k < M):
 * the one-sided spectrum of the analytic signal. */
__global__ void disp_pad_kernel(const float2 *__restrict__ X, int K, int M, int F, long long nrows,
                                float2 *__restrict__ Z)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows * M) return;
    int k = (int)(i % M);
    long long r = i / M;
    Z[i] = (k >= F && k < K) ? X[r * K + k] : make_float2(0.0f, 0.0f);
}

/* Dispersion, step 2: z[n] *= e^(-i theta[n]) / M (the IDFT's 1/M folded in). */
__global__ void disp_phase_kernel(float2 *__restrict__ Z, const float2 *__restrict__ ph, int M,
                                  long long nrows, float invM)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows * M) return;
    float2 z = Z[i], c = ph[i % M];
    Z[i] = make_float2((z.x * c.x - z.y * c.y) * invM, (z.x * c.y + z.y * c.x) * invM);
}

/* CMS matrix: one column (kM floats) per (depth slot, Re/Im):
 * B[(s*2 + p)*kM + n] = q[(2 r(s) + p)*M + n]; with split the column is
 * [hi | lo | hi] as for the MSI matrix. */
__global__ void build_cms_kernel(const float *__restrict__ q, int M, const int *__restrict__ ridx,
                                 int nslots, int split, float *__restrict__ B)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int kM = split ? 3 * M : M;
    long long total = (long long)nslots * 2 * kM;
    if (i >= total) return;
    int nn = (int)(i % kM);
    int part = nn / M, n = nn - part * M;
    long long c = i / kM;
    int p = (int)(c & 1);
    int s = (int)(c >> 1);
    int r = ridx ? ridx[s] : s;
    float v = q[(2ll * r + p) * M + n];
    if (split) {
        float hi = tf32_round(v);
        v = part == 1 ? tf32_round(v - hi) : hi;
    }
    B[i] = v;
}

/* Shifted filtered masks, one column (= kM contiguous floats) per (slot, lag):
 * B[(s*nl + li)*kM + n] = m~_{r(s)}[(n - l) mod M], l = W1 + li (kM = M); or
 * with split (kM = 3M) the column [hi | lo | hi] of those values. */
__global__ void build_matrix_kernel(const float *__restrict__ mf, int M, const int *__restrict__ ridx,
                                    int nslots, int nl, int W1, int split, float *__restrict__ B)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int kM = split ? 3 * M : M;
    long long total = (long long)nslots * nl * kM;
    if (i >= total) return;
    int nn = (int)(i % kM);
    int part = nn / M, n = nn - part * M;
    long long c = i / kM;
    int li = (int)(c % nl);
    int s = (int)(c / nl);
    int r = ridx ? ridx[s] : s;
    int l = W1 + li;
    float v = mf[(long long)r * M + ((n - l) & (M - 1))];
    if (split) {
        float hi = tf32_round(v);
        v = part == 1 ? tf32_round(v - hi) : hi;
    }
    B[i] = v;
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

/* Gathers the spectra of the cross-sections (rows of `len` elements): row
 * r < nh is A-scan r of line h, row nh + l is A-scan v of line l. */
template <typename T>
__global__ void gather_xsec_kernel(const T *__restrict__ src, int len, int N, int h, int v,
                                   int nh, int nrows, T *__restrict__ dst)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)nrows * len) return;
    int k = (int)(i % len);
    int r = (int)(i / len);
    long long j = r < nh ? (long long)h * N + r : (long long)(r - nh) * N + v;
    dst[i] = src[j * len + k];
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
struct SrcCms { /* |Re + i Im| of the CMS GEMM output, columns (2s, 2s+1) */
    const float *C;
    int ncol;
    __device__ __forceinline__ float operator()(long long jl, int s) const
    {
        const float *p = C + jl * ncol + 2ll * s;
        return sqrtf(p[0] * p[0] + p[1] * p[1]);
    }
};
struct SrcDisp { /* |Y[d]| of the dispersion-compensated spectra, d >= F */
    const float2 *Z;
    int M, F;
    __device__ __forceinline__ float operator()(long long jl, int d) const
    {
        if (d < F) return 0.0f;
        float2 z = Z[jl * M + d];
        return sqrtf(z.x * z.x + z.y * z.y);
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

enum { DEPTH = OCT_ENGINE_DEPTH_MAX, MAX_REG = 16 };
enum { GEMM_SGEMM = 0, GEMM_SPLIT = 1, GEMM_TF32 = 2 };
const char *const gemm_names[] = {"sgemm", "3xtf32", "tf32"};

struct ProdBuf {
    float *f;    /* device f32 */
    uint8_t *u;  /* device u8 */
    size_t cap;  /* pixels */
    size_t off;  /* offset of this product in the pinned output staging (pixels) */
};

enum { EV_START, EV_CONV, EV_CFD, EV_MSI, EV_CMS, EV_PROD, EV_COUNT };
enum { PARTS_MAX = 8 };

/* What one frame in flight owns. */
struct Slot {
    void *d_raw;                 /* the raw frame on the device */
    int *d_bad, *h_bad;          /* first non-finite spectrum (h_bad pinned) */
    ProdBuf prod[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    uint8_t *h_out;              /* pinned staging for caller products that are not
                                  * pinned: f32 of each, then u8 (made on first use) */
    cudaEvent_t ev[EV_COUNT];
    cudaEvent_t ev_h2d0, ev_h2d1, ev_d2h0, ev_d2h1;
    /* the frame in flight */
    oct_products *out;
    uint64_t ticket;
    bool direct_in;              /* DMA from registered memory: input done at ev_h2d1 */
    bool direct_out;             /* D2H straight into out's pinned buffers */
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    bool f32;
    double t_submit;
    double conv_bytes;           /* device bytes read + written by the conversion stage */
    /* intra-frame pipeline (see run_device): the input copied in nparts
     * parts of spectra, each part converted and sent through CFD and the
     * MSI as soon as it is on the device */
    int nparts;
    cudaEvent_t ev_in[PARTS_MAX], ev_cv[PARTS_MAX];
};

struct HostReg {
    const uint8_t *ptr;
    size_t bytes;
    bool owned; /* false: another engine of this process registered it (issue 20) */
};

struct CudaState {
    int device;
    bool device_ok;   /* the device was selected: teardown calls mean something */
    uint64_t allocs;
    cudaStream_t s_comp, s_cfd, s_copy, s_d2h;
    cudaEvent_t ev_stg[2], ev_fork;
    int stg_next;     /* staging buffer to fill next (alternates across frames) */
    cufftHandle plan_x, plan_m, plan_c2r;
    bool have_plan_x, have_plan_m, have_plan_c2r;
    cublasHandle_t blas;
    bool have_blas;
    void *fft_work, *fft_work_x, *blas_work;
    size_t blas_work_bytes;
    int gemm_mode;    /* GEMM_* */
    int kM;           /* GEMM inner dimension: M, or 3M for split TF32 */
    bool x_on_comp;   /* plan_x runs on the compute stream (FFT path), else the CFD stream */

    /* geometry */
    int M, K, N, L, R;
    int RC;           /* CMS depths (setup.cms_count), 0 = no CMS */
    long long S;
    size_t frame_bytes;

    /* work buffers shared by all slots (compute is serialised) */
    float *d_x, *d_x3;
    float *d_win, *d_bg;
    double *d_bgsum;
    float2 *d_X;

    /* MSI */
    float *d_mf;      /* R x M filtered masks */
    float2 *d_Mf;     /* R x K their spectra (FFT path) */
    float *d_Bfull, *d_Benf;
    size_t mat_cap;   /* floats of each matrix */
    int nl_cap;       /* lags the matrices hold */
    bool both_paths;  /* auto path: buffers of both MSI paths, switched live by the lag count */
    float *d_C;
    size_t C_cap;     /* floats */
    float2 *d_Y;
    float *d_P;
    long long CB;     /* C2R batch */
    float *d_xg;      /* gathered spectra (GEMM) */
    float2 *d_Xg;     /* gathered spectra (FFT) */
    int *d_eidx[OCT_METHOD_COUNT];
    size_t eidx_cap[OCT_METHOD_COUNT];
    bool matrices_ok; /* d_Bfull/d_Benf/d_Mf current */

    /* background (issue 7): b of this frame, rolling history ring (K rows of
     * frame means, double) and its device-side state (see roll_mean_kernel) */
    float *d_bcur;
    double *d_ring;
    int *d_roll;
    bool roll_active; /* the history belongs to the current mode and K */
    int roll_K;

    /* k-linearisation (CFD): tap tables, x' and the resampled windowed spectra */
    int *d_kidx;
    float *d_kw;
    int klin_T;       /* taps of the uploaded tables, 0 = off */
    float *d_xp, *d_xk;

    /* dispersion (CFD): e^(-i theta), chunked analytic-signal spectra, C2C plan */
    float2 *d_disp, *d_Z;
    bool disp_on;
    long long DB;     /* spectra per dispersion chunk (the plan's batch) */
    cufftHandle plan_d;
    bool have_plan_d;
    /* intra-frame pipeline: parts per frame (1 = off) and the R2C plan of
     * one part's spectra (CFD stream, plan_x's work area) */
    int parts;
    cufftHandle plan_xp;
    bool have_plan_xp;

    /* CMS: q (2RC x M), its GEMM matrices (all depths / en-face depths),
     * the TF32 parts of x', gathered cross-section rows, GEMM output chunk */
    float *d_cq, *d_Qfull, *d_Qenf, *d_xp3, *d_xgc, *d_Cc;
    size_t Cc_cap;
    bool cms_ok;

    /* products */
    size_t out_pixels, h_out_bytes;

    /* pipeline: slots head .. head+count-1 (mod DEPTH) are in flight */
    Slot slot[DEPTH];
    int head, count;
    int last_slot;        /* slot of the last submitted frame (oct_cuda_time_device) */
    bool frame_on_device;

    /* staging of pageable frames */
    uint8_t *h_stage[2];
    size_t stage_bytes;
    int stage_threads; /* CPU threads of the staging copy (one core moves ~8-10 GB/s) */

    HostReg reg[MAX_REG];
    int nreg;
};

inline CudaState *ST(oct_engine *eng) { return (CudaState *)eng->be; }
inline const CudaState *ST(const oct_engine *eng) { return (const CudaState *)eng->be; }

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
    if (s) s->allocs++;
    return OCT_OK;
}

inline unsigned blocks_for(long long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

bool msi_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) != 0; }
bool cfd_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_CFD)) != 0; }
bool cms_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) != 0; }

/* Depths of a method for this geometry and set-up (buffer sizes). */
int method_depth(const CudaState *s, int m)
{
    return m == OCT_METHOD_CFD ? s->K : m == OCT_METHOD_MSI ? s->R : s->RC;
}
int lag_count(const oct_engine *eng) { return eng->params.lag_hi - eng->params.lag_lo + 1; }

/* Pixels a product can take for this geometry, for any control values. */
size_t product_cap(int N, int L, long long S_, int D, int kind)
{
    size_t S = (size_t)S_;
    if (L == 1) return kind == OCT_KIND_BSCAN ? (size_t)D * N : 0;
    switch (kind) {
    case OCT_KIND_ENFACE: return (size_t)D * S;
    case OCT_KIND_CONFOCAL: return S;
    case OCT_KIND_XSEC_H: return (size_t)D * N;
    case OCT_KIND_XSEC_V: return (size_t)D * L;
    case OCT_KIND_VOLUME: return (size_t)D * S;
    default: return 0;
    }
}

/* Lags the GEMM matrices are made for at create: as many as the cost model
 * gives the GEMM path (GEMM_LAGS_MAX), so that a live change of the lag
 * window never allocates; fewer when the two matrices would pass 4 GiB. */
#define GEMM_LAGS_MAX 128
int gemm_lag_capacity(const CudaState *s)
{
    long long per_lag = (long long)s->R * s->kM * (long long)sizeof(float);
    long long fit = per_lag > 0 ? (2ll << 30) / per_lag : GEMM_LAGS_MAX;
    return (int)std::max(1ll, std::min({(long long)GEMM_LAGS_MAX, (long long)s->M - 1, fit}));
}

/* GEMM matrices for up to nl lags.  Allocates at create; later only when a
 * forced GEMM path (setup.msi_path = gemm, a test/benchmark knob) is given
 * more lags than it was made for (the auto path switches to the FFT path
 * instead, see cuda_update). */
oct_err ensure_matrices(oct_engine *eng, int nl, oct_error *e)
{
    CudaState *s = ST(eng);
    if (nl <= s->nl_cap && s->d_Bfull) return OCT_OK;
    if (s->d_Bfull || s->d_Benf || s->d_C) {
        CU(cudaDeviceSynchronize()); /* nothing in flight may still read them */
        CU(cudaFree(s->d_Bfull));
        CU(cudaFree(s->d_Benf));
        CU(cudaFree(s->d_C));
    }
    s->d_Bfull = s->d_Benf = s->d_C = NULL;
    s->nl_cap = std::max(nl, gemm_lag_capacity(s));
    s->mat_cap = (size_t)s->R * s->nl_cap * s->kM;
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

/* Uploads the derived arrays of engine.c and rebuilds what depends on them.
 * Stream order on the compute stream puts the uploads after the frames in
 * flight (their CFD work was joined into it). */
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
    if (changed & OCT_CHG_KLIN) {
        uint32_t T = eng->klin_T;
        if (T > 0 && (!eng->klin_idx || !eng->klin_w || T > OCT_SINC_TAPS_MAX))
            return oct_error_set(e, OCT_EINVAL, "cuda: k-linearisation with %u taps (1..%d, tables %s)", T,
                                 OCT_SINC_TAPS_MAX, eng->klin_idx && eng->klin_w ? "present" : "missing");
        size_t nt = (size_t)s->M * T;
        for (size_t i = 0; i < nt; i++) /* the kernel indexes shared memory with these */
            if (eng->klin_idx[i] < 0 || eng->klin_idx[i] >= s->M)
                return oct_error_set(e, OCT_EINVAL, "cuda: k-linearisation index %d at sample %zu tap %zu outside [0, %d]",
                                     eng->klin_idx[i], i / T, i % T, s->M - 1);
        if (T > 0) {
            /* tap-major ([t][n]) on the device: a warp's loads of one tap are coalesced */
            int32_t *ti = (int32_t *)malloc(nt * sizeof(int32_t));
            float *tw = (float *)malloc(nt * sizeof(float));
            if (!ti || !tw) {
                free(ti);
                free(tw);
                return oct_error_set(e, OCT_ENOMEM, "cuda: out of memory for %zu k-linearisation taps", nt);
            }
            for (size_t n = 0; n < (size_t)s->M; n++)
                for (size_t t = 0; t < T; t++) {
                    ti[t * s->M + n] = eng->klin_idx[n * T + t];
                    tw[t * s->M + n] = eng->klin_w[n * T + t];
                }
            /* on the compute stream: after the frames in flight (their CFD joins it) */
            cudaError_t r1 = cudaMemcpyAsync(s->d_kidx, ti, nt * sizeof(int32_t), cudaMemcpyHostToDevice, s->s_comp);
            cudaError_t r2 = r1 == cudaSuccess ? cudaMemcpyAsync(s->d_kw, tw, nt * sizeof(float),
                                                                 cudaMemcpyHostToDevice, s->s_comp) : r1;
            cudaError_t r3 = cudaStreamSynchronize(s->s_comp); /* before the host tables go */
            if (r2 == cudaSuccess) r2 = r3;
            free(ti);
            free(tw);
            CU(r2);
        }
        s->klin_T = (int)T;
    }
    if (changed & OCT_CHG_DISP) {
        s->disp_on = eng->disp != NULL;
        if (s->disp_on)
            CU(cudaMemcpyAsync(s->d_disp, eng->disp, (size_t)s->M * sizeof(float2), cudaMemcpyHostToDevice,
                               s->s_comp));
    }
    if (s->RC > 0 && (changed & OCT_CHG_CMS)) {
        if (!eng->cms_q) return oct_error_set(e, OCT_EINVAL, "cuda: CMS set up but no CMS mask matrix");
        CU(cudaMemcpyAsync(s->d_cq, eng->cms_q, (size_t)2 * s->RC * s->M * sizeof(float),
                           cudaMemcpyHostToDevice, s->s_comp));
    }
    if (s->RC > 0 && (changed & (OCT_CHG_CMS | OCT_CHG_ENFACE))) s->cms_ok = false;
    if (changed & OCT_CHG_BACKGROUND) s->roll_active = false; /* history restarts */
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
        int split = s->gemm_mode == GEMM_SPLIT;
        TRY(ensure_matrices(eng, nl, e));
        long long tot = (long long)s->R * nl * s->kM;
        build_matrix_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_mf, s->M, NULL, s->R, nl, eng->params.lag_lo, split, s->d_Bfull);
        LAUNCHED("build_matrix");
        uint32_t Q = eng->enface_n[OCT_METHOD_MSI];
        if (Q > 0 && s->L > 1) {
            tot = (long long)Q * nl * s->kM;
            build_matrix_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                s->d_mf, s->M, s->d_eidx[OCT_METHOD_MSI], (int)Q, nl, eng->params.lag_lo, split,
                s->d_Benf);
            LAUNCHED("build_matrix");
        }
    }
    s->matrices_ok = true;
    return OCT_OK;
}

/* CMS matrices for the current values (lazily, on the compute stream). */
oct_err prepare_cms(oct_engine *eng, oct_error *e)
{
    CudaState *s = ST(eng);
    if (s->cms_ok || s->RC == 0) return OCT_OK;
    int split = s->gemm_mode == GEMM_SPLIT;
    long long tot = (long long)s->RC * 2 * s->kM;
    build_cms_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(s->d_cq, s->M, NULL, s->RC, split,
                                                                  s->d_Qfull);
    LAUNCHED("build_cms");
    uint32_t Q = eng->enface_n[OCT_METHOD_CMS];
    if (Q > 0 && s->L > 1) {
        if (Q > (uint32_t)s->RC)
            return oct_error_set(e, OCT_EINVAL, "cuda: %u CMS en-face depths exceed the %d depths", Q, s->RC);
        tot = (long long)Q * 2 * s->kM;
        build_cms_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_cq, s->M, s->d_eidx[OCT_METHOD_CMS], (int)Q, split, s->d_Qenf);
        LAUNCHED("build_cms");
    }
    s->cms_ok = true;
    return OCT_OK;
}

/* Teardown and error paths cannot return an error: they say it on stderr
 * (octd's log) so a failing device does not go unnoticed. */
void warn_cuda(const char *what, cudaError_t r)
{
    if (r != cudaSuccess) fprintf(stderr, "cuda: %s: %s\n", what, cudaGetErrorString(r));
}

#define WARN_CUDA(call) warn_cuda(#call, call)
#define WARN_LIB(call, ok) do { if ((call) != (ok)) fprintf(stderr, "cuda: %s failed\n", #call); } while (0)

void free_state(CudaState *s)
{
    if (!s) return;
    if (!s->device_ok) { /* nothing was made on a device */
        free(s);
        return;
    }
    for (int i = 0; i < s->nreg; i++)
        if (s->reg[i].owned) WARN_CUDA(cudaHostUnregister((void *)s->reg[i].ptr));
    if (s->have_plan_x) WARN_LIB(cufftDestroy(s->plan_x), CUFFT_SUCCESS);
    if (s->have_plan_m) WARN_LIB(cufftDestroy(s->plan_m), CUFFT_SUCCESS);
    if (s->have_plan_c2r) WARN_LIB(cufftDestroy(s->plan_c2r), CUFFT_SUCCESS);
    if (s->have_plan_d) WARN_LIB(cufftDestroy(s->plan_d), CUFFT_SUCCESS);
    if (s->have_plan_xp) WARN_LIB(cufftDestroy(s->plan_xp), CUFFT_SUCCESS);
    if (s->have_blas) WARN_LIB(cublasDestroy(s->blas), CUBLAS_STATUS_SUCCESS);
    void *dev[] = {s->fft_work, s->fft_work_x, s->blas_work, s->d_x, s->d_x3, s->d_win, s->d_bg,
                   s->d_bgsum, s->d_X, s->d_mf, s->d_Mf, s->d_Bfull, s->d_Benf, s->d_C, s->d_Y,
                   s->d_P, s->d_xg, s->d_Xg, s->d_eidx[0], s->d_eidx[1], s->d_eidx[2],
                   s->d_bcur, s->d_ring, s->d_roll, s->d_kidx, s->d_kw, s->d_xp, s->d_xk,
                   s->d_disp, s->d_Z, s->d_cq, s->d_Qfull, s->d_Qenf, s->d_xp3, s->d_xgc, s->d_Cc};
    for (void *p : dev) WARN_CUDA(cudaFree(p));
    for (int i = 0; i < DEPTH; i++) {
        Slot *sl = &s->slot[i];
        WARN_CUDA(cudaFree(sl->d_raw));
        WARN_CUDA(cudaFree(sl->d_bad));
        WARN_CUDA(cudaFreeHost(sl->h_bad));
        WARN_CUDA(cudaFreeHost(sl->h_out));
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                WARN_CUDA(cudaFree(sl->prod[m][k].f));
                WARN_CUDA(cudaFree(sl->prod[m][k].u));
            }
        for (int j = 0; j < EV_COUNT; j++)
            if (sl->ev[j]) WARN_CUDA(cudaEventDestroy(sl->ev[j]));
        cudaEvent_t more[] = {sl->ev_h2d0, sl->ev_h2d1, sl->ev_d2h0, sl->ev_d2h1};
        for (cudaEvent_t ev : more)
            if (ev) WARN_CUDA(cudaEventDestroy(ev));
        for (int p = 0; p < PARTS_MAX; p++) {
            if (sl->ev_in[p]) WARN_CUDA(cudaEventDestroy(sl->ev_in[p]));
            if (sl->ev_cv[p]) WARN_CUDA(cudaEventDestroy(sl->ev_cv[p]));
        }
    }
    WARN_CUDA(cudaFreeHost(s->h_stage[0]));
    WARN_CUDA(cudaFreeHost(s->h_stage[1]));
    cudaEvent_t evs[] = {s->ev_stg[0], s->ev_stg[1], s->ev_fork};
    for (cudaEvent_t ev : evs)
        if (ev) WARN_CUDA(cudaEventDestroy(ev));
    cudaStream_t st[] = {s->s_comp, s->s_cfd, s->s_copy, s->s_d2h};
    for (cudaStream_t x : st)
        if (x) WARN_CUDA(cudaStreamDestroy(x));
    free(s);
}

oct_err cuda_create_inner(oct_engine *eng, CudaState *s, oct_error *e)
{
    const oct_geometry *g = &eng->setup.geom;
    s->device = eng->setup.device;
    TRY(oct_cuda_probe(s->device, eng->device_name, sizeof eng->device_name, e));
    CU(cudaSetDevice(s->device));
    s->device_ok = true;
    s->M = (int)g->samples;
    s->K = s->M / 2 + 1;
    s->N = (int)g->ascans;
    s->L = (int)g->lines;
    s->S = (long long)g->ascans * g->lines;
    s->R = (int)eng->setup.mask_count;
    s->RC = (int)eng->setup.cms_count; /* engine.c keeps the calibration (eng->cms_cal) */
    s->frame_bytes = (size_t)oct_geometry_frame_bytes(g);
    if (s->S > INT_MAX / 32)
        return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: %lld spectra per frame exceed the CUDA backend's limit of %d",
                             s->S, INT_MAX / 32);
    /* fp32: split TF32 (measured relative L2 7e-6..9e-6 for M = 1024..8192,
     * CUDA_NOTES.md).  Env OCT_CUDA_SGEMM=1 or OCT_CUDA_GEMM=sgemm|3xtf32
     * force one (benchmarks, tests). */
    const char *sg = getenv("OCT_CUDA_SGEMM"), *gm = getenv("OCT_CUDA_GEMM");
    if (eng->setup.precision == OCT_PRECISION_TF32) s->gemm_mode = GEMM_TF32;
    else if ((eng->setup.flags & OCT_SETUP_PLAIN_SGEMM) || (sg && atoi(sg) > 0) ||
             (gm && !strcmp(gm, "sgemm")))
        s->gemm_mode = GEMM_SGEMM;
    else s->gemm_mode = GEMM_SPLIT; /* also OCT_CUDA_GEMM=3xtf32 */
    s->kM = s->gemm_mode == GEMM_SPLIT ? 3 * s->M : s->M;

    CU(cudaStreamCreateWithFlags(&s->s_comp, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_cfd, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_copy, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_d2h, cudaStreamNonBlocking));
    CU(cudaEventCreateWithFlags(&s->ev_stg[0], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_stg[1], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_fork, cudaEventDisableTiming));

    /* MSI path: cost model (flop-equivalents per spectrum and depth).  GEMM:
     * 2*M*nl flops at ~50 TFLOP/s; FFT: ~16*M bytes through memory at
     * ~3 TB/s (~17 flops per byte), i.e. GEMM wins below ~136 lags; the
     * matrices must also fit comfortably. */
    /* With msi_path auto the buffers of both paths are made, and a live
     * change of the lag window moves between them without allocating. */
    eng->msi_path = OCT_MSI_GEMM;
    s->both_paths = false;
    if (s->R > 0) {
        if (eng->setup.msi_path == OCT_MSI_FFT) eng->msi_path = OCT_MSI_FFT;
        else if (eng->setup.msi_path == OCT_MSI_AUTO) {
            s->both_paths = true;
            if (lag_count(eng) > gemm_lag_capacity(s)) eng->msi_path = OCT_MSI_FFT;
        }
    }
    bool gemm = s->R > 0 && (eng->msi_path == OCT_MSI_GEMM || s->both_paths);
    bool fftp = s->R > 0 && (eng->msi_path == OCT_MSI_FFT || s->both_paths);
    bool blas = gemm || s->RC > 0; /* CMS is always one GEMM */

    /* work buffers; x3 only for the split-TF32 GEMM */
    TRY(dmalloc(s, &s->d_x, (size_t)s->S * s->M, "the windowed spectra", e));
    if (gemm && s->gemm_mode == GEMM_SPLIT)
        TRY(dmalloc(s, &s->d_x3, (size_t)s->S * s->kM, "the TF32 parts of the spectra", e));
    TRY(dmalloc(s, &s->d_win, (size_t)s->M, "the window", e));
    TRY(dmalloc(s, &s->d_bg, (size_t)s->M, "the background", e));
    TRY(dmalloc(s, &s->d_bgsum, (size_t)s->M, "the frame-mean sums", e));
    TRY(dmalloc(s, &s->d_X, (size_t)s->S * s->K, "the spectra's DFT", e));
    /* issue 7: every option can be switched on live, so its buffers are made
     * now (control changes never allocate): background vector and rolling
     * history, k-lin tables and spectra, dispersion phase and chunk */
    TRY(dmalloc(s, &s->d_bcur, (size_t)s->M, "the background", e));
    TRY(dmalloc(s, &s->d_ring, (size_t)OCT_ROLLING_MAX * s->M, "the rolling background history", e));
    TRY(dmalloc(s, &s->d_roll, 8, "the rolling background state", e));
    CU(cudaMemset(s->d_roll, 0, 8 * sizeof(int)));
    TRY(dmalloc(s, &s->d_kidx, (size_t)OCT_SINC_TAPS_MAX * s->M, "the k-linearisation indices", e));
    TRY(dmalloc(s, &s->d_kw, (size_t)OCT_SINC_TAPS_MAX * s->M, "the k-linearisation weights", e));
    TRY(dmalloc(s, &s->d_xp, (size_t)s->S * s->M, "the background-subtracted spectra", e));
    TRY(dmalloc(s, &s->d_xk, (size_t)s->S * s->M, "the k-linearised spectra", e));
    TRY(dmalloc(s, &s->d_disp, (size_t)s->M, "the dispersion phase", e));
    /* dispersion chunk: ~64 MiB of complex spectra */
    s->DB = std::max(1ll, std::min(s->S, (64ll << 20) / (s->M * (long long)sizeof(float2))));
    TRY(dmalloc(s, &s->d_Z, (size_t)s->DB * s->M, "the dispersion work spectra", e));
    if (s->RC > 0) {
        size_t qn = (size_t)2 * s->RC;
        TRY(dmalloc(s, &s->d_cq, qn * s->M, "the CMS masks", e));
        TRY(dmalloc(s, &s->d_Qfull, qn * s->kM, "the CMS matrix", e));
        if (s->L > 1) TRY(dmalloc(s, &s->d_Qenf, qn * s->kM, "the CMS en-face matrix", e));
        if (s->gemm_mode == GEMM_SPLIT)
            TRY(dmalloc(s, &s->d_xp3, (size_t)s->S * s->kM, "the TF32 parts of the CMS spectra", e));
        TRY(dmalloc(s, &s->d_xgc, ((size_t)s->N + s->L) * s->kM, "the CMS cross-section spectra", e));
        int l2 = 0;
        CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s->device));
        size_t cap = std::max((size_t)l2 * 3 / 4 / sizeof(float), qn * 32);
        s->Cc_cap = std::min(cap, (size_t)s->S * qn);
        TRY(dmalloc(s, &s->d_Cc, s->Cc_cap, "the CMS GEMM output", e));
    }
    if (eng->reference)
        CU(cudaMemcpy(s->d_bg, eng->reference, (size_t)s->M * sizeof(float), cudaMemcpyHostToDevice));
    else
        CU(cudaMemset(s->d_bg, 0, (size_t)s->M * sizeof(float)));

    /* cuFFT: plans without their own work areas.  The spectra's R2C runs on
     * the CFD stream (GEMM path, concurrent with the MSI GEMM) with a work
     * area of its own; on the FFT path the MSI needs it first (compute stream). */
    size_t ws = 0, wmax = 0, wx = 0;
    long long n = s->M;
    FFT(cufftCreate(&s->plan_x));
    s->have_plan_x = true;
    FFT(cufftSetAutoAllocation(s->plan_x, 0));
    FFT(cufftMakePlanMany64(s->plan_x, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->S, &wx));
    s->x_on_comp = eng->msi_path == OCT_MSI_FFT && s->R > 0;
    FFT(cufftSetStream(s->plan_x, s->x_on_comp ? s->s_comp : s->s_cfd));
    /* dispersion C2C (in place, both directions); runs after plan_x on the
     * CFD path, so it shares plan_x's work area */
    size_t wd = 0;
    FFT(cufftCreate(&s->plan_d));
    s->have_plan_d = true;
    FFT(cufftSetAutoAllocation(s->plan_d, 0));
    FFT(cufftMakePlanMany64(s->plan_d, 1, &n, NULL, 1, n, NULL, 1, n, CUFFT_C2C, s->DB, &wd));
    wx = std::max(wx, wd);
    /* Intra-frame pipeline for volumes: the frame's DMA in `parts` parts, the
     * compute of each part starting when it has arrived (latency: DMA +
     * one part's compute instead of DMA + the frame's).  OCT_CUDA_PARTS
     * overrides (tests, benchmarks; 1 = off). */
    {
        const char *pe = getenv("OCT_CUDA_PARTS");
        int parts = pe && *pe ? atoi(pe) : (s->L > 1 && s->S >= 4096 ? 4 : 1);
        parts = std::max(1, std::min((int)PARTS_MAX, parts));
        while (parts > 1 && s->S % parts) parts--;
        s->parts = parts;
    }
    if (s->parts > 1) {
        size_t wp = 0;
        FFT(cufftCreate(&s->plan_xp));
        s->have_plan_xp = true;
        FFT(cufftSetAutoAllocation(s->plan_xp, 0));
        FFT(cufftMakePlanMany64(s->plan_xp, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->S / s->parts, &wp));
        FFT(cufftSetStream(s->plan_xp, s->s_cfd));
        wx = std::max(wx, wp);
    }

    /* per slot: input, flags, products, events */
    size_t out_pixels = 0;
    for (int i = 0; i < DEPTH; i++) {
        Slot *sl = &s->slot[i];
        TRY(dmalloc(s, (uint8_t **)&sl->d_raw, s->frame_bytes, "the raw frame", e));
        TRY(dmalloc(s, &sl->d_bad, 1, "a flag", e));
        TRY(halloc(s, (void **)&sl->h_bad, sizeof(int), "a flag", e));
        *sl->h_bad = INT_MAX;
        for (int j = 0; j < EV_COUNT; j++) CU(cudaEventCreate(&sl->ev[j]));
        CU(cudaEventCreate(&sl->ev_h2d0));
        CU(cudaEventCreate(&sl->ev_h2d1));
        CU(cudaEventCreate(&sl->ev_d2h0));
        CU(cudaEventCreate(&sl->ev_d2h1));
        for (int p = 0; p < s->parts && s->parts > 1; p++) {
            CU(cudaEventCreateWithFlags(&sl->ev_in[p], cudaEventDisableTiming));
            CU(cudaEventCreateWithFlags(&sl->ev_cv[p], cudaEventDisableTiming));
        }
        out_pixels = 0;
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            int D = method_depth(s, m);
            if (D == 0) continue;
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                ProdBuf *pb = &sl->prod[m][k];
                pb->cap = product_cap(s->N, s->L, s->S, D, k);
                pb->off = out_pixels;
                out_pixels += pb->cap;
                TRY(dmalloc(s, &pb->f, pb->cap, "a product image", e));
                TRY(dmalloc(s, &pb->u, pb->cap, "a product image", e));
            }
        }
    }
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        int D = method_depth(s, m);
        if (D == 0) continue;
        s->eidx_cap[m] = (size_t)D;
        TRY(dmalloc(s, &s->d_eidx[m], (size_t)D, "the en-face indices", e));
    }
    s->out_pixels = out_pixels;
    s->h_out_bytes = out_pixels * (1 + sizeof(float));
    s->stage_bytes = std::min(s->frame_bytes, (size_t)8 << 20);
    /* Memory that cannot be registered (pageable frames, a ring the device
     * cannot register read-only) is staged by several threads: setup.threads,
     * else half the cores, at most 8. */
    s->stage_threads = eng->setup.threads > 0 ? eng->setup.threads : omp_get_num_procs() / 2;
    s->stage_threads = std::max(1, std::min(8, s->stage_threads));
    TRY(halloc(s, (void **)&s->h_stage[0], s->stage_bytes, "the frame staging", e));
    TRY(halloc(s, (void **)&s->h_stage[1], s->stage_bytes, "the frame staging", e));

    /* gathered cross-section spectra: a line (N) and a column (L) */
    size_t ng = (size_t)s->N + s->L;
    if (s->R > 0) {
        TRY(dmalloc(s, &s->d_mf, (size_t)s->R * s->M, "the filtered masks", e));
        if (fftp) {
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
        }
        if (gemm) {
            TRY(ensure_matrices(eng, lag_count(eng), e));
            TRY(dmalloc(s, &s->d_xg, ng * s->kM, "the cross-section spectra", e));
        }
    }
    if (blas) {
        BLAS(cublasCreate(&s->blas));
        s->have_blas = true;
        BLAS(cublasSetStream(s->blas, s->s_comp));
        /* our own workspace, so cuBLAS never allocates behind our back */
        s->blas_work_bytes = 32u << 20;
        TRY(dmalloc(s, (uint8_t **)&s->blas_work, s->blas_work_bytes, "the cuBLAS workspace", e));
        BLAS(cublasSetWorkspace(s->blas, s->blas_work, s->blas_work_bytes));
        BLAS(cublasSetMathMode(s->blas, s->gemm_mode == GEMM_SGEMM ? CUBLAS_PEDANTIC_MATH
                                                                   : CUBLAS_TF32_TENSOR_OP_MATH));
    }
    TRY(dmalloc(s, (uint8_t **)&s->fft_work_x, std::max(wx, (size_t)256), "the cuFFT work area", e));
    FFT(cufftSetWorkArea(s->plan_x, s->fft_work_x));
    FFT(cufftSetWorkArea(s->plan_d, s->fft_work_x));
    if (s->have_plan_xp) FFT(cufftSetWorkArea(s->plan_xp, s->fft_work_x)); /* same stream as the CFD's R2C */
    if (wmax > 0 || s->have_plan_m) {
        TRY(dmalloc(s, (uint8_t **)&s->fft_work, std::max(wmax, (size_t)256), "the cuFFT work area", e));
        if (s->have_plan_m) FFT(cufftSetWorkArea(s->plan_m, s->fft_work));
        if (s->have_plan_c2r) FFT(cufftSetWorkArea(s->plan_c2r, s->fft_work));
    }

    TRY(refresh(eng, OCT_CHG_ALL, e));
    TRY(prepare_msi(eng, e));
    TRY(prepare_cms(eng, e));
    CU(cudaStreamSynchronize(s->s_comp));
    return OCT_OK;
}

/* ------------------------------------------------------------------ */
/* per frame                                                            */

Sink make_sink(oct_engine *eng, Slot *sl, int m, const bool want[OCT_KIND_COUNT])
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    Sink k;
    memset(&k, 0, sizeof k);
    k.D = (int)eng->depths[m];
    k.N = s->N;
    k.L = s->L;
    k.S = s->S;
    ProdBuf *pb = sl->prod[m];
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
oct_err launch_sink(cudaStream_t st, const Src &src, const Sink &k, int mode, long long j0,
                    long long nrows, int nh, oct_error *e)
{
    if (nrows <= 0) return OCT_OK;
    sink_kernel<Src><<<blocks_for(nrows * 32, 256), 256, 0, st>>>(src, k, mode, j0, nrows, nh);
    LAUNCHED("sink");
    return OCT_OK;
}

/* Gathers the spectra of the wanted cross-sections: nh (line) + nv (column).
 * The rows are computed on the device: no per-frame host list. */
oct_err gather_xsec(oct_engine *eng, bool want_h, bool want_v, int *nh, int *nv, oct_error *e)
{
    CudaState *s = ST(eng);
    *nh = want_h ? s->N : 0;
    *nv = want_v ? s->L : 0;
    int n = *nh + *nv;
    if (n == 0) return OCT_OK;
    int h = eng->params.xsec_h, v = eng->params.xsec_v;
    if (eng->msi_path == OCT_MSI_FFT) {
        long long tot = (long long)n * s->K;
        gather_xsec_kernel<float2><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_X, s->K, s->N, h, v, *nh, n, s->d_Xg);
    } else {
        long long tot = (long long)n * s->kM;
        const float *src = s->gemm_mode == GEMM_SPLIT ? s->d_x3 : s->d_x;
        gather_xsec_kernel<float><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            src, s->kM, s->N, h, v, *nh, n, s->d_xg);
    }
    LAUNCHED("gather");
    return OCT_OK;
}

/* Whether this frame goes through the intra-frame pipeline: a volume, and
 * nothing that needs the whole frame before the first part can be
 * processed (frame-mean, rolling or FPN background) or that the per-part
 * path does not do (k-linearisation, dispersion, FFT-path MSI).  With it,
 * the stage times other than device_ms mix stages (octbench times a replay,
 * which never uses parts). */
bool parts_apply(const oct_engine *eng)
{
    const CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    if (s->parts <= 1 || s->L <= 1) return false;
    if (p->background != OCT_BG_NONE && p->background != OCT_BG_REFERENCE) return false;
    bool cfd = cfd_on(eng), msi = msi_on(eng) && s->R > 0;
    if (cfd && (s->klin_T > 0 || s->disp_on)) return false;
    if (msi && eng->msi_path != OCT_MSI_GEMM) return false;
    return true;
}

/* One MSI pass over nrows rows (spectra j0.. or gathered) with nslots depth
 * slots (all R, or the en-face list). */
oct_err msi_pass(oct_engine *eng, const Sink &k, int mode, long long jbase, long long nrows, int nh,
                 oct_error *e)
{
    CudaState *s = ST(eng);
    int nl = lag_count(eng);
    bool sub = mode == MODE_SUB;
    int nslots = sub ? k.Q : s->R;
    if (nrows <= 0 || nslots <= 0) return OCT_OK;
    bool xs = mode == MODE_XS;
    if (eng->msi_path == OCT_MSI_GEMM) {
        const float *A = sub ? s->d_Benf : s->d_Bfull;
        const float *X = xs ? s->d_xg : (s->gemm_mode == GEMM_SPLIT ? s->d_x3 : s->d_x);
        int ncol = nslots * nl, kM = s->kM;
        long long cs_max = std::max(1ll, (long long)(s->C_cap / ncol));
        long long nch = (nrows + cs_max - 1) / cs_max;
        long long cs = (nrows + nch - 1) / nch;
        const float one = 1.0f, zero = 0.0f;
        for (long long j0 = jbase; j0 < jbase + nrows; j0 += cs) {
            long long nj = std::min(cs, jbase + nrows - j0);
            /* C (ncol x nj, column-major) = A^T (ncol x kM) * X (kM x nj) */
            if (s->gemm_mode == GEMM_SGEMM)
                BLAS(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A,
                                 kM, X + j0 * kM, kM, &zero, s->d_C, ncol));
            else /* TF32 tensor cores; the split operands are exact TF32 values */
                BLAS(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A,
                                  CUDA_R_32F, kM, X + j0 * kM, CUDA_R_32F, kM, &zero, s->d_C,
                                  CUDA_R_32F, ncol, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
            SrcGemm src = {s->d_C, ncol, nl};
            TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
        }
    } else {
        const float2 *X = xs ? s->d_Xg : s->d_X;
        long long cs = std::max(1ll, s->CB / nslots);
        for (long long j0 = jbase; j0 < jbase + nrows; j0 += cs) {
            long long nj = std::min(cs, jbase + nrows - j0);
            long long tot = nj * nslots * s->K;
            mask_product_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                X + j0 * s->K, s->K, (int)nj, s->d_Mf, sub ? s->d_eidx[OCT_METHOD_MSI] : NULL,
                nslots, s->d_Y);
            LAUNCHED("mask_product");
            FFT(cufftExecC2R(s->plan_c2r, (cufftComplex *)s->d_Y, s->d_P));
            SrcFft src = {s->d_P, nslots, s->M, eng->params.lag_lo, nl, 1.0f / (float)s->M};
            TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
        }
    }
    return OCT_OK;
}

/* One CMS pass (GEMM with the stacked Re/Im rows of q, then |.|) over
 * nrows rows: spectra, or gathered cross-section spectra (MODE_XS). */
oct_err cms_pass(oct_engine *eng, const Sink &k, int mode, long long nrows, int nh, oct_error *e)
{
    CudaState *s = ST(eng);
    bool sub = mode == MODE_SUB, xs = mode == MODE_XS;
    int nslots = sub ? k.Q : s->RC;
    if (nrows <= 0 || nslots <= 0) return OCT_OK;
    const float *A = sub ? s->d_Qenf : s->d_Qfull;
    const float *X = xs ? s->d_xgc : (s->gemm_mode == GEMM_SPLIT ? s->d_xp3 : s->d_xp);
    int ncol = 2 * nslots, kM = s->kM;
    long long cs_max = std::max(1ll, (long long)(s->Cc_cap / ncol));
    long long nch = (nrows + cs_max - 1) / cs_max;
    long long cs = (nrows + nch - 1) / nch;
    const float one = 1.0f, zero = 0.0f;
    for (long long j0 = 0; j0 < nrows; j0 += cs) {
        long long nj = std::min(cs, nrows - j0);
        /* C (ncol x nj, column-major) = A^T (ncol x kM) * X (kM x nj) */
        if (s->gemm_mode == GEMM_SGEMM)
            BLAS(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A, kM,
                             X + j0 * kM, kM, &zero, s->d_Cc, ncol));
        else
            BLAS(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A, CUDA_R_32F,
                              kM, X + j0 * kM, CUDA_R_32F, kM, &zero, s->d_Cc, CUDA_R_32F, ncol,
                              CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        SrcCms src = {s->d_Cc, ncol};
        TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
    }
    return OCT_OK;
}

/* Background of this frame into s->d_bcur (NULL: none), on the compute
 * stream, which orders the rolling history across frames in submission
 * order.  *commit: the rolling history must take this frame's mean after
 * the conversion. */
oct_err background(oct_engine *eng, Slot *sl, bool replay, const float **bvec, bool *commit, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    const oct_geometry *g = &eng->setup.geom;
    int sh = g->sample_type == OCT_SAMPLE_F32 ? 0 : (int)g->sample_shift;
    double invS = 1.0 / (double)s->S;
    unsigned mb = blocks_for(s->M, 256);
    *bvec = NULL;
    *commit = false;
    if (p->background != OCT_BG_ROLLING) s->roll_active = false;
    switch (p->background) {
    case OCT_BG_NONE: return OCT_OK;
    case OCT_BG_REFERENCE:
        if (!eng->reference) return oct_error_set(e, OCT_EINVAL, "cuda: reference background without a reference");
        *bvec = s->d_bg;
        return OCT_OK;
    case OCT_BG_FRAME_MEAN:
    case OCT_BG_ROLLING: {
        CU(cudaMemsetAsync(s->d_bgsum, 0, (size_t)s->M * sizeof(double), s->s_comp));
        dim3 grid(blocks_for(s->M, 256), (unsigned)std::min(s->S, 512ll));
        switch (g->sample_type) {
        case OCT_SAMPLE_U16: colsum_kernel<uint16_t><<<grid, 256, 0, s->s_comp>>>((const uint16_t *)sl->d_raw, s->S, s->M, sh, s->d_bgsum); break;
        case OCT_SAMPLE_I16: colsum_kernel<int16_t><<<grid, 256, 0, s->s_comp>>>((const int16_t *)sl->d_raw, s->S, s->M, sh, s->d_bgsum); break;
        default: colsum_kernel<float><<<grid, 256, 0, s->s_comp>>>((const float *)sl->d_raw, s->S, s->M, 0, s->d_bgsum); break;
        }
        LAUNCHED("colsum");
        if (p->background == OCT_BG_FRAME_MEAN) {
            bg_mean_kernel<<<mb, 256, 0, s->s_comp>>>(s->d_bgsum, invS, s->M, s->d_bcur);
            LAUNCHED("bg_mean");
        } else {
            int K = p->background_param;
            if (K < 1 || K > OCT_ROLLING_MAX)
                return oct_error_set(e, OCT_EINVAL, "cuda: rolling background over %d frames (1..%d)", K,
                                     OCT_ROLLING_MAX);
            if (!s->roll_active || s->roll_K != K) { /* (re)start the history */
                CU(cudaMemsetAsync(s->d_roll, 0, 8 * sizeof(int), s->s_comp));
                s->roll_active = true;
                s->roll_K = K;
            }
            roll_mean_kernel<<<mb, 256, 0, s->s_comp>>>(s->d_bgsum, invS, s->d_ring, s->M, K, s->d_roll,
                                                        s->d_bcur);
            LAUNCHED("roll_mean");
            *commit = !replay; /* a timing replay is not a new frame */
        }
        *bvec = s->d_bcur;
        return OCT_OK;
    }
    case OCT_BG_FPN: {
        int G = p->background_param;
        if (G < 2 || G > OCT_FPN_SEGMENT_MAX)
            return oct_error_set(e, OCT_EINVAL, "cuda: fixed-pattern segment of %d spectra (2..%d)", G,
                                 OCT_FPN_SEGMENT_MAX);
        dim3 blk(32, FPN_WARPS);
        unsigned gb = blocks_for(s->M, 32);
        switch (g->sample_type) {
        case OCT_SAMPLE_U16: fpn_kernel<uint16_t><<<gb, blk, 0, s->s_comp>>>((const uint16_t *)sl->d_raw, s->S, s->M, sh, G, s->d_bcur); break;
        case OCT_SAMPLE_I16: fpn_kernel<int16_t><<<gb, blk, 0, s->s_comp>>>((const int16_t *)sl->d_raw, s->S, s->M, sh, G, s->d_bcur); break;
        default: fpn_kernel<float><<<gb, blk, 0, s->s_comp>>>((const float *)sl->d_raw, s->S, s->M, 0, G, s->d_bcur); break;
        }
        LAUNCHED("fpn");
        *bvec = s->d_bcur;
        return OCT_OK;
    }
    default:
        return oct_error_set(e, OCT_EINVAL, "cuda: background mode %u unknown", p->background);
    }
}

/* CFD of the frame on stream st (after x~ or x' is ready there): [k-lin]
 * -> R2C (unless done on the compute stream already) -> plain |X| or the
 * dispersion chain -> sink. */
oct_err cfd_run(oct_engine *eng, Slot *sl, cudaStream_t st, bool r2c_done,
                const bool want[OCT_KIND_COUNT], oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    bool klin = s->klin_T > 0;
    if (klin) {
        unsigned gb = (unsigned)std::min(s->S, 1ll << 20);
        klin_kernel<<<gb, 256, (size_t)s->M * sizeof(float), st>>>(s->d_xp, s->d_kidx, s->d_kw, s->klin_T,
                                                                  s->d_win, s->M, s->S, s->d_xk);
        LAUNCHED("klin");
    }
    if (!r2c_done) /* plan_x is bound to st (see run_device) */
        FFT(cufftExecR2C(s->plan_x, klin ? s->d_xk : s->d_x, (cufftComplex *)s->d_X));
    Sink k = make_sink(eng, sl, OCT_METHOD_CFD, want);
    if (!s->disp_on) {
        SrcCfd src = {s->d_X, s->K, s->M, p->freq_cutoff};
        return launch_sink(st, src, k, MODE_ALL, 0, s->S, 0, e);
    }
    FFT(cufftSetStream(s->plan_d, st));
    long long nch = (s->S + s->DB - 1) / s->DB;
    long long cs = (s->S + nch - 1) / nch;
    for (long long j0 = 0; j0 < s->S; j0 += cs) {
        long long nj = std::min(cs, s->S - j0);
        long long tot = nj * s->M;
        /* rows nj..DB-1 of the batch are stale: transformed, never read */
        disp_pad_kernel<<<blocks_for(tot, 256), 256, 0, st>>>(s->d_X + j0 * s->K, s->K, s->M, p->freq_cutoff,
                                                             nj, s->d_Z);
        LAUNCHED("disp_pad");
        FFT(cufftExecC2C(s->plan_d, (cufftComplex *)s->d_Z, (cufftComplex *)s->d_Z, CUFFT_INVERSE));
        disp_phase_kernel<<<blocks_for(tot, 256), 256, 0, st>>>(s->d_Z, s->d_disp, s->M, nj,
                                                               1.0f / (float)s->M);
        LAUNCHED("disp_phase");
        FFT(cufftExecC2C(s->plan_d, (cufftComplex *)s->d_Z, (cufftComplex *)s->d_Z, CUFFT_FORWARD));
        SrcDisp src = {s->d_Z, s->M, p->freq_cutoff};
        TRY(launch_sink(st, src, k, MODE_ALL, j0, nj, 0, e));
    }
    return OCT_OK;
}

/* The device work of one frame already in (or queued for) sl->d_raw:
 * compute stream, CFD forked onto its own stream and joined at the end.
 * replay: a timing re-run of the last frame (the rolling history is kept). */
oct_err run_device(oct_engine *eng, Slot *sl, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT],
                   bool replay, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_geometry *g = &eng->setup.geom;
    int sh = (int)g->sample_shift;
    bool cfd = cfd_on(eng), msi = msi_on(eng) && s->R > 0, cms = cms_on(eng) && s->RC > 0;
    bool fft_path = eng->msi_path == OCT_MSI_FFT;
    bool klin = cfd && s->klin_T > 0;
    CU(cudaEventRecord(sl->ev[EV_START], s->s_comp));

    /* background, then conversion + background + window: x~ for CFD (no
     * k-lin) / FFT path / SGEMM, its TF32 parts for the split MSI GEMM, x'
     * for k-lin and the plain CMS GEMM, its TF32 parts for the split CMS GEMM */
    bool split = s->gemm_mode == GEMM_SPLIT;
    bool msplit = msi && !fft_path && split;
    float *x = ((cfd && !klin) || (msi && !msplit)) ? s->d_x : NULL;
    float *x3 = msplit ? s->d_x3 : NULL;
    float *xp = (klin || (cms && !split)) ? s->d_xp : NULL;
    float *xp3 = cms && split ? s->d_xp3 : NULL;
    CU(cudaMemsetAsync(sl->d_bad, 0x7f, sizeof(int), s->s_comp));
    const float *bvec = NULL;
    bool commit = false;
    TRY(background(eng, sl, replay, &bvec, &commit, e));
    /* conversion of spectra [j0, j0 + ns) */
    auto convert = [&](long long j0, long long ns) -> oct_err {
        long long n4 = ns * s->M / 4, o = j0 * s->M, o3 = j0 * s->kM;
        unsigned nb = blocks_for(n4, 256);
        float *px = x ? x + o : NULL, *px3 = x3 ? x3 + o3 : NULL, *pxp = xp ? xp + o : NULL,
              *pxp3 = xp3 ? xp3 + o3 : NULL;
        switch (g->sample_type) {
        case OCT_SAMPLE_U16:
            convert_kernel<uint16_t><<<nb, 256, 0, s->s_comp>>>((const uint16_t *)sl->d_raw + o, px, px3, pxp, pxp3,
                                                                 n4, s->M, sh, s->d_win, bvec, sl->d_bad, j0);
            break;
        case OCT_SAMPLE_I16:
            convert_kernel<int16_t><<<nb, 256, 0, s->s_comp>>>((const int16_t *)sl->d_raw + o, px, px3, pxp, pxp3,
                                                                n4, s->M, sh, s->d_win, bvec, sl->d_bad, j0);
            break;
        default:
            convert_kernel<float><<<nb, 256, 0, s->s_comp>>>((const float *)sl->d_raw + o, px, px3, pxp, pxp3,
                                                              n4, s->M, 0, s->d_win, bvec, sl->d_bad, j0);
            break;
        }
        LAUNCHED("convert");
        return OCT_OK;
    };
    /* Intra-frame pipeline (volumes with input DMA'd in parts; see
     * parts_apply for when): per part, wait for its copy, convert it, then
     * CFD (own stream) and the MSI en-face / all-depth pass of its spectra;
     * cross-sections and CMS follow once the whole frame is converted. */
    int P = replay ? 1 : sl->nparts;
    bool parts = P > 1 && parts_apply(eng);
    bool msi_full = false, msi_done = false;
    if (parts) {
        long long np = s->S / P;
        Sink kc = make_sink(eng, sl, OCT_METHOD_CFD, want[OCT_METHOD_CFD]);
        Sink km, ke;
        if (msi) {
            TRY(prepare_msi(eng, e));
            km = make_sink(eng, sl, OCT_METHOD_MSI, want[OCT_METHOD_MSI]);
            msi_full = want[OCT_METHOD_MSI][OCT_KIND_VOLUME];
            ke = km;
            ke.xh_f = ke.xv_f = NULL;
        }
        const oct_params *pp = &eng->params;
        for (int p = 0; p < P; p++) {
            long long j0 = (long long)p * np;
            if (p > 0) CU(cudaStreamWaitEvent(s->s_comp, sl->ev_in[p], 0));
            TRY(convert(j0, np));
            CU(cudaEventRecord(sl->ev_cv[p], s->s_comp));
            if (cfd) {
                CU(cudaStreamWaitEvent(s->s_cfd, sl->ev_cv[p], 0));
                FFT(cufftExecR2C(s->plan_xp, x + j0 * s->M, (cufftComplex *)(s->d_X + j0 * s->K)));
                SrcCfd src = {s->d_X + j0 * s->K, s->K, s->M, pp->freq_cutoff};
                TRY(launch_sink(s->s_cfd, src, kc, MODE_ALL, j0, np, 0, e));
            }
            if (msi && (msi_full || ke.en_f || ke.cf_f))
                TRY(msi_pass(eng, msi_full ? km : ke, msi_full ? MODE_ALL : MODE_SUB, j0, np, 0, e));
        }
        if (cfd) CU(cudaEventRecord(sl->ev[EV_CFD], s->s_cfd));
        msi_done = true;
    } else {
        TRY(convert(0, s->S));
    }
    {
        /* what the conversion stage moves: the raw frame (twice with a
         * frame-mean or rolling background: column sums first), each f32
         * output (4 B per sample) and each TF32 split (12 B per sample) */
        double ns = (double)s->S * s->M, in = (double)s->frame_bytes;
        bool colsum = eng->params.background == OCT_BG_FRAME_MEAN || eng->params.background == OCT_BG_ROLLING;
        sl->conv_bytes = in * (colsum ? 2 : 1) + ns * (4.0 * ((x != NULL) + (xp != NULL)) +
                                                       12.0 * ((x3 != NULL) + (xp3 != NULL)));
    }
    if (commit) {
        roll_commit_kernel<<<blocks_for(s->M, 256), 256, 0, s->s_comp>>>(s->d_bgsum, 1.0 / (double)s->S,
                                                                        s->d_ring, s->M, s->d_roll,
                                                                        sl->d_bad, s->S);
        LAUNCHED("roll_commit");
    }
    CU(cudaMemcpyAsync(sl->h_bad, sl->d_bad, sizeof(int), cudaMemcpyDeviceToHost, s->s_comp));
    CU(cudaEventRecord(sl->ev[EV_CONV], s->s_comp));

    /* CFD on its own stream: memory-bound FFT + sink beside the compute-bound
     * GEMMs.  On the FFT-path MSI the spectra's R2C runs on the compute stream
     * (the MSI needs it; plan bound there in create); with k-lin the CFD then
     * needs its own R2C of other spectra into the same d_X, so it runs on the
     * compute stream after the MSI ("late"). */
    bool x_on_comp = s->x_on_comp;
    bool late = cfd && klin && x_on_comp;
    if (parts) {
        /* the CFD ran per part above */
        if (!cfd) CU(cudaEventRecord(sl->ev[EV_CFD], s->s_comp)); /* cfd_ms = 0 */
    } else {
        if (x_on_comp && (msi || (cfd && !klin))) {
            FFT(cufftExecR2C(s->plan_x, s->d_x, (cufftComplex *)s->d_X));
            CU(cudaEventRecord(s->ev_fork, s->s_comp));
        }
        if (cfd && !late) {
            CU(cudaStreamWaitEvent(s->s_cfd, x_on_comp ? s->ev_fork : sl->ev[EV_CONV], 0));
            TRY(cfd_run(eng, sl, s->s_cfd, x_on_comp, want[OCT_METHOD_CFD], e));
            CU(cudaEventRecord(sl->ev[EV_CFD], s->s_cfd));
        } else if (!cfd) {
            CU(cudaEventRecord(sl->ev[EV_CFD], s->s_comp)); /* cfd_ms = 0 */
        }
    }

    if (msi) {
        TRY(prepare_msi(eng, e));
        const bool *w = want[OCT_METHOD_MSI];
        Sink k = make_sink(eng, sl, OCT_METHOD_MSI, w);
        bool full = s->L == 1 ? w[OCT_KIND_BSCAN] : w[OCT_KIND_VOLUME];
        if (full) {
            /* every depth of every spectrum: the en-face, confocal and
             * cross-section products come from the same pass */
            if (!msi_done) TRY(msi_pass(eng, k, MODE_ALL, 0, s->S, 0, e));
        } else if (s->L > 1) {
            if ((k.en_f || k.cf_f) && !msi_done) {
                Sink ke = k;
                ke.xh_f = ke.xv_f = NULL;
                TRY(msi_pass(eng, ke, MODE_SUB, 0, s->S, 0, e));
            }
            if (k.xh_f || k.xv_f) {
                int nh = 0, nv = 0;
                TRY(gather_xsec(eng, k.xh_f != NULL, k.xv_f != NULL, &nh, &nv, e));
                TRY(msi_pass(eng, k, MODE_XS, 0, nh + nv, nh, e));
            }
        }
    }
    CU(cudaEventRecord(sl->ev[EV_MSI], s->s_comp));

    if (cms) { /* as the MSI GEMM path, with |Re, Im| pairs */
        TRY(prepare_cms(eng, e));
        const bool *w = want[OCT_METHOD_CMS];
        Sink k = make_sink(eng, sl, OCT_METHOD_CMS, w);
        bool full = s->L == 1 ? w[OCT_KIND_BSCAN] : w[OCT_KIND_VOLUME];
        if (full) {
            TRY(cms_pass(eng, k, MODE_ALL, s->S, 0, e));
        } else if (s->L > 1) {
            if (k.en_f || k.cf_f) {
                Sink ke = k;
                ke.xh_f = ke.xv_f = NULL;
                TRY(cms_pass(eng, ke, MODE_SUB, s->S, 0, e));
            }
            if (k.xh_f || k.xv_f) {
                int nh = k.xh_f ? s->N : 0, nv = k.xv_f ? s->L : 0;
                long long tot = (long long)(nh + nv) * s->kM;
                gather_xsec_kernel<float><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                    split ? s->d_xp3 : s->d_xp, s->kM, s->N, eng->params.xsec_h, eng->params.xsec_v, nh,
                    nh + nv, s->d_xgc);
                LAUNCHED("gather");
                TRY(cms_pass(eng, k, MODE_XS, nh + nv, nh, e));
            }
        }
    }
    CU(cudaEventRecord(sl->ev[EV_CMS], s->s_comp));

    if (late) {
        TRY(cfd_run(eng, sl, s->s_comp, false, want[OCT_METHOD_CFD], e));
        CU(cudaEventRecord(sl->ev[EV_CFD], s->s_comp));
    }
    CU(cudaStreamWaitEvent(s->s_comp, sl->ev[EV_CFD], 0)); /* join */
    CU(cudaEventRecord(sl->ev[EV_PROD], s->s_comp));
    return OCT_OK;
}

float ev_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0.0f;
    }
    return ms;
}

/* cfd and msi overlap (two streams): each is measured from the conversion's end */
void device_times(const Slot *sl, oct_stage_times *t)
{
    t->convert_ms = ev_ms(sl->ev[EV_START], sl->ev[EV_CONV]);
    t->cfd_ms = ev_ms(sl->ev[EV_CONV], sl->ev[EV_CFD]);
    t->msi_ms = ev_ms(sl->ev[EV_CONV], sl->ev[EV_CMS]); /* MSI + CMS: both matrix products */
    t->products_ms = 0.0; /* fused into the sinks */
    t->device_ms = ev_ms(sl->ev[EV_START], sl->ev[EV_PROD]);
    t->convert_bytes = sl->conv_bytes;
}

void wanted(oct_engine *eng, bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT])
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            want[m][k] = (eng->params.methods & OCT_METHOD_BIT(m)) && eng->depths[m] > 0 &&
                         oct_product_wanted(eng, m, k);
}

oct_err check_bad(CudaState *s, const Slot *sl, oct_error *e)
{
    int bad = *sl->h_bad;
    if (bad < 0 || bad >= s->S) return OCT_OK;
    /* A rejected frame (only f32 input can hold non-finite samples): name
     * the sample as the CPU backend does, from the slot's raw copy, which
     * stays until the next frame is submitted into this slot. */
    float spec[8192];
    int M = std::min(s->M, 8192), n = -1;
    if (s->frame_bytes == (size_t)s->S * s->M * sizeof(float) &&
        cudaMemcpy(spec, (const float *)sl->d_raw + (size_t)bad * s->M, (size_t)M * sizeof(float),
                   cudaMemcpyDeviceToHost) == cudaSuccess)
        for (int i = 0; i < M && n < 0; i++)
            if (!std::isfinite(spec[i])) n = i;
    if (n >= 0)
        return oct_error_set(e, OCT_EINVAL, "frame: sample %d of spectrum %d (line %d, A-scan %d) is not finite (%g)",
                             n, bad, bad / s->N, bad % s->N, (double)spec[n]);
    return oct_error_set(e, OCT_EINVAL, "frame: spectrum %d (line %d, A-scan %d) has a non-finite sample", bad,
                         bad / s->N, bad % s->N);
}

/* Waits for an event: timeout_ms < 0 blocks, 0 asks, > 0 polls until then. */
oct_err wait_event(cudaEvent_t ev, int timeout_ms, const char *what, oct_error *e)
{
    if (timeout_ms < 0) {
        CU(cudaEventSynchronize(ev));
        return OCT_OK;
    }
    double end = oct_now_ms() + timeout_ms;
    for (;;) {
        cudaError_t r = cudaEventQuery(ev);
        if (r == cudaSuccess) return OCT_OK;
        if (r != cudaErrorNotReady)
            return oct_error_set(e, OCT_EDEVICE, "cuda: waiting for %s: %s", what, cudaGetErrorString(r));
        if (oct_now_ms() >= end)
            return oct_error_set(e, OCT_ETIMEDOUT, "cuda: %s not done within %d ms", what, timeout_ms);
        struct timespec ts = {0, 20000}; /* 20 us: a frame takes >= 100 us */
        nanosleep(&ts, NULL);
    }
}

const HostReg *find_reg(const CudaState *s, const void *p, size_t bytes)
{
    const uint8_t *a = (const uint8_t *)p;
    for (int i = 0; i < s->nreg; i++) {
        const HostReg *r = &s->reg[i];
        if (a >= r->ptr && bytes <= r->bytes && (size_t)(a - r->ptr) <= r->bytes - bytes) return r;
    }
    return NULL;
}

/* After a failure half-way through enqueueing: let every stream drain so no
 * copy or kernel still touches the caller's buffers.  (The error that got
 * us here is already reported; a sticky one would repeat it.) */
void drain(CudaState *s)
{
    cudaStream_t st[] = {s->s_copy, s->s_comp, s->s_cfd, s->s_d2h};
    for (cudaStream_t x : st) {
        cudaError_t r = cudaStreamSynchronize(x);
        if (r != cudaSuccess && r != cudaGetLastError()) warn_cuda("draining a stream", r);
    }
    cudaGetLastError();
}

/* memcpy split over `threads` OpenMP threads in page-aligned parts. */
void par_memcpy(void *dst, const void *src, size_t n, int threads)
{
    if (threads <= 1 || n < ((size_t)1 << 20)) {
        memcpy(dst, src, n);
        return;
    }
    size_t per = ((n + (size_t)threads - 1) / (size_t)threads + 4095) & ~(size_t)4095;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++) {
        size_t off = (size_t)t * per;
        if (off < n) memcpy((uint8_t *)dst + off, (const uint8_t *)src + off, std::min(per, n - off));
    }
}

oct_err submit_inner(oct_engine *eng, CudaState *s, Slot *sl, const void *frame, oct_products *out,
                     oct_error *e)
{
    /* product shapes for the current values; the caller's buffers are sized now */
    wanted(eng, sl->want);
    sl->f32 = (eng->params.products & OCT_PRODUCT_F32) != 0;
    sl->direct_out = out->pinned;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            img->present = false;
            if (!sl->want[m][k]) continue;
            oct_err err = oct_image_prepare(eng, m, k, img, e);
            if (err != OCT_OK) {
                img->present = false;
                return oct_error_prefix(e, err, "cuda");
            }
            if (img->count > sl->prod[m][k].cap)
                return oct_error_set(e, OCT_ESIZE, "cuda: product %s/%s has %zu pixels, more than the %zu planned",
                                     oct_kind_name(k), oct_method_name(m), img->count, sl->prod[m][k].cap);
        }
    if (!sl->direct_out && !sl->h_out)
        TRY(halloc(s, (void **)&sl->h_out, s->h_out_bytes, "the product staging", e));

    /* input: d_raw of this slot is free once the conversion of its last frame ran */
    CU(cudaStreamWaitEvent(s->s_copy, sl->ev[EV_CONV], 0));
    CU(cudaEventRecord(sl->ev_h2d0, s->s_copy));
    sl->direct_in = find_reg(s, frame, s->frame_bytes) != NULL;
    sl->nparts = sl->direct_in && parts_apply(eng) ? s->parts : 1;
    if (sl->direct_in) {
        size_t pb = s->frame_bytes / sl->nparts; /* S % parts == 0 (create) */
        for (int p = 0; p < sl->nparts; p++) {
            CU(cudaMemcpyAsync((uint8_t *)sl->d_raw + p * pb, (const uint8_t *)frame + p * pb, pb,
                               cudaMemcpyHostToDevice, s->s_copy));
            if (sl->nparts > 1) CU(cudaEventRecord(sl->ev_in[p], s->s_copy));
        }
    } else {
        /* pageable: through pinned staging; the CPU copy of chunk i+1 overlaps the DMA of chunk i */
        const uint8_t *src = (const uint8_t *)frame;
        for (size_t off = 0; off < s->frame_bytes; off += s->stage_bytes) {
            size_t nb = std::min(s->stage_bytes, s->frame_bytes - off);
            int b = s->stg_next;
            s->stg_next ^= 1;
            CU(cudaEventSynchronize(s->ev_stg[b]));
            par_memcpy(s->h_stage[b], src + off, nb, s->stage_threads);
            CU(cudaMemcpyAsync((uint8_t *)sl->d_raw + off, s->h_stage[b], nb, cudaMemcpyHostToDevice, s->s_copy));
            CU(cudaEventRecord(s->ev_stg[b], s->s_copy));
        }
    }
    CU(cudaEventRecord(sl->ev_h2d1, s->s_copy));

    /* compute after the input copy (its first part: run_device waits for
     * each part) and after the slot's last download */
    CU(cudaStreamWaitEvent(s->s_comp, sl->nparts > 1 ? sl->ev_in[0] : sl->ev_h2d1, 0));
    CU(cudaStreamWaitEvent(s->s_comp, sl->ev_d2h1, 0));
    TRY(run_device(eng, sl, sl->want, eng->hold_history, e));

    /* products -> host (own stream: overlaps the next frame's compute) */
    float *h_f32 = (float *)sl->h_out;
    uint8_t *h_u8 = sl->h_out + s->out_pixels * sizeof(float);
    CU(cudaStreamWaitEvent(s->s_d2h, sl->ev[EV_PROD], 0));
    CU(cudaEventRecord(sl->ev_d2h0, s->s_d2h));
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            if (!sl->want[m][k] || img->count == 0) continue;
            ProdBuf *pb = &sl->prod[m][k];
            uint8_t *du = sl->direct_out ? img->u8 : h_u8 + pb->off;
            CU(cudaMemcpyAsync(du, pb->u, img->count, cudaMemcpyDeviceToHost, s->s_d2h));
            if (sl->f32) {
                float *df = sl->direct_out ? img->f32 : h_f32 + pb->off;
                CU(cudaMemcpyAsync(df, pb->f, img->count * sizeof(float), cudaMemcpyDeviceToHost, s->s_d2h));
            }
        }
    CU(cudaEventRecord(sl->ev_d2h1, s->s_d2h));
    return OCT_OK;
}

oct_err cuda_submit(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    CudaState *s = ST(eng);
    if (s->count >= DEPTH)
        return oct_error_set(e, OCT_EAGAIN, "cuda: %d frames in flight", s->count);
    CU(cudaSetDevice(s->device));
    if (s->count == 0) s->head = 0; /* synchronous use keeps to slot 0 (one staging) */
    int si = (s->head + s->count) % DEPTH;
    Slot *sl = &s->slot[si];
    sl->t_submit = oct_now_ms();
    oct_err err = submit_inner(eng, s, sl, frame, out, e);
    if (err != OCT_OK) {
        drain(s);
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) out->img[m][k].present = false;
        return err;
    }
    sl->out = out;
    sl->ticket = out->ticket;
    s->count++;
    s->last_slot = si;
    s->frame_on_device = true;
    return OCT_OK;
}

oct_err cuda_complete(oct_engine *eng, oct_products **done, int timeout_ms, oct_error *e)
{
    CudaState *s = ST(eng);
    *done = NULL;
    if (s->count == 0) return oct_error_set(e, OCT_ESTATE, "cuda: no frame in flight");
    CU(cudaSetDevice(s->device));
    Slot *sl = &s->slot[s->head];
    oct_err err = wait_event(sl->ev_d2h1, timeout_ms, "the oldest frame", e);
    if (err == OCT_ETIMEDOUT) return err;
    /* done (or failed): dequeue */
    s->head = (s->head + 1) % DEPTH;
    s->count--;
    oct_products *out = sl->out;
    sl->out = NULL;
    *done = out;
    if (err == OCT_OK) err = check_bad(s, sl, e);
    if (err != OCT_OK) {
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) out->img[m][k].present = false;
        return err;
    }
    if (!sl->direct_out) {
        float *h_f32 = (float *)sl->h_out;
        uint8_t *h_u8 = sl->h_out + s->out_pixels * sizeof(float);
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                oct_image *img = &out->img[m][k];
                if (!sl->want[m][k] || img->count == 0) continue;
                const ProdBuf *pb = &sl->prod[m][k];
                memcpy(img->u8, h_u8 + pb->off, img->count);
                if (sl->f32 && img->f32) memcpy(img->f32, h_f32 + pb->off, img->count * sizeof(float));
            }
    }
    oct_stage_times *t = &eng->times;
    memset(t, 0, sizeof *t);
    t->h2d_ms = ev_ms(sl->ev_h2d0, sl->ev_h2d1);
    device_times(sl, t);
    t->d2h_ms = ev_ms(sl->ev_d2h0, sl->ev_d2h1);
    t->total_ms = oct_now_ms() - sl->t_submit;
    return OCT_OK;
}

oct_err cuda_input_done(oct_engine *eng, uint64_t ticket, int timeout_ms, oct_error *e)
{
    CudaState *s = ST(eng);
    for (int i = 0; i < s->count; i++) {
        Slot *sl = &s->slot[(s->head + i) % DEPTH];
        if (sl->ticket != ticket) continue;
        if (!sl->direct_in) return OCT_OK; /* read by the CPU inside submit */
        CU(cudaSetDevice(s->device));
        return wait_event(sl->ev_h2d1, timeout_ms, "the frame's input copy", e);
    }
    return OCT_OK; /* completed */
}

int cuda_inflight(const oct_engine *eng) { return ST(eng)->count; }

oct_err cuda_register_host(oct_engine *eng, const void *ptr, size_t bytes, oct_error *e)
{
    CudaState *s = ST(eng);
    const uint8_t *a = (const uint8_t *)ptr;
    for (int i = 0; i < s->nreg; i++)
        if (a < s->reg[i].ptr + s->reg[i].bytes && s->reg[i].ptr < a + bytes)
            return oct_error_set(e, OCT_EINVAL, "cuda: host range %p + %zu overlaps one registered before",
                                 ptr, bytes);
    if (s->nreg >= MAX_REG)
        return oct_error_set(e, OCT_EINVAL, "cuda: %d host ranges registered already (the most)", MAX_REG);
    CU(cudaSetDevice(s->device));
    int ro = 0;
    if (cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, s->device) != cudaSuccess) {
        cudaGetLastError();
        ro = 0;
    }
    /* read-only where supported (the ring is mapped PROT_READ); else a plain
     * registration, which works for writable memory only */
    /* portable: several engines (devices) of one octd DMA from the same ring;
     * the first registers it, the others find it registered and use it */
    cudaError_t r = cudaHostRegister((void *)ptr, bytes,
                                     (ro ? cudaHostRegisterReadOnly : cudaHostRegisterDefault) |
                                         cudaHostRegisterPortable);
    bool owned = true;
    if (r == cudaErrorHostMemoryAlreadyRegistered) {
        cudaGetLastError();
        r = cudaSuccess;
        owned = false;
    }
    if (r != cudaSuccess) {
        cudaGetLastError();
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "cuda: cannot register %zu bytes of host memory for DMA%s: %s (use a pinned staging copy)",
                             bytes, ro ? " (read-only)" : " (read-only registration not supported by this device)",
                             cudaGetErrorString(r));
    }
    s->reg[s->nreg].ptr = a;
    s->reg[s->nreg].bytes = bytes;
    s->reg[s->nreg].owned = owned;
    s->nreg++;
    return OCT_OK;
}

void cuda_unregister_host(oct_engine *eng, const void *ptr)
{
    CudaState *s = ST(eng);
    for (int i = 0; i < s->nreg; i++) {
        if (s->reg[i].ptr != ptr) continue;
        warn_cuda("selecting the device", cudaSetDevice(s->device));
        /* input copies in flight may read it */
        warn_cuda("waiting for input copies", cudaStreamSynchronize(s->s_copy));
        if (s->reg[i].owned)
            warn_cuda("unregistering host memory", cudaHostUnregister((void *)ptr));
        cudaGetLastError();
        s->reg[i] = s->reg[--s->nreg];
        return;
    }
}

void cuda_products_free(oct_products *p) { warn_cuda("freeing pinned products", cudaFreeHost(p->priv)); }

/* One pinned block for every image of the geometry at its largest. */
oct_err cuda_products_init(oct_engine *eng, oct_products *p, uint32_t products, oct_error *e)
{
    bool f32 = (products & OCT_PRODUCT_F32) != 0;
    CudaState *s = ST(eng);
    CU(cudaSetDevice(s->device));
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *base = (uint8_t *)p->priv;
        size_t off = 0;
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            int D = (int)eng->depths[m];
            if (D == 0) continue;
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                size_t cap = (products & OCT_PRODUCT_BIT(k)) ? product_cap(s->N, s->L, s->S, D, k) : 0;
                if (cap == 0) continue;
                size_t nidx = (k == OCT_KIND_ENFACE || k == OCT_KIND_CONFOCAL) ? (size_t)D
                              : (k == OCT_KIND_XSEC_H || k == OCT_KIND_XSEC_V) ? 1 : 0;
                size_t of = off, ou = of + (f32 ? cap * sizeof(float) : 0), oi = (ou + cap + 63) & ~(size_t)63;
                off = (oi + nidx * sizeof(int32_t) + 63) & ~(size_t)63;
                if (pass == 0) continue;
                oct_image *img = &p->img[m][k];
                img->f32 = f32 ? (float *)(base + of) : NULL;
                img->u8 = base + ou;
                img->indices = nidx ? (int32_t *)(base + oi) : NULL;
                img->cap_pixels = cap;
                img->cap_indices = nidx;
                img->fixed = true;
            }
        }
        if (pass == 0) {
            total = off;
            if (total == 0) return OCT_OK;
            TRY(halloc(NULL, &p->priv, total, "the products", e));
        }
    }
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) p->img[m][k].fixed = true;
    p->pinned = true;
    p->priv_free = cuda_products_free;
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
    warn_cuda("selecting the device", cudaSetDevice(s->device));
    drain(s);
    free_state(s);
    eng->be = NULL;
}

oct_err cuda_update(oct_engine *eng, unsigned changed, oct_error *e)
{
    CudaState *s = ST(eng);
    CU(cudaSetDevice(s->device));
    TRY(refresh(eng, changed, e));
    if ((changed & OCT_CHG_LAGS) && s->R > 0 && s->both_paths) {
        oct_msi_path want = lag_count(eng) <= s->nl_cap ? OCT_MSI_GEMM : OCT_MSI_FFT;
        if (want != eng->msi_path) {
            /* The spectra's R2C moves between the CFD and compute streams
             * (and shares a work area): let the frames in flight finish. */
            cudaStream_t st[] = {s->s_copy, s->s_comp, s->s_cfd, s->s_d2h};
            for (cudaStream_t x : st) CU(cudaStreamSynchronize(x));
            eng->msi_path = want;
            s->x_on_comp = want == OCT_MSI_FFT;
            FFT(cufftSetStream(s->plan_x, s->x_on_comp ? s->s_comp : s->s_cfd));
            s->matrices_ok = false;
        }
    }
    if ((changed & OCT_CHG_LAGS) && eng->msi_path == OCT_MSI_GEMM && s->R > 0)
        TRY(ensure_matrices(eng, lag_count(eng), e));
    return OCT_OK;
}

/* Synchronous: one frame through the same pipeline (engine.c made sure
 * nothing is in flight). */
oct_err cuda_process(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    TRY(cuda_submit(eng, frame, out, e));
    oct_products *done = NULL;
    return cuda_complete(eng, &done, -1, e);
}

} /* namespace */

/* ------------------------------------------------------------------ */
/* public                                                               */

extern "C" {

const oct_backend_ops oct_cuda_backend = {
    "cuda", cuda_create, cuda_destroy, cuda_update, cuda_process,
    DEPTH, cuda_submit, cuda_complete, cuda_input_done, cuda_inflight,
    cuda_register_host, cuda_unregister_host, cuda_products_init};

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

static bool is_cuda(const oct_engine *eng) { return eng && eng->ops == &oct_cuda_backend && eng->be; }

int oct_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

int oct_engine_numa_node(const oct_engine *eng)
{
    if (!is_cuda(eng)) return -1;
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, eng->setup.device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    for (char *c = bus; *c; c++) *c = (char)tolower((unsigned char)*c); /* sysfs spells it so */
    char path[96];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", bus);
    FILE *f = fopen(path, "r");
    int node = -1;
    if (f) {
        if (fscanf(f, "%d", &node) != 1) node = -1;
        fclose(f);
    }
    return node >= 0 ? node : -1;
}

uint64_t oct_cuda_alloc_count(const oct_engine *eng)
{
    return is_cuda(eng) ? ST(eng)->allocs : 0;
}

const char *oct_cuda_gemm_name(const oct_engine *eng)
{
    if (!is_cuda(eng)) return "none";
    if (ST(eng)->R == 0 || eng->msi_path != OCT_MSI_GEMM) return "none";
    return gemm_names[ST(eng)->gemm_mode];
}

oct_err oct_cuda_time_device(oct_engine *eng, int reps, double *median_ms, oct_stage_times *t,
                             oct_error *e)
{
    if (!is_cuda(eng)) return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!s->frame_on_device)
        return oct_error_set(e, OCT_ESTATE, "cuda: no frame on the device yet: process one first");
    if (s->count > 0)
        return oct_error_set(e, OCT_ESTATE, "cuda: %d frame(s) in flight: complete them first", s->count);
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    Slot *sl = &s->slot[s->last_slot];
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
        err = run_device(eng, sl, want, true, e);
        cudaError_t cr = err == OCT_OK ? cudaEventSynchronize(sl->ev[EV_PROD]) : cudaSuccess;
        if (cr != cudaSuccess)
            err = oct_error_set(e, OCT_EDEVICE, "cuda: timing replay: %s", cudaGetErrorString(cr));
        memset(&ts[r], 0, sizeof ts[r]);
        device_times(sl, &ts[r]);
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
        err = check_bad(s, sl, e);
    }
    free(v);
    free(ts);
    return err;
}

oct_err oct_cuda_d2d_rate(oct_engine *eng, int reps, double *gbps, oct_error *e)
{
    if (!is_cuda(eng)) return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!gbps) return oct_error_set(e, OCT_EINVAL, "cuda: d2d rate: no result pointer");
    if (s->count > 0)
        return oct_error_set(e, OCT_ESTATE, "cuda: %d frame(s) in flight: complete them first", s->count);
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    /* d_xp and d_xk (S x M floats each) are scratch between frames */
    size_t bytes = (size_t)s->S * s->M * sizeof(float);
    Slot *sl = &s->slot[0];
    CU(cudaMemcpyAsync(s->d_xk, s->d_xp, bytes, cudaMemcpyDeviceToDevice, s->s_comp)); /* warm-up */
    CU(cudaEventRecord(sl->ev_h2d0, s->s_comp));
    for (int r = 0; r < reps; r++)
        CU(cudaMemcpyAsync(s->d_xk, s->d_xp, bytes, cudaMemcpyDeviceToDevice, s->s_comp));
    CU(cudaEventRecord(sl->ev_h2d1, s->s_comp));
    CU(cudaEventSynchronize(sl->ev_h2d1));
    float ms = 0.0f;
    CU(cudaEventElapsedTime(&ms, sl->ev_h2d0, sl->ev_h2d1));
    *gbps = ms > 0 ? 2.0 * (double)bytes * reps / ((double)ms * 1e-3) / 1e9 : 0.0;
    return OCT_OK;
}

oct_err oct_cuda_h2d_rate(oct_engine *eng, const void *src, size_t bytes, int reps, double *gbps,
                          oct_error *e)
{
    if (!is_cuda(eng)) return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!src || !gbps || bytes == 0 || bytes > s->frame_bytes)
        return oct_error_set(e, OCT_EINVAL, "cuda: h2d rate: %zu bytes (1..%zu) from %p", bytes,
                             s->frame_bytes, src);
    if (s->count > 0)
        return oct_error_set(e, OCT_ESTATE, "cuda: %d frame(s) in flight: complete them first", s->count);
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    Slot *sl = &s->slot[0];
    CU(cudaMemcpyAsync(sl->d_raw, src, bytes, cudaMemcpyHostToDevice, s->s_copy)); /* warm-up */
    CU(cudaEventRecord(sl->ev_h2d0, s->s_copy));
    for (int r = 0; r < reps; r++)
        CU(cudaMemcpyAsync(sl->d_raw, src, bytes, cudaMemcpyHostToDevice, s->s_copy));
    CU(cudaEventRecord(sl->ev_h2d1, s->s_copy));
    CU(cudaEventSynchronize(sl->ev_h2d1));
    double ms = ev_ms(sl->ev_h2d0, sl->ev_h2d1);
    *gbps = ms > 0 ? (double)bytes * reps / (ms * 1e-3) / 1e9 : 0.0;
    s->frame_on_device = false; /* d_raw of slot 0 now holds these bytes */
    return OCT_OK;
}

} /* extern "C" */
