/* Device-side loads and stores on memory another agent writes (the host
 * over PCIe, or other blocks): shared by the ring and team kernels. */
#ifndef GB_KERNELS_LDST_CUH
#define GB_KERNELS_LDST_CUH

#include <cuda_runtime.h>

#include "gpubridge/ring.h"
#include "gpubridge/device/ring_kernel.h"

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

/* A 32-bit store at system scope with release semantics: whoever sees the
 * value sees every earlier write of this thread. It compiles to MEMBAR.ALL.SYS
 * and the store; __threadfence_system (fence.sc.sys) adds an invalidation of
 * the SM's L1 (CCTL.IVALL), which the next grain-table lookup then pays. */
static __device__ __forceinline__ void st_release_sys(volatile uint32_t *p, uint32_t v)
{
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(__cvta_generic_to_global((const void *)p)), "r"(v)
                 : "memory");
}

/* Replies of up to this many 16-byte chunks are written by one lane, which
 * then releases them with their stamp (st_release_sys): no fence in every
 * writing lane, and no reliance on a barrier to order other lanes' writes. */
#define GBK_ONE_WRITER_CHUNKS 4u

/* The kernel's counters on the control line (consumed = next request position). */
static __device__ __forceinline__ void put_counters(gb_control_t *ctl, const gb_kstate_t &ks, uint64_t consumed)
{
    st_volatile(&ctl->processed, ks.processed);
    st_volatile(&ctl->errors, ks.errors);
    st_volatile(&ctl->iterations, ks.iterations);
    st_volatile(&ctl->consumed, consumed);
}

#endif
