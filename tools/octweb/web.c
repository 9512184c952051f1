/* web.c - octweb's HTTP and WebSocket side, on civetweb.
 *
 * Every WebSocket client has its own sender thread: it writes out the newest
 * image of each view the client asked for, one at a time per view, and only
 * after the page acknowledged painting the previous one, so a slow browser
 * only slows itself and never builds a backlog (stale images are dropped).
 * Text messages to a client (replies, values, health) are queued for the
 * same thread; health and values are coalesced to the latest.
 *
 * Page -> octweb (text, tab-separated fields):
 *   view SLOT TOPIC W H Q    show TOPIC in view SLOT, W x H device pixels (0: any),
 *                            en-face index Q (empty TOPIC: nothing)
 *   ack SLOT                 the last image of SLOT is painted
 *   set ID KEY=VALUE ...     one generation (operators only)
 *   cmd ID NAME [ARG ...]    online|snapshot|review|save_raw|save_images|
 *                            record [raw] [products] [frames=N] [seconds=S]|record_stop|
 *                            reference [clear|auto]
 *   alive                    keep-alive (every 20 s; silence for 120 s closes)
 * octweb -> page: JSON text {"type": "hello"|"values"|"health"|"reply", ...}
 * and binary images: u32 (LE) length of a JSON header, the header
 * {"slot","topic","seq","rows","cols","fy","fx","q","t_recv_ns","t_send_ns",
 * "h": octd's own header}, then rows x cols u8 pixels.
 */
#include <civetweb.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oct_ipc.h"
#include "oct_options.h"
#include "octweb.h"

#define SLOTS 16
#define TEXT_QUEUE 64
#define ACK_TIMEOUT_NS 1000000000ull /* an image never acknowledged is resent after this */
#define REPLY_TIMEOUT_NS 3000000000ull

enum role { ROLE_VIEWER = 0, ROLE_OPERATOR = 1 };

typedef struct view_sub {
    char topic[64];
    uint32_t w, h;
    int q;
    uint64_t sent_seq;  /* image seq last sent; 0 none */
    bool inflight;
    uint64_t sent_ns;
} view_sub;

typedef struct client {
    int id;
    struct mg_connection *conn;
    int role;
    bool closing;
    bool has_thread;
    pthread_t thr;
    view_sub subs[SLOTS];
    char *text[TEXT_QUEUE];
    int ntext;
    char *health, *values; /* coalesced: only the latest is sent */
    uint64_t images_sent, images_skipped;
} client;

typedef struct pending {
    bool used, is_cmd;
    int client_id, req_id;
    uint64_t gen;       /* generation written, or command_seq issued */
    uint64_t deadline;  /* monotonic ns */
} pending;

/* all of these under octweb_lock */
static client *clients[OCTWEB_CLIENTS_MAX];
static int next_client_id = 1;
static pending pend[64];
static const octweb_config *g_cfg;
/* the IPC handles: used by civetweb threads and the control thread */
static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static oct_control *g_ctl;
static oct_status *g_st;
static char *g_schema;
static char *g_values; /* the latest values message, for clients that join (octweb_lock) */

/* ---------------- small string builder ---------------- */
typedef struct sb {
    char *p;
    size_t len, cap;
    bool oom;
} sb;

