/* octctl - operators' tool: live control values, commands and status of
 * octd (SPEC 3.2, 3.3, 4, 8); `octctl ring` inspects a frame ring.
 *
 * Exit status: 0 done / applied; 1 rejected, refused or failed (the reason
 * is printed); 2 octd did not answer in time or is not running; 64 usage
 * (the argument named).  A mode already in effect (online when online,
 * review in review) answers ok, "already ...". 
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oct_docs.h"
#include "oct_control_keys.h"
#include "oct_ipc.h"
#include "oct_options.h"
#include "cli.h"
#include "ring.h"

#define EX_USAGE 64

typedef struct ctl_opts {
    const char *control, *status;
    double timeout_s;
} ctl_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octctl [--control NAME] [--status NAME] [--timeout SEC] COMMAND [ARGS]\n"
            "Commands:\n"
            "  get [KEY...]          control values, one key=value a line\n"
            "  set KEY=VALUE ...     change values in one generation; waits for octd to apply\n"
            "                        or reject them (exit 1 with the reason on rejection)\n"
            "  help [KEY...]         the keys: kind, range or names, default, unit, help\n"
            "  schema                the option table as JSON (schema octd-options-1)\n"
            "  snapshot              keep the current frame (online mode)\n"
            "  review                re-process the kept frame on every change (post-processing)\n"
            "  online                back to processing ring frames\n"
            "  save raw|images       save the kept frame or its images (review mode)\n"
            "  record [--frames N] [--seconds S] [raw] [products]\n"
            "                        start a recording (default: raw; 0 or no limit: until\n"
            "                        `record stop`)\n"
            "  record stop           end the recording in progress\n"
            "  reference set|clear|auto   the registration reference (set: the next frame,\n"
            "                        in review the reviewed one; auto: the sharpest of the\n"
            "                        next 8 volumes); README \"Live registration in octd\"\n"
            "  status                the status block\n"
            "  watch [--count N] [--interval SEC]   live counters\n"
            "  ring [...]            inspect a frame ring (octctl ring --help)\n"
            "  --version             the version\n"
            "Options: --control (default %s), --status (default %s), --timeout (default 10 s)\n"
            "Keys (octctl help KEY for one): ",
            OCT_CONTROL_DEFAULT, OCT_STATUS_DEFAULT);
    for (size_t i = 0; i < oct_control_key_count(); i++)
        fprintf(f, "%s%s", i ? " " : "", oct_control_key_name(i));
    fprintf(f,
            "\nValue forms: window=tukey:0.5 (name:param), background=rolling:8, lag_window=-8,8,\n"
            "  methods=cfd,msi (sets: comma-separated), klin.coefs=c0,c1,c2,c3 (all four).\n"
            "  Old spellings still accepted: klin.interp, klin_taps, klin_source, klin_c0..3,\n"
            "  background_param, background.frames|segment, disp_a2|a3|k0, msi.lag_window.\n"
            "Examples: octctl set enface.start=40 display.enface.gsc=0.5 lag_window=-8,8 "
            "window=tukey:0.5\n          octctl set products=bscan,f32 methods=cfd,msi,cms\n"
            "          octctl set klin=sinc klin.taps=21 dispersion.a2=-12.5\n"
            "          octctl record --seconds 10 raw products\n"
            OCT_DOCS_HINT);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

/* Opens the status block; prints why not. */
static oct_status *open_status(const ctl_opts *o)
{
    oct_status *s;
    oct_error e;
    if (oct_status_open(&s, o->status, &e) != OCT_OK) {
        fprintf(stderr, "octctl: octd is not running? status block %s: %s\n", o->status, e.msg);
        return NULL;
    }
    return s;
}

static bool read_status(oct_status *s, oct_status_block *b)
{
    for (int i = 0; i < 100; i++) {
        if (oct_status_read(s, b) == OCT_OK)
            return true;
        sleep_ms(1);
    }
    fprintf(stderr, "octctl: the status block stayed busy\n");
    return false;
}

