/* Device links, the kernels' side (link.h says what lives where).
 *
 * Sender: at the end of a turn whose only message is a forward, the thread
 * that ran the handler tries the link (gbk_link_forward); when it cannot,
 * every message of the turn takes the host path, those of linked pairs
 * marked GB_MAIL_HELD (gbk_link_hold).
 *
 * Target (ring_links.cuh): warp 0 of the target's ring kernel polls its
 * links beside its request ring (gbk_link_ready, one L2 load a link) and
 * takes, from one ready link a pass (gbk_link_step), the messages at its
 * tail up to the first whose key repeats an earlier one's (at most 32, and
 * the window's size): their handlers run on as many lanes at once, so a
 * grain still handles one message at a time, in link order, and each reply
 * goes into its caller's slot. While links bring messages it polls them
 * alone, with no PCIe read (gbk_link_spin). Only warp 0 ever takes from
 * links, between dispatch windows, so link turns never run beside a
 * window's. */
#ifndef GB_DEVICE_LINK_CUH
#define GB_DEVICE_LINK_CUH

#include <cuda_runtime.h>

#include "gpubridge/device/ldst.cuh"
#include "gpubridge/device/link.h"
#include "gpubridge/mail.h"

static __device__ __forceinline__ uint64_t gbk_now_ns(void)
{
    uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

/* GPU scope: both ends of a link are on this GPU. ld.volatile and
 * st.volatile are system-scope (relaxed.sys) and cost more; the link's own
 * words and slots need only the GPU's L2 to agree. */
static __device__ __forceinline__ unsigned long long gbk_ld_relaxed_gpu(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(__cvta_generic_to_global(p)) : "memory");
    return v;
}
static __device__ __forceinline__ void gbk_st_relaxed_gpu(unsigned long long *p, unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "l"(v) : "memory");
}
static __device__ __forceinline__ uint4 gbk_ld_relaxed_gpu_v4(const void *p)
{
    uint4 v;
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(__cvta_generic_to_global(p))
                 : "memory");
    return v;
}
static __device__ __forceinline__ uint32_t gbk_ld_relaxed_gpu32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(__cvta_generic_to_global(p)) : "memory");
    return v;
}

/* Compare-and-swap with release at GPU scope: returns the old value. */
static __device__ __forceinline__ uint32_t gbk_cas_release_gpu32(uint32_t *p, uint32_t expect, uint32_t v)
{
    uint32_t old;
    asm volatile("atom.release.gpu.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old)
                 : "l"(__cvta_generic_to_global(p)), "r"(expect), "r"(v)
                 : "memory");
    return old;
}

/* What a link slot's stamp holds before position pos is written there: the
 * stamp of the lap before, or the zero it was allocated with. */
static __device__ __forceinline__ uint32_t gbk_link_prev(unsigned long long pos, uint32_t cap)
{
    return pos < cap ? 0u : gb_stamp(pos - cap);
}

/* A slot the target closed before its sender stamped it: neither the stamp
 * of pos nor that of the lap before (cap < 2^31). */
static __device__ __forceinline__ uint32_t gbk_link_tomb(unsigned long long pos)
{
    return gb_stamp(pos) ^ 0x80000000u;
}

static __device__ __forceinline__ unsigned char *gbk_link_slot(const gb_link_t *L, unsigned long long pos)
{
    return L->slots + (size_t)(pos & (L->cap - 1)) * L->slot_size;
}

/* Whether the host has delivered every message pair t sent by the host
 * path (held of them), so that a forward may overtake none: a PCIe read,
 * only while some are outstanding. */
static __device__ __noinline__ bool gbk_link_caught_up(const gb_link_t *L, gb_link_cache_t *c, uint32_t t,
                                                        unsigned long long held)
{
    const unsigned long long d = ld_volatile((volatile uint64_t *)&L->host->delivered);
    atomicMax(&c->seen[t], d);
    return held == d;
}

/* One thread: writes reply oh (payload in pl) of ring `self` into the
 * caller's slot that origin o names, and releases it to the host. */
static __device__ __forceinline__ void gbk_link_answer(const gb_link_origin_t &o, uint32_t self, gb_slot_hdr_t oh,
                                                       const unsigned char *pl, uint32_t pl_cap)
{
    const uint32_t len = min(oh.len, pl_cap); /* a longer claim stays in the header: the host refuses it */
    gb_slot_hdr_t *to = (gb_slot_hdr_t *)(uintptr_t)o.out_slot;
    oh.status = gb_slot_from(self, oh.status);
    oh.corr = o.pos;
    oh.seq = gb_stamp(o.pos) - 1u; /* "not yet" until the stamp below */
    *to = oh;
    for (uint32_t c = 0; c < (len + 15) / 16; c++)
        ((uint4 *)(to + 1))[c] = ((const uint4 *)pl)[c];
    st_release_sys(&to->seq, gb_stamp(o.pos));
}

