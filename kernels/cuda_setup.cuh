/* cuda_setup.cuh - the CUDA backend's state and set-up (host code): the
 * backend state, allocation helpers, the MSI rates of the planner's cost
 * model, the upload of a plan by generations (sync_plan), the lazily built
 * MSI/CMS matrices, and create.  Included once by engine_cuda.cu (one
 * translation unit with the kernels of cuda_kernels.cuh). */
#ifndef OCT_CUDA_SETUP_CUH
#define OCT_CUDA_SETUP_CUH

/* ------------------------------------------------------------------ */
/* backend state                                                        */

namespace {

enum { DEPTH = OCT_ENGINE_DEPTH_MAX, MAX_REG = 16 };
enum { GEMM_SGEMM = 0, GEMM_SPLIT = 1, GEMM_TF32 = 2 };
const char *const gemm_names[] = {"sgemm", "3xtf32", "tf32"};

struct ProdBuf {
    float *f;    /* device f32 */
    uint8_t *u;  /* device u8 */
    size_t cap;  /* pixels */
    size_t off;  /* offset of this product in the pinned output staging (pixels) */
};

enum { EV_START, EV_CONV, EV_CFD, EV_MSI, EV_CMS, EV_PROD, EV_COUNT };
enum { PARTS_MAX = 8 };
/* Whether cuda.parts_ext 0 (auto) defers the MSI's background with the
 * CFD's (issue 19; parts_ext 3 always does): see cuda_frame.cuh, PARTS_DEFER.
 * (A build of a variant with the other default for end-to-end A/B runs may
 * set it: octd has no key for cuda.parts_ext.) */
#ifndef OCT_CUDA_DEFER_MSI_AUTO
#define OCT_CUDA_DEFER_MSI_AUTO 0
#endif
enum { DEFER_MSI_AUTO = OCT_CUDA_DEFER_MSI_AUTO };
/* Intra-frame pipeline parts of a volume when cuda.parts is 0 (auto); the
 * same build-time override for A/B runs of octd. */
#ifndef OCT_CUDA_PARTS_AUTO
#define OCT_CUDA_PARTS_AUTO 4
#endif


/* What a captured frame's launches depend on besides the slot (run_device
 * re-captures when any of it differs): the plan (its generations cover the
 * arrays, the layout and the row sets), the values, the products, and the
 * device state that host code reads into launch arguments.  Filled by
 * memset + field copies, compared with memcmp. */
struct GraphKey {
    const void *plan;
    uint64_t gen[OCT_PK_COUNT];
    oct_params params;
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    const void *mats[3];
    float hsc_x, hsc_m;
    int path, klin_T, disp_on, x_on_comp;
    float hsc_a; /* the CFD matrix's scale (cuda.cfd gemm: the GEMM's alpha) */
    int nparts; /* the frame's input parts (-: a replay of such a frame, run whole) */
};

/* What one frame in flight owns. */
struct Slot {
    void *d_raw;                 /* the raw frame on the device */
    int *d_bad, *h_bad;          /* first non-finite spectrum (h_bad pinned) */
    ProdBuf prod[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    uint8_t *h_out;              /* pinned staging for caller products that are not
                                  * pinned: f32 of each, then u8 (made on first use) */
    cudaEvent_t ev[EV_COUNT];
    cudaEvent_t ev_h2d0, ev_h2d1, ev_d2h0, ev_d2h1;
    int index;                   /* slot number (its sink tables: make_sink) */
    /* the frame in flight */
    oct_products *out;
    uint64_t ticket;
    bool direct_in;              /* DMA from registered memory: input done at ev_h2d1 */
    bool direct_out;             /* D2H straight into out's pinned buffers */
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    bool f32;
    double t_submit;
    double conv_bytes;           /* device bytes read + written by the conversion stage */
    /* intra-frame pipeline (see run_device): the input copied in nparts
     * parts of spectra, each part converted and sent through CFD and the
     * MSI as soon as it is on the device */
    int nparts;
    cudaEvent_t ev_in[PARTS_MAX], ev_cv[PARTS_MAX];
    /* the sink tables last uploaded for this slot (upload_sinks skips an
     * unchanged one: a copy from pageable memory costs host time per frame) */
    SinkTable sink_last[OCT_METHOD_COUNT];
    bool sink_valid;
    /* the frame's device work as a CUDA graph (run_device): instantiated
     * for the key it was captured with, re-launched while the key holds */
    cudaGraphExec_t gexec;
    GraphKey gkey;
};

/* The algorithm of one GEMM shape (cuda_gemm.cuh), chosen once by timing.
 * Key: C (m x n) = A^T B with A k x m, B k x n (column-major, lda = ldb =
 * k, ldc = m), operand kind (GK_*) and the alignment of B's pointer (the
 * chunks of a frame start anywhere). */
enum { GEMM_PICKS = 16 };
struct GemmPick {
    int m, n, k, kind, align;
    bool used;
    bool lt;                        /* cublasLt with algo, else cublasGemmEx's default */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
    float us_pick, us_default;      /* measured at the pick */
};

struct HostReg {
    const uint8_t *ptr;
    size_t bytes;
    bool owned; /* false: another engine of this process registered it (issue 20) */
};

struct CudaState {
    int device;
    bool device_ok;   /* the device was selected: teardown calls mean something */
    uint64_t allocs;
    cudaStream_t s_comp, s_cfd, s_copy, s_d2h;
    cudaEvent_t ev_stg[2], ev_fork;
    cudaEvent_t ev_corr; /* deferred background: its correction is ready (compute stream) */
    /* fork / join of the CFD stream inside a frame: events of their own, so
     * that a captured frame keeps the timing events (EV_*) as external
     * record nodes (run_device) */
    cudaEvent_t ev_cj[2];
    /* CUDA graphs (setup.cuda.graph): the key the engine last ran eagerly
     * (a capture follows one eager frame of a key: GEMM picks, lazily built
     * matrices), and counters for tests / octbench */
    GraphKey gk_eager, gk_fail; /* gk_fail: a key whose capture failed (eager until it changes) */
    bool gk_eager_valid, gk_fail_valid;
    bool capturing;     /* run_frame is being captured (mark) */
    uint64_t graph_launches, graph_captures, graph_fails;
    int stg_next;     /* staging buffer to fill next (alternates across frames) */
    cufftHandle plan_x, plan_m, plan_c2r;
    bool have_plan_x, have_plan_m, have_plan_c2r;
    cublasHandle_t blas;
    bool have_blas;
    /* MSI GEMM algorithms (setup.cuda.gemm_algo auto): cublasLt, per shape */
    cublasLtHandle_t lt;
    bool have_lt;
    GemmPick pick[GEMM_PICKS];
    int pick_next;                  /* the entry a new shape replaces when all are used */
    cudaEvent_t ev_g[2];            /* timing of the candidates */
    void *fft_work, *fft_work_x, *blas_work;
    size_t blas_work_bytes;
    int gemm_mode;    /* GEMM_* */
    int kM;           /* GEMM inner dimension: M, or 3M for split TF32 */
    /* MSI GEMM as split FP16 (setup.cuda.gemm = 3xfp16, integer samples):
     * x3, the MSI matrices and xg hold __half; power-of-two scales of the
     * spectra (from the input range, window and reference) and of the
     * matrix (from the filtered masks); the GEMM's alpha undoes both. */
    bool h16;
    float hsc_x, hsc_m;
    double wmax, refmax;
    bool x_on_comp;   /* plan_x runs on the compute stream (FFT path), else the CFD stream */

    /* geometry */
    int M, K, N, L, R;
    int RC;           /* CMS depths (setup.cms_count), 0 = no CMS */
    long long S;
    size_t frame_bytes;

    /* work buffers shared by all slots (compute is serialised) */
    float *d_x, *d_x3;
    float *d_win, *d_bg;
    double *d_bgsum;
    /* FPN per part (intra-frame pipeline): best key, mean, segment [PARTS_MAX][M] */
    double *d_fpk, *d_fpm;
    long long *d_fps;
    float2 *d_X;

