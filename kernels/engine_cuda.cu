/* engine_cuda.cu - the CUDA backend of the OCT engine (SPEC section 2): the
 * per-frame host code, the pipeline and the backend ops.  Its state and set-up
 * are in cuda_setup.cuh, its device code in cuda_kernels.cuh (one translation
 * unit).
 *
 * Per frame, pipelined over up to OCT_ENGINE_DEPTH_MAX frames in flight
 * (each in-flight frame owns a slot: device input buffer, device product
 * buffers, pinned output staging, events):
 *   copy stream:    host frame -> d_raw[slot] (directly from registered or
 *                   pinned memory, else through double-buffered pinned
 *                   staging filled by the CPU inside submit)
 *   compute stream: [frame_mean: column sums] -> convert kernel (shift,
 *                   background, window: x~, and for the split-TF32 MSI
 *                   product its [hi, hi, lo] TF32 parts)
 *                   -> MSI: per chunk of spectra one GEMM with the matrix of
 *                   shifted filtered masks (output stays in L2) or per-mask
 *                   products + batched C2R, then the MSI sink kernel
 *                   (|P| + lag sum + gray + en-face scatter + confocal)
 *   CFD stream:     cuFFT R2C + CFD sink (|X|, cut-off, gray, scatter,
 *                   confocal), concurrent with the (compute-bound) MSI GEMM
 *   output stream:  D2H of the products into the caller's pinned products
 *                   (oct_engine_products_create) or the slot's pinned staging.
 * Compute of successive frames is serialised on the compute stream (the
 * work buffers x~, X, C are shared); copies of frame n+1 and n-1 overlap it.
 * Plans, handles, matrices and every device buffer are made in create; a
 * control change only refills them (the lag window grows the GEMM matrices
 * past their capacity, the one case that reallocates).
 *
 * fp32 MSI GEMM: by default "3xTF32": a = a_hi + a_lo with a_hi = tf32(a),
 * a_lo = tf32(a - a_hi); one tensor-core GEMM with K = 3M computes
 * [A_hi | A_lo | A_hi] . [X_hi ; X_hi ; X_lo] = A.X up to ~2^-22 relative
 * (the dropped a_lo.x_lo term and the rounding of the lo parts), i.e. fp32
 * class (relative L2 ~9e-6 vs float64, SGEMM ~1e-7), at tensor-core speed.
 * OCT_SETUP_PLAIN_SGEMM / setup.cuda.gemm = sgemm use cublasSgemm; precision tf32
 * is one plain TF32 GEMM (K = M).
 */
#include <ctype.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <omp.h>
#include <pthread.h>
#include <cublas_v2.h>
#include <cublasLt.h>

#include <algorithm>
#include <type_traits>
#include <vector>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "angio.h"
#include "engine_internal.h"
#include "cuda_engine.h"

/* ------------------------------------------------------------------ */
/* error checking: every call, and the last error after every launch   */

static const char *cufft_str(cufftResult r)
{
    switch (r) {
    case CUFFT_SUCCESS: return "success";
    case CUFFT_INVALID_PLAN: return "invalid plan";
    case CUFFT_ALLOC_FAILED: return "allocation failed";
    case CUFFT_INVALID_TYPE: return "invalid type";
    case CUFFT_INVALID_VALUE: return "invalid value";
    case CUFFT_INTERNAL_ERROR: return "internal error";
    case CUFFT_EXEC_FAILED: return "exec failed";
    case CUFFT_SETUP_FAILED: return "setup failed";
    case CUFFT_INVALID_SIZE: return "invalid size";
    default: return "cuFFT error";
    }
}

#define CU(call)                                                                   \
    do {                                                                           \
        cudaError_t cu_err_ = (call);                                              \
        if (cu_err_ != cudaSuccess)                                                \
            return oct_error_set(e, cu_err_ == cudaErrorMemoryAllocation ? OCT_ENOMEM \
                                                                        : OCT_EDEVICE, \
                                 "%s:%d: %s: %s", __FILE__, __LINE__, #call,       \
                                 cudaGetErrorString(cu_err_));                     \
    } while (0)
#define FFT(call)                                                                  \
    do {                                                                           \
        cufftResult ff_err_ = (call);                                              \
        if (ff_err_ != CUFFT_SUCCESS)                                              \
            return oct_error_set(e, OCT_EDEVICE, "%s:%d: %s: cuFFT %s (%d)",         \
                                 __FILE__, __LINE__, #call, cufft_str(ff_err_),    \
                                 (int)ff_err_);                                    \
    } while (0)
