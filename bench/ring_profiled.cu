/* bench_ring's benchmark build of vecadd (ring_profiled.h). */
#define GB_KERNEL_PROFILE 1
#include "gpubridge/grain.h"

#include <stdio.h>

#include "grain_registry.h"
#include "ring_profiled.h"
#include "vecadd.h"

static __host__ __device__ __forceinline__ uint16_t profiled_vecadd(const gb_grain_ctx_t *ctx, void *state,
                                                                    uint16_t type, const unsigned char *in,
                                                                    uint32_t in_len, unsigned char *out,
                                                                    uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx;
    return gb_vecadd_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
}

static const gb_grain_msg_t profiled_msgs[] = {{GB_VECADD_MSG_REQUEST, "VectorAddRequest"}};

GB_DEFINE_GRAIN(bench_vecadd_profiled, GB_BENCH_PROFILED_TYPE, GB_VECADD_STATE_SIZE, 0, profiled_vecadd,
                profiled_msgs, NULL)

extern "C" int bench_profiled_register(void)
{
    char err[256];
    if (gb_grain_kind_of(GB_BENCH_PROFILED_TYPE) || gb_grain_register(&gb_grain_bench_vecadd_profiled, err, sizeof err))
        return 0;
    fprintf(stderr, "bench: %s\n", err);
    return -1;
}
