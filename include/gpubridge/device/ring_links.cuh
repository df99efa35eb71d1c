/* Device links, the target's side: a ring kernel's warp 0 takes messages
 * from its links (device/link.cuh says how, link.h what lives where). */
#ifndef GB_DEVICE_RING_LINKS_CUH
#define GB_DEVICE_RING_LINKS_CUH

#include "gpubridge/detail/dispatch.h"
#include "gpubridge/device/link.cuh"
#include "gpubridge/device/profile.cuh"

/* Where warp 0 puts the link messages of one pass: up to `most` slots of
 * the window's shared memory (free between windows), SP bytes apart, each
 * request in s_in and its origin where the reply's header would go in s_out
 * (a link turn's reply header lives in registers). */
typedef struct gbk_link_room {
    unsigned char *s_in, *s_out;
    /* the grain table, in shared memory: [0] for a lone message, [1] for a
     * pass of several (gb_grain_find's concurrent mode, as in a window's
     * rounds; the lone lookup is cheaper) */
    gb_grain_table_t *tab;
    uint32_t S, SP, most;
} gbk_link_room_t;

/* One lane: message i of a pass (its request at s_in + i * SP) as a
 * request: runs its handler and answers its caller, unless its turn
 * forwarded it on by a link. Lanes of one pass run
 * at once, each on a key of its own (tab->concurrent then). Inlined, as
 * gbk_link_close is: a reference to the kernel's arguments handed to a
 * function that is not makes every ring kernel, links or not, copy them to
 * local memory (a 480-byte frame and some 200 bytes of spills in the echo
 * kernel's loop, against none). */
template <typename G>
static __device__ __forceinline__ void gbk_link_run(gb_kargs_t &a, gb_grain_table_t *tab, gb_link_cache_t *lc,
                                                    const gbk_link_room_t &R, uint32_t i, uint32_t test)
{
    unsigned char *s_in = R.s_in + (size_t)i * R.SP, *s_out = R.s_out + (size_t)i * R.SP;
    gb_link_turn_t lt;
    memcpy(&lt.origin, s_out, sizeof lt.origin);
    lt.out = lc->out;
    lt.cache = lc;
    lt.closed = gbk_link_closed(lc, gbi_n_targets<G>::value);
    lt.n_devs = a.n_devs;
    lt.dev = a.dev;
    lt.max_hops = a.max_hops;
    lt.self = a.self;
    const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)s_in;
    gb_slot_hdr_t oh;
    const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
    gbi_dispatch_one<G>(&ctx, tab, gb_grain_lane(h->key, a.tab.lanes), h, s_in + GB_SLOT_HDR_SIZE, &oh,
                        s_out + GB_SLOT_HDR_SIZE, R.S - GB_SLOT_HDR_SIZE, test, &lt);
    if (oh.status != GB_SLOT_LINKED)
        gbk_link_answer(lt.origin, a.self, oh, s_out + GB_SLOT_HDR_SIZE, R.S - GB_SLOT_HDR_SIZE);
}

/* Warp 0: link L's messages [first, n) of a pass from position tail on
 * into the room: origins into s_out, requests into s_in. Strong loads at
 * GPU scope (written from another SM, and this SM's L1 may hold the lap
 * before); each lane's load waits for the one before it, so a pass costs one
 * L2 round trip per 32 chunks of 16 bytes (a slot of 256 bytes is 18). */
static __device__ __forceinline__ void gbk_link_load(const gb_link_t *L, unsigned long long tail, uint32_t first,
                                                     uint32_t n, const gbk_link_room_t &R)
{
    const uint32_t chunks = (uint32_t)(sizeof(gb_link_origin_t) + R.S) / 16; /* a link slot's */
    for (uint32_t c = threadIdx.x + first * chunks; c < n * chunks; c += 32) {
        const uint32_t i = c / chunks, off = c - i * chunks;
        const uint4 v = gbk_ld_relaxed_gpu_v4(gbk_link_slot(L, tail + i) + off * 16);
        *(uint4 *)(off < 2 ? R.s_out + (size_t)i * R.SP + off * 16 : R.s_in + (size_t)i * R.SP + (off - 2) * 16) = v;
    }
}

