/* angio_align_cuda.cu - repeat alignment (angio.align) on the GPU, the twin of
 * angio.c's align_* functions; the definition is in angio.h.
 *
 * Per chunk of G groups (images b = g R + r, [N][D] each):
 *   cfd      (only when the caller gives no magnitudes) one batched R2C of x~
 *   estimate in sub-batches of whole groups (bounded memory):
 *            mean of every image (d >= F), the padded mean-removed images,
 *            their summed-area tables and those of the squares (double,
 *            the CPU's order of additions), one batched forward R2C
 *            (axial: length 2M per A-scan; lateral: 2-D 2N x 2M per image),
 *            the cross-power against repeat 0 of the group (axial: summed
 *            over A-scans in double), one batched inverse, the normalised
 *            correlation over the search window, its argmax (ties to the
 *            first in the CPU's scan order) and the parabola refinement
 *   resample the magnitudes (bilinear, clamped) for struct/median/sv/decor
 *   ssada    per band k: g_k x~ -> one batched R2C -> magnitudes; the decor of
 *            the resampled band images accumulated per pixel, / K at the end.
 * Float and double operations follow angio.c step by step, so that the shifts
 * agree with the CPU's to rounding (cuFFT vs FFTW) and the metrics to 1e-4.
 */
#include <cuda_runtime.h>
#include <cufft.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "angio_align_cuda.h"
#include "cuda_check.cuh"

#define ACU(call, what) OCT_CUDA_TRY(call, "angio.align cuda", what)
#define AFFT(call, what) OCT_CUFFT_TRY(call, "angio.align cuda", what)

/* padded real values per estimation sub-batch (bounds the FFT buffers) */
#define ALIGN_PAD_BUDGET ((size_t)32 << 20)

struct oct_angio_align_cuda {
    oct_angio_config c;
    cudaStream_t st;
    uint32_t D, F, Dz, W, Pn, Pz, Hz, rows; /* rows of one padded image: N or Pn */
    int mz, mx, wz, wx;                     /* search half-widths and window sizes */
    uint32_t max_groups;                    /* groups per chunk */
    uint32_t plan_groups, sub_groups;       /* estimation: groups the plans hold, per batch */
    /* estimation (B = plan_groups R images) */
    float *pad;           /* B x rows x Pz; the correlation after the inverse */
    cufftComplex *spec;   /* B x rows x Hz */
    cufftComplex *cross;  /* B x (Pn > 1 ? Pn : 1) x Hz */
    float *mean;          /* B */
    double *mpart;        /* B x MEAN_PARTS partial sums of the means */
    double *tab;          /* B x {sum, sq} x (N+1) x W */
    double *ncc;          /* B x wx x wz */
    /* chunk (S = max_groups R N spectra) */
    float *shift;         /* max_groups x R x {dz, dx} */
    float *gains;         /* K x M */
    float *bx;            /* S x M: x~ or g_k x~ */
    cufftComplex *bspec;  /* S x D */
    float *mag;           /* S x D: magnitudes computed here / band magnitudes */
    float *al;            /* S x D: aligned magnitudes */
    float *acc;           /* max_groups x N x D: ssada over the bands */
    cufftHandle fwd, bwd, r2c;
    bool have_fwd, have_bwd, have_r2c;
};

static unsigned nblocks(size_t n)
{
    return (unsigned)((n + 255) / 256);
}

/* ---- kernels (file-local: angio_cuda.cu has kernels of the same names) -------- */
namespace {

__device__ __forceinline__ float pair_c(float a, float b)
{
    float den = __fadd_rn(__fmul_rn(a, a), __fmul_rn(b, b));
    return den > 0.0f ? 2.0f * a * b / den : 1.0f;
}

/* out[i] = g[i % M] x[i] (g NULL: x[i]) for i < used, 0 up to total (the plan's batch) */
__global__ void k_mul(const float *__restrict__ x, const float *__restrict__ g,
                      float *__restrict__ out, uint32_t M, size_t used, size_t total)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    out[i] = i < used ? (g ? g[i % M] * x[i] : x[i]) : 0.0f;
}

