/* save.c - see save.h. */
#include "save.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "oct_control_keys.h"
#include "sys.h"

typedef struct sbuf {
    char *buf;
    size_t cap, len;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->len < s->cap ? s->buf + s->len : NULL, s->len < s->cap ? s->cap - s->len : 0,
                      fmt, ap);
    va_end(ap);
    if (n > 0)
        s->len += (size_t)n;
}

/* A YAML double-quoted scalar (paths may hold any character). */
static void sb_quoted(sbuf *s, const char *str)
{
    sb_printf(s, "\"");
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            sb_printf(s, "\\%c", *p);
        else if (*p < 0x20)
            sb_printf(s, "\\x%02x", *p);
        else
            sb_printf(s, "%c", *p);
    }
    sb_printf(s, "\"");
}

static void utc_text(uint64_t ns, char *buf, size_t len, bool compact)
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[32];
    strftime(base, sizeof base, compact ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03uZ", base, (unsigned)(ns / 1000000ull % 1000));
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

size_t octd_sidecar_yaml(const octd_saved_frame *f, const char *file_name, char *buf, size_t cap)
{
    sbuf s = {buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    const oct_control_values *v = f->values;
    char t_acq[40], t_now[40], val[128];
    utc_text(f->info.t_acq_ns, t_acq, sizeof t_acq, false);
    utc_text(now_ns(), t_now, sizeof t_now, false);
    sb_printf(&s, "# written by octd %s: a raw frame and the control values in use\n", OCT_VERSION);
    sb_printf(&s, "frame:\n  file: ");
    sb_quoted(&s, file_name);
    sb_printf(&s, "\n  frame_id: %" PRIu64 "\n  seq: %" PRIu64 "\n  epoch: %" PRIu64
                  "\n  t_acq_ns: %" PRIu64 "\n  acquired_utc: \"%s\"\n  saved_utc: \"%s\"\n"
                  "  control_generation: %" PRIu64 "\n",
              f->info.frame_id, f->info.seq, f->info.epoch, f->info.t_acq_ns, t_acq, t_now,
              f->params_gen);
    const char *st = oct_sample_name(f->geom.sample_type);
    sb_printf(&s, "geometry: {samples: %u, ascans: %u, lines: %u, sample_type: %s, "
                  "sample_shift: %u}\n",
              f->geom.samples, f->geom.ascans, f->geom.lines, st ? st : "?", f->geom.sample_shift);
    oct_control_key_get(v, "methods", val, sizeof val, NULL);
    sb_printf(&s, "methods: [%s]\n", val);
    oct_control_key_get(v, "window", val, sizeof val, NULL);
    char *colon = strchr(val, ':');
    if (colon)
        *colon = '\0';
    sb_printf(&s, "window: {type: %s, param: %.9g}\n", val, (double)v->window_param);
    sb_printf(&s, "freq_cutoff: %d\n", v->freq_cutoff);
    oct_control_key_get(v, "background", val, sizeof val, NULL);
    sb_printf(&s, "background:\n  mode: %s\n", val);
    if (f->profile && f->profile->reference_path[0]) {
        sb_printf(&s, "  reference: ");
        sb_quoted(&s, f->profile->reference_path);
        sb_printf(&s, "\n");
    }
    sb_printf(&s, "msi:\n");
    if (f->profile && f->profile->masks_path[0]) {
        const char *mt = oct_sample_name(f->profile->masks_type);
        sb_printf(&s, "  masks: {file: ");
        sb_quoted(&s, f->profile->masks_path);
        sb_printf(&s, ", sample_type: %s, count: %u, normalize: %s}\n", mt ? mt : "f32",
                  f->profile->masks_count, f->profile->masks_normalize ? "true" : "false");
    }
    sb_printf(&s, "  lag_window: [%d, %d]\n", v->msi_lag_lo, v->msi_lag_hi);
    sb_printf(&s, "enface: {start: %d, step: %d, count: %d}\n", v->enface_start, v->enface_step,
              v->enface_count);
    sb_printf(&s, "xsec: {h_index: %d, v_index: %d}\n", v->xsec_h_index, v->xsec_v_index);
    oct_control_key_get(v, "scale", val, sizeof val, NULL);
    sb_printf(&s, "scale: %s\ndisplay:\n", val);
    static const char *const cls[3] = {"bscan", "enface", "confocal"};
    for (int c = 0; c < 3; c++)
        sb_printf(&s, "  %s: {gsc: %.9g, contrast: %.9g, brightness: %.9g}\n", cls[c],
                  (double)v->gsc[c], (double)v->contrast[c], (double)v->brightness[c]);
    oct_control_key_get(v, "products", val, sizeof val, NULL);
    sb_printf(&s, "products: [%s]\n", val);
    return s.len;
}

/* Opens the save directory once per save: every later create, write,
 * rename and removal is relative to this fd, so an operator renaming or
 * removing the directory mid-save cannot redirect the save or strand a
 * temporary entry where octd can no longer reach it. */
static oct_err open_dir(const char *dir, int *dfd, oct_error *e)
{
    *dfd = -1;
    if (!dir || !dir[0])
        return oct_error_set(e, OCT_EINVAL, "no [save] directory is configured");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return oct_error_set(e, err == EACCES ? OCT_EPERM : OCT_EIO, "save directory %s: %s", dir,
                             err == ENOTDIR ? "not a directory" : strerror(err));
    }
    /* the effective ids decide what octd may create (a service user) */
    if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
        int err = errno;
        close(fd);
        return oct_error_set(e, err == EROFS ? OCT_EIO : OCT_EPERM, "save directory %s: %s", dir,
                             strerror(err));
    }
    *dfd = fd;
    return OCT_OK;
}

