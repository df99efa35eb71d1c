/* The grain types every gpubridge has (grain_registry.h). */
#include "grain_registry.h"

extern const gb_grain_desc_t gb_grain_echo, gb_grain_vecadd, gb_grain_pagerank_sender, gb_grain_pagerank_aggregator;

const gb_grain_desc_t *const gb_builtin_grains[] = {&gb_grain_vecadd, &gb_grain_echo, &gb_grain_pagerank_sender,
                                                    &gb_grain_pagerank_aggregator};
const size_t gb_n_builtin_grains = sizeof gb_builtin_grains / sizeof gb_builtin_grains[0];
