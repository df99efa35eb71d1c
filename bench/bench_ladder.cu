/* The echo floor, one step at a time towards the ring kernel's lone-request
 * path (bench_floor.h: gbk_floor_ladder). Each step adds one thing the ring
 * kernel does and the floor does not, so that a round trip's distance from its
 * floor can be put down to its parts in one run. */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_floor.h"
#include "bench_grains.cuh"
#include "bench_request.h"
#include "clock.h"
#include "gpubridge/detail/dispatch.h"
#include "gpubridge/device/ldst.cuh"
#include "vecadd.h"

#define LADDER_KEYS 4096u

static double ladder_now_us(void) { return (double)gb_now_ns() / 1e3; }

/* A zeroed activation table in device memory with room for 4 x LADDER_KEYS
 * vecadd grains (32-byte entries). Returns 0, or -1 (nothing allocated). */
static int ladder_table_new(gb_grain_table_t *tab)
{
    memset(tab, 0, sizeof *tab);
    tab->lanes = 256;
    tab->per_lane = gb_grain_per_lane(4 * LADDER_KEYS, 256);
    tab->state_size = GB_VECADD_STATE_SIZE;
    tab->entry_size = gb_grain_entry_size(tab->state_size);
    const size_t bytes = (size_t)tab->lanes * tab->per_lane * tab->entry_size;
    if (cudaMalloc((void **)&tab->entries, bytes) != cudaSuccess)
        return -1;
    if (cudaMemset(tab->entries, 0, bytes) != cudaSuccess) {
        cudaFree(tab->entries);
        tab->entries = NULL;
        return -1;
    }
    return 0;
}

/* Slot layout: gb_slot_hdr_t and a vecadd record of n = 3 (64 bytes); the
 * stamp is the header's seq (word 7), as in our rings. */
