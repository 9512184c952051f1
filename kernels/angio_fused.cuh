/* angio_fused.cuh - ssada of one position (g, n) in one thread block, with
 * its own shared-memory FFT (angio.h cuda_path OCT_ANGIO_CUDA_FUSED).
 *
 * Why: the cuFFT path writes the K band spectra (K x 4 B a sample), reads
 * them back for the R2C, writes and reads K complex half-spectra: ~2.2 GB
 * per chunk of 31.6 k spectra of 1024 samples (K = 4).  Here a block reads
 * the R spectra of its position once into shared memory and writes only the
 * ssada pixels: ~0.15 GB per chunk; the transforms run out of shared memory.
 *
 * Per band k, two repeats at a time are packed into one complex transform,
 * z = g_k x_r + i g_k x_{r+1}, so that U = DFT(g_k x_r), W = DFT(g_k x_{r+1})
 * come out as U[d] = (Z[d] + conj Z[M-d]) / 2, W[d] = (Z[d] - conj Z[M-d]) / 2i.
 * The transform is Stockham auto-sort (radix 4, one radix-2 stage first when
 * log2 M is odd), ping-pong between two buffers, twiddles tw[t] =
 * exp(-2 pi i t / M) from a table computed in double.
 *
 * Written as a function of (thread, threads) with AF_SYNC() between phases,
 * so that the same code runs on the host: test_angio t_fused_host checks it
 * against the float64 reference with one thread and with a pthread "block"
 * whose AF_SYNC is a barrier (a missing barrier shows as wrong pixels).
 */
#ifndef OCT_ANGIO_FUSED_CUH
#define OCT_ANGIO_FUSED_CUH

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define AF_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define AF_SYNC() __syncthreads()
#else
#define AF_SYNC() ((void)0)
#endif
#else /* C or C++ on the host: one thread, or a test's barrier */
#define AF_HD static inline
#ifndef AF_SYNC
#define AF_SYNC() ((void)0)
#endif
#endif

#ifdef __CUDACC__
typedef float2 af_c;
#else
typedef struct af_float2 {
    float x, y;
} af_c;
#endif

