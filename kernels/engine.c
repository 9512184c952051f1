/* engine.c - the backend-neutral part of the OCT engine (SPEC section 2):
 * names, parameter defaults and validation, products, the engine object,
 * and everything derived from the control values alone (window, filtered
 * masks, en-face index lists, product shapes, gray mapping).  Backends
 * (engine_cpu.c, engine_cuda.cu) do the per-frame work. */
#include "engine_internal.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- names ---------------------------------------------------------------- */

const char *oct_method_name(int method)
{
    switch (method) {
    case OCT_METHOD_CFD: return "cfd";
    case OCT_METHOD_MSI: return "msi";
    case OCT_METHOD_CMS: return "cms";
    default: return "unknown";
    }
}

const char *oct_kind_name(int kind)
{
    static const char *const names[OCT_KIND_COUNT] = {"bscan",  "enface", "confocal",
                                                      "xsec_h", "xsec_v", "volume"};
    return (kind >= 0 && kind < OCT_KIND_COUNT) ? names[kind] : "unknown";
}

const char *oct_window_name(int window)
{
    static const char *const names[OCT_WINDOW_COUNT] = {"rect",     "hann",     "hamming",
                                                        "blackman", "gaussian", "tukey"};
    return (window >= 0 && window < OCT_WINDOW_COUNT) ? names[window] : "unknown";
}

int oct_kind_class(int kind)
{
    switch (kind) {
    case OCT_KIND_ENFACE: return OCT_CLASS_ENFACE;
    case OCT_KIND_CONFOCAL: return OCT_CLASS_CONFOCAL;
    default: return OCT_CLASS_BSCAN;
    }
}

/* ---- parameters ----------------------------------------------------------- */

void oct_params_default(oct_params *p)
{
    memset(p, 0, sizeof *p);
    p->methods = OCT_METHOD_BIT(OCT_METHOD_CFD);
    p->window = OCT_WINDOW_HANN;
    p->window_param = 0.0f;
    p->freq_cutoff = 0;
    p->lag_lo = 0;
    p->lag_hi = 0;
    p->scale = OCT_SCALE_LINEAR;
    p->background = OCT_BG_NONE;
    p->enface_start = 0;
    p->enface_step = 1;
    p->enface_count = 1;
    p->xsec_h = 0;
    p->xsec_v = 0;
    for (int c = 0; c < OCT_CLASS_COUNT; c++) {
        p->gsc[c] = 1.0f;
        p->contrast[c] = 1.0f;
        p->brightness[c] = 0.0f;
    }
    p->products = OCT_PRODUCT_BIT(OCT_KIND_BSCAN) | OCT_PRODUCT_BIT(OCT_KIND_ENFACE) |
                  OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_H) |
                  OCT_PRODUCT_BIT(OCT_KIND_XSEC_V);
    p->background_param = 16;
    p->klin = OCT_KLIN_OFF;
    p->klin_taps = 21;
    p->klin_source = OCT_KLIN_POLY;
    p->disp_a2 = p->disp_a3 = 0.0f;
    p->disp_k0 = 0.5f;
    p->slab_start = 0;
    p->slab_end = INT32_MAX;
    p->angio_metrics = 0;
    p->angio_bands = 4;
    p->angio_band_width = 1.0f;
    p->angio_align = 0;
    p->reg_average = 10;
    p->reg_stripe = 3;
    p->reg_search_xy = 0.25f;
    p->reg_search_z = 15;
}

#define ENFACE_COUNT_MAX 65536
#define MASK_COUNT_MAX 65536u

static const char *const class_names[OCT_CLASS_COUNT] = {"bscan", "enface", "confocal"};

