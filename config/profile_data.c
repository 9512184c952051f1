/* profile_data.c - the processing profile (SPEC 5.2) once parsed by
 * profile.c: the "FILE:LINE: key" of its keys, the loading of its mask,
 * k-lin, CMS calibration and reference arrays (SPEC 5.3) and their release,
 * the check of its parameters against a setup (errors naming the profile
 * key behind the value), and the setup it fills in. */
#include "config_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "FILE:LINE: key" of a profile key (its parent's line when not given). */
const char *oct_profile_where(const oct_profile *p, const char *key, char *buf, size_t len)
{
    uint32_t line = oct_profile_key_line(p, key);
    snprintf(buf, len, "%s:%u: %s", p->source_path, line ? line : 1u, key);
    return buf;
}

oct_err oct_profile_load_data(const oct_profile *p, uint32_t samples, oct_profile_data *d,
                              oct_error *e)
{
    memset(d, 0, sizeof *d);
    oct_err err;
    char w[OCT_PATH_MAX + 80];
    bool want_masks = (p->params.methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) || *p->masks_path;
    if (want_masks) {
        if (!*p->masks_path) {
            /* no key to point at: the msi section, else the methods list */
            uint32_t line = oct_profile_key_line(p, "msi");
            if (!line)
                line = oct_profile_key_line(p, "methods");
            return oct_error_set(e, OCT_EINVAL, "%s:%u: msi.masks.file: required when methods has msi",
                                 p->source_path, line ? line : 1u);
        }
        err = oct_load_spectra(p->masks_path, p->masks_type ? p->masks_type : OCT_SAMPLE_F32,
                               samples, p->masks_count, &d->masks, &d->mask_count, e);
        if (err)
            return oct_error_prefix(e, err, "%s", oct_profile_where(p, "msi.masks.file", w, sizeof w));
    }
    if (*p->klin_path) {
        err = oct_load_positions(p->klin_path, samples, &d->klin_positions, e);
        if (err) {
            oct_profile_data_free(d);
            return oct_error_prefix(e, err, "%s", oct_profile_where(p, "klin.positions", w, sizeof w));
        }
    }
    if (*p->cms_path) {
        /* one calibration spectrum per listed depth: K x M */
        err = oct_load_spectra(p->cms_path, p->cms_type ? p->cms_type : OCT_SAMPLE_F32, samples,
                               p->cms_cal_count, &d->cms_cal, &d->cms_cal_count, e);
        if (err) {
            oct_profile_data_free(d);
            return oct_error_prefix(e, err, "%s (%u depths listed)",
                                    oct_profile_where(p, "cms.calibration", w, sizeof w), p->cms_cal_count);
        }
    }
    bool want_ref = p->params.background == OCT_BG_REFERENCE || *p->reference_path;
    if (want_ref) {
        if (!*p->reference_path) {
            oct_profile_data_free(d);
            return oct_error_set(e, OCT_EINVAL,
                                 "%s: required when background.mode is reference",
                                 oct_profile_where(p, "background.reference", w, sizeof w));
        }
        /* a raw reference is recorded by the same system: the frames' sample type */
        uint32_t rtype = p->has_geometry ? p->geom.sample_type : OCT_SAMPLE_F32;
        uint32_t rows;
        err = oct_load_spectra(p->reference_path, rtype, samples, 1, &d->reference, &rows, e);
        if (err) {
            oct_profile_data_free(d);
            return oct_error_prefix(e, err, "%s", oct_profile_where(p, "background.reference", w, sizeof w));
        }
    }
    return OCT_OK;
}

/* The profile key behind a value named at the start of an oct_params_check
 * message ("freq_cutoff = 200: ..."). */
static const char *param_key(const oct_profile *p, const char *msg)
{
    static const struct { const char *field, *key; } map[] = {
        {"geometry", "geometry"},
        {"methods", "methods"},
        {"window_param", "window.param"},
        {"window", "window.type"},
        {"freq_cutoff", "freq_cutoff"},
        {"lag_lo", "msi.lag_window"},
        {"lag_hi", "msi.lag_window"},
        {"scale", "scale"},
        {"background_param", NULL}, /* frames or segment: below */
        {"background", "background.mode"},
        {"enface_start", "enface.start"},
        {"enface_step", "enface.step"},
        {"enface_count", "enface.count"},
        {"xsec_h", "xsec.h_index"},
        {"xsec_v", "xsec.v_index"},
        {"gsc", "display"},
        {"contrast", "display"},
        {"brightness", "display"},
        {"products", "products"},
        {"klin_taps", "klin.taps"},
        {"klin_source", "klin.positions"},
        {"klin_coef", "klin.coefs"},
        {"klin position file", "klin.positions"},
        {"klin polynomial", "klin.coefs"},
        {"klin", "klin.interp"},
        {"disp_a2", "dispersion.a2"},
        {"disp_a3", "dispersion.a3"},
        {"disp_k0", "dispersion.k0"},
        {"cms", "cms"},
        {"angio.metrics", "angio.metrics"},
        {"angio.bands", "angio.bands"},
        {"angio.band_width", "angio.band_width"},
        {"angio.align", "angio.align"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t l = strlen(map[i].field);
        if (strncmp(msg, map[i].field, l) != 0 || (msg[l] != ' ' && msg[l] != ':' && msg[l] != '['))
            continue;
        if (map[i].key)
            return map[i].key;
        return p->params.background == OCT_BG_FPN ? "background.segment" : "background.frames";
    }
    return NULL;
}

oct_err oct_profile_check(const oct_profile *p, const oct_setup *s, oct_error *e)
{
    oct_err err = oct_params_check(&p->params, s, e);
    if (!err)
        return OCT_OK;
    char w[OCT_PATH_MAX + 80];
    const char *key = e ? param_key(p, e->msg) : NULL;
    if (!key)
        return oct_error_prefix(e, err, "%s", p->source_path);
    return oct_error_prefix(e, err, "%s", oct_profile_where(p, key, w, sizeof w));
}

void oct_profile_data_free(oct_profile_data *d)
{
    if (!d)
        return;
    free(d->masks);
    free(d->reference);
    free(d->klin_positions);
    free(d->cms_cal);
    memset(d, 0, sizeof *d);
}

void oct_profile_setup(const oct_profile *p, const oct_profile_data *d, oct_setup *s)
{
    s->repeats = p->repeats; /* the engine checks it against the frames' lines */
    s->masks = d->masks;
    s->mask_count = d->masks ? d->mask_count : 0;
    s->normalize_masks = p->masks_normalize;
    s->reference = d->reference;
    s->klin_positions = d->klin_positions;
    bool cms = d->cms_cal && d->cms_cal_count >= 2 && p->cms_count > 0;
    s->cms_cal = cms ? d->cms_cal : NULL;
    s->cms_cal_count = cms ? d->cms_cal_count : 0;
    s->cms_depths = cms ? p->cms_depths : NULL;
    s->cms_start = p->cms_start;
    s->cms_step = p->cms_step;
    s->cms_count = cms ? p->cms_count : 0;
}
