/* bench_angio.c - issue 18 workloads: repeated B-scans and angiography
 * (kernels/angio.h) on octsim's flow phantom (tools/octsim/flow.h).
 *
 *   angio-bscan    one group of R = 4 x 500 A-scans x 1024 samples from the
 *                  pre-processed spectra: CFD + struct + decor + ssada (K = 4)
 *                  (+ median, sv: "all"), CPU; CUDA device time when asked
 *   angio-align    the same group with axial / axial+lateral alignment (CPU;
 *                  CUDA: device time of one group and of 16 at once)
 *   angio-volume   256 x 304 positions, R = 4, 1024 samples (311 k spectra):
 *                  CFD + struct + decor + ssada on CUDA (device time); on the
 *                  CPU only with --only angio-volume (tens of seconds)
 *   angio-engine   the same group as a raw u16 frame (L = R = 4) through the
 *                  engine (--backend): conversion, frame-mean background,
 *                  Hann window, CFD and the angiography stage in one call
 *                  (CUDA: wall time with copies, and device time)
 *   angio-slab     a volume frame of G positions x R = 4 repeats through the
 *                  engine with the en-face angiograms slab_max/decor and
 *                  slab_max/ssada over the vessel (and slab_max/cfd):
 *                  256 x 304 positions on CUDA or with --only, else 16 x 64
 *   angio-physics  ssada/decor/sv scores against the phantom's truth
 *                  (R = 4): vessel / static tissue, en-face slab_max CNR
 * The input is hann . (x - frame mean) of the phantom, as the engine's
 * pre-processing with background frame_mean and a Hann window.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../octsim/flow.h"
#include "angio.h"
#include "bench.h"
#include "oct_ipc.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* CPU time of the process (all threads): less sensitive than wall time to
 * other jobs on a shared machine. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Phantom frame of G positions, pre-processed into floats (NULL on failure). */
static float *phantom(uint32_t M, uint32_t N, uint32_t G, uint32_t R, uint8_t **labels,
                      sim_flow *f)
{
    sim_flow_default(f, M, N, G, R);
    const size_t S = (size_t)G * R * N;
    uint16_t *raw = malloc(sizeof(uint16_t) * S * M);
    float *x = malloc(sizeof(float) * S * M);
    double *mean = calloc(M, sizeof(double));
    if (labels)
        *labels = malloc((size_t)G * N * (M / 2 + 1));
    oct_error e;
    if (!raw || !x || !mean || (labels && !*labels) || sim_flow_frame(f, raw, labels ? *labels : NULL, &e)) {
        fprintf(stderr, "octbench angio: cannot make the phantom (%zu spectra)\n", S);
        free(raw);
        free(x);
        free(mean);
        return NULL;
    }
    for (size_t j = 0; j < S; j++)
        for (uint32_t n = 0; n < M; n++)
            mean[n] += raw[j * M + n];
#pragma omp parallel for
    for (long j = 0; j < (long)S; j++)
        for (uint32_t n = 0; n < M; n++) {
            double w = 0.5 - 0.5 * cos(2 * M_PI * n / (M - 1));
            x[j * M + n] = (float)(w * (raw[j * M + n] - mean[n] / S));
        }
    free(raw);
    free(mean);
    return x;
}

static const char *metrics_text(uint32_t w)
{
    return w == OCT_ANGIO_METRICS_ALL ? "all" : w == (OCT_ANGIO_STRUCT | OCT_ANGIO_DECOR | OCT_ANGIO_SSADA) ? "struct+decor+ssada" : "?";
}

