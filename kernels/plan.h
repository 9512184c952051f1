/* plan.h - the backend-neutral plan of one set of control values (issue 13).
 * Not installed.
 *
 * oct_plan_build(engine, params, previous plan) turns control values into
 * everything a backend needs to execute frames, without touching the
 * engine or the previous plan:
 *  - derived arrays (window, filtered masks, CMS q, en-face index lists,
 *    k-lin taps, dispersion phases), each with a generation: an array whose
 *    inputs did not change is shared with the previous plan and keeps its
 *    generation, so a backend re-uploads / rebuilds only what changed;
 *  - the row sets (which spectra need every depth, which only the en-face
 *    depths), per method and as a union;
 *  - the background recipe (mode, K or G, the generation that restarts a
 *    rolling history);
 *  - the MSI path, from one cost model fed by the backend's rates;
 *  - the product layout table: one row per (method, kind) produced, with
 *    shape, gray class, rows/columns/depth mapping and reduce.  Both
 *    backends read it (the CPU through one generic scatter, CUDA from
 *    __constant__ memory); a new product kind is a row of kind_table in
 *    plan.c.
 * A backend receives a plan through ops->prepare and compares generations
 * with what it holds; a failed build or prepare leaves the engine's plan
 * (the previous one) in place, and the backend re-syncs to it lazily.
 */
#ifndef OCT_PLAN_H
#define OCT_PLAN_H

#include "oct_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the kind table (static; plan.c) --------------------------------------- */

enum oct_reduce { OCT_REDUCE_NONE = 0, OCT_REDUCE_SUM = 1, OCT_REDUCE_MEAN = 2, OCT_REDUCE_MAX = 3 };
/* Which spectra (l, a) contribute to a product. */
/* GROUP: made per group of R repeats by the angiography stage (angio.h), never
 * by the per-spectrum scatter (which skips such rows). */
enum oct_select { OCT_SEL_ALL = 0, OCT_SEL_LINE = 1, OCT_SEL_COLUMN = 2, OCT_SEL_GROUP = 3 };
/* Which depths: all D (slot = depth), the en-face list (slot q -> idx_q), or
 * the range [d0, d1) (slot s -> d0 + s). */
enum oct_depthset { OCT_DEPTHS_ALL = 0, OCT_DEPTHS_ENFACE = 1, OCT_DEPTHS_RANGE = 2 };
/* Frames a kind is made for (GROUPS: frames of repeated B-scans, setup.repeats >= 2). */
enum oct_frames { OCT_FRAMES_BSCAN = 0, OCT_FRAMES_VOLUME = 1, OCT_FRAMES_GROUPS = 2 };
/* C-order shapes (letters: D depths, N A-scans, L lines, Q en-face depths). */
/* GROUP: [D][N] for one group (G = L/R = 1), else [G][N][D]; pixel of
 * A-scan a, depth d of group g at g*st_l + a*st_a + d*st_d. */
/* GN: [G][N], an en-face angiogram (group g, A-scan a at g*st_l + a). */
enum oct_shape { OCT_SHAPE_DN, OCT_SHAPE_QLN, OCT_SHAPE_LN, OCT_SHAPE_DL, OCT_SHAPE_LND, OCT_SHAPE_GROUP,
                 OCT_SHAPE_GN };
/* What img->indices holds. */
enum oct_index { OCT_INDEX_NONE, OCT_INDEX_ENFACE, OCT_INDEX_XSEC_H, OCT_INDEX_XSEC_V, OCT_INDEX_RANGE };

typedef struct oct_kind_info {
    const char *name;  /* topic / file / profile name */
    uint32_t bit;      /* bit in oct_params.products */
    int cls;           /* gray class */
    int frames;        /* enum oct_frames */
    int select;        /* enum oct_select */
    int depths;        /* enum oct_depthset */
    int reduce;        /* enum oct_reduce */
    int shape;         /* enum oct_shape */
    int index;         /* enum oct_index */
    int source;        /* en-face angiogram: the GROUP kind it reduces (else 0) */
} oct_kind_info;

/* The row of a kind (NULL when unknown). */
const oct_kind_info *oct_kind_info_of(int kind);

/* Most pixels / indices a product can take for a geometry and D depths,
 * for any control values (pool sizing). */
size_t oct_kind_cap(const oct_geometry *g, uint32_t D, int kind);
/* The same for an engine set-up and method: also the angiography kinds
 * (GROUP rows: CFD only, setup.repeats >= 2; G*N*D pixels), which
 * oct_kind_cap leaves out. */
size_t oct_kind_cap_setup(const oct_setup *s, int method, uint32_t D, int kind);
size_t oct_kind_cap_indices(uint32_t D, int kind);

/* ---- product layout rows ---------------------------------------------------- */

/* One product of one method for the current values.  Spectrum (l, a) with
 * intensity v at depth slot s lands at pixel
 *     l*st_l + a*st_a + s*st_d        (reduce none)
 *     l*st_l + a*st_a                 (reduce: sum / mean / max over the slots)
 * if it is selected (select ALL, or l == sel for LINE, a == sel for COLUMN). */
typedef struct oct_layout {
    int32_t method, kind, cls, reduce, select, depths;
    int32_t sel;          /* line (LINE) or A-scan column (COLUMN) */
    int32_t d0, d1;       /* RANGE: depths [d0, d1) */
    uint32_t nslots;      /* ALL: D, ENFACE: Q, RANGE: d1 - d0 */
    int64_t st_l, st_a, st_d;
    uint32_t ndim, shape[3];
    size_t count;         /* pixels */
} oct_layout;

