/* bench_sub.c - the subscriber of `octbench --e2e` (see bench_e2e.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench_e2e.h"

static bool json_u64(const char *j, size_t len, const char *key, uint64_t *v)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = memmem(j, len, pat, strlen(pat));
    if (!p)
        return false;
    p += strlen(pat);
    const char *end = j + len;
    while (p < end && (*p == ' ' || *p == ':'))
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return false;
    *v = strtoull(p, NULL, 10); /* the header is NUL-terminated by the caller */
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
    s->lat[s->nlat++] = f->last_rx > f->tacq ? f->last_rx - f->tacq : 0;
}

/* Every frame still being received (a phase ends). */
void sub_finish_all(subscriber *s)
{
    for (int i = 0; i < FRAME_MAP; i++)
        sub_finish_frame(s, &s->map[i]);
}

static void *sub_thread(void *arg)
{
    sub_reader *r = arg;
    subscriber *s = r->s;
    char topic[64], hdr[4096];
    zmq_msg_t payload;
    while (!atomic_load(&s->stop)) {
        int n = zmq_recv(r->sock, topic, sizeof topic - 1, 0);
        if (n < 0)
            continue; /* timeout: check stop */
        topic[n < (int)sizeof topic - 1 ? n : (int)sizeof topic - 1] = '\0';
        int more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml);
        if (!more)
            continue;
        int hl = zmq_recv(r->sock, hdr, sizeof hdr - 1, 0);
        if (hl < 0)
            continue;
        hdr[hl < (int)sizeof hdr - 1 ? hl : (int)sizeof hdr - 1] = '\0';
        size_t plen = 0;
        zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml);
        if (more) {
            zmq_msg_init(&payload);
            if (zmq_msg_recv(&payload, r->sock, 0) >= 0)
                plen = zmq_msg_size(&payload);
            zmq_msg_close(&payload);
        }
        uint64_t rx = oct_time_realtime_ns();
        if (!strcmp(topic, "status"))
            continue;
        uint64_t fid = 0, seq = 0, tacq = 0;
        size_t hlen = strlen(hdr);
        if (!json_u64(hdr, hlen, "frame_id", &fid) || !json_u64(hdr, hlen, "image_seq", &seq) ||
            !json_u64(hdr, hlen, "t_acq_ns", &tacq))
            continue;
        uint64_t stamp[4] = {0, 0, 0, 0}; /* octd's (issue 19); absent from older octds */
        json_u64(hdr, hlen, "t_take_ns", &stamp[0]);
        json_u64(hdr, hlen, "t_sub_ns", &stamp[1]);
        json_u64(hdr, hlen, "t_done_ns", &stamp[2]);
        json_u64(hdr, hlen, "t_pub_ns", &stamp[3]);
        pthread_mutex_lock(&s->mu);
        s->msgs++;
        s->bytes += plen;
        int t = 0;
        while (t < s->ntopics && strcmp(s->topics[t], topic))
            t++;
        if (t == s->ntopics && t < MAX_TOPICS) {
            snprintf(s->topics[t], sizeof s->topics[t], "%.47s", topic);
            s->ntopics++;
        }
        if (t < MAX_TOPICS) {
            if (s->seen_topic[t] && seq > s->last_seq[t] + 1)
                s->gaps += seq - s->last_seq[t] - 1;
            s->seen_topic[t] = true;
            s->last_seq[t] = seq;
        }
        rx_frame *f = &s->map[fid % FRAME_MAP];
        if (f->valid && f->id != fid)
            sub_finish_frame(s, f); /* FRAME_MAP frames later: it stays partial */
        if (!f->valid)
            *f = (rx_frame){.id = fid, .tacq = tacq, .valid = true};
        f->parts++;
        if (rx >= f->last_rx) {
            f->last_rx = rx;
            memcpy(f->stamp, stamp, sizeof stamp);
        }
        if (f->parts >= s->ntopics)
            sub_finish_frame(s, f);
        if (fid + 1 > atomic_load(&s->rx_id))
            atomic_store(&s->rx_id, fid + 1);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

/* topics: comma-separated prefixes (--topics), NULL: everything; dealt to
 * nsock sockets in turn. */
bool sub_start(subscriber *s, const char *endpoint, const char *topics, int nsock)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
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

void sub_stop(subscriber *s)
{
    atomic_store(&s->stop, true);
    for (int i = 0; i < s->nrd; i++) {
        if (s->rd[i].started)
            pthread_join(s->rd[i].th, NULL);
        if (s->rd[i].sock)
            zmq_close(s->rd[i].sock);
    }
    if (s->ctx)
        zmq_ctx_term(s->ctx);
    free(s->lat);
    free(s->st);
    pthread_mutex_destroy(&s->mu);
}

