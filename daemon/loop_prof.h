/* loop_prof.h - the frame loop's profile (issue 19): where octd's host time
 * per frame goes, and where a frame's latency goes before it is published.
 *
 * frames.c times each phase of its loop (exclusive times: a complete inside
 * the wait for a frame counts as a complete, not as taking), counts per
 * phase its longest call and the calls over LOOP_STALL_NS, sorts frames by
 * their time in the ring before they were taken (the loop was behind) and
 * from taken to published (octd's own latency), and logs it all in two
 * "frame loop: ..." lines when the path unbinds (drain, reload, exit);
 * `octbench --e2e` prints them.  A clock read is ~20-40 ns: always on. */
#ifndef OCTD_LOOP_PROF_H
#define OCTD_LOOP_PROF_H

#include <stdint.h>

#define LOOP_STALL_NS 500000 /* a phase's call this long counts as a stall */

enum {
    PH_MAIN,     /* main.c between two steps: signals, control block, status, periodic */
    PH_RING,     /* ring peek/copy and verify */
    PH_SUBMIT,   /* oct_engine_submit (CUDA: the graph launch and the copies enqueued) */
    PH_INPUT,    /* oct_engine_input_done queries */
    PH_COMPLETE, /* oct_engine_complete polls and the frames it returned */
    PH_WAIT,     /* blocking completes and input waits: the pipeline was full */
    PH_PUBLISH,  /* publish(): headers, ZeroMQ sends, registration hand-off */
    PH_SLEEP,    /* the poll interval, or the ring library's wait: nothing to do yet */
    PH_COUNT
};

#define LOOP_LAT_BUCKETS 8 /* < 50, 100, 200, 500, 1000, 2000, 5000 us, and more */

typedef struct loop_prof {
    uint64_t frames;                     /* submitted */
    uint64_t ring_wait[LOOP_LAT_BUCKETS]; /* frames by t_acq_ns (or commit) to taken */
    uint64_t in_octd[LOOP_LAT_BUCKETS];  /* frames by taken to published */
    uint64_t backlog_max;                /* frames committed behind the one taken */
    uint64_t copied;                     /* frames in copy-only buffers (ZeroMQ copies) */
    uint64_t t_first, t_step_end;        /* first step; when the last step returned */
    uint64_t steps_ns;                   /* inside octd_frames_step */
    uint64_t ns[PH_COUNT], max[PH_COUNT], stalls[PH_COUNT];
} loop_prof;

/* Adds the time since t0 (CLOCK_MONOTONIC ns) to phase ph; returns now. */
uint64_t loop_prof_add(loop_prof *p, int ph, uint64_t t0);

/* Counts one frame in hist by the time from from_ns to to_ns. */
void loop_prof_latency(uint64_t *hist, uint64_t from_ns, uint64_t to_ns);

/* Logs the profile (nothing when no frame was submitted) and clears it. */
void loop_prof_log(loop_prof *p);

#endif
