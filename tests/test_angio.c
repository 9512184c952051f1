/* test_angio.c - repeated B-scans and angiography (issue 18, SPEC 10.3).
 *
 *  - struct, median, sv, decor and ssada against a float64 reference written
 *    here (direct DFT sums of SPEC 10.3 on random spectra, not the code under
 *    test), relative L2 <= 1e-4, for several M, N, R (odd and even), F, K and
 *    band widths, both output layouts, intensities given or computed;
 *  - hand-computed values: c = 1 when a = b = 0, even-R median, sv, struct;
 *  - configuration and argument errors name the key and the range;
 *  - repeat alignment: integer axial and axial+lateral shifts recovered
 *    exactly and the aligned static speckle decorrelates to 0; sub-pixel
 *    shifts of a smooth image within 0.1 px; off by default;
 *  - physics on octsim's flow phantom (R = 4): mean ssada in the vessel >= 4x
 *    static tissue, en-face (slab maximum) CNR >= 5, numbers printed;
 *  - aligned metrics (flow phantom with axial / lateral motion) against the
 *    float64 reference resampled by the estimated shifts, shifts near the truth;
 *  - CUDA (with a device; CK_NOFORK): equal to the CPU and the reference,
 *    alignment included (shifts within 0.01 px of the CPU's).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angio.h"
#include "oct_config.h"
#include "oct_engine.h"
#include "oct_ipc.h"
#include "lib/testutil.h"
#include "../tools/octsim/flow.h"
/* the fused CUDA kernel's body, run here by pthreads with a barrier for
 * __syncthreads (one thread: a barrier of one) */
#include <pthread.h>
static pthread_barrier_t af_barrier;
#define AF_SYNC() pthread_barrier_wait(&af_barrier)
#include "angio_fused.cuh"

/* ---- float64 reference (SPEC 10.3 written out) -------------------------- */

typedef struct ref_case {
    uint32_t M, N, R, F;
    int K;
    double width;
} ref_case;

/* |sum_n g[n] x[n] e^(-2 pi i d n / M)| for d < D (0 for d < F), g NULL = 1 */
static void ref_mag(const float *x, const double *g, uint32_t M, uint32_t F, double *out)
{
    const uint32_t D = M / 2 + 1;
    for (uint32_t d = 0; d < D; d++) {
        if (d < F) {
            out[d] = 0;
            continue;
        }
        double re = 0, im = 0;
        for (uint32_t n = 0; n < M; n++) {
            double v = (g ? g[n] : 1.0) * x[n];
            uint32_t ph = (uint32_t)(((uint64_t)d * n) % M);
            double t = -2 * M_PI * ph / M;
            re += v * cos(t);
            im += v * sin(t);
        }
        out[d] = sqrt(re * re + im * im);
    }
}

static double ref_c(double a, double b)
{
    return a == 0 && b == 0 ? 1.0 : 2 * a * b / (a * a + b * b);
}

/* A: R x N x D; metric images [N][D] (volume layout) */
static void ref_metrics(const double *A, uint32_t R, uint32_t N, uint32_t D, double *st,
                        double *md, double *sv, double *dc)
{
    double v[OCT_ANGIO_REPEATS_MAX];
    for (size_t p = 0; p < (size_t)N * D; p++) {
        double s = 0;
        for (uint32_t r = 0; r < R; r++)
            s += v[r] = A[r * (size_t)N * D + p];
        s /= R;
        double q = 0, c = 0;
        for (uint32_t r = 0; r < R; r++)
            q += (v[r] - s) * (v[r] - s);
        for (uint32_t r = 0; r + 1 < R; r++)
            c += ref_c(v[r], v[r + 1]);
        if (st)
            st[p] = s;
        if (sv)
            sv[p] = q / R;
        if (dc)
            dc[p] = 1 - c / (R - 1);
        if (md) {
            for (uint32_t i = 0; i < R; i++) /* selection: plain and obviously right */
                for (uint32_t k = i + 1; k < R; k++)
                    if (v[k] < v[i]) {
                        double t = v[i];
                        v[i] = v[k];
                        v[k] = t;
                    }
            md[p] = R % 2 ? v[R / 2] : 0.5 * (v[R / 2 - 1] + v[R / 2]);
        }
    }
}

/* Random pre-processed spectra: fringes at a few depths that each repeat
 * keeps (static) or re-draws (moving), plus noise: decor spans its range. */
static float *random_spectra(const ref_case *c, uint64_t seed)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    float *x = malloc(sizeof(float) * (size_t)c->R * c->N * c->M);
    for (uint32_t a = 0; a < c->N; a++) {
        double dep[3], ph[3], amp[3];
        for (int i = 0; i < 3; i++) {
            dep[i] = 1 + tu_rng_uniform(&rng) * (c->M / 2 - 2);
            ph[i] = 2 * M_PI * tu_rng_uniform(&rng);
            amp[i] = 20 * tu_rng_uniform(&rng);
        }
        for (uint32_t r = 0; r < c->R; r++) {
            float *s = x + ((size_t)r * c->N + a) * c->M;
            double ph2 = 2 * M_PI * tu_rng_uniform(&rng); /* fringe 2 moves */
            for (uint32_t n = 0; n < c->M; n++) {
                double v = 5 * tu_rng_normal(&rng);
                for (int i = 0; i < 3; i++)
                    v += amp[i] * cos(2 * M_PI * dep[i] * n / c->M + (i == 2 ? ph2 : ph[i]));
                s[n] = (float)v;
            }
        }
    }
    return x;
}

static double *ref_band_gains(uint32_t M, int K, double width)
{
    double *g = malloc(sizeof(double) * (size_t)K * M);
    double w = width * M / K;
    for (int k = 0; k < K; k++)
        for (uint32_t n = 0; n < M; n++) {
            double u = (n - (k + 0.5) * M / K) / w;
            g[(size_t)k * M + n] = exp(-4 * log(2.0) * u * u);
        }
    return g;
}

/* Every metric of case c: float64 reference into ref[m] ([N][D] each). */
static void ref_all(const ref_case *c, const float *x, double *ref[OCT_ANGIO_M_COUNT], double *A)
{
    const uint32_t M = c->M, N = c->N, R = c->R, D = M / 2 + 1;
    const size_t img = (size_t)N * D;
    for (size_t j = 0; j < (size_t)R * N; j++)
        ref_mag(x + j * M, NULL, M, c->F, A + j * D);
    ref_metrics(A, R, N, D, ref[0], ref[1], ref[2], ref[3]);
    double *g = ref_band_gains(M, c->K, c->width);
    double *Ak = malloc(sizeof(double) * R * img), *dk = malloc(sizeof(double) * img);
    memset(ref[4], 0, sizeof(double) * img);
    for (int k = 0; k < c->K; k++) {
        for (size_t j = 0; j < (size_t)R * N; j++)
            ref_mag(x + j * M, g + (size_t)k * M, M, c->F, Ak + j * D);
        ref_metrics(Ak, R, N, D, NULL, NULL, NULL, dk);
        for (size_t p = 0; p < img; p++)
            ref[4][p] += dk[p] / c->K;
    }
    free(g);
    free(Ak);
    free(dk);
}

static const ref_case cases[] = {
    {64, 5, 2, 0, 1, 1.0},   {256, 12, 4, 3, 4, 1.0}, {128, 7, 5, 0, 3, 0.7},
    {512, 6, 3, 10, 16, 2.5}, {1024, 3, 6, 8, 4, 1.0},
};

/* Runs the CPU plan on case c; layout 0 = [N][D], 1 = [D][N]; given_A:
 * intensities passed in (the float64 reference rounded to float). */
static void check_case(const ref_case *c, int layout, bool given_A, uint32_t align, int threads)
{
    const uint32_t M = c->M, N = c->N, R = c->R, D = M / 2 + 1;
    const size_t img = (size_t)N * D;
    float *x = random_spectra(c, 1000 + M + R * 7 + (uint64_t)layout);
    double *ref[OCT_ANGIO_M_COUNT], *A = malloc(sizeof(double) * R * img);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        ref[m] = malloc(sizeof(double) * img);
    ref_all(c, x, ref, A);
    float *Af = NULL;
    if (given_A) {
        Af = malloc(sizeof(float) * R * img);
        for (size_t i = 0; i < R * img; i++)
            Af[i] = (float)A[i];
    }
    oct_angio_config cfg;
    oct_angio_config_default(&cfg, M, N, R);
    cfg.freq_cutoff = (int32_t)c->F;
    cfg.bands = c->K;
    cfg.band_width = (float)c->width;
    cfg.threads = threads;
    cfg.align = align;
    oct_angio *a;
    oct_error e = {{0}};
    ck_assert_msg(oct_angio_create(&a, &cfg, &e) == OCT_OK, "%s", e.msg);
    oct_angio_out o = {{0}, layout ? 1 : D, layout ? N : 1};
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
        o.img[m] = malloc(sizeof(float) * img);
        for (size_t i = 0; i < img; i++)
            o.img[m][i] = NAN; /* every pixel must be written */
    }
    ck_assert_msg(oct_angio_group(a, Af, x, &o, &e) == OCT_OK, "%s", e.msg);
    float *got = malloc(sizeof(float) * img);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
        for (uint32_t n = 0; n < N; n++)
            for (uint32_t d = 0; d < D; d++)
                got[(size_t)n * D + d] = o.img[m][n * o.stride_n + d * o.stride_d];
        char what[96], msg[512];
        snprintf(what, sizeof what, "%s M=%u N=%u R=%u F=%u K=%d w=%g layout=%d A=%d",
                 oct_angio_metric_name(m), M, N, R, c->F, c->K, c->width, layout, given_A);
        uint32_t shape[2] = {N, D};
        ck_assert_msg(tu_check_f32(what, got, ref[m], img, 2, shape, TU_TOL_FP32, msg, sizeof msg),
                      "%s", msg);
        free(o.img[m]);
        free(ref[m]);
    }
    if (align) { /* random repeats: whatever was estimated, never more than the search range */
        float dz[OCT_ANGIO_REPEATS_MAX], dx[OCT_ANGIO_REPEATS_MAX];
        oct_angio_shifts(a, dz, dx);
        ck_assert(dz[0] == 0 && dx[0] == 0);
    }
    free(got);
    free(A);
    free(Af);
    free(x);
    oct_angio_destroy(a);
}

START_TEST(t_reference)
{
    const ref_case *c = &cases[_i];
    for (int layout = 0; layout < 2; layout++)
        for (int given = 0; given < 2; given++)
            check_case(c, layout, given, 0, layout ? 1 : 0);
}
END_TEST

/* ---- hand-computed values ------------------------------------------------ */