/* CPU: one group, median of reps; prints stages. */
static int cpu_group(const octbench_opts *o, const char *name, const float *x, uint32_t M,
                     uint32_t N, uint32_t R, uint32_t metrics, uint32_t align, FILE *json)
{
    oct_angio_config c;
    oct_angio_config_default(&c, M, N, R);
    c.metrics = metrics;
    c.align = align;
    c.threads = o->threads;
    c.quick_plan = o->quick;
    oct_angio *a;
    oct_error e;
    double t0 = now_ms();
    if (oct_angio_create(&a, &c, &e)) {
        fprintf(stderr, "octbench %s: %s\n", name, e.msg);
        return -1;
    }
    double create_ms = now_ms() - t0;
    const uint32_t D = M / 2 + 1;
    oct_angio_out out = {{0}, 1, N}; /* B-scan layout [D][N] */
    float *buf = malloc(sizeof(float) * OCT_ANGIO_M_COUNT * N * D);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        out.img[m] = buf + (size_t)m * N * D;
    const int warm = o->warmup >= 0 ? o->warmup : o->quick ? 1 : 2;
    const int reps = o->reps ? o->reps : o->quick ? 3 : 10;
    double *tt = malloc(sizeof(double) * reps * 5);
    int rc = 0;
    double c0 = 0;
    for (int i = 0; i < warm + reps && !rc; i++) {
        if (i == warm)
            c0 = cpu_ms();
        if (oct_angio_group(a, NULL, x, &out, &e)) {
            fprintf(stderr, "octbench %s: %s\n", name, e.msg);
            rc = -1;
            break;
        }
        if (i >= warm) {
            oct_angio_times t;
            oct_angio_times_get(a, &t);
            int k = i - warm;
            tt[k] = t.total_ms;
            tt[reps + k] = t.cfd_ms;
            tt[2 * reps + k] = t.align_ms;
            tt[3 * reps + k] = t.metrics_ms;
            tt[4 * reps + k] = t.ssada_ms;
        }
    }
    if (!rc) {
        const double cpu_per = (cpu_ms() - c0) / reps;
        double med[5];
        for (int s = 0; s < 5; s++) {
            qsort(tt + s * reps, reps, sizeof(double), cmp_d);
            med[s] = tt[s * reps + reps / 2];
        }
        const char *al = align == 2 ? "axial+lateral" : align ? "axial" : "off";
        printf("%-14s cpu  %ux%ux%u (R x N x M) %-18s align %-13s total %8.2f ms (min %.2f, cpu "
               "%.2f ms)  (cfd %.2f, align %.2f, metrics %.2f, ssada %.2f; plan %.0f ms)\n",
               name, R, N, M, metrics_text(metrics), al, med[0], tt[0], cpu_per, med[1], med[2],
               med[3], med[4], create_ms);
        if (json)
            fprintf(json,
                    "{\"part\":\"angio\",\"workload\":\"%s\",\"backend\":\"cpu\",\"samples\":%u,"
                    "\"ascans\":%u,\"repeats\":%u,\"metrics\":\"%s\",\"align\":\"%s\",\"reps\":%d,"
                    "\"total_ms\":%.3f,\"min_ms\":%.3f,\"cpu_ms\":%.3f,\"cfd_ms\":%.3f,\"align_ms\":%.3f,"
                    "\"metrics_ms\":%.3f,\"ssada_ms\":%.3f}\n",
                    name, M, N, R, metrics_text(metrics), al, reps, med[0], tt[0], cpu_per, med[1],
                    med[2], med[3], med[4]);
    }
    free(tt);
    free(buf);
    oct_angio_destroy(a);
    return rc;
}

/* CUDA: G groups through the device, device time from x~ (CFD included);
 * align (0 off, 1 axial, 2 axial + lateral: angio_align_cuda.cu) adds the
 * estimate and the resampling. */
