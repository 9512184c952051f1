/* sys.c - see sys.h. */
#include "sys.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <omp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "oct_config.h"
#include "oct_engine.h"

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

/* ---- NUMA placement ---- */
oct_err octd_cpulist_parse(const char *text, const char *what, cpu_set_t *set, int *count,
                           oct_error *e)
{
    CPU_ZERO(set);
    *count = 0;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p || *p == '\n')
        return oct_error_set(e, OCT_EPARSE, "%s: empty CPU list", what);
    for (;;) {
        const char *at = p;
        char *end;
        if (!isdigit((unsigned char)*p))
            goto bad;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char)p[1]))
                goto bad;
            hi = strtoul(p + 1, &end, 10);
            p = end;
        }
        if (hi < lo)
            return oct_error_set(e, OCT_EPARSE, "%s: '%s': range %.*s runs backwards", what,
                                 text, (int)(p - at), at);
        if (hi >= CPU_SETSIZE)
            return oct_error_set(e, OCT_EPARSE, "%s: '%s': CPU %lu is beyond the %d this "
                                 "build handles", what, text, hi, CPU_SETSIZE);
        for (unsigned long c = lo; c <= hi; c++)
            if (!CPU_ISSET(c, set)) {
                CPU_SET(c, set);
                ++*count;
            }
        if (*p == ',') {
            p++;
            continue;
        }
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (*p)
            goto bad;
        return OCT_OK;
    bad:
        return oct_error_set(e, OCT_EPARSE, "%s: '%s' is not a CPU list (expected e.g. "
                             "\"0-7,16-23\"; at offset %d)", what, text, (int)(p - text));
    }
}

/* Reads a small sysfs file into buf (trailing newline removed). */
static oct_err read_small(const char *path, char *buf, size_t len, oct_error *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return oct_error_set(e, errno == ENOENT ? OCT_ENOENT : OCT_EIO, "%s: %s", path,
                             strerror(errno));
    size_t n = fread(buf, 1, len - 1, f);
    bool more = !feof(f) && fgetc(f) != EOF;
    fclose(f);
    if (more)
        return oct_error_set(e, OCT_EPARSE, "%s: longer than %zu bytes", path, len - 1);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return OCT_OK;
}

/* "0000:41:00.0" from CUDA's "0000:41:00.0" / "00000000:41:00.0" (any case). */
static oct_err bus_normalise(const char *bus, char *out, size_t len, oct_error *e)
{
    size_t n = strlen(bus), colons = 0, dots = 0;
    for (size_t i = 0; i < n; i++) {
        char c = bus[i];
        colons += c == ':';
        dots += c == '.';
        if (!isxdigit((unsigned char)c) && c != ':' && c != '.')
            n = 0; /* not an id: refused below */
    }
    const char *dom_end = n ? strchr(bus, ':') : NULL;
    size_t dom = dom_end ? (size_t)(dom_end - bus) : 0;
    if (!n || colons != 2 || dots != 1 || dom < 4 || dom > 8 || n - dom != 8 ||
        bus[dom + 3] != ':' || bus[dom + 6] != '.')
        return oct_error_set(e, OCT_EINVAL, "PCI id '%s' is not DOMAIN:BB:DD.F", bus);
    const char *b = bus;
    for (; dom > 4; dom--, b++) /* sysfs spells the domain with 4 digits */
        if (*b != '0')
            return oct_error_set(e, OCT_EINVAL, "PCI id '%s': domain beyond 16 bits", bus);
    if (strlen(b) + 1 > len)
        return oct_error_set(e, OCT_EINVAL, "PCI id '%s' too long", bus);
    for (size_t i = 0; b[i]; i++)
        out[i] = (char)tolower((unsigned char)b[i]);
    out[strlen(b)] = '\0';
    return OCT_OK;
}

