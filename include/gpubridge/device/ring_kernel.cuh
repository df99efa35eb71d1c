/* The ring kernel: one block whose threads are the grain type's owner lanes.
 * A template on the grain type's traits G (gpubridge/grain.h): each grain
 * type gets its own kernel, its handler compiled in.
 *
 * Poll phase (poll_phase; mapped placement, nothing known to be pending):
 * warp 0 alone polls, the other warps wait at a barrier. One PCIe round reads
 * the next slot's first 64-byte line (its stamp says whether it is written),
 * in_head and the control line. A lone request is then handled by warp 0
 * itself -- read, dispatch, reply, fence, stamp -- with no block-wide barrier
 * on the way: that is the round-trip path, and it is the bare echo floor plus
 * the handler. When in_head shows more than one request, the block takes over.
 *
 * Window phase (window_step): each iteration is one dispatch window of the
 * whole block:
 *   A. read (window_read), in one PCIe round: the request slots (up to a
 *      window, coalesced, 16 bytes a thread, 4 adjacent threads per 64-byte
 *      line), in_head and the control line. Slots ahead of the producer are
 *      never read, since each such read pulls a line out of the writing CPU's
 *      cache. (Staging placement: in_head is read first; device memory makes
 *      that cheap, and stamps are not needed. Staging always runs windows.)
 *   B. dispatch (window_dispatch), in rounds: each round runs the earliest
 *      remaining request of every grain in the window, writing replies into
 *      shared memory.
 *   C. write (window_write): the block copies the replies out coalesced, with
 *      the stamp left at its old value; the writing threads fence at system
 *      scope; then one store per reply sets its stamp. A host that sees the
 *      stamp sees the reply.
 *
 * Idle: spin `idle_spin_polls` polls, then __nanosleep with a doubling
 * back-off up to `idle_backoff_max_ns`. A relaunched kernel (budget > 0)
 * exits instead of idling, and as soon as in_head shows nothing more.
 *
 * Device links in (ring_links.cuh): each type's kernel comes twice, with
 * LINKS (it takes messages from links: launched when another kernel forwards
 * into it) and without. The code that takes from links needs registers that
 * the poll loop of a kernel with none should not pay for. */
#ifndef GB_RING_KERNEL_CUH
#define GB_RING_KERNEL_CUH

#include <cuda_runtime.h>

#include "gpubridge/detail/dispatch.h"
#include "gpubridge/device/inline_kernel.h"
#include "gpubridge/device/ldst.cuh"
#include "gpubridge/device/profile.cuh"
#include "gpubridge/device/ring_kernel.h"
#include "gpubridge/device/ring_links.cuh"

extern __shared__ uint4 gbk_smem[];

#define FULL_MASK 0xffffffffu
/* 16-byte loads a thread issues before it uses any: one PCIe round reads
 * GBK_READ_UNROLL * 16 bytes a thread, 64 KiB a block (a window of 1,024
 * 64-byte slots). One SM reading mapped memory is bound by the loads it has
 * in flight, so each thread issues all of them before it waits on any. */
#define GBK_READ_UNROLL 8
#define GBK_NO_BID 0xFFFFFFFFu

/* Where the dispatch loop stands; every thread holds the same copy, except
 * beat, which only thread 0 keeps. */
typedef struct gbk_progress {
    uint64_t tail;       /* next request position */
    uint64_t known_head; /* highest in_head seen: slots below it are published */
    uint64_t done;       /* requests handled in this launch */
    uint64_t beat;       /* heartbeats written */
    uint32_t idle_polls; /* empty polls since the last request */
    uint32_t sleep_ns;   /* current idle back-off */
    uint32_t resume_fence; /* deactivated since the last dispatch: the host may have rewritten the
                            * activation table (activation.c), so fence (dropping this SM's L1
                            * copies of it) before the next lookup */
    unsigned long long ltail; /* warp 0, lane k: link k's next position (ring_links.cuh) */
} gbk_progress_t;

/* The launch as every thread sees it: the region's parts, the ring's
 * geometry and the window's arrays in shared memory. */
typedef struct gbk_view {
    gb_control_t *ctl;
    gb_ring_indices_t *idx;
    const unsigned char *in;
    unsigned char *out;
    unsigned char *s_in, *s_out; /* a window's requests and replies, SP bytes apart */
    uint16_t *s_lane;            /* each request's table partition */
    uint16_t *s_bslot;           /* each request's entry in s_bid */
    /* Dispatch bids: an open-addressing table, one entry per key bidding in
     * the current round, holding its lowest position (GBK_NO_BID: free). */
    uint32_t *s_bid;
    uint32_t nthreads, nbid;
    uint32_t S, C16, mask;
    uint32_t SP;      /* a slot's stride in shared memory */
    uint32_t C16_LOG; /* chunk -> slot by a shift (slot sizes are powers of two, gb_rk_new), not a
                       * division by a run-time value (some 20 instructions a load) */
    gb_link_cache_t *lc; /* the kernel's view of its links out (link.h) */
    gb_grain_table_t *ltab; /* a kernel with links in: its table, lone and concurrent (ring_links.cuh) */
} gbk_view_t;

/* Words one thread reads or decides for the whole block (shared memory). */
typedef struct gbk_shared {
    uint32_t n, bad, term, active, test;
    uint64_t head, known, done;
    int reason;
    uint32_t fence;
} gbk_shared_t;

