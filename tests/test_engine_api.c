/* test_engine_api.c - the engine's API behaviour (not its numerics, which
 * test_engine.c checks against a float64 reference): validation of every
 * control value, set_params keeping old values and recomputing only what
 * changed, bad frames and set-ups, product presence and shapes, the en-face
 * cut, FFT path = GEMM path, self-consistency of the products, CUDA refusal.
 * OCT_TEST_BACKEND=cuda runs the backend-neutral ones on the GPU (the GPU run
 * of tools/build/gpu_run.sh; they skip, saying so, without a device). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* The backend the backend-neutral tests run on (main: OCT_TEST_BACKEND). */
static oct_backend g_backend = OCT_BACKEND_CPU;

/* Two engines' float32 results that take different paths (matrix shapes,
 * FFT vs GEMM): on the CPU they agree to rounding; on the GPU the fp32 GEMM
 * is split TF32 on tensor cores, and SPEC 7 allows each 1e-4 from the
 * float64 value, so a pair may differ by 2e-4. */
static double pair_tol(double cpu_tol)
{
    return g_backend == OCT_BACKEND_CUDA ? 2e-4 : cpu_tol;
}

/* CFD and MSI: the methods that need no CMS calibration */
#define CFD_MSI (OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI))

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

static float *random_masks(uint32_t R, uint32_t M, unsigned seed)
{
    float *m = malloc(sizeof(float) * R * M);
    for (size_t i = 0; i < (size_t)R * M; i++)
        m[i] = frand(&seed) - 0.5f;
    return m;
}

static uint16_t *random_frame(size_t n, unsigned seed)
{
    uint16_t *f = malloc(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++)
        f[i] = (uint16_t)(frand(&seed) * 4095.0f);
    return f;
}

static void setup_for(oct_setup *s, uint32_t M, uint32_t N, uint32_t L)
{
    oct_setup_default(s);
    s->geom.samples = M, s->geom.ascans = N, s->geom.lines = L;
    s->geom.sample_type = OCT_SAMPLE_U16;
    s->backend = g_backend;
    s->flags = OCT_SETUP_QUICK_PLAN;
    s->threads = 2;
}

/* ---- validation ---------------------------------------------------------- */

typedef struct rule {
    const char *field; /* must appear in the message */
    void (*mutate)(oct_params *p);
} rule;

#define MUT(name, body) static void name(oct_params *p) { body; }
MUT(m_methods0, p->methods = 0)
MUT(m_methods4, p->methods = 8)
MUT(m_msi_nomask, p->methods = 2)
MUT(m_window6, p->window = 6)
MUT(m_wparam_nan, p->window_param = NAN)
MUT(m_gauss0, p->window = OCT_WINDOW_GAUSSIAN; p->window_param = 0)
MUT(m_tukey_big, p->window = OCT_WINDOW_TUKEY; p->window_param = 1.5f)
MUT(m_tukey_neg, p->window = OCT_WINDOW_TUKEY; p->window_param = -0.1f)
MUT(m_F_neg, p->freq_cutoff = -1)
MUT(m_F_big, p->freq_cutoff = 65)
MUT(m_lo_low, p->lag_lo = -64)
MUT(m_hi_high, p->lag_hi = 64)
MUT(m_lo_gt_hi, p->lag_lo = 3; p->lag_hi = 2)
MUT(m_scale2, p->scale = 2)
MUT(m_bg3, p->background = 5)
MUT(m_bg_ref, p->background = OCT_BG_REFERENCE)
MUT(m_start_neg, p->enface_start = -1)
MUT(m_step0, p->enface_step = 0)
MUT(m_count0, p->enface_count = 0)
MUT(m_count_big, p->enface_count = 65537)
MUT(m_xh_L, p->xsec_h = 5)
MUT(m_xh_neg, p->xsec_h = -1)
MUT(m_xv_N, p->xsec_v = 7)
MUT(m_gsc_inf, p->gsc[1] = INFINITY)
MUT(m_contrast_nan, p->contrast[2] = NAN)
MUT(m_bright_inf, p->brightness[0] = -INFINITY)
MUT(m_products, p->products |= 0x4000) /* bits 9..13: angiography */
/* ABI 1.1 */
MUT(m_roll0, p->background = OCT_BG_ROLLING; p->background_param = 0)
MUT(m_roll_big, p->background = OCT_BG_ROLLING; p->background_param = OCT_ROLLING_MAX + 1)
MUT(m_fpn1, p->background = OCT_BG_FPN; p->background_param = 1)
MUT(m_fpn_big, p->background = OCT_BG_FPN; p->background_param = OCT_FPN_SEGMENT_MAX + 1)
MUT(m_klin4, p->klin = 4)
MUT(m_taps1, p->klin = OCT_KLIN_SINC; p->klin_taps = 1)
MUT(m_taps65, p->klin = OCT_KLIN_SINC; p->klin_taps = 65)
MUT(m_ksrc2, p->klin_source = 2)
MUT(m_coef_nan, p->klin_coef[2] = NAN)
MUT(m_a2_inf, p->disp_a2 = INFINITY)
MUT(m_a3_nan, p->disp_a3 = NAN)
MUT(m_k0_big, p->disp_k0 = 2.5f)
MUT(m_k0_nan, p->disp_k0 = NAN)
/* gsc <= 0 gives all-black images; slabs (SPEC 10.2) */
MUT(m_gsc0, p->gsc[0] = 0.0f)
MUT(m_gsc_neg, p->gsc[2] = -1.0f)
MUT(m_slab_empty, p->products |= OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN); p->slab_start = 10; p->slab_end = 10)
MUT(m_slab_past, p->products |= OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX); p->slab_start = 65; p->slab_end = 80)