#define BLAS(call)                                                                 \
    do {                                                                           \
        cublasStatus_t bl_err_ = (call);                                           \
        if (bl_err_ != CUBLAS_STATUS_SUCCESS)                                      \
            return oct_error_set(e, OCT_EDEVICE, "%s:%d: %s: cuBLAS %s",            \
                                 __FILE__, __LINE__, #call,                        \
                                 cublasGetStatusString(bl_err_));                  \
    } while (0)
#define LAUNCHED(what) CU(cudaGetLastError())
#define TRY(call)                                                                  \
    do {                                                                           \
        oct_err try_err_ = (call);                                                 \
        if (try_err_ != OCT_OK) return try_err_;                                   \
    } while (0)

#include "cuda_kernels.cuh"

#include "cuda_setup.cuh"

namespace {

#include "cuda_gemm.cuh"  /* the MSI GEMM and its algorithm per shape */
#include "cuda_frame.cuh" /* per frame: the stages and run_device() */


float ev_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0.0f;
    }
    return ms;
}

/* cfd and msi overlap (two streams): each is measured from the conversion's end */
void device_times(const Slot *sl, oct_stage_times *t)
{
    t->convert_ms = ev_ms(sl->ev[EV_START], sl->ev[EV_CONV]);
    t->cfd_ms = ev_ms(sl->ev[EV_CONV], sl->ev[EV_CFD]);
    t->msi_ms = ev_ms(sl->ev[EV_CONV], sl->ev[EV_CMS]); /* MSI + CMS: both matrix products */
    t->products_ms = 0.0; /* fused into the sinks */
    t->device_ms = ev_ms(sl->ev[EV_START], sl->ev[EV_PROD]);
    t->convert_bytes = sl->conv_bytes;
}

void wanted(oct_engine *eng, bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT])
{
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++)
            want[m][k] = oct_product_wanted(eng, m, k); /* the plan's layout */
}

oct_err check_bad(CudaState *s, const Slot *sl, oct_error *e)
{
    int bad = *sl->h_bad;
    if (bad < 0 || bad >= s->S) return OCT_OK;
    /* A rejected frame (only f32 input can hold non-finite samples): name
     * the sample as the CPU backend does, from the slot's raw copy, which
     * stays until the next frame is submitted into this slot. */
    float spec[8192];
    int M = std::min(s->M, 8192), n = -1;
    if (s->frame_bytes == (size_t)s->S * s->M * sizeof(float) &&
        cudaMemcpy(spec, (const float *)sl->d_raw + (size_t)bad * s->M, (size_t)M * sizeof(float),
                   cudaMemcpyDeviceToHost) == cudaSuccess)
        for (int i = 0; i < M && n < 0; i++)
            if (!std::isfinite(spec[i])) n = i;
    if (n >= 0)
        return oct_error_set(e, OCT_EINVAL, "frame: sample %d of spectrum %d (line %d, A-scan %d) is not finite (%g)",
                             n, bad, bad / s->N, bad % s->N, (double)spec[n]);
    return oct_error_set(e, OCT_EINVAL, "frame: spectrum %d (line %d, A-scan %d) has a non-finite sample", bad,
                         bad / s->N, bad % s->N);
}

/* Waits for an event: timeout_ms < 0 blocks, 0 asks, > 0 polls until then. */
oct_err wait_event(cudaEvent_t ev, int timeout_ms, const char *what, oct_error *e)
{
    if (timeout_ms < 0) {
        CU(cudaEventSynchronize(ev));
        return OCT_OK;
    }
    double end = oct_now_ms() + timeout_ms;
    for (;;) {
        cudaError_t r = cudaEventQuery(ev);
        if (r == cudaSuccess) return OCT_OK;
        if (r != cudaErrorNotReady)
            return oct_error_set(e, OCT_EDEVICE, "cuda: waiting for %s: %s", what, cudaGetErrorString(r));
        if (oct_now_ms() >= end)
            return oct_error_set(e, OCT_ETIMEDOUT, "cuda: %s not done within %d ms", what, timeout_ms);
        struct timespec ts = {0, 20000}; /* 20 us: a frame takes >= 100 us */
        nanosleep(&ts, NULL);
    }
}

const HostReg *find_reg(const CudaState *s, const void *p, size_t bytes)
{
    const uint8_t *a = (const uint8_t *)p;
    for (int i = 0; i < s->nreg; i++) {
        const HostReg *r = &s->reg[i];
        if (a >= r->ptr && bytes <= r->bytes && (size_t)(a - r->ptr) <= r->bytes - bytes) return r;
    }
    return NULL;
}

