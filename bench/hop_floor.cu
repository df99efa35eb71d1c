/* bench_hop's floor (hop_floor.h). Two kernels on two streams, each one
 * thread: the pinger writes 2k + 1 and waits for 2k + 2, the ponger waits
 * for 2k + 1 and writes 2k + 2. The pinger times each sample of n hops with
 * %globaltimer. */
#include <algorithm>
#include <cuda_runtime.h>
#include <vector>

#include "hop_floor.h"

static __device__ __forceinline__ unsigned long long ld_acq(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

static __device__ __forceinline__ void st_rel(unsigned long long *p, unsigned long long v)
{
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ __forceinline__ unsigned long long now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One side's send: the release store, after what the variant adds
 * (GB_HOP_FLOOR_*: a clock read, a compare-and-swap claim). */
static __device__ __forceinline__ void send(unsigned long long *mine, unsigned long long v, int variant,
                                            unsigned long long *claim, unsigned long long *sink)
{
    if (variant == 1)
        *sink += now_ns();
    else if (variant == 2)
        atomicCAS(claim, v - 1, v);
    st_rel(mine, v);
}

/* ping: seq[0] (its writes), seq[1] (the other's); samples[r]: ns of n hops. */
__global__ void hop_floor_kernel(unsigned long long *mine, unsigned long long *theirs, int ping, uint32_t n,
                                 uint32_t rounds, unsigned long long *samples, int variant)
{
    unsigned long long v = 0, sink = 0;
    unsigned long long *claim = mine + 8; /* a line of its own */
    for (uint32_t r = 0; r < rounds; r++) {
        const unsigned long long t0 = now_ns();
        for (uint32_t i = 0; i < n; i += 2) {
            if (ping) {
                send(mine, ++v, variant, claim, &sink);
                while (ld_acq(theirs) != v)
                    ;
            } else {
                while (ld_acq(theirs) != v + 1)
                    ;
                send(mine, ++v, variant, claim, &sink);
            }
        }
        if (sink == 1) /* never: keeps the clock reads */
            samples[0] = sink;
        if (ping)
            samples[r] = now_ns() - t0;
    }
}

extern "C" int gb_hop_floor(int device, int variant, uint32_t n, uint32_t rounds, double *median_ns, double *p99_ns)
{
    n += n & 1; /* whole round trips */
    unsigned long long *seq = nullptr, *samples = nullptr;
    cudaStream_t s[2] = {nullptr, nullptr};
    std::vector<unsigned long long> h(rounds);
    bool ok = cudaSetDevice(device) == cudaSuccess && cudaMalloc(&seq, 512) == cudaSuccess &&
              cudaMalloc(&samples, rounds * sizeof *samples) == cudaSuccess && cudaMemset(seq, 0, 512) == cudaSuccess &&
              cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking) == cudaSuccess &&
              cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking) == cudaSuccess;
    if (ok) {
        /* The two counters 256 bytes apart: each, and each claim word, its own line. */
        hop_floor_kernel<<<1, 1, 0, s[1]>>>(seq + 32, seq, 0, n, rounds, samples, variant);
        hop_floor_kernel<<<1, 1, 0, s[0]>>>(seq, seq + 32, 1, n, rounds, samples, variant);
        ok = cudaDeviceSynchronize() == cudaSuccess &&
             cudaMemcpy(h.data(), samples, rounds * sizeof *samples, cudaMemcpyDeviceToHost) == cudaSuccess;
    }
    for (cudaStream_t x : s)
        if (x)
            cudaStreamDestroy(x);
    cudaFree(seq);
    cudaFree(samples);
    cudaGetLastError();
    if (!ok || rounds == 0)
        return -1;
    std::sort(h.begin(), h.end());
    *median_ns = (double)h[rounds / 2] / n;
    *p99_ns = (double)h[std::min<size_t>(rounds - 1, (size_t)rounds * 99 / 100)] / n;
    return 0;
}
