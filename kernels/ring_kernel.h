/* The generic ring kernel: its arguments and its launcher, callable from C.
 * One kernel serves every grain type (the handler is picked by `kind`) and
 * both GPU modes: persistent (budget 0: loop until told to stop) and relaunch
 * (drain up to `budget` requests, then exit with a reason). */
#ifndef GB_RING_KERNEL_H
#define GB_RING_KERNEL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "grain_table.h"
#include "ring.h"

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
    /* Profile (clock64 cycles, thread 0): idle polls, then per busy window
     * read, dispatch, write; busy windows and their requests. */
    uint64_t prof_idle, prof_read, prof_dispatch, prof_write, prof_windows, prof_msgs;
    /* The same for windows of 64 requests or more. */
    uint64_t prof_big_read, prof_big_dispatch, prof_big_write, prof_big_windows, prof_big_msgs;
} gb_kstate_t;

typedef struct gb_kargs {
    unsigned char *region;  /* device view of the region (mapped pointer or device memory) */
    gb_kstate_t *kstate;    /* device memory */
    gb_grain_table_t tab;   /* device memory */
    gb_ring_geom_t geom;
    int32_t kind;           /* gb_grain_kind */
    int32_t staging;        /* 1: region in device memory fed by copies; trust in_head, not stamps */
    uint32_t window;        /* most requests per dispatch window */
    uint32_t idle_spin_polls;
    uint32_t idle_backoff_max_ns;
    uint32_t budget;        /* 0: persistent; else requests per launch */
} gb_kargs_t;

/* Shared memory the kernel needs for a window (input and output copies). */
size_t gbk_ring_smem(uint32_t window, uint32_t slot_size);
/* Largest window that fits the device's shared memory for slot_size. */
uint32_t gbk_ring_max_window(int device, uint32_t slot_size);
/* Threads per block: the number of owner lanes. */
#define GBK_THREADS 256u
/* Launches one block of GBK_THREADS threads on stream. */
cudaError_t gbk_ring_launch(const gb_kargs_t *args, cudaStream_t stream);
/* Adds the same launch as a kernel node of graph (relaunch mode). */
cudaError_t gbk_ring_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                              size_t ndeps, const gb_kargs_t *args);

#ifdef __cplusplus
}
#endif
#endif
