/* Compiled twice: into gb_core without GB_TEST_HOOKS (the hooks do nothing),
 * and into the gb_test_hooks object library with it; a program that links
 * the object library gets its definitions before the archive is searched. */
#include "test_hooks.h"

#include <stddef.h>

#ifdef GB_TEST_HOOKS
#include <stdlib.h>

static const char *const g_hooks[] = {
    "GPUBRIDGE_TEST_FAULTS", "GPUBRIDGE_KERNEL_FLAGS", "GPUBRIDGE_FORCE_MALLOC_STAGING",
    "GPUBRIDGE_FORCE_FALLBACK"};

const char *gb_test_hook(gb_hook hook)
{
    return (unsigned)hook < sizeof g_hooks / sizeof g_hooks[0] ? getenv(g_hooks[hook]) : NULL;
}

int gb_test_hooks_built(void) { return 1; }

const char *gb_test_hooks_usage(void)
{
    return "\n"
           "Test build: these test hooks are obeyed (the shipped gpubridge has none):\n"
           "  GPUBRIDGE_TEST_FAULTS=1           message type 0xFF7F faults the GPU kernel\n"
           "  GPUBRIDGE_KERNEL_FLAGS=N          ring kernel switches (bench_ring variants)\n"
           "  GPUBRIDGE_FORCE_MALLOC_STAGING=1  staging ring in malloc'd host memory\n"
           "  GPUBRIDGE_FORCE_FALLBACK=1        act as if mapped pinned memory failed\n";
}
#else
const char *gb_test_hook(gb_hook hook)
{
    (void)hook;
    return NULL;
}

int gb_test_hooks_built(void) { return 0; }

const char *gb_test_hooks_usage(void) { return NULL; }
#endif
