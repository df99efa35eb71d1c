#include "codec.h"

#include <stdio.h>
#include <string.h>

#include "builtin_codecs.h"
#include "codec_pagerank.h"
#include "echo.pb-c.h" /* message type numbers */
#include "grain.h"
#include "grain_registry.h"
#include "pb_wire.h"
#include "vecadd.pb-c.h" /* message type numbers */

/* Walks pb as an EchoRequest (sequence 1 varint, data 2 bytes,
 * client_time_ns 3 varint; unknown fields allowed). 0 when it is one.
 * Field 4 is the reply's grain_count, appended as a varint: a request that
 * carries a field 4 of another wire type would make the reply undecodable. */
static int echo_check(const uint8_t *pb, size_t len)
{
    const uint8_t *p = pb, *end = len ? pb + len : pb; /* pb may be NULL when empty */
    gb_pb_field_t f;
    int r;
    while ((r = gb_pb_next(&p, end, &f)) > 0)
        if (((f.num == 1 || f.num == 3 || f.num == 4) && f.wt != GB_PB_VARINT) ||
            (f.num == 2 && f.wt != GB_PB_LEN))
            return -1;
    return r;
}

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
    if (echo_check(pb, len) != 0) {
        snprintf(err, errlen, "payload is not an EchoRequest");
        return GPUBRIDGE__STATUS__STATUS_MALFORMED;
    }
    if (len > cap) {
        snprintf(err, errlen, "EchoRequest of %zu bytes exceeds the largest echo message (%u bytes; "
                              "max_message_size bounds it)", len, cap);
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    }
    if (len) /* an empty EchoRequest has no bytes (and maybe no buffer) */
        memcpy(rec, pb, len);
    *rec_len = (uint32_t)len;
    *slot_type = GB_ECHO_MSG_ECHO;
    return GPUBRIDGE__STATUS__STATUS_OK;
}

/* VectorAddRequest fields: op 1 (enum), a 2 and b 3 (repeated float, packed
 * or not; occurrences concatenate). */
enum { VA_OP = 1, VA_A = 2, VA_B = 3 };

/* Floats of one occurrence of a repeated float field, or -1 if malformed. */
static long float_count(const gb_pb_field_t *f)
{
    if (f->wt == GB_PB_I32)
        return 1;
    if (f->wt == GB_PB_LEN && f->len % 4 == 0)
        return (long)(f->len / 4);
    return -1;
}

/* Appends one occurrence's floats at *dst. */
static void float_copy(const gb_pb_field_t *f, unsigned char **dst)
{
    if (f->wt == GB_PB_I32) {
        uint32_t w = (uint32_t)f->v;
        memcpy(*dst, &w, 4);
        *dst += 4;
    } else if (f->len) {
        memcpy(*dst, f->p, f->len);
        *dst += f->len;
    }
}

