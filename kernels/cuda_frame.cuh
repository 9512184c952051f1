/* cuda_frame.cuh - the per-frame stages of the CUDA executor: sink tables,
 * cross-section gathers, the intra-frame pipeline's parts, conversion and
 * background, CFD (with k-linearisation and dispersion), MSI (GEMM and FFT
 * paths), CMS and the angiography stage, and run_device() that chains them on
 * the streams.  Included once by engine_cuda.cu inside its anonymous
 * namespace (one translation unit: the kernels, set-up and stages share
 * static state); split off to keep each file readable. */

/* ------------------------------------------------------------------ */
/* per frame                                                            */

/* What the host needs to know of one method's sink table. */
struct Sink {
    int tab;       /* c_sink index: (engine range, slot) * OCT_METHOD_COUNT + method */
    int Q;         /* en-face depths */
    int D;         /* the method's depths (the table's D) */
    bool sub;      /* rows of the en-face depths (en-face, confocal) */
    bool xh, xv;   /* cross-section rows */
    bool full;     /* every spectrum needs every depth (plan.h) */
    bool all;      /* rows of depth set ALL: sink_tile_kernel (unless legacy) */
    bool every;    /* ... and one of them wants every spectrum (not only the cross-sections') */
    bool other;    /* rows of the other depth sets (en-face, ranges): sink_kernel */
    bool legacy;   /* setup.cuda.sink = OCT_CUDA_SINK_WARP: sink_kernel for every row */
    bool async;    /* OCT_CUDA_SINK_TILE: the MSI GEMM output's tiles copied by cp.async */
    int sms;       /* multiprocessors (sink_kernel's block size) */
};

Sink make_sink(oct_engine *eng, Slot *sl, int m)
{
    const oct_plan_method *pm = &eng->plan->method[m];
    Sink k;
    k.D = (int)pm->D;
    k.tab = (ST(eng)->sink_base * DEPTH + sl->index) * OCT_METHOD_COUNT + m;
    k.Q = (int)eng->plan->enface_n[m];
    k.sub = pm->sub;
    k.xh = pm->xs_h;
    k.xv = pm->xs_v;
    k.full = pm->full;
    k.all = k.every = k.other = false;
    for (uint32_t i = 0; i < pm->nlayout; i++) {
        const oct_layout *r = &pm->layout[i];
        if (r->select == OCT_SEL_GROUP) continue; /* angio_run */
        if (r->depths == OCT_DEPTHS_ALL && r->reduce == OCT_REDUCE_NONE) {
            k.all = true;
            k.every |= r->select == OCT_SEL_ALL;
        } else {
            k.other = true;
        }
    }
    k.legacy = eng->setup.cuda.sink == OCT_CUDA_SINK_WARP;
    k.async = eng->setup.cuda.sink == OCT_CUDA_SINK_TILE;
    k.sms = ST(eng)->sms;
    return k;
}

/* The plan's layout rows with this slot's buffers into c_sink (on the
 * compute stream: after the slot's previous frame, whose download waited
 * for all its sinks). */
oct_err upload_sinks(oct_engine *eng, Slot *sl, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_plan *pl = eng->plan;
    const oct_params *p = &pl->params;
    SinkTable t[OCT_METHOD_COUNT];
    memset(t, 0, sizeof t);
    for (int m = 0; m < OCT_METHOD_COUNT; m++) {
        const oct_plan_method *pm = &pl->method[m];
        SinkTable *k = &t[m];
        k->n = 0;
        k->D = (int)pm->D;
        k->N = s->N;
        k->Q = (int)pl->enface_n[m];
        k->h = p->xsec_h;
        k->v = p->xsec_v;
        k->eidx = s->d_eidx[m];
        int per[3] = {0, 0, 0};
        for (uint32_t i = 0; i < pm->nlayout; i++) {
            const oct_layout *r = &pm->layout[i];
            if (r->select == OCT_SEL_GROUP) /* angiography: angio_run, not the sink */
                continue;
            if (k->n >= OCT_KIND_ANGIO_FIRST)
                return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: more than %d products of a method",
                                     OCT_KIND_ANGIO_FIRST);
            SinkRow *d = &k->row[k->n++];
            if (r->depths != OCT_DEPTHS_ALL && ++per[r->depths] > SINK_GROUP_MAX)
                return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: more than %d products of one depth set",
                                     SINK_GROUP_MAX);
            d->f = sl->prod[m][r->kind].f;
            d->u = sl->prod[m][r->kind].u;
            d->st_l = r->st_l, d->st_a = r->st_a, d->st_d = r->st_d;
            d->select = r->select, d->sel = r->sel;
            d->depths = r->depths, d->reduce = r->reduce;
            d->d0 = r->d0, d->nslots = (int)r->nslots;
            d->g.gsc = p->gsc[r->cls];
            d->g.con = p->contrast[r->cls];
            d->g.bri = p->brightness[r->cls];
            d->g.logscale = p->scale == OCT_SCALE_LOG;
        }
    }
    if (sl->sink_valid && !memcmp(t, sl->sink_last, sizeof t)) return OCT_OK; /* the device holds them */
    sl->sink_valid = false;
    /* pageable source: staged before the call returns, t may go */
    CU(cudaMemcpyToSymbolAsync(c_sink, t, sizeof t, sizeof t * (size_t)(s->sink_base * DEPTH + sl->index),
                               cudaMemcpyHostToDevice,
                               s->s_comp));
    memcpy(sl->sink_last, t, sizeof t);
    sl->sink_valid = true;
    return OCT_OK;
}

template <class Src>
oct_err launch_sink(cudaStream_t st, const Src &src, const Sink &k, int mode, long long j0,
                    long long nrows, int nh, oct_error *e)
{
    if (nrows <= 0) return OCT_OK;
    /* Tiles where every row of the launch wants every depth (B-scans, full
     * volumes) or the rows are the gathered cross-sections; a volume whose
     * only all-depth rows are its cross-sections' spectra (392 of 38,400)
     * leaves them to the warp per row: tiles over every spectrum cost the
     * 200x192 volume's CFD sink 0.11 ms more (H200, 2026-12-02). */
    bool tile = !k.legacy && k.all && (mode == MODE_XS || (mode == MODE_ALL && k.every));
    if (tile) {
        /* depth set ALL: tiles of rows x depths (the table's D: the method's depths) */
        int D = k.D;
        int ws = sink_stage_floats(src);
        dim3 grid(blocks_for(nrows, SINK_TR), blocks_for(D, SINK_TD));
        bool launched = false;
        if constexpr (std::is_same<Src, SrcGemm>::value) {
            if (k.async && ws > 0) {
                size_t bytes = sink_async_bytes(src); /* opted in at create (cuda_setup.cuh) */
                sink_tile_kernel<SrcGemm, true><<<grid, dim3(32, SINK_TW), bytes, st>>>(src, k.tab, mode, j0,
                                                                                       nrows, nh, ws);
                launched = true;
            }
        }
        if (!launched)
            sink_tile_kernel<Src><<<grid, dim3(32, SINK_TW), (size_t)SINK_TW * ws * sizeof(float), st>>>(
                src, k.tab, mode, j0, nrows, nh, ws);
        LAUNCHED("sink_tile");
    }
    /* a warp per row: the reduced / en-face rows (or, legacy, all rows).
     * Legacy keeps its 8 warps per block; else blocks as small as 2 warps,
     * so that a small frame spreads over ~4 blocks per multiprocessor, and
     * the GEMM output of contiguous slots (en-face pass, slabs) is read
     * coalesced through shared memory (sink_value) */
    if (!tile || (k.other && mode == MODE_ALL)) {
        int threads = 256;
        if (!k.legacy && k.sms > 0)
            while (threads > 64 && blocks_for(nrows * 32, threads) < 4ll * k.sms) threads /= 2;
        /* legacy: the old reads too (no staging), for A/B.  The en-face
         * pass (MODE_SUB) reads directly as well: staged, the 200x192
         * volume's MSI sink took 0.18 ms more (H200, 2026-12-02); the lanes'
         * reads of their own lags are served by L1 there. */
        int ws = k.legacy || mode == MODE_SUB ? 0 : sink_stage_floats(src);
        size_t smem = (size_t)(threads / 32) * ws * sizeof(float);
        sink_kernel<Src><<<blocks_for(nrows * 32, threads), threads, smem, st>>>(src, k.tab, mode, j0, nrows, nh,
                                                                                tile ? 1 : 0, ws);
        LAUNCHED("sink");
    }
    return OCT_OK;
}

/* Gathers the spectra of the wanted cross-sections: nh (line) + nv (column).
 * The rows are computed on the device: no per-frame host list. */
