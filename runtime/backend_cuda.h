/* Diagnostics of the CUDA backend (benchmarks and tests). */
#ifndef GB_BACKEND_CUDA_H
#define GB_BACKEND_CUDA_H

#include "gpubridge/device/ring_kernel.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies the kernel's device-side progress and profile (valid once the kernel
 * has stopped). GB_ERR_UNSUPPORTED for a ring kernel of another backend. */
gb_err gbi_cuda_kstate(gb_rk_t *rk, gb_kstate_t *out);
/* The host side of relaunch mode: launches and their API time, stream
 * queries and theirs (ns). */
typedef struct gbi_relaunch_prof {
    uint64_t launches, launch_ns, queries, query_ns;
} gbi_relaunch_prof_t;
gb_err gbi_cuda_relaunch_prof(gb_rk_t *rk, gbi_relaunch_prof_t *out);
/* SM clock in kHz, to turn profile cycles into time. */
int gbi_cuda_clock_khz(int device);

#ifdef __cplusplus
}
#endif
#endif
