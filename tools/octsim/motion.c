/* motion.c - `octsim motion`: volumes of a simulated sample acquired under
 * eye motion (drift, tremor, micro-saccades, axial pulse), with the true
 * per-B-scan shifts, for registration tests and for users (SPEC 10.4).
 * The model is in motion.h. */
#include <errno.h>
#include <fftw3.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "motion.h"
#include "oct_config.h"

int cmd_motion(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octsim motion --output DIR [--lines L] [--ascans N] [--depths D | --samples M]\n"
            "                     [--volumes V] [--drift PX] [--tremor PX] [--axial PX]\n"
            "                     [--saccades K] [--saccade-size PX] [--saccade-lines T]\n"
            "                     [--offset PX] [--noise F] [--grain PX] [--seed S] [--frames]\n"
            "\n"
            "Simulates a layered, speckled sample and acquires a motion-free reference volume\n"
            "and V target volumes [L][N][D] along random eye trajectories.  Writes in DIR:\n"
            "  reference.npy  float32 [L][N][D]     the reference (with noise)\n"
            "  targets.npy    float32 [V][L][N][D]  the targets\n"
            "  truth.npy      float32 [V][L][4]     true (dx, dy, dz, valid) per B-scan, with\n"
            "                 V_t[l][n][d] ~ V_ref[l+dy][n+dx][d+dz] at the middle of line l;\n"
            "                 valid 0 where a saccade moves the eye by more than 1 px during\n"
            "                 the line, or l+dy is outside [0, L-1]\n"
            "  clean.npy      float32 [L][N][D]     the reference without noise (for SNR)\n"
            "  with --frames (D = M/2+1): reference_frame.npy float32 (L, N, M) and\n"
            "  frames.npy (V, L, N, M): spectra whose CFD (rect window, freq_cutoff 0)\n"
            "  intensity is M x the volumes above, for `octproc --register` on raw frames\n"
            "\n"
            "Motion per volume (px): constant offset in [-offset, offset] and a drift of up\n"
            "to --drift over the volume in x, y, z; tremor: sinusoids of periods 10-40\n"
            "lines, amplitude --tremor in x and y; axial pulse --axial in z; K saccades:\n"
            "steps of --saccade-size in x/y lasting --saccade-lines lines.  Noise is\n"
            "multiplicative: v (1 + F g), g standard normal; --grain is the speckle size\n"
            "(sigma of the blur of the sample's complex field, px).\n"
            "Defaults: 128 x 128 x 128, V 10, drift 4, tremor 0.3, axial 1, saccades 1,\n"
            "size 10, lines 2, offset 2, noise 0.3, grain 1.5, seed 1.\n");
}

static int save(const char *dir, const char *name, int nd, const uint64_t *shape, const float *v)
{
    char path[OCT_PATH_MAX];
    oct_error e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (oct_npy_save(path, OCT_DTYPE_F32, nd, shape, v, &e)) {
        fprintf(stderr, "octsim motion: %s\n", e.msg);
        return -1;
    }
    return 0;
}

/* spectra (L, N, M) whose |DFT| at d < D is M x vol[l][n][d] */
static void to_frames(const float *vol, uint32_t L, uint32_t N, uint32_t M, uint64_t seed, float *out)
{
    uint32_t D = M / 2 + 1;
    fftwf_complex *X = fftwf_malloc(sizeof *X * D);
    float *x = fftwf_malloc(sizeof *x * M);
    fftwf_plan p = fftwf_plan_dft_c2r_1d((int)M, X, x, FFTW_ESTIMATE);
    for (size_t j = 0; j < (size_t)L * N; j++) {
        uint64_t s = seed * 31 + j;
        for (uint32_t d = 0; d < D; d++) {
            double ph = (d == 0 || d == M / 2) ? 0 : 2 * M_PI * motion_unif(&s);
            double a = vol[j * D + d] * (d == 0 || d == M / 2 ? 1.0 : 0.5);
            X[d][0] = (float)(a * cos(ph)), X[d][1] = (float)(a * sin(ph));
        }
        fftwf_execute_dft_c2r(p, X, x);
        memcpy(out + j * M, x, sizeof *x * M);
    }
    fftwf_destroy_plan(p);
    fftwf_free(X), fftwf_free(x);
}