oct_err gather_xsec(oct_engine *eng, bool want_h, bool want_v, int *nh, int *nv, oct_error *e)
{
    CudaState *s = ST(eng);
    *nh = want_h ? s->N : 0;
    *nv = want_v ? s->L : 0;
    int n = *nh + *nv;
    if (n == 0) return OCT_OK;
    int h = eng->params.xsec_h, v = eng->params.xsec_v;
    if (s->path == OCT_MSI_FFT) {
        long long tot = (long long)n * s->K;
        gather_xsec_kernel<float2><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
            s->d_X, s->K, s->N, h, v, *nh, n, s->d_Xg);
    } else {
        long long tot = (long long)n * s->kM;
        const float *src = s->gemm_mode == GEMM_SPLIT ? s->d_x3 : s->d_x;
        if (s->h16)
            gather_xsec_kernel<__half><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                (const __half *)s->d_x3, s->kM, s->N, h, v, *nh, n, (__half *)s->d_xg);
        else
            gather_xsec_kernel<float><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                src, s->kM, s->N, h, v, *nh, n, s->d_xg);
    }
    LAUNCHED("gather");
    return OCT_OK;
}

#include "cuda_cfd.cuh" /* the CFD as a matrix product (cuda.cfd) */

/* How a frame goes through the intra-frame pipeline (volumes DMA'd from
 * registered memory in parts):
 * PARTS_ALL: each part converted, CFD'd (k-lin, R2C, plain or dispersion
 *   sink: all per spectrum) and MSI'd (en-face / all depths) on arrival;
 *   cross-sections and CMS once the whole frame is converted.
 * PARTS_BG: frame-mean / rolling / FPN background: the column sums (FPN:
 *   the best segment of those complete so far) of each part on arrival (the
 *   reduction hides under the DMA), the rest of the frame once the last part
 *   has landed (the subtraction needs the whole frame's statistics).
 * PARTS_DEFER (issue 19, whole-frame backgrounds with the CFD on): each
 *   part's CFD (k-lin, R2C, dispersion chain; all linear) runs on arrival
 *   with an estimate bh of the background (the mean of part 0) instead of
 *   b; once the last part is in, b is known and the same chain applied to
 *   the one spectrum d = b - bh is subtracted from every complex spectrum
 *   before |.| (SrcCfdCorr: one memory-bound pass).  Exact up to rounding;
 *   bh keeps the parts' values centred like b, so no DC-sized term cancels.
 *   The MSI either converts with the exact b after the last part, or
 *   (defer_msi: parts_ext 3, or 0 where DEFER_MSI_AUTO) is deferred
 *   likewise (linear up to its |.|): each part's GEMM into a frame-sized
 *   output (d_Cdef), the GEMM of d subtracted in the sink (SrcGemm bias),
 *   so that after the last part only its own CFD and MSI, the sinks and
 *   the correction remain.  The background statistics (column sums / FPN
 *   segments) per part as PARTS_BG.  Not with CMS or angiography (they
 *   read the converted spectra), nor where the MSI GEMM reads d_x while the
 *   CFD's parts are in it (SGEMM / TF32 without k-lin) unless the MSI is
 *   deferred too, nor when a deferred MSI's frame output does not fit
 *   d_Cdef (all depths of a large volume): PARTS_BG there.
 * With the CFD as a matrix product (cuda.cfd, cuda_cfd.cuh) the parts'
 * CFD is their GEMM on the compute stream (no CFD stream): per part in
 * PARTS_ALL; in PARTS_DEFER each part's GEMM with bh into d_Ccf and the
 * product of d subtracted in the sink (SrcCms bias), the MSI deferred with
 * it; in PARTS_BG (parts_ext 1, or d_Ccf too small) after the last part.
 * Off for the FFT-path MSI (or its masks: plan_x on the compute stream
 * shares the CFD plans' work area).  setup.cuda.parts_ext: 0 (default) as
 * above, 1 PARTS_BG for the whole-frame backgrounds, 2 off for k-lin,
 * dispersion and the whole-frame backgrounds (before issue 19.3), 3 as 0
 * with the MSI deferred.  With parts, the stage times other than device_ms
 * mix stages (octbench times a replay, which never uses parts). */
enum { PARTS_OFF = 0, PARTS_ALL = 1, PARTS_BG = 2, PARTS_DEFER = 3 };

/* The CFD's product deferred likewise (cuda.cfd with a whole-frame
 * background): each part's GEMM (x' with bh) into d_Ccf, the product of
 * d = b - bh subtracted in the sink (SrcCms bias); needs the frame's
 * en-face output to fit d_Ccf (else PARTS_BG: the product after the last part). */
bool cfd_defer_ok(const oct_engine *eng)
{
    const CudaState *s = ST(eng);
    int ext = eng->setup.cuda.parts_ext;
    if ((ext != 0 && ext != 3) || !s->d_Ccf || !cfd_gemm_ok(eng)) return false;
    return (size_t)s->S * 2 * eng->plan->enface_n[OCT_METHOD_CFD] <= s->Ccf_cap;
}
bool msi_defer_ok(const oct_engine *eng)
{
    const CudaState *s = ST(eng);
    int ext = eng->setup.cuda.parts_ext;
    /* (with the CFD's product deferred the MSI is by default too: else its
     * whole frame would follow the last part) */
    if (ext != 3 && !(ext == 0 && (DEFER_MSI_AUTO || cfd_defer_ok(eng)))) return false;
    if (!(msi_on(eng) && s->R > 0) || s->path != OCT_MSI_GEMM || !s->d_Cdef) return false;
    const oct_plan_method *pm = &eng->plan->method[OCT_METHOD_MSI];
    size_t nl = (size_t)lag_count(eng);
    size_t ncol = (pm->full ? (size_t)s->R : (size_t)eng->plan->enface_n[OCT_METHOD_MSI]) * nl;
    return (size_t)s->R * nl <= s->bias_cap && (size_t)s->S * ncol <= s->Cdef_cap;
}
bool defer_ok(const oct_engine *eng)
{
    const CudaState *s = ST(eng);
    if (!cfd_on(eng) || (cms_on(eng) && s->RC > 0) || !s->have_plan_r1 || !s->have_plan_c1) return false;
    if (cfd_gemm_ok(eng) && !cfd_defer_ok(eng)) return false; /* the CFD's product after the last part: PARTS_BG */
    bool msi = msi_on(eng) && s->R > 0;
    /* MSI and CFD share d_x: only if both take the parts' bh (the CFD's
     * product reads its own x') */
    if (msi && !msi_defer_ok(eng) && s->klin_T == 0 && s->gemm_mode != GEMM_SPLIT && !cfd_gemm_ok(eng))
        return false;
    const oct_plan_method *pm = &eng->plan->method[OCT_METHOD_CFD];
    for (uint32_t i = 0; i < pm->nlayout; i++)
        if (pm->layout[i].select == OCT_SEL_GROUP) return false; /* angiography reads x~ and d_X */
    return true;
}
int parts_mode(const oct_engine *eng)
{
    const CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    if (s->parts <= 1 || s->L <= 1) return PARTS_OFF;
    int ext = eng->setup.cuda.parts_ext;
    bool cfd = cfd_on(eng), msi = msi_on(eng) && s->R > 0;
    if (msi && s->path != OCT_MSI_GEMM) return PARTS_OFF;
    /* plan_x bound to the compute stream (FFT-path masks) shares its work
     * area with the per-part plans on the CFD stream: a later frame's R2C
     * there could overlap this frame's parts */
    if (s->x_on_comp) return PARTS_OFF;
    if (cfd && (s->klin_T > 0 || s->disp_on) && ext == 2) return PARTS_OFF;
    bool whole = ext != 2; /* the whole-frame backgrounds in parts */
    int bgm = (ext == 0 || ext == 3) && defer_ok(eng) ? PARTS_DEFER : PARTS_BG;
    switch (p->background) {
    case OCT_BG_NONE:
    case OCT_BG_REFERENCE: return PARTS_ALL;
    case OCT_BG_FRAME_MEAN:
    case OCT_BG_ROLLING: return whole ? bgm : PARTS_OFF;
    case OCT_BG_FPN: /* segments of a valid G; (a bad G: background() says so) */
        return whole && p->background_param >= 2 && p->background_param <= OCT_FPN_SEGMENT_MAX &&
                       s->S >= p->background_param
                   ? bgm
                   : PARTS_OFF;
    default: return PARTS_OFF;
    }
}

/* C (ncol x nj, column-major) = A^T (ncol x kM) * X (kM x nj): the MSI GEMM
 * of the engine's kind (split FP16 / split TF32 / SGEMM / TF32). */
