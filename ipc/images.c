/* images.c - the image area (oct_ipc.h): octd's product buffers in shared
 * memory, one seqlock per slot.  octd is the only writer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc_internal.h"

struct oct_images {
    char name[OCT_SHM_NAME_MAX + 1];
    oct_images_header *h;
    size_t map_bytes;
    bool writable;
};

static uint64_t area_bytes(uint32_t slots, uint64_t stride)
{
    return OCT_IMAGES_HEADER_BYTES + (uint64_t)slots * stride;
}

oct_err oct_images_header_check(const oct_images_header *h, uint64_t object_bytes, oct_error *e)
{
    if (object_bytes < OCT_IMAGES_HEADER_BYTES)
        return oct_error_set(e, OCT_ESIZE, "object is %llu bytes, less than the %u-byte header",
                             (unsigned long long)object_bytes, OCT_IMAGES_HEADER_BYTES);
    if (memcmp(h->magic, OCT_IMAGES_MAGIC, 8) != 0)
        return oct_error_set(e, OCT_EABI, "magic is not \"OCTIMGS\\0\": not an image area");
    if (h->abi_major != OCT_ABI_MAJOR)
        return oct_error_set(e, OCT_EABI, "abi_major = %u (abi_minor %u): this program "
                             "understands ABI %u.x", h->abi_major, h->abi_minor, OCT_ABI_MAJOR);
    if (h->header_bytes != OCT_IMAGES_HEADER_BYTES || h->slot0_offset != OCT_IMAGES_HEADER_BYTES)
        return oct_error_set(e, OCT_EABI, "header_bytes = %u, slot0_offset = %llu: expected %u",
                             h->header_bytes, (unsigned long long)h->slot0_offset,
                             OCT_IMAGES_HEADER_BYTES);
    if (h->slot_count == 0 || h->slot_count > OCT_IMAGES_SLOTS_MAX)
        return oct_error_set(e, OCT_EABI, "slot_count = %u, not 1..%u", h->slot_count,
                             OCT_IMAGES_SLOTS_MAX);
    if (h->slot_stride == 0 || h->slot_stride % 4096 != 0 ||
        h->slot_stride > (UINT64_MAX - OCT_IMAGES_HEADER_BYTES) / h->slot_count)
        return oct_error_set(e, OCT_EABI, "slot_stride = %llu is not a multiple of 4096",
                             (unsigned long long)h->slot_stride);
    if (area_bytes(h->slot_count, h->slot_stride) > object_bytes)
        return oct_error_set(e, OCT_ESIZE, "%u slots of %llu bytes need %llu bytes, the object "
                             "has %llu", h->slot_count, (unsigned long long)h->slot_stride,
                             (unsigned long long)area_bytes(h->slot_count, h->slot_stride),
                             (unsigned long long)object_bytes);
    return OCT_OK;
}

oct_err oct_images_create(oct_images **out, const char *name, uint32_t slots,
                          uint64_t slot_bytes, uint32_t mode, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return oct_error_prefix(e, err, "image area");
    if (slots == 0 || slots > OCT_IMAGES_SLOTS_MAX || slot_bytes == 0 ||
        slot_bytes > (1ull << 40))
        return oct_error_set(e, OCT_EINVAL, "image area %s: %u slots of %llu bytes (1..%u "
                             "slots, 1 byte..1 TiB each)", name, slots,
                             (unsigned long long)slot_bytes, OCT_IMAGES_SLOTS_MAX);
    uint64_t stride = (slot_bytes + 4095) & ~4095ull;
    uint64_t bytes = area_bytes(slots, stride);
    mode = mode ? mode : 0640;
    /* a new object, never the old one resized: its readers keep their mapping */
    if (shm_unlink(name) != 0 && errno != ENOENT && errno != EACCES)
        return oct_error_set(e, OCT_EIO, "image area %s: shm_unlink: %s", name, strerror(errno));
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return oct_error_set(e, errno == EACCES ? OCT_EPERM : OCT_EIO,
                             "image area %s: shm_open: %s", name, strerror(errno));
    /* allocated now, not on first touch: a full /dev/shm is an error here,
     * never a SIGBUS in the middle of a frame */
    int fa = 0;
    if (fchmod(fd, (mode_t)mode) != 0 || ftruncate(fd, (off_t)bytes) != 0 ||
        ((fa = posix_fallocate(fd, 0, (off_t)bytes)) != 0 && (errno = fa))) {
        err = oct_error_set(e, errno == ENOSPC ? OCT_ENOMEM : OCT_EIO,
                            "image area %s: %u slots of %llu bytes (%llu MB): %s", name, slots,
                            (unsigned long long)stride, (unsigned long long)(bytes >> 20),
                            strerror(errno));
        close(fd);
        shm_unlink(name);
        return err;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        err = oct_error_set(e, OCT_EIO, "image area %s: mmap of %llu bytes: %s", name,
                            (unsigned long long)bytes, strerror(errno));
        shm_unlink(name);
        return err;
    }
    oct_images *a = calloc(1, sizeof *a);
    if (!a) {
        munmap(m, bytes);
        shm_unlink(name);
        return oct_error_set(e, OCT_ENOMEM, "image area %s: out of memory", name);
    }
    oct_ipc_strlcpy(a->name, sizeof a->name, name);
    a->h = m;
    a->map_bytes = bytes;
    a->writable = true;
    oct_images_header *h = a->h;
    memcpy(h->magic, OCT_IMAGES_MAGIC, 8);
    h->abi_major = OCT_ABI_MAJOR;
    h->abi_minor = 0;
    h->header_bytes = OCT_IMAGES_HEADER_BYTES;
    h->slot_count = slots;
    h->slot_stride = stride;
    h->slot0_offset = OCT_IMAGES_HEADER_BYTES;
    h->id = oct_ipc_random_nonzero() & ((1ull << 53) - 1);
    if (!h->id)
        h->id = 1;
    h->owner_pid = (uint64_t)getpid();
    OCT_STORE_REL(&h->state, (uint32_t)OCT_IMAGES_READY);
    *out = a;
    return OCT_OK;
}

