/* Client connections that close under the bridge (docs/protocol.md,
 * "Backpressure, bounds and oversized frames"): ZeroMQ closes the
 * connection of a client that sends a frame over ZMQ_MAXMSGSIZE, and the
 * network or the client may close one too, all without a word to the
 * socket's reader. This watches the ROUTER's monitor for disconnections and
 * names the client each one belonged to: the routing id of the last frame
 * read from that descriptor (ZMQ_SRCFD). The owner of the socket (the
 * bridge's loop or the supervisor) decides what the client was owed. */
#ifndef GB_CONNWATCH_H
#define GB_CONNWATCH_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

typedef struct gb_connwatch {
    void *router;
    void *mon;        /* our end of the ROUTER's monitor (inproc PAIR); NULL: not watching */
    uint8_t **by_fd;  /* by_fd[fd]: [len][routing id] of the last frame read from fd, or NULL */
    size_t n_fd;
    void (*closed)(void *ctx, const uint8_t *id, size_t id_len);
    void *ctx;
} gb_connwatch_t;

/* Starts watching router (of context zctx); closed(ctx, id, id_len) is called
 * from gb_connwatch_poll and gb_connwatch_seen for each closed connection
 * whose client sent a frame. -1 (errno set) when the monitor cannot start. */
int gb_connwatch_start(gb_connwatch_t *w, void *zctx, void *router,
                       void (*closed)(void *ctx, const uint8_t *id, size_t id_len), void *ctx);
/* A frame part (body) read from router for client id. */
void gb_connwatch_seen(gb_connwatch_t *w, zmq_msg_t *part, const uint8_t *id, size_t id_len);
/* Handles the disconnections reported so far; returns how many. */
int gb_connwatch_poll(gb_connwatch_t *w);
/* Before the router closes. */
void gb_connwatch_stop(gb_connwatch_t *w);
/* "0x" and the id in hex (at most 32 bytes of it, "..." after) into buf. */
void gb_connwatch_id_hex(const uint8_t *id, size_t id_len, char *buf, size_t len);
/* Counts a connection closed with pending + kept replies owed in *unlogged,
 * and logs the warning (who: "" or "supervisor: ") unless one went out less
 * than a second ago (*last_ns): then the next one says how many there were. */
void gb_connwatch_log_closed(const char *who, const uint8_t *id, size_t id_len, uint64_t pending, uint64_t kept,
                             long long cap, uint64_t *last_ns, uint64_t *unlogged);

#endif
