/* oct_ipc.h - octd's shared-memory ABI 1.0 (SPEC section 3) and the small
 * library that both sides use.  Link with `pkg-config --libs octipc`.
 *
 *  frame ring     producer (acquirer) writes, consumers (octd) read-only
 *  control block  operators' programs write (seqlock), octd reads
 *  status block   octd writes, anyone reads
 *
 * All multi-byte fields are little-endian; fields marked "atomic" are only
 * accessed with 64/32-bit atomic loads (acquire) and stores (release).  The
 * library does this with GCC's __atomic builtins (__atomic_load_n with
 * __ATOMIC_ACQUIRE, __atomic_store_n with __ATOMIC_RELEASE) on the plain
 * fields below: the same memory model as C11 atomic_load_explicit /
 * atomic_store_explicit with memory_order_acquire / memory_order_release,
 * and compatible with std::atomic_ref, Rust's AtomicU64 or Python writers
 * that store aligned 8-byte words.
 *
 * Control block writers (any language) serialise like this, so they
 * interoperate with octctl and this library:
 *   1. flock(fd, LOCK_EX) on the control block's own shm fd (shm_open
 *      O_RDWR of the name; no side lock file).  The kernel drops the lock
 *      when a writer dies.
 *   2. s = seq (acquire).  If s is even: store seq = s+1, release fence.
 *      If s is odd, a writer died inside: keep s (already odd) and simply
 *      overwrite every value field, which completes that generation.
 *   3. write the value fields; store seq = s+1 (release; even again).
 *   4. flock(fd, LOCK_UN).  The generation is seq/2.
 */
#ifndef OCT_IPC_H
#define OCT_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_ipc_types.h" /* stands alone: a copy of kernels/oct_types.h */

