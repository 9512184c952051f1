/* engine_cpu_setup.c - the CPU backend's set-up side: the structures
 * derived from the plan and rebuilt only when its generations change (the
 * "full" and "en-face" spectrum lists, the MSI filters G of the FFT path and
 * shifted-mask matrices B of the GEMM path, the k-lin runs, the rolling
 * background history, the dispersion plans and the CMS en-face matrix),
 * brought up to date by oct_cpu_ensure() at prepare and before every frame.
 * The per-frame work is in engine_cpu.c. */
#include "engine_cpu_internal.h"

#include <fftw3.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- spectrum lists ------------------------------------------------------ */

/* "full" spectra need every depth (the plan's rows_full, the xsec_h line,
 * the xsec_v column), "en-face" spectra only the en-face depths. */
static oct_err build_lists(const oct_plan *pl, cpu_state *s, oct_error *e)
{
    const oct_params *p = &pl->params;
    free(s->full), free(s->enf);
    s->full = s->enf = NULL;
    s->n_full = s->n_enf = 0;
    s->built.lists = 0;
    const bool all_full = pl->rows_full, xh = pl->rows_xs_h, xv = pl->rows_xs_v, enf = pl->rows_sub;
    size_t nf = all_full ? s->nspec : (xh ? s->N : 0) + (xv ? s->L : 0);
    s->full = malloc(sizeof(uint32_t) * (nf ? nf : 1));
    s->enf = malloc(sizeof(uint32_t) * (enf ? s->nspec : 1));
    if (!s->full || !s->enf)
        return oct_error_set(e, OCT_ENOMEM, "cpu: spectrum lists: out of memory");
    for (size_t j = 0; j < s->nspec; j++) {
        uint32_t l = (uint32_t)(j / s->N), a = (uint32_t)(j % s->N);
        bool f = all_full || (xh && l == (uint32_t)p->xsec_h) || (xv && a == (uint32_t)p->xsec_v);
        if (f)
            s->full[s->n_full++] = (uint32_t)j;
        else if (enf)
            s->enf[s->n_enf++] = (uint32_t)j;
    }
    s->built.lists = pl->gen[OCT_PK_ROWS];
    return OCT_OK;
}

/* ---- MSI matrices -------------------------------------------------------- */

/* G_r = conj(DFT(m~_r)) / M: the FFT path's filter per mask.  m~_r is already
 * windowed and H-filtered (and normalised) by engine.c. */
static oct_err build_G(oct_engine *eng, const oct_plan *pl, cpu_state *s, oct_error *e)
{
    const uint32_t M = s->M, K = s->K, R = s->R;
    fftwf_free(s->G);
    s->built.G = 0;
    s->G = fftwf_malloc(sizeof(fftwf_complex) * (size_t)R * K);
    /* rows of G (K complex, K odd) are not SIMD-aligned: transform into an
     * aligned buffer, as the plan was made for */
    float *x = fftwf_malloc(sizeof(float) * M);
    fftwf_complex *X = fftwf_malloc(sizeof(fftwf_complex) * K);
    if (!s->G || !x || !X) {
        fftwf_free(x);
        fftwf_free(X);
        return oct_error_set(e, OCT_ENOMEM, "cpu: MSI filters: out of memory (R = %u)", R);
    }
    const float inv = 1.0f / (float)M;
    for (uint32_t r = 0; r < R; r++) {
        fftwf_complex *g = s->G + (size_t)r * K;
        memcpy(x, pl->masks_filt + (size_t)r * M, sizeof(float) * M);
        fftwf_execute_dft_r2c(s->r2c, x, X);
        for (uint32_t k = 0; k < K; k++) {
            g[k][0] = X[k][0] * inv;
            g[k][1] = -X[k][1] * inv;
        }
    }
    fftwf_free(x);
    fftwf_free(X);
    s->built.G = pl->gen[OCT_PK_MASKS];
    eng->rebuilds.msi_matrix++;
    return OCT_OK;
}

