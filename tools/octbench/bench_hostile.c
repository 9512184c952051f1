/* bench_hostile.c - `octbench --e2e --hostile S:C` (issue 21.2): the
 * hostile subscribers (S stalled ones, connected and never reading, and C
 * churning ones, each re-connecting every 200 ms on a thread), the parsing
 * of the S:C list, the publisher's counts from octd's log, and the phases
 * per item (unpaced without and with them, then paced at 90 %) with their
 * ratios, run through bench_e2e.c's phase runner. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench.h"
#include "bench_e2e.h"

#define MAX_HOSTILE 1024
#define CHURN_PERIOD_MS 200.0 /* each churning subscriber re-connects this often */

/* ---------------- hostile subscribers (issue 21) ---------------- */
typedef struct hostile {
    void *ctx;                     /* the stalled ones' */
    void *stalled[MAX_HOSTILE];
    int nstalled, nchurn;
    const char *endpoint;
    pthread_t th;
    bool churning;
    atomic_bool stop;
    _Atomic uint64_t reconnects;
} hostile;

static void *sub_connect(void *ctx, const char *endpoint, int rcvhwm)
{
    void *s = zmq_socket(ctx, ZMQ_SUB);
    int linger = 0;
    if (!s)
        return NULL;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if ((rcvhwm > 0 && zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm)) ||
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) || zmq_connect(s, endpoint)) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

static void *churn_thread(void *arg)
{
    hostile *h = arg;
    void *ctx = zmq_ctx_new();
    void **socks = calloc((size_t)h->nchurn, sizeof *socks);
    if (!ctx || !socks) {
        free(socks);
        return NULL;
    }
    for (int i = 0; i < h->nchurn; i++)
        socks[i] = sub_connect(ctx, h->endpoint, 16);
    double gap_ms = CHURN_PERIOD_MS / h->nchurn;
    for (uint64_t k = 0; !atomic_load(&h->stop); k++) {
        int i = (int)(k % (uint64_t)h->nchurn);
        if (socks[i])
            zmq_close(socks[i]);
        socks[i] = sub_connect(ctx, h->endpoint, 16);
        atomic_fetch_add(&h->reconnects, 1);
        sleep_ms(gap_ms);
    }
    for (int i = 0; i < h->nchurn; i++)
        if (socks[i])
            zmq_close(socks[i]);
    zmq_ctx_term(ctx);
    free(socks);
    return NULL;
}

static bool hostile_start(hostile *h, const char *endpoint, int nstalled, int nchurn)
{
    memset(h, 0, sizeof *h);
    h->endpoint = endpoint;
    h->nchurn = nchurn;
    if (nstalled > 0 && !(h->ctx = zmq_ctx_new()))
        return false;
    for (int i = 0; i < nstalled; i++) {
        /* the first as an application would open it; the others with a small
         * receive queue (each would hold up to 1000 images of this process) */
        void *s = sub_connect(h->ctx, endpoint, i == 0 ? 0 : 16);
        if (!s) {
            fprintf(stderr, "octbench e2e: stalled subscriber %d: %s\n", i, zmq_strerror(zmq_errno()));
            return false;
        }
        h->stalled[h->nstalled++] = s;
    }
    if (nchurn > 0) {
        if (pthread_create(&h->th, NULL, churn_thread, h) != 0)
            return false;
        h->churning = true;
    }
    return true;
}

static void hostile_stop(hostile *h)
{
    atomic_store(&h->stop, true);
    if (h->churning)
        pthread_join(h->th, NULL);
    for (int i = 0; i < h->nstalled; i++)
        zmq_close(h->stalled[i]);
    if (h->ctx)
        zmq_ctx_term(h->ctx);
    h->churning = false;
    h->ctx = NULL;
    h->nstalled = 0;
}

/* After octd stopped: its publisher's exit line (what the frame loop handed
 * to ZeroMQ, skipped as unwanted, and the subscription changes the
 * publisher thread handled over the whole run, all phases). */
void print_publisher_counts(const char *log, const char *wname)
{
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "publisher: the frame loop handed");
        if (p)
            printf("# %s hostile, octd's %s", wname, p);
    }
    if (f)
        fclose(f);
}

/* Parses "S:C[,S:C...]" into pairs; false with a message on bad input. */
int parse_hostile(const char *text, int (*pairs)[2], int max)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || *end != ':')
            goto bad;
        p = end + 1;
        long b = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || a < 0 || b < 0 || a > MAX_HOSTILE ||
            b > MAX_HOSTILE || n == max)
            goto bad;
        pairs[n][0] = (int)a;
        pairs[n][1] = (int)b;
        n++;
        p = *end ? end + 1 : end;
    }
    if (n > 0)
        return n;