/* messages name the operator keys (SPEC 10.1) */
static const rule rules[] = {
    {"methods", m_methods0},      {"methods", m_methods4},       {"msi", m_msi_nomask},
    {"window", m_window6},        {"window.param", m_wparam_nan}, {"sigma", m_gauss0},
    {"window: tukey parameter 1.5 is outside [0, 1]", m_tukey_big},
    {"window: tukey parameter", m_tukey_neg}, {"freq_cutoff", m_F_neg},
    {"freq_cutoff", m_F_big},     {"lag_window", m_lo_low},       {"lag_window", m_hi_high},
    {"lag_window", m_lo_gt_hi},   {"scale", m_scale2},            {"background", m_bg3},
    {"reference", m_bg_ref},      {"enface.start", m_start_neg},  {"enface.step", m_step0},
    {"enface.count", m_count0},   {"enface.count", m_count_big},  {"xsec.h_index", m_xh_L},
    {"xsec.h_index", m_xh_neg},   {"xsec.v_index", m_xv_N},       {"display.enface.gsc", m_gsc_inf},
    {"display.confocal.contrast", m_contrast_nan}, {"display.bscan.brightness", m_bright_inf},
    {"products", m_products},
    {"background.param", m_roll0}, {"background.param", m_roll_big}, {"background.param", m_fpn1},
    {"background.param", m_fpn_big}, {"klin", m_klin4}, {"klin.taps", m_taps1},
    {"klin.taps", m_taps65}, {"klin.source", m_ksrc2}, {"klin.c2", m_coef_nan},
    {"dispersion.a2", m_a2_inf}, {"dispersion.a3", m_a3_nan}, {"dispersion.k0", m_k0_big},
    {"dispersion.k0", m_k0_nan}, {"display.bscan.gsc", m_gsc0}, {"display.confocal.gsc", m_gsc_neg},
    {"slab.end must be > slab.start", m_slab_empty}, {"slab.start", m_slab_past},
};
#define NRULES ((int)(sizeof rules / sizeof rules[0]))

START_TEST(test_validate_rules)
{
    /* M = 128, N = 7, L = 5, no masks, no reference */
    oct_geometry g = {128, 7, 5, OCT_SAMPLE_U16, 0};
    oct_params p;
    oct_params_default(&p);
    oct_error e;
    ck_assert_int_eq(oct_params_validate(&p, &g, 0, false, &e), OCT_OK);
    const rule *r = &rules[_i];
    r->mutate(&p);
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(oct_params_validate(&p, &g, 0, false, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, r->field) != NULL, "rule %d: message '%s' does not name '%s'",
                  _i, e.msg, r->field);
}
END_TEST

START_TEST(test_validate_bounds_accepted)
{
    oct_geometry g = {128, 7, 5, OCT_SAMPLE_U16, 0};
    oct_params p;
    oct_params_default(&p);
    oct_error e;
    p.freq_cutoff = 64, p.lag_lo = -63, p.lag_hi = 63, p.enface_count = 65536;
    p.xsec_h = 4, p.xsec_v = 6, p.products = OCT_PRODUCTS_KNOWN;
    p.window = OCT_WINDOW_TUKEY, p.window_param = 0.0f;
    ck_assert_int_eq(oct_params_validate(&p, &g, 0, false, &e), OCT_OK);
    p.window_param = 1.0f;
    ck_assert_int_eq(oct_params_validate(&p, &g, 0, false, &e), OCT_OK);
    p.methods = CFD_MSI, p.background = OCT_BG_REFERENCE;
    ck_assert_int_eq(oct_params_validate(&p, &g, 3, true, &e), OCT_OK);
    p.lag_lo = p.lag_hi = -5;
    ck_assert_int_eq(oct_params_validate(&p, &g, 3, true, &e), OCT_OK);
    g.samples = 100; /* bad geometry */
    ck_assert_int_eq(oct_params_validate(&p, &g, 3, true, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "samples"));
}
END_TEST

/* ---- set-up errors ------------------------------------------------------- */

START_TEST(test_bad_setup)
{
    oct_setup s;
    oct_params p;
    oct_params_default(&p);
    oct_engine *eng = (oct_engine *)1;
    oct_error e;
    struct { uint32_t M, N, L, type, shift; const char *field; } bad[] = {
        {100, 4, 1, OCT_SAMPLE_U16, 0, "samples"}, {32, 4, 1, OCT_SAMPLE_U16, 0, "samples"},
        {16384, 4, 1, OCT_SAMPLE_U16, 0, "samples"}, {128, 0, 1, OCT_SAMPLE_U16, 0, "ascans"},
        {128, 4, 0, OCT_SAMPLE_U16, 0, "lines"},    {128, 4, 1, 7, 0, "sample_type"},
        {128, 4, 1, OCT_SAMPLE_I16, 16, "sample_shift"}, {128, 4, 1, OCT_SAMPLE_F32, 1, "sample_shift"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setup_for(&s, bad[i].M, bad[i].N, bad[i].L);
        s.geom.sample_type = bad[i].type, s.geom.sample_shift = bad[i].shift;
        ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
        ck_assert_ptr_null(eng);
        ck_assert_msg(strstr(e.msg, bad[i].field), "case %zu: '%s'", i, e.msg);
    }
    /* masks and count disagree, non-finite mask, non-finite reference */
    setup_for(&s, 128, 4, 1);
    s.mask_count = 3;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "mask"));
    float *m = random_masks(3, 128, 1);
    m[2 * 128 + 5] = NAN;
    s.masks = m;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "mask 2, sample 5"), "'%s'", e.msg);
    m[2 * 128 + 5] = 0;
    float ref[128] = {0};
    ref[7] = INFINITY;
    s.reference = ref;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "reference"));
    s.reference = NULL;
    s.threads = -1;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "threads"));
    s.threads = 1;
    s.msi_path = (oct_msi_path)7;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "msi_path"));
    s.msi_path = OCT_MSI_AUTO;
    /* CUDA tuning fields are checked on every backend (issue 19) */
    s.cuda.gemm = 4;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.gemm = 4") && strstr(e.msg, "3xfp16"), "'%s'", e.msg);
    s.cuda.gemm = OCT_CUDA_GEMM_3XFP16;
    s.cuda.parts_ext = 4;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.parts_ext = 4"), "'%s'", e.msg);
    s.cuda.parts_ext = 0;
    s.cuda.sink = 3;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.sink = 3"), "'%s'", e.msg);
    s.cuda.sink = 0;
    s.cuda.gemm_algo = -1;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.gemm_algo = -1"), "'%s'", e.msg);
    s.cuda.gemm_algo = 0;
    s.cuda.graph = 3;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.graph = 3"), "'%s'", e.msg);
    s.cuda.graph = 0;
    s.cuda.disp_chunk = -1;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.disp_chunk = -1"), "'%s'", e.msg);
    s.cuda.disp_chunk = 0;
    s.cuda.disp = 3;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.disp = 3") && strstr(e.msg, "fused"), "'%s'", e.msg);
    s.cuda.disp = 0;
    s.cuda.cfd = 3;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "cuda.cfd = 3") && strstr(e.msg, "gemm"), "'%s'", e.msg);
    free(m);
}
END_TEST

