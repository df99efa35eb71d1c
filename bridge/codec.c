#include "codec.h"

#include <stdio.h>
#include <string.h>

#include "codec_pagerank.h"
#include "echo.pb-c.h"
#include "grain.h"
#include "pb_wire.h"
#include "vecadd.pb-c.h"

/* echo: the request's protobuf bytes are the record; the reply appends field
 * 4 (grain_count), which turns the echoed EchoRequest into an EchoResponse
 * (protobuf merges concatenated encodings). */
static int echo_request(uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec, uint32_t cap,
                        uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    if (message_type != GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST) {
        snprintf(err, errlen, "echo has no message type %u (EchoRequest is 1)", message_type);
        return GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE;
    }
    Gpubridge__EchoRequest *m = gpubridge__echo_request__unpack(NULL, len, pb);
    if (!m) {
        snprintf(err, errlen, "payload is not an EchoRequest");
        return GPUBRIDGE__STATUS__STATUS_MALFORMED;
    }
    gpubridge__echo_request__free_unpacked(m, NULL);
    if (len > cap) {
        snprintf(err, errlen, "EchoRequest of %zu bytes exceeds the echo slot's %u payload bytes "
                              "(raise grains.slot_size)", len, cap);
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    }
    if (len) /* an empty EchoRequest has no bytes (and maybe no buffer) */
        memcpy(rec, pb, len);
    *rec_len = (uint32_t)len;
    *slot_type = GB_ECHO_MSG_ECHO;
    return GPUBRIDGE__STATUS__STATUS_OK;
}

static int vecadd_request(uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec, uint32_t cap,
                          uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    if (message_type != GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST) {
        snprintf(err, errlen, "vecadd has no message type %u (VectorAddRequest is 1)", message_type);
        return GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE;
    }
    Gpubridge__VectorAddRequest *m = gpubridge__vector_add_request__unpack(NULL, len, pb);
    if (!m) {
        snprintf(err, errlen, "payload is not a VectorAddRequest");
        return GPUBRIDGE__STATUS__STATUS_MALFORMED;
    }
    int st = GPUBRIDGE__STATUS__STATUS_OK;
    uint32_t op = (uint32_t)m->op;
    if (m->n_a != m->n_b) {
        snprintf(err, errlen, "vectors differ in length (a has %zu elements, b has %zu)", m->n_a, m->n_b);
        st = GPUBRIDGE__STATUS__STATUS_MALFORMED;
    } else if (op > GB_VECADD_DIV) {
        snprintf(err, errlen, "unknown op %u (add 0, sub 1, mul 2, div 3)", op);
        st = GPUBRIDGE__STATUS__STATUS_MALFORMED;
    } else if (m->n_a > (cap - GB_VECADD_HDR) / 8) {
        snprintf(err, errlen, "vectors of %zu elements exceed the vecadd slot (at most %u; raise grains.slot_size)",
                 m->n_a, (cap - GB_VECADD_HDR) / 8);
        st = GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    } else {
        uint32_t n = (uint32_t)m->n_a;
        memcpy(rec, &op, 4);
        memcpy(rec + 4, &n, 4);
        if (n) { /* empty vectors come without arrays */
            memcpy(rec + 8, m->a, 4u * n);
            memcpy(rec + 8 + 4u * n, m->b, 4u * n);
        }
        *rec_len = gb_vecadd_request_len(n);
        *slot_type = GB_VECADD_MSG_REQUEST;
    }
    gpubridge__vector_add_request__free_unpacked(m, NULL);
    return st;
}

int gbi_codec_request(int kind, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                      uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    switch (kind) {
    case GB_GRAIN_ECHO:
        return echo_request(message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
    case GB_GRAIN_VECADD:
        return vecadd_request(message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
    case GB_GRAIN_PR_SENDER:
    case GB_GRAIN_PR_AGGREGATOR:
        return gbi_codec_pr_request(kind == GB_GRAIN_PR_SENDER, message_type, pb, len, rec, cap, rec_len,
                                    slot_type, err, errlen);
    default:
        snprintf(err, errlen, "grain type has no codec");
        return GPUBRIDGE__STATUS__STATUS_INTERNAL;
    }
}

size_t gbi_codec_reply_bound(int kind, uint32_t rec_len)
{
    if (kind == GB_GRAIN_PR_SENDER || kind == GB_GRAIN_PR_AGGREGATOR)
        return gbi_codec_pr_reply_bound(rec_len);
    return (size_t)rec_len + 32; /* tag + length prefixes, and echo's grain_count */
}

int gbi_codec_reply(int kind, const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                    size_t *out_len, uint32_t *message_type)
{
    if (cap < gbi_codec_reply_bound(kind, hdr->len))
        return -1;
    switch (kind) {
    case GB_GRAIN_ECHO: {
        size_t n = hdr->len;
        if (n)
            memcpy(out, rec, n);
        out[n++] = (4u << 3) | 0; /* field 4, varint */
        n += gb_pb_varint_put(out + n, hdr->aux);
        *out_len = n;
        *message_type = GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_RESPONSE;
        return 0;
    }
    case GB_GRAIN_VECADD: {
        if (hdr->len % 4)
            return -1;
        Gpubridge__VectorAddResponse r = GPUBRIDGE__VECTOR_ADD_RESPONSE__INIT;
        float tmp[4096];
        r.n_result = hdr->len / 4;
        if (r.n_result > sizeof tmp / sizeof tmp[0])
            return -1;
        if (hdr->len)
            memcpy(tmp, rec, hdr->len); /* the record may be unaligned for float */
        r.result = tmp;
        *out_len = gpubridge__vector_add_response__pack(&r, out);
        *message_type = GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_RESPONSE;
        return 0;
    }
    case GB_GRAIN_PR_SENDER:
    case GB_GRAIN_PR_AGGREGATOR:
        return gbi_codec_pr_reply(kind == GB_GRAIN_PR_SENDER, hdr, rec, out, cap, out_len, message_type);
    default:
        return -1;
    }
}
