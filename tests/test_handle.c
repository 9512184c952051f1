/* test_handle.c - the handle API of liboct.so (config/oct_handle.h) that the
 * Python package binds: offline processing against a float64 direct-sum
 * reference (SPEC 2.2, 7), the geometry rules, and control set / get /
 * command on a real control block (a bad key writes nothing, a command
 * carries its arguments in one generation).  Run under ASan/UBSan. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oct_config.h"
#include "oct_control_keys.h"
#include "oct_handle.h"
#include "oct_ipc.h"

static char tmpl[64];

static const char *write_profile(const char *text)
{
    snprintf(tmpl, sizeof tmpl, "/tmp/octd-test-handle.XXXXXX");
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    return tmpl;
}

START_TEST(proc_matches_reference)
{
    const char *p = write_profile("geometry: {samples: 128, ascans: 7, lines: 1, sample_type: f32}\n"
                                  "window: {type: rect}\nfreq_cutoff: 3\nproducts: [bscan, f32]\n");
    oct_proc *h;
    oct_error e;
    ck_assert_msg(oct_proc_open(&h, p, NULL, 1, 1, NULL, true, &e) == OCT_OK, "%s", e.msg);
    const uint32_t M = 128, N = 7, D = M / 2 + 1;
    float *x = malloc(sizeof(float) * M * N);
    srand(5);
    for (uint32_t i = 0; i < M * N; i++)
        x[i] = (float)(rand() % 2000) - 1000.0f;
    double ms;
    ck_assert_msg(oct_proc_frame(h, x, sizeof(float) * M * N, &ms, &e) == OCT_OK, "%s", e.msg);
    int nd;
    uint32_t shape[3];
    const uint8_t *u8;
    const float *f32;
    const int32_t *ind;
    uint32_t nind;
    ck_assert(oct_proc_image(h, OCT_METHOD_CFD, OCT_KIND_BSCAN, &nd, shape, &u8, &f32, &ind, &nind));
    ck_assert_int_eq(nd, 2);
    ck_assert_uint_eq(shape[0], D);
    ck_assert_uint_eq(shape[1], N);
    ck_assert_ptr_nonnull(f32);
    ck_assert(!oct_proc_image(h, OCT_METHOD_MSI, OCT_KIND_BSCAN, &nd, shape, &u8, &f32, &ind, &nind));
    ck_assert(!oct_proc_image(h, 7, 0, &nd, shape, &u8, &f32, &ind, &nind));
    ck_assert(oct_proc_image(h, OCT_METHOD_CFD, OCT_KIND_BSCAN, &nd, shape, &u8, &f32, &ind, &nind));
    /* float64 direct sums: I[d][a] = |sum_n x[n] e^(-2 pi i d n / M)|, 0 below F */
    double num = 0, den = 0;
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t d = 0; d < D; d++) {
            double re = 0, im = 0;
            for (uint32_t n = 0; n < M; n++) {
                double ph = -2 * M_PI * (double)d * n / M;
                re += x[a * M + n] * cos(ph);
                im += x[a * M + n] * sin(ph);
            }
            double ref = d < 3 ? 0 : hypot(re, im);
            double got = f32[d * N + a];
            num += (got - ref) * (got - ref);
            den += ref * ref;
        }
    ck_assert_msg(sqrt(num / den) < 1e-4, "relative L2 %g", sqrt(num / den));
    /* wrong frame size: refused with both sizes */
    ck_assert_int_eq(oct_proc_frame(h, x, 100, &ms, &e), OCT_ESIZE);
    ck_assert_ptr_nonnull(strstr(e.msg, "100 bytes"));
    oct_proc_close(h);
    free(x);
    unlink(p);
}
END_TEST

