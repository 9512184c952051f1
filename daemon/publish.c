/* publish.c - see publish.h.
 *
 * A PUB socket drops, per subscriber, what does not fit under ZMQ_SNDHWM, so
 * a slow subscriber only loses its own messages (visible to it as gaps in
 * image_seq) and never slows octd.  publish_drops counts what octd itself
 * could not hand to ZeroMQ (EAGAIN or another error on a DONTWAIT send).
 *
 * Large payloads are sent zero-copy: the message points into the slot's
 * oct_products and holds a reference on the slot; ZeroMQ's free callback
 * drops it once every subscriber's copy is gone, and the engine only ever
 * writes into slots nobody holds (the pool is frames.c's).  A copy_only
 * slot's images are copied into the message (once: ZeroMQ shares one
 * message among its subscribers), so no subscriber can hold that slot.
 * With [publish] copies = publisher (the default in r4) the publisher
 * thread copies every pooled image into a buffer it keeps for reuse before
 * the fan-out, so subscribers' queues hold those copies and the pool comes
 * back at once (issue 21: stalled and churning subscribers held all of it).
 * copies = auto (r5) decides per image in the publisher thread: zero-copy
 * while at most half of the image's pool is held (its octd_pool_gauge), a
 * copy once more is (stalled or churning subscribers' queues hold it), so
 * a quiet run copies nothing and a crowd still cannot drain the pool.
 *
 * Fan-out runs off the frame loop (issue 21): the frame loop's socket has
 * one peer, an XSUB bound at a private inproc endpoint, and a publisher
 * thread forwards from that XSUB to an XPUB bound at the configured
 * endpoints.  Connection churn and the per-subscriber copies of each
 * message cost that thread and the I/O threads, not the frame loop.
 *
 * Subscriptions stop at the publisher thread: the XSUB subscribes to
 * everything once, and the thread keeps the XPUB's subscription messages
 * (non-verbose: the first subscriber of a prefix and the last one leaving
 * it, so churn of subscribers to a prefix others hold costs nothing) as a
 * set of prefixes, and from it one atomic "wanted" flag per topic the frame
 * loop publishes.  The frame loop reads that flag before it builds a
 * message, so a topic nobody wants costs it one atomic load, and no
 * subscribe/unsubscribe ever reaches its socket as a ZeroMQ command.  Topics
 * are known in advance (kind/method[/f32] and status, by index) or
 * registered by the frame loop on first use (live registration's), the
 * thread computing their flag when it next wakes (until then: wanted).
 *
 * inproc passes zmq_msg_t by value and XPUB shares one message among its
 * pipes, so a zero-copy message stays zero-copy and slot_free_cb still runs
 * once the last subscriber's copy is gone.  The frame loop's socket never
 * blocks: its HWM and the XSUB's receive HWM are the frame-counted HWM of
 * the endpoints' XPUB, and with ZMQ_XPUB_NODROP a DONTWAIT send past it
 * fails with EAGAIN, so what the publisher thread could not take in time is
 * counted in publish_drops instead of vanishing silently for every
 * subscriber.  (The pipe's HWM counts whole messages, so a message whose
 * first part was taken is taken whole.)
 */
#include "publish.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "copy_cache.h"
#include "json.h"
#include "oct_control_keys.h"
#include "sys.h"

/* Payloads below this are copied: a small copy is cheaper than the
 * bookkeeping of a zero-copy message. */
#define ZERO_COPY_MIN 4096

/* I/O threads of the publisher's context: the endpoint side's connection
 * handling and per-subscriber writes spread over them, one per 4 cores
 * within these bounds.  Each connection lives on one I/O thread, and a
 * fresh subscriber costs its thread a handshake and a burst of writes
 * (its socket buffer and receive queue fill before it may vanish): more
 * threads on a large host keep a churning crowd from delaying the
 * subscribers that read; on a small one, fewer threads compete with the
 * frame loop. */
#define PUB_IO_THREADS_MIN 2
#define PUB_IO_THREADS_MAX 4

/* Topics with a "wanted" flag: kind/method[/f32] by index, then "status",
 * then up to EXTRA_TOPICS registered on first use (live registration's). */
#define PRODUCT_TOPICS (OCT_METHOD_COUNT * OCT_KIND_COUNT * 2)
#define STATUS_TOPIC PRODUCT_TOPICS
#define EXTRA_TOPICS 64
#define MAX_TOPICS (PRODUCT_TOPICS + 1 + EXTRA_TOPICS)
#define TOPIC_CAP 64 /* a longer topic is never registered: always sent */
/* Distinct subscribed prefixes the thread keeps; past it (hostile peers)
 * every topic counts as wanted until they leave (the XPUB still filters). */
#define MAX_PREFIXES 4096
/* Messages forwarded per wake-up before the thread looks at its other
 * sockets again (subscriptions, control). */
#define FORWARD_BATCH 256
/* [publish] copies = publisher: the first byte of a topic on the inproc
 * link that asks the publisher thread to copy the message's payload (no
 * topic begins with it; it never reaches a subscriber), and the largest
 * payload it copies (a volume product of tens of MB stays zero-copy: one
 * thread's memcpy would not keep up with a GPU's volume rate). */
#define COPY_FLAG '\x01'
#define COPY_MAX (8u << 20)
/* copies = auto: the topic on the inproc link is COPY_AUTO, then the
 * address of the image's pool gauge (AUTO_PREFIX bytes in all), then the
 * topic; the publisher thread reads the gauge as it forwards the image. */
#define COPY_AUTO '\x02'
#define AUTO_PREFIX (1 + sizeof(octd_pool_gauge *))

typedef struct pub_topic {
    char name[TOPIC_CAP];
    size_t len;
    atomic_bool wanted; /* written by the publisher thread, read by the frame loop */
} pub_topic;

typedef struct pub_prefix {
    uint8_t *bytes;
    size_t len;
} pub_prefix;

