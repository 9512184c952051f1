/* register_cuda.cu - the CUDA backend of volume registration (SPEC 10.4):
 * the CPU algorithm of register.c step for step, on the device.
 *
 *  - cuFFT plans made once per handle: batched 2D R2C of all lines (the
 *    reference's line spectra are cached; a target's are computed once),
 *    strided C2C along x (fine) and y, x (coarse) of the window surfaces;
 *    batched 2D / 3D C2R of whole surfaces (fine_full, and the surfaces
 *    that the tests read).
 *  - a stripe's 3D spectrum is not transformed: its S lines, zero-padded to
 *    L, have the spectrum sum_s e^(-2 pi i ky s / L) X_s(kx, kz) of the
 *    2D spectra X_s of the coarse lines (all made once per target), summed
 *    in the cross-power kernel (saves a 3D R2C and the padded copy per stripe).
 *  - the target's finiteness is counted on the device (the common code
 *    looks for the first bad value on the host only when there is one).
 *  - fine surfaces only on the search window (the default; fine_full: the
 *    whole 2D C2R surfaces instead): the cross powers are written
 *    [x-frequency][pair][k]; one SGEMM inverts every row along z at the
 *    2 sz + 1 lags searched only (a real [2 Dh][2 (2 sz + 1)] matrix of the
 *    Hermitian weights m_k and twiddles, applied to the complex rows as
 *    real pairs), then one strided batched 1D C2C along x of those few
 *    columns, and the peak is read from the real part (the GEMM on TF32
 *    tensor cores unless oct_register_options.tf32 is off).  Same sums as the
 *    C2R; it skips the C2R's z pass over all D lags (and the pre- and post-
 *    processing passes of an odd D), the largest part of the fine stage at
 *    192x200x513.  (An earlier direct z sum, a warp per row, was latency-
 *    bound and slower than the C2R: H200, 2026-11-24.)  The coarse stage
 *    alike: the stripe cross powers [y][x][stripe][k], one GEMM to the
 *    2 szc + 1 lags, a 2D C2C along y and x batched over (stripe, lag).
 *    (At D = 512 the whole C2R has no odd-length passes and the GEMM's
 *    flops per row exceed the FFT's: register-512 67.3 vs 58.4 ms device
 *    on an H200, 2026-11-24; README "Window surfaces".)
 *  - the split test's parts (halves, end thirds) in one pass: their masked
 *    lines and spectra back to back (x2h [part][line]), one download.
 *  - the Newton refine: the lines' cross powers made once (not per step),
 *    each step's sums over several blocks per line, a small kernel per
 *    step sums them, steps and makes the next phasors (no host round trip).
 *  - window and low-pass weights and the stripe twiddles are tables made
 *    once per handle by the same inline functions (no cosf per element),
 *    and element loops use 32-bit indices (a line's [N][D] is far below 2^32;
 *    64-bit division per element made the transform, cross-power and refine
 *    kernels several times slower: H200, 2026-11-24).
 *  - per element math from register_internal.h (the same inline functions
 *    as the CPU backend); peak searches are block reductions that break ties
 *    as the CPU's scan order does (first maximum); Newton sums in double.
 */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cufft.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_check.cuh"
#include "register_internal.h"

#define RB 256 /* threads per block */

#define CU(call, what) OCT_CUDA_TRY(call, "registration", what)
#define CF(call, what) OCT_CUFFT_TRY(call, "registration", what)

#define CB(call, what)                                                                     \
    do {                                                                                   \
        cublasStatus_t cb_ = (call);                                                       \
        if (cb_ != CUBLAS_STATUS_SUCCESS)                                                  \
            return oct_error_set(e, OCT_EDEVICE, "registration: cuBLAS %s failed (%d)",    \
                                 what, (int)cb_);                                          \
    } while (0)

#define REG_TAILS 8
#define REG_NPARTS 4 /* line parts transformed at once (the split test's halves and thirds) */
#define REG_TAIL_MIN 16

struct cuda_reg {
    uint32_t Dh, Dch, nsb, fb;   /* stripe batch, fine batch */
    cudaStream_t st;
    cufftHandle p2f, p2i, p3f, p3i; /* 2D r2c (batch L), 2D c2r (batch fb), 3D r2c (reference,
                                     * batch 1) / c2r (batch nsb) */
    cufftHandle p2c;                /* 2D r2c of the coarse lines (batch L) */
    /* 2D c2r of fewer surfaces (fb/2, fb/4, ... >= REG_TAIL_MIN): a pass's
     * last batch transforms little more than it needs; one work area for
     * all 2D c2r plans (used in turn on one stream) */
    cufftHandle p2t[REG_TAILS];
    uint32_t tb[REG_TAILS];
    int ntail;
    /* the window path: 1D C2C along x of the z-inverted rows of fb (p1x[0])
     * or tb[i] (p1x[1 + i]) pairs; the z inversion matrix; cuBLAS */
    bool wpath;
    cufftHandle p1x[1 + REG_TAILS];
    float *tz;                      /* [2 Dh][2 nz]: m_k (cos, sin)(2 pi k z / D) as real 2x2 blocks */
    cufftComplex *fv;               /* [N][fb][nz]: cross powers inverted along z (then x) */
    /* the coarse stage alike: stripe cross powers [y][a][nsb][k] (sc) times
     * tz3 [2 Dch][2 nz3] into v3 [L][Nc][nsb][nz3], a 2D C2C along y and x
     * (p3x) and the peak from the real part */
    float *tz3;
    cufftComplex *v3;
    cufftHandle p3x;
    cublasHandle_t blas;
    /* the refine: cross powers [L][N][Dh] (fy when large enough), per line
     * state (sx, sz, done, h) and per block partial sums [L][rb][6] */
    cufftComplex *cy;
    double *rst, *rpart;
    uint32_t rb;
    void *work;
    size_t npair;                   /* capacity of pair and pk: every pair of a pass (L * L) */
    float *vol, *t2, *t3;           /* input, transformed [L][N][D], coarse [L][Nc][Dc] */
    cufftComplex *ref2, *ref3, *x2; /* reference line spectra, coarse spectrum, target line spectra */
    cufftComplex *x2h;              /* target part-line spectra [REG_NPARTS][L][N][Dh] (saccade test) */
    cufftComplex *x3;               /* target coarse line spectra [L][Nc][Dch] */
    unsigned int *bad, *bad_h;      /* non-finite target values: device counter, pinned copy */
    float *tab;                     /* weight tables (struct reg_tabs) */
    float *pv;                      /* coarse peak partials [nsb][L] values ... */
    long long *pi;                  /* ... and scan indices */
    float *sb;                      /* stripe buffers [nsb][L][Nc][Dc] (also surfaces) */
    cufftComplex *sc;               /* [nsb][L][Nc][Dch] */
    cufftComplex *fy;               /* [fb][N][Dh] */
    float *fs;                      /* [fb][N][D] */
    int32_t *pair;                  /* [npair][2] (target line, reference line) */
    reg_peak *pk;                   /* [max(npair, nsb, L)] */
    int32_t *win;                   /* [nsb][3] l0, ylo, yhi */
    float *sub;                     /* [L][3] */
    double *ph;                     /* [L][2 (N + Dh)] phasors */
    cudaEvent_t ev[5]; /* start, spectra done, coarse done, fine done, upload done */
    bool have_ev;
};

/* Per-handle tables: offsets (floats) into one device array. */
struct reg_tabs {
    uint32_t hN, hK, hy, hNc, hKc, tN, tD, tNc, tDc, hm, tw3, total;
};
static reg_tabs tabs_of(uint32_t L, uint32_t N, uint32_t D, uint32_t Nc, uint32_t Dc)
{
    reg_tabs t;
    uint32_t o = 0;
    t.hN = o, o += N;                 /* reg_hann(a, N) */
    t.hK = o, o += D / 2 + 1;         /* reg_hann(k, D) */
    t.hy = o, o += L;                 /* reg_hann(y, L) */
    t.hNc = o, o += Nc;               /* reg_hann(a, Nc) */
    t.hKc = o, o += Dc / 2 + 1;       /* reg_hann(k, Dc) */
    t.tN = o, o += N;                 /* reg_tukey(a, N) */
    t.tD = o, o += D;                 /* reg_tukey(d, D) */
    t.tNc = o, o += Nc;               /* reg_tukey(a, Nc) */
    t.tDc = o, o += Dc;               /* reg_tukey(d, Dc) */
    t.hm = o, o += 7 * N;             /* reg_half(a, N, which), [which][a] */
    o += o & 1;                       /* float2 alignment */
    t.tw3 = o, o += 2 * L;            /* e^(-2 pi i m / L), m < L */
    t.total = o;
    return t;
}