static int vecadd_request(uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec, uint32_t cap,
                          uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    if (message_type != GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST) {
        snprintf(err, errlen, "vecadd has no message type %u (VectorAddRequest is 1)", message_type);
        return GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE;
    }
    /* First pass: validate and count; the record needs n before a and b. */
    const uint8_t *p = pb, *end = len ? pb + len : pb; /* pb may be NULL when empty */
    gb_pb_field_t f;
    size_t n_a = 0, n_b = 0;
    uint32_t op = 0;
    int r;
    while ((r = gb_pb_next(&p, end, &f)) > 0) {
        if (f.num == VA_OP) {
            if (f.wt != GB_PB_VARINT)
                break;
            op = (uint32_t)f.v; /* an enum is an int32: the low 32 bits */
        } else if (f.num == VA_A || f.num == VA_B) {
            long c = float_count(&f);
            if (c < 0)
                break;
            *(f.num == VA_A ? &n_a : &n_b) += (size_t)c;
        }
    }
    if (r != 0) {
        snprintf(err, errlen, "payload is not a VectorAddRequest");
        return GPUBRIDGE__STATUS__STATUS_MALFORMED;
    }
    if (n_a != n_b) {
        snprintf(err, errlen, "vectors differ in length (a has %zu elements, b has %zu)", n_a, n_b);
        return GPUBRIDGE__STATUS__STATUS_MALFORMED;
    }
    if (op > GB_VECADD_DIV) {
        snprintf(err, errlen, "unknown op %u (add 0, sub 1, mul 2, div 3)", op);
        return GPUBRIDGE__STATUS__STATUS_MALFORMED;
    }
    if (n_a > (cap - GB_VECADD_HDR) / 8) {
        snprintf(err, errlen, "vectors of %zu elements exceed the largest vecadd message (at most %u elements; "
                 "max_message_size bounds it)", n_a, (cap - GB_VECADD_HDR) / 8);
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    }
    /* Second pass: the record is op, n, a[n], b[n]. */
    uint32_t n = (uint32_t)n_a;
    memcpy(rec, &op, 4);
    memcpy(rec + 4, &n, 4);
    unsigned char *a = rec + 8, *b = rec + 8 + 4u * n;
    for (p = pb; gb_pb_next(&p, end, &f) > 0;)
        if (f.num == VA_A || f.num == VA_B)
            float_copy(&f, f.num == VA_A ? &a : &b);
    *rec_len = gb_vecadd_request_len(n);
    *slot_type = GB_VECADD_MSG_REQUEST;
    return GPUBRIDGE__STATUS__STATUS_OK;
}

/* ---- the built-in codecs (builtin_codecs.h) ---- */