static int cuda_groups(const octbench_opts *o, const char *name, const float *x, uint32_t M,
                       uint32_t N, uint32_t R, uint32_t G, uint32_t metrics, uint32_t align,
                       FILE *json)
{
    oct_angio_config c;
    oct_angio_config_default(&c, M, N, R);
    c.metrics = metrics;
    c.align = align;
    c.cuda_path = (uint32_t)o->cuda.angio_path;
    c.cuda_chunk = (uint32_t)o->cuda.angio_chunk;
    const uint32_t D = M / 2 + 1;
    const size_t img = (size_t)N * D;
    oct_angio_out out = {{0}, D, 1};
    float *buf = malloc(sizeof(float) * 5 * img * G);
    if (!buf)
        return -1;
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
        out.img[m] = buf + (size_t)m * img * G;
    const int reps = o->reps ? o->reps : o->quick ? 3 : 5;
    double best = INFINITY, ms = 0;
    oct_error e;
    for (int i = 0; i < reps + 1; i++) {
        oct_err err = oct_angio_cuda_host(&c, NULL, x, G, &out, img, &ms, &e);
        if (err) {
            printf("%-14s cuda: %s\n", name, e.msg);
            free(buf);
            return err == OCT_EUNSUPPORTED ? 0 : -1;
        }
        if (i)
            best = ms < best ? ms : best;
    }
    const char *al = align == 2 ? "axial+lateral" : align ? "axial" : "off";
    const char *path = c.cuda_path == OCT_ANGIO_CUDA_FUSED ? "fused" : c.cuda_path ? "legacy" : "bands";
    if (align)
        printf("%-14s cuda %u groups of %ux%ux%u %-18s align %-13s device %8.3f ms (best of %d; CFD "
               "from x~ included) %.2f M A-scans/s\n",
               name, G, R, N, M, metrics_text(metrics), al, best, reps,
               (double)G * R * N / (best * 1e3));
    else
        printf("%-14s cuda %u groups of %ux%ux%u %-18s device %8.3f ms (best of %d; CFD from x~ "
               "included; %s) %.2f M A-scans/s\n",
               name, G, R, N, M, metrics_text(metrics), best, reps, path,
               (double)G * R * N / (best * 1e3));
    if (json)
        fprintf(json,
                "{\"part\":\"angio\",\"workload\":\"%s\",\"backend\":\"cuda\",\"samples\":%u,"
                "\"ascans\":%u,\"repeats\":%u,\"groups\":%u,\"metrics\":\"%s\",\"align\":\"%s\","
                "\"path\":\"%s\",\"device_ms\":%.4f}\n",
                name, M, N, R, G, metrics_text(metrics), al, path, best);
    free(buf);
    return 0;
}

/* One raw frame of G groups through the engine; slabs: also the en-face
 * angiograms slab_max/decor, slab_max/ssada (and slab_max/cfd) over the
 * phantom's vessel depths. */
static int engine_group(const octbench_opts *o, FILE *json, const char *name, uint32_t N,
                        uint32_t G, bool slabs)
{
    const uint32_t M = 1024, R = 4;
    sim_flow f;
    sim_flow_default(&f, M, N, G, R);
    oct_setup su;
    oct_setup_default(&su);
    su.geom = (oct_geometry){M, N, R * G, OCT_SAMPLE_U16, 0};
    su.backend = o->backend;
    su.threads = o->threads;
    su.cuda = o->cuda;
    su.repeats = R;
    su.flags = o->quick ? OCT_SETUP_QUICK_PLAN : 0;
    const size_t bytes = (size_t)M * N * R * G * 2;
    uint16_t *frame = malloc(bytes);
    oct_error e;
    if (!frame || sim_flow_frame(&f, frame, NULL, &e)) {
        free(frame);
        return -1;
    }
    oct_params p;
    oct_params_default(&p);
    p.background = OCT_BG_FRAME_MEAN;
    p.freq_cutoff = 4;
    p.products = slabs ? OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX) : 0; /* only the angiography */
    p.angio_metrics = OCT_ANGIO_STRUCT | OCT_ANGIO_DECOR | OCT_ANGIO_SSADA;
    if (slabs) {
        uint32_t d0, d1;
        sim_flow_slab(&f, &d0, &d1);
        p.slab_start = (int32_t)d0, p.slab_end = (int32_t)d1;
    }
    oct_engine *eng;
    if (oct_engine_create(&eng, &su, &p, &e)) {
        fprintf(stderr, "octbench %s: %s\n", name, e.msg);
        free(frame);
        return -1;
    }
    oct_products *out = oct_products_create();
    const int warm = o->warmup >= 0 ? o->warmup : o->quick ? 1 : 2;
    const int reps = o->reps ? o->reps : o->quick ? 3 : 10;
    double *t = malloc(sizeof(double) * reps * 5);
    int rc = 0;
    double c0 = 0;
    for (int i = 0; i < warm + reps; i++) {
        if (i == warm)
            c0 = cpu_ms();
        double t0 = now_ms();
        if (oct_engine_process(eng, frame, bytes, out, &e)) {
            fprintf(stderr, "octbench %s: %s\n", name, e.msg);
            rc = -1;
            break;
        }
        if (i >= warm) {
            oct_stage_times st;
            oct_engine_stage_times(eng, &st);
            t[i - warm] = now_ms() - t0;
            t[reps + i - warm] = st.convert_ms;
            t[2 * reps + i - warm] = st.cfd_ms;
            t[3 * reps + i - warm] = st.products_ms;
            t[4 * reps + i - warm] = st.device_ms;
        }
    }
    if (!rc) {
        const double cpu_per = (cpu_ms() - c0) / reps;
        for (int k = 0; k < 5; k++)
            qsort(t + k * reps, reps, sizeof(double), cmp_d);
        const char *bn = oct_engine_backend_name(eng);
        printf("%-14s %-4s %ux%ux%ux%u u16 frame, struct+decor+ssada%s: %.2f ms per frame "
               "(min %.2f, cpu %.2f ms; median of %d; convert %.2f, CFD %.2f, products %.2f, "
               "device %.3f)\n",
               name, bn, G, R, N, M, slabs ? "+slab_max" : "", t[reps / 2], t[0], cpu_per, reps,
               t[reps + reps / 2],
               t[2 * reps + reps / 2], t[3 * reps + reps / 2], t[4 * reps + reps / 2]);
        if (json)
            fprintf(json,
                    "{\"part\":\"angio\",\"workload\":\"%s\",\"backend\":\"%s\","
                    "\"samples\":%u,\"ascans\":%u,\"repeats\":%u,\"groups\":%u,\"slabs\":%s,"
                    "\"total_ms\":%.3f,\"min_ms\":%.3f,\"cpu_ms\":%.3f,\"device_ms\":%.4f}\n",
                    name, bn, M, N, R, G, slabs ? "true" : "false", t[reps / 2], t[0], cpu_per,
                    t[4 * reps + reps / 2]);
    }
    free(t);
    free(frame);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    return rc;
}

