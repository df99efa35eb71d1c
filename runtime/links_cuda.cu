/* Device links, the CUDA backend's part: their memory, and each kernel's
 * share of them in its arguments (runtime/links.c lays them out). */
#include <string.h>

#include "backend_cuda_internal.h"
#include "links.h"

gb_err gbi_links_alloc(gbi_links_mem_t *m)
{
    if (cudaSetDevice(m->device) != cudaSuccess || cudaMalloc((void **)&m->dev, m->bytes) != cudaSuccess) {
        cudaGetLastError();
        m->dev = NULL;
        return GB_ERR_NOMEM;
    }
    if (cudaMemset(m->dev, 0, m->bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        return GB_ERR_CUDA;
    }
    return GB_OK;
}

gb_err gbi_links_upload(gbi_links_mem_t *m, const void *init, size_t bytes)
{
    if (cudaSetDevice(m->device) != cudaSuccess || cudaMemcpy(m->dev, init, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaGetLastError();
        return GB_ERR_CUDA;
    }
    return GB_OK;
}

void gbi_links_free(gbi_links_mem_t *m)
{
    cudaSetDevice(m->device);
    cudaFree(m->dev);
    cudaGetLastError();
    m->dev = NULL;
}

gb_err gbi_links_host_alloc(size_t bytes, void **host, void **dev)
{
    *host = *dev = NULL;
    if (cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        *host = NULL;
        return GB_ERR_NOMEM;
    }
    memset(*host, 0, bytes);
    if (cudaHostGetDevicePointer(dev, *host, 0) != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(*host);
        *host = NULL;
        return GB_ERR_CUDA;
    }
    return GB_OK;
}

void gbi_links_host_free(void *host)
{
    cudaFreeHost(host);
    cudaGetLastError();
}

/* Beside resident kernels: a copy on a stream of its own that does not wait
 * for them (the legacy default stream would). */
gb_err gbi_links_close(int device, void *dev_link)
{
    static const uint32_t one = 1;
    cudaStream_t s;
    if (cudaSetDevice(device) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        return GB_ERR_CUDA;
    }
    cudaError_t e = cudaMemcpyAsync((unsigned char *)dev_link + offsetof(gb_link_t, closed), &one, sizeof one,
                                    cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    cudaGetLastError();
    return e == cudaSuccess ? GB_OK : GB_ERR_CUDA;
}

int gbi_links_eligible(struct gb_rk *rk)
{
    const cuda_backend_t *b = (const cuda_backend_t *)rk->be;
    return rk->ops == &gbi_backend_cuda && rk->p.mode == GB_MODE_PERSISTENT && rk->placement == GB_PLACEMENT_MAPPED &&
           b->args.team_workers == 0;
}

int gbi_links_persistent(struct gb_rk *rk)
{
    const cuda_backend_t *b = (const cuda_backend_t *)rk->be;
    return rk->ops == &gbi_backend_cuda && rk->p.mode == GB_MODE_PERSISTENT && !b->relaunch &&
           rk->state == GB_RK_RUNNING;
}

void gbi_links_give(struct gb_rk *rk, void *const out[], uint32_t n_out, void *const in[], uint32_t n_in,
                    uint32_t self, uint32_t n_devs, uint32_t dev, uint32_t max_hops, uint64_t hold_ns)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    for (uint32_t i = 0; i < GB_MAIL_MAX_TARGETS; i++)
        b->args.link_out[i] = i < n_out ? (gb_link_t *)out[i] : NULL;
    for (uint32_t i = 0; i < GB_LINK_IN_MAX; i++)
        b->args.link_in[i] = i < n_in ? (gb_link_t *)in[i] : NULL;
    b->args.n_link_in = n_in;
    b->args.self = self;
    b->args.n_devs = n_devs;
    b->args.dev = dev;
    b->args.max_hops = max_hops;
    b->args.hold_ns = hold_ns;
}
