/* bench_sub.c - the subscriber of `octbench --e2e` (see bench_e2e.h).  Each
 * message is received in three steps: its topic and header, its payload
 * (the image: the message's third part, or with --sub-shm the bytes the
 * header names in octd's image area, copied into a buffer of the reader's
 * own), then the receive time and the counters, which both share. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench_e2e.h"

/* Where the value of top-level member key starts (after its colon), or NULL. */
static const char *json_value(const char *j, size_t len, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = memmem(j, len, pat, strlen(pat));
    if (!p)
        return NULL;
    p += strlen(pat);
    const char *end = j + len;
    while (p < end && (*p == ' ' || *p == ':'))
        p++;
    return p < end ? p : NULL;
}

static bool json_u64(const char *j, size_t len, const char *key, uint64_t *v)
{
    const char *p = json_value(j, len, key);
    if (!p || *p < '0' || *p > '9')
        return false;
    *v = strtoull(p, NULL, 10); /* the header is NUL-terminated by the caller */
    return true;
}

/* A string member without escapes (shm_name) into out[cap]. */
static bool json_str(const char *j, size_t len, const char *key, char *out, size_t cap)
{
    const char *p = json_value(j, len, key);
    if (!p || *p != '"')
        return false;
    size_t n = strcspn(++p, "\"\\");
    if (p + n >= j + len || p[n] != '"' || n >= cap)
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

static void sub_finish_frame(subscriber *s, rx_frame *f)
{
    if (!f->valid)
        return;
    f->valid = false;
    if (f->tacq < s->win_lo || f->tacq >= s->win_hi)
        return;
    s->frames_in_win++;
    if (f->parts < s->ntopics)
        s->partial_in_win++;
    if (s->nlat == s->cap_lat) {
        size_t cap = s->cap_lat ? 2 * s->cap_lat : 4096;
        uint64_t *p = realloc(s->lat, cap * sizeof *p);
        if (!p)
            return;
        s->lat = p;
        octbench_stages *q = realloc(s->st, cap * sizeof *q);
        if (!q)
            return;
        s->st = q;
        s->cap_lat = cap;
    }
    octbench_stages_of(&s->st[s->nlat], f->tacq, f->stamp, f->last_rx);
    s->st[s->nlat].id = f->id;
    s->lat[s->nlat++] = f->last_rx > f->tacq ? f->last_rx - f->tacq : 0;
}

/* Every frame still being received (a phase ends). */
void sub_finish_all(subscriber *s)
{
    for (int i = 0; i < FRAME_MAP; i++)
        sub_finish_frame(s, &s->map[i]);
}

/* ---------------- one message ---------------- */
enum rx_result { RX_IMAGE, RX_LOST, RX_NONE }; /* what the payload step got */

typedef struct rx_msg {
    char topic[64], hdr[4096];
    size_t hlen;
    uint64_t bytes; /* the image's: the payload's size, or shm_bytes */
    uint64_t rx;    /* CLOCK_REALTIME once the image is this process's */
    /* from the header */
    uint64_t fid, seq, tacq;
    uint64_t stamp[4]; /* octd's t_take_ns, t_sub_ns, t_done_ns, t_pub_ns (issue 19) */
} rx_msg;

static bool more_parts(void *sock)
{
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
    return more != 0;
}

/* One part into buf[cap] (cut, NUL-terminated): its length, or -1. */
static int recv_text(void *sock, char *buf, size_t cap)
{
    int n = zmq_recv(sock, buf, cap - 1, 0);
    if (n >= 0)
        buf[n < (int)cap - 1 ? n : (int)cap - 1] = '\0';
    return n;
}

/* The topic and the header; false: nothing came (a timeout) or not both. */
static bool recv_header(void *sock, rx_msg *m)
{
    if (recv_text(sock, m->topic, sizeof m->topic) < 0 || !more_parts(sock) ||
        recv_text(sock, m->hdr, sizeof m->hdr) < 0)
        return false;
    m->hlen = strlen(m->hdr);
    return true;
}

/* The message's remaining parts: their bytes. */
static uint64_t recv_rest(void *sock)
{
    uint64_t bytes = 0;
    while (more_parts(sock)) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, 0) >= 0)
            bytes += zmq_msg_size(&part);
        zmq_msg_close(&part);
    }
    return bytes;
}

/* The payload step of the normal endpoint: the image is the third part. */
static enum rx_result payload_zmq(sub_reader *r, rx_msg *m)
{
    m->bytes = recv_rest(r->sock);
    return RX_IMAGE;
}

