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
 * On several devices (c->n_peers > 1) every device holds the job's vertex
 * arrays whole and the in-edges of its own partitions; m is that device's
 * edge count, and in_off its partitions' offsets into them. A START writes
 * its vertices' contributions here and then into the job's slice on every
 * other device (gb_pr_share), so that each aggregator pulls from local
 * memory.
 *
 * Sums are accumulated in double (a vertex's in-edge sum, the L1 delta, the
 * dangling and rank sums); ranks and contributions are stored as float.
 *
 * Every record names its job (pagerank_layout.h) and works in that job's
 * slice of the arena only. Every index is checked against n and m before
 * use, and a partition's in_off must not decrease: a bad record gets
 * GB_SLOT_HANDLER_ERROR with a gb_pr_err in aux, and nothing outside the
 * arrays is touched. The functions below return 0 or a gb_pr_err. */
#ifndef GB_PAGERANK_H
#define GB_PAGERANK_H

#include <math.h>
#include <string.h>

#include "pagerank_layout.h"
#include "pagerank_pull.h"

#define GB_PR_E_TOO_LARGE 0x100u /* not a gb_pr_err: the reply does not fit (GB_SLOT_TOO_LARGE) */

/* Lays out the job's slice (claimed by gb_pr_job_claim) for n vertices and m
 * edges, ranks 1/n. jc: the slice's context; fresh: a new slice (its bytes
 * are another job's leftovers, gen included). */
GB_HD uint32_t gb_pr_graph_layout(const gb_grain_ctx_t *jc, uint64_t n, uint64_t m, int fresh, uint64_t serial)
{
    gb_pr_dir_t d;
    memset(&d, 0, sizeof d);
    gb_pr_layout(&d, n, m);
    /* Unpublish, lay out, initialise, publish (magic last). */
    if (jc->rank == 0) {
        *(volatile uint64_t *)jc->arena = 0;
        if (fresh) /* a generation no partition of this slice can have seen */
            *(volatile uint64_t *)(jc->arena + GB_PR_GEN_OFF) = serial << 24;
    }
    float *rank = (float *)(jc->arena + d.off_rank), *x = (float *)(jc->arena + d.off_x);
    double *sum = (double *)(jc->arena + d.off_sum);
    uint32_t *outdeg = (uint32_t *)(jc->arena + d.off_outdeg);
    uint64_t *in_off = (uint64_t *)(jc->arena + d.off_in_off);
    const float r0 = (float)(1.0 / (double)n);
    for (uint64_t v = jc->rank; v < n; v += jc->size) {
        rank[v] = r0;
        x[v] = 0.0f;
        x[n + v] = 0.0f;
        sum[v] = 0.0;
        outdeg[v] = 0;
        in_off[v] = 0;
    }
    if (jc->rank == 0)
        in_off[n] = 0;
    gb_team_sync(jc);
#if defined(__CUDA_ARCH__)
    __threadfence();
#endif
    if (jc->rank == 0) {
        /* every field but magic and gen; gen moves by an atomic add, so that
         * a bump by a record running meanwhile is not lost */
        const unsigned char *ds = (const unsigned char *)&d;
        memcpy(jc->arena + 8, ds + 8, GB_PR_GEN_OFF - 8);
        memcpy(jc->arena + GB_PR_GEN_OFF + 8, ds + GB_PR_GEN_OFF + 8, sizeof d - GB_PR_GEN_OFF - 8);
        gb_pr_bump_gen(jc); /* fences the fields above */
#if defined(__CUDA_ARCH__)
        __threadfence();
        *(volatile uint64_t *)jc->arena = GB_PR_MAGIC;
#else
        __atomic_store_n((volatile uint64_t *)jc->arena, GB_PR_MAGIC, __ATOMIC_RELEASE);
#endif
    }
    gb_team_sync(jc);
    return 0;
}

/* GRAPH_INIT: claims the job's slice (one thread, under the table's lock),
 * then the team lays it out. *aux gets the MiB the graph needs when the
 * arena has no room. */
