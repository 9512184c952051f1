/* octsim - the reference acquirer: creates a frame ring (SPEC 3.1) and
 * writes simulated OCT frames into it; `octsim masks` writes the matching
 * MSI mask set; `octsim replay` feeds recorded frames. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oct_docs.h"
#include "oct_config.h"
#include "oct_ipc.h"
#include "cli.h"
#include "sim.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void usage_main(FILE *f)
{
    fprintf(f,
        "usage: octsim [--ring NAME] --samples M --ascans N --lines L [--type u16|i16|f32]\n"
        "              [--shift S] [--slots K] [--ascan-rate ASCANS_PER_S] [--frames COUNT]\n"
        "              [--seed S] [--profile P.yaml] [--sample layered|retina|laminate]\n"
        "              [--distinct D] [--kmap A] [--dispersion B] [--unlink] [--quiet]\n"
        "       octsim masks --samples M --count R --output FILE.npy [--seed S]\n"
        "       octsim masks --cms --samples M [--depths Z1,Z2,...] --output CAL.npy\n"
        "                    [--klin-out POS.npy] [--yaml SNIPPET.yaml] [--grid-count R]\n"
        "       octsim replay FILE.npy [--ring NAME] [--ascan-rate ...] [--loop] [--shift S]\n"
        "                    [--commit]   (--commit: slots filled once, then headers only)\n"
        "       octsim motion --output DIR [...]   (volumes under eye motion with the\n"
        "                    true shifts, for registration: octsim motion --help)\n"
        "       octsim flow --samples M --ascans N --positions G --repeats R --output F.npy\n"
        "\n"
        "Creates the frame ring NAME (default %s) and writes simulated frames of\n"
        "L lines x N A-scans x M samples: a swept-source interferogram (Gaussian\n"
        "envelope, non-linear k-sampling, dispersion) of a layered sample with\n"
        "speckle, shot and read noise, quantised by a 12-bit ADC (u16: 0..4095 shifted\n"
        "left by S; i16: centred on 0; f32: unquantised).  A profile's geometry is\n"
        "used unless flags override it.\n"
        "To sustain high rates, octsim synthesises D distinct frames at start\n"
        "(default: up to 8, at most 256 MiB of them) and then cycles through them,\n"
        "frame_id counting on; each distinct frame has its own speckle, noise and a\n"
        "small axial motion.\n"
        "--ascan-rate: A-scans per second (0 or absent = as fast as possible; the old\n"
        "spelling --rate still works, with a warning).  --version: the version.\n"
        "Runs until COUNT frames were written or SIGINT/SIGTERM; then marks the ring\n"
        "CLOSED (and removes it with --unlink) and exits 0.  Prints frames/s and\n"
        "A-scans/s once a second on stderr unless --quiet.\n" OCT_DOCS_HINT,
        OCT_RING_DEFAULT);
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-')
        return false;
    *v = x;
    return true;
}

static bool parse_u32(const char *s, uint32_t *v)
{
    uint64_t x;
    if (!parse_u64(s, &x) || x > UINT32_MAX)
        return false;
    *v = (uint32_t)x;
    return true;
}

static bool parse_double(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return !errno && end != s && !*end;
}

static int bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "octsim: %s: bad value \"%s\"\n", opt, val);
    return OCT_EX_USAGE;
}

/* ---- producer loop shared by simulate and replay ---- */
typedef struct feed {
    oct_ring_producer *p;
    pthread_mutex_t lock; /* only the heartbeat thread and close touch p concurrently */
    bool hb_run;
} feed;

static void *heartbeat_thread(void *arg)
{
    feed *f = arg;
    /* every 50 ms, even while frames are slow or being synthesised */
    struct timespec ts = {0, 50000000};
    for (;;) {
        pthread_mutex_lock(&f->lock);
        bool run = f->hb_run;
        if (run)
            oct_ring_producer_heartbeat(f->p);
        pthread_mutex_unlock(&f->lock);
        if (!run)
            return NULL;
        nanosleep(&ts, NULL);
    }
}

static uint64_t mono_ns(void) { return oct_time_monotonic_ns(); }