oct_err oct_params_validate(const oct_params *p, const oct_geometry *g, uint32_t mask_count,
                            bool have_reference, oct_error *e)
{
    if (!p || !g)
        return oct_error_set(e, OCT_EINVAL, "params or geometry is NULL");
    oct_err err = oct_geometry_check(g, e);
    if (err)
        return oct_error_prefix(e, err, "geometry");
    const int32_t M = (int32_t)g->samples, half = M / 2;

    if (p->methods == 0 || (p->methods & ~OCT_METHODS_ALL))
        return oct_error_set(e, OCT_EINVAL,
                             "methods = 0x%x: must be a non-empty subset of 0x1 (cfd) | 0x2 (msi) | "
                             "0x4 (cms)",
                             p->methods);
    if ((p->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) && mask_count == 0)
        return oct_error_set(e, OCT_EINVAL,
                             "methods = 0x%x: msi needs masks, and none were loaded (msi.masks)",
                             p->methods);
    if (p->window >= OCT_WINDOW_COUNT)
        return oct_error_set(e, OCT_EINVAL,
                             "window = %u: must be 0 (rect) .. 5 (tukey)", p->window);
    if (!isfinite(p->window_param))
        return oct_error_set(e, OCT_EINVAL, "window_param = %g: must be finite",
                             (double)p->window_param);
    if (p->window == OCT_WINDOW_GAUSSIAN && !(p->window_param > 0.0f))
        return oct_error_set(e, OCT_EINVAL,
                             "window_param = %g: the gaussian sigma must be > 0 (fraction of M)",
                             (double)p->window_param);
    if (p->window == OCT_WINDOW_TUKEY && !(p->window_param >= 0.0f && p->window_param <= 1.0f))
        return oct_error_set(e, OCT_EINVAL,
                             "window_param = %g: the tukey alpha must be in [0, 1]",
                             (double)p->window_param);
    if (p->freq_cutoff < 0 || p->freq_cutoff > half)
        return oct_error_set(e, OCT_EINVAL,
                             "freq_cutoff = %d: must be in [0, %d] (0 <= F <= samples/2)",
                             p->freq_cutoff, half);
    if (p->lag_lo <= -half || p->lag_lo >= half)
        return oct_error_set(e, OCT_EINVAL,
                             "lag_lo = %d: must be in [%d, %d] (-samples/2 < W1 <= W2 < samples/2)",
                             p->lag_lo, -half + 1, half - 1);
    if (p->lag_hi <= -half || p->lag_hi >= half)
        return oct_error_set(e, OCT_EINVAL,
                             "lag_hi = %d: must be in [%d, %d] (-samples/2 < W1 <= W2 < samples/2)",
                             p->lag_hi, -half + 1, half - 1);
    if (p->lag_lo > p->lag_hi)
        return oct_error_set(e, OCT_EINVAL, "lag_lo = %d > lag_hi = %d: must be W1 <= W2",
                             p->lag_lo, p->lag_hi);
    if (p->scale > OCT_SCALE_LOG)
        return oct_error_set(e, OCT_EINVAL, "scale = %u: must be 0 (linear) or 1 (log)",
                             p->scale);
    if (p->background > OCT_BG_FPN)
        return oct_error_set(e, OCT_EINVAL,
                             "background = %u: must be 0 (none), 1 (reference), 2 (frame_mean), "
                             "3 (rolling) or 4 (fpn)", p->background);
    if (p->background == OCT_BG_ROLLING &&
        (p->background_param < 1 || p->background_param > OCT_ROLLING_MAX))
        return oct_error_set(e, OCT_EINVAL,
                             "background_param = %d: the rolling window must be in [1, %d] frames",
                             p->background_param, OCT_ROLLING_MAX);
    if (p->background == OCT_BG_FPN &&
        (p->background_param < 2 || p->background_param > OCT_FPN_SEGMENT_MAX))
        return oct_error_set(e, OCT_EINVAL,
                             "background_param = %d: the fpn segment must be in [2, %d] spectra",
                             p->background_param, OCT_FPN_SEGMENT_MAX);
    if (p->background == OCT_BG_REFERENCE && !have_reference)
        return oct_error_set(e, OCT_EINVAL,
                             "background = 1 (reference): no reference spectrum was loaded "
                             "(background.reference)");
    if (p->enface_start < 0)
        return oct_error_set(e, OCT_EINVAL, "enface_start = %d: must be >= 0", p->enface_start);
    if (p->enface_step < 1)
        return oct_error_set(e, OCT_EINVAL, "enface_step = %d: must be >= 1", p->enface_step);
    if (p->enface_count < 1 || p->enface_count > ENFACE_COUNT_MAX)
        return oct_error_set(e, OCT_EINVAL, "enface_count = %d: must be in [1, %d]",
                             p->enface_count, ENFACE_COUNT_MAX);
    /* the indices matter only for the cross-sections asked for, which exist
     * for volume frames only (issue 14: a B-scan ring with a volume profile) */
    bool xh = g->lines > 1 && (p->products & OCT_PRODUCT_BIT(OCT_KIND_XSEC_H));
    bool xv = g->lines > 1 && (p->products & OCT_PRODUCT_BIT(OCT_KIND_XSEC_V));
    if (p->xsec_h < 0 || (xh && (uint32_t)p->xsec_h >= g->lines))
        return oct_error_set(e, OCT_EINVAL, "xsec_h = %d: must be in [0, %u] (a line index < lines)",
                             p->xsec_h, g->lines - 1);
    if (p->xsec_v < 0 || (xv && (uint32_t)p->xsec_v >= g->ascans))
        return oct_error_set(e, OCT_EINVAL,
                             "xsec_v = %d: must be in [0, %u] (an A-scan index < ascans)",
                             p->xsec_v, g->ascans - 1);
    for (int c = 0; c < OCT_CLASS_COUNT; c++) {
        if (!isfinite(p->gsc[c]))
            return oct_error_set(e, OCT_EINVAL, "gsc[%d] (%s) = %g: must be finite", c,
                                 class_names[c], (double)p->gsc[c]);
        if (!isfinite(p->contrast[c]))
            return oct_error_set(e, OCT_EINVAL, "contrast[%d] (%s) = %g: must be finite", c,
                                 class_names[c], (double)p->contrast[c]);
        if (!isfinite(p->brightness[c]))
            return oct_error_set(e, OCT_EINVAL, "brightness[%d] (%s) = %g: must be finite", c,
                                 class_names[c], (double)p->brightness[c]);
    }
    if (p->products & ~OCT_PRODUCTS_KNOWN)
        return oct_error_set(e, OCT_EINVAL,
                             "products = 0x%x: unknown bits 0x%x (known: 0x3f kinds | 0x100 f32)",
                             p->products, p->products & ~OCT_PRODUCTS_KNOWN);
    if (p->klin > OCT_KLIN_SINC)
        return oct_error_set(e, OCT_EINVAL,
                             "klin = %u: must be 0 (off), 1 (linear), 2 (cubic) or 3 (sinc)",
                             p->klin);
    if (p->klin == OCT_KLIN_SINC &&
        (p->klin_taps < OCT_SINC_TAPS_MIN || p->klin_taps > OCT_SINC_TAPS_MAX))
        return oct_error_set(e, OCT_EINVAL, "klin_taps = %d: the sinc length must be in [%d, %d]",
                             p->klin_taps, OCT_SINC_TAPS_MIN, OCT_SINC_TAPS_MAX);
    if (p->klin_source > OCT_KLIN_FILE)
        return oct_error_set(e, OCT_EINVAL, "klin_source = %u: must be 0 (polynomial) or 1 (file)",
                             p->klin_source);
    for (int i = 0; i < 4; i++)
        if (!isfinite(p->klin_coef[i]))
            return oct_error_set(e, OCT_EINVAL, "klin_coef[%d] (c%d) = %g: must be finite", i, i,
                                 p->klin_coef[i]);
    if (!isfinite(p->disp_a2))
        return oct_error_set(e, OCT_EINVAL, "disp_a2 = %g: must be finite (radians)",
                             (double)p->disp_a2);
    if (!isfinite(p->disp_a3))
        return oct_error_set(e, OCT_EINVAL, "disp_a3 = %g: must be finite (radians)",
                             (double)p->disp_a3);
    if (!(p->disp_k0 >= -1.0f && p->disp_k0 <= 2.0f))
        return oct_error_set(e, OCT_EINVAL,
                             "disp_k0 = %g: must be in [-1, 2] (a fraction of samples)",
                             (double)p->disp_k0);
    return OCT_OK;
}

/* Resampling positions p[n] of SPEC/oct_engine.h k-linearisation (double). */
static void klin_positions_compute(const oct_params *p, const double *file, uint32_t M,
                                   double *pos)
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

