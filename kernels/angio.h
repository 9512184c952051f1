/* angio.h - repeated B-scans: structure averaging, temporal median and
 * angiography (SPEC 10.3), CPU; the CUDA twin is in angio_cuda.cu.
 *
 * A group is R repeats of one B-scan position: R x N A-scans.  With
 * A_r[n][d] the linear CFD intensity of repeat r (d = 0..D-1, D = M/2+1,
 * 0 for d < F), per pixel (n, d):
 *   struct  S = (1/R) sum_r A_r
 *   median  the median over r (mean of the two middle values when R is even)
 *   sv      (1/R) sum_r (A_r - S)^2
 *   decor   1 - (1/(R-1)) sum_{r<R-1} c(A_r, A_{r+1}),
 *           c(a, b) = 2ab / (a^2 + b^2), c = 1 when a = b = 0
 *   ssada   (1/K) sum_k decor(A^(k)),  A_r^(k)[d] = |DFT(g_k . x~_r)[d]|
 *           (0 for d < F), g_k[n] = exp(-4 ln2 ((n - c_k)/w)^2),
 *           c_k = (k + 1/2) M/K, w = band_width * M/K.
 *
 * Repeat alignment (angio.align, off by default): before the metrics each
 * repeat r >= 1 is aligned to repeat 0 by the peak of their FFT
 * cross-correlation (mean-removed intensities, zero-padded so that nothing
 * wraps, search |dz| <= D/4 and, with lateral, |dx| <= N/4), refined to
 * sub-pixel by a parabola through the peak and its neighbours on each axis.
 * The repeat (and each of its band images) is then resampled bilinearly:
 * A'_r[n][d] = A_r(n + dx_r, d + dz_r), coordinates clamped to the image.
 *
 * Plan once (oct_angio_create: FFT plans, band gains, buffers), run per group.
 */
#ifndef OCT_ANGIO_H
#define OCT_ANGIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metric indices; the bit of metric m in `metrics` is 1u << m, equal to the
 * OCT_ANGIO_* bits of the control block (oct_ipc.h). */
enum oct_angio_metric {
    OCT_ANGIO_M_STRUCT = 0,
    OCT_ANGIO_M_MEDIAN = 1,
    OCT_ANGIO_M_SV = 2,
    OCT_ANGIO_M_DECOR = 3,
    OCT_ANGIO_M_SSADA = 4,
    OCT_ANGIO_M_COUNT = 5
};
#define OCT_ANGIO_METRICS_ALL 0x1fu
#define OCT_ANGIO_REPEATS_MAX 64u /* R: geometry.repeats */
#define OCT_ANGIO_BANDS_MAX 16    /* K: angio.bands */
enum oct_angio_align { OCT_ANGIO_ALIGN_OFF = 0, OCT_ANGIO_ALIGN_AXIAL = 1, OCT_ANGIO_ALIGN_LATERAL = 2 };
/* How the CUDA ssada runs (angio_cuda.cu):
 *  BANDS   a kernel writes the K band spectra, one batched cuFFT R2C, a
 *          kernel takes magnitudes and pair terms (the default)
 *  LEGACY  the round-5 kernels (a band kernel per band, the CFD magnitudes
 *          recomputed from x~): A/B timing only
 *  FUSED   one block per position: its R spectra into shared memory, the K
 *          band transforms there (angio_fused.cuh), only ssada written out;
 *          needs af_shared_floats(M, R) floats of shared memory per block */
enum oct_angio_cuda_path {
    OCT_ANGIO_CUDA_BANDS = 0,
    OCT_ANGIO_CUDA_LEGACY = 1,
    OCT_ANGIO_CUDA_FUSED = 2
};

/* "struct", "median", "sv", "decor", "ssada"; NULL when out of range. */
const char *oct_angio_metric_name(int metric);

typedef struct oct_angio_config {
    uint32_t samples;     /* M, power of two 64..8192 */
    uint32_t ascans;      /* N >= 1 */
    uint32_t repeats;     /* R in [2, OCT_ANGIO_REPEATS_MAX] */
    int32_t freq_cutoff;  /* F in [0, M/2] */
    uint32_t metrics;     /* OCT_ANGIO_* bits, non-zero */
    int32_t bands;        /* K in [1, OCT_ANGIO_BANDS_MAX] (ssada) */
    float band_width;     /* (0, 4], fraction of M/K */
    uint32_t align;       /* enum oct_angio_align */
    int threads;          /* OpenMP threads; 0 = all */
    bool quick_plan;      /* FFTW_ESTIMATE instead of FFTW_MEASURE */
    /* CUDA only (the CPU ignores them) */
    uint32_t cuda_chunk;  /* spectra per chunk, 0 = the create call's max_spectra */
    uint32_t cuda_path;   /* enum oct_angio_cuda_path */
} oct_angio_config;

/* M, N, R from the arguments; F 0, all metrics, K 4, width 1, align off,
 * threads 0, quick plan, CUDA chunk 0, CUDA path bands. */
void oct_angio_config_default(oct_angio_config *c, uint32_t samples, uint32_t ascans,
                              uint32_t repeats);
/* Checks every field; the message names the operator's key
 * (geometry.repeats, angio.bands, ...) and the allowed range. */
oct_err oct_angio_config_check(const oct_angio_config *c, oct_error *e);

