/* ini.c - octd.ini (SPEC 5.1) with inih.
 *
 * Debian's libinih is built without INI_HANDLER_LINENO, so lines are fed
 * through our own reader (ini_parse_stream), which counts them: the handler
 * runs right after the reader returned the key's line, so every message can
 * say "FILE:LINE: [section] key: what is wrong".  The reader also strips
 * leading blanks (an indented key is a key, never a silent continuation of
 * the previous value) and checks section headers, so that an unknown but
 * empty section is an error too. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <arpa/inet.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

enum ini_key {
    K_BACKEND, K_DEVICE, K_THREADS, K_PRECISION,
    K_FRAMES, K_CONTROL, K_STATUS, K_POLICY,
    K_ENDPOINT, K_SNDHWM,
    K_PROFILE_PATH, K_SAVE_DIR, K_LOG_LEVEL,
    K_ZERO_COPY,
    K_STALE_MS, K_POLL_US, K_METRICS_LISTEN,
    K_DEVICES, K_FAIL_AFTER, K_FAIL_ENGINE,
    K_NUMA, K_TIMER_SLACK, K_LOCK_MEMORY, K_PRIORITY, K_NICE, K_PREFAULT,
    K_CUDA_GRAPH,
    K_CUDA_CFD,
    K_REG_WORKERS,
    K_OVERLAP_INPUT,
    K_PUB_SNDBUF, K_PUB_IO_THREADS, K_PUB_NICE, K_PUB_CPUS, K_PUB_COPIES, K_PUB_STATS,
    K_PUB_SHM_ENDPOINT, K_PUB_SHM_NAME,
    K_RECORD_IO,
    K_COUNT
};

static const struct { const char *section, *key; } ini_keys[K_COUNT] = {
    [K_BACKEND] = {"engine", "backend"},   [K_DEVICE] = {"engine", "device"},
    [K_THREADS] = {"engine", "threads"},   [K_PRECISION] = {"engine", "precision"},
    [K_FRAMES] = {"ring", "frames"},       [K_CONTROL] = {"ring", "control"},
    [K_STATUS] = {"ring", "status"},       [K_POLICY] = {"ring", "policy"},
    [K_ENDPOINT] = {"publish", "endpoint"}, [K_SNDHWM] = {"publish", "sndhwm"},
    [K_PROFILE_PATH] = {"profile", "path"}, [K_SAVE_DIR] = {"save", "directory"},
    [K_LOG_LEVEL] = {"log", "level"},
    [K_ZERO_COPY] = {"ring", "zero_copy"},
    [K_STALE_MS] = {"ring", "stale_ms"}, [K_POLL_US] = {"ring", "poll_us"},
    [K_METRICS_LISTEN] = {"metrics", "listen"},
    [K_DEVICES] = {"engine", "devices"},   [K_FAIL_AFTER] = {"engine", "fail_after"},
    [K_FAIL_ENGINE] = {"engine", "fail_engine"},
    [K_NUMA] = {"engine", "numa"},         [K_TIMER_SLACK] = {"engine", "timer_slack_ns"},
    [K_LOCK_MEMORY] = {"engine", "lock_memory"}, [K_PRIORITY] = {"engine", "priority"},
    [K_NICE] = {"engine", "nice"},
    [K_PREFAULT] = {"engine", "prefault"},
    [K_CUDA_GRAPH] = {"engine", "cuda_graph"},
    [K_CUDA_CFD] = {"engine", "cuda_cfd"},
    [K_REG_WORKERS] = {"engine", "registration_workers"},
    [K_PUB_SNDBUF] = {"publish", "sndbuf"}, [K_PUB_IO_THREADS] = {"publish", "io_threads"},
    [K_PUB_NICE] = {"publish", "nice"},     [K_PUB_CPUS] = {"publish", "cpus"},
    [K_PUB_COPIES] = {"publish", "copies"}, [K_PUB_STATS] = {"publish", "stats"},
    [K_PUB_SHM_ENDPOINT] = {"publish", "shm_endpoint"}, [K_PUB_SHM_NAME] = {"publish", "shm_name"},
    [K_RECORD_IO] = {"save", "record_io"},
    [K_OVERLAP_INPUT] = {"engine", "overlap_input"},
};

static const char *const ini_sections[] = {"engine", "ring", "publish", "profile", "save", "log",
                                           "metrics"};

typedef struct ini_ctx {
    const char *p, *end;   /* unread text */
    const char *name;      /* file name for messages */
    char base_dir[OCT_PATH_MAX];
    int line;              /* line last returned by the reader */
    int seen[K_COUNT];     /* line where each key was set, 0 = not yet */
    oct_daemon_config *c;
    oct_error *e;
    oct_err err;           /* first error */
    int err_line;
} ini_ctx;

