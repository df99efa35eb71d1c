/* The ring-kernel runtime: one grain type's ring kernel on one backend, and the
 * host side of its rings.
 *
 * Lifecycle: gb_rk_new -> gb_rk_launch -> (send/recv, activate/deactivate)* ->
 * gb_rk_terminate -> gb_rk_destroy. A new ring kernel starts active.
 *
 * Threading: one producer thread calls send/claim/publish, one consumer thread
 * calls recv/peek/consume (they may be the same thread). Control calls
 * (activate, deactivate, terminate, status) may come from either. In
 * persistent and cpu modes, send and recv never call CUDA.
 *
 * Backends: cpu (worker threads), cuda persistent (a resident kernel polling
 * mapped pinned memory or a device copy fed from a staging buffer), and cuda
 * relaunch (issue: relaunch mode). Which one comes from gb_rk_params_t.mode. */
#ifndef GB_RUNTIME_H
#define GB_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "gpubridge/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_rk gb_rk_t;

typedef struct gb_rk_params {
    const char *type;              /* grain type name */
    gb_mode mode;                  /* GB_MODE_PERSISTENT, _RELAUNCH or _CPU (not AUTO) */
    gb_grain_config_t grain;       /* ring geometry and lanes */
    int device;                    /* CUDA device index */
    uint32_t idle_spin_polls;      /* polls before backing off when idle */
    uint32_t idle_backoff_max_ns;  /* longest sleep of an idle poller */
    uint32_t heartbeat_deadline_ms;
    uint32_t max_messages_per_launch;
    bool force_fallback_placement; /* act as if mapped pinned memory failed */
    uint32_t test_flags;           /* GB_TEST_* hooks (tests only) */
    /* Team grains: the family's arena from gb_arena_new, borrowed
     * (it must outlive the ring kernel). NULL for other grains. */
    unsigned char *arena;
    uint64_t arena_size;
    /* Team grains on several devices: the family's arena on each, by device
     * number (peers[peer_self] is arena), borrowed as arena is. On GPUs every
     * device has peer access to every other. n_peers 0 or 1: one device. */
    unsigned char *peers[GB_MAX_DEVICES];
    uint32_t n_peers, peer_self;
    /* Team grains: families of team kernels on this GPU (the same GPU listed
     * several times in `devices`): each gets its share of the SMs. 0 or 1: one. */
    uint32_t team_copies;
    /* Team grains on a GPU: the one-block ring kernels the team kernel leaves
     * an SM for (the engine counts its configured types); 0: every
     * registered grain type with a ring kernel. */
    uint32_t ring_kernels;
    /* Largest record (and largest reply) of a message, which goes out of line
     * when it does not fit a slot (large_payload.h); the engine sets it to
     * max_message_size. 0: GB_LARGE_DEFAULT_MAX. At most GB_LARGE_MAX_CAP. */
    uint32_t large_max;
} gb_rk_params_t;

#define GB_LARGE_DEFAULT_MAX (1u << 20)
#define GB_LARGE_MAX_CAP (64u << 20)

/* Fills params for grain type `type` from cfg (type must be in cfg->grains). */
gb_err gb_rk_params_from_config(const gb_config_t *cfg, const char *type, gb_mode mode,
                                gb_rk_params_t *out);

typedef enum gb_placement {
    GB_PLACEMENT_HOST = 0,       /* cpu backend: plain host memory */
    GB_PLACEMENT_MAPPED,         /* mapped pinned host memory, zero-copy */
    GB_PLACEMENT_DEVICE_PINNED,  /* device memory + pinned staging, async copies */
    GB_PLACEMENT_DEVICE_MALLOC,  /* device memory + malloc staging, synchronous copies */
} gb_placement;

const char *gb_placement_name(gb_placement p);
const char *gb_exit_reason_name(int reason);

typedef enum gb_rk_state {
    GB_RK_CREATED = 0, /* allocated, not launched */
    GB_RK_RUNNING,     /* launched (active or not) */
    GB_RK_TERMINATED,  /* stopped on request */
    GB_RK_FAILED,      /* stopped by an error (e.g. a sticky CUDA error) */
} gb_rk_state;

const char *gb_rk_state_name(gb_rk_state s);