static void sb_put(sb *s, const char *t, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *q = realloc(s->p, cap);
        if (!q) {
            s->oom = true;
            return;
        }
        s->p = q;
        s->cap = cap;
    }
    memcpy(s->p + s->len, t, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void sb_printf(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *s, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_put(s, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string (RFC 8259 escapes) of at most max bytes of t. */
static void sb_str(sb *s, const char *t, size_t max)
{
    sb_put(s, "\"", 1);
    for (size_t i = 0; i < max && t[i]; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sb_put(s, esc, 2);
        } else if (c < 0x20) {
            sb_printf(s, "\\u%04x", c);
        } else {
            sb_put(s, (const char *)&c, 1);
        }
    }
    sb_put(s, "\"", 1);
}

static void sb_cat(sb *s, const char *t) { sb_put(s, t, strlen(t)); }

static char *sb_take(sb *s)
{
    if (s->oom) {
        free(s->p);
        return NULL;
    }
    return s->p;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------- queueing to clients (octweb_lock held) ---------------- */
static client *client_by_id(int id)
{
    for (int i = 0; i < OCTWEB_CLIENTS_MAX; i++)
        if (clients[i] && clients[i]->id == id)
            return clients[i];
    return NULL;
}

static void queue_text(client *c, char *msg)
{
    if (!msg)
        return;
    if (c->closing || c->ntext == TEXT_QUEUE) {
        free(msg); /* a client that does not read its replies loses them */
        return;
    }
    c->text[c->ntext++] = msg;
    pthread_cond_broadcast(&octweb_cond);
}

static void reply(int client_id, int req_id, bool ok, uint64_t gen, const char *message)
{
    sb s = {0};
    sb_printf(&s, "{\"type\":\"reply\",\"id\":%d,\"ok\":%s,\"gen\":%" PRIu64 ",\"message\":", req_id,
              ok ? "true" : "false", gen);
    sb_str(&s, message ? message : "", 1024);
    sb_cat(&s, "}");
    client *c = client_by_id(client_id);
    if (c)
        queue_text(c, sb_take(&s));
    else
        free(sb_take(&s));
}

static void broadcast_coalesced(char *msg, bool health)
{
    if (!msg)
        return;
    for (int i = 0; i < OCTWEB_CLIENTS_MAX; i++) {
        client *c = clients[i];
        if (!c || c->closing)
            continue;
        char **slot = health ? &c->health : &c->values;
        free(*slot);
        *slot = strdup(msg);
    }
    free(msg);
    pthread_cond_broadcast(&octweb_cond);
}

/* ---------------- the sender thread of one client ---------------- */
static bool send_image(client *c, int slot, octweb_image *im, const view_sub *v)
{
    uint32_t rows, cols;
    const uint8_t *px = im->px;
    int q = 0;
    if (im->ndim == 3) { /* an en-face stack [Q][L][N]: the chosen q only */
        q = v->q < 0 ? 0 : v->q >= (int)im->shape[0] ? (int)im->shape[0] - 1 : v->q;
        rows = im->shape[1];
        cols = im->shape[2];
        px += (size_t)q * rows * cols;
    } else {
        rows = im->shape[0];
        cols = im->shape[1];
    }
    /* scaled on the server only when that saves at least half the pixels
     * along an axis: integer box averaging, no resampling artefacts */
    uint32_t fy = v->h && rows / v->h >= 2 ? rows / v->h : 1;
    uint32_t fx = v->w && cols / v->w >= 2 ? cols / v->w : 1;
    uint32_t orows = (rows + fy - 1) / fy, ocols = (cols + fx - 1) / fx;
    sb h = {0};
    sb_printf(&h, "{\"slot\":%d,\"topic\":", slot);
    sb_str(&h, im->topic, sizeof im->topic);
    sb_printf(&h, ",\"seq\":%" PRIu64 ",\"rows\":%u,\"cols\":%u,\"fy\":%u,\"fx\":%u,\"q\":%d,"
                  "\"t_recv_ns\":%" PRIu64 ",\"t_send_ns\":%" PRIu64 ",\"h\":",
              im->seq, orows, ocols, fy, fx, q, im->t_recv_ns, octweb_now_ns());
    sb_put(&h, im->header, im->header_len);
    sb_cat(&h, "}");
    if (h.oom) {
        free(h.p);
        return false;
    }
    size_t total = 4 + h.len + (size_t)orows * ocols;
    uint8_t *buf = malloc(total);
    if (!buf) {
        free(h.p);
        return false;
    }
    uint32_t hl = (uint32_t)h.len;
    buf[0] = (uint8_t)hl;
    buf[1] = (uint8_t)(hl >> 8);
    buf[2] = (uint8_t)(hl >> 16);
    buf[3] = (uint8_t)(hl >> 24);
    memcpy(buf + 4, h.p, h.len);
    if (fy == 1 && fx == 1)
        memcpy(buf + 4 + h.len, px, (size_t)rows * cols);
    else
        octweb_downscale(px, rows, cols, fy, fx, buf + 4 + h.len);
    free(h.p);
    int rc = mg_websocket_write(c->conn, MG_WEBSOCKET_OPCODE_BINARY, (const char *)buf, total);
    free(buf);
    return rc > 0;
}

static octweb_image *find_image(const char *topic)
{
    for (int i = 0; i < octweb_images.count; i++)
        if (!strcmp(octweb_images.img[i]->topic, topic))
            return octweb_images.img[i];
    return NULL;
}

static void *sender_main(void *arg)
{
    client *c = arg;
    pthread_mutex_lock(&octweb_lock);
    while (!c->closing) {
        char *msg = NULL;
        octweb_image *im = NULL;
        int slot = -1;
        view_sub v;
        if (c->ntext) {
            msg = c->text[0];
            memmove(c->text, c->text + 1, (size_t)(c->ntext - 1) * sizeof *c->text);
            c->ntext--;
        } else if (c->values) {
            msg = c->values;
            c->values = NULL;
        } else if (c->health) {
            msg = c->health;
            c->health = NULL;
        } else {
            uint64_t now = mono_ns();
            for (int i = 0; i < SLOTS && !im; i++) {
                view_sub *s = &c->subs[i];
                if (!s->topic[0])
                    continue;
                if (s->inflight && now - s->sent_ns < ACK_TIMEOUT_NS)
                    continue;
                octweb_image *cur = find_image(s->topic);
                if (!cur || cur->seq == s->sent_seq)
                    continue;
                if (s->sent_seq && cur->seq > s->sent_seq + 1)
                    c->images_skipped += cur->seq - s->sent_seq - 1;
                im = cur;
                octweb_image_ref(im);
                slot = i;
                s->sent_seq = cur->seq;
                s->inflight = true;
                s->sent_ns = now;
                v = *s;
            }
        }
        if (!msg && !im) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 200000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&octweb_cond, &octweb_lock, &ts);
            continue;
        }
        pthread_mutex_unlock(&octweb_lock);
        bool ok;
        if (msg) {
            ok = mg_websocket_write(c->conn, MG_WEBSOCKET_OPCODE_TEXT, msg, strlen(msg)) > 0;
            free(msg);
        } else {
            ok = send_image(c, slot, im, &v);
            octweb_image_unref(im);
        }
        pthread_mutex_lock(&octweb_lock);
        if (!ok)
            break; /* the connection is going: civetweb calls close_handler */
        if (im)
            c->images_sent++;
    }
    pthread_mutex_unlock(&octweb_lock);
    return NULL;
}

/* ---------------- access ---------------- */
/* Constant-time comparison of a presented token with a configured one. */
static bool token_eq(const char *given, const char *want)
{
    size_t gl = strlen(given), wl = strlen(want);
    unsigned diff = (unsigned)(gl ^ wl);
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned)(unsigned char)want[i] ^ (unsigned)(unsigned char)(i < gl ? given[i] : 0);
    return wl > 0 && diff == 0;
}

