/* oct_engine.h - the backend-neutral OCT processing engine (SPEC section 2).
 *
 * Plan once, execute many (as FFTW):
 *   oct_engine_create()      plans FFTs / GEMM matrices for a geometry and a set-up
 *   oct_engine_set_params()  changes live control values between frames; only what
 *                            depends on a changed value is recomputed
 *   oct_engine_process()     turns one raw frame into products (oct_products)
 *   oct_engine_destroy()
 *
 * An engine is used by one thread at a time; it may use many threads inside.
 */
#ifndef OCT_ENGINE_H
#define OCT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- enumerations, numbered as in the control block (SPEC 3.2) ---- */
/* CMS: Complex Master/Slave (Rivet et al. 2016), control block ABI 1.1 bit 2. */
enum oct_method { OCT_METHOD_CFD = 0, OCT_METHOD_MSI = 1, OCT_METHOD_CMS = 2, OCT_METHOD_COUNT = 3 };
#define OCT_METHOD_BIT(m) (1u << (m))
#define OCT_METHODS_ALL                                                                    \
    (OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI) |                     \
     OCT_METHOD_BIT(OCT_METHOD_CMS))

enum oct_window {
    OCT_WINDOW_RECT = 0,
    OCT_WINDOW_HANN = 1,
    OCT_WINDOW_HAMMING = 2,
    OCT_WINDOW_BLACKMAN = 3,
    OCT_WINDOW_GAUSSIAN = 4, /* param: sigma as a fraction of M, > 0 */
    OCT_WINDOW_TUKEY = 5,    /* param: alpha in [0, 1] */
    OCT_WINDOW_COUNT = 6
};

enum oct_scale { OCT_SCALE_LINEAR = 0, OCT_SCALE_LOG = 1 };

/* Background b[n] subtracted from every spectrum (before everything else).
 * ABI 1.1 adds (param = oct_params.background_param):
 *  ROLLING: b = mean, over the last K frames processed (this one included;
 *           fewer until K were seen), of each frame's mean spectrum; K = param
 *           in [1, OCT_ROLLING_MAX].  The history restarts when the mode or K
 *           changes.  Frames are counted in submission order.
 *  FPN:     fixed-pattern noise, minimum-variance mean line (after Moon et
 *           al. 2010, on spectra): the frame's S = N*L spectra are cut into
 *           floor(S/G) segments of G = param consecutive spectra (one segment
 *           of all S when S < G; spectra past the last whole segment are in
 *           none); per sample n, b[n] is the mean at n of the segment whose
 *           sum of squared deviations at n is smallest (ties: lowest segment).
 *           G in [2, 65536]. */
enum oct_background {
    OCT_BG_NONE = 0,
    OCT_BG_REFERENCE = 1,
    OCT_BG_FRAME_MEAN = 2,
    OCT_BG_ROLLING = 3,
    OCT_BG_FPN = 4
};
#define OCT_ROLLING_MAX 1024
#define OCT_FPN_SEGMENT_MAX 65536

/* k-linearisation of CFD (ABI 1.1).  Resampling positions p[n], n = 0..M-1,
 * in input-sample units: from the polynomial
 *     p[n] = c0 + c1*t + c2*t^2 + c3*t^3,  t = n/M   (identity: c1 = M)
 * or from the set-up's position file.  They must be finite, strictly
 * increasing and within [-1, M]; samples outside [0, M-1] read the nearest
 * edge sample (index clamped).  With i = floor(p), f = p - i:
 *  LINEAR: y = (1-f) x[i] + f x[i+1]
 *  CUBIC:  Catmull-Rom through x[i-1], x[i], x[i+1], x[i+2]:
 *          y = x[i] + f/2 (x[i+1]-x[i-1]) + f^2/2 (2x[i-1]-5x[i]+4x[i+1]-x[i+2])
 *              + f^3/2 (3x[i]-x[i-1]-3x[i+1]+x[i+2])
 *  SINC:   time-domain interpolation with cut-off length T = klin_taps
 *          (Li, Shi, Zhang 2011): y = sum_{m=m0}^{m0+T-1} x[m] sinc(p - m),
 *          m0 = floor(p - (T-1)/2 + 1/2), sinc(u) = sin(pi u)/(pi u), sinc(0) = 1.
 * The CFD spectrum is then x~[n] = w[n] * y[n] (window after resampling);
 * MSI and CMS always use the spectra as acquired (their masks carry the k-map). */