/* After a failure half-way through enqueueing: let every stream drain so no
 * copy or kernel still touches the caller's buffers.  (The error that got
 * us here is already reported; a sticky one would repeat it.) */
void drain(CudaState *s)
{
    cudaStream_t st[] = {s->s_copy, s->s_comp, s->s_cfd, s->s_d2h};
    for (cudaStream_t x : st) {
        cudaError_t r = cudaStreamSynchronize(x);
        if (r != cudaSuccess && r != cudaGetLastError()) warn_cuda("draining a stream", r);
    }
    cudaGetLastError();
}

/* memcpy split over `threads` OpenMP threads in page-aligned parts. */
void par_memcpy(void *dst, const void *src, size_t n, int threads)
{
    if (threads <= 1 || n < ((size_t)1 << 20)) {
        memcpy(dst, src, n);
        return;
    }
    size_t per = ((n + (size_t)threads - 1) / (size_t)threads + 4095) & ~(size_t)4095;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++) {
        size_t off = (size_t)t * per;
        if (off < n) memcpy((uint8_t *)dst + off, (const uint8_t *)src + off, std::min(per, n - off));
    }
}

oct_err submit_inner(oct_engine *eng, CudaState *s, Slot *sl, const void *frame, oct_products *out,
                     oct_error *e)
{
    /* a no-op unless a prepare failed half-way: back to the engine's plan */
    TRY(sync_plan(eng, eng->plan, e));
    /* product shapes for the current values; the caller's buffers are sized now */
    wanted(eng, sl->want);
    sl->f32 = (eng->params.products & OCT_PRODUCT_F32) != 0;
    sl->direct_out = out->pinned;
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            img->present = false;
            if (!sl->want[m][k]) continue;
            oct_err err = oct_image_prepare(eng, m, k, img, e);
            if (err != OCT_OK) {
                img->present = false;
                return oct_error_prefix(e, err, "cuda");
            }
            if (img->count > sl->prod[m][k].cap)
                return oct_error_set(e, OCT_ESIZE, "cuda: product %s/%s has %zu pixels, more than the %zu planned",
                                     oct_kind_name(k), oct_method_name(m), img->count, sl->prod[m][k].cap);
        }
    if (!sl->direct_out && !sl->h_out)
        TRY(halloc(s, (void **)&sl->h_out, s->h_out_bytes, "the product staging", e));

    /* input: d_raw of this slot is free once the conversion of its last frame ran */
    CU(cudaStreamWaitEvent(s->s_copy, sl->ev[EV_CONV], 0));
    CU(cudaEventRecord(sl->ev_h2d0, s->s_copy));
    sl->direct_in = find_reg(s, frame, s->frame_bytes) != NULL;
    sl->nparts = sl->direct_in && parts_mode(eng) != PARTS_OFF ? s->parts : 1;
    s->last_nparts = sl->nparts;
    s->last_cfd = cfd_gemm_ok(eng) ? 1 : 0;
    s->last_defer = sl->nparts > 1 && !eng->hold_history && parts_mode(eng) == PARTS_DEFER
                        ? (msi_on(eng) && s->R > 0 && msi_defer_ok(eng) ? 2 : 1)
                        : 0;
    if (sl->direct_in) {
        size_t pb = s->frame_bytes / sl->nparts; /* S % parts == 0 (create) */
        for (int p = 0; p < sl->nparts; p++) {
            CU(cudaMemcpyAsync((uint8_t *)sl->d_raw + p * pb, (const uint8_t *)frame + p * pb, pb,
                               cudaMemcpyHostToDevice, s->s_copy));
            if (sl->nparts > 1) CU(cudaEventRecord(sl->ev_in[p], s->s_copy));
        }
    } else {
        /* pageable: through pinned staging; the CPU copy of chunk i+1 overlaps the DMA of chunk i */
        const uint8_t *src = (const uint8_t *)frame;
        for (size_t off = 0; off < s->frame_bytes; off += s->stage_bytes) {
            size_t nb = std::min(s->stage_bytes, s->frame_bytes - off);
            int b = s->stg_next;
            s->stg_next ^= 1;
            CU(cudaEventSynchronize(s->ev_stg[b]));
            par_memcpy(s->h_stage[b], src + off, nb, s->stage_threads);
            CU(cudaMemcpyAsync((uint8_t *)sl->d_raw + off, s->h_stage[b], nb, cudaMemcpyHostToDevice, s->s_copy));
            CU(cudaEventRecord(s->ev_stg[b], s->s_copy));
        }
    }
    CU(cudaEventRecord(sl->ev_h2d1, s->s_copy));

    /* compute after the input copy (its first part: run_device waits for
     * each part) and after the slot's last download */
    CU(cudaStreamWaitEvent(s->s_comp, sl->nparts > 1 ? sl->ev_in[0] : sl->ev_h2d1, 0));
    CU(cudaStreamWaitEvent(s->s_comp, sl->ev_d2h1, 0));
    TRY(run_device(eng, sl, sl->want, eng->hold_history, e));

    /* products -> host (own stream: overlaps the next frame's compute) */
    float *h_f32 = (float *)sl->h_out;
    uint8_t *h_u8 = sl->h_out + s->out_pixels * sizeof(float);
    CU(cudaStreamWaitEvent(s->s_d2h, sl->ev[EV_PROD], 0));
    CU(cudaEventRecord(sl->ev_d2h0, s->s_d2h));
    /* the non-finite flag with the products (a timing replay of this frame
     * rewrites d_bad with the same value and leaves h_bad as it is) */
    CU(cudaMemcpyAsync(sl->h_bad, sl->d_bad, sizeof(int), cudaMemcpyDeviceToHost, s->s_d2h));
    for (int m = 0; m < OCT_METHOD_COUNT; m++)
        for (int k = 0; k < OCT_KIND_COUNT; k++) {
            oct_image *img = &out->img[m][k];
            if (!sl->want[m][k] || img->count == 0) continue;
            ProdBuf *pb = &sl->prod[m][k];
            uint8_t *du = sl->direct_out ? img->u8 : h_u8 + pb->off;
            CU(cudaMemcpyAsync(du, pb->u, img->count, cudaMemcpyDeviceToHost, s->s_d2h));
            if (sl->f32) {
                float *df = sl->direct_out ? img->f32 : h_f32 + pb->off;
                CU(cudaMemcpyAsync(df, pb->f, img->count * sizeof(float), cudaMemcpyDeviceToHost, s->s_d2h));
            }
        }
    CU(cudaEventRecord(sl->ev_d2h1, s->s_d2h));
    return OCT_OK;
}

