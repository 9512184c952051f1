/* bench_e2e.c - `octbench --e2e`: producer -> frame ring -> octd -> ZeroMQ
 * -> subscriber, on one machine (issue 6).
 *
 * Per workload (volume 200x192x1024 u16: CFD + MSI en-face Q = 40 + confocal
 * + both cross-sections; B-scan 500x1024 u16: CFD + MSI R = 512):
 *  1. the producer alone (pre-generated frames memcpy'd into a private ring
 *     by several threads) is measured, so its limit is known;
 *  2. octd is started as a child process (fork/exec before this process
 *     touches CUDA) with a generated octd.ini and profile, private shared
 *     object names and an ipc:// endpoint, and a SUB thread counts messages;
 *  3. phases: unpaced, then (policy all, frames lost) paced at lower rates
 *     until none is lost, or one phase at --rate.  Each phase: warm-up, then
 *     --seconds measured; frames/s = distinct frames received per second,
 *     latency = receive time of a frame's last message - its t_acq_ns
 *     (CLOCK_REALTIME, set by the producer at commit), loss from octd's
 *     status block (skipped/torn/drops), produced - processed, and the
 *     subscriber's image_seq gaps;
 *  4. with CUDA, the pinned (registered) host -> device rate of one frame,
 *     measured through the engine, is the ceiling the GB/s are compared to.
 * Producers (--producer, issue 19.1): `copy` copies each frame into its slot
 * (the acquisition program's own limit shows); `commit` fills every slot once
 * and then only stamps and commits headers, as a digitizer's DMA would, so
 * the table shows octd's own ceiling.  Unpaced, `commit` stays at most half
 * the ring ahead of the last frame the subscriber received (else it would
 * lap the ring millions of times a second and every frame would be torn).
 * --hostile S:C (issue 21.2): per item an unpaced phase and (policy all) one
 * paced at 90 % of its rate, each without and then with S stalled
 * subscribers (connected, never read; the first with ZeroMQ's default
 * options, the others RCVHWM 16 to bound their memory) and C churning ones
 * (each re-connects every 200 ms), run in a child process (bench_hostile.c);
 * the ratios, octd's own rate and its CPU per frame by thread are printed.
 * --window octd: the unpaced commit producer follows octd's last published
 * frame (status block) instead of the subscriber's last received one.
 * Paced (issue 19), the producer sleeps until PRODUCER_SPIN_NS before a frame
 * is due and spins the rest (--producer-cpu pins it), and each row is
 * followed by its lateness (commit - due time), so that a late producer's
 * burst is not taken for octd's latency; octd's frame-loop profile
 * (daemon/loop_prof.h) is printed from its log after each run.  The
 * subscriber (bench_sub.c) takes --topics only, over --sub-sockets
 * connections.  --sub-shm: octd.ini gets [publish] shm_endpoint (an ipc://
 * endpoint here) and shm_name (a private image area), and the subscriber
 * reads that endpoint's header-only messages and copies each image out of
 * the area before it counts as received; images overwritten first are
 * "lost in shm" (a line after each row); --hostile's crowd stays on the
 * normal endpoint.  --sub-tcp: the normal endpoint is tcp://127.0.0.1 at a
 * free port instead of ipc:// (the transport's share of the delivery).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "bench_e2e.h"
#include "oct_config.h"
#include "oct_ipc.h"

#define MAX_COPY_THREADS 8

/* ---------------- small helpers ---------------- */
static uint64_t now_rt(void) { return oct_time_realtime_ns(); }
static uint64_t now_mono(void) { return oct_time_monotonic_ns(); }

void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "octbench e2e: %s: %s\n", path, strerror(errno));
        return false;
    }
    bool ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        fprintf(stderr, "octbench e2e: cannot write %s\n", path);
    return ok;
}

/* ---------------- multi-threaded frame copy ---------------- */
typedef struct copy_pool {
    pthread_t th[MAX_COPY_THREADS];
    int n; /* helper threads; the caller copies the first chunk */
    pthread_barrier_t start, end;
    void *dst;
    const void *src;
    size_t bytes;
    bool quit;
} copy_pool;

typedef struct copy_arg {
    copy_pool *p;
    int idx;
} copy_arg;

static void copy_chunk(copy_pool *p, int idx)
{
    int parts = p->n + 1;
    size_t per = (p->bytes / (size_t)parts + 4095) & ~(size_t)4095;
    size_t off = per * (size_t)idx;
    if (off < p->bytes)
        memcpy((uint8_t *)p->dst + off, (const uint8_t *)p->src + off,
               p->bytes - off < per ? p->bytes - off : per);
}

static void *copy_thread(void *arg)
{
    copy_arg *a = arg;
    for (;;) {
        pthread_barrier_wait(&a->p->start);
        if (a->p->quit)
            return NULL;
        copy_chunk(a->p, a->idx);
        pthread_barrier_wait(&a->p->end);
    }
}

static bool copy_pool_start(copy_pool *p, int helpers, copy_arg *args)
{
    memset(p, 0, sizeof *p);
    p->n = helpers;
    if (pthread_barrier_init(&p->start, NULL, (unsigned)helpers + 1) ||
        pthread_barrier_init(&p->end, NULL, (unsigned)helpers + 1))
        return false;
    for (int i = 0; i < helpers; i++) {
        args[i] = (copy_arg){p, i + 1};
        if (pthread_create(&p->th[i], NULL, copy_thread, &args[i]) != 0) {
            p->n = i; /* not reached in practice; the barrier count is then wrong */
            return false;
        }
    }
    return true;
}

static void copy_pool_run(copy_pool *p, void *dst, const void *src, size_t bytes)
{
    if (p->n == 0) {
        memcpy(dst, src, bytes);
        return;
    }
    p->dst = dst;
    p->src = src;
    p->bytes = bytes;
    pthread_barrier_wait(&p->start);
    copy_chunk(p, 0);
    pthread_barrier_wait(&p->end);
}

static void copy_pool_stop(copy_pool *p)
{
    if (p->n > 0) {
        p->quit = true;
        pthread_barrier_wait(&p->start);
        for (int i = 0; i < p->n; i++)
            pthread_join(p->th[i], NULL);
    }
    pthread_barrier_destroy(&p->start);
    pthread_barrier_destroy(&p->end);
}

/* ---------------- producer ---------------- */
typedef struct producer {
    oct_ring_producer *ring;
    copy_pool pool;
    copy_arg args[MAX_COPY_THREADS];
    uint8_t *frames; /* nsrc pre-generated frames */
    int nsrc;
    size_t frame_bytes;
    uint64_t next_id;
    /* phase control */
    pthread_t th;
    atomic_bool stop;
    double rate; /* frames/s, 0 = unpaced */
    uint64_t produced;
    /* commit producer: headers only after the first fill */
    bool commit;
    const _Atomic uint64_t *rx_id; /* unpaced commit: last frame id received, +1 */
    oct_status *st;                /* ... or (--window octd) octd's last published frame */
    uint64_t window;               /* ... and stay at most this far ahead of it */
    /* paced: how late each commit was against its due time (issue 19) */
    int cpu;                       /* --producer-cpu (-1: not pinned) */
    uint32_t *late_us;             /* per frame of the phase, microseconds */
    size_t nlate, cap_late;
    uint64_t burst, burst_max;     /* frames committed back to back while overdue */
} producer;

/* Paced: sleep until this long before a frame is due, then spin: a sleep's
 * wake-up is late by tens of microseconds (more on a busy host), and a
 * digitizer is never late. */
#define PRODUCER_SPIN_NS 100000ull

