/* register_live.c - live volume registration in octd (register_live.h). */
#include "register_live.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "formulas.h"
#include "oct_register.h"
#include "octd.h"

#define STORE64(field, v) __atomic_store_n(&(field), (uint64_t)(v), __ATOMIC_RELEASE)
#define STORE32(field, v) __atomic_store_n(&(field), (uint32_t)(v), __ATOMIC_RELEASE)

enum { OUT_ENFACE, OUT_CONFOCAL, OUT_SLAB, OUT_MOTION, OUT_COUNT };
static const char *const out_kind[OUT_COUNT] = {"enface_reg", "confocal_reg", "slab_mean_reg",
                                                "motion"};

typedef struct reg_method {
    oct_register *reg;
    oct_register_avg *avg;
    float *ref;     /* the reference volume (kept: new options re-plan against it) */
    float *best;    /* auto: the sharpest volume so far */
    float *shifts;  /* [L][4] */
    float *work;    /* registered volume, then the average */
    oct_image out[OUT_COUNT];
    uint64_t seq[OUT_COUNT][2];
} reg_method;

enum { WANT_NONE, WANT_SET, WANT_AUTO };

typedef struct octd_reglive {
    uint32_t L, N, D;
    int want;               /* pending `reference set|auto` */
    bool have_ref;
    uint32_t methods;       /* methods with a reference */
    oct_register_options opts;
    int32_t average;        /* reg.average of the current block */
    uint32_t auto_seen;     /* volumes scored since `reference auto` */
    double best_score;
    uint64_t best_seq;
    char last_err[256];
    double ms_sum, reg_sum; /* time per volume: all, oct_register_volume (the log line) */
    uint32_t ms_count;
    reg_method m[OCT_METHOD_COUNT];
} octd_reglive;

static void method_free(reg_method *r)
{
    oct_register_destroy(r->reg);
    oct_register_avg_destroy(r->avg);
    free(r->ref);
    free(r->best);
    free(r->shifts);
    free(r->work);
    for (int k = 0; k < OUT_COUNT; k++) {
        free(r->out[k].u8);
        free(r->out[k].f32);
        free(r->out[k].indices);
    }
    memset(r, 0, sizeof *r);
}

static void reset_all(octd_reglive *g)
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        method_free(&g->m[m]);
    g->have_ref = false;
    g->methods = 0;
    g->auto_seen = 0;
    g->best_score = -1;
}

static void set_status(octd *d, uint32_t state, uint64_t frame)
{
    STORE32(d->sb->reference_state, state);
    STORE64(d->sb->reference_frame, frame);
}