oct_err cuda_submit(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    CudaState *s = ST(eng);
    if (s->count >= DEPTH)
        return oct_error_set(e, OCT_EAGAIN, "cuda: %d frames in flight", s->count);
    CU(cudaSetDevice(s->device));
    if (s->count == 0) s->head = 0; /* synchronous use keeps to slot 0 (one staging) */
    int si = (s->head + s->count) % DEPTH;
    Slot *sl = &s->slot[si];
    sl->t_submit = oct_now_ms();
    oct_err err = submit_inner(eng, s, sl, frame, out, e);
    if (err != OCT_OK) {
        drain(s);
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) out->img[m][k].present = false;
        return err;
    }
    sl->out = out;
    sl->ticket = out->ticket;
    s->count++;
    s->last_slot = si;
    s->frame_on_device = true;
    return OCT_OK;
}

oct_err cuda_complete(oct_engine *eng, oct_products **done, int timeout_ms, oct_error *e)
{
    CudaState *s = ST(eng);
    *done = NULL;
    if (s->count == 0) return oct_error_set(e, OCT_ESTATE, "cuda: no frame in flight");
    CU(cudaSetDevice(s->device));
    Slot *sl = &s->slot[s->head];
    oct_err err = wait_event(sl->ev_d2h1, timeout_ms, "the oldest frame", e);
    if (err == OCT_ETIMEDOUT) return err;
    /* done (or failed): dequeue */
    s->head = (s->head + 1) % DEPTH;
    s->count--;
    oct_products *out = sl->out;
    sl->out = NULL;
    *done = out;
    if (err == OCT_OK) err = check_bad(s, sl, e);
    if (err != OCT_OK) {
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) out->img[m][k].present = false;
        return err;
    }
    if (!sl->direct_out) {
        float *h_f32 = (float *)sl->h_out;
        uint8_t *h_u8 = sl->h_out + s->out_pixels * sizeof(float);
        for (int m = 0; m < OCT_METHOD_COUNT; m++)
            for (int k = 0; k < OCT_KIND_COUNT; k++) {
                oct_image *img = &out->img[m][k];
                if (!sl->want[m][k] || img->count == 0) continue;
                const ProdBuf *pb = &sl->prod[m][k];
                memcpy(img->u8, h_u8 + pb->off, img->count);
                if (sl->f32 && img->f32) memcpy(img->f32, h_f32 + pb->off, img->count * sizeof(float));
            }
    }
    oct_stage_times *t = &eng->times;
    memset(t, 0, sizeof *t);
    t->h2d_ms = ev_ms(sl->ev_h2d0, sl->ev_h2d1);
    device_times(sl, t);
    t->d2h_ms = ev_ms(sl->ev_d2h0, sl->ev_d2h1);
    t->tail_ms = ev_ms(sl->ev_h2d1, sl->ev[EV_PROD]);
    t->total_ms = oct_now_ms() - sl->t_submit;
    return OCT_OK;
}

