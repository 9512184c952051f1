/* ring.c - `octctl ring`: inspects a frame ring (header, geometry, epoch,
 * producer, write rate, heartbeat age) and dumps its newest committed frame
 * as an (L, N, M) .npy of the ring's sample type.  Read-only: it attaches
 * like any consumer and never writes to the ring. */
#include "ring.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oct_config.h"
#include "oct_ipc.h"

static void ring_usage(FILE *f)
{
    fprintf(f,
            "usage: octctl ring [--ring NAME] [--dump FILE.npy] [--timeout MS]\n"
            "Prints the frame ring's header (ABI, geometry, slots, epoch, state, producer),\n"
            "its write rate and heartbeat age, one key=value a line.  The rate counts\n"
            "commits over 0.5 s; for a slow producer it waits (2.5 s at most) for two\n"
            "commits and takes the time between them (else the two newest frames' t_acq_ns,\n"
            "if the newest is recent).\n"
            "--dump writes the newest committed frame (torn-safe copy) as an (L, N, M)\n"
            "array of the ring's sample type; --timeout bounds the wait for a frame\n"
            "(default 2000 ms).  NAME defaults to %s.\n",
            OCT_RING_DEFAULT);
}

static const char *state_name(uint32_t s)
{
    switch (s) {
    case OCT_RING_INIT: return "INIT";
    case OCT_RING_READY: return "READY";
    case OCT_RING_CLOSED: return "CLOSED";
    default: return "?";
    }
}

static int dump_frame(oct_ring_consumer *c, const char *name, const char *path, int timeout_ms)
{
    oct_geometry g;
    oct_ring_consumer_geometry(c, &g);
    size_t fb = (size_t)oct_geometry_frame_bytes(&g);
    void *buf = malloc(fb);
    if (!buf) {
        fprintf(stderr, "octctl ring: cannot allocate %zu bytes for a frame\n", fb);
        return 1;
    }
    if (__atomic_load_n(&oct_ring_consumer_header(c)->write_seq, __ATOMIC_ACQUIRE) == 0 &&
        __atomic_load_n(&oct_ring_consumer_header(c)->state, __ATOMIC_ACQUIRE) == OCT_RING_CLOSED) {
        fprintf(stderr, "octctl ring: ring %s is closed and holds no frame\n", name);
        free(buf);
        return 1;
    }
    oct_frame_info info;
    oct_error e;
    oct_err err = OCT_ETORN;
    /* a torn copy means the producer lapped us: take the newest again
     * (a fast producer on a small ring under CPU load can lap many copies) */
    for (int attempt = 0; attempt < 200 && err == OCT_ETORN; attempt++)
        err = oct_ring_consumer_next(c, OCT_POLICY_LATEST, buf, fb, timeout_ms, &info, &e);
    if (err) {
        if (err == OCT_ETIMEDOUT)
            fprintf(stderr, "octctl ring: ring %s: no frame committed within %d ms\n", name,
                    timeout_ms);
        else
            fprintf(stderr, "octctl ring: %s\n", e.msg);
        free(buf);
        return 1;
    }
    oct_dtype dt = g.sample_type == OCT_SAMPLE_U16   ? OCT_DTYPE_U16
                   : g.sample_type == OCT_SAMPLE_I16 ? OCT_DTYPE_I16
                                                     : OCT_DTYPE_F32;
    uint64_t shape[3] = {g.lines, g.ascans, g.samples};
    err = oct_npy_save(path, dt, 3, shape, buf, &e);
    free(buf);
    if (err) {
        fprintf(stderr, "octctl ring: %s\n", e.msg);
        return 1;
    }
    printf("dumped=%s\ndumped_seq=%" PRIu64 "\ndumped_frame_id=%" PRIu64 "\ndumped_shape=%u,%u,%u\n",
           path, info.seq, info.frame_id, g.lines, g.ascans, g.samples);
    return 0;
}