    /* MSI */
    float *d_mf;      /* R x M filtered masks */
    float2 *d_Mf;     /* R x K their spectra (FFT path) */
    float *d_Bfull, *d_Benf;
    size_t mat_cap;   /* floats of each matrix */
    int nl_cap;       /* lags the matrices hold */
    bool both_paths;  /* auto path: buffers of both MSI paths, switched live by the lag count */
    float *d_C;
    size_t C_cap;     /* floats */
    float2 *d_Y;
    float *d_P;
    long long CB;     /* C2R batch */
    float *d_xg;      /* gathered spectra (GEMM) */
    float2 *d_Xg;     /* gathered spectra (FFT) */
    int *d_eidx[OCT_METHOD_COUNT];
    size_t eidx_cap[OCT_METHOD_COUNT];
    oct_msi_path path; /* the MSI path the buffers and streams are set up for */

    /* background (issue 7): b of this frame, rolling history ring (K rows of
     * frame means, double) and its device-side state (see roll_mean_kernel) */
    float *d_bcur;
    double *d_ring;
    int *d_roll;
    bool roll_active; /* the history belongs to the current mode and K */
    int roll_K;

    /* k-linearisation (CFD): tap tables, x' and the resampled windowed spectra */
    int *d_kidx;
    float *d_kw;
    int klin_T;       /* taps of the uploaded tables, 0 = off */
    float *d_xp, *d_xk;

    /* angiography (SPEC 10.3): the kernels of angio_cuda.cu on x~ (d_x or
     * d_xk), planned for the values in ang_cfg */
    oct_angio_cuda *ang;
    oct_angio_config ang_cfg;

    /* dispersion (CFD): e^(-i theta), chunked analytic-signal spectra, C2C plan */
    float2 *d_disp, *d_Z;
    /* fused chain (cuda.disp fused, M a power of two <= DISP_FUSED_M_MAX):
     * one block per spectrum, twiddles d_tw (M); else the cuFFT chain */
    bool disp_fused;
    int disp_logM;
    float2 *d_tw;
    bool disp_on;
    long long DB;     /* spectra per dispersion chunk (the plan's batch) */
    cufftHandle plan_d;
    bool have_plan_d;
    /* intra-frame pipeline: parts per frame (1 = off) and the R2C plan of
     * one part's spectra (CFD stream, plan_x's work area) */
    int parts;
    int last_nparts; /* parts of the last submitted frame (oct_cuda_last_parts) */
    int last_defer; /* it used PARTS_DEFER: 1, with the MSI deferred too: 2 (oct_cuda_last_deferred) */
    cufftHandle plan_xp;
    bool have_plan_xp;
    /* deferred background (PARTS_DEFER, see parts_mode): the estimate bh,
     * d = b - bh (x'), w * d, its k-linearised row, its R2C and dispersion
     * chain (one spectrum each; own plans and work areas, compute stream) */
    float *d_bhat, *d_cd, *d_cdx, *d_cdk;
    float2 *d_cX, *d_cZ;
    /* ... and for the MSI: the GEMM output of the whole frame (Cdef_cap
     * floats; the sink after the last part), d's GEMM operand (3M floats)
     * and its products with the en-face / all-depth matrices (bias_cap) */
    float *d_Cdef, *d_cop, *d_bias_enf, *d_bias_full;
    size_t Cdef_cap, bias_cap;
    int *d_cbad;
    cufftHandle plan_r1, plan_c1;
    bool have_plan_r1, have_plan_c1;

    /* CFD as a matrix product (cuda.cfd, cfd_gemm_ok): x' of every spectrum
     * as split FP16 (scale hsc_c), the map's rows as split FP16 matrices
     * (scale hsc_a) for all depths (cross-sections) and the en-face depths;
     * made by sending the unit spectra (d_id) through the chain (d_idk,
     * d_idX, d_idZ: its k-lin / window, DFT and dispersion outputs; own
     * plans of M spectra on the compute stream) for the values in held_cf */
    __half *d_xc3, *d_Acf[2];
    /* ... deferred (cfd_defer_ok): the parts' en-face products (Ccf_cap
     * floats), d's split operand and its products with the two matrices */
    float *d_Ccf, *d_cbias[2];
    size_t Ccf_cap;
    __half *d_ccop;
    float hsc_c, hsc_a;
    float *d_id, *d_idk;
    float2 *d_idX, *d_idZ;
    unsigned *d_amax;
    cufftHandle plan_idr, plan_idc;
    bool have_plan_idr, have_plan_idc;
    uint64_t held_cf[5];
    bool cf_valid;
    int last_cfd; /* the last submitted frame's CFD was the product (oct_cuda_last_cfd_gemm) */

    /* CMS: q (2RC x M), its GEMM matrices (all depths / en-face depths),
     * the TF32 parts of x', gathered cross-section rows, GEMM output chunk */
    float *d_cq, *d_Qfull, *d_Qenf, *d_xp3, *d_xgc, *d_Cc;
    size_t Cc_cap;

    int sink_base;    /* this engine's range of c_sink (sink_acquire), -1 = none */
    int sms;          /* multiprocessors of the device (sink geometry) */

    /* Plan generations of what the device holds (plan.h; 0 = nothing or
     * an upload that did not finish): compared at prepare and every frame. */
    struct {
        uint64_t win, enface, masks, klin, disp, cms, bg;
        uint64_t mat[4];    /* MSI matrices / mask spectra: masks, lags, en-face, path */
        uint64_t cmsmat[2]; /* CMS matrices: cms, en-face */
    } held;

    /* products */
    size_t out_pixels, h_out_bytes;

    /* pipeline: slots head .. head+count-1 (mod DEPTH) are in flight */
    Slot slot[DEPTH];
    int head, count;
    int last_slot;        /* slot of the last submitted frame (oct_cuda_time_device) */
    bool frame_on_device;

    /* staging of pageable frames */
    uint8_t *h_stage[2];
    size_t stage_bytes;
    int stage_threads; /* CPU threads of the staging copy (one core moves ~8-10 GB/s) */

    HostReg reg[MAX_REG];
    int nreg;
};

inline CudaState *ST(oct_engine *eng) { return (CudaState *)eng->be; }
inline const CudaState *ST(const oct_engine *eng) { return (const CudaState *)eng->be; }

template <typename T>
oct_err dmalloc(CudaState *s, T **p, size_t count, const char *what, oct_error *e)
{
    *p = NULL;
    if (count == 0) return OCT_OK;
    cudaError_t err = cudaMalloc((void **)p, count * sizeof(T));
    if (err != cudaSuccess) {
        *p = NULL;
        return oct_error_set(e, err == cudaErrorMemoryAllocation ? OCT_ENOMEM : OCT_EDEVICE,
                             "cuda: cannot allocate %zu bytes of device memory for %s: %s",
                             count * sizeof(T), what, cudaGetErrorString(err));
    }
    s->allocs++;
    return OCT_OK;
}

oct_err halloc(CudaState *s, void **p, size_t bytes, const char *what, oct_error *e)
{
    *p = NULL;
    if (bytes == 0) return OCT_OK;
    cudaError_t err = cudaHostAlloc(p, bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
        *p = NULL;
        return oct_error_set(e, OCT_ENOMEM, "cuda: cannot allocate %zu bytes of pinned host memory for %s: %s",
                             bytes, what, cudaGetErrorString(err));
    }
    if (s) s->allocs++;
    return OCT_OK;
}

inline unsigned blocks_for(long long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

bool msi_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_MSI)) != 0; }
bool cfd_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_CFD)) != 0; }
bool cms_on(const oct_engine *eng) { return (eng->params.methods & OCT_METHOD_BIT(OCT_METHOD_CMS)) != 0; }

/* Depths of a method for this geometry and set-up (buffer sizes). */
int method_depth(const CudaState *s, int m)
{
    return m == OCT_METHOD_CFD ? s->K : m == OCT_METHOD_MSI ? s->R : s->RC;
}
int lag_count(const oct_engine *eng) { return (int)eng->plan->lags; }

