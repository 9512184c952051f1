/* bench_hostile.c - `octbench --e2e --hostile S:C` (issue 21.2): the
 * hostile subscribers (S stalled ones, connected and never reading, and C
 * churning ones, each re-connecting every 200 ms on a thread), the parsing
 * of the S:C list, the publisher's counts from octd's log, and the phases
 * per item (unpaced and paced at 90 %, without and with them) with their
 * ratios, run through bench_e2e.c's phase runner.  The subscribers run in a
 * child process (octbench --hostile-child) unless --hostile-in-process.
 * Per item it also prints octd's page faults and context switches per frame
 * by thread group and the machine's TLB shootdowns (r4: where the frame
 * loop loses its time), and octd's `[publish] stats` lines when asked.  With
 * --sub-shm the measuring subscriber reads octd's [publish] shm_endpoint
 * (images copied out of its image area) while the crowd stays on the normal
 * endpoint: whether a crowd there disturbs a local shared-memory reader. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "bench_e2e.h"

#define MAX_HOSTILE 1024
#define CHURN_PERIOD_MS 200.0 /* each churning subscriber re-connects this often */

/* ---------------- hostile subscribers (issue 21) ---------------- */
typedef struct hostile {
    /* the subscribers themselves (in the child, or here with --hostile-in-process) */
    void *ctx;                     /* the stalled ones' */
    void *stalled[MAX_HOSTILE];
    int nstalled, nchurn;
    const char *endpoint;
    pthread_t th;
    bool churning;
    atomic_bool stop;
    _Atomic uint64_t reconnects;
    /* the child process that runs them (default) */
    pid_t pid;
    int to_child;     /* its stdin: closing it ends the child */
    FILE *from_child; /* its stdout: "ready", then "reconnects N" */
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

/* The subscribers in this process. */
static bool local_start(hostile *h, const char *endpoint, int nstalled, int nchurn)
{
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

static void local_stop(hostile *h)
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

/* "0-3,8,10-11" into set; false on bad text. */
static bool parse_cpus(const char *text, cpu_set_t *set)
{
    CPU_ZERO(set);
    const char *p = text;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0 || a >= CPU_SETSIZE)
            return false;
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p || b < a || b >= CPU_SETSIZE)
                return false;
        }
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, set);
        if (*end && *end != ',')
            return false;
        p = *end ? end + 1 : end;
    }
    return CPU_COUNT(set) > 0;
}

bool hostile_check_cpus(const char *text)
{
    cpu_set_t set;
    return parse_cpus(text, &set);
}

/* The subscribers in a child process (octbench --hostile-child ENDPOINT
 * --hostile S:C), so that on a small machine the CPU they take shows as
 * theirs, and octd's own (its threads' CPU per frame, its frame counters)
 * can be told apart from it; --hostile-cpus pins it and --hostile-nice
 * lowers its priority (both set here, before exec).  This process has not
 * initialised CUDA: octbench --e2e forks only before that. */
static bool child_start(hostile *h, const octbench_opts *o, const char *endpoint, int nstalled,
                        int nchurn)
{
    char exe[PATH_MAX], sc[32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int in[2], out[2];
    if (n <= 0 || pipe(in) != 0)
        return false;
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return false;
    }
    exe[n] = '\0';
    snprintf(sc, sizeof sc, "%d:%d", nstalled, nchurn);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        /* between fork and exec of a threaded process: no stdio, no malloc */
        static const char pin_msg[] = "octbench: --hostile-cpus: cannot pin the hostile "
                                      "subscribers there (CPUs not allowed?)\n";
        static const char nice_msg[] = "octbench: --hostile-nice: refused\n";
        static const char exec_msg[] = "octbench: cannot exec itself for --hostile-child\n";
        cpu_set_t set;
        if (o->hostile_cpus && parse_cpus(o->hostile_cpus, &set) &&
            sched_setaffinity(0, sizeof set, &set) != 0)
            (void)!write(2, pin_msg, sizeof pin_msg - 1);
        if (o->hostile_nice && setpriority(PRIO_PROCESS, 0, o->hostile_nice) != 0)
            (void)!write(2, nice_msg, sizeof nice_msg - 1);
        execl(exe, exe, "--hostile-child", endpoint, "--hostile", sc, (char *)NULL);
        (void)!write(2, exec_msg, sizeof exec_msg - 1);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        close(in[1]);
        close(out[0]);
        return false;
    }
    h->pid = pid;
    h->to_child = in[1];
    h->from_child = fdopen(out[0], "r");
    char line[64];
    return h->from_child && fgets(line, sizeof line, h->from_child) && !strcmp(line, "ready\n");
}

