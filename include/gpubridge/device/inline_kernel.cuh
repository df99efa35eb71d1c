/* The inline kernel (see inline_kernel.h): one warp handles the requests its
 * launch carries in its parameters, and writes their replies. A template on
 * the grain type's traits, as the ring kernel. */
#ifndef GB_INLINE_KERNEL_CUH
#define GB_INLINE_KERNEL_CUH

#include <cuda_runtime.h>

#include "gpubridge/detail/dispatch.h"
#include "gpubridge/device/inline_kernel.h"
#include "gpubridge/device/ldst.cuh"
#include "gpubridge/device/profile.cuh"

/* A lone request, a round trip: dispatched straight out of the parameter
 * bank by lane 0 (copying it into shared memory first would take about a
 * quarter of the kernel's time). Returns the lane's error (0 or 1). */
template <typename G>
static __device__ __forceinline__ int inline_one(const gbk_inline_args_t &a, gb_grain_table_t &tab,
                                                 const unsigned char *outbox, const unsigned char *slots,
                                                 uint64_t from, uint32_t test_flags, unsigned char *s_out)
{
    const uint32_t S = a.geom.slot_size;
    int bad = 0;
    if (threadIdx.x == 0) {
        const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)slots;
        const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
        gb_slot_hdr_t oh;
        bad = gbi_dispatch_one<G>(&ctx, &tab, gb_grain_lane(h->key, tab.lanes), h, slots + GB_SLOT_HDR_SIZE, &oh,
                                  s_out + GB_SLOT_HDR_SIZE, S - GB_SLOT_HDR_SIZE, test_flags);
        oh.seq = outbox ? gb_stamp(from) : gb_stamp(from - a.geom.cap);
        *(gb_slot_hdr_t *)s_out = oh;
    }
    __syncwarp();
    return bad;
}

/* Several requests, from shared memory, in rounds: a request runs once no
 * earlier request of its grain is left (turn order), requests of different
 * grains run together. A round's grain-state writes are visible to the next
 * round after __syncwarp. Returns the lane's error (0 or 1). */
template <typename G>
static __device__ __forceinline__ int inline_rounds(const gbk_inline_args_t &a, gb_grain_table_t &tab,
                                                    const unsigned char *outbox, uint64_t from, uint32_t n,
                                                    uint32_t test_flags, const unsigned char *s_in,
                                                    unsigned char *s_out)
{
    const uint32_t lane = threadIdx.x, S = a.geom.slot_size;
    const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
    int bad = 0;
    bool pending = lane < n;
    const uint64_t key = pending ? ((const gb_slot_hdr_t *)(s_in + lane * S))->key : 0;
    for (uint32_t left = __ballot_sync(0xffffffffu, pending); left; left = __ballot_sync(0xffffffffu, pending)) {
        bool run = pending;
        for (uint32_t j = 0; j < lane && run; j++)
            if ((left >> j & 1u) && ((const gb_slot_hdr_t *)(s_in + j * S))->key == key)
                run = false;
        if (run) {
            const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(s_in + lane * S);
            gb_slot_hdr_t oh;
            bad = gbi_dispatch_one<G>(&ctx, &tab, gb_grain_lane(key, tab.lanes), h, s_in + lane * S + GB_SLOT_HDR_SIZE,
                                      &oh, s_out + lane * S + GB_SLOT_HDR_SIZE, S - GB_SLOT_HDR_SIZE, test_flags);
            /* Mapped: "not yet" until the stamp store below. Staging: the
             * host sees the outbox only after the launch. */
            oh.seq = outbox ? gb_stamp(from + lane) : gb_stamp(from + lane - a.geom.cap);
            *(gb_slot_hdr_t *)(s_out + lane * S) = oh;
            pending = false;
        }
        __syncwarp();
    }
    return bad;
}

/* Mapped: replies into the output ring, counters, fence, stamps (as the ring
 * kernel). ks: lane 0's counters after this launch. */
