/* health.c - see health.h.
 *
 * Warnings are for what is valid but yields nothing (issue 14.2): they are
 * recomputed from the values and geometry in use, kept in the status block
 * (warnings, warning_count) as long as they hold, and logged when they
 * appear.  Meaningless values are rejected by validation, not warned about.
 */
#include "health.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "octd.h"

#define MAX_WARNINGS 6
#define LOWER_SHOWN_NS 200000000ull /* a lower control seq waiting this long is a warning */
#define NO_IMAGES_NS 2000000000ull /* processed but nothing published for this long: say so */

struct octd_health {
    pthread_mutex_t lock;           /* last_error comes from any thread's octd_log */
    char last_error[128];
    bool error_dirty;
    uint32_t ring_state;
    char ring_message[512];
    char warnings[MAX_WARNINGS][160];
    int warning_count;
    /* "processed but nothing published" */
    uint64_t watch_ns, watch_processed, watch_published;
    bool no_images;
};

static void copy_text(char *dst, size_t len, const char *src)
{
    size_t n = src ? strnlen(src, len - 1) : 0;
    memcpy(dst, src ? src : "", n);
    memset(dst + n, 0, len - n);
}

static void on_error(void *arg, int prio, const char *msg)
{
    octd_health *h = arg;
    pthread_mutex_lock(&h->lock);
    copy_text(h->last_error, sizeof h->last_error, msg);
    h->error_dirty = true;
    pthread_mutex_unlock(&h->lock);
}

oct_err octd_health_init(octd *d, oct_error *e)
{
    octd_health *h = calloc(1, sizeof *h);
    if (!h)
        return oct_error_set(e, OCT_ENOMEM, "out of memory");
    pthread_mutex_init(&h->lock, NULL);
    h->ring_state = UINT32_MAX; /* the first octd_health_ring() writes */
    d->health = h;
    octd_log_set_hook(on_error, h);
    return OCT_OK;
}

void octd_health_free(octd *d)
{
    if (!d->health)
        return;
    octd_log_set_hook(NULL, NULL);
    pthread_mutex_destroy(&d->health->lock);
    free(d->health);
    d->health = NULL;
}

void octd_health_ring(octd *d, uint32_t state, const char *msg)
{
    octd_health *h = d->health;
    if (!h || !d->sb)
        return;
    if (state == OCT_ATTACH_OK)
        msg = "";
    if (h->ring_state == state && !strcmp(h->ring_message, msg ? msg : ""))
        return;
    if (state == OCT_ATTACH_ERROR && !strstr(msg, "permission denied")) /* that one is explained */
        octd_log(LOG_ERR, "%s", msg);
    h->ring_state = state;
    copy_text(h->ring_message, sizeof h->ring_message, msg);
    oct_status_begin(d->st);
    d->sb->ring_state = state;
    copy_text(d->sb->ring_message, sizeof d->sb->ring_message, msg);
    oct_status_end(d->st);
}

/* "1001 (acq)" */
static void group_name(gid_t g, char *buf, size_t len)
{
    struct group gr, *res = NULL;
    char tmp[2048];
    if (getgrgid_r(g, &gr, tmp, sizeof tmp, &res) == 0 && res)
        snprintf(buf, len, "%s", gr.gr_name);
    else
        snprintf(buf, len, "%u", (unsigned)g);
}

