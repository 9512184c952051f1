/* oct_config.h - octd's files: the daemon's octd.ini (SPEC 5.1, inih), the
 * processing profile (SPEC 5.2, libyaml), mask and reference arrays (SPEC 5.3,
 * raw or .npy), .npy frames and images, and 8-bit PNG output (libpng).
 *
 * Every loader reports errors through oct_error with the file, the line and
 * the key (or the sizes) that are wrong.
 */
#ifndef OCT_CONFIG_H
#define OCT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/oct_engine.h"
#include "../kernels/oct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OCT_PATH_MAX 4096
#define OCT_CMS_CAL_MAX 256 /* calibration spectra (depths) a profile may list */

/* ---------------- octd.ini (SPEC 5.1) ---------------- */
#define OCT_MAX_ENDPOINTS 8
#define OCT_ENGINES_MAX 8   /* [engine] devices entries */
#define OCT_DEVICE_CPU (-1) /* a `cpu` entry of [engine] devices */

typedef struct oct_daemon_config {
    /* [engine] */
    oct_backend backend;        /* auto */
    int device;                 /* 0 */
    int threads;                /* 0 = all cores */
    oct_precision precision;    /* fp32 */
    int cuda_graph;             /* enum oct_cuda_graph: auto (0) */
    int cuda_cfd;               /* enum oct_cuda_cfd: auto (0) */
    /* [ring] */
    char ring_frames[256];      /* /octd-frames */
    char ring_control[256];     /* /octd-control */
    char ring_status[256];      /* /octd-status */
    int policy;                 /* oct_ring_policy: 0 latest, 1 all */
    uint32_t stale_ms;          /* 2000: producer heartbeat older than this = gone */
    uint32_t poll_us;           /* 20: longest sleep between ring polls while frames come */
    /* [publish] */
    char endpoints[OCT_MAX_ENDPOINTS][256]; /* tcp://127.0.0.1:5556 */
    int endpoint_count;
    int sndhwm;                 /* 4 */
    /* [profile] */
    char profile_path[OCT_PATH_MAX]; /* resolved relative to the ini's directory */
    /* [save] */
    char save_dir[OCT_PATH_MAX];     /* resolved relative to the ini's directory; "" = none */
    /* [log] */
    int log_level;              /* syslog priority: LOG_ERR .. LOG_DEBUG; info = 6 */
    /* [metrics] */
    char metrics_listen[256];   /* "" = off; HOST:PORT of the Prometheus endpoint */
    char source_path[OCT_PATH_MAX];  /* the file it was read from */
    /* [ring] zero_copy: whether the engine reads frames in place in the ring's
     * mapping (auto: when it pipelines, i.e. CUDA) or from a copy */
    int zero_copy;              /* OCT_ZERO_COPY_AUTO */
    /* [engine] devices (issue 20): one engine per entry, frames dealt in turn;
     * entry OCT_DEVICE_CPU is a CPU engine, others CUDA device indices.
     * device_count 0: the single `backend`/`device` engine (as before);
     * devices_all: every CUDA device (resolved when the engines are planned). */
    int devices[OCT_ENGINES_MAX];
    int device_count;
    bool devices_all;
    /* [engine] fail_after / fail_engine: a test knob: engine fail_engine
     * fails (as a device error) on the frame after fail_after frames; 0 = off */
    int fail_after;
    int fail_engine;            /* default: the last engine */
    /* [engine] threads and memory (issues 19.2, 20.1; README "Steady tails") */
    bool numa;                  /* auto (true): each GPU engine's threads and product
                                 * pool on its GPU's NUMA node; off */
    uint32_t timer_slack_ns;    /* 1000; 0 = the kernel's default (50 us) */
    bool lock_memory;           /* false: mlockall(MCL_CURRENT | MCL_FUTURE) when true */
    int priority;               /* 0 = SCHED_OTHER; 1..99: the frame loop at SCHED_FIFO */
    int nice;                   /* the frame loop's nice value, -20..19, or OCT_NICE_AUTO:
                                 * -20 or what RLIMIT_NICE permits with CPU engines, else octd's own */
    bool prefault;              /* true: buffers' pages touched when allocated */
    /* [engine] overlap_input (issue 19): a pipelining engine reading the ring in
     * place gets the next frame before the last one's input copy is done (its
     * slot is verified once it is); false: each copy is waited for first */
    bool overlap_input;         /* true */
    /* [engine] registration_workers (issue 17): live registration threads,
     * each with its own plan (CUDA: its own stream); 0 = automatic (CUDA 3, CPU 1) */
    int registration_workers;
    /* [publish] the fan-out's own resources (issue 21: churning subscribers) */
    int pub_sndbuf;             /* sndbuf: each subscriber connection's kernel send buffer,
                                 * bytes (ZMQ_SNDBUF); 0 = the system's default */
    int pub_io_threads;         /* io_threads: ZeroMQ I/O threads; 0 = one per 4 cores, 2..4 */
    int pub_nice;               /* nice: the publisher and ZeroMQ threads this much nicer
                                 * than octd (0..19) */
    char pub_cpus[128];         /* cpus: CPU list they run on; "" = wherever octd may */
    int pub_copies;             /* copies: who copies images when subscribers hold every
                                 * pooled buffer: OCT_PUB_COPIES_* */
    int pub_stats_s;            /* stats: the publisher's timing line every N s; 0 = off */
    /* shm_endpoint: "" = off; else octd's product buffers live in shared
     * memory (the image area shm_name, ".1", ".2"... for further engines)
     * and this PUB endpoint carries each image's header with where it lies
     * (shm_* members) and an empty payload, for local subscribers */
    char pub_shm_endpoint[256];
    char pub_shm_name[64];      /* "/octd-images" */
    /* [save] record_io: how a recording writes its raw frames (README
     * "Recording at full rate"): auto (O_DIRECT where the file system and
     * the frame size allow it, else buffered), direct (else the record
     * command fails), buffered (page cache, dirty pages bounded) */
    int record_io;              /* OCT_RECORD_IO_AUTO */
} oct_daemon_config;