START_TEST(t_hand_values)
{
    /* one A-scan, M = 64 (D = 33); pixels d = 0..3 hold chosen repeat values */
    const uint32_t M = 64, N = 1, D = 33;
    for (uint32_t R = 3; R <= 4; R++) {
        static const float vals3[4][3] = {{0, 0, 0}, {0, 0, 5}, {2, 2, 2}, {5, 1, 3}};
        static const float vals4[4][4] = {{0, 0, 0, 0}, {4, 1, 3, 2}, {1, 1, 3, 3}, {0, 2, 0, 2}};
        float *A = calloc((size_t)R * D, sizeof(float));
        for (uint32_t r = 0; r < R; r++)
            for (int d = 0; d < 4; d++)
                A[r * D + d] = R == 3 ? vals3[d][r] : vals4[d][r];
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, M, N, R);
        cfg.metrics = OCT_ANGIO_METRICS_ALL & ~(1u << OCT_ANGIO_M_SSADA);
        oct_angio *a;
        oct_error e = {{0}};
        ck_assert_msg(oct_angio_create(&a, &cfg, &e) == OCT_OK, "%s", e.msg);
        float out[OCT_ANGIO_M_COUNT][33];
        oct_angio_out o = {{out[0], out[1], out[2], out[3], NULL}, D, 1};
        ck_assert_msg(oct_angio_group(a, A, NULL, &o, &e) == OCT_OK, "%s", e.msg);
        /* expected, by hand */
        static const double st3[4] = {0, 5.0 / 3, 2, 3}, md3[4] = {0, 0, 2, 3};
        static const double sv3[4] = {0, 50.0 / 9, 0, 8.0 / 3};
        /* decor: (0,0,0): c = 1, 1 -> 0; (0,0,5): c = 1, 0 -> 0.5; (2,2,2): 0;
         * (5,1,3): c = 10/26, 6/10 -> 1 - (10/26 + 0.6)/2 */
        static const double dc3[4] = {0, 0.5, 0, 1 - (10.0 / 26 + 0.6) / 2};
        static const double st4[4] = {0, 2.5, 2, 1}, md4[4] = {0, 2.5, 2, 1};
        static const double sv4[4] = {0, 1.25, 1, 1};
        /* (4,1,3,2): c = 8/17, 6/10, 12/13; (1,1,3,3): 1, 6/10, 1; (0,2,0,2): 0, 0, 0 */
        static const double dc4[4] = {0, 1 - (8.0 / 17 + 0.6 + 12.0 / 13) / 3,
                                      1 - (1 + 0.6 + 1) / 3, 1};
        for (int d = 0; d < 4; d++) {
            const double *st = R == 3 ? st3 : st4, *md = R == 3 ? md3 : md4;
            const double *sv = R == 3 ? sv3 : sv4, *dc = R == 3 ? dc3 : dc4;
            ck_assert_msg(fabs(out[0][d] - st[d]) < 1e-6, "R=%u d=%d struct %g != %g", R, d,
                          out[0][d], st[d]);
            ck_assert_msg(fabs(out[1][d] - md[d]) < 1e-6, "R=%u d=%d median %g != %g", R, d,
                          out[1][d], md[d]);
            ck_assert_msg(fabs(out[2][d] - sv[d]) < 1e-5, "R=%u d=%d sv %g != %g", R, d,
                          out[2][d], sv[d]);
            ck_assert_msg(fabs(out[3][d] - dc[d]) < 1e-6, "R=%u d=%d decor %g != %g", R, d,
                          out[3][d], dc[d]);
        }
        /* pixels past the chosen ones are all zero: a = b = 0 everywhere -> decor 0 */
        for (uint32_t d = 4; d < D; d++)
            ck_assert_msg(out[3][d] == 0.0f && out[0][d] == 0.0f, "d=%u decor %g", d, out[3][d]);
        oct_angio_destroy(a);
        free(A);
    }
}
END_TEST

/* F > 0 and ssada: the rows below F are zero in every band -> decor and ssada 0 */
START_TEST(t_cutoff_rows)
{
    ref_case c = {128, 4, 3, 6, 4, 1.0};
    float *x = random_spectra(&c, 77);
    oct_angio_config cfg;
    oct_angio_config_default(&cfg, c.M, c.N, c.R);
    cfg.freq_cutoff = 6;
    oct_angio *a;
    oct_error e = {{0}};
    ck_assert_msg(oct_angio_create(&a, &cfg, &e) == OCT_OK, "%s", e.msg);
    const uint32_t D = c.M / 2 + 1;
    float *out[OCT_ANGIO_M_COUNT];
    oct_angio_out o = {{0}, D, 1};
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        o.img[m] = out[m] = calloc((size_t)c.N * D, sizeof(float));
    ck_assert_msg(oct_angio_group(a, NULL, x, &o, &e) == OCT_OK, "%s", e.msg);
    for (uint32_t n = 0; n < c.N; n++)
        for (uint32_t d = 0; d < 6; d++)
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                ck_assert_msg(out[m][n * D + d] == 0.0f, "%s [%u][%u] = %g below F",
                              oct_angio_metric_name(m), n, d, out[m][n * D + d]);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        free(out[m]);
    free(x);
    oct_angio_destroy(a);
}
END_TEST

/* ---- errors ------------------------------------------------------------------ */

static void expect_bad(const oct_angio_config *c, const char *needle)
{
    oct_angio *a = (oct_angio *)0x1;
    oct_error e = {{0}};
    ck_assert_int_eq(oct_angio_create(&a, c, &e), OCT_EINVAL);
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(e.msg, needle), "message '%s' does not name '%s'", e.msg, needle);
}

START_TEST(t_errors)
{
    oct_angio_config c;
    oct_angio_config_default(&c, 256, 8, 1);
    expect_bad(&c, "geometry.repeats = 1");
    c.repeats = OCT_ANGIO_REPEATS_MAX + 1;
    expect_bad(&c, "geometry.repeats");
    c.repeats = 4;
    c.samples = 100;
    expect_bad(&c, "geometry.samples = 100");
    c.samples = 256;
    c.bands = 0;
    expect_bad(&c, "angio.bands = 0");
    c.bands = 17;
    expect_bad(&c, "[1, 16]");
    c.bands = 4;
    c.band_width = 0;
    expect_bad(&c, "angio.band_width");
    c.band_width = NAN;
    expect_bad(&c, "angio.band_width");
    c.band_width = 1;
    c.align = 3;
    expect_bad(&c, "angio.align = 3");
    c.align = 0;
    c.metrics = 0;
    expect_bad(&c, "angio.metrics");
    c.metrics = 0x20;
    expect_bad(&c, "angio.metrics = 0x20");
    c.metrics = OCT_ANGIO_METRICS_ALL;
    c.freq_cutoff = 200;
    expect_bad(&c, "freq_cutoff = 200");
    c.freq_cutoff = 0;
    /* arguments of a group */
    oct_angio *a;
    oct_error e = {{0}};
    ck_assert_int_eq(oct_angio_create(&a, &c, &e), OCT_OK);
    const uint32_t D = 129;
    float *buf = calloc((size_t)8 * D * 4 * 2, sizeof(float));
    oct_angio_out o = {{buf, buf, buf, buf, NULL}, D, 1};
    ck_assert_int_eq(oct_angio_group(a, NULL, buf, &o, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "ssada"), "%s", e.msg);
    o.img[4] = buf;
    ck_assert_int_eq(oct_angio_group(a, buf, NULL, &o, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "spectra"), "%s", e.msg);
    ck_assert_int_eq(oct_angio_group(a, NULL, NULL, &o, &e), OCT_EINVAL);
    o.stride_n = 7;
    ck_assert_int_eq(oct_angio_group(a, buf, buf, &o, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "strides (7, 1)"), "%s", e.msg);
    ck_assert_str_eq(oct_angio_metric_name(4), "ssada");
    ck_assert_ptr_null(oct_angio_metric_name(5));
    free(buf);
    oct_angio_destroy(a);
    oct_angio_destroy(NULL);
}
END_TEST

/* ---- alignment ------------------------------------------------------------------ */

/* Speckle-like image: |complex Gaussian| smoothed over 2x2, big enough to crop. */
static float *speckle(uint32_t W, uint32_t H, uint64_t seed)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    float *raw = malloc(sizeof(float) * W * H), *img = malloc(sizeof(float) * W * H);
    for (size_t i = 0; i < (size_t)W * H; i++) {
        double re = tu_rng_normal(&rng), im = tu_rng_normal(&rng);
        raw[i] = (float)sqrt(re * re + im * im);
    }
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++) {
            uint32_t x1 = x + 1 < W ? x + 1 : x, y1 = y + 1 < H ? y + 1 : y;
            img[(size_t)y * W + x] = 0.25f * (raw[(size_t)y * W + x] + raw[(size_t)y * W + x1] +
                                              raw[(size_t)y1 * W + x] + raw[(size_t)y1 * W + x1]);
        }
    free(raw);
    return img;
}

START_TEST(t_align_integer)
{
    const uint32_t M = 256, D = M / 2 + 1, N = 48, R = 4, pad = 16;
    const int sz[4] = {0, 3, -5, 7}, sx[4] = {0, 2, -3, 1};
    const uint32_t W = D + 2 * pad, H = N + 2 * pad;
    float *big = speckle(W, H, 5);
    float *A = malloc(sizeof(float) * R * N * D);
    for (int lateral = 0; lateral < 2; lateral++) {
        /* A_r[n][d] = A_0[n - sx_r][d - sz_r]: repeat r moved by (sx, sz) */
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t n = 0; n < N; n++)
                for (uint32_t d = 0; d < D; d++) {
                    int bx = (int)(n + pad) - (lateral ? sx[r] : 0), bz = (int)(d + pad) - sz[r];
                    A[((size_t)r * N + n) * D + d] = big[(size_t)bx * W + bz];
                }
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, M, N, R);
        cfg.metrics = OCT_ANGIO_DECOR | OCT_ANGIO_STRUCT;
        float *dec = malloc(sizeof(float) * N * D), *st = malloc(sizeof(float) * N * D);
        oct_angio_out o = {{st, NULL, NULL, dec, NULL}, D, 1};
        oct_error e = {{0}};
        oct_angio *a;
        /* unaligned: the shifted speckle decorrelates */
        ck_assert_int_eq(oct_angio_create(&a, &cfg, &e), OCT_OK);
        ck_assert_int_eq(oct_angio_group(a, A, NULL, &o, &e), OCT_OK);
        double mean_off = 0;
        for (size_t i = 0; i < (size_t)N * D; i++)
            mean_off += dec[i] / ((double)N * D);
        ck_assert_msg(mean_off > 0.03, "unaligned decor %g", mean_off);
        oct_angio_destroy(a);
        cfg.align = lateral ? OCT_ANGIO_ALIGN_LATERAL : OCT_ANGIO_ALIGN_AXIAL;
        ck_assert_int_eq(oct_angio_create(&a, &cfg, &e), OCT_OK);
        ck_assert_int_eq(oct_angio_group(a, A, NULL, &o, &e), OCT_OK);
        float dz[4], dx[4];
        oct_angio_shifts(a, dz, dx);
        for (uint32_t r = 0; r < R; r++) {
            ck_assert_msg(fabsf(dz[r] - sz[r]) < 0.05f, "lateral=%d repeat %u: dz %g, true %d",
                          lateral, r, dz[r], sz[r]);
            ck_assert_msg(fabsf(dx[r] - (lateral ? sx[r] : 0)) < 0.05f,
                          "lateral=%d repeat %u: dx %g, true %d", lateral, r, dx[r],
                          lateral ? sx[r] : 0);
        }
        /* aligned: decor ~ 0 away from the clamped borders */
        double worst = 0;
        for (uint32_t n = 8; n < N - 8; n++)
            for (uint32_t d = 8; d < D - 8; d++)
                worst = fmax(worst, dec[(size_t)n * D + d]);
        ck_assert_msg(worst < 1e-3, "lateral=%d aligned decor up to %g", lateral, worst);
        oct_angio_destroy(a);
        free(dec);
        free(st);
    }
    free(A);
    free(big);
}
END_TEST