/* Lags the GEMM matrices are made for at create: as many as the cost model
 * gives the GEMM path (GEMM_LAGS_MAX), so that a live change of the lag
 * window never allocates; fewer when the two matrices would pass 4 GiB. */
#define GEMM_LAGS_MAX 128
int gemm_lag_capacity(int R, int kM, int M)
{
    long long per_lag = (long long)R * kM * (long long)sizeof(float);
    long long fit = per_lag > 0 ? (2ll << 30) / per_lag : GEMM_LAGS_MAX;
    return (int)std::max(1ll, std::min({(long long)GEMM_LAGS_MAX, (long long)M - 1, fit}));
}
int gemm_lag_capacity(const CudaState *s) { return gemm_lag_capacity(s->R, s->kM, s->M); }

/* The MSI product of a set-up: precision tf32 is one TF32 GEMM; fp32 the
 * split-TF32 product unless sgemm is asked for (set-up flag or tuning). */
int gemm_mode_of(const oct_setup *su)
{
    if (su->precision == OCT_PRECISION_TF32) return GEMM_TF32;
    if ((su->flags & OCT_SETUP_PLAIN_SGEMM) || su->cuda.gemm == OCT_CUDA_GEMM_SGEMM) return GEMM_SGEMM;
    return GEMM_SPLIT;
}

/* Rates of the planner's MSI cost model (plan.h), per (spectrum, mask):
 * GEMM 2*M*Lw flops at ~50 TFLOP/s; FFT path ~16*M bytes through memory at
 * ~3 TB/s, i.e. the GEMM wins below ~133 lags, and it also needs its
 * matrices to hold the lags (gemm_lag_capacity: at most 128, fewer when
 * two matrices would pass 4 GiB). */
void cuda_msi_rates(const oct_setup *su, oct_msi_rates *r)
{
    memset(r, 0, sizeof *r);
    const int M = (int)su->geom.samples, kM = gemm_mode_of(su) == GEMM_SPLIT ? 3 * M : M;
    r->fft_ns_per_sample = 16.0 / 3000.0;
    r->gemm_flops_per_ns = 50000.0;
    /* split FP16: half the tensor-core time of split TF32 (H100 dense FP16
     * 989 vs TF32 495 TFLOP/s) and half the operand bytes (measured 1.5-1.6x
     * on the MSI workloads, H200 2026-11-23) */
    if (su->precision == OCT_PRECISION_FP32 &&
        (su->cuda.gemm == OCT_CUDA_GEMM_3XFP16 || su->cuda.gemm == OCT_CUDA_GEMM_AUTO) &&
        su->geom.sample_type != OCT_SAMPLE_F32 && !(su->flags & OCT_SETUP_PLAIN_SGEMM))
        r->gemm_flops_per_ns = 100000.0;
    r->gemm_ok = true;
    r->gemm_lags_max = (uint32_t)gemm_lag_capacity((int)su->mask_count, kM, M);
}

/* GEMM matrices for up to nl lags.  Allocates at create; later only when a
 * forced GEMM path (setup.msi_path = gemm, a test/benchmark knob) is given
 * more lags than it was made for (the auto path switches to the FFT path
 * instead, see cuda_update). */
oct_err ensure_matrices(oct_engine *eng, int nl, oct_error *e)
{
    CudaState *s = ST(eng);
    if (nl <= s->nl_cap && s->d_Bfull) return OCT_OK;
    if (s->d_Bfull || s->d_Benf || s->d_C) {
        CU(cudaDeviceSynchronize()); /* nothing in flight may still read them */
        CU(cudaFree(s->d_Bfull));
        CU(cudaFree(s->d_Benf));
        CU(cudaFree(s->d_C));
    }
    s->d_Bfull = s->d_Benf = s->d_C = NULL;
    s->nl_cap = std::max(nl, gemm_lag_capacity(s));
    s->mat_cap = (size_t)s->R * s->nl_cap * s->kM;
    TRY(dmalloc(s, &s->d_Bfull, s->mat_cap, "the MSI mask matrix", e));
    TRY(dmalloc(s, &s->d_Benf, s->mat_cap, "the MSI en-face mask matrix", e));
    /* GEMM output chunk: about 3/4 of L2 (it is read back from L2 by the
     * sink kernel), but at least 32 rows of the widest matrix. */
    int l2 = 0;
    CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s->device));
    size_t cap = (size_t)l2 * 3 / 4 / sizeof(float);
    const double mb = eng->setup.cuda.gemm_chunk_mb; /* tuning (octbench --gemm-chunk-mb) */
    if (mb != 0)
        cap = mb < 0 ? (size_t)s->S * s->R * s->nl_cap : (size_t)(mb * 1048576.0 / sizeof(float));
    cap = std::max(cap, (size_t)s->R * s->nl_cap * 32);
    cap = std::min(cap, (size_t)s->S * s->R * s->nl_cap);
    s->C_cap = cap;
    TRY(dmalloc(s, &s->d_C, s->C_cap, "the MSI GEMM output", e));
    s->held.mat[0] = 0;
    return OCT_OK;
}

/* Brings the device up to a plan: uploads the plan arrays whose generation
 * differs from what the device holds (on the compute stream, after the
 * frames in flight: their CFD work was joined into it), moves between the
 * MSI paths and grows the GEMM matrices for more lags where needed.  A
 * generation is recorded only once its upload is done, so after a failure
 * the next call (prepare, or the next frame with the engine's plan) redoes
 * it.  Matrices derived on the device are rebuilt lazily (prepare_msi,
 * prepare_cms). */
/* The power of two 2^k with bound * 2^k <= 2^14 (split FP16 operands: the
 * hi part stays below fp16's 65504 with room, the lo part far above its
 * 2^-24 subnormal step); 1 for a zero bound. */
float pow2_scale(double bound)
{
    if (!(bound > 0.0) || !std::isfinite(bound)) return 1.0f;
    int ex = 0;
    frexp(bound, &ex); /* bound < 2^ex */
    return (float)ldexp(1.0, std::max(-100, std::min(100, 14 - ex)));
}

