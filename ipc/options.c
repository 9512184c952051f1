/* options.c - the option table of the control values (see oct_options.h):
 * each value once, with everything the programs derive from it. */
#include "oct_options.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define BLK(f) ((uint32_t)offsetof(oct_control_block, f))
#define VAL(f) ((uint32_t)offsetof(oct_control_values, f))

/* Names, numbered as in the control block (SPEC 3.2, 9.1, 10). */
static const char *const method_names[] = {"cfd", "msi", "cms", NULL};
static const char *const window_names[] = {"rect", "hann", "hamming", "blackman", "gaussian",
                                           "tukey", NULL};
static const char *const scale_names[] = {"linear", "log", NULL};
static const char *const background_names[] = {"none", "reference", "frame_mean", "rolling",
                                               "fpn", NULL};
/* Bits as enum oct_kind / oct_kind_bit() (kernels/oct_engine.h): kinds 0..7
 * are bits 0..7, f32 is bit 8. */
static const char *const product_names[] = {"bscan",  "enface",    "confocal", "xsec_h", "xsec_v",
                                            "volume", "slab_mean", "slab_max", "f32",    NULL};
static const uint32_t product_bits[] = {1u << 0, 1u << 1, 1u << 2, 1u << 3, 1u << 4,
                                        1u << 5, 1u << 6, 1u << 7, 1u << 8};
static const char *const klin_names[] = {"off", "linear", "cubic", "sinc", NULL};
static const char *const klin_source_names[] = {"poly", "file", NULL};
static const char *const angio_names[] = {"struct", "median", "sv", "decor", "ssada", NULL};
static const char *const align_names[] = {"off", "axial", "lateral", NULL};

#define I32MAX 2147483647.0
#define F32MAX ((double)FLT_MAX)

/* display.<class>.<what>: 9 rows */
#define DISPLAY(cls, c)                                                                        \
    {"display." cls ".gsc", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(gsc[c]), VAL(gsc[c]), 1, 0,      \
     F32MAX, 1, 0, NULL, NULL, OCT_OPTF_MIN_OPEN, 0, "",                                       \
     "gray-scale factor of " cls " images: gray = brightness + contrast*T(gsc*I); <= 0 "      \
     "would give black images",                                                                \
     NULL, NULL, 0, NULL, 0},                                                                  \
    {"display." cls ".contrast", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(contrast[c]),               \
     VAL(contrast[c]), 1, -F32MAX, F32MAX, 1, 0, NULL, NULL, 0, 0, "",                         \
     "contrast of " cls " images (negative inverts)", NULL, NULL, 0, NULL, 0},                 \
    {"display." cls ".brightness", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(brightness[c]),           \
     VAL(brightness[c]), 1, -F32MAX, F32MAX, 0, 0, NULL, NULL, 0, 0, "gray levels",            \
     "brightness offset of " cls " images", NULL, NULL, 0, NULL, 0}

#define KLIN_C(i)                                                                              \
    {"klin.c" #i, OCT_OPT_FLOAT, OCT_CTYPE_F64, BLK(klin_coef[i]), VAL(klin_coef[i]), 1,       \
     -DBL_MAX, DBL_MAX, 0, 0, NULL, NULL, 0, 0, "samples",                                     \
     "k-linearisation polynomial p[n] = c0 + c1 t + c2 t^2 + c3 t^3, t = n/M: coefficient c" #i \
     " (identity: c1 = samples)",                                                              \
     NULL, NULL, 1, NULL, 0}

