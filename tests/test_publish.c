/* test_publish.c - unit tests of octd's publisher (daemon/publish.c, issue
 * 21): the frame loop's messages go through the publisher thread's proxy to
 * a real subscriber byte for byte, zero-copy payloads are released once the
 * subscriber has them, a topic nobody wants is neither built nor handed to
 * ZeroMQ, the "wanted" answer follows subscribers' prefixes as they come
 * and go, churning subscribers never reach the frame loop's socket nor
 * change what it sends, a lagging publisher thread costs counted drops,
 * never a wait, shutdown with a stalled subscriber releases every
 * reference and does not hang, a bad endpoint is named, and [publish]
 * io_threads / nice / cpus reach the publisher's threads and only those,
 * which never inherit the frame loop's real-time policy; with [publish]
 * copies = publisher no subscriber holds the frame loop's buffers and the
 * publisher's copy buffers are reused, then returned (r4); with copies =
 * auto a quiet run copies nothing and a stalled peer cannot keep the pool
 * (r5).
 * Subscribers connect over ipc:// in a private directory; readers retry with
 * back-off under a generous deadline (no timing assertions). */
#include "../daemon/json.c"
#include "../daemon/copy_cache.c"
#include "../daemon/publish.c"
#include "../daemon/sys.c"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BYTES (64 * 1024) /* > ZERO_COPY_MIN: sent zero-copy */

static char dir[64];
static oct_daemon_config cfg;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/octd-test-publish-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.endpoints[0], sizeof cfg.endpoints[0], "ipc://%s/pub.sock", dir);
    cfg.endpoint_count = 1;
    cfg.sndhwm = 4;
    snprintf(cfg.source_path, sizeof cfg.source_path, "test.ini");
}

static void teardown(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/pub.sock", dir);
    unlink(path);
    rmdir(dir);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One bscan/cfd u8 image of random bytes and one enface/cfd image. */
typedef struct fixture {
    oct_products prod;
    uint8_t *bscan, *enface;
    int32_t index;
    octd_slot slot;
} fixture;

static void fixture_init(fixture *f, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->bscan = malloc(BYTES);
    f->enface = malloc(BYTES);
    ck_assert(f->bscan && f->enface);
    uint64_t x = seed;
    for (size_t i = 0; i < BYTES; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        f->bscan[i] = (uint8_t)(x >> 56);
        f->enface[i] = (uint8_t)(x >> 48);
    }
    oct_image *b = &f->prod.img[OCT_METHOD_CFD][OCT_KIND_BSCAN];
    b->present = true, b->ndim = 2, b->shape[0] = 256, b->shape[1] = BYTES / 256;
    b->count = BYTES, b->u8 = f->bscan;
    oct_image *n = &f->prod.img[OCT_METHOD_CFD][OCT_KIND_ENFACE];
    n->present = true, n->ndim = 3, n->shape[0] = 1, n->shape[1] = 256;
    n->shape[2] = BYTES / 256, n->count = BYTES, n->u8 = f->enface;
    f->index = 7, n->indices = &f->index, n->n_indices = 1, n->requested = 1;
    f->slot.prod = &f->prod;
    atomic_init(&f->slot.refs, 1); /* octd's own */
}

static void fixture_free(fixture *f)
{
    free(f->bscan);
    free(f->enface);
}

static void *subscriber(void *zctx, const char *topic, int rcvhwm)
{
    void *s = zmq_socket(zctx, ZMQ_SUB);
    int linger = 0, timeout = 100;
    ck_assert_ptr_nonnull(s);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    if (rcvhwm)
        zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    ck_assert_int_eq(zmq_setsockopt(s, ZMQ_SUBSCRIBE, topic, strlen(topic)), 0);
    ck_assert_int_eq(zmq_connect(s, cfg.endpoints[0]), 0);
    return s;
}

/* Receives one 2- or 3-part message; false on timeout. */
static bool recv_msg(void *s, char *topic, size_t tcap, char *hdr, size_t hcap, uint8_t *data,
                     size_t dcap, size_t *dlen)
{
    int n = zmq_recv(s, topic, tcap - 1, 0);
    if (n < 0)
        return false;
    topic[n < (int)tcap - 1 ? n : (int)tcap - 1] = '\0';
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    ck_assert_msg(more, "%s: only one part", topic);
    n = zmq_recv(s, hdr, hcap - 1, 0);
    ck_assert_int_ge(n, 0);
    hdr[n < (int)hcap - 1 ? n : (int)hcap - 1] = '\0';
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    *dlen = 0;
    if (more) {
        n = zmq_recv(s, data, dcap, 0);
        ck_assert_int_ge(n, 0);
        *dlen = (size_t)n;
    }
    return true;
}

static void wait_refs(octd_slot *s, int want)
{
    for (int i = 0; i < 2000 && atomic_load(&s->refs) != want; i++)
        sleep_ms(5);
    ck_assert_int_eq(atomic_load(&s->refs), want);
}

static void send_status(octd_pub *p)
{
    oct_status_block b;
    memset(&b, 0, sizeof b);
    b.pid = 42;
    octd_pub_send_status(p, &b, NULL);
}

/* The subscription reaches the publisher thread some time after connect:
 * resend the status until sub gets one (the message in the buffers). */
static bool await_status(octd_pub *p, void *sub, char *topic, size_t tcap, char *hdr, size_t hcap,
                         uint8_t *data, size_t dcap, size_t *dlen)
{
    for (int tries = 0; tries < 400; tries++) {
        send_status(p);
        if (recv_msg(sub, topic, tcap, hdr, hcap, data, dcap, dlen))
            return true;
    }
    return false;
}

/* A bscan subscriber gets the frame loop's image byte for byte through the
 * proxy, not the enface image it did not subscribe to; the zero-copy
 * payloads are released once delivered. */
START_TEST(proxy_delivers_zero_copy)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture f;
    fixture_init(&f, 12345);
    void *zctx = zmq_ctx_new();
    void *sub = subscriber(zctx, "bscan/", 0);
    octd_frame_meta m = {.frame_id = 9, .frame_seq = 3};
    char topic[64], hdr[4096];
    static uint8_t data[BYTES + 1];
    size_t dlen = 0;
    bool got = false;
    /* the subscription reaches the publisher thread some time after
     * connect: resend (each resend is a new image_seq) until one arrives */
    for (int tries = 0; tries < 400 && !got; tries++) {
        uint64_t drops = 0, last = 0;
        octd_pub_send_products(p, &f.slot, &m, &drops, &last);
        ck_assert_uint_eq(drops, 0);
        got = recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    }
    ck_assert_msg(got, "no image through the publisher thread in 40 s");
    ck_assert_str_eq(topic, "bscan/cfd");
    ck_assert_uint_eq(dlen, BYTES);
    ck_assert_msg(memcmp(data, f.bscan, BYTES) == 0, "payload differs");
    ck_assert_ptr_nonnull(strstr(hdr, "\"frame_id\":9"));
    ck_assert_ptr_nonnull(strstr(hdr, "\"topic\":\"bscan/cfd\""));
    /* drain: nothing but bscan/cfd may come */
    while (recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen))
        ck_assert_str_eq(topic, "bscan/cfd");
    wait_refs(&f.slot, 1);
    zmq_close(sub);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    ck_assert_int_eq(atomic_load(&f.slot.refs), 1);
    fixture_free(&f);
}
END_TEST

