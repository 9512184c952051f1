/* test_frames.c - unit tests of octd's frame path pieces that need no ring
 * or subscriber (daemon/frames.c, issue 21; reorder.c, issue 20): taking a product buffer never
 * waits (when every pooled buffer is held by ZeroMQ, a copy-only one), held
 * buffers of an earlier geometry are freed once released, trimming keeps
 * what is in use, and frame buffers fit (grow and shrink).  frames.c and the
 * publisher are compiled in here (the daemon is not in liboct.a); the CPU
 * engine is real. */
#include "../daemon/frames.c"
#include "../daemon/loop_prof.c"
#include "../daemon/json.c"
#include "../daemon/copy_cache.c"
#include "../daemon/publish.c"
#include "../daemon/reorder.c"
#include "../daemon/worker.c"
#include "../daemon/sys.c"
#include "../daemon/register_live.c"

#include "../kernels/engine_internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* record.c's (HDF5, not linked here); these tests never record */
void octd_record_take(octd *d, const oct_geometry *geom, const oct_frame_info *info, const void *data)
{
    (void)d, (void)geom, (void)info, (void)data;
}
void octd_record_frame(octd *d, const oct_frame_info *info, const oct_products *prod)
{
    (void)d, (void)info, (void)prod;
}

/* main.c's; the tests plan the engine themselves */
bool octd_ensure_engine(octd *d, const oct_geometry *geom)
{
    return d->eng && geom_same(&d->eng_geom, geom);
}

static void setup_octd(octd *d, uint32_t samples, uint32_t ascans)
{
    memset(d, 0, sizeof *d);
    oct_setup s;
    oct_setup_default(&s);
    s.geom = (oct_geometry){samples, ascans, 1, OCT_SAMPLE_U16, 0};
    s.backend = OCT_BACKEND_CPU;
    s.threads = 1;
    oct_params_default(&d->params);
    oct_error e;
    ck_assert_msg(oct_engine_create(&d->eng, &s, &d->params, &e) == OCT_OK, "%s", e.msg);
    d->eng_geom = s.geom;
    d->frames = calloc(1, sizeof *d->frames);
    ck_assert_ptr_nonnull(d->frames);
}

/* The first engine's lane, bound to d->eng as bind_path would. */
static path_lane *lane0(octd *d)
{
    d->frames->lane[0].eng = d->eng;
    return &d->frames->lane[0];
}

static void teardown_octd(octd *d)
{
    octd_frames_free(d);
    oct_engine_destroy(d->eng);
}

/* Subscribers hold every zero-copy buffer: the next take is a copy-only
 * buffer, at once; idle zero-copy buffers are preferred again as soon as
 * one is released. */
START_TEST(pool_never_waits)
{
    octd d;
    setup_octd(&d, 64, 8);
    path_lane *g = lane0(&d);
    pool_sync(g, &d);
    ck_assert_int_eq(g->depth, 1);
    ck_assert_int_ge(g->nslots, g->depth + POOL_EXTRA);
    octd_slot *held[POOL_MAX + 1];
    int n = 0;
    for (;;) {
        octd_slot *s = pool_acquire(g, &d);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(atomic_load(&s->refs), 1);
        if (s->copy_only) {
            held[n] = s;
            break;
        }
        held[n++] = s; /* "queued in ZeroMQ" from now on */
        ck_assert_int_le(n, POOL_MAX);
    }
    octd_slot *copy = held[n];
    ck_assert_int_eq(n, g->pool_max); /* every zero-copy buffer first */
    ck_assert_int_eq(g->ncopy, 1);
    /* the gauge ([publish] copies = auto) counts the held zero-copy ones */
    ck_assert_int_eq(atomic_load(&g->gauge.held), n);
    ck_assert_int_eq(atomic_load(&g->gauge.cap), g->pool_max);
    ck_assert(octd_pool_low(&g->gauge));
    ck_assert_ptr_null(copy->gauge);
    /* depth 1: one copy-only buffer, in flight: none left (the caller
     * completes its frame first) */
    ck_assert_ptr_null(pool_acquire(g, &d));
    octd_slot_release(copy);
    ck_assert_ptr_eq(pool_acquire(g, &d), copy); /* the same one again, no new one */
    octd_slot_release(copy);
    octd_slot_release(held[3]); /* ZeroMQ let one go */
    octd_slot *s = pool_acquire(g, &d);
    ck_assert_ptr_eq(s, held[3]);
    ck_assert(!s->copy_only);
    for (int i = 0; i < n; i++)
        octd_slot_release(held[i]);
    ck_assert_int_eq(atomic_load(&g->gauge.held), 0);
    ck_assert(!octd_pool_low(&g->gauge));
    teardown_octd(&d);
}
END_TEST

