/* zmq_deliver.c - how long ZeroMQ takes to deliver one volume-klin-disp frame's
 * images (8 messages of 3 parts: topic, ~500-byte header, payload 1,536,000 /
 * 38,400 / 102,400 / 98,304 bytes for CFD and MSI: 3.55 MB) from a PUB to a
 * SUB in another thread, as octd -> octbench: last message sent -> received.
 * Usage: zmq_deliver ENDPOINT FRAMES PERIOD_US [SNDBUF] [RCVBUF] [proxy]
 * proxy: inproc PUB -> XSUB/XPUB proxy thread -> ENDPOINT (octd's publisher thread). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}
static const size_t sizes[4] = {1536000, 38400, 102400, 98304};
static void *ctx;
static const char *ep;
static int frames, rcvbuf;
static volatile uint64_t t_send[100000], t_recv[100000];
static void *sub_thread(void *a)
{
    (void)a;
    void *s = zmq_socket(ctx, ZMQ_SUB);
    int hwm = 100000;
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (rcvbuf) zmq_setsockopt(s, ZMQ_RCVBUF, &rcvbuf, sizeof rcvbuf);
    zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    zmq_connect(s, ep);
    char buf[4096];
    int n = 0;
    while (n < frames * 8) {
        zmq_msg_t m;
        zmq_recv(s, buf, sizeof buf, 0);
        zmq_recv(s, buf, sizeof buf, 0);
        zmq_msg_init(&m);
        zmq_msg_recv(&m, s, 0);
        int f, k;
        memcpy(&f, zmq_msg_data(&m), sizeof f);
        memcpy(&k, (char *)zmq_msg_data(&m) + 4, sizeof k);
        zmq_msg_close(&m);
        n++;
        if (k == 7) t_recv[f] = now_ns();
        if (f == frames - 1 && k == 7) break;
    }
    zmq_close(s);
    return NULL;
}
static void *proxy_thread(void *a)
{
    void **socks = a;
    zmq_proxy(socks[0], socks[1], NULL);
    return NULL;
}
static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv)
{
    ep = argv[1];
    frames = atoi(argv[2]);
    long period = atol(argv[3]);
    int sndbuf = argc > 4 ? atoi(argv[4]) : 0;
    rcvbuf = argc > 5 ? atoi(argv[5]) : 0;
    int proxy = argc > 6 && !strcmp(argv[6], "proxy");
    ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_IO_THREADS, 2);
    void *pub, *xs = NULL, *xp = NULL;
    int hwm = 100000;
    if (proxy) {
        xp = zmq_socket(ctx, ZMQ_XPUB);
        xs = zmq_socket(ctx, ZMQ_XSUB);
        zmq_setsockopt(xp, ZMQ_SNDHWM, &hwm, sizeof hwm);
        if (sndbuf) zmq_setsockopt(xp, ZMQ_SNDBUF, &sndbuf, sizeof sndbuf);
        zmq_bind(xp, ep);
        zmq_bind(xs, "inproc://fl");
        pub = zmq_socket(ctx, ZMQ_PUB);
        zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_connect(pub, "inproc://fl");
        static void *socks[2];
        socks[0] = xs, socks[1] = xp;
        pthread_t pt;
        pthread_create(&pt, NULL, proxy_thread, socks);
    } else {
        pub = zmq_socket(ctx, ZMQ_PUB);
        zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
        if (sndbuf) zmq_setsockopt(pub, ZMQ_SNDBUF, &sndbuf, sizeof sndbuf);
        zmq_bind(pub, ep);
    }
    pthread_t th;
    pthread_create(&th, NULL, sub_thread, NULL);
    struct timespec w = {0, 300000000};
    nanosleep(&w, NULL);
    char *payload[8];
    for (int i = 0; i < 8; i++) payload[i] = calloc(1, sizes[i % 4]);
    char hdr[500];
    memset(hdr, 'x', sizeof hdr);
    for (int f = 0; f < frames; f++) {
        uint64_t t0 = now_ns();
        t_send[f] = t0;
        for (int k = 0; k < 8; k++) {
            memcpy(payload[k], &f, sizeof f);
            memcpy(payload[k] + 4, &k, sizeof k);
            if (k == 7) t_send[f] = now_ns(); /* as octd's t_pub_ns of the last message */
            zmq_send(pub, "enface/cfd", 10, ZMQ_SNDMORE);
            zmq_send(pub, hdr, sizeof hdr, ZMQ_SNDMORE);
            zmq_msg_t m; /* zero-copy, as octd's pooled product buffers */
            zmq_msg_init_data(&m, payload[k], sizes[k % 4], NULL, NULL);
            zmq_msg_send(&m, pub, 0);
        }
        while (now_ns() - t0 < (uint64_t)period * 1000) {
            struct timespec z = {0, 20000};
            nanosleep(&z, NULL);
        }
    }
    pthread_join(th, NULL);
    uint64_t *lat = malloc(sizeof *lat * frames);
    int n = 0;
    for (int f = frames / 10; f < frames; f++)
        if (t_recv[f] > t_send[f]) lat[n++] = t_recv[f] - t_send[f];
    qsort(lat, n, sizeof *lat, cmp);
    printf("%s sndbuf %d rcvbuf %d%s: %d frames of 3.55 MB: last message sent -> received p50 %.3f p90 %.3f p99 %.3f max %.3f ms\n",
           ep, sndbuf, rcvbuf, proxy ? " via proxy" : "", n, lat[n / 2] / 1e6, lat[n * 9 / 10] / 1e6, lat[n * 99 / 100] / 1e6,
           lat[n - 1] / 1e6);
    return 0;
}
