/* control_keys.c - operator names of the control values (see oct_control_keys.h). */
#include "oct_control_keys.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Name tables indexed by the control block's numbers (SPEC 3.2).  Kept here
 * rather than taken from the engine so that parsing has both directions. */
static const char *const method_names[] = {"cfd", "msi", "cms"};
static const char *const window_names[] = {"rect", "hann", "hamming", "blackman", "gaussian", "tukey"};
static const char *const scale_names[] = {"linear", "log"};
static const char *const background_names[] = {"none", "reference", "frame_mean", "rolling", "fpn"};
static const char *const klin_names[] = {"off", "linear", "cubic", "sinc"};
static const char *const klin_source_names[] = {"poly", "file"};
static const char *const kind_names[] = {"bscan", "enface", "confocal", "xsec_h", "xsec_v", "volume",
                                         "slab_mean", "slab_max"};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

enum key_type {
    K_METHODS, K_WINDOW, K_WINDOW_PARAM, K_FREQ_CUTOFF, K_LAG_WINDOW, K_SCALE, K_BACKGROUND,
    K_ENFACE_START, K_ENFACE_STEP, K_ENFACE_COUNT, K_XSEC_H, K_XSEC_V,
    K_GSC, K_CONTRAST, K_BRIGHTNESS, K_PRODUCTS,
    /* ABI 1.1 */
    K_BACKGROUND_PARAM, K_KLIN, K_KLIN_TAPS, K_KLIN_SOURCE, K_KLIN_COEFS, K_KLIN_COEF,
    K_DISP_A2, K_DISP_A3, K_DISP_K0
};

typedef struct key_def {
    const char *name;
    enum key_type type;
    int cls; /* display class for K_GSC/K_CONTRAST/K_BRIGHTNESS; coefficient of K_KLIN_COEF */
} key_def;

static const key_def keys[] = {
    {"methods", K_METHODS, 0},
    {"window", K_WINDOW, 0},
    {"window.param", K_WINDOW_PARAM, 0},
    {"freq_cutoff", K_FREQ_CUTOFF, 0},
    {"lag_window", K_LAG_WINDOW, 0},
    {"scale", K_SCALE, 0},
    {"background", K_BACKGROUND, 0},
    {"enface.start", K_ENFACE_START, 0},
    {"enface.step", K_ENFACE_STEP, 0},
    {"enface.count", K_ENFACE_COUNT, 0},
    {"xsec.h_index", K_XSEC_H, 0},
    {"xsec.v_index", K_XSEC_V, 0},
    {"display.bscan.gsc", K_GSC, 0},
    {"display.bscan.contrast", K_CONTRAST, 0},
    {"display.bscan.brightness", K_BRIGHTNESS, 0},
    {"display.enface.gsc", K_GSC, 1},
    {"display.enface.contrast", K_CONTRAST, 1},
    {"display.enface.brightness", K_BRIGHTNESS, 1},
    {"display.confocal.gsc", K_GSC, 2},
    {"display.confocal.contrast", K_CONTRAST, 2},
    {"display.confocal.brightness", K_BRIGHTNESS, 2},
    {"products", K_PRODUCTS, 0},
    /* ABI 1.1: the profile's background.frames/segment, klin and dispersion */
    {"background.param", K_BACKGROUND_PARAM, 0},
    {"klin.interp", K_KLIN, 0},
    {"klin.taps", K_KLIN_TAPS, 0},
    {"klin.source", K_KLIN_SOURCE, 0},
    {"klin.coefs", K_KLIN_COEFS, 0},
    {"dispersion.a2", K_DISP_A2, 0},
    {"dispersion.a3", K_DISP_A3, 0},
    {"dispersion.k0", K_DISP_K0, 0},
};

/* Other names `set` accepts (not listed by `get`): the flat names of the
 * ABI 1.1 fields, one coefficient at a time, and the profile's sub-keys. */
