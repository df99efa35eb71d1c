/* The bridge's ZeroMQ server: one ROUTER socket on the configured endpoints,
 * owned by the one thread that runs gb_server_run. It decodes client frames,
 * feeds requests into the grain types' input rings, drains their output rings
 * and routes each reply to the client that asked, batching replies per
 * client. Control messages are answered by the server itself. With
 * io_threads > 1 that thread hands frames to as many I/O threads, which do
 * the decoding, feeding and encoding (server_io.c).
 *
 * Guarantees: every accepted request gets exactly one reply or one error
 * reply (one-way requests: an error reply only); the socket is always read,
 * and memory per client and in all is bounded in bytes by refusing
 * (STATUS_BUSY) rather than by stalling, so control messages and other
 * clients keep flowing (docs/protocol.md, "Backpressure, bounds and
 * oversized frames"); bad input gets a clear error reply and the server keeps
 * serving. */
#ifndef GB_SERVER_H
#define GB_SERVER_H

#include <signal.h>

#include "config.h"
#include "detect.h"
#include "engine.h"
#include "error.h"

typedef struct gb_server gb_server_t;

/* Binds the endpoints (and sets up CURVE when configured). The server uses,
 * but does not own, cfg, engine, facts and sel; they must outlive it. On
 * error, err holds a sentence for the user. */
gb_err gb_server_new(const gb_config_t *cfg, gb_engine_t *engine, const gb_facts_t *facts,
                     const gb_selection_t *sel, gb_server_t **out, char *err, size_t errlen);

/* Serves until *stop becomes non-zero (a signal handler sets it), then
 * refuses new requests (STATUS_SHUTTING_DOWN), lets accepted ones finish (up
 * to drain_ms), answers whatever is left with an error reply, and returns
 * GB_OK. With exit-on-GPU-failure
 * set (a supervised worker), a failed ring kernel ends it the same way and it
 * returns GB_ERR_CUDA. */
gb_err gb_server_run(gb_server_t *s, volatile sig_atomic_t *stop, int drain_ms);

/* The supervisor's worker: a failed kernel ends the process, and frames
 * come tagged from the supervisor (server_internal.h, GBI_TAG_LEN). */
void gb_server_exit_on_gpu_failure(gb_server_t *s, int on);

/* Counts for the metrics endpoint m (published about every 100 ms). */
struct gb_metrics;
gb_err gb_server_set_metrics(gb_server_t *s, struct gb_metrics *m);
/* When *flag becomes non-zero the loop clears it and calls fn(ctx, s) on its
 * own thread (SIGHUP: reload.c). */
void gb_server_on_reload(gb_server_t *s, volatile sig_atomic_t *flag,
                         void (*fn)(void *ctx, gb_server_t *s), void *ctx);
/* Counts a reload for the metrics (ok: applied; 0: refused). */
void gb_server_count_reload(gb_server_t *s, int ok);


/* Closes the socket (lingering briefly so the last replies go out); takes NULL. */
void gb_server_destroy(gb_server_t **s);

/* Held while the CURVE allow-list of the live config is read (the ZAP
 * thread) or replaced (a SIGHUP reload, on the server thread). */
void gb_curve_lock(void);
void gb_curve_unlock(void);

#endif
