/* Relaunch mode: for hosts that cannot keep a kernel resident (WSL2, where a
 * resident kernel blocks every host CUDA call; display watchdogs; no mapped
 * pinned memory). The ring kernel drains up to max_messages_per_launch
 * requests and exits with a reason; the host launches it again only while
 * requests are pending, so an idle grain type costs no GPU and no CPU.
 *
 * Each launch is a CUDA graph instantiated once per ring kernel:
 *   mapped placement:  the kernel alone (it reads and writes the rings in
 *                      mapped memory; the host sees replies by their stamps);
 *   pinned staging:    launch header in -> request slots in -> kernel ->
 *                      kernel's control line out -> reply slots out, with the
 *                      two slot copies re-pointed at this launch's range
 *                      (cudaGraphExecMemcpyNodeSetParams1D) before each launch;
 *   malloc staging:    the same copies and launch issued one by one and waited
 *                      for (graphs cannot copy from pageable memory without
 *                      staging it themselves).
 * Staging replies land in a bounce buffer and go into the ring stamp-last
 * after the launch (put_replies): a copy straight into the ring could show a
 * consumer a reply's stamp before its payload.
 * A launch's range never wraps the ring: a wrapping batch takes two launches.
 *
 * A few requests (up to gbk_inline_max) go out as an inline launch instead
 * (inline_kernel.h): they ride in the kernel's parameters, so the kernel
 * reads nothing across PCIe and waits for no copy-in. Its graphs, one per
 * inline kernel (small and full), are the kernel alone (mapped; pinned
 * staging with a mapped outbox) or the kernel -> one fixed-size outbox
 * copy; malloc staging launches it plainly. */
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda_internal.h"
#include "log.h"

#define LHDR_SIZE (sizeof(gb_control_t) + sizeof(gb_ring_indices_t))

/* Mapped placement: how often launches in flight are queried for when
 * nothing waits on them (see progress). */
#define QUERY_EVERY_NS 20000u

/* Mapped placement: launches in flight at most while all of them are inline
 * (see inline_fits). Reaching it costs a stream query before the next launch. */
#define INLINE_QUEUE 64

/* cudaStreamQuery on the kernel's stream, its time counted (bench_ring). */
static cudaError_t query(cuda_backend_t *b)
{
    const uint64_t t0 = gb_now_ns();
    cudaError_t e = cudaStreamQuery(b->kstream);
    b->last_query_ns = gb_now_ns();
    b->prof.query_ns += b->last_query_ns - t0;
    b->prof.queries++;
    return e;
}

/* Counts a launch that began at t0 (gb_now_ns). */
static void count_launch(cuda_backend_t *b, uint64_t t0)
{
    b->prof.launch_ns += gb_now_ns() - t0;
    b->prof.launches++;
}

static size_t slot_off(const gb_rk_t *rk, uint64_t pos)
{
    return (size_t)(pos & (rk->geom.cap - 1)) * rk->geom.slot_size;
}

static void inline_free(cuda_backend_t *b)
{
    for (int k = 0; k < 2; k++) {
        if (b->igexec[k])
            cudaGraphExecDestroy(b->igexec[k]);
        if (b->igraph[k])
            cudaGraphDestroy(b->igraph[k]);
        b->igexec[k] = NULL;
        b->igraph[k] = NULL;
    }
    cudaFree(b->dev_outbox);
    if (b->host_outbox_pinned)
        cudaFreeHost(b->host_outbox);
    else
        free(b->host_outbox);
    b->dev_outbox = NULL;
    b->host_outbox = NULL;
    b->host_outbox_pinned = 0;
    b->inline_max = 0;
}

/* The inline launch's graph (inline kernel [-> outbox copy]) and, for
 * staging, its outbox: mapped pinned memory the kernel writes directly where
 * that can be had (pinned staging; GBK_F_OUTBOX_COPY refuses it), else
 * device memory and a copy; malloc staging launches it plainly. Team grains
 * keep the team kernel; GBK_F_NO_INLINE turns inline launches off
 * (bench_ring compares). Inline launches are an optimisation: when their
 * setup fails, the grain type goes on with ring kernel launches alone. */
