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
}