struct octd_pub {
    void *ctx;
    void *sock;  /* frame loop's XPUB (a PUB that can read its one subscription), to the inproc XSUB */
    void *xsub;  /* proxy thread's: bound at the inproc endpoint */
    void *xpub;  /* proxy thread's: bound at the configured endpoints */
    void *ctl;   /* frame loop's end of the proxy's control pair */
    void *ctl_peer; /* proxy thread's end */
    pthread_t thread;
    bool thread_started;
    /* image_seq per topic: [method][kind][f32] */
    uint64_t image_seq[OCT_METHOD_COUNT][OCT_KIND_COUNT][2];
    float spacing_um[3]; /* geometry.spacing_um {depth, ascan, line}; 0 = not given */
    /* topics: the frame loop fills an entry, then publishes ntopics (release) */
    pub_topic topic[MAX_TOPICS];
    atomic_int ntopics;
    octd_pub_counts counts; /* the frame loop's */
    /* the publisher thread's own */
    int known;                     /* topics whose flag it computed */
    uint32_t holders[MAX_TOPICS];  /* subscribed prefixes of each topic */
    pub_prefix *prefix;            /* the subscribed prefixes (a set: XPUB is not verbose) */
    int nprefix;
    uint64_t untracked;            /* subscriptions past MAX_PREFIXES */
    atomic_uint_fast64_t sub_events; /* subscription messages handled */
    /* [publish] nice and cpus: what the publisher thread applies to itself */
    int nice;
    bool pin;
    cpu_set_t cpus;
    int copies;          /* [publish] copies: OCT_PUB_COPIES_* */
    /* [publish] stats: what each side did since the last line */
    int stats_s;
    atomic_uint_fast64_t st_frames, st_send_ns, st_send_max_ns, st_fl_copies, st_flagged;
    uint64_t st_fwd, st_busy_ns, st_pub_copies, st_pub_copy_ns; /* the publisher thread's */
    uint64_t st_pub_zc;
    /* since the start (octd_pub_get_counts): pooled images the publisher
     * thread copied / forwarded zero-copy, images the frame loop copied */
    atomic_uint_fast64_t n_pub_copies, n_pub_zc, n_fl_copies;
    uint64_t n_behind; /* the frame loop's: copy-only images dropped while behind */
    atomic_uint_fast64_t st_behind;
    copy_cache cache;
    /* [publish] shm_endpoint: header-only messages for local subscribers
     * that read the images out of the image areas; a context of its own, so
     * that a crowd on the endpoints above shares no I/O thread with them */
    void *shm_ctx, *shm_sock;
};

void octd_pub_set_spacing(octd_pub *p, const float spacing_um[3])
{
    memcpy(p->spacing_um, spacing_um, sizeof p->spacing_um);
}

static int product_topic(int method, int kind, int f32) { return (method * OCT_KIND_COUNT + kind) * 2 + f32; }

static bool is_prefix(const uint8_t *pre, size_t n, const pub_topic *t)
{
    return n <= t->len && memcmp(pre, t->name, n) == 0;
}

/* ---- the publisher thread's subscription state ---- */
static void set_wanted(octd_pub *p, int i)
{
    atomic_store_explicit(&p->topic[i].wanted, p->holders[i] > 0 || p->untracked > 0,
                          memory_order_release);
}

/* Computes the flags of topics the frame loop registered since last time. */
static void learn_topics(octd_pub *p)
{
    int n = atomic_load_explicit(&p->ntopics, memory_order_acquire);
    for (; p->known < n; p->known++) {
        int i = p->known;
        p->holders[i] = 0;
        for (int k = 0; k < p->nprefix; k++)
            p->holders[i] += is_prefix(p->prefix[k].bytes, p->prefix[k].len, &p->topic[i]);
        set_wanted(p, i);
    }
}

/* One message from the XPUB: byte 1 (subscribe) or 0 (unsubscribe) and the
 * prefix; anything else is a subscriber's message upstream, ignored. */
static void on_subscription(octd_pub *p, const uint8_t *d, size_t n)
{
    if (n == 0 || d[0] > 1)
        return;
    bool sub = d[0] == 1;
    d++, n--;
    atomic_fetch_add_explicit(&p->sub_events, 1, memory_order_relaxed);
    int k = 0;
    while (k < p->nprefix && !(p->prefix[k].len == n && memcmp(p->prefix[k].bytes, d, n) == 0))
        k++;
    bool found = k < p->nprefix;
    if (sub ? found : !found) {
        /* a repeat (none expected from a non-verbose XPUB), or the end of
         * one kept past MAX_PREFIXES */
        if (!sub && p->untracked > 0 && --p->untracked == 0)
            for (int i = 0; i < p->known; i++)
                set_wanted(p, i);
        return;
    }
    if (sub) {
        uint8_t *copy = p->nprefix < MAX_PREFIXES ? malloc(n ? n : 1) : NULL;
        if (!copy) {
            if (p->untracked++ == 0) {
                octd_log(LOG_WARNING, "publisher: more than %d subscribed prefixes: "
                         "every topic is built until they go", MAX_PREFIXES);
                for (int i = 0; i < p->known; i++)
                    set_wanted(p, i);
            }
            return;
        }
        if (p->nprefix % 64 == 0) {
            pub_prefix *grown = realloc(p->prefix, (size_t)(p->nprefix + 64) * sizeof *grown);
            if (!grown) {
                free(copy);
                p->untracked++;
                for (int i = 0; i < p->known; i++)
                    set_wanted(p, i);
                return;
            }
            p->prefix = grown;
        }
        memcpy(copy, d, n);
        p->prefix[p->nprefix++] = (pub_prefix){copy, n};
    } else {
        free(p->prefix[k].bytes);
        p->prefix[k] = p->prefix[--p->nprefix];
    }
    for (int i = 0; i < p->known; i++) {
        if (!is_prefix(d, n, &p->topic[i]))
            continue;
        p->holders[i] += sub ? 1 : -1;
        set_wanted(p, i);
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The frame loop's copy of a copy-only buffer's image (copies = publisher:
 * the publisher thread lags by a whole pool), into a kept buffer too, so
 * that the frame loop's copy does not page-fault either. */
static int send_kept(octd_pub *p, const void *data, size_t len, int flags)
{
    copy_buf *b = copy_cache_get(&p->cache, len);
    if (!b)
        return zmq_send(p->sock, data, len, flags) < 0 ? -1 : 0;
    copy_cache_into(b, data, len);
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, b->data, len, copy_cache_put_cb, b) != 0) {
        copy_cache_put_cb(b->data, b);
        return -1;
    }
    if (zmq_msg_send(&msg, p->sock, flags) < 0) {
        int err = zmq_errno();
        zmq_msg_close(&msg); /* returns the buffer */
        errno = err;
        return -1;
    }
    return 0;
}

/* Replaces *msg (a payload in the frame loop's buffer) by a copy in a kept
 * buffer; false (msg unchanged) when out of memory. */
static bool msg_copy_kept(octd_pub *p, zmq_msg_t *msg)
{
    size_t n = zmq_msg_size(msg);
    copy_buf *b = copy_cache_get(&p->cache, n);
    if (!b)
        return false;
    copy_cache_into(b, zmq_msg_data(msg), n);
    zmq_msg_t c;
    if (zmq_msg_init_data(&c, b->data, n, copy_cache_put_cb, b) != 0) {
        copy_cache_put_cb(b->data, b);
        return false;
    }
    zmq_msg_move(msg, &c);
    zmq_msg_close(&c);
    return true;
}

/* Replaces *msg by a copy of its bytes from offset `from` (ZeroMQ's own
 * buffer: whatever it pointed into, a pooled product buffer, is released
 * when *msg closes).  False (msg unchanged) when out of memory. */
static bool msg_copy(zmq_msg_t *msg, size_t from)
{
    size_t n = zmq_msg_size(msg) - from;
    zmq_msg_t c;
    if (zmq_msg_init_size(&c, n) != 0)
        return false;
    memcpy(zmq_msg_data(&c), (const char *)zmq_msg_data(msg) + from, n);
    zmq_msg_move(msg, &c); /* closes *msg's content first */
    zmq_msg_close(&c);
    return true;
}

