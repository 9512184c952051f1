/* octproc - offline processing of recorded frames with the octd engine
 * (SPEC 8): a profile and a .npy frame (or a stack of frames) in, 8-bit PNG
 * images and, when asked, float32 .npy intensities out. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "oct_docs.h"
#include "oct_config.h"
#include "oct_control_keys.h"
#include "cli.h"
#include "oct_engine.h"
#include "octproc.h"

/* A stack of at least this many frames is worth measured FFT plans. */
#define MEASURE_PLAN_FRAMES 8

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octproc --profile P.yaml --input FRAME.npy --output DIR\n"
            "               [--backend auto|cpu|cuda] [--threads N]\n"
            "               [--method cfd,msi,cms] [--set KEY=VALUE]...\n"
            "       octproc --register REF.npy --input TARGETS.npy --output DIR\n"
            "               [--intensity] [--profile P.yaml] [--backend B] [--threads N]\n"
            "       octproc --help | --version\n"
            "\n"
            "Processes recorded OCT frames offline with the same engine as octd.\n"
            "\n"
            "  --profile P.yaml   processing profile (CONFIGURATION.md); its geometry, when given,\n"
            "                     must match the frame; sample_shift is taken from it\n"
            "  --input FRAME.npy  uint16, int16 or float32 array of shape (L, N, M) = one\n"
            "                     frame of L lines x N A-scans x M samples, (N, M) = one\n"
            "                     B-scan frame (L = 1), or (K, L, N, M) = K frames\n"
            "  --output DIR       created if missing; a stack writes DIR/000000/, ...\n"
            "  --backend B        auto (CUDA when built in and a GPU is usable, else CPU),\n"
            "                     cpu or cuda (an error when CUDA is not available)\n"
            "  --threads N        CPU threads, 0 = all cores (default)\n"
            "  --method LIST      methods to run instead of the profile's: any of cfd, msi,\n"
            "                     cms (msi needs the profile's msi.masks, cms its cms: section)\n"
            "  --set KEY=VALUE    change a control value of the profile, with the names of\n"
            "                     `octctl get` (e.g. klin.interp=sinc klin.taps=21\n"
            "                     dispersion.a2=-12 background=fpn:50); may be repeated\n"
            "\n"
            "Profile sections of the CFD pre-processing and CMS (see CONFIGURATION.md, MATH.md):\n"
            "  klin: {interp: sinc, taps: 21, coefs: [c0, c1, c2, c3] | positions: pos.npy}\n"
            "  dispersion: {a2: 0.0, a3: 0.0, k0: 0.5}\n"
            "  background: {mode: rolling, frames: 16} | {mode: fpn, segment: 50}\n"
            "  cms: {calibration: cal.npy, depths: [z1, z2, ...], grid: {start, step, count}}\n"
            "  slab: {start: d0, end: d1}    depths of slab_mean / slab_max\n"
            "  angio: {metrics: [struct, median, sv, decor, ssada], bands: 4, band_width: 1.0}\n"
            "\n"
            "Files per frame, for each method (cfd, msi, cms) and product of the profile:\n"
            "  <kind>_<method>.png        8-bit gray image (bscan, confocal, xsec_h, xsec_v,\n"
            "                             slab_mean, slab_max: depths [slab.start, slab.end))\n"
            "  enface_<method>_<q>.png    one per en-face depth q = 0..Q-1 (indices past the\n"
            "                             last depth are cut; a line says how many were used)\n"
            "  volume_<method>.png        the volume as (L*N) rows x D columns\n"
            "  <kind>_<method>.npy        float32 intensities in the message shape\n"
            "                             (en-face [Q, L, N]) when products has f32\n"
            "  <metric>_cfd.png / .npy    angiography (geometry.repeats >= 2, angio.metrics):\n"
            "                             struct, median, sv, decor, ssada\n"
            "  slab_mean_<metric>.png     en-face angiograms [G, N] of sv, decor, ssada\n"
            "  slab_max_<metric>.png      (products slab_mean / slab_max; .npy with f32)\n"
            "\n"
            "Registration (motion correction; MATH.md, README \"Volume registration\"):\n"
            "  --register REF.npy registers every target volume of --input against REF and\n"
            "                     writes DIR/shifts.npy [V][L][4] (dx, dy, dz, valid),\n"
            "                     registered.npy [V][L][N][D], average.npy [L][N][D] and\n"
            "                     before_/after_slow.png, before_/after_cscan.png\n"
            "  --intensity        REF is a float32 [L][N][D] intensity volume, --input a\n"
            "                     [V][L][N][D] stack (--profile optional: its geometry must\n"
            "                     match and its reg.* values are used); without it REF and\n"
            "                     --input are raw frames processed through --profile\n"
            "  --set reg.KEY=V    registration values (reg.stripe, reg.search_xy,\n"
            "                     reg.search_z) as `octctl set` names them\n"
            "\n"
            "Exit status: 0 success, 1 bad input or processing error, 64 usage error.\n"
            OCT_DOCS_HINT);
}

