/* error.c - error codes, error details, sample types and geometry checks. */
#include "oct_types.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const err_names[OCT_ERR_COUNT] = {
    [OCT_OK] = "success",
    [OCT_EINVAL] = "invalid value",
    [OCT_ENOMEM] = "out of memory",
    [OCT_EIO] = "input/output error",
    [OCT_EPARSE] = "syntax error",
    [OCT_ESIZE] = "size mismatch",
    [OCT_EUNSUPPORTED] = "not supported",
    [OCT_EDEVICE] = "GPU error",
    [OCT_EBACKEND] = "FFT/BLAS library error",
    [OCT_ETIMEDOUT] = "timed out",
    [OCT_EAGAIN] = "try again",
    [OCT_ENOENT] = "not found",
    [OCT_EABI] = "incompatible shared-memory ABI",
    [OCT_ETORN] = "frame overwritten during the read",
    [OCT_ECLOSED] = "ring closed by the producer",
    [OCT_ESTALE] = "ring re-created or producer gone",
    [OCT_ESTATE] = "not allowed now",
    [OCT_EPERM] = "permission denied",
};

const char *oct_strerror(oct_err err)
{
    if ((unsigned)err >= OCT_ERR_COUNT || !err_names[err])
        return "unknown error";
    return err_names[err];
}

oct_err oct_error_setv(oct_error *e, oct_err err, const char *fmt, va_list ap)
{
    if (e)
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return err;
}

oct_err oct_error_set(oct_error *e, oct_err err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oct_error_setv(e, err, fmt, ap);
    va_end(ap);
    return err;
}

oct_err oct_error_prefix(oct_error *e, oct_err err, const char *fmt, ...)
{
    if (!e)
        return err;
    char prefix[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* the message is cut at sizeof e->msg: the front (where it is) matters most */
    int n = snprintf(e->msg, sizeof e->msg, "%.255s: ", prefix);
    if (n > 0 && (size_t)n < sizeof e->msg)
        snprintf(e->msg + n, sizeof e->msg - (size_t)n, "%s", old);
    return err;
}

size_t oct_sample_size(uint32_t type)
{
    switch (type) {
    case OCT_SAMPLE_U16:
    case OCT_SAMPLE_I16: return 2;
    case OCT_SAMPLE_F32: return 4;
    default: return 0;
    }
}

const char *oct_sample_name(uint32_t type)
{
    switch (type) {
    case OCT_SAMPLE_U16: return "u16";
    case OCT_SAMPLE_I16: return "i16";
    case OCT_SAMPLE_F32: return "f32";
    default: return NULL;
    }
}

uint32_t oct_sample_parse(const char *name)
{
    if (!name)
        return 0;
    if (!strcasecmp(name, "u16") || !strcasecmp(name, "uint16"))
        return OCT_SAMPLE_U16;
    if (!strcasecmp(name, "i16") || !strcasecmp(name, "int16"))
        return OCT_SAMPLE_I16;
    if (!strcasecmp(name, "f32") || !strcasecmp(name, "float32"))
        return OCT_SAMPLE_F32;
    return 0;
}

oct_err oct_geometry_check(const oct_geometry *g, oct_error *e)
{
    uint32_t M = g->samples;
    if (M < OCT_SAMPLES_MIN || M > OCT_SAMPLES_MAX || (M & (M - 1)))
        return oct_error_set(e, OCT_EINVAL,
                             "samples = %u: must be a power of two from %u to %u", M,
                             OCT_SAMPLES_MIN, OCT_SAMPLES_MAX);
    if (g->ascans < 1)
        return oct_error_set(e, OCT_EINVAL, "ascans = %u: must be at least 1", g->ascans);
    if (g->lines < 1)
        return oct_error_set(e, OCT_EINVAL, "lines = %u: must be at least 1", g->lines);
    if (!oct_sample_size(g->sample_type))
        return oct_error_set(e, OCT_EINVAL,
                             "sample_type = %u: must be 1 (u16), 2 (i16) or 3 (f32)",
                             g->sample_type);
    if (g->sample_type == OCT_SAMPLE_F32 ? g->sample_shift != 0 : g->sample_shift >= 16)
        return oct_error_set(e, OCT_EINVAL, "sample_shift = %u: must be %s", g->sample_shift,
                             g->sample_type == OCT_SAMPLE_F32 ? "0 for f32 samples"
                                                              : "less than 16");
    uint64_t bytes = (uint64_t)M * g->ascans * g->lines * oct_sample_size(g->sample_type);
    /* ascans and lines are < 2^32 each: check the product without overflow */
    if ((uint64_t)g->ascans * g->lines > OCT_FRAME_BYTES_MAX || bytes > OCT_FRAME_BYTES_MAX)
        return oct_error_set(e, OCT_EINVAL,
                             "frame of %u x %u x %u samples is larger than %llu bytes", g->lines,
                             g->ascans, M, (unsigned long long)OCT_FRAME_BYTES_MAX);
    return OCT_OK;
}

uint64_t oct_geometry_frame_bytes(const oct_geometry *g)
{
    if (oct_geometry_check(g, NULL) != OCT_OK)
        return 0;
    return (uint64_t)g->samples * g->ascans * g->lines * oct_sample_size(g->sample_type);
}