/* Sleeps until the monotonic time `t` in <= 50 ms steps; false on a stop. */
static bool sleep_until(uint64_t t)
{
    for (;;) {
        if (g_stop)
            return false;
        uint64_t now = mono_ns();
        if (now >= t)
            return true;
        uint64_t step = t - now > 50000000ull ? 50000000ull : t - now;
        uint64_t until = now + step;
        struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
}

/* Writes frames[i % count] until `total` frames (0 = forever) or a signal.
 * commit: each slot is filled once (slot s with frames[s % count]); from
 * then on frames are only stamped and committed, as a digitizer's DMA fills
 * slots in place: frame n carries what its slot holds, frames[(n mod slots)
 * mod count] (= n mod count when the slot count is a multiple of count).
 * No copy: rates far beyond memcpy's (200x192x1024 u16 at 100/s is 7.9 GB/s). */
static int run_feed(const char *ring, const oct_geometry *g, uint32_t slots, double rate,
                    uint64_t total, const uint8_t *frames, uint32_t count, bool quiet,
                    bool unlink_at_end, bool commit)
{
    oct_ring_config cfg = {*g, slots, 0};
    oct_error e;
    feed f = {.hb_run = true};
    oct_err err = oct_ring_producer_create(&f.p, ring, &cfg, &e);
    if (err) {
        fprintf(stderr, "octsim: %s\n", e.msg);
        return 1;
    }
    const oct_ring_header *h = oct_ring_producer_header(f.p);
    size_t fb = (size_t)h->frame_bytes;
    const uint64_t nslot = h->slot_count;
    if (!quiet)
        fprintf(stderr,
                "octsim: ring %s: %u x %u x %u %s (shift %u), %u slots, epoch %016llx, %s%s\n",
                ring, g->lines, g->ascans, g->samples, oct_sample_name(g->sample_type),
                g->sample_shift, h->slot_count, (unsigned long long)h->epoch,
                rate > 0 ? "paced" : "as fast as possible",
                commit ? ", commit (slots filled once, then headers only)" : "");
    if (commit && !quiet && nslot % count)
        fprintf(stderr, "octsim: --commit: %u slots are no multiple of the %u frames: frame n "
                        "carries frame (n mod %u) mod %u of the file\n",
                h->slot_count, count, h->slot_count, count);
    pthread_mutex_init(&f.lock, NULL);
    pthread_t hb;
    if (pthread_create(&hb, NULL, heartbeat_thread, &f) != 0) {
        fprintf(stderr, "octsim: cannot start the heartbeat thread\n");
        oct_ring_producer_close(f.p, true);
        return 1;
    }
    uint64_t period = rate > 0 ? (uint64_t)((double)g->ascans * g->lines / rate * 1e9) : 0;
    uint64_t t_next = mono_ns(), t_report = t_next + 1000000000ull, last_n = 0;
    uint64_t n = 0;
    for (; !g_stop && (total == 0 || n < total); n++) {
        if (period) {
            if (!sleep_until(t_next))
                break;
            t_next += period;
            uint64_t now = mono_ns();
            if (now > t_next + 4 * period)
                t_next = now; /* fell behind: do not burst to catch up */
        }
        void *dst = oct_ring_producer_begin(f.p);
        if (!commit)
            memcpy(dst, frames + (size_t)(n % count) * fb, fb);
        else if (n < nslot) /* the first pass: each slot once */
            memcpy(dst, frames + (size_t)((n % nslot) % count) * fb, fb);
        oct_ring_producer_commit(f.p, n, oct_time_realtime_ns());
        uint64_t now = mono_ns();
        if (now >= t_report) {
            double dt = (double)(now - t_report + 1000000000ull) / 1e9;
            double fps = (double)(n + 1 - last_n) / dt;
            if (!quiet)
                fprintf(stderr, "octsim: %8.1f frames/s  %10.0f A-scans/s  (%llu frames)\n",
                        fps, fps * g->ascans * g->lines, (unsigned long long)(n + 1));
            last_n = n + 1;
            t_report = now + 1000000000ull;
        }
    }
    pthread_mutex_lock(&f.lock);
    f.hb_run = false;
    pthread_mutex_unlock(&f.lock);
    pthread_join(hb, NULL);
    pthread_mutex_destroy(&f.lock);
    oct_ring_producer_close(f.p, unlink_at_end);
    if (!quiet)
        fprintf(stderr, "octsim: %llu frames written, ring %s closed\n", (unsigned long long)n,
                ring);
    return 0;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: sleeps end at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- octsim (simulate) ---- */
static int cmd_simulate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"ring", 1, 0, 'r'},    {"samples", 1, 0, 'M'}, {"ascans", 1, 0, 'N'},
        {"lines", 1, 0, 'L'},   {"type", 1, 0, 't'},    {"shift", 1, 0, 's'},
        {"slots", 1, 0, 'k'},   {"ascan-rate", 1, 0, 'R'}, {"frames", 1, 0, 'F'},
        {"seed", 1, 0, 'S'},    {"profile", 1, 0, 'p'}, {"sample", 1, 0, 'x'},
        {"distinct", 1, 0, 'D'}, {"kmap", 1, 0, 'a'},   {"dispersion", 1, 0, 'b'},
        {"quiet", 0, 0, 'q'},   {"unlink", 0, 0, 'u'},  {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    const char *ring = OCT_RING_DEFAULT, *profile = NULL;
    uint32_t M = 0, N = 0, L = 0, type = 0, shift = UINT32_MAX, slots = 0, distinct = 0;
    uint64_t frames = 0, seed = 1;
    double rate = 0;
    int sample = SIM_LAYERED;
    bool quiet = false, unlink_end = false;
    sim_optics opt;
    sim_optics_default(&opt);
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': ring = optarg; break;
        case 'M': if (!parse_u32(optarg, &M)) return bad_value("--samples", optarg); break;
        case 'N': if (!parse_u32(optarg, &N)) return bad_value("--ascans", optarg); break;
        case 'L': if (!parse_u32(optarg, &L)) return bad_value("--lines", optarg); break;
        case 't': if (!(type = oct_sample_parse(optarg))) return bad_value("--type", optarg); break;
        case 's': if (!parse_u32(optarg, &shift)) return bad_value("--shift", optarg); break;
        case 'k': if (!parse_u32(optarg, &slots)) return bad_value("--slots", optarg); break;
        case 'R': if (!parse_double(optarg, &rate) || rate < 0) return bad_value("--ascan-rate", optarg); break;
        case 'F': if (!parse_u64(optarg, &frames)) return bad_value("--frames", optarg); break;
        case 'S': if (!parse_u64(optarg, &seed)) return bad_value("--seed", optarg); break;
        case 'p': profile = optarg; break;
        case 'x':
            if (!strcmp(optarg, "layered")) sample = SIM_LAYERED;
            else if (!strcmp(optarg, "retina")) sample = SIM_RETINA;
            else if (!strcmp(optarg, "laminate")) sample = SIM_LAMINATE;
            else return bad_value("--sample", optarg);
            break;
        case 'D': if (!parse_u32(optarg, &distinct) || !distinct) return bad_value("--distinct", optarg); break;
        case 'a': if (!parse_double(optarg, &opt.kmap_a) || opt.kmap_a < 0 || opt.kmap_a > 0.5) return bad_value("--kmap", optarg); break;
        case 'b': if (!parse_double(optarg, &opt.disp_b)) return bad_value("--dispersion", optarg); break;
        case 'q': quiet = true; break;
        case 'u': unlink_end = true; break;
        case 'h': usage_main(stdout); return 0;
        default: usage_main(stderr); return OCT_EX_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "octsim: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        return OCT_EX_USAGE;
    }
    oct_geometry g = {0, 0, 0, OCT_SAMPLE_U16, 0};
    if (profile) {
        oct_profile *pr = calloc(1, sizeof *pr);
        oct_error e;
        if (!pr) {
            fprintf(stderr, "octsim: out of memory\n");
            return 1;
        }
        if (oct_profile_load(pr, profile, &e) != OCT_OK) {
            fprintf(stderr, "octsim: %s\n", e.msg);
            free(pr);
            return 1;
        }
        if (pr->has_geometry)
            g = pr->geom;
        free(pr);
    }
    if (M) g.samples = M;
    if (N) g.ascans = N;
    if (L) g.lines = L;
    if (type) g.sample_type = type;
    if (shift != UINT32_MAX) g.sample_shift = shift;
    if (!g.samples || !g.ascans || !g.lines) {
        fprintf(stderr, "octsim: --samples, --ascans and --lines are required (or a profile "
                        "with a geometry)\n");
        return OCT_EX_USAGE;
    }
    oct_error e;
    if (oct_geometry_check(&g, &e) != OCT_OK) {
        fprintf(stderr, "octsim: %s\n", e.msg);
        return OCT_EX_USAGE;
    }
    size_t fb = (size_t)oct_geometry_frame_bytes(&g);
    if (!distinct) {
        size_t budget = 256u << 20;
        distinct = (uint32_t)(budget / fb);
        distinct = distinct < 1 ? 1 : distinct > 8 ? 8 : distinct;
    }
    if ((double)distinct * fb > 8.0 * (1u << 30)) {
        fprintf(stderr, "octsim: --distinct %u frames of %zu bytes exceed 8 GiB\n", distinct, fb);
        return OCT_EX_USAGE;
    }
    uint8_t *buf = malloc(fb * distinct);
    if (!buf) {
        fprintf(stderr, "octsim: cannot allocate %u frames of %zu bytes\n", distinct, fb);
        return 1;
    }
    install_signals();
    uint64_t t0 = mono_ns();
    for (uint32_t i = 0; i < distinct && !g_stop; i++) {
        if (sim_frame(&g, &opt, sample, seed, i, buf + (size_t)i * fb, &e) != OCT_OK) {
            fprintf(stderr, "octsim: %s\n", e.msg);
            free(buf);
            return 1;
        }
    }
    if (g_stop) {
        free(buf);
        return 0;
    }
    if (!quiet)
        fprintf(stderr, "octsim: synthesised %u distinct frame(s) in %.2f s\n", distinct,
                (double)(mono_ns() - t0) / 1e9);
    int rc = run_feed(ring, &g, slots, rate, frames, buf, distinct, quiet, unlink_end, false);
    free(buf);
    return rc;
}

