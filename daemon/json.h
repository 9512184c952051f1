/* json.h - a tiny JSON object writer for message headers and status (no
 * allocation: writes into a caller's buffer; overflow is remembered and
 * reported by octd_json_end()). */
#ifndef OCTD_JSON_H
#define OCTD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct octd_json {
    char *buf;
    size_t cap, len;
    bool overflow;
    bool first; /* no member written yet in the current object */
} octd_json;

void octd_json_begin(octd_json *j, char *buf, size_t cap);
void octd_json_str(octd_json *j, const char *key, const char *val);
void octd_json_u64(octd_json *j, const char *key, uint64_t val);
void octd_json_i64(octd_json *j, const char *key, int64_t val);
void octd_json_f64(octd_json *j, const char *key, double val); /* non-finite -> null */
void octd_json_u32_array(octd_json *j, const char *key, const uint32_t *v, size_t n);
void octd_json_i32_array(octd_json *j, const char *key, const int32_t *v, size_t n);
/* Closes the object; returns its length, or 0 when it did not fit. */
/* A nested object as the value of key: fields written until _end go in it. */
void octd_json_object_begin(octd_json *j, const char *key);
void octd_json_object_end(octd_json *j);
void octd_json_f64_array(octd_json *j, const char *k, const double *v, size_t n);
size_t octd_json_end(octd_json *j);

#endif
