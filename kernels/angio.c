/* angio.c - repeated B-scans and angiography on the CPU (SPEC 10.3); see angio.h.
 *
 * Work per group, OpenMP over A-scans (each thread its own FFT buffers, the
 * plans shared: fftwf_execute_dft_r2c on equally aligned arrays is
 * thread-safe):
 *   cfd     (only when A is not given) |r2c(x~)| for the R*N spectra
 *   align   (optional) shift estimate per repeat, bilinear resampling
 *   metrics struct/median/sv/decor in one pass over the R values of a pixel
 *   ssada   per band k: |r2c(g_k . x~)| of the R*N spectra into a band
 *           buffer (aligned like A when alignment is on), its decor added
 *           into the output; the output is divided by K at the end.
 */
#include "angio.h"

#include <fftw3.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oct_ipc.h"

_Static_assert(OCT_ANGIO_STRUCT == 1u << OCT_ANGIO_M_STRUCT, "struct bit");
_Static_assert(OCT_ANGIO_MEDIAN == 1u << OCT_ANGIO_M_MEDIAN, "median bit");
_Static_assert(OCT_ANGIO_SV == 1u << OCT_ANGIO_M_SV, "sv bit");
_Static_assert(OCT_ANGIO_DECOR == 1u << OCT_ANGIO_M_DECOR, "decor bit");
_Static_assert(OCT_ANGIO_SSADA == 1u << OCT_ANGIO_M_SSADA, "ssada bit");

static const char *const metric_names[OCT_ANGIO_M_COUNT] = {"struct", "median", "sv", "decor",
                                                            "ssada"};

const char *oct_angio_metric_name(int metric)
{
    return metric >= 0 && metric < OCT_ANGIO_M_COUNT ? metric_names[metric] : NULL;
}

void oct_angio_config_default(oct_angio_config *c, uint32_t samples, uint32_t ascans,
                              uint32_t repeats)
{
    memset(c, 0, sizeof *c);
    c->samples = samples;
    c->ascans = ascans;
    c->repeats = repeats;
    c->metrics = OCT_ANGIO_METRICS_ALL;
    c->bands = 4;
    c->band_width = 1.0f;
    c->quick_plan = true;
}

oct_err oct_angio_config_check(const oct_angio_config *c, oct_error *e)
{
    const uint32_t M = c->samples;
    if (M < 64 || M > 8192 || (M & (M - 1)))
        return oct_error_set(e, OCT_EINVAL,
                             "geometry.samples = %u: must be a power of two from 64 to 8192", M);
    if (c->ascans < 1)
        return oct_error_set(e, OCT_EINVAL, "geometry.ascans = 0: must be at least 1");
    if (c->repeats < 2 || c->repeats > OCT_ANGIO_REPEATS_MAX)
        return oct_error_set(e, OCT_EINVAL,
                             "geometry.repeats = %u: angiography needs 2..%u repeats", c->repeats,
                             OCT_ANGIO_REPEATS_MAX);
    if (c->freq_cutoff < 0 || (uint32_t)c->freq_cutoff > M / 2)
        return oct_error_set(e, OCT_EINVAL, "freq_cutoff = %d: must be in [0, %u]",
                             c->freq_cutoff, M / 2);
    if (c->metrics == 0 || (c->metrics & ~OCT_ANGIO_METRICS_ALL))
        return oct_error_set(e, OCT_EINVAL,
                             "angio.metrics = 0x%x: must be a non-empty set of struct, median, "
                             "sv, decor, ssada (bits 0x1..0x10)",
                             c->metrics);
    if (c->bands < 1 || c->bands > OCT_ANGIO_BANDS_MAX)
        return oct_error_set(e, OCT_EINVAL, "angio.bands = %d: must be in [1, %d]", c->bands,
                             OCT_ANGIO_BANDS_MAX);
    if (!(c->band_width > 0.0f && c->band_width <= 4.0f))
        return oct_error_set(e, OCT_EINVAL, "angio.band_width = %g: must be in (0, 4]",
                             (double)c->band_width);
    if (c->align > OCT_ANGIO_ALIGN_LATERAL)
        return oct_error_set(e, OCT_EINVAL,
                             "angio.align = %u: must be 0 (off), 1 (axial) or 2 (axial+lateral)",
                             c->align);
    if (c->cuda_path > OCT_ANGIO_CUDA_FUSED)
        return oct_error_set(e, OCT_EINVAL,
                             "cuda.angio_path = %u: must be 0 (bands), 1 (legacy) or 2 (fused)",
                             c->cuda_path);
    if (c->threads < 0)
        return oct_error_set(e, OCT_EINVAL, "threads = %d: must be >= 0", c->threads);
    return OCT_OK;
}

