/* test_engine_plan.c - the planner (kernels/plan.h) without a device: the
 * kind table and product bits, the layout rows (shapes, strides, reduce,
 * slab clamping), the row sets, the MSI cost model, generations shared or
 * renewed per control value, and a failed plan leaving the previous one in
 * place.  The numbers of the slab products are checked against the float64
 * reference by the engine suite (test_engine.c, test_cuda_engine.c). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* test_failed_prepare_resyncs also runs on CUDA (OCT_TEST_BACKEND=cuda). */
static oct_backend g_backend = OCT_BACKEND_CPU;

static float *masks_for(uint32_t R, uint32_t M)
{
    float *m = malloc(sizeof(float) * R * M);
    unsigned s = 7;
    for (size_t i = 0; i < (size_t)R * M; i++) {
        s = s * 1664525u + 1013904223u;
        m[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return m;
}

/* A CPU engine of M x N x L with R masks (R = 0: CFD only). */
static oct_engine *engine_for(uint32_t M, uint32_t N, uint32_t L, uint32_t R, const oct_params *p,
                              float **masks)
{
    oct_setup s;
    oct_setup_default(&s);
    s.geom = (oct_geometry){M, N, L, OCT_SAMPLE_U16, 0};
    s.backend = g_backend;
    s.threads = 1;
    s.flags = OCT_SETUP_QUICK_PLAN;
    *masks = R ? masks_for(R, M) : NULL;
    s.masks = *masks, s.mask_count = R;
    oct_engine *eng = NULL;
    oct_error e = {{0}};
    ck_assert_msg(oct_engine_create(&eng, &s, p, &e) == OCT_OK, "%s", e.msg);
    return eng;
}

START_TEST(test_kind_table)
{
    for (int k = 0; k < 8; k++) {
        ck_assert_uint_eq(oct_kind_bit(k), 1u << k);
        ck_assert_uint_eq(OCT_PRODUCT_BIT(k), 1u << k);
    }
    /* kinds from 8 on skip bit 8 (f32): the angiography kinds of SPEC 10.3 */
    ck_assert_uint_eq(OCT_PRODUCT_BIT(8), 1u << 9);
    ck_assert_uint_eq(OCT_PRODUCT_BIT(12), 1u << 13);
    ck_assert_uint_eq(oct_kind_bit(OCT_KIND_COUNT), 0);
    ck_assert_uint_eq(oct_kind_bit(-1), 0);
    ck_assert_uint_eq(OCT_PRODUCTS_KNOWN & OCT_PRODUCT_F32, OCT_PRODUCT_F32);
    ck_assert_str_eq(oct_kind_name(OCT_KIND_SLAB_MEAN), "slab_mean");
    ck_assert_str_eq(oct_kind_name(OCT_KIND_SLAB_MAX), "slab_max");
    ck_assert_int_eq(oct_kind_class(OCT_KIND_SLAB_MEAN), OCT_CLASS_ENFACE);
    ck_assert_int_eq(oct_kind_class(OCT_KIND_SLAB_MAX), OCT_CLASS_ENFACE);
    ck_assert_int_eq(oct_kind_class(OCT_KIND_VOLUME), OCT_CLASS_BSCAN);
    for (int k = 0; k < OCT_KIND_COUNT; k++) {
        ck_assert_ptr_nonnull(oct_kind_info_of(k));
        ck_assert_uint_eq(oct_kind_info_of(k)->bit, oct_kind_bit(k));
    }
    ck_assert_ptr_null(oct_kind_info_of(OCT_KIND_COUNT));
    /* en-face angiograms: the slab kinds' names and bits, the metric as method part */
    ck_assert_str_eq(oct_kind_name(OCT_KIND_SLAB_MAX_SSADA), "slab_max");
    ck_assert_str_eq(oct_kind_name(OCT_KIND_SLAB_MEAN_SV), "slab_mean");
    ck_assert_uint_eq(oct_kind_bit(OCT_KIND_SLAB_MAX_DECOR), OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX));
    ck_assert_uint_eq(oct_kind_bit(OCT_KIND_SLAB_MEAN_SSADA), OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN));
    ck_assert_str_eq(oct_product_method_name(OCT_METHOD_CFD, OCT_KIND_SLAB_MEAN_DECOR), "decor");
    ck_assert_str_eq(oct_product_method_name(OCT_METHOD_CMS, OCT_KIND_BSCAN), "cms");
    {
        oct_setup su;
        oct_setup_default(&su);
        su.geom = (oct_geometry){128, 5, 12, OCT_SAMPLE_U16, 0};
        su.repeats = 4;
        ck_assert_uint_eq(oct_kind_cap_setup(&su, OCT_METHOD_CFD, 65, OCT_KIND_SLAB_MAX_SSADA), 3 * 5);
        ck_assert_uint_eq(oct_kind_cap_setup(&su, OCT_METHOD_CFD, 65, OCT_KIND_SSADA), 3 * 5 * 65);
        ck_assert_uint_eq(oct_kind_cap_setup(&su, OCT_METHOD_MSI, 65, OCT_KIND_SLAB_MAX_SSADA), 0);
        ck_assert_uint_eq(oct_kind_cap_indices(65, OCT_KIND_SLAB_MEAN_SV), 2);
    }
    /* pool capacities: volume frames only for the volume kinds, D for the slots */
    const oct_geometry vol = {128, 5, 3, OCT_SAMPLE_U16, 0}, bs = {128, 5, 1, OCT_SAMPLE_U16, 0};
    ck_assert_uint_eq(oct_kind_cap(&vol, 65, OCT_KIND_SLAB_MAX), 15);
    ck_assert_uint_eq(oct_kind_cap(&vol, 65, OCT_KIND_ENFACE), 65 * 15);
    ck_assert_uint_eq(oct_kind_cap(&vol, 65, OCT_KIND_XSEC_V), 65 * 3);
    ck_assert_uint_eq(oct_kind_cap(&vol, 65, OCT_KIND_BSCAN), 0);
    ck_assert_uint_eq(oct_kind_cap(&bs, 65, OCT_KIND_BSCAN), 65 * 5);
    ck_assert_uint_eq(oct_kind_cap(&bs, 65, OCT_KIND_SLAB_MEAN), 0);
    ck_assert_uint_eq(oct_kind_cap_indices(65, OCT_KIND_SLAB_MEAN), 2);
    ck_assert_uint_eq(oct_kind_cap_indices(65, OCT_KIND_CONFOCAL), 65);
}
END_TEST