static const key_def aliases[] = {
    {"background_param", K_BACKGROUND_PARAM, 0},
    {"background.frames", K_BACKGROUND_PARAM, 0},
    {"background.segment", K_BACKGROUND_PARAM, 0},
    {"klin", K_KLIN, 0},
    {"klin_taps", K_KLIN_TAPS, 0},
    {"klin_source", K_KLIN_SOURCE, 0},
    {"klin_coefs", K_KLIN_COEFS, 0},
    {"klin_c0", K_KLIN_COEF, 0},
    {"klin_c1", K_KLIN_COEF, 1},
    {"klin_c2", K_KLIN_COEF, 2},
    {"klin_c3", K_KLIN_COEF, 3},
    {"klin.c0", K_KLIN_COEF, 0},
    {"klin.c1", K_KLIN_COEF, 1},
    {"klin.c2", K_KLIN_COEF, 2},
    {"klin.c3", K_KLIN_COEF, 3},
    {"disp_a2", K_DISP_A2, 0},
    {"disp_a3", K_DISP_A3, 0},
    {"disp_k0", K_DISP_K0, 0},
};

size_t oct_control_key_count(void) { return NELEM(keys); }

const char *oct_control_key_name(size_t i) { return i < NELEM(keys) ? keys[i].name : NULL; }

static const key_def *find_key(const char *name)
{
    for (size_t i = 0; i < NELEM(keys); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    for (size_t i = 0; i < NELEM(aliases); i++)
        if (strcmp(aliases[i].name, name) == 0)
            return &aliases[i];
    return NULL;
}

int oct_control_key_abi_minor(const char *key)
{
    const key_def *k = key ? find_key(key) : NULL;
    if (!k)
        return -1;
    return k->type >= K_BACKGROUND_PARAM ? 1 : 0;
}

static int find_name(const char *const *names, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(names[i], s, len) == 0)
            return (int)i;
    return -1;
}

static bool only_space(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return *s == '\0';
}

/* Whole-string integer in int32 range. */
static oct_err parse_i32(const char *key, const char *s, int32_t *out, oct_error *e)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || !only_space(end))
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not an integer", key, s);
    if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
        return oct_error_set(e, OCT_EINVAL, "%s: %s is out of the 32-bit range", key, s);
    *out = (int32_t)v;
    return OCT_OK;
}

/* Whole-string finite float. */
/* Whether the literal s (already known to parse) denotes zero itself,
 * e.g. "0", "-0.0", "0e-999", "0x0p+0": no digit 1-9 before the exponent. */
static bool literal_zero(const char *s)
{
    while (isspace((unsigned char)*s) || *s == '+' || *s == '-')
        s++;
    bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex)
        s += 2;
    for (; *s; s++) {
        int c = (unsigned char)*s;
        if (hex ? (c == 'p' || c == 'P') : (c == 'e' || c == 'E'))
            break;
        if (hex ? isxdigit(c) && c != '0' : c >= '1' && c <= '9')
            return false;
    }
    return true;
}

static oct_err parse_f32(const char *key, const char *s, float *out, oct_error *e)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || !only_space(end))
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a number", key, s);
    /* glibc sets ERANGE for subnormal results too, and `get` prints such
     * values: refuse only overflow (inf) and underflow to zero. */
    if (!isfinite(v) || (errno == ERANGE && (v == 0.0f || isinf(v)) && !literal_zero(s)))
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a finite single-precision number",
                             key, s);
    *out = v;
    return OCT_OK;
}

static oct_err parse_f64(const char *key, const char *s, double *out, oct_error *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || !only_space(end))
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a number", key, s);
    if (!isfinite(v) || (errno == ERANGE && (v == 0.0 || isinf(v)) && !literal_zero(s)))
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a finite number", key, s);
    *out = v;
    return OCT_OK;
}

/* Trims blanks at both ends of [*s, *s+*len). */
static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

/* "name" or "name:param": the name into `name` (cap bytes); *param is the
 * text after the colon, or NULL. */
static oct_err split_param(const char *key, const char *value, char *name, size_t cap,
                           const char **param, oct_error *e)
{
    const char *colon = strchr(value, ':');
    size_t len = colon ? (size_t)(colon - value) : strlen(value);
    if (len >= cap)
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is too long", key, value);
    memcpy(name, value, len);
    name[len] = '\0';
    *param = colon ? colon + 1 : NULL;
    return OCT_OK;
}

/* A list value without its white space and brackets (tolerated, as in the
 * profile: [-10, 10]) into buf (cap bytes). */