/* B[n][c*Lw + i] = m~_{depth(c)}[(n - (W1 + i)) mod M] for the depth list. */
static float *build_B(oct_engine *eng, const oct_plan *pl, cpu_state *s, const int32_t *depth,
                      uint32_t nd, oct_error *e)
{
    const uint32_t M = s->M, Lw = s->Lw;
    const int32_t W1 = pl->params.lag_lo;
    const size_t cols = (size_t)nd * Lw;
    float *B = fftwf_malloc(sizeof(float) * M * (cols ? cols : 1));
    if (!B) {
        oct_error_set(e, OCT_ENOMEM, "cpu: shifted-mask matrix %u x %zu: out of memory", M, cols);
        return NULL;
    }
#pragma omp parallel for num_threads(s->threads) schedule(static)
    for (uint32_t n = 0; n < M; n++) {
        float *row = B + (size_t)n * cols;
        for (uint32_t c = 0; c < nd; c++) {
            const float *m = pl->masks_filt + (size_t)(depth ? (uint32_t)depth[c] : c) * M;
            for (uint32_t i = 0; i < Lw; i++) {
                int64_t idx = ((int64_t)n - (W1 + (int64_t)i)) % (int64_t)M;
                row[(size_t)c * Lw + i] = m[idx < 0 ? idx + M : idx];
            }
        }
    }
    eng->rebuilds.msi_matrix++;
    return B;
}

/* Recovers each run's start from the clamped indices of engine.c; any
 * other pattern keeps the general gather (kstart_ok = false). */
static oct_err build_kstart(const oct_plan *pl, cpu_state *s, oct_error *e)
{
    const uint32_t M = s->M, T = pl->klin_T;
    s->built.kstart = pl->gen[OCT_PK_KLIN];
    s->kstart_ok = false;
    if (!T)
        return OCT_OK;
    if (!s->kstart && !(s->kstart = malloc(sizeof(int32_t) * M)))
        return oct_error_set(e, OCT_ENOMEM, "cpu: k-lin runs: out of memory");
    for (uint32_t n = 0; n < M; n++) {
        const int32_t *ix = pl->klin_idx + (size_t)n * T;
        int64_t s0 = ix[T - 1] < (int32_t)M - 1 ? (int64_t)ix[T - 1] - (T - 1) : ix[0];
        if (s0 < -(int64_t)KPAD || s0 + T > (int64_t)M + KPAD)
            return OCT_OK;
        for (uint32_t t = 0; t < T; t++) {
            int64_t i = s0 + t;
            if (ix[t] != (i < 0 ? 0 : i > (int64_t)M - 1 ? (int64_t)M - 1 : i))
                return OCT_OK;
        }
        s->kstart[n] = (int32_t)s0;
    }
    s->kstart_ok = true;
    return OCT_OK;
}

/* Brings every derived structure up to the plan's generations (only what
 * differs is rebuilt).  Called by prepare and before every frame. */