/* smooth test image: a few broad Gaussian blobs, evaluated at any (x, z) */
static double blobs(double x, double z)
{
    return 10 * exp(-((x - 20) * (x - 20) + (z - 40) * (z - 40)) / 60.0) +
           6 * exp(-((x - 33) * (x - 33) + (z - 80) * (z - 80)) / 120.0) +
           8 * exp(-((x - 12) * (x - 12) + (z - 100) * (z - 100)) / 40.0);
}

START_TEST(t_align_subpixel)
{
    const uint32_t M = 256, D = M / 2 + 1, N = 48, R = 3;
    const double sz[3] = {0, 1.4, -2.7}, sx[3] = {0, -1.3, 0.6};
    float *A = malloc(sizeof(float) * R * N * D);
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t n = 0; n < N; n++)
            for (uint32_t d = 0; d < D; d++)
                A[((size_t)r * N + n) * D + d] = (float)blobs(n - sx[r], d - sz[r]);
    oct_angio_config cfg;
    oct_angio_config_default(&cfg, M, N, R);
    cfg.metrics = OCT_ANGIO_STRUCT;
    cfg.align = OCT_ANGIO_ALIGN_LATERAL;
    float *st = malloc(sizeof(float) * N * D);
    oct_angio_out o = {{st, NULL, NULL, NULL, NULL}, D, 1};
    oct_error e = {{0}};
    oct_angio *a;
    ck_assert_int_eq(oct_angio_create(&a, &cfg, &e), OCT_OK);
    ck_assert_int_eq(oct_angio_group(a, A, NULL, &o, &e), OCT_OK);
    float dz[3], dx[3];
    oct_angio_shifts(a, dz, dx);
    for (uint32_t r = 0; r < R; r++) {
        ck_assert_msg(fabs(dz[r] - sz[r]) < 0.1 && fabs(dx[r] - sx[r]) < 0.1,
                      "repeat %u: (dx, dz) = (%g, %g), true (%g, %g)", r, dx[r], dz[r], sx[r],
                      sz[r]);
    }
    /* the aligned average is the unshifted image (bilinear error of smooth blobs) */
    double err = 0, nrm = 0;
    for (uint32_t n = 4; n < N - 4; n++)
        for (uint32_t d = 4; d < D - 4; d++) {
            double t = blobs(n, d);
            err += pow(st[(size_t)n * D + d] - t, 2);
            nrm += t * t;
        }
    ck_assert_msg(sqrt(err / nrm) < 0.02, "aligned struct rel. error %g", sqrt(err / nrm));
    /* off by default */
    oct_angio_destroy(a);
    oct_angio_config_default(&cfg, M, N, R);
    ck_assert_int_eq(cfg.align, OCT_ANGIO_ALIGN_OFF);
    cfg.metrics = OCT_ANGIO_STRUCT;
    ck_assert_int_eq(oct_angio_create(&a, &cfg, &e), OCT_OK);
    ck_assert_int_eq(oct_angio_group(a, A, NULL, &o, &e), OCT_OK);
    oct_angio_shifts(a, dz, dx);
    for (uint32_t r = 0; r < R; r++)
        ck_assert(dz[r] == 0 && dx[r] == 0);
    oct_angio_destroy(a);
    free(st);
    free(A);
}
END_TEST

/* Alignment on with random repeats: metrics still match the float64
 * reference of the same (resampled) intensities?  The reference cannot
 * resample independently without re-implementing it, so: estimated shifts
 * of identical repeats are exactly 0 and the metrics equal the unaligned ones. */
START_TEST(t_align_identity)
{
    ref_case c = {128, 10, 3, 2, 4, 1.0};
    float *x = random_spectra(&c, 3);
    /* make every repeat equal to repeat 0 */
    for (uint32_t r = 1; r < c.R; r++)
        memcpy(x + (size_t)r * c.N * c.M, x, sizeof(float) * c.N * c.M);
    const uint32_t D = c.M / 2 + 1;
    float *out[2][OCT_ANGIO_M_COUNT];
    for (int al = 0; al < 2; al++) {
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, c.M, c.N, c.R);
        cfg.freq_cutoff = 2;
        cfg.align = al ? OCT_ANGIO_ALIGN_LATERAL : 0;
        oct_angio *a;
        oct_error e = {{0}};
        ck_assert_int_eq(oct_angio_create(&a, &cfg, &e), OCT_OK);
        oct_angio_out o = {{0}, D, 1};
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            o.img[m] = out[al][m] = malloc(sizeof(float) * c.N * D);
        ck_assert_int_eq(oct_angio_group(a, NULL, x, &o, &e), OCT_OK);
        float dz[3], dx[3];
        oct_angio_shifts(a, dz, dx);
        for (uint32_t r = 0; r < c.R; r++)
            ck_assert_msg(fabsf(dz[r]) < 1e-3f && fabsf(dx[r]) < 1e-3f, "repeat %u: %g %g", r,
                          dz[r], dx[r]);
        oct_angio_destroy(a);
    }
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
        ck_assert_msg(!memcmp(out[0][m], out[1][m], sizeof(float) * c.N * D), "%s differs",
                      oct_angio_metric_name(m));
        free(out[0][m]);
        free(out[1][m]);
    }
    free(x);
}
END_TEST

/* ---- physics: octsim's flow phantom ---------------------------------------------- */

/* x~ = hann . (x - frame mean), the engine's pre-processing with
 * background frame_mean and a Hann window (SPEC 2.1). */
static float *preprocess(const uint16_t *frame, uint32_t M, size_t spectra)
{
    double *mean = calloc(M, sizeof(double));
    for (size_t j = 0; j < spectra; j++)
        for (uint32_t n = 0; n < M; n++)
            mean[n] += frame[j * M + n];
    float *x = malloc(sizeof(float) * spectra * M);
    for (size_t j = 0; j < spectra; j++)
        for (uint32_t n = 0; n < M; n++) {
            double w = 0.5 - 0.5 * cos(2 * M_PI * n / (M - 1));
            x[j * M + n] = (float)(w * (frame[j * M + n] - mean[n] / spectra));
        }
    free(mean);
    return x;
}

START_TEST(t_flow_physics)
{
    const uint32_t M = 512, N = 96, G = 24, R = 4, D = M / 2 + 1;
    sim_flow f;
    sim_flow_default(&f, M, N, G, R);
    uint16_t *frame = malloc(sizeof(uint16_t) * (size_t)G * R * N * M);
    uint8_t *lab = malloc((size_t)G * N * D);
    oct_error e = {{0}};
    ck_assert_msg(sim_flow_frame(&f, frame, lab, &e) == OCT_OK, "%s", e.msg);
    float *x = preprocess(frame, M, (size_t)G * R * N);
    oct_angio_config cfg;
    oct_angio_config_default(&cfg, M, N, R);
    cfg.freq_cutoff = 4;
    oct_angio *a;
    ck_assert_msg(oct_angio_create(&a, &cfg, &e) == OCT_OK, "%s", e.msg);
    float *vol[OCT_ANGIO_M_COUNT];
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        vol[m] = malloc(sizeof(float) * (size_t)G * N * D);
    for (uint32_t g = 0; g < G; g++) {
        oct_angio_out o = {{0}, D, 1};
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            o.img[m] = vol[m] + (size_t)g * N * D;
        ck_assert_msg(oct_angio_group(a, NULL, x + (size_t)g * R * N * M, &o, &e) == OCT_OK, "%s",
                      e.msg);
    }
    uint32_t d0, d1;
    sim_flow_slab(&f, &d0, &d1);
    for (int m = OCT_ANGIO_M_SV; m < OCT_ANGIO_M_COUNT; m++) {
        sim_flow_score s;
        sim_flow_evaluate(lab, vol[m], G, N, D, d0, d1, &s);
        printf("flow phantom M=%u N=%u G=%u R=%u speed %.1f, %-6s: vessel %.4g, tissue %.4g "
               "(ratio %.2f); en-face slab_max [%u, %u): vessel %.4g +- %.3g, background "
               "%.4g +- %.3g, CNR %.2f (pooled sd: %.2f; slab_mean: %.2f)\n",
               M, N, G, R, f.speed, oct_angio_metric_name(m), s.vessel_mean, s.tissue_mean,
               s.ratio, d0, d1, s.enface_vessel_mean, s.enface_vessel_sd, s.enface_bg_mean,
               s.enface_bg_sd, s.cnr, s.cnr_pooled, s.cnr_mean);
        fflush(stdout);
        if (m == OCT_ANGIO_M_SSADA) {
            ck_assert_msg(s.ratio >= 4, "ssada vessel/tissue %g < 4", s.ratio);
            ck_assert_msg(s.cnr >= 5, "ssada en-face CNR %g < 5", s.cnr);
        }
        if (m == OCT_ANGIO_M_DECOR)
            ck_assert_msg(s.ratio >= 2, "decor vessel/tissue %g", s.ratio);
    }
    /* no flow: the vessel is as static as the tissue */
    f.speed = 0;
    ck_assert_msg(sim_flow_frame(&f, frame, lab, &e) == OCT_OK, "%s", e.msg);
    free(x);
    x = preprocess(frame, M, (size_t)G * R * N);
    for (uint32_t g = 0; g < G; g++) {
        oct_angio_out o = {{0}, D, 1};
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            o.img[m] = vol[m] + (size_t)g * N * D;
        ck_assert_int_eq(oct_angio_group(a, NULL, x + (size_t)g * R * N * M, &o, &e), OCT_OK);
    }
    sim_flow_score s;
    sim_flow_evaluate(lab, vol[OCT_ANGIO_M_SSADA], G, N, D, d0, d1, &s);
    printf("flow phantom, speed 0: ssada vessel %.4g, tissue %.4g (ratio %.2f), CNR %.2f\n",
           s.vessel_mean, s.tissue_mean, s.ratio, s.cnr);
    ck_assert_msg(s.ratio < 2, "no flow, yet vessel/tissue ssada %g", s.ratio);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        free(vol[m]);
    free(x);
    free(frame);
    free(lab);
    oct_angio_destroy(a);
}
END_TEST

