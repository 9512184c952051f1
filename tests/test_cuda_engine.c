/* test_cuda_engine.c - the CUDA backend (issue 5).
 *
 * Without a usable device (or a CPU-only build): one test proves that asking
 * for the CUDA backend fails cleanly with OCT_EUNSUPPORTED and a message,
 * and a "SKIP cuda: <reason>" line says that the rest did not run.
 * With a device (CK_NOFORK: never fork after CUDA is initialised):
 *  - the shared float64-reference suite (engine_suite.c) on CUDA;
 *  - CUDA vs float64 reference and vs the CPU engine on random frames, for
 *    both MSI paths, fp32 and tf32, several chunk (batch) sizes, every
 *    product (volume and f32 included) and with volume off (en-face and
 *    cross-section passes);
 *  - control changes between frames never allocate (allocation counter);
 *  - repeated frames give identical bytes; non-finite f32 input is refused.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/engine_suite.h"
#include "oct_engine.h"
#include "lib/ref64.h"
#include "lib/testutil.h"
#ifdef OCT_HAVE_CUDA
#include "cuda_engine.h"
#endif

static char g_skip_reason[600];

/* ---- no device: the refusal is tested ---------------------------------- */

START_TEST(t_cuda_unsupported)
{
    oct_setup s;
    oct_setup_default(&s);
    s.geom = (oct_geometry){256, 8, 1, OCT_SAMPLE_U16, 0};
    s.backend = OCT_BACKEND_CUDA;
    s.flags = OCT_SETUP_QUICK_PLAN;
    oct_params p;
    oct_params_default(&p);
    oct_engine *eng = (oct_engine *)0x1;
    oct_error e = {{0}};
    oct_err err = oct_engine_create(&eng, &s, &p, &e);
    ck_assert_int_eq(err, OCT_EUNSUPPORTED);
    ck_assert_ptr_null(eng);
    ck_assert_msg(strlen(e.msg) > 10, "no message: '%s'", e.msg);
    ck_assert_msg(strstr(e.msg, "cuda") || strstr(e.msg, "CUDA"), "message does not say CUDA: %s", e.msg);
    /* auto falls back to the CPU */
    s.backend = OCT_BACKEND_AUTO;
    err = oct_engine_create(&eng, &s, &p, &e);
    ck_assert_msg(err == OCT_OK, "auto: %s", e.msg);
    ck_assert_str_eq(oct_engine_backend_name(eng), "cpu");
    oct_engine_destroy(eng);
}
END_TEST

#ifdef OCT_HAVE_CUDA

/* ---- helpers ------------------------------------------------------------ */

typedef struct tcase_cfg {
    oct_geometry g;
    uint32_t R;
    oct_msi_path path;
    oct_precision prec;
    const char *chunk_mb;  /* OCT_CUDA_GEMM_CHUNK_MB, NULL = default */
    const char *c2r_batch; /* OCT_CUDA_C2R_BATCH, NULL = default */
} tcase_cfg;

typedef struct fixture {
    oct_setup setup;
    oct_params p;
    float *masks, *ref;
    void *frame;
    size_t bytes;
} fixture;