oct_err msi_gemm_into(CudaState *s, const float *A, const float *X, int ncol, long long nj, float *C, oct_error *e)
{
    const float one = 1.0f, zero = 0.0f;
    int kM = s->kM;
    if (s->h16) {
        /* split FP16: [hi | lo | hi] . [hi ; hi ; lo] of the scaled
         * operands, FP32 accumulation; alpha (a power of two) undoes the
         * scales exactly */
        const float alpha = 1.0f / (s->hsc_x * s->hsc_m);
        TRY(msi_gemm(s, GK_F16, ncol, (int)nj, kM, &alpha, (const __half *)A, (const __half *)X, C, e));
    } else if (s->gemm_mode == GEMM_SGEMM)
        BLAS(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A, kM, X, kM, &zero, C, ncol));
    else /* TF32 tensor cores; the split operands are exact TF32 values */
        TRY(msi_gemm(s, GK_TF32, ncol, (int)nj, kM, &one, A, X, C, e));
    return OCT_OK;
}

/* One MSI pass over nrows rows (spectra j0.. or gathered) with nslots depth
 * slots (all R, or the en-face list).  cdef (PARTS_DEFER): the GEMM output
 * of the rows goes to cdef (rows of the frame) and the sink waits for the
 * last part (run_device); bias: subtracted before |.| (GEMM path). */
oct_err msi_pass(oct_engine *eng, const Sink &k, int mode, long long jbase, long long nrows, int nh,
                 oct_error *e, float *cdef = NULL, const float *bias = NULL)
{
    CudaState *s = ST(eng);
    int nl = lag_count(eng);
    bool sub = mode == MODE_SUB;
    int nslots = sub ? k.Q : s->R;
    if (nrows <= 0 || nslots <= 0) return OCT_OK;
    bool xs = mode == MODE_XS;
    if (s->path == OCT_MSI_GEMM) {
        const float *A = sub ? s->d_Benf : s->d_Bfull;
        const float *X = xs ? s->d_xg : (s->gemm_mode == GEMM_SPLIT ? s->d_x3 : s->d_x);
        int ncol = nslots * nl, kM = s->kM;
        long long cs_max = std::max(1ll, (long long)(s->C_cap / ncol));
        long long nch = (nrows + cs_max - 1) / cs_max;
        long long cs = (nrows + nch - 1) / nch;
        for (long long j0 = jbase; j0 < jbase + nrows; j0 += cs) {
            long long nj = std::min(cs, jbase + nrows - j0);
            /* X holds __half (split FP16) or floats: offsets in elements */
            const float *Xj = s->h16 ? (const float *)((const __half *)X + j0 * kM) : X + j0 * kM;
            float *C = cdef ? cdef + j0 * ncol : s->d_C;
            TRY(msi_gemm_into(s, A, Xj, ncol, nj, C, e));
            if (cdef) continue;
            SrcGemm src = {s->d_C, ncol, nl, bias};
            TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
        }
    } else {
        const float2 *X = xs ? s->d_Xg : s->d_X;
        long long cs = std::max(1ll, s->CB / nslots);
        for (long long j0 = jbase; j0 < jbase + nrows; j0 += cs) {
            long long nj = std::min(cs, jbase + nrows - j0);
            long long tot = nj * nslots * s->K;
            mask_product_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                X + j0 * s->K, s->K, (int)nj, s->d_Mf, sub ? s->d_eidx[OCT_METHOD_MSI] : NULL,
                nslots, s->d_Y);
            LAUNCHED("mask_product");
            FFT(cufftExecC2R(s->plan_c2r, (cufftComplex *)s->d_Y, s->d_P));
            SrcFft src = {s->d_P, nslots, s->M, eng->params.lag_lo, nl, 1.0f / (float)s->M};
            TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
        }
    }
    return OCT_OK;
}

/* One CMS pass (GEMM with the stacked Re/Im rows of q, then |.|) over
 * nrows rows: spectra, or gathered cross-section spectra (MODE_XS). */
oct_err cms_pass(oct_engine *eng, const Sink &k, int mode, long long nrows, int nh, oct_error *e)
{
    CudaState *s = ST(eng);
    bool sub = mode == MODE_SUB, xs = mode == MODE_XS;
    int nslots = sub ? k.Q : s->RC;
    if (nrows <= 0 || nslots <= 0) return OCT_OK;
    const float *A = sub ? s->d_Qenf : s->d_Qfull;
    const float *X = xs ? s->d_xgc : (s->gemm_mode == GEMM_SPLIT ? s->d_xp3 : s->d_xp);
    int ncol = 2 * nslots, kM = s->kM;
    long long cs_max = std::max(1ll, (long long)(s->Cc_cap / ncol));
    long long nch = (nrows + cs_max - 1) / cs_max;
    long long cs = (nrows + nch - 1) / nch;
    const float one = 1.0f, zero = 0.0f;
    for (long long j0 = 0; j0 < nrows; j0 += cs) {
        long long nj = std::min(cs, nrows - j0);
        /* C (ncol x nj, column-major) = A^T (ncol x kM) * X (kM x nj) */
        if (s->gemm_mode == GEMM_SGEMM)
            BLAS(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A, kM,
                             X + j0 * kM, kM, &zero, s->d_Cc, ncol));
        else
            BLAS(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, ncol, (int)nj, kM, &one, A, CUDA_R_32F,
                              kM, X + j0 * kM, CUDA_R_32F, kM, &zero, s->d_Cc, CUDA_R_32F, ncol,
                              CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        SrcCms src = {s->d_Cc, ncol, NULL};
        TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
    }
    return OCT_OK;
}

/* Adds the column sums of raw spectra [j0, j0 + ns) to d_bgsum (compute stream). */
oct_err colsum_rows(oct_engine *eng, Slot *sl, long long j0, long long ns, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_geometry *g = &eng->setup.geom;
    int sh = g->sample_type == OCT_SAMPLE_F32 ? 0 : (int)g->sample_shift;
    dim3 grid(blocks_for(s->M, 256), (unsigned)std::min(ns, 512ll));
    long long o = j0 * s->M;
    switch (g->sample_type) {
    case OCT_SAMPLE_U16: colsum_kernel<uint16_t><<<grid, 256, 0, s->s_comp>>>((const uint16_t *)sl->d_raw + o, ns, s->M, sh, s->d_bgsum); break;
    case OCT_SAMPLE_I16: colsum_kernel<int16_t><<<grid, 256, 0, s->s_comp>>>((const int16_t *)sl->d_raw + o, ns, s->M, sh, s->d_bgsum); break;
    default: colsum_kernel<float><<<grid, 256, 0, s->s_comp>>>((const float *)sl->d_raw + o, ns, s->M, 0, s->d_bgsum); break;
    }
    LAUNCHED("colsum");
    return OCT_OK;
}

/* Background of this frame into s->d_bcur (NULL: none), on the compute
 * stream, which orders the rolling history across frames in submission
 * order.  *commit: the rolling history must take this frame's mean after
 * the conversion.  sums_done: the column sums are in d_bgsum already (the
 * intra-frame pipeline summed the parts as they arrived). */
oct_err background(oct_engine *eng, Slot *sl, bool replay, bool sums_done, const float **bvec, bool *commit,
                   oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    const oct_geometry *g = &eng->setup.geom;
    int sh = g->sample_type == OCT_SAMPLE_F32 ? 0 : (int)g->sample_shift;
    double invS = 1.0 / (double)s->S;
    unsigned mb = blocks_for(s->M, 256);
    *bvec = NULL;
    *commit = false;
    if (p->background != OCT_BG_ROLLING) s->roll_active = false;
    switch (p->background) {
    case OCT_BG_NONE: return OCT_OK;
    case OCT_BG_REFERENCE:
        if (!eng->reference) return oct_error_set(e, OCT_EINVAL, "cuda: reference background without a reference");
        *bvec = s->d_bg;
        return OCT_OK;
    case OCT_BG_FRAME_MEAN:
    case OCT_BG_ROLLING: {
        if (!sums_done) {
            CU(cudaMemsetAsync(s->d_bgsum, 0, (size_t)s->M * sizeof(double), s->s_comp));
            TRY(colsum_rows(eng, sl, 0, s->S, e));
        }
        if (p->background == OCT_BG_FRAME_MEAN) {
            bg_mean_kernel<<<mb, 256, 0, s->s_comp>>>(s->d_bgsum, invS, s->M, s->d_bcur);
            LAUNCHED("bg_mean");
        } else {
            int K = p->background_param;
            if (K < 1 || K > OCT_ROLLING_MAX)
                return oct_error_set(e, OCT_EINVAL, "cuda: rolling background over %d frames (1..%d)", K,
                                     OCT_ROLLING_MAX);
            if (!s->roll_active || s->roll_K != K) { /* (re)start the history */
                CU(cudaMemsetAsync(s->d_roll, 0, 8 * sizeof(int), s->s_comp));
                s->roll_active = true;
                s->roll_K = K;
            }
            roll_mean_kernel<<<mb, 256, 0, s->s_comp>>>(s->d_bgsum, invS, s->d_ring, s->M, K, s->d_roll,
                                                        s->d_bcur);
            LAUNCHED("roll_mean");
            *commit = !replay; /* a timing replay is not a new frame */
        }
        *bvec = s->d_bcur;
        return OCT_OK;
    }
    case OCT_BG_FPN: {
        int G = p->background_param;
        if (G < 2 || G > OCT_FPN_SEGMENT_MAX)
            return oct_error_set(e, OCT_EINVAL, "cuda: fixed-pattern segment of %d spectra (2..%d)", G,
                                 OCT_FPN_SEGMENT_MAX);
        dim3 blk(32, FPN_WARPS);
        unsigned gb = blocks_for(s->M, 32);
        if (sums_done) { /* the parts' results are in d_fpk/d_fpm/d_fps */
            fpn_reduce_kernel<<<mb, 256, 0, s->s_comp>>>(s->d_fpk, s->d_fpm, s->d_fps, sl->nparts, s->M, s->d_bcur);
            LAUNCHED("fpn_reduce");
            *bvec = s->d_bcur;
            return OCT_OK;
        }
        switch (g->sample_type) {
        case OCT_SAMPLE_U16: fpn_kernel<uint16_t><<<gb, blk, 0, s->s_comp>>>((const uint16_t *)sl->d_raw, s->S, s->M, sh, G, s->d_bcur, 0, -1, NULL, NULL, NULL); break;
        case OCT_SAMPLE_I16: fpn_kernel<int16_t><<<gb, blk, 0, s->s_comp>>>((const int16_t *)sl->d_raw, s->S, s->M, sh, G, s->d_bcur, 0, -1, NULL, NULL, NULL); break;
        default: fpn_kernel<float><<<gb, blk, 0, s->s_comp>>>((const float *)sl->d_raw, s->S, s->M, 0, G, s->d_bcur, 0, -1, NULL, NULL, NULL); break;
        }
        LAUNCHED("fpn");
        *bvec = s->d_bcur;
        return OCT_OK;
    }
    default:
        return oct_error_set(e, OCT_EINVAL, "cuda: background mode %u unknown", p->background);
    }
}

