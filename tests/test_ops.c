/* test_ops.c - issue 14 (operations) in the libraries: the producer's
 * heartbeat thread keeps a pausing ring alive, oct_ring_producer_set_group
 * says why not, oct_status_summary (octctl status summary= and systemd
 * STATUS=), octd.ini [ring] stale_ms and [metrics] listen.
 * CPU only; never touches CUDA. */
#include <check.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oct_config.h"
#include "oct_ipc.h"

static char g_name[64];
static const char *shm_name(const char *tag)
{
    snprintf(g_name, sizeof g_name, "/octtest-ops-%d-%s", (int)getpid(), tag);
    return g_name;
}

static void commit_one(oct_ring_producer *p, uint64_t id)
{
    uint16_t *f = oct_ring_producer_begin(p);
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 64 * 2; i++)
        f[i] = (uint16_t)(i + id);
    oct_ring_producer_commit(p, id, oct_time_realtime_ns());
}

/* A producer that pauses 4x longer than the consumer's stale limit stays
 * alive with the thread on; without it, the same pause is stale. */
START_TEST(heartbeat_thread_keeps_ring_alive)
{
    oct_ring_config cfg = {{64, 2, 1, OCT_SAMPLE_U16, 0}, 4, 0};
    oct_error e;
    oct_ring_producer *p;
    oct_ring_consumer *c;
    const char *name = shm_name("hb");
    ck_assert_msg(oct_ring_producer_create(&p, name, &cfg, &e) == OCT_OK, "%s", e.msg);
    ck_assert_msg(oct_ring_consumer_open(&c, name, &e) == OCT_OK, "%s", e.msg);
    oct_ring_consumer_set_stale_ms(c, 150);
    uint16_t buf[128];
    oct_frame_info info;
    ck_assert_int_eq(oct_ring_producer_heartbeat_thread(p, true, &e), OCT_OK);
    ck_assert_int_eq(oct_ring_producer_heartbeat_thread(p, true, &e), OCT_OK); /* twice: one thread */
    commit_one(p, 1);
    ck_assert_int_eq(oct_ring_consumer_next(c, OCT_POLICY_ALL, buf, sizeof buf, 500, &info, &e), OCT_OK);
    /* 600 ms without a frame: no new frame, but not stale */
    oct_err err = oct_ring_consumer_next(c, OCT_POLICY_ALL, buf, sizeof buf, 600, &info, &e);
    ck_assert_msg(err == OCT_ETIMEDOUT, "paused producer with the thread: %d (%s)", err, e.msg);
    commit_one(p, 2);
    ck_assert_int_eq(oct_ring_consumer_next(c, OCT_POLICY_ALL, buf, sizeof buf, 500, &info, &e), OCT_OK);
    ck_assert_uint_eq(info.frame_id, 2);
    ck_assert_uint_eq(buf[5], 7);
    /* thread off: the same pause is stale */
    ck_assert_int_eq(oct_ring_producer_heartbeat_thread(p, false, &e), OCT_OK);
    err = oct_ring_consumer_next(c, OCT_POLICY_ALL, buf, sizeof buf, 2000, &info, &e);
    ck_assert_msg(err == OCT_ESTALE && strstr(e.msg, "heartbeat"), "%d %s", err, e.msg);
    /* close stops a running thread (ASan: no use after unmap) */
    ck_assert_int_eq(oct_ring_producer_heartbeat_thread(p, true, &e), OCT_OK);
    oct_ring_consumer_close(c);
    oct_ring_producer_close(p, true);
    ck_assert_int_eq(oct_ring_producer_heartbeat_thread(NULL, true, &e), OCT_EINVAL);
}
END_TEST

START_TEST(set_group_reasons)
{
    oct_ring_config cfg = {{64, 2, 1, OCT_SAMPLE_U16, 0}, 2, 0};
    oct_error e;
    oct_ring_producer *p;
    const char *name = shm_name("grp");
    ck_assert_msg(oct_ring_producer_create(&p, name, &cfg, &e) == OCT_OK, "%s", e.msg);
    ck_assert_int_eq(oct_ring_producer_set_group(p, "no-such-group-octd-test", &e), OCT_ENOENT);
    ck_assert_msg(strstr(e.msg, name) && strstr(e.msg, "no-such-group-octd-test"), "%s", e.msg);
    /* our own primary group: always allowed */
    struct group *g = getgrgid(getegid());
    ck_assert_ptr_nonnull(g);
    char own[64];
    snprintf(own, sizeof own, "%s", g->gr_name);
    ck_assert_msg(oct_ring_producer_set_group(p, own, &e) == OCT_OK, "%s", e.msg);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_gid, getegid());
    ck_assert_uint_eq(st.st_mode & 0777, 0660);
    ck_assert_int_eq(oct_ring_producer_set_group(p, "", &e), OCT_EINVAL);
    oct_ring_producer_close(p, true);
}
END_TEST

