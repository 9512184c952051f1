/* main.c - octd: frame ring -> engine -> ZeroMQ, with the control and status
 * blocks, modes and commands, and the systemd life cycle (SPEC 3, 4, 5, 6, 8).
 *
 * Choices where the contract is silent (see also README):
 *  - READY=1 is sent once the control and status blocks exist, the publisher
 *    is bound and, when the profile names a geometry, the engine is planned;
 *    STATUS= then says "waiting for ring" until a ring appears.
 *  - At start octd (re)initialises the control block from the profile.  At
 *    exit both blocks are left in place (status state "stopping"), so tools
 *    can still read the last counters; the next start re-initialises them.
 *  - A new ring geometry: the engine is re-planned; control values that do
 *    not fit it (xsec indices, lag window, cut-off) are clamped, written back
 *    into the control block as a new generation, and a warning is logged.
 *    If the masks do not fit the new number of samples MSI is switched off
 *    (error logged) and CFD goes on.
 *  - Before an engine exists (no ring yet) a new generation is validated as
 *    the engine would: against the ring's or the profile's geometry when one
 *    is known, else with every rule that needs no geometry (checks.h).
 *  - Exit status: 78 only for a bad configuration (systemd does not restart
 *    it); start-up failures that may pass (bind, no GPU, no memory) are 69.
 *  - A rejected generation: the last good values are written back into the
 *    control block (after rejected_gen/reason are published), so `octctl get`
 *    shows what is in use and a later command does not carry the bad values;
 *    not when a writer has written a newer generation meanwhile (that one is
 *    checked next: oct_control_write_if).
 *  - SIGHUP re-reads octd.ini, the profile and the masks; the new profile's
 *    values become a new control generation.  Changes of the control/status
 *    block names need a restart (a warning says so).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oct_docs.h"
#include "oct_control_keys.h"
#include "cli.h"
#include "checks.h"
#include "endpoint.h"
#include "engines.h"
#include "frames.h"
#include "health.h"
#include "metrics.h"
#include "octd.h"
#include "record.h"
#include "register_live.h"
#include "save.h"

#define EX_CONFIG 78      /* bad configuration: systemd must not restart (RestartPreventExitStatus) */
#define EX_UNAVAILABLE 69 /* start-up failed for another reason (bind, GPU, memory): restartable */
#define RING_TIMEOUT_MS 100
#define ATTACH_INTERVAL_NS 100000000ull
#define CONTROL_ATTEMPTS 8
#define SEC_NS 1000000000ull

/* ------------------------------------------------------------------ */
/* status block                                                        */
/* ------------------------------------------------------------------ */
#define STORE64(field, v) __atomic_store_n(&(field), (uint64_t)(v), __ATOMIC_RELEASE)
#define STORE32(field, v) __atomic_store_n(&(field), (uint32_t)(v), __ATOMIC_RELEASE)

static void set_state(octd *d, uint32_t state) { STORE32(d->sb->state, state); }

static uint32_t current_state(const octd *d)
{
    if (d->stop)
        return OCT_STATE_STOPPING;
    if (d->error_state)
        return OCT_STATE_ERROR;
    return d->mode;
}

void octd_copy_text(char *dst, size_t len, const char *src)
{
    /* Cut to fit, and no stale bytes after the terminator. */
    size_t n = src ? strnlen(src, len - 1) : 0;
    memcpy(dst, src ? src : "", n);
    memset(dst + n, 0, len - n);
}

static void status_counters(octd *d)
{
    oct_status_block *b = d->sb;
    STORE64(b->frames_seen, d->seen);
    STORE64(b->frames_processed, d->processed);
    STORE64(b->frames_skipped, d->skipped);
    STORE64(b->frames_torn, d->torn);
    STORE64(b->ring_reattaches, d->reattaches);
    STORE64(b->images_published, d->published);
    STORE64(b->publish_drops, d->drops);
    STORE64(b->last_frame_id, d->last_frame_id);
    STORE64(b->last_latency_ns, d->last_latency);
    STORE64(b->frames_reprocessed, d->reprocessed); /* ops: not ring frames */
    STORE64(b->frames_lost, d->lost);
    STORE64(b->heartbeat_ns, oct_time_monotonic_ns());
    set_state(d, current_state(d));
}


void octd_status_engine(octd *d)
{
    oct_status_begin(d->st);
    octd_copy_text(d->sb->backend, sizeof d->sb->backend, d->eng ? oct_engine_backend_name(d->eng) : "");
    char dev[sizeof d->sb->device];
    snprintf(dev, sizeof dev, d->neng > 1 ? "%s (+%d engines)" : "%s",
             d->eng ? oct_engine_device_name(d->eng) : "", d->neng - 1);
    octd_copy_text(d->sb->device, sizeof d->sb->device, dev);
    d->sb->ring_epoch = d->ring ? d->ring_epoch : 0;
    d->sb->ring_samples = d->ring ? d->ring_geom.samples : 0;
    d->sb->ring_ascans = d->ring ? d->ring_geom.ascans : 0;
    d->sb->ring_lines = d->ring ? d->ring_geom.lines : 0;
    d->sb->ring_sample_type = d->ring ? d->ring_geom.sample_type : 0;
    oct_status_end(d->st);
}

