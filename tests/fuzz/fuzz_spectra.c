/* fuzz_spectra.c - mask / reference loading (SPEC 5.3): oct_load_spectra()
 * on an arbitrary file, raw or .npy.
 *
 * Input: byte 0 picks M = 64 << (b % 8); byte 1 the raw sample type (0..4,
 * so unknown types are tried too); byte 2 the expected rows (0 = any, 1..3);
 * byte 3 bit 0 the file name's suffix (.npy or .raw: the loader also sniffs
 * the magic); the rest is the file.  A success gives rows x M finite floats. */
#include <math.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "oct_config.h"

static char dir[64];

static void cleanup(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/masks.npy", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/masks.raw", dir);
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%.40s/octfuzz-spectra.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("fuzz_spectra: mkdtemp");
        abort();
    }
    atexit(cleanup);
    return 0;
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t samples = 64u << (data[0] % 8);
    uint32_t raw_type = data[1] % 5;
    uint32_t expect = data[2] % 4;
    char path[128];
    snprintf(path, sizeof path, "%s/masks.%s", dir, data[3] & 1 ? "npy" : "raw");
    write_file(path, data + 4, size - 4);

    float *f = NULL;
    uint32_t rows = 0;
    oct_error e = {{0}};
    oct_err err = oct_load_spectra(path, raw_type, samples, expect, &f, &rows, &e);
    fuzz_check_error("load_spectra", err, &e);
    unlink(path);
    if (err) {
        FUZZ_CHECK(f == NULL && rows == 0, "output set on error");
        FUZZ_CHECK(strstr(e.msg, path) != NULL, "message does not name the file: %s", e.msg);
        return 0;
    }
    FUZZ_CHECK(f != NULL && rows >= 1, "success without data");
    if (expect)
        FUZZ_CHECK(rows == expect, "%u rows, %u expected", rows, expect);
    /* each float is at least one byte of the file */
    FUZZ_CHECK((uint64_t)rows * samples <= size - 4, "%u x %u floats from %zu bytes", rows,
               samples, size - 4);
    for (uint64_t i = 0; i < (uint64_t)rows * samples; i++)
        FUZZ_CHECK(isfinite(f[i]), "value %llu is not finite", (unsigned long long)i);
    free(f);
    return 0;
}