__global__ void k_mag(const cufftComplex *__restrict__ X, float *__restrict__ A, size_t n,
                      uint32_t D, uint32_t F)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t d = (uint32_t)(i % D);
    A[i] = d < F ? 0.0f : sqrtf(__fadd_rn(__fmul_rn(X[i].x, X[i].x), __fmul_rn(X[i].y, X[i].y)));
}

/* image means over d >= F, in double, deterministic: MEAN_PARTS blocks per
 * image (rows p, p + MEAN_PARTS, ...) each write a partial sum, then one
 * thread per image adds them in order */
#define MEAN_PARTS 32
__global__ void k_mean_part(const float *__restrict__ A, uint32_t N, uint32_t D, uint32_t F,
                            double *__restrict__ part)
{
    __shared__ double sh[256];
    const uint32_t b = blockIdx.y, p = blockIdx.x, Dz = D - F;
    const float *img = A + (size_t)b * N * D + F;
    double s = 0;
    for (uint32_t n = p; n < N; n += MEAN_PARTS)
        for (uint32_t d = threadIdx.x; d < Dz; d += blockDim.x)
            s += img[(size_t)n * D + d];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h)
            sh[threadIdx.x] += sh[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[(size_t)b * MEAN_PARTS + p] = sh[0];
}

__global__ void k_mean_final(const double *__restrict__ part, uint32_t used, uint32_t N,
                             uint32_t Dz, float *__restrict__ mean)
{
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= used)
        return;
    double s = 0;
    for (int p = 0; p < MEAN_PARTS; p++)
        s += part[(size_t)b * MEAN_PARTS + p];
    mean[b] = (float)(s / ((double)N * Dz));
}

/* padded real images: img - mean at [row n][column d] for n < N, F <= d < D, else 0;
 * images b >= used are all 0 (the plan's batch is fixed) */
__global__ void k_pad(const float *__restrict__ A, const float *__restrict__ mean,
                      float *__restrict__ pad, uint32_t used, uint32_t B, uint32_t rows,
                      uint32_t Pz, uint32_t N, uint32_t D, uint32_t F)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * rows * Pz)
        return;
    uint32_t z = (uint32_t)(i % Pz);
    uint32_t n = (uint32_t)((i / Pz) % rows);
    uint32_t b = (uint32_t)(i / ((size_t)Pz * rows));
    pad[i] = b < used && n < N && z >= F && z < D ? A[((size_t)b * N + n) * D + z] - mean[b]
                                                   : 0.0f;
}

/* summed-area tables, step 1: prefix sums along d of each row into row n+1
 * (thread per image row), row 0 and column 0 zero */
__global__ void k_sat_rows(const float *__restrict__ A, const float *__restrict__ mean,
                           double *__restrict__ tab, uint32_t used, uint32_t N, uint32_t D,
                           uint32_t F, uint32_t W)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)used * N)
        return;
    const uint32_t n = (uint32_t)(i % N), b = (uint32_t)(i / N), Dz = D - F;
    const size_t T = (size_t)(N + 1) * W;
    double *ts = tab + (size_t)b * 2 * T, *tq = ts + T;
    if (n == 0)
        for (uint32_t d = 0; d < W; d++)
            ts[d] = tq[d] = 0;
    const float *row = A + ((size_t)b * N + n) * D + F;
    const float m = mean[b];
    double rs = 0, rq = 0;
    ts[(size_t)(n + 1) * W] = tq[(size_t)(n + 1) * W] = 0;
    for (uint32_t d = 0; d < Dz; d++) {
        double v = (double)(row[d] - m);
        rs += v;
        rq = __dadd_rn(rq, __dmul_rn(v, v)); /* no FMA: the CPU's rounding */
        ts[(size_t)(n + 1) * W + d + 1] = rs;
        tq[(size_t)(n + 1) * W + d + 1] = rq;
    }
}

/* step 2: down each column, T[n+1][c] = T[n][c] + rowprefix (angio.c's sum,
 * T[n][c] kept in a register; 8 rows loaded before they are stored, so that
 * the loads overlap instead of waiting one by one behind the stores) */