/* Positions must be finite, strictly increasing and within [-1, M]. */
static oct_err klin_positions_check(const double *pos, uint32_t M, int source, oct_error *e)
{
    const char *src = source == OCT_KLIN_FILE ? "klin position file" : "klin polynomial";
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

/* validate + what needs the set-up beyond masks/reference. */
static oct_err params_check_full(const oct_params *p, const oct_setup *s, bool have_reference,
                                 oct_error *e)
{
    if (!p || !s)
        return oct_error_set(e, OCT_EINVAL, "params or set-up is NULL");
    oct_err err = oct_params_validate(p, &s->geom, s->mask_count, have_reference, e);
    if (err)
        return err;
    if ((p->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) && s->cms_count == 0)
        return oct_error_set(e, OCT_EINVAL,
                             "methods = 0x%x: cms needs a calibration and a depth grid "
                             "(cms_count = 0)", p->methods);
    if (p->klin == OCT_KLIN_OFF)
        return OCT_OK;
    const uint32_t M = s->geom.samples;
    if (p->klin_source == OCT_KLIN_FILE && !s->klin_positions)
        return oct_error_set(e, OCT_EINVAL,
                             "klin_source = 1 (file): no k-linearisation positions were loaded");
    double *pos = malloc(sizeof(double) * M);
    if (!pos)
        return oct_error_set(e, OCT_ENOMEM, "klin positions: out of memory (M = %u)", M);
    klin_positions_compute(p, s->klin_positions, M, pos);
    err = klin_positions_check(pos, M, (int)p->klin_source, e);
    free(pos);
    return err;
}

oct_err oct_params_check(const oct_params *p, const oct_setup *s, oct_error *e)
{
    return params_check_full(p, s, s && s->reference != NULL, e);
}

void oct_setup_default(oct_setup *s)
{
    memset(s, 0, sizeof *s);
    s->geom.samples = 1024;
    s->geom.ascans = 500;
    s->geom.lines = 1;
    s->geom.sample_type = OCT_SAMPLE_U16;
    s->backend = OCT_BACKEND_AUTO;
    s->precision = OCT_PRECISION_FP32;
    s->msi_path = OCT_MSI_AUTO;
}

/* ---- products ------------------------------------------------------------- */

oct_products *oct_products_create(void)
{
    return calloc(1, sizeof(oct_products));
}

void oct_products_destroy(oct_products *p)
{
    if (!p)
        return;
    if (p->priv_free) { /* engine-pool buffers (oct_engine_products_create) */
        p->priv_free(p);
        free(p);
        return;
    }
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            free(p->img[m][k].u8);
            free(p->img[m][k].f32);
            free(p->img[m][k].indices);
        }
    free(p);
}

oct_err oct_image_reserve(oct_image *img, size_t pixels, bool want_f32, size_t indices)
{
    size_t cap = img->cap_pixels;
    if (img->fixed) /* engine-pool buffers: sized for the geometry, never grown */
        return (pixels > cap || indices > img->cap_indices || (want_f32 && !img->f32 && pixels))
                   ? OCT_ESIZE : OCT_OK;
    if (pixels > cap || (want_f32 && !img->f32 && pixels)) {
        size_t ncap = pixels > cap ? pixels : cap;
        uint8_t *u8 = img->u8;
        if (pixels > cap || !u8) {
            u8 = realloc(img->u8, ncap ? ncap : 1);
            if (!u8)
                return OCT_ENOMEM;
            img->u8 = u8;
        }
        /* The f32 buffer always has the same capacity as u8 once it exists. */
        if (want_f32 || img->f32) {
            float *f = realloc(img->f32, (ncap ? ncap : 1) * sizeof(float));
            if (!f)
                return OCT_ENOMEM;
            img->f32 = f;
        }
        img->cap_pixels = ncap;
    }
    if (indices > img->cap_indices) {
        int32_t *ix = realloc(img->indices, indices * sizeof(int32_t));
        if (!ix)
            return OCT_ENOMEM;
        img->indices = ix;
        img->cap_indices = indices;
    }
    return OCT_OK;
}

/* ---- derived arrays ------------------------------------------------------- */

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

/* m~_r = IDFT(H . DFT(w . m_r)) / M in double precision, optionally scaled
 * to unit L2 norm; out: R x M floats. */
