/* worker.c - see worker.h. */
#include "worker.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *worker_main(void *arg)
{
    lane_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        lane_job *j = NULL;
        for (int i = 0; i < w->count && !j; i++) {
            lane_job *c = &w->job[(w->head + i) % ASYNC_DEPTH];
            if (c->state == JOB_QUEUED)
                j = c;
        }
        if (!j) {
            if (w->stop)
                break;
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        w->running = true;
        pthread_mutex_unlock(&w->mu);
        pthread_mutex_lock(&w->eng_mu);
        oct_err rc = oct_engine_process(w->eng, j->buf, j->bytes, j->out, &j->e);
        pthread_mutex_unlock(&w->eng_mu);
        pthread_mutex_lock(&w->mu);
        j->rc = rc;
        j->state = JOB_DONE;
        w->running = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

lane_worker *worker_start(oct_engine *eng)
{
    lane_worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->eng = eng;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->eng_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        pthread_mutex_destroy(&w->eng_mu);
        free(w);
        return NULL;
    }
    return w;
}

/* After the jobs were completed (drained): joins the thread. */
void worker_stop(lane_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    for (int i = 0; i < ASYNC_DEPTH; i++)
        free(w->job[i].buf);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->eng_mu);
    free(w);
}

/* The frame is copied: its input is read when this returns. */
oct_err worker_submit(lane_worker *w, const void *frame, size_t bytes, oct_products *out,
                      oct_error *e)
{
    if (w->count >= ASYNC_DEPTH) /* only this thread changes count */
        return oct_error_set(e, OCT_EAGAIN, "engine: %d frames in flight already", ASYNC_DEPTH);
    lane_job *j = &w->job[(w->head + w->count) % ASYNC_DEPTH]; /* free: the worker leaves it */
    if (j->cap < bytes) {
        uint8_t *b = NULL;
        cpu_set_t saved;
        bool placed = octd_placement_enter(w->place, &saved);
        if (posix_memalign((void **)&b, 4096, bytes) == 0 && w->prefault)
            octd_prefault(b, bytes); /* on the engine's node, before the frame loop needs it */
        octd_placement_leave(placed, &saved);
        if (!b)
            return oct_error_set(e, OCT_ENOMEM, "engine: no memory for a frame of %zu bytes",
                                 bytes);
        free(j->buf);
        j->buf = b;
        j->cap = bytes;
    }
    memcpy(j->buf, frame, bytes);
    j->bytes = bytes;
    j->out = out;
    pthread_mutex_lock(&w->mu);
    j->state = JOB_QUEUED;
    w->count++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return OCT_OK;
}

/* As oct_engine_complete: the oldest job, within timeout_ms (< 0: no limit). */
oct_err worker_complete(lane_worker *w, oct_products **done, int timeout_ms, oct_error *e)
{
    *done = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->count == 0) {
        pthread_mutex_unlock(&w->mu);
        return oct_error_set(e, OCT_ESTATE, "engine: nothing in flight");
    }
    lane_job *j = &w->job[w->head];
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec = (long)(ns % 1000000000ull);
    while (j->state != JOB_DONE && timeout_ms != 0)
        if (timeout_ms < 0 ? pthread_cond_wait(&w->cv, &w->mu)
                           : pthread_cond_timedwait(&w->cv, &w->mu, &until))
            break;
    if (j->state != JOB_DONE) {
        pthread_mutex_unlock(&w->mu);
        return OCT_ETIMEDOUT;
    }
    oct_err rc = j->rc;
    if (rc != OCT_OK)
        *e = j->e;
    *done = j->out;
    j->state = JOB_FREE;
    w->head = (w->head + 1) % ASYNC_DEPTH;
    w->count--;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Takes the engine from its worker: waits until the worker has processed
 * every queued frame (they were dealt with the values before), then holds it. */
void worker_hold(lane_worker *w)
{
    pthread_mutex_lock(&w->mu);
    for (;;) {
        bool queued = w->running;
        for (int i = 0; i < w->count; i++)
            queued |= w->job[(w->head + i) % ASYNC_DEPTH].state == JOB_QUEUED;
        if (!queued)
            break;
        pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_lock(&w->eng_mu);
    pthread_mutex_unlock(&w->mu);
}

void worker_release(lane_worker *w) { pthread_mutex_unlock(&w->eng_mu); }
