/* client_internal.h: what the files of libgpubridge share (not installed). */
#ifndef GBC_CLIENT_INTERNAL_H
#define GBC_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpubridge.pb-c.h"
#include "gpubridge/client.h"
#include "gpubridge/demo.h"
#include "pb_reply.h"

#define GBCI_DEFAULT_TIMEOUT_MS 5000
#define GBCI_DEFAULT_MAX_BATCH 256
#define GBCI_DEFAULT_MAX_FRAME (1u << 20)
#define GBCI_KEY_LEN 41 /* Z85 key + NUL */
/* try_send reads a connection's monitor at most this often (transport.c);
 * far below the reconnect interval, the least time between connections */
#define GBCI_MON_EVERY_NS 100000
#define GBCI_RECONNECT_IVL_MS 100
#define GBCI_MAX_FRAME (128ull << 20) /* twice the bridge's largest max_message_size */
#define GBCI_DRAIN_MAX 4096           /* frames one drain reads before the caller looks at its deadline */
#define GBCI_MAX_UNMATCHED 1024       /* whole-frame refusals kept for gbc_poll at once */
/* Sizes of the growable structs in 0.2, where struct_size came in (what a
 * struct_size of 0 stands for). Fixed: never sizeof of today's struct. */
#define GBCI_OPTIONS_V02_SIZE 56
#define GBCI_GRAIN_STATUS_V02_SIZE 200
#define GBCI_TELEMETRY_V02_SIZE 128
#define GBCI_DETECT_REPORT_V02_SIZE 1888

/* ---- idset.c: correlation ids awaiting a reply ---- */

enum { GBCI_ID_ASYNC = 1, GBCI_ID_ABANDONED = 2 };

/* Open addressing with linear probing; key 0 marks an empty slot (ids are
 * never 0). Deletion shifts entries back, so there are no tombstones. */
typedef struct gbci_idset {
    uint64_t *keys;
    uint8_t *vals;
    size_t cap; /* power of two, or 0 */
    size_t n;
} gbci_idset_t;

/* 0, or -1 when out of memory. */
int gbci_idset_put(gbci_idset_t *s, uint64_t id, uint8_t val);
/* Removes id; returns its value, or 0 when absent. */
uint8_t gbci_idset_take(gbci_idset_t *s, uint64_t id);
/* id's value, or 0 when absent. */
uint8_t gbci_idset_get(const gbci_idset_t *s, uint64_t id);

/* ---- deadline.c: when each gbc_send request expires ---- */

/* A FIFO in send order, which is deadline order (one timeout per client).
 * Answered ids are dropped lazily, when they reach the front. */
typedef struct gbci_deadline {
    uint64_t id;
    int64_t at; /* CLOCK_MONOTONIC ns */
    size_t ep;
} gbci_deadline_t;

typedef struct gbci_deadlines {
    gbci_deadline_t *d;
    size_t cap, head, n;
} gbci_deadlines_t;

int gbci_deadlines_push(gbci_deadlines_t *q, uint64_t id, int64_t at, size_t ep);
void gbci_deadlines_free(gbci_deadlines_t *q);
void gbci_idset_free(gbci_idset_t *s);

/* ---- replyq.c: replies received for gbc_poll ---- */

typedef struct gbci_replyq {
    gbc_reply_t *r;
    size_t cap, head, n;
} gbci_replyq_t;

/* Moves *r in (and zeroes *r); 0, or -1 when out of memory. */
int gbci_replyq_push(gbci_replyq_t *q, gbc_reply_t *r);
/* Moves the oldest reply into *out; false when empty. */
bool gbci_replyq_pop(gbci_replyq_t *q, gbc_reply_t *out);
void gbci_replyq_free(gbci_replyq_t *q);

/* ---- batch.c: one endpoint's queued envelopes, already encoded ---- */

/* Records are `0x0a len Envelope` (field 1, length-delimited), which is both
 * one Batch.envelopes entry and, alone, a whole ClientFrame{envelope}. The
 * first GBCI_PREFIX bytes of buf are kept free for the ClientFrame{batch}
 * header (tag 0x12 and the length varint) written at flush time. */
