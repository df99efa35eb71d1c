/* Rings and the control block: the one memory layout shared by the host (C11)
 * and the ring kernels (CUDA). Everything here is plain data plus inline
 * helpers that compile on both sides.
 *
 * A grain type's ring kernel owns one *region*:
 *
 *   [gb_control_t][gb_ring_indices_t][in slots: cap * slot_size][out slots: cap * slot_size]
 *   [large area]
 *
 * The large area holds the payloads of messages larger than a slot (and
 * their replies); their slots carry a descriptor (detail/large_payload.h).
 *
 * Where the region lives (docs/design.md, "Rings and the control block"): mapped pinned host memory (the GPU
 * reads and writes it over PCIe, the host with plain loads and stores), or
 * device memory mirrored by a host staging copy, or plain host memory (cpu).
 *
 * Request/reply pairing. Every request gets exactly one reply, and the reply to
 * the request at position p is written to out slot p. The host admits request p
 * only once it has consumed reply p - cap, so the kernel never finds the output
 * ring full and never needs to read a host index: the host's credit check is
 * the flow control. (A relaunch kernel still has an "output full" exit reason
 * for completeness; with this pairing it cannot occur.)
 *
 * One PCIe read per message. A consumer that reads `head` and then the slot pays
 * two dependent PCIe round trips. Instead the producer stamps each slot
 * with seq = stamp(position), written last with release semantics; the consumer
 * reads the whole 64-byte first line of the slot in one coalesced load and
 * accepts it when the stamp matches. We rely on a 64-byte aligned line read by
 * one warp instruction being served as one snapshot of the host cache line
 * (what mscclpp's FIFO and NCCL's LL128 rely on over their links); lines past
 * the first are re-read after the stamp is seen. `head`/`tail` remain for
 * batching in the staging placement, where reading device memory is cheap.
 *
 * No read-modify-write atomics on this memory: PCIe atomics to host memory are
 * not atomic on x86 hosts (hostNativeAtomicSupported = 0). Loads, stores and
 * fences only. */
#ifndef GB_RING_H
#define GB_RING_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define GB_HD __host__ __device__ __forceinline__
#else
#define GB_HD static inline
#endif

/* Handler payloads (in and out) start 16-byte aligned and out_cap is a
 * multiple of 16: slots are multiples of 16 bytes after a 32-byte header, in
 * 16-byte-aligned rings or shared-memory copies. Telling the compiler turns
 * byte-wise memcpy into word loads and stores (on the GPU, each byte of
 * shared memory is an instruction on the round trip's path). */
#define GB_PAYLOAD_ALIGN 16
#define GB_ALIGNED(p) __builtin_assume_aligned((p), GB_PAYLOAD_ALIGN)

#if defined(__cplusplus)
#define GB_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define GB_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define GB_LINE 128        /* separate lines for fields written by different sides */
#define GB_SLOT_HDR_SIZE 32
#define GB_SLOT_MIN 64     /* a slot is at least one 64-byte line */
#define GB_SNAPSHOT 64     /* bytes of a slot trusted from the stamp's read */

/* Slot header, 32 bytes. `seq` is last so that a writer can lay down the whole
 * slot first and publish it with one 4-byte store. */
typedef struct gb_slot_hdr {
    uint64_t key;    /* grain key (which activation) */
    uint64_t corr;   /* correlation id, copied from request to reply */
    uint16_t type;   /* message type (grain-specific, or GB_MSG_* below) */
    uint16_t status; /* replies: gb_slot_status; requests: 0, GB_REQ_LARGE, GB_REQ_ANSWERED, or the
                      * status to refuse it with (activation.c) */
    uint32_t len;    /* payload bytes following the header */
    uint32_t aux;    /* replies: grain-specific small value (e.g. the grain's message count) */
    uint32_t seq;    /* stamp: gb_stamp(position); written last */
} gb_slot_hdr_t;

GB_STATIC_ASSERT(sizeof(gb_slot_hdr_t) == GB_SLOT_HDR_SIZE, "slot header is 32 bytes");
GB_STATIC_ASSERT(offsetof(gb_slot_hdr_t, seq) == 28, "seq is the header's last word");

