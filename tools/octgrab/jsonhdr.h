/* jsonhdr.h - a strict, bounded JSON reader for octd's image headers: it
 * checks the whole text's syntax and picks the top-level members octgrab
 * uses.  Garbage gives false, never a crash.  The shm_* members of a
 * message from [publish] shm_endpoint are parsed as strictly: shm_name a
 * string of at most GRAB_SHM_NAME_MAX bytes, the others non-negative
 * integers (shm_slot below 2^32). */
#ifndef OCTGRAB_JSONHDR_H
#define OCTGRAB_JSONHDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRAB_SHM_NAME_MAX 255 /* a longer shm_name is malformed, never cut */

typedef struct grab_header {
    char htype[32];
    char topic[128];
    char dtype[8];
    uint64_t image_seq, frame_id, frame_seq, t_acq_ns, t_pub_ns, params_gen;
    uint32_t shape[3];
    int ndim;
    bool has_image_seq, has_shape, has_t_acq;
    /* [publish] shm_endpoint: where the image lies in octd's image area
     * (ipc/PROTOCOL.md "Images in shared memory"); the payload is empty */
    char shm_name[GRAB_SHM_NAME_MAX + 1];
    uint64_t shm_id, shm_seq, shm_offset, shm_bytes;
    uint32_t shm_slot;
    unsigned shm_seen; /* a bit per member present: GRAB_SHM_* */
} grab_header;

enum {
    GRAB_SHM_NAME = 1u << 0, GRAB_SHM_ID = 1u << 1, GRAB_SHM_SLOT = 1u << 2,
    GRAB_SHM_SEQ = 1u << 3, GRAB_SHM_OFFSET = 1u << 4, GRAB_SHM_BYTES = 1u << 5,
    GRAB_SHM_ALL = (1u << 6) - 1
};

/* Parses len bytes (not NUL-terminated).  false with a reason in err. */
bool grab_header_parse(const char *text, size_t len, grab_header *h, char *err, size_t err_len);

#endif
