/* engine_suite.c - numeric tests of the engine against the float64 reference.
 *
 * Each case makes a random frame (and masks, reference), evaluates every
 * expected product with ref64, runs the engine on poisoned output buffers
 * and compares every product of both methods (SPEC 7).  The same tests run
 * on every backend (see engine_suite.h). */
#include "engine_suite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref64.h"
#include "testutil.h"

/* the case tables name only the fields a case sets */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* Check test functions take no argument: the backend under test. */
static oct_backend g_backend = OCT_BACKEND_CPU;
static oct_precision g_precision = OCT_PRECISION_FP32;

static double tol_f32(void) { return g_precision == OCT_PRECISION_TF32 ? TU_TOL_TF32 : TU_TOL_FP32; }

enum { GRAY_AUTO = 0, GRAY_LINEAR_CB, GRAY_LOG };

#define PRODUCTS_ALL (0xffu | OCT_PRODUCT_F32) /* every kind (slabs too) and f32 */
#define BOTH (OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI))
#define CFD_ONLY OCT_METHOD_BIT(OCT_METHOD_CFD)
#define CMS_ONLY OCT_METHOD_BIT(OCT_METHOD_CMS)
#define ALL3 OCT_METHODS_ALL
#define MSI_ONLY OCT_METHOD_BIT(OCT_METHOD_MSI)

typedef struct ecase {
    const char *name;
    uint32_t M, N, L, type, shift;
    uint32_t R;          /* masks (0: no MSI) */
    bool normalize;
    bool reference;      /* give the engine a reference background */
    uint32_t methods;    /* 0: both when R > 0, else CFD */
    uint32_t window;
    float wparam;
    int32_t F, W1, W2;
    uint32_t bg;
    int32_t es, est, ec, xh, xv; /* en-face start/step/count, xsec h/v (ec 0: 1 1 1) */
    uint32_t products;   /* 0: all kinds and f32 */
    int gray;            /* GRAY_* */
    int gain_method;     /* GRAY_AUTO/LINEAR_CB: gsc from this method's mean */
    uint64_t seed;
    /* ABI 1.1 (0 = off); methods above may include CMS when cms_R > 0 */
    int32_t bgp;         /* background_param (rolling K / fpn G) */
    uint32_t klin;       /* OCT_KLIN_* */
    int32_t taps;        /* sinc T */
    uint32_t ksrc;       /* OCT_KLIN_POLY: kpoly(); FILE: kfile() */
    float a2, a3, k0;    /* dispersion (k0 0: 0.5) */
    uint32_t cms_K, cms_R; /* CMS calibration spectra, depths */
    double cms_start, cms_step;
    bool fpn_frame;      /* a frame of segments of clearly different variance */
    int32_t slab0, slab1; /* SPEC 10.2 slab depths (slab1 0: INT32_MAX, all depths) */
} ecase;

/* clang-format off */
static const ecase numeric_cases[] = {
    /* sizes, sample types and shifts */
    {"m64_n1_u16", 64, 1, 1, OCT_SAMPLE_U16, 0, 5, false, false, 0, OCT_WINDOW_HANN, 0, 0, 0, 0, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_CFD, 11},
    {"m256_n7_i16_shift3_framemean", 256, 7, 1, OCT_SAMPLE_I16, 3, 6, true, false, 0, OCT_WINDOW_HAMMING, 0, 3, -2, 2, OCT_BG_FRAME_MEAN, 0,0,0,0,0, 0, GRAY_LINEAR_CB, OCT_METHOD_MSI, 12},
    {"m1024_n5_f32_reference_log", 1024, 5, 1, OCT_SAMPLE_F32, 0, 4, false, true, 0, OCT_WINDOW_BLACKMAN, 0, 8, -10, -4, OCT_BG_REFERENCE, 0,0,0,0,0, 0, GRAY_LOG, 0, 13},
    {"m4096_n3_u16_shift4", 4096, 3, 1, OCT_SAMPLE_U16, 4, 3, true, false, 0, OCT_WINDOW_GAUSSIAN, 0.2f, 16, -3, 5, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 14},
    {"m512_n9_i16_msi_only", 512, 9, 1, OCT_SAMPLE_I16, 0, 7, false, false, MSI_ONLY, OCT_WINDOW_HANN, 0, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 15},
    /* every window */
    {"window_rect", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_RECT, 0, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 21},
    {"window_hann", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_HANN, 0, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 22},
    {"window_hamming", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_HAMMING, 0, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 23},
    {"window_blackman", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_BLACKMAN, 0, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 24},
    {"window_gaussian_0.1", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_GAUSSIAN, 0.1f, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 25},
    {"window_gaussian_0.35", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_GAUSSIAN, 0.35f, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 26},
    {"window_tukey_0", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_TUKEY, 0.0f, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 27},
    {"window_tukey_0.3", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_TUKEY, 0.3f, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 28},
    {"window_tukey_0.5", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_TUKEY, 0.5f, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 29},
    {"window_tukey_1", 256, 3, 1, OCT_SAMPLE_U16, 2, 4, false, false, 0, OCT_WINDOW_TUKEY, 1.0f, 2, -1, 1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 30},
    /* scale and gray values */
    {"gray_linear_default", 128, 5, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, 0, 0, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_CFD, 31},
    {"gray_linear_contrast_brightness", 128, 5, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, 0, 0, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LINEAR_CB, OCT_METHOD_CFD, 32},
    {"gray_log", 128, 5, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, 0, 0, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 33},
    /* background */
    {"background_none", 128, 6, 1, OCT_SAMPLE_I16, 1, 4, false, true, 0, OCT_WINDOW_HANN, 0, 0, -1, 2, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 41},
    {"background_reference", 128, 6, 1, OCT_SAMPLE_I16, 1, 4, false, true, 0, OCT_WINDOW_HANN, 0, 0, -1, 2, OCT_BG_REFERENCE, 0,0,0,0,0, 0, GRAY_LOG, 0, 42},
    {"background_frame_mean", 128, 6, 1, OCT_SAMPLE_I16, 1, 4, false, true, 0, OCT_WINDOW_HANN, 0, 0, -1, 2, OCT_BG_FRAME_MEAN, 0,0,0,0,0, 0, GRAY_LOG, 0, 43},
    /* DC cut-off */
    {"cutoff_0", 256, 4, 1, OCT_SAMPLE_F32, 0, 5, false, false, 0, OCT_WINDOW_HANN, 0, 0, -2, 2, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_CFD, 51},
    {"cutoff_5", 256, 4, 1, OCT_SAMPLE_F32, 0, 5, false, false, 0, OCT_WINDOW_HANN, 0, 5, -2, 2, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 52},
    {"cutoff_quarter", 256, 4, 1, OCT_SAMPLE_F32, 0, 5, false, false, 0, OCT_WINDOW_HANN, 0, 64, -2, 2, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_LOG, 0, 53},
    /* lag windows */
    {"lags_0_0", 64, 3, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, 0, 0, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 61},
    {"lags_-3_-3", 64, 3, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, -3, -3, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 62},
    {"lags_-6_-1", 64, 3, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, -6, -1, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 63},
    {"lags_-4_3", 64, 3, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, -4, 3, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 64},
    {"lags_2_7", 64, 3, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, 2, 7, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 65},
    {"lags_wide_-31_31", 64, 3, 1, OCT_SAMPLE_U16, 0, 4, false, false, 0, OCT_WINDOW_HANN, 0, 1, -31, 31, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 66},
    /* mask normalisation */
    {"normalize_off", 256, 3, 1, OCT_SAMPLE_U16, 0, 6, false, false, 0, OCT_WINDOW_HAMMING, 0, 3, -2, 2, OCT_BG_FRAME_MEAN, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 71},
    {"normalize_on", 256, 3, 1, OCT_SAMPLE_U16, 0, 6, true, false, 0, OCT_WINDOW_HAMMING, 0, 3, -2, 2, OCT_BG_FRAME_MEAN, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 72},
    /* volume frames: every product, en-face counts cut at D */
    {"vol_m64_n5_l4_all", 64, 5, 4, OCT_SAMPLE_U16, 0, 6, false, false, 0, OCT_WINDOW_HANN, 0, 2, -2, 1, OCT_BG_NONE, 1, 2, 5, 2, 3, 0, GRAY_AUTO, OCT_METHOD_CFD, 81},
    {"vol_m128_n1_l3_cut_log", 128, 1, 3, OCT_SAMPLE_I16, 2, 8, true, false, 0, OCT_WINDOW_TUKEY, 0.25f, 0, -3, 0, OCT_BG_FRAME_MEAN, 2, 3, 30, 1, 0, 0, GRAY_LOG, 0, 82},
    {"vol_m256_n6_l5_u8_only", 256, 6, 5, OCT_SAMPLE_F32, 0, 5, false, true, 0, OCT_WINDOW_BLACKMAN, 0, 4, 0, 2, OCT_BG_REFERENCE, 3, 1, 3, 4, 5,
     OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_H) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_V),
     GRAY_LINEAR_CB, OCT_METHOD_MSI, 83},
    {"vol_m64_n3_l2_cfd_only", 64, 3, 2, OCT_SAMPLE_U16, 1, 0, false, false, CFD_ONLY, OCT_WINDOW_HAMMING, 0, 3, 0, 0, OCT_BG_NONE, 20, 6, 4, 1, 2, 0, GRAY_LINEAR_CB, OCT_METHOD_CFD, 84},
    {"vol_m128_n4_l3_msi_only_confocal", 128, 4, 3, OCT_SAMPLE_U16, 0, 9, false, false, MSI_ONLY, OCT_WINDOW_HANN, 0, 2, -1, 1, OCT_BG_NONE, 0, 4, 3, 2, 1,
     OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) | OCT_PRODUCT_F32, GRAY_AUTO, OCT_METHOD_MSI, 85},
};