static __device__ __forceinline__ gbk_view_t gbk_view_of(const gb_kargs_t &a)
{
    gbk_view_t V;
    const gb_ring_geom_t g = a.geom;
    V.ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    V.idx = (gb_ring_indices_t *)(a.region + gb_region_idx_off());
    V.in = a.region + gb_region_in_off();
    V.out = a.region + gb_region_out_off(g);
    V.nthreads = blockDim.x;
    V.S = g.slot_size;
    V.C16 = V.S / 16;
    V.mask = g.cap - 1;
    V.SP = gbk_smem_pitch(V.S);
    V.C16_LOG = (uint32_t)(__ffs((int)V.C16) - 1);
    V.s_in = (unsigned char *)gbk_smem;
    V.s_out = V.s_in + (size_t)a.window * V.SP;
    V.s_lane = (uint16_t *)(V.s_out + (size_t)a.window * V.SP);
    V.s_bslot = V.s_lane + a.window;
    V.s_bid = (uint32_t *)(V.s_bslot + a.window);
    V.nbid = gbk_bid_slots(a.window);
    return V;
}

/* Whether this kernel takes messages from device links: compiled in
 * (LINKS) and given some (a kernel without links in runs the variant without
 * the code). */
template <bool LINKS> static __device__ __forceinline__ bool gbk_takes_links(const gb_kargs_t &a)
{
    return LINKS && a.n_link_in;
}

/* The window's shared slots, for warp 0's link passes between windows. */
static __device__ __forceinline__ gbk_link_room_t link_room(const gb_kargs_t &a, const gbk_view_t &V)
{
    const gbk_link_room_t R = {V.s_in, V.s_out, V.ltab, V.S, V.SP, min(32u, a.window)};
    return R;
}

/* Acknowledges an activation change on the control line (one thread). */
static __device__ __forceinline__ void ack_active(gb_control_t *ctl, gb_kstate_t &ks, uint32_t active)
{
    if ((int32_t)active != ks.active_seen) {
        ks.active_seen = (int32_t)active;
        st_volatile(&ctl->active_seen, (int32_t)active);
        __threadfence_system();
    }
}

/* An empty poll: after idle_spin_polls of them, sleep with a doubling back-off. */
static __device__ __forceinline__ void idle_backoff(const gb_kargs_t &a, gbk_progress_t &P)
{
    if (++P.idle_polls > a.idle_spin_polls) {
        P.sleep_ns = P.sleep_ns ? min(P.sleep_ns * 2, a.idle_backoff_max_ns) : 64;
        __nanosleep(P.sleep_ns);
    }
}

/* What warp 0's poll read: the slot's first line (lanes 0-3 each hold 16
 * bytes of it) and, in every lane, its stamp and length and the control word. */
typedef struct gbk_poll {
    uint4 v;
    uint32_t seq, len, active, term, test;
} gbk_poll_t;

/* One PCIe round: the slot's first line (lanes 0-3), in_head, control. */
static __device__ __forceinline__ gbk_poll_t poll_read(const gbk_view_t &V, const unsigned char *slot,
                                                       gbk_progress_t &P)
{
    const uint32_t lane = threadIdx.x;
    gbk_poll_t r;
    uint4 v = make_uint4(0, 0, 0, 0), cw = v;
    uint64_t head = 0;
    if (lane < GB_SNAPSHOT / 16)
        v = ld_volatile_v4(slot + lane * 16);
    else if (lane == 31)
        cw = ld_volatile_v4((const void *)&V.ctl->is_active);
    else if (lane == 30)
        head = ld_volatile(&V.idx->in_head);
    /* Header bytes 16..31 are lane 1's: type|status, len, aux, seq. */
    r.v = v;
    r.seq = __shfl_sync(FULL_MASK, v.w, 1), r.len = __shfl_sync(FULL_MASK, v.y, 1);
    r.active = __shfl_sync(FULL_MASK, cw.x, 31), r.term = __shfl_sync(FULL_MASK, cw.y, 31);
    r.test = __shfl_sync(FULL_MASK, cw.z, 31);
    head = __shfl_sync(FULL_MASK, head, 30);
    P.known_head = max(P.known_head, head);
    return r;
}

/* A lone request into shared memory. Lines past the first are read now that
 * the stamp (written after them) was seen. */
static __device__ __forceinline__ void lone_read(const gbk_view_t &V, const unsigned char *slot, const gbk_poll_t &r,
                                                 gbk_progress_t &P)
{
    const uint32_t lane = threadIdx.x;
    if (P.resume_fence) {
        __threadfence_system(); /* after the host's table copy and its is_active store */
        P.resume_fence = 0;
    }
    if (lane < GB_SNAPSHOT / 16)
        *(uint4 *)(V.s_in + lane * 16) = r.v;
    const uint32_t in_chunks = min(V.C16, (GB_SLOT_HDR_SIZE + min(r.len, V.S) + 15) / 16);
    if (in_chunks > GB_SNAPSHOT / 16) {
        __threadfence_system();
        for (uint32_t c = GB_SNAPSHOT / 16 + lane; c < in_chunks; c += 32)
            *(uint4 *)(V.s_in + c * 16) = ld_volatile_v4(slot + c * 16);
    }
    __syncwarp();
}

/* The links of a turn on request h at ring position pos, in lt: for a type
 * that sends (else NULL), with lt.out NULL when it has none to use. A
 * forward that leaves by a link is answered by its last grain in this
 * request's reply slot. */
