/* checks.c - see checks.h. */
#include "checks.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

oct_err octd_params_check_nogeom(const oct_params *p, const oct_profile *prof, oct_error *e)
{
    if (!p || !prof)
        return oct_error_set(e, OCT_EINVAL, "params or profile is NULL");
    /* The engine's rules with the geometry-dependent values set aside (they
     * are checked below), against a stand-in geometry. */
    oct_params q = *p;
    q.freq_cutoff = 0;
    q.lag_lo = q.lag_hi = 0;
    q.xsec_h = q.xsec_v = 0;
    const oct_geometry g = {.samples = OCT_SAMPLES_MIN, .ascans = 1, .lines = 1,
                            .sample_type = OCT_SAMPLE_U16, .sample_shift = 0};
    oct_err err = oct_params_validate(&q, &g, prof->masks_path[0] ? 1 : 0,
                                      prof->reference_path[0] != '\0', e);
    if (err)
        return err;
    /* what oct_params_check adds beyond oct_params_validate */
    bool cms = prof->cms_path[0] && prof->cms_count > 0 && prof->cms_cal_count >= 2;
    if ((p->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) && !cms)
        return oct_error_set(e, OCT_EINVAL,
                             "methods = 0x%x: cms needs a calibration and a depth grid "
                             "(cms_count = 0)", p->methods);
    if (p->klin != OCT_KLIN_OFF && p->klin_source == OCT_KLIN_FILE && !prof->klin_path[0])
        return oct_error_set(e, OCT_EINVAL,
                             "klin_source = 1 (file): no k-linearisation positions were loaded");
    /* The geometry-dependent rules, as far as any geometry allows. */
    const int32_t half = (int32_t)(OCT_SAMPLES_MAX / 2);
    if (p->freq_cutoff < 0 || p->freq_cutoff > half)
        return oct_error_set(e, OCT_EINVAL,
                             "freq_cutoff = %d: must be in [0, samples/2] (0 <= F <= samples/2, "
                             "samples <= %u)", p->freq_cutoff, OCT_SAMPLES_MAX);
    if (p->lag_lo <= -half || p->lag_lo >= half)
        return oct_error_set(e, OCT_EINVAL,
                             "lag_lo = %d: must be in (-samples/2, samples/2) "
                             "(-samples/2 < W1 <= W2 < samples/2, samples <= %u)",
                             p->lag_lo, OCT_SAMPLES_MAX);
    if (p->lag_hi <= -half || p->lag_hi >= half)
        return oct_error_set(e, OCT_EINVAL,
                             "lag_hi = %d: must be in (-samples/2, samples/2) "
                             "(-samples/2 < W1 <= W2 < samples/2, samples <= %u)",
                             p->lag_hi, OCT_SAMPLES_MAX);
    if (p->lag_lo > p->lag_hi)
        return oct_error_set(e, OCT_EINVAL, "lag_lo = %d > lag_hi = %d: must be W1 <= W2",
                             p->lag_lo, p->lag_hi);
    if (p->xsec_h < 0)
        return oct_error_set(e, OCT_EINVAL, "xsec_h = %d: must be >= 0 (a line index < lines)",
                             p->xsec_h);
    if (p->xsec_v < 0)
        return oct_error_set(e, OCT_EINVAL,
                             "xsec_v = %d: must be >= 0 (an A-scan index < ascans)", p->xsec_v);
    return OCT_OK;
}

static bool is_npy(const char *path, int fd)
{
    size_t n = strlen(path);
    if (n >= 4 && !strcasecmp(path + n - 4, ".npy"))
        return true;
    unsigned char m[6];
    return pread(fd, m, sizeof m, 0) == (ssize_t)sizeof m && !memcmp(m, "\x93NUMPY", 6);
}

/* One data file: exists, readable, parses.  elem: bytes of a raw element;
 * rows: declared rows (0 = any); positions: klin.positions (1-D). */