GB_HD uint32_t gb_pr_graph_init(const gb_grain_ctx_t *c, const unsigned char *in, uint32_t in_len, uint32_t *aux)
{
    if (in_len != GB_PR_PAIR_LEN || !c->arena)
        return GB_PR_E_RECORD;
    gb_pr_dir_t d;
    const uint64_t n = gb_pr_u64(in), m = gb_pr_u64(in + 8);
    const uint32_t job = gb_pr_u32(in + 16), flags = gb_pr_u32(in + 20);
    if (n == 0 || n > 0xffffffffull || m > (1ull << 40))
        return GB_PR_E_RANGE;
    const uint64_t need = gb_pr_layout(&d, n, m);
    int fresh = 0;
    double err = 0;
    if (c->rank == 0)
        err = gb_pr_job_claim(c, job, flags, need, &fresh) + (fresh ? 0.5 : 0.0);
    err = gb_team_sum(c, err); /* to the whole team: exact in a double */
    fresh = err - (double)(uint32_t)err != 0.0;
    if ((uint32_t)err) {
        /* In MiB, rounded up: for ARENA_SMALL the whole arena it takes (the
         * job table's room too), so that the error can name the arena_mb that fits. */
        if ((uint32_t)err == GB_PR_E_ARENA_SMALL)
            *aux = (uint32_t)(((need + GB_PR_TABLE_BYTES + (1u << 20) - 1) >> 20) << 8);
        else if ((uint32_t)err == GB_PR_E_ARENA_FULL)
            *aux = (uint32_t)(((need + (1u << 20) - 1) >> 20) << 8);
        return (uint32_t)err;
    }
    gb_grain_ctx_t jc;
    uint64_t serial;
    if (!gb_pr_job_find(c, job, &jc, &serial))
        return GB_PR_E_NO_GRAPH; /* a JOB_END of the same job ran meanwhile */
    return gb_pr_graph_layout(&jc, n, m, fresh, serial);
}

/* PARTITION_INIT, both roles. */
GB_HD uint32_t gb_pr_partition_init(const gb_grain_ctx_t *c, gb_pr_part_t *st, int sender, uint64_t serial,
                                    const unsigned char *in, uint32_t in_len)
{
    gb_pr_dir_t d;
    if (in_len != GB_PR_PAIR_LEN)
        return GB_PR_E_RECORD;
    if (!gb_pr_dir_read(c, &d))
        return GB_PR_E_NO_GRAPH;
    uint64_t first = gb_pr_u64(in), count = gb_pr_u64(in + 8);
    if (first > d.n || count > d.n - first)
        return GB_PR_E_RANGE;
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
        st->serial = serial;
        st->dst_gen = 0;
    }
    gb_team_sync(c);
    return 0;
}

/* OUT_DEGREES / IN_OFFSETS / IN_EDGES: a chunk of one of the graph arrays. */
GB_HD uint32_t gb_pr_load(const gb_grain_ctx_t *c, uint16_t type, const unsigned char *in, uint32_t in_len)
{
    gb_pr_dir_t d;
    if (in_len < GB_PR_CHUNK_HDR)
        return GB_PR_E_RECORD;
    if (!gb_pr_dir_read(c, &d))
        return GB_PR_E_NO_GRAPH;
    const uint64_t first = gb_pr_u64(in);
    const uint32_t count = gb_pr_u32(in + 8);
    const unsigned char *a = in + GB_PR_CHUNK_HDR;
    const uint32_t esz = type == GB_PR_MSG_IN_OFFSETS ? 8 : 4;
    const uint64_t limit = type == GB_PR_MSG_IN_EDGES ? d.m : type == GB_PR_MSG_IN_OFFSETS ? d.n + 1 : d.n;
    if ((uint64_t)in_len != GB_PR_CHUNK_HDR + (uint64_t)esz * count)
        return GB_PR_E_RECORD;
    if (first > limit || count > limit - first)
        return GB_PR_E_RANGE;
    /* Checked whole before any of it is written: a refused chunk changes nothing. */
    int past = 0, decreasing = 0;
    for (uint32_t i = c->rank; i < count; i += c->size) {
        if (type == GB_PR_MSG_IN_OFFSETS) {
            const uint64_t o = gb_pr_u64(a + 8u * i);
            past |= o > d.m;
            decreasing |= i > 0 && o < gb_pr_u64(a + 8u * (i - 1));
        } else if (type == GB_PR_MSG_IN_EDGES) {
            past |= gb_pr_u32(a + 4u * i) >= d.n;
        }
    }
    if (gb_team_any(c, past))
        return GB_PR_E_RANGE;
    if (gb_team_any(c, decreasing))
        return GB_PR_E_OFFSETS;
    if (type == GB_PR_MSG_OUT_DEGREES) {
        uint32_t *outdeg = (uint32_t *)(c->arena + d.off_outdeg);
        for (uint32_t i = c->rank; i < count; i += c->size)
            outdeg[first + i] = gb_pr_u32(a + 4u * i);
    } else if (type == GB_PR_MSG_IN_OFFSETS) {
        uint64_t *in_off = (uint64_t *)(c->arena + d.off_in_off);
        for (uint32_t i = c->rank; i < count; i += c->size)
            in_off[first + i] = gb_pr_u64(a + 8u * i);
        gb_team_sync(c); /* the offsets are in place before the generation moves */
        if (c->rank == 0)
            gb_pr_bump_gen(c);
    } else {
        uint32_t *in_src = (uint32_t *)(c->arena + d.off_in_src);
        for (uint32_t i = c->rank; i < count; i += c->size)
            in_src[first + i] = gb_pr_u32(a + 4u * i);
    }
    return 0;
}