void oct_angio_band_gains(float *g, uint32_t M, int K, float band_width)
{
    const double w = (double)band_width * M / K;
    for (int k = 0; k < K; k++) {
        const double ck = (k + 0.5) * M / K;
        for (uint32_t n = 0; n < M; n++) {
            double u = (n - ck) / w;
            g[(size_t)k * M + n] = (float)exp(-4.0 * M_LN2 * u * u);
        }
    }
}

/* ---- plan ------------------------------------------------------------------ */

typedef struct align_plan {
    uint32_t Pn, Pz;           /* padded sizes (Pn = 1: axial only) */
    float *ref;                /* Pn x Pz real input of repeat 0 / scratch */
    fftwf_complex *F0, *Fr;    /* Pn x (Pz/2+1) spectra */
    float *corr;               /* Pn x Pz correlation */
    fftwf_plan fwd, bwd;       /* 2-D (or 1-D batched over columns) */
    double *sum0, *sq0, *sumr, *sqr; /* (N+1) x (Dz+1) summed-area tables */
    double *ncc;               /* (2 mx + 1) x (2 mz + 1) search window */
} align_plan;

struct oct_angio {
    oct_angio_config c;
    uint32_t D;
    int threads;
    float *gains;              /* K x M */
    fftwf_plan r2c;            /* M real -> M/2+1 complex, one spectrum */
    float **tin;               /* per thread: M floats */
    fftwf_complex **tout;      /* per thread: M/2+1 */
    float *Abuf;               /* R x N x D: computed intensities (A == NULL); with
                                  alignment, aligned band magnitudes (ssada) */
    float *Atmp;               /* R x N x D: band magnitudes (ssada) */
    float *Aal;                /* R x N x D: aligned intensities (alignment on) */
    float *acc;                /* N x D: ssada accumulator */
    float *dz, *dx;            /* R shifts */
    align_plan al;
    oct_angio_times times;
};