oct_err octd_placement_read(const char *sysfs, const char *bus, octd_placement *p,
                            oct_error *e)
{
    memset(p, 0, sizeof *p);
    p->node = -1;
    if (bus_normalise(bus, p->bus, sizeof p->bus, e) != OCT_OK)
        return OCT_EINVAL;
    char path[PATH_MAX], buf[4096];
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", sysfs, p->bus);
    oct_err rc = read_small(path, buf, sizeof buf, e);
    if (rc != OCT_OK)
        return rc;
    char *end;
    errno = 0;
    long node = strtol(buf, &end, 10);
    if (end == buf || *end || errno || node < -1 || node > 4095)
        return oct_error_set(e, OCT_EPARSE, "%s: '%s' is not a NUMA node (-1 or 0..4095)",
                             path, buf);
    p->node = (int)node;
    /* how many nodes: absent without CONFIG_NUMA, i.e. one */
    snprintf(path, sizeof path, "%s/devices/system/node/online", sysfs);
    cpu_set_t nodes;
    rc = read_small(path, buf, sizeof buf, e);
    if (rc == OCT_ENOENT)
        p->nodes = 1;
    else if (rc != OCT_OK || octd_cpulist_parse(buf, path, &nodes, &p->nodes, e) != OCT_OK)
        return rc != OCT_OK ? rc : OCT_EPARSE;
    if (p->node < 0) {
        snprintf(p->why, sizeof p->why, "the kernel reports no NUMA node for it (numa_node -1)");
        return OCT_OK;
    }
    if (p->nodes <= 1) {
        snprintf(p->why, sizeof p->why, "one NUMA node");
        return OCT_OK;
    }
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/local_cpulist", sysfs, p->bus);
    if ((rc = read_small(path, buf, sizeof buf, e)) != OCT_OK)
        return rc;
    if (octd_cpulist_parse(buf, path, &p->cpus, &p->ncpus, e) != OCT_OK)
        return OCT_EPARSE;
    snprintf(p->cpulist, sizeof p->cpulist, "%.*s", (int)sizeof p->cpulist - 1, buf);
    p->place = true;
    return OCT_OK;
}

oct_err octd_placement_apply(pthread_t th, const octd_placement *p, oct_error *e)
{
    if (!p->place)
        return OCT_OK;
    cpu_set_t allowed, set;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return oct_error_set(e, OCT_EIO, "sched_getaffinity: %s", strerror(errno));
    CPU_AND(&set, &allowed, &p->cpus);
    if (CPU_COUNT(&set) == 0)
        return oct_error_set(e, OCT_EINVAL, "none of CPUs %s (NUMA node %d) is allowed to "
                             "this process (cpuset, taskset)", p->cpulist, p->node);
    int rc = pthread_setaffinity_np(th, sizeof set, &set);
    if (rc != 0)
        return oct_error_set(e, rc == EPERM ? OCT_EPERM : OCT_EINVAL,
                             "pthread_setaffinity_np(CPUs %s): %s", p->cpulist, strerror(rc));
    return OCT_OK;
}

bool octd_placement_enter(const octd_placement *p, cpu_set_t *saved)
{
    CPU_ZERO(saved);
    if (!p || !p->place || pthread_getaffinity_np(pthread_self(), sizeof *saved, saved) != 0)
        return false;
    return octd_placement_apply(pthread_self(), p, NULL) == OCT_OK;
}

