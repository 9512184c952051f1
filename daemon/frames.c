/* frames.c - see frames.h.
 *
 * Per frame (all on octd's main thread):
 *   take (peek a pointer into the ring, or copy the slot out) -> submit ->
 *   wait for input_done while completing/publishing older frames -> verify
 *   the slot (in place; torn: the result is discarded) -> ... -> complete in
 *   order -> publish, zero-copy from the pooled product buffer.
 * With a pipelining engine the input of frame n+1 overlaps the compute of n
 * and the download and publishing of n-1; with the synchronous CPU engine
 * submit computes the frame and complete hands it back at once.  Slots are
 * verified one at a time because the ring library verifies the frame handed
 * out by its last peek; the input copies are serial on the device anyway.
 */
#include "frames.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octd.h"
#include "record.h"
#include "register_live.h"

/* Zero-copy buffers: those in flight plus those ZeroMQ still holds (a stalled
 * subscriber keeps up to its high-water mark of them): as many as fit in
 * POOL_BYTES_* (pinned memory is scarcer), at least depth + 2, at most
 * POOL_MAX.  Beyond that, frames go to copy-only buffers (at most the
 * depth: they are free again once their frame is published). */
#define POOL_MAX 32
#define POOL_BYTES_PINNED (3072ull << 20)
#define POOL_BYTES_HOST (256ull << 20)
#define POOL_EAGER_BYTES (256ull << 20)
#define POOL_EXTRA 2                        /* made up front beyond the depth */
#define RETIRED_MAX (2 * POOL_MAX + OCT_ENGINE_DEPTH_MAX)
#define IDLE_WAIT_MS 100                    /* as main.c's ring timeout */
#define POLL_NS 20000                       /* 20 us: a frame takes >= 100 us on a GPU */
#define COMPLETE_WAIT_MS 1000               /* a full pipeline: wait this long per try */

typedef struct path_frame {
    octd_slot *slot;
    oct_frame_info info;
    uint64_t ticket, params_gen;
    bool want_f32, torn;
} path_frame;

/* Product buffers are sized by the engine for its geometry and depths: a
 * pool made for one engine serves any engine with the same key. */
typedef struct pool_key {
    oct_geometry geom;
    uint32_t depths[OCT_METHOD_COUNT];
    uint32_t products; /* pinned buffers hold only these (a volume frame's f32 and
                        * volume capacity would be ~200 MB of pinned memory each) */
} pool_key;

typedef struct octd_frames {
    /* binding: valid while frames may be in flight */
    oct_engine *eng;
    oct_ring_consumer *ring;
    const void *reg_ptr; /* registered mapping, NULL when not registered */
    bool bound, in_place;
    bool recording; /* bound while recording: copied, each frame finished before the next */
    int depth;
    /* frames in flight, oldest first */
    path_frame q[OCT_ENGINE_DEPTH_MAX];
    int head, count;
    /* product buffers: zero-copy ones, then copy-only ones */
    octd_slot *slots[POOL_MAX + OCT_ENGINE_DEPTH_MAX];
    int nslots, ncopy, pool_max;
    uint64_t slot_bytes; /* host bytes of one products object (largest seen) */
    /* buffers of an earlier key that ZeroMQ still held: freed once released */
    octd_slot *retired[RETIRED_MAX];
    int nretired;
    pool_key key;
    bool have_key;
    /* the frame last taken (in place: for snapshots) */
    oct_frame_info last;
    bool have_last;
    bool warned_reg, warned_rekey, warned_copy;
    bool no_publish; /* at exit: the publisher is gone */
} octd_frames;

static void sleep_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static bool geom_same(const oct_geometry *a, const oct_geometry *b)
{
    return a->samples == b->samples && a->ascans == b->ascans && a->lines == b->lines &&
           a->sample_type == b->sample_type && a->sample_shift == b->sample_shift;
}

/* Logs a processing error once per distinct message (as main.c does). */
static void log_once(octd *d, const char *what, const oct_error *e)
{
    if (strcmp(d->proc_err, e->msg) == 0)
        return;
    octd_log(LOG_ERR, "%s: %s", what, e->msg);
    size_t n = strnlen(e->msg, sizeof d->proc_err - 1);
    memcpy(d->proc_err, e->msg, n);
    d->proc_err[n] = '\0';
}

