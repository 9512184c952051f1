/* jsonhdr.h - a strict, bounded JSON reader for octd's image headers: it
 * checks the whole text's syntax and picks the top-level members octgrab
 * uses.  Garbage gives false, never a crash. */
#ifndef OCTGRAB_JSONHDR_H
#define OCTGRAB_JSONHDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct grab_header {
    char htype[32];
    char topic[128];
    char dtype[8];
    uint64_t image_seq, frame_id, frame_seq, t_acq_ns, t_pub_ns, params_gen;
    uint32_t shape[3];
    int ndim;
    bool has_image_seq, has_shape, has_t_acq;
} grab_header;

/* Parses len bytes (not NUL-terminated).  false with a reason in err. */
bool grab_header_parse(const char *text, size_t len, grab_header *h, char *err, size_t err_len);

#endif
