/* ring.c - the frame ring of SPEC 3.1: producer and read-only consumer.
 *
 * Producer, frame n into slot n mod K:
 *   slot.seq = 2n+1 (release) ; fence ; header fields + payload ;
 *   slot.seq = 2n+2 (release) ; write_seq = n+1 (release)
 * Consumer: a frame n < write_seq is valid only if slot.seq == 2n+2 before the
 * copy and still after it (acquire fence between the copy and the re-check).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc_internal.h"

/* ABI offsets and sizes: static asserts in oct_ipc.h */

#define PAGE 4096ull
#define SLOT_COUNT_MAX 65536u
#define SLOT_COUNT_DEFAULT 8u
#define REPLACE_CHECK_NS 200000000ull /* how often a consumer re-opens the name */
#define SLEEP_MIN_NS 50000ull         /* waiting: 50 us, doubling up to the poll limit */
#define SLEEP_MAX_NS 200000ull        /* the default limit, and the idle one */
#define IDLE_AFTER_NS 1000000000ull   /* no frame for 1 s: idle */

static uint64_t round_up_page(uint64_t v) { return (v + PAGE - 1) & ~(PAGE - 1); }

/* ------------------------------------------------------------------ */
/* header check                                                        */
/* ------------------------------------------------------------------ */
oct_err oct_ring_header_check(const oct_ring_header *h, uint64_t object_bytes, oct_error *e)
{
    if (object_bytes < sizeof *h)
        return oct_error_set(e, OCT_ESIZE,
                             "object is %llu bytes, smaller than the %u-byte ring header",
                             (unsigned long long)object_bytes, OCT_RING_HEADER_BYTES);
    if (memcmp(h->magic, OCT_RING_MAGIC, 8) != 0) {
        char m[33] = {0};
        for (int i = 0, o = 0; i < 8; i++) {
            unsigned char ch = (unsigned char)h->magic[i];
            if (ch >= 0x20 && ch < 0x7f && ch != '\\')
                m[o++] = (char)ch;
            else
                o += snprintf(m + o, sizeof m - (size_t)o, "\\x%02x", ch);
        }
        return oct_error_set(e, OCT_EABI, "magic is \"%s\", expected \"OCTRING\\0\": not a frame ring", m);
    }
    if (h->abi_major != OCT_ABI_MAJOR)
        return oct_error_set(e, OCT_EABI,
                             "abi_major = %u (abi_minor %u): this reader understands ABI %u.x only",
                             h->abi_major, h->abi_minor, OCT_ABI_MAJOR);
    if (h->header_bytes != OCT_RING_HEADER_BYTES)
        return oct_error_set(e, OCT_EABI, "header_bytes = %u, expected %u", h->header_bytes,
                             OCT_RING_HEADER_BYTES);
    uint32_t K = h->slot_count;
    if (K < 2 || K > SLOT_COUNT_MAX || (K & (K - 1)))
        return oct_error_set(e, OCT_EINVAL,
                             "slot_count = %u: must be a power of two from 2 to %u", K,
                             SLOT_COUNT_MAX);
    oct_geometry g = {h->samples, h->ascans, h->lines, h->sample_type, h->sample_shift};
    oct_err err = oct_geometry_check(&g, e);
    if (err)
        return oct_error_prefix(e, err, "ring geometry");
    uint64_t fb = oct_geometry_frame_bytes(&g);
    if (h->frame_bytes != fb)
        return oct_error_set(e, OCT_EINVAL,
                             "frame_bytes = %llu, but %u x %u x %u samples of %s are %llu bytes",
                             (unsigned long long)h->frame_bytes, h->lines, h->ascans, h->samples,
                             oct_sample_name(h->sample_type), (unsigned long long)fb);
    /* fb <= 2^34, so 4096 + fb cannot overflow */
    if (h->slot_stride % PAGE || h->slot_stride < OCT_SLOT_HEADER_BYTES + fb)
        return oct_error_set(e, OCT_EINVAL,
                             "slot_stride = %llu: must be a multiple of 4096 and at least %llu "
                             "(slot header + frame)",
                             (unsigned long long)h->slot_stride,
                             (unsigned long long)(OCT_SLOT_HEADER_BYTES + fb));
    if (h->slot0_offset % PAGE || h->slot0_offset < OCT_RING_HEADER_BYTES)
        return oct_error_set(e, OCT_EINVAL,
                             "slot0_offset = %llu: must be a multiple of 4096 and at least 4096",
                             (unsigned long long)h->slot0_offset);
    /* slot0_offset + K * slot_stride without overflow */
    uint64_t need;
    if (__builtin_mul_overflow((uint64_t)K, h->slot_stride, &need) ||
        __builtin_add_overflow(need, h->slot0_offset, &need))
        return oct_error_set(e, OCT_EINVAL,
                             "slot0_offset %llu + slot_count %u x slot_stride %llu overflows",
                             (unsigned long long)h->slot0_offset, K,
                             (unsigned long long)h->slot_stride);
    if (object_bytes < need)
        return oct_error_set(e, OCT_ESIZE,
                             "object is %llu bytes, but slot0_offset %llu + slot_count %u x "
                             "slot_stride %llu needs %llu (truncated ring)",
                             (unsigned long long)object_bytes,
                             (unsigned long long)h->slot0_offset, K,
                             (unsigned long long)h->slot_stride, (unsigned long long)need);
    if (need > (uint64_t)SIZE_MAX)
        return oct_error_set(e, OCT_ESIZE, "ring of %llu bytes cannot be mapped",
                             (unsigned long long)need);
    return OCT_OK;
}