#ifdef __cplusplus
extern "C" {
#endif

#define OCT_ABI_MAJOR 1u
#define OCT_ABI_MINOR 0u /* frame ring and status block */
/* Control block ABI 1.1: background_param, k-linearisation and dispersion
 * fields in the former padding (offsets 236..295).  Readers accept any
 * minor of major 1; in a 1.0 block the 1.1 fields read as their defaults. */
#define OCT_CONTROL_ABI_MINOR 2u

#define OCT_RING_DEFAULT "/octd-frames"
#define OCT_CONTROL_DEFAULT "/octd-control"
#define OCT_STATUS_DEFAULT "/octd-status"

/* ------------------------------------------------------------------ */
/* 3.1 frame ring                                                      */
/* ------------------------------------------------------------------ */
#define OCT_RING_MAGIC "OCTRING"   /* 8 bytes with the NUL */
#define OCT_RING_HEADER_BYTES 4096u
#define OCT_SLOT_HEADER_BYTES 4096u

enum oct_ring_state { OCT_RING_INIT = 0, OCT_RING_READY = 1, OCT_RING_CLOSED = 2 };

typedef struct oct_ring_header {
    char magic[8];              /*   0 "OCTRING\0" */
    uint32_t abi_major;         /*   8 */
    uint32_t abi_minor;         /*  12 */
    uint32_t header_bytes;      /*  16 = 4096 */
    uint32_t slot_count;        /*  20 power of two >= 2 */
    uint64_t slot_stride;       /*  24 multiple of 4096 */
    uint64_t slot0_offset;      /*  32 multiple of 4096 */
    uint32_t samples;           /*  40 M */
    uint32_t ascans;            /*  44 N */
    uint32_t lines;             /*  48 L */
    uint32_t sample_type;       /*  52 oct_sample_type */
    uint32_t sample_shift;      /*  56 */
    uint32_t flags;             /*  60 */
    uint64_t epoch;             /*  64 non-zero, new per creation */
    uint64_t producer_pid;      /*  72 */
    uint64_t producer_start_ns; /*  80 CLOCK_REALTIME */
    uint64_t frame_bytes;       /*  88 */
    uint8_t pad0[128 - 96];
    uint64_t write_seq;         /* 128 atomic: frames committed */
    uint8_t pad1[192 - 136];
    uint64_t heartbeat_ns;      /* 192 atomic: CLOCK_MONOTONIC */
    uint8_t pad2[256 - 200];
    uint32_t state;             /* 256 atomic: oct_ring_state, READY stored last */
    uint8_t pad3[4096 - 260];
} oct_ring_header;

typedef struct oct_slot_header {
    uint64_t seq;               /*   0 atomic: 2n+1 writing, 2n+2 committed */
    uint64_t frame_id;          /*   8 */
    uint64_t t_acq_ns;          /*  16 CLOCK_REALTIME */
    uint32_t flags;             /*  24 */
    uint8_t pad[4096 - 28];
} oct_slot_header;

/* ------------------------------------------------------------------ */
/* 3.2 control block                                                   */
/* ------------------------------------------------------------------ */
#define OCT_CONTROL_MAGIC "OCTCTRL"
#define OCT_CONTROL_BYTES 4096u

enum oct_command {
    OCT_CMD_NONE = 0,
    OCT_CMD_ONLINE = 1,
    OCT_CMD_SNAPSHOT = 2,
    OCT_CMD_REVIEW = 3,
    OCT_CMD_SAVE_RAW = 4,
    OCT_CMD_SAVE_IMAGES = 5,
    /* ABI 1.2: arguments in cmd_flags / cmd_frames / cmd_seconds of the same generation */
    OCT_CMD_RECORD = 6,         /* start a recording (SPEC 10.5); cmd_flags OCT_RECORD_* */
    OCT_CMD_RECORD_STOP = 7,    /* end the recording in progress */
    OCT_CMD_REFERENCE = 8       /* registration reference (SPEC 10.4); cmd_flags OCT_REFERENCE_* */
};
#define OCT_RECORD_RAW 1u       /* cmd_flags of OCT_CMD_RECORD: /raw */
#define OCT_RECORD_PRODUCTS 2u  /* /products/<topic> */
enum oct_reference_op { OCT_REFERENCE_SET = 0, OCT_REFERENCE_CLEAR = 1, OCT_REFERENCE_AUTO = 2 };
/* angio_metrics bits (SPEC 10.3) */
#define OCT_ANGIO_STRUCT 1u
#define OCT_ANGIO_MEDIAN 2u
#define OCT_ANGIO_SV 4u
#define OCT_ANGIO_DECOR 8u
#define OCT_ANGIO_SSADA 16u

typedef struct oct_control_block {
    char magic[8];              /*   0 "OCTCTRL\0" */
    uint32_t abi_major;         /*   8 */
    uint32_t abi_minor;         /*  12 */
    uint32_t block_bytes;       /*  16 = 4096 */
    uint8_t pad0[64 - 20];
    uint64_t seq;               /*  64 atomic seqlock: odd while a writer is inside */
    uint8_t pad1[128 - 72];
    uint32_t methods;           /* 128 */
    uint32_t window;            /* 132 */
    float window_param;         /* 136 */
    int32_t freq_cutoff;        /* 140 */
    int32_t msi_lag_lo;         /* 144 */
    int32_t msi_lag_hi;         /* 148 */
    uint32_t scale;             /* 152 */
    uint32_t background;        /* 156 */
    int32_t enface_start;       /* 160 */
    int32_t enface_step;        /* 164 */
    int32_t enface_count;       /* 168 */
    int32_t xsec_h_index;       /* 172 */
    int32_t xsec_v_index;       /* 176 */
    float gsc[3];               /* 180 bscan, enface, confocal */
    float contrast[3];          /* 192 */
    float brightness[3];        /* 204 */
    uint32_t products;          /* 216 */
    uint8_t pad2[224 - 220];
    uint64_t command_seq;       /* 224 incremented by a writer to issue `command` */
    uint32_t command;           /* 232 enum oct_command */
    /* ABI 1.1 (a 1.0 block: zero padding here, read as the defaults below) */
    int32_t background_param;   /* 236 rolling: frames K [1, 1024]; fpn: segment G [2, 65536] (16) */
    uint32_t klin;              /* 240 0 off, 1 linear, 2 cubic, 3 sinc (0) */
    int32_t klin_taps;          /* 244 sinc cut-off length T [2, 64] (21) */
    double klin_coef[4];        /* 248 c0..c3: p[n] = c0 + c1 t + c2 t^2 + c3 t^3, t = n/M (0) */
    uint32_t klin_source;       /* 280 0 polynomial, 1 file of the profile (0) */
    float disp_a2;              /* 284 dispersion, radians (0) */
    float disp_a3;              /* 288 (0) */
    float disp_k0;              /* 292 centre, fraction of M (0.5) */
    /* ABI 1.2 (a 1.0/1.1 block: read as the defaults below) */
    int32_t slab_start;         /* 296 slab.start d0, clamped to [0, D] (0) */
    int32_t slab_end;           /* 300 slab.end d1, clamped to [0, D] (INT32_MAX: D) */
    uint32_t angio_metrics;     /* 304 OCT_ANGIO_* bits (0) */
    int32_t angio_bands;        /* 308 ssada bands K [1, 16] (4) */
    float angio_band_width;     /* 312 band width, fraction of M/K, (0, 4] (1.0) */
    uint32_t angio_align;       /* 316 repeats aligned: 0 off, 1 axial, 2 axial + lateral (0) */
    int32_t reg_average;        /* 320 registered volumes averaged [1, 64] (10) */
    int32_t reg_stripe;         /* 324 registration stripe width, B-scans [1, 64] (3) */
    float reg_search_xy;        /* 328 search window in x and y, fraction of the field (0, 0.5] (0.25) */
    int32_t reg_search_z;       /* 332 search window in z, pixels [0, 512] (15) */
    uint32_t cmd_flags;         /* 336 argument of `command`: OCT_RECORD_* / enum oct_reference_op */
    uint32_t cmd_frames;        /* 340 record: frames to record (0: no limit) */
    double cmd_seconds;         /* 344 record: seconds to record (0: no limit) */
    uint8_t pad3[4096 - 352];
} oct_control_block;

/* The values of the control block as one plain struct (no seq, no padding
 * semantics): what a reader gets and a writer sets in one generation. */
typedef struct oct_control_values {
    uint32_t methods;
    uint32_t window;
    float window_param;
    int32_t freq_cutoff;
    int32_t msi_lag_lo;
    int32_t msi_lag_hi;
    uint32_t scale;
    uint32_t background;
    int32_t enface_start;
    int32_t enface_step;
    int32_t enface_count;
    int32_t xsec_h_index;
    int32_t xsec_v_index;
    float gsc[3];
    float contrast[3];
    float brightness[3];
    uint32_t products;
    uint64_t command_seq;
    uint32_t command;
    /* ABI 1.1 */
    int32_t background_param;
    uint32_t klin;
    int32_t klin_taps;
    double klin_coef[4];
    uint32_t klin_source;
    float disp_a2;
    float disp_a3;
    float disp_k0;
    /* ABI 1.2 */
    int32_t slab_start;
    int32_t slab_end;
    uint32_t angio_metrics;
    int32_t angio_bands;
    float angio_band_width;
    uint32_t angio_align;
    int32_t reg_average;
    int32_t reg_stripe;
    float reg_search_xy;
    int32_t reg_search_z;
    uint32_t cmd_flags;
    uint32_t cmd_frames;
    double cmd_seconds;
} oct_control_values;

/* ------------------------------------------------------------------ */
/* 3.3 status block (written only by octd)                             */
/* ------------------------------------------------------------------ */
#define OCT_STATUS_MAGIC "OCTSTAT"
#define OCT_STATUS_BYTES 4096u

enum oct_daemon_state {
    OCT_STATE_STARTING = 0,
    OCT_STATE_ONLINE = 1,
    OCT_STATE_REVIEW = 2,
    OCT_STATE_ERROR = 3,
    OCT_STATE_STOPPING = 4
};
const char *oct_daemon_state_name(uint32_t state);

/* Result of a command (command_result). */
enum oct_command_result { OCT_CMDRES_OK = 0, OCT_CMDRES_REFUSED = 1, OCT_CMDRES_FAILED = 2 };

/* Layout (naturally aligned): the status block is written by one process
 * (octd) under its own seqlock `seq` (odd while octd is writing); counters
 * are also individually atomic so a reader may take them without the lock. */
typedef struct oct_status_block {
    char magic[8];              /*    0 "OCTSTAT\0" */
    uint32_t abi_major;         /*    8 */
    uint32_t abi_minor;         /*   12 */
    uint32_t block_bytes;       /*   16 = 4096 */
    uint32_t state;             /*   20 atomic: oct_daemon_state */
    uint64_t pid;               /*   24 */
    uint64_t seq;               /*   32 atomic seqlock over the text fields */
    uint64_t heartbeat_ns;      /*   40 atomic CLOCK_MONOTONIC */
    char backend[32];           /*   48 "cpu" / "cuda" */
    char device[96];            /*   80 */
    uint64_t ring_epoch;        /*  176 */
    uint32_t ring_samples;      /*  184 */
    uint32_t ring_ascans;       /*  188 */
    uint32_t ring_lines;        /*  192 */
    uint32_t ring_sample_type;  /*  196 */
    uint64_t applied_gen;       /*  200 atomic: control generation in use */
    uint64_t rejected_gen;      /*  208 atomic: last rejected generation (0 none) */
    char rejected_reason[128];  /*  216 */
    uint64_t command_ack_seq;   /*  344 atomic: command_seq last handled */
    uint32_t command_result;    /*  352 enum oct_command_result */
    uint32_t pad0;              /*  356 */
    char command_message[128];  /*  360 */
    uint64_t frames_seen;       /*  488 atomic counters from here */
    uint64_t frames_processed;  /*  496 */
    uint64_t frames_skipped;    /*  504 */
    uint64_t frames_torn;       /*  512 */
    uint64_t ring_reattaches;   /*  520 */
    uint64_t images_published;  /*  528 */
    uint64_t publish_drops;     /*  536 */
    uint64_t last_frame_id;     /*  544 */
    uint64_t last_latency_ns;   /*  552 commit -> last message sent */
    uint64_t start_ns;          /*  560 CLOCK_REALTIME of octd's start */
    /* status ABI 1.1 (abi_minor = 1) */
    uint32_t ring_state;        /*  568 enum oct_attach_state */
    uint32_t warning_count;     /*  572 warnings in `warnings` */
    char ring_message[128];     /*  576 why the ring is not attached (empty when attached) */
    char warnings[256];         /*  704 current warnings, "; "-separated (valid but yields nothing, ...) */
    char last_error[128];       /*  960 the last error octd logged */
    uint64_t frames_reprocessed;/* 1088 review re-processing of the kept frame (not ring frames) */
    uint64_t frames_lost;       /* 1096 ring frames lapped before octd could read them */
    uint32_t record_state;      /* 1104 enum oct_record_state */
    uint32_t reference_state;   /* 1108 enum oct_reference_state */
    uint64_t record_frames;     /* 1112 frames written to the recording */
    uint64_t record_dropped;    /* 1120 frames the disk could not take (left out, counted) */
    char record_file[256];      /* 1128 the recording's final path */
    char record_message[128];   /* 1384 why a recording stopped */
    uint64_t reference_frame;   /* 1512 frame_seq of the registration reference (0 none) */
    uint64_t registration_volumes; /* 1520 volumes registered live (motion published) */
    uint64_t registration_skipped; /* 1528 volumes not registered: the registration was busy */
    uint8_t pad1[4096 - 1536];
} oct_status_block;
enum oct_attach_state { OCT_ATTACH_WAITING = 0, OCT_ATTACH_OK = 1, OCT_ATTACH_ERROR = 2 };
#define OCT_STATUS_ABI_MINOR 1u /* the status block's fields from 568 on */
enum oct_record_state { OCT_RECORD_IDLE = 0, OCT_RECORD_ACTIVE = 1, OCT_RECORD_DONE = 2, OCT_RECORD_FAILED = 3 };
enum oct_reference_state { OCT_REFSTATE_NONE = 0, OCT_REFSTATE_SET = 1, OCT_REFSTATE_AUTO = 2 };


/* ------------------------------------------------------------------ */
/* ABI checks: every offset and size above.  They are in the public     */
/* header so that a program compiled with other flags (packing, -m32,   */
/* another compiler) fails to build instead of silently disagreeing.    */
/* ------------------------------------------------------------------ */
#if defined(__cplusplus)
#define OCT_ABI_ASSERT(cond, msg) static_assert(cond, "octd ABI: " msg)
#else
#define OCT_ABI_ASSERT(cond, msg) _Static_assert(cond, "octd ABI: " msg)
#endif
OCT_ABI_ASSERT(sizeof(oct_ring_header) == 4096, "ring header size");
OCT_ABI_ASSERT(offsetof(oct_ring_header, magic) == 0, "magic");
OCT_ABI_ASSERT(offsetof(oct_ring_header, abi_major) == 8, "abi_major");
OCT_ABI_ASSERT(offsetof(oct_ring_header, abi_minor) == 12, "abi_minor");
OCT_ABI_ASSERT(offsetof(oct_ring_header, header_bytes) == 16, "header_bytes");
OCT_ABI_ASSERT(offsetof(oct_ring_header, slot_count) == 20, "slot_count");
OCT_ABI_ASSERT(offsetof(oct_ring_header, slot_stride) == 24, "slot_stride");
OCT_ABI_ASSERT(offsetof(oct_ring_header, slot0_offset) == 32, "slot0_offset");
OCT_ABI_ASSERT(offsetof(oct_ring_header, samples) == 40, "samples");
OCT_ABI_ASSERT(offsetof(oct_ring_header, ascans) == 44, "ascans");
OCT_ABI_ASSERT(offsetof(oct_ring_header, lines) == 48, "lines");
OCT_ABI_ASSERT(offsetof(oct_ring_header, sample_type) == 52, "sample_type");
OCT_ABI_ASSERT(offsetof(oct_ring_header, sample_shift) == 56, "sample_shift");
OCT_ABI_ASSERT(offsetof(oct_ring_header, flags) == 60, "flags");
OCT_ABI_ASSERT(offsetof(oct_ring_header, epoch) == 64, "epoch");
OCT_ABI_ASSERT(offsetof(oct_ring_header, producer_pid) == 72, "producer_pid");
OCT_ABI_ASSERT(offsetof(oct_ring_header, producer_start_ns) == 80, "producer_start_ns");
OCT_ABI_ASSERT(offsetof(oct_ring_header, frame_bytes) == 88, "frame_bytes");
OCT_ABI_ASSERT(offsetof(oct_ring_header, write_seq) == 128, "write_seq");
OCT_ABI_ASSERT(offsetof(oct_ring_header, heartbeat_ns) == 192, "heartbeat_ns");
OCT_ABI_ASSERT(offsetof(oct_ring_header, state) == 256, "state");
OCT_ABI_ASSERT(sizeof(oct_slot_header) == 4096, "slot header size");
OCT_ABI_ASSERT(offsetof(oct_slot_header, seq) == 0, "slot seq");
OCT_ABI_ASSERT(offsetof(oct_slot_header, frame_id) == 8, "slot frame_id");
OCT_ABI_ASSERT(offsetof(oct_slot_header, t_acq_ns) == 16, "slot t_acq_ns");
OCT_ABI_ASSERT(offsetof(oct_slot_header, flags) == 24, "slot flags");
OCT_ABI_ASSERT(sizeof(oct_control_block) == 4096, "control block size");
OCT_ABI_ASSERT(offsetof(oct_control_block, magic) == 0, "magic");
OCT_ABI_ASSERT(offsetof(oct_control_block, abi_major) == 8, "abi_major");
OCT_ABI_ASSERT(offsetof(oct_control_block, abi_minor) == 12, "abi_minor");
OCT_ABI_ASSERT(offsetof(oct_control_block, block_bytes) == 16, "block_bytes");
OCT_ABI_ASSERT(offsetof(oct_control_block, seq) == 64, "seq");
OCT_ABI_ASSERT(offsetof(oct_control_block, methods) == 128, "methods");
OCT_ABI_ASSERT(offsetof(oct_control_block, window) == 132, "window");
OCT_ABI_ASSERT(offsetof(oct_control_block, window_param) == 136, "window_param");
OCT_ABI_ASSERT(offsetof(oct_control_block, freq_cutoff) == 140, "freq_cutoff");
OCT_ABI_ASSERT(offsetof(oct_control_block, msi_lag_lo) == 144, "msi_lag_lo");
OCT_ABI_ASSERT(offsetof(oct_control_block, msi_lag_hi) == 148, "msi_lag_hi");
OCT_ABI_ASSERT(offsetof(oct_control_block, scale) == 152, "scale");
OCT_ABI_ASSERT(offsetof(oct_control_block, background) == 156, "background");
OCT_ABI_ASSERT(offsetof(oct_control_block, enface_start) == 160, "enface_start");
OCT_ABI_ASSERT(offsetof(oct_control_block, enface_step) == 164, "enface_step");
OCT_ABI_ASSERT(offsetof(oct_control_block, enface_count) == 168, "enface_count");
OCT_ABI_ASSERT(offsetof(oct_control_block, xsec_h_index) == 172, "xsec_h_index");
OCT_ABI_ASSERT(offsetof(oct_control_block, xsec_v_index) == 176, "xsec_v_index");
OCT_ABI_ASSERT(offsetof(oct_control_block, gsc) == 180, "gsc");
OCT_ABI_ASSERT(offsetof(oct_control_block, contrast) == 192, "contrast");
OCT_ABI_ASSERT(offsetof(oct_control_block, brightness) == 204, "brightness");
OCT_ABI_ASSERT(offsetof(oct_control_block, products) == 216, "products");
OCT_ABI_ASSERT(offsetof(oct_control_block, slab_start) == 296, "slab_start");
OCT_ABI_ASSERT(offsetof(oct_control_block, slab_end) == 300, "slab_end");
OCT_ABI_ASSERT(offsetof(oct_control_block, angio_metrics) == 304, "angio_metrics");
OCT_ABI_ASSERT(offsetof(oct_control_block, angio_bands) == 308, "angio_bands");
OCT_ABI_ASSERT(offsetof(oct_control_block, angio_band_width) == 312, "angio_band_width");
OCT_ABI_ASSERT(offsetof(oct_control_block, angio_align) == 316, "angio_align");
OCT_ABI_ASSERT(offsetof(oct_control_block, reg_average) == 320, "reg_average");
OCT_ABI_ASSERT(offsetof(oct_control_block, reg_stripe) == 324, "reg_stripe");
OCT_ABI_ASSERT(offsetof(oct_control_block, reg_search_xy) == 328, "reg_search_xy");
OCT_ABI_ASSERT(offsetof(oct_control_block, reg_search_z) == 332, "reg_search_z");
OCT_ABI_ASSERT(offsetof(oct_control_block, cmd_flags) == 336, "cmd_flags");
OCT_ABI_ASSERT(offsetof(oct_control_block, cmd_frames) == 340, "cmd_frames");
OCT_ABI_ASSERT(offsetof(oct_control_block, cmd_seconds) == 344, "cmd_seconds");
OCT_ABI_ASSERT(offsetof(oct_control_block, command_seq) == 224, "command_seq");
OCT_ABI_ASSERT(offsetof(oct_control_block, command) == 232, "command");
OCT_ABI_ASSERT(offsetof(oct_control_block, background_param) == 236, "background_param");
OCT_ABI_ASSERT(offsetof(oct_control_block, klin) == 240, "klin");
OCT_ABI_ASSERT(offsetof(oct_control_block, klin_taps) == 244, "klin_taps");
OCT_ABI_ASSERT(offsetof(oct_control_block, klin_coef) == 248, "klin_coef");
OCT_ABI_ASSERT(offsetof(oct_control_block, klin_source) == 280, "klin_source");
OCT_ABI_ASSERT(offsetof(oct_control_block, disp_a2) == 284, "disp_a2");
OCT_ABI_ASSERT(offsetof(oct_control_block, disp_a3) == 288, "disp_a3");
OCT_ABI_ASSERT(offsetof(oct_control_block, disp_k0) == 292, "disp_k0");
OCT_ABI_ASSERT(sizeof(float) == 4 && sizeof(double) == 8, "f32/f64");
OCT_ABI_ASSERT(sizeof(oct_status_block) == 4096, "status block size");
OCT_ABI_ASSERT(offsetof(oct_status_block, magic) == 0, "magic");
OCT_ABI_ASSERT(offsetof(oct_status_block, abi_major) == 8, "abi_major");
OCT_ABI_ASSERT(offsetof(oct_status_block, abi_minor) == 12, "abi_minor");
OCT_ABI_ASSERT(offsetof(oct_status_block, block_bytes) == 16, "block_bytes");
OCT_ABI_ASSERT(offsetof(oct_status_block, state) == 20, "state");
OCT_ABI_ASSERT(offsetof(oct_status_block, pid) == 24, "pid");
OCT_ABI_ASSERT(offsetof(oct_status_block, seq) == 32, "seq");
OCT_ABI_ASSERT(offsetof(oct_status_block, heartbeat_ns) == 40, "heartbeat_ns");
OCT_ABI_ASSERT(offsetof(oct_status_block, backend) == 48, "backend");
OCT_ABI_ASSERT(offsetof(oct_status_block, device) == 80, "device");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_epoch) == 176, "ring_epoch");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_samples) == 184, "ring_samples");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_ascans) == 188, "ring_ascans");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_lines) == 192, "ring_lines");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_sample_type) == 196, "ring_sample_type");
OCT_ABI_ASSERT(offsetof(oct_status_block, applied_gen) == 200, "applied_gen");
OCT_ABI_ASSERT(offsetof(oct_status_block, rejected_gen) == 208, "rejected_gen");
OCT_ABI_ASSERT(offsetof(oct_status_block, rejected_reason) == 216, "rejected_reason");
OCT_ABI_ASSERT(offsetof(oct_status_block, command_ack_seq) == 344, "command_ack_seq");
OCT_ABI_ASSERT(offsetof(oct_status_block, command_result) == 352, "command_result");
OCT_ABI_ASSERT(offsetof(oct_status_block, command_message) == 360, "command_message");
OCT_ABI_ASSERT(offsetof(oct_status_block, frames_seen) == 488, "frames_seen");
OCT_ABI_ASSERT(offsetof(oct_status_block, frames_processed) == 496, "frames_processed");
OCT_ABI_ASSERT(offsetof(oct_status_block, frames_skipped) == 504, "frames_skipped");
OCT_ABI_ASSERT(offsetof(oct_status_block, frames_torn) == 512, "frames_torn");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_reattaches) == 520, "ring_reattaches");
OCT_ABI_ASSERT(offsetof(oct_status_block, images_published) == 528, "images_published");
OCT_ABI_ASSERT(offsetof(oct_status_block, publish_drops) == 536, "publish_drops");
OCT_ABI_ASSERT(offsetof(oct_status_block, last_frame_id) == 544, "last_frame_id");
OCT_ABI_ASSERT(offsetof(oct_status_block, last_latency_ns) == 552, "last_latency_ns");
OCT_ABI_ASSERT(offsetof(oct_status_block, start_ns) == 560, "start_ns");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_state) == 568, "ring_state");
OCT_ABI_ASSERT(offsetof(oct_status_block, warning_count) == 572, "warning_count");
OCT_ABI_ASSERT(offsetof(oct_status_block, ring_message) == 576, "ring_message");
OCT_ABI_ASSERT(offsetof(oct_status_block, warnings) == 704, "warnings");
OCT_ABI_ASSERT(offsetof(oct_status_block, last_error) == 960, "last_error");
OCT_ABI_ASSERT(offsetof(oct_status_block, frames_reprocessed) == 1088, "frames_reprocessed");
OCT_ABI_ASSERT(offsetof(oct_status_block, frames_lost) == 1096, "frames_lost");
OCT_ABI_ASSERT(offsetof(oct_status_block, record_state) == 1104, "record_state");
OCT_ABI_ASSERT(offsetof(oct_status_block, reference_state) == 1108, "reference_state");
OCT_ABI_ASSERT(offsetof(oct_status_block, record_frames) == 1112, "record_frames");
OCT_ABI_ASSERT(offsetof(oct_status_block, record_dropped) == 1120, "record_dropped");
OCT_ABI_ASSERT(offsetof(oct_status_block, record_file) == 1128, "record_file");
OCT_ABI_ASSERT(offsetof(oct_status_block, record_message) == 1384, "record_message");
OCT_ABI_ASSERT(offsetof(oct_status_block, reference_frame) == 1512, "reference_frame");
OCT_ABI_ASSERT(offsetof(oct_status_block, registration_volumes) == 1520, "registration_volumes");
OCT_ABI_ASSERT(offsetof(oct_status_block, registration_skipped) == 1528, "registration_skipped");