START_TEST(test_msi_without_masks)
{
    oct_setup s;
    setup_for(&s, 128, 4, 1);
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI;
    oct_engine *eng = NULL;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "msi"));
    /* and switching MSI on later is refused too */
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CFD);
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    p.methods = CFD_MSI;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_EINVAL);
    ck_assert_uint_eq(oct_engine_params(eng)->methods, OCT_METHOD_BIT(OCT_METHOD_CFD));
    oct_engine_destroy(eng);
}
END_TEST

START_TEST(test_cuda_refused)
{
    oct_setup s;
    setup_for(&s, 128, 4, 1);
    s.backend = OCT_BACKEND_CUDA;
    oct_params p;
    oct_params_default(&p);
    oct_engine *eng = NULL;
    oct_error e;
    char name[64];
    if (oct_cuda_probe(0, name, sizeof name, NULL) == OCT_OK) {
        printf("SKIP test_cuda_refused: a CUDA device is usable here\n");
        return;
    }
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EUNSUPPORTED);
    ck_assert_ptr_null(eng);
    ck_assert_ptr_nonnull(strstr(e.msg, "cuda"));
    s.backend = OCT_BACKEND_AUTO; /* falls back to the CPU */
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    ck_assert_str_eq(oct_engine_backend_name(eng), "cpu");
    ck_assert(strlen(oct_engine_device_name(eng)) > 0);
    oct_engine_destroy(eng);
}
END_TEST

/* ---- frames -------------------------------------------------------------- */

START_TEST(test_bad_frames)
{
    oct_setup s;
    setup_for(&s, 128, 5, 3);
    s.geom.sample_type = OCT_SAMPLE_F32;
    oct_params p;
    oct_params_default(&p);
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    oct_products *out = oct_products_create();
    size_t n = 128 * 5 * 3;
    float *f = malloc(sizeof(float) * n);
    unsigned seed = 3;
    for (size_t i = 0; i < n; i++)
        f[i] = frand(&seed);
    ck_assert_int_eq(oct_engine_process(eng, f, n * 4 - 4, out, &e), OCT_ESIZE);
    ck_assert_ptr_nonnull(strstr(e.msg, "bytes"));
    ck_assert_int_eq(oct_engine_process(eng, f, n * 4 + 4, out, &e), OCT_ESIZE);
    ck_assert_int_eq(oct_engine_process(eng, NULL, n * 4, out, &e), OCT_EINVAL);
    ck_assert_int_eq(oct_engine_process(eng, f, n * 4, out, &e), OCT_OK);
    ck_assert(out->img[0][OCT_KIND_ENFACE].present);
    ck_assert_uint_eq(out->frame, 1);
    /* a NaN in spectrum 7 (line 1, A-scan 2), sample 9 */
    f[7 * 128 + 9] = NAN;
    ck_assert_int_eq(oct_engine_process(eng, f, n * 4, out, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "spectrum 7") && strstr(e.msg, "sample 9"), "'%s'", e.msg);
    ck_assert(!out->img[0][OCT_KIND_ENFACE].present);
    f[7 * 128 + 9] = 0;
    f[14 * 128 + 127] = -INFINITY; /* the very last sample */
    ck_assert_int_eq(oct_engine_process(eng, f, n * 4, out, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "spectrum 14"), "'%s'", e.msg);
    ck_assert_uint_eq(out->frame, 1);
    free(f);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
}
END_TEST

/* ---- set_params ---------------------------------------------------------- */

START_TEST(test_set_params_keeps_old)
{
    oct_setup s;
    setup_for(&s, 128, 6, 4);
    float *m = random_masks(10, 128, 2);
    s.masks = m, s.mask_count = 10;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI, p.lag_lo = -2, p.lag_hi = 2, p.enface_count = 3;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    for (int i = 0; i < NRULES; i++) {
        oct_params bad = p;
        rules[i].mutate(&bad);
        if (rules[i].mutate == m_msi_nomask || rules[i].mutate == m_xv_N ||
            rules[i].mutate == m_xh_L)
            continue; /* valid or differently bounded in this geometry */
        ck_assert_int_eq(oct_engine_set_params(eng, &bad, &e), OCT_EINVAL);
        ck_assert_msg(!memcmp(oct_engine_params(eng), &p, sizeof p), "rule %d changed params", i);
    }
    oct_params bad = p;
    bad.xsec_v = 6;
    ck_assert_int_eq(oct_engine_set_params(eng, &bad, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "xsec.v_index"));
    /* a good change is adopted */
    p.enface_start = 2;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_params(eng)->enface_start, 2);
    free(m);
    oct_engine_destroy(eng);
}
END_TEST

START_TEST(test_recompute_only_changed)
{
    oct_setup s;
    setup_for(&s, 128, 6, 4);
    float *m = random_masks(10, 128, 2);
    s.masks = m, s.mask_count = 10;
    s.msi_path = _i ? OCT_MSI_GEMM : OCT_MSI_FFT;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI, p.lag_lo = -2, p.lag_hi = 2, p.enface_count = 3;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_msi_path(eng), s.msi_path);
    typeof(eng->rebuilds) r0 = eng->rebuilds;
    ck_assert_uint_eq(r0.plans, 1);
    ck_assert_uint_eq(r0.masks, 1);

    /* gray values and products that need no new matrices: nothing rebuilt */
    p.gsc[0] = 3, p.contrast[1] = 2, p.brightness[2] = 5, p.scale = OCT_SCALE_LOG;
    p.background = OCT_BG_FRAME_MEAN;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_mem_eq(&eng->rebuilds, &r0, sizeof r0);
    /* same values again: nothing */
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_mem_eq(&eng->rebuilds, &r0, sizeof r0);

    /* window: window + masks + MSI matrices, no plans, no en-face list */
    p.window = OCT_WINDOW_BLACKMAN;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_uint_eq(eng->rebuilds.window, r0.window + 1);
    ck_assert_uint_eq(eng->rebuilds.masks, r0.masks + 1);
    ck_assert_uint_gt(eng->rebuilds.msi_matrix, r0.msi_matrix);
    ck_assert_uint_eq(eng->rebuilds.enface, r0.enface);
    ck_assert_uint_eq(eng->rebuilds.plans, 1);
    r0 = eng->rebuilds;

    /* cut-off: masks, not the window */
    p.freq_cutoff = 4;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_uint_eq(eng->rebuilds.window, r0.window);
    ck_assert_uint_eq(eng->rebuilds.masks, r0.masks + 1);
    r0 = eng->rebuilds;

    /* lags: the GEMM path's matrices only (the FFT path's filters do not
     * depend on the lags) */
    p.lag_lo = -1;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_uint_eq(eng->rebuilds.masks, r0.masks);
    if (s.msi_path == OCT_MSI_GEMM)
        ck_assert_uint_gt(eng->rebuilds.msi_matrix, r0.msi_matrix);
    else
        ck_assert_uint_eq(eng->rebuilds.msi_matrix, r0.msi_matrix);
    r0 = eng->rebuilds;

    /* en-face: the index list (and the GEMM en-face matrix), not the masks */
    p.enface_step = 2;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_uint_eq(eng->rebuilds.enface, r0.enface + 1);
    ck_assert_uint_eq(eng->rebuilds.masks, r0.masks);
    ck_assert_uint_eq(eng->rebuilds.window, r0.window);
    ck_assert_uint_eq(eng->rebuilds.plans, 1);

    /* and the engine still processes correctly after all that */
    oct_products *out = oct_products_create();
    uint16_t *f = random_frame(128 * 6 * 4, 9);
    ck_assert_int_eq(oct_engine_process(eng, f, 128 * 6 * 4 * 2, out, &e), OCT_OK);
    ck_assert(out->img[OCT_METHOD_MSI][OCT_KIND_ENFACE].present);
    free(f);
    oct_products_destroy(out);
    free(m);
    oct_engine_destroy(eng);
}
END_TEST

