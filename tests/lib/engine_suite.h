/* engine_suite.h - the engine's numeric test suite (SPEC sections 2 and 7),
 * shared by every backend: tests/test_engine.c runs it on the CPU,
 * tests/test_cuda_engine.c on CUDA.  Every product of every case is compared
 * with the float64 reference of ref64.h. */
#ifndef OCT_ENGINE_SUITE_H
#define OCT_ENGINE_SUITE_H

#include <check.h>

#include "oct_engine.h"

/* All numeric tests for `backend` (FP32 precision), in a suite named `name`.
 * The backend is kept in a file-level variable of engine_suite.c (Check
 * test functions take no argument), so one process runs suites of one
 * backend at a time. */
Suite *oct_engine_suite(oct_backend backend, const char *name);

/* The same with a precision: TF32 compares intensities within 1e-3 instead
 * of 1e-4 and widens the gray rule by the corresponding intensity error. */
Suite *oct_engine_suite_ex(oct_backend backend, oct_precision precision, const char *name);

#endif