static gb_err inline_setup(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const uint32_t S = rk->geom.slot_size;
    uint32_t nmax = gbk_inline_max(S);
    b->inline_max = 0;
    if (b->args.team_workers || !b->gpu->inline_launch || (b->args.flags & GBK_F_NO_INLINE) || nmax == 0)
        return GB_OK;
    if (nmax > b->args.budget)
        nmax = b->args.budget;
    const size_t ob = GBK_INLINE_OUT_SIZE(nmax, S);
    unsigned char *outbox = NULL, *host = NULL; /* the kernel's view; the host's */
    cudaError_t e = cudaSuccess;
    if (rk->placement == GB_PLACEMENT_DEVICE_PINNED && !(b->args.flags & GBK_F_OUTBOX_COPY)) {
        /* The region could not be mapped; a small outbox often can. */
        if (cudaHostAlloc((void **)&host, ob, cudaHostAllocMapped) == cudaSuccess) {
            b->host_outbox = host;
            b->host_outbox_pinned = 1;
            if (cudaHostGetDevicePointer((void **)&outbox, host, 0) != cudaSuccess) {
                inline_free(b);
                outbox = NULL;
            }
        }
        cudaGetLastError();
    }
    if (gbi_cuda_staging(rk) && !outbox) {
        e = cudaMalloc((void **)&b->dev_outbox, ob);
        outbox = b->dev_outbox;
        if (e == cudaSuccess && rk->placement == GB_PLACEMENT_DEVICE_PINNED) {
            e = cudaHostAlloc((void **)&host, ob, cudaHostAllocDefault);
            if (e == cudaSuccess) {
                b->host_outbox = host;
                b->host_outbox_pinned = 1;
            }
        } else if (e == cudaSuccess && !(b->host_outbox = (unsigned char *)malloc(ob))) {
            e = cudaErrorMemoryAllocation;
        }
    }
    memset(&b->inl, 0, sizeof b->inl);
    b->inl.h.a = gbk_inline_args_of(&b->args);
    b->inl.h.outbox = outbox;
    /* Up to two graphs: the small kernel's for launches whose requests fit
     * GBK_INLINE_SMALL (a lone request, where a slot fits), the full
     * kernel's for larger ones (where a launch can carry more). */
    const uint32_t nsmall = S <= GBK_INLINE_SMALL ? min(nmax, GBK_INLINE_SMALL / S) : 0;
    for (int k = 0; k < 2 && e == cudaSuccess && rk->placement != GB_PLACEMENT_DEVICE_MALLOC; k++) {
        const uint32_t n = k ? nsmall : nmax > nsmall ? nmax : 0;
        if (n == 0)
            continue;
        b->inl.h.n = n; /* picks the kernel (gbk_inline_add_node) */
        cudaGraphNode_t n_copy;
        e = cudaGraphCreate(&b->igraph[k], 0);
        if (e == cudaSuccess)
            e = b->gpu->inline_add_node(&b->n_ik[k], b->igraph[k], &b->inl);
        if (e == cudaSuccess && b->dev_outbox)
            e = cudaGraphAddMemcpyNode1D(&n_copy, b->igraph[k], &b->n_ik[k], 1, b->host_outbox, b->dev_outbox,
                                         GBK_INLINE_OUT_SIZE(n, S), cudaMemcpyDeviceToHost);
        if (e == cudaSuccess)
            e = cudaGraphInstantiate(&b->igexec[k], b->igraph[k], 0);
    }
    if (e != cudaSuccess) {
        GB_WARN("ring kernel '%s': no inline launches (%s); ring kernel launches only", rk->type_name,
                cudaGetErrorString(e));
        cudaGetLastError();
        inline_free(b);
        return GB_OK;
    }
    b->inline_max = nmax;
    return GB_OK;
}

