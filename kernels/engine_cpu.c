/* engine_cpu.c - the CPU backend: FFTW3 (single precision) for CFD and the
 * MSI FFT path, OpenBLAS sgemm (loaded at run time) for the MSI matrix path,
 * OpenMP threads over blocks of spectra.
 *
 * Per frame:
 *  1. a pre-pass over the whole frame only when needed (frame_mean background,
 *     or f32 input, whose samples must all be finite);
 *  2. the spectra are split into two lists: "full" spectra, whose every depth
 *     is needed (B-scan frames, the xsec_h line, the xsec_v column, all for a
 *     volume), and "en-face" spectra, of which only the en-face depths are
 *     needed.  Each thread takes blocks of rows of a list, converts them
 *     (sample -> float, background, window fused in one pass) into a block in
 *     cache, then runs CFD and MSI on the block and scatters the intensities
 *     into the float images;
 *  3. gray mapping of every present image.
 */
#include "angio.h"
#include "engine_internal.h"
#include "engine_cpu_internal.h"
#include "formulas.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <fftw3.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- OpenBLAS, loaded at run time ---------------------------------------- */

/* cblas.h is not included: through openblas_config.h it pulls in
 * <complex.h>, which changes fftwf_complex and defines I.  The CBLAS enum
 * values are fixed by the CBLAS standard. */
enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };
typedef void (*sgemm_fn)(int order, int transa, int transb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
typedef void (*set_threads_fn)(int);

/* Process-wide by nature: the library is loaded once and never unloaded. */
static struct {
    sgemm_fn sgemm;
    set_threads_fn set_threads;
    char core[64];  /* OpenBLAS kernel set in use, e.g. "SkylakeX" */
    char why[256];  /* why it is missing */
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* See oct_engine_process_init() for why a program may set
 * OPENBLAS_CORETYPE before this runs. */
static void blas_load(void)
{
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(blas.why, sizeof blas.why, "cannot load libopenblas.so.0: %s", dlerror());
        return;
    }
    blas.sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    blas.set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    snprintf(blas.core, sizeof blas.core, "%s", corename ? corename() : "?");
    if (!blas.sgemm)
        snprintf(blas.why, sizeof blas.why, "libopenblas.so.0 has no cblas_sgemm");
    /* We call sgemm from our own OpenMP threads, one block each. */
    else if (blas.set_threads)
        blas.set_threads(1);
}

void oct_engine_process_init(void)
{
    if (getenv("OPENBLAS_CORETYPE"))
        return; /* the user's choice wins */
    unsigned a, b, c, d;
    char vendor[13] = {0};
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    if (strcmp(vendor, "AuthenticAMD") || !__get_cpuid(1, &a, &b, &c, &d))
        return;
    unsigned family = (a >> 8) & 0xf;
    if (family == 0xf)
        family += (a >> 20) & 0xff;
    __builtin_cpu_init();
    if (family >= 0x1a && __builtin_cpu_supports("avx512f"))
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
}

static pthread_once_t fftwf_once = PTHREAD_ONCE_INIT;
static void fftwf_threadsafe_init(void)
{
    fftwf_make_planner_thread_safe();
}

/* Cost model of the two MSI paths per (spectrum, mask), in ns per thread:
 * the FFT path is a complex product over M/2+1 bins and a C2R FFT, the GEMM
 * path 2*M*Lw flops.  Rates measured on the 2-core Zen 5 this was tuned on
 * (M = 1024, R = 512, 2 threads): FFT path 1.13 us per pair; sgemm 150
 * GFLOP/s per thread with OpenBLAS' AVX-512 (SkylakeX) kernels, ~100 with its
 * AVX2 (Haswell) ones, so the paths break even near Lw = 80 (resp. 55).
 * Only the ratio matters.  The shifted-mask matrices must also fit a cap. */
#define FFT_NS_PER_POINT_LOG 0.11   /* ns per M*log2(M) */
#define GEMM_FLOPS_PER_NS_AVX512 150.0
#define GEMM_FLOPS_PER_NS_AVX2 100.0
#define GEMM_MATRIX_CAP (512ull << 20)

static void thr_buf_free(thr_buf *b)
{
    fftwf_free(b->A);
    fftwf_free(b->X);
    fftwf_free(b->Y);
    fftwf_free(b->p);
    fftwf_free(b->Icfd);
    fftwf_free(b->Imsi);
    fftwf_free(b->C);
    fftwf_free(b->P);
    fftwf_free(b->Ak);
    fftwf_free(b->xpad);
    fftwf_free(b->Z);
    fftwf_free(b->Ccms);
    free(b->fd);
    free(b->fseg);
}

static void cpu_destroy(oct_engine *eng)
{
    cpu_state *s = eng->be;
    if (!s)
        return;
    if (s->tb)
        for (int t = 0; t < s->threads; t++)
            thr_buf_free(&s->tb[t]);
    free(s->tb);
    if (s->r2c)
        fftwf_destroy_plan(s->r2c);
    if (s->c2r)
        fftwf_destroy_plan(s->c2r);
    if (s->cfwd)
        fftwf_destroy_plan(s->cfwd);
    if (s->cbwd)
        fftwf_destroy_plan(s->cbwd);
    fftwf_free(s->bg);
    free(s->acc);
    free(s->meand);
    fftwf_free(s->ones);
    free(s->hist);
    free(s->kstart);
    fftwf_free(s->cms_qenf);
    free(s->full);
    free(s->enf);
    fftwf_free(s->G);
    fftwf_free(s->B_full);
    fftwf_free(s->B_enf);
    oct_angio_destroy(s->ang);
    fftwf_free(s->ang_A);
    fftwf_free(s->ang_X);
    free(s);
    eng->be = NULL;
}

static void cpu_model_name(char *out, size_t len, int threads)
{
    char line[256], model[160] = "CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *c = strchr(line, ':');
            if (!strncmp(line, "model name", 10) && c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(model, sizeof model, "%s", c);
                break;
            }
        }
        fclose(f);
    }
    if (blas.sgemm)
        snprintf(out, len, "%s (%d threads, OpenBLAS %s)", model, threads, blas.core);
    else
        snprintf(out, len, "%s (%d threads, no BLAS)", model, threads);
}

