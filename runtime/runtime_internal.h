/* Internal: the gb_rk_t object and the backend interface. C and CUDA C++ both
 * include it, so it uses __atomic builtins rather than C11 _Atomic. */
#ifndef GB_RUNTIME_INTERNAL_H
#define GB_RUNTIME_INTERNAL_H

#include <pthread.h>

#include "activation.h"
#include "clock.h"
#include "gpubridge/detail/grain_table.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gbi_backend_ops {
    const char *name;
    /* Allocates the region (sets rk->region, rk->placement) and the activation table. */
    gb_err (*create)(gb_rk_t *rk);
    gb_err (*launch)(gb_rk_t *rk);
    /* Makes requests up to rk->in_head visible to the kernel when plain stores
     * are not enough (staging copies, a relaunch). NULL: stores suffice. */
    void (*publish)(gb_rk_t *rk);
    /* Brings replies into the host view when they are not there by themselves
     * (staging). Returns non-zero when it moved something. NULL: mapped. */
    int (*pull)(gb_rk_t *rk);
    /* Writes a host-side control-block change through to the kernel's copy. */
    void (*control)(gb_rk_t *rk);
    /* Health check and progress; see gb_rk_poll. */
    gb_err (*poll)(gb_rk_t *rk);
    /* Reply notification (gb_rk_notify_fd / gb_rk_arm): NULL when the
     * backend cannot notify (a GPU writes no eventfd) and must be polled. */
    int (*notify_fd)(gb_rk_t *rk);
    void (*arm)(gb_rk_t *rk, int on);
    /* After should_terminate was set: waits for the kernel/threads to stop. */
    gb_err (*stop)(gb_rk_t *rk, int timeout_ms);
    void (*destroy)(gb_rk_t *rk);
    /* Activation collection (activation.c). quiesce(rk, 1) returns once no
     * kernel, launch or worker touches the activation table, and keeps it so
     * until quiesce(rk, 0), which also undoes a quiesce(rk, 1) that failed.
     * table_get gives a host view of the table (the table itself, or a copy
     * of it; NULL on failure) in which partitions [part, part + n) are
     * current; table_put writes those back where it is a copy. */
    gb_err (*quiesce)(gb_rk_t *rk, int on);
    unsigned char *(*table_get)(gb_rk_t *rk, uint32_t part, uint32_t n);
    gb_err (*table_put)(gb_rk_t *rk, uint32_t part, uint32_t n);
    /* See gb_rk_consumer_apart. NULL: always. */
    int (*consumer_apart)(const gb_rk_t *rk);
} gbi_backend_ops_t;

struct gb_rk {
    gb_rk_params_t p;
    char type_name[GB_NAME_LEN];
    int kind;              /* the grain type's handle (grain_registry.h) */
    gb_ring_geom_t geom;
    gb_placement placement;
    gb_rk_state state;
    uint32_t lanes;        /* set by the backend: how many ways keys are spread (gb_rk_status_t) */
    const gbi_backend_ops_t *ops;
    void *be;              /* backend private data */
    struct gbi_large *large; /* the large area's allocator (large_payload.c), NULL if none */
    uint64_t large_size;     /* bytes of the large area, after the rings in the region */

    /* Host view of the region: where the host reads and writes. */
    unsigned char *region;
    gb_control_t *ctl;
    gb_ring_indices_t *idx;
    unsigned char *in;
    unsigned char *out;

    /* The activation table's geometry (entries: the backend's pointer), set
     * by the backend's create; tab_mod: a key's partition is key % lanes
     * (team kernels), else gb_grain_lane. */
    gb_grain_table_t tab_geom;
    int tab_mod;
    gbi_act_t *act;           /* activation collection (producer side) */
    pthread_mutex_t act_lock; /* a sweep against activate/deactivate calls */

    int last_error;        /* CUDA error code recorded by the backend */
    char last_error_name[64];
    char fallback_reason[128]; /* why the mode changed at run time ("" if it did not) */

    /* Producer-owned, on its own line: next request position, how far it has
     * been published, and the last out_tail it read (its credit). */
    __attribute__((aligned(GB_LINE))) uint64_t in_head;
    uint64_t published;
    uint64_t credit_tail;
    /* Consumer-owned, on its own line: next reply position, and the last
     * `published` it read. The producer reads out_tail (acquire) for credit. */
    __attribute__((aligned(GB_LINE))) uint64_t out_tail;
    uint64_t seen_published;
    uint64_t _pad[GB_LINE / 8 - 2];
};

extern const gbi_backend_ops_t gbi_backend_cpu;
#ifdef GB_HAVE_CUDA
extern const gbi_backend_ops_t gbi_backend_cuda;
/* Device memory for gb_arena_new / gb_arena_free (backend_cuda.cu). */
gb_err gbi_cuda_arena_new(int device, uint64_t bytes, unsigned char **out);
void gbi_cuda_arena_free(unsigned char *arena);
int gbi_cuda_arena_peers(const int *devices, size_t n, char *why, size_t why_len);
#endif

/* large_payload.c: bytes of the large area for large_max; its allocator,
 * created after the backend's create; the consumer's refresh of what the
 * producer pushed (with `published`) and its step past a reply. */
typedef struct gbi_large gbi_large_t;
uint64_t gbi_large_area_size(uint32_t large_max);
gb_err gbi_large_new(gb_rk_t *rk);
void gbi_large_free(gb_rk_t *rk);
void gbi_large_refresh(gb_rk_t *rk);
void gbi_large_consume(gb_rk_t *rk);
#ifdef GB_HAVE_CUDA
/* large_payload_cuda.cu: the kernel's view of the region; staging copies of
 * bytes [off, off + len) of the region to (to_device) or from the device. */
unsigned char *gbi_cuda_region_dev(gb_rk_t *rk);
gb_err gbi_cuda_region_copy(gb_rk_t *rk, size_t off, size_t len, int to_device);
#endif

/* Bytes of the region the backend allocates: the rings and the large area. */
static inline size_t gbi_rk_region_size(const gb_rk_t *rk) { return gb_region_size(rk->geom) + rk->large_size; }

/* Sets the host-view pointers from rk->region. */
void gbi_rk_bind_region(gb_rk_t *rk, unsigned char *region);


#ifdef __cplusplus
}
#endif
#endif