static const oct_option table[] = {
    {"methods", OCT_OPT_SET, OCT_CTYPE_U32, BLK(methods), VAL(methods), 1, 0, 0, 1, 0,
     method_names, NULL, OCT_OPTF_NONEMPTY, 0, "",
     "processing methods: cfd (FFT), msi (master/slave, needs msi.masks), cms (complex "
     "master/slave, needs a cms: section)",
     NULL, NULL, 0, NULL, 0},
    {"window", OCT_OPT_ENUM, OCT_CTYPE_U32, BLK(window), VAL(window), 1, 0, 0, 1, 0,
     window_names, NULL, 0, 0, "",
     "spectral window; gaussian:SIGMA and tukey:ALPHA also set window.param", NULL, NULL, 0,
     "window.param", (1u << 4) | (1u << 5)},
    {"window.param", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(window_param), VAL(window_param), 1, 0,
     100, 0, 0, NULL, NULL, 0, 0, "",
     "window parameter: gaussian sigma > 0 (fraction of samples), tukey alpha in [0, 1]", NULL,
     "tukey: 1", 0, NULL, 0},
    {"freq_cutoff", OCT_OPT_INT, OCT_CTYPE_I32, BLK(freq_cutoff), VAL(freq_cutoff), 1, 0,
     OCT_SAMPLES_MAX / 2, 0, 0, NULL, NULL, 0, 0, "depth bins",
     "low-frequency cut-off F: depths below F are zero", NULL, "samples/2", 0, NULL, 0},
    {"lag_window", OCT_OPT_PAIR, OCT_CTYPE_I32, BLK(msi_lag_lo), VAL(msi_lag_lo), 2,
     -(double)(OCT_SAMPLES_MAX / 2 - 1), OCT_SAMPLES_MAX / 2 - 1, 0, 0, NULL, NULL, 0, 0, "samples",
     "MSI lag window W1,W2 (W1 <= W2)", "-samples/2+1", "samples/2-1", 0, NULL, 0},
    {"scale", OCT_OPT_ENUM, OCT_CTYPE_U32, BLK(scale), VAL(scale), 1, 0, 0, 0, 0, scale_names,
     NULL, 0, 0, "", "gray mapping T: linear or log (20 log10)", NULL, NULL, 0, NULL, 0},
    {"background", OCT_OPT_ENUM, OCT_CTYPE_U32, BLK(background), VAL(background), 1, 0, 0, 0, 0,
     background_names, NULL, 0, 0, "",
     "background subtracted from every spectrum; rolling:K and fpn:G also set "
     "background.param (reference needs background.reference)",
     NULL, NULL, 0, "background.param", (1u << 3) | (1u << 4)},
    {"background.param", OCT_OPT_INT, OCT_CTYPE_I32, BLK(background_param),
     VAL(background_param), 1, 1, 65536, 16, 0, NULL, NULL, 0, 0, "frames|spectra",
     "rolling: frames K averaged [1, 1024]; fpn: spectra G per segment [2, 65536]", NULL,
     "rolling: 1024", 1, NULL, 0},
    {"enface.start", OCT_OPT_INT, OCT_CTYPE_I32, BLK(enface_start), VAL(enface_start), 1, 0,
     1 << 20, 0, 0, NULL, NULL, 0, 0, "depth index", "depth of the first en-face slice", NULL,
     "depths-1", 0, NULL, 0},
    {"enface.step", OCT_OPT_INT, OCT_CTYPE_I32, BLK(enface_step), VAL(enface_step), 1, 1,
     1 << 20, 1, 0, NULL, NULL, 0, 0, "depth bins", "depth step between en-face slices", NULL,
     NULL, 0, NULL, 0},
    {"enface.count", OCT_OPT_INT, OCT_CTYPE_I32, BLK(enface_count), VAL(enface_count), 1, 1,
     65536, 1, 0, NULL, NULL, 0, 0, "slices", "number of en-face slices", NULL, NULL, 0, NULL,
     0},
    {"xsec.h_index", OCT_OPT_INT, OCT_CTYPE_I32, BLK(xsec_h_index), VAL(xsec_h_index), 1, 0,
     I32MAX, 0, 0, NULL, NULL, 0, 0, "line", "line shown by xsec_h (volumes)", NULL, "lines-1",
     0, NULL, 0},
    {"xsec.v_index", OCT_OPT_INT, OCT_CTYPE_I32, BLK(xsec_v_index), VAL(xsec_v_index), 1, 0,
     I32MAX, 0, 0, NULL, NULL, 0, 0, "A-scan", "A-scan column shown by xsec_v (volumes)", NULL,
     "ascans-1", 0, NULL, 0},
    DISPLAY("bscan", 0),
    DISPLAY("enface", 1),
    DISPLAY("confocal", 2),
    {"products", OCT_OPT_SET, OCT_CTYPE_U32, BLK(products), VAL(products), 1, 0, 0, 0x1f, 0,
     product_names, product_bits, OCT_OPTF_NONEMPTY, 0xff, "",
     "images published: bscan (B-scan frames), enface, confocal, xsec_h, xsec_v, volume, "
     "slab_mean, slab_max (volume frames); f32 adds float32 intensities",
     NULL, NULL, 0, NULL, 0},
    /* ABI 1.1 */
    {"klin", OCT_OPT_ENUM, OCT_CTYPE_U32, BLK(klin), VAL(klin), 1, 0, 0, 0, 0, klin_names, NULL,
     0, 0, "", "k-linearisation of CFD: off, linear, cubic or sinc interpolation", NULL, NULL,
     1, NULL, 0},
    {"klin.taps", OCT_OPT_INT, OCT_CTYPE_I32, BLK(klin_taps), VAL(klin_taps), 1, 2, 64, 21, 0,
     NULL, NULL, 0, 0, "samples", "sinc interpolation cut-off length T", NULL, NULL, 1, NULL,
     0},
    {"klin.source", OCT_OPT_ENUM, OCT_CTYPE_U32, BLK(klin_source), VAL(klin_source), 1, 0, 0, 0,
     0, klin_source_names, NULL, 0, 0, "",
     "resampling positions: poly (klin.c0..c3) or file (the profile's klin.positions)", NULL,
     NULL, 1, NULL, 0},
    KLIN_C(0),
    KLIN_C(1),
    KLIN_C(2),
    KLIN_C(3),
    {"dispersion.a2", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(disp_a2), VAL(disp_a2), 1, -F32MAX,
     F32MAX, 0, 0, NULL, NULL, 0, 0, "rad",
     "CFD dispersion compensation: theta = a2 (n/M - k0)^2 + a3 (n/M - k0)^3", NULL, NULL, 1,
     NULL, 0},
    {"dispersion.a3", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(disp_a3), VAL(disp_a3), 1, -F32MAX,
     F32MAX, 0, 0, NULL, NULL, 0, 0, "rad", "third-order dispersion coefficient a3", NULL, NULL,
     1, NULL, 0},
    {"dispersion.k0", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(disp_k0), VAL(disp_k0), 1, -1, 2, 0.5, 0,
     NULL, NULL, 0, 0, "fraction of samples", "centre k0 of the dispersion phase", NULL, NULL, 1,
     NULL, 0},
    /* ABI 1.2 */
    {"slab.start", OCT_OPT_INT, OCT_CTYPE_I32, BLK(slab_start), VAL(slab_start), 1, 0, I32MAX, 0,
     0, NULL, NULL, 0, 0, "depth index", "first depth d0 of the en-face slabs (clamped to depths)",
     NULL, "depths (clamped)", 2, NULL, 0},
    {"slab.end", OCT_OPT_INT, OCT_CTYPE_I32, BLK(slab_end), VAL(slab_end), 1, 0, I32MAX, I32MAX,
     0, NULL, NULL, 0, 0, "depth index",
     "end depth d1 of the slabs, exclusive (clamped to depths; 2147483647: all); d1 > d0", NULL,
     "depths (clamped)", 2, NULL, 0},
    {"angio.metrics", OCT_OPT_SET, OCT_CTYPE_U32, BLK(angio_metrics), VAL(angio_metrics), 1, 0,
     0, 0, 0, angio_names, NULL, 0, 0, "",
     "angiography of repeated B-scans: struct, median, sv, decor, ssada (empty: none)", NULL,
     NULL, 2, NULL, 0},
    {"angio.bands", OCT_OPT_INT, OCT_CTYPE_I32, BLK(angio_bands), VAL(angio_bands), 1, 1, 16, 4,
     0, NULL, NULL, 0, 0, "bands", "ssada: number K of split-spectrum bands", NULL, NULL, 2,
     NULL, 0},
    {"angio.band_width", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(angio_band_width),
     VAL(angio_band_width), 1, 0, 4, 1, 0, NULL, NULL, OCT_OPTF_MIN_OPEN, 0,
     "fraction of samples/bands", "ssada: Gaussian band width w", NULL, NULL, 2, NULL, 0},
    {"angio.align", OCT_OPT_ENUM, OCT_CTYPE_U32, BLK(angio_align), VAL(angio_align), 1, 0, 0, 0,
     0, align_names, NULL, 0, 0, "",
     "alignment of the repeats before angiography: off, axial, lateral (axial + lateral)", NULL,
     NULL, 2, NULL, 0},
    {"reg.average", OCT_OPT_INT, OCT_CTYPE_I32, BLK(reg_average), VAL(reg_average), 1, 1, 64, 10,
     0, NULL, NULL, 0, 0, "volumes", "registration: registered volumes averaged", NULL, NULL, 2,
     NULL, 0},
    {"reg.stripe", OCT_OPT_INT, OCT_CTYPE_I32, BLK(reg_stripe), VAL(reg_stripe), 1, 1, 64, 3, 0,
     NULL, NULL, 0, 0, "B-scans", "registration: stripe width", NULL, NULL, 2, NULL, 0},
    {"reg.search_xy", OCT_OPT_FLOAT, OCT_CTYPE_F32, BLK(reg_search_xy), VAL(reg_search_xy), 1, 0,
     0.5, 0.25, 0, NULL, NULL, OCT_OPTF_MIN_OPEN, 0, "fraction of the field",
     "registration: search window in x and y", NULL, NULL, 2, NULL, 0},
    {"reg.search_z", OCT_OPT_INT, OCT_CTYPE_I32, BLK(reg_search_z), VAL(reg_search_z), 1, 0, 512,
     15, 0, NULL, NULL, 0, 0, "pixels", "registration: search window in z", NULL, NULL, 2, NULL,
     0},
};