/* The stamp that marks slot contents as written for position pos. Any value
 * other than gb_stamp(pos) (in particular gb_stamp(pos - cap), what the slot held
 * one lap earlier) means "not yet". Never equal for pos and pos - cap since
 * cap < 2^32. */
GB_HD uint32_t gb_stamp(uint64_t pos) { return (uint32_t)pos + 1u; }

/* Reserved message types, handled by the dispatch loop for every grain type. */
enum {
    GB_MSG_DEACTIVATE_KEY = 0xFF00, /* free this grain's state slot */
    GB_MSG_TEST_FAULT = 0xFF7F,     /* test hook: write through a bad pointer (needs test hooks on) */
};

/* Reply status written by the kernel. Values match proto Status where they overlap. */
typedef enum gb_slot_status {
    GB_SLOT_OK = 0,
    GB_SLOT_UNKNOWN_MESSAGE_TYPE = 3,
    GB_SLOT_TOO_LARGE = 4,
    GB_SLOT_GRAIN_TABLE_FULL = 8, /* proto STATUS_BUSY: no room for another activation */
    GB_SLOT_HANDLER_ERROR = 14,
    GB_SLOT_NOT_ACTIVE = 15, /* deactivate of a key with no activation */
    /* proto STATUS_BUSY (the bridge maps it): a new key needs room that only
     * an eviction could make, and the store of evicted states is at its bound
     * (grains.max_evicted_kb; activation.c) */
    GB_SLOT_EVICTED_FULL = 0x108,
    /* Messages between grains (mail.h). A handler sent to a target index its
     * type does not declare (proto STATUS_UNDELIVERABLE), or its messages
     * and reply do not fit its out buffer (proto STATUS_TOO_LARGE). */
    GB_SLOT_BAD_TARGET = 0x110,
    GB_SLOT_MAIL_FULL = 0x111,
    /* What a handler returns after gb_grain_forward: no reply now, the
     * forward's target answers the caller. Never seen by a client. */
    GB_SLOT_FORWARDED = 0x112,
    /* A reply that carries the turn's messages (mail.h). Never seen by a client. */
    GB_SLOT_MAIL = 0x113,
    /* Device links (device/link.h). A turn whose forward left by a link:
     * no reply in its slot, the forward's last grain writes one there.
     * Never seen by the host. */
    GB_SLOT_LINKED = 0x114,
    /* A forward that waited in a link past messaging.hold_ms while its
     * target was deactivated (proto STATUS_UNDELIVERABLE). */
    GB_SLOT_LINK_HELD = 0x115,
    /* A forward whose target's kernel was terminated while it was in the
     * link, or as it entered (proto STATUS_UNDELIVERABLE). */
    GB_SLOT_LINK_STOPPED = 0x116,
} gb_slot_status;

/* A request's status: its payload is a gb_large_desc_t (detail/large_payload.h). */
#define GB_REQ_LARGE 1u
/* A request's status: the host carried it out before publishing it (a
 * deactivation of an evicted grain drops its state in host memory,
 * activation.c); the kernel answers it OK and touches no state. */
#define GB_REQ_ANSWERED 2u

/* Why a kernel (or cpu worker) stopped. */
typedef enum gb_exit_reason {
    GB_EXIT_NONE = 0,      /* still running, or never launched */
    GB_EXIT_TERMINATED,    /* should_terminate was seen */
    GB_EXIT_BUDGET_SPENT,  /* relaunch: max_messages_per_launch reached */
    GB_EXIT_INPUT_EMPTY,   /* relaunch: drained everything */
    GB_EXIT_OUTPUT_FULL,   /* relaunch: no room for replies (host drains first) */
    GB_EXIT_ERROR,         /* a CUDA error; see last_error */
} gb_exit_reason;

/* Test hooks, in gb_control_t.test_flags. */
enum {
    GB_TEST_SKIP_HEARTBEAT = 1u << 0, /* kernel never beats: exercises the heartbeat deadline */
    GB_TEST_ALLOW_FAULT = 1u << 1,    /* GB_MSG_TEST_FAULT is honoured */
};

/* The control block: one per ring kernel, at the start of its region. The host
 * writes the first line, the kernel the second, so neither side's writes bounce
 * the other's line. Status reads are plain loads: never a CUDA call.
 * Host code reads and writes its fields with GB_CTL_LOAD / GB_CTL_STORE. */