/* ------------------------------------------------------------------ */
/* library: frame ring                                                 */
/* ------------------------------------------------------------------ */

/* Producer side. */
typedef struct oct_ring_producer oct_ring_producer;

typedef struct oct_ring_config {
    oct_geometry geom;
    uint32_t slot_count;  /* power of two >= 2; 0 = default 8 */
    uint32_t mode;        /* 0 = 0660 */
} oct_ring_config;

/* Unlinks any old ring of that name and creates a new one (new epoch),
 * READY when this returns.  A heartbeat thread is NOT started: call
 * oct_ring_producer_heartbeat() at least every 100 ms (commit does it), or
 * start the helper thread (oct_ring_producer_heartbeat_thread). */
oct_err oct_ring_producer_create(oct_ring_producer **out, const char *name,
                                 const oct_ring_config *cfg, oct_error *e);
/* Begins frame n = write_seq: returns a pointer to the slot's payload
 * (frame_bytes long, page aligned), marks the slot as being written. */
void *oct_ring_producer_begin(oct_ring_producer *p);
/* Commits the frame begun last. */
void oct_ring_producer_commit(oct_ring_producer *p, uint64_t frame_id, uint64_t t_acq_ns);
void oct_ring_producer_heartbeat(oct_ring_producer *p);
/* A producer that may pause between frames for longer than a consumer's
 * stale limit (triggered acquisition: seconds between frames) keeps the ring
 * alive without committing frames: either call oct_ring_producer_heartbeat()
 * at least every 100 ms from its own loop, or let the library do it with
 * on = true: a helper thread stores heartbeat_ns every 50 ms until
 * on = false or oct_ring_producer_close().  The thread touches nothing but
 * heartbeat_ns, so begin/commit need no lock against it.  A producer that
 * hangs with the thread on still looks alive: use it where the pause, not a
 * hang, is the normal case.  octd's own limit is [ring] stale_ms. */