void octd_placement_leave(bool entered, const cpu_set_t *saved)
{
    if (entered)
        pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

void octd_placement_describe(const octd_placement *p, int engine, char *out, size_t len)
{
    if (p->place)
        snprintf(out, len, "engine %d: GPU %s, NUMA node %d, CPUs %s", engine, p->bus, p->node,
                 p->cpulist);
    else
        snprintf(out, len, "engine %d: GPU %s, NUMA node %d, threads not placed: %s", engine,
                 p->bus[0] ? p->bus : "?", p->node, p->why[0] ? p->why : "unknown");
}

void octd_engine_placement(bool numa, const struct oct_engine *eng, int engine,
                           octd_placement *p, char *logged, size_t logged_len)
{
    memset(p, 0, sizeof *p);
    p->node = -1;
    char bus[32], text[256];
    oct_error e;
    if (oct_engine_pci_bus_id(eng, bus, sizeof bus, &e) == OCT_EUNSUPPORTED)
        text[0] = '\0'; /* a CPU engine: no GPU to be near */
    else if (!numa)
        snprintf(text, sizeof text, "engine %d: threads not placed ([engine] numa = off)",
                 engine);
    else if (bus[0] == '\0')
        snprintf(text, sizeof text, "engine %d: threads not placed (%.200s)", engine, e.msg);
    else if (octd_placement_read(OCTD_SYSFS, bus, p, &e) != OCT_OK)
        snprintf(text, sizeof text, "engine %d: GPU %s: threads not placed: %.160s", engine,
                 bus, e.msg);
    else
        octd_placement_describe(p, engine, text, sizeof text);
    if (text[0] && strcmp(text, logged) != 0)
        octd_log(p->place ? LOG_INFO : LOG_NOTICE, "%s", text);
    snprintf(logged, logged_len, "%s", text);
}

void octd_omp_team_affinity(const cpu_set_t *set)
{
#pragma omp parallel num_threads(omp_get_max_threads())
    pthread_setaffinity_np(pthread_self(), sizeof *set, set);
}

void octd_follow_engines(octd_follow *f, const octd_placement *const *ps, int n)
{
    const octd_placement *p = NULL;
    bool mixed = false;
    for (int i = 0; i < n; i++) {
        const octd_placement *q = ps[i];
        if (!q->place)
            continue;
        if (p && q->node != p->node)
            mixed = true;
        p = p ? p : q;
    }
    int node = p && !mixed ? p->node : -1;
    if (mixed && !f->warned_mixed)
        octd_log(LOG_NOTICE, "engines on several NUMA nodes: the frame thread that drives them "
                             "is not placed; it moves to an engine's node while that engine "
                             "stages a frame through the CPU (each product pool is on its "
                             "engine's node)");
    f->warned_mixed = f->mixed = mixed;
    if (f->placed ? node == f->node : node < 0)
        return;
    if (f->placed) { /* back to where it was before */
        pthread_setaffinity_np(pthread_self(), sizeof f->saved, &f->saved);
        octd_omp_team_affinity(&f->saved);
    }
    f->placed = false;
    if (node < 0)
        return;
    oct_error e = {"pthread_getaffinity_np failed"};
    if (pthread_getaffinity_np(pthread_self(), sizeof f->saved, &f->saved) != 0 ||
        octd_placement_apply(pthread_self(), p, &e) != OCT_OK) {
        octd_log(LOG_WARNING, "frame thread not placed on NUMA node %d: %s", node, e.msg);
        return;
    }
    cpu_set_t now;
    pthread_getaffinity_np(pthread_self(), sizeof now, &now);
    octd_omp_team_affinity(&now);
    f->placed = true;
    f->node = node;
    octd_log(LOG_INFO, "frame thread on NUMA node %d (CPUs %s)", node, p->cpulist);
}

bool octd_follow_stage_enter(const octd_follow *f, const octd_placement *p, cpu_set_t *saved)
{
    if (!f->mixed || !octd_placement_enter(p, saved))
        return false;
    cpu_set_t now;
    pthread_getaffinity_np(pthread_self(), sizeof now, &now);
    octd_omp_team_affinity(&now);
    return true;
}

void octd_follow_stage_leave(bool moved, const cpu_set_t *saved)
{
    if (!moved)
        return;
    octd_placement_leave(true, saved);
    octd_omp_team_affinity(saved);
}

/* ---- real-time settings ---- */
void octd_rt_timer_slack(unsigned long ns)
{
    if (prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0) != 0)
        octd_log(LOG_WARNING, "[engine] timer_slack_ns = %lu: PR_SET_TIMERSLACK: %s", ns,
                 strerror(errno));
}

void octd_rt_lock_memory(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && geteuid() != 0) {
        /* MCL_FUTURE would make every allocation beyond the limit fail */
        octd_log(LOG_WARNING, "[engine] lock_memory: RLIMIT_MEMLOCK is %llu KiB, not unlimited "
                              "(LimitMEMLOCK=infinity in the unit, ulimit -l unlimited): memory "
                              "not locked", (unsigned long long)rl.rlim_cur / 1024);
        return;
    }
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        octd_log(LOG_WARNING, "[engine] lock_memory: mlockall: %s: memory not locked",
                 strerror(errno));
    else
        octd_log(LOG_INFO, "memory locked (mlockall): no page of octd is paged out");
}