static oct_err ctx_fail(ini_ctx *x, oct_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static oct_err ctx_fail(ini_ctx *x, oct_err code, const char *fmt, ...)
{
    if (x->err)
        return x->err; /* keep the first error */
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    x->err = oct_error_set(x->e, code, "%s:%d: %s", x->name, x->line, what);
    x->err_line = x->line;
    return x->err;
}

static bool known_section(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof ini_sections / sizeof *ini_sections; i++)
        if (strlen(ini_sections[i]) == n && !strncmp(ini_sections[i], s, n))
            return true;
    return false;
}

/* inih's line source: one line of the buffer per call, counted. */
static char *line_reader(char *str, int num, void *stream)
{
    ini_ctx *x = stream;
    if (x->err || x->p >= x->end || num < 2)
        return NULL;
    const char *nl = memchr(x->p, '\n', (size_t)(x->end - x->p));
    const char *eol = nl ? nl : x->end;
    x->line++;
    const char *s = x->p;
    x->p = nl ? nl + 1 : x->end;
    if (memchr(s, '\0', (size_t)(eol - s))) {
        ctx_fail(x, OCT_EPARSE, "NUL byte in the line");
        return NULL;
    }
    while (s < eol && (*s == ' ' || *s == '\t'))
        s++;
    size_t n = (size_t)(eol - s);
    if (n > 0 && s[n - 1] == '\r')
        n--;
    if (n + 1 >= (size_t)num) {
        ctx_fail(x, OCT_EPARSE, "line longer than %d characters", num - 2);
        return NULL;
    }
    if (n > 0 && *s == '[') {
        const char *close = memchr(s, ']', n);
        if (close) {
            const char *a = s + 1, *b = close;
            while (a < b && isspace((unsigned char)*a))
                a++;
            while (b > a && isspace((unsigned char)b[-1]))
                b--;
            if (!known_section(a, (size_t)(b - a))) {
                ctx_fail(x, OCT_EPARSE,
                         "[%.*s]: unknown section (known: engine, ring, publish, profile, save, "
                         "log, metrics)",
                         (int)(b - a > 64 ? 64 : b - a), a);
                return NULL;
            }
        }
    }
    memcpy(str, s, n);
    str[n] = '\0';
    return str;
}

static bool parse_int(const char *v, long lo, long hi, int *out)
{
    if (!*v || isspace((unsigned char)*v))
        return false;
    errno = 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < lo || n > hi)
        return false;
    *out = (int)n;
    return true;
}

/* yes/no, true/false, on/off, 1/0 */
static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false",
                                                                               "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return *out = true, true;
        if (!strcasecmp(v, no[i]))
            return *out = false, true;
    }
    return false;
}

static bool shm_name_ok(const char *v)
{
    size_t n = strlen(v);
    return n >= 2 && n <= 250 && v[0] == '/' && !strchr(v + 1, '/');
}

/* tcp://HOST:PORT (PORT a number or *), ipc://PATH, inproc://NAME */
static bool endpoint_ok(const char *ep)
{
    if (!strncmp(ep, "tcp://", 6)) {
        const char *host = ep + 6, *colon = strrchr(host, ':');
        if (!colon || colon == host)
            return false;
        const char *port = colon + 1;
        if (!strcmp(port, "*"))
            return true;
        int pn;
        return parse_int(port, 1, 65535, &pn);
    }
    if (!strncmp(ep, "ipc://", 6))
        return ep[6] != '\0';
    if (!strncmp(ep, "inproc://", 9))
        return ep[9] != '\0';
    return false;
}

/* [metrics] listen: "" (off), PORT (loopback) or HOST:PORT with an IPv4
 * HOST or localhost; written to out as civetweb's "ADDRESS:PORT". */