static const ecase path_cases[] = {
    {"paths_bscan_m256", 256, 5, 1, OCT_SAMPLE_U16, 0, 8, true, false, 0, OCT_WINDOW_HANN, 0, 4, -5, 3, OCT_BG_NONE, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 91},
    {"paths_volume_m128", 128, 4, 3, OCT_SAMPLE_I16, 2, 6, false, false, 0, OCT_WINDOW_TUKEY, 0.5f, 0, -2, 2, OCT_BG_NONE, 1, 2, 4, 2, 3, 0, GRAY_LOG, 0, 92},
    {"paths_m1024_wide_lags", 1024, 3, 1, OCT_SAMPLE_F32, 0, 4, false, false, 0, OCT_WINDOW_GAUSSIAN, 0.25f, 6, -10, 10, OCT_BG_FRAME_MEAN, 0,0,0,0,0, 0, GRAY_AUTO, OCT_METHOD_MSI, 93},
};

/* ABI 1.1 options (issue 7), alone and combined with F > 0 */
#define U16 .type = OCT_SAMPLE_U16
#define I16 .type = OCT_SAMPLE_I16
#define F32 .type = OCT_SAMPLE_F32
static const ecase opt_cases[] = {
    /* fixed-pattern noise: S/G whole segments, leftovers, one short segment */
    {.name = "fpn_u16_bscan", .M = 256, .N = 16, .L = 1, U16, .window = OCT_WINDOW_HANN, .bg = OCT_BG_FPN, .bgp = 4, .fpn_frame = true, .gain_method = OCT_METHOD_CFD, .seed = 201},
    {.name = "fpn_f32_vol_leftover_F", .M = 128, .N = 7, .L = 3, F32, .R = 4, .window = OCT_WINDOW_HAMMING, .F = 3, .W1 = -1, .W2 = 1, .bg = OCT_BG_FPN, .bgp = 5, .fpn_frame = true, .es = 2, .est = 3, .ec = 4, .xh = 1, .xv = 5, .gray = GRAY_LOG, .seed = 202},
    {.name = "fpn_i16_one_segment", .M = 64, .N = 3, .L = 1, I16, .R = 3, .window = OCT_WINDOW_HANN, .bg = OCT_BG_FPN, .bgp = 8, .fpn_frame = true, .gain_method = OCT_METHOD_MSI, .seed = 203},
    /* k-linearisation (CFD), every interpolation and both position sources */
    {.name = "klin_linear_poly", .M = 256, .N = 5, .L = 1, U16, .shift = 2, .window = OCT_WINDOW_HANN, .klin = OCT_KLIN_LINEAR, .gain_method = OCT_METHOD_CFD, .seed = 211},
    {.name = "klin_linear_file_F", .M = 128, .N = 3, .L = 1, F32, .R = 3, .window = OCT_WINDOW_BLACKMAN, .F = 4, .W1 = -2, .W2 = 2, .klin = OCT_KLIN_LINEAR, .ksrc = OCT_KLIN_FILE, .gray = GRAY_LOG, .seed = 212},
    {.name = "klin_cubic_file_F_msi", .M = 512, .N = 3, .L = 1, I16, .R = 4, .window = OCT_WINDOW_HANN, .F = 6, .W1 = -1, .W2 = 1, .klin = OCT_KLIN_CUBIC, .ksrc = OCT_KLIN_FILE, .gray = GRAY_LOG, .seed = 213},
    {.name = "klin_cubic_poly", .M = 64, .N = 7, .L = 1, U16, .window = OCT_WINDOW_TUKEY, .wparam = 0.3f, .klin = OCT_KLIN_CUBIC, .gain_method = OCT_METHOD_CFD, .seed = 214},
    {.name = "klin_sinc11_m2048", .M = 2048, .N = 2, .L = 1, U16, .window = OCT_WINDOW_HANN, .klin = OCT_KLIN_SINC, .taps = 11, .gain_method = OCT_METHOD_CFD, .seed = 215},
    {.name = "klin_sinc21_file_vol_F", .M = 128, .N = 5, .L = 3, U16, .R = 3, .window = OCT_WINDOW_HANN, .F = 3, .W1 = -1, .W2 = 0, .klin = OCT_KLIN_SINC, .taps = 21, .ksrc = OCT_KLIN_FILE, .es = 1, .est = 4, .ec = 5, .xh = 2, .xv = 3, .gray = GRAY_LINEAR_CB, .gain_method = OCT_METHOD_CFD, .seed = 216},
    {.name = "klin_sinc31_poly_F", .M = 64, .N = 5, .L = 1, F32, .window = OCT_WINDOW_GAUSSIAN, .wparam = 0.2f, .F = 2, .klin = OCT_KLIN_SINC, .taps = 31, .gain_method = OCT_METHOD_CFD, .seed = 217},
    {.name = "klin_sinc2_even", .M = 128, .N = 3, .L = 1, U16, .window = OCT_WINDOW_HANN, .klin = OCT_KLIN_SINC, .taps = 2, .gain_method = OCT_METHOD_CFD, .seed = 218},
    /* dispersion (CFD) */
    {.name = "disp_only", .M = 256, .N = 5, .L = 1, U16, .window = OCT_WINDOW_HANN, .a2 = 20.0f, .a3 = -8.0f, .gain_method = OCT_METHOD_CFD, .seed = 221},
    {.name = "disp_a3_only_F_m1024", .M = 1024, .N = 3, .L = 1, I16, .shift = 1, .R = 3, .window = OCT_WINDOW_HANN, .F = 10, .W1 = -2, .W2 = 2, .a3 = 30.0f, .k0 = 0.45f, .gray = GRAY_LOG, .seed = 222},
    {.name = "disp_klin_cubic_vol_F", .M = 256, .N = 3, .L = 2, U16, .window = OCT_WINDOW_HAMMING, .F = 5, .klin = OCT_KLIN_CUBIC, .a2 = -15.0f, .a3 = 5.0f, .k0 = 0.6f, .es = 10, .est = 7, .ec = 6, .xh = 1, .xv = 2, .gray = GRAY_LOG, .seed = 223},
    /* Complex Master/Slave */
    {.name = "cms_K2", .M = 256, .N = 5, .L = 1, U16, .methods = CMS_ONLY, .window = OCT_WINDOW_HANN, .cms_K = 2, .cms_R = 20, .cms_start = 10.5, .cms_step = 1.7, .gain_method = OCT_METHOD_CMS, .seed = 231},
    {.name = "cms_K3_F_all_options", .M = 512, .N = 3, .L = 1, I16, .R = 4, .methods = ALL3, .window = OCT_WINDOW_HANN, .F = 7, .W1 = -1, .W2 = 1, .klin = OCT_KLIN_SINC, .taps = 21, .a2 = 10.0f, .cms_K = 3, .cms_R = 30, .cms_start = 20.25, .cms_step = 2.5, .gray = GRAY_LOG, .seed = 232},
    {.name = "cms_vol_all_products", .M = 128, .N = 5, .L = 3, U16, .methods = CFD_ONLY | CMS_ONLY, .window = OCT_WINDOW_BLACKMAN, .F = 2, .cms_K = 3, .cms_R = 12, .cms_start = 5.0, .cms_step = 1.3, .es = 1, .est = 2, .ec = 4, .xh = 2, .xv = 4, .gain_method = OCT_METHOD_CMS, .seed = 233},
    {.name = "cms_K2_m2048_negstep", .M = 2048, .N = 2, .L = 1, F32, .methods = CMS_ONLY, .window = OCT_WINDOW_HANN, .cms_K = 2, .cms_R = 8, .cms_start = 300.0, .cms_step = -3.5, .gain_method = OCT_METHOD_CMS, .seed = 234},
    {.name = "cms_vol_rolling_enface_only", .M = 64, .N = 4, .L = 3, U16, .methods = CMS_ONLY, .window = OCT_WINDOW_HANN, .bg = OCT_BG_ROLLING, .bgp = 4, .cms_K = 2, .cms_R = 10, .cms_start = 3, .cms_step = 2, .es = 2, .est = 3, .ec = 3,
     .products = OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) | OCT_PRODUCT_F32, .gain_method = OCT_METHOD_CMS, .seed = 235},
    /* en-face slabs (SPEC 10.2): a range inside D, one clamped at D (MSI: R = 6), one depth */
    {.name = "slab_cfd_msi_range_clamped", .M = 128, .N = 5, .L = 3, U16, .R = 6, .window = OCT_WINDOW_HANN, .F = 2, .W1 = -1, .W2 = 1, .es = 1, .est = 2, .ec = 3, .slab0 = 2, .slab1 = 30,
     .products = OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX) | OCT_PRODUCT_BIT(OCT_KIND_ENFACE) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL) | OCT_PRODUCT_F32, .gain_method = OCT_METHOD_CFD, .seed = 241},
    {.name = "slab_only_log_frame_mean", .M = 256, .N = 4, .L = 5, I16, .shift = 1, .R = 5, .window = OCT_WINDOW_BLACKMAN, .W1 = 0, .W2 = 2, .bg = OCT_BG_FRAME_MEAN, .slab0 = 4, .slab1 = 5,
     .products = OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX), .gray = GRAY_LOG, .seed = 242},
    {.name = "slab_cms_klin_xsec", .M = 128, .N = 3, .L = 4, F32, .methods = CFD_ONLY | CMS_ONLY, .window = OCT_WINDOW_HANN, .F = 1, .klin = OCT_KLIN_CUBIC, .cms_K = 3, .cms_R = 9, .cms_start = 4.0, .cms_step = 1.5, .xh = 3, .xv = 1, .slab0 = 3, .slab1 = 40,
     .products = OCT_PRODUCT_BIT(OCT_KIND_SLAB_MEAN) | OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_H) | OCT_PRODUCT_BIT(OCT_KIND_XSEC_V) | OCT_PRODUCT_F32, .gain_method = OCT_METHOD_CMS, .seed = 243},
};
/* clang-format on */

