/* gpu_path.c - see gpu_path.h.
 *
 * Per frame (all on octd's main thread):
 *   peek (pointer into the ring) -> submit (DMA from the registered mapping
 *   starts) -> wait for input_done while completing/publishing older frames
 *   -> verify the slot (torn: the result will be discarded) -> ... ->
 *   complete in order -> publish zero-copy from pinned products.
 * The copy of frame n+1 thus overlaps the compute of n and the download and
 * publishing of n-1.  Slots are verified one at a time because the ring
 * library verifies the frame handed out by its last peek; the input copies
 * are serial on the device anyway, so this costs only the host's reaction
 * time between two copies.
 */
#include "gpu_path.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octd.h"

/* Pinned buffers: those in flight plus those ZeroMQ still holds (sndhwm
 * messages per subscriber; a B-scan frame is 2 messages, a volume 8): as many
 * as fit in POOL_BYTES, at least depth + 2, at most POOL_MAX. */
#define POOL_MAX 24
#define POOL_BYTES (3072ull << 20)
#define POOL_EAGER_BYTES (256ull << 20)
#define POOL_EXTRA 2                        /* made up front beyond the depth */
#define IDLE_WAIT_MS 100                    /* as main.c's ring timeout */
#define SLOT_WAIT_MS 20                     /* for a pool buffer ZeroMQ still holds */
#define RESERVE_AFTER_MS 1                  /* then the reserve buffer (sent as copies) */
#define POLL_NS 20000                       /* 20 us: a frame takes >= 100 us on a GPU */
#define COMPLETE_WAIT_MS 1000               /* a full pipeline: wait this long per try */

typedef struct gpu_frame {
    octd_slot *slot;
    oct_frame_info info;
    uint64_t ticket, params_gen;
    bool want_f32, torn;
} gpu_frame;

/* Product buffers are sized by the engine for its geometry and depths: a
 * pool made for one engine serves any engine with the same key. */
typedef struct pool_key {
    oct_geometry geom;
    uint32_t depths[OCT_METHOD_COUNT];
    uint32_t products; /* buffers hold only these (a volume frame's f32 and volume
                        * capacity would be ~200 MB of pinned memory each) */
} pool_key;

typedef struct octd_gpu {
    /* binding: valid while frames may be in flight */
    oct_engine *eng;
    oct_ring_consumer *ring;
    const void *reg_ptr; /* registered mapping, NULL when not registered */
    bool bound;
    int depth;
    /* frames in flight, oldest first */
    gpu_frame q[OCT_ENGINE_DEPTH_MAX];
    int head, count;
    /* pinned products */
    octd_slot *slots[POOL_MAX];
    int nslots, pool_max;
    uint64_t slot_bytes; /* host bytes of one products object */
    /* buffers of an earlier geometry that ZeroMQ still held: freed once released */
    octd_slot *retired[2 * POOL_MAX];
    int nretired;
    pool_key key;
    /* the frame last taken (for snapshots) */
    oct_frame_info last;
    bool have_last;
    bool warned_reg;
    bool warned_rekey;
    bool no_publish; /* at exit: the publisher is gone */
} octd_gpu;