GB_HD uint32_t gb_pr_query(const gb_grain_ctx_t *c, const unsigned char *in, uint32_t in_len, unsigned char *out,
                           uint32_t out_cap, uint32_t *out_len)
{
    gb_pr_dir_t d;
    if (in_len != GB_PR_CHUNK_HDR)
        return GB_PR_E_RECORD;
    if (!gb_pr_dir_read(c, &d))
        return GB_PR_E_NO_GRAPH;
    const uint64_t first = gb_pr_u64(in);
    const uint32_t count = gb_pr_u32(in + 8);
    if (first > d.n || count > d.n - first)
        return GB_PR_E_RANGE;
    if (8 + (uint64_t)count * 4 > out_cap)
        return GB_PR_E_TOO_LARGE;
    const float *rank = (const float *)(c->arena + d.off_rank);
    for (uint32_t i = c->rank; i < count; i += c->size) {
        float r = GB_LOAD_SHARED(&rank[first + i]);
        memcpy(out + 8 + 4u * i, &r, 4);
    }
    if (c->rank == 0)
        memcpy(out, &first, 8);
    *out_len = 8 + 4u * count;
    gb_team_sync(c);
    return 0;
}

/* Vertex v's contribution x[v] = r / outdeg, 0 for a dangling vertex (out-
 * degree 0); returns the rank it adds to the dangling sum. */
GB_HD float gb_pr_contribute(float *x, uint64_t v, float r, uint32_t outdeg)
{
    x[v] = outdeg ? r / (float)outdeg : 0.0f;
    return outdeg ? 0.0f : r;
}

/* The sender's START: its vertices' contributions into x; *a: their dangling
 * rank, *sum: their rank. */
GB_HD void gb_pr_send(const gb_grain_ctx_t *c, const gb_pr_dir_t *d, float *x, uint64_t first, uint64_t end,
                      double *a, double *sum)
{
    const float *rank = (const float *)(c->arena + d->off_rank);
    const uint32_t *outdeg = (const uint32_t *)(c->arena + d->off_outdeg);
    /* Vertex loops take GB_PR_BATCH vertices per thread at a time, their
     * loads first: on the GPU they are latency-bound. */
    const uint64_t stride = c->size;
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
            *a += gb_pr_contribute(x, v, r[j], k[j]);
            *sum += r[j];
        }
    }
}

/* The aggregator's START: new ranks of [first, end) from the contributions x
 * (and into xn, the next iteration's, unless NULL); *a: their L1 delta, *sum:
 * their rank, *next_dangling: the dangling rank of the new ranks. base is the
 * teleport and dangling share of every vertex. */
