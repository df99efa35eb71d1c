/* client_internal.h: what the files of libgpubridge share (not installed). */
#ifndef GBC_CLIENT_INTERNAL_H
#define GBC_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpubridge.pb-c.h"
#include "gpubridge_client.h"
#include "pb_wire.h"

#define GBCI_DEFAULT_TIMEOUT_MS 5000
#define GBCI_DEFAULT_MAX_BATCH 256
#define GBCI_DEFAULT_MAX_FRAME (1u << 20)
#define GBCI_KEY_LEN 41 /* Z85 key + NUL */

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
void gbci_batch_free(gbci_batch_t *b);

/* ---- transport.c: reply frames, read in place ---- */

/* Read with pb_wire.h instead of protobuf-c: no allocation per reply on the
 * receive path. Header-inline so that test_client (which sees only the
 * library's exported names) can feed it encodings directly. */

/* Field numbers of proto/gpubridge.proto's ServerFrame, ReplyBatch and Reply. */
enum { GBCI_FRAME_REPLY = 1, GBCI_FRAME_BATCH = 2, GBCI_BATCH_REPLIES = 1 };
enum {
    GBCI_REPLY_CORR = 1,
    GBCI_REPLY_STATUS = 2,
    GBCI_REPLY_ERROR = 3,
    GBCI_REPLY_MESSAGE_TYPE = 4,
    GBCI_REPLY_PAYLOAD = 5
};

/* One Reply as views into its frame's bytes (valid while they are). Unset
 * fields read as protobuf defaults: 0 and empty. */
typedef struct gbci_reply_view {
    uint64_t corr;
    int status;            /* any int32: proto3 enums are open */
    uint32_t message_type;
    const uint8_t *error;  /* not NUL-terminated; may hold NULs */
    size_t error_len;
    const uint8_t *payload;
    size_t payload_len;
} gbci_reply_view_t;

/* Parses the Reply encoded in the len bytes at p on top of what *v holds, so
 * that two encodings in a row merge as protobuf merges them (the last value
 * of a field wins). Unknown fields are skipped. Returns 0, or -1 when
 * malformed: bad protobuf, or a known field with the wrong wire type
 * (protobuf-c refuses those as well). */
static inline int gbci_reply_parse(gbci_reply_view_t *v, const uint8_t *p, size_t len)
{
    if (!len)
        return 0; /* p may be NULL */
    const uint8_t *end = p + len;
    gb_pb_field_t fd;
    int r;
    while ((r = gb_pb_next(&p, end, &fd)) > 0) {
        switch (fd.num) {
        case GBCI_REPLY_CORR:
            if (fd.wt != GB_PB_VARINT)
                return -1;
            v->corr = fd.v;
            break;
        case GBCI_REPLY_STATUS:
            if (fd.wt != GB_PB_VARINT)
                return -1;
            v->status = (int32_t)(uint32_t)fd.v; /* an enum is an int32: low 32 bits */
            break;
        case GBCI_REPLY_ERROR:
            if (fd.wt != GB_PB_LEN)
                return -1;
            v->error = fd.p;
            v->error_len = fd.len;
            break;
        case GBCI_REPLY_MESSAGE_TYPE:
            if (fd.wt != GB_PB_VARINT)
                return -1;
            v->message_type = (uint32_t)fd.v;
            break;
        case GBCI_REPLY_PAYLOAD:
            if (fd.wt != GB_PB_LEN)
                return -1;
            v->payload = fd.p;
            v->payload_len = fd.len;
            break;
        default:
            break; /* unknown field: skipped */
        }
    }
    return r; /* 0 at the end, -1 when malformed */
}

/* Walks one ServerFrame: gbci_reply_frame_open checks all of it, then
 * gbci_reply_frame_next hands out its replies. Checking first keeps a frame
 * that turns out malformed near its end from routing any reply (protobuf-c
 * refused such frames whole). */
typedef struct gbci_reply_iter {
    const uint8_t *p, *end;   /* from the body field on */
    const uint8_t *bp, *bend; /* the rest of the ReplyBatch being read */
    uint32_t body;            /* the body field: GBCI_FRAME_REPLY or _BATCH */
    size_t n;                 /* replies in the frame */
    size_t left;              /* replies not handed out yet */
} gbci_reply_iter_t;

/* Checks the ServerFrame in the len bytes at data and readies *it to hand out
 * its it->n replies. As protobuf-c reads it: the last `reply` or `batch`
 * field is the body, replacing any earlier one; unknown fields are skipped. Returns 0, or -1 when the frame
 * is malformed (any part of it) or sets no body; *it then hands out nothing. */