enum oct_klin { OCT_KLIN_OFF = 0, OCT_KLIN_LINEAR = 1, OCT_KLIN_CUBIC = 2, OCT_KLIN_SINC = 3 };
enum oct_klin_source { OCT_KLIN_POLY = 0, OCT_KLIN_FILE = 1 };
#define OCT_SINC_TAPS_MIN 2
#define OCT_SINC_TAPS_MAX 64

/* Numerical dispersion compensation of CFD (ABI 1.1), active when a2 or a3
 * is non-zero: with X = DFT(x~) (after k-linearisation and window),
 *     z = IDFT(U . X) / M,  U[k] = 1 for F <= k <= M/2, else 0   (analytic signal)
 *     theta[n] = a2 (n/M - k0)^2 + a3 (n/M - k0)^3            (radians)
 *     I_cfd[d] = |sum_n z[n] e^(-i theta[n]) e^(-2 pi i d n / M)|,  d = F..M/2
 * (0 for d < F).  With a2 = a3 = 0 this is exactly SPEC 2.2. */

/* Gray-scale classes (index of gsc/contrast/brightness). */
enum oct_class { OCT_CLASS_BSCAN = 0, OCT_CLASS_ENFACE = 1, OCT_CLASS_CONFOCAL = 2, OCT_CLASS_COUNT = 3 };

/* Products; the bit of kind k in oct_params.products is OCT_PRODUCT_BIT(k)
 * (= oct_kind_bit(k)): bit k for kinds 0..7, bit k+1 from kind 8 on (bit 8
 * is OCT_PRODUCT_F32).  Kinds 8..12 are the angiography products of SPEC
 * 10.3 (struct, median, sv, decor, ssada: bits 9..13), CFD only, made when
 * setup.repeats >= 2 for the metrics in params.angio_metrics (their product
 * bits are accepted and not needed); see angio.h. */
enum oct_kind {
    OCT_KIND_BSCAN = 0,     /* L = 1: [D][N] */
    OCT_KIND_ENFACE = 1,    /* L > 1: [Q][L][N] */
    OCT_KIND_CONFOCAL = 2,  /* L > 1: [L][N] */
    OCT_KIND_XSEC_H = 3,    /* L > 1: [D][N] of line xsec_h */
    OCT_KIND_XSEC_V = 4,    /* L > 1: [D][L] of A-scan column xsec_v */
    OCT_KIND_VOLUME = 5,    /* L > 1: [L][N][D] */
    OCT_KIND_SLAB_MEAN = 6, /* L > 1: [L][N], mean over depths [slab_start, slab_end) (SPEC 10.2) */
    OCT_KIND_SLAB_MAX = 7,  /* L > 1: [L][N], maximum over the same depths */
    OCT_KIND_STRUCT = 8,    /* R >= 2: [D][N] for one group (G = L/R = 1), else [G][N][D] */
    OCT_KIND_MEDIAN = 9,
    OCT_KIND_SV = 10,
    OCT_KIND_DECOR = 11,
    OCT_KIND_SSADA = 12,
    /* En-face angiograms (SPEC 10.2 applied to 10.3): [G][N], the mean / max
     * over depths [slab_start, slab_end) of the metric's image; made when the
     * metric is in angio_metrics and the slab_mean / slab_max product bit is
     * set (they have no bit of their own).  Topic and file names put the
     * metric where other products put the method: slab_max/ssada,
     * slab_max_ssada.png (oct_product_method_name). */
    OCT_KIND_SLAB_MEAN_SV = 13,
    OCT_KIND_SLAB_MAX_SV = 14,
    OCT_KIND_SLAB_MEAN_DECOR = 15,
    OCT_KIND_SLAB_MAX_DECOR = 16,
    OCT_KIND_SLAB_MEAN_SSADA = 17,
    OCT_KIND_SLAB_MAX_SSADA = 18,
    OCT_KIND_COUNT = 19
};
#define OCT_KIND_ANGIO_FIRST OCT_KIND_STRUCT /* kind = OCT_KIND_ANGIO_FIRST + angio metric */
#define OCT_KIND_ANGIO_LAST OCT_KIND_SSADA
#define OCT_KIND_ASLAB_FIRST OCT_KIND_SLAB_MEAN_SV /* en-face angiograms: 13..18 */
#define OCT_PRODUCT_BIT(k) ((k) < 8 ? 1u << (k) : 1u << ((k) + 1))
#define OCT_PRODUCT_F32 (1u << 8) /* also deliver float32 intensities */
#define OCT_PRODUCTS_KNOWN (0xffu | OCT_PRODUCT_F32 | 0x3e00u)

