/* GPU tests exit 77 (ctest: skipped) where no CUDA device is present or the
 * build has no CUDA backend; on a GPU machine they must pass. */
#ifndef GB_TEST_GPU_SKIP_H
#define GB_TEST_GPU_SKIP_H

#include <stdio.h>
#include <stdlib.h>

#ifdef GB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static void gb_require_gpu(void)
{
#ifdef GB_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device (%s)\n", e == cudaSuccess ? "none present" : cudaGetErrorName(e));
        exit(77);
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("GPU: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
#else
    printf("SKIP: built without CUDA\n");
    exit(77);
#endif
}

#endif
