/* test_daemon.c - unit tests of the daemon's pure parts: the control key
 * table (config/control_keys.c: octctl get/set), octd's JSON writer
 * (daemon/json.c) read back by octgrab's strict header parser
 * (tools/octgrab/jsonhdr.c), and octd's checks that need no geometry
 * (daemon/checks.c: control values before a ring, the profile's data files).
 * The daemon and octgrab sources are not in liboct.a, so they are compiled
 * in here. */
/* first: jsonhdr.c has a function named like Check's fail() macro */
#include "../daemon/json.c"
#include "../tools/octgrab/jsonhdr.c"
#include "../daemon/checks.c"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oct_control_keys.h"

static bool same_values(const oct_control_values *a, const oct_control_values *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* Random values that every key can express (products: the known bits). */
static void random_values(oct_control_values *v, unsigned *seed)
{
    memset(v, 0, sizeof *v);
    v->methods = 1 + (uint32_t)(rand_r(seed) % 7);
    v->window = (uint32_t)(rand_r(seed) % 6);
    v->freq_cutoff = rand_r(seed) % 100;
    v->msi_lag_lo = -(rand_r(seed) % 50);
    v->msi_lag_hi = rand_r(seed) % 50;
    v->scale = (uint32_t)(rand_r(seed) % 2);
    v->background = (uint32_t)(rand_r(seed) % 5);
    /* ABI 1.1 */
    v->background_param = rand_r(seed) % 70000 - 100;
    v->klin = (uint32_t)(rand_r(seed) % 4);
    v->klin_taps = rand_r(seed) % 80 - 5;
    v->klin_source = (uint32_t)(rand_r(seed) % 2);
    for (int i = 0; i < 4; i++) {
        /* any finite double: get prints %.17g, which must set the same bits */
        uint64_t bits;
        do {
            bits = (uint64_t)rand_r(seed) ^ ((uint64_t)rand_r(seed) << 21) ^
                   ((uint64_t)rand_r(seed) << 42) ^ ((uint64_t)(rand_r(seed) & 3) << 62);
            memcpy(&v->klin_coef[i], &bits, sizeof bits);
        } while (!isfinite(v->klin_coef[i]));
    }
    v->enface_start = rand_r(seed) % 500;
    v->enface_step = 1 + rand_r(seed) % 20;
    v->enface_count = 1 + rand_r(seed) % 40;
    v->xsec_h_index = rand_r(seed) % 1000;
    v->xsec_v_index = rand_r(seed) % 1000;
    float *f[13] = {&v->window_param, [10] = &v->disp_a2, [11] = &v->disp_a3, [12] = &v->disp_k0};
    for (int c = 0; c < 3; c++) {
        f[1 + c] = &v->gsc[c];
        f[4 + c] = &v->contrast[c];
        f[7 + c] = &v->brightness[c];
    }
    for (int i = 0; i < 13; i++) {
        /* any finite float, subnormals and extremes included */
        uint32_t bits;
        do {
            bits = (uint32_t)rand_r(seed) ^ ((uint32_t)rand_r(seed) << 16);
            if (rand_r(seed) % 4 == 0)
                bits &= 0x807fffffu; /* subnormal (or zero) */
            memcpy(f[i], &bits, sizeof bits);
        } while (!isfinite(*f[i]));
    }
    do
        v->products = (uint32_t)(rand_r(seed) & 0x3f) | (rand_r(seed) % 2 ? OCT_PRODUCT_F32 : 0);
    while (!(v->products & 0x3f));
}

START_TEST(keys_get_set_round_trip)
{
    unsigned seed = 12345;
    for (int it = 0; it < 2000; it++) {
        oct_control_values v, w;
        random_values(&v, &seed);
        char all[4096];
        size_t n = oct_control_format_all(&v, all, sizeof all);
        ck_assert_uint_lt(n, sizeof all);
        memset(&w, 0, sizeof w);
        char *save = NULL;
        int lines = 0;
        for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            oct_error e;
            ck_assert_msg(oct_control_assign(&w, line, &e) == OCT_OK, "'%s' refused: %s", line, e.msg);
            lines++;
        }
        ck_assert_int_eq(lines, (int)oct_control_key_count());
        ck_assert_msg(same_values(&v, &w), "get output does not set the same values back (it %d)", it);
    }
}
END_TEST