/* Names used in topics, files and profiles: "cfd", "msi"; "bscan", "enface", ... */
const char *oct_method_name(int method);
const char *oct_kind_name(int kind);
/* The second part of a product's topic and file name: the method name, or
 * for an en-face angiogram (kinds 13..18) its metric ("sv", "decor",
 * "ssada"): topic "<kind name>/<this>", file "<kind name>_<this>.png". */
const char *oct_product_method_name(int method, int kind);
/* The angiography kind (OCT_KIND_SV, _DECOR, _SSADA) an en-face angiogram
 * reduces, or -1 for other kinds. */
int oct_kind_angio_source(int kind);
const char *oct_window_name(int window);
/* Gray class of a product kind (bscan, xsec_h, xsec_v, volume -> OCT_CLASS_BSCAN;
 * slab_mean, slab_max -> OCT_CLASS_ENFACE). */
int oct_kind_class(int kind);
/* Bit of a kind in oct_params.products (0 for an unknown kind). */
uint32_t oct_kind_bit(int kind);

/* ---- live control values: a mirror of the control block (SPEC 3.2) ---- */
typedef struct oct_params {
    uint32_t methods;      /* OCT_METHOD_BIT(...) | ... */
    uint32_t window;       /* enum oct_window */
    float window_param;
    int32_t freq_cutoff;   /* F >= 0 */
    int32_t lag_lo;        /* W1 */
    int32_t lag_hi;        /* W2; -M/2 < W1 <= W2 < M/2 */
    uint32_t scale;        /* enum oct_scale */
    uint32_t background;   /* enum oct_background */
    int32_t enface_start;
    int32_t enface_step;
    int32_t enface_count;
    int32_t xsec_h;        /* line index for xsec_h, < L */
    int32_t xsec_v;        /* A-scan index for xsec_v, < N */
    float gsc[OCT_CLASS_COUNT];
    float contrast[OCT_CLASS_COUNT];
    float brightness[OCT_CLASS_COUNT];
    uint32_t products;     /* OCT_PRODUCT_BIT(...) | OCT_PRODUCT_F32 */
    /* ABI 1.1 */
    int32_t background_param; /* ROLLING: K frames; FPN: G spectra per segment */
    uint32_t klin;            /* enum oct_klin */
    int32_t klin_taps;        /* SINC: T in [OCT_SINC_TAPS_MIN, OCT_SINC_TAPS_MAX] */
    uint32_t klin_source;     /* enum oct_klin_source */
    double klin_coef[4];      /* c0..c3 of the position polynomial (samples) */
    float disp_a2, disp_a3;   /* radians */
    float disp_k0;            /* centre, as a fraction of M */
    /* ABI 1.2 (control block 296..335) */
    int32_t slab_start;       /* SPEC 10.2: d0, clamped to [0, D] */
    int32_t slab_end;         /* d1, clamped to [0, D]; INT32_MAX = D.  With slab
                               * products asked for, d1 <= d0 after clamping is
                               * rejected; the images' indices are {d0, d1}. */
    uint32_t angio_metrics;   /* SPEC 10.3: OCT_ANGIO_* bits of oct_ipc.h */
    int32_t angio_bands;      /* ssada K */
    float angio_band_width;   /* fraction of M/K */
    uint32_t angio_align;     /* 0 off, 1 axial, 2 axial + lateral */
    int32_t reg_average;      /* SPEC 10.4 live: registered volumes averaged */
    int32_t reg_stripe;       /* stripe width, B-scans */
    float reg_search_xy;      /* search window x/y, fraction of the field */
    int32_t reg_search_z;     /* search window z, pixels */
} oct_params;

/* Defaults: CFD only, hann, F = 0, lags [0, 0], linear, no background,
 * en-face start 0 step 1 count 1, xsec 0/0, gsc = contrast = 1, brightness 0,
 * products bscan|enface|confocal|xsec_h|xsec_v; background_param 16,
 * klin off, taps 21, polynomial source, coefficients 0 (set c1 = M for the
 * identity), a2 = a3 = 0, k0 = 0.5. */
void oct_params_default(oct_params *p);

/* Validates a whole set of values against a geometry and what the engine was
 * set up with (mask_count: R, 0 = no masks; have_reference).  Every rule of
 * SPEC 3.2/2 is checked; the message names the operator key (SPEC 10.1:
 * "window: tukey parameter 1.5 is outside [0, 1]", "enface.step: 0 must be
 * >= 1") and the allowed range. */
oct_err oct_params_validate(const oct_params *p, const oct_geometry *g,
                            uint32_t mask_count, bool have_reference, oct_error *e);