START_TEST(status_summary_text)
{
    oct_status_block b;
    char out[512];
    memset(&b, 0, sizeof b);
    b.state = OCT_STATE_ONLINE;
    b.ring_state = OCT_ATTACH_WAITING;
    oct_status_summary(&b, out, sizeof out);
    ck_assert_str_eq(out, "online, waiting for ring");
    snprintf(b.ring_message, sizeof b.ring_message, "ring /x does not exist");
    oct_status_summary(&b, out, sizeof out);
    ck_assert_str_eq(out, "online, waiting for ring: ring /x does not exist");
    b.ring_state = OCT_ATTACH_ERROR;
    snprintf(b.ring_message, sizeof b.ring_message, "ring /x: permission denied");
    oct_status_summary(&b, out, sizeof out);
    ck_assert_str_eq(out, "online, ring error: ring /x: permission denied");
    b.ring_state = OCT_ATTACH_OK;
    b.frames_seen = 10, b.frames_processed = 7, b.frames_skipped = 3, b.images_published = 14;
    b.warning_count = 2;
    snprintf(b.warnings, sizeof b.warnings, "w1; w2");
    oct_status_summary(&b, out, sizeof out);
    ck_assert_str_eq(out, "online: frames in 10, processed 7, skipped 3, images published 14; "
                          "2 warnings: w1; w2");
    /* unterminated text fields and a short buffer: cut, terminated */
    memset(b.warnings, 'x', sizeof b.warnings);
    size_t n = oct_status_summary(&b, out, 40);
    ck_assert_uint_eq(n, 39);
    ck_assert_uint_eq(strlen(out), 39);
    ck_assert_str_eq(oct_attach_state_name(OCT_ATTACH_ERROR), "error");
    ck_assert_str_eq(oct_attach_state_name(99), "unknown");
}
END_TEST

START_TEST(ini_stale_ms_and_metrics)
{
    oct_daemon_config c;
    oct_error e;
    const char *ok = "[ring]\nstale_ms = 6000\npoll_us = 20\n[metrics]\nlisten = 9464\n";
    ck_assert_msg(oct_daemon_config_parse(&c, ok, strlen(ok), "/x/o.ini", &e) == OCT_OK, "%s", e.msg);
    ck_assert_uint_eq(c.stale_ms, 6000);
    ck_assert_uint_eq(c.poll_us, 20);
    ck_assert_str_eq(c.metrics_listen, "127.0.0.1:9464");
    const char *def = "[ring]\npolicy = all\n";
    ck_assert_int_eq(oct_daemon_config_parse(&c, def, strlen(def), "/x/o.ini", &e), OCT_OK);
    ck_assert_uint_eq(c.stale_ms, 2000);
    ck_assert_uint_eq(c.poll_us, 20);
    ck_assert_str_eq(c.metrics_listen, ""); /* off by default */
    const char *host = "[metrics]\nlisten = localhost:9000\n";
    ck_assert_int_eq(oct_daemon_config_parse(&c, host, strlen(host), "/x/o.ini", &e), OCT_OK);
    ck_assert_str_eq(c.metrics_listen, "127.0.0.1:9000");
    const char *lan = "[metrics]\nlisten = 192.168.1.10:9464\n"; /* explicit: allowed */
    ck_assert_int_eq(oct_daemon_config_parse(&c, lan, strlen(lan), "/x/o.ini", &e), OCT_OK);
    ck_assert_str_eq(c.metrics_listen, "192.168.1.10:9464");
    static const struct { const char *text, *want; } bad[] = {
        {"[ring]\nstale_ms = 50\n", "o.ini:2: [ring] stale_ms: '50'"},
        {"[ring]\nstale_ms = soon\n", "[ring] stale_ms: 'soon'"},
        {"[ring]\npoll_us = 0\n", "o.ini:2: [ring] poll_us: '0' is not a number of microseconds"},
        {"[ring]\npoll_us = 100001\n", "[ring] poll_us: '100001'"},
        {"[metrics]\nlisten = 70000\n", "o.ini:2: [metrics] listen: '70000'"},
        {"[metrics]\nlisten = example.org:80\n", "[metrics] listen: 'example.org:80'"},
        {"[metrics]\nport = 1\n", "[metrics] port: unknown key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        oct_err err = oct_daemon_config_parse(&c, bad[i].text, strlen(bad[i].text), "/x/o.ini", &e);
        ck_assert_msg(err != OCT_OK && strstr(e.msg, bad[i].want), "%s -> %s", bad[i].text, e.msg);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, heartbeat_thread_keeps_ring_alive);
    tcase_add_test(tc, set_group_reasons);
    tcase_add_test(tc, status_summary_text);
    tcase_add_test(tc, ini_stale_ms_and_metrics);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
