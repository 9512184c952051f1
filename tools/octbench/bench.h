/* bench.h - the parts of octbench.  main.c parses the options and calls
 * each part; every part prints its own table and returns 0 on success. */
#ifndef OCTBENCH_H
#define OCTBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "oct_engine.h"

typedef struct octbench_opts {
    oct_backend backend;    /* --backend auto|cpu|cuda */
    int warmup;             /* --warmup N runs before timing */
    int reps;               /* --reps N timed runs (median reported) */
    int threads;            /* --threads N (CPU), 0 = all cores */
    oct_precision precision;/* --precision fp32|tf32 */
    const char *only;       /* --only NAME: run one workload/part */
    bool quick;             /* --quick: fewer reps, smaller sizes (smoke test) */
    bool seed;              /* run the seed baselines (default on) */
    bool ipc;               /* --ipc: the shared-memory benchmark */
    bool e2e;               /* --e2e: ring -> octd -> subscriber */
    const char *json;       /* --json FILE: also write results as JSON lines */
    /* --e2e only */
    double seconds;         /* --seconds S measured per phase (0 = default) */
    int policy;             /* --policy all|latest: 1 all, 0 latest, -1 default (all) */
    double rate;            /* --frame-rate FRAMES_PER_S: pace the producer (0 = find it) */
    const char *producer;   /* --producer copy|commit|both (NULL = copy) */
    const char *zero_copy;  /* --zero-copy auto|on|off: octd.ini [ring] zero_copy (NULL = auto) */
    const char *hostile;    /* --hostile S:C[,S:C...]: stalled:churning subscribers (issue 21) */
    /* CUDA tuning of the engine workloads (oct_setup.cuda): --gemm,
     * --gemm-chunk-mb, --cuda-parts, --cuda-parts-ext, --c2r-batch,
     * --cuda-sink, --gemm-algo, --angio-path, --angio-chunk */
    oct_cuda_tuning cuda;
    const char *devices;    /* --devices LIST: octd.ini [engine] devices, run after a one-engine
                             * baseline of the same workload (issue 20); NULL = one engine */
    int runs;               /* --runs N: --e2e with --frame-rate: each workload N times (a fresh
                             * octd each), latency per run and over all runs (issue 19.2) */
    const char *engine_keys; /* --engine-keys K=V[,K=V...]: more octd.ini [engine] keys for the
                             * octd --e2e starts (priority=50,lock_memory=yes); NULL = none */
    int sndhwm;             /* --sndhwm N: octd.ini [publish] sndhwm of --e2e (0: 16) */
    /* --hostile's subscribers (issue 21.2): in a child process (octbench
     * --hostile-child ENDPOINT --hostile S:C runs them), pinned to
     * --hostile-cpus LIST and at --hostile-nice N, or in this process */
    const char *hostile_child; /* --hostile-child ENDPOINT: be that child */
    const char *hostile_cpus;
    int hostile_nice;
    bool hostile_in_process;
    const char *publish_keys; /* --publish-keys K=V[,K=V...]: more octd.ini [publish] keys */
    bool window_octd;       /* --window octd: the unpaced commit producer stays ahead of octd's
                             * last published frame, not the subscriber's last received one */
    int producer_cpu;       /* --producer-cpu N: N + 1, the producer thread's CPU (0: not pinned) */
    int ring_slots;         /* --ring-slots N: the frame ring's slots (0: the default) */
    const char *topics;     /* --topics T[,T...]: the subscriber's prefixes (NULL: all) */
    int sub_sockets;        /* --sub-sockets N: the topics dealt to N connections (0: 1) */
    const char *trace;      /* --trace DIR: every measured frame's stamps, a CSV per run */
    bool sub_shm;           /* --sub-shm: the subscriber on octd's [publish] shm_endpoint,
                             * copying each image out of octd's image area */
    bool sub_tcp;           /* --sub-tcp: [publish] endpoint on loopback TCP, not ipc:// */
} octbench_opts;