static oct_err compute_masks_filt(const oct_engine *eng, const double *w, float *out,
                                  oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, R = eng->setup.mask_count, K = M / 2 + 1;
    const int32_t F = eng->params.freq_cutoff;
    pthread_once(&fftw_once, fftw_threadsafe_init);
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

/* CMS calibration (oct_setup's comment): g[n], h[n] by least squares over
 * the K unwrapped analytic-signal phases, in double precision. */
static oct_err cms_calibrate(oct_engine *eng, oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, K = eng->setup.cms_cal_count, H = M / 2;
    const double pi = 3.14159265358979323846;
    pthread_once(&fftw_once, fftw_threadsafe_init);
    fftw_complex *a = fftw_malloc(sizeof(fftw_complex) * M);
    fftw_complex *A = fftw_malloc(sizeof(fftw_complex) * M);
    double *phi = malloc(sizeof(double) * (size_t)K * M);
    eng->cms_g = malloc(sizeof(double) * M);
    eng->cms_h = malloc(sizeof(double) * M);
    fftw_plan fwd = NULL, inv = NULL;
    oct_err err = OCT_OK;
    if (!a || !A || !phi || !eng->cms_g || !eng->cms_h) {
        err = oct_error_set(e, OCT_ENOMEM, "cms calibration: out of memory (K = %u, M = %u)", K, M);
        goto out;
    }
    fwd = fftw_plan_dft_1d((int)M, a, A, FFTW_FORWARD, FFTW_ESTIMATE);
    inv = fftw_plan_dft_1d((int)M, A, a, FFTW_BACKWARD, FFTW_ESTIMATE);
    if (!fwd || !inv) {
        err = oct_error_set(e, OCT_EBACKEND, "cms calibration: FFTW could not plan M = %u", M);
        goto out;
    }
    for (uint32_t i = 0; i < K; i++) {
        const float *c = eng->cms_cal + (size_t)i * M;
        double mean = 0;
        for (uint32_t n = 0; n < M; n++)
            mean += c[n];
        mean /= M;
        for (uint32_t n = 0; n < M; n++)
            a[n][0] = c[n] - mean, a[n][1] = 0;
        fftw_execute(fwd);
        uint32_t kp = 1;
        double best = -1;
        for (uint32_t k = 1; k < H; k++) {
            double m2 = A[k][0] * A[k][0] + A[k][1] * A[k][1];
            if (m2 > best)
                best = m2, kp = k;
        }
        if (!(best > 0)) {
            err = oct_error_set(e, OCT_EINVAL,
                                "cms calibration spectrum %u (depth %g) has no fringe (its "
                                "spectrum is 0 above DC)", i, eng->cms_depths[i]);
            goto out;
        }
        uint32_t k0 = kp / 4 > 1 ? kp / 4 : 1;
        for (uint32_t k = 0; k < M; k++)
            if (k < k0 || k >= H)
                A[k][0] = A[k][1] = 0;
        fftw_execute(inv); /* the 1/M does not change the phase */
        double *ph = phi + (size_t)i * M, prev = 0;
        for (uint32_t n = 0; n < M; n++) {
            double v = atan2(a[n][1], a[n][0]);
            if (n == 0) {
                ph[0] = prev = v;
                continue;
            }
            double d = v - prev;
            if (d > pi)
                d -= 2 * pi;
            else if (d < -pi)
                d += 2 * pi;
            ph[n] = ph[n - 1] + d;
            prev = v;
        }
    }
    /* per n: phi_i = z_i g + h, least squares over i */
    double zm = 0, szz = 0;
    for (uint32_t i = 0; i < K; i++)
        zm += eng->cms_depths[i];
    zm /= K;
    for (uint32_t i = 0; i < K; i++)
        szz += (eng->cms_depths[i] - zm) * (eng->cms_depths[i] - zm);
    for (uint32_t n = 0; n < M; n++) {
        double pm = 0, szp = 0;
        for (uint32_t i = 0; i < K; i++)
            pm += phi[(size_t)i * M + n];
        pm /= K;
        for (uint32_t i = 0; i < K; i++)
            szp += (eng->cms_depths[i] - zm) * (phi[(size_t)i * M + n] - pm);
        eng->cms_g[n] = szp / szz;
        eng->cms_h[n] = pm - eng->cms_g[n] * zm;
    }
out:
    if (fwd)
        fftw_destroy_plan(fwd);
    if (inv)
        fftw_destroy_plan(inv);
    fftw_free(a);
    fftw_free(A);
    free(phi);
    return err;
}

/* q_r[n] = w[n] (P c_r)[n], c_r = exp(-i (z_r g + h)), P the F cut-off;
 * out: 2R x M floats (Re row, Im row). */
static oct_err compute_cms_q(const oct_engine *eng, const double *w, float *out, oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, R = eng->setup.cms_count;
    const int64_t F = eng->params.freq_cutoff;
    pthread_once(&fftw_once, fftw_threadsafe_init);
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

/* Derived arrays for a set of params, built aside so that a failure leaves
 * the engine untouched. */
typedef struct derived {
    float *window, *masks_filt;
    int32_t *enface_idx[OCT_METHOD_COUNT];
    uint32_t enface_n[OCT_METHOD_COUNT];
    uint32_t klin_T;
    int32_t *klin_idx;
    float *klin_w;
    float *disp;
    float *cms_q;
} derived;

static void derived_free(derived *d)
{
    free(d->window);
    free(d->masks_filt);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        free(d->enface_idx[m]);
    free(d->klin_idx);
    free(d->klin_w);
    free(d->disp);
    free(d->cms_q);
    memset(d, 0, sizeof *d);
}

static inline int32_t clamp_idx(int64_t i, uint32_t M)
{
    return i < 0 ? 0 : i > (int64_t)M - 1 ? (int32_t)M - 1 : (int32_t)i;
}

/* Interpolation taps of oct_engine.h: weights in double, stored as float. */
static oct_err klin_build(const oct_engine *eng, derived *d, oct_error *e)
{
    const oct_params *p = &eng->params;
    const uint32_t M = eng->setup.geom.samples;
    const double pi = 3.14159265358979323846;
    if (p->klin == OCT_KLIN_OFF)
        return OCT_OK;
    const uint32_t T = p->klin == OCT_KLIN_LINEAR ? 2 : p->klin == OCT_KLIN_CUBIC ? 4
                                                                                  : (uint32_t)p->klin_taps;
    double *pos = malloc(sizeof(double) * M);
    d->klin_idx = malloc(sizeof(int32_t) * (size_t)M * T);
    d->klin_w = malloc(sizeof(float) * (size_t)M * T);
    if (!pos || !d->klin_idx || !d->klin_w) {
        free(pos);
        return oct_error_set(e, OCT_ENOMEM, "klin taps: out of memory (M = %u, T = %u)", M, T);
    }
    klin_positions_compute(p, eng->klin_positions, M, pos);
    oct_err err = klin_positions_check(pos, M, (int)p->klin_source, e);
    if (err) {
        free(pos);
        return err;
    }
    for (uint32_t n = 0; n < M; n++) {
        const double x = pos[n];
        int32_t *ix = d->klin_idx + (size_t)n * T;
        float *wt = d->klin_w + (size_t)n * T;
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
    d->klin_T = T;
    return OCT_OK;
}

/* Builds the parts named in `what` (OCT_CHG_WINDOW: window + masks,
 * OCT_CHG_CUTOFF: masks, OCT_CHG_ENFACE: index lists, OCT_CHG_KLIN/DISP/CMS)
 * for eng->params. */
static oct_err derived_build(oct_engine *eng, unsigned what, derived *d, oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, R = eng->setup.mask_count;
    const oct_params *p = &eng->params;
    oct_err err;
    memset(d, 0, sizeof *d);
    if (what & (OCT_CHG_WINDOW | OCT_CHG_CUTOFF | OCT_CHG_CMS)) {
        const uint32_t RC = eng->setup.cms_count;
        double *w = malloc(sizeof(double) * M);
        bool want_wm = what & (OCT_CHG_WINDOW | OCT_CHG_CUTOFF);
        bool want_q = RC && (what & OCT_CHG_CMS);
        if (want_wm) {
            d->window = malloc(sizeof(float) * M);
            if (R)
                d->masks_filt = malloc(sizeof(float) * (size_t)R * M);
        }
        if (want_q)
            d->cms_q = malloc(sizeof(float) * 2 * (size_t)RC * M);
        if (!w || (want_wm && (!d->window || (R && !d->masks_filt))) || (want_q && !d->cms_q)) {
            free(w);
            derived_free(d);
            return oct_error_set(e, OCT_ENOMEM,
                                 "window/masks: out of memory (R = %u, cms R = %u, M = %u)", R,
                                 RC, M);
        }
        oct_window_compute(w, M, p->window, p->window_param);
        if (want_wm) {
            for (uint32_t n = 0; n < M; n++)
                d->window[n] = (float)w[n];
            if (what & OCT_CHG_WINDOW)
                eng->rebuilds.window++;
            if (R) {
                if ((err = compute_masks_filt(eng, w, d->masks_filt, e))) {
                    free(w);
                    derived_free(d);
                    return err;
                }
                eng->rebuilds.masks++;
            }
        }
        if (want_q) {
            if ((err = compute_cms_q(eng, w, d->cms_q, e))) {
                free(w);
                derived_free(d);
                return err;
            }
            eng->rebuilds.cms++;
        }
        free(w);
    }
    if (what & OCT_CHG_ENFACE) {
        /* idx_q = start + step*q, q < count, kept only while < D.  When start >= D
         * no index is left: enface and confocal of that method are then not
         * produced (present = false) rather than published as empty images. */
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            int64_t D = eng->depths[m], n = 0;
            if (p->enface_start < D)
                n = (D - 1 - p->enface_start) / p->enface_step + 1;
            if (n > p->enface_count)
                n = p->enface_count;
            d->enface_n[m] = (uint32_t)n;
            d->enface_idx[m] = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
            if (!d->enface_idx[m]) {
                derived_free(d);
                return oct_error_set(e, OCT_ENOMEM, "en-face index list: out of memory");
            }
            for (int64_t q = 0; q < n; q++)
                d->enface_idx[m][q] = (int32_t)(p->enface_start + p->enface_step * q);
        }
        eng->rebuilds.enface++;
    }
    if (what & OCT_CHG_KLIN) {
        if ((err = klin_build(eng, d, e))) {
            derived_free(d);
            return err;
        }
        eng->rebuilds.klin++;
    }
    if ((what & OCT_CHG_DISP) && (p->disp_a2 != 0.0f || p->disp_a3 != 0.0f)) {
        d->disp = malloc(sizeof(float) * 2 * M);
        if (!d->disp) {
            derived_free(d);
            return oct_error_set(e, OCT_ENOMEM, "dispersion phase: out of memory (M = %u)", M);
        }
        const double a2 = p->disp_a2, a3 = p->disp_a3, k0 = p->disp_k0;
        for (uint32_t n = 0; n < M; n++) {
            double u = (double)n / M - k0, th = a2 * u * u + a3 * u * u * u;
            d->disp[2 * n] = (float)cos(th);
            d->disp[2 * n + 1] = (float)-sin(th);
        }
    }
    if (what & OCT_CHG_DISP)
        eng->rebuilds.disp++;
    return OCT_OK;
}

#define SWAP(T, a, b) do { T t_ = (a); (a) = (b); (b) = t_; } while (0)

/* Swaps the built parts into the engine; d then holds the old ones. */
static void derived_swap(oct_engine *eng, unsigned what, derived *d)
{
    if (what & (OCT_CHG_WINDOW | OCT_CHG_CUTOFF)) {
        SWAP(float *, eng->window, d->window);
        SWAP(float *, eng->masks_filt, d->masks_filt);
    }
    if (what & OCT_CHG_ENFACE) {
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            SWAP(int32_t *, eng->enface_idx[m], d->enface_idx[m]);
            SWAP(uint32_t, eng->enface_n[m], d->enface_n[m]);
        }
    }
    if (what & OCT_CHG_KLIN) {
        SWAP(uint32_t, eng->klin_T, d->klin_T);
        SWAP(int32_t *, eng->klin_idx, d->klin_idx);
        SWAP(float *, eng->klin_w, d->klin_w);
    }
    if (what & OCT_CHG_DISP)
        SWAP(float *, eng->disp, d->disp);
    if ((what & OCT_CHG_CMS) && eng->setup.cms_count)
        SWAP(float *, eng->cms_q, d->cms_q);
}

bool oct_product_wanted(const oct_engine *eng, int method, int kind)
{
    const oct_params *p = &eng->params;
    if (method < 0 || method >= OCT_METHOD_COUNT || kind < 0 || kind >= OCT_KIND_COUNT)
        return false;
    if (!(p->methods & OCT_METHOD_BIT(method)) || !(p->products & OCT_PRODUCT_BIT(kind)))
        return false;
    if (eng->setup.geom.lines == 1)
        return kind == OCT_KIND_BSCAN;
    switch (kind) {
    case OCT_KIND_BSCAN: return false;
    case OCT_KIND_ENFACE:
    case OCT_KIND_CONFOCAL: return eng->enface_n[method] > 0;
    default: return true;
    }
}

oct_err oct_image_prepare(const oct_engine *eng, int method, int kind, oct_image *img,
                          oct_error *e)
{
    const oct_geometry *g = &eng->setup.geom;
    const oct_params *p = &eng->params;
    const uint32_t D = eng->depths[method], N = g->ascans, L = g->lines;
    const uint32_t Q = eng->enface_n[method];
    uint32_t nidx = 0;
    img->requested = 0;
    switch (kind) {
    case OCT_KIND_BSCAN:
        img->ndim = 2, img->shape[0] = D, img->shape[1] = N, img->shape[2] = 0;
        break;
    case OCT_KIND_ENFACE:
        img->ndim = 3, img->shape[0] = Q, img->shape[1] = L, img->shape[2] = N;
        nidx = Q;
        img->requested = (uint32_t)p->enface_count;
        break;
    case OCT_KIND_CONFOCAL:
        img->ndim = 2, img->shape[0] = L, img->shape[1] = N, img->shape[2] = 0;
        nidx = Q; /* the depths summed */
        img->requested = (uint32_t)p->enface_count;
        break;
    case OCT_KIND_XSEC_H:
        img->ndim = 2, img->shape[0] = D, img->shape[1] = N, img->shape[2] = 0;
        nidx = 1;
        break;
    case OCT_KIND_XSEC_V:
        img->ndim = 2, img->shape[0] = D, img->shape[1] = L, img->shape[2] = 0;
        nidx = 1;
        break;
    case OCT_KIND_VOLUME:
        img->ndim = 3, img->shape[0] = L, img->shape[1] = N, img->shape[2] = D;
        break;
    default:
        return oct_error_set(e, OCT_EINVAL, "unknown product kind %d", kind);
    }
    size_t count = (size_t)img->shape[0] * img->shape[1] * (img->ndim == 3 ? img->shape[2] : 1);
    oct_err rc = oct_image_reserve(img, count, (p->products & OCT_PRODUCT_F32) != 0, nidx);
    if (rc == OCT_ESIZE) /* an engine-pool object made for a smaller geometry */
        return oct_error_set(e, OCT_ESIZE, "%s/%s: the products object has room for %zu pixels, "
                             "not %zu", oct_kind_name(kind), oct_method_name(method),
                             img->cap_pixels, count);
    if (rc != OCT_OK)
        return oct_error_set(e, OCT_ENOMEM, "%s/%s: out of memory for %zu pixels",
                             oct_kind_name(kind), oct_method_name(method), count);
    img->count = count;
    img->n_indices = nidx;
    if (kind == OCT_KIND_ENFACE || kind == OCT_KIND_CONFOCAL)
        memcpy(img->indices, eng->enface_idx[method], sizeof(int32_t) * Q);
    else if (kind == OCT_KIND_XSEC_H)
        img->indices[0] = p->xsec_h;
    else if (kind == OCT_KIND_XSEC_V)
        img->indices[0] = p->xsec_v;
    img->present = true;
    return OCT_OK;
}

void oct_gray_map(const float *in, uint8_t *out, size_t n, uint32_t scale, float gsc,
                  float contrast, float brightness)
{
    /* g >= 0 so truncation is floor; !(g >= 0) also catches NaN. */
    if (scale == OCT_SCALE_LOG) {
        for (size_t i = 0; i < n; i++) {
            float v = in[i];
            v = v == v ? gsc * v : 0.0f;
            float t = 20.0f * log10f(v > 1e-12f ? v : 1e-12f);
            float g = brightness + contrast * t + 0.5f;
            out[i] = !(g >= 0.0f) ? 0 : g >= 255.0f ? 255 : (uint8_t)g;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            float v = in[i];
            v = v == v ? v : 0.0f;
            float g = brightness + contrast * (gsc * v) + 0.5f;
            out[i] = !(g >= 0.0f) ? 0 : g >= 255.0f ? 255 : (uint8_t)g;
        }
    }
}

double oct_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#ifndef OCT_HAVE_CUDA
bool oct_cuda_built(void)
{
    return false;
}

oct_err oct_cuda_probe(int device, char *name, size_t name_len, oct_error *e)
{
    if (name && name_len)
        name[0] = '\0';
    return oct_error_set(e, OCT_EUNSUPPORTED, "octd was built without CUDA");
}

int oct_cuda_device_count(void) { return 0; }

int oct_engine_numa_node(const oct_engine *eng)
{
    (void)eng;
    return -1;
}
#endif

/* ---- the engine ----------------------------------------------------------- */

static oct_err check_finite(const float *a, size_t rows, uint32_t M, const char *what,
                            oct_error *e)
{
    for (size_t r = 0; r < rows; r++)
        for (uint32_t n = 0; n < M; n++)
            if (!isfinite(a[r * M + n]))
                return oct_error_set(e, OCT_EINVAL, "%s %zu, sample %u is not finite (%g)",
                                     what, r, n, (double)a[r * M + n]);
    return OCT_OK;
}

static oct_err select_backend(oct_engine *eng, oct_error *e)
{
    oct_backend b = eng->setup.backend;
    if (b == OCT_BACKEND_CPU) {
        eng->ops = &oct_cpu_backend;
        return OCT_OK;
    }
#ifdef OCT_HAVE_CUDA
    char name[128];
    oct_error pe;
    oct_err err = oct_cuda_probe(eng->setup.device, name, sizeof name, &pe);
    if (err == OCT_OK) {
        eng->ops = &oct_cuda_backend;
        return OCT_OK;
    }
    if (b == OCT_BACKEND_CUDA)
        return oct_error_set(e, OCT_EUNSUPPORTED, "backend cuda: %s", pe.msg);
    eng->ops = &oct_cpu_backend; /* AUTO: no usable device */
    return OCT_OK;
#else
    if (b == OCT_BACKEND_CUDA)
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "backend cuda: octd was built without CUDA (no nvcc at build time)");
    eng->ops = &oct_cpu_backend;
    return OCT_OK;
#endif
}

