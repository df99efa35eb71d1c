/* Device-side loads and stores on memory another agent writes (the host
 * over PCIe, or other blocks): shared by the ring and team kernels. */
#ifndef GB_KERNELS_LDST_CUH
#define GB_KERNELS_LDST_CUH

#include <cuda_runtime.h>

/* 16 bytes, never from a cache that could hold a stale copy. */
static __device__ __forceinline__ uint4 ld_volatile_v4(const void *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

#endif