/* The closed hints (gb_link_t.closed) of a sending type's n links, as a
 * mask, for gb_link_turn_t.closed: loaded as a turn begins (GPU scope, from
 * L2), so that the forward at its end waits for no load. A hint, set by the
 * host before it stops a target; the stamp's compare-and-swap decides. */
static __device__ __forceinline__ uint32_t gbk_link_closed(const gb_link_cache_t *c, uint32_t n)
{
    uint32_t mask = 0;
    for (uint32_t t = 0; t < n; t++)
        if (c->out[t] && gbk_ld_relaxed_gpu32((const uint32_t *)&c->out[t]->closed))
            mask |= 1u << t;
    return mask;
}

/* One thread: reserves up to `want` positions of link t from its head on
 * (*at, the first); returns how many, 0 when the link is full or closed. */
static __device__ __forceinline__ uint32_t gbk_link_reserve(gb_link_t *L, gb_link_cache_t *c, uint32_t t,
                                                            uint32_t want, unsigned long long *at)
{
    unsigned long long pos = c->head[t], tail = c->tail[t];
    while (!(pos & GB_LINK_CLOSED)) { /* closed: its target stopped; the host path knows it */
        if (pos - tail + want > c->cap[t]) {
            /* the target's tail: it stores it once its reads of the slot have returned */
            tail = gbk_ld_relaxed_gpu(&L->tail);
            atomicMax(&c->tail[t], tail);
        }
        const unsigned long long room = pos - tail >= c->cap[t] ? 0ull : c->cap[t] - (pos - tail);
        const uint32_t n = (uint32_t)min((unsigned long long)want, room);
        if (!n)
            return 0; /* full: the host path, where the outbox waits */
        const unsigned long long was = atomicCAS(&c->head[t], pos, pos + n);
        if (was == pos) {
            *at = pos;
            return n;
        }
        pos = was;
    }
    return 0;
}

/* Claims the next position of link t for this thread: *pos, or false when
 * the link is full or closed (the host path then). Several threads of the
 * kernel may forward at once (the lanes of a link pass, a window's rounds),
 * so the claim is a compare-and-swap on the kernel's head in shared memory;
 * the lanes of a warp that forward into one link at the same time claim
 * together, through their lowest lane: one lane at a time would leave the
 * others behind it waiting at their stamps' release, one after another. */
static __device__ __forceinline__ bool gbk_link_claim(gb_link_t *L, gb_link_cache_t *c, uint32_t t,
                                                      unsigned long long *pos)
{
    const uint32_t lane = threadIdx.x & 31u, active = __activemask();
    if (active == 1u << lane) /* alone (a lone request or link message) */
        return gbk_link_reserve(L, c, t, 1, pos) == 1;
    const uint32_t group = __match_any_sync(active, t), leader = __ffs(group) - 1;
    unsigned long long at = 0;
    uint32_t granted = 0;
    if (lane == leader)
        granted = gbk_link_reserve(L, c, t, __popc(group), &at);
    at = __shfl_sync(group, at, leader);
    granted = __shfl_sync(group, granted, leader);
    const uint32_t rank = __popc(group & ((1u << lane) - 1u));
    *pos = at + rank;
    return rank < granted;
}

/* The turn's lone forward by its link, if the link takes it: returns true
 * when it left (the turn then answers GB_SLOT_LINKED). The claim is a
 * compare-and-swap on the kernel's own head, in shared memory (only this
 * block sends into the link); the stamp's compare-and-swap decides against
 * a target that closed the link meanwhile. */