/* The CFD's k-linearisation (when on) and R2C of spectra [j0, j0 + np) on
 * the CFD stream, into d_X: the per-part step both part paths share. */
static oct_err cfd_r2c_rows(oct_engine *eng, bool klin, long long j0, long long np, oct_error *e)
{
    CudaState *s = ST(eng);
    const float *xc = klin ? s->d_xk : s->d_x;
    if (klin) {
        launch_klin(s->s_cfd, s->d_xp + j0 * s->M, s->d_kidx, s->d_kw, s->klin_T, s->d_win, s->M, np,
                    s->d_xk + j0 * s->M);
        LAUNCHED("klin");
    }
    FFT(cufftExecR2C(s->plan_xp, (cufftReal *)(xc + j0 * s->M), (cufftComplex *)(s->d_X + j0 * s->K)));
    return OCT_OK;
}

/* The dispersion chain of spectra [jb, jb + nrows) (their R2C in d_X) on
 * stream st, in chunks of at most DB spectra: pad -> C2C inverse -> phase ->
 * C2C forward -> sink, or (store: PARTS_DEFER) bins [0, K) back into d_X. */
oct_err disp_rows(oct_engine *eng, cudaStream_t st, const Sink &k, long long jb, long long nrows, bool store,
                  oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    if (s->disp_fused && !s->x_on_comp) {
        /* one block per spectrum, in place on its bins of d_X (not with
         * the FFT-path MSI: its masks read d_X on the compute stream) */
        if (nrows > 0) {
            disp_fused_kernel<<<(unsigned)nrows, af_threads((uint32_t)s->M), 2 * (size_t)s->M * sizeof(float2), st>>>(
                s->d_X + jb * s->K, s->K, s->M, s->disp_logM, p->freq_cutoff, s->d_disp, s->d_tw, 1.0f / (float)s->M);
            LAUNCHED("disp_fused");
        }
        if (store) return OCT_OK; /* the bins are in d_X already */
        SrcDisp src = {s->d_X + jb * s->K, s->K, p->freq_cutoff}; /* row stride K */
        return launch_sink(st, src, k, MODE_ALL, jb, nrows, 0, e);
    }
    FFT(cufftSetStream(s->plan_d, st));
    long long nch = (nrows + s->DB - 1) / s->DB;
    long long cs = (nrows + nch - 1) / nch;
    for (long long j0 = jb; j0 < jb + nrows; j0 += cs) {
        long long nj = std::min(cs, jb + nrows - j0);
        long long tot = nj * s->M;
        /* rows nj..DB-1 of the batch are stale: transformed, never read */
        disp_pad_kernel<<<blocks_for(tot, 256), 256, 0, st>>>(s->d_X + j0 * s->K, s->K, s->M, p->freq_cutoff,
                                                             nj, s->d_Z);
        LAUNCHED("disp_pad");
        FFT(cufftExecC2C(s->plan_d, (cufftComplex *)s->d_Z, (cufftComplex *)s->d_Z, CUFFT_INVERSE));
        disp_phase_kernel<<<blocks_for(tot, 256), 256, 0, st>>>(s->d_Z, s->d_disp, s->M, nj,
                                                               1.0f / (float)s->M);
        LAUNCHED("disp_phase");
        FFT(cufftExecC2C(s->plan_d, (cufftComplex *)s->d_Z, (cufftComplex *)s->d_Z, CUFFT_FORWARD));
        if (store) { /* the pad read these rows of d_X before (same stream) */
            disp_store_kernel<<<blocks_for(nj * s->K, 256), 256, 0, st>>>(s->d_Z, s->M, s->K, nj,
                                                                         s->d_X + j0 * s->K);
            LAUNCHED("disp_store");
            continue;
        }
        SrcDisp src = {s->d_Z, s->M, p->freq_cutoff};
        TRY(launch_sink(st, src, k, MODE_ALL, j0, nj, 0, e));
    }
    return OCT_OK;
}

/* CFD of the frame on stream st (after x~ or x' is ready there): [k-lin]
 * -> R2C (unless done on the compute stream already) -> plain |X| or the
 * dispersion chain -> sink. */
oct_err cfd_run(oct_engine *eng, Slot *sl, cudaStream_t st, bool r2c_done,
                const bool want[OCT_KIND_COUNT], oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    bool klin = s->klin_T > 0;
    if (klin) {
        launch_klin(st, s->d_xp, s->d_kidx, s->d_kw, s->klin_T, s->d_win, s->M, s->S, s->d_xk);
        LAUNCHED("klin");
    }
    if (!r2c_done) /* plan_x is bound to st (see run_device) */
        FFT(cufftExecR2C(s->plan_x, klin ? s->d_xk : s->d_x, (cufftComplex *)s->d_X));
    Sink k = make_sink(eng, sl, OCT_METHOD_CFD);
    if (!s->disp_on) {
        SrcCfd src = {s->d_X, s->K, s->M, p->freq_cutoff};
        return launch_sink(st, src, k, MODE_ALL, 0, s->S, 0, e);
    }
    return disp_rows(eng, st, k, 0, s->S, false, e);
}

/* Gray levels of an angiography image (the sink does them for the others). */
__global__ void angio_gray_kernel(const float *__restrict__ f, uint8_t *__restrict__ u, long long n,
                                  oct_gray g)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) u[i] = oct_gray_level(f[i], g);
}

/* En-face angiogram: pixel i = (g, n) of [G][N] is the mean / max over
 * d0 <= d < d1 of the metric image (strides of its GROUP layout row); one
 * thread per pixel, summed in double like the CPU's. */
__global__ void angio_slab_kernel(const float *__restrict__ img, long long st_g, long long st_n,
                                  long long st_d, long long n, int N, int d0, int d1, bool max,
                                  float *__restrict__ out)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float *p = img + (i / N) * st_g + (i % N) * st_n;
    double acc = max ? -(double)INFINITY : 0.0;
    for (int d = d0; d < d1; d++) {
        double v = p[(long long)d * st_d];
        acc = max ? fmax(acc, v) : acc + v;
    }
    out[i] = (float)(max ? acc : acc / (double)(d1 - d0));
}

/* Angiography (SPEC 10.3) of the frame on the compute stream, once x~ of
 * every spectrum is in d_x (or d_xk with k-linearisation) and the CFD's
 * R2C of it in d_X (joined from the CFD stream; angio with dispersion is
 * refused in engine.c): the GROUP rows of the CFD layout, through
 * angio_cuda.cu (|d_X| for the CFD magnitudes, one batched R2C for the K
 * bands), then their gray levels. */