/* Engine workloads (bscan-cfd, bscan-msi, volume-cfd, volume-msi, ...) on the
 * chosen backend, and the in-process seed baselines (bench_engine.c). */
int octbench_engine(const octbench_opts *o);
/* CPU seed baseline: the thesis' sequential MSI (Algorithm 5.6); ms per frame. */
double octbench_seed_cpu_msi(const octbench_opts *o, int samples, int ascans, int lines,
                             int masks, int lag_lo, int lag_hi, const int *depths, int ndepths);
/* GPU seed baseline: the thesis' fine-grained GPU approach (Algorithms 5.8,
 * 5.15); device ms per frame, or < 0 when not built / no device (seed_gpu.cu). */
double octbench_seed_gpu_msi(const octbench_opts *o, int samples, int ascans, int lines,
                             int masks, int lag_lo, int lag_hi, const int *depths, int ndepths);
/* The names --only accepts (groups, parts, workloads), NULL-terminated. */
const char *const *octbench_only_names(void);
/* Shared-memory ring throughput and latency (bench_ipc.c). */
int octbench_ipc(const octbench_opts *o);
/* Repeated B-scans and angiography, issue 18 (bench_angio.c). */
int octbench_angio(const octbench_opts *o);
/* --runs (issue 19.2, bench_tails.c): each run's latencies (ns) of the
 * measured phase, pooled, and its p50/p99/max (ms) and frames lost (0: none,
 * -1: the run measured nothing). */
#define OCTBENCH_RUNS_MAX 1000
/* Where a frame's end-to-end latency went (issue 19): from octd's stamps in
 * the header of the frame's last message (t_take_ns, t_sub_ns, t_done_ns,
 * t_pub_ns) and its receive time, the intervals (ns) commit -> octd took it,
 * -> submit returned (host time in submit), -> completed (the engine:
 * copy, device work, download, completion poll), -> last message handed to
 * ZeroMQ, -> received.  They add up to the latency; all 0 when octd sent no
 * stamps (an older octd). */
enum { OCTBENCH_STAGES = 5 };
typedef struct octbench_stages {
    uint64_t ns[OCTBENCH_STAGES];
    uint64_t id, acq; /* the frame, and its t_acq_ns (--trace) */
} octbench_stages;
/* The stages of a frame: stamp = {take, sub, done, pub} (0 = missing). */
void octbench_stages_of(octbench_stages *out, uint64_t acq, const uint64_t stamp[4], uint64_t rx);
typedef struct tails_acc {
    uint64_t *lat;
    size_t n, cap;
    octbench_stages *st; /* per frame of lat, in the same order */
    size_t nst, capst;
    double p50[OCTBENCH_RUNS_MAX], p99[OCTBENCH_RUNS_MAX], pmax[OCTBENCH_RUNS_MAX];
    int64_t lost[OCTBENCH_RUNS_MAX];
    int runs;
} tails_acc;
void octbench_tails_add(tails_acc *acc, const uint64_t *lat, size_t n, double p50, double p99,
                        double pmax, int64_t lost);
/* The stages of the n frames just added (parallel to their latencies). */
void octbench_tails_stages(tails_acc *acc, const octbench_stages *st, size_t n);
/* Prints the runs, p99 over them (how many within target ms, how many
 * loss-free) and the distribution; sorts acc->lat. */
void octbench_tails_print(tails_acc *acc, const char *name, const char *prod, double rate,
                          double target, FILE *json);

/* End-to-end: producer -> octd -> subscriber (bench_e2e.c). */
int octbench_e2e(const octbench_opts *o);
/* --hostile-child: --hostile's subscribers until stdin closes (bench_hostile.c). */
int octbench_hostile_child(const octbench_opts *o);

/* Volume registration on simulated motion (bench_register.c). */
int octbench_register(const octbench_opts *o);

#endif
