/* The supervisor: `gpubridge --supervise`. The public socket lives in this
 * process, which never touches CUDA; the GPU side runs in a worker process
 * (this program again, on a private ipc endpoint) that is restarted when it
 * crashes or fails with a CUDA error. What the dead worker had not answered
 * is answered with STATUS_GPU_ERROR. See supervisor.c. */
#ifndef GB_SUPERVISOR_H
#define GB_SUPERVISOR_H

#include <signal.h>

#include "config.h"
#include "error.h"

/* Exit status of a worker whose GPU side failed (a sticky CUDA error). */
#define GB_EXIT_GPU_FAILED 3

/* Binds cfg's endpoints (with CURVE when configured), starts the worker with
 * worker_argv (argv[0] first, NULL-terminated; run from /proc/self/exe with
 * GPUBRIDGE_WORKER_ENDPOINT set) and proxies until *stop; then stops the
 * worker (SIGTERM: it drains) and returns. GB_OK when the worker's last exit
 * was clean. */
gb_err gb_supervise(const gb_config_t *cfg, char *const *worker_argv, volatile sig_atomic_t *stop);

#endif