static bool octd_gone(const oct_status_block *b)
{
    return b->state == OCT_STATE_STOPPING || (b->pid && kill((pid_t)b->pid, 0) != 0 && errno == ESRCH);
}

static const char *bounded(const char *s, size_t len, char *buf)
{
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

/* A usage error that names the first argument a command does not take. */
static int extra_argument(const char *cmd, const char *arg)
{
    fprintf(stderr, "octctl %s: unexpected argument '%s' (octctl --help)\n", cmd, arg);
    return EX_USAGE;
}

/* ---------------- get ---------------- */
static int cmd_get(const ctl_opts *o, int argc, char **argv)
{
    oct_control *c;
    oct_error e;
    if (oct_control_open(&c, o->control, false, &e) != OCT_OK) {
        fprintf(stderr, "octctl: control block %s: %s\n", o->control, e.msg);
        return 2;
    }
    oct_control_values v;
    uint64_t gen;
    oct_err rc = OCT_EAGAIN;
    for (int i = 0; i < 100 && rc == OCT_EAGAIN; i++) {
        rc = oct_control_read(c, 16, &v, &gen);
        if (rc == OCT_EAGAIN)
            sleep_ms(1);
    }
    oct_control_close(c, false);
    if (rc != OCT_OK) {
        fprintf(stderr, "octctl: control block %s: a writer stayed inside\n", o->control);
        return 2;
    }
    if (argc <= 1) {
        char buf[4096];
        size_t n = oct_control_format_all(&v, buf, sizeof buf);
        fwrite(buf, 1, n < sizeof buf ? n : sizeof buf - 1, stdout);
        return 0;
    }
    int ret = 0;
    for (int i = 1; i < argc; i++) {
        char val[256];
        if (oct_control_key_get(&v, argv[i], val, sizeof val, &e) != OCT_OK) {
            fprintf(stderr, "octctl: %s\n", e.msg);
            ret = 1;
        } else {
            printf("%s=%s\n", argv[i], val);
        }
    }
    return ret;
}

/* ---------------- set ---------------- */
typedef struct set_args {
    int n;
    char **assign;
    bool failed;
} set_args;

static void apply_assignments(oct_control_values *v, void *arg)
{
    set_args *a = arg;
    for (int i = 0; i < a->n; i++)
        if (oct_control_assign(v, a->assign[i], NULL) != OCT_OK)
            a->failed = true; /* cannot happen: checked before the write */
}

static int cmd_set(const ctl_opts *o, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: octctl set KEY=VALUE ...  (see octctl --help for the keys)\n");
        return EX_USAGE;
    }
    /* Parse everything before touching the block: a typo changes nothing. */
    oct_control_values scratch;
    memset(&scratch, 0, sizeof scratch);
    oct_error e;
    for (int i = 1; i < argc; i++) {
        if (oct_control_assign(&scratch, argv[i], &e) != OCT_OK) {
            fprintf(stderr, "octctl: %s\n", e.msg);
            return EX_USAGE;
        }
    }
    oct_status *s = open_status(o);
    if (!s)
        return 2;
    oct_control *c;
    if (oct_control_open(&c, o->control, true, &e) != OCT_OK) {
        fprintf(stderr, "octctl: control block %s: %s\n", o->control, e.msg);
        oct_status_close(s, false);
        return 2;
    }
    /* an older octd would apply the generation without keys newer than its block */
    uint32_t minor = oct_control_abi_minor(c);
    for (int i = 1; i < argc; i++) {
        char key[64];
        const char *eq = strchr(argv[i], '=');
        size_t len = (size_t)(eq - argv[i]);
        snprintf(key, sizeof key, "%.*s", (int)(len < sizeof key ? len : sizeof key - 1), argv[i]);
        size_t kl = strlen(key);
        while (kl && (key[kl - 1] == ' ' || key[kl - 1] == '\t'))
            key[--kl] = '\0';
        const char *k = key + strspn(key, " \t");
        int need = oct_control_key_abi_minor(k);
        if (need > (int)minor) {
            fprintf(stderr, "octctl: %s: control block %s is ABI 1.%u (an older octd), %s needs "
                            "1.%d\n", k, o->control, minor, k, need);
            oct_control_close(c, false);
            oct_status_close(s, false);
            return 1;
        }
    }
    set_args a = {argc - 1, argv + 1, false};
    uint64_t gen;
    oct_err rc = oct_control_write(c, apply_assignments, &a, &gen, &e);
    oct_control_close(c, false);
    if (rc != OCT_OK || a.failed) {
        fprintf(stderr, "octctl: writing %s: %s\n", o->control, rc != OCT_OK ? e.msg : "bad value");
        oct_status_close(s, false);
        return 1;
    }
    double deadline = now_s() + o->timeout_s;
    int ret = 2;
    oct_status_block b;
    while (now_s() < deadline) {
        if (!read_status(s, &b))
            break;
        /* rejected first: after a rejection octd writes the last good
         * values back as a later generation, which it then applies */
        if (b.rejected_gen == gen) {
            char r[sizeof b.rejected_reason + 1];
            printf("rejected (generation %" PRIu64 "): %s\n", gen,
                   bounded(b.rejected_reason, sizeof b.rejected_reason, r));
            ret = 1;
            break;
        }
        if (b.applied_gen >= gen) {
            printf("applied (generation %" PRIu64 ")\n", gen);
            ret = 0;
            break;
        }
        if (octd_gone(&b)) {
            fprintf(stderr, "octctl: octd is not running (written as generation %" PRIu64 ")\n", gen);
            break;
        }
        sleep_ms(5);
    }
    if (ret == 2 && now_s() >= deadline)
        fprintf(stderr, "octctl: octd did not answer within %.1f s (generation %" PRIu64 ")\n",
                o->timeout_s, gen);
    oct_status_close(s, false);
    return ret;
}

