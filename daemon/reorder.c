/* reorder.c - see reorder.h.  A ring of `window` entries indexed by
 * seq % window: entry seq is free again once seq was popped. */
#include "reorder.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { EMPTY = 0, FULL = 1, LOST = 2 };

struct octd_reorder {
    uint64_t next;
    uint32_t window, pending;
    size_t item_bytes;
    uint8_t *state; /* window entries */
    uint8_t *items; /* window * item_bytes */
};

oct_err octd_reorder_create(octd_reorder **out, uint32_t window, size_t item_bytes,
                            oct_error *e)
{
    *out = NULL;
    if (window == 0 || window > (1u << 20) || item_bytes == 0 || item_bytes > (1u << 20))
        return oct_error_set(e, OCT_EINVAL, "reorder stage: window %u and item size %zu must "
                             "be from 1 to 1048576", window, item_bytes);
    octd_reorder *r = calloc(1, sizeof *r);
    if (r) {
        r->state = calloc(window, 1);
        r->items = calloc(window, item_bytes);
    }
    if (!r || !r->state || !r->items) {
        octd_reorder_destroy(r);
        return oct_error_set(e, OCT_ENOMEM, "reorder stage: out of memory for %u entries",
                             window);
    }
    r->window = window;
    r->item_bytes = item_bytes;
    *out = r;
    return OCT_OK;
}

void octd_reorder_destroy(octd_reorder *r)
{
    if (!r)
        return;
    free(r->state);
    free(r->items);
    free(r);
}

void octd_reorder_reset(octd_reorder *r, uint64_t next)
{
    memset(r->state, EMPTY, r->window);
    r->next = next;
    r->pending = 0;
}

oct_err octd_reorder_put(octd_reorder *r, uint64_t seq, const void *item, oct_error *e)
{
    if (seq < r->next)
        return oct_error_set(e, OCT_EINVAL, "reorder stage: frame %" PRIu64 " was published "
                             "already (next is %" PRIu64 ")", seq, r->next);
    if (seq - r->next >= r->window)
        return oct_error_set(e, OCT_ESIZE, "reorder stage: frame %" PRIu64 " is beyond the "
                             "window of %u frames after %" PRIu64, seq, r->window, r->next);
    uint32_t i = (uint32_t)(seq % r->window);
    if (r->state[i] != EMPTY)
        return oct_error_set(e, OCT_EINVAL, "reorder stage: frame %" PRIu64 " put twice", seq);
    if (item) {
        memcpy(r->items + (size_t)i * r->item_bytes, item, r->item_bytes);
        r->state[i] = FULL;
    } else {
        r->state[i] = LOST;
    }
    r->pending++;
    return OCT_OK;
}

bool octd_reorder_pop(octd_reorder *r, uint64_t *seq, void *item, bool *lost)
{
    uint32_t i = (uint32_t)(r->next % r->window);
    if (r->state[i] == EMPTY)
        return false;
    *lost = r->state[i] == LOST;
    if (!*lost)
        memcpy(item, r->items + (size_t)i * r->item_bytes, r->item_bytes);
    r->state[i] = EMPTY;
    r->pending--;
    *seq = r->next++;
    return true;
}

uint64_t octd_reorder_next(const octd_reorder *r) { return r->next; }
uint32_t octd_reorder_pending(const octd_reorder *r) { return r->pending; }
uint32_t octd_reorder_window(const octd_reorder *r) { return r->window; }