static pthread_once_t fftwf_once = PTHREAD_ONCE_INIT;
static void fftwf_threadsafe_init(void)
{
    fftwf_make_planner_thread_safe();
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void align_free(align_plan *p)
{
    if (p->fwd)
        fftwf_destroy_plan(p->fwd);
    if (p->bwd)
        fftwf_destroy_plan(p->bwd);
    fftwf_free(p->ref);
    fftwf_free(p->F0);
    fftwf_free(p->Fr);
    fftwf_free(p->corr);
    free(p->sum0);
    free(p->ncc);
    memset(p, 0, sizeof *p);
}

static oct_err align_plan_make(oct_angio *a, unsigned flags, oct_error *e)
{
    align_plan *p = &a->al;
    const uint32_t N = a->c.ascans, D = a->D;
    /* padded so that lags up to the search range never wrap onto others */
    p->Pz = 2 * a->c.samples; /* >= 2 D */
    p->Pn = a->c.align == OCT_ANGIO_ALIGN_LATERAL ? 2 * N : 1;
    const uint32_t Pn = p->Pn, Pz = p->Pz, Hz = Pz / 2 + 1;
    const size_t cols = a->c.align == OCT_ANGIO_ALIGN_LATERAL ? 1 : N; /* batch */
    const size_t nreal = (size_t)(Pn > 1 ? Pn : N) * Pz, ncplx = (size_t)(Pn > 1 ? Pn : N) * Hz;
    p->ref = fftwf_malloc(sizeof(float) * nreal);
    p->F0 = fftwf_malloc(sizeof(fftwf_complex) * ncplx);
    p->Fr = fftwf_malloc(sizeof(fftwf_complex) * ncplx);
    p->corr = fftwf_malloc(sizeof(float) * (size_t)Pn * Pz);
    const size_t tab = (size_t)(N + 1) * (D - (uint32_t)a->c.freq_cutoff + 1);
    const size_t win = (size_t)(2 * (Pn > 1 ? N / 4 : 0) + 1) * (2 * (D / 4) + 1);
    p->sum0 = malloc(sizeof(double) * 4 * tab);
    p->ncc = malloc(sizeof(double) * win);
    if (p->sum0) {
        p->sq0 = p->sum0 + tab;
        p->sumr = p->sq0 + tab;
        p->sqr = p->sumr + tab;
    }
    if (!p->ref || !p->F0 || !p->Fr || !p->corr || !p->sum0 || !p->ncc)
        return oct_error_set(e, OCT_ENOMEM, "angio: out of memory for the alignment buffers "
                                            "(%zu + %zu values)", nreal, ncplx);
    if (Pn > 1) {
        p->fwd = fftwf_plan_dft_r2c_2d((int)Pn, (int)Pz, p->ref, p->F0, flags);
        p->bwd = fftwf_plan_dft_c2r_2d((int)Pn, (int)Pz, p->Fr, p->corr, flags);
    } else {
        /* every column transformed; the cross-power is summed over columns
         * before one inverse transform */
        int n = (int)Pz;
        p->fwd = fftwf_plan_many_dft_r2c(1, &n, (int)cols, p->ref, NULL, 1, (int)Pz, p->F0, NULL,
                                         1, (int)Hz, flags);
        p->bwd = fftwf_plan_dft_c2r_1d((int)Pz, p->Fr, p->corr, flags);
    }
    if (!p->fwd || !p->bwd)
        return oct_error_set(e, OCT_EBACKEND, "angio: FFTW could not plan the alignment "
                                              "transforms (%u x %u)", Pn, Pz);
    return OCT_OK;
}

void oct_angio_destroy(oct_angio *a)
{
    if (!a)
        return;
    if (a->r2c)
        fftwf_destroy_plan(a->r2c);
    if (a->tin)
        for (int t = 0; t < a->threads; t++)
            fftwf_free(a->tin[t]);
    if (a->tout)
        for (int t = 0; t < a->threads; t++)
            fftwf_free(a->tout[t]);
    free(a->tin);
    free(a->tout);
    align_free(&a->al);
    fftwf_free(a->gains);
    fftwf_free(a->Abuf);
    fftwf_free(a->Atmp);
    fftwf_free(a->Aal);
    fftwf_free(a->acc);
    free(a->dz);
    free(a);
}

oct_err oct_angio_create(oct_angio **out, const oct_angio_config *c, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_angio_config_check(c, e);
    if (err)
        return err;
    pthread_once(&fftwf_once, fftwf_threadsafe_init);
    oct_angio *a = calloc(1, sizeof *a);
    if (!a)
        return oct_error_set(e, OCT_ENOMEM, "angio: out of memory");
    a->c = *c;
    const uint32_t M = c->samples, N = c->ascans, R = c->repeats, D = M / 2 + 1;
    a->D = D;
    a->threads = c->threads > 0 ? c->threads : omp_get_max_threads();
    const size_t img = (size_t)R * N * D;
    const bool ssada = c->metrics & OCT_ANGIO_SSADA;
    a->gains = fftwf_malloc(sizeof(float) * (size_t)c->bands * M);
    a->tin = calloc((size_t)a->threads, sizeof *a->tin);
    a->tout = calloc((size_t)a->threads, sizeof *a->tout);
    a->Abuf = fftwf_malloc(sizeof(float) * img);
    a->Atmp = ssada ? fftwf_malloc(sizeof(float) * img) : NULL;
    a->Aal = c->align ? fftwf_malloc(sizeof(float) * img) : NULL;
    a->acc = ssada ? fftwf_malloc(sizeof(float) * (size_t)N * D) : NULL;
    a->dz = calloc(2 * (size_t)R, sizeof(float));
    if (!a->gains || !a->tin || !a->tout || !a->Abuf || (ssada && (!a->Atmp || !a->acc)) ||
        (c->align && !a->Aal) || !a->dz) {
        oct_angio_destroy(a);
        return oct_error_set(e, OCT_ENOMEM, "angio: out of memory for %u x %u x %u buffers", R, N,
                             D);
    }
    a->dx = a->dz + R;
    for (int t = 0; t < a->threads; t++) {
        a->tin[t] = fftwf_malloc(sizeof(float) * M);
        a->tout[t] = fftwf_malloc(sizeof(fftwf_complex) * D);
        if (!a->tin[t] || !a->tout[t]) {
            oct_angio_destroy(a);
            return oct_error_set(e, OCT_ENOMEM, "angio: out of memory");
        }
    }
    oct_angio_band_gains(a->gains, M, c->bands, c->band_width);
    const unsigned flags = c->quick_plan ? FFTW_ESTIMATE : FFTW_MEASURE;
    a->r2c = fftwf_plan_dft_r2c_1d((int)M, a->tin[0], a->tout[0], flags);
    if (!a->r2c) {
        oct_angio_destroy(a);
        return oct_error_set(e, OCT_EBACKEND, "angio: FFTW could not plan %u points", M);
    }
    if (c->align) {
        err = align_plan_make(a, flags, e);
        if (err) {
            oct_angio_destroy(a);
            return err;
        }
    }
    *out = a;
    return OCT_OK;
}

const oct_angio_config *oct_angio_config_of(const oct_angio *a)
{
    return &a->c;
}

void oct_angio_slab(const float *img, size_t st_g, size_t st_n, size_t st_d, uint32_t G,
                    uint32_t N, int32_t d0, int32_t d1, bool max, float *out, int threads)
{
    const int64_t total = (int64_t)G * N;
    if (threads < 1)
        threads = omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < total; i++) {
        const float *p = img + (size_t)(i / N) * st_g + (size_t)(i % N) * st_n;
        double acc = max ? -INFINITY : 0.0;
        for (int32_t d = d0; d < d1; d++) {
            double v = p[(size_t)d * st_d];
            acc = max ? (v > acc ? v : acc) : acc + v;
        }
        out[i] = (float)(max ? acc : acc / (double)(d1 - d0));
    }
}