#define NCASES(a) (int)(sizeof(a) / sizeof((a)[0]))

/* ---- inputs of the ABI 1.1 options ---- */

/* Polynomial k-lin positions: non-linear, below 0 at n = 0 (edge clamping). */
static void kpoly(uint32_t M, double c[4])
{
    c[0] = -0.5, c[1] = 1.1 * M, c[2] = -0.13 * M, c[3] = 0.02 * M;
}

/* File positions: a sine-shaped, non-integer map inside [-1, M]. */
static void kfile(uint32_t M, double *pos)
{
    for (uint32_t n = 0; n < M; n++) pos[n] = n + 0.37 + 0.08 * M * sin(M_PI * n / M) * 0.9;
}

/* K mirror spectra at depths z_i (bins) with a non-linear k and a phase
 * offset: DC + envelope * cos(2 pi z kappa(n)/M + h(n)) + noise. */
static float *cms_cal_make(uint32_t M, uint32_t K, const double *z, uint64_t seed)
{
    float *c = malloc(sizeof(float) * (size_t)K * M);
    if (!c) return NULL;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    for (uint32_t i = 0; i < K; i++)
        for (uint32_t n = 0; n < M; n++) {
            double t = (double)n / M, kap = n + 0.05 * M * t * (1 - t);
            double env = exp(-0.5 * pow((t - 0.5) / 0.3, 2));
            double h = 3.0 * (t - 0.5) * (t - 0.5) + 0.4;
            c[(size_t)i * M + n] = (float)(500.0 * env + 300.0 * env * cos(2 * M_PI * z[i] * kap / M + h) +
                                           0.5 * tu_rng_normal(&rng));
        }
    return c;
}

/* A frame for the fpn background: per segment of G spectra (and per band of
 * samples) a deviation scale 4^k, so that the minimum-variance segment at
 * each n is clear in float32 as in float64. */
static void *fpn_frame_make(const oct_geometry *g, uint32_t G, uint64_t seed, size_t *bytes)
{
    uint64_t fb = oct_geometry_frame_bytes(g);
    uint8_t *buf = malloc((size_t)fb);
    if (!buf) return NULL;
    *bytes = (size_t)fb;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    const uint32_t M = g->samples;
    const size_t S = (size_t)g->ascans * g->lines;
    size_t nseg = S < G ? 1 : S / G;
    for (size_t j = 0; j < S; j++) {
        size_t sg = S < G ? 0 : j / G;
        for (uint32_t n = 0; n < M; n++) {
            uint32_t band = (uint32_t)((uint64_t)n * 3 / M);
            double scale = pow(4.0, (double)((sg + band) % nseg));
            double v = 1500.0 + 400.0 * sin(0.05 * n) + scale * (4.0 * tu_rng_normal(&rng) +
                       6.0 * cos(2 * M_PI * (0.1 + 0.3 * tu_rng_uniform(&rng)) * n));
            size_t i = j * M + n;
            if (g->sample_type == OCT_SAMPLE_F32) {
                float f = (float)v;
                memcpy(buf + 4 * i, &f, 4);
            } else {
                double q = floor(v < 0 ? 0 : v > 65535 ? 65535 : v);
                uint16_t u = (uint16_t)q;
                if (g->sample_type == OCT_SAMPLE_I16) {
                    int16_t si = (int16_t)(q - 2000.0);
                    memcpy(buf + 2 * i, &si, 2);
                } else {
                    memcpy(buf + 2 * i, &u, 2);
                }
            }
        }
    }
    return buf;
}

/* ---- fixture: inputs, set-up, params and the expected products ---- */
typedef struct fixture {
    const ecase *c;
    oct_setup setup;
    oct_params params;
    void *frame;
    size_t bytes;
    float *masks, *reference, *cms_cal;
    double *kpos, *cms_depths;
    ref64 *ref;
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    ref64_image exp[OCT_METHOD_COUNT][OCT_KIND_COUNT];
} fixture;

static void expect_free(fixture *fx)
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) ref64_image_free(&fx->exp[m][k]);
}

/* (Re)builds the reference for fx->params on fx->frame, then every expected image. */
static void expect_build(fixture *fx)
{
    expect_free(fx);
    ref64_destroy(fx->ref);
    fx->ref = NULL;
    ck_assert_msg(ref64_create(&fx->ref, &fx->setup, &fx->params, fx->frame) == 0,
                  "%s: ref64_create failed", fx->c->name);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            fx->want[m][k] = ref64_product_wanted(&fx->setup.geom, &fx->params, m, k);
            if (fx->want[m][k])
                ck_assert_msg(ref64_product(fx->ref, m, k, &fx->exp[m][k]) == 0,
                              "%s: ref64_product failed", fx->c->name);
        }
}

/* Re-maps the expected gray after a change of gray values only. */
static void expect_regray(fixture *fx)
{
    ref64_set_display(fx->ref, &fx->params);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            if (fx->want[m][k]) ref64_image_regray(fx->ref, k, &fx->exp[m][k]);
}