template <typename G>
static __device__ __forceinline__ const gb_link_turn_t *gbk_turn_links(const gb_kargs_t &a, const gbk_view_t &V,
                                                                       const gb_slot_hdr_t *h, uint64_t pos,
                                                                       gb_link_turn_t &lt)
{
    if constexpr (gbi_n_targets<G>::value == 0) {
        return NULL;
    } else {
        /* Always &lt, with out NULL for none: a pointer that may be NULL or
         * &lt would keep lt in local memory. */
        lt.out = a.n_devs == 0 || h->status != 0 ? NULL : V.lc->out; /* no links; or large, refused, answered */
        lt.cache = V.lc;
        lt.closed = lt.out ? gbk_link_closed(V.lc, gbi_n_targets<G>::value) : 0;
        lt.origin.out_slot = (uint64_t)(uintptr_t)(V.out + (size_t)(pos & V.mask) * V.S);
        lt.origin.pos = pos;
        lt.origin.since_ns = 0;
        lt.origin.hops = 0;
        lt.origin.out_cap = V.S - GB_SLOT_HDR_SIZE;
        lt.n_devs = a.n_devs;
        lt.dev = a.dev;
        lt.max_hops = a.max_hops;
        lt.self = a.self;
        return &lt;
    }
}

/* Lane 0 runs the lone request: its reply into shared memory, the counters
 * onto the control line. Returns the reply's payload length. */
template <typename G>
static __device__ __forceinline__ uint32_t lone_dispatch(gb_kargs_t &a, const gbk_view_t &V, const gbk_progress_t &P,
                                                         gb_kstate_t &ks, uint32_t test)
{
    const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)V.s_in;
    const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
    gb_slot_hdr_t oh;
    const long long h0 = gbk_clock<G>();
    gb_link_turn_t lt;
    int bad = gbi_dispatch_one<G>(&ctx, &a.tab, gb_grain_lane(h->key, a.tab.lanes), h, V.s_in + GB_SLOT_HDR_SIZE,
                                  &oh, V.s_out + GB_SLOT_HDR_SIZE, V.S - GB_SLOT_HDR_SIZE, test,
                                  gbk_turn_links<G>(a, V, h, P.tail, lt));
    gbk_prof_add<G>(ks.prof_handler, (uint64_t)(gbk_clock<G>() - h0));
    oh.seq = gb_stamp(P.tail - a.geom.cap); /* "not yet" until the stamp store (lone_write) */
    *(gb_slot_hdr_t *)V.s_out = oh;
    ks.processed++;
    ks.errors += (uint64_t)bad;
    ks.iterations++;
    /* Before the fence: a host that sees the stamp sees counters that include it. */
    put_counters(V.ctl, ks, P.tail + 1);
    return oh.len;
}

/* Whether the window's reply i is a turn whose forward left by a link (its
 * last grain writes that slot, not this kernel); never for a type that
 * sends nothing. */
template <typename G>
static __device__ __forceinline__ bool gbk_reply_linked(const gbk_view_t &V, uint32_t i)
{
    if constexpr (gbi_n_targets<G>::value == 0)
        return false;
    else
        return ((const gb_slot_hdr_t *)(V.s_out + (size_t)i * V.SP))->status == GB_SLOT_LINKED;
}

/* The lone request's reply into the output ring, then its stamp; none for
 * a turn whose forward left by a link (its last grain writes the reply). */
template <typename G>
static __device__ __forceinline__ void lone_write(const gb_kargs_t &a, const gbk_view_t &V, const gbk_progress_t &P,
                                                  uint32_t out_len)
{
    const uint32_t lane = threadIdx.x;
    if (gbk_reply_linked<G>(V, 0))
        return;
    unsigned char *oslot = V.out + (size_t)(P.tail & V.mask) * V.S;
    const uint32_t out_chunks = min(V.C16, (GB_SLOT_HDR_SIZE + out_len + 15) / 16);
    if (out_chunks <= GBK_ONE_WRITER_CHUNKS && !gbk_flag<G>(a, GBK_F_FENCE_ALL)) {
        /* A small reply: lane 0 writes it (after the counters) and
         * releases it with its stamp. */
        if (lane == 0) {
            for (uint32_t c = 0; c < out_chunks; c++)
                *(uint4 *)(oslot + c * 16) = *(const uint4 *)(V.s_out + c * 16);
            st_release_sys(&((gb_slot_hdr_t *)oslot)->seq, gb_stamp(P.tail));
        }
    } else {
        for (uint32_t c = lane; c < out_chunks; c += 32)
            *(uint4 *)(oslot + c * 16) = *(const uint4 *)(V.s_out + c * 16);
        __threadfence_system();
        __syncwarp();
        if (lane == 0)
            st_volatile(&((gb_slot_hdr_t *)oslot)->seq, gb_stamp(P.tail));
    }
}

/* Warp 0 handles a lone request -- read, dispatch, reply, fence, stamp --
 * with no block-wide barrier on the way. t0: when its poll began. */
template <typename G>
static __device__ __forceinline__ void poll_lone(gb_kargs_t &a, const gbk_view_t &V, const unsigned char *slot,
                                                 const gbk_poll_t &r, gbk_progress_t &P, gb_kstate_t &ks, long long t0)
{
    const uint32_t lane = threadIdx.x;
    const long long t1 = gbk_clock<G>();
    lone_read(V, slot, r, P);
    uint32_t out_len = 0;
    if (lane == 0)
        out_len = lone_dispatch<G>(a, V, P, ks, r.test);
    __syncwarp();
    out_len = __shfl_sync(FULL_MASK, out_len, 0);
    const long long t2 = gbk_clock<G>();
    lone_write<G>(a, V, P, out_len);
    if (lane == 0) {
        if (!(r.test & GB_TEST_SKIP_HEARTBEAT))
            st_volatile(&V.ctl->heartbeat, ++P.beat);
        gbk_prof_window<G>(ks, t1 - t0, t2 - t1, gbk_clock<G>() - t2, 1, 1, 0);
    }
    P.tail++;
    P.done++;
    P.idle_polls = 0;
    P.sleep_ns = 0;
}