__global__ void ladder_kernel(unsigned char *req, unsigned char *rep, const uint64_t *idx, const uint32_t *ctl,
                              uint64_t *cnt, gb_grain_table_t tab, unsigned feat, int total)
{
    __shared__ __align__(16) unsigned char s_in[64];
    __shared__ __align__(16) unsigned char s_out[64];
    const uint32_t lane = threadIdx.x;
    uint64_t beat = 0, processed = 0;
    for (int i = 1; i <= total; i++) {
        uint4 v = make_uint4(0, 0, 0, 0);
        uint32_t c = 0;
        uint64_t head = 0;
        for (;;) {
            uint32_t stamp;
            if (feat & GBK_LADDER_V4) {
                if (lane < 4)
                    v = ld_volatile_v4(req + lane * 16);
            } else if (lane < 16) {
                v.x = ld_volatile((const volatile uint32_t *)req + lane);
            }
            if ((feat & GBK_LADDER_POLL3) && lane == 30)
                head = ld_volatile((const volatile uint64_t *)idx);
            if ((feat & GBK_LADDER_POLL3) && lane == 31)
                c = ld_volatile((const volatile uint32_t *)ctl);
            if (feat & GBK_LADDER_V4)
                stamp = __shfl_sync(0xffffffffu, v.w, 1);
            else
                stamp = __shfl_sync(0xffffffffu, v.x, 7);
            c = __shfl_sync(0xffffffffu, c, 31);
            head = __shfl_sync(0xffffffffu, head, 30);
            /* The control word says "active" (1) and in_head is at least i,
             * as the ring kernel's checks need; without POLL3 both pass. */
            if (stamp == (uint32_t)i && (!(feat & GBK_LADDER_POLL3) || (c == 1 && head + 1 >= (uint64_t)i)))
                break;
        }
        uint32_t aux = (uint32_t)i;
        if (feat & GBK_LADDER_DISPATCH) {
            /* The ring kernel's own step: the slot into shared memory, then
             * gbi_dispatch_one on lane 0 against a real activation table. */
            if (lane < 4)
                *(uint4 *)(s_in + lane * 16) = v;
            __syncwarp();
            if (lane == 0) {
                const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)s_in;
                const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
                gb_slot_hdr_t oh;
                gbi_dispatch_one<gbk_bench_vecadd>(&ctx, &tab, gb_grain_lane(h->key, tab.lanes), h,
                                 s_in + GB_SLOT_HDR_SIZE, &oh, s_out + GB_SLOT_HDR_SIZE, 32, 0);
                oh.seq = 0;
                *(gb_slot_hdr_t *)s_out = oh;
            }
            __syncwarp();
            if (lane < 4)
                v = *(const uint4 *)(s_out + lane * 16);
        } else if (feat & GBK_LADDER_TABLE) {
            /* One grain-table access: a 32-byte entry (key, flag, state)
             * loaded with two 16-byte loads, its count bumped and written
             * back, as the ring kernel's lookup and write-back do. */
            uint64_t key = (uint64_t)__shfl_sync(0xffffffffu, v.x, 0) |
                           (uint64_t)__shfl_sync(0xffffffffu, v.y, 0) << 32;
            if (!(feat & GBK_LADDER_V4))
                key = (uint64_t)__shfl_sync(0xffffffffu, v.x, 0) | (uint64_t)__shfl_sync(0xffffffffu, v.x, 1) << 32;
            if (lane == 0) {
                unsigned char *en = tab.entries + (gb_key_mix(key) & (LADDER_KEYS * 4 - 1)) * 32;
                uint4 hd, sv;
                gb_grain_load32((const gb_grain_entry_t *)en, &hd, &sv);
                sv.x += 1 + (hd.z & 0x80000000u);
                *(uint4 *)(en + 16) = sv;
                aux = sv.x;
            }
            aux = __shfl_sync(0xffffffffu, aux, 0);
        }
        /* The reply: the request back with aux in word 6 (vecadd's count),
         * every word but the stamp, then the stamp after a system fence. */
        unsigned char *o = rep;
        if (feat & GBK_LADDER_V4) {
            if (lane == 1 && !(feat & GBK_LADDER_DISPATCH))
                v.z = aux;
            if (lane == 1)
                v.w = 0;
            if (lane < 4)
                *(uint4 *)(o + lane * 16) = v;
        } else if (lane < 16 && lane != 7) {
            ((volatile uint32_t *)o)[lane] = lane == 6 ? aux : v.x;
        }
        if ((feat & GBK_LADDER_COUNTERS) && lane == 0) {
            /* put_counters: four 8-byte stores to the kernel's line */
            processed++;
            st_volatile(&cnt[2], processed);
            st_volatile(&cnt[3], (uint64_t)0);
            st_volatile(&cnt[4], processed);
            st_volatile(&cnt[6], (uint64_t)i);
        }
        /* Ordering the reply before its stamp: every lane fences (the ring
         * kernel's way), or the warp syncs and lane 0 alone fences or stores
         * the stamp with release semantics (cumulative over the lanes'
         * writes that the warp barrier ordered before it). */
        if (feat & (GBK_LADDER_ONE_FENCE | GBK_LADDER_ST_RELEASE)) {
            __syncwarp();
        } else {
            if (feat & GBK_LADDER_ACQ_REL)
                asm volatile("fence.acq_rel.sys;" ::: "memory");
            else
                __threadfence_system();
            __syncwarp();
        }
        if (lane == 0) {
            uint32_t *stamp = (uint32_t *)o + 7;
            if (feat & GBK_LADDER_ST_RELEASE) {
                asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(__cvta_generic_to_global(stamp)),
                             "r"((uint32_t)i)
                             : "memory");
            } else {
                if ((feat & GBK_LADDER_ONE_FENCE) && (feat & GBK_LADDER_ACQ_REL))
                    asm volatile("fence.acq_rel.sys;" ::: "memory");
                else if (feat & GBK_LADDER_ONE_FENCE)
                    __threadfence_system();
                st_volatile((volatile uint32_t *)stamp, (uint32_t)i);
            }
            if (feat & GBK_LADDER_COUNTERS)
                st_volatile(&cnt[1], ++beat); /* the heartbeat, after the stamp */
        }
    }
}