/* Small products' copy-only buffers are made with the pool, not in the
 * frame loop when subscribers first hold every pooled buffer (r5). */
START_TEST(pool_copy_only_up_front)
{
    octd d;
    setup_octd(&d, 64, 8);
    path_lane *g = lane0(&d);
    pool_sync(g, &d);
    ck_assert_int_eq(g->ncopy, g->depth);
    octd_slot *held[POOL_MAX + 1];
    int n = 0;
    while (n <= POOL_MAX && (held[n] = pool_acquire(g, &d)) != NULL && !held[n]->copy_only)
        n++;
    ck_assert_int_eq(n, g->pool_max);
    ck_assert(held[n]->copy_only);
    ck_assert_int_eq(g->ncopy, g->depth); /* none made now */
    ck_assert_int_eq(g->nslots, g->pool_max + g->depth);
    for (int i = 0; i <= n; i++)
        octd_slot_release(held[i]);
    teardown_octd(&d);
}
END_TEST

/* How many zero-copy buffers a pool may hold: B-scan-sized products (<= 1 MB)
 * up to POOL_MAX within the 256 MB made up front (a subscriber lagging by 32
 * frames must not turn 10,000 frames/s into copies, issue 19); larger ones
 * as before, up to POOL_MAX_LARGE within the host / pinned byte budget. */
START_TEST(pool_size_by_bytes)
{
    static const struct { uint64_t bytes; bool pinned; int want; } c[] = {
        {512 << 10, true, POOL_MAX},            /* 500 x 513 + 500 x 512 u8 */
        {512 << 10, false, POOL_MAX},
        {1 << 20, true, 256},                   /* 256 MB / 1 MB */
        {(1 << 20) + 4096, true, POOL_MAX_LARGE}, /* larger: the old rule */
        {3 << 20, true, POOL_MAX_LARGE},
        {128ull << 20, true, 24},               /* 3 GB / 128 MB */
        {64ull << 20, false, 5},                /* 256 MB / 64 MB = 4 < depth + 2 */
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        oct_products p;
        memset(&p, 0, sizeof p);
        p.img[0][0].cap_pixels = c[i].bytes - 1; /* prod_bytes adds 1 */
        p.pinned = c[i].pinned;
        octd_slot s = {.prod = &p};
        path_lane L;
        memset(&L, 0, sizeof L);
        L.depth = 3;
        set_pool_max(&L, &s);
        ck_assert_msg(L.pool_max == c[i].want, "%zu: %" PRIu64 " bytes %s: pool of %d, want %d", i,
                      c[i].bytes, c[i].pinned ? "pinned" : "host", L.pool_max, c[i].want);
    }
}
END_TEST

/* A new geometry: idle buffers freed, held ones retired until released. */
START_TEST(pool_rekey_retires_held)
{
    octd d;
    setup_octd(&d, 64, 8);
    path_lane *g = lane0(&d);
    pool_sync(g, &d);
    octd_slot *a = pool_acquire(g, &d), *b = pool_acquire(g, &d);
    ck_assert(a && b && a != b);
    int before = g->nslots;
    /* another engine (geometry): the pool is re-keyed */
    oct_engine_destroy(d.eng);
    oct_setup s;
    oct_setup_default(&s);
    s.geom = (oct_geometry){128, 4, 1, OCT_SAMPLE_U16, 0};
    s.backend = OCT_BACKEND_CPU;
    s.threads = 1;
    oct_error e;
    ck_assert_msg(oct_engine_create(&d.eng, &s, &d.params, &e) == OCT_OK, "%s", e.msg);
    d.eng_geom = s.geom;
    g = lane0(&d);
    pool_sync(g, &d);
    ck_assert_int_eq(g->nretired, 2);
    ck_assert(g->key.geom.samples == 128);
    for (int i = 0; i < g->nslots; i++)
        ck_assert(g->slots[i] != a && g->slots[i] != b);
    ck_assert_int_le(g->nslots, before);
    octd_slot_release(a);
    pool_reap(g);
    ck_assert_int_eq(g->nretired, 1);
    octd_slot_release(b);
    octd_frames_trim(&d); /* reaps too; ASan checks nothing leaks */
    ck_assert_int_eq(g->nretired, 0);
    teardown_octd(&d);
}
END_TEST