/* With only "status" subscribed, images are not even built: send returns
 * with no reference held by ZeroMQ (a publisher that forwarded everything
 * to its thread would hold one per queued image) and no ZeroMQ call. */
START_TEST(unsubscribed_dropped_at_source)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture f;
    fixture_init(&f, 777);
    void *zctx = zmq_ctx_new();
    void *sub = subscriber(zctx, "status", 0);
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    bool got = false;
    got = await_status(p, sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    ck_assert_msg(got, "no status through the publisher thread in 40 s");
    ck_assert_str_eq(topic, "status");
    ck_assert_ptr_nonnull(strstr(hdr, "\"pid\":42"));
    octd_frame_meta m = {.frame_id = 1};
    octd_pub_counts c0, c1;
    octd_pub_get_counts(p, &c0);
    for (int i = 0; i < 50; i++) {
        uint64_t drops = 0, last = 0;
        ck_assert_uint_eq(octd_pub_send_products(p, &f.slot, &m, &drops, &last), 2);
        ck_assert_int_eq(atomic_load(&f.slot.refs), 1);
        ck_assert_uint_gt(last, 0); /* the latency clock still runs */
    }
    octd_pub_get_counts(p, &c1);
    ck_assert_uint_eq(c1.handed, c0.handed);
    ck_assert_uint_eq(c1.unwanted, c0.unwanted + 100);
    /* and the subscriber got none of them */
    while (recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen))
        ck_assert_str_eq(topic, "status");
    zmq_close(sub);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    fixture_free(&f);
}
END_TEST

/* Waits (back-off, a minute at most) until the publisher thread's answer
 * for method/kind/f32 is want. */
static void wait_wanted(octd_pub *p, int method, int kind, bool f32, bool want)
{
    for (int i = 0; i < 3000 && octd_pub_wanted(p, method, kind, f32) != want; i++)
        sleep_ms(i < 100 ? 1 : 20);
    ck_assert_msg(octd_pub_wanted(p, method, kind, f32) == want, "%s/%s%s: wanted is not %d",
                  oct_kind_name(kind), oct_product_method_name(method, kind), f32 ? "/f32" : "",
                  want);
}

static void wait_counts(octd_pub *p, uint64_t subscription_changes)
{
    octd_pub_counts c;
    octd_pub_get_counts(p, &c);
    for (int i = 0; i < 3000 && c.subscription_changes < subscription_changes; i++) {
        sleep_ms(i < 100 ? 1 : 20);
        octd_pub_get_counts(p, &c);
    }
    ck_assert_uint_eq(c.subscription_changes, subscription_changes);
}

/* The frame loop's "wanted" answer follows subscribers' prefixes as they
 * come and go: none, "" (all), "enface/" after "" left, "bscan/cfd/" (only
 * the f32 topic), status, a topic registered on first use. */