START_TEST(test_layout_volume)
{
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI);
    p.products = OCT_PRODUCTS_KNOWN;
    p.enface_start = 1, p.enface_step = 2, p.enface_count = 3;
    p.xsec_h = 2, p.xsec_v = 4;
    p.slab_start = 2, p.slab_end = 100; /* MSI (R = 4): clamped to [2, 4) */
    float *m;
    oct_engine *eng = engine_for(128, 5, 3, 4, &p, &m);
    const oct_plan *pl = eng->plan;
    /* CFD: D = 65 */
    const oct_layout *r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_VOLUME);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->ndim, 3);
    ck_assert(r->shape[0] == 3 && r->shape[1] == 5 && r->shape[2] == 65);
    ck_assert(r->st_l == 5 * 65 && r->st_a == 65 && r->st_d == 1 && r->count == 3 * 5 * 65);
    r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_ENFACE);
    ck_assert(r->shape[0] == 3 && r->shape[1] == 3 && r->shape[2] == 5 && r->st_d == 15);
    ck_assert_int_eq(r->depths, OCT_DEPTHS_ENFACE);
    r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_CONFOCAL);
    ck_assert(r->reduce == OCT_REDUCE_SUM && r->st_d == 0 && r->count == 15);
    r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_XSEC_H);
    ck_assert(r->select == OCT_SEL_LINE && r->sel == 2 && r->st_l == 0 && r->st_a == 1 && r->st_d == 5);
    r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_XSEC_V);
    ck_assert(r->select == OCT_SEL_COLUMN && r->sel == 4 && r->st_l == 1 && r->st_a == 0 && r->st_d == 3);
    ck_assert(r->shape[0] == 65 && r->shape[1] == 3);
    r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_SLAB_MEAN);
    ck_assert(r->reduce == OCT_REDUCE_MEAN && r->depths == OCT_DEPTHS_RANGE);
    ck_assert(r->d0 == 2 && r->d1 == 65 && r->nslots == 63 && r->cls == OCT_CLASS_ENFACE);
    ck_assert(r->shape[0] == 3 && r->shape[1] == 5 && r->ndim == 2);
    r = oct_plan_layout(pl, OCT_METHOD_MSI, OCT_KIND_SLAB_MAX);
    ck_assert(r->reduce == OCT_REDUCE_MAX && r->d0 == 2 && r->d1 == 4 && r->nslots == 2);
    /* a volume frame has no B-scan; CMS is off */
    ck_assert_ptr_null(oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_BSCAN));
    ck_assert_ptr_null(oct_plan_layout(pl, OCT_METHOD_CMS, OCT_KIND_ENFACE));
    ck_assert_uint_eq(pl->method[OCT_METHOD_CFD].nlayout, 7);
    /* MSI en-face depths cut at R = 4: 1, 3 */
    ck_assert_uint_eq(pl->enface_n[OCT_METHOD_MSI], 2);
    ck_assert(pl->enface_idx[OCT_METHOD_MSI][0] == 1 && pl->enface_idx[OCT_METHOD_MSI][1] == 3);
    /* row sets: the volume and the slabs need every depth of every spectrum */
    ck_assert(pl->method[OCT_METHOD_CFD].full && pl->rows_full);

    /* without volume and slabs: en-face depths for most spectra, all depths
     * for the cross-sections */
    p.products = OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_H) |
                 OCT_PRODUCT_BIT(OCT_KIND_XSEC_V);
    oct_error e = {{0}};
    ck_assert_msg(oct_engine_set_params(eng, &p, &e) == OCT_OK, "%s", e.msg);
    pl = eng->plan;
    ck_assert(!pl->rows_full && pl->rows_sub && pl->rows_xs_h && pl->rows_xs_v);
    ck_assert(!pl->method[OCT_METHOD_MSI].full && pl->method[OCT_METHOD_MSI].sub);
    /* en-face start past D: no en-face products of that method */
    p.enface_start = 10, p.products |= OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL);
    ck_assert_msg(oct_engine_set_params(eng, &p, &e) == OCT_OK, "%s", e.msg);
    ck_assert_ptr_null(oct_plan_layout(eng->plan, OCT_METHOD_MSI, OCT_KIND_ENFACE));
    ck_assert_ptr_null(oct_plan_layout(eng->plan, OCT_METHOD_MSI, OCT_KIND_CONFOCAL));
    ck_assert_ptr_nonnull(oct_plan_layout(eng->plan, OCT_METHOD_CFD, OCT_KIND_CONFOCAL));
    oct_engine_destroy(eng);
    free(m);

    /* a B-scan frame: the B-scan only, slabs are not made */
    oct_params_default(&p);
    p.products = OCT_PRODUCTS_KNOWN;
    eng = engine_for(64, 7, 1, 0, &p, &m);
    pl = eng->plan;
    ck_assert_uint_eq(pl->method[OCT_METHOD_CFD].nlayout, 1);
    r = oct_plan_layout(pl, OCT_METHOD_CFD, OCT_KIND_BSCAN);
    ck_assert(r && r->shape[0] == 33 && r->shape[1] == 7 && r->st_a == 1 && r->st_d == 7);
    ck_assert(pl->method[OCT_METHOD_CFD].full);
    oct_engine_destroy(eng);
}
END_TEST