static bool metrics_listen_ok(const char *v, char *out, size_t len)
{
    if (!*v) {
        out[0] = '\0';
        return true;
    }
    const char *colon = strrchr(v, ':');
    char host[64] = "127.0.0.1";
    const char *port = v;
    if (colon) {
        size_t hl = (size_t)(colon - v);
        if (hl == 0 || hl >= sizeof host)
            return false;
        memcpy(host, v, hl);
        host[hl] = '\0';
        port = colon + 1;
        if (!strcmp(host, "localhost"))
            snprintf(host, sizeof host, "127.0.0.1");
        struct in_addr a;
        if (inet_pton(AF_INET, host, &a) != 1)
            return false;
    }
    int p;
    if (!parse_int(port, 1, 65535, &p))
        return false;
    return snprintf(out, len, "%s:%d", host, p) < (int)len;
}

/* [engine] devices = all | ENTRY[,ENTRY...], ENTRY = cpu | CUDA device index */
static int parse_devices(ini_ctx *x, oct_daemon_config *c, const char *v)
{
    if (!strcasecmp(v, "all")) {
        c->devices_all = true;
        c->device_count = 0;
        return 1;
    }
    c->devices_all = false;
    c->device_count = 0;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, ",");
        char item[32];
        size_t t = n;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t == 0 || t >= sizeof item)
            return ctx_fail(x, OCT_EINVAL, "[engine] devices: '%s': entry %d is %s (expected "
                            "'all' or a list like '0,1' or 'cpu,cpu')", v, c->device_count + 1,
                            t ? "too long" : "empty"), 0;
        memcpy(item, p, t);
        item[t] = '\0';
        if (c->device_count == OCT_ENGINES_MAX)
            return ctx_fail(x, OCT_EINVAL, "[engine] devices: '%s': more than %d engines", v,
                            OCT_ENGINES_MAX), 0;
        int dev;
        if (!strcasecmp(item, "cpu"))
            dev = OCT_DEVICE_CPU;
        else if (!parse_int(item, 0, 1023, &dev))
            return ctx_fail(x, OCT_EINVAL, "[engine] devices: '%s': entry %d '%s' is neither "
                            "'cpu' nor a CUDA device index from 0 to 1023", v,
                            c->device_count + 1, item), 0;
        c->devices[c->device_count++] = dev;
        if (!p[n])
            return 1;
        p += n + 1;
    }
}

