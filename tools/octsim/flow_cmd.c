/* flow_cmd.c - `octsim flow`: writes the flow phantom (flow.h) as a frame
 * file for octproc / `octsim replay`, with its ground truth. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "angio.h"
#include "flow.h"
#include "oct_config.h"

int octsim_cmd_flow(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f,
        "usage: octsim flow --samples M --ascans N --positions G --repeats R\n"
        "                   --output FRAME.npy [--truth LABELS.npy] [--speed V]\n"
        "                   [--type u16|f32] [--noise RMS] [--shot F] [--seed S]\n"
        "                   [--motion BINS] [--angio DIR]\n"
        "Writes one frame of G*R lines (B-scan position g, repeat r = line g*R + r)\n"
        "x N A-scans x M samples, shape (G*R, N, M), of a static layered sample\n"
        "with a vessel (a tube along the slow axis, drifting in x) whose scatterers\n"
        "move by V beam widths between repeats (default 1.5; 0 = no flow).  The\n"
        "spectra are linear in k without dispersion (CFD shows depth bin b at b).\n"
        "--truth writes the labels [G][N][M/2+1] u8: 0 empty, 1 static tissue,\n"
        "2 vessel.  --motion: bulk axial motion, repeat r moved r*BINS CFD bins deeper\n"
        "(the truth is that of repeat 0; angio.align: axial undoes it).\n"
        "The vessel lies in the depths printed as `slab:`; use them as\n"
        "slab.start/slab.end for the en-face angiogram.  Feed the ring with\n"
        "`octsim replay FRAME.npy`; a profile needs geometry.repeats: R.\n"
        "--angio DIR: also processes the phantom with the CPU angiography kernels\n"
        "(pre-processing: frame-mean background, Hann window, freq_cutoff 4; all\n"
        "metrics, 4 bands) and writes into DIR, per metric m (struct, median, sv,\n"
        "decor, ssada): slab_max_m.png / slab_mean_m.png / .npy (en-face [G][N] over\n"
        "the vessel slab) and bscan_m.png ([D][N] of the middle position); and\n"
        "prints the scores against the truth (vessel / tissue mean, en-face CNR).\n"
        "Display: linear from 0 to the 99.5th percentile, but the B-scans of struct\n"
        "and median in dB (40 dB below their 99.9th percentile to it).\n");
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* 8-bit display of n floats: log (dB over 40 dB) or linear from 0. */
static void to_gray(const float *v, size_t n, bool log_scale, uint8_t *out)
{
    float *s = malloc(sizeof(float) * n);
    if (!s) {
        memset(out, 0, n);
        return;
    }
    memcpy(s, v, sizeof(float) * n);
    qsort(s, n, sizeof(float), cmp_f);
    double hi = s[(size_t)((n - 1) * (log_scale ? 0.999 : 0.995))];
    free(s);
    for (size_t i = 0; i < n; i++) {
        double g;
        if (log_scale) {
            double db = 20 * log10(fmax(v[i], 1e-12)), top = 20 * log10(fmax(hi, 1e-12));
            g = (db - (top - 40)) / 40 * 255;
        } else {
            g = hi > 0 ? v[i] / hi * 255 : 0;
        }
        out[i] = (uint8_t)(g < 0 ? 0 : g > 255 ? 255 : g + 0.5);
    }
}

