/* What each grain type's request messages accept, for the Limits control
 * reply: the same bounds the codecs (codec.c, codec_pagerank.c) and the
 * envelope check (server_feed.c) enforce, computed from the slot's record
 * size. tests/e2e_bridge.c sends requests at and just past each reported
 * bound. */
#include "codec.h"

#include "codec_pagerank.h"
#include "echo.pb-c.h"
#include "grain.h"
#include "pagerank.pb-c.h"
#include "vecadd.pb-c.h"

/* server_feed.c refuses a payload longer than both cap + 64 bytes and its
 * 64 KiB record buffer before any codec sees it. */
static uint32_t payload_bound(uint32_t cap) { return cap + 64u > 65536u ? cap + 64u : 65536u; }

static size_t put(gbi_msg_limit_t *out, size_t n, size_t max, uint32_t mt, const char *name, uint32_t payload,
                  uint32_t elements)
{
    if (n < max)
        out[n] = (gbi_msg_limit_t){mt, name, payload, elements};
    return n + 1;
}

static uint32_t chunk_max(uint32_t cap, uint32_t entry) { return cap < GB_PR_CHUNK_HDR ? 0 : (cap - GB_PR_CHUNK_HDR) / entry; }

size_t gbi_codec_limits(int kind, uint32_t cap, gbi_msg_limit_t *out, size_t max)
{
    const uint32_t pb = payload_bound(cap);
    size_t n = 0;
    switch (kind) {
    case GB_GRAIN_ECHO: /* the EchoRequest's bytes are the record */
        return put(out, n, max, GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST, "EchoRequest", cap, 0);
    case GB_GRAIN_VECADD: /* op, n, then n floats of a and n of b */
        return put(out, n, max, GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST,
                   "VectorAddRequest", pb, cap < GB_VECADD_HDR ? 0 : (cap - GB_VECADD_HDR) / 8);
    case GB_GRAIN_PR_SENDER:
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
                "StartIterationCommand", pb, 0);
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT, "GraphInit", pb, 0);
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT, "PartitionInit",
                pb, 0);
        return put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES,
                   "OutDegreeChunk", pb, chunk_max(cap, 4));
    case GB_GRAIN_PR_AGGREGATOR:
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
                "StartIterationCommand", pb, 0);
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT, "PartitionInit",
                pb, 0);
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS, "InOffsetChunk", pb,
                chunk_max(cap, 8));
        n = put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES, "InEdgeChunk", pb,
                chunk_max(cap, 4));
        return put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY, "RankQuery", pb,
                   (uint32_t)gbi_codec_pr_max_query(cap));
    default:
        return 0;
    }
}
