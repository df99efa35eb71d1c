/* The team kernel: the ring kernel of team grains (PageRank), whose every
 * message is big enough to want a whole thread block (team.h).
 *
 * Grid: block 0 is the reader, blocks 1..W are workers (W = one per SM).
 *   - Block 0 takes requests off the input ring one at a time (the stamp in
 *     mapped placement, in_head in staging placement, as the ring kernel does)
 *     and copies each into the *mirror*, a device-memory copy of the ring,
 *     then publishes `pub`. It also gathers the workers' progress into the
 *     control block (consumed, processed, errors; out_head for staging) and
 *     acknowledges activation changes.
 *   - Worker w scans the mirror in order and runs the requests whose key it
 *     owns (key % W == w) with all its threads, then writes the reply into
 *     out slot p (replies are positional, ring.h), fences at system scope and
 *     stamps it. A grain's messages therefore run one at a time, in order, on
 *     one block (turn semantics), and different partitions run on different
 *     blocks in parallel.
 * Why a mirror: a worker may still be scanning position p when the host,
 * having seen reply p from another worker, reuses input slot p for p + cap.
 * Block 0 only overwrites mirror slot p once every worker has scanned past
 * p - cap (the minimum of the workers' `scan`), so workers always read what
 * was written for the position they are at, from fast device memory.
 *
 * Stopping. Launch `epoch` (kstate) is known to every block at start; block 0
 * stops a launch by writing end = pub, then stop = epoch + 1; workers leave
 * once they reach `end` and say so in `exited`; block 0 waits for all of
 * them, then bumps the epoch. A late-starting worker still sees its own
 * launch's epoch, because block 0 bumps it only after every worker has left.
 * All blocks must be resident at once (block 0 waits on workers): W is the
 * SM count and a block needs far less than an SM.
 *
 * A template on the grain type's traits G, as the ring kernel; only the
 * workers' handler call depends on it. */
#ifndef GB_TEAM_KERNEL_CUH
#define GB_TEAM_KERNEL_CUH

#include <cuda_runtime.h>

#include "gpubridge/detail/dispatch.h"
#include "gpubridge/device/ldst.cuh"
#include "gpubridge/device/ring_kernel.cuh"

extern __shared__ uint4 gbk_team_dsmem[];


template <typename T> static __device__ __forceinline__ T ldv(const volatile T *p) { return *p; }
template <typename T> static __device__ __forceinline__ void stv(volatile T *p, T v) { *p = v; }

/* Bytes of a slot worth copying: header plus the claimed payload, bounded by
 * the slot, in 16-byte chunks. */
static __device__ __forceinline__ uint32_t slot_bytes(uint32_t len, uint32_t S)
{
    uint32_t b = GB_SLOT_HDR_SIZE + min(len, S - GB_SLOT_HDR_SIZE);
    return (b + 15u) & ~15u;
}

/* The reader's progress through a launch (block 0): the same in every
 * thread, except beat, which only thread 0 keeps. */
typedef struct gbk_reader {
    uint64_t pub;         /* requests below it are in the mirror */
    uint64_t launch_done; /* requests taken in this launch */
    uint64_t last_min;    /* the workers' progress last put on the control line */
    uint64_t beat;        /* heartbeats written */
    int acked;            /* active_seen as last acknowledged */
    uint32_t idle, sleep_ns;
} gbk_reader_t;

/* The reader's shared words: what thread 0 read or decided, for the block. */
typedef struct gbk_reader_shared {
    unsigned long long min, proc, err; /* the workers' least scan, processed, errors */
    uint64_t cword;                    /* is_active | should_terminate << 32 */
    uint32_t take, test;
    uint32_t len[GBK_TEAM_THREADS]; /* each taken request's payload length */
} gbk_reader_shared_t;

/* The test flags: one read over PCIe, by one thread, handed to the workers
 * in device memory (published with the first window), rather than every
 * thread of every block reading the mapped line at start: thousands of
 * reads of one host address, served one by one, on every relaunch. */
