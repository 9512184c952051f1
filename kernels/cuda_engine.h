/* cuda_engine.h - extras of the CUDA backend for tests and octbench.  Not
 * part of the public engine API; every function is safe to call on an engine
 * of another backend (it then returns 0 / OCT_EUNSUPPORTED). */
#ifndef OCT_CUDA_ENGINE_H
#define OCT_CUDA_ENGINE_H

#include <stdint.h>

#include "oct_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device and pinned-host allocations this engine has made so far
 * (cudaMalloc + cudaHostAlloc).  Tests use it to prove that control
 * changes between frames do not reallocate. */
uint64_t oct_cuda_alloc_count(const oct_engine *eng);

/* Re-runs the device work of the last processed frame (the raw frame is
 * still on the device) `reps` times without any host<->device copy and
 * returns the median device time per frame in ms, with the stage split of
 * the median run in *t (h2d_ms = d2h_ms = 0).  For octbench. */
oct_err oct_cuda_time_device(oct_engine *eng, int reps, double *median_ms,
                             oct_stage_times *t, oct_error *e);

#ifdef __cplusplus
}
#endif
#endif
