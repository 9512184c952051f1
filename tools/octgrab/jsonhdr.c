/* jsonhdr.c - see jsonhdr.h.  A recursive-descent reader of RFC 8259 with a
 * depth limit; values of unknown members are checked and skipped. */
#include "jsonhdr.h"

#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 16

typedef struct rd {
    const char *begin, *p, *end;
    char *err;
    size_t err_len;
    bool failed;
} rd;

static bool fail(rd *r, const char *what)
{
    if (!r->failed)
        snprintf(r->err, r->err_len, "%s at byte %zu", what, (size_t)(r->p - r->begin));
    r->failed = true;
    return false;
}

static void ws(rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

/* A string; its unescaped text (\u0001-\u007f decoded, other \uXXXX as '?')
 * goes to out when out != NULL, cut to out_len (*cut set when it was). */
static bool string_cut(rd *r, char *out, size_t out_len, bool *cut)
{
    size_t n = 0;
    if (cut)
        *cut = false;
    if (r->p >= r->end || *r->p != '"')
        return fail(r, "expected a string");
    r->p++;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p++;
        if (c < 0x20)
            return fail(r, "control character in a string");
        if (c == '\\') {
            if (r->p >= r->end)
                return fail(r, "unfinished escape");
            char esc = *r->p++;
            switch (esc) {
            case '"': case '\\': case '/': c = (unsigned char)esc; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 0; i < 4; i++, r->p++) {
                    if (r->p >= r->end || !*r->p || !strchr("0123456789abcdefABCDEF", *r->p))
                        return fail(r, "bad \\u escape");
                    char h = *r->p;
                    cp = cp * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                }
                /* ASCII as itself (octd escapes control characters this
                 * way); NUL and the rest of Unicode as '?'. */
                c = cp > 0 && cp < 0x80 ? (unsigned char)cp : '?';
                break;
            }
            default: return fail(r, "bad escape");
            }
        }
        if (out && n + 1 < out_len)
            out[n++] = (char)c;
        else if (cut)
            *cut = true;
    }
    if (r->p >= r->end)
        return fail(r, "unterminated string");
    r->p++;
    if (out && out_len)
        out[n] = '\0';
    return true;
}

static bool string(rd *r, char *out, size_t out_len) { return string_cut(r, out, out_len, NULL); }

/* A number; *u gets it when it is a non-negative integer that fits. */
static bool number(rd *r, uint64_t *u, bool *is_uint)
{
    bool neg = false, frac = false;
    uint64_t v = 0;
    bool overflow = false;
    if (r->p < r->end && *r->p == '-') {
        neg = true;
        r->p++;
    }
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return fail(r, "expected a number");
    if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9')
        return fail(r, "leading zero");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        v = v * 10 + d;
        r->p++;
    }
    if (r->p < r->end && *r->p == '.') {
        frac = true;
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(r, "bad fraction");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        frac = true;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(r, "bad exponent");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (is_uint)
        *is_uint = !neg && !frac && !overflow;
    if (u)
        *u = v;
    return true;
}

static bool literal(rd *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return fail(r, "unexpected character");
    r->p += n;
    return true;
}

static bool value(rd *r, int depth);

static bool array_items(rd *r, int depth, uint32_t *u32, int max_u32, int *count)
{
    r->p++; /* [ */
    ws(r);
    int n = 0;
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        if (count)
            *count = 0;
        return true;
    }
    for (;;) {
        ws(r);
        if (u32) {
            uint64_t v;
            bool ok;
            if (!number(r, &v, &ok))
                return false;
            if (!ok || v > UINT32_MAX)
                return fail(r, "shape entry is not a 32-bit count");
            if (n < max_u32)
                u32[n] = (uint32_t)v;
        } else if (!value(r, depth + 1)) {
            return false;
        }
        n++;
        ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            break;
        }
        return fail(r, "expected , or ] in an array");
    }
    if (count)
        *count = n;
    return true;
}

static bool object_members(rd *r, int depth, grab_header *h);

static bool value(rd *r, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(r, "nested too deep");
    ws(r);
    if (r->p >= r->end)
        return fail(r, "missing value");
    switch (*r->p) {
    case '{': return object_members(r, depth, NULL);
    case '[': return array_items(r, depth, NULL, 0, NULL);
    case '"': return string(r, NULL, 0);
    case 't': return literal(r, "true");
    case 'f': return literal(r, "false");
    case 'n': return literal(r, "null");
    default: return number(r, NULL, NULL);
    }
}