gb_err gbi_relaunch_setup(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const size_t in_off = gb_region_in_off(), out_off = gb_region_out_off(rk->geom), S = rk->geom.slot_size;
    const size_t kline = gb_region_ctl_off() + GB_LINE;
    cudaGraphNode_t n_hdr, n_k, n_kl;
    b->args.budget = rk->p.max_messages_per_launch ? rk->p.max_messages_per_launch : 4096;
    b->relaunch = 1;
    if (gbi_cuda_staging(rk) && !b->lhdr) {
        if (cudaHostAlloc((void **)&b->lhdr, LHDR_SIZE, cudaHostAllocDefault) == cudaSuccess) {
            b->lhdr_pinned = 1;
        } else {
            cudaGetLastError();
            b->lhdr = (unsigned char *)malloc(LHDR_SIZE);
            if (!b->lhdr)
                return GB_ERR_NOMEM;
        }
        memset(b->lhdr, 0, LHDR_SIZE);
    }
    /* A staging launch never wraps the ring: at most min(budget, cap) replies. */
    const size_t bounce = (size_t)(b->args.budget < rk->geom.cap ? b->args.budget : rk->geom.cap) * S;
    if (rk->placement == GB_PLACEMENT_DEVICE_PINNED && !b->bounce) {
        /* A graph's copies need pinned memory. */
        CK(cudaHostAlloc((void **)&b->bounce, bounce, cudaHostAllocDefault), "cudaHostAlloc reply bounce buffer");
        b->bounce_pinned = 1;
    } else if (rk->placement == GB_PLACEMENT_DEVICE_MALLOC && !b->bounce &&
               !(b->bounce = (unsigned char *)malloc(bounce))) {
        return GB_ERR_NOMEM;
    }
    if (rk->placement == GB_PLACEMENT_DEVICE_MALLOC)
        return inline_setup(rk); /* issued call by call, see the header comment */
    CK(cudaGraphCreate(&b->graph, 0), "cudaGraphCreate");
    if (rk->placement == GB_PLACEMENT_MAPPED) {
        CK(b->gpu->add_node(&n_k, b->graph, NULL, 0, &b->args), "graph kernel node");
    } else {
        CK(cudaGraphAddMemcpyNode1D(&n_hdr, b->graph, NULL, 0, b->dev, b->lhdr, LHDR_SIZE,
                                    cudaMemcpyHostToDevice),
           "graph header copy");
        CK(cudaGraphAddMemcpyNode1D(&b->n_in, b->graph, &n_hdr, 1, b->dev + in_off, rk->region + in_off, S,
                                    cudaMemcpyHostToDevice),
           "graph slots copy");
        CK(b->gpu->add_node(&n_k, b->graph, &b->n_in, 1, &b->args), "graph kernel node");
        CK(cudaGraphAddMemcpyNode1D(&n_kl, b->graph, &n_k, 1, rk->region + kline, b->dev + kline, GB_LINE,
                                    cudaMemcpyDeviceToHost),
           "graph control copy");
        CK(cudaGraphAddMemcpyNode1D(&b->n_out, b->graph, &n_kl, 1, rk->region + out_off, b->dev + out_off, S,
                                    cudaMemcpyDeviceToHost),
           "graph replies copy");
    }
    CK(cudaGraphInstantiate(&b->gexec, b->graph, 0), "cudaGraphInstantiate");
    return inline_setup(rk);
fail:
    return GB_ERR_CUDA;
}

void gbi_relaunch_free(cuda_backend_t *b)
{
    if (b->gexec)
        cudaGraphExecDestroy(b->gexec);
    if (b->graph)
        cudaGraphDestroy(b->graph);
    inline_free(b);
    if (b->bounce_pinned)
        cudaFreeHost(b->bounce);
    else
        free(b->bounce);
    b->bounce = NULL;
    b->bounce_pinned = 0;
    if (b->lhdr_pinned)
        cudaFreeHost(b->lhdr);
    else
        free(b->lhdr);
    b->gexec = NULL;
    b->graph = NULL;
    b->lhdr = NULL;
}

/* Replies [from, from + n), slot after slot at src, into the output ring.
 * Each reply's stamp goes last (release), so a consumer that sees it sees
 * the whole reply: a plain copy (the driver's, into pageable memory) may
 * store the stamp before the payload. */
