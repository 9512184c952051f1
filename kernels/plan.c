/* plan.c - the planner (plan.h): the kind table, the product layout, the
 * derived arrays with their generations, the row sets, the background
 * recipe and the MSI cost model.  Plain C, no device: unit-tested by
 * tests/test_engine_api.c. */
#include "engine_internal.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kind table --------------------------------------------------------- */

/* One row per product kind: what adding a kind touches (plus its name in the
 * enum of oct_engine.h and, for a new depth set or reduce, the generic
 * scatter of each backend).  The angiography kinds (SPEC 10.3: struct,
 * median, sv, decor, ssada = kinds 8..12, bits 9..13) need per-group
 * inputs (repeats) rather than per-spectrum intensities: they come with
 * their own select mode (OCT_SEL_GROUP) when issue 13's angio slice lands. */
static const oct_kind_info kind_table[OCT_KIND_COUNT] = {
    [OCT_KIND_BSCAN] = {"bscan", OCT_PRODUCT_BIT(OCT_KIND_BSCAN), OCT_CLASS_BSCAN, OCT_FRAMES_BSCAN,
                        OCT_SEL_ALL, OCT_DEPTHS_ALL, OCT_REDUCE_NONE, OCT_SHAPE_DN, OCT_INDEX_NONE},
    [OCT_KIND_ENFACE] = {"enface", OCT_PRODUCT_BIT(OCT_KIND_ENFACE), OCT_CLASS_ENFACE,
                         OCT_FRAMES_VOLUME, OCT_SEL_ALL, OCT_DEPTHS_ENFACE, OCT_REDUCE_NONE,
                         OCT_SHAPE_QLN, OCT_INDEX_ENFACE},
    [OCT_KIND_CONFOCAL] = {"confocal", OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL), OCT_CLASS_CONFOCAL,
                           OCT_FRAMES_VOLUME, OCT_SEL_ALL, OCT_DEPTHS_ENFACE, OCT_REDUCE_SUM,
                           OCT_SHAPE_LN, OCT_INDEX_ENFACE},
    [OCT_KIND_XSEC_H] = {"xsec_h", OCT_PRODUCT_BIT(OCT_KIND_XSEC_H), OCT_CLASS_BSCAN,
                         OCT_FRAMES_VOLUME, OCT_SEL_LINE, OCT_DEPTHS_ALL, OCT_REDUCE_NONE,
                         OCT_SHAPE_DN, OCT_INDEX_XSEC_H},
    [OCT_KIND_XSEC_V] = {"xsec_v", OCT_PRODUCT_BIT(OCT_KIND_XSEC_V), OCT_CLASS_BSCAN,
                         OCT_FRAMES_VOLUME, OCT_SEL_COLUMN, OCT_DEPTHS_ALL, OCT_REDUCE_NONE,
                         OCT_SHAPE_DL, OCT_INDEX_XSEC_V},
    [OCT_KIND_VOLUME] = {"volume", OCT_PRODUCT_BIT(OCT_KIND_VOLUME), OCT_CLASS_BSCAN,
                         OCT_FRAMES_VOLUME, OCT_SEL_ALL, OCT_DEPTHS_ALL, OCT_REDUCE_NONE,
                         OCT_SHAPE_LND, OCT_INDEX_NONE},
    [OCT_KIND_SLAB_MEAN] = {"slab_mean", OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN), OCT_CLASS_ENFACE,
                            OCT_FRAMES_VOLUME, OCT_SEL_ALL, OCT_DEPTHS_RANGE, OCT_REDUCE_MEAN,
                            OCT_SHAPE_LN, OCT_INDEX_RANGE},
    [OCT_KIND_SLAB_MAX] = {"slab_max", OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX), OCT_CLASS_ENFACE,
                           OCT_FRAMES_VOLUME, OCT_SEL_ALL, OCT_DEPTHS_RANGE, OCT_REDUCE_MAX,
                           OCT_SHAPE_LN, OCT_INDEX_RANGE},
#define ANGIO_ROW(kind, name)                                                                      \
    [kind] = {name, OCT_PRODUCT_BIT(kind), OCT_CLASS_BSCAN, OCT_FRAMES_GROUPS, OCT_SEL_GROUP,     \
              OCT_DEPTHS_ALL, OCT_REDUCE_NONE, OCT_SHAPE_GROUP, OCT_INDEX_NONE}
    ANGIO_ROW(OCT_KIND_STRUCT, "struct"),
    ANGIO_ROW(OCT_KIND_MEDIAN, "median"),
    ANGIO_ROW(OCT_KIND_SV, "sv"),
    ANGIO_ROW(OCT_KIND_DECOR, "decor"),
    ANGIO_ROW(OCT_KIND_SSADA, "ssada"),
#undef ANGIO_ROW
/* En-face angiograms: a RANGE reduce of a GROUP image, made by the
 * angiography stage after the metrics; the bit is the slab's (no bit of
 * their own), `source` the metric's kind. */