/* --sub-shm: the reader's handle of area `name` (opened on first use). */
static sub_area *shm_area(sub_shm *sh, const char *name, oct_error *e)
{
    for (int i = 0; i < sh->narea; i++)
        if (!strcmp(sh->area[i].name, name))
            return &sh->area[i];
    if (sh->narea == SUB_AREAS) {
        oct_error_set(e, OCT_EINVAL, "more than %d image areas", SUB_AREAS);
        return NULL;
    }
    sub_area *a = &sh->area[sh->narea];
    if (oct_images_open(&a->img, name, e) != OCT_OK)
        return NULL;
    snprintf(a->name, sizeof a->name, "%s", name);
    sh->narea++;
    return a;
}

/* octd made a new object under the name: map that one instead. */
static oct_err shm_reopen(sub_area *a, oct_error *e)
{
    oct_images *n;
    oct_err err = oct_images_open(&n, a->name, e);
    if (err == OCT_OK) {
        oct_images_close(a->img, false);
        a->img = n;
    }
    return err;
}

/* The reader's buffer for images of `bytes` (one per size, kept). */
static void *shm_buf(sub_shm *sh, uint64_t bytes)
{
    for (int i = 0; i < sh->nbuf; i++)
        if (sh->buf[i].bytes == bytes)
            return sh->buf[i].p;
    int k = sh->nbuf < SUB_BUFS ? sh->nbuf++ : SUB_BUFS - 1; /* full: the last is replaced */
    free(sh->buf[k].p);
    sh->buf[k].p = malloc(bytes ? bytes : 1);
    sh->buf[k].bytes = sh->buf[k].p ? bytes : 0;
    return sh->buf[k].p;
}

/* Copies the image the header names; OCT_ESTALE: reopens the name once. */
static oct_err shm_copy(sub_shm *sh, const char *name, const oct_image_ref *ref, oct_error *e)
{
    sub_area *a = shm_area(sh, name, e);
    if (!a)
        return OCT_EIO;
    void *dst = shm_buf(sh, ref->bytes);
    if (!dst)
        return oct_error_set(e, OCT_ENOMEM, "no buffer of %llu bytes",
                             (unsigned long long)ref->bytes);
    oct_err err = oct_images_read(a->img, ref, dst, e);
    if (err == OCT_ESTALE && shm_reopen(a, e) == OCT_OK)
        err = oct_images_read(a->img, ref, dst, e);
    return err;
}

/* The payload step of the shm endpoint: the (empty) rest drained, the image
 * copied out of the area.  Overwritten (or not readable: said once per
 * reader): lost. */
static enum rx_result payload_shm(sub_reader *r, rx_msg *m)
{
    recv_rest(r->sock);
    char name[64];
    uint64_t slot = 0;
    oct_image_ref ref = {0};
    if (!json_str(m->hdr, m->hlen, "shm_name", name, sizeof name) ||
        !json_u64(m->hdr, m->hlen, "shm_id", &ref.id) ||
        !json_u64(m->hdr, m->hlen, "shm_slot", &slot) ||
        !json_u64(m->hdr, m->hlen, "shm_seq", &ref.seq) ||
        !json_u64(m->hdr, m->hlen, "shm_offset", &ref.offset) ||
        !json_u64(m->hdr, m->hlen, "shm_bytes", &ref.bytes))
        return RX_NONE; /* no image in it (status) */
    ref.slot = (uint32_t)slot;
    m->bytes = ref.bytes;
    oct_error e;
    oct_err err = shm_copy(&r->shm, name, &ref, &e);
    if (err == OCT_OK)
        return RX_IMAGE;
    if (err != OCT_ETORN && err != OCT_ESTALE && !r->shm.said) {
        fprintf(stderr, "octbench e2e: subscriber: %s (counted as lost in shm)\n", e.msg);
        r->shm.said = true;
    }
    return RX_LOST;
}

/* The header's frame_id, image_seq, t_acq_ns and octd's stamps. */
static bool parse_header(rx_msg *m)
{
    if (!json_u64(m->hdr, m->hlen, "frame_id", &m->fid) ||
        !json_u64(m->hdr, m->hlen, "image_seq", &m->seq) ||
        !json_u64(m->hdr, m->hlen, "t_acq_ns", &m->tacq))
        return false;
    memset(m->stamp, 0, sizeof m->stamp); /* absent from older octds */
    json_u64(m->hdr, m->hlen, "t_take_ns", &m->stamp[0]);
    json_u64(m->hdr, m->hlen, "t_sub_ns", &m->stamp[1]);
    json_u64(m->hdr, m->hlen, "t_done_ns", &m->stamp[2]);
    json_u64(m->hdr, m->hlen, "t_pub_ns", &m->stamp[3]);
    return true;
}

/* Under mu: the topic's index (a new one is added), its image_seq gaps. */
static void count_topic(subscriber *s, const rx_msg *m)
{
    int t = 0;
    while (t < s->ntopics && strcmp(s->topics[t], m->topic))
        t++;
    if (t == s->ntopics && t < MAX_TOPICS) {
        snprintf(s->topics[t], sizeof s->topics[t], "%.47s", m->topic);
        s->ntopics++;
    }
    if (t < MAX_TOPICS) {
        if (s->seen_topic[t] && m->seq > s->last_seq[t] + 1)
            s->gaps += m->seq - s->last_seq[t] - 1;
        s->seen_topic[t] = true;
        s->last_seq[t] = m->seq;
    }
}

