/* profile.c - the processing profile of one OCT system (SPEC 5.2), read with
 * libyaml's document API (node marks give the line of every value); the
 * loading of its mask and reference arrays (SPEC 5.3) is in profile_data.c.
 *
 * The schema is walked explicitly: every key is known, every value has one
 * expected type, and anything else is an error "FILE:LINE: key.path: ...". */
#include "config_internal.h"
#include "oct_control_keys.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define PROFILE_FILE_MAX (1u << 20)
#define MASKS_MAX (1u << 20)

typedef struct pctx {
    yaml_document_t *doc;
    const char *name;
    char base_dir[OCT_PATH_MAX];
    oct_profile *p;
    oct_error *e;
} pctx;

static oct_err pfail(pctx *x, const yaml_node_t *n, oct_err code, const char *key,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static oct_err pfail(pctx *x, const yaml_node_t *n, oct_err code, const char *key,
                     const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return oct_error_set(x->e, code, "%s:%lu: %s: %s", x->name,
                         n ? (unsigned long)n->start_mark.line + 1 : 1ul, key, what);
}

static bool is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)n->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcasecmp(v, "null");
}

/* What a node is, for "expected X, got Y" messages. */
static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a map";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_SCALAR_NODE:
        if (is_null(n))
            return "nothing (null)";
        return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "a plain value" : "a quoted string";
    default: return "nothing";
    }
}

static yaml_node_t *node_at(pctx *x, yaml_node_item_t id)
{
    return yaml_document_get_node(x->doc, id);
}

static oct_err want_type(pctx *x, const yaml_node_t *n, yaml_node_type_t t, const char *key)
{
    if (n->type == t && !(t == YAML_SCALAR_NODE && is_null(n)))
        return OCT_OK;
    return pfail(x, n, OCT_EPARSE, key, "expected %s, got %s",
                 t == YAML_MAPPING_NODE ? "a map" : t == YAML_SEQUENCE_NODE ? "a list" : "a value",
                 node_kind(n));
}

static const char *sval(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static oct_err get_int(pctx *x, const yaml_node_t *n, const char *key, long long lo, long long hi,
                       int64_t *out)
{
    oct_err err = want_type(x, n, YAML_SCALAR_NODE, key);
    if (err)
        return err;
    const char *v = sval(n);
    char *end;
    errno = 0;
    long long ll = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && *v ? strtoll(v, &end, 10) : 0;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || !*v || *end || errno)
        return pfail(x, n, OCT_EPARSE, key, "expected an integer, got %s '%.40s'", node_kind(n), v);
    if (ll < lo || ll > hi)
        return pfail(x, n, OCT_EINVAL, key, "%lld is out of range (%lld to %lld)", ll, lo, hi);
    *out = ll;
    return OCT_OK;
}

static oct_err get_i32(pctx *x, const yaml_node_t *n, const char *key, long long lo,
                       long long hi, int32_t *out)
{
    int64_t v;
    oct_err err = get_int(x, n, key, lo, hi, &v);
    if (!err)
        *out = (int32_t)v;
    return err;
}

/* A control value's integer with the static range of the option table
 * (oct_options.h): one range for the profile, octctl and octd. */
static oct_err get_opt_i32(pctx *x, const yaml_node_t *n, const char *key, const char *opt,
                           int32_t *out)
{
    const oct_option *o = oct_option_find(opt);
    return get_i32(x, n, key, o ? (long long)o->min : INT32_MIN, o ? (long long)o->max : INT32_MAX,
                   out);
}

/* The names of a control value's enumeration or set (NULL-terminated). */
static const char *const *opt_names(const char *opt)
{
    const oct_option *o = oct_option_find(opt);
    static const char *const none[] = {NULL};
    return o && o->values ? o->values : none;
}

/* A plain scalar parsed as a double; *erange: strtod's ERANGE.  The callers
 * decide what range they accept. */
static oct_err get_number(pctx *x, const yaml_node_t *n, const char *key, double *out, bool *erange)
{
    oct_err err = want_type(x, n, YAML_SCALAR_NODE, key);
    if (err)
        return err;
    const char *v = sval(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return pfail(x, n, OCT_EPARSE, key, "expected a number, got a quoted string '%.40s'", v);
    /* YAML's .nan/.inf and C's nan/inf are numbers, but not usable ones */
    const char *t = v + (*v == '+' || *v == '-');
    if (!strcasecmp(t, ".nan") || !strcasecmp(t, ".inf") || !strncasecmp(t, "nan", 3) ||
        !strncasecmp(t, "inf", 3))
        return pfail(x, n, OCT_EINVAL, key, "'%.40s' is not a finite number", v);
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    *erange = errno == ERANGE;
    if (!*v || *end)
        return pfail(x, n, OCT_EPARSE, key, "expected a number, got '%.40s'", v);
    return OCT_OK;
}

static oct_err get_float(pctx *x, const yaml_node_t *n, const char *key, float *out)
{
    double d;
    bool erange;
    oct_err err = get_number(x, n, key, &d, &erange);
    if (err)
        return err;
    if (erange || !isfinite(d) || !isfinite((float)d) || fabs(d) > 3.0e38)
        return pfail(x, n, OCT_EINVAL, key, "'%.40s' is not a finite float32 number", sval(n));
    *out = (float)d;
    return OCT_OK;
}

/* A finite double (k-lin coefficients, CMS depths and grid). */
static oct_err get_double(pctx *x, const yaml_node_t *n, const char *key, double *out)
{
    double d;
    bool erange;
    oct_err err = get_number(x, n, key, &d, &erange);
    if (err)
        return err;
    const char *v = sval(n);
    if ((erange && d != 0.0) || !isfinite(d))
        return pfail(x, n, OCT_EINVAL, key, "'%.40s' is not a finite number", v);
    *out = d;
    return OCT_OK;
}

static oct_err get_bool(pctx *x, const yaml_node_t *n, const char *key, bool *out)
{
    oct_err err = want_type(x, n, YAML_SCALAR_NODE, key);
    if (err)
        return err;
    const char *v = sval(n);
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
            *out = true;
            return OCT_OK;
        }
        if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
            *out = false;
            return OCT_OK;
        }
    }
    return pfail(x, n, OCT_EPARSE, key, "expected true or false, got '%.40s'", v);
}

