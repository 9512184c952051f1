/* frames.c - see frames.h.
 *
 * Per frame (all on octd's main thread):
 *   take (peek a pointer into the ring, or copy the slot out) -> submit ->
 *   wait for input_done while completing/publishing older frames -> verify
 *   the slot (in place; torn: the result is discarded) -> ... -> complete in
 *   order -> publish, zero-copy from the pooled product buffer.
 * With a pipelining engine the input of frame n+1 overlaps the compute of n
 * and the download and publishing of n-1; with the synchronous CPU engine
 * submit computes the frame and complete hands it back at once.  Read in
 * place ([engine] overlap_input, default yes, issue 19), the loop does not
 * wait for a frame's input copy before it takes the next: the slot is
 * verified once the copy is done (verify_ready, as with several engines), so
 * the host's per-frame work is the submit and the publishing, not the submit
 * plus the copy plus a poll interval.  With overlap_input = no each copy is
 * waited for before the next frame is taken (the copies are serial on the
 * device anyway).
 *
 * The loop's profile (loop_prof.h, issue 19) is logged when the path unbinds
 * (drain, exit): "frame loop: ...".
 */
#include "frames.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octd.h"
#include "record.h"
#include "reorder.h"
#include "worker.h"
#include "register_live.h"
#include "loop_prof.h"

/* Zero-copy buffers: those in flight plus those ZeroMQ still holds (a stalled
 * subscriber keeps up to its high-water mark of them): as many as fit in
 * POOL_BYTES_* (pinned memory is scarcer), at least depth + 2, at most
 * POOL_MAX_LARGE; products of at most POOL_SMALL_BYTES (B-scans) up to
 * POOL_MAX within POOL_EAGER_BYTES.  Beyond that, frames go to copy-only buffers (at most
 * the depth: they are free again once their frame is published).  The copy
 * is the frame loop's: at 10,000 B-scans/s, 2 x 256 KB images copied per
 * frame took ~55 us of its ~100 us (H200, issue 19), so a subscriber that
 * lagged 32 frames (3 ms) made octd fall behind for good; 256 buffers
 * absorb a lag of 25 ms. */
#define POOL_MAX 256
#define POOL_MAX_LARGE 32
#define POOL_SMALL_BYTES (1ull << 20)
#define POOL_BYTES_PINNED (3072ull << 20)
#define POOL_BYTES_HOST (256ull << 20)
#define POOL_EAGER_BYTES (256ull << 20)
#define POOL_EXTRA 2                        /* made up front beyond the depth */
#define RETIRED_MAX (2 * POOL_MAX + OCT_ENGINE_DEPTH_MAX)
#define IDLE_WAIT_MS 100                    /* as main.c's ring timeout */
#define POLL_NS 20000                       /* 20 us: a frame takes >= 100 us on a GPU */
#define WORKER_POLL_NS 200000               /* 200 us: CPU engines' threads (several engines) */
#define COMPLETE_WAIT_MS 1000               /* a full pipeline: wait this long per try */
#define STAGE_MOVE_BYTES (4u << 20)         /* engines on several nodes: frames this large
                                             * are staged from the engine's node */

typedef struct path_frame {
    octd_slot *slot;
    oct_frame_info info;
    uint64_t ticket, params_gen;
    uint64_t seq; /* dispatch number: the publishing order */
    uint64_t t_take; /* CLOCK_REALTIME when taken (the loop's profile) */
    int lane;     /* the engine it was dealt to */
    bool want_f32, torn;
    bool unverified; /* in place, several engines: its slot is verified once its
                      * input copy is done (verify_ready), not before the next
                      * frame is taken, so the GPUs' copies overlap (issue 20) */
} path_frame;

/* Product buffers are sized by the engine for its geometry and depths: a
 * pool made for one engine serves any engine with the same key. */
typedef struct pool_key {
    oct_geometry geom;
    uint32_t depths[OCT_METHOD_COUNT];
    uint32_t products; /* pinned buffers hold only these (a volume frame's f32 and
                        * volume capacity would be ~200 MB of pinned memory each) */
} pool_key;

/* One engine ([engine] devices entry), its frames in flight and its product
 * pool (pinned for its device). */
typedef struct path_lane {
    oct_engine *eng;     /* bound engine; NULL when unbound */
    lane_worker *w;      /* a synchronous engine's thread (several engines), else NULL */
    int index;           /* position in [engine] devices */
    octd_placement place; /* its GPU's NUMA node: pool pages and threads (issue 20.1) */
    char placed[256];    /* placement last logged ("" none) */
    const void *reg_ptr; /* registered mapping, NULL when not registered */
    int depth;
    /* frames in flight, oldest first */
    path_frame q[OCT_ENGINE_DEPTH_MAX];
    int head, count;
    /* product buffers: zero-copy ones, then copy-only ones */
    octd_slot *slots[POOL_MAX + OCT_ENGINE_DEPTH_MAX];
    int nslots, ncopy, pool_max;
    int cursor; /* where pool_acquire looks first: after the buffer it took last */
    octd_pool_gauge gauge; /* how much of it is held ([publish] copies = auto) */
    uint64_t slot_bytes; /* host bytes of one products object (largest seen) */
    /* buffers of an earlier key that ZeroMQ still held: freed once released */
    octd_slot *retired[RETIRED_MAX];
    int nretired;
    pool_key key;
    bool have_key;
    /* [publish] shm_endpoint: the image area the pool's buffers are made in
     * (NULL: none), and how many of its slots have a buffer */
    octd_area *area;
    uint32_t area_used;
    bool warned_rekey, warned_copy;
    /* since bound: */
    bool dead;           /* taken out after a device error */
    uint64_t dead_gen;   /* d->engines_gen it was taken out in: out until re-planned */
    uint64_t done;       /* frames completed (fail_after counts these) */
    uint64_t published;  /* frames published from this engine */
} path_lane;

#define REORDER_WINDOW (OCT_ENGINES_MAX * OCT_ENGINE_DEPTH_MAX)

