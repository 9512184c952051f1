/* cuda_check.cuh - early return with an oct_error for a failed CUDA runtime
 * or cuFFT call, for the kernels' files whose errors name their part
 * ("angio cuda: ...", "registration: ...") and what failed.  The caller has
 * an `oct_error *e` in scope and returns oct_err. */
#ifndef OCT_CUDA_CHECK_CUH
#define OCT_CUDA_CHECK_CUH

#include <cuda_runtime.h>
#include <cufft.h>

#include "oct_ipc_types.h"

#define OCT_CUDA_TRY(call, part, what)                                                       \
    do {                                                                                     \
        cudaError_t oct_ce_ = (call);                                                        \
        if (oct_ce_ != cudaSuccess)                                                          \
            return oct_error_set(e, OCT_EDEVICE, "%s: %s: %s", part, what,                   \
                                 cudaGetErrorString(oct_ce_));                               \
    } while (0)
#define OCT_CUFFT_TRY(call, part, what)                                                      \
    do {                                                                                     \
        cufftResult oct_fr_ = (call);                                                        \
        if (oct_fr_ != CUFFT_SUCCESS)                                                        \
            return oct_error_set(e, OCT_EDEVICE, "%s: cuFFT %s failed (%d)", part, what,     \
                                 (int)oct_fr_);                                              \
    } while (0)

#endif
