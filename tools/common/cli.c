/* cli.c - see cli.h. */
#include "cli.h"

#include "oct_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef OCT_VERSION
#define OCT_VERSION "unknown"
#endif

int oct_cli_start(const char *prog, int argc, char **argv, const oct_cli_rename *renames)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (!strcmp(a, "--version")) {
            printf("%s %s\n", prog, OCT_VERSION);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0)
            continue;
        for (const oct_cli_rename *r = renames; r && r->old_name; r++) {
            size_t l = strlen(r->old_name);
            if (strncmp(a + 2, r->old_name, l) != 0 || (a[2 + l] != '\0' && a[2 + l] != '='))
                continue;
            size_t n = strlen(r->new_name) + strlen(a + 2 + l) + 3;
            char *s = malloc(n); /* lives as long as argv */
            if (!s)
                break;
            snprintf(s, n, "--%s%s", r->new_name, a + 2 + l);
            fprintf(stderr, "%s: warning: --%s is now --%s (the unit is in the name); the old "
                            "spelling still works\n", prog, r->old_name, r->new_name);
            argv[i] = s;
            break;
        }
    }
    return -1;
}

int oct_cli_usage(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s --help)\n", prog);
    va_end(ap);
    return OCT_EX_USAGE;
}

const char *oct_cli_nearest(const char *name, const char *const *known)
{
    return oct_nearest_name(name, known);
}

bool oct_cli_known(const char *prog, const char *option, const char *name,
                   const char *const *known)
{
    for (int i = 0; known && known[i]; i++)
        if (!strcmp(name, known[i]))
            return true;
    char list[1024] = "";
    for (int i = 0; known && known[i]; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", known[i]);
    }
    const char *near = oct_cli_nearest(name, known);
    fprintf(stderr, "%s: %s '%s': unknown (known: %s)%s%s%s\n", prog, option, name, list,
            near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    return false;
}
