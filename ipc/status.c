/* status.c - the status block of SPEC 3.3, written only by octd. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc_internal.h"

/* ABI offsets and sizes: static asserts in oct_ipc.h */

#define READ_ATTEMPTS 200
#define READ_PAUSE_NS 20000ull

struct oct_status {
    char name[OCT_SHM_NAME_MAX + 1];
    oct_status_block *b;
    bool writable;
};

static oct_err status_header_check(const oct_status_block *b, oct_error *e)
{
    if (memcmp(b->magic, OCT_STATUS_MAGIC, 8) != 0)
        return oct_error_set(e, OCT_EABI, "magic is not \"OCTSTAT\\0\": not a status block");
    if (b->abi_major != OCT_ABI_MAJOR)
        return oct_error_set(e, OCT_EABI,
                             "abi_major = %u (abi_minor %u): this program understands ABI %u.x",
                             b->abi_major, b->abi_minor, OCT_ABI_MAJOR);
    if (b->block_bytes != OCT_STATUS_BYTES)
        return oct_error_set(e, OCT_EABI, "block_bytes = %u, expected %u", b->block_bytes,
                             OCT_STATUS_BYTES);
    return OCT_OK;
}

oct_err oct_status_create(oct_status **out, const char *name, uint32_t mode, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return err;
    mode = mode ? mode : 0664;
    int fd = shm_open(name, O_CREAT | O_RDWR | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return oct_error_set(e, errno == EACCES ? OCT_EPERM : OCT_EIO, "status %s: shm_open: %s",
                             name, strerror(errno));
    if (fchmod(fd, (mode_t)mode) != 0 || ftruncate(fd, OCT_STATUS_BYTES) != 0) {
        err = oct_error_set(e, OCT_EIO, "status %s: fchmod/ftruncate: %s", name,
                            strerror(errno));
        close(fd);
        return err;
    }
    void *m = mmap(NULL, OCT_STATUS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return oct_error_set(e, OCT_EIO, "status %s: mmap: %s", name, strerror(errno));
    oct_status *s = calloc(1, sizeof *s);
    if (!s) {
        munmap(m, OCT_STATUS_BYTES);
        return oct_error_set(e, OCT_ENOMEM, "status %s: out of memory", name);
    }
    oct_ipc_strlcpy(s->name, sizeof s->name, name);
    s->b = m;
    s->writable = true;
    oct_status_block *b = s->b;
    /* the object may be a previous octd's: re-initialise inside the
     * seqlock so a reader never takes the mix as consistent */
    uint64_t seq = OCT_LOAD_RLX(&b->seq);
    seq |= 1; /* odd: inside */
    OCT_STORE_RLX(&b->seq, seq);
    OCT_FENCE_REL();
    memset((char *)b + 48, 0, sizeof *b - 48);
    memcpy(b->magic, OCT_STATUS_MAGIC, 8);
    b->abi_major = OCT_ABI_MAJOR;
    b->abi_minor = OCT_STATUS_ABI_MINOR;
    b->block_bytes = OCT_STATUS_BYTES;
    OCT_STORE_RLX(&b->state, (uint32_t)OCT_STATE_STARTING);
    b->pid = (uint64_t)getpid();
    b->start_ns = oct_time_realtime_ns();
    OCT_STORE_RLX(&b->heartbeat_ns, oct_time_monotonic_ns());
    OCT_STORE_REL(&b->seq, seq + 1);
    *out = s;
    return OCT_OK;
}

oct_err oct_status_open(oct_status **out, const char *name, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return err;
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        int en = errno;
        if (en == ENOENT)
            return oct_error_set(e, OCT_ENOENT, "status block %s does not exist (is octd running?)",
                                 name);
        return oct_error_set(e, en == EACCES ? OCT_EPERM : OCT_EIO, "status %s: shm_open: %s",
                             name, strerror(en));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < OCT_STATUS_BYTES) {
        err = oct_error_set(e, OCT_ESIZE, "status %s: object is %llu bytes, expected %u", name,
                            (unsigned long long)st.st_size, OCT_STATUS_BYTES);
        close(fd);
        return err;
    }
    void *m = mmap(NULL, OCT_STATUS_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return oct_error_set(e, OCT_EIO, "status %s: mmap: %s", name, strerror(errno));
    err = status_header_check(m, e);
    if (err) {
        munmap(m, OCT_STATUS_BYTES);
        return oct_error_prefix(e, err, "status %s", name);
    }
    oct_status *s = calloc(1, sizeof *s);
    if (!s) {
        munmap(m, OCT_STATUS_BYTES);
        return oct_error_set(e, OCT_ENOMEM, "status %s: out of memory", name);
    }
    oct_ipc_strlcpy(s->name, sizeof s->name, name);
    s->b = m;
    *out = s;
    return OCT_OK;
}

void oct_status_close(oct_status *s, bool unlink_name)
{
    if (!s)
        return;
    munmap(s->b, OCT_STATUS_BYTES);
    if (unlink_name)
        shm_unlink(s->name);
    free(s);
}

oct_status_block *oct_status_block_ptr(oct_status *s)
{
    return s ? s->b : NULL;
}

void oct_status_begin(oct_status *s)
{
    if (!s || !s->writable)
        return;
    uint64_t q = OCT_LOAD_RLX(&s->b->seq); /* octd is the only writer */
    if (!(q & 1))
        OCT_STORE_RLX(&s->b->seq, q + 1);
    OCT_FENCE_REL();
}

void oct_status_end(oct_status *s)
{
    if (!s || !s->writable)
        return;
    uint64_t q = OCT_LOAD_RLX(&s->b->seq);
    if (q & 1)
        OCT_STORE_REL(&s->b->seq, q + 1);
}

oct_err oct_status_read(oct_status *s, oct_status_block *copy)
{
    if (!s || !copy)
        return OCT_EINVAL;
    /* Back-off: octd may be preempted inside a write (odd seq) on a busy
     * machine; the pauses double up to 1 ms, about 0.2 s in all. */
    uint64_t pause = READ_PAUSE_NS;
    for (int i = 0; i < READ_ATTEMPTS; i++) {
        if (i) {
            oct_ipc_sleep_ns(pause);
            if (pause < 1000000ull)
                pause *= 2;
        }
        uint64_t q0 = OCT_LOAD_ACQ(&s->b->seq);
        if (q0 & 1)
            continue;
        /* volatile byte copy: not merged across the fence by the compiler */
        const volatile unsigned char *src = (const volatile unsigned char *)s->b;
        unsigned char *dst = (unsigned char *)copy;
        for (size_t k = 0; k < sizeof *copy; k++)
            dst[k] = src[k];
        OCT_FENCE_ACQ();
        if (OCT_LOAD_RLX(&s->b->seq) == q0)
            return OCT_OK;
    }
    return OCT_EAGAIN;
}
