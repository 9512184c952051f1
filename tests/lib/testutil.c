/* testutil.c - random test inputs and SPEC section 7 comparisons. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref64.h"

void tu_rng_seed(tu_rng *r, uint64_t seed) { r->s = seed ^ 0x6a09e667f3bcc909ull; }

uint64_t tu_rng_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_rng_uniform(tu_rng *r) { return (double)(tu_rng_next(r) >> 11) * 0x1.0p-53; }

double tu_rng_normal(tu_rng *r)
{
    double u1 = tu_rng_uniform(r), u2 = tu_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Converted-unit range of the generator: a 12-bit digitizer (smaller when
 * the shift leaves fewer bits). */
static double type_range(const oct_geometry *g)
{
    switch (g->sample_type) {
    case OCT_SAMPLE_U16: return fmin(4095.0, (double)(65535u >> g->sample_shift));
    case OCT_SAMPLE_I16: return fmin(2047.0, (double)(32767 >> g->sample_shift));
    default: return 1000.0;
    }
}

static double envelope(uint32_t M, uint32_t n)
{
    double z = ((double)n - 0.5 * (double)M) / (0.3 * (double)M);
    return exp(-0.5 * z * z);
}

double tu_base_level(const oct_geometry *g, uint32_t n)
{
    double range = type_range(g), env = envelope(g->samples, n);
    switch (g->sample_type) {
    case OCT_SAMPLE_U16: return range * (0.15 + 0.35 * env);
    case OCT_SAMPLE_I16: return range * 0.1 * env;
    default: return 100.0 * env;
    }
}

void *tu_frame_random(const oct_geometry *g, uint64_t seed, size_t *bytes)
{
    uint64_t fb = oct_geometry_frame_bytes(g);
    if (fb == 0) return NULL;
    uint8_t *buf = malloc((size_t)fb);
    double *x = malloc(sizeof(double) * g->samples);
    if (!buf || !x) {
        free(buf);
        free(x);
        return NULL;
    }
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    const uint32_t M = g->samples;
    const size_t NL = (size_t)g->ascans * g->lines;
    const double range = type_range(g);
    const double amp = g->sample_type == OCT_SAMPLE_F32 ? 300.0
                       : g->sample_type == OCT_SAMPLE_I16 ? 0.2 * range : 0.12 * range;
    const double noise = g->sample_type == OCT_SAMPLE_F32 ? 2.0 : 0.004 * range;
    for (size_t j = 0; j < NL; j++) {
        /* each A-scan has its own gain and reflectors, so frame_mean leaves a signal */
        double gain = 0.9 + 0.2 * tu_rng_uniform(&rng);
        int nf = 2 + (int)(tu_rng_next(&rng) % 2);
        double f[3], a[3], ph[3];
        for (int k = 0; k < nf; k++) {
            f[k] = 1.0 + tu_rng_uniform(&rng) * (0.5 * M - 2.0); /* cycles per spectrum */
            a[k] = amp * (0.3 + 0.7 * tu_rng_uniform(&rng));
            ph[k] = 2.0 * M_PI * tu_rng_uniform(&rng);
        }
        for (uint32_t n = 0; n < M; n++) {
            double v = gain * tu_base_level(g, n);
            for (int k = 0; k < nf; k++)
                v += a[k] * envelope(M, n) * cos(2.0 * M_PI * f[k] * n / M + ph[k]);
            x[n] = v + noise * tu_rng_normal(&rng);
        }
        size_t i0 = j * M;
        for (uint32_t n = 0; n < M; n++) {
            uint32_t low = (uint32_t)(tu_rng_next(&rng) & ((1u << g->sample_shift) - 1u));
            if (g->sample_type == OCT_SAMPLE_U16) {
                double c = fmin(fmax(round(x[n]), 0.0), (double)(65535u >> g->sample_shift));
                uint16_t v = (uint16_t)(((uint32_t)c << g->sample_shift) | low);
                memcpy(buf + 2 * (i0 + n), &v, 2);
            } else if (g->sample_type == OCT_SAMPLE_I16) {
                double hi = (double)(32767 >> g->sample_shift), lo = -hi - 1.0;
                int32_t c = (int32_t)fmin(fmax(round(x[n]), lo), hi);
                int16_t v = (int16_t)(c * (int32_t)(1u << g->sample_shift) + (int32_t)low);
                memcpy(buf + 2 * (i0 + n), &v, 2);
            } else {
                float v = (float)(x[n] + 0.25 * tu_rng_uniform(&rng));
                memcpy(buf + 4 * (i0 + n), &v, 4);
            }
        }
    }
    free(x);
    if (bytes) *bytes = (size_t)fb;
    return buf;
}