/* A word out of a NULL-terminated list; *out = its index. */
static oct_err get_word(pctx *x, const yaml_node_t *n, const char *key, const char *const *words,
                        int *out)
{
    oct_err err = want_type(x, n, YAML_SCALAR_NODE, key);
    if (err)
        return err;
    char list[200] = "";
    for (int i = 0; words[i]; i++) {
        if (!strcmp(sval(n), words[i])) {
            *out = i;
            return OCT_OK;
        }
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", words[i]);
    }
    return pfail(x, n, OCT_EINVAL, key, "'%.40s' is not one of %s", sval(n), list);
}

static oct_err get_path(pctx *x, const yaml_node_t *n, const char *key, char *out)
{
    oct_err err = want_type(x, n, YAML_SCALAR_NODE, key);
    if (err)
        return err;
    if (!*sval(n))
        return pfail(x, n, OCT_EINVAL, key, "empty file name");
    oct_path_resolve(out, OCT_PATH_MAX, x->base_dir, sval(n));
    if (!*out)
        return pfail(x, n, OCT_EINVAL, key, "path too long");
    return OCT_OK;
}

/* Remembers the line of a key for errors found after parsing. */
static void record_key(oct_profile *p, const char *key, uint32_t line)
{
    if (p->key_line_count >= OCT_PROFILE_KEYS_MAX || strlen(key) >= sizeof p->key_lines[0].key)
        return;
    oct_profile_key_pos *kl = &p->key_lines[p->key_line_count++];
    memcpy(kl->key, key, strlen(key) + 1); /* fits: checked above */
    kl->line = line;
}

uint32_t oct_profile_key_line(const oct_profile *p, const char *key)
{
    if (!p || !key)
        return 0;
    char k[sizeof p->key_lines[0].key];
    snprintf(k, sizeof k, "%s", key);
    for (;;) {
        for (uint32_t i = 0; i < p->key_line_count && i < OCT_PROFILE_KEYS_MAX; i++)
            if (!strcmp(p->key_lines[i].key, k))
                return p->key_lines[i].line;
        char *dot = strrchr(k, '.');
        if (!dot)
            return 0;
        *dot = '\0';
    }
}

/* Walks a mapping: checks it is one, that keys are plain scalars, unique,
 * and among `keys`; calls fn for each (key index, value node). */
typedef oct_err (*pair_fn)(pctx *x, int k, const char *path, yaml_node_t *key,
                           yaml_node_t *val, void *arg);

static oct_err walk_map(pctx *x, yaml_node_t *map, const char *path, const char *const *keys,
                        pair_fn fn, void *arg)
{
    oct_err err = want_type(x, map, YAML_MAPPING_NODE, *path ? path : "(top level)");
    if (err)
        return err;
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *pr = start; pr < top; pr++) {
        yaml_node_t *k = node_at(x, pr->key), *v = node_at(x, pr->value);
        if (!k || !v)
            return oct_error_set(x->e, OCT_EPARSE, "%s: broken YAML document", x->name);
        if (k->type != YAML_SCALAR_NODE)
            return pfail(x, k, OCT_EPARSE, *path ? path : "(top level)", "a key is %s",
                         node_kind(k));
        char sub[200];
        snprintf(sub, sizeof sub, "%s%s%.60s", path, *path ? "." : "", sval(k));
        for (yaml_node_pair_t *q = start; q < pr; q++) {
            yaml_node_t *k2 = node_at(x, q->key);
            if (k2 && k2->type == YAML_SCALAR_NODE && !strcmp(sval(k2), sval(k)))
                return pfail(x, k, OCT_EPARSE, sub, "duplicate key (first on line %lu)",
                             (unsigned long)k2->start_mark.line + 1);
        }
        int idx = -1;
        for (int i = 0; keys[i]; i++)
            if (!strcmp(keys[i], sval(k)))
                idx = i;
        if (idx < 0) {
            char list[240] = "";
            for (int i = 0; keys[i]; i++) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", keys[i]);
            }
            const char *near = oct_nearest_name(sval(k), keys);
            return pfail(x, k, OCT_EPARSE, sub, "unknown key (known here: %s)%s%s%s", list,
                         near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        }
        record_key(x->p, sub, (uint32_t)k->start_mark.line + 1);
        if ((err = fn(x, idx, sub, k, v, arg)))
            return err;
    }
    return OCT_OK;
}

/* ---------------- sections ---------------- */

typedef struct geom_seen {
    bool samples, ascans, lines;
} geom_seen;