#define GBCI_PREFIX 11

typedef struct gbci_batch {
    uint8_t *buf;
    size_t cap;   /* bytes of buf */
    size_t len;   /* record bytes after the prefix */
    size_t count; /* records */
    uint64_t last_id; /* correlation id of the last record appended */
} gbci_batch_t;

/* Bytes the frame would have with one more envelope of env_len bytes. */
size_t gbci_batch_frame_len_with(const gbci_batch_t *b, size_t env_len);
/* Appends env (env_len = its packed size) as one record; GBC_OK or
 * GBC_ERR_NOMEM. */
gbc_err gbci_batch_append(gbci_batch_t *b, const Gpubridge__Envelope *env, size_t env_len);
/* The frame to send: the lone record, or the batch header + records. */
void gbci_batch_frame(gbci_batch_t *b, const uint8_t **data, size_t *len);
/* Drops records after (len, count) (a rollback to an earlier state). */
void gbci_batch_truncate(gbci_batch_t *b, size_t len, size_t count);
/* Drops the first record when its correlation id is id (a request that
 * expired before it could be sent); true when dropped. */
bool gbci_batch_drop_first(gbci_batch_t *b, uint64_t id);
void gbci_batch_free(gbci_batch_t *b);

/* ---- client.c / transport.c: the client ---- */

typedef struct gbci_endpoint {
    char *addr;
    void *sock;    /* DEALER */
    void *mon;     /* PAIR receiving the DEALER's monitor events */
    gbci_batch_t batch;
    bool connected;      /* handshake done and not disconnected since */
    bool ever_connected;
    bool handshake_failed;
    int handshake_event; /* the last ZMQ_EVENT_HANDSHAKE_FAILED_* */
    int handshake_errno; /* its value: for NO_DETAIL, the error that ended the connection */
    uint64_t sent_upto;  /* highest correlation id handed to ZeroMQ here */
    /* Requests up to this id went out on a connection that has ended: their
     * replies cannot come (a new connection has a new routing id). */
    uint64_t lost_upto;
    bool lost_new;       /* lost_upto grew; async requests not yet completed */
    int64_t mon_read_ns; /* when the monitor was last read */
    /* A connection of this socket ended: the next send first reads what it
     * brought, then replaces the socket (gbci_endpoint_renew). */
    bool ended;
    uint32_t generation; /* sockets opened for this endpoint (names the monitor) */
    char *keys[3];       /* CURVE server, public and secret keys (Z85), or NULL */
} gbci_endpoint_t;

struct gbc_client {
    void *ctx;
    gbci_endpoint_t *eps;
    size_t n;
    int timeout_ms;
    size_t max_batch;
    size_t max_frame;
    bool curve;
    uint64_t next_corr;
    uint64_t echo_seq;
    size_t async_in_flight; /* gbc_send requests not yet answered */
    gbci_idset_t ids;       /* async and abandoned ids */
    gbci_replyq_t ready;    /* async replies not yet polled */
    gbci_deadlines_t deadlines; /* of the async ids, in send order */
    uint64_t bad_frames;    /* frames from a bridge that did not decode, and unmatched refusals dropped */
    size_t want_ep;         /* gbci_pump: the awaited call's endpoint (SIZE_MAX: none) */
    size_t unmatched;       /* whole-frame refusals (correlation id 0) in ready, at most GBCI_MAX_UNMATCHED */
    struct zmq_pollitem_t *items; /* 2n, for zmq_poll: the DEALERs, then their monitors */
};

