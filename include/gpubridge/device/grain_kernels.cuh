/* A grain type's GPU entry points (gb_grain_gpu_t), made from its traits G:
 *   struct G {
 *       static constexpr bool team = ...;
 *       static __host__ __device__ __forceinline__ uint16_t on_message(...);
 *   };
 * GB_DEFINE_GRAIN (gpubridge/grain.h) writes G and calls GBK_GRAIN_GPU in the
 * grain's own translation unit, so each grain type's kernels are compiled
 * with its handler inlined: ring kernel and inline kernel for one-thread
 * grains, the team kernel for team grains. */
#ifndef GB_GRAIN_KERNELS_CUH
#define GB_GRAIN_KERNELS_CUH

#include "gpubridge/device/inline_kernel.cuh"
#include "gpubridge/device/ring_kernel.cuh"
#include "gpubridge/device/team_kernel.cuh"

template <typename G> static cudaError_t gbk_grain_preload(void)
{
    cudaFuncAttributes fa;
    if constexpr (G::team) {
        return cudaFuncGetAttributes(&fa, gbk_team_kernel<G>);
    } else {
        cudaError_t e = cudaFuncGetAttributes(&fa, gbk_ring_kernel<G, false>);
        if (e == cudaSuccess)
            e = cudaFuncGetAttributes(&fa, gbk_ring_kernel<G, true>);
        if (e == cudaSuccess)
            e = cudaFuncGetAttributes(&fa, gbk_inline_kernel<G, gbk_inline_t>);
        return e == cudaSuccess ? cudaFuncGetAttributes(&fa, gbk_inline_kernel<G, gbk_inline_small_t>) : e;
    }
}

template <typename G> static uint32_t gbk_grain_max_window(int device, uint32_t slot_size)
{
    if constexpr (G::team)
        return gbk_max_window(device, slot_size, 1, (const void *)gbk_team_kernel<G>);
    else
        return gbk_max_window(device, slot_size, 0, (const void *)gbk_ring_kernel<G, true>); /* same shared memory */
}

template <typename G> static uint32_t gbk_grain_team_workers(int device, uint32_t slot_size, uint32_t ring_kernels)
{
    if constexpr (G::team)
        return gbk_team_workers<G>(device, slot_size, ring_kernels);
    (void)device, (void)slot_size, (void)ring_kernels;
    return 0;
}

template <typename G> static cudaError_t gbk_grain_launch(const gb_kargs_t *args, cudaStream_t stream)
{
    if constexpr (G::team)
        return gbk_team_launch<G>(args, stream);
    else
        return gbk_ring_launch<G>(args, stream);
}

template <typename G>
static cudaError_t gbk_grain_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                      size_t ndeps, const gb_kargs_t *args)
{
    if constexpr (G::team)
        return gbk_team_add_node<G>(node, graph, deps, ndeps, args);
    else
        return gbk_ring_add_node<G>(node, graph, deps, ndeps, args);
}

/* The inline entries, NULL for team grains (whose handlers the inline kernel
 * never runs, so it is not instantiated for them). */
typedef cudaError_t (*gbk_inline_launch_fn)(const gbk_inline_t *, cudaStream_t);
typedef cudaError_t (*gbk_inline_add_fn)(cudaGraphNode_t *, cudaGraph_t, const gbk_inline_t *);
typedef cudaError_t (*gbk_inline_set_fn)(cudaGraphExec_t, cudaGraphNode_t, const gbk_inline_t *);
template <typename G> constexpr gbk_inline_launch_fn gbk_inline_launch_of()
{
    if constexpr (G::team)
        return NULL;
    else
        return gbk_inline_launch<G>;
}
template <typename G> constexpr gbk_inline_add_fn gbk_inline_add_of()
{
    if constexpr (G::team)
        return NULL;
    else
        return gbk_inline_add_node<G>;
}
template <typename G> constexpr gbk_inline_set_fn gbk_inline_set_of()
{
    if constexpr (G::team)
        return NULL;
    else
        return gbk_inline_set_node<G>;
}

/* Defines `static const gb_grain_gpu_t var` for traits G. */
#define GBK_GRAIN_GPU(G, var)                                                                                        \
    static const gb_grain_gpu_t var = {                                                                              \
        GB_GRAIN_ABI,                                                                                                \
        G::team ? 1u : 0u,                                                                                           \
        gbk_grain_preload<G>,                                                                                        \
        gbk_grain_max_window<G>,                                                                                     \
        gbk_grain_team_workers<G>,                                                                                   \
        gbk_grain_launch<G>,                                                                                         \
        gbk_grain_add_node<G>,                                                                                       \
        gbk_inline_launch_of<G>(),                                                                                   \
        gbk_inline_add_of<G>(),                                                                                      \
        gbk_inline_set_of<G>(),                                                                                      \
    }

#endif
