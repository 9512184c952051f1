/* bench_ipc.c - shared-memory frame ring benchmark: producer -> consumer
 * copy throughput (GB/s) and commit -> available latency (p50/p99), for the
 * volume 200x192x1024 u16 and the B-scan 500x1024 u16.  The producer runs in
 * a thread of octbench (same code path as another process: the ring is a
 * POSIX shm object mapped twice). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "oct_ipc.h"

typedef struct ipc_case {
    const char *name;
    oct_geometry g;
    uint32_t slots;
} ipc_case;

typedef struct prod_arg {
    oct_ring_producer *p;
    const uint8_t *src;
    size_t fb;
    volatile int stop;
    bool paced;              /* latency mode: one frame, then wait for the consumer */
    uint64_t taken;          /* latency mode: frames the consumer has taken (atomic) */
    uint64_t produced;
} prod_arg;

static void *producer_main(void *arg)
{
    prod_arg *a = arg;
    uint64_t n = 0;
    unsigned seed = 12345;
    while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        if (a->paced) {
            /* wait until the previous frame was taken, then a random pause
             * (0..1 ms) so that commits fall anywhere in the consumer's sleep */
            while (__atomic_load_n(&a->taken, __ATOMIC_ACQUIRE) < n &&
                   !__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            }
            struct timespec ts = {0, (long)(rand_r(&seed) % 1000) * 1000};
            nanosleep(&ts, NULL);
        }
        void *d = oct_ring_producer_begin(a->p);
        memcpy(d, a->src, a->fb);
        oct_ring_producer_commit(a->p, n, oct_time_realtime_ns());
        n++;
    }
    a->produced = n;
    return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static double pct(const uint64_t *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[i < n ? i : n - 1] / 1e3; /* us */
}

