/* test_publish.c - unit tests of octd's publisher (daemon/publish.c, issue
 * 21): the frame loop's messages go through the publisher thread's proxy to
 * a real subscriber byte for byte, zero-copy payloads are released once the
 * subscriber has them, subscriptions are forwarded (a topic nobody wants is
 * dropped at the frame loop's socket), a lagging publisher thread costs
 * counted drops, never a wait, shutdown with a stalled subscriber
 * releases every reference and does not hang, and a bad endpoint is named.
 * Subscribers connect over ipc:// in a private directory; readers retry with
 * back-off under a generous deadline (no timing assertions). */
#include "../daemon/json.c"
#include "../daemon/publish.c"
#include "../daemon/sys.c"

#include <check.h>
#include <inttypes.h>
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
    /* the subscription reaches the frame loop's socket some time after
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

/* With only "status" subscribed, images are dropped at the frame loop's
 * socket: send returns with no reference held by ZeroMQ (a publisher that
 * forwarded everything to its thread would hold one per queued image). */
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
    for (int tries = 0; tries < 400 && !got; tries++) {
        send_status(p);
        got = recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    }
    ck_assert_msg(got, "no status through the publisher thread in 40 s");
    ck_assert_str_eq(topic, "status");
    ck_assert_ptr_nonnull(strstr(hdr, "\"pid\":42"));
    octd_frame_meta m = {.frame_id = 1};
    for (int i = 0; i < 50; i++) {
        uint64_t drops = 0, last = 0;
        ck_assert_uint_eq(octd_pub_send_products(p, &f.slot, &m, &drops, &last), 2);
        ck_assert_int_eq(atomic_load(&f.slot.refs), 1);
    }
    /* and the subscriber got none of them */
    while (recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen))
        ck_assert_str_eq(topic, "status");
    zmq_close(sub);
    zmq_ctx_term(zctx);
    octd_pub_destroy(p);
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
    for (int tries = 0; tries < 400 && !got; tries++) {
        send_status(p);
        got = recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    }
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
    for (int tries = 0; tries < 400 && !got; tries++) {
        send_status(p);
        got = recv_msg(sub, topic, sizeof topic, hdr, sizeof hdr, data, sizeof data, &dlen);
    }
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
    tcase_add_test(tc, stalled_subscriber_released_on_destroy);
    tcase_add_test(tc, lagging_thread_counts_drops);
    tcase_add_test(tc, create_destroy_repeat);
    tcase_add_test(tc, bad_endpoint_named);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