/* Prefixes an error about a file named relative to the save directory (or
 * to sub inside it) with the directory, as "DIR/[SUB/]msg": the daemon
 * strips "DIR/" for the 128-byte status text and logs the whole. */
static oct_err in_dir(oct_error *e, oct_err rc, const char *dir, const char *sub)
{
    if (e) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        oct_error_set(e, rc, "%s/%s%s%s", dir, sub ? sub : "", sub ? "/" : "", msg);
    }
    return rc;
}

/* True when name exists in dfd (not following a final symlink). */
static bool exists_at(int dfd, const char *name)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static oct_dtype sample_dtype(uint32_t t)
{
    switch (t) {
    case OCT_SAMPLE_U16: return OCT_DTYPE_U16;
    case OCT_SAMPLE_I16: return OCT_DTYPE_I16;
    case OCT_SAMPLE_F32: return OCT_DTYPE_F32;
    default: return OCT_DTYPE_NONE;
    }
}

/* Sidecars are a few KiB; 16 KiB leaves room for long paths. */
#define YAML_CAP 16384

oct_err octd_save_raw(const char *dir, const octd_saved_frame *f, char *name, size_t name_len,
                      oct_error *e)
{
    int dfd;
    oct_err rc = open_dir(dir, &dfd, e);
    if (rc != OCT_OK)
        return rc;
    char stamp[40], base[128], npy[160], yaml[160];
    utc_text(now_ns(), stamp, sizeof stamp, true);
    snprintf(base, sizeof base, "raw_%" PRIu64 "_%s", f->info.frame_id, stamp);
    snprintf(npy, sizeof npy, "%s.npy", base);
    snprintf(yaml, sizeof yaml, "%s.yaml", base);
    char *text = NULL;
    if (exists_at(dfd, npy) || exists_at(dfd, yaml)) {
        rc = oct_error_set(e, OCT_EIO, "%s/%s already exists", dir, npy);
        goto out;
    }
    oct_dtype dt = sample_dtype(f->geom.sample_type);
    uint64_t shape[3] = {f->geom.lines, f->geom.ascans, f->geom.samples};
    text = malloc(YAML_CAP);
    if (!text) {
        rc = oct_error_set(e, OCT_ENOMEM, "out of memory for the sidecar");
        goto out;
    }
    size_t len = octd_sidecar_yaml(f, npy, text, YAML_CAP);
    if (len >= YAML_CAP) {
        rc = oct_error_set(e, OCT_EINVAL, "sidecar longer than %d bytes", YAML_CAP);
        goto out;
    }
    /* The .npy first, then the sidecar; if the sidecar fails the .npy goes
     * too, so a pair is either complete or absent. */
    rc = oct_npy_save_at(dfd, npy, dt, 3, shape, f->data, e);
    if (rc == OCT_OK) {
        rc = oct_file_write_atomic_at(dfd, yaml, text, len, e);
        if (rc != OCT_OK)
            unlinkat(dfd, npy, 0);
    }
    if (rc != OCT_OK)
        in_dir(e, rc, dir, NULL);
out:
    free(text);
    close(dfd);
    if (rc == OCT_OK && name)
        snprintf(name, name_len, "%s", npy);
    return rc;
}

/* Removes our temporary directory name (in dfd) and its plain files,
 * through fds: it is found even if the save directory was renamed. */
static void remove_tree_at(int dfd, const char *name)
{
    int tfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd >= 0) {
        DIR *d = fdopendir(tfd); /* owns tfd from here */
        if (d) {
            struct dirent *de;
            /* unlinking while reading: restart until a pass removes nothing */
            bool again = true;
            while (again) {
                again = false;
                rewinddir(d);
                while ((de = readdir(d)))
                    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                        unlinkat(dirfd(d), de->d_name, 0) == 0)
                        again = true;
            }
            closedir(d);
        } else {
            close(tfd);
        }
    }
    unlinkat(dfd, name, AT_REMOVEDIR);
}

