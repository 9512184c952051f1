/* sys.c - see sys.h. */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The process-wide log threshold: set once from [log] level (and on reload).
 * One daemon per process, so a single variable is the honest representation. */
static int log_threshold = LOG_INFO;

void octd_log_set_level(int level)
{
    if (level < LOG_EMERG)
        level = LOG_EMERG;
    if (level > LOG_DEBUG)
        level = LOG_DEBUG;
    log_threshold = level;
}

int octd_log_level(void) { return log_threshold; }

/* The error hook (health.c: the status block's last_error), process-wide
 * like the threshold. */
static octd_log_hook_fn log_hook;
static void *log_hook_arg;

void octd_log_set_hook(octd_log_hook_fn fn, void *arg)
{
    log_hook = fn;
    log_hook_arg = arg;
}

void octd_log(int prio, const char *fmt, ...)
{
    if (prio > log_threshold && !(prio <= LOG_ERR && log_hook))
        return;
    /* One write() per line so lines of concurrent writers do not interleave. */
    char line[1024];
    int n = snprintf(line, sizeof line, "<%d>octd: ", prio);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (prio <= LOG_ERR && log_hook)
        log_hook(log_hook_arg, prio, line + n);
    if (prio > log_threshold)
        return;
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere to report a failed log write */
}

bool octd_notify_open(octd_notify *n, char *err, size_t err_len)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return true;
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof n->addr.sun_path) {
        snprintf(err, err_len, "NOTIFY_SOCKET='%s' is not an absolute or abstract socket path",
                 path);
        return false;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@')
        n->addr.sun_path[0] = '\0'; /* abstract namespace; length, not NUL, ends it */
    n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0) {
        snprintf(err, err_len, "NOTIFY_SOCKET: socket: %s", strerror(errno));
        return false;
    }
    /* The watchdog is ours only if WATCHDOG_PID is unset or names us. */
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    if (usec && (!pid || strtoll(pid, NULL, 10) == (long long)getpid())) {
        char *end;
        unsigned long long v = strtoull(usec, &end, 10);
        if (end != usec && *end == '\0')
            n->watchdog_usec = v;
    }
    return true;
}

void octd_notify_send(octd_notify *n, const char *fmt, ...)
{
    if (n->fd < 0)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    if ((size_t)len >= sizeof msg)
        len = sizeof msg - 1;
    if (sendto(n->fd, msg, (size_t)len, MSG_NOSIGNAL, (const struct sockaddr *)&n->addr,
               n->addr_len) < 0)
        octd_log(LOG_DEBUG, "sd_notify: sendto: %s", strerror(errno));
}

void octd_notify_close(octd_notify *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}
