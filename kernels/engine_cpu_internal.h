/* engine_cpu_internal.h - what the CPU backend's two files share: the
 * backend state (per-thread buffers, cpu_state), KPAD, and oct_cpu_ensure(),
 * with which engine_cpu.c (prepare, every frame) has engine_cpu_setup.c bring
 * the derived structures (spectrum lists, MSI matrices, k-lin runs, ...) up
 * to the plan's generations.  Internal to the CPU backend. */
#ifndef OCT_ENGINE_CPU_INTERNAL_H
#define OCT_ENGINE_CPU_INTERNAL_H

#include "angio.h"
#include "engine_internal.h"

#include <fftw3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Positions are within [-1, M], so a run starts at >= -2 - T/2 and ends at
 * <= M + 1 + T/2: KPAD edge samples on each side cover every T allowed. */
#define KPAD (OCT_SINC_TAPS_MAX / 2 + 4)

/* ---- backend state ------------------------------------------------------- */

typedef struct thr_buf {
    float *A;         /* rows_max x M: converted spectra of a block */
    fftwf_complex *X; /* K: DFT of one spectrum */
    fftwf_complex *Y; /* K: X . G_r */
    float *p;         /* M: correlation of one (spectrum, mask) */
    float *Icfd;      /* K: CFD intensities of one spectrum */
    float *Imsi;      /* rows_max x max(R, Q): MSI intensities of a block */
    float *C;         /* rows_max x chunk_cols: GEMM output */
    float *P;         /* rows_max x M: x' (no window), for k-lin and CMS */
    float *Ak;        /* rows_max x M: w . klin(x'), the CFD input with k-lin */
    float *xpad;      /* M + 2 KPAD: x' with its edge samples repeated */
    fftwf_complex *Z; /* M: analytic signal (dispersion) */
    float *Ccms;      /* rows_max x 2 R_cms: CMS GEMM output */
    double *fd;       /* 5 x M: fpn statistics (3 x M), best key, best mean */
    uint32_t *fseg;   /* M: fpn best segment */
    double t[3];      /* convert, cfd, msi (+ cms) ms */
} thr_buf;

typedef struct cpu_state {
    int threads;
    uint32_t M, K, N, L, R;
    size_t nspec;
    uint32_t rows_max;
    fftwf_plan r2c, c2r;
    thr_buf *tb;
    float *bg;        /* M: the background of this frame */
    double *acc;      /* threads x M: frame-mean partial sums */
    double *meand;    /* M: frame mean in double */
    float *ones;      /* M: 1.0f, the "no window" of convert_row */

    /* rolling background: the last hist_K frame means (ring), restarted
     * when the plan's background generation changes */
    double *hist;
    uint32_t hist_K, hist_n, hist_pos;
    size_t hist_cap;
    uint64_t hist_gen;

    /* dispersion: in-place complex plans, made when first needed */
    fftwf_plan cfwd, cbwd;

    /* k-lin taps as contiguous runs: klin_idx[n*T + t] = clamp(kstart[n] + t),
     * read from x' padded with repeated edge samples (no gather) */
    int32_t *kstart;
    bool kstart_ok;

    /* CMS */
    uint32_t RC;              /* cms depths */
    float *cms_qenf;          /* 2Q x M: the en-face rows of the plan's cms_q */

    /* spectrum lists of the plan's row sets */
    uint32_t *full, *enf;
    size_t n_full, n_enf;

    /* MSI */
    oct_msi_path path;
    uint32_t Lw;              /* lags in the window */
    fftwf_complex *G;         /* R x K: conj(DFT(m~_r)) / M (FFT path) */
    float *B_full, *B_enf;    /* M x (R*Lw), M x (Q*Lw): shifted masks (GEMM path) */
    uint32_t chunk_cols_max;

    /* What each derived structure was built from: plan generations (0 =
     * nothing built).  Compared with the plan at prepare and at every frame. */
    struct {
        uint64_t lists, kstart, G, cms_qenf[2], B_full[2], B_enf[3];
    } built;

    /* angiography (SPEC 10.3): the block pass keeps the CFD magnitudes (and,
     * for ssada, the pre-processed spectra x~) of every spectrum; the group
     * stage (angio.h) turns them into the GROUP rows of the layout */
    oct_angio *ang;
    oct_angio_config ang_cfg;
    float *ang_A, *ang_X;     /* S x D, S x M */
    size_t ang_cap_A, ang_cap_X;
} cpu_state;

/* Brings every derived structure up to the plan's generations
 * (engine_cpu_setup.c). */
oct_err oct_cpu_ensure(oct_engine *eng, const oct_plan *pl, cpu_state *s, oct_error *e);

#endif