/* Old spellings octctl accepted before the table (kept working). */
static const struct {
    const char *alias, *key;
} aliases[] = {
    {"window.type", "window"},
    {"msi.lag_window", "lag_window"},
    {"background.mode", "background"},
    {"background_param", "background.param"},
    {"background.frames", "background.param"},
    {"background.segment", "background.param"},
    {"klin.interp", "klin"},
    {"klin_taps", "klin.taps"},
    {"klin_source", "klin.source"},
    {"klin_c0", "klin.c0"},
    {"klin_c1", "klin.c1"},
    {"klin_c2", "klin.c2"},
    {"klin_c3", "klin.c3"},
    {"disp_a2", "dispersion.a2"},
    {"disp_a3", "dispersion.a3"},
    {"disp_k0", "dispersion.k0"},
};

size_t oct_options_count(void) { return NELEM(table); }

const oct_option *oct_option_at(size_t i) { return i < NELEM(table) ? &table[i] : NULL; }

const oct_option *oct_option_find(const char *key)
{
    if (!key)
        return NULL;
    for (size_t i = 0; i < NELEM(table); i++)
        if (!strcmp(table[i].key, key))
            return &table[i];
    for (size_t i = 0; i < NELEM(aliases); i++)
        if (!strcmp(aliases[i].alias, key))
            return oct_option_find(aliases[i].key);
    return NULL;
}

/* Edit distance, case-insensitive, capped at 99 (keys are short). */
static int edit_distance(const char *a, const char *b)
{
    /* optimal string alignment: a swap of two neighbours counts as one edit */
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

static int typo_limit(const char *name)
{
    size_t len = strlen(name);
    return len <= 4 ? 1 : len <= 8 ? 2 : 3; /* a typo, not another word */
}

const char *oct_nearest_name(const char *name, const char *const *names)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; name && names && names[i]; i++) {
        int d = edit_distance(name, names[i]);
        if (d < bd) {
            bd = d;
            best = names[i];
        }
    }
    return best && bd <= typo_limit(name) ? best : NULL;
}

const char *oct_option_suggest(const char *key)
{
    if (!key || !*key)
        return NULL;
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < NELEM(table) + NELEM(aliases); i++) {
        const char *k = i < NELEM(table) ? table[i].key : aliases[i - NELEM(table)].alias;
        const char *canon = i < NELEM(table) ? k : aliases[i - NELEM(table)].key;
        int d = edit_distance(key, k);
        /* "start" for "enface.start": the last part alone */
        const char *dot = strrchr(k, '.');
        if (dot && !strcasecmp(key, dot + 1))
            d = 1;
        if (d < bd) {
            bd = d;
            best = canon;
        }
    }
    return bd <= typo_limit(key) ? best : NULL;
}

