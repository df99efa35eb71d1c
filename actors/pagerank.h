/* The PageRank grains: pagerank.sender and pagerank.aggregator, one source for
 * CPU and GPU. Both are team grains (team.h): on the GPU each message runs on
 * a whole thread block. A grain is one partition of the vertices (key =
 * partition index), a contiguous range [first, first + count).
 *
 * The graph and the rank vectors live in the family's arena, laid out by
 * GRAPH_INIT (pagerank_layout.h, with the records). An iteration is driven by
 * the client (examples/pagerank):
 *   1. START to every sender: x[v] = rank[v] / outdeg[v] for its vertices (its
 *      contributions, written device-side), and the summed rank of its dangling
 *      vertices (out-degree 0), which networkx spreads over all vertices;
 *   2. START to every aggregator, with the total dangling rank: for each of its
 *      vertices v, rank[v] = (1 - d) / n + d * (sum of x[u] over in-edges u->v
 *      + dangling / n); it answers with its L1 delta.
 * The contributions never leave the device. x has a half per iteration
 * parity (START's iteration picks it), so sender q of iteration i + 1 may run
 * as soon as aggregator q of iteration i is done (it reads only the ranks
 * that aggregator wrote) while the other aggregators still read iteration
 * i's half. The client orders the rest: every sender of an iteration before
 * any of its aggregators.
 * With GB_PR_START_NEXT an aggregator also does its vertices' share of step 1
 * for iteration i + 1: it writes the new ranks' contributions into the other
 * half and reports their dangling rank. When the aggregators' partitions are
 * the senders', that is the whole senders' round, so the client can skip it:
 * one round of messages per iteration instead of two.
 *
 * Every index is checked against n and m before use, and a partition's
 * in_off must not decrease: a bad record gets GB_SLOT_HANDLER_ERROR and
 * nothing outside the arrays is touched. */
#ifndef GB_PAGERANK_H
#define GB_PAGERANK_H

#include <math.h>
#include <string.h>

#include "pagerank_layout.h"
#include "pagerank_pull.h"

GB_HD uint16_t gb_pr_graph_init(const gb_grain_ctx_t *c, const unsigned char *in, uint32_t in_len)
{
    if (in_len != 16 || !c->arena)
        return GB_SLOT_HANDLER_ERROR;
    gb_pr_dir_t d;
    memset(&d, 0, sizeof d);
    uint64_t n = gb_pr_u64(in), m = gb_pr_u64(in + 8);
    if (n == 0 || n > 0xffffffffull || m > (1ull << 40) || gb_pr_layout(&d, n, m) > c->arena_size)
        return GB_SLOT_HANDLER_ERROR; /* does not fit: raise arena_mb */
    /* Unpublish, lay out, initialise, publish (magic last). */
    if (c->rank == 0)
        *(volatile uint64_t *)c->arena = 0;
    float *rank = (float *)(c->arena + d.off_rank), *x = (float *)(c->arena + d.off_x);
    float *sum = (float *)(c->arena + d.off_sum);
    uint32_t *outdeg = (uint32_t *)(c->arena + d.off_outdeg);
    uint64_t *in_off = (uint64_t *)(c->arena + d.off_in_off);
    const float r0 = (float)(1.0 / (double)n);
    for (uint64_t v = c->rank; v < n; v += c->size) {
        rank[v] = r0;
        x[v] = 0.0f;
        x[n + v] = 0.0f;
        sum[v] = 0.0f;
        outdeg[v] = 0;
        in_off[v] = 0;
    }
    if (c->rank == 0)
        in_off[n] = 0;
    gb_team_sync(c);
#if defined(__CUDA_ARCH__)
    __threadfence();
#endif
    if (c->rank == 0) {
        /* every field but magic and gen; gen moves by an atomic add, so that
         * a bump by a record running meanwhile is not lost */
        const unsigned char *ds = (const unsigned char *)&d;
        memcpy(c->arena + 8, ds + 8, GB_PR_GEN_OFF - 8);
        memcpy(c->arena + GB_PR_GEN_OFF + 8, ds + GB_PR_GEN_OFF + 8, sizeof d - GB_PR_GEN_OFF - 8);
        gb_pr_bump_gen(c); /* fences the fields above */
#if defined(__CUDA_ARCH__)
        __threadfence();
        *(volatile uint64_t *)c->arena = GB_PR_MAGIC;
#else
        __atomic_store_n((volatile uint64_t *)c->arena, GB_PR_MAGIC, __ATOMIC_RELEASE);
#endif
    }
    gb_team_sync(c);
    return GB_SLOT_OK;
}

