/* npy.c - NumPy .npy arrays (format versions 1-3) and raw spectra files.
 *
 * Everything read from a file is untrusted: the header length, the dict
 * text and the shape are checked against the file length with overflow-safe
 * arithmetic before any data is touched. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A header dict longer than this is not something numpy writes. */
#define NPY_HEADER_MAX (1u << 20)
/* Largest .npy accepted (a stack of frames may exceed one frame). */
#define NPY_FILE_MAX (1ull << 36)

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

size_t oct_dtype_size(oct_dtype t)
{
    switch (t) {
    case OCT_DTYPE_U8: return 1;
    case OCT_DTYPE_U16:
    case OCT_DTYPE_I16: return 2;
    case OCT_DTYPE_F32: return 4;
    case OCT_DTYPE_F64: return 8;
    default: return 0;
    }
}

const char *oct_dtype_name(oct_dtype t)
{
    switch (t) {
    case OCT_DTYPE_U8: return "u8";
    case OCT_DTYPE_U16: return "u16";
    case OCT_DTYPE_I16: return "i16";
    case OCT_DTYPE_F32: return "f32";
    case OCT_DTYPE_F64: return "f64";
    default: return "none";
    }
}

void oct_array_free(oct_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- header dict parser: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ---- */
typedef struct hparse {
    const char *s, *end;
    const char *name;
    oct_error *e;
} hparse;

static void hp_ws(hparse *h)
{
    while (h->s < h->end && isspace((unsigned char)*h->s))
        h->s++;
}

/* A quoted Python string ('..' or ".."); no escapes are needed for the keys
 * and dtype strings numpy writes. */
static oct_err hp_string(hparse *h, char *out, size_t out_len)
{
    hp_ws(h);
    if (h->s >= h->end || (*h->s != '\'' && *h->s != '"'))
        return oct_error_set(h->e, OCT_EPARSE, "%s: .npy header: expected a quoted string",
                             h->name);
    char q = *h->s++;
    size_t n = 0;
    while (h->s < h->end && *h->s != q) {
        if (*h->s == '\\' || n + 1 >= out_len)
            return oct_error_set(h->e, OCT_EPARSE,
                                 "%s: .npy header: string too long or with escapes", h->name);
        out[n++] = *h->s++;
    }
    if (h->s >= h->end)
        return oct_error_set(h->e, OCT_EPARSE, "%s: .npy header: unterminated string", h->name);
    h->s++;
    out[n] = '\0';
    return OCT_OK;
}

static bool hp_char(hparse *h, char c)
{
    hp_ws(h);
    if (h->s < h->end && *h->s == c) {
        h->s++;
        return true;
    }
    return false;
}

static oct_err hp_shape(hparse *h, oct_array *a)
{
    if (!hp_char(h, '('))
        return oct_error_set(h->e, OCT_EPARSE, "%s: .npy header: 'shape' is not a tuple", h->name);
    a->ndim = 0;
    for (;;) {
        if (hp_char(h, ')'))
            break;
        hp_ws(h);
        if (h->s >= h->end || !isdigit((unsigned char)*h->s))
            return oct_error_set(h->e, OCT_EPARSE,
                                 "%s: .npy header: 'shape' holds something other than a "
                                 "non-negative integer",
                                 h->name);
        uint64_t v = 0;
        while (h->s < h->end && isdigit((unsigned char)*h->s)) {
            if (v > (UINT64_MAX - 9) / 10)
                return oct_error_set(h->e, OCT_ESIZE, "%s: .npy header: a dimension overflows",
                                     h->name);
            v = v * 10 + (uint64_t)(*h->s++ - '0');
        }
        if (h->s < h->end && (*h->s == 'L' || *h->s == 'l'))
            h->s++; /* Python 2 long suffix */
        if (a->ndim >= OCT_NPY_MAX_DIMS)
            return oct_error_set(h->e, OCT_EUNSUPPORTED,
                                 "%s: .npy header: more than %d dimensions", h->name,
                                 OCT_NPY_MAX_DIMS);
        a->shape[a->ndim++] = v;
        if (hp_char(h, ','))
            continue;
        if (hp_char(h, ')'))
            break;
        return oct_error_set(h->e, OCT_EPARSE, "%s: .npy header: bad 'shape' tuple", h->name);
    }
    return OCT_OK;
}

typedef struct npy_info {
    oct_dtype dtype;
    bool swap;         /* big-endian data */
    size_t data_off;
} npy_info;

static oct_err parse_descr(const char *d, npy_info *ni, const char *name, oct_error *e)
{
    size_t n = strlen(d);
    if (n == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
        char kind = d[1], size = d[2];
        ni->swap = d[0] == '>';
        if (kind == 'u' && size == '1') { ni->dtype = OCT_DTYPE_U8; ni->swap = false; return OCT_OK; }
        if (kind == 'u' && size == '2') { ni->dtype = OCT_DTYPE_U16; return OCT_OK; }
        if (kind == 'i' && size == '2') { ni->dtype = OCT_DTYPE_I16; return OCT_OK; }
        if (kind == 'f' && size == '4') { ni->dtype = OCT_DTYPE_F32; return OCT_OK; }
        if (kind == 'f' && size == '8') { ni->dtype = OCT_DTYPE_F64; return OCT_OK; }
    }
    return oct_error_set(e, OCT_EUNSUPPORTED,
                         "%s: .npy dtype '%s' is not supported (supported: uint8, uint16, int16, "
                         "float32, float64, either byte order)",
                         name, d);
}

/* Parses magic, version and header dict; fills a (without data) and ni. */
static oct_err npy_header(const unsigned char *buf, size_t len, const char *name, oct_array *a,
                          npy_info *ni, oct_error *e)
{
    if (len < 10 || memcmp(buf, npy_magic, sizeof npy_magic) != 0)
        return oct_error_set(e, OCT_EPARSE, "%s: not a .npy file (bad magic)", name);
    unsigned major = buf[6];
    size_t hlen, pre;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return oct_error_set(e, OCT_EPARSE, "%s: .npy file truncated in its preamble", name);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
        pre = 12;
    } else {
        return oct_error_set(e, OCT_EUNSUPPORTED, "%s: .npy format version %u.%u not supported",
                             name, major, buf[7]);
    }
    if (hlen > NPY_HEADER_MAX)
        return oct_error_set(e, OCT_ESIZE, "%s: .npy header length %zu is absurd (max %u)", name,
                             hlen, NPY_HEADER_MAX);
    if (hlen > len - pre)
        return oct_error_set(e, OCT_ESIZE,
                             "%s: .npy header of %zu bytes is longer than the file (%zu bytes)",
                             name, hlen, len);
    ni->data_off = pre + hlen;

    hparse h = {(const char *)buf + pre, (const char *)buf + pre + hlen, name, e};
    oct_err err;
    if (!hp_char(&h, '{'))
        return oct_error_set(e, OCT_EPARSE, "%s: .npy header is not a dict", name);
    bool have_descr = false, have_order = false, have_shape = false;
    char key[32], descr[32];
    for (;;) {
        if (hp_char(&h, '}'))
            break;
        if ((err = hp_string(&h, key, sizeof key)))
            return err;
        if (!hp_char(&h, ':'))
            return oct_error_set(e, OCT_EPARSE, "%s: .npy header: ':' missing after '%s'", name,
                                 key);
        if (!strcmp(key, "descr")) {
            if (have_descr)
                return oct_error_set(e, OCT_EPARSE, "%s: .npy header: 'descr' twice", name);
            hp_ws(&h);
            if (h.s < h.end && *h.s == '[')
                return oct_error_set(e, OCT_EUNSUPPORTED,
                                     "%s: .npy structured dtypes are not supported", name);
            if ((err = hp_string(&h, descr, sizeof descr)))
                return err;
            if ((err = parse_descr(descr, ni, name, e)))
                return err;
            have_descr = true;
        } else if (!strcmp(key, "fortran_order")) {
            if (have_order)
                return oct_error_set(e, OCT_EPARSE, "%s: .npy header: 'fortran_order' twice", name);
            hp_ws(&h);
            if ((size_t)(h.end - h.s) >= 4 && !memcmp(h.s, "True", 4))
                return oct_error_set(e, OCT_EUNSUPPORTED,
                                     "%s: .npy array is in Fortran order; save it in C order "
                                     "(numpy.ascontiguousarray)",
                                     name);
            if ((size_t)(h.end - h.s) < 5 || memcmp(h.s, "False", 5))
                return oct_error_set(e, OCT_EPARSE,
                                     "%s: .npy header: 'fortran_order' is not True or False", name);
            h.s += 5;
            have_order = true;
        } else if (!strcmp(key, "shape")) {
            if (have_shape)
                return oct_error_set(e, OCT_EPARSE, "%s: .npy header: 'shape' twice", name);
            if ((err = hp_shape(&h, a)))
                return err;
            have_shape = true;
        } else {
            return oct_error_set(e, OCT_EPARSE, "%s: .npy header: unknown key '%s'", name, key);
        }
        if (hp_char(&h, ','))
            continue;
        if (hp_char(&h, '}'))
            break;
        return oct_error_set(e, OCT_EPARSE, "%s: .npy header: ',' or '}' expected after '%s'",
                             name, key);
    }
    if (!have_descr || !have_order || !have_shape)
        return oct_error_set(e, OCT_EPARSE, "%s: .npy header lacks '%s'", name,
                             !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    a->dtype = ni->dtype;
    /* overflow-safe element count and byte size against the remaining file */
    size_t avail = len - ni->data_off, esize = oct_dtype_size(a->dtype);
    uint64_t count = 1, bytes;
    bool overflow = false;
    for (int i = 0; i < a->ndim; i++)
        overflow |= __builtin_mul_overflow(count, a->shape[i], &count);
    overflow |= __builtin_mul_overflow(count, (uint64_t)esize, &bytes);
    if (overflow)
        return oct_error_set(e, OCT_ESIZE,
                             "%s: .npy shape needs more data than the %zu bytes the file has "
                             "(its size overflows)",
                             name, avail);
    if (bytes != avail)
        return oct_error_set(e, OCT_ESIZE,
                             "%s: .npy shape needs %llu data bytes but the file has %zu", name,
                             (unsigned long long)bytes, avail);
    a->count = count;
    return OCT_OK;
}

static void swap_bytes(void *data, uint64_t count, size_t esize)
{
    unsigned char *p = data;
    for (uint64_t i = 0; i < count; i++, p += esize)
        for (size_t k = 0; k < esize / 2; k++) {
            unsigned char t = p[k];
            p[k] = p[esize - 1 - k];
            p[esize - 1 - k] = t;
        }
}

oct_err oct_npy_parse(const void *buf, size_t len, const char *name, oct_array *a, oct_error *e)
{
    memset(a, 0, sizeof *a);
    if (!name)
        name = "(buffer)";
    if (!buf)
        return oct_error_set(e, OCT_EINVAL, "%s: no data", name);
    npy_info ni = {0};
    oct_err err = npy_header(buf, len, name, a, &ni, e);
    if (err) {
        memset(a, 0, sizeof *a);
        return err;
    }
    size_t bytes = len - ni.data_off;
    a->data = malloc(bytes ? bytes : 1);
    if (!a->data) {
        memset(a, 0, sizeof *a);
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot allocate %zu bytes", name, bytes);
    }
    memcpy(a->data, (const unsigned char *)buf + ni.data_off, bytes);
    if (ni.swap)
        swap_bytes(a->data, a->count, oct_dtype_size(a->dtype));
    return OCT_OK;
}

oct_err oct_npy_load(const char *path, oct_array *a, oct_error *e)
{
    memset(a, 0, sizeof *a);
    void *buf;
    size_t len;
    oct_err err = oct_cfg_read_file(path, NPY_FILE_MAX, &buf, &len, e);
    if (err)
        return err;
    npy_info ni = {0};
    err = npy_header(buf, len, path, a, &ni, e);
    if (err) {
        free(buf);
        memset(a, 0, sizeof *a);
        return err;
    }
    /* move the data to the front instead of copying it: frames can be large */
    size_t bytes = len - ni.data_off;
    memmove(buf, (unsigned char *)buf + ni.data_off, bytes);
    void *shrunk = realloc(buf, bytes ? bytes : 1);
    a->data = shrunk ? shrunk : buf;
    if (ni.swap)
        swap_bytes(a->data, a->count, oct_dtype_size(a->dtype));
    return OCT_OK;
}

static const char *npy_descr(oct_dtype t)
{
    switch (t) {
    case OCT_DTYPE_U8: return "|u1";
    case OCT_DTYPE_U16: return "<u2";
    case OCT_DTYPE_I16: return "<i2";
    case OCT_DTYPE_F32: return "<f4";
    case OCT_DTYPE_F64: return "<f8";
    default: return NULL;
    }
}

oct_err oct_npy_save(const char *path, oct_dtype dtype, int ndim, const uint64_t *shape,
                     const void *data, oct_error *e)
{
    return oct_npy_save_at(AT_FDCWD, path, dtype, ndim, shape, data, e);
}

oct_err oct_npy_save_at(int dirfd, const char *path, oct_dtype dtype, int ndim,
                        const uint64_t *shape, const void *data, oct_error *e)
{
    const char *descr = npy_descr(dtype);
    if (!descr)
        return oct_error_set(e, OCT_EINVAL, "%s: cannot save dtype %d as .npy", path, (int)dtype);
    if (ndim < 0 || ndim > OCT_NPY_MAX_DIMS || (ndim > 0 && !shape))
        return oct_error_set(e, OCT_EINVAL, "%s: %d dimensions (at most %d)", path, ndim,
                             OCT_NPY_MAX_DIMS);
    size_t esize = oct_dtype_size(dtype);
    uint64_t count = 1;
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && count > (uint64_t)(SIZE_MAX / 2 / esize) / shape[i])
            return oct_error_set(e, OCT_ESIZE, "%s: array too large to save", path);
        count *= shape[i];
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%llu%s", (unsigned long long)shape[i],
                      ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
    }
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    if (count && !data)
        return oct_error_set(e, OCT_EINVAL, "%s: no data", path);
    /* version 1 preamble (10 bytes); total header padded to 64 bytes, ending in '\n' */
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    size_t hlen = total - 10;
    size_t bytes = (size_t)count * esize;
    unsigned char *out = malloc(total + bytes);
    if (!out)
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot allocate %zu bytes", path, total + bytes);
    memcpy(out, npy_magic, 6);
    out[6] = 1;
    out[7] = 0;
    out[8] = (unsigned char)(hlen & 0xff);
    out[9] = (unsigned char)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', hlen - (size_t)n - 1);
    out[total - 1] = '\n';
    if (bytes)
        memcpy(out + total, data, bytes);
    oct_err err = oct_file_write_atomic_at(dirfd, path, out, total + bytes, e);
    free(out);
    return err;
}