/* ---- products ------------------------------------------------------------ */

START_TEST(test_products_bscan)
{
    oct_setup s;
    setup_for(&s, 256, 9, 1);
    float *m = random_masks(12, 256, 4);
    s.masks = m, s.mask_count = 12;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI, p.products = OCT_PRODUCTS_KNOWN;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    ck_assert_uint_eq(oct_engine_depths(eng, OCT_METHOD_CFD), 129);
    ck_assert_uint_eq(oct_engine_depths(eng, OCT_METHOD_MSI), 12);
    oct_products *out = oct_products_create();
    uint16_t *f = random_frame(256 * 9, 5);
    ck_assert_int_eq(oct_engine_process(eng, f, 256 * 9 * 2, out, &e), OCT_OK);
    for (int mth = 0; mth < 2; mth++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[mth][k];
            ck_assert_int_eq(img->present, k == OCT_KIND_BSCAN);
            if (k != OCT_KIND_BSCAN)
                continue;
            ck_assert_int_eq(img->ndim, 2);
            ck_assert_uint_eq(img->shape[0], mth ? 12 : 129);
            ck_assert_uint_eq(img->shape[1], 9);
            ck_assert_uint_eq(img->count, (mth ? 12 : 129) * 9);
            ck_assert_ptr_nonnull(img->f32);
            double sum = 0;
            for (size_t i = 0; i < img->count; i++)
                sum += img->f32[i];
            ck_assert(sum > 0);
        }
    /* no bscan requested: nothing present */
    p.products = OCT_PRODUCT_BIT(OCT_KIND_ENFACE);
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_process(eng, f, 256 * 9 * 2, out, &e), OCT_OK);
    ck_assert(!out->img[0][OCT_KIND_BSCAN].present && !out->img[0][OCT_KIND_ENFACE].present);
    free(f);
    free(m);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
}
END_TEST

/* Processes a random volume with every product and checks shapes and that
 * en-face, confocal and the cross-sections agree with the volume (they are
 * computed by different code: en-face-only spectra vs all-depth spectra). */
static void check_volume(oct_msi_path path, int threads, oct_products **keep)
{
    const uint32_t M = 128, N = 11, L = 7, R = 24;
    oct_setup s;
    setup_for(&s, M, N, L);
    s.threads = threads;
    float *m = random_masks(R, M, 6);
    s.masks = m, s.mask_count = R, s.msi_path = path;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI, p.products = OCT_PRODUCTS_KNOWN;
    p.lag_lo = -3, p.lag_hi = 2, p.freq_cutoff = 2;
    p.enface_start = 1, p.enface_step = 5, p.enface_count = 10; /* MSI: 1..21 (5), CFD: 10 */
    p.xsec_h = 3, p.xsec_v = 8;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    if (path != OCT_MSI_AUTO)
        ck_assert_int_eq(oct_engine_msi_path(eng), path);
    oct_products *out = oct_products_create();
    uint16_t *f = random_frame((size_t)M * N * L, 7);
    ck_assert_int_eq(oct_engine_process(eng, f, (size_t)M * N * L * 2, out, &e), OCT_OK);
    for (int mth = 0; mth < 2; mth++) {
        const uint32_t D = mth ? R : M / 2 + 1, Q = mth ? 5 : 10;
        oct_image *im = out->img[mth];
        ck_assert(!im[OCT_KIND_BSCAN].present);
        for (int k = 1; k < OCT_KIND_ANGIO_FIRST; k++) /* 8..: angiography, not asked here */
            ck_assert(im[k].present);
        oct_image *en = &im[OCT_KIND_ENFACE], *co = &im[OCT_KIND_CONFOCAL],
                  *xh = &im[OCT_KIND_XSEC_H], *xv = &im[OCT_KIND_XSEC_V], *vo = &im[OCT_KIND_VOLUME];
        ck_assert_int_eq(en->ndim, 3);
        ck_assert_uint_eq(en->shape[0], Q);
        ck_assert_uint_eq(en->shape[1], L);
        ck_assert_uint_eq(en->shape[2], N);
        ck_assert_uint_eq(en->n_indices, Q);
        ck_assert_uint_eq(en->requested, 10);
        for (uint32_t q = 0; q < Q; q++)
            ck_assert_int_eq(en->indices[q], 1 + 5 * (int)q);
        ck_assert_uint_eq(co->shape[0], L);
        ck_assert_uint_eq(co->shape[1], N);
        ck_assert_uint_eq(xh->shape[0], D);
        ck_assert_uint_eq(xh->shape[1], N);
        ck_assert_int_eq(xh->indices[0], 3);
        ck_assert_uint_eq(xv->shape[0], D);
        ck_assert_uint_eq(xv->shape[1], L);
        ck_assert_int_eq(xv->indices[0], 8);
        ck_assert_uint_eq(vo->shape[0], L);
        ck_assert_uint_eq(vo->shape[1], N);
        ck_assert_uint_eq(vo->shape[2], D);
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t a = 0; a < N; a++) {
                const float *I = vo->f32 + ((size_t)l * N + a) * D;
                double sum = 0;
                for (uint32_t q = 0; q < Q; q++) {
                    float v = en->f32[((size_t)q * L + l) * N + a];
                    ck_assert_float_eq_tol(v, I[en->indices[q]], 1e-6f * (1 + fabsf(v)));
                    sum += v;
                }
                ck_assert_float_eq_tol(co->f32[l * N + a], sum, 1e-5 * (1 + fabs(sum)));
                for (uint32_t d = 0; d < D; d++) {
                    if (l == 3)
                        ck_assert_float_eq(xh->f32[d * N + a], I[d]);
                    if (a == 8)
                        ck_assert_float_eq(xv->f32[d * L + l], I[d]);
                }
                if (mth == 0) /* CFD: the DC cut-off */
                    ck_assert(I[0] == 0 && I[1] == 0 && I[2] > 0);
            }
    }
    free(f);
    free(m);
    if (keep)
        *keep = out;
    else
        oct_products_destroy(out);
    oct_engine_destroy(eng);
}