static __device__ __forceinline__ uint32_t reader_start(const gb_kargs_t &a, gbk_reader_shared_t &sh, gbk_reader_t &R)
{
    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    if (threadIdx.x == 0) {
        sh.test = ldv(&ctl->test_flags);
        stv(&a.team->test_flags, (uint64_t)sh.test);
        if (!(sh.test & GB_TEST_SKIP_HEARTBEAT))
            stv(&ctl->heartbeat, ++R.beat);
    }
    __syncthreads();
    return sh.test;
}

/* Gathers the workers' progress and the host's control word into sh;
 * returns the least position a worker has not scanned past. */
static __device__ __forceinline__ uint64_t reader_gather(const gb_kargs_t &a, gbk_reader_shared_t &sh)
{
    const uint32_t tid = threadIdx.x, nt = blockDim.x, W = a.team_workers;
    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    gb_team_state_t *T = a.team;
    if (tid == 0) {
        sh.min = ~0ull;
        sh.proc = 0;
        sh.err = 0;
        sh.cword = ldv((const volatile uint64_t *)&ctl->is_active);
    }
    __syncthreads();
    for (uint32_t w = tid; w < W; w += nt) {
        atomicMin(&sh.min, (unsigned long long)ldv(&T->w[w].scan));
        atomicAdd(&sh.proc, (unsigned long long)ldv(&T->w[w].processed));
        atomicAdd(&sh.err, (unsigned long long)ldv(&T->w[w].errors));
    }
    __syncthreads();
    return sh.min;
}

/* Thread 0: the workers' progress onto the control line (and out_head, in
 * staging placement) when it moved; activation changes acknowledged. */
static __device__ __forceinline__ void reader_publish(const gb_kargs_t &a, const gbk_reader_shared_t &sh,
                                                      gbk_reader_t &R, uint64_t minscan, uint32_t active)
{
    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    gb_ring_indices_t *idx = (gb_ring_indices_t *)(a.region + gb_region_idx_off());
    if (minscan != R.last_min) {
        stv(&ctl->processed, (uint64_t)sh.proc);
        stv(&ctl->errors, (uint64_t)sh.err);
        stv(&ctl->consumed, minscan);
        if (a.staging) {
            __threadfence();
            stv(&idx->out_head, minscan);
        }
        R.last_min = minscan;
    }
    /* Deactivation is acknowledged once nothing taken is still running. */
    int ack = active ? 1 : (minscan == R.pub ? 0 : R.acked);
    if (ack != R.acked) {
        stv(&ctl->active_seen, (int32_t)ack);
        R.acked = ack;
    }
    __threadfence_system();
}

/* Takes a window: every request published (in_head, which the host writes
 * after the slots and their stamps), as far as the mirror has room and the
 * launch has budget. One PCIe read when idle. Returns how many. */
static __device__ __forceinline__ uint32_t reader_take(const gb_kargs_t &a, gbk_reader_shared_t &sh,
                                                       const gbk_reader_t &R, uint64_t minscan, uint32_t active)
{
    gb_ring_indices_t *idx = (gb_ring_indices_t *)(a.region + gb_region_idx_off());
    if (threadIdx.x == 0) {
        uint64_t take = 0;
        if (active) {
            const uint64_t head = ldv(&idx->in_head);
            take = head > R.pub ? head - R.pub : 0;
            take = min(take, (uint64_t)a.geom.cap - (R.pub - minscan));
            take = min(take, (uint64_t)blockDim.x);
            if (a.budget)
                take = min(take, (uint64_t)a.budget - R.launch_done);
        }
        sh.take = (uint32_t)take;
        __threadfence_system(); /* in_head before the slots */
    }
    __syncthreads();
    return sh.take;
}

