/* test_regplanes.c - the registered planes of live registration
 * (oct_register_planes_*, kernels/oct_register.h) on random volumes and
 * random shifts (drift, jitter, a jump > 2 px, invalid lines, shifts that
 * move a slab out of its line):
 *  - equal to the planes of the whole reconstruction (oct_register_reconstruct,
 *    averaged here) and to a float64 reconstruction written here with direct
 *    sums (SPEC 10.4's rules; SPEC 7: 1e-4 relative L2, the same NaNs);
 *  - running averages over several targets, reset, and bad input named;
 *  - computed in two scratch objects and accumulated in order (octd's
 *    workers): the same averages as add(), bit for bit. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oct_register.h"

#define TOL 1e-4 /* SPEC 7: float32 within 1e-4 relative L2 of float64 */

static double unif(uint64_t *s) /* [0, 1) */
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* ---- float64 reconstruction (SPEC 10.4, oct_register.h's rules) ---- */

static double cr64(double f, int a) /* Catmull-Rom weight of node a (0..3) */
{
    double f2 = f * f, f3 = f2 * f;
    switch (a) {
    case 0: return 0.5 * (-f3 + 2 * f2 - f);
    case 1: return 0.5 * (3 * f3 - 5 * f2 + 2);
    case 2: return 0.5 * (-3 * f3 + 4 * f2 + f);
    default: return 0.5 * (f3 - f2);
    }
}

static int clampi(int i, int n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* target line l at (x, z), NaN outside the line */
static double samp64(const float *t, int N, int D, int l, double x, double z)
{
    if (x < 0 || z < 0 || x > N - 1 || z > D - 1)
        return NAN;
    int i = (int)floor(x), j = (int)floor(z);
    double s = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            s += cr64(x - i, a) * cr64(z - j, b) *
                 t[((size_t)l * N + clampi(i - 1 + a, N)) * D + clampi(j - 1 + b, D)];
    return s;
}

static double y64(const float *sh, int l, int L)
{
    return l < 0 || l >= L || sh[4 * l + 3] != 1.0f ? NAN : l + (double)sh[4 * l + 1];
}

/* voxel (r, n, d) of the registered volume */
static double voxel64(const float *t, const float *sh, int L, int N, int D, int r, int n, int d)
{
    double sum = 0;
    int cnt = 0;
    bool any = false;
    for (int l = 0; l + 1 < L; l++) {
        double y0 = y64(sh, l, L), y1 = y64(sh, l + 1, L);
        if (isnan(y0) || isnan(y1) || fabs(y1 - y0) > 2 || r < fmin(y0, y1) || r > fmax(y0, y1))
            continue;
        any = true;
        double v[4], ys[4];
        for (int k = 0; k < 4; k++) {
            int lk = l - 1 + k;
            ys[k] = y64(sh, lk, L);
            v[k] = isnan(ys[k]) ? NAN
                                : samp64(t, N, D, lk, n - (double)sh[4 * lk], d - (double)sh[4 * lk + 2]);
        }
        double g = y1 - y0, x;
        bool cubic = !isnan(ys[0]) && !isnan(ys[3]) && fabs(y0 - ys[0]) <= 2 && fabs(ys[3] - y1) <= 2 &&
                     g * (y0 - ys[0]) > 0.25 * g * g && g * (ys[3] - y1) > 0.25 * g * g;
        if (cubic && !isnan(v[0]) && !isnan(v[1]) && !isnan(v[2]) && !isnan(v[3])) {
            x = 0;
            for (int a = 0; a < 4; a++) {
                double w = 1;
                for (int b = 0; b < 4; b++)
                    if (b != a)
                        w *= (r - ys[b]) / (ys[a] - ys[b]);
                x += w * v[a];
            }
        } else {
            double tt = y1 != y0 ? (r - y0) / (y1 - y0) : 0.5;
            x = !isnan(v[1]) && !isnan(v[2]) ? (1 - tt) * v[1] + tt * v[2] : tt <= 0.5 ? v[1] : v[2];
        }
        if (!isnan(x))
            sum += x, cnt++;
    }
    if (!any)
        for (int l = 0; l < L; l++) {
            double y = y64(sh, l, L);
            if (!isnan(y) && fabs(y - r) <= 0.5) {
                double x = samp64(t, N, D, l, n - (double)sh[4 * l], d - (double)sh[4 * l + 2]);
                if (!isnan(x))
                    sum += x, cnt++;
            }
        }
    return cnt ? sum / cnt : NAN;
}

/* ---- scenes ---- */

static float *random_volume(int L, int N, int D, uint64_t *s)
{
    float *v = malloc(sizeof(float) * (size_t)L * N * D);
    for (size_t i = 0; i < (size_t)L * N * D; i++)
        v[i] = (float)(1 + 9 * unif(s));
    return v;
}

/* drift and jitter in y (neighbours 0.2 .. 1.8 px apart), a 3.5 px jump at
 * L/2, dx in +-3, dz in +-zmax, every 7th line invalid */
static void random_shifts(float *sh, int L, double zmax, uint64_t *s)
{
    for (int l = 0; l < L; l++) {
        bool valid = l % 7 != 3;
        float *o = sh + 4 * l;
        o[0] = (float)(6 * unif(s) - 3);
        o[1] = (float)(0.5 * l / L + 0.8 * unif(s) - 0.4 + (l >= L / 2 ? 3.5 : 0));
        o[2] = (float)(zmax * (2 * unif(s) - 1));
        o[3] = valid ? 1.0f : 0.0f;
        if (!valid)
            o[0] = o[1] = o[2] = NAN;
    }
}

/* rel L2 of a against b over pixels finite in both; the NaNs must agree */
static double rel_l2(const float *a, const double *b, size_t n, size_t *finite)
{
    double num = 0, den = 0;
    *finite = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(isnan(a[i]) == isnan(b[i]), "pixel %zu: %g vs %g", i, (double)a[i], b[i]);
        if (isnan(b[i]))
            continue;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
        (*finite)++;
    }
    return den > 0 ? sqrt(num / den) : 0;
}

/* V targets through the planes, against the averaged planes of the whole
 * reconstruction (float32, the library) and of the float64 one (here). */
static void check_planes(int L, int N, int D, const int32_t *depths, uint32_t q, int32_t z0,
                         int32_t z1, int V, double zmax, bool slab_data, uint64_t seed)
{
    uint64_t s = seed;
    size_t LN = (size_t)L * N, n3 = LN * D;
    oct_register_planes *p;
    oct_error e;
    ck_assert_int_eq(oct_register_planes_create(&p, L, N, D, depths, q, z0, z1, &e), OCT_OK);
    float *sh = malloc(sizeof(float) * 4 * L), *full = malloc(sizeof(float) * n3);
    double *sum32 = calloc((q + 1) * LN, sizeof(double)), *sum64 = calloc((q + 1) * LN, sizeof(double));
    int *c32 = calloc((q + 1) * LN, sizeof(int)), *c64 = calloc((q + 1) * LN, sizeof(int));
    double *v64 = malloc(sizeof(double) * D);
    bool slab = z1 > z0;
    for (int v = 0; v < V; v++) {
        float *t = random_volume(L, N, D, &s);
        random_shifts(sh, L, zmax, &s);
        ck_assert_int_eq(oct_register_planes_add(p, t, sh, &e), OCT_OK);
        ck_assert_int_eq(oct_register_reconstruct(L, N, D, t, sh, full, &e), OCT_OK);
        for (size_t i = 0; i < LN; i++) {
            int r = (int)(i / N), n = (int)(i % N);
            for (int d = 0; d < D; d++)
                v64[d] = voxel64(t, sh, L, N, D, r, n, d);
            for (uint32_t k = 0; k <= q; k++) {
                double a, b; /* this target's plane value: library, float64 */
                if (k < q) {
                    a = full[i * D + depths[k]], b = v64[depths[k]];
                } else if (slab) {
                    a = b = 0;
                    for (int d = z0; d < z1; d++)
                        a += full[i * D + d], b += v64[d];
                    a /= z1 - z0, b /= z1 - z0;
                } else
                    continue;
                if (!isnan(a))
                    sum32[k * LN + i] += a, c32[k * LN + i]++;
                if (!isnan(b))
                    sum64[k * LN + i] += b, c64[k * LN + i]++;
            }
        }
        free(t);
    }
    ck_assert_uint_eq(oct_register_planes_count(p), (unsigned)V);
    float *got = malloc(sizeof(float) * (q + 1) * LN);
    oct_register_planes_get(p, got, got + q * LN);
    double *w32 = malloc(sizeof(double) * (q + 1) * LN), *w64 = malloc(sizeof(double) * (q + 1) * LN);
    for (size_t i = 0; i < (q + 1) * LN; i++) {
        w32[i] = c32[i] ? sum32[i] / c32[i] : NAN;
        w64[i] = c64[i] ? sum64[i] / c64[i] : NAN;
    }
    for (uint32_t k = 0; k <= q; k++) {
        if (k == q && !slab) {
            for (size_t i = 0; i < LN; i++)
                ck_assert(isnan(got[q * LN + i]));
            continue;
        }
        size_t fin;
        double e64 = rel_l2(got + k * LN, w64 + k * LN, LN, &fin);
        double e32 = rel_l2(got + k * LN, w32 + k * LN, LN, &fin);
        ck_assert_msg(e64 <= TOL && e32 <= TOL, "%s %u: rel L2 %.2e vs float64, %.2e vs the whole "
                      "reconstruction", k < q ? "en-face" : "slab", k < q ? (unsigned)depths[k] : 0u,
                      e64, e32);
        /* most pixels have data, some have none (the jump, edges); a slab
         * that a shift moves out of its line has none there */
        if (k < q || slab_data)
            ck_assert_msg(fin > LN / 2, "only %zu of %zu pixels finite", fin, LN);
    }
    oct_register_planes_reset(p);
    ck_assert_uint_eq(oct_register_planes_count(p), 0);
    oct_register_planes_get(p, got, got + q * LN);
    for (size_t i = 0; i < (q + 1) * LN; i++)
        ck_assert(isnan(got[i]));
    oct_register_planes_destroy(p);
    free(sh), free(full), free(sum32), free(sum64), free(c32), free(c64), free(v64);
    free(got), free(w32), free(w64);
}

START_TEST(test_planes_inside)
{
    /* slab well inside: every line's shifted slab lies inside it (profiles) */
    const int32_t depths[] = {0, 5, 17, 29, 39};
    check_planes(24, 20, 40, depths, 5, 10, 30, 3, 4.0, true, 11);
}
END_TEST

START_TEST(test_planes_edges)
{
    /* slabs reaching the depth edges: rows made voxel by voxel, NaNs where a
     * shifted slab leaves the volume */
    const int32_t depths[] = {1, 38};
    check_planes(20, 16, 40, depths, 2, 0, 40, 2, 3.0, false, 12);
    check_planes(20, 16, 40, depths, 2, 2, 9, 2, 3.0, false, 13);
    check_planes(20, 16, 40, depths, 2, 36, 40, 2, 3.0, false, 14);
}
END_TEST

START_TEST(test_planes_no_slab)
{
    const int32_t depths[] = {7};
    check_planes(16, 12, 24, depths, 1, 5, 5, 2, 2.0, false, 15);
    check_planes(16, 12, 24, NULL, 0, 3, 20, 2, 2.0, true, 16);
}
END_TEST

/* compute in two scratch objects (two workers), accumulate in order into a
 * third: the same averages as add(), bit for bit */
START_TEST(test_planes_two_step)
{
    const int L = 20, N = 16, D = 40, V = 4;
    const int32_t depths[] = {3, 21};
    const size_t LN = (size_t)L * N;
    uint64_t s = 21;
    oct_register_planes *one, *acc, *w[2];
    oct_error e;
    ck_assert_int_eq(oct_register_planes_create(&one, L, N, D, depths, 2, 0, 40, &e), OCT_OK);
    ck_assert_int_eq(oct_register_planes_create(&acc, L, N, D, depths, 2, 0, 40, &e), OCT_OK);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(oct_register_planes_create(&w[i], L, N, D, depths, 2, 0, 40, &e), OCT_OK);
    ck_assert_int_eq(oct_register_planes_accumulate(acc, w[0], &e), OCT_ESTATE);
    float *t[V], *sh[V];
    for (int v = 0; v < V; v++) {
        t[v] = random_volume(L, N, D, &s);
        sh[v] = malloc(sizeof(float) * 4 * L);
        random_shifts(sh[v], L, 3.0, &s);
        ck_assert_int_eq(oct_register_planes_add(one, t[v], sh[v], &e), OCT_OK);
    }
    for (int v = 0; v < V; v += 2) {
        ck_assert_int_eq(oct_register_planes_compute(w[0], t[v], sh[v], &e), OCT_OK);
        ck_assert_int_eq(oct_register_planes_compute(w[1], t[v + 1], sh[v + 1], &e), OCT_OK);
        ck_assert_int_eq(oct_register_planes_accumulate(acc, w[0], &e), OCT_OK);
        ck_assert_int_eq(oct_register_planes_accumulate(acc, w[1], &e), OCT_OK);
    }
    ck_assert_uint_eq(oct_register_planes_count(acc), V);
    ck_assert_uint_eq(oct_register_planes_count(w[0]), 0); /* scratch: nothing added */
    float *a = malloc(sizeof(float) * 3 * LN), *b = malloc(sizeof(float) * 3 * LN);
    oct_register_planes_get(one, a, a + 2 * LN);
    oct_register_planes_get(acc, b, b + 2 * LN);
    size_t fin = 0;
    for (size_t i = 0; i < 3 * LN; i++) {
        ck_assert_msg(a[i] == b[i] || (isnan(a[i]) && isnan(b[i])), "pixel %zu: %g vs %g", i,
                      (double)a[i], (double)b[i]);
        fin += !isnan(a[i]);
    }
    ck_assert(fin > LN);
    /* other planes: named */
    oct_register_planes *other;
    const int32_t d2[] = {3, 22};
    ck_assert_int_eq(oct_register_planes_create(&other, L, N, D, d2, 2, 0, 40, &e), OCT_OK);
    ck_assert_int_eq(oct_register_planes_compute(other, t[0], sh[0], &e), OCT_OK);
    ck_assert_int_eq(oct_register_planes_accumulate(acc, other, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "registered planes: [20][16][40] with 2 en-face"), "%s", e.msg);
    oct_register_planes_destroy(other);
    for (int v = 0; v < V; v++)
        free(t[v]), free(sh[v]);
    free(a), free(b);
    oct_register_planes_destroy(one), oct_register_planes_destroy(acc);
    oct_register_planes_destroy(w[0]), oct_register_planes_destroy(w[1]);
}
END_TEST

START_TEST(test_planes_bad_input)
{
    oct_register_planes *p = (void *)1;
    oct_error e;
    const int32_t bad[] = {3, 24};
    ck_assert_int_eq(oct_register_planes_create(&p, 8, 8, 24, bad, 2, 0, 4, &e), OCT_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(e.msg, "en-face depth 1 is 24") && strstr(e.msg, "[0, 24)"), "%s", e.msg);
    ck_assert_int_eq(oct_register_planes_create(&p, 8, 8, 24, bad, 1, -1, 4, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "slab [-1, 4) outside [0, 24]"), "%s", e.msg);
    ck_assert_int_eq(oct_register_planes_create(&p, 8, 8, 24, bad, 1, 10, 25, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "slab [10, 25)"), "%s", e.msg);
    ck_assert_int_eq(oct_register_planes_create(&p, 0, 8, 24, bad, 1, 0, 4, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "empty volume [0][8][24]"), "%s", e.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("regplanes");
    TCase *tc = tcase_create("planes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_planes_inside);
    tcase_add_test(tc, test_planes_edges);
    tcase_add_test(tc, test_planes_no_slab);
    tcase_add_test(tc, test_planes_two_step);
    tcase_add_test(tc, test_planes_bad_input);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