typedef struct gb_rk_status {
    gb_rk_state state;
    gb_mode mode;
    gb_placement placement;
    bool active;          /* what the kernel last acted on */
    int exit_reason;      /* gb_exit_reason */
    int last_error;       /* CUDA error code, 0 if none */
    char last_error_name[64];
    uint64_t heartbeat;
    uint64_t processed;
    uint64_t errors;
    uint64_t iterations;
    uint64_t launches;
    uint64_t sent;        /* requests published by the host */
    uint64_t received;    /* replies consumed by the host */
    uint32_t capacity;
    uint32_t slot_size;
    uint32_t lanes;       /* keys are spread over this many: worker blocks of a team kernel (a
                           * partition of a team's work per block balances best), table partitions of a
                           * GPU ring kernel, cpu worker threads (1 when inline) */
    char fallback_reason[128]; /* set when the kernel fell back from persistent to relaunch */
    /* Activation collection (activation.h). */
    uint64_t activations; /* keys in the activation table (or on their way: requests in flight) */
    uint64_t evicted;     /* collected activations whose state waits in host memory */
    uint64_t evictions;   /* activations collected so far */
    uint64_t restores;    /* collected activations brought back by a message */
    uint64_t refused;     /* requests refused (STATUS_BUSY): no room in the table */
    uint64_t refused_evicted_full; /* of those, new keys refused because the store of evicted
                                    * states was at its bound (GB_SLOT_EVICTED_FULL) */
    uint64_t evicted_bytes;     /* host memory the store of evicted states holds */
    uint64_t evicted_max_bytes; /* its bound (grains.max_evicted_kb) */
    uint64_t evicted_max;       /* evicted grains the store holds at that bound (new keys are refused
                                 * once evicted reaches it); evicted_bytes is then about half the bound,
                                 * the other half being room for its rehash */
} gb_rk_status_t;

/* A reply as handed to the consumer. */
typedef struct gb_reply {
    uint64_t key;
    uint64_t corr;
    uint16_t type;
    uint16_t status; /* gb_slot_status */
    uint32_t len;    /* payload bytes (copied into the caller's buffer) */
    uint32_t aux;
} gb_reply_t;

/* Creates the ring kernel of one grain type: allocates its region and its
 * activation table. Nothing runs until gb_rk_launch. */
gb_err gb_rk_new(const gb_rk_params_t *params, gb_rk_t **out);
/* Stops it if still running (terminate with a short deadline), frees
 * everything; takes NULL and clears *rk. */
void gb_rk_destroy(gb_rk_t **rk);

gb_err gb_rk_launch(gb_rk_t *rk);
/* Deactivate: the kernel stops taking requests (they stay queued, none lost)
 * and this call returns once the kernel has acknowledged. Activate resumes. */
gb_err gb_rk_activate(gb_rk_t *rk, int timeout_ms);
gb_err gb_rk_deactivate(gb_rk_t *rk, int timeout_ms);
/* Asks the kernel to stop after its current window and waits for it (replies
 * already written stay readable). GB_ERR_TIMEOUT if it does not stop in time. */
gb_err gb_rk_terminate(gb_rk_t *rk, int timeout_ms);

/* Producer side. send copies one request into the next slot and publishes it;
 * GB_ERR_FULL when no slot is free (backpressure: consume replies first),
 * GB_ERR_TOO_LARGE when len exceeds gb_rk_large_max. A request whose payload
 * or reply (gb_grain_reply_max) does not fit the slot goes out of line
 * (gb_rk_claim_large); GB_ERR_FULL then also means the large area has no room
 * yet. */
gb_err gb_rk_send(gb_rk_t *rk, uint64_t key, uint64_t corr, uint16_t type,
                  const void *payload, uint32_t len);
/* Zero-copy form: claim returns the next free slot (NULL when full); fill its
 * header (key, corr, type, len) and payload, then publish all claimed slots.
 * Publishing notes the requests' keys and, when one needs room in the
 * activation table or an evicted state back, first runs an activation sweep
 * (activation.h: the grain type pauses for it); a request that finds no room
 * is answered STATUS_BUSY (GB_SLOT_GRAIN_TABLE_FULL). */
gb_slot_hdr_t *gb_rk_claim(gb_rk_t *rk);
void gb_rk_publish(gb_rk_t *rk);
/* Out of line (large_payload.h): claims the next slot for a request whose
 * record (len bytes, copied now) or reply (up to reply_max bytes) exceeds the
 * slot, with room for both in the large area; publish it with gb_rk_publish.
 * GB_ERR_FULL: no slot or no room now (consume replies first);
 * GB_ERR_TOO_LARGE: len or reply_max exceeds gb_rk_large_max. */
gb_err gb_rk_claim_large(gb_rk_t *rk, uint64_t key, uint64_t corr, uint16_t type, const void *rec, uint32_t len,
                         uint32_t reply_max);
/* Largest record or reply a message may have (0: no large area). */
uint32_t gb_rk_large_max(const gb_rk_t *rk);
/* Upper bound of the reply's payload to request record rec (len bytes) of
 * message type `type` of grain type handle `kind` (grain_registry.c). */
uint32_t gb_grain_reply_max(int kind, uint16_t type, const void *rec, uint32_t len);
/* Free request slots right now. */
uint32_t gb_rk_free_slots(const gb_rk_t *rk);
uint32_t gb_rk_payload_cap(const gb_rk_t *rk);
uint32_t gb_rk_capacity(const gb_rk_t *rk);
/* Cheap reads for the hot path (gb_rk_status copies everything). */
gb_rk_state gb_rk_state_of(const gb_rk_t *rk);
/* Running and not deactivated: requests in it are being processed. */
int gb_rk_is_active(const gb_rk_t *rk);
/* Position the next request will take (requests published so far). */
uint64_t gb_rk_next_pos(const gb_rk_t *rk);

