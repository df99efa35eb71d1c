/* The PageRank grains on the team kernel: persistent (mapped), relaunch
 * (mapped, budget 16 so that a round spans several launches), and relaunch
 * with the fallback placement (device memory + pinned staging). */
#include "gpu_skip.h"
#include "pagerank_cases.h"

int main(void)
{
    gb_require_gpu();
    const struct CMUnitTest tests[] = {GB_PAGERANK_CASES};
    g_mode = GB_MODE_PERSISTENT;
    int failed = cmocka_run_group_tests_name("pagerank grains, persistent", tests, NULL, NULL);
    g_mode = GB_MODE_RELAUNCH;
    failed += cmocka_run_group_tests_name("pagerank grains, relaunch", tests, NULL, NULL);
    g_force_fallback = 1;
    failed += cmocka_run_group_tests_name("pagerank grains, relaunch, device + pinned staging", tests, NULL, NULL);
    g_mode = GB_MODE_PERSISTENT;
    failed += cmocka_run_group_tests_name("pagerank grains, persistent, device + pinned staging", tests, NULL, NULL);
    return failed ? 1 : 0;
}