GB_HD void gb_pr_aggregate(const gb_grain_ctx_t *c, const gb_pr_dir_t *d, const float *x, float *xn, double base,
                           double damping, uint64_t first, uint64_t end, double *a, double *sum,
                           double *next_dangling)
{
    float *rank = (float *)(c->arena + d->off_rank);
    const uint32_t *outdeg = (const uint32_t *)(c->arena + d->off_outdeg);
#if defined(__CUDA_ARCH__)
    const uint64_t stride = c->size;
    gb_pr_pull_edges(c, d, x, first, end);
    double *acc = (double *)(c->arena + d->off_sum);
    for (uint64_t v0 = first + c->rank; v0 < end; v0 += GB_PR_BATCH * stride) {
        double in[GB_PR_BATCH];
        float old[GB_PR_BATCH];
        uint32_t k[GB_PR_BATCH];
#pragma unroll
        for (int j = 0; j < GB_PR_BATCH; j++) {
            const uint64_t v = v0 + j * stride;
            /* read and cleared for the next round in one step, at L2,
             * where the block's atomics landed */
            in[j] = v < end ? __longlong_as_double((long long)atomicExch((unsigned long long *)&acc[v], 0ull)) : 0.0;
            old[j] = v < end ? GB_LOAD_SHARED(&rank[v]) : 0.0f;
            k[j] = v < end && xn ? GB_LOAD_SHARED(&outdeg[v]) : 1u;
        }
#pragma unroll
        for (int j = 0; j < GB_PR_BATCH; j++) {
            const uint64_t v = v0 + j * stride;
            if (v < end) {
                const float nr = (float)(base + damping * in[j]);
                *a += fabs((double)nr - (double)old[j]);
                *sum += nr;
                rank[v] = nr;
                if (xn)
                    *next_dangling += gb_pr_contribute(xn, v, nr, k[j]);
            }
        }
    }
#else
    const uint64_t *in_off = (const uint64_t *)(c->arena + d->off_in_off);
    const uint32_t *src = (const uint32_t *)(c->arena + d->off_in_src);
    for (uint64_t v = first; v < end; v++) {
        /* clamped: records on other lanes may change in_off meanwhile */
        const uint64_t e0 = in_off[v] < d->m ? in_off[v] : d->m, e1 = in_off[v + 1] < d->m ? in_off[v + 1] : d->m;
        const float nr = (float)(base + damping * gb_pr_pull(x, src, d->n, e0, e1)), old = rank[v];
        *a += fabs((double)nr - (double)old);
        *sum += nr;
        rank[v] = nr;
        if (xn)
            *next_dangling += gb_pr_contribute(xn, v, nr, outdeg[v]);
    }
#endif
}

/* Job's slice on device p, another than fam's (fam: the whole arena's
 * context, whose peers are whole arenas too): 1 and *pj, or 0 when p is this
 * device, has no arena or holds no slice of the job. */
GB_HD int gb_pr_peer_job(const gb_grain_ctx_t *fam, uint32_t p, uint32_t job, gb_grain_ctx_t *pj)
{
    if (!fam->peers || p == fam->self || !fam->peers[p])
        return 0;
    gb_grain_ctx_t pc = *fam;
    pc.arena = fam->peers[p];
    uint64_t serial;
    *pj = pc;
    return gb_pr_job_find(&pc, job, pj, &serial);
}

/* With the family's arenas on several devices (c->n_peers > 1): this
 * partition's contributions x[first, end) (x: half `half` of the job's x
 * here) go into the job's slice on every other device that has one too, for
 * the aggregators there, which pull from every vertex. A device without a
 * slice of the job holds none of its partitions. Each thread copies the
 * vertices it wrote (first + rank + k * size), so no team sync comes first;
 * the system-scope fence puts the copies before the reply, which the client
 * waits for before it starts an aggregator that reads them. */