int cmd_motion(int argc, char **argv)
{
    motion_cfg c;
    motion_cfg_default(&c);
    uint32_t V = 10, M = 0;
    const char *out = NULL;
    int frames = 0;
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"lines", required_argument, NULL, 'L'},
        {"ascans", required_argument, NULL, 'N'}, {"depths", required_argument, NULL, 'D'},
        {"samples", required_argument, NULL, 'M'}, {"volumes", required_argument, NULL, 'V'},
        {"drift", required_argument, NULL, 'd'}, {"tremor", required_argument, NULL, 't'},
        {"axial", required_argument, NULL, 'a'}, {"saccades", required_argument, NULL, 's'},
        {"saccade-size", required_argument, NULL, 'S'}, {"saccade-lines", required_argument, NULL, 'T'},
        {"offset", required_argument, NULL, 'O'}, {"noise", required_argument, NULL, 'n'},
        {"grain", required_argument, NULL, 'g'}, {"seed", required_argument, NULL, 'e'},
        {"frames", no_argument, NULL, 'F'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int ch, li = -1;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "o:h", opts, &li)) != -1) {
        char *end = NULL;
        double v = 0;
        if (ch != 'o' && ch != 'h' && ch != 'F' && ch != '?') {
            errno = 0;
            v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v >= 0) || v > 1e6) {
                fprintf(stderr, "octsim motion: --%s '%s': must be a number from 0 to 1e6\n",
                        li >= 0 ? opts[li].name : "?", optarg);
                return OCT_EX_USAGE;
            }
        }
        switch (ch) {
        case 'o': out = optarg; break;
        case 'L': c.L = (uint32_t)v; break;
        case 'N': c.N = (uint32_t)v; break;
        case 'D': c.D = (uint32_t)v; break;
        case 'M': M = (uint32_t)v; break;
        case 'V': V = (uint32_t)v; break;
        case 'd': c.drift = v; break;
        case 't': c.tremor = v; break;
        case 'a': c.axial = v; break;
        case 's': c.saccades = (uint32_t)v; break;
        case 'S': c.saccade_size = v; break;
        case 'T': c.saccade_lines = v; break;
        case 'O': c.offset = v; break;
        case 'n': c.noise = v; break;
        case 'g': c.grain = v; break;
        case 'e': c.seed = (uint64_t)v; break;
        case 'F': frames = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return OCT_EX_USAGE;
        }
    }
    if (!out || optind < argc) {
        fprintf(stderr, "octsim motion: --output DIR is required%s\n", optind < argc ? " (and takes no arguments)" : "");
        usage(stderr);
        return OCT_EX_USAGE;
    }
    if (M) {
        if (M < 64 || M > 8192 || (M & (M - 1))) {
            fprintf(stderr, "octsim motion: --samples %u: must be a power of two from 64 to 8192\n", M);
            return OCT_EX_USAGE;
        }
        c.D = M / 2 + 1;
    } else if (frames) {
        fprintf(stderr, "octsim motion: --frames needs --samples M (D = M/2+1)\n");
        return OCT_EX_USAGE;
    }
    if (c.L < 8 || c.N < 8 || c.D < 8 || c.L > 4096 || c.N > 4096 || c.D > 8192 || V < 1 || V > 1000 ||
        c.saccades > 16 || !(c.grain >= 0.3)) {
        fprintf(stderr, "octsim motion: lines/ascans/depths must be 8..4096 (depths ..8192), volumes "
                        "1..1000, saccades <= 16, grain >= 0.3 (got %u x %u x %u, V %u, K %u, grain %g)\n",
                c.L, c.N, c.D, V, c.saccades, c.grain);
        return OCT_EX_USAGE;
    }
    if (mkdir(out, 0777) && errno != EEXIST) {
        fprintf(stderr, "octsim motion: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    size_t vol = (size_t)c.L * c.N * c.D;
    motion_sample s;
    float *all = malloc(sizeof(float) * vol * (V + 2)), *truth = malloc(sizeof(float) * 4 * c.L * V);
    if (!all || !truth || motion_sample_make(&s, &c, motion_margin(&c))) {
        fprintf(stderr, "octsim motion: out of memory for %u volumes of %zu voxels\n", V + 2, vol);
        return 1;
    }
    float *ref = all, *clean = all + vol, *tg = all + 2 * vol;
    motion_acquire(&s, NULL, 1, ref, NULL);
    motion_acquire(&s, NULL, 0, clean, NULL);
    for (uint32_t v = 0; v < V; v++) {
        motion_traj t;
        motion_traj_make(&t, &c, v + 1);
        motion_acquire(&s, &t, v + 2, tg + v * vol, truth + 4 * (size_t)c.L * v);
    }
    uint64_t s3[3] = {c.L, c.N, c.D}, s4[4] = {V, c.L, c.N, c.D}, st[3] = {V, c.L, 4};
    int rc = save(out, "reference.npy", 3, s3, ref) || save(out, "clean.npy", 3, s3, clean) ||
             save(out, "targets.npy", 4, s4, tg) || save(out, "truth.npy", 3, st, truth);
    if (!rc && frames) {
        float *fr = malloc(sizeof(float) * (size_t)c.L * c.N * M * V);
        if (!fr) {
            fprintf(stderr, "octsim motion: out of memory for the frames\n");
            rc = 1;
        } else {
            uint64_t f3[3] = {c.L, c.N, M}, f4[4] = {V, c.L, c.N, M};
            to_frames(ref, c.L, c.N, M, 1, fr);
            rc = save(out, "reference_frame.npy", 3, f3, fr);
            for (uint32_t v = 0; v < V && !rc; v++)
                to_frames(tg + v * vol, c.L, c.N, M, v + 2, fr + (size_t)v * c.L * c.N * M);
            if (!rc)
                rc = save(out, "frames.npy", 4, f4, fr);
            free(fr);
        }
    }
    if (!rc)
        printf("octsim motion: %u volumes of %u x %u x %u -> %s\n", V, c.L, c.N, c.D, out);
    motion_sample_free(&s);
    free(all), free(truth);
    return rc ? 1 : 0;
}
