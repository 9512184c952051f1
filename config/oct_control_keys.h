/* oct_control_keys.h - the names of the live control values (SPEC 3.2) as
 * operators write them: the profile's keys flattened with dots
 * (`enface.start`, `display.enface.gsc`, `lag_window`, `window`, ...).
 * Shared by octd (logs, YAML sidecars) and octctl (get / set).
 */
#ifndef OCT_CONTROL_KEYS_H
#define OCT_CONTROL_KEYS_H

#include <stddef.h>

#include "../ipc/oct_ipc.h"
#include "../ipc/oct_options.h"
#include "../kernels/oct_engine.h"
#include "../kernels/oct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of keys and the name of key i (in `get` order), NULL past the end. */
size_t oct_control_key_count(void);
const char *oct_control_key_name(size_t i);

/* The error for an unknown key, with "did you mean" when one is close. */
oct_err oct_control_unknown_key(const char *key, oct_error *e);

/* Control block ABI minor that introduced a key (0, 1 or 2); -1 when unknown.
 * Aliases count as their key. */
int oct_control_key_abi_minor(const char *key);

/* Parses `value` into the key's field(s) of v.  Unknown key, bad number,
 * trailing junk, unknown names and non-finite numbers are OCT_EINVAL with a
 * message naming the key and the value (unknown keys: "did you mean").  The
 * option table's ranges and rules are checked on the whole generation
 * (oct_options_check_values(), as octd does); ranges that depend on the geometry
 * are left to oct_params_validate() (octd validates the whole generation). */
oct_err oct_control_key_set(oct_control_values *v, const char *key, const char *value,
                            oct_error *e);
/* "KEY=VALUE" form of oct_control_key_set(). */
oct_err oct_control_assign(oct_control_values *v, const char *assignment, oct_error *e);

/* Formats a key's value (as oct_control_key_set() accepts it) into buf. */
oct_err oct_control_key_get(const oct_control_values *v, const char *key, char *buf,
                            size_t len, oct_error *e);
/* All keys, one "key=value\n" a line; returns the length written (as
 * snprintf, the text is cut if len is too small). */
size_t oct_control_format_all(const oct_control_values *v, char *buf, size_t len);

/* Conversions between the engine's values and the control block's. The
 * command fields of v are left untouched by oct_control_from_params(). */
void oct_control_from_params(oct_control_values *v, const oct_params *p);
void oct_params_from_control(oct_params *p, const oct_control_values *v);

#ifdef __cplusplus
}
#endif
#endif
