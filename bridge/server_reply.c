/* Replies out: each reply is encoded as it is queued, straight into the
 * outbox of its client, and the outbox goes out as one ServerFrame.
 *
 * gpubridge.proto makes this cheap: ReplyBatch is `repeated Reply replies =
 * 1` and ServerFrame is `oneof { Reply reply = 1; ReplyBatch batch = 2; }`,
 * so the record `0x0a len Reply` is a ReplyBatch entry and, on its own, a
 * complete ServerFrame{reply}. Several records become ServerFrame{batch} by
 * a `0x12 len` prefix, written into room kept in front of them. */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "pb_reply.h"
#include "server_internal.h"

/* ServerFrame.reply and ReplyBatch.replies (both field 1), ServerFrame.batch. */
#define TAG_REPLY ((GB_PB_FRAME_REPLY << 3) | GB_PB_LEN)
#define TAG_BATCH ((GB_PB_FRAME_BATCH << 3) | GB_PB_LEN)

const char *gbi_status_name(int status)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&gpubridge__status__descriptor, status);
    return v ? v->name : "STATUS_?";
}

int gbi_outbox_init(gbi_outbox_t *o)
{
    memset(o, 0, sizeof *o);
    o->buf = malloc(GBI_FRAME_PREFIX + GBI_ARENA_SIZE);
    return o->buf ? 0 : -1;
}

void gbi_outbox_fini(gbi_outbox_t *o)
{
    free(o->buf);
    memset(o, 0, sizeof *o);
}

void gbi_flush(gb_server_t *s)
{
    gbi_outbox_t *o = &s->out;
    if (o->n == 0)
        return;
    uint8_t *frame = o->buf + GBI_FRAME_PREFIX;
    size_t len = o->len;
    if (o->n > 1) {
        uint8_t hdr[GBI_FRAME_PREFIX];
        hdr[0] = TAG_BATCH;
        size_t h = 1 + gb_pb_varint_put(hdr + 1, len);
        frame -= h;
        memcpy(frame, hdr, h);
        len += h;
    }
    /* ROUTER drops a message for a peer that is gone (or over its high-water
     * mark): a client that left with requests in flight costs nothing. */
    zmq_send(s->sock, o->id, o->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (o->delim)
        zmq_send(s->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(s->sock, frame, len, ZMQ_DONTWAIT);
    s->replies += o->n;
    o->n = 0;
    o->len = 0;
}

/* Bytes of a Reply's fields (proto3: defaults are not written). */
static size_t reply_len(uint64_t corr, int status, size_t elen, uint32_t mt, size_t len)
{
    size_t n = 0;
    if (corr)
        n += 1 + gb_pb_varint_len(corr);
    if (status)
        n += 1 + gb_pb_varint_len((uint64_t)status);
    if (elen)
        n += 1 + gb_pb_varint_len(elen) + elen;
    if (mt)
        n += 1 + gb_pb_varint_len(mt);
    if (len)
        n += 1 + gb_pb_varint_len(len) + len;
    return n;
}

/* Writes the ServerFrame{reply} record of a Reply of `body` bytes at p. */
static void put_reply(uint8_t *p, size_t body, uint64_t corr, int status, const char *error, size_t elen,
                      uint32_t message_type, const uint8_t *payload, size_t len)
{
    *p++ = TAG_REPLY;
    p += gb_pb_varint_put(p, body);
    if (corr) {
        p += gb_pb_key_put(p, GB_PB_REPLY_CORR, GB_PB_VARINT);
        p += gb_pb_varint_put(p, corr);
    }
    if (status) {
        p += gb_pb_key_put(p, GB_PB_REPLY_STATUS, GB_PB_VARINT);
        p += gb_pb_varint_put(p, (uint64_t)status);
    }
    if (elen) {
        p += gb_pb_key_put(p, GB_PB_REPLY_ERROR, GB_PB_LEN);
        p += gb_pb_varint_put(p, elen);
        memcpy(p, error, elen);
        p += elen;
    }
    if (message_type) {
        p += gb_pb_key_put(p, GB_PB_REPLY_MESSAGE_TYPE, GB_PB_VARINT);
        p += gb_pb_varint_put(p, message_type);
    }
    if (len) {
        p += gb_pb_key_put(p, GB_PB_REPLY_PAYLOAD, GB_PB_LEN);
        p += gb_pb_varint_put(p, len);
        memcpy(p, payload, len);
    }
}

/* A reply larger than the outbox (a large message's, large_payload.h): a
 * frame of its own, after the replies queued before it. */
static void send_alone(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr, int status,
                       const char *error, size_t elen, uint32_t message_type, const uint8_t *payload, size_t len)
{
    gbi_flush(s);
    size_t body = reply_len(corr, status, elen, message_type, len);
    size_t rec = 1 + gb_pb_varint_len(body) + body;
    uint8_t *buf = malloc(rec);
    if (!buf) {
        gbi_reply(s, id, id_len, delim, corr, GPUBRIDGE__STATUS__STATUS_BUSY,
                  "the bridge is out of memory for this reply; retry later", 0, NULL, 0);
        return;
    }
    put_reply(buf, body, corr, status, error, elen, message_type, payload, len);
    zmq_send(s->sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (delim)
        zmq_send(s->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(s->sock, buf, rec, ZMQ_DONTWAIT);
    free(buf);
    s->replies++;
    if (status != GPUBRIDGE__STATUS__STATUS_OK)
        s->error_replies++;
}

void gbi_reply(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr, int status,
               const char *error, uint32_t message_type, const uint8_t *payload, size_t len)
{
    gbi_outbox_t *o = &s->out;
    size_t elen = error ? strlen(error) : 0;
    if (len + elen + 64 > GBI_ARENA_SIZE) {
        send_alone(s, id, id_len, delim, corr, status, error, elen, message_type, payload, len);
        return;
    }
    size_t body = reply_len(corr, status, elen, message_type, len);
    size_t rec = 1 + gb_pb_varint_len(body) + body;
    if (o->n && (o->id_len != id_len || memcmp(o->id, id, id_len) != 0 || o->delim != delim ||
                 o->n == GBI_BATCH_MAX || o->len + rec > GBI_ARENA_SIZE))
        gbi_flush(s);
    if (o->n == 0) {
        memcpy(o->id, id, id_len);
        o->id_len = id_len;
        o->delim = delim;
    }
    put_reply(o->buf + GBI_FRAME_PREFIX + o->len, body, corr, status, error, elen, message_type, payload, len);
    o->len += rec;
    o->n++;
    if (status != GPUBRIDGE__STATUS__STATUS_OK)
        s->error_replies++;
}
