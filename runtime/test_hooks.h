/* Test hooks: environment switches that only test builds obey.
 *
 * The shipped daemon and library are compiled without GB_TEST_HOOKS, so
 * gb_test_hook() returns NULL there and the hook names are not even in the
 * binary. Test programs, the benchmarks and gpubridge-test link the
 * gb_test_hooks object library instead, whose gb_test_hook() reads the
 * environment. The hooks:
 *   GPUBRIDGE_TEST_FAULTS=1           message type 0xFF7F faults the kernel
 *   GPUBRIDGE_KERNEL_FLAGS=N          ring kernel switches (GBK_F_*, bench_ring)
 *   GPUBRIDGE_FORCE_MALLOC_STAGING=1  staging ring in malloc'd, not pinned, memory
 *   GPUBRIDGE_FORCE_FALLBACK=1        act as if mapped pinned memory failed
 *   GPUBRIDGE_TEST_SPIN=1             message type 0xFF7E spins the server loop
 *   GPUBRIDGE_TEST_HEARTBEAT_MS=N     the supervisor's heartbeat timeout
 *   GPUBRIDGE_TEST_SUP_DROP_BYTES=N   the supervisor fails to pass on frames of N bytes
 *   GPUBRIDGE_TEST_SUP_NOMEM=N        the supervisor's Nth start-up allocation fails
 *   GPUBRIDGE_TEST_SUP_PEERS=N        the supervisor serves N clients at once, not 1,024 */
#ifndef GB_TEST_HOOKS_H
#define GB_TEST_HOOKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Hooks by number, so that their names are not in a binary without them. */
typedef enum gb_hook {
    GB_HOOK_TEST_FAULTS = 0,
    GB_HOOK_KERNEL_FLAGS,
    GB_HOOK_FORCE_MALLOC_STAGING,
    GB_HOOK_FORCE_FALLBACK,
    GB_HOOK_TEST_SPIN,
    GB_HOOK_HEARTBEAT_MS,
    GB_HOOK_SUP_DROP_BYTES,
    GB_HOOK_SUP_NOMEM,
    GB_HOOK_SUP_PEERS,
} gb_hook;

/* The hook's environment value in a test build; NULL when unset or in the
 * shipped build. */
const char *gb_test_hook(gb_hook hook);
/* 1 in a test build (gpubridge-test, tests), 0 in the shipped one. */
int gb_test_hooks_built(void);
/* --help's text about the hooks in a test build; NULL in the shipped one. */
const char *gb_test_hooks_usage(void);

#ifdef __cplusplus
}
#endif
#endif