template <typename G>
static __device__ __forceinline__ void inline_write_mapped(const gbk_inline_args_t &a, const gb_kstate_t &ks, uint64_t from,
                                                           uint32_t n, uint32_t test_flags, const uint4 *s_out4)
{
    const uint32_t lane = threadIdx.x;
    const gb_ring_geom_t g = a.geom;
    const uint32_t S = g.slot_size, C16 = S / 16, mask = g.cap - 1;
    const uint32_t C16_LOG = (uint32_t)(__ffs((int)C16) - 1); /* slot sizes are powers of two */
    unsigned char *out = a.region + gb_region_out_off(g);
    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    if (n == 1 && C16 <= GBK_ONE_WRITER_CHUNKS && !gbk_flag<G>(a, GBK_F_FENCE_ALL)) {
        /* A lone small reply: lane 0 writes it and the counters and
         * releases them with its stamp (as the ring kernel's lone path). */
        if (lane == 0) {
            unsigned char *oslot = out + (size_t)(from & mask) * S;
            for (uint32_t c = 0; c < C16; c++)
                *(uint4 *)(oslot + c * 16) = s_out4[c];
            put_counters(ctl, ks, from + 1);
            st_release_sys(&((gb_slot_hdr_t *)oslot)->seq, gb_stamp(from));
        }
    } else {
        for (uint32_t c = lane; c < n * C16; c += GBK_INLINE_THREADS) {
            const uint32_t i = c >> C16_LOG, off = (c & (C16 - 1)) * 16;
            *(uint4 *)(out + (size_t)((from + i) & mask) * S + off) = s_out4[c];
        }
        if (lane == 0)
            put_counters(ctl, ks, from + n);
        __threadfence_system();
        __syncwarp();
        if (lane < n)
            st_volatile(&((gb_slot_hdr_t *)(out + (size_t)((from + lane) & mask) * S))->seq, gb_stamp(from + lane));
    }
    if (lane == 0) {
        st_volatile(&ctl->exit_reason, (int32_t)GB_EXIT_INPUT_EMPTY);
        if (!(test_flags & GB_TEST_SKIP_HEARTBEAT))
            st_volatile(&ctl->heartbeat, ks.iterations);
    }
}

/* Staging: replies and counters into the outbox (host memory, or device
 * memory that the launch's copy node brings back); the host reads it after
 * the launch. */
static __device__ __forceinline__ void inline_write_outbox(unsigned char *outbox, const gb_kstate_t &ks, uint64_t from,
                                                           uint32_t n, uint32_t C16, const uint4 *s_out4)
{
    const uint32_t lane = threadIdx.x;
    uint4 *o = (uint4 *)(outbox + sizeof(gbk_inline_out_t));
    for (uint32_t c = lane; c < n * C16; c += GBK_INLINE_THREADS)
        o[c] = s_out4[c];
    if (lane == 0) {
        gbk_inline_out_t *h = (gbk_inline_out_t *)outbox;
        h->processed = ks.processed;
        h->errors = ks.errors;
        h->iterations = ks.iterations;
        h->consumed = from + n;
        h->exit_reason = GB_EXIT_INPUT_EMPTY;
    }
}

/* Lane 0, last: progress into device memory, then (benchmark builds) the
 * profile: the kernel's time from its start, the requests' copy in (read),
 * dispatch, and write. */
template <typename G>
static __device__ __forceinline__ void inline_finish(const gbk_inline_args_t &a, const gb_kstate_t &ks, uint64_t from,
                                                     uint32_t n, long long clk0, long long clk1, long long clk2,
                                                     uint64_t ns0)
{
    const uint64_t ns1 = gbk_globaltimer<G>();
    a.kstate->processed = ks.processed;
    a.kstate->errors = ks.errors;
    a.kstate->iterations = ks.iterations;
    a.kstate->tail = from + n;
    gbk_prof_inline<G>(a.kstate, n, clk0, clk1, clk2, ns0, ns1);
}

/* One warp handles the requests of head h, in slots (cap bytes), and writes
 * their replies. */
