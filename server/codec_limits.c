/* What each grain type's request messages accept, for the Limits control
 * reply: the bounds server_feed.c and the codecs (codec.c, and the grain
 * types' own: grains/<type>/<type>_codec.c) really enforce. A request's frame must fit max_message_size; its decoded
 * record must fit the slot, or else the large area (up to large_max,
 * large_payload.h), as must its reply. tests/test_wire.c and
 * tests/e2e_bridge.c send requests at and just past each reported bound. */
#include "codec.h"

#include <string.h>

#include "grain_registry.h"
#include "pb_wire.h"

static uint32_t varint_len(uint64_t v) { return (uint32_t)gb_pb_varint_len(v); }

static uint32_t min32(uint64_t a, uint64_t b) { return (uint32_t)(a < b ? a : b); }

/* A ClientFrame of one Envelope with payload_len bytes of payload, its
 * correlation id and key at their largest (10-byte varints), kind set. */
static uint64_t frame_len(uint32_t type_len, uint32_t mt, uint64_t payload_len)
{
    const uint64_t grain = 1 + varint_len(type_len) + type_len + 11; /* GrainId{type, key} */
    const uint64_t env = 11 + (1 + varint_len(grain) + grain) + 2 + (1 + varint_len(mt)) +
                         (1 + varint_len(payload_len) + payload_len);
    return 1 + varint_len(env) + env;
}

uint32_t gbi_frame_payload_max(uint32_t max_message_size, uint32_t type_len, uint32_t message_type)
{
    /* frame_len(p) >= frame_len(0) + p: start there; the varints' growth
     * takes a few bytes more at most. */
    const uint64_t empty = frame_len(type_len, message_type, 0);
    uint64_t p = max_message_size > empty ? max_message_size - empty : 0;
    while (p > 0 && frame_len(type_len, message_type, p) > max_message_size)
        p--;
    return (uint32_t)p;
}

size_t gbi_codec_limits(int kind, uint32_t cap, uint32_t large_max, uint32_t max_message_size, uint32_t type_len,
                        gbi_msg_limit_t *out, size_t max)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    if (!d)
        return 0;
    /* server_feed.c encodes into the slot first, then, when that is too
     * small, into the large area. */
    const uint32_t rc = large_max > cap ? large_max : cap;
    const gb_grain_codec_t *c = d->hooks ? d->hooks->codec : NULL;
    if (c && c->limits) /* the built-in types' message types are below 128: a one-byte varint */
        return c->limits(rc, gbi_frame_payload_max(max_message_size, type_len, 1), out, max);
    /* Raw payloads (or a codec without limits): the bytes are the record. */
    size_t n = 0;
    for (uint32_t i = 0; i < d->n_msgs; i++)
        n = gb_grain_limit_put(out, n, max, d->msgs[i].type, d->msgs[i].name,
                min32(rc, gbi_frame_payload_max(max_message_size, type_len, d->msgs[i].type)), 0);
    return n;
}