/* the ring's default depth (below: why) */
#define RING_MIN_BYTES (128.0 * 1024 * 1024)
#define RING_MAX_SLOTS 1024u

static void producer_one(producer *p)
{
    void *dst = oct_ring_producer_begin(p->ring);
    if (!p->commit)
        copy_pool_run(&p->pool, dst, p->frames + (p->next_id % (uint64_t)p->nsrc) * p->frame_bytes,
                      p->frame_bytes);
    oct_ring_producer_commit(p->ring, p->next_id, now_rt());
    p->next_id++;
    p->produced++;
}

/* Fills every slot with a real frame (the commit producer's data from then on). */
static void producer_fill(producer *p, uint32_t slots)
{
    for (uint32_t i = 0; i < slots; i++) {
        void *dst = oct_ring_producer_begin(p->ring);
        memcpy(dst, p->frames + (p->next_id % (uint64_t)p->nsrc) * p->frame_bytes, p->frame_bytes);
        oct_ring_producer_commit(p->ring, p->next_id++, now_rt());
    }
}

/* The frame the unpaced commit producer stays a window ahead of: the last
 * one the subscriber received (default), or with --window octd the last one
 * octd published (its status block), so that what delays the subscriber
 * (another process short of CPU, churning peers on its ZeroMQ I/O thread)
 * shows in its latency, not in octd's rate. */
static uint64_t window_base(producer *p)
{
    if (!p->st)
        return atomic_load(p->rx_id);
    oct_status_block b;
    return oct_status_read(p->st, &b) == OCT_OK ? b.last_frame_id + 1 : 0;
}

void producer_window(producer *p, oct_status *st) { p->st = st; }