/* geometry.spacing_um.{depth,ascan,line}: finite, > 0, at most 1 m. */
static oct_err spacing_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                            void *arg)
{
    float f = 0;
    oct_err err = get_float(x, v, path, &f);
    if (err)
        return err;
    if (!(f > 0.0f && f <= 1.0e6f))
        return pfail(x, v, OCT_EINVAL, path, "%g is out of range (0 < spacing <= 1e6 µm)", f);
    x->p->spacing_um[k] = f;
    return OCT_OK;
}

static oct_err geometry_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                             void *arg)
{
    geom_seen *s = arg;
    oct_geometry *g = &x->p->geom;
    int64_t n = 0;
    oct_err err;
    switch (k) {
    case 0: err = get_int(x, v, path, 1, UINT32_MAX, &n); g->samples = (uint32_t)n; s->samples = true; return err;
    case 1: err = get_int(x, v, path, 1, UINT32_MAX, &n); g->ascans = (uint32_t)n; s->ascans = true; return err;
    case 2: err = get_int(x, v, path, 1, UINT32_MAX, &n); g->lines = (uint32_t)n; s->lines = true; return err;
    case 3: {
        static const char *const types[] = {"u16", "i16", "f32", "uint16", "int16", "float32", NULL};
        int t;
        if ((err = get_word(x, v, path, types, &t)))
            return err;
        g->sample_type = oct_sample_parse(types[t]);
        return OCT_OK;
    }
    case 4: err = get_int(x, v, path, 0, 15, &n); g->sample_shift = (uint32_t)n; return err;
    case 5: {
        /* pixel spacing for displays (octweb): {depth, ascan, line} in µm */
        static const char *const keys[] = {"depth", "ascan", "line", NULL};
        return walk_map(x, v, path, keys, spacing_pair, NULL);
    }
    /* 64 = OCT_ANGIO_REPEATS_MAX (angio.h); lines % R is checked with the whole map */
    case 6: err = get_int(x, v, path, 1, 64, &n); x->p->repeats = (uint32_t)n; return err;
    }
    return OCT_OK;
}

static oct_err list_items(pctx *x, yaml_node_t *seq, const char *path, yaml_node_t ***items,
                          int *count)
{
    oct_err err = want_type(x, seq, YAML_SEQUENCE_NODE, path);
    if (err)
        return err;
    (void)items;
    *count = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    return OCT_OK;
}

/* A YAML list of names (each once) as a bit set: bit bits[w] (or 1 << w
 * when bits is NULL) for names[w]; *count the list's length. */
static oct_err word_bits(pctx *x, yaml_node_t *v, const char *path, const char *const *names,
                         const uint32_t *bits, uint32_t *out, int *count)
{
    oct_err err = list_items(x, v, path, NULL, count);
    if (err)
        return err;
    uint32_t m = 0;
    for (int i = 0; i < *count; i++) {
        yaml_node_t *it = node_at(x, v->data.sequence.items.start[i]);
        char sub[200];
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        int w;
        if (!it)
            return oct_error_set(x->e, OCT_EPARSE, "%s: broken YAML document", x->name);
        if ((err = get_word(x, it, sub, names, &w)))
            return err;
        uint32_t bit = bits ? bits[w] : 1u << w;
        if (m & bit)
            return pfail(x, it, OCT_EINVAL, sub, "'%s' is listed twice", names[w]);
        m |= bit;
    }
    *out = m;
    return OCT_OK;
}

static oct_err methods_list(pctx *x, yaml_node_t *v, const char *path)
{
    int count;
    uint32_t m;
    /* names = enum oct_method, so bit w is OCT_METHOD_BIT(w) */
    oct_err err = word_bits(x, v, path, opt_names("methods"), NULL, &m, &count);
    if (err)
        return err;
    if (count == 0)
        return pfail(x, v, OCT_EINVAL, path, "the list is empty: name one or more of cfd, msi, cms");
    x->p->params.methods = m;
    return OCT_OK;
}

static oct_err products_list(pctx *x, yaml_node_t *v, const char *path)
{
    int count;
    uint32_t bits;
    /* the option table's names and bits (enum oct_kind; f32 last) */
    const oct_option *o = oct_option_find("products");
    oct_err err = word_bits(x, v, path, o->values, o->bits, &bits, &count);
    if (err)
        return err;
    x->p->params.products = bits;
    return OCT_OK;
}

typedef struct window_seen {
    yaml_node_t *param; /* for the range check once the type is known */
} window_seen;

static oct_err window_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                           void *arg)
{
    window_seen *s = arg;
    if (k == 0) {
        int w;
        oct_err err = get_word(x, v, path, opt_names("window"), &w);
        x->p->params.window = (uint32_t)w;
        return err;
    }
    s->param = v;
    return get_float(x, v, path, &x->p->params.window_param);
}

typedef struct bg_seen {
    yaml_node_t *mode, *frames, *segment;
} bg_seen;

static oct_err background_pair(pctx *x, int k, const char *path, yaml_node_t *key,
                               yaml_node_t *v, void *arg)
{
    bg_seen *s = arg;
    switch (k) {
    case 0: {
        int w;
        s->mode = v;
        oct_err err = get_word(x, v, path, opt_names("background"), &w);
        x->p->params.background = (uint32_t)w;
        return err;
    }
    case 1: return get_path(x, v, path, x->p->reference_path);
    case 2:
        s->frames = v;
        return get_i32(x, v, path, 1, OCT_ROLLING_MAX, &x->p->params.background_param);
    default:
        s->segment = v;
        return get_i32(x, v, path, 2, OCT_FPN_SEGMENT_MAX, &x->p->params.background_param);
    }
}

