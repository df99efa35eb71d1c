/* The grain types every gpubridge has, and their ring settings: the two
 * tables the runtime links (grain_registry.h, config.h). */
#include "config.h"
#include "grain_registry.h"

extern const gb_grain_desc_t gb_grain_echo, gb_grain_vecadd, gb_grain_pagerank_sender, gb_grain_pagerank_aggregator;

const gb_grain_desc_t *const gb_builtin_grains[] = {&gb_grain_vecadd, &gb_grain_echo, &gb_grain_pagerank_sender,
                                                    &gb_grain_pagerank_aggregator};
const size_t gb_n_builtin_grains = sizeof gb_builtin_grains / sizeof gb_builtin_grains[0];

/* vecadd and echo: windows of 1,024: a ring kernel reading mapped memory is
 * bound by the loads it has in flight, and a wider window keeps more in
 * flight (GBK_READ_UNROLL, ring_kernel.cuh); shared memory holds them at
 * 64-byte slots. */
const gb_grain_config_t gb_builtin_grain_configs[] = {
    {"vecadd", 4096, 64, 1024, 65536, 0, GB_COLLECTION_AGE_S_DEFAULT, GB_MAX_EVICTED_KB_DEFAULT},
    {"echo", 4096, 64, 1024, 65536, 0, GB_COLLECTION_AGE_S_DEFAULT, GB_MAX_EVICTED_KB_DEFAULT},
    {"pagerank.sender", 512, 16384, 256, 4096, 0, GB_COLLECTION_AGE_S_DEFAULT, GB_MAX_EVICTED_KB_DEFAULT},
    {"pagerank.aggregator", 512, 16384, 256, 4096, 0, GB_COLLECTION_AGE_S_DEFAULT, GB_MAX_EVICTED_KB_DEFAULT},
};
const size_t gb_n_builtin_grain_configs = sizeof gb_builtin_grain_configs / sizeof gb_builtin_grain_configs[0];