/* ---- field access ---------------------------------------------------------- */

static size_t ctype_size(oct_option_ctype t) { return t == OCT_CTYPE_F64 ? 8 : 4; }

static double get_field(const oct_option *o, const oct_control_values *v, int i)
{
    const char *p = (const char *)v + o->value_offset + (size_t)i * ctype_size(o->ctype);
    switch (o->ctype) {
    case OCT_CTYPE_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case OCT_CTYPE_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case OCT_CTYPE_F32: { float x; memcpy(&x, p, 4); return x; }
    default: { double x; memcpy(&x, p, 8); return x; }
    }
}

/* x is in the field's range (checked by the callers). */
static void set_field(const oct_option *o, oct_control_values *v, int i, double x)
{
    char *p = (char *)v + o->value_offset + (size_t)i * ctype_size(o->ctype);
    switch (o->ctype) {
    case OCT_CTYPE_U32: { uint32_t y = (uint32_t)x; memcpy(p, &y, 4); break; }
    case OCT_CTYPE_I32: { int32_t y = (int32_t)x; memcpy(p, &y, 4); break; }
    case OCT_CTYPE_F32: { float y = (float)x; memcpy(p, &y, 4); break; }
    default: memcpy(p, &x, 8); break;
    }
}

static uint32_t set_bit(const oct_option *o, size_t i)
{
    return o->bits ? o->bits[i] : 1u << i;
}

static size_t name_count(const oct_option *o)
{
    size_t n = 0;
    while (o->values && o->values[n])
        n++;
    return n;
}

void oct_options_default(oct_control_values *v)
{
    memset(v, 0, sizeof *v);
    oct_options_default_after(v, 0);
    for (size_t i = 0; i < NELEM(table); i++)
        if (table[i].abi_minor == 0) {
            set_field(&table[i], v, 0, table[i].def);
            if (table[i].fields == 2)
                set_field(&table[i], v, 1, table[i].def2);
        }
}

void oct_options_default_after(oct_control_values *v, uint32_t minor)
{
    for (size_t i = 0; i < NELEM(table); i++)
        if (table[i].abi_minor > minor) {
            set_field(&table[i], v, 0, table[i].def);
            if (table[i].fields == 2)
                set_field(&table[i], v, 1, table[i].def2);
        }
    if (minor < 2) { /* the 1.2 command arguments */
        v->cmd_flags = 0;
        v->cmd_frames = 0;
        v->cmd_seconds = 0.0;
    }
}

/* The copies run inside the seqlock: volatile keeps the compiler from
 * merging or moving them across the fences (see control.c). */
static void copy_in(const volatile char *src, char *dst, size_t size)
{
    if (size == 8) {
        uint64_t x = *(const volatile uint64_t *)src;
        memcpy(dst, &x, 8);
    } else {
        uint32_t x = *(const volatile uint32_t *)src;
        memcpy(dst, &x, 4);
    }
}

static void copy_out(const char *src, volatile char *dst, size_t size)
{
    if (size == 8) {
        uint64_t x;
        memcpy(&x, src, 8);
        *(volatile uint64_t *)dst = x;
    } else {
        uint32_t x;
        memcpy(&x, src, 4);
        *(volatile uint32_t *)dst = x;
    }
}

void oct_options_block_to_values(const oct_control_block *b, oct_control_values *v)
{
    uint32_t minor = ((const volatile oct_control_block *)b)->abi_minor;
    if (minor < OCT_CONTROL_ABI_MINOR)
        oct_options_default_after(v, minor); /* an older block: its padding means nothing */
    for (size_t i = 0; i < NELEM(table); i++) {
        const oct_option *o = &table[i];
        if (o->abi_minor > minor)
            continue;
        size_t sz = ctype_size(o->ctype);
        for (uint32_t f = 0; f < o->fields; f++)
            copy_in((const volatile char *)b + o->offset + f * sz,
                    (char *)v + o->value_offset + f * sz, sz);
    }
}

void oct_options_values_to_block(oct_control_block *b, const oct_control_values *v)
{
    /* written whatever the block's minor: in an older block this is padding,
     * which its octd ignores */
    for (size_t i = 0; i < NELEM(table); i++) {
        const oct_option *o = &table[i];
        size_t sz = ctype_size(o->ctype);
        for (uint32_t f = 0; f < o->fields; f++)
            copy_out((const char *)v + o->value_offset + f * sz,
                     (volatile char *)b + o->offset + f * sz, sz);
    }
}

/* ---- parsing --------------------------------------------------------------- */

static bool only_space(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return *s == '\0';
}

/* [*s, *s+*len) without blanks at both ends */
static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

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

static const char *range_text(const oct_option *o, char *buf, size_t len)
{
    bool is_int = o->kind == OCT_OPT_INT || o->kind == OCT_OPT_PAIR;
    if (is_int)
        snprintf(buf, len, "[%.0f, %.0f]", o->min, o->max);
    else if (o->min <= -F32MAX && o->max >= F32MAX)
        snprintf(buf, len, "finite");
    else if (o->max >= F32MAX)
        snprintf(buf, len, "%s %g", o->flags & OCT_OPTF_MIN_OPEN ? ">" : ">=", o->min);
    else
        snprintf(buf, len, "%s%g, %g]", o->flags & OCT_OPTF_MIN_OPEN ? "(" : "[", o->min, o->max);
    return buf;
}