/* Logs a registration error once per distinct message. */
static void log_err(octd_reglive *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_err(octd_reglive *g, const char *fmt, ...)
{
    char buf[sizeof g->last_err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (strcmp(buf, g->last_err) != 0) {
        octd_log(LOG_ERR, "registration: %s", buf);
        snprintf(g->last_err, sizeof g->last_err, "%s", buf);
    }
}

uint32_t octd_reglive_products(const octd *d)
{
    const octd_reglive *g = d->reglive;
    if (!g || (g->want == WANT_NONE && !g->have_ref))
        return 0;
    return OCT_PRODUCT_BIT(OCT_KIND_VOLUME) | OCT_PRODUCT_F32;
}

uint32_t octd_reglive_command(octd *d, uint32_t op, char *msg, size_t len)
{
    if (!d->reglive && !(d->reglive = calloc(1, sizeof *d->reglive))) {
        snprintf(msg, len, "reference: out of memory");
        return OCT_CMDRES_FAILED;
    }
    octd_reglive *g = d->reglive;
    switch (op) {
    case OCT_REFERENCE_CLEAR:
        reset_all(g);
        g->want = WANT_NONE;
        set_status(d, OCT_REFSTATE_NONE, 0);
        snprintf(msg, len, "reference cleared");
        return OCT_CMDRES_OK;
    case OCT_REFERENCE_SET:
        g->want = WANT_SET;
        g->last_err[0] = '\0';
        if (d->mode == OCT_STATE_REVIEW) {
            d->review_dirty = true; /* the kept frame, re-processed, becomes it */
            snprintf(msg, len, "reference: the reviewed frame %" PRIu64, d->kept.info.frame_id);
        } else {
            snprintf(msg, len, "reference: the next volume");
        }
        return OCT_CMDRES_OK;
    case OCT_REFERENCE_AUTO:
        g->want = WANT_AUTO;
        g->auto_seen = 0;
        g->best_score = -1;
        g->last_err[0] = '\0';
        snprintf(msg, len, "reference: the sharpest of the next %d volumes", OCTD_REGLIVE_AUTO_K);
        return OCT_CMDRES_OK;
    default:
        snprintf(msg, len, "reference: unknown operation %u (0 set, 1 clear, 2 auto)", op);
        return OCT_CMDRES_REFUSED;
    }
}

/* Sharpness of a volume: normalised gradient energy of its en-face
 * projection P[l][n] = sum_d v along the fast axis,
 *   S = sum (P[l][n+1] - P[l][n])^2 / sum (P - mean P)^2.
 * Scale-free; defocus and blur lower it; along x because motion (which
 * tears the image along y) does not add to it. */
static double sharpness(const float *v, uint32_t L, uint32_t N, uint32_t D)
{
    double *p = malloc((size_t)L * N * sizeof *p);
    if (!p)
        return 0;
    double mean = 0;
    for (size_t i = 0; i < (size_t)L * N; i++) {
        double s = 0;
        for (uint32_t z = 0; z < D; z++)
            s += v[i * D + z];
        p[i] = s;
        mean += s;
    }
    mean /= (double)L * N;
    double grad = 0, var = 0;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t n = 0; n < N; n++) {
            double x = p[(size_t)l * N + n];
            var += (x - mean) * (x - mean);
            if (n + 1 < N) {
                double dx = p[(size_t)l * N + n + 1] - x;
                grad += dx * dx;
            }
        }
    free(p);
    return var > 0 ? grad / var : 0;
}

static oct_backend backend_of(const octd *d)
{
    return d->eng && strcmp(oct_engine_backend_name(d->eng), "cuda") == 0 ? OCT_BACKEND_CUDA
                                                                          : OCT_BACKEND_CPU;
}

static void options_of(const octd_reglive *g, const oct_params *p, oct_register_options *o)
{
    oct_register_options_default(o);
    oct_register_options_from_params(o, p);
    /* the control range allows more than a small volume can search */
    int32_t zmax = (int32_t)g->D / 2 - 1;
    if (o->search_z > zmax)
        o->search_z = zmax < 0 ? 0 : zmax;
    if (o->stripe > g->L)
        o->stripe = g->L;
}

/* (Re-)plans method m's registration against its kept reference. */
static bool plan_method(octd *d, octd_reglive *g, int m)
{
    reg_method *r = &g->m[m];
    oct_error e;
    oct_register_destroy(r->reg);
    r->reg = NULL;
    if (oct_register_create(&r->reg, g->L, g->N, g->D, &g->opts, backend_of(d), &e) != OCT_OK ||
        oct_register_set_reference(r->reg, r->ref, &e) != OCT_OK) {
        log_err(g, "%s: %s", oct_method_name(m), e.msg);
        return false;
    }
    return true;
}

static float *dup_volume(const float *v, size_t n)
{
    float *c = malloc(n * sizeof *c);
    if (c)
        memcpy(c, v, n * sizeof *c);
    return c;
}

/* Makes vol[m] (the methods present) the reference. */
static bool take_reference(octd *d, octd_reglive *g, const float *const vol[OCT_METHOD_COUNT],
                           const oct_params *p)
{
    size_t n = (size_t)g->L * g->N * g->D;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        method_free(&g->m[m]);
    g->methods = 0;
    options_of(g, p, &g->opts);
    g->average = p->reg_average;
    oct_error e;
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        if (!vol[m])
            continue;
        reg_method *r = &g->m[m];
        r->ref = dup_volume(vol[m], n);
        r->shifts = malloc((size_t)g->L * 4 * sizeof *r->shifts);
        r->work = malloc(n * sizeof *r->work);
        if (!r->ref || !r->shifts || !r->work) {
            log_err(g, "%s: out of memory for %zu-voxel volumes", oct_method_name(m), n);
            return false;
        }
        if (oct_register_avg_create(&r->avg, g->L, g->N, g->D, &e) != OCT_OK) {
            log_err(g, "%s: %s", oct_method_name(m), e.msg);
            return false;
        }
        if (!plan_method(d, g, m))
            return false;
        g->methods |= 1u << m;
    }
    g->have_ref = g->methods != 0;
    return g->have_ref;
}