/* Warp 0: the message at link L's tail into the room, and how many are
 * there from the tail on, up to R.most (1 when not `wide`). Lane i > 0
 * loads position tail + i's stamp in the same round as the first message's
 * loads: a lone message pays no second trip to L2 for the look ahead. */
static __device__ __forceinline__ uint32_t gbk_link_load_first(const gb_link_t *L, unsigned long long tail, bool wide,
                                                               const gbk_link_room_t &R)
{
    const uint32_t lane = threadIdx.x;
    const bool probe = wide && lane > 0 && lane < R.most && lane < L->cap;
    uint32_t stamp = 0;
    if (probe)
        stamp = gbk_ld_relaxed_gpu32(
            &((const gb_slot_hdr_t *)(gbk_link_slot(L, tail + lane) + sizeof(gb_link_origin_t)))->seq);
    gbk_link_load(L, tail, 0, 1, R);
    if (!wide)
        return 1;
    const bool here = lane == 0 || (probe && stamp == gb_stamp(tail + lane));
    const uint32_t gap = ~__ballot_sync(0xffffffffu, here); /* 0: all 32 lanes' messages are there */
    return gap ? (uint32_t)__ffs(gap) - 1 : 32u;
}

/* Warp 0: of messages [0, n) in the pass, the first n' whose keys differ
 * (n' >= 1): a key's later message waits for the next pass, so a grain
 * still handles one message at a time, in link order. */
static __device__ __forceinline__ uint32_t gbk_link_distinct(const gbk_link_room_t &R, uint32_t n)
{
    const uint32_t lane = threadIdx.x;
    bool again = false;
    if (lane < n) {
        const uint32_t lanes = n >= 32 ? 0xffffffffu : (1u << n) - 1u;
        const uint64_t key = ((const gb_slot_hdr_t *)(R.s_in + (size_t)lane * R.SP))->key;
        again = (__match_any_sync(lanes, key) & ((1u << lane) - 1u)) != 0;
    }
    const uint32_t cut = __ballot_sync(0xffffffffu, again);
    return cut ? (uint32_t)__ffs(cut) - 1 : n;
}

/* Warp 0, a paused kernel's pass: refuses the message at the tail of each
 * ready link that waited past messaging.hold_ms (GB_SLOT_LINK_HELD, into its
 * caller's slot); the others wait. No handler runs. Returns whether it
 * refused any. */
static __device__ __forceinline__ bool gbk_link_refuse(gb_kargs_t &a, uint32_t ready, unsigned long long &ltail)
{
    const uint32_t lane = threadIdx.x;
    const uint64_t now = __shfl_sync(0xffffffffu, gbk_now_ns(), 0);
    bool took = false;
    while (ready) {
        const uint32_t k = __ffs(ready) - 1;
        ready &= ready - 1;
        const unsigned long long tail = __shfl_sync(0xffffffffu, ltail, k);
        gb_link_t *L = a.link_in[k];
        const unsigned char *slot = gbk_link_slot(L, tail);
        const uint64_t since = gbk_ld_relaxed_gpu((const unsigned long long *)(slot + offsetof(gb_link_origin_t, since_ns)));
        if (now - since <= a.hold_ns) /* warp-uniform */
            continue;
        if (lane == 0) {
            const uint4 o[2] = {gbk_ld_relaxed_gpu_v4(slot), gbk_ld_relaxed_gpu_v4(slot + 16)};
            const uint4 hv = gbk_ld_relaxed_gpu_v4(slot + sizeof(gb_link_origin_t)); /* key, corr */
            const uint4 ht = gbk_ld_relaxed_gpu_v4(slot + sizeof(gb_link_origin_t) + 16); /* type, status, len, aux, seq */
            gb_link_origin_t org;
            memcpy(&org, o, sizeof org);
            gb_slot_hdr_t h;
            memcpy((unsigned char *)&h, &hv, 16);
            memcpy((unsigned char *)&h + 16, &ht, 16);
            gb_slot_hdr_t oh;
            oh.key = h.key, oh.type = h.type, oh.status = GB_SLOT_LINK_HELD, oh.len = 0, oh.aux = 0;
            gbk_link_answer(org, a.self, oh, NULL, 0);
            st_volatile(&L->host->refused, (uint64_t)atomicAdd(&L->refused, 1ull) + 1);
            gbk_st_relaxed_gpu(&L->tail, tail + 1); /* after the slot's loads returned (their values are used) */
        }
        __syncwarp();
        if (lane == k)
            ltail++;
        took = true;
    }
    return took;
}

