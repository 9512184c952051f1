/* record.c - see record.h. */
#include "record.h"

#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC_TOPICS 64

typedef struct rec_topic {
    char topic[128], path[160];
    int ndim;
    uint32_t shape[3];
    size_t bytes;
    bool f32;
    hid_t img, fid, seq, tacq;
    uint64_t rows;
} rec_topic;

struct grab_rec {
    char path[4096], part[4112];
    hid_t file;
    rec_topic t[REC_TOPICS];
    int nt;
    unsigned long long written, skipped;
};

static herr_t first_desc(unsigned n, const H5E_error2_t *e, void *arg)
{
    if (n == 0 && e->desc)
        snprintf(arg, 128, "%s", e->desc);
    return 0;
}

static void reason(char *err, size_t len, const char *what, int saved_errno)
{
    char inner[128] = "HDF5 error";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_desc, inner);
    snprintf(err, len, "%s: %s", what, saved_errno ? strerror(saved_errno) : inner);
}

static void attr_text(hid_t obj, const char *name, const char *text)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, t, &text);
        H5Aclose(a);
    }
    H5Sclose(sp);
    H5Tclose(t);
}

static hid_t dataset(hid_t f, const char *path, hid_t type, int ndim, const uint32_t *shape,
                     hsize_t chunk_rows)
{
    hsize_t dims[4] = {0}, maxd[4] = {H5S_UNLIMITED}, chunk[4] = {chunk_rows};
    for (int i = 0; i < ndim; i++)
        dims[i + 1] = maxd[i + 1] = chunk[i + 1] = shape[i];
    hid_t sp = H5Screate_simple(ndim + 1, dims, maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_chunk(dcpl, ndim + 1, chunk);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(f, path, type, sp, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return ds;
}

static herr_t append_u64(hid_t ds, uint64_t n, uint64_t v)
{
    hsize_t dims = n + 1, off = n, one = 1;
    if (H5Dset_extent(ds, &dims) < 0)
        return -1;
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(1, &one, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &one, NULL);
    herr_t rc = H5Dwrite(ds, H5T_NATIVE_UINT64, ms, fs, H5P_DEFAULT, &v);
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

grab_rec *grab_rec_open(const char *path, const char *endpoint, char *err, size_t err_len)
{
    grab_rec *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    size_t n = strlen(path);
    if (n < 4 || n >= sizeof r->path - 8 || strcmp(path + n - 3, ".h5") != 0) {
        snprintf(err, err_len, "--record %s: the file name must end in .h5", path);
        free(r);
        return NULL;
    }
    if (access(path, F_OK) == 0) {
        snprintf(err, err_len, "--record %s: the file exists (not overwritten)", path);
        free(r);
        return NULL;
    }
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->part, sizeof r->part, "%s.part", path);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    errno = 0;
    r->file = H5Fcreate(r->part, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (r->file < 0) {
        char what[4200];
        snprintf(what, sizeof what, "--record: creating %s", r->part);
        reason(err, err_len, what, errno);
        free(r);
        return NULL;
    }
    attr_text(r->file, "source", "octgrab");
    attr_text(r->file, "endpoint", endpoint);
    attr_text(r->file, "octd_version", OCT_VERSION);
    return r;
}

static rec_topic *topic_of(grab_rec *r, const grab_header *h, bool *new_topic)
{
    *new_topic = false;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].topic, h->topic))
            return &r->t[i];
    if (r->nt == REC_TOPICS)
        return NULL;
    rec_topic *t = &r->t[r->nt++];
    memset(t, 0, sizeof *t);
    snprintf(t->topic, sizeof t->topic, "%s", h->topic);
    /* kind/method[/f32] -> kind/method[_f32] (a dataset cannot be a group too) */
    char name[128];
    snprintf(name, sizeof name, "%s", h->topic);
    char *f = strstr(name, "/f32");
    if (f && f[4] == '\0')
        f[0] = '_';
    snprintf(t->path, sizeof t->path, "%s", name);
    t->f32 = !strcmp(h->dtype, "f32");
    t->ndim = h->ndim;
    memcpy(t->shape, h->shape, sizeof t->shape);
    t->bytes = t->f32 ? 4 : 1;
    for (int i = 0; i < h->ndim; i++)
        t->bytes *= h->shape[i];
    *new_topic = true;
    return t;
}

bool grab_rec_add(grab_rec *r, const grab_header *h, const void *data, char *err, size_t err_len)
{
    bool fresh;
    rec_topic *t = topic_of(r, h, &fresh);
    if (!t) {
        r->skipped++;
        return true;
    }
    if (!fresh && (t->ndim != h->ndim || memcmp(t->shape, h->shape, sizeof t->shape) != 0 ||
                   t->f32 != !strcmp(h->dtype, "f32"))) {
        r->skipped++;
        return true;
    }
    errno = 0;
    if (fresh) {
        char p[256];
        static const uint32_t none[1] = {0};
        snprintf(p, sizeof p, "/products/%s", t->path);
        t->img = dataset(r->file, p, t->f32 ? H5T_IEEE_F32LE : H5T_STD_U8LE, t->ndim, t->shape, 1);
        if (t->img >= 0)
            attr_text(t->img, "topic", t->topic);
        snprintf(p, sizeof p, "/index/%s/frame_id", t->path);
        t->fid = dataset(r->file, p, H5T_STD_U64LE, 0, none, 1024);
        snprintf(p, sizeof p, "/index/%s/image_seq", t->path);
        t->seq = dataset(r->file, p, H5T_STD_U64LE, 0, none, 1024);
        snprintf(p, sizeof p, "/index/%s/t_acq_ns", t->path);
        t->tacq = dataset(r->file, p, H5T_STD_U64LE, 0, none, 1024);
        if (t->img < 0 || t->fid < 0 || t->seq < 0 || t->tacq < 0) {
            reason(err, err_len, "--record: creating datasets", errno);
            return false;
        }
    }
    hsize_t dims[4] = {t->rows + 1}, off[4] = {t->rows};
    for (int i = 0; i < t->ndim; i++)
        dims[i + 1] = t->shape[i];
    if (H5Dset_extent(t->img, dims) < 0 ||
        H5Dwrite_chunk(t->img, H5P_DEFAULT, 0, off, t->bytes, data) < 0 ||
        append_u64(t->fid, t->rows, h->frame_id) < 0 ||
        append_u64(t->seq, t->rows, h->image_seq) < 0 ||
        append_u64(t->tacq, t->rows, h->t_acq_ns) < 0) {
        reason(err, err_len, "--record: writing", errno);
        return false;
    }
    t->rows++;
    r->written++;
    return true;
}

void grab_rec_counts(const grab_rec *r, unsigned long long *written, unsigned long long *skipped)
{
    *written = r->written;
    *skipped = r->skipped;
}

bool grab_rec_close(grab_rec *r, char *err, size_t err_len)
{
    for (int i = 0; i < r->nt; i++) {
        hid_t ids[] = {r->t[i].img, r->t[i].fid, r->t[i].seq, r->t[i].tacq};
        for (int k = 0; k < 4; k++)
            if (ids[k] > 0)
                H5Dclose(ids[k]);
    }
    errno = 0;
    bool ok = H5Fclose(r->file) >= 0;
    if (!ok)
        reason(err, err_len, "--record: closing the file", errno);
    else if (rename(r->part, r->path) != 0) {
        snprintf(err, err_len, "--record: renaming %s: %s", r->part, strerror(errno));
        ok = false;
    }
    if (!ok)
        unlink(r->part);
    free(r);
    return ok;
}