static void sleep_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static bool zero_copy_forced(void)
{
    const char *v = getenv("OCTD_ZERO_COPY");
    return v && v[0] == '1';
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

/* ---- pinned product pool ---- */
static void pool_key_of(const octd *d, pool_key *k)
{
    memset(k, 0, sizeof *k);
    k->geom = d->eng_geom;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        k->depths[m] = oct_engine_depths(d->eng, m);
    k->products = d->params.products & OCT_PRODUCTS_KNOWN;
}

static void slot_free(octd_slot *s)
{
    oct_products_destroy(s->prod);
    free(s);
}

/* Frees the retired buffers ZeroMQ has released. */
static void pool_reap(octd_gpu *g)
{
    int n = 0;
    for (int i = 0; i < g->nretired; i++) {
        if (atomic_load(&g->retired[i]->refs) == 0)
            slot_free(g->retired[i]);
        else
            g->retired[n++] = g->retired[i];
    }
    g->nretired = n;
}

/* Empties the pool: free buffers are freed, held ones retired.  False (and
 * nothing changed) when the held ones would not fit in the retired list:
 * subscribers still hold two earlier pools' images. */
static bool pool_clear(octd_gpu *g)
{
    pool_reap(g);
    int held = 0;
    for (int i = 0; i < g->nslots; i++)
        held += atomic_load(&g->slots[i]->refs) != 0;
    if (g->nretired + held > 2 * POOL_MAX)
        return false;
    for (int i = 0; i < g->nslots; i++) {
        octd_slot *s = g->slots[i];
        if (atomic_load(&s->refs) == 0)
            slot_free(s);
        else
            g->retired[g->nretired++] = s;
    }
    g->nslots = 0;
    return true;
}

static octd_slot *pool_grow(octd_gpu *g, octd *d)
{
    if (g->nslots >= (g->pool_max ? g->pool_max : POOL_MAX))
        return NULL;
    oct_error e;
    octd_slot *s = calloc(1, sizeof *s);
    if (!s || !(s->prod = oct_engine_products_create_for(d->eng, g->key.products, &e))) {
        if (s)
            log_once(d, "pinned product buffers", &e);
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 0);
    g->slots[g->nslots++] = s;
    if (!g->pool_max) {
        uint64_t bytes = 1;
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++)
                bytes += (uint64_t)s->prod->img[m][k].cap_pixels *
                         (1 + (s->prod->img[m][k].f32 ? sizeof(float) : 0));
        g->slot_bytes = bytes;
        uint64_t n = POOL_BYTES / bytes;
        int lo = g->depth + POOL_EXTRA;
        g->pool_max = n < (uint64_t)lo ? lo : n > POOL_MAX ? POOL_MAX : (int)n;
    }
    return s;
}

/* A buffer with no holder (refs = 1 on return), or NULL after wait_ms.
 * When stalled subscribers keep every zero-copy buffer queued, the reserve
 * buffer (copy_only: its images are sent as copies, so ZeroMQ never holds
 * it) is used rather than waiting: a slow subscriber must not slow octd. */
static octd_slot *pool_acquire(octd_gpu *g, octd *d, int wait_ms)
{
    for (int waited = 0;; waited++) {
        for (int pass = 0; pass < (waited >= RESERVE_AFTER_MS ? 2 : 1); pass++)
            for (int i = 0; i < g->nslots; i++) {
                int zero = 0;
                if (g->slots[i]->copy_only == (pass == 1) &&
                    atomic_compare_exchange_strong(&g->slots[i]->refs, &zero, 1))
                    return g->slots[i];
            }
        octd_slot *s = pool_grow(g, d);
        if (s) {
            atomic_store(&s->refs, 1);
            return s;
        }
        if (waited >= wait_ms)
            return NULL;
        sleep_ns(1000000);
    }
}

/* ---- binding to an engine and a ring ---- */
static void unbind_path(octd_gpu *g)
{
    if (g->reg_ptr)
        oct_engine_unregister_host(g->eng, g->reg_ptr);
    g->reg_ptr = NULL;
    g->eng = NULL;
    g->ring = NULL;
    g->bound = false;
}

/* Makes the pool fit the engine's geometry, depths and the products asked
 * for (a new key: the old buffers go, those ZeroMQ holds once released). */
static void pool_fill(octd_gpu *g, octd *d)
{
    pool_key k;
    pool_key_of(d, &k);
    if (memcmp(&k, &g->key, sizeof k) != 0) {
        if (!pool_clear(g)) {
            if (!g->warned_rekey)
                octd_log(LOG_WARNING, "product buffers: subscribers still hold earlier ones; "
                                      "keeping the current buffers for now");
            g->warned_rekey = true;
            return;
        }
        g->warned_rekey = false;
        g->key = k;
        g->pool_max = 0; /* set from the first new buffer's size */
    }
    pool_reap(g);
    /* Up front, so the first frames do not wait for pinned allocations. */
    while (g->nslots < g->depth + POOL_EXTRA && pool_grow(g, d))
        ;
    bool have_reserve = false;
    for (int i = 0; i < g->nslots; i++)
        have_reserve |= g->slots[i]->copy_only;
    octd_slot *r = have_reserve ? NULL : pool_grow(g, d);
    if (r)
        r->copy_only = true;
    /* Products of a few MB (B-scans; volumes without the volume product):
     * the whole pool now, so that no pinned allocation (slow, and it may
     * synchronise the device) happens in the frame loop. */
    if (g->nslots > 0 && (uint64_t)g->pool_max * g->slot_bytes <= POOL_EAGER_BYTES)
        while (g->nslots < g->pool_max && pool_grow(g, d))
            ;
}