void oct_angio_shifts(const oct_angio *a, float *dz, float *dx)
{
    for (uint32_t r = 0; r < a->c.repeats; r++) {
        if (dz)
            dz[r] = a->dz[r];
        if (dx)
            dx[r] = a->dx[r];
    }
}

void oct_angio_times_get(const oct_angio *a, oct_angio_times *t)
{
    *t = a->times;
}

/* ---- magnitudes -------------------------------------------------------------- */

/* dst[j][d] = |DFT(g . xt_j)[d]| (g NULL: 1), 0 for d < F, j < R*N. */
static void magnitudes(oct_angio *a, const float *xt, const float *g, float *dst)
{
    const uint32_t M = a->c.samples, D = a->D, F = (uint32_t)a->c.freq_cutoff;
    const long S = (long)a->c.repeats * a->c.ascans;
#pragma omp parallel num_threads(a->threads)
    {
        const int t = omp_get_thread_num();
        float *in = a->tin[t];
        fftwf_complex *X = a->tout[t];
#pragma omp for schedule(static)
        for (long j = 0; j < S; j++) {
            const float *x = xt + (size_t)j * M;
            if (g)
                for (uint32_t n = 0; n < M; n++)
                    in[n] = g[n] * x[n];
            else
                memcpy(in, x, sizeof(float) * M);
            fftwf_execute_dft_r2c(a->r2c, in, X);
            float *o = dst + (size_t)j * D;
            for (uint32_t d = 0; d < D; d++)
                o[d] = d < F ? 0.0f : sqrtf(X[d][0] * X[d][0] + X[d][1] * X[d][1]);
        }
    }
}

/* ---- alignment ------------------------------------------------------------- */

/* Parabola vertex offset through (-1, cm), (0, c0), (1, cp), within [-1/2, 1/2]. */
static double vertex(double cm, double c0, double cp)
{
    double den = cm - 2 * c0 + cp;
    if (!(den < 0))
        return 0;
    double v = 0.5 * (cm - cp) / den;
    return v < -0.5 ? -0.5 : v > 0.5 ? 0.5 : v;
}

/* Image img [N][D] (mean removed, d >= F only) into the padded real array,
 * and the summed-area tables of it and its square (Dz = D - F columns). */
