/* Floor kernels for the benchmarks (see bench_floor.h). Deliberately minimal:
 * they are what our runtime is compared against. */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_floor.h"
#include "bench_grains.cuh"
#include "bench_request.h"
#include "gpubridge/detail/dispatch.h"
#include "vecadd.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* slot layout: 15 words of payload, word 15 the stamp (last, as in our ring). */
__global__ void floor_echo_kernel(volatile uint32_t *req, volatile uint32_t *rep, int fence, int total)
{
    const int lane = threadIdx.x;
    for (int i = 1; i <= total; i++) {
        uint32_t v;
        /* lanes 0..15 read the 64-byte slot in one coalesced load */
        for (;;) {
            v = lane < 16 ? req[lane] : 0;
            uint32_t stamp = __shfl_sync(0xffffffffu, v, 15);
            if (stamp == (uint32_t)i)
                break;
        }
        if (lane < 15)
            rep[lane] = v + 1;
        if (fence)
            __threadfence_system();
        __syncwarp();
        if (lane == 15)
            rep[15] = (uint32_t)i;
    }
}

extern "C" int gbk_floor_echo(int device, int fence, int warmup, int iters, double *samples)
{
    if (cudaSetDevice(device) != cudaSuccess)
        return -1;
    uint32_t *req = NULL, *rep = NULL, *dreq = NULL, *drep = NULL;
    if (cudaHostAlloc((void **)&req, 128, cudaHostAllocMapped) != cudaSuccess ||
        cudaHostAlloc((void **)&rep, 128, cudaHostAllocMapped) != cudaSuccess)
        return -1;
    memset(req, 0, 128);
    memset(rep, 0, 128);
    cudaHostGetDevicePointer((void **)&dreq, req, 0);
    cudaHostGetDevicePointer((void **)&drep, rep, 0);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int total = warmup + iters;
    floor_echo_kernel<<<1, 32, 0, s>>>(dreq, drep, fence, total);
    int rc = 0;
    for (int i = 1; i <= total; i++) {
        double t0 = now_us();
        for (int w = 0; w < 15; w++)
            req[w] = (uint32_t)(i * 16 + w);
        __atomic_store_n(&req[15], (uint32_t)i, __ATOMIC_RELEASE);
        double deadline = t0 + 1e6;
        while (__atomic_load_n(&rep[15], __ATOMIC_ACQUIRE) != (uint32_t)i) {
            if (now_us() > deadline) {
                rc = -2;
                break;
            }
        }
        if (rc)
            break;
        if (rep[3] != (uint32_t)(i * 16 + 3 + 1))
            rc = -3;
        if (i > warmup)
            samples[i - warmup - 1] = now_us() - t0;
    }
    if (cudaStreamSynchronize(s) != cudaSuccess)
        rc = -4;
    cudaStreamDestroy(s);
    cudaFreeHost(req);
    cudaFreeHost(rep);
    return rc;
}

__global__ void floor_empty_kernel(void) {}

/* The floor graph: [copy-in ->] empty kernel [-> copy-out] of copy_slots
 * 64-byte slots, and what it needs. */
typedef struct floor_graph {
    cudaStream_t s;
    void *h, *d;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} floor_graph_t;

static int floor_graph_new(floor_graph_t *g, int device, int copy_slots)
{
    memset(g, 0, sizeof *g);
    if (cudaSetDevice(device) != cudaSuccess)
        return -1;
    cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking);
    size_t bytes = (size_t)(copy_slots > 0 ? copy_slots : 1) * 64;
    if (cudaHostAlloc(&g->h, bytes, cudaHostAllocDefault) != cudaSuccess || cudaMalloc(&g->d, bytes) != cudaSuccess)
        return -1;
    memset(g->h, 1, bytes);
    cudaStreamBeginCapture(g->s, cudaStreamCaptureModeThreadLocal);
    if (copy_slots > 0)
        cudaMemcpyAsync(g->d, g->h, bytes, cudaMemcpyHostToDevice, g->s);
    floor_empty_kernel<<<1, 32, 0, g->s>>>();
    if (copy_slots > 0)
        cudaMemcpyAsync(g->h, g->d, bytes, cudaMemcpyDeviceToHost, g->s);
    if (cudaStreamEndCapture(g->s, &g->graph) != cudaSuccess ||
        cudaGraphInstantiate(&g->exec, g->graph, 0) != cudaSuccess)
        return -1;
    return 0;
}

