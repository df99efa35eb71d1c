/* The ring kernel: one block whose threads are the grain type's owner lanes.
 * A template on the grain type's traits G (gpubridge/grain.h): each grain
 * type gets its own kernel, its handler compiled in.
 *
 * Poll phase (mapped placement, nothing known to be pending): warp 0 alone
 * polls, the other warps wait at a barrier. One PCIe round reads the next
 * slot's first 64-byte line (its stamp says whether it is written), in_head
 * and the control line. A lone request is then handled by warp 0 itself --
 * read, dispatch, reply, fence, stamp -- with no block-wide barrier on the
 * way: that is the round-trip path, and it is the bare echo floor plus the
 * handler. When in_head shows more than one request, the block takes over.
 *
 * Window phase: each iteration is one dispatch window of the whole block:
 *   A. read, in one PCIe round: the request slots (up to a window, coalesced,
 *      16 bytes a thread, 4 adjacent threads per 64-byte line), in_head and the
 *      control line. Slots ahead of the producer are never read, since each
 *      such read pulls a line out of the writing CPU's cache. (Staging
 *      placement: in_head is read first; device memory makes that cheap, and
 *      stamps are not needed. Staging always runs windows.)
 *   B. dispatch, in rounds: each round runs the earliest remaining request
 *      of every grain in the window (see below), writing replies into
 *      shared memory.
 *   C. write: the block copies the replies out coalesced, with the stamp left
 *      at its old value; the writing threads fence at system scope; then one
 *      store per reply sets its stamp. A host that sees the stamp sees the
 *      reply.
 *
 * Idle: spin `idle_spin_polls` polls, then __nanosleep with a doubling
 * back-off up to `idle_backoff_max_ns`. A relaunched kernel (budget > 0)
 * exits instead of idling, and as soon as in_head shows nothing more. */
#ifndef GB_RING_KERNEL_CUH
#define GB_RING_KERNEL_CUH

#include <cuda_runtime.h>

#include "dispatch.h"
#include "inline_kernel.h"
#include "ldst.cuh"
#include "ring_kernel.h"


/* Profile of one busy window of n requests: read, dispatch, write cycles. */
static __device__ __forceinline__ void prof_window(gb_kstate_t &ks, long long read, long long dispatch,
                                                   long long write, uint32_t n, uint32_t rounds, long long bid)
{
    ks.prof_read += (uint64_t)read;
    ks.prof_dispatch += (uint64_t)dispatch;
    ks.prof_write += (uint64_t)write;
    ks.prof_windows++;
    ks.prof_msgs += n;
    if (n >= 64) {
        ks.prof_big_read += (uint64_t)read;
        ks.prof_big_dispatch += (uint64_t)dispatch;
        ks.prof_big_write += (uint64_t)write;
        ks.prof_big_windows++;
        ks.prof_big_msgs += n;
        ks.prof_big_rounds += rounds;
        ks.prof_big_bid += (uint64_t)bid;
    }
}

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
} gbk_progress_t;

/* Warp 0's poll loop and single-message path (see the header comment). Runs
 * until the block must take over (more than one request pending), or the
 * kernel must exit: returns GB_EXIT_NONE or the exit reason. Only lane 0's
 * *ks and P.beat are kept (as thread 0's are in the window phase); the
 * positions are the same in every lane. */
