/* test_frames.c - unit tests of octd's frame path pieces that need no ring
 * or subscriber (daemon/frames.c, issue 21): taking a product buffer never
 * waits (when every pooled buffer is held by ZeroMQ, a copy-only one), held
 * buffers of an earlier geometry are freed once released, trimming keeps
 * what is in use, and frame buffers fit (grow and shrink).  frames.c and the
 * publisher are compiled in here (the daemon is not in liboct.a); the CPU
 * engine is real. */
#include "../daemon/frames.c"
#include "../daemon/json.c"
#include "../daemon/publish.c"
#include "../daemon/sys.c"
#include "../daemon/register_live.c"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* record.c's (HDF5, not linked here); these tests never record */
void octd_record_frame(octd *d, const octd_frame_buf *f, const oct_products *prod)
{
    (void)d, (void)f, (void)prod;
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
    octd_frames *g = d.frames;
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
    teardown_octd(&d);
}
END_TEST

/* A new geometry: idle buffers freed, held ones retired until released. */
START_TEST(pool_rekey_retires_held)
{
    octd d;
    setup_octd(&d, 64, 8);
    octd_frames *g = d.frames;
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
    octd_frames *g = d.frames;
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

int main(void)
{
    octd_log_set_level(LOG_WARNING);
    Suite *s = suite_create("frames");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pool_never_waits);
    tcase_add_test(tc, pool_rekey_retires_held);
    tcase_add_test(tc, pool_trim_keeps_used);
    tcase_add_test(tc, frame_buf_fits);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
