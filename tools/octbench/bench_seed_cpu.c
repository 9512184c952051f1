/* bench_seed_cpu.c - the seed baseline: the thesis' sequential MSI
 * (Kapinchev 2016, Algorithm 5.6), single thread, timed in-process on random
 * input: per spectrum one FFTW forward FFT, then for every needed mask a
 * complex product with the mask's conjugate spectrum, one inverse FFT and the
 * sum of |.| over the lag window.  It is what octd's MSI is compared with. */
#include <fftw3.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "engine_internal.h"

/* At most this many spectra are timed; a larger frame is timed on a subset
 * and scaled (the work per spectrum is the same for every spectrum). */
#define SEED_MAX_SPECTRA 512

double octbench_seed_cpu_msi(const octbench_opts *o, int samples, int ascans, int lines,
                             int masks, int lag_lo, int lag_hi, const int *depths, int ndepths)
{
    const int M = samples, K = M / 2 + 1;
    const long nspec = (long)ascans * lines;
    if (M < 2 || nspec < 1 || masks < 1 || ndepths < 1 || lag_lo > lag_hi)
        return -1;
    const long ntime = nspec < SEED_MAX_SPECTRA ? nspec : SEED_MAX_SPECTRA;
    float *x = fftwf_malloc(sizeof(float) * M), *p = fftwf_malloc(sizeof(float) * M);
    fftwf_complex *X = fftwf_malloc(sizeof(fftwf_complex) * K);
    fftwf_complex *Y = fftwf_malloc(sizeof(fftwf_complex) * K);
    fftwf_complex *G = fftwf_malloc(sizeof(fftwf_complex) * (size_t)K * masks);
    uint16_t *raw = malloc(sizeof(uint16_t) * (size_t)M * ntime);
    float *w = malloc(sizeof(float) * M), *I = malloc(sizeof(float) * ndepths);
    double ms = -1;
    fftwf_plan fwd = NULL, inv = NULL;
    if (!x || !p || !X || !Y || !G || !raw || !w || !I)
        goto out;
    unsigned seed = 12345;
    for (long i = 0; i < (long)M * ntime; i++)
        raw[i] = (uint16_t)(rand_r(&seed) & 0xfff);
    for (int n = 0; n < M; n++)
        w[n] = (float)(0.5 - 0.5 * cos(2 * 3.14159265358979 * n / (M - 1)));
    fwd = fftwf_plan_dft_r2c_1d(M, x, X, FFTW_MEASURE);
    inv = fftwf_plan_dft_c2r_1d(M, Y, p, FFTW_MEASURE);
    if (!fwd || !inv)
        goto out;
    /* set-up (not timed): the masks' conjugate spectra */
    for (int r = 0; r < masks; r++) {
        for (int n = 0; n < M; n++)
            x[n] = w[n] * (float)(rand_r(&seed) % 2001 - 1000) * 1e-3f;
        fftwf_execute(fwd);
        for (int k = 0; k < K; k++) {
            G[(size_t)r * K + k][0] = X[k][0] / M;
            G[(size_t)r * K + k][1] = -X[k][1] / M;
        }
    }
    volatile float sink = 0;
    int reps = o->quick ? 1 : 2;
    double best = 1e300;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = oct_now_ms();
        for (long j = 0; j < ntime; j++) {
            const uint16_t *s = raw + (size_t)j * M;
            for (int n = 0; n < M; n++)
                x[n] = w[n] * (float)s[n];
            fftwf_execute(fwd);
            for (int q = 0; q < ndepths; q++) {
                const fftwf_complex *g = G + (size_t)(depths ? depths[q] % masks : q % masks) * K;
                for (int k = 0; k < K; k++) {
                    Y[k][0] = X[k][0] * g[k][0] - X[k][1] * g[k][1];
                    Y[k][1] = X[k][0] * g[k][1] + X[k][1] * g[k][0];
                }
                fftwf_execute(inv);
                float acc = 0;
                for (int l = lag_lo; l <= lag_hi; l++)
                    acc += fabsf(p[((l % M) + M) % M]);
                I[q] = acc;
            }
            sink += I[0];
        }
        double t = oct_now_ms() - t0;
        if (t < best)
            best = t;
    }
    (void)sink;
    ms = best * (double)nspec / (double)ntime;
out:
    if (fwd)
        fftwf_destroy_plan(fwd);
    if (inv)
        fftwf_destroy_plan(inv);
    fftwf_free(x), fftwf_free(p), fftwf_free(X), fftwf_free(Y), fftwf_free(G);
    free(raw), free(w), free(I);
    return ms;
}