/* Mean intensity (linear) or mean dB of T(gsc*I) > 0 pixels of class c. */
static double class_mean(const fixture *fx, int c, int method, bool db, double gsc)
{
    double s = 0.0;
    size_t n = 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        if (method >= 0 && m != method) continue;
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            if (!fx->want[m][k] || ref64_kind_class(k) != c) continue;
            const ref64_image *im = &fx->exp[m][k];
            for (size_t i = 0; i < im->count; i++) {
                if (!(im->I[i] > 0.0)) continue;
                s += db ? 20.0 * log10(gsc * im->I[i]) : im->I[i];
                n++;
            }
        }
    }
    return n ? s / (double)n : NAN;
}

/* Gray values that put most pixels inside 0..255, so that gray is tested. */
static void choose_gray(fixture *fx)
{
    oct_params *p = &fx->params;
    const ecase *c = fx->c;
    static const float cb_contrast[3] = {1.7f, 0.8f, 2.5f}, cb_bright[3] = {-20.f, 15.f, 40.f};
    static const float log_gsc[3] = {0.37f, 2.5f, 0.05f}, log_contrast[3] = {2.0f, 3.0f, 1.5f};
    int gm = c->gain_method;
    if (!(p->methods & OCT_METHOD_BIT(gm))) gm = 1 - gm;
    for (int k = 0; k < OCT_CLASS_COUNT; k++) {
        if (c->gray == GRAY_LOG) {
            p->scale = OCT_SCALE_LOG;
            p->gsc[k] = log_gsc[k];
            /* centre between the two methods' mean dB (their levels differ by
             * tens of dB) and narrow the contrast so that both fit in 0..255 */
            double m0 = class_mean(fx, k, OCT_METHOD_CFD, true, (double)log_gsc[k]);
            double m1 = class_mean(fx, k, OCT_METHOD_MSI, true, (double)log_gsc[k]);
            double mid = isfinite(m0) ? (isfinite(m1) ? 0.5 * (m0 + m1) : m0) : m1;
            double spread = isfinite(m0) && isfinite(m1) ? fabs(m0 - m1) : 0.0;
            double con = fmin((double)log_contrast[k], 150.0 / (spread + 40.0));
            p->contrast[k] = (float)con;
            p->brightness[k] = isfinite(mid) ? (float)(128.0 - con * mid) : 0.0f;
        } else {
            p->scale = OCT_SCALE_LINEAR;
            p->contrast[k] = c->gray == GRAY_LINEAR_CB ? cb_contrast[k] : 1.0f;
            p->brightness[k] = c->gray == GRAY_LINEAR_CB ? cb_bright[k] : 0.0f;
            double mean = class_mean(fx, k, gm, false, 1.0);
            p->gsc[k] = isfinite(mean) && mean > 0.0 ? (float)(110.0 / (mean * p->contrast[k])) : 1.0f;
        }
    }
    expect_regray(fx);
}

static void fixture_init(fixture *fx, const ecase *c, oct_msi_path path)
{
    memset(fx, 0, sizeof(*fx));
    fx->c = c;
    oct_setup *s = &fx->setup;
    oct_setup_default(s);
    s->geom.samples = c->M;
    s->geom.ascans = c->N;
    s->geom.lines = c->L;
    s->geom.sample_type = c->type;
    s->geom.sample_shift = c->shift;
    s->backend = g_backend;
    s->precision = g_precision;
    s->msi_path = path;
    s->flags |= OCT_SETUP_QUICK_PLAN;
    s->normalize_masks = c->normalize;
    fx->frame = tu_frame_random(&s->geom, c->seed, &fx->bytes);
    ck_assert_msg(fx->frame != NULL, "%s: no frame", c->name);
    if (c->R) {
        fx->masks = tu_masks_random(c->M, c->R, c->seed + 1000);
        ck_assert_ptr_nonnull(fx->masks);
        s->masks = fx->masks;
        s->mask_count = c->R;
    }
    if (c->reference) {
        fx->reference = tu_reference_random(&s->geom, c->seed + 2000);
        ck_assert_ptr_nonnull(fx->reference);
        s->reference = fx->reference;
    }
    if (c->fpn_frame) {
        free(fx->frame);
        fx->frame = fpn_frame_make(&s->geom, (uint32_t)c->bgp, c->seed, &fx->bytes);
        ck_assert_ptr_nonnull(fx->frame);
    }
    if (c->ksrc == OCT_KLIN_FILE) {
        fx->kpos = malloc(sizeof(double) * c->M);
        ck_assert_ptr_nonnull(fx->kpos);
        kfile(c->M, fx->kpos);
        s->klin_positions = fx->kpos;
    }
    if (c->cms_R) {
        fx->cms_depths = malloc(sizeof(double) * c->cms_K);
        ck_assert_ptr_nonnull(fx->cms_depths);
        for (uint32_t i = 0; i < c->cms_K; i++) fx->cms_depths[i] = c->M * (0.09 + 0.11 * i) + 0.3 * i;
        fx->cms_cal = cms_cal_make(c->M, c->cms_K, fx->cms_depths, c->seed + 3000);
        ck_assert_ptr_nonnull(fx->cms_cal);
        s->cms_cal = fx->cms_cal;
        s->cms_cal_count = c->cms_K;
        s->cms_depths = fx->cms_depths;
        s->cms_start = c->cms_start;
        s->cms_step = c->cms_step;
        s->cms_count = c->cms_R;
    }
    oct_params *p = &fx->params;
    oct_params_default(p);
    p->methods = c->methods ? c->methods : (c->R ? BOTH : CFD_ONLY);
    p->window = c->window;
    p->window_param = c->wparam;
    p->freq_cutoff = c->F;
    p->lag_lo = c->W1;
    p->lag_hi = c->W2;
    p->background = c->bg;
    if (c->ec) {
        p->enface_start = c->es;
        p->enface_step = c->est;
        p->enface_count = c->ec;
    }
    p->xsec_h = c->xh;
    p->xsec_v = c->xv;
    if (c->bgp) p->background_param = c->bgp;
    p->klin = c->klin;
    if (c->taps) p->klin_taps = c->taps;
    p->klin_source = c->ksrc;
    kpoly(c->M, p->klin_coef);
    p->disp_a2 = c->a2;
    p->disp_a3 = c->a3;
    if (c->k0 != 0.0f) p->disp_k0 = c->k0;
    p->slab_start = c->slab0;
    p->slab_end = c->slab1 ? c->slab1 : INT32_MAX;
    /* all kinds are asked for: the engine must make only those of the frame type */
    p->products = c->products ? c->products : PRODUCTS_ALL;
    expect_build(fx);
    choose_gray(fx);
}

static void fixture_free(fixture *fx)
{
    expect_free(fx);
    ref64_destroy(fx->ref);
    free(fx->frame);
    free(fx->masks);
    free(fx->reference);
    free(fx->cms_cal);
    free(fx->kpos);
    free(fx->cms_depths);
    memset(fx, 0, sizeof(*fx));
}

static oct_engine *engine_new(const fixture *fx, const oct_params *p)
{
    oct_engine *eng = NULL;
    oct_error e = {{0}};
    oct_err err = oct_engine_create(&eng, &fx->setup, p, &e);
    ck_assert_msg(err == OCT_OK, "%s: oct_engine_create: %s: %s", fx->c->name, oct_strerror(err), e.msg);
    ck_assert_ptr_nonnull(eng);
    return eng;
}

/* Poisons every expected image of out (and marks the others present, so
 * that the engine must clear them), then processes fx->frame. */
static void engine_run(const fixture *fx, oct_engine *eng, oct_products *out)
{
    bool f32 = (fx->params.products & OCT_PRODUCT_F32) != 0;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            if (fx->want[m][k]) {
                const ref64_image *x = &fx->exp[m][k];
                oct_err err = tu_poison_image(img, x->count, f32, x->n_indices, x->gray);
                ck_assert_msg(err == OCT_OK, "%s: oct_image_reserve: %s", fx->c->name, oct_strerror(err));
            } else {
                img->present = true;
            }
        }
    oct_error e = {{0}};
    oct_err err = oct_engine_process(eng, fx->frame, fx->bytes, out, &e);
    ck_assert_msg(err == OCT_OK, "%s: oct_engine_process: %s: %s", fx->c->name, oct_strerror(err), e.msg);
}