static int write_angio(const char *dir, const sim_flow *f, const void *frame, const uint8_t *lab)
{
    const uint32_t M = f->samples, N = f->ascans, G = f->positions, R = f->repeats;
    const uint32_t D = M / 2 + 1;
    const size_t S = (size_t)G * R * N, vox = (size_t)G * N * D;
    if (R < 2) {
        fprintf(stderr, "octsim flow: --angio needs --repeats >= 2\n");
        return 2;
    }
    float *x = malloc(sizeof(float) * S * M), *vol = malloc(sizeof(float) * 5 * vox);
    double *mean = calloc(M, sizeof(double));
    float *en = malloc(sizeof(float) * 2 * (size_t)G * N);
    uint8_t *gray = malloc(vox > (size_t)D * N ? vox : (size_t)D * N);
    float *bs = malloc(sizeof(float) * (size_t)D * N);
    int rc = 1;
    oct_angio *a = NULL;
    oct_error e;
    if (!x || !vol || !mean || !en || !gray || !bs) {
        fprintf(stderr, "octsim flow: out of memory for --angio\n");
        goto out;
    }
    for (size_t j = 0; j < S; j++)
        for (uint32_t n = 0; n < M; n++)
            mean[n] += f->sample_type == OCT_SAMPLE_F32 ? ((const float *)frame)[j * M + n]
                                                         : ((const uint16_t *)frame)[j * M + n];
    for (size_t j = 0; j < S; j++)
        for (uint32_t n = 0; n < M; n++) {
            double v = f->sample_type == OCT_SAMPLE_F32 ? ((const float *)frame)[j * M + n]
                                                         : ((const uint16_t *)frame)[j * M + n];
            x[j * M + n] = (float)((0.5 - 0.5 * cos(2 * M_PI * n / (M - 1))) * (v - mean[n] / S));
        }
    oct_angio_config c;
    oct_angio_config_default(&c, M, N, R);
    c.freq_cutoff = 4;
    if (oct_angio_create(&a, &c, &e)) {
        fprintf(stderr, "octsim flow: %s\n", e.msg);
        goto out;
    }
    for (uint32_t g = 0; g < G; g++) {
        oct_angio_out o = {{0}, D, 1};
        for (int m = 0; m < OCT_ANGIO_M_COUNT; m++)
            o.img[m] = vol + m * vox + (size_t)g * N * D;
        if (oct_angio_group(a, NULL, x + (size_t)g * R * N * M, &o, &e)) {
            fprintf(stderr, "octsim flow: %s\n", e.msg);
            goto out;
        }
    }
    uint32_t d0, d1;
    sim_flow_slab(f, &d0, &d1);
    for (int m = 0; m < OCT_ANGIO_M_COUNT; m++) {
        const float *V = vol + m * vox;
        const bool lg = m <= OCT_ANGIO_M_MEDIAN;
        for (size_t p = 0; p < (size_t)G * N; p++) {
            float mx = -INFINITY;
            double sum = 0;
            for (uint32_t d = d0; d < d1; d++) {
                mx = fmaxf(mx, V[p * D + d]);
                sum += V[p * D + d];
            }
            en[p] = mx;
            en[(size_t)G * N + p] = (float)(sum / (d1 - d0));
        }
        const uint32_t gm = G / 2;
        for (uint32_t d = 0; d < D; d++)
            for (uint32_t n = 0; n < N; n++)
                bs[(size_t)d * N + n] = V[((size_t)gm * N + n) * D + d];
        char path[4200];
        const char *nm = oct_angio_metric_name(m);
        uint64_t shp[2] = {G, N};
        for (int k = 0; k < 2; k++) {
            const float *img = en + (size_t)k * G * N;
            to_gray(img, (size_t)G * N, false, gray);
            snprintf(path, sizeof path, "%s/slab_%s_%s.png", dir, k ? "mean" : "max", nm);
            if (oct_png_save_gray(path, gray, N, G, &e))
                goto fail;
            snprintf(path, sizeof path, "%s/slab_%s_%s.npy", dir, k ? "mean" : "max", nm);
            if (oct_npy_save(path, OCT_DTYPE_F32, 2, shp, img, &e))
                goto fail;
        }
        to_gray(bs, (size_t)D * N, lg, gray);
        snprintf(path, sizeof path, "%s/bscan_%s.png", dir, nm);
        if (oct_png_save_gray(path, gray, N, D, &e))
            goto fail;
        if (m >= OCT_ANGIO_M_SV) {
            sim_flow_score sc;
            sim_flow_evaluate(lab, V, G, N, D, d0, d1, &sc);
            printf("%-6s vessel/tissue %.2f (%.4g / %.4g), en-face slab_max CNR %.2f "
                   "(pooled sd %.2f, slab_mean %.2f)\n",
                   nm, sc.ratio, sc.vessel_mean, sc.tissue_mean, sc.cnr, sc.cnr_pooled,
                   sc.cnr_mean);
        }
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "octsim flow: %s\n", e.msg);
out:
    oct_angio_destroy(a);
    free(x);
    free(vol);
    free(mean);
    free(en);
    free(gray);
    free(bs);
    return rc;
}

static int bad(const char *opt, const char *v)
{
    fprintf(stderr, "octsim flow: %s: bad value \"%s\"\n", opt, v);
    return 2;
}

static bool num(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return !errno && end != s && !*end;
}

static bool u32(const char *s, uint32_t *v)
{
    double d;
    if (!num(s, &d) || d < 0 || d > 4294967295.0 || d != (uint32_t)d)
        return false;
    *v = (uint32_t)d;
    return true;
}