__global__ void k_sat_cols(double *__restrict__ tab, uint32_t used, uint32_t N, uint32_t W)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)used * 2 * W)
        return;
    const uint32_t c = (uint32_t)(i % W);
    const size_t t = i / W; /* image b, table sum/sq */
    double *T = tab + t * (size_t)(N + 1) * W + c;
    double acc = T[0];
    uint32_t n = 1;
    for (; n + 8 <= N + 1; n += 8) {
        double v[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = T[(size_t)(n + j) * W];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            acc = acc + v[j];
            T[(size_t)(n + j) * W] = acc;
        }
    }
    for (; n <= N; n++) {
        acc = acc + T[(size_t)n * W];
        T[(size_t)n * W] = acc;
    }
}

/* axial cross-power: per image b and frequency k, sum over A-scans of
 * conj(F0) Fr in double (F0: repeat 0 of b's group) */
__global__ void k_cross_axial(const cufftComplex *__restrict__ spec,
                              cufftComplex *__restrict__ cross, uint32_t used, uint32_t B,
                              uint32_t R, uint32_t N, uint32_t Hz)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * Hz)
        return;
    const uint32_t k = (uint32_t)(i % Hz), b = (uint32_t)(i / Hz), b0 = b / R * R;
    if (b >= used) {
        cross[i] = make_cuFloatComplex(0.0f, 0.0f);
        return;
    }
    double sr = 0, si = 0;
#pragma unroll 4
    for (uint32_t n = 0; n < N; n++) {
        const cufftComplex f0 = spec[((size_t)b0 * N + n) * Hz + k];
        const cufftComplex fr = spec[((size_t)b * N + n) * Hz + k];
        sr += __dadd_rn(__dmul_rn(f0.x, fr.x), __dmul_rn(f0.y, fr.y));
        si += __dsub_rn(__dmul_rn(f0.x, fr.y), __dmul_rn(f0.y, fr.x));
    }
    cross[i] = make_cuFloatComplex((float)sr, (float)si);
}

/* lateral cross-power: conj(F0) Fr element by element (float, as angio.c) */
__global__ void k_cross_lateral(const cufftComplex *__restrict__ spec,
                                cufftComplex *__restrict__ cross, uint32_t used, uint32_t B,
                                uint32_t R, size_t nc)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * nc)
        return;
    const uint32_t b = (uint32_t)(i / nc), b0 = b / R * R;
    if (b >= used) {
        cross[i] = make_cuFloatComplex(0.0f, 0.0f);
        return;
    }
    const cufftComplex a = spec[(size_t)b0 * nc + i % nc], f = spec[i];
    cross[i] = make_cuFloatComplex(__fadd_rn(__fmul_rn(a.x, f.x), __fmul_rn(a.y, f.y)),
                                   __fsub_rn(__fmul_rn(a.x, f.y), __fmul_rn(a.y, f.x)));
}

__device__ __forceinline__ double rect(const double *t, uint32_t W, int n0, int n1, int d0,
                                       int d1)
{
    return t[(size_t)n1 * W + d1] - t[(size_t)n0 * W + d1] - t[(size_t)n1 * W + d0] +
           t[(size_t)n0 * W + d0];
}

/* normalised cross-correlation over the overlap, thread per (image, sx, sz) */
__global__ void k_ncc(const float *__restrict__ corr, const double *__restrict__ tab,
                      double *__restrict__ ncc, uint32_t used, uint32_t R, uint32_t N,
                      uint32_t Dz, uint32_t W, uint32_t Pn, uint32_t Pz, int mx, int mz,
                      double scale)
{
    const int wz = 2 * mz + 1, wx = 2 * mx + 1;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)used * wx * wz)
        return;
    const int sz = (int)(i % wz) - mz, sx = (int)((i / wz) % wx) - mx;
    const uint32_t b = (uint32_t)(i / ((size_t)wx * wz)), b0 = b / R * R;
    if (b == b0)
        return;
    const size_t T = (size_t)(N + 1) * W;
    const double *sum0 = tab + (size_t)b0 * 2 * T, *sq0 = sum0 + T;
    const double *sumr = tab + (size_t)b * 2 * T, *sqr = sumr + T;
    const int n0 = sx < 0 ? -sx : 0, n1 = sx < 0 ? (int)N : (int)N - sx;
    const int d0 = sz < 0 ? -sz : 0, d1 = sz < 0 ? (int)Dz : (int)Dz - sz;
    const double ov = (double)(n1 - n0) * (d1 - d0);
    const double s0 = rect(sum0, W, n0, n1, d0, d1);
    const double q0 = rect(sq0, W, n0, n1, d0, d1);
    const double sr = rect(sumr, W, n0 + sx, n1 + sx, d0 + sz, d1 + sz);
    const double qr = rect(sqr, W, n0 + sx, n1 + sx, d0 + sz, d1 + sz);
    const double cross =
        corr[(size_t)b * Pn * Pz + (size_t)((sx + (int)Pn) % (int)Pn) * Pz +
             (uint32_t)((sz + (int)Pz) % (int)Pz)] *
        scale;
    const double v0 = q0 - s0 * s0 / ov, vr = qr - sr * sr / ov;
    const double den = sqrt((v0 > 1e-30 ? v0 : 1e-30) * (vr > 1e-30 ? vr : 1e-30));
    ncc[i] = (cross - s0 * sr / ov) / den;
}