oct_err oct_images_open(oct_images **out, const char *name, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return oct_error_prefix(e, err, "image area");
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        int en = errno;
        return oct_error_set(e, en == ENOENT ? OCT_ENOENT : en == EACCES ? OCT_EPERM : OCT_EIO,
                             "image area %s: %s", name,
                             en == ENOENT ? "does not exist (is octd running with [publish] "
                                            "shm_endpoint?)"
                                          : strerror(en));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err = oct_error_set(e, OCT_EIO, "image area %s: fstat: %s", name, strerror(errno));
        close(fd);
        return err;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < OCT_IMAGES_HEADER_BYTES) {
        close(fd);
        return oct_error_set(e, OCT_ESIZE, "image area %s: object is %llu bytes, less than its "
                             "header", name, (unsigned long long)size);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return oct_error_set(e, OCT_EIO, "image area %s: mmap: %s", name, strerror(errno));
    err = oct_images_header_check(m, size, e);
    if (err) {
        munmap(m, size);
        return oct_error_prefix(e, err, "image area %s", name);
    }
    oct_images *a = calloc(1, sizeof *a);
    if (!a) {
        munmap(m, size);
        return oct_error_set(e, OCT_ENOMEM, "image area %s: out of memory", name);
    }
    if (!oct_bus_install()) { /* a hostile writer could still shrink it */
        munmap(m, size);
        free(a);
        return oct_error_set(e, OCT_EIO, "image area %s: cannot install the SIGBUS guard", name);
    }
    oct_ipc_strlcpy(a->name, sizeof a->name, name);
    a->h = m;
    a->map_bytes = size;
    *out = a;
    return OCT_OK;
}

void oct_images_close(oct_images *a, bool unlink_name)
{
    if (!a)
        return;
    if (a->writable)
        OCT_STORE_REL(&a->h->state, (uint32_t)OCT_IMAGES_CLOSED);
    munmap(a->h, a->map_bytes);
    if (unlink_name)
        shm_unlink(a->name);
    free(a);
}

const oct_images_header *oct_images_header_of(const oct_images *a) { return a ? a->h : NULL; }
const char *oct_images_name(const oct_images *a) { return a ? a->name : ""; }

void *oct_images_slot(oct_images *a, uint32_t slot)
{
    if (!a || !a->writable || slot >= a->h->slot_count)
        return NULL;
    return (char *)a->h + a->h->slot0_offset + (uint64_t)slot * a->h->slot_stride;
}

void oct_images_begin(oct_images *a, uint32_t slot)
{
    if (!a || !a->writable || slot >= a->h->slot_count)
        return;
    uint64_t q = OCT_LOAD_RLX(&a->h->seq[slot]);
    if (!(q & 1))
        OCT_STORE_RLX(&a->h->seq[slot], q + 1);
    OCT_FENCE_REL(); /* odd before any byte of the new frame (the device's DMA too: it is
                      * started after this) */
}