#define ASLAB_ROW(kind, name, slab, red, src)                                                      \
    [kind] = {name, OCT_PRODUCT_BIT(slab), OCT_CLASS_ENFACE, OCT_FRAMES_GROUPS, OCT_SEL_GROUP,    \
              OCT_DEPTHS_RANGE, red, OCT_SHAPE_GN, OCT_INDEX_RANGE, src}
    ASLAB_ROW(OCT_KIND_SLAB_MEAN_SV, "slab_mean", OCT_KIND_SLAB_MEAN, OCT_REDUCE_MEAN, OCT_KIND_SV),
    ASLAB_ROW(OCT_KIND_SLAB_MAX_SV, "slab_max", OCT_KIND_SLAB_MAX, OCT_REDUCE_MAX, OCT_KIND_SV),
    ASLAB_ROW(OCT_KIND_SLAB_MEAN_DECOR, "slab_mean", OCT_KIND_SLAB_MEAN, OCT_REDUCE_MEAN, OCT_KIND_DECOR),
    ASLAB_ROW(OCT_KIND_SLAB_MAX_DECOR, "slab_max", OCT_KIND_SLAB_MAX, OCT_REDUCE_MAX, OCT_KIND_DECOR),
    ASLAB_ROW(OCT_KIND_SLAB_MEAN_SSADA, "slab_mean", OCT_KIND_SLAB_MEAN, OCT_REDUCE_MEAN, OCT_KIND_SSADA),
    ASLAB_ROW(OCT_KIND_SLAB_MAX_SSADA, "slab_max", OCT_KIND_SLAB_MAX, OCT_REDUCE_MAX, OCT_KIND_SSADA),
#undef ASLAB_ROW
};

int oct_kind_angio_source(int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    return k && k->source ? k->source : -1;
}

const char *oct_product_method_name(int method, int kind)
{
    int src = oct_kind_angio_source(kind);
    return src >= 0 ? oct_kind_name(src) : oct_method_name(method);
}

const oct_kind_info *oct_kind_info_of(int kind)
{
    return (kind >= 0 && kind < OCT_KIND_COUNT) ? &kind_table[kind] : NULL;
}

const char *oct_kind_name(int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    return k ? k->name : "unknown";
}

int oct_kind_class(int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    return k ? k->cls : OCT_CLASS_BSCAN;
}

uint32_t oct_kind_bit(int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    return k ? k->bit : 0;
}

size_t oct_kind_cap(const oct_geometry *g, uint32_t D, int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    /* GROUPS: made by the CPU backend only, whose products are not pooled */
    if (!k || D == 0 || k->frames == OCT_FRAMES_GROUPS ||
        (k->frames == OCT_FRAMES_BSCAN) != (g->lines == 1))
        return 0;
    const size_t N = g->ascans, L = g->lines, S = N * L;
    switch (k->shape) {
    case OCT_SHAPE_DN: return (size_t)D * N;
    case OCT_SHAPE_QLN: return (size_t)D * S; /* Q <= D */
    case OCT_SHAPE_LN: return S;
    case OCT_SHAPE_DL: return (size_t)D * L;
    case OCT_SHAPE_LND: return (size_t)D * S;
    default: return 0;
    }
}

size_t oct_kind_cap_setup(const oct_setup *s, int method, uint32_t D, int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    if (!k || k->frames != OCT_FRAMES_GROUPS)
        return oct_kind_cap(&s->geom, D, kind);
    const uint32_t R = s->repeats;
    if (method != OCT_METHOD_CFD || R < 2 || s->geom.lines % R)
        return 0;
    return (size_t)(s->geom.lines / R) * s->geom.ascans * (k->shape == OCT_SHAPE_GN ? 1 : D);
}

size_t oct_kind_cap_indices(uint32_t D, int kind)
{
    const oct_kind_info *k = oct_kind_info_of(kind);
    if (!k)
        return 0;
    switch (k->index) {
    case OCT_INDEX_ENFACE: return D;
    case OCT_INDEX_XSEC_H:
    case OCT_INDEX_XSEC_V: return 1;
    case OCT_INDEX_RANGE: return 2;
    default: return 0;
    }
}

/* Slab range of SPEC 10.2 for D depths: [d0, d1) clamped to [0, D]. */
void oct_slab_range(const oct_params *p, uint32_t D, int32_t *d0, int32_t *d1)
{
    int64_t a = p->slab_start, b = p->slab_end;
    a = a < 0 ? 0 : a > (int64_t)D ? (int64_t)D : a;
    b = b < 0 ? 0 : b > (int64_t)D ? (int64_t)D : b;
    *d0 = (int32_t)a, *d1 = (int32_t)b;
}

/* ---- MSI cost model ---------------------------------------------------------- */

