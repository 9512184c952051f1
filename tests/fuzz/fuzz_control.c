/* fuzz_control.c - the control block (SPEC 3.2) as a hostile or broken
 * operator program may leave it, through the path octd takes each frame:
 * oct_control_header_check(), oct_control_read() (the real seqlock reader,
 * on a real shared object), oct_params_from_control(), oct_params_validate().
 *
 * Input: a 24-byte prefix, then the block's bytes (zero-filled to 4096):
 *   [0,8)  object_bytes (u64 LE)      [8]  samples = 1 << (b % 16)
 *   [9]    sample_type (b % 5)         [10] sample_shift (b % 20)
 *   [11]   bit 0: a reference is loaded
 *   [12,14) ascans (u16 LE)            [14,16) lines (u16 LE)
 *   [16]   masks loaded (R)            [17,24) unused
 * Oracles: the values read equal the block's fields at the SPEC's offsets;
 * oct_params_validate() accepts exactly what an independent reading of the
 * SPEC's rules accepts and gives a reason when it refuses; an accepted
 * generation survives octctl's text round trip (get -> set) unchanged. */
#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "oct_config.h"
#include "oct_control_keys.h"
#include "oct_options.h"
#include "oct_engine.h"
#include "oct_ipc.h"

static oct_control *ctl;     /* keeps the object; each input gets a fresh reader */
static uint8_t *view;        /* our own writable mapping of the same object */
static char name[64];

/* The object stays named while the fuzzer runs (a reader per input opens it:
 * a reader remembers the highest seq it read, ipc/control.c); gone at exit. */
static void unlink_object(void) { shm_unlink(name); }

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(name, sizeof name, "/octfuzz-ctl-%ld", (long)getpid());
    oct_params p;
    oct_params_default(&p);
    oct_control_values v;
    memset(&v, 0, sizeof v);
    oct_control_from_params(&v, &p);
    oct_error e;
    if (oct_control_create(&ctl, name, &v, 0600, &e) != OCT_OK) {
        fprintf(stderr, "fuzz_control: %s\n", e.msg);
        abort();
    }
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        perror("fuzz_control: shm_open");
        abort();
    }
    view = mmap(NULL, OCT_CONTROL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (view == MAP_FAILED) {
        perror("fuzz_control: mmap");
        abort();
    }
    atexit(unlink_object);
    return 0;
}