GB_HD void gb_pr_share(const gb_grain_ctx_t *fam, uint32_t job, uint64_t n, const float *x, uint32_t half,
                       uint64_t first, uint64_t end)
{
    if (fam->n_peers < 2 || !fam->peers)
        return;
    for (uint32_t p = 0; p < fam->n_peers; p++) {
        gb_grain_ctx_t pj;
        gb_pr_dir_t pd;
        if (!gb_pr_peer_job(fam, p, job, &pj) || !gb_pr_dir_read(&pj, &pd) || pd.n != n)
            continue;
        float *px = (float *)(pj.arena + pd.off_x) + (uint64_t)half * n;
        const uint64_t stride = fam->size;
        for (uint64_t v0 = first + fam->rank; v0 < end; v0 += GB_PR_BATCH * stride) {
            float r[GB_PR_BATCH]; /* loads first: each is a trip to L2 */
            for (int j = 0; j < GB_PR_BATCH; j++)
                r[j] = v0 + j * stride < end ? x[v0 + j * stride] : 0.0f;
            for (int j = 0; j < GB_PR_BATCH; j++)
                if (v0 + j * stride < end)
                    px[v0 + j * stride] = r[j];
        }
    }
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

/* START in the job's slice c; fam: the whole arena's context (gb_pr_share). */
GB_HD uint32_t gb_pr_start(const gb_grain_ctx_t *c, const gb_grain_ctx_t *fam, gb_pr_part_t *st, int sender,
                           uint32_t job, const unsigned char *in, uint32_t in_len, unsigned char *out,
                           uint32_t out_cap, uint32_t *out_len)
{
    gb_pr_dir_t d;
    if (in_len != GB_PR_START_LEN || out_cap < GB_PR_REPLY_LEN)
        return GB_PR_E_RECORD;
    if (!gb_pr_dir_read(c, &d))
        return GB_PR_E_NO_GRAPH;
    const uint32_t iteration = gb_pr_u32(in);
    const double damping = gb_pr_f64(in + 8), dangling = gb_pr_f64(in + 16);
    const uint64_t n = gb_pr_u32(in + 24);
    if (n != d.n)
        return GB_PR_E_NODE_COUNT;
    if (!(damping >= 0.0 && damping <= 1.0) || !(dangling >= 0.0 && dangling <= 2.0))
        return GB_PR_E_PARAM;
    /* A partition set up for an earlier, larger graph: re-check its range. */
    if (st->first > d.n || st->count > d.n - st->first)
        return GB_PR_E_PARTITION;
    const uint64_t first = st->first, end = st->first + st->count;
    float *x = (float *)(c->arena + d.off_x) + (iteration & 1u) * d.n; /* this iteration's half */
    double a = 0.0, sum = 0.0, next_dangling = 0.0;
    float *xn = NULL; /* aggregator with GB_PR_START_NEXT: the next iteration's contributions */
    if (sender) {
        gb_pr_send(c, &d, x, first, end, &a, &sum);
        gb_pr_share(fam, job, n, x, iteration & 1u, first, end);
    } else {
        const double base = (1.0 - damping) / (double)n + damping * dangling / (double)n;
        if (gb_pr_u32(in + 4) & GB_PR_START_NEXT) /* into the other half */
            xn = (float *)(c->arena + d.off_x) + (~iteration & 1u) * d.n;
        if (st->dst_gen != d.gen) { /* in_off changed: check it (GPU: and rebuild in_dst) */
            if (!gb_pr_prepare(c, &d, first, end))
                return GB_PR_E_OFFSETS;
            if (c->rank == 0)
                st->dst_gen = d.gen;
        }
        gb_pr_aggregate(c, &d, x, xn, base, damping, first, end, &a, &sum, &next_dangling);
        if (xn)
            gb_pr_share(fam, job, n, xn, ~iteration & 1u, first, end);
    }
    a = gb_team_sum(c, a);
    sum = gb_team_sum(c, sum);
    if (xn)
        next_dangling = gb_team_sum(c, next_dangling);
    if (c->rank == 0)
        gb_pr_reply(out, a, sum, st->count, next_dangling, out_len);
    return 0;
}

/* Whether job has a slice on another device than c's (fam: the whole
 * arena's context). */
GB_HD int gb_pr_job_elsewhere(const gb_grain_ctx_t *fam, uint32_t job)
{
    gb_grain_ctx_t pj;
    for (uint32_t p = 0; p < fam->n_peers; p++)
        if (gb_pr_peer_job(fam, p, job, &pj))
            return 1;
    return 0;
}

/* A job spread over several devices has each device fill only its own
 * partitions' share of the vertex arrays, so a chunk or a rank query must lie
 * in the partition of the grain it is sent to (after its PARTITION_INIT):
 * sent elsewhere it would fill or read a device's copy that nothing uses.
 * Offsets include the one that ends the partition; edges lie between its
 * first and end offsets. 0, or a gb_pr_err. */
GB_HD uint32_t gb_pr_own(const gb_grain_ctx_t *jc, const gb_pr_part_t *st, uint64_t serial, uint16_t type,
                         const unsigned char *in, uint32_t in_len)
{
    if (in_len < GB_PR_CHUNK_HDR)
        return GB_PR_E_RECORD;
    if (st->serial != serial)
        return GB_PR_E_PARTITION;
    const uint64_t first = gb_pr_u64(in), count = gb_pr_u32(in + 8);
    uint64_t lo = st->first, hi = st->first + st->count + (type == GB_PR_MSG_IN_OFFSETS);
    if (type == GB_PR_MSG_IN_EDGES) {
        gb_pr_dir_t d;
        if (!gb_pr_dir_read(jc, &d))
            return GB_PR_E_NO_GRAPH;
        if (st->first > d.n || st->count > d.n - st->first)
            return GB_PR_E_PARTITION;
        const uint64_t *in_off = (const uint64_t *)(jc->arena + d.off_in_off);
        lo = GB_LOAD_SHARED(&in_off[st->first]);
        hi = GB_LOAD_SHARED(&in_off[st->first + st->count]);
    }
    return hi >= lo && first >= lo && first - lo <= hi - lo && count <= hi - first ? 0 : GB_PR_E_NOT_MINE;
}

/* Which types each role takes (1 sender, 0 aggregator). */
GB_HD int gb_pr_takes(int sender, uint16_t type)
{
    switch (type) {
    case GB_PR_MSG_START:
    case GB_PR_MSG_PARTITION_INIT: return 1;
    case GB_PR_MSG_GRAPH_INIT:
    case GB_PR_MSG_OUT_DEGREES:
    case GB_PR_MSG_JOB_END: return sender;
    case GB_PR_MSG_IN_OFFSETS:
    case GB_PR_MSG_IN_EDGES:
    case GB_PR_MSG_RANK_QUERY: return !sender;
    default: return 0;
    }
}

/* Runs one record in its job's slice; 0 or a gb_pr_err (*aux: its detail). */
GB_HD uint32_t gb_pr_run(const gb_grain_ctx_t *c, int sender, gb_pr_part_t *st, uint16_t type,
                         const unsigned char *in, uint32_t in_len, unsigned char *out, uint32_t out_cap,
                         uint32_t *out_len, uint32_t *aux)
{
    if (in_len < gb_pr_job_at(type) + 4)
        return GB_PR_E_RECORD;
    const uint32_t job = gb_pr_u32(in + gb_pr_job_at(type));
    if (type == GB_PR_MSG_GRAPH_INIT)
        return gb_pr_graph_init(c, in, in_len, aux);
    if (type == GB_PR_MSG_JOB_END) {
        if (in_len != GB_PR_PAIR_LEN || !c->arena)
            return GB_PR_E_RECORD;
        if (c->rank == 0)
            gb_pr_job_end(c, job);
        gb_team_sync(c);
        return 0;
    }
    gb_grain_ctx_t jc = *c;
    uint64_t serial = 0;
    /* Every thread must take the same way (the records below meet at team
     * syncs): what memory other blocks or devices may be changing decides is
     * agreed on by the team. */
    const int found = gb_pr_job_find(c, job, &jc, &serial);
    if (gb_team_sum(c, found ? 1.0 : 0.0) < (double)c->size)
        return GB_PR_E_NO_GRAPH;
    if (c->n_peers > 1 && type != GB_PR_MSG_PARTITION_INIT && type != GB_PR_MSG_START) {
        uint32_t own = 0; /* the team's first thread asks, the team hears its answer */
        if (c->rank == 0 && gb_pr_job_elsewhere(c, job))
            own = gb_pr_own(&jc, st, serial, type, in, in_len);
        own = (uint32_t)gb_team_sum(c, (double)own);
        if (own)
            return own;
    }
    switch (type) {
    case GB_PR_MSG_PARTITION_INIT:
        return gb_pr_partition_init(&jc, st, sender, serial, in, in_len);
    case GB_PR_MSG_START:
        if (st->serial != serial)
            return GB_PR_E_PARTITION;
        return gb_pr_start(&jc, c, st, sender, job, in, in_len, out, out_cap, out_len);
    case GB_PR_MSG_RANK_QUERY:
        return gb_pr_query(&jc, in, in_len, out, out_cap, out_len);
    default:
        return gb_pr_load(&jc, type, in, in_len);
    }
}

GB_HD uint16_t gb_pr_on_message(const gb_grain_ctx_t *c, int sender, void *state, uint16_t type,
                                const unsigned char *in, uint32_t in_len, unsigned char *out, uint32_t out_cap,
                                uint32_t *out_len, uint32_t *aux)
{
    *out_len = 0;
    *aux = 0;
    if (!gb_pr_takes(sender, type))
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    const uint32_t err = gb_pr_run(c, sender, (gb_pr_part_t *)state, type, in, in_len, out, out_cap, out_len, aux);
    if (err == GB_PR_E_TOO_LARGE)
        return GB_SLOT_TOO_LARGE;
    if (err) {
        *out_len = 0;
        *aux |= err;
        return GB_SLOT_HANDLER_ERROR;
    }
    /* the job whose slice answered, for the client to check */
    *aux = in_len >= gb_pr_job_at(type) + 4 ? gb_pr_u32(in + gb_pr_job_at(type)) : 0;
    return GB_SLOT_OK;
}

#endif
