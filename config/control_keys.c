/* control_keys.c - operator names of the control values (see oct_control_keys.h). */
#include "oct_control_keys.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys, ranges and names are those of the option table (ipc/options.c,
 * oct_options.h); this file adds the one compound spelling (klin.coefs: the
 * four coefficients at once) and the conversions to the engine's values. */
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *const coef_keys[] = {"klin.coefs", "klin_coefs"};

static bool is_coefs(const char *key)
{
    for (size_t i = 0; i < NELEM(coef_keys); i++)
        if (!strcmp(key, coef_keys[i]))
            return true;
    return false;
}

size_t oct_control_key_count(void) { return oct_options_count(); }

const char *oct_control_key_name(size_t i)
{
    const oct_option *o = oct_option_at(i);
    return o ? o->key : NULL;
}

int oct_control_key_abi_minor(const char *key)
{
    if (key && is_coefs(key))
        return 1;
    const oct_option *o = oct_option_find(key);
    return o ? (int)o->abi_minor : -1;
}

oct_err oct_control_unknown_key(const char *key, oct_error *e)
{
    const char *near = oct_option_suggest(key);
    if (near)
        return oct_error_set(e, OCT_EINVAL,
                             "unknown key '%s' (did you mean '%s'? `octctl help` lists the keys)",
                             key, near);
    return oct_error_set(e, OCT_EINVAL, "unknown key '%s' (`octctl help` lists the keys)", key);
}

/* "c0,c1,c2,c3" (brackets tolerated) through the four klin.cI options. */
static oct_err set_coefs(oct_control_values *v, const char *key, const char *value, oct_error *e)
{
    char buf[256];
    size_t len = strlen(value);
    const char *s = value;
    while (len && isspace((unsigned char)*s)) {
        s++;
        len--;
    }
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
    }
    if (len >= sizeof buf)
        return oct_error_set(e, OCT_EINVAL, "%s: '%s' is too long", key, value);
    memcpy(buf, s, len);
    buf[len] = '\0';
    oct_control_values t = *v;
    char *item = buf;
    for (int i = 0; i < 4; i++) {
        char *comma = strchr(item, ',');
        if ((i < 3) != (comma != NULL))
            return oct_error_set(e, OCT_EINVAL, "%s: '%s' is not c0,c1,c2,c3 (4 numbers)", key,
                                 value);
        if (comma)
            *comma = '\0';
        char k[24];
        snprintf(k, sizeof k, "klin.c%d", i);
        oct_err rc = oct_option_parse_unchecked(oct_option_find(k), item, &t, e);
        if (rc)
            return oct_error_prefix(e, rc, "%s", key);
        item = comma ? comma + 1 : item;
    }
    *v = t;
    return OCT_OK;
}

oct_err oct_control_key_set(oct_control_values *v, const char *key, const char *value,
                            oct_error *e)
{
    if (!key || !value)
        return oct_error_set(e, OCT_EINVAL, "missing key or value");
    if (is_coefs(key))
        return set_coefs(v, key, value, e);
    const oct_option *o = oct_option_find(key);
    if (!o)
        return oct_control_unknown_key(key, e);
    /* syntax only: ranges and rules are octd's whole-generation check (the
     * same table), so that a rejection is in the status block */
    oct_err rc = oct_option_parse_unchecked(o, value, v, e);
    /* an old spelling: say which key it means */
    if (rc && strcmp(key, o->key) != 0 && e && !strstr(e->msg, key))
        oct_error_prefix(e, rc, "%s", key);
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
    while (len && isspace((unsigned char)*k)) {
        k++;
        len--;
    }
    while (len && isspace((unsigned char)k[len - 1]))
        len--;
    if (len == 0 || len >= sizeof key)
        return oct_error_set(e, OCT_EINVAL, "'%s': bad key", assignment);
    memcpy(key, k, len);
    key[len] = '\0';
    return oct_control_key_set(v, key, eq + 1, e);
}

oct_err oct_control_key_get(const oct_control_values *v, const char *key, char *buf, size_t len,
                            oct_error *e)
{
    if (!key)
        return oct_error_set(e, OCT_EINVAL, "missing key");
    const oct_option *o = oct_option_find(key);
    if (!o && !is_coefs(key))
        return oct_control_unknown_key(key, e);
    if (!buf || len == 0)
        return oct_error_set(e, OCT_EINVAL, "%s: no room for the value", key);
    if (o) {
        oct_option_format(o, v, buf, len);
        return OCT_OK;
    }
    /* %.17g: a double read back by `set` is the same double */
    snprintf(buf, len, "%.17g,%.17g,%.17g,%.17g", v->klin_coef[0], v->klin_coef[1],
             v->klin_coef[2], v->klin_coef[3]);
    return OCT_OK;
}

size_t oct_control_format_all(const oct_control_values *v, char *buf, size_t len)
{
    size_t pos = 0;
    char val[160];
    for (size_t i = 0; i < oct_options_count(); i++) {
        const oct_option *o = oct_option_at(i);
        oct_option_format(o, v, val, sizeof val);
        int w = snprintf(buf && pos < len ? buf + pos : NULL, buf && pos < len ? len - pos : 0,
                         "%s=%s\n", o->key, val);
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