/* Warp 0's poll loop and single-message path (see the header comment). Runs
 * until the block must take over (more than one request pending), or the
 * kernel must exit: returns GB_EXIT_NONE or the exit reason. Only lane 0's
 * ks and P.beat are kept (as thread 0's are in the window phase); the
 * positions are the same in every lane. */
template <typename G, bool LINKS>
static __device__ __forceinline__ int poll_phase(gb_kargs_t &a, const gbk_view_t &V, gbk_progress_t &P,
                                                 gb_kstate_t &ks)
{
    const uint32_t lane = threadIdx.x;
    for (;;) {
        const long long t0 = gbk_clock<G>();
        const unsigned char *slot = V.in + (size_t)(P.tail & V.mask) * V.S;
        const gbk_poll_t r = poll_read(V, slot, P);
        if (lane == 0 && P.beat == 0 && !(r.test & GB_TEST_SKIP_HEARTBEAT))
            st_volatile(&V.ctl->heartbeat, ++P.beat); /* first beat: the start-up deadline waits for it */
        if (r.term)
            return GB_EXIT_TERMINATED;
        if (lane == 0)
            ack_active(V.ctl, ks, r.active);
        /* Link messages first: the request ring's slot, already read, waits
         * no longer than one pass of one link. */
        const bool linked = gbk_takes_links<LINKS>(a) && gbk_link_step<G>(a, V.lc, link_room(a, V), P.ltail, r.active,
                                                            P.resume_fence, r.test);
        const bool ready = r.active && r.seq == gb_stamp(P.tail);
        if (!r.active)
            P.resume_fence = 1;
        if (ready && P.known_head <= P.tail + 1) {
            poll_lone<G>(a, V, slot, r, P, ks, t0);
            if (a.budget && P.done >= a.budget)
                return GB_EXIT_BUDGET_SPENT;
            if (a.budget && P.known_head <= P.tail) {
                /* in_head was read in this launch: everything the host had
                 * published when it launched is done, and it launches again
                 * for anything later. No extra poll to find the ring empty. */
                return GB_EXIT_INPUT_EMPTY;
            }
            continue;
        }
        if (r.active && (ready || P.known_head > P.tail))
            return GB_EXIT_NONE; /* more than one request: the block's window phase */
        if (a.budget)
            return GB_EXIT_INPUT_EMPTY; /* nothing (or deactivated): leave it queued */
        if (linked) {
            if (r.active) /* not after refusing expired messages of a paused kernel */
                gbk_link_spin<G>(a, V.lc, link_room(a, V), P.ltail, P.resume_fence, r.test);
            else
                gbk_link_publish(a, P.ltail); /* the refusals, for telemetry */
            P.idle_polls = 0;
            P.sleep_ns = 0;
            continue;
        }
        idle_backoff(a, P);
        if (lane == 0) {
            if ((P.idle_polls & 63) == 0 && !(r.test & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&V.ctl->heartbeat, ++P.beat);
            gbk_prof_add<G>(ks.prof_idle, (uint64_t)(gbk_clock<G>() - t0));
        }
    }
}

/* The poll phase on warp 0 while the other warps wait at the barrier; its
 * progress then goes to the whole block. Returns GB_EXIT_NONE or the reason. */
template <typename G, bool LINKS>
static __device__ __forceinline__ int poll_block(gb_kargs_t &a, const gbk_view_t &V, gbk_shared_t &sh,
                                                 gbk_progress_t &P, gb_kstate_t &ks)
{
    const uint32_t tid = threadIdx.x;
    if (tid < 32) {
        int why = poll_phase<G, LINKS>(a, V, P, ks);
        if (tid == 0) {
            sh.head = P.tail;
            sh.known = P.known_head;
            sh.done = P.done;
            sh.reason = why;
            sh.fence = P.resume_fence;
        }
    }
    __syncthreads();
    P.tail = sh.head;
    P.known_head = sh.known;
    P.done = sh.done;
    P.resume_fence = sh.fence;
    return sh.reason;
}

/* What a window reads. Mapped: when in_head says requests are published,
 * exactly those (a window's worth); otherwise the one next slot. Never slots
 * ahead of the producer: each such read pulls a line out of the writing
 * CPU's cache and slows the producer down. */
static __device__ __forceinline__ uint32_t window_want(const gb_kargs_t &a, const gbk_view_t &V, gbk_shared_t &sh,
                                                       gbk_progress_t &P)
{
    uint32_t want;
    if (threadIdx.x == 0)
        sh.bad = 0;
    if (a.staging) {
        /* The host copies slots, then in_head, on one stream: a head that
         * covers a position means the slot's copy has completed. */
        if (threadIdx.x == 0)
            sh.head = ld_volatile(&V.idx->in_head);
        __syncthreads();
        P.known_head = sh.head;
        __threadfence();
        want = (uint32_t)min((uint64_t)a.window, P.known_head - P.tail);
    } else {
        want = P.known_head > P.tail ? (uint32_t)min((uint64_t)a.window, P.known_head - P.tail) : 1u;
    }
    if (a.budget)
        want = (uint32_t)min((uint64_t)want, (uint64_t)a.budget - P.done);
    return want;
}

/* Chunk c of a window's read: slot i, byte offset off. Each slot gives its
 * chunks from `first` on, `per` of them; the whole slot (first 0) by a shift
 * (slot sizes are powers of two), the rest of it by a division. */
static __device__ __forceinline__ void gbk_chunk_at(const gbk_view_t &V, uint32_t c, uint32_t first, uint32_t per,
                                                    uint32_t &i, uint32_t &off)
{
    if (first == 0) {
        i = c >> V.C16_LOG;
        off = (c & (V.C16 - 1)) * 16;
    } else {
        i = c / per;
        off = (first + c % per) * 16;
    }
}

/* Slots [P.tail, P.tail + n) into shared memory, each from its 16-byte
 * chunk `first` on, up to GBK_READ_UNROLL chunks a thread, all loads issued
 * before any is used. The warp barrier between the loads and their stores
 * keeps ptxas from moving the first stores in among the loads: each store
 * waits for its load, so the loads after it would start a PCIe round of
 * their own. */
static __device__ __forceinline__ void window_load(const gbk_view_t &V, const gbk_progress_t &P, uint32_t n,
                                                   uint32_t first = 0)
{
    const uint32_t tid = threadIdx.x, nthreads = V.nthreads;
    const uint32_t per = V.C16 - first, total = n * per;
    for (uint32_t base = 0; base < total; base += GBK_READ_UNROLL * nthreads) {
        uint4 v[GBK_READ_UNROLL];
#pragma unroll
        for (uint32_t k = 0; k < GBK_READ_UNROLL; k++) {
            const uint32_t c = base + k * nthreads + tid;
            uint32_t i, off;
            gbk_chunk_at(V, c, first, per, i, off);
            if (c < total)
                v[k] = ld_volatile_v4(V.in + (size_t)((P.tail + i) & V.mask) * V.S + off);
        }
        __syncwarp(); /* total is block-uniform: every lane runs the same iterations */
#pragma unroll
        for (uint32_t k = 0; k < GBK_READ_UNROLL; k++) {
            const uint32_t c = base + k * nthreads + tid;
            uint32_t i, off;
            gbk_chunk_at(V, c, first, per, i, off);
            if (c < total)
                *(uint4 *)(V.s_in + (size_t)i * V.SP + off) = v[k];
        }
    }
}

/* A. One PCIe round: want slots, in_head and the control word. sh.n becomes
 * the window: the stamped prefix in mapped placement (a polled slot may not
 * be written yet). */
static __device__ __forceinline__ void window_read(const gb_kargs_t &a, const gbk_view_t &V, gbk_shared_t &sh,
                                                   gbk_progress_t &P, uint32_t want)
{
    const uint32_t tid = threadIdx.x, nthreads = V.nthreads;
    const uint32_t ctl_thread = nthreads - 1; /* the thread with the fewest slot chunks */
    uint4 cword = make_uint4(0, 0, 0, 0);
    uint64_t head = 0;
    if (tid == ctl_thread) {
        /* is_active, should_terminate and test_flags in one 16-byte load */
        cword = ld_volatile_v4((const void *)&V.ctl->is_active);
        if (!a.staging)
            head = ld_volatile(&V.idx->in_head);
    }
    window_load(V, P, want);
    if (tid == ctl_thread) {
        sh.active = cword.x;
        sh.term = cword.y;
        sh.test = cword.z;
        if (!a.staging)
            sh.head = head;
    }
    if (tid == 0)
        sh.n = want;
    __syncthreads();
    if (!a.staging) {
        for (uint32_t i = tid; i < want; i += nthreads) {
            const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(V.s_in + (size_t)i * V.SP);
            if (h->seq != gb_stamp(P.tail + i))
                atomicMin(&sh.n, i);
        }
        __syncthreads();
        P.known_head = max(P.known_head, sh.head);
    }
}

/* An empty window: back off, beat now and then. t0: when the window began. */
template <typename G>
static __device__ __forceinline__ void window_idle(const gb_kargs_t &a, const gbk_view_t &V, const gbk_shared_t &sh,
                                                   gbk_progress_t &P, gb_kstate_t &ks, long long t0)
{
    idle_backoff(a, P);
    if (threadIdx.x == 0 && ((P.idle_polls & 63) == 0 || P.beat == 0) && !(sh.test & GB_TEST_SKIP_HEARTBEAT))
        st_volatile(&V.ctl->heartbeat, ++P.beat);
    gbk_prof_add<G>(ks.prof_idle, (uint64_t)(gbk_clock<G>() - t0));
    __syncthreads(); /* sh is rewritten by thread 0 next iteration */
}

/* Before dispatch: the rest of each slot, and each request's partition. */
static __device__ __forceinline__ void window_prepare(const gb_kargs_t &a, const gbk_view_t &V, gbk_progress_t &P,
                                                      uint32_t n)
{
    const uint32_t tid = threadIdx.x, nthreads = V.nthreads;
    if (P.resume_fence) { /* block-uniform: sh.active */
        __threadfence_system(); /* after the host's table copy and its is_active store */
        P.resume_fence = 0;
    }
    if (!a.staging && V.S > GB_SNAPSHOT) {
        /* Only the first line came with the stamp; re-read the rest now
         * that the stamp (written after them) has been seen. */
        __threadfence_system();
        window_load(V, P, n, GB_SNAPSHOT / 16);
    }
    for (uint32_t i = tid; i < n; i += nthreads)
        V.s_lane[i] = (uint16_t)gb_grain_lane(((const gb_slot_hdr_t *)(V.s_in + (size_t)i * V.SP))->key, a.tab.lanes);
    __syncthreads();
}

/* One round's bids: each of this thread's pending requests enters its key in
 * the bid table with its position (see window_dispatch). */
static __device__ __forceinline__ void window_bid(const gbk_view_t &V, uint32_t pending, uint32_t n)
{
    for (uint32_t j = 0, i = threadIdx.x; i < n; j++, i += V.nthreads) {
        if (!(pending >> j & 1u))
            continue;
        const uint64_t key = ((const gb_slot_hdr_t *)(V.s_in + (size_t)i * V.SP))->key;
        uint32_t b = (uint32_t)gb_key_mix(key) & (V.nbid - 1);
        for (;;) { /* ends: fewer keys bid than the table has entries */
            const uint32_t v = atomicCAS(&V.s_bid[b], GBK_NO_BID, i);
            if (v == GBK_NO_BID)
                break;
            if (((const gb_slot_hdr_t *)(V.s_in + (size_t)v * V.SP))->key == key) {
                atomicMin(&V.s_bid[b], i);
                break;
            }
            b = (b + 1) & (V.nbid - 1);
        }
        V.s_bslot[i] = (uint16_t)b;
    }
}

/* One round's runs: the requests whose bids won. Returns their errors. */
template <typename G>
static __device__ __forceinline__ uint32_t window_run(const gb_kargs_t &a, const gbk_view_t &V, const gbk_shared_t &sh,
                                                      const gbk_progress_t &P, gb_grain_table_t &tab,
                                                      uint32_t &pending, uint32_t n)
{
    const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0}; /* one thread per message: no team grains here */
    uint32_t bad = 0;
    for (uint32_t j = 0, i = threadIdx.x; i < n; j++, i += V.nthreads) {
        if (!(pending >> j & 1u) || V.s_bid[V.s_bslot[i]] != i)
            continue;
        V.s_bid[V.s_bslot[i]] = GBK_NO_BID;
        pending &= ~(1u << j);
        const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(V.s_in + (size_t)i * V.SP);
        gb_slot_hdr_t oh;
        gb_link_turn_t lt;
        bad += gbi_dispatch_one<G>(&ctx, &tab, V.s_lane[i], h, V.s_in + (size_t)i * V.SP + GB_SLOT_HDR_SIZE, &oh,
                                   V.s_out + (size_t)i * V.SP + GB_SLOT_HDR_SIZE, V.S - GB_SLOT_HDR_SIZE, sh.test,
                                   gbk_turn_links<G>(a, V, h, P.tail + i, lt));
        oh.seq = gb_stamp(P.tail + i - a.geom.cap); /* "not yet" until step C's stamp store */
        *(gb_slot_hdr_t *)(V.s_out + (size_t)i * V.SP) = oh;
    }
    return bad;
}