/* ------------------------------------------------------------------ */
/* producer                                                            */
/* ------------------------------------------------------------------ */
struct oct_ring_producer {
    char name[OCT_SHM_NAME_MAX + 1];
    uint8_t *map;
    size_t map_bytes;
    oct_ring_header *h;
    uint64_t n;       /* next frame number */
    uint64_t stride, slot0, frame_bytes;
    uint32_t mask;
    bool in_frame;
    /* heartbeat thread (oct_ring_producer_heartbeat_thread) */
    pthread_t hb_thread;
    pthread_mutex_t hb_lock;
    pthread_cond_t hb_cond;
    bool hb_running, hb_stop;
};

#define HEARTBEAT_PERIOD_NS 50000000ull /* twice per the 100 ms of SPEC 3.1 */

static oct_slot_header *prod_slot(oct_ring_producer *p, uint64_t n)
{
    return (oct_slot_header *)(p->map + p->slot0 + (n & p->mask) * p->stride);
}

/* May this process give its files group gid?  (root, or a member: the
 * kernel's own rule for chown to a group, checked first so that a producer
 * outside the group leaves the ring as it is, quietly.) */
static bool may_use_group(gid_t gid)
{
    if (geteuid() == 0 || getegid() == gid)
        return true;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/* Gives the object behind fd the group `group` (mode kept).  OCT_ENOENT
 * when no such group, OCT_EPERM when this process may not. */
static oct_err set_group(int fd, const char *name, const char *group, oct_error *e)
{
    struct group gr, *res = NULL;
    char buf[4096];
    int r = getgrnam_r(group, &gr, buf, sizeof buf, &res);
    if (r != 0 || !res)
        return oct_error_set(e, OCT_ENOENT, "ring %s: group %s: %s", name, group,
                             r ? strerror(r) : "no such group");
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_gid == gr.gr_gid)
        return OCT_OK;
    if (!may_use_group(gr.gr_gid))
        return oct_error_set(e, OCT_EPERM,
                             "ring %s: this process (uid %u) is not in group %s (gid %u): "
                             "add the acquisition user to it",
                             name, (unsigned)geteuid(), group, (unsigned)gr.gr_gid);
    if (fchown(fd, (uid_t)-1, gr.gr_gid) != 0)
        return oct_error_set(e, errno == EPERM ? OCT_EPERM : OCT_EIO,
                             "ring %s: fchown to group %s: %s", name, group, strerror(errno));
    return OCT_OK;
}