/* Records how late frame `due` was committed (paced phases). */
static void producer_late(producer *p, uint64_t due, uint64_t t)
{
    uint64_t late = t > due ? t - due : 0;
    /* overdue by more than a period: committed right after the previous one */
    if (late * p->rate > 1e9)
        p->burst++;
    else
        p->burst = 0;
    if (p->burst > p->burst_max)
        p->burst_max = p->burst;
    if (p->nlate == p->cap_late) {
        size_t cap = p->cap_late ? 2 * p->cap_late : 65536;
        uint32_t *n = realloc(p->late_us, cap * sizeof *n);
        if (!n)
            return;
        p->late_us = n;
        p->cap_late = cap;
    }
    uint64_t us = late / 1000;
    p->late_us[p->nlate++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void *producer_thread(void *arg)
{
    producer *p = arg;
    if (p->cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(p->cpu, &one);
        int rc = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        if (rc != 0)
            fprintf(stderr, "octbench e2e: --producer-cpu %d: %s (not pinned)\n", p->cpu,
                    strerror(rc));
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* this thread's sleeps end on time */
    uint64_t t0 = now_mono();
    while (!atomic_load(&p->stop)) {
        if (p->rate > 0) {
            /* absolute schedule: no drift; a late frame is committed at once */
            uint64_t due = t0 + (uint64_t)((double)p->produced * 1e9 / p->rate);
            uint64_t t = now_mono();
            if (due > t + PRODUCER_SPIN_NS) {
                uint64_t wait = due - t - PRODUCER_SPIN_NS;
                sleep_ms(wait > 50000000ull ? 50.0 : (double)wait / 1e6);
                continue;
            }
            while ((t = now_mono()) < due)
                ; /* spin the last stretch */
            producer_one(p);
            producer_late(p, due, now_mono());
            continue;
        } else if (p->commit && p->rx_id) {
            /* as fast as octd takes them, a bounded distance ahead (2 ms at most:
             * octd may skip or drop frames the subscriber then never sees) */
            for (int i = 0; i < 100 && p->next_id > window_base(p) + p->window &&
                            !atomic_load(&p->stop); i++)
                sleep_ms(0.02);
        }
        producer_one(p);
    }
    return NULL;
}

static void producer_phase_start(producer *p, double rate)
{
    p->rate = rate;
    p->produced = 0;
    p->nlate = 0;
    p->burst = p->burst_max = 0;
    atomic_store(&p->stop, false);
    if (pthread_create(&p->th, NULL, producer_thread, p) != 0) {
        fprintf(stderr, "octbench e2e: cannot start the producer thread\n");
        exit(1);
    }
}

static void producer_phase_stop(producer *p)
{
    atomic_store(&p->stop, true);
    pthread_join(p->th, NULL);
}

/* Random-phase spectra with a few reflectors: realistic enough for timing
 * (the work does not depend on the values). */
static void gen_frames(uint8_t *out, int nsrc, const oct_geometry *g)
{
    size_t count = (size_t)g->samples * g->ascans * g->lines;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < nsrc; k++) {
        uint16_t *f = (uint16_t *)(out + (size_t)k * count * 2);
        for (size_t j = 0; j < (size_t)g->ascans * g->lines; j++) {
            double d1 = 40 + (double)((j + (size_t)k * 7) % 200), d2 = 300;
            for (uint32_t n = 0; n < g->samples; n++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                double v = 20000 + 6000 * cos(2 * M_PI * d1 * n / g->samples) +
                           3000 * cos(2 * M_PI * d2 * n / g->samples) + (double)(s % 512);
                f[j * g->samples + n] = (uint16_t)v;
            }
        }
    }
}

/* ---------------- one workload ---------------- */
static pid_t octd_pid; /* the octd child of the workload being run */

static void status_now(oct_status *st, oct_status_block *b)
{
    if (oct_status_read(st, b) != OCT_OK)
        memset(b, 0, sizeof *b);
}

/* Waits until octd's processed count stops moving (the pipeline drained). */
static void wait_quiet(oct_status *st, producer *pr, double max_ms)
{
    oct_status_block b;
    status_now(st, &b);
    uint64_t last = b.frames_processed + b.frames_skipped + b.frames_torn;
    double waited = 0;
    int still = 0;
    while (waited < max_ms && still < 4) {
        sleep_ms(50);
        waited += 50;
        oct_ring_producer_heartbeat(pr->ring);
        status_now(st, &b);
        uint64_t v = b.frames_processed + b.frames_skipped + b.frames_torn;
        still = v == last ? still + 1 : 0;
        last = v;
    }
}

void run_phase(const workload *w, producer *pr, subscriber *sub, oct_status *st,
                      double rate, double warm_s, double meas_s, phase_result *r)
{
    memset(r, 0, sizeof *r);
    r->rate_asked = rate;
    oct_status_block b0, b1;
    status_now(st, &b0);
    pthread_mutex_lock(&sub->mu);
    uint64_t gaps0 = sub->gaps, msgs0 = sub->msgs, bytes0 = sub->bytes, lost0 = sub->shm_lost;
    sub->nlat = 0;
    sub->frames_in_win = sub->partial_in_win = 0;
    sub->win_lo = UINT64_MAX; /* nothing measured during warm-up */
    sub->win_hi = UINT64_MAX;
    pthread_mutex_unlock(&sub->mu);

    producer_phase_start(pr, rate);
    sleep_ms(warm_s * 1000);
    double cpu0 = octd_cpu_s(octd_pid);
    octd_thread_counts th0[OCTD_THREAD_GROUPS], th1[OCTD_THREAD_GROUPS];
    octd_thread_counts_get(octd_pid, th0);
    double lc0[3], lc1[3];
    system_lost_cpu(lc0);
    oct_status_block w0, w1;
    status_now(st, &w0);
    uint64_t t0 = now_rt();
    pthread_mutex_lock(&sub->mu);
    sub->win_lo = t0;
    pthread_mutex_unlock(&sub->mu);
    sleep_ms(meas_s * 1000);
    uint64_t t1 = now_rt();
    status_now(st, &w1);
    r->octd_cpu_s = octd_cpu_s(octd_pid) - cpu0;
    octd_thread_counts_get(octd_pid, th1);
    system_lost_cpu(lc1);
    for (int k = 0; k < 3; k++)
        r->lost_cpu_s[k] = lc1[k] - lc0[k];
    for (int g = 0; g < OCTD_THREAD_GROUPS; g++) {
        r->cpu_thread_s[g] = th1[g].cpu_s - th0[g].cpu_s;
        r->runq_thread_s[g] = th1[g].runq_s - th0[g].runq_s;
    }
    r->nvcsw_loop = th1[0].nvcsw - th0[0].nvcsw;
    r->octd_fps = (double)(w1.frames_processed - w0.frames_processed) / ((double)(t1 - t0) / 1e9);
    pthread_mutex_lock(&sub->mu);
    sub->win_hi = t1;
    pthread_mutex_unlock(&sub->mu);
    producer_phase_stop(pr);
    if (pr->nlate) { /* paced: the producer's own lateness over the phase */
        double period_us = 1e6 / rate;
        for (size_t i = 0; i < pr->nlate; i++)
            r->late_frames += pr->late_us[i] > period_us;
        qsort(pr->late_us, pr->nlate, sizeof *pr->late_us, cmp_u32);
        r->late_p50_us = pr->late_us[pr->nlate / 2];
        r->late_p99_us = pr->late_us[(size_t)((double)(pr->nlate - 1) * 0.99)];
        r->late_max_us = pr->late_us[pr->nlate - 1];
        r->late_burst = pr->burst_max;
    }
    wait_quiet(st, pr, 3000);
    sleep_ms(100); /* the last messages reach the subscriber */
    status_now(st, &b1);

    r->skip_part[0] = w0.frames_skipped - b0.frames_skipped;
    r->skip_part[1] = w1.frames_skipped - w0.frames_skipped;
    r->skip_part[2] = b1.frames_skipped - w1.frames_skipped;
    pthread_mutex_lock(&sub->mu);
    sub_finish_all(sub);
    r->seconds = (double)(t1 - t0) / 1e9;
    r->frames = sub->frames_in_win;
    r->partial = sub->partial_in_win;
    r->gaps = sub->gaps - gaps0;
    r->msgs = sub->msgs - msgs0;
    r->bytes = sub->bytes - bytes0;
    r->shm_lost = sub->shm_lost - lost0;
    r->shm = sub->shm;
    if (sub->nlat) {
        qsort(sub->lat, sub->nlat, sizeof *sub->lat, cmp_u64);
        r->p50 = (double)sub->lat[sub->nlat / 2] / 1e6;
        r->p99 = (double)sub->lat[(size_t)((double)(sub->nlat - 1) * 0.99)] / 1e6;
        r->pmax = (double)sub->lat[sub->nlat - 1] / 1e6;
        /* the frame loop's part: commit -> last message handed to ZeroMQ */
        uint64_t *fl = malloc(sub->nlat * sizeof *fl);
        size_t nfl = 0;
        for (size_t i = 0; fl && i < sub->nlat; i++) {
            const octbench_stages *x = &sub->st[i];
            if (x->ns[0] || x->ns[2]) /* stamped */
                fl[nfl++] = x->ns[0] + x->ns[1] + x->ns[2] + x->ns[3];
        }
        if (nfl) {
            qsort(fl, nfl, sizeof *fl, cmp_u64);
            r->fl_p50 = (double)fl[nfl / 2] / 1e6;
            r->fl_p99 = (double)fl[(size_t)((double)(nfl - 1) * 0.99)] / 1e6;
        }
        free(fl);
    }
    pthread_mutex_unlock(&sub->mu);
    r->fps = (double)r->frames / r->seconds;
    r->ascans_s = r->fps * w->g.ascans * w->g.lines;
    r->gbs = r->fps * (double)oct_geometry_frame_bytes(&w->g) / 1e9;
    r->produced = pr->produced;
    r->processed = b1.frames_processed - b0.frames_processed;
    r->skipped = b1.frames_skipped - b0.frames_skipped;
    r->torn = b1.frames_torn - b0.frames_torn;
    r->drops = b1.publish_drops - b0.publish_drops;
    r->lost = (int64_t)r->produced - (int64_t)r->processed;
}

/* One row; subs: the hostile subscribers ("-" none). */
void print_phase(const workload *w, const char *backend, const char *prod,
                        const char *policy, const char *subs, const phase_result *r, FILE *json)
{
    char rate[32];
    if (r->rate_asked > 0)
        snprintf(rate, sizeof rate, "%.0f/s", r->rate_asked);
    else
        snprintf(rate, sizeof rate, "unpaced");
    printf("%-7s %-4s %-6s %-6s %-9s %-9s %9.1f %8.2fM %7.2f %8.3f %8.3f %8.3f %8" PRIu64
           " %8" PRIu64 " %6" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %6" PRId64 "\n",
           w->name, backend, prod, policy, rate, subs, r->fps, r->ascans_s / 1e6, r->gbs, r->p50,
           r->p99, r->pmax, r->produced, r->processed, r->skipped, r->torn, r->drops, r->gaps,
           r->lost);
    if (r->rate_asked > 0)
        printf("# %s at %.0f/s: producer commit - due time p50 / p99 / max %.0f / %.0f / %.0f "
               "us; %" PRIu64 " frames more than a period late, longest back-to-back burst %"
               PRIu64 "\n", w->name, r->rate_asked, r->late_p50_us, r->late_p99_us,
               r->late_max_us, r->late_frames, r->late_burst);
    if (r->skipped)
        printf("# %s: octd skipped %" PRIu64 " frames in the warm-up, %" PRIu64 " in the measured "
               "window, %" PRIu64 " after it\n", w->name, r->skip_part[0], r->skip_part[1],
               r->skip_part[2]);
    if (r->seconds > 0)
        printf("# %s: octd's threads in the measured %.2f s, CPU / waiting for a CPU, ms: frame "
               "loop %.1f / %.1f (%" PRIu64 " involuntary switches), publisher %.1f / %.1f, "
               "ZeroMQ %.1f / %.1f, engine/other %.1f / %.1f; the machine's CPUs in irq / "
               "softirq / steal %.0f / %.0f / %.0f ms\n",
               w->name, r->seconds, 1e3 * r->cpu_thread_s[0], 1e3 * r->runq_thread_s[0],
               r->nvcsw_loop, 1e3 * r->cpu_thread_s[1], 1e3 * r->runq_thread_s[1],
               1e3 * r->cpu_thread_s[2], 1e3 * r->runq_thread_s[2], 1e3 * r->cpu_thread_s[3],
               1e3 * r->runq_thread_s[3], 1e3 * r->lost_cpu_s[0], 1e3 * r->lost_cpu_s[1],
               1e3 * r->lost_cpu_s[2]);
    if (r->shm)
        printf("# %s: subscriber through shared memory: gaps %" PRIu64 ", lost in shm %" PRIu64
               " (overwritten before they were copied); %" PRIu64 " messages, %.2f MB of images "
               "copied in the phase (warm-up included)\n",
               w->name, r->gaps, r->shm_lost, r->msgs, (double)r->bytes / 1e6);
    if (json)
        fprintf(json,
                "{\"part\":\"e2e\",\"workload\":\"%s\",\"backend\":\"%s\",\"producer\":\"%s\","
                "\"subscribers\":\"%s\",\"policy\":\"%s\","
                "\"rate\":%.1f,\"seconds\":%.3f,\"frames_s\":%.2f,\"ascans_s\":%.0f,\"gb_s\":%.3f,"
                "\"lat_p50_ms\":%.4f,\"lat_p99_ms\":%.4f,\"lat_max_ms\":%.4f,\"produced\":%" PRIu64
                ",\"processed\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"torn\":%" PRIu64
                ",\"drops\":%" PRIu64 ",\"gaps\":%" PRIu64 ",\"lost\":%" PRId64
                ",\"producer_late_p99_us\":%.0f,\"producer_late_max_us\":%.0f,"
                "\"producer_late_frames\":%" PRIu64 ",\"producer_burst\":%" PRIu64,
                w->name, backend, prod, subs, policy, r->rate_asked, r->seconds, r->fps, r->ascans_s, r->gbs,
                r->p50, r->p99, r->pmax, r->produced, r->processed, r->skipped, r->torn, r->drops,
                r->gaps, r->lost, r->late_p99_us, r->late_max_us, r->late_frames, r->late_burst);
    if (json && r->shm)
        fprintf(json, ",\"sub_shm\":true,\"shm_lost\":%" PRIu64, r->shm_lost);
    if (json)
        fprintf(json, "}\n");
}

static bool no_loss(const phase_result *r)
{
    return r->lost <= 0 && r->skipped == 0 && r->torn == 0 && r->drops == 0 && r->gaps == 0 &&
           r->shm_lost == 0;
}

/* Producer alone: frames/s into a private ring nobody reads. */
static double measure_producer(producer *p, const char *name, const oct_ring_config *rc,
                               double seconds)
{
    /* the same producer (its copy threads wait on its own barriers), another ring */
    oct_error e;
    oct_ring_producer *saved = p->ring;
    if (oct_ring_producer_create(&p->ring, name, rc, &e) != OCT_OK) {
        fprintf(stderr, "octbench e2e: %s\n", e.msg);
        p->ring = saved;
        return -1;
    }
    for (uint32_t i = 0; i < rc->slot_count; i++) /* fault the slots in first */
        producer_one(p);
    producer_phase_start(p, 0);
    uint64_t t0 = now_mono();
    sleep_ms(seconds * 1000);
    producer_phase_stop(p);
    double fps = (double)p->produced / ((double)(now_mono() - t0) / 1e9);
    oct_ring_producer_close(p->ring, true);
    p->ring = saved;
    p->next_id = 0;
    return fps;
}

/* After octd stopped: its frame loop's profile over the run (frames.c logs
 * it when the path unbinds), and whether its product pool ran out. */
static void print_frame_loop(const char *log, const char *wname)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "frame loop: ");
        if (!p) /* the pool ran out: images copied in the frame loop */
            p = strstr(line, "product buffers are held");
        if (p)
            printf("# %s: octd %s", wname, p);
    }
    if (f)
        fclose(f);
}

