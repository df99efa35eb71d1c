/* Grain traits the benchmark kernels dispatch to (gpubridge/grain.h makes the
 * same for every grain type): the built-in vecadd and echo handlers. */
#ifndef GB_BENCH_GRAINS_CUH
#define GB_BENCH_GRAINS_CUH

#include "echo.h"
#include "gpubridge/team.h"
#include "vecadd.h"

struct gbk_bench_vecadd {
    static constexpr bool team = false;
    static __host__ __device__ __forceinline__ uint16_t on_message(const gb_grain_ctx_t *ctx, void *state,
                                                                   uint16_t type, const unsigned char *in,
                                                                   uint32_t in_len, unsigned char *out,
                                                                   uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
    {
        return gb_vecadd_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
    }
};

struct gbk_bench_echo {
    static constexpr bool team = false;
    static __host__ __device__ __forceinline__ uint16_t on_message(const gb_grain_ctx_t *ctx, void *state,
                                                                   uint16_t type, const unsigned char *in,
                                                                   uint32_t in_len, unsigned char *out,
                                                                   uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
    {
        return gb_echo_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
    }
};

#endif