/* ---- frame buffers ---- */
bool octd_frame_buf_fit(octd_frame_buf *b, size_t bytes)
{
    if (b->cap >= bytes && b->cap <= 2 * bytes + 65536)
        return true;
    void *p = NULL;
    /* page aligned: frames are copied in big blocks */
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
        return false;
    free(b->data);
    b->data = p;
    b->cap = bytes;
    b->valid = false;
    return true;
}

void octd_frame_buf_free(octd_frame_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* The products the engine makes: the operator's, plus the volume
 * intensities live registration needs (register_live.h). */
static uint32_t engine_products(const octd *d)
{
    return (d->params.products | octd_reglive_products(d)) & OCT_PRODUCTS_KNOWN;
}

/* Gives the engine the operator's values with engine_products(); main.c
 * sets the operator's own on a control change. */
static void sync_engine_products(octd *d)
{
    const oct_params *cur = oct_engine_params(d->eng);
    uint32_t want = engine_products(d);
    if (!cur || (cur->products & OCT_PRODUCTS_KNOWN) == want)
        return;
    oct_params p = d->params;
    p.products = want | (d->params.products & ~OCT_PRODUCTS_KNOWN);
    oct_error e;
    if (oct_engine_set_params(d->eng, &p, &e) != OCT_OK)
        log_once(d, "registration's volume product", &e);
}

/* ---- the product pool ---- */
static void pool_key_of(const octd *d, pool_key *k)
{
    memset(k, 0, sizeof *k);
    k->geom = d->eng_geom;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        k->depths[m] = oct_engine_depths(d->eng, m);
    k->products = engine_products(d);
}

static uint64_t prod_bytes(const oct_products *p)
{
    uint64_t bytes = 1;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            bytes += (uint64_t)p->img[m][k].cap_pixels *
                     (1 + (p->img[m][k].f32 ? sizeof(float) : 0));
    return bytes;
}

static void slot_free(octd_slot *s)
{
    oct_products_destroy(s->prod);
    free(s);
}

static bool slot_idle(octd_slot *s) { return atomic_load(&s->refs) == 0; }

/* Frees the retired buffers ZeroMQ has released. */
static void pool_reap(octd_frames *g)
{
    int n = 0;
    for (int i = 0; i < g->nretired; i++) {
        if (slot_idle(g->retired[i]))
            slot_free(g->retired[i]);
        else
            g->retired[n++] = g->retired[i];
    }
    g->nretired = n;
}

/* Empties the pool: idle buffers are freed, held ones retired.  False (and
 * nothing changed) when the held ones would not fit in the retired list:
 * subscribers still hold two earlier pools' images. */
static bool pool_clear(octd_frames *g)
{
    pool_reap(g);
    int held = 0;
    for (int i = 0; i < g->nslots; i++)
        held += !slot_idle(g->slots[i]);
    if (g->nretired + held > RETIRED_MAX)
        return false;
    for (int i = 0; i < g->nslots; i++) {
        if (slot_idle(g->slots[i]))
            slot_free(g->slots[i]);
        else
            g->retired[g->nretired++] = g->slots[i];
    }
    g->nslots = g->ncopy = 0;
    g->slot_bytes = 0;
    g->pool_max = 0;
    g->warned_copy = false;
    return true;
}

static void set_pool_max(octd_frames *g, const octd_slot *s)
{
    uint64_t bytes = prod_bytes(s->prod);
    if (bytes <= g->slot_bytes)
        return;
    g->slot_bytes = bytes;
    uint64_t n = (s->prod->pinned ? POOL_BYTES_PINNED : POOL_BYTES_HOST) / bytes;
    int lo = g->depth + POOL_EXTRA;
    g->pool_max = n < (uint64_t)lo ? lo : n > POOL_MAX ? POOL_MAX : (int)n;
}

/* A new buffer (refs 0), zero-copy or copy-only; NULL at the limit. */
static octd_slot *pool_grow(octd_frames *g, octd *d, bool copy_only)
{
    int zc = g->nslots - g->ncopy;
    if (copy_only ? g->ncopy >= g->depth : zc >= (g->pool_max ? g->pool_max : POOL_MAX))
        return NULL;
    oct_error e;
    octd_slot *s = calloc(1, sizeof *s);
    if (!s || !(s->prod = oct_engine_products_create_for(d->eng, g->key.products, &e))) {
        if (s)
            log_once(d, "product buffers", &e);
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 0);
    s->copy_only = copy_only;
    g->slots[g->nslots++] = s;
    g->ncopy += copy_only;
    set_pool_max(g, s);
    return s;
}

/* A buffer nobody holds (refs = 1 on return), never waiting: an idle
 * zero-copy buffer, a new one, else (stalled subscribers keep every zero-copy
 * buffer queued) an idle or new copy-only buffer, whose images ZeroMQ copies.
 * NULL only when the copy-only ones are all in flight (depth > 1 and no
 * memory for more): the caller completes a frame first. */
static octd_slot *pool_acquire(octd_frames *g, octd *d)
{
    for (int pass = 0; pass < 2; pass++) {
        bool copy_only = pass == 1;
        for (int i = 0; i < g->nslots; i++) {
            int zero = 0;
            if (g->slots[i]->copy_only == copy_only &&
                atomic_compare_exchange_strong(&g->slots[i]->refs, &zero, 1))
                return g->slots[i];
        }
        octd_slot *s = pool_grow(g, d, copy_only);
        if (s) {
            atomic_store(&s->refs, 1);
            return s;
        }
        if (!copy_only && !g->warned_copy) {
            octd_log(LOG_NOTICE, "all %d product buffers are held by queued messages (stalled "
                                 "subscribers?): sending copies while they are",
                     g->nslots - g->ncopy);
            g->warned_copy = true;
        }
    }
    return NULL;
}

/* Makes the pool fit the engine's geometry, depths and the products asked
 * for (a new key: the old buffers go, those ZeroMQ holds once released). */
static void pool_sync(octd_frames *g, octd *d)
{
    pool_key k;
    pool_key_of(d, &k);
    int depth = oct_engine_depth(d->eng);
    g->depth = depth > OCT_ENGINE_DEPTH_MAX ? OCT_ENGINE_DEPTH_MAX : depth;
    if (!g->have_key || memcmp(&k, &g->key, sizeof k) != 0) {
        if (!pool_clear(g)) {
            if (!g->warned_rekey)
                octd_log(LOG_WARNING, "product buffers: subscribers still hold earlier ones; "
                                      "keeping the current buffers for now");
            g->warned_rekey = true;
            return;
        }
        if (g->have_key)
            malloc_trim(0); /* a large geometry's buffers: give the memory back */
        g->warned_rekey = false;
        g->key = k;
        g->have_key = true;
    }
    pool_reap(g);
    /* Up front, so the first frames do not wait for (pinned) allocations. */
    while (g->nslots - g->ncopy < g->depth + POOL_EXTRA && pool_grow(g, d, false))
        ;
    /* Pinned products of a few MB (B-scans; volumes without the volume
     * product): the whole pool now, so that no pinned allocation (slow, and
     * it may synchronise the device) happens in the frame loop. */
    if (g->nslots > 0 && g->slots[0]->prod->pinned &&
        (uint64_t)g->pool_max * g->slot_bytes <= POOL_EAGER_BYTES)
        while (pool_grow(g, d, false))
            ;
}

/* ---- binding to an engine and a ring ---- */
static void unbind_path(octd_frames *g)
{
    if (g->reg_ptr)
        oct_engine_unregister_host(g->eng, g->reg_ptr);
    g->reg_ptr = NULL;
    g->eng = NULL;
    g->ring = NULL;
    g->bound = false;
}

static bool want_in_place(const octd *d)
{
    if (d->rec) /* the recording takes the raw frame from d->cur (record.c) */
        return false;
    switch (d->cfg.zero_copy) {
    case OCT_ZERO_COPY_ON: return true;
    case OCT_ZERO_COPY_OFF: return false;
    default: return oct_engine_depth(d->eng) > 1;
    }
}

static void bind_path(octd_frames *g, octd *d)
{
    if (g->bound && g->eng == d->eng && g->ring == d->ring)
        return;
    if (g->bound) {
        /* main.c replaced the engine or ring without draining first: the
         * old engine is gone, so its frames and registration are too. */
        octd_log(LOG_ERR, "frame path: engine or ring replaced with %d frame(s) in flight",
                 g->count);
        for (int i = 0; i < g->count; i++)
            octd_slot_release(g->q[(g->head + i) % OCT_ENGINE_DEPTH_MAX].slot);
        g->count = 0;
        g->reg_ptr = NULL;
        g->bound = false;
    }
    g->eng = d->eng;
    g->ring = d->ring;
    g->head = g->count = 0;
    g->have_last = false;
    g->in_place = want_in_place(d);
    g->recording = d->rec != NULL;
    uint64_t t0 = oct_time_monotonic_ns();
    pool_sync(g, d);
    const oct_ring_header *h = oct_ring_consumer_header(d->ring);
    if (g->in_place) {
        /* Register the whole read-only mapping: every slot is then DMA-able. */
        size_t bytes = (size_t)(h->slot0_offset + (uint64_t)h->slot_count * h->slot_stride);
        oct_error e;
        if (oct_engine_register_host(d->eng, h, bytes, &e) == OCT_OK) {
            g->reg_ptr = h;
        } else if (!g->warned_reg) {
            /* The engine stages such frames through its own pinned buffers. */
            octd_log(LOG_WARNING, "ring %s: no direct DMA (%s); frames are staged by the engine",
                     d->cfg.ring_frames, e.msg);
            g->warned_reg = true;
        }
    }
    g->bound = true;
    bool pinned = g->nslots > 0 && g->slots[0]->prod->pinned;
    octd_log(LOG_INFO, "frame path: %s, depth %d, %d %s product buffers (up to %d), ring %s %s, "
                       "%.0f ms",
             oct_engine_backend_name(d->eng), g->depth, g->nslots, pinned ? "pinned" : "host",
             g->pool_max, d->cfg.ring_frames,
             !g->in_place ? "copied per frame"
             : !g->reg_ptr ? "read in place, staged by the engine"
             : pinned      ? "read in place, registered for DMA"
                           : "read in place",
             (double)(oct_time_monotonic_ns() - t0) / 1e6);
}

/* ---- completing and publishing ---- */
static void publish(octd *d, octd_slot *slot, const oct_frame_info *info, uint64_t params_gen,
                    bool want_f32, bool review)
{
    if (review)
        d->reprocessed++; /* the kept frame again: not a ring frame (issue 14.4) */
    else
        d->processed++;
    octd_frame_meta m = {
        .frame_id = info->frame_id,
        .frame_seq = d->processed,
        .epoch = info->epoch,
        .t_acq_ns = info->t_acq_ns,
        .params_gen = params_gen,
        .skipped = review ? 0 : info->skipped,
        .torn = review ? 0 : d->torn_since,
        .review = review,
        .want_f32 = want_f32,
    };
    uint64_t last_sent = 0;
    /* the volume made for registration alone is not published */
    bool hide_volume = !(d->params.products & OCT_PRODUCT_BIT(OCT_KIND_VOLUME));
    bool vol_present[OCT_METHOD_COUNT];
    for (int k = 0; k < OCT_METHOD_COUNT; k++) {
        vol_present[k] = slot->prod->img[k][OCT_KIND_VOLUME].present;
        if (hide_volume)
            slot->prod->img[k][OCT_KIND_VOLUME].present = false;
    }
    d->published += octd_pub_send_products(d->pub, slot, &m, &d->drops, &last_sent);
    for (int k = 0; k < OCT_METHOD_COUNT; k++)
        slot->prod->img[k][OCT_KIND_VOLUME].present = vol_present[k];
    if (d->reglive)
        octd_reglive_frame(d, slot->prod, &m); /* after the frame's own images: their latency */
    d->torn_since = 0;
    d->last_frame_id = info->frame_id;
    uint64_t t0 = info->t_acq_ns ? info->t_acq_ns : info->commit_ns;
    if (!review && t0 && last_sent > t0)
        d->last_latency = last_sent - t0;
}

/* Completes the oldest frame if done within timeout_ms; true if one was
 * dequeued (published, or discarded when torn or failed). */
static bool complete_one(octd_frames *g, octd *d, int timeout_ms)
{
    if (g->count == 0)
        return false;
    oct_products *done = NULL;
    oct_error e;
    oct_err rc = oct_engine_complete(g->eng, &done, timeout_ms, &e);
    if (rc == OCT_ETIMEDOUT)
        return false;
    path_frame *f = &g->q[g->head];
    if (rc == OCT_ESTATE && !done) {
        /* the engine has nothing in flight: our queue is out of step */
        octd_log(LOG_ERR, "frame path: %d frame(s) lost by the engine", g->count);
        for (int i = 0; i < g->count; i++)
            octd_slot_release(g->q[(g->head + i) % OCT_ENGINE_DEPTH_MAX].slot);
        d->skipped += (uint64_t)g->count;
        g->count = 0;
        return true;
    }
    g->head = (g->head + 1) % OCT_ENGINE_DEPTH_MAX;
    g->count--;
    if (done != f->slot->prod)
        octd_log(LOG_ERR, "frame path: frames completed out of order");
    if (rc != OCT_OK) {
        char what[64];
        snprintf(what, sizeof what, "frame %" PRIu64, f->info.frame_id);
        log_once(d, what, &e);
        d->skipped++;
    } else if (!f->torn && !g->no_publish) {
        d->proc_err[0] = '\0';
        set_pool_max(g, f->slot); /* host buffers grow on first use */
        /* while recording each frame is finished before the next is taken,
         * so d->cur still holds its raw spectra */
        if (g->recording && d->cur.valid && d->cur.info.seq == f->info.seq)
            octd_record_frame(d, &d->cur, f->slot->prod);
        publish(d, f->slot, &f->info, f->params_gen, f->want_f32, false);
    }
    octd_slot_release(f->slot);
    return true;
}

static void drain_all(octd_frames *g, octd *d)
{
    while (g->count > 0)
        complete_one(g, d, -1);
}

void octd_frames_drain(octd *d)
{
    octd_frames *g = d->frames;
    if (!g || !g->bound)
        return;
    drain_all(g, d);
    unbind_path(g);
}

/* ---- taking a frame ---- */
/* Takes one frame per policy: waits up to IDLE_WAIT_MS, completing older
 * frames meanwhile (polling both: the ring and the device have no fd).
 * In place: *ptr points into the mapping; copied: into d->cur. */
static oct_err take_frame(octd_frames *g, octd *d, const void **ptr, oct_frame_info *info,
                          oct_error *e)
{
    uint64_t deadline = oct_time_monotonic_ns() + IDLE_WAIT_MS * 1000000ull;
    oct_ring_policy pol = (oct_ring_policy)d->cfg.policy;
    size_t bytes = oct_geometry_frame_bytes(&d->ring_geom);
    if (!g->in_place && !octd_frame_buf_fit(&d->scratch, bytes))
        return oct_error_set(e, OCT_ENOMEM, "ring %s: no memory for frames of %zu bytes",
                             d->cfg.ring_frames, bytes);
    for (;;) {
        /* nothing else to do: let the ring library sleep */
        int wait = g->count == 0 ? IDLE_WAIT_MS : 0;
        oct_err rc = g->in_place
                         ? oct_ring_consumer_peek(d->ring, pol, wait, ptr, info, e)
                         : oct_ring_consumer_next(d->ring, pol, d->scratch.data, bytes, wait,
                                                  info, e);
        if (rc != OCT_ETIMEDOUT || wait)
            return rc;
        if (complete_one(g, d, 0))
            continue;
        if (oct_time_monotonic_ns() >= deadline)
            return rc;
        sleep_ns(POLL_NS);
    }
}

/* The engine cannot be planned for the ring's geometry: take the frame off
 * the ring (counted skipped) so the counters and re-attach logic go on. */
static oct_err skip_frame(octd *d, oct_error *e)
{
    const void *ptr;
    oct_frame_info info;
    oct_err rc = oct_ring_consumer_peek(d->ring, (oct_ring_policy)d->cfg.policy, IDLE_WAIT_MS,
                                        &ptr, &info, e);
    if (rc == OCT_OK) {
        d->seen += 1 + info.skipped;
        d->skipped += 1 + info.skipped;
    }
    return rc;
}

oct_err octd_frames_step(octd *d, oct_error *e)
{
    if (!d->eng || !geom_same(&d->eng_geom, &d->ring_geom)) {
        octd_frames_drain(d);
        if (!octd_ensure_engine(d, &d->ring_geom))
            return skip_frame(d, e);
    }
    if (!d->frames && !(d->frames = calloc(1, sizeof *d->frames))) {
        octd_log(LOG_ERR, "frame path: out of memory");
        return skip_frame(d, e);
    }
    octd_frames *g = d->frames;
    if (g->bound && g->recording != (d->rec != NULL)) {
        /* a recording starts or ends: finish the frames in flight, then
         * bind again (copied frames, one at a time, while recording) */
        drain_all(g, d);
        unbind_path(g);
    }
    bind_path(g, d);
    /* The operator changed the products: buffers of the new size (the
     * frames in flight keep theirs). */
    sync_engine_products(d);
    if (engine_products(d) != g->key.products) {
        pool_sync(g, d); /* may keep the old buffers (it warns once), then tries again */
        if (engine_products(d) == g->key.products)
            octd_log(LOG_INFO, "products changed: new product buffers");
    }
    /* room for one more frame */
    while (g->count >= g->depth)
        if (!complete_one(g, d, COMPLETE_WAIT_MS))
            return OCT_ETIMEDOUT; /* the device is slow: main loop, then again */

    const void *ptr = NULL;
    oct_frame_info info;
    oct_err rc = take_frame(g, d, &ptr, &info, e);
    if (rc == OCT_ETORN && !g->in_place) { /* frames skipped/lapped before the torn one */
        d->seen += info.skipped;
        d->skipped += info.skipped;
    }
    if (rc == OCT_ETIMEDOUT || rc == OCT_ETORN)
        return rc; /* main.c counts a torn frame */
    if (rc != OCT_OK) {
        /* the ring goes away: finish what was read, release the mapping */
        drain_all(g, d);
        unbind_path(g);
        return rc;
    }
    d->seen += 1 + info.skipped;
    d->skipped += info.skipped;
    if (d->cfg.policy == OCT_POLICY_ALL)
        d->lost += info.skipped; /* policy all skips only what was lapped */
    if (!g->in_place) {
        /* Swap so that `cur` always holds the last frame taken (snapshot). */
        octd_frame_buf t = d->cur;
        d->cur = d->scratch;
        d->scratch = t;
        d->cur.geom = d->ring_geom;
        d->cur.info = info;
        d->cur.valid = true;
        ptr = d->cur.data;
    }
    g->last = info;
    g->have_last = true;

    path_frame *f = &g->q[(g->head + g->count) % OCT_ENGINE_DEPTH_MAX];
    memset(f, 0, sizeof *f);
    f->info = info;
    while (!(f->slot = pool_acquire(g, d)) && complete_one(g, d, COMPLETE_WAIT_MS))
        ;
    if (!f->slot) {
        /* no memory for a buffer: drop */
        d->drops++;
        d->skipped++;
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info); /* ends the peek */
        return OCT_OK;
    }
    f->params_gen = d->applied_gen;
    f->want_f32 = (d->params.products & OCT_PRODUCT_F32) != 0;
    oct_error se;
    size_t bytes = oct_geometry_frame_bytes(&d->ring_geom);
    rc = oct_engine_submit(g->eng, ptr, bytes, f->slot->prod, &se);
    if (rc != OCT_OK) {
        char what[64];
        snprintf(what, sizeof what, "frame %" PRIu64, info.frame_id);
        log_once(d, what, &se);
        octd_slot_release(f->slot);
        d->skipped++;
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info);
        return OCT_OK;
    }
    f->ticket = f->slot->prod->ticket;
    g->count++;
    /* Wait until the engine has read the input (the slot, or the copy that
     * the next frame overwrites), finishing older frames meanwhile (never
     * the new one: it must be verified first). */
    for (;;) {
        rc = oct_engine_input_done(g->eng, f->ticket, 0, &se);
        if (rc != OCT_ETIMEDOUT)
            break;
        if (!(g->count > 1 && complete_one(g, d, 0)))
            sleep_ns(POLL_NS);
    }
    if (rc != OCT_OK) {
        /* the copy failed: its completion reports the error */
        log_once(d, "input copy", &se);
        f->torn = true;
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info);
    } else if (g->in_place && oct_ring_consumer_verify(d->ring, &info) != OCT_OK) {
        f->torn = true; /* overwritten while the engine read it: never published */
        d->torn++;
        d->torn_since++;
    }
    /* With a synchronous engine the frame is finished already; a recording
     * needs it finished while d->cur holds its raw spectra. */
    if (g->depth == 1 || g->recording)
        complete_one(g, d, -1);
    return OCT_OK;
}