/* "z1,z2,..." into depths (at most max); false on a bad list. */
static bool parse_depths(const char *s, double *depths, uint32_t max, uint32_t *count)
{
    *count = 0;
    char buf[4096];
    if (strlen(s) >= sizeof buf)
        return false;
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*count >= max || !parse_double(tok, &depths[*count]))
            return false;
        ++*count;
    }
    return *count > 0;
}

/* The profile lines that use what `octsim masks --cms` wrote. */
static int write_snippet(FILE *f, uint32_t M, const sim_optics *opt, const double *depths,
                         uint32_t K, uint32_t grid_count, const char *cal, const char *klin)
{
    double a2, a3, k0;
    sim_dispersion_engine(M, opt, &a2, &a3, &k0);
    fprintf(f, "# octsim masks --cms: M = %u, k map a = %g, dispersion b = %g\n", M, opt->kmap_a,
            opt->disp_b);
    fprintf(f, "# depths are CFD bins of the linearised spectrum (the grid's unit)\n");
    if (cal) {
        fprintf(f, "cms:\n  calibration: %s\n  depths: [", cal);
        for (uint32_t i = 0; i < K; i++)
            fprintf(f, "%s%.17g", i ? ", " : "", depths[i]);
        fprintf(f, "]\n  grid: {start: 0, step: 1, count: %u}\n", grid_count);
    }
    if (klin)
        fprintf(f, "klin: {interp: sinc, taps: 21, positions: %s}\n", klin);
    /* theta = a2 (n/M - k0)^2 + a3 (n/M - k0)^3; k0 is the model's exact centre */
    fprintf(f, "dispersion: {a2: %.9g, a3: %.9g, k0: %.9g}\n", a2, a3, k0);
    return ferror(f) ? -1 : 0;
}