/* Trim frees idle extra buffers, never those in use. */
START_TEST(pool_trim_keeps_used)
{
    octd d;
    setup_octd(&d, 64, 8);
    path_lane *g = lane0(&d);
    pool_sync(g, &d);
    octd_slot *used[8];
    for (int i = 0; i < 8; i++)
        ck_assert_ptr_nonnull(used[i] = pool_acquire(g, &d));
    ck_assert_int_ge(g->nslots, 8);
    for (int i = 1; i < 8; i++)
        octd_slot_release(used[i]);
    octd_frames_trim(&d);
    ck_assert_int_eq(g->nslots, g->depth + POOL_EXTRA);
    bool kept = false;
    for (int i = 0; i < g->nslots; i++)
        kept |= g->slots[i] == used[0];
    ck_assert(kept);
    octd_slot_release(used[0]);
    teardown_octd(&d);
}
END_TEST

START_TEST(frame_buf_fits)
{
    octd_frame_buf b = {0};
    ck_assert(octd_frame_buf_fit(&b, 1 << 20));
    ck_assert_uint_eq(b.cap, 1 << 20);
    ck_assert_uint_eq((uintptr_t)b.data % 4096, 0);
    b.valid = true;
    uint8_t *p = b.data;
    ck_assert(octd_frame_buf_fit(&b, 700000)); /* fits, not much too large: kept */
    ck_assert_ptr_eq(b.data, p);
    ck_assert(b.valid);
    ck_assert(octd_frame_buf_fit(&b, 1000)); /* far too large: shrunk */
    ck_assert_uint_eq(b.cap, 1000);
    ck_assert(!b.valid);
    ck_assert(octd_frame_buf_fit(&b, 5000)); /* grown */
    ck_assert_uint_eq(b.cap, 5000);
    octd_frame_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.cap, 0);
}
END_TEST

/* ---- the reorder stage (issue 20) ---- */
typedef struct item {
    uint64_t seq, tag;
} item;

/* Several engines with their own depths finish frames in their own order
 * (each in dealing order, engines at random relative times); some frames are
 * lost.  Popping gives every number once, in order, with its own item or
 * its lost mark, and never anything past a frame still out. */
START_TEST(reorder_in_dealing_order)
{
    enum { LANES = 3, DEPTH = 3, FRAMES = 5000 };
    octd_reorder *r;
    oct_error e;
    ck_assert_int_eq(octd_reorder_create(&r, LANES * DEPTH, sizeof(item), &e), OCT_OK);
    octd_reorder_reset(r, 100);
    srand(20);
    uint64_t q[LANES][DEPTH]; /* frames in flight per lane, oldest first */
    int cnt[LANES] = {0}, rr = 0;
    uint64_t dealt = 100, want = 100;
    static bool lost[100 + FRAMES];
    while (want < 100 + FRAMES) {
        /* deal round-robin to a lane with room, within the window */
        if (dealt < 100 + FRAMES && dealt - octd_reorder_next(r) < LANES * DEPTH && rand() % 2) {
            for (int k = 0; k < LANES; k++) {
                int l = (rr + k) % LANES;
                if (cnt[l] < DEPTH) {
                    q[l][cnt[l]++] = dealt++;
                    rr = (l + 1) % LANES;
                    break;
                }
            }
        }
        /* a random lane finishes its oldest frame */
        int l = rand() % LANES;
        if (cnt[l] > 0) {
            uint64_t seq = q[l][0];
            memmove(q[l], q[l] + 1, sizeof q[l][0] * (size_t)--cnt[l]);
            lost[seq] = rand() % 10 == 0;
            item it = {seq, seq * 7 + 1};
            ck_assert_int_eq(octd_reorder_put(r, seq, lost[seq] ? NULL : &it, &e), OCT_OK);
        }
        uint64_t seq;
        bool was_lost;
        item got = {0, 0};
        while (octd_reorder_pop(r, &seq, &got, &was_lost)) {
            ck_assert_uint_eq(seq, want);
            ck_assert(was_lost == lost[seq]);
            if (!was_lost)
                ck_assert(got.seq == seq && got.tag == seq * 7 + 1);
            want++;
        }
        /* what stays is only what waits for a frame still out */
        bool out = false;
        for (int k = 0; k < LANES; k++)
            for (int i = 0; i < cnt[k]; i++)
                out |= q[k][i] == want;
        ck_assert(out || want == dealt);
    }
    ck_assert_uint_eq(octd_reorder_pending(r), 0);
    octd_reorder_destroy(r);
}
END_TEST