/* After octd stopped: the frames each engine published over the whole run
 * (octd logs them at exit), as shares of the unpaced rate. */
static void print_engine_shares(const char *log, const char *wname, double unpaced_fps)
{
    FILE *f = fopen(log, "r");
    char line[512], name[8][160];
    uint64_t n[8], total = 0;
    int k = 0;
    while (f && fgets(line, sizeof line, f) && k < 8) {
        const char *p = strstr(line, "engine ");
        const char *q = p ? strstr(p, " frames published") : NULL;
        const char *c = q ? strstr(p, "): ") : NULL;
        if (!c || c > q)
            continue;
        snprintf(name[k], sizeof name[k], "%.*s", (int)(c + 1 - p), p);
        n[k] = strtoull(c + 3, NULL, 10);
        total += n[k++];
    }
    if (f)
        fclose(f);
    for (int i = 0; i < k; i++)
        printf("# %s: %s: %" PRIu64 " frames of the run = %.0f%%, ~%.1f of the unpaced %.1f "
               "frames/s%s\n", wname, name[i], n[i], total ? 100.0 * n[i] / total : 0,
               total ? unpaced_fps * n[i] / total : 0, unpaced_fps,
               strstr(name[i], "taken out") ? " (taken out)" : "");
}

/* Angiography (issue 18), workloads named angio*: a frame is one position of
 * R = lines repeated B-scans, CFD only (no masks); struct + decor + ssada
 * (K = 4) and the en-face slab_max of each over [D/4, D/2); "angio-align"
 * with axial repeat alignment. */
static int angio_profile(char *text, size_t len, const workload *w)
{
    const oct_geometry *g = &w->g;
    const uint32_t D = g->samples / 2 + 1;
    return snprintf(text, len,
                    "# generated by octbench --e2e (angiography)\n"
                    "geometry: {samples: %u, ascans: %u, lines: %u, sample_type: u16, "
                    "sample_shift: 0, repeats: %u}\n"
                    "methods: [cfd]\n"
                    "window: {type: hann, param: 0.0}\n"
                    "freq_cutoff: 8\n"
                    "background: {mode: frame_mean}\n"
                    "angio: {metrics: [struct, decor, ssada], bands: 4, band_width: 1.0, "
                    "align: %s}\n"
                    "slab: {start: %u, end: %u}\n"
                    "products: [slab_max]\n",
                    g->samples, g->ascans, g->lines, g->lines,
                    strcmp(w->name, "angio-align") ? "off" : "axial", D / 4, D / 2);
}

/* --sub-shm: octd.ini [publish] shm_endpoint (and shm_name, area NULL: one
 * of --publish-keys) appended to keys; false when they do not fit. */
static bool shm_keys(char *keys, size_t cap, const char *endpoint, const char *area)
{
    size_t l = strlen(keys);
    int n = snprintf(keys + l, cap - l, "shm_endpoint = %s\n%s%s%s", endpoint,
                     area ? "shm_name = " : "", area ? area : "", area ? "\n" : "");
    return n > 0 && (size_t)n < cap - l;
}

/* The image areas a killed octd may have left: NAME, and NAME.I per engine. */
static void unlink_areas(const char *name, uint32_t engines)
{
    shm_unlink(name);
    for (uint32_t i = 1; i < engines; i++) {
        char n[80];
        snprintf(n, sizeof n, "%s.%u", name, i);
        shm_unlink(n);
    }
}

/* --trace DIR: the measured phase's frames as received, one CSV line each
 * (CLOCK_REALTIME ns: acquired, taken, submitted, done, published,
 * received), in DIR/WORKLOAD-<unix ms>.csv: where a late frame's time went,
 * and what octd did with the frames before it. */
static void write_trace(const char *dir, const char *wname, subscriber *sub)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s-%" PRIu64 ".csv", dir, wname, now_rt() / 1000000);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "octbench e2e: --trace %s: %s\n", path, strerror(errno));
        return;
    }
    fputs("frame_id,acq_ns,take_ns,sub_ns,done_ns,pub_ns,rx_ns\n", f);
    pthread_mutex_lock(&sub->mu);
    for (size_t i = 0; i < sub->nlat; i++) {
        const octbench_stages *x = &sub->st[i];
        uint64_t t = x->acq;
        fprintf(f, "%" PRIu64 ",%" PRIu64, x->id, t);
        for (int k = 0; k < OCTBENCH_STAGES; k++)
            fprintf(f, ",%" PRIu64, t += x->ns[k]);
        fputc('\n', f);
    }
    pthread_mutex_unlock(&sub->mu);
    if (fclose(f) == 0)
        printf("# %s: trace of %zu frames in %s\n", wname, sub->nlat, path);
}