__global__ void k_tables(float *tab, reg_tabs t, uint32_t L, uint32_t N, uint32_t D, uint32_t Nc,
                         uint32_t Dc)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < t.total; i += gridDim.x * blockDim.x) {
        float v = 0;
        if (i >= t.tw3) {
            uint32_t m = (i - t.tw3) / 2;
            float sn, cs;
            sincospif(-2.0f * (float)m / (float)L, &sn, &cs);
            v = (i - t.tw3) % 2 ? sn : cs;
        } else if (i >= t.hm) v = i - t.hm < 7 * N ? reg_half((int)((i - t.hm) % N), (int)N, (int)((i - t.hm) / N)) : 0;
        else if (i >= t.tDc) v = reg_tukey((int)(i - t.tDc), (int)Dc);
        else if (i >= t.tNc) v = reg_tukey((int)(i - t.tNc), (int)Nc);
        else if (i >= t.tD) v = reg_tukey((int)(i - t.tD), (int)D);
        else if (i >= t.tN) v = reg_tukey((int)(i - t.tN), (int)N);
        else if (i >= t.hKc) v = reg_hann((int)(i - t.hKc), (int)Dc);
        else if (i >= t.hNc) v = reg_hann((int)(i - t.hNc), (int)Nc);
        else if (i >= t.hy) v = reg_hann((int)(i - t.hy), (int)L);
        else if (i >= t.hK) v = reg_hann((int)(i - t.hK), (int)D);
        else v = reg_hann((int)i, (int)N);
        tab[i] = v;
    }
}

/* ---- kernels ------------------------------------------------------------- */

/* One block (RT threads: 192 lines fill the device only with large
 * blocks) per line: g, mean, window (full) and box mean, mean, window
 * (coarse). */
#define RT 1024
__global__ void __launch_bounds__(RT) k_transform(const float *v, float *t2, float *t3, uint32_t N, uint32_t D,
                            uint32_t Nc, uint32_t Dc, uint32_t f, float inv_scale,
                            unsigned int *bad, const float *tab, reg_tabs tb)
{
    __shared__ double red[RT];
    const size_t l = blockIdx.x;
    const uint32_t nd = N * D, ncd = Nc * Dc;
    const float *in = v + l * nd;
    float *o = t2 + l * nd, *oc = t3 + l * ncd;
    double s = 0;
    unsigned int nb = 0;
    for (uint32_t i = threadIdx.x; i < nd; i += blockDim.x) {
        nb += !isfinite(in[i]);
        s += o[i] = reg_g(in[i], inv_scale);
    }
    if (nb && bad)
        atomicAdd(bad, nb);
    for (uint32_t i = threadIdx.x; i < ncd; i += blockDim.x) {
        uint32_t a = i / Dc, b = i - a * Dc;
        float acc = 0;
        for (uint32_t p = 0; p < f; p++)
            for (uint32_t q = 0; q < f; q++)
                acc += reg_g(in[(size_t)(a * f + p) * D + b * f + q], inv_scale);
        oc[i] = acc / (float)(f * f);
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (int w = RT / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    float m = (float)(red[0] / ((double)N * D));
    __syncthreads();
    double sc = 0;
    for (uint32_t i = threadIdx.x; i < ncd; i += blockDim.x)
        sc += oc[i];
    red[threadIdx.x] = sc;
    __syncthreads();
    for (int w = RT / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    float mc = (float)(red[0] / ((double)Nc * Dc));
    const float *tN = tab + tb.tN, *tD = tab + tb.tD, *tNc = tab + tb.tNc, *tDc = tab + tb.tDc;
    for (uint32_t i = threadIdx.x; i < nd; i += blockDim.x) {
        uint32_t a = i / D, d = i - a * D;
        o[i] = tN[a] * tD[d] * (o[i] - m);
    }
    for (uint32_t i = threadIdx.x; i < ncd; i += blockDim.x) {
        uint32_t a = i / Dc, d = i - a * Dc;
        oc[i] = tNc[a] * tDc[d] * (oc[i] - mc);
    }
}

/* Coarse cross power of stripe b (lines l0 .. l0+S-1 of the target's
 * coarse volume at rows 0..S-1 of a zero volume [L][Nc][Dc]) against the
 * cached reference spectrum.  The stripe's 3D spectrum is that of its lines
 * moved along y: X(y, a, k) = sum_s e^(-2 pi i y s / L) x3[l0 + s](a, k). */
__global__ void k_cross3y(const cufftComplex *ref3, const cufftComplex *x3, const int32_t *win,
                          cufftComplex *sc, uint32_t L, uint32_t Nc, uint32_t Dc, uint32_t Dch,
                          uint32_t S, const float *tab, reg_tabs tb, uint32_t il)
{
    /* il = 0: sc [b][y][a][k] (the 3D C2R); else [y][a][b][k] of il stripes
     * (the window path: the z GEMM over rows (y, a, b), the 2D C2C along y
     * and x batched over (b, z)) */
    const uint32_t plane = Nc * Dch, n = L * plane;
    const size_t b = blockIdx.y;
    const cufftComplex *xs = x3 + (size_t)win[3 * b] * plane;
    const float2 *tw = (const float2 *)(tab + tb.tw3); /* e^(-2 pi i m / L) */
    const float *hy = tab + tb.hy, *ha = tab + tb.hNc, *hk = tab + tb.hKc;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t y = i / plane, j = i - y * plane, a = j / Dch, k = j - a * Dch;
        float xr = 0, xi = 0;
        for (uint32_t q = 0, m = 0; q < S; q++, m = m + y >= L ? m + y - L : m + y) {
            float2 t = tw[m]; /* m = y q mod L */
            cufftComplex v = xs[(size_t)q * plane + j];
            xr += v.x * t.x - v.y * t.y, xi += v.x * t.y + v.y * t.x;
        }
        float w = hy[y] * ha[a] * hk[k];
        cufftComplex r = ref3[i], o;
        reg_cross(r.x, r.y, xr, xi, w, &o.x, &o.y);
        if (i == 0)
            o.x = o.y = 0;
        if (il)
            sc[((size_t)(i / Dch) * il + b) * Dch + k] = o;
        else
            sc[b * (size_t)n + i] = o;
    }
}

__device__ static inline int wrapi(int s, int n) { return ((s % n) + n) % n; }

/* block reduction of (value, scan index): larger value, then smaller index */
__device__ static void reduce_peak(float *v, long long *ix)
{
    for (int w = RB / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            float a = v[threadIdx.x], b = v[threadIdx.x + w];
            long long ia = ix[threadIdx.x], ib = ix[threadIdx.x + w];
            if (b > a || (b == a && ib < ia))
                v[threadIdx.x] = b, ix[threadIdx.x] = ib;
        }
        __syncthreads();
    }
}

/* coarse peak of stripe b over y in [ylo, yhi], x, z in the window, in two
 * steps: block (j, b) the peak of row y = ylo + j (scan index i over the
 * stripe's window, as one block's scan), then k_peak3_fin the first
 * maximum over the rows: the CPU's scan order */
/* (pruned: from the window path's V3 [y][x][nsb][nz] complex, real part) */
template <bool pruned>
__global__ void k_peak3_row(const float *sb, const cufftComplex *v3, uint32_t nsb, const int32_t *win,
                            float *pv, long long *pi, uint32_t L, uint32_t Nc, uint32_t Dc, int sxc,
                            int szc, float inv_sumw)
{
    __shared__ float v[RB];
    __shared__ long long ix[RB];
    const size_t b = blockIdx.y, n3 = (size_t)L * Nc * Dc;
    const int ylo = win[3 * b + 1], yhi = win[3 * b + 2], nx = 2 * sxc + 1, nz = 2 * szc + 1;
    const int j = (int)blockIdx.x, y = ylo + j;
    const long long plane = (long long)nx * nz;
    float best = -FLT_MAX;
    long long bi = LLONG_MAX;
    if (y <= yhi)
        for (long long i = threadIdx.x; i < plane; i += blockDim.x) {
            int z = (int)(i % nz) - szc, x = (int)(i / nz) - sxc;
            size_t row = (size_t)y * Nc + wrapi(x, (int)Nc);
            float s = (pruned ? v3[(row * nsb + b) * nz + (z + szc)].x
                              : sb[b * n3 + row * Dc + wrapi(z, (int)Dc)]) * inv_sumw;
            if (s > best)
                best = s, bi = (long long)j * plane + i;
        }
    v[threadIdx.x] = best, ix[threadIdx.x] = bi;
    __syncthreads();
    reduce_peak(v, ix);
    if (threadIdx.x == 0)
        pv[b * L + j] = v[0], pi[b * L + j] = ix[0];
}

__global__ void k_peak3_fin(const float *pv, const long long *pi, const int32_t *win, reg_peak *out,
                            uint32_t L, int sxc, int szc)
{
    __shared__ float v[RB];
    __shared__ long long ix[RB];
    const size_t b = blockIdx.x;
    const int ylo = win[3 * b + 1], yhi = win[3 * b + 2], nx = 2 * sxc + 1, nz = 2 * szc + 1;
    float best = -FLT_MAX;
    long long bi = LLONG_MAX;
    for (int j = threadIdx.x; j <= yhi - ylo; j += blockDim.x) {
        float s = pv[b * L + j];
        long long i = pi[b * L + j];
        if (s > best || (s == best && i < bi))
            best = s, bi = i;
    }
    v[threadIdx.x] = best, ix[threadIdx.x] = bi;
    __syncthreads();
    reduce_peak(v, ix);
    if (threadIdx.x == 0) {
        long long i = ix[0];
        reg_peak p;
        p.h = v[0], p.fx = 0.0f;
        p.z = (int)(i % nz) - szc, p.x = (int)(i / nz % nx) - sxc, p.y = (int)(i / nz / nx) + ylo;
        out[b] = p;
    }
}

/* Element i of the windowed cross power of a target line against a
 * reference line (weight w = the window's; the DC term i = 0 removed). */
__device__ static inline cufftComplex line_cross(cufftComplex r, cufftComplex x, uint32_t i, float w)
{
    cufftComplex o;
    reg_cross(r.x, r.y, x.x, x.y, w, &o.x, &o.y);
    if (i == 0)
        o.x = o.y = 0;
    return o;
}

/* fine cross power of pairs (target line, reference line) */
__global__ void k_cross2(const cufftComplex *ref2, const cufftComplex *x2, const int32_t *pair,
                         cufftComplex *fy, uint32_t N, uint32_t D, uint32_t Dh, const float *tab,
                         reg_tabs tb)
{
    const uint32_t n = N * Dh;
    const size_t b = blockIdx.y;
    const cufftComplex *X = x2 + (size_t)pair[2 * b] * n, *R = ref2 + (size_t)pair[2 * b + 1] * n;
    const float *ha = tab + tb.hN, *hk = tab + tb.hK;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t a = i / Dh, k = i - a * Dh;
        cufftComplex o = line_cross(R[i], X[i], i, ha[a] * hk[k]);
        fy[b * n + i] = o;
    }
}