static int physics(const octbench_opts *o, FILE *json)
{
    const uint32_t M = 1024, N = o->quick ? 128 : 256, G = o->quick ? 24 : 64, R = 4;
    const uint32_t D = M / 2 + 1;
    sim_flow f;
    uint8_t *lab = NULL;
    float *x = phantom(M, N, G, R, &lab, &f);
    if (!x)
        return -1;
    oct_angio_config c;
    oct_angio_config_default(&c, M, N, R);
    c.threads = o->threads;
    oct_angio *a;
    oct_error e;
    if (oct_angio_create(&a, &c, &e)) {
        fprintf(stderr, "octbench angio-physics: %s\n", e.msg);
        return -1;
    }
    float *vol = malloc(sizeof(float) * 5 * (size_t)G * N * D);
    for (uint32_t g = 0; g < G; g++) {
        oct_angio_out out = {{0}, D, 1};
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            out.img[m] = vol + ((size_t)m * G + g) * N * D;
        oct_angio_group(a, NULL, x + (size_t)g * R * N * M, &out, &e);
    }
    uint32_t d0, d1;
    sim_flow_slab(&f, &d0, &d1);
    for (int m = OCT_ANGIO_M_SV; m < OCT_ANGIO_M_COUNT; m++) {
        sim_flow_score s;
        sim_flow_evaluate(lab, vol + (size_t)m * G * N * D, G, N, D, d0, d1, &s);
        printf("angio-physics  %-6s M=%u N=%u G=%u R=%u speed %.1f: vessel/tissue %.2f "
               "(%.4g / %.4g); en-face slab_max [%u, %u) CNR %.2f (pooled %.2f, slab_mean %.2f)\n",
               oct_angio_metric_name(m), M, N, G, R, f.speed, s.ratio, s.vessel_mean,
               s.tissue_mean, d0, d1, s.cnr, s.cnr_pooled, s.cnr_mean);
        if (json)
            fprintf(json,
                    "{\"part\":\"angio\",\"workload\":\"angio-physics\",\"metric\":\"%s\","
                    "\"ratio\":%.4f,\"cnr\":%.4f,\"cnr_pooled\":%.4f,\"cnr_mean\":%.4f}\n",
                    oct_angio_metric_name(m), s.ratio, s.cnr, s.cnr_pooled, s.cnr_mean);
    }
    free(vol);
    free(x);
    free(lab);
    oct_angio_destroy(a);
    return 0;
}

