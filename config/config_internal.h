/* config_internal.h - helpers shared by the config/ sources.  Not installed. */
#ifndef OCT_CONFIG_INTERNAL_H
#define OCT_CONFIG_INTERNAL_H

#include "oct_config.h"

/* Reads a whole regular file (at most max_bytes) into a malloc'd buffer with
 * one extra NUL byte after the data.  Missing/unreadable: OCT_EIO naming it. */
oct_err oct_cfg_read_file(const char *path, uint64_t max_bytes, void **buf, size_t *len,
                          oct_error *e);
/* Directory part of path: "" when it has none, "/" for "/x". */
void oct_cfg_dirname(char *out, size_t out_len, const char *path);

#endif