/* Band gains g_k[n] (K x M floats, computed in double). */
void oct_angio_band_gains(float *g, uint32_t M, int K, float band_width);

/* Where the metrics of a group go: img[m] (NULL = not wanted; every metric in
 * `metrics` needs one), pixel (n, d) at img[m][n*stride_n + d*stride_d]:
 * (stride_n, stride_d) = (D, 1) for the volume layout [N][D], (1, N) for a
 * B-scan [D][N]. */
typedef struct oct_angio_out {
    float *img[OCT_ANGIO_M_COUNT];
    size_t stride_n, stride_d;
} oct_angio_out;

typedef struct oct_angio oct_angio;

oct_err oct_angio_create(oct_angio **out, const oct_angio_config *c, oct_error *e);
void oct_angio_destroy(oct_angio *a);
const oct_angio_config *oct_angio_config_of(const oct_angio *a);

/* One group.  A: R x N x D linear CFD intensities (repeat r, A-scan n at
 * A[(r*N + n)*D]), or NULL to have them computed here from xt.  xt: R x N x M
 * pre-processed spectra x~ (after background, k-linearisation, window); needed
 * for ssada and when A is NULL, else may be NULL.  Non-finite input gives
 * non-finite output (the engine refuses such frames before this). */
oct_err oct_angio_group(oct_angio *a, const float *A, const float *xt, const oct_angio_out *o,
                        oct_error *e);

/* En-face angiogram (SPEC 10.2 on 10.3): out[g*N + n] = mean (max = false)
 * or maximum over d0 <= d < d1 of img[g*st_g + n*st_n + d*st_d], for G
 * groups of N A-scans; d1 > d0.  Summed in double. */
void oct_angio_slab(const float *img, size_t st_g, size_t st_n, size_t st_d, uint32_t G,
                    uint32_t N, int32_t d0, int32_t d1, bool max, float *out, int threads);

/* Alignment shifts of the last group (dz, dx per repeat, 0 for repeat 0 and
 * when alignment is off); R floats each. */
void oct_angio_shifts(const oct_angio *a, float *dz, float *dx);

/* Stage times of the last group (ms): cfd (A from xt), align, metrics, ssada. */
typedef struct oct_angio_times {
    double cfd_ms, align_ms, metrics_ms, ssada_ms, total_ms;
} oct_angio_times;
void oct_angio_times_get(const oct_angio *a, oct_angio_times *t);

/* ---- CUDA (angio_cuda.cu; OCT_EUNSUPPORTED when not built) ----
 * The same metrics on device arrays: dA [G][R][N][D] CFD magnitudes, dxt
 * [G][R][N][M] pre-processed spectra, G groups at once; outputs as above
 * per group plus stride_g between groups.  Work goes in chunks of whole
 * groups of up to `max_spectra` spectra (c->cuda_chunk if set; fewer when
 * the chunk's buffers would pass 2 GiB); one batched cuFFT per chunk does
 * the K bands.  With c->align, the repeats (and the band images) are
 * aligned as on the CPU (angio_align_cuda.cu).  `stream` is a cudaStream_t. */
typedef struct oct_angio_cuda oct_angio_cuda;
typedef struct oct_angio_dout {
    float *img[OCT_ANGIO_M_COUNT]; /* device pointers */
    size_t stride_g, stride_n, stride_d;
} oct_angio_dout;
oct_err oct_angio_cuda_create(oct_angio_cuda **out, const oct_angio_config *c, void *stream,
                              size_t max_spectra, oct_error *e);
void oct_angio_cuda_destroy(oct_angio_cuda *a);
oct_err oct_angio_cuda_run(oct_angio_cuda *a, const float *dA, const float *dxt, uint32_t groups,
                           const oct_angio_dout *o, oct_error *e);
/* The same with the CFD transform instead of magnitudes: dX [G][R][N][D]
 * complex (interleaved float pairs, cuFFT's unnormalised R2C of dxt, e.g.
 * the engine's own), so the CFD is not computed twice; |X| is taken in the
 * metrics kernel (0 for d < F).  dX may be NULL (computed here from dxt). */
oct_err oct_angio_cuda_run_x(oct_angio_cuda *a, const void *dX, const float *dxt,
                             uint32_t groups, const oct_angio_dout *o, oct_error *e);
/* Test/benchmark convenience: host arrays in and out (copies through the
 * device; A may be NULL: computed on the device from xt), synchronous;
 * *device_ms gets the device time of the metrics alone (events), if non-NULL. */
oct_err oct_angio_cuda_host(const oct_angio_config *c, const float *A, const float *xt,
                            uint32_t groups, const oct_angio_out *o, size_t stride_g,
                            double *device_ms, oct_error *e);
/* Test convenience: the alignment shifts (c->align != 0) the GPU finds for
 * `groups` groups of host intensities A ([G][R][N][D]; or NULL: computed from
 * xt), dz/dx [G][R] (0 for repeat 0), synchronous; sub_groups > 0 caps the
 * groups per estimation batch (0: by memory, as the engine does). */
oct_err oct_angio_cuda_align_host(const oct_angio_config *c, const float *A, const float *xt,
                                  uint32_t groups, uint32_t sub_groups, float *dz, float *dx,
                                  oct_error *e);

#ifdef __cplusplus
}
#endif
#endif