oct_msi_path oct_msi_path_choose(const oct_msi_rates *r, oct_msi_path want, uint32_t M, uint32_t R,
                                 uint32_t Lw, uint32_t Q)
{
    if (want != OCT_MSI_AUTO)
        return want;
    if (!r || !r->gemm_ok || R == 0)
        return OCT_MSI_FFT;
    if (r->gemm_lags_max && Lw > r->gemm_lags_max)
        return OCT_MSI_FFT;
    uint64_t bytes = ((uint64_t)R + Q) * Lw * M * sizeof(float);
    if (r->gemm_matrix_bytes_max && bytes > r->gemm_matrix_bytes_max)
        return OCT_MSI_FFT;
    uint32_t lg = 0;
    for (uint32_t v = M; v > 1; v >>= 1)
        lg++;
    double fft_ns = (double)M * (r->fft_ns_per_sample + r->fft_ns_per_sample_log * lg);
    double gemm_ns = 2.0 * M * Lw / r->gemm_flops_per_ns;
    return gemm_ns < fft_ns ? OCT_MSI_GEMM : OCT_MSI_FFT;
}

/* ---- derived arrays ------------------------------------------------------------ */

void oct_window_compute(double *w, uint32_t M, uint32_t type, double param)
{
    const double D = (double)M - 1.0, pi = 3.14159265358979323846;
    for (uint32_t i = 0; i < M; i++) {
        double n = (double)i, v = 1.0;
        switch (type) {
        case OCT_WINDOW_HANN: v = 0.5 - 0.5 * cos(2 * pi * n / D); break;
        case OCT_WINDOW_HAMMING: v = 0.54 - 0.46 * cos(2 * pi * n / D); break;
        case OCT_WINDOW_BLACKMAN:
            v = 0.42 - 0.5 * cos(2 * pi * n / D) + 0.08 * cos(4 * pi * n / D);
            break;
        case OCT_WINDOW_GAUSSIAN: {
            double t = (n - D / 2) / (param * M);
            v = exp(-0.5 * t * t);
            break;
        }
        case OCT_WINDOW_TUKEY: {
            /* scipy.signal.windows.tukey (sym=True): a cosine taper over the first
             * and last alpha*D/2 samples, flat in between; alpha = 0 is rect. */
            double aD = param * D;
            if (param >= 1.0)
                v = 0.5 - 0.5 * cos(2 * pi * n / D);
            else if (aD > 0 && n < aD / 2)
                v = 0.5 * (1 - cos(2 * pi * n / aD));
            else if (aD > 0 && n > D - aD / 2)
                v = 0.5 * (1 - cos(2 * pi * (D - n) / aD));
            break;
        }
        default: break; /* rect */
        }
        w[i] = v;
    }
}

/* FFTW's planner is not thread-safe; engines may be created from several
 * threads (and the CPU backend plans in single precision concurrently). */
static pthread_once_t fftw_once = PTHREAD_ONCE_INIT;
static void fftw_threadsafe_init(void)
{
    fftw_make_planner_thread_safe();
}

void oct_fftw_init_once(void)
{
    pthread_once(&fftw_once, fftw_threadsafe_init);
}

/* m~_r = IDFT(H . DFT(w . m_r)) / M in double precision, optionally scaled
 * to unit L2 norm; out: R x M floats. */
static oct_err compute_masks_filt(const oct_engine *eng, int32_t F, const double *w, float *out,
                                  oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, R = eng->setup.mask_count, K = M / 2 + 1;
    oct_fftw_init_once();
    double *x = fftw_malloc(sizeof(double) * M);
    fftw_complex *X = fftw_malloc(sizeof(fftw_complex) * K);
    fftw_plan fwd = NULL, inv = NULL;
    oct_err err = OCT_OK;
    if (!x || !X) {
        err = oct_error_set(e, OCT_ENOMEM, "filtered masks: out of memory (M = %u)", M);
        goto out;
    }
    fwd = fftw_plan_dft_r2c_1d((int)M, x, X, FFTW_ESTIMATE);
    inv = fftw_plan_dft_c2r_1d((int)M, X, x, FFTW_ESTIMATE);
    if (!fwd || !inv) {
        err = oct_error_set(e, OCT_EBACKEND, "filtered masks: FFTW could not plan M = %u", M);
        goto out;
    }
    for (uint32_t r = 0; r < R; r++) {
        const float *m = eng->masks_raw + (size_t)r * M;
        for (uint32_t n = 0; n < M; n++)
            x[n] = w[n] * (double)m[n];
        fftw_execute(fwd);
        /* H removes k < F and k > M-F: in the half spectrum, the bins k < F
         * (their mirror images M-k are implied by symmetry). */
        for (int32_t k = 0; k < F && k < (int32_t)K; k++)
            X[k][0] = X[k][1] = 0.0;
        fftw_execute(inv); /* unnormalised: x = M * m~ */
        double scale = 1.0 / M;
        if (eng->setup.normalize_masks) {
            double ss = 0;
            for (uint32_t n = 0; n < M; n++)
                ss += x[n] * x[n];
            /* an all-zero mask stays zero rather than becoming NaN */
            scale = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
        }
        float *o = out + (size_t)r * M;
        for (uint32_t n = 0; n < M; n++)
            o[n] = (float)(x[n] * scale);
    }
out:
    if (fwd)
        fftw_destroy_plan(fwd);
    if (inv)
        fftw_destroy_plan(inv);
    fftw_free(x);
    fftw_free(X);
    return err;
}