uint64_t oct_images_end(oct_images *a, uint32_t slot)
{
    if (!a || !a->writable || slot >= a->h->slot_count)
        return 0;
    uint64_t q = OCT_LOAD_RLX(&a->h->seq[slot]);
    if (q & 1)
        OCT_STORE_REL(&a->h->seq[slot], ++q);
    return q;
}

oct_err oct_images_ref(const oct_images *a, uint32_t slot, const void *p, uint64_t bytes,
                       oct_image_ref *r, oct_error *e)
{
    if (!a || slot >= a->h->slot_count)
        return oct_error_set(e, OCT_EINVAL, "image area: no slot %u", slot);
    const char *lo = (const char *)a->h + a->h->slot0_offset + (uint64_t)slot * a->h->slot_stride;
    const char *c = p;
    if (c < lo || bytes > a->h->slot_stride || (uint64_t)(c - lo) > a->h->slot_stride - bytes)
        return oct_error_set(e, OCT_EINVAL, "image area %s: %llu bytes at %p are not inside "
                             "slot %u", a->name, (unsigned long long)bytes, p, slot);
    r->id = a->h->id;
    r->slot = slot;
    r->seq = OCT_LOAD_RLX(&a->h->seq[slot]);
    r->offset = (uint64_t)(c - (const char *)a->h);
    r->bytes = bytes;
    return OCT_OK;
}

/* The checks every read makes before it touches the bytes. */
static oct_err ref_check(const oct_images *a, const oct_image_ref *r, oct_error *e)
{
    const oct_images_header *h = a->h;
    if (r->id != h->id)
        return oct_error_set(e, OCT_ESTALE, "image area %s: the image is in object %llu, this "
                             "mapping is object %llu (octd made a new one: open it again)",
                             a->name, (unsigned long long)r->id, (unsigned long long)h->id);
    if (r->slot >= h->slot_count)
        return oct_error_set(e, OCT_EINVAL, "image area %s: slot %u of %u", a->name, r->slot,
                             h->slot_count);
    uint64_t lo = h->slot0_offset + (uint64_t)r->slot * h->slot_stride;
    if (r->offset < lo || r->bytes > h->slot_stride || r->offset - lo > h->slot_stride - r->bytes)
        return oct_error_set(e, OCT_EINVAL, "image area %s: %llu bytes at offset %llu are not "
                             "inside slot %u", a->name, (unsigned long long)r->bytes,
                             (unsigned long long)r->offset, r->slot);
    if ((r->seq & 1) || OCT_LOAD_ACQ(&h->seq[r->slot]) != r->seq)
        return oct_error_set(e, OCT_ETORN, "image area %s: slot %u was rewritten (seq %llu, "
                             "the image's %llu)", a->name, r->slot,
                             (unsigned long long)OCT_LOAD_RLX(&h->seq[r->slot]),
                             (unsigned long long)r->seq);
    return OCT_OK;
}

oct_err oct_images_read(oct_images *a, const oct_image_ref *r, void *dst, oct_error *e)
{
    if (!a || !r || (!dst && r->bytes))
        return oct_error_set(e, OCT_EINVAL, "oct_images_read: NULL argument");
    oct_err err = ref_check(a, r, e);
    if (err)
        return err;
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0))
        return oct_error_set(e, OCT_ESIZE, "image area %s: the object shrank under the reader",
                             a->name);
    oct_bus_arm(&g, a->h, a->map_bytes);
    memcpy(dst, (const char *)a->h + r->offset, r->bytes);
    oct_bus_disarm(&g);
    if (!oct_images_valid(a, r))
        return oct_error_set(e, OCT_ETORN, "image area %s: slot %u was rewritten during the copy",
                             a->name, r->slot);
    return OCT_OK;
}

const void *oct_images_view(oct_images *a, const oct_image_ref *r, oct_error *e)
{
    if (!a || !r) {
        oct_error_set(e, OCT_EINVAL, "oct_images_view: NULL argument");
        return NULL;
    }
    return ref_check(a, r, e) ? NULL : (const char *)a->h + r->offset;
}

bool oct_images_valid(const oct_images *a, const oct_image_ref *r)
{
    OCT_FENCE_ACQ(); /* the caller's reads of the image before the seq */
    return a && r && r->slot < a->h->slot_count && r->id == a->h->id &&
           OCT_LOAD_RLX(&a->h->seq[r->slot]) == r->seq;
}