static int cmd_masks_cms(uint32_t M, const sim_optics *opt, uint64_t seed, const char *out,
                         const char *depth_list, const char *klin_out, const char *yaml_out,
                         uint32_t grid_count, bool cms)
{
    double depths[256];
    uint32_t K = 0;
    oct_error e;
    oct_err err = OCT_OK;
    float *cal = NULL;
    if (cms) {
        if (depth_list) {
            if (!parse_depths(depth_list, depths, 256, &K))
                return bad_value("--depths", depth_list);
        } else {
            /* default: four mirror positions over the upper half of the depth range */
            static const double frac[] = {0.0625, 0.125, 0.25, 0.375};
            for (K = 0; K < 4; K++)
                depths[K] = frac[K] * M;
        }
        cal = malloc(sizeof(float) * (size_t)M * K);
        if (!cal) {
            fprintf(stderr, "octsim masks: out of memory\n");
            return 1;
        }
        err = sim_cms_cal(M, depths, K, opt, seed, cal, &e);
        if (!err) {
            uint64_t shape[2] = {K, M};
            err = oct_npy_save(out, OCT_DTYPE_F32, 2, shape, cal, &e);
        }
        free(cal);
        if (err) {
            fprintf(stderr, "octsim masks --cms: %s\n", e.msg);
            return 1;
        }
    }
    if (klin_out) {
        double *pos = malloc(sizeof(double) * M);
        if (!pos) {
            fprintf(stderr, "octsim masks: out of memory\n");
            return 1;
        }
        sim_klin_positions(M, opt, pos);
        uint64_t shape[1] = {M};
        err = oct_npy_save(klin_out, OCT_DTYPE_F64, 1, shape, pos, &e);
        free(pos);
        if (err) {
            fprintf(stderr, "octsim masks --klin-out: %s\n", e.msg);
            return 1;
        }
    }
    if (write_snippet(stdout, M, opt, depths, K, grid_count ? grid_count : M / 2,
                      cms ? out : NULL, klin_out) != 0)
        return 1;
    if (yaml_out) {
        FILE *f = fopen(yaml_out, "w");
        int bad = !f || write_snippet(f, M, opt, depths, K, grid_count ? grid_count : M / 2,
                                      cms ? out : NULL, klin_out) != 0;
        if (f && fclose(f) != 0)
            bad = 1;
        if (bad) {
            fprintf(stderr, "octsim masks: cannot write %s: %s\n", yaml_out, strerror(errno));
            return 1;
        }
    }
    return 0;
}

