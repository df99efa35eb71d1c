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
 * A launch's range never wraps the ring: a wrapping batch takes two launches. */
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda_internal.h"
#include "log.h"

#define LHDR_SIZE (sizeof(gb_control_t) + sizeof(gb_ring_indices_t))

static size_t slot_off(const gb_rk_t *rk, uint64_t pos)
{
    return (size_t)(pos & (rk->geom.cap - 1)) * rk->geom.slot_size;
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
    if (rk->placement == GB_PLACEMENT_DEVICE_MALLOC)
        return GB_OK; /* issued call by call, see the header comment */
    CK(cudaGraphCreate(&b->graph, 0), "cudaGraphCreate");
    if (rk->placement == GB_PLACEMENT_MAPPED) {
        CK(gbk_ring_add_node(&n_k, b->graph, NULL, 0, &b->args), "graph kernel node");
    } else {
        CK(cudaGraphAddMemcpyNode1D(&n_hdr, b->graph, NULL, 0, b->dev, b->lhdr, LHDR_SIZE,
                                    cudaMemcpyHostToDevice),
           "graph header copy");
        CK(cudaGraphAddMemcpyNode1D(&b->n_in, b->graph, &n_hdr, 1, b->dev + in_off, rk->region + in_off, S,
                                    cudaMemcpyHostToDevice),
           "graph slots copy");
        CK(gbk_ring_add_node(&n_k, b->graph, &b->n_in, 1, &b->args), "graph kernel node");
        CK(cudaGraphAddMemcpyNode1D(&n_kl, b->graph, &n_k, 1, rk->region + kline, b->dev + kline, GB_LINE,
                                    cudaMemcpyDeviceToHost),
           "graph control copy");
        CK(cudaGraphAddMemcpyNode1D(&b->n_out, b->graph, &n_kl, 1, rk->region + out_off, b->dev + out_off, S,
                                    cudaMemcpyDeviceToHost),
           "graph replies copy");
    }
    CK(cudaGraphInstantiate(&b->gexec, b->graph, 0), "cudaGraphInstantiate");
    return GB_OK;
fail:
    return GB_ERR_CUDA;
}

void gbi_relaunch_free(cuda_backend_t *b)
{
    if (b->gexec)
        cudaGraphExecDestroy(b->gexec);
    if (b->graph)
        cudaGraphDestroy(b->graph);
    if (b->lhdr_pinned)
        cudaFreeHost(b->lhdr);
    else
        free(b->lhdr);
    b->gexec = NULL;
    b->graph = NULL;
    b->lhdr = NULL;
}

/* After a launch: the host's view of what the kernel did. */
static void finish_launch(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    b->in_flight = 0;
    gbi_cuda_set_resident(b, 0);
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
        if (rk->placement == GB_PLACEMENT_DEVICE_PINNED) {
            e = cudaGraphExecMemcpyNodeSetParams1D(b->gexec, b->n_in, b->dev + in_off + off,
                                                   rk->region + in_off + off, bytes, cudaMemcpyHostToDevice);
            if (e == cudaSuccess)
                e = cudaGraphExecMemcpyNodeSetParams1D(b->gexec, b->n_out, rk->region + out_off + off,
                                                       b->dev + out_off + off, bytes, cudaMemcpyDeviceToHost);
        } else {
            e = cudaMemcpyAsync(b->dev, b->lhdr, LHDR_SIZE, cudaMemcpyHostToDevice, b->kstream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(b->dev + in_off + off, rk->region + in_off + off, bytes,
                                    cudaMemcpyHostToDevice, b->kstream);
            if (e == cudaSuccess)
                e = gbk_ring_launch(&b->args, b->kstream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(rk->region + kline, b->dev + kline, GB_LINE, cudaMemcpyDeviceToHost,
                                    b->kstream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(rk->region + out_off + off, b->dev + out_off + off, bytes,
                                    cudaMemcpyDeviceToHost, b->kstream);
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
    if (e == cudaSuccess)
        e = cudaGraphLaunch(b->gexec, b->kstream);
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

/* Mapped placement may queue one launch behind the one running: the queued
 * kernel starts the moment the running one exits, without a host round trip,
 * and sees every request published before it starts. So a request published
 * while a kernel runs is covered by queueing one more, and a third is never
 * needed. Staging placement keeps one in flight: the next launch's header and
 * copy ranges are rewritten on the host. */
static int should_launch(gb_rk_t *rk, uint64_t published)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (rk->state != GB_RK_RUNNING || !rk->ctl->is_active || rk->ctl->should_terminate)
        return 0;
    if (b->in_flight == 0)
        return published > rk->ctl->consumed;
    if (b->in_flight == 1 && rk->placement == GB_PLACEMENT_MAPPED)
        return published > b->launch_to; /* published after the running kernel was issued */
    return 0;
}

static gb_err kick(gb_rk_t *rk)
{
    /* A malloc-staging launch completes inside launch_once, so loop while
     * requests remain; a graph launch runs on and is noticed by progress(). */
    for (;;) {
        uint64_t published = __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE);
        if (!should_launch(rk, published))
            return GB_OK;
        gb_err err = launch_once(rk);
        if (err != GB_OK) {
            rk->state = GB_RK_FAILED;
            rk->ctl->exit_reason = GB_EXIT_ERROR;
            return err;
        }
    }
}

static int progress(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    int finished = 0;
    if (b->in_flight) {
        cudaError_t e = cudaStreamQuery(b->kstream);
        if (e == cudaErrorNotReady)
            return 0;
        if (e != cudaSuccess) {
            gbi_cuda_fail(rk, e, "relaunch failed");
            b->in_flight = 0;
            gbi_cuda_set_resident(b, 0);
            rk->state = GB_RK_FAILED;
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
        cudaError_t e = cudaStreamQuery(b->kstream);
        if (e == cudaSuccess) {
            finish_launch(rk);
            break;
        }
        if (e != cudaErrorNotReady) {
            gbi_cuda_fail(rk, e, "relaunch failed");
            b->in_flight = 0;
            gbi_cuda_set_resident(b, 0);
            rk->state = GB_RK_FAILED;
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

gb_err gbi_relaunch_wait(gb_rk_t *rk, int timeout_ms)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    pthread_mutex_lock(&b->relaunch_lock);
    gb_err err = wait_idle(rk, timeout_ms);
    pthread_mutex_unlock(&b->relaunch_lock);
    return err;
}
