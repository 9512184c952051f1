/* fuzz_profile.c - the profile YAML (SPEC 5.2): oct_profile_parse() on
 * arbitrary bytes.  Must never crash or hang; an error names the file; a
 * profile that parses with a geometry is also accepted by the engine's
 * oct_params_validate() (octd would otherwise start with values it then
 * refuses). */
#include "fuzz_common.h"
#include "oct_config.h"
#include "oct_engine.h"

#define DIR "/etc/octd/profiles"
#define NAME DIR "/fuzz.yaml"

static void check_path(const char *path, size_t size, const char *what)
{
    FUZZ_CHECK(memchr(path, '\0', size) != NULL, "%s not terminated", what);
    if (*path)
        FUZZ_CHECK(path[0] == '/', "%s '%s' not resolved to an absolute path", what, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oct_profile *p = calloc(1, sizeof *p), *before = calloc(1, sizeof *before);
    if (!p || !before)
        abort();
    oct_error e = {{0}};
    oct_err err = oct_profile_parse(p, (const char *)data, size, NAME, &e);
    fuzz_check_error("parse", err, &e);
    if (err) {
        FUZZ_CHECK(!strncmp(e.msg, NAME, strlen(NAME)), "message does not name the file: %s",
                   e.msg);
        FUZZ_CHECK(!memcmp(p, before, sizeof *p), "profile changed on error");
        goto out;
    }
    FUZZ_CHECK_STR(p->source_path);
    check_path(p->masks_path, sizeof p->masks_path, "masks_path");
    check_path(p->reference_path, sizeof p->reference_path, "reference_path");
    FUZZ_CHECK(oct_sample_size(p->masks_type) != 0, "masks_type %u", p->masks_type);
    if (p->has_geometry) {
        oct_error ge = {{0}};
        err = oct_geometry_check(&p->geom, &ge);
        FUZZ_CHECK(err == OCT_OK, "accepted geometry fails oct_geometry_check: %s", ge.msg);
        uint32_t masks = p->masks_count ? p->masks_count : (*p->masks_path ? 1 : 0);
        err = oct_params_validate(&p->params, &p->geom, masks, *p->reference_path != '\0', &ge);
        FUZZ_CHECK(err == OCT_OK, "accepted profile fails oct_params_validate: %s", ge.msg);
    }
out:
    free(p);
    free(before);
    return 0;
}
