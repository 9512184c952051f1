/* fuzz_ring.c - the frame ring header (SPEC 3.1) as a hostile producer may
 * write it.
 *
 * Input: u64 object_bytes (little-endian), u8 flags, then the shared
 * object's first bytes (header at 0, then slots; zero-filled after).
 *  1. oct_ring_header_check(header, object_bytes): never crashes; when it
 *     accepts, every slot's header and frame lie inside object_bytes.
 *  2. When accepted and object_bytes <= 1 MiB: the object is created for
 *     real (POSIX shm), and oct_ring_consumer_open() + _next() (flags bit 0:
 *     policy all) or _peek() + _verify() (bit 1) run on it once or twice,
 *     with the fuzzed write_seq, slot seqs and state: a consumer must trust
 *     nothing it reads there. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "oct_ipc.h"

#define REAL_MAX (1u << 20)

static char shm_name[64];

static void cleanup(void) { shm_unlink(shm_name); }

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(shm_name, sizeof shm_name, "/octfuzz-ring-%ld", (long)getpid());
    atexit(cleanup);
    return 0;
}

static void check_layout(const oct_ring_header *h, uint64_t object_bytes)
{
    uint32_t K = h->slot_count;
    FUZZ_CHECK(K >= 2 && (K & (K - 1)) == 0, "slot_count %u", K);
    oct_geometry g = {h->samples, h->ascans, h->lines, h->sample_type, h->sample_shift};
    FUZZ_CHECK(oct_geometry_check(&g, NULL) == OCT_OK, "geometry accepted");
    uint64_t fb = (uint64_t)g.samples * g.ascans * g.lines * oct_sample_size(g.sample_type);
    FUZZ_CHECK(h->frame_bytes == fb, "frame_bytes %llu != %llu",
               (unsigned long long)h->frame_bytes, (unsigned long long)fb);
    FUZZ_CHECK(h->slot0_offset >= OCT_RING_HEADER_BYTES && h->slot0_offset % 4096 == 0 &&
                   h->slot_stride % 4096 == 0,
               "alignment");
    FUZZ_CHECK(h->slot_stride >= OCT_SLOT_HEADER_BYTES + fb, "stride too small");
    /* the last slot's end, computed in 128 bits */
    unsigned __int128 end = (unsigned __int128)h->slot0_offset +
                            (unsigned __int128)(K - 1) * h->slot_stride + OCT_SLOT_HEADER_BYTES +
                            fb;
    FUZZ_CHECK(end <= object_bytes, "last slot ends past the object");
}

static void real_consumer(const uint8_t *bytes, size_t n, uint64_t object_bytes, uint8_t flags)
{
    shm_unlink(shm_name);
    int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        perror("fuzz_ring: shm_open");
        abort();
    }
    if (ftruncate(fd, (off_t)object_bytes) != 0) {
        perror("fuzz_ring: ftruncate");
        abort();
    }
    uint8_t *map = mmap(NULL, object_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        perror("fuzz_ring: mmap");
        abort();
    }
    memcpy(map, bytes, n < object_bytes ? n : object_bytes);

    oct_ring_consumer *c = NULL;
    oct_error e = {{0}};
    oct_err err = oct_ring_consumer_open(&c, shm_name, &e);
    fuzz_check_error("consumer_open", err, &e);
    if (err == OCT_OK) {
        oct_ring_consumer_set_stale_ms(c, UINT32_MAX); /* the fuzzed heartbeat is old */
        oct_ring_policy pol = flags & 1 ? OCT_POLICY_ALL : OCT_POLICY_LATEST;
        const oct_ring_header *h = oct_ring_consumer_header(c);
        size_t fb = (size_t)h->frame_bytes;
        uint8_t *dst = malloc(fb ? fb : 1);
        if (!dst)
            abort();
        for (int round = 0; round < 2; round++) {
            oct_frame_info info;
            memset(&info, 0, sizeof info);
            if (flags & 2) {
                const void *frame = NULL;
                err = oct_ring_consumer_peek(c, pol, 0, &frame, &info, &e);
                fuzz_check_error("peek", err, &e);
                if (err == OCT_OK) {
                    const uint8_t *f = frame;
                    const uint8_t *base = (const uint8_t *)h; /* the consumer's own mapping */
                    FUZZ_CHECK(f >= base + OCT_RING_HEADER_BYTES && f + fb <= base + object_bytes,
                               "frame outside the object");
                    memcpy(dst, frame, fb);
                    (void)oct_ring_consumer_verify(c, &info);
                }
            } else {
                err = oct_ring_consumer_next(c, pol, dst, fb, 0, &info, &e);
                fuzz_check_error("next", err, &e);
            }
            if (err != OCT_OK && err != OCT_ETORN)
                break;
        }
        oct_ring_stats st;
        oct_ring_consumer_stats(c, &st);
        free(dst);
        oct_ring_consumer_close(c);
    }
    munmap(map, object_bytes);
    shm_unlink(shm_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    uint64_t object_bytes = fuzz_le64(data);
    uint8_t flags = data[8];
    const uint8_t *bytes = data + 9;
    size_t n = size - 9;

    oct_ring_header *h = calloc(1, sizeof *h);
    if (!h)
        abort();
    memcpy(h, bytes, n < sizeof *h ? n : sizeof *h);
    oct_error e = {{0}};
    oct_err err = oct_ring_header_check(h, object_bytes, &e);
    fuzz_check_error("header_check", err, &e);
    if (err == OCT_OK) {
        check_layout(h, object_bytes);
        if (object_bytes <= REAL_MAX)
            real_consumer(bytes, n, object_bytes, flags);
    }
    free(h);
    return 0;
}