START_TEST(test_products_volume_consistent)
{
    /* the volume makes every spectrum an all-depth one; turn it off to get
     * en-face-only spectra, and compare with a run that has it */
    check_volume(OCT_MSI_AUTO, 2, NULL);
}
END_TEST

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* en-face-only spectra (no volume product) must equal the all-depth path */
START_TEST(test_enface_only_spectra)
{
    const uint32_t M = 128, N = 11, L = 7, R = 24;
    oct_products *ref;
    check_volume(OCT_MSI_AUTO, 2, &ref);
    oct_setup s;
    setup_for(&s, M, N, L);
    float *m = random_masks(R, M, 6);
    s.masks = m, s.mask_count = R;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI;
    p.products = OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) | OCT_PRODUCT_F32;
    p.lag_lo = -3, p.lag_hi = 2, p.freq_cutoff = 2;
    p.enface_start = 1, p.enface_step = 5, p.enface_count = 10;
    p.xsec_h = 3, p.xsec_v = 8;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    oct_products *out = oct_products_create();
    uint16_t *f = random_frame((size_t)M * N * L, 7);
    ck_assert_int_eq(oct_engine_process(eng, f, (size_t)M * N * L * 2, out, &e), OCT_OK);
    for (int mth = 0; mth < 2; mth++)
        for (int k = OCT_KIND_ENFACE; k <= OCT_KIND_CONFOCAL; k++) {
            oct_image *a = &out->img[mth][k], *b = &ref->img[mth][k];
            ck_assert(a->present);
            ck_assert_uint_eq(a->count, b->count);
            ck_assert_double_lt(rel_l2(a->f32, b->f32, a->count), pair_tol(1e-6));
            ck_assert_mem_eq(a->u8, b->u8, a->count);
        }
    ck_assert(!out->img[0][OCT_KIND_XSEC_H].present && !out->img[1][OCT_KIND_VOLUME].present);
    free(f);
    free(m);
    oct_products_destroy(out);
    oct_products_destroy(ref);
    oct_engine_destroy(eng);
}
END_TEST

/* Moving a cross-section with set_params gives what a fresh engine gives
 * (the all-depth spectra follow the new line/column). */
