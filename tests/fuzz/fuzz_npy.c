/* fuzz_npy.c - .npy parsing: oct_npy_parse() on arbitrary bytes.  Must never
 * crash or over-read; a parsed array's shape, count and data agree, and its
 * data is readable in full (ASan checks the allocation's size). */
#include "fuzz_common.h"
#include "oct_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oct_array a;
    oct_error e = {{0}};
    oct_err err = oct_npy_parse(data, size, "fuzz.npy", &a, &e);
    fuzz_check_error("parse", err, &e);
    if (err) {
        FUZZ_CHECK(a.data == NULL && a.count == 0 && a.ndim == 0, "array not cleared on error");
        return 0;
    }
    size_t es = oct_dtype_size(a.dtype);
    FUZZ_CHECK(es != 0, "dtype %d", (int)a.dtype);
    FUZZ_CHECK(a.ndim >= 0 && a.ndim <= OCT_NPY_MAX_DIMS, "ndim %d", a.ndim);
    uint64_t count = 1;
    for (int i = 0; i < a.ndim; i++)
        count *= a.shape[i];
    FUZZ_CHECK(count == a.count, "count %llu, shape product %llu", (unsigned long long)a.count,
               (unsigned long long)count);
    FUZZ_CHECK(a.count * es <= size, "%llu elements of %zu bytes from a %zu-byte file",
               (unsigned long long)a.count, es, size);
    FUZZ_CHECK(a.data != NULL, "no data");
    /* the data is the file's tail; touch every byte */
    const uint8_t *d = a.data;
    size_t bytes = (size_t)a.count * es;
    volatile unsigned sum = 0;
    for (size_t i = 0; i < bytes; i++)
        sum += d[i];
    if (a.dtype == OCT_DTYPE_U8 || !bytes)
        FUZZ_CHECK(!memcmp(d, data + size - bytes, bytes), "data differs from the file's tail");
    (void)sum;
    oct_array_free(&a);
    return 0;
}
