/* bench_ring's benchmark build of vecadd (ring_profiled.cu): the same
 * handler as the shipped type, its kernels built with GB_KERNEL_PROFILE, so
 * that they count the kernel profile (gb_kstate_t prof_*) and honour the
 * kernel switches (GBK_F_*, GPUBRIDGE_KERNEL_FLAGS). The shipped kernels do
 * neither. */
#ifndef GB_BENCH_RING_PROFILED_H
#define GB_BENCH_RING_PROFILED_H

#define GB_BENCH_PROFILED_TYPE "bench.vecadd.profiled"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers the type (once); 0, or -1 with the reason on stderr. */
int bench_profiled_register(void);

#ifdef __cplusplus
}
#endif
#endif