static void put_replies(gb_rk_t *rk, const unsigned char *src, uint64_t from, uint64_t n)
{
    const uint32_t S = rk->geom.slot_size;
    const size_t seq_off = offsetof(gb_slot_hdr_t, seq), tail = seq_off + sizeof(uint32_t);
    for (uint64_t i = 0; i < n; i++) {
        const gb_slot_hdr_t *r = (const gb_slot_hdr_t *)(src + (size_t)i * S);
        gb_slot_hdr_t *d = gb_slot_at(rk->out, rk->geom, from + i);
        memcpy(d, r, seq_off);
        memcpy((unsigned char *)d + tail, (const unsigned char *)r + tail, S - tail);
        __atomic_store_n(&d->seq, r->seq, __ATOMIC_RELEASE);
    }
}

/* Staging, after an inline launch: its replies and counters from the host
 * outbox into the ring and onto the control line. */
static void apply_outbox(gb_rk_t *rk, uint32_t n)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const gbk_inline_out_t *h = (const gbk_inline_out_t *)b->host_outbox;
    /* Counters before replies, as the kernels write them: a consumer that
     * sees a reply sees counters that include it. */
    rk->ctl->processed = h->processed;
    rk->ctl->errors = h->errors;
    rk->ctl->iterations = h->iterations;
    rk->ctl->consumed = h->consumed;
    rk->ctl->exit_reason = h->exit_reason;
    if (!(rk->ctl->test_flags & GB_TEST_SKIP_HEARTBEAT))
        rk->ctl->heartbeat = rk->ctl->heartbeat + 1;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    put_replies(rk, b->host_outbox + sizeof *h, b->launch_from, n);
}

/* After a launch: the host's view of what the kernel did. */
static void finish_launch(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    b->in_flight = 0;
    gbi_cuda_set_resident(b, 0);
    if (b->inline_n) {
        apply_outbox(rk, b->inline_n);
        b->inline_n = 0;
    }
    if (b->bounce_n) {
        /* What the kernel handled: it stops early when deactivated. */
        uint64_t done = rk->ctl->consumed - b->launch_from;
        put_replies(rk, b->bounce, b->launch_from, done < b->bounce_n ? done : b->bounce_n);
        b->bounce_n = 0;
    }
    if (gbi_cuda_staging(rk))
        b->pulled_out = rk->ctl->consumed;
    /* The kernel only reports activation changes it acts on; between launches
     * the host's flag is the truth. */
    rk->ctl->active_seen = rk->ctl->is_active;
    rk->ctl->launches = b->launches;
}