/* Consumer side. recv copies the next reply (payload up to cap bytes; longer
 * payloads are truncated and GB_ERR_TOO_LARGE returned, the reply consumed);
 * GB_ERR_EMPTY when none is ready. peek/consume is the zero-copy form. */
gb_err gb_rk_recv(gb_rk_t *rk, gb_reply_t *out, void *payload, uint32_t cap);
const gb_slot_hdr_t *gb_rk_peek(gb_rk_t *rk);
/* Whether peek, reply_payload and consume may run on one thread while
 * another claims and publishes, with no lock between the two: true where
 * the replies are in host-visible memory by themselves (cpu mode, a
 * persistent kernel on mapped memory). False where peeking launches the
 * next relaunch or copies staged replies in, on the producer's streams and
 * launch state; the two sides then need one lock. Fixed once gb_rk_launch
 * returns (a persistent kernel falls back to relaunch only there). In cpu
 * mode without worker threads the grains run in peek: deactivate and
 * terminate then wait for the window in progress (backend_cpu.c). */
int gb_rk_consumer_apart(const gb_rk_t *rk);
/* The store of evicted activations: its bound in bytes and the activations
 * it holds. Unlike gb_rk_status, safe on a consumer thread apart. */
void gb_rk_evicted_store(const gb_rk_t *rk, uint64_t *max_bytes, uint64_t *evicted);
/* The payload of reply h, which gb_rk_peek just returned (h->len bytes): in
 * its slot, or in the large area for a request sent out of line. NULL when a
 * large reply claims more than its room or cannot be copied from the device. */
const unsigned char *gb_rk_reply_payload(gb_rk_t *rk, const gb_slot_hdr_t *h);
void gb_rk_consume(gb_rk_t *rk);
/* Whether the next reply's stamp is in host memory already (1 or 0): one
 * load, no backend call. -1 for a staging ring, whose replies show up only
 * after gb_rk_peek or gb_rk_poll copied them. For tight waiting loops; a
 * consumer call (it refreshes the consumer's view of what is published). */
int gb_rk_reply_visible(gb_rk_t *rk);
/* Requests published whose replies have not been consumed yet. */
uint64_t gb_rk_in_flight(const gb_rk_t *rk);

/* Health and progress: detects kernel failure (sticky CUDA errors), moves
 * staging copies, drives relaunches. Call it from the event loop when waiting,
 * on the consumer thread: it may copy replies into the ring (it may call CUDA;
 * status below never does). Returns GB_OK while healthy,
 * GB_ERR_TERMINATED or GB_ERR_CUDA once the kernel stopped. */
gb_err gb_rk_poll(gb_rk_t *rk);

/* Waiting without spinning. gb_rk_notify_fd returns a file descriptor that
 * becomes readable when replies are written while armed, or -1 when this
 * backend cannot notify (GPU modes: poll instead). To sleep on it:
 * gb_rk_arm(rk, 1); if gb_rk_peek(rk) is still NULL, poll(2) the fd; then
 * gb_rk_arm(rk, 0) (which also clears the fd). */
int gb_rk_notify_fd(gb_rk_t *rk);
void gb_rk_arm(gb_rk_t *rk, int on);

/* Reads the control block and the host counters: never a CUDA call. */
void gb_rk_status(const gb_rk_t *rk, gb_rk_status_t *st);

const char *gb_rk_type(const gb_rk_t *rk);

/* Arenas: bulk memory shared by the grain types of a family (a team's
 * shared data, e.g. a graph), device memory in GPU modes and host memory in cpu mode, zeroed.
 * gb_arena_new returns the pointer the handlers use (a device pointer in GPU
 * modes); gb_arena_free takes what gb_arena_new gave, after every ring kernel
 * using it has stopped. */
gb_err gb_arena_new(gb_mode mode, int device, uint64_t bytes, unsigned char **out);
void gb_arena_free(gb_mode mode, unsigned char *arena);
/* Whether a team grain on each of the n CUDA devices can write the arenas on
 * all the others: enables peer access between every two distinct devices
 * (a device listed twice needs none). 1 when every pair has it; 0 with the
 * reason in why (a pair without peer access, or CUDA not built in). Call it
 * before any ring kernel is launched. */
int gb_arena_peers(const int *devices, size_t n, char *why, size_t why_len);

/* Test hook (test builds only, test_hooks.h): GPUBRIDGE_TEST_FAULTS=1 lets
 * requests of message type GB_MSG_TEST_FAULT (65407) reach the kernels, where
 * they fault (a sticky CUDA error): the engine sets GB_TEST_ALLOW_FAULT, the
 * server passes them through. */
int gb_test_faults_enabled(void);

/* The handle of a grain type name (grain_registry.h): 1..n for a registered
 * type, 0 when none has that name. */
int gb_grain_kind_of(const char *type);

#ifdef __cplusplus
}
#endif
#endif