oct_err angio_run(oct_engine *eng, Slot *sl, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT],
                  oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_params *p = &eng->params;
    const oct_plan_method *pm = &eng->plan->method[OCT_METHOD_CFD];
    bool any = false;
    for (int k = OCT_KIND_ANGIO_FIRST; k < OCT_KIND_COUNT; k++)
        any |= want[OCT_METHOD_CFD][k];
    if (!any) return OCT_OK;
    const uint32_t R = eng->setup.repeats;
    oct_angio_config cf;
    oct_angio_config_default(&cf, (uint32_t)s->M, (uint32_t)s->N, R);
    cf.freq_cutoff = p->freq_cutoff;
    cf.metrics = p->angio_metrics;
    cf.bands = p->angio_bands;
    cf.band_width = p->angio_band_width;
    cf.align = p->angio_align;
    cf.cuda_path = (uint32_t)eng->setup.cuda.angio_path;
    cf.cuda_chunk = (uint32_t)std::min<int64_t>(std::max<int64_t>(eng->setup.cuda.angio_chunk, 0), UINT32_MAX);
    if (!s->ang || memcmp(&cf, &s->ang_cfg, sizeof cf)) {
        oct_angio_cuda_destroy(s->ang);
        s->ang = NULL;
        /* chunks of whole groups, ~32 k spectra: K x 32 k x M floats of bands */
        size_t chunk = std::min<size_t>((size_t)s->S, 32768);
        TRY(oct_angio_cuda_create(&s->ang, &cf, s->s_comp, chunk, e));
        s->ang_cfg = cf;
    }
    oct_angio_dout o;
    memset(&o, 0, sizeof o);
    for (uint32_t i = 0; i < pm->nlayout; i++) {
        const oct_layout *r = &pm->layout[i];
        if (r->select != OCT_SEL_GROUP || oct_kind_angio_source(r->kind) >= 0) continue;
        o.img[r->kind - OCT_KIND_ANGIO_FIRST] = sl->prod[OCT_METHOD_CFD][r->kind].f;
        o.stride_g = (size_t)r->st_l, o.stride_n = (size_t)r->st_a, o.stride_d = (size_t)r->st_d;
    }
    const float *xt = s->klin_T > 0 ? s->d_xk : s->d_x;
    const uint32_t G = (uint32_t)(s->L / R);
    /* d_X is the R2C of xt with rows of K = M/2+1 = D (no dispersion here) */
    TRY(oct_angio_cuda_run_x(s->ang, s->disp_on ? NULL : s->d_X, xt, G, &o, e));
    /* en-face angiograms: the slab of each metric image (before the gray levels) */
    for (uint32_t i = 0; i < pm->nlayout; i++) {
        const oct_layout *r = &pm->layout[i];
        const int src = oct_kind_angio_source(r->kind);
        if (src < 0) continue;
        const oct_layout *sr = oct_plan_layout(eng->plan, OCT_METHOD_CFD, src);
        if (!sr)
            return oct_error_set(e, OCT_ESTATE, "cuda: %s/%s without its metric image",
                                 oct_kind_name(r->kind), oct_kind_name(src));
        angio_slab_kernel<<<blocks_for((long long)r->count, 256), 256, 0, s->s_comp>>>(
            sl->prod[OCT_METHOD_CFD][src].f, sr->st_l, sr->st_a, sr->st_d, (long long)r->count,
            s->N, r->d0, r->d1, r->reduce == OCT_REDUCE_MAX, sl->prod[OCT_METHOD_CFD][r->kind].f);
        LAUNCHED("angio_slab");
    }
    for (uint32_t i = 0; i < pm->nlayout; i++) {
        const oct_layout *r = &pm->layout[i];
        if (r->select != OCT_SEL_GROUP) continue;
        oct_gray g = {p->gsc[r->cls], p->contrast[r->cls], p->brightness[r->cls], p->scale == OCT_SCALE_LOG};
        const ProdBuf *pb = &sl->prod[OCT_METHOD_CFD][r->kind];
        angio_gray_kernel<<<blocks_for((long long)r->count, 256), 256, 0, s->s_comp>>>(pb->f, pb->u,
                                                                                     (long long)r->count, g);
        LAUNCHED("angio_gray");
    }
    return OCT_OK;
}

/* Records a frame's event (EV_*: timing, and the host / other streams wait
 * for it): while the frame is captured, as an external record node (an
 * internal one would only order the capture and never fire at launch). */
oct_err mark(const CudaState *s, cudaEvent_t ev, cudaStream_t st, oct_error *e)
{
    CU(cudaEventRecordWithFlags(ev, st, s->capturing ? cudaEventRecordExternal : cudaEventRecordDefault));
    return OCT_OK;
}

/* The compute stream waits for part p of the frame's input copy (its event
 * recorded on the copy stream by submit): while the frame is captured, as an
 * external wait node, which waits at each launch for the record made before
 * it (a plain wait on an event recorded outside the capture is not allowed). */
oct_err wait_in(const CudaState *s, const Slot *sl, int p, oct_error *e)
{
    CU(cudaStreamWaitEvent(s->s_comp, sl->ev_in[p], s->capturing ? cudaEventWaitExternal : cudaEventWaitDefault));
    return OCT_OK;
}

/* The device work of one frame already in (or queued for) sl->d_raw:
 * compute stream, CFD forked onto its own stream and joined at the end.
 * replay: a timing re-run of the last frame (the rolling history is kept).
 * Every launch is made here (run_device captures it as it is); host-only
 * steps that may not be captured (the sink tables' upload) are in run_device. */
