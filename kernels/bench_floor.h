/* Floors measured in the same run as our benchmarks, so that ratios compare
 * like with like on a noisy machine:
 *  - echo: one warp polls a stamp inside a 64-byte slot in mapped memory (one
 *    PCIe read per message) and writes a 64-byte reply back, with or without a
 *    system fence before the reply's stamp;
 *  - graph: a captured CUDA graph of one empty kernel, launched and
 *    synchronized; and of copy-in -> empty kernel -> copy-out of `slots`
 *    64-byte slots.
 * And one probe (not a floor): the cycles of one gbi_dispatch_one call for a
 * vecadd request, outside any ring, to take the handler's share of a round
 * trip apart. */
#ifndef GB_BENCH_FLOOR_H
#define GB_BENCH_FLOOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gbk_lat {
    double median_us;
    double p99_us;
    double mean_us;
} gbk_lat_t;

/* Returns 0 on success. samples[] must hold `iters` doubles (microseconds). */
int gbk_floor_echo(int device, int fence, int warmup, int iters, double *samples);
int gbk_floor_graph(int device, int copy_slots, int warmup, int iters, double *samples);
/* gbi_dispatch_one on one thread against a real activation table, `iters`
 * calls over `keys` keys, idle for gap_ns before each (0: back to back).
 * Writes the median cycles and the SM clock in MHz. Returns 0 on success. */
/* What the probe times: all of gbi_dispatch_one, the grain-table step alone
 * (lane, lookup with state copy, write-back), or the vecadd handler alone. */
enum { GBK_PROBE_DISPATCH = 0, GBK_PROBE_LOOKUP = 1, GBK_PROBE_HANDLER = 2 };
int gbk_probe_dispatch(int device, int part, int keys, int gap_ns, int iters, double *median_cycles,
                       double *mhz);
/* Not a floor: the copy graph of gbk_floor_graph taken apart on the host.
 * Medians of the launch call alone, of launch + cudaStreamSynchronize, and of
 * launch + cudaStreamQuery until done; the mean number of those queries. */
typedef struct gbk_graph_probe {
    double launch_us, sync_us, poll_us, queries;
} gbk_graph_probe_t;
int gbk_probe_graph(int device, int copy_slots, int warmup, int iters, gbk_graph_probe_t *out);
/* The device's name, for the benchmark's header. */
int gbk_device_name(int device, char *buf, int len);

#ifdef __cplusplus
}
#endif
#endif