/* q_r[n] = w[n] (P c_r)[n], c_r = exp(-i (z_r g + h)), P the F cut-off;
 * out: 2R x M floats (Re row, Im row). */
static oct_err compute_cms_q(const oct_engine *eng, int32_t F32, const double *w, float *out,
                             oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, R = eng->setup.cms_count;
    const int64_t F = F32;
    oct_fftw_init_once();
    fftw_complex *c = fftw_malloc(sizeof(fftw_complex) * M);
    fftw_complex *C = fftw_malloc(sizeof(fftw_complex) * M);
    fftw_plan fwd = NULL, inv = NULL;
    oct_err err = OCT_OK;
    if (!c || !C) {
        err = oct_error_set(e, OCT_ENOMEM, "cms masks: out of memory (M = %u)", M);
        goto out;
    }
    if (F > 0) {
        fwd = fftw_plan_dft_1d((int)M, c, C, FFTW_FORWARD, FFTW_ESTIMATE);
        inv = fftw_plan_dft_1d((int)M, C, c, FFTW_BACKWARD, FFTW_ESTIMATE);
        if (!fwd || !inv) {
            err = oct_error_set(e, OCT_EBACKEND, "cms masks: FFTW could not plan M = %u", M);
            goto out;
        }
    }
    for (uint32_t r = 0; r < R; r++) {
        double z = eng->setup.cms_start + eng->setup.cms_step * (double)r;
        for (uint32_t n = 0; n < M; n++) {
            double t = z * eng->cms_g[n] + eng->cms_h[n];
            c[n][0] = cos(t), c[n][1] = -sin(t);
        }
        double scale = 1.0;
        if (F > 0) { /* H removes k < F and k > M - F */
            fftw_execute(fwd);
            for (uint32_t k = 0; k < M; k++)
                if ((int64_t)k < F || (int64_t)k > (int64_t)M - F)
                    C[k][0] = C[k][1] = 0;
            fftw_execute(inv);
            scale = 1.0 / M;
        }
        float *re = out + (size_t)2 * r * M, *im = re + M;
        for (uint32_t n = 0; n < M; n++) {
            re[n] = (float)(w[n] * c[n][0] * scale);
            im[n] = (float)(w[n] * c[n][1] * scale);
        }
    }
out:
    if (fwd)
        fftw_destroy_plan(fwd);
    if (inv)
        fftw_destroy_plan(inv);
    fftw_free(c);
    fftw_free(C);
    return err;
}

void oct_klin_positions(const oct_params *p, const double *file, uint32_t M, double *pos)
{
    for (uint32_t n = 0; n < M; n++) {
        if (p->klin_source == OCT_KLIN_FILE) {
            pos[n] = file[n];
            continue;
        }
        double t = (double)n / (double)M;
        pos[n] = p->klin_coef[0] + t * (p->klin_coef[1] + t * (p->klin_coef[2] + t * p->klin_coef[3]));
    }
}

oct_err oct_klin_positions_check(const double *pos, uint32_t M, int source, oct_error *e)
{
    const char *src = source == OCT_KLIN_FILE ? "klin.positions: klin position file"
                                            : "klin.c0..c3: klin polynomial";
    for (uint32_t n = 0; n < M; n++) {
        if (!isfinite(pos[n]) || pos[n] < -1.0 || pos[n] > (double)M)
            return oct_error_set(e, OCT_EINVAL,
                                 "%s: position %u = %g: must be finite and in [-1, %u]", src, n,
                                 pos[n], M);
        if (n > 0 && !(pos[n] > pos[n - 1]))
            return oct_error_set(e, OCT_EINVAL,
                                 "%s: position %u = %g is not greater than position %u = %g "
                                 "(positions must increase strictly)", src, n, pos[n], n - 1,
                                 pos[n - 1]);
    }
    return OCT_OK;
}

static inline int32_t clamp_idx(int64_t i, uint32_t M)
{
    return i < 0 ? 0 : i > (int64_t)M - 1 ? (int32_t)M - 1 : (int32_t)i;
}