/* ---------------- spectra (masks, reference) ---------------- */

static oct_dtype dtype_of_sample(uint32_t t)
{
    switch (t) {
    case OCT_SAMPLE_U16: return OCT_DTYPE_U16;
    case OCT_SAMPLE_I16: return OCT_DTYPE_I16;
    case OCT_SAMPLE_F32: return OCT_DTYPE_F32;
    default: return OCT_DTYPE_NONE;
    }
}

/* Converts count little-endian values of dtype to float, rejecting non-finite ones. */
static oct_err to_float(const void *src, oct_dtype t, uint64_t count, uint32_t samples,
                        float *dst, const char *path, oct_error *e)
{
    for (uint64_t i = 0; i < count; i++) {
        float v;
        switch (t) {
        case OCT_DTYPE_U8: v = ((const uint8_t *)src)[i]; break;
        case OCT_DTYPE_U16: { uint16_t x; memcpy(&x, (const char *)src + 2 * i, 2); v = x; break; }
        case OCT_DTYPE_I16: { int16_t x; memcpy(&x, (const char *)src + 2 * i, 2); v = x; break; }
        case OCT_DTYPE_F32: memcpy(&v, (const char *)src + 4 * i, 4); break;
        case OCT_DTYPE_F64: { double x; memcpy(&x, (const char *)src + 8 * i, 8); v = (float)x; break; }
        default: return oct_error_set(e, OCT_EINVAL, "%s: bad dtype", path);
        }
        if (!isfinite(v))
            return oct_error_set(e, OCT_EINVAL,
                                 "%s: value %llu (row %llu, sample %llu) is not a finite float",
                                 path, (unsigned long long)i, (unsigned long long)(i / samples),
                                 (unsigned long long)(i % samples));
        dst[i] = v;
    }
    return OCT_OK;
}

