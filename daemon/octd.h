/* octd.h - the daemon's state (one object, passed everywhere; no globals
 * besides the log threshold). */
#ifndef OCTD_H
#define OCTD_H

#include <stdbool.h>
#include <stdint.h>

#include "oct_config.h"
#include "oct_engine.h"
#include "oct_ipc.h"
#include "publish.h"
#include "sys.h"

typedef struct octd_frame_buf {
    uint8_t *data;
    size_t cap;
    oct_geometry geom;
    oct_frame_info info;
    bool valid;
} octd_frame_buf;

typedef struct octd {
    char config_path[OCT_PATH_MAX];
    oct_daemon_config cfg;
    oct_profile prof;
    oct_profile_data data;     /* masks / reference for data_samples */
    uint32_t data_samples;     /* 0: not loaded */

    oct_control *ctl;
    oct_status *st;
    oct_status_block *sb;
    octd_pub *pub;
    octd_notify nt;
    int sigfd;
    bool stop, reload;

    /* frame ring */
    oct_ring_consumer *ring;
    oct_geometry ring_geom;
    uint64_t ring_epoch;
    bool ever_attached;
    uint64_t next_attach_ns;
    char attach_err[512];      /* last attach error logged (log each new one once) */

    /* engine */
    oct_engine *eng;
    /* [engine] devices (issue 20): engs[0..neng-1], engs[0] == eng (review,
     * saves and validation use it); neng 0: just eng */
    oct_engine *engs[OCT_ENGINES_MAX];
    int neng;
    char engine_warning[256]; /* why an engine was taken out ("" = none) */
    bool engine_warning_shown; /* it is in the status block's warnings */
    char shm_warning[256];     /* why [publish] shm_endpoint serves no images ("" = it does) */
    uint64_t engines_gen;      /* counts re-plans of the engines */
    int nice_cpu;              /* [engine] nice = auto as applied: 1 CPU engines (the frame
                                * loop less nice), 0 other engines, -1 not yet */
    oct_geometry eng_geom;
    oct_params params;         /* the good values in use */
    oct_control_values values; /* the same as control values (for sidecars) */
    uint64_t applied_gen, seen_gen, cmd_seq_seen;
    char proc_err[512];        /* last processing error logged */
    oct_products *save_prod;   /* images for save_images */

    /* modes */
    uint32_t mode;             /* OCT_STATE_ONLINE or OCT_STATE_REVIEW */
    bool error_state;          /* the engine could not be planned for the ring */
    octd_frame_buf cur, scratch, kept;
    bool review_dirty;
    uint64_t last_review_ns;

    /* counters (mirrored into the status block) */
    uint64_t seen, processed, skipped, torn, reattaches, published, drops;
    uint64_t engine_lost; /* frames in flight on an engine that was taken out (in skipped) */
    uint64_t last_frame_id, last_latency, torn_since;

    uint64_t last_status_ns, last_watchdog_ns;

    struct octd_frames *frames; /* the frame path and its product pool (frames.c), NULL until used */
    struct octd_rec *rec;      /* recording in progress (record.c), NULL when none */
    const oct_control_values *cmd_args; /* the generation of the command being handled */
    /* issue 14 (ops): health.c, endpoint.c, metrics.c */
    struct octd_health *health;
    struct octd_endpoints *endpoints; /* lock files of the ipc:// endpoints */
    struct octd_metrics *metrics;     /* NULL unless [metrics] listen */
    uint64_t reprocessed, lost; /* review re-processing; ring frames lapped (within skipped) */
    struct octd_reglive *reglive; /* live registration (register_live.c), NULL until used */
} octd;

/* Makes d->eng fit geom (re-plans when needed; engines.c).  false: cannot process. */
bool octd_ensure_engine(octd *d, const oct_geometry *geom);

/* main.c: copies src into a fixed-size status field (truncated, NUL-ended),
 * and the engine's backend and device into the status block. */
void octd_copy_text(char *dst, size_t len, const char *src);
void octd_status_engine(octd *d);

#endif