START_TEST(wanted_follows_prefixes)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            for (int f32 = 0; f32 < 2; f32++)
                ck_assert(!octd_pub_wanted(p, m, k, f32)); /* nobody connected */
    ck_assert(!octd_pub_wanted(p, OCT_METHOD_COUNT, 0, false));
    ck_assert(!octd_pub_wanted(p, 0, -1, false));
    void *zctx = zmq_ctx_new();
    void *all = subscriber(zctx, "", 0);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            for (int f32 = 0; f32 < 2; f32++)
                wait_wanted(p, m, k, f32, true);
    void *en = subscriber(zctx, "enface/", 0);
    wait_counts(p, 2);
    zmq_close(all);
    wait_wanted(p, OCT_METHOD_CFD, OCT_KIND_BSCAN, false, false);
    wait_counts(p, 3);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            for (int f32 = 0; f32 < 2; f32++)
                ck_assert_int_eq(octd_pub_wanted(p, m, k, f32), k == OCT_KIND_ENFACE);
    /* status: nobody's prefix: neither built nor sent */
    octd_pub_counts c0, c1;
    octd_pub_get_counts(p, &c0);
    send_status(p);
    octd_pub_get_counts(p, &c1);
    ck_assert_uint_eq(c1.handed, c0.handed);
    ck_assert_uint_eq(c1.unwanted, c0.unwanted + 1);
    /* a longer prefix: only the f32 topic */
    void *f32 = subscriber(zctx, "bscan/cfd/", 0);
    wait_wanted(p, OCT_METHOD_CFD, OCT_KIND_BSCAN, true, true);
    ck_assert(!octd_pub_wanted(p, OCT_METHOD_CFD, OCT_KIND_BSCAN, false));
    ck_assert(!octd_pub_wanted(p, OCT_METHOD_MSI, OCT_KIND_BSCAN, true));
    /* a topic outside the table: registered on first use (sent until the
     * thread has looked at it), then skipped while nobody wants it */
    fixture f;
    fixture_init(&f, 31);
    const oct_image *img = &f.prod.img[OCT_METHOD_CFD][OCT_KIND_BSCAN];
    octd_frame_meta m = {.frame_id = 4};
    uint64_t drops = 0;
    octd_pub_get_counts(p, &c0);
    ck_assert_uint_eq(octd_pub_send_image(p, "registered/cfd", "registered", OCT_METHOD_CFD, img,
                                          false, 0, &m, &drops), 1);
    octd_pub_get_counts(p, &c1);
    ck_assert_uint_eq(c1.handed, c0.handed + 1);
    for (int i = 0; i < 3000 && c1.unwanted == c0.unwanted; i++) {
        sleep_ms(i < 100 ? 1 : 20);
        ck_assert_uint_eq(octd_pub_send_image(p, "registered/cfd", "registered", OCT_METHOD_CFD,
                                              img, false, 1, &m, &drops), 1);
        octd_pub_get_counts(p, &c1);
    }
    ck_assert_uint_gt(c1.unwanted, c0.unwanted);
    /* then a subscriber to it gets it byte for byte */
    void *reg = subscriber(zctx, "registered/", 0);
    char topic[64], hdr[4096];
    static uint8_t data[BYTES + 1];
    size_t dlen = 0;
    bool got = false;
    for (int tries = 0; tries < 400 && !got; tries++) {
        octd_pub_send_image(p, "registered/cfd", "registered", OCT_METHOD_CFD, img, false, 2, &m,
                            &drops);
        got = recv_msg(reg, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    }
    ck_assert_msg(got, "no registered/cfd image in 40 s");
    ck_assert_str_eq(topic, "registered/cfd");
    ck_assert_uint_eq(dlen, BYTES);
    ck_assert(memcmp(data, f.bscan, BYTES) == 0);
    ck_assert_uint_eq(drops, 0);
    /* everybody gone: nothing wanted */
    zmq_close(en);
    zmq_close(f32);
    zmq_close(reg);
    wait_wanted(p, OCT_METHOD_CFD, OCT_KIND_ENFACE, false, false);
    wait_wanted(p, OCT_METHOD_CFD, OCT_KIND_BSCAN, true, false);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    fixture_free(&f);
}
END_TEST

/* More distinct prefixes than the thread keeps (a hostile peer): every
 * topic counts as wanted (the XPUB still filters) until they go. */
START_TEST(too_many_prefixes_all_wanted)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    void *zctx = zmq_ctx_new();
    void *s = zmq_socket(zctx, ZMQ_SUB);
    int linger = 0, unbounded = 0; /* a SUB drops subscriptions past its SNDHWM */
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_setsockopt(s, ZMQ_SNDHWM, &unbounded, sizeof unbounded), 0);
    char t[32];
    for (int i = 0; i <= MAX_PREFIXES; i++) {
        snprintf(t, sizeof t, "nothing/%d", i);
        ck_assert_int_eq(zmq_setsockopt(s, ZMQ_SUBSCRIBE, t, strlen(t)), 0);
    }
    ck_assert_int_eq(zmq_connect(s, cfg.endpoints[0]), 0);
    wait_wanted(p, OCT_METHOD_MSI, OCT_KIND_CONFOCAL, false, true);
    wait_counts(p, MAX_PREFIXES + 1);
    zmq_close(s);
    wait_wanted(p, OCT_METHOD_MSI, OCT_KIND_CONFOCAL, false, false);
    wait_counts(p, 2 * (MAX_PREFIXES + 1));
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
}
END_TEST

/* Churning subscribers (200 connections, each with a prefix of its own
 * and "bscan/", which a steady subscriber holds; each round connects 100,
 * waits for their subscriptions, closes them and waits for their ends)
 * while the frame loop
 * publishes: every subscription change is handled by the publisher thread,
 * none reaches the frame loop's socket (no ZeroMQ command in its sends),
 * and what the frame loop hands to ZeroMQ is exactly the wanted topic's
 * images, one message per image, whatever the churn. */
typedef struct churn_arg {
    octd_pub *p;
    atomic_bool done;
    int rounds, per_round;
} churn_arg;

static void *churn_main(void *arg)
{
    churn_arg *a = arg;
    void *zctx = zmq_ctx_new();
    void *s[100];
    char t[32];
    octd_pub_counts c;
    for (int r = 0; r < a->rounds; r++) {
        octd_pub_get_counts(a->p, &c);
        for (int i = 0; i < a->per_round; i++) {
            s[i] = subscriber(zctx, "bscan/", 1);
            snprintf(t, sizeof t, "churn/%d/%d", r, i);
            ck_assert_int_eq(zmq_setsockopt(s[i], ZMQ_SUBSCRIBE, t, strlen(t)), 0);
        }
        /* all connected (their own prefixes arrived) before they vanish */
        wait_counts(a->p, c.subscription_changes + (uint64_t)a->per_round);
        for (int i = 0; i < a->per_round; i++)
            zmq_close(s[i]);
        wait_counts(a->p, c.subscription_changes + 2 * (uint64_t)a->per_round);
    }
    zmq_ctx_term(zctx);
    atomic_store(&a->done, true);
    return NULL;
}

