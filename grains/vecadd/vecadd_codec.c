/* vecadd's codec: VectorAddRequest <-> the record (vecadd.h),
 * VectorAddResponse from the reply's floats (builtin_codecs.h). */
#include <stdio.h>
#include <string.h>

#include "builtin_codecs.h"
#include "gpubridge.pb-c.h"
#include "pb_wire.h"
#include "vecadd.h"
#include "vecadd.pb-c.h" /* message type numbers */

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

/* The most elements a VectorAddRequest (op add, so unset; a and b packed)
 * carries within rec_cap record bytes and `payload` bytes. */
static uint32_t vecadd_max(uint32_t rec_cap, uint32_t payload)
{
    uint64_t n = rec_cap < GB_VECADD_HDR ? 0 : (rec_cap - GB_VECADD_HDR) / 8;
    while (n > 0 && 2 * (1 + gb_pb_varint_len(4 * n) + 4 * n) > payload)
        n--;
    return (uint32_t)n;
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
    if (cap < gbi_plain_reply_bound(hdr->len) || hdr->len % 4)
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

size_t gbi_codec_vecadd_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    /* op, n, then n floats of a and n of b; the reply n floats */
    return gb_grain_limit_put(out, 0, max, GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST, "VectorAddRequest",
               pb, vecadd_max(rc, pb));
}

uint32_t gbi_vecadd_reply_max(uint16_t type, const void *rec, uint32_t len)
{
    uint32_t n = 0;
    if (type != GB_VECADD_MSG_REQUEST || len < GB_VECADD_HDR)
        return 0;
    memcpy(&n, (const unsigned char *)rec + 4, 4);
    return n <= (len - GB_VECADD_HDR) / 8 ? 4u * n : 0; /* a bad record gets an error, no payload */
}

const gb_grain_codec_t gbi_codec_vecadd = {vecadd_request_key, vecadd_reply, gbi_plain_reply_bound,
                                           gbi_codec_vecadd_limits};
