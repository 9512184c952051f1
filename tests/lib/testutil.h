/* testutil.h - random test inputs and SPEC section 7 comparisons.
 *
 * Checks return true when they pass; on failure they write into msg (which
 * names the product, the pixel and the values) so that the caller can
 * ck_assert_msg(ok, "%s", msg). */
#ifndef OCT_TESTUTIL_H
#define OCT_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_engine.h"

/* Tolerances of SPEC 7. */
#define TU_TOL_FP32 1e-4
#define TU_TOL_TF32 1e-3
#define TU_GRAY_MARGIN 0.01

/* ---- seeded random numbers (splitmix64) ---- */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);
double tu_rng_uniform(tu_rng *r); /* [0, 1) */
double tu_rng_normal(tu_rng *r);  /* N(0, 1) */

/* ---- inputs ---- */
/* Mean spectral level (in converted sample units, i.e. after the shift) of
 * frames made by tu_frame_random() at sample n: a source envelope over DC. */
double tu_base_level(const oct_geometry *g, uint32_t n);
/* A random frame of geometry g (malloc, oct_geometry_frame_bytes() bytes in
 * *bytes): per A-scan a DC level with a Gaussian source envelope, two or three
 * cosine fringes of random depth, amplitude and phase, and noise; integer
 * types use a 12-bit range after the shift and random bits below it, i16 goes
 * negative.  Never all zeros.  NULL on a bad geometry or no memory. */
void *tu_frame_random(const oct_geometry *g, uint64_t seed, size_t *bytes);
/* R random mask spectra of M floats: a mirror fringe per mask at depths
 * spread over the range, on a DC level, with noise. */
float *tu_masks_random(uint32_t M, uint32_t R, uint64_t seed);
/* A reference background near tu_base_level() (M floats). */
float *tu_reference_random(const oct_geometry *g, uint64_t seed);

/* ---- poisoning ---- */
/* Reserves img for `pixels` pixels (and f32 when want_f32) and `n_indices`
 * indices, then fills the gray buffer with a value 128 levels away from the
 * expected gray (0xA5 where expected is NULL), the f32 buffer with NaN and
 * the indices with -7777, so that any pixel the engine does not write fails. */
oct_err tu_poison_image(oct_image *img, size_t pixels, bool want_f32, size_t n_indices,
                        const uint8_t *expected);

/* ---- comparisons (SPEC 7) ---- */
/* "[d][a]"-style text of flat index i in an image of the given shape. */
void tu_format_index(char *buf, size_t len, size_t i, int ndim, const uint32_t *shape);

/* float32 intensities against the float64 reference: relative L2 error
 * <= tol, and every value finite. */
bool tu_check_f32(const char *what, const float *got, const double *ref, size_t count,
                  int ndim, const uint32_t *shape, double tol, char *msg, size_t len);
/* Two float32 results of the same input (e.g. FFT vs GEMM): relative L2 <= tol. */
bool tu_check_f32_pair(const char *what, const float *a, const float *b, size_t count,
                       int ndim, const uint32_t *shape, double tol, char *msg, size_t len);

/* Gray levels against the exact mapping of reference intensities I
 * (SPEC 2.5): equal, except off by one where the exact pre-rounding value
 * lies within `margin` of a rounding boundary; never off by more than one.
 * slack_I (>= 0) widens the exact value to the range of I +- slack_I, for
 * reduced precision (tf32); 0 for the SPEC rule. */
bool tu_check_gray(const char *what, const uint8_t *got, const double *I, size_t count,
                   int ndim, const uint32_t *shape, uint32_t scale, double gsc,
                   double contrast, double brightness, double margin, double slack_I,
                   char *msg, size_t len);
/* Two gray results of the same input: never more than one level apart. */
bool tu_check_gray_pair(const char *what, const uint8_t *a, const uint8_t *b, size_t count,
                        int ndim, const uint32_t *shape, char *msg, size_t len);

/* Root mean square of n doubles (0 for n = 0). */
double tu_rms(const double *x, size_t n);

#endif
