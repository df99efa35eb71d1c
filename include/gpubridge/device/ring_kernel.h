/* The ring kernel's arguments, and a grain type's GPU entry points. Each grain
 * type has its own kernels (ring_kernel.cuh, team_kernel.cuh and
 * inline_kernel.cuh, templates on the grain's traits, instantiated by
 * GB_DEFINE_GRAIN in gpubridge/grain.h); the backend reaches them through
 * the type's gb_grain_gpu_t. They serve both GPU modes: persistent (budget
 * 0: loop until told to stop) and relaunch (drain up to `budget` requests,
 * then exit with a reason). */
#ifndef GB_RING_KERNEL_H
#define GB_RING_KERNEL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "gpubridge/detail/grain_table.h"
#include "gpubridge/device/link.h"
#include "gpubridge/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel-private progress, in device memory so that a relaunched kernel resumes
 * where the last one stopped without a PCIe read. */
typedef struct gb_kstate {
    uint64_t tail;       /* next request position */
    uint64_t processed;
    uint64_t errors;
    uint64_t iterations;
    int32_t active_seen;
    int32_t _pad;
    /* Profile, counted only by benchmark builds of the kernels (profile.cuh;
     * 0 otherwise). clock64 cycles, thread 0: idle polls, then per busy
     * window read, dispatch, write; busy windows and their requests. */
    uint64_t prof_idle, prof_read, prof_dispatch, prof_write, prof_windows, prof_msgs;
    /* The same for windows of 64 requests or more. */
    uint64_t prof_big_read, prof_big_dispatch, prof_big_write, prof_big_windows, prof_big_msgs;
    uint64_t epoch; /* team kernel: launches completed (see team_kernel.cuh) */
    /* Cycles inside handlers on the single-message path, and per launch the
     * SM cycles and global-timer ns the kernel ran (their ratio is the SM
     * clock the profile's cycles were counted at). */
    uint64_t prof_handler, prof_clk, prof_ns;
    uint64_t prof_big_rounds; /* dispatch rounds of the windows of 64 or more */
    uint64_t prof_big_bid;    /* cycles of their dispatch spent bidding (the rest runs handlers) */
} gb_kstate_t;

/* Team kernel bookkeeping, in device memory (team_kernel.cuh): block 0 copies
 * requests into the mirror and publishes `pub`; worker block w scans the
 * mirror and handles the requests whose key it owns. */
typedef struct gb_team_worker {
    volatile uint64_t scan;      /* positions below it are handled (or not ours) */
    volatile uint64_t processed; /* replies written by this block */
    volatile uint64_t errors;
    volatile uint64_t exited;    /* epoch + 1 once it left the launch of that epoch */
} gb_team_worker_t;

typedef struct gb_team_state {
    volatile uint64_t pub;  /* requests below it are in the mirror */
    volatile uint64_t end;  /* where workers stop, once stop == epoch + 1 */
    volatile uint64_t stop;
    volatile uint64_t test_flags; /* the control line's, as the reader read it at launch */
    uint64_t _pad[GB_LINE / 8 - 4];
    gb_team_worker_t w[1]; /* workers entries */
} gb_team_state_t;

#define GBK_TEAM_STATE_SIZE(workers) (offsetof(gb_team_state_t, w) + (size_t)(workers) * sizeof(gb_team_worker_t))

typedef struct gb_kargs {
    unsigned char *region;  /* device view of the region (mapped pointer or device memory) */
    gb_kstate_t *kstate;    /* device memory */
    gb_grain_table_t tab;   /* device memory */
    gb_ring_geom_t geom;
    int32_t kind;           /* the grain type's handle (registry), for diagnostics */
    int32_t staging;        /* 1: region in device memory fed by copies; trust in_head, not stamps */
    uint32_t window;        /* most requests per dispatch window */
    uint32_t idle_spin_polls;
    uint32_t idle_backoff_max_ns;
    uint32_t budget;        /* 0: persistent; else requests per launch */
    /* Team grains (gb_grain_is_team): 1 + workers blocks, the team kernel. */
    uint32_t team_workers;  /* 0: the one-block ring kernel */
    unsigned char *mirror;  /* device memory, cap * slot_size */
    gb_team_state_t *team;  /* device memory, GBK_TEAM_STATE_SIZE(team_workers), zeroed */
    unsigned char *arena;   /* the family's arena (device memory) */
    uint64_t arena_size;
    unsigned char *const *peers; /* device memory: the family's arena on each device (gb_grain_ctx_t.peers) */
    uint32_t n_peers, peer_self;
    uint32_t flags;         /* GBK_F_*: benchmark switches, 0 in production */
    /* Device links (link.h); none in relaunch and cpu modes, for team types,
     * or where a ring is not in mapped memory. */
    uint32_t n_link_in;
    gb_link_t *link_out[GB_MAIL_MAX_TARGETS]; /* by target index; NULL: the host path */
    gb_link_t *link_in[GB_LINK_IN_MAX];        /* the links this kernel takes from */
    uint32_t self;          /* its ring index (gb_slot_from) */
    uint32_t n_devs, dev;   /* its device among the bridge's: links serve that device's keys (n_devs 0:
                             * the kernel has no links out) */
    uint32_t max_hops;      /* messaging.max_hops */
    uint64_t hold_ns;       /* messaging.hold_ms: a link message's longest wait for a deactivated kernel */
} gb_kargs_t;