/* ---- octsim masks ---- */
static int cmd_masks(int argc, char **argv)
{
    static const struct option opts[] = {
        {"samples", 1, 0, 'M'}, {"count", 1, 0, 'R'}, {"output", 1, 0, 'o'},
        {"seed", 1, 0, 'S'}, {"kmap", 1, 0, 'a'}, {"dispersion", 1, 0, 'b'},
        {"cms", 0, 0, 'c'}, {"depths", 1, 0, 'd'}, {"klin-out", 1, 0, 'k'},
        {"yaml", 1, 0, 'y'}, {"grid-count", 1, 0, 'g'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    uint32_t M = 0, R = 0, grid_count = 0;
    uint64_t seed = 1;
    const char *out = NULL, *depth_list = NULL, *klin_out = NULL, *yaml_out = NULL;
    bool cms = false;
    sim_optics opt;
    sim_optics_default(&opt);
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'M': if (!parse_u32(optarg, &M)) return bad_value("--samples", optarg); break;
        case 'R': if (!parse_u32(optarg, &R)) return bad_value("--count", optarg); break;
        case 'o': out = optarg; break;
        case 'S': if (!parse_u64(optarg, &seed)) return bad_value("--seed", optarg); break;
        case 'a': if (!parse_double(optarg, &opt.kmap_a) || opt.kmap_a < 0 || opt.kmap_a > 0.5) return bad_value("--kmap", optarg); break;
        case 'b': if (!parse_double(optarg, &opt.disp_b)) return bad_value("--dispersion", optarg); break;
        case 'c': cms = true; break;
        case 'd': depth_list = optarg; break;
        case 'k': klin_out = optarg; break;
        case 'y': yaml_out = optarg; break;
        case 'g': if (!parse_u32(optarg, &grid_count) || !grid_count) return bad_value("--grid-count", optarg); break;
        case 'h':
            printf("usage: octsim masks --samples M --count R --output FILE.npy [--seed S]\n"
                   "                    [--kmap A] [--dispersion B]\n"
                   "       octsim masks --cms --samples M [--depths Z1,Z2,...] --output CAL.npy\n"
                   "                    [--klin-out POS.npy] [--yaml SNIPPET.yaml]\n"
                   "                    [--grid-count R] [--kmap A] [--dispersion B] [--seed S]\n"
                   "       octsim masks --samples M --klin-out POS.npy [--kmap A] [--dispersion B]\n"
                   "Writes R mirror spectra (float32, shape (R, M)) with octsim's envelope,\n"
                   "k-mapping and dispersion: mask r is a mirror at the path difference that\n"
                   "CFD shows at depth bin r*(M/2)/R, so MSI of simulated frames shows the\n"
                   "same layers.  Use the same --kmap/--dispersion as the simulation.\n"
                   "--cms: writes the Complex Master/Slave calibration instead: K mirror\n"
                   "spectra (shape (K, M)) at the depths Z1..ZK (K >= 2, in CFD bins of the\n"
                   "linearised spectrum, 0 < Z < M/2; default M/16, M/8, M/4, 3M/8), and prints\n"
                   "the profile lines that use it (cms: with a grid of R = M/2 depths 0, 1, ...,\n"
                   "unless --grid-count; klin:; dispersion: a2, a3, k0 of the simulated optics\n"
                   "in the engine's convention theta = a2 (n/M - k0)^2 + a3 (n/M - k0)^3).\n"
                   "--klin-out: the true resampling positions of the simulated k map (M\n"
                   "float64, a klin.positions file): linearised CFD then shows a mirror at\n"
                   "depth Z in bin Z exactly.  --yaml also writes the printed lines to a file.\n");
            return 0;
        default: return OCT_EX_USAGE;
        }
    }
    if (cms || (klin_out && !out)) {
        if (!M || (cms && !out) || optind < argc || R) {
            fprintf(stderr, "octsim masks: %s\n",
                    R ? "--count is for MSI masks; --cms takes --depths"
                      : "--cms needs --samples and --output (--klin-out alone: --samples)");
            return OCT_EX_USAGE;
        }
        oct_geometry g = {M, 1, 1, OCT_SAMPLE_F32, 0};
        oct_error ge;
        if (oct_geometry_check(&g, &ge) != OCT_OK) {
            fprintf(stderr, "octsim masks: %s\n", ge.msg);
            return OCT_EX_USAGE;
        }
        return cmd_masks_cms(M, &opt, seed, out, depth_list, klin_out, yaml_out, grid_count, cms);
    }
    if (!M || !R || !out || optind < argc) {
        fprintf(stderr, "octsim masks: --samples, --count and --output are required\n");
        return OCT_EX_USAGE;
    }
    float *m = malloc(sizeof(float) * (size_t)M * R);
    if (!m) {
        fprintf(stderr, "octsim masks: out of memory\n");
        return 1;
    }
    oct_error e;
    oct_err err = sim_masks(M, R, &opt, seed, m, &e);
    if (!err) {
        uint64_t shape[2] = {R, M};
        err = oct_npy_save(out, OCT_DTYPE_F32, 2, shape, m, &e);
    }
    free(m);
    if (err) {
        fprintf(stderr, "octsim masks: %s\n", e.msg);
        return 1;
    }
    if (klin_out || yaml_out) /* positions beside MSI masks */
        return cmd_masks_cms(M, &opt, seed, out, NULL, klin_out, yaml_out, grid_count, false);
    return 0;
}