/* --sub-tcp: a loopback port free now (the kernel's pick for port 0; octd
 * binds it a moment later, and a taker in between makes octd fail to start
 * with "cannot bind", not a wrong result); 0 if none */
static int free_tcp_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    int err = errno; /* the failed call's, for the caller's message */
    if (fd >= 0)
        close(fd);
    errno = err;
    return port;
}

static int run_workload(const octbench_opts *o, const workload *w, bool commit,
                        const char *devices, const char *octd_path, const char *tmp, FILE *json,
                        double *best_gbs, double *sust_gbs, tails_acc *acc)
{
    double unpaced_fps = 0;
    pid_t me = getpid();
    char ring[64], ctl[64], stn[64], ring_alone[64], ini[PATH_MAX], prof[PATH_MAX],
        masks[PATH_MAX], log[PATH_MAX], endpoint[PATH_MAX + 16], shm_ep[PATH_MAX + 16],
        area[64];
    snprintf(ring, sizeof ring, "/octbench-%d-%s-frames", (int)me, w->name);
    snprintf(ring_alone, sizeof ring_alone, "/octbench-%d-%s-alone", (int)me, w->name);
    snprintf(ctl, sizeof ctl, "/octbench-%d-%s-control", (int)me, w->name);
    snprintf(stn, sizeof stn, "/octbench-%d-%s-status", (int)me, w->name);
    snprintf(ini, sizeof ini, "%s/%s.ini", tmp, w->name);
    snprintf(prof, sizeof prof, "%s/%s.yaml", tmp, w->name);
    snprintf(masks, sizeof masks, "%s/%s-masks.npy", tmp, w->name);
    snprintf(log, sizeof log, "%s/%s-octd.log", tmp, w->name);
    if (o->sub_tcp) {
        int port = free_tcp_port();
        if (!port) {
            fprintf(stderr, "octbench e2e: --sub-tcp: no free loopback TCP port: %s\n", strerror(errno));
            return 1;
        }
        snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
    } else {
        snprintf(endpoint, sizeof endpoint, "ipc://%s/%s.pub", tmp, w->name);
    }
    snprintf(shm_ep, sizeof shm_ep, "ipc://%s/%s-shm.pub", tmp, w->name);
    snprintf(area, sizeof area, "/octbench-%d-%s-images", (int)me, w->name);
    const char *backend = o->backend == OCT_BACKEND_CPU ? "cpu" : o->backend == OCT_BACKEND_CUDA ? "cuda" : "auto";
    const char *policy = o->policy == 0 ? "latest" : "all";
    const char *prod = commit ? "commit" : "copy";
    const oct_geometry *g = &w->g;
    size_t fb = oct_geometry_frame_bytes(g);
    int rc_out = 1;
    pid_t pid = -1;
    oct_status *st = NULL;
    subscriber sub;
    bool sub_on = false;
    producer pr;
    memset(&pr, 0, sizeof pr);

    /* masks: mirror spectra at R depths spread over the range */
    if (w->masks) {
        size_t n = (size_t)w->masks * g->samples;
        float *m = malloc(n * sizeof *m);
        if (!m)
            return 1;
        for (uint32_t r = 0; r < w->masks; r++) {
            double d = 2.0 + (double)r * ((double)g->samples / 2 - 4) / w->masks;
            for (uint32_t k = 0; k < g->samples; k++)
                m[(size_t)r * g->samples + k] = (float)(1000 * cos(2 * M_PI * d * k / g->samples));
        }
        uint64_t shape[2] = {w->masks, g->samples};
        oct_error e;
        oct_err rc = oct_npy_save(masks, OCT_DTYPE_F32, 2, shape, m, &e);
        free(m);
        if (rc != OCT_OK) {
            fprintf(stderr, "octbench e2e: %s\n", e.msg);
            return 1;
        }
    }
    char text[16384];
    int tl = !strncmp(w->name, "angio", 5) ? angio_profile(text, sizeof text, w) : snprintf(text, sizeof text,
             "# generated by octbench --e2e\n"
             "geometry: {samples: %u, ascans: %u, lines: %u, sample_type: u16, sample_shift: 0}\n"
             "methods: [cfd, msi]\n"
             "window: {type: hann, param: 0.0}\n"
             "freq_cutoff: 8\n"
             "background: {mode: %s}\n"
             "msi:\n"
             "  masks: {file: %s, sample_type: f32, count: %u, normalize: false}\n"
             "  lag_window: [-10, 10]\n"
             "%s",
             g->samples, g->ascans, g->lines, w->background ? w->background : "none", masks,
             w->masks, w->profile_extra);
    if (tl < 0 || (size_t)tl >= sizeof text || !write_text(prof, text))
        return 1;
    char keys[1024] = ""; /* --engine-keys: one line per K=V */
    for (const char *k = o->engine_keys; k && *k;) {
        size_t n = strcspn(k, ","), l = strlen(keys);
        snprintf(keys + l, sizeof keys - l, "%.*s\n", (int)n, k);
        k += n + (k[n] == ',');
    }
    char pkeys[1024] = ""; /* --publish-keys: the same for [publish] */
    for (const char *k = o->publish_keys; k && *k;) {
        size_t n = strcspn(k, ","), l = strlen(pkeys);
        snprintf(pkeys + l, sizeof pkeys - l, "%.*s\n", (int)n, k);
        k += n + (k[n] == ',');
    }
    /* and --sub-shm's endpoint, its image area under a name of ours */
    if (o->sub_shm &&
        !shm_keys(pkeys, sizeof pkeys, shm_ep, strstr(pkeys, "shm_name") ? NULL : area))
        return 1;
    tl = snprintf(text, sizeof text,
             "[engine]\nbackend = %s\nthreads = %d\n%s%s%s%s[ring]\nframes = %s\ncontrol = %s\nstatus = %s\npolicy = %s\n"
             "%s%s%s[publish]\nendpoint = %s\nsndhwm = %d\n%s[profile]\npath = %s\n"
             "[log]\nlevel = info\n",
             backend, o->threads, keys, devices ? "devices = " : "", devices ? devices : "",
             devices ? "\n" : "", ring, ctl, stn, policy, o->zero_copy ? "zero_copy = " : "",
             o->zero_copy ? o->zero_copy : "", o->zero_copy ? "\n" : "", endpoint,
             o->sndhwm > 0 ? o->sndhwm : 16, pkeys, prof);
    if (tl < 0 || (size_t)tl >= sizeof text || !write_text(ini, text))
        return 1;

    /* producer: pre-generated frames, copy threads for big frames */
    pr.nsrc = 4;
    pr.frame_bytes = fb;
    pr.frames = malloc((size_t)pr.nsrc * fb);
    if (!pr.frames) {
        fprintf(stderr, "octbench e2e: out of memory for %d frames of %zu bytes\n", pr.nsrc, fb);
        return 1;
    }
    gen_frames(pr.frames, pr.nsrc, g);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Half the cores (at most 8) copy big frames: one thread moves about
     * 5-10 GB/s, and the producer must not be the limit (issue 6). */
    int helpers = fb >= (8u << 20) ? (int)(ncpu >= 16 ? 7 : ncpu >= 8 ? 3 : ncpu >= 4 ? 1 : 0) : 0;
    const char *ct = getenv("OCTBENCH_COPY_THREADS"); /* total copy threads, 1..8 */
    if (ct && atoi(ct) >= 1 && atoi(ct) <= MAX_COPY_THREADS)
        helpers = atoi(ct) - 1;
    if (!copy_pool_start(&pr.pool, helpers, pr.args)) {
        fprintf(stderr, "octbench e2e: cannot start copy threads\n");
        free(pr.frames);
        return 1;
    }
    /* Several engines keep several frames each in flight (3 per GPU, read in
     * place from the ring): the ring and the commit producer's lead grow with
     * them, else the producer, not octd, bounds the rate (issue 20). */
    uint32_t engines = 1;
    for (const char *c = devices; c && *c; c++)
        engines += *c == ',';
    /* The ring holds at least RING_MIN_BYTES of frames, as an acquisition
     * program on a shared machine sizes it: with 32 slots of small B-scans
     * (14 ms at 2,200 frames/s) policy `all` lost frames at 90 % of the
     * unpaced rate on 2 cores with no subscriber at all, i.e. the ring's
     * depth, not what --hostile measures (README, issue 21).  Frames of
     * 16 MiB and more: 8 slots (the 200x192x1024 volume: 629 MB). */
    uint32_t slots = (fb >= (16u << 20) ? 8 : 32) * engines;
    while (fb < (16u << 20) && (double)slots * (double)fb < RING_MIN_BYTES &&
           slots < RING_MAX_SLOTS)
        slots *= 2;
    oct_ring_config rcfg = {.geom = *g, .slot_count = slots, .mode = 0600};
    if (o->ring_slots > 0)
        rcfg.slot_count = (uint32_t)o->ring_slots;
    pr.cpu = o->producer_cpu - 1;
    pr.commit = commit;
    /* a quarter of the ring, 4 to 8 frames per engine: deeper rings keep the
     * unpaced commit producer's queue (and so its latency) as it was */
    uint64_t win = rcfg.slot_count / 4;
    pr.window = win < 4 * engines ? 4 * engines : win > 8 * engines ? 8 * engines : win;
    double alone = measure_producer(&pr, ring_alone, &rcfg, o->quick ? 0.3 : 1.0);
    if (commit)
        printf("# %s %ux%ux%u u16, %.1f MB/frame: commit producer alone (headers only, %u "
               "slots): %.0f frames/s = %.2f GB/s\n",
               w->name, g->lines, g->ascans, g->samples, fb / 1e6, rcfg.slot_count, alone,
               alone * (double)fb / 1e9);
    else
        printf("# %s %ux%ux%u u16, %.1f MB/frame: producer alone (%d copy thread(s), %u slots): "
               "%.0f frames/s = %.2f GB/s\n",
               w->name, g->lines, g->ascans, g->samples, fb / 1e6, helpers + 1, rcfg.slot_count,
               alone, alone * (double)fb / 1e9);

    oct_error e;
    if (oct_ring_producer_create(&pr.ring, ring, &rcfg, &e) != OCT_OK) {
        fprintf(stderr, "octbench e2e: %s\n", e.msg);
        goto out;
    }
    /* fault the pages in, frame ids from 0; the commit producer's data */
    producer_fill(&pr, rcfg.slot_count);
    pid = octd_pid = start_octd(octd_path, ini, log);
    if (pid < 0) {
        fprintf(stderr, "octbench e2e: fork: %s\n", strerror(errno));
        goto out;
    }
    /* wait for octd: status block, engine planned, our ring attached */
    {
        uint64_t epoch = oct_ring_producer_header(pr.ring)->epoch;
        bool ready = false;
        for (int i = 0; i < 1200 && !ready; i++) { /* 60 s: CUDA planning may take a while */
            oct_ring_producer_heartbeat(pr.ring);
            int ws;
            if (waitpid(pid, &ws, WNOHANG) == pid) {
                fprintf(stderr, "octbench e2e: octd exited early\n");
                pid = -1;
                print_log_tail(log);
                goto out;
            }
            if (!st && oct_status_open(&st, stn, NULL) != OCT_OK)
                st = NULL;
            if (st) {
                oct_status_block b;
                status_now(st, &b);
                ready = b.pid == (uint64_t)pid && b.ring_epoch == epoch && b.backend[0] &&
                        b.state == OCT_STATE_ONLINE;
            }
            if (!ready)
                sleep_ms(50);
        }
        if (!ready) {
            fprintf(stderr, "octbench e2e: octd did not come online within 60 s\n");
            print_log_tail(log);
            goto out;
        }
    }
    oct_status_block b;
    status_now(st, &b);
    if (!sub_start(&sub, o->sub_shm ? shm_ep : endpoint, o->topics, o->sub_sockets, o->sub_shm))
        goto out;
    sub_on = true;
    pr.rx_id = &sub.rx_id;
    if (o->window_octd)
        pr.st = st;
    /* slow joiner: the subscription must reach the PUB socket; and one
     * untimed frame through octd (engine warm-up, pinned pools) */
    for (int i = 0; i < 6; i++) {
        sleep_ms(50);
        oct_ring_producer_heartbeat(pr.ring);
    }
    /* the untimed frame is counted first: octd makes its product buffers as
     * it binds the frame path (an image area of 35 registered slots takes
     * about a second on the H200), and a count that has not moved yet is
     * not a drained pipeline */
    status_now(st, &b);
    uint64_t before = b.frames_processed + b.frames_skipped + b.frames_torn;
    producer_one(&pr);
    for (int i = 0; i < 300 && before == b.frames_processed + b.frames_skipped + b.frames_torn; i++) {
        sleep_ms(50);
        oct_ring_producer_heartbeat(pr.ring);
        status_now(st, &b);
    }
    wait_quiet(st, &pr, 5000);
    printf("# octd: backend %.*s, device %.*s, policy %s, endpoint %s%s%s\n",
           (int)sizeof b.backend, b.backend, (int)sizeof b.device, b.device, policy, endpoint,
           devices ? ", [engine] devices = " : ", one engine", devices ? devices : "");
    if (o->sub_shm)
        printf("# subscriber: through shared memory, on [publish] shm_endpoint %s (copies each "
               "image out of the image area)%s\n", shm_ep,
               o->hostile ? "; the hostile subscribers on the endpoint above" : "");

    double warm = o->quick ? 0.3 : 1.0;
    double meas = o->seconds > 0 ? o->seconds : o->quick ? 1.0 : 4.0;
    phase_result r, first;
    printf("%-7s %-4s %-6s %-6s %-9s %-9s %9s %9s %7s %8s %8s %8s %8s %8s %6s %5s %5s %5s %6s\n",
           "work", "be", "prod", "policy", "rate", "subs", "frames/s", "A-scans/s", "GB/s",
           "p50 ms", "p99 ms", "max ms", "produced", "process", "skip", "torn", "drops", "gaps",
           "lost");
    if (o->hostile) {
        hostile_phases(o, w, &pr, &sub, st, endpoint, backend, prod, policy, warm, meas, json);
        *best_gbs = *sust_gbs = 0;
        rc_out = 0;
        goto out;
    }
    run_phase(w, &pr, &sub, st, o->rate, warm, meas, &r);
    print_phase(w, backend, prod, policy, "-", &r, json);
    if (acc) { /* --runs: this run's latencies */
        pthread_mutex_lock(&sub.mu);
        octbench_tails_add(acc, sub.lat, sub.nlat, r.p50, r.p99, r.pmax,
                           no_loss(&r) ? 0 : r.lost > 0 ? r.lost : 1);
        octbench_tails_stages(acc, sub.st, sub.nlat);
        pthread_mutex_unlock(&sub.mu);
    }
    if (o->trace)
        write_trace(o->trace, w->name, &sub);
    first = r;
    unpaced_fps = r.fps;
    double best = no_loss(&r) ? r.gbs : 0;
    if (o->policy != 0 && o->rate <= 0 && !no_loss(&r) && r.fps > 0) {
        /* the highest paced rate without loss: a few steps down from the sustained one */
        static const double full_steps[] = {0.95, 0.85, 0.7, 0.5}, quick_steps[] = {0.85, 0.5};
        const double *steps = o->quick ? quick_steps : full_steps;
        int nsteps = o->quick ? 2 : 4;
        bool found = false;
        for (int i = 0; i < nsteps && !found; i++) {
            run_phase(w, &pr, &sub, st, first.fps * steps[i], warm, meas, &r);
            print_phase(w, backend, prod, policy, "-", &r, json);
            if (no_loss(&r)) {
                found = true;
                best = r.gbs;
                printf("# %s: highest measured rate without loss (policy all, %s producer): %.0f "
                       "frames/s = %.2f GB/s\n", w->name, prod, r.rate_asked, r.gbs);
            }
        }
        if (!found)
            printf("# %s: frames were lost at every rate tried\n", w->name);
    } else if (o->policy != 0 && no_loss(&r)) {
        printf("# %s: no frame lost at %s (%s producer)\n", w->name,
               o->rate > 0 ? "the asked rate" : "the unpaced rate", prod);
    }
    *best_gbs = best;
    *sust_gbs = first.gbs;
    /* the path octd used */
    {
        FILE *f = fopen(log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            if (strstr(line, "frame path:") || strstr(line, "no direct DMA"))
                printf("# octd: %s", strstr(line, "frame path:") ? strstr(line, "frame path:")
                                                                  : strstr(line, "ring"));
            /* placement and real-time settings (issues 19.2, 20.1) */
            else if ((strstr(line, "NUMA node") && !strstr(line, "planned")) ||
                     strstr(line, "memory locked") || strstr(line, "SCHED_FIFO") ||
                     strstr(line, "[engine] lock_memory") || strstr(line, "timer_slack_ns"))
                printf("# octd: %s", strstr(line, "octd: ") ? strstr(line, "octd: ") + 6 : line);
        }
        if (f)
            fclose(f);
    }
    rc_out = first.frames > 0 ? 0 : 1;
    if (rc_out)
        fprintf(stderr, "octbench e2e: %s: no frame was received\n", w->name);
out:
    if (sub_on)
        sub_stop(&sub);
    if (pid > 0) {
        int x = stop_octd(pid);
        if (x != 0) {
            fprintf(stderr, "octbench e2e: octd exited with %d\n", x);
            print_log_tail(log);
            rc_out = 1;
        } else if (rc_out) {
            print_log_tail(log);
        }
        print_frame_loop(log, w->name);
        if (devices)
            print_engine_shares(log, w->name, unpaced_fps);
        if (o->hostile)
            print_publisher_counts(log, w->name);
    }
    if (st)
        oct_status_close(st, false);
    if (pr.ring)
        oct_ring_producer_close(pr.ring, true);
    copy_pool_stop(&pr.pool);
    free(pr.frames);
    free(pr.late_us);
    shm_unlink(ctl);
    shm_unlink(stn);
    if (o->sub_shm)
        unlink_areas(area, engines);
    unlink(ini);
    unlink(prof);
    unlink(masks);
    if (!rc_out && !getenv("OCTBENCH_KEEP_LOGS")) /* set: octd's logs stay in the run's directory */
        unlink(log);
    else if (!rc_out)
        printf("# octd log kept: %s\n", log);
    return rc_out;
}

