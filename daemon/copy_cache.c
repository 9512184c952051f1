/* copy_cache.c - see copy_cache.h. */
#include "copy_cache.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void copy_cache_init(copy_cache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

static void copy_buf_free(copy_buf *b)
{
    free(b->data);
    free(b);
}

/* A buffer of `size` bytes: an idle one of that size, else a new one. */
copy_buf *copy_cache_get(copy_cache *c, size_t size)
{
    int cls = -1, unused = -1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < COPY_CLASSES && cls < 0; i++) {
        if (c->cls[i].size == size)
            cls = i;
        else if (unused < 0 && (c->cls[i].size == 0 || (c->cls[i].out == 0 && c->cls[i].nfree == 0)))
            unused = i; /* a size nobody uses any more */
    }
    if (cls < 0 && unused >= 0) {
        cls = unused;
        c->cls[cls].size = size;
        c->cls[cls].low = 0;
    }
    copy_buf *b = NULL;
    if (cls >= 0 && (b = c->cls[cls].free) != NULL) {
        c->cls[cls].free = b->next;
        c->cls[cls].nfree--;
        c->idle_bytes -= size;
        if (c->cls[cls].nfree < c->cls[cls].low)
            c->cls[cls].low = c->cls[cls].nfree;
    }
    if (cls >= 0)
        c->cls[cls].out++;
    if (!b)
        c->made++;
    bool cold = !b || (cls >= 0 && (uint64_t)c->cls[cls].out * size > STREAM_OUT_BYTES);
    pthread_mutex_unlock(&c->mu);
    if (b) {
        b->cold = cold;
        return b;
    }
    b = malloc(sizeof *b);
    if (b && !(b->data = malloc(size ? size : 1))) {
        free(b);
        b = NULL;
    }
    if (!b) {
        pthread_mutex_lock(&c->mu);
        if (cls >= 0)
            c->cls[cls].out--;
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    b->cache = c;
    b->cls = cls;
    b->cold = cold;
    return b;
}

/* memcpy with non-temporal stores where the CPU has them: for destinations
 * no cache holds (see STREAM_OUT_BYTES); the fence orders the stores before
 * the buffer is handed to another thread. */
void copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    _mm_sfence();
    memcpy(d, s, n);
#else
    memcpy(dst, src, n);
#endif
}

void copy_cache_into(copy_buf *b, const void *src, size_t n)
{
#if defined(COPY_STREAM_OFF) /* measurements only: memcpy throughout (r4's copies) */
    b->cold = false;
#endif
    if (b->cold)
        copy_stream(b->data, src, n);
    else
        memcpy(b->data, src, n);
}

/* ZeroMQ's free callback of a copy (any of its threads): idle again. */
void copy_cache_put_cb(void *data, void *hint)
{
    (void)data;
    copy_buf *b = hint;
    copy_cache *c = b->cache;
    pthread_mutex_lock(&c->mu);
    bool keep = false;
    if (b->cls >= 0) {
        size_t size = c->cls[b->cls].size;
        c->cls[b->cls].out--;
        keep = c->idle_bytes + size <= COPY_IDLE_MAX;
        if (keep) {
            b->next = c->cls[b->cls].free;
            c->cls[b->cls].free = b;
            c->cls[b->cls].nfree++;
            c->idle_bytes += size;
        }
    }
    if (!keep)
        c->freed++;
    pthread_mutex_unlock(&c->mu);
    if (!keep)
        copy_buf_free(b);
}

/* Once a second (the publisher thread): buffers idle all the while, beyond
 * COPY_KEEP per size, go back to the system. */
void copy_cache_trim(copy_cache *c)
{
    copy_buf *drop = NULL;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < COPY_CLASSES; i++) {
        int n = c->cls[i].low - COPY_KEEP;
        for (; n > 0 && c->cls[i].free; n--) {
            copy_buf *b = c->cls[i].free;
            c->cls[i].free = b->next;
            c->cls[i].nfree--;
            c->idle_bytes -= c->cls[i].size;
            c->freed++;
            b->next = drop;
            drop = b;
        }
        c->cls[i].low = c->cls[i].nfree;
    }
    pthread_mutex_unlock(&c->mu);
    while (drop) {
        copy_buf *b = drop;
        drop = b->next;
        copy_buf_free(b);
    }
}

/* At the end: every message is gone (zmq_ctx_term returned). */
void copy_cache_free(copy_cache *c)
{
    for (int i = 0; i < COPY_CLASSES; i++)
        while (c->cls[i].free) {
            copy_buf *b = c->cls[i].free;
            c->cls[i].free = b->next;
            copy_buf_free(b);
        }
    pthread_mutex_destroy(&c->mu);
}
