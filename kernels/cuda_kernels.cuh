/* cuda_kernels.cuh - the device code of the CUDA backend (kernels and the
 * table-driven product sink), included by engine_cuda.cu, its host code:
 * one translation unit, so that the sink's __constant__ layout tables and
 * the kernels need no relocatable device code.  Per-element formulas shared
 * with the CPU (gray levels, FPN statistics) come from formulas.h. */
#ifndef OCT_CUDA_KERNELS_CUH
#define OCT_CUDA_KERNELS_CUH

#include <climits>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cstdint>

#include "formulas.h"
#include "plan.h"
#include "disp_fused.cuh" /* af_disp_row: the fused dispersion chain (issue 19) */

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

/* Split FP16 (issue 19.4): v = sc*a (sc a power of two, exact); hi =
 * fp16(v), lo = fp16(v - hi); [hi | hi | lo] as store_split.  sc keeps
 * |v| <= 2^14 (no overflow: fp16 max 65504); lo is >= 2^-24 apart (fp16
 * subnormals), i.e. 2^-38 of the range: the split is exact to ~2^-22 of
 * each value, as the TF32 split. */
__device__ __forceinline__ void store_split_h(__half *dst, long long j, int n, int M, float4 o, float sc)
{
    float v[4] = {o.x * sc, o.y * sc, o.z * sc, o.w * sc};
    __half hi[4], lo[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        hi[k] = __float2half_rn(v[k]);
        lo[k] = __float2half_rn(v[k] - __half2float(hi[k]));
    }
    __half2 *p = reinterpret_cast<__half2 *>(dst + j * 3 * M + n); /* n % 4 == 0: 8-byte aligned */
    int M2 = M / 2;
    p[0] = __halves2half2(hi[0], hi[1]);
    p[1] = __halves2half2(hi[2], hi[3]);
    p[M2] = p[0];
    p[M2 + 1] = p[1];
    p[2 * M2] = __halves2half2(lo[0], lo[1]);
    p[2 * M2 + 1] = __halves2half2(lo[2], lo[3]);
}

template <typename T>
__global__ void convert_kernel(const T *__restrict__ raw, float *__restrict__ x,
                               float *__restrict__ x3, float *__restrict__ xp,
                               float *__restrict__ xp3, long long n4, int M, int sh,
                               const float *__restrict__ w, const float *__restrict__ bg,
                               int *__restrict__ bad, long long jbase, __half *__restrict__ x3h,
                               float hsc, __half *__restrict__ xp3h = NULL, float hscp = 1.0f)
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
    if (x3h) store_split_h(x3h, j, n, M, o, hsc);
    if (xp) reinterpret_cast<float4 *>(xp)[i] = d;
    if (xp3) store_split(xp3, j, n, M, d);
    if (xp3h) store_split_h(xp3h, j, n, M, d, hscp); /* x' split FP16: the CFD matrix product */
}

/* The CFD as a matrix product (cuda.cfd, issue 19): the chain's input for
 * the M unit spectra, row r = e_r (w == NULL: the k-linearisation's input
 * x') or w[r] e_r (the windowed spectrum's DFT input without k-lin). */
__global__ void cfd_basis_kernel(const float *__restrict__ w, int M, float *__restrict__ out)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * M) return;
    int r = (int)(i / M), c = (int)(i % M);
    out[i] = r == c ? (w ? w[c] : 1.0f) : 0.0f;
}

/* max |Re|, |Im| of the chain's outputs Y (M rows of ldy, bins [0, K)) into
 * *amax as float bits (non-negative floats order as unsigned integers). */
__global__ void cfd_amax_kernel(const float2 *__restrict__ Y, int ldy, int M, int K, unsigned *__restrict__ amax)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (i < (long long)M * K) {
        float2 z = Y[(i / K) * ldy + i % K];
        v = fmaxf(fabsf(z.x), fabsf(z.y));
    }
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0 && v > 0.0f) atomicMax(amax, __float_as_uint(v));
}

/* The CFD matrix as split FP16 ([hi | lo | hi] of sc * value per column, as
 * build_matrix16_kernel): column 2q / 2q + 1 = Re / Im of depth d = idx[q]
 * (idx NULL: d = q) over the unit spectra n: Y[n][d] (the chain's output for
 * e_n is column n of the map); 0 for d < F and d > hi (the sinks' cut-off). */
