/* sys.h - octd's logging (stderr, syslog priority prefixes) and the
 * systemd notification protocol (sd_notify datagrams, written here so octd
 * does not need libsystemd). */
#ifndef OCTD_SYS_H
#define OCTD_SYS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>

/* ---- logging: "<PRIO>octd: message" on stderr (journald reads the prefix) ---- */
void octd_log_set_level(int level); /* LOG_ERR .. LOG_DEBUG */
int octd_log_level(void);
void octd_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called with every message of priority LOG_ERR or worse (any thread). */
typedef void (*octd_log_hook_fn)(void *arg, int prio, const char *msg);
void octd_log_set_hook(octd_log_hook_fn fn, void *arg);

/* ---- sd_notify ---- */
typedef struct octd_notify {
    int fd;                   /* -1 when not under systemd */
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec;   /* 0: no watchdog */
} octd_notify;

/* Reads NOTIFY_SOCKET ('/path' or '@abstract') and WATCHDOG_USEC/WATCHDOG_PID.
 * Not an error when unset (fd = -1).  Returns false with a message in err
 * when NOTIFY_SOCKET is set but unusable. */
bool octd_notify_open(octd_notify *n, char *err, size_t err_len);
/* Sends one datagram of newline-separated assignments (no-op without systemd). */
void octd_notify_send(octd_notify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void octd_notify_close(octd_notify *n);

#endif
