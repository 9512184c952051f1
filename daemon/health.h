/* health.h - what octd tells about itself (issue 14.1, 14.2, 14.4): the ring's
 * state and why it is not attached, warnings for set-ups that are valid but
 * yield nothing, the last error, and systemd STATUS= from the same text as
 * `octctl status` (oct_status_summary). */
#ifndef OCTD_HEALTH_H
#define OCTD_HEALTH_H

#include <stdint.h>

#include "oct_types.h"

struct octd;
typedef struct octd_health octd_health;

/* Creates d->health and hooks LOG_ERR messages into last_error. */
oct_err octd_health_init(struct octd *d, oct_error *e);
void octd_health_free(struct octd *d);
/* The ring is attached (state OCT_ATTACH_OK, msg ignored), awaited
 * (OCT_ATTACH_WAITING: absent, closed, stale) or refused
 * (OCT_ATTACH_ERROR: permissions, ABI, geometry); logged once per change. */
void octd_health_ring(struct octd *d, uint32_t state, const char *msg);
/* The ring state for an attach error rc with message msg; a permission
 * error is explained (owner, group, mode, octd's uid and groups). */
void octd_health_attach_error(struct octd *d, oct_err rc, const char *msg);
/* Every loop: warnings for the values/geometry in use, last_error; once a
 * second (from periodic) the STATUS= line. */
void octd_health_periodic(struct octd *d, uint64_t now_ns);
/* Sends prefix (e.g. "READY=1\n", may be NULL) and STATUS=<oct_status_summary>. */
void octd_health_notify(struct octd *d, const char *prefix);

#endif