static void command_ack(octd *d, uint64_t seq, uint32_t result, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void command_ack(octd *d, uint64_t seq, uint32_t result, const char *fmt, ...)
{
    char msg[sizeof d->sb->command_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    oct_status_begin(d->st);
    d->sb->command_result = result;
    octd_copy_text(d->sb->command_message, sizeof d->sb->command_message, msg);
    oct_status_end(d->st);
    STORE64(d->sb->command_ack_seq, seq); /* last: a reader that sees it sees the result */
    static const char *const names[] = {"ok", "refused", "failed"};
    octd_log(result == OCT_CMDRES_OK ? LOG_INFO : LOG_WARNING, "command %" PRIu64 ": %s: %s", seq,
             names[result < 3 ? result : 0], msg);
}

/* ------------------------------------------------------------------ */
/* the ring (frames: frames.c)                                         */
/* ------------------------------------------------------------------ */
/* why: the ring library's message, which names the ring already */
static void detach_ring(octd *d, const char *why)
{
    octd_frames_drain(d); /* nothing in flight reads the mapping */
    octd_log(LOG_INFO, "%s; waiting for it", why);
    oct_ring_consumer_close(d->ring);
    d->ring = NULL;
    d->next_attach_ns = 0;
    octd_status_engine(d);
    octd_health_ring(d, OCT_ATTACH_WAITING, why);
}

static void try_attach(octd *d)
{
    uint64_t now = oct_time_monotonic_ns();
    if (now < d->next_attach_ns)
        return;
    d->next_attach_ns = now + ATTACH_INTERVAL_NS;
    oct_error e;
    oct_err rc = oct_ring_consumer_open(&d->ring, d->cfg.ring_frames, &e);
    if (rc != OCT_OK) {
        d->ring = NULL;
        /* Absent or still initialising is normal; anything else (wrong ABI,
         * bad geometry) is logged once per distinct message. */
        if (rc != OCT_ENOENT && rc != OCT_EAGAIN && strcmp(d->attach_err, e.msg) != 0) {
            if (rc != OCT_EPERM) /* health.c logs the explained permission error */
                octd_log(LOG_ERR, "%s", e.msg); /* names the ring */
            octd_copy_text(d->attach_err, sizeof d->attach_err, e.msg);
        }
        octd_health_attach_error(d, rc, e.msg);
        return;
    }
    /* A ring its producer closed but has not unlinked yet is not a ring to
     * wait on: treat it as absent until it is re-created. */
    if (__atomic_load_n(&oct_ring_consumer_header(d->ring)->state, __ATOMIC_ACQUIRE) ==
        OCT_RING_CLOSED) {
        oct_ring_consumer_close(d->ring);
        d->ring = NULL;
        octd_health_ring(d, OCT_ATTACH_WAITING, "the ring was closed by its producer");
        return;
    }
    /* Nor is the ring of a dead producer (heartbeat older than [ring]
     * stale_ms): attaching would detach at once as stale and loop,
     * re-processing its last frame each time. */
    oct_ring_consumer_set_stale_ms(d->ring, d->cfg.stale_ms);
    oct_ring_consumer_set_poll_us(d->ring, d->cfg.poll_us);
    uint64_t hb = __atomic_load_n(&oct_ring_consumer_header(d->ring)->heartbeat_ns,
                                  __ATOMIC_ACQUIRE);
    if (now > hb && now - hb > (uint64_t)d->cfg.stale_ms * 1000000ull) {
        oct_ring_consumer_close(d->ring);
        d->ring = NULL;
        octd_health_ring(d, OCT_ATTACH_WAITING, "the ring's producer is gone (heartbeat stale)");
        return;
    }
    d->attach_err[0] = '\0';
    oct_ring_consumer_geometry(d->ring, &d->ring_geom);
    d->ring_epoch = oct_ring_consumer_header(d->ring)->epoch;
    if (d->ever_attached)
        d->reattaches++;
    d->ever_attached = true;
    octd_log(LOG_INFO, "ring %s attached: epoch %" PRIu64 ", %ux%ux%u %s", d->cfg.ring_frames,
             d->ring_epoch, d->ring_geom.lines, d->ring_geom.ascans, d->ring_geom.samples,
             oct_sample_name(d->ring_geom.sample_type));
    octd_status_engine(d);
    octd_health_ring(d, OCT_ATTACH_OK, "");
    /* Plan now (not at the first frame) so the first frame is not late; in
     * review the engine stays on the kept frame's geometry. */
    if (d->mode == OCT_STATE_ONLINE)
        octd_ensure_engine(d, &d->ring_geom);
}

static void ring_error(octd *d, oct_err rc, const oct_error *e)
{
    switch (rc) {
    case OCT_ETIMEDOUT: break;
    case OCT_ETORN:
        d->seen++;
        d->torn++;
        d->torn_since++;
        break;
    case OCT_ECLOSED: {
        char why[320];
        snprintf(why, sizeof why, "ring %s: closed by the producer", d->cfg.ring_frames);
        detach_ring(d, why);
        break;
    }
    case OCT_ESTALE: detach_ring(d, e->msg); break;
    default: detach_ring(d, e->msg); break;
    }
}

static void online_step(octd *d)
{
    oct_error e;
    oct_err rc = octd_frames_step(d, &e);
    if (rc != OCT_OK)
        ring_error(d, rc, &e);
}

static void review_step(octd *d)
{
    if (d->ring) {
        /* Ring frames are not processed in review: take them off the ring
         * (counted as skipped) so the counters and re-attach logic go on. */
        oct_error e;
        oct_frame_info info;
        const void *ptr;
        oct_err rc = oct_ring_consumer_peek(d->ring, OCT_POLICY_LATEST, RING_TIMEOUT_MS, &ptr,
                                            &info, &e);
        if (rc == OCT_OK) {
            d->seen += 1 + info.skipped;
            d->skipped += 1 + info.skipped;
        } else {
            ring_error(d, rc, &e);
        }
    } else {
        struct pollfd pfd = {d->sigfd, POLLIN, 0};
        poll(&pfd, 1, RING_TIMEOUT_MS);
    }
    uint64_t now = oct_time_monotonic_ns();
    if (d->review_dirty || now - d->last_review_ns >= SEC_NS) {
        d->review_dirty = false;
        d->last_review_ns = now;
        octd_frames_review(d);
    }
}

/* ------------------------------------------------------------------ */
/* control values and commands                                         */
/* ------------------------------------------------------------------ */
static oct_err save_raw(octd *d, char *name, size_t len, oct_error *e)
{
    octd_saved_frame f = {d->kept.data, d->kept.geom, d->kept.info, &d->values, d->applied_gen,
                          &d->prof};
    return octd_save_raw(d->cfg.save_dir, &f, name, len, e);
}

static oct_err save_images(octd *d, char *name, size_t len, oct_error *e)
{
    if (!octd_ensure_engine(d, &d->kept.geom))
        return oct_error_set(e, OCT_EINVAL, "the engine cannot be planned for the kept frame");
    octd_frames_drain(d); /* the engine runs synchronously here */
    if (!d->save_prod && !(d->save_prod = oct_products_create()))
        return oct_error_set(e, OCT_ENOMEM, "out of memory for the images");
    oct_engine_hold_history(d->eng, true); /* the kept frame again: as review shows it */
    oct_err rc = oct_engine_process(d->eng, d->kept.data, oct_geometry_frame_bytes(&d->kept.geom),
                                    d->save_prod, e);
    oct_engine_hold_history(d->eng, false);
    if (rc == OCT_OK) {
        octd_saved_frame f = {d->kept.data, d->kept.geom, d->kept.info, &d->values,
                              d->applied_gen, &d->prof};
        rc = octd_save_images(d->cfg.save_dir, &f, d->save_prod,
                              (d->params.products & OCT_PRODUCT_F32) != 0, name, len, e);
    }
    /* Saves are rare: the images' memory goes back (issue 21.4). */
    oct_products_destroy(d->save_prod);
    d->save_prod = NULL;
    octd_frames_trim(d);
    return rc;
}

static bool keep_current(octd *d)
{
    if (!d->cur.valid)
        return false;
    size_t bytes = oct_geometry_frame_bytes(&d->cur.geom);
    if (!octd_frame_buf_fit(&d->kept, bytes))
        return false;
    memcpy(d->kept.data, d->cur.data, bytes);
    d->kept.geom = d->cur.geom;
    d->kept.info = d->cur.info;
    d->kept.valid = true;
    return true;
}

/* Copies msg with every "dir/" removed (paths inside the save directory). */
static void strip_dir(char *out, size_t len, const char *msg, const char *dir)
{
    size_t dl = strlen(dir), o = 0;
    while (*msg && o + 1 < len) {
        if (dl && !strncmp(msg, dir, dl) && msg[dl] == '/')
            msg += dl + 1;
        else
            out[o++] = *msg++;
    }
    out[o] = '\0';
}

static void handle_command(octd *d, uint32_t cmd, uint64_t seq)
{
    char name[256];
    oct_error e;
    bool review = d->mode == OCT_STATE_REVIEW;
    if (cmd == OCT_CMD_SNAPSHOT || cmd == OCT_CMD_REVIEW)
        octd_frames_fill_cur(d); /* frames read in place are not copied into cur */
    switch (cmd) {
    case OCT_CMD_ONLINE:
        d->mode = OCT_STATE_ONLINE;
        /* Review shows the last snapshot taken since the last `online`,
         * else the newest frame: the kept frame is done with. */
        octd_frame_buf_free(&d->kept);
        octd_frames_trim(d);
        command_ack(d, seq, OCT_CMDRES_OK, review ? "online" : "already online");
        if (review && d->ring)
            octd_ensure_engine(d, &d->ring_geom);
        break;
    case OCT_CMD_SNAPSHOT:
        if (review)
            command_ack(d, seq, OCT_CMDRES_REFUSED, "snapshot is only allowed online (octctl online first)");
        else if (!d->cur.valid)
            command_ack(d, seq, OCT_CMDRES_REFUSED, "no frame has been received yet");
        else if (!keep_current(d))
            command_ack(d, seq, OCT_CMDRES_FAILED, "out of memory for the kept frame");
        else
            command_ack(d, seq, OCT_CMDRES_OK, "kept frame %" PRIu64, d->kept.info.frame_id);
        break;
    case OCT_CMD_REVIEW:
        if (review) {
            /* a mode already in effect: ok, as online when online (issue 14) */
            command_ack(d, seq, OCT_CMDRES_OK, "already in review");
            break;
        }
        /* Without a snapshot, review the newest frame. */
        if (!d->kept.valid && !keep_current(d)) {
            command_ack(d, seq, OCT_CMDRES_REFUSED, "no frame to review (no frame received yet)");
            break;
        }
        d->mode = OCT_STATE_REVIEW;
        d->review_dirty = true;
        command_ack(d, seq, OCT_CMDRES_OK, "reviewing frame %" PRIu64, d->kept.info.frame_id);
        break;
    case OCT_CMD_SAVE_RAW:
    case OCT_CMD_SAVE_IMAGES: {
        const char *what = cmd == OCT_CMD_SAVE_RAW ? "save_raw" : "save_images";
        if (!review) {
            command_ack(d, seq, OCT_CMDRES_REFUSED, "%s is only allowed in review (octctl review first)",
                        what);
            break;
        }
        oct_err rc = cmd == OCT_CMD_SAVE_RAW ? save_raw(d, name, sizeof name, &e)
                                             : save_images(d, name, sizeof name, &e);
        if (rc == OCT_OK) {
            command_ack(d, seq, OCT_CMDRES_OK, "%s/%s", d->cfg.save_dir, name);
        } else {
            /* The status block holds 128 bytes: name files relative to the
             * save directory there so the reason (at the end) survives;
             * the log gets the whole message. */
            octd_log(LOG_ERR, "%s: %s", what, e.msg);
            char shortmsg[sizeof e.msg];
            strip_dir(shortmsg, sizeof shortmsg, e.msg, d->cfg.save_dir);
            command_ack(d, seq, OCT_CMDRES_FAILED, "%s: %s", what, shortmsg);
        }
        break;
    }
    case OCT_CMD_RECORD:
    case OCT_CMD_RECORD_STOP: {
        char msg[sizeof d->sb->command_message];
        uint32_t res = octd_record_command(d, cmd, d->cmd_args, msg, sizeof msg);
        command_ack(d, seq, res, "%s", msg);
        break;
    }
    case OCT_CMD_REFERENCE: { /* live registration (register_live.c) */
        char msg[sizeof d->sb->command_message];
        uint32_t res = octd_reglive_command(d, d->cmd_args->cmd_flags, msg, sizeof msg);
        command_ack(d, seq, res, "%s", msg);
        break;
    }
    default: command_ack(d, seq, OCT_CMDRES_REFUSED, "unknown command %u", cmd); break;
    }
    status_counters(d);
}

/* The engine's validation of p when there is no engine: against the ring's
 * geometry (attached, engine not planned) or the profile's, with the
 * profile's arrays for it; without either, every rule that needs no
 * geometry (checks.h).  What passes here is what oct_engine_set_params
 * would accept for that geometry. */
static oct_err check_params_without_engine(octd *d, const oct_params *p, oct_error *e)
{
    const oct_geometry *g = d->ring ? &d->ring_geom : d->prof.has_geometry ? &d->prof.geom : NULL;
    if (!g)
        return octd_params_check_nogeom(p, &d->prof, e);
    if (d->data_samples != g->samples) { /* as ensure_engine will */
        oct_profile_data_free(&d->data);
        octd_load_data_for(&d->prof, g->samples, &d->data);
        d->data_samples = g->samples;
    }
    oct_setup s;
    octd_setup_for(&s, &d->prof, &d->data, g);
    return oct_params_check(p, &s, e);
}

static void poll_control(octd *d)
{
    if (oct_control_generation(d->ctl) == d->seen_gen)
        return;
    oct_control_values v;
    uint64_t gen;
    if (oct_control_read(d->ctl, CONTROL_ATTEMPTS, &v, &gen) != OCT_OK)
        return; /* a writer was inside every time: next iteration */
    if (gen == d->seen_gen)
        return;
    if (gen < d->seen_gen) /* oct_control_read took it after 1 s unchanged */
        octd_log(LOG_NOTICE, "control block went back from generation %" PRIu64 " to %" PRIu64
                             " and stayed there for 1 s: taken as the block's own (re-created)",
                 d->seen_gen, gen);
    d->seen_gen = gen;
    oct_params p;
    oct_params_from_control(&p, &v);
    if (memcmp(&p, &d->params, sizeof p) != 0) {
        oct_error e;
        /* Without an engine (no ring yet) the values are checked as far as
         * the geometry known now allows, with the engine's rules. */
        /* the option table's static rules first: messages in the operator's keys */
        oct_err rc = oct_options_check_values(&v, &e);
        if (rc == OCT_OK)
            rc = d->eng ? octd_frames_set_params(d, 0, &p, &e)
                        : check_params_without_engine(d, &p, &e);
        /* every engine: the same generation on each (same set-up, so the
         * same verdict; one that refuses is logged) */
        for (int i = 1; rc == OCT_OK && i < d->neng; i++) {
            oct_error ie;
            if (octd_frames_set_params(d, i, &p, &ie) != OCT_OK)
                octd_log(LOG_ERR, "engine %d: control generation %" PRIu64 ": %s", i, gen,
                         ie.msg);
        }
        if (rc == OCT_OK) {
            d->params = p;
            d->applied_gen = gen;
            d->review_dirty = true;
            oct_control_from_params(&d->values, &p);
            STORE64(d->sb->applied_gen, gen);
            octd_log(LOG_INFO, "control generation %" PRIu64 " applied", gen);
        } else {
            oct_status_begin(d->st);
            octd_copy_text(d->sb->rejected_reason, sizeof d->sb->rejected_reason, e.msg);
            oct_status_end(d->st);
            STORE64(d->sb->rejected_gen, gen);
            octd_log(LOG_WARNING, "control generation %" PRIu64 " rejected: %s", gen, e.msg);
            /* only over the rejected values: an operator's newer generation,
             * written since, stays and is checked next (generation 0 has
             * no write_if: a zeroed block; its next writer's values count) */
            if (gen)
                octd_publish_params(d, &d->params, "last good", gen);
        }
    } else {
        d->applied_gen = gen;
        STORE64(d->sb->applied_gen, gen);
    }
    if (v.command_seq != d->cmd_seq_seen) {
        d->cmd_seq_seen = v.command_seq;
        d->cmd_args = &v;
        handle_command(d, v.command, v.command_seq);
        d->cmd_args = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* configuration                                                       */
/* ------------------------------------------------------------------ */
/* Loads and checks ini + profile (+ arrays when the geometry is known). */
static oct_err load_config(const char *path, oct_daemon_config *cfg, oct_profile *prof,
                           oct_error *e)
{
    oct_err rc = oct_daemon_config_load(cfg, path, e);
    if (rc != OCT_OK)
        return rc;
    if (!cfg->profile_path[0])
        return oct_error_set(e, OCT_EINVAL, "%s: [profile] path: missing (the processing set-up)",
                             path);
    rc = oct_profile_load(prof, cfg->profile_path, e);
    if (rc != OCT_OK)
        return rc;
    if (!prof->has_geometry) {
        /* Sizes against R x M wait for the ring; that each file is there
         * and parses, and the values' geometry-free rules, do not. */
        rc = octd_profile_files_check(prof, e);
        if (rc == OCT_OK && (rc = octd_params_check_nogeom(&prof->params, prof, e)) != OCT_OK)
            return oct_error_prefix(e, rc, "%s", prof->source_path);
        return rc;
    }
    oct_profile_data data;
    rc = oct_profile_load_data(prof, prof->geom.samples, &data, e);
    if (rc != OCT_OK)
        return rc;
    oct_setup s;
    octd_setup_for(&s, prof, &data, &prof->geom);
    rc = oct_profile_check(prof, &s, e); /* "profile:line: key: ..." */
    oct_profile_data_free(&data);
    return rc;
}

static void warn_save_dir(const oct_daemon_config *cfg)
{
    struct stat st;
    if (cfg->save_dir[0] && (stat(cfg->save_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        octd_log(LOG_WARNING, "%s: [save] directory: %s is not a directory (yet); save commands "
                              "will fail until it exists", cfg->source_path, cfg->save_dir);
}

static void notify_reloading(octd *d)
{
    octd_notify_send(&d->nt, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading",
                     oct_time_monotonic_ns() / 1000);
}

static void do_reload(octd *d)
{
    d->reload = false;
    notify_reloading(d);
    octd_log(LOG_INFO, "SIGHUP: reloading %s", d->config_path);
    oct_daemon_config cfg;
    oct_profile *prof = malloc(sizeof *prof);
    oct_error e;
    oct_profile_data data = {0};
    oct_engine *engs[OCT_ENGINES_MAX] = {0};
    int neng = 0;
    oct_params used = {0};
    bool ok = false;
    if (!prof) {
        octd_log(LOG_ERR, "reload refused: out of memory");
        goto out;
    }
    if (load_config(d->config_path, &cfg, prof, &e) != OCT_OK) {
        octd_log(LOG_ERR, "reload refused, the running configuration stays: %s", e.msg);
        goto out;
    }
    /* The engine for the geometry in use, with the new masks and values. */
    if (d->eng) {
        if (oct_profile_load_data(prof, d->eng_geom.samples, &data, &e) != OCT_OK ||
            octd_plan_engines(&cfg, prof, &data, &d->eng_geom, &prof->params, engs, &neng, &used,
                              &e) != OCT_OK) {
            octd_log(LOG_ERR, "reload refused, the running configuration stays: %s", e.msg);
            goto out;
        }
    } else {
        used = prof->params;
    }
    if (strcmp(cfg.ring_control, d->cfg.ring_control) || strcmp(cfg.ring_status, d->cfg.ring_status)) {
        octd_log(LOG_WARNING, "reload: new control/status block names take effect at the next start");
        memcpy(cfg.ring_control, d->cfg.ring_control, sizeof cfg.ring_control);
        memcpy(cfg.ring_status, d->cfg.ring_status, sizeof cfg.ring_status);
    }
    if (strcmp(cfg.metrics_listen, d->cfg.metrics_listen)) {
        octd_log(LOG_WARNING, "reload: a new [metrics] listen takes effect at the next start");
        memcpy(cfg.metrics_listen, d->cfg.metrics_listen, sizeof cfg.metrics_listen);
    }
    bool pub_changed = cfg.sndhwm != d->cfg.sndhwm || cfg.endpoint_count != d->cfg.endpoint_count ||
                       cfg.pub_sndbuf != d->cfg.pub_sndbuf || cfg.pub_io_threads != d->cfg.pub_io_threads ||
                       cfg.pub_nice != d->cfg.pub_nice || strcmp(cfg.pub_cpus, d->cfg.pub_cpus) != 0 ||
                       cfg.pub_copies != d->cfg.pub_copies || cfg.pub_stats_s != d->cfg.pub_stats_s ||
                       strcmp(cfg.pub_shm_endpoint, d->cfg.pub_shm_endpoint) != 0;
    if ((cfg.pub_shm_endpoint[0] != 0) != (d->cfg.pub_shm_endpoint[0] != 0) ||
        strcmp(cfg.pub_shm_name, d->cfg.pub_shm_name) != 0) {
        /* the pool's buffers are made in the area: only a new pool may change that */
        octd_log(LOG_WARNING, "reload: turning [publish] shm_endpoint on or off, or a new "
                 "shm_name, takes effect at the next start");
        memcpy(cfg.pub_shm_name, d->cfg.pub_shm_name, sizeof cfg.pub_shm_name);
        if ((cfg.pub_shm_endpoint[0] != 0) != (d->cfg.pub_shm_endpoint[0] != 0))
            memcpy(cfg.pub_shm_endpoint, d->cfg.pub_shm_endpoint, sizeof cfg.pub_shm_endpoint);
    }
    for (int i = 0; !pub_changed && i < cfg.endpoint_count; i++)
        pub_changed = strcmp(cfg.endpoints[i], d->cfg.endpoints[i]) != 0;
    if (pub_changed) {
        /* The old sockets hold the ports and ipc:// paths (claiming an
         * ipc:// path we still listen on is refused as another's): close
         * them first, and go back to the old endpoints if the new ones
         * cannot be claimed or bound. */
        octd_endpoints *eps = NULL;
        octd_pub_destroy(d->pub);
        d->pub = NULL;
        octd_endpoints_release(d->endpoints);
        d->endpoints = NULL;
        bool pub_ok = octd_endpoints_claim(&eps, &cfg, &e) == OCT_OK;
        if (pub_ok) {
            d->endpoints = eps;
            if (!(pub_ok = octd_pub_create(&d->pub, &cfg, &e) == OCT_OK)) {
                octd_endpoints_release(d->endpoints);
                d->endpoints = NULL;
            }
        }
        if (!pub_ok) {
            octd_log(LOG_ERR, "reload refused, the running configuration stays: %s", e.msg);
            if (octd_endpoints_claim(&d->endpoints, &d->cfg, &e) != OCT_OK)
                octd_log(LOG_ERR, "%s", e.msg);
            if (octd_pub_create(&d->pub, &d->cfg, &e) != OCT_OK) {
                octd_log(LOG_CRIT, "cannot re-bind the old endpoints either: %s", e.msg);
                d->stop = true;
            } else {
                octd_pub_set_spacing(d->pub, d->prof.spacing_um);
            }
            for (int i = 0; i < neng; i++)
                oct_engine_destroy(engs[i]);
            goto out;
        }
    }
    if (strcmp(cfg.ring_frames, d->cfg.ring_frames) != 0 && d->ring) {
        oct_ring_consumer_close(d->ring);
        d->ring = NULL;
        d->next_attach_ns = 0;
    }
    uint32_t old_slack = d->cfg.timer_slack_ns;
    int old_priority = d->cfg.priority, old_nice = d->cfg.nice;
    bool old_lock = d->cfg.lock_memory;
    d->cfg = cfg;
    d->prof = *prof;
    octd_pub_set_spacing(d->pub, d->prof.spacing_um);
    if (neng > 0) {
        octd_install_engines(d, engs, neng);
        oct_profile_data_free(&d->data);
        d->data = data;
        d->data_samples = d->eng_geom.samples;
        memset(&data, 0, sizeof data);
    } else {
        oct_profile_data_free(&d->data);
        d->data_samples = 0;
    }
    d->params = used;
    oct_control_from_params(&d->values, &used);
    octd_publish_params(d, &used, "reloaded profile", 0);
    d->review_dirty = true;
    octd_log_set_level(cfg.log_level);
    warn_save_dir(&cfg);
    /* threads started from here on inherit these; mlockall stays as it is */
    if (cfg.timer_slack_ns != old_slack)
        octd_rt_timer_slack(cfg.timer_slack_ns);
    if (cfg.priority != old_priority)
        octd_rt_priority(cfg.priority);
    if (cfg.nice != old_nice && cfg.nice != OCT_NICE_AUTO)
        octd_rt_nice(cfg.nice, true);
    if (cfg.nice != old_nice && cfg.nice == OCT_NICE_AUTO) {
        octd_rt_nice(OCTD_NICE_OWN, true); /* then as the engines say */
        d->nice_cpu = 0;
        octd_auto_nice(d);
    }
    if (cfg.lock_memory != old_lock)
        octd_log(LOG_WARNING, "reload: [engine] lock_memory takes effect at the next start");
    octd_status_engine(d);
    ok = true;
    octd_log(LOG_INFO, "reloaded %s and %s", d->config_path, d->prof.source_path);
out:
    oct_profile_data_free(&data);
    free(prof);
    octd_notify_send(&d->nt, "READY=1\nSTATUS=%s", ok ? "reloaded" : "reload refused, previous configuration kept");
}

/* ------------------------------------------------------------------ */
/* signals, periodic work                                              */
/* ------------------------------------------------------------------ */
/* Threads that existed before the signals were blocked (a sanitizer's, a
 * library's) may receive them instead of the signalfd: a handler that only
 * sets these flags catches those (SPEC: no work in handlers). */
static volatile sig_atomic_t stray_hup, stray_term;
static void stray_signal(int sig)
{
    if (sig == SIGHUP)
        stray_hup = 1;
    else
        stray_term = 1;
}

static void read_signals(octd *d)
{
    if (stray_hup) {
        stray_hup = 0;
        d->reload = true;
    }
    if (stray_term && !d->stop) {
        octd_log(LOG_INFO, "signal: stopping");
        d->stop = true;
    }
    struct signalfd_siginfo si;
    while (read(d->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP)
            d->reload = true;
        else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            if (!d->stop)
                octd_log(LOG_INFO, "%s: stopping", strsignal((int)si.ssi_signo));
            d->stop = true;
        }
    }
}

static void periodic(octd *d)
{
    uint64_t now = oct_time_monotonic_ns();
    status_counters(d);
    octd_health_periodic(d, now);
    octd_metrics_tick(d, now);
    octd_record_poll(d);
    octd_reglive_poll(d);
    /* The watchdog is fed only from here, so a stuck loop stops feeding it. */
    if (d->nt.watchdog_usec && now - d->last_watchdog_ns >= d->nt.watchdog_usec * 500) {
        octd_notify_send(&d->nt, "WATCHDOG=1");
        d->last_watchdog_ns = now;
    }
    if (now - d->last_status_ns < SEC_NS)
        return;
    d->last_status_ns = now;
    oct_status_block copy;
    if (oct_status_read(d->st, &copy) == OCT_OK)
        octd_pub_send_status(d->pub, &copy, &d->values);
    octd_health_notify(d, NULL); /* STATUS= is octctl status's summary= */
}

/* Refuses to start over a running octd that uses the same status block. */
static bool other_octd_running(const char *status_name)
{
    oct_status *s;
    if (oct_status_open(&s, status_name, NULL) != OCT_OK)
        return false;
    oct_status_block b;
    bool running = false;
    if (oct_status_read(s, &b) == OCT_OK && b.pid && (pid_t)b.pid != getpid() &&
        b.state != OCT_STATE_STOPPING && kill((pid_t)b.pid, 0) == 0) {
        octd_log(LOG_ERR, "another octd (pid %" PRIu64 ") is running with status block %s",
                 b.pid, status_name);
        running = true;
    }
    oct_status_close(s, false);
    return running;
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: octd --config FILE [--check-config] [--foreground]\n"
            "       octd --version | --help\n"
            "Real-time OCT processing daemon: frame ring -> CFD/MSI/CMS images -> ZeroMQ.\n"
            "  -c, --config FILE   octd.ini (CONFIGURATION.md); its [profile] path names the profile\n"
            "  -t, --check-config  validate octd.ini, the profile and its data files (masks,\n"
            "                      reference, ...), then exit (0 valid, 78 invalid)\n"
            "  -f, --foreground    accepted for compatibility; octd always runs in the foreground\n"
            "  -V, --version       print the version\n"
            "Signals: SIGHUP reloads the configuration, SIGTERM/SIGINT stop.\n"
            "Exit status: 0 stopped by a signal; 78 bad configuration (octd.ini, profile or\n"
            "  data files; restarting does not help); 69 start-up failed for another reason\n"
            "  (a publish endpoint cannot be bound, the engine cannot be planned: no GPU, out\n"
            "  of memory; a restart may help); 1 other errors (e.g. another octd is running);\n"
            "  64 usage.\n"
            OCT_DOCS_HINT);
}

static int run(octd *d);

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"check-config", no_argument, 0, 't'},
        {"foreground", no_argument, 0, 'f'},   {"version", no_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *config = NULL;
    bool check = false;
    int c = oct_cli_start("octd", argc, argv, NULL);
    if (c >= 0)
        return c;
    oct_engine_process_init(); /* before any thread: OpenBLAS kernel choice */
    octd_rt_nice_base();       /* octd's own nice, its background threads' */
    while ((c = getopt_long(argc, argv, "c:tfVh", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 't': check = true; break;
        case 'f': break;
        case 'V': printf("octd %s\n", OCT_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: return oct_cli_usage("octd", "bad option %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return oct_cli_usage("octd", "unexpected argument '%s'", argv[optind]);
    if (!config)
        return oct_cli_usage("octd", "--config FILE is required");
    octd *d = calloc(1, sizeof *d);
    if (!d) {
        octd_log(LOG_CRIT, "out of memory");
        return 1;
    }
    d->sigfd = -1;
    d->nt.fd = -1;
    snprintf(d->config_path, sizeof d->config_path, "%s", config);
    oct_error e;
    if (load_config(config, &d->cfg, &d->prof, &e) != OCT_OK) {
        octd_log(LOG_ERR, "%s", e.msg);
        if (check)
            fprintf(stdout, "configuration invalid\n");
        free(d);
        return EX_CONFIG;
    }
    octd_log_set_level(d->cfg.log_level);
    warn_save_dir(&d->cfg);
    if (check) {
        if (!d->prof.has_geometry && d->prof.masks_path[0])
            octd_log(LOG_WARNING, "%s: no geometry: the mask files were read, their sizes "
                                  "against R x M are checked when the ring appears",
                     d->prof.source_path);
        printf("configuration valid: %s, profile %s\n", config, d->prof.source_path);
        free(d);
        return 0;
    }
    int rc = run(d);
    free(d);
    return rc;
}

static int run(octd *d)
{
    oct_error e;
    int exit_code = 1;
    char nerr[256];
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = stray_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
        (d->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        octd_log(LOG_CRIT, "signalfd: %s", strerror(errno));
        return 1;
    }
    /* The frame loop polls the ring and the device with sleeps of tens of
     * microseconds; the default 50 us timer slack would stretch each and
     * show up as latency.  Threads created later (ZeroMQ, OpenMP, engine
     * workers) inherit it and the scheduling policy ([engine] keys); the
     * publisher's threads run at SCHED_OTHER (publish.c, issue 21). */
    octd_rt_timer_slack(d->cfg.timer_slack_ns);
    if (d->cfg.lock_memory)
        octd_rt_lock_memory();
    if (d->cfg.priority > 0)
        octd_rt_priority(d->cfg.priority);
    d->nice_cpu = -1;
    if (d->cfg.nice != OCT_NICE_AUTO) /* auto: when engines are installed */
        octd_rt_nice(d->cfg.nice, false);
    if (!octd_notify_open(&d->nt, nerr, sizeof nerr))
        octd_log(LOG_WARNING, "%s", nerr);
    if (other_octd_running(d->cfg.ring_status)) {
        close(d->sigfd);
        return 1;
    }
    d->params = d->prof.params;
    memset(&d->values, 0, sizeof d->values);
    oct_control_from_params(&d->values, &d->params);
    if (oct_control_create(&d->ctl, d->cfg.ring_control, &d->values, 0660, &e) != OCT_OK) {
        octd_log(LOG_CRIT, "control block %s: %s", d->cfg.ring_control, e.msg);
        goto out;
    }
    if (oct_status_create(&d->st, d->cfg.ring_status, 0664, &e) != OCT_OK) {
        octd_log(LOG_CRIT, "status block %s: %s", d->cfg.ring_status, e.msg);
        goto out;
    }
    d->sb = oct_status_block_ptr(d->st);
    if (octd_health_init(d, &e) != OCT_OK) {
        octd_log(LOG_CRIT, "%s", e.msg);
        goto out;
    }
    octd_health_ring(d, OCT_ATTACH_WAITING, "");
    d->seen_gen = d->applied_gen = oct_control_generation(d->ctl);
    oct_status_begin(d->st);
    d->sb->pid = (uint64_t)getpid();
    d->sb->start_ns = oct_time_realtime_ns();
    oct_status_end(d->st);
    set_state(d, OCT_STATE_STARTING);
    STORE64(d->sb->applied_gen, d->applied_gen);
    d->mode = OCT_STATE_ONLINE;
    /* The configuration was checked (load_config): failures from here on
     * (an endpoint in use, no GPU, no memory) may pass, so they are not 78,
     * which would keep the service down for good. */
    if (octd_endpoints_claim(&d->endpoints, &d->cfg, &e) != OCT_OK ||
        octd_pub_create(&d->pub, &d->cfg, &e) != OCT_OK || octd_metrics_start(d, &e) != OCT_OK) {
        octd_log(LOG_CRIT, "%s", e.msg);
        exit_code = EX_UNAVAILABLE;
        goto out;
    }
    octd_pub_set_spacing(d->pub, d->prof.spacing_um);
    if (d->prof.has_geometry && !octd_ensure_engine(d, &d->prof.geom)) {
        exit_code = EX_UNAVAILABLE;
        goto out;
    }
    try_attach(d);
    octd_status_engine(d);
    status_counters(d);
    octd_log(LOG_INFO, "octd %s started: control %s, status %s, ring %s, %d endpoint(s) from %s",
             OCT_VERSION, d->cfg.ring_control, d->cfg.ring_status, d->cfg.ring_frames,
             d->cfg.endpoint_count, d->cfg.endpoints[0]);
    set_state(d, current_state(d));
    octd_health_notify(d, "READY=1\n");

    while (!d->stop) {
        read_signals(d);
        if (d->stop)
            break;
        if (d->reload) {
            octd_frames_drain(d); /* the engine may be replaced */
            do_reload(d);
        }
        if (!d->ring)
            try_attach(d);
        poll_control(d);
        if (d->mode == OCT_STATE_REVIEW) {
            octd_frames_drain(d); /* review uses the engine synchronously */
            review_step(d);
        } else if (d->ring)
            online_step(d);
        else {
            /* Nothing to read: sleep on the signal fd, so a signal wakes us. */
            struct pollfd pfd = {d->sigfd, POLLIN, 0};
            poll(&pfd, 1, RING_TIMEOUT_MS);
        }
        periodic(d);
    }
    exit_code = 0;
out:
    octd_notify_send(&d->nt, "STOPPING=1\nSTATUS=stopping");
    d->stop = true;
    if (d->sb)
        status_counters(d); /* state stopping, final counters */
    octd_metrics_stop(d);
    octd_frames_drain(d);
    octd_record_shutdown(d); /* the recording's file complete before exit */
    octd_pub_destroy(d->pub);
    octd_endpoints_release(d->endpoints); /* after the sockets are closed */
    octd_frames_free(d); /* after ZeroMQ let go of the product buffers */
    octd_reglive_free(d);
    oct_ring_consumer_close(d->ring);
    octd_destroy_engines(d);
    oct_products_destroy(d->save_prod);
    oct_profile_data_free(&d->data);
    octd_frame_buf_free(&d->cur);
    octd_frame_buf_free(&d->scratch);
    octd_frame_buf_free(&d->kept);
    /* The blocks stay (see the top of this file). */
    if (d->st)
        oct_status_close(d->st, false);
    if (d->ctl)
        oct_control_close(d->ctl, false);
    octd_notify_close(&d->nt);
    octd_health_free(d);
    if (d->sigfd >= 0)
        close(d->sigfd);
    octd_log(LOG_INFO, "stopped");
    return exit_code;
}
