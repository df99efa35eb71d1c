/* The ring kernel: one block whose threads are the grain type's owner lanes.
 *
 * Each iteration is one dispatch window:
 *   A. read: the block copies up to `cur` request slots into shared memory in
 *      one coalesced pass (16 bytes a thread, 4 adjacent threads per 64-byte
 *      line), and thread 0 reads the control line alongside, so a single-
 *      message round trip pays one PCIe read round. A slot counts when its
 *      stamp matches; the window is the stamped prefix. (Staging placement:
 *      in_head is read first; device memory makes that cheap.)
 *   B. dispatch: each thread handles, in order, the window's requests whose
 *      key it owns, writing replies into shared memory.
 *   C. write: the block copies the replies out coalesced, with the stamp left
 *      at its old value; every thread fences at system scope; then one store
 *      per reply sets its stamp. A host that sees the stamp sees the reply.
 * The window adapts: small (one 2 KiB read) while traffic is light, the full
 * configured window while the previous one came back full.
 *
 * Idle: spin `idle_spin_polls` windows, then __nanosleep with a doubling
 * back-off up to `idle_backoff_max_ns`. A relaunched kernel (budget > 0)
 * exits instead of idling. */
#include <cuda_runtime.h>

#include "dispatch.h"
#include "ring_kernel.h"

#define GBK_SMALL_BYTES 2048u /* request bytes read per window when traffic is light */

