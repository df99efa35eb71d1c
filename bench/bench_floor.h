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
/* The fenced echo floor with steps of the ring kernel's lone-request path
 * added (bench_ladder.cu), to put a round trip's distance from the floor down
 * to its parts. feat is a set of:
 *  V4: the slot read and written as 16-byte vectors by 4 lanes (not 4-byte
 *      words by 16), the stamp in the header as in our rings;
 *  POLL3: each poll also reads an in_head line (the host writes it after the
 *      stamp) and a control line, on other lanes of the same warp load;
 *  COUNTERS: four 8-byte counter stores to the kernel's line before the
 *      fence, and a heartbeat store after the stamp;
 *  TABLE: one grain-table access (a 32-byte entry in device memory, loaded,
 *      bumped, written back) on the reply's path, keys over 4,096;
 *  DISPATCH: instead of TABLE, the slot copied to shared memory and the real
 *      gbi_dispatch_one (vecadd, table lookup, handler) on lane 0.
 * And how the reply is ordered before its stamp (default: every lane runs
 * __threadfence_system, fence.sc.sys, then lane 0 stores the stamp):
 *  ACQ_REL: fence.acq_rel.sys instead;
 *  ONE_FENCE: the warp syncs, then lane 0 alone fences and stores;
 *  ST_RELEASE: the warp syncs, then lane 0 stores the stamp st.release.sys.
 * Same contract as gbk_floor_echo. */
enum {
    GBK_LADDER_V4 = 1,
    GBK_LADDER_POLL3 = 2,
    GBK_LADDER_COUNTERS = 4,
    GBK_LADDER_TABLE = 8,
    GBK_LADDER_DISPATCH = 16,
    GBK_LADDER_ACQ_REL = 32,
    GBK_LADDER_ONE_FENCE = 64,
    GBK_LADDER_ST_RELEASE = 128,
};
int gbk_floor_ladder(int device, unsigned feat, int warmup, int iters, double *samples);
/* The same for a relaunched round trip, from the empty-graph floor: a
 * one-node graph of a one-warp kernel launched per request,
 *  EMPTY: the kernel returns at once; launch + synchronize (the floor);
 *  REPLY: it writes a fixed 64-byte reply to mapped memory, fence, stamp;
 *      the host waits for the stamp, not for the stream;
 *  SET: the request rides in the kernel's parameters, updated before each
 *      launch (cudaGraphExecKernelNodeSetParams) and echoed;
 *  DISPATCH: the reply comes from gbi_dispatch_one (vecadd, a real table);
 *  BIG: DISPATCH with parameters the size of the inline kernel's (1.2 KiB);
 *  KIND: DISPATCH with the handler picked by a run-time value (a kernel shared by grain types).
 * The next launch queues behind one not yet ended, as the runtime's do.
 * *launch_us: the mean host time of the node update and launch call;
 * *kernel_us: the kernel's mean time from its start to its stamp. */
enum { GBK_RL_EMPTY = 0, GBK_RL_REPLY = 1, GBK_RL_SET = 2, GBK_RL_DISPATCH = 3, GBK_RL_BIG = 4, GBK_RL_KIND = 5 };
int gbk_floor_relaunch_ladder(int device, int step, int warmup, int iters, double *samples, double *launch_us,
                              double *kernel_us);
/* The device's name, for the benchmark's header. */
int gbk_device_name(int device, char *buf, int len);

#ifdef __cplusplus
}
#endif
#endif