static gb_err launch_once(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const size_t in_off = gb_region_in_off(), out_off = gb_region_out_off(rk->geom), S = rk->geom.slot_size;
    const size_t kline = gb_region_ctl_off() + GB_LINE;
    uint64_t from = rk->ctl->consumed, published = __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE);
    uint64_t to = published; /* mapped: what this launch is sure to see */
    if (to - from > b->args.budget)
        to = from + b->args.budget;
    uint64_t wrap = (from | (rk->geom.cap - 1)) + 1;
    if (gbi_cuda_staging(rk) && to > wrap)
        to = wrap; /* one contiguous range per launch */
    b->launch_from = from;
    b->launch_to = to;
    b->exact = 0; /* a ring kernel reads in_head and may take more than [from, to) */
    cudaError_t e = cudaSuccess;
    if (gbi_cuda_staging(rk)) {
        /* The header: the host's control line and an in_head that ends at this
         * launch's range (the kernel trusts in_head in staging placement). */
        memcpy(b->lhdr, rk->ctl, GB_LINE);
        memset(b->lhdr + GB_LINE, 0, LHDR_SIZE - GB_LINE);
        /* The kernel line comes back after the launch: carry the host's own
         * fields in it. */
        uint64_t launches = b->launches + 1;
        memcpy(b->lhdr + offsetof(gb_control_t, launches), &launches, sizeof launches);
        memcpy(b->lhdr + gb_region_idx_off(), &to, sizeof to);
        size_t off = slot_off(rk, from), bytes = (size_t)(to - from) * S;
        b->bounce_n = to - from;
        if (rk->placement == GB_PLACEMENT_DEVICE_PINNED) {
            e = cudaGraphExecMemcpyNodeSetParams1D(b->gexec, b->n_in, b->dev + in_off + off,
                                                   rk->region + in_off + off, bytes, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) /* not into the ring: see put_replies */
                e = cudaGraphExecMemcpyNodeSetParams1D(b->gexec, b->n_out, b->bounce, b->dev + out_off + off, bytes,
                                                       cudaMemcpyDeviceToHost);
        } else {
            e = cudaMemcpyAsync(b->dev, b->lhdr, LHDR_SIZE, cudaMemcpyHostToDevice, b->kstream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(b->dev + in_off + off, rk->region + in_off + off, bytes,
                                    cudaMemcpyHostToDevice, b->kstream);
            if (e == cudaSuccess)
                e = b->gpu->launch(&b->args, b->kstream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(rk->region + kline, b->dev + kline, GB_LINE, cudaMemcpyDeviceToHost,
                                    b->kstream);
            if (e == cudaSuccess) /* not into the ring: see put_replies */
                e = cudaMemcpyAsync(b->bounce, b->dev + out_off + off, bytes, cudaMemcpyDeviceToHost, b->kstream);
            b->launches++;
            gbi_cuda_set_resident(b, 1);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(b->kstream);
            if (e != cudaSuccess) {
                gbi_cuda_fail(rk, e, "relaunch");
                gbi_cuda_set_resident(b, 0);
                return GB_ERR_CUDA;
            }
            finish_launch(rk);
            return GB_OK;
        }
    }
    if (e == cudaSuccess) {
        const uint64_t t0 = gb_now_ns();
        e = cudaGraphLaunch(b->gexec, b->kstream);
        count_launch(b, t0);
    }
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "relaunch");
        return GB_ERR_CUDA;
    }
    b->launches++;
    GB_DIAG("ring kernel '%s': launch %llu issued, requests [%llu, %llu)", rk->type_name,
            (unsigned long long)b->launches, (unsigned long long)from, (unsigned long long)to);
    if (rk->placement == GB_PLACEMENT_MAPPED)
        rk->ctl->launches = b->launches; /* the kernel never writes this field */
    b->in_flight++;
    gbi_cuda_set_resident(b, 1);
    return GB_OK;
}

/* An inline launch of requests [from, from + n) (see the header comment). */
static gb_err launch_inline(gb_rk_t *rk, uint64_t from, uint32_t n)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const uint32_t S = rk->geom.slot_size;
    const int staging = gbi_cuda_staging(rk);
    gbk_inline_t *in = &b->inl;
    in->h.from = from;
    in->h.n = n;
    in->h.test_flags = rk->ctl->test_flags;
    for (uint32_t i = 0; i < n; i++) {
        /* Header and payload; a length past the slot is copied no further
         * and answered by the kernel's check. */
        const gb_slot_hdr_t *s = gb_slot_at(rk->in, rk->geom, from + i);
        uint32_t len = s->len < S - GB_SLOT_HDR_SIZE ? s->len : S - GB_SLOT_HDR_SIZE;
        memcpy(in->slots + (size_t)i * S, s, (GB_SLOT_HDR_SIZE + len + 15) & ~15u);
    }
    cudaError_t e;
    const uint64_t t0 = gb_now_ns();
    const int small = (uint64_t)n * S <= GBK_INLINE_SMALL; /* the kernel gbk_inline_set_node picks */
    if (b->igexec[small] && !(b->args.flags & GBK_F_INLINE_PLAIN)) {
        e = b->gpu->inline_set_node(b->igexec[small], b->n_ik[small], &b->inl);
        if (e == cudaSuccess)
            e = cudaGraphLaunch(b->igexec[small], b->kstream);
    } else {
        e = b->gpu->inline_launch(&b->inl, b->kstream);
        if (e == cudaSuccess && b->dev_outbox)
            e = cudaMemcpyAsync(b->host_outbox, b->dev_outbox, GBK_INLINE_OUT_SIZE(n, S), cudaMemcpyDeviceToHost,
                                b->kstream);
    }
    count_launch(b, t0);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "inline relaunch");
        return GB_ERR_CUDA;
    }
    b->launches++;
    b->launch_from = from;
    b->launch_to = from + n;
    b->exact = 1;
    b->inline_n = staging ? n : 0;
    if (!staging)
        rk->ctl->launches = b->launches;
    b->in_flight++;
    gbi_cuda_set_resident(b, 1);
    if (rk->placement == GB_PLACEMENT_DEVICE_MALLOC) {
        e = cudaStreamSynchronize(b->kstream);
        if (e != cudaSuccess) {
            gbi_cuda_fail(rk, e, "inline relaunch");
            return GB_ERR_CUDA; /* kick retires it */
        }
        finish_launch(rk);
    }
    return GB_OK;
}

