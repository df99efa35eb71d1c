/* Device-side loads and stores on memory another agent writes (the host
 * over PCIe, or other blocks): shared by the ring and team kernels. */
#ifndef GB_KERNELS_LDST_CUH
#define GB_KERNELS_LDST_CUH

#include <cuda_runtime.h>

#include "ring.h"
#include "ring_kernel.h"

template <typename T> static __device__ __forceinline__ T ld_volatile(const volatile T *p) { return *p; }

template <typename T> static __device__ __forceinline__ void st_volatile(volatile T *p, T v) { *p = v; }

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

/* The kernel's counters on the control line (consumed = next request position). */
static __device__ __forceinline__ void put_counters(gb_control_t *ctl, const gb_kstate_t &ks, uint64_t consumed)
{
    st_volatile(&ctl->processed, ks.processed);
    st_volatile(&ctl->errors, ks.errors);
    st_volatile(&ctl->iterations, ks.iterations);
    st_volatile(&ctl->consumed, consumed);
}

#endif