bad:
    fprintf(stderr, "octbench --e2e: --hostile %s: must be STALLED:CHURNING[,...], each 0..%d "
                    "(at most %d items)\n", text, MAX_HOSTILE, max);
    return 0;
}

/* --hostile: per S:C item, unpaced without and with the subscribers, then
 * (policy all) paced at 90 % of the rate without them, with them. */
void hostile_phases(const octbench_opts *o, const workload *w, producer *pr,
                           subscriber *sub, oct_status *st, const char *endpoint,
                           const char *backend, const char *prod, const char *policy, double warm,
                           double meas, FILE *json)
{
    int pairs[16][2];
    int n = parse_hostile(o->hostile, pairs, 16);
    for (int i = 0; i < n; i++) {
        int ns = pairs[i][0], nc = pairs[i][1];
        char subs[32];
        snprintf(subs, sizeof subs, "%ds+%dc", ns, nc);
        phase_result base, with, paced;
        run_phase(w, pr, sub, st, 0, warm, meas, &base);
        print_phase(w, backend, prod, policy, "-", &base, json);
        hostile h;
        if (!hostile_start(&h, endpoint, ns, nc)) {
            hostile_stop(&h);
            printf("# hostile %s %d:%d: cannot start the subscribers\n", w->name, ns, nc);
            continue;
        }
        sleep_ms(200); /* connected (slow joiners) before the warm-up */
        run_phase(w, pr, sub, st, 0, warm, meas, &with);
        print_phase(w, backend, prod, policy, subs, &with, json);
        bool all = o->policy != 0;
        if (all && base.fps > 0) {
            run_phase(w, pr, sub, st, 0.9 * base.fps, warm, meas, &paced);
            print_phase(w, backend, prod, policy, subs, &paced, json);
        }
        uint64_t reconnects = atomic_load(&h.reconnects);
        hostile_stop(&h);
        double rr = base.fps > 0 ? with.fps / base.fps : 0;
        double pr99 = base.p99 > 0 ? with.p99 / base.p99 : 0;
        /* octd's CPU time per frame: its own work, apart from the CPU the
         * subscribers (in this process) take from it on a small machine */
        double cpf0 = base.frames ? 1e3 * base.octd_cpu_s / (double)base.frames : 0;
        double cpf1 = with.frames ? 1e3 * with.octd_cpu_s / (double)with.frames : 0;
        printf("# %s: %d stalled + %d churning subscribers (%" PRIu64 " re-connects): unpaced "
               "%.0f%% of the rate without them (%.0f vs %.0f frames/s), p99 %.0f%% (%.3f vs "
               "%.3f ms); octd CPU %.3f vs %.3f ms per frame, %.2f vs %.2f cores",
               w->name, ns, nc, reconnects, 100 * rr, with.fps, base.fps, 100 * pr99, with.p99,
               base.p99, cpf1, cpf0, with.octd_cpu_s / with.seconds,
               base.octd_cpu_s / base.seconds);
        if (all && base.fps > 0)
            printf("; at 90%% of it: lost %" PRId64 ", skipped %" PRIu64 ", gaps %" PRIu64,
                   paced.lost, paced.skipped, paced.gaps);
        printf("\n");
        /* one line for scripts */
        printf("# hostile %s %s %d:%d rate_ratio %.4f p99_ratio %.4f cpu_per_frame_ratio %.4f "
               "lost90 %" PRId64 " gaps %" PRIu64 "\n",
               w->name, prod, ns, nc, rr, pr99, cpf0 > 0 ? cpf1 / cpf0 : 0,
               all && base.fps > 0 ? paced.lost : -1, with.gaps);
        if (json)
            fprintf(json,
                    "{\"part\":\"e2e-hostile\",\"workload\":\"%s\",\"backend\":\"%s\","
                    "\"producer\":\"%s\",\"stalled\":%d,\"churning\":%d,\"fps_without\":%.2f,"
                    "\"fps_with\":%.2f,\"rate_ratio\":%.4f,\"p99_without_ms\":%.4f,"
                    "\"p99_with_ms\":%.4f,\"p99_ratio\":%.4f,\"lost_at_90\":%" PRId64 "}\n",
                    w->name, backend, prod, ns, nc, base.fps, with.fps, rr, base.p99, with.p99,
                    pr99, all && base.fps > 0 ? paced.lost : -1);
    }
}