START_TEST(test_xsec_change)
{
    const uint32_t M = 128, N = 9, L = 6, R = 16;
    oct_setup s;
    setup_for(&s, M, N, L);
    float *m = random_masks(R, M, 10);
    s.masks = m, s.mask_count = R;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI, p.lag_lo = -2, p.lag_hi = 1, p.enface_count = 4;
    p.products = OCT_PRODUCT_BIT(OCT_KIND_XSEC_H) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_V) |
                 OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_F32;
    p.xsec_h = 1, p.xsec_v = 2;
    oct_engine *a, *b;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&a, &s, &p, &e), OCT_OK);
    oct_products *oa = oct_products_create(), *ob = oct_products_create();
    uint16_t *f = random_frame((size_t)M * N * L, 11);
    const size_t bytes = (size_t)M * N * L * 2;
    ck_assert_int_eq(oct_engine_process(a, f, bytes, oa, &e), OCT_OK);
    p.xsec_h = 4, p.xsec_v = 7;
    ck_assert_int_eq(oct_engine_set_params(a, &p, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_process(a, f, bytes, oa, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_create(&b, &s, &p, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_process(b, f, bytes, ob, &e), OCT_OK);
    for (int mth = 0; mth < 2; mth++)
        for (int k = OCT_KIND_ENFACE; k <= OCT_KIND_XSEC_V; k++) {
            oct_image *x = &oa->img[mth][k], *y = &ob->img[mth][k];
            ck_assert_int_eq(x->present, y->present);
            if (!x->present)
                continue;
            ck_assert_uint_eq(x->count, y->count);
            ck_assert_mem_eq(x->u8, y->u8, x->count);
            ck_assert_double_lt(rel_l2(x->f32, y->f32, x->count), pair_tol(1e-6));
            if (k == OCT_KIND_XSEC_H)
                ck_assert_int_eq(x->indices[0], 4);
        }
    free(f);
    free(m);
    oct_products_destroy(oa);
    oct_products_destroy(ob);
    oct_engine_destroy(a);
    oct_engine_destroy(b);
}
END_TEST

START_TEST(test_fft_equals_gemm)
{
    oct_products *a, *b, *c;
    check_volume(OCT_MSI_FFT, 2, &a);
    check_volume(OCT_MSI_GEMM, 2, &b);
    check_volume(OCT_MSI_GEMM, 3, &c); /* other blocks and thread count */
    for (int k = 1; k < OCT_KIND_ANGIO_FIRST; k++) /* 8..: angiography, not asked here */ {
        oct_image *x = &a->img[OCT_METHOD_MSI][k], *y = &b->img[OCT_METHOD_MSI][k],
                  *z = &c->img[OCT_METHOD_MSI][k];
        ck_assert_uint_eq(x->count, y->count);
        double r = rel_l2(x->f32, y->f32, x->count);
        ck_assert_msg(r < pair_tol(1e-5), "%s: fft vs gemm rel L2 %g", oct_kind_name(k), r);
        ck_assert_msg(rel_l2(z->f32, y->f32, x->count) < 1e-6, "%s: threads", oct_kind_name(k));
        /* CFD does not depend on the MSI path at all */
        ck_assert_mem_eq(a->img[0][k].f32, b->img[0][k].f32, a->img[0][k].count * 4);
    }
    oct_products_destroy(a);
    oct_products_destroy(b);
    oct_products_destroy(c);
}
END_TEST

START_TEST(test_enface_cut)
{
    const uint32_t M = 128, N = 4, L = 3, R = 20;
    oct_setup s;
    setup_for(&s, M, N, L);
    float *m = random_masks(R, M, 8);
    s.masks = m, s.mask_count = R;
    oct_params p;
    oct_params_default(&p);
    p.methods = CFD_MSI;
    p.enface_start = 15, p.enface_step = 2, p.enface_count = 40;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    oct_products *out = oct_products_create();
    uint16_t *f = random_frame((size_t)M * N * L, 9);
    ck_assert_int_eq(oct_engine_process(eng, f, (size_t)M * N * L * 2, out, &e), OCT_OK);
    oct_image *ec = &out->img[OCT_METHOD_CFD][OCT_KIND_ENFACE];
    oct_image *em = &out->img[OCT_METHOD_MSI][OCT_KIND_ENFACE];
    /* CFD D = 65: 15, 17, ..., 63 = 25 indices; MSI D = 20: 15, 17, 19 */
    ck_assert_uint_eq(ec->n_indices, 25);
    ck_assert_uint_eq(ec->shape[0], 25);
    ck_assert_uint_eq(ec->requested, 40);
    ck_assert_int_eq(ec->indices[24], 63);
    ck_assert_uint_eq(em->n_indices, 3);
    ck_assert_int_eq(em->indices[2], 19);
    ck_assert_uint_eq(out->img[OCT_METHOD_MSI][OCT_KIND_CONFOCAL].n_indices, 3);
    /* start past MSI's last depth: no MSI en-face/confocal, CFD still there */
    p.enface_start = 20;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_int_eq(oct_engine_process(eng, f, (size_t)M * N * L * 2, out, &e), OCT_OK);
    ck_assert(!em->present && !out->img[OCT_METHOD_MSI][OCT_KIND_CONFOCAL].present);
    ck_assert(ec->present && ec->n_indices == 23);
    ck_assert(out->img[OCT_METHOD_MSI][OCT_KIND_XSEC_H].present);
    free(f);
    free(m);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
}
END_TEST

START_TEST(test_gray_map)
{
    float in[] = {0.0f, 1.49f, 1.5f, 254.4f, 254.5f, 300.0f, -3.0f, NAN, INFINITY, 100.0f};
    uint8_t out[10];
    oct_gray_map(in, out, 10, OCT_SCALE_LINEAR, 1.0f, 1.0f, 0.0f);
    const uint8_t want[] = {0, 1, 2, 254, 255, 255, 0, 0, 255, 100};
    ck_assert_mem_eq(out, want, 10);
    oct_gray_map(in, out, 10, OCT_SCALE_LINEAR, 2.0f, 0.5f, 10.0f); /* 10 + 0.5*2v */
    ck_assert_uint_eq(out[9], 110);
    ck_assert_uint_eq(out[0], 10);
    ck_assert_uint_eq(out[7], 10); /* NaN is 0 */
    float lin[] = {1.0f, 10.0f, 1000.0f, 0.0f};
    oct_gray_map(lin, out, 4, OCT_SCALE_LOG, 1.0f, 1.0f, 0.0f); /* 20 log10 */
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 20);
    ck_assert_uint_eq(out[2], 60);
    ck_assert_uint_eq(out[3], 0); /* -240 dB clamps to 0 */
    oct_gray_map(lin, out, 4, OCT_SCALE_LOG, 1.0f, 2.0f, 250.0f);
    ck_assert_uint_eq(out[3], 0); /* 250 - 480 */
    ck_assert_uint_eq(out[1], 255);
}
END_TEST

START_TEST(test_names_and_defaults)
{
    ck_assert_str_eq(oct_method_name(OCT_METHOD_MSI), "msi");
    ck_assert_str_eq(oct_kind_name(OCT_KIND_XSEC_V), "xsec_v");
    ck_assert_str_eq(oct_window_name(OCT_WINDOW_TUKEY), "tukey");
    ck_assert_str_eq(oct_kind_name(OCT_KIND_COUNT), "unknown");
    ck_assert_int_eq(oct_kind_class(OCT_KIND_VOLUME), OCT_CLASS_BSCAN);
    ck_assert_int_eq(oct_kind_class(OCT_KIND_CONFOCAL), OCT_CLASS_CONFOCAL);
    oct_params p;
    oct_params_default(&p);
    ck_assert_uint_eq(p.methods, 1);
    ck_assert_uint_eq(p.window, OCT_WINDOW_HANN);
    ck_assert_uint_eq(p.products, 0x1f);
    /* windows: symmetric, tukey 0 = rect, tukey 1 = hann */
    double w[64], h[64];
    oct_window_compute(w, 64, OCT_WINDOW_TUKEY, 0.0);
    for (int n = 0; n < 64; n++)
        ck_assert(w[n] == 1.0);
    oct_window_compute(w, 64, OCT_WINDOW_TUKEY, 1.0);
    oct_window_compute(h, 64, OCT_WINDOW_HANN, 0.0);
    for (int n = 0; n < 64; n++)
        ck_assert_double_eq_tol(w[n], h[n], 1e-15);
    oct_window_compute(w, 64, OCT_WINDOW_TUKEY, 0.5);
    for (int n = 0; n < 64; n++)
        ck_assert_double_eq_tol(w[n], w[63 - n], 1e-12);
    ck_assert(w[0] == 0.0 && w[31] == 1.0 && w[10] > 0 && w[10] < 1);
}
END_TEST

/* ---- ABI 1.1: k-lin positions, CMS set-up, rebuilds ----------------------- */

/* Mirror spectra for a CMS calibration: cos(2 pi z n / M + 0.3) + DC. */
static float *cms_cal(uint32_t M, const double *z, uint32_t K)
{
    float *c = malloc(sizeof(float) * M * K);
    ck_assert_ptr_nonnull(c);
    for (uint32_t i = 0; i < K; i++)
        for (uint32_t n = 0; n < M; n++)
            c[(size_t)i * M + n] = (float)(100.0 + 50.0 * cos(2 * M_PI * z[i] * n / M + 0.3));
    return c;
}

static void cms_setup(oct_setup *s, float *cal, const double *z, uint32_t K, uint32_t R)
{
    s->cms_cal = cal, s->cms_cal_count = K, s->cms_depths = z;
    s->cms_start = 3.0, s->cms_step = 1.5, s->cms_count = R;
}

START_TEST(test_params_check)
{
    oct_setup s;
    setup_for(&s, 64, 3, 1);
    oct_params p;
    oct_params_default(&p);
    oct_error e;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_OK);
    /* validate's rules apply */
    p.disp_k0 = -1.5f;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "dispersion.k0"));
    oct_params_default(&p);
    /* cms without a calibration */
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CMS);
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "cms"));
    s.cms_count = 4;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_OK);
    s.cms_count = 0;
    oct_params_default(&p);
    /* k-lin off: the coefficients are not looked at beyond finiteness */
    p.klin_coef[1] = -5;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_OK);
    /* polynomial: identity ok, decreasing refused naming position 1 */
    p.klin = OCT_KLIN_LINEAR;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "position 1 ") != NULL, "%s", e.msg);
    p.klin_coef[1] = 64;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_OK);
    p.klin_coef[0] = -1.0, p.klin_coef[1] = 65; /* [-1, 64) exactly inside */
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_OK);
    p.klin_coef[0] = -1.25;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "position 0 = -1.25") != NULL, "%s", e.msg);
    p.klin_coef[0] = 0, p.klin_coef[1] = 64, p.klin_coef[2] = 10; /* ends past M */
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "[-1, 64]") != NULL, "%s", e.msg);
    /* file source */
    oct_params_default(&p);
    p.klin = OCT_KLIN_SINC, p.klin_source = OCT_KLIN_FILE;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "klin.source"));
    double pos[64];
    for (int n = 0; n < 64; n++) pos[n] = n * 0.98 + 0.5;
    s.klin_positions = pos;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_OK);
    pos[17] = pos[16];
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "position 17 = 16.18") != NULL, "%s", e.msg);
    pos[17] = NAN;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "position 17 = nan") != NULL, "%s", e.msg);
    pos[17] = 17 * 0.98 + 0.5;
    pos[63] = 64.5;
    ck_assert_int_eq(oct_params_check(&p, &s, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "position 63 = 64.5") != NULL, "%s", e.msg);
    /* the engine refuses the same at create and at set_params, keeping its values */
    pos[63] = 63;
    oct_engine *eng;
    p.klin = OCT_KLIN_OFF;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    oct_params bad = p;
    bad.klin = OCT_KLIN_CUBIC, bad.klin_source = OCT_KLIN_POLY; /* coefficients 0: constant */
    ck_assert_int_eq(oct_engine_set_params(eng, &bad, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "klin polynomial"));
    ck_assert(!memcmp(oct_engine_params(eng), &p, sizeof p));
    bad.klin_source = OCT_KLIN_FILE; /* the engine kept its copy of the positions */
    pos[5] = -100;
    ck_assert_int_eq(oct_engine_set_params(eng, &bad, &e), OCT_OK);
    bad.methods |= OCT_METHOD_BIT(OCT_METHOD_CMS);
    ck_assert_int_eq(oct_engine_set_params(eng, &bad, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "cms"));
    oct_engine_destroy(eng);
}
END_TEST