/* Range check of one number; the message names the key and the rule. */
static oct_err range_check(const oct_option *o, double x, oct_error *e)
{
    bool lo_ok = o->flags & OCT_OPTF_MIN_OPEN ? x > o->min : x >= o->min;
    if (lo_ok && x <= o->max)
        return OCT_OK;
    char r[64];
    const char *why = "";
    if (!strncmp(o->key, "display.", 8) && strstr(o->key, ".gsc"))
        why = " (gsc <= 0 gives black images)";
    if (o->kind == OCT_OPT_INT || o->kind == OCT_OPT_PAIR)
        return oct_error_set(e, OCT_EINVAL, "%s: %.0f is outside %s%s", o->key, x,
                             range_text(o, r, sizeof r), why);
    if (o->max >= F32MAX)
        return oct_error_set(e, OCT_EINVAL, "%s: %g must be %s%s", o->key, x,
                             range_text(o, r, sizeof r), why);
    return oct_error_set(e, OCT_EINVAL, "%s: %g is outside %s%s", o->key, x,
                         range_text(o, r, sizeof r), why);
}

/* check: also the static range (else only what the field can hold) */
static oct_err parse_int(const oct_option *o, const char *s, double *out, bool check,
                         oct_error *e)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || !only_space(end))
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not an integer", o->key, s);
    if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
        return oct_error_set(e, OCT_EINVAL, "%s: %s is out of the 32-bit range", o->key, s);
    *out = (double)v;
    return check ? range_check(o, *out, e) : OCT_OK;
}

static oct_err parse_number(const oct_option *o, const char *s, double *out, bool check,
                            oct_error *e)
{
    char *end;
    errno = 0;
    if (o->ctype == OCT_CTYPE_F32) {
        float v = strtof(s, &end);
        if (end == s || !only_space(end))
            return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a number", o->key, s);
        /* glibc sets ERANGE for subnormal results too, and `get` prints such
         * values: refuse only overflow (inf) and underflow to zero. */
        if (!isfinite(v) || (errno == ERANGE && (v == 0.0f || isinf(v)) && !literal_zero(s)))
            return oct_error_set(e, OCT_EINVAL,
                                 "%s: '%s' is not a finite single-precision number", o->key, s);
        *out = v;
    } else {
        double v = strtod(s, &end);
        if (end == s || !only_space(end))
            return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a number", o->key, s);
        if (!isfinite(v) || (errno == ERANGE && (v == 0.0 || isinf(v)) && !literal_zero(s)))
            return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not a finite number", o->key, s);
        *out = v;
    }
    return check ? range_check(o, *out, e) : OCT_OK;
}

static const char *names_text(const oct_option *o, const char *sep, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; o->values && o->values[i]; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", i ? sep : "", o->values[i]);
    }
    return buf;
}

static int find_name(const oct_option *o, const char *s, size_t len)
{
    for (size_t i = 0; o->values && o->values[i]; i++)
        if (strlen(o->values[i]) == len && !strncmp(o->values[i], s, len))
            return (int)i;
    return -1;
}

/* A list value without blanks and brackets (tolerated, as in the profile:
 * [-10, 10]) into buf. */
static oct_err unbracket(const oct_option *o, const char *value, char *buf, size_t cap,
                         oct_error *e)
{
    size_t len = strlen(value);
    const char *s = value;
    trim(&s, &len);
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
    }
    if (len >= cap)
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is too long", o->key, value);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return OCT_OK;
}

static oct_err parse_set(const oct_option *o, const char *value, uint32_t *out, bool check,
                         oct_error *e)
{
    char buf[256], names[160];
    oct_err rc = unbracket(o, value, buf, sizeof buf, e);
    if (rc)
        return rc;
    uint32_t bits = 0;
    const char *p = buf;
    while (*buf) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        trim(&item, &len);
        if (len == 0)
            return oct_error_set(e, OCT_EINVAL, "%s: empty item in list '%s'", o->key, value);
        int i = find_name(o, item, len);
        if (i < 0)
            return oct_error_set(e, OCT_EINVAL, "%s: unknown name '%.*s' in '%s' (allowed: %s)",
                                 o->key, (int)len, item, value, names_text(o, ",", names, sizeof names));
        bits |= set_bit(o, (size_t)i);
        if (!comma)
            break;
        p = comma + 1;
    }
    if (check && (o->flags & OCT_OPTF_NONEMPTY) &&
        !(bits & (o->need_bits ? o->need_bits : ~0u))) {
        if (o->need_bits && bits) {
            /* the names of the required bits */
            char req[160] = "";
            for (size_t i = 0; o->values[i]; i++)
                if (set_bit(o, i) & o->need_bits) {
                    size_t l = strlen(req);
                    snprintf(req + l, sizeof req - l, "%s%s", l ? ", " : "", o->values[i]);
                }
            return oct_error_set(e, OCT_EINVAL, "%s: '%s' names no image: give at least one of %s",
                                 o->key, value, req);
        }
        char req[160] = "";
        for (size_t i = 0; o->values[i]; i++)
            if (!o->need_bits || (set_bit(o, i) & o->need_bits)) {
                size_t l = strlen(req);
                snprintf(req + l, sizeof req - l, "%s%s", l ? ", " : "", o->values[i]);
            }
        return oct_error_set(e, OCT_EINVAL, "%s: the list is empty: give at least one of %s",
                             o->key, req);
    }
    *out = bits;
    return OCT_OK;
}

static oct_err parse_value(const oct_option *o, const char *text, oct_control_values *v,
                           bool check, oct_error *e);
static oct_err rule_check(const oct_option *o, const oct_control_values *v, oct_error *e);