__global__ void build_cfd16_kernel(const float2 *__restrict__ Y, int ldy, int M, int K, const int *__restrict__ idx,
                                   int nd, int F, int hi, float sc, __half *__restrict__ A)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int kM = 3 * M;
    if (i >= (long long)nd * 2 * kM) return;
    int nn = (int)(i % kM);
    int part = nn / M, n = nn - part * M;
    long long c = i / kM;
    int q = (int)(c / 2);
    int d = idx ? idx[q] : q;
    float v = 0.0f;
    if (d >= F && d <= hi && d < K) {
        float2 z = Y[(long long)n * ldy + d];
        v = sc * ((c & 1) ? z.y : z.x);
    }
    __half h = __float2half_rn(v);
    A[i] = part == 1 ? __float2half_rn(v - __half2float(h)) : h;
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
 * n is smallest (ties: lowest segment), with the statistics of formulas.h.
 * Block (32, FPN_WARPS): lanes are 32 consecutive samples (coalesced),
 * warps take segments in turn.  Segments [sg0, sg1) of the frame's (sg1 <
 * 0: all); with b the mean of the best goes to b, else (the intra-frame
 * pipeline: a range per part) the best key, mean and segment to pk, pm, ps
 * for fpn_reduce_kernel. */
enum { FPN_WARPS = 16 };
template <typename T>
__global__ void fpn_kernel(const T *__restrict__ raw, long long S, int M, int sh, int G,
                           float *__restrict__ b, long long sg0, long long sg1, double *__restrict__ pk,
                           double *__restrict__ pm, long long *__restrict__ ps)
{
    __shared__ double s_key[FPN_WARPS][32], s_mean[FPN_WARPS][32];
    __shared__ long long s_seg[FPN_WARPS][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int n = blockIdx.x * 32 + tx;
    long long nseg = S < G ? 1 : S / G, len = S < G ? S : G;
    if (sg1 >= 0) nseg = sg1; /* a range of a frame with S >= G */
    double best = INFINITY, bmean = 0.0;
    long long bseg = LLONG_MAX;
    if (n < M) {
        for (long long sg = sg0 + ty; sg < nseg; sg += FPN_WARPS) {
            const T *p = raw + sg * len * M + n;
            oct_fpn_acc acc;
            oct_fpn_start(&acc, (double)Raw<T>::cv(p[0], sh));
            for (long long i = 1; i < len; i++) oct_fpn_add(&acc, (double)Raw<T>::cv(p[i * M], sh));
            double key = oct_fpn_key(&acc, (double)len);
            if (oct_fpn_better(key, sg, best, bseg)) { /* segments ascend per thread */
                best = key;
                bmean = oct_fpn_mean(&acc, (double)len);
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
            if (oct_fpn_better(s_key[y][tx], s_seg[y][tx], best, bseg)) {
                best = s_key[y][tx];
                bmean = s_mean[y][tx];
                bseg = s_seg[y][tx];
            }
        if (b) {
            b[n] = (float)bmean;
        } else {
            pk[n] = best;
            pm[n] = bmean;
            ps[n] = bseg;
        }
    }
}

/* The best of P per-part FPN results ([p][M] each; ties: lowest segment) -> b. */
__global__ void fpn_reduce_kernel(const double *__restrict__ pk, const double *__restrict__ pm,
                                  const long long *__restrict__ ps, int P, int M, float *__restrict__ b)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= M) return;
    double best = INFINITY, bmean = 0.0;
    long long bseg = LLONG_MAX;
    for (int p = 0; p < P; p++) {
        long long i = (long long)p * M + n;
        if (oct_fpn_better(pk[i], ps[i], best, bseg)) best = pk[i], bmean = pm[i], bseg = ps[i];
    }
    b[n] = (float)bmean;
}

/* k-linearisation of CFD: xk[j][n] = w[n] * sum_t wt[t][n] * xp[j][idx[t][n]]
 * (tables tap-major: coalesced).  A block takes SPB spectra at a time
 * (grid-stride), staged in shared memory (SPB * M floats), so that each tap
 * (index, weight) loaded from L1/L2 serves SPB spectra: the tables' reads,
 * T * 8 bytes per sample, were the kernel's main traffic with one spectrum
 * per block.  Each sum runs over t in order (the same bits for any SPB). */
template <int SPB>
__global__ void klin_kernel(const float *__restrict__ xp, const int *__restrict__ idx,
                            const float *__restrict__ wt, int T, const float *__restrict__ win,
                            int M, long long S, float *__restrict__ xk)
{
    extern __shared__ float row[];
    for (long long j = (long long)blockIdx.x * SPB; j < S; j += (long long)gridDim.x * SPB) {
        int ns = (int)(S - j < SPB ? S - j : SPB);
        for (int q = 0; q < ns; q++)
            for (int n = threadIdx.x; n < M; n += blockDim.x) row[q * M + n] = xp[(j + q) * M + n];
        __syncthreads();
        for (int n = threadIdx.x; n < M; n += blockDim.x) {
            float acc[SPB];
#pragma unroll
            for (int q = 0; q < SPB; q++) acc[q] = 0.0f;
            for (int t = 0; t < T; t++) {
                float wv = wt[(long long)t * M + n];
                int iv = idx[(long long)t * M + n];
#pragma unroll
                for (int q = 0; q < SPB; q++) acc[q] += wv * row[q * M + iv];
            }
            float wn = win[n];
#pragma unroll
            for (int q = 0; q < SPB; q++)
                if (q < ns) xk[(j + q) * M + n] = wn * acc[q];
        }
        __syncthreads();
    }
}

/* klin_kernel over spectra [0, S) of xp into xk on stream st: 4 spectra a
 * block while they fit 48 KiB of shared memory (M <= 3072), else 1. */
enum { KLIN_SPB = 4 };
inline void launch_klin(cudaStream_t st, const float *xp, const int *idx, const float *wt, int T, const float *win,
                        int M, long long S, float *xk)
{
    if ((size_t)KLIN_SPB * M * sizeof(float) <= 48u << 10) {
        unsigned gb = (unsigned)std::min((S + KLIN_SPB - 1) / KLIN_SPB, 1ll << 20);
        klin_kernel<KLIN_SPB><<<gb, 256, (size_t)KLIN_SPB * M * sizeof(float), st>>>(xp, idx, wt, T, win, M, S, xk);
    } else {
        unsigned gb = (unsigned)std::min(S, 1ll << 20);
        klin_kernel<1><<<gb, 256, (size_t)M * sizeof(float), st>>>(xp, idx, wt, T, win, M, S, xk);
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

/* Dispersion, fused (issue 19, cuda.disp fused; disp_fused.cuh): one block of
 * af_threads(M) threads per spectrum, 2 M complex of shared memory; in place
 * on the spectrum's K bins of X (d_X rows): pad, inverse DFT, phase / M, DFT,
 * the first K bins back. */
__global__ void disp_fused_kernel(float2 *X, int K, int M, int logM, int F, const float2 *__restrict__ ph,
                                  const float2 *__restrict__ tw, float invM)
{
    extern __shared__ float2 disp_sh[];
    float2 *row = X + (long long)blockIdx.x * K;
    af_disp_row(row, (uint32_t)K, (uint32_t)M, (uint32_t)logM, (uint32_t)F, ph, tw, invM, row, disp_sh, threadIdx.x,
                blockDim.x);
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

/* Deferred background (intra-frame pipeline, PARTS_DEFER): the parts are
 * transformed with an estimate bh of the background (the mean of part 0),
 * and the transform of d = b - bh is subtracted before the magnitude (all
 * steps up to |.| are linear).  bh keeps the parts' values centred (no
 * cancellation of a DC-sized term); d is small. */
__global__ void bg_estimate_kernel(const double *__restrict__ sum, double inv, int M, float *__restrict__ bh)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < M) bh[n] = (float)(sum[n] * inv);
}

/* d = b - bh: dp (x' of the correction, k-lin input) and w * d (x~). */
__global__ void bg_delta_kernel(const float *__restrict__ b, const float *__restrict__ bh,
                                const float *__restrict__ w, int M, float *__restrict__ dp,
                                float *__restrict__ dx)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= M) return;
    float d = b[n] - bh[n];
    dp[n] = d;
    dx[n] = w[n] * d;
}