/* Pinned (registered) host -> device rate of one frame, through the engine. */
static double pinned_h2d_gbs(const workload *w)
{
    oct_setup s;
    oct_setup_default(&s);
    s.geom = w->g;
    s.backend = OCT_BACKEND_CUDA;
    s.flags = OCT_SETUP_QUICK_PLAN;
    oct_params p;
    oct_params_default(&p);
    p.products = OCT_PRODUCT_BIT(w->g.lines > 1 ? OCT_KIND_CONFOCAL : OCT_KIND_BSCAN);
    oct_engine *eng = NULL;
    oct_error e;
    if (oct_engine_create(&eng, &s, &p, &e) != OCT_OK)
        return -1;
    size_t fb = oct_geometry_frame_bytes(&w->g);
    void *buf = NULL;
    double gbs = -1;
    oct_products *out = oct_products_create();
    if (out && posix_memalign(&buf, 4096, fb) == 0) {
        memset(buf, 0, fb);
        if (oct_engine_register_host(eng, buf, fb, &e) == OCT_OK) {
            double t[9];
            int n = 0;
            for (int i = 0; i < 9; i++) {
                oct_stage_times st;
                if (oct_engine_process(eng, buf, fb, out, &e) != OCT_OK)
                    break;
                oct_engine_stage_times(eng, &st);
                if (i > 0 && st.h2d_ms > 0)
                    t[n++] = st.h2d_ms;
            }
            if (n > 0) {
                for (int i = 1; i < n; i++) /* insertion sort for the median */
                    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
                        double x = t[j];
                        t[j] = t[j - 1];
                        t[j - 1] = x;
                    }
                gbs = (double)fb / (t[n / 2] * 1e6);
            }
            oct_engine_unregister_host(eng, buf);
        }
    }
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    free(buf);
    return gbs;
}