/* Bad puts are refused with both numbers in the message and change nothing. */
START_TEST(reorder_rejects)
{
    octd_reorder *r;
    oct_error e;
    ck_assert_int_eq(octd_reorder_create(&r, 0, sizeof(item), &e), OCT_EINVAL);
    ck_assert_int_eq(octd_reorder_create(&r, 4, sizeof(item), &e), OCT_OK);
    item a = {10, 1}, b = {11, 2};
    octd_reorder_reset(r, 10);
    ck_assert_int_eq(octd_reorder_put(r, 11, &b, &e), OCT_OK);
    ck_assert_int_eq(octd_reorder_put(r, 11, &a, &e), OCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "11 put twice"));
    ck_assert_int_eq(octd_reorder_put(r, 14, &a, &e), OCT_ESIZE);
    ck_assert_ptr_nonnull(strstr(e.msg, "window of 4 frames after 10"));
    ck_assert_int_eq(octd_reorder_put(r, 9, &a, &e), OCT_EINVAL);
    ck_assert_uint_eq(octd_reorder_pending(r), 1);
    uint64_t seq;
    bool lost;
    item got;
    ck_assert(!octd_reorder_pop(r, &seq, &got, &lost)); /* 10 is still out */
    ck_assert_int_eq(octd_reorder_put(r, 10, NULL, &e), OCT_OK);
    ck_assert(octd_reorder_pop(r, &seq, &got, &lost) && seq == 10 && lost);
    ck_assert(octd_reorder_pop(r, &seq, &got, &lost) && seq == 11 && !lost && got.tag == 2);
    ck_assert(!octd_reorder_pop(r, &seq, &got, &lost));
    ck_assert_int_eq(octd_reorder_put(r, 10, &a, &e), OCT_EINVAL); /* popped already */
    octd_reorder_destroy(r);
}
END_TEST

/* Frames go to the live engines in turn, each up to its depth, no more
 * in flight than the live engines' depths together; a dead one gets none. */
START_TEST(lanes_round_robin)
{
    octd d;
    setup_octd(&d, 64, 8);
    octd_frames *g = d.frames;
    oct_error e;
    ck_assert_int_eq(octd_reorder_create(&g->order, REORDER_WINDOW, sizeof(path_frame), &e),
                     OCT_OK);
    g->nlanes = 3;
    for (int i = 0; i < 3; i++) {
        g->lane[i].index = i;
        g->lane[i].depth = i == 1 ? 2 : 1;
    }
    int seen[3] = {0};
    for (int n = 0; n < 4; n++) { /* budget 1 + 2 + 1 */
        path_lane *L = pick_lane(g);
        ck_assert_ptr_nonnull(L);
        L->count++;
        g->dealt++;
        seen[L->index]++;
    }
    ck_assert(seen[0] == 1 && seen[1] == 2 && seen[2] == 1);
    ck_assert_ptr_null(pick_lane(g)); /* all full */
    for (int i = 0; i < 3; i++)
        g->lane[i].count = 0;
    ck_assert_ptr_null(pick_lane(g)); /* nothing published yet: the window is full */
    octd_reorder_reset(g->order, g->dealt);
    g->lane[1].dead = true;
    path_lane *a = pick_lane(g), *b = pick_lane(g), *c = pick_lane(g);
    ck_assert(a && b && c && a != b && a->index != 1 && b->index != 1 && c == a);
    g->nlanes = 0;
    teardown_octd(&d);
}
END_TEST

/* A synchronous one-thread CPU engine of d's geometry and values: the
 * reference the paths under test are compared with, frame by frame. */
static oct_engine *reference_engine(const octd *d)
{
    oct_setup s;
    oct_setup_default(&s);
    s.geom = d->eng_geom;
    s.backend = OCT_BACKEND_CPU;
    s.threads = 1;
    oct_engine *ref;
    oct_error e;
    ck_assert_msg(oct_engine_create(&ref, &s, &d->params, &e) == OCT_OK, "%s", e.msg);
    return ref;
}

/* A CPU engine's worker thread (several engines): jobs come back in order,
 * equal to the engine's synchronous results (bit for bit: the same code on
 * the same input), the input is the caller's again at once; the queue's
 * limits and states; holding the engine waits for the queued frames. */
