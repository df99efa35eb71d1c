/* The PageRank grains on the cpu backend: inline (cpu_threads 0) and with
 * worker threads. */
#include "pagerank_cases.h"

int main(void)
{
    const struct CMUnitTest tests[] = {GB_PAGERANK_CASES};
    g_mode = GB_MODE_CPU;
    g_lanes = 0;
    int failed = cmocka_run_group_tests_name("pagerank grains, cpu inline", tests, NULL, NULL);
    g_lanes = 3;
    failed += cmocka_run_group_tests_name("pagerank grains, cpu 3 workers", tests, NULL, NULL);
    return failed ? 1 : 0;
}