static oct_err unbracket(const char *key, const char *value, char *buf, size_t cap, oct_error *e)
{
    size_t len = strlen(value);
    const char *s = value;
    trim(&s, &len);
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
    }
    if (len >= cap)
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is too long", key, value);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return OCT_OK;
}

static oct_err parse_enum(const char *key, const char *const *names, size_t n, const char *s,
                          uint32_t *out, oct_error *e)
{
    size_t len = strlen(s);
    trim(&s, &len);
    int i = find_name(names, n, s, len);
    if (i < 0) {
        char allowed[160] = "";
        for (size_t k = 0; k < n; k++) {
            strncat(allowed, names[k], sizeof allowed - strlen(allowed) - 1);
            if (k + 1 < n)
                strncat(allowed, "|", sizeof allowed - strlen(allowed) - 1);
        }
        return oct_error_set(e, OCT_EINVAL, "%s: unknown value '%.*s' (allowed: %s)", key,
                             (int)len, s, allowed);
    }
    *out = (uint32_t)i;
    return OCT_OK;
}

/* Comma-separated list of names into a bit set; `extra`/`extra_bit` is one
 * more accepted name (f32 for products). */
static oct_err parse_list(const char *key, const char *const *names, size_t n, const char *extra,
                          uint32_t extra_bit, const char *s, uint32_t *out, oct_error *e)
{
    uint32_t bits = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        trim(&item, &len);
        if (len == 0) {
            if (!comma && p == s && bits == 0)
                break; /* empty list */
            return oct_error_set(e, OCT_EINVAL, "%s: empty item in list '%s'", key, s);
        }
        int i = find_name(names, n, item, len);
        if (i >= 0)
            bits |= 1u << i;
        else if (extra && strlen(extra) == len && strncmp(extra, item, len) == 0)
            bits |= extra_bit;
        else
            return oct_error_set(e, OCT_EINVAL, "%s: unknown name '%.*s' in '%s'", key, (int)len,
                                 item, s);
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = bits;
    return OCT_OK;
}