/* ---------------- commands ---------------- */
static int cmd_command_args(const ctl_opts *o, uint32_t cmd, uint32_t flags, uint32_t frames,
                            double seconds, const char *name)
{
    oct_status *s = open_status(o);
    if (!s)
        return 2;
    oct_control *c;
    oct_error e;
    if (oct_control_open(&c, o->control, true, &e) != OCT_OK) {
        fprintf(stderr, "octctl: control block %s: %s\n", o->control, e.msg);
        oct_status_close(s, false);
        return 2;
    }
    uint64_t seq;
    oct_err rc = oct_control_command_args(c, cmd, flags, frames, seconds, &seq, &e);
    oct_control_close(c, false);
    if (rc != OCT_OK) {
        fprintf(stderr, "octctl: %s\n", e.msg); /* the library names the command */
        oct_status_close(s, false);
        return 1;
    }
    double deadline = now_s() + o->timeout_s;
    int ret = 2;
    oct_status_block b;
    while (now_s() < deadline) {
        if (!read_status(s, &b))
            break;
        if (b.command_ack_seq == seq) {
            char m[sizeof b.command_message + 1];
            static const char *const res[] = {"ok", "refused", "failed"};
            bounded(b.command_message, sizeof b.command_message, m);
            printf("%s: %s: %s\n", name, b.command_result < 3 ? res[b.command_result] : "?", m);
            ret = b.command_result == OCT_CMDRES_OK ? 0 : 1;
            break;
        }
        if (b.command_ack_seq > seq) {
            fprintf(stderr, "octctl: %s: another command was issued before octd took this one\n",
                    name);
            ret = 1;
            break;
        }
        if (octd_gone(&b)) {
            fprintf(stderr, "octctl: octd is not running\n");
            break;
        }
        sleep_ms(5);
    }
    if (ret == 2 && now_s() >= deadline)
        fprintf(stderr, "octctl: %s: octd did not answer within %.1f s\n", name, o->timeout_s);
    oct_status_close(s, false);
    return ret;
}

