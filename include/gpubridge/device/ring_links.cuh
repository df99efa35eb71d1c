/* Device links, the target's side: a ring kernel's warp 0 takes messages
 * from its links (device/link.cuh says how, link.h what lives where). */
#ifndef GB_DEVICE_RING_LINKS_CUH
#define GB_DEVICE_RING_LINKS_CUH

#include "gpubridge/detail/dispatch.h"
#include "gpubridge/device/link.cuh"

/* Lane 0: the message at link k's tail as a request: runs its handler (or,
 * expired, refuses it) and answers its caller, unless its turn forwarded it
 * on by a link. Inlined, as gbk_link_close is: a reference to the kernel's
 * arguments handed to a function that is not makes every ring kernel, links
 * or not, copy them to local memory (a 480-byte frame and some 200 bytes of
 * spills in the echo kernel's loop, against none). */
template <typename G>
static __device__ __forceinline__ void gbk_link_run(gb_kargs_t &a, gb_link_cache_t *lc, unsigned char *s_in,
                                                 unsigned char *s_out, uint32_t S, uint32_t k, unsigned long long tail,
                                                 bool expire, uint32_t test, uint4 o0, uint4 o1)
{
    gb_link_t *L = a.link_in[k];
    gb_link_turn_t lt;
    const uint4 o[2] = {o0, o1};
    memcpy(&lt.origin, o, sizeof lt.origin);
    lt.out = lc->out;
    lt.cache = lc;
    lt.closed = gbk_link_closed(lc, gbi_n_targets<G>::value);
    lt.n_devs = a.n_devs;
    lt.dev = a.dev;
    lt.max_hops = a.max_hops;
    lt.self = a.self;
    const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)s_in;
    gb_slot_hdr_t oh;
    if (expire) {
        oh.key = h->key, oh.type = h->type, oh.status = GB_SLOT_LINK_HELD, oh.len = 0, oh.aux = 0;
    } else {
        const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
        gbi_dispatch_one<G>(&ctx, &a.tab, gb_grain_lane(h->key, a.tab.lanes), h, s_in + GB_SLOT_HDR_SIZE, &oh,
                            s_out + GB_SLOT_HDR_SIZE, S - GB_SLOT_HDR_SIZE, test, &lt);
    }
    if (oh.status != GB_SLOT_LINKED)
        gbk_link_answer(lt.origin, a.self, oh, s_out + GB_SLOT_HDR_SIZE, S - GB_SLOT_HDR_SIZE);
    /* The slot may be reused: a relaxed store, since every read of it has
     * returned (its values are in shared memory and registers). */
    gbk_st_relaxed_gpu(&L->tail, tail + 1);
    if (expire)
        st_volatile(&L->host->refused, (uint64_t)atomicAdd(&L->refused, 1ull) + 1);
}

/* Warp 0, one pass over the links: takes one message from each ready link
 * (active), or refuses those that waited past messaging.hold_ms (not
 * active). s_in / s_out: a slot's room each in shared memory, free between
 * windows. Returns whether it took any. fence: the host may have rewritten
 * the activation table since the last dispatch (see lone_read). */
template <typename G>
static __device__ __forceinline__ bool gbk_link_step(gb_kargs_t &a, gb_link_cache_t *lc, unsigned char *s_in,
                                                     unsigned char *s_out, uint32_t S, unsigned long long &ltail,
                                                     bool active, uint32_t &fence, uint32_t test)
{
    const uint32_t lane = threadIdx.x;
    uint32_t ready = gbk_link_ready(a, ltail);
    if (!ready)
        return false;
    if (active && fence) {
        __threadfence_system();
        fence = 0;
    }
    bool took = false;
    while (ready) {
        const uint32_t k = __ffs(ready) - 1;
        ready &= ready - 1;
        const unsigned long long tail = __shfl_sync(0xffffffffu, ltail, k);
        const unsigned char *slot = gbk_link_slot(a.link_in[k], tail);
        bool expire = false;
        if (!active) {
            const uint64_t since = gbk_ld_relaxed_gpu((const unsigned long long *)(slot + offsetof(gb_link_origin_t, since_ns)));
            expire = __shfl_sync(0xffffffffu, gbk_now_ns(), 0) - since > a.hold_ns; /* warp-uniform */
            if (!expire)
                continue; /* deactivated: it waits */
        }
        /* The whole slot in one round of loads (strong, GPU scope: it was written
         * from another SM, and this SM's L1 may hold the lap before): the
         * origin into lanes 0 and 1, the request into shared memory. */
        uint4 o0 = make_uint4(0, 0, 0, 0), o1 = o0;
        const uint32_t chunks = (uint32_t)(sizeof(gb_link_origin_t) + S) / 16;
        for (uint32_t c = lane; c < chunks; c += 32) {
            const uint4 v = gbk_ld_relaxed_gpu_v4(slot + c * 16);
            if (c < 2)
                (c == 0 ? o0 : o1) = v;
            else
                *(uint4 *)(s_in + (c - 2) * 16) = v;
        }
        o1.x = __shfl_sync(0xffffffffu, o1.x, 1), o1.y = __shfl_sync(0xffffffffu, o1.y, 1);
        o1.z = __shfl_sync(0xffffffffu, o1.z, 1), o1.w = __shfl_sync(0xffffffffu, o1.w, 1);
        __syncwarp();
        if (lane == 0)
            gbk_link_run<G>(a, lc, s_in, s_out, S, k, tail, expire, test, o0, o1);
        __syncwarp();
        if (lane == k)
            ltail++;
        took = true;
    }
    return took;
}