oct_err oct_control_key_set(oct_control_values *v, const char *key, const char *value,
                            oct_error *e)
{
    if (!key || !value)
        return oct_error_set(e, OCT_EINVAL, "missing key or value");
    const key_def *k = find_key(key);
    if (!k)
        return oct_error_set(e, OCT_EINVAL, "unknown key '%s' (see `octctl get` for the names)",
                             key);
    oct_control_values t = *v; /* only commit on success */
    oct_err rc = OCT_OK;
    switch (k->type) {
    case K_METHODS: {
        uint32_t bits;
        rc = parse_list(key, method_names, NELEM(method_names), NULL, 0, value, &bits, e);
        if (rc == OCT_OK && bits == 0)
            rc = oct_error_set(e, OCT_EINVAL, "%s: at least one of cfd, msi, cms", key);
        t.methods = bits;
        break;
    }
    case K_WINDOW: {
        /* "name" or "name:param" */
        char name[64];
        const char *param;
        if ((rc = split_param(key, value, name, sizeof name, &param, e)) != OCT_OK)
            return rc;
        rc = parse_enum(key, window_names, NELEM(window_names), name, &t.window, e);
        if (rc == OCT_OK && param)
            rc = parse_f32("window.param", param, &t.window_param, e);
        break;
    }
    case K_WINDOW_PARAM: rc = parse_f32(key, value, &t.window_param, e); break;
    case K_FREQ_CUTOFF: rc = parse_i32(key, value, &t.freq_cutoff, e); break;
    case K_LAG_WINDOW: {
        /* "W1,W2" (brackets tolerated) */
        char buf[64];
        if ((rc = unbracket(key, value, buf, sizeof buf, e)) != OCT_OK)
            return rc;
        char *comma = strchr(buf, ',');
        if (!comma)
            return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not W1,W2", key, value);
        *comma = '\0';
        rc = parse_i32(key, buf, &t.msi_lag_lo, e);
        if (rc == OCT_OK)
            rc = parse_i32(key, comma + 1, &t.msi_lag_hi, e);
        break;
    }
    case K_SCALE: rc = parse_enum(key, scale_names, NELEM(scale_names), value, &t.scale, e); break;
    case K_BACKGROUND: {
        /* "mode" or "mode:param" (rolling:K, fpn:G), as window */
        char name[64];
        const char *param;
        if ((rc = split_param(key, value, name, sizeof name, &param, e)) != OCT_OK)
            return rc;
        rc = parse_enum(key, background_names, NELEM(background_names), name, &t.background, e);
        if (rc == OCT_OK && param)
            rc = parse_i32("background.param", param, &t.background_param, e);
        break;
    }
    case K_BACKGROUND_PARAM: rc = parse_i32(key, value, &t.background_param, e); break;
    case K_KLIN: rc = parse_enum(key, klin_names, NELEM(klin_names), value, &t.klin, e); break;
    case K_KLIN_TAPS: rc = parse_i32(key, value, &t.klin_taps, e); break;
    case K_KLIN_SOURCE:
        rc = parse_enum(key, klin_source_names, NELEM(klin_source_names), value, &t.klin_source, e);
        break;
    case K_KLIN_COEFS: {
        /* "c0,c1,c2,c3" (brackets tolerated) */
        char buf[256];
        if ((rc = unbracket(key, value, buf, sizeof buf, e)) != OCT_OK)
            return rc;
        char *item = buf;
        for (int i = 0; i < 4 && rc == OCT_OK; i++) {
            char *comma = strchr(item, ',');
            if ((i < 3) != (comma != NULL))
                return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not c0,c1,c2,c3 (4 numbers)",
                                     key, value);
            if (comma)
                *comma = '\0';
            rc = parse_f64(key, item, &t.klin_coef[i], e);
            item = comma ? comma + 1 : item;
        }
        break;
    }
    case K_KLIN_COEF: rc = parse_f64(key, value, &t.klin_coef[k->cls], e); break;
    case K_DISP_A2: rc = parse_f32(key, value, &t.disp_a2, e); break;
    case K_DISP_A3: rc = parse_f32(key, value, &t.disp_a3, e); break;
    case K_DISP_K0: rc = parse_f32(key, value, &t.disp_k0, e); break;
    case K_ENFACE_START: rc = parse_i32(key, value, &t.enface_start, e); break;
    case K_ENFACE_STEP: rc = parse_i32(key, value, &t.enface_step, e); break;
    case K_ENFACE_COUNT: rc = parse_i32(key, value, &t.enface_count, e); break;
    case K_XSEC_H: rc = parse_i32(key, value, &t.xsec_h_index, e); break;
    case K_XSEC_V: rc = parse_i32(key, value, &t.xsec_v_index, e); break;
    case K_GSC: rc = parse_f32(key, value, &t.gsc[k->cls], e); break;
    case K_CONTRAST: rc = parse_f32(key, value, &t.contrast[k->cls], e); break;
    case K_BRIGHTNESS: rc = parse_f32(key, value, &t.brightness[k->cls], e); break;
    case K_PRODUCTS: {
        uint32_t bits;
        rc = parse_list(key, kind_names, NELEM(kind_names), "f32", OCT_PRODUCT_F32, value, &bits,
                        e);
        t.products = bits;
        break;
    }
    }
    if (rc == OCT_OK)
        *v = t;
    return rc;
}

oct_err oct_control_assign(oct_control_values *v, const char *assignment, oct_error *e)
{
    const char *eq = assignment ? strchr(assignment, '=') : NULL;
    if (!eq)
        return oct_error_set(e, OCT_EINVAL, "'%s' is not KEY=VALUE", assignment ? assignment : "");
    char key[64];
    size_t len = (size_t)(eq - assignment);
    const char *k = assignment;
    trim(&k, &len);
    if (len == 0 || len >= sizeof key)
        return oct_error_set(e, OCT_EINVAL, "'%s': bad key", assignment);
    memcpy(key, k, len);
    key[len] = '\0';
    return oct_control_key_set(v, key, eq + 1, e);
}

/* Appends names of the set bits, comma-separated. */
static void format_bits(char *buf, size_t len, uint32_t bits, const char *const *names, size_t n)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!(bits & (1u << i)))
            continue;
        int w = snprintf(buf + pos, len - pos, "%s%s", pos ? "," : "", names[i]);
        if (w < 0 || (size_t)w >= len - pos)
            return;
        pos += (size_t)w;
    }
    if (bits & OCT_PRODUCT_F32 && names == kind_names)
        snprintf(buf + pos, len - pos, "%sf32", pos ? "," : "");
}