/* B. dispatch in rounds. Each round runs, for every grain with requests left
 * in the window, its earliest one: a request's thread enters its key in the
 * bid table (compare-and-swap of a free entry, or the entry already holding
 * that key) with its position, the lowest position per key stays
 * (atomicMin), and after a barrier that one runs. So each grain's requests
 * run one at a time, in window order (turn semantics), and a window of
 * distinct grains runs in one round; grains of one table partition may run
 * at once (gb_grain_find allows it). The barrier that ends a round also makes
 * its grain-state writes visible to the next round's threads. The winner
 * frees its bid entry at once: another thread of the same key still checking
 * compares with its own position, which neither the winning bid nor a free
 * entry matches, and no thread of another key reads the entry again this
 * round. So every entry is free when the next round starts. Errors add up in
 * sh.bad; rounds and bid_cycles feed the profile. */
template <typename G>
static __device__ __forceinline__ void window_dispatch(const gb_kargs_t &a, const gbk_view_t &V, gbk_shared_t &sh,
                                                       const gbk_progress_t &P, uint32_t n, uint32_t &rounds,
                                                       long long &bid_cycles)
{
    uint32_t bad = 0;
    gb_grain_table_t tab = a.tab;
    tab.concurrent = gbk_flag<G>(a, GBK_F_NO_VERIFY) ? 2 : 1; /* keys of one partition run at once (gb_grain_find) */
    uint32_t pending = 0; /* bit j: request tid + j * nthreads not yet run */
    for (uint32_t j = 0, i = threadIdx.x; i < n; j++, i += V.nthreads)
        pending |= 1u << j;
    int more = __syncthreads_or(pending != 0);
    while (more) {
        rounds++;
        const long long tb = gbk_clock<G>();
        window_bid(V, pending, n);
        __syncthreads();
        bid_cycles += gbk_clock<G>() - tb;
        bad += window_run<G>(a, V, sh, P, tab, pending, n);
        more = __syncthreads_or(pending != 0);
    }
    if (bad)
        atomicAdd(&sh.bad, bad);
    __syncthreads();
}