oct_err oct_ring_producer_set_group(oct_ring_producer *p, const char *group, oct_error *e)
{
    if (!p || !group || !*group)
        return oct_error_set(e, OCT_EINVAL, "ring: set_group needs a producer and a group name");
    int fd = shm_open(p->name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return oct_error_set(e, OCT_EIO, "ring %s: shm_open: %s", p->name, strerror(errno));
    oct_err err = set_group(fd, p->name, group, e);
    close(fd);
    return err;
}

oct_err oct_ring_producer_create(oct_ring_producer **out, const char *name,
                                 const oct_ring_config *cfg, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return err;
    if (!cfg)
        return oct_error_set(e, OCT_EINVAL, "ring %s: no configuration given", name);
    err = oct_geometry_check(&cfg->geom, e);
    if (err)
        return oct_error_prefix(e, err, "ring %s", name);
    uint32_t K = cfg->slot_count ? cfg->slot_count : SLOT_COUNT_DEFAULT;
    if (K < 2 || K > SLOT_COUNT_MAX || (K & (K - 1)))
        return oct_error_set(e, OCT_EINVAL,
                             "ring %s: slot_count = %u: must be a power of two from 2 to %u",
                             name, K, SLOT_COUNT_MAX);
    uint32_t mode = cfg->mode ? cfg->mode : 0660;
    if (mode & ~07777u)
        return oct_error_set(e, OCT_EINVAL, "ring %s: mode %o is not a file mode", name, mode);
    uint64_t fb = oct_geometry_frame_bytes(&cfg->geom);
    uint64_t stride = round_up_page(OCT_SLOT_HEADER_BYTES + fb);
    uint64_t total;
    if (__builtin_mul_overflow(stride, (uint64_t)K, &total) ||
        __builtin_add_overflow(total, (uint64_t)OCT_RING_HEADER_BYTES, &total) ||
        total > (uint64_t)SIZE_MAX / 2 || total > (uint64_t)INT64_MAX)
        return oct_error_set(e, OCT_EINVAL, "ring %s: %u slots of %llu bytes are too large",
                             name, K, (unsigned long long)stride);

    oct_ring_producer *p = calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(e, OCT_ENOMEM, "ring %s: out of memory", name);
    oct_ipc_strlcpy(p->name, sizeof p->name, name);
    pthread_mutex_init(&p->hb_lock, NULL);
    pthread_cond_init(&p->hb_cond, NULL);
    /* A restart replaces the old object: consumers still mapping it see the
     * name point at a new inode (and a new epoch) and re-attach. */
    if (shm_unlink(name) != 0 && errno != ENOENT) {
        err = oct_error_set(e, errno == EACCES ? OCT_EPERM : OCT_EIO,
                            "ring %s: cannot remove the old ring: %s", name, strerror(errno));
        free(p);
        return err;
    }
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        err = oct_error_set(e, errno == EACCES ? OCT_EPERM : OCT_EIO, "ring %s: shm_open: %s",
                            name, strerror(errno));
        free(p);
        return err;
    }
    /* fchmod so the umask does not narrow the mode */
    if (fchmod(fd, (mode_t)mode) != 0) {
        err = oct_error_set(e, OCT_EIO, "ring %s: fchmod %o: %s", name, mode, strerror(errno));
        goto fail_fd;
    }
    /* The README's set-up: the acquirer is in group octd, and octd reads the
     * ring through that group.  An acquirer whose primary group is another
     * would create a ring octd cannot open: give it group octd when that
     * group exists and we may (else it stays as created; octd then says
     * "Permission denied" with the owner, group and mode in its status). */
    set_group(fd, name, OCT_RING_GROUP_DEFAULT, NULL);
    if (ftruncate(fd, (off_t)total) != 0) {
        err = oct_error_set(e, OCT_EIO, "ring %s: ftruncate to %llu bytes: %s", name,
                            (unsigned long long)total, strerror(errno));
        goto fail_fd;
    }
    /* Reserve the pages now: a full /dev/shm is an error here instead of a
     * SIGBUS in the middle of a frame later. */
    int fr = posix_fallocate(fd, 0, (off_t)total);
    if (fr != 0 && fr != EOPNOTSUPP && fr != EINVAL) {
        err = oct_error_set(e, OCT_EIO, "ring %s: cannot reserve %llu bytes in /dev/shm: %s",
                            name, (unsigned long long)total, strerror(fr));
        goto fail_fd;
    }
    /* MAP_POPULATE: fault the pages in now, not in the first lap of frames */
    p->map = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p->map == MAP_FAILED) {
        err = oct_error_set(e, OCT_EIO, "ring %s: mmap of %llu bytes: %s", name,
                            (unsigned long long)total, strerror(errno));
        goto fail_fd;
    }
    close(fd);
    p->map_bytes = (size_t)total;
    p->h = (oct_ring_header *)p->map;
    p->stride = stride;
    p->slot0 = OCT_RING_HEADER_BYTES;
    p->frame_bytes = fb;
    p->mask = K - 1;

    oct_ring_header *h = p->h; /* fresh object: all zero, state INIT */
    memcpy(h->magic, OCT_RING_MAGIC, 8);
    h->abi_major = OCT_ABI_MAJOR;
    h->abi_minor = OCT_ABI_MINOR;
    h->header_bytes = OCT_RING_HEADER_BYTES;
    h->slot_count = K;
    h->slot_stride = stride;
    h->slot0_offset = p->slot0;
    h->samples = cfg->geom.samples;
    h->ascans = cfg->geom.ascans;
    h->lines = cfg->geom.lines;
    h->sample_type = cfg->geom.sample_type;
    h->sample_shift = cfg->geom.sample_shift;
    h->flags = 0;
    h->epoch = oct_ipc_random_nonzero();
    h->producer_pid = (uint64_t)getpid();
    h->producer_start_ns = oct_time_realtime_ns();
    h->frame_bytes = fb;
    OCT_STORE_REL(&h->write_seq, 0);
    OCT_STORE_REL(&h->heartbeat_ns, oct_time_monotonic_ns());
    OCT_STORE_REL(&h->state, (uint32_t)OCT_RING_READY); /* last: publishes the header */
    *out = p;
    return OCT_OK;

fail_fd:
    close(fd);
    shm_unlink(name);
    free(p);
    return err;
}

void *oct_ring_producer_begin(oct_ring_producer *p)
{
    if (!p)
        return NULL;
    oct_slot_header *s = prod_slot(p, p->n);
    OCT_STORE_REL(&s->seq, 2 * p->n + 1);
    /* the payload stores below must not become visible before the odd seq */
    OCT_FENCE_REL();
    p->in_frame = true;
    return (uint8_t *)s + OCT_SLOT_HEADER_BYTES;
}

void oct_ring_producer_commit(oct_ring_producer *p, uint64_t frame_id, uint64_t t_acq_ns)
{
    if (!p || !p->in_frame)
        return; /* commit without begin: nothing to publish */
    oct_slot_header *s = prod_slot(p, p->n);
    s->frame_id = frame_id;
    s->t_acq_ns = t_acq_ns;
    s->flags = 0;
    OCT_STORE_REL(&s->seq, 2 * p->n + 2);
    p->n++;
    OCT_STORE_REL(&p->h->write_seq, p->n);
    OCT_STORE_REL(&p->h->heartbeat_ns, oct_time_monotonic_ns());
    p->in_frame = false;
}

void oct_ring_producer_heartbeat(oct_ring_producer *p)
{
    if (p)
        OCT_STORE_REL(&p->h->heartbeat_ns, oct_time_monotonic_ns());
}

/* The helper thread only stores heartbeat_ns (one atomic word, the same as
 * commit does), so it needs no lock against the producer's frames. */
