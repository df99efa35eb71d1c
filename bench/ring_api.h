/* bench_ring's rows through the embedding API (gpubridge/runtime.h): the
 * round trip of gpubridge_call on the same vecadd ring geometry as the
 * runtime's own rows, so the API's cost shows beside them. */
#ifndef GB_BENCH_RING_API_H
#define GB_BENCH_RING_API_H

#include "config.h"

/* warmup + iters calls of request i (ring_load.h), each reply checked;
 * median and p99 in us, the placement's name into placement. 0, or -1 with
 * the reason on stderr (a GPU mode without a GPU: -1 too). */
int ra_call_round_trips(gb_mode mode, int window, int warmup, int iters, double *median, double *p99,
                        char *placement, size_t cap);

#endif