static bool get_u64(rd *r, uint64_t *out, bool *flag)
{
    bool ok;
    if (!number(r, out, &ok))
        return false;
    if (!ok)
        return fail(r, "expected a non-negative integer");
    if (flag)
        *flag = true;
    return true;
}

/* An integer shm_* member: stored and marked seen. */
static bool get_shm_u64(rd *r, uint64_t *out, grab_header *h, unsigned bit)
{
    if (!get_u64(r, out, NULL))
        return false;
    h->shm_seen |= bit;
    return true;
}

/* An object; top-level members are stored into h (when h != NULL). */
static bool object_members(rd *r, int depth, grab_header *h)
{
    if (depth > MAX_DEPTH)
        return fail(r, "nested too deep");
    r->p++; /* { */
    ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return true;
    }
    for (;;) {
        char key[32];
        ws(r);
        if (!string(r, key, sizeof key))
            return false;
        ws(r);
        if (r->p >= r->end || *r->p != ':')
            return fail(r, "expected :");
        r->p++;
        ws(r);
        bool ok = true;
        if (h && !strcmp(key, "htype"))
            ok = string(r, h->htype, sizeof h->htype);
        else if (h && !strcmp(key, "topic"))
            ok = string(r, h->topic, sizeof h->topic);
        else if (h && !strcmp(key, "dtype"))
            ok = string(r, h->dtype, sizeof h->dtype);
        else if (h && !strcmp(key, "image_seq"))
            ok = get_u64(r, &h->image_seq, &h->has_image_seq);
        else if (h && !strcmp(key, "frame_id"))
            ok = get_u64(r, &h->frame_id, NULL);
        else if (h && !strcmp(key, "frame_seq"))
            ok = get_u64(r, &h->frame_seq, NULL);
        else if (h && !strcmp(key, "t_acq_ns"))
            ok = get_u64(r, &h->t_acq_ns, &h->has_t_acq);
        else if (h && !strcmp(key, "t_pub_ns"))
            ok = get_u64(r, &h->t_pub_ns, NULL);
        else if (h && !strcmp(key, "params_gen"))
            ok = get_u64(r, &h->params_gen, NULL);
        else if (h && !strcmp(key, "shm_name")) {
            bool cut;
            ok = string_cut(r, h->shm_name, sizeof h->shm_name, &cut);
            if (ok && cut)
                return fail(r, "shm_name is too long");
            if (ok)
                h->shm_seen |= GRAB_SHM_NAME;
        } else if (h && !strcmp(key, "shm_id"))
            ok = get_shm_u64(r, &h->shm_id, h, GRAB_SHM_ID);
        else if (h && !strcmp(key, "shm_slot")) {
            uint64_t v = 0;
            ok = get_shm_u64(r, &v, h, GRAB_SHM_SLOT);
            if (ok && v > UINT32_MAX)
                return fail(r, "shm_slot is not a 32-bit slot number");
            h->shm_slot = (uint32_t)v;
        } else if (h && !strcmp(key, "shm_seq"))
            ok = get_shm_u64(r, &h->shm_seq, h, GRAB_SHM_SEQ);
        else if (h && !strcmp(key, "shm_offset"))
            ok = get_shm_u64(r, &h->shm_offset, h, GRAB_SHM_OFFSET);
        else if (h && !strcmp(key, "shm_bytes"))
            ok = get_shm_u64(r, &h->shm_bytes, h, GRAB_SHM_BYTES);
        else if (h && !strcmp(key, "shape")) {
            if (r->p >= r->end || *r->p != '[')
                return fail(r, "shape is not an array");
            ok = array_items(r, depth + 1, h->shape, 3, &h->ndim);
            if (ok && (h->ndim < 1 || h->ndim > 3))
                return fail(r, "shape must have 1 to 3 entries");
            h->has_shape = ok;
        } else
            ok = value(r, depth + 1);
        if (!ok)
            return false;
        ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            return true;
        }
        return fail(r, "expected , or } in an object");
    }
}

bool grab_header_parse(const char *text, size_t len, grab_header *h, char *err, size_t err_len)
{
    memset(h, 0, sizeof *h);
    rd r = {text, text, text + len, err, err_len, false};
    ws(&r);
    if (r.p >= r.end || *r.p != '{') {
        snprintf(err, err_len, "not a JSON object");
        return false;
    }
    if (!object_members(&r, 0, h))
        return false;
    ws(&r);
    if (r.p != r.end) {
        snprintf(err, err_len, "trailing bytes after the object");
        return false;
    }
    return true;
}