static int run_case(const octbench_opts *o, const ipc_case *c, FILE *json)
{
    char name[64];
    snprintf(name, sizeof name, "/octbench-ipc-%d", (int)getpid());
    oct_ring_config cfg = {c->g, c->slots, 0600};
    oct_error e;
    prod_arg a = {0};
    if (oct_ring_producer_create(&a.p, name, &cfg, &e) != OCT_OK) {
        fprintf(stderr, "octbench ipc: %s\n", e.msg);
        return 1;
    }
    oct_ring_consumer *cons;
    if (oct_ring_consumer_open(&cons, name, &e) != OCT_OK) {
        fprintf(stderr, "octbench ipc: %s\n", e.msg);
        oct_ring_producer_close(a.p, true);
        return 1;
    }
    a.fb = (size_t)oct_geometry_frame_bytes(&c->g);
    uint8_t *src = malloc(a.fb), *dst = malloc(a.fb);
    if (!src || !dst) {
        fprintf(stderr, "octbench ipc: out of memory\n");
        free(src);
        free(dst);
        oct_ring_consumer_close(cons);
        oct_ring_producer_close(a.p, true);
        return 1;
    }
    for (size_t i = 0; i < a.fb; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    memset(dst, 0, a.fb);
    a.src = src;

    /* 1. throughput: producer as fast as it can, consumer policy all */
    double secs = o->quick ? 1.0 : 3.0;
    pthread_t th;
    pthread_create(&th, NULL, producer_main, &a);
    uint64_t t0 = oct_time_monotonic_ns(), bytes = 0, taken = 0;
    while (oct_time_monotonic_ns() - t0 < (uint64_t)(secs * 1e9)) {
        oct_frame_info info;
        oct_err err = oct_ring_consumer_next(cons, OCT_POLICY_ALL, dst, a.fb, 1000, &info, &e);
        if (err == OCT_OK) {
            bytes += a.fb;
            taken++;
        } else if (err != OCT_ETORN) {
            fprintf(stderr, "octbench ipc: %s\n", e.msg);
            break;
        }
    }
    double dt = (double)(oct_time_monotonic_ns() - t0) / 1e9;
    __atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    oct_ring_stats st;
    oct_ring_consumer_stats(cons, &st);
    double gbs = (double)bytes / dt / 1e9;
    double prod_fps = (double)a.produced / dt;

    /* 2. latency: one frame at a time, commit -> seen and commit -> copied */
    size_t want = o->quick ? 30 : (a.fb > (64u << 20) ? 100 : 500);
    uint64_t *lat_seen = calloc(want, sizeof *lat_seen), *lat_copy = calloc(want, sizeof *lat_copy);
    size_t got = 0;
    if (!lat_seen || !lat_copy) {
        fprintf(stderr, "octbench ipc: out of memory\n");
        free(lat_seen);
        free(lat_copy);
        free(src);
        free(dst);
        oct_ring_consumer_close(cons);
        oct_ring_producer_close(a.p, true);
        return 1;
    }
    oct_ring_consumer_close(cons);
    if (oct_ring_consumer_open(&cons, name, &e) != OCT_OK) { /* start at the newest */
        fprintf(stderr, "octbench ipc: %s\n", e.msg);
        free(lat_seen);
        free(lat_copy);
        free(src);
        free(dst);
        oct_ring_producer_close(a.p, true);
        return 1;
    }
    /* skip the frame left from part 1 */
    oct_frame_info info;
    oct_ring_consumer_next(cons, OCT_POLICY_LATEST, dst, a.fb, 0, &info, NULL);
    a.stop = 0;
    a.paced = true;
    a.taken = 0;
    /* the producer counts from 0 again and waits on a.taken */
    pthread_create(&th, NULL, producer_main, &a);
    while (got < want) {
        oct_err err = oct_ring_consumer_next(cons, OCT_POLICY_LATEST, dst, a.fb, 2000, &info, &e);
        uint64_t now = oct_time_realtime_ns();
        if (err == OCT_OK) {
            lat_seen[got] = info.commit_ns > info.t_acq_ns ? info.commit_ns - info.t_acq_ns : 0;
            lat_copy[got] = now > info.t_acq_ns ? now - info.t_acq_ns : 0;
            got++;
        } else if (err != OCT_ETORN) {
            fprintf(stderr, "octbench ipc: %s\n", e.msg);
            break;
        }
        __atomic_store_n(&a.taken, got, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    int rc = got == want ? 0 : 1;
    if (got) {
        qsort(lat_seen, got, sizeof *lat_seen, cmp_u64);
        qsort(lat_copy, got, sizeof *lat_copy, cmp_u64);
        printf("%-24s %9.1f %8.2f %9.1f %7llu %5llu %10.1f %10.1f %10.1f %10.1f\n", c->name,
               a.fb / 1e6, gbs, prod_fps, (unsigned long long)st.frames_lost,
               (unsigned long long)st.frames_torn, pct(lat_seen, got, 0.5),
               pct(lat_seen, got, 0.99), pct(lat_copy, got, 0.5), pct(lat_copy, got, 0.99));
        if (json)
            fprintf(json,
                    "{\"part\":\"ipc\",\"case\":\"%s\",\"frame_bytes\":%zu,\"copy_gb_s\":%.3f,"
                    "\"frames_taken\":%llu,\"frames_lost\":%llu,\"frames_torn\":%llu,"
                    "\"producer_fps\":%.1f,\"avail_p50_us\":%.1f,\"avail_p99_us\":%.1f,"
                    "\"copied_p50_us\":%.1f,\"copied_p99_us\":%.1f,\"samples\":%zu}\n",
                    c->name, a.fb, gbs, (unsigned long long)taken,
                    (unsigned long long)st.frames_lost, (unsigned long long)st.frames_torn,
                    prod_fps, pct(lat_seen, got, 0.5), pct(lat_seen, got, 0.99),
                    pct(lat_copy, got, 0.5), pct(lat_copy, got, 0.99), got);
    }
    free(lat_seen);
    free(lat_copy);
    free(src);
    free(dst);
    oct_ring_consumer_close(cons);
    oct_ring_producer_close(a.p, true);
    return rc;
}

int octbench_ipc(const octbench_opts *o)
{
    static const ipc_case cases[] = {
        {"bscan 500x1024 u16", {1024, 500, 1, OCT_SAMPLE_U16, 0}, 8},
        {"volume 200x192x1024 u16", {1024, 200, 192, OCT_SAMPLE_U16, 0}, 4},
    };
    FILE *json = o->json ? fopen(o->json, "a") : NULL;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("\nshared-memory ring (producer thread -> consumer, %ld CPUs; copy: policy all,\n"
           "latency: one frame at a time, commit -> seen / commit -> copied, us)\n", cpus);
    printf("%-24s %9s %8s %9s %7s %5s %10s %10s %10s %10s\n", "case", "frame MB", "GB/s",
           "prod f/s", "lost", "torn", "avail p50", "avail p99", "copy p50", "copy p99");
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        rc |= run_case(o, &cases[i], json);
    if (json)
        fclose(json);
    return rc;
}