/* ---- review ---- */
void octd_frames_review(octd *d)
{
    const octd_frame_buf *k = &d->kept;
    if (!k->valid || !octd_ensure_engine(d, &k->geom))
        return;
    if (!d->frames && !(d->frames = calloc(1, sizeof *d->frames)))
        return;
    octd_frames *g = d->frames;
    octd_frames_drain(d); /* the engine runs synchronously here */
    sync_engine_products(d);
    pool_sync(g, d);
    octd_slot *slot = pool_acquire(g, d);
    if (!slot) {
        d->drops++; /* ring counters count ring frames only: not skipped */
        return;
    }
    oct_error e;
    /* Review re-processes the kept frame again and again: it must not enter
     * the rolling background's history (which would drift the image). */
    oct_engine_hold_history(d->eng, true);
    oct_err rc = oct_engine_process(d->eng, k->data, oct_geometry_frame_bytes(&k->geom),
                                    slot->prod, &e);
    oct_engine_hold_history(d->eng, false);
    if (rc != OCT_OK) {
        char what[64];
        snprintf(what, sizeof what, "review of frame %" PRIu64, k->info.frame_id);
        log_once(d, what, &e);
    } else {
        set_pool_max(g, slot);
        publish(d, slot, &k->info, d->applied_gen, (d->params.products & OCT_PRODUCT_F32) != 0,
                true);
    }
    octd_slot_release(slot);
}