static oct_gray gray_of(const oct_params *p, int cls)
{
    oct_gray gr = {p->gsc[cls], p->contrast[cls], p->brightness[cls], p->scale == OCT_SCALE_LOG};
    return gr;
}

static bool fit(oct_image *img, int ndim, const uint32_t *shape, size_t indices)
{
    img->ndim = ndim;
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (img->shape[i] = shape[i]);
    img->count = count;
    img->present = oct_image_reserve(img, count, true, indices) == OCT_OK;
    return img->present;
}

static void to_gray(oct_image *img, oct_gray gr)
{
    for (size_t i = 0; i < img->count; i++)
        img->u8[i] = oct_gray_level(img->f32[i], gr);
}

/* The en-face, confocal and slab images of the averaged volume avg. */
static void make_products(reg_method *r, const float *avg, uint32_t L, uint32_t N, uint32_t D,
                          const oct_params *p)
{
    size_t LN = (size_t)L * N;
    /* en-face indices as SPEC 2.4: start + step q, those < D */
    int32_t idx[1024];
    uint32_t q = 0;
    for (int32_t i = 0; i < p->enface_count && q < 1024; i++) {
        int64_t z = (int64_t)p->enface_start + (int64_t)p->enface_step * i;
        if (z >= 0 && z < (int64_t)D)
            idx[q++] = (int32_t)z;
    }
    oct_image *ef = &r->out[OUT_ENFACE], *cf = &r->out[OUT_CONFOCAL], *sl = &r->out[OUT_SLAB];
    uint32_t s3[3] = {q, L, N}, s2[2] = {L, N};
    ef->present = cf->present = sl->present = false;
    if (q > 0 && fit(ef, 3, s3, q) && fit(cf, 2, s2, q)) {
        memcpy(ef->indices, idx, q * sizeof *idx);
        ef->n_indices = cf->n_indices = q;
        memcpy(cf->indices, idx, q * sizeof *idx);
        ef->requested = (uint32_t)(p->enface_count > 0 ? p->enface_count : 0);
        for (size_t i = 0; i < LN; i++) {
            float s = 0;
            for (uint32_t k = 0; k < q; k++) {
                float v = avg[i * D + (uint32_t)idx[k]];
                ef->f32[(size_t)k * LN + i] = v;
                s += v;
            }
            cf->f32[i] = s;
        }
        to_gray(ef, gray_of(p, OCT_CLASS_ENFACE));
        to_gray(cf, gray_of(p, OCT_CLASS_CONFOCAL));
    }
    int64_t d0 = p->slab_start < 0 ? 0 : p->slab_start > (int64_t)D ? (int64_t)D : p->slab_start;
    int64_t d1 = p->slab_end < 0 ? 0 : p->slab_end > (int64_t)D ? (int64_t)D : p->slab_end;
    if (d1 > d0 && fit(sl, 2, s2, 2)) {
        sl->indices[0] = (int32_t)d0, sl->indices[1] = (int32_t)d1;
        sl->n_indices = 2;
        for (size_t i = 0; i < LN; i++) {
            float s = 0;
            for (int64_t z = d0; z < d1; z++)
                s += avg[i * D + (size_t)z];
            sl->f32[i] = s / (float)(d1 - d0);
        }
        to_gray(sl, gray_of(p, OCT_CLASS_ENFACE));
    }
}