static bool origin_allowed(const struct mg_connection *conn)
{
    const char *origin = mg_get_header(conn, "Origin");
    const char *host = mg_get_header(conn, "Host");
    const struct mg_request_info *ri = mg_get_request_info(conn);
    if (!origin || !host)
        return false;
    char self[300];
    snprintf(self, sizeof self, "%s://%s", ri->is_ssl ? "https" : "http", host);
    if (!strcmp(origin, self))
        return true;
    /* the configured extra origins, comma-separated */
    const char *p = g_cfg->origins;
    size_t ol = strlen(origin);
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && *p == ' ')
            p++, n--;
        if (n == ol && !strncmp(p, origin, n))
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

static int ws_connect(const struct mg_connection *conn, void *cbdata)
{
    const struct mg_request_info *ri = mg_get_request_info(conn);
    if (!origin_allowed(conn)) {
        fprintf(stderr, "<4>octweb: WebSocket from %s refused: Origin '%s' is not this server's\n",
                ri->remote_addr, mg_get_header(conn, "Origin") ? mg_get_header(conn, "Origin") : "");
        return 1;
    }
    char token[160] = "";
    if (ri->query_string)
        mg_get_var(ri->query_string, strlen(ri->query_string), "token", token, sizeof token);
    int role;
    if (!g_cfg->operator_token[0] && !g_cfg->viewer_token[0])
        role = ROLE_OPERATOR; /* loopback without tokens (main refuses it otherwise) */
    else if (token_eq(token, g_cfg->operator_token))
        role = ROLE_OPERATOR;
    else if (token_eq(token, g_cfg->viewer_token))
        role = ROLE_VIEWER;
    else {
        fprintf(stderr, "<5>octweb: WebSocket from %s refused: %s token\n", ri->remote_addr,
                token[0] ? "wrong" : "no");
        return 1;
    }
    client *c = calloc(1, sizeof *c);
    if (!c)
        return 1;
    c->role = role;
    pthread_mutex_lock(&octweb_lock);
    int i = 0;
    while (i < OCTWEB_CLIENTS_MAX && clients[i])
        i++;
    if (i == OCTWEB_CLIENTS_MAX || i >= g_cfg->max_clients) {
        pthread_mutex_unlock(&octweb_lock);
        fprintf(stderr, "<4>octweb: WebSocket from %s refused: %d clients already\n",
                ri->remote_addr, g_cfg->max_clients);
        free(c);
        return 1;
    }
    c->id = next_client_id++;
    clients[i] = c;
    pthread_mutex_unlock(&octweb_lock);
    mg_set_user_connection_data(conn, c);
    return 0;
}

