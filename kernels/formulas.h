/* formulas.h - per-element formulas that both backends evaluate: written
 * once, compiled for the host (C) and the device (CUDA).  Not installed.
 *  - the gray mapping of SPEC 2.5;
 *  - the fixed-pattern-noise background statistics (oct_engine.h, FPN):
 *    per segment and sample, one-pass sums shifted by the segment's first
 *    value (stable), compared as G*ssd = G*sum(d^2) - sum(d)^2 (exact for
 *    integer samples while below 2^53). */
#ifndef OCT_FORMULAS_H
#define OCT_FORMULAS_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OCT_HD __host__ __device__ __forceinline__
#else
#define OCT_HD static inline
#endif

/* Gray parameters of one class. */
typedef struct oct_gray {
    float gsc, con, bri;
    int logscale;
} oct_gray;

/* clamp(floor(bri + con * T(gsc * v) + 0.5), 0, 255); a NaN intensity
 * counts as 0. */
OCT_HD uint8_t oct_gray_level(float v, oct_gray g)
{
    float t = g.gsc * (v == v ? v : 0.0f);
    if (g.logscale)
        t = 20.0f * log10f(t > 1e-12f ? t : 1e-12f); /* NaN > x is false: 1e-12 */
    float y = g.bri + g.con * t + 0.5f;
    /* y >= 0 so truncation is floor; !(y >= 0) also catches NaN */
    return !(y >= 0.0f) ? (uint8_t)0 : y >= 255.0f ? (uint8_t)255 : (uint8_t)y;
}

/* FPN: statistics of one segment at one sample. */
typedef struct oct_fpn_acc {
    double x0, s1, s2;
} oct_fpn_acc;

OCT_HD void oct_fpn_start(oct_fpn_acc *a, double first)
{
    a->x0 = first, a->s1 = 0.0, a->s2 = 0.0;
}

OCT_HD void oct_fpn_add(oct_fpn_acc *a, double x)
{
    double d = x - a->x0;
    a->s1 += d;
    a->s2 += d * d;
}

/* The comparison key (G times the sum of squared deviations) and the mean. */
OCT_HD double oct_fpn_key(const oct_fpn_acc *a, double len)
{
    return len * a->s2 - a->s1 * a->s1;
}

OCT_HD double oct_fpn_mean(const oct_fpn_acc *a, double len)
{
    return a->x0 + a->s1 / len;
}

/* Whether segment (key, seg) beats the best so far: smaller key, ties to
 * the lower segment. */
OCT_HD int oct_fpn_better(double key, long long seg, double best, long long bseg)
{
    return key < best || (key == best && seg < bseg);
}

#endif