START_TEST(churn_never_reaches_frame_loop)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture f;
    fixture_init(&f, 2024);
    void *zctx = zmq_ctx_new();
    void *steady = subscriber(zctx, "bscan/", 0);
    wait_wanted(p, OCT_METHOD_CFD, OCT_KIND_BSCAN, false, true);
    wait_counts(p, 1);
    octd_pub_counts c0, c1;
    octd_pub_get_counts(p, &c0);
    churn_arg a = {.p = p, .rounds = 2, .per_round = 100};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, churn_main, &a), 0);
    octd_frame_meta m = {.frame_id = 11};
    uint64_t frames = 0, drops = 0, last = 0;
    while (!atomic_load(&a.done)) {
        ck_assert_uint_eq(octd_pub_send_products(p, &f.slot, &m, &drops, &last), 2);
        frames++;
        sleep_ms(1); /* paced */
    }
    pthread_join(th, NULL);
    /* each churning prefix: its subscription and its end (waited for) */
    octd_pub_get_counts(p, &c1);
    ck_assert_uint_eq(c1.handed - c0.handed, frames);     /* bscan/cfd */
    ck_assert_uint_eq(c1.unwanted - c0.unwanted, frames); /* enface/cfd: nobody */
    char buf[64];
    ck_assert_int_eq(zmq_recv(p->sock, buf, sizeof buf, ZMQ_DONTWAIT), -1);
    ck_assert_int_eq(zmq_errno(), EAGAIN); /* no subscription message reached it */
    /* the steady subscriber got bscan/cfd images, byte for byte, in order */
    char topic[64], hdr[4096];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    uint64_t got = 0, prev = 0;
    while (recv_msg(steady, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen)) {
        ck_assert_str_eq(topic, "bscan/cfd");
        ck_assert_uint_eq(dlen, BYTES);
        ck_assert(memcmp(data, f.bscan, BYTES) == 0);
        const char *q = strstr(hdr, "\"image_seq\":");
        ck_assert_ptr_nonnull(q);
        uint64_t seq = strtoull(q + 12, NULL, 10);
        ck_assert(got == 0 || seq > prev);
        prev = seq;
        got++;
    }
    ck_assert_uint_gt(got, 0);
    zmq_close(steady);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    ck_assert_int_eq(atomic_load(&f.slot.refs), 1);
    fixture_free(&f);
}
END_TEST

/* A subscriber that never reads: the frame loop never blocks (every send
 * returns), and destroying the publisher ends its thread and releases every
 * reference the queued messages held. */
START_TEST(stalled_subscriber_released_on_destroy)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture f;
    fixture_init(&f, 99);
    void *zctx = zmq_ctx_new();
    void *sub = subscriber(zctx, "", 1);
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    bool got = false;
    got = await_status(p, sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    ck_assert_msg(got, "no status through the publisher thread in 40 s");
    octd_frame_meta m = {.frame_id = 2};
    for (int i = 0; i < 2000; i++) {
        uint64_t drops = 0, last = 0;
        octd_pub_send_products(p, &f.slot, &m, &drops, &last);
    }
    octd_pub_destroy(p); /* the subscriber is still connected, unread */
    ck_assert_int_eq(atomic_load(&f.slot.refs), 1);
    zmq_close(sub);
    zmq_ctx_term(zctx);
    fixture_free(&f);
}
END_TEST

/* The publisher thread falls behind (paused through the proxy's control
 * socket): the frame loop's sends still return at once, what the inproc hop
 * cannot take is counted as a drop (never silently lost), and once the
 * thread goes on the subscriber receives whole messages again. */
START_TEST(lagging_thread_counts_drops)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture f;
    fixture_init(&f, 4242);
    void *zctx = zmq_ctx_new();
    void *sub = subscriber(zctx, "", 0);
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    bool got = false;
    got = await_status(p, sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    ck_assert_msg(got, "no status through the publisher thread in 40 s");
    ck_assert_int_eq(zmq_send(p->ctl, "PAUSE", 5, 0), 5);
    octd_frame_meta m = {.frame_id = 5};
    uint64_t drops = 0, last = 0, sent = 0;
    /* the hop holds a bounded number of messages: drops must start */
    for (int i = 0; i < 100000 && drops == 0; i++)
        sent += octd_pub_send_products(p, &f.slot, &m, &drops, &last);
    ck_assert_msg(drops > 0, "no drop after %" PRIu64 " messages to a paused thread", sent);
    ck_assert_int_gt(atomic_load(&f.slot.refs), 1); /* queued, zero-copy */
    ck_assert_int_eq(zmq_send(p->ctl, "RESUME", 6, 0), 6);
    /* whole messages, with the payload intact */
    size_t images = 0;
    for (int tries = 0; tries < 400 && images < 4; tries++) {
        if (!recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen))
            continue;
        if (strcmp(topic, "bscan/cfd") == 0) {
            ck_assert_uint_eq(dlen, BYTES);
            ck_assert(memcmp(data, f.bscan, BYTES) == 0);
            images++;
        } else if (strcmp(topic, "enface/cfd") == 0) {
            ck_assert_uint_eq(dlen, BYTES);
            ck_assert(memcmp(data, f.enface, BYTES) == 0);
            images++;
        }
    }
    ck_assert_uint_ge(images, 4);
    zmq_close(sub);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    ck_assert_int_eq(atomic_load(&f.slot.refs), 1);
    fixture_free(&f);
}
END_TEST

/* Issue 21: subscribers that never read hold the zero-copy messages queued
 * for them, i.e. the pool's buffers.  With [publish] copies = publisher the
 * publisher thread copies each pooled image before the fan-out and releases
 * the buffer at once: the buffers come back although a stalled subscriber
 * is still connected, and a reading subscriber gets each image byte for
 * byte under its own topic (the inproc flag never shows).  A copy-only
 * buffer is copied by the frame loop, in both modes.  With copies = frame
 * (before r4) the stalled subscriber keeps holding the pooled buffers. */
