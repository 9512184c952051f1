/* metrics.c - see metrics.h.
 *
 * The latency histogram observes last_latency_ns (slot t_acq_ns -> last
 * message sent, SPEC 9.3) once per frame-loop iteration that processed a
 * frame: every frame on the CPU path, the newest one of an iteration on the
 * pipelined GPU path.  Rates are per second over the last whole second.
 */
#include "metrics.h"

#include <civetweb.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octd.h"

/* civetweb's worker threads and the static TLS of the CUDA libraries.
 * Debian's libcivetweb asks for 100 KiB thread stacks
 * (pthread_attr_setstacksize, USE_STACK_SIZE); glibc carves every loaded
 * library's static TLS out of a new thread's stack, and cuBLASLt alone has
 * 94 KiB of it, so in the CUDA build pthread_create fails with EINVAL and
 * the server cannot start.  octd interposes the call and raises requests
 * below 1 MiB to 1 MiB: only ever larger stacks, for any caller. */
#define STACK_FLOOR (1u << 20)
int pthread_attr_setstacksize(pthread_attr_t *attr, size_t size)
{
    static int (*real)(pthread_attr_t *, size_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_attr_setstacksize");
    if (!real)
        return ENOSYS;
    return real(attr, size < STACK_FLOOR ? STACK_FLOOR : size);
}

static const double BUCKETS[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                 0.05,   0.1,   0.2,   0.5,   1.0,  2.0};
#define NB (sizeof BUCKETS / sizeof BUCKETS[0])

struct octd_metrics {
    struct mg_context *ctx;
    oct_status *st;            /* read from the server's thread (a reader like any other) */
    pthread_mutex_t lock;      /* guards everything below */
    uint64_t bucket[NB + 1];   /* last: +Inf */
    uint64_t count;
    double sum;
    double rate_seen, rate_processed, rate_published;
    /* main thread only */
    uint64_t last_processed, rate_t0, r_seen, r_proc, r_pub;
};

static const char *const STATE_NAMES[] = {"starting", "online", "review", "error", "stopping"};

static void counter(struct mg_connection *c, const char *name, const char *help, uint64_t v)
{
    mg_printf(c, "# HELP octd_%s %s\n# TYPE octd_%s counter\noctd_%s %" PRIu64 "\n", name, help,
              name, name, v);
}

static void gauge(struct mg_connection *c, const char *name, const char *help, double v)
{
    mg_printf(c, "# HELP octd_%s %s\n# TYPE octd_%s gauge\noctd_%s %.9g\n", name, help, name, name,
              v);
}

/* Label values: the status block's text, without what would break the format. */
static void label(char *dst, size_t len, const char *src, size_t src_len)
{
    size_t o = 0;
    for (size_t i = 0; i < src_len && src[i] && o + 1 < len; i++)
        dst[o++] = (src[i] == '"' || src[i] == '\\' || src[i] == '\n') ? '_' : src[i];
    dst[o] = '\0';
}

static int handle_metrics(struct mg_connection *c, void *arg)
{
    octd_metrics *m = arg;
    oct_status_block b;
    if (oct_status_read(m->st, &b) != OCT_OK) {
        mg_send_http_error(c, 503, "status block busy");
        return 503;
    }
    pthread_mutex_lock(&m->lock);
    uint64_t bucket[NB + 1], count = m->count;
    double sum = m->sum, rs = m->rate_seen, rp = m->rate_processed, rb = m->rate_published;
    memcpy(bucket, m->bucket, sizeof bucket);
    pthread_mutex_unlock(&m->lock);

    mg_printf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                 "Cache-Control: no-store\r\nConnection: close\r\n\r\n");
    char be[64], dev[200];
    label(be, sizeof be, b.backend, sizeof b.backend);
    label(dev, sizeof dev, b.device, sizeof b.device);
    mg_printf(c, "# HELP octd_info octd's version, backend and device.\n# TYPE octd_info gauge\n"
                 "octd_info{version=\"%s\",backend=\"%s\",device=\"%s\"} 1\n",
              OCT_VERSION, be, dev);
    mg_printf(c, "# HELP octd_state octd's state (1 for the current one).\n# TYPE octd_state gauge\n");
    for (uint32_t i = 0; i < 5; i++)
        mg_printf(c, "octd_state{state=\"%s\"} %d\n", STATE_NAMES[i], b.state == i);
    gauge(c, "ring_attached", "1 when the frame ring is attached (see octctl status ring_message).",
          b.ring_state == OCT_ATTACH_OK);
    gauge(c, "warnings", "Current warnings (octctl status warnings=).", b.warning_count);
    counter(c, "frames_seen_total", "Ring frames seen (= processed + skipped + torn).", b.frames_seen);
    counter(c, "frames_processed_total", "Ring frames processed.", b.frames_processed);
    counter(c, "frames_skipped_total", "Ring frames skipped (policy latest, lapped, review, no buffer).",
            b.frames_skipped);
    counter(c, "frames_torn_total", "Ring frames overwritten while read.", b.frames_torn);
    counter(c, "frames_lost_total", "Ring frames lapped before octd read them (part of skipped).",
            b.frames_lost);
    counter(c, "frames_reprocessed_total", "Re-processings of the kept frame in review.",
            b.frames_reprocessed);
    counter(c, "ring_reattaches_total", "Re-attachments to a restarted ring.", b.ring_reattaches);
    counter(c, "images_published_total", "Image messages sent.", b.images_published);
    counter(c, "publish_drops_total", "Images dropped (no buffer, subscriber queue full).",
            b.publish_drops);
    gauge(c, "control_generation", "Control generation in use.", (double)b.applied_gen);
    gauge(c, "frames_seen_per_second", "Ring frames seen per second (last second).", rs);
    gauge(c, "frames_processed_per_second", "Ring frames processed per second (last second).", rp);
    gauge(c, "images_published_per_second", "Images published per second (last second).", rb);
    gauge(c, "last_latency_seconds", "Acquisition (t_acq_ns) to the last message sent, last frame.",
          (double)b.last_latency_ns / 1e9);
    mg_printf(c, "# HELP octd_latency_seconds Acquisition (t_acq_ns) to the last message sent.\n"
                 "# TYPE octd_latency_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t i = 0; i < NB; i++) {
        cum += bucket[i];
        mg_printf(c, "octd_latency_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", BUCKETS[i], cum);
    }
    cum += bucket[NB];
    mg_printf(c, "octd_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
    mg_printf(c, "octd_latency_seconds_sum %.9g\noctd_latency_seconds_count %" PRIu64 "\n", sum,
              count);
    return 200;
}

oct_err octd_metrics_start(octd *d, oct_error *e)
{
    if (!d->cfg.metrics_listen[0])
        return OCT_OK;
    octd_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return oct_error_set(e, OCT_ENOMEM, "metrics: out of memory");
    pthread_mutex_init(&m->lock, NULL);
    m->st = d->st;
    mg_init_library(0);
    const char *opts[] = {"listening_ports", d->cfg.metrics_listen, "num_threads", "2",
                          "enable_directory_listing", "no", NULL};
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof cb);
    struct mg_init_data init = {&cb, m, opts};
    struct mg_error_data err;
    char msg[256] = "";
    memset(&err, 0, sizeof err);
    err.text = msg;
    err.text_buffer_size = sizeof msg;
    m->ctx = mg_start2(&init, &err);
    if (!m->ctx) {
        pthread_mutex_destroy(&m->lock);
        free(m);
        mg_exit_library();
        return oct_error_set(e, OCT_EIO, "%s: [metrics] listen: cannot serve on %s: %s",
                             d->cfg.source_path, d->cfg.metrics_listen,
                             msg[0] ? msg : "civetweb failed to start");
    }
    mg_set_request_handler(m->ctx, "/metrics$", handle_metrics, m);
    d->metrics = m;
    if (strncmp(d->cfg.metrics_listen, "127.", 4) != 0)
        octd_log(LOG_WARNING, "metrics: listening on %s, beyond loopback (no authentication)",
                 d->cfg.metrics_listen);
    octd_log(LOG_INFO, "metrics: http://%s/metrics", d->cfg.metrics_listen);
    return OCT_OK;
}