/* Copies the take requests from R.pub on into the mirror. */
static __device__ __forceinline__ void reader_copy(const gb_kargs_t &a, gbk_reader_shared_t &sh, const gbk_reader_t &R,
                                                   uint32_t take)
{
    const uint32_t tid = threadIdx.x, nt = blockDim.x;
    const uint32_t S = a.geom.slot_size, mask = a.geom.cap - 1;
    const unsigned char *in = a.region + gb_region_in_off();
    const uint64_t pub = R.pub;
    /* Phase 1: a thread per slot copies its first 64 bytes (header and
     * the small records, e.g. StartIterationCommand) in one round. */
    if (tid < take) {
        const unsigned char *src = in + (size_t)((pub + tid) & mask) * S;
        unsigned char *dst = a.mirror + (size_t)((pub + tid) & mask) * S;
        uint4 v[GB_SNAPSHOT / 16];
#pragma unroll
        for (uint32_t k = 0; k < GB_SNAPSHOT / 16; k++)
            v[k] = ld_volatile_v4(src + 16 * k);
#pragma unroll
        for (uint32_t k = 0; k < GB_SNAPSHOT / 16; k++)
            *(uint4 *)(dst + 16 * k) = v[k];
        sh.len[tid] = ((const gb_slot_hdr_t *)v)->len;
    }
    __syncthreads();
    /* Phase 2: the rest of the longer ones, the whole block per slot. */
    for (uint32_t i = 0; i < take; i++) {
        const uint32_t bytes = slot_bytes(sh.len[i], S);
        if (bytes <= GB_SNAPSHOT)
            continue;
        const unsigned char *src = in + (size_t)((pub + i) & mask) * S;
        unsigned char *dst = a.mirror + (size_t)((pub + i) & mask) * S;
        for (uint32_t o = GB_SNAPSHOT + tid * 64; o < bytes; o += nt * 64) {
            uint4 v[4];
#pragma unroll
            for (uint32_t k = 0; k < 4; k++)
                if (o + 16 * k < bytes)
                    v[k] = ld_volatile_v4(src + o + 16 * k);
#pragma unroll
            for (uint32_t k = 0; k < 4; k++)
                if (o + 16 * k < bytes)
                    *(uint4 *)(dst + o + 16 * k) = v[k];
        }
    }
    __threadfence();
    __syncthreads();
}

/* Stops the workers at what was handed out (pub) and waits until all have
 * left launch E. */
static __device__ __forceinline__ void reader_stop(const gb_kargs_t &a, uint64_t pub, uint64_t E)
{
    const uint32_t tid = threadIdx.x, nt = blockDim.x, W = a.team_workers;
    gb_team_state_t *T = a.team;
    if (tid == 0) {
        stv(&T->end, pub);
        __threadfence();
        stv(&T->stop, E + 1);
    }
    for (;;) {
        int left = 1;
        for (uint32_t w = tid; w < W; w += nt)
            if (ldv(&T->w[w].exited) != E + 1)
                left = 0;
        if (__syncthreads_and(left))
            break;
        __nanosleep(500);
    }
}

/* Thread 0, as the launch ends: the workers' totals and the reader's
 * progress into kstate and onto the control line, with the exit reason. */
static __device__ __forceinline__ void reader_finish(const gb_kargs_t &a, gb_kstate_t &ks, const gbk_reader_t &R,
                                                     uint64_t E, int reason)
{
    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    gb_ring_indices_t *idx = (gb_ring_indices_t *)(a.region + gb_region_idx_off());
    gb_team_state_t *T = a.team;
    unsigned long long proc = 0, err = 0;
    for (uint32_t w = 0; w < a.team_workers; w++) {
        proc += ldv(&T->w[w].processed);
        err += ldv(&T->w[w].errors);
    }
    ks.tail = R.pub;
    ks.processed = proc;
    ks.errors = err;
    ks.iterations += R.launch_done;
    ks.active_seen = R.acked;
    ks.epoch = E + 1;
    *a.kstate = ks;
    stv(&ctl->processed, (uint64_t)proc);
    stv(&ctl->errors, (uint64_t)err);
    stv(&ctl->iterations, ks.iterations);
    stv(&ctl->consumed, R.pub);
    if (a.staging)
        stv(&idx->out_head, R.pub);
    stv(&ctl->exit_reason, (int32_t)reason);
    if (reason == GB_EXIT_TERMINATED) {
        __threadfence_system();
        stv(&ctl->has_terminated, (int32_t)1);
    }
    __threadfence_system();
}

