/* octweb - the operator console in the browser (issue 16): serves a single
 * page, forwards octd's newest images to every browser over WebSockets and
 * writes control values and commands through the IPC library.
 *
 * Access: loopback by default and then open to local users; an address
 * beyond loopback requires an operator token (a viewer token may be given
 * too), and TLS is offered when a certificate is configured.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oct_docs.h"
#include "oct_ipc.h"
#include "octweb.h"

#define EX_USAGE 64
#define EX_CONFIG 78

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octweb [--config FILE] [--listen ADDR:PORT[s]] [--endpoint E]\n"
            "              [--control NAME] [--status NAME] [--root DIR] [--cert PEM]\n"
            "              [--operator-token-file F] [--viewer-token-file F] [--origin URL]...\n"
            "              [--max-clients N] [--check-config]\n"
            "The operator console: open http://ADDR:PORT/ in a browser.\n"
            "  --listen      civetweb listening port(s) [127.0.0.1:8080]; a trailing 's' is a\n"
            "                TLS port (needs --cert); several comma-separated\n"
            "  --endpoint    octd's ZeroMQ images [tcp://127.0.0.1:5556]\n"
            "  --control, --status   octd's shared blocks [%s, %s]\n"
            "  --root        the page's directory [next to the program: ../share/octd/octweb,\n"
            "                or the source tree's tools/octweb/www]\n"
            "  --cert        PEM file with the certificate and its private key (TLS)\n"
            "  --operator-token-file, --viewer-token-file   files holding the tokens; a\n"
            "                browser opens http://HOST:PORT/#token=TOKEN.  Required (operator)\n"
            "                when listening beyond loopback; with none, every local browser\n"
            "                is an operator\n"
            "  --origin      another allowed WebSocket Origin (e.g. a reverse proxy's URL)\n"
            "  --max-clients browsers at once [16, at most %d]\n"
            "Configuration file (ini): [web] listen, root, certificate, operator_token_file,\n"
            "viewer_token_file, origins, max_clients; [octd] endpoint, control, status.\n"
            "Command-line options override the file.\n" OCT_DOCS_HINT,
            OCT_CONTROL_DEFAULT, OCT_STATUS_DEFAULT, OCTWEB_CLIENTS_MAX);
}

static void on_signal(int sig) { atomic_store(&octweb_stop, true); }

/* A token file: its first line, without the newline; must be 16..127
 * printable characters and not readable by others. */
static oct_err read_token(const char *path, char *out, size_t cap, oct_error *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return oct_error_set(e, OCT_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0007)) {
        fclose(f);
        return oct_error_set(e, OCT_EINVAL, "%s: readable by others (chmod o-rwx)", path);
    }
    char line[256] = "";
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    size_t n = strlen(line);
    for (size_t i = 0; i < n; i++)
        if (line[i] <= ' ' || line[i] == 0x7f || line[i] == '&' || line[i] == '#')
            return oct_error_set(e, OCT_EINVAL, "%s: the token holds a space, control character, '&' or '#'", path);
    if (n < 16 || n >= cap)
        return oct_error_set(e, OCT_EINVAL, "%s: the token has %zu characters (16 to %zu)", path, n,
                             cap - 1);
    memcpy(out, line, n + 1);
    return OCT_OK;
}

typedef struct file_cfg {
    octweb_config *c;
    char operator_file[OCTWEB_PATH_MAX], viewer_file[OCTWEB_PATH_MAX];
    FILE *fp;
    int line; /* of the line being handled */
    char err[OCTWEB_PATH_MAX + 600];
} file_cfg;

/* inih's line reader, counting lines so that errors name them */
static char *read_line(char *str, int num, void *stream)
{
    file_cfg *f = stream;
    char *r = fgets(str, num, f->fp);
    if (r)
        f->line++;
    return r;
}