static __device__ __forceinline__ uint4 ld_volatile_v4(const void *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

static __device__ __forceinline__ void st_volatile_v4(void *p, uint4 v)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

template <typename T> static __device__ __forceinline__ T ld_volatile(const volatile T *p) { return *p; }

template <typename T> static __device__ __forceinline__ void st_volatile(volatile T *p, T v) { *p = v; }

extern __shared__ uint4 gbk_smem[];

__global__ void __launch_bounds__(GBK_THREADS) gbk_ring_kernel(gb_kargs_t a)
{
    const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
    const gb_ring_geom_t g = a.geom;
    const uint32_t S = g.slot_size, C16 = S / 16, mask = g.cap - 1;
    unsigned char *s_in = (unsigned char *)gbk_smem;
    unsigned char *s_out = s_in + (size_t)a.window * S;
    uint16_t *s_lane = (uint16_t *)(s_out + (size_t)a.window * S);
    __shared__ uint32_t s_n, s_bad, s_term, s_active, s_test;
    __shared__ uint64_t s_avail;

    gb_control_t *ctl = (gb_control_t *)(a.region + gb_region_ctl_off());
    gb_ring_indices_t *idx = (gb_ring_indices_t *)(a.region + gb_region_idx_off());
    unsigned char *in = a.region + gb_region_in_off();
    unsigned char *out = a.region + gb_region_out_off(g);

    /* Progress lives in device memory: cheap to resume after a relaunch. */
    gb_kstate_t ks = *a.kstate;
    uint64_t tail = ks.tail, launch_done = 0;
    const uint32_t small = max(1u, min(a.window, GBK_SMALL_BYTES / S));
    uint32_t cur = small, idle_polls = 0, sleep_ns = 0;
    uint64_t beat = 0;
    int reason = GB_EXIT_NONE;

    if (tid == 0) {
        s_test = ld_volatile(&ctl->test_flags);
        /* First beat at once: the host's start-up deadline waits for it. */
        if (!(s_test & GB_TEST_SKIP_HEARTBEAT))
            st_volatile(&ctl->heartbeat, ++beat);
    }
    __syncthreads();

    for (;;) {
        uint32_t want = cur;
        if (a.budget)
            want = (uint32_t)min((uint64_t)want, (uint64_t)a.budget - launch_done);
        if (tid == 0) {
            s_term = ld_volatile(&ctl->should_terminate);
            s_active = ld_volatile(&ctl->is_active);
            s_bad = 0;
            if (a.staging) {
                /* The host copies slots, then in_head, on one stream: a head
                 * that covers a position means the slot's copy completed. */
                uint64_t head = ld_volatile(&idx->in_head);
                s_avail = head - tail;
            }
        }
        if (a.staging) {
            __syncthreads();
            want = (uint32_t)min((uint64_t)want, s_avail);
            __threadfence();
        }
        /* A. read the window's slots. */
        for (uint32_t c = tid; c < want * C16; c += nthreads) {
            uint32_t i = c / C16, off = (c - i * C16) * 16;
            const unsigned char *src = in + (size_t)((tail + i) & mask) * S + off;
            *(uint4 *)(s_in + (size_t)i * S + off) = ld_volatile_v4(src);
        }
        if (tid == 0)
            s_n = want;
        __syncthreads();
        if (!a.staging) {
            for (uint32_t i = tid; i < want; i += nthreads) {
                const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(s_in + (size_t)i * S);
                if (h->seq != gb_stamp(tail + i))
                    atomicMin(&s_n, i);
            }
            __syncthreads();
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
        if (!active)
            n = 0; /* deactivated: leave requests queued */
        if (n == 0) {
            if (a.budget) {
                reason = GB_EXIT_INPUT_EMPTY;
                break;
            }
            cur = small;
            if (++idle_polls > a.idle_spin_polls) {
                sleep_ns = sleep_ns ? min(sleep_ns * 2, a.idle_backoff_max_ns) : 64;
                __nanosleep(sleep_ns);
            }
            if (tid == 0 && (idle_polls & 63) == 0 && !(s_test & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&ctl->heartbeat, ++beat);
            __syncthreads(); /* s_* are rewritten by thread 0 next iteration */
            continue;
        }
        idle_polls = 0;
        sleep_ns = 0;
        if (!a.staging && S > GB_SNAPSHOT) {
            /* Only the first line came with the stamp; re-read the rest now
             * that the stamp (written after them) has been seen. */
            __threadfence_system();
            for (uint32_t c = tid; c < n * C16; c += nthreads) {
                uint32_t i = c / C16, off = (c - i * C16) * 16;
                if (off < GB_SNAPSHOT)
                    continue;
                const unsigned char *src = in + (size_t)((tail + i) & mask) * S + off;
                *(uint4 *)(s_in + (size_t)i * S + off) = ld_volatile_v4(src);
            }
        }
        for (uint32_t i = tid; i < n; i += nthreads)
            s_lane[i] = (uint16_t)gb_grain_lane(((const gb_slot_hdr_t *)(s_in + (size_t)i * S))->key,
                                                nthreads);
        __syncthreads();

        /* B. dispatch: this thread's requests, in window order. */
        uint32_t bad = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (s_lane[i] != tid)
                continue;
            const gb_slot_hdr_t *h = (const gb_slot_hdr_t *)(s_in + (size_t)i * S);
            gb_slot_hdr_t oh;
            bad += gbi_dispatch_one(a.kind, &a.tab, tid, h, s_in + (size_t)i * S + GB_SLOT_HDR_SIZE, &oh,
                                    s_out + (size_t)i * S + GB_SLOT_HDR_SIZE, S - GB_SLOT_HDR_SIZE,
                                    s_test);
            oh.seq = gb_stamp(tail + i - g.cap); /* "not yet" until step C's stamp store */
            *(gb_slot_hdr_t *)(s_out + (size_t)i * S) = oh;
        }
        if (bad)
            atomicAdd(&s_bad, bad);
        __syncthreads();

        /* C. write replies, fence, then stamps. */
        for (uint32_t c = tid; c < n * C16; c += nthreads) {
            uint32_t i = c / C16, off = (c - i * C16) * 16;
            st_volatile_v4(out + (size_t)((tail + i) & mask) * S + off,
                           *(const uint4 *)(s_out + (size_t)i * S + off));
        }
        __threadfence_system();
        __syncthreads();
        for (uint32_t i = tid; i < n; i += nthreads) {
            gb_slot_hdr_t *o = (gb_slot_hdr_t *)(out + (size_t)((tail + i) & mask) * S);
            st_volatile(&o->seq, gb_stamp(tail + i));
        }
        tail += n;
        launch_done += n;
        ks.processed += n;
        ks.errors += s_bad;
        ks.iterations++;
        if (tid == 0) {
            if (a.staging) {
                __threadfence();
                st_volatile(&idx->out_head, tail);
            }
            st_volatile(&ctl->processed, ks.processed);
            st_volatile(&ctl->errors, ks.errors);
            st_volatile(&ctl->iterations, ks.iterations);
            st_volatile(&ctl->consumed, tail);
            if (!(s_test & GB_TEST_SKIP_HEARTBEAT))
                st_volatile(&ctl->heartbeat, ++beat);
        }
        cur = n == cur ? a.window : small;
        if (a.budget && launch_done >= a.budget) {
            reason = GB_EXIT_BUDGET_SPENT;
            break;
        }
        __syncthreads();
    }

    if (tid == 0) {
        ks.tail = tail;
        *a.kstate = ks;
        st_volatile(&ctl->consumed, tail);
        st_volatile(&ctl->exit_reason, (int32_t)reason);
        if (reason == GB_EXIT_TERMINATED) {
            __threadfence_system();
            st_volatile(&ctl->has_terminated, (int32_t)1);
        }
        __threadfence_system();
    }
}

extern "C" size_t gbk_ring_smem(uint32_t window, uint32_t slot_size)
{
    return (size_t)window * slot_size * 2 + (size_t)window * sizeof(uint16_t);
}

extern "C" uint32_t gbk_ring_max_window(int device, uint32_t slot_size)
{
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
        optin = 48 * 1024;
    size_t budget = (size_t)optin - 1024; /* static __shared__ variables */
    uint32_t w = (uint32_t)(budget / (2u * slot_size + 2u));
    return w ? w : 1;
}

extern "C" cudaError_t gbk_ring_launch(const gb_kargs_t *args, cudaStream_t stream)
{
    size_t smem = gbk_ring_smem(args->window, args->geom.slot_size);
    if (smem > 48 * 1024) {
        cudaError_t err = cudaFuncSetAttribute(gbk_ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)smem);
        if (err != cudaSuccess)
            return err;
    }
    gbk_ring_kernel<<<1, GBK_THREADS, smem, stream>>>(*args);
    return cudaGetLastError();
}