static void align_load(oct_angio *a, const float *img, float *dst, double *tsum, double *tsq)
{
    const uint32_t N = a->c.ascans, D = a->D, Pz = a->al.Pz, F = (uint32_t)a->c.freq_cutoff;
    double sum = 0;
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t d = F; d < D; d++)
            sum += img[(size_t)n * D + d];
    const float mean = (float)(sum / ((double)N * (D - F)));
    const size_t rows = a->al.Pn > 1 ? a->al.Pn : N;
    memset(dst, 0, sizeof(float) * rows * Pz);
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t d = F; d < D; d++)
            dst[(size_t)n * Pz + d] = img[(size_t)n * D + d] - mean;
    const uint32_t Dz = D - F, W = Dz + 1;
    for (uint32_t d = 0; d <= Dz; d++)
        tsum[d] = tsq[d] = 0;
    for (uint32_t n = 0; n < N; n++) {
        double rs = 0, rq = 0;
        tsum[(size_t)(n + 1) * W] = tsq[(size_t)(n + 1) * W] = 0;
        for (uint32_t d = 0; d < Dz; d++) {
            double v = dst[(size_t)n * Pz + F + d];
            rs += v;
            rq += v * v;
            tsum[(size_t)(n + 1) * W + d + 1] = tsum[(size_t)n * W + d + 1] + rs;
            tsq[(size_t)(n + 1) * W + d + 1] = tsq[(size_t)n * W + d + 1] + rq;
        }
    }
}

/* Sum of a summed-area table over rows [n0, n1) x columns [d0, d1). */
static inline double rect(const double *t, uint32_t W, int n0, int n1, int d0, int d1)
{
    return t[(size_t)n1 * W + d1] - t[(size_t)n0 * W + d1] - t[(size_t)n1 * W + d0] +
           t[(size_t)n0 * W + d0];
}

/* Shift of repeat `img` against the reference (al.F0 and its tables): the
 * normalised cross-correlation over the overlap of the two images,
 *   ncc[s] = cov(ref[p], img[p + s]) / sqrt(var ref . var img)   (p in the overlap),
 * the raw sums from one FFT correlation, the overlap's means and variances
 * from summed-area tables (Padfield's masked correlation for a box mask);
 * without the per-overlap normalisation the peak is pulled towards 0.
 * Peak -> (dx, dz), refined by parabolas. */