static void *heartbeat_main(void *arg)
{
    oct_ring_producer *p = arg;
    pthread_mutex_lock(&p->hb_lock);
    while (!p->hb_stop) {
        OCT_STORE_REL(&p->h->heartbeat_ns, oct_time_monotonic_ns());
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + HEARTBEAT_PERIOD_NS;
        ts.tv_sec = (time_t)(t / 1000000000ull);
        ts.tv_nsec = (long)(t % 1000000000ull);
        while (!p->hb_stop && pthread_cond_timedwait(&p->hb_cond, &p->hb_lock, &ts) == 0) {
        }
    }
    pthread_mutex_unlock(&p->hb_lock);
    return NULL;
}

static void heartbeat_stop(oct_ring_producer *p)
{
    if (!p->hb_running)
        return;
    pthread_mutex_lock(&p->hb_lock);
    p->hb_stop = true;
    pthread_cond_signal(&p->hb_cond);
    pthread_mutex_unlock(&p->hb_lock);
    pthread_join(p->hb_thread, NULL);
    p->hb_running = false;
}

oct_err oct_ring_producer_heartbeat_thread(oct_ring_producer *p, bool on, oct_error *e)
{
    if (!p)
        return oct_error_set(e, OCT_EINVAL, "ring: no producer given");
    if (!on) {
        heartbeat_stop(p);
        return OCT_OK;
    }
    if (p->hb_running)
        return OCT_OK;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&p->hb_cond);
    pthread_cond_init(&p->hb_cond, &ca);
    pthread_condattr_destroy(&ca);
    p->hb_stop = false;
    int r = pthread_create(&p->hb_thread, NULL, heartbeat_main, p);
    if (r != 0)
        return oct_error_set(e, OCT_EIO, "ring %s: cannot start the heartbeat thread: %s",
                             p->name, strerror(r));
    p->hb_running = true;
    return OCT_OK;
}

const oct_ring_header *oct_ring_producer_header(const oct_ring_producer *p)
{
    return p ? p->h : NULL;
}

void oct_ring_producer_close(oct_ring_producer *p, bool unlink_name)
{
    if (!p)
        return;
    heartbeat_stop(p); /* before the unmap it writes to */
    pthread_cond_destroy(&p->hb_cond);
    pthread_mutex_destroy(&p->hb_lock);
    OCT_STORE_REL(&p->h->state, (uint32_t)OCT_RING_CLOSED);
    munmap(p->map, p->map_bytes);
    if (unlink_name)
        shm_unlink(p->name);
    free(p);
}

/* ------------------------------------------------------------------ */
/* consumer                                                            */
/* ------------------------------------------------------------------ */
struct oct_ring_consumer {
    char name[OCT_SHM_NAME_MAX + 1];
    const uint8_t *map;
    size_t map_bytes;
    const oct_ring_header *h;
    /* validated copies: never re-read sizes from the shared header */
    oct_geometry g;
    uint64_t frame_bytes, stride, slot0, epoch;
    uint32_t slot_count, mask;
    dev_t dev;
    ino_t ino;
    uint64_t next;              /* next frame number not yet taken */
    uint64_t last_check_ns;     /* last re-open of the name */
    uint32_t stale_ms;
    uint64_t poll_ns;           /* longest sleep while frames come (set_poll_us) */
    uint64_t last_frame_ns;     /* when wait_pick last found a frame */
    uint64_t peeked;            /* bit k: frame next-1-k peeked, not yet verified */
    bool shrunk;                /* a SIGBUS showed the object truncated: re-open */
    oct_ring_stats st;
};

/* The header copy of open(), guarded: the object may shrink after fstat. */
static bool copy_header(const oct_ring_header *h0, oct_ring_header *hc, uint32_t *state)
{
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0))
        return false;
    oct_bus_arm(&g, h0, OCT_RING_HEADER_BYTES);
    *state = OCT_LOAD_ACQ(&h0->state);
    memcpy(hc, h0, sizeof *hc);
    oct_bus_disarm(&g);
    return true;
}

