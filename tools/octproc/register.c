/* register.c - octproc --register (SPEC 10.4): registers a stack of target
 * volumes against a reference volume and writes, directly in DIR:
 *   shifts.npy      float32 [V][L][4] (dx, dy, dz, valid 0/1; NaN where invalid)
 *   registered.npy  float32 [V][L][N][D] on the reference grid (NaN: no data)
 *   average.npy     float32 [L][N][D] mean of the finite registered values
 *   before_slow.png, after_slow.png    slow-axis cut [D][L] at A-scan N/2 of
 *                   the plain mean of the targets / of average.npy
 *   before_cscan.png, after_cscan.png  en-face mean over depth [L][N]
 * Inputs: float32 intensity volumes [L][N][D] / [V][L][N][D] (--intensity),
 * or raw frames (L, N, M) / (V, L, N, M) processed through --profile into
 * the float intensities of its first method. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oct_config.h"
#include "oct_control_keys.h"
#include "oct_register.h"
#include "octproc.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Volumes of one file as float32 [K][L][N][D] (K = 1 for a single one). */
typedef struct vols {
    uint64_t K, L, N, D;
    float *v; /* owned */
} vols;

static oct_err load_intensity(const char *path, bool stack, vols *out, oct_error *e)
{
    oct_array a = {0};
    oct_err err = oct_npy_load(path, &a, e);
    if (err)
        return err;
    if (a.dtype != OCT_DTYPE_F32) {
        err = oct_error_set(e, OCT_EINVAL, "%s: dtype %s: --intensity volumes must be float32", path,
                            oct_dtype_name(a.dtype));
    } else if (a.ndim != (stack ? 4 : 3) && !(stack && a.ndim == 3)) {
        err = oct_error_set(e, OCT_EINVAL, "%s: a %d-dimensional array: expected %s", path, a.ndim,
                            stack ? "[V][L][N][D] (or one [L][N][D])" : "[L][N][D]");
    } else {
        int o = a.ndim == 4;
        out->K = o ? a.shape[0] : 1;
        out->L = a.shape[o], out->N = a.shape[o + 1], out->D = a.shape[o + 2];
        out->v = a.data;
        a.data = NULL;
        for (uint64_t i = 0; i < a.count && !err; i++)
            if (!isfinite(out->v[i]) || out->v[i] < 0) {
                uint64_t d = i % out->D, n = i / out->D % out->N, l = i / out->D / out->N % out->L,
                         k = i / out->D / out->N / out->L;
                err = oct_error_set(e, OCT_EINVAL,
                                    "%s: volume %llu, line %llu, A-scan %llu, depth %llu: %g is not a "
                                    "finite non-negative intensity", path, (unsigned long long)k,
                                    (unsigned long long)l, (unsigned long long)n,
                                    (unsigned long long)d, (double)out->v[i]);
            }
        if (err) {
            free(out->v);
            out->v = NULL;
        }
    }
    oct_array_free(&a);
    return err;
}