__global__ void k_peak2(const float *fs, const int32_t *pair, reg_peak *out, uint32_t N,
                        uint32_t D, int sx, int sz, float inv_sumw)
{
    __shared__ float v[RB];
    __shared__ long long ix[RB];
    const size_t b = blockIdx.x, n2 = (size_t)N * D;
    const int nx = 2 * sx + 1, nz = 2 * sz + 1;
    const long long cnt = (long long)nx * nz;
    float best = -FLT_MAX;
    long long bi = LLONG_MAX;
    for (long long i = threadIdx.x; i < cnt; i += blockDim.x) {
        int z = (int)(i % nz) - sz, x = (int)(i / nz) - sx;
        float s = fs[b * n2 + (size_t)wrapi(x, (int)N) * D + wrapi(z, (int)D)] * inv_sumw;
        if (s > best)
            best = s, bi = i;
    }
    v[threadIdx.x] = best, ix[threadIdx.x] = bi;
    __syncthreads();
    reduce_peak(v, ix);
    if (threadIdx.x == 0) {
        long long i = ix[0];
        reg_peak p;
        p.h = v[0], p.y = pair[2 * b + 1];
        p.z = (int)(i % nz) - sz, p.x = (int)(i / nz) - sx;
        const float *f = fs + b * n2;
        size_t zo = (size_t)wrapi(p.z, (int)D);
        p.fx = reg_parabola(f[(size_t)wrapi(p.x - 1, (int)N) * D + zo] * inv_sumw, p.h,
                            f[(size_t)wrapi(p.x + 1, (int)N) * D + zo] * inv_sumw);
        out[b] = p;
    }
}

/* the window path: cross powers written [a][P][k] (P pairs of the plan) */
__global__ void k_cross2w(const cufftComplex *ref2, const cufftComplex *x2, const int32_t *pair,
                          cufftComplex *fy, uint32_t N, uint32_t Dh, uint32_t P, const float *tab,
                          reg_tabs tb)
{
    const uint32_t n = N * Dh;
    const size_t b = blockIdx.y;
    const cufftComplex *X = x2 + (size_t)pair[2 * b] * n, *R = ref2 + (size_t)pair[2 * b + 1] * n;
    const float *ha = tab + tb.hN, *hk = tab + tb.hK;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t a = i / Dh, k = i - a * Dh;
        cufftComplex o = line_cross(R[i], X[i], i, ha[a] * hk[k]);
        fy[((size_t)a * P + b) * Dh + k] = o;
    }
}

/* The z inversion at the searched lags as a real matrix tz [2 Dh][2 nz]
 * (row-major; nz = 2 sz + 1): a row of cross powers (C_k as real pairs)
 * times tz is V_z = sum_k m_k C_k e^(2 pi i k z / D) as real pairs, z = -sz
 * .. sz (m_k = 1 at k = 0 and the Nyquist bin, else 2: the half spectrum of
 * a real surface).  Block (2k + u, 2j + v): u, v = 0, 1 for (re, im). */
__global__ void k_tz(float *tz, uint32_t D, uint32_t Dh, int sz)
{
    const uint32_t nz = 2 * (uint32_t)sz + 1, n = 4 * Dh * nz;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t row = i / (2 * nz), col = i - row * 2 * nz, k = row / 2, j = col / 2;
        int z = (int)j - sz;
        uint32_t m = (uint32_t)(((int64_t)k * z % (int64_t)D + D) % D); /* k z mod D */
        float sn, cs, w = (k == 0 || 2 * k == D) ? 1.0f : 2.0f;
        sincospif(2.0f * (float)m / (float)D, &sn, &cs);
        /* (re, im) of C times (cs, sn): re' = re cs - im sn, im' = re sn + im cs */
        float v = row % 2 == 0 ? (col % 2 == 0 ? cs : sn) : (col % 2 == 0 ? -sn : cs);
        tz[i] = w * v;
    }
}

/* One block per pair: the peak of the surface (real part of V, [x][P][nz]
 * after the x inversion) over x = -sx .. sx, z = -sz .. sz, as k_peak2 (the
 * same scan order), with the parabola along x. */
__global__ void k_peakv(const cufftComplex *V, const int32_t *pair, reg_peak *out, uint32_t N,
                        uint32_t P, int sx, int sz, float inv_sumw)
{
    __shared__ float v[RB];
    __shared__ long long ix[RB];
    const size_t b = blockIdx.x;
    const int nx = 2 * sx + 1, nz = 2 * sz + 1;
    const long long cnt = (long long)nx * nz;
    float best = -FLT_MAX;
    long long bi = LLONG_MAX;
    for (long long i = threadIdx.x; i < cnt; i += blockDim.x) {
        int zj = (int)(i % nz), x = (int)(i / nz) - sx;
        float s = V[((size_t)wrapi(x, (int)N) * P + b) * nz + zj].x * inv_sumw;
        if (s > best)
            best = s, bi = i;
    }
    v[threadIdx.x] = best, ix[threadIdx.x] = bi;
    __syncthreads();
    reduce_peak(v, ix);
    if (threadIdx.x == 0) {
        long long i = ix[0];
        reg_peak p;
        p.h = v[0], p.y = pair[2 * b + 1];
        int zj = (int)(i % nz);
        p.z = zj - sz, p.x = (int)(i / nz) - sx;
        p.fx = reg_parabola(V[((size_t)wrapi(p.x - 1, (int)N) * P + b) * nz + zj].x * inv_sumw, p.h,
                            V[((size_t)wrapi(p.x + 1, (int)N) * P + b) * nz + zj].x * inv_sumw);
        out[b] = p;
    }
}

/* The Newton refine of each line (REG_NEWTON_STEPS at most, as the CPU's
 * cpu_refine), in kernels: k_refine_cross makes the weighted cross powers
 * once; per step k_refine_sums sums the six quantities over rb blocks per
 * line (RF threads, warp-shuffle sums in double) and k_refine_update adds
 * the blocks' partials in a fixed order, takes the step and makes the
 * phasors of the next point; k_refine_out writes (dx, dz, h).  State per
 * line: rst[4 l] = (sx, sz, done, h). */