oct_err oct_ring_consumer_open(oct_ring_consumer **out, const char *name, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return err;
    /* a producer may truncate the ring under our mapping: see next() */
    if (!oct_bus_install())
        return oct_error_set(e, OCT_EIO, "ring %s: cannot install the SIGBUS handler: %s", name,
                             strerror(errno));
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        int en = errno;
        if (en == ENOENT)
            return oct_error_set(e, OCT_ENOENT,
                                 "ring %s does not exist (is the acquisition program running?)",
                                 name);
        return oct_error_set(e, en == EACCES ? OCT_EPERM : OCT_EIO, "ring %s: shm_open: %s",
                             name, strerror(en));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err = oct_error_set(e, OCT_EIO, "ring %s: fstat: %s", name, strerror(errno));
        close(fd);
        return err;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < OCT_RING_HEADER_BYTES) {
        close(fd);
        /* a producer between ftruncate and the header is not an error yet */
        if (size == 0)
            return oct_error_set(e, OCT_EAGAIN, "ring %s is being created (size 0)", name);
        return oct_error_set(e, OCT_ESIZE,
                             "ring %s: object is %llu bytes, smaller than the %u-byte header",
                             name, (unsigned long long)size, OCT_RING_HEADER_BYTES);
    }
    const oct_ring_header *h0 = mmap(NULL, OCT_RING_HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (h0 == MAP_FAILED) {
        err = oct_error_set(e, OCT_EIO, "ring %s: mmap: %s", name, strerror(errno));
        close(fd);
        return err;
    }
    /* copy the header once (after the acquire of state) and check the copy */
    uint32_t state;
    oct_ring_header hc;
    bool copied = copy_header(h0, &hc, &state);
    munmap((void *)h0, OCT_RING_HEADER_BYTES);
    if (!copied) {
        close(fd);
        return oct_error_set(e, OCT_EAGAIN, "ring %s shrank while being read (SIGBUS)", name);
    }
    /* state INIT: the producer is still filling the header, which may be
     * incomplete; only a present, wrong magic is refused already */
    static const char zero8[8];
    if (state == OCT_RING_INIT &&
        (!memcmp(hc.magic, OCT_RING_MAGIC, 8) || !memcmp(hc.magic, zero8, 8))) {
        close(fd);
        return oct_error_set(e, OCT_EAGAIN, "ring %s is being created (state INIT)", name);
    }
    err = oct_ring_header_check(&hc, size, e);
    if (err) {
        close(fd);
        return oct_error_prefix(e, err, "ring %s", name);
    }
    if (state > OCT_RING_CLOSED) {
        close(fd);
        return oct_error_set(e, OCT_EINVAL, "ring %s: state = %u: must be 0, 1 or 2", name,
                             state);
    }
    uint64_t need = hc.slot0_offset + (uint64_t)hc.slot_count * hc.slot_stride; /* checked */
    oct_ring_consumer *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return oct_error_set(e, OCT_ENOMEM, "ring %s: out of memory", name);
    }
    c->map = mmap(NULL, (size_t)need, PROT_READ, MAP_SHARED, fd, 0);
    if (c->map == MAP_FAILED) {
        err = oct_error_set(e, OCT_EIO, "ring %s: mmap of %llu bytes: %s", name,
                            (unsigned long long)need, strerror(errno));
        close(fd);
        free(c);
        return err;
    }
    close(fd);
    oct_ipc_strlcpy(c->name, sizeof c->name, name);
    c->map_bytes = (size_t)need;
    c->h = (const oct_ring_header *)c->map;
    c->g = (oct_geometry){hc.samples, hc.ascans, hc.lines, hc.sample_type, hc.sample_shift};
    c->frame_bytes = hc.frame_bytes;
    c->stride = hc.slot_stride;
    c->slot0 = hc.slot0_offset;
    c->epoch = hc.epoch;
    c->slot_count = hc.slot_count;
    c->mask = hc.slot_count - 1;
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->stale_ms = 2000;
    c->poll_ns = SLEEP_MAX_NS;
    c->last_check_ns = oct_time_monotonic_ns();
    /* start with the newest committed frame: what was there before we
     * attached is neither skipped nor lost */
    uint64_t w = OCT_LOAD_ACQ(&c->h->write_seq);
    c->next = w ? w - 1 : 0;
    *out = c;
    return OCT_OK;
}

void oct_ring_consumer_close(oct_ring_consumer *c)
{
    if (!c)
        return;
    munmap((void *)c->map, c->map_bytes);
    free(c);
}

oct_err oct_ring_consumer_reattach(oct_ring_consumer *c, int timeout_ms, oct_error *e)
{
    if (!c)
        return oct_error_set(e, OCT_EINVAL, "ring: no consumer given");
    uint64_t t0 = oct_time_monotonic_ns();
    uint64_t deadline = t0 + (timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000ull : 0);
    oct_error e2;
    for (;;) {
        oct_ring_consumer *n = NULL;
        oct_err err = oct_ring_consumer_open(&n, c->name, &e2);
        if (!err) {
            /* the same object, closed or with a stale heartbeat: its
             * producer has not come back yet (a fresh heartbeat: adopt it
             * again, the producer was only paused) */
            uint64_t now = oct_time_monotonic_ns();
            uint64_t hb = OCT_LOAD_ACQ(&n->h->heartbeat_ns);
            bool stale = now > hb && now - hb > (uint64_t)c->stale_ms * 1000000ull;
            if (n->epoch == c->epoch && n->ino == c->ino && n->dev == c->dev &&
                (OCT_LOAD_ACQ(&n->h->state) == OCT_RING_CLOSED || stale)) {
                oct_ring_consumer_close(n);
                err = oct_error_set(&e2, OCT_EAGAIN, "ring %s is still the %s ring of epoch "
                                    "%016llx (no new producer yet)",
                                    c->name, stale ? "stale" : "closed",
                                    (unsigned long long)c->epoch);
            } else {
                /* adopt the new mapping, geometry and epoch; keep the counters */
                oct_ring_stats st = c->st;
                uint32_t stale_ms = c->stale_ms;
                uint64_t poll_ns = c->poll_ns;
                munmap((void *)c->map, c->map_bytes);
                *c = *n;
                free(n);
                c->st = st;
                c->st.reattaches++;
                c->stale_ms = stale_ms;
                c->poll_ns = poll_ns;
                return OCT_OK;
            }
        } else if (err != OCT_ENOENT && err != OCT_EAGAIN) {
            if (e)
                *e = e2;
            return err; /* a ring that is there but refused (ABI, geometry...) */
        }
        uint64_t now = oct_time_monotonic_ns();
        if (now >= deadline) {
            if (timeout_ms <= 0)
                return oct_error_set(e, OCT_EAGAIN, "%s", e2.msg);
            /* e2 names the ring already: say it once (issue 21.5) */
            return oct_error_set(e, OCT_ETIMEDOUT, "%s; not back within %d ms", e2.msg,
                                 timeout_ms);
        }
        uint64_t left = deadline - now;
        oct_ipc_sleep_ns(left < 5000000ull ? left : 5000000ull);
    }
}

