/* fuzz_common.h - shared by the libFuzzer targets of tests/fuzz/.
 *
 * A target must never crash on any input; besides the sanitizers, each one
 * checks properties of the result (an error always has a message, a
 * successful parse gives consistent values) with FUZZ_CHECK, which aborts so
 * that libFuzzer keeps the input as a crash. */
#ifndef OCT_FUZZ_COMMON_H
#define OCT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <stdbool.h>

#include "oct_ipc.h"
#include "oct_types.h"

#define FUZZ_CHECK(cond, ...)                                                        \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__,  \
                    #cond);                                                          \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* FUZZ_VERBOSE=1 in the environment prints each step's result (to check
 * what a seed exercises: FUZZ_VERBOSE=1 build/fuzz/fuzz_ring corpus/ring/x). */
static inline void fuzz_note(const char *what, oct_err err, const oct_error *e)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("FUZZ_VERBOSE") && *getenv("FUZZ_VERBOSE") != '0';
    if (verbose)
        fprintf(stderr, "  %s: %s%s%s\n", what, oct_strerror(err), err && e ? ": " : "",
                err && e ? e->msg : "");
}

/* An error code must come with a non-empty, NUL-terminated message. */
static inline void fuzz_check_error(const char *what, oct_err err, const oct_error *e)
{
    fuzz_note(what, err, e);
    if (err == OCT_OK)
        return;
    FUZZ_CHECK(err > OCT_OK && err < OCT_ERR_COUNT, "error code %d out of range", (int)err);
    FUZZ_CHECK(memchr(e->msg, '\0', sizeof e->msg) != NULL, "message not terminated");
    FUZZ_CHECK(e->msg[0] != '\0', "error %s without a message", oct_strerror(err));
}

/* A string field of fixed size must be NUL-terminated. */
#define FUZZ_CHECK_STR(field)                                                        \
    FUZZ_CHECK(memchr((field), '\0', sizeof(field)) != NULL, "%s not terminated", #field)

static inline uint32_t fuzz_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fuzz_le64(const uint8_t *p)
{
    return (uint64_t)fuzz_le32(p) | (uint64_t)fuzz_le32(p + 4) << 32;
}

/* A malloc'd, NUL-terminated copy for APIs that take C strings (libFuzzer's
 * own buffer is exactly `size` bytes, so ASan sees reads past its end). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *p = malloc(size + 1);
    if (!p)
        abort();
    if (size)
        memcpy(p, data, size);
    p[size] = '\0';
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