START_TEST(keys_subnormal_and_range)
{
    oct_control_values v;
    memset(&v, 0, sizeof v);
    oct_error e;
    /* subnormals are numbers `get` can print: they must be accepted */
    ck_assert_int_eq(oct_control_key_set(&v, "window.param", "1e-45", &e), OCT_OK);
    ck_assert(v.window_param > 0 && fpclassify(v.window_param) == FP_SUBNORMAL);
    ck_assert_int_eq(oct_control_key_set(&v, "display.bscan.brightness", "-5.60519386e-45", &e), OCT_OK);
    ck_assert(v.brightness[0] < 0);
    ck_assert_int_eq(oct_control_key_set(&v, "display.enface.gsc", "0x1p-149", &e), OCT_OK);
    ck_assert_int_eq(oct_control_key_set(&v, "display.enface.gsc", "0", &e), OCT_OK);
    ck_assert(v.gsc[1] == 0.0f);
    ck_assert_int_eq(oct_control_key_set(&v, "display.enface.gsc", "-0.0e-400", &e), OCT_OK);
    ck_assert_int_eq(oct_control_key_set(&v, "display.enface.gsc", "3.4028234e38", &e), OCT_OK);
    /* overflow, underflow to zero from a non-zero literal, non-finite */
    static const char *const bad[] = {"1e39", "-1e39", "1e-50", "-2e-46", "nan", "inf", "-inf",
                                      "0x1p-160", "", "1.5x", "1,5", "--1", "0x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v.gsc[0] = 7.0f;
        e.msg[0] = '\0';
        ck_assert_msg(oct_control_key_set(&v, "display.bscan.gsc", bad[i], &e) == OCT_EINVAL,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(e.msg, "display.bscan.gsc") != NULL, "message '%s' names no key", e.msg);
        ck_assert(v.gsc[0] == 7.0f);
    }
}
END_TEST