/* Warp 0, one pass: takes from one ready link the messages at its tail, up
 * to R.most of distinct keys, and runs them on as many lanes at once
 * (active); a paused kernel refuses instead what waited past
 * messaging.hold_ms (gbk_link_refuse). The link is the first ready one from
 * lc->next_in on, round robin, so a busy link does not starve the others;
 * one link a pass keeps no loop's state live while handlers run
 * (registers). Returns whether it took any. fence: the host may have
 * rewritten the activation table since the last dispatch (see lone_read). */
template <typename G>
static __device__ __forceinline__ bool gbk_link_step(gb_kargs_t &a, gb_link_cache_t *lc, const gbk_link_room_t &R,
                                                     unsigned long long &ltail, bool active, uint32_t &fence,
                                                     uint32_t test)
{
    const uint32_t lane = threadIdx.x;
    const uint32_t ready = gbk_link_ready(a, ltail);
    if (!ready)
        return false;
    if (!active)
        return gbk_link_refuse(a, ready, ltail);
    if (fence) {
        __threadfence_system();
        fence = 0;
    }
    const uint32_t from = lc->next_in, later = from < 32 ? ready >> from : 0;
    const uint32_t k = later ? from + __ffs(later) - 1 : __ffs(ready) - 1;
    const unsigned long long tail = __shfl_sync(0xffffffffu, ltail, k);
    gb_link_t *L = a.link_in[k];
    uint32_t n = gbk_link_load_first(L, tail, R.most > 1, R);
    if (n > 1)
        gbk_link_load(L, tail, 1, n, R);
    __syncwarp();
    if (n > 1)
        n = gbk_link_distinct(R, n);
    if (lane < n)
        gbk_link_run<G>(a, &R.tab[n > 1], lc, R, lane, test);
    __syncwarp();
    /* The slots may be reused: a relaxed store, since every read of them
     * has returned (their values are in shared memory and registers). */
    if (lane == 0) {
        gbk_st_relaxed_gpu(&L->tail, tail + n);
        lc->next_in = k + 1 < a.n_link_in ? k + 1 : 0;
    }
    if (lane == k)
        ltail += n;
    __syncwarp(); /* next_in, for the next pass */
    return true;
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
 * Counted in polls, not timed: no %globaltimer read on the hop's path. */
#define GBK_LINK_IDLE_POLLS 64u
#define GBK_LINK_SPIN_POLLS 512u
template <typename G>
static __device__ __forceinline__ void gbk_link_spin(gb_kargs_t &a, gb_link_cache_t *lc, const gbk_link_room_t &R,
                                                     unsigned long long &ltail, uint32_t &fence, uint32_t test)
{
    for (uint32_t polls = 0, idle = 0; polls < GBK_LINK_SPIN_POLLS && idle < GBK_LINK_IDLE_POLLS; polls++)
        idle = gbk_link_step<G>(a, lc, R, ltail, true, fence, test) ? 0 : idle + 1;
    gbk_link_publish(a, ltail);
}

/* The kernel's link cache (gb_link_cache_t), from its links as it starts. */
static __device__ __forceinline__ void gbk_link_cache_init(const gb_kargs_t &a, gb_link_cache_t *lc)
{
    const uint32_t t = threadIdx.x;
    if (t == 0)
        lc->next_in = 0;
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
        /* lane 0 stored the tail (gbk_link_step, gbk_link_refuse) */
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