/* C. write replies, fence, then stamps. Telemetry goes with the replies,
 * before the fence: a host that sees a reply's stamp sees counters that
 * include it. A turn whose forward left by a link writes nothing: its last
 * grain writes that slot. */
template <typename G>
static __device__ __forceinline__ void window_write(const gb_kargs_t &a, const gbk_view_t &V, const gbk_shared_t &sh,
                                                    gbk_progress_t &P, gb_kstate_t &ks, uint32_t n)
{
    const uint32_t tid = threadIdx.x, nthreads = V.nthreads;
    ks.processed += n;
    ks.errors += sh.bad;
    ks.iterations++;
    bool wrote = false;
    if (tid == 0) {
        put_counters(V.ctl, ks, P.tail + n);
        wrote = true;
    }
    for (uint32_t c = tid; c < n * V.C16; c += nthreads) {
        uint32_t i = c >> V.C16_LOG, off = (c & (V.C16 - 1)) * 16;
        if (gbk_reply_linked<G>(V, i))
            continue;
        /* Plain stores, which the memory system may combine; the system
         * fence below orders them before the stamps. */
        *(uint4 *)(V.out + (size_t)((P.tail + i) & V.mask) * V.S + off) =
            *(const uint4 *)(V.s_out + (size_t)i * V.SP + off);
        wrote = true;
    }
    if (wrote)
        __threadfence_system();
    __syncthreads();
    for (uint32_t i = tid; i < n; i += nthreads) {
        if (gbk_reply_linked<G>(V, i))
            continue;
        gb_slot_hdr_t *o = (gb_slot_hdr_t *)(V.out + (size_t)((P.tail + i) & V.mask) * V.S);
        st_volatile(&o->seq, gb_stamp(P.tail + i));
    }
    if (a.staging)
        __syncthreads(); /* every stamp before out_head, which the host copies first */
    P.tail += n;
    P.done += n;
}