/* Mapped placement, every launch in flight inline (each ends where it says,
 * the last at launch_to) and fewer than INLINE_QUEUE of them: the next launch
 * may queue behind them. */
static int behind_inline(const gb_rk_t *rk)
{
    const cuda_backend_t *b = (const cuda_backend_t *)rk->be;
    return rk->placement == GB_PLACEMENT_MAPPED && b->exact && b->in_flight < INLINE_QUEUE;
}

/* Whether the requests not yet issued go out as an inline launch, and from
 * where: they must fit one, and where they start must be known exactly --
 * with nothing in flight, at what the kernel consumed; behind inline
 * launches only (mapped placement), where the last one ends. Up to
 * INLINE_QUEUE of them may be in flight: a reply comes by its stamp, and the
 * host sees a kernel end only by a stream query, which finds the stream busy
 * while anything is queued: with only two, every other round trip would wait
 * for a query before its launch. */
static int inline_fits(gb_rk_t *rk, uint64_t published, uint64_t *from)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (!b->inline_max || rk->state != GB_RK_RUNNING || !rk->ctl->is_active || rk->ctl->should_terminate)
        return 0;
    if (b->in_flight == 0)
        *from = rk->ctl->consumed;
    else if (behind_inline(rk))
        *from = b->launch_to;
    else
        return 0;
    return published > *from && published - *from <= b->inline_max;
}

/* Mapped placement may queue a ring kernel launch behind the one running:
 * the queued kernel starts the moment the running one exits, without a host
 * round trip, and sees every request published before it starts. So a
 * request published while a kernel runs is covered by queueing one more, and
 * a third is never needed. Behind inline launches alone (behind_inline),
 * one is queued the same way. Staging placement keeps one in
 * flight: the next launch's header and copy ranges are rewritten on the host. */
static int should_launch(gb_rk_t *rk, uint64_t published)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (rk->state != GB_RK_RUNNING || !rk->ctl->is_active || rk->ctl->should_terminate)
        return 0;
    if (b->in_flight == 0)
        return published > rk->ctl->consumed;
    if ((rk->placement == GB_PLACEMENT_MAPPED && b->in_flight == 1) || behind_inline(rk))
        return published > b->launch_to; /* published after the last kernel was issued */
    return 0;
}

/* After a failed launch: launches still counted in flight are retired once
 * the stream has nothing running (an error or completion), so that the ring
 * kernel is not taken for resident forever; their replies are dropped with
 * the grain type. One that still runs stays resident (its memory is kept). */
static void retire_failed(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (b->in_flight && query(b) != cudaErrorNotReady) {
        b->in_flight = 0;
        b->inline_n = 0;
        b->bounce_n = 0;
        gbi_cuda_set_resident(b, 0);
    }
}