static int set_value(ini_ctx *x, int k, const char *v)
{
    oct_daemon_config *c = x->c;
    const char *sec = ini_keys[k].section, *key = ini_keys[k].key;
    if (!*v)
        return ctx_fail(x, OCT_EINVAL, "[%s] %s: empty value", sec, key), 0;
    switch (k) {
    case K_BACKEND:
        if (!strcasecmp(v, "auto")) c->backend = OCT_BACKEND_AUTO;
        else if (!strcasecmp(v, "cpu")) c->backend = OCT_BACKEND_CPU;
        else if (!strcasecmp(v, "cuda")) c->backend = OCT_BACKEND_CUDA;
        else goto bad_word;
        return 1;
    case K_DEVICE:
        if (!parse_int(v, 0, 1023, &c->device))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not an integer from 0 to 1023", sec,
                            key, v), 0;
        return 1;
    case K_DEVICES:
        return parse_devices(x, c, v);
    case K_FAIL_AFTER:
        if (!parse_int(v, 0, 1000000000, &c->fail_after))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not an integer from 0 (off) to "
                            "1000000000", sec, key, v), 0;
        return 1;
    case K_FAIL_ENGINE:
        if (!parse_int(v, 0, OCT_ENGINES_MAX - 1, &c->fail_engine))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not an engine index from 0 to %d",
                            sec, key, v, OCT_ENGINES_MAX - 1), 0;
        return 1;
    case K_NUMA:
        if (!strcasecmp(v, "auto")) c->numa = true;
        else if (!strcasecmp(v, "off")) c->numa = false;
        else
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not auto or off", sec, key, v), 0;
        return 1;
    case K_TIMER_SLACK: {
        int ns;
        if (!parse_int(v, 0, 1000000000, &ns))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not a number of nanoseconds from "
                            "0 (the kernel's default) to 1000000000", sec, key, v), 0;
        c->timer_slack_ns = (uint32_t)ns;
        return 1;
    }
    case K_LOCK_MEMORY:
    case K_PREFAULT:
    case K_OVERLAP_INPUT:
        if (!parse_bool(v, k == K_LOCK_MEMORY ? &c->lock_memory
                           : k == K_PREFAULT  ? &c->prefault
                                              : &c->overlap_input))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not yes or no", sec, key, v), 0;
        return 1;
    case K_PRIORITY:
        if (!parse_int(v, 0, 99, &c->priority))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not 0 (normal scheduling) or a "
                            "SCHED_FIFO priority from 1 to 99", sec, key, v), 0;
        return 1;
    case K_NICE:
        if (strcmp(v, "auto") == 0) {
            c->nice = OCT_NICE_AUTO;
            return 1;
        }
        if (!parse_int(v, -20, 19, &c->nice))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not auto or a nice value from "
                            "-20 to 19", sec, key, v), 0;
        return 1;
    case K_REG_WORKERS:
        if (!parse_int(v, 0, OCT_REG_WORKERS_MAX, &c->registration_workers))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not 0 (automatic) or a number of "
                            "registration threads from 1 to %d", sec, key, v,
                            OCT_REG_WORKERS_MAX), 0;
        return 1;
    case K_THREADS:
        if (!parse_int(v, 0, 4096, &c->threads))
            return ctx_fail(x, OCT_EINVAL,
                            "[%s] %s: '%s' is not an integer from 0 (all cores) to 4096", sec,
                            key, v), 0;
        return 1;
    case K_CUDA_GRAPH:
        if (!strcasecmp(v, "auto")) c->cuda_graph = OCT_CUDA_GRAPH_AUTO;
        else if (!strcasecmp(v, "off")) c->cuda_graph = OCT_CUDA_GRAPH_OFF;
        else if (!strcasecmp(v, "on")) c->cuda_graph = OCT_CUDA_GRAPH_ON;
        else goto bad_word;
        return 1;
    case K_CUDA_CFD:
        if (!strcasecmp(v, "auto")) c->cuda_cfd = OCT_CUDA_CFD_AUTO;
        else if (!strcasecmp(v, "fft")) c->cuda_cfd = OCT_CUDA_CFD_FFT;
        else if (!strcasecmp(v, "gemm")) c->cuda_cfd = OCT_CUDA_CFD_GEMM;
        else goto bad_word;
        return 1;
    case K_PRECISION:
        if (!strcasecmp(v, "fp32")) c->precision = OCT_PRECISION_FP32;
        else if (!strcasecmp(v, "tf32")) c->precision = OCT_PRECISION_TF32;
        else goto bad_word;
        return 1;
    case K_FRAMES:
    case K_CONTROL:
    case K_STATUS: {
        if (!shm_name_ok(v))
            return ctx_fail(x, OCT_EINVAL,
                            "[%s] %s: '%s' is not a shared-memory name ('/' then 1 to 249 "
                            "characters without '/')",
                            sec, key, v), 0;
        char *dst = k == K_FRAMES ? c->ring_frames : k == K_CONTROL ? c->ring_control
                                                                    : c->ring_status;
        snprintf(dst, sizeof c->ring_frames, "%s", v);
        return 1;
    }
    case K_POLICY:
        if (!strcasecmp(v, "latest")) c->policy = 0;
        else if (!strcasecmp(v, "all")) c->policy = 1;
        else goto bad_word;
        return 1;
    case K_ENDPOINT: {
        int count = 0;
        const char *p = v;
        for (;;) {
            const char *comma = strchr(p, ',');
            const char *a = p, *b = comma ? comma : p + strlen(p);
            while (a < b && isspace((unsigned char)*a))
                a++;
            while (b > a && isspace((unsigned char)b[-1]))
                b--;
            size_t n = (size_t)(b - a);
            if (n == 0)
                return ctx_fail(x, OCT_EINVAL, "[%s] %s: empty endpoint in the list", sec, key), 0;
            if (count >= OCT_MAX_ENDPOINTS)
                return ctx_fail(x, OCT_EINVAL, "[%s] %s: more than %d endpoints", sec, key,
                                OCT_MAX_ENDPOINTS), 0;
            if (n >= sizeof c->endpoints[0])
                return ctx_fail(x, OCT_EINVAL, "[%s] %s: endpoint %d is longer than %zu characters",
                                sec, key, count + 1, sizeof c->endpoints[0] - 1), 0;
            memcpy(c->endpoints[count], a, n);
            c->endpoints[count][n] = '\0';
            if (!endpoint_ok(c->endpoints[count]))
                return ctx_fail(x, OCT_EINVAL,
                                "[%s] %s: '%s' is not a ZeroMQ endpoint (tcp://HOST:PORT, "
                                "ipc://PATH or inproc://NAME)",
                                sec, key, c->endpoints[count]), 0;
            for (int i = 0; i < count; i++)
                if (!strcmp(c->endpoints[i], c->endpoints[count]))
                    return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is listed twice", sec, key,
                                    c->endpoints[count]), 0;
            count++;
            if (!comma)
                break;
            p = comma + 1;
        }
        c->endpoint_count = count;
        return 1;
    }
    case K_ZERO_COPY:
        if (!strcasecmp(v, "auto")) c->zero_copy = OCT_ZERO_COPY_AUTO;
        else if (!strcasecmp(v, "on")) c->zero_copy = OCT_ZERO_COPY_ON;
        else if (!strcasecmp(v, "off")) c->zero_copy = OCT_ZERO_COPY_OFF;
        else
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not auto, on or off", sec, key, v), 0;
        return 1;
    case K_RECORD_IO:
        if (!strcasecmp(v, "auto")) c->record_io = OCT_RECORD_IO_AUTO;
        else if (!strcasecmp(v, "direct")) c->record_io = OCT_RECORD_IO_DIRECT;
        else if (!strcasecmp(v, "buffered")) c->record_io = OCT_RECORD_IO_BUFFERED;
        else
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not auto, direct or buffered", sec,
                            key, v), 0;
        return 1;
    case K_STALE_MS: {
        int ms;
        if (!parse_int(v, 100, 3600000, &ms))
            return ctx_fail(x, OCT_EINVAL,
                            "[%s] %s: '%s' is not a number of milliseconds from 100 to 3600000",
                            sec, key, v), 0;
        c->stale_ms = (uint32_t)ms;
        return 1;
    }
    case K_POLL_US: {
        int us;
        if (!parse_int(v, 1, 100000, &us))
            return ctx_fail(x, OCT_EINVAL,
                            "[%s] %s: '%s' is not a number of microseconds from 1 to 100000",
                            sec, key, v), 0;
        c->poll_us = (uint32_t)us;
        return 1;
    }
    case K_METRICS_LISTEN:
        if (!metrics_listen_ok(v, c->metrics_listen, sizeof c->metrics_listen))
            return ctx_fail(x, OCT_EINVAL,
                            "[%s] %s: '%s' is not PORT or HOST:PORT (an IPv4 address or "
                            "localhost, port 1 to 65535; empty = off)",
                            sec, key, v), 0;
        return 1;
    case K_PUB_SNDBUF:
        if (!parse_int(v, 0, 1 << 26, &c->pub_sndbuf) || (c->pub_sndbuf > 0 && c->pub_sndbuf < 4096))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not 0 (the system's default) or "
                            "a number of bytes from 4096 to 67108864", sec, key, v), 0;
        return 1;
    case K_PUB_IO_THREADS:
        if (!parse_int(v, 0, 64, &c->pub_io_threads))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not 0 (one per 4 cores, 2 to 4) "
                            "or an integer from 1 to 64", sec, key, v), 0;
        return 1;
    case K_PUB_NICE:
        if (!parse_int(v, 0, 19, &c->pub_nice))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not an integer from 0 to 19", sec,
                            key, v), 0;
        return 1;
    case K_PUB_CPUS:
        /* the syntax here; octd checks the CPUs against those it may use */
        if (strlen(v) >= sizeof c->pub_cpus || strspn(v, "0123456789-,") != strlen(v) ||
            (*v && (!isdigit((unsigned char)*v) || !isdigit((unsigned char)v[strlen(v) - 1]))))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not a CPU list such as 2-3 or "
                            "1,3,5-7 (empty: not pinned)", sec, key, v), 0;
        snprintf(c->pub_cpus, sizeof c->pub_cpus, "%s", v);
        return 1;
    case K_PUB_COPIES:
        if (!strcmp(v, "publisher"))
            c->pub_copies = OCT_PUB_COPIES_PUBLISHER;
        else if (!strcmp(v, "frame"))
            c->pub_copies = OCT_PUB_COPIES_FRAME;
        else if (!strcmp(v, "auto"))
            c->pub_copies = OCT_PUB_COPIES_AUTO;
        else
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not publisher, frame or auto", sec,
                            key, v), 0;
        return 1;
    case K_PUB_SHM_ENDPOINT:
        if (strlen(v) >= sizeof c->pub_shm_endpoint || (*v && !endpoint_ok(v)))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not a ZeroMQ endpoint (ipc://PATH, "
                            "tcp://127.0.0.1:PORT or inproc://NAME; empty = off)", sec, key, v), 0;
        snprintf(c->pub_shm_endpoint, sizeof c->pub_shm_endpoint, "%s", v);
        return 1;
    case K_PUB_SHM_NAME:
        /* room for the ".N" of engines after the first */
        if (!shm_name_ok(v) || strlen(v) + 4 >= sizeof c->pub_shm_name)
            return ctx_fail(x, OCT_EINVAL,
                            "[%s] %s: '%s' is not a shared-memory name ('/' then 1 to %zu "
                            "characters without '/')", sec, key, v, sizeof c->pub_shm_name - 6), 0;
        snprintf(c->pub_shm_name, sizeof c->pub_shm_name, "%s", v);
        return 1;
    case K_PUB_STATS:
        if (!parse_int(v, 0, 3600, &c->pub_stats_s))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not 0 (off) or a number of seconds "
                            "from 1 to 3600", sec, key, v), 0;
        return 1;
    case K_SNDHWM:
        if (!parse_int(v, 1, 1000000, &c->sndhwm))
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not an integer from 1 to 1000000",
                            sec, key, v), 0;
        return 1;
    case K_PROFILE_PATH:
    case K_SAVE_DIR: {
        char *dst = k == K_PROFILE_PATH ? c->profile_path : c->save_dir;
        oct_path_resolve(dst, OCT_PATH_MAX, x->base_dir, v);
        if (!*dst)
            return ctx_fail(x, OCT_EINVAL, "[%s] %s: path too long", sec, key), 0;
        return 1;
    }
    case K_LOG_LEVEL: {
        static const struct { const char *name; int level; } levels[] = {
            {"emerg", LOG_EMERG}, {"alert", LOG_ALERT},     {"crit", LOG_CRIT},
            {"err", LOG_ERR},     {"error", LOG_ERR},       {"warning", LOG_WARNING},
            {"warn", LOG_WARNING}, {"notice", LOG_NOTICE},  {"info", LOG_INFO},
            {"debug", LOG_DEBUG},
        };
        for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
            if (!strcasecmp(v, levels[i].name)) {
                c->log_level = levels[i].level;
                return 1;
            }
        if (parse_int(v, LOG_EMERG, LOG_DEBUG, &c->log_level))
            return 1;
        return ctx_fail(x, OCT_EINVAL,
                        "[%s] %s: '%s' is not a level (emerg, alert, crit, err, warning, notice, "
                        "info, debug or 0..7)",
                        sec, key, v), 0;
    }
    }
    return 0;