static const char *name_or_number(const char *const *names, size_t n, uint32_t v, char *tmp,
                                  size_t len)
{
    if (v < n)
        return names[v];
    snprintf(tmp, len, "%u", v); /* out-of-range raw value: show it as it is */
    return tmp;
}

oct_err oct_control_key_get(const oct_control_values *v, const char *key, char *buf, size_t len,
                            oct_error *e)
{
    const key_def *k = find_key(key);
    if (!k)
        return oct_error_set(e, OCT_EINVAL, "unknown key '%s'", key);
    if (!buf || len == 0)
        return oct_error_set(e, OCT_EINVAL, "%s: no room for the value", key);
    char tmp[32];
    switch (k->type) {
    case K_METHODS: format_bits(buf, len, v->methods, method_names, NELEM(method_names)); break;
    case K_WINDOW: {
        const char *n = name_or_number(window_names, NELEM(window_names), v->window, tmp,
                                       sizeof tmp);
        if (v->window == OCT_WINDOW_GAUSSIAN || v->window == OCT_WINDOW_TUKEY)
            snprintf(buf, len, "%s:%.9g", n, (double)v->window_param);
        else
            snprintf(buf, len, "%s", n);
        break;
    }
    case K_WINDOW_PARAM: snprintf(buf, len, "%.9g", (double)v->window_param); break;
    case K_FREQ_CUTOFF: snprintf(buf, len, "%d", v->freq_cutoff); break;
    case K_LAG_WINDOW: snprintf(buf, len, "%d,%d", v->msi_lag_lo, v->msi_lag_hi); break;
    case K_SCALE:
        snprintf(buf, len, "%s", name_or_number(scale_names, NELEM(scale_names), v->scale, tmp,
                                                sizeof tmp));
        break;
    case K_BACKGROUND: {
        const char *n = name_or_number(background_names, NELEM(background_names), v->background,
                                       tmp, sizeof tmp);
        if (v->background == OCT_BG_ROLLING || v->background == OCT_BG_FPN)
            snprintf(buf, len, "%s:%d", n, v->background_param);
        else
            snprintf(buf, len, "%s", n);
        break;
    }
    case K_BACKGROUND_PARAM: snprintf(buf, len, "%d", v->background_param); break;
    case K_KLIN:
        snprintf(buf, len, "%s", name_or_number(klin_names, NELEM(klin_names), v->klin, tmp,
                                                sizeof tmp));
        break;
    case K_KLIN_TAPS: snprintf(buf, len, "%d", v->klin_taps); break;
    case K_KLIN_SOURCE:
        snprintf(buf, len, "%s", name_or_number(klin_source_names, NELEM(klin_source_names),
                                                v->klin_source, tmp, sizeof tmp));
        break;
    /* %.17g: a double read back by `set` is the same double */
    case K_KLIN_COEFS:
        snprintf(buf, len, "%.17g,%.17g,%.17g,%.17g", v->klin_coef[0], v->klin_coef[1],
                 v->klin_coef[2], v->klin_coef[3]);
        break;
    case K_KLIN_COEF: snprintf(buf, len, "%.17g", v->klin_coef[k->cls]); break;
    case K_DISP_A2: snprintf(buf, len, "%.9g", (double)v->disp_a2); break;
    case K_DISP_A3: snprintf(buf, len, "%.9g", (double)v->disp_a3); break;
    case K_DISP_K0: snprintf(buf, len, "%.9g", (double)v->disp_k0); break;
    case K_ENFACE_START: snprintf(buf, len, "%d", v->enface_start); break;
    case K_ENFACE_STEP: snprintf(buf, len, "%d", v->enface_step); break;
    case K_ENFACE_COUNT: snprintf(buf, len, "%d", v->enface_count); break;
    case K_XSEC_H: snprintf(buf, len, "%d", v->xsec_h_index); break;
    case K_XSEC_V: snprintf(buf, len, "%d", v->xsec_v_index); break;
    case K_GSC: snprintf(buf, len, "%.9g", (double)v->gsc[k->cls]); break;
    case K_CONTRAST: snprintf(buf, len, "%.9g", (double)v->contrast[k->cls]); break;
    case K_BRIGHTNESS: snprintf(buf, len, "%.9g", (double)v->brightness[k->cls]); break;
    case K_PRODUCTS: format_bits(buf, len, v->products, kind_names, NELEM(kind_names)); break;
    }
    return OCT_OK;
}