/* Dispersion chain, deferred: bins [0, K) of the compensated spectra Z (rows
 * of M) back into X (rows of K), for the correction sink (SrcCfdCorr). */
__global__ void disp_store_kernel(const float2 *__restrict__ Z, int M, int K, long long nrows,
                                  float2 *__restrict__ X)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows * K) return;
    long long r = i / K;
    X[i] = Z[r * M + (i - r * K)];
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

/* The MSI matrix as split FP16 (as build_matrix_kernel with split, parts
 * [hi | lo | hi] of sc * mask, sc a power of two keeping |sc * mask| <= 2^14). */
__global__ void build_matrix16_kernel(const float *__restrict__ mf, int M, const int *__restrict__ ridx,
                                      int nslots, int nl, int W1, float sc, __half *__restrict__ B)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int kM = 3 * M;
    long long total = (long long)nslots * nl * kM;
    if (i >= total) return;
    int nn = (int)(i % kM);
    int part = nn / M, n = nn - part * M;
    long long c = i / kM;
    int li = (int)(c % nl);
    int s = (int)(c / nl);
    int r = ridx ? ridx[s] : s;
    int l = W1 + li;
    float v = sc * mf[(long long)r * M + ((n - l) & (M - 1))];
    __half hi = __float2half_rn(v);
    B[i] = part == 1 ? __float2half_rn(v - __half2float(hi)) : hi;
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
/* bias (NULL = none): a column vector subtracted before |.| (the MSI of
 * the deferred background correction, PARTS_DEFER) */