static void pool_returns(int copies)
{
    cfg.pub_copies = copies;
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture a, b, c;
    fixture_init(&a, 1), fixture_init(&b, 2), fixture_init(&c, 3);
    b.slot.copy_only = true;
    void *zctx = zmq_ctx_new();
    void *stalled = subscriber(zctx, "", 1), *reader = subscriber(zctx, "bscan/", 0);
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    ck_assert(await_status(p, stalled, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
    /* the reader's subscription: images until one arrives */
    octd_frame_meta m = {.frame_id = 1};
    uint64_t drops = 0, last = 0;
    bool got = false;
    for (int tries = 0; tries < 400 && !got; tries++) {
        octd_pub_send_products(p, &a.slot, &m, &drops, &last);
        got = recv_msg(reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    }
    ck_assert_msg(got, "no image for the reader in 40 s");
    while (recv_msg(reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen))
        ;
    for (int i = 0; i < 50; i++)
        octd_pub_send_products(p, &a.slot, &m, &drops, &last);
    if (copies == OCT_PUB_COPIES_PUBLISHER) {
        wait_refs(&a.slot, 1);
    } else {
        sleep_ms(200);
        ck_assert_int_gt(atomic_load(&a.slot.refs), 1); /* the stalled one's queue */
    }
    /* a copy-only buffer (the pool ran dry), then pooled ones again */
    m.frame_id = 2;
    octd_pub_send_products(p, &b.slot, &m, &drops, &last);
    m.frame_id = 3;
    for (int i = 0; i < 50; i++)
        octd_pub_send_products(p, &c.slot, &m, &drops, &last);
    ck_assert_uint_eq(drops, 0);
    wait_refs(&b.slot, 1);
    if (copies == OCT_PUB_COPIES_PUBLISHER) {
        wait_refs(&c.slot, 1);
    } else {
        sleep_ms(200);
        ck_assert_int_gt(atomic_load(&c.slot.refs), 1);
    }
    /* the reader: frame 2's image, then frame 3's, intact, topic unflagged */
    int seen2 = 0, seen3 = 0;
    while (recv_msg(reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen)) {
        ck_assert_str_eq(topic, "bscan/cfd");
        ck_assert_uint_eq(dlen, BYTES);
        const fixture *f = strstr(hdr, "\"frame_id\":2,") ? &b : strstr(hdr, "\"frame_id\":3,") ? &c : &a;
        ck_assert_msg(memcmp(data, f->bscan, BYTES) == 0, "payload differs");
        seen2 += f == &b, seen3 += f == &c;
    }
    ck_assert_int_eq(seen2, 1);
    ck_assert_int_eq(seen3, 50);
    zmq_close(stalled);
    zmq_close(reader);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    ck_assert_int_eq(atomic_load(&a.slot.refs), 1);
    ck_assert_int_eq(atomic_load(&b.slot.refs), 1);
    ck_assert_int_eq(atomic_load(&c.slot.refs), 1);
    fixture_free(&a), fixture_free(&b), fixture_free(&c);
}

START_TEST(copy_mode_returns_pool) { pool_returns(OCT_PUB_COPIES_PUBLISHER); }
END_TEST

START_TEST(frame_copies_keep_pool_held) { pool_returns(OCT_PUB_COPIES_FRAME); }
END_TEST

/* copy_stream (the publisher's copies into cold buffers, r5) copies exactly
 * what memcpy does, whatever the size and the alignment of either end, and
 * writes nothing outside the destination. */
START_TEST(stream_copy_exact)
{
    enum { CAP = 300000, PAD = 64 };
    uint8_t *src = malloc(CAP + PAD), *dst = malloc(CAP + 2 * PAD);
    ck_assert(src && dst);
    uint64_t x = 12345;
    for (size_t i = 0; i < CAP + PAD; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = (uint8_t)(x >> 56);
    }
    static const size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 4096, 65537, 262144 + 513, CAP};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t so = 0; so < 3; so++)
            for (size_t doff = 0; doff < 20; doff += 7) {
                size_t n = sizes[k];
                memset(dst, 0xa5, CAP + 2 * PAD);
                copy_stream(dst + PAD + doff, src + so * 5, n);
                ck_assert_msg(memcmp(dst + PAD + doff, src + so * 5, n) == 0,
                              "%zu bytes, offsets %zu/%zu: differ", n, so * 5, doff);
                bool outside = false;
                for (size_t i = 0; i < PAD + doff; i++)
                    outside |= dst[i] != 0xa5;
                for (size_t i = PAD + doff + n; i < CAP + 2 * PAD; i++)
                    outside |= dst[i] != 0xa5;
                ck_assert_msg(!outside, "%zu bytes, offsets %zu/%zu: written outside", n, so * 5, doff);
            }
    free(src);
    free(dst);
}
END_TEST

/* [publish] copies = auto (r5): a pool of POOL_N fixtures with a gauge; the
 * test takes a free one as the frame loop does (refs 0 -> 1, held + 1),
 * sends it and drops its own reference.  Quiet (one reader): every pooled
 * image goes zero-copy, none is copied (the counters).  With a stalled
 * subscriber: zero-copy until more than half the pool is held, then copies,
 * so the frame loop always finds a free buffer; the pool comes back when
 * the stalled one goes.  Payloads arrive byte for byte either way. */
#define POOL_N 8

typedef struct auto_pool {
    fixture f[POOL_N];
    octd_pool_gauge g;
} auto_pool;

static void auto_pool_init(auto_pool *a)
{
    memset(&a->g, 0, sizeof a->g);
    atomic_init(&a->g.cap, POOL_N);
    for (int i = 0; i < POOL_N; i++) {
        fixture_init(&a->f[i], 1000 + (uint64_t)i);
        atomic_init(&a->f[i].slot.refs, 0); /* idle */
        a->f[i].slot.gauge = &a->g;
    }
}

/* A free fixture (as pool_acquire), waiting up to 20 s for one; NULL if
 * none came back. */
static fixture *auto_take(auto_pool *a)
{
    for (int tries = 0; tries < 4000; tries++) {
        for (int i = 0; i < POOL_N; i++) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&a->f[i].slot.refs, &zero, 1)) {
                atomic_fetch_add(&a->g.held, 1);
                return &a->f[i];
            }
        }
        sleep_ms(5);
    }
    return NULL;
}

/* Reads frame `id`'s two images from reader (other frames' are skipped),
 * checking them against f. */
static void read_frame(void *reader, uint64_t id, const fixture *f)
{
    char topic[64], hdr[8192], want[32];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    int got = 0;
    snprintf(want, sizeof want, "\"frame_id\":%" PRIu64 ",", id);
    for (int tries = 0; tries < 400 && got < 2;) {
        if (!recv_msg(reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen)) {
            tries++;
            continue;
        }
        if (strcmp(topic, "status") == 0 || !strstr(hdr, want))
            continue;
        const uint8_t *w = strcmp(topic, "bscan/cfd") == 0 ? f->bscan : f->enface;
        ck_assert_msg(strcmp(topic, "bscan/cfd") == 0 || strcmp(topic, "enface/cfd") == 0,
                      "topic '%s'", topic);
        ck_assert_uint_eq(dlen, BYTES);
        ck_assert_msg(memcmp(data, w, BYTES) == 0, "frame %" PRIu64 " %s: payload differs", id, topic);
        got++;
    }
    ck_assert_msg(got == 2, "frame %" PRIu64 ": %d of 2 images in 40 s", id, got);
}