#define RF 512
__device__ static inline double warp_sum(double v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__global__ void k_refine_cross(const cufftComplex *ref2, const cufftComplex *x2, const reg_peak *best,
                               cufftComplex *cy, uint32_t N, uint32_t Dh, const float *tab, reg_tabs tb)
{
    const uint32_t n = N * Dh;
    const size_t l = blockIdx.y;
    const reg_peak b = best[l];
    if (b.y < 0)
        return;
    const cufftComplex *X = x2 + l * n, *R = ref2 + (size_t)b.y * n;
    const float *ha = tab + tb.hN, *hk = tab + tb.hK;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t a = i / Dh, k = i - a * Dh;
        cufftComplex o = line_cross(R[i], X[i], i, ha[a] * hk[k]);
        cy[l * n + i] = o;
    }
}

__global__ void __launch_bounds__(RF) k_refine_sums(const cufftComplex *cy, const double *rst,
                                                    const double *phb, double *part, uint32_t N,
                                                    uint32_t D, uint32_t Dh, uint32_t rb)
{
    __shared__ double red[6][RF / 32];
    const size_t l = blockIdx.y;
    if (rst[4 * l + 2] != 0)
        return; /* done (or no match) */
    const uint32_t n = N * Dh, chunk = (n + rb - 1) / rb, i0 = blockIdx.x * chunk;
    const uint32_t i1 = i0 + chunk < n ? i0 + chunk : n;
    const cufftComplex *Y = cy + l * n;
    const double *ex = phb + l * 2 * (size_t)(N + Dh), *ez = ex + 2 * (size_t)N;
    double acc[6] = {0, 0, 0, 0, 0, 0};
    for (uint32_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        uint32_t a = i / Dh, k = i - a * Dh;
        cufftComplex y = Y[i];
        double ka = 2 * M_PI * reg_freq((int)a, (int)N) / N, kb = 2 * M_PI * k / D;
        double m = (k == 0 || 2 * k == D) ? 1.0 : 2.0;
        double pr = ex[2 * a] * ez[2 * k] - ex[2 * a + 1] * ez[2 * k + 1];
        double pi = ex[2 * a] * ez[2 * k + 1] + ex[2 * a + 1] * ez[2 * k];
        double zr = m * (y.x * pr - y.y * pi), zi = m * (y.x * pi + y.y * pr);
        acc[0] += zr, acc[1] -= ka * zi, acc[2] -= kb * zi;
        acc[3] -= ka * ka * zr, acc[4] -= ka * kb * zr, acc[5] -= kb * kb * zr;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int q = 0; q < 6; q++) {
        double v = warp_sum(acc[q]);
        if (lane == 0)
            red[q][warp] = v;
    }
    __syncthreads();
    if (threadIdx.x < 32)
        for (int q = 0; q < 6; q++) {
            double v = threadIdx.x < RF / 32 ? red[q][threadIdx.x] : 0.0;
            v = warp_sum(v);
            if (threadIdx.x == 0)
                part[(l * rb + blockIdx.x) * 6 + q] = v;
        }
}

/* it < 0: the start (best[l]); else after the sums of step it.  The
 * overlap derivatives (reg_dlog_overlap, sums over N and D) summed by the
 * whole block; thread 0 steps. */
__global__ void k_refine_update(const reg_peak *best, double *rst, const double *part, double *phb,
                                int it, uint32_t N, uint32_t D, uint32_t Dh, uint32_t rb, double sumw)
{
    __shared__ int mode; /* 0: done, 1: phasors, 2: a Newton step, then phasors */
    __shared__ double tot[6], red[4][RB / 32];
    const size_t l = blockIdx.x;
    double *s = rst + 4 * l;
    if (threadIdx.x == 0) {
        mode = 0;
        if (it < 0) {
            reg_peak b = best[l];
            s[0] = b.x, s[1] = b.z, s[2] = b.y < 0 ? 1 : 0, s[3] = NAN;
            mode = b.y < 0 ? 0 : 1;
        } else if (s[2] == 0) {
            for (int q = 0; q < 6; q++)
                tot[q] = 0;
            for (uint32_t j = 0; j < rb; j++)
                for (int q = 0; q < 6; q++)
                    tot[q] += part[(l * rb + j) * 6 + q];
            s[3] = tot[0] / sumw;
            if (it == REG_NEWTON_STEPS)
                s[2] = 1;
            else
                mode = 2;
        }
    }
    __syncthreads();
    if (mode == 0)
        return;
    if (mode == 2) {
        const double h = 0.05, sx = s[0], sz = s[1];
        double acc[4] = {0, 0, 0, 0}; /* overlap at sx + h, sx - h, sz + h, sz - h */
        for (uint32_t i = threadIdx.x; i < N; i += blockDim.x) {
            double w = reg_tukey_x(i, (int)N);
            acc[0] += w * reg_tukey_x(i + sx + h, (int)N), acc[1] += w * reg_tukey_x(i + sx - h, (int)N);
        }
        for (uint32_t i = threadIdx.x; i < D; i += blockDim.x) {
            double w = reg_tukey_x(i, (int)D);
            acc[2] += w * reg_tukey_x(i + sz + h, (int)D), acc[3] += w * reg_tukey_x(i + sz - h, (int)D);
        }
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        for (int q = 0; q < 4; q++) {
            double v = warp_sum(acc[q]);
            if (lane == 0)
                red[q][warp] = v;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double o[4] = {0, 0, 0, 0};
            for (int q = 0; q < 4; q++)
                for (int w = 0; w < (int)blockDim.x / 32; w++)
                    o[q] += red[q][w];
            /* reg_dlog_overlap(sx, N), reg_dlog_overlap(sz, D) */
            double dlx = o[0] > 0 && o[1] > 0 ? (log(o[0]) - log(o[1])) / (2 * h) : 0.0;
            double dlz = o[2] > 0 && o[3] > 0 ? (log(o[2]) - log(o[3])) / (2 * h) : 0.0;
            double gx = tot[1] - tot[0] * dlx, gz = tot[2] - tot[0] * dlz;
            double hxx = tot[3], hxz = tot[4], hzz = tot[5], det = hxx * hzz - hxz * hxz;
            if (!(hxx < 0 && det > 0)) {
                s[2] = 1;
            } else {
                double dx = -(hzz * gx - hxz * gz) / det, dz = -(hxx * gz - hxz * gx) / det;
                dx = dx > 0.5 ? 0.5 : dx < -0.5 ? -0.5 : dx;
                dz = dz > 0.5 ? 0.5 : dz < -0.5 ? -0.5 : dz;
                s[0] += dx, s[1] += dz;
                if (fabs(dx) < 1e-4 && fabs(dz) < 1e-4)
                    s[2] = 1;
            }
            mode = s[2] == 0;
        }
        __syncthreads();
        if (mode == 0)
            return;
    }
    const double sx = s[0], sz = s[1];
    double *ex = phb + l * 2 * (size_t)(N + Dh), *ez = ex + 2 * (size_t)N;
    for (uint32_t a = threadIdx.x; a < N; a += blockDim.x) {
        double p = 2 * M_PI * reg_freq((int)a, (int)N) * sx / N;
        ex[2 * a] = cos(p), ex[2 * a + 1] = sin(p);
    }
    for (uint32_t k = threadIdx.x; k < Dh; k += blockDim.x) {
        double p = 2 * M_PI * (double)k * sz / D;
        ez[2 * k] = cos(p), ez[2 * k + 1] = sin(p);
    }
}

__global__ void k_refine_out(const reg_peak *best, const double *rst, float *sub, uint32_t L)
{
    for (uint32_t l = blockIdx.x * blockDim.x + threadIdx.x; l < L; l += gridDim.x * blockDim.x) {
        const reg_peak b = best[l];
        float *o = sub + 3 * (size_t)l;
        if (b.y < 0) {
            o[0] = o[1] = o[2] = NAN;
            continue;
        }
        double sx = rst[4 * l], sz = rst[4 * l + 1];
        if (fabs(sx - b.x) > 1.0 || fabs(sz - b.z) > 1.0)
            sx = b.x, sz = b.z;
        o[0] = (float)sx, o[1] = (float)sz, o[2] = (float)rst[4 * l + 3];
    }
}

__global__ void k_scale(float *v, size_t n, float s)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        v[i] *= s;
}

/* ---- host side ------------------------------------------------------------ */