__device__ double vertex(double cm, double c0, double cp)
{
    double den = cm - 2 * c0 + cp;
    if (!(den < 0))
        return 0;
    double v = 0.5 * (cm - cp) / den;
    return v < -0.5 ? -0.5 : v > 0.5 ? 0.5 : v;
}

/* one block per image: argmax of the window (ties: the first in scan order,
 * NaN never wins, none = the centre, as angio.c), parabolas, shift out */
__global__ void k_peak(const double *__restrict__ ncc, float *__restrict__ shift, uint32_t g_off,
                       uint32_t R, int mx, int mz)
{
    __shared__ double bv[256];
    __shared__ int bi[256];
    const int wz = 2 * mz + 1, wx = 2 * mx + 1, cnt = wx * wz;
    const uint32_t b = blockIdx.x, r = b % R;
    float *out = shift + ((size_t)(g_off * R) + b) * 2;
    if (r == 0) {
        if (threadIdx.x == 0)
            out[0] = out[1] = 0.0f;
        return;
    }
    const double *w = ncc + (size_t)b * cnt;
    double best = -INFINITY;
    int at = mx * wz + mz;
    for (int i = threadIdx.x; i < cnt; i += blockDim.x)
        if (w[i] > best) {
            best = w[i];
            at = i;
        }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = at;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            double v = bv[threadIdx.x + h];
            int j = bi[threadIdx.x + h];
            if (v > bv[threadIdx.x] || (v == bv[threadIdx.x] && j < bi[threadIdx.x])) {
                bv[threadIdx.x] = v;
                bi[threadIdx.x] = j;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x)
        return;
    best = bv[0];
    const int bx = bi[0] / wz - mx, bz = bi[0] % wz - mz;
#define NCC(x, z) w[((x) + mx) * wz + ((z) + mz)]
    double fz = bz > -mz && bz < mz ? vertex(NCC(bx, bz - 1), best, NCC(bx, bz + 1)) : 0;
    double fx = mx && bx > -mx && bx < mx ? vertex(NCC(bx - 1, bz), best, NCC(bx + 1, bz)) : 0;
#undef NCC
    out[0] = (float)(bz + fz);
    out[1] = (float)(bx + fx);
}

/* src(n + dx, d + dz) of one [N][D] image, bilinear, coordinates clamped
 * (angio.c's resample, operation by operation) */
__device__ __forceinline__ float bilinear(const float *src, uint32_t N, uint32_t D, uint32_t n,
                                          uint32_t d, float dx, float dz)
{
    float xn = (float)n + dx;
    xn = xn < 0 ? 0 : xn > (float)(N - 1) ? (float)(N - 1) : xn;
    uint32_t n0 = (uint32_t)xn, n1 = n0 + 1 < N ? n0 + 1 : n0;
    float fx = xn - (float)n0;
    float z = (float)d + dz;
    z = z < 0 ? 0 : z > (float)(D - 1) ? (float)(D - 1) : z;
    uint32_t d0 = (uint32_t)z, d1 = d0 + 1 < D ? d0 + 1 : d0;
    float fz = z - (float)d0;
    const float *s0 = src + (size_t)n0 * D, *s1 = src + (size_t)n1 * D;
    float v0 = __fadd_rn(s0[d0], __fmul_rn(fz, s0[d1] - s0[d0]));
    float v1 = __fadd_rn(s1[d0], __fmul_rn(fz, s1[d1] - s1[d0]));
    return __fadd_rn(v0, __fmul_rn(fx, v1 - v0));
}