/* Raw frames through the engine: the float intensities of the profile's first method. */
static oct_err load_frames(const char *path, const oct_profile *prof, oct_backend backend, int threads,
                           bool stack, vols *out, oct_error *e)
{
    oct_array a = {0};
    oct_profile_data data = {0};
    oct_engine *eng = NULL;
    oct_products *pr = NULL;
    oct_err err = oct_npy_load(path, &a, e);
    if (err)
        return err;
    uint32_t stype = a.dtype == OCT_DTYPE_U16 ? OCT_SAMPLE_U16 : a.dtype == OCT_DTYPE_I16 ? OCT_SAMPLE_I16
                     : a.dtype == OCT_DTYPE_F32 ? OCT_SAMPLE_F32 : 0;
    int o = a.ndim == 4;
    if (!stype) {
        err = oct_error_set(e, OCT_EINVAL, "%s: dtype %s: frames must be uint16, int16 or float32",
                            path, oct_dtype_name(a.dtype));
        goto out;
    }
    if (a.ndim != 3 && !(stack && a.ndim == 4)) {
        err = oct_error_set(e, OCT_EINVAL, "%s: a %d-dimensional array: expected %s", path, a.ndim,
                            stack ? "(V, L, N, M) frames (or one (L, N, M))" : "one (L, N, M) frame");
        goto out;
    }
    oct_geometry g = {(uint32_t)a.shape[o + 2], (uint32_t)a.shape[o + 1], (uint32_t)a.shape[o], stype, 0};
    if (prof->has_geometry) {
        const oct_geometry *pg = &prof->geom;
        if (pg->samples != g.samples || pg->ascans != g.ascans || pg->lines != g.lines) {
            err = oct_error_set(e, OCT_ESIZE,
                                "%s: frames (lines %u, ascans %u, samples %u) do not match the "
                                "geometry of %s (lines %u, ascans %u, samples %u)", path, g.lines,
                                g.ascans, g.samples, prof->source_path, pg->lines, pg->ascans,
                                pg->samples);
            goto out;
        }
        g.sample_shift = pg->sample_shift;
    }
    if ((err = oct_geometry_check(&g, e)))
        goto out;
    if ((err = oct_profile_load_data(prof, g.samples, &data, e)))
        goto out;
    oct_setup setup;
    oct_setup_default(&setup);
    setup.geom = g;
    oct_profile_setup(prof, &data, &setup);
    setup.backend = backend, setup.threads = threads, setup.flags = OCT_SETUP_QUICK_PLAN;
    oct_params par = prof->params;
    par.products = OCT_PRODUCT_BIT(OCT_KIND_VOLUME) | OCT_PRODUCT_F32;
    int method = 0;
    while (method < OCT_METHOD_COUNT && !(par.methods & OCT_METHOD_BIT(method)))
        method++;
    if (method == OCT_METHOD_COUNT)
        method = OCT_METHOD_CFD;
    par.methods = OCT_METHOD_BIT(method);
    if ((err = oct_engine_create(&eng, &setup, &par, e)))
        goto out;
    if (!(pr = oct_products_create())) {
        err = oct_error_set(e, OCT_ENOMEM, "out of memory");
        goto out;
    }
    out->K = o ? a.shape[0] : 1, out->L = g.lines, out->N = g.ascans;
    out->D = oct_engine_depths(eng, method);
    size_t vol = (size_t)out->L * out->N * out->D, fb = (size_t)oct_geometry_frame_bytes(&g);
    if (!(out->v = malloc(sizeof(float) * vol * out->K))) {
        err = oct_error_set(e, OCT_ENOMEM, "out of memory for %llu volumes", (unsigned long long)out->K);
        goto out;
    }
    for (uint64_t k = 0; k < out->K; k++) {
        if ((err = oct_engine_process(eng, (const char *)a.data + k * fb, fb, pr, e))) {
            oct_error_prefix(e, err, "%s: frame %llu", path, (unsigned long long)k);
            free(out->v), out->v = NULL;
            goto out;
        }
        memcpy(out->v + k * vol, pr->img[method][OCT_KIND_VOLUME].f32, sizeof(float) * vol);
    }
out:
    oct_products_destroy(pr);
    oct_engine_destroy(eng);
    oct_profile_data_free(&data);
    oct_array_free(&a);
    return err;
}

/* 8-bit image of a float image (log1p scale; the range is the 1st..99.5th
 * percentile of `scale_src`, so before/after share one gray scale); NaN is black. */