struct oct_setup;
/* The full check against an engine set-up: as oct_params_validate, plus CMS
 * (needs cms_count > 0), the k-linearisation positions (file source needs
 * setup->klin_positions; every position finite, increasing, in [-1, M]). */
oct_err oct_params_check(const oct_params *p, const struct oct_setup *s, oct_error *e);

/* ---- set-up: what is fixed for the life of an engine ---- */
typedef enum oct_backend { OCT_BACKEND_AUTO = 0, OCT_BACKEND_CPU = 1, OCT_BACKEND_CUDA = 2 } oct_backend;
typedef enum oct_precision { OCT_PRECISION_FP32 = 0, OCT_PRECISION_TF32 = 1 } oct_precision;
/* MSI algorithm: R inverse FFTs per spectrum, or one matrix product with a
 * matrix of shifted masks.  AUTO picks the cheaper by a cost model. */
typedef enum oct_msi_path { OCT_MSI_AUTO = 0, OCT_MSI_FFT = 1, OCT_MSI_GEMM = 2 } oct_msi_path;

/* Set-up flags */
#define OCT_SETUP_QUICK_PLAN 1u /* plan FFTs without measuring (tests, tools) */
/* CUDA, precision fp32: the MSI matrix product on the fp32 SIMT cores
 * (cublasSgemm) instead of the default split-TF32 ("3xTF32") tensor-core
 * product of the same accuracy class (relative L2 ~1e-5 vs ~1e-7); the same
 * as cuda.gemm = OCT_CUDA_GEMM_SGEMM. */
#define OCT_SETUP_PLAIN_SGEMM 2u

/* CUDA tuning (octbench flags, tests); 0 everywhere = the defaults. */
/* 3XFP16 (issue 19.4; the default, AUTO, for integer samples since it was
 * verified on an H200: relative L2 4.8e-6..6.5e-6): the MSI product as split
 * FP16 (hi/lo halves, power-of-two scales from the input's range, FP32
 * accumulation); f32 input and CMS keep 3xTF32. */
enum oct_cuda_gemm { OCT_CUDA_GEMM_AUTO = 0, OCT_CUDA_GEMM_SGEMM = 1, OCT_CUDA_GEMM_3XTF32 = 2, OCT_CUDA_GEMM_3XFP16 = 3 };
typedef struct oct_cuda_tuning {
    int gemm;              /* enum oct_cuda_gemm (precision fp32 only) */
    double gemm_chunk_mb;  /* MSI GEMM output chunk: 0 = ~3/4 of L2, < 0 = the whole frame */
    int parts;             /* intra-frame pipeline parts of a volume: 0 = auto, 1 = off, <= 8 */
    int64_t c2r_batch;     /* FFT-path MSI C2R batch (spectra x masks): 0 = ~64 MiB */
    /* the intra-frame pipeline with k-linearisation, dispersion and the
     * whole-frame (frame-mean / rolling / FPN) backgrounds: 0 = auto (the
     * CFD's parts with a deferred background correction where it applies,
     * else the background statistics per part; issue 19), 1 = only the
     * statistics per part (issue 19.3), 2 = off for them (before 19.3),
     * 3 = as 0 with the MSI's background deferred too (each part's MSI
     * GEMM on arrival, the GEMM of the correction subtracted in its sink) */
    int parts_ext;
    /* issue 19: product sink geometry, enum oct_cuda_sink (0 = tiles) */
    int sink;
    /* issue 19: MSI GEMM algorithm, enum oct_cuda_gemm_algo (0 = default) */
    int gemm_algo;
    /* angiography's ssada kernels, enum oct_angio_cuda_path (angio.h): 0 =
     * bands (cuFFT), 1 = legacy (round 5, A/B only), 2 = fused (shared-memory
     * FFT per position) */
    int angio_path;
    int64_t angio_chunk;   /* angiography chunk in spectra (whole groups): 0 = ~32 k */
    /* issue 19: the per-frame device work as a CUDA graph, enum oct_cuda_graph (0 = auto) */
    int graph;
    /* issue 19: spectra per dispersion chunk (pad, C2C, phase, C2C in one
     * batch): 0 = auto, ~1/3 of the L2 cache of complex spectra, rounded so
     * that the chunks tile an intra-frame part exactly */
    int64_t disp_chunk;
    /* issue 19: the dispersion chain, enum oct_cuda_disp (0 = auto: cuFFT) */
    int disp;
    /* issue 19: the CFD of volumes with k-lin / dispersion, enum oct_cuda_cfd (0 = auto) */
    int cfd;
} oct_cuda_tuning;
/* OCT_CUDA_SINK_TILE: the per-depth images in tiles of rows x depths over
 * the whole GPU, the MSI GEMM output of a tile copied into shared memory
 * by cp.async, where every spectrum wants every depth (B-scans, full
 * volumes) and for the gathered cross-sections; a volume's other rows (its
 * en-face depths; its cross-sections' spectra within the whole frame) one
 * warp per spectrum, reading the GEMM output directly.  OCT_CUDA_SINK_WARP:
 * one warp per spectrum, 8 per block (the geometry before issue 19, for A/B
 * runs); OCT_CUDA_SINK_TILE_REG: tiles,
 * the GEMM output staged through registers one row per warp (before
 * 2026-12-02, for A/B runs).  All three give the same bits. */
