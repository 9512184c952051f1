/* fuzz_ini.c - octd.ini parsing (SPEC 5.1): oct_daemon_config_parse() on
 * arbitrary bytes.  Must never crash; an error names the file; a parsed
 * configuration holds only values within the documented ranges. */
#include <syslog.h>

#include "fuzz_common.h"
#include "oct_config.h"

#define NAME "/etc/octd/fuzz.ini"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oct_daemon_config c, before;
    oct_daemon_config_default(&c);
    before = c;
    oct_error e = {{0}};
    oct_err err = oct_daemon_config_parse(&c, (const char *)data, size, NAME, &e);
    fuzz_check_error("parse", err, &e);
    if (err) {
        FUZZ_CHECK(!strncmp(e.msg, NAME, strlen(NAME)), "message does not name the file: %s",
                   e.msg);
        FUZZ_CHECK(!memcmp(&c, &before, sizeof c), "config changed on error");
        return 0;
    }
    FUZZ_CHECK(c.backend >= OCT_BACKEND_AUTO && c.backend <= OCT_BACKEND_CUDA, "backend %d",
               (int)c.backend);
    FUZZ_CHECK(c.device >= 0 && c.device <= 1023, "device %d", c.device);
    FUZZ_CHECK(c.threads >= 0 && c.threads <= 4096, "threads %d", c.threads);
    FUZZ_CHECK(c.policy == 0 || c.policy == 1, "policy %d", c.policy);
    FUZZ_CHECK(c.endpoint_count >= 1 && c.endpoint_count <= OCT_MAX_ENDPOINTS, "endpoints %d",
               c.endpoint_count);
    FUZZ_CHECK(c.sndhwm >= 1 && c.sndhwm <= 1000000, "sndhwm %d", c.sndhwm);
    FUZZ_CHECK(c.pub_sndbuf == 0 || (c.pub_sndbuf >= 4096 && c.pub_sndbuf <= 1 << 26), "sndbuf %d",
               c.pub_sndbuf);
    FUZZ_CHECK(c.pub_io_threads >= 0 && c.pub_io_threads <= 64, "io_threads %d", c.pub_io_threads);
    FUZZ_CHECK(c.pub_nice >= 0 && c.pub_nice <= 19, "nice %d", c.pub_nice);
    FUZZ_CHECK_STR(c.pub_cpus);
    FUZZ_CHECK(strspn(c.pub_cpus, "0123456789-,") == strlen(c.pub_cpus), "cpus '%s'", c.pub_cpus);
    FUZZ_CHECK(c.pub_copies == OCT_PUB_COPIES_PUBLISHER || c.pub_copies == OCT_PUB_COPIES_FRAME ||
                   c.pub_copies == OCT_PUB_COPIES_AUTO,
               "copies %d", c.pub_copies);
    FUZZ_CHECK(c.pub_stats_s >= 0 && c.pub_stats_s <= 3600, "stats %d", c.pub_stats_s);
    FUZZ_CHECK(c.log_level >= LOG_EMERG && c.log_level <= LOG_DEBUG, "log_level %d",
               c.log_level);
    FUZZ_CHECK_STR(c.ring_frames);
    FUZZ_CHECK_STR(c.ring_control);
    FUZZ_CHECK_STR(c.ring_status);
    FUZZ_CHECK_STR(c.profile_path);
    FUZZ_CHECK_STR(c.save_dir);
    FUZZ_CHECK(c.ring_frames[0] == '/' && c.ring_control[0] == '/' && c.ring_status[0] == '/',
               "shared-memory names must start with '/'");
    for (int i = 0; i < c.endpoint_count; i++) {
        FUZZ_CHECK_STR(c.endpoints[i]);
        FUZZ_CHECK(c.endpoints[i][0] != '\0', "endpoint %d empty", i);
    }
    return 0;
}
