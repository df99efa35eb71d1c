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
#include "reload.h"

/* Exit status of a worker whose GPU side failed (a sticky CUDA error). */
#define GB_EXIT_GPU_FAILED 3
/* Exit status of a worker that could not start (its config, a grain
 * library, a device): the daemon's usage and config error. */
#define GB_EXIT_WORKER_START 2

/* A worker with no answer to the heartbeat for this long is killed and
 * replaced; a starting one (CUDA, kernels) gets GB_SUP_START_TIMEOUT_MS. */
#define GB_SUP_HEARTBEAT_TIMEOUT_MS 10000
#define GB_SUP_START_TIMEOUT_MS 120000

/* Binds cfg's endpoints (with CURVE when configured), makes a private
 * directory for the worker's socket, starts the worker (/proc/self/exe with
 * argv, argv[0] first, NULL-terminated, without --supervise, plus
 * --worker-endpoint) and proxies until *stop; then stops the worker
 * (SIGTERM: it drains) and returns. GB_OK when the worker's last exit was
 * clean. With a config file (rl->path), each worker loads a copy of the
 * config the supervisor runs (rl->live), not the user's file. When *reload
 * is set (SIGHUP), rl (its live config is cfg; may be NULL) reloads the
 * file; when it loads, the copy is rewritten and the worker gets SIGHUP;
 * when not, the worker and later ones keep the running config. */
gb_err gb_supervise(const gb_config_t *cfg, char *const *argv, volatile sig_atomic_t *stop,
                    volatile sig_atomic_t *reload, gb_reload_t *rl);

/* Removes a worker's private directory and what a supervisor or worker
 * leaves in it (the socket, the config copy, a half-written one); 0 when the
 * directory went. */
int gb_sup_remove_dir(const char *dir);

/* 0 when dir is a directory of this user with mode 0700 (not a link). */
int gb_sup_check_private_dir(const char *dir);

#endif