/* Bulk axial motion between repeats (issue 18 item 2): the static tissue
 * decorrelates and the vessel is lost; axial alignment brings it back. */
START_TEST(t_flow_motion)
{
    const uint32_t M = 512, N = 96, G = 8, R = 4, D = M / 2 + 1;
    sim_flow f;
    sim_flow_default(&f, M, N, G, R);
    f.motion = 2.4; /* bins per repeat */
    uint16_t *frame = malloc(sizeof(uint16_t) * (size_t)G * R * N * M);
    uint8_t *lab = malloc((size_t)G * N * D);
    oct_error e = {{0}};
    ck_assert_msg(sim_flow_frame(&f, frame, lab, &e) == OCT_OK, "%s", e.msg);
    float *x = preprocess(frame, M, (size_t)G * R * N);
    float *vol = malloc(sizeof(float) * (size_t)G * N * D);
    double ratio[2];
    for (int al = 0; al < 2; al++) {
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, M, N, R);
        cfg.freq_cutoff = 4;
        cfg.metrics = OCT_ANGIO_SSADA;
        cfg.align = al ? OCT_ANGIO_ALIGN_AXIAL : OCT_ANGIO_ALIGN_OFF;
        oct_angio *a;
        ck_assert_msg(oct_angio_create(&a, &cfg, &e) == OCT_OK, "%s", e.msg);
        for (uint32_t g = 0; g < G; g++) {
            oct_angio_out o = {{NULL, NULL, NULL, NULL, vol + (size_t)g * N * D}, D, 1};
            ck_assert_int_eq(oct_angio_group(a, NULL, x + (size_t)g * R * N * M, &o, &e), OCT_OK);
            if (al) {
                float dz[4], dx[4];
                oct_angio_shifts(a, dz, dx);
                for (uint32_t r = 1; r < R; r++)
                    ck_assert_msg(fabsf(dz[r] - 2.4f * r) < 0.35f,
                                  "group %u repeat %u: dz %g, true %g", g, r, dz[r], 2.4 * r);
            }
        }
        uint32_t d0, d1;
        sim_flow_slab(&f, &d0, &d1);
        sim_flow_score s;
        sim_flow_evaluate(lab, vol, G, N, D, d0, d1, &s);
        ratio[al] = s.ratio;
        printf("flow phantom, axial motion 2.4 bins/repeat, align %s: ssada vessel %.4g, tissue "
               "%.4g (ratio %.2f), CNR %.2f\n",
               al ? "axial" : "off", s.vessel_mean, s.tissue_mean, s.ratio, s.cnr);
        fflush(stdout);
        oct_angio_destroy(a);
    }
    ck_assert_msg(ratio[0] < 2, "unaligned motion, yet vessel/tissue %g", ratio[0]);
    ck_assert_msg(ratio[1] >= 4, "aligned: vessel/tissue %g < 4", ratio[1]);
    /* the same through the engine (CPU): angio.align reaches the stage */
    oct_setup su;
    oct_setup_default(&su);
    su.geom = (oct_geometry){M, N, G * R, OCT_SAMPLE_U16, 0};
    su.backend = OCT_BACKEND_CPU;
    su.flags = OCT_SETUP_QUICK_PLAN;
    su.repeats = R;
    oct_params p;
    oct_params_default(&p);
    p.background = OCT_BG_FRAME_MEAN;
    p.freq_cutoff = 4;
    p.products = OCT_PRODUCT_F32;
    p.angio_metrics = OCT_ANGIO_SSADA;
    p.angio_align = OCT_ANGIO_ALIGN_AXIAL;
    oct_engine *eng;
    ck_assert_msg(oct_engine_create(&eng, &su, &p, &e) == OCT_OK, "%s", e.msg);
    oct_products *out = oct_products_create();
    ck_assert_msg(oct_engine_process(eng, frame, sizeof(uint16_t) * (size_t)G * R * N * M, out, &e) ==
                      OCT_OK,
                  "%s", e.msg);
    const oct_image *im = &out->img[OCT_METHOD_CFD][OCT_KIND_SSADA];
    ck_assert(im->present && im->ndim == 3 && im->shape[0] == G);
    uint32_t d0, d1;
    sim_flow_slab(&f, &d0, &d1);
    sim_flow_score sc;
    sim_flow_evaluate(lab, im->f32, G, N, D, d0, d1, &sc);
    ck_assert_msg(sc.ratio >= 4, "engine, aligned: vessel/tissue %g < 4", sc.ratio);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    free(vol);
    free(x);
    free(frame);
    free(lab);
}
END_TEST

/* ---- alignment against the float64 reference (CPU and CUDA) -------------------- */

/* Flow phantom groups with bulk motion: axial 1.7 bins per repeat and, with
 * lateral, repeat r cut from a wider scan at A-scan offset motion_off[r], so
 * that the true shifts are dz_r = 1.7 r, dx_r = motion_off[0] - motion_off[r].
 * Returns x~ (G x R x N x M); *frame_out (if not NULL) gets the u16 frame
 * (G*R lines) and *lab_out the truth labels [G][N][D]. */
static const int motion_off[4] = {4, 3, 6, 1};
static float *motion_spectra(uint32_t M, uint32_t N, uint32_t G, uint32_t R, bool lateral,
                             uint16_t **frame_out, uint8_t **lab_out)
{
    const uint32_t Nb = N + 8, D = M / 2 + 1;
    sim_flow f;
    sim_flow_default(&f, M, Nb, G, R);
    f.motion = 1.7;
    uint16_t *big = malloc(sizeof(uint16_t) * (size_t)G * R * Nb * M);
    uint8_t *labb = malloc((size_t)G * Nb * D);
    oct_error e = {{0}};
    ck_assert_msg(sim_flow_frame(&f, big, labb, &e) == OCT_OK, "%s", e.msg);
    uint16_t *frame = malloc(sizeof(uint16_t) * (size_t)G * R * N * M);
    uint8_t *lab = malloc((size_t)G * N * D);
    for (uint32_t g = 0; g < G; g++) {
        for (uint32_t r = 0; r < R; r++) {
            const uint32_t off = lateral ? (uint32_t)motion_off[r % 4] : 4;
            memcpy(frame + (size_t)(g * R + r) * N * M, big + ((size_t)(g * R + r) * Nb + off) * M,
                   sizeof(uint16_t) * N * M);
        }
        memcpy(lab + (size_t)g * N * D, labb + ((size_t)g * Nb + 4) * D, (size_t)N * D);
    }
    float *x = preprocess(frame, M, (size_t)G * R * N);
    if (frame_out)
        *frame_out = frame;
    else
        free(frame);
    if (lab_out)
        *lab_out = lab;
    else
        free(lab);
    free(big);
    free(labb);
    return x;
}

/* img(n + dx, d + dz), bilinear in double, coordinates clamped to the image */
static double ref_bilinear(const double *img, uint32_t N, uint32_t D, uint32_t n, uint32_t d,
                           double dx, double dz)
{
    double xn = fmin(fmax(n + dx, 0.0), N - 1.0), z = fmin(fmax(d + dz, 0.0), D - 1.0);
    uint32_t n0 = (uint32_t)xn, d0 = (uint32_t)z;
    uint32_t n1 = n0 + 1 < N ? n0 + 1 : n0, d1 = d0 + 1 < D ? d0 + 1 : d0;
    double fx = xn - n0, fz = z - d0;
    return (1 - fx) * ((1 - fz) * img[(size_t)n0 * D + d0] + fz * img[(size_t)n0 * D + d1]) +
           fx * ((1 - fz) * img[(size_t)n1 * D + d0] + fz * img[(size_t)n1 * D + d1]);
}

/* Every metric of one group of x~ with repeat r resampled by (dx[r], dz[r]),
 * the intensities and each band image alike: float64, direct DFT sums. */
static void ref_aligned(const float *x, uint32_t M, uint32_t N, uint32_t R, uint32_t F, int K,
                        double width, const float *dz, const float *dx,
                        double *ref[OCT_ANGIO_M_COUNT])
{
    const uint32_t D = M / 2 + 1;
    const size_t img = (size_t)N * D;
    double *A = malloc(sizeof(double) * R * img), *Al = malloc(sizeof(double) * R * img);
    double *dk = malloc(sizeof(double) * img), *g = ref_band_gains(M, K, width);
    for (int k = -1; k < K; k++) { /* k = -1: the CFD intensities */
        for (size_t j = 0; j < (size_t)R * N; j++)
            ref_mag(x + j * M, k < 0 ? NULL : g + (size_t)k * M, M, F, A + j * D);
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t n = 0; n < N; n++)
                for (uint32_t d = 0; d < D; d++)
                    Al[r * img + (size_t)n * D + d] =
                        ref_bilinear(A + r * img, N, D, n, d, dx[r], dz[r]);
        if (k < 0) {
            ref_metrics(Al, R, N, D, ref[0], ref[1], ref[2], ref[3]);
            memset(ref[4], 0, sizeof(double) * img);
            continue;
        }
        ref_metrics(Al, R, N, D, NULL, NULL, NULL, dk);
        for (size_t p = 0; p < img; p++)
            ref[4][p] += dk[p] / K;
    }
    free(A);
    free(Al);
    free(dk);
    free(g);
}

/* Metrics of G groups (volume layout [g][N][D]) against ref_aligned with the
 * given shifts ([g][R]), and the shifts against the truth. */
static void check_aligned(const char *who, float *const out[OCT_ANGIO_M_COUNT], const float *x,
                          uint32_t M, uint32_t N, uint32_t G, uint32_t R, uint32_t F, int K,
                          bool lateral, const float *dz, const float *dx)
{
    const uint32_t D = M / 2 + 1;
    const size_t img = (size_t)N * D;
    double *ref[OCT_ANGIO_M_COUNT];
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        ref[m] = malloc(sizeof(double) * img);
    for (uint32_t g = 0; g < G; g++) {
        for (uint32_t r = 0; r < R; r++) {
            const double tz = 1.7 * r, tx = lateral ? motion_off[0] - motion_off[r % 4] : 0;
            ck_assert_msg(fabs(dz[g * R + r] - tz) < 0.35 && fabs(dx[g * R + r] - tx) < 0.35,
                          "%s group %u repeat %u: (dx, dz) = (%g, %g), true (%g, %g)", who, g, r,
                          dx[g * R + r], dz[g * R + r], tx, tz);
        }
        ref_aligned(x + (size_t)g * R * N * M, M, N, R, F, K, 1.0, dz + g * R, dx + g * R, ref);
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
            char what[128], msg[512];
            snprintf(what, sizeof what, "%s aligned (%s) %s group %u", who,
                     lateral ? "lateral" : "axial", oct_angio_metric_name(m), g);
            uint32_t shape[2] = {N, D};
            ck_assert_msg(tu_check_f32(what, out[m] + g * img, ref[m], img, 2, shape, TU_TOL_FP32,
                                       msg, sizeof msg),
                          "%s", msg);
        }
    }
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        free(ref[m]);
}