static void align_estimate(oct_angio *a, const float *img, float *dz, float *dx)
{
    align_plan *p = &a->al;
    const uint32_t N = a->c.ascans, D = a->D, Pz = p->Pz, Hz = Pz / 2 + 1, Pn = p->Pn;
    const uint32_t Dz = D - (uint32_t)a->c.freq_cutoff, W = Dz + 1;
    align_load(a, img, p->ref, p->sumr, p->sqr);
    fftwf_execute_dft_r2c(p->fwd, p->ref, p->Fr);
    if (Pn > 1) {
        const size_t nc = (size_t)Pn * Hz;
        for (size_t i = 0; i < nc; i++) {
            float ar = p->F0[i][0], ai = p->F0[i][1], br = p->Fr[i][0], bi = p->Fr[i][1];
            p->Fr[i][0] = ar * br + ai * bi; /* conj(F0) Fr */
            p->Fr[i][1] = ar * bi - ai * br;
        }
    } else {
        for (uint32_t k = 0; k < Hz; k++) {
            double sr = 0, si = 0;
            for (uint32_t n = 0; n < N; n++) {
                const fftwf_complex *f0 = p->F0 + (size_t)n * Hz, *fr = p->Fr + (size_t)n * Hz;
                sr += (double)f0[k][0] * fr[k][0] + (double)f0[k][1] * fr[k][1];
                si += (double)f0[k][0] * fr[k][1] - (double)f0[k][1] * fr[k][0];
            }
            p->Fr[k][0] = (float)sr;
            p->Fr[k][1] = (float)si;
        }
    }
    fftwf_execute_dft_c2r(p->bwd, p->Fr, p->corr);
    const double scale = 1.0 / ((double)Pn * Pz); /* FFTW's inverse is unnormalised */
    const int mz = (int)(D / 4) < (int)Dz - 1 ? (int)(D / 4) : (int)Dz - 1;
    const int mx = Pn > 1 ? (int)(N / 4) : 0, wz = 2 * mz + 1;
    int bx = 0, bz = 0;
    double best = -INFINITY;
    for (int sx = -mx; sx <= mx; sx++) {
        const int n0 = sx < 0 ? -sx : 0, n1 = sx < 0 ? (int)N : (int)N - sx;
        for (int sz = -mz; sz <= mz; sz++) {
            const int d0 = sz < 0 ? -sz : 0, d1 = sz < 0 ? (int)Dz : (int)Dz - sz;
            const double ov = (double)(n1 - n0) * (d1 - d0);
            const double s0 = rect(p->sum0, W, n0, n1, d0, d1);
            const double q0 = rect(p->sq0, W, n0, n1, d0, d1);
            const double sr = rect(p->sumr, W, n0 + sx, n1 + sx, d0 + sz, d1 + sz);
            const double qr = rect(p->sqr, W, n0 + sx, n1 + sx, d0 + sz, d1 + sz);
            const double cross =
                p->corr[(size_t)((sx + (int)Pn) % (int)Pn) * Pz + (uint32_t)((sz + (int)Pz) % (int)Pz)] *
                scale;
            const double v0 = q0 - s0 * s0 / ov, vr = qr - sr * sr / ov;
            const double den = sqrt((v0 > 1e-30 ? v0 : 1e-30) * (vr > 1e-30 ? vr : 1e-30));
            const double v = (cross - s0 * sr / ov) / den;
            p->ncc[(size_t)(sx + mx) * wz + (sz + mz)] = v;
            if (v > best) {
                best = v;
                bx = sx;
                bz = sz;
            }
        }
    }
#define NCC(sx, sz) p->ncc[(size_t)((sx) + mx) * wz + ((sz) + mz)]
    double fz = bz > -mz && bz < mz ? vertex(NCC(bx, bz - 1), best, NCC(bx, bz + 1)) : 0;
    double fx = mx && bx > -mx && bx < mx ? vertex(NCC(bx - 1, bz), best, NCC(bx + 1, bz)) : 0;
#undef NCC
    *dz = (float)(bz + fz);
    *dx = (float)(bx + fx);
}

/* dst[n][d] = src(n + dx, d + dz), bilinear, coordinates clamped. */
static void resample(const float *src, float *dst, uint32_t N, uint32_t D, float dx, float dz,
                     int threads)
{
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long n = 0; n < (long)N; n++) {
        float xn = (float)n + dx;
        xn = xn < 0 ? 0 : xn > (float)(N - 1) ? (float)(N - 1) : xn;
        uint32_t n0 = (uint32_t)xn, n1 = n0 + 1 < N ? n0 + 1 : n0;
        float fx = xn - (float)n0;
        const float *s0 = src + (size_t)n0 * D, *s1 = src + (size_t)n1 * D;
        float *o = dst + (size_t)n * D;
        for (uint32_t d = 0; d < D; d++) {
            float z = (float)d + dz;
            z = z < 0 ? 0 : z > (float)(D - 1) ? (float)(D - 1) : z;
            uint32_t d0 = (uint32_t)z, d1 = d0 + 1 < D ? d0 + 1 : d0;
            float fz = z - (float)d0;
            float v0 = s0[d0] + fz * (s0[d1] - s0[d0]);
            float v1 = s1[d0] + fz * (s1[d1] - s1[d0]);
            o[d] = v0 + fx * (v1 - v0);
        }
    }
}

/* Estimates the shifts of every repeat of A against repeat 0. */
static void align_group(oct_angio *a, const float *A)
{
    const uint32_t N = a->c.ascans, D = a->D, R = a->c.repeats;
    const size_t img = (size_t)N * D;
    a->dz[0] = a->dx[0] = 0;
    align_load(a, A, a->al.ref, a->al.sum0, a->al.sq0);
    fftwf_execute_dft_r2c(a->al.fwd, a->al.ref, a->al.F0);
    for (uint32_t r = 1; r < R; r++)
        align_estimate(a, A + r * img, &a->dz[r], &a->dx[r]);
}