oct_err oct_engine_create(oct_engine **out, const oct_setup *setup, const oct_params *params,
                          oct_error *e)
{
    if (!out || !setup || !params)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_create: NULL argument");
    *out = NULL;
    const oct_geometry *g = &setup->geom;
    oct_err err = oct_geometry_check(g, e);
    if (err)
        return oct_error_prefix(e, err, "geometry");
    const uint32_t M = g->samples, R = setup->mask_count;
    if ((R > 0) != (setup->masks != NULL))
        return oct_error_set(e, OCT_EINVAL, "masks: mask_count = %u but masks is %s", R,
                             setup->masks ? "set" : "NULL");
    if (R > MASK_COUNT_MAX)
        return oct_error_set(e, OCT_EINVAL, "mask_count = %u: must be at most %u", R,
                             MASK_COUNT_MAX);
    if ((unsigned)setup->backend > OCT_BACKEND_CUDA)
        return oct_error_set(e, OCT_EINVAL, "backend = %d: must be 0 (auto), 1 (cpu) or 2 (cuda)",
                             (int)setup->backend);
    if ((unsigned)setup->msi_path > OCT_MSI_GEMM)
        return oct_error_set(e, OCT_EINVAL, "msi_path = %d: must be 0 (auto), 1 (fft) or 2 (gemm)",
                             (int)setup->msi_path);
    if ((unsigned)setup->precision > OCT_PRECISION_TF32)
        return oct_error_set(e, OCT_EINVAL, "precision = %d: must be 0 (fp32) or 1 (tf32)",
                             (int)setup->precision);
    if (setup->threads < 0 || setup->threads > 4096)
        return oct_error_set(e, OCT_EINVAL, "threads = %d: must be in [0, 4096] (0 = all cores)",
                             setup->threads);
    if (R && (err = check_finite(setup->masks, R, M, "mask", e)))
        return err;
    if (setup->reference && (err = check_finite(setup->reference, 1, M, "reference", e)))
        return err;
    const uint32_t RC = setup->cms_count, KC = setup->cms_cal_count;
    if (RC) {
        if (!setup->cms_cal || !setup->cms_depths)
            return oct_error_set(e, OCT_EINVAL,
                                 "cms: cms_count = %u but the calibration spectra or their "
                                 "depths are NULL", RC);
        if (RC > MASK_COUNT_MAX)
            return oct_error_set(e, OCT_EINVAL, "cms_count = %u: must be at most %u", RC,
                                 MASK_COUNT_MAX);
        if (KC < 2 || KC > MASK_COUNT_MAX)
            return oct_error_set(e, OCT_EINVAL,
                                 "cms_cal_count = %u: cms needs at least 2 calibration spectra "
                                 "(mirror depths), at most %u", KC, MASK_COUNT_MAX);
        for (uint32_t i = 0; i < KC; i++) {
            if (!isfinite(setup->cms_depths[i]))
                return oct_error_set(e, OCT_EINVAL, "cms_depths[%u] = %g: must be finite", i,
                                     setup->cms_depths[i]);
            for (uint32_t k = 0; k < i; k++)
                if (setup->cms_depths[k] == setup->cms_depths[i])
                    return oct_error_set(e, OCT_EINVAL,
                                         "cms_depths[%u] = cms_depths[%u] = %g: the calibration "
                                         "depths must be distinct", k, i, setup->cms_depths[i]);
        }
        if ((err = check_finite(setup->cms_cal, KC, M, "cms calibration spectrum", e)))
            return err;
        if (!isfinite(setup->cms_start))
            return oct_error_set(e, OCT_EINVAL, "cms_start = %g: must be finite",
                                 setup->cms_start);
        if (RC > 1 && !(isfinite(setup->cms_step) && setup->cms_step != 0.0))
            return oct_error_set(e, OCT_EINVAL,
                                 "cms_step = %g: must be finite and non-zero (cms_count = %u)",
                                 setup->cms_step, RC);
    }
    err = params_check_full(params, setup, setup->reference != NULL, e);
    if (err)
        return err;

    oct_engine *eng = calloc(1, sizeof *eng);
    if (!eng)
        return oct_error_set(e, OCT_ENOMEM, "engine: out of memory");
    eng->setup = *setup;
    eng->setup.masks = NULL;
    eng->setup.reference = NULL;
    eng->params = *params;
    eng->depths[OCT_METHOD_CFD] = M / 2 + 1;
    eng->depths[OCT_METHOD_MSI] = R;
    eng->depths[OCT_METHOD_CMS] = RC;
    eng->setup.klin_positions = NULL;
    eng->setup.cms_cal = NULL;
    eng->setup.cms_depths = NULL;
    if (!RC)
        eng->setup.cms_cal_count = 0;
    if (setup->klin_positions) {
        if (!(eng->klin_positions = malloc(sizeof(double) * M))) {
            err = oct_error_set(e, OCT_ENOMEM, "klin positions: out of memory");
            goto fail;
        }
        memcpy(eng->klin_positions, setup->klin_positions, sizeof(double) * M);
        eng->setup.klin_positions = eng->klin_positions;
    }
    if (RC) {
        eng->cms_cal = malloc(sizeof(float) * (size_t)KC * M);
        eng->cms_depths = malloc(sizeof(double) * KC);
        if (!eng->cms_cal || !eng->cms_depths) {
            err = oct_error_set(e, OCT_ENOMEM, "cms calibration: out of memory (%u x %u)", KC, M);
            goto fail;
        }
        memcpy(eng->cms_cal, setup->cms_cal, sizeof(float) * (size_t)KC * M);
        memcpy(eng->cms_depths, setup->cms_depths, sizeof(double) * KC);
        /* the set-up copy points at the engine's own arrays */
        eng->setup.cms_cal = eng->cms_cal;
        eng->setup.cms_depths = eng->cms_depths;
        if ((err = cms_calibrate(eng, e)))
            goto fail;
    }
    if (R) {
        eng->masks_raw = malloc(sizeof(float) * (size_t)R * M);
        if (!eng->masks_raw) {
            err = oct_error_set(e, OCT_ENOMEM, "masks: out of memory (%u x %u)", R, M);
            goto fail;
        }
        memcpy(eng->masks_raw, setup->masks, sizeof(float) * (size_t)R * M);
    }
    if (setup->reference) {
        eng->reference = malloc(sizeof(float) * M);
        if (!eng->reference) {
            err = oct_error_set(e, OCT_ENOMEM, "reference: out of memory");
            goto fail;
        }
        memcpy(eng->reference, setup->reference, sizeof(float) * M);
    }
    derived d;
    if ((err = derived_build(eng, OCT_CHG_ALL, &d, e)))
        goto fail;
    derived_swap(eng, OCT_CHG_ALL, &d);
    derived_free(&d);
    if ((err = select_backend(eng, e)))
        goto fail;
    if ((err = eng->ops->create(eng, e))) {
        eng->ops = NULL; /* create cleans up after itself */
        goto fail;
    }
    *out = eng;
    return OCT_OK;
fail:
    oct_engine_destroy(eng);
    return err;
}

