/* metrics.h - a Prometheus text-format endpoint (issue 14.4), off by
 * default: [metrics] listen = 127.0.0.1:9464 in octd.ini (a bare PORT means
 * loopback).  civetweb serves GET /metrics from its own thread, from a
 * consistent copy of the status block plus the rates and the latency
 * histogram that the frame loop feeds here. */
#ifndef OCTD_METRICS_H
#define OCTD_METRICS_H

#include <stdint.h>

#include "oct_types.h"

struct octd;
typedef struct octd_metrics octd_metrics;

/* Starts the server when cfg.metrics_listen is set (d->metrics stays NULL
 * otherwise).  An address that cannot be bound: OCT_EIO naming it. */
oct_err octd_metrics_start(struct octd *d, oct_error *e);
/* Every loop: latency of a newly processed frame into the histogram,
 * rates once a second. */
void octd_metrics_tick(struct octd *d, uint64_t now_ns);
void octd_metrics_stop(struct octd *d);

#endif
