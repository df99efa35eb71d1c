/* Codec of the PageRank grains: protobuf (pagerank.proto) <-> the records of
 * pagerank_layout.h. Everything a client can get wrong is caught here
 * with a sentence; the handlers check indices against the graph again (they alone
 * know n and m). */
#include "pagerank_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "builtin_codecs.h"
#include "log.h"
#include "pagerank.pb-c.h"
#include "pb_wire.h"

#define ST_OK GPUBRIDGE__STATUS__STATUS_OK
#define ST_MALFORMED GPUBRIDGE__STATUS__STATUS_MALFORMED
#define ST_TOO_LARGE GPUBRIDGE__STATUS__STATUS_TOO_LARGE
#define ST_UNKNOWN GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE


static int too_many(const char *what, size_t n, size_t max, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s of %zu entries exceeds the largest message (at most %zu; send smaller chunks "
                          "or raise max_message_size)", what, n, max);
    return ST_TOO_LARGE;
}

/* A chunk record of slot type `type`: header, then count entries of size
 * bytes each. Returns ST_OK, or ST_TOO_LARGE (with err) when they would not
 * fit in cap bytes. */
static int put_chunk(unsigned char *rec, size_t cap, const char *what, uint64_t first, const void *entries,
                     size_t count, size_t size, uint16_t type, uint32_t *rec_len, uint16_t *slot_type, char *err,
                     size_t errlen)
{
    size_t max = (cap - GB_PR_CHUNK_HDR) / size;
    if (count > max)
        return too_many(what, count, max, err, errlen);
    *rec_len = gb_pr_rec_chunk(rec, first, (uint32_t)count, entries, (uint32_t)size);
    *slot_type = type;
    return ST_OK;
}

/* Decodes message Name (its C type Gpubridge__Name) into var, or answers
 * that the payload is not one. */
