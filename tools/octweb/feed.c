/* feed.c - octd's images in: a ZeroMQ SUB socket whose thread keeps only
 * the newest image of every topic (the browsers never get a backlog), and
 * the box downscaler used per client.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "octweb.h"

pthread_mutex_t octweb_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t octweb_cond;
octweb_store octweb_images;
atomic_bool octweb_stop;

/* Image kinds a console shows (8-bit); f32 copies and volumes are not
 * subscribed to, so octd does not even send them to octweb. */
static const char *const prefixes[] = {"bscan/", "enface/", "confocal/", "xsec_h/", "xsec_v/",
                                       "slab_mean/", "slab_max/", NULL};

uint64_t octweb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void octweb_image_ref(octweb_image *im) { atomic_fetch_add(&im->refs, 1); }

void octweb_image_unref(octweb_image *im)
{
    if (im && atomic_fetch_sub(&im->refs, 1) == 1) {
        free(im->header);
        free(im->px);
        free(im);
    }
}

/* The number after "key": in octd's header (its own JSON writer: no
 * whitespace, keys unique); false when absent. */
static bool json_u64(const char *h, const char *key, uint64_t *out)
{
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(h, pat);
    if (!p)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p + strlen(pat), &end, 10);
    if (errno || end == p + strlen(pat))
        return false;
    *out = v;
    return true;
}

/* "shape":[a,b,c] -> up to 3 dimensions, each >= 1; 0 when malformed. */
static int json_shape(const char *h, uint32_t shape[3])
{
    const char *p = strstr(h, "\"shape\":[");
    if (!p)
        return 0;
    p += 9;
    int n = 0;
    while (n < 3) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || end == p || v == 0 || v > 1u << 20)
            return 0;
        shape[n++] = (uint32_t)v;
        p = end;
        if (*p == ']')
            return n;
        if (*p != ',')
            return 0;
        p++;
    }
    return 0;
}

static void store(octweb_image *im, uint64_t t_acq, uint64_t t_pub)
{
    pthread_mutex_lock(&octweb_lock);
    octweb_store *s = &octweb_images;
    int i = 0;
    while (i < s->count && strcmp(s->img[i]->topic, im->topic) != 0)
        i++;
    if (i == s->count && s->count == OCTWEB_TOPICS_MAX) {
        pthread_mutex_unlock(&octweb_lock);
        octweb_image_unref(im);
        return;
    }
    if (i < s->count) {
        im->seq = s->img[i]->seq + 1;
        octweb_image_unref(s->img[i]);
    } else {
        im->seq = 1;
        s->count++;
    }
    s->img[i] = im;
    s->received++;
    if (t_pub >= t_acq && t_acq && s->lat_n < 512)
        s->lat_us[s->lat_n++] = (uint32_t)((t_pub - t_acq) / 1000u > UINT32_MAX ? UINT32_MAX
                                                                                 : (t_pub - t_acq) / 1000u);
    pthread_cond_broadcast(&octweb_cond);
    pthread_mutex_unlock(&octweb_lock);
}

static void *feed_main(void *arg)
{
    void *sock = arg;
    zmq_msg_t part[3];
    while (!atomic_load(&octweb_stop)) {
        zmq_pollitem_t pi = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&pi, 1, 200) <= 0)
            continue;
        int n = 0, more = 1;
        bool bad = false;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, sock, 0) < 0) {
                zmq_msg_close(&m);
                bad = true;
                break;
            }
            more = zmq_msg_more(&m);
            if (n < 3)
                part[n++] = m;
            else {
                zmq_msg_close(&m);
                bad = true;
            }
        }
        if (!bad && n == 3) {
            size_t tl = zmq_msg_size(&part[0]), hl = zmq_msg_size(&part[1]);
            size_t pl = zmq_msg_size(&part[2]);
            octweb_image *im = calloc(1, sizeof *im);
            if (im && tl < sizeof im->topic && !(tl > 4 && !memcmp((char *)zmq_msg_data(&part[0]) + tl - 4, "/f32", 4))) {
                atomic_init(&im->refs, 1);
                memcpy(im->topic, zmq_msg_data(&part[0]), tl);
                im->topic[tl] = '\0';
                im->header = malloc(hl + 1);
                im->px = malloc(pl ? pl : 1);
                if (im->header && im->px) {
                    memcpy(im->header, zmq_msg_data(&part[1]), hl);
                    im->header[hl] = '\0';
                    im->header_len = strlen(im->header);
                    memcpy(im->px, zmq_msg_data(&part[2]), pl);
                    im->px_len = pl;
                    im->ndim = json_shape(im->header, im->shape);
                    uint64_t count = 1, t_acq = 0, t_pub = 0;
                    for (int d = 0; d < im->ndim; d++)
                        count *= im->shape[d];
                    json_u64(im->header, "t_acq_ns", &t_acq);
                    json_u64(im->header, "t_pub_ns", &t_pub);
                    im->t_recv_ns = octweb_now_ns();
                    /* 8-bit images of 2 or 3 dimensions whose payload
                     * matches the shape; anything else is not shown */
                    if (im->ndim >= 2 && count == pl && strstr(im->header, "\"dtype\":\"u8\"")) {
                        store(im, t_acq, t_pub);
                        im = NULL;
                    }
                }
            }
            octweb_image_unref(im);
        }
        for (int i = 0; i < n; i++)
            zmq_msg_close(&part[i]);
    }
    return NULL;
}

oct_err octweb_feed_start(const char *endpoint, pthread_t *thr, oct_error *e)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&octweb_cond, &ca);
    pthread_condattr_destroy(&ca);
    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_SUB) : NULL;
    if (!sock)
        return oct_error_set(e, OCT_EIO, "zmq: %s", zmq_strerror(zmq_errno()));
    int hwm = 256;
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    for (int i = 0; prefixes[i]; i++)
        zmq_setsockopt(sock, ZMQ_SUBSCRIBE, prefixes[i], strlen(prefixes[i]));
    if (zmq_connect(sock, endpoint) != 0)
        return oct_error_set(e, OCT_EINVAL, "endpoint '%s': %s", endpoint,
                             zmq_strerror(zmq_errno()));
    if (pthread_create(thr, NULL, feed_main, sock) != 0)
        return oct_error_set(e, OCT_EIO, "cannot start the subscriber thread");
    return OCT_OK;
}

void octweb_downscale(const uint8_t *in, uint32_t rows, uint32_t cols, uint32_t fy, uint32_t fx,
                      uint8_t *out)
{
    uint32_t orows = (rows + fy - 1) / fy, ocols = (cols + fx - 1) / fx;
    for (uint32_t r = 0; r < orows; r++) {
        uint32_t r0 = r * fy, r1 = r0 + fy < rows ? r0 + fy : rows;
        for (uint32_t c = 0; c < ocols; c++) {
            uint32_t c0 = c * fx, c1 = c0 + fx < cols ? c0 + fx : cols;
            uint32_t sum = 0;
            for (uint32_t y = r0; y < r1; y++)
                for (uint32_t x = c0; x < c1; x++)
                    sum += in[(size_t)y * cols + x];
            uint32_t n = (r1 - r0) * (c1 - c0);
            out[(size_t)r * ocols + c] = (uint8_t)((sum + n / 2) / n);
        }
    }
}