/* The CPU's rates for the planner's cost model (plan.h). */
static void cpu_msi_rates(const oct_setup *setup, oct_msi_rates *r)
{
    pthread_once(&blas_once, blas_load);
    memset(r, 0, sizeof *r);
    r->fft_ns_per_sample_log = FFT_NS_PER_POINT_LOG;
    bool avx512 = strstr(blas.core, "SkylakeX") || strstr(blas.core, "Cooperlake") ||
                  strstr(blas.core, "SapphireRapids");
    r->gemm_flops_per_ns = avx512 ? GEMM_FLOPS_PER_NS_AVX512 : GEMM_FLOPS_PER_NS_AVX2;
    r->gemm_matrix_bytes_max = GEMM_MATRIX_CAP;
    r->gemm_ok = blas.sgemm != NULL;
    if (!r->gemm_ok)
        snprintf(r->why, sizeof r->why, "%.150s", blas.why);
}

static oct_err cpu_prepare(oct_engine *eng, const oct_plan *plan, oct_error *e)
{
    return oct_cpu_ensure(eng, plan, eng->be, e);
}

static oct_err cpu_create(oct_engine *eng, oct_error *e)
{
    const oct_geometry *g = &eng->setup.geom;
    pthread_once(&fftwf_once, fftwf_threadsafe_init);
    pthread_once(&blas_once, blas_load);
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return oct_error_set(e, OCT_ENOMEM, "cpu: out of memory");
    eng->be = s;
    s->threads = eng->setup.threads > 0 ? eng->setup.threads : omp_get_num_procs();
    s->M = g->samples, s->K = g->samples / 2 + 1, s->N = g->ascans, s->L = g->lines;
    s->R = eng->setup.mask_count;
    s->RC = eng->setup.cms_count;
    s->nspec = (size_t)g->ascans * g->lines;
    if (s->nspec > UINT32_MAX) {
        cpu_destroy(eng);
        return oct_error_set(e, OCT_EINVAL, "cpu: %zu spectra per frame: at most %u", s->nspec,
                             UINT32_MAX);
    }
    const uint32_t M = s->M, K = s->K;
    /* Rows per block: ~1 MiB of converted spectra, so A, the GEMM output and
     * the intensity block stay in L2/L3 cache. */
    uint32_t rows = (1u << 20) / (M * 4);
    if (s->R && (1u << 20) / (s->R * 4) < rows)
        rows = (1u << 20) / (s->R * 4);
    if (s->RC && (1u << 20) / (s->RC * 8) < rows)
        rows = (1u << 20) / (s->RC * 8);
    s->rows_max = rows < 8 ? 8 : rows > 256 ? 256 : rows;
    s->chunk_cols_max = M > 1024 ? M : 1024; /* >= one mask's Lw (< M) */
    uint32_t dmax = s->R > K ? s->R : K;
    if (s->RC > dmax)
        dmax = s->RC;
    s->tb = calloc((size_t)s->threads, sizeof(thr_buf));
    s->bg = fftwf_malloc(sizeof(float) * M);
    s->acc = malloc(sizeof(double) * M * (size_t)s->threads);
    s->meand = malloc(sizeof(double) * M);
    s->ones = fftwf_malloc(sizeof(float) * M);
    if (!s->tb || !s->bg || !s->acc || !s->meand || !s->ones) {
        cpu_destroy(eng);
        return oct_error_set(e, OCT_ENOMEM, "cpu: out of memory (%d threads)", s->threads);
    }
    for (uint32_t n = 0; n < M; n++)
        s->ones[n] = 1.0f;
    for (int t = 0; t < s->threads; t++) {
        thr_buf *b = &s->tb[t];
        b->A = fftwf_malloc(sizeof(float) * M * s->rows_max);
        b->X = fftwf_malloc(sizeof(fftwf_complex) * K);
        b->Y = fftwf_malloc(sizeof(fftwf_complex) * K);
        b->p = fftwf_malloc(sizeof(float) * M);
        b->Icfd = fftwf_malloc(sizeof(float) * K);
        b->Imsi = fftwf_malloc(sizeof(float) * (size_t)s->rows_max * (dmax ? dmax : 1));
        b->C = fftwf_malloc(sizeof(float) * (size_t)s->rows_max * (s->chunk_cols_max + M));
        b->P = fftwf_malloc(sizeof(float) * M * s->rows_max);
        b->Ak = fftwf_malloc(sizeof(float) * M * s->rows_max);
        b->xpad = fftwf_malloc(sizeof(float) * (M + 2 * KPAD));
        b->Z = fftwf_malloc(sizeof(fftwf_complex) * M);
        b->Ccms = fftwf_malloc(sizeof(float) * (size_t)s->rows_max * 2 * (s->RC ? s->RC : 1));
        b->fd = malloc(sizeof(double) * 5 * M);
        b->fseg = malloc(sizeof(uint32_t) * M);
        if (!b->A || !b->X || !b->Y || !b->p || !b->Icfd || !b->Imsi || !b->C || !b->P ||
            !b->Ak || !b->xpad || !b->Z || !b->Ccms || !b->fd || !b->fseg) {
            cpu_destroy(eng);
            return oct_error_set(e, OCT_ENOMEM, "cpu: per-thread buffers: out of memory");
        }
    }
    /* Plans on buffers aligned as every buffer they will be executed on
     * (fftwf_malloc; rows of A are M*4 >= 256 bytes apart). */
    unsigned flags = (eng->setup.flags & OCT_SETUP_QUICK_PLAN) ? FFTW_ESTIMATE : FFTW_MEASURE;
    thr_buf *b = &s->tb[0];
    s->r2c = fftwf_plan_dft_r2c_1d((int)M, b->A, b->X, flags | FFTW_PRESERVE_INPUT);
    s->c2r = fftwf_plan_dft_c2r_1d((int)M, b->Y, b->p, flags);
    if (!s->r2c || !s->c2r) {
        cpu_destroy(eng);
        return oct_error_set(e, OCT_EBACKEND, "cpu: FFTW could not plan %u-point transforms", M);
    }
    eng->rebuilds.plans++;
    cpu_model_name(eng->device_name, sizeof eng->device_name, s->threads);
    s->path = eng->plan->msi_path;
    oct_err err = oct_cpu_ensure(eng, eng->plan, s, e);
    if (err) {
        cpu_destroy(eng);
        return err;
    }
    return OCT_OK;
}