template <typename G>
static __device__ __forceinline__ int poll_phase(gb_kargs_t &a, gb_control_t *ctl, gb_ring_indices_t *idx,
                                              const unsigned char *in, unsigned char *out, unsigned char *s_in,
                                              unsigned char *s_out, uint32_t nthreads, gbk_progress_t &P,
                                              gb_kstate_t *ks)
{
    const uint32_t lane = threadIdx.x;
    const gb_ring_geom_t g = a.geom;
    const uint32_t S = g.slot_size, C16 = S / 16, mask = g.cap - 1;
    int why = GB_EXIT_NONE;
    for (;;) {
        const long long t0 = clock64();
        const unsigned char *slot = in + (size_t)(P.tail & mask) * S;
        uint4 v = make_uint4(0, 0, 0, 0), cw = v;
        uint64_t head = 0;
        /* One PCIe round: the slot's first line (lanes 0-3), in_head, control. */
        if (lane < GB_SNAPSHOT / 16)
            v = ld_volatile_v4(slot + lane * 16);
        else if (lane == 31)
            cw = ld_volatile_v4((const void *)&ctl->is_active);
        else if (lane == 30)
            head = ld_volatile(&idx->in_head);
        /* Header bytes 16..31 are lane 1's: type|status, len, aux, seq. */
        const uint32_t seq = __shfl_sync(FULL_MASK, v.w, 1), len = __shfl_sync(FULL_MASK, v.y, 1);
        const uint32_t active = __shfl_sync(FULL_MASK, cw.x, 31), term = __shfl_sync(FULL_MASK, cw.y, 31);
        const uint32_t test = __shfl_sync(FULL_MASK, cw.z, 31);
        head = __shfl_sync(FULL_MASK, head, 30);
        P.known_head = max(P.known_head, head);
        if (lane == 0 && P.beat == 0 && !(test & GB_TEST_SKIP_HEARTBEAT))
            st_volatile(&ctl->heartbeat, ++P.beat); /* first beat: the start-up deadline waits for it */
        if (term) {
            why = GB_EXIT_TERMINATED;
            break;
        }
        if (lane == 0 && (int32_t)active != ks->active_seen) {
            ks->active_seen = (int32_t)active;
            st_volatile(&ctl->active_seen, (int32_t)active);
            __threadfence_system();
        }
        const bool ready = active && seq == gb_stamp(P.tail);
        if (!active)
            P.resume_fence = 1;
        if (ready && P.known_head <= P.tail + 1) {
            /* A lone request: warp 0 handles it. Lines past the first are
             * read now that the stamp (written after them) was seen. */
            const long long t1 = clock64();
            if (P.resume_fence) {
                __threadfence_system(); /* after the host's table copy and its is_active store */
                P.resume_fence = 0;
            }
            if (lane < GB_SNAPSHOT / 16)
                *(uint4 *)(s_in + lane * 16) = v;
            const uint32_t in_chunks = min(C16, (GB_SLOT_HDR_SIZE + min(len, S) + 15) / 16);
            if (in_chunks > GB_SNAPSHOT / 16) {
                __threadfence_system();
                for (uint32_t c = GB_SNAPSHOT / 16 + lane; c < in_chunks; c += 32)
                    *(uint4 *)(s_in + c * 16) = ld_volatile_v4(slot + c * 16);
            }
            __syncwarp();
            uint32_t out_len = 0;
            if (lane == 0) {
                const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)s_in;
                const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL};
                gb_slot_hdr_t oh;
                const long long h0 = clock64();
                int bad = gbi_dispatch_one<G>(&ctx, &a.tab, gb_grain_lane(h->key, a.tab.lanes), h,
                                           s_in + GB_SLOT_HDR_SIZE, &oh, s_out + GB_SLOT_HDR_SIZE,
                                           S - GB_SLOT_HDR_SIZE, test);
                ks->prof_handler += (uint64_t)(clock64() - h0);
                oh.seq = gb_stamp(P.tail - g.cap); /* "not yet" until the stamp store below */
                *(gb_slot_hdr_t *)s_out = oh;
                out_len = oh.len;
                ks->processed++;
                ks->errors += (uint64_t)bad;
                ks->iterations++;
                /* Before the fence: a host that sees the stamp sees counters that include it. */
                put_counters(ctl, *ks, P.tail + 1);
            }
            __syncwarp();
            out_len = __shfl_sync(FULL_MASK, out_len, 0);
            const long long t2 = clock64();
            unsigned char *oslot = out + (size_t)(P.tail & mask) * S;
            const uint32_t out_chunks = min(C16, (GB_SLOT_HDR_SIZE + out_len + 15) / 16);
            if (out_chunks <= GBK_ONE_WRITER_CHUNKS && !(a.flags & GBK_F_FENCE_ALL)) {
                /* A small reply: lane 0 writes it (after the counters) and
                 * releases it with its stamp. */
                if (lane == 0) {
                    for (uint32_t c = 0; c < out_chunks; c++)
                        *(uint4 *)(oslot + c * 16) = *(const uint4 *)(s_out + c * 16);
                    st_release_sys(&((gb_slot_hdr_t *)oslot)->seq, gb_stamp(P.tail));
                }
            } else {
                for (uint32_t c = lane; c < out_chunks; c += 32)
                    *(uint4 *)(oslot + c * 16) = *(const uint4 *)(s_out + c * 16);
                __threadfence_system();
                __syncwarp();
                if (lane == 0)
                    st_volatile(&((gb_slot_hdr_t *)oslot)->seq, gb_stamp(P.tail));
            }
            if (lane == 0) {
                if (!(test & GB_TEST_SKIP_HEARTBEAT))
                    st_volatile(&ctl->heartbeat, ++P.beat);
                prof_window(*ks, t1 - t0, t2 - t1, clock64() - t2, 1, 1, 0);
            }
            P.tail++;
            P.done++;
            P.idle_polls = 0;
            P.sleep_ns = 0;
            if (a.budget && P.done >= a.budget) {
                why = GB_EXIT_BUDGET_SPENT;
                break;
            }
            if (a.budget && P.known_head <= P.tail) {
                /* in_head was read in this launch: everything the host had
                 * published when it launched is done, and it launches again
                 * for anything later. No extra poll to find the ring empty. */
                why = GB_EXIT_INPUT_EMPTY;
                break;
            }
            continue;
        }
        if (active && (ready || P.known_head > P.tail))
            break; /* more than one request: the block's window phase */
        if (a.budget) {
            why = GB_EXIT_INPUT_EMPTY; /* nothing (or deactivated): leave it queued */
            break;
        }
        if (++P.idle_polls > a.idle_spin_polls) {
            P.sleep_ns = P.sleep_ns ? min(P.sleep_ns * 2, a.idle_backoff_max_ns) : 64;
            __nanosleep(P.sleep_ns);
        }
        if (lane == 0) {
            if ((P.idle_polls & 63) == 0 && !(test & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&ctl->heartbeat, ++P.beat);
            ks->prof_idle += (uint64_t)(clock64() - t0);
        }
    }
    return why;
}