const oct_ring_header *oct_ring_consumer_header(const oct_ring_consumer *c)
{
    return c ? c->h : NULL;
}

void oct_ring_consumer_geometry(const oct_ring_consumer *c, oct_geometry *g)
{
    *g = c->g;
}

void oct_ring_consumer_stats(const oct_ring_consumer *c, oct_ring_stats *s)
{
    *s = c->st;
}

void oct_ring_consumer_set_stale_ms(oct_ring_consumer *c, uint32_t stale_ms)
{
    if (c)
        c->stale_ms = stale_ms ? stale_ms : 2000;
}

uint64_t oct_ring_consumer_behind(const oct_ring_consumer *c, uint64_t seq)
{
    uint64_t w = OCT_LOAD_ACQ(&c->h->write_seq);
    return w > seq + 1 ? w - seq - 1 : 0;
}

void oct_ring_consumer_set_poll_us(oct_ring_consumer *c, uint32_t poll_us)
{
    if (c)
        c->poll_ns = poll_us ? (uint64_t)poll_us * 1000ull : SLEEP_MAX_NS;
}

static const oct_slot_header *cons_slot(const oct_ring_consumer *c, uint64_t n)
{
    return (const oct_slot_header *)(c->map + c->slot0 + (n & c->mask) * c->stride);
}

/* Has the name been unlinked or pointed at a new object?  (A restarted
 * producer unlinks and re-creates: our mapping keeps the old epoch.) */
static oct_err check_replaced(oct_ring_consumer *c, uint64_t now, oct_error *e)
{
    if (now - c->last_check_ns < REPLACE_CHECK_NS)
        return OCT_OK;
    c->last_check_ns = now;
    int fd = shm_open(c->name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ENOENT)
            return oct_error_set(e, OCT_ESTALE, "ring %s was removed (producer gone)", c->name);
        return OCT_OK; /* cannot tell (EMFILE...): try again later */
    }
    struct stat st;
    int r = fstat(fd, &st);
    close(fd);
    if (r == 0 && (st.st_ino != c->ino || st.st_dev != c->dev))
        return oct_error_set(e, OCT_ESTALE, "ring %s was re-created by a new producer",
                             c->name);
    /* same object, truncated: caught here before a read faults (SIGBUS) */
    if (r == 0 && (uint64_t)st.st_size < c->map_bytes)
        return oct_error_set(e, OCT_ESTALE,
                             "ring %s shrank to %llu bytes, %zu are mapped (truncated by the "
                             "producer?)",
                             c->name, (unsigned long long)st.st_size, c->map_bytes);
    return OCT_OK;
}

static oct_err check_alive(oct_ring_consumer *c, uint64_t now, oct_error *e)
{
    uint64_t ep = OCT_LOAD_ACQ(&c->h->epoch);
    if (ep != c->epoch)
        return oct_error_set(e, OCT_ESTALE, "ring %s: epoch changed from %016llx to %016llx",
                             c->name, (unsigned long long)c->epoch, (unsigned long long)ep);
    return check_replaced(c, now, e);
}

/* The longest sleep between polls now: poll_ns while frames come (the
 * time a frame may wait before it is taken); after a second without one the
 * idle limit, so that an idle consumer costs little CPU. */
static uint64_t poll_limit(const oct_ring_consumer *c, uint64_t now)
{
    return now - c->last_frame_ns >= IDLE_AFTER_NS && c->poll_ns < SLEEP_MAX_NS ? SLEEP_MAX_NS
                                                                                : c->poll_ns;
}

/* Waits until a frame is available and picks its number per policy.
 * Returns OCT_OK with *n_out and the skipped/lost count in *skip_out. */
