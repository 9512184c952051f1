/* ref64.h - an independent float64 evaluation of SPEC section 2, for tests.
 *
 * Written from SPEC.md alone, by direct sums (no FFTW, no BLAS), so that a
 * mistake shared with the engine is unlikely.  Cost is kept affordable for
 * M = 4096 by exact cos/sin tables (index (k*n) mod M) and by computing an
 * intensity I[j][d] only when a product asks for it (cached).
 *
 * Usage: ref64_create() with the engine's set-up and control values and the
 * raw frame; ref64_product() for each expected image; ref64_set_display()
 * to change what depends only on products/en-face/xsec/gray values.
 */
#ifndef OCT_REF64_H
#define OCT_REF64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_engine.h"

typedef struct ref64 ref64;

/* One expected image: intensities, exact pre-rounding gray values and gray. */
typedef struct ref64_image {
    int ndim;
    uint32_t shape[3];
    size_t count;
    double *I;          /* intensities, C order as the product */
    double *v;          /* brightness + contrast*T(gsc*I) + 0.5, before floor/clamp */
    uint8_t *gray;      /* clamp(floor(v), 0, 255) */
    int32_t *indices;   /* en-face depths / xsec index; NULL when none */
    uint32_t n_indices;
    uint32_t requested; /* en-face: enface_count asked for */
} ref64_image;

/* Window w[n] of SPEC 2.1.2 (tukey as scipy's, D = M-1). */
void ref64_window(double *w, uint32_t M, uint32_t type, double param);

/* Sample j (0-based spectrum) of a raw frame converted to double (SPEC 1). */
void ref64_convert(const void *frame, const oct_geometry *g, size_t j, double *x);

/* Gray mapping of SPEC 2.5 in double: the value before floor (+0.5 included)
 * and the gray level. */
double ref64_gray_value(double I, uint32_t scale, double gsc, double contrast,
                        double brightness);
uint8_t ref64_gray_level(double v);

/* Gray class of a product kind (bscan, xsec_h, xsec_v, volume -> bscan). */
int ref64_kind_class(int kind);

/* Whether product `kind` of `method` must be produced for geometry g and p. */
bool ref64_product_wanted(const oct_geometry *g, const oct_params *p, int method, int kind);

/* Builds the evaluation of one frame (frame has oct_geometry_frame_bytes()
 * bytes of setup->geom).  Uses setup->geom, masks, mask_count,
 * normalize_masks, reference; all of p.  Returns 0, or -1 on a bad argument
 * or failed allocation (errno-free: tests only). */
int ref64_create(ref64 **out, const oct_setup *setup, const oct_params *p, const void *frame);
/* The same for a sequence: frames[0..nframes-1] are the frames processed
 * since the engine's rolling history (re)started, the last one is the frame
 * evaluated; only the rolling background looks at the earlier ones.  Also
 * uses setup->klin_positions and the CMS calibration (cms_*). */
int ref64_create_seq(ref64 **out, const oct_setup *setup, const oct_params *p, const void *const *frames,
                     size_t nframes);
void ref64_destroy(ref64 *r);

/* Adopts the products, methods, en-face, xsec and gray values of p (the
 * processing values of ref64_create() stay). */
void ref64_set_display(ref64 *r, const oct_params *p);
const oct_params *ref64_params(const ref64 *r);

/* Depths D of a method: M/2+1 (CFD), R (MSI), cms_count (CMS). */
uint32_t ref64_depths(const ref64 *r, int method);

/* Intensity I[j][d] of spectrum j at depth d (SPEC 2.2 / 2.3), cached. */
double ref64_intensity(ref64 *r, int method, uint32_t j, uint32_t d);

/* The preprocessed spectrum x~_j (M doubles) and the filtered mask m~_r. */
const double *ref64_spectrum(const ref64 *r, uint32_t j);
const double *ref64_mask(const ref64 *r, uint32_t rr);

/* Fills img with the expected product (kind, method) for the current
 * params (whether it is wanted is not checked).  0, or -1 on allocation
 * failure.  Free with ref64_image_free(). */
int ref64_product(ref64 *r, int method, int kind, ref64_image *img);
void ref64_image_free(ref64_image *img);

/* Recomputes img->v and img->gray from img->I for the current gray values. */
void ref64_image_regray(const ref64 *r, int kind, ref64_image *img);

#endif