/* mkdir -p */
static int make_dirs(const char *path, char *err, size_t err_len)
{
    char buf[OCT_PATH_MAX];
    int n = snprintf(buf, sizeof buf, "%s", path);
    if (n <= 0 || (size_t)n >= sizeof buf) {
        snprintf(err, err_len, "%s: path too long", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                snprintf(err, err_len, "cannot create directory %s: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s: not a directory", path);
        return -1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Formats an output path; a path that does not fit is an error, never truncated. */
static oct_err out_path(char *buf, size_t len, oct_error *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static oct_err out_path(char *buf, size_t len, oct_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len)
        return oct_error_set(e, OCT_EINVAL, "output path too long (%d bytes)", n);
    return OCT_OK;
}

/* Writes every present product of one processed frame into dir. */
static oct_err write_products(const oct_products *pr, bool want_f32, const char *dir, int *files,
                              oct_error *e)
{
    char path[OCT_PATH_MAX];
    oct_err err;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *img = &pr->img[m][k];
            if (!img->present)
                continue;
            const char *kn = oct_kind_name(k), *mn = oct_product_method_name(m, k);
            if (img->ndim == 2) {
                if ((err = out_path(path, sizeof path, e, "%s/%s_%s.png", dir, kn, mn)))
                    return err;
                if ((err = oct_png_save_gray(path, img->u8, img->shape[1], img->shape[0], e)))
                    return err;
                ++*files;
            } else if (k == OCT_KIND_ENFACE) {
                size_t plane = (size_t)img->shape[1] * img->shape[2];
                for (uint32_t q = 0; q < img->shape[0]; q++) {
                    if ((err = out_path(path, sizeof path, e, "%s/%s_%s_%u.png", dir, kn, mn, q)))
                        return err;
                    if ((err = oct_png_save_gray(path, img->u8 + q * plane, img->shape[2],
                                                 img->shape[1], e)))
                        return err;
                    ++*files;
                }
            } else {
                /* volume [L][N][D]: its C-order bytes as (L*N) rows of D pixels */
                uint64_t rows = (uint64_t)img->shape[0] * img->shape[1];
                if (rows > UINT32_MAX)
                    return oct_error_set(e, OCT_ESIZE, "%s_%s: too many rows for a PNG", kn, mn);
                if ((err = out_path(path, sizeof path, e, "%s/%s_%s.png", dir, kn, mn)))
                    return err;
                if ((err = oct_png_save_gray(path, img->u8, img->shape[2], (uint32_t)rows, e)))
                    return err;
                ++*files;
            }
            if (want_f32) {
                if (!img->f32)
                    return oct_error_set(e, OCT_EINVAL, "%s_%s: the engine gave no float32 copy",
                                         kn, mn);
                uint64_t shape[3];
                for (int i = 0; i < img->ndim; i++)
                    shape[i] = img->shape[i];
                if ((err = out_path(path, sizeof path, e, "%s/%s_%s.npy", dir, kn, mn)))
                    return err;
                if ((err = oct_npy_save(path, OCT_DTYPE_F32, img->ndim, shape, img->f32, e)))
                    return err;
                ++*files;
            }
        }
    return OCT_OK;
}

int main(int argc, char **argv)
{
    oct_engine_process_init(); /* before any thread: OpenBLAS kernel choice */
    const char *profile_path = NULL, *input = NULL, *output = NULL;
    oct_backend backend = OCT_BACKEND_AUTO;
    int threads = 0;
    const char *method = NULL;
    const char *reg_ref = NULL; /* --register */
    bool intensity = false;
    char **sets = calloc((size_t)argc, sizeof *sets); /* --set assignments, in order */
    int nsets = 0;
    if (!sets) {
        fprintf(stderr, "octproc: out of memory\n");
        return 1;
    }
    static const struct option opts[] = {
        {"method", required_argument, NULL, 'm'}, {"set", required_argument, NULL, 's'},
        {"profile", required_argument, NULL, 'p'}, {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},  {"backend", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {"register", required_argument, NULL, 'R'},
        {"intensity", no_argument, NULL, 'I'},     {NULL, 0, NULL, 0},
    };
    int c = oct_cli_start("octproc", argc, argv, NULL);
    if (c >= 0)
        return c;
    while ((c = getopt_long(argc, argv, "p:i:o:b:t:m:s:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'm': method = optarg; break;
        case 's': sets[nsets++] = optarg; break;
        case 'p': profile_path = optarg; break;
        case 'i': input = optarg; break;
        case 'o': output = optarg; break;
        case 'b':
            if (!strcasecmp(optarg, "auto")) backend = OCT_BACKEND_AUTO;
            else if (!strcasecmp(optarg, "cpu")) backend = OCT_BACKEND_CPU;
            else if (!strcasecmp(optarg, "cuda")) backend = OCT_BACKEND_CUDA;
            else {
                fprintf(stderr, "octproc: --backend '%s': must be auto, cpu or cuda\n", optarg);
                return OCT_EX_USAGE;
            }
            break;
        case 't': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || !*optarg || *end || v < 0 || v > 4096) {
                fprintf(stderr, "octproc: --threads '%s': must be an integer from 0 to 4096\n",
                        optarg);
                return OCT_EX_USAGE;
            }
            threads = (int)v;
            break;
        }
        case 'R': reg_ref = optarg; break;
        case 'I': intensity = true; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("octproc %s\n", OCT_VERSION); return 0;
        default: return oct_cli_usage("octproc", "bad option %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return oct_cli_usage("octproc", "unexpected argument '%s'", argv[optind]);
    if (reg_ref || intensity) {
        char emsg[OCT_PATH_MAX + 128];
        if (!reg_ref || !input || !output || method) {
            free(sets);
            return oct_cli_usage("octproc", "--register REF.npy needs --input and --output (and "
                                            "takes no --method); --intensity goes with --register");
        }
        int rrc = 1;
        if (make_dirs(output, emsg, sizeof emsg)) {
            fprintf(stderr, "octproc: %s\n", emsg);
        } else {
            octproc_reg_args ra = {reg_ref, input, output, profile_path, intensity, backend, threads,
                                   sets, nsets};
            rrc = octproc_register(&ra);
        }
        free(sets);
        return rrc;
    }
    if (!profile_path || !input || !output)
        return oct_cli_usage("octproc", "--profile, --input and --output are required");

    int rc = 1;
    oct_error e = {{0}};
    oct_err err;
    oct_profile *prof = calloc(1, sizeof *prof);
    oct_array arr = {0};
    oct_profile_data data = {0};
    oct_engine *eng = NULL;
    oct_products *pr = NULL;
    if (!prof) {
        fprintf(stderr, "octproc: out of memory\n");
        return 1;
    }
    if ((err = oct_profile_load(prof, profile_path, &e))) {
        fprintf(stderr, "octproc: %s\n", e.msg);
        goto out;
    }
    if (method || nsets) {
        /* through the control names, so that octproc and octctl agree */
        oct_control_values v;
        memset(&v, 0, sizeof v);
        oct_control_from_params(&v, &prof->params);
        if (method && (err = oct_control_key_set(&v, "methods", method, &e))) {
            fprintf(stderr, "octproc: --method: %s\n", e.msg);
            rc = OCT_EX_USAGE;
            goto out;
        }
        for (int i = 0; i < nsets; i++)
            if ((err = oct_control_assign(&v, sets[i], &e))) {
                fprintf(stderr, "octproc: --set: %s\n", e.msg);
                rc = OCT_EX_USAGE;
                goto out;
            }
        if ((err = oct_options_check_values(&v, &e))) { /* the option table's rules */
            fprintf(stderr, "octproc: --set: %s\n", e.msg);
            rc = OCT_EX_USAGE;
            goto out;
        }
        oct_params_from_control(&prof->params, &v);
        if ((prof->params.methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) && !prof->cms_path[0]) {
            fprintf(stderr, "octproc: method cms: %s has no cms: section (calibration, depths, "
                            "grid)\n", profile_path);
            goto out;
        }
        if ((prof->params.methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) && !prof->masks_path[0]) {
            fprintf(stderr, "octproc: method msi: %s has no msi.masks.file\n", profile_path);
            goto out;
        }
    }
    if ((err = oct_npy_load(input, &arr, &e))) {
        fprintf(stderr, "octproc: %s\n", e.msg);
        goto out;
    }
    uint32_t stype = arr.dtype == OCT_DTYPE_U16   ? OCT_SAMPLE_U16
                     : arr.dtype == OCT_DTYPE_I16 ? OCT_SAMPLE_I16
                     : arr.dtype == OCT_DTYPE_F32 ? OCT_SAMPLE_F32
                                                  : 0;
    if (!stype) {
        fprintf(stderr, "octproc: %s: dtype %s: frames must be uint16, int16 or float32\n", input,
                oct_dtype_name(arr.dtype));
        goto out;
    }
    uint64_t K = 1, L = 1, N, M;
    switch (arr.ndim) {
    case 2: N = arr.shape[0]; M = arr.shape[1]; break;
    case 3: L = arr.shape[0]; N = arr.shape[1]; M = arr.shape[2]; break;
    case 4: K = arr.shape[0]; L = arr.shape[1]; N = arr.shape[2]; M = arr.shape[3]; break;
    default:
        fprintf(stderr,
                "octproc: %s: a %d-dimensional array: expected (L, N, M), (N, M) or (K, L, N, M)\n",
                input, arr.ndim);
        goto out;
    }
    if (K == 0 || L == 0 || N == 0 || L > UINT32_MAX || N > UINT32_MAX || M > UINT32_MAX) {
        fprintf(stderr, "octproc: %s: shape with K=%llu L=%llu N=%llu M=%llu is not a frame stack\n",
                input, (unsigned long long)K, (unsigned long long)L, (unsigned long long)N,
                (unsigned long long)M);
        goto out;
    }
    oct_geometry g = {(uint32_t)M, (uint32_t)N, (uint32_t)L, stype, 0};
    if (prof->has_geometry) {
        const oct_geometry *pg = &prof->geom;
        if (pg->samples != g.samples || pg->ascans != g.ascans || pg->lines != g.lines ||
            pg->sample_type != g.sample_type) {
            fprintf(stderr,
                    "octproc: %s: frame (lines %u, ascans %u, samples %u, %s) does not match the "
                    "geometry of %s (lines %u, ascans %u, samples %u, %s)\n",
                    input, g.lines, g.ascans, g.samples, oct_sample_name(g.sample_type),
                    profile_path, pg->lines, pg->ascans, pg->samples,
                    oct_sample_name(pg->sample_type));
            goto out;
        }
        g.sample_shift = pg->sample_shift;
    }
    if ((err = oct_geometry_check(&g, &e))) {
        fprintf(stderr, "octproc: %s: %s\n", input, e.msg);
        goto out;
    }
    if ((err = oct_profile_load_data(prof, g.samples, &data, &e))) {
        fprintf(stderr, "octproc: %s\n", e.msg);
        goto out;
    }

    oct_setup setup;
    oct_setup_default(&setup);
    setup.geom = g;
    oct_profile_setup(prof, &data, &setup); /* masks, reference, k-lin positions, CMS */
    setup.backend = backend;
    setup.threads = threads;
    setup.flags = K < MEASURE_PLAN_FRAMES ? OCT_SETUP_QUICK_PLAN : 0;
    if ((err = oct_profile_check(prof, &setup, &e))) {
        fprintf(stderr, "octproc: %s\n", e.msg);
        goto out;
    }
    if ((err = oct_engine_create(&eng, &setup, &prof->params, &e))) {
        fprintf(stderr, "octproc: cannot set up the %s engine (%s): %s\n",
                backend == OCT_BACKEND_CUDA ? "cuda" : backend == OCT_BACKEND_CPU ? "cpu" : "auto",
                oct_strerror(err), e.msg);
        goto out;
    }
    pr = oct_products_create();
    if (!pr) {
        fprintf(stderr, "octproc: out of memory\n");
        goto out;
    }
    char emsg[OCT_PATH_MAX + 128];
    if (make_dirs(output, emsg, sizeof emsg)) {
        fprintf(stderr, "octproc: %s\n", emsg);
        goto out;
    }
    bool want_f32 = prof->params.products & OCT_PRODUCT_F32;
    size_t frame_bytes = (size_t)oct_geometry_frame_bytes(&g);
    for (uint64_t k = 0; k < K; k++) {
        char dir[OCT_PATH_MAX];
        if (arr.ndim == 4) {
            int n = snprintf(dir, sizeof dir, "%s/%06llu", output, (unsigned long long)k);
            if (n < 0 || (size_t)n >= sizeof dir || make_dirs(dir, emsg, sizeof emsg)) {
                fprintf(stderr, "octproc: %s\n", n < 0 || (size_t)n >= sizeof dir ? "path too long" : emsg);
                goto out;
            }
        } else {
            snprintf(dir, sizeof dir, "%s", output);
        }
        double t0 = now_ms();
        err = oct_engine_process(eng, (const char *)arr.data + k * frame_bytes, frame_bytes, pr,
                                 &e);
        if (err) {
            fprintf(stderr, "octproc: %s: frame %llu: %s\n", input, (unsigned long long)k, e.msg);
            goto out;
        }
        double t1 = now_ms();
        int files = 0;
        if ((err = write_products(pr, want_f32, dir, &files, &e))) {
            fprintf(stderr, "octproc: %s\n", e.msg);
            goto out;
        }
        printf("octproc: frame %llu -> %s: %d files (%s, %.1f ms processing)\n",
               (unsigned long long)k, dir, files, oct_engine_backend_name(eng), t1 - t0);
        /* SPEC 2.4: en-face indices past the last depth are cut, and said so */
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            const oct_image *img = &pr->img[m][OCT_KIND_ENFACE];
            if (img->present && img->n_indices < img->requested)
                printf("octproc: frame %llu: en-face %s: %u depths requested, %u used "
                       "(enface start %d, step %d: indices past the last depth are cut)\n",
                       (unsigned long long)k, oct_method_name(m), img->requested, img->n_indices,
                       prof->params.enface_start, prof->params.enface_step);
        }
    }
    rc = 0;
out:
    oct_products_destroy(pr);
    oct_engine_destroy(eng);
    oct_profile_data_free(&data);
    oct_array_free(&arr);
    free(prof);
    free(sets);
    return rc;
}