/* ---- per-frame work ------------------------------------------------------ */

/* Where the intensities of one method go: the plan's layout rows and their
 * float images. */
typedef struct sink {
    uint32_t n;                           /* layout rows */
    const oct_layout *r[OCT_KIND_COUNT];
    float *f[OCT_KIND_COUNT];
    const int32_t *idx;                   /* en-face depths */
    uint32_t Q, D;
} sink;

typedef struct frame_ctx {
    const oct_engine *eng;
    const oct_plan *pl;
    cpu_state *s;
    const void *frame;
    const float *bg; /* NULL: no background */
    bool cfd, msi, cms;
    bool klin;       /* CFD input is w . klin(x') */
    bool raw;        /* x' (no window) is needed: k-lin or CMS */
    const float *disp;
    int32_t F, W1, W2;
    uint32_t h, v;
    sink k[OCT_METHOD_COUNT];
    float *angA, *angX; /* angiography: where the block pass keeps I and x~ (NULL: off) */
} frame_ctx;

/* dst = w . (x_j - bg) */
static void convert_row(const frame_ctx *c, size_t j, float *restrict dst, const float *restrict w)
{
    const uint32_t M = c->s->M, sh = c->eng->setup.geom.sample_shift;
    const float *restrict bg = c->bg;
    switch (c->eng->setup.geom.sample_type) {
    case OCT_SAMPLE_U16: {
        const uint16_t *restrict src = (const uint16_t *)c->frame + j * M;
        if (bg)
            for (uint32_t n = 0; n < M; n++)
                dst[n] = w[n] * ((float)(uint16_t)(src[n] >> sh) - bg[n]);
        else
            for (uint32_t n = 0; n < M; n++)
                dst[n] = w[n] * (float)(uint16_t)(src[n] >> sh);
        break;
    }
    case OCT_SAMPLE_I16: {
        const int16_t *restrict src = (const int16_t *)c->frame + j * M;
        if (bg)
            for (uint32_t n = 0; n < M; n++)
                dst[n] = w[n] * ((float)(int16_t)(src[n] >> sh) - bg[n]);
        else
            for (uint32_t n = 0; n < M; n++)
                dst[n] = w[n] * (float)(int16_t)(src[n] >> sh);
        break;
    }
    default: {
        const float *restrict src = (const float *)c->frame + j * M;
        if (bg)
            for (uint32_t n = 0; n < M; n++)
                dst[n] = w[n] * (src[n] - bg[n]);
        else
            for (uint32_t n = 0; n < M; n++)
                dst[n] = w[n] * src[n];
        break;
    }
    }
}

/* Slot values v[0..ns) (v[idx[s]] when idx) into one layout row at o. */
static inline void put_row(const oct_layout *r, float *restrict o, const float *restrict v,
                           const int32_t *idx, uint32_t ns)
{
    if (r->reduce == OCT_REDUCE_NONE) {
        const int64_t st = r->st_d;
        if (idx)
            for (uint32_t q = 0; q < ns; q++)
                o[q * st] = v[idx[q]];
        else if (st == 1)
            memcpy(o, v, sizeof(float) * ns);
        else
            for (uint32_t q = 0; q < ns; q++)
                o[q * st] = v[q];
        return;
    }
    float acc;
    if (r->reduce == OCT_REDUCE_MAX) {
        acc = -INFINITY;
        for (uint32_t q = 0; q < ns; q++) {
            float x = idx ? v[idx[q]] : v[q];
            acc = x > acc ? x : acc;
        }
    } else {
        acc = 0.0f;
        for (uint32_t q = 0; q < ns; q++)
            acc += idx ? v[idx[q]] : v[q];
        if (r->reduce == OCT_REDUCE_MEAN)
            acc /= (float)ns;
    }
    *o = acc;
}

/* The one scatter of the CPU backend: the intensities of spectrum j into
 * every layout row of one method that selects it.  full: I holds all D
 * depths; else the Q en-face depths in index order (only en-face rows). */
static void scatter(const frame_ctx *c, const sink *k, size_t j, const float *I, bool full)
{
    const uint32_t N = c->s->N;
    const int64_t l = (int64_t)(j / N), a = (int64_t)(j % N);
    for (uint32_t i = 0; i < k->n; i++) {
        const oct_layout *r = k->r[i];
        if (r->select == OCT_SEL_GROUP || (!full && r->depths != OCT_DEPTHS_ENFACE))
            continue; /* GROUP rows: the angiography stage */
        if ((r->select == OCT_SEL_LINE && l != r->sel) || (r->select == OCT_SEL_COLUMN && a != r->sel))
            continue;
        float *o = k->f[i] + l * r->st_l + a * r->st_a;
        if (r->depths == OCT_DEPTHS_ENFACE)
            put_row(r, o, I, full ? k->idx : NULL, r->nslots);
        else
            put_row(r, o, I + r->d0, NULL, r->nslots);
    }
}