/* CPU aligned metrics, G groups of x~ into out[m] ([g][N][D]), shifts [g][R]. */
static void cpu_aligned(const float *x, uint32_t M, uint32_t N, uint32_t G, uint32_t R,
                        uint32_t F, uint32_t align, float *out[OCT_ANGIO_M_COUNT], float *dz,
                        float *dx)
{
    const uint32_t D = M / 2 + 1;
    oct_angio_config cfg;
    oct_angio_config_default(&cfg, M, N, R);
    cfg.freq_cutoff = (int32_t)F;
    cfg.align = align;
    oct_angio *a;
    oct_error e = {{0}};
    ck_assert_msg(oct_angio_create(&a, &cfg, &e) == OCT_OK, "%s", e.msg);
    for (uint32_t g = 0; g < G; g++) {
        oct_angio_out o = {{0}, D, 1};
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            o.img[m] = out[m] + (size_t)g * N * D;
        ck_assert_msg(oct_angio_group(a, NULL, x + (size_t)g * R * N * M, &o, &e) == OCT_OK, "%s",
                      e.msg);
        oct_angio_shifts(a, dz + g * R, dx + g * R);
    }
    oct_angio_destroy(a);
}

/* The CPU's aligned metrics are those of the float64 reference resampled by
 * the CPU's shifts, and the shifts are the true ones (axial, axial+lateral). */
START_TEST(t_align_reference)
{
    const uint32_t M = 256, N = 40, G = 2, R = 4, F = 3, D = M / 2 + 1;
    for (int lateral = 0; lateral < 2; lateral++) {
        float *x = motion_spectra(M, N, G, R, lateral, NULL, NULL);
        float *out[OCT_ANGIO_M_COUNT], dz[G * R], dx[G * R];
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            out[m] = malloc(sizeof(float) * G * N * D);
        cpu_aligned(x, M, N, G, R, F, lateral ? OCT_ANGIO_ALIGN_LATERAL : OCT_ANGIO_ALIGN_AXIAL,
                    out, dz, dx);
        check_aligned("cpu", out, x, M, N, G, R, F, 4, lateral, dz, dx);
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            free(out[m]);
        free(x);
    }
}
END_TEST

START_TEST(t_flow_errors)
{
    sim_flow f;
    sim_flow_default(&f, 100, 8, 2, 2);
    uint16_t buf[8];
    oct_error e = {{0}};
    ck_assert_int_eq(sim_flow_frame(&f, buf, NULL, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "100"), "%s", e.msg);
    sim_flow_default(&f, 64, 8, 0, 2);
    ck_assert_int_eq(sim_flow_frame(&f, buf, NULL, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "positions = 0"), "%s", e.msg);
    sim_flow_default(&f, 64, 8, 2, 2);
    f.speed = -1;
    ck_assert_int_eq(sim_flow_frame(&f, buf, NULL, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "speed -1"), "%s", e.msg);
}
END_TEST

/* ---- profile: geometry.repeats ---------------------------------------------------- */

START_TEST(t_profile_repeats)
{
    oct_profile *p = calloc(1, sizeof *p);
    oct_error e = {{0}};
    const char *ok = "geometry: {samples: 256, ascans: 10, lines: 8, repeats: 4}\n";
    ck_assert_msg(oct_profile_parse(p, ok, strlen(ok), "a.yaml", &e) == OCT_OK, "%s", e.msg);
    ck_assert_uint_eq(p->repeats, 4);
    const char *none = "geometry: {samples: 256, ascans: 10, lines: 8}\n";
    ck_assert_msg(oct_profile_parse(p, none, strlen(none), "a.yaml", &e) == OCT_OK, "%s", e.msg);
    ck_assert_uint_eq(p->repeats, 1);
    const char *nogeom = "freq_cutoff: 2\n";
    ck_assert_msg(oct_profile_parse(p, nogeom, strlen(nogeom), "a.yaml", &e) == OCT_OK, "%s", e.msg);
    ck_assert_uint_eq(p->repeats, 1);
    const char *bad = "freq_cutoff: 2\ngeometry:\n  samples: 256\n  ascans: 10\n  lines: 6\n"
                      "  repeats: 4\n";
    ck_assert_int_eq(oct_profile_parse(p, bad, strlen(bad), "b.yaml", &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "b.yaml:") && strstr(e.msg, "geometry.repeats") &&
                      strstr(e.msg, "lines = 6"),
                  "%s", e.msg);
    const char *zero = "geometry: {samples: 256, ascans: 10, lines: 8, repeats: 0}\n";
    ck_assert_int_eq(oct_profile_parse(p, zero, strlen(zero), "c.yaml", &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "repeats"), "%s", e.msg);
    const char *big = "geometry: {samples: 256, ascans: 10, lines: 130, repeats: 65}\n";
    ck_assert_int_eq(oct_profile_parse(p, big, strlen(big), "c.yaml", &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "repeats"), "%s", e.msg);
    /* slab: {start, end} (the en-face angiograms' depths) */
    const char *slab = "geometry: {samples: 256, ascans: 10, lines: 8, repeats: 4}\n"
                       "products: [slab_max]\nslab: {start: 12, end: 40}\n";
    ck_assert_msg(oct_profile_parse(p, slab, strlen(slab), "s.yaml", &e) == OCT_OK, "%s", e.msg);
    ck_assert_int_eq(p->params.slab_start, 12);
    ck_assert_int_eq(p->params.slab_end, 40);
    const char *neg = "slab:\n  start: -3\n";
    ck_assert_int_eq(oct_profile_parse(p, neg, strlen(neg), "n.yaml", &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "n.yaml:2") && strstr(e.msg, "slab.start"), "%s", e.msg);
    const char *typo = "slab: {begin: 3}\n";
    ck_assert_int_eq(oct_profile_parse(p, typo, strlen(typo), "t.yaml", &e), OCT_EPARSE);
    ck_assert_msg(strstr(e.msg, "begin"), "%s", e.msg);
    free(p);
}
END_TEST

/* ---- in the engine (CPU backend) ----------------------------------------------- */

/* x~ of every spectrum of a u16 or f32 frame, from the SPEC: (v >> shift),
 * minus the frame mean (double) when asked, times the Hann window (double). */
static float *ref_preprocess(const void *fr, const oct_geometry *g, bool frame_mean)
{
    const uint32_t M = g->samples;
    const size_t S = (size_t)g->ascans * g->lines;
    double *v = malloc(sizeof(double) * S * M), *mean = calloc(M, sizeof(double));
    for (size_t i = 0; i < S * M; i++)
        v[i] = g->sample_type == OCT_SAMPLE_F32 ? ((const float *)fr)[i]
                                                : (double)(((const uint16_t *)fr)[i] >> g->sample_shift);
    if (frame_mean)
        for (size_t j = 0; j < S; j++)
            for (uint32_t n = 0; n < M; n++)
                mean[n] += v[j * M + n] / S;
    float *x = malloc(sizeof(float) * S * M);
    for (size_t j = 0; j < S; j++)
        for (uint32_t n = 0; n < M; n++)
            x[j * M + n] = (float)((0.5 - 0.5 * cos(2 * M_PI * n / (M - 1))) * (v[j * M + n] - mean[n]));
    free(mean);
    free(v);
    return x;
}

/* The en-face angiograms (kinds 13..18) of out against slabs of the float64
 * metric images ref[m] ([G][N][D]), depths [d0, d1): direct sums here. */
static void check_engine_aslab(const oct_products *out, double *const ref[OCT_ANGIO_M_COUNT],
                               uint32_t N, uint32_t D, uint32_t G, int32_t d0, int32_t d1,
                               const char *who)
{
    static const struct { int kind, metric; bool max; } ks[] = {
        {OCT_KIND_SLAB_MEAN_SV, OCT_ANGIO_M_SV, false},
        {OCT_KIND_SLAB_MAX_SV, OCT_ANGIO_M_SV, true},
        {OCT_KIND_SLAB_MEAN_DECOR, OCT_ANGIO_M_DECOR, false},
        {OCT_KIND_SLAB_MAX_DECOR, OCT_ANGIO_M_DECOR, true},
        {OCT_KIND_SLAB_MEAN_SSADA, OCT_ANGIO_M_SSADA, false},
        {OCT_KIND_SLAB_MAX_SSADA, OCT_ANGIO_M_SSADA, true}};
    double *want = malloc(sizeof(double) * G * N);
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        const oct_image *im = &out->img[OCT_METHOD_CFD][ks[i].kind];
        ck_assert_msg(im->present && im->f32 && im->u8, "%s: %s/%s not present", who,
                      oct_kind_name(ks[i].kind), oct_product_method_name(OCT_METHOD_CFD, ks[i].kind));
        ck_assert_msg(im->ndim == 2 && im->shape[0] == G && im->shape[1] == N && im->count == (size_t)G * N,
                      "%s: %s shape %u x %u", who, oct_kind_name(ks[i].kind), im->shape[0], im->shape[1]);
        ck_assert(im->n_indices == 2 && im->indices[0] == d0 && im->indices[1] == d1);
        for (uint32_t g = 0; g < G; g++)
            for (uint32_t n = 0; n < N; n++) {
                const double *v = ref[ks[i].metric] + ((size_t)g * N + n) * D;
                double acc = ks[i].max ? v[d0] : 0.0;
                for (int32_t d = d0; d < d1; d++)
                    acc = ks[i].max ? (v[d] > acc ? v[d] : acc) : acc + v[d];
                want[(size_t)g * N + n] = ks[i].max ? acc : acc / (d1 - d0);
            }
        char what[128], msg[512];
        snprintf(what, sizeof what, "%s %s/%s [%d, %d) G=%u", who, oct_kind_name(ks[i].kind),
                 oct_product_method_name(OCT_METHOD_CFD, ks[i].kind), d0, d1, G);
        uint32_t shape[3] = {G, N, 1};
        ck_assert_msg(tu_check_f32(what, im->f32, want, (size_t)G * N, 2, shape, TU_TOL_FP32, msg,
                                   sizeof msg),
                      "%s", msg);
    }
    free(want);
}

