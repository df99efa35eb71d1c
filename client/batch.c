/* batch.c: one endpoint's queued envelopes, encoded as they are queued.
 *
 * gpubridge.proto makes this cheap: Batch is `repeated Envelope envelopes = 1`
 * and ClientFrame is `oneof { Envelope envelope = 1; Batch batch = 2; }`, so
 * the record `0x0a len Envelope` is a Batch entry and, on its own, a complete
 * ClientFrame{envelope}. A frame of several records is
 * `0x12 len(records) records` (ClientFrame{batch}). Encoding at queue time
 * copies the caller's payload once, straight into the frame. */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "pb_wire.h"

#define TAG_ENVELOPE 0x0a /* field 1, length-delimited */
#define TAG_BATCH 0x12    /* field 2, length-delimited */

size_t gbci_batch_frame_len_with(const gbci_batch_t *b, size_t env_len)
{
    size_t rec = 1 + gb_pb_varint_len(env_len) + env_len;
    size_t records = b->len + rec;
    if (b->count == 0)
        return records;
    return 1 + gb_pb_varint_len(records) + records;
}

gbc_err gbci_batch_append(gbci_batch_t *b, const Gpubridge__Envelope *env, size_t env_len)
{
    size_t rec = 1 + gb_pb_varint_len(env_len) + env_len;
    size_t need = GBCI_PREFIX + b->len + rec;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *nb = realloc(b->buf, cap);
        if (!nb)
            return GBC_ERR_NOMEM;
        b->buf = nb;
        b->cap = cap;
    }
    uint8_t *p = b->buf + GBCI_PREFIX + b->len;
    *p++ = TAG_ENVELOPE;
    p += gb_pb_varint_put(p, env_len);
    gpubridge__envelope__pack(env, p);
    b->len += rec;
    b->count++;
    return GBC_OK;
}

void gbci_batch_frame(gbci_batch_t *b, const uint8_t **data, size_t *len)
{
    uint8_t *records = b->buf + GBCI_PREFIX;
    if (b->count <= 1) {
        *data = records;
        *len = b->len;
        return;
    }
    uint8_t hdr[GBCI_PREFIX];
    hdr[0] = TAG_BATCH;
    size_t h = 1 + gb_pb_varint_put(hdr + 1, b->len);
    memcpy(records - h, hdr, h);
    *data = records - h;
    *len = h + b->len;
}

void gbci_batch_truncate(gbci_batch_t *b, size_t len, size_t count)
{
    if (len <= b->len && count <= b->count) {
        b->len = len;
        b->count = count;
    }
}

bool gbci_batch_drop_first(gbci_batch_t *b, uint64_t id)
{
    if (b->count == 0)
        return false;
    /* `0x0a len Envelope`, and the Envelope starts with correlation_id
     * (field 1, varint): protobuf-c packs fields in number order and the id
     * is never 0, so it is always there. */
    const uint8_t *rec = b->buf + GBCI_PREFIX, *end = rec + b->len, *p = rec + 1;
    uint64_t env_len = 0, corr = 0;
    if (gb_pb_varint_get(&p, end, &env_len) != 0 || env_len > (uint64_t)(end - p))
        return false;
    const uint8_t *next = p + env_len, *q = p + 1;
    if (env_len < 2 || *p != 0x08 || gb_pb_varint_get(&q, next, &corr) != 0 || corr != id)
        return false;
    size_t rec_len = (size_t)(next - rec);
    memmove(b->buf + GBCI_PREFIX, next, b->len - rec_len);
    b->len -= rec_len;
    b->count--;
    return true;
}

void gbci_batch_free(gbci_batch_t *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}