static void fixture_make(fixture *f, const tcase_cfg *c, uint64_t seed)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    memset(f, 0, sizeof *f);
    oct_setup_default(&f->setup);
    f->setup.geom = c->g;
    f->setup.flags = OCT_SETUP_QUICK_PLAN;
    f->setup.msi_path = c->path;
    f->setup.precision = c->prec;
    f->masks = tu_masks_random(c->g.samples, c->R, seed + 1);
    f->ref = tu_reference_random(&c->g, seed + 2);
    ck_assert_ptr_nonnull(f->masks);
    ck_assert_ptr_nonnull(f->ref);
    f->setup.masks = f->masks;
    f->setup.mask_count = c->R;
    f->setup.reference = f->ref;
    f->setup.normalize_masks = tu_rng_uniform(&rng) < 0.5;
    f->frame = tu_frame_random(&c->g, seed + 3, &f->bytes);
    ck_assert_ptr_nonnull(f->frame);

    oct_params *p = &f->p;
    oct_params_default(p);
    int M = (int)c->g.samples;
    p->methods = OCT_METHODS_ALL;
    p->window = (uint32_t)(tu_rng_next(&rng) % OCT_WINDOW_COUNT);
    p->window_param = p->window == OCT_WINDOW_GAUSSIAN ? 0.2f : 0.5f;
    p->freq_cutoff = (int)(tu_rng_next(&rng) % 6);
    p->lag_lo = -(int)(tu_rng_next(&rng) % 5);
    p->lag_hi = (int)(tu_rng_next(&rng) % 5);
    p->background = (uint32_t)(tu_rng_next(&rng) % 3);
    p->scale = (uint32_t)(tu_rng_next(&rng) % 2);
    p->enface_start = 1;
    p->enface_step = 3;
    p->enface_count = 5;
    p->xsec_h = (int)(c->g.lines / 2);
    p->xsec_v = (int)(c->g.ascans - 1);
    for (int k = 0; k < OCT_CLASS_COUNT; k++) {
        p->gsc[k] = p->scale == OCT_SCALE_LOG ? 1.0f : (float)(40.0 / (M * 200.0));
        p->contrast[k] = p->scale == OCT_SCALE_LOG ? 3.0f : 1.0f;
        p->brightness[k] = p->scale == OCT_SCALE_LOG ? -200.0f : 2.0f;
    }
    p->products = 0x3fu | OCT_PRODUCT_F32;
}

static void fixture_free(fixture *f)
{
    free(f->masks);
    free(f->ref);
    free(f->frame);
}

static void set_env(const char *name, const char *v)
{
    if (v) setenv(name, v, 1);
    else unsetenv(name);
}

/* Poisons every wanted product with the opposite of its expected gray (and
 * NaN f32), processes, and compares with the float64 reference. */
static void run_and_check(oct_engine *eng, const fixture *f, const oct_params *p, double tol,
                          oct_products *out, const char *label)
{
    ref64 *ref = NULL;
    oct_setup s = f->setup;
    ck_assert_int_eq(ref64_create(&ref, &s, p, f->frame), 0);
    ref64_image ri[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    memset(ri, 0, sizeof ri);
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            want[m][k] = ref64_product_wanted(&s.geom, p, m, k);
            if (!want[m][k]) continue;
            ck_assert_int_eq(ref64_product(ref, m, k, &ri[m][k]), 0);
            ck_assert_int_eq(tu_poison_image(&out->img[m][k], ri[m][k].count, true,
                                             ri[m][k].n_indices + 1, ri[m][k].gray), OCT_OK);
        }
    oct_error e = {{0}};
    oct_err err = oct_engine_process(eng, f->frame, f->bytes, out, &e);
    ck_assert_msg(err == OCT_OK, "%s: process: %s", label, e.msg);
    char msg[1024], what[160];
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *img = &out->img[m][k];
            ck_assert_msg(img->present == want[m][k], "%s: %s/%s present=%d, expected %d", label,
                          oct_kind_name(k), oct_method_name(m), img->present, want[m][k]);
            if (!want[m][k]) continue;
            const ref64_image *r = &ri[m][k];
            snprintf(what, sizeof what, "%s: %s/%s", label, oct_kind_name(k), oct_method_name(m));
            ck_assert_msg(img->count == r->count && img->ndim == r->ndim, "%s: %zu pixels (%d-d), expected %zu (%d-d)",
                          what, img->count, img->ndim, r->count, r->ndim);
            for (int d = 0; d < r->ndim; d++)
                ck_assert_msg(img->shape[d] == r->shape[d], "%s: shape[%d] = %u, expected %u", what, d,
                              img->shape[d], r->shape[d]);
            bool ok = tu_check_f32(what, img->f32, r->I, r->count, r->ndim, r->shape, tol, msg, sizeof msg);
            ck_assert_msg(ok, "%s", msg);
            int c = ref64_kind_class(k);
            double slack = tol > TU_TOL_FP32 ? 3 * tol * tu_rms(r->I, r->count) : 0.0;
            ok = tu_check_gray(what, img->u8, r->I, r->count, r->ndim, r->shape, p->scale, p->gsc[c],
                               p->contrast[c], p->brightness[c], TU_GRAY_MARGIN, slack, msg, sizeof msg);
            ck_assert_msg(ok, "%s", msg);
            ref64_image_free(&ri[m][k]);
        }
    ref64_destroy(ref);
}

