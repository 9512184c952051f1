/* control.c - the control block of SPEC 3.2: a seqlock written by several
 * operator processes (serialised by flock on the shm fd itself, which the
 * kernel releases when a writer dies) and read by octd with a bounded
 * number of attempts. */
#include <errno.h>
#include <setjmp.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc_internal.h"
#include "oct_options.h"

/* ABI offsets and sizes: static asserts in oct_ipc.h */

struct oct_control {
    char name[OCT_SHM_NAME_MAX + 1];
    int fd;
    oct_control_block *b;
    bool writable;
    /* Generations only grow (seq survives an octd restart, create()).  A
     * seq below the highest one read is a writer inside its store of seq:
     * one that stores it byte by byte (CPython's struct.pack_into zeroes
     * the field first) passes through smaller even values while the new
     * fields are already there, and a reader must not label them with a
     * wrong, older generation.  A lower seq that stays put for
     * LOWER_SEQ_ACCEPT_NS is taken as the block's own (re-initialised). */
    uint64_t seq_read, lower_seq, lower_since_ns;
};

#define READ_PAUSE_NS 20000ull /* between two failed read attempts */
#define LOWER_SEQ_ACCEPT_NS 1000000000ull

/* The field copies run inside the seqlock; a reader may see values that a
 * writer is changing, which the seq re-check then discards.  The option
 * fields are copied by the table (options.c, with volatile accesses); the
 * command fields here. */
static void block_to_values(const oct_control_block *b, oct_control_values *v)
{
    const volatile oct_control_block *vb = b;
    oct_options_block_to_values(b, v);
    v->command_seq = vb->command_seq;
    v->command = vb->command;
    if (vb->abi_minor >= 2) {
        v->cmd_flags = vb->cmd_flags;
        v->cmd_frames = vb->cmd_frames;
        v->cmd_seconds = vb->cmd_seconds;
    }
}

/* The defaults of the fields an older block does not have, from the table
 * (the same values as oct_params_default(); a test checks that). */
void oct_control_values_default_1_1(oct_control_values *v)
{
    oct_control_values d;
    oct_options_default(&d);
    for (size_t i = 0; i < oct_options_count(); i++) {
        const oct_option *o = oct_option_at(i);
        if (o->abi_minor == 1) /* only the 1.1 fields, as documented */
            memcpy((char *)v + o->value_offset, (const char *)&d + o->value_offset,
                   (size_t)o->fields * (o->ctype == OCT_CTYPE_F64 ? 8u : 4u));
    }
}

void oct_control_values_default_1_2(oct_control_values *v) { oct_options_default_after(v, 1); }

static void values_to_block(oct_control_block *b, const oct_control_values *v)
{
    volatile oct_control_block *vb = b;
    oct_options_values_to_block(b, v);
    vb->command_seq = v->command_seq;
    vb->command = v->command;
    vb->cmd_flags = v->cmd_flags;
    vb->cmd_frames = v->cmd_frames;
    vb->cmd_seconds = v->cmd_seconds;
}

oct_err oct_control_header_check(const oct_control_block *b, uint64_t object_bytes,
                                 oct_error *e)
{
    if (object_bytes < sizeof *b)
        return oct_error_set(e, OCT_ESIZE, "object is %llu bytes, a control block is %u",
                             (unsigned long long)object_bytes, OCT_CONTROL_BYTES);
    if (memcmp(b->magic, OCT_CONTROL_MAGIC, 8) != 0)
        return oct_error_set(e, OCT_EABI, "magic is not \"OCTCTRL\\0\": not a control block");
    if (b->abi_major != OCT_ABI_MAJOR)
        return oct_error_set(e, OCT_EABI,
                             "abi_major = %u (abi_minor %u): this program understands ABI %u.x",
                             b->abi_major, b->abi_minor, OCT_ABI_MAJOR);
    if (b->block_bytes != OCT_CONTROL_BYTES)
        return oct_error_set(e, OCT_EABI, "block_bytes = %u, expected %u", b->block_bytes,
                             OCT_CONTROL_BYTES);
    return OCT_OK;
}

static oct_err lock_fd(int fd, const char *name, oct_error *e)
{
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR)
            return oct_error_set(e, OCT_EIO, "control %s: flock: %s", name, strerror(errno));
    }
    return OCT_OK;
}

static void unlock_fd(int fd) { flock(fd, LOCK_UN); }

/* Writes v as one generation; the caller holds the lock.  A seq left odd by
 * a writer that died inside is completed by this write (its half-written
 * values are overwritten before seq becomes even, so readers never see
 * them as a generation).  Returns the new generation. */