/* Checks the angiography images of out (CFD kinds 8..12) against the
 * float64 reference of frame x~ (G groups of R x N spectra); with d1 > d0
 * also the en-face angiograms of depths [d0, d1). */
static void check_engine_angio(const oct_products *out, const float *x, uint32_t M, uint32_t N,
                               uint32_t R, uint32_t G, uint32_t F, int K, double width,
                               int32_t d0, int32_t d1, const char *who)
{
    const uint32_t D = M / 2 + 1;
    ref_case rc = {M, N, R, F, K, width};
    const size_t img = (size_t)N * D;
    double *ref[OCT_ANGIO_M_COUNT], *A = malloc(sizeof(double) * R * img);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        ref[m] = malloc(sizeof(double) * img * G);
    for (uint32_t g = 0; g < G; g++) {
        double *rg[OCT_ANGIO_M_COUNT];
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            rg[m] = ref[m] + g * img;
        ref_all(&rc, x + (size_t)g * R * N * M, rg, A);
    }
    float *got = malloc(sizeof(float) * img * G);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
        const oct_image *im = &out->img[OCT_METHOD_CFD][OCT_KIND_ANGIO_FIRST + m];
        ck_assert_msg(im->present && im->f32 && im->u8, "%s: %s not present", who,
                      oct_angio_metric_name(m));
        if (G == 1) {
            ck_assert(im->ndim == 2 && im->shape[0] == D && im->shape[1] == N);
            for (uint32_t n = 0; n < N; n++)
                for (uint32_t d = 0; d < D; d++)
                    got[(size_t)n * D + d] = im->f32[(size_t)d * N + n];
        } else {
            ck_assert(im->ndim == 3 && im->shape[0] == G && im->shape[1] == N && im->shape[2] == D);
            memcpy(got, im->f32, sizeof(float) * img * G);
        }
        char what[128], msg[512];
        snprintf(what, sizeof what, "%s %s/cfd M=%u N=%u R=%u G=%u", who,
                 oct_kind_name(OCT_KIND_ANGIO_FIRST + m), M, N, R, G);
        uint32_t shape[3] = {G, N, D};
        ck_assert_msg(tu_check_f32(what, got, ref[m], img * G, 3, shape, TU_TOL_FP32, msg, sizeof msg),
                      "%s", msg);
    }
    if (d1 > d0)
        check_engine_aslab(out, ref, N, D, G, d0, d1, who);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        free(ref[m]);
    free(got);
    free(A);
}

START_TEST(t_engine)
{
    /* G = 1 (one B-scan group, [D][N]) and G = 3 ([G][N][D]), R odd and even */
    static const struct { uint32_t M, N, R, G; bool mean; } ec[] = {
        {256, 9, 4, 1, false}, {128, 7, 3, 3, true}, {256, 5, 2, 2, true}};
    for (size_t ci = 0; ci < sizeof ec / sizeof ec[0]; ci++) {
        const uint32_t M = ec[ci].M, N = ec[ci].N, R = ec[ci].R, G = ec[ci].G;
        oct_setup su;
        oct_setup_default(&su);
        su.geom = (oct_geometry){M, N, R * G, OCT_SAMPLE_U16, 2};
        su.backend = OCT_BACKEND_CPU;
        su.flags = OCT_SETUP_QUICK_PLAN;
        su.threads = 2;
        su.repeats = R;
        oct_params p;
        oct_params_default(&p);
        p.freq_cutoff = 3;
        p.background = ec[ci].mean ? OCT_BG_FRAME_MEAN : OCT_BG_NONE;
        p.angio_metrics = OCT_ANGIO_METRICS_ALL;
        p.angio_bands = 3;
        p.angio_band_width = 1.3f;
        p.products |= OCT_PRODUCT_F32 | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) |
                      OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX);
        /* en-face angiograms: an inner slab, and one clamped to the last depth */
        const int32_t D = (int32_t)(M / 2 + 1), d0 = ci == 1 ? 2 : 9;
        const int32_t d1 = ci == 1 ? D : D - 11;
        p.slab_start = d0, p.slab_end = ci == 1 ? INT32_MAX : d1;
        oct_engine *eng;
        oct_error e = {{0}};
        ck_assert_msg(oct_engine_create(&eng, &su, &p, &e) == OCT_OK, "%s", e.msg);
        size_t bytes;
        uint16_t *frame = tu_frame_random(&su.geom, 900 + ci, &bytes);
        oct_products *out = oct_products_create();
        ck_assert_msg(oct_engine_process(eng, frame, bytes, out, &e) == OCT_OK, "%s", e.msg);
        float *x = ref_preprocess(frame, &su.geom, ec[ci].mean);
        check_engine_angio(out, x, M, N, R, G, 3, 3, 1.3, d0, d1, "engine");
        ck_assert_str_eq(oct_kind_name(OCT_KIND_SLAB_MAX_SSADA), "slab_max");
        ck_assert_str_eq(oct_product_method_name(OCT_METHOD_CFD, OCT_KIND_SLAB_MAX_SSADA), "ssada");
        ck_assert_str_eq(oct_product_method_name(OCT_METHOD_CFD, OCT_KIND_SLAB_MEAN_SV), "sv");
        ck_assert_str_eq(oct_product_method_name(OCT_METHOD_MSI, OCT_KIND_SLAB_MAX), "msi");
        ck_assert_int_eq(oct_kind_class(OCT_KIND_SLAB_MEAN_DECOR), OCT_CLASS_ENFACE);
        ck_assert_int_eq(oct_kind_angio_source(OCT_KIND_SLAB_MEAN_DECOR), OCT_KIND_DECOR);
        ck_assert_int_eq(oct_kind_angio_source(OCT_KIND_SLAB_MAX), -1);
        ck_assert_str_eq(oct_kind_name(OCT_KIND_SSADA), "ssada");
        ck_assert_int_eq(oct_kind_class(OCT_KIND_DECOR), OCT_CLASS_BSCAN);
        /* live change: only decor; the others are no longer produced */
        p.angio_metrics = OCT_ANGIO_DECOR;
        ck_assert_msg(oct_engine_set_params(eng, &p, &e) == OCT_OK, "%s", e.msg);
        ck_assert_msg(oct_engine_process(eng, frame, bytes, out, &e) == OCT_OK, "%s", e.msg);
        ck_assert(out->img[OCT_METHOD_CFD][OCT_KIND_DECOR].present);
        ck_assert(!out->img[OCT_METHOD_CFD][OCT_KIND_SSADA].present);
        ck_assert(!out->img[OCT_METHOD_CFD][OCT_KIND_STRUCT].present);
        ck_assert(out->img[OCT_METHOD_CFD][OCT_KIND_SLAB_MAX_DECOR].present);
        ck_assert(!out->img[OCT_METHOD_CFD][OCT_KIND_SLAB_MAX_SSADA].present);
        ck_assert(!out->img[OCT_METHOD_CFD][OCT_KIND_SLAB_MEAN_SV].present);
        /* no slab product bit: no en-face angiogram */
        p.products &= ~OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX);
        ck_assert_msg(oct_engine_set_params(eng, &p, &e) == OCT_OK, "%s", e.msg);
        ck_assert_msg(oct_engine_process(eng, frame, bytes, out, &e) == OCT_OK, "%s", e.msg);
        ck_assert(out->img[OCT_METHOD_CFD][OCT_KIND_SLAB_MEAN_DECOR].present);
        ck_assert(!out->img[OCT_METHOD_CFD][OCT_KIND_SLAB_MAX_DECOR].present);
        /* an empty slab is refused by name */
        oct_params q = p;
        q.slab_start = 40, q.slab_end = 40;
        ck_assert_int_eq(oct_engine_set_params(eng, &q, &e), OCT_EINVAL);
        ck_assert_msg(strstr(e.msg, "slab.end"), "%s", e.msg);
        /* bad values are refused by name, the old ones stay */
        p.angio_bands = 0;
        ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_EINVAL);
        ck_assert_msg(strstr(e.msg, "angio.bands = 0"), "%s", e.msg);
        p.angio_bands = 3;
        p.angio_metrics = 0x40;
        ck_assert_int_eq(oct_engine_set_params(eng, &p, &e), OCT_EINVAL);
        ck_assert_msg(strstr(e.msg, "angio.metrics"), "%s", e.msg);
        free(x);
        free(frame);
        oct_products_destroy(out);
        oct_engine_destroy(eng);
    }
}
END_TEST

START_TEST(t_engine_errors)
{
    oct_setup su;
    oct_setup_default(&su);
    su.geom = (oct_geometry){256, 4, 8, OCT_SAMPLE_U16, 0};
    su.backend = OCT_BACKEND_CPU;
    su.flags = OCT_SETUP_QUICK_PLAN;
    su.repeats = 3;
    oct_params p;
    oct_params_default(&p);
    oct_engine *eng = NULL;
    oct_error e = {{0}};
    ck_assert_int_eq(oct_engine_create(&eng, &su, &p, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "geometry.repeats = 3") && strstr(e.msg, "8"), "%s", e.msg);
    /* no repeats: angio.metrics makes nothing (no group) */
    su.repeats = 0;
    p.angio_metrics = OCT_ANGIO_METRICS_ALL;
    ck_assert_msg(oct_engine_create(&eng, &su, &p, &e) == OCT_OK, "%s", e.msg);
    size_t bytes;
    void *frame = tu_frame_random(&su.geom, 4, &bytes);
    oct_products *out = oct_products_create();
    ck_assert_msg(oct_engine_process(eng, frame, bytes, out, &e) == OCT_OK, "%s", e.msg);
    for (int k = OCT_KIND_ANGIO_FIRST; k < OCT_KIND_COUNT; k++)
        ck_assert(!out->img[OCT_METHOD_CFD][k].present);
    free(frame);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
}
END_TEST

/* One "thread block" of the fused kernel on the host: T pthreads over the
 * N positions of a group, a barrier between positions (block boundary). */
typedef struct fused_block {
    const float *x, *g;
    const af_c *tw;
    uint32_t M, logM, N, R, F, T, tid;
    int K;
    float *sh, *out;
} fused_block;

static void *fused_thread(void *arg)
{
    const fused_block *b = arg;
    const uint32_t D = b->M / 2 + 1;
    for (uint32_t n = 0; n < b->N; n++) {
        af_ssada_row(b->x + (size_t)n * b->M, (size_t)b->N * b->M, b->g, b->tw, b->M, b->logM,
                     b->R, b->K, b->F, b->out + (size_t)n * D, 1, b->sh, b->tid, b->T);
        pthread_barrier_wait(&af_barrier);
    }
    return NULL;
}