void oct_engine_destroy(oct_engine *eng)
{
    if (!eng)
        return;
    if (eng->ops)
        eng->ops->destroy(eng);
    free(eng->masks_raw);
    free(eng->reference);
    free(eng->window);
    free(eng->masks_filt);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        free(eng->enface_idx[m]);
    free(eng->klin_idx);
    free(eng->klin_w);
    free(eng->klin_positions);
    free(eng->disp);
    free(eng->cms_g);
    free(eng->cms_h);
    free(eng->cms_q);
    free(eng->cms_cal);
    free(eng->cms_depths);
    free(eng);
}

static unsigned params_diff(const oct_params *a, const oct_params *b)
{
    unsigned c = 0;
    if (a->window != b->window || memcmp(&a->window_param, &b->window_param, sizeof(float)))
        c |= OCT_CHG_WINDOW;
    if (a->freq_cutoff != b->freq_cutoff)
        c |= OCT_CHG_CUTOFF;
    if (a->lag_lo != b->lag_lo || a->lag_hi != b->lag_hi)
        c |= OCT_CHG_LAGS;
    if (a->methods != b->methods)
        c |= OCT_CHG_METHODS;
    if (a->enface_start != b->enface_start || a->enface_step != b->enface_step ||
        a->enface_count != b->enface_count)
        c |= OCT_CHG_ENFACE;
    if (a->xsec_h != b->xsec_h || a->xsec_v != b->xsec_v)
        c |= OCT_CHG_XSEC;
    if (a->products != b->products)
        c |= OCT_CHG_PRODUCTS;
    if (a->scale != b->scale || memcmp(a->gsc, b->gsc, sizeof a->gsc) ||
        memcmp(a->contrast, b->contrast, sizeof a->contrast) ||
        memcmp(a->brightness, b->brightness, sizeof a->brightness))
        c |= OCT_CHG_GRAY;
    if (a->background != b->background || a->background_param != b->background_param)
        c |= OCT_CHG_BACKGROUND;
    if (a->klin != b->klin || a->klin_taps != b->klin_taps || a->klin_source != b->klin_source ||
        memcmp(a->klin_coef, b->klin_coef, sizeof a->klin_coef))
        c |= OCT_CHG_KLIN;
    if (memcmp(&a->disp_a2, &b->disp_a2, sizeof(float)) ||
        memcmp(&a->disp_a3, &b->disp_a3, sizeof(float)) ||
        memcmp(&a->disp_k0, &b->disp_k0, sizeof(float)))
        c |= OCT_CHG_DISP;
    if (c & (OCT_CHG_WINDOW | OCT_CHG_CUTOFF))
        c |= OCT_CHG_CMS;
    return c;
}