oct_err run_frame(oct_engine *eng, Slot *sl, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT],
                  bool replay, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_geometry *g = &eng->setup.geom;
    int sh = (int)g->sample_shift;
    bool cfd = cfd_on(eng), msi = msi_on(eng) && s->R > 0, cms = cms_on(eng) && s->RC > 0;
    bool fft_path = s->path == OCT_MSI_FFT;
    bool klin = cfd && s->klin_T > 0;
    /* the CFD as a matrix product of x' (split FP16, xc3) on the compute
     * stream: no x~ / x' / k-lin / DFT for it (cfd_gemm_ok) */
    bool cg = cfd && cfd_gemm_ok(eng);
    cudaStream_t cfd_st = s->s_comp; /* the stream that records EV_CFD (joined at the end) */
    TRY(mark(s, sl->ev[EV_START], s->s_comp, e));

    /* background, then conversion + background + window: x~ for CFD (no
     * k-lin) / FFT path / SGEMM, its TF32 parts for the split MSI GEMM, x'
     * for k-lin and the plain CMS GEMM, its TF32 parts for the split CMS GEMM */
    bool split = s->gemm_mode == GEMM_SPLIT;
    bool msplit = msi && !fft_path && split;
    float *x = ((cfd && !klin && !cg) || (msi && !msplit)) ? s->d_x : NULL;
    float *x3 = msplit && !s->h16 ? s->d_x3 : NULL;
    __half *x3h = msplit && s->h16 ? (__half *)s->d_x3 : NULL; /* split FP16 parts */
    float *xp = ((klin && !cg) || (cms && !split)) ? s->d_xp : NULL;
    __half *xc3 = cg ? s->d_xc3 : NULL;
    float *xp3 = cms && split ? s->d_xp3 : NULL;
    CU(cudaMemsetAsync(sl->d_bad, 0x7f, sizeof(int), s->s_comp));
    const float *bvec = NULL;
    bool commit = false;
    /* Intra-frame pipeline (see parts_mode): P parts of the input, each
     * waited for by its event on the compute stream. */
    int P = replay ? 1 : sl->nparts;
    int pm = P > 1 ? parts_mode(eng) : PARTS_OFF;
    bool defer = pm == PARTS_DEFER;
    bool mdef = defer && msi && msi_defer_ok(eng); /* the MSI per part too */
    Sink kmd = {};
    bool sums_done = false;
    bool fpn_parts = (pm == PARTS_BG || defer) && eng->params.background == OCT_BG_FPN;
    /* FPN per part: the segments complete once part p has landed (a segment
     * across a part boundary goes with the later part); the best of the
     * parts in background() */
    long long fpn_sg0 = 0;
    auto fpn_part = [&](int p) -> oct_err {
        long long np = s->S / P, G = eng->params.background_param, nseg = s->S / G;
        dim3 blk(32, FPN_WARPS);
        unsigned gb = blocks_for(s->M, 32);
        long long sg0 = fpn_sg0, sg1 = std::min(nseg, (long long)(p + 1) * np / G);
        double *pk = s->d_fpk + (size_t)p * s->M, *pmn = s->d_fpm + (size_t)p * s->M;
        long long *ps = s->d_fps + (size_t)p * s->M;
        switch (g->sample_type) {
        case OCT_SAMPLE_U16: fpn_kernel<uint16_t><<<gb, blk, 0, s->s_comp>>>((const uint16_t *)sl->d_raw, s->S, s->M, sh, (int)G, NULL, sg0, sg1, pk, pmn, ps); break;
        case OCT_SAMPLE_I16: fpn_kernel<int16_t><<<gb, blk, 0, s->s_comp>>>((const int16_t *)sl->d_raw, s->S, s->M, sh, (int)G, NULL, sg0, sg1, pk, pmn, ps); break;
        default: fpn_kernel<float><<<gb, blk, 0, s->s_comp>>>((const float *)sl->d_raw, s->S, s->M, 0, (int)G, NULL, sg0, sg1, pk, pmn, ps); break; /* sh: integers only */
        }
        LAUNCHED("fpn");
        fpn_sg0 = sg1;
        return OCT_OK;
    };
    /* conversion of spectra [j0, j0 + ns) with background bv into the
     * given outputs (any NULL) */
    auto convert_to = [&](long long j0, long long ns, const float *bv, float *ox, float *ox3, __half *ox3h,
                          float *oxp, float *oxp3, __half *oxc) -> oct_err {
        long long n4 = ns * s->M / 4, o = j0 * s->M, o3 = j0 * s->kM;
        unsigned nb = blocks_for(n4, 256);
        float *px = ox ? ox + o : NULL, *px3 = ox3 ? ox3 + o3 : NULL, *pxp = oxp ? oxp + o : NULL,
              *pxp3 = oxp3 ? oxp3 + o3 : NULL;
        __half *px3h = ox3h ? ox3h + o3 : NULL, *pxc = oxc ? oxc + j0 * 3 * s->M : NULL;
        switch (g->sample_type) {
        case OCT_SAMPLE_U16:
            convert_kernel<uint16_t><<<nb, 256, 0, s->s_comp>>>((const uint16_t *)sl->d_raw + o, px, px3, pxp, pxp3,
                                                                 n4, s->M, sh, s->d_win, bv, sl->d_bad, j0, px3h, s->hsc_x, pxc, s->hsc_c);
            break;
        case OCT_SAMPLE_I16:
            convert_kernel<int16_t><<<nb, 256, 0, s->s_comp>>>((const int16_t *)sl->d_raw + o, px, px3, pxp, pxp3,
                                                                n4, s->M, sh, s->d_win, bv, sl->d_bad, j0, px3h, s->hsc_x, pxc, s->hsc_c);
            break;
        default:
            convert_kernel<float><<<nb, 256, 0, s->s_comp>>>((const float *)sl->d_raw + o, px, px3, pxp, pxp3,
                                                              n4, s->M, 0, s->d_win, bv, sl->d_bad, j0, px3h, s->hsc_x, pxc, s->hsc_c);
            break;
        }
        LAUNCHED("convert");
        return OCT_OK;
    };
    auto convert = [&](long long j0, long long ns) -> oct_err {
        return convert_to(j0, ns, bvec, x, x3, x3h, xp, xp3, xc3);
    };
    if (pm == PARTS_BG && fpn_parts) {
        for (int p = 0; p < P; p++) {
            if (p > 0) TRY(wait_in(s, sl, p, e));
            TRY(fpn_part(p));
        }
        sums_done = true;
    } else if (pm == PARTS_BG) {
        /* the column sums part by part as the DMA lands; the rest after the last */
        long long np = s->S / P;
        CU(cudaMemsetAsync(s->d_bgsum, 0, (size_t)s->M * sizeof(double), s->s_comp));
        for (int p = 0; p < P; p++) {
            if (p > 0) TRY(wait_in(s, sl, p, e));
            TRY(colsum_rows(eng, sl, (long long)p * np, np, e));
        }
        sums_done = true;
    } else if (defer) {
        /* per part: the background statistics (column sums; FPN: segments
         * plus part 0's column sums), after part 0 the estimate bh; then
         * the part's CFD input with bh and, on the CFD stream, its k-lin,
         * R2C and dispersion chain (stored in d_X); the sink after the last
         * part with the correction (below) */
        long long np = s->S / P;
        Sink kc = make_sink(eng, sl, OCT_METHOD_CFD);
        if (mdef) {
            TRY(prepare_msi(eng, e));
            kmd = make_sink(eng, sl, OCT_METHOD_MSI);
        }
        /* the parts' operands with bh: the CFD's and the MSI's (cg: the
         * CFD's product reads x' split, its GEMM per part into d_Ccf) */
        float *px = (!klin && !cg) || (mdef && !msplit) ? s->d_x : NULL;
        CU(cudaMemsetAsync(s->d_bgsum, 0, (size_t)s->M * sizeof(double), s->s_comp));
        for (int p = 0; p < P; p++) {
            long long j0 = (long long)p * np;
            if (p > 0) TRY(wait_in(s, sl, p, e));
            if (!fpn_parts || p == 0) TRY(colsum_rows(eng, sl, j0, np, e));
            if (fpn_parts) TRY(fpn_part(p));
            if (p == 0) {
                bg_estimate_kernel<<<blocks_for(s->M, 256), 256, 0, s->s_comp>>>(s->d_bgsum, 1.0 / (double)np, s->M,
                                                                               s->d_bhat);
                LAUNCHED("bg_estimate");
            }
            TRY(convert_to(j0, np, s->d_bhat, px, mdef ? x3 : NULL, mdef ? x3h : NULL, klin && !cg ? s->d_xp : NULL,
                           NULL, xc3));
            if (cg) {
                if (kc.sub) TRY(cfd_gemm_pass(eng, kc, MODE_SUB, j0, np, 0, e, s->d_Ccf));
            } else {
                CU(cudaEventRecord(sl->ev_cv[p], s->s_comp));
                CU(cudaStreamWaitEvent(s->s_cfd, sl->ev_cv[p], 0));
                TRY(cfd_r2c_rows(eng, klin, j0, np, e));
                if (s->disp_on) TRY(disp_rows(eng, s->s_cfd, kc, j0, np, true, e));
            }
            if (mdef && (kmd.full || kmd.sub))
                TRY(msi_pass(eng, kmd, kmd.full ? MODE_ALL : MODE_SUB, j0, np, 0, e, s->d_Cdef));
        }
        sums_done = true;
    } else if (sl->nparts > 1 && pm != PARTS_ALL) {
        /* parts were copied but this frame is done whole: wait for them all
         * (the compute stream waited for the first only) */
        TRY(wait_in(s, sl, sl->nparts - 1, e));
    }
    TRY(background(eng, sl, replay, sums_done, &bvec, &commit, e));
    /* PARTS_ALL: per part, wait for its copy, convert it, then CFD (own
     * stream: k-lin, R2C, plain or dispersion sink) and the MSI en-face /
     * all-depth pass of its spectra; cross-sections and CMS follow once the
     * whole frame is converted. */
    bool parts = pm == PARTS_ALL;
    bool msi_full = false, msi_done = false;
    if (parts) {
        long long np = s->S / P;
        Sink kc = make_sink(eng, sl, OCT_METHOD_CFD);
        Sink km = make_sink(eng, sl, OCT_METHOD_MSI);
        if (msi) {
            TRY(prepare_msi(eng, e));
            msi_full = km.full;
        }
        const oct_params *pp = &eng->params;
        for (int p = 0; p < P; p++) {
            long long j0 = (long long)p * np;
            if (p > 0) TRY(wait_in(s, sl, p, e));
            TRY(convert(j0, np));
            CU(cudaEventRecord(sl->ev_cv[p], s->s_comp));
            if (cg) {
                if (kc.sub) TRY(cfd_gemm_pass(eng, kc, MODE_SUB, j0, np, 0, e));
            } else if (cfd) {
                CU(cudaStreamWaitEvent(s->s_cfd, sl->ev_cv[p], 0));
                TRY(cfd_r2c_rows(eng, klin, j0, np, e));
                if (s->disp_on) {
                    TRY(disp_rows(eng, s->s_cfd, kc, j0, np, false, e));
                } else {
                    SrcCfd src = {s->d_X + j0 * s->K, s->K, s->M, pp->freq_cutoff};
                    TRY(launch_sink(s->s_cfd, src, kc, MODE_ALL, j0, np, 0, e));
                }
            }
            if (msi && (msi_full || km.sub))
                TRY(msi_pass(eng, km, msi_full ? MODE_ALL : MODE_SUB, j0, np, 0, e));
        }
        if (cfd && !cg) {
            TRY(mark(s, sl->ev[EV_CFD], s->s_cfd, e));
            cfd_st = s->s_cfd;
        }
        msi_done = true;
    } else if (defer) {
        if (!mdef) {
            /* the MSI's operands with the exact background (the CFD's
             * inputs were converted per part with bh) */
            float *fx = msi && !msplit ? s->d_x : NULL;
            if (fx || x3 || x3h) TRY(convert_to(0, s->S, bvec, fx, x3, x3h, NULL, NULL, NULL));
        }
        /* the correction: the CFD chain of the one spectrum d = b - bh */
        bg_delta_kernel<<<blocks_for(s->M, 256), 256, 0, s->s_comp>>>(bvec, s->d_bhat, s->d_win, s->M, s->d_cd,
                                                                      s->d_cdx);
        LAUNCHED("bg_delta");
        if (cg) {
            /* ... or its product: d split (no window: the matrices hold
             * it), times the en-face and the all-depth matrices */
            convert_kernel<float><<<blocks_for(s->M / 4, 256), 256, 0, s->s_comp>>>(
                s->d_cd, NULL, NULL, NULL, NULL, s->M / 4, s->M, 0, s->d_win, NULL, s->d_cbad, 0, NULL, 1.0f,
                s->d_ccop, s->hsc_c);
            LAUNCHED("convert");
            const float alpha = 1.0f / (s->hsc_c * s->hsc_a);
            const int Q = (int)eng->plan->enface_n[OCT_METHOD_CFD];
            if (Q > 0)
                TRY(msi_gemm(s, GK_F16, 2 * Q, 1, 3 * s->M, &alpha, s->d_Acf[1], s->d_ccop, s->d_cbias[1], e));
            TRY(msi_gemm(s, GK_F16, 2 * s->K, 1, 3 * s->M, &alpha, s->d_Acf[0], s->d_ccop, s->d_cbias[0], e));
        }
        if (!cg) {
            const float *cin = s->d_cdx;
            if (klin) {
                launch_klin(s->s_comp, s->d_cd, s->d_kidx, s->d_kw, s->klin_T, s->d_win, s->M, 1, s->d_cdk);
                LAUNCHED("klin");
                cin = s->d_cdk;
            }
            FFT(cufftExecR2C(s->plan_r1, (cufftReal *)cin, (cufftComplex *)s->d_cX));
            if (s->disp_on) {
                disp_pad_kernel<<<blocks_for(s->M, 256), 256, 0, s->s_comp>>>(s->d_cX, s->K, s->M,
                                                                             eng->params.freq_cutoff, 1, s->d_cZ);
                LAUNCHED("disp_pad");
                FFT(cufftExecC2C(s->plan_c1, (cufftComplex *)s->d_cZ, (cufftComplex *)s->d_cZ, CUFFT_INVERSE));
                disp_phase_kernel<<<blocks_for(s->M, 256), 256, 0, s->s_comp>>>(s->d_cZ, s->d_disp, s->M, 1,
                                                                               1.0f / (float)s->M);
                LAUNCHED("disp_phase");
                FFT(cufftExecC2C(s->plan_c1, (cufftComplex *)s->d_cZ, (cufftComplex *)s->d_cZ, CUFFT_FORWARD));
            }
        }
        CU(cudaEventRecord(s->ev_corr, s->s_comp));
        if (mdef) {
            /* d's MSI operand (the conversion's formula, no background) and
             * its GEMM with the matrices whose outputs wait in d_Cdef / go
             * through the cross-section pass */
            bool h = msplit && s->h16;
            convert_kernel<float><<<blocks_for(s->M / 4, 256), 256, 0, s->s_comp>>>(
                s->d_cd, msplit ? NULL : s->d_cop, msplit && !h ? s->d_cop : NULL, NULL, NULL, s->M / 4, s->M, 0,
                s->d_win, NULL, s->d_cbad, 0, h ? (__half *)s->d_cop : NULL, s->hsc_x);
            LAUNCHED("convert");
            int nl = lag_count(eng);
            if (kmd.full || kmd.xh || kmd.xv)
                TRY(msi_gemm_into(s, s->d_Bfull, s->d_cop, s->R * nl, 1, s->d_bias_full, e));
            if (!kmd.full && kmd.sub)
                TRY(msi_gemm_into(s, s->d_Benf, s->d_cop, kmd.Q * nl, 1, s->d_bias_enf, e));
        }
    } else {
        TRY(convert(0, s->S));
    }
    {
        /* what the conversion stage moves: the raw frame (twice with a
         * frame-mean or rolling background: column sums first), each f32
         * output (4 B per sample) and each TF32 split (12 B per sample) */
        double ns = (double)s->S * s->M, in = (double)s->frame_bytes;
        bool colsum = eng->params.background == OCT_BG_FRAME_MEAN || eng->params.background == OCT_BG_ROLLING;
        sl->conv_bytes = in * (colsum ? 2 : 1) + ns * (4.0 * ((x != NULL) + (xp != NULL)) +
                                                       12.0 * ((x3 != NULL) + (xp3 != NULL)) +
                                                       6.0 * ((x3h != NULL) + (xc3 != NULL)));
    }
    if (commit) {
        roll_commit_kernel<<<blocks_for(s->M, 256), 256, 0, s->s_comp>>>(s->d_bgsum, 1.0 / (double)s->S,
                                                                        s->d_ring, s->M, s->d_roll,
                                                                        sl->d_bad, s->S);
        LAUNCHED("roll_commit");
    }
    /* (the flag goes to the host on the download stream, submit_inner: a
     * copy here stalled the compute stream between conversion and GEMM) */
    TRY(mark(s, sl->ev[EV_CONV], s->s_comp, e));

    /* CFD on its own stream: memory-bound FFT + sink beside the compute-bound
     * GEMMs.  On the FFT-path MSI the spectra's R2C runs on the compute stream
     * (the MSI needs it; plan bound there in create); with k-lin the CFD then
     * needs its own R2C of other spectra into the same d_X, so it runs on the
     * compute stream after the MSI ("late"). */
    bool x_on_comp = s->x_on_comp;
    bool late = !parts && cfd && klin && x_on_comp; /* parts: the CFD ran per part */
    if (parts) {
        /* the CFD ran per part above (the product's cross-sections now) */
        if (cg) TRY(cfd_gemm_xsec(eng, make_sink(eng, sl, OCT_METHOD_CFD), e));
        if (!cfd || cg) TRY(mark(s, sl->ev[EV_CFD], s->s_comp, e)); /* (cfd_ms = 0 without the CFD) */
    } else if (cg) {
        /* the en-face depths of every spectrum, then the cross-sections;
         * deferred: the parts' products (x' with bh) are in d_Ccf, d's
         * products subtracted in the sinks */
        Sink k = make_sink(eng, sl, OCT_METHOD_CFD);
        if (defer) {
            if (k.sub) {
                SrcCms src = {s->d_Ccf, 2 * k.Q, s->d_cbias[1]};
                TRY(launch_sink(s->s_comp, src, k, MODE_SUB, 0, s->S, 0, e));
            }
            TRY(cfd_gemm_xsec(eng, k, e, s->d_cbias[0]));
        } else {
            if (k.sub) TRY(cfd_gemm_pass(eng, k, MODE_SUB, 0, s->S, 0, e));
            TRY(cfd_gemm_xsec(eng, k, e));
        }
        TRY(mark(s, sl->ev[EV_CFD], s->s_comp, e));
    } else if (defer) {
        /* the CFD's sink over the whole frame, the correction subtracted */
        CU(cudaStreamWaitEvent(s->s_cfd, s->ev_corr, 0));
        SrcCfdCorr src = {s->d_X, s->disp_on ? s->d_cZ : s->d_cX, s->K, eng->params.freq_cutoff,
                          s->disp_on ? INT_MAX : s->M - eng->params.freq_cutoff};
        TRY(launch_sink(s->s_cfd, src, make_sink(eng, sl, OCT_METHOD_CFD), MODE_ALL, 0, s->S, 0, e));
        TRY(mark(s, sl->ev[EV_CFD], s->s_cfd, e));
        /* joined at the end: the download (after EV_PROD) reads its products,
         * and a capture must end with every stream joined */
        cfd_st = s->s_cfd;
    } else {
        if (x_on_comp && (msi || (cfd && !klin))) {
            FFT(cufftExecR2C(s->plan_x, s->d_x, (cufftComplex *)s->d_X));
            CU(cudaEventRecord(s->ev_fork, s->s_comp));
        }
        if (cfd && !late) {
            if (!x_on_comp) CU(cudaEventRecord(s->ev_cj[0], s->s_comp)); /* fork (after the conversion) */
            CU(cudaStreamWaitEvent(s->s_cfd, x_on_comp ? s->ev_fork : s->ev_cj[0], 0));
            TRY(cfd_run(eng, sl, s->s_cfd, x_on_comp, want[OCT_METHOD_CFD], e));
            TRY(mark(s, sl->ev[EV_CFD], s->s_cfd, e));
            cfd_st = s->s_cfd;
        } else if (!cfd) {
            TRY(mark(s, sl->ev[EV_CFD], s->s_comp, e)); /* cfd_ms = 0 */
        }
    }

    if (msi) {
        TRY(prepare_msi(eng, e));
        Sink k = make_sink(eng, sl, OCT_METHOD_MSI);
        if (mdef) {
            /* the parts' GEMM outputs in d_Cdef, d's subtracted */
            int nl = lag_count(eng);
            if (k.full) {
                SrcGemm src = {s->d_Cdef, s->R * nl, nl, s->d_bias_full};
                TRY(launch_sink(s->s_comp, src, k, MODE_ALL, 0, s->S, 0, e));
            } else {
                if (k.sub) {
                    SrcGemm src = {s->d_Cdef, k.Q * nl, nl, s->d_bias_enf};
                    TRY(launch_sink(s->s_comp, src, k, MODE_SUB, 0, s->S, 0, e));
                }
                if (k.xh || k.xv) {
                    int nh = 0, nv = 0;
                    TRY(gather_xsec(eng, k.xh, k.xv, &nh, &nv, e));
                    TRY(msi_pass(eng, k, MODE_XS, 0, nh + nv, nh, e, NULL, s->d_bias_full));
                }
            }
        } else if (k.full) {
            /* every depth of every spectrum: the en-face, confocal and
             * cross-section products come from the same pass */
            if (!msi_done) TRY(msi_pass(eng, k, MODE_ALL, 0, s->S, 0, e));
        } else if (s->L > 1) {
            if (k.sub && !msi_done) TRY(msi_pass(eng, k, MODE_SUB, 0, s->S, 0, e));
            if (k.xh || k.xv) {
                int nh = 0, nv = 0;
                TRY(gather_xsec(eng, k.xh, k.xv, &nh, &nv, e));
                TRY(msi_pass(eng, k, MODE_XS, 0, nh + nv, nh, e));
            }
        }
    }
    TRY(mark(s, sl->ev[EV_MSI], s->s_comp, e));

    if (cms) { /* as the MSI GEMM path, with |Re, Im| pairs */
        TRY(prepare_cms(eng, e));
        Sink k = make_sink(eng, sl, OCT_METHOD_CMS);
        if (k.full) {
            TRY(cms_pass(eng, k, MODE_ALL, s->S, 0, e));
        } else if (s->L > 1) {
            if (k.sub) TRY(cms_pass(eng, k, MODE_SUB, s->S, 0, e));
            if (k.xh || k.xv) {
                int nh = k.xh ? s->N : 0, nv = k.xv ? s->L : 0;
                long long tot = (long long)(nh + nv) * s->kM;
                gather_xsec_kernel<float><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
                    split ? s->d_xp3 : s->d_xp, s->kM, s->N, eng->params.xsec_h, eng->params.xsec_v, nh,
                    nh + nv, s->d_xgc);
                LAUNCHED("gather");
                TRY(cms_pass(eng, k, MODE_XS, nh + nv, nh, e));
            }
        }
    }
    TRY(mark(s, sl->ev[EV_CMS], s->s_comp, e));

    if (late) {
        TRY(cfd_run(eng, sl, s->s_comp, false, want[OCT_METHOD_CFD], e));
        TRY(mark(s, sl->ev[EV_CFD], s->s_comp, e));
        cfd_st = s->s_comp;
    }
    if (cfd_st != s->s_comp) { /* join */
        CU(cudaEventRecord(s->ev_cj[1], cfd_st));
        CU(cudaStreamWaitEvent(s->s_comp, s->ev_cj[1], 0));
    }
    if (cfd) TRY(angio_run(eng, sl, want, e));
    TRY(mark(s, sl->ev[EV_PROD], s->s_comp, e));
    return OCT_OK;
}

