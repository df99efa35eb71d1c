/* The inline kernel (see inline_kernel.h): one warp handles the requests its
 * launch carries in its parameters, and writes their replies. A template on
 * the grain type's traits, as the ring kernel. */
#ifndef GB_INLINE_KERNEL_CUH
#define GB_INLINE_KERNEL_CUH

#include <cuda_runtime.h>

#include "dispatch.h"
#include "inline_kernel.h"
#include "ldst.cuh"


/* One warp handles the requests in `in` and writes their replies. */
template <typename G>
static __device__ __forceinline__ void inline_run(const gb_kargs_t &a, unsigned char *outbox, const gbk_inbox_t *in)
{
    __shared__ uint4 s_in4[GBK_INLINE_BYTES / 16], s_out4[GBK_INLINE_BYTES / 16];
    unsigned char *s_in = (unsigned char *)s_in4, *s_out = (unsigned char *)s_out4;
    const uint32_t lane = threadIdx.x;
    const gb_ring_geom_t g = a.geom;
    const uint32_t S = g.slot_size, C16 = S / 16, mask = g.cap - 1;
    const uint32_t C16_LOG = (uint32_t)(__ffs((int)C16) - 1); /* slot sizes are powers of two */

    /* Progress is read now and used at the end: the load overlaps dispatch. */
    uint64_t processed = 0, errors = 0, iterations = 0, ns0 = 0;
    const long long clk0 = clock64();
    if (lane == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
        processed = a.kstate->processed;
        errors = a.kstate->errors;
        iterations = a.kstate->iterations;
    }
    const uint64_t from = in->from;
    const uint32_t n = min(in->n, GBK_INLINE_BYTES / S), test_flags = in->test_flags;
    gb_grain_table_t tab = a.tab;
    tab.concurrent = n > 1 ? (a.flags & GBK_F_NO_VERIFY ? 2 : 1) : 0; /* keys of one partition may activate at once */
    const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL};
    int bad = 0;
    long long clk1;
    if (n == 1) {
        /* One request, a round trip: dispatched straight out of the
         * parameter bank: copying it into shared memory first would take
         * about a quarter of the kernel's time. */
        clk1 = clock64();
        if (lane == 0) {
            const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)in->slots;
            gb_slot_hdr_t oh;
            bad = gbi_dispatch_one<G>(&ctx, &tab, gb_grain_lane(h->key, tab.lanes), h,
                                   in->slots + GB_SLOT_HDR_SIZE, &oh, s_out + GB_SLOT_HDR_SIZE,
                                   S - GB_SLOT_HDR_SIZE, test_flags);
            oh.seq = outbox ? gb_stamp(from) : gb_stamp(from - g.cap);
            *(gb_slot_hdr_t *)s_out = oh;
        }
        __syncwarp();
    } else {
        const uint4 *src = (const uint4 *)in->slots;
        for (uint32_t c = lane; c < n * C16; c += GBK_INLINE_THREADS)
            s_in4[c] = src[c];
        __syncwarp();
        clk1 = clock64();

        /* Dispatch in rounds: a request runs once no earlier request of its grain
         * is left (turn order), requests of different grains run together. A
         * round's grain-state writes are visible to the next round after
         * __syncwarp. */
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
                bad = gbi_dispatch_one<G>(&ctx, &tab, gb_grain_lane(key, tab.lanes), h,
                                       s_in + lane * S + GB_SLOT_HDR_SIZE, &oh, s_out + lane * S + GB_SLOT_HDR_SIZE,
                                       S - GB_SLOT_HDR_SIZE, test_flags);
                /* Mapped: "not yet" until the stamp store below. Staging: the
                 * host sees the outbox only after the launch. */
                oh.seq = outbox ? gb_stamp(from + lane) : gb_stamp(from + lane - g.cap);
                *(gb_slot_hdr_t *)(s_out + lane * S) = oh;
                pending = false;
            }
            __syncwarp();
        }
    }
    const long long clk2 = clock64();
    const uint32_t nbad = __popc(__ballot_sync(0xffffffffu, bad != 0));
    gb_kstate_t ks; /* lane 0's counters after this launch */
    ks.processed = processed + n;
    ks.errors = errors + nbad;
    ks.iterations = iterations + 1;

    if (!outbox) {
        /* Mapped: replies, counters, fence, stamps (as the ring kernel). */
        unsigned char *out = a.region + gb_region_out_off(g);
        gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
        if (n == 1 && C16 <= GBK_ONE_WRITER_CHUNKS && !(a.flags & GBK_F_FENCE_ALL)) {
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
                st_volatile(&((gb_slot_hdr_t *)(out + (size_t)((from + lane) & mask) * S))->seq,
                            gb_stamp(from + lane));
        }
        if (lane == 0) {
            st_volatile(&ctl->exit_reason, (int32_t)GB_EXIT_INPUT_EMPTY);
            if (!(test_flags & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&ctl->heartbeat, ks.iterations);
        }
    } else {
        /* Staging: the outbox (host memory, or device memory that the
         * launch's copy node brings back); the host reads it after the launch. */
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
    if (lane == 0) {
        uint64_t ns1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
        a.kstate->processed = ks.processed;
        a.kstate->errors = ks.errors;
        a.kstate->iterations = ks.iterations;
        a.kstate->tail = from + n;
        const long long clk3 = clock64();
        /* The profile (bench_ring), after the replies: the kernel's time from
         * its start, the requests' copy in (read), dispatch, and write. */
        a.kstate->prof_clk += (uint64_t)(clk3 - clk0);
        a.kstate->prof_ns += ns1 - ns0;
        a.kstate->prof_read += (uint64_t)(clk1 - clk0);
        a.kstate->prof_dispatch += (uint64_t)(clk2 - clk1);
        a.kstate->prof_write += (uint64_t)(clk3 - clk2);
        a.kstate->prof_windows++;
        a.kstate->prof_msgs += n;
    }
}

/* __grid_constant__: the requests are read from the parameter bank where the
 * launch put them, with no copy to local memory. */
template <typename G>
__global__ void __launch_bounds__(GBK_INLINE_THREADS) gbk_inline_kernel(const __grid_constant__ gbk_inline_t m)
{
    inline_run<G>(m.a, m.outbox, &m.in);
}

template <typename G> static cudaError_t gbk_inline_launch(const gbk_inline_t *m, cudaStream_t stream)
{
    gbk_inline_kernel<G><<<1, GBK_INLINE_THREADS, 0, stream>>>(*m);
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

template <typename G>
static cudaError_t gbk_inline_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const gbk_inline_t *m)
{
    void *kp[1] = {(void *)m};
    cudaKernelNodeParams p = gbk_inline_node_params((const void *)gbk_inline_kernel<G>, kp);
    return cudaGraphAddKernelNode(node, graph, NULL, 0, &p);
}

template <typename G>
static cudaError_t gbk_inline_set_node(cudaGraphExec_t exec, cudaGraphNode_t node, const gbk_inline_t *m)
{
    void *kp[1] = {(void *)m};
    cudaKernelNodeParams p = gbk_inline_node_params((const void *)gbk_inline_kernel<G>, kp);
    return cudaGraphExecKernelNodeSetParams(exec, node, &p);
}

#endif