/* ---------------- help / schema ---------------- */
static void print_option(const oct_option *o)
{
    static const char *const kinds[] = {"int", "float", "enum", "set", "pair", "bool"};
    oct_control_values d;
    oct_options_default(&d);
    char def[160];
    oct_option_format(o, &d, def, sizeof def);
    printf("%s (%s", o->key, kinds[o->kind]);
    if (o->kind == OCT_OPT_ENUM || o->kind == OCT_OPT_SET) {
        printf(":");
        for (size_t i = 0; o->values[i]; i++)
            printf("%s%s", i ? (o->kind == OCT_OPT_SET ? "," : "|") : " ", o->values[i]);
    } else if (o->kind != OCT_OPT_BOOL) {
        bool f = o->kind == OCT_OPT_FLOAT;
        if (f && o->min <= -3.0e38 && o->max >= 3.0e38)
            printf(", finite");
        else if (f && o->max >= 3.0e38)
            printf(", %s %g", (o->flags & OCT_OPTF_MIN_OPEN) ? ">" : ">=", o->min);
        else if (f)
            printf(", %s%g, %g]", (o->flags & OCT_OPTF_MIN_OPEN) ? "(" : "[", o->min, o->max);
        else
            printf(", [%.0f, %.0f]", o->min, o->max);
    }
    if (o->max_rule)
        printf(", max %s", o->max_rule);
    printf(", default %s%s%s, ABI 1.%u)\n    %s\n", *def ? def : "(none)", *o->unit ? " " : "", o->unit,
           o->abi_minor, o->help);
}

static int cmd_help(int argc, char **argv)
{
    if (argc <= 1) {
        for (size_t i = 0; i < oct_options_count(); i++)
            print_option(oct_option_at(i));
        return 0;
    }
    int ret = 0;
    for (int i = 1; i < argc; i++) {
        const oct_option *o = oct_option_find(argv[i]);
        if (!o) {
            oct_error e;
            oct_control_unknown_key(argv[i], &e);
            fprintf(stderr, "octctl help: %s\n", e.msg);
            ret = EX_USAGE;
            continue;
        }
        print_option(o);
    }
    return ret;
}

static int cmd_schema(int argc, char **argv)
{
    if (argc > 1)
        return extra_argument("schema", argv[1]);
    char *json;
    oct_error e;
    if (oct_options_json(&json, &e) != OCT_OK) {
        fprintf(stderr, "octctl schema: %s\n", e.msg);
        return 1;
    }
    fputs(json, stdout);
    free(json);
    return 0;
}

static int cmd_command(const ctl_opts *o, uint32_t cmd, const char *name)
{
    return cmd_command_args(o, cmd, 0, 0, 0.0, name);
}

/* record [--frames N] [--seconds S] [raw] [products] | record stop */
static int cmd_record(const ctl_opts *o, int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "stop")) {
        if (argc > 2)
            return extra_argument("record stop", argv[2]);
        return cmd_command(o, OCT_CMD_RECORD_STOP, "record stop");
    }
    uint32_t flags = 0, frames = 0;
    double seconds = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        bool is_frames = !strncmp(a, "--frames", 8) && (a[8] == '\0' || a[8] == '=');
        bool is_seconds = !strncmp(a, "--seconds", 9) && (a[9] == '\0' || a[9] == '=');
        if (is_frames || is_seconds) {
            const char *eq = strchr(a, '=');
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                fprintf(stderr, "octctl record: %s needs a value\n", a);
                return EX_USAGE;
            }
            char *end;
            errno = 0;
            if (is_frames) {
                unsigned long long n = strtoull(val, &end, 10);
                if (end == val || *end || errno || *val == '-' || n > UINT32_MAX) {
                    fprintf(stderr, "octctl record: --frames: '%s' is not a count 0..%u\n", val,
                            UINT32_MAX);
                    return EX_USAGE;
                }
                frames = (uint32_t)n;
            } else {
                seconds = strtod(val, &end);
                if (end == val || *end || !isfinite(seconds) || seconds < 0) {
                    fprintf(stderr, "octctl record: --seconds: '%s' is not a number of seconds >= 0\n",
                            val);
                    return EX_USAGE;
                }
            }
        } else if (!strcmp(a, "raw")) {
            flags |= OCT_RECORD_RAW;
        } else if (!strcmp(a, "products")) {
            flags |= OCT_RECORD_PRODUCTS;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: octctl record [--frames N] [--seconds S] [raw] [products]\n"
                   "       octctl record stop\n"
                   "raw: the ring frames; products: the published images; neither: raw.\n"
                   "--frames/--seconds: stop after that many (0 or absent: until record stop).\n");
            return 0;
        } else {
            fprintf(stderr, "octctl record: unexpected argument '%s' (raw, products, --frames N, "
                            "--seconds S or stop)\n", a);
            return EX_USAGE;
        }
    }
    if (!flags)
        flags = OCT_RECORD_RAW;
    return cmd_command_args(o, OCT_CMD_RECORD, flags, frames, seconds, "record");
}