/* Group access (README, set-up): octd reads the ring through group
 * OCT_RING_GROUP_DEFAULT ("octd").  create() gives the new ring that group
 * when it exists and this process is root or a member (supplementary
 * groups count), whatever its primary group; otherwise the ring keeps the
 * creator's group.  set_group() gives it another group (an installation
 * whose octd runs under another group), or reports why not: OCT_ENOENT no
 * such group, OCT_EPERM not a member. */
#define OCT_RING_GROUP_DEFAULT "octd"
oct_err oct_ring_producer_set_group(oct_ring_producer *p, const char *group, oct_error *e);
oct_err oct_ring_producer_heartbeat_thread(oct_ring_producer *p, bool on, oct_error *e);
const oct_ring_header *oct_ring_producer_header(const oct_ring_producer *p);
/* Marks the ring CLOSED, unmaps; unlink = also remove the name. */
void oct_ring_producer_close(oct_ring_producer *p, bool unlink_name);

/* Consumer side. */
typedef struct oct_ring_consumer oct_ring_consumer;

typedef enum oct_ring_policy { OCT_POLICY_LATEST = 0, OCT_POLICY_ALL = 1 } oct_ring_policy;

typedef struct oct_frame_info {
    uint64_t seq;          /* frame number n (0-based) */
    uint64_t frame_id;
    uint64_t t_acq_ns;
    uint64_t epoch;
    uint64_t commit_ns;    /* CLOCK_REALTIME when the consumer saw it committed (approx.) */
    uint64_t skipped;      /* frames skipped (policy latest) or lost (lapped) before this one */
} oct_frame_info;

