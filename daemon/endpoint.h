/* endpoint.h - ownership of ipc:// publish endpoints (issue 14.3).
 *
 * ZeroMQ binds an ipc:// path by unlinking whatever socket is there, so a
 * second octd would silently take the first one's subscribers.  Each
 * ipc:// endpoint gets a lock file beside its socket, PATH.lock, held with
 * flock(LOCK_EX) for octd's lifetime and holding its pid.  A live owner
 * (lock held) is refused by name and pid; a socket that some other live
 * process listens on (a connect() succeeds) is refused too; only a stale
 * socket (no owner, nobody listening) is taken over.  tcp:// endpoints
 * need none of this: the kernel refuses a second bind (EADDRINUSE). */
#ifndef OCTD_ENDPOINT_H
#define OCTD_ENDPOINT_H

#include "oct_config.h"
#include "oct_types.h"

typedef struct octd_endpoints octd_endpoints;

/* Claims every ipc:// endpoint of cfg.  OCT_ESTATE with a message naming
 * the endpoint and the owner's pid when one is owned. */
oct_err octd_endpoints_claim(octd_endpoints **out, const oct_daemon_config *cfg, oct_error *e);
/* Unlinks the lock files and lets go (NULL: nothing). */
void octd_endpoints_release(octd_endpoints *l);

#endif