START_TEST(test_cost_model)
{
    /* CPU-like rates: 0.11 ns per M log2 M for the FFT path, 150 flops/ns */
    oct_msi_rates r;
    memset(&r, 0, sizeof r);
    r.fft_ns_per_sample_log = 0.11, r.gemm_flops_per_ns = 150, r.gemm_ok = true;
    r.gemm_matrix_bytes_max = 512ull << 20;
    /* break-even Lw = 0.11 * 10 * 150 / 2 = 82.5 for M = 1024 */
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 1024, 512, 82, 0), OCT_MSI_GEMM);
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 1024, 512, 83, 0), OCT_MSI_FFT);
    /* the matrices must fit: (R + Q) * Lw * M floats */
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 8192, 8192, 3, 0), OCT_MSI_FFT);
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 8192, 4096, 3, 0), OCT_MSI_GEMM);
    /* forced paths are kept; no GEMM on the backend: FFT */
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_GEMM, 1024, 512, 500, 0), OCT_MSI_GEMM);
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_FFT, 1024, 512, 1, 0), OCT_MSI_FFT);
    r.gemm_ok = false;
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 1024, 512, 1, 0), OCT_MSI_FFT);
    ck_assert_int_eq(oct_msi_path_choose(NULL, OCT_MSI_AUTO, 1024, 512, 1, 0), OCT_MSI_FFT);
    /* CUDA-like rates: memory-bound FFT path, tensor-core GEMM, matrices of
     * up to 128 lags: the GEMM up to the capacity */
    memset(&r, 0, sizeof r);
    r.fft_ns_per_sample = 16.0 / 3000.0, r.gemm_flops_per_ns = 50000, r.gemm_ok = true;
    r.gemm_lags_max = 128;
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 1024, 512, 128, 0), OCT_MSI_GEMM);
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 1024, 512, 129, 0), OCT_MSI_FFT);
    r.gemm_lags_max = 40;
    ck_assert_int_eq(oct_msi_path_choose(&r, OCT_MSI_AUTO, 1024, 512, 41, 0), OCT_MSI_FFT);
}
END_TEST

