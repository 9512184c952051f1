/* bench_e2e.h - what bench_e2e.c (`octbench --e2e`) and bench_hostile.c
 * (its --hostile subscribers, issue 21.2) share: the workload and phase
 * result types, the phase runner and row printer of bench_e2e.c, and the
 * hostile-subscriber phases of bench_hostile.c.  Internal to octbench. */
#ifndef OCTBENCH_E2E_H
#define OCTBENCH_E2E_H

#include <pthread.h>
#include <stdatomic.h>
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
    double runq_thread_s[OCTD_THREAD_GROUPS]; /* ... and its time runnable, waiting for a CPU */
    uint64_t nvcsw_loop;                      /* the frame loop's involuntary switches */
    double lost_cpu_s[3];                     /* the machine's irq, softirq, steal */
    uint64_t skip_part[3]; /* octd's skipped frames in the warm-up, the measured window, after */
    /* paced: the producer's lateness, commit time - due time (issue 19), us */
    double late_p50_us, late_p99_us, late_max_us;
    uint64_t late_frames; /* frames committed more than a period late */
    uint64_t late_burst;  /* the longest run of those (committed back to back) */
    /* the frame loop's latency (issue 21, r5): commit -> its last message
     * handed to ZeroMQ (the header's t_pub_ns), ms, over the frames the
     * subscriber received with octd's stamps (0: none had them) */
    double fl_p50, fl_p99;
    /* the subscriber's messages and image bytes over the phase; with
     * --sub-shm (shm) the images lost in shm: overwritten before they were
     * copied out of octd's image area */
    uint64_t msgs, bytes, shm_lost;
    bool shm;
} phase_result;

typedef struct producer producer;     /* bench_e2e.c */

/* bench_sub.c: the subscriber.  One or more SUB sockets (--sub-sockets N:
 * the --topics are dealt to them, each a connection of its own, read by a
 * thread of its own), one set of counters.  A frame is complete when it has one part per topic seen; its
 * latency is the receive time of its last part - its t_acq_ns.  With
 * --sub-shm the sockets are on octd's [publish] shm_endpoint and an image
 * is received once its reader has copied it out of octd's image area
 * (oct_images_read) into a buffer of its own; an image overwritten before
 * that is lost in shm (its frame stays partial, as with a gap). */
#define MAX_TOPICS 32
#define MAX_SUB_SOCKETS 8
#define FRAME_MAP 1024 /* frames being received, by frame_id % FRAME_MAP */
#define SUB_AREAS 8    /* --sub-shm: image areas (shm_name) per reader */
#define SUB_BUFS 16    /* --sub-shm: image sizes per reader */

typedef struct rx_frame {
    uint64_t id, tacq, last_rx;
    uint64_t stamp[4]; /* the last message's t_take_ns, t_sub_ns, t_done_ns, t_pub_ns */
    int parts;
    bool valid;
} rx_frame;

/* --sub-shm: what one reader (SUB socket) owns: a handle per image area
 * (shm_name; re-opened on OCT_ESTALE) and a buffer per image size that it
 * copies the images into (malloc'ed once, reused), outside the mutex. */
typedef struct sub_area {
    char name[64];
    oct_images *img;
} sub_area;
typedef struct sub_buf {
    uint64_t bytes;
    void *p;
} sub_buf;
typedef struct sub_shm {
    sub_area area[SUB_AREAS];
    int narea;
    sub_buf buf[SUB_BUFS];
    int nbuf;
    bool said; /* an error other than overwritten was printed */
} sub_shm;

typedef struct subscriber subscriber;
typedef struct sub_reader {
    subscriber *s;
    void *sock;
    pthread_t th;
    bool started;
    sub_shm shm;
} sub_reader;

struct subscriber {
    void *ctx;
    sub_reader rd[MAX_SUB_SOCKETS];
    int nrd;
    bool shm; /* --sub-shm: the images are copied out of octd's image areas */
    atomic_bool stop;
    pthread_mutex_t mu;
    /* per topic */
    char topics[MAX_TOPICS][48];
    uint64_t last_seq[MAX_TOPICS];
    bool seen_topic[MAX_TOPICS];
    int ntopics;
    /* counters (under mu) */
    uint64_t msgs, gaps, bytes; /* bytes: of the images (--sub-shm: shm_bytes) */
    uint64_t shm_lost;          /* --sub-shm: images overwritten before they were copied */
    uint64_t win_lo, win_hi;   /* frames with t_acq in [lo, hi) are measured */
    uint64_t *lat;             /* latencies of measured frames, ns */
    octbench_stages *st;       /* and where they went (octd's stamps; bench_tails.c) */
    size_t nlat, cap_lat;
    uint64_t frames_in_win, partial_in_win;
    rx_frame map[FRAME_MAP];   /* the frames being received */
    _Atomic uint64_t rx_id; /* last frame id received + 1 (0: none yet) */
};

/* topics: comma-separated prefixes (--topics), NULL: everything; dealt to
 * nsock sockets in turn; shm: endpoint is octd's [publish] shm_endpoint.
 * False (said on stderr) when a socket fails. */
bool sub_start(subscriber *s, const char *endpoint, const char *topics, int nsock, bool shm);
void sub_stop(subscriber *s);
/* Ends every frame still being received (a phase ends): counted, partial
 * when it lacks a topic. */
void sub_finish_all(subscriber *s);


/* bench_e2e.c */
void sleep_ms(double ms);
/* What the unpaced commit producer stays a window ahead of: octd's last
 * published frame (st, --window octd) or, st NULL, the subscriber's last
 * received one. */
void producer_window(producer *p, oct_status *st);
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
extern pid_t octd_last_pid; /* the octd start_octd started last */
typedef struct octd_thread_counts {
    double cpu_s;
    double runq_s; /* runnable but waiting for a CPU (schedstat; 0 without schedstats) */
    uint64_t minflt, majflt, vcsw, nvcsw; /* page faults, (in)voluntary context switches */
} octd_thread_counts;
void octd_thread_counts_get(pid_t pid, octd_thread_counts out[OCTD_THREAD_GROUPS]);
uint64_t system_tlb_shootdowns(void);
void system_lost_cpu(double out[3]); /* irq, softirq, steal seconds (all CPUs) */

/* bench_hostile.c */
void print_publisher_counts(const char *log, const char *wname);
int parse_hostile(const char *text, int (*pairs)[2], int max);
bool hostile_check_cpus(const char *text); /* --hostile-cpus LIST is a CPU list */
void hostile_phases(const octbench_opts *o, const workload *w, producer *pr,
                    subscriber *sub, oct_status *st, const char *endpoint,
                    const char *backend, const char *prod, const char *policy, double warm,
                    double meas, FILE *json);

#endif