oct_err sync_plan(oct_engine *eng, const oct_plan *pl, oct_error *e)
{
    CudaState *s = ST(eng);
    const uint64_t *gen = pl->gen;
    bool copies = false;
    if (s->held.win != gen[OCT_PK_WINDOW]) {
        s->held.win = 0;
        CU(cudaMemcpyAsync(s->d_win, pl->window, (size_t)s->M * sizeof(float), cudaMemcpyHostToDevice, s->s_comp));
        copies = true;
        if (s->h16) {
            double m = 0.0;
            for (int n = 0; n < s->M; n++) m = std::max(m, (double)fabsf(pl->window[n]));
            s->wmax = m;
            /* |x~| <= (max |sample| + max |b|) max |w|: samples are < 2^16 in
             * magnitude; frame-mean/rolling/FPN b lie within their range, a
             * reference within refmax */
            s->hsc_x = pow2_scale((65536.0 + std::max(65536.0, s->refmax)) * m);
        }
    }
    if (s->held.enface != gen[OCT_PK_ENFACE]) {
        s->held.enface = 0;
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            if (!s->d_eidx[m] || pl->enface_n[m] == 0) continue;
            if (pl->enface_n[m] > s->eidx_cap[m])
                return oct_error_set(e, OCT_EINVAL, "cuda: %u en-face indices exceed the %zu depths",
                                     pl->enface_n[m], s->eidx_cap[m]);
            CU(cudaMemcpyAsync(s->d_eidx[m], pl->enface_idx[m], pl->enface_n[m] * sizeof(int32_t),
                               cudaMemcpyHostToDevice, s->s_comp));
        }
        copies = true;
    }
    if (s->R > 0 && s->held.masks != gen[OCT_PK_MASKS]) {
        s->held.masks = 0;
        CU(cudaMemcpyAsync(s->d_mf, pl->masks_filt, (size_t)s->R * s->M * sizeof(float), cudaMemcpyHostToDevice,
                           s->s_comp));
        copies = true;
        if (s->h16) {
            double m = 0.0;
            for (size_t i = 0; i < (size_t)s->R * s->M; i++) m = std::max(m, (double)fabsf(pl->masks_filt[i]));
            s->hsc_m = pow2_scale(m);
        }
    }
    if (s->held.klin != gen[OCT_PK_KLIN]) {
        s->held.klin = 0;
        uint32_t T = pl->klin_T;
        if (T > 0 && (!pl->klin_idx || !pl->klin_w || T > OCT_SINC_TAPS_MAX))
            return oct_error_set(e, OCT_EINVAL, "cuda: k-linearisation with %u taps (1..%d, tables %s)", T,
                                 OCT_SINC_TAPS_MAX, pl->klin_idx && pl->klin_w ? "present" : "missing");
        size_t nt = (size_t)s->M * T;
        for (size_t i = 0; i < nt; i++) /* the kernel indexes shared memory with these */
            if (pl->klin_idx[i] < 0 || pl->klin_idx[i] >= s->M)
                return oct_error_set(e, OCT_EINVAL, "cuda: k-linearisation index %d at sample %zu tap %zu outside [0, %d]",
                                     pl->klin_idx[i], i / T, i % T, s->M - 1);
        if (T > 0) {
            /* tap-major ([t][n]) on the device: a warp's loads of one tap are coalesced */
            int32_t *ti = (int32_t *)malloc(nt * sizeof(int32_t));
            float *tw = (float *)malloc(nt * sizeof(float));
            if (!ti || !tw) {
                free(ti);
                free(tw);
                return oct_error_set(e, OCT_ENOMEM, "cuda: out of memory for %zu k-linearisation taps", nt);
            }
            for (size_t n = 0; n < (size_t)s->M; n++)
                for (size_t t = 0; t < T; t++) {
                    ti[t * s->M + n] = pl->klin_idx[n * T + t];
                    tw[t * s->M + n] = pl->klin_w[n * T + t];
                }
            /* on the compute stream: after the frames in flight (their CFD joins it) */
            cudaError_t r1 = cudaMemcpyAsync(s->d_kidx, ti, nt * sizeof(int32_t), cudaMemcpyHostToDevice, s->s_comp);
            cudaError_t r2 = r1 == cudaSuccess ? cudaMemcpyAsync(s->d_kw, tw, nt * sizeof(float),
                                                                 cudaMemcpyHostToDevice, s->s_comp) : r1;
            cudaError_t r3 = cudaStreamSynchronize(s->s_comp); /* before the host tables go */
            if (r2 == cudaSuccess) r2 = r3;
            free(ti);
            free(tw);
            CU(r2);
        }
        s->klin_T = (int)T;
        s->held.klin = gen[OCT_PK_KLIN];
    }
    if (s->held.disp != gen[OCT_PK_DISP]) {
        s->held.disp = 0;
        s->disp_on = pl->disp != NULL;
        if (s->disp_on)
            CU(cudaMemcpyAsync(s->d_disp, pl->disp, (size_t)s->M * sizeof(float2), cudaMemcpyHostToDevice,
                               s->s_comp));
        copies = true;
    }
    if (s->RC > 0 && s->held.cms != gen[OCT_PK_CMS]) {
        s->held.cms = 0;
        if (!pl->cms_q) return oct_error_set(e, OCT_EINVAL, "cuda: CMS set up but no CMS mask matrix");
        CU(cudaMemcpyAsync(s->d_cq, pl->cms_q, (size_t)2 * s->RC * s->M * sizeof(float), cudaMemcpyHostToDevice,
                           s->s_comp));
        copies = true;
    }
    if (s->held.bg != gen[OCT_PK_BACKGROUND]) { /* the rolling history restarts */
        s->roll_active = false;
        s->held.bg = gen[OCT_PK_BACKGROUND];
    }
    if (s->R > 0 && pl->msi_path != s->path) {
        if (!s->both_paths)
            return oct_error_set(e, OCT_EINVAL, "cuda: the MSI path was fixed at %s by the set-up",
                                 s->path == OCT_MSI_GEMM ? "gemm" : "fft");
        /* The spectra's R2C moves between the CFD and compute streams (and
         * shares a work area): let the frames in flight finish. */
        cudaStream_t st[] = {s->s_copy, s->s_comp, s->s_cfd, s->s_d2h};
        for (cudaStream_t x : st) CU(cudaStreamSynchronize(x));
        s->path = pl->msi_path;
        s->x_on_comp = s->path == OCT_MSI_FFT;
        FFT(cufftSetStream(s->plan_x, s->x_on_comp ? s->s_comp : s->s_cfd));
        s->held.mat[0] = 0;
    }
    if (s->R > 0 && s->path == OCT_MSI_GEMM) TRY(ensure_matrices(eng, (int)pl->lags, e));
    /* the host arrays may change after we return: finish the copies */
    if (copies) CU(cudaStreamSynchronize(s->s_comp));
    s->held.win = gen[OCT_PK_WINDOW];
    s->held.enface = gen[OCT_PK_ENFACE];
    if (s->R > 0) s->held.masks = gen[OCT_PK_MASKS];
    s->held.disp = gen[OCT_PK_DISP];
    if (s->RC > 0) s->held.cms = gen[OCT_PK_CMS];
    return OCT_OK;
}

/* Mask spectra / matrices for the current values (lazily, on the compute stream). */
oct_err prepare_msi(oct_engine *eng, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_plan *pl = eng->plan;
    const uint64_t key[4] = {pl->gen[OCT_PK_MASKS], pl->gen[OCT_PK_LAGS], pl->gen[OCT_PK_ENFACE],
                             pl->gen[OCT_PK_PATH]};
    if (s->R == 0 || !memcmp(s->held.mat, key, sizeof key)) return OCT_OK;
    s->held.mat[0] = 0;
    if (s->path == OCT_MSI_FFT) {
        FFT(cufftExecR2C(s->plan_m, s->d_mf, (cufftComplex *)s->d_Mf));
    } else {
        int nl = lag_count(eng);
        int split = s->gemm_mode == GEMM_SPLIT;
        TRY(ensure_matrices(eng, nl, e));
        long long tot = (long long)s->R * nl * s->kM;
        if (s->h16)
            build_matrix16_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                s->d_mf, s->M, NULL, s->R, nl, pl->params.lag_lo, s->hsc_m, (__half *)s->d_Bfull);
        else
            build_matrix_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                s->d_mf, s->M, NULL, s->R, nl, pl->params.lag_lo, split, s->d_Bfull);
        LAUNCHED("build_matrix");
        uint32_t Q = pl->enface_n[OCT_METHOD_MSI];
        if (Q > 0 && s->L > 1) {
            tot = (long long)Q * nl * s->kM;
            if (s->h16)
                build_matrix16_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                    s->d_mf, s->M, s->d_eidx[OCT_METHOD_MSI], (int)Q, nl, pl->params.lag_lo, s->hsc_m,
                    (__half *)s->d_Benf);
            else
                build_matrix_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                    s->d_mf, s->M, s->d_eidx[OCT_METHOD_MSI], (int)Q, nl, pl->params.lag_lo, split,
                    s->d_Benf);
            LAUNCHED("build_matrix");
        }
    }
    memcpy(s->held.mat, key, sizeof key);
    return OCT_OK;
}

/* CMS matrices for the current values (lazily, on the compute stream). */
oct_err prepare_cms(oct_engine *eng, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_plan *pl = eng->plan;
    const uint64_t key[2] = {pl->gen[OCT_PK_CMS], pl->gen[OCT_PK_ENFACE]};
    if (s->RC == 0 || !memcmp(s->held.cmsmat, key, sizeof key)) return OCT_OK;
    s->held.cmsmat[0] = 0;
    int split = s->gemm_mode == GEMM_SPLIT;
    long long tot = (long long)s->RC * 2 * s->kM;
    build_cms_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(s->d_cq, s->M, NULL, s->RC, split,
                                                                  s->d_Qfull);
    LAUNCHED("build_cms");
    uint32_t Q = pl->enface_n[OCT_METHOD_CMS];
    if (Q > 0 && s->L > 1) {
        if (Q > (uint32_t)s->RC)
            return oct_error_set(e, OCT_EINVAL, "cuda: %u CMS en-face depths exceed the %d depths", Q, s->RC);
        tot = (long long)Q * 2 * s->kM;
        build_cms_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_cq, s->M, s->d_eidx[OCT_METHOD_CMS], (int)Q, split, s->d_Qenf);
        LAUNCHED("build_cms");
    }
    memcpy(s->held.cmsmat, key, sizeof key);
    return OCT_OK;
}