/* Block 0: takes requests into the mirror until the launch ends (see the
 * header comment), then stops the workers. */
static __device__ void team_reader(const gb_kargs_t &a)
{
    const uint32_t tid = threadIdx.x;
    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    __shared__ gbk_reader_shared_t sh;

    gb_kstate_t ks = *a.kstate;
    const uint64_t E = ks.epoch;
    gbk_reader_t R = {ldv(&a.team->pub), 0, ~0ull, 0, ks.active_seen, 0, 0};
    int reason = GB_EXIT_NONE;
    const uint32_t test = reader_start(a, sh, R);

    for (;;) {
        const uint64_t minscan = reader_gather(a, sh);
        const uint32_t active = (uint32_t)sh.cword, term = (uint32_t)(sh.cword >> 32);
        if (tid == 0)
            reader_publish(a, sh, R, minscan, active);
        if (term) {
            reason = GB_EXIT_TERMINATED;
            break;
        }
        const uint32_t take = reader_take(a, sh, R, minscan, active);
        const bool room = R.pub - minscan < a.geom.cap;
        if (take) {
            reader_copy(a, sh, R, take);
            R.pub += take;
            R.launch_done += take;
            if (tid == 0) {
                stv(&a.team->pub, R.pub);
                if (!(test & GB_TEST_SKIP_HEARTBEAT))
                    stv(&ctl->heartbeat, ++R.beat);
            }
            R.idle = 0;
            R.sleep_ns = 0;
            continue;
        }
        if (a.budget) {
            if (R.launch_done >= a.budget) {
                reason = GB_EXIT_BUDGET_SPENT;
                break;
            }
            if (!active || room) { /* nothing more to take (a full mirror drains by itself) */
                reason = GB_EXIT_INPUT_EMPTY;
                break;
            }
        }
        if (++R.idle > a.idle_spin_polls) {
            R.sleep_ns = R.sleep_ns ? min(R.sleep_ns * 2, a.idle_backoff_max_ns) : 64;
            __nanosleep(R.sleep_ns);
        }
        if (tid == 0 && (R.idle & 63) == 0 && !(test & GB_TEST_SKIP_HEARTBEAT))
            stv(&ctl->heartbeat, ++R.beat);
        __syncthreads();
    }
    reader_stop(a, R.pub, E);
    if (tid == 0)
        reader_finish(a, ks, R, E, reason);
}