typedef struct gb_control {
    /* host -> kernel */
    volatile int32_t is_active;        /* 0: leave messages queued, process none */
    volatile int32_t should_terminate; /* 1: exit at the next iteration */
    volatile uint32_t test_flags;      /* GB_TEST_* */
    uint32_t _pad0[GB_LINE / 4 - 3];
    /* kernel -> host */
    volatile int32_t has_terminated; /* 1 once the kernel left its loop */
    volatile int32_t exit_reason;    /* gb_exit_reason */
    volatile int32_t last_error;     /* CUDA error code seen by the kernel side, 0 if none */
    volatile int32_t active_seen;    /* the is_active value the kernel last acted on */
    volatile uint64_t heartbeat;     /* bumped every iteration (test hook can suppress) */
    volatile uint64_t processed;     /* messages handled (replies written), all lanes */
    volatile uint64_t errors;        /* replies with a non-OK status */
    volatile uint64_t iterations;    /* dispatch windows run */
    volatile uint64_t launches;      /* kernel launches (1 for persistent) */
    volatile uint64_t consumed;      /* requests taken from the input ring (= next position) */
    uint64_t _pad2[(GB_LINE - 64) / 8];
} gb_control_t;

/* Control-block fields are shared between host threads too (the cpu backend's
 * workers, the server's status reads), so host code accesses them as C11-model
 * atomics: acquire loads and release stores, plain moves on x86, and visible
 * to ThreadSanitizer. Device code keeps volatile accesses, what the kernels'
 * own ld/st helpers (ldst.cuh) do. */
#if defined(__CUDA_ARCH__)
#define GB_CTL_LOAD(p) (*(p))
#define GB_CTL_STORE(p, v) ((void)(*(p) = (v)))
#else
#define GB_CTL_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define GB_CTL_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#endif

GB_STATIC_ASSERT(sizeof(gb_control_t) == 2 * GB_LINE, "control block is two lines");
GB_STATIC_ASSERT(offsetof(gb_control_t, has_terminated) == GB_LINE, "kernel line starts at 128");

/* Ring indices, each on its own line. head: requests published (host writes);
 * out_head: replies published (kernel writes). Used where the stamp is not
 * enough: staging placement (copies land as a batch, then head) and relaunch
 * bookkeeping. */
typedef struct gb_ring_indices {
    volatile uint64_t in_head;
    uint64_t _pad0[GB_LINE / 8 - 1];
    volatile uint64_t out_head;
    uint64_t _pad1[GB_LINE / 8 - 1];
} gb_ring_indices_t;

GB_STATIC_ASSERT(sizeof(gb_ring_indices_t) == 2 * GB_LINE, "indices are two lines");

/* Geometry of a region. */
typedef struct gb_ring_geom {
    uint32_t cap;       /* slots per ring, power of two */
    uint32_t slot_size; /* bytes per slot, power of two >= GB_SLOT_MIN */
} gb_ring_geom_t;

GB_HD size_t gb_region_ctl_off(void) { return 0; }
GB_HD size_t gb_region_idx_off(void) { return sizeof(gb_control_t); }
GB_HD size_t gb_region_in_off(void) { return sizeof(gb_control_t) + sizeof(gb_ring_indices_t); }
GB_HD size_t gb_region_out_off(gb_ring_geom_t g) {
    return gb_region_in_off() + (size_t)g.cap * g.slot_size;
}
/* The rings' end; the large area (its size is the host's business) follows. */
GB_HD size_t gb_region_size(gb_ring_geom_t g) {
    return gb_region_out_off(g) + (size_t)g.cap * g.slot_size;
}
GB_HD size_t gb_region_large_off(gb_ring_geom_t g) { return gb_region_size(g); }

GB_HD gb_slot_hdr_t *gb_slot_at(unsigned char *ring, gb_ring_geom_t g, uint64_t pos)
{
    return (gb_slot_hdr_t *)(ring + (size_t)(pos & (g.cap - 1)) * g.slot_size);
}

GB_HD unsigned char *gb_slot_payload(gb_slot_hdr_t *s) { return (unsigned char *)s + GB_SLOT_HDR_SIZE; }

GB_HD uint32_t gb_slot_payload_cap(gb_ring_geom_t g) { return g.slot_size - GB_SLOT_HDR_SIZE; }

#endif