/* reference set|clear|auto */
static int cmd_reference(const ctl_opts *o, int argc, char **argv)
{
    static const char *const ops[] = {"set", "clear", "auto"}; /* = enum oct_reference_op */
    if (argc != 2) {
        if (argc > 2)
            return extra_argument("reference", argv[2]);
        fprintf(stderr, "usage: octctl reference set|clear|auto\n");
        return EX_USAGE;
    }
    for (uint32_t i = 0; i < 3; i++)
        if (!strcmp(argv[1], ops[i])) {
            char name[32];
            snprintf(name, sizeof name, "reference %s", ops[i]);
            return cmd_command_args(o, OCT_CMD_REFERENCE, i, 0, 0.0, name);
        }
    fprintf(stderr, "octctl reference: '%s' is not set, clear or auto\n", argv[1]);
    return EX_USAGE;
}

/* ---------------- status / watch ---------------- */
static void print_status(const oct_status_block *b)
{
    char t1[sizeof b->backend + 1], t2[sizeof b->device + 1], t3[sizeof b->rejected_reason + 1],
        t4[sizeof b->command_message + 1];
    static const char *const res[] = {"ok", "refused", "failed"};
    uint64_t now = oct_time_monotonic_ns();
    const char *st = oct_sample_name(b->ring_sample_type);
    printf("pid=%" PRIu64 "\n", b->pid);
    printf("state=%s\n", oct_daemon_state_name(b->state));
    printf("backend=%s\n", bounded(b->backend, sizeof b->backend, t1));
    printf("device=%s\n", bounded(b->device, sizeof b->device, t2));
    printf("heartbeat_age_ms=%.0f\n",
           b->heartbeat_ns && now > b->heartbeat_ns ? (double)(now - b->heartbeat_ns) / 1e6 : 0.0);
    printf("ring_epoch=%" PRIu64 "\n", b->ring_epoch);
    printf("ring_geometry=%ux%ux%u %s\n", b->ring_lines, b->ring_ascans, b->ring_samples,
           st ? st : "-");
    printf("applied_gen=%" PRIu64 "\n", b->applied_gen);
    printf("rejected_gen=%" PRIu64 "\n", b->rejected_gen);
    printf("rejected_reason=%s\n", bounded(b->rejected_reason, sizeof b->rejected_reason, t3));
    printf("command_ack_seq=%" PRIu64 "\n", b->command_ack_seq);
    printf("command_result=%s\n", b->command_result < 3 ? res[b->command_result] : "?");
    printf("command_message=%s\n", bounded(b->command_message, sizeof b->command_message, t4));
    printf("frames_seen=%" PRIu64 "\nframes_processed=%" PRIu64 "\nframes_skipped=%" PRIu64
           "\nframes_torn=%" PRIu64 "\nring_reattaches=%" PRIu64 "\nimages_published=%" PRIu64
           "\npublish_drops=%" PRIu64 "\nlast_frame_id=%" PRIu64 "\nlast_latency_ms=%.3f\n",
           b->frames_seen, b->frames_processed, b->frames_skipped, b->frames_torn,
           b->ring_reattaches, b->images_published, b->publish_drops, b->last_frame_id,
           (double)b->last_latency_ns / 1e6);
    printf("start_ns=%" PRIu64 "\n", b->start_ns);
    /* status 1.1 (issue 14.4): the ring's state, warnings, last error; the
     * summary is the same text octd sends to systemd as STATUS= */
    char t5[sizeof b->ring_message + 1], t6[sizeof b->warnings + 1], t7[sizeof b->last_error + 1],
        sum[512];
    printf("ring_state=%s\n", oct_attach_state_name(b->ring_state));
    printf("ring_message=%s\n", bounded(b->ring_message, sizeof b->ring_message, t5));
    printf("warning_count=%u\n", b->warning_count);
    printf("warnings=%s\n", bounded(b->warnings, sizeof b->warnings, t6));
    printf("last_error=%s\n", bounded(b->last_error, sizeof b->last_error, t7));
    printf("frames_reprocessed=%" PRIu64 "\nframes_lost=%" PRIu64 "\n", b->frames_reprocessed,
           b->frames_lost);
    static const char *const refstate[] = {"none", "set", "auto"}; /* enum oct_reference_state */
    printf("reference_state=%s\nreference_frame=%" PRIu64 "\n",
           b->reference_state < 3 ? refstate[b->reference_state] : "?", b->reference_frame);
    printf("registration_volumes=%" PRIu64 "\nregistration_skipped=%" PRIu64 "\n",
           b->registration_volumes, b->registration_skipped);
    oct_status_summary(b, sum, sizeof sum);
    printf("summary=%s\n", sum);
}

