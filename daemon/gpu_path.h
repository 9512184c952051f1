/* gpu_path.h - octd's pipelined zero-copy frame path (issue 6).
 *
 * When the engine pipelines (oct_engine_depth() > 1, the CUDA backend) octd
 * does not copy frames out of the ring: it registers the ring's read-only
 * mapping for DMA, peeks frames, submits several of them, verifies each slot
 * once the device has read it (a slot overwritten during the copy is counted
 * torn and its result is never published), completes frames in order into
 * pinned product buffers and hands those to ZeroMQ zero-copy.
 *
 * main.c calls, all from its one thread:
 *   octd_gpu_online_step()  instead of the synchronous online step;
 *   octd_gpu_drain()        before anything that needs the engine idle or
 *                           the ring mapping unused (review, reload, stop);
 *   octd_gpu_fill_cur()     before it keeps the current frame (snapshot);
 *   octd_gpu_free()         at exit, after the publisher is gone.
 * Env OCTD_ZERO_COPY=1 uses this path for depth-1 engines (CPU) too: the CPU
 * engine then reads the ring mapping directly (used by the tests here).
 */
#ifndef OCTD_GPU_PATH_H
#define OCTD_GPU_PATH_H

#include <stdbool.h>

#include "oct_types.h"

struct octd;

/* One online step.  Returns false when the pipelined path does not apply
 * (synchronous engine, no engine for the ring's geometry): the caller then
 * runs its synchronous step.  Otherwise returns true with *rc the ring's
 * result for the caller's ring error handling (OCT_OK, OCT_ETIMEDOUT,
 * OCT_ETORN before the read, OCT_ECLOSED/ESTALE/...: the path has then
 * already drained and unregistered the mapping, so the ring may be closed). */
bool octd_gpu_online_step(struct octd *d, oct_err *rc, oct_error *e);

/* Completes and publishes the frames in flight, unregisters the ring
 * mapping and forgets the engine/ring it was bound to.  No-op when idle. */
void octd_gpu_drain(struct octd *d);

/* Copies the frame last taken from the ring (or, if it has been overwritten
 * since, the newest committed one) into d->cur, so snapshot/review keep a
 * frame although online frames are not copied.  No-op when the path is idle. */
void octd_gpu_fill_cur(struct octd *d);

/* Frees the pinned product buffers (after octd_pub_destroy: ZeroMQ may hold
 * them until then) and the path's state. */
void octd_gpu_free(struct octd *d);

#endif