static oct_err parse_enum(const oct_option *o, const char *value, oct_control_values *t,
                          bool check, oct_error *e)
{
    const char *colon = o->param_key ? strchr(value, ':') : NULL;
    size_t len = colon ? (size_t)(colon - value) : strlen(value);
    const char *s = value;
    trim(&s, &len);
    int i = find_name(o, s, len);
    if (i < 0) {
        char names[160];
        return oct_error_set(e, OCT_EINVAL, "%s: unknown value '%.*s' (allowed: %s)", o->key,
                             (int)len, s, names_text(o, "|", names, sizeof names));
    }
    set_field(o, t, 0, i);
    if (!colon)
        return OCT_OK;
    /* name:param gives both values: the rule between them applies at once */
    oct_err rc = parse_value(oct_option_find(o->param_key), colon + 1, t, check, e);
    return rc || !check ? rc : rule_check(o, t, e);
}

static oct_err parse_bool(const oct_option *o, const char *value, double *out, oct_error *e)
{
    static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off", "no", "0"};
    size_t len = strlen(value);
    const char *s = value;
    trim(&s, &len);
    for (size_t i = 0; i < 4; i++) {
        if (strlen(yes[i]) == len && !strncasecmp(s, yes[i], len)) {
            *out = 1;
            return OCT_OK;
        }
        if (strlen(no[i]) == len && !strncasecmp(s, no[i], len)) {
            *out = 0;
            return OCT_OK;
        }
    }
    return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not true or false", o->key, value);
}

static oct_err parse_value(const oct_option *o, const char *text, oct_control_values *v,
                           bool check, oct_error *e)
{
    if (!o || !text || !v)
        return oct_error_set(e, OCT_EINVAL, "option: missing key or value");
    oct_control_values t = *v; /* only commit on success */
    oct_err rc = OCT_OK;
    double x = 0, y = 0;
    switch (o->kind) {
    case OCT_OPT_INT:
        if (!(rc = parse_int(o, text, &x, check, e)))
            set_field(o, &t, 0, x);
        break;
    case OCT_OPT_FLOAT:
        if (!(rc = parse_number(o, text, &x, check, e)))
            set_field(o, &t, 0, x);
        break;
    case OCT_OPT_BOOL:
        if (!(rc = parse_bool(o, text, &x, e)))
            set_field(o, &t, 0, x);
        break;
    case OCT_OPT_ENUM: rc = parse_enum(o, text, &t, check, e); break;
    case OCT_OPT_SET: {
        uint32_t bits = 0;
        if (!(rc = parse_set(o, text, &bits, check, e)))
            set_field(o, &t, 0, bits);
        break;
    }
    case OCT_OPT_PAIR: {
        char buf[64];
        if ((rc = unbracket(o, text, buf, sizeof buf, e)))
            break;
        char *comma = strchr(buf, ',');
        if (!comma) {
            rc = oct_error_set(e, OCT_EINVAL, "%s: '%s' is not two integers A,B", o->key, text);
            break;
        }
        *comma = '\0';
        if ((rc = parse_int(o, buf, &x, check, e)) || (rc = parse_int(o, comma + 1, &y, check, e)))
            break;
        if (check && x > y) {
            rc = oct_error_set(e, OCT_EINVAL, "%s: %.0f > %.0f: the first must not exceed the second",
                               o->key, x, y);
            break;
        }
        set_field(o, &t, 0, x);
        set_field(o, &t, 1, y);
        break;
    }
    }
    if (rc == OCT_OK)
        *v = t;
    return rc;
}

oct_err oct_option_parse(const oct_option *o, const char *text, oct_control_values *v,
                         oct_error *e)
{
    return parse_value(o, text, v, true, e);
}

oct_err oct_option_parse_unchecked(const oct_option *o, const char *text, oct_control_values *v,
                                   oct_error *e)
{
    return parse_value(o, text, v, false, e);
}

/* Rules between two values (no geometry): an enum's parameter. */
static oct_err rule_check(const oct_option *o, const oct_control_values *v, oct_error *e)
{
    if (!strcmp(o->key, "window")) {
        if (v->window == 4 && !(v->window_param > 0.0f))
            return oct_error_set(e, OCT_EINVAL,
                                 "window: gaussian parameter %g must be > 0 (sigma, a fraction "
                                 "of samples; window.param)", (double)v->window_param);
        if (v->window == 5 && !(v->window_param >= 0.0f && v->window_param <= 1.0f))
            return oct_error_set(e, OCT_EINVAL,
                                 "window: tukey parameter %g is outside [0, 1] (window.param)",
                                 (double)v->window_param);
    } else if (!strcmp(o->key, "background")) {
        if (v->background == 3 && (v->background_param < 1 || v->background_param > 1024))
            return oct_error_set(e, OCT_EINVAL,
                                 "background: rolling parameter %d is outside [1, 1024] frames "
                                 "(background.param)", v->background_param);
        if (v->background == 4 && (v->background_param < 2 || v->background_param > 65536))
            return oct_error_set(e, OCT_EINVAL,
                                 "background: fpn parameter %d is outside [2, 65536] spectra "
                                 "(background.param)", v->background_param);
    }
    return OCT_OK;
}