void octd_health_attach_error(octd *d, oct_err rc, const char *msg)
{
    if (rc == OCT_ENOENT || rc == OCT_EAGAIN) {
        octd_health_ring(d, OCT_ATTACH_WAITING, msg);
        return;
    }
    if (rc != OCT_EPERM) {
        octd_health_ring(d, OCT_ATTACH_ERROR, msg);
        return;
    }
    /* Who owns the ring and who are we: the fix is in one of the two. */
    char path[300], gname[64], text[768];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm%s", d->cfg.ring_frames);
    if (stat(path, &st) != 0) {
        octd_health_ring(d, OCT_ATTACH_ERROR, msg);
        return;
    }
    group_name(st.st_gid, gname, sizeof gname);
    /* the facts first: the status block keeps 127 characters */
    snprintf(text, sizeof text,
             "ring %s: permission denied: group %s, mode %04o, owner uid %u; octd (uid %u) is "
             "not in group %s",
             d->cfg.ring_frames, gname, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
             (unsigned)geteuid(), gname);
    octd_log(LOG_ERR, "%s: the acquisition program's user must be in group %s (README, set-up: "
                      "liboctipc then gives the ring that group), or octd must run in group %s",
             text, OCT_RING_GROUP_DEFAULT, gname);
    octd_health_ring(d, OCT_ATTACH_ERROR, text);
}

/* ---- warnings ---- */
static void warn(octd_health *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(octd_health *h, const char *fmt, ...)
{
    if (h->warning_count >= MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->warnings[h->warning_count++], sizeof h->warnings[0], fmt, ap);
    va_end(ap);
}

static const uint32_t BSCAN_KINDS = OCT_PRODUCT_BIT(OCT_KIND_BSCAN);
static const uint32_t VOLUME_KINDS = OCT_PRODUCT_BIT(OCT_KIND_ENFACE) |
                                     OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) |
                                     OCT_PRODUCT_BIT(OCT_KIND_XSEC_H) |
                                     OCT_PRODUCT_BIT(OCT_KIND_XSEC_V) |
                                     OCT_PRODUCT_BIT(OCT_KIND_VOLUME);

static void kinds_text(uint32_t bits, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int k = 0; k < OCT_KIND_ASLAB_FIRST && o + 1 < len; k++) /* 13..: no bits of their own */
        if (bits & OCT_PRODUCT_BIT(k))
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", oct_kind_name(k));
}

static bool geom_same(const oct_geometry *a, const oct_geometry *b)
{
    return a->samples == b->samples && a->ascans == b->ascans && a->lines == b->lines &&
           a->sample_type == b->sample_type && a->sample_shift == b->sample_shift;
}

/* The warnings that hold for the values and geometry in use. */
static void compute(octd *d, octd_health *h, uint64_t now)
{
    h->warning_count = 0;
    if (d->engine_warning[0]) /* an engine was taken out (several engines, issue 20) */
        warn(h, "%s", d->engine_warning);
    if (d->shm_warning[0]) /* [publish] shm_endpoint has no image area */
        warn(h, "%s", d->shm_warning);
    /* a control block whose seq went back: ignored for 1 s (a writer inside
     * its store of seq passes through smaller values for microseconds, so
     * only a wait that lasts is told) */
    uint64_t lower_gen, read_gen;
    if (oct_control_lower_pending(d->ctl, &lower_gen, &read_gen) >= LOWER_SHOWN_NS)
        warn(h, "control block went back from generation %" PRIu64 " to %" PRIu64
                " (re-created?): the values in use stay until it has not changed for 1 s",
             read_gen, lower_gen);
    const oct_params *p = &d->params;
    const oct_geometry *g = d->ring ? &d->ring_geom : d->eng ? &d->eng_geom : NULL;
    uint32_t asked = p->products & ~OCT_PRODUCT_F32;
    char k[96];
    if (g) {
        bool volume = g->lines > 1;
        uint32_t possible = volume ? VOLUME_KINDS : BSCAN_KINDS;
        /* kinds this file does not know (added later) may be possible: no claim */
        uint32_t known = BSCAN_KINDS | VOLUME_KINDS;
        if ((asked & known) && !(asked & possible) && !(asked & ~known)) {
            kinds_text(asked & known, k, sizeof k);
            warn(h, "products [%s] need %s, the ring has %u line%s: no images are published",
                 k, volume ? "a B-scan ring (lines = 1)" : "a volume ring (lines > 1)", g->lines,
                 g->lines > 1 ? "s" : "");
        }
        /* en-face/confocal: indices past the last depth of every method */
        uint32_t ef = OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL);
        if (volume && (asked & ef) && d->eng && geom_same(&d->eng_geom, g)) {
            for (int m = 0; m < OCT_METHOD_COUNT; m++) {
                if (!(p->methods & OCT_METHOD_BIT(m)))
                    continue;
                uint32_t depths = oct_engine_depths(d->eng, m);
                if (depths && p->enface_start >= 0 && (uint32_t)p->enface_start >= depths)
                    warn(h, "enface.start %d is past the last depth of %s (%u): no en-face or "
                            "confocal images for %s",
                         p->enface_start, oct_method_name(m), depths - 1, oct_method_name(m));
            }
        }
    }
    /* angiography (SPEC 10.3) is made of repeated B-scans, from CFD */
    if (p->angio_metrics && (d->prof.repeats < 2 || !(p->methods & OCT_METHOD_BIT(OCT_METHOD_CFD))))
        warn(h, "angio.metrics is set but %s: no angiography images are published",
             d->prof.repeats < 2 ? "the profile has no geometry.repeats >= 2" : "methods has no cfd");
    /* Whatever the reason: frames processed, nothing published for 2 s
     * (counted from the first frame processed after the last image). */
    if (!h->watch_ns || d->published != h->watch_published) {
        h->no_images = false;
        h->watch_ns = now;
        h->watch_processed = d->processed;
        h->watch_published = d->published;
    } else if (d->processed == h->watch_processed) {
        h->watch_ns = now;
    } else if (now - h->watch_ns >= NO_IMAGES_NS) {
        h->no_images = true;
    }
    if (h->no_images && h->warning_count == 0)
        warn(h, "frames are processed but no image is published (products, geometry or indices "
                "yield nothing)");
}