typedef struct octd_frames {
    path_lane lane[OCT_ENGINES_MAX];
    int nlanes;
    /* binding: valid while frames may be in flight */
    oct_ring_consumer *ring;
    bool bound, in_place;
    bool recording; /* frames are offered to the recording (record.c) */
    /* frames are dealt round-robin and published in dealing order */
    octd_reorder *order;
    uint64_t dealt;
    uint64_t held; /* frames finished before an earlier one (held for order) */
    int rr;
    /* the frame last taken (in place: for snapshots) */
    oct_frame_info last;
    bool have_last;
    bool warned_reg;
    bool no_publish; /* at exit: the publisher is gone */
    octd_follow follow; /* the frame thread on its engines' NUMA node (issue 20.1) */
    bool overlap;       /* in place, one pipelining engine: [engine] overlap_input */
    loop_prof prof;
} octd_frames;

static uint64_t prof_now(void) { return oct_time_monotonic_ns(); }

/* Adds the time since t0 to phase ph of the loop's profile; returns now. */
static uint64_t prof_add(octd_frames *g, int ph, uint64_t t0)
{
    return loop_prof_add(&g->prof, ph, t0);
}

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

static int engines_of(const octd *d, oct_engine *const **out);

/* Gives every engine the operator's values with engine_products(); main.c
 * sets the operator's own on a control change. */
static void sync_engine_products(octd *d)
{
    oct_engine *const *engs;
    int n = engines_of(d, &engs);
    uint32_t want = engine_products(d);
    for (int i = 0; i < n; i++) {
        const oct_params *cur = engs[i] ? oct_engine_params(engs[i]) : NULL;
        if (!cur || (cur->products & OCT_PRODUCTS_KNOWN) == want)
            continue;
        oct_params p = d->params;
        p.products = want | (d->params.products & ~OCT_PRODUCTS_KNOWN);
        oct_error e;
        if (oct_engine_set_params(engs[i], &p, &e) != OCT_OK)
            log_once(d, "registration's volume product", &e);
    }
}

/* ---- the product pool (one per engine) ---- */
static void pool_key_of(const octd *d, const path_lane *g, pool_key *k)
{
    memset(k, 0, sizeof *k);
    k->geom = d->eng_geom;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        k->depths[m] = oct_engine_depths(g->eng, m);
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

static void prefault_products(oct_products *p)
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &p->img[m][k];
            if (img->u8)
                octd_prefault(img->u8, img->cap_pixels);
            if (img->f32)
                octd_prefault(img->f32, img->cap_pixels * sizeof(float));
        }
}

/* The frame loop's holders of an area: the last one unmaps it, and removes
 * its name if no newer area took the name since. */
static void area_drop(octd_area *a)
{
    if (a && --a->refs == 0) {
        oct_images_close(a->img, a->current);
        free(a);
    }
}

static void slot_free(octd_slot *s)
{
    oct_products_destroy(s->prod); /* unregisters area memory before it is unmapped */
    area_drop(s->area);
    free(s);
}

static bool slot_idle(octd_slot *s) { return atomic_load(&s->refs) == 0; }

/* Frees the retired buffers ZeroMQ has released. */
static void pool_reap(path_lane *g)
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
static bool pool_clear(path_lane *g)
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

/* Zero-copy buffers for products of `bytes` each (pinned: device memory's
 * budget), also the image area's size. */
static int pool_max_for(const path_lane *g, uint64_t bytes, bool pinned)
{
    uint64_t n = (pinned ? POOL_BYTES_PINNED : POOL_BYTES_HOST) / bytes;
    if (n > POOL_MAX_LARGE)
        n = POOL_MAX_LARGE;
    /* small products: more, all made up front (pool_sync) */
    uint64_t small = bytes <= POOL_SMALL_BYTES ? POOL_EAGER_BYTES / bytes : 0;
    if (small > n)
        n = small;
    int lo = g->depth + POOL_EXTRA;
    return n < (uint64_t)lo ? lo : n > POOL_MAX ? POOL_MAX : (int)n;
}

static void set_pool_max(path_lane *g, const octd_slot *s)
{
    uint64_t bytes = prod_bytes(s->prod);
    if (bytes <= g->slot_bytes)
        return;
    g->slot_bytes = bytes;
    g->pool_max = pool_max_for(g, bytes, s->prod->pinned);
    if (g->area) { /* every buffer in the area: its slots less the copy-only ones */
        int zc = (int)oct_images_header_of(g->area->img)->slot_count - g->depth;
        g->pool_max = zc < g->pool_max ? zc : g->pool_max;
    }
    atomic_store_explicit(&g->gauge.cap, g->pool_max, memory_order_relaxed);
}

/* [publish] shm_endpoint: a new image area for the pool of the current key
 * (the pool is empty): its zero-copy buffers and the depth of copy-only
 * ones, each in a slot, so that every frame's images lie in shared memory.
 * The area a lane had before keeps only the buffers ZeroMQ still holds. */
static void lane_area_make(path_lane *g, octd *d)
{
    if (g->area) {
        g->area->current = false; /* the name is about to be another object's */
        area_drop(g->area);
        g->area = NULL;
    }
    g->area_used = 0;
    if (!d->cfg.pub_shm_endpoint[0])
        return;
    size_t bytes = oct_engine_products_bytes(g->eng, g->key.products);
    if (bytes == 0)
        return;
    bool pinned = strcmp(oct_engine_backend_name(g->eng), "cuda") == 0;
    uint32_t n = (uint32_t)(pool_max_for(g, bytes, pinned) + g->depth);
    char name[sizeof d->cfg.pub_shm_name + 16];
    if (g->index)
        snprintf(name, sizeof name, "%s.%d", d->cfg.pub_shm_name, g->index);
    else
        snprintf(name, sizeof name, "%s", d->cfg.pub_shm_name);
    oct_error e;
    oct_images *img;
    octd_area *a = calloc(1, sizeof *a);
    if (!a || oct_images_create(&img, name, n, bytes, 0, &e) != OCT_OK) {
        if (!a)
            oct_error_set(&e, OCT_ENOMEM, "out of memory");
        snprintf(d->shm_warning, sizeof d->shm_warning, "[publish] shm_endpoint: no image "
                 "area: %.170s (its subscribers get no images)", e.msg);
        octd_log(LOG_WARNING, "%s", d->shm_warning);
        free(a);
        return;
    }
    a->img = img;
    a->refs = 1;
    a->current = true;
    g->area = a;
    d->shm_warning[0] = '\0';
    octd_log(LOG_INFO, "image area %s: %u slots of %zu bytes (%.1f MB) for engine %d's "
             "products", name, n, bytes, (double)n * (double)oct_images_header_of(img)->slot_stride / 1e6,
             g->index);
}

