/* Internal to the CUDA backend: its per-ring-kernel state, shared by the
 * persistent side (backend_cuda.cu) and the relaunch side (relaunch.cu). */
#ifndef GB_BACKEND_CUDA_INTERNAL_H
#define GB_BACKEND_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <pthread.h>

#include "backend_cuda.h"
#include "gpubridge/device/inline_kernel.h"
#include "gpubridge/device/ring_kernel.h"
#include "runtime_internal.h"

typedef struct cuda_backend {
    struct cuda_backend *next_deferred;
    int device;
    const gb_grain_gpu_t *gpu; /* the grain type's kernels (ring_kernel.h) */
    int resident;         /* our kernel may still be running on the device */
    gb_placement placement;
    cudaStream_t kstream; /* the ring kernel, and relaunch graphs */
    cudaStream_t cstream; /* staging copies (persistent mode) */
    unsigned char *host;  /* host view (mapped, or staging) */
    unsigned char *dev;   /* device view */
    gb_kstate_t *kstate;
    gb_grain_table_t tab; /* device pointers */
    unsigned char *tab_host; /* activation sweeps: the table's host copy (malloc) */
    int32_t q_saved;      /* quiesced (persistent): the is_active to restore */
    int q_held;           /* quiesced (persistent): is_active was cleared for it */
    unsigned char *mirror;  /* team grains: device copy of the input ring */
    gb_team_state_t *team;  /* team grains: the team kernel's bookkeeping */
    unsigned char **peers;  /* team grains on several devices: the arenas (device memory; NULL: one) */
    gb_kargs_t args;
    uint64_t copied_in;   /* staging: requests copied to the device */
    uint64_t pulled_out;  /* staging: replies copied back */
    uint64_t last_query_ns;

    /* relaunch mode (configured, or after a heartbeat fallback) */
    int relaunch;
    int in_flight;        /* launches issued and not yet seen complete (mapped: 2, or 64 inline) */
    cudaGraph_t graph;
    cudaGraphExec_t gexec;
    cudaGraphNode_t n_in, n_out; /* staging: slot-range copies, updated per launch */
    unsigned char *lhdr;  /* staging: launch header (control line + in_head), pinned if possible */
    int lhdr_pinned;
    uint64_t launch_from, launch_to;
    uint64_t launches;
    /* inline launches (inline_kernel.h) */
    uint32_t inline_max;     /* requests one carries; 0: none for this grain type */
    uint32_t inline_n;       /* staging: requests of the inline launch in flight (0: none) */
    int exact;               /* every launch in flight is inline: the work issued ends at launch_to */
    cudaGraph_t igraph[2];      /* inline kernel [-> outbox copy]: [0] the full kernel's, [1] the small one's
                                 * (GBK_INLINE_SMALL); NULL where no launch would take it */
    cudaGraphExec_t igexec[2];
    cudaGraphNode_t n_ik[2];    /* their kernel nodes, updated per launch */
    unsigned char *dev_outbox;  /* staging: the inline kernel's replies and counters */
    unsigned char *host_outbox; /* staging: where they land (pinned, mapped where it can be; malloc with malloc staging) */
    int host_outbox_pinned;
    unsigned char *bounce;   /* staging: a launch's replies, before put_replies */
    int bounce_pinned;
    uint64_t bounce_n;       /* staging: replies the launch in flight copies to bounce (0: none) */
    gbk_inline_t inl;        /* the next inline launch's parameters */
    gbi_relaunch_prof_t prof; /* host time in launch and query calls */
    /* The producer's publish, the consumer's pull and poll, and control calls
     * may come from different threads (runtime.h), and each may launch or
     * retire a launch: this serialises the relaunch bookkeeping above. */
    pthread_mutex_t relaunch_lock;
} cuda_backend_t;

/* Records err as the ring kernel's last error and logs it with what. */
int gbi_cuda_fail(gb_rk_t *rk, cudaError_t err, const char *what);
bool gbi_cuda_staging(const gb_rk_t *rk);
/* Counts ring kernels that may be running: memory is freed only when none is. */
void gbi_cuda_set_resident(cuda_backend_t *b, int on);

/* relaunch.cu */
gb_err gbi_relaunch_setup(gb_rk_t *rk);
/* Launches when requests are pending, none is in flight, and the kernel is active. */
gb_err gbi_relaunch_kick(gb_rk_t *rk);
/* Notes a finished launch and relaunches if more is pending. Returns 1 when a
 * launch finished (replies may have arrived), 0 otherwise, -1 on a CUDA error. */
int gbi_relaunch_progress(gb_rk_t *rk);
/* Waits for the launch in flight, if any. */
gb_err gbi_relaunch_wait(gb_rk_t *rk, int timeout_ms);
/* A control-line change: lets the launch in flight finish, then the host's
 * flags are what the next launch sees; relaunches if requests wait. One
 * hold of the lock, so no launch slips in between. */
gb_err gbi_relaunch_control(gb_rk_t *rk);
void gbi_relaunch_free(cuda_backend_t *b);
/* Activation sweeps: on, waits until no launch is in flight and holds the
 * relaunch lock (no launch starts); off, releases it and launches what waits. */
gb_err gbi_relaunch_quiesce(gb_rk_t *rk, int on);

#define CK(call, what)                              \
    do {                                            \
        cudaError_t e_ = (call);                    \
        if (e_ != cudaSuccess) {                    \
            gbi_cuda_fail(rk, e_, what);            \
            goto fail;                              \
        }                                           \
    } while (0)

/* Set once ring kernels run on more than one CUDA device (cuda_create,
 * before any server thread starts): the host side's CUDA calls then make
 * their ring kernel's device current first (gbi_cuda_on_device), since the
 * calling thread serves the rings of every device. */
extern int gbi_cuda_multi_device;

static inline void gbi_cuda_on_device(const cuda_backend_t *b)
{
    int cur;
    if (__atomic_load_n(&gbi_cuda_multi_device, __ATOMIC_RELAXED) && b &&
        (cudaGetDevice(&cur) != cudaSuccess || cur != b->device)) {
        cudaGetLastError(); /* the last error is per thread: another device's must not show here */
        cudaSetDevice(b->device);
    }
}

#endif
