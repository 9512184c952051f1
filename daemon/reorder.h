/* reorder.h - puts results that several engines finish in any order back
 * into the order their frames were dealt (issue 20), before the publisher.
 *
 * Frames are numbered 0, 1, 2, ... as they are dealt (the dispatch
 * sequence).  Each finished frame is put under its number with a fixed-size
 * item (copied), or marked lost (nothing to publish: a torn frame, a failed
 * engine's frames in flight); pop hands them out strictly by number and
 * stops at the first one not yet put, so nothing is published out of order
 * and nothing is skipped without a mark.  The window (how far ahead of the
 * next number a frame may be) is fixed at creation: the frame path never
 * deals more frames than it holds. */
#ifndef OCTD_REORDER_H
#define OCTD_REORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_types.h"

typedef struct octd_reorder octd_reorder;

/* window: frames ahead of the next to pop, >= 1; item_bytes: size of an item. */
oct_err octd_reorder_create(octd_reorder **out, uint32_t window, size_t item_bytes,
                            oct_error *e);
void octd_reorder_destroy(octd_reorder *r);

/* Starts again at sequence number `next` (all entries forgotten). */
void octd_reorder_reset(octd_reorder *r, uint64_t next);

/* Puts frame seq's item (NULL: lost, nothing to publish).  OCT_EINVAL when
 * seq was popped already or put twice, OCT_ESIZE when it is beyond the
 * window (the message gives both numbers); nothing is changed then. */
oct_err octd_reorder_put(octd_reorder *r, uint64_t seq, const void *item, oct_error *e);

/* The next frame in order, if it was put: true, *seq set, the item copied to
 * `item` and *lost false; or *lost true (item untouched) for a lost one.
 * false when the next frame is still out. */
bool octd_reorder_pop(octd_reorder *r, uint64_t *seq, void *item, bool *lost);

uint64_t octd_reorder_next(const octd_reorder *r);   /* number of the next to pop */
uint32_t octd_reorder_pending(const octd_reorder *r); /* entries put, not popped */
uint32_t octd_reorder_window(const octd_reorder *r);

#endif