static oct_err save_png(const char *dir, const char *name, const float *img, const float *scale_src,
                        uint32_t w, uint32_t h, oct_error *e)
{
    size_t n = (size_t)w * h, m = 0;
    float *s = malloc(sizeof *s * n);
    uint8_t *px = malloc(n);
    if (!s || !px) {
        free(s), free(px);
        return oct_error_set(e, OCT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (isfinite(scale_src[i]))
            s[m++] = log1pf(fmaxf(scale_src[i], 0));
    float lo = 0, hi = 1;
    if (m) {
        qsort(s, m, sizeof *s, octproc_cmp_float);
        lo = s[m / 100], hi = s[(size_t)(m * 0.995)];
        if (hi <= lo)
            hi = lo + 1e-6f;
    }
    for (size_t i = 0; i < n; i++) {
        float v = isfinite(img[i]) ? (log1pf(fmaxf(img[i], 0)) - lo) / (hi - lo) : 0;
        px[i] = (uint8_t)(v <= 0 ? 0 : v >= 1 ? 255 : v * 255 + 0.5f);
    }
    char path[OCT_PATH_MAX];
    int k = snprintf(path, sizeof path, "%s/%s", dir, name);
    oct_err err = k < 0 || (size_t)k >= sizeof path
                      ? oct_error_set(e, OCT_EINVAL, "%s/%s: path too long", dir, name)
                      : oct_png_save_gray(path, px, w, h, e);
    free(s), free(px);
    return err;
}

int octproc_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* slow-axis cut [D][L] at A-scan n and en-face mean over depth [L][N] (NaN ignored) */
static void projections(const float *v, uint64_t L, uint64_t N, uint64_t D, float *slow, float *cscan)
{
    uint64_t n0 = N / 2;
    for (uint64_t l = 0; l < L; l++) {
        for (uint64_t d = 0; d < D; d++)
            slow[d * L + l] = v[(l * N + n0) * D + d];
        for (uint64_t n = 0; n < N; n++) {
            double s = 0;
            int c = 0;
            for (uint64_t d = 0; d < D; d++) {
                float x = v[(l * N + n) * D + d];
                if (isfinite(x))
                    s += x, c++;
            }
            cscan[l * N + n] = c ? (float)(s / c) : NAN;
        }
    }
}

int octproc_register(const octproc_reg_args *a)
{
    oct_error e = {{0}};
    oct_err err;
    int rc = 1;
    oct_profile *prof = NULL;
    vols ref = {0}, tg = {0};
    oct_register *r = NULL;
    oct_register_avg *avg = NULL;
    float *shifts = NULL, *reg = NULL, *mean = NULL, *avgv = NULL, *p1 = NULL, *p2 = NULL, *p3 = NULL,
          *p4 = NULL;
    if (!a->intensity && !a->profile) {
        fprintf(stderr, "octproc: --register: raw frames need --profile (or give --intensity volumes)\n");
        return 64; /* usage (OCT_EX_USAGE) */
    }
    if (a->profile) {
        if (!(prof = calloc(1, sizeof *prof)) || (err = oct_profile_load(prof, a->profile, &e))) {
            fprintf(stderr, "octproc: %s\n", prof ? e.msg : "out of memory");
            goto out;
        }
    }
    if (a->intensity) {
        if ((err = load_intensity(a->ref, false, &ref, &e)) || (err = load_intensity(a->input, true, &tg, &e))) {
            fprintf(stderr, "octproc: %s\n", e.msg);
            goto out;
        }
        if (prof && prof->has_geometry &&
            (prof->geom.lines != ref.L || prof->geom.ascans != ref.N || prof->geom.samples / 2 + 1 != ref.D)) {
            fprintf(stderr, "octproc: %s: volume [%llu][%llu][%llu] does not match the geometry of %s "
                            "(lines %u, ascans %u, depths samples/2+1 = %u)\n", a->ref,
                    (unsigned long long)ref.L, (unsigned long long)ref.N, (unsigned long long)ref.D,
                    a->profile, prof->geom.lines, prof->geom.ascans, prof->geom.samples / 2 + 1);
            goto out;
        }
    } else if ((err = load_frames(a->ref, prof, a->backend, a->threads, false, &ref, &e)) ||
               (err = load_frames(a->input, prof, a->backend, a->threads, true, &tg, &e))) {
        fprintf(stderr, "octproc: %s\n", e.msg);
        goto out;
    }
    if (tg.L != ref.L || tg.N != ref.N || tg.D != ref.D) {
        fprintf(stderr, "octproc: %s: volumes [%llu][%llu][%llu] do not match the reference %s [%llu][%llu][%llu]\n",
                a->input, (unsigned long long)tg.L, (unsigned long long)tg.N, (unsigned long long)tg.D, a->ref,
                (unsigned long long)ref.L, (unsigned long long)ref.N, (unsigned long long)ref.D);
        goto out;
    }
    /* reg.* values: the profile's (or the defaults), then --set */
    oct_params par;
    if (prof)
        par = prof->params;
    else
        oct_params_default(&par);
    if (a->nsets) {
        oct_control_values cv;
        memset(&cv, 0, sizeof cv);
        oct_control_from_params(&cv, &par);
        for (int i = 0; i < a->nsets; i++)
            if ((err = oct_control_assign(&cv, a->sets[i], &e))) {
                fprintf(stderr, "octproc: --set: %s\n", e.msg);
                rc = 2;
                goto out;
            }
        oct_params_from_control(&par, &cv);
    }
    oct_register_options o;
    oct_register_options_default(&o);
    oct_register_options_from_params(&o, &par);
    o.threads = a->threads;
    if ((err = oct_register_create(&r, (uint32_t)ref.L, (uint32_t)ref.N, (uint32_t)ref.D, &o, a->backend, &e)) ||
        (err = oct_register_set_reference(r, ref.v, &e)) ||
        (err = oct_register_avg_create(&avg, (uint32_t)ref.L, (uint32_t)ref.N, (uint32_t)ref.D, &e))) {
        fprintf(stderr, "octproc: %s: %s\n", a->ref, e.msg);
        goto out;
    }
    size_t vol = (size_t)ref.L * ref.N * ref.D;
    shifts = malloc(sizeof(float) * 4 * ref.L * tg.K);
    reg = malloc(sizeof(float) * vol * tg.K);
    mean = calloc(vol, sizeof(float)), avgv = malloc(sizeof(float) * vol);
    p1 = malloc(sizeof(float) * ref.D * ref.L), p2 = malloc(sizeof(float) * ref.L * ref.N);
    p3 = malloc(sizeof(float) * ref.D * ref.L), p4 = malloc(sizeof(float) * ref.L * ref.N);
    if (!shifts || !reg || !mean || !avgv || !p1 || !p2 || !p3 || !p4) {
        fprintf(stderr, "octproc: out of memory for %llu registered volumes\n", (unsigned long long)tg.K);
        goto out;
    }
    for (uint64_t k = 0; k < tg.K; k++) {
        const float *t = tg.v + k * vol;
        float *s = shifts + 4 * ref.L * k;
        double t0 = now_ms();
        if ((err = oct_register_volume(r, t, s, &e)) ||
            (err = oct_register_reconstruct((uint32_t)ref.L, (uint32_t)ref.N, (uint32_t)ref.D, t, s,
                                            reg + k * vol, &e))) {
            fprintf(stderr, "octproc: %s: volume %llu: %s\n", a->input, (unsigned long long)k, e.msg);
            goto out;
        }
        oct_register_avg_add(avg, reg + k * vol);
        for (size_t i = 0; i < vol; i++)
            mean[i] += t[i] / (float)tg.K;
        int valid = 0;
        for (uint64_t l = 0; l < ref.L; l++)
            valid += s[4 * l + 3] == 1.0f;
        printf("octproc: register volume %llu: %d of %llu lines valid (%s, %.1f ms)\n",
               (unsigned long long)k, valid, (unsigned long long)ref.L, oct_register_backend_name(r),
               now_ms() - t0);
    }
    oct_register_avg_get(avg, avgv);
    char path[OCT_PATH_MAX];
    uint64_t sh_s[3] = {tg.K, ref.L, 4}, reg_s[4] = {tg.K, ref.L, ref.N, ref.D}, avg_s[3] = {ref.L, ref.N, ref.D};
    struct { const char *name; int nd; const uint64_t *shape; const float *data; } outs[] = {
        {"shifts.npy", 3, sh_s, shifts}, {"registered.npy", 4, reg_s, reg}, {"average.npy", 3, avg_s, avgv}};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", a->output, outs[i].name);
        if ((err = oct_npy_save(path, OCT_DTYPE_F32, outs[i].nd, outs[i].shape, outs[i].data, &e))) {
            fprintf(stderr, "octproc: %s\n", e.msg);
            goto out;
        }
    }
    projections(mean, ref.L, ref.N, ref.D, p1, p2);
    projections(avgv, ref.L, ref.N, ref.D, p3, p4);
    uint32_t L = (uint32_t)ref.L, N = (uint32_t)ref.N, D = (uint32_t)ref.D;
    if ((err = save_png(a->output, "before_slow.png", p1, p3, L, D, &e)) ||
        (err = save_png(a->output, "after_slow.png", p3, p3, L, D, &e)) ||
        (err = save_png(a->output, "before_cscan.png", p2, p4, N, L, &e)) ||
        (err = save_png(a->output, "after_cscan.png", p4, p4, N, L, &e))) {
        fprintf(stderr, "octproc: %s\n", e.msg);
        goto out;
    }
    printf("octproc: register: %llu volumes -> %s (shifts.npy, registered.npy, average.npy, 4 PNGs)\n",
           (unsigned long long)tg.K, a->output);
    rc = 0;
out:
    oct_register_avg_destroy(avg);
    oct_register_destroy(r);
    free(prof), free(ref.v), free(tg.v), free(shifts), free(reg), free(mean), free(avgv);
    free(p1), free(p2), free(p3), free(p4);
    return rc;
}
