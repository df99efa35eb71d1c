/* What each grain type's request messages accept, for the Limits control
 * reply: the bounds server_feed.c and the codecs (codec.c, codec_pagerank.c)
 * really enforce. A request's frame must fit max_message_size; its decoded
 * record must fit the slot, or else the large area (up to large_max,
 * large_payload.h), as must its reply. tests/test_wire.c and
 * tests/e2e_bridge.c send requests at and just past each reported bound. */
#include "codec.h"

#include <string.h>

#include "builtin_codecs.h"
#include "codec_pagerank.h"
#include "echo.pb-c.h"
#include "grain.h"
#include "grain_registry.h"
#include "pagerank.pb-c.h"
#include "vecadd.pb-c.h"

static uint32_t varint_len(uint64_t v)
{
    uint32_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

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

static size_t put(gbi_msg_limit_t *out, size_t n, size_t max, uint32_t mt, const char *name, uint32_t payload,
                  uint32_t elements)
{
    if (n < max)
        out[n] = (gbi_msg_limit_t){mt, name, payload, elements};
    return n + 1;
}

static uint32_t min32(uint64_t a, uint64_t b) { return (uint32_t)(a < b ? a : b); }

/* The most entries of `entry` bytes a chunk record of rec_cap bytes holds,
 * and that fit `payload` bytes in their shortest encoding (first entry 0,
 * one-byte varints: tag, length, then a byte each). */
static uint32_t chunk_max(uint32_t rec_cap, uint32_t entry, uint32_t payload)
{
    uint64_t n = rec_cap < GB_PR_CHUNK_HDR ? 0 : (rec_cap - GB_PR_CHUNK_HDR) / entry;
    while (n > 0 && 1 + varint_len(n) + n > payload)
        n--;
    return (uint32_t)n;
}

/* The most elements a VectorAddRequest (op add, so unset; a and b packed)
 * carries within rec_cap record bytes and `payload` bytes. */
static uint32_t vecadd_max(uint32_t rec_cap, uint32_t payload)
{
    uint64_t n = rec_cap < GB_VECADD_HDR ? 0 : (rec_cap - GB_VECADD_HDR) / 8;
    while (n > 0 && 2 * (1 + varint_len(4 * n) + 4 * n) > payload)
        n--;
    return (uint32_t)n;
}

size_t gbi_codec_echo_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    /* the EchoRequest's bytes are the record, and the reply's */
    return put(out, 0, max, GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST, "EchoRequest", min32(rc, pb), 0);
}

size_t gbi_codec_vecadd_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    /* op, n, then n floats of a and n of b; the reply n floats */
    return put(out, 0, max, GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST, "VectorAddRequest",
               pb, vecadd_max(rc, pb));
}

size_t gbi_codec_pr_sender_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    size_t n = 0;
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
            "StartIterationCommand", pb, 0);
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT, "GraphInit", pb, 0);
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT, "PartitionInit",
            pb, 0);
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES, "OutDegreeChunk",
            pb, chunk_max(rc, 4, pb));
    return put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_JOB_END, "JobEnd", pb, 0);
}

size_t gbi_codec_pr_aggregator_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    size_t n = 0;
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
            "StartIterationCommand", pb, 0);
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT, "PartitionInit",
            pb, 0);
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS, "InOffsetChunk", pb,
            chunk_max(rc, 8, pb));
    n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES, "InEdgeChunk", pb,
            chunk_max(rc, 4, pb));
    /* The reply (8 + 4 x count bytes) fits where the record goes. */
    return put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY, "RankQuery", pb,
               (uint32_t)gbi_codec_pr_max_query(rc));
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
        n = put(out, n, max, d->msgs[i].type, d->msgs[i].name,
                min32(rc, gbi_frame_payload_max(max_message_size, type_len, d->msgs[i].type)), 0);
    return n;
}

uint32_t gbi_vecadd_reply_max(uint16_t type, const void *rec, uint32_t len)
{
    uint32_t n = 0;
    if (type != GB_VECADD_MSG_REQUEST || len < GB_VECADD_HDR)
        return 0;
    memcpy(&n, (const unsigned char *)rec + 4, 4);
    return n <= (len - GB_VECADD_HDR) / 8 ? 4u * n : 0; /* a bad record gets an error, no payload */
}

uint32_t gbi_pr_reply_max(uint16_t type, const void *rec, uint32_t len)
{
    uint32_t count = 0;
    if (type != GB_PR_MSG_RANK_QUERY || len != GB_PR_CHUNK_HDR)
        return GB_PR_REPLY_LEN;
    memcpy(&count, (const unsigned char *)rec + 8, 4);
    uint64_t b = 8 + 4ull * count;
    return b < UINT32_MAX ? (uint32_t)b : UINT32_MAX;
}