/* The fused CUDA ssada (angio_fused.cuh: shared-memory Stockham FFT, two
 * repeats packed into one complex transform) run on the host, one thread
 * and a block of the kernel's thread count (at most 64 here), against the
 * float64 reference: its index arithmetic and barriers are checked here
 * without a GPU (odd and even log2 M, odd and even R). */
START_TEST(t_fused_host)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const ref_case *c = &cases[ci];
        const uint32_t M = c->M, N = c->N, R = c->R, D = M / 2 + 1;
        const size_t img = (size_t)N * D;
        float *x = random_spectra(c, 300 + ci);
        double *ref[OCT_ANGIO_M_COUNT], *A = malloc(sizeof(double) * R * img);
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            ref[m] = malloc(sizeof(double) * img);
        ref_all(c, x, ref, A);
        float *g = malloc(sizeof(float) * (size_t)c->K * M);
        oct_angio_band_gains(g, M, c->K, (float)c->width);
        af_c *tw = malloc(sizeof(af_c) * M);
        af_twiddles(tw, M);
        float *sh = malloc(sizeof(float) * af_shared_floats(M, R));
        float *got = malloc(sizeof(float) * img);
        uint32_t logM = 0;
        while ((1u << logM) < M)
            logM++;
        for (int run = 0; run < 2; run++) {
            const uint32_t T = run ? (af_threads(M) < 64 ? af_threads(M) : 64) : 1;
            pthread_t th[64];
            fused_block b[64];
            memset(got, 0, sizeof(float) * img);
            ck_assert_int_eq(pthread_barrier_init(&af_barrier, NULL, T), 0);
            for (uint32_t t = 0; t < T; t++) {
                b[t] = (fused_block){x, g, tw, M, logM, N, R, c->F, T, t, c->K, sh, got};
                ck_assert_int_eq(pthread_create(&th[t], NULL, fused_thread, &b[t]), 0);
            }
            for (uint32_t t = 0; t < T; t++)
                pthread_join(th[t], NULL);
            pthread_barrier_destroy(&af_barrier);
            char what[96], msg[512];
            snprintf(what, sizeof what, "fused ssada (host, %u threads) M=%u R=%u K=%d F=%u", T, M,
                     R, c->K, c->F);
            uint32_t shape[2] = {N, D};
            ck_assert_msg(tu_check_f32(what, got, ref[OCT_ANGIO_M_SSADA], img, 2, shape,
                                       TU_TOL_FP32, msg, sizeof msg),
                          "%s", msg);
        }
        free(got);
        free(sh);
        free(tw);
        free(g);
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            free(ref[m]);
        free(A);
        free(x);
    }
}
END_TEST

/* ---- CUDA ------------------------------------------------------------------------ */

static char g_skip[600];

START_TEST(t_cuda)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const ref_case *c = &cases[ci];
        const uint32_t M = c->M, N = c->N, R = c->R, D = M / 2 + 1, G = 3;
        const size_t img = (size_t)N * D;
        float *x = malloc(sizeof(float) * G * R * N * M);
        double *ref[G][OCT_ANGIO_M_COUNT], *A = malloc(sizeof(double) * G * R * img);
        float *Af = malloc(sizeof(float) * G * R * img);
        for (uint32_t g = 0; g < G; g++) {
            float *xg = random_spectra(c, 50 + g + ci);
            memcpy(x + (size_t)g * R * N * M, xg, sizeof(float) * R * N * M);
            free(xg);
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                ref[g][m] = malloc(sizeof(double) * img);
            ref_all(c, x + (size_t)g * R * N * M, ref[g], A + (size_t)g * R * img);
        }
        for (size_t i = 0; i < G * R * img; i++)
            Af[i] = (float)A[i];
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, M, N, R);
        cfg.freq_cutoff = (int32_t)c->F;
        cfg.bands = c->K;
        cfg.band_width = (float)c->width;
        /* variant 0: one chunk; 1: chunks of 2 groups (a short last chunk with
         * its own plans); 2, 3: the same with the legacy, the fused kernels */
        for (int vl = 0; vl < 8; vl++) {
            const int layout = vl & 1, variant = vl >> 1;
            cfg.cuda_chunk = variant ? 2 * R * N : 0;
            cfg.cuda_path = variant == 2   ? OCT_ANGIO_CUDA_LEGACY
                            : variant == 3 ? OCT_ANGIO_CUDA_FUSED
                                           : OCT_ANGIO_CUDA_BANDS;
            oct_angio_out o = {{0}, layout ? 1 : D, layout ? N : 1};
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                o.img[m] = malloc(sizeof(float) * G * img);
            oct_error e = {{0}};
            double ms = 0;
            ck_assert_msg(oct_angio_cuda_host(&cfg, layout ? NULL : Af, x, G, &o, img, &ms, &e) ==
                              OCT_OK,
                          "%s", e.msg);
            float *got = malloc(sizeof(float) * img);
            for (uint32_t g = 0; g < G; g++)
                for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
                    for (uint32_t n = 0; n < N; n++)
                        for (uint32_t d = 0; d < D; d++)
                            got[(size_t)n * D + d] =
                                o.img[m][g * img + n * o.stride_n + d * o.stride_d];
                    char what[96], msg[512];
                    snprintf(what, sizeof what,
                             "cuda %s M=%u R=%u K=%d group %u layout %d variant %d",
                             oct_angio_metric_name(m), M, R, c->K, g, layout, variant);
                    uint32_t shape[2] = {N, D};
                    ck_assert_msg(tu_check_f32(what, got, ref[g][m], img, 2, shape, TU_TOL_FP32,
                                               msg, sizeof msg),
                                  "%s", msg);
                }
            free(got);
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                free(o.img[m]);
        }
        for (uint32_t g = 0; g < G; g++)
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                free(ref[g][m]);
        free(A);
        free(Af);
        free(x);
    }
}
END_TEST

/* The CUDA executor's angiography stage against the float64 reference and
 * the CPU engine (f32 within 1e-4, gray levels within one), one group and
 * several, u16 and f32 frames (alignment: t_cuda_engine_align). */
START_TEST(t_cuda_engine)
{
    static const struct { uint32_t M, N, R, G, type; } ec[] = {
        {256, 9, 4, 1, OCT_SAMPLE_U16}, {128, 7, 3, 3, OCT_SAMPLE_U16}, {512, 20, 4, 5, OCT_SAMPLE_F32}};
    for (size_t ci = 0; ci < sizeof ec / sizeof ec[0]; ci++) {
        const uint32_t M = ec[ci].M, N = ec[ci].N, R = ec[ci].R, G = ec[ci].G, D = M / 2 + 1;
        oct_setup su;
        oct_setup_default(&su);
        su.geom = (oct_geometry){M, N, R * G, ec[ci].type, 0};
        su.flags = OCT_SETUP_QUICK_PLAN;
        su.repeats = R;
        oct_params p;
        oct_params_default(&p);
        p.freq_cutoff = 3;
        p.background = OCT_BG_FRAME_MEAN;
        p.angio_metrics = OCT_ANGIO_METRICS_ALL;
        p.angio_bands = 3;
        p.angio_band_width = 1.3f;
        p.products |= OCT_PRODUCT_F32 | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) |
                      OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX);
        const int32_t d0 = 4 + (int32_t)ci, d1 = (int32_t)D - 3;
        p.slab_start = d0, p.slab_end = d1;
        size_t bytes;
        void *frame = tu_frame_random(&su.geom, 700 + ci, &bytes);
        oct_products *out[4];
        oct_error e = {{0}};
        /* 0: cpu; 1: cuda, chunks of 2 groups (the engine's transform d_X
         * at chunk offsets, a short last chunk); 2: cuda legacy kernels;
         * 3: cuda fused kernels */
        for (int b = 0; b < 4; b++) {
            su.backend = b ? OCT_BACKEND_CUDA : OCT_BACKEND_CPU;
            su.cuda.angio_chunk = b == 1 ? 2 * R * N : 0;
            su.cuda.angio_path = b == 2 ? OCT_ANGIO_CUDA_LEGACY
                                 : b == 3 ? OCT_ANGIO_CUDA_FUSED : OCT_ANGIO_CUDA_BANDS;
            oct_engine *eng;
            ck_assert_msg(oct_engine_create(&eng, &su, &p, &e) == OCT_OK, "%s", e.msg);
            out[b] = oct_products_create();
            ck_assert_msg(oct_engine_process(eng, frame, bytes, out[b], &e) == OCT_OK, "%s", e.msg);
            oct_engine_destroy(eng);
        }
        float *x = ref_preprocess(frame, &su.geom, true);
        check_engine_angio(out[0], x, M, N, R, G, 3, 3, 1.3, d0, d1, "cpu engine");
        check_engine_angio(out[1], x, M, N, R, G, 3, 3, 1.3, d0, d1, "cuda engine");
        check_engine_angio(out[2], x, M, N, R, G, 3, 3, 1.3, d0, d1, "cuda engine (legacy)");
        check_engine_angio(out[3], x, M, N, R, G, 3, 3, 1.3, d0, d1, "cuda engine (fused)");
        free(x);
        for (int k = OCT_KIND_ANGIO_FIRST; k < OCT_KIND_COUNT; k++) {
            const int m = k <= OCT_KIND_ANGIO_LAST ? k - OCT_KIND_ANGIO_FIRST
                                                   : oct_kind_angio_source(k) - OCT_KIND_ANGIO_FIRST;
            const oct_image *a = &out[0]->img[OCT_METHOD_CFD][k];
            const oct_image *b = &out[1]->img[OCT_METHOD_CFD][k];
            ck_assert_msg(a->present && b->present && a->count == b->count &&
                              a->count == (size_t)G * N * (k <= OCT_KIND_ANGIO_LAST ? D : 1),
                          "%s: present %d/%d", oct_angio_metric_name(m), a->present, b->present);
            char what[96], msg[512];
            snprintf(what, sizeof what, "cuda vs cpu engine %s/%s M=%u R=%u G=%u", oct_kind_name(k),
                     oct_angio_metric_name(m), M, R, G);
            ck_assert_msg(tu_check_gray_pair(what, b->u8, a->u8, a->count, a->ndim, a->shape, msg,
                                             sizeof msg),
                          "%s", msg);
        }
        for (int b = 0; b < 4; b++)
            oct_products_destroy(out[b]);
        free(frame);
    }
}
END_TEST

/* CUDA repeat alignment on the flow phantom with motion (axial, and axial +
 * lateral): the shifts within 0.01 px of the CPU's (and near the truth), the
 * metrics within 1e-4 of the float64 reference resampled by the GPU's shifts
 * and of the CPU's output; G = 3 groups, shifts also in estimation batches of 2. */