static inline float cabsf_(const fftwf_complex z)
{
    return sqrtf(z[0] * z[0] + z[1] * z[1]);
}

/* Lag sum of |p[l mod M]| over [W1, W2]. */
static inline float lag_sum(const float *restrict p, uint32_t M, int32_t W1, int32_t W2)
{
    float s = 0;
    int32_t l = W1;
    for (; l < 0 && l <= W2; l++)
        s += fabsf(p[M + l]);
    for (; l <= W2; l++)
        s += fabsf(p[l]);
    return s;
}

/* CFD of one spectrum X = DFT(x~) with dispersion: z = IDFT(U.X)/M,
 * Z = DFT(z . e^(-i theta)); writes |Z[d]| for the wanted depths. */
static void cfd_disp(const frame_ctx *c, thr_buf *b)
{
    const cpu_state *s = c->s;
    const uint32_t M = s->M, K = s->K;
    const float inv = 1.0f / (float)M;
    fftwf_complex *restrict z = b->Z;
    const int32_t F = c->F;
    for (uint32_t k = 0; k < M; k++) {
        bool keep = k < K && (int32_t)k >= F;
        z[k][0] = keep ? b->X[k][0] : 0.0f;
        z[k][1] = keep ? b->X[k][1] : 0.0f;
    }
    fftwf_execute_dft(s->cbwd, z, z);
    const float *restrict d = c->disp;
    for (uint32_t n = 0; n < M; n++) {
        float re = z[n][0] * inv, im = z[n][1] * inv;
        z[n][0] = re * d[2 * n] - im * d[2 * n + 1];
        z[n][1] = re * d[2 * n + 1] + im * d[2 * n];
    }
    fftwf_execute_dft(s->cfwd, z, z);
}

/* One block of rows: list[0..rows-1] are spectrum indices; full says whether
 * every depth is needed. */