/* ---- snapshot support ---- */
void octd_frames_fill_cur(octd *d)
{
    octd_frames *g = d->frames;
    if (!g || !g->bound || !g->in_place || !g->have_last || !d->ring)
        return;
    size_t bytes = oct_geometry_frame_bytes(&d->ring_geom);
    if (!octd_frame_buf_fit(&d->cur, bytes)) {
        octd_log(LOG_ERR, "snapshot: no memory for a frame of %zu bytes", bytes);
        return;
    }
    /* The frame last taken; if the producer has reused its slot since, the
     * newest committed frame. */
    oct_frame_info info;
    oct_error e;
    oct_err rc = oct_ring_consumer_copy(d->ring, g->last.seq, d->cur.data, bytes, &info, &e);
    if (rc == OCT_ETORN)
        rc = oct_ring_consumer_copy(d->ring, OCT_RING_NEWEST, d->cur.data, bytes, &info, &e);
    if (rc != OCT_OK) {
        octd_log(LOG_WARNING, "snapshot: %s", e.msg);
        d->cur.valid = false;
        return;
    }
    d->cur.info = info;
    d->cur.geom = d->ring_geom;
    d->cur.valid = true;
}

/* ---- memory ---- */
void octd_frames_trim(octd *d)
{
    octd_frames *g = d->frames;
    if (g) {
        pool_reap(g);
        /* idle host buffers beyond what is made up front (pinned ones stay:
         * making them again in the frame loop would stall it) */
        int n = 0, keep = g->depth + POOL_EXTRA, zc = 0;
        for (int i = 0; i < g->nslots; i++) {
            octd_slot *s = g->slots[i];
            bool extra = s->copy_only || zc >= keep;
            if (extra && slot_idle(s) && !s->prod->pinned) {
                g->ncopy -= s->copy_only;
                slot_free(s);
                continue;
            }
            zc += !s->copy_only;
            g->slots[n++] = s;
        }
        g->nslots = n;
    }
    malloc_trim(0);
}

void octd_frames_free(octd *d)
{
    octd_frames *g = d->frames;
    if (!g)
        return;
    if (g->bound) {
        /* main.c should have drained before destroying the publisher */
        g->no_publish = true;
        drain_all(g, d);
        unbind_path(g);
    }
    /* ZeroMQ is gone: nobody holds them */
    for (int i = 0; i < g->nslots; i++)
        slot_free(g->slots[i]);
    for (int i = 0; i < g->nretired; i++)
        slot_free(g->retired[i]);
    free(g);
    d->frames = NULL;
}