static uint64_t write_locked(oct_control_block *b, const oct_control_values *v)
{
    uint64_t s = OCT_LOAD_ACQ(&b->seq);
    if (!(s & 1)) {
        s++;
        OCT_STORE_RLX(&b->seq, s);
        OCT_FENCE_REL(); /* the odd seq is visible before any field changes */
    }
    values_to_block(b, v);
    OCT_STORE_REL(&b->seq, s + 1);
    return (s + 1) / 2;
}

static oct_err map_block(int fd, const char *name, bool writable, oct_control_block **out,
                         oct_error *e)
{
    void *m = mmap(NULL, OCT_CONTROL_BYTES, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return oct_error_set(e, OCT_EIO, "control %s: mmap: %s", name, strerror(errno));
    *out = m;
    return OCT_OK;
}

oct_err oct_control_create(oct_control **out, const char *name, const oct_control_values *init,
                           uint32_t mode, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return err;
    if (!init)
        return oct_error_set(e, OCT_EINVAL, "control %s: no initial values", name);
    mode = mode ? mode : 0660;
    /* Re-use an existing object: writers that have it mapped keep working
     * across an octd restart. */
    int fd = shm_open(name, O_CREAT | O_RDWR | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return oct_error_set(e, errno == EACCES ? OCT_EPERM : OCT_EIO,
                             "control %s: shm_open: %s", name, strerror(errno));
    struct stat st;
    if (fchmod(fd, (mode_t)mode) != 0 || fstat(fd, &st) != 0) {
        err = oct_error_set(e, OCT_EIO, "control %s: fchmod/fstat: %s", name, strerror(errno));
        close(fd);
        return err;
    }
    if ((uint64_t)st.st_size != OCT_CONTROL_BYTES && ftruncate(fd, OCT_CONTROL_BYTES) != 0) {
        err = oct_error_set(e, OCT_EIO, "control %s: ftruncate: %s", name, strerror(errno));
        close(fd);
        return err;
    }
    oct_control *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return oct_error_set(e, OCT_ENOMEM, "control %s: out of memory", name);
    }
    err = map_block(fd, name, true, &c->b, e);
    if (err) {
        close(fd);
        free(c);
        return err;
    }
    c->fd = fd;
    c->writable = true;
    oct_ipc_strlcpy(c->name, sizeof c->name, name);
    err = lock_fd(fd, name, e);
    if (err) {
        oct_control_close(c, false);
        return err;
    }
    oct_control_block *b = c->b;
    oct_control_values v = *init;
    if ((uint64_t)st.st_size == OCT_CONTROL_BYTES && oct_control_header_check(b, st.st_size, NULL) == OCT_OK) {
        /* a previous octd's block: keep seq and command_seq increasing so
         * that waiting operators never see them go back */
        uint64_t old_cmd = b->command_seq;
        if (old_cmd > v.command_seq)
            v.command_seq = old_cmd;
        /* an older octd's 1.0 block becomes 1.1: the values written below
         * fill the new fields; minor first is safe, readers of a 1.1 minor
         * see this generation's values only once seq is even again */
        if (b->abi_minor < OCT_CONTROL_ABI_MINOR)
            b->abi_minor = OCT_CONTROL_ABI_MINOR;
    } else {
        memset(b, 0, sizeof *b);
        memcpy(b->magic, OCT_CONTROL_MAGIC, 8);
        b->abi_major = OCT_ABI_MAJOR;
        b->abi_minor = OCT_CONTROL_ABI_MINOR;
        b->block_bytes = OCT_CONTROL_BYTES;
    }
    write_locked(b, &v);
    unlock_fd(fd);
    *out = c;
    return OCT_OK;
}

oct_err oct_control_open(oct_control **out, const char *name, bool writable, oct_error *e)
{
    *out = NULL;
    oct_err err = oct_ipc_name_check(name, e);
    if (err)
        return err;
    int fd = shm_open(name, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
    if (fd < 0) {
        int en = errno;
        if (en == ENOENT)
            return oct_error_set(e, OCT_ENOENT, "control block %s does not exist (is octd running?)",
                                 name);
        return oct_error_set(e, en == EACCES ? OCT_EPERM : OCT_EIO,
                             "control %s: shm_open%s: %s", name, writable ? " for writing" : "",
                             strerror(en));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err = oct_error_set(e, OCT_EIO, "control %s: fstat: %s", name, strerror(errno));
        close(fd);
        return err;
    }
    if ((uint64_t)st.st_size < OCT_CONTROL_BYTES) {
        close(fd);
        return oct_error_set(e, OCT_ESIZE, "control %s: object is %llu bytes, expected %u", name,
                             (unsigned long long)st.st_size, OCT_CONTROL_BYTES);
    }
    oct_control *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return oct_error_set(e, OCT_ENOMEM, "control %s: out of memory", name);
    }
    err = map_block(fd, name, writable, &c->b, e);
    if (err) {
        close(fd);
        free(c);
        return err;
    }
    c->fd = fd;
    c->writable = writable;
    oct_ipc_strlcpy(c->name, sizeof c->name, name);
    err = oct_control_header_check(c->b, (uint64_t)st.st_size, e);
    if (err) {
        oct_control_close(c, false);
        return oct_error_prefix(e, err, "control %s", name);
    }
    *out = c;
    return OCT_OK;
}

void oct_control_close(oct_control *c, bool unlink_name)
{
    if (!c)
        return;
    munmap(c->b, OCT_CONTROL_BYTES);
    close(c->fd);
    if (unlink_name)
        shm_unlink(c->name);
    free(c);
}

static oct_err read_guarded(oct_control *c, int attempts, oct_control_values *v,
                            uint64_t *gen);

/* Guarded against SIGBUS: a writer (who may ftruncate the object) could
 * shrink the block under our mapping; that read fails with OCT_EIO. */
oct_err oct_control_read(oct_control *c, int attempts, oct_control_values *v, uint64_t *gen)
{
    if (!c || !v)
        return OCT_EINVAL;
    if (attempts < 1)
        attempts = 1;
    if (!oct_bus_install())
        return OCT_EIO;
    oct_bus_guard g;
    if (sigsetjmp(g.jb, 0))
        return OCT_EIO;
    oct_bus_arm(&g, c->b, OCT_CONTROL_BYTES);
    oct_err err = read_guarded(c, attempts, v, gen);
    oct_bus_disarm(&g);
    return err;
}

/* true once the lower seq s has stayed the same for LOWER_SEQ_ACCEPT_NS */
static bool lower_seq_settled(oct_control *c, uint64_t s)
{
    uint64_t now = oct_time_monotonic_ns();
    if (c->lower_since_ns == 0 || c->lower_seq != s) {
        c->lower_seq = s;
        c->lower_since_ns = now;
        return false;
    }
    return now - c->lower_since_ns >= LOWER_SEQ_ACCEPT_NS;
}

static oct_err read_guarded(oct_control *c, int attempts, oct_control_values *v, uint64_t *gen)
{
    for (int i = 0; i < attempts; i++) {
        if (i)
            oct_ipc_sleep_ns(READ_PAUSE_NS); /* let the writer finish; never spin */
        uint64_t s0 = OCT_LOAD_ACQ(&c->b->seq);
        if (s0 & 1)
            continue;
        if (s0 < c->seq_read && !lower_seq_settled(c, s0))
            continue;
        oct_control_values tmp;
        memset(&tmp, 0, sizeof tmp); /* padding too: callers may memcmp values */
        block_to_values(c->b, &tmp);
        OCT_FENCE_ACQ();
        if (OCT_LOAD_RLX(&c->b->seq) != s0)
            continue;
        *v = tmp;
        c->seq_read = s0;
        c->lower_since_ns = 0;
        if (gen)
            *gen = s0 / 2;
        return OCT_OK;
    }
    return OCT_EAGAIN;
}

uint32_t oct_control_abi_minor(const oct_control *c)
{
    return c ? __atomic_load_n(&c->b->abi_minor, __ATOMIC_ACQUIRE) : 0;
}

uint64_t oct_control_generation(const oct_control *c)
{
    return c ? OCT_LOAD_ACQ(&c->b->seq) / 2 : 0;
}

uint64_t oct_control_lower_pending(const oct_control *c, uint64_t *lower_gen, uint64_t *read_gen)
{
    if (!c)
        return 0;
    uint64_t s = OCT_LOAD_ACQ(&c->b->seq);
    /* the reader's record, checked against the block as it is now: a seq
     * back at or above the one read is no longer pending, read or not */
    if (!c->lower_since_ns || s & 1 || s >= c->seq_read || s != c->lower_seq)
        return 0;
    if (lower_gen)
        *lower_gen = s / 2;
    if (read_gen)
        *read_gen = c->seq_read / 2;
    uint64_t now = oct_time_monotonic_ns();
    return now > c->lower_since_ns ? now - c->lower_since_ns : 1;
}

/* expect: 0, or the generation the block must still hold (write_if) */
static oct_err control_write(oct_control *c, uint64_t expect, oct_control_edit_fn fn, void *arg,
                             uint64_t *gen, oct_error *e)
{
    if (!c)
        return oct_error_set(e, OCT_EINVAL, "control: no handle");
    if (!c->writable)
        return oct_error_set(e, OCT_EPERM, "control %s: opened read-only", c->name);
    oct_err err = lock_fd(c->fd, c->name, e);
    if (err)
        return err;
    uint64_t s = OCT_LOAD_ACQ(&c->b->seq);
    if (expect && s != 2 * expect) { /* a newer generation (or a dead writer's) is there */
        unlock_fd(c->fd);
        return oct_error_set(e, OCT_EAGAIN, "control %s: generation %llu superseded by %llu%s",
                             c->name, (unsigned long long)expect, (unsigned long long)(s / 2),
                             s & 1 ? " (a writer died inside it)" : "");
    }
    /* under the lock no other writer is inside, so the fields are stable
     * (a dead writer's half-written values are the starting point) */
    oct_control_values v;
    block_to_values(c->b, &v);
    if (fn)
        fn(&v, arg);
    uint64_t g = write_locked(c->b, &v);
    unlock_fd(c->fd);
    if (gen)
        *gen = g;
    return OCT_OK;
}

oct_err oct_control_write(oct_control *c, oct_control_edit_fn fn, void *arg, uint64_t *gen,
                          oct_error *e)
{
    return control_write(c, 0, fn, arg, gen, e);
}

oct_err oct_control_write_if(oct_control *c, uint64_t expect_gen, oct_control_edit_fn fn, void *arg,
                             uint64_t *gen, oct_error *e)
{
    if (expect_gen == 0)
        return oct_error_set(e, OCT_EINVAL, "control: write_if needs a generation (>= 1)");
    return control_write(c, expect_gen, fn, arg, gen, e);
}

struct command_arg {
    uint32_t command, flags, frames;
    double seconds;
    uint64_t seq;
};

static void set_command(oct_control_values *v, void *arg)
{
    struct command_arg *a = arg;
    v->command_seq++;
    v->command = a->command;
    v->cmd_flags = a->flags;
    v->cmd_frames = a->frames;
    v->cmd_seconds = a->seconds;
    a->seq = v->command_seq;
}

oct_err oct_control_command_args(oct_control *c, uint32_t command, uint32_t flags,
                                 uint32_t frames, double seconds, uint64_t *command_seq,
                                 oct_error *e)
{
    const char *name = oct_command_name(command);
    if (!name)
        return oct_error_set(e, OCT_EINVAL, "command = %u: must be %u..%u", command,
                             (unsigned)OCT_CMD_ONLINE, (unsigned)OCT_CMD_REFERENCE);
    if (command == OCT_CMD_RECORD && (flags & ~(OCT_RECORD_RAW | OCT_RECORD_PRODUCTS)))
        return oct_error_set(e, OCT_EINVAL, "record: flags 0x%x: unknown bits 0x%x", flags,
                             flags & ~(OCT_RECORD_RAW | OCT_RECORD_PRODUCTS));
    if (command == OCT_CMD_REFERENCE && flags > OCT_REFERENCE_AUTO)
        return oct_error_set(e, OCT_EINVAL, "reference: operation %u: must be 0 set, 1 clear, 2 auto",
                             flags);
    if (!isfinite(seconds) || seconds < 0)
        return oct_error_set(e, OCT_EINVAL, "%s: seconds = %g: must be finite and >= 0", name,
                             seconds);
    if (command != OCT_CMD_RECORD && command != OCT_CMD_REFERENCE &&
        (flags || frames || seconds != 0))
        return oct_error_set(e, OCT_EINVAL, "%s: takes no arguments", name);
    if (command != OCT_CMD_RECORD && (frames || seconds != 0))
        return oct_error_set(e, OCT_EINVAL, "%s: frames/seconds are record arguments", name);
    if (command >= OCT_CMD_RECORD && c && oct_control_abi_minor(c) < 2)
        return oct_error_set(e, OCT_EABI,
                             "%s: control block %s is ABI 1.%u (an older octd), the command needs 1.2",
                             name, c->name, oct_control_abi_minor(c));
    struct command_arg a = {command, flags, frames, seconds, 0};
    oct_err err = oct_control_write(c, set_command, &a, NULL, e);
    if (err)
        return err;
    if (command_seq)
        *command_seq = a.seq;
    return OCT_OK;
}

oct_err oct_control_command(oct_control *c, uint32_t command, uint64_t *command_seq,
                            oct_error *e)
{
    return oct_control_command_args(c, command, 0, 0, 0.0, command_seq, e);
}