enum oct_cuda_sink { OCT_CUDA_SINK_TILE = 0, OCT_CUDA_SINK_WARP = 1, OCT_CUDA_SINK_TILE_REG = 2 };
/* OCT_CUDA_GEMM_ALGO_DEFAULT (the default): cublasGemmEx with
 * CUBLAS_GEMM_DEFAULT; OCT_CUDA_GEMM_ALGO_AUTO (opt-in): for the FP16
 * products, cublasLt's fastest heuristic candidate timed once per shape
 * (falls back to cublasGemmEx where cublasLt offers none).  On an H200
 * (2026-11-23) auto gained 0-2 % and its pick at M = 8192 doubled the MSI
 * error (3xfp16 relative L2 1.39e-5 vs 6.5e-6), so it is not the default. */
enum oct_cuda_gemm_algo { OCT_CUDA_GEMM_ALGO_DEFAULT = 0, OCT_CUDA_GEMM_ALGO_AUTO = 1 };
/* OCT_CUDA_GRAPH_AUTO (the default) = ON: a frame's device work (conversion,
 * background, CFD, MSI, CMS and their sinks on the compute and CFD streams) is
 * captured once per in-flight slot and plan (after one eager frame of that
 * plan) and re-launched as one CUDA graph, the intra-frame pipeline's parts
 * too (their copies' events as external wait nodes); frames it cannot take
 * (a rolling background, angiography) and OCT_CUDA_GRAPH_OFF launch kernel
 * by kernel, as before (A/B). */
enum oct_cuda_graph { OCT_CUDA_GRAPH_AUTO = 0, OCT_CUDA_GRAPH_OFF = 1, OCT_CUDA_GRAPH_ON = 2 };
/* OCT_CUDA_DISP_AUTO (the default) = CUFFT: the dispersion chain (pad,
 * inverse C2C, phase, forward C2C, store / sink) in cuFFT and kernel steps
 * per chunk of cuda.disp_chunk spectra.  OCT_CUDA_DISP_FUSED (opt-in): the
 * chain of a spectrum in one kernel, a thread block per spectrum with a
 * shared-memory FFT (disp_fused.cuh), where M is a power of two <= 2048 and
 * the MSI is not on the FFT path; on an H200 (2026-11-24) it moved ~8x less
 * memory but took longer than cuFFT's (volume-klin-disp: device work after
 * the copy 1.21 vs 1.05 ms), so it is not the default. */
enum oct_cuda_disp { OCT_CUDA_DISP_AUTO = 0, OCT_CUDA_DISP_CUFFT = 1, OCT_CUDA_DISP_FUSED = 2 };
/* OCT_CUDA_CFD_AUTO (the default) = GEMM where it applies: a volume whose CFD
 * products need only the en-face depths of every spectrum and all depths of
 * the cross-sections (en-face, confocal, xsec_h, xsec_v; not volume, slabs
 * or angiography), with k-linearisation or dispersion, split-FP16 MSI
 * operands (integer samples) and M <= 2048: the whole CFD chain (k-lin,
 * window, DFT, dispersion) is one linear map of x' = x - b, so the en-face
 * depths are one matrix product of x' (split FP16) with that map's rows for
 * those depths, the cross-sections one with all its rows (the map is made
 * by sending the unit spectra through the chain, once per change of its
 * values).  OCT_CUDA_CFD_FFT: the chain per spectrum (cuFFT), as before
 * (A/B); OCT_CUDA_CFD_GEMM: the product also without k-lin and dispersion. */
enum oct_cuda_cfd { OCT_CUDA_CFD_AUTO = 0, OCT_CUDA_CFD_FFT = 1, OCT_CUDA_CFD_GEMM = 2 };

