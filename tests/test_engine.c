/* test_engine.c - the engine's numeric suite (tests/lib/engine_suite.c) on
 * the CPU backend, against the float64 reference. */
#include <stdlib.h>

#include <check.h>

#include "lib/engine_suite.h"

int main(void)
{
    SRunner *sr = srunner_create(oct_engine_suite(OCT_BACKEND_CPU, "engine-cpu"));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