/* Moves one whole message (all its parts) from the XSUB to the XPUB; false
 * when none was waiting.  The XPUB drops per subscriber at its HWM and
 * never blocks.  A topic flagged COPY_FLAG: the flag is dropped and the
 * payload copied, so that no subscriber's queue holds the frame loop's
 * buffer. */
static bool forward_one(octd_pub *p)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, p->xsub, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return false;
    }
    p->st_fwd++;
    const char *t0p = zmq_msg_data(&msg);
    size_t t0n = zmq_msg_size(&msg);
    bool copy = t0n > 0 && t0p[0] == COPY_FLAG;
    size_t strip = copy ? 1 : 0;
    if (t0n >= AUTO_PREFIX && t0p[0] == COPY_AUTO) {
        /* copies = auto: copy only while the image's pool runs low */
        octd_pool_gauge *g;
        memcpy(&g, t0p + 1, sizeof g);
        copy = octd_pool_low(g);
        strip = AUTO_PREFIX;
    }
    bool flagged = strip > 0;
    for (bool first = true;; first = false) {
        int more = zmq_msg_more(&msg); /* a copy has no MORE flag: read first */
        if (flagged && first && !msg_copy(&msg, strip))
            copy = false; /* out of memory: the subscribers see a flagged topic */
        if (flagged && !more && zmq_msg_size(&msg) >= ZERO_COPY_MIN) {
            if (copy) {
                uint64_t t0 = p->stats_s ? mono_ns() : 0;
                if (msg_copy_kept(p, &msg)) {
                    p->st_pub_copies++;
                    atomic_fetch_add_explicit(&p->n_pub_copies, 1, memory_order_relaxed);
                }
                if (p->stats_s)
                    p->st_pub_copy_ns += mono_ns() - t0;
            } else {
                p->st_pub_zc++;
                atomic_fetch_add_explicit(&p->n_pub_zc, 1, memory_order_relaxed);
            }
        }
        if (zmq_msg_send(&msg, p->xpub, more ? ZMQ_SNDMORE : 0) < 0)
            zmq_msg_close(&msg);
        if (!more)
            return true;
        zmq_msg_init(&msg);
        /* the parts of a message arrive together (atomic in the pipe) */
        if (zmq_msg_recv(&msg, p->xsub, 0) < 0) {
            zmq_msg_close(&msg);
            return true;
        }
    }
}

static uint64_t stat_take(atomic_uint_fast64_t *a) { return atomic_exchange_explicit(a, 0, memory_order_relaxed); }

/* [publish] stats: one line of what both sides did since the last one. */
static void log_stats(octd_pub *p, double secs)
{
    uint64_t frames = stat_take(&p->st_frames), send_ns = stat_take(&p->st_send_ns);
    uint64_t send_max = stat_take(&p->st_send_max_ns), fl_copies = stat_take(&p->st_fl_copies);
    uint64_t flagged = stat_take(&p->st_flagged), behind = stat_take(&p->st_behind);
    pthread_mutex_lock(&p->cache.mu);
    uint64_t made = p->cache.made, freed = p->cache.freed;
    double idle = (double)p->cache.idle_bytes;
    pthread_mutex_unlock(&p->cache.mu);
    /* t: the realtime clock's seconds mod 10,000, to line up with a benchmark's phases */
    octd_log(LOG_INFO, "publisher stats: t %.1f, %.1f s: frame loop %" PRIu64 " frames, send %.1f us "
             "mean %.1f max, %" PRIu64 " images copied by it, %" PRIu64 " dropped while behind, %"
             PRIu64 " handed to the "
             "publisher to copy (auto: or not); publisher thread %" PRIu64 " messages, busy %.0f %%, %" PRIu64
             " copies %.1f us mean, %" PRIu64 " pooled images zero-copy, copy buffers made %"
             PRIu64 " freed %" PRIu64 " (in all), %.0f MB idle; %" PRIu64 " subscription changes in all",
             (double)(oct_time_realtime_ns() / 100000000ull % 100000) / 10, secs, frames,
             frames ? send_ns / 1e3 / (double)frames : 0, send_max / 1e3, fl_copies, behind, flagged, p->st_fwd, 100.0 * (double)p->st_busy_ns / (secs * 1e9), p->st_pub_copies,
             p->st_pub_copies ? p->st_pub_copy_ns / 1e3 / (double)p->st_pub_copies : 0,
             p->st_pub_zc, made, freed, idle / 1e6, (uint64_t)atomic_load(&p->sub_events));
    p->st_fwd = p->st_busy_ns = p->st_pub_copies = p->st_pub_copy_ns = p->st_pub_zc = 0;
}

/* The control pair's commands: TERMINATE, PAUSE, RESUME (the tests' way to
 * make the thread lag).  -1: none waiting, 1: terminate, 0: handled. */
static int on_control(void *ctl, bool *paused)
{
    char cmd[16];
    int n = zmq_recv(ctl, cmd, sizeof cmd, ZMQ_DONTWAIT);
    if (n < 0)
        return -1;
    if (n == 9 && memcmp(cmd, "TERMINATE", 9) == 0)
        return 1;
    if (n == 5 && memcmp(cmd, "PAUSE", 5) == 0)
        *paused = true;
    else if (n == 6 && memcmp(cmd, "RESUME", 6) == 0)
        *paused = false;
    return 0;
}

/* Makes the calling thread `by` nicer (Linux: nice is per thread, and
 * threads it starts inherit it); raising one's nice needs no privilege. */
static int thread_nicer(int by)
{
    id_t tid = (id_t)gettid();
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, tid);
    if (cur == -1 && errno != 0)
        return -1;
    return setpriority(PRIO_PROCESS, tid, cur + by > 19 ? 19 : cur + by);
}

