#include "codec.h"

#include <stdio.h>
#include <string.h>

#include "grain_registry.h"

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
    if (c && c->request) {
        /* The reserved types are the dispatch's own (DeactivateKey clears
         * a grain's state): never a client's, whatever a codec passes. */
        if (message_type == 0 || message_type >= GB_MSG_DEACTIVATE_KEY) {
            snprintf(err, errlen, "%s has no message type %u (0 and 65280 and above are not message types)",
                     d->name, message_type);
            return GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE;
        }
        const int st = c->request(key, message_type, pb, len, rec, cap, rec_len, slot_type, err, errlen);
        if (st == GPUBRIDGE__STATUS__STATUS_OK && *slot_type >= GB_MSG_DEACTIVATE_KEY) {
            snprintf(err, errlen, "%s's codec gave message type %u the record type %u, which is reserved; "
                     "the request was not run (a bug in the grain library's codec)", d->name, message_type,
                     *slot_type);
            return GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR;
        }
        return st;
    }
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