oct_err cuda_input_done(oct_engine *eng, uint64_t ticket, int timeout_ms, oct_error *e)
{
    CudaState *s = ST(eng);
    for (int i = 0; i < s->count; i++) {
        Slot *sl = &s->slot[(s->head + i) % DEPTH];
        if (sl->ticket != ticket) continue;
        if (!sl->direct_in) return OCT_OK; /* read by the CPU inside submit */
        CU(cudaSetDevice(s->device));
        return wait_event(sl->ev_h2d1, timeout_ms, "the frame's input copy", e);
    }
    return OCT_OK; /* completed */
}

int cuda_inflight(const oct_engine *eng) { return ST(eng)->count; }

oct_err cuda_register_host(oct_engine *eng, const void *ptr, size_t bytes, oct_error *e)
{
    CudaState *s = ST(eng);
    const uint8_t *a = (const uint8_t *)ptr;
    for (int i = 0; i < s->nreg; i++)
        if (a < s->reg[i].ptr + s->reg[i].bytes && s->reg[i].ptr < a + bytes)
            return oct_error_set(e, OCT_EINVAL, "cuda: host range %p + %zu overlaps one registered before",
                                 ptr, bytes);
    if (s->nreg >= MAX_REG)
        return oct_error_set(e, OCT_EINVAL, "cuda: %d host ranges registered already (the most)", MAX_REG);
    CU(cudaSetDevice(s->device));
    int ro = 0;
    if (cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, s->device) != cudaSuccess) {
        cudaGetLastError();
        ro = 0;
    }
    /* read-only where supported (the ring is mapped PROT_READ); else a plain
     * registration, which works for writable memory only */
    /* portable: several engines (devices) of one octd DMA from the same ring;
     * the first registers it, the others find it registered and use it */
    cudaError_t r = cudaHostRegister((void *)ptr, bytes,
                                     (ro ? cudaHostRegisterReadOnly : cudaHostRegisterDefault) |
                                         cudaHostRegisterPortable);
    bool owned = true;
    if (r == cudaErrorHostMemoryAlreadyRegistered) {
        cudaGetLastError();
        r = cudaSuccess;
        owned = false;
    }
    if (r != cudaSuccess) {
        cudaGetLastError();
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "cuda: cannot register %zu bytes of host memory for DMA%s: %s (use a pinned staging copy)",
                             bytes, ro ? " (read-only)" : " (read-only registration not supported by this device)",
                             cudaGetErrorString(r));
    }
    s->reg[s->nreg].ptr = a;
    s->reg[s->nreg].bytes = bytes;
    s->reg[s->nreg].owned = owned;
    s->nreg++;
    return OCT_OK;
}

void cuda_unregister_host(oct_engine *eng, const void *ptr)
{
    CudaState *s = ST(eng);
    for (int i = 0; i < s->nreg; i++) {
        if (s->reg[i].ptr != ptr) continue;
        warn_cuda("selecting the device", cudaSetDevice(s->device));
        /* input copies in flight may read it */
        warn_cuda("waiting for input copies", cudaStreamSynchronize(s->s_copy));
        if (s->reg[i].owned)
            warn_cuda("unregistering host memory", cudaHostUnregister((void *)ptr));
        cudaGetLastError();
        s->reg[i] = s->reg[--s->nreg];
        return;
    }
}

void cuda_products_free(oct_products *p) { warn_cuda("freeing pinned products", cudaFreeHost(p->priv)); }

/* One pinned block for every image of the geometry at its largest (laid out by engine.c). */
oct_err cuda_products_alloc(oct_engine *eng, oct_products *p, size_t bytes, oct_error *e)
{
    CU(cudaSetDevice(ST(eng)->device));
    TRY(halloc(NULL, &p->priv, bytes, "the products", e));
    p->priv_free = cuda_products_free;
    return OCT_OK;
}