static gb_err kick(gb_rk_t *rk)
{
    /* A malloc-staging launch completes inside launch_once, so loop while
     * requests remain; a graph launch runs on and is noticed by progress(). */
    for (;;) {
        uint64_t published = __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE), from;
        gb_err err;
        if (inline_fits(rk, published, &from))
            err = launch_inline(rk, from, (uint32_t)(published - from));
        else if (should_launch(rk, published))
            err = launch_once(rk);
        else
            return GB_OK;
        if (err != GB_OK) {
            __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
            rk->ctl->exit_reason = GB_EXIT_ERROR;
            retire_failed(rk);
            return err;
        }
    }
}

static int progress(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    int finished = 0;
    if (b->in_flight) {
        /* Mapped placement queues launches behind the one running (staging
         * keeps one in flight: nothing to do). Its replies come by their
         * stamps, so a stream query (a call into the driver) is only needed when
         * requests wait for a launch, and now and then to retire launches and
         * see errors; and only behind inline launches, which end exactly at
         * launch_to (a ring kernel may have read an in_head older than
         * published, which the producer stores first, and stop short). */
        if (kick(rk) != GB_OK)
            return -1;
        const uint64_t published = __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE);
        if (rk->placement == GB_PLACEMENT_MAPPED && b->in_flight && b->exact && published <= b->launch_to &&
            gb_now_ns() - b->last_query_ns < QUERY_EVERY_NS)
            return 0;
        cudaError_t e = query(b);
        if (e == cudaErrorNotReady)
            return 0;
        if (e != cudaSuccess) {
            gbi_cuda_fail(rk, e, "relaunch failed");
            b->in_flight = 0;
            gbi_cuda_set_resident(b, 0);
            __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
            rk->ctl->exit_reason = GB_EXIT_ERROR;
            return -1;
        }
        finish_launch(rk);
        finished = 1;
        GB_DIAG("ring kernel '%s': launch %llu ended (%s), consumed %llu", rk->type_name,
                (unsigned long long)b->launches, gb_exit_reason_name(rk->ctl->exit_reason),
                (unsigned long long)rk->ctl->consumed);
    }
    if (kick(rk) != GB_OK)
        return -1;
    return finished;
}

gb_err gbi_relaunch_kick(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    pthread_mutex_lock(&b->relaunch_lock);
    gb_err err = kick(rk);
    pthread_mutex_unlock(&b->relaunch_lock);
    return err;
}

int gbi_relaunch_progress(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    pthread_mutex_lock(&b->relaunch_lock);
    int r = progress(rk);
    pthread_mutex_unlock(&b->relaunch_lock);
    return r;
}

static gb_err wait_idle(gb_rk_t *rk, int timeout_ms)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    uint64_t deadline = gb_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (b->in_flight) {
        cudaError_t e = query(b);
        if (e == cudaSuccess) {
            finish_launch(rk);
            break;
        }
        if (e != cudaErrorNotReady) {
            gbi_cuda_fail(rk, e, "relaunch failed");
            b->in_flight = 0;
            gbi_cuda_set_resident(b, 0);
            __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
            return GB_ERR_CUDA;
        }
        if (gb_now_ns() > deadline)
            return GB_ERR_TIMEOUT;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return GB_OK;
}

gb_err gbi_relaunch_control(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    pthread_mutex_lock(&b->relaunch_lock);
    gb_err err = wait_idle(rk, 10000);
    if (err == GB_OK) {
        rk->ctl->active_seen = rk->ctl->is_active;
        if (rk->state == GB_RK_RUNNING)
            err = kick(rk);
    }
    pthread_mutex_unlock(&b->relaunch_lock);
    return err;
}

gb_err gbi_relaunch_quiesce(gb_rk_t *rk, int on)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (on) {
        pthread_mutex_lock(&b->relaunch_lock);
        return wait_idle(rk, 10000);
    }
    gb_err err = rk->state == GB_RK_RUNNING ? kick(rk) : GB_OK;
    pthread_mutex_unlock(&b->relaunch_lock);
    return err;
}

gb_err gbi_relaunch_wait(gb_rk_t *rk, int timeout_ms)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    pthread_mutex_lock(&b->relaunch_lock);
    gb_err err = wait_idle(rk, timeout_ms);
    pthread_mutex_unlock(&b->relaunch_lock);
    return err;
}
