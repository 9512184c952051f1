/* bench_engine.c - engine workloads (the thesis' B-scan and volume cases) on
 * the chosen backend: per-stage medians, total median, throughput, and for
 * the MSI workloads the in-process seed baselines with our speed-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine_internal.h"
#ifdef OCT_HAVE_CUDA
#include "cuda_engine.h"
#endif

typedef struct workload {
    const char *name;
    uint32_t M, N, L, R;
    uint32_t methods;
    int32_t lag_lo, lag_hi;
    uint32_t products;
    int32_t enface_start, enface_step, enface_count;
    const char *what;
    /* issue 7 (0 = off): CFD k-linearisation (polynomial positions), sinc
     * taps, dispersion on, CMS depths R; paper: A-lines/s reported by Li et
     * al. 2011 on a GTX 295 for the same workload (0 = none) */
    uint32_t klin;
    int32_t taps;
    bool disp;
    uint32_t cms;
    double paper;
    uint32_t bg;       /* background mode (0 = none) */
    int32_t bg_param;  /* rolling K / FPN segment G */
} workload;

/* Rows leave the trailing option fields (background, ...) at zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define P(k) OCT_PRODUCT_BIT(OCT_KIND_##k)
#define CFD OCT_METHOD_BIT(OCT_METHOD_CFD)
#define MSI OCT_METHOD_BIT(OCT_METHOD_MSI)
#define CMS OCT_METHOD_BIT(OCT_METHOD_CMS)
#define VOLPROD (P(ENFACE) | P(CONFOCAL) | P(XSEC_H) | P(XSEC_V))

static const workload workloads[] = {
    {"bscan-cfd", 1024, 500, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1, "B-scan 500x1024 u16, CFD", 0, 0, false, 0, 0},
    {"bscan-msi", 1024, 500, 1, 512, MSI, -10, 10, P(BSCAN), 0, 1, 1,
     "B-scan 500x1024 u16, MSI R=512, lags [-10,10]", 0, 0, false, 0, 0},
    {"volume-cfd", 1024, 200, 192, 0, CFD, 0, 0, VOLPROD, 20, 10, 40,
     "volume 200x192x1024 u16, CFD: en-face Q=40, confocal, xsec_h, xsec_v", 0, 0, false, 0, 0},
    {"volume-msi", 1024, 200, 192, 512, MSI, -10, 10, VOLPROD, 20, 10, 40,
     "volume 200x192x1024 u16, MSI R=512 lags [-10,10]: en-face Q=40, confocal, xsec_h, xsec_v", 0, 0, false, 0, 0},
    {"volume-cfd+msi", 1024, 200, 192, 512, CFD | MSI, -10, 10, VOLPROD, 20, 10, 40,
     "volume 200x192x1024 u16, CFD and MSI: en-face Q=40, confocal, xsec_h, xsec_v", 0, 0, false, 0, 0},
    {"msi-volume-full", 1024, 200, 192, 512, MSI, 0, 0, P(VOLUME), 0, 1, 1,
     "volume 200x192x1024 u16, MSI all 512 depths, lags [0,0], volume product", 0, 0, false, 0, 0},
    /* issue 7: Li, Shi, Zhang 2011 (time-domain interpolation, 2048-sample
     * A-scans): CFD with k-linearisation, beside their GTX 295 figures */
    {"li-sinc11", 2048, 1000, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 1000x2048, CFD + k-lin sinc T=11", OCT_KLIN_SINC, 11, false, 0, 250e3},
    {"li-sinc21", 2048, 1000, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 1000x2048, CFD + k-lin sinc T=21", OCT_KLIN_SINC, 21, false, 0, 200e3},
    {"li-sinc31", 2048, 1000, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 1000x2048, CFD + k-lin sinc T=31", OCT_KLIN_SINC, 31, false, 0, 160e3},
    {"li-cubic", 2048, 1000, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 1000x2048, CFD + k-lin cubic (Catmull-Rom)", OCT_KLIN_CUBIC, 21, false, 0, 0},
    {"li-linear", 2048, 1000, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 1000x2048, CFD + k-lin linear", OCT_KLIN_LINEAR, 21, false, 0, 0},
    {"li-none", 2048, 1000, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 1000x2048, CFD without k-lin (baseline)", OCT_KLIN_OFF, 21, false, 0, 0},
    {"bscan-cfd-disp", 1024, 500, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 500x1024, CFD + dispersion a2=40 a3=5 (complex path)", OCT_KLIN_OFF, 21, true, 0, 0},
    {"bscan-cfd-klin-disp", 1024, 500, 1, 0, CFD, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 500x1024, CFD + sinc T=21 + dispersion", OCT_KLIN_SINC, 21, true, 0, 0},
    {"bscan-cms", 1024, 500, 1, 0, CMS, 0, 0, P(BSCAN), 0, 1, 1,
     "B-scan 500x1024, CMS R=512 (K=4 calibration spectra)", OCT_KLIN_OFF, 21, false, 512, 0},
    {"volume-cms", 1024, 200, 192, 0, CMS, 0, 0, VOLPROD, 20, 10, 40,
     "volume 200x192x1024, CMS R=512: en-face Q=40, confocal, xsec_h, xsec_v", OCT_KLIN_OFF, 21,
     false, 512, 0},
    {"volume-cfd-rolling", 1024, 200, 192, 0, CFD, 0, 0, VOLPROD, 20, 10, 40,
     "volume 200x192x1024, CFD, rolling background K=16", OCT_KLIN_OFF, 21, false, 0, 0, OCT_BG_ROLLING, 16},
    {"volume-cfd-fpn", 1024, 200, 192, 0, CFD, 0, 0, VOLPROD, 20, 10, 40,
     "volume 200x192x1024, CFD, fixed-pattern background G=200", OCT_KLIN_OFF, 21, false, 0, 0, OCT_BG_FPN, 200},
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seed time for a workload: en-face depths for every spectrum plus all
 * depths for the cross-section spectra (or all depths for all spectra). */
static double seed_time(const octbench_opts *o, const workload *w, bool gpu)
{
    double (*fn)(const octbench_opts *, int, int, int, int, int, int, const int *, int) =
        gpu ? octbench_seed_gpu_msi : octbench_seed_cpu_msi;
    if (w->L == 1 || (w->products & P(VOLUME)))
        return fn(o, (int)w->M, (int)w->N, (int)w->L, (int)w->R, w->lag_lo, w->lag_hi, NULL,
                  (int)w->R);
    int depths[64], nd = 0;
    for (int q = 0; q < w->enface_count && nd < 64; q++) {
        int d = w->enface_start + w->enface_step * q;
        if (d < (int)w->R)
            depths[nd++] = d;
    }
    double a = fn(o, (int)w->M, (int)w->N, (int)w->L, (int)w->R, w->lag_lo, w->lag_hi, depths, nd);
    double b = fn(o, (int)w->M, (int)(w->N + w->L), 1, (int)w->R, w->lag_lo, w->lag_hi, NULL,
                  (int)w->R);
    return a < 0 || b < 0 ? -1 : a + b;
}

static int run_workload(const octbench_opts *o, workload w, FILE *json)
{
    if (o->quick) { /* smoke-test sizes */
        if (w.L > 1)
            w.N = 50, w.L = 48;
        else
            w.N = 100;
    }
    const size_t nspec = (size_t)w.N * w.L, nsamp = nspec * w.M;
    uint16_t *frame = malloc(sizeof(uint16_t) * nsamp);
    float *cms_cal = NULL;
    float *masks = w.R ? malloc(sizeof(float) * (size_t)w.R * w.M) : NULL;
    double *t[8];
    int reps = o->reps > 0 ? o->reps : (o->quick ? 3 : 10);
    int warm = o->warmup >= 0 ? o->warmup : (o->quick ? 1 : 2);
    for (int i = 0; i < 8; i++)
        t[i] = calloc((size_t)reps, sizeof(double));
    oct_engine *eng = NULL;
    oct_products *out = oct_products_create();
    int rc = -1;
    double conv_bytes = 0, d2d = 0;
    oct_error e = {{0}};
    if (!frame || (w.R && !masks) || !out || !t[7]) {
        fprintf(stderr, "octbench: %s: out of memory\n", w.name);
        goto done;
    }
    /* random 12-bit spectra with a few fringes, random masks: never zeros */
    unsigned seed = 42;
    for (size_t i = 0; i < nsamp; i++)
        frame[i] = (uint16_t)(2048 + (rand_r(&seed) % 2048) - 1024);
    for (size_t i = 0; i < (size_t)w.R * w.M; i++)
        masks[i] = (float)(rand_r(&seed) % 2001 - 1000) * 1e-3f;

    oct_setup su;
    oct_setup_default(&su);
    su.geom.samples = w.M, su.geom.ascans = w.N, su.geom.lines = w.L;
    su.geom.sample_type = OCT_SAMPLE_U16;
    su.masks = masks, su.mask_count = w.R;
    su.backend = o->backend, su.threads = o->threads, su.precision = o->precision;
    su.cuda = o->cuda;
    oct_params p;
    oct_params_default(&p);
    p.methods = w.methods, p.lag_lo = w.lag_lo, p.lag_hi = w.lag_hi, p.products = w.products;
    p.enface_start = w.enface_start, p.enface_step = w.enface_step, p.enface_count = w.enface_count;
    p.xsec_h = (int32_t)(w.L / 2), p.xsec_v = (int32_t)(w.N / 2);
    p.freq_cutoff = 8;
    if (w.bg)
        p.background = w.bg, p.background_param = w.bg_param;
    /* a mild k non-linearity: p(t) = M (0.96 t + 0.08 t^2 - 0.04 t^3), increasing, p(1) = M */
    p.klin = w.klin, p.klin_taps = w.taps, p.klin_source = OCT_KLIN_POLY;
    p.klin_coef[0] = 0, p.klin_coef[1] = 0.96 * w.M, p.klin_coef[2] = 0.08 * w.M;
    p.klin_coef[3] = -0.04 * w.M;
    if (w.disp)
        p.disp_a2 = 40.0f, p.disp_a3 = 5.0f, p.disp_k0 = 0.5f;
    /* CMS: K = 4 mirror spectra at known depths with the same k non-linearity */
    double cms_depths[4] = {w.M / 16.0, w.M / 8.0, w.M / 4.0, 3.0 * w.M / 8.0};
    if (w.cms) {
        cms_cal = malloc(sizeof(float) * 4 * w.M);
        if (!cms_cal) {
            fprintf(stderr, "octbench: %s: out of memory\n", w.name);
            goto done;
        }
        for (int i = 0; i < 4; i++)
            for (uint32_t n = 0; n < w.M; n++) {
                double tt = (double)n / w.M, u = tt + 0.04 * tt * tt;
                cms_cal[(size_t)i * w.M + n] =
                    (float)(1000.0 * cos(2 * M_PI * cms_depths[i] * u + 6.0 * (u - 0.5) * (u - 0.5)));
            }
        su.cms_cal = cms_cal, su.cms_cal_count = 4, su.cms_depths = cms_depths;
        su.cms_start = 0, su.cms_step = 1, su.cms_count = w.cms;
    }
    double tc0 = oct_now_ms();
    if (oct_engine_create(&eng, &su, &p, &e)) {
        fprintf(stderr, "octbench: %s: %s\n", w.name, e.msg);
        goto done;
    }
    double create_ms = oct_now_ms() - tc0;
    static bool said_device; /* once per run: the device the rows were measured on */
    if (!said_device) {
        printf("# %s: %s\n", oct_engine_backend_name(eng), oct_engine_device_name(eng));
        said_device = true;
    }
    for (int i = 0; i < warm + reps; i++) {
        if (oct_engine_process(eng, frame, nsamp * sizeof(uint16_t), out, &e)) {
            fprintf(stderr, "octbench: %s: %s\n", w.name, e.msg);
            goto done;
        }
        if (i < warm)
            continue;
        oct_stage_times st;
        oct_engine_stage_times(eng, &st);
        int r = i - warm;
        t[0][r] = st.h2d_ms, t[1][r] = st.convert_ms, t[2][r] = st.cfd_ms, t[3][r] = st.msi_ms;
        t[4][r] = st.products_ms, t[5][r] = st.d2h_ms, t[6][r] = st.total_ms;
        t[7][r] = st.device_ms;
        conv_bytes = st.convert_bytes;
    }
    double med[8];
    for (int i = 0; i < 8; i++)
        med[i] = median(t[i], reps);
    double ascans_s = (double)nspec / (med[6] * 1e-3);
    double mbs = (double)nsamp * 2 / 1e6 / (med[6] * 1e-3);
    const char *path = (w.methods & MSI) ? (oct_engine_msi_path(eng) == OCT_MSI_GEMM ? "gemm" : "fft") : "-";
#ifdef OCT_HAVE_CUDA
    if ((w.methods & MSI) && !strcmp(oct_engine_backend_name(eng), "cuda") &&
        oct_engine_msi_path(eng) == OCT_MSI_GEMM)
        path = oct_cuda_gemm_name(eng); /* 3xtf32, sgemm or tf32 */
#endif
    printf("%-16s %-4s %-6s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %8.2f %10.0f %8.0f", w.name,
           oct_engine_backend_name(eng), path, med[0], med[1], med[2], med[3], med[4], med[5],
           med[6], ascans_s, mbs);
    double seed_cpu = -1, seed_gpu = -1;
    if ((w.methods & MSI) && o->seed) {
        fflush(stdout);
        seed_cpu = seed_time(o, &w, false);
        if (!strcmp(oct_engine_backend_name(eng), "cuda"))
            seed_gpu = seed_time(o, &w, true);
    }
    if (seed_cpu > 0)
        printf("  seed-cpu %9.1f ms (x%.1f)", seed_cpu, seed_cpu / med[6]);
    if (seed_gpu > 0)
        printf("  seed-gpu %8.2f ms (x%.1f total, x%.1f device %.3f ms)", seed_gpu,
               seed_gpu / med[6], seed_gpu / med[7], med[7]);
    else if (!strcmp(oct_engine_backend_name(eng), "cuda"))
        printf("  device %.3f ms", med[7]);
#ifdef OCT_HAVE_CUDA
    /* memory-bound stage against the device's own copy rate (issue 5) */
    if (!strcmp(oct_engine_backend_name(eng), "cuda") && conv_bytes > 0 && med[1] > 0 &&
        oct_cuda_d2d_rate(eng, 20, &d2d, &e) == OCT_OK && d2d > 0) {
        double cgb = conv_bytes / (med[1] * 1e-3) / 1e9;
        printf("  conv %.0f GB/s = %.0f%% of D2D copy %.0f GB/s", cgb, 100.0 * cgb / d2d, d2d);
    }
#endif
    if (w.paper > 0)
        printf("  Li et al. GTX 295: %.0fk A-lines/s (ours x%.2f)", w.paper / 1e3,
               ascans_s / w.paper);
    printf("\n");
#ifdef OCT_HAVE_CUDA
    { /* issue 19.2: the MSI GEMM algorithm of each shape, against cuBLAS's default */
        char picks[1024];
        if (oct_cuda_gemm_picks(eng, picks, sizeof picks) > 0)
            printf("  %s gemm picks: %s\n", w.name, picks);
    }
#endif
    if (json) {
        fprintf(json,
                "{\"part\":\"engine\",\"workload\":\"%s\",\"backend\":\"%s\",\"device\":\"%s\","
                "\"msi_path\":\"%s\",\"samples\":%u,\"ascans\":%u,\"lines\":%u,\"masks\":%u,"
                "\"reps\":%d,\"create_ms\":%.3f,\"h2d_ms\":%.3f,\"convert_ms\":%.3f,\"cfd_ms\":%.3f,"
                "\"msi_ms\":%.3f,\"products_ms\":%.3f,\"d2h_ms\":%.3f,\"total_ms\":%.3f,"
                "\"device_ms\":%.3f,\"ascans_per_s\":%.0f,\"mb_per_s\":%.1f,"
                "\"seed_cpu_ms\":%.3f,\"seed_gpu_ms\":%.3f,\"convert_bytes\":%.0f,"
                "\"d2d_gb_per_s\":%.1f}\n",
                w.name, oct_engine_backend_name(eng), oct_engine_device_name(eng), path, w.M, w.N,
                w.L, w.R, reps, create_ms, med[0], med[1], med[2], med[3], med[4], med[5], med[6],
                med[7], ascans_s, mbs, seed_cpu, seed_gpu, conv_bytes, d2d);
    }
    rc = 0;
done:
    oct_engine_destroy(eng);
    oct_products_destroy(out);
    free(frame);
    free(masks);
    free(cms_cal);
    for (int i = 0; i < 8; i++)
        free(t[i]);
    return rc;
}

#ifdef OCT_HAVE_CUDA
/* GPU stream: frames submitted back-to-back (depth OCT_ENGINE_DEPTH_MAX) from
 * a registered host buffer (or, for comparison, pageable memory), results
 * into the engine's pinned products; frames/s and GB/s of raw input against
 * the pinned H2D rate measured on the same buffer. */
static int stream_workload(const octbench_opts *o, const workload *w0, bool registered, FILE *json)
{
    workload w = *w0;
    if (o->quick) {
        if (w.L > 1)
            w.N = 50, w.L = 48;
        else
            w.N = 100;
    }
    const int K = 4; /* distinct frames, cycled */
    const size_t nsamp = (size_t)w.N * w.L * w.M, fbytes = nsamp * sizeof(uint16_t);
    const size_t stride = (fbytes + 4095) & ~(size_t)4095;
    int nframes = w.L > 1 ? (o->quick ? 10 : 200) : (o->quick ? 50 : 4000);
    uint8_t *buf = NULL;
    float *masks = w.R ? malloc(sizeof(float) * (size_t)w.R * w.M) : NULL;
    oct_products *pool[OCT_ENGINE_DEPTH_MAX] = {0}, *freel[OCT_ENGINE_DEPTH_MAX];
    oct_engine *eng = NULL;
    oct_error e = {{0}};
    int rc = -1, nfree = 0;
    bool reg = false;
    if (posix_memalign((void **)&buf, 4096, stride * K) || (w.R && !masks)) {
        fprintf(stderr, "octbench: stream %s: out of memory\n", w.name);
        buf = NULL;
        goto done;
    }
    unsigned seed = 7;
    for (int f = 0; f < K; f++) {
        uint16_t *fr = (uint16_t *)(buf + f * stride);
        for (size_t i = 0; i < nsamp; i++)
            fr[i] = (uint16_t)(2048 + (rand_r(&seed) % 2048) - 1024);
    }
    for (size_t i = 0; i < (size_t)w.R * w.M; i++)
        masks[i] = (float)(rand_r(&seed) % 2001 - 1000) * 1e-3f;
    oct_setup su;
    oct_setup_default(&su);
    su.geom.samples = w.M, su.geom.ascans = w.N, su.geom.lines = w.L;
    su.geom.sample_type = OCT_SAMPLE_U16;
    su.masks = masks, su.mask_count = w.R;
    su.backend = OCT_BACKEND_CUDA, su.precision = o->precision;
    su.cuda = o->cuda;
    oct_params p;
    oct_params_default(&p);
    p.methods = w.methods, p.lag_lo = w.lag_lo, p.lag_hi = w.lag_hi, p.products = w.products;
    p.enface_start = w.enface_start, p.enface_step = w.enface_step, p.enface_count = w.enface_count;
    p.xsec_h = (int32_t)(w.L / 2), p.xsec_v = (int32_t)(w.N / 2);
    p.freq_cutoff = 8;
    if (w.bg)
        p.background = w.bg, p.background_param = w.bg_param;
    p.klin = w.klin, p.klin_taps = w.taps, p.klin_source = OCT_KLIN_POLY; /* as run_workload */
    p.klin_coef[0] = 0, p.klin_coef[1] = 0.96 * w.M, p.klin_coef[2] = 0.08 * w.M;
    p.klin_coef[3] = -0.04 * w.M;
    if (w.disp)
        p.disp_a2 = 40.0f, p.disp_a3 = 5.0f, p.disp_k0 = 0.5f;
    if (oct_engine_create(&eng, &su, &p, &e)) {
        fprintf(stderr, "octbench: stream %s: %s\n", w.name, e.msg);
        goto done;
    }
    const int depth = oct_engine_depth(eng);
    for (int i = 0; i < depth; i++) {
        if (!(pool[i] = oct_engine_products_create(eng, &e))) {
            fprintf(stderr, "octbench: stream %s: %s\n", w.name, e.msg);
            goto done;
        }
        freel[nfree++] = pool[i];
    }
    double h2d = 0;
    if (registered) {
        oct_err err = oct_engine_register_host(eng, buf, stride * K, &e);
        if (err && err != OCT_EUNSUPPORTED) {
            fprintf(stderr, "octbench: stream %s: %s\n", w.name, e.msg);
            goto done;
        }
        reg = err == OCT_OK;
        if (!reg)
            printf("# stream %s: %s\n", w.name, e.msg);
        if (reg && oct_cuda_h2d_rate(eng, buf, fbytes, 10, &h2d, &e)) {
            fprintf(stderr, "octbench: stream %s: %s\n", w.name, e.msg);
            goto done;
        }
    }
    int warm = o->quick ? 2 : 2 * depth + 2;
    double t0 = 0, submit_ms = 0; /* host time inside submit: the launch cost a CUDA graph would cut */
    int submitted = 0, completed = 0;
    while (completed < warm + nframes) {
        while (submitted < warm + nframes && nfree > 0) {
            oct_products *out = freel[--nfree];
            double ts = oct_now_ms();
            if (oct_engine_submit(eng, buf + (submitted % K) * stride, fbytes, out, &e)) {
                fprintf(stderr, "octbench: stream %s: submit: %s\n", w.name, e.msg);
                goto done;
            }
            if (submitted >= warm)
                submit_ms += oct_now_ms() - ts;
            submitted++;
        }
        oct_products *d = NULL;
        if (oct_engine_complete(eng, &d, -1, &e)) {
            fprintf(stderr, "octbench: stream %s: complete: %s\n", w.name, e.msg);
            goto done;
        }
        freel[nfree++] = d;
        if (++completed == warm)
            t0 = oct_now_ms();
    }
    double s_el = (oct_now_ms() - t0) * 1e-3;
    double fps = nframes / s_el, gbs = fps * (double)fbytes / 1e9;
    printf("stream %-15s %-10s depth %d: %9.1f frames/s %12.0f A-scans/s %6.2f GB/s input",
           w.name, reg ? "registered" : "pageable", depth, fps, fps * w.N * w.L, gbs);
    if (h2d > 0)
        printf("  (pinned H2D %.1f GB/s: %.0f%%)", h2d, 100.0 * gbs / h2d);
    printf("  host submit %.1f us/frame", 1e3 * submit_ms / nframes);
    uint64_t g_launch = 0, g_capt = 0, g_fail = 0;
    oct_cuda_graph_counts(eng, &g_launch, &g_capt, &g_fail);
    printf("  graphs %llu launched / %llu captured / %llu failed", (unsigned long long)g_launch,
           (unsigned long long)g_capt, (unsigned long long)g_fail);
    printf("\n");
    {
        char picks[1024];
        if (oct_cuda_gemm_picks(eng, picks, sizeof picks) > 0)
            printf("  %s gemm picks: %s\n", w.name, picks);
    }
    /* Latency, one frame in flight (what the intra-frame pipeline shortens):
     * submit -> complete, median and p99 of 50 (10 with --quick) frames;
     * parts = the input parts of the last frame (1: the pipeline was off). */
    double lat_p50 = 0, lat_p99 = 0, lat_sub = 0, lat_h2d = 0, lat_tail = 0, lat_d2h = 0;
    int lat_parts = 0, lat_defer = 0;
    if (reg) {
        enum { NLAT = 50 };
        /* and per frame where it goes (issue 19): host time in submit, the
         * input copy, the device work after it, the download */
        double lat[NLAT], st_sub[NLAT], st_h2d[NLAT], st_tail[NLAT], st_d2h[NLAT];
        int nl = o->quick ? 10 : NLAT;
        for (int i = 0; i < nl; i++) {
            oct_products *out = freel[--nfree], *d = NULL;
            double ts = oct_now_ms();
            if (oct_engine_submit(eng, buf + (i % K) * stride, fbytes, out, &e)) {
                fprintf(stderr, "octbench: stream %s: latency: %s\n", w.name, e.msg);
                freel[nfree++] = out;
                goto done;
            }
            st_sub[i] = oct_now_ms() - ts;
            if (oct_engine_complete(eng, &d, -1, &e)) {
                fprintf(stderr, "octbench: stream %s: latency: %s\n", w.name, e.msg);
                freel[nfree++] = d ? d : out;
                goto done;
            }
            lat[i] = oct_now_ms() - ts;
            oct_stage_times t;
            oct_engine_stage_times(eng, &t);
            st_h2d[i] = t.h2d_ms, st_tail[i] = t.tail_ms, st_d2h[i] = t.d2h_ms;
            freel[nfree++] = d;
        }
        qsort(st_sub, (size_t)nl, sizeof *st_sub, cmp_double);
        qsort(st_h2d, (size_t)nl, sizeof *st_h2d, cmp_double);
        qsort(st_tail, (size_t)nl, sizeof *st_tail, cmp_double);
        qsort(st_d2h, (size_t)nl, sizeof *st_d2h, cmp_double);
        lat_parts = oct_cuda_last_parts(eng);
        lat_defer = oct_cuda_last_deferred(eng);
        qsort(lat, (size_t)nl, sizeof lat[0], cmp_double);
        lat_p50 = lat[nl / 2], lat_p99 = lat[(int)(0.99 * (nl - 1) + 0.5)];
        printf("stream %-15s %-10s depth 1: latency p50 %.3f ms p99 %.3f ms (%d input parts%s)\n", w.name,
               "registered", lat_p50, lat_p99, lat_parts,
               lat_defer == 2 ? ", deferred background, the MSI's too" : lat_defer ? ", deferred background" : "");
        lat_sub = st_sub[nl / 2], lat_h2d = st_h2d[nl / 2], lat_tail = st_tail[nl / 2], lat_d2h = st_d2h[nl / 2];
        printf("stream %-15s %-10s depth 1: medians: host submit %.3f ms, input copy %.3f ms, device work "
               "after the copy %.3f ms, download %.3f ms; dispersion %s, cuFFT chunk %lld spectra\n",
               w.name, "registered", lat_sub, lat_h2d, lat_tail, lat_d2h,
               oct_cuda_disp_fused(eng) ? "fused" : "cufft", oct_cuda_disp_batch(eng));
    }
    if (json)
        fprintf(json,
                "{\"part\":\"stream\",\"workload\":\"%s\",\"input\":\"%s\",\"device\":\"%s\","
                "\"depth\":%d,\"frames\":%d,\"frame_bytes\":%zu,\"frames_per_s\":%.2f,"
                "\"ascans_per_s\":%.0f,\"gb_per_s\":%.3f,\"h2d_pinned_gb_per_s\":%.3f,"
                "\"submit_us\":%.2f,\"latency_p50_ms\":%.4f,\"latency_p99_ms\":%.4f,\"parts\":%d,"
                "\"deferred\":%d,\"lat_submit_ms\":%.4f,\"lat_h2d_ms\":%.4f,\"lat_after_copy_ms\":%.4f,"
                "\"lat_d2h_ms\":%.4f,\"disp_chunk\":%lld,\"disp_fused\":%d}\n",
                w.name, reg ? "registered" : "pageable", oct_engine_device_name(eng), depth, nframes,
                fbytes, fps, fps * w.N * w.L, gbs, h2d, 1e3 * submit_ms / nframes, lat_p50, lat_p99,
                lat_parts, lat_defer, lat_sub, lat_h2d, lat_tail, lat_d2h, oct_cuda_disp_batch(eng),
                oct_cuda_disp_fused(eng));
    rc = 0;
done:
    while (eng && oct_engine_inflight(eng) > 0) {
        oct_products *d = NULL;
        if (oct_engine_complete(eng, &d, -1, NULL) == OCT_ESTATE)
            break;
    }
    if (reg)
        oct_engine_unregister_host(eng, buf);
    for (int i = 0; i < OCT_ENGINE_DEPTH_MAX; i++)
        oct_products_destroy(pool[i]);
    oct_engine_destroy(eng);
    free(buf);
    free(masks);
    return rc;
}

static const workload stream_workloads[] = {
    {"volume-cfd+msi", 1024, 200, 192, 512, CFD | MSI, -10, 10, VOLPROD, 20, 10, 40, ""},
    {"bscan-cfd+msi", 1024, 500, 1, 512, CFD | MSI, -10, 10, P(BSCAN), 0, 1, 1, ""},
    /* issue 19.3: the intra-frame pipeline with k-lin, dispersion and a
     * frame-mean background (--cuda-parts-ext; compare --cuda-parts 1) */
    {"volume-klin-disp", 1024, 200, 192, 512, CFD | MSI, -10, 10, VOLPROD, 20, 10, 40, "", OCT_KLIN_SINC, 21,
     true, 0, 0, OCT_BG_FRAME_MEAN, 0},
};

static int octbench_stream(const octbench_opts *o, FILE *json)
{
    printf("GPU stream (frames submitted back-to-back, depth %d, products into pinned pool; "
           "input registered host memory vs pageable)\n", OCT_ENGINE_DEPTH_MAX);
    int rc = 0;
    for (size_t i = 0; i < sizeof stream_workloads / sizeof stream_workloads[0]; i++) {
        /* --only NAME of a stream-only workload: that one */
        if (o->only && strcmp(o->only, "stream") && strcmp(o->only, "engine") &&
            strcmp(o->only, stream_workloads[i].name))
            continue;
        for (int r = 1; r >= 0; r--)
            if (stream_workload(o, &stream_workloads[i], r == 1, json))
                rc = -1;
    }
    return rc;
}
#endif

/* A name only the stream has (not an engine workload): --only runs its stream. */
static bool stream_only_name(const char *n)
{
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
        if (!strcmp(n, workloads[i].name))
            return false;
#ifdef OCT_HAVE_CUDA
    for (size_t i = 0; i < sizeof stream_workloads / sizeof stream_workloads[0]; i++)
        if (!strcmp(n, stream_workloads[i].name))
            return true;
#endif
    return false;
}

const char *const *octbench_only_names(void)
{
    /* groups and parts, then the workloads: what --only accepts */
    static const char *const fixed[] = {
        "engine", "ipc", "e2e", "stream", "li", "issue7", "volume", "bscan",
        /* bench_register.c, bench_angio.c */
        "register", "register-512", "register-live", "angio", "angio-bscan", "angio-align", "angio-engine",
        "angio-slab", "angio-volume", "angio-physics",
        /* bench_e2e.c (and a GPU stream workload) */
        "volume-klin-disp"};
    enum { NFIXED = sizeof fixed / sizeof *fixed };
    static const char *names[NFIXED + 64 + sizeof workloads / sizeof workloads[0]];
    if (!names[0]) { /* made once: the fixed names, then every workload's */
        size_t n = 0;
        for (; n < NFIXED; n++)
            names[n] = fixed[n];
        for (size_t i = 0; i < sizeof workloads / sizeof workloads[0] && n + 1 < sizeof names / sizeof *names; i++)
            names[n++] = workloads[i].name;
#ifdef OCT_HAVE_CUDA
        for (size_t i = 0; i < sizeof stream_workloads / sizeof stream_workloads[0] && n + 1 < sizeof names / sizeof *names; i++) {
            bool dup = false;
            for (size_t k = 0; k < n; k++)
                dup = dup || !strcmp(names[k], stream_workloads[i].name);
            if (!dup)
                names[n++] = stream_workloads[i].name;
        }
#endif
        names[n] = NULL;
    }
    return names;
}

int octbench_engine(const octbench_opts *o)
{
    FILE *json = NULL;
    if (o->json && !(json = fopen(o->json, "a"))) {
        perror(o->json);
        return -1;
    }
    int rc = 0, ran = 0;
    bool only_stream = o->only && (!strcmp(o->only, "stream") || stream_only_name(o->only));
#ifdef OCT_HAVE_CUDA
    char devname[128];
    bool cuda = o->backend == OCT_BACKEND_CUDA ||
                (o->backend == OCT_BACKEND_AUTO && oct_cuda_probe(0, devname, sizeof devname, NULL) == OCT_OK);
    if (only_stream) {
        int r = cuda ? octbench_stream(o, json) : (fprintf(stderr, "octbench: stream needs a CUDA device\n"), -1);
        if (json)
            fclose(json);
        return r;
    }
#else
    if (only_stream) {
        fprintf(stderr, "octbench: stream: built without CUDA\n");
        if (json)
            fclose(json);
        return -1;
    }
#endif
    printf("engine workloads (median of %d reps after %d warm-up%s; ms; seed = thesis "
           "Algorithm 5.6, 1 thread, same input size)\n",
           o->reps > 0 ? o->reps : (o->quick ? 3 : 10),
           o->warmup >= 0 ? o->warmup : (o->quick ? 1 : 2), o->quick ? ", --quick sizes" : "");
    printf("%-16s %-4s %-6s %7s %7s %7s %7s %7s %7s %8s %10s %8s\n", "workload", "be", "path",
           "h2d", "convert", "cfd", "msi", "product", "d2h", "total", "A-scans/s", "MB/s");
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        const workload *w = &workloads[i];
        /* groups: li (Li et al.'s workload), issue7 (k-lin, dispersion, CMS) */
        bool group = o->only && ((!strcmp(o->only, "li") && !strncmp(w->name, "li-", 3)) ||
                                 (!strcmp(o->only, "issue7") && (w->klin || w->disp || w->cms || w->bg ||
                                                                 !strncmp(w->name, "li-", 3))));
        if (o->only && !group && strcmp(o->only, w->name) && strcmp(o->only, "engine"))
            continue;
        ran++;
        if (run_workload(o, workloads[i], json))
            rc = -1;
    }
    if (!ran) {
        fprintf(stderr, "octbench: no workload named '%s'\n", o->only);
        rc = -1;
    }
#ifdef OCT_HAVE_CUDA
    const char *st = getenv("OCTBENCH_STREAM"); /* 0: engine workloads only */
    if (cuda && (!o->only || !strcmp(o->only, "engine")) && !(st && !strcmp(st, "0")) &&
        octbench_stream(o, json))
        rc = -1;
#endif
    if (json)
        fclose(json);
    if (o->seed)
        printf("seed times of volumes: timed on at most 512 spectra and scaled to the frame; "
               "en-face depths for all spectra + all depths for the cross-section spectra\n");
    return rc;
}
