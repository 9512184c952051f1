/* json.c - see json.h. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void put(octd_json *j, const char *s, size_t n)
{
    if (j->overflow || j->len + n + 1 > j->cap) {
        j->overflow = true;
        return;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void putf(octd_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(octd_json *j, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        j->overflow = true;
        return;
    }
    put(j, tmp, (size_t)n);
}

/* A JSON string with the escapes RFC 8259 requires; control characters as
 * \u00XX; bytes >= 0x80 are passed through (our strings are UTF-8 or ASCII). */
static void put_string(octd_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': put(j, "\\\"", 2); break;
        case '\\': put(j, "\\\\", 2); break;
        case '\n': put(j, "\\n", 2); break;
        case '\r': put(j, "\\r", 2); break;
        case '\t': put(j, "\\t", 2); break;
        default:
            if (*p < 0x20)
                putf(j, "\\u%04x", *p);
            else
                put(j, (const char *)p, 1);
        }
    }
    put(j, "\"", 1);
}

static void key(octd_json *j, const char *k)
{
    if (!j->first)
        put(j, ",", 1);
    j->first = false;
    put_string(j, k);
    put(j, ":", 1);
}

void octd_json_begin(octd_json *j, char *buf, size_t cap)
{
    j->buf = buf;
    j->cap = cap;
    j->len = 0;
    j->overflow = cap == 0;
    j->first = true;
    if (cap)
        buf[0] = '\0';
    put(j, "{", 1);
}

void octd_json_object_begin(octd_json *j, const char *k)
{
    key(j, k);
    put(j, "{", 1);
    j->first = true;
}

void octd_json_object_end(octd_json *j)
{
    put(j, "}", 1);
    j->first = false;
}

void octd_json_str(octd_json *j, const char *k, const char *val)
{
    key(j, k);
    put_string(j, val ? val : "");
}

void octd_json_u64(octd_json *j, const char *k, uint64_t val)
{
    key(j, k);
    putf(j, "%" PRIu64, val);
}

void octd_json_i64(octd_json *j, const char *k, int64_t val)
{
    key(j, k);
    putf(j, "%" PRId64, val);
}

void octd_json_f64(octd_json *j, const char *k, double val)
{
    key(j, k);
    if (isfinite(val))
        putf(j, "%.9g", val);
    else
        put(j, "null", 4);
}

void octd_json_u32_array(octd_json *j, const char *k, const uint32_t *v, size_t n)
{
    key(j, k);
    put(j, "[", 1);
    for (size_t i = 0; i < n; i++)
        putf(j, "%s%" PRIu32, i ? "," : "", v[i]);
    put(j, "]", 1);
}

void octd_json_i32_array(octd_json *j, const char *k, const int32_t *v, size_t n)
{
    key(j, k);
    put(j, "[", 1);
    for (size_t i = 0; i < n; i++)
        putf(j, "%s%" PRId32, i ? "," : "", v[i]);
    put(j, "]", 1);
}

void octd_json_f64_array(octd_json *j, const char *k, const double *v, size_t n)
{
    key(j, k);
    put(j, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            put(j, ",", 1);
        if (isfinite(v[i]))
            putf(j, "%.9g", v[i]);
        else
            put(j, "null", 4);
    }
    put(j, "]", 1);
}

size_t octd_json_end(octd_json *j)
{
    put(j, "}", 1);
    return j->overflow ? 0 : j->len;
}
