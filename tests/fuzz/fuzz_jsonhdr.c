/* fuzz_jsonhdr.c - octgrab's JSON image-header reader
 * (tools/octgrab/jsonhdr.c): grab_header_parse() on arbitrary bytes (not
 * NUL-terminated).  Never crashes or recurses without bound; a refusal has
 * a reason; an accepted header has terminated strings and ndim <= 3. */
#include "fuzz_common.h"
#include "jsonhdr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    grab_header h;
    memset(&h, 0, sizeof h);
    char err[128];
    memset(err, 0x55, sizeof err);
    bool ok = grab_header_parse((const char *)data, size, &h, err, sizeof err);
    if (!ok) {
        FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL && err[0], "no reason given");
        return 0;
    }
    FUZZ_CHECK_STR(h.htype);
    FUZZ_CHECK_STR(h.topic);
    FUZZ_CHECK_STR(h.dtype);
    FUZZ_CHECK(h.ndim >= 0 && h.ndim <= 3, "ndim %d", h.ndim);
    return 0;
}