void octd_health_periodic(octd *d, uint64_t now)
{
    octd_health *h = d->health;
    if (!h || !d->sb)
        return;
    char old[MAX_WARNINGS][160];
    int old_count = h->warning_count;
    memcpy(old, h->warnings, sizeof old);
    if (d->mode == OCT_STATE_ONLINE) /* review shows the kept frame: the warnings stay as they were */
        compute(d, h, now);
    bool changed = old_count != h->warning_count;
    for (int i = 0; i < h->warning_count; i++) {
        bool was = false;
        for (int j = 0; j < old_count && !was; j++)
            was = !strcmp(old[j], h->warnings[i]);
        if (!was) {
            octd_log(LOG_WARNING, "%s", h->warnings[i]);
            changed = true;
        }
    }
    char text[sizeof d->sb->warnings];
    size_t o = 0;
    text[0] = '\0';
    for (int i = 0; i < h->warning_count && o + 1 < sizeof text; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s%s", i ? "; " : "", h->warnings[i]);
    char err[sizeof h->last_error];
    bool err_dirty;
    pthread_mutex_lock(&h->lock);
    err_dirty = h->error_dirty;
    h->error_dirty = false;
    memcpy(err, h->last_error, sizeof err);
    pthread_mutex_unlock(&h->lock);
    if (!changed && !err_dirty)
        return;
    if (changed && old_count && !h->warning_count)
        octd_log(LOG_INFO, "warnings cleared");
    oct_status_begin(d->st);
    if (changed) {
        copy_text(d->sb->warnings, sizeof d->sb->warnings, text);
        d->sb->warning_count = (uint32_t)h->warning_count;
    }
    if (err_dirty)
        copy_text(d->sb->last_error, sizeof d->sb->last_error, err);
    oct_status_end(d->st);
}

void octd_health_notify(octd *d, const char *prefix)
{
    oct_status_block copy;
    char line[512];
    if (!d->st || oct_status_read(d->st, &copy) != OCT_OK)
        return;
    oct_status_summary(&copy, line, sizeof line);
    octd_notify_send(&d->nt, "%sSTATUS=%s", prefix ? prefix : "", line);
}