static unsigned grid_for(size_t n)
{
    size_t g = (n + RB - 1) / RB;
    return (unsigned)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

static void cuda_destroy(oct_register *r)
{
    cuda_reg *c = (cuda_reg *)r->be;
    if (!c)
        return;
    cufftHandle p[5] = {c->p2f, c->p2i, c->p3f, c->p3i, c->p2c};
    for (int i = 0; i < 5; i++)
        if (p[i])
            cufftDestroy(p[i]);
    for (int i = 0; i < c->ntail; i++)
        cufftDestroy(c->p2t[i]);
    for (int i = 0; i <= REG_TAILS; i++)
        if (c->p1x[i])
            cufftDestroy(c->p1x[i]);
    if (c->p3x)
        cufftDestroy(c->p3x);
    void *m[] = {c->tz3, c->v3, c->work, c->vol, c->t2, c->t3, c->ref2, c->ref3, c->x2, c->x2h, c->sb, c->sc,
                 c->fy,  c->fs, c->pair, c->pk, c->win, c->sub, c->ph, c->x3, c->bad, c->pv, c->pi, c->tab, c->tz,
                 c->fv,   c->rst, c->rpart, c->cy != c->fy ? c->cy : NULL};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (m[i])
            cudaFree(m[i]);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->bad_h)
        cudaFreeHost(c->bad_h);
    if (c->have_ev)
        for (int i = 0; i < 5; i++)
            cudaEventDestroy(c->ev[i]);
    if (c->st)
        cudaStreamDestroy(c->st);
    free(c);
    r->be = NULL;
}

static oct_err cuda_alloc(void **p, size_t bytes, const char *what, oct_error *e)
{
    cudaError_t ce = cudaMalloc(p, bytes ? bytes : 1);
    if (ce != cudaSuccess) {
        *p = NULL;
        return oct_error_set(e, OCT_ENOMEM, "registration: device memory for %s (%zu MB): %s",
                             what, bytes >> 20, cudaGetErrorString(ce));
    }
    return OCT_OK;
}