/* One dispatch window of the whole block (see the header comment). Returns
 * GB_EXIT_NONE to go on, or why the kernel exits. */
template <typename G, bool LINKS>
static __device__ __forceinline__ int window_step(gb_kargs_t &a, const gbk_view_t &V, gbk_shared_t &sh,
                                                  gbk_progress_t &P, gb_kstate_t &ks)
{
    const uint32_t want = window_want(a, V, sh, P);
    const long long t0 = gbk_clock<G>();
    window_read(a, V, sh, P, want);
    uint32_t n = sh.n;
    const uint32_t term = sh.term, active = sh.active;
    if (term)
        return GB_EXIT_TERMINATED;
    if (threadIdx.x == 0)
        ack_active(V.ctl, ks, active);
    if (!active) {
        n = 0; /* deactivated: leave requests queued */
        P.resume_fence = 1;
    }
    if (n == 0) {
        if (a.budget)
            return GB_EXIT_INPUT_EMPTY;
        /* Paused with requests queued, the kernel stays in this loop, not
         * the poll phase: its links' messages past messaging.hold_ms are
         * refused here, so the replies queued behind them in their senders'
         * rings do not wait for Activate. */
        if (!active && gbk_takes_links<LINKS>(a)) { /* block-uniform */
            const bool refused = threadIdx.x < 32 && gbk_link_step<G>(a, V.lc, link_room(a, V), P.ltail, false,
                                                                      P.resume_fence, sh.test);
            if (refused)
                gbk_link_publish(a, P.ltail);
            if (__syncthreads_or(refused)) /* more may be due: no back-off */
                P.idle_polls = 0, P.sleep_ns = 0;
        }
        window_idle<G>(a, V, sh, P, ks, t0);
        return GB_EXIT_NONE;
    }
    P.idle_polls = 0;
    P.sleep_ns = 0;
    window_prepare(a, V, P, n);
    const long long t1 = gbk_clock<G>();
    uint32_t rounds = 0;
    long long bid_cycles = 0;
    window_dispatch<G>(a, V, sh, P, n, rounds, bid_cycles);
    const long long t2 = gbk_clock<G>();
    window_write<G>(a, V, sh, P, ks, n);
    if (gbk_takes_links<LINKS>(a)) { /* links between windows, on warp 0: a busy ring does not starve them */
        __syncthreads(); /* the window's shared copies are written out */
        if (threadIdx.x < 32 && gbk_link_step<G>(a, V.lc, link_room(a, V), P.ltail, true, P.resume_fence, sh.test))
            gbk_link_publish(a, P.ltail);
    }
    if (threadIdx.x == 0) {
        if (a.staging) {
            __threadfence();
            st_volatile(&V.idx->out_head, P.tail);
        }
        if (!(sh.test & GB_TEST_SKIP_HEARTBEAT))
            st_volatile(&V.ctl->heartbeat, ++P.beat);
        gbk_prof_window<G>(ks, t1 - t0, t2 - t1, gbk_clock<G>() - t2, n, rounds, bid_cycles);
    }
    if (a.budget && P.done >= a.budget)
        return GB_EXIT_BUDGET_SPENT;
    if (a.budget && P.known_head <= P.tail)
        return GB_EXIT_INPUT_EMPTY; /* all this launch was issued for (see poll_phase) */
    __syncthreads();
    return GB_EXIT_NONE;
}

/* Thread 0, as the kernel leaves: progress into device memory, counters and
 * the exit reason onto the control line. */
template <typename G>
static __device__ __forceinline__ void ring_exit(const gb_kargs_t &a, const gbk_view_t &V, gb_kstate_t &ks,
                                                 const gbk_progress_t &P, int reason, long long clk0, uint64_t ns0)
{
    const uint64_t ns1 = gbk_globaltimer<G>();
    gbk_prof_add<G>(ks.prof_clk, (uint64_t)(gbk_clock<G>() - clk0));
    gbk_prof_add<G>(ks.prof_ns, ns1 - ns0);
    ks.tail = P.tail;
    gbk_kstate_save<G>(a.kstate, ks);
    /* All counters again: in staging relaunch the control line is
     * refreshed from the host before each launch. */
    put_counters(V.ctl, ks, P.tail);
    st_volatile(&V.ctl->exit_reason, (int32_t)reason);
    if (reason == GB_EXIT_TERMINATED) {
        __threadfence_system();
        st_volatile(&V.ctl->has_terminated, (int32_t)1);
    }
    __threadfence_system();
}

/* One block per ring kernel (the 1): ptxas may give a thread all 128
 * registers, which keeps the hot loop, large-message call (dispatch.h)
 * included, free of spills. */