/* dst = src with every image resampled by its shift (repeat 0: shift 0, a copy) */
__global__ void k_resample(const float *__restrict__ src, float *__restrict__ dst,
                           const float *__restrict__ shift, size_t images, uint32_t N,
                           uint32_t D)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= images * N * D)
        return;
    const uint32_t d = (uint32_t)(i % D), n = (uint32_t)((i / D) % N);
    const size_t b = i / ((size_t)N * D);
    dst[i] = bilinear(src + b * N * D, N, D, n, d, shift[2 * b + 1], shift[2 * b]);
}

/* band k of ssada: decor of the resampled band images at pixel (g, n, d),
 * accumulated over the bands in acc; the last band writes acc / K */
__global__ void k_decor_aligned(const float *__restrict__ B, const float *__restrict__ shift,
                                float *__restrict__ acc, float *__restrict__ out, uint32_t G,
                                uint32_t R, uint32_t N, uint32_t D, int k, int K, size_t sg,
                                size_t sn, size_t sd)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)G * N * D)
        return;
    const uint32_t d = (uint32_t)(i % D), n = (uint32_t)((i / D) % N);
    const uint32_t g = (uint32_t)(i / ((size_t)N * D));
    const size_t img = (size_t)N * D;
    const float *grp = B + (size_t)g * R * img;
    const float *sh = shift + (size_t)g * R * 2;
    float s = 0.0f, prev = grp[(size_t)n * D + d];
    for (uint32_t r = 1; r < R; r++) {
        float cur = bilinear(grp + r * img, N, D, n, d, sh[2 * r + 1], sh[2 * r]);
        s += pair_c(prev, cur);
        prev = cur;
    }
    float v = 1.0f - s * (1.0f / (float)(R - 1));
    float a = k == 0 ? v : acc[i] + v;
    if (k == K - 1)
        out[(size_t)g * sg + (size_t)n * sn + (size_t)d * sd] = a * (1.0f / (float)K);
    else
        acc[i] = a;
}

} /* namespace */

/* ---- plan ------------------------------------------------------------------------ */