/* ---- octsim replay ---- */
static int cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"ring", 1, 0, 'r'}, {"ascan-rate", 1, 0, 'R'}, {"loop", 0, 0, 'l'}, {"shift", 1, 0, 's'},
        {"slots", 1, 0, 'k'}, {"quiet", 0, 0, 'q'}, {"unlink", 0, 0, 'u'},
        {"commit", 0, 0, 'c'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    const char *ring = OCT_RING_DEFAULT;
    double rate = 0;
    bool loop = false, quiet = false, unlink_end = false, commit = false;
    uint32_t shift = 0, slots = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': ring = optarg; break;
        case 'R': if (!parse_double(optarg, &rate) || rate < 0) return bad_value("--ascan-rate", optarg); break;
        case 'l': loop = true; break;
        case 's': if (!parse_u32(optarg, &shift)) return bad_value("--shift", optarg); break;
        case 'k': if (!parse_u32(optarg, &slots)) return bad_value("--slots", optarg); break;
        case 'q': quiet = true; break;
        case 'u': unlink_end = true; break;
        case 'c': commit = true; break;
        case 'h':
            printf("usage: octsim replay FILE.npy [--ring NAME] [--ascan-rate ASCANS_PER_S] [--loop]\n"
                   "                     [--shift S] [--slots K] [--commit] [--quiet] [--unlink]\n"
                   "Feeds recorded frames: FILE.npy of shape (L, N, M) or (K, L, N, M),\n"
                   "dtype uint16, int16 or float32, into the ring, once (or forever with\n"
                   "--loop), then marks the ring CLOSED.  The file is read into memory\n"
                   "first; each frame is then copied into its slot.\n"
                   "--commit: copy into each slot once (slot s: frame s mod K), then only\n"
                   "stamp and commit frames, as a digitizer's DMA fills slots in place:\n"
                   "frame n carries frame (n mod slots) mod K (n mod K when the slot count\n"
                   "is a multiple of K).  For rates beyond one memcpy (200x192x1024 u16\n"
                   "at 100 volumes/s is 7.9 GB/s).\n");
            return 0;
        default: return OCT_EX_USAGE;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "octsim replay: exactly one FILE.npy expected (see --help)\n");
        return OCT_EX_USAGE;
    }
    const char *path = argv[optind];
    oct_array a;
    oct_error e;
    if (oct_npy_load(path, &a, &e) != OCT_OK) {
        fprintf(stderr, "octsim replay: %s\n", e.msg);
        return 1;
    }
    uint32_t type = a.dtype == OCT_DTYPE_U16 ? OCT_SAMPLE_U16
                    : a.dtype == OCT_DTYPE_I16 ? OCT_SAMPLE_I16
                    : a.dtype == OCT_DTYPE_F32 ? OCT_SAMPLE_F32 : 0;
    int rc = 1;
    if (!type || (a.ndim != 3 && a.ndim != 4)) {
        fprintf(stderr, "octsim replay: %s: need a (L, N, M) or (K, L, N, M) array of uint16, "
                        "int16 or float32, got %d dimensions of %s\n",
                path, a.ndim, oct_dtype_name(a.dtype));
        goto out;
    }
    int o = a.ndim - 3;
    uint64_t K = o ? a.shape[0] : 1;
    if (K == 0 || a.shape[o] > UINT32_MAX || a.shape[o + 1] > UINT32_MAX ||
        a.shape[o + 2] > UINT32_MAX) {
        fprintf(stderr, "octsim replay: %s: impossible shape\n", path);
        goto out;
    }
    oct_geometry g = {(uint32_t)a.shape[o + 2], (uint32_t)a.shape[o + 1], (uint32_t)a.shape[o],
                      type, shift};
    if (oct_geometry_check(&g, &e) != OCT_OK) {
        fprintf(stderr, "octsim replay: %s: %s\n", path, e.msg);
        goto out;
    }
    if (K > UINT32_MAX) {
        fprintf(stderr, "octsim replay: %s: too many frames\n", path);
        goto out;
    }
    install_signals();
    rc = run_feed(ring, &g, slots, rate, loop ? 0 : K, a.data, (uint32_t)K, quiet, unlink_end,
                  commit);
out:
    oct_array_free(&a);
    return rc;
}

int cmd_motion(int argc, char **argv);      /* motion.c */
int octsim_cmd_flow(int argc, char **argv); /* flow_cmd.c */

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "motion"))
        return cmd_motion(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "flow"))
        return octsim_cmd_flow(argc - 1, argv + 1);
    static const oct_cli_rename renames[] = {{"rate", "ascan-rate"}, {NULL, NULL}};
    int rc = oct_cli_start("octsim", argc, argv, renames);
    if (rc >= 0)
        return rc;
    if (argc > 1 && !strcmp(argv[1], "masks"))
        return cmd_masks(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "replay"))
        return cmd_replay(argc - 1, argv + 1);
    return cmd_simulate(argc, argv);
}