template <typename G, bool LINKS> __global__ void __launch_bounds__(GBK_THREADS, 1) gbk_ring_kernel(gb_kargs_t a)
{
    const uint32_t tid = threadIdx.x;
    __shared__ gbk_shared_t sh;
    __shared__ gb_link_cache_t lc;
    __shared__ gb_grain_table_t ltab[2];
    gbk_view_t V = gbk_view_of(a);
    V.lc = &lc;
    V.ltab = ltab;
    if (LINKS && tid == 0) { /* before the barrier below */
        ltab[0] = ltab[1] = a.tab;
        ltab[0].concurrent = 0;
        ltab[1].concurrent = 1;
    }
    gbk_link_cache_init(a, &lc); /* before the barrier below; a target with no links out has NULLs */

    /* Progress lives in device memory: cheap to resume after a relaunch. */
    gb_kstate_t ks = *a.kstate;
    gbk_progress_t P = {ks.tail, ks.tail, 0, 0, 0, 0, 0, 0};
    int reason = GB_EXIT_NONE;
    if (LINKS && tid < a.n_link_in)
        P.ltail = a.link_in[tid]->tail;

    for (uint32_t i = tid; i < V.nbid; i += V.nthreads)
        V.s_bid[i] = GBK_NO_BID;
    long long clk0 = 0;
    uint64_t ns0 = 0;
    if (tid == 0) {
        sh.test = 0; /* the control line's test_flags arrive with the first read */
        clk0 = gbk_clock<G>();
        ns0 = gbk_globaltimer<G>();
    }
    __syncthreads();

    for (;;) {
        if (!a.staging && !gbk_flag<G>(a, GBK_F_NO_FAST) && P.known_head <= P.tail) {
            /* Poll phase (warp 0), see the header comment. */
            reason = poll_block<G, LINKS>(a, V, sh, P, ks);
            if (reason != GB_EXIT_NONE)
                break;
            __syncthreads(); /* sh.head is rewritten below */
        }
        reason = window_step<G, LINKS>(a, V, sh, P, ks);
        if (reason != GB_EXIT_NONE)
            break;
    }
    if (tid < 32 && reason == GB_EXIT_TERMINATED && gbk_takes_links<LINKS>(a))
        gbk_link_close(a); /* its answers before ring_exit's fence and has_terminated */
    if (tid == 0)
        ring_exit<G>(a, V, ks, P, reason, clk0, ns0);
}

static inline size_t gbk_ring_smem(uint32_t window, uint32_t slot_size)
{
    return (size_t)window * gbk_smem_pitch(slot_size) * 2 + (size_t)window * 2 * sizeof(uint16_t) +
           (size_t)gbk_bid_slots(window) * sizeof(uint32_t);
}

/* Largest window that fits the device's shared memory for slot_size in
 * kernel func (the ring kernel) or, with team set, in a team kernel. */
static inline uint32_t gbk_max_window(int device, uint32_t slot_size, int team, const void *func)
{
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
        optin = 48 * 1024;
    /* Static __shared__ variables: a few words in either kernel. */
    size_t stat = 1024;
    cudaFuncAttributes fa;
    if (!team && cudaFuncGetAttributes(&fa, func) == cudaSuccess)
        stat = fa.sharedSizeBytes + 64;
    size_t budget = (size_t)optin > stat + 4096 ? (size_t)optin - stat : 4096;
    if (team) { /* per request two slot copies and a uint32 */
        uint32_t w = (uint32_t)(budget / (2u * slot_size + 4u));
        return w ? w : 1;
    }
    /* Ring kernel: per request two slot copies, two uint16 and at least four
     * bid entries; then down to what gbk_ring_smem, with the bid table's
     * rounding to a power of two, fits. */
    uint32_t w = (uint32_t)(budget / (2u * gbk_smem_pitch(slot_size) + 2u * sizeof(uint16_t) + 4u * sizeof(uint32_t)));
    while (w > 1 && gbk_ring_smem(w, slot_size) > budget)
        w--;
    return w ? w : 1;
}

static inline cudaError_t gbk_allow_smem(const void *func, size_t smem)
{
    /* Without the opt-in, dynamic shared memory is capped at 48 KiB minus the
     * kernel's static shared memory, not at 48 KiB. */
    cudaFuncAttributes fa;
    cudaError_t err = cudaFuncGetAttributes(&fa, func);
    if (err != cudaSuccess)
        return err;
    if (smem <= (size_t)fa.maxDynamicSharedSizeBytes)
        return cudaSuccess;
    return cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

static inline cudaError_t gbk_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                       size_t ndeps, const void *func, unsigned blocks, unsigned threads, size_t smem,
                                       const gb_kargs_t *args)
{
    cudaError_t err = gbk_allow_smem(func, smem);
    if (err != cudaSuccess)
        return err;
    gb_kargs_t a = *args; /* the node copies its parameters when added */
    void *kp[1] = {&a};
    cudaKernelNodeParams p = {};
    p.func = (void *)func;
    p.gridDim = dim3(blocks, 1, 1);
    p.blockDim = dim3(threads, 1, 1);
    p.sharedMemBytes = (unsigned)smem;
    p.kernelParams = kp;
    return cudaGraphAddKernelNode(node, graph, deps, ndeps, &p);
}

/* The ring kernel for args: the variant that takes from links if it has any. */
template <typename G> static const void *gbk_ring_func(const gb_kargs_t *args)
{
    return args->n_link_in ? (const void *)gbk_ring_kernel<G, true> : (const void *)gbk_ring_kernel<G, false>;
}

template <typename G> static cudaError_t gbk_ring_launch(const gb_kargs_t *args, cudaStream_t stream)
{
    const size_t smem = gbk_ring_smem(args->window, args->geom.slot_size);
    cudaError_t err = gbk_allow_smem(gbk_ring_func<G>(args), smem);
    if (err != cudaSuccess)
        return err;
    if (args->n_link_in)
        gbk_ring_kernel<G, true><<<1, GBK_THREADS, smem, stream>>>(*args);
    else
        gbk_ring_kernel<G, false><<<1, GBK_THREADS, smem, stream>>>(*args);
    return cudaGetLastError();
}

template <typename G>
static cudaError_t gbk_ring_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                     size_t ndeps, const gb_kargs_t *args)
{
    return gbk_add_node(node, graph, deps, ndeps, gbk_ring_func<G>(args), 1, GBK_THREADS,
                        gbk_ring_smem(args->window, args->geom.slot_size), args);
}

#endif