static void do_block(const frame_ctx *c, thr_buf *b, const uint32_t *list, uint32_t rows,
                     bool full)
{
    cpu_state *s = c->s;
    const uint32_t M = s->M, K = s->K, R = s->R;
    const sink *kc = &c->k[OCT_METHOD_CFD], *km = &c->k[OCT_METHOD_MSI];
    const sink *kz = &c->k[OCT_METHOD_CMS];
    const bool cfd = c->cfd && (full || kc->Q);
    const bool msi = c->msi && (full || km->Q);
    const bool cms = c->cms && (full || kz->Q);
    if (!cfd && !msi && !cms)
        return;
    /* MSI depth set of this block and the intensity row stride */
    const uint32_t nd = full ? R : km->Q;
    const int32_t *depth = full ? NULL : km->idx;
    double t0 = oct_now_ms();
    const bool raw = cms || (cfd && c->klin);
    const bool need_A = msi || (cfd && !c->klin);
    const float *w = c->pl->window;
    for (uint32_t i = 0; i < rows; i++) {
        float *a = b->A + (size_t)i * M;
        if (!raw) {
            convert_row(c, list[i], a, w);
            continue;
        }
        float *restrict x = b->P + (size_t)i * M;
        convert_row(c, list[i], x, s->ones);
        if (need_A)
            for (uint32_t n = 0; n < M; n++)
                a[n] = w[n] * x[n];
        if (cfd && c->klin) {
            const uint32_t T = c->pl->klin_T;
            const float *restrict kw = c->pl->klin_w;
            float *restrict y = b->Ak + (size_t)i * M;
            if (s->kstart_ok) {
                float *restrict xp = b->xpad;
                for (uint32_t k = 0; k < KPAD; k++)
                    xp[k] = x[0], xp[KPAD + M + k] = x[M - 1];
                memcpy(xp + KPAD, x, sizeof(float) * M);
                const int32_t *restrict ks = s->kstart;
                for (uint32_t n = 0; n < M; n++) {
                    const float *restrict xr = xp + KPAD + ks[n], *restrict wr = kw + (size_t)n * T;
                    float sum = 0;
#pragma omp simd reduction(+ : sum)
                    for (uint32_t t = 0; t < T; t++)
                        sum += wr[t] * xr[t];
                    y[n] = w[n] * sum;
                }
            } else {
                const int32_t *restrict ix = c->pl->klin_idx;
                for (uint32_t n = 0; n < M; n++) {
                    float sum = 0;
                    for (uint32_t t = 0; t < T; t++)
                        sum += kw[(size_t)n * T + t] * x[ix[(size_t)n * T + t]];
                    y[n] = w[n] * sum;
                }
            }
        }
    }
    double t1 = oct_now_ms();
    b->t[0] += t1 - t0;

    const bool msi_fft = msi && s->path == OCT_MSI_FFT;
    const float *cin = c->klin ? b->Ak : b->A;
    if (cfd || msi_fft) {
        double tc = 0, tm = 0;
        for (uint32_t i = 0; i < rows; i++) {
            double ta = oct_now_ms();
            if (cfd) {
                fftwf_execute_dft_r2c(s->r2c, (float *)cin + (size_t)i * M, b->X);
                const fftwf_complex *Xd = b->X;
                if (c->disp) {
                    cfd_disp(c, b);
                    Xd = (const fftwf_complex *)b->Z;
                }
                float *I = b->Icfd;
                if (full) {
                    for (uint32_t d = 0; d < K; d++)
                        I[d] = (int32_t)d < c->F ? 0.0f : cabsf_(Xd[d]);
                    scatter(c, kc, list[i], I, true);
                    if (c->angA)
                        memcpy(c->angA + (size_t)list[i] * K, I, sizeof(float) * K);
                    if (c->angX) /* x~: after background, k-lin and window */
                        memcpy(c->angX + (size_t)list[i] * M, cin + (size_t)i * M,
                               sizeof(float) * M);
                } else {
                    for (uint32_t q = 0; q < kc->Q; q++) {
                        int32_t d = kc->idx[q];
                        I[q] = d < c->F ? 0.0f : cabsf_(Xd[d]);
                    }
                    scatter(c, kc, list[i], I, false);
                }
            }
            double tb = oct_now_ms();
            tc += tb - ta;
            if (msi_fft) {
                /* the MSI input is w . x' even when CFD used k-lin */
                if (!cfd || c->klin)
                    fftwf_execute_dft_r2c(s->r2c, b->A + (size_t)i * M, b->X);
                float *out = b->Imsi + (size_t)i * nd;
                for (uint32_t q = 0; q < nd; q++) {
                    const fftwf_complex *restrict g =
                        s->G + (size_t)(depth ? (uint32_t)depth[q] : q) * K;
                    const fftwf_complex *restrict x = b->X;
                    fftwf_complex *restrict y = b->Y;
                    for (uint32_t k = 0; k < K; k++) {
                        y[k][0] = x[k][0] * g[k][0] - x[k][1] * g[k][1];
                        y[k][1] = x[k][0] * g[k][1] + x[k][1] * g[k][0];
                    }
                    fftwf_execute_dft_c2r(s->c2r, b->Y, b->p);
                    out[q] = lag_sum(b->p, M, c->W1, c->W2);
                }
                tm += oct_now_ms() - tb;
            }
        }
        b->t[1] += tc;
        b->t[2] += tm;
    }
    if (msi && s->path == OCT_MSI_GEMM) {
        double ta = oct_now_ms();
        const uint32_t Lw = s->Lw;
        const float *B = full ? s->B_full : s->B_enf;
        const size_t cols = (size_t)nd * Lw;
        uint32_t per = s->chunk_cols_max / Lw;
        if (per < 1)
            per = 1;
        for (uint32_t q0 = 0; q0 < nd; q0 += per) {
            uint32_t qn = nd - q0 < per ? nd - q0 : per;
            int cc = (int)(qn * Lw);
            blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, cc, (int)M, 1.0f,
                       b->A, (int)M, B + (size_t)q0 * Lw, (int)cols, 0.0f, b->C, cc);
            for (uint32_t i = 0; i < rows; i++) {
                const float *restrict crow = b->C + (size_t)i * cc;
                float *restrict out = b->Imsi + (size_t)i * nd + q0;
                for (uint32_t q = 0; q < qn; q++) {
                    const float *restrict cl = crow + (size_t)q * Lw;
                    float sum = 0;
                    for (uint32_t li = 0; li < Lw; li++)
                        sum += fabsf(cl[li]);
                    out[q] = sum;
                }
            }
        }
        b->t[2] += oct_now_ms() - ta;
    }
    if (msi) {
        double ta = oct_now_ms();
        for (uint32_t i = 0; i < rows; i++) {
            const float *I = b->Imsi + (size_t)i * nd;
            scatter(c, km, list[i], I, full);
        }
        b->t[2] += oct_now_ms() - ta;
    }
    if (cms) {
        /* I = |x' . q_r|: one real GEMM (rows x M) x (M x 2nz) against the
         * stacked Re/Im rows of q, then magnitudes */
        double ta = oct_now_ms();
        const uint32_t nz = full ? s->RC : kz->Q;
        const float *Q = full ? c->pl->cms_q : s->cms_qenf;
        const int cols = (int)(2 * nz);
        if (blas.sgemm) {
            blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, cols, (int)M, 1.0f,
                       b->P, (int)M, Q, (int)M, 0.0f, b->Ccms, cols);
        } else {
            for (uint32_t i = 0; i < rows; i++)
                for (int col = 0; col < cols; col++) {
                    const float *x = b->P + (size_t)i * M, *q = Q + (size_t)col * M;
                    float sum = 0;
                    for (uint32_t n = 0; n < M; n++)
                        sum += x[n] * q[n];
                    b->Ccms[(size_t)i * cols + col] = sum;
                }
        }
        for (uint32_t i = 0; i < rows; i++) {
            const float *restrict cr = b->Ccms + (size_t)i * cols;
            float *restrict I = b->Imsi;
            for (uint32_t r = 0; r < nz; r++)
                I[r] = sqrtf(cr[2 * r] * cr[2 * r] + cr[2 * r + 1] * cr[2 * r + 1]);
            scatter(c, kz, list[i], I, full);
        }
        b->t[2] += oct_now_ms() - ta;
    }
}