int octsim_cmd_flow(int argc, char **argv)
{
    static const struct option opts[] = {
        {"samples", 1, 0, 'M'}, {"ascans", 1, 0, 'N'}, {"positions", 1, 0, 'G'},
        {"repeats", 1, 0, 'R'}, {"output", 1, 0, 'o'}, {"truth", 1, 0, 't'},
        {"speed", 1, 0, 'v'},   {"type", 1, 0, 'y'},   {"noise", 1, 0, 'n'},
        {"shot", 1, 0, 's'},    {"seed", 1, 0, 'S'},   {"help", 0, 0, 'h'},
        {"angio", 1, 0, 'A'},   {"motion", 1, 0, 'z'},
        {0, 0, 0, 0}};
    uint32_t M = 0, N = 0, G = 0, R = 0, type = OCT_SAMPLE_U16;
    double speed = -1, noise = -1, shot = -1, seed = 1, motion = 0;
    const char *out = NULL, *truth = NULL, *angio = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'M': if (!u32(optarg, &M)) return bad("--samples", optarg); break;
        case 'N': if (!u32(optarg, &N) || !N) return bad("--ascans", optarg); break;
        case 'G': if (!u32(optarg, &G) || !G) return bad("--positions", optarg); break;
        case 'R': if (!u32(optarg, &R) || !R) return bad("--repeats", optarg); break;
        case 'o': out = optarg; break;
        case 't': truth = optarg; break;
        case 'A': angio = optarg; break;
        case 'z': if (!num(optarg, &motion)) return bad("--motion", optarg); break;
        case 'v': if (!num(optarg, &speed) || !(speed >= 0 && speed <= 100)) return bad("--speed", optarg); break;
        case 'n': if (!num(optarg, &noise) || !(noise >= 0)) return bad("--noise", optarg); break;
        case 's': if (!num(optarg, &shot) || !(shot >= 0)) return bad("--shot", optarg); break;
        case 'S': if (!num(optarg, &seed) || seed < 0) return bad("--seed", optarg); break;
        case 'y':
            type = oct_sample_parse(optarg);
            if (type != OCT_SAMPLE_U16 && type != OCT_SAMPLE_F32)
                return bad("--type (u16 or f32)", optarg);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!M || !N || !G || !R || !out || optind < argc) {
        fprintf(stderr, "octsim flow: --samples, --ascans, --positions, --repeats and --output "
                        "are required (see --help)\n");
        return 2;
    }
    sim_flow f;
    sim_flow_default(&f, M, N, G, R);
    f.sample_type = type;
    if (speed >= 0)
        f.speed = speed;
    if (noise >= 0)
        f.noise = noise;
    if (shot >= 0)
        f.shot = shot;
    f.seed = (uint64_t)seed;
    f.motion = motion;
    const size_t spectra = (size_t)G * R * N, D = M / 2 + 1;
    void *frame = malloc(spectra * M * oct_sample_size(type));
    uint8_t *lab = truth || angio ? malloc((size_t)G * N * D) : NULL;
    if (!frame || ((truth || angio) && !lab)) {
        fprintf(stderr, "octsim flow: out of memory for %zu spectra\n", spectra);
        free(frame);
        free(lab);
        return 1;
    }
    oct_error e;
    oct_err err = sim_flow_frame(&f, frame, lab, &e);
    if (!err) {
        uint64_t shape[3] = {(uint64_t)G * R, N, M};
        err = oct_npy_save(out, type == OCT_SAMPLE_U16 ? OCT_DTYPE_U16 : OCT_DTYPE_F32, 3, shape,
                           frame, &e);
    }
    if (!err && truth) {
        uint64_t shape[3] = {G, N, D};
        err = oct_npy_save(truth, OCT_DTYPE_U8, 3, shape, lab, &e);
    }
    if (err) {
        fprintf(stderr, "octsim flow: %s\n", e.msg);
        free(frame);
        free(lab);
        return 1;
    }
    uint32_t d0, d1;
    sim_flow_slab(&f, &d0, &d1);
    printf("frame: %s (%u lines = %u positions x %u repeats, %u A-scans, %u samples)\n", out,
           G * R, G, R, N, M);
    printf("slab: [%u, %u)\n", d0, d1);
    int rc = angio ? write_angio(angio, &f, frame, lab) : 0;
    free(frame);
    free(lab);
    return rc;
}
