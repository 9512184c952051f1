/* octgrab - subscribes to octd's images (SPEC 6, 8): one line per message,
 * a per-topic summary (rate, gaps in image_seq, commit -> receive latency),
 * and what it received saved as PNG (u8) and .npy (f32).  On octd's
 * [publish] shm_endpoint the messages carry no payload: the image is copied
 * out of octd's image area (liboctipc oct_images_read) and then treated as a
 * received payload; one octd rewrote first is counted as lost.
 *
 * Exit status: 0 done (count reached or interrupted), 1 timed out before
 * --count messages arrived, 64 usage, 2 ZeroMQ error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zmq.h>

#include "cli.h"
#include "oct_docs.h"
#include "jsonhdr.h"
#include "record.h"
#include "oct_config.h"
#include "oct_ipc.h"

#define MAX_TOPICS 64
#define MAX_PREFIXES 32
#define MAX_AREAS 8 /* image areas mapped at once (one per engine of an octd) */

typedef struct topic_stats {
    char name[128];
    uint64_t messages, gaps, last_seq, saved;
    uint64_t lost; /* images lost in shared memory (overwritten before the copy was done) */
    bool have_seq;
    double first_t, last_t;
    double *lat_ms;
    size_t nlat, cap;
} topic_stats;

typedef struct grab {
    const char *endpoint, *outdir;
    const char *prefixes[MAX_PREFIXES];
    int nprefixes;
    long count, save_max;
    double timeout_s;
    bool quiet, headers;
    topic_stats topics[MAX_TOPICS];
    int ntopics;
    uint64_t images, malformed, status_msgs, save_errors;
    grab_rec *rec;        /* --record FILE.h5 */
    bool rec_failed;
    /* [publish] shm_endpoint: the image areas named by the messages, the
     * buffer images are copied into, the counts */
    oct_images *areas[MAX_AREAS];
    int nareas;
    void *shm_buf;
    size_t shm_cap;
    uint64_t shm_msgs, lost;
    bool said_gone;
} grab;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig; interrupted = 1; }

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octgrab [--endpoint E] [--topic PREFIX]... [--count N] [--timeout SEC]\n"
            "               [--output DIR] [--save-max N] [--record FILE.h5] [--quiet] [--headers]\n"
            "       octgrab --version | --help\n"
            "Subscribes to octd's images and prints one line per message and a summary.\n"
            "On an endpoint of octd's [publish] shm_endpoint the messages name where each image\n"
            "lies in octd's image area (shared memory, same host): octgrab copies it out and\n"
            "handles it as a received image; one octd rewrote before the copy was done is\n"
            "counted as lost (overwritten in shared memory), its line says so, and it is\n"
            "neither saved nor recorded.\n"
            "  -e, --endpoint E    default tcp://127.0.0.1:5556 (or octd's shm_endpoint)\n"
            "  -t, --topic PREFIX  topic prefix (repeatable; default: everything), e.g. bscan/cfd;\n"
            "                      slab_max/ssada (en-face angiogram: the metric in place of\n"
            "                      the method); an unknown kind or method is a usage error (exit 64)\n"
            "  -n, --count N       stop after N images (status messages and images lost in shared\n"
            "                      memory do not count)\n"
            "  -T, --timeout SEC   stop when nothing arrived for SEC seconds (exit 1 if --count\n"
            "                      was not reached)\n"
            "  -o, --output DIR    save images: u8 -> PNG (3-D: one PNG per slice), f32 -> .npy,\n"
            "                      named <topic with / as _>_<image_seq>[_<slice>].png/.npy\n"
            "  -s, --save-max N    save at most N messages per topic (default: all)\n"
            "  -r, --record F.h5   record every image received into one HDF5 file (written as\n"
            "                      F.h5.part, renamed at the end): /products/<kind>/<method>[_f32]\n"
            "                      [count][shape...] and /index/<same>/{frame_id,image_seq,t_acq_ns}\n"
            "  -q, --quiet         no line per message\n"
            "  -H, --headers       also print each image message's full JSON header (one line,\n"
            "                      starting with '{', after the message's line; also with --quiet)\n"
            OCT_DOCS_HINT);
}