/* Whether --only asks for workload w (volume-klin-disp only by name). */
static bool wants(const octbench_opts *o, const workload *w)
{
    if (o->only && strcmp(o->only, "e2e"))
        return !strcmp(o->only, w->name);
    return !w->on_request;
}

/* --runs N: the workload N times (a fresh octd each), then p99 over the runs
 * and the latency distribution of every measured frame of all runs. */
static int run_runs(const octbench_opts *o, const workload *w, bool commit, const char *octd_path,
                    const char *tmp, FILE *json, double *best_gbs, double *sust_gbs)
{
    if (o->runs <= 1)
        return run_workload(o, w, commit, NULL, octd_path, tmp, json, best_gbs, sust_gbs, NULL);
    tails_acc *acc = calloc(1, sizeof *acc);
    if (!acc)
        return 1;
    int rc = 0;
    const char *prod = commit ? "commit" : "copy";
    for (int k = 0; k < o->runs; k++) {
        printf("# %s: run %d of %d (%s producer, %.0f frames/s)\n", w->name, k + 1, o->runs, prod,
               o->rate);
        double b = 0, su = 0;
        int before = acc->runs;
        if (run_workload(o, w, commit, NULL, octd_path, tmp, json, &b, &su, acc))
            rc = 1;
        if (k == 0 || b < *best_gbs)
            *best_gbs = b; /* loss-free in every run: the worst */
        if (k == 0 || su < *sust_gbs)
            *sust_gbs = su;
        if (acc->runs == before) /* this run measured nothing */
            octbench_tails_add(acc, NULL, 0, 0, 0, 0, -1);
    }
    /* issue 19's targets: p99 <= 4 ms for volumes, <= 1 ms for B-scans */
    octbench_tails_print(acc, w->name, prod, o->rate, w->g.lines > 1 ? 4.0 : 1.0, json);
    free(acc->lat);
    free(acc->st);
    free(acc);
    return rc;
}