/* A list of exactly `want` numbers (want = 0: 1 to max) into out. */
static oct_err number_list(pctx *x, yaml_node_t *v, const char *path, int want, int max,
                           double *out, int *got)
{
    int count;
    oct_err err = list_items(x, v, path, NULL, &count);
    if (err)
        return err;
    if (want && count != want)
        return pfail(x, v, OCT_EINVAL, path, "expected a list of %d numbers, got %d", want, count);
    if (!want && (count < 1 || count > max))
        return pfail(x, v, OCT_EINVAL, path, "expected 1 to %d numbers, got %d", max, count);
    for (int i = 0; i < count; i++) {
        yaml_node_t *it = node_at(x, v->data.sequence.items.start[i]);
        char sub[200];
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        if (!it)
            return oct_error_set(x->e, OCT_EPARSE, "%s: broken YAML document", x->name);
        if ((err = get_double(x, it, sub, &out[i])))
            return err;
    }
    *got = count;
    return OCT_OK;
}

typedef struct klin_seen {
    yaml_node_t *interp, *coefs, *positions;
} klin_seen;

static oct_err klin_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                         void *arg)
{
    klin_seen *s = arg;
    oct_params *pp = &x->p->params;
    switch (k) {
    case 0: {
        int w;
        s->interp = v;
        oct_err err = get_word(x, v, path, opt_names("klin"), &w);
        pp->klin = (uint32_t)w;
        return err;
    }
    case 1: return get_opt_i32(x, v, path, "klin.taps", &pp->klin_taps);
    case 2: {
        int got;
        s->coefs = v;
        pp->klin_source = OCT_KLIN_POLY;
        return number_list(x, v, path, 4, 4, pp->klin_coef, &got);
    }
    default:
        s->positions = v;
        pp->klin_source = OCT_KLIN_FILE;
        return get_path(x, v, path, x->p->klin_path);
    }
}

static oct_err dispersion_pair(pctx *x, int k, const char *path, yaml_node_t *key,
                               yaml_node_t *v, void *arg)
{
    oct_params *pp = &x->p->params;
    if (k != 2)
        return get_float(x, v, path, k == 0 ? &pp->disp_a2 : &pp->disp_a3);
    /* k0 as oct_params_validate bounds it */
    oct_err err = get_float(x, v, path, &pp->disp_k0);
    if (!err && !(pp->disp_k0 >= -1.0f && pp->disp_k0 <= 2.0f))
        return pfail(x, v, OCT_EINVAL, path, "%g: must be in [-1, 2] (a fraction of samples)",
                     (double)pp->disp_k0);
    return err;
}

typedef struct cms_seen {
    yaml_node_t *cal, *depths, *grid, *step;
    bool start, count;
} cms_seen;

static oct_err grid_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                         void *arg)
{
    cms_seen *s = arg;
    oct_profile *p = x->p;
    int64_t n;
    oct_err err;
    switch (k) {
    case 0: s->start = true; return get_double(x, v, path, &p->cms_start);
    case 1:
        s->step = v;
        if ((err = get_double(x, v, path, &p->cms_step)))
            return err;
        if (p->cms_step == 0.0)
            return pfail(x, v, OCT_EINVAL, path, "the step must not be 0");
        return OCT_OK;
    default:
        s->count = true;
        if ((err = get_int(x, v, path, 1, MASKS_MAX, &n)))
            return err;
        p->cms_count = (uint32_t)n;
        return OCT_OK;
    }
}

static oct_err cms_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                        void *arg)
{
    cms_seen *s = arg;
    oct_profile *p = x->p;
    oct_err err;
    switch (k) {
    case 0: s->cal = v; return get_path(x, v, path, p->cms_path);
    case 1: {
        static const char *const types[] = {"u16", "i16", "f32", "uint16", "int16", "float32", NULL};
        int t;
        if ((err = get_word(x, v, path, types, &t)))
            return err;
        p->cms_type = oct_sample_parse(types[t]);
        return OCT_OK;
    }
    case 2: {
        int got;
        s->depths = v;
        if ((err = number_list(x, v, path, 0, OCT_CMS_CAL_MAX, p->cms_depths, &got)))
            return err;
        if (got < 2)
            return pfail(x, v, OCT_EINVAL, path,
                         "CMS needs at least 2 calibration depths, got %d", got);
        for (int i = 0; i < got; i++)
            for (int j = 0; j < i; j++)
                if (p->cms_depths[i] == p->cms_depths[j])
                    return pfail(x, v, OCT_EINVAL, path, "depth %g is listed twice ([%d] and [%d])",
                                 p->cms_depths[i], j, i);
        p->cms_cal_count = (uint32_t)got;
        return OCT_OK;
    }
    default: {
        static const char *const keys[] = {"start", "step", "count", NULL};
        s->grid = v;
        return walk_map(x, v, path, keys, grid_pair, s);
    }
    }
}