void cuda_products_unregister(oct_products *p)
{
    warn_cuda("unregistering the products' memory", cudaHostUnregister(p->priv));
}

/* The caller's memory (octd's image area in shared memory): registered
 * writable, portable (every engine's device may DMA into it). */
oct_err cuda_products_adopt(oct_engine *eng, oct_products *p, void *mem, size_t bytes, oct_error *e)
{
    CU(cudaSetDevice(ST(eng)->device));
    cudaError_t r = cudaHostRegister(mem, bytes, cudaHostRegisterDefault | cudaHostRegisterPortable);
    if (r != cudaSuccess) {
        cudaGetLastError();
        return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: cannot register %zu bytes of the caller's "
                             "memory for the products: %s", bytes, cudaGetErrorString(r));
    }
    p->priv = mem;
    p->priv_free = cuda_products_unregister;
    return OCT_OK;
}

/* ------------------------------------------------------------------ */
/* backend ops                                                          */

oct_err cuda_create(oct_engine *eng, oct_error *e)
{
    CudaState *s = (CudaState *)calloc(1, sizeof *s);
    if (!s) return oct_error_set(e, OCT_ENOMEM, "cuda: out of memory for the backend state");
    s->sink_base = -1;
    eng->be = s;
    oct_err err = cuda_create_inner(eng, s, e);
    if (err != OCT_OK) {
        free_state(s);
        eng->be = NULL;
    }
    return err;
}

void cuda_destroy(oct_engine *eng)
{
    CudaState *s = ST(eng);
    if (!s) return;
    warn_cuda("selecting the device", cudaSetDevice(s->device));
    drain(s);
    free_state(s);
    eng->be = NULL;
}

oct_err cuda_prepare(oct_engine *eng, const oct_plan *plan, oct_error *e)
{
    CU(cudaSetDevice(ST(eng)->device));
    return sync_plan(eng, plan, e);
}

/* Synchronous: one frame through the same pipeline (engine.c made sure
 * nothing is in flight). */
oct_err cuda_process(oct_engine *eng, const void *frame, oct_products *out, oct_error *e)
{
    TRY(cuda_submit(eng, frame, out, e));
    oct_products *done = NULL;
    return cuda_complete(eng, &done, -1, e);
}

} /* namespace */

/* ------------------------------------------------------------------ */
/* public                                                               */

extern "C" {

const oct_backend_ops oct_cuda_backend = {
    "cuda", cuda_create, cuda_destroy, cuda_prepare, cuda_msi_rates, false, false, cuda_process,
    DEPTH, cuda_submit, cuda_complete, cuda_input_done, cuda_inflight,
    cuda_register_host, cuda_unregister_host, cuda_products_alloc, cuda_products_adopt};

bool oct_cuda_built(void) { return true; }

oct_err oct_cuda_probe(int device, char *name, size_t name_len, oct_error *e)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error state */
        return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: no usable device: %s (%s)",
                             cudaGetErrorString(err), cudaGetErrorName(err));
    }
    if (count == 0) return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: no device found");
    if (device < 0 || device >= count)
        return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: device %d does not exist (%d device%s found)",
                             device, count, count == 1 ? "" : "s");
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        return oct_error_set(e, OCT_EUNSUPPORTED, "CUDA: device %d: %s", device, cudaGetErrorString(err));
    if (prop.major < 9)
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "CUDA: device %d (%s) has compute capability %d.%d; this build needs 9.0 or newer",
                             device, prop.name, prop.major, prop.minor);
    if (name && name_len > 0) snprintf(name, name_len, "%s", prop.name);
    return OCT_OK;
}

static bool is_cuda(const oct_engine *eng) { return eng && eng->ops == &oct_cuda_backend && eng->be; }

int oct_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

int oct_engine_numa_node(const oct_engine *eng)
{
    if (!is_cuda(eng)) return -1;
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, eng->setup.device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    for (char *c = bus; *c; c++) *c = (char)tolower((unsigned char)*c); /* sysfs spells it so */
    char path[96];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", bus);
    FILE *f = fopen(path, "r");
    int node = -1;
    if (f) {
        if (fscanf(f, "%d", &node) != 1) node = -1;
        fclose(f);
    }
    return node >= 0 ? node : -1;
}