START_TEST(test_generations)
{
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI);
    p.enface_count = 2;
    float *m;
    oct_engine *eng = engine_for(128, 4, 3, 5, &p, &m);
    oct_error e = {{0}};
    const oct_plan *a = eng->plan;
    uint64_t g0[OCT_PK_COUNT];
    memcpy(g0, a->gen, sizeof g0);
    const float *win = a->window, *mf = a->masks_filt;
    const int32_t *eidx = a->enface_idx[OCT_METHOD_CFD];
    for (int k = 0; k < OCT_PK_COUNT; k++)
        ck_assert_uint_ne(g0[k], 0);

    /* gray values only: every generation and array is shared */
    p.gsc[1] = 3.0f, p.scale = OCT_SCALE_LOG;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    const oct_plan *b = eng->plan;
    ck_assert_mem_eq(b->gen, g0, sizeof g0);
    ck_assert(b->window == win && b->masks_filt == mf && b->enface_idx[OCT_METHOD_CFD] == eidx);

    /* the window: window, masks (and the CMS q) new; the rest shared */
    p.window = OCT_WINDOW_BLACKMAN;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    b = eng->plan;
    ck_assert_uint_gt(b->gen[OCT_PK_WINDOW], g0[OCT_PK_WINDOW]);
    ck_assert_uint_gt(b->gen[OCT_PK_MASKS], g0[OCT_PK_MASKS]);
    ck_assert_uint_eq(b->gen[OCT_PK_ENFACE], g0[OCT_PK_ENFACE]);
    ck_assert_uint_eq(b->gen[OCT_PK_LAGS], g0[OCT_PK_LAGS]);
    ck_assert_uint_eq(b->gen[OCT_PK_ROWS], g0[OCT_PK_ROWS]);
    ck_assert(b->enface_idx[OCT_METHOD_CFD] == eidx);
    memcpy(g0, b->gen, sizeof g0);

    /* the lags: only their generation (the FFT path's filters stay) */
    p.lag_lo = -2;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    b = eng->plan;
    for (int k = 0; k < OCT_PK_COUNT; k++)
        if (k == OCT_PK_LAGS)
            ck_assert_uint_gt(b->gen[k], g0[k]);
        else if (k != OCT_PK_PATH) /* the cost model may move to the other path */
            ck_assert_uint_eq(b->gen[k], g0[k]);
    ck_assert_uint_eq(b->lags, 3);
    memcpy(g0, b->gen, sizeof g0);

    /* slabs: the row sets and layout, no array */
    p.products |= OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX);
    p.slab_start = 1, p.slab_end = 3;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    b = eng->plan;
    ck_assert_uint_gt(b->gen[OCT_PK_ROWS], g0[OCT_PK_ROWS]);
    ck_assert_uint_eq(b->gen[OCT_PK_MASKS], g0[OCT_PK_MASKS]);
    ck_assert_uint_eq(b->gen[OCT_PK_ENFACE], g0[OCT_PK_ENFACE]);
    ck_assert(b->rows_full);
    memcpy(g0, b->gen, sizeof g0);

    /* background: its recipe and generation (a rolling history restarts) */
    p.background = OCT_BG_ROLLING, p.background_param = 7;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    b = eng->plan;
    ck_assert_uint_gt(b->gen[OCT_PK_BACKGROUND], g0[OCT_PK_BACKGROUND]);
    ck_assert(b->bg.mode == OCT_BG_ROLLING && b->bg.K == 7 && b->bg.needs_mean);
    p.background = OCT_BG_FPN, p.background_param = 6;
    ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_OK);
    ck_assert(eng->plan->bg.mode == OCT_BG_FPN && eng->plan->bg.G == 6 && !eng->plan->bg.needs_mean);

    /* the engine still processes with the plan it holds */
    uint16_t *f = calloc(128 * 4 * 3, sizeof(uint16_t));
    for (int i = 0; i < 128 * 4 * 3; i++)
        f[i] = (uint16_t)(1000 + (i * 37) % 500);
    oct_products *out = oct_products_create();
    ck_assert_msg(oct_engine_process(eng, f, 128 * 4 * 3 * 2, out, &e) == OCT_OK, "%s", e.msg);
    const oct_image *sm = &out->img[OCT_METHOD_MSI][OCT_KIND_SLAB_MAX];
    ck_assert(sm->present && sm->n_indices == 2 && sm->indices[0] == 1 && sm->indices[1] == 3);
    ck_assert(sm->ndim == 2 && sm->shape[0] == 3 && sm->shape[1] == 4);
    oct_products_destroy(out);
    free(f);
    oct_engine_destroy(eng);
    free(m);
}
END_TEST

