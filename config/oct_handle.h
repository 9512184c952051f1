/* oct_handle.h - a small handle-based API over the engine, the profile and
 * the control/status blocks, for callers that cannot use C structs directly
 * (the Python package's ctypes binding, octd.Engine / octd.Control).  Part of
 * liboct.so (soname liboct.so.0).  Every call returns oct_err and fills the
 * oct_error message; no getenv, no global state.
 */
#ifndef OCT_HANDLE_H
#define OCT_HANDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- offline processing: octproc's set-up as one handle ---- */
typedef struct oct_proc oct_proc;

/* Loads the profile (and its data files), applies `sets` ("key=value"
 * control assignments, '\n'-separated, may be NULL) and plans an engine for
 * g (NULL: the profile's geometry; OCT_ESTATE when it has none).  When both
 * are given they must agree; the profile's sample_shift is used.
 * backend: 0 auto, 1 cpu, 2 cuda; threads 0 = all cores; quick_plan: plan
 * FFTs without measuring (fast set-up, as octproc for short stacks; else
 * measured plans as octd and octproc for long stacks). */
oct_err oct_proc_open(oct_proc **out, const char *profile, const oct_geometry *g, int backend,
                      int threads, const char *sets, bool quick_plan, oct_error *e);
void oct_proc_close(oct_proc *p);
void oct_proc_geometry(const oct_proc *p, oct_geometry *g);
const char *oct_proc_backend(const oct_proc *p);
/* Products of the profile (OCT_PRODUCT_* bits, F32 included). */
uint32_t oct_proc_products(const oct_proc *p);
/* Processes one frame (exactly frame bytes); *ms = engine time. */
oct_err oct_proc_frame(oct_proc *p, const void *frame, size_t bytes, double *ms, oct_error *e);
/* The last frame's image of (method, kind): false when absent.  Pointers
 * stay valid until the next oct_proc_frame(). */
bool oct_proc_image(const oct_proc *p, int method, int kind, int *ndim, uint32_t shape[3],
                    const uint8_t **u8, const float **f32, const int32_t **indices,
                    uint32_t *n_indices);

/* ---- control and status blocks by name ---- */
/* Applies '\n'-separated "key=value" assignments to the current values as
 * one generation (all parsed first: an unknown key or bad value writes
 * nothing and names the key); *gen = the generation written. */
oct_err oct_ctl_set(const char *control, const char *assignments, uint64_t *gen, oct_error *e);
/* All values, "key=value\n" lines (as octctl get). */
oct_err oct_ctl_get(const char *control, char *buf, size_t len, oct_error *e);
/* Issues a command with its arguments (ABI 1.2 cmd_flags, cmd_frames,
 * cmd_seconds) in one generation, checked as oct_control_command_args;
 * *seq = its command_seq. */
oct_err oct_ctl_command(const char *control, uint32_t command, uint32_t flags, uint32_t frames,
                        double seconds, uint64_t *seq, oct_error *e);
/* A consistent copy of the status block (4096 bytes). */
oct_err oct_stat_copy(const char *status, void *block, size_t len, oct_error *e);

#ifdef __cplusplus
}
#endif
#endif