/* [publish] copies (issue 21): with every pooled product buffer held by
 * subscribers' queued messages, images are copied by the publisher thread
 * (which then releases the buffer at once: the pool refills) or, as before
 * r4, by the frame loop itself; auto (r5, the default): the publisher thread
 * copies only while more than half of the pool is held, else forwards
 * zero-copy. */
enum { OCT_PUB_COPIES_PUBLISHER = 0, OCT_PUB_COPIES_FRAME = 1, OCT_PUB_COPIES_AUTO = 2 };
#define OCT_REG_WORKERS_MAX 8
/* [engine] nice = auto: with CPU engines the frame loop (and the engine
 * threads it starts) at nice -20, or as far as RLIMIT_NICE allows without
 * CAP_SYS_NICE; with a GPU engine octd's own nice; octd's background threads
 * always at octd's own (issue 21: -11 left the 2-core VM's frame loop at
 * 88-110 % of its rate with a crowd, -20 at 94-109 %). */
#define OCT_NICE_AUTO 100
#define OCT_NICE_AUTO_VALUE (-20)

enum { OCT_ZERO_COPY_AUTO = 0, OCT_ZERO_COPY_ON = 1, OCT_ZERO_COPY_OFF = 2 };
enum { OCT_RECORD_IO_AUTO = 0, OCT_RECORD_IO_DIRECT = 1, OCT_RECORD_IO_BUFFERED = 2 };

void oct_daemon_config_default(oct_daemon_config *c);
/* Reads an ini file.  Unknown sections/keys, bad values, a missing file:
 * OCT_EPARSE / OCT_EINVAL / OCT_EIO with "FILE:LINE: [section] key: ...". */
oct_err oct_daemon_config_load(oct_daemon_config *c, const char *path, oct_error *e);
/* Same from a memory buffer (name used in messages); for fuzzing and tests. */
oct_err oct_daemon_config_parse(oct_daemon_config *c, const char *text, size_t len,
                                const char *name, oct_error *e);

/* ---------------- profile (SPEC 5.2) ---------------- */
#define OCT_PROFILE_KEYS_MAX 128
typedef struct oct_profile_key_pos {
    char key[48];       /* dotted path: "msi.masks.file" */
    uint32_t line;      /* 1-based line of the key in the profile */
} oct_profile_key_pos;

