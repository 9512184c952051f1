/* engine_internal.h - what the backend-neutral engine (engine.c) shares with
 * its backends (engine_cpu.c, engine_cuda.cu).  Not installed.
 *
 * Division of work:
 *  - engine.c owns the set-up copy, parameter validation, and everything that
 *    depends only on the control values and the masks: the window w[n], the
 *    filtered windowed (optionally normalised) masks m~_r[n] (computed in
 *    double precision, stored as float), the en-face index list, the product
 *    shapes, and the CPU gray mapping.  It recomputes these in
 *    oct_engine_set_params() and then tells the backend what changed.
 *  - a backend owns plans, buffers and the per-frame work.
 */
#ifndef OCT_ENGINE_INTERNAL_H
#define OCT_ENGINE_INTERNAL_H

#include "oct_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What changed in oct_engine_set_params() (bit set passed to ops->update). */
#define OCT_CHG_WINDOW   (1u << 0) /* window or window_param: eng->window and eng->masks_filt are new */
#define OCT_CHG_CUTOFF   (1u << 1) /* freq_cutoff: eng->masks_filt is new */
#define OCT_CHG_LAGS     (1u << 2) /* lag_lo / lag_hi */
#define OCT_CHG_METHODS  (1u << 3)
#define OCT_CHG_ENFACE   (1u << 4) /* enface_start/step/count: eng->enface_idx is new */
#define OCT_CHG_XSEC     (1u << 5)
#define OCT_CHG_PRODUCTS (1u << 6)
#define OCT_CHG_GRAY     (1u << 7) /* scale, gsc, contrast, brightness */
#define OCT_CHG_BACKGROUND (1u << 8) /* background or background_param (rolling history restarts) */
#define OCT_CHG_KLIN     (1u << 9)  /* klin, klin_taps, klin_source, klin_coef: eng->klin_* are new */
#define OCT_CHG_DISP     (1u << 10) /* disp_a2/a3/k0: eng->disp is new (or NULL) */
#define OCT_CHG_CMS      (1u << 11) /* window or freq_cutoff changed: eng->cms_q is new */
#define OCT_CHG_ALL      0xfffu

typedef struct oct_backend_ops {
    const char *name; /* "cpu", "cuda" */
    /* Plans for eng->setup and eng->params; stores its state in eng->be. */
    oct_err (*create)(oct_engine *eng, oct_error *e);
    void (*destroy)(oct_engine *eng);
    /* Called after eng->params and the derived arrays were updated.  On error,
     * engine.c restores the old params and arrays and calls update again with
     * the same bits (e = NULL) so the backend can rebuild for the old values. */
    oct_err (*update)(oct_engine *eng, unsigned changed, oct_error *e);
    /* One frame (size already checked) into out. */
    oct_err (*process)(oct_engine *eng, const void *frame, oct_products *out, oct_error *e);
    /* Optional pipelining and DMA (NULL: engine.c's synchronous fallback of
     * depth 1 over process).  Arguments are checked by engine.c; see
     * oct_engine.h for the semantics. */
    int depth;
    oct_err (*submit)(oct_engine *eng, const void *frame, oct_products *out, oct_error *e);
    oct_err (*complete)(oct_engine *eng, oct_products **done, int timeout_ms, oct_error *e);
    oct_err (*input_done)(oct_engine *eng, uint64_t ticket, int timeout_ms, oct_error *e);
    int (*inflight)(const oct_engine *eng);
    oct_err (*register_host)(oct_engine *eng, const void *ptr, size_t bytes, oct_error *e);
    void (*unregister_host)(oct_engine *eng, const void *ptr);
    /* Fills p's images with engine-owned buffers (fixed = true, pinned) */
    oct_err (*products_init)(oct_engine *eng, oct_products *p, uint32_t products, oct_error *e);
} oct_backend_ops;

struct oct_engine {
    oct_setup setup;          /* masks and reference pointers are NULL here */
    oct_params params;        /* current, valid control values */
    const oct_backend_ops *ops;
    void *be;                 /* backend state */

    /* owned copies of the set-up arrays */
    float *masks_raw;         /* R x M, NULL when R = 0 */
    float *reference;         /* M, NULL when none */

    /* derived from params (kept current by engine.c) */
    float *window;            /* M: w[n] */
    float *masks_filt;        /* R x M: m~_r[n] = IDFT(H . DFT(w . m_r)) / M, normalised if asked */
    uint32_t depths[OCT_METHOD_COUNT];      /* D: M/2+1 (CFD), R (MSI) */
    int32_t *enface_idx[OCT_METHOD_COUNT];  /* idx_q < D of each method */
    uint32_t enface_n[OCT_METHOD_COUNT];    /* Q actually used per method */
    oct_msi_path msi_path;    /* FFT or GEMM, chosen by the backend */
    bool hold_history;        /* frames do not enter the rolling history */

    /* k-linearisation (CFD), built by engine.c from params (+ klin_positions):
     * y[n] = sum_{t<klin_T} klin_w[n*klin_T+t] * x'[klin_idx[n*klin_T+t]],
     * indices already clamped to [0, M-1].  klin_T = 0: off (arrays NULL). */
    uint32_t klin_T;
    int32_t *klin_idx;        /* M x klin_T */
    float *klin_w;            /* M x klin_T */
    double *klin_positions;   /* owned copy of setup positions (M), NULL when none */
    /* dispersion (CFD): e^(-i theta[n]) as interleaved (cos, -sin) = (re, im)
     * float pairs, 2M floats; NULL when a2 = a3 = 0 (plain real path). */
    float *disp;
    /* CMS: g, h from the calibration (double, M each, computed once at create);
     * q: 2R x M floats, row 2r = Re q_r, row 2r+1 = Im q_r (window and F
     * folded in, see oct_setup).  R = setup.cms_count. */
    double *cms_g, *cms_h;
    float *cms_q;
    float *cms_cal;           /* owned copy of the calibration spectra, K x M */
    double *cms_depths;       /* owned copy, K */

    oct_stage_times times;    /* filled by the backend */
    uint64_t tickets;         /* frames submitted so far (the last ticket) */
    oct_products *sync_done;  /* fallback pipeline: the processed frame not yet completed */
    char device_name[128];

    /* Debug counters (tests check that set_params recomputes only what changed):
     * engine.c counts window/masks/enface rebuilds, a backend its FFT plans and
     * MSI matrices (filter spectra or shifted-mask matrices). */
    struct {
        uint32_t window, masks, enface, plans, msi_matrix, klin, disp, cms;
    } rebuilds;
};

extern const oct_backend_ops oct_cpu_backend;
#ifdef OCT_HAVE_CUDA
extern const oct_backend_ops oct_cuda_backend;
#endif

/* Window w[n], n = 0..M-1, in double precision (SPEC 2.1.2). */
void oct_window_compute(double *w, uint32_t M, uint32_t type, double param);

/* Sets the shape of a product image for the current params and geometry
 * (present = true) and reserves its buffers.  Q = eng->enface_n[method]. */
oct_err oct_image_prepare(const oct_engine *eng, int method, int kind, oct_image *img, oct_error *e);

/* Whether product `kind` of `method` is produced for the current params and geometry. */
bool oct_product_wanted(const oct_engine *eng, int method, int kind);

/* Gray mapping of SPEC 2.5 for class c, n pixels. */
void oct_gray_map(const float *in, uint8_t *out, size_t n, uint32_t scale,
                  float gsc, float contrast, float brightness);

/* Monotonic clock in milliseconds (stage timing). */
double oct_now_ms(void);

#ifdef __cplusplus
}
#endif
#endif
