/* bench_e2e.h - what bench_e2e.c (`octbench --e2e`) and bench_hostile.c
 * (its --hostile subscribers, issue 21.2) share: the workload and phase
 * result types, the phase runner and row printer of bench_e2e.c, and the
 * hostile-subscriber phases of bench_hostile.c.  Internal to octbench. */
#ifndef OCTBENCH_E2E_H
#define OCTBENCH_E2E_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench.h"
#include "oct_ipc.h"

typedef struct workload {
    const char *name;
    oct_geometry g;
    uint32_t masks;
    const char *profile_extra; /* enface/xsec/products (and klin/dispersion) */
    const char *background;    /* profile background mode (NULL: none) */
    bool on_request;           /* run only when --only names it */
} workload;

typedef struct phase_result {
    double rate_asked, seconds;
    double fps, ascans_s, gbs;
    double p50, p99, pmax; /* ms */
    uint64_t produced, processed, skipped, torn, drops, gaps, partial, frames;
    int64_t lost;
    double octd_cpu_s; /* octd's user + system CPU time during the phase */
} phase_result;

typedef struct producer producer;     /* bench_e2e.c */
typedef struct subscriber subscriber; /* bench_e2e.c */

/* bench_e2e.c */
void sleep_ms(double ms);
void run_phase(const workload *w, producer *pr, subscriber *sub, oct_status *st,
               double rate, double warm_s, double meas_s, phase_result *r);
void print_phase(const workload *w, const char *backend, const char *prod,
                 const char *policy, const char *subs, const phase_result *r, FILE *json);

/* bench_hostile.c */
void print_publisher_counts(const char *log, const char *wname);
int parse_hostile(const char *text, int (*pairs)[2], int max);
void hostile_phases(const octbench_opts *o, const workload *w, producer *pr,
                    subscriber *sub, oct_status *st, const char *endpoint,
                    const char *backend, const char *prod, const char *policy, double warm,
                    double meas, FILE *json);

#endif