static oct_err file_check(const oct_profile *prof, const char *key, const char *path,
                          size_t elem, uint32_t rows, bool positions, oct_error *e)
{
    if (!elem)
        elem = 1; /* an unknown raw type: the loader names it later */
    char w[OCT_PATH_MAX + 80]; /* "profile:line: key" (SPEC 5.2) */
    oct_profile_where(prof, key, w, sizeof w);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return oct_error_set(e, errno == EACCES ? OCT_EPERM : OCT_EIO, "%s: %s: %s",
                             w, path, strerror(errno));
    struct stat st;
    oct_err err = OCT_OK;
    if (fstat(fd, &st) != 0)
        err = oct_error_set(e, OCT_EIO, "%s: %s: %s", w, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        err = oct_error_set(e, OCT_EINVAL, "%s: %s: not a regular file", w, path);
    else if (st.st_size == 0)
        err = oct_error_set(e, OCT_ESIZE, "%s: %s: empty file", w, path);
    if (err) {
        close(fd);
        return err;
    }
    bool npy = is_npy(path, fd);
    close(fd);
    if (!npy) {
        uint64_t unit = (uint64_t)elem * (rows ? rows : 1);
        if ((uint64_t)st.st_size % unit)
            return oct_error_set(e, OCT_ESIZE,
                                 "%s: %s: raw file of %lld bytes is not a multiple of %llu "
                                 "bytes (%u row(s) of %zu-byte values)", w, path, (long long)st.st_size,
                                 (unsigned long long)unit, rows ? rows : 1, elem);
        return OCT_OK;
    }
    oct_array a = {0};
    err = oct_npy_load(path, &a, e);
    if (err)
        return oct_error_prefix(e, err, "%s", w);
    uint64_t r = a.ndim == 2 ? a.shape[0] : 1;
    if (a.ndim < 1 || a.ndim > 2 || a.count == 0 || (positions && r != 1))
        err = oct_error_set(e, OCT_ESIZE, "%s: %s: a %d-d array of %llu values: expected %s",
                            w, path, a.ndim, (unsigned long long)a.count,
                            positions ? "(M,) positions" : "(R, M) or (M,) spectra");
    else if (rows && r != rows)
        err = oct_error_set(e, OCT_ESIZE, "%s: %s: holds %llu spectra but %u are declared",
                            w, path, (unsigned long long)r, rows);
    oct_array_free(&a);
    return err;
}

oct_err octd_profile_files_check(const oct_profile *p, oct_error *e)
{
    oct_err err;
    char w[OCT_PATH_MAX + 80];
    if ((p->params.methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) && !p->masks_path[0]) {
        /* the line of the msi section, else of methods (as the loader says it) */
        uint32_t line = oct_profile_key_line(p, "msi");
        if (!line)
            line = oct_profile_key_line(p, "methods");
        return oct_error_set(e, OCT_EINVAL, "%s:%u: msi.masks.file: required when methods has msi",
                             p->source_path, line ? line : 1u);
    }
    if (p->params.background == OCT_BG_REFERENCE && !p->reference_path[0])
        return oct_error_set(e, OCT_EINVAL, "%s: required when background.mode is reference",
                             oct_profile_where(p, "background.reference", w, sizeof w));
    if (p->masks_path[0] &&
        (err = file_check(p, "msi.masks.file", p->masks_path,
                          oct_sample_size(p->masks_type ? p->masks_type : OCT_SAMPLE_F32),
                          p->masks_count, false, e)))
        return err;
    if (p->reference_path[0]) {
        /* raw: the frames' sample type (f32 when the profile has no geometry) */
        uint32_t t = p->has_geometry ? p->geom.sample_type : OCT_SAMPLE_F32;
        if ((err = file_check(p, "background.reference", p->reference_path, oct_sample_size(t), 1,
                              false, e)))
            return err;
    }
    /* raw positions are f64 or f32: a multiple of 4 bytes */
    if (p->klin_path[0] && (err = file_check(p, "klin.positions", p->klin_path, 4, 1, true, e)))
        return err;
    if (p->cms_path[0] &&
        (err = file_check(p, "cms.calibration", p->cms_path,
                          oct_sample_size(p->cms_type ? p->cms_type : OCT_SAMPLE_F32),
                          p->cms_cal_count, false, e)))
        return err;
    return OCT_OK;
}