/* frame_mean background and/or the finiteness check of f32 input. */
static oct_err prepass(frame_ctx *c, bool mean, oct_error *e)
{
    cpu_state *s = c->s;
    const uint32_t M = s->M, type = c->eng->setup.geom.sample_type,
                   sh = c->eng->setup.geom.sample_shift;
    const size_t nspec = s->nspec;
    size_t bad = SIZE_MAX; /* first spectrum * M + sample that is not finite */
    memset(s->acc, 0, sizeof(double) * M * (size_t)s->threads);
#pragma omp parallel num_threads(s->threads)
    {
        double *restrict acc = s->acc + (size_t)omp_get_thread_num() * M;
        size_t mybad = SIZE_MAX;
#pragma omp for schedule(static)
        for (size_t j = 0; j < nspec; j++) {
            if (type == OCT_SAMPLE_U16) {
                const uint16_t *src = (const uint16_t *)c->frame + j * M;
                for (uint32_t n = 0; n < M; n++)
                    acc[n] += (double)(uint16_t)(src[n] >> sh);
            } else if (type == OCT_SAMPLE_I16) {
                const int16_t *src = (const int16_t *)c->frame + j * M;
                for (uint32_t n = 0; n < M; n++)
                    acc[n] += (double)(int16_t)(src[n] >> sh);
            } else {
                const float *src = (const float *)c->frame + j * M;
                if (mybad == SIZE_MAX)
                    for (uint32_t n = 0; n < M; n++)
                        if (!isfinite(src[n])) {
                            mybad = j * M + n;
                            break;
                        }
                if (mean)
                    for (uint32_t n = 0; n < M; n++)
                        acc[n] += (double)src[n];
            }
        }
#pragma omp critical(oct_cpu_prepass)
        if (mybad < bad)
            bad = mybad;
    }
    if (bad != SIZE_MAX) {
        size_t j = bad / M, n = bad % M;
        float v = ((const float *)c->frame)[bad];
        return oct_error_set(e, OCT_EINVAL,
                             "frame: sample %zu of spectrum %zu (line %zu, A-scan %zu) is not "
                             "finite (%g)",
                             n, j, j / s->N, j % s->N, (double)v);
    }
    if (mean) {
        for (uint32_t n = 0; n < M; n++) {
            double sum = 0;
            for (int t = 0; t < s->threads; t++)
                sum += s->acc[(size_t)t * M + n];
            s->meand[n] = sum / (double)nspec;
        }
        if (c->pl->bg.mode == OCT_BG_ROLLING && c->eng->hold_history) {
            /* as the next frame, without entering the ring: this frame's
             * mean with the kept rows but the one it would overwrite */
            bool full = s->hist_n == s->hist_K;
            uint32_t kept = full ? s->hist_K : s->hist_n + 1;
            for (uint32_t n = 0; n < M; n++) {
                double sum = s->meand[n];
                for (uint32_t k = 0; k < s->hist_n; k++)
                    if (!(full && k == s->hist_pos))
                        sum += s->hist[(size_t)k * M + n];
                s->bg[n] = (float)(sum / kept);
            }
        } else if (c->pl->bg.mode == OCT_BG_ROLLING) {
            /* this frame's mean into the ring, b = mean over the ring */
            memcpy(s->hist + (size_t)s->hist_pos * M, s->meand, sizeof(double) * M);
            s->hist_pos = (s->hist_pos + 1) % s->hist_K;
            if (s->hist_n < s->hist_K)
                s->hist_n++;
            for (uint32_t n = 0; n < M; n++) {
                double sum = 0;
                for (uint32_t k = 0; k < s->hist_n; k++)
                    sum += s->hist[(size_t)k * M + n];
                s->bg[n] = (float)(sum / s->hist_n);
            }
        } else {
            for (uint32_t n = 0; n < M; n++)
                s->bg[n] = (float)s->meand[n];
        }
        c->bg = s->bg;
    }
    return OCT_OK;
}

/* Fixed-pattern noise (oct_engine.h): per sample n, the mean of the segment
 * of G spectra with the smallest sum of squared deviations at n (ties: the
 * lowest segment), with the statistics of formulas.h (those of the CUDA
 * kernel).  Each thread keeps the best of its segments; the merge applies
 * the same rule, so the result does not depend on the threads. */
static void fpn_background(frame_ctx *c)
{
    cpu_state *s = c->s;
    const uint32_t M = s->M;
    const size_t S = s->nspec, G0 = c->pl->bg.G;
    const size_t G = S < G0 ? S : G0, nseg = S < G0 ? 1 : S / G0;
    frame_ctx cc = *c;
    cc.bg = NULL; /* raw converted samples */
    for (int t = 0; t < s->threads; t++) {
        double *bkey = s->tb[t].fd + 3 * (size_t)M;
        for (uint32_t n = 0; n < M; n++)
            bkey[n] = INFINITY, s->tb[t].fseg[n] = UINT32_MAX;
    }
#pragma omp parallel num_threads(s->threads)
    {
        thr_buf *b = &s->tb[omp_get_thread_num()];
        oct_fpn_acc *restrict acc = (oct_fpn_acc *)b->fd;
        double *restrict bkey = b->fd + 3 * (size_t)M, *restrict bmean = b->fd + 4 * (size_t)M;
        float *restrict x = b->p; /* M floats of scratch */
#pragma omp for schedule(static)
        for (size_t sg = 0; sg < nseg; sg++) {
            convert_row(&cc, sg * G, x, s->ones);
            for (uint32_t n = 0; n < M; n++)
                oct_fpn_start(&acc[n], x[n]);
            for (size_t j = sg * G + 1; j < (sg + 1) * G; j++) {
                convert_row(&cc, j, x, s->ones);
                for (uint32_t n = 0; n < M; n++)
                    oct_fpn_add(&acc[n], x[n]);
            }
            for (uint32_t n = 0; n < M; n++) {
                double key = oct_fpn_key(&acc[n], (double)G);
                if (oct_fpn_better(key, (long long)sg, bkey[n], b->fseg[n] == UINT32_MAX ? LLONG_MAX : (long long)b->fseg[n]))
                    bkey[n] = key, bmean[n] = oct_fpn_mean(&acc[n], (double)G), b->fseg[n] = (uint32_t)sg;
            }
        }
    }
    for (uint32_t n = 0; n < M; n++) {
        double best = INFINITY, bm = 0;
        long long bsg = LLONG_MAX;
        for (int t = 0; t < s->threads; t++) {
            const thr_buf *b = &s->tb[t];
            if (b->fseg[n] == UINT32_MAX)
                continue;
            double v = b->fd[3 * (size_t)M + n];
            if (oct_fpn_better(v, (long long)b->fseg[n], best, bsg))
                best = v, bm = b->fd[4 * (size_t)M + n], bsg = b->fseg[n];
        }
        s->bg[n] = (float)bm;
    }
    c->bg = s->bg;
}

