/* oct_options.h - the one option schema of the control values (SPEC 10.1).
 *
 * Every live control value is described once, in the table of options.c:
 * the key operators type (`enface.start`, `display.enface.gsc`, ...), its
 * place in the control block (offset, C type), its kind and static range or
 * names, its default, unit, one-line help and the control-block ABI minor
 * that introduced it.  The table drives the block <-> values conversion
 * (control.c), the profile parser's control keys, `octctl get/set/help`,
 * single-value validation with messages naming the key (and "did you mean"
 * for unknown keys) and `octctl schema` (JSON, oct_options_json()).
 *
 * Ranges here are static (they hold on any geometry); rules that need the
 * geometry or other values (freq_cutoff <= samples/2, xsec indices below
 * lines/ascans, W1 > -samples/2, ...) are checked by octd on the whole
 * generation; their text is in max_rule/min_rule.
 *
 * Part of liboctipc: acquisition programs and UIs link only that.
 */
#ifndef OCT_OPTIONS_H
#define OCT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_ipc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OCT_OPTIONS_SCHEMA "octd-options-1"

typedef enum oct_option_kind {
    OCT_OPT_INT = 0,   /* one integer */
    OCT_OPT_FLOAT = 1, /* one finite number */
    OCT_OPT_ENUM = 2,  /* one name out of `values`; stored as its index */
    OCT_OPT_SET = 3,   /* comma-separated names out of `values`; stored as bits */
    OCT_OPT_PAIR = 4,  /* two integers "A,B" with A <= B (two consecutive fields) */
    OCT_OPT_BOOL = 5   /* true/false (on/off, yes/no, 1/0) */
} oct_option_kind;

typedef enum oct_option_ctype {
    OCT_CTYPE_U32 = 0,
    OCT_CTYPE_I32 = 1,
    OCT_CTYPE_F32 = 2,
    OCT_CTYPE_F64 = 3
} oct_option_ctype;

/* flags */
#define OCT_OPTF_MIN_OPEN 1u  /* min is exclusive (value > min) */
#define OCT_OPTF_NONEMPTY 2u  /* set: at least one name (with `need_bits`: one of those) */

typedef struct oct_option {
    const char *key;          /* operator key, e.g. "enface.start" */
    oct_option_kind kind;
    oct_option_ctype ctype;   /* of each field */
    uint32_t offset;          /* in oct_control_block */
    uint32_t value_offset;    /* in oct_control_values (same field) */
    uint32_t fields;          /* 1, or 2 for a pair */
    double min, max;          /* static range of int/float/pair values (inclusive unless flags) */
    double def, def2;         /* default (pair: def, def2; enum: index; set: bits) */
    const char *const *values;/* enum/set names, NULL-terminated */
    const uint32_t *bits;     /* set: bit of values[i]; NULL = 1u << i */
    uint32_t flags;           /* OCT_OPTF_* */
    uint32_t need_bits;       /* set with OCT_OPTF_NONEMPTY: one of these bits is required */
    const char *unit;         /* "" when none */
    const char *help;         /* one line */
    const char *min_rule;     /* geometry/value-dependent bound, or NULL */
    const char *max_rule;
    uint32_t abi_minor;       /* control-block minor that introduced the field */
    /* enum "name:param" shorthand (window=tukey:0.5, background=rolling:8): the
     * key of the parameter and the enum indices (bits) whose `get` shows it */
    const char *param_key;
    uint32_t param_when;
} oct_option;

size_t oct_options_count(void);
const oct_option *oct_option_at(size_t i);           /* NULL past the end */
/* By key or by an accepted old spelling (alias); NULL when unknown. */
const oct_option *oct_option_find(const char *key);
/* The nearest key (edit distance) when close enough to be a typo, else NULL. */
const char *oct_option_suggest(const char *key);

/* The name of `names` (NULL-terminated) nearest to `name` (edit distance,
 * case-insensitive, a swap of neighbours counting one) when close enough to
 * be a typo of it, else NULL.  Used for keys, profile keys, --only, topics. */
const char *oct_nearest_name(const char *name, const char *const *names);

/* Parses one value text into o's field(s) of v (v untouched on error).
 * Checks the static range and names; the message names o->key:
 *   "window.param: 1.5 is outside [0, 1]", "methods: unknown name 'xyz' ...". */
oct_err oct_option_parse(const oct_option *o, const char *text, oct_control_values *v,
                         oct_error *e);
/* As oct_option_parse() without the range and the rules: only what the
 * field can hold (syntax, names, 32-bit range, finite).  octctl set writes
 * such values and octd rejects the generation with the table's message
 * (oct_options_check_values), so that the status block says why. */
oct_err oct_option_parse_unchecked(const oct_option *o, const char *text, oct_control_values *v,
                                   oct_error *e);
/* Formats o's value in v as oct_option_parse() reads it back ("%.9g" for
 * f32, "%.17g" for f64); returns the length as snprintf. */
int oct_option_format(const oct_option *o, const oct_control_values *v, char *buf, size_t len);
/* Checks the current value(s) of o in v against the static range/names and
 * the rules between values that need no geometry (window/background with
 * their parameter); message as oct_option_parse(). */
oct_err oct_option_check(const oct_option *o, const oct_control_values *v, oct_error *e);

/* oct_option_check() of every option: the static rules of a whole generation
 * (octd runs it before the engine's geometry rules); the first failure. */
oct_err oct_options_check_values(const oct_control_values *v, oct_error *e);

/* Every option set to its default (command fields zero). */
void oct_options_default(oct_control_values *v);
/* The options added after `minor` set to their defaults (what an older block means). */
void oct_options_default_after(oct_control_values *v, uint32_t minor);

/* Copies the option fields between a block and values (no seq, no commands;
 * block_to_values: fields newer than the block's abi_minor read as defaults).
 * The caller holds the seqlock / the writers' lock. */
void oct_options_block_to_values(const oct_control_block *b, oct_control_values *v);
void oct_options_values_to_block(oct_control_block *b, const oct_control_values *v);

/* The table as JSON (schema "octd-options-1"): options and commands; *out is
 * malloc'd, NUL-terminated. */
oct_err oct_options_json(char **out, oct_error *e);

/* Command names as octctl and the schema spell them ("online", ..., "reference"). */
const char *oct_command_name(uint32_t command); /* NULL when unknown */

#ifdef __cplusplus
}
#endif
#endif