static oct_engine *make_engine(const fixture *f, oct_backend b)
{
    oct_setup s = f->setup;
    s.backend = b;
    oct_engine *eng = NULL;
    oct_error e = {{0}};
    oct_err err = oct_engine_create(&eng, &s, &f->p, &e);
    ck_assert_msg(err == OCT_OK, "create (%s): %s", b == OCT_BACKEND_CUDA ? "cuda" : "cpu", e.msg);
    return eng;
}

static const tcase_cfg g_cfgs[] = {
    {{256, 20, 12, OCT_SAMPLE_U16, 2}, 40, OCT_MSI_GEMM, OCT_PRECISION_FP32, NULL, NULL},
    {{256, 20, 12, OCT_SAMPLE_U16, 2}, 40, OCT_MSI_GEMM, OCT_PRECISION_FP32, "0.004", NULL},
    {{256, 20, 12, OCT_SAMPLE_U16, 2}, 40, OCT_MSI_FFT, OCT_PRECISION_FP32, NULL, NULL},
    {{256, 20, 12, OCT_SAMPLE_U16, 2}, 40, OCT_MSI_FFT, OCT_PRECISION_FP32, NULL, "100"},
    {{512, 37, 1, OCT_SAMPLE_I16, 1}, 64, OCT_MSI_GEMM, OCT_PRECISION_FP32, NULL, NULL},
    {{512, 37, 1, OCT_SAMPLE_I16, 1}, 64, OCT_MSI_FFT, OCT_PRECISION_FP32, NULL, "200"},
    {{128, 9, 7, OCT_SAMPLE_F32, 0}, 16, OCT_MSI_GEMM, OCT_PRECISION_TF32, "0.001", NULL},
    {{128, 9, 7, OCT_SAMPLE_F32, 0}, 16, OCT_MSI_FFT, OCT_PRECISION_FP32, NULL, "17"},
    {{1024, 16, 6, OCT_SAMPLE_U16, 0}, 24, OCT_MSI_AUTO, OCT_PRECISION_FP32, NULL, NULL},
};
#define N_CFGS (int)(sizeof g_cfgs / sizeof g_cfgs[0])

/* ---- tests ---------------------------------------------------------------- */

/* CUDA against the float64 reference and the CPU engine, per configuration. */
START_TEST(t_agree)
{
    const tcase_cfg *c = &g_cfgs[_i];
    set_env("OCT_CUDA_GEMM_CHUNK_MB", c->chunk_mb);
    set_env("OCT_CUDA_C2R_BATCH", c->c2r_batch);
    fixture f;
    fixture_make(&f, c, 1000 + 17 * (uint64_t)_i);
    double tol = c->prec == OCT_PRECISION_TF32 ? TU_TOL_TF32 : TU_TOL_FP32;
    oct_engine *gpu = make_engine(&f, OCT_BACKEND_CUDA);
    oct_engine *cpu = make_engine(&f, OCT_BACKEND_CPU);
    ck_assert_str_eq(oct_engine_backend_name(gpu), "cuda");
    if (c->path != OCT_MSI_AUTO) ck_assert_int_eq(oct_engine_msi_path(gpu), c->path);
    oct_products *og = oct_products_create(), *oc = oct_products_create();
    ck_assert_ptr_nonnull(og);
    ck_assert_ptr_nonnull(oc);
    char label[128];
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: every product (volume: one full MSI pass); pass 1: volume
         * off (en-face pass + gathered cross-section pass) */
        oct_params p = f.p;
        if (pass == 1) p.products &= ~OCT_PRODUCT_BIT(OCT_KIND_VOLUME);
        oct_error e = {{0}};
        ck_assert_msg(oct_engine_set_params(gpu, &p, &e) == OCT_OK, "%s", e.msg);
        ck_assert_msg(oct_engine_set_params(cpu, &p, &e) == OCT_OK, "%s", e.msg);
        snprintf(label, sizeof label, "cfg %d pass %d (M=%u N=%u L=%u %s path %d)", _i, pass,
                 c->g.samples, c->g.ascans, c->g.lines, oct_sample_name(c->g.sample_type),
                 (int)oct_engine_msi_path(gpu));
        run_and_check(gpu, &f, &p, tol, og, label);
        ck_assert_msg(oct_engine_process(cpu, f.frame, f.bytes, oc, &e) == OCT_OK, "cpu: %s", e.msg);
        char msg[1024];
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                const oct_image *a = &og->img[m][k], *b = &oc->img[m][k];
                ck_assert_int_eq(a->present, b->present);
                if (!a->present) continue;
                ck_assert_uint_eq(a->count, b->count);
                ck_assert_msg(tu_check_f32_pair(label, a->f32, b->f32, a->count, a->ndim, a->shape,
                                                2 * tol, msg, sizeof msg), "%s", msg);
                ck_assert_msg(tu_check_gray_pair(label, a->u8, b->u8, a->count, a->ndim, a->shape,
                                                 msg, sizeof msg), "%s", msg);
                ck_assert_uint_eq(a->n_indices, b->n_indices);
                if (a->n_indices)
                    ck_assert_msg(memcmp(a->indices, b->indices, a->n_indices * sizeof(int32_t)) == 0,
                                  "%s: indices differ", label);
            }
    }
    oct_products_destroy(og);
    oct_products_destroy(oc);
    oct_engine_destroy(gpu);
    oct_engine_destroy(cpu);
    fixture_free(&f);
    unsetenv("OCT_CUDA_GEMM_CHUNK_MB");
    unsetenv("OCT_CUDA_C2R_BATCH");
}
END_TEST