static oct_err cuda_create(oct_register *r, oct_error *e)
{
    char name[128];
    oct_err err = oct_cuda_probe(r->o.device, name, sizeof name, e);
    if (err)
        return err;
    if (r->L > 65535) /* lines are a grid dimension */
        return oct_error_set(e, OCT_EINVAL, "registration: the CUDA backend takes at most 65535 "
                                            "lines (volume has %u)", r->L);
    CU(cudaSetDevice(r->o.device), "cudaSetDevice");
    cuda_reg *c = (cuda_reg *)calloc(1, sizeof *c);
    if (!c)
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    r->be = c;
    const size_t L = r->L, N = r->N, D = r->D, Nc = r->Nc, Dc = r->Dc;
    c->Dh = r->D / 2 + 1, c->Dch = r->Dc / 2 + 1;
    c->nsb = 8;
    size_t per = N * D * sizeof(float) + N * c->Dh * sizeof(cufftComplex);
    size_t fb = ((size_t)256 << 20) / per;
    c->fb = (uint32_t)(fb < 16 ? 16 : fb > 4096 ? 4096 : fb);
    CU(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking), "stream");
    for (int i = 0; i < 5; i++)
        CU(cudaEventCreate(&c->ev[i]), "event");
    c->have_ev = true;
    /* a pass's pairs at once: a line's candidates are distinct lines within
     * +-sy (the saccade test: 7 per part) */
    size_t per_line = 2 * (size_t)r->sy + 1 < L ? 2 * (size_t)r->sy + 1 : L;
    c->npair = L * (per_line > REG_NPARTS * 7 ? per_line : REG_NPARTS * 7);
    c->npair = c->npair > c->fb ? c->npair : c->fb;
    size_t npk = c->npair > L ? c->npair : L;
    if ((err = cuda_alloc((void **)&c->vol, L * N * D * 4, "input volume", e)) ||
        (err = cuda_alloc((void **)&c->t2, L * N * D * 4, "transformed volume", e)) ||
        (err = cuda_alloc((void **)&c->t3, L * Nc * Dc * 4, "coarse volume", e)) ||
        (err = cuda_alloc((void **)&c->ref2, L * N * c->Dh * 8, "reference spectra", e)) ||
        (err = cuda_alloc((void **)&c->ref3, L * Nc * c->Dch * 8, "coarse reference spectrum", e)) ||
        (err = cuda_alloc((void **)&c->x2, L * N * c->Dh * 8, "target spectra", e)) ||
        (err = cuda_alloc((void **)&c->x2h, REG_NPARTS * L * N * c->Dh * 8, "part-line spectra", e)) ||
        (err = cuda_alloc((void **)&c->sb, c->nsb * L * Nc * Dc * 4, "stripes", e)) ||
        (err = cuda_alloc((void **)&c->sc, c->nsb * L * Nc * c->Dch * 8, "stripe spectra", e)) ||
        (err = cuda_alloc((void **)&c->fy, c->fb * N * c->Dh * 8, "cross spectra", e)) ||
        (err = cuda_alloc((void **)&c->fs, c->fb * N * D * 4, "surfaces", e)) ||
        (err = cuda_alloc((void **)&c->pair, c->npair * 2 * 4, "pairs", e)) ||
        (err = cuda_alloc((void **)&c->pk, npk * sizeof(reg_peak), "peaks", e)) ||
        (err = cuda_alloc((void **)&c->win, (L > c->nsb ? L : c->nsb) * 3 * 4, "windows", e)) ||
        (err = cuda_alloc((void **)&c->sub, L * 3 * 4, "sub-pixel shifts", e)) ||
        (err = cuda_alloc((void **)&c->ph, L * 2 * (N + c->Dh) * 8, "phasors", e)) ||
        (err = cuda_alloc((void **)&c->x3, L * Nc * c->Dch * 8, "coarse line spectra", e)) ||
        (err = cuda_alloc((void **)&c->bad, sizeof *c->bad, "counter", e)) ||
        (err = cuda_alloc((void **)&c->pv, c->nsb * L * sizeof *c->pv, "coarse peaks", e)) ||
        (err = cuda_alloc((void **)&c->pi, c->nsb * L * sizeof *c->pi, "coarse peaks", e)))
        return err;
    reg_tabs tb = tabs_of(r->L, r->N, r->D, r->Nc, r->Dc);
    if ((err = cuda_alloc((void **)&c->tab, (size_t)tb.total * 4, "weight tables", e)))
        return err;
    k_tables<<<grid_for(tb.total), RB, 0, c->st>>>(c->tab, tb, r->L, r->N, r->D, r->Nc, r->Dc);
    CU(cudaGetLastError(), "tables kernel");
    CU(cudaMallocHost((void **)&c->bad_h, sizeof *c->bad_h), "pinned counter");
    int n2[2] = {(int)N, (int)D}, n3[3] = {(int)L, (int)Nc, (int)Dc};
    CF(cufftPlanMany(&c->p2f, 2, n2, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, (int)L), "plan 2D R2C");
    /* 2D c2r: batch fb, then the tails, sharing one work area */
    size_t ws = 0, wmax = 0;
    CF(cufftCreate(&c->p2i), "create 2D C2R");
    CF(cufftSetAutoAllocation(c->p2i, 0), "2D C2R work area");
    CF(cufftMakePlanMany(c->p2i, 2, n2, NULL, 1, 0, NULL, 1, 0, CUFFT_C2R, (int)c->fb, &ws),
       "plan 2D C2R");
    wmax = ws;
    for (uint32_t b = c->fb / 2; b >= REG_TAIL_MIN && c->ntail < REG_TAILS; b /= 2) {
        cufftHandle h;
        CF(cufftCreate(&h), "create 2D C2R");
        c->p2t[c->ntail] = h, c->tb[c->ntail] = b, c->ntail++;
        CF(cufftSetAutoAllocation(h, 0), "2D C2R work area");
        CF(cufftMakePlanMany(h, 2, n2, NULL, 1, 0, NULL, 1, 0, CUFFT_C2R, (int)b, &ws),
           "plan 2D C2R");
        wmax = ws > wmax ? ws : wmax;
    }
    /* the window path: the x inversion of the nz columns left by the z GEMM */
    const int nz = 2 * r->sz + 1;
    c->wpath = !r->o.fine_full;
    for (int i = 0; c->wpath && i <= c->ntail; i++) {
        int n1[1] = {(int)N}, emb[1] = {(int)N};
        int P = (int)(i ? c->tb[i - 1] : c->fb), st = P * nz;
        CF(cufftCreate(&c->p1x[i]), "create 1D C2C");
        CF(cufftSetAutoAllocation(c->p1x[i], 0), "1D C2C work area");
        CF(cufftMakePlanMany(c->p1x[i], 1, n1, emb, st, 1, emb, st, 1, CUFFT_C2C, st, &ws),
           "plan 1D C2C along x");
        wmax = ws > wmax ? ws : wmax;
    }
    if (c->wpath) {
        size_t ntz = (size_t)4 * c->Dh * nz;
        if ((err = cuda_alloc((void **)&c->tz, ntz * 4, "z inversion matrix", e)) ||
            (err = cuda_alloc((void **)&c->fv, N * c->fb * nz * 8, "window surfaces", e)))
            return err;
        k_tz<<<grid_for(ntz), RB, 0, c->st>>>(c->tz, (uint32_t)D, c->Dh, r->sz);
        CU(cudaGetLastError(), "z matrix kernel");
        CB(cublasCreate(&c->blas), "create");
        CB(cublasSetStream(c->blas, c->st), "set stream");
        /* TF32 tensor cores (oct_register_options.tf32), else plain fp32 */
        CB(cublasSetMathMode(c->blas, r->o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
           "math mode");
    }
    /* the coarse stage: z inversion at the 2 szc + 1 searched lags (GEMM
     * with tz3), then a 2D C2C along y and x batched over (stripe, lag) */
    {
        const int nz3 = 2 * r->szc + 1, st3 = (int)c->nsb * nz3;
        int n2y[2] = {(int)L, (int)Nc};
        CF(cufftCreate(&c->p3x), "create 2D C2C");
        CF(cufftSetAutoAllocation(c->p3x, 0), "2D C2C work area");
        CF(cufftMakePlanMany(c->p3x, 2, n2y, n2y, st3, 1, n2y, st3, 1, CUFFT_C2C, st3, &ws),
           "plan 2D C2C along y and x");
        wmax = ws > wmax ? ws : wmax;
        size_t ntz = (size_t)4 * c->Dch * nz3;
        if ((err = cuda_alloc((void **)&c->tz3, ntz * 4, "coarse z inversion matrix", e)) ||
            (err = cuda_alloc((void **)&c->v3, L * Nc * c->nsb * nz3 * 8, "coarse window surfaces", e)))
            return err;
        k_tz<<<grid_for(ntz), RB, 0, c->st>>>(c->tz3, (uint32_t)Dc, c->Dch, r->szc);
        CU(cudaGetLastError(), "coarse z matrix kernel");
        if (!c->blas) {
            CB(cublasCreate(&c->blas), "create");
            CB(cublasSetStream(c->blas, c->st), "set stream");
            CB(cublasSetMathMode(c->blas, r->o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "math mode");
        }
    }
    /* the refine: blocks per line to fill the device (>= 4 x 132 blocks at
     * 192 lines), each block >= 4096 elements */
    {
        size_t nl = N * c->Dh, want = (1056 + L - 1) / L, most = nl / 4096;
        c->rb = (uint32_t)(want < most ? want : most);
        c->rb = c->rb < 1 ? 1 : c->rb > 64 ? 64 : c->rb;
        if ((err = cuda_alloc((void **)&c->rst, L * 4 * 8, "refine state", e)) ||
            (err = cuda_alloc((void **)&c->rpart, L * c->rb * 6 * 8, "refine sums", e)))
            return err;
        if (c->fb >= L)
            c->cy = c->fy;
        else if ((err = cuda_alloc((void **)&c->cy, L * N * c->Dh * 8, "refine cross powers", e)))
            return err;
    }
    if ((err = cuda_alloc(&c->work, wmax, "FFT work area", e)))
        return err;
    CF(cufftSetWorkArea(c->p2i, c->work), "2D C2R work area");
    for (int i = 0; i < c->ntail; i++) {
        CF(cufftSetWorkArea(c->p2t[i], c->work), "2D C2R work area");
        CF(cufftSetStream(c->p2t[i], c->st), "set stream");
    }
    for (int i = 0; c->wpath && i <= c->ntail; i++) {
        CF(cufftSetWorkArea(c->p1x[i], c->work), "1D C2C work area");
        CF(cufftSetStream(c->p1x[i], c->st), "set stream");
    }
    CF(cufftSetWorkArea(c->p3x, c->work), "2D C2C work area");
    CF(cufftSetStream(c->p3x, c->st), "set stream");
    int n2c[2] = {(int)Nc, (int)Dc};
    CF(cufftPlanMany(&c->p3f, 3, n3, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, 1), "plan 3D R2C");
    CF(cufftPlanMany(&c->p3i, 3, n3, NULL, 1, 0, NULL, 1, 0, CUFFT_C2R, (int)c->nsb), "plan 3D C2R");
    CF(cufftPlanMany(&c->p2c, 2, n2c, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, (int)L), "plan coarse 2D R2C");
    cufftHandle ps[5] = {c->p2f, c->p2i, c->p3f, c->p3i, c->p2c};
    for (int i = 0; i < 5; i++)
        CF(cufftSetStream(ps[i], c->st), "set stream");
    return OCT_OK;
}

/* uploads and transforms a volume, then the 2D spectra of all its lines
 * into dst; a target (bad: count its non-finite values) also the 2D
 * spectra of its coarse lines */
static oct_err cuda_load(oct_register *r, const float *vol, cufftComplex *dst, bool target,
                         oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    size_t n = (size_t)r->L * r->N * r->D;
    CU(cudaEventRecord(c->ev[0], c->st), "event");
    if (target)
        CU(cudaMemsetAsync(c->bad, 0, sizeof *c->bad, c->st), "memset");
    CU(cudaMemcpyAsync(c->vol, vol, n * 4, cudaMemcpyHostToDevice, c->st), "upload");
    CU(cudaEventRecord(c->ev[4], c->st), "event");
    k_transform<<<r->L, RT, 0, c->st>>>(c->vol, c->t2, c->t3, r->N, r->D, r->Nc, r->Dc, r->f,
                                        r->inv_scale, target ? c->bad : NULL, c->tab,
                                        tabs_of(r->L, r->N, r->D, r->Nc, r->Dc));
    CU(cudaGetLastError(), "transform kernel");
    CF(cufftExecR2C(c->p2f, c->t2, dst), "line spectra");
    if (target) {
        CF(cufftExecR2C(c->p2c, c->t3, c->x3), "coarse line spectra");
        CU(cudaMemcpyAsync(c->bad_h, c->bad, sizeof *c->bad, cudaMemcpyDeviceToHost, c->st),
           "download");
    }
    CU(cudaEventRecord(c->ev[1], c->st), "event");
    return OCT_OK;
}

static oct_err cuda_set_reference(oct_register *r, const float *vol, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    oct_err err = cuda_load(r, vol, c->ref2, false, e);
    if (err)
        return err;
    /* coarse reference spectrum (t3 is not needed afterwards) */
    CF(cufftExecR2C(c->p3f, c->t3, c->ref3), "coarse reference spectrum");
    CU(cudaStreamSynchronize(c->st), "set reference");
    return OCT_OK;
}

static oct_err cuda_prep_target(oct_register *r, const float *vol, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    oct_err err = cuda_load(r, vol, c->x2, true, e);
    if (err)
        return err;
    /* the stages need the host anyway (peaks): waiting here costs nothing */
    CU(cudaStreamSynchronize(c->st), "target transform");
    if (*c->bad_h)
        return oct_error_set(e, OCT_EINVAL, "registration: target has %u non-finite values",
                             *c->bad_h);
    return OCT_OK;
}

/* the whole 3D surfaces of nb stripes (win: device windows) into sb */
static oct_err cuda_coarse_batch(oct_register *r, uint32_t nb, const int32_t *win, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    dim3 g2(grid_for((size_t)r->L * r->Nc * c->Dch), nb);
    k_cross3y<<<g2, RB, 0, c->st>>>(c->ref3, c->x3, win, c->sc, r->L, r->Nc, r->Dc, c->Dch,
                                    r->o.stripe, c->tab, tabs_of(r->L, r->N, r->D, r->Nc, r->Dc), 0);
    CF(cufftExecC2R(c->p3i, c->sc, c->sb), "stripe surfaces");
    CU(cudaGetLastError(), "coarse kernels");
    return OCT_OK;
}

/* every stripe's window up at once, the batches of nsb queued without a
 * host round trip (the window path: z GEMM, 2D C2C, peaks; fine_full: the
 * whole 3D C2R surfaces), every peak down */
static oct_err cuda_coarse(oct_register *r, uint32_t n, const uint32_t *l0, const int32_t *ylo,
                           const int32_t *yhi, reg_peak *out, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    if (n > (r->L > c->nsb ? r->L : c->nsb))
        return oct_error_set(e, OCT_EINVAL, "registration: %u stripes of %u lines", n, r->L);
    int32_t *win = (int32_t *)malloc(sizeof(int32_t) * 3 * (n ? n : 1));
    if (!win)
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    for (uint32_t i = 0; i < n; i++)
        win[3 * i] = (int32_t)l0[i], win[3 * i + 1] = ylo[i], win[3 * i + 2] = yhi[i];
    cudaError_t ce = cudaMemcpyAsync(c->win, win, (size_t)n * 3 * 4, cudaMemcpyHostToDevice, c->st);
    free(win); /* pageable: staged before the call returns */
    CU(ce, "upload");
    const reg_tabs tb = tabs_of(r->L, r->N, r->D, r->Nc, r->Dc);
    const int nz3 = 2 * r->szc + 1;
    const float one = 1.0f, zero = 0.0f;
    for (uint32_t s = 0; s < n; s += c->nsb) {
        uint32_t nb = n - s < c->nsb ? n - s : c->nsb;
        int ny = 1;
        for (uint32_t i = 0; i < nb; i++)
            ny = yhi[s + i] - ylo[s + i] + 1 > ny ? yhi[s + i] - ylo[s + i] + 1 : ny;
        const int32_t *w = c->win + 3 * s;
        const float inv = (float)(1.0 / r->sumw3);
        if (c->wpath) {
            dim3 g2(grid_for((size_t)r->L * r->Nc * c->Dch), nb);
            k_cross3y<<<g2, RB, 0, c->st>>>(c->ref3, c->x3, w, c->sc, r->L, r->Nc, r->Dc, c->Dch,
                                            r->o.stripe, c->tab, tb, c->nsb);
            CB(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, 2 * nz3, (int)(r->L * r->Nc * c->nsb),
                           2 * (int)c->Dch, &one, c->tz3, 2 * nz3, (const float *)c->sc,
                           2 * (int)c->Dch, &zero, (float *)c->v3, 2 * nz3),
               "coarse z inversion");
            CF(cufftExecC2C(c->p3x, c->v3, c->v3, CUFFT_INVERSE), "coarse surfaces");
            k_peak3_row<true><<<dim3((unsigned)ny, nb), RB, 0, c->st>>>(
                c->sb, c->v3, c->nsb, w, c->pv, c->pi, r->L, r->Nc, r->Dc, r->sxc, r->szc, inv);
        } else { /* fine_full: the whole 3D surfaces */
            oct_err err = cuda_coarse_batch(r, nb, w, e);
            if (err)
                return err;
            k_peak3_row<false><<<dim3((unsigned)ny, nb), RB, 0, c->st>>>(
                c->sb, c->v3, c->nsb, w, c->pv, c->pi, r->L, r->Nc, r->Dc, r->sxc, r->szc, inv);
        }
        k_peak3_fin<<<nb, RB, 0, c->st>>>(c->pv, c->pi, w, c->pk + s, r->L, r->sxc, r->szc);
        CU(cudaGetLastError(), "coarse kernels");
    }
    CU(cudaMemcpyAsync(out, c->pk, n * sizeof(reg_peak), cudaMemcpyDeviceToHost, c->st), "download");
    CU(cudaStreamSynchronize(c->st), "coarse stage");
    CU(cudaEventRecord(c->ev[2], c->st), "event");
    return OCT_OK;
}