static topic_stats *stats_for(grab *g, const char *topic)
{
    for (int i = 0; i < g->ntopics; i++)
        if (!strcmp(g->topics[i].name, topic))
            return &g->topics[i];
    if (g->ntopics == MAX_TOPICS)
        return NULL;
    topic_stats *t = &g->topics[g->ntopics++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", topic);
    return t;
}

static void add_latency(topic_stats *t, double ms)
{
    if (t->nlat == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        double *p = realloc(t->lat_ms, cap * sizeof *p);
        if (!p)
            return; /* the summary just has fewer samples */
        t->lat_ms = p;
        t->cap = cap;
    }
    t->lat_ms[t->nlat++] = ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void save_image(grab *g, topic_stats *t, const grab_header *h, const void *data)
{
    char base[160], path[OCT_PATH_MAX];
    size_t i;
    snprintf(base, sizeof base, "%s", h->topic);
    for (i = 0; base[i]; i++)
        if (base[i] == '/' || base[i] == '.')
            base[i] = '_';
    oct_error e;
    oct_err rc = OCT_OK;
    if (!strcmp(h->dtype, "f32")) {
        uint64_t shape[3] = {h->shape[0], h->shape[1], h->shape[2]};
        snprintf(path, sizeof path, "%s/%s_%06" PRIu64 ".npy", g->outdir, base, h->image_seq);
        rc = oct_npy_save(path, OCT_DTYPE_F32, h->ndim, shape, data, &e);
    } else if (h->ndim == 2) {
        snprintf(path, sizeof path, "%s/%s_%06" PRIu64 ".png", g->outdir, base, h->image_seq);
        rc = oct_png_save_gray(path, data, h->shape[1], h->shape[0], &e);
    } else if (h->ndim == 3) {
        size_t plane = (size_t)h->shape[1] * h->shape[2];
        for (uint32_t q = 0; q < h->shape[0] && rc == OCT_OK; q++) {
            snprintf(path, sizeof path, "%s/%s_%06" PRIu64 "_%u.png", g->outdir, base,
                     h->image_seq, q);
            rc = oct_png_save_gray(path, (const uint8_t *)data + q * plane, h->shape[2],
                                   h->shape[1], &e);
        }
    } else {
        return; /* 1-D: nothing sensible to draw */
    }
    if (rc != OCT_OK) {
        if (g->save_errors++ == 0)
            fprintf(stderr, "octgrab: %s\n", e.msg);
    } else {
        t->saved++;
    }
}

/* *out: the mapping of image area `name`, opened when not yet, or again
 * when reopen (octd made a new object under the name).  Else the error of
 * oct_images_open (OCT_ENOENT: no such object). */
static oct_err area_for(grab *g, const char *name, bool reopen, oct_images **out, oct_error *e)
{
    int i = 0;
    while (i < g->nareas && strcmp(oct_images_name(g->areas[i]), name) != 0)
        i++;
    if (i < g->nareas && !reopen) {
        *out = g->areas[i];
        return OCT_OK;
    }
    if (i < g->nareas) { /* dropped first: a failed reopen leaves no stale mapping */
        oct_images_close(g->areas[i], false);
        g->areas[i] = g->areas[--g->nareas];
    }
    oct_err rc = oct_images_open(out, name, e);
    if (rc != OCT_OK)
        return rc;
    if (g->nareas == MAX_AREAS) { /* the oldest goes */
        oct_images_close(g->areas[0], false);
        memmove(g->areas, g->areas + 1, (MAX_AREAS - 1) * sizeof *g->areas);
        g->nareas--;
    }
    g->areas[g->nareas++] = *out;
    return OCT_OK;
}

/* The image a header-only message of [publish] shm_endpoint names, copied
 * out of its image area under the slot's seqlock (ipc/PROTOCOL.md "Images
 * in shared memory"): 0 and *data, 1 lost (octd rewrote the slot before or
 * during the copy), 2 lost (the image's object is no longer there), -1 not
 * readable (err says why: permissions, not an image area, a reference
 * outside it). */
static int shm_fetch(grab *g, const grab_header *h, const void **data, char *err,
                     size_t err_len)
{
    if (h->shm_bytes > g->shm_cap) {
        void *p = h->shm_bytes <= SIZE_MAX ? realloc(g->shm_buf, (size_t)h->shm_bytes) : NULL;
        if (!p) {
            snprintf(err, err_len, "no memory for an image of %" PRIu64 " bytes", h->shm_bytes);
            return -1;
        }
        g->shm_buf = p;
        g->shm_cap = (size_t)h->shm_bytes;
    }
    oct_image_ref ref = {.id = h->shm_id, .seq = h->shm_seq, .offset = h->shm_offset,
                         .bytes = h->shm_bytes, .slot = h->shm_slot};
    oct_error e;
    oct_images *a;
    oct_err rc = area_for(g, h->shm_name, false, &a, &e);
    if (rc == OCT_OK)
        rc = oct_images_read(a, &ref, g->shm_buf, &e);
    if (rc == OCT_ESTALE) { /* another object under the name: map it again, once */
        rc = area_for(g, h->shm_name, true, &a, &e);
        if (rc == OCT_OK)
            rc = oct_images_read(a, &ref, g->shm_buf, &e);
    }
    switch (rc) {
    case OCT_OK:
        *data = g->shm_buf;
        return 0;
    case OCT_ETORN: /* rewritten before or during the copy */
        return 1;
    case OCT_ESTALE: /* still another object: the image's is gone */
        return 2;
    case OCT_ENOENT: /* octd removed the name (stopped, or between two objects) */
        if (!g->said_gone) {
            fprintf(stderr, "octgrab: %s: images counted as lost\n", e.msg);
            g->said_gone = true;
        }
        return 2;
    default:
        snprintf(err, err_len, "%s", e.msg);
        return -1;
    }
}

/* Handles one multipart message (parts already received). */
static void handle(grab *g, zmq_msg_t *parts, int nparts)
{
    const char *topic = zmq_msg_data(&parts[0]);
    size_t tlen = zmq_msg_size(&parts[0]);
    if (tlen == 6 && !memcmp(topic, "status", 6)) {
        g->status_msgs++;
        if (!g->quiet && nparts == 2)
            printf("status %.*s\n", (int)(zmq_msg_size(&parts[1]) > 300 ? 300 : zmq_msg_size(&parts[1])),
                   (const char *)zmq_msg_data(&parts[1]));
        return;
    }
    grab_header h;
    char err[sizeof(oct_error)] = "";
    if (nparts != 3) {
        snprintf(err, sizeof err, "%d parts instead of 3", nparts);
        goto malformed;
    }
    if (!grab_header_parse(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &h, err, sizeof err))
        goto malformed;
    if (strcmp(h.htype, "octd-image-1") != 0 || !h.has_shape || !h.has_image_seq) {
        snprintf(err, sizeof err, "not an octd-image-1 header with shape and image_seq");
        goto malformed;
    }
    if (tlen != strlen(h.topic) || memcmp(topic, h.topic, tlen) != 0) {
        snprintf(err, sizeof err, "topic frame and header topic differ");
        goto malformed;
    }
    size_t elem = !strcmp(h.dtype, "u8") ? 1 : !strcmp(h.dtype, "f32") ? 4 : 0;
    if (!elem) {
        snprintf(err, sizeof err, "unknown dtype '%s'", h.dtype);
        goto malformed;
    }
    uint64_t count = elem;
    bool overflow = false;
    for (int i = 0; i < h.ndim; i++)
        overflow |= __builtin_mul_overflow(count, (uint64_t)h.shape[i], &count);
    /* [publish] shm_endpoint: no payload, the image is in octd's image area */
    bool shm = h.shm_seen && zmq_msg_size(&parts[2]) == 0;
    if (shm && h.shm_seen != GRAB_SHM_ALL) {
        snprintf(err, sizeof err, "an empty payload with only some of the shm_* members");
        goto malformed;
    }
    if (overflow || count != (shm ? h.shm_bytes : zmq_msg_size(&parts[2]))) {
        if (shm)
            snprintf(err, sizeof err, "shm_bytes %" PRIu64 " does not match the shape",
                     h.shm_bytes);
        else
            snprintf(err, sizeof err, "payload of %zu bytes does not match the shape",
                     zmq_msg_size(&parts[2]));
        goto malformed;
    }
    const void *data = zmq_msg_data(&parts[2]);
    int lost = 0;
    if (shm) {
        g->shm_msgs++;
        lost = shm_fetch(g, &h, &data, err, sizeof err);
        if (lost < 0)
            goto malformed;
    }
    topic_stats *t = stats_for(g, h.topic);
    if (!t)
        return;
    if (lost) { /* it arrived, but its image is gone: lost, not a gap */
        if (t->have_seq && h.image_seq > t->last_seq + 1)
            t->gaps += h.image_seq - t->last_seq - 1;
        t->last_seq = h.image_seq;
        t->have_seq = true;
        t->lost++;
        g->lost++;
        if (!g->quiet)
            printf("%-18s seq %-6" PRIu64 " frame %-8" PRIu64 " lost (%s)\n", h.topic,
                   h.image_seq, h.frame_id, lost == 1 ? "overwritten in shared memory"
                                                      : "its image area is gone");
        return;
    }
    double now = mono_s();
    if (t->messages == 0)
        t->first_t = now;
    t->last_t = now;
    t->messages++;
    if (t->have_seq && h.image_seq > t->last_seq + 1)
        t->gaps += h.image_seq - t->last_seq - 1;
    t->last_seq = h.image_seq;
    t->have_seq = true;
    double lat = -1;
    uint64_t rt = realtime_ns();
    if (h.has_t_acq && h.t_acq_ns && rt >= h.t_acq_ns) {
        lat = (double)(rt - h.t_acq_ns) / 1e6;
        add_latency(t, lat);
    }
    g->images++;
    if (!g->quiet) {
        char shape[64];
        if (h.ndim == 3)
            snprintf(shape, sizeof shape, "[%u,%u,%u]", h.shape[0], h.shape[1], h.shape[2]);
        else if (h.ndim == 2)
            snprintf(shape, sizeof shape, "[%u,%u]", h.shape[0], h.shape[1]);
        else
            snprintf(shape, sizeof shape, "[%u]", h.shape[0]);
        printf("%-18s seq %-6" PRIu64 " frame %-8" PRIu64 " shape %-16s %-3s gen %-4" PRIu64
               " latency %.2f ms\n",
               h.topic, h.image_seq, h.frame_id, shape, h.dtype, h.params_gen, lat);
    }
    if (g->headers) {
        size_t hl = zmq_msg_size(&parts[1]);
        const char *hd = zmq_msg_data(&parts[1]);
        while (hl && (hd[hl - 1] == '\n' || hd[hl - 1] == '\0'))
            hl--;
        printf("%.*s\n", (int)hl, hd);
    }
    if (g->outdir && (g->save_max < 0 || t->saved < (uint64_t)g->save_max))
        save_image(g, t, &h, data);
    if (g->rec && !g->rec_failed && !grab_rec_add(g->rec, &h, data, err, sizeof err)) {
        fprintf(stderr, "octgrab: %s: recording stopped\n", err);
        g->rec_failed = true;
    }
    return;
malformed:
    if (g->malformed++ < 5)
        fprintf(stderr, "octgrab: malformed message skipped: %s\n", err);
}

static void summary(grab *g, double elapsed)
{
    /* images from an image area: a last column, lost (overwritten in shared memory) */
    bool shm = g->shm_msgs > 0;
    printf("\n%-20s %8s %8s %6s %9s %9s %9s %6s%s\n", "topic", "messages", "rate/s", "gaps",
           "p50_ms", "p99_ms", "max_ms", "saved", shm ? "   lost" : "");
    for (int i = 0; i < g->ntopics; i++) {
        topic_stats *t = &g->topics[i];
        double span = t->last_t - t->first_t;
        double rate = t->messages > 1 && span > 0 ? (double)(t->messages - 1) / span : 0;
        double p50 = 0, p99 = 0, mx = 0;
        if (t->nlat) {
            qsort(t->lat_ms, t->nlat, sizeof(double), cmp_double);
            p50 = t->lat_ms[(t->nlat - 1) / 2];
            p99 = t->lat_ms[(size_t)((double)(t->nlat - 1) * 0.99)];
            mx = t->lat_ms[t->nlat - 1];
        }
        printf("%-20s %8" PRIu64 " %8.1f %6" PRIu64 " %9.2f %9.2f %9.2f %6" PRIu64, t->name,
               t->messages, rate, t->gaps, p50, p99, mx, t->saved);
        if (shm)
            printf(" %6" PRIu64, t->lost);
        printf("\n");
    }
    char lost[96] = "";
    if (shm)
        snprintf(lost, sizeof lost, ", %" PRIu64 " lost (overwritten in shared memory)", g->lost);
    printf("total: %" PRIu64 " images, %" PRIu64 " status, %" PRIu64 " malformed%s in %.1f s%s\n",
           g->images, g->status_msgs, g->malformed, lost, elapsed,
           g->save_errors ? " (some saves failed)" : "");
}

/* A --topic names something octd publishes (SPEC 6, 10): its first part is
 * (a prefix of) a kind or "status", a second part a method or metric. */
static bool topic_known(const char *t)
{
    static const char *const kinds[] = {"bscan", "enface", "confocal", "xsec_h", "xsec_v",
                                        "volume", "slab_mean", "slab_max", "motion", "enface_reg",
                                        "confocal_reg", "slab_mean_reg",
                                        "registered", "average", "angio", "struct", "median",
                                        "sv", "decor", "ssada", "status", NULL};
    static const char *const methods[] = {"cfd", "msi", "cms", "struct", "median", "sv",
                                          "decor", "ssada", NULL};
    const char *slash = strchr(t, '/');
    size_t len = slash ? (size_t)(slash - t) : strlen(t);
    char kind[32];
    if (len >= sizeof kind)
        len = sizeof kind - 1;
    memcpy(kind, t, len);
    kind[len] = '\0';
    bool ok = false;
    for (int i = 0; kinds[i] && !ok; i++)
        ok = slash ? !strcmp(kinds[i], kind) : !strncmp(kinds[i], kind, len);
    if (!ok)
        return oct_cli_known("octgrab", "--topic", kind, kinds);
    if (!slash || !slash[1])
        return true;
    const char *m = slash + 1, *s2 = strchr(m, '/');
    size_t ml = s2 ? (size_t)(s2 - m) : strlen(m);
    char meth[32];
    if (ml >= sizeof meth)
        ml = sizeof meth - 1;
    memcpy(meth, m, ml);
    meth[ml] = '\0';
    for (int i = 0; methods[i]; i++)
        if (s2 ? !strcmp(methods[i], meth) : !strncmp(methods[i], meth, ml))
        {
            if (!s2 || !s2[1] || !strncmp(s2 + 1, "f32", strlen(s2 + 1)))
                return true;
            oct_cli_usage("octgrab", "--topic '%s': only /f32 may follow the method", t);
            return false;
        }
    return oct_cli_known("octgrab", "--topic method", meth, methods);
}

static bool parse_long(const char *opt, const char *s, long min, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < min) {
        fprintf(stderr, "octgrab: %s: '%s' is not an integer >= %ld\n", opt, s, min);
        return false;
    }
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"endpoint", required_argument, 0, 'e'}, {"topic", required_argument, 0, 't'},
        {"count", required_argument, 0, 'n'},    {"timeout", required_argument, 0, 'T'},
        {"output", required_argument, 0, 'o'},   {"save-max", required_argument, 0, 's'},
        {"quiet", no_argument, 0, 'q'},          {"help", no_argument, 0, 'h'},
        {"headers", no_argument, 0, 'H'},        {"record", required_argument, 0, 'r'},
        {0, 0, 0, 0}};
    const char *record = NULL;
    grab *g = calloc(1, sizeof *g);
    if (!g)
        return 2;
    g->endpoint = "tcp://127.0.0.1:5556";
    g->count = -1;
    g->save_max = -1;
    g->timeout_s = 0;
    int c = oct_cli_start("octgrab", argc, argv, NULL);
    if (c >= 0)
        return c;
    while ((c = getopt_long(argc, argv, "e:t:n:T:o:s:r:qHh", opts, NULL)) != -1) {
        switch (c) {
        case 'e': g->endpoint = optarg; break;
        case 't':
            if (g->nprefixes == MAX_PREFIXES) {
                fprintf(stderr, "octgrab: at most %d --topic\n", MAX_PREFIXES);
                return 64;
            }
            if (!topic_known(optarg))
                return OCT_EX_USAGE;
            g->prefixes[g->nprefixes++] = optarg;
            break;
        case 'n':
            if (!parse_long("--count", optarg, 1, &g->count))
                return 64;
            break;
        case 's':
            if (!parse_long("--save-max", optarg, 0, &g->save_max))
                return 64;
            break;
        case 'T': {
            char *end;
            g->timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(g->timeout_s > 0 && g->timeout_s < 1e6)) {
                fprintf(stderr, "octgrab: --timeout: '%s' is not a number of seconds\n", optarg);
                return 64;
            }
            break;
        }
        case 'o': g->outdir = optarg; break;
        case 'r': record = optarg; break;
        case 'q': g->quiet = true; break;
        case 'H': g->headers = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 64;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 64;
    }
    if (g->outdir && mkdir(g->outdir, 0775) != 0 && errno != EEXIST) {
        fprintf(stderr, "octgrab: --output %s: %s\n", g->outdir, strerror(errno));
        return 64;
    }
    if (record) {
        char err[512];
        if (!(g->rec = grab_rec_open(record, g->endpoint, err, sizeof err))) {
            fprintf(stderr, "octgrab: %s\n", err);
            free(g);
            return 64;
        }
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_SUB) : NULL;
    int linger = 0, rcvhwm = 100;
    if (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(sock, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm) != 0) {
        fprintf(stderr, "octgrab: zmq: %s\n", zmq_strerror(zmq_errno()));
        return 2;
    }
    if (g->nprefixes == 0)
        zmq_setsockopt(sock, ZMQ_SUBSCRIBE, "", 0);
    for (int i = 0; i < g->nprefixes; i++)
        zmq_setsockopt(sock, ZMQ_SUBSCRIBE, g->prefixes[i], strlen(g->prefixes[i]));
    if (zmq_connect(sock, g->endpoint) != 0) {
        fprintf(stderr, "octgrab: connect %s: %s\n", g->endpoint, zmq_strerror(zmq_errno()));
        zmq_close(sock);
        zmq_ctx_term(ctx);
        return 64;
    }
    double t0 = mono_s(), last_rx = t0;
    int ret = 0;
    zmq_msg_t parts[4];
    while (!interrupted && (g->count < 0 || g->images < (uint64_t)g->count)) {
        zmq_pollitem_t pi = {sock, 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&pi, 1, 100);
        if (r < 0) {
            if (zmq_errno() == EINTR)
                continue;
            fprintf(stderr, "octgrab: poll: %s\n", zmq_strerror(zmq_errno()));
            ret = 2;
            break;
        }
        if (r == 0) {
            if (g->timeout_s > 0 && mono_s() - last_rx > g->timeout_s) {
                fprintf(stderr, "octgrab: nothing received for %.1f s\n", g->timeout_s);
                if (g->count > 0)
                    ret = 1;
                break;
            }
            continue;
        }
        /* Receive every part (extra parts are drained and make it malformed). */
        int n = 0, more = 1;
        bool fail = false;
        while (more) {
            zmq_msg_t tmp;
            zmq_msg_t *m = n < 4 ? &parts[n] : &tmp;
            zmq_msg_init(m);
            if (zmq_msg_recv(m, sock, 0) < 0) {
                zmq_msg_close(m);
                fail = true;
                break;
            }
            more = zmq_msg_more(m);
            if (m == &tmp)
                zmq_msg_close(&tmp);
            n++;
        }
        if (!fail)
            handle(g, parts, n > 4 ? 5 : n);
        for (int i = 0; i < (n < 4 ? n : 4); i++)
            zmq_msg_close(&parts[i]);
        if (fail && zmq_errno() != EINTR) {
            fprintf(stderr, "octgrab: receive: %s\n", zmq_strerror(zmq_errno()));
            ret = 2;
            break;
        }
        last_rx = mono_s();
    }
    summary(g, mono_s() - t0);
    if (g->rec) {
        char err[512];
        unsigned long long w, sk;
        grab_rec_counts(g->rec, &w, &sk);
        if (!grab_rec_close(g->rec, err, sizeof err)) {
            fprintf(stderr, "octgrab: %s\n", err);
            ret = 2;
        } else {
            printf("recorded %llu images into %s (%llu left out: shape changed)\n", w, record, sk);
        }
        if (g->rec_failed)
            ret = 2;
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    for (int i = 0; i < g->ntopics; i++)
        free(g->topics[i].lat_ms);
    for (int i = 0; i < g->nareas; i++)
        oct_images_close(g->areas[i], false);
    free(g->shm_buf);
    free(g);
    return ret;
}