static void floor_graph_free(floor_graph_t *g)
{
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    if (g->graph)
        cudaGraphDestroy(g->graph);
    cudaFree(g->d);
    cudaFreeHost(g->h);
    if (g->s)
        cudaStreamDestroy(g->s);
}

extern "C" int gbk_floor_graph(int device, int copy_slots, int warmup, int iters, double *samples)
{
    floor_graph_t g;
    int rc = floor_graph_new(&g, device, copy_slots);
    for (int i = 0; rc == 0 && i < warmup + iters; i++) {
        double t0 = now_us();
        if (cudaGraphLaunch(g.exec, g.s) != cudaSuccess || cudaStreamSynchronize(g.s) != cudaSuccess)
            rc = -2;
        else if (i >= warmup)
            samples[i - warmup] = now_us() - t0;
    }
    floor_graph_free(&g);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

extern "C" int gbk_probe_graph(int device, int copy_slots, int warmup, int iters, gbk_graph_probe_t *out)
{
    floor_graph_t g;
    int rc = floor_graph_new(&g, device, copy_slots);
    double *launch = (double *)calloc((size_t)iters, sizeof(double));
    double *sync = (double *)calloc((size_t)iters, sizeof(double));
    double *poll = (double *)calloc((size_t)iters, sizeof(double));
    double queries = 0;
    if (!launch || !sync || !poll || iters < 1)
        rc = -1;
    for (int i = 0; rc == 0 && i < warmup + iters; i++) {
        double t0 = now_us();
        if (cudaGraphLaunch(g.exec, g.s) != cudaSuccess) {
            rc = -2;
            break;
        }
        double t1 = now_us();
        if (cudaStreamSynchronize(g.s) != cudaSuccess)
            rc = -2;
        if (i >= warmup) {
            launch[i - warmup] = t1 - t0;
            sync[i - warmup] = now_us() - t0;
        }
    }
    for (int i = 0; rc == 0 && i < warmup + iters; i++) {
        double t0 = now_us();
        if (cudaGraphLaunch(g.exec, g.s) != cudaSuccess) {
            rc = -2;
            break;
        }
        cudaError_t e;
        int n = 0;
        while ((e = cudaStreamQuery(g.s)) == cudaErrorNotReady)
            n++;
        if (e != cudaSuccess)
            rc = -2;
        if (i >= warmup) {
            poll[i - warmup] = now_us() - t0;
            queries += n + 1;
        }
    }
    if (rc == 0) {
        out->launch_us = median_of(launch, iters);
        out->sync_us = median_of(sync, iters);
        out->poll_us = median_of(poll, iters);
        out->queries = queries / iters;
    }
    free(launch);
    free(sync);
    free(poll);
    floor_graph_free(&g);
    return rc;
}

__global__ void probe_dispatch_kernel(gb_grain_table_t tab, int part, int keys, int gap_ns, int iters,
                                      unsigned long long *cycles, unsigned long long *clk_ns)
{
    __shared__ __align__(16) unsigned char s_in[64];
    __shared__ __align__(16) unsigned char s_out[64];
    if (threadIdx.x != 0)
        return;
    unsigned long long ns0, ns1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
    const long long c0 = clock64();
    for (int i = 0; i < iters; i++) {
        gb_slot_hdr_t *h = (gb_slot_hdr_t *)s_in;
        gbk_bench_request(s_in, i, (unsigned)keys);
        h->seq = 0;
        if (gap_ns) { /* idle as a ring kernel does between lone requests */
            unsigned long long g0, g;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
            do
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
            while (g - g0 < (unsigned long long)gap_ns);
        }
        const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
        gb_slot_hdr_t oh;
        const long long t0 = clock64();
        if (part == GBK_PROBE_DISPATCH) {
            gbi_dispatch_one<gbk_bench_vecadd>(&ctx, &tab, gb_grain_lane(h->key, 256), h, s_in + GB_SLOT_HDR_SIZE, &oh,
                             s_out + GB_SLOT_HDR_SIZE, 32, 0);
        } else if (part == GBK_PROBE_LOOKUP) {
            /* the table step alone: lane, probe with the state copy, write-back */
            __align__(16) uint64_t copy[2];
            int64_t e = gb_grain_find(&tab, gb_grain_lane(h->key, 256), h->key, 1, copy);
            copy[0]++;
            *(uint4 *)gb_grain_state(&tab, e) = *(const uint4 *)copy;
            oh.status = e < 0 ? GB_SLOT_GRAIN_TABLE_FULL : GB_SLOT_OK;
        } else {
            /* the handler alone, on a state in registers */
            __align__(16) uint64_t copy[2] = {(uint64_t)i, 0};
            uint32_t out_len = 0, aux = 0;
            oh.status = gbk_bench_vecadd::on_message(&ctx, copy, h->type, s_in + GB_SLOT_HDR_SIZE, h->len,
                                            s_out + GB_SLOT_HDR_SIZE, 32, &out_len, &aux);
            oh.len = out_len + (uint32_t)copy[0];
        }
        const long long t1 = clock64();
        *(gb_slot_hdr_t *)s_out = oh;
        cycles[i] = (unsigned long long)(t1 - t0) + (oh.status ? (1ull << 40) : 0); /* flag errors */
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
    clk_ns[0] = (unsigned long long)(clock64() - c0);
    clk_ns[1] = ns1 - ns0;
}

static int cmp_ull(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

extern "C" int gbk_probe_dispatch(int device, int part, int keys, int gap_ns, int iters, double *median_cycles,
                                  double *mhz)
{
    if (cudaSetDevice(device) != cudaSuccess || keys < 1 || iters < 1)
        return -1;
    gb_grain_table_t tab;
    memset(&tab, 0, sizeof tab);
    tab.lanes = 256;
    tab.per_lane = gb_grain_per_lane(65536, 256);
    tab.state_size = GB_VECADD_STATE_SIZE;
    tab.entry_size = gb_grain_entry_size(tab.state_size);
    const size_t bytes = (size_t)tab.lanes * tab.per_lane * tab.entry_size;
    unsigned long long *cyc = NULL, *clk = NULL;
    if (cudaMalloc((void **)&tab.entries, bytes) != cudaSuccess ||
        cudaMalloc((void **)&cyc, (size_t)iters * sizeof *cyc) != cudaSuccess ||
        cudaMalloc((void **)&clk, 2 * sizeof *clk) != cudaSuccess)
        return -1;
    cudaMemset(tab.entries, 0, bytes);
    probe_dispatch_kernel<<<1, 32>>>(tab, part, keys, gap_ns, iters, cyc, clk);
    unsigned long long *h = (unsigned long long *)malloc((size_t)iters * sizeof *h), hc[2];
    int rc = h && cudaDeviceSynchronize() == cudaSuccess &&
                     cudaMemcpy(h, cyc, (size_t)iters * sizeof *h, cudaMemcpyDeviceToHost) == cudaSuccess &&
                     cudaMemcpy(hc, clk, sizeof hc, cudaMemcpyDeviceToHost) == cudaSuccess
                 ? 0
                 : -2;
    if (rc == 0) {
        /* the second half: every key activated, caches as warm as they get */
        int half = iters / 2;
        for (int i = half; i < iters; i++)
            if (h[i] >> 40)
                rc = -3; /* an error reply: the probe measured the wrong path */
        qsort(h + half, (size_t)(iters - half), sizeof *h, cmp_ull);
        *median_cycles = (double)h[half + (iters - half) / 2];
        *mhz = hc[1] ? (double)hc[0] / (double)hc[1] * 1e3 : 0;
    }
    free(h);
    cudaFree(cyc);
    cudaFree(clk);
    cudaFree(tab.entries);
    return rc;
}

extern "C" int gbk_device_name(int device, char *buf, int len)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return -1;
    strncpy(buf, prop.name, (size_t)len - 1);
    buf[len - 1] = 0;
    return 0;
}