typedef struct oct_ring_stats {
    uint64_t frames_seen, frames_taken, frames_skipped, frames_lost, frames_torn, reattaches;
} oct_ring_stats;

/* Attaches read-only (O_RDONLY, PROT_READ); validates magic, ABI major,
 * header_bytes, geometry, slot layout and that the object is big enough.
 * OCT_ENOENT when absent, OCT_EAGAIN while state is INIT. */
oct_err oct_ring_consumer_open(oct_ring_consumer **out, const char *name, oct_error *e);
void oct_ring_consumer_close(oct_ring_consumer *c);
/* After OCT_ESTALE or OCT_ECLOSED: re-opens the same name, waiting up to
 * timeout_ms (sleeping, 5 ms steps) for a producer's new ring, and adopts it:
 * its epoch, geometry and frame size (read them again with
 * oct_ring_consumer_geometry/_header; frames are then taken from the newest
 * one on), keeping the counters (reattaches + 1).  The same ring (same
 * epoch) still CLOSED or with a stale heartbeat, no ring, or a ring in state
 * INIT count as "not there yet": OCT_EAGAIN with
 * timeout_ms <= 0 (one try), else OCT_ETIMEDOUT.  A ring that is there but
 * refused (magic, ABI, geometry) returns that error at once.  On any error
 * c is unchanged (still the old mapping) and may be re-attached again. */