/* Teardown and error paths cannot return an error: they say it on stderr
 * (octd's log) so a failing device does not go unnoticed. */
void warn_cuda(const char *what, cudaError_t r)
{
    if (r != cudaSuccess) fprintf(stderr, "cuda: %s: %s\n", what, cudaGetErrorString(r));
}

#define WARN_CUDA(call) warn_cuda(#call, call)
#define WARN_LIB(call, ok) do { if ((call) != (ok)) fprintf(stderr, "cuda: %s failed\n", #call); } while (0)

/* Ranges of c_sink handed to engines (process-wide, like the constant
 * memory itself). */
pthread_mutex_t g_sink_lock = PTHREAD_MUTEX_INITIALIZER;
unsigned g_sink_used;

int sink_acquire()
{
    int got = -1;
    pthread_mutex_lock(&g_sink_lock);
    for (int i = 0; i < SINK_ENGINES && got < 0; i++)
        if (!(g_sink_used & (1u << i))) g_sink_used |= 1u << i, got = i;
    pthread_mutex_unlock(&g_sink_lock);
    return got;
}

void sink_release(int i)
{
    if (i < 0) return;
    pthread_mutex_lock(&g_sink_lock);
    g_sink_used &= ~(1u << i);
    pthread_mutex_unlock(&g_sink_lock);
}

