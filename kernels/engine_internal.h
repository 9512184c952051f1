/* engine_internal.h - what the backend-neutral engine (engine.c) and the
 * planner (plan.c) share with the backends (engine_cpu.c, engine_cuda.cu).
 * Not installed.
 *
 * Division of work:
 *  - engine.c owns the set-up copy, parameter validation and the engine
 *    object; for every new set of control values it asks plan.c for a plan
 *    (plan.h: derived arrays with generations, row sets, background recipe,
 *    MSI path, product layout) and hands it to the backend (ops->prepare).
 *  - a backend owns plans of its libraries (FFT, BLAS), buffers and the
 *    per-frame work; it executes eng->plan.
 */
#ifndef OCT_ENGINE_INTERNAL_H
#define OCT_ENGINE_INTERNAL_H

#include "oct_engine.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oct_backend_ops {
    const char *name; /* "cpu", "cuda" */
    /* Plans for eng->setup and eng->params; stores its state in eng->be. */
    oct_err (*create)(oct_engine *eng, oct_error *e);
    void (*destroy)(oct_engine *eng);
    /* Makes the backend ready to execute `plan` (not yet eng->plan): it
     * refreshes what depends on plan arrays whose generation differs from
     * what it holds.  On error engine.c keeps eng->plan, and the backend must
     * still execute it: it compares generations again at the next frame
     * (no rollback, no validity flags). */
    oct_err (*prepare)(oct_engine *eng, const oct_plan *plan, oct_error *e);
    /* Rates of the MSI cost model for a set-up (plan.h); NULL: FFT path. */
    void (*msi_rates)(const oct_setup *s, oct_msi_rates *r);
    /* The backend runs on the host: device_ms is the whole call. */
    bool host_timing;
    /* It computes every image into its f32 buffer (the CPU): products laid
     * out in caller memory get one whatever OCT_PRODUCT_F32 says. */
    bool f32_always;
    /* One frame (size already checked) into out, with eng->plan. */
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
    /* Products in DMA-able memory (engine.c lays the images out in it):
     * alloc makes p->priv a block of `bytes` and sets p->priv_free;
     * adopt makes the caller's `mem` DMA-able for as long as p lives
     * (oct_engine_products_create_in).  NULL: the CPU reads and writes any
     * memory (alloc NULL: growable plain products). */
    oct_err (*products_alloc)(oct_engine *eng, oct_products *p, size_t bytes, oct_error *e);
    oct_err (*products_adopt)(oct_engine *eng, oct_products *p, void *mem, size_t bytes, oct_error *e);
} oct_backend_ops;

struct oct_engine {
    oct_setup setup;          /* masks and reference pointers are NULL here */
    oct_params params;        /* current, valid control values (= plan->params) */
    oct_plan *plan;           /* the plan of params, executed by the backend */
    uint64_t gens;            /* generations handed out by the planner */
    const oct_backend_ops *ops;
    void *be;                 /* backend state */

    /* owned copies of the set-up arrays */
    float *masks_raw;         /* R x M, NULL when R = 0 */
    float *reference;         /* M, NULL when none */

    uint32_t depths[OCT_METHOD_COUNT];      /* D: M/2+1 (CFD), R (MSI), cms_count (CMS) */
    oct_msi_path msi_path;    /* FFT or GEMM (= plan->msi_path) */
    bool hold_history;        /* frames do not enter the rolling history */
    double *klin_positions;   /* owned copy of setup positions (M), NULL when none */
    /* CMS: g, h from the calibration (double, M each, computed once at
     * create); the masks q are the plan's cms_q.  R = setup.cms_count. */
    double *cms_g, *cms_h;
    float *cms_cal;           /* owned copy of the calibration spectra, K x M */
    double *cms_depths;       /* owned copy, K */

    oct_stage_times times;    /* filled by the backend */
    uint64_t tickets;         /* frames submitted so far (the last ticket) */
    oct_products *sync_done;  /* fallback pipeline: the processed frame not yet completed */
    char device_name[128];

    /* Debug counters (tests check that set_params recomputes only what changed):
     * plan.c counts window/masks/enface/klin/disp/cms rebuilds, a backend its FFT plans and
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
/* k-lin positions p[n] from the polynomial or the file, and their check
 * (finite, strictly increasing, within [-1, M]). */
void oct_klin_positions(const oct_params *p, const double *file, uint32_t M, double *pos);
oct_err oct_klin_positions_check(const double *pos, uint32_t M, int source, oct_error *e);
/* Slab depths [d0, d1) of SPEC 10.2 for D depths (clamped to [0, D]). */
void oct_slab_range(const oct_params *p, uint32_t D, int32_t *d0, int32_t *d1);
/* FFTW's planner made thread-safe (once per process). */
void oct_fftw_init_once(void);

/* Sets the shape of a product image from eng->plan's layout (present =
 * true), reserves its buffers and fills its indices. */
oct_err oct_image_prepare(const oct_engine *eng, int method, int kind, oct_image *img, oct_error *e);

/* Whether product `kind` of `method` is produced by eng->plan. */
bool oct_product_wanted(const oct_engine *eng, int method, int kind);

/* Gray mapping of SPEC 2.5 (formulas.h) for n pixels. */
void oct_gray_map(const float *in, uint8_t *out, size_t n, uint32_t scale,
                  float gsc, float contrast, float brightness);

/* Monotonic clock in milliseconds (stage timing). */
double oct_now_ms(void);

#ifdef __cplusplus
}
#endif
#endif
