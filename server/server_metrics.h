/* The server's side of the metrics (server_metrics.c): counting on the
 * bridge thread and publishing snapshots to the HTTP thread (metrics.h).
 * Every hook is a no-op cost when no metrics are attached (s->stats NULL). */
#ifndef GB_SERVER_METRICS_H
#define GB_SERVER_METRICS_H

#include "server_internal.h"

/* A request was fed into ring r at ring position pos. */
void gbi_stats_request(gb_server_t *s, const gbi_ring_t *r, uint64_t pos);
/* Ring r answered the request at position pos (msg_type: the request's
 * type, 0 when unknown) with status. */
void gbi_stats_ring_reply(gb_server_t *s, const gbi_ring_t *r, uint64_t pos, int status,
                          unsigned msg_type);
/* n replies were sent (status: the proto's number). */
void gbi_stats_reply(gb_server_t *s, int status, uint64_t n);
/* Reads the gauges and kernel counters and publishes a snapshot. */
void gbi_stats_publish(gb_server_t *s);
void gbi_stats_free(gb_server_t *s);
/* Several I/O threads count into one set: a lock from now on. */
void gbi_stats_share(gb_server_t *s);

#endif