bad_word:
    return ctx_fail(x, OCT_EINVAL, "[%s] %s: '%s' is not one of %s", sec, key, v,
                    k == K_BACKEND     ? "auto, cuda, cpu"
                    : k == K_PRECISION ? "fp32, tf32"
                    : k == K_CUDA_GRAPH ? "auto, on, off"
                    : k == K_CUDA_CFD  ? "auto, fft, gemm"
                                       : "latest, all"), 0;
}

static int key_handler(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *x = user;
    if (x->err)
        return 0;
    if (!*section)
        return ctx_fail(x, OCT_EPARSE, "%s: key outside any [section]", name), 0;
    bool section_known = false;
    for (int k = 0; k < K_COUNT; k++) {
        if (strcmp(ini_keys[k].section, section))
            continue;
        section_known = true;
        if (strcmp(ini_keys[k].key, name))
            continue;
        if (x->seen[k])
            return ctx_fail(x, OCT_EPARSE, "[%s] %s: duplicate key (first set on line %d)",
                            section, name, x->seen[k]), 0;
        x->seen[k] = x->line;
        return set_value(x, k, value ? value : "");
    }
    if (!section_known) /* reader normally catches this first */
        return ctx_fail(x, OCT_EPARSE, "[%s]: unknown section", section), 0;
    char known[160] = "";
    for (int k = 0; k < K_COUNT; k++)
        if (!strcmp(ini_keys[k].section, section)) {
            size_t n = strlen(known);
            snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", ini_keys[k].key);
        }
    return ctx_fail(x, OCT_EPARSE, "[%s] %s: unknown key (known: %s)", section, name, known), 0;
}