float *tu_masks_random(uint32_t M, uint32_t R, uint64_t seed)
{
    if (M == 0 || R == 0) return NULL;
    float *m = malloc(sizeof(float) * (size_t)M * R);
    if (!m) return NULL;
    tu_rng rng;
    tu_rng_seed(&rng, seed ^ 0x5bd1e995ull);
    for (uint32_t r = 0; r < R; r++) {
        /* mirror at depth r: fringe frequency rising with r, not on a bin */
        double f = (double)M * (0.03 + 0.4 * (r + 0.5) / R) + tu_rng_uniform(&rng) - 0.5;
        double ph = 2.0 * M_PI * tu_rng_uniform(&rng);
        double a = 400.0 * (0.7 + 0.6 * tu_rng_uniform(&rng));
        for (uint32_t n = 0; n < M; n++)
            m[(size_t)r * M + n] = (float)(800.0 * envelope(M, n) +
                                           a * envelope(M, n) * cos(2.0 * M_PI * f * n / M + ph) +
                                           5.0 * tu_rng_normal(&rng));
    }
    return m;
}

float *tu_reference_random(const oct_geometry *g, uint64_t seed)
{
    float *b = malloc(sizeof(float) * g->samples);
    if (!b) return NULL;
    tu_rng rng;
    tu_rng_seed(&rng, seed ^ 0x1234567ull);
    for (uint32_t n = 0; n < g->samples; n++)
        b[n] = (float)(tu_base_level(g, n) * (0.95 + 0.1 * tu_rng_uniform(&rng)) + tu_rng_normal(&rng));
    return b;
}

oct_err tu_poison_image(oct_image *img, size_t pixels, bool want_f32, size_t n_indices,
                        const uint8_t *expected)
{
    oct_err err = oct_image_reserve(img, pixels, want_f32, n_indices);
    if (err != OCT_OK) return err;
    for (size_t i = 0; i < pixels; i++)
        img->u8[i] = expected ? (uint8_t)(expected[i] + 128u) : 0xA5;
    if (want_f32)
        for (size_t i = 0; i < pixels; i++) img->f32[i] = NAN;
    if (img->indices)
        for (size_t i = 0; i < n_indices; i++) img->indices[i] = -7777;
    return OCT_OK;
}

void tu_format_index(char *buf, size_t len, size_t i, int ndim, const uint32_t *shape)
{
    size_t idx[3] = {0, 0, 0};
    for (int k = ndim - 1; k >= 0; k--) {
        size_t s = shape[k] ? shape[k] : 1;
        idx[k] = i % s;
        i /= s;
    }
    if (ndim == 3)
        snprintf(buf, len, "[%zu][%zu][%zu]", idx[0], idx[1], idx[2]);
    else if (ndim == 2)
        snprintf(buf, len, "[%zu][%zu]", idx[0], idx[1]);
    else
        snprintf(buf, len, "[%zu]", idx[0]);
}

double tu_rms(const double *x, size_t n)
{
    if (n == 0) return 0.0;
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s / (double)n);
}