/* The products of a new buffer: in the next slot of the lane's area, else
 * (no area, or every slot taken) the engine's own memory. */
static oct_products *products_make(path_lane *g, octd_slot *s, oct_error *e)
{
    const oct_images_header *h = g->area ? oct_images_header_of(g->area->img) : NULL;
    if (h && g->area_used < h->slot_count) {
        oct_products *p = oct_engine_products_create_in(
            g->eng, g->key.products, oct_images_slot(g->area->img, g->area_used),
            (size_t)h->slot_stride, e);
        if (p) {
            s->area = g->area;
            s->area_slot = g->area_used++;
            g->area->refs++;
        }
        return p;
    }
    return oct_engine_products_create_for(g->eng, g->key.products, e);
}

/* A new buffer (refs 0), zero-copy or copy-only; NULL at the limit. */
static octd_slot *pool_grow(path_lane *g, octd *d, bool copy_only)
{
    int zc = g->nslots - g->ncopy;
    if (copy_only ? g->ncopy >= g->depth : zc >= (g->pool_max ? g->pool_max : POOL_MAX))
        return NULL;
    oct_error e;
    octd_slot *s = calloc(1, sizeof *s);
    if (s && g->w)
        pthread_mutex_lock(&g->w->eng_mu);
    /* made (pinned pages are faulted in then) and touched on the engine's
     * NUMA node, not in the frame loop */
    cpu_set_t saved;
    CPU_ZERO(&saved);
    bool placed = s && octd_placement_enter(&g->place, &saved);
    if (s)
        s->prod = products_make(g, s, &e);
    if (s && s->prod && d->cfg.prefault)
        prefault_products(s->prod);
    octd_placement_leave(placed, &saved);
    if (s && g->w)
        pthread_mutex_unlock(&g->w->eng_mu);
    if (!s || !s->prod) {
        if (s)
            log_once(d, "product buffers", &e);
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 0);
    s->copy_only = copy_only;
    s->gauge = copy_only ? NULL : &g->gauge;
    g->slots[g->nslots++] = s;
    g->ncopy += copy_only;
    set_pool_max(g, s);
    return s;
}

/* s is taken for a frame: counted as held; its area slot is being
 * rewritten from now on (the engine writes into it after this). */
static octd_slot *slot_taken(path_lane *g, octd_slot *s)
{
    if (!s->copy_only)
        atomic_fetch_add_explicit(&g->gauge.held, 1, memory_order_relaxed);
    if (s->area)
        oct_images_begin(s->area->img, s->area_slot);
    return s;
}

/* A buffer nobody holds (refs = 1 on return), never waiting: an idle
 * zero-copy buffer, a new one, else (stalled subscribers keep every zero-copy
 * buffer queued) an idle or new copy-only buffer, whose images ZeroMQ copies.
 * NULL only when the copy-only ones are all in flight (depth > 1 and no
 * memory for more): the caller completes a frame first. */
