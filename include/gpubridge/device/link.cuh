/* Device links, the kernels' side (link.h says what lives where).
 *
 * Sender: at the end of a turn whose only message is a forward, the thread
 * that ran the handler tries the link (gbk_link_forward); when it cannot,
 * every message of the turn takes the host path, those of linked pairs
 * marked GB_MAIL_HELD (gbk_link_hold).
 *
 * Target (ring_links.cuh): warp 0 of the target's ring kernel polls its
 * links beside its request ring (gbk_link_ready, one L2 load a link) and
 * takes one message from each ready link per pass (gbk_link_step): the
 * handler runs on lane 0, as a lone request's does, so a grain still
 * handles one message at a time, and the reply goes into the caller's slot.
 * While links bring messages it polls them alone, with no PCIe read
 * (gbk_link_spin). Only warp 0 ever takes from links, between dispatch
 * windows, so link turns never run beside a window's. */
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
static __device__ __forceinline__ uint32_t gbk_ld_acquire_gpu32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(__cvta_generic_to_global(p)) : "memory");
    return v;
}
static __device__ __forceinline__ void gbk_st_release_gpu(unsigned long long *p, unsigned long long v)
{
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "l"(v) : "memory");
}
static __device__ __forceinline__ void gbk_st_release_gpu32(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "r"(v) : "memory");
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

/* The turn's lone forward by its link, if the link takes it: returns true
 * when it left (the turn then answers GB_SLOT_LINKED). The claim is one
 * compare-and-swap on head from the position the kernel expects (a failure
 * returns the true head: another thread of the kernel claimed, or the
 * target closed the link). */
static __device__ __noinline__ bool gbk_link_forward(const gb_link_turn_t *lt, const gb_grain_mail_t *m)
{
    const gb_mail_msg_t *msg = (const gb_mail_msg_t *)(m->top - m->used);
    const uint32_t t = msg->target; /* < n_targets: gb_mail_put checked it */
    gb_link_t *L = lt->out[t];
    if (!L || L->closed || msg->len > L->pl_cap || lt->origin.out_cap < L->pl_cap ||
        lt->origin.hops + 1 > lt->max_hops || gb_link_device_of_key(msg->key, lt->n_devs) != lt->dev)
        return false;
    gb_link_cache_t *c = lt->cache;
    const unsigned long long held = c->held[t];
    if (held != c->seen[t] && !gbk_link_caught_up(L, c, t, held))
        return false;
    unsigned long long pos = c->head[t], tail = c->tail[t];
    for (;;) { /* several threads of a window may forward at once */
        if (pos & GB_LINK_CLOSED)
            return false; /* its target stopped: the host path, which knows it */
        if (pos - tail >= L->cap) {
            /* the target's tail: it stores it once its reads of the slot have returned */
            tail = gbk_ld_relaxed_gpu(&L->tail);
            atomicMax(&c->tail[t], tail);
            if (pos - tail >= L->cap)
                return false; /* full: the host path, where the outbox waits */
        }
        const unsigned long long was = atomicCAS(&L->head, pos, pos + 1);
        if (was == pos)
            break;
        pos = was;
    }
    atomicMax(&c->head[t], pos + 1);
    /* Origin and header as four 16-byte stores (the stamp 0 for now), the
     * record, then the stamp with release. */
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
    for (int k = 0; k < 4; k++)
        dst[k] = head.v[k];
    const uint4 *src = (const uint4 *)(msg + 1); /* records are 16-aligned in the mail */
    for (uint32_t k = 0; k < (msg->len + 15) / 16; k++)
        dst[4 + k] = src[k];
    gbk_st_release_gpu32(&((gb_slot_hdr_t *)(dst + 2))->seq, gb_stamp(pos));
    return true;
}

/* The turn's messages take the host path: those of a linked pair are marked
 * held and counted, so the pair's later forwards wait for their delivery. */
static __device__ __noinline__ void gbk_link_hold(const gb_link_turn_t *lt, gb_grain_mail_t *m)
{
    m->hops = (uint16_t)min(lt->origin.hops, 0xFFFFu);
    for (uint32_t at = 0; at < m->used;) {
        gb_mail_msg_t *msg = (gb_mail_msg_t *)(m->top - m->used + at);
        gb_link_t *L = msg->target < m->n_targets ? lt->out[msg->target] : NULL;
        if (L && gb_link_device_of_key(msg->key, lt->n_devs) == lt->dev) {
            msg->flags |= GB_MAIL_HELD;
            atomicAdd(&lt->cache->held[msg->target], 1ull);
        }
        at += 16 + gb_mail_pad16(msg->len);
    }
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
