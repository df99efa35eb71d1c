/* The runtime cases on the CUDA backend, persistent mode: mapped pinned
 * placement, then the fallback placements (device memory + pinned staging,
 * device memory + malloc staging). */
#include "gpu_skip.h"
#include "runtime_cases.h"

int main(void)
{
    gb_require_gpu();
    const struct CMUnitTest tests[] = {GB_RUNTIME_CASES};
    g_mode = GB_MODE_PERSISTENT;
    g_force_fallback = 0;
    int failed = cmocka_run_group_tests_name("runtime persistent, mapped", tests, NULL, NULL);
    /* GB_TEST_MAPPED_ONLY=1: the short form for compute-sanitizer runs. */
    const char *only = getenv("GB_TEST_MAPPED_ONLY");
    if (only && *only == '1')
        return failed ? 1 : 0;
    g_force_fallback = 1;
    g_cycles = 20; /* the 100-cycle run is the mapped group's */
    failed += cmocka_run_group_tests_name("runtime persistent, device + pinned staging", tests, NULL, NULL);
    setenv("GPUBRIDGE_FORCE_MALLOC_STAGING", "1", 1);
    failed += cmocka_run_group_tests_name("runtime persistent, device + malloc staging", tests, NULL, NULL);
    return failed ? 1 : 0;
}