oct_err oct_cuda_pci_bus_id(int device, char *bus, size_t len, oct_error *e)
{
    if (bus && len) bus[0] = '\0';
    char id[32];
    cudaError_t r = cudaDeviceGetPCIBusId(id, (int)sizeof id, device);
    if (r != cudaSuccess) {
        cudaGetLastError();
        return oct_error_set(e, OCT_EDEVICE, "cuda device %d: cudaDeviceGetPCIBusId: %s", device,
                             cudaGetErrorString(r));
    }
    if (!bus || strlen(id) + 1 > len)
        return oct_error_set(e, OCT_ESIZE, "cuda device %d: PCI id '%s' does not fit %zu bytes",
                             device, id, len);
    for (size_t i = 0; id[i]; i++) bus[i] = (char)tolower((unsigned char)id[i]);
    bus[strlen(id)] = '\0';
    return OCT_OK;
}

oct_err oct_engine_pci_bus_id(const oct_engine *eng, char *bus, size_t len, oct_error *e)
{
    if (bus && len) bus[0] = '\0';
    if (!is_cuda(eng))
        return oct_error_set(e, OCT_EUNSUPPORTED, "%s engine: no PCI device",
                             eng ? oct_engine_backend_name(eng) : "no");
    return oct_cuda_pci_bus_id(eng->setup.device, bus, len, e);
}

uint64_t oct_cuda_alloc_count(const oct_engine *eng)
{
    return is_cuda(eng) ? ST(eng)->allocs : 0;
}

int oct_cuda_last_parts(const oct_engine *eng) { return is_cuda(eng) ? ST(eng)->last_nparts : 0; }
int oct_cuda_last_deferred(const oct_engine *eng) { return is_cuda(eng) ? ST(eng)->last_defer : 0; }
long long oct_cuda_disp_batch(const oct_engine *eng) { return is_cuda(eng) ? ST(eng)->DB : 0; }
int oct_cuda_last_cfd_gemm(const oct_engine *eng) { return is_cuda(eng) ? ST(eng)->last_cfd : 0; }
int oct_cuda_disp_fused(const oct_engine *eng) { return is_cuda(eng) && ST(eng)->disp_fused && !ST(eng)->x_on_comp; }

void oct_cuda_graph_counts(const oct_engine *eng, uint64_t *launches, uint64_t *captures, uint64_t *fails)
{
    const CudaState *s = is_cuda(eng) ? ST(eng) : NULL;
    if (launches) *launches = s ? s->graph_launches : 0;
    if (captures) *captures = s ? s->graph_captures : 0;
    if (fails) *fails = s ? s->graph_fails : 0;
}

const char *oct_cuda_gemm_name(const oct_engine *eng)
{
    if (!is_cuda(eng)) return "none";
    if (ST(eng)->R == 0 || ST(eng)->path != OCT_MSI_GEMM) return "none";
    return ST(eng)->h16 ? "3xfp16" : gemm_names[ST(eng)->gemm_mode];
}

int oct_cuda_gemm_picks(const oct_engine *eng, char *buf, size_t len)
{
    if (len) buf[0] = '\0';
    if (!is_cuda(eng)) return 0;
    const CudaState *s = ST(eng);
    int n = 0;
    size_t at = 0;
    for (const GemmPick &g : s->pick) {
        if (!g.used) continue;
        if (at < len) {
            int w = snprintf(buf + at, len - at, "%s%dx%dx%d %s: %s %.1f us (default %.1f us)", n ? "; " : "", g.m,
                             g.n, g.k, g.kind == GK_F16 ? "f16" : "tf32", g.lt ? "lt" : "default", g.us_pick,
                             g.us_default);
            if (w > 0) at += (size_t)w;
        }
        n++;
    }
    return n;
}

