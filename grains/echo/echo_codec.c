/* echo's codec: EchoRequest <-> the record (the request's protobuf bytes),
 * EchoResponse from the reply (builtin_codecs.h). */
#include <stdio.h>
#include <string.h>

#include "builtin_codecs.h"
#include "echo.h"
#include "echo.pb-c.h" /* message type numbers */
#include "gpubridge.pb-c.h"
#include "pb_wire.h"

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

static int echo_request_key(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                            uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    (void)key;
    return echo_request(message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
}

static int echo_reply(const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                      size_t *out_len, uint32_t *message_type)
{
    size_t n = hdr->len;
    if (cap < gbi_plain_reply_bound(hdr->len))
        return -1;
    if (n)
        memcpy(out, rec, n);
    out[n++] = (4u << 3) | 0; /* field 4, varint */
    n += gb_pb_varint_put(out + n, hdr->aux);
    *out_len = n;
    *message_type = GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_RESPONSE;
    return 0;
}

size_t gbi_codec_echo_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    /* the EchoRequest's bytes are the record, and the reply's */
    return gb_grain_limit_put(out, 0, max, GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST, "EchoRequest", gbi_min32(rc, pb), 0);
}

const gb_grain_codec_t gbi_codec_echo = {echo_request_key, echo_reply, gbi_plain_reply_bound, gbi_codec_echo_limits};
