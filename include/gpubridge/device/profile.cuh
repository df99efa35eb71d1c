/* Benchmark builds of a grain type's kernels: the profile counters of
 * gb_kstate_t (prof_*) and the kernel switches of gb_kargs_t.flags (GBK_F_*
 * read on the device). A type's traits turn them on with `profile = true`,
 * which GB_DEFINE_GRAIN sets from GB_KERNEL_PROFILE (gpubridge/grain.h):
 * bench_ring's own grain type has them, the shipped kernels (built-in types,
 * the daemon's, users' libraries) do not: there the clock reads, counter
 * updates and switch tests below compile to nothing. */
#ifndef GB_KERNELS_PROFILE_CUH
#define GB_KERNELS_PROFILE_CUH

#include <cuda_runtime.h>

#include "gpubridge/device/ring_kernel.h"

/* Whether G's kernels are a benchmark build (G::profile; false without it). */
template <typename G, typename = void> struct gbk_profiled {
    static constexpr bool value = false;
};
template <typename G> struct gbk_profiled<G, decltype((void)G::profile)> {
    static constexpr bool value = G::profile;
};

/* The SM clock, in benchmark builds; 0 otherwise. */
template <typename G> static __device__ __forceinline__ long long gbk_clock(void)
{
    if constexpr (gbk_profiled<G>::value)
        return clock64();
    else
        return 0;
}

/* The global timer (ns), in benchmark builds; 0 otherwise. */
template <typename G> static __device__ __forceinline__ uint64_t gbk_globaltimer(void)
{
    uint64_t ns = 0;
    if constexpr (gbk_profiled<G>::value)
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

/* counter += v, in benchmark builds. */
template <typename G> static __device__ __forceinline__ void gbk_prof_add(uint64_t &counter, uint64_t v)
{
    if constexpr (gbk_profiled<G>::value)
        counter += v;
}

/* Kernel switch f (GBK_F_*) of a.flags (gb_kargs_t, gbk_inline_args_t):
 * only benchmark builds test it. */
template <typename G, typename A> static __device__ __forceinline__ bool gbk_flag(const A &a, uint32_t f)
{
    if constexpr (gbk_profiled<G>::value)
        return (a.flags & f) != 0;
    else
        return false;
}

/* Profile of one busy window of n requests: read, dispatch, write cycles. */
template <typename G>
static __device__ __forceinline__ void gbk_prof_window(gb_kstate_t &ks, long long read, long long dispatch,
                                                       long long write, uint32_t n, uint32_t rounds, long long bid)
{
    if constexpr (gbk_profiled<G>::value) {
        ks.prof_read += (uint64_t)read;
        ks.prof_dispatch += (uint64_t)dispatch;
        ks.prof_write += (uint64_t)write;
        ks.prof_windows++;
        ks.prof_msgs += n;
        if (n >= 64) {
            ks.prof_big_read += (uint64_t)read;
            ks.prof_big_dispatch += (uint64_t)dispatch;
            ks.prof_big_write += (uint64_t)write;
            ks.prof_big_windows++;
            ks.prof_big_msgs += n;
            ks.prof_big_rounds += rounds;
            ks.prof_big_bid += (uint64_t)bid;
        }
    }
}

/* The inline kernel's profile of a launch of n requests, in device memory:
 * clk0 its start, clk1 the requests copied in, clk2 dispatched, now written;
 * ns0 and ns1 the global timer at start and end. */
template <typename G>
static __device__ __forceinline__ void gbk_prof_inline(gb_kstate_t *ks, uint32_t n, long long clk0, long long clk1,
                                                       long long clk2, uint64_t ns0, uint64_t ns1)
{
    if constexpr (gbk_profiled<G>::value) {
        const long long clk3 = clock64();
        ks->prof_clk += (uint64_t)(clk3 - clk0);
        ks->prof_ns += ns1 - ns0;
        ks->prof_read += (uint64_t)(clk1 - clk0);
        ks->prof_dispatch += (uint64_t)(clk2 - clk1);
        ks->prof_write += (uint64_t)(clk3 - clk2);
        ks->prof_windows++;
        ks->prof_msgs += n;
    }
}

/* Stores a kernel's progress back into device memory: all of it in benchmark
 * builds; otherwise the fields a kernel without a profile changes, so that
 * the others (zero there) are not carried through the kernel. */
template <typename G> static __device__ __forceinline__ void gbk_kstate_save(gb_kstate_t *dst, const gb_kstate_t &ks)
{
    if constexpr (gbk_profiled<G>::value) {
        *dst = ks;
    } else {
        dst->tail = ks.tail;
        dst->processed = ks.processed;
        dst->errors = ks.errors;
        dst->iterations = ks.iterations;
        dst->active_seen = ks.active_seen;
    }
}

#endif