/* PARTITION_INIT, both roles. */
GB_HD uint16_t gb_pr_partition_init(const gb_grain_ctx_t *c, gb_pr_part_t *st, int sender,
                                    const unsigned char *in, uint32_t in_len)
{
    gb_pr_dir_t d;
    if (in_len != 16 || !gb_pr_dir_read(c, &d))
        return GB_SLOT_HANDLER_ERROR;
    uint64_t first = gb_pr_u64(in), count = gb_pr_u64(in + 8);
    if (first > d.n || count > d.n - first)
        return GB_SLOT_HANDLER_ERROR;
    if (sender) {
        float *rank = (float *)(c->arena + d.off_rank);
        const float r0 = (float)(1.0 / (double)d.n);
        for (uint64_t v = first + c->rank; v < first + count; v += c->size)
            rank[v] = r0;
    }
    gb_team_sync(c); /* every thread has read the old state */
    if (c->rank == 0) {
        st->first = first;
        st->count = count;
        st->ready = 1;
        st->dst_gen = 0;
    }
    gb_team_sync(c);
    return GB_SLOT_OK;
}

/* OUT_DEGREES / IN_OFFSETS / IN_EDGES: a chunk of one of the graph arrays. */
GB_HD uint16_t gb_pr_load(const gb_grain_ctx_t *c, uint16_t type, const unsigned char *in, uint32_t in_len)
{
    gb_pr_dir_t d;
    if (in_len < GB_PR_CHUNK_HDR || !gb_pr_dir_read(c, &d))
        return GB_SLOT_HANDLER_ERROR;
    const uint64_t first = gb_pr_u64(in);
    const uint32_t count = gb_pr_u32(in + 8);
    const unsigned char *a = in + GB_PR_CHUNK_HDR;
    const uint32_t esz = type == GB_PR_MSG_IN_OFFSETS ? 8 : 4;
    const uint64_t limit = type == GB_PR_MSG_IN_EDGES ? d.m : type == GB_PR_MSG_IN_OFFSETS ? d.n + 1 : d.n;
    if ((uint64_t)in_len != GB_PR_CHUNK_HDR + (uint64_t)esz * count || first > limit || count > limit - first)
        return GB_SLOT_HANDLER_ERROR;
    int bad = 0;
    if (type == GB_PR_MSG_OUT_DEGREES) {
        uint32_t *outdeg = (uint32_t *)(c->arena + d.off_outdeg);
        for (uint32_t i = c->rank; i < count; i += c->size)
            outdeg[first + i] = gb_pr_u32(a + 4u * i);
    } else if (type == GB_PR_MSG_IN_OFFSETS) {
        uint64_t *in_off = (uint64_t *)(c->arena + d.off_in_off);
        for (uint32_t i = c->rank; i < count; i += c->size) {
            uint64_t o = gb_pr_u64(a + 8u * i);
            if (o > d.m)
                bad = 1;
            else
                in_off[first + i] = o;
        }
        gb_team_sync(c); /* the offsets are in place before the generation moves */
        if (c->rank == 0)
            gb_pr_bump_gen(c);
    } else {
        uint32_t *in_src = (uint32_t *)(c->arena + d.off_in_src);
        for (uint32_t i = c->rank; i < count; i += c->size) {
            uint32_t s = gb_pr_u32(a + 4u * i);
            if (s >= d.n)
                bad = 1;
            else
                in_src[first + i] = s;
        }
    }
    return gb_team_any(c, bad) ? GB_SLOT_HANDLER_ERROR : GB_SLOT_OK;
}