/* Compares every product of out with the reference (SPEC 7). */
static void check_products(const fixture *fx, const oct_products *out, const char *label)
{
    char what[160], msg[1024];
    const oct_params *p = &fx->params;
    const double tol = tol_f32();
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            const oct_image *img = &out->img[m][k];
            const ref64_image *x = &fx->exp[m][k];
            snprintf(what, sizeof(what), "[%s%s%s] %s/%s", fx->c->name, label ? " " : "", label ? label : "",
                     oct_kind_name(k), oct_method_name(m));
            ck_assert_msg(img->present == fx->want[m][k], "%s: present = %d, expected %d", what,
                          (int)img->present, (int)fx->want[m][k]);
            if (!fx->want[m][k]) continue;
            ck_assert_msg(img->ndim == x->ndim, "%s: ndim %d, expected %d", what, img->ndim, x->ndim);
            for (int d = 0; d < x->ndim; d++)
                ck_assert_msg(img->shape[d] == x->shape[d], "%s: shape[%d] = %u, expected %u", what, d,
                              img->shape[d], x->shape[d]);
            ck_assert_msg(img->count == x->count, "%s: count %zu, expected %zu", what, img->count, x->count);
            if (k == OCT_KIND_ENFACE || k == OCT_KIND_XSEC_H || k == OCT_KIND_XSEC_V) {
                ck_assert_msg(img->n_indices == x->n_indices, "%s: %u indices, expected %u", what,
                              img->n_indices, x->n_indices);
                for (uint32_t q = 0; q < x->n_indices; q++)
                    ck_assert_msg(img->indices[q] == x->indices[q], "%s: index %u = %d, expected %d", what, q,
                                  img->indices[q], x->indices[q]);
            }
            if (k == OCT_KIND_ENFACE)
                ck_assert_msg(img->requested == x->requested, "%s: requested %u, expected %u", what,
                              img->requested, x->requested);
            if (x->count == 0) continue;
            int c = ref64_kind_class(k);
            double slack = g_precision == OCT_PRECISION_TF32 ? 3.0 * tol * tu_rms(x->I, x->count) : 0.0;
            bool ok = tu_check_gray(what, img->u8, x->I, x->count, x->ndim, x->shape, p->scale,
                                    (double)p->gsc[c], (double)p->contrast[c], (double)p->brightness[c],
                                    TU_GRAY_MARGIN, slack, msg, sizeof(msg));
            ck_assert_msg(ok, "%s", msg);
            if (p->products & OCT_PRODUCT_F32) {
                ck_assert_msg(img->f32 != NULL, "%s: no f32 buffer", what);
                ok = tu_check_f32(what, img->f32, x->I, x->count, x->ndim, x->shape, tol, msg, sizeof(msg));
                ck_assert_msg(ok, "%s", msg);
            }
        }
}

/* Two engine outputs of the same input agree (rel. L2 tol, gray within one). */
static void check_pair(const fixture *fx, const oct_products *a, const oct_products *b, double tol,
                       bool exact, const char *label)
{
    char what[160], msg[1024];
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            if (!fx->want[m][k]) continue;
            const oct_image *x = &a->img[m][k], *y = &b->img[m][k];
            snprintf(what, sizeof(what), "[%s %s] %s/%s", fx->c->name, label, oct_kind_name(k), oct_method_name(m));
            ck_assert_msg(x->present && y->present && x->count == y->count, "%s: present %d/%d count %zu/%zu",
                          what, (int)x->present, (int)y->present, x->count, y->count);
            if (x->count == 0) continue;
            bool f32 = (fx->params.products & OCT_PRODUCT_F32) != 0;
            if (exact) {
                for (size_t i = 0; i < x->count; i++) {
                    char at[64];
                    tu_format_index(at, sizeof(at), i, x->ndim, x->shape);
                    ck_assert_msg(x->u8[i] == y->u8[i], "%s: gray %s differs: %d vs %d", what, at, x->u8[i],
                                  y->u8[i]);
                    if (f32)
                        ck_assert_msg(memcmp(&x->f32[i], &y->f32[i], sizeof(float)) == 0,
                                      "%s: f32 %s differs: %.9g vs %.9g", what, at, (double)x->f32[i],
                                      (double)y->f32[i]);
                }
                continue;
            }
            ck_assert_msg(tu_check_gray_pair(what, x->u8, y->u8, x->count, x->ndim, x->shape, msg, sizeof(msg)),
                          "%s", msg);
            if (f32)
                ck_assert_msg(tu_check_f32_pair(what, x->f32, y->f32, x->count, x->ndim, x->shape, tol, msg,
                                                sizeof(msg)),
                              "%s", msg);
        }
}

/* ---- tests ---- */