void oct_engine_hold_history(oct_engine *eng, bool hold)
{
    if (eng)
        eng->hold_history = hold;
}

oct_err oct_engine_set_params(oct_engine *eng, const oct_params *params, oct_error *e)
{
    if (!eng || !params)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_set_params: NULL argument");
    oct_err err = params_check_full(params, &eng->setup, eng->reference != NULL, e);
    if (err)
        return err;
    unsigned changed = params_diff(&eng->params, params);
    if (!changed)
        return OCT_OK;
    const oct_params old = eng->params;
    eng->params = *params;
    derived d;
    if ((err = derived_build(eng, changed, &d, e))) {
        eng->params = old;
        return err;
    }
    derived_swap(eng, changed, &d); /* d now holds the old arrays */
    if ((err = eng->ops->update(eng, changed, e))) {
        /* Back to the old values; the backend rebuilds what it dropped. */
        eng->params = old;
        derived_swap(eng, changed, &d);
        derived_free(&d);
        eng->ops->update(eng, changed, NULL);
        return err;
    }
    derived_free(&d);
    return OCT_OK;
}

const oct_params *oct_engine_params(const oct_engine *eng)
{
    return &eng->params;
}

const oct_setup *oct_engine_setup(const oct_engine *eng)
{
    return &eng->setup;
}