void oct_daemon_config_default(oct_daemon_config *c)
{
    memset(c, 0, sizeof *c);
    c->backend = OCT_BACKEND_AUTO;
    c->device = 0;
    c->threads = 0;
    c->precision = OCT_PRECISION_FP32;
    snprintf(c->ring_frames, sizeof c->ring_frames, "/octd-frames");
    snprintf(c->ring_control, sizeof c->ring_control, "/octd-control");
    snprintf(c->ring_status, sizeof c->ring_status, "/octd-status");
    c->policy = 0;
    snprintf(c->endpoints[0], sizeof c->endpoints[0], "tcp://127.0.0.1:5556");
    c->endpoint_count = 1;
    c->sndhwm = 4;
    c->log_level = LOG_INFO;
    c->stale_ms = 2000;
    c->poll_us = 20;
    c->fail_engine = -1; /* the last engine */
    c->numa = true;
    c->timer_slack_ns = 1000;
    c->nice = OCT_NICE_AUTO;
    c->prefault = true;
    c->overlap_input = true;
    c->pub_copies = OCT_PUB_COPIES_AUTO; /* r5: zero-copy until a crowd holds half the pool */
    snprintf(c->pub_shm_name, sizeof c->pub_shm_name, "/octd-images");
}

oct_err oct_daemon_config_parse(oct_daemon_config *c, const char *text, size_t len,
                                const char *name, oct_error *e)
{
    if (!name)
        name = "(config)";
    if (!text && len)
        return oct_error_set(e, OCT_EINVAL, "%s: no text", name);
    /* parse into a copy: on error the caller's configuration is untouched */
    oct_daemon_config *tmp = malloc(sizeof *tmp);
    ini_ctx *x = calloc(1, sizeof *x);
    if (!tmp || !x) {
        free(tmp);
        free(x);
        return oct_error_set(e, OCT_ENOMEM, "%s: out of memory", name);
    }
    oct_daemon_config_default(tmp);
    snprintf(tmp->source_path, sizeof tmp->source_path, "%s", name);
    x->p = text ? text : "";
    x->end = x->p + len;
    x->name = name;
    x->c = tmp;
    x->e = e;
    oct_cfg_dirname(x->base_dir, sizeof x->base_dir, name);

    int rc = ini_parse_stream(line_reader, x, key_handler, x);
    oct_err err = OCT_OK;
    if (x->err && (rc <= 0 || rc >= x->err_line)) {
        err = x->err; /* ours came first (or stopped the reader) */
    } else if (rc > 0) {
        err = oct_error_set(e, OCT_EPARSE, "%s:%d: syntax error: expected '[section]' or 'key = value'",
                            name, rc);
    } else if (rc < 0) {
        err = oct_error_set(e, OCT_ENOMEM, "%s: the ini parser ran out of memory", name);
    }
    for (int i = 0; !err && tmp->pub_shm_endpoint[0] && i < tmp->endpoint_count; i++)
        if (!strcmp(tmp->endpoints[i], tmp->pub_shm_endpoint))
            err = oct_error_set(e, OCT_EINVAL, "%s: [publish] shm_endpoint '%s' is also an "
                                "endpoint: the header-only messages need one of their own",
                                name, tmp->pub_shm_endpoint);
    if (!err)
        *c = *tmp;
    free(tmp);
    free(x);
    return err;
}

oct_err oct_daemon_config_load(oct_daemon_config *c, const char *path, oct_error *e)
{
    if (!path || !*path)
        return oct_error_set(e, OCT_EINVAL, "no configuration file given");
    void *buf;
    size_t len;
    oct_err err = oct_cfg_read_file(path, 1u << 20, &buf, &len, e);
    if (err)
        return err == OCT_ENOMEM ? err : (oct_err)OCT_EIO;
    err = oct_daemon_config_parse(c, buf, len, path, e);
    free(buf);
    return err;
}