/* One block per ring kernel (the 1): ptxas may give a thread all 128
 * registers, which keeps the hot loop, large-message call (dispatch.h)
 * included, free of spills. */
template <typename G> __global__ void __launch_bounds__(GBK_THREADS, 1) gbk_ring_kernel(gb_kargs_t a)
{
    const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
    const gb_ring_geom_t g = a.geom;
    const uint32_t S = g.slot_size, C16 = S / 16, mask = g.cap - 1;
    const uint32_t SP = gbk_smem_pitch(S); /* a slot's stride in shared memory */
    /* Slot sizes are powers of two (gb_rk_new): chunk -> slot by a shift, not
     * a division by a run-time value (some 20 instructions a load). */
    const uint32_t C16_LOG = (uint32_t)(__ffs((int)C16) - 1);
    unsigned char *s_in = (unsigned char *)gbk_smem;
    unsigned char *s_out = s_in + (size_t)a.window * SP;
    uint16_t *s_lane = (uint16_t *)(s_out + (size_t)a.window * SP); /* each request's table partition */
    uint16_t *s_bslot = s_lane + a.window; /* each request's entry in s_bid */
    /* Dispatch bids: an open-addressing table, one entry per key bidding in
     * the current round, holding its lowest position (GBK_NO_BID: free). */
    uint32_t *s_bid = (uint32_t *)(s_bslot + a.window);
    const uint32_t nbid = gbk_bid_slots(a.window);
    __shared__ uint32_t s_n, s_bad, s_term, s_active, s_test;
    __shared__ uint64_t s_head, s_known, s_done;
    __shared__ int s_reason;
    __shared__ uint32_t s_fence;

    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    gb_ring_indices_t *idx = (gb_ring_indices_t *)(a.region + gb_region_idx_off());
    unsigned char *in = a.region + gb_region_in_off();
    unsigned char *out = a.region + gb_region_out_off(g);

    /* Progress lives in device memory: cheap to resume after a relaunch. */
    gb_kstate_t ks = *a.kstate;
    gbk_progress_t P = {ks.tail, ks.tail, 0, 0, 0, 0, 0};
    int reason = GB_EXIT_NONE;
    const uint32_t ctl_thread = nthreads - 1; /* the thread with the fewest slot chunks */

    for (uint32_t i = tid; i < nbid; i += nthreads)
        s_bid[i] = GBK_NO_BID;
    long long clk0 = 0;
    uint64_t ns0 = 0;
    if (tid == 0) {
        s_test = 0; /* the control line's test_flags arrive with the first read */
        clk0 = clock64();
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
    }
    __syncthreads();

    for (;;) {
        if (!a.staging && !(a.flags & GBK_F_NO_FAST) && P.known_head <= P.tail) {
            /* Poll phase (warp 0), see the header comment. */
            if (tid < 32) {
                int why = poll_phase<G>(a, ctl, idx, in, out, s_in, s_out, nthreads, P, &ks);
                if (tid == 0) {
                    s_head = P.tail;
                    s_known = P.known_head;
                    s_done = P.done;
                    s_reason = why;
                    s_fence = P.resume_fence;
                }
            }
            __syncthreads();
            P.tail = s_head;
            P.known_head = s_known;
            P.done = s_done;
            P.resume_fence = s_fence;
            if (s_reason != GB_EXIT_NONE) {
                reason = s_reason;
                break;
            }
            __syncthreads(); /* s_head is rewritten below */
        }
        /* What to read. Mapped: when in_head says requests are published, read
         * exactly those (a window's worth); otherwise poll the one next slot.
         * Never read slots ahead of the producer: each such read pulls a line
         * out of the writing CPU's cache and slows the producer down. */
        uint32_t want;
        if (tid == 0)
            s_bad = 0;
        if (a.staging) {
            /* The host copies slots, then in_head, on one stream: a head that
             * covers a position means the slot's copy has completed. */
            if (tid == 0)
                s_head = ld_volatile(&idx->in_head);
            __syncthreads();
            P.known_head = s_head;
            __threadfence();
            want = (uint32_t)min((uint64_t)a.window, P.known_head - P.tail);
        } else {
            want = P.known_head > P.tail ? (uint32_t)min((uint64_t)a.window, P.known_head - P.tail) : 1u;
        }
        if (a.budget)
            want = (uint32_t)min((uint64_t)want, (uint64_t)a.budget - P.done);

        long long t0 = clock64();
        /* A. One PCIe round: the slots (up to GBK_READ_UNROLL chunks of 16 bytes a thread,
         * all loads issued before any is used), in_head and the control word. */
        const uint32_t total = want * C16;
        uint4 cword = make_uint4(0, 0, 0, 0);
        uint64_t head = 0;
        if (tid == ctl_thread) {
            /* is_active, should_terminate and test_flags in one 16-byte load */
            cword = ld_volatile_v4((const void *)&ctl->is_active);
            if (!a.staging)
                head = ld_volatile(&idx->in_head);
        }
        for (uint32_t base = 0; base < total; base += GBK_READ_UNROLL * nthreads) {
            uint4 v[GBK_READ_UNROLL];
#pragma unroll
            for (uint32_t k = 0; k < GBK_READ_UNROLL; k++) {
                uint32_t c = base + k * nthreads + tid;
                if (c < total) {
                    uint32_t i = c >> C16_LOG, off = (c & (C16 - 1)) * 16;
                    v[k] = ld_volatile_v4(in + (size_t)((P.tail + i) & mask) * S + off);
                }
            }
#pragma unroll
            for (uint32_t k = 0; k < GBK_READ_UNROLL; k++) {
                uint32_t c = base + k * nthreads + tid;
                if (c < total) {
                    uint32_t i = c >> C16_LOG, off = (c & (C16 - 1)) * 16;
                    *(uint4 *)(s_in + (size_t)i * SP + off) = v[k];
                }
            }
        }
        if (tid == ctl_thread) {
            s_active = cword.x;
            s_term = cword.y;
            s_test = cword.z;
            if (!a.staging)
                s_head = head;
        }
        if (tid == 0)
            s_n = want;
        __syncthreads();
        if (!a.staging) {
            /* The window is the stamped prefix (a polled slot may not be written yet). */
            for (uint32_t i = tid; i < want; i += nthreads) {
                const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(s_in + (size_t)i * SP);
                if (h->seq != gb_stamp(P.tail + i))
                    atomicMin(&s_n, i);
            }
            __syncthreads();
            P.known_head = max(P.known_head, s_head);
        }
        uint32_t n = s_n;
        const uint32_t term = s_term, active = s_active;
        if (term) {
            reason = GB_EXIT_TERMINATED;
            break;
        }
        if (tid == 0 && (int32_t)active != ks.active_seen) {
            ks.active_seen = (int32_t)active;
            st_volatile(&ctl->active_seen, (int32_t)active);
            __threadfence_system();
        }
        if (!active) {
            n = 0; /* deactivated: leave requests queued */
            P.resume_fence = 1;
        }
        if (n == 0) {
            if (a.budget) {
                reason = GB_EXIT_INPUT_EMPTY;
                break;
            }
            if (++P.idle_polls > a.idle_spin_polls) {
                P.sleep_ns = P.sleep_ns ? min(P.sleep_ns * 2, a.idle_backoff_max_ns) : 64;
                __nanosleep(P.sleep_ns);
            }
            if (tid == 0 && ((P.idle_polls & 63) == 0 || P.beat == 0) && !(s_test & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&ctl->heartbeat, ++P.beat);
            ks.prof_idle += (uint64_t)(clock64() - t0);
            __syncthreads(); /* s_* are rewritten by thread 0 next iteration */
            continue;
        }
        P.idle_polls = 0;
        P.sleep_ns = 0;
        if (P.resume_fence) { /* block-uniform: s_active */
            __threadfence_system(); /* after the host's table copy and its is_active store */
            P.resume_fence = 0;
        }
        if (!a.staging && S > GB_SNAPSHOT) {
            /* Only the first line came with the stamp; re-read the rest now
             * that the stamp (written after them) has been seen. */
            __threadfence_system();
            for (uint32_t c = tid; c < n * C16; c += nthreads) {
                uint32_t i = c >> C16_LOG, off = (c & (C16 - 1)) * 16;
                if (off < GB_SNAPSHOT)
                    continue;
                const unsigned char *src = in + (size_t)((P.tail + i) & mask) * S + off;
                *(uint4 *)(s_in + (size_t)i * SP + off) = ld_volatile_v4(src);
            }
        }
        for (uint32_t i = tid; i < n; i += nthreads)
            s_lane[i] = (uint16_t)gb_grain_lane(((const gb_slot_hdr_t *)(s_in + (size_t)i * SP))->key,
                                                a.tab.lanes);
        __syncthreads();
        long long t1 = clock64();

        /* B. dispatch in rounds. Each round runs, for every grain with
         * requests left in the window, its earliest one: a request's thread
         * enters its key in the bid table (compare-and-swap of a free entry,
         * or the entry already holding that key) with its position, the
         * lowest position per key stays (atomicMin), and after a barrier
         * that one runs. So each grain's requests run one at a time, in
         * window order (turn semantics), and a window of distinct grains
         * runs in one round; grains of one table partition may run at once
         * (gb_grain_find allows it). The barrier that ends a round also
         * makes its grain-state writes visible to the next round's threads.
         * The winner frees its bid entry at once: another thread of the same
         * key still checking compares with its own position, which neither
         * the winning bid nor a free entry matches, and no thread of another
         * key reads the entry again this round. So every entry is free when
         * the next round starts. */
        uint32_t bad = 0;
        const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL}; /* one thread per message: no team grains here */
        gb_grain_table_t tab = a.tab;
        tab.concurrent = a.flags & GBK_F_NO_VERIFY ? 2 : 1; /* keys of one partition run at once (gb_grain_find) */
        uint32_t pending = 0; /* bit j: request tid + j * nthreads not yet run */
        for (uint32_t j = 0, i = tid; i < n; j++, i += nthreads)
            pending |= 1u << j;
        int more = __syncthreads_or(pending != 0);
        uint32_t rounds = 0;
        long long bid_cycles = 0;
        while (more) {
            rounds++;
            const long long tb = clock64();
            for (uint32_t j = 0, i = tid; i < n; j++, i += nthreads) {
                if (!(pending >> j & 1u))
                    continue;
                const uint64_t key = ((const gb_slot_hdr_t *)(s_in + (size_t)i * SP))->key;
                uint32_t b = (uint32_t)gb_key_mix(key) & (nbid - 1);
                for (;;) { /* ends: fewer keys bid than the table has entries */
                    const uint32_t v = atomicCAS(&s_bid[b], GBK_NO_BID, i);
                    if (v == GBK_NO_BID)
                        break;
                    if (((const gb_slot_hdr_t *)(s_in + (size_t)v * SP))->key == key) {
                        atomicMin(&s_bid[b], i);
                        break;
                    }
                    b = (b + 1) & (nbid - 1);
                }
                s_bslot[i] = (uint16_t)b;
            }
            __syncthreads();
            bid_cycles += clock64() - tb;
            for (uint32_t j = 0, i = tid; i < n; j++, i += nthreads) {
                if (!(pending >> j & 1u) || s_bid[s_bslot[i]] != i)
                    continue;
                s_bid[s_bslot[i]] = GBK_NO_BID;
                pending &= ~(1u << j);
                const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(s_in + (size_t)i * SP);
                gb_slot_hdr_t oh;
                bad += gbi_dispatch_one<G>(&ctx, &tab, s_lane[i], h, s_in + (size_t)i * SP + GB_SLOT_HDR_SIZE,
                                        &oh, s_out + (size_t)i * SP + GB_SLOT_HDR_SIZE, S - GB_SLOT_HDR_SIZE,
                                        s_test);
                oh.seq = gb_stamp(P.tail + i - g.cap); /* "not yet" until step C's stamp store */
                *(gb_slot_hdr_t *)(s_out + (size_t)i * SP) = oh;
            }
            more = __syncthreads_or(pending != 0);
        }
        if (bad)
            atomicAdd(&s_bad, bad);
        __syncthreads();
        long long t2 = clock64();

        /* C. write replies, fence, then stamps. Telemetry goes with the
         * replies, before the fence: a host that sees a reply's stamp sees
         * counters that include it. */
        ks.processed += n;
        ks.errors += s_bad;
        ks.iterations++;
        bool wrote = false;
        if (tid == 0) {
            put_counters(ctl, ks, P.tail + n);
            wrote = true;
        }
        for (uint32_t c = tid; c < n * C16; c += nthreads) {
            uint32_t i = c >> C16_LOG, off = (c & (C16 - 1)) * 16;
            /* Plain stores, which the memory system may combine; the system
             * fence below orders them before the stamps. */
            *(uint4 *)(out + (size_t)((P.tail + i) & mask) * S + off) = *(const uint4 *)(s_out + (size_t)i * SP + off);
            wrote = true;
        }
        if (wrote)
            __threadfence_system();
        __syncthreads();
        for (uint32_t i = tid; i < n; i += nthreads) {
            gb_slot_hdr_t *o = (gb_slot_hdr_t *)(out + (size_t)((P.tail + i) & mask) * S);
            st_volatile(&o->seq, gb_stamp(P.tail + i));
        }
        if (a.staging)
            __syncthreads(); /* every stamp before out_head, which the host copies first */
        P.tail += n;
        P.done += n;
        if (tid == 0) {
            if (a.staging) {
                __threadfence();
                st_volatile(&idx->out_head, P.tail);
            }
            if (!(s_test & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&ctl->heartbeat, ++P.beat);
            prof_window(ks, t1 - t0, t2 - t1, clock64() - t2, n, rounds, bid_cycles);
        }
        if (a.budget && P.done >= a.budget) {
            reason = GB_EXIT_BUDGET_SPENT;
            break;
        }
        if (a.budget && P.known_head <= P.tail) {
            reason = GB_EXIT_INPUT_EMPTY; /* all this launch was issued for (see poll_phase) */
            break;
        }
        __syncthreads();
    }

    if (tid == 0) {
        uint64_t ns1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
        ks.prof_clk += (uint64_t)(clock64() - clk0);
        ks.prof_ns += ns1 - ns0;
        ks.tail = P.tail;
        *a.kstate = ks;
        /* All counters again: in staging relaunch the control line is
         * refreshed from the host before each launch. */
        put_counters(ctl, ks, P.tail);
        st_volatile(&ctl->exit_reason, (int32_t)reason);
        if (reason == GB_EXIT_TERMINATED) {
            __threadfence_system();
            st_volatile(&ctl->has_terminated, (int32_t)1);
        }
        __threadfence_system();
    }
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
    /* Ring kernel: per request two slot copies, two uint16 and up to four bid entries. */
    uint32_t w = (uint32_t)(budget / (team ? 2u * slot_size + 4u : 2u * gbk_smem_pitch(slot_size) + 20u));
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

template <typename G> static cudaError_t gbk_ring_launch(const gb_kargs_t *args, cudaStream_t stream)
{
    const size_t smem = gbk_ring_smem(args->window, args->geom.slot_size);
    cudaError_t err = gbk_allow_smem((const void *)gbk_ring_kernel<G>, smem);
    if (err != cudaSuccess)
        return err;
    gbk_ring_kernel<G><<<1, GBK_THREADS, smem, stream>>>(*args);
    return cudaGetLastError();
}

template <typename G>
static cudaError_t gbk_ring_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                     size_t ndeps, const gb_kargs_t *args)
{
    return gbk_add_node(node, graph, deps, ndeps, (const void *)gbk_ring_kernel<G>, 1, GBK_THREADS,
                        gbk_ring_smem(args->window, args->geom.slot_size), args);
}

#endif
