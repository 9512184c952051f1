/* octweb.h - the browser console's server (issue 16): shared declarations.
 *
 *  feed.c   ZeroMQ subscriber: keeps the newest image of every topic
 *  web.c    civetweb handlers: static page, WebSocket clients (one sender
 *           thread each), controls and commands through the IPC library
 *  main.c   options, configuration file, access rules, start-up
 */
#ifndef OCTWEB_H
#define OCTWEB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_types.h"

#define OCTWEB_TOPICS_MAX 64
#define OCTWEB_CLIENTS_MAX 32
#define OCTWEB_PATH_MAX 4096

typedef struct octweb_config {
    char listen[128];          /* civetweb listening_ports, e.g. 127.0.0.1:8080 or 0.0.0.0:8443s */
    bool loopback;             /* every listening address is a loopback one */
    char root[OCTWEB_PATH_MAX];  /* the page (index.html, console.js, console.css) */
    char endpoint[256];        /* octd's ZeroMQ PUB endpoint */
    char control[128], status[128];
    char cert[OCTWEB_PATH_MAX];  /* PEM certificate + key: TLS on the ports marked 's' */
    char operator_token[128], viewer_token[128]; /* from their files; "" = none */
    char origins[512];         /* extra allowed WebSocket origins, comma-separated */
    int max_clients;
    char source[OCTWEB_PATH_MAX]; /* the configuration file, "" = command line only */
} octweb_config;

/* One received image, reference counted: the feed replaces a topic's
 * newest image while senders may still be writing the old one out. */
typedef struct octweb_image {
    atomic_int refs;
    char topic[64];
    uint64_t seq;              /* octweb's count of images of this topic */
    uint64_t t_recv_ns;        /* CLOCK_REALTIME when octweb got it */
    uint32_t shape[3];
    int ndim;
    char *header;              /* octd's JSON header, NUL-terminated */
    size_t header_len;
    uint8_t *px;               /* u8 pixels, C order */
    size_t px_len;
} octweb_image;

void octweb_image_ref(octweb_image *im);
void octweb_image_unref(octweb_image *im);

/* The newest image per topic, guarded by octweb_lock; a new image
 * broadcasts octweb_cond. */
typedef struct octweb_store {
    octweb_image *img[OCTWEB_TOPICS_MAX];
    int count;
    uint64_t received, dropped_f32;
    /* octd's own latency (t_pub - t_acq) of the images of the
     * last interval, for the health panel's p50/p99 */
    uint32_t lat_us[512];
    int lat_n;
} octweb_store;

extern pthread_mutex_t octweb_lock;
extern pthread_cond_t octweb_cond;
extern octweb_store octweb_images;
extern atomic_bool octweb_stop;

/* feed.c: subscribes to endpoint and runs until octweb_stop. */
oct_err octweb_feed_start(const char *endpoint, pthread_t *thr, oct_error *e);

/* A u8 image [rows][cols] reduced by integer box averaging (fy, fx >= 1)
 * into out [(rows/fy)][(cols/fx)] (the last partial boxes averaged over
 * what they hold, so the output is ceil(rows/fy) x ceil(cols/fx)). */
void octweb_downscale(const uint8_t *in, uint32_t rows, uint32_t cols, uint32_t fy, uint32_t fx,
                      uint8_t *out);

/* web.c */
oct_err octweb_serve(const octweb_config *cfg, oct_error *e); /* until octweb_stop */

uint64_t octweb_now_ns(void); /* CLOCK_REALTIME */

#endif
