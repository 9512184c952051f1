/* register_recon.c - reconstruction of a registered volume on the
 * reference grid and the running average of registered volumes (SPEC 10.4;
 * oct_register.h).  Host code, the same for both registration backends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "oct_register.h"

/* Catmull-Rom weights of a point at fraction f after node 1 of 4 */
static inline void cr_weights(float f, float *w)
{
    float f2 = f * f, f3 = f2 * f;
    w[0] = 0.5f * (-f3 + 2 * f2 - f);
    w[1] = 0.5f * (3 * f3 - 5 * f2 + 2);
    w[2] = 0.5f * (-3 * f3 + 4 * f2 + f);
    w[3] = 0.5f * (f3 - f2);
}

/* Bicubic (Catmull-Rom) sample of line ln [N][D] at (x, z), edge samples
 * repeated; NaN outside [0, N-1] x [0, D-1]. */
static inline float sample2(const float *ln, uint32_t N, uint32_t D, float x, float z)
{
    if (!(x >= 0.0f && z >= 0.0f && x <= (float)(N - 1) && z <= (float)(D - 1)))
        return NAN;
    int i = (int)x, j = (int)z;
    float wx[4], wz[4];
    cr_weights(x - (float)i, wx);
    cr_weights(z - (float)j, wz);
    float acc = 0;
    for (int a = 0; a < 4; a++) {
        int ii = i - 1 + a;
        ii = ii < 0 ? 0 : ii > (int)N - 1 ? (int)N - 1 : ii;
        const float *row = ln + (size_t)ii * D;
        float r = 0;
        for (int b = 0; b < 4; b++) {
            int jj = j - 1 + b;
            jj = jj < 0 ? 0 : jj > (int)D - 1 ? (int)D - 1 : jj;
            r += wz[b] * row[jj];
        }
        acc += wx[a] * r;
    }
    return acc;
}

/* y of line l when valid (the line placed on the reference grid), else NaN */
static inline float line_y(const float *shifts, int64_t l, uint32_t L)
{
    if (l < 0 || l >= (int64_t)L || shifts[4 * l + 3] != 1.0f)
        return NAN;
    return (float)l + shifts[4 * l + 1];
}