struct SrcGemm {
    const float *C;
    int ncol, nl;
    const float *bias;
    __device__ __forceinline__ float operator()(long long jl, int s) const
    {
        const float *p = C + jl * ncol + (long long)s * nl;
        float a = 0.0f;
        if (bias)
            for (int li = 0; li < nl; li++) a += fabsf(p[li] - bias[s * nl + li]);
        else
            for (int li = 0; li < nl; li++) a += fabsf(p[li]);
        return a;
    }
};
/* Floats of shared memory per warp that sink_value stages for a source
 * (0: it reads the source directly). */
template <class Src> inline int sink_stage_floats(const Src &) { return 0; }
enum { SINK_STAGE_NL = 31 }; /* the most lags SrcGemm stages */
inline int sink_stage_floats(const SrcGemm &g) { return g.nl <= SINK_STAGE_NL ? 32 * (g.nl | 1) : 0; }

/* The value of depth slot d0 + lane of row `row` (lanes past nd: 0). */
template <class Src>
__device__ __forceinline__ float sink_value(const Src &src, long long row, int d0, int nd, int lane, float *)
{
    return lane < nd ? src(row, d0 + lane) : 0.0f;
}
/* SrcGemm: the 32 slots' nl lags are one contiguous span of the row; lane i
 * reading its own nl (stride nl) makes every load touch ~nl cache lines.
 * The warp copies the span coalesced into w (stride nl|1: odd, so the
 * lanes' sums read distinct banks), then sums in the same order as
 * operator() (bit-identical results). */
__device__ __forceinline__ float sink_value(const SrcGemm &src, long long row, int d0, int nd, int lane, float *w)
{
    if (!w) return lane < nd ? src(row, d0 + lane) : 0.0f;
    const int nl = src.nl, ws = nl | 1, n = nd * nl;
    const float *p = src.C + row * src.ncol + (long long)d0 * nl;
    /* every load of the lane first (n <= 32 * SINK_STAGE_NL), independent
     * of each other: one memory round trip per row.  (That alone left the
     * B-scan MSI sink at 30 us on an H200: it was bound by the integer
     * division of every store, which an odd lag count - ws == nl - does not
     * need; that change is not measured yet.) */
    float v[SINK_STAGE_NL];
    /* bias (PARTS_DEFER's MSI): the GEMM of b - bh, subtracted before |.| */
    const float *b = src.bias ? src.bias + d0 * nl : NULL;
#pragma unroll
    for (int q = 0; q < SINK_STAGE_NL; q++) {
        const int i = lane + 32 * q;
        v[q] = i < n ? (b ? p[i] - b[i] : p[i]) : 0.0f;
    }
    if (ws == nl) { /* odd lag count: the staged layout is the row's own (no division) */
#pragma unroll
        for (int q = 0; q < SINK_STAGE_NL; q++) {
            const int i = lane + 32 * q;
            if (i < n) w[i] = v[q];
        }
    } else {
#pragma unroll
        for (int q = 0; q < SINK_STAGE_NL; q++) {
            const int i = lane + 32 * q;
            if (i < n) {
                const int s = i / nl;
                w[s * ws + (i - s * nl)] = v[q];
            }
        }
    }
    __syncwarp();
    float a = 0.0f;
    if (lane < nd)
        for (int li = 0; li < nl; li++) a += fabsf(w[lane * ws + li]);
    __syncwarp(); /* w is reused by the warp's next row */
    return a;
}
/* |Re + i Im| of a GEMM output with (Re, Im) in columns (2s, 2s+1): the CMS,
 * and the CFD as a matrix product (cuda.cfd); bias (NULL = none): pairs
 * subtracted first (the CFD's deferred background correction) */