extern "C" int gbk_floor_ladder(int device, unsigned feat, int warmup, int iters, double *samples)
{
    if (cudaSetDevice(device) != cudaSuccess)
        return -1;
    /* Separate lines for what different sides write, as in our region. */
    unsigned char *host = NULL, *dev = NULL;
    gb_grain_table_t tab;
    if (cudaHostAlloc((void **)&host, 5 * GB_LINE, cudaHostAllocMapped) != cudaSuccess)
        return -1;
    if (cudaHostGetDevicePointer((void **)&dev, host, 0) != cudaSuccess || ladder_table_new(&tab) != 0) {
        cudaFreeHost(host);
        return -1;
    }
    memset(host, 0, 5 * GB_LINE);
    unsigned char *req = host, *rep = host + GB_LINE;
    uint64_t *idx = (uint64_t *)(host + 2 * GB_LINE);
    uint32_t *ctl = (uint32_t *)(host + 3 * GB_LINE); /* the control block's host line */
    ctl[0] = 1;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const int total = warmup + iters;
    ladder_kernel<<<1, 32, 0, s>>>(dev, dev + GB_LINE, (const uint64_t *)(dev + 2 * GB_LINE),
                                   (const uint32_t *)(dev + 3 * GB_LINE), (uint64_t *)(dev + 4 * GB_LINE), tab,
                                   feat, total);
    int rc = cudaGetLastError() == cudaSuccess ? 0 : -1;
    gb_slot_hdr_t *h = (gb_slot_hdr_t *)req;
    const gb_slot_hdr_t *r = (const gb_slot_hdr_t *)rep;
    for (int i = 1; rc == 0 && i <= total; i++) {
        const double t0 = ladder_now_us();
        gbk_bench_request(req, i, LADDER_KEYS);
        __atomic_store_n(&h->seq, (uint32_t)i, __ATOMIC_RELEASE);
        if (feat & GBK_LADDER_POLL3)
            __atomic_store_n(idx, (uint64_t)i, __ATOMIC_RELEASE);
        const double deadline = t0 + 1e6;
        while (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != (uint32_t)i) {
            if (ladder_now_us() > deadline) {
                rc = -2;
                break;
            }
        }
        if (rc)
            break;
        /* The reply answers this request; through the handler, with the sum. */
        const float *res = (const float *)(rep + GB_SLOT_HDR_SIZE);
        if (r->corr != (uint64_t)i || ((feat & GBK_LADDER_DISPATCH) && (r->status != GB_SLOT_OK ||
                                                                         res[0] != (float)(2 * i + 3))))
            rc = -3;
        if (i > warmup)
            samples[i - warmup - 1] = ladder_now_us() - t0;
    }
    if (rc)
        ctl[0] = 0; /* never stamped again: the kernel spins; the stream is left to the process's exit */
    else if (cudaStreamSynchronize(s) != cudaSuccess)
        rc = -4;
    if (rc == 0) {
        cudaStreamDestroy(s);
        cudaFree(tab.entries);
        cudaFreeHost(host);
    }
    return rc;
}

/* The relaunch ladder: what a relaunched round trip costs at least, step by
 * step from the empty-graph floor (gbk_floor_relaunch_ladder). */
typedef struct rl_args {
    __align__(16) unsigned char req[64]; /* the request, in the parameters */
    unsigned char *rep;                  /* the reply slot, mapped */
    unsigned long long *ns;              /* device memory: the kernels' time, summed */
    gb_grain_table_t tab;
    int step;
    int kind; /* 2 (vecadd), as a run-time value: KIND picks the handler by it */
} rl_args_t;

/* BIG: parameters the size of the inline kernel's. */
typedef struct rl_big_args {
    rl_args_t a;
    unsigned char pad[1152];
} rl_big_args_t;

static __device__ __forceinline__ void rl_run(const rl_args_t &p)
{
    const uint32_t lane = threadIdx.x;
    if (p.step == GBK_RL_EMPTY)
        return;
    unsigned long long ns0 = 0, ns1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
    __shared__ __align__(16) unsigned char s_out[64];
    uint4 v = make_uint4(0, 0, 0, 0);
    if (lane < 4)
        v = ((const uint4 *)p.req)[lane];
    const bool dispatch = p.step >= GBK_RL_DISPATCH;
    if (dispatch && lane == 0) {
        const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)p.req;
        const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
        gb_slot_hdr_t oh;
        gb_grain_table_t tab = p.tab;
        /* KIND: a switch on a run-time kind, as a kernel shared by grain types would need. */
        if (p.step == GBK_RL_KIND && p.kind != 2)
            gbi_dispatch_one<gbk_bench_echo>(&ctx, &tab, gb_grain_lane(h->key, tab.lanes), h, p.req + GB_SLOT_HDR_SIZE,
                                             &oh, s_out + GB_SLOT_HDR_SIZE, 32, 0);
        else
            gbi_dispatch_one<gbk_bench_vecadd>(&ctx, &tab, gb_grain_lane(h->key, tab.lanes), h,
                                               p.req + GB_SLOT_HDR_SIZE, &oh, s_out + GB_SLOT_HDR_SIZE, 32, 0);
        oh.seq = h->seq;
        *(gb_slot_hdr_t *)s_out = oh;
    }
    __syncwarp();
    if (dispatch && lane < 4)
        v = ((const uint4 *)s_out)[lane];
    const uint32_t seq = __shfl_sync(0xffffffffu, v.w, 1);
    if (lane == 1)
        v.w = 0;
    if (lane < 4)
        ((uint4 *)p.rep)[lane] = v;
    __threadfence_system();
    __syncwarp();
    if (lane == 0) {
        st_volatile((volatile uint32_t *)p.rep + 7, seq);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
        *p.ns += ns1 - ns0;
    }
}

__global__ void rl_kernel(const __grid_constant__ rl_args_t p) { rl_run(p); }

