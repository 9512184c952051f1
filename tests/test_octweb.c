/* test_octweb.c - the numeric and parsing parts of octweb (issue 16): the
 * server-side box downscaler against a float64 direct average on random
 * images, sizes and factors, and the reading of octd's image headers
 * (shape, numbers) including malformed ones.  The feed is compiled in. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/octweb/feed.c"

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

START_TEST(downscale_matches_direct_average)
{
    for (int trial = 0; trial < 200; trial++) {
        uint32_t rows = 1 + rnd() % 300, cols = 1 + rnd() % 300;
        uint32_t fy = 1 + rnd() % 7, fx = 1 + rnd() % 7;
        uint8_t *in = malloc((size_t)rows * cols);
        for (size_t i = 0; i < (size_t)rows * cols; i++)
            in[i] = (uint8_t)rnd();
        uint32_t orows = (rows + fy - 1) / fy, ocols = (cols + fx - 1) / fx;
        uint8_t *out = malloc((size_t)orows * ocols);
        octweb_downscale(in, rows, cols, fy, fx, out);
        for (uint32_t r = 0; r < orows; r++)
            for (uint32_t c = 0; c < ocols; c++) {
                /* the box, cut at the edges, averaged in float64 and rounded
                 * half up (odd counts never land on .5; even ones round up) */
                double sum = 0;
                int n = 0;
                for (uint32_t y = r * fy; y < rows && y < (r + 1) * fy; y++)
                    for (uint32_t x = c * fx; x < cols && x < (c + 1) * fx; x++, n++)
                        sum += in[(size_t)y * cols + x];
                int want = (int)floor(sum / n + 0.5);
                ck_assert_msg(out[(size_t)r * ocols + c] == want,
                              "%ux%u /%u,%u at (%u,%u): %d, want %d", rows, cols, fy, fx, r, c,
                              out[(size_t)r * ocols + c], want);
            }
        free(in);
        free(out);
    }
}
END_TEST

START_TEST(downscale_identity)
{
    uint8_t in[12], out[12];
    for (int i = 0; i < 12; i++)
        in[i] = (uint8_t)(i * 21);
    octweb_downscale(in, 3, 4, 1, 1, out);
    ck_assert(memcmp(in, out, 12) == 0);
}
END_TEST

START_TEST(header_fields)
{
    uint32_t s[3] = {0};
    ck_assert_int_eq(json_shape("{\"shape\":[4,32,64],\"dtype\":\"u8\"}", s), 3);
    ck_assert(s[0] == 4 && s[1] == 32 && s[2] == 64);
    ck_assert_int_eq(json_shape("{\"shape\":[513,500]}", s), 2);
    ck_assert(s[0] == 513 && s[1] == 500);
    /* malformed or absurd shapes are not shown */
    ck_assert_int_eq(json_shape("{\"shape\":[]}", s), 0);
    ck_assert_int_eq(json_shape("{\"shape\":[0,5]}", s), 0);
    ck_assert_int_eq(json_shape("{\"shape\":[5,x]}", s), 0);
    ck_assert_int_eq(json_shape("{\"shape\":[1,2,3,4]}", s), 0);
    ck_assert_int_eq(json_shape("{\"shape\":[99999999,2]}", s), 0);
    ck_assert_int_eq(json_shape("{\"shape\":[5,6", s), 0);
    ck_assert_int_eq(json_shape("{}", s), 0);
    uint64_t v = 7;
    ck_assert(json_u64("{\"t_pub_ns\":1700000000123456789,\"x\":1}", "t_pub_ns", &v));
    ck_assert(v == 1700000000123456789ull);
    ck_assert(!json_u64("{\"t_pub_ns\":\"a\"}", "t_pub_ns", &v));
    ck_assert(!json_u64("{\"other\":1}", "t_pub_ns", &v));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("octweb");
    TCase *tc = tcase_create("octweb");
    /* Check's 4 s default is a timing assertion: 200 random images under
     * ASan + UBSan beside stress-ng --cpu 2 ran out of it (2026-12-02) */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, downscale_matches_direct_average);
    tcase_add_test(tc, downscale_identity);
    tcase_add_test(tc, header_fields);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