/* Interpolation taps of oct_engine.h: weights in double, stored as float. */
static oct_err klin_build(const oct_engine *eng, const oct_params *p, uint32_t *Tout,
                          int32_t **idx_out, float **w_out, oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples;
    const double pi = 3.14159265358979323846;
    *Tout = 0;
    if (p->klin == OCT_KLIN_OFF)
        return OCT_OK;
    const uint32_t T = p->klin == OCT_KLIN_LINEAR ? 2 : p->klin == OCT_KLIN_CUBIC ? 4
                                                                                  : (uint32_t)p->klin_taps;
    double *pos = malloc(sizeof(double) * M);
    int32_t *kidx = malloc(sizeof(int32_t) * (size_t)M * T);
    float *kw = malloc(sizeof(float) * (size_t)M * T);
    oct_err err = OCT_OK;
    if (!pos || !kidx || !kw) {
        err = oct_error_set(e, OCT_ENOMEM, "klin taps: out of memory (M = %u, T = %u)", M, T);
        goto fail;
    }
    oct_klin_positions(p, eng->klin_positions, M, pos);
    if ((err = oct_klin_positions_check(pos, M, (int)p->klin_source, e)))
        goto fail;
    for (uint32_t n = 0; n < M; n++) {
        const double x = pos[n];
        int32_t *ix = kidx + (size_t)n * T;
        float *wt = kw + (size_t)n * T;
        if (p->klin == OCT_KLIN_SINC) {
            int64_t m0 = (int64_t)floor(x - (T - 1) / 2.0 + 0.5);
            for (uint32_t t = 0; t < T; t++) {
                double u = x - (double)(m0 + t);
                ix[t] = clamp_idx(m0 + t, M);
                wt[t] = (float)(u == 0 ? 1.0 : sin(pi * u) / (pi * u));
            }
            continue;
        }
        int64_t i = (int64_t)floor(x);
        double f = x - (double)i;
        if (p->klin == OCT_KLIN_LINEAR) {
            ix[0] = clamp_idx(i, M), ix[1] = clamp_idx(i + 1, M);
            wt[0] = (float)(1 - f), wt[1] = (float)f;
        } else { /* Catmull-Rom, the formula of oct_engine.h regrouped by sample */
            double f2 = f * f, f3 = f2 * f;
            for (int t = 0; t < 4; t++)
                ix[t] = clamp_idx(i - 1 + t, M);
            wt[0] = (float)(-0.5 * f + f2 - 0.5 * f3);
            wt[1] = (float)(1 - 2.5 * f2 + 1.5 * f3);
            wt[2] = (float)(0.5 * f + 2 * f2 - 1.5 * f3);
            wt[3] = (float)(-0.5 * f2 + 0.5 * f3);
        }
    }
    free(pos);
    *Tout = T, *idx_out = kidx, *w_out = kw;
    return OCT_OK;
fail:
    free(pos);
    free(kidx);
    free(kw);
    return err;
}

/* ---- shared storage ------------------------------------------------------------ */

struct oct_plan_array {
    uint32_t refs;
    void *data;
};

/* Slots of plan->arr */
enum { A_WINDOW, A_MASKS, A_CMS, A_ENF0, A_KIDX = A_ENF0 + OCT_METHOD_COUNT, A_KW, A_DISP, A_COUNT };

static oct_plan_array *arr_wrap(void *data)
{
    if (!data)
        return NULL;
    oct_plan_array *a = malloc(sizeof *a);
    if (!a)
        return NULL;
    a->refs = 1, a->data = data;
    return a;
}

static oct_plan_array *arr_ref(oct_plan_array *a)
{
    if (a)
        a->refs++; /* an engine is used by one thread at a time */
    return a;
}

static void arr_unref(oct_plan_array *a)
{
    if (a && --a->refs == 0) {
        free(a->data);
        free(a);
    }
}

void oct_plan_free(oct_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < A_COUNT; i++)
        arr_unref(p->arr[i]);
    free(p);
}

/* Adopts `data` (malloc'd, may be NULL) into slot i; *ok = false on failure. */
static void *adopt(oct_plan *p, int i, void *data, bool *ok)
{
    if (!data)
        return NULL;
    if (!(p->arr[i] = arr_wrap(data))) {
        free(data);
        *ok = false;
        return NULL;
    }
    return data;
}

/* ---- what changed --------------------------------------------------------------- */

