/* bench_ring's rows through the embedding API (gpubridge/runtime.h): the
 * round trip of gpubridge_call, and batches of gpubridge_send followed by
 * gpubridge_poll, on the same vecadd ring geometry as the runtime's own
 * rows, so the API's cost shows beside them. */
#ifndef GB_BENCH_RING_API_H
#define GB_BENCH_RING_API_H

#include "config.h"

typedef struct ra_result {
    double median_us, p99_us; /* gpubridge_call round trips */
    double batch_rate[4];     /* msg/s with batches of 1, 16, 256, 4096 */
    char placement[16];
} ra_result_t;

/* warmup + iters calls of request i (ring_load.h), then `seconds` of each
 * batch size; every reply checked. 0, or -1 with the reason on stderr (a
 * GPU mode without a GPU: -1 too). */
int ra_bench(gb_mode mode, int window, int warmup, int iters, double seconds, ra_result_t *out);

#endif
