/* oct_register.h - volume registration (motion correction), SPEC 10.4.
 *
 * For every B-scan (line) l of a target volume V_t [L][N][D] it finds the
 * shift (dx along A-scans, dy across lines, dz in depth; pixels, fractional)
 * with  V_t[l][n][d] ~ V_ref[l + dy][n + dx][d + dz],  and a validity flag.
 *
 * Method (after Do 2016, refined to sub-pixel):
 *  0. Both volumes are mapped to g = log1p(v / s) (s: the reference's mean, so
 *     the bright layers do not drown the texture), each line's mean removed
 *     and a Tukey window (alpha 0.25) applied along x and z.
 *  1. Coarse: stripes of S lines (S = stripe) sampled along the target,
 *     box-averaged by f in x and z (f a power of two <= 8, N/f and D/f >= 64),
 *     zero-padded to the whole reference and 3D phase-only correlated
 *     against it (reference FFT cached): the peak gives a predicted dy.
 *     A stripe whose peak is weak or disagrees with its neighbours is dropped.
 *  2. Fine: each target line is 2D phase-only correlated (reference line FFTs
 *     cached) against the reference lines within +-window of the predictions
 *     of the two stripes around it; the strongest peak wins.  dx, dz are the
 *     maximum of the continuous (band-limited) correlation, found by Newton
 *     steps on the cross-power spectrum (exact for a pure sub-pixel shift);
 *     dy is refined by a parabola through the peaks of lines p-1, p, p+1.
 *  3. Validity: peak-to-noise ratio (peak over the correlation's noise RMS,
 *     known exactly for a phase-only spectrum) >= min_pnr and >= rel_pnr
 *     times the median of the volume (a line sheared by a saccade matches
 *     only partly), the left and right halves of the line matching the
 *     same place within `split` px in x and y (a line acquired during a
 *     saccade is sheared: its halves match different places) and, on lines
 *     of >= 96 A-scans, each end third the opposite half within 1.1 split
 *     (at a saccade's start or end only one end of a line moved), l + dy inside
 *     [0, L-1], and consistent (within jump px) with the lines before or
 *     after it.  Last, the edge test: a valid line next to a run of invalid
 *     ones (a saccade) is invalid when its end toward the run in time (its
 *     end fifth, else third) moved more than `edge` px toward the place
 *     across the run (a saccade starting late in the line, or ending early
 *     in it; A-scans acquired in order n = 0 .. N-1).  Invalid lines have
 *     NaN shifts.
 * Phase-only correlation: C = W . F_ref . conj(F_t) / |F_ref . conj(F_t)|
 * with W a separable Hann low-pass (cos^2, zero at Nyquist) and the DC bin
 * 0; the surface r = IDFT(C) / sum(W) is 1 at the peak of a perfect match.
 *
 * Plan once (oct_register_create), set a reference (its FFTs are cached),
 * register many targets.  A handle is used by one thread at a time.
 */
#ifndef OCT_REGISTER_H
#define OCT_REGISTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_engine.h"
#include "oct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oct_register oct_register;

typedef struct oct_register_options {
    uint32_t stripe;     /* S: lines per coarse stripe [1, 64] (3) */
    uint32_t stripes;    /* coarse stripes sampled along the target; 0 = min(L/S, 32) */
    float search_xy;     /* search window in x and y, fraction of N and L (0, 0.5] (0.25) */
    int32_t search_z;    /* search window in z, pixels [0, D/2-1] (15) */
    int32_t window;      /* fine search: +- lines around each stripe prediction [1, 16] (2) */
    float min_pnr;       /* a match needs peak / noise RMS >= this (8) */
    float rel_pnr;       /* ... and >= rel_pnr x the median of the volume's lines (0.7) */
    float split;         /* px: halves of a line matching further apart make it invalid (0.5) */
    float jump;          /* px: a line further than this from both neighbour sides is invalid (3) */
    float edge;          /* px: a line next to invalid ones whose end nearest to them moved further
                          * than this toward the place across them is invalid (0.3; INFINITY: off) */
    uint32_t coarse_factor; /* f; 0 = automatic (power of two, N/f, D/f >= 64, f <= 8) */
    int threads;         /* CPU threads, 0 = all */
    int device;          /* CUDA device */
    bool fine_full;      /* CUDA: whole C2R surfaces in both stages (the former path) instead of
                          * only their search windows (a z inversion at the searched lags by
                          * one GEMM, then C2C along x (and y); the default, false).  The same
                          * sums; the windows are faster (README "Toward 100 volumes/s") */
    bool tf32;           /* CUDA window path: its z-inversion GEMM on TF32 tensor cores (true, the
                          * default; false: plain fp32).  Its rounding errors are incoherent
                          * across the 2 Dh terms of a row and the N rows of a lag while a peak
                          * is coherent: peaks move by ~1e-6 relative (test_cuda_window checks
                          * 1e-4 against float64) */
} oct_register_options;

void oct_register_options_default(oct_register_options *o);
/* Options from the live control values (reg.stripe, reg.search_xy, reg.search_z). */
void oct_register_options_from_params(oct_register_options *o, const oct_params *p);

/* Plans a registration of [L][N][D] volumes (L >= 2, N >= 8, D >= 8).
 * backend AUTO: CUDA when built in and a device is usable, else CPU. */
oct_err oct_register_create(oct_register **out, uint32_t L, uint32_t N, uint32_t D,
                            const oct_register_options *o, oct_backend backend, oct_error *e);
void oct_register_destroy(oct_register *r);
const char *oct_register_backend_name(const oct_register *r); /* "cpu", "cuda" */
void oct_register_dims(const oct_register *r, uint32_t *L, uint32_t *N, uint32_t *D);