static bool has_npy_suffix(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcasecmp(path + n - 4, ".npy");
}

oct_err oct_load_spectra(const char *path, uint32_t raw_type, uint32_t samples,
                         uint32_t expect_rows, float **out, uint32_t *rows, oct_error *e)
{
    *out = NULL;
    if (rows)
        *rows = 0;
    if (!path || !*path)
        return oct_error_set(e, OCT_EINVAL, "spectra: no file given");
    if (samples == 0 || samples > OCT_SAMPLES_MAX)
        return oct_error_set(e, OCT_EINVAL, "%s: samples = %u out of range", path, samples);
    void *buf;
    size_t len;
    /* R <= 2^20 masks of M <= 8192 doubles: bounded well below this */
    oct_err err = oct_cfg_read_file(path, 1ull << 34, &buf, &len, e);
    if (err)
        return err;
    bool npy = has_npy_suffix(path) || (len >= 6 && !memcmp(buf, npy_magic, 6));
    const void *data;
    oct_dtype dtype;
    uint64_t count, R;
    oct_array a = {0};
    if (npy) {
        npy_info ni = {0};
        err = npy_header(buf, len, path, &a, &ni, e);
        if (err)
            goto out;
        if (ni.swap)
            swap_bytes((unsigned char *)buf + ni.data_off, a.count, oct_dtype_size(a.dtype));
        data = (unsigned char *)buf + ni.data_off;
        dtype = a.dtype;
        count = a.count;
        if (a.ndim == 1 && a.shape[0] == samples) {
            R = 1;
        } else if (a.ndim == 2 && a.shape[1] == samples) {
            R = a.shape[0];
        } else {
            char shp[96] = "";
            int n = 0;
            for (int i = 0; i < a.ndim && n < (int)sizeof shp - 24; i++)
                n += snprintf(shp + n, sizeof shp - (size_t)n, "%s%llu", i ? ", " : "",
                              (unsigned long long)a.shape[i]);
            if (expect_rows)
                err = oct_error_set(e, OCT_ESIZE,
                                    "%s: array of shape (%s) does not match the expected "
                                    "(%u, %u)",
                                    path, shp, expect_rows, samples);
            else
                err = oct_error_set(e, OCT_ESIZE,
                                    "%s: array of shape (%s) does not hold spectra of %u "
                                    "samples: expected (R, %u) or (%u,)",
                                    path, shp, samples, samples, samples);
            goto out;
        }
        if (expect_rows && R != expect_rows) {
            err = oct_error_set(e, OCT_ESIZE,
                                "%s: holds (%llu, %u) spectra but (%u, %u) are expected", path,
                                (unsigned long long)R, samples, expect_rows, samples);
            goto out;
        }
    } else {
        dtype = dtype_of_sample(raw_type);
        if (dtype == OCT_DTYPE_NONE) {
            err = oct_error_set(e, OCT_EINVAL, "%s: raw sample type %u unknown", path, raw_type);
            goto out;
        }
        size_t row_bytes = (size_t)samples * oct_dtype_size(dtype);
        if (expect_rows) {
            uint64_t want = (uint64_t)expect_rows * row_bytes;
            if (len != want) {
                err = oct_error_set(e, OCT_ESIZE,
                                    "%s: raw file of %zu bytes, expected %llu bytes (%u x %u %s)",
                                    path, len, (unsigned long long)want, expect_rows, samples,
                                    oct_dtype_name(dtype));
                goto out;
            }
        } else if (len == 0 || len % row_bytes) {
            err = oct_error_set(e, OCT_ESIZE,
                                "%s: raw file of %zu bytes is not a whole number of spectra "
                                "(%zu bytes = %u %s each)",
                                path, len, row_bytes, samples, oct_dtype_name(dtype));
            goto out;
        }
        R = len / row_bytes;
        count = R * samples;
        data = buf;
    }
    if (R == 0 || R > UINT32_MAX) {
        err = oct_error_set(e, OCT_ESIZE, "%s: %llu spectra: must be 1 to %u", path,
                            (unsigned long long)R, UINT32_MAX);
        goto out;
    }
    float *f = malloc((size_t)count * sizeof(float));
    if (!f) {
        err = oct_error_set(e, OCT_ENOMEM, "%s: cannot allocate %llu floats", path,
                            (unsigned long long)count);
        goto out;
    }
    err = to_float(data, dtype, count, samples, f, path, e);
    if (err) {
        free(f);
        goto out;
    }
    *out = f;
    if (rows)
        *rows = (uint32_t)R;
out:
    free(buf);
    return err;
}