static float le_f32(const uint8_t *b, size_t off)
{
    uint32_t u = fuzz_le32(b + off);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int32_t le_i32(const uint8_t *b, size_t off) { return (int32_t)fuzz_le32(b + off); }

static bool same_f32(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* The values at the offsets of SPEC 3.2, read independently of the C structs. */
static void check_values(const uint8_t *b, const oct_control_values *v)
{
    FUZZ_CHECK(v->methods == fuzz_le32(b + 128), "methods");
    FUZZ_CHECK(v->window == fuzz_le32(b + 132), "window");
    FUZZ_CHECK(same_f32(v->window_param, le_f32(b, 136)), "window_param");
    FUZZ_CHECK(v->freq_cutoff == le_i32(b, 140), "freq_cutoff");
    FUZZ_CHECK(v->msi_lag_lo == le_i32(b, 144) && v->msi_lag_hi == le_i32(b, 148), "lags");
    FUZZ_CHECK(v->scale == fuzz_le32(b + 152) && v->background == fuzz_le32(b + 156), "enums");
    FUZZ_CHECK(v->enface_start == le_i32(b, 160) && v->enface_step == le_i32(b, 164) &&
                   v->enface_count == le_i32(b, 168),
               "enface");
    FUZZ_CHECK(v->xsec_h_index == le_i32(b, 172) && v->xsec_v_index == le_i32(b, 176), "xsec");
    for (int c = 0; c < 3; c++)
        FUZZ_CHECK(same_f32(v->gsc[c], le_f32(b, 180 + 4 * c)) &&
                       same_f32(v->contrast[c], le_f32(b, 192 + 4 * c)) &&
                       same_f32(v->brightness[c], le_f32(b, 204 + 4 * c)),
                   "display class %d", c);
    FUZZ_CHECK(v->products == fuzz_le32(b + 216), "products");
    FUZZ_CHECK(v->command_seq == fuzz_le64(b + 224) && v->command == fuzz_le32(b + 232),
               "command");
    /* ABI 1.1 fields; in a 1.0 block (minor 0) the padding means nothing and
     * they read as their defaults */
    uint8_t d[OCT_CONTROL_BYTES];
    const uint8_t *x = b;
    if (fuzz_le32(b + 12) < 1) {
        oct_control_values dv;
        memset(&dv, 0, sizeof dv);
        oct_control_values_default_1_1(&dv);
        memset(d, 0, sizeof d);
        memcpy(d + 236, &dv.background_param, 4);
        memcpy(d + 240, &dv.klin, 4);
        memcpy(d + 244, &dv.klin_taps, 4);
        memcpy(d + 248, dv.klin_coef, 32);
        memcpy(d + 280, &dv.klin_source, 4);
        memcpy(d + 284, &dv.disp_a2, 4);
        memcpy(d + 288, &dv.disp_a3, 4);
        memcpy(d + 292, &dv.disp_k0, 4);
        x = d;
    }
    FUZZ_CHECK(v->background_param == le_i32(x, 236), "background_param");
    FUZZ_CHECK(v->klin == fuzz_le32(x + 240) && v->klin_taps == le_i32(x, 244) &&
                   v->klin_source == fuzz_le32(x + 280),
               "klin");
    for (int i = 0; i < 4; i++) {
        uint64_t u = fuzz_le64(x + 248 + 8 * (size_t)i);
        FUZZ_CHECK(!memcmp(&v->klin_coef[i], &u, 8), "klin_coef[%d]", i);
    }
    FUZZ_CHECK(same_f32(v->disp_a2, le_f32(x, 284)) && same_f32(v->disp_a3, le_f32(x, 288)) &&
                   same_f32(v->disp_k0, le_f32(x, 292)),
               "dispersion");
}


/* SPEC 1, 2 and 3.2 read independently: is this generation applicable? */
static bool spec_valid(const oct_control_values *v, const oct_geometry *g, uint32_t masks,
                       bool have_ref)
{
    uint32_t M = g->samples;
    if (M < 64 || M > 8192 || (M & (M - 1)) || g->ascans < 1 || g->lines < 1)
        return false;
    if (g->sample_type < 1 || g->sample_type > 3)
        return false;
    if (g->sample_type == 3 ? g->sample_shift != 0 : g->sample_shift > 15)
        return false;
    /* octd's bound on any frame (oct_types.h: OCT_FRAME_BYTES_MAX = 2^34 bytes) */
    uint64_t bytes = (uint64_t)M * g->ascans * g->lines * (g->sample_type == 3 ? 4 : 2);
    if (bytes > (1ull << 34))
        return false;
    int64_t half = M / 2;
    /* bit 2 (cms) is checked against the set-up by oct_params_check, not here */
    if (v->methods == 0 || v->methods > 7 || ((v->methods & 2) && masks == 0))
        return false;
    if (v->window > 5 || !isfinite(v->window_param))
        return false;
    if (v->window == 4 && !(v->window_param > 0))
        return false;
    if (v->window == 5 && !(v->window_param >= 0 && v->window_param <= 1))
        return false;
    if (v->freq_cutoff < 0 || v->freq_cutoff > half)
        return false;
    if (!(-half < v->msi_lag_lo && v->msi_lag_lo <= v->msi_lag_hi && v->msi_lag_hi < half))
        return false;
    if (v->scale > 1 || v->background > 4 || (v->background == 1 && !have_ref))
        return false;
    /* ABI 1.1: rolling K in [1, 1024], fpn G in [2, 65536] */
    if (v->background == 3 && (v->background_param < 1 || v->background_param > 1024))
        return false;
    if (v->background == 4 && (v->background_param < 2 || v->background_param > 65536))
        return false;
    if (v->klin > 3 || v->klin_source > 1 ||
        (v->klin == 3 && (v->klin_taps < 2 || v->klin_taps > 64)))
        return false;
    for (int i = 0; i < 4; i++)
        if (!isfinite(v->klin_coef[i]))
            return false;
    if (!isfinite(v->disp_a2) || !isfinite(v->disp_a3) ||
        !(v->disp_k0 >= -1.0f && v->disp_k0 <= 2.0f))
        return false;
    /* en-face indices: start >= 0, step >= 1, count >= 1 (octd caps it at 65536) */
    if (v->enface_start < 0 || v->enface_step < 1 || v->enface_count < 1 ||
        v->enface_count > 65536)
        return false;
    /* indices >= 0; below lines/ascans when that cross-section is asked for
     * and exists (volume frames: issue 14) */
    bool vol = g->lines > 1;
    if (v->xsec_h_index < 0 ||
        (vol && (v->products & 8u) && (uint32_t)v->xsec_h_index >= g->lines))
        return false;
    if (v->xsec_v_index < 0 ||
        (vol && (v->products & 16u) && (uint32_t)v->xsec_v_index >= g->ascans))
        return false;
    /* gsc > 0 (SPEC 10.1 rejects a gsc that makes every image black) */
    for (int c = 0; c < 3; c++)
        if (!isfinite(v->gsc[c]) || !(v->gsc[c] > 0) || !isfinite(v->contrast[c]) ||
            !isfinite(v->brightness[c]))
            return false;
    /* kinds 0..7 (6, 7: slabs), bit 8 (f32), bits 9..13 (the angiography
     * kinds 8..12, SPEC 10.3) */
    if (v->products & ~0x3fffu)
        return false;
    /* SPEC 10.3: angio.metrics a set of the five metrics; with any asked for,
     * K in [1, 16], band width in (0, 4], align 0..2 */
    if (v->angio_metrics & ~0x1fu)
        return false;
    if (v->angio_metrics &&
        (v->angio_bands < 1 || v->angio_bands > 16 ||
         !(v->angio_band_width > 0.0f && v->angio_band_width <= 4.0f) || v->angio_align > 2))
        return false;
    /* SPEC 10.2: with a slab asked for on a volume, [start, end) clamped to
     * [0, D] must not be empty for cfd (D = M/2 + 1) and msi (D = masks) */
    if (g->lines > 1 && (v->products & 0xc0u)) {
        const int64_t Ds[2] = {half + 1, masks};
        for (int m = 0; m < 2; m++) {
            if (!(v->methods & (1u << m)))
                continue;
            int64_t d0 = v->slab_start, d1 = v->slab_end;
            d0 = d0 < 0 ? 0 : d0 > Ds[m] ? Ds[m] : d0;
            d1 = d1 < 0 ? 0 : d1 > Ds[m] ? Ds[m] : d1;
            if (d1 <= d0)
                return false;
        }
    }
    return true;
}

/* octctl's view: every key printed by `get` and read back by `set` gives
 * the same generation. */
static void check_text_round_trip(const oct_control_values *v)
{
    char text[4096];
    size_t n = oct_control_format_all(v, text, sizeof text);
    FUZZ_CHECK(n < sizeof text, "format_all needs %zu bytes", n);
    oct_control_values w;
    memset(&w, 0, sizeof w);
    w.command_seq = v->command_seq;
    w.command = v->command;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        oct_error e = {{0}};
        oct_err err = oct_control_assign(&w, line, &e);
        FUZZ_CHECK(err == OCT_OK, "'%s' printed by get is refused by set: %s", line, e.msg);
    }
    oct_params a, b;
    oct_params_from_control(&a, v);
    oct_params_from_control(&b, &w);
    FUZZ_CHECK(!memcmp(&a, &b, sizeof a), "values changed in the get/set round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 24)
        return 0;
    uint64_t object_bytes = fuzz_le64(data);
    oct_geometry g = {1u << (data[8] % 16), (uint32_t)data[12] | (uint32_t)data[13] << 8,
                      (uint32_t)data[14] | (uint32_t)data[15] << 8, data[9] % 5u,
                      data[10] % 20u};
    bool have_ref = data[11] & 1;
    uint32_t masks = data[16];

    uint8_t *blk = calloc(1, OCT_CONTROL_BYTES);
    if (!blk)
        abort();
    memcpy(blk, data + 24, size - 24 < OCT_CONTROL_BYTES ? size - 24 : OCT_CONTROL_BYTES);

    oct_error e = {{0}};
    oct_err err = oct_control_header_check((const oct_control_block *)blk, object_bytes, &e);
    fuzz_check_error("header_check", err, &e);
    if (err)
        goto out;
    memcpy(view, blk, OCT_CONTROL_BYTES);
    oct_control *rd;
    err = oct_control_open(&rd, name, false, &e);
    FUZZ_CHECK(err == OCT_OK, "open of a block that passed header_check: %s", e.msg);
    oct_control_values v;
    uint64_t gen = 0;
    err = oct_control_read(rd, 1, &v, &gen);
    uint64_t seq = fuzz_le64(blk + 64);
    if (seq & 1) {
        FUZZ_CHECK(err == OCT_EAGAIN, "odd seq (writer inside) read as %d", (int)err);
        oct_control_close(rd, false);
        goto out;
    }
    FUZZ_CHECK(err == OCT_OK && gen == seq / 2, "read: %d, gen %llu", (int)err,
               (unsigned long long)gen);
    if (seq >= 2) { /* a smaller even seq next: a byte-wise store in progress */
        uint64_t lower = data[18] % 2 ? (seq / 2) & ~1ull : seq - 2;
        memcpy(view + 64, &lower, 8);
        oct_control_values w;
        uint64_t g2 = 0;
        FUZZ_CHECK(oct_control_read(rd, 1, &w, &g2) == OCT_EAGAIN,
                   "seq %llu after %llu read as generation %llu", (unsigned long long)lower,
                   (unsigned long long)seq, (unsigned long long)g2);
        memcpy(view + 64, &seq, 8);
    }
    oct_control_close(rd, false);
    check_values(blk, &v);
    /* `octctl get` of whatever is there (raw out-of-range values too), also
     * into a buffer too small for it */
    char text[4096];
    size_t need = oct_control_format_all(&v, text, sizeof text);
    FUZZ_CHECK(need < sizeof text && strlen(text) == need, "format_all: %zu", need);
    size_t small = data[17] % 64;
    FUZZ_CHECK(oct_control_format_all(&v, small ? text : NULL, small) == need,
               "format_all length depends on the buffer");
    if (small)
        FUZZ_CHECK(strlen(text) < small, "format_all overran a %zu-byte buffer", small);

    oct_params p;
    oct_params_from_control(&p, &v);
    err = oct_params_validate(&p, &g, masks, have_ref, &e);
    fuzz_check_error("validate", err, &e);
    bool want = spec_valid(&v, &g, masks, have_ref);
    FUZZ_CHECK((err == OCT_OK) == want, "validate says %s (%s), the SPEC says %s",
               err ? "invalid" : "valid", err ? e.msg : "", want ? "valid" : "invalid");
    /* what octd applies: the option table's check (oct_options.h) and the engine's */
    if (err == OCT_OK && oct_options_check_values(&v, NULL) == OCT_OK)
        check_text_round_trip(&v);
out:
    free(blk);
    return 0;
}
