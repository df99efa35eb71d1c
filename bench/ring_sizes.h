/* bench_ring --sizes (ring_sizes.c): echo round trip and pipelined rate by
 * message size, in one slot and out of line. Returns 0 when every reply was
 * right, 1 otherwise, 2 for a bad size list. */
#ifndef GB_BENCH_RING_SIZES_H
#define GB_BENCH_RING_SIZES_H

int bench_sizes(const char *modes, int fallback, const char *sizes, int warmup, int iters, double seconds,
                const char *gpu);

#endif