static oct_err masks_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                          void *arg)
{
    int64_t n;
    oct_err err;
    switch (k) {
    case 0: return get_path(x, v, path, x->p->masks_path);
    case 1: {
        static const char *const types[] = {"u16", "i16", "f32", "uint16", "int16", "float32", NULL};
        int t;
        if ((err = get_word(x, v, path, types, &t)))
            return err;
        x->p->masks_type = oct_sample_parse(types[t]);
        return OCT_OK;
    }
    case 2:
        if ((err = get_int(x, v, path, 1, MASKS_MAX, &n)))
            return err;
        x->p->masks_count = (uint32_t)n;
        return OCT_OK;
    case 3: return get_bool(x, v, path, &x->p->masks_normalize);
    }
    return OCT_OK;
}

typedef struct msi_seen {
    yaml_node_t *lags;
} msi_seen;

static oct_err msi_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                        void *arg)
{
    if (k == 0) {
        static const char *const keys[] = {"file", "sample_type", "count", "normalize", NULL};
        return walk_map(x, v, path, keys, masks_pair, NULL);
    }
    ((msi_seen *)arg)->lags = v;
    int count;
    oct_err err = list_items(x, v, path, NULL, &count);
    if (err)
        return err;
    if (count != 2)
        return pfail(x, v, OCT_EINVAL, path, "expected [W1, W2], got a list of %d", count);
    int32_t w[2];
    for (int i = 0; i < 2; i++) {
        yaml_node_t *it = node_at(x, v->data.sequence.items.start[i]);
        char sub[200];
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        if (!it)
            return oct_error_set(x->e, OCT_EPARSE, "%s: broken YAML document", x->name);
        /* |W| < M/2 <= 4096; the exact bound needs the geometry */
        if ((err = get_opt_i32(x, it, sub, "lag_window", &w[i])))
            return err;
    }
    if (w[0] > w[1])
        return pfail(x, v, OCT_EINVAL, path, "W1 = %d is greater than W2 = %d", w[0], w[1]);
    x->p->params.lag_lo = w[0];
    x->p->params.lag_hi = w[1];
    return OCT_OK;
}

static oct_err enface_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                           void *arg)
{
    oct_params *pp = &x->p->params;
    switch (k) {
    case 0: return get_opt_i32(x, v, path, "enface.start", &pp->enface_start);
    case 1: return get_opt_i32(x, v, path, "enface.step", &pp->enface_step);
    default: return get_opt_i32(x, v, path, "enface.count", &pp->enface_count);
    }
}

/* slab: {start: d0, end: d1} (SPEC 10.2; the option table's ranges) */
static oct_err slab_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                         void *arg)
{
    oct_params *pp = &x->p->params;
    return get_opt_i32(x, v, path, k == 0 ? "slab.start" : "slab.end",
                       k == 0 ? &pp->slab_start : &pp->slab_end);
}

static oct_err xsec_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                         void *arg)
{
    oct_params *pp = &x->p->params;
    return get_opt_i32(x, v, path, k == 0 ? "xsec.h_index" : "xsec.v_index",
                       k == 0 ? &pp->xsec_h : &pp->xsec_v);
}

static oct_err class_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                          void *arg)
{
    int c = *(int *)arg;
    oct_params *pp = &x->p->params;
    float *dst = k == 0 ? &pp->gsc[c] : k == 1 ? &pp->contrast[c] : &pp->brightness[c];
    return get_float(x, v, path, dst);
}

static oct_err display_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                            void *arg)
{
    static const char *const keys[] = {"gsc", "contrast", "brightness", NULL};
    int c = k; /* bscan, enface, confocal = enum oct_class */
    return walk_map(x, v, path, keys, class_pair, &c);
}

/* angio: {metrics: [struct, median, sv, decor, ssada], bands: K, band_width: w,
 * align: off|axial|lateral} (SPEC 10.3; ranges as angio.h) */
static oct_err angio_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                          void *arg)
{
    oct_params *pp = &x->p->params;
    int64_t n = 0;
    oct_err err;
    switch (k) {
    case 0: {
        int count;
        uint32_t m;
        if ((err = word_bits(x, v, path, opt_names("angio.metrics"), NULL, &m, &count)))
            return err;
        pp->angio_metrics = m;
        return OCT_OK;
    }
    case 1: err = get_int(x, v, path, 1, 16, &n); pp->angio_bands = (int32_t)n; return err;
    case 2:
        if ((err = get_float(x, v, path, &pp->angio_band_width)))
            return err;
        if (!(pp->angio_band_width > 0.0f && pp->angio_band_width <= 4.0f))
            return pfail(x, v, OCT_EINVAL, path, "%g is outside (0, 4]",
                         (double)pp->angio_band_width);
        return OCT_OK;
    case 3: {
        static const char *const names[] = {"off", "axial", "lateral", NULL};
        int w;
        err = get_word(x, v, path, names, &w);
        pp->angio_align = (uint32_t)w;
        return err;
    }
    }
    return OCT_OK;
}

enum top_key {
    T_GEOMETRY, T_METHODS, T_WINDOW, T_FREQ, T_BACKGROUND, T_MSI, T_ENFACE, T_XSEC, T_SCALE,
    T_DISPLAY, T_PRODUCTS, T_KLIN, T_DISPERSION, T_CMS, T_ANGIO, T_SLAB
};

typedef struct top_seen {
    yaml_node_t *node[T_SLAB + 1];
    window_seen win;
    bg_seen bg;
    msi_seen msi;
    klin_seen klin;
    cms_seen cms;
} top_seen;