/* The write rate.  A fast producer: commits counted over 0.5 s.  A slow
 * one (fewer than 3 commits in 0.5 s): the wait goes on, at most 2.5 s in
 * all, until two commits were seen, and the rate is the frames between them
 * over the time between them; with only one commit seen, the producer's
 * t_acq_ns of the two newest frames (if both are intact) tells the period. */
typedef struct rate_est {
    double fps;
    uint64_t w_end, t_end;
    char how[80];
} rate_est;

#define RATE_SHORT_NS 500000000ull
#define RATE_LONG_NS 2500000000ull
#define RATE_POLL_NS 2000000ull

/* t_acq_ns of frame n if its slot still holds it (seq 2n+2 around the read). */
static bool slot_t_acq(const oct_ring_header *h, uint64_t n, uint64_t *t)
{
    const oct_slot_header *s =
        (const oct_slot_header *)((const uint8_t *)h + h->slot0_offset +
                                  (n & (h->slot_count - 1)) * h->slot_stride);
    if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != 2 * n + 2)
        return false;
    uint64_t v = __atomic_load_n(&s->t_acq_ns, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != 2 * n + 2)
        return false;
    *t = v;
    return true;
}

static void measure_rate(const oct_ring_header *h, rate_est *r)
{
    uint64_t t0 = oct_time_monotonic_ns();
    uint64_t w0 = __atomic_load_n(&h->write_seq, __ATOMIC_ACQUIRE), w = w0, now = t0;
    uint64_t first_t = 0, first_w = 0, last_t = 0, last_w = 0;
    int changes = 0;
    struct timespec poll = {0, (long)RATE_POLL_NS};
    for (;;) {
        nanosleep(&poll, NULL);
        now = oct_time_monotonic_ns();
        uint64_t wn = __atomic_load_n(&h->write_seq, __ATOMIC_ACQUIRE);
        if (wn != w) {
            if (!changes++) {
                first_t = now;
                first_w = wn;
            }
            last_t = now;
            last_w = wn;
            w = wn;
        }
        if (now - t0 >= RATE_SHORT_NS &&
            (w - w0 >= 3 || changes >= 2 ||
             __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != OCT_RING_READY))
            break;
        if (now - t0 >= RATE_LONG_NS)
            break;
    }
    r->w_end = w;
    r->t_end = now;
    if (w - w0 >= 3 && now - t0 < RATE_SHORT_NS + 50000000ull) {
        r->fps = (double)(w - w0) / ((double)(now - t0) / 1e9);
        snprintf(r->how, sizeof r->how, "%" PRIu64 " commits in %.1f s", w - w0,
                 (double)(now - t0) / 1e9);
    } else if (changes >= 2 && last_t > first_t) {
        r->fps = (double)(last_w - first_w) / ((double)(last_t - first_t) / 1e9);
        snprintf(r->how, sizeof r->how, "%" PRIu64 " frames between two commits %.2f s apart",
                 last_w - first_w, (double)(last_t - first_t) / 1e9);
    } else {
        uint64_t ta, tb;
        r->fps = 0.0;
        uint64_t rt = oct_time_realtime_ns();
        /* the newest frame must be recent for its period (2 periods + 0.5 s):
         * a producer that stopped committing shows 0, not its old rate */
        if (changes <= 1 && w >= 2 && slot_t_acq(h, w - 1, &tb) && slot_t_acq(h, w - 2, &ta) &&
            tb > ta && rt >= tb && rt - tb < 2 * (tb - ta) + 500000000ull) {
            r->fps = 1e9 / (double)(tb - ta);
            snprintf(r->how, sizeof r->how, "t_acq_ns of the two newest frames, %.1f s apart",
                     (double)(tb - ta) / 1e9);
        } else {
            snprintf(r->how, sizeof r->how, "%d commit(s) seen in %.1f s", changes,
                     (double)(now - t0) / 1e9);
        }
    }
}