static int octweb_ini_pair(void *user, const char *section, const char *name, const char *value)
{
    file_cfg *f = user;
    int line = f->line;
    octweb_config *c = f->c;
    struct { const char *sec, *key; char *dst; size_t cap; } keys[] = {
        {"web", "listen", c->listen, sizeof c->listen},
        {"web", "root", c->root, sizeof c->root},
        {"web", "certificate", c->cert, sizeof c->cert},
        {"web", "operator_token_file", f->operator_file, sizeof f->operator_file},
        {"web", "viewer_token_file", f->viewer_file, sizeof f->viewer_file},
        {"web", "origins", c->origins, sizeof c->origins},
        {"octd", "endpoint", c->endpoint, sizeof c->endpoint},
        {"octd", "control", c->control, sizeof c->control},
        {"octd", "status", c->status, sizeof c->status},
    };
    if (!name) /* a section line */
        return 1;
    if (!strcmp(section, "web") && !strcmp(name, "max_clients")) {
        char *end;
        long v = strtol(value, &end, 10);
        if (*end || v < 1 || v > OCTWEB_CLIENTS_MAX) {
            snprintf(f->err, sizeof f->err, "%s:%d: [web] max_clients: '%s' is not 1..%d",
                     c->source, line, value, OCTWEB_CLIENTS_MAX);
            return 0;
        }
        c->max_clients = (int)v;
        return 1;
    }
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (strcmp(section, keys[i].sec) || strcmp(name, keys[i].key))
            continue;
        if (strlen(value) >= keys[i].cap) {
            snprintf(f->err, sizeof f->err, "%s:%d: [%s] %s: too long", c->source, line, section, name);
            return 0;
        }
        snprintf(keys[i].dst, keys[i].cap, "%s", value);
        return 1;
    }
    snprintf(f->err, sizeof f->err, "%s:%d: unknown key [%s] %s", c->source, line, section, name);
    return 0;
}

/* Every address of a listening_ports list is 127.x, [::1] or localhost. */
static bool all_loopback(const char *listen)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", listen);
    for (char *p = buf, *t; (t = strsep(&p, ",")) != NULL;) {
        while (*t == ' ')
            t++;
        if (strncmp(t, "127.", 4) && strncmp(t, "[::1]:", 6) && strncmp(t, "localhost:", 10))
            return false;
    }
    return true;
}

/* A port of the list ends in 's' (civetweb's TLS mark). */
static bool has_tls_port(const char *listen)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", listen);
    for (char *p = buf, *t; (t = strsep(&p, ",")) != NULL;) {
        size_t n = strlen(t);
        while (n && t[n - 1] == ' ')
            n--;
        if (n && t[n - 1] == 's')
            return true;
    }
    return false;
}

/* The page next to the program: installed (../share/octd/octweb) or in the
 * source tree (bin/octweb -> ../tools/octweb/www). */
static void default_root(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    static const char *const cand[] = {"/../share/octd/octweb", "/../tools/octweb/www",
                                       "/../../../tools/octweb/www"};
    for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s%s/index.html", exe, cand[i]);
        if (access(p, R_OK) == 0) {
            snprintf(p, sizeof p, "%s%s", exe, cand[i]);
            if (!realpath(p, out))
                snprintf(out, cap, "%.*s", (int)cap - 1, p);
            return;
        }
    }
}

/* civetweb 1.15 (Debian 12) loads libssl.so itself and calls
 * SSL_get_peer_certificate, which OpenSSL 3 does not export: with such a
 * libssl, load octweb-tls.so (soname libssl.so, next to the program or in
 * ../lib/octd/) first, so that civetweb's dlopen("libssl.so") gets it. */