static bool bind_path(octd_gpu *g, octd *d)
{
    if (g->bound && g->eng == d->eng && g->ring == d->ring)
        return true;
    if (g->bound) {
        /* main.c replaced the engine or ring without draining first: the
         * old engine is gone, so its frames and registration are too. */
        octd_log(LOG_ERR, "gpu path: engine or ring replaced with %d frame(s) in flight", g->count);
        for (int i = 0; i < g->count; i++)
            octd_slot_release(g->q[(g->head + i) % OCT_ENGINE_DEPTH_MAX].slot);
        g->count = 0;
        g->reg_ptr = NULL;
        g->bound = false;
    }
    g->eng = d->eng;
    g->ring = d->ring;
    g->depth = oct_engine_depth(d->eng);
    if (g->depth > OCT_ENGINE_DEPTH_MAX)
        g->depth = OCT_ENGINE_DEPTH_MAX;
    g->head = g->count = 0;
    g->have_last = false;
    uint64_t t0 = oct_time_monotonic_ns();
    pool_fill(g, d);
    /* Register the whole read-only mapping: every slot is then DMA-able. */
    const oct_ring_header *h = oct_ring_consumer_header(d->ring);
    size_t bytes = (size_t)(h->slot0_offset + (uint64_t)h->slot_count * h->slot_stride);
    oct_error e;
    oct_err rc = oct_engine_register_host(d->eng, h, bytes, &e);
    if (rc == OCT_OK) {
        g->reg_ptr = h;
    } else if (!g->warned_reg) {
        /* The engine stages such frames through its own pinned buffers. */
        octd_log(LOG_WARNING, "ring %s: no direct DMA (%s); frames are staged by the engine",
                 d->cfg.ring_frames, e.msg);
        g->warned_reg = true;
    }
    g->bound = true;
    bool pinned = g->nslots > 0 && g->slots[0]->prod->pinned;
    octd_log(LOG_INFO, "pipelined %s path: depth %d, %d %s product buffers, ring %s %s, %.0f ms",
             oct_engine_backend_name(d->eng), g->depth, g->nslots, pinned ? "pinned" : "host",
             d->cfg.ring_frames,
             !g->reg_ptr ? "staged by the engine" : pinned ? "registered for DMA" : "read in place",
             (double)(oct_time_monotonic_ns() - t0) / 1e6);
    return true;
}

/* ---- completing and publishing ---- */
static void publish(octd *d, gpu_frame *f)
{
    d->processed++;
    octd_frame_meta m = {
        .frame_id = f->info.frame_id,
        .frame_seq = d->processed,
        .epoch = f->info.epoch,
        .t_acq_ns = f->info.t_acq_ns,
        .params_gen = f->params_gen,
        .skipped = f->info.skipped,
        .torn = d->torn_since,
        .review = false,
        .want_f32 = f->want_f32,
    };
    uint64_t last_sent = 0;
    d->published += octd_pub_send_products(d->pub, f->slot, &m, &d->drops, &last_sent);
    d->torn_since = 0;
    d->last_frame_id = f->info.frame_id;
    uint64_t t0 = f->info.t_acq_ns ? f->info.t_acq_ns : f->info.commit_ns;
    if (t0 && last_sent > t0)
        d->last_latency = last_sent - t0;
}

/* Completes the oldest frame if done within timeout_ms; true if one was
 * dequeued (published, or discarded when torn or failed). */
