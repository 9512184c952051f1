/* util.c - clocks, names and small helpers of the IPC library. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
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

/* ---- SIGBUS guard (see ipc_internal.h) ---- */
static __thread oct_bus_guard *bus_top;   /* innermost armed guard of this thread */
static struct sigaction bus_old;          /* handler before ours, to chain to */
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static bool bus_ok;

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
    const char *a = si ? (const char *)si->si_addr : NULL;
    for (oct_bus_guard *g = bus_top; g; g = g->prev) {
        const char *lo = g->lo;
        if (a >= lo && a < lo + g->len) {
            bus_top = g->prev; /* disarmed: the jump leaves the guarded code */
            siglongjmp(g->jb, 1);
        }
    }
    /* not ours: what would have happened without us */
    if ((bus_old.sa_flags & SA_SIGINFO) && bus_old.sa_sigaction) {
        bus_old.sa_sigaction(sig, si, uc);
        return;
    }
    if (bus_old.sa_handler != SIG_DFL && bus_old.sa_handler != SIG_IGN) {
        bus_old.sa_handler(sig);
        return;
    }
    /* default action: restore it; the faulting access runs again and kills */
    signal(sig, SIG_DFL);
}

static void bus_install_once(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = bus_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    bus_ok = sigaction(SIGBUS, &sa, &bus_old) == 0;
}

bool oct_bus_install(void)
{
    pthread_once(&bus_once, bus_install_once);
    return bus_ok;
}

void oct_bus_arm(oct_bus_guard *g, const void *lo, size_t len)
{
    g->lo = lo;
    g->len = len;
    g->prev = bus_top;
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the handler sees a complete guard */
    bus_top = g;
}

void oct_bus_disarm(oct_bus_guard *g)
{
    /* guards nest: only the innermost one is disarmed here */
    if (bus_top == g)
        bus_top = g->prev;
}