static void ws_ready(struct mg_connection *conn, void *cbdata)
{
    client *c = mg_get_user_connection_data(conn);
    if (!c)
        return;
    sb s = {0};
    sb_printf(&s, "{\"type\":\"hello\",\"version\":\"%s\",\"client\":%d,\"role\":\"%s\",\"schema\":",
              OCT_VERSION, c->id, c->role == ROLE_OPERATOR ? "operator" : "viewer");
    sb_put(&s, g_schema, strlen(g_schema));
    sb_cat(&s, "}");
    pthread_mutex_lock(&octweb_lock);
    c->conn = conn;
    queue_text(c, sb_take(&s));
    if (g_values)
        c->values = strdup(g_values);
    c->has_thread = pthread_create(&c->thr, NULL, sender_main, c) == 0;
    pthread_mutex_unlock(&octweb_lock);
}

static void ws_close(const struct mg_connection *conn, void *cbdata)
{
    client *c = mg_get_user_connection_data(conn);
    if (!c)
        return;
    pthread_mutex_lock(&octweb_lock);
    c->closing = true;
    pthread_cond_broadcast(&octweb_cond);
    pthread_mutex_unlock(&octweb_lock);
    if (c->has_thread)
        pthread_join(c->thr, NULL);
    pthread_mutex_lock(&octweb_lock);
    for (int i = 0; i < OCTWEB_CLIENTS_MAX; i++)
        if (clients[i] == c)
            clients[i] = NULL;
    pthread_mutex_unlock(&octweb_lock);
    for (int i = 0; i < c->ntext; i++)
        free(c->text[i]);
    free(c->health);
    free(c->values);
    free(c);
}

/* ---------------- values and commands ---------------- */
typedef struct assign_args {
    char **kv;
    int n;
    oct_error *e;
    bool failed;
} assign_args;

/* KEY=VALUE through the option table, as `octctl set` does: syntax, names
 * and what the field can hold are checked here (the table's message, naming
 * the key); ranges and rules by octd on the whole generation, whose reason
 * comes back through the status block. */
static void apply_assignments(oct_control_values *v, void *arg)
{
    assign_args *a = arg;
    for (int i = 0; i < a->n && !a->failed; i++) {
        char key[80];
        const char *eq = strchr(a->kv[i], '=');
        size_t kl = eq ? (size_t)(eq - a->kv[i]) : 0;
        if (!eq || kl == 0 || kl >= sizeof key) {
            oct_error_set(a->e, OCT_EINVAL, "'%.60s': expected KEY=VALUE", a->kv[i]);
            a->failed = true;
            break;
        }
        memcpy(key, a->kv[i], kl);
        key[kl] = '\0';
        const oct_option *o = oct_option_find(key);
        if (!o) {
            const char *near = oct_option_suggest(key);
            oct_error_set(a->e, OCT_EINVAL, "%s: unknown key%s%s%s", key, near ? " (did you mean " : "",
                          near ? near : "", near ? "?)" : "");
            a->failed = true;
        } else if (oct_option_parse_unchecked(o, eq + 1, v, a->e) != OCT_OK) {
            a->failed = true;
        }
    }
}

static void add_pending(int client_id, int req_id, bool is_cmd, uint64_t gen)
{
    for (int i = 0; i < 64; i++) {
        if (!pend[i].used) {
            pend[i] = (pending){true, is_cmd, client_id, req_id, gen, mono_ns() + REPLY_TIMEOUT_NS};
            return;
        }
    }
    reply(client_id, req_id, false, gen, "octweb: too many requests in flight");
}

/* set ID KEY=VALUE ...: every value is parsed first (the parse error names the
 * key), then all are written as one generation; octd's verdict comes later. */
static void do_set(client *c, int id, char **kv, int n)
{
    oct_error e = {""};
    if (c->role != ROLE_OPERATOR) {
        pthread_mutex_lock(&octweb_lock);
        reply(c->id, id, false, 0, "read-only: this console is a viewer (an operator token is needed)");
        pthread_mutex_unlock(&octweb_lock);
        return;
    }
    pthread_mutex_lock(&ipc_lock);
    oct_err rc = OCT_OK;
    uint64_t gen = 0;
    if (!g_ctl) {
        rc = OCT_ENOENT;
        snprintf(e.msg, sizeof e.msg, "control block %s is not there (is octd running?)",
                 g_cfg->control);
    } else {
        oct_control_values v;
        uint64_t g;
        assign_args a = {kv, n, &e, false};
        if (oct_control_read(g_ctl, 100, &v, &g) != OCT_OK) {
            rc = OCT_EAGAIN;
            snprintf(e.msg, sizeof e.msg, "control block busy, try again");
        } else if (apply_assignments(&v, &a), a.failed) {
            rc = OCT_EINVAL;
        } else {
            a.failed = false;
            rc = oct_control_write(g_ctl, apply_assignments, &a, &gen, &e);
            if (rc == OCT_OK && a.failed)
                rc = OCT_EINVAL;
        }
    }
    pthread_mutex_unlock(&ipc_lock);
    pthread_mutex_lock(&octweb_lock);
    if (rc != OCT_OK)
        reply(c->id, id, false, gen, e.msg);
    else
        add_pending(c->id, id, false, gen);
    pthread_mutex_unlock(&octweb_lock);
}