/* errors (client.c): record the failure for gbc_last_error, return err. */
gbc_err gbci_fail(gbc_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records a non-OK reply (its status and text; c, if not NULL, names the
 * endpoint); returns GBC_ERR_STATUS. */
gbc_err gbci_fail_status(const gbc_client_t *c, const gbc_reply_t *r);
void gbci_clear_error(void);
/* Replaces the bytes of s that act on a terminal (C0 controls, DEL) with
 * '?': every string the client keeps from a peer goes through it. Returns s. */
char *gbci_text_clean(char *s);

/* time (client.c) */
int64_t gbci_now_ns(void);
/* Absolute CLOCK_MONOTONIC deadline for timeout_ms (see the header);
 * INT64_MAX for GBC_TIMEOUT_FOREVER. */
int64_t gbci_deadline(const gbc_client_t *c, int timeout_ms);
/* timeout_ms as the milliseconds it stands for (for messages). */
int gbci_timeout_ms(const gbc_client_t *c, int timeout_ms);
/* Bytes to read or write of a growable struct: the caller's struct_size (0:
 * the 0.2 size), at most ours. */
size_t gbci_struct_size(size_t given, size_t v02, size_t ours);

/* pb_depth.c: protobuf_c_message_unpack of a peer's bytes, refused (NULL)
 * when submessages nest deeper than GBCI_PB_MAX_DEPTH levels, as no bridge
 * sends and as would overflow unpack's recursion. */
#define GBCI_PB_MAX_DEPTH 8u
ProtobufCMessage *gbci_pb_unpack(const ProtobufCMessageDescriptor *d, size_t len, const uint8_t *data);

/* transport.c */
gbc_err gbci_endpoint_open(gbc_client_t *c, size_t i, const char *addr,
                           const char *server_key, const char *public_key,
                           const char *secret_key);
void gbci_endpoint_close(gbci_endpoint_t *ep);
/* Sends endpoint i's queued batch; waits until deadline for room, reading
 * replies meanwhile. On failure the batch stays queued. */
gbc_err gbci_flush_ep(gbc_client_t *c, size_t i, int64_t deadline);
/* Reads replies until deadline. Async ones go to c->ready. Returns true as
 * soon as the reply to `want` (non-zero) is in *got, or, with want 0, as
 * soon as c->ready is not empty; false at the deadline. A failing receive
 * sets *err (else GBC_OK). */
/* Also returns false, before the deadline, when the connection that carried
 * `want` (sent on endpoint want_ep) has ended, or, with want 0, when some
 * endpoint has requests lost so (lost_new). */
bool gbci_pump(gbc_client_t *c, int64_t deadline, uint64_t want, size_t want_ep,
               gbc_reply_t *got, gbc_err *err);
/* Reads the replies already waiting on endpoint i (async ones to c->ready). */
gbc_err gbci_drain_ep(gbc_client_t *c, size_t i);
/* Why endpoint i could not send before the deadline: CONNECT, AUTH or
 * TIMEOUT (backpressure), recorded for gbc_last_error. */
gbc_err gbci_send_failure(gbc_client_t *c, size_t i);
/* Whether endpoint i's handshake failed for good (a CURVE refusal, not a
 * gpubridge endpoint), as opposed to not being up yet or a reset it retries. */
bool gbci_handshake_failed_for_good(const gbc_client_t *c, size_t i);
/* Reads pending monitor events of endpoint i into its flags. */
void gbci_monitor_drain(gbci_endpoint_t *ep);

/* deadline.c: completes every async request whose deadline is past now,
 * or whose connection ended with it in flight (lost_upto), with a
 * STATUS_TIMEOUT reply in c->ready (a late reply is then dropped); returns
 * the earliest deadline still pending (INT64_MAX when none). */
/* check_lost: also complete the requests of connections that have ended,
 * which reads the monitors (a system call each); a caller with replies
 * ready to hand out skips it, and the next one that would wait does it. */
int64_t gbci_expire(gbc_client_t *c, int64_t now, bool check_lost);

/* request.c: one envelope to endpoint i, waiting for its reply (calls and
 * control operations). Sets env->correlation_id. */
gbc_err gbci_call_env(gbc_client_t *c, size_t i, Gpubridge__Envelope *env,
                      gbc_reply_t *out, int timeout_ms);

#endif