AF_HD af_c af_make(float x, float y)
{
    af_c r;
    r.x = x;
    r.y = y;
    return r;
}
AF_HD af_c af_add(af_c a, af_c b) { return af_make(a.x + b.x, a.y + b.y); }
AF_HD af_c af_sub(af_c a, af_c b) { return af_make(a.x - b.x, a.y - b.y); }
AF_HD af_c af_mul(af_c a, af_c b) { return af_make(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
/* -i a */
AF_HD af_c af_mi(af_c a) { return af_make(a.y, -a.x); }

AF_HD float af_pair(float a, float b)
{
    float den = a * a + b * b;
    return den > 0.0f ? 2.0f * a * b / den : 1.0f;
}

/* Shared memory of one block, in floats (buffers of complex values first:
 * 8-byte alignment). */
AF_HD size_t af_shared_floats(uint32_t M, uint32_t R)
{
    const uint32_t D = M / 2 + 1;
    return (size_t)4 * M /* two complex buffers */ + (size_t)R * M /* x */ +
           (size_t)R * D /* magnitudes */ + D /* accumulator */;
}

/* tw[t] = exp(-2 pi i t / M), t < M, computed in double (host). */
static inline void af_twiddles(af_c *tw, uint32_t M)
{
    for (uint32_t t = 0; t < M; t++) {
        const double a = -2.0 * 3.14159265358979323846 * (double)t / (double)M;
        tw[t].x = (float)cos(a);
        tw[t].y = (float)sin(a);
    }
}

/* Threads of a block for M samples: one radix-4 butterfly each (32..256). */
static inline uint32_t af_threads(uint32_t M)
{
    return M / 4 < 32 ? 32 : M / 4 > 256 ? 256 : M / 4;
}

/* The forward DFT of a[0..M) by Stockham stages; returns the buffer that
 * holds the result (a or b). */
AF_HD af_c *af_fft(af_c *a, af_c *b, const af_c *tw, uint32_t M, uint32_t logM, uint32_t tid,
                   uint32_t T)
{
    uint32_t Ns = 1;
    if (logM & 1u) { /* radix 2 */
        for (uint32_t j = tid; j < M / 2; j += T) {
            af_c v0 = a[j], v1 = a[j + M / 2];
            b[2 * j] = af_add(v0, v1);
            b[2 * j + 1] = af_sub(v0, v1);
        }
        af_c *t = a;
        a = b;
        b = t;
        Ns = 2;
        AF_SYNC();
    }
    for (; Ns < M; Ns *= 4) {
        const uint32_t step = M / (Ns * 4); /* twiddle index step */
        for (uint32_t j = tid; j < M / 4; j += T) {
            const uint32_t k = j & (Ns - 1);
            af_c v0 = a[j];
            af_c v1 = af_mul(a[j + M / 4], tw[k * step]);
            af_c v2 = af_mul(a[j + M / 2], tw[2 * k * step]);
            af_c v3 = af_mul(a[j + 3 * (M / 4)], tw[3 * k * step]);
            af_c s02 = af_add(v0, v2), d02 = af_sub(v0, v2);
            af_c s13 = af_add(v1, v3), d13 = af_mi(af_sub(v1, v3));
            const uint32_t o = (j - k) * 4 + k;
            b[o] = af_add(s02, s13);
            b[o + Ns] = af_add(d02, d13);
            b[o + 2 * Ns] = af_sub(s02, s13);
            b[o + 3 * Ns] = af_sub(d02, d13);
        }
        af_c *t = a;
        a = b;
        b = t;
        AF_SYNC();
    }
    return a;
}

/* ssada of one position: x points at repeat 0 of its R spectra (repeat r
 * at x + r * xr), gains g (K x M), twiddles tw (M), output pixel d at
 * out[d * sd].  sh: af_shared_floats(M, R) floats.  Threads tid of T. */
AF_HD void af_ssada_row(const float *x, size_t xr, const float *g, const af_c *tw, uint32_t M,
                        uint32_t logM, uint32_t R, int K, uint32_t F, float *out, size_t sd,
                        float *sh, uint32_t tid, uint32_t T)
{
    const uint32_t D = M / 2 + 1;
    af_c *b0 = (af_c *)sh, *b1 = b0 + M;
    float *xs = sh + 4 * (size_t)M, *mag = xs + (size_t)R * M, *acc = mag + (size_t)R * D;
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t m = tid; m < M; m += T)
            xs[(size_t)r * M + m] = x[(size_t)r * xr + m];
    for (uint32_t d = tid; d < D; d += T)
        acc[d] = 0.0f;
    AF_SYNC();
    const float inv = 1.0f / (float)(R - 1);
    for (int k = 0; k < K; k++) {
        const float *gk = g + (size_t)k * M;
        for (uint32_t r = 0; r < R; r += 2) {
            const bool two = r + 1 < R;
            const float *x0 = xs + (size_t)r * M, *x1 = x0 + M;
            for (uint32_t m = tid; m < M; m += T)
                b0[m] = af_make(gk[m] * x0[m], two ? gk[m] * x1[m] : 0.0f);
            AF_SYNC();
            const af_c *Z = af_fft(b0, b1, tw, M, logM, tid, T);
            for (uint32_t d = tid; d < D; d += T) {
                const af_c z = Z[d], c = Z[(M - d) & (M - 1)];
                /* U = (z + conj c) / 2, W = (z - conj c) / 2i */
                const float ux = 0.5f * (z.x + c.x), uy = 0.5f * (z.y - c.y);
                const float wx = 0.5f * (z.y + c.y), wy = -0.5f * (z.x - c.x);
                const bool cut = d < F;
                mag[(size_t)r * D + d] = cut ? 0.0f : sqrtf(ux * ux + uy * uy);
                if (two)
                    mag[(size_t)(r + 1) * D + d] = cut ? 0.0f : sqrtf(wx * wx + wy * wy);
            }
            AF_SYNC(); /* Z is b0 or b1: the next fill must wait */
        }
        for (uint32_t d = tid; d < D; d += T) {
            float c = 0.0f;
            for (uint32_t r = 1; r < R; r++)
                c += af_pair(mag[(size_t)(r - 1) * D + d], mag[(size_t)r * D + d]);
            acc[d] += 1.0f - c * inv;
        }
        /* the next band's magnitudes are written after at least one more
         * AF_SYNC (its fill), so no barrier here */
    }
    const float invK = 1.0f / (float)K;
    for (uint32_t d = tid; d < D; d += T)
        out[(size_t)d * sd] = acc[d] * invK;
}

#endif