static void *proxy_main(void *arg)
{
    octd_pub *p = arg;
    pthread_setname_np(pthread_self(), "octd-publish"); /* top -H, /proc: its own CPU */
    if (p->nice > 0 && thread_nicer(p->nice) != 0)
        octd_log(LOG_WARNING, "publisher thread: [publish] nice = %d: %s", p->nice, strerror(errno));
    if (p->pin && pthread_setaffinity_np(pthread_self(), sizeof p->cpus, &p->cpus) != 0)
        octd_log(LOG_WARNING, "publisher thread: [publish] cpus: cannot pin it");
    bool paused = false, busy = false;
    uint64_t stats_ns = (uint64_t)p->stats_s * 1000000000ull, last = mono_ns(), woke = last;
    uint64_t trimmed = last;
    for (;;) {
        /* The thread sleeps in zmq_poll only after a round that drained the
         * inproc link: a steady stream costs no poll per batch. */
        uint64_t now = mono_ns();
        p->st_busy_ns += now - woke;
        woke = now;
        if (now - trimmed >= 1000000000ull) {
            copy_cache_trim(&p->cache);
            trimmed = now;
        }
        if (stats_ns && now - last >= stats_ns) {
            log_stats(p, (double)(now - last) / 1e9);
            last = now;
        }
        if (!busy) {
            zmq_pollitem_t items[3] = {{p->ctl_peer, 0, ZMQ_POLLIN, 0},
                                       {p->xpub, 0, ZMQ_POLLIN, 0},
                                       {p->xsub, 0, ZMQ_POLLIN, 0}};
            int rc = zmq_poll(items, paused ? 2 : 3, 1000); /* the trim: once a second */
            woke = mono_ns();
            if (rc < 0) {
                if (zmq_errno() == EINTR)
                    continue;
                if (zmq_errno() != ETERM)
                    octd_log(LOG_ERR, "publisher thread: zmq_poll: %s", zmq_strerror(zmq_errno()));
                break;
            }
        }
        int c;
        while ((c = on_control(p->ctl_peer, &paused)) == 0)
            ;
        if (c == 1)
            break;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        while (zmq_msg_recv(&msg, p->xpub, ZMQ_DONTWAIT) >= 0) {
            on_subscription(p, zmq_msg_data(&msg), zmq_msg_size(&msg));
            zmq_msg_close(&msg);
            zmq_msg_init(&msg);
        }
        zmq_msg_close(&msg);
        learn_topics(p); /* a new topic's first message is what woke us */
        int n = 0;
        while (!paused && n < FORWARD_BATCH && forward_one(p))
            n++;
        busy = n == FORWARD_BATCH;
    }
    /* Sockets are closed by the thread that used them last. */
    zmq_close(p->xsub);
    zmq_close(p->xpub);
    zmq_close(p->ctl_peer);
    p->xsub = p->xpub = p->ctl_peer = NULL;
    return NULL;
}

static void *new_socket(octd_pub *p, int type, const char *what, int sndhwm, int rcvhwm,
                        oct_error *e)
{
    void *s = zmq_socket(p->ctx, type);
    int linger = 0;
    if (!s) {
        oct_error_set(e, OCT_EIO, "zmq_socket(%s): %s", what, zmq_strerror(zmq_errno()));
        return NULL;
    }
    if (zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        (sndhwm && zmq_setsockopt(s, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm) != 0) ||
        (rcvhwm && zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm) != 0)) {
        oct_error_set(e, OCT_EIO, "zmq_setsockopt(%s): %s", what, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

typedef struct first_socket {
    octd_pub *p;
    int hwm, nice;
    void *sock;    /* out: the endpoints' XPUB */
    int nice_err;  /* out: errno of a refused nice */
    oct_error e;
} first_socket;

static void *first_socket_main(void *arg)
{
    first_socket *f = arg;
    if (f->nice > 0 && thread_nicer(f->nice) != 0)
        f->nice_err = errno;
    f->sock = new_socket(f->p, ZMQ_XPUB, "XPUB", f->hwm, 0, &f->e);
    return NULL;
}

/* [publish] cpus: ZeroMQ's threads (through the context, before its first
 * socket) and the publisher thread (itself, when it starts). */
static oct_err pin_cpus(octd_pub *p, const oct_daemon_config *cfg, oct_error *e)
{
    int n;
    cpu_set_t allowed, both;
    if (octd_cpulist_parse(cfg->pub_cpus, "[publish] cpus", &p->cpus, &n, e) != OCT_OK)
        return OCT_EINVAL;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        CPU_AND(&both, &p->cpus, &allowed);
        for (int c = 0; c < CPU_SETSIZE && CPU_COUNT(&both) != n; c++)
            if (CPU_ISSET(c, &p->cpus) && !CPU_ISSET(c, &allowed))
                return oct_error_set(e, OCT_EINVAL, "%s: [publish] cpus = %s: CPU %d is not "
                                     "one octd may run on", cfg->source_path, cfg->pub_cpus, c);
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &p->cpus) && zmq_ctx_set(p->ctx, ZMQ_THREAD_AFFINITY_CPU_ADD, c) != 0)
            return oct_error_set(e, OCT_EIO, "[publish] cpus: zmq_ctx_set(THREAD_AFFINITY_CPU_ADD, "
                                 "%d): %s", c, zmq_strerror(zmq_errno()));
    p->pin = true;
    return OCT_OK;
}

/* The header-only PUB socket of [publish] shm_endpoint.  The frame loop
 * sends on it directly (a few hundred bytes an image, DONTWAIT): a PUB
 * drops per subscriber at its HWM, and its subscribers are local readers. */