typedef struct oct_profile {
    char source_path[OCT_PATH_MAX];
    bool has_geometry;           /* geometry: given in the profile */
    oct_geometry geom;
    float spacing_um[3];         /* geometry.spacing_um {depth, ascan, line}; 0 = not given */
    uint32_t repeats;            /* geometry.repeats R (SPEC 10.3): lines per B-scan
                                    position, 1 = none; lines is a multiple of R */
    oct_params params;           /* initial control values */
    /* MSI masks */
    char masks_path[OCT_PATH_MAX];  /* resolved; "" = none */
    uint32_t masks_type;         /* oct_sample_type of a raw mask file (f32 default) */
    uint32_t masks_count;        /* R declared (0 = from the file) */
    bool masks_normalize;
    /* background reference */
    char reference_path[OCT_PATH_MAX]; /* resolved; "" = none */
    /* k-linearisation positions file (klin.positions; params.klin_source = FILE) */
    char klin_path[OCT_PATH_MAX];      /* resolved; "" = none */
    /* CMS (cms:): calibration spectra of a mirror at cms_depths, mask grid */
    char cms_path[OCT_PATH_MAX];       /* resolved; "" = none */
    uint32_t cms_type;                 /* oct_sample_type of a raw calibration file (f32) */
    uint32_t cms_cal_count;            /* K = number of depths listed */
    double cms_depths[OCT_CMS_CAL_MAX];
    double cms_start, cms_step;        /* grid: z_r = start + step * r */
    uint32_t cms_count;                /* R of CMS; 0 = no grid given */
    /* the line of every key read, so that errors found later (data files,
     * checks against a geometry) name FILE:LINE: key */
    oct_profile_key_pos key_lines[OCT_PROFILE_KEYS_MAX];
    uint32_t key_line_count;
} oct_profile;

/* Parses a profile; values not given keep oct_params_default() values.
 * Relative paths are resolved against the profile's directory.  Checks
 * every key, type and range it can without the geometry; errors name
 * "FILE:LINE: key: ..." */
oct_err oct_profile_load(oct_profile *p, const char *path, oct_error *e);
oct_err oct_profile_parse(oct_profile *p, const char *text, size_t len, const char *path,
                          oct_error *e);

/* The 1-based line of a key ("freq_cutoff", "msi.masks.file") in the
 * profile; a key not given falls back to its nearest given parent
 * ("msi.masks", "msi"); 0 when none of them is in the file. */
uint32_t oct_profile_key_line(const oct_profile *p, const char *key);
/* "PROFILE:LINE: key" for error messages (line 1 when the key is not in
 * the file); returns buf. */
const char *oct_profile_where(const oct_profile *p, const char *key, char *buf, size_t len);

/* Loaded arrays of a profile, ready for oct_setup. */
typedef struct oct_profile_data {
    float *masks;        /* R x M, NULL when none */
    uint32_t mask_count; /* R */
    float *reference;    /* M, NULL when none */
    double *klin_positions; /* M, NULL when none */
    float *cms_cal;      /* K x M, NULL when none */
    uint32_t cms_cal_count; /* K */
} oct_profile_data;

/* Loads the arrays of a profile for M samples: the masks (when MSI is among
 * the methods or a mask file is given), the reference, the k-linearisation
 * positions and the CMS calibration (when given).  Sizes are checked (K x M,
 * M positions) with errors "PROFILE:LINE: key: FILE: ..." naming the
 * profile's line and key, the data file and both sizes. */
oct_err oct_profile_load_data(const oct_profile *p, uint32_t samples, oct_profile_data *d,
                              oct_error *e);
void oct_profile_data_free(oct_profile_data *d);
/* Fills the array and CMS fields of an engine set-up from a profile and its
 * loaded data (pointers into d: keep d alive while s is used).  The other
 * fields of s (geometry, backend, ...) are left as they are. */
void oct_profile_setup(const oct_profile *p, const oct_profile_data *d, oct_setup *s);
/* oct_params_check() of the profile's values against a set-up (geometry
 * and loaded data), with the error naming "FILE:LINE: key: ..." of the
 * profile key behind the failing value. */
oct_err oct_profile_check(const oct_profile *p, const oct_setup *s, oct_error *e);