/* A plan that cannot be built leaves the previous one, and what it shares
 * with a plan that was built and dropped stays valid. */
START_TEST(test_failed_plan_keeps_previous)
{
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI);
    float *m;
    oct_engine *eng = engine_for(64, 3, 2, 3, &p, &m);
    oct_plan *before = eng->plan;
    uint64_t g0[OCT_PK_COUNT];
    memcpy(g0, before->gen, sizeof g0);
    float w3 = before->window[3];

    /* built aside and dropped: shares the arrays, which stay valid */
    oct_params q = p;
    q.gsc[0] = 2.0f;
    oct_plan *np = NULL;
    oct_error e = {{0}};
    ck_assert_int_eq(oct_plan_build(eng, &q, before, &np, &e), OCT_OK);
    ck_assert(np->window == before->window);
    oct_plan_free(np);
    ck_assert_float_eq(before->window[3], w3); /* ASan: no use after free */

    /* positions that decrease: the build fails (k-lin taps), nothing moves */
    q = p;
    q.klin = OCT_KLIN_LINEAR;
    q.klin_coef[1] = -5.0;
    np = (oct_plan *)0x1;
    ck_assert_int_eq(oct_plan_build(eng, &q, before, &np, &e), OCT_EINVAL);
    ck_assert_ptr_null(np);
    ck_assert_ptr_nonnull(strstr(e.msg, "klin"));
    /* through the engine: refused, the same plan object and values stay */
    ck_assert_int_eq(oct_engine_set_params(eng, &q, &e), OCT_EINVAL);
    ck_assert_ptr_eq(eng->plan, before);
    ck_assert_mem_eq(eng->plan->gen, g0, sizeof g0);
    ck_assert(!memcmp(oct_engine_params(eng), &p, sizeof p));
    ck_assert_float_eq(eng->plan->window[3], w3);
    oct_engine_destroy(eng);
    free(m);
}
END_TEST

/* A backend whose prepare did its work for the new plan and then failed:
 * the engine keeps its plan, and the backend, comparing generations at the
 * next frame, goes back to it (the same bytes as before the attempt). */
static oct_err (*real_prepare)(oct_engine *, const oct_plan *, oct_error *);
static oct_err failing_prepare(oct_engine *eng, const oct_plan *plan, oct_error *e)
{
    oct_err err = real_prepare(eng, plan, e);
    if (err)
        return err;
    return oct_error_set(e, OCT_EDEVICE, "injected: prepare failed after its work");
}

/* Two engines (fresh vs changed): float32 within 1e-6 relative L2 (the GPU
 * may sum in another order), gray levels within one. */
static bool close_products(const oct_products *a, const oct_products *b)
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *x = &a->img[m][k], *y = &b->img[m][k];
            if (x->present != y->present || (x->present && x->count != y->count))
                return false;
            if (!x->present)
                continue;
            double num = 0, den = 0;
            for (size_t i = 0; i < x->count; i++) {
                double d = (double)x->f32[i] - y->f32[i];
                num += d * d, den += (double)x->f32[i] * x->f32[i];
                if (abs((int)x->u8[i] - (int)y->u8[i]) > 1)
                    return false;
            }
            if (num > 1e-12 * den)
                return false;
        }
    return true;
}