extern "C" void oct_angio_align_cuda_destroy(oct_angio_align_cuda *p)
{
    if (!p)
        return;
    if (p->have_fwd)
        cufftDestroy(p->fwd);
    if (p->have_bwd)
        cufftDestroy(p->bwd);
    if (p->have_r2c)
        cufftDestroy(p->r2c);
    void *bufs[] = {p->pad, p->spec, p->cross, p->mean, p->mpart, p->tab, p->ncc,
                    p->shift, p->gains, p->bx, p->bspec, p->mag, p->al, p->acc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    free(p);
}

static oct_err plan_inner(oct_angio_align_cuda *p, oct_error *e)
{
    const oct_angio_config *c = &p->c;
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = p->D;
    const bool lat = c->align == OCT_ANGIO_ALIGN_LATERAL;
    const size_t B = (size_t)p->plan_groups * R, S = (size_t)p->max_groups * R * N;
    const int K = c->bands;
    ACU(cudaMalloc(&p->pad, sizeof(float) * B * p->rows * p->Pz), "padded images");
    ACU(cudaMalloc(&p->spec, sizeof(cufftComplex) * B * p->rows * p->Hz), "image spectra");
    ACU(cudaMalloc(&p->cross, sizeof(cufftComplex) * B * (lat ? p->Pn : 1) * p->Hz), "cross-power");
    ACU(cudaMalloc(&p->mean, sizeof(float) * B), "means");
    ACU(cudaMalloc(&p->mpart, sizeof(double) * B * MEAN_PARTS), "means");
    ACU(cudaMalloc(&p->tab, sizeof(double) * B * 2 * (N + 1) * p->W), "summed-area tables");
    ACU(cudaMalloc(&p->ncc, sizeof(double) * B * p->wx * p->wz), "correlation window");
    ACU(cudaMalloc(&p->shift, sizeof(float) * p->max_groups * R * 2), "shifts");
    ACU(cudaMemset(p->shift, 0, sizeof(float) * p->max_groups * R * 2), "shifts");
    ACU(cudaMalloc(&p->bx, sizeof(float) * S * M), "band spectra");
    ACU(cudaMalloc(&p->bspec, sizeof(cufftComplex) * S * D), "band transforms");
    ACU(cudaMalloc(&p->mag, sizeof(float) * S * D), "magnitudes");
    ACU(cudaMalloc(&p->al, sizeof(float) * S * D), "aligned magnitudes");
    ACU(cudaMalloc(&p->acc, sizeof(float) * p->max_groups * N * D), "ssada accumulator");
    float *g = (float *)malloc(sizeof(float) * (size_t)K * M);
    if (!g)
        return oct_error_set(e, OCT_ENOMEM, "angio.align cuda: out of memory");
    oct_angio_band_gains(g, M, K, c->band_width);
    cudaError_t r = cudaMalloc(&p->gains, sizeof(float) * (size_t)K * M);
    if (r == cudaSuccess)
        r = cudaMemcpy(p->gains, g, sizeof(float) * (size_t)K * M, cudaMemcpyHostToDevice);
    free(g);
    ACU(r, "band gains");
    if (lat) {
        int n2[2] = {(int)p->Pn, (int)p->Pz};
        AFFT(cufftPlanMany(&p->fwd, 2, n2, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, (int)B),
             "plan (2-D forward)");
        p->have_fwd = true;
        AFFT(cufftPlanMany(&p->bwd, 2, n2, NULL, 1, 0, NULL, 1, 0, CUFFT_C2R, (int)B),
             "plan (2-D inverse)");
        p->have_bwd = true;
    } else {
        int n1 = (int)p->Pz;
        AFFT(cufftPlanMany(&p->fwd, 1, &n1, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, (int)(B * N)),
             "plan (axial forward)");
        p->have_fwd = true;
        AFFT(cufftPlanMany(&p->bwd, 1, &n1, NULL, 1, 0, NULL, 1, 0, CUFFT_C2R, (int)B),
             "plan (axial inverse)");
        p->have_bwd = true;
    }
    int m = (int)M;
    AFFT(cufftPlanMany(&p->r2c, 1, &m, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, (int)S), "plan (bands)");
    p->have_r2c = true;
    AFFT(cufftSetStream(p->fwd, p->st), "set stream");
    AFFT(cufftSetStream(p->bwd, p->st), "set stream");
    AFFT(cufftSetStream(p->r2c, p->st), "set stream");
    return OCT_OK;
}

extern "C" oct_err oct_angio_align_cuda_create(oct_angio_align_cuda **out,
                                               const oct_angio_config *c, void *stream,
                                               uint32_t max_groups, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_angio_config_check(c, e);
    if (err)
        return err;
    if (!c->align || max_groups == 0)
        return oct_error_set(e, OCT_EINVAL, "angio.align cuda: align = %u, %u groups: nothing "
                                            "to plan", c->align, max_groups);
    oct_angio_align_cuda *p = (oct_angio_align_cuda *)calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(e, OCT_ENOMEM, "angio.align cuda: out of memory");
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats;
    p->c = *c;
    p->st = (cudaStream_t)stream;
    p->D = M / 2 + 1;
    p->F = (uint32_t)c->freq_cutoff;
    p->Dz = p->D - p->F;
    p->W = p->Dz + 1;
    /* padded so that lags up to the search range never wrap (angio.c) */
    p->Pz = 2 * M;
    p->Hz = p->Pz / 2 + 1;
    p->Pn = c->align == OCT_ANGIO_ALIGN_LATERAL ? 2 * N : 1;
    p->rows = p->Pn > 1 ? p->Pn : N;
    p->mz = (int)(p->D / 4) < (int)p->Dz - 1 ? (int)(p->D / 4) : (int)p->Dz - 1;
    p->mx = p->Pn > 1 ? (int)(N / 4) : 0;
    p->wz = 2 * p->mz + 1;
    p->wx = 2 * p->mx + 1;
    p->max_groups = max_groups;
    size_t per_group = (size_t)R * p->rows * p->Pz, sub = ALIGN_PAD_BUDGET / per_group;
    p->plan_groups = p->sub_groups = (uint32_t)(sub < 1 ? 1 : sub > max_groups ? max_groups : sub);
    err = plan_inner(p, e);
    if (err) {
        oct_angio_align_cuda_destroy(p);
        return err;
    }
    *out = p;
    return OCT_OK;
}

/* ---- run --------------------------------------------------------------------- */

/* shifts of groups [g0, g0 + Gu) from their magnitudes A (at group g0) */
static oct_err estimate(oct_angio_align_cuda *p, const float *A, uint32_t g0, uint32_t Gu,
                        oct_error *e)
{
    const oct_angio_config *c = &p->c;
    const uint32_t N = c->ascans, R = c->repeats, D = p->D, F = p->F;
    const uint32_t B = p->plan_groups * R, used = Gu * R; /* the plans' batch, images here */
    cudaStream_t st = p->st;
    k_mean_part<<<dim3(MEAN_PARTS, used), 256, 0, st>>>(A, N, D, F, p->mpart);
    k_mean_final<<<nblocks(used), 256, 0, st>>>(p->mpart, used, N, p->Dz, p->mean);
    k_pad<<<nblocks((size_t)B * p->rows * p->Pz), 256, 0, st>>>(A, p->mean, p->pad, used, B,
                                                                 p->rows, p->Pz, N, D, F);
    k_sat_rows<<<nblocks((size_t)used * N), 256, 0, st>>>(A, p->mean, p->tab, used, N, D, F,
                                                          p->W);
    k_sat_cols<<<nblocks((size_t)used * 2 * p->W), 256, 0, st>>>(p->tab, used, N, p->W);
    AFFT(cufftExecR2C(p->fwd, p->pad, p->spec), "forward");
    if (p->Pn > 1)
        k_cross_lateral<<<nblocks((size_t)B * p->Pn * p->Hz), 256, 0, st>>>(
            p->spec, p->cross, used, B, R, (size_t)p->Pn * p->Hz);
    else
        k_cross_axial<<<nblocks((size_t)B * p->Hz), 256, 0, st>>>(p->spec, p->cross, used, B, R,
                                                                  N, p->Hz);
    AFFT(cufftExecC2R(p->bwd, p->cross, p->pad), "inverse"); /* pad: the correlation now */
    const double scale = 1.0 / ((double)p->Pn * p->Pz);       /* cuFFT's inverse is unnormalised */
    k_ncc<<<nblocks((size_t)used * p->wx * p->wz), 256, 0, st>>>(
        p->pad, p->tab, p->ncc, used, R, N, p->Dz, p->W, p->Pn, p->Pz, p->mx, p->mz, scale);
    k_peak<<<used, 256, 0, st>>>(p->ncc, p->shift, g0, R, p->mx, p->mz);
    ACU(cudaGetLastError(), "estimate kernels");
    return OCT_OK;
}

extern "C" oct_err oct_angio_align_cuda_run(oct_angio_align_cuda *p, const float *A,
                                            const float *x, uint32_t G, const float **Aal,
                                            float *ssada, size_t sg, size_t sn, size_t sd,
                                            oct_error *e)
{
    const oct_angio_config *c = &p->c;
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = p->D, F = p->F;
    if (G == 0 || G > p->max_groups)
        return oct_error_set(e, OCT_EINVAL, "angio.align cuda: %u groups, planned for 1..%u", G,
                             p->max_groups);
    if (!x && (!A || ssada))
        return oct_error_set(e, OCT_EINVAL, "angio.align cuda: %s needs the pre-processed spectra",
                             A ? "ssada" : "computing the CFD magnitudes");
    const size_t S = (size_t)G * R * N, Sf = (size_t)p->max_groups * R * N;
    cudaStream_t st = p->st;
    if (!A) {
        k_mul<<<nblocks(Sf * M), 256, 0, st>>>(x, NULL, p->bx, M, S * M, Sf * M);
        AFFT(cufftExecR2C(p->r2c, p->bx, p->bspec), "R2C (cfd)");
        k_mag<<<nblocks(S * D), 256, 0, st>>>(p->bspec, p->mag, S * D, D, F);
        A = p->mag;
    }
    for (uint32_t g0 = 0; g0 < G; g0 += p->sub_groups) {
        const uint32_t Gu = G - g0 < p->sub_groups ? G - g0 : p->sub_groups;
        oct_err err = estimate(p, A + (size_t)g0 * R * N * D, g0, Gu, e);
        if (err)
            return err;
    }
    if (Aal) {
        k_resample<<<nblocks(S * D), 256, 0, st>>>(A, p->al, p->shift, (size_t)G * R, N, D);
        *Aal = p->al;
    }
    if (ssada) { /* p->mag is free once A was resampled (stream order) */
        const int K = c->bands;
        for (int k = 0; k < K; k++) {
            k_mul<<<nblocks(Sf * M), 256, 0, st>>>(x, p->gains + (size_t)k * M, p->bx, M, S * M,
                                                   Sf * M);
            AFFT(cufftExecR2C(p->r2c, p->bx, p->bspec), "R2C (bands)");
            k_mag<<<nblocks(S * D), 256, 0, st>>>(p->bspec, p->mag, S * D, D, F);
            k_decor_aligned<<<nblocks((size_t)G * N * D), 256, 0, st>>>(
                p->mag, p->shift, p->acc, ssada, G, R, N, D, k, K, sg, sn, sd);
        }
    }
    ACU(cudaGetLastError(), "kernels");
    return OCT_OK;
}

/* ---- host convenience (tests) -------------------------------------------------- */

extern "C" oct_err oct_angio_cuda_align_host(const oct_angio_config *c, const float *A,
                                             const float *xt, uint32_t groups,
                                             uint32_t sub_groups, float *dz, float *dx,
                                             oct_error *e)
{
    if (groups == 0 || (!A && !xt))
        return oct_error_set(e, OCT_EINVAL, "angio.align cuda: no groups or no input");
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r != cudaSuccess || count == 0)
        return oct_error_set(e, OCT_EUNSUPPORTED, "angio.align cuda: no usable CUDA device (%s)",
                             r != cudaSuccess ? cudaGetErrorString(r) : "none found");
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = M / 2 + 1;
    const size_t S = (size_t)groups * R * N, n = A ? S * D : S * M;
    cudaStream_t st = NULL;
    oct_angio_align_cuda *p = NULL;
    float *d_in = NULL, *h = NULL;
    oct_err err = OCT_OK;
    if ((r = cudaStreamCreate(&st)) != cudaSuccess || (r = cudaMalloc(&d_in, sizeof(float) * n)) ||
        (r = cudaMemcpy(d_in, A ? A : xt, sizeof(float) * n, cudaMemcpyHostToDevice)))
        err = oct_error_set(e, OCT_EDEVICE, "angio.align cuda: upload: %s", cudaGetErrorString(r));
    if (!err)
        err = oct_angio_align_cuda_create(&p, c, st, groups, e);
    if (!err && sub_groups > 0 && sub_groups < p->sub_groups)
        p->sub_groups = sub_groups; /* fewer per batch (the rest of the plans' batch is 0) */
    if (!err)
        err = oct_angio_align_cuda_run(p, A ? d_in : NULL, A ? NULL : d_in, groups, NULL, NULL, 0,
                                       0, 0, e);
    if (!err && !(h = (float *)malloc(sizeof(float) * 2 * groups * R)))
        err = oct_error_set(e, OCT_ENOMEM, "angio.align cuda: out of memory");
    if (!err && ((r = cudaMemcpyAsync(h, p->shift, sizeof(float) * 2 * groups * R,
                                      cudaMemcpyDeviceToHost, st)) ||
                 (r = cudaStreamSynchronize(st))))
        err = oct_error_set(e, OCT_EDEVICE, "angio.align cuda: %s", cudaGetErrorString(r));
    if (!err)
        for (size_t i = 0; i < (size_t)groups * R; i++) {
            if (dz)
                dz[i] = h[2 * i];
            if (dx)
                dx[i] = h[2 * i + 1];
        }
    free(h);
    oct_angio_align_cuda_destroy(p);
    cudaFree(d_in);
    if (st)
        cudaStreamDestroy(st);
    return err;
}