static bool complete_one(octd_gpu *g, octd *d, int timeout_ms)
{
    if (g->count == 0)
        return false;
    oct_products *done = NULL;
    oct_error e;
    oct_err rc = oct_engine_complete(g->eng, &done, timeout_ms, &e);
    if (rc == OCT_ETIMEDOUT)
        return false;
    gpu_frame *f = &g->q[g->head];
    if (rc == OCT_ESTATE && !done) {
        /* the engine has nothing in flight: our queue is out of step */
        octd_log(LOG_ERR, "gpu path: %d frame(s) lost by the engine", g->count);
        for (int i = 0; i < g->count; i++)
            octd_slot_release(g->q[(g->head + i) % OCT_ENGINE_DEPTH_MAX].slot);
        d->skipped += (uint64_t)g->count;
        g->count = 0;
        return true;
    }
    g->head = (g->head + 1) % OCT_ENGINE_DEPTH_MAX;
    g->count--;
    if (done != f->slot->prod)
        octd_log(LOG_ERR, "gpu path: frames completed out of order");
    if (rc != OCT_OK) {
        char what[64];
        snprintf(what, sizeof what, "frame %" PRIu64, f->info.frame_id);
        log_once(d, what, &e);
        d->skipped++;
    } else if (!f->torn && !g->no_publish) {
        d->proc_err[0] = '\0';
        publish(d, f);
    }
    octd_slot_release(f->slot);
    return true;
}

static void drain_all(octd_gpu *g, octd *d)
{
    while (g->count > 0)
        complete_one(g, d, -1);
}

void octd_gpu_drain(octd *d)
{
    octd_gpu *g = d->gpu;
    if (!g || !g->bound)
        return;
    drain_all(g, d);
    unbind_path(g);
}

/* ---- the online step ---- */
static bool path_applies(const octd *d)
{
    if (!d->eng || !d->ring || d->error_state || !geom_same(&d->eng_geom, &d->ring_geom))
        return false;
    if (d->rec) /* recording takes frames from process_frame() (record.c) */
        return false;
    return oct_engine_depth(d->eng) > 1 || zero_copy_forced();
}

/* Takes one frame per policy: waits up to IDLE_WAIT_MS, completing older
 * frames meanwhile (polling both: the ring and the device have no fd). */
static oct_err take_frame(octd_gpu *g, octd *d, const void **ptr, oct_frame_info *info,
                          oct_error *e)
{
    uint64_t deadline = oct_time_monotonic_ns() + IDLE_WAIT_MS * 1000000ull;
    oct_ring_policy pol = (oct_ring_policy)d->cfg.policy;
    for (;;) {
        if (g->count == 0) /* nothing else to do: let the ring library sleep */
            return oct_ring_consumer_peek(d->ring, pol, IDLE_WAIT_MS, ptr, info, e);
        oct_err rc = oct_ring_consumer_peek(d->ring, pol, 0, ptr, info, e);
        if (rc != OCT_ETIMEDOUT)
            return rc;
        if (complete_one(g, d, 0))
            continue;
        if (oct_time_monotonic_ns() >= deadline)
            return rc;
        sleep_ns(POLL_NS);
    }
}

