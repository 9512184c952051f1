/* oct_ipc_types.h - the error codes, sample types and frame geometry that
 * the public IPC header (oct_ipc.h) needs, so that it stands alone:
 * `cc -Iipc prod.c` or `pkg-config --cflags octipc` find everything here.
 *
 * kernels/oct_types.h (the engine's name for these types, installed beside
 * it) includes this file: the definitions exist once.
 */
#ifndef OCT_TYPES_H
#define OCT_TYPES_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oct_err {
    OCT_OK = 0,
    OCT_EINVAL,       /* a value is out of range or inconsistent */
    OCT_ENOMEM,       /* an allocation failed */
    OCT_EIO,          /* a file or system call failed (errno in the message) */
    OCT_EPARSE,       /* a file's syntax is wrong */
    OCT_ESIZE,        /* sizes do not match */
    OCT_EUNSUPPORTED, /* not built in, or no device present */
    OCT_EDEVICE,      /* CUDA, cuFFT or cuBLAS failed */
    OCT_EBACKEND,     /* FFTW or BLAS failed */
    OCT_ETIMEDOUT,    /* nothing arrived in time */
    OCT_EAGAIN,       /* try again (e.g. a writer was inside the seqlock) */
    OCT_ENOENT,       /* a shared object or file does not exist */
    OCT_EABI,         /* wrong magic or ABI version */
    OCT_ETORN,        /* a frame was overwritten while it was read */
    OCT_ECLOSED,      /* the producer closed the ring */
    OCT_ESTALE,       /* the ring was re-created (new epoch) or its heartbeat stopped */
    OCT_ESTATE,       /* not allowed in the current state or mode */
    OCT_EPERM,        /* permission denied */
    OCT_ERR_COUNT
} oct_err;

/* Human-readable name of an error code; never NULL. */
const char *oct_strerror(oct_err err);

/* Detail text of the last error.  Pass NULL where the detail is not wanted. */
typedef struct oct_error {
    char msg[512];
} oct_error;

/* Sets e->msg from a printf format (no-op when e is NULL) and returns err,
 * so that a function can `return oct_error_set(e, OCT_EINVAL, "...")`. */
oct_err oct_error_set(oct_error *e, oct_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
oct_err oct_error_setv(oct_error *e, oct_err err, const char *fmt, va_list ap);

/* Prepends "prefix: " to e->msg (no-op when e is NULL), returns err. */
oct_err oct_error_prefix(oct_error *e, oct_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sample types of a frame, numbered as in SPEC 3.1 (ring header sample_type). */
typedef enum oct_sample_type {
    OCT_SAMPLE_U16 = 1,
    OCT_SAMPLE_I16 = 2,
    OCT_SAMPLE_F32 = 3
} oct_sample_type;

/* Bytes per sample of a type, 0 for an unknown type. */
size_t oct_sample_size(uint32_t type);
/* "u16", "i16", "f32", or NULL for an unknown type. */
const char *oct_sample_name(uint32_t type);
/* Parses "u16"/"uint16", "i16"/"int16", "f32"/"float32"; returns 0 if unknown. */
uint32_t oct_sample_parse(const char *name);

/* Frame geometry (SPEC 1): lines L x ascans N x samples M. */
typedef struct oct_geometry {
    uint32_t samples;      /* M: power of two, 64..8192 */
    uint32_t ascans;       /* N >= 1 */
    uint32_t lines;        /* L >= 1; 1 = B-scan frame, > 1 = volume frame */
    uint32_t sample_type;  /* oct_sample_type */
    uint32_t sample_shift; /* integer samples: v >> shift; < 16 */
} oct_geometry;

#define OCT_SAMPLES_MIN 64u
#define OCT_SAMPLES_MAX 8192u
/* Largest frame accepted anywhere (2^34 bytes = 16 GiB): bounds every size
 * computed from shared memory or a file before it is used. */
#define OCT_FRAME_BYTES_MAX (1ull << 34)

/* Checks a geometry (M a power of two in range, N, L >= 1, known type,
 * shift < 16 for integer types and 0 for f32, frame size within
 * OCT_FRAME_BYTES_MAX).  The message names the bad field and its value. */
oct_err oct_geometry_check(const oct_geometry *g, oct_error *e);
/* M*N*L*sizeof(sample); 0 when the geometry is invalid. */
uint64_t oct_geometry_frame_bytes(const oct_geometry *g);

#ifdef __cplusplus
}
#endif
#endif