static bool same_f32(float a, float b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* Whether key k's inputs are equal in a and b. */
static bool key_same(int k, const oct_params *a, const oct_params *b)
{
    switch (k) {
    case OCT_PK_WINDOW:
        return a->window == b->window && same_f32(a->window_param, b->window_param);
    case OCT_PK_MASKS:
    case OCT_PK_CMS:
        return key_same(OCT_PK_WINDOW, a, b) && a->freq_cutoff == b->freq_cutoff;
    case OCT_PK_ENFACE:
        return a->enface_start == b->enface_start && a->enface_step == b->enface_step &&
               a->enface_count == b->enface_count;
    case OCT_PK_KLIN:
        return a->klin == b->klin && a->klin_taps == b->klin_taps &&
               a->klin_source == b->klin_source && !memcmp(a->klin_coef, b->klin_coef, sizeof a->klin_coef);
    case OCT_PK_DISP:
        return same_f32(a->disp_a2, b->disp_a2) && same_f32(a->disp_a3, b->disp_a3) &&
               same_f32(a->disp_k0, b->disp_k0);
    case OCT_PK_LAGS:
        return a->lag_lo == b->lag_lo && a->lag_hi == b->lag_hi;
    case OCT_PK_ROWS:
        return a->methods == b->methods && a->products == b->products && a->xsec_h == b->xsec_h &&
               a->xsec_v == b->xsec_v && key_same(OCT_PK_ENFACE, a, b) &&
               a->slab_start == b->slab_start && a->slab_end == b->slab_end;
    case OCT_PK_BACKGROUND:
        return a->background == b->background && a->background_param == b->background_param;
    default: return false;
    }
}

/* ---- layout ----------------------------------------------------------------------- */

static bool kind_wanted(const oct_engine *eng, const oct_plan *pl, int m, int kind)
{
    const oct_params *p = &pl->params;
    const oct_kind_info *k = &kind_table[kind];
    if (k->frames == OCT_FRAMES_GROUPS) { /* SPEC 10.3: chosen by angio.metrics, CFD only */
        const int metric = (k->source ? k->source : kind) - OCT_KIND_ANGIO_FIRST;
        return m == OCT_METHOD_CFD && (p->methods & OCT_METHOD_BIT(m)) && eng->setup.repeats >= 2 &&
               ((p->angio_metrics >> metric) & 1u) && (!k->source || (p->products & k->bit));
    }
    if (!(p->methods & OCT_METHOD_BIT(m)) || eng->depths[m] == 0 || !(p->products & k->bit))
        return false;
    if ((k->frames == OCT_FRAMES_BSCAN) != (eng->setup.geom.lines == 1))
        return false;
    /* en-face start past D: no index left, the en-face products of that
     * method are not produced (rather than published empty) */
    if (k->depths == OCT_DEPTHS_ENFACE && pl->enface_n[m] == 0)
        return false;
    return true;
}

static void layout_rows(const oct_engine *eng, oct_plan *pl, int m)
{
    const oct_params *p = &pl->params;
    const uint32_t N = eng->setup.geom.ascans, L = eng->setup.geom.lines;
    const uint32_t D = eng->depths[m], Q = pl->enface_n[m];
    oct_plan_method *pm = &pl->method[m];
    memset(pm, 0, sizeof *pm);
    memset(pm->row_of, -1, sizeof pm->row_of);
    pm->D = D;
    pm->on = (p->methods & OCT_METHOD_BIT(m)) && D > 0;
    for (int kind = 0; kind < OCT_KIND_COUNT; kind++) {
        if (!kind_wanted(eng, pl, m, kind))
            continue;
        const oct_kind_info *k = &kind_table[kind];
        oct_layout *r = &pm->layout[pm->nlayout];
        memset(r, 0, sizeof *r);
        r->method = m, r->kind = kind, r->cls = k->cls, r->reduce = k->reduce;
        r->select = k->select, r->depths = k->depths;
        r->sel = k->select == OCT_SEL_LINE ? p->xsec_h : k->select == OCT_SEL_COLUMN ? p->xsec_v : 0;
        switch (k->depths) {
        case OCT_DEPTHS_ALL: r->nslots = D, r->d0 = 0, r->d1 = (int32_t)D; break;
        case OCT_DEPTHS_ENFACE: r->nslots = Q; break;
        case OCT_DEPTHS_RANGE:
            oct_slab_range(p, D, &r->d0, &r->d1);
            r->nslots = r->d1 > r->d0 ? (uint32_t)(r->d1 - r->d0) : 0;
            break;
        }
        switch (k->shape) {
        case OCT_SHAPE_DN:
            r->ndim = 2, r->shape[0] = D, r->shape[1] = N;
            r->st_l = 0, r->st_a = 1, r->st_d = N;
            break;
        case OCT_SHAPE_QLN:
            r->ndim = 3, r->shape[0] = Q, r->shape[1] = L, r->shape[2] = N;
            r->st_l = N, r->st_a = 1, r->st_d = (int64_t)L * N;
            break;
        case OCT_SHAPE_LN:
            r->ndim = 2, r->shape[0] = L, r->shape[1] = N;
            r->st_l = N, r->st_a = 1, r->st_d = 0;
            break;
        case OCT_SHAPE_DL:
            r->ndim = 2, r->shape[0] = D, r->shape[1] = L;
            r->st_l = 1, r->st_a = 0, r->st_d = L;
            break;
        case OCT_SHAPE_LND:
            r->ndim = 3, r->shape[0] = L, r->shape[1] = N, r->shape[2] = D;
            r->st_l = (int64_t)N * D, r->st_a = D, r->st_d = 1;
            break;
        case OCT_SHAPE_GROUP: { /* st_l: per group */
            const uint32_t G = L / eng->setup.repeats;
            if (G == 1) {
                r->ndim = 2, r->shape[0] = D, r->shape[1] = N;
                r->st_l = 0, r->st_a = 1, r->st_d = N;
            } else {
                r->ndim = 3, r->shape[0] = G, r->shape[1] = N, r->shape[2] = D;
                r->st_l = (int64_t)N * D, r->st_a = D, r->st_d = 1;
            }
            break;
        }
        case OCT_SHAPE_GN: /* st_l: per group */
            r->ndim = 2, r->shape[0] = L / eng->setup.repeats, r->shape[1] = N;
            r->st_l = N, r->st_a = 1, r->st_d = 0;
            break;
        }
        r->count = (size_t)r->shape[0] * r->shape[1] * (r->ndim == 3 ? r->shape[2] : 1);
        pm->row_of[kind] = (int8_t)pm->nlayout++;
        /* row sets (GROUP: the repeats' CFD magnitudes at every depth) */
        if (k->select == OCT_SEL_LINE)
            pm->xs_h = true;
        else if (k->select == OCT_SEL_COLUMN)
            pm->xs_v = true;
        else if (k->depths == OCT_DEPTHS_ENFACE)
            pm->sub = true;
        else /* all spectra, all (or a range of) depths */
            pm->full = true;
    }
}

/* ---- build -------------------------------------------------------------------------- */

oct_err oct_plan_build(oct_engine *eng, const oct_params *params, const oct_plan *prev,
                       oct_plan **out, oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, R = eng->setup.mask_count;
    const uint32_t RC = eng->setup.cms_count;
    *out = NULL;
    oct_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return oct_error_set(e, OCT_ENOMEM, "plan: out of memory");
    pl->params = *params;
    const oct_params *p = &pl->params;
    bool same[OCT_PK_COUNT];
    for (int k = 0; k < OCT_PK_COUNT; k++) {
        same[k] = prev && key_same(k, p, &prev->params);
        pl->gen[k] = same[k] ? prev->gen[k] : ++eng->gens;
    }
    oct_err err = OCT_OK;
    bool ok = true;

    /* window, filtered masks, CMS q */
    const bool new_w = !same[OCT_PK_WINDOW], new_m = R && !same[OCT_PK_MASKS],
               new_q = RC && !same[OCT_PK_CMS];
    if (new_w || new_m || new_q) {
        double *w = malloc(sizeof(double) * M);
        if (!w) {
            err = oct_error_set(e, OCT_ENOMEM, "window: out of memory (M = %u)", M);
            goto fail;
        }
        oct_window_compute(w, M, p->window, p->window_param);
        if (new_w) {
            float *wf = adopt(pl, A_WINDOW, malloc(sizeof(float) * M), &ok);
            if (wf)
                for (uint32_t n = 0; n < M; n++)
                    wf[n] = (float)w[n];
            else
                ok = false;
            eng->rebuilds.window++;
        }
        if (ok && new_m) {
            float *mf = adopt(pl, A_MASKS, malloc(sizeof(float) * (size_t)R * M), &ok);
            if (!mf)
                ok = false;
            else if ((err = compute_masks_filt(eng, p->freq_cutoff, w, mf, e))) {
                free(w);
                goto fail;
            }
            eng->rebuilds.masks++;
        }
        if (ok && new_q) {
            float *q = adopt(pl, A_CMS, malloc(sizeof(float) * 2 * (size_t)RC * M), &ok);
            if (!q)
                ok = false;
            else if ((err = compute_cms_q(eng, p->freq_cutoff, w, q, e))) {
                free(w);
                goto fail;
            }
            eng->rebuilds.cms++;
        }
        free(w);
        if (!ok) {
            err = oct_error_set(e, OCT_ENOMEM, "window/masks: out of memory (R = %u, cms R = %u, M = %u)",
                                R, RC, M);
            goto fail;
        }
    }
    if (!new_w)
        pl->arr[A_WINDOW] = arr_ref(prev->arr[A_WINDOW]);
    if (R && !new_m)
        pl->arr[A_MASKS] = arr_ref(prev->arr[A_MASKS]);
    if (RC && !new_q)
        pl->arr[A_CMS] = arr_ref(prev->arr[A_CMS]);

    /* en-face index lists: idx_q = start + step*q, q < count, kept only while < D */
    if (same[OCT_PK_ENFACE]) {
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            pl->arr[A_ENF0 + m] = arr_ref(prev->arr[A_ENF0 + m]);
            pl->enface_n[m] = prev->enface_n[m];
        }
    } else {
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            int64_t D = eng->depths[m], n = 0;
            if (p->enface_start < D)
                n = (D - 1 - p->enface_start) / p->enface_step + 1;
            if (n > p->enface_count)
                n = p->enface_count;
            pl->enface_n[m] = (uint32_t)n;
            int32_t *ix = adopt(pl, A_ENF0 + m, malloc(sizeof(int32_t) * (size_t)(n ? n : 1)), &ok);
            if (!ix) {
                err = oct_error_set(e, OCT_ENOMEM, "en-face index list: out of memory");
                goto fail;
            }
            for (int64_t q = 0; q < n; q++)
                ix[q] = (int32_t)(p->enface_start + p->enface_step * q);
        }
        eng->rebuilds.enface++;
    }

    /* k-linearisation taps */
    if (same[OCT_PK_KLIN]) {
        pl->arr[A_KIDX] = arr_ref(prev->arr[A_KIDX]);
        pl->arr[A_KW] = arr_ref(prev->arr[A_KW]);
        pl->klin_T = prev->klin_T;
    } else {
        int32_t *kidx = NULL;
        float *kw = NULL;
        if ((err = klin_build(eng, p, &pl->klin_T, &kidx, &kw, e)))
            goto fail;
        adopt(pl, A_KIDX, kidx, &ok);
        adopt(pl, A_KW, kw, &ok);
        if (!ok) {
            err = oct_error_set(e, OCT_ENOMEM, "klin taps: out of memory");
            goto fail;
        }
        eng->rebuilds.klin++;
    }

    /* dispersion phase e^(-i theta[n]) as (cos, -sin) pairs */
    if (same[OCT_PK_DISP]) {
        pl->arr[A_DISP] = arr_ref(prev->arr[A_DISP]);
    } else {
        if (p->disp_a2 != 0.0f || p->disp_a3 != 0.0f) {
            float *d = adopt(pl, A_DISP, malloc(sizeof(float) * 2 * M), &ok);
            if (!d) {
                err = oct_error_set(e, OCT_ENOMEM, "dispersion phase: out of memory (M = %u)", M);
                goto fail;
            }
            const double a2 = p->disp_a2, a3 = p->disp_a3, k0 = p->disp_k0;
            for (uint32_t n = 0; n < M; n++) {
                double u = (double)n / M - k0, th = a2 * u * u + a3 * u * u * u;
                d[2 * n] = (float)cos(th);
                d[2 * n + 1] = (float)-sin(th);
            }
        }
        eng->rebuilds.disp++;
    }

    /* typed views */
    pl->window = pl->arr[A_WINDOW] ? pl->arr[A_WINDOW]->data : NULL;
    pl->masks_filt = pl->arr[A_MASKS] ? pl->arr[A_MASKS]->data : NULL;
    pl->cms_q = pl->arr[A_CMS] ? pl->arr[A_CMS]->data : NULL;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        pl->enface_idx[m] = pl->arr[A_ENF0 + m] ? pl->arr[A_ENF0 + m]->data : NULL;
    pl->klin_idx = pl->arr[A_KIDX] ? pl->arr[A_KIDX]->data : NULL;
    pl->klin_w = pl->arr[A_KW] ? pl->arr[A_KW]->data : NULL;
    pl->disp = pl->arr[A_DISP] ? pl->arr[A_DISP]->data : NULL;

    /* layout and row sets */
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        layout_rows(eng, pl, m);
        const oct_plan_method *pm = &pl->method[m];
        pl->rows_full |= pm->full;
        pl->rows_xs_h |= pm->xs_h;
        pl->rows_xs_v |= pm->xs_v;
        pl->rows_sub |= pm->sub;
    }

    /* background recipe */
    pl->bg.mode = p->background;
    pl->bg.K = p->background == OCT_BG_ROLLING ? (uint32_t)p->background_param : 0;
    pl->bg.G = p->background == OCT_BG_FPN ? (uint32_t)p->background_param : 0;
    pl->bg.needs_mean = p->background == OCT_BG_FRAME_MEAN || p->background == OCT_BG_ROLLING;

    /* MSI path: one cost model, the backend's rates */
    pl->lags = (uint32_t)(p->lag_hi - p->lag_lo + 1);
    pl->msi_path = OCT_MSI_FFT;
    if (R) { /* chosen with MSI off too: the backend keeps its streams as they will be */
        oct_msi_rates rates;
        memset(&rates, 0, sizeof rates);
        if (eng->ops && eng->ops->msi_rates)
            eng->ops->msi_rates(&eng->setup, &rates);
        oct_msi_path want = eng->setup.msi_path;
        if (want == OCT_MSI_GEMM && !rates.gemm_ok) {
            if (p->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) {
                err = oct_error_set(e, OCT_EUNSUPPORTED, "msi_path gemm: %s",
                                    rates.why[0] ? rates.why : "no matrix product on this backend");
                goto fail;
            }
            want = OCT_MSI_FFT;
        }
        pl->msi_path = oct_msi_path_choose(&rates, want, M, R, pl->lags,
                                           pl->enface_n[OCT_METHOD_MSI]);
    }
    if (prev && pl->msi_path == prev->msi_path)
        pl->gen[OCT_PK_PATH] = prev->gen[OCT_PK_PATH];
    *out = pl;
    return OCT_OK;
fail:
    oct_plan_free(pl);
    return err;
}