oct_err oct_option_check(const oct_option *o, const oct_control_values *v, oct_error *e)
{
    char text[200];
    switch (o->kind) {
    case OCT_OPT_ENUM:
        if (get_field(o, v, 0) >= (double)name_count(o)) {
            char names[160];
            return oct_error_set(e, OCT_EINVAL, "%s = %.0f: not a value (allowed: %s)", o->key,
                                 get_field(o, v, 0), names_text(o, "|", names, sizeof names));
        }
        return rule_check(o, v, e);
    case OCT_OPT_SET: {
        uint32_t known = 0, bits = (uint32_t)get_field(o, v, 0);
        for (size_t i = 0; i < name_count(o); i++)
            known |= set_bit(o, i);
        if (bits & ~known) /* a raw block value: shown as it is */
            return oct_error_set(e, OCT_EINVAL, "%s = 0x%x: unknown bits 0x%x (names: %s)", o->key,
                                 bits, bits & ~known, names_text(o, ", ", text, sizeof text));
        oct_option_format(o, v, text, sizeof text);
        oct_control_values t = *v;
        return oct_option_parse(o, text, &t, e); /* the non-empty rule */
    }
    case OCT_OPT_BOOL:
        return get_field(o, v, 0) > 1 ? oct_error_set(e, OCT_EINVAL, "%s: %.0f is not 0 or 1",
                                                      o->key, get_field(o, v, 0))
                                       : OCT_OK;
    default: {
        for (uint32_t f = 0; f < o->fields; f++) {
            double x = get_field(o, v, (int)f);
            if (!isfinite(x))
                return oct_error_set(e, OCT_EINVAL, "%s: %g is not finite", o->key, x);
            oct_err rc = range_check(o, x, e);
            if (rc)
                return rc;
        }
        if (o->kind == OCT_OPT_PAIR && get_field(o, v, 0) > get_field(o, v, 1))
            return oct_error_set(e, OCT_EINVAL, "%s: %.0f > %.0f: the first must not exceed the second",
                                 o->key, get_field(o, v, 0), get_field(o, v, 1));
        return OCT_OK;
    }
    }
}

oct_err oct_options_check_values(const oct_control_values *v, oct_error *e)
{
    for (size_t i = 0; i < NELEM(table); i++) {
        oct_err rc = oct_option_check(&table[i], v, e);
        if (rc)
            return rc;
    }
    return OCT_OK;
}

/* ---- formatting ------------------------------------------------------------ */

static int format_number(const oct_option *o, double x, char *buf, size_t len)
{
    switch (o->ctype) {
    case OCT_CTYPE_F32: return snprintf(buf, len, "%.9g", x);
    case OCT_CTYPE_F64: return snprintf(buf, len, "%.17g", x); /* reads back bit-exact */
    default: return snprintf(buf, len, "%.0f", x);
    }
}

static int format_set(const oct_option *o, uint32_t bits, char *buf, size_t len)
{
    size_t pos = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; o->values[i]; i++) {
        if (!(bits & set_bit(o, i)))
            continue;
        int w = snprintf(buf + pos, len > pos ? len - pos : 0, "%s%s", pos ? "," : "",
                         o->values[i]);
        pos += w > 0 ? (size_t)w : 0;
        if (pos >= len)
            pos = len ? len - 1 : 0;
    }
    return (int)pos;
}

int oct_option_format(const oct_option *o, const oct_control_values *v, char *buf, size_t len)
{
    if (!o || !v || !buf || !len)
        return 0;
    double x = get_field(o, v, 0);
    switch (o->kind) {
    case OCT_OPT_INT:
    case OCT_OPT_FLOAT: return format_number(o, x, buf, len);
    case OCT_OPT_BOOL: return snprintf(buf, len, "%s", x != 0 ? "true" : "false");
    case OCT_OPT_PAIR: return snprintf(buf, len, "%.0f,%.0f", x, get_field(o, v, 1));
    case OCT_OPT_SET: return format_set(o, (uint32_t)x, buf, len);
    case OCT_OPT_ENUM: {
        uint32_t i = (uint32_t)x;
        if (i >= name_count(o))
            return snprintf(buf, len, "%u", i); /* out-of-range raw value: as it is */
        const oct_option *p = o->param_key ? oct_option_find(o->param_key) : NULL;
        if (p && i < 32 && (o->param_when & (1u << i))) {
            char pv[64];
            format_number(p, get_field(p, v, 0), pv, sizeof pv);
            return snprintf(buf, len, "%s:%s", o->values[i], pv);
        }
        return snprintf(buf, len, "%s", o->values[i]);
    }
    }
    return 0;
}

/* ---- JSON ------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? s->cap - s->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            s->oom = true;
            return;
        }
        if (s->p && s->len + (size_t)w < s->cap) {
            s->len += (size_t)w;
            return;
        }
        size_t cap = (s->cap ? s->cap : 4096);
        while (cap <= s->len + (size_t)w)
            cap *= 2;
        char *n = realloc(s->p, cap);
        if (!n) {
            s->oom = true;
            return;
        }
        s->p = n;
        s->cap = cap;
    }
}

static void sb_str(sbuf *s, const char *t)
{
    sb_printf(s, "\"");
    for (; t && *t; t++) {
        unsigned char c = (unsigned char)*t;
        if (c == '"' || c == '\\')
            sb_printf(s, "\\%c", c);
        else if (c < 0x20)
            sb_printf(s, "\\u%04x", c);
        else
            sb_printf(s, "%c", c);
    }
    sb_printf(s, "\"");
}

/* A JSON number (doubles beyond float32 printed as they are). */
static void sb_num(sbuf *s, const oct_option *o, double x)
{
    char b[64];
    if (o->kind == OCT_OPT_INT || o->kind == OCT_OPT_PAIR || o->ctype == OCT_CTYPE_U32 ||
        o->ctype == OCT_CTYPE_I32)
        snprintf(b, sizeof b, "%.0f", x);
    else
        snprintf(b, sizeof b, "%.17g", o->ctype == OCT_CTYPE_F32 ? (double)(float)x : x);
    sb_printf(s, "%s", b);
}

