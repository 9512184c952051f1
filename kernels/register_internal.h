/* register_internal.h - what the registration's common logic (register.c)
 * shares with its backends (CPU in register.c, CUDA in register_cuda.cu).
 * The per-element math is here, once, as inline functions both compile, so
 * the backends compute the same numbers.  Not installed. */
#ifndef OCT_REGISTER_INTERNAL_H
#define OCT_REGISTER_INTERNAL_H

#include <math.h>

#include "oct_register.h"

#ifdef __CUDACC__
#define REG_HD __host__ __device__ static inline
#else
#define REG_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define REG_TUKEY_ALPHA 0.25f
#define REG_NEWTON_STEPS 6

/* Intensity transform: log1p(max(v, 0) / s). */
REG_HD float reg_g(float v, float inv_scale)
{
    return log1pf(fmaxf(v, 0.0f) * inv_scale);
}

/* Tukey window (alpha REG_TUKEY_ALPHA) at i of n. */
REG_HD float reg_tukey(int i, int n)
{
    if (n < 3)
        return 1.0f;
    float x = (float)i / (float)(n - 1), a = REG_TUKEY_ALPHA;
    if (x < a / 2)
        return 0.5f * (1.0f - cosf(6.28318530718f * x / a));
    if (x > 1.0f - a / 2)
        return 0.5f * (1.0f - cosf(6.28318530718f * (1.0f - x) / a));
    return 1.0f;
}

/* d/ds log A(s), A(s) = sum_i w(i) w(i + s) the overlap of the Tukey window
 * of n with itself shifted by s (continuous): the correlation of windowed
 * images is about A(s) times that of the images, which pulls its peak
 * toward 0; the sub-pixel step maximises the correlation over A instead. */
REG_HD float reg_tukey_x(double x, int n)
{
    if (x < 0 || x > n - 1)
        return 0.0f;
    double u = x / (n - 1), a = REG_TUKEY_ALPHA;
    if (u < a / 2)
        return (float)(0.5 * (1.0 - cos(6.283185307179586 * u / a)));
    if (u > 1.0 - a / 2)
        return (float)(0.5 * (1.0 - cos(6.283185307179586 * (1.0 - u) / a)));
    return 1.0f;
}
REG_HD double reg_dlog_overlap(double s, int n)
{
    const double h = 0.05;
    double ap = 0, am = 0;
    for (int i = 0; i < n; i++) {
        double w = reg_tukey_x(i, n);
        ap += w * reg_tukey_x(i + s + h, n), am += w * reg_tukey_x(i + s - h, n);
    }
    return ap > 0 && am > 0 ? (log(ap) - log(am)) / (2 * h) : 0.0;
}

/* Part-line mask (the saccade test): which 0 = whole line, 1 = left half,
 * 2 = right half, 3 = left third, 4 = right third, 5 = left fifth, 6 =
 * right fifth of the A-scans, with a raised-cosine crossover of 2T around
 * the cut (N/2, N/3, 2N/3, N/5 or 4N/5). */
REG_HD float reg_half(int n, int N, int which)
{
    if (which == 0)
        return 1.0f;
    int T = N / 16 > 2 ? N / 16 : 2;
    float c = which <= 2   ? 0.5f * (float)N
              : which == 3 ? (float)N / 3.0f
              : which == 4 ? 2.0f * (float)N / 3.0f
              : which == 5 ? (float)N / 5.0f
                           : 4.0f * (float)N / 5.0f;
    float x = (float)n - (c - (float)T);
    float left = x <= 0 ? 1.0f : x >= 2 * T ? 0.0f : 0.5f * (1.0f + cosf(3.14159265359f * x / (2 * T)));
    return which % 2 ? left : 1.0f - left;
}

/* Signed frequency of bin k of n. */
REG_HD int reg_freq(int k, int n)
{
    return 2 * k < n ? k : k - n;
}

/* Spectral low-pass: cos^2(pi k / n), 0 at Nyquist. */
REG_HD float reg_hann(int k, int n)
{
    float c = cosf(3.14159265359f * (float)reg_freq(k, n) / (float)n);
    return c * c;
}

/* Phase-only cross power of one bin: w . a . conj(b) / |a . conj(b)|. */
REG_HD void reg_cross(float ar, float ai, float br, float bi, float w, float *cr, float *ci)
{
    float re = ar * br + ai * bi, im = ai * br - ar * bi;
    float mag = sqrtf(re * re + im * im);
    if (!(mag > 1e-30f) || w == 0.0f) {
        *cr = 0.0f, *ci = 0.0f;
        return;
    }
    *cr = w * re / mag, *ci = w * im / mag;
}