static oct_err wait_pick(oct_ring_consumer *c, oct_ring_policy policy, int timeout_ms,
                         uint64_t *n_out, uint64_t *skip_out, uint64_t *seen_ns, oct_error *e)
{
    uint64_t t0 = oct_time_monotonic_ns();
    uint64_t deadline = t0 + (timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000ull : 0);
    uint64_t sleep_ns = SLEEP_MIN_NS; /* doubling, up to poll_limit() */
    for (;;) {
        uint64_t now = oct_time_monotonic_ns();
        oct_err err = check_alive(c, now, e);
        if (err)
            return err;
        uint64_t w = OCT_LOAD_ACQ(&c->h->write_seq);
        if (w > c->next) {
            uint64_t n, skip = 0;
            if (policy == OCT_POLICY_ALL && w - c->next <= c->slot_count - 1) {
                n = c->next; /* still in the ring */
            } else {
                n = w - 1;
                skip = n - c->next;
                if (policy == OCT_POLICY_ALL)
                    c->st.frames_lost += skip;   /* lapped */
                else
                    c->st.frames_skipped += skip;
            }
            c->st.frames_seen += n + 1 - c->next;
            *n_out = n;
            *skip_out = skip;
            *seen_ns = oct_time_realtime_ns();
            c->last_frame_ns = now;
            return OCT_OK;
        }
        if (OCT_LOAD_ACQ(&c->h->state) == OCT_RING_CLOSED)
            return oct_error_set(e, OCT_ECLOSED, "ring %s was closed by its producer", c->name);
        uint64_t hb = OCT_LOAD_ACQ(&c->h->heartbeat_ns);
        if (now > hb && now - hb > (uint64_t)c->stale_ms * 1000000ull)
            return oct_error_set(e, OCT_ESTALE,
                                 "ring %s: producer heartbeat is %.1f s old (limit %u ms)",
                                 c->name, (double)(now - hb) / 1e9, c->stale_ms);
        if (now >= deadline)
            return oct_error_set(e, OCT_ETIMEDOUT, "ring %s: no new frame within %d ms",
                                 c->name, timeout_ms);
        uint64_t left = deadline - now, limit = poll_limit(c, now);
        if (sleep_ns > limit)
            sleep_ns = limit;
        oct_ipc_sleep_ns(left < sleep_ns ? left : sleep_ns);
        sleep_ns *= 2;
    }
}

static void fill_info(const oct_ring_consumer *c, uint64_t n, uint64_t fid, uint64_t tacq,
                      uint64_t skip, uint64_t seen, oct_frame_info *info)
{
    if (!info)
        return;
    info->seq = n;
    info->frame_id = fid;
    info->t_acq_ns = tacq;
    info->epoch = c->epoch;
    info->commit_ns = seen;
    info->skipped = skip;
}

/* A SIGBUS inside the mapping: the object was truncated under us. */
static oct_err shrunk(oct_ring_consumer *c, oct_error *e)
{
    c->shrunk = true;
    return oct_error_set(e, OCT_ESTALE,
                         "ring %s shrank under its mapping (SIGBUS: truncated by the producer?)",
                         c->name);
}

/* The read side of the slot seqlock, in the kernel's read_seqbegin /
 * read_seqretry style: begin is true when slot s holds committed frame n;
 * retry is true when it no longer does after the reader's loads (the data
 * read in between is then torn).  The only readers of a slot's seq. */
static bool slot_read_begin(const oct_slot_header *s, uint64_t n)
{
    return OCT_LOAD_ACQ(&s->seq) == 2 * n + 2;
}

static bool slot_read_retry(const oct_slot_header *s, uint64_t n)
{
    OCT_FENCE_ACQ(); /* the reader's loads happen before the re-check */
    return OCT_LOAD_RLX(&s->seq) != 2 * n + 2;
}

/* Copies frame n out of its slot; false when torn (before or during). */
static bool slot_copy(const oct_ring_consumer *c, uint64_t n, void *dst, uint64_t *fid,
                      uint64_t *tacq)
{
    const oct_slot_header *s = cons_slot(c, n);
    if (!slot_read_begin(s, n))
        return false;
    *fid = s->frame_id;
    *tacq = s->t_acq_ns;
    memcpy(dst, (const uint8_t *)s + OCT_SLOT_HEADER_BYTES, (size_t)c->frame_bytes);
    return !slot_read_retry(s, n);
}

/* Frame n is taken (next or peek): the peeked bits move with the position. */
static void advance(oct_ring_consumer *c, uint64_t n)
{
    uint64_t adv = n + 1 - c->next;
    c->peeked = adv >= 64 ? 0 : c->peeked << adv;
    c->next = n + 1;
}

static oct_err next_guarded(oct_ring_consumer *c, oct_ring_policy policy, void *dst,
                            int timeout_ms, oct_frame_info *info, oct_error *e)
{
    uint64_t n, skip, seen;
    oct_err err = wait_pick(c, policy, timeout_ms, &n, &skip, &seen, e);
    if (err)
        return err;
    advance(c, n); /* whatever happens, frame n is dealt with */
    /* on OCT_ETORN too, info says which frame was lost and what was skipped */
    fill_info(c, n, 0, 0, skip, seen, info);
    uint64_t fid = 0, tacq = 0;
    if (!slot_copy(c, n, dst, &fid, &tacq)) {
        c->st.frames_torn++;
        return oct_error_set(e, OCT_ETORN, "ring %s: frame %llu was overwritten before or "
                             "during the copy", c->name, (unsigned long long)n);
    }
    c->st.frames_taken++;
    fill_info(c, n, fid, tacq, skip, seen, info);
    return OCT_OK;
}

oct_err oct_ring_consumer_next(oct_ring_consumer *c, oct_ring_policy policy, void *dst,
                               size_t dst_bytes, int timeout_ms, oct_frame_info *info,
                               oct_error *e)
{
    if (!c || !dst)
        return oct_error_set(e, OCT_EINVAL, "ring: no consumer or destination given");
    if (dst_bytes < c->frame_bytes)
        return oct_error_set(e, OCT_ESIZE,
                             "ring %s: destination is %zu bytes, a frame is %llu bytes", c->name,
                             dst_bytes, (unsigned long long)c->frame_bytes);
    if (c->shrunk)
        return shrunk(c, e);
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0))
        return shrunk(c, e); /* the handler disarmed g */
    oct_bus_arm(&g, c->map, c->map_bytes);
    oct_err err = next_guarded(c, policy, dst, timeout_ms, info, e);
    oct_bus_disarm(&g);
    return err;
}