static int cmd_status(const ctl_opts *o)
{
    oct_status *s = open_status(o);
    if (!s)
        return 2;
    oct_status_block b;
    int ret = read_status(s, &b) ? 0 : 2;
    if (ret == 0)
        print_status(&b);
    oct_status_close(s, false);
    return ret;
}

static int cmd_watch(const ctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {{"count", required_argument, 0, 'n'},
                                         {"interval", required_argument, 0, 'i'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    long count = -1;
    double interval = 1.0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "n:i:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'n':
            count = strtol(optarg, &end, 10);
            if (*end || count < 1) {
                fprintf(stderr, "octctl watch: --count: '%s' is not a positive integer\n", optarg);
                return EX_USAGE;
            }
            break;
        case 'i':
            interval = strtod(optarg, &end);
            if (*end || !(interval >= 0.05 && interval <= 3600)) {
                fprintf(stderr, "octctl watch: --interval: '%s' is not 0.05..3600 s\n", optarg);
                return EX_USAGE;
            }
            break;
        case 'h':
            printf("usage: octctl watch [--count N] [--interval SEC]\n"
                   "Prints the counters and their rates every interval until ^C.\n");
            return 0;
        default: return EX_USAGE;
        }
    }
    if (optind < argc)
        return extra_argument("watch", argv[optind]);
    oct_status *s = open_status(o);
    if (!s)
        return 2;
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    oct_status_block prev, b;
    if (!read_status(s, &prev)) {
        oct_status_close(s, false);
        return 2;
    }
    double tprev = now_s();
    printf("%-8s %10s %10s %8s %8s %6s %10s %8s %8s %10s\n", "state", "seen", "processed",
           "fps", "skipped", "torn", "images", "img/s", "drops", "latency_ms");
    for (long i = 0; (count < 0 || i < count) && !interrupted; i++) {
        for (double t0 = now_s(); now_s() - t0 < interval && !interrupted;)
            sleep_ms(20);
        if (interrupted || !read_status(s, &b))
            break;
        double t = now_s(), dt = t - tprev;
        printf("%-8s %10" PRIu64 " %10" PRIu64 " %8.1f %8" PRIu64 " %6" PRIu64 " %10" PRIu64
               " %8.1f %8" PRIu64 " %10.2f\n",
               oct_daemon_state_name(b.state), b.frames_seen, b.frames_processed,
               (double)(b.frames_processed - prev.frames_processed) / dt, b.frames_skipped,
               b.frames_torn, b.images_published,
               (double)(b.images_published - prev.images_published) / dt, b.publish_drops,
               (double)b.last_latency_ns / 1e6);
        fflush(stdout);
        prev = b;
        tprev = t;
    }
    oct_status_close(s, false);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"control", required_argument, 0, 'c'},
                                         {"status", required_argument, 0, 's'},
                                         {"timeout", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    ctl_opts o = {OCT_CONTROL_DEFAULT, OCT_STATUS_DEFAULT, 10.0};
    int c = oct_cli_start("octctl", argc, argv, NULL);
    if (c >= 0)
        return c;
    /* '+': options end at the command, so commands have options of their own */
    while ((c = getopt_long(argc, argv, "+c:s:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': o.control = optarg; break;
        case 's': o.status = optarg; break;
        case 't': {
            char *end;
            o.timeout_s = strtod(optarg, &end);
            if (*end || !(o.timeout_s > 0 && o.timeout_s <= 86400)) {
                fprintf(stderr, "octctl: --timeout: '%s' is not a number of seconds\n", optarg);
                return EX_USAGE;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EX_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EX_USAGE;
    }
    int cargc = argc - optind;
    char **cargv = argv + optind;
    const char *cmd = cargv[0];
    bool help = cargc > 1 && (!strcmp(cargv[1], "--help") || !strcmp(cargv[1], "-h"));
    if (!strcmp(cmd, "ring"))
        return octctl_ring_main(cargc, cargv);
    if (!strcmp(cmd, "watch"))
        return cmd_watch(&o, cargc, cargv);
    if (!strcmp(cmd, "record") && help)
        return cmd_record(&o, cargc, cargv);
    if (!strcmp(cmd, "reference") && !help)
        return cmd_reference(&o, cargc, cargv);
    if (help) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "help"))
        return cmd_help(cargc, cargv);
    if (!strcmp(cmd, "schema"))
        return cmd_schema(cargc, cargv);
    if (!strcmp(cmd, "record"))
        return cmd_record(&o, cargc, cargv);
    if (!strcmp(cmd, "get"))
        return cmd_get(&o, cargc, cargv);
    if (!strcmp(cmd, "set"))
        return cmd_set(&o, cargc, cargv);
    if (!strcmp(cmd, "status"))
        return cargc == 1 ? cmd_status(&o) : extra_argument("status", cargv[1]);
    struct {
        const char *name;
        uint32_t cmd;
    } simple[] = {{"snapshot", OCT_CMD_SNAPSHOT}, {"review", OCT_CMD_REVIEW}, {"online", OCT_CMD_ONLINE}};
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
        if (!strcmp(cmd, simple[i].name)) {
            if (cargc != 1)
                return extra_argument(cmd, cargv[1]);
            return cmd_command(&o, simple[i].cmd, simple[i].name);
        }
    if (!strcmp(cmd, "save")) {
        if (cargc == 2 && !strcmp(cargv[1], "raw"))
            return cmd_command(&o, OCT_CMD_SAVE_RAW, "save raw");
        if (cargc == 2 && !strcmp(cargv[1], "images"))
            return cmd_command(&o, OCT_CMD_SAVE_IMAGES, "save images");
        if (cargc > 2 && (!strcmp(cargv[1], "raw") || !strcmp(cargv[1], "images")))
            return extra_argument(cargc > 2 && !strcmp(cargv[1], "raw") ? "save raw" : "save images",
                                  cargv[2]);
        if (cargc >= 2)
            fprintf(stderr, "octctl save: '%s' is neither raw nor images\n", cargv[1]);
        fprintf(stderr, "usage: octctl save raw|images\n");
        return EX_USAGE;
    }
    fprintf(stderr, "octctl: unknown command '%s' (octctl --help)\n", cmd);
    return EX_USAGE;
}