oct_err oct_ring_consumer_reattach(oct_ring_consumer *c, int timeout_ms, oct_error *e);
const oct_ring_header *oct_ring_consumer_header(const oct_ring_consumer *c);
void oct_ring_consumer_geometry(const oct_ring_consumer *c, oct_geometry *g);

/* Waits up to timeout_ms for the next frame (per policy) and copies it
 * into dst (frame_bytes).  Returns OCT_OK with info filled, OCT_ETIMEDOUT,
 * OCT_ETORN (copy discarded, counted; call again; info->seq and
 * info->skipped still name the lost frame), OCT_ECLOSED (state
 * CLOSED), OCT_ESTALE (epoch changed, object unlinked/replaced or heartbeat
 * older than stale_ms): the caller re-attaches (oct_ring_consumer_reattach)
 * or closes and re-opens.  Sleeps, never spins. */
oct_err oct_ring_consumer_next(oct_ring_consumer *c, oct_ring_policy policy, void *dst,
                               size_t dst_bytes, int timeout_ms, oct_frame_info *info,
                               oct_error *e);
/* Zero-copy variant for DMA: picks the next frame per policy and returns a
 * pointer into the mapping; after using it call oct_ring_consumer_verify()
 * which returns OCT_OK if the slot still holds that frame, else OCT_ETORN.
 * Several peeked frames may be out at once (copies to several GPUs), up to
 * the last 64 frame numbers: verify each once, in any order; verifying a
 * frame not peeked, or twice, returns OCT_EINVAL. */
oct_err oct_ring_consumer_peek(oct_ring_consumer *c, oct_ring_policy policy, int timeout_ms,
                               const void **frame, oct_frame_info *info, oct_error *e);
oct_err oct_ring_consumer_verify(oct_ring_consumer *c, const oct_frame_info *info);
/* Copies frame seq again into dst (e.g. a frame taken with peek, for a
 * snapshot), or with seq = OCT_RING_NEWEST the newest committed frame, if it
 * is intact in its slot before and after the copy (a few tries for the
 * newest).  Does not move the consumer's position or its counters.  OCT_ETORN:
 * overwritten (seq) or being overwritten every try (newest); OCT_ENOENT: no
 * frame yet; OCT_ESTALE: the ring shrank under the mapping (SIGBUS guarded). */
#define OCT_RING_NEWEST UINT64_MAX
oct_err oct_ring_consumer_copy(oct_ring_consumer *c, uint64_t seq, void *dst, size_t dst_bytes,
                               oct_frame_info *info, oct_error *e);
void oct_ring_consumer_stats(const oct_ring_consumer *c, oct_ring_stats *s);
/* Heartbeat older than this many ms counts as stale (default 2000). */
void oct_ring_consumer_set_stale_ms(oct_ring_consumer *c, uint32_t stale_ms);
/* How many frames the producer has committed after frame seq (0 when none). */
uint64_t oct_ring_consumer_behind(const oct_ring_consumer *c, uint64_t seq);
/* Longest sleep between polls, in µs, while waiting for a frame that is due
 * (a frame was found within the last second): a committed frame waits at most
 * about this long before a waiting consumer sees it.  Default (and 0) 200;
 * after a second without frames waits back off to 200 µs whatever is set. */