/* the masked lines of a part (reg_half, from the table) into dst */
__global__ void k_half(const float *t2, float *dst, size_t n, uint32_t N, uint32_t D, int half,
                       const float *tab, reg_tabs tb)
{
    /* lines in y, elements of a line in x (32-bit division) */
    const uint32_t nd = N * D;
    const float *m = tab + tb.hm + (size_t)half * N;
    for (size_t l = blockIdx.y; l * nd < n; l += gridDim.y)
        for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < nd; i += gridDim.x * blockDim.x)
            dst[l * nd + i] = m[i / D] * t2[l * nd + i];
}

static oct_err fine_chunk(oct_register *r, const cufftComplex *X, const int32_t *pair, size_t total,
                          reg_peak *out, oct_error *e);

static oct_err cuda_fine(oct_register *r, const uint32_t *off, const int32_t *cand, int half,
                         reg_peak *out, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    const cufftComplex *X = c->x2;
    if (half) { /* the input buffer is free once transformed */
        size_t n = (size_t)r->L * r->N * r->D;
        dim3 gh(grid_for((size_t)r->N * r->D), r->L < 65535 ? r->L : 65535);
        k_half<<<gh, RB, 0, c->st>>>(c->t2, c->vol, n, r->N, r->D, half, c->tab,
                                     tabs_of(r->L, r->N, r->D, r->Nc, r->Dc));
        CF(cufftExecR2C(c->p2f, c->vol, c->x2h), "half-line spectra");
        X = c->x2h;
    }
    size_t total = off[r->L];
    int32_t *pair = (int32_t *)malloc(sizeof(int32_t) * 2 * total);
    if (!pair)
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    for (uint32_t l = 0; l < r->L; l++)
        for (uint32_t i = off[l]; i < off[l + 1]; i++)
            pair[2 * i] = (int32_t)l, pair[2 * i + 1] = cand[i];
    /* every pair up, the batches queued without a host round trip, every
     * peak down: one synchronisation per pass (per npair pairs) */
    oct_err err = OCT_OK;
    for (size_t c0 = 0; c0 < total && !err; c0 += c->npair) {
        size_t n = total - c0 < c->npair ? total - c0 : c->npair;
        err = fine_chunk(r, X, pair + 2 * c0, n, out + c0, e);
    }
    free(pair);
    if (!err && cudaEventRecord(c->ev[3], c->st) != cudaSuccess) /* the last stage marks the end */
        err = oct_error_set(e, OCT_EDEVICE, "registration: event record failed");
    return err;
}

/* the split test's parts 1 .. np at once: their masked lines and spectra
 * queued back to back (x2h [part][line]), every part's pairs in one pass,
 * one download */
static oct_err cuda_fine_parts(oct_register *r, const uint32_t *off, const int32_t *cand, int np,
                               reg_peak *const *out, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    if (np < 1 || np > REG_NPARTS)
        return oct_error_set(e, OCT_EINVAL, "registration: %d line parts (at most %d)", np,
                             REG_NPARTS);
    const size_t n = (size_t)r->L * r->N * r->D, nl = (size_t)r->L * r->N * c->Dh;
    const reg_tabs tb = tabs_of(r->L, r->N, r->D, r->Nc, r->Dc);
    dim3 gh(grid_for((size_t)r->N * r->D), r->L < 65535 ? r->L : 65535);
    for (int h = 0; h < np; h++) { /* the input buffer is free once transformed */
        k_half<<<gh, RB, 0, c->st>>>(c->t2, c->vol, n, r->N, r->D, h + 1, c->tab, tb);
        CF(cufftExecR2C(c->p2f, c->vol, c->x2h + h * nl), "part-line spectra");
    }
    const size_t total = off[r->L], all = total * (size_t)np;
    int32_t *pair = (int32_t *)malloc(sizeof(int32_t) * 2 * (all ? all : 1));
    reg_peak *pk = (reg_peak *)malloc(sizeof(reg_peak) * (all ? all : 1));
    if (!pair || !pk) {
        free(pair), free(pk);
        return oct_error_set(e, OCT_ENOMEM, "registration: out of memory");
    }
    for (int h = 0; h < np; h++)
        for (uint32_t l = 0; l < r->L; l++)
            for (uint32_t i = off[l]; i < off[l + 1]; i++) {
                size_t j = h * total + i;
                pair[2 * j] = (int32_t)(h * r->L + l), pair[2 * j + 1] = cand[i];
            }
    oct_err err = OCT_OK;
    for (size_t c0 = 0; c0 < all && !err; c0 += c->npair) {
        size_t m = all - c0 < c->npair ? all - c0 : c->npair;
        err = fine_chunk(r, c->x2h, pair + 2 * c0, m, pk + c0, e);
    }
    for (int h = 0; !err && h < np; h++)
        memcpy(out[h], pk + h * total, sizeof(reg_peak) * total);
    free(pair), free(pk);
    if (!err && cudaEventRecord(c->ev[3], c->st) != cudaSuccess)
        err = oct_error_set(e, OCT_EDEVICE, "registration: event record failed");
    return err;
}