int octbench_angio(const octbench_opts *o)
{
    const char *only = o->only && strcmp(o->only, "angio") ? o->only : NULL;
    FILE *json = NULL;
    if (o->json && !(json = fopen(o->json, "a"))) {
        perror(o->json);
        return -1;
    }
    int rc = 0, ran = 0;
    const bool cuda = o->backend == OCT_BACKEND_CUDA;
    const bool cpu = o->backend != OCT_BACKEND_CUDA;
    const uint32_t M = 1024, N = 500, R = 4;
    const uint32_t sel = OCT_ANGIO_STRUCT | OCT_ANGIO_DECOR | OCT_ANGIO_SSADA;
    if (!only || !strcmp(only, "angio-bscan") || !strcmp(only, "angio-align")) {
        sim_flow f;
        float *x = phantom(M, N, 1, R, NULL, &f);
        if (!x)
            return -1;
        if (!only || !strcmp(only, "angio-bscan")) {
            ran++;
            if (cpu) {
                rc |= cpu_group(o, "angio-bscan", x, M, N, R, sel, 0, json);
                rc |= cpu_group(o, "angio-bscan", x, M, N, R, OCT_ANGIO_METRICS_ALL, 0, json);
            }
            if (cuda)
                rc |= cuda_groups(o, "angio-bscan", x, M, N, R, 1, sel, 0, json);
        }
        if (cpu && (!only || !strcmp(only, "angio-align"))) {
            ran++;
            rc |= cpu_group(o, "angio-align", x, M, N, R, sel, 1, json);
            rc |= cpu_group(o, "angio-align", x, M, N, R, sel, 2, json);
        }
        if (cuda && (!only || !strcmp(only, "angio-align"))) { /* one group and 16 at once */
            ran++;
            for (uint32_t al = 1; al <= 2; al++) {
                rc |= cuda_groups(o, "angio-align", x, M, N, R, 1, sel, al, json);
                float *x16 = malloc(sizeof(float) * 16 * R * N * M);
                if (!x16)
                    return -1;
                for (int g = 0; g < 16; g++)
                    memcpy(x16 + (size_t)g * R * N * M, x, sizeof(float) * R * N * M);
                rc |= cuda_groups(o, "angio-align", x16, M, N, R, 16, sel, al, json);
                free(x16);
            }
        }
        free(x);
    }
    if (!only || !strcmp(only, "angio-engine")) {
        ran++;
        rc |= engine_group(o, json, "angio-engine", N, 1, false);
    }
    /* the volume with its en-face angiograms through the engine: 256 x 304
     * positions on CUDA (or with --only), else (and --quick) 16 x 64 */
    if (!only || !strcmp(only, "angio-slab")) {
        ran++;
        const bool big = (cuda || only) && !o->quick;
        rc |= engine_group(o, json, "angio-slab", big ? 304 : 64, big ? 256 : 16, true);
    }
    if ((only && !strcmp(only, "angio-volume")) || (!only && cuda)) {
        ran++;
        const uint32_t G = o->quick ? 16 : 256, Nv = o->quick ? 64 : 304;
        sim_flow f;
        float *x = phantom(M, Nv, G, R, NULL, &f);
        if (!x)
            return -1;
        if (cuda)
            rc |= cuda_groups(o, "angio-volume", x, M, Nv, R, G, sel, 0, json);
        else { /* CPU: per group, whole volume */
            oct_angio_config c;
            oct_angio_config_default(&c, M, Nv, R);
            c.metrics = sel;
            c.threads = o->threads;
            oct_angio *a;
            oct_error e;
            if (oct_angio_create(&a, &c, &e) == OCT_OK) {
                const uint32_t D = M / 2 + 1;
                float *buf = malloc(sizeof(float) * 5 * Nv * D);
                oct_angio_out out = {{0}, D, 1};
                for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
                    out.img[m] = buf + (size_t)m * Nv * D;
                double t0 = now_ms();
                for (uint32_t g = 0; g < G; g++)
                    oct_angio_group(a, NULL, x + (size_t)g * R * Nv * M, &out, &e);
                double ms = now_ms() - t0;
                printf("angio-volume   cpu  %u groups of %ux%ux%u %-18s %.1f ms\n", G, R, Nv, M,
                       metrics_text(sel), ms);
                free(buf);
                oct_angio_destroy(a);
            }
        }
        free(x);
    }
    if (!only || !strcmp(only, "angio-physics")) {
        ran++;
        rc |= physics(o, json);
    }
    if (!ran) {
        fprintf(stderr, "octbench: no angio workload named '%s' (angio-bscan, angio-align, "
                        "angio-engine, angio-slab, angio-volume, angio-physics)\n",
                only);
        rc = -1;
    }
    if (json)
        fclose(json);
    return rc ? -1 : 0;
}