oct_err oct_register_reconstruct(uint32_t L, uint32_t N, uint32_t D, const float *target,
                                 const float *shifts, float *out, oct_error *e)
{
    if (!L || !N || !D)
        return oct_error_set(e, OCT_EINVAL, "reconstruct: empty volume [%u][%u][%u]", L, N, D);
#pragma omp parallel for schedule(dynamic)
    for (int64_t r = 0; r < (int64_t)L; r++) {
        /* contributions: lines ca..ca+3 (cubic in y, Lagrange on their
         * positions), or ca, ca+1 (linear), or ca alone (nearest) */
        int ca[64], kind[64];
        float w[64][4];
        int nc = 0;
        for (int64_t l = 0; l + 1 < (int64_t)L && nc < 64; l++) {
            float y0 = line_y(shifts, l, L), y1 = line_y(shifts, l + 1, L);
            if (!isfinite(y0) || !isfinite(y1) || fabsf(y1 - y0) > 2.0f)
                continue;
            float lo = fminf(y0, y1), hi = fmaxf(y0, y1), R = (float)r;
            if (R < lo || R > hi)
                continue;
            float ym = line_y(shifts, l - 1, L), yp = line_y(shifts, l + 2, L);
            bool mono = isfinite(ym) && isfinite(yp) && fabsf(y0 - ym) <= 2.0f && fabsf(yp - y1) <= 2.0f &&
                        (y1 - y0) * (y0 - ym) > 0.25f * (y1 - y0) * (y1 - y0) &&
                        (y1 - y0) * (yp - y1) > 0.25f * (y1 - y0) * (y1 - y0);
            if (mono) { /* four lines, evenly enough spaced */
                float ys[4] = {ym, y0, y1, yp};
                for (int a = 0; a < 4; a++) {
                    double p = 1;
                    for (int b = 0; b < 4; b++)
                        if (b != a)
                            p *= (R - ys[b]) / (ys[a] - ys[b]);
                    w[nc][a] = (float)p;
                }
                ca[nc] = (int)l - 1, kind[nc] = 4, nc++;
            } else {
                float t = hi > lo ? (R - y0) / (y1 - y0) : 0.5f;
                w[nc][0] = 1 - t, w[nc][1] = t;
                ca[nc] = (int)l, kind[nc] = 2, nc++;
            }
        }
        if (!nc)
            for (int64_t l = 0; l < (int64_t)L && nc < 64; l++) {
                float y = line_y(shifts, l, L);
                if (isfinite(y) && fabsf(y - (float)r) <= 0.5f)
                    ca[nc] = (int)l, kind[nc] = 1, w[nc][0] = 1, nc++;
            }
        float *o = out + (size_t)r * N * D;
        for (uint32_t n = 0; n < N; n++)
            for (uint32_t d = 0; d < D; d++) {
                double sum = 0;
                int cnt = 0;
                for (int c = 0; c < nc; c++) {
                    float v[4];
                    for (int k = 0; k < kind[c]; k++) {
                        const float *s = shifts + 4 * (size_t)(ca[c] + k);
                        v[k] = sample2(target + (size_t)(ca[c] + k) * N * D, N, D, (float)n - s[0],
                                       (float)d - s[2]);
                    }
                    float x;
                    if (kind[c] == 4 && isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]) && isfinite(v[3]))
                        x = w[c][0] * v[0] + w[c][1] * v[1] + w[c][2] * v[2] + w[c][3] * v[3];
                    else if (kind[c] >= 2) {
                        /* linear between the middle two, or the nearer one alone */
                        float a = kind[c] == 4 ? v[1] : v[0], b = kind[c] == 4 ? v[2] : v[1];
                        float ya = line_y(shifts, ca[c] + (kind[c] == 4), L);
                        float yb = line_y(shifts, ca[c] + (kind[c] == 4) + 1, L);
                        float t = yb != ya ? ((float)r - ya) / (yb - ya) : 0.5f;
                        if (isfinite(a) && isfinite(b))
                            x = (1 - t) * a + t * b;
                        else
                            x = t <= 0.5f ? a : b;
                    } else
                        x = v[0];
                    if (isfinite(x))
                        sum += x, cnt++;
                }
                o[(size_t)n * D + d] = cnt ? (float)(sum / cnt) : NAN;
            }
    }
    return OCT_OK;
}

struct oct_register_avg {
    size_t n;
    uint32_t volumes;
    double *sum;
    uint32_t *cnt;
};

oct_err oct_register_avg_create(oct_register_avg **out, uint32_t L, uint32_t N, uint32_t D,
                                oct_error *e)
{
    oct_register_avg *a = calloc(1, sizeof *a);
    size_t n = (size_t)L * N * D;
    if (a && n) {
        a->n = n;
        a->sum = calloc(n, sizeof *a->sum);
        a->cnt = calloc(n, sizeof *a->cnt);
    }
    if (!a || !n || !a->sum || !a->cnt) {
        oct_register_avg_destroy(a);
        *out = NULL;
        return oct_error_set(e, n ? OCT_ENOMEM : OCT_EINVAL,
                             "registration average [%u][%u][%u]: %s", L, N, D,
                             n ? "out of memory" : "empty volume");
    }
    *out = a;
    return OCT_OK;
}

void oct_register_avg_destroy(oct_register_avg *a)
{
    if (!a)
        return;
    free(a->sum);
    free(a->cnt);
    free(a);
}

void oct_register_avg_reset(oct_register_avg *a)
{
    memset(a->sum, 0, a->n * sizeof *a->sum);
    memset(a->cnt, 0, a->n * sizeof *a->cnt);
    a->volumes = 0;
}

void oct_register_avg_add(oct_register_avg *a, const float *v)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < a->n; i++)
        if (isfinite(v[i]))
            a->sum[i] += v[i], a->cnt[i]++;
    a->volumes++;
}

uint32_t oct_register_avg_count(const oct_register_avg *a) { return a->volumes; }

void oct_register_avg_get(const oct_register_avg *a, float *out)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < a->n; i++)
        out[i] = a->cnt[i] ? (float)(a->sum[i] / a->cnt[i]) : NAN;
}