/* Every case of the table against the reference (AUTO MSI path). */
START_TEST(test_numeric)
{
    fixture fx;
    fixture_init(&fx, &numeric_cases[_i], OCT_MSI_AUTO);
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    engine_run(&fx, eng, out);
    check_products(&fx, out, NULL);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* Forced FFT, forced GEMM and AUTO each match the reference, and FFT == GEMM. */
START_TEST(test_msi_paths)
{
    static const oct_msi_path paths[3] = {OCT_MSI_FFT, OCT_MSI_GEMM, OCT_MSI_AUTO};
    static const char *names[3] = {"fft", "gemm", "auto"};
    fixture fx;
    fixture_init(&fx, &path_cases[_i], OCT_MSI_AUTO);
    oct_products *out[3];
    for (int i = 0; i < 3; i++) {
        fx.setup.msi_path = paths[i];
        oct_engine *eng = engine_new(&fx, &fx.params);
        oct_msi_path used = oct_engine_msi_path(eng);
        if (paths[i] == OCT_MSI_AUTO)
            ck_assert_msg(used == OCT_MSI_FFT || used == OCT_MSI_GEMM, "%s: auto path in use is %d",
                          fx.c->name, (int)used);
        else
            ck_assert_msg(used == paths[i], "%s: forced %s, engine uses %d", fx.c->name, names[i], (int)used);
        out[i] = oct_products_create();
        ck_assert_ptr_nonnull(out[i]);
        engine_run(&fx, eng, out[i]);
        check_products(&fx, out[i], names[i]);
        oct_engine_destroy(eng);
    }
    check_pair(&fx, out[0], out[1], tol_f32(), false, "fft vs gemm");
    for (int i = 0; i < 3; i++) oct_products_destroy(out[i]);
    fixture_free(&fx);
}
END_TEST

/* One engine through a sequence of control changes: after each
 * oct_engine_set_params() its output matches the reference and a fresh
 * engine made with the same values. */
static const ecase setparams_case = {
    "set_params", 128, 5, 3, OCT_SAMPLE_U16, 1, 6, false, true, 0, OCT_WINDOW_HANN, 0, 0, 0, 0, OCT_BG_NONE,
    1, 2, 4, 1, 2, 0, GRAY_AUTO, OCT_METHOD_CFD, 101};

static void change_params(oct_params *p, int step)
{
    switch (step) {
    case 0: p->window = OCT_WINDOW_TUKEY; p->window_param = 0.4f; break;
    case 1: p->freq_cutoff = 6; break;
    case 2: p->lag_lo = -3; p->lag_hi = 2; break;
    case 3: p->background = OCT_BG_FRAME_MEAN; break;
    case 4: p->background = OCT_BG_REFERENCE; p->window = OCT_WINDOW_GAUSSIAN; p->window_param = 0.15f; break;
    case 5: p->enface_start = 3; p->enface_step = 5; p->enface_count = 9; break; /* MSI cut to 1 */
    case 6: p->xsec_h = 2; p->xsec_v = 4; break;
    case 7: p->products &= ~(uint32_t)(OCT_PRODUCT_F32 | OCT_PRODUCT_BIT(OCT_KIND_VOLUME)); break;
    case 8: p->methods = OCT_METHOD_BIT(OCT_METHOD_MSI); p->products = PRODUCTS_ALL; break;
    case 9: p->methods = BOTH; p->freq_cutoff = 0; p->lag_lo = -5; p->lag_hi = -5; break;
    case 10: p->slab_start = 2; p->slab_end = 7; break; /* slabs: MSI clamped to [2, 6) */
    case 11: p->products = OCT_PRODUCT_BIT(OCT_KIND_SLAB_MAX) | OCT_PRODUCT_BIT(OCT_KIND_CONFOCAL); p->slab_start = 5; p->slab_end = 6; break;
    }
}
#define SET_PARAMS_STEPS 12

START_TEST(test_set_params)
{
    fixture fx;
    fixture_init(&fx, &setparams_case, OCT_MSI_AUTO);
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create(), *fresh_out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(fresh_out);
    engine_run(&fx, eng, out);
    check_products(&fx, out, "initial");
    char label[64];
    for (int step = 0; step < SET_PARAMS_STEPS; step++) {
        snprintf(label, sizeof(label), "after change %d", step);
        change_params(&fx.params, step);
        expect_build(&fx);
        /* alternate the gray values too, so that gray changes are covered */
        ecase gc = *fx.c;
        gc.gray = step % 2 ? GRAY_LOG : (step % 4 == 2 ? GRAY_LINEAR_CB : GRAY_AUTO);
        const ecase *orig = fx.c;
        fx.c = &gc;
        choose_gray(&fx);
        fx.c = orig;
        oct_error e = {{0}};
        oct_err err = oct_engine_set_params(eng, &fx.params, &e);
        ck_assert_msg(err == OCT_OK, "%s: set_params: %s: %s", label, oct_strerror(err), e.msg);
        engine_run(&fx, eng, out);
        check_products(&fx, out, label);
        oct_engine *fresh = engine_new(&fx, &fx.params);
        engine_run(&fx, fresh, fresh_out);
        oct_engine_destroy(fresh);
        snprintf(label, sizeof(label), "set_params vs fresh engine, change %d", step);
        check_pair(&fx, out, fresh_out, 1e-6, false, label);
    }
    oct_products_destroy(out);
    oct_products_destroy(fresh_out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* Processing a frame, another frame, then the first again on one engine gives
 * bit-identical output (no state carried between frames), for B-scan and
 * volume frames. */
static const ecase repeat_cases[] = {
    {"repeat_bscan", 256, 5, 1, OCT_SAMPLE_I16, 1, 5, true, false, 0, OCT_WINDOW_HAMMING, 0, 2, -2, 2,
     OCT_BG_FRAME_MEAN, 0, 0, 0, 0, 0, 0, GRAY_LOG, 0, 111},
    {"repeat_volume", 64, 4, 3, OCT_SAMPLE_U16, 0, 5, false, false, 0, OCT_WINDOW_HANN, 0, 1, -1, 1,
     OCT_BG_FRAME_MEAN, 2, 3, 6, 2, 1, 0, GRAY_AUTO, OCT_METHOD_CFD, 112},
};

START_TEST(test_repeat)
{
    fixture fx;
    fixture_init(&fx, &repeat_cases[_i], OCT_MSI_AUTO);
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *first = oct_products_create(), *again = oct_products_create();
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_nonnull(again);
    engine_run(&fx, eng, first);
    check_products(&fx, first, "first");

    /* another frame in between, into the same products object */
    void *frame_a = fx.frame;
    size_t bytes = 0;
    fx.frame = tu_frame_random(&fx.setup.geom, fx.c->seed + 77, &bytes);
    ck_assert_ptr_nonnull(fx.frame);
    expect_build(&fx); /* same gray values, new frame */
    engine_run(&fx, eng, again);
    check_products(&fx, again, "second frame");
    free(fx.frame);
    fx.frame = frame_a;
    expect_build(&fx);

    engine_run(&fx, eng, again);
    check_products(&fx, again, "first frame again");
    check_pair(&fx, first, again, 0.0, true, "same frame twice");
    ck_assert_msg(again->frame == first->frame + 1, "products.frame: %llu after two frames, %llu after one",
                  (unsigned long long)again->frame, (unsigned long long)first->frame);
    oct_products_destroy(first);
    oct_products_destroy(again);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* Bad frames and bad control values give errors, never a crash, and leave
 * the engine working with its previous values. */
START_TEST(test_bad_input)
{
    static const ecase c = {"bad_input", 64, 3, 1, OCT_SAMPLE_F32, 0, 3, false, false, 0, OCT_WINDOW_HANN, 0, 1,
                            -1, 1, OCT_BG_NONE, 0, 0, 0, 0, 0, 0, GRAY_AUTO, OCT_METHOD_CFD, 121};
    fixture fx;
    fixture_init(&fx, &c, OCT_MSI_AUTO);
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    oct_error e = {{0}};

    /* wrong sizes */
    oct_err err = oct_engine_process(eng, fx.frame, fx.bytes - 4, out, &e);
    ck_assert_msg(err != OCT_OK, "short frame accepted");
    err = oct_engine_process(eng, fx.frame, fx.bytes + 4, out, &e);
    ck_assert_msg(err != OCT_OK, "long frame accepted");

    /* a non-finite sample in spectrum 1 */
    float *bad = malloc(fx.bytes);
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, fx.frame, fx.bytes);
    bad[fx.c->M + 17] = NAN;
    e.msg[0] = 0;
    err = oct_engine_process(eng, bad, fx.bytes, out, &e);
    ck_assert_msg(err == OCT_EINVAL, "NaN sample: %s (%s), expected EINVAL", oct_strerror(err), e.msg);
    ck_assert_msg(e.msg[0] != 0, "NaN sample: no error message");
    bad[fx.c->M + 17] = INFINITY;
    err = oct_engine_process(eng, bad, fx.bytes, out, &e);
    ck_assert_msg(err == OCT_EINVAL, "Inf sample: %s (%s), expected EINVAL", oct_strerror(err), e.msg);
    free(bad);

    /* invalid control values are refused and the old ones stay */
    const oct_params before = *oct_engine_params(eng);
    oct_params p;
    for (int t = 0; t < 7; t++) {
        p = fx.params;
        switch (t) {
        case 0: p.lag_lo = 2; p.lag_hi = 1; break;
        case 1: p.lag_hi = 32; break; /* must be < M/2 */
        case 2: p.lag_lo = -32; break;
        case 3: p.freq_cutoff = -1; break;
        case 4: p.window = 99; break;
        case 5: p.background = OCT_BG_REFERENCE; break; /* no reference was given */
        case 6: p.gsc[0] = NAN; break;
        }
        err = oct_engine_set_params(eng, &p, &e);
        ck_assert_msg(err != OCT_OK, "bad params %d accepted", t);
        ck_assert_msg(memcmp(oct_engine_params(eng), &before, sizeof(before)) == 0,
                      "bad params %d changed the engine's values", t);
    }
    /* still computes the right thing */
    engine_run(&fx, eng, out);
    check_products(&fx, out, "after errors");
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* Every ABI 1.1 option case against the reference. */
START_TEST(test_options)
{
    fixture fx;
    fixture_init(&fx, &opt_cases[_i], OCT_MSI_AUTO);
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    engine_run(&fx, eng, out);
    check_products(&fx, out, NULL);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* n random frames of the fixture's geometry, seeds seed0 + i * step. */
static void random_frames(const fixture *fx, void **frames, int n, uint64_t seed0, uint64_t step)
{
    size_t bytes;
    for (int i = 0; i < n; i++) {
        frames[i] = tu_frame_random(&fx->setup.geom, seed0 + (uint64_t)i * step, &bytes);
        ck_assert_ptr_nonnull(frames[i]);
    }
}

/* The expected products for the frames processed since the rolling history
 * (re)started, the last one being the frame evaluated. */
static void expect_seq(fixture *fx, const void *const *seq, size_t n)
{
    expect_free(fx);
    ref64_destroy(fx->ref);
    ck_assert(ref64_create_seq(&fx->ref, &fx->setup, &fx->params, seq, n) == 0);
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            if (fx->want[m][k]) ck_assert(ref64_product(fx->ref, m, k, &fx->exp[m][k]) == 0);
    expect_regray(fx);
}

/* Rolling background over a sequence of frames: the reference sees the
 * frames since the history (re)started; K changes mid-sequence (restart),
 * a change of something else keeps the history. */
START_TEST(test_rolling)
{
    static const ecase c = {.name = "rolling", .M = 128, .N = 4, .L = 2, .type = OCT_SAMPLE_U16, .R = 3,
                            .window = OCT_WINDOW_HANN, .F = 2, .W1 = -1, .W2 = 1, .bg = OCT_BG_ROLLING, .bgp = 3,
                            .cms_K = 2, .cms_R = 6, .cms_start = 8, .cms_step = 3, .methods = ALL3,
                            .es = 1, .est = 5, .ec = 3, .xh = 1, .xv = 2, .gray = GRAY_LOG, .seed = 301};
    enum { NF = 11 };
    fixture fx;
    fixture_init(&fx, &c, OCT_MSI_AUTO);
    void *frames[NF];
    random_frames(&fx, frames, NF, 400, 13);
    void *frame0 = fx.frame;
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    int since = 0; /* first frame of the current history */
    char label[64];
    for (int i = 0; i < NF; i++) {
        bool set = true;
        switch (i) {
        case 4: fx.params.background_param = 2; since = i; break;      /* K: restart */
        case 6: fx.params.window = OCT_WINDOW_HAMMING; break;           /* history stays */
        case 8: fx.params.background = OCT_BG_FRAME_MEAN; since = i; break;
        case 9: fx.params.background = OCT_BG_ROLLING; since = i; break; /* same K: restart */
        default: set = false; break;
        }
        if (set) {
            oct_error e = {{0}};
            ck_assert_msg(oct_engine_set_params(eng, &fx.params, &e) == OCT_OK, "set_params: %s", e.msg);
        }
        fx.frame = frames[i];
        expect_seq(&fx, (const void *const *)&frames[since], (size_t)(i - since + 1));
        engine_run(&fx, eng, out);
        snprintf(label, sizeof(label), "frame %d (history from %d)", i, since);
        check_products(&fx, out, label);
    }
    fx.frame = frame0;
    for (int i = 0; i < NF; i++) free(frames[i]);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* Review mode holds the rolling history: held frames get the background
 * they would get as the next frame, repeatably, and never enter it. */
START_TEST(test_rolling_hold)
{
    static const ecase c = {.name = "rolling_hold", .M = 128, .N = 4, .L = 2, .type = OCT_SAMPLE_U16, .R = 3,
                            .window = OCT_WINDOW_HANN, .F = 2, .W1 = -1, .W2 = 1, .bg = OCT_BG_ROLLING, .bgp = 3,
                            .methods = OCT_METHOD_BIT(OCT_METHOD_CFD) | OCT_METHOD_BIT(OCT_METHOD_MSI),
                            .es = 1, .est = 5, .ec = 3, .xh = 1, .xv = 2, .gray = GRAY_AUTO, .seed = 307};
    enum { NF = 7 };
    fixture fx;
    fixture_init(&fx, &c, OCT_MSI_AUTO);
    void *frames[NF];
    random_frames(&fx, frames, NF, 700, 17);
    void *frame0 = fx.frame;
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    /* frame processed, held?, the history the reference sees (frame indices, last = this one) */
    static const struct { int frame; bool hold; int seq[4]; int n; } steps[] = {
        {0, false, {0}, 1},          {1, false, {0, 1}, 2},
        {2, true, {0, 1, 2}, 3},     {2, true, {0, 1, 2}, 3},  /* the same kept frame again */
        {3, true, {0, 1, 3}, 3},     {4, false, {0, 1, 4}, 3}, /* 2 and 3 never entered */
        {5, false, {1, 4, 5}, 3},    {5, true, {4, 5, 5}, 3},  /* full ring: the oldest is left out */
        {6, false, {4, 5, 6}, 3},
    };
    char label[64];
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        oct_engine_hold_history(eng, steps[i].hold);
        fx.frame = frames[steps[i].frame];
        const void *seq[4];
        for (int k = 0; k < steps[i].n; k++) seq[k] = frames[steps[i].seq[k]];
        expect_seq(&fx, seq, (size_t)steps[i].n);
        engine_run(&fx, eng, out);
        snprintf(label, sizeof(label), "step %zu: frame %d%s", i, steps[i].frame, steps[i].hold ? " (held)" : "");
        check_products(&fx, out, label);
    }
    fx.frame = frame0;
    for (int i = 0; i < NF; i++) free(frames[i]);
    oct_products_destroy(out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* One engine through changes of the ABI 1.1 values; after each it matches
 * the reference and a fresh engine. */
START_TEST(test_set_params_options)
{
    static const ecase c = {.name = "set_params_options", .M = 128, .N = 3, .L = 2, .type = OCT_SAMPLE_I16, .R = 3,
                            .window = OCT_WINDOW_HANN, .W1 = -1, .W2 = 1, .cms_K = 3, .cms_R = 9, .cms_start = 12.5,
                            .cms_step = 1.5, .methods = ALL3, .es = 2, .est = 3, .ec = 3, .ksrc = OCT_KLIN_FILE,
                            .gray = GRAY_AUTO, .gain_method = OCT_METHOD_CFD, .seed = 311};
    fixture fx;
    fixture_init(&fx, &c, OCT_MSI_AUTO);
    oct_engine *eng = engine_new(&fx, &fx.params);
    oct_products *out = oct_products_create(), *fresh_out = oct_products_create();
    char label[64];
    for (int step = 0; step < 9; step++) {
        oct_params *p = &fx.params;
        switch (step) {
        case 0: p->klin = OCT_KLIN_CUBIC; break;
        case 1: p->klin = OCT_KLIN_SINC; p->klin_taps = 11; break;
        case 2: p->klin_source = OCT_KLIN_POLY; p->disp_a2 = 12.0f; break;
        case 3: p->disp_a3 = -6.0f; p->disp_k0 = 0.3f; p->freq_cutoff = 4; break; /* + CMS masks */
        case 4: p->window = OCT_WINDOW_BLACKMAN; break;
        case 5: p->background = OCT_BG_FPN; p->background_param = 2; break;
        case 6: p->disp_a2 = p->disp_a3 = 0.0f; p->klin = OCT_KLIN_OFF; break;
        case 7: p->methods = CMS_ONLY; p->enface_start = 0; break;
        case 8: p->methods = ALL3; p->klin = OCT_KLIN_LINEAR; p->background = OCT_BG_FRAME_MEAN; break;
        }
        expect_build(&fx);
        choose_gray(&fx);
        oct_error e = {{0}};
        ck_assert_msg(oct_engine_set_params(eng, &fx.params, &e) == OCT_OK, "step %d: %s", step, e.msg);
        snprintf(label, sizeof(label), "after change %d", step);
        engine_run(&fx, eng, out);
        check_products(&fx, out, label);
        oct_engine *fresh = engine_new(&fx, &fx.params);
        engine_run(&fx, fresh, fresh_out);
        oct_engine_destroy(fresh);
        check_pair(&fx, out, fresh_out, 1e-6, false, label);
    }
    oct_products_destroy(out);
    oct_products_destroy(fresh_out);
    oct_engine_destroy(eng);
    fixture_free(&fx);
}
END_TEST

/* ---- physical test: a mirror through a non-linear k map and dispersion ---- */

enum { PH_M = 1024, PH_R = 61, PH_Z0_R = 30 };
#define PH_BETA 0.12
#define PH_A2 60.0
#define PH_A3 (-40.0)
#define PH_K0 0.5
#define PH_START 200.0
#define PH_Z0 (PH_START + PH_Z0_R)

/* True resampling positions p(u) = u + beta M t (1 - t), t = u/M, and the
 * wavenumber kappa(m) of input sample m: p(kappa) = m (bisection). */
static double ph_p(double u) { double t = u / PH_M; return u + PH_BETA * PH_M * t * (1 - t); }
static double ph_kappa(double m)
{
    double lo = -2, hi = PH_M + 2;
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        if (ph_p(mid) < m) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Mirror at depth z (bins of linear k): env * cos(2 pi z kappa/M + theta(kappa)) + noise;
 * linear = true: no k non-linearity and no dispersion (transform limit). */
static void ph_spectrum(float *x, double z, bool linear, double noise, tu_rng *rng)
{
    for (uint32_t m = 0; m < PH_M; m++) {
        double u = linear ? m : ph_kappa(m), v = u / PH_M - PH_K0;
        double th = linear ? 0.0 : PH_A2 * v * v + PH_A3 * v * v * v;
        double env = exp(-0.5 * pow((u - PH_M / 2.0) / (0.25 * PH_M), 2));
        x[m] = (float)(800.0 * env * cos(2 * M_PI * z * u / PH_M + th) + noise * tu_rng_normal(rng));
    }
}

/* Peak index and full width at half maximum (linear interpolation). */
static void ph_peak(const float *I, uint32_t n, uint32_t stride, uint32_t *peak, double *fwhm)
{
    uint32_t p = 0;
    for (uint32_t i = 1; i < n; i++)
        if (I[(size_t)i * stride] > I[(size_t)p * stride]) p = i;
    double half = 0.5 * I[(size_t)p * stride], l = 0, r = n - 1;
    for (uint32_t i = p; i > 0; i--)
        if (I[(size_t)(i - 1) * stride] < half) {
            double a = I[(size_t)(i - 1) * stride], b = I[(size_t)i * stride];
            l = (i - 1) + (half - a) / (b - a);
            break;
        }
    for (uint32_t i = p; i + 1 < n; i++)
        if (I[(size_t)(i + 1) * stride] < half) {
            double a = I[(size_t)i * stride], b = I[(size_t)(i + 1) * stride];
            r = i + (a - half) / (a - b);
            break;
        }
    *peak = p;
    *fwhm = r - l;
}

static const float *ph_run(oct_engine *eng, const float *frame, oct_products *out, int method)
{
    oct_error e = {{0}};
    oct_err err = oct_engine_process(eng, frame, sizeof(float) * PH_M, out, &e);
    ck_assert_msg(err == OCT_OK, "physical: process: %s", e.msg);
    const oct_image *img = &out->img[method][OCT_KIND_BSCAN];
    ck_assert_msg(img->present && img->f32, "physical: no bscan/%s", oct_method_name(method));
    return img->f32;
}

START_TEST(test_physical)
{
    tu_rng rng;
    tu_rng_seed(&rng, 4242);
    float *frame = malloc(sizeof(float) * PH_M), *tl = malloc(sizeof(float) * PH_M);
    float *cal = malloc(sizeof(float) * 3 * PH_M), *masks = malloc(sizeof(float) * PH_R * PH_M);
    double *kpos = malloc(sizeof(double) * PH_M), depths[3] = {150.0, 300.0, 380.0};
    ck_assert(frame && tl && cal && masks && kpos);
    ph_spectrum(frame, PH_Z0, false, 2.0, &rng);
    ph_spectrum(tl, PH_Z0, true, 2.0, &rng);
    for (int i = 0; i < 3; i++) ph_spectrum(cal + (size_t)i * PH_M, depths[i], false, 1.0, &rng);
    for (int r = 0; r < PH_R; r++) ph_spectrum(masks + (size_t)r * PH_M, PH_START + r, false, 0.0, &rng);
    for (uint32_t n = 0; n < PH_M; n++) kpos[n] = ph_p(n);

    oct_setup su;
    oct_setup_default(&su);
    su.geom.samples = PH_M, su.geom.ascans = 1, su.geom.lines = 1, su.geom.sample_type = OCT_SAMPLE_F32;
    su.backend = g_backend, su.precision = g_precision, su.flags |= OCT_SETUP_QUICK_PLAN;
    su.masks = masks, su.mask_count = PH_R;
    su.cms_cal = cal, su.cms_cal_count = 3, su.cms_depths = depths;
    su.cms_start = PH_START, su.cms_step = 1.0, su.cms_count = PH_R;
    su.klin_positions = kpos;
    oct_params p;
    oct_params_default(&p);
    p.methods = ALL3, p.freq_cutoff = 2, p.products = OCT_PRODUCT_BIT(OCT_KIND_BSCAN) | OCT_PRODUCT_F32;
    oct_engine *eng = NULL;
    oct_error e = {{0}};
    ck_assert_msg(oct_engine_create(&eng, &su, &p, &e) == OCT_OK, "physical: create: %s", e.msg);
    oct_products *out = oct_products_create();
    ck_assert_ptr_nonnull(out);
    uint32_t pk;
    double w_tl, w, wv[6];

    /* transform limit: plain CFD of the linear, dispersion-free mirror */
    ph_peak(ph_run(eng, tl, out, OCT_METHOD_CFD), PH_M / 2 + 1, 1, &pk, &w_tl);
    ck_assert_msg(pk == (uint32_t)PH_Z0 && w_tl > 1.0 && w_tl < 4.0, "physical: transform limit peak %u width %.2f",
                  pk, w_tl);

    /* plain CFD of the real mirror: visibly broadened */
    ph_peak(ph_run(eng, frame, out, OCT_METHOD_CFD), PH_M / 2 + 1, 1, &pk, &w);
    wv[0] = w;
    ck_assert_msg(w > 3.0 * w_tl, "physical: plain CFD width %.2f not broadened (limit %.2f)", w, w_tl);

    /* CMS and MSI on the same frame */
    const float *I = ph_run(eng, frame, out, OCT_METHOD_CMS);
    ph_peak(I, PH_R, 1, &pk, &w);
    wv[1] = w;
    ck_assert_msg(abs((int)pk - PH_Z0_R) <= 1 && w < 1.25 * w_tl, "physical: CMS peak %u (expected %d) width %.2f "
                  "(limit %.2f)", pk, PH_Z0_R, w, w_tl);
    I = out->img[OCT_METHOD_MSI][OCT_KIND_BSCAN].f32;
    ph_peak(I, PH_R, 1, &pk, &w);
    wv[2] = w;
    ck_assert_msg(abs((int)pk - PH_Z0_R) <= 1 && w < 2.0 * w_tl, "physical: MSI peak %u (expected %d) width %.2f "
                  "(limit %.2f)", pk, PH_Z0_R, w, w_tl);

    /* CFD with k-lin (true positions) and dispersion (true a2, a3) */
    static const struct { uint32_t klin; int taps; uint32_t src; const char *name; } kl[] = {
        {OCT_KLIN_SINC, 21, OCT_KLIN_POLY, "sinc 21, polynomial"},
        {OCT_KLIN_CUBIC, 0, OCT_KLIN_FILE, "cubic, file"},
    };
    for (int i = 0; i < 2; i++) {
        p.klin = kl[i].klin, p.klin_source = kl[i].src;
        if (kl[i].taps) p.klin_taps = kl[i].taps;
        p.klin_coef[0] = 0, p.klin_coef[1] = PH_M * (1 + PH_BETA), p.klin_coef[2] = -PH_BETA * PH_M, p.klin_coef[3] = 0;
        p.disp_a2 = (float)PH_A2, p.disp_a3 = (float)PH_A3, p.disp_k0 = (float)PH_K0;
        ck_assert_msg(oct_engine_set_params(eng, &p, &e) == OCT_OK, "physical: set_params: %s", e.msg);
        ph_peak(ph_run(eng, frame, out, OCT_METHOD_CFD), PH_M / 2 + 1, 1, &pk, &w);
        wv[3 + i] = w;
        ck_assert_msg(abs((int)pk - (int)PH_Z0) <= 1 && w < 1.25 * w_tl,
                      "physical: CFD k-lin %s + dispersion: peak %u (expected %d) width %.2f (limit %.2f)",
                      kl[i].name, pk, (int)PH_Z0, w, w_tl);
    }
    /* k-lin alone is not enough: dispersion still broadens */
    p.disp_a2 = p.disp_a3 = 0;
    ck_assert(oct_engine_set_params(eng, &p, &e) == OCT_OK);
    ph_peak(ph_run(eng, frame, out, OCT_METHOD_CFD), PH_M / 2 + 1, 1, &pk, &w);
    ck_assert_msg(w > 2.0 * w_tl, "physical: CFD k-lin without dispersion width %.2f (limit %.2f)", w, w_tl);
    printf("physical (FWHM, bins): transform limit %.2f, plain CFD %.2f, CMS %.2f, MSI %.2f, CFD k-lin sinc21 + "
           "disp %.2f, cubic + disp %.2f, k-lin only %.2f\n", w_tl, wv[0], wv[1], wv[2], wv[3], wv[4], w);

    oct_products_destroy(out);
    oct_engine_destroy(eng);
    free(frame), free(tl), free(cal), free(masks), free(kpos);
}
END_TEST

Suite *oct_engine_suite_ex(oct_backend backend, oct_precision precision, const char *name)
{
    g_backend = backend;
    g_precision = precision;
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("numeric");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_numeric, 0, NCASES(numeric_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("msi_paths");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_msi_paths, 0, NCASES(path_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("state");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_set_params);
    tcase_add_loop_test(tc, test_repeat, 0, NCASES(repeat_cases));
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("options");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_options, 0, NCASES(opt_cases));
    tcase_add_test(tc, test_rolling);
    tcase_add_test(tc, test_rolling_hold);
    tcase_add_test(tc, test_set_params_options);
    tcase_add_test(tc, test_physical);
    suite_add_tcase(s, tc);
    return s;
}

Suite *oct_engine_suite(oct_backend backend, const char *name)
{
    return oct_engine_suite_ex(backend, OCT_PRECISION_FP32, name);
}