void pick_free(GemmPick *g)
{
    if (g->op) WARN_LIB(cublasLtMatmulDescDestroy(g->op), CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t ls[] = {g->la, g->lb, g->lc};
    for (cublasLtMatrixLayout_t l : ls)
        if (l) WARN_LIB(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
    memset(g, 0, sizeof *g);
}

void free_state(CudaState *s)
{
    if (!s) return;
    sink_release(s->sink_base); /* destroy drained the streams: no sink reads it any more */
    if (!s->device_ok) { /* nothing was made on a device */
        free(s);
        return;
    }
    for (int i = 0; i < s->nreg; i++)
        if (s->reg[i].owned) WARN_CUDA(cudaHostUnregister((void *)s->reg[i].ptr));
    if (s->have_plan_x) WARN_LIB(cufftDestroy(s->plan_x), CUFFT_SUCCESS);
    if (s->have_plan_m) WARN_LIB(cufftDestroy(s->plan_m), CUFFT_SUCCESS);
    if (s->have_plan_c2r) WARN_LIB(cufftDestroy(s->plan_c2r), CUFFT_SUCCESS);
    if (s->have_plan_d) WARN_LIB(cufftDestroy(s->plan_d), CUFFT_SUCCESS);
    if (s->have_plan_xp) WARN_LIB(cufftDestroy(s->plan_xp), CUFFT_SUCCESS);
    if (s->have_plan_r1) WARN_LIB(cufftDestroy(s->plan_r1), CUFFT_SUCCESS);
    if (s->have_plan_c1) WARN_LIB(cufftDestroy(s->plan_c1), CUFFT_SUCCESS);
    if (s->have_plan_idr) WARN_LIB(cufftDestroy(s->plan_idr), CUFFT_SUCCESS);
    if (s->have_plan_idc) WARN_LIB(cufftDestroy(s->plan_idc), CUFFT_SUCCESS);
    if (s->have_blas) WARN_LIB(cublasDestroy(s->blas), CUBLAS_STATUS_SUCCESS);
    for (GemmPick &g : s->pick) pick_free(&g);
    if (s->have_lt) WARN_LIB(cublasLtDestroy(s->lt), CUBLAS_STATUS_SUCCESS);
    for (cudaEvent_t ev : s->ev_g)
        if (ev) WARN_CUDA(cudaEventDestroy(ev));
    void *dev[] = {s->fft_work, s->fft_work_x, s->blas_work, s->d_x, s->d_x3, s->d_win, s->d_bg,
                   s->d_bgsum, s->d_X, s->d_mf, s->d_Mf, s->d_Bfull, s->d_Benf, s->d_C, s->d_Y,
                   s->d_P, s->d_xg, s->d_Xg, s->d_eidx[0], s->d_eidx[1], s->d_eidx[2],
                   s->d_bcur, s->d_ring, s->d_roll, s->d_kidx, s->d_kw, s->d_xp, s->d_xk,
                   s->d_disp, s->d_Z, s->d_tw, s->d_cq, s->d_Qfull, s->d_Qenf, s->d_xp3, s->d_xgc, s->d_Cc,
                   s->d_fpk, s->d_fpm, s->d_fps, s->d_bhat, s->d_cd, s->d_cdx, s->d_cdk, s->d_cX, s->d_cZ,
                   s->d_Cdef, s->d_cop, s->d_bias_enf, s->d_bias_full, s->d_cbad,
                   s->d_xc3, s->d_Acf[0], s->d_Acf[1], s->d_id, s->d_idk, s->d_idX, s->d_idZ, s->d_amax,
                   s->d_Ccf, s->d_cbias[0], s->d_cbias[1], s->d_ccop};
    for (void *p : dev) WARN_CUDA(cudaFree(p));
    oct_angio_cuda_destroy(s->ang);
    s->ang = NULL;
    for (int i = 0; i < DEPTH; i++) {
        Slot *sl = &s->slot[i];
        WARN_CUDA(cudaFree(sl->d_raw));
        WARN_CUDA(cudaFree(sl->d_bad));
        WARN_CUDA(cudaFreeHost(sl->h_bad));
        WARN_CUDA(cudaFreeHost(sl->h_out));
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                WARN_CUDA(cudaFree(sl->prod[m][k].f));
                WARN_CUDA(cudaFree(sl->prod[m][k].u));
            }
        if (sl->gexec) WARN_CUDA(cudaGraphExecDestroy(sl->gexec));
        for (int j = 0; j < EV_COUNT; j++)
            if (sl->ev[j]) WARN_CUDA(cudaEventDestroy(sl->ev[j]));
        cudaEvent_t more[] = {sl->ev_h2d0, sl->ev_h2d1, sl->ev_d2h0, sl->ev_d2h1};
        for (cudaEvent_t ev : more)
            if (ev) WARN_CUDA(cudaEventDestroy(ev));
        for (int p = 0; p < PARTS_MAX; p++) {
            if (sl->ev_in[p]) WARN_CUDA(cudaEventDestroy(sl->ev_in[p]));
            if (sl->ev_cv[p]) WARN_CUDA(cudaEventDestroy(sl->ev_cv[p]));
        }
    }
    WARN_CUDA(cudaFreeHost(s->h_stage[0]));
    WARN_CUDA(cudaFreeHost(s->h_stage[1]));
    cudaEvent_t evs[] = {s->ev_stg[0], s->ev_stg[1], s->ev_fork, s->ev_corr, s->ev_cj[0], s->ev_cj[1]};
    for (cudaEvent_t ev : evs)
        if (ev) WARN_CUDA(cudaEventDestroy(ev));
    cudaStream_t st[] = {s->s_comp, s->s_cfd, s->s_copy, s->s_d2h};
    for (cudaStream_t x : st)
        if (x) WARN_CUDA(cudaStreamDestroy(x));
    free(s);
}

/* Spectra per dispersion chunk for parts of n spectra and at most cap per
 * chunk: n / c for the smallest c in [ceil(n / cap), 2 ceil(n / cap)] that
 * divides n (every chunk a full batch: the plan transforms its whole batch
 * even for a shorter last chunk), else ceil(n / ceil(n / cap)). */
long long disp_batch(long long n, long long cap)
{
    if (n <= cap) return std::max(1ll, n);
    long long c0 = (n + cap - 1) / cap;
    for (long long c = c0; c <= 2 * c0; c++)
        if (n % c == 0) return n / c;
    return (n + c0 - 1) / c0;
}

oct_err cuda_create_inner(oct_engine *eng, CudaState *s, oct_error *e)
{
    const oct_geometry *g = &eng->setup.geom;
    s->device = eng->setup.device;
    TRY(oct_cuda_probe(s->device, eng->device_name, sizeof eng->device_name, e));
    CU(cudaSetDevice(s->device));
    s->device_ok = true;
    CU(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, s->device));
    /* the MSI sink's async tiles take up to 127 KB of dynamic shared memory (over 48 KB: opt-in) */
    CU(cudaFuncSetAttribute(sink_tile_kernel<SrcGemm, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)((size_t)SINK_TR * SINK_TD * SINK_STAGE_NL * sizeof(float))));
    if ((s->sink_base = sink_acquire()) < 0)
        return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: at most %d CUDA engines per process (their "
                             "product layouts live in constant memory); destroy one first", SINK_ENGINES);
    s->M = (int)g->samples;
    s->K = s->M / 2 + 1;
    s->N = (int)g->ascans;
    s->L = (int)g->lines;
    s->S = (long long)g->ascans * g->lines;
    s->R = (int)eng->setup.mask_count;
    s->RC = (int)eng->setup.cms_count; /* engine.c keeps the calibration (eng->cms_cal) */
    s->frame_bytes = (size_t)oct_geometry_frame_bytes(g);
    if (s->S > INT_MAX / 32)
        return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: %lld spectra per frame exceed the CUDA backend's limit of %d",
                             s->S, INT_MAX / 32);
    /* fp32: split TF32 (measured relative L2 7e-6..9e-6 for M = 1024..8192,
     * CUDA_NOTES.md); setup.cuda.gemm (octbench --gemm) or the set-up flag
     * OCT_SETUP_PLAIN_SGEMM choose sgemm. */
    s->gemm_mode = gemm_mode_of(&eng->setup);
    s->kM = s->gemm_mode == GEMM_SPLIT ? 3 * s->M : s->M;
    /* split FP16 by default for integer samples: measured on an H200
     * (2026-11-23) 4.8e-6 / 6.5e-6 relative L2 at M = 1024 / 8192 and the MSI
     * workloads 1.5-1.6x faster than split TF32 (README, CUDA_NOTES.md v5);
     * cuda.gemm = 3xtf32 keeps split TF32 */
    s->h16 = s->gemm_mode == GEMM_SPLIT &&
             (eng->setup.cuda.gemm == OCT_CUDA_GEMM_3XFP16 || eng->setup.cuda.gemm == OCT_CUDA_GEMM_AUTO) &&
             eng->setup.geom.sample_type != OCT_SAMPLE_F32;
    s->hsc_x = s->hsc_m = s->hsc_c = s->hsc_a = 1.0f;
    s->refmax = 0.0;
    if (eng->reference)
        for (int n = 0; n < s->M; n++) s->refmax = std::max(s->refmax, (double)fabsf(eng->reference[n]));

    CU(cudaStreamCreateWithFlags(&s->s_comp, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_cfd, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_copy, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->s_d2h, cudaStreamNonBlocking));
    CU(cudaEventCreateWithFlags(&s->ev_stg[0], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_stg[1], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_fork, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_corr, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_cj[0], cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&s->ev_cj[1], cudaEventDisableTiming));

    /* MSI path: the plan's, from the cost model of cuda_msi_rates.  With
     * msi_path auto the buffers of both paths are made, and a live change of
     * the lag window moves between them without allocating. */
    s->path = s->R > 0 ? eng->plan->msi_path : OCT_MSI_GEMM;
    s->both_paths = s->R > 0 && eng->setup.msi_path == OCT_MSI_AUTO;
    bool gemm = s->R > 0 && (s->path == OCT_MSI_GEMM || s->both_paths);
    bool fftp = s->R > 0 && (s->path == OCT_MSI_FFT || s->both_paths);
    bool blas = gemm || s->RC > 0; /* CMS is always one GEMM */

    /* work buffers; x3 only for the split-TF32 GEMM */
    TRY(dmalloc(s, &s->d_x, (size_t)s->S * s->M, "the windowed spectra", e));
    if (gemm && s->gemm_mode == GEMM_SPLIT)
        TRY(dmalloc(s, &s->d_x3, (size_t)s->S * s->kM, "the TF32 parts of the spectra", e));
    TRY(dmalloc(s, &s->d_win, (size_t)s->M, "the window", e));
    TRY(dmalloc(s, &s->d_bg, (size_t)s->M, "the background", e));
    TRY(dmalloc(s, &s->d_bgsum, (size_t)s->M, "the frame-mean sums", e));
    TRY(dmalloc(s, &s->d_fpk, (size_t)PARTS_MAX * s->M, "the per-part FPN keys", e));
    TRY(dmalloc(s, &s->d_fpm, (size_t)PARTS_MAX * s->M, "the per-part FPN means", e));
    TRY(dmalloc(s, &s->d_fps, (size_t)PARTS_MAX * s->M, "the per-part FPN segments", e));
    TRY(dmalloc(s, &s->d_X, (size_t)s->S * s->K, "the spectra's DFT", e));
    /* issue 7: every option can be switched on live, so its buffers are made
     * now (control changes never allocate): background vector and rolling
     * history, k-lin tables and spectra, dispersion phase and chunk */
    TRY(dmalloc(s, &s->d_bcur, (size_t)s->M, "the background", e));
    TRY(dmalloc(s, &s->d_ring, (size_t)OCT_ROLLING_MAX * s->M, "the rolling background history", e));
    TRY(dmalloc(s, &s->d_roll, 8, "the rolling background state", e));
    CU(cudaMemset(s->d_roll, 0, 8 * sizeof(int)));
    TRY(dmalloc(s, &s->d_kidx, (size_t)OCT_SINC_TAPS_MAX * s->M, "the k-linearisation indices", e));
    TRY(dmalloc(s, &s->d_kw, (size_t)OCT_SINC_TAPS_MAX * s->M, "the k-linearisation weights", e));
    TRY(dmalloc(s, &s->d_xp, (size_t)s->S * s->M, "the background-subtracted spectra", e));
    TRY(dmalloc(s, &s->d_xk, (size_t)s->S * s->M, "the k-linearised spectra", e));
    TRY(dmalloc(s, &s->d_disp, (size_t)s->M, "the dispersion phase", e));
    s->disp_logM = 0;
    while ((1ll << s->disp_logM) < s->M) s->disp_logM++;
    s->disp_fused = eng->setup.cuda.disp == OCT_CUDA_DISP_FUSED && (1ll << s->disp_logM) == s->M && s->M >= 16 &&
                    s->M <= (long long)DISP_FUSED_M_MAX;
    if (s->disp_fused) {
        std::vector<float2> tw((size_t)s->M);
        af_twiddles(tw.data(), (uint32_t)s->M);
        TRY(dmalloc(s, &s->d_tw, (size_t)s->M, "the dispersion FFT's twiddles", e));
        CU(cudaMemcpy(s->d_tw, tw.data(), (size_t)s->M * sizeof(float2), cudaMemcpyHostToDevice));
    }
    /* Intra-frame pipeline for volumes: the frame's DMA in `parts` parts, the
     * compute of each part starting when it has arrived (latency: DMA +
     * one part's compute instead of DMA + the frame's).  setup.cuda.parts
     * overrides (tests, benchmarks; 1 = off). */
    {
        const int pe = eng->setup.cuda.parts;
        int parts = pe > 0 ? pe : (s->L > 1 && s->S >= 4096 ? OCT_CUDA_PARTS_AUTO : 1);
        parts = std::max(1, std::min((int)PARTS_MAX, parts));
        while (parts > 1 && s->S % parts) parts--;
        s->parts = parts;
    }
    /* dispersion chunk (issue 19): its work spectra (pad -> C2C -> phase ->
     * C2C -> sink / store) stay in L2 (~1/3 of it), and the chunks tile a
     * part (and so the frame) exactly: the plan's batch is DB spectra,
     * transformed whole even for a shorter last chunk */
    {
        int l2 = 0;
        CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s->device));
        long long row = s->M * (long long)sizeof(float2);
        long long cap = eng->setup.cuda.disp_chunk > 0 ? (long long)eng->setup.cuda.disp_chunk
                        : l2 > 0                     ? (long long)l2 / 3 / row
                                                     : (64ll << 20) / row;
        s->DB = disp_batch(s->S / s->parts, std::max(1ll, cap));
    }
    TRY(dmalloc(s, &s->d_Z, (size_t)s->DB * s->M, "the dispersion work spectra", e));
    if (s->RC > 0) {
        size_t qn = (size_t)2 * s->RC;
        TRY(dmalloc(s, &s->d_cq, qn * s->M, "the CMS masks", e));
        TRY(dmalloc(s, &s->d_Qfull, qn * s->kM, "the CMS matrix", e));
        if (s->L > 1) TRY(dmalloc(s, &s->d_Qenf, qn * s->kM, "the CMS en-face matrix", e));
        if (s->gemm_mode == GEMM_SPLIT)
            TRY(dmalloc(s, &s->d_xp3, (size_t)s->S * s->kM, "the TF32 parts of the CMS spectra", e));
        TRY(dmalloc(s, &s->d_xgc, ((size_t)s->N + s->L) * s->kM, "the CMS cross-section spectra", e));
        int l2 = 0;
        CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s->device));
        size_t cap = std::max((size_t)l2 * 3 / 4 / sizeof(float), qn * 32);
        s->Cc_cap = std::min(cap, (size_t)s->S * qn);
        TRY(dmalloc(s, &s->d_Cc, s->Cc_cap, "the CMS GEMM output", e));
    }
    if (eng->reference)
        CU(cudaMemcpy(s->d_bg, eng->reference, (size_t)s->M * sizeof(float), cudaMemcpyHostToDevice));
    else
        CU(cudaMemset(s->d_bg, 0, (size_t)s->M * sizeof(float)));

    /* cuFFT: plans without their own work areas.  The spectra's R2C runs on
     * the CFD stream (GEMM path, concurrent with the MSI GEMM) with a work
     * area of its own; on the FFT path the MSI needs it first (compute stream). */
    size_t ws = 0, wmax = 0, wx = 0;
    long long n = s->M;
    FFT(cufftCreate(&s->plan_x));
    s->have_plan_x = true;
    FFT(cufftSetAutoAllocation(s->plan_x, 0));
    FFT(cufftMakePlanMany64(s->plan_x, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->S, &wx));
    s->x_on_comp = s->path == OCT_MSI_FFT && s->R > 0;
    FFT(cufftSetStream(s->plan_x, s->x_on_comp ? s->s_comp : s->s_cfd));
    /* dispersion C2C (in place, both directions); runs after plan_x on the
     * CFD path, so it shares plan_x's work area */
    size_t wd = 0;
    FFT(cufftCreate(&s->plan_d));
    s->have_plan_d = true;
    FFT(cufftSetAutoAllocation(s->plan_d, 0));
    FFT(cufftMakePlanMany64(s->plan_d, 1, &n, NULL, 1, n, NULL, 1, n, CUFFT_C2C, s->DB, &wd));
    wx = std::max(wx, wd);
    if (s->parts > 1) {
        size_t wp = 0;
        FFT(cufftCreate(&s->plan_xp));
        s->have_plan_xp = true;
        FFT(cufftSetAutoAllocation(s->plan_xp, 0));
        FFT(cufftMakePlanMany64(s->plan_xp, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->S / s->parts, &wp));
        FFT(cufftSetStream(s->plan_xp, s->s_cfd));
        wx = std::max(wx, wp);
        /* deferred background: one spectrum's R2C and C2C on the compute
         * stream (own small work areas: plan_x's belongs to the CFD stream) */
        TRY(dmalloc(s, &s->d_bhat, (size_t)s->M, "the background estimate", e));
        TRY(dmalloc(s, &s->d_cd, (size_t)s->M, "the background correction", e));
        TRY(dmalloc(s, &s->d_cdx, (size_t)s->M, "the background correction", e));
        TRY(dmalloc(s, &s->d_cdk, (size_t)s->M, "the background correction", e));
        TRY(dmalloc(s, &s->d_cX, (size_t)s->K, "the background correction's DFT", e));
        TRY(dmalloc(s, &s->d_cZ, (size_t)s->M, "the background correction's DFT", e));
        TRY(dmalloc(s, &s->d_cop, (size_t)3 * s->M, "the background correction's MSI operand", e));
        TRY(dmalloc(s, &s->d_cbad, 1, "a flag", e));
        int ext = eng->setup.cuda.parts_ext;
        /* (the CFD as a matrix product defers the MSI too: cfd_defer_ok) */
        bool cg_bufs = eng->setup.cuda.cfd != OCT_CUDA_CFD_FFT && s->L > 1 && s->h16 && gemm && s->M <= 2048;
        if (s->R > 0 && (ext == 3 || (ext == 0 && (DEFER_MSI_AUTO || cg_bufs)))) {
            /* the MSI of the parts into one frame-sized output (at most 256 MiB:
             * the en-face depths of a volume; all depths only of small ones) */
            s->bias_cap = (size_t)s->R * GEMM_LAGS_MAX;
            TRY(dmalloc(s, &s->d_bias_enf, s->bias_cap, "the background correction's MSI", e));
            TRY(dmalloc(s, &s->d_bias_full, s->bias_cap, "the background correction's MSI", e));
            s->Cdef_cap = std::min((size_t)s->S * s->bias_cap, (size_t)64 << 20);
            TRY(dmalloc(s, &s->d_Cdef, s->Cdef_cap, "the MSI GEMM output of a frame", e));
        }
        FFT(cufftPlan1d(&s->plan_r1, (int)s->M, CUFFT_R2C, 1));
        s->have_plan_r1 = true;
        FFT(cufftSetStream(s->plan_r1, s->s_comp));
        FFT(cufftPlan1d(&s->plan_c1, (int)s->M, CUFFT_C2C, 1));
        s->have_plan_c1 = true;
        FFT(cufftSetStream(s->plan_c1, s->s_comp));
    }

    /* per slot: input, flags, products, events */
    size_t out_pixels = 0;
    for (int i = 0; i < DEPTH; i++) {
        Slot *sl = &s->slot[i];
        sl->index = i;
        TRY(dmalloc(s, (uint8_t **)&sl->d_raw, s->frame_bytes, "the raw frame", e));
        TRY(dmalloc(s, &sl->d_bad, 1, "a flag", e));
        TRY(halloc(s, (void **)&sl->h_bad, sizeof(int), "a flag", e));
        *sl->h_bad = INT_MAX;
        for (int j = 0; j < EV_COUNT; j++) CU(cudaEventCreate(&sl->ev[j]));
        CU(cudaEventCreate(&sl->ev_h2d0));
        CU(cudaEventCreate(&sl->ev_h2d1));
        CU(cudaEventCreate(&sl->ev_d2h0));
        CU(cudaEventCreate(&sl->ev_d2h1));
        for (int p = 0; p < s->parts && s->parts > 1; p++) {
            CU(cudaEventCreateWithFlags(&sl->ev_in[p], cudaEventDisableTiming));
            CU(cudaEventCreateWithFlags(&sl->ev_cv[p], cudaEventDisableTiming));
        }
        out_pixels = 0;
        for (int m = 0; m < OCT_METHOD_COUNT; m++) {
            int D = method_depth(s, m);
            if (D == 0) continue;
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                ProdBuf *pb = &sl->prod[m][k];
                pb->cap = oct_kind_cap_setup(&eng->setup, m, (uint32_t)D, k);
                pb->off = out_pixels;
                out_pixels += pb->cap;
                TRY(dmalloc(s, &pb->f, pb->cap, "a product image", e));
                TRY(dmalloc(s, &pb->u, pb->cap, "a product image", e));
            }
        }
    }
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        int D = method_depth(s, m);
        if (D == 0) continue;
        s->eidx_cap[m] = (size_t)D;
        TRY(dmalloc(s, &s->d_eidx[m], (size_t)D, "the en-face indices", e));
    }
    s->out_pixels = out_pixels;
    s->h_out_bytes = out_pixels * (1 + sizeof(float));
    s->stage_bytes = std::min(s->frame_bytes, (size_t)8 << 20);
    /* Memory that cannot be registered (pageable frames, a ring the device
     * cannot register read-only) is staged by several threads: setup.threads,
     * else half the cores, at most 8. */
    s->stage_threads = eng->setup.threads > 0 ? eng->setup.threads : omp_get_num_procs() / 2;
    s->stage_threads = std::max(1, std::min(8, s->stage_threads));
    TRY(halloc(s, (void **)&s->h_stage[0], s->stage_bytes, "the frame staging", e));
    TRY(halloc(s, (void **)&s->h_stage[1], s->stage_bytes, "the frame staging", e));

    /* gathered cross-section spectra: a line (N) and a column (L) */
    size_t ng = (size_t)s->N + s->L;
    if (s->R > 0) {
        TRY(dmalloc(s, &s->d_mf, (size_t)s->R * s->M, "the filtered masks", e));
        if (fftp) {
            TRY(dmalloc(s, &s->d_Mf, (size_t)s->R * s->K, "the mask spectra", e));
            FFT(cufftCreate(&s->plan_m));
            s->have_plan_m = true;
            FFT(cufftSetAutoAllocation(s->plan_m, 0));
            FFT(cufftMakePlanMany64(s->plan_m, 1, &n, NULL, 1, n, NULL, 1, s->K, CUFFT_R2C, s->R, &ws));
            wmax = std::max(wmax, ws);
            FFT(cufftSetStream(s->plan_m, s->s_comp));
            /* C2R batch: ~64 MiB of output, at least one spectrum's R masks */
            s->CB = (64ll << 20) / (s->M * 4);
            if (eng->setup.cuda.c2r_batch > 0) s->CB = eng->setup.cuda.c2r_batch; /* tuning / tests */
            s->CB = std::max((long long)s->R, s->CB);
            TRY(dmalloc(s, &s->d_Y, (size_t)s->CB * s->K, "the MSI products", e));
            TRY(dmalloc(s, &s->d_P, (size_t)s->CB * s->M, "the MSI correlations", e));
            CU(cudaMemset(s->d_Y, 0, (size_t)s->CB * s->K * sizeof(float2)));
            FFT(cufftCreate(&s->plan_c2r));
            s->have_plan_c2r = true;
            FFT(cufftSetAutoAllocation(s->plan_c2r, 0));
            FFT(cufftMakePlanMany64(s->plan_c2r, 1, &n, NULL, 1, s->K, NULL, 1, n, CUFFT_C2R, s->CB, &ws));
            wmax = std::max(wmax, ws);
            FFT(cufftSetStream(s->plan_c2r, s->s_comp));
            TRY(dmalloc(s, &s->d_Xg, ng * s->K, "the cross-section spectra", e));
        }
        if (gemm) {
            TRY(ensure_matrices(eng, lag_count(eng), e));
            TRY(dmalloc(s, &s->d_xg, ng * s->kM, "the cross-section spectra", e));
        }
    }
    /* the CFD as a matrix product (cuda.cfd): volumes with the split-FP16
     * GEMM (its output chunk, gathered rows and handle), M <= 2048 (the
     * unit spectra's chain: ~40 MB at 2048) */
    if (eng->setup.cuda.cfd != OCT_CUDA_CFD_FFT && s->L > 1 && s->h16 && gemm && s->M <= 2048) {
        size_t M = (size_t)s->M, K = (size_t)s->K;
        TRY(dmalloc(s, (uint16_t **)&s->d_xc3, (size_t)s->S * 3 * M, "the CFD's split spectra", e));
        TRY(dmalloc(s, (uint16_t **)&s->d_Acf[0], 2 * K * 3 * M, "the CFD matrix", e));
        TRY(dmalloc(s, (uint16_t **)&s->d_Acf[1], 2 * K * 3 * M, "the CFD en-face matrix", e));
        TRY(dmalloc(s, &s->d_id, M * M, "the CFD matrix's unit spectra", e));
        TRY(dmalloc(s, &s->d_idk, M * M, "the CFD matrix's unit spectra", e));
        TRY(dmalloc(s, &s->d_idX, M * K, "the CFD matrix's unit spectra", e));
        TRY(dmalloc(s, &s->d_idZ, M * M, "the CFD matrix's unit spectra", e));
        TRY(dmalloc(s, &s->d_amax, 1, "a maximum", e));
        FFT(cufftPlan1d(&s->plan_idr, s->M, CUFFT_R2C, s->M));
        s->have_plan_idr = true;
        FFT(cufftSetStream(s->plan_idr, s->s_comp));
        FFT(cufftPlan1d(&s->plan_idc, s->M, CUFFT_C2C, s->M));
        s->have_plan_idc = true;
        FFT(cufftSetStream(s->plan_idc, s->s_comp));
        /* |x'| <= max |sample| + max |b| (as hsc_x, without the window) */
        s->hsc_c = pow2_scale(65536.0 + std::max(65536.0, s->refmax));
        if (s->parts > 1) { /* the deferred background: up to 128 en-face depths (else PARTS_BG) */
            s->Ccf_cap = (size_t)s->S * 2 * std::min(K, (size_t)128);
            TRY(dmalloc(s, &s->d_Ccf, s->Ccf_cap, "the CFD products of a frame", e));
            TRY(dmalloc(s, &s->d_cbias[0], 2 * K, "the background correction's CFD", e));
            TRY(dmalloc(s, &s->d_cbias[1], 2 * K, "the background correction's CFD", e));
            TRY(dmalloc(s, (uint16_t **)&s->d_ccop, 3 * M, "the background correction's CFD operand", e));
        }
    }
    if (blas) {
        BLAS(cublasCreate(&s->blas));
        s->have_blas = true;
        BLAS(cublasSetStream(s->blas, s->s_comp));
        /* our own workspace, so cuBLAS never allocates behind our back */
        s->blas_work_bytes = 32u << 20;
        TRY(dmalloc(s, (uint8_t **)&s->blas_work, s->blas_work_bytes, "the cuBLAS workspace", e));
        BLAS(cublasSetWorkspace(s->blas, s->blas_work, s->blas_work_bytes));
        BLAS(cublasSetMathMode(s->blas, s->gemm_mode == GEMM_SGEMM ? CUBLAS_PEDANTIC_MATH
                                                                   : CUBLAS_TF32_TENSOR_OP_MATH));
        if (eng->setup.cuda.gemm_algo == OCT_CUDA_GEMM_ALGO_AUTO && s->gemm_mode != GEMM_SGEMM) {
            BLAS(cublasLtCreate(&s->lt));
            s->have_lt = true;
            CU(cudaEventCreate(&s->ev_g[0]));
            CU(cudaEventCreate(&s->ev_g[1]));
        }
    }
    TRY(dmalloc(s, (uint8_t **)&s->fft_work_x, std::max(wx, (size_t)256), "the cuFFT work area", e));
    FFT(cufftSetWorkArea(s->plan_x, s->fft_work_x));
    FFT(cufftSetWorkArea(s->plan_d, s->fft_work_x));
    if (s->have_plan_xp) FFT(cufftSetWorkArea(s->plan_xp, s->fft_work_x)); /* same stream as the CFD's R2C */
    if (wmax > 0 || s->have_plan_m) {
        TRY(dmalloc(s, (uint8_t **)&s->fft_work, std::max(wmax, (size_t)256), "the cuFFT work area", e));
        if (s->have_plan_m) FFT(cufftSetWorkArea(s->plan_m, s->fft_work));
        if (s->have_plan_c2r) FFT(cufftSetWorkArea(s->plan_c2r, s->fft_work));
    }

    TRY(sync_plan(eng, eng->plan, e));
    TRY(prepare_msi(eng, e));
    TRY(prepare_cms(eng, e));
    CU(cudaStreamSynchronize(s->s_comp));
    return OCT_OK;
}

} /* namespace */

#endif