/* Warp 0, lane k: link k's count of messages taken onto its host line, for
 * telemetry. A PCIe write, so never between the hops of a busy link: the
 * next forward's release fence would wait for it. */
static __device__ __forceinline__ void gbk_link_publish(const gb_kargs_t &a, unsigned long long ltail)
{
    if (threadIdx.x < a.n_link_in)
        st_volatile(&a.link_in[threadIdx.x]->host->taken, (uint64_t)ltail);
}

/* After link messages: warp 0 polls the links alone (L2 loads, no PCIe
 * read of the request ring) while they keep bringing messages, so that a
 * message between grains waits for no PCIe round. It stops after
 * GBK_LINK_IDLE_POLLS polls without one (some tens of microseconds: a poll
 * is an L2 round trip), or GBK_LINK_SPIN_POLLS in all, whichever comes
 * first: a client's request then waits at most that long for its poll.
 * Counted in polls, not read from a clock: no clock read on the hop's path. */
#define GBK_LINK_IDLE_POLLS 64u
#define GBK_LINK_SPIN_POLLS 512u
template <typename G>
static __device__ __forceinline__ void gbk_link_spin(gb_kargs_t &a, gb_link_cache_t *lc, unsigned char *s_in,
                                                     unsigned char *s_out, uint32_t S, unsigned long long &ltail,
                                                     uint32_t &fence, uint32_t test)
{
    for (uint32_t polls = 0, idle = 0; polls < GBK_LINK_SPIN_POLLS && idle < GBK_LINK_IDLE_POLLS; polls++)
        idle = gbk_link_step<G>(a, lc, s_in, s_out, S, ltail, true, fence, test) ? 0 : idle + 1;
    gbk_link_publish(a, ltail);
}

/* The kernel's link cache (gb_link_cache_t), from its links as it starts. */
static __device__ __forceinline__ void gbk_link_cache_init(const gb_kargs_t &a, gb_link_cache_t *lc)
{
    const uint32_t t = threadIdx.x;
    if (t < GB_MAIL_MAX_TARGETS) {
        gb_link_t *L = a.n_devs ? a.link_out[t] : NULL;
        lc->out[t] = L;
        lc->cap[t] = L ? L->cap : 0;
        lc->pl_cap[t] = L ? L->pl_cap : 0;
        lc->head[t] = L ? gbk_ld_relaxed_gpu(&L->head) : 0; /* GB_LINK_CLOSED included */
        lc->tail[t] = L ? gbk_ld_relaxed_gpu(&L->tail) : 0;
        /* held counts from the host's delivered count: none outstanding */
        lc->held[t] = lc->seen[t] = L ? ld_volatile((volatile uint64_t *)&L->host->delivered) : 0;
    }
}

/* Warp 0, as a kernel told to stop leaves: closes its links. Every slot of
 * a link's lap ahead of its tail either gets a tombstone, and its sender
 * (now or later) fails to stamp it and takes the host path, or holds a
 * stamp, and its message is answered undeliverable here
 * (GB_SLOT_LINK_STOPPED). No stamp lands after that: the claims a sender
 * can make all fall in that lap. The lanes share the slots. */
static __device__ __forceinline__ void gbk_link_close(gb_kargs_t &a)
{
    const uint32_t lane = threadIdx.x;
    for (uint32_t k = 0; k < a.n_link_in; k++) {
        gb_link_t *L = a.link_in[k];
        if (lane == 0)
            atomicOr(&L->head, GB_LINK_CLOSED); /* gbk_link_cache_init of a sender launched after */
        /* lane 0 stored the tail (gbk_link_run) */
        const unsigned long long tail = __shfl_sync(0xffffffffu, lane == 0 ? L->tail : 0ull, 0);
        uint32_t answered = 0;
        for (unsigned long long p = tail + lane; p < tail + L->cap; p += 32) {
            unsigned char *slot = gbk_link_slot(L, p);
            gb_slot_hdr_t *hs = (gb_slot_hdr_t *)(slot + sizeof(gb_link_origin_t));
            if (atomicCAS(&hs->seq, gbk_link_prev(p, L->cap), gbk_link_tomb(p)) != gb_stamp(p))
                continue; /* not stamped (now tombstoned): its sender, if any, takes the host path */
            __threadfence(); /* stamped: its sender released the slot before */
            gb_slot_hdr_t oh;
            oh.key = ld_volatile(&hs->key);
            oh.type = ld_volatile(&hs->type);
            oh.status = GB_SLOT_LINK_STOPPED;
            oh.len = 0;
            oh.aux = 0;
            uint4 o[2] = {ld_volatile_v4(slot), ld_volatile_v4(slot + 16)};
            gb_link_origin_t org;
            memcpy(&org, o, sizeof org);
            gbk_link_answer(org, a.self, oh, NULL, 0);
            answered++;
        }
        for (uint32_t d = 16; d > 0; d /= 2)
            answered += __shfl_xor_sync(0xffffffffu, answered, d);
        if (lane == 0) {
            st_volatile(&L->host->refused, (uint64_t)(atomicAdd(&L->refused, (unsigned long long)answered) + answered));
            st_volatile(&L->host->taken, (uint64_t)(tail + answered));
        }
        __syncwarp();
    }
}

#endif