static oct_err shm_socket(octd_pub *p, const oct_daemon_config *cfg, int hwm, oct_error *e)
{
    if (!(p->shm_ctx = zmq_ctx_new()))
        return oct_error_set(e, OCT_EIO, "[publish] shm_endpoint: zmq_ctx_new: %s",
                             zmq_strerror(zmq_errno()));
    zmq_ctx_set(p->shm_ctx, ZMQ_IO_THREADS, 1);
    int linger = 0;
    if (!(p->shm_sock = zmq_socket(p->shm_ctx, ZMQ_PUB)) ||
        zmq_setsockopt(p->shm_sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(p->shm_sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0)
        return oct_error_set(e, OCT_EIO, "[publish] shm_endpoint: zmq_socket: %s",
                             zmq_strerror(zmq_errno()));
    if (zmq_bind(p->shm_sock, cfg->pub_shm_endpoint) != 0)
        return oct_error_set(e, OCT_EIO, "%s: [publish] shm_endpoint: cannot bind '%s': %s",
                             cfg->source_path, cfg->pub_shm_endpoint, zmq_strerror(zmq_errno()));
    return OCT_OK;
}

oct_err octd_pub_create(octd_pub **out, const oct_daemon_config *cfg, oct_error *e)
{
    *out = NULL;
    octd_pub *p = calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(e, OCT_ENOMEM, "publisher: out of memory");
    copy_cache_init(&p->cache);
    p->ctx = zmq_ctx_new();
    if (!p->ctx) {
        pthread_mutex_destroy(&p->cache.mu);
        free(p);
        return oct_error_set(e, OCT_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    }
    /* ZeroMQ's threads get no priority through the context: with
     * SCHED_OTHER, ZMQ_THREAD_PRIORITY makes libzmq 4.3 call nice(-20) and
     * abort on EPERM; [publish] nice is applied as below instead. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int io = cfg->pub_io_threads > 0             ? cfg->pub_io_threads
             : ncpu / 4 < PUB_IO_THREADS_MIN     ? PUB_IO_THREADS_MIN
             : ncpu / 4 > PUB_IO_THREADS_MAX     ? PUB_IO_THREADS_MAX
                                                 : (int)(ncpu / 4);
    zmq_ctx_set(p->ctx, ZMQ_IO_THREADS, io); /* before the first socket */
    oct_err bad = OCT_EIO;
    if (cfg->pub_cpus[0] && (bad = pin_cpus(p, cfg, e)) != OCT_OK)
        goto fail;
    bad = OCT_EIO;
    p->nice = cfg->pub_nice;
    p->copies = cfg->pub_copies;
    p->stats_s = cfg->pub_stats_s;
    /* [publish] sndhwm counts frames: one frame is a burst of up to
     * methods x kinds x (u8, f32) messages sent back to back, and a
     * per-message HWM of 4 would drop most of every burst even for a fast
     * subscriber.  (+1: the status message.)  The HWM is the largest burst,
     * set once before bind: libzmq 4.3 crashes its I/O thread when ZMQ_SNDHWM
     * changes on a bound socket with connected peers (seen in e2e_issue7
     * when the methods changed), so it does not follow the frames' size.
     * Every hop gets it: the frame loop's socket drops at it rather than
     * wait for the proxy thread, and XPUB drops per subscriber at it. */
    int frames = cfg->sndhwm > 0 ? cfg->sndhwm : 4;
    int hwm = frames * (OCT_METHOD_COUNT * OCT_KIND_COUNT * 2) + 1;
    /* ZeroMQ starts its I/O threads and reaper with the context's first
     * socket, and they inherit the policy and nice value of the thread that
     * makes it: a short-lived SCHED_OTHER thread (octd_pub_create runs on
     * the frame loop, maybe at SCHED_FIFO), [publish] nice nicer. */
    first_socket fs = {.p = p, .hwm = hwm, .nice = p->nice};
    pthread_t starter;
    if (octd_thread_start_normal(&starter, first_socket_main, &fs) == 0) {
        pthread_join(starter, NULL);
    } else {
        octd_log(LOG_WARNING, "publisher: no thread to start ZeroMQ's from: they run at the "
                 "caller's priority");
        fs.nice = 0; /* never renice the caller */
        first_socket_main(&fs);
    }
    if (fs.nice_err)
        octd_log(LOG_WARNING, "publisher: [publish] nice = %d: %s: ZeroMQ's threads run at "
                 "octd's priority", p->nice, strerror(fs.nice_err));
    if (!(p->xpub = fs.sock)) {
        *e = fs.e;
        goto fail;
    }
    /* [publish] sndbuf: the kernel buffer of each connection accepted from
     * now on, i.e. what a subscriber that connects and never reads absorbs
     * beyond its own receive queue (issue 21: churn) */
    if (cfg->pub_sndbuf > 0 &&
        zmq_setsockopt(p->xpub, ZMQ_SNDBUF, &cfg->pub_sndbuf, sizeof cfg->pub_sndbuf) != 0) {
        oct_error_set(e, OCT_EIO, "zmq_setsockopt(XPUB, SNDBUF %d): %s", cfg->pub_sndbuf,
                      zmq_strerror(zmq_errno()));
        goto fail;
    }
    /* inproc names are per context, and each publisher has its own */
    const char *inproc = "inproc://octd-pub", *ctl = "inproc://octd-pub-ctl";
    if (!(p->xsub = new_socket(p, ZMQ_XSUB, "XSUB", 0, hwm, e)) ||
        !(p->sock = new_socket(p, ZMQ_XPUB, "XPUB", hwm, 0, e)) ||
        !(p->ctl_peer = new_socket(p, ZMQ_PAIR, "PAIR", 0, 0, e)) ||
        !(p->ctl = new_socket(p, ZMQ_PAIR, "PAIR", 0, 0, e)))
        goto fail;
    if (cfg->pub_sndbuf || cfg->pub_io_threads || cfg->pub_nice || cfg->pub_cpus[0])
        octd_log(LOG_INFO, "publisher: %d ZeroMQ I/O threads, sndbuf %s%d, nice +%d, CPUs %s",
                 io, cfg->pub_sndbuf ? "" : "default ", cfg->pub_sndbuf, cfg->pub_nice,
                 cfg->pub_cpus[0] ? cfg->pub_cpus : "any");
    for (int i = 0; i < cfg->endpoint_count; i++) {
        if (zmq_bind(p->xpub, cfg->endpoints[i]) != 0) {
            oct_error_set(e, OCT_EIO, "%s: [publish] endpoint: cannot bind '%s': %s",
                          cfg->source_path, cfg->endpoints[i], zmq_strerror(zmq_errno()));
            goto fail;
        }
    }
    if (cfg->pub_shm_endpoint[0] && shm_socket(p, cfg, hwm, e) != OCT_OK)
        goto fail;
    int nodrop = 1;
    if (zmq_setsockopt(p->sock, ZMQ_XPUB_NODROP, &nodrop, sizeof nodrop) != 0) {
        oct_error_set(e, OCT_EIO, "zmq_setsockopt(XPUB, XPUB_NODROP): %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zmq_bind(p->xsub, inproc) != 0 || zmq_connect(p->sock, inproc) != 0 ||
        zmq_bind(p->ctl_peer, ctl) != 0 || zmq_connect(p->ctl, ctl) != 0) {
        oct_error_set(e, OCT_EIO, "publisher: inproc link: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    /* The inproc link carries everything: the XSUB subscribes to all once,
     * and the frame loop's socket reads that subscription here, so it is in
     * force before the first frame (nothing more ever arrives on it). */
    int wait_ms = 10000;
    char sub[4];
    if (zmq_send(p->xsub, "\x01", 1, 0) != 1 ||
        zmq_setsockopt(p->sock, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms) != 0 ||
        zmq_recv(p->sock, sub, sizeof sub, 0) != 1 || sub[0] != 1) {
        oct_error_set(e, OCT_EIO, "publisher: inproc link: no subscription from the publisher "
                      "thread's XSUB: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            for (int f32 = 0; f32 < 2; f32++) {
                pub_topic *t = &p->topic[product_topic(m, k, f32)];
                t->len = (size_t)snprintf(t->name, sizeof t->name, "%s/%s%s", oct_kind_name(k),
                                          oct_product_method_name(m, k), f32 ? "/f32" : "");
            }
    p->topic[STATUS_TOPIC].len = (size_t)snprintf(p->topic[STATUS_TOPIC].name, TOPIC_CAP, "status");
    /* nobody subscribed yet: every flag false (calloc) */
    atomic_store(&p->ntopics, STATUS_TOPIC + 1);
    p->known = STATUS_TOPIC + 1;
    int rc = octd_thread_start_normal(&p->thread, proxy_main, p);
    if (rc != 0) {
        oct_error_set(e, OCT_EIO, "publisher: cannot start its thread: %s", strerror(rc));
        goto fail;
    }
    p->thread_started = true;
    *out = p;
    return OCT_OK;
fail:
    octd_pub_destroy(p);
    return bad;
}

void octd_pub_destroy(octd_pub *p)
{
    if (!p)
        return;
    if (p->sock)
        zmq_close(p->sock);
    if (p->thread_started) {
        octd_log(LOG_INFO, "publisher: the frame loop handed %" PRIu64 " messages to ZeroMQ "
                 "and skipped %" PRIu64 " that nobody wanted; %" PRIu64 " subscription "
                 "changes handled by the publisher thread; %" PRIu64 " images of copy-only "
                 "buffers dropped while octd caught up", p->counts.handed, p->counts.unwanted,
                 (uint64_t)atomic_load(&p->sub_events), p->n_behind);
        if (p->shm_sock)
            octd_log(LOG_INFO, "publisher: %" PRIu64 " image headers sent on [publish] "
                     "shm_endpoint, %" PRIu64 " not sent", p->counts.shm_sent, p->counts.shm_drops);
        /* the proxy ends on TERMINATE and closes its sockets; should the
         * send fail, ending the context below ends it with ETERM */
        if (zmq_send(p->ctl, "TERMINATE", 9, 0) == 9) {
            zmq_close(p->ctl);
            p->ctl = NULL;
            pthread_join(p->thread, NULL);
        } else {
            zmq_close(p->ctl);
            p->ctl = NULL;
            zmq_ctx_shutdown(p->ctx);
            pthread_join(p->thread, NULL);
        }
    } else {
        void *socks[] = {p->xsub, p->xpub, p->ctl, p->ctl_peer};
        for (size_t i = 0; i < sizeof socks / sizeof *socks; i++)
            if (socks[i])
                zmq_close(socks[i]);
    }
    if (p->shm_sock)
        zmq_close(p->shm_sock);
    if (p->shm_ctx)
        while (zmq_ctx_term(p->shm_ctx) != 0 && zmq_errno() == EINTR)
            ;
    /* zmq_ctx_term returns once every message is released, so the slots are
     * free afterwards (linger 0: nothing waits for subscribers). */
    if (p->ctx)
        while (zmq_ctx_term(p->ctx) != 0 && zmq_errno() == EINTR)
            ;
    for (int k = 0; k < p->nprefix; k++)
        free(p->prefix[k].bytes);
    free(p->prefix);
    copy_cache_free(&p->cache);
    free(p);
}

void octd_pub_get_counts(const octd_pub *p, octd_pub_counts *c)
{
    *c = p->counts;
    c->subscription_changes = atomic_load_explicit(&p->sub_events, memory_order_relaxed);
    c->pub_copies = atomic_load_explicit(&p->n_pub_copies, memory_order_relaxed);
    c->pub_zero_copy = atomic_load_explicit(&p->n_pub_zc, memory_order_relaxed);
    c->frame_copies = atomic_load_explicit(&p->n_fl_copies, memory_order_relaxed);
    c->behind_drops = p->n_behind;
}

bool octd_pool_low(const octd_pool_gauge *g)
{
    int cap = atomic_load_explicit(&g->cap, memory_order_relaxed);
    return atomic_load_explicit(&g->held, memory_order_relaxed) > cap / 2;
}

bool octd_pub_wanted(const octd_pub *p, int method, int kind, bool f32)
{
    if (method < 0 || method >= OCT_METHOD_COUNT || kind < 0 || kind >= OCT_KIND_COUNT)
        return false;
    return atomic_load_explicit(&p->topic[product_topic(method, kind, f32)].wanted,
                                memory_order_acquire);
}

/* Whether anybody wants topic; an unknown topic is registered (until the
 * publisher thread has looked at it: wanted). */
static bool topic_wanted(octd_pub *p, const char *topic)
{
    size_t len = strlen(topic);
    int n = atomic_load_explicit(&p->ntopics, memory_order_relaxed); /* only this thread adds */
    for (int i = STATUS_TOPIC + 1; i < n; i++)
        if (p->topic[i].len == len && memcmp(p->topic[i].name, topic, len) == 0)
            return atomic_load_explicit(&p->topic[i].wanted, memory_order_acquire);
    if (len >= TOPIC_CAP || n == MAX_TOPICS)
        return true; /* not tracked: the XPUB filters it */
    pub_topic *t = &p->topic[n];
    memcpy(t->name, topic, len + 1);
    t->len = len;
    atomic_store_explicit(&t->wanted, true, memory_order_relaxed);
    atomic_store_explicit(&p->ntopics, n + 1, memory_order_release);
    return true;
}

void octd_slot_release(octd_slot *s)
{
    /* read before the last reference goes: the frame loop may reuse s then */
    octd_pool_gauge *g = s->gauge;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1 && g)
        atomic_fetch_sub_explicit(&g->held, 1, memory_order_relaxed);
}

static void slot_free_cb(void *data, void *hint)
{
    (void)data;
    octd_slot_release(hint);
}

/* Sends one part; the payload zero-copy when it lives in slot s. */
static int send_part(void *sock, const void *data, size_t len, octd_slot *s, int flags)
{
    if (!s || len < ZERO_COPY_MIN)
        return zmq_send(sock, data, len, flags) < 0 ? -1 : 0;
    zmq_msg_t msg;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_acq_rel);
    if (zmq_msg_init_data(&msg, (void *)data, len, slot_free_cb, s) != 0) {
        octd_slot_release(s);
        return -1;
    }
    if (zmq_msg_send(&msg, sock, flags) < 0) {
        int err = zmq_errno();
        zmq_msg_close(&msg); /* runs the callback: the reference is dropped */
        errno = err;
        return -1;
    }
    return 0;
}

/* Where an image lies in an image area (the shm_endpoint's headers). */
typedef struct shm_where {
    const char *name;
    oct_image_ref ref;
} shm_where;

static size_t image_header(char *buf, size_t cap, const char *topic, int method, int kind,
                           const char *kind_name, bool f32, uint64_t image_seq, const oct_image *img,
                           const octd_frame_meta *m, const float spacing_um[3], const shm_where *w)
{
    octd_json j;
    octd_json_begin(&j, buf, cap);
    octd_json_str(&j, "htype", "octd-image-1");
    octd_json_str(&j, "topic", topic);
    octd_json_str(&j, "kind", kind_name ? kind_name : oct_kind_name(kind));
    octd_json_str(&j, "method", kind_name ? oct_method_name(method)
                                          : oct_product_method_name(method, kind)); /* en-face angiograms: the metric */
    octd_json_u64(&j, "frame_id", m->frame_id);
    octd_json_u64(&j, "frame_seq", m->frame_seq);
    octd_json_u64(&j, "image_seq", image_seq);
    octd_json_u64(&j, "epoch", m->epoch);
    octd_json_u64(&j, "t_acq_ns", m->t_acq_ns);
    /* where the time went (issue 19; only for ring frames) */
    if (m->t_take_ns)
        octd_json_u64(&j, "t_take_ns", m->t_take_ns);
    if (m->t_sub_ns)
        octd_json_u64(&j, "t_sub_ns", m->t_sub_ns);
    if (m->t_done_ns)
        octd_json_u64(&j, "t_done_ns", m->t_done_ns);
    octd_json_u64(&j, "t_pub_ns", oct_time_realtime_ns());
    octd_json_u32_array(&j, "shape", img->shape, (size_t)(img->ndim > 3 ? 3 : img->ndim));
    octd_json_str(&j, "dtype", f32 ? "f32" : "u8");
    octd_json_i32_array(&j, "indices", img->indices, img->indices ? img->n_indices : 0);
    if (kind == OCT_KIND_ENFACE)
        octd_json_u64(&j, "requested", img->requested);
    octd_json_u64(&j, "params_gen", m->params_gen);
    octd_json_u64(&j, "skipped", m->skipped);
    octd_json_u64(&j, "torn", m->torn);
    octd_json_str(&j, "mode", m->review ? "review" : "online");
    if (m->averaged)
        octd_json_u64(&j, "averaged", m->averaged);
    if (spacing_um[0] > 0 && spacing_um[1] > 0 && spacing_um[2] > 0) {
        /* the profile's pixel spacing, [depth, ascan, line] in µm, whatever
         * the image's axes: a display picks the two of its kind */
        double sp[3] = {spacing_um[0], spacing_um[1], spacing_um[2]};
        octd_json_f64_array(&j, "spacing_um", sp, 3);
    }
    if (w) {
        octd_json_str(&j, "shm_name", w->name);
        octd_json_u64(&j, "shm_id", w->ref.id);
        octd_json_u64(&j, "shm_slot", w->ref.slot);
        octd_json_u64(&j, "shm_seq", w->ref.seq);
        octd_json_u64(&j, "shm_offset", w->ref.offset);
        octd_json_u64(&j, "shm_bytes", w->ref.bytes);
    }
    return octd_json_end(&j);
}

/* One image's header-only message on [publish] shm_endpoint; what it cannot
 * send (HWM of a PUB: never for one subscriber only) is counted. */
static void send_shm(octd_pub *p, octd_slot *s, const char *tp, int method, int kind, bool f32,
                     uint64_t seq, const oct_image *img, const octd_frame_meta *m,
                     const void *data, size_t bytes)
{
    char header[2048];
    oct_error e;
    shm_where w = {.name = oct_images_name(s->area->img)};
    size_t hlen = 0;
    /* a PUB fails no later part of a message whose first part it took */
    bool ok = oct_images_ref(s->area->img, s->area_slot, data, bytes, &w.ref, &e) == OCT_OK &&
              (hlen = image_header(header, sizeof header, tp, method, kind, NULL, f32, seq, img,
                                   m, p->spacing_um, &w)) > 0 &&
              zmq_send(p->shm_sock, tp, strlen(tp), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
              zmq_send(p->shm_sock, header, hlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
              zmq_send(p->shm_sock, "", 0, ZMQ_DONTWAIT) >= 0;
    if (ok)
        p->counts.shm_sent++;
    else
        p->counts.shm_drops++;
}

unsigned octd_pub_send_products(octd_pub *p, octd_slot *s, const octd_frame_meta *m,
                                uint64_t *drops, uint64_t *last_sent_ns)
{
    unsigned sent = 0;
    int images = 0;
    char header[2048], topic[AUTO_PREFIX + TOPIC_CAP];
    uint64_t t0 = p->stats_s ? mono_ns() : 0;
    /* [publish] copies = publisher: pooled images go to the publisher thread
     * zero-copy and flagged; it copies them before the fan-out and releases
     * the buffer at once, so no subscriber's queue holds the pool (issue 21:
     * churning and stalled subscribers held all of it, and the frame loop
     * then copied every image itself).  Copy-only buffers (the publisher
     * thread lags by a whole pool) are still copied here, into kept buffers:
     * a lagging thread then costs images, never frames. */
    bool pool = !s->copy_only;
    bool flag_pool = pool && p->copies == OCT_PUB_COPIES_PUBLISHER;
    bool flag_auto = pool && p->copies == OCT_PUB_COPIES_AUTO && s->gauge;
    if (s->area) /* the engine is done with the slot: its images are whole */
        oct_images_end(s->area->img, s->area_slot);
    bool shm = s->area && p->shm_sock;
    for (int method = 0; method < OCT_METHOD_COUNT; method++) {
        for (int kind = 0; kind < OCT_KIND_COUNT; kind++) {
            const oct_image *img = &s->prod->img[method][kind];
            if (!img->present || !img->u8)
                continue;
            for (int f32 = 0; f32 < 2; f32++) {
                if (f32 && !img->f32)
                    continue;
                /* f32 buffers may be left over from earlier frames: only
                 * send them when this frame asked for them. */
                if (f32 && !m->want_f32)
                    continue;
                images++;
                uint64_t seq = p->image_seq[method][kind][f32]++;
                bool wanted = octd_pub_wanted(p, method, kind, f32);
                /* tp: the topic; before it, the copy flag on the inproc link
                 * (COPY_FLAG, or COPY_AUTO and the pool's gauge) */
                char *tp = topic + AUTO_PREFIX;
                const void *data = f32 ? (const void *)img->f32 : (const void *)img->u8;
                size_t bytes = img->count * (f32 ? sizeof(float) : 1);
                if (wanted || shm)
                    snprintf(tp, sizeof topic - AUTO_PREFIX, "%s/%s%s", oct_kind_name(kind),
                             oct_product_method_name(method, kind), f32 ? "/f32" : "");
                if (shm) /* local readers first: theirs is the short path */
                    send_shm(p, s, tp, method, kind, f32, seq, img, m, data, bytes);
                if (!wanted) {
                    /* nobody's prefix matches: not built, not sent */
                    p->counts.unwanted++;
                    sent++;
                    *last_sent_ns = oct_time_realtime_ns();
                    continue;
                }
                size_t hlen = image_header(header, sizeof header, tp, method, kind, NULL,
                                           f32, seq, img, m, p->spacing_um, NULL);
                if (hlen == 0) {
                    octd_log(LOG_ERR, "%s: header does not fit in %zu bytes", tp,
                             sizeof header);
                    (*drops)++;
                    continue;
                }
                /* The first part decides: PUB does not fail later parts of
                 * a message whose first part was accepted. */
                p->counts.handed++;
                if (!pool && m->behind && bytes >= ZERO_COPY_MIN) {
                    /* octd is catching up: no copy in the frame loop */
                    p->n_behind++;
                    atomic_fetch_add_explicit(&p->st_behind, 1, memory_order_relaxed);
                    (*drops)++;
                    continue;
                }
                bool big = bytes >= ZERO_COPY_MIN && bytes <= COPY_MAX;
                bool flag = flag_pool && bytes <= COPY_MAX, autoc = flag_auto && big;
                const char *t = tp;
                size_t tlen = strlen(tp);
                if (flag) {
                    tp[-1] = COPY_FLAG;
                    t = tp - 1, tlen++;
                } else if (autoc) {
                    topic[0] = COPY_AUTO;
                    memcpy(topic + 1, &s->gauge, sizeof s->gauge);
                    t = topic, tlen += AUTO_PREFIX;
                }
                if (send_part(p->sock, t, tlen, NULL, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0) {
                    if (zmq_errno() != EAGAIN)
                        octd_log(LOG_WARNING, "%s: send: %s", tp, zmq_strerror(zmq_errno()));
                    (*drops)++;
                    continue;
                }
                if (send_part(p->sock, header, hlen, NULL, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0 ||
                    (!pool && p->copies != OCT_PUB_COPIES_FRAME && bytes >= ZERO_COPY_MIN
                         ? send_kept(p, data, bytes, ZMQ_DONTWAIT)
                         : send_part(p->sock, data, bytes, pool ? s : NULL, ZMQ_DONTWAIT)) != 0) {
                    octd_log(LOG_WARNING, "%s: send of a later part failed: %s", tp,
                             zmq_strerror(zmq_errno()));
                    (*drops)++;
                    continue;
                }
                if (flag || autoc) {
                    atomic_fetch_add_explicit(&p->st_flagged, 1, memory_order_relaxed);
                } else if (!pool && bytes >= ZERO_COPY_MIN) {
                    atomic_fetch_add_explicit(&p->st_fl_copies, 1, memory_order_relaxed);
                    atomic_fetch_add_explicit(&p->n_fl_copies, 1, memory_order_relaxed);
                }
                sent++;
                *last_sent_ns = oct_time_realtime_ns();
            }
        }
    }
    if (p->stats_s) {
        uint64_t dt = mono_ns() - t0;
        atomic_fetch_add_explicit(&p->st_frames, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->st_send_ns, dt, memory_order_relaxed);
        if (dt > atomic_load_explicit(&p->st_send_max_ns, memory_order_relaxed))
            atomic_store_explicit(&p->st_send_max_ns, dt, memory_order_relaxed);
    }
    return sent;
}

unsigned octd_pub_send_image(octd_pub *p, const char *topic, const char *kind_name, int method,
                             const oct_image *img, bool f32, uint64_t image_seq,
                             const octd_frame_meta *m, uint64_t *drops)
{
    char header[2048];
    const void *data = f32 ? (const void *)img->f32 : (const void *)img->u8;
    if (data && !topic_wanted(p, topic)) {
        p->counts.unwanted++;
        return 1;
    }
    /* kind -1: no SPEC 2.4 kind ("requested" is an en-face field) */
    int kind = strncmp(kind_name, "enface", 6) == 0 ? OCT_KIND_ENFACE : -1;
    size_t hlen = image_header(header, sizeof header, topic, method, kind, kind_name, f32,
                               image_seq, img, m, p->spacing_um, NULL);
    if (data && hlen > 0)
        p->counts.handed++;
    if (!data || hlen == 0 ||
        send_part(p->sock, topic, strlen(topic), NULL, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0) {
        (*drops)++;
        return 0;
    }
    if (send_part(p->sock, header, hlen, NULL, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0 ||
        send_part(p->sock, data, img->count * (f32 ? sizeof(float) : 1), NULL, ZMQ_DONTWAIT) != 0) {
        octd_log(LOG_WARNING, "%s: send of a later part failed: %s", topic,
                 zmq_strerror(zmq_errno()));
        (*drops)++;
        return 0;
    }
    return 1;
}

size_t octd_status_json(const oct_status_block *b, char *buf, size_t cap)
{
    return octd_status_json_params(b, NULL, buf, cap);
}

size_t octd_status_json_params(const oct_status_block *b, const oct_control_values *v,
                               char *buf, size_t cap)
{
    octd_json j;
    octd_json_begin(&j, buf, cap);
    char backend[sizeof b->backend + 1], device[sizeof b->device + 1];
    char reason[sizeof b->rejected_reason + 1], msg[sizeof b->command_message + 1];
    /* Text fields come from shared memory: bound them. */
    snprintf(backend, sizeof backend, "%.*s", (int)sizeof b->backend, b->backend);
    snprintf(device, sizeof device, "%.*s", (int)sizeof b->device, b->device);
    snprintf(reason, sizeof reason, "%.*s", (int)sizeof b->rejected_reason, b->rejected_reason);
    snprintf(msg, sizeof msg, "%.*s", (int)sizeof b->command_message, b->command_message);
    octd_json_str(&j, "htype", "octd-status-1");
    octd_json_u64(&j, "pid", b->pid);
    octd_json_str(&j, "state", oct_daemon_state_name(b->state));
    octd_json_str(&j, "backend", backend);
    octd_json_str(&j, "device", device);
    octd_json_u64(&j, "ring_epoch", b->ring_epoch);
    uint32_t geom[3] = {b->ring_lines, b->ring_ascans, b->ring_samples};
    octd_json_u32_array(&j, "ring_geometry", geom, 3);
    const char *st = oct_sample_name(b->ring_sample_type);
    octd_json_str(&j, "ring_sample_type", st ? st : "");
    octd_json_u64(&j, "heartbeat_ns", b->heartbeat_ns);
    octd_json_u64(&j, "applied_gen", b->applied_gen);
    octd_json_u64(&j, "rejected_gen", b->rejected_gen);
    octd_json_str(&j, "rejected_reason", reason);
    octd_json_u64(&j, "command_ack_seq", b->command_ack_seq);
    static const char *const results[] = {"ok", "refused", "failed"};
    octd_json_str(&j, "command_result", b->command_result < 3 ? results[b->command_result] : "?");
    octd_json_str(&j, "command_message", msg);
    octd_json_u64(&j, "frames_seen", b->frames_seen);
    octd_json_u64(&j, "frames_processed", b->frames_processed);
    octd_json_u64(&j, "frames_skipped", b->frames_skipped);
    octd_json_u64(&j, "frames_torn", b->frames_torn);
    octd_json_u64(&j, "ring_reattaches", b->ring_reattaches);
    octd_json_u64(&j, "images_published", b->images_published);
    octd_json_u64(&j, "publish_drops", b->publish_drops);
    octd_json_u64(&j, "last_frame_id", b->last_frame_id);
    octd_json_u64(&j, "last_latency_ns", b->last_latency_ns);
    octd_json_u64(&j, "start_ns", b->start_ns);
    if (v) {
        /* the values in use, named as `octctl get` names them */
        char val[160];
        octd_json_object_begin(&j, "params");
        for (size_t i = 0; i < oct_control_key_count(); i++) {
            const char *k = oct_control_key_name(i);
            if (oct_control_key_get(v, k, val, sizeof val, NULL) == OCT_OK)
                octd_json_str(&j, k, val);
        }
        octd_json_object_end(&j);
    }
    return octd_json_end(&j);
}

void octd_pub_send_status(octd_pub *p, const oct_status_block *b, const oct_control_values *v)
{
    char buf[8192];
    if (!atomic_load_explicit(&p->topic[STATUS_TOPIC].wanted, memory_order_acquire)) {
        p->counts.unwanted++;
        return;
    }
    size_t len = octd_status_json_params(b, v, buf, sizeof buf);
    if (len == 0)
        return;
    p->counts.handed++;
    if (zmq_send(p->sock, "status", 6, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return;
    zmq_send(p->sock, buf, len, ZMQ_DONTWAIT);
}