/* An integer peak of a correlation surface. */
typedef struct reg_peak {
    float h;           /* surface value (1 = perfect match) */
    int32_t y, x, z;   /* lag (y: reference line / stripe position), signed x, z */
    float fx;          /* fine stage: sub-pixel x offset of the peak (parabola through
                        * x-1, x, x+1; within [-0.5, 0.5]), 0 elsewhere */
} reg_peak;

/* Vertex offset of the parabola through (-1, hm), (0, h), (1, hp), within
 * [-0.5, 0.5]; 0 when not a maximum. */
REG_HD float reg_parabola(float hm, float h, float hp)
{
    float den = hm - 2.0f * h + hp;
    if (!(den < 0.0f))
        return 0.0f;
    float o = 0.5f * (hm - hp) / den;
    return o > 0.5f ? 0.5f : o < -0.5f ? -0.5f : o;
}

/* Backend operations.  The common code (register.c) calls them in order:
 * set_reference once; per target prep_target, coarse, fine, refine. */
typedef struct reg_ops {
    const char *name;
    /* prep_target counts the target's non-finite values itself (on the
     * device) and fails with OCT_EINVAL when there are any; the common code
     * then finds the first on the host for the message */
    bool device_finite;
    oct_err (*create)(oct_register *r, oct_error *e);
    void (*destroy)(oct_register *r);
    /* transforms the reference and caches its line and coarse spectra */
    oct_err (*set_reference)(oct_register *r, const float *vol, oct_error *e);
    /* transforms a target (kept inside until the next) */
    oct_err (*prep_target)(oct_register *r, const float *vol, oct_error *e);
    /* n stripes starting at l0[i]; out[i]: peak over y in [ylo[i], yhi[i]] */
    oct_err (*coarse)(oct_register *r, uint32_t n, const uint32_t *l0, const int32_t *ylo,
                      const int32_t *yhi, reg_peak *out, oct_error *e);
    /* candidates of line l: cand[off[l] .. off[l+1]-1] (reference lines);
     * out[i]: integer peak of candidate i within the x/z search window, of
     * the whole target line (half 0) or of its half (1 left, 2 right: the
     * line times reg_half) */
    oct_err (*fine)(oct_register *r, const uint32_t *off, const int32_t *cand, int half,
                    reg_peak *out, oct_error *e);
    /* line l against reference line best[l].y (y < 0: skip), Newton from
     * (best[l].x, best[l].z): sub[l] = (dx, dz, h) */
    oct_err (*refine)(oct_register *r, const reg_peak *best, float *sub, oct_error *e);
    /* surfaces for tests (after prep_target) */
    oct_err (*surface_line)(oct_register *r, uint32_t tl, uint32_t rl, float *out, oct_error *e);
    oct_err (*surface_stripe)(oct_register *r, uint32_t l0, float *out, oct_error *e);
    /* device time of the last target's stages, ms (NULL: host clock) */
    void (*times)(const oct_register *r, oct_register_times *t);
    /* optional: fine() of parts 1 .. np at once (out[h]: part h + 1), the
     * same results; a backend with a host round trip per call does all
     * parts in one (NULL: the common code calls fine per part) */
    oct_err (*fine_parts)(oct_register *r, const uint32_t *off, const int32_t *cand, int np,
                          reg_peak *const *out, oct_error *e);
} reg_ops;

struct oct_register {
    uint32_t L, N, D;
    oct_register_options o;
    uint32_t f, Nc, Dc;       /* coarse factor and dims */
    int32_t sx, sy, sz;       /* fine search half-widths */
    int32_t sxc, szc;         /* coarse x/z half-widths (coarse pixels) */
    float inv_scale;          /* 1 / mean of the reference */
    double sumw2, noise2;     /* 2D: sum of W, noise RMS of the surface */
    double sumw3, noise3;     /* 3D coarse */
    bool have_ref;
    const reg_ops *ops;
    void *be;                 /* backend state */
    float *pnr, *dy_pred;     /* [L] details of the last target */
    oct_register_times times;
};

/* Backends */
extern const reg_ops reg_cpu_ops;
#ifdef OCT_HAVE_CUDA
extern const reg_ops reg_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif
#endif