START_TEST(t_cuda_align)
{
    const uint32_t M = 256, N = 40, G = 3, R = 4, F = 3, D = M / 2 + 1;
    const size_t img = (size_t)N * D;
    for (int lateral = 0; lateral < 2; lateral++) {
        const uint32_t align = lateral ? OCT_ANGIO_ALIGN_LATERAL : OCT_ANGIO_ALIGN_AXIAL;
        float *x = motion_spectra(M, N, G, R, lateral, NULL, NULL);
        float *cpu[OCT_ANGIO_M_COUNT], *gpu[OCT_ANGIO_M_COUNT];
        float cz[G * R], cx[G * R], gz[G * R], gx[G * R];
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
            cpu[m] = malloc(sizeof(float) * G * img);
            gpu[m] = malloc(sizeof(float) * G * img);
        }
        cpu_aligned(x, M, N, G, R, F, align, cpu, cz, cx);
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, M, N, R);
        cfg.freq_cutoff = (int32_t)F;
        cfg.align = align;
        oct_error e = {{0}};
        ck_assert_msg(oct_angio_cuda_align_host(&cfg, NULL, x, G, 0, gz, gx, &e) == OCT_OK, "%s",
                      e.msg);
        /* estimation batches of 2 groups (the last one short): the same shifts */
        float bz[G * R], bx[G * R];
        ck_assert_msg(oct_angio_cuda_align_host(&cfg, NULL, x, G, 2, bz, bx, &e) == OCT_OK, "%s",
                      e.msg);
        for (uint32_t i = 0; i < G * R; i++)
            ck_assert_msg(fabsf(bz[i] - gz[i]) < 1e-4f && fabsf(bx[i] - gx[i]) < 1e-4f,
                          "batches of 2: group %u repeat %u (%g, %g) vs (%g, %g)", i / R, i % R,
                          bx[i], bz[i], gx[i], gz[i]);
        for (uint32_t i = 0; i < G * R; i++) {
            printf("align %s group %u repeat %u: cpu (dx, dz) = (%.5f, %.5f), cuda (%.5f, %.5f)\n",
                   lateral ? "lateral" : "axial", i / R, i % R, cx[i], cz[i], gx[i], gz[i]);
            ck_assert_msg(fabsf(gz[i] - cz[i]) <= 0.01f && fabsf(gx[i] - cx[i]) <= 0.01f,
                          "group %u repeat %u: cuda (dx, dz) = (%g, %g), cpu (%g, %g)", i / R,
                          i % R, gx[i], gz[i], cx[i], cz[i]);
        }
        /* the metrics, both layouts of the output */
        for (int layout = 0; layout < 2; layout++) {
            oct_angio_out o = {{0}, layout ? 1 : D, layout ? N : 1};
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                o.img[m] = malloc(sizeof(float) * G * img);
            ck_assert_msg(oct_angio_cuda_host(&cfg, NULL, x, G, &o, img, NULL, &e) == OCT_OK, "%s",
                          e.msg);
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
                for (uint32_t g = 0; g < G; g++)
                    for (uint32_t n = 0; n < N; n++)
                        for (uint32_t d = 0; d < D; d++)
                            gpu[m][g * img + (size_t)n * D + d] =
                                o.img[m][g * img + n * o.stride_n + d * o.stride_d];
                free(o.img[m]);
            }
            check_aligned(layout ? "cuda [D][N]" : "cuda [N][D]", gpu, x, M, N, G, R, F, 4,
                          lateral, gz, gx);
            for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
                char what[96], msg[512];
                snprintf(what, sizeof what, "cuda vs cpu aligned %s (%s)", oct_angio_metric_name(m),
                         lateral ? "lateral" : "axial");
                uint32_t shape[3] = {G, N, D};
                ck_assert_msg(tu_check_f32_pair(what, gpu[m], cpu[m], G * img, 3, shape,
                                                TU_TOL_FP32, msg, sizeof msg),
                              "%s", msg);
            }
        }
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
            free(cpu[m]);
            free(gpu[m]);
        }
        free(x);
    }
}
END_TEST

/* The CUDA engine with angio.align (axial, lateral) on a flow frame with
 * motion: every angiography product equal to the CPU engine's (f32 within
 * 1e-4, gray within one level), and the aligned ssada separates the vessel
 * (vessel/tissue >= 3; about 1.2 unaligned). */
START_TEST(t_cuda_engine_align)
{
    const uint32_t M = 256, N = 40, G = 4, R = 4, D = M / 2 + 1;
    for (int lateral = 0; lateral < 2; lateral++) {
        uint16_t *frame;
        uint8_t *lab;
        float *x = motion_spectra(M, N, G, R, lateral, &frame, &lab);
        free(x);
        oct_setup su;
        oct_setup_default(&su);
        su.geom = (oct_geometry){M, N, G * R, OCT_SAMPLE_U16, 0};
        su.flags = OCT_SETUP_QUICK_PLAN;
        su.repeats = R;
        oct_params p;
        oct_params_default(&p);
        p.background = OCT_BG_FRAME_MEAN;
        p.freq_cutoff = 3;
        p.angio_metrics = OCT_ANGIO_METRICS_ALL;
        p.angio_align = lateral ? OCT_ANGIO_ALIGN_LATERAL : OCT_ANGIO_ALIGN_AXIAL;
        p.products |= OCT_PRODUCT_F32 | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX);
        p.slab_start = 20, p.slab_end = (int32_t)D - 20;
        oct_products *out[2];
        oct_error e = {{0}};
        for (int b = 0; b < 2; b++) {
            su.backend = b ? OCT_BACKEND_CUDA : OCT_BACKEND_CPU;
            oct_engine *eng;
            ck_assert_msg(oct_engine_create(&eng, &su, &p, &e) == OCT_OK, "%s", e.msg);
            out[b] = oct_products_create();
            ck_assert_msg(oct_engine_process(eng, frame, sizeof(uint16_t) * (size_t)G * R * N * M,
                                             out[b], &e) == OCT_OK,
                          "%s", e.msg);
            oct_engine_destroy(eng);
        }
        for (int k = OCT_KIND_ANGIO_FIRST; k < OCT_KIND_COUNT; k++) {
            const oct_image *a = &out[0]->img[OCT_METHOD_CFD][k];
            const oct_image *c = &out[1]->img[OCT_METHOD_CFD][k];
            if (!a->present && !c->present)
                continue;
            ck_assert_msg(a->present && c->present && a->count == c->count, "%s: present %d/%d",
                          oct_kind_name(k), a->present, c->present);
            char what[96], msg[512];
            snprintf(what, sizeof what, "cuda vs cpu engine, align %s, %s",
                     lateral ? "lateral" : "axial", oct_kind_name(k));
            ck_assert_msg(tu_check_f32_pair(what, c->f32, a->f32, a->count, a->ndim, a->shape,
                                            TU_TOL_FP32, msg, sizeof msg),
                          "%s", msg);
            ck_assert_msg(tu_check_gray_pair(what, c->u8, a->u8, a->count, a->ndim, a->shape, msg,
                                             sizeof msg),
                          "%s", msg);
        }
        const oct_image *ss = &out[1]->img[OCT_METHOD_CFD][OCT_KIND_SSADA];
        ck_assert(ss->present && ss->ndim == 3 && ss->shape[0] == G);
        sim_flow f;
        sim_flow_default(&f, M, N, G, R);
        uint32_t d0, d1;
        sim_flow_slab(&f, &d0, &d1);
        sim_flow_score sc;
        sim_flow_evaluate(lab, ss->f32, G, N, D, d0, d1, &sc);
        printf("cuda engine, align %s: ssada vessel/tissue %.2f, CNR %.2f\n",
               lateral ? "lateral" : "axial", sc.ratio, sc.cnr);
        /* this small frame (M 256, N 40) gave 4.0 on an H200 (2026-11-23); without
         * alignment the same motion leaves ~1.2 (t_flow_motion), so 3 says it aligned */
        ck_assert_msg(sc.ratio >= 3, "cuda engine, aligned: vessel/tissue %g < 3", sc.ratio);
        oct_products_destroy(out[0]);
        oct_products_destroy(out[1]);
        free(frame);
        free(lab);
    }
}
END_TEST

START_TEST(t_cuda_refusal)
{
    /* without a device or CUDA build: a clean refusal with a message */
    oct_angio_config cfg;
    oct_angio_config_default(&cfg, 64, 2, 2);
    float buf[2 * 2 * 64] = {0};
    float out[5][2 * 33];
    oct_angio_out o = {{out[0], out[1], out[2], out[3], out[4]}, 33, 1};
    oct_error e = {{0}};
    oct_err err = oct_angio_cuda_host(&cfg, NULL, buf, 1, &o, 66, NULL, &e);
    ck_assert_msg(err == OCT_EUNSUPPORTED || err == OCT_EDEVICE, "err %d: %s", err, e.msg);
    ck_assert_msg(strlen(e.msg) > 5, "no message");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("angio");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, t_reference, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, t_hand_values);
    tcase_add_test(tc, t_fused_host);
    tcase_add_test(tc, t_cutoff_rows);
    tcase_add_test(tc, t_errors);
    tcase_add_test(tc, t_align_integer);
    tcase_add_test(tc, t_align_subpixel);
    tcase_add_test(tc, t_align_identity);
    tcase_add_test(tc, t_flow_physics);
    tcase_add_test(tc, t_flow_motion);
    tcase_add_test(tc, t_align_reference);
    tcase_add_test(tc, t_flow_errors);
    tcase_add_test(tc, t_profile_repeats);
    tcase_add_test(tc, t_engine);
    tcase_add_test(tc, t_engine_errors);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("cuda");
    tcase_set_timeout(tg, 120);
    bool device = false;
#ifdef OCT_HAVE_CUDA
    {
        oct_angio_config cfg;
        oct_angio_config_default(&cfg, 64, 1, 2);
        oct_angio_cuda *ca = NULL;
        oct_error e = {{0}};
        if (oct_angio_cuda_create(&ca, &cfg, NULL, 64, &e) == OCT_OK) {
            device = true;
            oct_angio_cuda_destroy(ca);
        } else {
            snprintf(g_skip, sizeof g_skip, "%s", e.msg);
        }
    }
#else
    snprintf(g_skip, sizeof g_skip, "CUDA not built in");
#endif
    if (device) {
        tcase_add_test(tg, t_cuda);
        tcase_add_test(tg, t_cuda_engine);
        tcase_add_test(tg, t_cuda_align);
        tcase_add_test(tg, t_cuda_engine_align);
    } else
        tcase_add_test(tg, t_cuda_refusal);
    suite_add_tcase(s, tg);
    SRunner *sr = srunner_create(s);
#ifdef OCT_HAVE_CUDA
    /* never fork after CUDA was initialised (the probe above did) */
    srunner_set_fork_status(sr, CK_NOFORK);
#endif
    srunner_run_all(sr, CK_NORMAL);
    if (!device)
        printf("SKIP angio cuda: %s\n", g_skip);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
