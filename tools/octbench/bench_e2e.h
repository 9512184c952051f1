/* bench_e2e.h - what bench_e2e.c (`octbench --e2e`) and bench_hostile.c
 * (its --hostile subscribers, issue 21.2) share: the workload and phase
 * result types, the phase runner and row printer of bench_e2e.c, and the
 * hostile-subscriber phases of bench_hostile.c.  Internal to octbench. */
#ifndef OCTBENCH_E2E_H
#define OCTBENCH_E2E_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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

/* octd's threads, grouped by name (/proc/PID/task/TID/comm): the frame loop
 * (its main thread), the publisher thread, ZeroMQ's threads (I/O, reaper),
 * and the rest (engine workers: OpenMP/OpenBLAS, CUDA). */
enum { OCTD_THREAD_GROUPS = 4 };
extern const char *const octd_thread_groups[OCTD_THREAD_GROUPS];

typedef struct phase_result {
    double rate_asked, seconds;
    double fps, ascans_s, gbs;
    double p50, p99, pmax; /* ms */
    uint64_t produced, processed, skipped, torn, drops, gaps, partial, frames;
    int64_t lost;
    double octd_cpu_s; /* octd's user + system CPU time during the phase */
    /* octd's own rate: frames it processed in the measured window (its status
     * block), per second; the subscriber's fps can be lower when this process
     * is short of CPU */
    double octd_fps;
    double cpu_thread_s[OCTD_THREAD_GROUPS]; /* octd's CPU by thread group (octd_thread_groups) */
} phase_result;

typedef struct producer producer;     /* bench_e2e.c */
typedef struct subscriber subscriber; /* bench_e2e.c */

/* bench_e2e.c */
void sleep_ms(double ms);
void run_phase(const workload *w, producer *pr, subscriber *sub, oct_status *st,
               double rate, double warm_s, double meas_s, phase_result *r);
void print_phase(const workload *w, const char *backend, const char *prod,
                 const char *policy, const char *subs, const phase_result *r, FILE *json);

/* bench_octd.c: the octd child (fork/exec, octd --config INI, output to
 * LOG), SIGTERM then SIGKILL after 10 s (its exit status, -1 if killed), its
 * log on stderr; its CPU seconds in all and per thread group
 * (octd_thread_groups), from /proc (0 if unknown). */
pid_t start_octd(const char *octd_path, const char *ini, const char *log);
int stop_octd(pid_t pid);
void print_log_tail(const char *log);
double octd_cpu_s(pid_t pid);
void octd_thread_cpu(pid_t pid, double out[OCTD_THREAD_GROUPS]);
extern pid_t octd_last_pid; /* the octd start_octd started last */
typedef struct octd_thread_counts {
    double cpu_s;
    uint64_t minflt, majflt, vcsw, nvcsw; /* page faults, (in)voluntary context switches */
} octd_thread_counts;
void octd_thread_counts_get(pid_t pid, octd_thread_counts out[OCTD_THREAD_GROUPS]);
uint64_t system_tlb_shootdowns(void);

/* bench_hostile.c */
void print_publisher_counts(const char *log, const char *wname);
int parse_hostile(const char *text, int (*pairs)[2], int max);
bool hostile_check_cpus(const char *text); /* --hostile-cpus LIST is a CPU list */
void hostile_phases(const octbench_opts *o, const workload *w, producer *pr,
                    subscriber *sub, oct_status *st, const char *endpoint,
                    const char *backend, const char *prod, const char *policy, double warm,
                    double meas, FILE *json);

#endif
