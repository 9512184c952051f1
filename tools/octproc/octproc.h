/* octproc.h - what octproc's main.c shares with its other files. */
#ifndef OCTPROC_H
#define OCTPROC_H

#include <stdbool.h>

#include "oct_engine.h"

/* octproc --register (register.c, SPEC 10.4) */
typedef struct octproc_reg_args {
    const char *ref, *input, *output, *profile; /* profile may be NULL with intensity */
    bool intensity;      /* files hold float32 intensity volumes */
    oct_backend backend;
    int threads;
    char **sets;         /* --set KEY=VALUE assignments (reg.stripe, ...) */
    int nsets;
} octproc_reg_args;
/* Returns the exit status: 0 ok, 1 bad input or failure, 2 usage. DIR exists. */
int octproc_register(const octproc_reg_args *a);
int octproc_cmp_float(const void *a, const void *b);

#endif
