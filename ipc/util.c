/* util.c - clocks, names and small helpers of the IPC library. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ipc_internal.h"

uint64_t oct_time_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t oct_time_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *oct_daemon_state_name(uint32_t state)
{
    switch (state) {
    case OCT_STATE_STARTING: return "starting";
    case OCT_STATE_ONLINE: return "online";
    case OCT_STATE_REVIEW: return "review";
    case OCT_STATE_ERROR: return "error";
    case OCT_STATE_STOPPING: return "stopping";
    default: return "unknown";
    }
}

oct_err oct_ipc_name_check(const char *name, oct_error *e)
{
    if (!name || name[0] != '/' || name[1] == '\0')
        return oct_error_set(e, OCT_EINVAL,
                             "shared-memory name \"%s\": must start with '/' and not be empty",
                             name ? name : "(null)");
    size_t len = strlen(name);
    if (len > OCT_SHM_NAME_MAX)
        return oct_error_set(e, OCT_EINVAL, "shared-memory name is %zu characters, at most %d",
                             len, OCT_SHM_NAME_MAX);
    if (strchr(name + 1, '/'))
        return oct_error_set(e, OCT_EINVAL,
                             "shared-memory name \"%s\": no '/' allowed after the first", name);
    return OCT_OK;
}

void oct_ipc_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

uint64_t oct_ipc_random_nonzero(void)
{
    uint64_t v = 0;
    ssize_t r;
    do
        r = getrandom(&v, sizeof v, 0);
    while (r < 0 && errno == EINTR);
    if (r != (ssize_t)sizeof v) {
        /* no entropy source: mix the clocks (still new for each creation) */
        v = oct_time_realtime_ns() * 0x9E3779B97F4A7C15ull ^ oct_time_monotonic_ns();
    }
    return v ? v : 1;
}

void oct_ipc_strlcpy(char *dst, size_t dst_len, const char *src)
{
    if (!dst_len)
        return;
    size_t n = src ? strnlen(src, dst_len - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}
