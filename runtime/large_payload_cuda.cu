/* The CUDA side of large messages (large_payload.h): the kernel's address of
 * the region, and the staging copies of a large record (to the device,
 * before its slot is published) and of a large reply (from the device, once
 * its slot was seen). Synchronous, on the copy stream: staging placement is
 * the fallback, where correctness comes before speed. */
#include <cuda_runtime.h>

#include "backend_cuda_internal.h"

extern "C" unsigned char *gbi_cuda_region_dev(gb_rk_t *rk) { return ((cuda_backend_t *)rk->be)->dev; }

extern "C" gb_err gbi_cuda_region_copy(gb_rk_t *rk, size_t off, size_t len, int to_device)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (rk->state == GB_RK_FAILED)
        return GB_ERR_TERMINATED;
    gbi_cuda_on_device(b);
    cudaError_t e = to_device ? cudaMemcpyAsync(b->dev + off, rk->region + off, len, cudaMemcpyHostToDevice, b->cstream)
                              : cudaMemcpyAsync(rk->region + off, b->dev + off, len, cudaMemcpyDeviceToHost, b->cstream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, to_device ? "staging copy of a large request" : "staging copy of a large reply");
        return GB_ERR_CUDA;
    }
    return GB_OK;
}