/* Control changes between frames: results follow, nothing is allocated. */
START_TEST(t_no_realloc)
{
    const tcase_cfg *c = &g_cfgs[_i == 0 ? 0 : 2]; /* GEMM, FFT */
    fixture f;
    fixture_make(&f, c, 77 + (uint64_t)_i);
    f.p.lag_lo = -2;
    f.p.lag_hi = 2;
    oct_engine *gpu = make_engine(&f, OCT_BACKEND_CUDA);
    oct_products *out = oct_products_create();
    run_and_check(gpu, &f, &f.p, TU_TOL_FP32, out, "first frame");
    uint64_t n0 = oct_cuda_alloc_count(gpu);
    ck_assert_uint_gt(n0, 0);
    tu_rng rng;
    tu_rng_seed(&rng, 5 + (uint64_t)_i);
    for (int it = 0; it < 6; it++) {
        oct_params p = *oct_engine_params(gpu);
        p.window = (uint32_t)(tu_rng_next(&rng) % OCT_WINDOW_COUNT);
        p.window_param = 0.3f;
        p.freq_cutoff = (int)(tu_rng_next(&rng) % 8);
        p.lag_lo = -(int)(tu_rng_next(&rng) % 10);
        p.lag_hi = (int)(tu_rng_next(&rng) % 10);
        p.enface_start = (int)(tu_rng_next(&rng) % 4);
        p.enface_step = 1 + (int)(tu_rng_next(&rng) % 4);
        p.enface_count = 1 + (int)(tu_rng_next(&rng) % 9);
        p.xsec_h = (int)(tu_rng_next(&rng) % c->g.lines);
        p.xsec_v = (int)(tu_rng_next(&rng) % c->g.ascans);
        p.background = (uint32_t)(tu_rng_next(&rng) % 3);
        p.methods = 1u + (uint32_t)(tu_rng_next(&rng) % 3);
        p.products = (uint32_t)(tu_rng_next(&rng) & 0x3fu) | OCT_PRODUCT_F32;
        p.gsc[1] *= 1.5f;
        oct_error e = {{0}};
        ck_assert_msg(oct_engine_set_params(gpu, &p, &e) == OCT_OK, "set_params: %s", e.msg);
        char label[64];
        snprintf(label, sizeof label, "change %d", it);
        run_and_check(gpu, &f, &p, TU_TOL_FP32, out, label);
        ck_assert_msg(oct_cuda_alloc_count(gpu) == n0, "%s: %llu allocations after %llu", label,
                      (unsigned long long)oct_cuda_alloc_count(gpu), (unsigned long long)n0);
    }
    oct_products_destroy(out);
    oct_engine_destroy(gpu);
    fixture_free(&f);
}
END_TEST