static oct_err peek_guarded(oct_ring_consumer *c, oct_ring_policy policy, int timeout_ms,
                            const void **frame, oct_frame_info *info, oct_error *e)
{
    uint64_t n, skip, seen;
    oct_err err = wait_pick(c, policy, timeout_ms, &n, &skip, &seen, e);
    if (err)
        return err;
    const oct_slot_header *s = cons_slot(c, n);
    advance(c, n);
    if (!slot_read_begin(s, n)) {
        c->st.frames_torn++;
        return oct_error_set(e, OCT_ETORN, "ring %s: frame %llu was overwritten before the read",
                             c->name, (unsigned long long)n);
    }
    fill_info(c, n, s->frame_id, s->t_acq_ns, skip, seen, info);
    c->peeked |= 1;
    *frame = (const uint8_t *)s + OCT_SLOT_HEADER_BYTES;
    return OCT_OK;
}

/* The caller reads a peeked frame straight from the mapping: that read is
 * not guarded here (a DMA engine reports its own error; a CPU reader that
 * must survive a truncating producer copies with oct_ring_consumer_next). */
oct_err oct_ring_consumer_peek(oct_ring_consumer *c, oct_ring_policy policy, int timeout_ms,
                               const void **frame, oct_frame_info *info, oct_error *e)
{
    if (!c || !frame || !info)
        return oct_error_set(e, OCT_EINVAL, "ring: peek needs a consumer, frame and info");
    *frame = NULL;
    if (c->shrunk)
        return shrunk(c, e);
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0)) {
        *frame = NULL;
        return shrunk(c, e);
    }
    oct_bus_arm(&g, c->map, c->map_bytes);
    oct_err err = peek_guarded(c, policy, timeout_ms, frame, info, e);
    oct_bus_disarm(&g);
    return err;
}

oct_err oct_ring_consumer_verify(oct_ring_consumer *c, const oct_frame_info *info)
{
    /* several peeked frames may be out (DMAs on several GPUs): each is
     * verified once, in any order */
    if (!c || !info || info->epoch != c->epoch || info->seq >= c->next ||
        c->next - 1 - info->seq >= 64 || !((c->peeked >> (c->next - 1 - info->seq)) & 1))
        return OCT_EINVAL;
    const oct_slot_header *s = cons_slot(c, info->seq);
    c->peeked &= ~(1ull << (c->next - 1 - info->seq));
    if (c->shrunk)
        return OCT_ETORN;
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0)) {
        c->shrunk = true;
        c->st.frames_torn++;
        return OCT_ETORN;
    }
    oct_bus_arm(&g, c->map, c->map_bytes);
    bool torn = slot_read_retry(s, info->seq); /* the caller's reads happen before it */
    oct_bus_disarm(&g);
    if (torn) {
        c->st.frames_torn++;
        return OCT_ETORN;
    }
    c->st.frames_taken++;
    return OCT_OK;
}

static oct_err copy_guarded(oct_ring_consumer *c, uint64_t seq, void *dst, oct_frame_info *info,
                            oct_error *e)
{
    uint64_t fid = 0, tacq = 0;
    if (seq != OCT_RING_NEWEST) {
        if (!slot_copy(c, seq, dst, &fid, &tacq))
            return oct_error_set(e, OCT_ETORN, "ring %s: frame %llu was overwritten", c->name,
                                 (unsigned long long)seq);
        fill_info(c, seq, fid, tacq, 0, oct_time_realtime_ns(), info);
        return OCT_OK;
    }
    for (int i = 0; i < 4; i++) {
        uint64_t w = OCT_LOAD_ACQ(&c->h->write_seq);
        if (w == 0)
            return oct_error_set(e, OCT_ENOENT, "ring %s: no frame committed yet", c->name);
        if (slot_copy(c, w - 1, dst, &fid, &tacq)) {
            fill_info(c, w - 1, fid, tacq, 0, oct_time_realtime_ns(), info);
            return OCT_OK;
        }
    }
    return oct_error_set(e, OCT_ETORN, "ring %s: the newest frame was overwritten during "
                         "every copy", c->name);
}

oct_err oct_ring_consumer_copy(oct_ring_consumer *c, uint64_t seq, void *dst, size_t dst_bytes,
                               oct_frame_info *info, oct_error *e)
{
    if (!c || !dst || !info)
        return oct_error_set(e, OCT_EINVAL, "ring: copy needs a consumer, destination and info");
    if (dst_bytes < c->frame_bytes)
        return oct_error_set(e, OCT_ESIZE,
                             "ring %s: destination is %zu bytes, a frame is %llu bytes", c->name,
                             dst_bytes, (unsigned long long)c->frame_bytes);
    if (c->shrunk)
        return shrunk(c, e);
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0))
        return shrunk(c, e);
    oct_bus_arm(&g, c->map, c->map_bytes);
    oct_err err = copy_guarded(c, seq, dst, info, e);
    oct_bus_disarm(&g);
    return err;
}
