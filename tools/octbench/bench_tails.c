/* bench_tails.c - `octbench --e2e --runs N` (issue 19.2): the latencies of
 * every run of a workload pooled, then p50/p99/max per run, p99 over the
 * runs against a target, and the distribution of all frames (percentiles
 * and counts per latency bucket), as table lines and a JSON line. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint64_t *sorted, size_t n, double q)
{
    return n ? (double)sorted[(size_t)((double)(n - 1) * q)] / 1e6 : 0;
}

void octbench_tails_add(tails_acc *acc, const uint64_t *lat, size_t n, double p50, double p99,
                        double pmax, int64_t lost)
{
    if (acc->runs >= OCTBENCH_RUNS_MAX)
        return;
    if (acc->n + n > acc->cap) {
        size_t cap = 2 * (acc->n + n) + 4096;
        uint64_t *p = realloc(acc->lat, cap * sizeof *p);
        if (p) {
            acc->lat = p;
            acc->cap = cap;
        }
    }
    if (n && acc->n + n <= acc->cap) {
        memcpy(acc->lat + acc->n, lat, n * sizeof *lat);
        acc->n += n;
    }
    acc->p50[acc->runs] = p50;
    acc->p99[acc->runs] = p99;
    acc->pmax[acc->runs] = pmax;
    acc->lost[acc->runs] = lost;
    acc->runs++;
}

void octbench_stages_of(octbench_stages *out, uint64_t acq, const uint64_t stamp[4], uint64_t rx)
{
    memset(out, 0, sizeof *out);
    out->acq = acq;
    uint64_t t[6] = {acq, stamp[0], stamp[1], stamp[2], stamp[3], rx};
    for (int i = 0; i < 6; i++)
        if (!t[i])
            return; /* an older octd: no stamps */
    /* one clock (CLOCK_REALTIME of one host); a step back is read as 0 */
    for (int i = 0; i < OCTBENCH_STAGES; i++)
        out->ns[i] = t[i + 1] > t[i] ? t[i + 1] - t[i] : 0;
}

void octbench_tails_stages(tails_acc *acc, const octbench_stages *st, size_t n)
{
    if (acc->nst + n > acc->capst) {
        size_t cap = 2 * (acc->nst + n) + 4096;
        octbench_stages *p = realloc(acc->st, cap * sizeof *p);
        if (!p)
            return;
        acc->st = p;
        acc->capst = cap;
    }
    for (size_t i = 0; i < n; i++)
        if (st[i].ns[0] || st[i].ns[2]) /* frames with stamps */
            acc->st[acc->nst++] = st[i];
}

static uint64_t stages_sum(const octbench_stages *s)
{
    uint64_t t = 0;
    for (int i = 0; i < OCTBENCH_STAGES; i++)
        t += s->ns[i];
    return t;
}

static int cmp_stages_sum(const void *a, const void *b)
{
    uint64_t x = stages_sum(a), y = stages_sum(b);
    return x < y ? -1 : x > y;
}

/* Per stage p50 / p99 over all frames, and the mean of each stage over the
 * frames in the middle (p40-p60 of the latency) and in the slowest 1 %: which
 * stage carries the median and which the tail. */
static void stages_print(tails_acc *acc, const char *name, FILE *json)
{
    static const char *const what[OCTBENCH_STAGES] = {"commit->take", "take->submitted", "submitted->done",
                                                      "done->published", "published->received"};
    size_t n = acc->nst;
    if (n == 0)
        return;
    qsort(acc->st, n, sizeof *acc->st, cmp_stages_sum);
    uint64_t *v = malloc(n * sizeof *v);
    if (!v)
        return;
    double p50[OCTBENCH_STAGES], p99[OCTBENCH_STAGES], mid[OCTBENCH_STAGES], slow[OCTBENCH_STAGES];
    size_t m0 = (size_t)(0.4 * (double)n), m1 = (size_t)(0.6 * (double)n) + 1, s0 = (size_t)(0.99 * (double)n);
    if (m1 > n)
        m1 = n;
    if (s0 >= n)
        s0 = n - 1;
    for (int k = 0; k < OCTBENCH_STAGES; k++) {
        double a = 0, b = 0;
        for (size_t i = 0; i < n; i++) {
            v[i] = acc->st[i].ns[k];
            if (i >= m0 && i < m1)
                a += (double)v[i];
            if (i >= s0)
                b += (double)v[i];
        }
        mid[k] = a / (double)(m1 - m0) / 1e6;
        slow[k] = b / (double)(n - s0) / 1e6;
        qsort(v, n, sizeof *v, cmp_u64);
        p50[k] = pct(v, n, 0.5);
        p99[k] = pct(v, n, 0.99);
    }
    free(v);
    printf("# stages %s (%zu frames with octd's stamps; ms): %s\n", name, n,
           "stage  p50  p99  mean(p40-p60 frames)  mean(slowest 1%)");
    for (int k = 0; k < OCTBENCH_STAGES; k++)
        printf("# stages %s: %-20s %7.3f %7.3f %7.3f %7.3f\n", name, what[k], p50[k], p99[k], mid[k], slow[k]);
    if (json) {
        static const char *const key[OCTBENCH_STAGES] = {"take", "submit", "engine", "publish", "deliver"};
        fprintf(json, "{\"part\":\"e2e-stages\",\"workload\":\"%s\",\"frames\":%zu", name, n);
        for (int k = 0; k < OCTBENCH_STAGES; k++)
            fprintf(json, ",\"%s_p50_ms\":%.4f,\"%s_p99_ms\":%.4f,\"%s_mid_ms\":%.4f,\"%s_slow_ms\":%.4f", key[k],
                    p50[k], key[k], p99[k], key[k], mid[k], key[k], slow[k]);
        fprintf(json, "}\n");
    }
}