/* n (<= npair) pairs against the line spectra X: their peaks into out */
static oct_err fine_chunk(oct_register *r, const cufftComplex *X, const int32_t *pair, size_t total,
                          reg_peak *out, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    oct_err err = OCT_OK;
    cudaError_t ce = cudaMemcpyAsync(c->pair, pair, total * 8, cudaMemcpyHostToDevice, c->st);
    if (ce != cudaSuccess)
        return oct_error_set(e, OCT_EDEVICE, "registration: upload: %s", cudaGetErrorString(ce));
    for (size_t s = 0, nb = 0; s < total && !err; s += nb) {
        /* batch fb, else the largest tail plan that the rest fills, else
         * the smallest (its surfaces beyond nb are stale, never read) */
        size_t left = total - s;
        cufftHandle plan = c->wpath ? c->p1x[0] : c->p2i;
        uint32_t pb = c->fb;
        if (left < c->fb && c->ntail > 0) {
            int k = 0;
            while (k + 1 < c->ntail && c->tb[k] > left)
                k++;
            plan = c->wpath ? c->p1x[1 + k] : c->p2t[k], pb = c->tb[k];
        }
        nb = left < pb ? left : pb;
        dim3 g(grid_for((size_t)r->N * c->Dh), (unsigned)nb);
        if (c->wpath) {
            /* cross powers [a][pb][k]; V = rows x tz: [a][pb][nz] complex; x
             * inversion of V's columns; peaks from its real part */
            reg_tabs tb = tabs_of(r->L, r->N, r->D, r->Nc, r->Dc);
            const int nz = 2 * r->sz + 1;
            const float one = 1.0f, zero = 0.0f;
            k_cross2w<<<g, RB, 0, c->st>>>(c->ref2, X, c->pair + 2 * s, c->fy, r->N, c->Dh, pb,
                                           c->tab, tb);
            cublasStatus_t bs;
            if (nb == pb) /* one GEMM over every row */
                bs = cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, 2 * nz, (int)(r->N * pb),
                                 2 * (int)c->Dh, &one, c->tz, 2 * nz, (const float *)c->fy,
                                 2 * (int)c->Dh, &zero, (float *)c->fv, 2 * nz);
            else /* the nb pairs of each x-frequency */
                bs = cublasSgemmStridedBatched(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, 2 * nz, (int)nb,
                                               2 * (int)c->Dh, &one, c->tz, 2 * nz, 0,
                                               (const float *)c->fy, 2 * (int)c->Dh,
                                               2 * (long long)pb * c->Dh, &zero, (float *)c->fv,
                                               2 * nz, 2 * (long long)pb * nz, (int)r->N);
            if (bs != CUBLAS_STATUS_SUCCESS) {
                err = oct_error_set(e, OCT_EDEVICE, "registration: cuBLAS z inversion failed (%d)",
                                    (int)bs);
                break;
            }
            if (cufftExecC2C(plan, c->fv, c->fv, CUFFT_INVERSE) != CUFFT_SUCCESS) {
                err = oct_error_set(e, OCT_EDEVICE, "registration: cuFFT surfaces failed");
                break;
            }
            k_peakv<<<(unsigned)nb, RB, 0, c->st>>>(c->fv, c->pair + 2 * s, c->pk + s, r->N, pb,
                                                    r->sx, r->sz, (float)(1.0 / r->sumw2));
            continue;
        }
        k_cross2<<<g, RB, 0, c->st>>>(c->ref2, X, c->pair + 2 * s, c->fy, r->N, r->D, c->Dh, c->tab,
                                      tabs_of(r->L, r->N, r->D, r->Nc, r->Dc));
        if (cufftExecC2R(plan, c->fy, c->fs) != CUFFT_SUCCESS) {
            err = oct_error_set(e, OCT_EDEVICE, "registration: cuFFT surfaces failed");
            break;
        }
        k_peak2<<<(unsigned)nb, RB, 0, c->st>>>(c->fs, c->pair + 2 * s, c->pk + s, r->N, r->D,
                                                r->sx, r->sz, (float)(1.0 / r->sumw2));
    }
    if (!err && total) {
        ce = cudaMemcpyAsync(out, c->pk, total * sizeof(reg_peak), cudaMemcpyDeviceToHost, c->st);
        if (ce == cudaSuccess)
            ce = cudaStreamSynchronize(c->st); /* pair (host) is read until here */
        if (ce != cudaSuccess)
            err = oct_error_set(e, OCT_EDEVICE, "registration: fine stage: %s", cudaGetErrorString(ce));
    } else if (err) {
        cudaStreamSynchronize(c->st);
    }
    return err;
}

static oct_err cuda_refine(oct_register *r, const reg_peak *best, float *sub, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    CU(cudaMemcpyAsync(c->pk, best, r->L * sizeof(reg_peak), cudaMemcpyHostToDevice, c->st), "upload");
    const uint32_t L = r->L;
    const unsigned gu = L;
    reg_tabs tb = tabs_of(r->L, r->N, r->D, r->Nc, r->Dc);
    k_refine_cross<<<dim3(grid_for((size_t)r->N * c->Dh), L), RB, 0, c->st>>>(
        c->ref2, c->x2, c->pk, c->cy, r->N, c->Dh, c->tab, tb);
    k_refine_update<<<gu, RB, 0, c->st>>>(c->pk, c->rst, c->rpart, c->ph, -1, r->N, r->D, c->Dh,
                                          c->rb, r->sumw2);
    for (int it = 0; it <= REG_NEWTON_STEPS; it++) {
        k_refine_sums<<<dim3(c->rb, L), RF, 0, c->st>>>(c->cy, c->rst, c->ph, c->rpart, r->N, r->D,
                                                        c->Dh, c->rb);
        k_refine_update<<<gu, RB, 0, c->st>>>(c->pk, c->rst, c->rpart, c->ph, it, r->N, r->D, c->Dh,
                                              c->rb, r->sumw2);
    }
    k_refine_out<<<grid_for(L), RB, 0, c->st>>>(c->pk, c->rst, c->sub, L);
    CU(cudaMemcpyAsync(sub, c->sub, (size_t)r->L * 12, cudaMemcpyDeviceToHost, c->st), "download");
    CU(cudaEventRecord(c->ev[3], c->st), "event");
    CU(cudaStreamSynchronize(c->st), "refine");
    return OCT_OK;
}

static oct_err cuda_surface_line(oct_register *r, uint32_t tl, uint32_t rl, float *out, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    int32_t p[2] = {(int32_t)tl, (int32_t)rl};
    CU(cudaMemcpyAsync(c->pair, p, 8, cudaMemcpyHostToDevice, c->st), "upload");
    dim3 g(grid_for((size_t)r->N * c->Dh), 1);
    k_cross2<<<g, RB, 0, c->st>>>(c->ref2, c->x2, c->pair, c->fy, r->N, r->D, c->Dh, c->tab,
                                  tabs_of(r->L, r->N, r->D, r->Nc, r->Dc));
    CF(cufftExecC2R(c->p2i, c->fy, c->fs), "surface");
    size_t n2 = (size_t)r->N * r->D;
    k_scale<<<grid_for(n2), RB, 0, c->st>>>(c->fs, n2, (float)(1.0 / r->sumw2));
    CU(cudaMemcpyAsync(out, c->fs, n2 * 4, cudaMemcpyDeviceToHost, c->st), "download");
    CU(cudaStreamSynchronize(c->st), "surface");
    return OCT_OK;
}

static oct_err cuda_surface_stripe(oct_register *r, uint32_t l0, float *out, oct_error *e)
{
    cuda_reg *c = (cuda_reg *)r->be;
    int32_t win[3] = {(int32_t)l0, 0, 0};
    CU(cudaMemcpyAsync(c->win, win, sizeof win, cudaMemcpyHostToDevice, c->st), "upload");
    oct_err err = cuda_coarse_batch(r, 1, c->win, e);
    if (err)
        return err;
    size_t n3 = (size_t)r->L * r->Nc * r->Dc;
    k_scale<<<grid_for(n3), RB, 0, c->st>>>(c->sb, n3, (float)(1.0 / r->sumw3));
    CU(cudaMemcpyAsync(out, c->sb, n3 * 4, cudaMemcpyDeviceToHost, c->st), "download");
    CU(cudaStreamSynchronize(c->st), "surface");
    return OCT_OK;
}

static void cuda_times(const oct_register *r, oct_register_times *t)
{
    cuda_reg *c = (cuda_reg *)r->be;
    float u = 0, a = 0, b = 0, d = 0;
    if (cudaEventElapsedTime(&u, c->ev[0], c->ev[4]) == cudaSuccess &&
        cudaEventElapsedTime(&a, c->ev[4], c->ev[1]) == cudaSuccess &&
        cudaEventElapsedTime(&b, c->ev[1], c->ev[2]) == cudaSuccess &&
        cudaEventElapsedTime(&d, c->ev[2], c->ev[3]) == cudaSuccess) {
        /* stream time from the volume on the device to the last stage (the
         * short host steps between stages included), the upload apart */
        t->upload_ms = u, t->prep_ms = a, t->coarse_ms = b, t->fine_ms = d;
        t->total_ms = (double)a + b + d;
    }
}

extern "C" const reg_ops reg_cuda_ops = {
    "cuda",
    true, /* device_finite */
    cuda_create,
    cuda_destroy,
    cuda_set_reference,
    cuda_prep_target,
    cuda_coarse,
    cuda_fine,
    cuda_refine,
    cuda_surface_line,
    cuda_surface_stripe,
    cuda_times,
    cuda_fine_parts,
};
