/* The runtime on the cpu backend: four worker lanes (grains spread over
 * threads: turn order must still hold), one, and inline on the caller's
 * thread. */
#include "runtime_cases.h"

int main(void)
{
    const struct CMUnitTest tests[] = {GB_RUNTIME_CASES};
    g_mode = GB_MODE_CPU;
    g_lanes = 4;
    int failed = cmocka_run_group_tests_name("runtime cpu, 4 lanes", tests, NULL, NULL);
    g_lanes = 1;
    failed += cmocka_run_group_tests_name("runtime cpu, 1 lane", tests, NULL, NULL);
    g_lanes = 0;
    failed += cmocka_run_group_tests_name("runtime cpu, inline (no worker thread)", tests, NULL, NULL);
    return failed ? 1 : 0;
}