static bool hostile_start(hostile *h, const octbench_opts *o, const char *endpoint, int nstalled,
                          int nchurn)
{
    memset(h, 0, sizeof *h);
    h->to_child = -1;
    if (o->hostile_in_process)
        return local_start(h, endpoint, nstalled, nchurn);
    return child_start(h, o, endpoint, nstalled, nchurn);
}

/* Stops them; the re-connects they made. */
static uint64_t hostile_stop(hostile *h)
{
    if (!h->pid) {
        local_stop(h);
        return atomic_load(&h->reconnects);
    }
    uint64_t reconnects = 0;
    char line[64];
    close(h->to_child);
    if (h->from_child) {
        while (fgets(line, sizeof line, h->from_child))
            sscanf(line, "reconnects %" SCNu64, &reconnects);
        fclose(h->from_child);
    }
    int st;
    waitpid(h->pid, &st, 0);
    h->pid = 0;
    return reconnects;
}

/* octbench --hostile-child ENDPOINT --hostile S:C: the subscribers until
 * stdin closes (the parent ends, or stops them). */
int octbench_hostile_child(const octbench_opts *o)
{
    int pairs[1][2];
    if (!o->hostile || parse_hostile(o->hostile, pairs, 1) != 1)
        return 1;
    hostile h;
    memset(&h, 0, sizeof h);
    if (!local_start(&h, o->hostile_child, pairs[0][0], pairs[0][1])) {
        local_stop(&h);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    local_stop(&h);
    printf("reconnects %" PRIu64 "\n", (uint64_t)atomic_load(&h.reconnects));
    return 0;
}

/* After octd stopped: its publisher's exit line (what the frame loop handed
 * to ZeroMQ, skipped as unwanted, and the subscription changes the
 * publisher thread handled over the whole run, all phases), its [publish]
 * settings line, and whether the frame loop had to send copies. */
void print_publisher_counts(const char *log, const char *wname)
{
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "publisher: the frame loop handed");
        if (p)
            printf("# %s hostile, octd's %s", wname, p);
        /* the frame loop copied images: stalled peers held every pooled buffer */
        else if ((p = strstr(line, "product buffers are held")) != NULL)
            printf("# %s hostile, octd: all %s", wname, p);
        else if ((p = strstr(line, "publisher stats: ")) != NULL)
            printf("# %s hostile, octd's %s", wname, p);
        else if ((p = strstr(line, "publisher: ")) != NULL && strstr(line, "I/O threads"))
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

/* octd's CPU per frame (ms) of one thread group, or all of them (g < 0). */
static double cpu_ms_per_frame(const phase_result *r, int g)
{
    double frames = r->octd_fps * r->seconds, s = g < 0 ? r->octd_cpu_s : r->cpu_thread_s[g];
    return frames > 0 ? 1e3 * s / frames : 0;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

/* octd's threads over one unpaced phase (warm-up included): faults and
 * context switches per frame by thread group, and the machine's TLB
 * shootdowns per second (issue 21: where the frame loop loses its time). */
typedef struct thread_window {
    octd_thread_counts c0[OCTD_THREAD_GROUPS], c1[OCTD_THREAD_GROUPS];
    uint64_t tlb0, tlb1, t0, t1;
    double frames; /* octd's, over the whole window (its rate x the window) */
} thread_window;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void window_begin(thread_window *t)
{
    octd_thread_counts_get(octd_last_pid, t->c0);
    t->tlb0 = system_tlb_shootdowns();
    t->t0 = mono_ms();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("# phase begins at t %.1f\n", (double)(ts.tv_sec % 10000) + ts.tv_nsec / 1e9);
}

static void window_end(thread_window *t, const phase_result *r)
{
    octd_thread_counts_get(octd_last_pid, t->c1);
    t->tlb1 = system_tlb_shootdowns();
    t->t1 = mono_ms();
    t->frames = r->octd_fps * (double)(t->t1 - t->t0) / 1e3;
}

static void print_windows(const char *wname, const thread_window *a, const thread_window *b)
{
    printf("# %s: per frame with / without them:", wname);
    for (int g = 0; g < OCTD_THREAD_GROUPS; g++) {
        const thread_window *t[2] = {a, b};
        double v[2][4];
        for (int k = 0; k < 2; k++) {
            double f = t[k]->frames > 0 ? t[k]->frames : 1;
            v[k][0] = (double)(t[k]->c1[g].minflt - t[k]->c0[g].minflt) / f;
            v[k][1] = (double)(t[k]->c1[g].vcsw - t[k]->c0[g].vcsw) / f;
            v[k][2] = (double)(t[k]->c1[g].nvcsw - t[k]->c0[g].nvcsw) / f;
            v[k][3] = 1e3 * (t[k]->c1[g].cpu_s - t[k]->c0[g].cpu_s) / f;
        }
        printf(" | %s: faults %.2f / %.2f, vol. switches %.2f / %.2f, invol. %.3f / %.3f, "
               "CPU ms %.3f / %.3f", octd_thread_groups[g], v[0][0], v[1][0], v[0][1], v[1][1],
               v[0][2], v[1][2], v[0][3], v[1][3]);
    }
    double sa = (double)(a->t1 - a->t0) / 1e3, sb = (double)(b->t1 - b->t0) / 1e3;
    printf(" | TLB shootdowns/s (machine) %.0f / %.0f\n",
           sa > 0 ? (double)(a->tlb1 - a->tlb0) / sa : 0, sb > 0 ? (double)(b->tlb1 - b->tlb0) / sb : 0);
}

/* --hostile: per S:C item, unpaced and (policy all) paced at 90 % of the
 * unpaced rate, each without and then with the subscribers.  With the
 * commit producer the unpaced pair runs twice (r5): once with the window
 * following the measuring subscriber (the delivery: its rate and
 * commit -> received p99, as before) and once following octd's published
 * count (the frame loop: octd's own rate and its commit -> published p99
 * from the headers' stamps), so that what the crowd costs ZeroMQ's delivery
 * to the measuring subscriber and what it costs the frame loop are told
 * apart; the targets are the frame loop's, and the paced phases run at 90 %
 * of its unpaced rate. */
void hostile_phases(const octbench_opts *o, const workload *w, producer *pr,
                           subscriber *sub, oct_status *st, const char *endpoint,
                           const char *backend, const char *prod, const char *policy, double warm,
                           double meas, FILE *json)
{
    int pairs[16][2];
    int n = parse_hostile(o->hostile, pairs, 16);
    const char *where = o->hostile_in_process ? "in octbench's process" : "in a child process";
    /* the delivery pair's window as asked (--window), the frame loop's: octd's */
    oct_status *dwin = o->window_octd ? st : NULL;
    bool fl_pair = !o->window_octd && strcmp(prod, "commit") == 0;
    for (int i = 0; i < n; i++) {
        int ns = pairs[i][0], nc = pairs[i][1];
        char subs[32], subs_fl[40];
        snprintf(subs, sizeof subs, "%ds+%dc", ns, nc);
        snprintf(subs_fl, sizeof subs_fl, "%s/w", subs);
        phase_result base, with, paced0 = {0}, paced = {0}, fbase = {0}, fwith = {0};
        bool all = o->policy != 0;
        thread_window tw_base, tw_with;
        window_begin(&tw_base);
        producer_window(pr, dwin);
        run_phase(w, pr, sub, st, 0, warm, meas, &base);
        window_end(&tw_base, &base);
        print_phase(w, backend, prod, policy, "-", &base, json);
        if (fl_pair) {
            producer_window(pr, st);
            run_phase(w, pr, sub, st, 0, warm, meas, &fbase);
            print_phase(w, backend, prod, policy, "-/w", &fbase, json);
            producer_window(pr, dwin);
        }
        /* 90 % of the frame loop's unpaced rate (with the frame-loop pair:
         * the delivery's can be lower, the measuring subscriber's ceiling) */
        double rate90 = 0.9 * (fl_pair && fbase.octd_fps > 0 ? fbase.octd_fps : base.fps);
        if (all && base.fps > 0) {
            run_phase(w, pr, sub, st, rate90, warm, meas, &paced0);
            print_phase(w, backend, prod, policy, "-", &paced0, json);
        }
        hostile h;
        if (!hostile_start(&h, o, endpoint, ns, nc)) {
            hostile_stop(&h);
            printf("# hostile %s %d:%d: cannot start the subscribers\n", w->name, ns, nc);
            continue;
        }
        sleep_ms(200); /* connected (slow joiners) before the warm-up */
        window_begin(&tw_with);
        run_phase(w, pr, sub, st, 0, warm, meas, &with);
        window_end(&tw_with, &with);
        print_phase(w, backend, prod, policy, subs, &with, json);
        if (fl_pair) {
            producer_window(pr, st);
            run_phase(w, pr, sub, st, 0, warm, meas, &fwith);
            print_phase(w, backend, prod, policy, subs_fl, &fwith, json);
            producer_window(pr, dwin);
        }
        if (all && base.fps > 0) {
            run_phase(w, pr, sub, st, rate90, warm, meas, &paced);
            print_phase(w, backend, prod, policy, subs, &paced, json);
        }
        uint64_t reconnects = hostile_stop(&h);
        if (!fl_pair) { /* the frame loop's measures from the one pair */
            fbase = base;
            fwith = with;
        }
        double rr = ratio(with.fps, base.fps), pr99 = ratio(with.p99, base.p99);
        double orr = ratio(with.octd_fps, base.octd_fps), p90 = ratio(paced.p99, paced0.p99);
        double flr = ratio(fwith.octd_fps, fbase.octd_fps), flp = ratio(fwith.fl_p99, fbase.fl_p99);
        double flp90 = ratio(paced.fl_p99, paced0.fl_p99);
        double cpf0 = cpu_ms_per_frame(&base, -1), cpf1 = cpu_ms_per_frame(&with, -1);
        printf("# %s: %d stalled + %d churning subscribers (%s, %" PRIu64 " re-connects): "
               "frame loop (window: octd's published count%s): octd's rate %.0f%% (%.0f vs %.0f "
               "frames/s), commit -> published p99 %.0f%% (%.3f vs %.3f ms, p50 %.3f vs %.3f); "
               "delivery to the measuring subscriber%s (window: %s): unpaced %.0f%% of the rate "
               "without them (subscriber %.0f vs %.0f frames/s; octd's own count %.0f%%: %.0f vs "
               "%.0f), commit -> received p99 %.0f%% (%.3f vs %.3f ms)",
               w->name, ns, nc, where, reconnects, fl_pair ? "" : ", the same phases",
               100 * flr, fwith.octd_fps, fbase.octd_fps, 100 * flp, fwith.fl_p99, fbase.fl_p99,
               fwith.fl_p50, fbase.fl_p50, o->sub_shm ? " through shared memory" : "",
               dwin ? "octd's" : "the subscriber's", 100 * rr,
               with.fps, base.fps, 100 * orr, with.octd_fps, base.octd_fps, 100 * pr99, with.p99,
               base.p99);
        if (all && base.fps > 0)
            printf("; at 90%% (%.0f/s): p99 %.0f%% (%.3f vs %.3f ms), frame loop p99 %.0f%% (%.3f "
                   "vs %.3f ms), lost %" PRId64 " vs %" PRId64 ", skipped %" PRIu64 ", gaps %" PRIu64,
                   rate90, 100 * p90, paced.p99, paced0.p99, 100 * flp90, paced.fl_p99,
                   paced0.fl_p99, paced.lost, paced0.lost, paced.skipped, paced.gaps);
        if (o->sub_shm) /* next to the gaps: images overwritten before they were copied */
            printf("; gaps %" PRIu64 ", lost in shm %" PRIu64 " unpaced with them (%" PRIu64
                   ", %" PRIu64 " without)", with.gaps, with.shm_lost, base.gaps, base.shm_lost);
        if (o->sub_shm && all && base.fps > 0)
            printf(", lost in shm %" PRIu64 " at 90%% (%" PRIu64 " without)", paced.shm_lost,
                   paced0.shm_lost);
        printf("\n# %s: octd CPU ms per frame with / without them: all %.3f / %.3f (%.2f / %.2f "
               "cores)", w->name, cpf1, cpf0, with.octd_cpu_s / with.seconds,
               base.octd_cpu_s / base.seconds);
        for (int g = 0; g < OCTD_THREAD_GROUPS; g++)
            printf(", %s %.3f / %.3f", octd_thread_groups[g], cpu_ms_per_frame(&with, g),
                   cpu_ms_per_frame(&base, g));
        printf("\n");
        print_windows(w->name, &tw_with, &tw_base);
        /* one line for scripts (fl_: the frame loop's) */
        printf("# hostile %s %s %d:%d rate_ratio %.4f octd_rate_ratio %.4f p99_ratio %.4f "
               "p99_90_ratio %.4f cpu_per_frame_ratio %.4f zmq_cpu_per_frame_ms %.4f %.4f "
               "lost90 %" PRId64 " lost90_without %" PRId64 " gaps %" PRIu64 " fl_rate_ratio %.4f "
               "fl_p99_ratio %.4f fl_p99_90_ratio %.4f fl_p99_ms %.4f fl_p99_without_ms %.4f",
               w->name, prod, ns, nc, rr, orr, pr99, p90, ratio(cpf1, cpf0),
               cpu_ms_per_frame(&with, 2), cpu_ms_per_frame(&base, 2),
               all && base.fps > 0 ? paced.lost : -1, all && base.fps > 0 ? paced0.lost : -1,
               with.gaps, flr, flp, flp90, fwith.fl_p99, fbase.fl_p99);
        if (o->sub_shm) /* next to its gaps, as more key value pairs */
            printf(" sub_shm 1 shm_lost %" PRIu64 " shm_lost_without %" PRIu64 " shm_lost90 %"
                   PRId64, with.shm_lost, base.shm_lost,
                   all && base.fps > 0 ? (int64_t)paced.shm_lost : -1);
        printf("\n");
        if (json)
            fprintf(json,
                    "{\"part\":\"e2e-hostile\",\"workload\":\"%s\",\"backend\":\"%s\","
                    "\"producer\":\"%s\",\"stalled\":%d,\"churning\":%d,\"in_process\":%s,"
                    "\"reconnects\":%" PRIu64 ",\"fps_without\":%.2f,\"fps_with\":%.2f,"
                    "\"rate_ratio\":%.4f,\"octd_fps_without\":%.2f,\"octd_fps_with\":%.2f,"
                    "\"octd_rate_ratio\":%.4f,\"p99_without_ms\":%.4f,\"p99_with_ms\":%.4f,"
                    "\"p99_ratio\":%.4f,\"p99_90_without_ms\":%.4f,\"p99_90_with_ms\":%.4f,"
                    "\"p99_90_ratio\":%.4f,\"cpu_ms_per_frame_without\":%.4f,"
                    "\"cpu_ms_per_frame_with\":%.4f,\"zmq_cpu_ms_per_frame_without\":%.4f,"
                    "\"zmq_cpu_ms_per_frame_with\":%.4f,\"lost_at_90\":%" PRId64 ","
                    "\"fl_octd_fps_without\":%.2f,\"fl_octd_fps_with\":%.2f,\"fl_rate_ratio\":%.4f,"
                    "\"fl_p99_without_ms\":%.4f,\"fl_p99_with_ms\":%.4f,\"fl_p99_ratio\":%.4f,"
                    "\"fl_p99_90_ratio\":%.4f",
                    w->name, backend, prod, ns, nc, o->hostile_in_process ? "true" : "false",
                    reconnects, base.fps, with.fps, rr, base.octd_fps, with.octd_fps, orr,
                    base.p99, with.p99, pr99, paced0.p99, paced.p99, p90, cpf0, cpf1,
                    cpu_ms_per_frame(&base, 2), cpu_ms_per_frame(&with, 2),
                    all && base.fps > 0 ? paced.lost : -1, fbase.octd_fps, fwith.octd_fps, flr,
                    fbase.fl_p99, fwith.fl_p99, flp, flp90);
        if (json && o->sub_shm)
            fprintf(json, ",\"sub_shm\":true,\"shm_lost\":%" PRIu64 ",\"shm_lost_without\":%"
                    PRIu64, with.shm_lost, base.shm_lost);
        if (json)
            fprintf(json, "}\n");
    }
    producer_window(pr, dwin);
}