/* Frames the graph path takes: whole frames and the intra-frame pipeline's
 * parts (issue 19: its per-part launches cost ~0.5-0.7 ms of host time a
 * volume; the waits for the parts' copies are external wait nodes,
 * wait_in), not a rolling background (its history restarts by host state)
 * nor angiography (its stage plans and allocates lazily). */
bool graph_ok(const oct_engine *eng, const Slot *sl, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT])
{
    (void)sl;
    if (eng->setup.cuda.graph == OCT_CUDA_GRAPH_OFF) return false;
    if (eng->params.background == OCT_BG_ROLLING) return false;
    for (int k = OCT_KIND_ANGIO_FIRST; k < OCT_KIND_COUNT; k++)
        if (want[OCT_METHOD_CFD][k]) return false;
    return true;
}

void graph_key(const oct_engine *eng, const Slot *sl, bool replay, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT],
               GraphKey *k)
{
    const CudaState *s = ST(eng);
    memset(k, 0, sizeof *k);
    /* the input's parts (run_frame's P and its waits): a replay of a frame
     * copied in parts runs whole after the last part's event */
    k->nparts = sl->nparts > 1 ? (replay ? -sl->nparts : sl->nparts) : 1;
    k->plan = eng->plan;
    memcpy(k->gen, eng->plan->gen, sizeof k->gen);
    memcpy(&k->params, &eng->params, sizeof k->params);
    memcpy(k->want, want, sizeof k->want);
    k->mats[0] = s->d_Bfull, k->mats[1] = s->d_Benf, k->mats[2] = s->d_C;
    k->hsc_x = s->hsc_x, k->hsc_m = s->hsc_m;
    k->path = (int)s->path, k->klin_T = s->klin_T, k->disp_on = s->disp_on, k->x_on_comp = s->x_on_comp;
    k->hsc_a = s->hsc_a;
}

