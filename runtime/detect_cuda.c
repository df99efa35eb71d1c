/* The CUDA facts for detection, from the runtime API only (never the driver
 * API: mixing the two breaks under WSL2). Plain C so that it builds with or
 * without CUDA; without GB_HAVE_CUDA it reports zero devices. */
#include "detect.h"

#include <stdio.h>
#include <string.h>

#ifdef GB_HAVE_CUDA
#include <cuda_runtime_api.h>

static void gbi_cuda_why(char *buf, size_t len, const char *call, cudaError_t e)
{
    snprintf(buf, len, "%s: %s (%s)", call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* An int attribute as a bool; a failed query is recorded and reads as false. */
static bool gbi_attr(gb_facts_t *f, enum cudaDeviceAttr attr, const char *name)
{
    int v = 0;
    cudaError_t e = cudaDeviceGetAttribute(&v, attr, f->device);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (!f->cuda_error[0])
            gbi_cuda_why(f->cuda_error, sizeof f->cuda_error, name, e);
        return false;
    }
    return v != 0;
}

/* The real test: WSL2 and some containers advertise canMapHostMemory and then
 * fail the allocation, so only an allocation answers the question. */
static void gbi_probe_mapped_pinned(gb_facts_t *f)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        (void)cudaGetLastError();
        prev = -1;
    }
    cudaError_t e = cudaSetDevice(f->device);
    if (e != cudaSuccess) {
        gbi_cuda_why(f->mapped_pinned_why, sizeof f->mapped_pinned_why, "cudaSetDevice", e);
        (void)cudaGetLastError();
        return;
    }
    void *host = NULL;
    e = cudaHostAlloc(&host, 4096, cudaHostAllocMapped);
    if (e != cudaSuccess) {
        gbi_cuda_why(f->mapped_pinned_why, sizeof f->mapped_pinned_why,
                     "cudaHostAlloc(4 KiB, cudaHostAllocMapped)", e);
        host = NULL;
    } else {
        void *dev = NULL;
        e = cudaHostGetDevicePointer(&dev, host, 0);
        if (e != cudaSuccess)
            gbi_cuda_why(f->mapped_pinned_why, sizeof f->mapped_pinned_why,
                         "cudaHostGetDevicePointer", e);
        else if (!dev)
            snprintf(f->mapped_pinned_why, sizeof f->mapped_pinned_why,
                     "cudaHostGetDevicePointer returned NULL");
        else
            f->mapped_pinned_ok = true;
        (void)cudaFreeHost(host);
    }
    (void)cudaGetLastError(); /* a failed probe must not leave an error for the next caller */
    if (prev >= 0 && prev != f->device)
        (void)cudaSetDevice(prev);
}

gb_err gb_detect_cuda(int device, bool force_pinned_failure, gb_facts_t *f)
{
    if (!f)
        return GB_ERR_INVALID;
    f->cuda_built = true;
    f->device = device;
    f->cuda_device_count = 0;
    f->cuda_error[0] = '\0';
    f->device_name[0] = '\0';
    f->cc_major = f->cc_minor = 0;
    f->kernel_exec_timeout = f->can_map_host_memory = false;
    f->mapped_pinned_ok = f->mapped_pinned_forced = false;
    f->mapped_pinned_why[0] = '\0';
    f->concurrent_managed_access = f->cooperative_launch = false;
    f->host_native_atomic_supported = false;

    (void)cudaRuntimeGetVersion(&f->cuda_runtime_version);
    if (cudaDriverGetVersion(&f->cuda_driver_version) != cudaSuccess)
        f->cuda_driver_version = 0;

    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* No driver, no device, or a broken install: all mean zero devices here. */
        gbi_cuda_why(f->cuda_error, sizeof f->cuda_error, "cudaGetDeviceCount", e);
        (void)cudaGetLastError();
        n = 0;
    }
    f->cuda_device_count = n;
    if (n <= 0 || device < 0 || device >= n) {
        snprintf(f->mapped_pinned_why, sizeof f->mapped_pinned_why, "no such device");
        return GB_OK;
    }

    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, device);
    if (e == cudaSuccess) {
        snprintf(f->device_name, sizeof f->device_name, "%s", prop.name);
    } else {
        gbi_cuda_why(f->cuda_error, sizeof f->cuda_error, "cudaGetDeviceProperties", e);
        (void)cudaGetLastError();
    }
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess)
        f->cc_major = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess)
        f->cc_minor = v;
    (void)cudaGetLastError();
    f->kernel_exec_timeout =
        gbi_attr(f, cudaDevAttrKernelExecTimeout, "cudaDevAttrKernelExecTimeout");
    f->can_map_host_memory =
        gbi_attr(f, cudaDevAttrCanMapHostMemory, "cudaDevAttrCanMapHostMemory");
    f->concurrent_managed_access =
        gbi_attr(f, cudaDevAttrConcurrentManagedAccess, "cudaDevAttrConcurrentManagedAccess");
    f->cooperative_launch =
        gbi_attr(f, cudaDevAttrCooperativeLaunch, "cudaDevAttrCooperativeLaunch");
    f->host_native_atomic_supported =
        gbi_attr(f, cudaDevAttrHostNativeAtomicSupported, "cudaDevAttrHostNativeAtomicSupported");

    if (force_pinned_failure) {
        /* The test switch: exercise the fallback placement on a host where the
         * probe would succeed. */
        f->mapped_pinned_forced = true;
        snprintf(f->mapped_pinned_why, sizeof f->mapped_pinned_why,
                 "forced by placement.force_fallback or the test hook");
        return GB_OK;
    }
    gbi_probe_mapped_pinned(f);
    return GB_OK;
}

#else /* !GB_HAVE_CUDA */

gb_err gb_detect_cuda(int device, bool force_pinned_failure, gb_facts_t *f)
{
    if (!f)
        return GB_ERR_INVALID;
    f->cuda_built = false;
    f->device = device;
    f->cuda_device_count = 0;
    f->cuda_runtime_version = f->cuda_driver_version = 0;
    snprintf(f->cuda_error, sizeof f->cuda_error, "built without CUDA");
    f->device_name[0] = '\0';
    f->cc_major = f->cc_minor = 0;
    f->kernel_exec_timeout = f->can_map_host_memory = false;
    f->mapped_pinned_ok = false;
    f->mapped_pinned_forced = false; /* nothing to skip: there is no probe */
    snprintf(f->mapped_pinned_why, sizeof f->mapped_pinned_why, "built without CUDA");
    f->concurrent_managed_access = f->cooperative_launch = false;
    f->host_native_atomic_supported = false;
    return GB_OK;
}

#endif