static oct_err prepare_tls(oct_error *e)
{
    void *ssl = dlopen("libssl.so.3", RTLD_LAZY | RTLD_LOCAL);
    if (!ssl || dlsym(ssl, "SSL_get_peer_certificate"))
        return OCT_OK; /* not OpenSSL 3, or one that has it: civetweb copes */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        static const char *const cand[] = {"/octweb-tls.so", "/../lib/octd/octweb-tls.so"};
        for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
            char p[PATH_MAX + 40];
            snprintf(p, sizeof p, "%s%s", exe, cand[i]);
            if (access(p, R_OK) == 0 && dlopen(p, RTLD_NOW | RTLD_GLOBAL))
                return OCT_OK;
        }
    }
    return oct_error_set(e, OCT_EINVAL, "TLS: civetweb needs SSL_get_peer_certificate, which this "
                         "OpenSSL 3 lacks, and octweb-tls.so (installed with octweb) is not found "
                         "next to the program or in ../lib/octd/");
}

int main(int argc, char **argv)
{
    static octweb_config cfg;
    static file_cfg fc;
    fc.c = &cfg;
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:8080");
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "tcp://127.0.0.1:5556");
    snprintf(cfg.control, sizeof cfg.control, "%s", OCT_CONTROL_DEFAULT);
    snprintf(cfg.status, sizeof cfg.status, "%s", OCT_STATUS_DEFAULT);
    cfg.max_clients = 16;
    enum { O_LISTEN = 256, O_ENDPOINT, O_CONTROL, O_STATUS, O_ROOT, O_CERT, O_OPTOK, O_VWTOK,
           O_ORIGIN, O_MAX, O_CHECK };
    static const struct option longs[] = {
        {"config", required_argument, NULL, 'c'},       {"listen", required_argument, NULL, O_LISTEN},
        {"endpoint", required_argument, NULL, O_ENDPOINT}, {"control", required_argument, NULL, O_CONTROL},
        {"status", required_argument, NULL, O_STATUS},  {"root", required_argument, NULL, O_ROOT},
        {"cert", required_argument, NULL, O_CERT},
        {"operator-token-file", required_argument, NULL, O_OPTOK},
        {"viewer-token-file", required_argument, NULL, O_VWTOK},
        {"origin", required_argument, NULL, O_ORIGIN},  {"max-clients", required_argument, NULL, O_MAX},
        {"check-config", no_argument, NULL, O_CHECK},   {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},            {NULL, 0, NULL, 0}};
    /* the file first, then the options over it */
    for (int i = 1; i < argc - 1; i++)
        if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "-c"))
            snprintf(cfg.source, sizeof cfg.source, "%s", argv[i + 1]);
    if (cfg.source[0]) {
        if (!(fc.fp = fopen(cfg.source, "r"))) {
            fprintf(stderr, "octweb: %s: %s\n", cfg.source, strerror(errno));
            return EX_CONFIG;
        }
        int rc = ini_parse_stream(read_line, &fc, octweb_ini_pair, &fc);
        fclose(fc.fp);
        if (rc > 0) {
            if (!fc.err[0])
                snprintf(fc.err, sizeof fc.err, "%s:%d: syntax error", cfg.source, rc);
            fprintf(stderr, "octweb: %s\n", fc.err);
            return EX_CONFIG;
        }
    }
    bool check = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:hV", longs, NULL)) != -1) {
        char *dst = NULL;
        size_t cap = 0;
        switch (opt) {
        case 'c': break;
        case O_LISTEN: dst = cfg.listen; cap = sizeof cfg.listen; break;
        case O_ENDPOINT: dst = cfg.endpoint; cap = sizeof cfg.endpoint; break;
        case O_CONTROL: dst = cfg.control; cap = sizeof cfg.control; break;
        case O_STATUS: dst = cfg.status; cap = sizeof cfg.status; break;
        case O_ROOT: dst = cfg.root; cap = sizeof cfg.root; break;
        case O_CERT: dst = cfg.cert; cap = sizeof cfg.cert; break;
        case O_OPTOK: dst = fc.operator_file; cap = sizeof fc.operator_file; break;
        case O_VWTOK: dst = fc.viewer_file; cap = sizeof fc.viewer_file; break;
        case O_ORIGIN: {
            size_t l = strlen(cfg.origins);
            snprintf(cfg.origins + l, sizeof cfg.origins - l, "%s%s", l ? "," : "", optarg);
            break;
        }
        case O_MAX: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > OCTWEB_CLIENTS_MAX) {
                fprintf(stderr, "octweb: --max-clients: '%s' is not 1..%d\n", optarg, OCTWEB_CLIENTS_MAX);
                return EX_USAGE;
            }
            cfg.max_clients = (int)v;
            break;
        }
        case O_CHECK: check = true; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("octweb %s\n", OCT_VERSION); return 0;
        default: usage(stderr); return EX_USAGE;
        }
        if (dst) {
            if (strlen(optarg) >= cap) {
                fprintf(stderr, "octweb: %s: too long\n", argv[optind - 1]);
                return EX_USAGE;
            }
            snprintf(dst, cap, "%s", optarg);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "octweb: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EX_USAGE;
    }
    oct_error e;
    if ((fc.operator_file[0] &&
         read_token(fc.operator_file, cfg.operator_token, sizeof cfg.operator_token, &e) != OCT_OK) ||
        (fc.viewer_file[0] &&
         read_token(fc.viewer_file, cfg.viewer_token, sizeof cfg.viewer_token, &e) != OCT_OK)) {
        fprintf(stderr, "octweb: %s\n", e.msg);
        return EX_CONFIG;
    }
    if (cfg.viewer_token[0] && !cfg.operator_token[0]) {
        fprintf(stderr, "octweb: a viewer token without an operator token would leave nobody "
                        "able to change values: give operator_token_file too\n");
        return EX_CONFIG;
    }
    if (cfg.viewer_token[0] && !strcmp(cfg.viewer_token, cfg.operator_token)) {
        fprintf(stderr, "octweb: the viewer and operator tokens are the same\n");
        return EX_CONFIG;
    }
    cfg.loopback = all_loopback(cfg.listen);
    if (!cfg.loopback && !cfg.operator_token[0]) {
        fprintf(stderr, "octweb: listening on '%s' (beyond loopback) requires an operator token "
                        "(operator_token_file / --operator-token-file)\n", cfg.listen);
        return EX_CONFIG;
    }
    if (has_tls_port(cfg.listen) && !cfg.cert[0]) {
        fprintf(stderr, "octweb: '%s' has a TLS port (s) but no certificate is configured\n", cfg.listen);
        return EX_CONFIG;
    }
    if (cfg.cert[0] && access(cfg.cert, R_OK) != 0) {
        fprintf(stderr, "octweb: certificate %s: %s\n", cfg.cert, strerror(errno));
        return EX_CONFIG;
    }
    if (cfg.cert[0] && prepare_tls(&e) != OCT_OK) {
        fprintf(stderr, "octweb: %s\n", e.msg);
        return EX_CONFIG;
    }
    if (!cfg.root[0])
        default_root(cfg.root, sizeof cfg.root);
    char index[OCTWEB_PATH_MAX + 64];
    snprintf(index, sizeof index, "%s/index.html", cfg.root);
    if (!cfg.root[0] || access(index, R_OK) != 0) {
        fprintf(stderr, "octweb: the page is not found (%s): give --root DIR\n",
                cfg.root[0] ? index : "no index.html next to the program");
        return EX_CONFIG;
    }
    if (check) {
        printf("octweb: configuration ok (listen %s, %s)\n", cfg.listen,
               cfg.operator_token[0] ? "tokens" : "loopback without tokens");
        return 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t feed;
    if (octweb_feed_start(cfg.endpoint, &feed, &e) != OCT_OK) {
        fprintf(stderr, "octweb: %s\n", e.msg);
        return EX_CONFIG;
    }
    if (octweb_serve(&cfg, &e) != OCT_OK) {
        fprintf(stderr, "<2>octweb: %s\n", e.msg);
        atomic_store(&octweb_stop, true);
        pthread_join(feed, NULL);
        return 69;
    }
    pthread_join(feed, NULL);
    return 0;
}