size_t oct_control_format_all(const oct_control_values *v, char *buf, size_t len)
{
    size_t pos = 0;
    char val[160];
    for (size_t i = 0; i < NELEM(keys); i++) {
        oct_control_key_get(v, keys[i].name, val, sizeof val, NULL);
        int w = snprintf(buf && pos < len ? buf + pos : NULL, buf && pos < len ? len - pos : 0,
                         "%s=%s\n", keys[i].name, val);
        if (w > 0)
            pos += (size_t)w;
    }
    return pos;
}

void oct_control_from_params(oct_control_values *v, const oct_params *p)
{
    v->methods = p->methods;
    v->window = p->window;
    v->window_param = p->window_param;
    v->freq_cutoff = p->freq_cutoff;
    v->msi_lag_lo = p->lag_lo;
    v->msi_lag_hi = p->lag_hi;
    v->scale = p->scale;
    v->background = p->background;
    v->enface_start = p->enface_start;
    v->enface_step = p->enface_step;
    v->enface_count = p->enface_count;
    v->xsec_h_index = p->xsec_h;
    v->xsec_v_index = p->xsec_v;
    for (int c = 0; c < 3; c++) {
        v->gsc[c] = p->gsc[c];
        v->contrast[c] = p->contrast[c];
        v->brightness[c] = p->brightness[c];
    }
    v->products = p->products;
    v->background_param = p->background_param;
    v->klin = p->klin;
    v->klin_taps = p->klin_taps;
    for (int i = 0; i < 4; i++)
        v->klin_coef[i] = p->klin_coef[i];
    v->klin_source = p->klin_source;
    v->disp_a2 = p->disp_a2;
    v->disp_a3 = p->disp_a3;
    v->disp_k0 = p->disp_k0;
    v->slab_start = p->slab_start;
    v->slab_end = p->slab_end;
    v->angio_metrics = p->angio_metrics;
    v->angio_bands = p->angio_bands;
    v->angio_band_width = p->angio_band_width;
    v->angio_align = p->angio_align;
    v->reg_average = p->reg_average;
    v->reg_stripe = p->reg_stripe;
    v->reg_search_xy = p->reg_search_xy;
    v->reg_search_z = p->reg_search_z;
}

void oct_params_from_control(oct_params *p, const oct_control_values *v)
{
    memset(p, 0, sizeof *p);
    p->methods = v->methods;
    p->window = v->window;
    p->window_param = v->window_param;
    p->freq_cutoff = v->freq_cutoff;
    p->lag_lo = v->msi_lag_lo;
    p->lag_hi = v->msi_lag_hi;
    p->scale = v->scale;
    p->background = v->background;
    p->enface_start = v->enface_start;
    p->enface_step = v->enface_step;
    p->enface_count = v->enface_count;
    p->xsec_h = v->xsec_h_index;
    p->xsec_v = v->xsec_v_index;
    for (int c = 0; c < 3; c++) {
        p->gsc[c] = v->gsc[c];
        p->contrast[c] = v->contrast[c];
        p->brightness[c] = v->brightness[c];
    }
    p->products = v->products;
    p->background_param = v->background_param;
    p->klin = v->klin;
    p->klin_taps = v->klin_taps;
    for (int i = 0; i < 4; i++)
        p->klin_coef[i] = v->klin_coef[i];
    p->klin_source = v->klin_source;
    p->disp_a2 = v->disp_a2;
    p->disp_a3 = v->disp_a3;
    p->disp_k0 = v->disp_k0;
    p->slab_start = v->slab_start;
    p->slab_end = v->slab_end;
    p->angio_metrics = v->angio_metrics;
    p->angio_bands = v->angio_bands;
    p->angio_band_width = v->angio_band_width;
    p->angio_align = v->angio_align;
    p->reg_average = v->reg_average;
    p->reg_stripe = v->reg_stripe;
    p->reg_search_xy = v->reg_search_xy;
    p->reg_search_z = v->reg_search_z;
}