static void do_command(client *c, int id, char **args, int n)
{
    char why[600] = "";
    uint32_t command = 0, flags = 0, frames = 0;
    double seconds = 0;
    for (uint32_t i = OCT_CMD_ONLINE; i <= OCT_CMD_REFERENCE; i++)
        if (n > 0 && oct_command_name(i) && !strcmp(args[0], oct_command_name(i)))
            command = i;
    if (c->role != ROLE_OPERATOR)
        snprintf(why, sizeof why, "read-only: this console is a viewer (an operator token is needed)");
    else if (!command)
        snprintf(why, sizeof why, "unknown command '%.40s'", n > 0 ? args[0] : "");
    for (int i = 1; i < n && !why[0]; i++) {
        char *end;
        if (command == OCT_CMD_RECORD && !strcmp(args[i], "raw"))
            flags |= OCT_RECORD_RAW;
        else if (command == OCT_CMD_RECORD && !strcmp(args[i], "products"))
            flags |= OCT_RECORD_PRODUCTS;
        else if (command == OCT_CMD_RECORD && !strncmp(args[i], "frames=", 7) &&
                 (errno = 0, frames = (uint32_t)strtoul(args[i] + 7, &end, 10), !*end && !errno))
            ;
        else if (command == OCT_CMD_RECORD && !strncmp(args[i], "seconds=", 8) &&
                 (seconds = strtod(args[i] + 8, &end), !*end && isfinite(seconds) && seconds >= 0))
            ;
        else if (command == OCT_CMD_REFERENCE && !strcmp(args[i], "clear"))
            flags = OCT_REFERENCE_CLEAR;
        else if (command == OCT_CMD_REFERENCE && !strcmp(args[i], "auto"))
            flags = OCT_REFERENCE_AUTO;
        else
            snprintf(why, sizeof why, "%s: bad argument '%.40s'", args[0], args[i]);
    }
    oct_error e = {""};
    uint64_t seq = 0;
    if (!why[0]) {
        pthread_mutex_lock(&ipc_lock);
        if (!g_ctl)
            snprintf(why, sizeof why, "control block %s is not there (is octd running?)", g_cfg->control);
        else if (oct_control_command_args(g_ctl, command, flags, frames, seconds, &seq, &e) != OCT_OK)
            snprintf(why, sizeof why, "%s", e.msg);
        pthread_mutex_unlock(&ipc_lock);
    }
    pthread_mutex_lock(&octweb_lock);
    if (why[0])
        reply(c->id, id, false, 0, why);
    else
        add_pending(c->id, id, true, seq);
    pthread_mutex_unlock(&octweb_lock);
}

static int ws_data(struct mg_connection *conn, int bits, char *data, size_t len, void *cbdata)
{
    client *c = mg_get_user_connection_data(conn);
    int op = bits & 0xf;
    if (!c || op == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE)
        return 0;
    if (op != MG_WEBSOCKET_OPCODE_TEXT || len == 0 || len > 4096)
        return 1;
    char buf[4097];
    memcpy(buf, data, len);
    buf[len] = '\0';
    char *f[40];
    int n = 0;
    for (char *p = buf, *t; n < 40 && (t = strsep(&p, "\t")) != NULL;)
        f[n++] = t;
    if (!strcmp(f[0], "view") && n >= 6) {
        int slot = atoi(f[1]);
        if (slot < 0 || slot >= SLOTS)
            return 1;
        pthread_mutex_lock(&octweb_lock);
        view_sub *s = &c->subs[slot];
        if (strcmp(s->topic, f[2]) != 0) {
            snprintf(s->topic, sizeof s->topic, "%s", f[2]);
            s->sent_seq = 0;
            s->inflight = false;
        }
        s->w = (uint32_t)strtoul(f[3], NULL, 10);
        s->h = (uint32_t)strtoul(f[4], NULL, 10);
        if (s->q != atoi(f[5]))
            s->sent_seq = 0; /* another q: send the newest stack again */
        s->q = atoi(f[5]);
        pthread_cond_broadcast(&octweb_cond);
        pthread_mutex_unlock(&octweb_lock);
    } else if (!strcmp(f[0], "ack") && n >= 2) {
        int slot = atoi(f[1]);
        if (slot >= 0 && slot < SLOTS) {
            pthread_mutex_lock(&octweb_lock);
            c->subs[slot].inflight = false;
            pthread_cond_broadcast(&octweb_cond);
            pthread_mutex_unlock(&octweb_lock);
        }
    } else if (!strcmp(f[0], "alive")) {
        /* keep-alive of a page whose views are all paused (hidden tab) */
    } else if (!strcmp(f[0], "set") && n >= 3) {
        do_set(c, atoi(f[1]), f + 2, n - 2);
    } else if (!strcmp(f[0], "cmd") && n >= 3) {
        do_command(c, atoi(f[1]), f + 2, n - 2);
    }
    return 1;
}