bool octd_gpu_online_step(octd *d, oct_err *rc_out, oct_error *e)
{
    *rc_out = OCT_OK;
    if (!path_applies(d)) {
        octd_gpu_drain(d);
        return false;
    }
    if (!d->gpu && !(d->gpu = calloc(1, sizeof *d->gpu))) {
        octd_log(LOG_ERR, "gpu path: out of memory; using the copying path");
        return false;
    }
    octd_gpu *g = d->gpu;
    if (!bind_path(g, d))
        return false;
    /* The operator changed the products: buffers of the new size (the
     * frames in flight keep theirs). */
    if ((d->params.products & OCT_PRODUCTS_KNOWN) != g->key.products) {
        pool_fill(g, d); /* may keep the old buffers (it warns once), then tries again */
        if ((d->params.products & OCT_PRODUCTS_KNOWN) == g->key.products)
            octd_log(LOG_INFO, "products changed: new pinned product buffers");
    }
    /* room for one more frame */
    while (g->count >= g->depth)
        if (!complete_one(g, d, COMPLETE_WAIT_MS))
            return true; /* the device is slow: main loop, then again */

    const void *ptr = NULL;
    oct_frame_info info;
    oct_err rc = take_frame(g, d, &ptr, &info, e);
    if (rc == OCT_ETIMEDOUT || rc == OCT_ETORN) {
        *rc_out = rc; /* main.c counts a torn frame */
        return true;
    }
    if (rc != OCT_OK) {
        /* the ring goes away: finish what was read, release the mapping */
        drain_all(g, d);
        unbind_path(g);
        *rc_out = rc;
        return true;
    }
    d->seen += 1 + info.skipped;
    d->skipped += info.skipped;
    g->last = info;
    g->have_last = true;

    gpu_frame *f = &g->q[(g->head + g->count) % OCT_ENGINE_DEPTH_MAX];
    memset(f, 0, sizeof *f);
    f->info = info;
    f->slot = pool_acquire(g, d, SLOT_WAIT_MS);
    if (!f->slot) {
        /* every buffer is held by ZeroMQ (slow subscribers): drop */
        d->drops++;
        d->skipped++;
        oct_ring_consumer_verify(d->ring, &info); /* ends the peek */
        return true;
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
        oct_ring_consumer_verify(d->ring, &info);
        return true;
    }
    f->ticket = f->slot->prod->ticket;
    g->count++;
    /* Wait until the device has read the slot, finishing older frames
     * meanwhile (never the new one: it must be verified first). */
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
        oct_ring_consumer_verify(d->ring, &info);
    } else if (oct_ring_consumer_verify(d->ring, &info) != OCT_OK) {
        f->torn = true; /* overwritten during the DMA: never published */
        d->torn++;
        d->torn_since++;
    }
    /* With a synchronous engine the frame is finished already. */
    if (g->depth == 1)
        complete_one(g, d, -1);
    return true;
}

/* ---- snapshot support ---- */
static const oct_slot_header *slot_of(const oct_ring_header *h, uint64_t n)
{
    return (const oct_slot_header *)((const uint8_t *)h + h->slot0_offset +
                                     (n & (h->slot_count - 1)) * h->slot_stride);
}

/* Copies frame n if it is intact before and after the copy (SPEC 3.1). */
static bool copy_frame(const oct_ring_header *h, uint64_t n, octd_frame_buf *dst, size_t bytes,
                       oct_frame_info *info)
{
    const oct_slot_header *s = slot_of(h, n);
    uint64_t want = 2 * n + 2;
    if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != want)
        return false;
    uint64_t fid = s->frame_id, tacq = s->t_acq_ns;
    memcpy(dst->data, (const uint8_t *)s + OCT_SLOT_HEADER_BYTES, bytes);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != want)
        return false;
    info->seq = n;
    info->frame_id = fid;
    info->t_acq_ns = tacq;
    info->skipped = 0;
    return true;
}

void octd_gpu_fill_cur(octd *d)
{
    octd_gpu *g = d->gpu;
    if (!g || !g->bound || !g->have_last || !d->ring)
        return;
    size_t bytes = oct_geometry_frame_bytes(&d->ring_geom);
    if (!d->cur.data || d->cur.cap < bytes)
        return;
    const oct_ring_header *h = oct_ring_consumer_header(d->ring);
    oct_frame_info info = g->last;
    /* The frame last taken; if the producer has reused its slot since, the
     * newest committed frame (a few tries: it may be being overwritten). */
    bool ok = copy_frame(h, g->last.seq, &d->cur, bytes, &info);
    for (int i = 0; !ok && i < 4; i++) {
        uint64_t w = __atomic_load_n(&h->write_seq, __ATOMIC_ACQUIRE);
        ok = w > 0 && copy_frame(h, w - 1, &d->cur, bytes, &info);
    }
    if (!ok) {
        octd_log(LOG_WARNING, "snapshot: the ring's frames were overwritten while copied");
        return;
    }
    info.commit_ns = oct_time_realtime_ns();
    d->cur.info = info;
    d->cur.geom = d->ring_geom;
    d->cur.valid = true;
}

void octd_gpu_free(octd *d)
{
    octd_gpu *g = d->gpu;
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
    d->gpu = NULL;
}