void octd_metrics_tick(octd *d, uint64_t now)
{
    octd_metrics *m = d->metrics;
    if (!m)
        return;
    bool newframe = d->processed != m->last_processed && d->last_latency;
    bool second = now - m->rate_t0 >= 1000000000ull;
    if (!newframe && !second)
        return;
    pthread_mutex_lock(&m->lock);
    if (newframe) {
        double s = (double)d->last_latency / 1e9;
        size_t i = 0;
        while (i < NB && s > BUCKETS[i])
            i++;
        m->bucket[i]++;
        m->count++;
        m->sum += s;
    }
    if (second) {
        if (m->rate_t0) {
            double dt = (double)(now - m->rate_t0) / 1e9;
            m->rate_seen = (double)(d->seen - m->r_seen) / dt;
            m->rate_processed = (double)(d->processed - m->r_proc) / dt;
            m->rate_published = (double)(d->published - m->r_pub) / dt;
        }
        m->rate_t0 = now;
        m->r_seen = d->seen;
        m->r_proc = d->processed;
        m->r_pub = d->published;
    }
    pthread_mutex_unlock(&m->lock);
    m->last_processed = d->processed;
}

void octd_metrics_stop(octd *d)
{
    octd_metrics *m = d->metrics;
    if (!m)
        return;
    mg_stop(m->ctx); /* joins the server's threads */
    mg_exit_library();
    pthread_mutex_destroy(&m->lock);
    free(m);
    d->metrics = NULL;
}