START_TEST(worker_matches_sync)
{
    octd d;
    setup_octd(&d, 128, 16);
    oct_engine *ref = reference_engine(&d);
    oct_error e;
    size_t bytes = oct_geometry_frame_bytes(&d.eng_geom);
    uint16_t *in = malloc(bytes);
    ck_assert_ptr_nonnull(in);
    lane_worker *w = worker_start(d.eng);
    ck_assert_ptr_nonnull(w);
    oct_products *done;
    ck_assert_int_eq(worker_complete(w, &done, 0, &e), OCT_ESTATE); /* nothing in flight */
    srand(7);
    for (int round = 0; round < 20; round++) {
        oct_products *out[ASYNC_DEPTH], *want = oct_products_create();
        uint16_t *frames[ASYNC_DEPTH];
        for (int k = 0; k < ASYNC_DEPTH; k++) {
            frames[k] = malloc(bytes);
            for (size_t i = 0; i < bytes / 2; i++)
                frames[k][i] = (uint16_t)(rand() % 4096);
            memcpy(in, frames[k], bytes);
            out[k] = oct_products_create();
            ck_assert_int_eq(worker_submit(w, in, bytes, out[k], &e), OCT_OK);
            memset(in, 0xff, bytes); /* read already: the job holds a copy */
        }
        ck_assert_int_eq(worker_submit(w, in, bytes, out[0], &e), OCT_EAGAIN); /* full */
        if (round % 2) { /* holding waits until the worker has processed both */
            worker_hold(w);
            for (int k = 0; k < ASYNC_DEPTH; k++)
                ck_assert_int_eq(w->job[k].state, JOB_DONE);
            worker_release(w);
        }
        for (int k = 0; k < ASYNC_DEPTH; k++) {
            ck_assert_int_eq(worker_complete(w, &done, -1, &e), OCT_OK);
            ck_assert_ptr_eq(done, out[k]); /* in order */
            ck_assert_int_eq(oct_engine_process(ref, frames[k], bytes, want, &e), OCT_OK);
            const oct_image *a = &out[k]->img[OCT_METHOD_CFD][OCT_KIND_BSCAN],
                            *b = &want->img[OCT_METHOD_CFD][OCT_KIND_BSCAN];
            ck_assert(a->present && b->present && a->count == b->count && a->count > 0);
            ck_assert_int_eq(memcmp(a->u8, b->u8, a->count), 0);
            oct_products_destroy(out[k]);
            free(frames[k]);
        }
        oct_products_destroy(want);
    }
    ck_assert_int_eq(worker_complete(w, &done, 0, &e), OCT_ESTATE);
    worker_stop(w);
    free(in);
    oct_engine_destroy(ref);
    teardown_octd(&d);
}
END_TEST

/* A lane's oldest frame finished (complete_one's success path without an
 * engine): to the reorder stage, then published in order. */
static void fake_complete(octd_frames *g, octd *d, path_lane *L)
{
    path_frame *f = &L->q[L->head];
    L->head = (L->head + 1) % OCT_ENGINE_DEPTH_MAX;
    L->count--;
    ck_assert_int_eq(octd_reorder_put(g->order, f->seq, f, NULL), OCT_OK);
    publish_in_order(g, d);
}

/* An engine taken out: its frames in flight are lost (counted, their
 * buffers released, never published), the frames of the other engine before
 * and after them still come out in order, and it gets no more frames. */
START_TEST(lane_fail_keeps_order)
{
    octd d;
    setup_octd(&d, 64, 8);
    octd_frames *g = d.frames;
    oct_error e;
    ck_assert_int_eq(octd_reorder_create(&g->order, REORDER_WINDOW, sizeof(path_frame), &e),
                     OCT_OK);
    g->nlanes = 2;
    g->no_publish = true; /* no publisher here: frames "published" are released */
    for (int i = 0; i < 2; i++) {
        path_lane *L = &g->lane[i];
        L->eng = d.eng;
        L->index = i;
        pool_sync(L, &d);
        L->depth = 3;
    }
    for (int n = 0; n < 6; n++) { /* seq 0, 2, 4 to engine 0; 1, 3, 5 to engine 1 */
        path_lane *L = pick_lane(g);
        ck_assert_ptr_nonnull(L);
        ck_assert_int_eq(L->index, n % 2);
        path_frame *f = &L->q[(L->head + L->count) % OCT_ENGINE_DEPTH_MAX];
        memset(f, 0, sizeof *f);
        ck_assert_ptr_nonnull(f->slot = pool_acquire(L, &d));
        f->seq = g->dealt++;
        f->lane = L->index;
        L->count++;
    }
    path_lane *a = &g->lane[0], *b = &g->lane[1];
    octd_slot *b_slots[3];
    for (int i = 0; i < 3; i++)
        b_slots[i] = b->q[(b->head + i) % OCT_ENGINE_DEPTH_MAX].slot;
    fake_complete(g, &d, a); /* 0: published */
    ck_assert_uint_eq(octd_reorder_next(g->order), 1);
    fake_complete(g, &d, a); /* 2: waits for 1 */
    ck_assert_uint_eq(octd_reorder_next(g->order), 1);
    lane_fail(g, &d, b, "test failure");
    ck_assert(b->dead && b->count == 0);
    ck_assert_uint_eq(octd_reorder_next(g->order), 4); /* 1, 3 lost, 2 published between */
    ck_assert_uint_eq(d.engine_lost, 3);
    ck_assert_uint_eq(d.skipped, 3);
    ck_assert_ptr_nonnull(strstr(d.engine_warning, "engine 1"));
    ck_assert_ptr_nonnull(strstr(d.engine_warning, "taken out: test failure"));
    for (int i = 0; i < 3; i++)
        ck_assert(slot_idle(b_slots[i])); /* the lost frames' buffers are free */
    fake_complete(g, &d, a); /* 4, then 5 (lost) */
    ck_assert_uint_eq(octd_reorder_next(g->order), 6);
    ck_assert_uint_eq(octd_reorder_pending(g->order), 0);
    ck_assert_uint_eq(a->published + b->published, 0); /* no_publish: none counted */
    for (int i = 0; i < a->nslots; i++)
        ck_assert(slot_idle(a->slots[i]));
    for (int n = 0; n < 3; n++) { /* only engine 0 gets frames now */
        path_lane *L = pick_lane(g);
        ck_assert_ptr_nonnull(L);
        ck_assert_int_eq(L->index, 0);
        L->count++;
        g->dealt++;
    }
    ck_assert_ptr_null(pick_lane(g)); /* engine 0 full; the window is engine 0's depth */
    a->count = 0;
    for (int i = 0; i < 2; i++)
        g->lane[i].eng = NULL;
    teardown_octd(&d);
}
END_TEST