/* The angiography set-up of this frame (SPEC 10.3): its plan and buffers
 * when the layout has GROUP rows, else c->angA = NULL. */
static oct_err angio_prepare(oct_engine *eng, cpu_state *s, frame_ctx *c, oct_error *e)
{
    const oct_params *p = &c->pl->params;
    const sink *k = &c->k[OCT_METHOD_CFD];
    bool any = false;
    for (uint32_t i = 0; i < k->n; i++)
        any |= k->r[i]->select == OCT_SEL_GROUP;
    if (!any)
        return OCT_OK;
    oct_angio_config cf;
    oct_angio_config_default(&cf, s->M, s->N, eng->setup.repeats);
    cf.freq_cutoff = p->freq_cutoff;
    cf.metrics = p->angio_metrics;
    cf.bands = p->angio_bands;
    cf.band_width = p->angio_band_width;
    cf.align = p->angio_align;
    cf.threads = s->threads;
    cf.quick_plan = (eng->setup.flags & OCT_SETUP_QUICK_PLAN) != 0;
    if (!s->ang || memcmp(&cf, &s->ang_cfg, sizeof cf)) {
        oct_angio_destroy(s->ang);
        s->ang = NULL;
        oct_err err = oct_angio_create(&s->ang, &cf, e);
        if (err)
            return err;
        s->ang_cfg = cf;
    }
    const size_t S = s->nspec, nA = S * s->K, nX = (cf.metrics & (1u << OCT_ANGIO_M_SSADA)) ? S * s->M : 0;
    if (s->ang_cap_A < nA) {
        fftwf_free(s->ang_A);
        s->ang_cap_A = 0;
        if (!(s->ang_A = fftwf_malloc(sizeof(float) * nA)))
            return oct_error_set(e, OCT_ENOMEM, "cpu: angiography: out of memory for %zu spectra", S);
        s->ang_cap_A = nA;
    }
    if (s->ang_cap_X < nX) {
        fftwf_free(s->ang_X);
        s->ang_cap_X = 0;
        if (!(s->ang_X = fftwf_malloc(sizeof(float) * nX)))
            return oct_error_set(e, OCT_ENOMEM, "cpu: angiography: out of memory for %zu spectra", S);
        s->ang_cap_X = nX;
    }
    c->angA = s->ang_A;
    c->angX = nX ? s->ang_X : NULL;
    return OCT_OK;
}

/* The group stage: every group of R repeats into the GROUP rows. */
static oct_err angio_stage(oct_engine *eng, cpu_state *s, const frame_ctx *c, oct_error *e)
{
    const sink *k = &c->k[OCT_METHOD_CFD];
    const uint32_t R = eng->setup.repeats, G = s->L / R;
    const size_t per = (size_t)R * s->N;
    oct_angio_out o;
    memset(&o, 0, sizeof o);
    int64_t st_g = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        const oct_layout *r = k->r[i];
        if (r->select != OCT_SEL_GROUP || oct_kind_angio_source(r->kind) >= 0)
            continue;
        o.img[r->kind - OCT_KIND_ANGIO_FIRST] = k->f[i];
        o.stride_n = (size_t)r->st_a, o.stride_d = (size_t)r->st_d, st_g = r->st_l;
    }
    float *base[OCT_ANGIO_M_COUNT];
    memcpy(base, o.img, sizeof base);
    for (uint32_t g = 0; g < G; g++) {
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            o.img[m] = base[m] ? base[m] + (size_t)g * (size_t)st_g : NULL;
        oct_err err = oct_angio_group(s->ang, c->angA + g * per * s->K,
                                      c->angX ? c->angX + g * per * s->M : NULL, &o, e);
        if (err)
            return oct_error_prefix(e, err, "group %u", g);
    }
    /* en-face angiograms: the slab of each metric image, all groups at once */
    for (uint32_t i = 0; i < k->n; i++) {
        const oct_layout *r = k->r[i];
        const int src = oct_kind_angio_source(r->kind);
        if (src < 0)
            continue;
        const float *img = base[src - OCT_KIND_ANGIO_FIRST];
        const oct_layout *sr = oct_plan_layout(c->pl, OCT_METHOD_CFD, src);
        if (!img || !sr)
            return oct_error_set(e, OCT_ESTATE, "cpu: %s/%s without its metric image",
                                 oct_kind_name(r->kind), oct_kind_name(src));
        oct_angio_slab(img, (size_t)sr->st_l, (size_t)sr->st_a, (size_t)sr->st_d, G, s->N, r->d0,
                       r->d1, r->reduce == OCT_REDUCE_MAX, k->f[i], s->threads);
    }
    return OCT_OK;
}