typedef struct oct_setup {
    oct_geometry geom;
    const float *masks;      /* R x M raw mask spectra (copied); NULL when no MSI */
    uint32_t mask_count;     /* R */
    bool normalize_masks;    /* scale each filtered mask to unit L2 norm */
    const float *reference;  /* M floats (copied); NULL = no reference background */
    oct_backend backend;
    int device;              /* CUDA device index */
    int threads;             /* CPU threads; 0 = all cores */
    oct_precision precision;
    oct_msi_path msi_path;
    uint32_t flags;          /* OCT_SETUP_* */
    /* k-linearisation positions from a file (klin_source = FILE): M values (copied) */
    const double *klin_positions;
    /* CMS calibration (Rivet et al. 2016): K >= 2 spectra of a mirror at known
     * depths z_i (distinct, any unit); the depth grid z_r = cms_start +
     * cms_step * r, r < cms_count, is in the same unit.  Per spectrum c_i:
     * C = DFT(c_i - mean(c_i)); kp = argmax |C[k]| over 1 <= k < M/2 (first
     * maximum); a_i = IDFT(A)/M with A[k] = C[k] for max(1, floor(kp/4)) <= k
     * < M/2, else 0; phi_i = arg(a_i) unwrapped along n (a jump of more than
     * pi gets -+2 pi).  Per n, least squares over i: phi_i[n] ~ z_i g[n] + h[n].
     * Mask r: c_r[n] = exp(-i (z_r g[n] + h[n])); with P = IDFT . H . DFT (the
     * F cut-off of SPEC 2.3) and the window, q_r[n] = w[n] (P c_r)[n], and
     *     I_cms[j][r] = |sum_n x'_j[n] q_r[n]|   (x' = background-subtracted),
     * computed as one real GEMM with the stacked Re/Im rows of q.  Depths
     * d = 0..cms_count-1 are grid indices.  With a linear k (phi = 2 pi z n / M)
     * CMS equals CFD at integer depths. */
    const float *cms_cal;     /* K x M (copied); NULL = no CMS */
    uint32_t cms_cal_count;   /* K */
    const double *cms_depths; /* K depths of the calibration spectra */
    double cms_start, cms_step;
    uint32_t cms_count;       /* R of CMS; 0 = no CMS */
    oct_cuda_tuning cuda;     /* ignored by the CPU backend */
    /* SPEC 10.3: lines per B-scan position (geometry.repeats); 0 or 1 = none,
     * else 2..64 dividing geom.lines.  Angiography (kinds 8..12) is made by
     * the CPU backend; the CUDA backend refuses params.angio_metrics != 0. */
    uint32_t repeats;
} oct_setup;

void oct_setup_default(oct_setup *s);

/* Process-wide settings a program makes once at start, before it starts
 * threads or creates engines (the library itself never touches the
 * environment): on AMD family 0x1a (Zen 5) with AVX-512 it sets
 * OPENBLAS_CORETYPE=SkylakeX unless the user set it (Debian 12's OpenBLAS
 * falls back to its AVX2 kernels there; measured on a 2-core Zen 5, sgemm
 * 500x1024x10752: 55 ms -> 30 ms).  Safe to call more than once. */
void oct_engine_process_init(void);

/* ---- products: caller-owned result buffers, grown by the engine as needed ---- */
typedef struct oct_image {
    bool present;          /* produced by the last oct_engine_process() */
    int ndim;              /* 2 or 3 */
    uint32_t shape[3];     /* C order: [D][N], [Q][L][N], [L][N], [D][L], [L][N][D] */
    size_t count;          /* number of pixels */
    uint8_t *u8;           /* gray levels (SPEC 2.5), always filled when present */
    float *f32;            /* intensities; filled when params.products has OCT_PRODUCT_F32 */
    int32_t *indices;      /* en-face: the depth index of each slice; xsec: the one index */
    uint32_t n_indices;
    uint32_t requested;    /* en-face: enface_count asked for (n_indices <= requested) */
    /* private: capacities */
    size_t cap_pixels, cap_indices;
    bool fixed;            /* private: buffers owned by an engine pool, never reallocated */
} oct_image;