/* Runs the request at mirror position pos on this block (it owns the key). */
template <typename G>
static __device__ void team_handle(const gb_kargs_t &a, uint32_t w, uint64_t pos, uint32_t test,
                                   unsigned long long *processed, unsigned long long *errors)
{
    const uint32_t tid = threadIdx.x, nt = blockDim.x;
    const gb_ring_geom_t g = a.geom;
    const uint32_t S = g.slot_size, mask = g.cap - 1, cap_pl = S - GB_SLOT_HDR_SIZE;
    unsigned char *s_in = (unsigned char *)gbk_team_dsmem, *s_out = s_in + S;
    __shared__ uint32_t s_pre, s_olen;
    __shared__ void *s_state;
    __shared__ double s_scratch[32];
    const unsigned char *src = a.mirror + (size_t)(pos & mask) * S;
    const gb_slot_hdr_t *mh = (const gb_slot_hdr_t *)src;
    const uint32_t bytes = slot_bytes(__ldcg(&mh->len), S);
    for (uint32_t o = tid * 16; o < bytes; o += nt * 16)
        *(uint4 *)(s_in + o) = __ldcg((const uint4 *)(src + o));
    __syncthreads();
    const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)s_in;
    if (tid == 0) {
        void *state = NULL;
        gb_grain_table_t tab = a.tab;
        s_pre = gbi_dispatch_pre(&tab, w, h, cap_pl, test, &state, NULL);
        s_state = state;
    }
    __syncthreads();
    uint32_t st = s_pre, out_len = 0, aux = 0;
    if (st == GBI_RUN_HANDLER) {
        const gb_grain_ctx_t ctx = {a.arena, a.arena_size, tid, nt, s_scratch, NULL, a.peers, a.n_peers, a.peer_self};
        const unsigned char *ipl = s_in + GB_SLOT_HDR_SIZE;
        unsigned char *opl = s_out + GB_SLOT_HDR_SIZE;
        uint32_t ilen = h->len, ocap = cap_pl;
        if (gbi_is_large(h)) /* payload and reply out of line (large_payload.h) */
            gbi_large_resolve(ipl, &ipl, &ilen, &opl, &ocap);
        st = G::on_message(&ctx, s_state, h->type, ipl, ilen, opl, ocap, &out_len, &aux);
    }
    __syncthreads();
    if (tid == 0) {
        gb_slot_hdr_t oh;
        oh.key = h->key;
        oh.corr = h->corr;
        oh.type = h->type;
        oh.status = (uint16_t)st;
        oh.len = st == GB_SLOT_OK ? out_len : 0;
        oh.aux = aux;
        oh.seq = gb_stamp(pos - g.cap); /* "not yet" until the stamp below */
        *(gb_slot_hdr_t *)s_out = oh;
        s_olen = oh.len;
        *processed += 1;
        *errors += st != GB_SLOT_OK;
    }
    __syncthreads();
    unsigned char *out = a.region + gb_region_out_off(g) + (size_t)(pos & mask) * S;
    const uint32_t obytes = slot_bytes(s_olen, S);
    for (uint32_t o = tid * 16; o < obytes; o += nt * 16)
        *(uint4 *)(out + o) = *(const uint4 *)(s_out + o);
    __threadfence_system();
    __syncthreads();
    if (tid == 0) {
        stv(&a.team->w[w].processed, (uint64_t)*processed);
        stv(&a.team->w[w].errors, (uint64_t)*errors);
        stv(&((gb_slot_hdr_t *)out)->seq, gb_stamp(pos));
    }
}

