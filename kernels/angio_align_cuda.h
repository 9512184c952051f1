/* angio_align_cuda.h - repeat alignment on the GPU (angio.align, SPEC 10.3),
 * internal to angio_cuda.cu; the definition (and the CPU twin) is in
 * angio.h / angio.c: each repeat r >= 1 of a group is aligned to repeat 0 by
 * the peak of their normalised FFT cross-correlation (mean-removed, padded,
 * |dz| <= D/4, with lateral |dx| <= N/4), parabola sub-pixel refinement,
 * then the repeat and each of its band images are resampled bilinearly. */
#ifndef OCT_ANGIO_ALIGN_CUDA_H
#define OCT_ANGIO_ALIGN_CUDA_H

#include "angio.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oct_angio_align_cuda oct_angio_align_cuda;

/* Plans and buffers for chunks of up to max_groups groups of c (c->align != 0);
 * `stream` is a cudaStream_t. */
oct_err oct_angio_align_cuda_create(oct_angio_align_cuda **out, const oct_angio_config *c,
                                    void *stream, uint32_t max_groups, oct_error *e);
void oct_angio_align_cuda_destroy(oct_angio_align_cuda *p);

/* One chunk of G <= max_groups groups, queued on the stream.
 * A: [G][R][N][D] CFD magnitudes on the device, or NULL to compute them here
 * from x ([G][R][N][M] pre-processed spectra; needed too for ssada).
 * Aal: if not NULL, gets the aligned magnitudes (a buffer of p, valid until
 * the next run) for the metrics.  ssada: if not NULL, the ssada image of the
 * aligned band images, pixel (g, n, d) at g*sg + n*sn + d*sd. */
oct_err oct_angio_align_cuda_run(oct_angio_align_cuda *p, const float *A, const float *x,
                                 uint32_t G, const float **Aal, float *ssada, size_t sg,
                                 size_t sn, size_t sd, oct_error *e);

#ifdef __cplusplus
}
#endif
#endif