/* ---- the in-place path with a pipelining engine (overlap_input, issue 19) ----
 * A fake pipelining backend over the CPU engine: submit only queues the
 * frame's pointer into the ring; the "DMA" (a memcpy from the slot) happens
 * on the second input_done query or when complete needs it, and complete
 * then computes with the CPU backend.  So the frame loop runs with up to 3
 * frames in flight whose input is not yet read, as with a GPU. */
#define PIPE_DEPTH 3
typedef struct pipe_job {
    const void *frame;
    oct_products *out;
    uint64_t ticket;
    bool copied;
    int polls, cpolls;
    uint8_t *buf;
} pipe_job;

static struct {
    pipe_job q[PIPE_DEPTH];
    int head, count;
    size_t bytes;
    oct_err (*process)(oct_engine *, const void *, oct_products *, oct_error *);
    uint64_t tear_ticket;  /* before this ticket's copy ... */
    void (*tear)(void);    /* ... this runs (the producer laps the ring) */
    int max_unread;        /* most frames in flight whose input was not read yet */
} pipe_eng;

static void pipe_copy(pipe_job *j)
{
    if (j->ticket == pipe_eng.tear_ticket && pipe_eng.tear)
        pipe_eng.tear();
    memcpy(j->buf, j->frame, pipe_eng.bytes);
    j->copied = true;
}

static oct_err pipe_submit(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    (void)eng;
    if (pipe_eng.count == PIPE_DEPTH)
        return oct_error_set(e, OCT_EAGAIN, "pipe: full");
    pipe_job *j = &pipe_eng.q[(pipe_eng.head + pipe_eng.count++) % PIPE_DEPTH];
    j->frame = frame, j->out = out, j->ticket = out->ticket;
    j->copied = false, j->polls = j->cpolls = 0;
    int unread = 0;
    for (int i = 0; i < pipe_eng.count; i++)
        unread += !pipe_eng.q[(pipe_eng.head + i) % PIPE_DEPTH].copied;
    if (unread > pipe_eng.max_unread)
        pipe_eng.max_unread = unread;
    return OCT_OK;
}

static oct_err pipe_input_done(oct_engine *eng, uint64_t ticket, int timeout_ms, oct_error *e)
{
    (void)eng, (void)e;
    for (int i = 0; i < pipe_eng.count; i++) {
        pipe_job *j = &pipe_eng.q[(pipe_eng.head + i) % PIPE_DEPTH];
        if (j->ticket != ticket || j->copied)
            continue;
        if (timeout_ms == 0 && j->polls++ < 1)
            return OCT_ETIMEDOUT; /* the copy is still running */
        for (int k = 0; k <= i; k++) /* copies run in order */
            if (!pipe_eng.q[(pipe_eng.head + k) % PIPE_DEPTH].copied)
                pipe_copy(&pipe_eng.q[(pipe_eng.head + k) % PIPE_DEPTH]);
    }
    return OCT_OK;
}

static oct_err pipe_complete(oct_engine *eng, oct_products **done, int timeout_ms, oct_error *e)
{
    pipe_job *j = &pipe_eng.q[pipe_eng.head];
    if (timeout_ms == 0 && j->cpolls++ < 1)
        return OCT_ETIMEDOUT; /* still computing */
    if (!j->copied)
        pipe_copy(j);
    pipe_eng.head = (pipe_eng.head + 1) % PIPE_DEPTH;
    pipe_eng.count--;
    *done = j->out;
    return pipe_eng.process(eng, j->buf, j->out, e);
}

static int pipe_inflight(const oct_engine *eng)
{
    (void)eng;
    return pipe_eng.count;
}

