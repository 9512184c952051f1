/* copy_cache.h - the publisher's kept copy buffers (issue 21, r4/r5): the
 * images the publisher thread (and, for copy-only product buffers, the frame
 * loop) copies before the fan-out live in buffers kept per image size for
 * reuse; ZeroMQ's threads give them back through copy_cache_put_cb.  Split
 * out of publish.c (r5). */
#ifndef OCTD_COPY_CACHE_H
#define OCTD_COPY_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The publisher thread's copies (copies = publisher) live in buffers it
 * keeps for reuse: memory fresh from malloc page-faults on the copy (H200,
 * 2026-11-24: 16 faults and ~30 us per 256 KB B-scan image, ~50 % of the
 * thread at 8,000 frames/s, and with churning subscribers holding hundreds
 * of images glibc's trimming made every copy fault again).  Buffers come
 * back from ZeroMQ's threads (the last subscriber's copy gone); those that
 * stayed unused a whole second beyond COPY_KEEP per size go back to the
 * system, so the memory a burst of churn took is returned. */
#define COPY_CLASSES 16              /* image sizes kept at once */
#define COPY_KEEP 4                  /* idle buffers of a size kept beyond a second */
#define COPY_IDLE_MAX (512ull << 20) /* idle bytes kept at most */

/* Copies into a size whose buffers in messages exceed this many bytes (a
 * crowd's queues hold them: far more than any cache) stream past the caches
 * (copy_stream): the destination is cold anyway, and ordinary stores would
 * first read every line of it (H200, r5: the publisher thread's 256 KB
 * copies took 46-48 us with a churning crowd instead of 27-30 us quiet;
 * with glibc's non-temporal threshold lowered, 20-38 us, one run). */
#define STREAM_OUT_BYTES (32ull << 20)

typedef struct copy_buf {
    struct copy_buf *next;
    struct copy_cache *cache;
    int cls; /* its size class; -1: not kept */
    bool cold; /* this use: copy with copy_stream */
    uint8_t *data;
} copy_buf;

typedef struct copy_cache {
    pthread_mutex_t mu;
    struct {
        size_t size;         /* 0: unused */
        copy_buf *free;
        int nfree, out, low; /* idle, in messages, least idle since the last trim */
    } cls[COPY_CLASSES];
    uint64_t idle_bytes;
    uint64_t made, freed;    /* buffers allocated / returned to the system */
} copy_cache;

void copy_cache_init(copy_cache *c);
/* A buffer of `size` bytes (an idle one of that size, else a new one; its
 * `cold` set when the copy should stream past the caches); NULL: no memory. */
copy_buf *copy_cache_get(copy_cache *c, size_t size);
/* Copies n bytes of src into b (streamed when b->cold). */
void copy_cache_into(copy_buf *b, const void *src, size_t n);
/* ZeroMQ's free callback of a message in b (hint: b): idle again, or freed. */
void copy_cache_put_cb(void *data, void *hint);
/* Once a second: buffers idle all the while, beyond COPY_KEEP per size, go. */
void copy_cache_trim(copy_cache *c);
/* At the end, every message gone: frees the idle buffers. */
void copy_cache_free(copy_cache *c);
/* memcpy with non-temporal stores where the CPU has them (fenced). */
void copy_stream(void *dst, const void *src, size_t n);

#endif