GB_HD uint16_t gb_pr_query(const gb_grain_ctx_t *c, const unsigned char *in, uint32_t in_len, unsigned char *out,
                           uint32_t out_cap, uint32_t *out_len)
{
    gb_pr_dir_t d;
    if (in_len != GB_PR_CHUNK_HDR || !gb_pr_dir_read(c, &d))
        return GB_SLOT_HANDLER_ERROR;
    const uint64_t first = gb_pr_u64(in);
    const uint32_t count = gb_pr_u32(in + 8);
    if (first > d.n || count > d.n - first)
        return GB_SLOT_HANDLER_ERROR;
    if (8 + (uint64_t)count * 4 > out_cap)
        return GB_SLOT_TOO_LARGE;
    const float *rank = (const float *)(c->arena + d.off_rank);
    for (uint32_t i = c->rank; i < count; i += c->size) {
        float r = GB_LOAD_SHARED(&rank[first + i]);
        memcpy(out + 8 + 4u * i, &r, 4);
    }
    if (c->rank == 0)
        memcpy(out, &first, 8);
    *out_len = 8 + 4u * count;
    gb_team_sync(c);
    return GB_SLOT_OK;
}

/* Vertex v's contribution x[v] = r / outdeg, 0 for a dangling vertex (out-
 * degree 0); returns the rank it adds to the dangling sum. */
GB_HD float gb_pr_contribute(float *x, uint64_t v, float r, uint32_t outdeg)
{
    x[v] = outdeg ? r / (float)outdeg : 0.0f;
    return outdeg ? 0.0f : r;
}