/* Shared body of the float comparisons: b64 (double) or b32 (float). */
static bool check_l2(const char *what, const float *got, const double *b64, const float *b32,
                     size_t count, int ndim, const uint32_t *shape, double tol, char *msg, size_t len)
{
    char at[64];
    double num = 0.0, den = 0.0, worst = -1.0;
    size_t wi = 0;
    for (size_t i = 0; i < count; i++) {
        double r = b64 ? b64[i] : (double)b32[i];
        if (!isfinite(got[i]) || (b32 && !isfinite(b32[i]))) {
            tu_format_index(at, sizeof(at), i, ndim, shape);
            snprintf(msg, len, "%s f32: pixel %s not finite (got %g, expected %.9g): not written?",
                     what, at, (double)got[i], r);
            return false;
        }
        double d = (double)got[i] - r;
        num += d * d;
        den += r * r;
        if (fabs(d) > worst) {
            worst = fabs(d);
            wi = i;
        }
    }
    double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    if (!(rel <= tol)) {
        tu_format_index(at, sizeof(at), wi, ndim, shape);
        double r = b64 ? b64[wi] : (double)b32[wi];
        snprintf(msg, len,
                 "%s f32: relative L2 error %.3g > %.1g over %zu pixels; worst pixel %s got %.9g "
                 "expected %.9g (rms of expected %.6g)",
                 what, rel, tol, count, at, (double)got[wi], r, sqrt(den / (count ? count : 1)));
        return false;
    }
    return true;
}

bool tu_check_f32(const char *what, const float *got, const double *ref, size_t count,
                  int ndim, const uint32_t *shape, double tol, char *msg, size_t len)
{
    return check_l2(what, got, ref, NULL, count, ndim, shape, tol, msg, len);
}

bool tu_check_f32_pair(const char *what, const float *a, const float *b, size_t count,
                       int ndim, const uint32_t *shape, double tol, char *msg, size_t len)
{
    return check_l2(what, a, NULL, b, count, ndim, shape, tol, msg, len);
}

bool tu_check_gray(const char *what, const uint8_t *got, const double *I, size_t count,
                   int ndim, const uint32_t *shape, uint32_t scale, double gsc,
                   double contrast, double brightness, double margin, double slack_I,
                   char *msg, size_t len)
{
    char at[64];
    for (size_t i = 0; i < count; i++) {
        double v = ref64_gray_value(I[i], scale, gsc, contrast, brightness);
        int exp = ref64_gray_level(v);
        int g = got[i];
        if (g == exp) continue;
        /* the range the exact value may take: +- margin, and +- slack_I in I */
        double vlo = v, vhi = v;
        if (slack_I > 0.0) {
            double a = ref64_gray_value(fmax(I[i] - slack_I, 0.0), scale, gsc, contrast, brightness);
            double b = ref64_gray_value(I[i] + slack_I, scale, gsc, contrast, brightness);
            vlo = fmin(vlo, fmin(a, b));
            vhi = fmax(vhi, fmax(a, b));
        }
        int lo = ref64_gray_level(vlo - margin), hi = ref64_gray_level(vhi + margin);
        if (abs(g - exp) <= 1 && g >= lo && g <= hi) continue;
        tu_format_index(at, sizeof(at), i, ndim, shape);
        snprintf(msg, len,
                 "%s gray: pixel %s got %d expected %d (exact value before rounding %.6f, "
                 "intensity %.9g, allowed %d..%d)",
                 what, at, g, exp, v, I[i], lo < exp - 1 ? exp - 1 : lo, hi > exp + 1 ? exp + 1 : hi);
        return false;
    }
    return true;
}

bool tu_check_gray_pair(const char *what, const uint8_t *a, const uint8_t *b, size_t count,
                        int ndim, const uint32_t *shape, char *msg, size_t len)
{
    char at[64];
    for (size_t i = 0; i < count; i++) {
        if (abs((int)a[i] - (int)b[i]) <= 1) continue;
        tu_format_index(at, sizeof(at), i, ndim, shape);
        snprintf(msg, len, "%s gray: pixel %s differs: %d vs %d", what, at, a[i], b[i]);
        return false;
    }
    return true;
}