/* Sets the reference volume [L][N][D] (finite, any non-negative scale; the
 * values are not kept, only their transforms).  A non-finite value is an
 * error naming its line, A-scan and depth. */
oct_err oct_register_set_reference(oct_register *r, const float *vol, oct_error *e);
bool oct_register_has_reference(const oct_register *r);

/* Registers one target [L][N][D] against the reference: shifts [L][4] =
 * (dx, dy, dz, valid 0/1), NaN shifts where invalid.  OCT_ESTATE without a
 * reference. */
oct_err oct_register_volume(oct_register *r, const float *target, float *shifts, oct_error *e);

/* Per-line details of the last oct_register_volume (tests, benchmarks):
 * peak-to-noise ratio of the winning match and the coarse prediction of dy
 * (NaN where no stripe predicted).  Arrays of L, or NULL. */
void oct_register_last_details(const oct_register *r, float *pnr, float *dy_pred);

/* Timings of the last oct_register_volume, ms.  CPU: wall clock (total
 * includes the finiteness check).  CUDA: stream time from the target on the
 * device to the last stage (short host steps between stages included);
 * upload_ms is the host -> device copy, not in total. */
typedef struct oct_register_times {
    double upload_ms, prep_ms, coarse_ms, fine_ms, total_ms;
} oct_register_times;
void oct_register_last_times(const oct_register *r, oct_register_times *t);

/* Reconstruction on the reference grid (SPEC 10.4): each valid line l of
 * target, shifted by (-dx, -dz) (bicubic Catmull-Rom; NaN outside the
 * target), lands at y = l + dy.  Reference line r gets, for each pair of
 * consecutive valid lines l, l+1 with y_l, y_l+1 <= 2 px apart that bracket
 * it, the cubic (Lagrange) interpolation through y_l-1 .. y_l+2 when those
 * lines are valid, <= 2 px apart and ordered alike, else the linear one
 * between y_l and y_l+1; with no bracketing pair, the lines with
 * |y - r| <= 0.5; overlapping contributions averaged; NaN where nothing
 * landed.  out is [L][N][D]. */
oct_err oct_register_reconstruct(uint32_t L, uint32_t N, uint32_t D, const float *target,
                                 const float *shifts, float *out, oct_error *e);

/* Running average of registered volumes: per voxel the mean of the finite
 * values added since the last reset (NaN where none). */
typedef struct oct_register_avg oct_register_avg;
oct_err oct_register_avg_create(oct_register_avg **out, uint32_t L, uint32_t N, uint32_t D,
                                oct_error *e);
void oct_register_avg_destroy(oct_register_avg *a);
void oct_register_avg_reset(oct_register_avg *a);
void oct_register_avg_add(oct_register_avg *a, const float *registered);
uint32_t oct_register_avg_count(const oct_register_avg *a); /* volumes added */
void oct_register_avg_get(const oct_register_avg *a, float *out);

/* Registered planes (live registration publishes these, not volumes): the
 * en-face planes at depths[0..q-1] and the slab mean over [slab_start,
 * slab_end) (none when slab_end <= slab_start) of each target's
 * reconstruction, made from the target and its shifts without the volume
 * (the same rules as oct_register_reconstruct; each line's z-interpolation
 * at the plane's depth, or its slab, is made once), with running averages:
 *   enface[k][r][n]  mean of the finite registered[r][n][depths[k]]
 *   slab[r][n]       mean of the finite per-target slab means, a target's
 *                    slab mean being NaN where any depth of it is NaN
 * over the targets added since the last reset; NaN where none. */
typedef struct oct_register_planes oct_register_planes;
oct_err oct_register_planes_create(oct_register_planes **out, uint32_t L, uint32_t N, uint32_t D,
                                   const int32_t *depths, uint32_t q, int32_t slab_start,
                                   int32_t slab_end, oct_error *e);
void oct_register_planes_destroy(oct_register_planes *p);
void oct_register_planes_reset(oct_register_planes *p);
/* target [L][N][D] and its shifts [L][4] (oct_register_volume's) */
oct_err oct_register_planes_add(oct_register_planes *p, const float *target, const float *shifts,
                                oct_error *e);
/* The same in two steps (octd's workers: each computes its target's planes
 * in its own object, concurrently; the running averages take them in
 * order): compute makes p's planes of one target without adding them;
 * accumulate adds the planes last computed in src to dst's averages (the
 * same geometry, depths and slab, else OCT_EINVAL; none computed:
 * OCT_ESTATE).  add = compute, then accumulate(p, p). */
oct_err oct_register_planes_compute(oct_register_planes *p, const float *target,
                                    const float *shifts, oct_error *e);
oct_err oct_register_planes_accumulate(oct_register_planes *dst, const oct_register_planes *src,
                                       oct_error *e);
uint32_t oct_register_planes_count(const oct_register_planes *p); /* targets added */
/* enface [q][L][N], slab [L][N]; either may be NULL */
void oct_register_planes_get(const oct_register_planes *p, float *enface, float *slab);

/* The correlation surfaces that the registration uses (tests): the fine
 * stage's 2D surface [N][D] of target line tl against reference line rl, and
 * the coarse stage's 3D surface [L][N/f][D/f] of the stripe starting at line
 * l0 (index [y][x][z] = lag; C order).  Both need a reference. */
oct_err oct_register_surface_line(oct_register *r, const float *target, uint32_t tl, uint32_t rl,
                                  float *surface, oct_error *e);
oct_err oct_register_surface_stripe(oct_register *r, const float *target, uint32_t l0,
                                    float *surface, oct_error *e);
uint32_t oct_register_coarse_factor(const oct_register *r);

#ifdef __cplusplus
}
#endif
#endif