void oct_ring_consumer_set_poll_us(oct_ring_consumer *c, uint32_t poll_us);

/* Validates a ring header (everything a consumer checks) for an object of
 * object_bytes bytes; the message names the field.  Used by the fuzzer. */
oct_err oct_ring_header_check(const oct_ring_header *h, uint64_t object_bytes, oct_error *e);

/* ------------------------------------------------------------------ */
/* library: control block                                              */
/* ------------------------------------------------------------------ */
typedef struct oct_control oct_control;

/* octd: creates (or re-initialises) the block with initial values, mode 0660. */
oct_err oct_control_create(oct_control **out, const char *name, const oct_control_values *init,
                           uint32_t mode, oct_error *e);
/* writers (octctl, UIs): attach read-write; readers: writable = false. */
oct_err oct_control_open(oct_control **out, const char *name, bool writable, oct_error *e);
void oct_control_close(oct_control *c, bool unlink_name);

/* Reader: up to `attempts` tries (each: load seq (acquire), copy, fence,
 * reload seq).  OCT_OK with *gen = seq/2 and the values; OCT_EAGAIN when a
 * writer was inside every time (never spins beyond attempts). */
oct_err oct_control_read(oct_control *c, int attempts, oct_control_values *v, uint64_t *gen);
/* Current generation without reading the values. */
uint64_t oct_control_generation(const oct_control *c);
/* How long (ns) the block's seq has stood below the highest generation read
 * while oct_control_read refuses it (OCT_EAGAIN until it has stayed put for
 * 1 s: a writer inside its store of seq, or a re-created block); 0 when none.
 * *lower_gen: that seq's generation, *read_gen: the one read before. */
uint64_t oct_control_lower_pending(const oct_control *c, uint64_t *lower_gen, uint64_t *read_gen);

/* Writer: lock (flock(LOCK_EX) on the block's shm fd itself, so writers in
 * several processes serialise and a dead writer's lock is released by the
 * kernel; see the protocol at the top of this file), read the current values,
 * call fn to modify them, write them as one generation.  Returns the new
 * generation in *gen.  A writer that finds the seq odd (a writer died inside)
 * completes the generation itself. */
typedef void (*oct_control_edit_fn)(oct_control_values *v, void *arg);
oct_err oct_control_write(oct_control *c, oct_control_edit_fn fn, void *arg, uint64_t *gen,
                          oct_error *e);
/* As oct_control_write, only while the block still holds generation
 * expect_gen (>= 1): once another writer has written a newer one, nothing is
 * written and OCT_EAGAIN says which.  For write-backs derived from an older
 * generation (octd's last good values after a rejection): a newer writer's
 * values must not be overwritten by them. */
oct_err oct_control_write_if(oct_control *c, uint64_t expect_gen, oct_control_edit_fn fn, void *arg,
                             uint64_t *gen, oct_error *e);
/* Issues a command: increments command_seq and sets command in one generation
 * (its arguments cmd_flags/cmd_frames/cmd_seconds zero). */
oct_err oct_control_command(oct_control *c, uint32_t command, uint64_t *command_seq,
                            oct_error *e);
/* ABI 1.2: a command with its arguments, all in one generation:
 *   OCT_CMD_RECORD     flags OCT_RECORD_RAW | OCT_RECORD_PRODUCTS, frames and
 *                      seconds (0: no limit)
 *   OCT_CMD_REFERENCE  flags enum oct_reference_op
 * Other commands take no arguments (0, 0, 0).  OCT_EABI when the block is
 * older than 1.2 for commands 6..8 (its octd would not know them). */
oct_err oct_control_command_args(oct_control *c, uint32_t command, uint32_t flags,
                                 uint32_t frames, double seconds, uint64_t *command_seq,
                                 oct_error *e);

/* abi_minor of the attached block (0: an older octd's 1.0 block, which
 * ignores the 1.1 fields). */
uint32_t oct_control_abi_minor(const oct_control *c);
/* Sets the ABI 1.1 fields of v to their defaults (what a 1.0 block means). */
void oct_control_values_default_1_1(oct_control_values *v);
/* Sets the ABI 1.2 fields of v to their defaults (what a 1.0/1.1 block means). */
void oct_control_values_default_1_2(oct_control_values *v);

/* Validates a control block's header (magic, abi, size). */
oct_err oct_control_header_check(const oct_control_block *b, uint64_t object_bytes, oct_error *e);

/* ------------------------------------------------------------------ */
/* library: status block                                               */
/* ------------------------------------------------------------------ */
typedef struct oct_status oct_status;

oct_err oct_status_create(oct_status **out, const char *name, uint32_t mode, oct_error *e);
oct_err oct_status_open(oct_status **out, const char *name, oct_error *e); /* read-only */
void oct_status_close(oct_status *s, bool unlink_name);
/* Direct access to the mapped block: octd updates counters with atomic
 * stores, text fields between oct_status_begin()/oct_status_end(). */
oct_status_block *oct_status_block_ptr(oct_status *s);
void oct_status_begin(oct_status *s);
void oct_status_end(oct_status *s);
/* Reader: a consistent copy (bounded attempts). */
oct_err oct_status_read(oct_status *s, oct_status_block *copy);
/* "waiting", "attached", "error" for ring_state. */
const char *oct_attach_state_name(uint32_t ring_state);
/* One line on how octd is, from a copy of its block: the state, then the
 * ring's counters when attached, or why it waits / what the ring error is,
 * then the warnings ("online, ring error: ring /octd-frames: shm_open:
 * Permission denied ...; 1 warning: ...").  octd sends exactly this as
 * systemd STATUS= and `octctl status` prints it as summary=.  Returns the
 * length written (cut to len - 1). */
size_t oct_status_summary(const oct_status_block *b, char *out, size_t len);