template <typename G>
static __device__ __forceinline__ void inline_run(const gbk_inline_head_t &h, const unsigned char *slots, uint32_t cap)
{
    const gbk_inline_args_t &a = h.a;
    unsigned char *outbox = h.outbox;
    __shared__ uint4 s_in4[GBK_INLINE_BYTES / 16], s_out4[GBK_INLINE_BYTES / 16];
    const uint32_t lane = threadIdx.x;
    const uint32_t S = a.geom.slot_size, C16 = S / 16;

    /* Progress is read now and used at the end: the load overlaps dispatch. */
    uint64_t processed = 0, errors = 0, iterations = 0, ns0 = 0;
    const long long clk0 = gbk_clock<G>();
    if (lane == 0) {
        ns0 = gbk_globaltimer<G>();
        processed = a.kstate->processed;
        errors = a.kstate->errors;
        iterations = a.kstate->iterations;
    }
    const uint64_t from = h.from;
    const uint32_t n = min(h.n, cap / S), test_flags = h.test_flags;
    gb_grain_table_t tab = a.tab;
    /* Keys of one partition may activate at once. */
    tab.concurrent = n > 1 ? (gbk_flag<G>(a, GBK_F_NO_VERIFY) ? 2 : 1) : 0;
    int bad;
    long long clk1;
    if (n == 1) {
        clk1 = gbk_clock<G>();
        bad = inline_one<G>(a, tab, outbox, slots, from, test_flags, (unsigned char *)s_out4);
    } else {
        const uint4 *src = (const uint4 *)slots;
        for (uint32_t c = lane; c < n * C16; c += GBK_INLINE_THREADS)
            s_in4[c] = src[c];
        __syncwarp();
        clk1 = gbk_clock<G>();
        bad = inline_rounds<G>(a, tab, outbox, from, n, test_flags, (const unsigned char *)s_in4,
                               (unsigned char *)s_out4);
    }
    const long long clk2 = gbk_clock<G>();
    const uint32_t nbad = __popc(__ballot_sync(0xffffffffu, bad != 0));
    gb_kstate_t ks; /* lane 0's counters after this launch */
    ks.processed = processed + n;
    ks.errors = errors + nbad;
    ks.iterations = iterations + 1;

    if (!outbox)
        inline_write_mapped<G>(a, ks, from, n, test_flags, s_out4);
    else
        inline_write_outbox(outbox, ks, from, n, C16, s_out4);
    if (lane == 0)
        inline_finish<G>(a, ks, from, n, clk0, clk1, clk2, ns0);
}

/* __grid_constant__: the requests are read from the parameter bank where the
 * launch put them, with no copy to local memory. P: gbk_inline_t, or
 * gbk_inline_small_t (the same bytes, fewer of them). */
template <typename G, typename P>
__global__ void __launch_bounds__(GBK_INLINE_THREADS) gbk_inline_kernel(const __grid_constant__ P m)
{
    inline_run<G>(m.h, m.slots, (uint32_t)sizeof m.slots);
}

/* The kernel for a launch of m: the small one when its requests fit. */
template <typename G> static const void *gbk_inline_func(const gbk_inline_t *m, uint32_t slot_size)
{
    if ((uint64_t)m->h.n * slot_size <= GBK_INLINE_SMALL)
        return (const void *)gbk_inline_kernel<G, gbk_inline_small_t>;
    return (const void *)gbk_inline_kernel<G, gbk_inline_t>;
}

template <typename G> static cudaError_t gbk_inline_launch(const gbk_inline_t *m, cudaStream_t stream)
{
    if ((uint64_t)m->h.n * m->h.a.geom.slot_size <= GBK_INLINE_SMALL) {
        gbk_inline_small_t s;
        memcpy(&s, m, sizeof s); /* its prefix */
        gbk_inline_kernel<G, gbk_inline_small_t><<<1, GBK_INLINE_THREADS, 0, stream>>>(s);
    } else {
        gbk_inline_kernel<G, gbk_inline_t><<<1, GBK_INLINE_THREADS, 0, stream>>>(*m);
    }
    return cudaGetLastError();
}

static inline cudaKernelNodeParams gbk_inline_node_params(const void *func, void **kp)
{
    cudaKernelNodeParams p = {};
    p.func = (void *)func;
    p.gridDim = dim3(1, 1, 1);
    p.blockDim = dim3(GBK_INLINE_THREADS, 1, 1);
    p.sharedMemBytes = 0;
    p.kernelParams = kp;
    return p;
}

/* A graph node of the kernel that launches like m (small: m->h.n requests
 * fit GBK_INLINE_SMALL); the kernel reads its parameters' size from m. */
template <typename G>
static cudaError_t gbk_inline_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const gbk_inline_t *m)
{
    void *kp[1] = {(void *)m};
    cudaKernelNodeParams p = gbk_inline_node_params(gbk_inline_func<G>(m, m->h.a.geom.slot_size), kp);
    return cudaGraphAddKernelNode(node, graph, NULL, 0, &p);
}

/* m into node, whose kernel is the one gbk_inline_add_node chose for a
 * launch of as many requests. */
template <typename G>
static cudaError_t gbk_inline_set_node(cudaGraphExec_t exec, cudaGraphNode_t node, const gbk_inline_t *m)
{
    void *kp[1] = {(void *)m};
    cudaKernelNodeParams p = gbk_inline_node_params(gbk_inline_func<G>(m, m->h.a.geom.slot_size), kp);
    return cudaGraphExecKernelNodeSetParams(exec, node, &p);
}

#endif