/* Frames A, B, A: the two A results are byte-identical; device-only timing works. */
START_TEST(t_repeat)
{
    const tcase_cfg *c = &g_cfgs[0];
    fixture fa, fb;
    fixture_make(&fa, c, 4242);
    fixture_make(&fb, c, 4343);
    oct_engine *gpu = make_engine(&fa, OCT_BACKEND_CUDA);
    oct_products *o1 = oct_products_create(), *o2 = oct_products_create();
    oct_error e = {{0}};
    ck_assert_int_eq(oct_engine_process(gpu, fa.frame, fa.bytes, o1, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_process(gpu, fb.frame, fb.bytes, o2, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_process(gpu, fa.frame, fa.bytes, o2, &e), OCT_OK);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *a = &o1->img[m][k], *b = &o2->img[m][k];
            ck_assert_int_eq(a->present, b->present);
            if (!a->present) continue;
            ck_assert(memcmp(a->u8, b->u8, a->count) == 0);
            ck_assert(memcmp(a->f32, b->f32, a->count * sizeof(float)) == 0);
        }
    double ms = -1;
    oct_stage_times t;
    ck_assert_msg(oct_cuda_time_device(gpu, 3, &ms, &t, &e) == OCT_OK, "%s", e.msg);
    ck_assert(ms > 0 && t.device_ms > 0 && t.h2d_ms == 0);
    oct_stage_times st;
    oct_engine_stage_times(gpu, &st);
    ck_assert(st.h2d_ms > 0 && st.device_ms > 0 && st.total_ms >= st.device_ms);
    oct_products_destroy(o1);
    oct_products_destroy(o2);
    oct_engine_destroy(gpu);
    fixture_free(&fa);
    fixture_free(&fb);
}
END_TEST

START_TEST(t_nonfinite)
{
    tcase_cfg c = g_cfgs[6];
    c.prec = OCT_PRECISION_FP32;
    fixture f;
    fixture_make(&f, &c, 99);
    oct_engine *gpu = make_engine(&f, OCT_BACKEND_CUDA);
    float *x = (float *)f.frame;
    size_t j = 2 * c.g.ascans + 3;
    x[j * c.g.samples + 5] = NAN;
    oct_products *out = oct_products_create();
    oct_error e = {{0}};
    oct_err err = oct_engine_process(gpu, f.frame, f.bytes, out, &e);
    ck_assert_int_eq(err, OCT_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "spectrum %zu", j);
    ck_assert_msg(strstr(e.msg, want) != NULL, "message does not name %s: %s", want, e.msg);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) ck_assert(!out->img[m][k].present);
    /* the engine is still usable */
    x[j * c.g.samples + 5] = 1.0f;
    err = oct_engine_process(gpu, f.frame, f.bytes, out, &e);
    ck_assert_msg(err == OCT_OK, "%s", e.msg);
    oct_products_destroy(out);
    oct_engine_destroy(gpu);
    fixture_free(&f);
}
END_TEST

static Suite *cuda_suite(void)
{
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, t_agree, 0, N_CFGS);
    tcase_add_loop_test(tc, t_no_realloc, 0, 2);
    tcase_add_test(tc, t_repeat);
    tcase_add_test(tc, t_nonfinite);
    suite_add_tcase(s, tc);
    return s;
}
#endif /* OCT_HAVE_CUDA */

static Suite *refusal_suite(void)
{
    Suite *s = suite_create("cuda-absent");
    TCase *tc = tcase_create("refusal");
    tcase_add_test(tc, t_cuda_unsupported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    bool have = false;
    if (!oct_cuda_built()) {
        snprintf(g_skip_reason, sizeof g_skip_reason, "built without CUDA");
    } else {
        char name[128] = "";
        oct_error e = {{0}};
        if (oct_cuda_probe(0, name, sizeof name, &e) == OCT_OK) {
            have = true;
            printf("cuda: device 0: %s\n", name);
        } else {
            snprintf(g_skip_reason, sizeof g_skip_reason, "%s", e.msg);
        }
    }
    SRunner *sr;
    if (!have) {
        printf("SKIP cuda: %s (CUDA engine suite and CPU-vs-GPU agreement not run)\n", g_skip_reason);
        sr = srunner_create(refusal_suite());
    } else {
#ifdef OCT_HAVE_CUDA
        sr = srunner_create(oct_engine_suite(OCT_BACKEND_CUDA, "engine-cuda"));
        srunner_add_suite(sr, cuda_suite());
#else
        sr = srunner_create(refusal_suite());
#endif
    }
    /* never fork after CUDA was initialised (the probe did) */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