static oct_err top_pair(pctx *x, int k, const char *path, yaml_node_t *key, yaml_node_t *v,
                        void *arg)
{
    top_seen *s = arg;
    s->node[k] = v;
    switch (k) {
    case T_GEOMETRY: {
        static const char *const keys[] = {"samples", "ascans", "lines", "sample_type",
                                           "sample_shift", "spacing_um", "repeats", NULL};
        geom_seen gs = {0};
        oct_geometry *g = &x->p->geom;
        memset(g, 0, sizeof *g);
        g->sample_type = OCT_SAMPLE_U16;
        x->p->repeats = 1;
        oct_err err = walk_map(x, v, path, keys, geometry_pair, &gs);
        if (err)
            return err;
        if (!gs.samples || !gs.ascans || !gs.lines)
            return pfail(x, v, OCT_EINVAL, path, "'%s' is missing (samples, ascans and lines are "
                         "required)", !gs.samples ? "samples" : !gs.ascans ? "ascans" : "lines");
        oct_error ge;
        if (oct_geometry_check(g, &ge))
            return pfail(x, v, OCT_EINVAL, path, "%s", ge.msg);
        if (g->lines % x->p->repeats)
            return pfail(x, v, OCT_EINVAL, "geometry.repeats",
                         "%u does not divide geometry.lines = %u (a frame holds lines/repeats "
                         "B-scan positions of repeats lines each)",
                         x->p->repeats, g->lines);
        x->p->has_geometry = true;
        return OCT_OK;
    }
    case T_METHODS: return methods_list(x, v, path);
    case T_WINDOW: {
        static const char *const keys[] = {"type", "param", NULL};
        return walk_map(x, v, path, keys, window_pair, &s->win);
    }
    case T_FREQ: return get_opt_i32(x, v, path, "freq_cutoff", &x->p->params.freq_cutoff);
    case T_BACKGROUND: {
        static const char *const keys[] = {"mode", "reference", "frames", "segment", NULL};
        return walk_map(x, v, path, keys, background_pair, &s->bg);
    }
    case T_MSI: {
        static const char *const keys[] = {"masks", "lag_window", NULL};
        return walk_map(x, v, path, keys, msi_pair, &s->msi);
    }
    case T_ENFACE: {
        static const char *const keys[] = {"start", "step", "count", NULL};
        return walk_map(x, v, path, keys, enface_pair, NULL);
    }
    case T_XSEC: {
        static const char *const keys[] = {"h_index", "v_index", NULL};
        return walk_map(x, v, path, keys, xsec_pair, NULL);
    }
    case T_SCALE: {
        int w;
        oct_err err = get_word(x, v, path, opt_names("scale"), &w);
        x->p->params.scale = (uint32_t)w;
        return err;
    }
    case T_DISPLAY: {
        static const char *const keys[] = {"bscan", "enface", "confocal", NULL};
        return walk_map(x, v, path, keys, display_pair, NULL);
    }
    case T_PRODUCTS: return products_list(x, v, path);
    case T_KLIN: {
        static const char *const keys[] = {"interp", "taps", "coefs", "positions", NULL};
        return walk_map(x, v, path, keys, klin_pair, &s->klin);
    }
    case T_DISPERSION: {
        static const char *const keys[] = {"a2", "a3", "k0", NULL};
        return walk_map(x, v, path, keys, dispersion_pair, NULL);
    }
    case T_CMS: {
        static const char *const keys[] = {"calibration", "sample_type", "depths", "grid", NULL};
        return walk_map(x, v, path, keys, cms_pair, &s->cms);
    }
    case T_ANGIO: {
        static const char *const keys[] = {"metrics", "bands", "band_width", "align", NULL};
        return walk_map(x, v, path, keys, angio_pair, NULL);
    }
    case T_SLAB: {
        static const char *const keys[] = {"start", "end", NULL};
        return walk_map(x, v, path, keys, slab_pair, NULL);
    }
    }
    return OCT_OK;
}