static __device__ __forceinline__ bool gbk_link_forward(const gb_link_turn_t *lt, const gb_grain_mail_t *m)
{
    const gb_mail_msg_t *msg = (const gb_mail_msg_t *)(m->top - m->used);
    const uint32_t t = msg->target; /* < n_targets: gb_mail_put checked it */
    gb_link_t *L = lt->out[t];
    gb_link_cache_t *c = lt->cache;
    if (!L || (lt->closed >> t & 1u) || msg->len > c->pl_cap[t] || lt->origin.out_cap < c->pl_cap[t] ||
        lt->origin.hops + 1 > lt->max_hops || gb_link_device_of_key(msg->key, lt->n_devs) != lt->dev)
        return false;
    const unsigned long long held = c->held[t];
    if (held != c->seen[t] && !gbk_link_caught_up(L, c, t, held))
        return false;
    unsigned long long pos;
    if (!gbk_link_claim(L, c, t, &pos))
        return false;
    /* Origin and header (all but the stamp), the record, then the stamp. */
    union {
        struct {
            gb_link_origin_t o;
            gb_slot_hdr_t h;
        } s;
        uint4 v[4];
    } head;
    head.s.o = lt->origin;
    head.s.o.hops++;
    head.s.o.since_ns = gbk_now_ns();
    head.s.h.key = msg->key;
    head.s.h.corr = 0;
    head.s.h.type = msg->type;
    head.s.h.status = 0;
    head.s.h.len = msg->len;
    head.s.h.aux = 0;
    head.s.h.seq = 0;
    uint4 *dst = (uint4 *)gbk_link_slot(L, pos);
    for (int k = 0; k < 3; k++)
        dst[k] = head.v[k];
    /* the header's last 16 bytes but its stamp: a tombstone there must stay */
    *(uint2 *)&dst[3] = make_uint2(head.v[3].x, head.v[3].y);
    ((uint32_t *)&dst[3])[2] = head.v[3].z;
    const uint4 *src = (const uint4 *)(msg + 1); /* records are 16-aligned in the mail */
    for (uint32_t k = 0; k < (msg->len + 15) / 16; k++)
        dst[4 + k] = src[k];
    /* The stamp, from the value the slot held one lap earlier: the target,
     * as it stops, swaps a tombstone in first for every slot not yet
     * stamped, so exactly one of the two wins. The target sees the stamp as
     * it lands; only this thread waits for the answer. */
    const uint32_t prev = gbk_link_prev(pos, c->cap[t]);
    if (gbk_cas_release_gpu32(&((gb_slot_hdr_t *)(dst + 2))->seq, prev, gb_stamp(pos)) != prev) {
        atomicOr(&c->head[t], GB_LINK_CLOSED); /* tombstoned: closed, for every later forward too */
        return false;
    }
    return true;
}

/* The turn's messages take the host path: those of a linked pair are marked
 * held and counted, so the pair's later forwards wait for their delivery.
 * Returns the hops the mail's trailer carries. Its arguments are values: a
 * pointer to the turn or the mail would keep both in local memory on every
 * turn, this rare path or not. */
static __device__ __noinline__ uint16_t gbk_link_hold(gb_link_t *const *out, gb_link_cache_t *c, uint32_t n_devs,
                                                      uint32_t dev, uint32_t hops, unsigned char *top, uint32_t used,
                                                      uint32_t n_targets)
{
    for (uint32_t at = 0; at < used;) {
        gb_mail_msg_t *msg = (gb_mail_msg_t *)(top - used + at);
        gb_link_t *L = msg->target < n_targets ? out[msg->target] : NULL;
        if (L && gb_link_device_of_key(msg->key, n_devs) == dev) {
            msg->flags |= GB_MAIL_HELD;
            atomicAdd(&c->held[msg->target], 1ull);
        }
        at += 16 + gb_mail_pad16(msg->len);
    }
    return (uint16_t)min(hops, 0xFFFFu);
}

/* Warp 0: which of the kernel's links have a message at their tail (bit k:
 * link k). Lane k keeps link k's tail in ltail. A relaxed load at GPU scope,
 * not an acquire: an acquire drops the SM's L1 (CCTL.IVALL), and every load
 * of the turn after it (the link's fields, the grain table) would go to L2.
 * The slot's own loads are strong (relaxed.gpu, served by L2), issued only
 * once the stamp's value is used, and the sender released the slot to L2
 * before its stamp. */
static __device__ __forceinline__ uint32_t gbk_link_ready(const gb_kargs_t &a, unsigned long long ltail)
{
    const uint32_t lane = threadIdx.x;
    bool ready = false;
    if (lane < a.n_link_in) {
        const gb_link_t *L = a.link_in[lane];
        const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(gbk_link_slot(L, ltail) + sizeof(gb_link_origin_t));
        ready = gbk_ld_relaxed_gpu32(&h->seq) == gb_stamp(ltail);
    }
    return __ballot_sync(0xffffffffu, ready);
}


#endif