oct_err oct_cuda_time_device(oct_engine *eng, int reps, double *median_ms, oct_stage_times *t,
                             oct_error *e)
{
    if (!is_cuda(eng)) return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!s->frame_on_device)
        return oct_error_set(e, OCT_ESTATE, "cuda: no frame on the device yet: process one first");
    if (s->count > 0)
        return oct_error_set(e, OCT_ESTATE, "cuda: %d frame(s) in flight: complete them first", s->count);
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    Slot *sl = &s->slot[s->last_slot];
    bool want[OCT_METHOD_COUNT][OCT_KIND_COUNT];
    wanted(eng, want);
    /* plain C arrays: the library is linked by the C compiler (no libstdc++) */
    double *v = (double *)malloc((size_t)reps * 2 * sizeof(double));
    oct_stage_times *ts = (oct_stage_times *)malloc((size_t)reps * sizeof(oct_stage_times));
    if (!v || !ts) {
        free(v);
        free(ts);
        return oct_error_set(e, OCT_ENOMEM, "cuda: out of memory for %d timings", reps);
    }
    oct_err err = OCT_OK;
    for (int r = 0; r < reps && err == OCT_OK; r++) {
        err = run_device(eng, sl, want, true, e);
        cudaError_t cr = err == OCT_OK ? cudaEventSynchronize(sl->ev[EV_PROD]) : cudaSuccess;
        if (cr != cudaSuccess)
            err = oct_error_set(e, OCT_EDEVICE, "cuda: timing replay: %s", cudaGetErrorString(cr));
        memset(&ts[r], 0, sizeof ts[r]);
        device_times(sl, &ts[r]);
        ts[r].total_ms = ts[r].device_ms;
        v[r] = v[reps + r] = ts[r].device_ms;
    }
    if (err == OCT_OK) {
        std::sort(v + reps, v + 2 * reps);
        double med = v[reps + reps / 2];
        if (median_ms) *median_ms = med;
        if (t)
            for (int i = 0; i < reps; i++)
                if (v[i] == med) { *t = ts[i]; break; }
        err = check_bad(s, sl, e);
    }
    free(v);
    free(ts);
    return err;
}

oct_err oct_cuda_d2d_rate(oct_engine *eng, int reps, double *gbps, oct_error *e)
{
    if (!is_cuda(eng)) return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!gbps) return oct_error_set(e, OCT_EINVAL, "cuda: d2d rate: no result pointer");
    if (s->count > 0)
        return oct_error_set(e, OCT_ESTATE, "cuda: %d frame(s) in flight: complete them first", s->count);
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    /* d_xp and d_xk (S x M floats each) are scratch between frames */
    size_t bytes = (size_t)s->S * s->M * sizeof(float);
    Slot *sl = &s->slot[0];
    CU(cudaMemcpyAsync(s->d_xk, s->d_xp, bytes, cudaMemcpyDeviceToDevice, s->s_comp)); /* warm-up */
    CU(cudaEventRecord(sl->ev_h2d0, s->s_comp));
    for (int r = 0; r < reps; r++)
        CU(cudaMemcpyAsync(s->d_xk, s->d_xp, bytes, cudaMemcpyDeviceToDevice, s->s_comp));
    CU(cudaEventRecord(sl->ev_h2d1, s->s_comp));
    CU(cudaEventSynchronize(sl->ev_h2d1));
    float ms = 0.0f;
    CU(cudaEventElapsedTime(&ms, sl->ev_h2d0, sl->ev_h2d1));
    *gbps = ms > 0 ? 2.0 * (double)bytes * reps / ((double)ms * 1e-3) / 1e9 : 0.0;
    return OCT_OK;
}

oct_err oct_cuda_h2d_rate(oct_engine *eng, const void *src, size_t bytes, int reps, double *gbps,
                          oct_error *e)
{
    if (!is_cuda(eng)) return oct_error_set(e, OCT_EUNSUPPORTED, "cuda: not a CUDA engine");
    CudaState *s = ST(eng);
    if (!src || !gbps || bytes == 0 || bytes > s->frame_bytes)
        return oct_error_set(e, OCT_EINVAL, "cuda: h2d rate: %zu bytes (1..%zu) from %p", bytes,
                             s->frame_bytes, src);
    if (s->count > 0)
        return oct_error_set(e, OCT_ESTATE, "cuda: %d frame(s) in flight: complete them first", s->count);
    if (reps < 1) reps = 1;
    CU(cudaSetDevice(s->device));
    Slot *sl = &s->slot[0];
    CU(cudaMemcpyAsync(sl->d_raw, src, bytes, cudaMemcpyHostToDevice, s->s_copy)); /* warm-up */
    CU(cudaEventRecord(sl->ev_h2d0, s->s_copy));
    for (int r = 0; r < reps; r++)
        CU(cudaMemcpyAsync(sl->d_raw, src, bytes, cudaMemcpyHostToDevice, s->s_copy));
    CU(cudaEventRecord(sl->ev_h2d1, s->s_copy));
    CU(cudaEventSynchronize(sl->ev_h2d1));
    double ms = ev_ms(sl->ev_h2d0, sl->ev_h2d1);
    *gbps = ms > 0 ? (double)bytes * reps / (ms * 1e-3) / 1e9 : 0.0;
    s->frame_on_device = false; /* d_raw of slot 0 now holds these bytes */
    return OCT_OK;
}

} /* extern "C" */
