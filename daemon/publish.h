/* publish.h - octd's ZeroMQ publisher (SPEC 6).  Product buffers that
 * zero-copy messages borrow come from frames.c's pool. */
#ifndef OCTD_PUBLISH_H
#define OCTD_PUBLISH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "oct_config.h"
#include "oct_engine.h"
#include "oct_ipc.h"

/* How much of one engine's pool of zero-copy product buffers is held
 * (frames.c's, one per engine): [publish] copies = auto copies images only
 * while more than half of it is held.  held counts the pooled buffers with
 * refs > 0 (raised by the frame loop as it takes one, lowered by whichever
 * thread drops the last reference); cap is the pool's size limit. */
typedef struct octd_pool_gauge {
    atomic_int held, cap;
} octd_pool_gauge;

/* One oct_products object and the number of holders: octd while it fills
 * and sends it, plus one per ZeroMQ message that still points into it.
 * The free callback runs in a ZeroMQ I/O thread, hence the atomic. */
typedef struct octd_slot {
    oct_products *prod;
    atomic_int refs;
    octd_pool_gauge *gauge; /* its pool's (NULL: not pooled, or copy-only) */
    bool copy_only; /* its images are sent as copies: ZeroMQ never holds it */
    /* octd's stamps of the frame in it (CLOCK_REALTIME ns, 0 = none): taken
     * off the ring, submitted to the engine, completed (products in host
     * memory); the headers' t_take_ns, t_sub_ns, t_done_ns (issue 19) */
    uint64_t t_take_ns, t_sub_ns, t_done_ns;
    /* [publish] shm_endpoint: the products lie in slot area_slot of this
     * image area (frames.c's; NULL: ordinary memory).  Its seqlock is odd
     * from pool_acquire until octd_pub_send_products publishes the frame. */
    struct octd_area *area;
    uint32_t area_slot;
} octd_slot;

/* An engine's image area (ipc oct_images) and its holders: the pool's
 * buffers laid out in it (a buffer ZeroMQ still holds keeps an old area
 * mapped after a new one replaced it). */
typedef struct octd_area {
    oct_images *img;
    int refs;      /* the frame loop's: buffers made in it, + 1 while it is the lane's */
    bool current;  /* still the lane's (its name is not yet another object's) */
} octd_area;

typedef struct octd_pub octd_pub;

/* What one processed frame's messages say about it. */
typedef struct octd_frame_meta {
    uint64_t frame_id, frame_seq, epoch, t_acq_ns, params_gen, skipped, torn;
    uint64_t t_take_ns, t_sub_ns, t_done_ns; /* octd_slot's stamps (0: not sent) */
    bool review;   /* re-processed kept frame */
    bool want_f32; /* the frame's params asked for float32 copies */
    /* octd is catching up (a quarter of the ring committed behind this
     * frame): a copy-only buffer's images are dropped (counted in *drops),
     * not copied by the frame loop (r5: a saturated publisher thread must
     * cost images, not frames) */
    bool behind;
    uint32_t averaged; /* registered averages: volumes in the mean ("averaged"; 0: none) */
} octd_frame_meta;

/* Binds an XPUB socket at every endpoint and starts the publisher thread
 * that fans the frame loop's messages out to it; the message names the bad
 * endpoint.  The other calls are the frame loop's (one thread). */
oct_err octd_pub_create(octd_pub **out, const oct_daemon_config *cfg, oct_error *e);
void octd_pub_destroy(octd_pub *p); /* ends the thread; linger 0; waits for ZeroMQ to release the slots */
/* The profile's geometry.spacing_um {depth, ascan, line} (µm; zeros: not
 * given), added to every image header as "spacing_um" when all are set. */
void octd_pub_set_spacing(octd_pub *p, const float spacing_um[3]);
/* What the frame loop handed to ZeroMQ and what it skipped because no
 * subscriber's prefix matched the topic (not built, no ZeroMQ call: counted
 * as published, as a PUB socket without subscribers would), and the
 * subscription messages the publisher thread handled (none reach the frame
 * loop's socket). */
typedef struct octd_pub_counts {
    uint64_t handed, unwanted, subscription_changes;
    /* images (over ZERO_COPY_MIN) since the start: those of pooled buffers
     * the publisher thread copied / forwarded zero-copy after deciding
     * (copies = publisher, auto), and those the frame loop copied (copy-only
     * buffers) */
    uint64_t pub_copies, pub_zero_copy, frame_copies;
    uint64_t behind_drops; /* copy-only images dropped while octd caught up */
    /* [publish] shm_endpoint: header-only messages sent / not sent */
    uint64_t shm_sent, shm_drops;
} octd_pub_counts;
/* Whether more than half of g's pool is held (copies = auto copies then). */
bool octd_pool_low(const octd_pool_gauge *g);
void octd_pub_get_counts(const octd_pub *p, octd_pub_counts *c);
/* Whether any subscriber's prefix matches kind/method[/f32] now: one atomic
 * load, no ZeroMQ call (the publisher thread keeps the answer current). */
bool octd_pub_wanted(const octd_pub *p, int method, int kind, bool f32);
/* Drops one holder of s (octd's, or a sent message's from ZeroMQ's thread). */

void octd_slot_release(octd_slot *s);

/* Sends every present image of s->prod (u8 and, when filled, f32).
 * Returns the number of messages sent; *drops counts those that could not
 * be sent; *last_sent_ns is the realtime clock after the last send. */
unsigned octd_pub_send_products(octd_pub *p, octd_slot *s, const octd_frame_meta *m,
                                uint64_t *drops, uint64_t *last_sent_ns);
/* Sends one image kept outside the pool (live registration's topics): its
 * u8 or f32 buffer copied; kind_name is the header's "kind".  Returns 1 when
 * sent, else 0 with *drops counted. */
unsigned octd_pub_send_image(octd_pub *p, const char *topic, const char *kind_name, int method,
                             const oct_image *img, bool f32, uint64_t image_seq,
                             const octd_frame_meta *m, uint64_t *drops);
/* The 2-part "status" message. */
/* v: the control values in use (the "params" object), may be NULL */
void octd_pub_send_status(octd_pub *p, const oct_status_block *b, const oct_control_values *v);
/* Formats the status block as JSON; 0 when it does not fit. */
size_t octd_status_json(const oct_status_block *b, char *buf, size_t cap);
/* The same with "params": {control key: value string, ...} of the values in
 * use (v may be NULL: no params object). */
size_t octd_status_json_params(const oct_status_block *b, const oct_control_values *v,
                               char *buf, size_t cap);

#endif
