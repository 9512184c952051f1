/* endpoint.c - see endpoint.h. */
#include "endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct octd_endpoints {
    int count;
    int fd[OCT_MAX_ENDPOINTS + 1];
    char lock[OCT_MAX_ENDPOINTS + 1][OCT_PATH_MAX];
};

/* Someone accepts connections on the socket at path. */
static bool listening(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return false;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return false;
    bool up = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return up;
}

/* Locks PATH.lock: fd >= 0 held, or an error naming the owner. */
static oct_err claim_one(const char *ep, const char *path, char *lock, size_t lock_len, int *out,
                         oct_error *e)
{
    if (snprintf(lock, lock_len, "%s.lock", path) >= (int)lock_len)
        return oct_error_set(e, OCT_EINVAL, "publish endpoint %s: path too long", ep);
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
        if (fd < 0)
            return oct_error_set(e, OCT_EIO, "publish endpoint %s: lock file %s: %s", ep, lock,
                                 strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int en = errno;
            char pid[32] = "";
            ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
            pid[n > 0 ? n : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            close(fd);
            if (en == EWOULDBLOCK)
                return oct_error_set(e, OCT_ESTATE,
                                     "publish endpoint %s is owned by a running octd (pid %s, lock "
                                     "file %s): stop it or give this one another endpoint",
                                     ep, pid[0] ? pid : "?", lock);
            return oct_error_set(e, OCT_EIO, "publish endpoint %s: flock %s: %s", ep, lock,
                                 strerror(en));
        }
        /* The owner before us may have unlinked the file after we opened
         * it: the lock counts only on the file that is still at the path. */
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(lock, &b) != 0 || a.st_ino != b.st_ino ||
            a.st_dev != b.st_dev) {
            close(fd);
            continue;
        }
        if (listening(path)) {
            close(fd);
            return oct_error_set(e, OCT_ESTATE,
                                 "publish endpoint %s: a live process (not an octd holding %s) "
                                 "listens on %s: not taking it over",
                                 ep, lock, path);
        }
        char pid[32];
        int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
            oct_err err = oct_error_set(e, OCT_EIO, "publish endpoint %s: writing %s: %s", ep,
                                        lock, strerror(errno));
            close(fd);
            return err;
        }
        *out = fd;
        return OCT_OK;
    }
    return oct_error_set(e, OCT_EIO, "publish endpoint %s: lock file %s keeps being replaced", ep,
                         lock);
}

oct_err octd_endpoints_claim(octd_endpoints **out, const oct_daemon_config *cfg, oct_error *e)
{
    *out = NULL;
    octd_endpoints *l = calloc(1, sizeof *l);
    if (!l)
        return oct_error_set(e, OCT_ENOMEM, "out of memory");
    for (int i = 0; i <= cfg->endpoint_count; i++) { /* the last: [publish] shm_endpoint */
        const char *ep = i < cfg->endpoint_count ? cfg->endpoints[i] : cfg->pub_shm_endpoint;
        if (strncmp(ep, "ipc://", 6) != 0 || ep[6] == '@') /* abstract: the kernel refuses twice */
            continue;
        oct_err err = claim_one(ep, ep + 6, l->lock[l->count], sizeof l->lock[0],
                                &l->fd[l->count], e);
        if (err) {
            octd_endpoints_release(l);
            return err;
        }
        l->count++;
    }
    *out = l;
    return OCT_OK;
}

void octd_endpoints_release(octd_endpoints *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->count; i++) {
        unlink(l->lock[i]); /* while holding it: see the inode check above */
        close(l->fd[i]);
    }
    free(l);
}