START_TEST(test_cms_setup_errors)
{
    const uint32_t M = 128;
    double z[3] = {10.0, 25.0, 40.5};
    float *cal = cms_cal(M, z, 3);
    oct_setup s;
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CMS) | OCT_METHOD_BIT(OCT_METHOD_CFD);
    oct_engine *eng = NULL;
    oct_error e;
    static const struct { const char *name, *want; } cases[] = {
        {"K = 1", "cms_cal_count = 1"},       {"equal depths", "distinct"},
        {"nan depth", "cms_depths[1] = nan"}, {"inf sample", "calibration spectrum 2, sample 7"},
        {"step 0", "cms_step = 0"},           {"step nan", "cms_step = nan"},
        {"start inf", "cms_start = inf"},     {"count too big", "cms_count = 65537"},
        {"cal NULL", "NULL"},                 {"flat spectrum", "no fringe"},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        setup_for(&s, M, 3, 1);
        double zz[3] = {z[0], z[1], z[2]};
        float *cc = cms_cal(M, z, 3);
        cms_setup(&s, cc, zz, 3, 8);
        switch (i) {
        case 0: s.cms_cal_count = 1; break;
        case 1: zz[2] = zz[0]; break;
        case 2: zz[1] = NAN; break;
        case 3: cc[2 * M + 7] = INFINITY; break;
        case 4: s.cms_step = 0; break;
        case 5: s.cms_step = NAN; break;
        case 6: s.cms_start = INFINITY; break;
        case 7: s.cms_count = 65537; break;
        case 8: s.cms_cal = NULL; break;
        case 9: for (uint32_t n = 0; n < M; n++) cc[M + n] = 7.0f; break;
        }
        memset(&e, 0, sizeof e);
        ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_EINVAL);
        ck_assert_ptr_null(eng);
        ck_assert_msg(strstr(e.msg, cases[i].want) != NULL, "%s: message '%s' lacks '%s'", cases[i].name, e.msg,
                      cases[i].want);
        free(cc);
    }
    /* one depth needs no step; K = 2 is enough; depths of CMS = cms_count */
    setup_for(&s, M, 3, 1);
    cms_setup(&s, cal, z, 2, 1);
    s.cms_step = 0;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    ck_assert_uint_eq(oct_engine_depths(eng, OCT_METHOD_CMS), 1);
    ck_assert_str_eq(oct_method_name(OCT_METHOD_CMS), "cms");
    oct_engine_destroy(eng);
    free(cal);
}
END_TEST

/* With a linear k, CMS equals CFD at integer depths (oct_setup's comment). */
START_TEST(test_cms_equals_cfd_linear)
{
    const uint32_t M = 256, N = 4;
    double z[2] = {20.0, 70.0};
    float *cal = cms_cal(M, z, 2);
    oct_setup s;
    setup_for(&s, M, N, 1);
    cms_setup(&s, cal, z, 2, 40);
    s.cms_start = 10, s.cms_step = 2; /* depths 10, 12, ..., 88 */
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CMS) | OCT_METHOD_BIT(OCT_METHOD_CFD);
    p.freq_cutoff = 3, p.products |= OCT_PRODUCT_F32;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    uint16_t *f = random_frame((size_t)M * N, 5);
    oct_products *out = oct_products_create();
    ck_assert_int_eq(oct_engine_process(eng, f, (size_t)M * N * 2, out, &e), OCT_OK);
    const oct_image *c = &out->img[OCT_METHOD_CFD][OCT_KIND_BSCAN], *m = &out->img[OCT_METHOD_CMS][OCT_KIND_BSCAN];
    ck_assert(c->present && m->present && m->shape[0] == 40 && m->shape[1] == N);
    double num = 0, den = 0;
    for (uint32_t r = 0; r < 40; r++)
        for (uint32_t a = 0; a < N; a++) {
            double x = m->f32[r * N + a], y = c->f32[(10 + 2 * r) * N + a];
            num += (x - y) * (x - y), den += y * y;
        }
    ck_assert_msg(sqrt(num / den) < 1e-3, "CMS vs CFD: relative L2 %g", sqrt(num / den));
    free(f);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    free(cal);
}
END_TEST

