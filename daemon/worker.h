/* worker.h - a synchronous (CPU) engine among several (issue 20) runs in a
 * thread of its own, so that the engines compute at once as GPUs do: submit
 * copies the frame into a job (the input is then read), the thread
 * processes the jobs in order, complete hands them back as
 * oct_engine_complete would.  eng_mu is held while the thread uses the
 * engine; the frame thread takes it (worker_hold) for the engine's other
 * verbs.  All calls but the thread's own are from octd's frame thread. */
#ifndef OCTD_WORKER_H
#define OCTD_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_engine.h"
#include "sys.h"

#define ASYNC_DEPTH 2
typedef struct lane_job {
    uint8_t *buf;
    size_t cap, bytes;
    oct_products *out;
    oct_err rc;
    oct_error e;
    int state; /* JOB_* */
} lane_job;
enum { JOB_FREE = 0, JOB_QUEUED, JOB_DONE };

typedef struct lane_worker {
    pthread_t th;
    pthread_mutex_t mu, eng_mu;
    pthread_cond_t cv;
    oct_engine *eng;
    lane_job job[ASYNC_DEPTH];
    int head, count; /* jobs submitted, not completed, oldest first */
    bool stop, running;
    /* set by the frame path after worker_start: where job buffers are made
     * (its engine's NUMA node) and whether their pages are touched then */
    const octd_placement *place;
    bool prefault;
} lane_worker;

/* A thread for eng; NULL when it cannot be started. */
lane_worker *worker_start(oct_engine *eng);
/* After the jobs were completed (drained): joins the thread and frees w. */
void worker_stop(lane_worker *w);
/* Copies the frame into a job (OCT_EAGAIN when ASYNC_DEPTH are in flight). */
oct_err worker_submit(lane_worker *w, const void *frame, size_t bytes, oct_products *out,
                      oct_error *e);
/* As oct_engine_complete: the oldest job within timeout_ms (0: just ask,
 * < 0: no limit); OCT_ESTATE when none is in flight. */
oct_err worker_complete(lane_worker *w, oct_products **done, int timeout_ms, oct_error *e);
/* Waits until every queued frame was processed (they were dealt with the
 * values before), then holds the engine until worker_release. */
void worker_hold(lane_worker *w);
void worker_release(lane_worker *w);

#endif
