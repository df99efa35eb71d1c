/* Reading ServerFrames in place (proto/gpubridge.proto): a Reply as views
 * into the frame's bytes, and a frame's replies one by one, with no
 * allocation. Shared, header-only like pb_wire.h, by the client library
 * (client/transport.c), the bridge's supervisor (correlation ids of its
 * worker's replies) and bench_bridge; the bridge writes the same field
 * numbers (server/server_reply.c). */
#ifndef GB_PB_REPLY_H
#define GB_PB_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pb_wire.h"

/* Field numbers of proto/gpubridge.proto's ServerFrame, ReplyBatch and Reply. */
enum { GB_PB_FRAME_REPLY = 1, GB_PB_FRAME_BATCH = 2, GB_PB_BATCH_REPLIES = 1 };
enum {
    GB_PB_REPLY_CORR = 1,
    GB_PB_REPLY_STATUS = 2,
    GB_PB_REPLY_ERROR = 3,
    GB_PB_REPLY_MESSAGE_TYPE = 4,
    GB_PB_REPLY_PAYLOAD = 5
};

/* One Reply as views into its frame's bytes (valid while they are). Unset
 * fields read as protobuf defaults: 0 and empty. */
typedef struct gb_pb_reply_view {
    uint64_t corr;
    int status;            /* any int32: proto3 enums are open */
    uint32_t message_type;
    const uint8_t *error;  /* not NUL-terminated; may hold NULs */
    size_t error_len;
    const uint8_t *payload;
    size_t payload_len;
} gb_pb_reply_view_t;

/* Parses the Reply encoded in the len bytes at p on top of what *v holds, so
 * that two encodings in a row merge as protobuf merges them (the last value
 * of a field wins). Unknown fields are skipped. Returns 0, or -1 when
 * malformed: bad protobuf, or a known field with the wrong wire type
 * (protobuf-c refuses those as well). */
static inline int gb_pb_reply_parse(gb_pb_reply_view_t *v, const uint8_t *p, size_t len)
{
    if (!len)
        return 0; /* p may be NULL */
    const uint8_t *end = p + len;
    gb_pb_field_t fd;
    int r;
    while ((r = gb_pb_next(&p, end, &fd)) > 0) {
        switch (fd.num) {
        case GB_PB_REPLY_CORR:
            if (fd.wt != GB_PB_VARINT)
                return -1;
            v->corr = fd.v;
            break;
        case GB_PB_REPLY_STATUS:
            if (fd.wt != GB_PB_VARINT)
                return -1;
            v->status = (int32_t)(uint32_t)fd.v; /* an enum is an int32: low 32 bits */
            break;
        case GB_PB_REPLY_ERROR:
            if (fd.wt != GB_PB_LEN)
                return -1;
            v->error = fd.p;
            v->error_len = fd.len;
            break;
        case GB_PB_REPLY_MESSAGE_TYPE:
            if (fd.wt != GB_PB_VARINT)
                return -1;
            v->message_type = (uint32_t)fd.v;
            break;
        case GB_PB_REPLY_PAYLOAD:
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

/* Walks one ServerFrame: gb_pb_reply_frame_open checks all of it, then
 * gb_pb_reply_frame_next hands out its replies. Checking first keeps a frame
 * that turns out malformed near its end from routing any reply (protobuf-c
 * refused such frames whole). */
typedef struct gb_pb_reply_iter {
    const uint8_t *p, *end;   /* from the body field on */
    const uint8_t *bp, *bend; /* the rest of the ReplyBatch being read */
    uint32_t body;            /* the body field: GB_PB_FRAME_REPLY or _BATCH */
    size_t n;                 /* replies in the frame */
    size_t left;              /* replies not handed out yet */
} gb_pb_reply_iter_t;

/* Checks the ServerFrame in the len bytes at data and readies *it to hand out
 * its it->n replies. As protobuf-c reads it: the last `reply` or `batch`
 * field is the body, replacing any earlier one; unknown fields are skipped. Returns 0, or -1 when the frame
 * is malformed (any part of it) or sets no body; *it then hands out nothing. */
static inline int gb_pb_reply_frame_open(gb_pb_reply_iter_t *it, const uint8_t *data, size_t len)
{
    memset(it, 0, sizeof *it);
    if (!len)
        return -1; /* no body */
    const uint8_t *p = data, *end = data + len;
    gb_pb_reply_view_t scratch = {0};
    size_t n = 0;
    uint32_t body = 0;
    const uint8_t *from = NULL; /* where the winning member's run of fields starts */
    gb_pb_field_t fd;
    int r;
    for (;;) {
        const uint8_t *at = p;
        if ((r = gb_pb_next(&p, end, &fd)) <= 0)
            break;
        if (fd.num != GB_PB_FRAME_REPLY && fd.num != GB_PB_FRAME_BATCH)
            continue;
        if (fd.wt != GB_PB_LEN)
            return -1;
        /* A body field replaces every earlier one, as protobuf-c reads
         * it (and the bridge's decoder, server/wire.c); each is checked. */
        body = fd.num;
        from = at;
        n = 0;
        if (fd.num == GB_PB_FRAME_REPLY) {
            memset(&scratch, 0, sizeof scratch);
            if (gb_pb_reply_parse(&scratch, fd.p, fd.len) != 0)
                return -1;
            n = 1;
            continue;
        }
        const uint8_t *bp = fd.p, *bend = fd.p + fd.len;
        gb_pb_field_t bf;
        int br;
        while ((br = gb_pb_next(&bp, bend, &bf)) > 0) {
            if (bf.num != GB_PB_BATCH_REPLIES)
                continue;
            if (bf.wt != GB_PB_LEN || gb_pb_reply_parse(&scratch, bf.p, bf.len) != 0)
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

/* Hands out the next reply of a frame gb_pb_reply_frame_open accepted: *v
 * views into the frame's bytes. False when all have been handed out. */
static inline bool gb_pb_reply_frame_next(gb_pb_reply_iter_t *it, gb_pb_reply_view_t *v)
{
    gb_pb_field_t fd;
    if (!it->left)
        return false;
    memset(v, 0, sizeof *v);
    if (it->body == GB_PB_FRAME_REPLY) {
        /* it->p is at the last body field, the `reply`. */
        if (gb_pb_next(&it->p, it->end, &fd) > 0)
            (void)gb_pb_reply_parse(v, fd.p, fd.len); /* checked by open */
        it->left = 0;
        return true;
    }
    for (;;) {
        while (gb_pb_next(&it->bp, it->bend, &fd) > 0) {
            if (fd.num == GB_PB_BATCH_REPLIES) {
                (void)gb_pb_reply_parse(v, fd.p, fd.len);
                it->left--;
                return true;
            }
        }
        do { /* this ReplyBatch is done: on to the next `batch` */
            if (gb_pb_next(&it->p, it->end, &fd) <= 0) {
                it->left = 0;
                return false;
            }
        } while (fd.num != GB_PB_FRAME_BATCH);
        it->bp = fd.p;
        it->bend = fd.p + fd.len;
    }
}

#endif