START_TEST(test_recompute_options)
{
    const uint32_t M = 128;
    double z[2] = {15.0, 33.0}, pos[128];
    float *cal = cms_cal(M, z, 2);
    for (uint32_t n = 0; n < M; n++) pos[n] = n + 0.25;
    oct_setup s;
    setup_for(&s, M, 5, 3);
    cms_setup(&s, cal, z, 2, 10);
    s.klin_positions = pos;
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHODS_ALL & ~OCT_METHOD_BIT(OCT_METHOD_MSI);
    p.enface_count = 3;
    oct_engine *eng;
    oct_error e;
    ck_assert_int_eq(oct_engine_create(&eng, &s, &p, &e), OCT_OK);
    ck_assert_uint_eq(oct_engine_depths(eng, OCT_METHOD_CMS), 10);
    typeof(eng->rebuilds) r0 = eng->rebuilds;
    ck_assert_uint_eq(r0.cms, 1);
    ck_assert_ptr_nonnull(eng->plan->cms_q);
    ck_assert_ptr_null(eng->plan->disp);
    ck_assert_uint_eq(eng->plan->klin_T, 0);
#define SAME(f) ck_assert_uint_eq(eng->rebuilds.f, r0.f)
#define PLUS1(f) ck_assert_uint_eq(eng->rebuilds.f, r0.f + 1)
    /* background K: nothing rebuilt */
    p.background = OCT_BG_ROLLING, p.background_param = 5;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    p.background_param = 6;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert_mem_eq(&eng->rebuilds, &r0, sizeof r0);
    /* k-lin: only the taps */
    p.klin = OCT_KLIN_SINC, p.klin_taps = 9, p.klin_source = OCT_KLIN_FILE;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(klin); SAME(cms); SAME(disp); SAME(window); SAME(masks); SAME(enface);
    ck_assert_uint_eq(eng->plan->klin_T, 9);
    ck_assert_int_eq(eng->plan->klin_idx[0], 0); /* clamped at the left edge */
    ck_assert_float_eq_tol(eng->plan->klin_w[4], (float)(sin(M_PI * 0.25) / (M_PI * 0.25)), 1e-6f); /* m = 0 */
    r0 = eng->rebuilds;
    p.klin_taps = 10;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(klin); SAME(cms); SAME(disp);
    ck_assert_uint_eq(eng->plan->klin_T, 10);
    r0 = eng->rebuilds;
    /* dispersion: only the phase */
    p.disp_a2 = 3.0f;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(disp); SAME(klin); SAME(cms); SAME(window);
    ck_assert_ptr_nonnull(eng->plan->disp);
    /* theta(0) = a2 k0^2 = 0.75: (cos, -sin) */
    ck_assert_float_eq_tol(eng->plan->disp[0], (float)cos(0.75), 1e-6f);
    ck_assert_float_eq_tol(eng->plan->disp[1], (float)-sin(0.75), 1e-6f);
    r0 = eng->rebuilds;
    p.disp_a2 = 0.0f;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(disp);
    ck_assert_ptr_null(eng->plan->disp);
    r0 = eng->rebuilds;
    /* window and cut-off: CMS masks too; en-face: not the CMS masks */
    p.window = OCT_WINDOW_BLACKMAN;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(cms); PLUS1(window); SAME(klin); SAME(disp);
    r0 = eng->rebuilds;
    p.freq_cutoff = 3;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(cms); SAME(window); SAME(klin);
    r0 = eng->rebuilds;
    p.enface_start = 2;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    PLUS1(enface); SAME(cms); SAME(klin); SAME(disp);
#undef SAME
#undef PLUS1
    oct_products *out = oct_products_create();
    uint16_t *f = random_frame(128 * 5 * 3, 3);
    ck_assert_int_eq(oct_engine_process(eng, f, 128 * 5 * 3 * 2, out, &e), OCT_OK);
    ck_assert(out->img[OCT_METHOD_CMS][OCT_KIND_ENFACE].present);
    ck_assert_uint_eq(out->img[OCT_METHOD_CMS][OCT_KIND_XSEC_H].shape[0], 10);
    free(f);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    free(cal);
}
END_TEST

/* The tests that hold for any backend (the others check the CPU backend's
 * own rebuild counters, threads, set-up errors or the CUDA refusal). */
static void add_neutral_tests(TCase *tc)
{
    tcase_add_test(tc, test_bad_frames);
    tcase_add_test(tc, test_set_params_keeps_old);
    tcase_add_test(tc, test_products_bscan);
    tcase_add_test(tc, test_products_volume_consistent);
    tcase_add_test(tc, test_enface_only_spectra);
    tcase_add_test(tc, test_xsec_change);
    tcase_add_test(tc, test_fft_equals_gemm);
    tcase_add_test(tc, test_enface_cut);
    tcase_add_test(tc, test_gray_map);
    tcase_add_test(tc, test_cms_equals_cfd_linear);
}

static Suite *suite(void)
{
    Suite *s = suite_create("engine_api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_names_and_defaults);
    tcase_add_loop_test(tc, test_validate_rules, 0, NRULES);
    tcase_add_test(tc, test_validate_bounds_accepted);
    tcase_add_test(tc, test_bad_setup);
    tcase_add_test(tc, test_msi_without_masks);
    tcase_add_test(tc, test_cuda_refused);
    add_neutral_tests(tc);
    tcase_add_loop_test(tc, test_recompute_only_changed, 0, 2);
    tcase_add_test(tc, test_params_check);
    tcase_add_test(tc, test_cms_setup_errors);
    tcase_add_test(tc, test_recompute_options);
    suite_add_tcase(s, tc);
    return s;
}

/* The backend-neutral tests alone (OCT_TEST_BACKEND=cuda). */
static Suite *neutral_suite(const char *name)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 300);
    add_neutral_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *be = getenv("OCT_TEST_BACKEND");
    if (be && !strcmp(be, "cuda")) {
        char name[128];
        oct_error e = {{0}};
        if (!oct_cuda_built() || oct_cuda_probe(0, name, sizeof name, &e) != OCT_OK) {
            printf("SKIP engine_api on cuda: %s\n", oct_cuda_built() ? e.msg : "CUDA not built in");
            return 0;
        }
        g_backend = OCT_BACKEND_CUDA;
    }
    SRunner *sr = srunner_create(g_backend == OCT_BACKEND_CUDA ? neutral_suite("engine_api-cuda") : suite());
    if (g_backend == OCT_BACKEND_CUDA)
        srunner_set_fork_status(sr, CK_NOFORK); /* never fork after CUDA was initialised */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