static bool same_products(const oct_products *a, const oct_products *b)
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *x = &a->img[m][k], *y = &b->img[m][k];
            if (x->present != y->present)
                return false;
            if (!x->present)
                continue;
            if (x->count != y->count || memcmp(x->u8, y->u8, x->count) ||
                memcmp(x->f32, y->f32, x->count * sizeof(float)))
                return false;
        }
    return true;
}

START_TEST(test_failed_prepare_resyncs)
{
    oct_params p;
    oct_params_default(&p);
    p.methods = OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI);
    p.products = OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) |
                 OCT_PRODUCT_BIT(OCT_KIND_XSEC_V) | OCT_PRODUCT_F32;
    p.enface_count = 2, p.lag_lo = -1, p.lag_hi = 1;
    float *m;
    oct_engine *eng = engine_for(128, 6, 4, 6, &p, &m);
    const size_t n = 128 * 6 * 4;
    uint16_t *f = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++)
        f[i] = (uint16_t)(1500 + (i * 7919) % 1000);
    oct_products *o0 = oct_products_create(), *o1 = oct_products_create();
    oct_error e = {{0}};
    ck_assert_msg(oct_engine_process(eng, f, n * 2, o0, &e) == OCT_OK, "%s", e.msg);

    oct_backend_ops ops = *eng->ops;
    const oct_backend_ops *orig = eng->ops;
    real_prepare = ops.prepare;
    ops.prepare = failing_prepare;
    eng->ops = &ops;
    oct_params q = p; /* everything the backend derives something from */
    q.window = OCT_WINDOW_BLACKMAN, q.freq_cutoff = 3, q.lag_lo = -4, q.lag_hi = 2;
    q.enface_start = 2, q.enface_step = 3, q.xsec_v = 1, q.klin = OCT_KLIN_CUBIC;
    q.klin_coef[1] = 128, q.products = OCT_PRODUCTS_KNOWN, q.disp_a2 = 4.0f;
    oct_plan *before = eng->plan;
    ck_assert_int_eq(oct_engine_set_params(eng, &q, &e), OCT_EDEVICE);
    ck_assert_ptr_eq(eng->plan, before);
    ck_assert(!memcmp(oct_engine_params(eng), &p, sizeof p));
    ck_assert_msg(oct_engine_process(eng, f, n * 2, o1, &e) == OCT_OK, "%s", e.msg);
    ck_assert_msg(same_products(o0, o1), "after a failed prepare the frame differs");

    /* the same change with a working backend: as a fresh engine with q */
    eng->ops = orig;
    ck_assert_msg(oct_engine_set_params(eng, &q, &e) == OCT_OK, "%s", e.msg);
    ck_assert_msg(oct_engine_process(eng, f, n * 2, o1, &e) == OCT_OK, "%s", e.msg);
    float *m2;
    oct_engine *fresh = engine_for(128, 6, 4, 6, &q, &m2);
    ck_assert_msg(oct_engine_process(fresh, f, n * 2, o0, &e) == OCT_OK, "%s", e.msg);
    ck_assert_msg(close_products(o0, o1), "set_params after a failed one differs from a fresh engine");
    ck_assert(o1->img[OCT_METHOD_MSI][OCT_KIND_SLAB_MEAN].present);
    oct_engine_destroy(fresh);
    oct_products_destroy(o0);
    oct_products_destroy(o1);
    free(f);
    free(m2);
    oct_engine_destroy(eng);
    free(m);
}
END_TEST

int main(void)
{
    const char *be = getenv("OCT_TEST_BACKEND");
    if (be && !strcmp(be, "cuda")) { /* the device side of a failed prepare */
        char name[128];
        oct_error e = {{0}};
        if (!oct_cuda_built() || oct_cuda_probe(0, name, sizeof name, &e) != OCT_OK) {
            printf("SKIP engine_plan on cuda: %s\n", oct_cuda_built() ? e.msg : "CUDA not built in");
            return 0;
        }
        g_backend = OCT_BACKEND_CUDA;
        Suite *s = suite_create("engine_plan-cuda");
        TCase *tc = tcase_create("plan");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_failed_prepare_resyncs);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, CK_NOFORK); /* never fork after CUDA was initialised */
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
    }
    Suite *s = suite_create("engine_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, test_kind_table);
    tcase_add_test(tc, test_layout_volume);
    tcase_add_test(tc, test_cost_model);
    tcase_add_test(tc, test_generations);
    tcase_add_test(tc, test_failed_plan_keeps_previous);
    tcase_add_test(tc, test_failed_prepare_resyncs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