/* Under mu: one part of its frame received. */
static void count_part(subscriber *s, const rx_msg *m)
{
    rx_frame *f = &s->map[m->fid % FRAME_MAP];
    if (f->valid && f->id != m->fid)
        sub_finish_frame(s, f); /* FRAME_MAP frames later: it stays partial */
    if (!f->valid)
        *f = (rx_frame){.id = m->fid, .tacq = m->tacq, .valid = true};
    f->parts++;
    if (m->rx >= f->last_rx) {
        f->last_rx = m->rx;
        memcpy(f->stamp, m->stamp, sizeof m->stamp);
    }
    if (f->parts >= s->ntopics)
        sub_finish_frame(s, f);
}

/* The counters of one message.  A lost image (--sub-shm: overwritten) is
 * no gap, but no part of its frame either: the frame stays partial. */
static void sub_count(subscriber *s, const rx_msg *m, enum rx_result got)
{
    pthread_mutex_lock(&s->mu);
    s->msgs++;
    if (got == RX_LOST)
        s->shm_lost++;
    else
        s->bytes += m->bytes;
    count_topic(s, m);
    if (got == RX_IMAGE)
        count_part(s, m);
    if (m->fid + 1 > atomic_load(&s->rx_id))
        atomic_store(&s->rx_id, m->fid + 1);
    pthread_mutex_unlock(&s->mu);
}

static void *sub_thread(void *arg)
{
    sub_reader *r = arg;
    subscriber *s = r->s;
    rx_msg m;
    while (!atomic_load(&s->stop)) {
        if (!recv_header(r->sock, &m))
            continue; /* timeout: check stop */
        enum rx_result got = s->shm ? payload_shm(r, &m) : payload_zmq(r, &m);
        m.rx = oct_time_realtime_ns(); /* the image is ours now (or lost) */
        if (got == RX_NONE || !strcmp(m.topic, "status") || !parse_header(&m))
            continue;
        sub_count(s, &m, got);
    }
    return NULL;
}

/* topics: comma-separated prefixes (--topics), NULL: everything; dealt to
 * nsock sockets in turn. */
bool sub_start(subscriber *s, const char *endpoint, const char *topics, int nsock, bool shm)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->shm = shm;
    s->ctx = zmq_ctx_new();
    if (nsock < 1)
        nsock = 1;
    if (s->ctx)
        zmq_ctx_set(s->ctx, ZMQ_IO_THREADS, nsock); /* a connection per I/O thread */
    int hwm = 100000, tmo = 100;
    bool ok = s->ctx != NULL;
    for (int i = 0; ok && i < nsock; i++) {
        sub_reader *r = &s->rd[s->nrd++];
        r->s = s;
        r->sock = zmq_socket(s->ctx, ZMQ_SUB);
        ok = r->sock && !zmq_setsockopt(r->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) &&
             !zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    }
    int k = 0;
    for (const char *t = topics ? topics : ""; ok; k++) {
        size_t n = strcspn(t, ",");
        ok = !zmq_setsockopt(s->rd[k % nsock].sock, ZMQ_SUBSCRIBE, t, n);
        if (!t[n])
            break;
        t += n + 1;
    }
    for (int i = 0; ok && i < nsock; i++)
        ok = !zmq_connect(s->rd[i].sock, endpoint);
    if (!ok)
        fprintf(stderr, "octbench e2e: subscriber %s: %s\n", endpoint, zmq_strerror(zmq_errno()));
    for (int i = 0; ok && i < nsock; i++)
        ok = s->rd[i].started = pthread_create(&s->rd[i].th, NULL, sub_thread, &s->rd[i]) == 0;
    if (!ok)
        sub_stop(s);
    return ok;
}

/* A reader's image areas and buffers (--sub-shm). */
static void shm_free(sub_shm *sh)
{
    for (int i = 0; i < sh->narea; i++)
        oct_images_close(sh->area[i].img, false);
    for (int i = 0; i < sh->nbuf; i++)
        free(sh->buf[i].p);
    memset(sh, 0, sizeof *sh);
}

void sub_stop(subscriber *s)
{
    atomic_store(&s->stop, true);
    for (int i = 0; i < s->nrd; i++) {
        if (s->rd[i].started)
            pthread_join(s->rd[i].th, NULL);
        if (s->rd[i].sock)
            zmq_close(s->rd[i].sock);
        shm_free(&s->rd[i].shm);
    }
    if (s->ctx)
        zmq_ctx_term(s->ctx);
    free(s->lat);
    free(s->st);
    pthread_mutex_destroy(&s->mu);
}
