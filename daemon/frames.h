/* frames.h - octd's one frame path (issues 6, 13.4, 21.1): ring -> engine
 * submit/complete -> product buffers from one pool -> publisher, for every
 * backend.
 *
 * Input, per [ring] zero_copy (octd.ini):
 *   in place  the engine reads the slot in the ring's mapping (registered for
 *             DMA on CUDA); once it has read it (input_done) the slot is
 *             verified, and a frame overwritten meanwhile is counted torn and
 *             its result never published.  auto: when the engine pipelines
 *             (oct_engine_depth() > 1, CUDA).
 *   copy      the slot is copied out of the ring first (oct_ring_consumer_next:
 *             torn copies detected there, SIGBUS-guarded) and the engine reads
 *             the copy; d->cur is then always the last frame taken.  auto: the
 *             synchronous CPU engine (its reads of a mapping would not be
 *             guarded against a producer that truncates the ring).
 * Products: one pool of oct_products (pinned on CUDA) that zero-copy ZeroMQ
 * messages borrow.  Taking a buffer never waits for subscribers: when queued
 * messages of stalled subscribers hold every pooled buffer, the frame goes to a
 * copy-only buffer whose images ZeroMQ copies (README "Slow subscribers").
 *
 * Several engines ([engine] devices, issue 20): frames are dealt to the live
 * engines in turn (each with room for one more in flight), and a reorder
 * stage (reorder.h) publishes them in the order they were dealt, so
 * frame_seq and image_seq stay contiguous.  An engine with a device error is
 * taken out (not the last one): its frames in flight are lost, counted,
 * never published; the reason goes to d->engine_warning and the log.  Each
 * engine has its own product pool and its own registration of the ring; a
 * synchronous (CPU) engine among several computes in a thread of its own.
 *
 * main.c calls, all from its one thread:
 *   octd_frames_step()      one online step (takes, submits, completes, publishes);
 *   octd_frames_review()    re-processes d->kept and publishes it as review;
 *   octd_frames_drain()     before anything that needs the engine idle or the
 *                           ring mapping unused (review, reload, stop, detach);
 *   octd_frames_fill_cur()  before it keeps the current frame (snapshot);
 *   octd_frames_trim()      after large work ended (memory back to the system);
 *   octd_frames_free()      at exit, after the publisher is gone.
 */
#ifndef OCTD_FRAMES_H
#define OCTD_FRAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "oct_engine.h"
#include "oct_types.h"

struct octd;
struct octd_frame_buf;

/* One online step.  Returns the ring's result for main.c's ring error
 * handling: OCT_OK (a frame taken, or the engine cannot be planned and the
 * frame was skipped), OCT_ETIMEDOUT, OCT_ETORN (counted by the caller; frames
 * skipped before it are counted here), OCT_ECLOSED/ESTALE/...: the path has
 * drained and unregistered the mapping, so the ring may be closed. */
oct_err octd_frames_step(struct octd *d, oct_error *e);

/* Processes d->kept synchronously (after draining) and publishes it with
 * mode "review"; its rolling-background history is held. */
void octd_frames_review(struct octd *d);

/* Completes and publishes the frames in flight, unregisters the ring mapping
 * and forgets the engine/ring it was bound to.  No-op when idle. */
void octd_frames_drain(struct octd *d);

/* In-place input only: copies the frame last taken (or, if its slot was
 * reused since, the newest committed one) into d->cur.  No-op otherwise. */
void octd_frames_fill_cur(struct octd *d);

/* Frees product buffers and frame buffers beyond the current need and gives
 * free heap memory back to the system (malloc_trim). */
void octd_frames_trim(struct octd *d);

/* Fits b to hold bytes (page aligned): grows, and shrinks when it is more
 * than twice as large as needed.  A reallocation invalidates b. */
bool octd_frame_buf_fit(struct octd_frame_buf *b, size_t bytes);
void octd_frame_buf_free(struct octd_frame_buf *b);

/* oct_engine_set_params on engine k (of d->engs, or d->eng): with several
 * engines a CPU engine computes in a thread of its own, which has finished
 * the frames dealt before when the values change. */
oct_err octd_frames_set_params(struct octd *d, int k, const oct_params *p, oct_error *e);

/* Frames published per engine since the engines were bound, and which were
 * taken out; *n engines (0 when unbound).  Arrays of OCT_ENGINES_MAX. */
void octd_frames_engine_counts(const struct octd *d, uint64_t *published, bool *dead, int *n);

/* Frees the product buffers (after octd_pub_destroy: ZeroMQ may hold them
 * until then) and the path's state. */
void octd_frames_free(struct octd *d);

#endif