template <typename G> static __device__ void team_worker(const gb_kargs_t &a, uint32_t w)
{
    const uint32_t tid = threadIdx.x, W = a.team_workers, mask = a.geom.cap - 1;
    gb_team_state_t *T = a.team;
    __shared__ uint64_t s_to;
    __shared__ uint32_t s_test;
    __shared__ uint8_t s_own[GBK_TEAM_THREADS];
    const uint64_t E = ldv((const volatile uint64_t *)&a.kstate->epoch);
    uint64_t pos = ldv(&T->w[w].scan);
    unsigned long long processed = ldv(&T->w[w].processed), errors = ldv(&T->w[w].errors);
    for (;;) {
        if (tid == 0) {
            uint32_t idle = 0, sleep_ns = 0;
            for (;;) {
                uint64_t p = ldv(&T->pub);
                if (p > pos) {
                    /* Acquire: what was written before these messages were
                     * published (PageRank's contributions, by other blocks)
                     * is what the block reads; on sm_70+ this also drops the
                     * SM's L1 (CCTL.IVALL), so even cached loads see it. */
                    __threadfence();
                    s_to = p;
                    s_test = (uint32_t)ldv(&T->test_flags); /* the reader set it before pub */
                    break;
                }
                if (ldv(&T->stop) == E + 1 && pos >= ldv(&T->end)) {
                    s_to = 0; /* leave */
                    break;
                }
                if (++idle > a.idle_spin_polls) {
                    sleep_ns = sleep_ns ? min(sleep_ns * 2, a.idle_backoff_max_ns) : 64;
                    __nanosleep(sleep_ns);
                }
            }
        }
        __syncthreads();
        const uint64_t to = s_to;
        const uint32_t test = s_test; /* set when to != 0; unused otherwise */
        __syncthreads(); /* s_to and s_test are rewritten next round */
        if (to == 0)
            break;
        /* Which of the window's requests are ours: a thread per position
         * reads the key, then the block runs ours in order. */
        while (pos < to) {
            const uint32_t chunk = (uint32_t)min((uint64_t)blockDim.x, to - pos);
            if (tid < chunk) {
                const gb_slot_hdr_t *mh =
                    (const gb_slot_hdr_t *)(a.mirror + (size_t)((pos + tid) & mask) * a.geom.slot_size);
                s_own[tid] = __ldcg(&mh->key) % W == w;
            }
            __syncthreads();
            for (uint32_t k = 0; k < chunk; k++)
                if (s_own[k])
                    team_handle<G>(a, w, pos + k, test, &processed, &errors);
            __syncthreads(); /* s_own is rewritten next chunk */
            pos += chunk;
        }
        if (tid == 0) {
            __threadfence();
            stv(&T->w[w].scan, pos);
        }
    }
    if (tid == 0) {
        __threadfence();
        stv(&T->w[w].exited, E + 1);
    }
}

template <typename G> __global__ void __launch_bounds__(GBK_TEAM_THREADS, 2) gbk_team_kernel(gb_kargs_t a)
{
    if (blockIdx.x == 0)
        team_reader(a);
    else
        team_worker<G>(a, blockIdx.x - 1);
}

static inline size_t gbk_team_smem(uint32_t slot_size) { return 2 * (size_t)slot_size; }

template <typename G> static uint32_t gbk_team_workers(int device, uint32_t slot_size, uint32_t ring_kernels)
{
    int sms = 0, per_sm = 0;
    size_t smem = gbk_team_smem(slot_size);
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 2)
        return 1;
    gbk_allow_smem((const void *)gbk_team_kernel<G>, smem);
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gbk_team_kernel<G>, GBK_TEAM_THREADS, smem) !=
        cudaSuccess)
        per_sm = 1;
    cudaGetLastError();
    /* Every block must be resident at once, for this kernel and for the other
     * team kernel of the family, with room left for the one-block ring
     * kernels: an SM's worth of slack for each (at least two), or a
     * persistent ring kernel started after the team kernels finds no SM. */
    const long slack = ring_kernels > 2 ? ring_kernels : 2;
    long fit = ((long)per_sm * sms - slack * per_sm) / 2 - 1;
    long w = sms - 1 < fit ? sms - 1 : fit;
    return w >= 1 ? (uint32_t)w : 1;
}

template <typename G> static cudaError_t gbk_team_launch(const gb_kargs_t *args, cudaStream_t stream)
{
    const size_t smem = gbk_team_smem(args->geom.slot_size);
    cudaError_t err = gbk_allow_smem((const void *)gbk_team_kernel<G>, smem);
    if (err != cudaSuccess)
        return err;
    gbk_team_kernel<G><<<1 + args->team_workers, GBK_TEAM_THREADS, smem, stream>>>(*args);
    return cudaGetLastError();
}

template <typename G>
static cudaError_t gbk_team_add_node(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                     size_t ndeps, const gb_kargs_t *args)
{
    return gbk_add_node(node, graph, deps, ndeps, (const void *)gbk_team_kernel<G>, 1 + args->team_workers,
                        GBK_TEAM_THREADS, gbk_team_smem(args->geom.slot_size), args);
}

#endif