/* Captures run_frame on the compute stream (the CFD stream joins it) into
 * the slot's graph.  A capture that fails is reported once (stderr) and
 * the frame runs eagerly: OCT_EAGAIN. */
oct_err graph_capture(oct_engine *eng, Slot *sl, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT], bool replay,
                      oct_error *e)
{
    CudaState *s = ST(eng);
    if (sl->gexec) {
        CU(cudaGraphExecDestroy(sl->gexec)); /* an in-flight launch finishes first (CUDA frees it then) */
        sl->gexec = NULL;
    }
    CU(cudaStreamBeginCapture(s->s_comp, cudaStreamCaptureModeThreadLocal));
    s->capturing = true;
    oct_error fe = {{0}};
    oct_err err = run_frame(eng, sl, want, replay, &fe);
    s->capturing = false;
    cudaGraph_t gr = NULL;
    cudaError_t r = cudaStreamEndCapture(s->s_comp, &gr);
    cudaGraphExec_t x = NULL;
    if (err == OCT_OK && r == cudaSuccess) r = cudaGraphInstantiate(&x, gr, 0);
    if (gr) warn_cuda("destroying a captured graph", cudaGraphDestroy(gr));
    if (err == OCT_OK && r == cudaSuccess) r = cudaGraphUpload(x, s->s_comp);
    if (err != OCT_OK || r != cudaSuccess) {
        cudaGetLastError();
        if (x) warn_cuda("destroying a graph", cudaGraphExecDestroy(x));
        if (s->graph_fails++ == 0)
            fprintf(stderr, "cuda: capturing a frame as a CUDA graph failed (%s); frames of this plan run launch "
                            "by launch\n",
                    err != OCT_OK ? fe.msg : cudaGetErrorString(r));
        return OCT_EAGAIN;
    }
    sl->gexec = x;
    s->graph_captures++;
    return OCT_OK;
}

/* The frame's device work: the slot's CUDA graph when it holds one for this
 * key (setup.cuda.graph: one launch instead of ~20 launches, their events
 * and cuBLAS / cuFFT host work), else kernel by kernel.  The first frame
 * of a key runs eagerly (it picks GEMM algorithms, builds matrices and
 * tells the key apart from a passing change); the next frame of that key
 * in each slot is captured and launched, later ones only launched. */
oct_err run_device(oct_engine *eng, Slot *sl, const bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT],
                   bool replay, oct_error *e)
{
    CudaState *s = ST(eng);
    /* host to constant memory from pageable memory: never captured */
    TRY(upload_sinks(eng, sl, e));
    /* the CFD matrices (their scale is read back: never captured) */
    if (cfd_gemm_ok(eng)) TRY(prepare_cfd(eng, e));
    if (!graph_ok(eng, sl, want)) return run_frame(eng, sl, want, replay, e);
    /* lazily built matrices first (no-ops but after a change, which also
     * changes the key): their pointers are part of it */
    if (msi_on(eng) && s->R > 0) TRY(prepare_msi(eng, e));
    if (cms_on(eng) && s->RC > 0) TRY(prepare_cms(eng, e));
    GraphKey k;
    graph_key(eng, sl, replay, want, &k);
    if (sl->gexec && !memcmp(&k, &sl->gkey, sizeof k)) {
        CU(cudaGraphLaunch(sl->gexec, s->s_comp));
        s->graph_launches++;
        return OCT_OK;
    }
    if (s->gk_fail_valid && !memcmp(&k, &s->gk_fail, sizeof k)) return run_frame(eng, sl, want, replay, e);
    if (!s->gk_eager_valid || memcmp(&k, &s->gk_eager, sizeof k)) {
        s->gk_eager = k;
        s->gk_eager_valid = true;
        return run_frame(eng, sl, want, replay, e);
    }
    sl->gkey = k;
    oct_err err = graph_capture(eng, sl, want, replay, e);
    if (err == OCT_EAGAIN) {
        s->gk_fail = k; /* eager until the key changes */
        s->gk_fail_valid = true;
        memset(&sl->gkey, 0, sizeof sl->gkey);
        return run_frame(eng, sl, want, replay, e);
    }
    TRY(err);
    CU(cudaGraphLaunch(sl->gexec, s->s_comp));
    s->graph_launches++;
    return OCT_OK;
}