static void send_outputs(octd *d, reg_method *r, int m, const octd_frame_meta *meta,
                         uint32_t averaged)
{
    octd_frame_meta mm = *meta;
    char topic[64];
    for (int k = 0; k < OUT_COUNT; k++) {
        oct_image *img = &r->out[k];
        if (!img->present)
            continue;
        mm.averaged = k == OUT_MOTION ? 0 : averaged;
        for (int f32 = 0; f32 < 2; f32++) {
            /* motion is float32 only; the others as the products ask */
            if (k == OUT_MOTION ? !f32 : f32 && !meta->want_f32)
                continue;
            snprintf(topic, sizeof topic, "%s/%s%s", out_kind[k], oct_method_name(m),
                     f32 && k != OUT_MOTION ? "/f32" : "");
            d->published += octd_pub_send_image(d->pub, topic, out_kind[k], m, img, f32 != 0,
                                                r->seq[k][f32]++, &mm, &d->drops);
        }
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void octd_reglive_frame(octd *d, oct_products *prod, const octd_frame_meta *meta)
{
    octd_reglive *g = d->reglive;
    if (!g || (g->want == WANT_NONE && !g->have_ref))
        return;
    const oct_params *p = &d->params;
    const float *vol[OCT_METHOD_COUNT] = {0};
    uint32_t L = 0, N = 0, D = 0;
    bool any = false;
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        const oct_image *img = &prod->img[m][OCT_KIND_VOLUME];
        if (!img->present || !img->f32 || img->ndim != 3)
            continue;
        if (any && (img->shape[0] != L || img->shape[1] != N || img->shape[2] != D))
            continue;
        L = img->shape[0], N = img->shape[1], D = img->shape[2];
        vol[m] = img->f32;
        any = true;
    }
    if (!any) {
        log_err(g, "no volume intensities in this frame (a B-scan ring, or the engine "
                   "made no volume): registration needs volume frames (lines >= 2)");
        return;
    }
    if (g->have_ref && (L != g->L || N != g->N || D != g->D)) {
        octd_log(LOG_WARNING, "registration: the geometry changed (%ux%ux%u -> %ux%ux%u): "
                              "reference cleared", g->L, g->N, g->D, L, N, D);
        reset_all(g);
        set_status(d, OCT_REFSTATE_NONE, 0);
    }
    if (L < 2 || N < 8 || D < 8) {
        log_err(g, "volume %ux%ux%u too small to register (need L >= 2, N >= 8, D >= 8)", L, N, D);
        return;
    }
    g->L = L, g->N = N, g->D = D;

    if (g->want == WANT_SET || g->want == WANT_AUTO) {
        bool now = g->want == WANT_SET;
        if (g->want == WANT_AUTO) {
            int first = vol[OCT_METHOD_CFD] ? OCT_METHOD_CFD : OCT_METHOD_MSI;
            double s = sharpness(vol[first], L, N, D);
            size_t n = (size_t)L * N * D;
            if (s > g->best_score) {
                g->best_score = s;
                g->best_seq = meta->frame_seq;
                for (int m = 0; m < OCT_METHOD_COUNT; m++) {
                    reg_method *r = &g->m[m];
                    if (!vol[m])
                        continue;
                    if (!r->best && !(r->best = malloc(n * sizeof *r->best))) {
                        log_err(g, "out of memory for the auto reference");
                        return;
                    }
                    memcpy(r->best, vol[m], n * sizeof *r->best);
                }
            }
            now = ++g->auto_seen >= OCTD_REGLIVE_AUTO_K;
        }
        if (now) {
            bool aut = g->want == WANT_AUTO;
            float *best[OCT_METHOD_COUNT] = {0};
            const float *src[OCT_METHOD_COUNT] = {0};
            for (int m = 0; m < OCT_METHOD_COUNT; m++) {
                best[m] = g->m[m].best; /* take_reference frees the methods */
                g->m[m].best = NULL;
                src[m] = aut ? (vol[m] ? best[m] : NULL) : vol[m];
            }
            uint64_t seq = aut ? g->best_seq : meta->frame_seq;
            g->want = WANT_NONE;
            bool ok = take_reference(d, g, src, p);
            for (int m = 0; m < OCT_METHOD_COUNT; m++)
                free(best[m]);
            if (!ok) {
                reset_all(g);
                set_status(d, OCT_REFSTATE_NONE, 0);
                return;
            }
            set_status(d, aut ? OCT_REFSTATE_AUTO : OCT_REFSTATE_SET, seq);
            octd_log(LOG_INFO, "registration: reference %s, frame_seq %" PRIu64 " (%ux%ux%u, %s)",
                     aut ? "chosen (sharpest of the last volumes)" : "set", seq, L, N, D,
                     oct_register_backend_name(g->m[__builtin_ctz(g->methods)].reg));
        }
        if (!g->have_ref)
            return;
    }

    if (!g->have_ref)
        return; /* cleared by a new geometry: nothing to register against */

    /* live control values: re-plan on a new stripe/search, restart the average */
    oct_register_options o;
    options_of(g, p, &o);
    bool replan = o.stripe != g->opts.stripe || o.search_xy != g->opts.search_xy ||
                  o.search_z != g->opts.search_z;
    g->opts = o;
    if (replan)
        octd_log(LOG_INFO, "registration: re-planned: stripe %u, search_xy %g, search_z %d", o.stripe,
                 (double)o.search_xy, o.search_z);
    bool restart = p->reg_average != g->average;
    g->average = p->reg_average;
    uint64_t t0 = now_ns();
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        reg_method *r = &g->m[m];
        if (!(g->methods & (1u << m)) || !vol[m])
            continue;
        if (replan && !plan_method(d, g, m))
            continue;
        oct_error e;
        uint64_t t1 = now_ns();
        oct_err rc = oct_register_volume(r->reg, vol[m], r->shifts, &e);
        g->reg_sum += (double)(now_ns() - t1) / 1e6;
        if (rc != OCT_OK) {
            log_err(g, "%s: %s", oct_method_name(m), e.msg);
            continue;
        }
        uint32_t s2[2] = {L, 4};
        if (fit(&r->out[OUT_MOTION], 2, s2, 0))
            memcpy(r->out[OUT_MOTION].f32, r->shifts, (size_t)L * 4 * sizeof(float));
        if (oct_register_reconstruct(L, N, D, vol[m], r->shifts, r->work, &e) != OCT_OK) {
            log_err(g, "%s: %s", oct_method_name(m), e.msg);
            continue;
        }
        if (restart || oct_register_avg_count(r->avg) >= (uint32_t)(g->average > 0 ? g->average : 1))
            oct_register_avg_reset(r->avg);
        oct_register_avg_add(r->avg, r->work);
        oct_register_avg_get(r->avg, r->work);
        make_products(r, r->work, L, N, D, p);
        send_outputs(d, r, m, meta, oct_register_avg_count(r->avg));
    }
    g->ms_sum += (double)(now_ns() - t0) / 1e6;
    if (++g->ms_count == 20) {
        octd_log(LOG_INFO, "registration: %.1f ms per volume, %.1f of them oct_register_volume "
                           "(%ux%ux%u, mean of 20)", g->ms_sum / 20, g->reg_sum / 20, L, N, D);
        g->ms_sum = g->reg_sum = 0, g->ms_count = 0;
    }
}

void octd_reglive_free(octd *d)
{
    if (!d->reglive)
        return;
    reset_all(d->reglive);
    free(d->reglive);
    d->reglive = NULL;
}