START_TEST(proc_geometry_rules)
{
    oct_proc *h;
    oct_error e;
    const char *p = write_profile("window: {type: hann}\n");
    ck_assert_int_eq(oct_proc_open(&h, p, NULL, 1, 1, NULL, true, &e), OCT_ESTATE);
    ck_assert_ptr_nonnull(strstr(e.msg, "no geometry"));
    oct_geometry g = {256, 4, 2, OCT_SAMPLE_U16, 0};
    ck_assert_msg(oct_proc_open(&h, p, &g, 1, 1, "enface.count=3\nscale=log\n", true, &e) == OCT_OK,
                  "%s", e.msg);
    oct_geometry got;
    oct_proc_geometry(h, &got);
    ck_assert_uint_eq(got.lines, 2);
    ck_assert_str_eq(oct_proc_backend(h), "cpu");
    oct_proc_close(h);
    ck_assert_int_ne(oct_proc_open(&h, p, &g, 1, 1, "no_such_key=1", true, &e), OCT_OK);
    ck_assert_ptr_nonnull(strstr(e.msg, "no_such_key"));
    ck_assert_int_eq(oct_proc_open(&h, p, &g, 5, 1, NULL, true, &e), OCT_EINVAL);
    unlink(p);
    p = write_profile("geometry: {samples: 256, ascans: 4, lines: 1, sample_type: u16}\n");
    ck_assert_int_eq(oct_proc_open(&h, p, &g, 1, 1, NULL, true, &e), OCT_ESIZE);
    ck_assert_ptr_nonnull(strstr(e.msg, "does not match"));
    unlink(p);
}
END_TEST

START_TEST(ctl_set_get_command)
{
    char name[64];
    snprintf(name, sizeof name, "/octd-test-handle-%d", (int)getpid());
    oct_control_values init;
    memset(&init, 0, sizeof init);
    oct_params pr;
    oct_params_default(&pr);
    oct_control_from_params(&init, &pr);
    oct_control *c;
    oct_error e;
    ck_assert_msg(oct_control_create(&c, name, &init, 0600, &e) == OCT_OK, "%s", e.msg);
    uint64_t g0 = oct_control_generation(c), gen = 0;
    ck_assert_msg(oct_ctl_set(name, "enface.start=12\nwindow=tukey\nwindow.param=0.25", &gen, &e) ==
                      OCT_OK, "%s", e.msg);
    ck_assert_uint_eq(gen, g0 + 1);
    char buf[16384];
    ck_assert_int_eq(oct_ctl_get(name, buf, sizeof buf, &e), OCT_OK);
    ck_assert_ptr_nonnull(strstr(buf, "enface.start=12\n"));
    ck_assert_ptr_nonnull(strstr(buf, "window=tukey"));
    /* a bad key or value anywhere: nothing written, the key named */
    ck_assert_int_ne(oct_ctl_set(name, "enface.start=13\nbogus.key=1", &gen, &e), OCT_OK);
    ck_assert_ptr_nonnull(strstr(e.msg, "bogus.key"));
    ck_assert_int_ne(oct_ctl_set(name, "enface.start=abc", &gen, &e), OCT_OK);
    ck_assert_uint_eq(oct_control_generation(c), g0 + 1);
    ck_assert_int_eq(oct_ctl_get(name, buf, 10, &e), OCT_ESIZE);
    /* a command and its arguments in one generation */
    uint64_t seq = 0;
    ck_assert_int_eq(oct_ctl_command(name, OCT_CMD_RECORD, 3, 100, 2.5, &seq, &e), OCT_OK);
    oct_control_values v;
    uint64_t g;
    ck_assert_int_eq(oct_control_read(c, 10, &v, &g), OCT_OK);
    ck_assert_uint_eq(g, g0 + 2);
    ck_assert_uint_eq(v.command_seq, seq);
    ck_assert_uint_eq(v.command, OCT_CMD_RECORD);
    ck_assert_uint_eq(v.cmd_flags, 3);
    ck_assert_uint_eq(v.cmd_frames, 100);
    ck_assert(v.cmd_seconds == 2.5);
    ck_assert_int_eq(v.enface_start, 12); /* values kept */
    ck_assert_int_eq(oct_ctl_command(name, 99, 0, 0, 0, &seq, &e), OCT_EINVAL);
    ck_assert_int_eq(oct_ctl_command("/octd-test-handle-none", 1, 0, 0, 0, &seq, &e), OCT_ENOENT);
    /* the status block copy: absent is an error naming it */
    char sb[4096];
    ck_assert_int_ne(oct_stat_copy("/octd-test-handle-none", sb, sizeof sb, &e), OCT_OK);
    ck_assert_int_eq(oct_stat_copy("/x", sb, 16, &e), OCT_ESIZE);
    oct_control_close(c, true);
}
END_TEST

static Suite *handle_suite(void)
{
    Suite *s = suite_create("handle");
    TCase *tc = tcase_create("handle");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, proc_matches_reference);
    tcase_add_test(tc, proc_geometry_rules);
    tcase_add_test(tc, ctl_set_get_command);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(handle_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
