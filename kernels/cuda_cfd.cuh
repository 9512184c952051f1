/* cuda_cfd.cuh - the CFD of a volume as a matrix product (cuda.cfd, issue
 * 19): where it applies (cfd_gemm_ok), the chain's map from the unit spectra
 * as split-FP16 matrices (prepare_cfd) and the GEMM passes with their sinks
 * (cfd_gemm_pass, cfd_gemm_xsec).  run_frame (cuda_frame.cuh) converts x'
 * split FP16 for it and chooses the flow (whole frame, parts, deferred).
 * Included once by cuda_frame.cuh, after the sinks and the gathers, inside
 * engine_cuda.cu's anonymous namespace. */

/* Whether this frame's CFD is the matrix product (cuda.cfd, oct_engine.h):
 * the buffers were made (a volume, split FP16), the MSI is not on the FFT
 * path (x_on_comp), the products need the en-face depths of every spectrum
 * and all depths of the cross-sections only, and (auto) k-lin or
 * dispersion make the chain long. */
bool cfd_gemm_ok(const oct_engine *eng)
{
    const CudaState *s = ST(eng);
    if (!s->d_xc3 || !cfd_on(eng) || s->x_on_comp || !s->have_blas || !s->d_C || !s->d_xg) return false;
    if (eng->setup.cuda.cfd != OCT_CUDA_CFD_GEMM && s->klin_T == 0 && !s->disp_on) return false;
    const oct_plan_method *pm = &eng->plan->method[OCT_METHOD_CFD];
    if (pm->full || eng->plan->enface_n[OCT_METHOD_CFD] > (uint32_t)s->K) return false;
    for (uint32_t i = 0; i < pm->nlayout; i++) {
        const oct_layout *r = &pm->layout[i];
        if (r->select == OCT_SEL_GROUP || r->depths == OCT_DEPTHS_RANGE) return false;
        if (r->depths == OCT_DEPTHS_ALL && r->select == OCT_SEL_ALL) return false;
    }
    return true;
}

/* The CFD matrices for the current window, k-lin, dispersion, en-face
 * depths and cut-off (lazily, on the compute stream; outside a capture: the
 * matrix scale is read back): the M unit spectra through the frames' own
 * kernels and cuFFT (k-lin with the window, or the window; R2C; the
 * dispersion steps), then the rows of the depths as split FP16. */
oct_err prepare_cfd(oct_engine *eng, oct_error *e)
{
    CudaState *s = ST(eng);
    const oct_plan *pl = eng->plan;
    const int F = pl->params.freq_cutoff;
    const uint64_t key[5] = {pl->gen[OCT_PK_WINDOW], pl->gen[OCT_PK_KLIN], pl->gen[OCT_PK_DISP],
                             pl->gen[OCT_PK_ENFACE], (uint64_t)(uint32_t)F};
    if (s->cf_valid && !memcmp(s->held_cf, key, sizeof key)) return OCT_OK;
    s->cf_valid = false;
    const int M = s->M, K = s->K;
    const long long MM = (long long)M * M;
    const bool klin = s->klin_T > 0;
    cfd_basis_kernel<<<blocks_for(MM, 256), 256, 0, s->s_comp>>>(klin ? NULL : s->d_win, M, klin ? s->d_id : s->d_idk);
    LAUNCHED("cfd_basis");
    if (klin) {
        launch_klin(s->s_comp, s->d_id, s->d_kidx, s->d_kw, s->klin_T, s->d_win, M, M, s->d_idk);
        LAUNCHED("klin");
    }
    FFT(cufftExecR2C(s->plan_idr, (cufftReal *)s->d_idk, (cufftComplex *)s->d_idX));
    const float2 *Y = s->d_idX;
    int ldy = K, hi = M - F; /* SrcCfd's cut-off; SrcDisp's: d >= F only */
    if (s->disp_on) {
        disp_pad_kernel<<<blocks_for(MM, 256), 256, 0, s->s_comp>>>(s->d_idX, K, M, F, M, s->d_idZ);
        LAUNCHED("disp_pad");
        FFT(cufftExecC2C(s->plan_idc, (cufftComplex *)s->d_idZ, (cufftComplex *)s->d_idZ, CUFFT_INVERSE));
        disp_phase_kernel<<<blocks_for(MM, 256), 256, 0, s->s_comp>>>(s->d_idZ, s->d_disp, M, M, 1.0f / (float)M);
        LAUNCHED("disp_phase");
        FFT(cufftExecC2C(s->plan_idc, (cufftComplex *)s->d_idZ, (cufftComplex *)s->d_idZ, CUFFT_FORWARD));
        Y = s->d_idZ, ldy = M, hi = INT_MAX;
    }
    CU(cudaMemsetAsync(s->d_amax, 0, sizeof(unsigned), s->s_comp));
    cfd_amax_kernel<<<blocks_for((long long)M * K, 256), 256, 0, s->s_comp>>>(Y, ldy, M, K, s->d_amax);
    LAUNCHED("cfd_amax");
    unsigned bits = 0;
    CU(cudaMemcpyAsync(&bits, s->d_amax, sizeof bits, cudaMemcpyDeviceToHost, s->s_comp));
    CU(cudaStreamSynchronize(s->s_comp));
    float amax;
    memcpy(&amax, &bits, sizeof amax);
    s->hsc_a = pow2_scale(amax);
    long long tot = 2ll * K * 3 * M;
    build_cfd16_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(Y, ldy, M, K, NULL, K, F, hi, s->hsc_a,
                                                                    s->d_Acf[0]);
    LAUNCHED("build_cfd16");
    const int Q = (int)pl->enface_n[OCT_METHOD_CFD];
    if (Q > 0) {
        tot = 2ll * Q * 3 * M;
        build_cfd16_kernel<<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(Y, ldy, M, K, s->d_eidx[OCT_METHOD_CFD], Q, F,
                                                                        hi, s->hsc_a, s->d_Acf[1]);
        LAUNCHED("build_cfd16");
    }
    memcpy(s->held_cf, key, sizeof key);
    s->cf_valid = true;
    return OCT_OK;
}
/* The MSI of a PARTS_DEFER frame: GEMM of the parts' operands (converted
 * with bh) into d_Cdef, the sink after the last part with the GEMM of d
 * subtracted (SrcGemm bias); needs the frame's GEMM output to fit d_Cdef
 * (the en-face depths of a volume, not all depths: else PARTS_BG). */