START_TEST(keys_operator_examples)
{
    oct_control_values v;
    memset(&v, 0, sizeof v);
    oct_error e;
    const char *set[] = {"enface.start=40", "display.enface.gsc=0.5", "lag_window=-8,8",
                         "window=tukey:0.5", " methods = cfd,msi ", "products=bscan,xsec_v,f32",
                         "background=frame_mean", "scale=log", "xsec.v_index=12"};
    for (size_t i = 0; i < sizeof set / sizeof *set; i++)
        ck_assert_msg(oct_control_assign(&v, set[i], &e) == OCT_OK, "%s: %s", set[i], e.msg);
    ck_assert_int_eq(v.enface_start, 40);
    ck_assert(v.gsc[1] == 0.5f);
    ck_assert_int_eq(v.msi_lag_lo, -8);
    ck_assert_int_eq(v.msi_lag_hi, 8);
    ck_assert_uint_eq(v.window, OCT_WINDOW_TUKEY);
    ck_assert(v.window_param == 0.5f);
    ck_assert_uint_eq(v.methods, 3);
    ck_assert_uint_eq(v.products, OCT_PRODUCT_BIT(OCT_KIND_BSCAN) |
                                      OCT_PRODUCT_BIT(OCT_KIND_XSEC_V) | OCT_PRODUCT_F32);
    ck_assert_uint_eq(v.background, OCT_BG_FRAME_MEAN);
    ck_assert_uint_eq(v.scale, OCT_SCALE_LOG);
    ck_assert_int_eq(v.xsec_v_index, 12);
    char buf[64];
    ck_assert_int_eq(oct_control_key_get(&v, "lag_window", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "-8,8");
    ck_assert_int_eq(oct_control_key_get(&v, "window", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "tukey:0.5");
    /* refusals leave the values alone and name the key */
    oct_control_values before = v;
    const char *bad[] = {"nosuch=1", "enface.start=4x", "enface.start=99999999999", "lag_window=1",
                         "lag_window=1,2,3", "window=kaiser", "methods=cfd,xyz", "scale=", "enface.start", "=3", "display.bscan.gamma=1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e.msg[0] = '\0';
        ck_assert_msg(oct_control_assign(&v, bad[i], &e) != OCT_OK, "'%s' accepted", bad[i]);
        ck_assert_msg(e.msg[0] != '\0', "'%s': no message", bad[i]);
        ck_assert_msg(same_values(&v, &before), "'%s' changed values", bad[i]);
    }
}
END_TEST

/* ABI 1.1 names: methods cms, background rolling/fpn with a parameter,
 * k-linearisation and dispersion, and the flat aliases of the brief. */
START_TEST(keys_abi_1_1)
{
    oct_control_values v;
    memset(&v, 0, sizeof v);
    oct_error e;
    const char *set[] = {"methods=cfd,cms", "background=rolling:8", "klin.interp=sinc",
                         "klin.taps=31", "klin.source=file", "klin.coefs=[0.5, 1024, -3e1, 2.25]",
                         "dispersion.a2=-12.5", "dispersion.a3=3", "dispersion.k0=0.25"};
    for (size_t i = 0; i < sizeof set / sizeof *set; i++)
        ck_assert_msg(oct_control_assign(&v, set[i], &e) == OCT_OK, "%s: %s", set[i], e.msg);
    ck_assert_uint_eq(v.methods, OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_CMS));
    ck_assert_uint_eq(v.background, OCT_BG_ROLLING);
    ck_assert_int_eq(v.background_param, 8);
    ck_assert_uint_eq(v.klin, OCT_KLIN_SINC);
    ck_assert_int_eq(v.klin_taps, 31);
    ck_assert_uint_eq(v.klin_source, OCT_KLIN_FILE);
    ck_assert(v.klin_coef[0] == 0.5 && v.klin_coef[1] == 1024 && v.klin_coef[2] == -30 &&
              v.klin_coef[3] == 2.25);
    ck_assert(v.disp_a2 == -12.5f && v.disp_a3 == 3.0f && v.disp_k0 == 0.25f);
    char buf[160];
    ck_assert_int_eq(oct_control_key_get(&v, "background", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "rolling:8");
    ck_assert_int_eq(oct_control_key_get(&v, "methods", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "cfd,cms");
    ck_assert_int_eq(oct_control_key_get(&v, "klin.coefs", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "0.5,1024,-30,2.25");
    ck_assert_int_eq(oct_control_key_get(&v, "klin.interp", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "sinc");
    ck_assert_int_eq(oct_control_key_get(&v, "klin.source", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "file");
    /* the flat aliases (set only) */
    const char *alias[] = {"background_param=50", "background=fpn", "klin=cubic", "klin_taps=11",
                           "klin_source=poly", "klin_c1=2048", "klin.c3=-1", "disp_a2=1",
                           "disp_a3=-2", "disp_k0=0.5", "background.segment=64"};
    for (size_t i = 0; i < sizeof alias / sizeof *alias; i++)
        ck_assert_msg(oct_control_assign(&v, alias[i], &e) == OCT_OK, "%s: %s", alias[i], e.msg);
    ck_assert_uint_eq(v.background, OCT_BG_FPN);
    ck_assert_int_eq(v.background_param, 64);
    ck_assert_uint_eq(v.klin, OCT_KLIN_CUBIC);
    ck_assert_int_eq(v.klin_taps, 11);
    ck_assert_uint_eq(v.klin_source, OCT_KLIN_POLY);
    ck_assert(v.klin_coef[0] == 0.5 && v.klin_coef[1] == 2048 && v.klin_coef[3] == -1);
    ck_assert(v.disp_a2 == 1.0f && v.disp_a3 == -2.0f && v.disp_k0 == 0.5f);
    ck_assert_int_eq(oct_control_key_get(&v, "background", buf, sizeof buf, &e), OCT_OK);
    ck_assert_str_eq(buf, "fpn:64");
    /* get lists the profile-style names, not the aliases */
    char all[4096];
    oct_control_format_all(&v, all, sizeof all);
    ck_assert(strstr(all, "\nklin=cubic\n") && strstr(all, "\ndispersion.a2=1\n") &&
              strstr(all, "\nbackground.param=64\n") && !strstr(all, "disp_a2"));
    ck_assert_int_eq(oct_control_key_abi_minor("klin_c2"), 1);
    ck_assert_int_eq(oct_control_key_abi_minor("dispersion.k0"), 1);
    ck_assert_int_eq(oct_control_key_abi_minor("window"), 0);
    ck_assert_int_eq(oct_control_key_abi_minor("nosuch"), -1);
    /* refusals: values unchanged, the key named */
    oct_control_values before = v;
    const char *bad[] = {"klin.interp=quintic", "klin.source=table", "klin.coefs=1,2,3",
                         "klin.coefs=1,2,3,4,5", "klin.coefs=1,2,nan,4", "klin.coefs=1,,3,4",
                         "klin.coefs=1,2,3,1e400", "klin_c4=1", "klin.taps=2.5",
                         "dispersion.a2=inf", "dispersion.k0=x", "background=rolling:x",
                         "background=median:3", "background.param=", "methods=cms,oct",
                         "disp_a3=1e39"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e.msg[0] = '\0';
        ck_assert_msg(oct_control_assign(&v, bad[i], &e) == OCT_EINVAL, "'%s' accepted", bad[i]);
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(bad[i], '=') - bad[i]), bad[i]);
        if (strcmp(key, "background") != 0) /* background=rolling:x names background.param */
            ck_assert_msg(strstr(e.msg, key) != NULL, "'%s': message '%s' names no key", bad[i],
                          e.msg);
        ck_assert_msg(same_values(&v, &before), "'%s' changed values", bad[i]);
    }
}
END_TEST

START_TEST(params_control_conversion)
{
    unsigned seed = 99;
    for (int it = 0; it < 200; it++) {
        oct_control_values v, w;
        random_values(&v, &seed);
        v.command_seq = 77;
        v.command = 3;
        oct_params p;
        oct_params_from_control(&p, &v);
        ck_assert_int_eq(p.lag_lo, v.msi_lag_lo);
        ck_assert_int_eq(p.xsec_v, v.xsec_v_index);
        ck_assert_int_eq(p.background_param, v.background_param);
        ck_assert_uint_eq(p.klin, v.klin);
        ck_assert(p.klin_coef[3] == v.klin_coef[3] && p.disp_k0 == v.disp_k0);
        w = v;
        w.msi_lag_lo = 1234; /* overwritten */
        oct_control_from_params(&w, &p);
        ck_assert(same_values(&v, &w)); /* command fields untouched, the rest equal */
    }
}
END_TEST

/* octd's writer -> octgrab's parser: strings with every escape survive. */
START_TEST(json_header_round_trip)
{
    char topic[128], buf[1024];
    unsigned seed = 7;
    for (int it = 0; it < 300; it++) {
        size_t n = 1 + (size_t)(rand_r(&seed) % 60);
        for (size_t i = 0; i < n; i++) {
            int c = 1 + rand_r(&seed) % 126; /* any ASCII but NUL: quotes, \, controls */
            topic[i] = (char)c;
        }
        topic[n] = '\0';
        octd_json j;
        octd_json_begin(&j, buf, sizeof buf);
        octd_json_str(&j, "htype", "octd-image-1");
        octd_json_str(&j, "topic", topic);
        octd_json_u64(&j, "image_seq", UINT64_MAX - (uint64_t)it);
        octd_json_u64(&j, "t_acq_ns", 1700000000000000000ull);
        uint32_t shape[3] = {4, 5, 6};
        octd_json_u32_array(&j, "shape", shape, 3);
        int32_t idx[2] = {-1, 2147483647};
        octd_json_i32_array(&j, "indices", idx, 2);
        octd_json_f64(&j, "nan", NAN);
        octd_json_str(&j, "dtype", "u8");
        size_t len = octd_json_end(&j);
        ck_assert_uint_gt(len, 0);
        ck_assert_uint_eq(len, strlen(buf));
        grab_header h;
        char err[128];
        ck_assert_msg(grab_header_parse(buf, len, &h, err, sizeof err), "%s: %s", err, buf);
        ck_assert_str_eq(h.topic, topic);
        ck_assert_str_eq(h.htype, "octd-image-1");
        ck_assert(h.has_image_seq && h.image_seq == UINT64_MAX - (uint64_t)it);
        ck_assert(h.has_shape && h.ndim == 3 && h.shape[2] == 6);
        /* every strict prefix is malformed, never a crash */
        for (size_t cut = 0; cut < len; cut += 1 + cut / 8)
            ck_assert(!grab_header_parse(buf, cut, &h, err, sizeof err));
    }
    /* a buffer too small: 0, not a cut object */
    octd_json j;
    char small[16];
    octd_json_begin(&j, small, sizeof small);
    octd_json_str(&j, "topic", "a rather long topic name");
    ck_assert_uint_eq(octd_json_end(&j), 0);
}
END_TEST

START_TEST(json_parser_garbage)
{
    unsigned seed = 4242;
    char buf[512], err[128];
    grab_header h;
    const char *alphabet = "{}[]\":,0123456789-+eE.truefalsnl \\u\t\n";
    size_t an = strlen(alphabet);
    for (int it = 0; it < 20000; it++) {
        size_t n = (size_t)(rand_r(&seed) % sizeof buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = it % 2 ? (char)rand_r(&seed) : alphabet[(size_t)rand_r(&seed) % an];
        (void)grab_header_parse(buf, n, &h, err, sizeof err); /* must not crash (ASan) */
    }
    const char *bad[] = {"", "{", "{\"shape\":[1,2,3,4]}", "{\"image_seq\":-1}",
                         "{\"image_seq\":18446744073709551616}", "{\"topic\":\"\\ud800\"}x",
                         "{\"a\":1,}", "[1]", "{\"topic\":\"a\" \"b\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!grab_header_parse(bad[i], strlen(bad[i]), &h, err, sizeof err),
                      "'%s' accepted", bad[i]);
}
END_TEST

/* ---- daemon/checks.c ---- */
static void profile_named(oct_profile *prof, bool arrays)
{
    memset(prof, 0, sizeof *prof);
    snprintf(prof->source_path, sizeof prof->source_path, "p.yaml");
    oct_params_default(&prof->params);
    if (arrays) { /* every array named: MSI, reference, klin file and CMS allowed */
        snprintf(prof->masks_path, sizeof prof->masks_path, "masks.npy");
        snprintf(prof->reference_path, sizeof prof->reference_path, "ref.npy");
        snprintf(prof->klin_path, sizeof prof->klin_path, "klin.npy");
        snprintf(prof->cms_path, sizeof prof->cms_path, "cms.npy");
        prof->cms_count = 64;
        prof->cms_cal_count = 4;
    }
}

static oct_err nogeom(const oct_params *p, const oct_profile *prof, char *msg, size_t len)
{
    oct_error e;
    memset(&e, 0, sizeof e);
    oct_err rc = octd_params_check_nogeom(p, prof, &e);
    snprintf(msg, len, "%s", rc ? e.msg : "");
    return rc;
}

START_TEST(nogeom_params_cases)
{
    oct_profile prof;
    profile_named(&prof, false);
    oct_params p;
    char m[512];
    oct_params_default(&p);
    ck_assert_int_eq(nogeom(&p, &prof, m, sizeof m), OCT_OK);
    static const struct { const char *what, *reason; } cases[] = {
        /* the engine's messages name the operator keys (SPEC 10.1) */
        {"lag order", "lag_lo = 2 > lag_hi = -2"},       {"lag bound", "lag_lo = -5000"},
        {"F < 0", "freq_cutoff = -5"},               {"F too big", "freq_cutoff = 5000"},
        {"tukey", "window: tukey parameter 2"},      {"msi", "msi needs masks"},
        {"cms", "cms needs a calibration"},          {"reference", "no reference spectrum"},
        {"gsc nan", "display.bscan.gsc: nan"},        {"xsec", "xsec_h = -1"},
        {"klin file", "klin_source = 1 (file)"},      {"window enum", "window: 9"},
        {"enface", "enface.step: 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        oct_params_default(&p);
        switch (i) {
        case 0: p.lag_lo = 2; p.lag_hi = -2; break;
        case 1: p.lag_lo = -5000; break;
        case 2: p.freq_cutoff = -5; break;
        case 3: p.freq_cutoff = 5000; break;
        case 4: p.window = OCT_WINDOW_TUKEY; p.window_param = 2; break;
        case 5: p.methods |= OCT_METHOD_BIT(OCT_METHOD_MSI); break;
        case 6: p.methods |= OCT_METHOD_BIT(OCT_METHOD_CMS); break;
        case 7: p.background = OCT_BG_REFERENCE; break;
        case 8: p.gsc[0] = NAN; break;
        case 9: p.xsec_h = -1; break;
        case 10: p.klin = OCT_KLIN_LINEAR; p.klin_source = OCT_KLIN_FILE; break;
        case 11: p.window = 9; break;
        case 12: p.enface_step = 0; break;
        }
        ck_assert_msg(nogeom(&p, &prof, m, sizeof m) != OCT_OK, "%s accepted", cases[i].what);
        ck_assert_msg(strstr(m, cases[i].reason), "%s: reason '%s'", cases[i].what, m);
    }
    /* what the engine accepts for some geometry is accepted */
    oct_params_default(&p);
    p.gsc[0] = 1e-30f; /* the engine only wants gsc finite and > 0 */
    p.lag_lo = -4095;
    p.lag_hi = 4095;
    p.freq_cutoff = 4096;
    p.xsec_h = p.xsec_v = 100000;
    ck_assert_msg(nogeom(&p, &prof, m, sizeof m) == OCT_OK, "%s", m);
    /* arrays the profile names count as loaded */
    profile_named(&prof, true);
    p.methods = OCT_METHODS_ALL;
    p.background = OCT_BG_REFERENCE;
    p.klin = OCT_KLIN_LINEAR;
    p.klin_source = OCT_KLIN_FILE;
    ck_assert_msg(nogeom(&p, &prof, m, sizeof m) == OCT_OK, "%s", m);
}
END_TEST

/* Random generations: without geometry octd accepts exactly what the engine
 * accepts for the largest geometry (the indices used stay below it), and
 * never rejects what the engine accepts for a small one. */
START_TEST(nogeom_params_mirror_engine)
{
    oct_profile prof;
    profile_named(&prof, true);
    const oct_geometry big = {OCT_SAMPLES_MAX, 1000, 1000, OCT_SAMPLE_U16, 0};
    const oct_geometry small = {256, 32, 4, OCT_SAMPLE_U16, 0};
    ck_assert_int_eq(oct_geometry_check(&big, NULL), OCT_OK);
    unsigned seed = 99;
    int accepted = 0, rejected = 0;
    char m[512];
    for (int it = 0; it < 20000; it++) {
        oct_control_values v;
        random_values(&v, &seed);
        for (int c = 0; c < 3; c++) /* mostly positive gsc (<= 0 is rejected) */
            if (rand_r(&seed) % 8)
                v.gsc[c] = fabsf(v.gsc[c]);
        switch (rand_r(&seed) % 8) { /* and some out of range */
        case 0: v.freq_cutoff -= 60; break;
        case 1: { int32_t t = v.msi_lag_lo; v.msi_lag_lo = v.msi_lag_hi + 1; v.msi_lag_hi = t; break; }
        case 2: v.xsec_h_index = -1 - rand_r(&seed) % 5; break;
        case 3: v.methods = (uint32_t)(rand_r(&seed) % 16); break;
        case 4: v.msi_lag_lo = -4200 + rand_r(&seed) % 200; break;
        default: break;
        }
        oct_params p;
        oct_params_from_control(&p, &v);
        oct_error e;
        bool eng_big = oct_params_validate(&p, &big, 1, true, &e) == OCT_OK;
        bool eng_small = oct_params_validate(&p, &small, 1, true, &e) == OCT_OK;
        bool ours = nogeom(&p, &prof, m, sizeof m) == OCT_OK;
        ck_assert_msg(ours == eng_big, "iteration %d: nogeom %s (%s), engine (M = %u) %s", it,
                      ours ? "accepts" : "rejects", m, big.samples, eng_big ? "accepts" : "rejects");
        ck_assert_msg(!eng_small || ours, "iteration %d: the engine accepts for M = 256, nogeom: %s",
                      it, m);
        ours ? accepted++ : rejected++;
    }
    ck_assert_int_gt(accepted, 1000);
    ck_assert_int_gt(rejected, 1000);
}
END_TEST

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

START_TEST(profile_files_checked_without_geometry)
{
    char dir[] = "/tmp/octd-test-checks.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    oct_profile prof;
    profile_named(&prof, false);
    oct_error e;
    ck_assert_int_eq(octd_profile_files_check(&prof, &e), OCT_OK); /* no file named */
    prof.params.methods |= OCT_METHOD_BIT(OCT_METHOD_MSI);
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK); /* msi, no masks named */
    ck_assert_ptr_nonnull(strstr(e.msg, "msi.masks.file: required"));
    snprintf(prof.masks_path, sizeof prof.masks_path, "%s/masks.npy", dir);
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK); /* missing */
    ck_assert_msg(strstr(e.msg, "p.yaml:1: msi.masks.file: ") && strstr(e.msg, "masks.npy"), "%s", e.msg);
    write_file(prof.masks_path, "garbage", 7);
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK); /* unparsable */
    ck_assert_msg(strstr(e.msg, "msi.masks.file"), "%s", e.msg);
    float data[4 * 64 + 1] = {0}; /* + 1: room for the odd-sized raw file */
    uint64_t shape[2] = {4, 64};
    ck_assert_int_eq(oct_npy_save(prof.masks_path, OCT_DTYPE_F32, 2, shape, data, &e), OCT_OK);
    ck_assert_msg(octd_profile_files_check(&prof, &e) == OCT_OK, "%s", e.msg);
    prof.masks_count = 5; /* declared rows differ */
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK);
    ck_assert_msg(strstr(e.msg, "holds 4 spectra but 5 are declared"), "%s", e.msg);
    /* raw: a whole number of elements (of declared rows) */
    prof.masks_count = 4;
    snprintf(prof.masks_path, sizeof prof.masks_path, "%s/masks.raw", dir);
    write_file(prof.masks_path, data, 4 * 64 * 4 + 2);
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK);
    ck_assert_msg(strstr(e.msg, "masks.raw: raw file of 1026 bytes"), "%s", e.msg);
    write_file(prof.masks_path, data, 4 * 64 * 4);
    ck_assert_msg(octd_profile_files_check(&prof, &e) == OCT_OK, "%s", e.msg);
    /* the other keys */
    snprintf(prof.reference_path, sizeof prof.reference_path, "%s/none.npy", dir);
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK);
    ck_assert_msg(strstr(e.msg, "background.reference: "), "%s", e.msg);
    prof.reference_path[0] = '\0';
    snprintf(prof.klin_path, sizeof prof.klin_path, "%s", dir); /* a directory */
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK);
    ck_assert_msg(strstr(e.msg, "klin.positions: ") && strstr(e.msg, "not a regular file"), "%s", e.msg);
    prof.klin_path[0] = '\0';
    snprintf(prof.cms_path, sizeof prof.cms_path, "%s/cms.raw", dir);
    write_file(prof.cms_path, data, 0);
    ck_assert_int_ne(octd_profile_files_check(&prof, &e), OCT_OK);
    ck_assert_msg(strstr(e.msg, "cms.calibration: ") && strstr(e.msg, "empty"), "%s", e.msg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* octd.ini [ring] zero_copy (issue 13.4: it was the OCTD_ZERO_COPY env). */
START_TEST(ini_zero_copy)
{
    static const struct { const char *v; int want; } ok[] = {
        {"auto", OCT_ZERO_COPY_AUTO}, {"on", OCT_ZERO_COPY_ON}, {"OFF", OCT_ZERO_COPY_OFF}};
    oct_daemon_config c;
    oct_error e;
    char text[256];
    oct_daemon_config_default(&c);
    ck_assert_int_eq(c.zero_copy, OCT_ZERO_COPY_AUTO);
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(text, sizeof text, "[ring]\npolicy = all\nzero_copy = %s\n[profile]\npath = p.yaml\n",
                 ok[i].v);
        ck_assert_msg(oct_daemon_config_parse(&c, text, strlen(text), "t.ini", &e) == OCT_OK, "%s",
                      e.msg);
        ck_assert_int_eq(c.zero_copy, ok[i].want);
    }
    snprintf(text, sizeof text, "[ring]\nzero_copy = 1\n");
    ck_assert_int_ne(oct_daemon_config_parse(&c, text, strlen(text), "t.ini", &e), OCT_OK);
    ck_assert_msg(strstr(e.msg, "t.ini:2") && strstr(e.msg, "[ring] zero_copy: '1' is not auto, on or off"),
                  "%s", e.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon");
    TCase *tc = tcase_create("keys");
    tcase_add_test(tc, keys_get_set_round_trip);
    tcase_add_test(tc, keys_subnormal_and_range);
    tcase_add_test(tc, keys_operator_examples);
    tcase_add_test(tc, keys_abi_1_1);
    tcase_add_test(tc, params_control_conversion);
    tcase_add_test(tc, ini_zero_copy);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, json_header_round_trip);
    tcase_add_test(tc, json_parser_garbage);
    suite_add_tcase(s, tc);
    tc = tcase_create("checks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, nogeom_params_cases);
    tcase_add_test(tc, nogeom_params_mirror_engine);
    tcase_add_test(tc, profile_files_checked_without_geometry);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