/* ---------------- control thread: values, verdicts, health ---------------- */
static void open_ipc(void)
{
    oct_error e;
    if (!g_ctl && oct_control_open(&g_ctl, g_cfg->control, true, &e) != OCT_OK)
        g_ctl = NULL;
    if (!g_st && oct_status_open(&g_st, g_cfg->status, &e) != OCT_OK)
        g_st = NULL;
}

/* {"type":"values"}: every option of the table as oct_option_format()
 * writes it (what oct_option_parse() reads back). */
static char *values_json(const oct_control_values *v, uint64_t gen)
{
    sb s = {0};
    sb_printf(&s, "{\"type\":\"values\",\"gen\":%" PRIu64 ",\"values\":{", gen);
    char val[256];
    for (size_t i = 0; i < oct_options_count(); i++) {
        const oct_option *o = oct_option_at(i);
        int n = oct_option_format(o, v, val, sizeof val);
        if (n < 0 || (size_t)n >= sizeof val)
            continue;
        if (i)
            sb_cat(&s, ",");
        sb_str(&s, o->key, 64);
        sb_cat(&s, ":");
        sb_str(&s, val, sizeof val);
    }
    sb_cat(&s, "}}");
    return sb_take(&s);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static char *health_json(const oct_status_block *b, bool have, double fps, uint32_t p50,
                         uint32_t p99, bool ctl)
{
    sb s = {0};
    static const char *const rec[] = {"idle", "recording", "done", "failed"};
    sb_printf(&s, "{\"type\":\"health\",\"octd\":%s,\"control\":%s", have ? "true" : "false",
              ctl ? "true" : "false");
    if (have) {
        sb_cat(&s, ",\"state\":");
        sb_str(&s, oct_daemon_state_name(b->state), 32);
        sb_cat(&s, ",\"backend\":");
        sb_str(&s, b->backend, sizeof b->backend);
        sb_cat(&s, ",\"device\":");
        sb_str(&s, b->device, sizeof b->device);
        sb_printf(&s, ",\"pid\":%" PRIu64 ",\"geometry\":[%u,%u,%u],\"applied_gen\":%" PRIu64
                      ",\"rejected_gen\":%" PRIu64,
                  b->pid, b->ring_lines, b->ring_ascans, b->ring_samples, b->applied_gen,
                  b->rejected_gen);
        sb_cat(&s, ",\"rejected_reason\":");
        sb_str(&s, b->rejected_reason, sizeof b->rejected_reason);
        sb_cat(&s, ",\"command_message\":");
        sb_str(&s, b->command_message, sizeof b->command_message);
        sb_printf(&s, ",\"frames_seen\":%" PRIu64 ",\"frames_processed\":%" PRIu64
                      ",\"frames_skipped\":%" PRIu64 ",\"frames_torn\":%" PRIu64
                      ",\"frames_lost\":%" PRIu64 ",\"frames_reprocessed\":%" PRIu64
                      ",\"publish_drops\":%" PRIu64 ",\"last_latency_ns\":%" PRIu64,
                  b->frames_seen, b->frames_processed, b->frames_skipped, b->frames_torn,
                  b->frames_lost, b->frames_reprocessed, b->publish_drops, b->last_latency_ns);
        sb_cat(&s, ",\"ring_message\":");
        sb_str(&s, b->ring_message, sizeof b->ring_message);
        sb_cat(&s, ",\"warnings\":");
        sb_str(&s, b->warnings, sizeof b->warnings);
        sb_cat(&s, ",\"last_error\":");
        sb_str(&s, b->last_error, sizeof b->last_error);
        /* recording exists when octd's status block is of minor 1 or later
         * and it says anything about it; the page shows the button then */
        sb_printf(&s, ",\"status_minor\":%u,\"record_state\":", b->abi_minor);
        sb_str(&s, b->record_state < 4 ? rec[b->record_state] : "?", 16);
        sb_printf(&s, ",\"record_frames\":%" PRIu64 ",\"record_dropped\":%" PRIu64,
                  b->record_frames, b->record_dropped);
        sb_cat(&s, ",\"record_message\":");
        sb_str(&s, b->record_message, sizeof b->record_message);
    }
    sb_printf(&s, ",\"fps\":%.2f,\"lat_p50_us\":%u,\"lat_p99_us\":%u,\"topics\":[", fps, p50, p99);
    for (int i = 0; i < octweb_images.count; i++) {
        const octweb_image *im = octweb_images.img[i];
        sb_printf(&s, "%s{\"topic\":", i ? "," : "");
        sb_str(&s, im->topic, sizeof im->topic);
        sb_printf(&s, ",\"shape\":[%u,%u,%u],\"ndim\":%d}", im->shape[0], im->shape[1],
                  im->ndim > 2 ? im->shape[2] : 0, im->ndim);
    }
    int n = 0;
    uint64_t sent = 0, skipped = 0;
    for (int i = 0; i < OCTWEB_CLIENTS_MAX; i++)
        if (clients[i]) {
            n++;
            sent += clients[i]->images_sent;
            skipped += clients[i]->images_skipped;
        }
    sb_printf(&s, "],\"web\":{\"clients\":%d,\"received\":%" PRIu64 ",\"sent\":%" PRIu64
                  ",\"skipped\":%" PRIu64 "}}",
              n, octweb_images.received, sent, skipped);
    return sb_take(&s);
}

static void *control_main(void *arg)
{
    uint64_t last_gen = UINT64_MAX, last_open = 0, last_health = 0, last_frames = 0;
    uint64_t last_fps_ns = mono_ns();
    double fps = 0;
    while (!atomic_load(&octweb_stop)) {
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
        uint64_t now = mono_ns();
        oct_status_block b;
        bool have = false;
        oct_control_values v;
        uint64_t gen = 0;
        bool have_v = false;
        pthread_mutex_lock(&ipc_lock);
        if ((!g_ctl || !g_st) && now - last_open > 1000000000ull) {
            last_open = now;
            open_ipc();
        }
        if (g_st && oct_status_read(g_st, &b) == OCT_OK) {
            have = true;
            /* octd restarted: its new blocks have new mappings */
            if (now > b.heartbeat_ns && now - b.heartbeat_ns > 3000000000ull &&
                now - last_open > 1000000000ull) {
                oct_status_close(g_st, false);
                g_st = NULL;
                if (g_ctl)
                    oct_control_close(g_ctl, false);
                g_ctl = NULL;
                last_open = now;
                open_ipc();
                have = g_st && oct_status_read(g_st, &b) == OCT_OK;
            }
        }
        if (g_ctl && oct_control_read(g_ctl, 50, &v, &gen) == OCT_OK)
            have_v = true;
        bool ctl = g_ctl != NULL;
        pthread_mutex_unlock(&ipc_lock);

        pthread_mutex_lock(&octweb_lock);
        if (have_v && gen != last_gen) {
            last_gen = gen;
            char *msg = values_json(&v, gen);
            if (msg) {
                free(g_values);
                g_values = strdup(msg);
            }
            broadcast_coalesced(msg, false);
        }
        for (int i = 0; i < 64; i++) {
            pending *p = &pend[i];
            if (!p->used)
                continue;
            char msg[300];
            if (have && !p->is_cmd && b.rejected_gen == p->gen) {
                snprintf(msg, sizeof msg, "%.*s", (int)sizeof b.rejected_reason, b.rejected_reason);
                reply(p->client_id, p->req_id, false, p->gen, msg);
            } else if (have && !p->is_cmd && b.applied_gen >= p->gen) {
                reply(p->client_id, p->req_id, true, p->gen, "applied");
            } else if (have && p->is_cmd && b.command_ack_seq >= p->gen) {
                snprintf(msg, sizeof msg, "%.*s", (int)sizeof b.command_message, b.command_message);
                reply(p->client_id, p->req_id, b.command_result == OCT_CMDRES_OK, p->gen,
                      msg[0] ? msg : b.command_result == OCT_CMDRES_OK ? "done" : "refused");
            } else if (now > p->deadline) {
                snprintf(msg, sizeof msg, "octd did not answer within %.0f s (%s %" PRIu64 ")",
                         REPLY_TIMEOUT_NS / 1e9, p->is_cmd ? "command" : "generation", p->gen);
                reply(p->client_id, p->req_id, false, p->gen, msg);
            } else {
                continue;
            }
            p->used = false;
        }
        if (now - last_health >= 500000000ull) {
            double dt = (now - last_fps_ns) / 1e9;
            if (have && dt > 0)
                fps = b.frames_processed >= last_frames ? (b.frames_processed - last_frames) / dt : 0;
            if (have)
                last_frames = b.frames_processed;
            last_fps_ns = now;
            uint32_t p50 = 0, p99 = 0;
            int n = octweb_images.lat_n;
            if (n) {
                qsort(octweb_images.lat_us, (size_t)n, sizeof *octweb_images.lat_us, cmp_u32);
                p50 = octweb_images.lat_us[(n - 1) / 2];
                p99 = octweb_images.lat_us[(int)ceil(0.99 * n) - 1];
                octweb_images.lat_n = 0;
            }
            broadcast_coalesced(health_json(&b, have, fps, p50, p99, ctl), true);
            last_health = now;
        }
        pthread_mutex_unlock(&octweb_lock);
    }
    return NULL;
}

/* ---------------- the option schema ---------------- */
static char *schema_json(void)
{
    char *out = NULL;
    oct_error e;
    if (oct_options_json(&out, &e) != OCT_OK) {
        fprintf(stderr, "<3>octweb: option schema: %s\n", e.msg);
        return NULL;
    }
    return out;
}

/* GET /api/schema: the same JSON as `octctl schema`, for scripts. */
static int schema_handler(struct mg_connection *conn, void *cbdata)
{
    mg_send_http_ok(conn, "application/json", (long long)strlen(g_schema));
    mg_write(conn, g_schema, strlen(g_schema));
    return 200;
}

static int log_message(const struct mg_connection *conn, const char *message)
{
    fprintf(stderr, "<4>octweb: %s\n", message);
    return 1;
}

oct_err octweb_serve(const octweb_config *cfg, oct_error *e)
{
    g_cfg = cfg;
    if (!(g_schema = schema_json()))
        return oct_error_set(e, OCT_ENOMEM, "out of memory");
    char threads[16];
    snprintf(threads, sizeof threads, "%d", cfg->max_clients + 8);
    /* each WebSocket holds a civetweb worker: clients + some for HTTP */
    const char *opts[32];
    int n = 0;
    opts[n++] = "listening_ports";
    opts[n++] = cfg->listen;
    opts[n++] = "document_root";
    opts[n++] = cfg->root;
    opts[n++] = "enable_directory_listing";
    opts[n++] = "no";
    opts[n++] = "num_threads";
    opts[n++] = threads;
    opts[n++] = "websocket_timeout_ms";
    opts[n++] = "120000"; /* the page sends a keep-alive every 20 s */
    opts[n++] = "additional_header";
    opts[n++] = "X-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\n"
                "Referrer-Policy: no-referrer\r\n"
                "Content-Security-Policy: default-src 'self'; connect-src 'self' ws: wss:; "
                "img-src 'self' data: blob:";
    if (cfg->cert[0]) {
        opts[n++] = "ssl_certificate";
        opts[n++] = cfg->cert;
        opts[n++] = "ssl_protocol_version";
        opts[n++] = "4"; /* TLS 1.2 and later */
    }
    opts[n] = NULL;
    mg_init_library(cfg->cert[0] ? MG_FEATURES_TLS | MG_FEATURES_WEBSOCKET : MG_FEATURES_WEBSOCKET);
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.log_message = log_message;
    struct mg_context *ctx = mg_start(&cb, NULL, opts);
    if (!ctx) {
        mg_exit_library();
        return oct_error_set(e, OCT_EIO, "cannot listen on '%s'%s%s (address in use, bad "
                             "address or certificate?)", cfg->listen, cfg->cert[0] ? " with " : "",
                             cfg->cert);
    }
    mg_set_websocket_handler(ctx, "/ws", ws_connect, ws_ready, ws_data, ws_close, NULL);
    mg_set_request_handler(ctx, "/api/schema$", schema_handler, NULL);
    pthread_t ctl_thr;
    if (pthread_create(&ctl_thr, NULL, control_main, NULL) != 0) {
        mg_stop(ctx);
        return oct_error_set(e, OCT_EIO, "cannot start the control thread");
    }
    fprintf(stderr, "<6>octweb: listening on %s (%s), page from %s, images from %s\n", cfg->listen,
            cfg->operator_token[0] ? "tokens required" : "loopback, no token", cfg->root,
            cfg->endpoint);
    while (!atomic_load(&octweb_stop)) {
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    mg_stop(ctx); /* closes every connection: ws_close joins the senders */
    pthread_join(ctl_thr, NULL);
    mg_exit_library();
    pthread_mutex_lock(&ipc_lock);
    if (g_ctl)
        oct_control_close(g_ctl, false);
    if (g_st)
        oct_status_close(g_st, false);
    g_ctl = NULL;
    g_st = NULL;
    pthread_mutex_unlock(&ipc_lock);
    free(g_schema);
    free(g_values);
    g_values = NULL;
    return OCT_OK;
}