/* The CFD as a matrix product (cfd_gemm_ok) over nrows rows on the compute
 * stream: spectra jbase.. (MODE_SUB: the en-face depths) or the gathered
 * cross-section rows (MODE_XS: all depths), C = [Re, Im] pairs per depth
 * (split FP16 GEMM of x' with the map's rows), |.| in the sink (SrcCms). */
oct_err cfd_gemm_pass(oct_engine *eng, const Sink &k, int mode, long long jbase, long long nrows, int nh,
                      oct_error *e, float *cdef = NULL, const float *bias = NULL)
{
    CudaState *s = ST(eng);
    const bool sub = mode == MODE_SUB;
    const int nd = sub ? k.Q : s->K;
    if (nrows <= 0 || nd <= 0) return OCT_OK;
    const __half *A = s->d_Acf[sub ? 1 : 0];
    const __half *X = mode == MODE_XS ? (const __half *)s->d_xg : s->d_xc3;
    const int ncol = 2 * nd, kM = 3 * s->M;
    const float alpha = 1.0f / (s->hsc_c * s->hsc_a); /* powers of two: exact */
    long long cs_max = std::max(1ll, (long long)(s->C_cap / ncol));
    long long nch = (nrows + cs_max - 1) / cs_max;
    long long cs = (nrows + nch - 1) / nch;
    for (long long j0 = jbase; j0 < jbase + nrows; j0 += cs) {
        long long nj = std::min(cs, jbase + nrows - j0);
        float *C = cdef ? cdef + j0 * ncol : s->d_C;
        TRY(msi_gemm(s, GK_F16, ncol, (int)nj, kM, &alpha, A, X + j0 * kM, C, e));
        if (cdef) continue; /* PARTS_DEFER: the sink after the last part */
        SrcCms src = {s->d_C, ncol, bias};
        TRY(launch_sink(s->s_comp, src, k, mode, j0, nj, nh, e));
    }
    return OCT_OK;
}

/* The cross-sections of the CFD product: their rows of x' gathered (into
 * the MSI's d_xg: the compute stream orders the two), all depths; bias:
 * the deferred background's correction (rows converted with bh). */
oct_err cfd_gemm_xsec(oct_engine *eng, const Sink &k, oct_error *e, const float *bias = NULL)
{
    CudaState *s = ST(eng);
    if (!k.xh && !k.xv) return OCT_OK;
    int nh = k.xh ? s->N : 0, nv = k.xv ? s->L : 0, kM = 3 * s->M;
    long long tot = (long long)(nh + nv) * kM;
    gather_xsec_kernel<__half><<<blocks_for(tot, 256), 256, 0, s->s_comp>>>(
        s->d_xc3, kM, s->N, eng->params.xsec_h, eng->params.xsec_v, nh, nh + nv, (__half *)s->d_xg);
    LAUNCHED("gather");
    return cfd_gemm_pass(eng, k, MODE_XS, 0, nh + nv, nh, e, NULL, bias);
}
