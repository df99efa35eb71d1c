/* The inline launch: a relaunch of one warp that starts with its requests in
 * hand, for the few-request launches of relaunch mode.
 *
 * A relaunched ring kernel first reads its requests across PCIe (mapped
 * placement) or has copy nodes bring a range of the ring (staging placement:
 * four copy nodes and two node updates a launch). The host already holds
 * those requests when it launches, so it puts up to GBK_INLINE_BYTES of them,
 * with their first position and count, into the kernel's parameters: one
 * kernel-node update a launch (or a plain launch with malloc staging). One
 * warp handles them (one grain's requests in order; a lone request straight
 * out of the parameter bank, several through shared memory), then:
 *   mapped:  replies into the output ring in mapped memory, fence, stamps,
 *            counters on the control line, as the ring kernel does;
 *   staging: replies (stamped) and counters into an outbox: pinned host
 *            memory mapped for the kernel where that can be had, else device
 *            memory that one fixed-size copy node brings to the host. The
 *            host moves them into the ring after the launch.
 * An inline launch handles exactly the requests it carries and reads nothing
 * of the rings, so the host knows where it ends and can queue the next ones
 * behind it (mapped placement: up to 64 in flight). It does not look at is_active or should_terminate: the host
 * launches only while active, and a control change waits for the launches in
 * flight (gbi_relaunch_control), as it does for ring kernel launches. Grain
 * state and progress (kstate) are the ring kernel's: the two kinds of launch
 * take turns on one stream.
 *
 * The requests travel in the parameters rather than in a pinned inbox that a
 * copy node brings along: a copy node of host memory slows every
 * cudaGraphLaunch by more than the parameter update costs. */
#ifndef GB_INLINE_KERNEL_H
#define GB_INLINE_KERNEL_H

#include <string.h>

#include "gpubridge/device/ring_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Request bytes one launch carries: 16 slots of 64 bytes. The parameters
 * travel with every inline launch, and a launch's latency grows with their
 * size, so they are kept few: */
#define GBK_INLINE_BYTES 1024u
/* ... and a launch of this many request bytes or fewer (a lone request of
 * up to 256 bytes) takes the small kernel, whose parameters end there. */
#define GBK_INLINE_SMALL 256u
/* Threads of the inline kernel: one warp. */
#define GBK_INLINE_THREADS 32u

/* What the inline kernel needs of the ring kernel's arguments (gb_kargs_t
 * carries links, peers and team fields it never reads). */
typedef struct gbk_inline_args {
    unsigned char *region; /* device view of the region */
    gb_kstate_t *kstate;   /* the ring kernel's progress (device memory) */
    gb_grain_table_t tab;
    gb_ring_geom_t geom;
    uint32_t flags; /* GBK_F_* */
    uint32_t _pad;
} gbk_inline_args_t;

/* The parameters of both inline kernels, before their requests. */
typedef struct __align__(16) gbk_inline_head {
    gbk_inline_args_t a;
    unsigned char *outbox; /* staging: the outbox (gbk_inline_out_t, then the replies); NULL: mapped */
    uint64_t from;         /* position of the first request */
    uint32_t n;            /* requests */
    uint32_t test_flags;   /* the control line's, as the host has them */
} gbk_inline_head_t;

/* The inline kernel's parameters: the head, then the requests slot after
 * slot. The small kernel's are a prefix of them (the host passes the same
 * bytes to either). */
typedef struct __align__(16) gbk_inline {
    gbk_inline_head_t h;
    unsigned char slots[GBK_INLINE_BYTES];
} gbk_inline_t;
typedef struct __align__(16) gbk_inline_small {
    gbk_inline_head_t h;
    unsigned char slots[GBK_INLINE_SMALL];
} gbk_inline_small_t;

static inline gbk_inline_args_t gbk_inline_args_of(const gb_kargs_t *a)
{
    gbk_inline_args_t r;
    memset(&r, 0, sizeof r);
    r.region = a->region;
    r.kstate = a->kstate;
    r.tab = a->tab;
    r.geom = a->geom;
    r.flags = a->flags;
    return r;
}

/* The head of a staging outbox: what the kernel would have written on the
 * control line. */
typedef struct gbk_inline_out {
    uint64_t processed, errors, iterations, consumed;
    int32_t exit_reason;
    int32_t _pad;
    uint64_t _pad2[3];
} gbk_inline_out_t;

GB_STATIC_ASSERT(offsetof(gbk_inline_t, slots) == sizeof(gbk_inline_head_t) &&
                     offsetof(gbk_inline_small_t, slots) == sizeof(gbk_inline_head_t),
                 "the small parameters are a prefix of the full ones");
GB_STATIC_ASSERT(sizeof(gbk_inline_head_t) % 16 == 0, "inline slots are 16-byte aligned");
GB_STATIC_ASSERT(sizeof(gbk_inline_out_t) == 64, "the outbox head is one 64-byte line");
GB_STATIC_ASSERT(sizeof(gbk_inline_t) <= 4096, "kernel parameters stay within 4 KiB");

/* Bytes of a staging outbox for launches of up to n slots of slot_size. */
#define GBK_INLINE_OUT_SIZE(n, slot_size) (sizeof(gbk_inline_out_t) + (size_t)(n) * (slot_size))

/* Requests of slot_size bytes an inline launch carries (0: slots too large). */
static inline uint32_t gbk_inline_max(uint32_t slot_size) { return GBK_INLINE_BYTES / slot_size; }

#ifdef __cplusplus
}
#endif
#endif