/* dst = A with every repeat r >= 1 resampled by its shifts. */
static void align_apply(oct_angio *a, const float *A, float *dst)
{
    const uint32_t N = a->c.ascans, D = a->D, R = a->c.repeats;
    const size_t img = (size_t)N * D;
    memcpy(dst, A, sizeof(float) * img);
    for (uint32_t r = 1; r < R; r++)
        resample(A + r * img, dst + r * img, N, D, a->dx[r], a->dz[r], a->threads);
}

/* ---- metrics ------------------------------------------------------------------ */

static inline float corr_c(float x, float y)
{
    float den = x * x + y * y;
    return den > 0 ? 2.0f * x * y / den : 1.0f;
}

/* decor of the R images of A at every pixel; add = accumulate into dst
 * (ssada bands) instead of storing. */
static void decor_pass(const oct_angio *a, const float *A, float *dst, size_t sn, size_t sd,
                       bool add)
{
    const uint32_t N = a->c.ascans, D = a->D, R = a->c.repeats;
    const size_t img = (size_t)N * D;
    const float inv = 1.0f / (float)(R - 1);
#pragma omp parallel for num_threads(a->threads) schedule(static)
    for (long n = 0; n < (long)N; n++) {
        const float *row = A + (size_t)n * D;
        for (uint32_t d = 0; d < D; d++) {
            float s = 0;
            float prev = row[d];
            for (uint32_t r = 1; r < R; r++) {
                float cur = row[r * img + d];
                s += corr_c(prev, cur);
                prev = cur;
            }
            float v = 1.0f - s * inv;
            float *o = dst + (size_t)n * sn + (size_t)d * sd;
            *o = add ? *o + v : v;
        }
    }
}

static void metrics_pass(const oct_angio *a, const float *A, const oct_angio_out *o)
{
    const uint32_t N = a->c.ascans, D = a->D, R = a->c.repeats, W = a->c.metrics;
    const size_t img = (size_t)N * D, sn = o->stride_n, sd = o->stride_d;
    float *ost = W & OCT_ANGIO_STRUCT ? o->img[OCT_ANGIO_M_STRUCT] : NULL;
    float *omd = W & OCT_ANGIO_MEDIAN ? o->img[OCT_ANGIO_M_MEDIAN] : NULL;
    float *osv = W & OCT_ANGIO_SV ? o->img[OCT_ANGIO_M_SV] : NULL;
    float *odc = W & OCT_ANGIO_DECOR ? o->img[OCT_ANGIO_M_DECOR] : NULL;
    if (!ost && !omd && !osv && !odc)
        return;
    const float invR = 1.0f / (float)R, invR1 = 1.0f / (float)(R - 1);
#pragma omp parallel for num_threads(a->threads) schedule(static)
    for (long n = 0; n < (long)N; n++) {
        float v[OCT_ANGIO_REPEATS_MAX];
        const float *row = A + (size_t)n * D;
        for (uint32_t d = 0; d < D; d++) {
            float s = 0, c = 0;
            for (uint32_t r = 0; r < R; r++) {
                v[r] = row[r * img + d];
                s += v[r];
                if (r)
                    c += corr_c(v[r - 1], v[r]);
            }
            const float S = s * invR;
            const size_t at = (size_t)n * sn + (size_t)d * sd;
            if (ost)
                ost[at] = S;
            if (osv) {
                float q = 0;
                for (uint32_t r = 0; r < R; r++)
                    q += (v[r] - S) * (v[r] - S);
                osv[at] = q * invR;
            }
            if (odc)
                odc[at] = 1.0f - c * invR1;
            if (omd) {
                for (uint32_t i = 1; i < R; i++) { /* insertion sort: R is small */
                    float x = v[i];
                    uint32_t k = i;
                    for (; k > 0 && v[k - 1] > x; k--)
                        v[k] = v[k - 1];
                    v[k] = x;
                }
                omd[at] = R & 1 ? v[R / 2] : 0.5f * (v[R / 2 - 1] + v[R / 2]);
            }
        }
    }
}

