/* Replies out: batching replies per client into one ServerFrame. */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "server_internal.h"

const char *gbi_status_name(int status)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&gpubridge__status__descriptor, status);
    return v ? v->name : "STATUS_?";
}

void gbi_flush(gb_server_t *s)
{
    gbi_outbox_t *o = &s->out;
    if (o->n == 0)
        return;
    Gpubridge__ServerFrame f = GPUBRIDGE__SERVER_FRAME__INIT;
    Gpubridge__ReplyBatch b = GPUBRIDGE__REPLY_BATCH__INIT;
    if (o->n == 1) {
        f.body_case = GPUBRIDGE__SERVER_FRAME__BODY_REPLY;
        f.reply = &o->replies[0];
    } else {
        b.n_replies = o->n;
        b.replies = o->ptrs;
        f.body_case = GPUBRIDGE__SERVER_FRAME__BODY_BATCH;
        f.batch = &b;
    }
    size_t need = gpubridge__server_frame__get_packed_size(&f);
    if (need > o->frame_cap) {
        uint8_t *nf = realloc(o->frame, need);
        if (!nf) {
            GB_ERROR("out of memory packing %zu replies; they are lost", o->n);
            o->n = 0;
            o->arena_used = 0;
            return;
        }
        o->frame = nf;
        o->frame_cap = need;
    }
    size_t len = gpubridge__server_frame__pack(&f, o->frame);
    /* ROUTER drops a message for a peer that is gone (or over its high-water
     * mark): a client that left with requests in flight costs nothing. */
    zmq_send(s->sock, o->id, o->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (o->delim)
        zmq_send(s->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(s->sock, o->frame, len, ZMQ_DONTWAIT);
    s->replies += o->n;
    o->n = 0;
    o->arena_used = 0;
}

static uint8_t *arena_copy(gbi_outbox_t *o, const void *p, size_t len)
{
    uint8_t *d = o->arena + o->arena_used;
    if (len)
        memcpy(d, p, len);
    o->arena_used += len;
    return d;
}

void gbi_reply(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr, int status,
               const char *error, uint32_t message_type, const uint8_t *payload, size_t len)
{
    gbi_outbox_t *o = &s->out;
    size_t elen = error ? strlen(error) + 1 : 0;
    if (o->n && (o->id_len != id_len || memcmp(o->id, id, id_len) != 0 || o->delim != delim ||
                 o->n == GBI_BATCH_MAX || o->arena_used + len + elen > GBI_ARENA_SIZE))
        gbi_flush(s);
    if (len + elen > GBI_ARENA_SIZE) {
        /* Cannot happen for ring replies (slots are at most 64 KiB); be safe. */
        len = 0;
        status = GPUBRIDGE__STATUS__STATUS_INTERNAL;
        error = "reply too large";
        elen = strlen(error) + 1;
    }
    if (o->n == 0) {
        memcpy(o->id, id, id_len);
        o->id_len = id_len;
        o->delim = delim;
    }
    Gpubridge__Reply *r = &o->replies[o->n];
    gpubridge__reply__init(r);
    r->correlation_id = corr;
    r->status = (Gpubridge__Status)status;
    r->message_type = message_type;
    r->payload.len = len;
    r->payload.data = arena_copy(o, payload, len);
    r->error = error ? (char *)arena_copy(o, error, elen) : (char *)"";
    o->ptrs[o->n] = r;
    o->n++;
    if (status != GPUBRIDGE__STATUS__STATUS_OK)
        s->error_replies++;
}