typedef struct oct_products {
    oct_image img[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    uint64_t frame;        /* count of frames processed into this object */
    uint64_t ticket;       /* ticket of the last frame submitted into it (oct_engine_submit) */
    bool pinned;           /* buffers are device-DMA-able host memory (oct_engine_products_create) */
    /* private: set by oct_engine_products_create(); oct_products_destroy() calls priv_free */
    void *priv;
    void (*priv_free)(struct oct_products *p);
} oct_products;

oct_products *oct_products_create(void);
void oct_products_destroy(oct_products *p);
/* Ensures img has room for `pixels` pixels (u8 and, if want_f32, f32) and
 * `indices` indices; used by backends.  Never shrinks. */
oct_err oct_image_reserve(oct_image *img, size_t pixels, bool want_f32, size_t indices);

/* ---- the engine ---- */
typedef struct oct_engine oct_engine;

/* Plans an engine.  `params` are the initial control values (validated).
 * backend AUTO takes CUDA when built in and a device is usable, else CPU. */
oct_err oct_engine_create(oct_engine **out, const oct_setup *setup,
                          const oct_params *params, oct_error *e);
void oct_engine_destroy(oct_engine *eng);

/* Validates and adopts new control values; on error the old ones stay. */
oct_err oct_engine_set_params(oct_engine *eng, const oct_params *params, oct_error *e);
const oct_params *oct_engine_params(const oct_engine *eng);
const oct_setup *oct_engine_setup(const oct_engine *eng); /* masks/reference are NULL here */

/* Processes one frame of exactly oct_geometry_frame_bytes() bytes.
 * Non-finite f32 samples are an error (OCT_EINVAL naming the spectrum). */
oct_err oct_engine_process(oct_engine *eng, const void *frame, size_t frame_bytes,
                           oct_products *out, oct_error *e);

/* While held, frames are processed with the rolling background they would
 * get as the next frame (this frame's mean with the newest K-1 of the
 * history) but do not enter the history: review mode re-processes one kept
 * frame again and again, which must not drift the background.  Applies to
 * frames processed or submitted after the call. */
void oct_engine_hold_history(oct_engine *eng, bool hold);

const char *oct_engine_backend_name(const oct_engine *eng); /* "cpu", "cuda" */
const char *oct_engine_device_name(const oct_engine *eng);  /* CPU model or GPU name */
oct_msi_path oct_engine_msi_path(const oct_engine *eng);    /* path in use (FFT or GEMM) */
/* Number of depths D of a method: M/2+1 for CFD, R for MSI, cms_count for CMS. */
uint32_t oct_engine_depths(const oct_engine *eng, int method);

/* Whether the CUDA backend was built in, and whether a device is usable
 * (the message says why not).  Initialises CUDA: never fork after calling. */
bool oct_cuda_built(void);
oct_err oct_cuda_probe(int device, char *name, size_t name_len, oct_error *e);
/* Number of CUDA devices (0 without CUDA or when none is usable).
 * Initialises CUDA: never fork after calling. */
int oct_cuda_device_count(void);
/* NUMA node of the engine's device as the kernel reports it for its PCI
 * function (/sys/bus/pci/devices/<id>/numa_node); -1 when unknown, on a
 * single-node machine, and for CPU engines. */
int oct_engine_numa_node(const oct_engine *eng);
/* PCI id of the engine's device ("0000:41:00.0", lower case, as sysfs
 * names it) into bus (>= 32 bytes), for placing the threads that drive it
 * (octd, issue 20.1).  OCT_EUNSUPPORTED for a CPU engine (no device),
 * OCT_EDEVICE when CUDA cannot tell. */
oct_err oct_engine_pci_bus_id(const oct_engine *eng, char *bus, size_t len, oct_error *e);
/* The same for CUDA device `device` before an engine exists (so that the
 * engine's own host buffers can be made on its node); initialises CUDA.
 * OCT_EUNSUPPORTED without CUDA. */
oct_err oct_cuda_pci_bus_id(int device, char *bus, size_t len, oct_error *e);

/* ---- pipelining and DMA (issue 6) --------------------------------------------
 * A frame goes through the engine in three steps that overlap across frames:
 * input copy (host -> device), compute, output copy (device -> host).
 *
 *   oct_engine_submit(eng, frame, bytes, out, e)   starts a frame; out->ticket
 *        is its ticket (1, 2, ... per engine).  Returns without waiting for
 *        the result.  OCT_EAGAIN when oct_engine_depth() frames are in flight.
 *        The caller must not touch `out` until it comes back from complete.
 *   oct_engine_input_done(eng, ticket, timeout_ms, e)   OCT_OK once the
 *        engine has finished reading the frame memory of that ticket (the
 *        caller may then re-check that its ring slot was not overwritten
 *        during the copy, and reuse or release the memory), OCT_ETIMEDOUT
 *        if not within timeout_ms (0 = just ask, < 0 = wait as long as it
 *        takes).  Frames outside registered memory are read by the CPU inside
 *        submit: done when submit returns.  Tickets already completed are done;
 *        a ticket never submitted is OCT_EINVAL.
 *   oct_engine_complete(eng, &done, timeout_ms, e)   waits for the OLDEST
 *        frame in flight; *done is the products object it was submitted with
 *        (results present as after oct_engine_process).  OCT_ETIMEDOUT: not
 *        ready within timeout_ms (nothing is dequeued); OCT_ESTATE: nothing
 *        in flight (*done = NULL).  A frame that failed (e.g. a non-finite
 *        sample) is still dequeued: *done is its object with nothing present,
 *        and the error is returned.
 * Control changes (oct_engine_set_params) while frames are in flight apply
 * to frames submitted after the call.  oct_engine_process() is submit +
 * complete and is refused (OCT_ESTATE) while frames are in flight.
 * CPU backend: depth 1, submit processes synchronously. */
#define OCT_ENGINE_DEPTH_MAX 3
oct_err oct_engine_submit(oct_engine *eng, const void *frame, size_t frame_bytes,
                          oct_products *out, oct_error *e);
oct_err oct_engine_complete(oct_engine *eng, oct_products **done, int timeout_ms, oct_error *e);
oct_err oct_engine_input_done(oct_engine *eng, uint64_t ticket, int timeout_ms, oct_error *e);
int oct_engine_inflight(const oct_engine *eng);
int oct_engine_depth(const oct_engine *eng); /* frames that can be in flight */

/* Registers host memory (e.g. the read-only mapping of the frame ring) for
 * direct DMA: frames lying wholly inside it are copied to the device without
 * a staging copy, asynchronously.  CUDA: cudaHostRegister, read-only where
 * the device supports it (cudaDevAttrHostRegisterReadOnlySupported);
 * OCT_EUNSUPPORTED when the memory cannot be registered (the caller then
 * keeps using plain submit, which stages through pinned memory).  CPU: no-op.
 * Unregister waits for the input copies in flight; unknown pointers are ignored. */
oct_err oct_engine_register_host(oct_engine *eng, const void *ptr, size_t bytes, oct_error *e);
void oct_engine_unregister_host(oct_engine *eng, const void *ptr);

/* A products object whose buffers the engine allocates once, for the largest
 * images of its geometry, in DMA-able (CUDA: pinned) host memory: the device
 * writes results straight into it (no extra host copy), and its buffers can
 * be handed to ZeroMQ zero-copy.  Never reallocated; free with
 * oct_products_destroy() (before or after the engine).  CPU: a plain object. */
oct_products *oct_engine_products_create(oct_engine *eng, oct_error *e);
/* The same, with room only for the products in `products` (OCT_PRODUCT_*
 * bits; float32 copies only with OCT_PRODUCT_F32): a volume frame's pinned
 * buffer shrinks from hundreds of MB (volume and f32 capacity) to the few MB
 * of its en-face stack and cross-sections.  A frame that asks for more than
 * the object holds fails with OCT_ESIZE: make new objects when the products
 * change. */
oct_products *oct_engine_products_create_for(oct_engine *eng, uint32_t products, oct_error *e);
/* Bytes of memory that products_create_in needs for `products` (0: none
 * of them for this geometry). */
size_t oct_engine_products_bytes(const oct_engine *eng, uint32_t products);
/* The same products object laid out in the caller's memory (64-byte
 * aligned, >= oct_engine_products_bytes): octd's image area in shared
 * memory, so that the device writes each image where local subscribers
 * read it.  CUDA: mem is registered for DMA (writable) until the object is
 * destroyed; the memory itself stays the caller's and must outlive it. */
oct_products *oct_engine_products_create_in(oct_engine *eng, uint32_t products, void *mem,
                                            size_t bytes, oct_error *e);

/* Stage timings of the last oct_engine_process(), in milliseconds (for octbench). */
typedef struct oct_stage_times {
    double h2d_ms;       /* host -> device copy of the frame (CUDA; 0 on CPU) */
    double convert_ms;   /* conversion, background, window */
    double cfd_ms;       /* CFD FFT + magnitude */
    double msi_ms;       /* MSI correlation + lag sum */
    double products_ms;  /* product assembly + gray mapping */
    double d2h_ms;       /* device -> host copy of the products (CUDA; 0 on CPU) */
    double total_ms;     /* whole oct_engine_process() call */
    double device_ms;    /* CUDA: device time without the copies (events); CPU: = total */
    double convert_bytes; /* CUDA: device memory the conversion stage read + wrote (0 on CPU) */
    double tail_ms;      /* CUDA: from the end of the input copy to the products' end on the
                          * device: the work the copy does not hide (0 on CPU) */
} oct_stage_times;
void oct_engine_stage_times(const oct_engine *eng, oct_stage_times *t);

#ifdef __cplusplus
}
#endif
#endif