oct_err oct_angio_group(oct_angio *a, const float *A, const float *xt, const oct_angio_out *o,
                        oct_error *e)
{
    const uint32_t W = a->c.metrics, N = a->c.ascans, D = a->D;
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        if ((W & (1u << m)) && !o->img[m])
            return oct_error_set(e, OCT_EINVAL, "angio: no output buffer for metric %s",
                                 metric_names[m]);
    if (!A && !xt)
        return oct_error_set(e, OCT_EINVAL, "angio: neither intensities nor spectra given");
    if ((W & OCT_ANGIO_SSADA) && !xt)
        return oct_error_set(e, OCT_EINVAL, "angio: ssada needs the pre-processed spectra");
    if (!(o->stride_n == D && o->stride_d == 1) && !(o->stride_n == 1 && o->stride_d == N))
        return oct_error_set(e, OCT_EINVAL,
                             "angio: output strides (%zu, %zu): must be (D, 1) = (%u, 1) or "
                             "(1, N) = (1, %u)",
                             o->stride_n, o->stride_d, D, N);
    memset(&a->times, 0, sizeof a->times);
    double t0 = now_ms(), t = t0;
    if (!A) {
        magnitudes(a, xt, NULL, a->Abuf);
        A = a->Abuf;
        a->times.cfd_ms = now_ms() - t;
        t = now_ms();
    }
    if (a->c.align) {
        align_group(a, A);
        align_apply(a, A, a->Aal); /* not in place: A may be Abuf */
        A = a->Aal;
        a->times.align_ms = now_ms() - t;
        t = now_ms();
    } else {
        memset(a->dz, 0, sizeof(float) * 2 * a->c.repeats);
    }
    metrics_pass(a, A, o);
    a->times.metrics_ms = now_ms() - t;
    t = now_ms();
    if (W & OCT_ANGIO_SSADA) {
        const int K = a->c.bands;
        for (int k = 0; k < K; k++) {
            magnitudes(a, xt, a->gains + (size_t)k * a->c.samples, a->Atmp);
            const float *B = a->Atmp;
            if (a->c.align) {
                align_apply(a, a->Atmp, a->Abuf); /* Abuf is free once the metrics ran */
                B = a->Abuf;
            }
            decor_pass(a, B, a->acc, D, 1, k > 0);
        }
        float *dst = o->img[OCT_ANGIO_M_SSADA];
        const float invK = 1.0f / (float)K;
        for (uint32_t n = 0; n < N; n++)
            for (uint32_t d = 0; d < D; d++)
                dst[(size_t)n * o->stride_n + (size_t)d * o->stride_d] =
                    a->acc[(size_t)n * D + d] * invK;
        a->times.ssada_ms = now_ms() - t;
    }
    a->times.total_ms = now_ms() - t0;
    return OCT_OK;
}

#ifndef OCT_HAVE_CUDA
oct_err oct_angio_cuda_create(oct_angio_cuda **out, const oct_angio_config *c, void *stream,
                              size_t max_spectra, oct_error *e)
{
    *out = NULL;
    return oct_error_set(e, OCT_EUNSUPPORTED, "angio: CUDA is not built in");
}
void oct_angio_cuda_destroy(oct_angio_cuda *a)
{
}
oct_err oct_angio_cuda_run(oct_angio_cuda *a, const float *dA, const float *dxt, uint32_t groups,
                           const oct_angio_dout *o, oct_error *e)
{
    return oct_error_set(e, OCT_EUNSUPPORTED, "angio: CUDA is not built in");
}
oct_err oct_angio_cuda_run_x(oct_angio_cuda *a, const void *dX, const float *dxt,
                             uint32_t groups, const oct_angio_dout *o, oct_error *e)
{
    return oct_error_set(e, OCT_EUNSUPPORTED, "angio: CUDA is not built in");
}
oct_err oct_angio_cuda_host(const oct_angio_config *c, const float *A, const float *xt,
                            uint32_t groups, const oct_angio_out *o, size_t stride_g,
                            double *device_ms, oct_error *e)
{
    return oct_error_set(e, OCT_EUNSUPPORTED, "angio: CUDA is not built in");
}
oct_err oct_angio_cuda_align_host(const oct_angio_config *c, const float *A, const float *xt,
                                  uint32_t groups, uint32_t sub_groups, float *dz, float *dx,
                                  oct_error *e)
{
    return oct_error_set(e, OCT_EUNSUPPORTED, "angio: CUDA is not built in");
}
#endif
