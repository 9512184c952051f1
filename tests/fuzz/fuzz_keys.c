/* fuzz_keys.c - octctl's `set KEY=VALUE` parser (config/control_keys.c):
 * oct_control_assign() on each line of the input, starting from the default
 * values.  A refused assignment has a reason and changes nothing; an
 * accepted one is stable under set(key, get(key)), and the whole `get`
 * output sets zeroed values to the same ones (octctl get | octctl set). */
#include "fuzz_common.h"
#include "oct_control_keys.h"
#include "oct_engine.h"

static bool same(const oct_control_values *a, const oct_control_values *b)
{
    oct_params pa, pb;
    oct_params_from_control(&pa, a);
    oct_params_from_control(&pb, b);
    return !memcmp(&pa, &pb, sizeof pa) && a->command == b->command &&
           a->command_seq == b->command_seq;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    oct_params p;
    oct_params_default(&p);
    oct_control_values v;
    memset(&v, 0, sizeof v);
    oct_control_from_params(&v, &p);

    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        oct_control_values before = v;
        oct_error e = {{0}};
        oct_err err = oct_control_assign(&v, line, &e);
        fuzz_check_error("assign", err, &e);
        if (err) {
            FUZZ_CHECK(same(&v, &before), "'%s' refused but values changed", line);
            continue;
        }
        /* the key as the parser saw it: trimmed text before '=' */
        const char *eq = strchr(line, '=');
        FUZZ_CHECK(eq != NULL, "'%s' accepted without '='", line);
        const char *k = line;
        while (k < eq && (*k == ' ' || *k == '\t' || *k == '\r' || *k == '\v' || *k == '\f'))
            k++;
        size_t klen = (size_t)(eq - k);
        while (klen && (k[klen - 1] == ' ' || k[klen - 1] == '\t' || k[klen - 1] == '\r' ||
                        k[klen - 1] == '\v' || k[klen - 1] == '\f'))
            klen--;
        char key[64];
        FUZZ_CHECK(klen < sizeof key, "key too long accepted");
        memcpy(key, k, klen);
        key[klen] = '\0';
        char val[256];
        err = oct_control_key_get(&v, key, val, sizeof val, &e);
        FUZZ_CHECK(err == OCT_OK, "get %s after set: %s", key, e.msg);
        FUZZ_CHECK(strlen(val) < sizeof val - 1, "value of %s cut", key);
        /* set(key, get(key)) changes nothing */
        oct_control_values again = v;
        err = oct_control_key_set(&again, key, val, &e);
        FUZZ_CHECK(err == OCT_OK, "%s: get printed '%s', set refuses it: %s", key, val, e.msg);
        FUZZ_CHECK(same(&again, &v), "%s: '%s' (from '%s') does not read back the same", key, val,
                   line);
    }
    /* the whole `get` output, set into zeroed values, gives them all back */
    char all[4096];
    size_t n = oct_control_format_all(&v, all, sizeof all);
    FUZZ_CHECK(n < sizeof all, "format_all: %zu", n);
    oct_control_values w;
    memset(&w, 0, sizeof w);
    w.command_seq = v.command_seq;
    w.command = v.command;
    save = NULL;
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        oct_error e = {{0}};
        oct_err err = oct_control_assign(&w, line, &e);
        FUZZ_CHECK(err == OCT_OK, "'%s' printed by get is refused by set: %s", line, e.msg);
    }
    FUZZ_CHECK(same(&w, &v), "values changed in the get/set round trip");
    free(text);
    return 0;
}
