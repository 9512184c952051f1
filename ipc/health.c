/* health.c - one line saying how octd is, from its status block: what
 * `octctl status` prints as summary= and what octd sends to systemd as
 * STATUS=, so the two always agree (issue 14.4). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ipc_internal.h"

/* Appends to out (always terminated, cut to len). */
static void add(char *out, size_t len, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *out, size_t len, size_t *o, const char *fmt, ...)
{
    if (*o + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *o, len - *o, fmt, ap);
    va_end(ap);
    if (n > 0)
        *o = *o + (size_t)n < len ? *o + (size_t)n : len - 1;
}

/* A text field of the block, which a writer may have left unterminated. */
static const char *field(const char *f, size_t size, char *buf)
{
    size_t n = strnlen(f, size);
    memcpy(buf, f, n);
    buf[n] = '\0';
    return buf;
}

const char *oct_attach_state_name(uint32_t s)
{
    switch (s) {
    case OCT_ATTACH_WAITING: return "waiting";
    case OCT_ATTACH_OK: return "attached";
    case OCT_ATTACH_ERROR: return "error";
    default: return "unknown";
    }
}

size_t oct_status_summary(const oct_status_block *b, char *out, size_t len)
{
    char t[257];
    size_t o = 0;
    if (!out || !len)
        return 0;
    out[0] = '\0';
    add(out, len, &o, "%s", oct_daemon_state_name(b->state));
    if (b->ring_state == OCT_ATTACH_OK)
        add(out, len, &o, ": frames in %" PRIu64 ", processed %" PRIu64 ", skipped %" PRIu64
                          ", images published %" PRIu64,
            b->frames_seen, b->frames_processed, b->frames_skipped, b->images_published);
    else if (b->ring_state == OCT_ATTACH_ERROR)
        add(out, len, &o, ", ring error: %s", field(b->ring_message, sizeof b->ring_message, t));
    else
        add(out, len, &o, ", waiting for ring%s%s", b->ring_message[0] ? ": " : "",
            field(b->ring_message, sizeof b->ring_message, t));
    if (b->warning_count)
        add(out, len, &o, "; %u warning%s: %s", b->warning_count, b->warning_count > 1 ? "s" : "",
            field(b->warnings, sizeof b->warnings, t));
    return o;
}