static octd_slot *pool_acquire(path_lane *g, octd *d)
{
    for (int pass = 0; pass < 2; pass++) {
        bool copy_only = pass == 1;
        /* round-robin from the cursor: the buffer there is the one taken
         * longest ago, so usually free (no scan of the buffers still held) */
        for (int k = 0; k < g->nslots; k++) {
            int i = (g->cursor + k) % g->nslots;
            int zero = 0;
            if (g->slots[i]->copy_only == copy_only &&
                atomic_load_explicit(&g->slots[i]->refs, memory_order_relaxed) == 0 &&
                atomic_compare_exchange_strong(&g->slots[i]->refs, &zero, 1)) {
                g->cursor = (i + 1) % g->nslots;
                return slot_taken(g, g->slots[i]);
            }
        }
        octd_slot *s = pool_grow(g, d, copy_only);
        if (s) {
            atomic_store(&s->refs, 1);
            return slot_taken(g, s);
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
static void pool_sync(path_lane *g, octd *d)
{
    pool_key k;
    pool_key_of(d, g, &k);
    int depth = g->w ? ASYNC_DEPTH : oct_engine_depth(g->eng);
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
        lane_area_make(g, d);
    } else if (!g->area && d->cfg.pub_shm_endpoint[0] && g->nslots == 0) {
        lane_area_make(g, d); /* an earlier try failed: again while the pool is empty */
    }
    pool_reap(g);
    /* Up front, so the first frames do not wait for (pinned) allocations. */
    while (g->nslots - g->ncopy < g->depth + POOL_EXTRA && pool_grow(g, d, false))
        ;
    /* Pinned products of a few MB (B-scans; volumes without the volume
     * product): the whole pool now, so that no pinned allocation (slow, and
     * it may synchronise the device) happens in the frame loop. */
    if (g->nslots > 0 && (g->area || (g->slots[0]->prod->pinned &&
                                      (uint64_t)g->pool_max * g->slot_bytes <= POOL_EAGER_BYTES)))
        while (pool_grow(g, d, false))
            ;
    /* Small products' copy-only buffers (depth of them) too: they are first
     * taken when subscribers hold every pooled buffer (issue 21, churning
     * crowds), and a pinned allocation then (milliseconds; it may
     * synchronise the device) or a fresh buffer's page faults would cost
     * the frame loop frames just when it is busiest. */
    if (g->nslots > 0 && (g->slot_bytes <= POOL_SMALL_BYTES || g->area))
        while (g->ncopy < g->depth && pool_grow(g, d, true))
            ;
}

/* ---- engines ---- */
/* The engines main.c planned: d->engs[0..neng-1] ([engine] devices), or the
 * single d->eng. */
static int engines_of(const octd *d, oct_engine *const **out)
{
    if (d->neng > 0) {
        *out = d->engs;
        return d->neng;
    }
    *out = &d->eng;
    return d->eng ? 1 : 0;
}

static int live_lanes(const octd_frames *g)
{
    int n = 0;
    for (int i = 0; i < g->nlanes; i++)
        n += !g->lane[i].dead;
    return n;
}

/* An error that says the engine (device) is broken, not this frame's data. */
static bool device_error(oct_err rc) { return rc != OCT_EINVAL && rc != OCT_ESIZE; }

static void publish_in_order(octd_frames *g, octd *d);

/* Takes engine L out after a device error (never the last live one): its
 * frames in flight are lost (never published, counted), the others go on.
 * The reason goes to the log and to the status block's warnings. */
static void lane_fail(octd_frames *g, octd *d, path_lane *L, const char *why)
{
    int lost = L->count;
    for (int i = 0; i < L->count; i++) {
        path_frame *f = &L->q[(L->head + i) % OCT_ENGINE_DEPTH_MAX];
        octd_slot_release(f->slot);
        octd_reorder_put(g->order, f->seq, NULL, NULL);
    }
    L->count = 0;
    L->dead = true;
    L->dead_gen = d->engines_gen;
    d->skipped += (uint64_t)lost;
    d->engine_lost += (uint64_t)lost;
    snprintf(d->engine_warning, sizeof d->engine_warning,
             "engine %d (%s %s) taken out: %s; %d engine(s) go on", L->index,
             oct_engine_backend_name(L->eng), oct_engine_device_name(L->eng), why,
             live_lanes(g));
    octd_log(LOG_ERR, "%s (%d more frame(s) in flight lost, %" PRIu64 " published by it)",
             d->engine_warning, lost, L->published);
    publish_in_order(g, d);
}

/* ---- binding to the engines and a ring ---- */
static void unbind_path(octd_frames *g, octd *d)
{
    if (g->bound)
        loop_prof_log(&g->prof);
    if (g->bound && g->nlanes > 1) /* per-engine counts (issue 20) */
        octd_log(LOG_INFO, "reorder stage: %" PRIu64 " frame(s) finished before an earlier one "
                           "and waited for it", g->held);
    if (g->bound && g->nlanes > 1)
        for (int i = 0; i < g->nlanes; i++)
            octd_log(LOG_INFO, "engine %d (%s %s): %" PRIu64 " frames published%s", i,
                     oct_engine_backend_name(g->lane[i].eng),
                     oct_engine_device_name(g->lane[i].eng), g->lane[i].published,
                     g->lane[i].dead ? ", taken out" : "");
    (void)d;
    for (int i = 0; i < g->nlanes; i++) {
        path_lane *L = &g->lane[i];
        if (L->reg_ptr)
            oct_engine_unregister_host(L->eng, L->reg_ptr);
        worker_stop(L->w); /* drained: idle */
        L->w = NULL;
        L->reg_ptr = NULL;
        L->eng = NULL;
    }
    g->ring = NULL;
    g->bound = false; /* the frame thread stays placed until the engines change */
}

/* Where engine L's pool and threads belong ([engine] numa = auto; sys.h). */
static void lane_place(octd *d, path_lane *L)
{
    octd_engine_placement(d->cfg.numa, L->eng, L->index, &L->place, L->placed,
                          sizeof L->placed);
}

/* Engines on several nodes: a large frame that engine L stages through the
 * CPU (its input not registered for DMA) is copied on L's node. */
static bool stage_enter(const octd_frames *g, const path_lane *L, size_t bytes, cpu_set_t *saved)
{
    return !L->w && !L->reg_ptr && bytes >= STAGE_MOVE_BYTES &&
           octd_follow_stage_enter(&g->follow, &L->place, saved);
}

static void stage_leave(bool moved, const cpu_set_t *saved)
{
    octd_follow_stage_leave(moved, saved);
}

/* octd's one frame thread drives every GPU engine (their submits, input
 * staging and completes): it follows them to their node (sys.h). */
static void place_frame_thread(octd_frames *g)
{
    const octd_placement *p[OCT_ENGINES_MAX];
    for (int i = 0; i < g->nlanes; i++)
        p[i] = &g->lane[i].place;
    octd_follow_engines(&g->follow, p, g->nlanes);
}

static bool want_in_place(const octd *d)
{
    switch (d->cfg.zero_copy) {
    case OCT_ZERO_COPY_ON: return true;
    case OCT_ZERO_COPY_OFF: return false;
    default: return oct_engine_depth(d->eng) > 1;
    }
}

static bool bound_to(const octd_frames *g, const octd *d)
{
    oct_engine *const *engs;
    int n = engines_of(d, &engs);
    if (!g->bound || g->ring != d->ring || g->nlanes != n)
        return false;
    for (int i = 0; i < n; i++)
        if (g->lane[i].eng != engs[i])
            return false;
    return true;
}

static bool bind_path(octd_frames *g, octd *d)
{
    if (bound_to(g, d))
        return true;
    if (!g->order && octd_reorder_create(&g->order, REORDER_WINDOW, sizeof(path_frame), NULL))
        return false;
    if (g->bound) {
        /* main.c replaced an engine or the ring without draining first: the
         * old engine is gone, so its frames and registration are too. */
        for (int i = 0; i < g->nlanes; i++) {
            path_lane *L = &g->lane[i];
            if (L->count)
                octd_log(LOG_ERR, "frame path: engine or ring replaced with %d frame(s) in "
                                  "flight", L->count);
            for (int j = 0; j < L->count; j++) {
                path_frame *f = &L->q[(L->head + j) % OCT_ENGINE_DEPTH_MAX];
                octd_slot_release(f->slot);
                octd_reorder_put(g->order, f->seq, NULL, NULL);
            }
            L->count = 0;
            L->reg_ptr = NULL;
            worker_stop(L->w);
            L->w = NULL;
        }
        g->bound = false;
    }
    /* products of the old binding still waiting (every frame dealt is in
     * flight or put, and those in flight were put as lost above) */
    uint64_t seq;
    bool lost;
    path_frame f;
    while (octd_reorder_pop(g->order, &seq, &f, &lost))
        if (!lost)
            octd_slot_release(f.slot);
    oct_engine *const *engs;
    g->nlanes = engines_of(d, &engs);
    for (int i = 0; i < g->nlanes; i++) { /* where each engine's pool and threads go */
        g->lane[i].eng = engs[i];
        g->lane[i].index = i;
        lane_place(d, &g->lane[i]);
    }
    place_frame_thread(g);
    g->ring = d->ring;
    g->have_last = false;
    g->in_place = want_in_place(d);
    memset(&g->prof, 0, sizeof g->prof);
    g->rr = 0;
    octd_reorder_reset(g->order, g->dealt);
    g->held = 0;
    const oct_ring_header *h = oct_ring_consumer_header(d->ring);
    for (int i = 0; i < g->nlanes; i++) {
        path_lane *L = &g->lane[i];
        uint64_t t0 = oct_time_monotonic_ns();
        L->head = L->count = 0;
        L->dead = L->dead && L->dead_gen == d->engines_gen; /* out until re-planned */
        L->done = L->published = 0;
        /* several engines: a synchronous one computes in a thread of its own */
        if (g->nlanes > 1 && oct_engine_depth(L->eng) == 1 && !(L->w = worker_start(L->eng)))
            octd_log(LOG_WARNING, "engine %d: no thread of its own; it computes in turn", i);
        if (L->w) {
            oct_error e;
            L->w->place = &L->place;
            L->w->prefault = d->cfg.prefault;
            if (octd_placement_apply(L->w->th, &L->place, &e) != OCT_OK)
                octd_log(LOG_WARNING, "engine %d: its thread is not placed: %s", i, e.msg);
        }
        pool_sync(L, d);
        if (g->in_place) {
            /* Register the whole read-only mapping with each engine: every
             * slot is then DMA-able by every device. */
            size_t bytes = (size_t)(h->slot0_offset + (uint64_t)h->slot_count * h->slot_stride);
            oct_error e;
            if (oct_engine_register_host(L->eng, h, bytes, &e) == OCT_OK) {
                L->reg_ptr = h;
            } else if (!g->warned_reg) {
                /* The engine stages such frames through its own pinned buffers. */
                octd_log(LOG_WARNING, "ring %s: no direct DMA (%s); frames are staged by the "
                                      "engine", d->cfg.ring_frames, e.msg);
                g->warned_reg = true;
            }
        }
        bool pinned = L->nslots > 0 && L->slots[0]->prod->pinned;
        char who[96] = "";
        if (g->nlanes > 1)
            snprintf(who, sizeof who, "engine %d of %d, NUMA node %d%s, ", i, g->nlanes,
                     oct_engine_numa_node(L->eng), L->w ? ", own thread" : "");
        octd_log(LOG_INFO, "frame path: %s%s, depth %d, %d %s product buffers (up to %d), "
                           "ring %s %s, %.0f ms",
                 who, oct_engine_backend_name(L->eng), L->depth, L->nslots,
                 pinned ? "pinned" : "host", L->pool_max, d->cfg.ring_frames,
                 !g->in_place ? "copied per frame"
                 : !L->reg_ptr ? "read in place, staged by the engine"
                 : pinned      ? "read in place, registered for DMA"
                               : "read in place",
                 (double)(oct_time_monotonic_ns() - t0) / 1e6);
    }
    /* one pipelining GPU engine (several overlap anyway) */
    g->overlap = g->in_place && d->cfg.overlap_input && g->nlanes == 1 && !g->lane[0].w &&
                 g->lane[0].depth > 1;
    g->bound = true;
    return true;
}

/* A quarter of the ring committed behind a frame: octd is catching up with
 * its producer (the recording leaves such frames out, and the frame loop
 * drops images rather than copying them). */
static bool catching_up(const octd *d, uint64_t behind)
{
    return behind >= oct_ring_consumer_header(d->ring)->slot_count / 4;
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
        .t_take_ns = review ? 0 : slot->t_take_ns,
        .t_sub_ns = review ? 0 : slot->t_sub_ns,
        .t_done_ns = review ? 0 : slot->t_done_ns,
        .params_gen = params_gen,
        .skipped = review ? 0 : info->skipped,
        .torn = review ? 0 : d->torn_since,
        .review = review,
        .want_f32 = want_f32,
    };
    /* octd catching up: a copy-only buffer's images are dropped rather
     * than copied here (issue 21: a publisher thread saturated by a crowd
     * cost the frame loop frames, H200 r5) */
    m.behind = !review && d->ring && catching_up(d, oct_ring_consumer_behind(d->ring, info->seq));
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
        octd_reglive_frame(d, slot, &m); /* after the frame's own images: their latency */
    d->torn_since = 0;
    d->last_frame_id = info->frame_id;
    uint64_t t0 = info->t_acq_ns ? info->t_acq_ns : info->commit_ns;
    if (!review && t0 && last_sent > t0)
        d->last_latency = last_sent - t0;
}

/* The reorder stage: publishes the finished frames that are next in dealing
 * order (a frame another engine still works on holds the later ones). */
static void publish_in_order(octd_frames *g, octd *d)
{
    path_frame f;
    uint64_t seq;
    bool lost;
    while (octd_reorder_pop(g->order, &seq, &f, &lost)) {
        if (lost)
            continue;
        if (!f.torn && !g->no_publish) {
            if (g->recording) /* its raw spectra went in when it was taken */
                octd_record_frame(d, &f.info, f.slot->prod);
            uint64_t t0 = prof_now();
            publish(d, f.slot, &f.info, f.params_gen, f.want_f32, false);
            prof_add(g, PH_PUBLISH, t0);
            loop_prof_latency(g->prof.in_octd, f.t_take, oct_time_realtime_ns());
            g->lane[f.lane].published++;
        }
        octd_slot_release(f.slot);
    }
}

/* Verifies frame f's ring slot once the engine has read it (within
 * timeout_ms; -1 waits): torn if the producer overwrote it meanwhile.
 * false while the copy is still running. */
static bool verify_frame(octd *d, path_lane *L, path_frame *f, int timeout_ms)
{
    oct_error se;
    octd_frames *g = d->frames;
    uint64_t t0 = prof_now();
    oct_err rc = oct_engine_input_done(L->eng, f->ticket, timeout_ms, &se);
    t0 = prof_add(g, timeout_ms == 0 ? PH_INPUT : PH_WAIT, t0);
    if (rc == OCT_ETIMEDOUT)
        return false;
    f->unverified = false;
    if (rc != OCT_OK) {
        /* the copy failed: its completion reports the error */
        log_once(d, "input copy", &se);
        f->torn = true;
        oct_ring_consumer_verify(d->ring, &f->info);
    } else if (oct_ring_consumer_verify(d->ring, &f->info) != OCT_OK) {
        f->torn = true; /* overwritten while the engine read it: never published */
        d->torn++;
        d->torn_since++;
    }
    prof_add(g, PH_RING, t0);
    return true;
}

/* Verifies every frame whose input copy is done (each engine copies in
 * order: its first unfinished copy ends the scan of that engine). */
static void verify_ready(octd_frames *g, octd *d)
{
    for (int i = 0; i < g->nlanes; i++) {
        path_lane *L = &g->lane[i];
        for (int k = 0; k < L->count; k++) {
            path_frame *f = &L->q[(L->head + k) % OCT_ENGINE_DEPTH_MAX];
            if (f->unverified && !verify_frame(d, L, f, 0))
                break;
        }
    }
}

/* Completes engine L's oldest frame if done within timeout_ms and hands it
 * to the reorder stage; true if one was dequeued (published or held for
 * order, or discarded when torn or failed). */
static bool complete_one(octd_frames *g, octd *d, path_lane *L, int timeout_ms)
{
    if (L->count == 0)
        return false;
    oct_products *done = NULL;
    oct_error e;
    uint64_t t0 = prof_now();
    oct_err rc = L->w ? worker_complete(L->w, &done, timeout_ms, &e)
                      : oct_engine_complete(L->eng, &done, timeout_ms, &e);
    prof_add(g, timeout_ms == 0 ? PH_COMPLETE : PH_WAIT, t0);
    if (rc == OCT_ETIMEDOUT)
        return false;
    path_frame *f = &L->q[L->head];
    if (f->unverified && !L->dead)
        verify_frame(d, L, f, -1); /* finished: its copy is done */
    if (rc == OCT_ESTATE && !done) {
        /* the engine has nothing in flight: our queue is out of step */
        octd_log(LOG_ERR, "frame path: %d frame(s) lost by the engine", L->count);
        if (live_lanes(g) > 1) {
            lane_fail(g, d, L, "frames lost by the engine");
            return true;
        }
        for (int i = 0; i < L->count; i++) {
            path_frame *x = &L->q[(L->head + i) % OCT_ENGINE_DEPTH_MAX];
            octd_slot_release(x->slot);
            octd_reorder_put(g->order, x->seq, NULL, NULL);
        }
        d->skipped += (uint64_t)L->count;
        L->count = 0;
        publish_in_order(g, d);
        return true;
    }
    L->head = (L->head + 1) % OCT_ENGINE_DEPTH_MAX;
    L->count--;
    L->done++;
    if (done != f->slot->prod)
        octd_log(LOG_ERR, "frame path: frames completed out of order");
    /* [engine] fail_after (a test knob): this engine's device "fails" */
    int fail_k = d->cfg.fail_engine >= 0 ? d->cfg.fail_engine : g->nlanes - 1;
    if (rc == OCT_OK && d->cfg.fail_after > 0 && L->index == fail_k &&
        L->done > (uint64_t)d->cfg.fail_after)
        rc = oct_error_set(&e, OCT_EDEVICE, "injected failure after %d frames ([engine] "
                           "fail_after, a test knob)", d->cfg.fail_after);
    if (rc != OCT_OK) {
        octd_slot_release(f->slot);
        octd_reorder_put(g->order, f->seq, NULL, NULL);
        if (device_error(rc) && live_lanes(g) > 1) {
            d->engine_lost++;
            d->skipped++;
            lane_fail(g, d, L, e.msg);
            return true;
        }
        char what[64];
        snprintf(what, sizeof what, "frame %" PRIu64, f->info.frame_id);
        log_once(d, what, &e);
        d->skipped++;
    } else {
        f->slot->t_done_ns = oct_time_realtime_ns();
        if (!f->torn)
            d->proc_err[0] = '\0';
        set_pool_max(L, f->slot); /* host buffers grow on first use */
        g->held += f->seq != octd_reorder_next(g->order);
        octd_reorder_put(g->order, f->seq, f, NULL);
    }
    publish_in_order(g, d);
    return true;
}

/* The live engine holding the oldest frame in flight (the one that holds
 * up publishing), NULL when none is in flight. */
static path_lane *oldest_lane(octd_frames *g)
{
    path_lane *best = NULL;
    for (int i = 0; i < g->nlanes; i++) {
        path_lane *L = &g->lane[i];
        if (L->count > 0 && (!best || L->q[L->head].seq < best->q[best->head].seq))
            best = L;
    }
    return best;
}

/* How long to sleep between polls: a GPU frame takes >= 100 us; frames only
 * on CPU workers take milliseconds, and polling faster would take the cores
 * they compute on. */
static long poll_ns(const octd_frames *g)
{
    for (int i = 0; i < g->nlanes; i++)
        if (g->lane[i].count > 0 && !g->lane[i].w)
            return POLL_NS;
    return WORKER_POLL_NS;
}

/* One poll interval, counted as the loop's idle time. */
static void poll_sleep(octd_frames *g)
{
    uint64_t t0 = prof_now();
    sleep_ns(poll_ns(g));
    prof_add(g, PH_SLEEP, t0);
}

static bool complete_oldest(octd_frames *g, octd *d, int timeout_ms)
{
    path_lane *L = oldest_lane(g);
    return L && complete_one(g, d, L, timeout_ms);
}

/* Completes whatever is done now on any engine, except `keep`'s newest frame
 * (submitted, not yet verified); true if anything was. */
static bool complete_ready(octd_frames *g, octd *d, const path_lane *keep)
{
    bool any = false;
    verify_ready(g, d);
    for (int i = 0; i < g->nlanes; i++) {
        path_lane *L = &g->lane[i];
        if (L->count > (L == keep ? 1 : 0))
            any |= complete_one(g, d, L, 0);
    }
    return any;
}

static void drain_all(octd_frames *g, octd *d)
{
    while (complete_oldest(g, d, -1))
        ;
}

void octd_frames_drain(octd *d)
{
    octd_reglive_drain(d); /* it holds product buffers */
    octd_frames *g = d->frames;
    if (!g || !g->bound)
        return;
    drain_all(g, d);
    /* the frames just finished may have queued registrations that read their
     * product buffers: done before the buffers go */
    octd_reglive_drain(d);
    unbind_path(g, d);
}

/* ---- taking a frame ---- */
/* Takes one frame per policy: waits up to IDLE_WAIT_MS, completing older
 * frames meanwhile (polling both: the ring and the device have no fd).
 * In place: *ptr points into the mapping; copied: into d->scratch. */
static oct_err take_frame(octd_frames *g, octd *d, const void **ptr, oct_frame_info *info,
                          oct_error *e)
{
    uint64_t deadline = oct_time_monotonic_ns() + IDLE_WAIT_MS * 1000000ull;
    oct_ring_policy pol = (oct_ring_policy)d->cfg.policy;
    size_t bytes = oct_geometry_frame_bytes(&d->ring_geom);
    const uint8_t *before = d->scratch.data;
    if (!g->in_place && !octd_frame_buf_fit(&d->scratch, bytes))
        return oct_error_set(e, OCT_ENOMEM, "ring %s: no memory for frames of %zu bytes",
                             d->cfg.ring_frames, bytes);
    if (!g->in_place && d->scratch.data != before && d->cfg.prefault)
        octd_prefault(d->scratch.data, d->scratch.cap); /* not page by page in the copy */
    for (;;) {
        /* nothing else to do: let the ring library sleep (it polls every
         * [ring] poll_us while frames stream) */
        int wait = oldest_lane(g) ? 0 : IDLE_WAIT_MS;
        uint64_t t0 = prof_now();
        oct_err rc = g->in_place
                         ? oct_ring_consumer_peek(d->ring, pol, wait, ptr, info, e)
                         : oct_ring_consumer_next(d->ring, pol, d->scratch.data, bytes, wait,
                                                  info, e);
        /* with a wait the ring library sleeps: idle time */
        prof_add(g, wait ? PH_SLEEP : PH_RING, t0);
        if (rc != OCT_ETIMEDOUT || wait)
            return rc;
        if (complete_ready(g, d, NULL))
            continue;
        if (oct_time_monotonic_ns() >= deadline)
            return rc;
        poll_sleep(g);
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

/* The next live engine in turn with room for a frame, NULL when none has:
 * each keeps its own depth in flight, and no more frames are out than the
 * live engines' depths together (what the reorder stage holds). */
static path_lane *pick_lane(octd_frames *g)
{
    int budget = 0;
    for (int i = 0; i < g->nlanes; i++)
        budget += g->lane[i].dead ? 0 : g->lane[i].depth;
    if (g->dealt - octd_reorder_next(g->order) >= (uint64_t)budget)
        return NULL;
    for (int k = 0; k < g->nlanes; k++) {
        int i = (g->rr + k) % g->nlanes;
        path_lane *L = &g->lane[i];
        if (!L->dead && L->count < L->depth) {
            g->rr = (i + 1) % g->nlanes;
            return L;
        }
    }
    return NULL;
}

static oct_err step(octd *d, oct_error *e);

oct_err octd_frames_step(octd *d, oct_error *e)
{
    uint64_t t0 = prof_now();
    octd_frames *g = d->frames;
    if (g && g->bound && g->prof.t_step_end)
        prof_add(g, PH_MAIN, g->prof.t_step_end);
    oct_err rc = step(d, e);
    if ((g = d->frames) && g->bound) {
        uint64_t t = prof_now();
        if (!g->prof.t_first)
            g->prof.t_first = t0;
        g->prof.steps_ns += t - t0;
        g->prof.t_step_end = t;
    }
    return rc;
}

static oct_err step(octd *d, oct_error *e)
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
    if (!bind_path(g, d)) {
        octd_log(LOG_ERR, "frame path: out of memory");
        return skip_frame(d, e);
    }
    /* a recording starts or ends: nothing else changes (frames in flight
     * when it starts were not taken into it and are not recorded) */
    g->recording = d->rec != NULL;
    /* The operator changed the products: buffers of the new size (the
     * frames in flight keep theirs). */
    sync_engine_products(d);
    for (int i = 0; i < g->nlanes; i++) {
        path_lane *L = &g->lane[i];
        if (!L->dead && engine_products(d) != L->key.products) {
            pool_sync(L, d); /* may keep the old buffers (it warns once), then tries again */
            if (engine_products(d) == L->key.products && i == 0)
                octd_log(LOG_INFO, "products changed: new product buffers");
        }
    }
    /* room for one more frame */
    path_lane *L = NULL;
    verify_ready(g, d);
    if (g->in_place && (live_lanes(g) > 1 || g->overlap)) {
        /* poll: blocking on one engine (or on the oldest frame) would leave
         * finished copies unverified while the producer may lap their slots */
        uint64_t deadline = oct_time_monotonic_ns() + COMPLETE_WAIT_MS * 1000000ull;
        while (!(L = pick_lane(g))) {
            if (complete_ready(g, d, NULL))
                continue;
            if (oct_time_monotonic_ns() >= deadline)
                return OCT_ETIMEDOUT; /* the device is slow: main loop, then again */
            poll_sleep(g);
        }
    }
    while (!L && !(L = pick_lane(g)))
        if (!complete_oldest(g, d, COMPLETE_WAIT_MS))
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
        unbind_path(g, d);
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
    /* completing older frames meanwhile may have taken L out */
    if (L->dead && !(L = pick_lane(g))) {
        d->skipped++;
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info); /* ends the peek */
        return OCT_OK;
    }

    path_frame *f = &L->q[(L->head + L->count) % OCT_ENGINE_DEPTH_MAX];
    memset(f, 0, sizeof *f);
    f->info = info;
    f->t_take = oct_time_realtime_ns();
    loop_prof_latency(g->prof.ring_wait, info.t_acq_ns ? info.t_acq_ns : info.commit_ns, f->t_take);
    uint64_t behind = oct_ring_consumer_behind(d->ring, info.seq);
    if (behind > g->prof.backlog_max)
        g->prof.backlog_max = behind;
    while (!(f->slot = pool_acquire(L, d)) && complete_oldest(g, d, COMPLETE_WAIT_MS))
        ;
    if (!f->slot || L->dead) {
        /* no memory for a buffer: drop */
        if (f->slot)
            octd_slot_release(f->slot);
        d->drops++;
        d->skipped++;
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info); /* ends the peek */
        return OCT_OK;
    }
    g->prof.copied += f->slot->copy_only;
    f->slot->t_take_ns = f->t_take;
    f->slot->t_sub_ns = f->slot->t_done_ns = 0;
    f->params_gen = d->applied_gen;
    f->want_f32 = (d->params.products & OCT_PRODUCT_F32) != 0;
    oct_error se;
    size_t bytes = oct_geometry_frame_bytes(&d->ring_geom);
    cpu_set_t saved;
    bool moved = stage_enter(g, L, bytes, &saved);
    uint64_t t_sub = prof_now();
    rc = L->w ? worker_submit(L->w, ptr, bytes, f->slot->prod, &se)
              : oct_engine_submit(L->eng, ptr, bytes, f->slot->prod, &se);
    prof_add(g, PH_SUBMIT, t_sub);
    stage_leave(moved, &saved);
    if (rc != OCT_OK) {
        octd_slot_release(f->slot);
        d->skipped++;
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info);
        if (device_error(rc) && live_lanes(g) > 1) {
            lane_fail(g, d, L, se.msg);
            return OCT_OK;
        }
        char what[64];
        snprintf(what, sizeof what, "frame %" PRIu64, info.frame_id);
        log_once(d, what, &se);
        return OCT_OK;
    }
    f->slot->t_sub_ns = oct_time_realtime_ns();
    f->seq = g->dealt++;
    f->lane = L->index;
    f->ticket = f->slot->prod->ticket;
    L->count++;
    g->prof.frames++;
    if (g->recording) {
        /* copied while the engine reads it: from the ring slot in place (a
         * tear shows at its verification: never published, so never
         * written) or from d->cur.  With a quarter of the ring committed
         * behind this frame octd is catching up: the file leaves the frame
         * out (counted) rather than octd losing later ones to the copy. */
        octd_record_take(d, &d->ring_geom, &info, catching_up(d, behind) ? NULL : ptr);
    }
    if (g->in_place && !L->w && (live_lanes(g) > 1 || (g->overlap && L->depth > 1))) {
        /* several GPUs: the next frame's copy starts on the next engine now;
         * one GPU (overlap_input): the next frame is taken and submitted
         * while this one's copy runs.  This slot is verified when its copy
         * is done (verify_ready, or before its frame completes). */
        f->unverified = true;
        return OCT_OK;
    }
    /* Wait until the engine has read the input (the slot, or the copy that
     * the next frame overwrites), finishing older frames meanwhile (never
     * the new one: it must be verified first). */
    for (;;) {
        if (L->w) { /* copied by worker_submit */
            rc = OCT_OK;
            break;
        }
        uint64_t t0 = prof_now();
        rc = oct_engine_input_done(L->eng, f->ticket, 0, &se);
        prof_add(g, PH_INPUT, t0);
        if (rc != OCT_ETIMEDOUT)
            break;
        if (!complete_ready(g, d, L))
            poll_sleep(g);
        if (L->dead) /* taken out meanwhile: the frame is lost already */
            break;
    }
    if (L->dead) {
        if (g->in_place)
            oct_ring_consumer_verify(d->ring, &info);
        return OCT_OK;
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
    /* With a synchronous engine the frame is finished already. */
    if (L->depth == 1)
        complete_one(g, d, L, -1);
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
    path_lane *L = &g->lane[0]; /* review runs on the first engine */
    L->eng = d->eng;
    L->index = 0;
    lane_place(d, L); /* the engines may have been re-planned since the last binding */
    pool_sync(L, d);
    octd_slot *slot = pool_acquire(L, d);
    L->eng = NULL;
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
        set_pool_max(L, slot);
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
static void lane_trim(path_lane *g)
{
    pool_reap(g);
    /* idle host buffers beyond what is made up front (pinned ones stay:
     * making them again in the frame loop would stall it) */
    int n = 0, keep = g->depth + POOL_EXTRA, zc = 0;
    for (int i = 0; i < g->nslots; i++) {
        octd_slot *s = g->slots[i];
        bool extra = s->copy_only || zc >= keep;
        if (extra && slot_idle(s) && !s->prod->pinned && !s->area) {
            g->ncopy -= s->copy_only;
            slot_free(s);
            continue;
        }
        zc += !s->copy_only;
        g->slots[n++] = s;
    }
    g->nslots = n;
}

void octd_frames_trim(octd *d)
{
    octd_frames *g = d->frames;
    if (g)
        for (int i = 0; i < OCT_ENGINES_MAX; i++)
            lane_trim(&g->lane[i]);
    malloc_trim(0);
}

oct_err octd_frames_set_params(octd *d, int k, const oct_params *p, oct_error *e)
{
    oct_engine *eng = d->neng > 0 ? d->engs[k] : d->eng;
    octd_frames *g = d->frames;
    lane_worker *w = g && g->bound && k < g->nlanes && g->lane[k].eng == eng ? g->lane[k].w
                                                                               : NULL;
    if (w)
        worker_hold(w);
    oct_err rc = oct_engine_set_params(eng, p, e);
    if (w)
        worker_release(w);
    return rc;
}

void octd_frames_engine_counts(const octd *d, uint64_t *published, bool *dead, int *n)
{
    const octd_frames *g = d->frames;
    *n = g && g->bound ? g->nlanes : 0;
    for (int i = 0; i < *n; i++) {
        published[i] = g->lane[i].published;
        dead[i] = g->lane[i].dead;
    }
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
        unbind_path(g, d);
    }
    /* ZeroMQ is gone: nobody holds them */
    for (int k = 0; k < OCT_ENGINES_MAX; k++) {
        path_lane *L = &g->lane[k];
        for (int i = 0; i < L->nslots; i++)
            slot_free(L->slots[i]);
        for (int i = 0; i < L->nretired; i++)
            slot_free(L->retired[i]);
        area_drop(L->area); /* the last holder: unlinks its name */
        L->area = NULL;
    }
    octd_reorder_destroy(g->order);
    free(g);
    d->frames = NULL;
}