int octctl_ring_main(int argc, char **argv)
{
    static const struct option opts[] = {{"ring", 1, 0, 'r'},
                                         {"dump", 1, 0, 'd'},
                                         {"timeout", 1, 0, 't'},
                                         {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *name = OCT_RING_DEFAULT, *dump = NULL;
    int timeout_ms = 2000;
    optind = 0; /* the caller used getopt already: re-initialise */
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r': name = optarg; break;
        case 'd': dump = optarg; break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 0 || v > 3600000) {
                fprintf(stderr, "octctl ring: --timeout: bad value \"%s\"\n", optarg);
                return 64; /* EX_USAGE, as octctl's other commands */
            }
            timeout_ms = (int)v;
            break;
        }
        case 'h': ring_usage(stdout); return 0;
        default: ring_usage(stderr); return 64;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "octctl ring: unexpected argument \"%s\"\n", argv[optind]);
        return 64;
    }
    oct_ring_consumer *c = NULL;
    oct_error e;
    oct_err err;
    /* a producer that is just creating the ring: give it a moment */
    for (int i = 0; (err = oct_ring_consumer_open(&c, name, &e)) == OCT_EAGAIN && i < 100; i++)
        usleep(10000);
    if (err) {
        fprintf(stderr, "octctl ring: %s\n", e.msg);
        return 1;
    }
    const oct_ring_header *h = oct_ring_consumer_header(c);
    oct_geometry g;
    oct_ring_consumer_geometry(c, &g);
    rate_est r;
    measure_rate(h, &r);
    uint64_t w1 = r.w_end, t1 = r.t_end;
    uint64_t hb = __atomic_load_n(&h->heartbeat_ns, __ATOMIC_ACQUIRE);
    uint32_t state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
    double fps = r.fps;
    double hb_age = t1 > hb ? (double)(t1 - hb) / 1e6 : 0.0;
    pid_t pid = (pid_t)h->producer_pid;
    bool alive = pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
    time_t start_s = (time_t)(h->producer_start_ns / 1000000000ull);
    char start[64] = "?";
    struct tm tmv;
    if (localtime_r(&start_s, &tmv))
        strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%S%z", &tmv);

    printf("ring=%s\n", name);
    printf("abi=%u.%u\n", h->abi_major, h->abi_minor);
    printf("state=%s\n", state_name(state));
    printf("epoch=%016" PRIx64 "\n", h->epoch);
    printf("geometry=%ux%ux%u\n", g.lines, g.ascans, g.samples);
    printf("lines=%u\nascans=%u\nsamples=%u\n", g.lines, g.ascans, g.samples);
    printf("sample_type=%s\nsample_shift=%u\n", oct_sample_name(g.sample_type), g.sample_shift);
    printf("frame_bytes=%" PRIu64 "\n", oct_geometry_frame_bytes(&g));
    printf("slot_count=%u\nslot_stride=%" PRIu64 "\nslot0_offset=%" PRIu64 "\n", h->slot_count,
           h->slot_stride, h->slot0_offset);
    printf("producer_pid=%" PRIu64 " (%s)\n", h->producer_pid, alive ? "running" : "not running");
    printf("producer_start=%s\n", start);
    printf("write_seq=%" PRIu64 "\n", w1);
    printf("write_rate=%.*f frames/s (%.0f A-scans/s, %.1f MB/s; %s)\n", fps < 10 ? 2 : 1, fps,
           fps * g.ascans * g.lines, fps * (double)oct_geometry_frame_bytes(&g) / 1e6, r.how);
    printf("heartbeat_age_ms=%.1f%s\n", hb_age,
           state == OCT_RING_READY && hb_age > 2000 ? " (stale: producer stopped?)" : "");
    fflush(stdout);
    int rc = 0;
    if (dump)
        rc = dump_frame(c, name, dump, timeout_ms);
    oct_ring_consumer_close(c);
    return rc;
}