static oct_err check_frame_size(const oct_engine *eng, size_t frame_bytes, oct_error *e)
{
    uint64_t want = oct_geometry_frame_bytes(&eng->setup.geom);
    if ((uint64_t)frame_bytes != want)
        return oct_error_set(e, OCT_ESIZE,
                             "frame is %zu bytes, geometry %u x %u x %u %s needs %llu", frame_bytes,
                             eng->setup.geom.lines, eng->setup.geom.ascans,
                             eng->setup.geom.samples, oct_sample_name(eng->setup.geom.sample_type),
                             (unsigned long long)want);
    return OCT_OK;
}

oct_err oct_engine_process(oct_engine *eng, const void *frame, size_t frame_bytes,
                           oct_products *out, oct_error *e)
{
    if (!eng || !frame || !out)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_process: NULL argument");
    oct_err size_err = check_frame_size(eng, frame_bytes, e);
    if (size_err)
        return size_err;
    if (oct_engine_inflight(eng) > 0)
        return oct_error_set(e, OCT_ESTATE, "oct_engine_process: %d frame(s) in flight: "
                             "complete them first", oct_engine_inflight(eng));
    double t0 = oct_now_ms();
    memset(&eng->times, 0, sizeof eng->times);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            out->img[m][k].present = false;
    oct_err err = eng->ops->process(eng, frame, out, e);
    if (err) {
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++)
                out->img[m][k].present = false;
        return err;
    }
    eng->times.total_ms = oct_now_ms() - t0;
    if (eng->ops == &oct_cpu_backend)
        eng->times.device_ms = eng->times.total_ms;
    out->frame++;
    return OCT_OK;
}

const char *oct_engine_backend_name(const oct_engine *eng)
{
    return eng && eng->ops ? eng->ops->name : "none";
}

const char *oct_engine_device_name(const oct_engine *eng)
{
    return eng ? eng->device_name : "";
}

oct_msi_path oct_engine_msi_path(const oct_engine *eng)
{
    return eng->msi_path;
}

uint32_t oct_engine_depths(const oct_engine *eng, int method)
{
    return (method >= 0 && method < OCT_METHOD_COUNT) ? eng->depths[method] : 0;
}

void oct_engine_stage_times(const oct_engine *eng, oct_stage_times *t)
{
    *t = eng->times;
}

/* ---- pipelining and DMA (oct_engine.h); synchronous fallback of depth 1 ---- */


int oct_engine_depth(const oct_engine *eng)
{
    if (!eng || !eng->ops)
        return 0;
    return eng->ops->submit && eng->ops->depth > 0 ? eng->ops->depth : 1;
}

int oct_engine_inflight(const oct_engine *eng)
{
    if (!eng || !eng->ops)
        return 0;
    if (eng->ops->inflight)
        return eng->ops->inflight(eng);
    return eng->sync_done != NULL;
}

oct_err oct_engine_submit(oct_engine *eng, const void *frame, size_t frame_bytes,
                          oct_products *out, oct_error *e)
{
    if (!eng || !frame || !out)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_submit: NULL argument");
    oct_err err = check_frame_size(eng, frame_bytes, e);
    if (err)
        return err;
    int depth = oct_engine_depth(eng), n = oct_engine_inflight(eng);
    if (n >= depth)
        return oct_error_set(e, OCT_EAGAIN, "oct_engine_submit: %d frame(s) in flight, the "
                             "most this %s engine takes: complete one first", n, eng->ops->name);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            out->img[m][k].present = false;
    if (!eng->ops->submit) {
        /* synchronous: process now, hand it out at complete */
        if ((err = oct_engine_process(eng, frame, frame_bytes, out, e)))
            return err;
        out->ticket = ++eng->tickets;
        eng->sync_done = out;
        return OCT_OK;
    }
    out->ticket = eng->tickets + 1;
    if ((err = eng->ops->submit(eng, frame, out, e))) {
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++)
                out->img[m][k].present = false;
        return err;
    }
    eng->tickets++;
    return OCT_OK;
}

oct_err oct_engine_complete(oct_engine *eng, oct_products **done, int timeout_ms, oct_error *e)
{
    if (!eng || !done)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_complete: NULL argument");
    *done = NULL;
    if (oct_engine_inflight(eng) == 0)
        return oct_error_set(e, OCT_ESTATE, "oct_engine_complete: no frame in flight");
    if (!eng->ops->complete) {
        *done = eng->sync_done;
        eng->sync_done = NULL;
        return OCT_OK;
    }
    oct_err err = eng->ops->complete(eng, done, timeout_ms, e);
    if (!err && *done)
        (*done)->frame++;
    if (err && *done)
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++)
                (*done)->img[m][k].present = false;
    return err;
}

oct_err oct_engine_input_done(oct_engine *eng, uint64_t ticket, int timeout_ms, oct_error *e)
{
    if (!eng)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_input_done: NULL engine");
    if (ticket == 0 || ticket > eng->tickets)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_input_done: ticket %llu was never "
                             "submitted (last ticket %llu)", (unsigned long long)ticket,
                             (unsigned long long)eng->tickets);
    if (!eng->ops->input_done)
        return OCT_OK; /* read synchronously inside submit */
    return eng->ops->input_done(eng, ticket, timeout_ms, e);
}

oct_err oct_engine_register_host(oct_engine *eng, const void *ptr, size_t bytes, oct_error *e)
{
    if (!eng || !ptr || bytes == 0)
        return oct_error_set(e, OCT_EINVAL, "oct_engine_register_host: NULL pointer or 0 bytes");
    if (!eng->ops->register_host)
        return OCT_OK; /* the CPU reads any memory directly */
    return eng->ops->register_host(eng, ptr, bytes, e);
}

void oct_engine_unregister_host(oct_engine *eng, const void *ptr)
{
    if (eng && ptr && eng->ops->unregister_host)
        eng->ops->unregister_host(eng, ptr);
}

oct_products *oct_engine_products_create(oct_engine *eng, oct_error *e)
{
    return oct_engine_products_create_for(eng, OCT_PRODUCTS_KNOWN, e);
}

oct_products *oct_engine_products_create_for(oct_engine *eng, uint32_t products, oct_error *e)
{
    if (!eng) {
        oct_error_set(e, OCT_EINVAL, "oct_engine_products_create: NULL engine");
        return NULL;
    }
    oct_products *p = oct_products_create();
    if (!p) {
        oct_error_set(e, OCT_ENOMEM, "products: out of memory");
        return NULL;
    }
    if (eng->ops->products_init && eng->ops->products_init(eng, p, products, e) != OCT_OK) {
        oct_products_destroy(p);
        return NULL;
    }
    return p;
}