void octbench_tails_print(tails_acc *acc, const char *name, const char *prod, double rate,
                          double target, FILE *json)
{
    if (acc->runs == 0)
        return;
    double p99s[OCTBENCH_RUNS_MAX];
    int ok = 0, clean = 0;
    printf("# tails %s (%s producer, %.0f frames/s, %d runs): run  p50 ms  p99 ms  max ms  lost\n",
           name, prod, rate, acc->runs);
    for (int k = 0; k < acc->runs; k++) {
        printf("# tails %s   %3d %7.3f %7.3f %7.3f %5" PRId64 "%s\n", name, k + 1, acc->p50[k],
               acc->p99[k], acc->pmax[k], acc->lost[k], acc->lost[k] < 0 ? " (no result)" : "");
        p99s[k] = acc->p99[k];
        ok += acc->lost[k] >= 0 && acc->p99[k] > 0 && acc->p99[k] <= target;
        clean += acc->lost[k] == 0;
    }
    qsort(p99s, (size_t)acc->runs, sizeof *p99s, cmp_double);
    qsort(acc->lat, acc->n, sizeof *acc->lat, cmp_u64);
    printf("# tails %s: p99 over the runs min %.3f median %.3f max %.3f ms; runs with p99 <= %g "
           "ms: %d of %d; loss-free runs: %d of %d\n",
           name, p99s[0], p99s[acc->runs / 2], p99s[acc->runs - 1], target, ok, acc->runs,
           clean, acc->runs);
    printf("# tails %s: all %zu frames: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f ms\n",
           name, acc->n, pct(acc->lat, acc->n, 0.5), pct(acc->lat, acc->n, 0.9),
           pct(acc->lat, acc->n, 0.99), pct(acc->lat, acc->n, 0.999),
           acc->n ? (double)acc->lat[acc->n - 1] / 1e6 : 0);
    /* the distribution in ms buckets: where the tail lies */
    static const double edges[] = {1, 2, 3, 4, 6, 10, 20};
    enum { NE = sizeof edges / sizeof *edges };
    size_t count[NE + 1] = {0};
    for (size_t i = 0; i < acc->n; i++) {
        double ms = (double)acc->lat[i] / 1e6;
        int b = 0;
        while (b < NE && ms >= edges[b])
            b++;
        count[b]++;
    }
    printf("# tails %s: frames per latency bucket:", name);
    for (int b = 0; b <= NE; b++) {
        char lo[16], hi[16];
        snprintf(lo, sizeof lo, "%g", b ? edges[b - 1] : 0.0);
        snprintf(hi, sizeof hi, "%g", b < NE ? edges[b] : 0.0);
        printf(" %s%s%s ms: %zu", b < NE ? lo : ">=", b < NE ? "-" : lo, b < NE ? hi : "",
               count[b]);
    }
    printf("\n");
    if (json)
        fprintf(json,
                "{\"part\":\"e2e-tails\",\"workload\":\"%s\",\"producer\":\"%s\",\"rate\":%.1f,"
                "\"runs\":%d,\"p99_min_ms\":%.4f,\"p99_median_ms\":%.4f,\"p99_max_ms\":%.4f,"
                "\"p99_target_ms\":%g,\"runs_p99_in_target\":%d,\"loss_free_runs\":%d,\"frames\":%zu,"
                "\"all_p50_ms\":%.4f,\"all_p99_ms\":%.4f,\"all_p999_ms\":%.4f,"
                "\"all_max_ms\":%.4f}\n",
                name, prod, rate, acc->runs, p99s[0], p99s[acc->runs / 2],
                p99s[acc->runs - 1], target, ok, clean, acc->n, pct(acc->lat, acc->n, 0.5),
                pct(acc->lat, acc->n, 0.99), pct(acc->lat, acc->n, 0.999),
                acc->n ? (double)acc->lat[acc->n - 1] / 1e6 : 0);
    stages_print(acc, name, json);
}