/* gb_kargs_t.flags, set from GPUBRIDGE_KERNEL_FLAGS (bench_ring compares them).
 * NO_INLINE, INLINE_PLAIN and OUTBOX_COPY are the host's (relaunch.cu); the
 * kernel tests the others only in benchmark builds (profile.cuh). */
#define GBK_F_NO_FAST 1u      /* no warp-0 poll and single-message path: every window on the block */
#define GBK_F_NO_INLINE 2u    /* relaunch: no inline launches (inline_kernel.h), the ring kernel always */
#define GBK_F_INLINE_PLAIN 4u /* relaunch: inline launches as plain launches, not graph launches */
#define GBK_F_OUTBOX_COPY 8u  /* relaunch, pinned staging: inline replies through device memory and a copy */
#define GBK_F_FENCE_ALL 32u   /* lone replies: every lane writes and fences, not lane 0 with a release store */
#define GBK_F_NO_VERIFY 64u   /* window rounds: table matches not re-checked (gb_grain_verify; unsound,
                               * for bench_ring --variants 64: its drain rate shows what the check costs) */
/* Lone small replies (GBK_ONE_WRITER_CHUNKS, ldst.cuh) are written by lane 0
 * and released with their stamp by st.release.sys: a system fence in every
 * writing lane also invalidates L1 and costs more (GBK_F_FENCE_ALL keeps that
 * way for bench_ring to compare). */

/* The stride of a window's slot copies in shared memory: an odd number of
 * 16-byte chunks. Each thread of a dispatch round reads its own slot's
 * fields; at a stride of 64 bytes (16 banks) a warp's 4-byte reads of one
 * field fall into 2 of the 32 banks, a 16-way conflict on every access of
 * the handler. At 80 bytes they spread over 8 banks, and 16-byte accesses
 * (the copies in and out) over all 32. Payloads stay 16-byte aligned. */
GB_HD uint32_t gbk_smem_pitch(uint32_t slot_size)
{
    return (slot_size / 16) % 2 ? slot_size : slot_size + 16;
}

/* Entries of a window's dispatch bid table: at least four times the window,
 * a power of two. A warp bids at the pace of its longest probe sequence, so
 * the table is kept a quarter full or less. */
GB_HD uint32_t gbk_bid_slots(uint32_t window)
{
    uint32_t n = 1;
    while (n < 4 * window)
        n <<= 1;
    return n;
}

/* Threads per block of a ring kernel: 512 keep 64 KiB of PCIe reads in
 * flight (a window of 1,024 64-byte slots) within 128 registers a thread. */
#define GBK_THREADS 512u
/* Most activation-table partitions of a ring kernel. */
#define GBK_MAX_PARTITIONS 4096u
/* Threads of a team kernel's block: the team that runs one message. More
 * warps per SM hide the latency of PageRank's gathers. */
#define GBK_TEAM_THREADS 512u

struct gbk_inline;

/* A grain type's kernels, as the backend calls them (grain_kernels.cuh fills
 * it in). Team grain types (team = 1) run the team kernel, 1 + team_workers
 * blocks, and have no inline launch (the inline entries are NULL). */
typedef struct gb_grain_gpu {
    uint32_t abi; /* GB_GRAIN_ABI */
    uint32_t team;
    /* Loads the type's kernels now. With CUDA's lazy module loading (the
     * default), the first launch of a kernel loads its module, which waits
     * for the device to be idle: behind a resident persistent kernel it
     * would wait forever. Called before the first ring kernel is created. */
    cudaError_t (*preload)(void);
    /* Largest window that fits the device's shared memory for slot_size. */
    uint32_t (*max_window)(int device, uint32_t slot_size);
    /* Team grains: worker blocks of the team kernel on device (all of them,
     * and those of a second team kernel, must be resident at once, beside
     * ring_kernels one-block ring kernels). */
    uint32_t (*team_workers)(int device, uint32_t slot_size, uint32_t ring_kernels);
    /* Launches the ring (or team) kernel on stream; or adds that launch as
     * a kernel node of graph (relaunch mode). */
    cudaError_t (*launch)(const gb_kargs_t *args, cudaStream_t stream);
    cudaError_t (*add_node)(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                            const gb_kargs_t *args);
    /* The inline launch (inline_kernel.h): launch, node, node update. */
    cudaError_t (*inline_launch)(const struct gbk_inline *m, cudaStream_t stream);
    cudaError_t (*inline_add_node)(cudaGraphNode_t *node, cudaGraph_t graph, const struct gbk_inline *m);
    cudaError_t (*inline_set_node)(cudaGraphExec_t exec, cudaGraphNode_t node, const struct gbk_inline *m);
} gb_grain_gpu_t;

#ifdef __cplusplus
}
#endif
#endif