__global__ void rl_big_kernel(const __grid_constant__ rl_big_args_t p) { rl_run(p.a); }

extern "C" int gbk_floor_relaunch_ladder(int device, int step, int warmup, int iters, double *samples,
                                         double *launch_us, double *kernel_us)
{
    double launch_sum = 0;
    if (cudaSetDevice(device) != cudaSuccess)
        return -1;
    static rl_big_args_t big; /* BIG: args is its head */
    rl_args_t &args = big.a;
    memset(&big, 0, sizeof big);
    args.step = step;
    args.kind = 2;
    unsigned char *host = NULL;
    cudaStream_t s = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaGraphNode_t node = NULL;
    int rc = -1;
    if (cudaHostAlloc((void **)&host, GB_LINE, cudaHostAllocMapped) != cudaSuccess)
        return -1;
    memset(host, 0, GB_LINE);
    if (cudaHostGetDevicePointer((void **)&args.rep, host, 0) != cudaSuccess || ladder_table_new(&args.tab) != 0 ||
        cudaMalloc((void **)&args.ns, sizeof *args.ns) != cudaSuccess ||
        cudaMemset(args.ns, 0, sizeof *args.ns) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        goto out;
    /* REPLY and EMPTY launch the parameters of instantiation: stamp 1. */
    ((gb_slot_hdr_t *)args.req)->seq = 1;
    {
        void *kp[1] = {step == GBK_RL_BIG ? (void *)&big : (void *)&args};
        cudaKernelNodeParams np = {};
        np.func = step == GBK_RL_BIG ? (void *)rl_big_kernel : (void *)rl_kernel;
        np.gridDim = dim3(1, 1, 1);
        np.blockDim = dim3(32, 1, 1);
        np.kernelParams = kp;
        if (cudaGraphCreate(&graph, 0) != cudaSuccess ||
            cudaGraphAddKernelNode(&node, graph, NULL, 0, &np) != cudaSuccess ||
            cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
            goto out;
        rc = 0;
        const gb_slot_hdr_t *r = (const gb_slot_hdr_t *)host;
        gb_slot_hdr_t *h = (gb_slot_hdr_t *)args.req;
        for (int i = 1; rc == 0 && i <= warmup + iters; i++) {
            const double t0 = ladder_now_us();
            /* The request of this launch: new parameters every time from
             * the SET step on; before it the kernel answers the same one,
             * and the host clears the stamp that says it did. */
            gbk_bench_request(args.req, i, LADDER_KEYS);
            uint32_t want = step >= GBK_RL_SET ? (uint32_t)i : 1u;
            h->seq = want;
            if (step < GBK_RL_SET)
                __atomic_store_n(&((gb_slot_hdr_t *)host)->seq, 0u, __ATOMIC_RELEASE);
            const double l0 = ladder_now_us();
            if (step >= GBK_RL_SET && cudaGraphExecKernelNodeSetParams(exec, node, &np) != cudaSuccess)
                rc = -2;
            if (rc == 0 && cudaGraphLaunch(exec, s) != cudaSuccess)
                rc = -2;
            if (i > warmup)
                launch_sum += ladder_now_us() - l0;
            if (rc)
                break;
            if (step == GBK_RL_EMPTY) {
                if (cudaStreamSynchronize(s) != cudaSuccess)
                    rc = -2;
            } else {
                /* The reply by its stamp, as the runtime sees one; the next
                 * launch queues behind this one if it has not ended. */
                const double deadline = t0 + 1e6;
                while (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != want)
                    if (ladder_now_us() > deadline) {
                        rc = -3;
                        break;
                    }
                const float *res = (const float *)(host + GB_SLOT_HDR_SIZE);
                if (rc == 0 && step >= GBK_RL_DISPATCH && (r->status != GB_SLOT_OK || res[0] != (float)(2 * i + 3)))
                    rc = -4;
            }
            if (rc == 0 && i > warmup)
                samples[i - warmup - 1] = ladder_now_us() - t0;
        }
        if (cudaStreamSynchronize(s) != cudaSuccess && rc == 0)
            rc = -2;
        *launch_us = launch_sum / iters;
        unsigned long long ns = 0;
        if (cudaMemcpy(&ns, args.ns, sizeof ns, cudaMemcpyDeviceToHost) != cudaSuccess && rc == 0)
            rc = -2;
        *kernel_us = (double)ns / 1e3 / (warmup + iters);
    }
out:
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    if (s)
        cudaStreamDestroy(s);
    cudaFree(args.tab.entries);
    cudaFree(args.ns);
    cudaFreeHost(host);
    return rc;
}
