/* disp_fused.cuh - the dispersion chain of one spectrum in one thread block
 * (issue 19; cuda.disp = fused, opt-in, where M is a power of two <=
 * DISP_FUSED_M_MAX).
 *
 * Why: the cuFFT chain (pad -> C2C inverse -> phase -> C2C forward ->
 * store / sink) moves each spectrum through global memory five times, M
 * complex values each way: ~2.5 GB per 200x192x1024 volume.  Here a block
 * reads the spectrum's K = M/2+1 bins once and writes K bins once; both
 * transforms run out of shared memory with angio_fused.cuh's Stockham FFT.
 * Measured (H200, 2026-11-24, volume-klin-disp): slower than cuFFT all the
 * same (device work after the copy 1.21 vs 1.05 ms; as angio's fused ssada,
 * 10.95 vs 9.27 ms): this naive FFT (a barrier per radix-4 stage, twiddles
 * from global memory, 2-way bank conflicts) is compute-bound, not
 * memory-bound; hence not the default.
 *
 * The same steps as the chain: Z[k] = X[k] for F <= k < K, else 0 (the
 * analytic signal's spectrum); z = IDFT(Z) = conj(DFT(conj Z)) (unscaled,
 * as cuFFT's inverse); z[n] *= e^(-i theta[n]) / M; Y = DFT(z); out[k] =
 * Y[k], k < K.  out may be x (in place: every read of x precedes the first
 * barrier).  A function of (thread, threads) with AF_SYNC() between phases,
 * so that test_cuda_engine runs it on the host against a float64 DFT with
 * one thread and with a pthread "block" (t_disp_fused_host). */
#ifndef OCT_DISP_FUSED_CUH
#define OCT_DISP_FUSED_CUH

#include "angio_fused.cuh"

/* Largest M of the fused kernel: 2 M complex of shared memory (32 KiB at
 * 2048, inside the default 48 KiB of a block). */
#define DISP_FUSED_M_MAX 2048u

/* x: K bins of one spectrum; ph: e^(-i theta[n]), M values; tw:
 * af_twiddles(M); sh: 2 M complex; invM = 1 / M. */
AF_HD void af_disp_row(const af_c *x, uint32_t K, uint32_t M, uint32_t logM, uint32_t F, const af_c *ph,
                       const af_c *tw, float invM, af_c *out, af_c *sh, uint32_t tid, uint32_t T)
{
    af_c *b0 = sh, *b1 = sh + M;
    for (uint32_t k = tid; k < M; k += T)
        b0[k] = k >= F && k < K ? af_make(x[k].x, -x[k].y) : af_make(0.0f, 0.0f);
    AF_SYNC();
    af_c *A = af_fft(b0, b1, tw, M, logM, tid, T);
    af_c *B = A == b0 ? b1 : b0;
    for (uint32_t n = tid; n < M; n += T) {
        const af_c a = A[n], c = ph[n];
        const af_c z = af_make(a.x * invM, -a.y * invM); /* conj(DFT(conj Z)) / M */
        B[n] = af_mul(z, c);
    }
    AF_SYNC();
    const af_c *Y = af_fft(B, A, tw, M, logM, tid, T);
    for (uint32_t k = tid; k < K; k += T)
        out[k] = Y[k];
}

#endif