/* The profile key of an option key (they differ where the profile nests). */
static const char *profile_key(const char *opt, const oct_params *pp)
{
    static const struct { const char *opt, *key; } map[] = {
        {"window", "window.type"},      {"lag_window", "msi.lag_window"},
        {"background", "background.mode"}, {"klin", "klin.interp"},
        {"klin.c0", "klin.coefs"},      {"klin.c1", "klin.coefs"},
        {"klin.c2", "klin.coefs"},      {"klin.c3", "klin.coefs"},
        {"klin.source", "klin.positions"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(map[i].opt, opt))
            return map[i].key;
    if (!strcmp(opt, "background.param"))
        return pp->background == OCT_BG_FPN ? "background.segment" : "background.frames";
    return opt;
}

/* The option table's static rules on every control value (gsc > 0, products
 * with an image, ranges), named by the profile key and its line. */
static oct_err table_checks(pctx *x)
{
    oct_control_values cv;
    oct_options_default(&cv);
    oct_control_from_params(&cv, &x->p->params);
    for (size_t i = 0; i < oct_options_count(); i++) {
        const oct_option *o = oct_option_at(i);
        oct_error oe;
        if (oct_option_check(o, &cv, &oe) == OCT_OK)
            continue;
        const char *key = profile_key(o->key, &x->p->params);
        size_t kl = strlen(o->key);
        const char *what = !strncmp(oe.msg, o->key, kl) && !strncmp(oe.msg + kl, ": ", 2)
                               ? oe.msg + kl + 2 : oe.msg;
        uint32_t line = oct_profile_key_line(x->p, key);
        return oct_error_set(x->e, OCT_EINVAL, "%s:%u: %s: %s", x->name, line ? line : 1u, key,
                             what);
    }
    return OCT_OK;
}

/* Checks that need several keys (or the geometry), once all are read. */
static oct_err cross_checks(pctx *x, yaml_node_t *root, top_seen *s)
{
    oct_profile *p = x->p;
    oct_params *pp = &p->params;
    oct_err terr = table_checks(x);
    if (terr)
        return terr;
    if (pp->window == OCT_WINDOW_GAUSSIAN && !(pp->window_param > 0))
        return pfail(x, s->win.param ? s->win.param : s->node[T_WINDOW], OCT_EINVAL,
                     "window.param", "gaussian needs sigma > 0 (a fraction of M), got %g",
                     pp->window_param);
    if (pp->window == OCT_WINDOW_TUKEY && !(pp->window_param >= 0 && pp->window_param <= 1))
        return pfail(x, s->win.param ? s->win.param : s->node[T_WINDOW], OCT_EINVAL,
                     "window.param", "tukey needs alpha in [0, 1], got %g", pp->window_param);
    if ((pp->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) && !*p->masks_path)
        return pfail(x, s->node[T_MSI] ? s->node[T_MSI] : s->node[T_METHODS], OCT_EINVAL,
                     "msi.masks.file", "required when methods has msi");
    if (pp->background == OCT_BG_REFERENCE && !*p->reference_path)
        return pfail(x, s->node[T_BACKGROUND], OCT_EINVAL, "background.reference",
                     "required when background.mode is reference");
    /* frames belongs to rolling, segment to fpn: one control value holds either */
    if (s->bg.frames && pp->background != OCT_BG_ROLLING)
        return pfail(x, s->bg.frames, OCT_EINVAL, "background.frames",
                     "only for background.mode rolling");
    if (s->bg.segment && pp->background != OCT_BG_FPN)
        return pfail(x, s->bg.segment, OCT_EINVAL, "background.segment",
                     "only for background.mode fpn");
    if (s->klin.coefs && s->klin.positions)
        return pfail(x, s->klin.positions, OCT_EINVAL, "klin.positions",
                     "give either klin.coefs or klin.positions, not both");
    if (pp->klin != OCT_KLIN_OFF && !s->klin.coefs && !s->klin.positions)
        return pfail(x, s->klin.interp, OCT_EINVAL, "klin.coefs",
                     "klin.interp %s needs klin.coefs [c0, c1, c2, c3] or klin.positions FILE",
                     pp->klin == OCT_KLIN_LINEAR ? "linear" : pp->klin == OCT_KLIN_CUBIC ? "cubic"
                                                                                          : "sinc");
    if (s->node[T_CMS]) {
        /* a cms: section is complete or absent: the engine builds its masks at start */
        const char *missing = !s->cms.cal ? "cms.calibration" : !s->cms.depths ? "cms.depths"
                              : !s->cms.grid ? "cms.grid" : !s->cms.start ? "cms.grid.start"
                              : !s->cms.step ? "cms.grid.step" : !s->cms.count ? "cms.grid.count"
                                                                               : NULL;
        if (missing)
            return pfail(x, s->node[T_CMS], OCT_EINVAL, missing, "required in a cms: section");
    } else if (pp->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) {
        return pfail(x, s->node[T_METHODS], OCT_EINVAL, "cms.calibration",
                     "a cms: section (calibration, depths, grid) is required when methods has cms");
    }
    if (!p->has_geometry)
        return OCT_OK;
    const oct_geometry *g = &p->geom;
    int32_t half = (int32_t)(g->samples / 2);
    if (pp->freq_cutoff > half)
        return pfail(x, s->node[T_FREQ], OCT_EINVAL, "freq_cutoff",
                     "%d is more than M/2 = %d (geometry.samples = %u)", pp->freq_cutoff, half,
                     g->samples);
    if (s->msi.lags && (pp->lag_lo <= -half || pp->lag_hi >= half))
        return pfail(x, s->msi.lags, OCT_EINVAL, "msi.lag_window",
                     "[%d, %d] must lie within (-M/2, M/2) = (%d, %d)", pp->lag_lo, pp->lag_hi,
                     -half, half);
    /* indices are checked for the products asked for that this geometry
     * makes (xsec_h/xsec_v: volume frames only, SPEC 2.4), so a B-scan
     * geometry works with a profile written for volumes (issue 14) */
    bool volume = g->lines > 1;
    if (volume && (pp->products & OCT_PRODUCT_BIT(OCT_KIND_XSEC_H)) &&
        (uint32_t)pp->xsec_h >= g->lines)
        return pfail(x, s->node[T_XSEC], OCT_EINVAL, "xsec.h_index",
                     "%d is not below geometry.lines = %u (products has xsec_h)", pp->xsec_h,
                     g->lines);
    if (volume && (pp->products & OCT_PRODUCT_BIT(OCT_KIND_XSEC_V)) &&
        (uint32_t)pp->xsec_v >= g->ascans)
        return pfail(x, s->node[T_XSEC], OCT_EINVAL, "xsec.v_index",
                     "%d is not below geometry.ascans = %u (products has xsec_v)", pp->xsec_v,
                     g->ascans);
    if (s->klin.coefs && pp->klin != OCT_KLIN_OFF) {
        /* the polynomial's positions must increase within [-1, M] (oct_engine.h) */
        double M = g->samples, prev = -INFINITY;
        for (uint32_t n = 0; n < g->samples; n++) {
            double t = n / M;
            double q = pp->klin_coef[0] +
                       t * (pp->klin_coef[1] + t * (pp->klin_coef[2] + t * pp->klin_coef[3]));
            if (!(q > prev) || q < -1.0 || q > M)
                return pfail(x, s->klin.coefs, OCT_EINVAL, "klin.coefs",
                             "position p[%u] = %g is %s (positions must increase within [-1, %u])",
                             n, q, q < -1.0 || q > M ? "out of range" : "not increasing",
                             g->samples);
            prev = q;
        }
    }
    (void)root;
    return OCT_OK;
}

/* libyaml's scanner is quadratic in the nesting depth (a 200 kB line of '['
 * takes a minute), so an event pass bounds the depth before the document is
 * built.  Syntax errors are left to the loader, which reports them. */
#define PROFILE_DEPTH_MAX 32

static oct_err depth_check(const char *name, const char *text, size_t len, oct_error *e)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot create a YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    oct_err err = OCT_OK;
    int depth = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev))
            break;
        yaml_event_type_t t = ev.type;
        unsigned long line = (unsigned long)ev.start_mark.line + 1;
        yaml_event_delete(&ev);
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > PROFILE_DEPTH_MAX) {
                err = oct_error_set(e, OCT_EPARSE, "%s:%lu: nested deeper than %d levels", name,
                                    line, PROFILE_DEPTH_MAX);
                break;
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (t == YAML_STREAM_END_EVENT) {
            break;
        }
    }
    yaml_parser_delete(&parser);
    return err;
}