GB_HD uint16_t gb_pr_start(const gb_grain_ctx_t *c, gb_pr_part_t *st, int sender, const unsigned char *in,
                           uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len)
{
    gb_pr_dir_t d;
    if (in_len != GB_PR_START_LEN || out_cap < GB_PR_REPLY_LEN || !gb_pr_dir_read(c, &d) || !st->ready)
        return GB_SLOT_HANDLER_ERROR;
    const uint32_t iteration = gb_pr_u32(in);
    const double damping = gb_pr_f64(in + 8), dangling = gb_pr_f64(in + 16);
    const uint64_t n = gb_pr_u64(in + 24);
    if (n != d.n || !(damping >= 0.0 && damping <= 1.0) || !(dangling >= 0.0 && dangling <= 2.0))
        return GB_SLOT_HANDLER_ERROR;
    /* A partition set up for an earlier, larger graph: re-check its range. */
    if (st->first > d.n || st->count > d.n - st->first)
        return GB_SLOT_HANDLER_ERROR;
    const uint64_t first = st->first, end = st->first + st->count;
    float *rank = (float *)(c->arena + d.off_rank);
    float *x = (float *)(c->arena + d.off_x) + (iteration & 1u) * d.n; /* this iteration's half */
    const uint32_t *outdeg = (const uint32_t *)(c->arena + d.off_outdeg);
    double a = 0.0, sum = 0.0, next_dangling = 0.0;
    float *xn = NULL; /* aggregator with GB_PR_START_NEXT: the next iteration's contributions */
    /* Vertex loops take GB_PR_BATCH vertices per thread at a time, their
     * loads first: on the GPU they are latency-bound. */
    const uint64_t stride = c->size;
    if (sender) {
        for (uint64_t v0 = first + c->rank; v0 < end; v0 += GB_PR_BATCH * stride) {
            float r[GB_PR_BATCH];
            uint32_t k[GB_PR_BATCH];
            for (int j = 0; j < GB_PR_BATCH; j++) {
                const uint64_t v = v0 + j * stride;
                r[j] = v < end ? GB_LOAD_SHARED(&rank[v]) : 0.0f;
                k[j] = v < end ? GB_LOAD_SHARED(&outdeg[v]) : 1u;
            }
            for (int j = 0; j < GB_PR_BATCH; j++) {
                const uint64_t v = v0 + j * stride;
                if (v >= end)
                    break;
                a += gb_pr_contribute(x, v, r[j], k[j]);
                sum += r[j];
            }
        }
    } else {
        const float df = (float)damping;
        const float base = (float)((1.0 - damping) / (double)n + damping * dangling / (double)n);
        if (gb_pr_u32(in + 4) & GB_PR_START_NEXT) /* into the other half */
            xn = (float *)(c->arena + d.off_x) + (~iteration & 1u) * d.n;
        if (st->dst_gen != d.gen) { /* in_off changed: check it (GPU: and rebuild in_dst) */
            if (!gb_pr_prepare(c, &d, first, end))
                return GB_SLOT_HANDLER_ERROR;
            if (c->rank == 0)
                st->dst_gen = d.gen;
        }
#if defined(__CUDA_ARCH__)
        gb_pr_pull_edges(c, &d, x, first, end);
        float *acc = (float *)(c->arena + d.off_sum);
        for (uint64_t v0 = first + c->rank; v0 < end; v0 += GB_PR_BATCH * stride) {
            float in[GB_PR_BATCH], old[GB_PR_BATCH];
            uint32_t k[GB_PR_BATCH];
#pragma unroll
            for (int j = 0; j < GB_PR_BATCH; j++) {
                const uint64_t v = v0 + j * stride;
                /* read and cleared for the next round in one step, at L2,
                 * where the block's atomics landed */
                in[j] = v < end ? atomicExch(&acc[v], 0.0f) : 0.0f;
                old[j] = v < end ? GB_LOAD_SHARED(&rank[v]) : 0.0f;
                k[j] = v < end && xn ? GB_LOAD_SHARED(&outdeg[v]) : 1u;
            }
#pragma unroll
            for (int j = 0; j < GB_PR_BATCH; j++) {
                const uint64_t v = v0 + j * stride;
                if (v < end) {
                    const float nr = base + df * in[j];
                    a += fabsf(nr - old[j]);
                    sum += nr;
                    rank[v] = nr;
                    if (xn)
                        next_dangling += gb_pr_contribute(xn, v, nr, k[j]);
                }
            }
        }
#else
        const uint64_t *in_off = (const uint64_t *)(c->arena + d.off_in_off);
        const uint32_t *src = (const uint32_t *)(c->arena + d.off_in_src);
        for (uint64_t v = first; v < end; v++) {
            /* clamped: records on other lanes may change in_off meanwhile */
            const uint64_t e0 = in_off[v] < d.m ? in_off[v] : d.m, e1 = in_off[v + 1] < d.m ? in_off[v + 1] : d.m;
            const float nr = base + df * gb_pr_pull(x, src, n, e0, e1), old = rank[v];
            a += fabsf(nr - old);
            sum += nr;
            rank[v] = nr;
            if (xn)
                next_dangling += gb_pr_contribute(xn, v, nr, outdeg[v]);
        }
#endif
    }
    a = gb_team_sum(c, a);
    sum = gb_team_sum(c, sum);
    if (xn)
        next_dangling = gb_team_sum(c, next_dangling);
    if (c->rank == 0)
        gb_pr_reply(out, a, sum, st->count, next_dangling, out_len);
    return GB_SLOT_OK;
}

GB_HD uint16_t gb_pr_on_message(const gb_grain_ctx_t *c, int sender, void *state, uint16_t type,
                                const unsigned char *in, uint32_t in_len, unsigned char *out, uint32_t out_cap,
                                uint32_t *out_len, uint32_t *aux)
{
    gb_pr_part_t *st = (gb_pr_part_t *)state;
    *out_len = 0;
    *aux = 0;
    switch (type) {
    case GB_PR_MSG_START:
        return gb_pr_start(c, st, sender, in, in_len, out, out_cap, out_len);
    case GB_PR_MSG_PARTITION_INIT:
        return gb_pr_partition_init(c, st, sender, in, in_len);
    case GB_PR_MSG_GRAPH_INIT:
        if (sender)
            return gb_pr_graph_init(c, in, in_len);
        break;
    case GB_PR_MSG_OUT_DEGREES:
        if (sender)
            return gb_pr_load(c, type, in, in_len);
        break;
    case GB_PR_MSG_IN_OFFSETS:
    case GB_PR_MSG_IN_EDGES:
        if (!sender)
            return gb_pr_load(c, type, in, in_len);
        break;
    case GB_PR_MSG_RANK_QUERY:
        if (!sender)
            return gb_pr_query(c, in, in_len, out, out_cap, out_len);
        break;
    default:
        break;
    }
    return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
}

#endif