/* ---- generations -------------------------------------------------------------- */

enum oct_plan_key {
    OCT_PK_WINDOW,     /* window[] */
    OCT_PK_MASKS,      /* masks_filt[] (window, freq_cutoff) */
    OCT_PK_CMS,        /* cms_q[] (window, freq_cutoff) */
    OCT_PK_ENFACE,     /* enface_idx[][], enface_n[] */
    OCT_PK_KLIN,       /* klin_T, klin_idx[], klin_w[] */
    OCT_PK_DISP,       /* disp[] */
    OCT_PK_LAGS,       /* lag window */
    OCT_PK_ROWS,       /* row sets and layout presence (methods, products, xsec, en-face, slab) */
    OCT_PK_BACKGROUND, /* background recipe (a rolling history restarts when it changes) */
    OCT_PK_PATH,       /* MSI path */
    OCT_PK_COUNT
};

/* Per-backend rates of the MSI cost model (ops->msi_rates).  Per (spectrum,
 * mask): FFT path M*(fft_ns_per_sample + fft_ns_per_sample_log*log2 M) ns,
 * GEMM path 2*M*Lw / gemm_flops_per_ns ns; the GEMM path also needs its
 * shifted-mask matrices within gemm_matrix_bytes_max ((R + Q)*Lw*M floats,
 * 0 = no limit) and Lw <= gemm_lags_max (0 = no limit). */
typedef struct oct_msi_rates {
    double fft_ns_per_sample, fft_ns_per_sample_log;
    double gemm_flops_per_ns;
    uint64_t gemm_matrix_bytes_max;
    uint32_t gemm_lags_max;
    bool gemm_ok;           /* the GEMM path exists on this backend */
    char why[160];          /* why not, when !gemm_ok */
} oct_msi_rates;

/* The cost model: the path for msi_path (AUTO decides; FFT/GEMM are kept,
 * GEMM falls back to FFT only when !gemm_ok and AUTO). */
oct_msi_path oct_msi_path_choose(const oct_msi_rates *r, oct_msi_path want, uint32_t M, uint32_t R,
                                 uint32_t Lw, uint32_t Q);

/* ---- the plan ------------------------------------------------------------------ */

typedef struct oct_plan_array oct_plan_array; /* shared, reference-counted storage */

/* Per method: D, the rows it needs, its layout rows. */
typedef struct oct_plan_method {
    bool on;              /* method selected and D > 0 */
    uint32_t D;
    bool full;            /* every spectrum needs every depth (B-scan frame, volume, slab) */
    bool xs_h, xs_v;      /* line xsec_h / column xsec_v need every depth */
    bool sub;             /* other spectra need the en-face depths (en-face, confocal) */
    uint32_t nlayout;
    oct_layout layout[OCT_KIND_COUNT];
    int8_t row_of[OCT_KIND_COUNT]; /* layout row of a kind, -1 when not produced */
} oct_plan_method;

/* Background recipe (oct_engine.h's enum oct_background). */
typedef struct oct_plan_background {
    uint32_t mode;
    uint32_t K;           /* ROLLING: frames */
    uint32_t G;           /* FPN: spectra per segment */
    bool needs_mean;      /* FRAME_MEAN, ROLLING: the frame's mean spectrum */
} oct_plan_background;

typedef struct oct_plan {
    oct_params params;
    uint64_t gen[OCT_PK_COUNT];

    /* derived arrays (NULL when not used) */
    const float *window;              /* M */
    const float *masks_filt;          /* R x M: m~_r = IDFT(H . DFT(w . m_r)) / M (normalised if asked) */
    const float *cms_q;               /* 2RC x M: rows Re q_r, Im q_r */
    const int32_t *enface_idx[OCT_METHOD_COUNT];
    uint32_t enface_n[OCT_METHOD_COUNT];
    uint32_t klin_T;                  /* 0: off */
    const int32_t *klin_idx;          /* M x T, clamped to [0, M-1] */
    const float *klin_w;              /* M x T */
    const float *disp;                /* 2M: (cos, -sin) theta; NULL when a2 = a3 = 0 */

    oct_plan_method method[OCT_METHOD_COUNT];
    /* union of the methods' row sets (CPU spectrum lists) */
    bool rows_full, rows_xs_h, rows_xs_v, rows_sub;
    oct_plan_background bg;
    oct_msi_path msi_path;            /* FFT or GEMM (FFT when no MSI) */
    uint32_t lags;                    /* Lw = W2 - W1 + 1 */

    /* private */
    oct_plan_array *arr[12];
} oct_plan;

/* Builds the plan of `params` (already validated) for eng's set-up, sharing
 * unchanged arrays with prev (may be NULL).  The engine is only touched to
 * count eng->rebuilds of what is computed and to draw new generations from
 * eng->gens; the MSI rates come from eng->ops->msi_rates. */
oct_err oct_plan_build(struct oct_engine *eng, const oct_params *params, const oct_plan *prev,
                       oct_plan **out, oct_error *e);
void oct_plan_free(oct_plan *p);

/* The layout row of (method, kind) or NULL when it is not produced. */
static inline const oct_layout *oct_plan_layout(const oct_plan *p, int method, int kind)
{
    if (method < 0 || method >= OCT_METHOD_COUNT || kind < 0 || kind >= OCT_KIND_COUNT)
        return 0;
    int r = p->method[method].row_of[kind];
    return r < 0 ? 0 : &p->method[method].layout[r];
}

#ifdef __cplusplus
}
#endif
#endif
