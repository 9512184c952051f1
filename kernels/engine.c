/* engine.c - the backend-neutral part of the OCT engine (SPEC section 2):
 * names, parameter defaults and validation, products, the engine object.
 * Everything derived from the control values is planned by plan.c; the
 * backends (engine_cpu.c, engine_cuda.cu) execute plans frame by frame. */
#include "engine_internal.h"
#include "formulas.h"

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

const char *oct_window_name(int window)
{
    static const char *const names[OCT_WINDOW_COUNT] = {"rect",     "hann",     "hamming",
                                                        "blackman", "gaussian", "tukey"};
    return (window >= 0 && window < OCT_WINDOW_COUNT) ? names[window] : "unknown";
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

/* Messages name the keys as operators type them (SPEC 10.1: octctl set,
 * the profile), e.g. "window: tukey parameter 1.5 is outside [0, 1]". */
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
                             "methods = 0x%x: not a non-empty set of cfd (0x1), msi (0x2), "
                             "cms (0x4)", p->methods);
    if ((p->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) && mask_count == 0)
        return oct_error_set(e, OCT_EINVAL,
                             "methods: msi needs masks, and none were loaded (msi.masks)");
    if (p->window >= OCT_WINDOW_COUNT)
        return oct_error_set(e, OCT_EINVAL,
                             "window: %u is not a window (0 rect .. 5 tukey)", p->window);
    if (!isfinite(p->window_param))
        return oct_error_set(e, OCT_EINVAL, "window.param: %g is not finite",
                             (double)p->window_param);
    if (p->window == OCT_WINDOW_GAUSSIAN && !(p->window_param > 0.0f))
        return oct_error_set(e, OCT_EINVAL,
                             "window.param: gaussian sigma %g must be > 0 (a fraction of samples)",
                             (double)p->window_param);
    if (p->window == OCT_WINDOW_TUKEY && !(p->window_param >= 0.0f && p->window_param <= 1.0f))
        return oct_error_set(e, OCT_EINVAL,
                             "window: tukey parameter %g is outside [0, 1] (window.param)",
                             (double)p->window_param);
    if (p->freq_cutoff < 0 || p->freq_cutoff > half)
        return oct_error_set(e, OCT_EINVAL,
                             "freq_cutoff = %d is outside [0, %d] (0 <= F <= samples/2)",
                             p->freq_cutoff, half);
    if (p->lag_lo <= -half || p->lag_lo >= half || p->lag_hi <= -half || p->lag_hi >= half)
        return oct_error_set(e, OCT_EINVAL,
                             "lag_window: [%d, %d] is outside [%d, %d] (-samples/2 < W1 <= W2 < "
                             "samples/2)", p->lag_lo, p->lag_hi, -half + 1, half - 1);
    if (p->lag_lo > p->lag_hi)
        return oct_error_set(e, OCT_EINVAL, "lag_window: [%d, %d] must have W1 <= W2",
                             p->lag_lo, p->lag_hi);
    if (p->scale > OCT_SCALE_LOG)
        return oct_error_set(e, OCT_EINVAL, "scale: %u is not linear (0) or log (1)", p->scale);
    if (p->background > OCT_BG_FPN)
        return oct_error_set(e, OCT_EINVAL,
                             "background: %u is not none (0), reference (1), frame_mean (2), "
                             "rolling (3) or fpn (4)", p->background);
    if (p->background == OCT_BG_ROLLING &&
        (p->background_param < 1 || p->background_param > OCT_ROLLING_MAX))
        return oct_error_set(e, OCT_EINVAL,
                             "background.param: rolling window %d is outside [1, %d] frames",
                             p->background_param, OCT_ROLLING_MAX);
    if (p->background == OCT_BG_FPN &&
        (p->background_param < 2 || p->background_param > OCT_FPN_SEGMENT_MAX))
        return oct_error_set(e, OCT_EINVAL,
                             "background.param: fpn segment %d is outside [2, %d] spectra",
                             p->background_param, OCT_FPN_SEGMENT_MAX);
    if (p->background == OCT_BG_REFERENCE && !have_reference)
        return oct_error_set(e, OCT_EINVAL,
                             "background: reference: no reference spectrum was loaded "
                             "(background.reference)");
    if (p->enface_start < 0)
        return oct_error_set(e, OCT_EINVAL, "enface.start: %d must be >= 0", p->enface_start);
    if (p->enface_step < 1)
        return oct_error_set(e, OCT_EINVAL, "enface.step: %d must be >= 1", p->enface_step);
    if (p->enface_count < 1 || p->enface_count > ENFACE_COUNT_MAX)
        return oct_error_set(e, OCT_EINVAL, "enface.count: %d is outside [1, %d]",
                             p->enface_count, ENFACE_COUNT_MAX);
    /* the indices matter only for the cross-sections asked for, which exist
     * for volume frames only (issue 14: a B-scan ring with a volume profile) */
    bool xh = g->lines > 1 && (p->products & OCT_PRODUCT_BIT(OCT_KIND_XSEC_H));
    bool xv = g->lines > 1 && (p->products & OCT_PRODUCT_BIT(OCT_KIND_XSEC_V));
    if (p->xsec_h < 0 || (xh && (uint32_t)p->xsec_h >= g->lines))
        return oct_error_set(e, OCT_EINVAL, "xsec.h_index: %d is outside [0, %u] (a line index < lines)",
                             p->xsec_h, g->lines - 1);
    if (p->xsec_v < 0 || (xv && (uint32_t)p->xsec_v >= g->ascans))
        return oct_error_set(e, OCT_EINVAL,
                             "xsec.v_index: %d is outside [0, %u] (an A-scan index < ascans)",
                             p->xsec_v, g->ascans - 1);
    for (int c = 0; c < OCT_CLASS_COUNT; c++) {
        /* gsc <= 0 maps every intensity to black (linear) or to one level (log) */
        if (!isfinite(p->gsc[c]) || !(p->gsc[c] > 0.0f))
            return oct_error_set(e, OCT_EINVAL, "display.%s.gsc: %g must be finite and > 0",
                                 class_names[c], (double)p->gsc[c]);
        if (!isfinite(p->contrast[c]))
            return oct_error_set(e, OCT_EINVAL, "display.%s.contrast: %g is not finite",
                                 class_names[c], (double)p->contrast[c]);
        if (!isfinite(p->brightness[c]))
            return oct_error_set(e, OCT_EINVAL, "display.%s.brightness: %g is not finite",
                                 class_names[c], (double)p->brightness[c]);
    }
    if (p->products & ~OCT_PRODUCTS_KNOWN)
        return oct_error_set(e, OCT_EINVAL,
                             "products: 0x%x has unknown bits 0x%x (known: 0x%x)",
                             p->products, p->products & ~OCT_PRODUCTS_KNOWN, OCT_PRODUCTS_KNOWN);
    if (p->klin > OCT_KLIN_SINC)
        return oct_error_set(e, OCT_EINVAL,
                             "klin: %u is not off (0), linear (1), cubic (2) or sinc (3)", p->klin);
    if (p->klin == OCT_KLIN_SINC &&
        (p->klin_taps < OCT_SINC_TAPS_MIN || p->klin_taps > OCT_SINC_TAPS_MAX))
        return oct_error_set(e, OCT_EINVAL, "klin.taps: sinc length %d is outside [%d, %d]",
                             p->klin_taps, OCT_SINC_TAPS_MIN, OCT_SINC_TAPS_MAX);
    if (p->klin_source > OCT_KLIN_FILE)
        return oct_error_set(e, OCT_EINVAL, "klin.source: %u is not poly (0) or file (1)",
                             p->klin_source);
    for (int i = 0; i < 4; i++)
        if (!isfinite(p->klin_coef[i]))
            return oct_error_set(e, OCT_EINVAL, "klin.c%d: %g is not finite", i, p->klin_coef[i]);
    if (!isfinite(p->disp_a2))
        return oct_error_set(e, OCT_EINVAL, "dispersion.a2: %g is not finite (radians)",
                             (double)p->disp_a2);
    if (!isfinite(p->disp_a3))
        return oct_error_set(e, OCT_EINVAL, "dispersion.a3: %g is not finite (radians)",
                             (double)p->disp_a3);
    if (!(p->disp_k0 >= -1.0f && p->disp_k0 <= 2.0f))
        return oct_error_set(e, OCT_EINVAL,
                             "dispersion.k0: %g is outside [-1, 2] (a fraction of samples)",
                             (double)p->disp_k0);
    /* slabs (SPEC 10.2): the range clamped to [0, D] of each method must
     * not be empty when a slab is asked for (R = 0 depths of a method
     * without masks is refused above) */
    if (g->lines > 1 && (p->products & (OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) |
                                        OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX)))) {
        const uint32_t Ds[2] = {(uint32_t)half + 1, mask_count};
        for (int m = 0; m < 2; m++) {
            if (!(p->methods & OCT_METHOD_BIT(m)))
                continue;
            int32_t d0, d1;
            oct_slab_range(p, Ds[m], &d0, &d1);
            if (d1 <= d0)
                return oct_error_set(e, OCT_EINVAL,
                                     "slab.start = %d, slab.end = %d: clamped to [0, %u] (%s "
                                     "depths) the slab [%d, %d) is empty: slab.end must be > "
                                     "slab.start", p->slab_start, p->slab_end, Ds[m],
                                     oct_method_name(m), d0, d1);
        }
    }
    /* angiography (SPEC 10.3; angio.h has the same limits) */
    if (p->angio_metrics & ~0x1fu)
        return oct_error_set(e, OCT_EINVAL,
                             "angio.metrics = 0x%x: not a set of struct (0x1), median (0x2), sv "
                             "(0x4), decor (0x8), ssada (0x10)", p->angio_metrics);
    /* the band and alignment values matter (and are checked) only when a
     * metric is asked for: blocks of writers that predate them hold zeros */
    if (p->angio_metrics) {
        if (p->angio_bands < 1 || p->angio_bands > 16)
            return oct_error_set(e, OCT_EINVAL, "angio.bands = %d: must be in [1, 16]", p->angio_bands);
        if (!(p->angio_band_width > 0.0f && p->angio_band_width <= 4.0f))
            return oct_error_set(e, OCT_EINVAL, "angio.band_width = %g: must be in (0, 4]",
                                 (double)p->angio_band_width);
        if (p->angio_align > 2)
            return oct_error_set(e, OCT_EINVAL,
                                 "angio.align = %u: must be 0 (off), 1 (axial) or 2 (axial+lateral)",
                                 p->angio_align);
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
                             "methods: cms needs a calibration and a depth grid (cms_count = 0)");
    if ((p->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) && s->geom.lines > 1 &&
        (p->products & (OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX)))) {
        int32_t d0, d1;
        oct_slab_range(p, s->cms_count, &d0, &d1);
        if (d1 <= d0)
            return oct_error_set(e, OCT_EINVAL,
                                 "slab.start = %d, slab.end = %d: clamped to [0, %u] (cms depths) "
                                 "the slab [%d, %d) is empty: slab.end must be > slab.start",
                                 p->slab_start, p->slab_end, s->cms_count, d0, d1);
    }
    if (p->klin == OCT_KLIN_OFF)
        return OCT_OK;
    const uint32_t M = s->geom.samples;
    if (p->klin_source == OCT_KLIN_FILE && !s->klin_positions)
        return oct_error_set(e, OCT_EINVAL,
                             "klin.source: file: no k-linearisation positions were loaded");
    double *pos = malloc(sizeof(double) * M);
    if (!pos)
        return oct_error_set(e, OCT_ENOMEM, "klin positions: out of memory (M = %u)", M);
    oct_klin_positions(p, s->klin_positions, M, pos);
    err = oct_klin_positions_check(pos, M, (int)p->klin_source, e);
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