/* ---------------- arrays: .npy and raw (SPEC 5.3) ---------------- */
typedef enum oct_dtype {
    OCT_DTYPE_NONE = 0,
    OCT_DTYPE_U8,
    OCT_DTYPE_U16,
    OCT_DTYPE_I16,
    OCT_DTYPE_F32,
    OCT_DTYPE_F64
} oct_dtype;

size_t oct_dtype_size(oct_dtype t);
const char *oct_dtype_name(oct_dtype t);  /* "u8", "u16", ... */

#define OCT_NPY_MAX_DIMS 8
typedef struct oct_array {
    oct_dtype dtype;
    int ndim;
    uint64_t shape[OCT_NPY_MAX_DIMS];
    uint64_t count;     /* product of shape */
    void *data;         /* little-endian, C order (malloc'd) */
} oct_array;

void oct_array_free(oct_array *a);

/* Reads a .npy file (versions 1-3; dtypes |u1 <u2 <i2 <f4 <f8 and their
 * big-endian forms, which are swapped; C order only).  Bounds-checks every
 * size against the file length. */
oct_err oct_npy_load(const char *path, oct_array *a, oct_error *e);
oct_err oct_npy_parse(const void *buf, size_t len, const char *name, oct_array *a, oct_error *e);
/* Writes a .npy atomically (a temporary file in the same directory, fsync,
 * rename); nothing is left behind on failure. */
oct_err oct_npy_save(const char *path, oct_dtype dtype, int ndim, const uint64_t *shape,
                     const void *data, oct_error *e);
/* Same with path relative to the directory fd dirfd (AT_FDCWD: as above). */
oct_err oct_npy_save_at(int dirfd, const char *path, oct_dtype dtype, int ndim,
                        const uint64_t *shape, const void *data, oct_error *e);

/* Loads a mask or reference set as R x M floats: .npy (any supported dtype,
 * shape (R, M) or (M,) for R = 1) or raw little-endian of `raw_type`.
 * expect_rows = 0 accepts any R.  A size mismatch is OCT_ESIZE naming the
 * file and both sizes.  Non-finite values are rejected. */
oct_err oct_load_spectra(const char *path, uint32_t raw_type, uint32_t samples,
                         uint32_t expect_rows, float **out, uint32_t *rows, oct_error *e);

/* Loads M k-linearisation positions as doubles: .npy of shape (M,) or
 * (1, M), any supported dtype, or raw little-endian f64 (8 M bytes) or f32
 * (4 M bytes).  Another size is OCT_ESIZE naming the file and both sizes;
 * non-finite values are rejected (order and range: oct_params_check). */
oct_err oct_load_positions(const char *path, uint32_t samples, double **out, oct_error *e);

/* ---------------- PNG ---------------- */
/* Writes an 8-bit gray PNG (height x width) atomically. */
oct_err oct_png_save_gray(const char *path, const uint8_t *pixels, uint32_t width,
                          uint32_t height, oct_error *e);
/* Same with path relative to the directory fd dirfd (AT_FDCWD: as above). */
oct_err oct_png_save_gray_at(int dirfd, const char *path, const uint8_t *pixels, uint32_t width,
                             uint32_t height, oct_error *e);
/* Reads an 8-bit gray PNG (for tests); *pixels is malloc'd. */
oct_err oct_png_load_gray(const char *path, uint8_t **pixels, uint32_t *width,
                          uint32_t *height, oct_error *e);

/* ---------------- misc file helpers ---------------- */
/* Writes a whole buffer atomically: path.tmp.PID in the same directory,
 * fsync, rename.  On failure nothing is left behind. */
oct_err oct_file_write_atomic(const char *path, const void *data, size_t len, oct_error *e);
/* Same with path relative to the directory fd dirfd (openat, renameat,
 * unlinkat), so a renamed directory does not redirect or break the write. */
oct_err oct_file_write_atomic_at(int dirfd, const char *path, const void *data, size_t len,
                                 oct_error *e);
/* Joins dir and a relative path; an absolute path is kept. */
void oct_path_resolve(char *out, size_t out_len, const char *base_dir, const char *path);

#ifdef __cplusplus
}
#endif
#endif