/* ------------------------------------------------------------------ */
/* image area (octd's products in shared memory; [publish] shm_endpoint) */
/* ------------------------------------------------------------------ */
/* octd's product buffers themselves, in one shared object per engine: the
 * GPU (or the CPU engine) writes each frame's images straight into a slot,
 * and a header-only message on [publish] shm_endpoint names where each
 * image lies (shm_name, shm_id, shm_slot, shm_seq, shm_offset, shm_bytes).
 * A local subscriber copies the bytes out instead of receiving them through
 * a socket, so nothing it does can hold a buffer or slow octd: a slot is
 * rewritten whenever octd needs it, and its seqlock (seq[slot], odd while
 * octd writes it) tells the reader that its copy is no longer the image.
 *
 * Readers: map read-only; check magic, abi_major and id (a different id:
 * octd made a new object under the name, open it again); then
 *   s0 = seq[slot] (acquire); s0 != shm_seq -> overwritten;
 *   copy [shm_offset, shm_offset + shm_bytes); acquire fence;
 *   seq[slot] != shm_seq -> overwritten (the copy is not the image).
 * octd never shrinks a live object: a new geometry gets a new object (new
 * id) under the same name, the old one unlinked. */
#define OCT_IMAGES_MAGIC "OCTIMGS"   /* 8 bytes with the NUL */
#define OCT_IMAGES_HEADER_BYTES 4096u
#define OCT_IMAGES_SLOTS_MAX 504u    /* seq[] fills the header page */
#define OCT_IMAGES_DEFAULT "/octd-images"

enum oct_images_state { OCT_IMAGES_INIT = 0, OCT_IMAGES_READY = 1, OCT_IMAGES_CLOSED = 2 };

typedef struct oct_images_header {
    char magic[8];          /*  0 "OCTIMGS\0" */
    uint32_t abi_major;     /*  8 = 1 */
    uint32_t abi_minor;     /* 12 = 0 */
    uint32_t header_bytes;  /* 16 = 4096 */
    uint32_t slot_count;    /* 20 1..504 */
    uint64_t slot_stride;   /* 24 multiple of 4096 */
    uint64_t slot0_offset;  /* 32 = 4096 */
    uint64_t id;            /* 40 non-zero, < 2^53 (exact in JSON), new per object */
    uint64_t owner_pid;     /* 48 */
    uint32_t state;         /* 56 atomic: enum oct_images_state */
    uint32_t pad0;          /* 60 */
    uint64_t seq[OCT_IMAGES_SLOTS_MAX]; /* 64 atomic: each slot's seqlock */
} oct_images_header;
OCT_ABI_ASSERT(sizeof(oct_images_header) == OCT_IMAGES_HEADER_BYTES, "image area header size");
OCT_ABI_ASSERT(offsetof(oct_images_header, magic) == 0, "images magic");
OCT_ABI_ASSERT(offsetof(oct_images_header, abi_major) == 8, "images abi_major");
OCT_ABI_ASSERT(offsetof(oct_images_header, abi_minor) == 12, "images abi_minor");
OCT_ABI_ASSERT(offsetof(oct_images_header, header_bytes) == 16, "images header_bytes");
OCT_ABI_ASSERT(offsetof(oct_images_header, slot_count) == 20, "images slot_count");
OCT_ABI_ASSERT(offsetof(oct_images_header, slot_stride) == 24, "images slot_stride");
OCT_ABI_ASSERT(offsetof(oct_images_header, slot0_offset) == 32, "images slot0_offset");
OCT_ABI_ASSERT(offsetof(oct_images_header, owner_pid) == 48, "images owner_pid");
OCT_ABI_ASSERT(offsetof(oct_images_header, id) == 40, "images id");
OCT_ABI_ASSERT(offsetof(oct_images_header, state) == 56, "images state");
OCT_ABI_ASSERT(offsetof(oct_images_header, seq) == 64, "images seq");

/* Where one image lies: the shm_* members of its header. */
typedef struct oct_image_ref {
    uint64_t id, seq, offset, bytes;
    uint32_t slot;
} oct_image_ref;

typedef struct oct_images oct_images;

/* octd: a new object of `slots` slots of at least slot_bytes each (mode
 * 0640 when 0), replacing any object of that name (readers of the old one
 * keep their mapping; its id differs). */
oct_err oct_images_create(oct_images **out, const char *name, uint32_t slots,
                          uint64_t slot_bytes, uint32_t mode, oct_error *e);
/* Subscribers: read-only; the message names what is wrong. */
oct_err oct_images_open(oct_images **out, const char *name, oct_error *e);
/* Marks the area closed (writer) and unmaps; unlink_name: also removes the name. */
void oct_images_close(oct_images *a, bool unlink_name);
const oct_images_header *oct_images_header_of(const oct_images *a);
const char *oct_images_name(const oct_images *a);
/* Writer: the slot's memory (slot_stride bytes, page-aligned). */
void *oct_images_slot(oct_images *a, uint32_t slot);
/* Writer: a slot is being rewritten (seq odd) / holds a complete frame
 * again (seq even, returned: the shm_seq of its images). */
void oct_images_begin(oct_images *a, uint32_t slot);
uint64_t oct_images_end(oct_images *a, uint32_t slot);
/* Writer: the reference of `bytes` at p inside slot `slot`, with the
 * slot's current seq (call after oct_images_end). */
oct_err oct_images_ref(const oct_images *a, uint32_t slot, const void *p, uint64_t bytes,
                       oct_image_ref *r, oct_error *e);
/* Reader: copies the image into dst (r->bytes).  OCT_ESTALE: r names
 * another object (octd re-created it: open the name again); OCT_ETORN: the
 * slot was rewritten before or during the copy (the image is lost to this
 * reader: count it as a gap); OCT_EINVAL: r is outside the area. */
oct_err oct_images_read(oct_images *a, const oct_image_ref *r, void *dst, oct_error *e);
/* Reader, zero-copy: a pointer to the image, or NULL (error as above).
 * What it points at is the image only while oct_images_valid() says so
 * afterwards: read, then check. */
const void *oct_images_view(oct_images *a, const oct_image_ref *r, oct_error *e);
bool oct_images_valid(const oct_images *a, const oct_image_ref *r);
/* Validates an image-area header for an object of object_bytes bytes. */
oct_err oct_images_header_check(const oct_images_header *h, uint64_t object_bytes, oct_error *e);

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */
uint64_t oct_time_realtime_ns(void);
uint64_t oct_time_monotonic_ns(void);

#ifdef __cplusplus
}
#endif
#endif
