/* Compiled twice: into gb_core without GB_TEST_HOOKS (the hooks do nothing),
 * and into the gb_test_hooks object library with it; a program that links
 * the object library gets its definitions before the archive is searched. */
#include "test_hooks.h"

#include <stddef.h>

#ifdef GB_TEST_HOOKS
#include <stdlib.h>

static const char *const g_hooks[] = {
    "GPUBRIDGE_TEST_FAULTS", "GPUBRIDGE_KERNEL_FLAGS", "GPUBRIDGE_FORCE_MALLOC_STAGING",
    "GPUBRIDGE_FORCE_FALLBACK", "GPUBRIDGE_TEST_SPIN", "GPUBRIDGE_TEST_HEARTBEAT_MS",
    "GPUBRIDGE_TEST_SUP_DROP_BYTES", "GPUBRIDGE_TEST_SUP_NOMEM", "GPUBRIDGE_TEST_SUP_PEERS"};

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
           "  GPUBRIDGE_FORCE_FALLBACK=1        act as if mapped pinned memory failed\n"
           "  GPUBRIDGE_TEST_SPIN=1             message type 0xFF7E makes the server loop spin\n"
           "                                    (60 s) without reading: a hung worker\n"
           "  GPUBRIDGE_TEST_HEARTBEAT_MS=N     --supervise: kill a worker silent for N ms\n"
           "                                    (3N while it runs) instead of 10 s (30 s)\n"
           "  GPUBRIDGE_TEST_SUP_DROP_BYTES=N   --supervise: a frame of N bytes fails to pass to\n"
           "                                    the worker (as if its connection closed)\n"
           "  GPUBRIDGE_TEST_SUP_NOMEM=N        --supervise: the supervisor's Nth allocation at\n"
           "                                    start (1-5) fails\n"
           "  GPUBRIDGE_TEST_SUP_PEERS=N        --supervise: N clients at once (1-1024) instead\n"
           "                                    of 1,024 (control frames: 16 more)\n";
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