int octbench_e2e(const octbench_opts *o)
{
    static const workload full[] = {
        {"volume", {1024, 200, 192, OCT_SAMPLE_U16, 0}, 512,
         "enface: {start: 20, step: 10, count: 40}\nxsec: {h_index: 96, v_index: 100}\n"
         "products: [enface, confocal, xsec_h, xsec_v]\n", NULL, false},
        {"bscan", {1024, 500, 1, OCT_SAMPLE_U16, 0}, 512, "products: [bscan]\n", NULL, false},
        /* issue 19: the volume with bench_engine.c's volume-klin-disp profile (sinc 21
         * k-linearisation of a cubic k(n), dispersion a2 = 40, a3 = 5, frame-mean
         * background); coefficients 0.96 M, 0.08 M, -0.04 M as there */
        {"volume-klin-disp", {1024, 200, 192, OCT_SAMPLE_U16, 0}, 512,
         "enface: {start: 20, step: 10, count: 40}\nxsec: {h_index: 96, v_index: 100}\n"
         "products: [enface, confocal, xsec_h, xsec_v]\n"
         "klin: {interp: sinc, taps: 21, coefs: [0, 983.04, 81.92, -40.96]}\n"
         "dispersion: {a2: 40, a3: 5, k0: 0.5}\n", "frame_mean", true},
    };
    static const workload quick[] = {
        {"volume", {256, 32, 16, OCT_SAMPLE_U16, 0}, 64,
         "enface: {start: 4, step: 2, count: 8}\nxsec: {h_index: 8, v_index: 16}\n"
         "products: [enface, confocal, xsec_h, xsec_v]\n", NULL, false},
        {"bscan", {256, 64, 1, OCT_SAMPLE_U16, 0}, 64, "products: [bscan]\n", NULL, false},
        {"volume-klin-disp", {256, 32, 16, OCT_SAMPLE_U16, 0}, 64,
         "enface: {start: 4, step: 2, count: 8}\nxsec: {h_index: 8, v_index: 16}\n"
         "products: [enface, confocal, xsec_h, xsec_v]\n"
         "klin: {interp: sinc, taps: 21, coefs: [0, 245.76, 20.48, -10.24]}\n"
         "dispersion: {a2: 40, a3: 5, k0: 0.5}\n", "frame_mean", true},
    };
    enum { NWL = 3 };
    const workload *wl = o->quick ? quick : full;
    if (o->only && strcmp(o->only, "volume") && strcmp(o->only, "bscan") &&
        strcmp(o->only, "volume-klin-disp") && strcmp(o->only, "e2e") &&
        strcmp(o->only, "angio") && strcmp(o->only, "angio-align")) {
        fprintf(stderr, "octbench --e2e: --only %s: must be volume, bscan, volume-klin-disp, "
                        "angio or angio-align\n", o->only);
        return 1;
    }
    if (o->runs > 1 && !(o->rate > 0)) {
        fprintf(stderr, "octbench --e2e: --runs %d needs --frame-rate (the paced rate whose "
                        "latency tails are compared)\n", o->runs);
        return 1;
    }
    if (o->sub_sockets > 1) {
        int n = 1;
        for (const char *c = o->topics; c && *c; c++)
            n += *c == ',';
        if (!o->topics || n < o->sub_sockets) {
            fprintf(stderr, "octbench --e2e: --sub-sockets %d needs --topics with at least %d "
                            "topics (they are dealt to the sockets)\n", o->sub_sockets,
                    o->sub_sockets);
            return 1;
        }
    }
    if (o->runs > 1 && o->hostile) {
        fprintf(stderr, "octbench --e2e: --runs and --hostile do not mix\n");
        return 1;
    }
    if (o->sub_shm && o->publish_keys && strstr(o->publish_keys, "shm_endpoint")) {
        fprintf(stderr, "octbench --e2e: --sub-shm sets [publish] shm_endpoint itself (leave it "
                        "out of --publish-keys)\n");
        return 1;
    }
    char exe[PATH_MAX], octd_path[PATH_MAX + 8];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "octbench e2e: cannot find my own path: %s\n", strerror(errno));
        return 1;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(octd_path, sizeof octd_path, "%s/octd", exe);
    const char *env = getenv("OCTBENCH_OCTD");
    if (env && *env)
        snprintf(octd_path, sizeof octd_path, "%s", env);
    if (access(octd_path, X_OK) != 0) {
        fprintf(stderr, "octbench e2e: %s: not executable (set OCTBENCH_OCTD)\n", octd_path);
        return 1;
    }
    char tmp[] = "/tmp/octbench-e2e.XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "octbench e2e: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    FILE *json = o->json ? fopen(o->json, "a") : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines survive a timeout kill */
    signal(SIGPIPE, SIG_IGN);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    printf("== end-to-end: producer -> ring -> octd (%s) -> ZeroMQ SUB, %s%s ==\n", octd_path,
           date, o->quick ? " (quick: small geometries)" : "");
    int rc = 0;
    double best[NWL] = {0}, sust[NWL] = {0};
    int pairs[16][2];
    if (o->hostile && !parse_hostile(o->hostile, pairs, 16))
        return 1;
    /* default: the copying producer alone (the time existing scripts budget) */
    bool copy = !o->producer || strcmp(o->producer, "commit"),
         commit = o->producer && strcmp(o->producer, "copy");
    for (int i = 0; i < NWL; i++) {
        if (!wants(o, &wl[i]))
            continue;
        double b = 0, su = 0;
        if (copy && run_runs(o, &wl[i], false, octd_path, tmp, json, &best[i], &sust[i]))
            rc = 1;
        if (commit && run_runs(o, &wl[i], true, octd_path, tmp, json, &b, &su))
            rc = 1;
        if (!copy) {
            best[i] = b;
            sust[i] = su;
        }
        if (o->devices) {
            /* the same workload with several engines, after the one-engine baseline */
            double mb = 0, ms = 0;
            printf("# %s: [engine] devices = %s (the rows above: one engine)\n", wl[i].name,
                   o->devices);
            if (run_workload(o, &wl[i], !copy, o->devices, octd_path, tmp, json, &mb, &ms, NULL))
                rc = 1;
            printf("# %s: devices %s vs one engine: unpaced %.2f vs %.2f GB/s = %.2fx; best "
                   "loss-free %.2f vs %.2f GB/s = %.2fx\n",
                   wl[i].name, o->devices, ms, sust[i], sust[i] > 0 ? ms / sust[i] : 0, mb,
                   best[i], best[i] > 0 ? mb / best[i] : 0);
        }
    }
    /* angiography (issue 18), with --only angio|angio-align: B-scan groups of
     * R = 4 x 500 x 1024 (--quick: 4 x 64 x 256) */
    if (o->only && !strncmp(o->only, "angio", 5)) {
        workload aw = {o->only, {1024, 500, 4, OCT_SAMPLE_U16, 0}, 0, "", NULL, true};
        if (o->quick)
            aw.g.samples = 256, aw.g.ascans = 64;
        double b = 0, su = 0;
        if (copy && run_workload(o, &aw, false, NULL, octd_path, tmp, json, &b, &su, NULL))
            rc = 1;
        if (commit && run_workload(o, &aw, true, NULL, octd_path, tmp, json, &b, &su, NULL))
            rc = 1;
    }
    /* CUDA only now: every octd child has been forked already. */
    if (o->backend != OCT_BACKEND_CPU && oct_cuda_built()) {
        char name[128];
        oct_error e;
        if (oct_cuda_probe(0, name, sizeof name, &e) == OCT_OK) {
            for (int i = 0; i < NWL; i++) {
                if (!wants(o, &wl[i]))
                    continue;
                double h2d = pinned_h2d_gbs(&wl[i]);
                if (h2d > 0)
                    printf("# %s: pinned H2D of one frame on %s: %.1f GB/s; e2e unpaced %.2f "
                           "GB/s = %.0f%% of it, best loss-free %.2f GB/s = %.0f%%\n",
                           wl[i].name, name, h2d, sust[i], 100 * sust[i] / h2d, best[i],
                           100 * best[i] / h2d);
            }
        }
    }
    if (json)
        fclose(json);
    rmdir(tmp);
    return rc;
}
