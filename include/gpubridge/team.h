/* What a handler is given besides its grain's state: the grain type's arena
 * and the team of threads that runs one message together.
 *
 * Most grains (echo, vecadd) are handled by one thread each: team size 1.
 * Bulk grains (PageRank partitions) are *team* grains: on the GPU one whole
 * thread block runs each message (the team kernel, device/team_kernel.cuh),
 * so a handler splits its loops over `rank`/`size` and meets at
 * gb_team_sync. On the CPU the team is the one calling thread, and the same
 * source runs with size 1 (the primitives below are then no-ops).
 *
 * The arena is bulk memory (device memory on the GPU) that the grain types of
 * one family share, so that their data passes device to device, never through
 * the host: PageRank's senders write contributions there and its aggregators
 * read them. */
#ifndef GB_TEAM_H
#define GB_TEAM_H

#include <stdint.h>

#include "gpubridge/ring.h"

typedef struct gb_grain_ctx {
    unsigned char *arena; /* shared bulk memory of the grain family, or NULL */
    uint64_t arena_size;  /* bytes */
    uint32_t rank, size;  /* this thread in the team; threads in the team */
    double *scratch;      /* GPU: 32 doubles of shared memory for reductions */
    /* This turn's messages to other grains (gb_grain_send, gb_grain_forward
     * in gpubridge/grain.h); NULL where the type declares no targets. */
    struct gb_grain_mail *mail;
    /* The family's arenas on every device of the bridge, by device number
     * (docs/design.md, "Several devices"): peers[self] is arena. A team grain
     * whose data spans devices writes into another device's arena directly;
     * on GPUs that is peer access, over NVLink or PCIe. n_peers is 1 (peers
     * NULL) where the type runs on one device. */
    unsigned char *const *peers;
    uint32_t n_peers, self;
} gb_grain_ctx_t;

/* A grain type's handler (gpubridge/grain.h): the host's copy of the GB_HD
 * function, called through this pointer by the cpu backend. */
typedef uint16_t (*gb_grain_handler_fn)(const gb_grain_ctx_t *ctx, void *state, uint16_t type,
                                        const unsigned char *in, uint32_t in_len, unsigned char *out,
                                        uint32_t out_cap, uint32_t *out_len, uint32_t *aux);

/* Every thread of the team must call these, with the same arguments order. */
GB_HD void gb_team_sync(const gb_grain_ctx_t *c)
{
    (void)c;
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
}

/* Sum of v over the team, returned to every thread. */
GB_HD double gb_team_sum(const gb_grain_ctx_t *c, double v)
{
#if defined(__CUDA_ARCH__)
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const uint32_t warp = c->rank / 32, nwarps = (c->size + 31) / 32;
    __syncthreads(); /* scratch may still be read by a previous reduction */
    if ((c->rank & 31) == 0)
        c->scratch[warp] = v;
    __syncthreads();
    double t = 0;
    for (uint32_t w = 0; w < nwarps; w++)
        t += c->scratch[w];
    return t;
#else
    (void)c;
    return v;
#endif
}

/* 1 on every thread when cond is non-zero on any thread. */
GB_HD int gb_team_any(const gb_grain_ctx_t *c, int cond)
{
    (void)c;
#if defined(__CUDA_ARCH__)
    return __syncthreads_or(cond) != 0;
#else
    return cond != 0;
#endif
}

/* Loads of data another kernel or another SM writes while we run (PageRank's
 * ranks and contributions): past the SM's L1, which is not coherent. */
#if defined(__CUDA_ARCH__)
#define GB_LOAD_SHARED(p) __ldcg(p)
#else
#define GB_LOAD_SHARED(p) (*(p))
#endif

#endif