struct SrcCms {
    const float *C;
    int ncol;
    const float *bias;
    __device__ __forceinline__ float operator()(long long jl, int s) const
    {
        const float *p = C + jl * ncol + 2ll * s;
        float re = p[0], im = p[1];
        if (bias) re -= bias[2 * s], im -= bias[2 * s + 1];
        return sqrtf(re * re + im * im);
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
/* CFD with a deferred background: |X[d] - c[d]| (c: the transform of the
 * background's correction; X: R2C or, with dispersion, the stored bins of
 * the compensated spectra), 0 below F and above hi (SrcCfd's M - F, none
 * for dispersion as SrcDisp). */
struct SrcCfdCorr {
    const float2 *X, *c;
    int K, F, hi;
    __device__ __forceinline__ float operator()(long long jl, int d) const
    {
        if (d < F || d > hi) return 0.0f;
        float2 z = X[jl * K + d], q = c[d];
        float re = z.x - q.x, im = z.y - q.y;
        return sqrtf(re * re + im * im);
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

/* The product layout of one method for one frame slot (plan.h's layout
 * rows with the slot's device buffers), in __constant__ memory: every warp
 * reads the same row at the same time (broadcast). */
enum { SINK_GROUP_MAX = 4 }; /* rows of one depth set (en-face + confocal, the two slabs) */
struct SinkRow {
    float *f;                   /* device f32 image */
    uint8_t *u;                 /* device gray image */
    long long st_l, st_a, st_d; /* pixel = l*st_l + a*st_a (+ slot*st_d, reduce none) */
    int select, sel;            /* enum oct_select, its line / column */
    int depths, reduce;         /* enum oct_depthset, enum oct_reduce */
    int d0, nslots;             /* RANGE: first depth; slots of the row */
    oct_gray g;
};
struct SinkTable {
    int n, D, N, Q;             /* rows, depths, A-scans, en-face depths */
    int h, v;                   /* xsec line / column (gathered rows, MODE_XS) */
    const int *eidx;            /* en-face depths (device) */
    SinkRow row[OCT_KIND_ANGIO_FIRST]; /* GROUP rows (angiography) never come here: refused on CUDA */
};
/* Constant memory is per device, not per engine: each engine takes one of
 * SINK_ENGINES ranges of tables (slot-major, then method) at create. */
enum { SINK_ENGINES = 8, SINK_PER_ENGINE = OCT_ENGINE_DEPTH_MAX * OCT_METHOD_COUNT,
       SINK_TABLES = SINK_ENGINES * SINK_PER_ENGINE };
static_assert(sizeof(SinkTable) * SINK_TABLES <= 60 * 1024, "the sink tables must fit constant memory");
__constant__ SinkTable c_sink[SINK_TABLES];

enum { MODE_ALL = 0, MODE_SUB = 1, MODE_XS = 2 };

/* The rows of `set` (<= SINK_GROUP_MAX, one depth set) over slots
 * [0, ns): depth idx[s] (idx = NULL: d0 + s).  Reduced rows combine the
 * lanes' partial sums / maxima by shuffles (the conditions are the same for
 * the whole warp).  w (the warp's staging, NULL = none): contiguous slots
 * (idx = NULL) are read 32 at a time through sink_value (same order of
 * operations: the same bits). */
template <class Src>
__device__ __forceinline__ void sink_slots(const Src &src, const SinkTable &k, unsigned set, long long row,
                                           long long l, long long a, const int *idx, int d0, int ns, int lane,
                                           float *w)
{
    unsigned packed = 0;
    int nr = 0;
    for (unsigned b = set; b && nr < SINK_GROUP_MAX; b &= b - 1) packed |= (unsigned)(__ffs(b) - 1) << (4 * nr++);
    float acc[SINK_GROUP_MAX];
#pragma unroll
    for (int c = 0; c < SINK_GROUP_MAX; c++)
        acc[c] = c < nr && k.row[(packed >> (4 * c)) & 15].reduce == OCT_REDUCE_MAX ? -INFINITY : 0.0f;
    const bool staged = w && !idx;
    for (int base = 0; base < ns; base += 32) {
        const int s = base + lane;
        float val;
        if (staged) { /* the whole warp, before the lanes past ns leave (last round only) */
            val = sink_value(src, row, d0 + base, min(32, ns - base), lane, w);
            if (s >= ns) break;
        } else {
            if (s >= ns) break;
            val = src(row, idx ? idx[s] : d0 + s);
        }
#pragma unroll
        for (int c = 0; c < SINK_GROUP_MAX; c++) {
            if (c >= nr) break;
            const SinkRow &r = k.row[(packed >> (4 * c)) & 15];
            if (r.reduce == OCT_REDUCE_NONE) {
                long long o = l * r.st_l + a * r.st_a + (long long)s * r.st_d;
                r.f[o] = val;
                r.u[o] = oct_gray_level(val, r.g);
            } else {
                acc[c] = r.reduce == OCT_REDUCE_MAX ? fmaxf(acc[c], val) : acc[c] + val;
            }
        }
    }
#pragma unroll
    for (int c = 0; c < SINK_GROUP_MAX; c++) {
        if (c >= nr) break;
        const SinkRow &r = k.row[(packed >> (4 * c)) & 15];
        if (r.reduce == OCT_REDUCE_NONE) continue;
        float v = acc[c];
        if (r.reduce == OCT_REDUCE_MAX) {
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
        } else {
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        }
        if (lane == 0) {
            if (r.reduce == OCT_REDUCE_MEAN) v /= (float)r.nslots;
            long long o = l * r.st_l + a * r.st_a;
            r.f[o] = v;
            r.u[o] = oct_gray_level(v, r.g);
        }
    }
}

/* One warp per row, table c_sink[tab].  MODE_ALL: rows are spectra j0..,
 * the source has every depth; MODE_SUB: spectra j0.., the source slots are
 * the en-face depths (en-face rows only); MODE_XS: rows are gathered
 * spectra (nh of line h, then those of column v; cross-section rows only). */
template <class Src>
__global__ void sink_kernel(Src src, int tab, int mode, long long j0, long long nrows, int nh, int skip_all,
                            int wstage)
{
    extern __shared__ float stage[]; /* wstage floats per warp (sink_value), 0 = none */
    const SinkTable &k = c_sink[tab];
    float *w = wstage ? stage + (threadIdx.x >> 5) * wstage : NULL;
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= nrows) return;
    long long l, a;
    int part = 0; /* 1: a gathered spectrum of line h, 2: of column v */
    if (mode == MODE_XS) {
        long long gi = j0 + row;
        if (gi < nh) { l = k.h; a = gi; part = 1; }
        else { l = gi - nh; a = k.v; part = 2; }
    } else {
        long long j = j0 + row;
        l = j / k.N;
        a = j % k.N;
    }
    unsigned all = 0, enf = 0, rng = 0;
    int d0 = 0, nrng = 0;
    for (int i = 0; i < k.n; i++) {
        const SinkRow &r = k.row[i];
        if (r.select == OCT_SEL_GROUP) continue; /* angiography: not per spectrum (refused on CUDA) */
        if ((part == 1 && r.select != OCT_SEL_LINE) || (part == 2 && r.select != OCT_SEL_COLUMN)) continue;
        if ((r.select == OCT_SEL_LINE && l != r.sel) || (r.select == OCT_SEL_COLUMN && a != r.sel)) continue;
        if (r.depths == OCT_DEPTHS_ALL) all |= 1u << i;
        else if (r.depths == OCT_DEPTHS_ENFACE) enf |= 1u << i;
        else { rng |= 1u << i; d0 = r.d0; nrng = r.nslots; } /* the rows of a range share it */
    }
    if (mode == MODE_SUB) all = rng = 0;
    if (skip_all) all = 0; /* sink_tile_kernel wrote them */
    if (all) {
        for (int d = lane; d < k.D; d += 32) {
            float val = src(row, d);
            for (unsigned b = all; b; b &= b - 1) {
                const SinkRow &r = k.row[__ffs(b) - 1];
                long long o = l * r.st_l + a * r.st_a + (long long)d * r.st_d;
                r.f[o] = val;
                r.u[o] = oct_gray_level(val, r.g);
            }
        }
    }
    if (enf) sink_slots(src, k, enf, row, l, a, mode == MODE_SUB ? NULL : k.eidx, 0, k.Q, lane, w);
    if (rng) sink_slots(src, k, rng, row, l, a, NULL, d0, nrng, lane, w);
}

/* Where row `row` of a sink launch goes: line l, A-scan a, and the part of
 * a gathered cross-section launch (0: a spectrum of the frame, 1: of line
 * h, 2: of column v); as sink_kernel. */
__device__ __forceinline__ void sink_where(const SinkTable &k, int mode, long long j0, long long row, int nh,
                                           long long *l, long long *a, int *part)
{
    *part = 0;
    if (mode == MODE_XS) {
        long long gi = j0 + row;
        if (gi < nh) { *l = k.h; *a = gi; *part = 1; }
        else { *l = gi - nh; *a = k.v; *part = 2; }
    } else {
        long long j = j0 + row;
        *l = j / k.N;
        *a = j % k.N;
    }
}

/* The rows of depth set ALL (never reduced, plan.c) in tiles of SINK_TR
 * rows x SINK_TD depths, one tile per block of SINK_TW warps (grid: row
 * tiles x depth tiles): a small frame (a B-scan of 500 spectra: 256 tiles
 * of 8 warps) fills the GPU, where a warp per row gave 63 blocks.  The
 * values of the rows some layout row wants are computed with the lanes
 * along the depths (the sources are contiguous in depth) into shared
 * memory; each layout row is then stored
 * with the lanes along whichever of its row / depth strides is the smaller:
 * coalesced stores for the depth-major B-scan and cross-section images
 * (st_d = N or L) as for the depth-minor volume (st_d = 1).  The other
 * depth sets (en-face, ranges; reduced) stay with sink_kernel.  Dynamic
 * shared memory: SINK_TW * wstage floats for sink_value's staging. */
enum { SINK_TR = 32, SINK_TD = 32, SINK_TW = 8 };

/* Async (issue 19, setup.cuda.sink tile): the tile's GEMM output (SINK_TR
 * rows of nd slots x nl lags, contiguous in each row) copied into shared
 * memory by the whole block with cp.async, every copy in flight at once and
 * none through registers, then each lane sums its slot's lags in
 * operator()'s order (the same bits as sink_value).  sink_value's register
 * staging keeps one row per warp in flight: the B-scan MSI sink read its
 * 21.5 MB at ~0.7 TB/s (30 us of ~95 per frame).  Dynamic shared memory:
 * SINK_TR * SINK_TD * nl floats (nl <= SINK_STAGE_NL: at most 127 KB). */
inline size_t sink_async_bytes(const SrcGemm &g) { return (size_t)SINK_TR * SINK_TD * g.nl * sizeof(float); }
template <class Src>
__device__ __forceinline__ void sink_tile_fill_async(const Src &, float *, long long, int, int, const unsigned *,
                                                     float (*)[SINK_TD + 1])
{
} /* only SrcGemm is launched with it */
__device__ __forceinline__ void sink_tile_fill_async(const SrcGemm &src, float *buf, long long r0, int d0, int nd,
                                                     const unsigned *s_rows, float (*t)[SINK_TD + 1])
{
    const int nl = src.nl, n = nd * nl, rs = SINK_TD * nl; /* floats of a row's span; row stride in buf */
    const int tid = threadIdx.y * 32 + threadIdx.x;
    const long long off = (long long)d0 * nl; /* d0: a multiple of 32 */
    /* 16-byte copies where the spans are aligned (the B-scan: ncol 10752, 672 floats a row) */
    if (src.ncol % 4 == 0 && n % 4 == 0 && (reinterpret_cast<uintptr_t>(src.C) & 15) == 0) {
        const int n4 = n / 4;
        for (int e = tid; e < SINK_TR * n4; e += 32 * SINK_TW) {
            const int rr = e / n4, q = e - rr * n4;
            if (s_rows[rr])
                __pipeline_memcpy_async(buf + rr * rs + 4 * q, src.C + (r0 + rr) * src.ncol + off + 4 * q, 16);
        }
    } else {
        for (int e = tid; e < SINK_TR * n; e += 32 * SINK_TW) {
            const int rr = e / n, q = e - rr * n;
            if (s_rows[rr])
                __pipeline_memcpy_async(buf + rr * rs + q, src.C + (r0 + rr) * src.ncol + off + q, 4);
        }
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    const int tx = threadIdx.x, ty = threadIdx.y;
    const float *b = src.bias ? src.bias + (long long)(d0 + tx) * nl : NULL;
    for (int rr = ty; rr < SINK_TR; rr += SINK_TW) {
        if (!s_rows[rr]) continue; /* the same for the warp */
        float a = 0.0f;
        if (tx < nd) {
            const float *w = buf + rr * rs + tx * nl; /* nl odd: the lanes read distinct banks */
            if (b)
                for (int li = 0; li < nl; li++) a += fabsf(w[li] - b[li]);
            else
                for (int li = 0; li < nl; li++) a += fabsf(w[li]);
        }
        t[rr][tx] = a;
    }
}

template <class Src, bool Async = false>
__global__ void __launch_bounds__(32 * SINK_TW) sink_tile_kernel(Src src, int tab, int mode, long long j0,
                                                                 long long nrows, int nh, int wstage)
{
    __shared__ float t[SINK_TR][SINK_TD + 1];
    __shared__ long long s_l[SINK_TR], s_a[SINK_TR];
    __shared__ unsigned s_rows[SINK_TR]; /* the layout rows (bits of c_sink's rows) each row feeds */
    extern __shared__ float4 stage4[]; /* float4: 16-byte aligned for the async copies */
    float *stage = reinterpret_cast<float *>(stage4);
    const SinkTable &k = c_sink[tab];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long r0 = (long long)blockIdx.x * SINK_TR;
    const int d0 = (int)blockIdx.y * SINK_TD;
    const int nd = min(SINK_TD, k.D - d0);
    unsigned all = 0;
    for (int i = 0; i < k.n; i++) {
        const SinkRow &r = k.row[i];
        if (r.select != OCT_SEL_GROUP && r.depths == OCT_DEPTHS_ALL && r.reduce == OCT_REDUCE_NONE) all |= 1u << i;
    }
    if (!all || nd <= 0 || mode == MODE_SUB) return; /* the same for the whole block */
    /* where each row goes, and the layout rows it feeds: a volume's CFD pass
     * (en-face + cross-sections) has ALL rows only for line h and column v,
     * and the other spectra are not read at all */
    unsigned mine = 0;
    if (ty == 0 && r0 + tx < nrows) {
        long long l, a;
        int part;
        sink_where(k, mode, j0, r0 + tx, nh, &l, &a, &part);
        for (unsigned b = all; b; b &= b - 1) {
            const SinkRow &r = k.row[__ffs(b) - 1];
            if ((part == 1 && r.select != OCT_SEL_LINE) || (part == 2 && r.select != OCT_SEL_COLUMN)) continue;
            if ((r.select == OCT_SEL_LINE && l != r.sel) || (r.select == OCT_SEL_COLUMN && a != r.sel)) continue;
            mine |= b & -b;
        }
        s_l[tx] = l, s_a[tx] = a, s_rows[tx] = mine;
    } else if (ty == 0) {
        s_rows[tx] = 0;
    }
    if (!__syncthreads_or(mine != 0)) return; /* no row of this tile is wanted */
    if constexpr (Async) {
        sink_tile_fill_async(src, stage, r0, d0, nd, s_rows, t);
    } else {
        float *w = wstage ? stage + ty * wstage : NULL;
#pragma unroll 4
        for (int rr = ty; rr < SINK_TR; rr += SINK_TW)
            if (s_rows[rr]) /* the same for the warp */
                t[rr][tx] = sink_value(src, r0 + rr, d0, nd, tx, w);
    }
    __syncthreads();
    for (unsigned b = all; b; b &= b - 1) {
        const SinkRow &r = k.row[__ffs(b) - 1];
        const long long step = r.select == OCT_SEL_COLUMN ? r.st_l : r.st_a; /* address step from row to row */
        const bool rows_fast = llabs(step) < llabs(r.st_d);
        const unsigned bit = b & -b;
        for (int e = ty * 32 + tx; e < SINK_TR * SINK_TD; e += 32 * SINK_TW) {
            const int rr = rows_fast ? (e & 31) : (e >> 5), dd = rows_fast ? (e >> 5) : (e & 31);
            if (!(s_rows[rr] & bit) || dd >= nd) continue;
            const long long l = s_l[rr], a = s_a[rr];
            const float val = t[rr][dd];
            const long long o = l * r.st_l + a * r.st_a + (long long)(d0 + dd) * r.st_d;
            r.f[o] = val;
            r.u[o] = oct_gray_level(val, r.g);
        }
    }
}

#endif
