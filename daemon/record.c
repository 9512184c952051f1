/* record.c - see record.h.  HDF5 is used by one thread at a time: the main
 * thread creates the file (so that a bad directory is the command's answer),
 * then only the writer thread touches it until it is joined.
 *
 * Raw frames go to the disk with O_DIRECT where the file system and the
 * frame size allow it ([save] record_io): HDF5 keeps the layout (the chunk
 * of a new row is allocated, 4 KiB aligned and unfilled, by H5Dset_extent)
 * and the writer pwrite()s the frame at the chunk's address, so no page
 * cache copy and no kernel writeback compete with the frame loop for the
 * cores.  Whatever goes through the page cache (products, HDF5's metadata,
 * raw frames in buffered mode) is written back by the writer thread itself
 * every REC_WB_WINDOW bytes and dropped from the cache, so dirty pages stay
 * bounded.  The writer (up to REC_BATCH frames per pwritev) and the helper
 * that first touches the queue's buffers run at nice 19: the frame loop
 * comes first. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT, sync_file_range */
#endif
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "oct_control_keys.h"
#include "sys.h"

#define REC_BUDGET_BYTES (256ull << 20) /* queue memory (raw + products) */
#define REC_ENTRIES_MIN 4u
#define REC_ENTRIES_MAX 256u
#define REC_RESERVE_BYTES (16ull << 20) /* freed on ENOSPC so HDF5 can close */
#define REC_TOPICS_MAX (OCT_METHOD_COUNT * OCT_KIND_COUNT * 2)
#define REC_PROFILE_MAX (1u << 20)
#define REC_DIRECT_ALIGN 4096u           /* O_DIRECT offsets, lengths and buffers */
#define REC_WB_WINDOW (8ll << 20)        /* buffered bytes between writebacks */
#define REC_WRITER_NICE 19
#define REC_BATCH 16u                    /* queue entries taken at once */

/* A raw buffer's first touch (page faults, zeroing, and for huge pages the
 * kernel's compaction, which can stall for tens of ms) is done by a helper
 * thread at nice 19 ("octd-rec-prep"), from the first entry up, in the
 * order the frame loop fills them.  The frame loop only fills buffers the
 * helper has touched: a frame whose buffer is not ready yet (the first
 * moments of a recording) is left out (counted), never faulted in there. */
enum { REC_SLOT_FRESH, REC_SLOT_READY };

typedef struct rec_topic {
    int method, kind;
    bool f32;
    char topic[48]; /* as published: bscan/cfd, enface/msi/f32 */
    char path[80];  /* /products/bscan/cfd, /products/enface/msi_f32 */
    int ndim;
    uint32_t shape[3];
    size_t bytes, offset; /* in an entry's product buffer */
    int32_t indices[64];
    uint32_t n_indices;
    hid_t dset;
} rec_topic;

typedef struct rec_entry {
    uint8_t *raw, *prod;
    uint64_t seq; /* the ring's sequence number of the frame taken into it */
    bool skip;    /* taken, never published (torn, lost): not written */
    uint64_t frame_id, t_acq_ns, gen;
    oct_control_values values;
} rec_entry;

typedef struct octd_rec {
    char dir[OCT_PATH_MAX];
    char name[96], part[112], reserve[112];
    char final_path[OCT_PATH_MAX + 100];
    int dirfd;
    oct_geometry geom;
    size_t frame_bytes;
    bool want_raw, want_prod;
    uint64_t max_frames;
    double max_seconds;
    uint64_t start_mono;

    /* product layout: set by the main thread at the first frame, before
     * the writer sees any entry carrying products (the release of tail orders it) */
    rec_topic topics[REC_TOPICS_MAX];
    int ntopics;
    size_t prod_bytes;
    bool layout_set;

    /* HDF5 (main thread before the writer starts, then the writer only) */
    hid_t file, raw, fid, tacq;
    hid_t cc_index, cc_fid, cc_gen, cc_values;
    uint64_t cc_rows, last_gen;

    /* raw frames: O_DIRECT descriptor of the .part file, or -1 (buffered) */
    int direct_fd;
    int vfd;                    /* HDF5's own descriptor (writeback), or -1 */
    off_t wb_start, wb_prev_off, wb_prev_len;
    char io_mode[160];          /* attribute record_io: how raw frames went */

    pthread_t thread;
    bool thread_started;
    pthread_t prep_thread;
    bool prep_started;
    /* The queue is single-producer (the frame loop), single-consumer (the
     * writer) and lock-free: the frame loop never takes a lock the nice-19
     * writer might hold while it waits for a core (priority inversion). */
    pthread_mutex_t mu;         /* message only */
    sem_t wake;                 /* posted per entry and at stop: wakes the writer */
    rec_entry *q;
    uint8_t *raw_store;         /* the entries' raw buffers, one block */
    uint8_t *slot_state;        /* per entry: REC_SLOT_* (atomic), NULL: no prefault */
    unsigned cap;
    uint64_t head, tail;             /* entries [head, tail) queued; atomic: head the
                                      * writer's, tail the frame loop's */
    uint64_t resv;                   /* frame loop: [tail, resv) frames in flight */
    bool stop_req, finished, failed; /* atomic */
    char message[128];               /* under mu */

    bool closing;      /* main thread: no more frames are offered */
    uint64_t accepted; /* main thread */
    uint64_t loop_ns;  /* main thread: time octd_record_take/_frame took for them */
    /* main thread: frames left out of the file by the frame loop, why */
    uint64_t out_full, out_unready, out_behind;
    uint64_t written, dropped; /* atomic */
    double writer_cpu_s;       /* the writer's CPU time, set before it finishes */
} octd_rec;

#define LOAD64(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define LOADB(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define SETB(x) __atomic_store_n(&(x), true, __ATOMIC_RELEASE)
#define ADD64(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_ACQ_REL)