static const char *ctype_name(oct_option_ctype t)
{
    static const char *const n[] = {"u32", "i32", "f32", "f64"};
    return n[t];
}

static const char *kind_name(oct_option_kind k)
{
    static const char *const n[] = {"int", "float", "enum", "set", "pair", "bool"};
    return n[k];
}

static const struct {
    const char *name;
    uint32_t code;
} commands[] = {
    {"online", OCT_CMD_ONLINE},           {"snapshot", OCT_CMD_SNAPSHOT},
    {"review", OCT_CMD_REVIEW},           {"save_raw", OCT_CMD_SAVE_RAW},
    {"save_images", OCT_CMD_SAVE_IMAGES}, {"record", OCT_CMD_RECORD},
    {"record_stop", OCT_CMD_RECORD_STOP}, {"reference", OCT_CMD_REFERENCE},
};

const char *oct_command_name(uint32_t command)
{
    for (size_t i = 0; i < NELEM(commands); i++)
        if (commands[i].code == command)
            return commands[i].name;
    return NULL;
}

static void json_option(sbuf *s, const oct_option *o)
{
    sb_printf(s, "{\"key\":");
    sb_str(s, o->key);
    sb_printf(s, ",\"kind\":\"%s\"", kind_name(o->kind));
    if (o->kind == OCT_OPT_ENUM || o->kind == OCT_OPT_SET) {
        sb_printf(s, ",\"values\":[");
        for (size_t i = 0; o->values[i]; i++) {
            sb_printf(s, "%s", i ? "," : "");
            sb_str(s, o->values[i]);
        }
        sb_printf(s, "]");
    }
    if (o->kind == OCT_OPT_INT || o->kind == OCT_OPT_FLOAT || o->kind == OCT_OPT_PAIR) {
        sb_printf(s, ",\"min\":");
        sb_num(s, o, o->min);
        if (o->flags & OCT_OPTF_MIN_OPEN)
            sb_printf(s, ",\"min_exclusive\":true");
        sb_printf(s, ",\"max\":");
        sb_num(s, o, o->max);
    }
    if (o->min_rule) {
        sb_printf(s, ",\"min_rule\":");
        sb_str(s, o->min_rule);
    }
    if (o->max_rule) {
        sb_printf(s, ",\"max_rule\":");
        sb_str(s, o->max_rule);
    }
    if (o->kind == OCT_OPT_SET && (o->flags & OCT_OPTF_NONEMPTY))
        sb_printf(s, ",\"nonempty\":true");
    sb_printf(s, ",\"default\":");
    switch (o->kind) {
    case OCT_OPT_ENUM: sb_str(s, o->values[(size_t)o->def]); break;
    case OCT_OPT_SET:
        sb_printf(s, "[");
        for (size_t i = 0, n = 0; o->values[i]; i++)
            if ((uint32_t)o->def & set_bit(o, i)) {
                sb_printf(s, "%s", n++ ? "," : "");
                sb_str(s, o->values[i]);
            }
        sb_printf(s, "]");
        break;
    case OCT_OPT_PAIR:
        sb_printf(s, "[");
        sb_num(s, o, o->def);
        sb_printf(s, ",");
        sb_num(s, o, o->def2);
        sb_printf(s, "]");
        break;
    case OCT_OPT_BOOL: sb_printf(s, "%s", o->def != 0 ? "true" : "false"); break;
    default: sb_num(s, o, o->def); break;
    }
    sb_printf(s, ",\"unit\":");
    sb_str(s, o->unit);
    sb_printf(s, ",\"help\":");
    sb_str(s, o->help);
    if (o->param_key) {
        sb_printf(s, ",\"param_key\":");
        sb_str(s, o->param_key);
    }
    bool any = false;
    for (size_t i = 0; i < NELEM(aliases); i++)
        if (!strcmp(aliases[i].key, o->key)) {
            sb_printf(s, "%s", any ? "," : ",\"aliases\":[");
            sb_str(s, aliases[i].alias);
            any = true;
        }
    if (any)
        sb_printf(s, "]");
    sb_printf(s, ",\"offset\":%u,\"ctype\":\"%s\"", o->offset, ctype_name(o->ctype));
    if (o->fields > 1)
        sb_printf(s, ",\"fields\":%u", o->fields);
    sb_printf(s, ",\"abi_minor\":%u}", o->abi_minor);
}

oct_err oct_options_json(char **out, oct_error *e)
{
    if (!out)
        return oct_error_set(e, OCT_EINVAL, "options json: no output pointer");
    *out = NULL;
    sbuf s = {0};
    sb_printf(&s, "{\"schema\":\"%s\",\"abi\":{\"major\":%u,\"minor\":%u},\"options\":[",
              OCT_OPTIONS_SCHEMA, OCT_ABI_MAJOR, OCT_CONTROL_ABI_MINOR);
    for (size_t i = 0; i < NELEM(table); i++) {
        sb_printf(&s, "%s", i ? ",\n" : "\n");
        json_option(&s, &table[i]);
    }
    sb_printf(&s, "],\n\"commands\":[");
    for (size_t i = 0; i < NELEM(commands); i++)
        sb_printf(&s, "%s{\"name\":\"%s\",\"code\":%u}", i ? "," : "", commands[i].name,
                  commands[i].code);
    sb_printf(&s, "]}\n");
    if (s.oom) {
        free(s.p);
        return oct_error_set(e, OCT_ENOMEM, "options json: out of memory");
    }
    *out = s.p;
    return OCT_OK;
}