void octd_rt_priority(int priority)
{
    struct sched_param sp = {.sched_priority = priority};
    int rc = pthread_setschedparam(pthread_self(), priority > 0 ? SCHED_FIFO : SCHED_OTHER, &sp);
    if (rc != 0) {
        struct rlimit rl = {0, 0};
        getrlimit(RLIMIT_RTPRIO, &rl);
        octd_log(LOG_WARNING, "[engine] priority = %d: SCHED_FIFO refused (%s; RLIMIT_RTPRIO "
                              "%llu; a systemd unit needs RestrictRealtime=no and "
                              "LimitRTPRIO=): the frame loop runs at normal priority",
                 priority, strerror(rc), (unsigned long long)rl.rlim_cur);
        return;
    }
    if (priority > 0)
        octd_log(LOG_INFO, "frame loop at SCHED_FIFO priority %d", priority);
}

/* octd's nice at start, which its background threads keep whatever the frame
 * loop's ([engine] nice); set once by octd_rt_nice_base before any thread. */
static int base_nice;

void octd_rt_nice_base(void)
{
    errno = 0;
    int n = getpriority(PRIO_PROCESS, (id_t)gettid());
    base_nice = n == -1 && errno ? 0 : n;
}

/* Sets the calling thread's nice and, with team, that of each thread of its
 * OpenMP team (made before: they do not follow the frame loop later). */
static int set_nice(int nice, bool team)
{
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) != 0)
        return -1;
    if (team) {
#pragma omp parallel num_threads(omp_get_max_threads())
        setpriority(PRIO_PROCESS, (id_t)gettid(), nice);
    }
    return 0;
}

bool octd_rt_nice(int nice, bool team)
{
    bool automatic = nice == OCT_NICE_AUTO;
    int want = automatic ? OCT_NICE_AUTO_VALUE : nice == OCTD_NICE_OWN ? base_nice : nice;
    struct rlimit rl = {0, 0};
    getrlimit(RLIMIT_NICE, &rl);
    int err = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (automatic && want >= base_nice)
            want = base_nice; /* auto never makes the frame loop nicer than octd */
        if (set_nice(want, team) == 0) {
            if (want != base_nice)
                octd_log(LOG_INFO, "frame loop at nice %d (octd's other threads at %d)", want,
                         base_nice);
            return true;
        }
        err = errno;
        /* auto without CAP_SYS_NICE: as far as RLIMIT_NICE (20 - nice) goes */
        if (!automatic || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 40)
            break;
        want = 20 - (int)rl.rlim_cur;
    }
    /* auto: a plain user's octd (no RLIMIT_NICE) is normal, not a fault */
    octd_log(automatic ? LOG_INFO : LOG_WARNING,
             "[engine] nice = %s%d: %s (RLIMIT_NICE %llu; under systemd LimitNICE=, as "
             "octd.service sets): the frame loop runs at nice %d", automatic ? "auto, " : "",
             want, strerror(err), (unsigned long long)rl.rlim_cur, base_nice);
    set_nice(base_nice, team); /* a reload's earlier value */
    return false;
}

typedef struct {
    void *(*fn)(void *);
    void *arg;
} normal_start;

static void *normal_main(void *p)
{
    normal_start s = *(normal_start *)p;
    free(p);
    /* raising one's nice needs no privilege: back to octd's own */
    setpriority(PRIO_PROCESS, (id_t)gettid(), base_nice);
    return s.fn(s.arg);
}

int octd_thread_start_normal(pthread_t *t, void *(*fn)(void *), void *arg)
{
    normal_start *s = malloc(sizeof *s);
    if (!s)
        return ENOMEM;
    *s = (normal_start){fn, arg};
    pthread_attr_t a;
    struct sched_param sp = {.sched_priority = 0};
    int rc;
    if (pthread_attr_init(&a) != 0) {
        rc = pthread_create(t, NULL, normal_main, s);
    } else {
        bool ok = pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED) == 0 &&
                  pthread_attr_setschedpolicy(&a, SCHED_OTHER) == 0 &&
                  pthread_attr_setschedparam(&a, &sp) == 0;
        rc = pthread_create(t, ok ? &a : NULL, normal_main, s);
        pthread_attr_destroy(&a);
    }
    if (rc != 0)
        free(s);
    return rc;
}

void octd_prefault(void *p, size_t bytes)
{
    volatile uint8_t *b = p;
    long pg = sysconf(_SC_PAGESIZE);
    size_t step = pg > 0 ? (size_t)pg : 4096;
    for (size_t o = 0; o < bytes; o += step)
        b[o] = 0;
    if (bytes)
        b[bytes - 1] = 0;
}
