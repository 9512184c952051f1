/* files.c - atomic file writes and path resolution shared by every writer
 * (.npy, PNG, saved frames): a reader never sees a partial file. */
#include "config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Directory part of path ("" when it has none), for fsync after rename. */
static void dir_of(char *out, size_t out_len, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, out_len, ".");
    } else if (slash == path) {
        snprintf(out, out_len, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= out_len)
            n = out_len - 1;
        memcpy(out, path, n);
        out[n] = '\0';
    }
}

oct_err oct_file_write_atomic(const char *path, const void *data, size_t len, oct_error *e)
{
    return oct_file_write_atomic_at(AT_FDCWD, path, data, len, e);
}

/* Everything relative to dirfd (openat/renameat/unlinkat): a caller holding
 * its directory open is not affected by the directory being renamed. */
oct_err oct_file_write_atomic_at(int dirfd, const char *path, const void *data, size_t len,
                                 oct_error *e)
{
    if (!path || !*path)
        return oct_error_set(e, OCT_EINVAL, "atomic write: empty path");
    if (!data && len)
        return oct_error_set(e, OCT_EINVAL, "%s: atomic write: no data", path);
    char tmp[OCT_PATH_MAX + 32];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return oct_error_set(e, OCT_EINVAL, "%s: path too long", path);

    /* O_EXCL: never follow or clobber somebody else's file of that name */
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) {
        /* a left-over of an earlier crashed run of this same pid number */
        if (unlinkat(dirfd, tmp, 0) == 0)
            fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        int err = errno;
        return oct_error_set(e, err == EACCES || err == EROFS ? OCT_EPERM : OCT_EIO,
                             "%s: cannot create %s: %s", path, tmp, strerror(err));
    }
    const unsigned char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left > (size_t)1 << 30 ? (size_t)1 << 30 : left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            unlinkat(dirfd, tmp, 0);
            return oct_error_set(e, OCT_EIO, "%s: write failed after %zu of %zu bytes: %s", path,
                                 len - left, len, strerror(err));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        int err = errno;
        close(fd);
        unlinkat(dirfd, tmp, 0);
        return oct_error_set(e, OCT_EIO, "%s: fsync failed: %s", path, strerror(err));
    }
    if (close(fd) != 0) {
        int err = errno;
        unlinkat(dirfd, tmp, 0);
        return oct_error_set(e, OCT_EIO, "%s: close failed: %s", path, strerror(err));
    }
    if (renameat(dirfd, tmp, dirfd, path) != 0) {
        int err = errno;
        unlinkat(dirfd, tmp, 0);
        return oct_error_set(e, err == EACCES ? OCT_EPERM : OCT_EIO, "%s: rename from %s failed: %s",
                             path, tmp, strerror(err));
    }
    /* make the rename itself durable; failure here loses nothing already visible */
    char dir[OCT_PATH_MAX];
    dir_of(dir, sizeof dir, path);
    int dfd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return OCT_OK;
}

/* On overflow the result is "" so that a caller can never open a truncated
 * (and therefore different) path; callers check for the empty string. */
void oct_path_resolve(char *out, size_t out_len, const char *base_dir, const char *path)
{
    if (!out || out_len == 0)
        return;
    out[0] = '\0';
    if (!path)
        return;
    int n;
    if (path[0] == '/' || !base_dir || !*base_dir)
        n = snprintf(out, out_len, "%s", path);
    else if (base_dir[strlen(base_dir) - 1] == '/')
        n = snprintf(out, out_len, "%s%s", base_dir, path);
    else
        n = snprintf(out, out_len, "%s/%s", base_dir, path);
    if (n < 0 || (size_t)n >= out_len)
        out[0] = '\0';
}

void oct_cfg_dirname(char *out, size_t out_len, const char *path)
{
    if (!out || out_len == 0)
        return;
    if (!path || !strchr(path, '/')) {
        out[0] = '\0';
        return;
    }
    dir_of(out, out_len, path);
}

oct_err oct_cfg_read_file(const char *path, uint64_t max_bytes, void **buf, size_t *len,
                          oct_error *e)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return oct_error_set(e, err == ENOENT ? OCT_ENOENT : err == EACCES ? OCT_EPERM : OCT_EIO,
                             "%s: cannot open: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return oct_error_set(e, OCT_EIO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return oct_error_set(e, OCT_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes || (uint64_t)st.st_size >= SIZE_MAX) {
        close(fd);
        return oct_error_set(e, OCT_ESIZE, "%s: file of %lld bytes is larger than the %llu allowed",
                             path, (long long)st.st_size, (unsigned long long)max_bytes);
    }
    size_t size = (size_t)st.st_size;
    char *p = malloc(size + 1);
    if (!p) {
        close(fd);
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot allocate %zu bytes", path, size + 1);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, p + got, size - got > (size_t)1 << 30 ? (size_t)1 << 30 : size - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            free(p);
            close(fd);
            return oct_error_set(e, OCT_EIO, "%s: read failed: %s", path, strerror(err));
        }
        if (r == 0)
            break; /* shrank while reading: use what is there */
        got += (size_t)r;
    }
    close(fd);
    p[got] = '\0';
    *buf = p;
    *len = got;
    return OCT_OK;
}