static oct_err cpu_process(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    cpu_state *s = eng->be;
    const oct_plan *pl = eng->plan;
    const oct_params *p = &pl->params;
    oct_err err = oct_cpu_ensure(eng, pl, s, e);
    if (err)
        return err;
    double t0 = oct_now_ms();
    frame_ctx c;
    memset(&c, 0, sizeof c);
    c.eng = eng, c.pl = pl, c.s = s, c.frame = frame;
    c.cfd = (p->methods & OCT_METHOD_BIT(OCT_METHOD_CFD)) != 0;
    c.msi = (p->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) != 0;
    c.cms = (p->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) != 0;
    c.klin = c.cfd && pl->klin_T > 0;
    c.disp = c.cfd ? pl->disp : NULL;
    c.F = p->freq_cutoff, c.W1 = p->lag_lo, c.W2 = p->lag_hi;
    c.h = (uint32_t)p->xsec_h, c.v = (uint32_t)p->xsec_v;
    c.bg = pl->bg.mode == OCT_BG_REFERENCE ? eng->reference : NULL;

    /* images of the layout; the CPU backend always computes into f32 */
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        sink *k = &c.k[m];
        const oct_plan_method *pm = &pl->method[m];
        k->D = pm->D;
        for (uint32_t i = 0; i < pm->nlayout; i++) {
            const oct_layout *r = &pm->layout[i];
            oct_image *img = &out->img[m][r->kind];
            if ((err = oct_image_prepare(eng, m, r->kind, img, e)))
                return err;
            if (oct_image_reserve(img, img->count, true, img->n_indices))
                return oct_error_set(e, OCT_ENOMEM, "cpu: %s/%s: out of memory",
                                     oct_kind_name(r->kind), oct_method_name(m));
            k->r[k->n] = r;
            k->f[k->n++] = img->f32;
            if (r->depths == OCT_DEPTHS_ENFACE) {
                k->Q = pl->enface_n[m];
                k->idx = pl->enface_idx[m];
            }
        }
    }
    if ((err = angio_prepare(eng, s, &c, e)))
        return err;
    double t1 = oct_now_ms();
    double prep_ms = t1 - t0;

    const bool mean = pl->bg.needs_mean;
    if (mean || eng->setup.geom.sample_type == OCT_SAMPLE_F32)
        if ((err = prepass(&c, mean, e)))
            return err;
    if (pl->bg.mode == OCT_BG_FPN)
        fpn_background(&c);
    double t2 = oct_now_ms();

    /* blocks: at least one per thread for small lists */
    const uint32_t T = (uint32_t)s->threads;
    uint32_t rb_full = (uint32_t)((s->n_full + T - 1) / T), rb_enf = (uint32_t)((s->n_enf + T - 1) / T);
    rb_full = rb_full > s->rows_max ? s->rows_max : rb_full ? rb_full : 1;
    rb_enf = rb_enf > s->rows_max ? s->rows_max : rb_enf ? rb_enf : 1;
    const size_t nb_full = (s->n_full + rb_full - 1) / rb_full;
    const size_t nb_enf = (s->n_enf + rb_enf - 1) / rb_enf;
    for (int t = 0; t < s->threads; t++)
        memset(s->tb[t].t, 0, sizeof s->tb[t].t);
#pragma omp parallel num_threads(s->threads)
    {
        thr_buf *b = &s->tb[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (size_t task = 0; task < nb_full + nb_enf; task++) {
            if (task < nb_full) {
                size_t i0 = task * rb_full;
                size_t n = s->n_full - i0 < rb_full ? s->n_full - i0 : rb_full;
                do_block(&c, b, s->full + i0, (uint32_t)n, true);
            } else {
                size_t i0 = (task - nb_full) * rb_enf;
                size_t n = s->n_enf - i0 < rb_enf ? s->n_enf - i0 : rb_enf;
                do_block(&c, b, s->enf + i0, (uint32_t)n, false);
            }
        }
    }
    double t3 = oct_now_ms();
    if (c.angA && (err = angio_stage(eng, s, &c, e)))
        return err;
    const double t_angio = oct_now_ms() - t3;
    t3 += t_angio;

    /* gray levels, in parallel over pieces of every present image */
    enum { PIECE = 1 << 16 };
    oct_image *imgs[OCT_METHOD_COUNT * OCT_KIND_COUNT];
    int cls[OCT_METHOD_COUNT * OCT_KIND_COUNT];
    size_t first[OCT_METHOD_COUNT * OCT_KIND_COUNT + 1];
    int nimg = 0;
    first[0] = 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int kind = 0; kind < OCT_KIND_COUNT; kind++)
            if (out->img[m][kind].present) {
                imgs[nimg] = &out->img[m][kind];
                cls[nimg] = oct_kind_class(kind);
                first[nimg + 1] = first[nimg] + (imgs[nimg]->count + PIECE - 1) / PIECE;
                nimg++;
            }
#pragma omp parallel for num_threads(s->threads) schedule(dynamic, 1)
    for (size_t piece = 0; piece < first[nimg]; piece++) {
        int i = 0;
        while (piece >= first[i + 1])
            i++;
        oct_image *img = imgs[i];
        size_t off = (piece - first[i]) * PIECE;
        size_t n = img->count - off < PIECE ? img->count - off : PIECE;
        oct_gray_map(img->f32 + off, img->u8 + off, n, p->scale, p->gsc[cls[i]],
                     p->contrast[cls[i]], p->brightness[cls[i]]);
    }
    double t4 = oct_now_ms();

    /* Stage times: the block stages run interleaved on all threads; each is
     * reported as its thread-average share of the parallel section. */
    double tc = 0, tcfd = 0, tmsi = 0;
    for (int t = 0; t < s->threads; t++)
        tc += s->tb[t].t[0], tcfd += s->tb[t].t[1], tmsi += s->tb[t].t[2];
    double sum = tc + tcfd + tmsi, par = t3 - t2;
    double f = sum > 0 ? par / sum : 0;
    eng->times.convert_ms = (t2 - t1) + tc * f;
    eng->times.cfd_ms = tcfd * f;
    eng->times.msi_ms = tmsi * f;
    eng->times.products_ms = prep_ms + (t4 - t3) + t_angio; /* angiography counted here */
    eng->times.h2d_ms = eng->times.d2h_ms = 0;
    return OCT_OK;
}

const oct_backend_ops oct_cpu_backend = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .prepare = cpu_prepare,
    .msi_rates = cpu_msi_rates,
    .host_timing = true,
    .f32_always = true,
    .process = cpu_process,
};