#define UNPACK(Name, fn, var)                                                \
    Gpubridge__##Name *var = fn##__unpack(NULL, len, pb);                   \
    if (!var) {                                                             \
        snprintf(err, errlen, "payload is not a %s", #Name);                \
        return ST_MALFORMED;                                                \
    }

/* A StartIterationCommand without damping: pagerank.proto's default. */
#define PR_DAMPING_DEFAULT 0.85

/* StartIterationCommand, read in place: it comes once per partition per
 * round, on the iteration's critical path. Fields as protobuf-c reads them
 * (the last occurrence wins; a known field of the wrong wire type makes the
 * message invalid, except a bool, which protobuf-c reads from any wire type:
 * true when a byte of the field after its key has any of its low 7 bits
 * set; unknown fields are skipped); tests/test_wire.c checks this against
 * protobuf-c. */
typedef struct start_cmd {
    uint32_t iteration;
    double damping, dangling_rank;
    uint64_t node_count;
    int report_ranks, next_contributions;
} start_cmd_t;

static int start_read(const uint8_t *pb, size_t len, start_cmd_t *m)
{
    const uint8_t *p = pb, *end = len ? pb + len : pb; /* pb may be NULL when empty */
    gb_pb_field_t f;
    int r;
    memset(m, 0, sizeof *m);
    m->damping = PR_DAMPING_DEFAULT;
    for (;;) {
        const uint8_t *at = p;
        if ((r = gb_pb_next(&p, end, &f)) <= 0)
            break;
        const int varint = f.num == 1 || f.num == 4, dbl = f.num == 2 || f.num == 3 || f.num == 5;
        if ((varint && f.wt != GB_PB_VARINT) || (dbl && f.wt != GB_PB_I64))
            return -1;
        if (f.num == 6 || f.num == 7) {
            uint64_t key;
            int b = 0;
            gb_pb_varint_get(&at, end, &key); /* read once already: cannot fail */
            for (; at < p; at++)
                b |= (*at & 0x7f) != 0;
            *(f.num == 6 ? &m->report_ranks : &m->next_contributions) = b;
        } else if (f.num == 1)
            m->iteration = (uint32_t)f.v;
        else if (f.num == 4)
            m->node_count = f.v;
        else if (f.num == 2)
            memcpy(&m->damping, &f.v, 8);
        else if (f.num == 5)
            memcpy(&m->dangling_rank, &f.v, 8);
    }
    return r;
}

static uint64_t g_arena_bytes; /* the engine's arena (for messages) */

/* v in as few digits as read back the same: an error names the value sent,
 * not one rounded into the range it is refused from. */
static const char *f64_text(double v, char buf[32])
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

void gbi_codec_pr_set_arena(uint64_t bytes)
{
    if (bytes != g_arena_bytes) /* two hooks (sender, aggregator), one arena: said once */
        GB_INFO("PageRank: a graph takes 32 bytes a vertex + 8 an edge of the %llu MiB arena (of each device's, "
                "with several); concurrent jobs share it", (unsigned long long)(bytes >> 20));
    g_arena_bytes = bytes;
}

static int pr_request(int sender, uint32_t mt, const uint8_t *pb, size_t len, unsigned char *rec, uint32_t cap,
                      uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    const char *who = sender ? "pagerank.sender" : "pagerank.aggregator";
    int st = ST_OK;
    switch (mt) {
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION: {
        start_cmd_t m;
        if (start_read(pb, len, &m) != 0) {
            snprintf(err, errlen, "payload is not a StartIterationCommand");
            return ST_MALFORMED;
        }
        if (!(m.damping >= 0.0 && m.damping <= 1.0)) {
            char v[32];
            snprintf(err, errlen, "damping %s is outside [0, 1]", f64_text(m.damping, v));
            return ST_MALFORMED;
        }
        if (!(m.dangling_rank >= 0.0 && m.dangling_rank <= 2.0)) {
            char v[32];
            snprintf(err, errlen, "dangling_rank %s is outside [0, 2] (ranks sum to 1)", f64_text(m.dangling_rank, v));
            return ST_MALFORMED;
        }
        if (m.node_count == 0 || m.node_count > UINT32_MAX) {
            snprintf(err, errlen, "node_count %llu is outside 1..4294967295 (it must match the GraphInit)",
                     (unsigned long long)m.node_count);
            return ST_MALFORMED;
        }
        if (cap < GB_PR_START_LEN)
            return too_many("StartIterationCommand", 1, 0, err, errlen);
        const uint32_t flags = (m.report_ranks ? GB_PR_START_RANKS : 0u) | (m.next_contributions ? GB_PR_START_NEXT : 0u);
        *rec_len = gb_pr_rec_start(rec, m.iteration, flags, m.damping, m.dangling_rank, (uint32_t)m.node_count);
        *slot_type = GB_PR_MSG_START;
        return ST_OK;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT: {
        if (!sender)
            break;
        UNPACK(GraphInit, gpubridge__graph_init, m);
        if (m->node_count == 0 || m->node_count > 0xffffffffull) {
            snprintf(err, errlen, "node_count %llu is outside 1..4294967295", (unsigned long long)m->node_count);
            st = ST_MALFORMED;
        } else if (m->edge_count > (1ull << 40)) { /* the grain's own bound (pagerank.h) */
            snprintf(err, errlen, "edge_count %llu is outside 0..2^40", (unsigned long long)m->edge_count);
            st = ST_MALFORMED;
        } else {
            *rec_len = gb_pr_rec_pair(rec, m->node_count, m->edge_count);
            const uint32_t flags = m->new_job ? GB_PR_INIT_NEW : 0u;
            memcpy(rec + 20, &flags, 4);
            *slot_type = GB_PR_MSG_GRAPH_INIT;
        }
        gpubridge__graph_init__free_unpacked(m, NULL);
        return st;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_JOB_END: {
        if (!sender)
            break;
        UNPACK(JobEnd, gpubridge__job_end, m);
        *rec_len = gb_pr_rec_pair(rec, 0, 0);
        *slot_type = GB_PR_MSG_JOB_END;
        gpubridge__job_end__free_unpacked(m, NULL);
        return st;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT: {
        UNPACK(PartitionInit, gpubridge__partition_init, m);
        *rec_len = gb_pr_rec_pair(rec, m->first_node, m->node_count);
        *slot_type = GB_PR_MSG_PARTITION_INIT;
        gpubridge__partition_init__free_unpacked(m, NULL);
        return st;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES: {
        if (!sender)
            break;
        UNPACK(OutDegreeChunk, gpubridge__out_degree_chunk, m);
        st = put_chunk(rec, cap, "OutDegreeChunk", m->first_node, m->out_degrees, m->n_out_degrees, 4,
                       GB_PR_MSG_OUT_DEGREES, rec_len, slot_type, err, errlen);
        gpubridge__out_degree_chunk__free_unpacked(m, NULL);
        return st;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS: {
        if (sender)
            break;
        UNPACK(InOffsetChunk, gpubridge__in_offset_chunk, m);
        st = put_chunk(rec, cap, "InOffsetChunk", m->first_node, m->offsets, m->n_offsets, 8, GB_PR_MSG_IN_OFFSETS,
                       rec_len, slot_type, err, errlen);
        gpubridge__in_offset_chunk__free_unpacked(m, NULL);
        return st;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES: {
        if (sender)
            break;
        UNPACK(InEdgeChunk, gpubridge__in_edge_chunk, m);
        st = put_chunk(rec, cap, "InEdgeChunk", m->first_edge, m->sources, m->n_sources, 4, GB_PR_MSG_IN_EDGES,
                       rec_len, slot_type, err, errlen);
        gpubridge__in_edge_chunk__free_unpacked(m, NULL);
        return st;
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY: {
        if (sender)
            break;
        UNPACK(RankQuery, gpubridge__rank_query, m);
        size_t max = gbi_codec_pr_max_query(cap);
        if (m->count > max) {
            st = too_many("RankQuery", m->count, max, err, errlen);
        } else {
            *rec_len = gb_pr_rec_chunk(rec, m->first_node, m->count, NULL, 0);
            *slot_type = GB_PR_MSG_RANK_QUERY;
        }
        gpubridge__rank_query__free_unpacked(m, NULL);
        return st;
    }
    default:
        break;
    }
    snprintf(err, errlen, "%s has no message type %u (see pagerank.proto: the sender takes 1, 9, 10, 11, 15; "
                          "the aggregator 1, 10, 12, 13, 14)", who, mt);
    return ST_UNKNOWN;
}

int gbi_codec_pr_request(int sender, uint64_t key, uint32_t mt, const uint8_t *pb, size_t len, unsigned char *rec,
                         uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    int st = pr_request(sender, mt, pb, len, rec, cap, rec_len, slot_type, err, errlen);
    if (st == ST_OK) /* the job: the key's upper half (pagerank_layout.h) */
        gb_pr_rec_set_job(rec, *slot_type, (uint32_t)(key >> 32));
    return st;
}

const char *gbi_codec_pr_error(int sender, const gb_slot_hdr_t *hdr, char *buf, size_t cap)
{
    const uint32_t code = hdr->aux & 0xff, mib = hdr->aux >> 8, job = (uint32_t)(hdr->key >> 32);
    const unsigned long long have = (unsigned long long)(g_arena_bytes >> 20);
    const char *who = sender ? "pagerank.sender" : "pagerank.aggregator";
    switch (code) {
    case GB_PR_E_RECORD:
        snprintf(buf, cap, "%s: malformed record (job %u)", who, job);
        break;
    case GB_PR_E_NO_GRAPH:
        snprintf(buf, cap, "%s: job %u has no graph (send GraphInit first; on a bridge with several devices, "
                           "to a sender on each device that holds the job's partitions; or the job was ended, or "
                           "another driver's GraphInit for the same job id replaced it)", who, job);
        break;
    case GB_PR_E_RANGE:
        snprintf(buf, cap, "%s: job %u: a vertex or edge index past the graph's node_count or edge_count", who,
                 job);
        break;
    case GB_PR_E_ARENA_SMALL:
        snprintf(buf, cap, "the graph needs a PageRank arena of %u MiB (32 bytes a vertex + 8 an edge, and 4 KiB "
                           "for the job table), the arena is %llu MiB: raise arena_mb in the bridge's config to "
                           "at least %u", mib, have, mib);
        break;
    case GB_PR_E_ARENA_FULL:
        snprintf(buf, cap, "the graph needs %u MiB of the PageRank arena (32 bytes a vertex + 8 an edge) and the "
                           "%llu MiB arena has no such room free: other jobs hold it; retry when they have "
                           "ended, or raise arena_mb in the bridge's config", mib, have);
        break;
    case GB_PR_E_JOBS_FULL:
        snprintf(buf, cap, "%d PageRank jobs hold the arena already (the most at once); retry when one has ended",
                 GB_PR_MAX_JOBS);
        break;
    case GB_PR_E_JOB_EXISTS:
        snprintf(buf, cap, "job %u is in use by another driver (GraphInit with new_job): pick another job id", job);
        break;
    case GB_PR_E_PARTITION:
        snprintf(buf, cap, "%s: partition %u of job %u has no PartitionInit for the job's current graph, or its "
                           "range is past the graph", who, (uint32_t)hdr->key, job);
        break;
    case GB_PR_E_NOT_MINE:
        snprintf(buf, cap, "%s: grain %u of job %u: the range is not its partition's, or the partition's "
                           "offsets are not all loaded yet (a job spread over several devices takes each "
                           "partition's chunks and rank queries at its own grains, offsets before edges: "
                           "docs/pagerank.md, \"Several devices\")", who, (uint32_t)hdr->key, job);
        break;
    case GB_PR_E_NODE_COUNT:
        snprintf(buf, cap, "%s: job %u: node_count is not the GraphInit's", who, job);
        break;
    case GB_PR_E_OFFSETS:
        if (hdr->type == GB_PR_MSG_IN_OFFSETS)
            snprintf(buf, cap, "%s: job %u: the InOffsetChunk's offsets decrease (none was written)", who, job);
        else
            snprintf(buf, cap, "%s: job %u: the in-edge offsets decrease inside partition %u", who, job,
                     (uint32_t)hdr->key);
        break;
    case GB_PR_E_PARAM:
        snprintf(buf, cap, "%s: damping or dangling_rank out of range", who);
        break;
    default:
        return NULL;
    }
    /* Limited: a client may send any number of these (each gets its error). */
    if (code == GB_PR_E_ARENA_SMALL || code == GB_PR_E_ARENA_FULL || code == GB_PR_E_JOBS_FULL)
        GB_WARN_LIMITED("PageRank job %u refused: %s", job, buf);
    return buf;
}

/* A double field at out + n unless it is 0 (proto3 leaves zeros out); the new length. */
static size_t put_double(uint8_t *out, size_t n, uint32_t field, double v)
{
    if (v == 0.0)
        return n;
    n += gb_pb_key_put(out + n, field, GB_PB_I64);
    memcpy(out + n, &v, 8);
    return n + 8;
}

size_t gbi_codec_pr_max_query(uint32_t cap)
{
    size_t max = cap < 8 ? 0 : (cap - 8) / 4;
    /* The reply, in doubles, stays within the larger of cap and 64 KiB (8,000
     * ranks for a slot; about 131,000 for a large message of 1 MiB). */
    size_t reply = ((cap > 65536 ? cap : 65536) - 1536) / 8;
    return max > reply ? reply : max;
}

size_t gbi_codec_pr_reply_bound(uint32_t rec_len) { return 2 * (size_t)rec_len + 64; }

int gbi_codec_pr_reply(int sender, const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                       size_t *out_len, uint32_t *message_type)
{
    switch (hdr->type) {
    case GB_PR_MSG_START: {
        /* RankAggregationResult, written in place (once per partition per
         * round): l1_delta 2, nodes 3, dangling_rank 5, rank_sum 6, job 7 (the
         * grain's aux); proto3 leaves out zeros. At most 3 * 9 + 11 + 6 bytes
         * (an aggregator's three doubles, nodes and job). */
        if (hdr->len != GB_PR_REPLY_LEN || cap < 44)
            return -1;
        const gb_pr_result_t r = gb_pr_reply_read(rec);
        size_t n = put_double(out, 0, 2, sender ? 0.0 : r.a);
        if (r.nodes) {
            n += gb_pb_key_put(out + n, 3, GB_PB_VARINT);
            n += gb_pb_varint_put(out + n, r.nodes);
        }
        n = put_double(out, n, 5, sender ? r.a : r.next_dangling);
        n = put_double(out, n, 6, r.rank_sum);
        if (hdr->aux) {
            n += gb_pb_key_put(out + n, 7, GB_PB_VARINT);
            n += gb_pb_varint_put(out + n, hdr->aux);
        }
        *out_len = n;
        *message_type = GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_AGGREGATION_RESULT;
        return 0;
    }
    case GB_PR_MSG_RANK_QUERY: {
        if (hdr->len < 8 || (hdr->len - 8) % 4)
            return -1;
        /* Per thread: each I/O thread drains rings of its own, and with several
         * devices two aggregator rings may be encoded at once. A large
         * query's (large_payload.h) are allocated. */
        static _Thread_local double small[8000];
        Gpubridge__NodeRankUpdateBatch b = GPUBRIDGE__NODE_RANK_UPDATE_BATCH__INIT;
        memcpy(&b.first_node, rec, 8);
        b.job = hdr->aux;
        b.n_ranks = (hdr->len - 8) / 4;
        double *ranks = b.n_ranks <= 8000 ? small : malloc(b.n_ranks * sizeof *ranks);
        if (!ranks)
            return -1;
        for (size_t i = 0; i < b.n_ranks; i++) {
            float f;
            memcpy(&f, rec + 8 + 4 * i, 4);
            ranks[i] = f;
        }
        b.ranks = ranks;
        int ok = gpubridge__node_rank_update_batch__get_packed_size(&b) <= cap;
        if (ok)
            *out_len = gpubridge__node_rank_update_batch__pack(&b, out);
        if (ranks != small)
            free(ranks);
        if (!ok)
            return -1;
        *message_type = GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_NODE_RANK_UPDATE_BATCH;
        return 0;
    }
    default:
        /* Loads, inits and JobEnd answer with a status only: message type
         * 0, as gpubridge.proto says of a reply with no message. */
        if (hdr->len != 0)
            return -1;
        *out_len = 0;
        *message_type = 0;
        return 0;
    }
}

/* ---- the two types' codecs (builtin_codecs.h) ---- */

/* The most entries of `entry` bytes a chunk record of rec_cap bytes holds,
 * and that fit `payload` bytes in their shortest encoding (first entry 0,
 * one-byte varints: tag, length, then a byte each). */
static uint32_t chunk_max(uint32_t rec_cap, uint32_t entry, uint32_t payload)
{
    uint64_t n = rec_cap < GB_PR_CHUNK_HDR ? 0 : (rec_cap - GB_PR_CHUNK_HDR) / entry;
    while (n > 0 && 1 + gb_pb_varint_len(n) + n > payload)
        n--;
    return (uint32_t)n;
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

size_t gbi_codec_pr_sender_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    size_t n = 0;
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
            "StartIterationCommand", pb, 0);
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT, "GraphInit", pb, 0);
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT, "PartitionInit",
            pb, 0);
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES, "OutDegreeChunk",
            pb, chunk_max(rc, 4, pb));
    return gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_JOB_END, "JobEnd", pb, 0);
}

size_t gbi_codec_pr_aggregator_limits(uint32_t rc, uint32_t pb, gb_grain_limit_t *out, size_t max)
{
    size_t n = 0;
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
            "StartIterationCommand", pb, 0);
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT, "PartitionInit",
            pb, 0);
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS, "InOffsetChunk", pb,
            chunk_max(rc, 8, pb));
    n = gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES, "InEdgeChunk", pb,
            chunk_max(rc, 4, pb));
    /* The reply (8 + 4 x count bytes) fits where the record goes. */
    return gb_grain_limit_put(out, n, max, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY, "RankQuery", pb,
               (uint32_t)gbi_codec_pr_max_query(rc));
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
const gb_grain_codec_t gbi_codec_pr_sender = {pr_sender_request, pr_sender_reply, gbi_codec_pr_reply_bound,
                                              gbi_codec_pr_sender_limits};
const gb_grain_codec_t gbi_codec_pr_aggregator = {pr_aggregator_request, pr_aggregator_reply,
                                                  gbi_codec_pr_reply_bound, gbi_codec_pr_aggregator_limits};