/* ---------------- HDF5 helpers ---------------- */
/* The innermost message of HDF5's error stack (the others only repeat it). */
static herr_t h5_first_desc(unsigned n, const H5E_error2_t *err, void *arg)
{
    if (n == 0 && err->desc)
        snprintf(arg, 128, "%s", err->desc);
    return 0;
}

static void h5_reason(char *buf, size_t len, int saved_errno)
{
    char inner[128] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_first_desc, inner);
    if (saved_errno == ENOSPC || saved_errno == EDQUOT)
        snprintf(buf, len, "disk full (%s)", strerror(saved_errno));
    else if (saved_errno)
        snprintf(buf, len, "%s (%s)", strerror(saved_errno), inner[0] ? inner : "HDF5");
    else
        snprintf(buf, len, "HDF5: %s", inner[0] ? inner : "unknown error");
}

static hid_t h5_str_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

static herr_t h5_attr_text(hid_t obj, const char *name, const char *text)
{
    hid_t t = h5_str_type(), sp = H5Screate(H5S_SCALAR);
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, t, &text);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return rc;
}

static herr_t h5_attr_u64(hid_t obj, const char *name, uint64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hid_t a = H5Acreate2(obj, name, H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_UINT64, &v);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

/* An extendible dataset [0][shape...] chunked by `chunk_rows` rows; chunk
 * cache off so every frame goes to the disk when written (errors show at
 * once, and a failed frame is the last one lost).  chunk_rows 0: one row
 * per chunk, each allocated when the extent grows and never filled (the
 * O_DIRECT writer writes it). */
static hid_t h5_dataset(hid_t loc, const char *path, hid_t type, int ndim, const uint32_t *shape,
                        hsize_t chunk_rows)
{
    hsize_t dims[4] = {0}, maxd[4] = {H5S_UNLIMITED}, chunk[4] = {chunk_rows ? chunk_rows : 1};
    for (int i = 0; i < ndim; i++)
        dims[i + 1] = maxd[i + 1] = chunk[i + 1] = shape[i];
    hid_t sp = H5Screate_simple(ndim + 1, dims, maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, ndim + 1, chunk);
    if (chunk_rows == 0) {
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (chunk_rows <= 1)
        H5Pset_chunk_cache(dapl, 0, 0, 1.0);
    hid_t ds = H5Dcreate2(loc, path, type, sp, lcpl, dcpl, dapl);
    H5Pclose(dapl);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return ds;
}

/* Appends row n of a dataset created by h5_dataset(): one whole chunk
 * written directly (no conversion, no cache) when the rows are chunks. */
static herr_t h5_append_chunk(hid_t ds, int ndim, const uint32_t *shape, uint64_t n,
                              const void *data, size_t bytes)
{
    hsize_t dims[4] = {n + 1}, off[4] = {n};
    for (int i = 0; i < ndim; i++)
        dims[i + 1] = shape[i];
    if (H5Dset_extent(ds, dims) < 0)
        return -1;
    return H5Dwrite_chunk(ds, H5P_DEFAULT, 0, off, bytes, data);
}

static herr_t h5_append_1d(hid_t ds, hid_t memtype, uint64_t n, const void *v)
{
    hsize_t dims = n + 1, off = n, one = 1;
    if (H5Dset_extent(ds, &dims) < 0)
        return -1;
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(1, &one, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &one, NULL);
    herr_t rc = H5Dwrite(ds, memtype, ms, fs, H5P_DEFAULT, v);
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static bool h5_cut(hid_t ds, uint64_t rows)
{
    if (ds < 0)
        return true;
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[4];
    int nd = H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    if (nd > 0 && dims[0] > rows) {
        dims[0] = rows;
        return H5Dset_extent(ds, dims) >= 0;
    }
    return true;
}

static hid_t sample_h5_type(uint32_t t)
{
    return t == OCT_SAMPLE_U16 ? H5T_STD_U16LE : t == OCT_SAMPLE_I16 ? H5T_STD_I16LE
                                                                      : H5T_IEEE_F32LE;
}

/* ---------------- the writer thread ---------------- */
static void set_failed(octd_rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_failed(octd_rec *r, const char *fmt, ...)
{
    pthread_mutex_lock(&r->mu);
    if (!LOADB(r->failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof r->message, fmt, ap);
        va_end(ap);
        SETB(r->failed);
    }
    pthread_mutex_unlock(&r->mu);
}

static bool create_product_datasets(octd_rec *r)
{
    for (int i = 0; i < r->ntopics; i++) {
        rec_topic *t = &r->topics[i];
        t->dset = h5_dataset(r->file, t->path, t->f32 ? H5T_IEEE_F32LE : H5T_STD_U8LE, t->ndim,
                             t->shape, 1);
        if (t->dset < 0)
            return false;
        h5_attr_text(t->dset, "topic", t->topic);
        if (t->n_indices) {
            hsize_t n = t->n_indices;
            hid_t sp = H5Screate_simple(1, &n, NULL);
            hid_t a = H5Acreate2(t->dset, "indices", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
            if (a >= 0) {
                H5Awrite(a, H5T_NATIVE_INT32, t->indices);
                H5Aclose(a);
            }
            H5Sclose(sp);
        }
    }
    return true;
}

static bool write_control_change(octd_rec *r, const rec_entry *e, uint64_t row)
{
    if (r->cc_index < 0) {
        static const uint32_t none[1] = {0};
        hid_t st = h5_str_type();
        r->cc_index = h5_dataset(r->file, "/control_changes/index", H5T_STD_U64LE, 0, none, 64);
        r->cc_fid = h5_dataset(r->file, "/control_changes/frame_id", H5T_STD_U64LE, 0, none, 64);
        r->cc_gen = h5_dataset(r->file, "/control_changes/generation", H5T_STD_U64LE, 0, none, 64);
        r->cc_values = h5_dataset(r->file, "/control_changes/values", st, 0, none, 64);
        H5Tclose(st);
        if (r->cc_index < 0 || r->cc_fid < 0 || r->cc_gen < 0 || r->cc_values < 0)
            return false;
    }
    char *text = malloc(16384);
    if (!text)
        return false;
    oct_control_format_all(&e->values, text, 16384);
    hid_t st = h5_str_type();
    const char *p = text;
    bool ok = h5_append_1d(r->cc_index, H5T_NATIVE_UINT64, r->cc_rows, &row) >= 0 &&
              h5_append_1d(r->cc_fid, H5T_NATIVE_UINT64, r->cc_rows, &e->frame_id) >= 0 &&
              h5_append_1d(r->cc_gen, H5T_NATIVE_UINT64, r->cc_rows, &e->gen) >= 0 &&
              h5_append_1d(r->cc_values, st, r->cc_rows, &p) >= 0;
    H5Tclose(st);
    free(text);
    r->cc_rows++;
    return ok;
}

/* Falls back to buffered writes for the rest of the recording. */
static void direct_off(octd_rec *r, const char *why)
{
    close(r->direct_fd);
    r->direct_fd = -1;
    snprintf(r->io_mode, sizeof r->io_mode, "buffered (O_DIRECT write refused: %s)", why);
    octd_log(LOG_WARNING, "recording %s: O_DIRECT write refused (%s): buffered from now on",
             r->final_path, why);
}

/* Writes iov[0..cnt) at off; returns the bytes written (errno set when
 * short: a write that cannot go on is taken as a full disk). */
static size_t pwritev_all(int fd, struct iovec *iov, int cnt, off_t off)
{
    size_t done = 0;
    while (cnt > 0) {
        ssize_t w = pwritev(fd, iov, cnt, off + (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return done;
        }
        done += (size_t)w;
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return done;
}

/* Rows n..n+k of /raw from the queue entries e[0..k): their chunks are
 * allocated by one extent (early allocation, never filled), and frames
 * whose chunks follow each other on the file go in one pwritev with
 * O_DIRECT - a backlog is written in fewer, larger writes and wake-ups.
 * Returns the frames completely written (errno says why when < k; ENOSPC:
 * disk full). */
static unsigned append_raw_direct(octd_rec *r, rec_entry *const *e, unsigned k, uint64_t n)
{
    hsize_t dims[4] = {n + k, r->geom.lines, r->geom.ascans, r->geom.samples};
    haddr_t addr[REC_BATCH];
    if (H5Dset_extent(r->raw, dims) < 0)
        return 0;
    for (unsigned i = 0; i < k; i++) {
        hsize_t off[4] = {n + i}, size = 0;
        addr[i] = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(r->raw, off, NULL, &addr[i], &size) < 0)
            return 0;
        if (addr[i] == HADDR_UNDEF || size != r->frame_bytes || addr[i] % REC_DIRECT_ALIGN) {
            char why[96];
            snprintf(why, sizeof why, "chunk %" PRIu64 " at %#llx, %llu bytes: not aligned", n + i,
                     (unsigned long long)addr[i], (unsigned long long)size);
            direct_off(r, why);
            return 0;
        }
    }
    for (unsigned i = 0; i < k;) {
        unsigned j = i + 1;
        while (j < k && addr[j] == addr[j - 1] + r->frame_bytes)
            j++;
        struct iovec iov[REC_BATCH];
        for (unsigned x = i; x < j; x++)
            iov[x - i] = (struct iovec){e[x]->raw, r->frame_bytes};
        size_t done = pwritev_all(r->direct_fd, iov, (int)(j - i), (off_t)addr[i]);
        if (done < (size_t)(j - i) * r->frame_bytes) {
            if (errno == EINVAL && i == 0 && done == 0) /* the file system refuses after all */
                direct_off(r, strerror(errno));
            return i + (unsigned)(done / r->frame_bytes);
        }
        i = j;
    }
    return k;
}

/* Starts the writeback of the last window of buffered bytes, waits for the
 * one before and drops it from the page cache: the writer thread does the
 * kernel's writeback at its own (low) priority and dirty pages stay under
 * two windows.  Errors show at the fsync before the rename. */
static void bound_dirty_pages(octd_rec *r)
{
    struct stat st;
    if (r->vfd < 0 || fstat(r->vfd, &st) != 0 || st.st_size - r->wb_start < REC_WB_WINDOW)
        return;
    off_t end = st.st_size;
    sync_file_range(r->vfd, r->wb_start, end - r->wb_start, SYNC_FILE_RANGE_WRITE);
    if (r->wb_prev_len) {
        sync_file_range(r->vfd, r->wb_prev_off, r->wb_prev_len,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(r->vfd, r->wb_prev_off, r->wb_prev_len, POSIX_FADV_DONTNEED);
    }
    r->wb_prev_off = r->wb_start;
    r->wb_prev_len = end - r->wb_start;
    r->wb_start = end;
}

/* Row n of everything; raw_done: /raw's row is already written. */
static bool write_entry(octd_rec *r, const rec_entry *e, uint64_t n, bool raw_done)
{
    uint32_t shape[3] = {r->geom.lines, r->geom.ascans, r->geom.samples};
    if (r->want_raw && !raw_done &&
        h5_append_chunk(r->raw, 3, shape, n, e->raw, r->frame_bytes) < 0)
        return false;
    if (r->want_prod) {
        if (n == 0 && !create_product_datasets(r))
            return false;
        for (int i = 0; i < r->ntopics; i++) {
            const rec_topic *t = &r->topics[i];
            if (h5_append_chunk(t->dset, t->ndim, t->shape, n, e->prod + t->offset, t->bytes) < 0)
                return false;
        }
    }
    if (h5_append_1d(r->fid, H5T_NATIVE_UINT64, n, &e->frame_id) < 0 ||
        h5_append_1d(r->tacq, H5T_NATIVE_UINT64, n, &e->t_acq_ns) < 0)
        return false;
    if (e->gen != r->last_gen) {
        r->last_gen = e->gen;
        if (!write_control_change(r, e, n))
            return false;
    }
    return true;
}

static bool dir_removed(const octd_rec *r)
{
    struct stat st;
    return fstat(r->dirfd, &st) != 0 || st.st_nlink == 0;
}

/* Cuts every dataset to the frames completely written, writes the closing
 * attributes, closes and renames the file into place. */
static void finalize(octd_rec *r)
{
    uint64_t n = LOAD64(r->written);
    /* the reserve goes first: its space is what HDF5's metadata needs */
    unlinkat(r->dirfd, r->reserve, 0);
    bool cut = true;
    if (LOADB(r->failed)) {
        cut = h5_cut(r->raw, n) & h5_cut(r->fid, n) & h5_cut(r->tacq, n);
        for (int i = 0; i < r->ntopics; i++)
            cut &= h5_cut(r->topics[i].dset, n);
    }
    pthread_mutex_lock(&r->mu);
    char reason[256];
    snprintf(reason, sizeof reason, "%s%s", r->message[0] ? r->message : "completed",
             cut ? "" : " (datasets not cut back: rows past the attribute frames are empty)");
    pthread_mutex_unlock(&r->mu);
    h5_attr_u64(r->file, "frames", n);
    h5_attr_u64(r->file, "dropped", LOAD64(r->dropped));
    h5_attr_text(r->file, "stop_reason", reason);
    h5_attr_text(r->file, "record_io", r->io_mode);
    if (r->direct_fd >= 0)
        close(r->direct_fd);
    r->direct_fd = -1;
    hid_t ids[] = {r->raw, r->fid, r->tacq, r->cc_index, r->cc_fid, r->cc_gen, r->cc_values};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i] >= 0)
            H5Dclose(ids[i]);
    for (int i = 0; i < r->ntopics; i++)
        if (r->topics[i].dset >= 0)
            H5Dclose(r->topics[i].dset);
    errno = 0;
    herr_t rc = H5Fclose(r->file);
    r->file = -1;
    if (rc < 0) {
        char why[100];
        h5_reason(why, sizeof why, errno);
        set_failed(r, "closing %s: %s", r->part, why);
        unlinkat(r->dirfd, r->part, 0);
        return;
    }
    /* on the disk before it gets its final name (a crash then leaves the
     * .part or the complete file, never a renamed file with lost data) */
    int fd = openat(r->dirfd, r->part, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        set_failed(r, "%s: %s", dir_removed(r) ? "save directory removed" : "syncing the file",
                   strerror(err));
        unlinkat(r->dirfd, r->part, 0);
        return;
    }
    close(fd);
    if (renameat(r->dirfd, r->part, r->dirfd, r->name) != 0) {
        int err = errno;
        set_failed(r, "%s: %s", dir_removed(r) ? "save directory removed" : "renaming the file",
                   strerror(err));
        unlinkat(r->dirfd, r->part, 0);
        return;
    }
    fsync(r->dirfd);
}

/* The prefault helper: touches the raw buffers from the first up until all
 * are ready or the recording stops. */
static void *prep_main(void *arg)
{
    octd_rec *r = arg;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), REC_WRITER_NICE);
    for (unsigned i = 0; i < r->cap && !LOADB(r->stop_req) && !LOADB(r->failed); i++) {
        memset(r->q[i].raw, 0, r->frame_bytes);
        __atomic_store_n(&r->slot_state[i], REC_SLOT_READY, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *writer_main(void *arg)
{
    octd_rec *r = arg;
    uint64_t last_dir_check = 0;
    /* this thread only (Linux nice is per thread): the frame loop, the
     * producer and the publisher come first; the queue absorbs the delay */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), REC_WRITER_NICE);
    for (;;) {
        bool stop = LOADB(r->stop_req);
        uint64_t avail = LOAD64(r->tail) - r->head;
        if (!avail && !stop) {
            /* the posts of entries already taken go first, then look again,
             * then sleep (200 ms at most: the directory is looked at) */
            while (sem_trywait(&r->wake) == 0)
                ;
            stop = LOADB(r->stop_req);
            avail = LOAD64(r->tail) - r->head;
            if (!avail && !stop) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 200000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                while (sem_timedwait(&r->wake, &ts) != 0 && errno == EINTR)
                    ;
                stop = LOADB(r->stop_req);
                avail = LOAD64(r->tail) - r->head;
            }
        }
        bool have = avail > 0;
        /* the entries from head on are this thread's until head moves; a
         * batch ends before a skipped one, which is passed over alone */
        unsigned k = 0;
        rec_entry *batch[REC_BATCH];
        while (k < avail && k < REC_BATCH && !r->q[(r->head + k) % r->cap].skip) {
            batch[k] = &r->q[(r->head + k) % r->cap];
            k++;
        }
        if (have && k == 0) {
            __atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
            continue;
        }
        uint64_t now = oct_time_monotonic_ns();
        if (now - last_dir_check > 500000000ull) {
            last_dir_check = now;
            if (dir_removed(r)) {
                set_failed(r, "save directory %s was removed", r->dir);
                break;
            }
        }
        if (!have) {
            if (stop)
                break;
            continue;
        }
        uint64_t n = LOAD64(r->written);
        errno = 0;
        /* direct: the batch's raw frames first, then the rest row by row
         * (a frame counts as written once all its rows are) */
        unsigned raw_done = 0, m = k;
        int raw_err = 0;
        if (r->want_raw && r->direct_fd >= 0) {
            raw_done = append_raw_direct(r, batch, k, n);
            raw_err = errno;
            if (raw_done < k && r->direct_fd >= 0)
                m = raw_done; /* failed: what was written, then the reason */
        }
        bool ok = true;
        for (unsigned i = 0; i < m && ok; i++) {
            errno = 0;
            ok = write_entry(r, batch[i], n + i, i < raw_done);
            if (!ok)
                raw_err = errno;
            else {
                bound_dirty_pages(r);
                __atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
                ADD64(r->written, 1);
            }
        }
        if (!ok || m < k) {
            char why[100];
            h5_reason(why, sizeof why, raw_err);
            set_failed(r, "frame %" PRIu64 " not written: %s", LOAD64(r->written), why);
            break;
        }
    }
    /* frames accepted but not written (after a failure) are left out: the
     * frame loop counts them when it joins this thread (it may add more) */
    finalize(r);
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0)
        r->writer_cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                          (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    SETB(r->finished);
    return NULL;
}

/* ---------------- main thread ---------------- */
static void rec_free(octd_rec *r)
{
    if (!r)
        return;
    if (r->direct_fd >= 0)
        close(r->direct_fd);
    if (r->file >= 0) { /* a start that failed before the writer ran */
        hid_t ids[] = {r->raw, r->fid, r->tacq};
        for (size_t i = 0; i < 3; i++)
            if (ids[i] >= 0)
                H5Dclose(ids[i]);
        H5Fclose(r->file);
        unlinkat(r->dirfd, r->part, 0);
    }
    if (r->dirfd >= 0) {
        unlinkat(r->dirfd, r->reserve, 0);
        close(r->dirfd);
    }
    if (r->q)
        for (unsigned i = 0; i < r->cap; i++) {
            free(r->q[i].prod);
        }
    free(r->q);
    free(r->raw_store);
    free(r->slot_state);
    pthread_mutex_destroy(&r->mu);
    sem_destroy(&r->wake);
    free(r);
}

static void status_text(octd *d, char *field, size_t len, const char *text)
{
    oct_status_begin(d->st);
    size_t n = strnlen(text, len - 1);
    memcpy(field, text, n);
    memset(field + n, 0, len - n);
    oct_status_end(d->st);
}

static char *read_text(const char *path)
{
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f)
        return NULL;
    char *buf = malloc(REC_PROFILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, REC_PROFILE_MAX, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Creates the file aside, its fixed datasets and start attributes, the
 * space reserve and the queue.  The message says what failed. */
static octd_rec *rec_start(octd *d, uint32_t flags, uint64_t frames, double seconds, char *msg,
                           size_t msg_len)
{
    octd_rec *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(msg, msg_len, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    sem_init(&r->wake, 0, 0);
    r->dirfd = r->direct_fd = r->vfd = -1;
    r->file = r->raw = r->fid = r->tacq = -1;
    r->cc_index = r->cc_fid = r->cc_gen = r->cc_values = -1;
    snprintf(r->dir, sizeof r->dir, "%s", d->cfg.save_dir);
    r->geom = d->ring_geom;
    r->frame_bytes = oct_geometry_frame_bytes(&r->geom);
    r->want_raw = (flags & OCT_RECORD_RAW) || flags == 0;
    r->want_prod = (flags & OCT_RECORD_PRODUCTS) != 0;
    r->max_frames = frames;
    r->max_seconds = seconds;
    r->start_mono = oct_time_monotonic_ns();
    r->last_gen = d->applied_gen;

    r->dirfd = open(r->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->dirfd < 0) {
        snprintf(msg, msg_len, "save directory %s: %s", r->dir, strerror(errno));
        goto fail;
    }
    uint64_t now = oct_time_realtime_ns();
    time_t t = (time_t)(now / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    char stamp[40];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
    snprintf(r->name, sizeof r->name, "rec_%s.%03uZ.h5", stamp, (unsigned)(now / 1000000ull % 1000));
    for (int i = 1; faccessat(r->dirfd, r->name, F_OK, 0) == 0 && i < 100; i++)
        snprintf(r->name, sizeof r->name, "rec_%s.%03uZ-%d.h5", stamp,
                 (unsigned)(now / 1000000ull % 1000), i);
    snprintf(r->part, sizeof r->part, ".%s.part", r->name);
    snprintf(r->reserve, sizeof r->reserve, ".%s.reserve", r->name);
    snprintf(r->final_path, sizeof r->final_path, "%s/%s", r->dir, r->name);

    int rfd = openat(r->dirfd, r->reserve, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int err = rfd < 0 ? errno : posix_fallocate(rfd, 0, (off_t)REC_RESERVE_BYTES);
    if (rfd >= 0)
        close(rfd);
    if (err) {
        snprintf(msg, msg_len, "save directory %s: space reserve of %llu MiB: %s", r->dir,
                 REC_RESERVE_BYTES >> 20, strerror(err));
        goto fail;
    }

    /* queue: as many frames as fit the budget, within [MIN, MAX] */
    uint64_t per = r->want_raw ? r->frame_bytes : 1;
    uint64_t cap = REC_BUDGET_BYTES / (per ? per : 1);
    r->cap = (unsigned)(cap < REC_ENTRIES_MIN ? REC_ENTRIES_MIN : cap > REC_ENTRIES_MAX ? REC_ENTRIES_MAX : cap);
    r->q = calloc(r->cap, sizeof *r->q);
    if (!r->q)
        goto oom;
    if (r->want_raw) {
        /* one block in transparent huge pages where the kernel gives them:
         * O_DIRECT pins 1 page per 2 MiB instead of 512 (the writer's CPU
         * time per frame is mostly that pinning) and the frame loop's copy
         * has fewer TLB misses; entries 4 KiB aligned for O_DIRECT */
        size_t stride = (r->frame_bytes + REC_DIRECT_ALIGN - 1) & ~(size_t)(REC_DIRECT_ALIGN - 1);
        size_t bytes = ((stride * r->cap) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
        if (posix_memalign((void **)&r->raw_store, 2u << 20, bytes) != 0)
            goto oom;
        madvise(r->raw_store, bytes, MADV_HUGEPAGE); /* a hint: fine if refused */
        /* touched by a helper thread, not here: 256 MiB of fresh pages took
         * 0.7-3.5 s on this project's VM, a stall of the frame loop */
        if (d->cfg.prefault && !(r->slot_state = calloc(r->cap, 1)))
            goto oom;
        for (unsigned i = 0; i < r->cap; i++)
            r->q[i].raw = r->raw_store + (size_t)i * stride;
    }

    char path[OCT_PATH_MAX + 200];
    snprintf(path, sizeof path, "/proc/self/fd/%d/%s", r->dirfd, r->part);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported by us, once */
    errno = 0;
    /* 1.10 format: extendible datasets get the extensible-array chunk
     * index, which can be cut back after a failed chunk write (the v1
     * B-tree of the 1.8 format cannot: "key not found") */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    /* O_DIRECT needs every raw chunk at an aligned address */
    const char *no_direct = !r->want_raw ? "no raw frames"
                            : r->frame_bytes % REC_DIRECT_ALIGN
                                ? "the frame size is not a multiple of 4096 bytes"
                            : d->cfg.record_io == OCT_RECORD_IO_BUFFERED ? "[save] record_io = buffered"
                                                                        : NULL;
    if (!no_direct)
        H5Pset_alignment(fapl, REC_DIRECT_ALIGN, REC_DIRECT_ALIGN);
    r->file = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (r->file < 0) {
        char why[100];
        h5_reason(why, sizeof why, errno);
        snprintf(msg, msg_len, "creating %s/%s: %s", r->dir, r->part, why);
        goto fail;
    }
    char no_direct_why[128];
    if (!no_direct) {
        r->direct_fd = openat(r->dirfd, r->part, O_WRONLY | O_DIRECT | O_CLOEXEC);
        if (r->direct_fd < 0) {
            snprintf(no_direct_why, sizeof no_direct_why,
                     "the save directory's file system refuses O_DIRECT (%s)", strerror(errno));
            no_direct = no_direct_why;
        }
    }
    if (no_direct && r->want_raw && d->cfg.record_io == OCT_RECORD_IO_DIRECT) {
        snprintf(msg, msg_len, "[save] record_io = direct: %s", no_direct);
        goto fail;
    }
    if (no_direct) {
        snprintf(r->io_mode, sizeof r->io_mode, "buffered (%s)", no_direct);
        if (d->cfg.record_io == OCT_RECORD_IO_AUTO && r->want_raw)
            octd_log(LOG_WARNING, "recording %s: raw frames buffered: %s", r->final_path,
                     no_direct);
    } else {
        snprintf(r->io_mode, sizeof r->io_mode, "direct");
    }
    int *vfd = NULL;
    if (H5Fget_vfd_handle(r->file, H5P_DEFAULT, (void **)&vfd) >= 0 && vfd)
        r->vfd = *vfd;
    static const uint32_t none[1] = {0};
    uint32_t shape[3] = {r->geom.lines, r->geom.ascans, r->geom.samples};
    if (r->want_raw)
        r->raw = h5_dataset(r->file, "/raw", sample_h5_type(r->geom.sample_type), 3, shape,
                            r->direct_fd >= 0 ? 0 : 1);
    r->fid = h5_dataset(r->file, "/frame_id", H5T_STD_U64LE, 0, none, 1024);
    r->tacq = h5_dataset(r->file, "/t_acq_ns", H5T_STD_U64LE, 0, none, 1024);
    if ((r->want_raw && r->raw < 0) || r->fid < 0 || r->tacq < 0) {
        char why[100];
        h5_reason(why, sizeof why, errno);
        snprintf(msg, msg_len, "creating datasets in %s: %s", r->part, why);
        goto fail;
    }
    char text[512];
    snprintf(text, sizeof text,
             "{samples: %u, ascans: %u, lines: %u, sample_type: %s, sample_shift: %u}",
             r->geom.samples, r->geom.ascans, r->geom.lines, oct_sample_name(r->geom.sample_type),
             r->geom.sample_shift);
    h5_attr_text(r->file, "geometry", text);
    char *prof = read_text(d->prof.source_path);
    h5_attr_text(r->file, "profile", prof ? prof : "");
    free(prof);
    char *ctl = malloc(16384);
    if (ctl) {
        oct_control_format_all(&d->values, ctl, 16384);
        h5_attr_text(r->file, "control", ctl);
        free(ctl);
    }
    h5_attr_text(r->file, "octd_version", OCT_VERSION);
    h5_attr_u64(r->file, "control_generation", d->applied_gen);
    snprintf(text, sizeof text, "%s.%03uZ", stamp, (unsigned)(now / 1000000ull % 1000));
    h5_attr_text(r->file, "start_utc", text);
    /* background threads: never the frame loop's SCHED_FIFO ([engine] priority) */
    if (octd_thread_start_normal(&r->thread, writer_main, r) != 0) {
        snprintf(msg, msg_len, "cannot start the writer thread");
        goto fail;
    }
    r->thread_started = true;
    pthread_setname_np(r->thread, "octd-record"); /* top -H; tests find it by name */
    if (r->slot_state) {
        if (octd_thread_start_normal(&r->prep_thread, prep_main, r) == 0) {
            r->prep_started = true;
            pthread_setname_np(r->prep_thread, "octd-rec-prep");
        } else { /* no helper: the frame loop touches them all */
            free(r->slot_state);
            r->slot_state = NULL;
        }
    }
    return r;
oom:
    snprintf(msg, msg_len, "out of memory for %u frame buffers of %zu bytes", r->cap,
             r->frame_bytes);
fail:
    rec_free(r);
    return NULL;
}

static void request_stop(octd_rec *r, const char *why)
{
    r->closing = true;
    pthread_mutex_lock(&r->mu);
    if (why && !r->message[0])
        snprintf(r->message, sizeof r->message, "%s", why);
    pthread_mutex_unlock(&r->mu);
    SETB(r->stop_req);
    sem_post(&r->wake);
}

uint32_t octd_record_command(octd *d, uint32_t cmd, const oct_control_values *a, char *msg,
                             size_t msg_len)
{
    octd_rec *r = d->rec;
    if (cmd == OCT_CMD_RECORD_STOP) {
        if (!r || r->closing) {
            snprintf(msg, msg_len, "no recording in progress");
            return OCT_CMDRES_REFUSED;
        }
        request_stop(r, "stopped by record_stop");
        snprintf(msg, msg_len, "stopping %s after %" PRIu64 " frames", r->final_path, r->accepted);
        return OCT_CMDRES_OK;
    }
    if (r) {
        snprintf(msg, msg_len, "a recording is in progress (%s): record_stop first", r->final_path);
        return OCT_CMDRES_REFUSED;
    }
    if (d->mode != OCT_STATE_ONLINE) {
        snprintf(msg, msg_len, "record is only allowed online (octctl online first)");
        return OCT_CMDRES_REFUSED;
    }
    if (a->cmd_flags & ~(OCT_RECORD_RAW | OCT_RECORD_PRODUCTS)) {
        snprintf(msg, msg_len, "record: flags 0x%x: only raw (1) and products (2)", a->cmd_flags);
        return OCT_CMDRES_REFUSED;
    }
    if (!isfinite(a->cmd_seconds) || a->cmd_seconds < 0) {
        snprintf(msg, msg_len, "record: seconds = %g: must be >= 0 (0 = no limit)", a->cmd_seconds);
        return OCT_CMDRES_REFUSED;
    }
    if (!d->cfg.save_dir[0]) {
        snprintf(msg, msg_len, "no save directory configured ([save] directory in octd.ini)");
        return OCT_CMDRES_REFUSED;
    }
    if (!d->ring) {
        snprintf(msg, msg_len, "no frame ring attached yet: nothing to record");
        return OCT_CMDRES_REFUSED;
    }
    r = rec_start(d, a->cmd_flags, a->cmd_frames, a->cmd_seconds, msg, msg_len);
    if (!r) {
        __atomic_store_n(&d->sb->record_state, (uint32_t)OCT_RECORD_FAILED, __ATOMIC_RELEASE);
        status_text(d, d->sb->record_message, sizeof d->sb->record_message, msg);
        return OCT_CMDRES_FAILED;
    }
    d->rec = r;
    __atomic_store_n(&d->sb->record_frames, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&d->sb->record_dropped, 0, __ATOMIC_RELEASE);
    status_text(d, d->sb->record_file, sizeof d->sb->record_file, r->final_path);
    status_text(d, d->sb->record_message, sizeof d->sb->record_message, "");
    __atomic_store_n(&d->sb->record_state, (uint32_t)OCT_RECORD_ACTIVE, __ATOMIC_RELEASE);
    snprintf(msg, msg_len, "recording to %s", r->final_path);
    return OCT_CMDRES_OK;
}

/* The products to record, from the first frame. */
static bool set_layout(octd_rec *r, const oct_products *p)
{
    size_t off = 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *img = &p->img[m][k];
            if (!img->present)
                continue;
            for (int f = 0; f < 2; f++) {
                if (f && !img->f32)
                    continue;
                if (r->ntopics == REC_TOPICS_MAX)
                    return false;
                rec_topic *t = &r->topics[r->ntopics++];
                t->method = m;
                t->kind = k;
                t->f32 = f;
                t->dset = -1;
                snprintf(t->topic, sizeof t->topic, "%s/%s%s", oct_kind_name(k), oct_product_method_name(m, k),
                         f ? "/f32" : "");
                snprintf(t->path, sizeof t->path, "/products/%s/%s%s", oct_kind_name(k),
                         oct_product_method_name(m, k), f ? "_f32" : "");
                t->ndim = img->ndim;
                memcpy(t->shape, img->shape, sizeof t->shape);
                t->bytes = img->count * (f ? sizeof(float) : 1);
                t->offset = off;
                off += (t->bytes + 63) & ~(size_t)63;
                t->n_indices = img->n_indices < 64 ? img->n_indices : 64;
                if (img->indices)
                    memcpy(t->indices, img->indices, t->n_indices * sizeof(int32_t));
            }
        }
    r->prod_bytes = off;
    for (unsigned i = 0; i < r->cap; i++)
        if (!(r->q[i].prod = malloc(off ? off : 1)))
            return false;
    r->layout_set = true;
    return true;
}

/* The topic whose shape differs from the recording's, or NULL. */
static const char *layout_change(const octd_rec *r, const oct_products *p)
{
    int n = 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *img = &p->img[m][k];
            if (img->present)
                n += img->f32 ? 2 : 1;
        }
    if (n != r->ntopics)
        return "the set of products";
    for (int i = 0; i < r->ntopics; i++) {
        const rec_topic *t = &r->topics[i];
        const oct_image *img = &p->img[t->method][t->kind];
        if (!img->present || (t->f32 && !img->f32) || img->ndim != t->ndim ||
            memcmp(img->shape, t->shape, sizeof t->shape) != 0)
            return t->topic;
    }
    return NULL;
}

void octd_record_take(octd *d, const oct_geometry *geom, const oct_frame_info *info,
                      const void *data)
{
    octd_rec *r = d->rec;
    if (!r || r->closing)
        return;
    if (memcmp(geom, &r->geom, sizeof r->geom) != 0) {
        request_stop(r, "the ring's geometry changed: recording ended");
        return;
    }
    if (LOADB(r->failed)) { /* the recording has ended: nothing more is offered */
        r->closing = true;
        return;
    }
    if (!data || r->resv - LOAD64(r->head) == r->cap) { /* octd behind, or the queue full */
        ADD64(r->dropped, 1);
        if (data)
            r->out_full++;
        else
            r->out_behind++;
        return;
    }
    /* the entry at resv belongs to this thread until tail passes it */
    uint64_t t0 = oct_time_monotonic_ns();
    unsigned slot = (unsigned)(r->resv % r->cap);
    rec_entry *e = &r->q[slot];
    if (r->slot_state && r->want_raw &&
        __atomic_load_n(&r->slot_state[slot], __ATOMIC_ACQUIRE) != REC_SLOT_READY) {
        ADD64(r->dropped, 1); /* the helper has not touched its buffer yet */
        r->out_unready++;
        return;
    }
    if (r->want_raw)
        memcpy(e->raw, data, r->frame_bytes);
    e->seq = info->seq;
    e->skip = false;
    e->frame_id = info->frame_id;
    e->t_acq_ns = info->t_acq_ns;
    r->resv++;
    r->loop_ns += oct_time_monotonic_ns() - t0;
}

void octd_record_frame(octd *d, const oct_frame_info *info, const oct_products *prod)
{
    octd_rec *r = d->rec;
    if (!r || r->closing)
        return;
    if (r->want_prod) {
        if (!r->layout_set && !set_layout(r, prod)) {
            request_stop(r, "out of memory for the products' buffers");
            return;
        }
        const char *changed = layout_change(r, prod);
        if (changed) {
            char why[128];
            snprintf(why, sizeof why, "%s changed shape during the recording: recording ended",
                     changed);
            request_stop(r, why);
            return;
        }
    }
    uint64_t t0 = oct_time_monotonic_ns();
    /* frames are published in the order they were taken: reserved entries
     * before this frame's are frames that were never published */
    while (r->tail < r->resv) {
        rec_entry *e = &r->q[r->tail % r->cap];
        if (e->seq > info->seq)
            return; /* this frame found the queue full: counted then */
        bool mine = e->seq == info->seq;
        e->skip = !mine;
        if (mine && r->want_prod)
            for (int i = 0; i < r->ntopics; i++) {
                const rec_topic *t = &r->topics[i];
                const oct_image *img = &prod->img[t->method][t->kind];
                memcpy(e->prod + t->offset, t->f32 ? (const void *)img->f32 : img->u8, t->bytes);
            }
        e->gen = d->applied_gen;
        e->values = d->values;
        __atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);
        sem_post(&r->wake); /* never blocks */
        if (!mine)
            continue;
        r->accepted++;
        r->loop_ns += oct_time_monotonic_ns() - t0;
        if (r->max_frames && r->accepted >= r->max_frames)
            request_stop(r, "frame count reached");
        return;
    }
}

static void join_finished(octd *d, bool wait)
{
    octd_rec *r = d->rec;
    if (!LOADB(r->finished) && !wait)
        return;
    pthread_join(r->thread, NULL);
    r->thread_started = false;
    for (; r->head < r->tail; r->head++) /* accepted, never written (a failure) */
        ADD64(r->dropped, !r->q[r->head % r->cap].skip);
    if (r->prep_started)
        pthread_join(r->prep_thread, NULL); /* ends at stop_req */
    r->prep_started = false;
    oct_status_block *b = d->sb;
    __atomic_store_n(&b->record_frames, LOAD64(r->written), __ATOMIC_RELEASE);
    __atomic_store_n(&b->record_dropped, LOAD64(r->dropped), __ATOMIC_RELEASE);
    status_text(d, b->record_message, sizeof b->record_message, r->message);
    bool failed = LOADB(r->failed);
    __atomic_store_n(&b->record_state, (uint32_t)(failed ? OCT_RECORD_FAILED : OCT_RECORD_DONE),
                     __ATOMIC_RELEASE);
    uint64_t n = LOAD64(r->written);
    octd_log(failed ? LOG_ERR : LOG_INFO,
             "recording %s: %" PRIu64 " frames, %" PRIu64 " left out: %s; %s, writer CPU "
             "%.3f s (%.0f us per frame), frame loop %.0f us per frame taken; left out by the "
             "frame loop: %" PRIu64 " with the queue full (the disk behind), %" PRIu64
             " before their buffer was touched, %" PRIu64 " while octd caught up with the ring",
             r->final_path, n, LOAD64(r->dropped), r->message, r->io_mode, r->writer_cpu_s,
             n ? 1e6 * r->writer_cpu_s / (double)n : 0.0,
             r->accepted ? 1e-3 * (double)r->loop_ns / (double)r->accepted : 0.0, r->out_full,
             r->out_unready, r->out_behind);
    rec_free(r);
    d->rec = NULL;
}

void octd_record_poll(octd *d)
{
    octd_rec *r = d->rec;
    if (!r)
        return;
    if (!r->closing && r->max_seconds > 0 &&
        (double)(oct_time_monotonic_ns() - r->start_mono) * 1e-9 >= r->max_seconds)
        request_stop(r, "duration reached");
    if (LOADB(r->failed))
        r->closing = true;
    __atomic_store_n(&d->sb->record_frames, LOAD64(r->written), __ATOMIC_RELEASE);
    __atomic_store_n(&d->sb->record_dropped, LOAD64(r->dropped), __ATOMIC_RELEASE);
    join_finished(d, false);
}

void octd_record_shutdown(octd *d)
{
    if (!d->rec)
        return;
    request_stop(d->rec, "octd stopped");
    join_finished(d, true);
}
