/* cli.h - the command-line convention shared by every octd program (octd,
 * octctl, octsim, octgrab, octproc, octbench; issue 14):
 *   --version          prints "PROG VERSION" and exits 0
 *   usage errors       exit 64 (EX_USAGE) with a message naming the argument
 *   unknown names      (--only, --topic, ...) are usage errors, with "did you mean"
 *   rates              say their unit in the option name (--frame-rate,
 *                      --ascan-rate); old spellings still work with a warning
 */
#ifndef OCT_CLI_H
#define OCT_CLI_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OCT_EX_USAGE 64

/* An old option spelling and the new one (both without the leading "--"). */
typedef struct oct_cli_rename {
    const char *old_name, *new_name;
} oct_cli_rename;

/* Call first in main(): handles --version anywhere among the arguments
 * (before a "--"), and rewrites old option spellings in argv to the new
 * ones ("--rate 5", "--rate=5"), warning once on stderr for each.  Returns
 * -1 to go on, or the exit status (0 after --version). */
int oct_cli_start(const char *prog, int argc, char **argv, const oct_cli_rename *renames);

/* "PROG: MESSAGE (PROG --help)" on stderr; returns OCT_EX_USAGE. */
int oct_cli_usage(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether name is one of known (NULL-terminated); if not, a usage message
 * "PROG: OPTION NAME: unknown (known: ...; did you mean X?)" on stderr. */
bool oct_cli_known(const char *prog, const char *option, const char *name,
                   const char *const *known);

/* The closest of known (NULL-terminated) to name when it looks like a typo, else NULL. */
const char *oct_cli_nearest(const char *name, const char *const *known);

#ifdef __cplusplus
}
#endif
#endif