oct_err oct_profile_parse(oct_profile *p, const char *text, size_t len, const char *path,
                          oct_error *e)
{
    const char *name = path && *path ? path : "(profile)";
    if (!text && len)
        return oct_error_set(e, OCT_EINVAL, "%s: no text", name);
    oct_err derr = depth_check(name, text ? text : "", len, e);
    if (derr)
        return derr;
    pctx x = {0};
    x.name = name;
    x.e = e;
    oct_cfg_dirname(x.base_dir, sizeof x.base_dir, name);
    /* a copy: on error the caller's profile is untouched */
    oct_profile *tmp = calloc(1, sizeof *tmp);
    if (!tmp)
        return oct_error_set(e, OCT_ENOMEM, "%s: out of memory", name);
    snprintf(tmp->source_path, sizeof tmp->source_path, "%s", name);
    oct_params_default(&tmp->params);
    tmp->repeats = 1;
    tmp->masks_type = OCT_SAMPLE_F32;
    tmp->cms_type = OCT_SAMPLE_F32;
    tmp->cms_step = 1.0;
    x.p = tmp;

    yaml_parser_t parser;
    yaml_document_t doc;
    oct_err err = OCT_OK;
    if (!yaml_parser_initialize(&parser)) {
        free(tmp);
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot create a YAML parser", name);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
    if (!yaml_parser_load(&parser, &doc)) {
        err = oct_error_set(e, OCT_EPARSE, "%s:%lu: YAML syntax error: %s%s%s", name,
                            (unsigned long)parser.problem_mark.line + 1,
                            parser.problem ? parser.problem : "unknown problem",
                            parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        free(tmp);
        return err;
    }
    x.doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || is_null(root)) {
        err = oct_error_set(e, OCT_EPARSE, "%s:1: (top level): the profile is empty", name);
    } else {
        /* a second document in the same file is most likely a mistake */
        static const char *const keys[] = {"geometry", "methods", "window", "freq_cutoff",
                                           "background", "msi", "enface", "xsec", "scale",
                                           "display", "products", "klin", "dispersion", "cms",
                                           "angio", "slab", NULL}; /* = enum top_key */
        top_seen seen;
        memset(&seen, 0, sizeof seen);
        err = walk_map(&x, root, "", keys, top_pair, &seen);
        if (!err)
            err = cross_checks(&x, root, &seen);
        if (!err) {
            yaml_document_t doc2;
            if (!yaml_parser_load(&parser, &doc2)) {
                err = oct_error_set(e, OCT_EPARSE, "%s:%lu: YAML syntax error: %s", name,
                                    (unsigned long)parser.problem_mark.line + 1,
                                    parser.problem ? parser.problem : "unknown problem");
            } else {
                if (yaml_document_get_root_node(&doc2))
                    err = oct_error_set(e, OCT_EPARSE,
                                        "%s:%lu: (top level): a second YAML document; a profile "
                                        "is one document",
                                        name, (unsigned long)doc2.start_mark.line + 1);
                yaml_document_delete(&doc2);
            }
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (!err)
        *p = *tmp;
    free(tmp);
    return err;
}

oct_err oct_profile_load(oct_profile *p, const char *path, oct_error *e)
{
    if (!path || !*path)
        return oct_error_set(e, OCT_EINVAL, "no profile file given");
    void *buf;
    size_t len;
    oct_err err = oct_cfg_read_file(path, PROFILE_FILE_MAX, &buf, &len, e);
    if (err)
        return err == OCT_ENOMEM ? err : (oct_err)OCT_EIO;
    err = oct_profile_parse(p, buf, len, path, e);
    free(buf);
    return err;
}
