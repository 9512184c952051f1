/* cuda_engine.h - extras of the CUDA backend for tests and octbench.  Not
 * part of the public engine API; every function is safe to call on an engine
 * of another backend (it then returns 0 / OCT_EUNSUPPORTED). */
#ifndef OCT_CUDA_ENGINE_H
#define OCT_CUDA_ENGINE_H

#include <stddef.h>
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

/* The MSI matrix product in use: "3xtf32" (fp32 default), "sgemm"
 * (OCT_SETUP_PLAIN_SGEMM or setup.cuda.gemm = sgemm), "tf32" (precision tf32),
 * or "none" (FFT path, no masks, not a CUDA engine). */
const char *oct_cuda_gemm_name(const oct_engine *eng);

/* The MSI GEMM algorithms picked so far (setup.cuda.gemm_algo auto, issue
 * 19.2), one "m x n x k kind: lt|default PICK us (default DEF us)" per
 * shape, "; "-separated, into buf (truncated to len); returns the number
 * of shapes (0: none yet, gemm_algo default, or not a CUDA engine). */
int oct_cuda_gemm_picks(const oct_engine *eng, char *buf, size_t len);

/* The input parts of the last submitted frame: > 1 when it went through
 * the intra-frame pipeline (its DMA in parts), else 1; 0 before the first
 * frame or for another backend.  Tests use it to prove the pipeline ran. */
int oct_cuda_last_parts(const oct_engine *eng);
/* 1 when the last submitted frame went through the intra-frame pipeline
 * with the deferred background correction (cuda.parts_ext = 0, a
 * whole-frame background, the CFD on), 2 when its MSI was deferred too
 * (cuda.parts_ext = 3), else 0. */
int oct_cuda_last_deferred(const oct_engine *eng);
/* Spectra per dispersion chunk (setup.cuda.disp_chunk, issue 19): the C2C
 * plans' batch; 0 for another backend. */
long long oct_cuda_disp_batch(const oct_engine *eng);
/* 1 when the dispersion chain runs fused (cuda.disp fused, disp_fused.cuh),
 * 0 when through cuFFT (or another backend). */
int oct_cuda_disp_fused(const oct_engine *eng);

/* 1 when the last submitted frame's CFD was the matrix product of
 * setup.cuda.cfd (oct_cuda_cfd: en-face depths and cross-sections of a
 * volume), 0 when the per-spectrum chain (or another backend). */
int oct_cuda_last_cfd_gemm(const oct_engine *eng);

/* CUDA graphs of the per-frame device work (setup.cuda.graph, issue 19):
 * frames launched as a graph, graphs captured (one per slot and plan key),
 * captures that failed (those frames ran launch by launch).  Zeros for
 * another backend.  Tests use it to prove the graph path ran. */
void oct_cuda_graph_counts(const oct_engine *eng, uint64_t *launches, uint64_t *captures, uint64_t *fails);

/* Host -> device copy rate of `bytes` (<= one frame) from `src` into the
 * engine's input buffer, `reps` copies timed by events, in GB/s (1e9 B/s).
 * With src pinned or registered this is the DMA ceiling the pipeline is
 * compared with (octbench).  Nothing may be in flight. */
oct_err oct_cuda_h2d_rate(oct_engine *eng, const void *src, size_t bytes, int reps, double *gbps,
                          oct_error *e);

/* Device memory ceiling: a device-to-device copy between two of the
 * engine's spectrum-sized buffers, `reps` copies timed by events, in GB/s
 * counting bytes read + written (the convention of the conversion stage's
 * rate, oct_stage_times.convert_bytes).  Nothing may be in flight. */
oct_err oct_cuda_d2d_rate(oct_engine *eng, int reps, double *gbps, oct_error *e);

#ifdef __cplusplus
}
#endif
#endif
