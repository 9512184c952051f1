/* flow_cmd.c - `octsim flow`: writes the flow phantom (flow.h) as a frame
 * file for octproc / `octsim replay`, with its ground truth. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"
#include "oct_config.h"

int octsim_cmd_flow(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f,
        "usage: octsim flow --samples M --ascans N --positions G --repeats R\n"
        "                   --output FRAME.npy [--truth LABELS.npy] [--speed V]\n"
        "                   [--type u16|f32] [--noise RMS] [--shot F] [--seed S]\n"
        "Writes one frame of G*R lines (B-scan position g, repeat r = line g*R + r)\n"
        "x N A-scans x M samples, shape (G*R, N, M), of a static layered sample\n"
        "with a vessel (a tube along the slow axis, drifting in x) whose scatterers\n"
        "move by V beam widths between repeats (default 1.5; 0 = no flow).  The\n"
        "spectra are linear in k without dispersion (CFD shows depth bin b at b).\n"
        "--truth writes the labels [G][N][M/2+1] u8: 0 empty, 1 static tissue,\n"
        "2 vessel.  The vessel lies in the depths printed as `slab:`; use them as\n"
        "slab.start/slab.end for the en-face angiogram.  Feed the ring with\n"
        "`octsim replay FRAME.npy`; a profile needs geometry.repeats: R.\n");
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
        {0, 0, 0, 0}};
    uint32_t M = 0, N = 0, G = 0, R = 0, type = OCT_SAMPLE_U16;
    double speed = -1, noise = -1, shot = -1, seed = 1;
    const char *out = NULL, *truth = NULL;
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
    const size_t spectra = (size_t)G * R * N, D = M / 2 + 1;
    void *frame = malloc(spectra * M * oct_sample_size(type));
    uint8_t *lab = truth ? malloc((size_t)G * N * D) : NULL;
    if (!frame || (truth && !lab)) {
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
    free(frame);
    free(lab);
    if (err) {
        fprintf(stderr, "octsim flow: %s\n", e.msg);
        return 1;
    }
    uint32_t d0, d1;
    sim_flow_slab(&f, &d0, &d1);
    printf("frame: %s (%u lines = %u positions x %u repeats, %u A-scans, %u samples)\n", out,
           G * R, G, R, N, M);
    printf("slab: [%u, %u)\n", d0, d1);
    return 0;
}