static void auto_copies(bool stalled_peer)
{
    cfg.pub_copies = OCT_PUB_COPIES_AUTO;
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    static auto_pool a;
    auto_pool_init(&a);
    void *zctx = zmq_ctx_new();
    void *reader = subscriber(zctx, "", 0), *stalled = NULL;
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    ck_assert(await_status(p, reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
    if (stalled_peer) {
        stalled = subscriber(zctx, "", 1);
        ck_assert(await_status(p, stalled, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
    }
    uint64_t drops = 0, last = 0;
    for (uint64_t id = 1; id <= 200; id++) {
        fixture *f = auto_take(&a);
        ck_assert_msg(f, "frame %" PRIu64 ": every pooled buffer stayed held for 20 s", id);
        octd_frame_meta m = {.frame_id = id};
        ck_assert_uint_eq(octd_pub_send_products(p, &f->slot, &m, &drops, &last), 2);
        octd_slot_release(&f->slot);
        read_frame(reader, id, f);
    }
    ck_assert_uint_eq(drops, 0);
    octd_pub_counts c;
    octd_pub_get_counts(p, &c);
    ck_assert_uint_eq(c.frame_copies, 0);
    if (!stalled_peer) {
        ck_assert_msg(c.pub_copies == 0 && c.pub_zero_copy == 400, "quiet: %" PRIu64 " copies, %"
                      PRIu64 " zero-copy of 400 images", c.pub_copies, c.pub_zero_copy);
    } else {
        /* the stalled queue kept the first zero-copy images (at most half
         * the pool plus the one deciding), then copies */
        ck_assert_msg(c.pub_zero_copy >= 2 && c.pub_copies >= 300 && c.pub_copies + c.pub_zero_copy == 400,
                      "stalled: %" PRIu64 " copies, %" PRIu64 " zero-copy of 400 images",
                      c.pub_copies, c.pub_zero_copy);
        /* the stalled queue keeps what went zero-copy: at most half the
         * pool (the reader's last messages may still be on their way out) */
        int held = 0;
        for (int i = 0; i < 400 && (held = atomic_load(&a.g.held)) > POOL_N / 2; i++)
            sleep_ms(50);
        ck_assert_msg(held >= 1 && held <= POOL_N / 2, "%d of %d held with a stalled peer",
                      held, POOL_N);
        zmq_close(stalled); /* its queue's buffers come back */
    }
    /* ZeroMQ's I/O thread drops its reference just after the last write */
    for (int i = 0; i < 400 && atomic_load(&a.g.held) != 0; i++)
        sleep_ms(50);
    ck_assert_int_eq(atomic_load(&a.g.held), 0);
    for (int i = 0; i < POOL_N; i++)
        ck_assert_int_eq(atomic_load(&a.f[i].slot.refs), 0);
    zmq_close(reader);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    for (int i = 0; i < POOL_N; i++)
        fixture_free(&a.f[i]);
}

/* octd catching up (a quarter of the ring behind the frame it publishes):
 * a copy-only buffer's images are dropped and counted, not copied by the
 * frame loop; pooled ones still go; the next copy-only frame with octd on
 * time is copied and delivered byte for byte (r5). */
START_TEST(copy_only_behind_dropped)
{
    cfg.pub_copies = OCT_PUB_COPIES_AUTO;
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture a, b;
    fixture_init(&a, 31), fixture_init(&b, 32);
    b.slot.copy_only = true;
    void *zctx = zmq_ctx_new();
    void *reader = subscriber(zctx, "", 0);
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    ck_assert(await_status(p, reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
    uint64_t drops = 0, last = 0;
    octd_frame_meta m = {.frame_id = 1, .behind = true};
    ck_assert_uint_eq(octd_pub_send_products(p, &b.slot, &m, &drops, &last), 0);
    ck_assert_uint_eq(drops, 2);
    m.frame_id = 2; /* pooled: sent although behind */
    ck_assert_uint_eq(octd_pub_send_products(p, &a.slot, &m, &drops, &last), 2);
    m.frame_id = 3, m.behind = false;
    ck_assert_uint_eq(octd_pub_send_products(p, &b.slot, &m, &drops, &last), 2);
    ck_assert_uint_eq(drops, 2);
    read_frame(reader, 2, &a);
    read_frame(reader, 3, &b);
    octd_pub_counts c;
    octd_pub_get_counts(p, &c);
    ck_assert_uint_eq(c.behind_drops, 2);
    ck_assert_uint_eq(c.frame_copies, 2);
    zmq_close(reader);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    fixture_free(&a), fixture_free(&b);
}
END_TEST

START_TEST(auto_quiet_zero_copy) { auto_copies(false); }
END_TEST

START_TEST(auto_stalled_pool_comes_back) { auto_copies(true); }
END_TEST

/* The publisher thread's copies reuse their buffers: a subscriber that
 * reads each frame before the next costs a few buffers for 200 frames; a
 * stalled subscriber's queue holds copies (never the pool), and once it is
 * gone the buffers it held go back to the system within seconds, all but
 * COPY_KEEP per image size (issue 21: memory comes back after a churn). */
static int cache_idle(octd_pub *p, uint64_t *made, uint64_t *freed)
{
    pthread_mutex_lock(&p->cache.mu);
    int n = 0;
    for (int i = 0; i < COPY_CLASSES; i++)
        n += p->cache.cls[i].nfree;
    *made = p->cache.made, *freed = p->cache.freed;
    pthread_mutex_unlock(&p->cache.mu);
    return n;
}

START_TEST(copies_reuse_and_return)
{
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    fixture f;
    fixture_init(&f, 77);
    void *zctx = zmq_ctx_new();
    void *reader = subscriber(zctx, "", 0);
    char topic[64], hdr[8192];
    static uint8_t data[BYTES + 1];
    size_t dlen;
    ck_assert(await_status(p, reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
    octd_frame_meta m = {.frame_id = 1};
    uint64_t drops = 0, last = 0, made, freed;
    for (int i = 0; i < 200; i++) {
        ck_assert_uint_eq(octd_pub_send_products(p, &f.slot, &m, &drops, &last), 2);
        for (int got = 0; got < 2;) {
            ck_assert(recv_msg(reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
            if (strcmp(topic, "status") == 0)
                continue;
            const uint8_t *want = strcmp(topic, "bscan/cfd") == 0 ? f.bscan : f.enface;
            ck_assert_uint_eq(dlen, BYTES);
            ck_assert(memcmp(data, want, BYTES) == 0);
            got++;
        }
    }
    cache_idle(p, &made, &freed);
    ck_assert_msg(made <= 8, "%" PRIu64 " copy buffers made for 400 images read one by one", made);
    /* a stalled subscriber: its queue holds copies (the pooled buffer
     * comes back at once) */
    void *stalled = subscriber(zctx, "", 1);
    ck_assert(await_status(p, stalled, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen));
    for (int i = 0; i < 100; i++)
        octd_pub_send_products(p, &f.slot, &m, &drops, &last);
    wait_refs(&f.slot, 1);
    while (recv_msg(reader, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen))
        ;
    cache_idle(p, &made, &freed);
    ck_assert_msg(made >= 50, "only %" PRIu64 " copy buffers: the stalled queue holds no copies?", made);
    zmq_close(stalled); /* its queue's copies come back, then go */
    int idle = 0;
    for (int i = 0; i < 100; i++) {
        idle = cache_idle(p, &made, &freed);
        if (idle <= 2 * COPY_KEEP && freed + idle >= made)
            break;
        sleep_ms(50);
    }
    ck_assert_msg(idle <= 2 * COPY_KEEP && freed + idle >= made,
                  "%d idle copy buffers, %" PRIu64 " made, %" PRIu64 " freed after 5 s", idle,
                  made, freed);
    ck_assert_uint_eq(drops, 0);
    zmq_close(reader);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
    fixture_free(&f);
}
END_TEST

/* Create and destroy with nobody connected, several times (threads and
 * contexts do not pile up; ASan sees no leak). */
START_TEST(create_destroy_repeat)
{
    for (int i = 0; i < 20; i++) {
        octd_pub *p;
        oct_error e;
        ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
        send_status(p);
        octd_pub_destroy(p);
    }
}
END_TEST

/* The threads of this process, by id (at most 256 looked at). */
static int list_threads(pid_t *tid, int cap)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    while (d && n < cap && (de = readdir(d)))
        if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
            tid[n++] = (pid_t)atoi(de->d_name);
    if (d)
        closedir(d);
    return n;
}

static bool thread_name(pid_t tid, char *name, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "r");
    bool ok = f && fgets(name, (int)len, f);
    if (f)
        fclose(f);
    name[ok ? strcspn(name, "\n") : 0] = '\0';
    return ok;
}

/* [publish] io_threads, nice and cpus reach the threads the publisher
 * starts (ZeroMQ's I/O threads, its reaper, the publisher thread), and only
 * those: the caller keeps its nice value and CPUs; sndbuf is accepted. */
START_TEST(thread_options_applied)
{
    cpu_set_t mine;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu = -1; /* the highest CPU this process may use */
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine))
            cpu = c;
    errno = 0;
    int nice0 = getpriority(PRIO_PROCESS, (id_t)gettid());
    ck_assert_int_eq(errno, 0);
    int want = nice0 + 7 > 19 ? 19 : nice0 + 7; /* capped: a test run at nice 19 */
    pid_t before[256], after[256];
    int nb = list_threads(before, 256);
    cfg.pub_io_threads = 3;
    cfg.pub_nice = 7;
    cfg.pub_sndbuf = 16384;
    snprintf(cfg.pub_cpus, sizeof cfg.pub_cpus, "%d", cpu);
    octd_pub *p;
    oct_error e;
    ck_assert_msg(octd_pub_create(&p, &cfg, &e) == OCT_OK, "%s", e.msg);
    /* the publisher thread names, renices and pins itself when it starts */
    int na = 0, io = 0, publisher = 0, fresh = 0;
    for (int tries = 0; tries < 400 && !publisher; tries++) {
        na = list_threads(after, 256);
        for (int i = 0; i < na && !publisher; i++) {
            char name[32];
            cpu_set_t set;
            errno = 0;
            publisher = thread_name(after[i], name, sizeof name) &&
                        !strcmp(name, "octd-publish") &&
                        getpriority(PRIO_PROCESS, (id_t)after[i]) == want && errno == 0 &&
                        sched_getaffinity(after[i], sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
        }
        if (!publisher)
            sleep_ms(tries < 20 ? 5 : 25);
    }
    ck_assert_msg(publisher, "no publisher thread at nice %d + 7 on one CPU", nice0);
    /* ZeroMQ's I/O threads name themselves once they run: wait for all 3 */
    for (int tries = 0; tries < 400; tries++) {
        na = list_threads(after, 256);
        int named = 0;
        for (int i = 0; i < na; i++) {
            char name[32];
            named += thread_name(after[i], name, sizeof name) && !strncmp(name, "ZMQbg/IO/", 9);
        }
        if (named >= 3)
            break;
        sleep_ms(tries < 20 ? 5 : 25);
    }
    publisher = 0;
    for (int i = 0; i < na; i++) {
        bool old = false;
        for (int j = 0; j < nb && !old; j++)
            old = after[i] == before[j];
        if (old)
            continue;
        char name[32];
        if (!thread_name(after[i], name, sizeof name))
            continue; /* gone meanwhile */
        fresh++;
        io += strncmp(name, "ZMQbg/IO/", 9) == 0;
        publisher += strcmp(name, "octd-publish") == 0;
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)after[i]);
        ck_assert_msg(errno == 0 && nice == want, "thread %s: nice %d, expected %d + 7", name,
                      nice, nice0);
        cpu_set_t set;
        ck_assert_int_eq(sched_getaffinity(after[i], sizeof set, &set), 0);
        ck_assert_msg(CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set),
                      "thread %s: %d CPUs, expected only CPU %d", name, CPU_COUNT(&set), cpu);
    }
    ck_assert_int_eq(io, 3);
    ck_assert_int_eq(publisher, 1);
    ck_assert_int_ge(fresh, 5); /* and ZeroMQ's reaper */
    /* the caller untouched */
    cpu_set_t now;
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    ck_assert(CPU_EQUAL(&now, &mine));
    ck_assert_int_eq(getpriority(PRIO_PROCESS, (id_t)gettid()), nice0);
    /* and it still delivers */
    void *zctx = zmq_ctx_new();
    void *sub = subscriber(zctx, "status", 0);
    char topic[16], hdr[8192];
    uint8_t data[16];
    size_t dlen;
    ck_assert_msg(await_status(p, sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen),
                  "no status through the pinned, nicer threads");
    ck_assert_str_eq(topic, "status");
    zmq_close(sub);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
}
END_TEST

/* The fan-out's threads run at SCHED_OTHER even when the frame loop that
 * creates the publisher runs at SCHED_FIFO ([engine] priority): ZeroMQ's
 * I/O threads busy with a churning crowd must not hold its core. */
START_TEST(fan_out_never_real_time)
{
    struct sched_param sp = {.sched_priority = 1};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
        printf("SKIP fan_out_never_real_time: SCHED_FIFO is not permitted here\n");
        return;
    }
    pid_t before[256], after[256];
    int nb = list_threads(before, 256);
    octd_pub *p;
    oct_error e;
    oct_err rc = octd_pub_create(&p, &cfg, &e);
    sp.sched_priority = 0;
    ck_assert_int_eq(pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp), 0);
    ck_assert_msg(rc == OCT_OK, "%s", e.msg);
    int na = 0, fresh = 0;
    bool publisher = false;
    for (int tries = 0; tries < 400 && !publisher; tries++) {
        na = list_threads(after, 256);
        for (int i = 0; i < na && !publisher; i++) {
            char name[32];
            publisher = thread_name(after[i], name, sizeof name) && !strcmp(name, "octd-publish");
        }
        if (!publisher)
            sleep_ms(tries < 20 ? 5 : 25);
    }
    ck_assert_msg(publisher, "no publisher thread");
    for (int i = 0; i < na; i++) {
        bool old = false;
        for (int j = 0; j < nb && !old; j++)
            old = after[i] == before[j];
        char name[32];
        if (old || !thread_name(after[i], name, sizeof name))
            continue;
        fresh++;
        int pol = sched_getscheduler(after[i]);
        ck_assert_msg(pol == SCHED_OTHER, "thread %s: policy %d, expected SCHED_OTHER", name, pol);
    }
    ck_assert_int_ge(fresh, 4); /* 2 I/O threads, the reaper, the publisher thread */
    send_status(p);
    octd_pub_destroy(p);
}
END_TEST

/* [publish] cpus naming a CPU octd may not use is refused, named. */
START_TEST(cpus_not_allowed_named)
{
    cpu_set_t mine;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu = CPU_SETSIZE - 1;
    while (cpu > 0 && CPU_ISSET(cpu, &mine))
        cpu--;
    ck_assert(!CPU_ISSET(cpu, &mine));
    snprintf(cfg.pub_cpus, sizeof cfg.pub_cpus, "%d", cpu);
    octd_pub *p = (octd_pub *)&cfg;
    oct_error e;
    oct_err rc = octd_pub_create(&p, &cfg, &e);
    ck_assert_msg(rc == OCT_EINVAL, "%d: %s", (int)rc, e.msg);
    ck_assert_ptr_null(p);
    char want[64];
    snprintf(want, sizeof want, "CPU %d is not one octd may run on", cpu);
    ck_assert_msg(strstr(e.msg, "[publish] cpus") && strstr(e.msg, want) &&
                  strstr(e.msg, "test.ini"), "%s", e.msg);
    snprintf(cfg.pub_cpus, sizeof cfg.pub_cpus, "3-1");
    ck_assert_int_eq(octd_pub_create(&p, &cfg, &e), OCT_EINVAL);
    ck_assert_msg(strstr(e.msg, "[publish] cpus") && strstr(e.msg, "backwards"), "%s", e.msg);
}
END_TEST

START_TEST(bad_endpoint_named)
{
    snprintf(cfg.endpoints[1], sizeof cfg.endpoints[1], "bogus://nowhere");
    cfg.endpoint_count = 2;
    octd_pub *p = (octd_pub *)&cfg;
    oct_error e;
    ck_assert_int_eq(octd_pub_create(&p, &cfg, &e), OCT_EIO);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(e.msg, "bogus://nowhere") && strstr(e.msg, "test.ini"), "%s", e.msg);
}
END_TEST

int main(void)
{
    octd_log_set_level(LOG_WARNING);
    Suite *s = suite_create("publish");
    TCase *tc = tcase_create("publish");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, proxy_delivers_zero_copy);
    tcase_add_test(tc, unsubscribed_dropped_at_source);
    tcase_add_test(tc, wanted_follows_prefixes);
    tcase_add_test(tc, too_many_prefixes_all_wanted);
    tcase_add_test(tc, churn_never_reaches_frame_loop);
    tcase_add_test(tc, stalled_subscriber_released_on_destroy);
    tcase_add_test(tc, lagging_thread_counts_drops);
    tcase_add_test(tc, create_destroy_repeat);
    tcase_add_test(tc, copy_mode_returns_pool);
    tcase_add_test(tc, frame_copies_keep_pool_held);
    tcase_add_test(tc, copies_reuse_and_return);
    tcase_add_test(tc, stream_copy_exact);
    tcase_add_test(tc, auto_quiet_zero_copy);
    tcase_add_test(tc, auto_stalled_pool_comes_back);
    tcase_add_test(tc, copy_only_behind_dropped);
    tcase_add_test(tc, bad_endpoint_named);
    tcase_add_test(tc, thread_options_applied);
    tcase_add_test(tc, cpus_not_allowed_named);
    tcase_add_test(tc, fan_out_never_real_time);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