static oct_err write_image(int tfd, int method, int kind, const oct_image *img, bool want_f32,
                           oct_error *e)
{
    char path[128];
    const char *kn = oct_kind_name(kind), *mn = oct_product_method_name(method, kind);
    oct_err rc = OCT_OK;
    uint64_t shape[3] = {img->shape[0], img->shape[1], img->ndim > 2 ? img->shape[2] : 0};
    if (kind == OCT_KIND_VOLUME) {
        /* A volume has no natural single picture: its gray levels as .npy. */
        snprintf(path, sizeof path, "%s_%s_u8.npy", kn, mn);
        rc = oct_npy_save_at(tfd, path, OCT_DTYPE_U8, img->ndim, shape, img->u8, e);
    } else if (img->ndim == 3) {
        size_t plane = (size_t)img->shape[1] * img->shape[2];
        for (uint32_t q = 0; q < img->shape[0] && rc == OCT_OK; q++) {
            snprintf(path, sizeof path, "%s_%s_%u.png", kn, mn, q);
            rc = oct_png_save_gray_at(tfd, path, img->u8 + q * plane, img->shape[2], img->shape[1],
                                      e);
        }
    } else {
        snprintf(path, sizeof path, "%s_%s.png", kn, mn);
        rc = oct_png_save_gray_at(tfd, path, img->u8, img->shape[1], img->shape[0], e);
    }
    if (rc == OCT_OK && want_f32 && img->f32) {
        snprintf(path, sizeof path, "%s_%s.npy", kn, mn);
        rc = oct_npy_save_at(tfd, path, OCT_DTYPE_F32, img->ndim, shape, img->f32, e);
    }
    return rc;
}

/* rename without replacing: a directory rename would silently replace an
 * empty directory of the final name.  Falls back where the file system does
 * not know RENAME_NOREPLACE (checked for existence just before). */
static int rename_noreplace(int dfd, const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
#endif
    if (exists_at(dfd, to)) {
        errno = EEXIST;
        return -1;
    }
    return renameat(dfd, from, dfd, to);
}

oct_err octd_save_images(const char *dir, const octd_saved_frame *f, const oct_products *prod,
                         bool want_f32, char *name, size_t name_len, oct_error *e)
{
    int dfd;
    oct_err rc = open_dir(dir, &dfd, e);
    if (rc != OCT_OK)
        return rc;
    char stamp[40], base[128], tmp[192];
    utc_text(now_ns(), stamp, sizeof stamp, true);
    snprintf(base, sizeof base, "images_%" PRIu64 "_%s", f->info.frame_id, stamp);
    snprintf(tmp, sizeof tmp, ".%s.tmp%ld", base, (long)getpid());
    if (exists_at(dfd, base)) {
        rc = oct_error_set(e, OCT_EIO, "%s/%s already exists", dir, base);
        close(dfd);
        return rc;
    }
    if (mkdirat(dfd, tmp, 0770) != 0) {
        int err = errno;
        rc = oct_error_set(e, err == EACCES ? OCT_EPERM : OCT_EIO, "%s/%s: mkdir: %s", dir, tmp,
                           strerror(err));
        close(dfd);
        return rc;
    }
    int tfd = openat(dfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0)
        rc = oct_error_set(e, OCT_EIO, "%s/%s: open: %s", dir, tmp, strerror(errno));
    int images = 0;
    bool lib_err = false; /* e names a file inside the temporary directory */
    for (int m = 0; m < OCT_METHOD_COUNT && rc == OCT_OK; m++)
        for (int k = 0; k < OCT_KIND_COUNT && rc == OCT_OK; k++) {
            const oct_image *img = &prod->img[m][k];
            if (!img->present || !img->u8)
                continue;
            rc = write_image(tfd, m, k, img, want_f32, e);
            lib_err = rc != OCT_OK;
            images++;
        }
    if (rc == OCT_OK && images == 0)
        rc = oct_error_set(e, OCT_EINVAL, "no images to save (no product is switched on)");
    if (rc == OCT_OK) {
        char *text = malloc(YAML_CAP);
        if (!text) {
            rc = oct_error_set(e, OCT_ENOMEM, "out of memory for params.yaml");
        } else {
            size_t len = octd_sidecar_yaml(f, "", text, YAML_CAP);
            if (len >= YAML_CAP) {
                rc = oct_error_set(e, OCT_EINVAL, "params.yaml too long");
            } else {
                rc = oct_file_write_atomic_at(tfd, "params.yaml", text, len, e);
                lib_err = rc != OCT_OK;
            }
            free(text);
        }
    }
    if (rc == OCT_OK && fsync(tfd) != 0 && errno != EINVAL) /* EINVAL: cannot sync dirs */
        rc = oct_error_set(e, OCT_EIO, "%s/%s: fsync: %s", dir, tmp, strerror(errno));
    if (tfd >= 0)
        close(tfd);
    if (rc == OCT_OK && rename_noreplace(dfd, tmp, base) != 0)
        rc = oct_error_set(e, OCT_EIO, "%s/%s: rename from %s: %s", dir, base, tmp,
                           strerror(errno));
    if (rc != OCT_OK) {
        remove_tree_at(dfd, tmp);
        if (lib_err)
            in_dir(e, rc, dir, base);
        close(dfd);
        return rc;
    }
    /* The rename is durable only after this; the directory is complete
     * either way, so a failure here is only worth a warning. */
    if (fsync(dfd) != 0 && errno != EINVAL)
        octd_log(LOG_WARNING, "save directory %s: fsync: %s", dir, strerror(errno));
    close(dfd);
    if (name)
        snprintf(name, name_len, "%s", base);
    return OCT_OK;
}