/* Frame id k: pseudo-random 12-bit samples from k alone. */
static void fill_frame(uint16_t *f, size_t n, uint64_t k)
{
    uint64_t x = k * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        f[i] = (uint16_t)(x % 4096);
    }
}

static oct_ring_producer *pipe_prod;
static uint64_t pipe_next_id;
static size_t pipe_samples;

static void produce_one(void)
{
    fill_frame(oct_ring_producer_begin(pipe_prod), pipe_samples, pipe_next_id);
    oct_ring_producer_commit(pipe_prod, pipe_next_id, oct_time_realtime_ns());
    pipe_next_id++;
}

static void lap_ring(void) /* 4 slots: the frame being copied is overwritten */
{
    for (int i = 0; i < 4; i++)
        produce_one();
}

/* Frames read in place by a pipelining engine: with overlap_input the loop
 * takes the next frame before the last one's input is read (several frames
 * in flight unread), and still: every published frame's image equals the
 * synchronous engine's for its frame_id, in order; a frame whose slot the
 * producer overwrote before its input was read is counted torn and never
 * published; the counters add up.  Without overlap_input no frame is taken
 * while another one's input is unread. */
static void run_in_place(bool overlap)
{
    octd d;
    setup_octd(&d, 256, 32); /* a B-scan of 129 x 32 > 4096 bytes: sent zero-copy */
    oct_engine *ref = reference_engine(&d);
    oct_error e;
    static oct_backend_ops ops;
    ops = *d.eng->ops;
    ops.depth = PIPE_DEPTH;
    ops.submit = pipe_submit, ops.complete = pipe_complete, ops.input_done = pipe_input_done;
    ops.inflight = pipe_inflight, ops.register_host = NULL, ops.unregister_host = NULL;
    memset(&pipe_eng, 0, sizeof pipe_eng);
    pipe_eng.process = d.eng->ops->process;
    pipe_eng.bytes = oct_geometry_frame_bytes(&d.eng_geom);
    pipe_samples = pipe_eng.bytes / 2;
    for (int i = 0; i < PIPE_DEPTH; i++)
        ck_assert_ptr_nonnull(pipe_eng.q[i].buf = malloc(pipe_eng.bytes));
    const oct_backend_ops *cpu_ops = d.eng->ops;
    d.eng->ops = &ops;

    char name[64], dir[64] = "/tmp/octd-test-frames-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(name, sizeof name, "/octd-test-frames-%d", (int)getpid());
    oct_ring_config rc = {.geom = d.eng_geom, .slot_count = 4, .mode = 0600};
    ck_assert_msg(oct_ring_producer_create(&pipe_prod, name, &rc, &e) == OCT_OK, "%s", e.msg);
    pipe_next_id = 0;
    ck_assert_msg(oct_ring_consumer_open(&d.ring, name, &e) == OCT_OK, "%s", e.msg);
    d.ring_geom = d.eng_geom;
    d.cfg.zero_copy = OCT_ZERO_COPY_ON;
    d.cfg.overlap_input = overlap;
    d.cfg.policy = OCT_POLICY_ALL;
    d.cfg.sndhwm = 64; /* every frame of the test stays queued for the subscriber */
    d.cfg.endpoint_count = 1;
    snprintf(d.cfg.endpoints[0], sizeof d.cfg.endpoints[0], "ipc://%s/pub.sock", dir);
    snprintf(d.cfg.source_path, sizeof d.cfg.source_path, "test.ini");
    ck_assert_msg(octd_pub_create(&d.pub, &d.cfg, &e) == OCT_OK, "%s", e.msg);
    void *zctx = zmq_ctx_new(), *sub = zmq_socket(zctx, ZMQ_SUB);
    int linger = 0, tmo = 2000;
    zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sub, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    ck_assert_int_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "bscan/cfd", 9), 0);
    ck_assert_int_eq(zmq_connect(sub, d.cfg.endpoints[0]), 0);
    for (int i = 0; i < 500 && !octd_pub_wanted(d.pub, OCT_METHOD_CFD, OCT_KIND_BSCAN, false); i++)
        usleep(10000); /* the subscription reaches the publisher thread */
    ck_assert(octd_pub_wanted(d.pub, OCT_METHOD_CFD, OCT_KIND_BSCAN, false));

    enum { FRAMES = 40, TEAR = 20 };
    pipe_eng.tear_ticket = TEAR + 1; /* tickets count from 1: frame id TEAR */
    pipe_eng.tear = lap_ring;
    /* one frame at a time (a slot is reused only once its frame completed),
     * except the 4 of lap_ring */
    const oct_ring_header *h = oct_ring_consumer_header(d.ring);
    for (int steps = 0; pipe_next_id < FRAMES || h->write_seq > d.seen; steps++) {
        ck_assert_int_lt(steps, 200);
        if (h->write_seq == d.seen)
            produce_one();
        ck_assert_int_eq(octd_frames_step(&d, &e), OCT_OK);
        ck_assert_int_le(oct_engine_inflight(d.eng), PIPE_DEPTH);
    }
    octd_frames_drain(&d);
    ck_assert_int_eq(oct_engine_inflight(d.eng), 0);
    if (overlap)
        ck_assert_int_ge(pipe_eng.max_unread, 2); /* taken while an earlier copy ran */
    else
        ck_assert_int_eq(pipe_eng.max_unread, 1);
    ck_assert_uint_ge(d.torn, 1); /* frame TEAR's slot was overwritten before its copy */
    ck_assert_uint_eq(d.seen, pipe_next_id);
    ck_assert_uint_eq(d.seen, d.processed + d.skipped + d.torn);

    /* what the subscriber got: frame ids increasing, never a torn frame, each
     * image equal to the synchronous engine's for its frame_id */
    size_t bytes = pipe_eng.bytes;
    uint16_t *frame = malloc(bytes);
    uint8_t *data = malloc(1 << 20);
    oct_products *want = oct_products_create();
    ck_assert(frame && data && want);
    uint64_t got = 0, last_id = 0;
    bool have_tear = false;
    char topic[64], hdr[4096];
    while (got < d.processed) {
        int n = zmq_recv(sub, topic, sizeof topic - 1, 0);
        ck_assert_msg(n > 0, "only %" PRIu64 " of %" PRIu64 " frames received", got, d.processed);
        int hl = zmq_recv(sub, hdr, sizeof hdr - 1, 0);
        ck_assert_int_gt(hl, 0);
        hdr[hl] = '\0';
        int dl = zmq_recv(sub, data, 1 << 20, 0);
        const char *fid = strstr(hdr, "\"frame_id\":");
        ck_assert_ptr_nonnull(fid);
        uint64_t id = strtoull(fid + 11, NULL, 10);
        ck_assert(got == 0 || id > last_id);
        have_tear |= id == TEAR;
        fill_frame(frame, bytes / 2, id);
        ck_assert_int_eq(oct_engine_process(ref, frame, bytes, want, &e), OCT_OK);
        const oct_image *w = &want->img[OCT_METHOD_CFD][OCT_KIND_BSCAN];
        ck_assert_int_eq(dl, (int)w->count);
        ck_assert_msg(memcmp(data, w->u8, w->count) == 0, "frame %" PRIu64 ": image differs", id);
        last_id = id;
        got++;
    }
    ck_assert(!have_tear); /* torn: never published */
    ck_assert_int_lt(zmq_recv(sub, topic, sizeof topic, ZMQ_DONTWAIT), 0); /* nothing more */

    oct_products_destroy(want);
    free(frame);
    free(data);
    zmq_close(sub);
    zmq_ctx_term(zctx);
    octd_pub_destroy(d.pub);
    d.pub = NULL;
    oct_ring_consumer_close(d.ring);
    d.ring = NULL;
    oct_ring_producer_close(pipe_prod, true);
    char sock[96];
    snprintf(sock, sizeof sock, "%s/pub.sock", dir);
    unlink(sock);
    rmdir(dir);
    d.eng->ops = cpu_ops;
    teardown_octd(&d);
    for (int i = 0; i < PIPE_DEPTH; i++)
        free(pipe_eng.q[i].buf);
    oct_engine_destroy(ref);
}

START_TEST(in_place_overlap)
{
    run_in_place(true);
}
END_TEST

START_TEST(in_place_serial)
{
    run_in_place(false);
}
END_TEST

int main(void)
{
    octd_log_set_level(LOG_WARNING);
    Suite *s = suite_create("frames");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pool_never_waits);
    tcase_add_test(tc, pool_copy_only_up_front);
    tcase_add_test(tc, pool_size_by_bytes);
    tcase_add_test(tc, pool_rekey_retires_held);
    tcase_add_test(tc, pool_trim_keeps_used);
    tcase_add_test(tc, frame_buf_fits);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("reorder");
    tcase_set_timeout(tr, 60);
    tcase_add_test(tr, reorder_in_dealing_order);
    tcase_add_test(tr, reorder_rejects);
    tcase_add_test(tr, lanes_round_robin);
    tcase_add_test(tr, worker_matches_sync);
    tcase_add_test(tr, lane_fail_keeps_order);
    tcase_add_test(tr, in_place_overlap);
    tcase_add_test(tr, in_place_serial);
    suite_add_tcase(s, tr);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