oct_err oct_cpu_ensure(oct_engine *eng, const oct_plan *pl, cpu_state *s, oct_error *e)
{
    oct_err err;
    const oct_params *p = &pl->params;
    if (s->built.lists != pl->gen[OCT_PK_ROWS] && (err = build_lists(pl, s, e)))
        return err;
    if (s->hist_gen != pl->gen[OCT_PK_BACKGROUND]) { /* the rolling history restarts */
        s->hist_n = s->hist_pos = 0, s->hist_K = 0;
        s->hist_gen = pl->gen[OCT_PK_BACKGROUND];
    }
    if (pl->bg.mode == OCT_BG_ROLLING) {
        size_t need = (size_t)pl->bg.K * s->M;
        if (s->hist_cap < need) {
            double *h = realloc(s->hist, sizeof(double) * need);
            if (!h)
                return oct_error_set(e, OCT_ENOMEM,
                                     "cpu: rolling background of %u frames: out of memory", pl->bg.K);
            s->hist = h, s->hist_cap = need;
        }
        if (s->hist_K != pl->bg.K)
            s->hist_K = pl->bg.K, s->hist_n = s->hist_pos = 0;
    }
    const bool cfd_on = (p->methods & OCT_METHOD_BIT(OCT_METHOD_CFD)) != 0;
    if (s->built.kstart != pl->gen[OCT_PK_KLIN] && (err = build_kstart(pl, s, e)))
        return err;
    if (cfd_on && pl->disp && !s->cfwd) {
        /* planned on thread 0's buffer; every Z is fftwf_malloc'd alike */
        unsigned flags = (eng->setup.flags & OCT_SETUP_QUICK_PLAN) ? FFTW_ESTIMATE : FFTW_MEASURE;
        fftwf_complex *z = s->tb[0].Z;
        s->cfwd = fftwf_plan_dft_1d((int)s->M, z, z, FFTW_FORWARD, flags);
        s->cbwd = fftwf_plan_dft_1d((int)s->M, z, z, FFTW_BACKWARD, flags);
        if (!s->cfwd || !s->cbwd)
            return oct_error_set(e, OCT_EBACKEND,
                                 "cpu: FFTW could not plan %u-point complex transforms", s->M);
        eng->rebuilds.plans++;
    }
    const uint32_t QC = pl->enface_n[OCT_METHOD_CMS];
    if ((p->methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) && s->n_enf && QC &&
        (s->built.cms_qenf[0] != pl->gen[OCT_PK_CMS] || s->built.cms_qenf[1] != pl->gen[OCT_PK_ENFACE])) {
        fftwf_free(s->cms_qenf);
        s->built.cms_qenf[0] = 0;
        s->cms_qenf = fftwf_malloc(sizeof(float) * 2 * (size_t)QC * s->M);
        if (!s->cms_qenf)
            return oct_error_set(e, OCT_ENOMEM, "cpu: cms en-face matrix: out of memory (Q = %u)",
                                 QC);
        for (uint32_t q = 0; q < QC; q++)
            memcpy(s->cms_qenf + (size_t)2 * q * s->M,
                   pl->cms_q + (size_t)2 * (uint32_t)pl->enface_idx[OCT_METHOD_CMS][q] * s->M,
                   sizeof(float) * 2 * s->M);
        s->built.cms_qenf[0] = pl->gen[OCT_PK_CMS];
        s->built.cms_qenf[1] = pl->gen[OCT_PK_ENFACE];
    }
    if (!(p->methods & OCT_METHOD_BIT(OCT_METHOD_MSI)))
        return OCT_OK;
    s->Lw = pl->lags;
    if (pl->msi_path != s->path) {
        /* drop the other path's matrices */
        fftwf_free(s->G), s->G = NULL, s->built.G = 0;
        fftwf_free(s->B_full), s->B_full = NULL, s->built.B_full[0] = 0;
        fftwf_free(s->B_enf), s->B_enf = NULL, s->built.B_enf[0] = 0;
        s->path = pl->msi_path;
    }
    if (s->path == OCT_MSI_FFT)
        return s->built.G != pl->gen[OCT_PK_MASKS] ? build_G(eng, pl, s, e) : OCT_OK;
    const uint64_t kf[2] = {pl->gen[OCT_PK_MASKS], pl->gen[OCT_PK_LAGS]};
    const uint64_t ke[3] = {kf[0], kf[1], pl->gen[OCT_PK_ENFACE]};
    if (s->n_full && memcmp(s->built.B_full, kf, sizeof kf)) {
        fftwf_free(s->B_full);
        s->built.B_full[0] = 0;
        if (!(s->B_full = build_B(eng, pl, s, NULL, s->R, e)))
            return OCT_ENOMEM;
        memcpy(s->built.B_full, kf, sizeof kf);
    }
    const uint32_t Q = pl->enface_n[OCT_METHOD_MSI];
    if (s->n_enf && Q && memcmp(s->built.B_enf, ke, sizeof ke)) {
        fftwf_free(s->B_enf);
        s->built.B_enf[0] = 0;
        if (!(s->B_enf = build_B(eng, pl, s, pl->enface_idx[OCT_METHOD_MSI], Q, e)))
            return OCT_ENOMEM;
        memcpy(s->built.B_enf, ke, sizeof ke);
    }
    return OCT_OK;
}