static int echo_request_key(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                            uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    (void)key;
    return echo_request(message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
}

static size_t plain_reply_bound(uint32_t rec_len)
{
    return (size_t)rec_len + 32; /* tag + length prefixes, and echo's grain_count */
}

static int echo_reply(const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                      size_t *out_len, uint32_t *message_type)
{
    size_t n = hdr->len;
    if (cap < plain_reply_bound(hdr->len))
        return -1;
    if (n)
        memcpy(out, rec, n);
    out[n++] = (4u << 3) | 0; /* field 4, varint */
    n += gb_pb_varint_put(out + n, hdr->aux);
    *out_len = n;
    *message_type = GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_RESPONSE;
    return 0;
}

static int vecadd_request_key(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                              uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    (void)key;
    return vecadd_request(message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
}

static int vecadd_reply(const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                        size_t *out_len, uint32_t *message_type)
{
    /* VectorAddResponse { repeated float result = 1 [packed] }: the
     * record's floats are the packed field's bytes. */
    if (cap < plain_reply_bound(hdr->len) || hdr->len % 4)
        return -1;
    size_t n = 0;
    if (hdr->len) {
        n += gb_pb_key_put(out, 1, GB_PB_LEN);
        n += gb_pb_varint_put(out + n, hdr->len);
        memcpy(out + n, rec, hdr->len);
        n += hdr->len;
    }
    *out_len = n;
    *message_type = GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_RESPONSE;
    return 0;
}

static int pr_sender_request(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                             uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    return gbi_codec_pr_request(1, key, message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
}

static int pr_aggregator_request(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len,
                                 unsigned char *rec, uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err,
                                 size_t errlen)
{
    return gbi_codec_pr_request(0, key, message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
}

static int pr_sender_reply(const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                           size_t *out_len, uint32_t *message_type)
{
    if (cap < gbi_codec_pr_reply_bound(hdr->len))
        return -1;
    return gbi_codec_pr_reply(1, hdr, rec, out, cap, out_len, message_type);
}

static int pr_aggregator_reply(const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                               size_t *out_len, uint32_t *message_type)
{
    if (cap < gbi_codec_pr_reply_bound(hdr->len))
        return -1;
    return gbi_codec_pr_reply(0, hdr, rec, out, cap, out_len, message_type);
}

const char *gbi_codec_pr_sender_error(const gb_slot_hdr_t *hdr, char *buf, size_t cap)
{
    return hdr->status == GB_SLOT_HANDLER_ERROR ? gbi_codec_pr_error(1, hdr, buf, cap) : NULL;
}

const char *gbi_codec_pr_aggregator_error(const gb_slot_hdr_t *hdr, char *buf, size_t cap)
{
    return hdr->status == GB_SLOT_HANDLER_ERROR ? gbi_codec_pr_error(0, hdr, buf, cap) : NULL;
}

const gb_grain_codec_t gbi_codec_echo = {echo_request_key, echo_reply, plain_reply_bound, gbi_codec_echo_limits};
const gb_grain_codec_t gbi_codec_vecadd = {vecadd_request_key, vecadd_reply, plain_reply_bound,
                                           gbi_codec_vecadd_limits};
const gb_grain_codec_t gbi_codec_pr_sender = {pr_sender_request, pr_sender_reply, gbi_codec_pr_reply_bound,
                                              gbi_codec_pr_sender_limits};
const gb_grain_codec_t gbi_codec_pr_aggregator = {pr_aggregator_request, pr_aggregator_reply,
                                                  gbi_codec_pr_reply_bound, gbi_codec_pr_aggregator_limits};

/* ---- any grain type: its codec, or raw payloads ---- */

static const gb_grain_codec_t *codec_of(const gb_grain_desc_t *d)
{
    return d && d->hooks ? d->hooks->codec : NULL;
}

/* Raw payloads: the bytes are the record, the message type the slot's. */
static int raw_request(const gb_grain_desc_t *d, uint32_t message_type, const uint8_t *pb, size_t len,
                       unsigned char *rec, uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err,
                       size_t errlen)
{
    uint32_t i = 0;
    while (i < d->n_msgs && d->msgs[i].type != message_type)
        i++;
    if (i == d->n_msgs) {
        int n = snprintf(err, errlen, "%s has no message type %u (", d->name, message_type);
        for (uint32_t k = 0; k < d->n_msgs && n > 0 && (size_t)n < errlen; k++)
            n += snprintf(err + n, errlen - (size_t)n, "%s%s is %u", k ? ", " : "", d->msgs[k].name,
                          d->msgs[k].type);
        if (n > 0 && (size_t)n < errlen)
            snprintf(err + n, errlen - (size_t)n, ")");
        return GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE;
    }
    if (len > cap) {
        snprintf(err, errlen, "%s of %zu bytes exceeds the largest %s message (%u bytes; max_message_size "
                 "bounds it)", d->msgs[i].name, len, d->name, cap);
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    }
    if (len)
        memcpy(rec, pb, len);
    *rec_len = (uint32_t)len;
    *slot_type = (uint16_t)message_type;
    return GPUBRIDGE__STATUS__STATUS_OK;
}

int gbi_codec_request(int kind, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                      uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    return gbi_codec_request_key(kind, 0, message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
}

const char *gbi_codec_error(int kind, const gb_slot_hdr_t *hdr, char *buf, size_t cap)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    if (d && d->hooks && d->hooks->error_text)
        return d->hooks->error_text(hdr, buf, cap);
    return NULL;
}

int gbi_codec_request_key(int kind, uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len,
                          unsigned char *rec, uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err,
                          size_t errlen)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    const gb_grain_codec_t *c = codec_of(d);
    if (c && c->request)
        return c->request(key, message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
    if (d)
        return raw_request(d, message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
    snprintf(err, errlen, "grain type has no codec");
    return GPUBRIDGE__STATUS__STATUS_INTERNAL;
}

size_t gbi_codec_reply_bound(int kind, uint32_t rec_len)
{
    const gb_grain_codec_t *c = codec_of(gb_grain_get(kind));
    return c && c->reply_bound ? c->reply_bound(rec_len) : rec_len;
}

int gbi_codec_reply(int kind, const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                    size_t *out_len, uint32_t *message_type)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    const gb_grain_codec_t *c = codec_of(d);
    if (c && c->reply)
        return c->reply(hdr, rec, out, cap, out_len, message_type);
    if (!d || cap < hdr->len)
        return -1;
    if (hdr->len)
        memcpy(out, rec, hdr->len);
    *out_len = hdr->len;
    *message_type = hdr->type;
    return 0;
}