static inline int gbci_reply_frame_open(gbci_reply_iter_t *it, const uint8_t *data, size_t len)
{
    memset(it, 0, sizeof *it);
    if (!len)
        return -1; /* no body */
    const uint8_t *p = data, *end = data + len;
    gbci_reply_view_t scratch = {0};
    size_t n = 0;
    uint32_t body = 0;
    const uint8_t *from = NULL; /* where the winning member's run of fields starts */
    gb_pb_field_t fd;
    int r;
    for (;;) {
        const uint8_t *at = p;
        if ((r = gb_pb_next(&p, end, &fd)) <= 0)
            break;
        if (fd.num != GBCI_FRAME_REPLY && fd.num != GBCI_FRAME_BATCH)
            continue;
        if (fd.wt != GB_PB_LEN)
            return -1;
        /* A body field replaces every earlier one, as protobuf-c reads
         * it (and the bridge's decoder, bridge/wire.c); each is checked. */
        body = fd.num;
        from = at;
        n = 0;
        if (fd.num == GBCI_FRAME_REPLY) {
            memset(&scratch, 0, sizeof scratch);
            if (gbci_reply_parse(&scratch, fd.p, fd.len) != 0)
                return -1;
            n = 1;
            continue;
        }
        const uint8_t *bp = fd.p, *bend = fd.p + fd.len;
        gb_pb_field_t bf;
        int br;
        while ((br = gb_pb_next(&bp, bend, &bf)) > 0) {
            if (bf.num != GBCI_BATCH_REPLIES)
                continue;
            if (bf.wt != GB_PB_LEN || gbci_reply_parse(&scratch, bf.p, bf.len) != 0)
                return -1;
            n++;
        }
        if (br < 0)
            return -1;
    }
    if (r < 0 || !body)
        return -1;
    it->p = from;
    it->end = it->bp = it->bend = end;
    it->body = body;
    it->n = it->left = n;
    return 0;
}

/* Hands out the next reply of a frame gbci_reply_frame_open accepted: *v
 * views into the frame's bytes. False when all have been handed out. */
static inline bool gbci_reply_frame_next(gbci_reply_iter_t *it, gbci_reply_view_t *v)
{
    gb_pb_field_t fd;
    if (!it->left)
        return false;
    memset(v, 0, sizeof *v);
    if (it->body == GBCI_FRAME_REPLY) {
        /* it->p is at the last body field, the `reply`. */
        if (gb_pb_next(&it->p, it->end, &fd) > 0)
            (void)gbci_reply_parse(v, fd.p, fd.len); /* checked by open */
        it->left = 0;
        return true;
    }
    for (;;) {
        while (gb_pb_next(&it->bp, it->bend, &fd) > 0) {
            if (fd.num == GBCI_BATCH_REPLIES) {
                (void)gbci_reply_parse(v, fd.p, fd.len);
                it->left--;
                return true;
            }
        }
        do { /* this ReplyBatch is done: on to the next `batch` */
            if (gb_pb_next(&it->p, it->end, &fd) <= 0) {
                it->left = 0;
                return false;
            }
        } while (fd.num != GBCI_FRAME_BATCH);
        it->bp = fd.p;
        it->bend = fd.p + fd.len;
    }
}

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
    uint64_t bad_frames;    /* frames from a bridge that did not decode */
    struct zmq_pollitem_t *items; /* n, for zmq_poll */
};

/* errors (client.c): record the failure for gbc_last_error, return err. */
gbc_err gbci_fail(gbc_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records a non-OK reply (its status and text; c, if not NULL, names the
 * endpoint); returns GBC_ERR_STATUS. */
gbc_err gbci_fail_status(const gbc_client_t *c, const gbc_reply_t *r);
void gbci_clear_error(void);

/* time (client.c) */
int64_t gbci_now_ns(void);
/* Absolute CLOCK_MONOTONIC deadline for timeout_ms (see the header);
 * INT64_MAX for GBC_TIMEOUT_FOREVER. */
int64_t gbci_deadline(const gbc_client_t *c, int timeout_ms);

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
bool gbci_pump(gbc_client_t *c, int64_t deadline, uint64_t want, gbc_reply_t *got,
               gbc_err *err);
/* Why endpoint i could not send before the deadline: CONNECT, AUTH or
 * TIMEOUT (backpressure), recorded for gbc_last_error. */
gbc_err gbci_send_failure(gbc_client_t *c, size_t i);
/* Reads pending monitor events of endpoint i into its flags. */
void gbci_monitor_drain(gbci_endpoint_t *ep);

/* request.c: one envelope to endpoint i, waiting for its reply (calls and
 * control operations). Sets env->correlation_id. */
gbc_err gbci_call_env(gbc_client_t *c, size_t i, Gpubridge__Envelope *env,
                      gbc_reply_t *out, int timeout_ms);

#endif