/* Positions are kept in double: a sinc or cubic weight at a fractional
 * position needs more than float's 24 bits when M is large. */
oct_err oct_load_positions(const char *path, uint32_t samples, double **out, oct_error *e)
{
    *out = NULL;
    if (!path || !*path)
        return oct_error_set(e, OCT_EINVAL, "positions: no file given");
    if (samples == 0 || samples > OCT_SAMPLES_MAX)
        return oct_error_set(e, OCT_EINVAL, "%s: samples = %u out of range", path, samples);
    void *buf;
    size_t len;
    /* M <= 8192 doubles plus a header */
    oct_err err = oct_cfg_read_file(path, 1u << 20, &buf, &len, e);
    if (err)
        return err;
    const unsigned char *data;
    oct_dtype dtype;
    if (has_npy_suffix(path) || (len >= 6 && !memcmp(buf, npy_magic, 6))) {
        oct_array a = {0};
        npy_info ni = {0};
        if ((err = npy_header(buf, len, path, &a, &ni, e)))
            goto out;
        if (!((a.ndim == 1 && a.shape[0] == samples) ||
              (a.ndim == 2 && a.shape[0] == 1 && a.shape[1] == samples))) {
            err = oct_error_set(e, OCT_ESIZE,
                                "%s: holds %llu values (%d-d array), expected %u positions "
                                "(shape (%u,))",
                                path, (unsigned long long)a.count, a.ndim, samples, samples);
            goto out;
        }
        if (ni.swap)
            swap_bytes((unsigned char *)buf + ni.data_off, a.count, oct_dtype_size(a.dtype));
        data = (const unsigned char *)buf + ni.data_off;
        dtype = a.dtype;
    } else if (len == (size_t)samples * 8) {
        dtype = OCT_DTYPE_F64; /* raw: the size says which float it is */
        data = buf;
    } else if (len == (size_t)samples * 4) {
        dtype = OCT_DTYPE_F32;
        data = buf;
    } else {
        err = oct_error_set(e, OCT_ESIZE,
                            "%s: raw file of %zu bytes, expected %u positions: %zu bytes (f64) "
                            "or %zu bytes (f32)",
                            path, len, samples, (size_t)samples * 8, (size_t)samples * 4);
        goto out;
    }
    double *p = malloc((size_t)samples * sizeof *p);
    if (!p) {
        err = oct_error_set(e, OCT_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    for (uint32_t n = 0; n < samples; n++) {
        switch (dtype) {
        case OCT_DTYPE_F64: memcpy(&p[n], data + 8 * (size_t)n, 8); break;
        case OCT_DTYPE_F32: {
            float f;
            memcpy(&f, data + 4 * (size_t)n, 4);
            p[n] = f;
            break;
        }
        case OCT_DTYPE_U16: { uint16_t v; memcpy(&v, data + 2 * (size_t)n, 2); p[n] = v; break; }
        case OCT_DTYPE_I16: { int16_t v; memcpy(&v, data + 2 * (size_t)n, 2); p[n] = v; break; }
        case OCT_DTYPE_U8: p[n] = data[n]; break;
        default: p[n] = NAN; break;
        }
        if (!isfinite(p[n])) {
            err = oct_error_set(e, OCT_EINVAL, "%s: position %u is not finite", path, n);
            free(p);
            goto out;
        }
    }
    *out = p;
out:
    free(buf);
    return err;
}