/* CMS calibration (oct_setup's comment): g[n], h[n] by least squares over
 * the K unwrapped analytic-signal phases, in double precision. */
static oct_err cms_calibrate(oct_engine *eng, oct_error *e)
{
    const uint32_t M = eng->setup.geom.samples, K = eng->setup.cms_cal_count, H = M / 2;
    const double pi = 3.14159265358979323846;
    oct_fftw_init_once();
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

bool oct_product_wanted(const oct_engine *eng, int method, int kind)
{
    return eng->plan && oct_plan_layout(eng->plan, method, kind) != NULL;
}

oct_err oct_image_prepare(const oct_engine *eng, int method, int kind, oct_image *img,
                          oct_error *e)
{
    const oct_plan *pl = eng->plan;
    const oct_params *p = &pl->params;
    const oct_layout *r = oct_plan_layout(pl, method, kind);
    if (!r)
        return oct_error_set(e, OCT_EINVAL, "%s/%s is not produced for these values",
                             oct_kind_name(kind), oct_method_name(method));
    const oct_kind_info *k = oct_kind_info_of(kind);
    const uint32_t Q = pl->enface_n[method];
    uint32_t nidx = 0;
    img->requested = 0;
    img->ndim = (int)r->ndim;
    memcpy(img->shape, r->shape, sizeof img->shape);
    switch (k->index) {
    case OCT_INDEX_ENFACE: nidx = Q, img->requested = (uint32_t)p->enface_count; break;
    case OCT_INDEX_XSEC_H:
    case OCT_INDEX_XSEC_V: nidx = 1; break;
    case OCT_INDEX_RANGE: nidx = 2; break;
    default: break;
    }
    const size_t count = r->count;
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
    switch (k->index) {
    case OCT_INDEX_ENFACE: memcpy(img->indices, pl->enface_idx[method], sizeof(int32_t) * Q); break;
    case OCT_INDEX_XSEC_H:
    case OCT_INDEX_XSEC_V: img->indices[0] = r->sel; break;
    case OCT_INDEX_RANGE: img->indices[0] = r->d0, img->indices[1] = r->d1; break;
    default: break;
    }
    img->present = true;
    return OCT_OK;
}

void oct_gray_map(const float *in, uint8_t *out, size_t n, uint32_t scale, float gsc,
                  float contrast, float brightness)
{
    /* two loops, so that each inlines the formula with a constant scale */
    if (scale == OCT_SCALE_LOG) {
        const oct_gray g = {gsc, contrast, brightness, 1};
        for (size_t i = 0; i < n; i++)
            out[i] = oct_gray_level(in[i], g);
    } else {
        const oct_gray g = {gsc, contrast, brightness, 0};
        for (size_t i = 0; i < n; i++)
            out[i] = oct_gray_level(in[i], g);
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

oct_err oct_engine_pci_bus_id(const oct_engine *eng, char *bus, size_t len, oct_error *e)
{
    if (bus && len)
        bus[0] = '\0';
    return oct_error_set(e, OCT_EUNSUPPORTED, "%s engine: no PCI device",
                         eng ? oct_engine_backend_name(eng) : "no");
}

oct_err oct_cuda_pci_bus_id(int device, char *bus, size_t len, oct_error *e)
{
    if (bus && len)
        bus[0] = '\0';
    return oct_error_set(e, OCT_EUNSUPPORTED, "cuda device %d: octd was built without CUDA",
                         device);
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

/* Angiography on CUDA (angio_cuda.cu): its CFD magnitudes come from x~
 * without numerical dispersion: refuse that there rather than differ from
 * the CPU. */
static oct_err angio_backend_check(const oct_engine *eng, const oct_params *p, oct_error *e)
{
    if (eng->ops == &oct_cpu_backend || eng->setup.repeats < 2 || !p->angio_metrics ||
        !(p->methods & OCT_METHOD_BIT(OCT_METHOD_CFD)))
        return OCT_OK;
    if (p->disp_a2 != 0.0f || p->disp_a3 != 0.0f)
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "angio.metrics = 0x%x with dispersion (a2 = %g, a3 = %g): made by the "
                             "cpu backend only (backend %s)", p->angio_metrics,
                             (double)p->disp_a2, (double)p->disp_a3, eng->ops->name);
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
    const oct_cuda_tuning *ct = &setup->cuda;
    if ((unsigned)ct->gemm > OCT_CUDA_GEMM_3XFP16)
        return oct_error_set(e, OCT_EINVAL, "cuda.gemm = %d: must be 0 (auto), 1 (sgemm), 2 (3xtf32) or 3 (3xfp16)",
                             ct->gemm);
    if (ct->parts < 0 || ct->parts > 8)
        return oct_error_set(e, OCT_EINVAL, "cuda.parts = %d: must be in [0, 8] (0 = auto, 1 = off)",
                             ct->parts);
    if (ct->parts_ext < 0 || ct->parts_ext > 3)
        return oct_error_set(e, OCT_EINVAL, "cuda.parts_ext = %d: must be 0 (auto), 1 (ext), 2 (off) or 3 (msi)",
                             ct->parts_ext);
    if (ct->sink < 0 || ct->sink > 2)
        return oct_error_set(e, OCT_EINVAL, "cuda.sink = %d: must be 0 (tile), 1 (warp) or 2 (tile-reg)",
                             ct->sink);
    if (ct->gemm_algo < 0 || ct->gemm_algo > 1)
        return oct_error_set(e, OCT_EINVAL, "cuda.gemm_algo = %d: must be 0 (default) or 1 (auto)",
                             ct->gemm_algo);
    if (ct->graph < 0 || ct->graph > 2)
        return oct_error_set(e, OCT_EINVAL, "cuda.graph = %d: must be 0 (auto), 1 (off) or 2 (on)", ct->graph);
    if (ct->disp < 0 || ct->disp > 2)
        return oct_error_set(e, OCT_EINVAL, "cuda.disp = %d: must be 0 (auto: cufft), 1 (cufft) or 2 (fused)",
                             ct->disp);
    if (ct->cfd < 0 || ct->cfd > 2)
        return oct_error_set(e, OCT_EINVAL, "cuda.cfd = %d: must be 0 (auto), 1 (fft) or 2 (gemm)", ct->cfd);
    if (ct->disp_chunk < 0)
        return oct_error_set(e, OCT_EINVAL, "cuda.disp_chunk = %lld: must be >= 0 (0 = auto)",
                             (long long)ct->disp_chunk);
    if (ct->c2r_batch < 0 || !isfinite(ct->gemm_chunk_mb))
        return oct_error_set(e, OCT_EINVAL, "cuda.c2r_batch = %lld, cuda.gemm_chunk_mb = %g: the "
                             "batch must be >= 0, the chunk finite", (long long)ct->c2r_batch,
                             ct->gemm_chunk_mb);
    if (ct->angio_path < 0 || ct->angio_path > 2 || ct->angio_chunk < 0 ||
        ct->angio_chunk > (int64_t)UINT32_MAX)
        return oct_error_set(e, OCT_EINVAL, "cuda.angio_path = %d, cuda.angio_chunk = %lld: the "
                             "path must be 0 (bands), 1 (legacy) or 2 (fused), the chunk in "
                             "[0, %u] spectra",
                             ct->angio_path, (long long)ct->angio_chunk, UINT32_MAX);
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
    if (setup->repeats > 1 && (setup->repeats > 64 || g->lines % setup->repeats))
        return oct_error_set(e, OCT_EINVAL,
                             "geometry.repeats = %u: must be at most 64 and divide geometry.lines "
                             "= %u", setup->repeats, g->lines);
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
    if ((err = select_backend(eng, e)) || (err = angio_backend_check(eng, params, e)))
        goto fail;
    if ((err = oct_plan_build(eng, params, NULL, &eng->plan, e)))
        goto fail;
    eng->msi_path = eng->plan->msi_path;
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
    oct_plan_free(eng->plan);
    free(eng->klin_positions);
    free(eng->cms_g);
    free(eng->cms_h);
    free(eng->cms_cal);
    free(eng->cms_depths);
    free(eng);
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
    if (!err)
        err = angio_backend_check(eng, params, e);
    if (err)
        return err;
    /* The new plan shares every array whose inputs did not change; on any
     * failure eng->plan stays as it was. */
    oct_plan *np;
    if ((err = oct_plan_build(eng, params, eng->plan, &np, e)))
        return err;
    if ((err = eng->ops->prepare(eng, np, e))) {
        oct_plan_free(np);
        return err;
    }
    oct_plan_free(eng->plan);
    eng->plan = np;
    eng->params = *params;
    eng->msi_path = np->msi_path;
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
    if (eng->ops->host_timing)
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

/* Lays every image of the geometry at its largest (the kinds in `products`,
 * f32 copies with OCT_PRODUCT_F32, the angiography kinds of the set-up)
 * out from base, 64-byte aligned; returns the bytes.  p NULL: only counts. */
static size_t products_layout(const oct_engine *eng, oct_products *p, uint32_t products, uint8_t *base)
{
    bool f32 = (products & OCT_PRODUCT_F32) != 0 || eng->ops->f32_always;
    size_t off = 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        uint32_t D = eng->depths[m];
        if (D == 0)
            continue;
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            /* angiography kinds: chosen by angio.metrics, not by product bits */
            size_t cap = (products & oct_kind_bit(k)) || k >= OCT_KIND_ANGIO_FIRST
                             ? oct_kind_cap_setup(&eng->setup, m, D, k)
                             : 0;
            if (cap == 0)
                continue;
            size_t nidx = oct_kind_cap_indices(D, k);
            size_t of = off, ou = of + (f32 ? cap * sizeof(float) : 0);
            size_t oi = (ou + cap + 63) & ~(size_t)63;
            off = (oi + nidx * sizeof(int32_t) + 63) & ~(size_t)63;
            if (!p)
                continue;
            oct_image *img = &p->img[m][k];
            img->f32 = f32 ? (float *)(base + of) : NULL;
            img->u8 = base + ou;
            img->indices = nidx ? (int32_t *)(base + oi) : NULL;
            img->cap_pixels = cap;
            img->cap_indices = nidx;
        }
    }
    if (p) /* every image, also those with no room: never reallocated */
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++)
                p->img[m][k].fixed = true;
    return off;
}

size_t oct_engine_products_bytes(const oct_engine *eng, uint32_t products)
{
    return eng ? products_layout(eng, NULL, products, NULL) : 0;
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
    size_t bytes = products_layout(eng, NULL, products, NULL);
    if (eng->ops->products_alloc && bytes > 0) {
        if (eng->ops->products_alloc(eng, p, bytes, e) != OCT_OK) {
            oct_products_destroy(p);
            return NULL;
        }
        products_layout(eng, p, products, p->priv);
        p->pinned = true;
    }
    return p;
}

static void products_keep_mem(oct_products *p) { (void)p; /* the caller's memory */ }

oct_products *oct_engine_products_create_in(oct_engine *eng, uint32_t products, void *mem,
                                            size_t bytes, oct_error *e)
{
    if (!eng || !mem) {
        oct_error_set(e, OCT_EINVAL, "oct_engine_products_create_in: NULL engine or memory");
        return NULL;
    }
    size_t need = products_layout(eng, NULL, products, NULL);
    if (need == 0 || bytes < need) {
        oct_error_set(e, OCT_ESIZE, "products: %zu bytes of memory, these products need %zu",
                      bytes, need);
        return NULL;
    }
    if ((uintptr_t)mem % 64) {
        oct_error_set(e, OCT_EINVAL, "products: memory at %p is not 64-byte aligned", mem);
        return NULL;
    }
    oct_products *p = oct_products_create();
    if (!p) {
        oct_error_set(e, OCT_ENOMEM, "products: out of memory");
        return NULL;
    }
    if (eng->ops->products_adopt) {
        if (eng->ops->products_adopt(eng, p, mem, bytes, e) != OCT_OK) {
            free(p);
            return NULL;
        }
        p->pinned = true;
    } else {
        p->priv = mem;
        p->priv_free = products_keep_mem;
    }
    products_layout(eng, p, products, mem);
    return p;
}
