/* Floor kernels for the benchmarks (see bench_floor.h). Deliberately minimal:
 * they are what our runtime is compared against. */
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "bench_floor.h"

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

extern "C" int gbk_floor_graph(int device, int copy_slots, int warmup, int iters, double *samples)
{
    if (cudaSetDevice(device) != cudaSuccess)
        return -1;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    size_t bytes = (size_t)(copy_slots > 0 ? copy_slots : 1) * 64;
    void *h = NULL, *d = NULL;
    if (cudaHostAlloc(&h, bytes, cudaHostAllocDefault) != cudaSuccess || cudaMalloc(&d, bytes) != cudaSuccess)
        return -1;
    memset(h, 1, bytes);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (copy_slots > 0)
        cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s);
    floor_empty_kernel<<<1, 32, 0, s>>>();
    if (copy_slots > 0)
        cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s);
    if (cudaStreamEndCapture(s, &graph) != cudaSuccess ||
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
        return -1;
    int rc = 0;
    for (int i = 0; i < warmup + iters; i++) {
        double t0 = now_us();
        if (cudaGraphLaunch(exec, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
            rc = -2;
            break;
        }
        if (i >= warmup)
            samples[i - warmup] = now_us() - t0;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFree(d);
    cudaFreeHost(h);
    cudaStreamDestroy(s);
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
