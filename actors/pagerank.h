/* The PageRank grains: pagerank.sender and pagerank.aggregator, one source for
 * CPU and GPU. Both are team grains (team.h): on the GPU each message runs on
 * a whole thread block. A grain is one partition of the vertices (key =
 * partition index), a contiguous range [first, first + count).
 *
 * The graph and the rank vectors live in the family's arena (device memory on
 * the GPU), shared by both grain types, laid out by GRAPH_INIT:
 *
 *   gb_pr_dir_t | rank f32[n] | x f32[2n] | sum f32[n] | outdeg u32[n] | in_off u64[n+1]
 *   | in_src u32[m] | in_dst u32[m]
 *
 * in_off/in_src are the in-edges in CSR form (by target). The GPU aggregator
 * also keeps in_dst (each edge's target, built from in_off at its first START
 * after in_off changed) and sum (per-vertex accumulators), so that a block
 * walks its partition's edges in order, 8 consecutive edges per thread,
 * whatever the degrees. An iteration is driven by the client
 * (examples/pagerank):
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
 * Records (little-endian; slot types; u64 fields 8-aligned):
 *   START (1), both:     u32 iteration, u32 flags, f64 damping, f64 dangling, u64 n
 *     sender reply:      f64 dangling_sum, f64 rank_sum, u64 nodes, f64 0
 *     aggregator reply:  f64 l1_delta,    f64 rank_sum, u64 nodes, f64 next_dangling
 *     flags: GB_PR_START_RANKS (the client wants the ranks; the grains ignore
 *     it), GB_PR_START_NEXT (aggregator: see above; next_dangling is the
 *     dangling rank of its new ranks, 0 without the flag)
 *   GRAPH_INIT (9), sender:      u64 n, u64 m (lays out the arena; ranks 1/n)
 *   PARTITION_INIT (10), both:   u64 first, u64 count (sender: its ranks to 1/n)
 *   OUT_DEGREES (11), sender:    u64 first, u32 count, u32 0, u32 deg[count]
 *   IN_OFFSETS (12), aggregator: u64 first, u32 count, u32 0, u64 off[count]
 *   IN_EDGES (13), aggregator:   u64 first_edge, u32 count, u32 0, u32 src[count]
 *   RANK_QUERY (14), aggregator: u64 first, u32 count, u32 0 -> u64 first, f32 rank[count]
 * Every index is checked against n and m before use, and a partition's
 * in_off must not decrease: a bad record gets GB_SLOT_HANDLER_ERROR and
 * nothing outside the arrays is touched. */
#ifndef GB_PAGERANK_H
#define GB_PAGERANK_H

#include <math.h>
#include <string.h>

#include "ring.h"
#include "team.h"

enum {
    GB_PR_MSG_START = 1,
    GB_PR_MSG_GRAPH_INIT = 9,
    GB_PR_MSG_PARTITION_INIT = 10,
    GB_PR_MSG_OUT_DEGREES = 11,
    GB_PR_MSG_IN_OFFSETS = 12,
    GB_PR_MSG_IN_EDGES = 13,
    GB_PR_MSG_RANK_QUERY = 14,
};

enum {
    GB_PR_START_RANKS = 1u,
    GB_PR_START_NEXT = 2u,
};

#define GB_PR_MAGIC 0x70616765726e6b31ull /* "pagernk1" */
#define GB_PR_STATE_SIZE 32
#define GB_PR_START_LEN 32
#define GB_PR_CHUNK_HDR 16 /* first + count + pad */
#define GB_PR_REPLY_LEN 32
#define GB_PR_BATCH 4 /* vertices per thread whose loads are in flight together */

/* At the start of the arena. */
typedef struct gb_pr_dir {
    uint64_t magic; /* GB_PR_MAGIC once laid out */
    uint64_t n, m;
    uint64_t off_rank, off_x, off_outdeg, off_in_off, off_in_src, end;
    uint64_t off_sum, off_in_dst;
    /* Bumped by every GRAPH_INIT and IN_OFFSETS record, never reset while the
     * arena lives: a partition whose in_dst was built at another generation
     * rebuilds it. */
    uint64_t gen;
    uint64_t _pad[4];
} gb_pr_dir_t;

#define GB_PR_GEN_OFF offsetof(gb_pr_dir_t, gen)
GB_STATIC_ASSERT(sizeof(gb_pr_dir_t) == 128, "the directory is two 64-byte lines");

/* A partition grain's state. */
typedef struct gb_pr_part {
    uint64_t first, count;
    uint32_t ready; /* PARTITION_INIT seen */
    uint32_t _pad;
    uint64_t dst_gen; /* the directory's gen when this partition's in_off was checked (and, on the
                       * GPU, its in_dst built); 0: not yet */
} gb_pr_part_t;

GB_HD uint64_t gb_pr_align(uint64_t x) { return (x + 255u) & ~(uint64_t)255u; }

/* Lays out n vertices and m edges; returns the bytes needed. */
GB_HD uint64_t gb_pr_layout(gb_pr_dir_t *d, uint64_t n, uint64_t m)
{
    d->n = n;
    d->m = m;
    d->off_rank = gb_pr_align(sizeof(gb_pr_dir_t));
    d->off_x = gb_pr_align(d->off_rank + 4 * n);
    d->off_sum = gb_pr_align(d->off_x + 8 * n);
    d->off_outdeg = gb_pr_align(d->off_sum + 4 * n);
    d->off_in_off = gb_pr_align(d->off_outdeg + 4 * n);
    d->off_in_src = gb_pr_align(d->off_in_off + 8 * (n + 1));
    /* 32 bytes of slack after each edge array: the GPU pull reads edges in
     * aligned groups of 8, up to 7 past m */
    d->off_in_dst = gb_pr_align(d->off_in_src + 4 * m + 32);
    d->end = gb_pr_align(d->off_in_dst + 4 * m + 32);
    return d->end;
}

/* A copy of the directory, or 0 when no graph is laid out. Volatile: another
 * block (or grain type) may have written it while we run. */
GB_HD int gb_pr_dir_read(const gb_grain_ctx_t *c, gb_pr_dir_t *d)
{
    if (!c->arena || c->arena_size < sizeof(gb_pr_dir_t))
        return 0;
    const volatile uint64_t *s = (const volatile uint64_t *)c->arena;
    uint64_t *o = (uint64_t *)d;
    for (unsigned i = 0; i < sizeof(gb_pr_dir_t) / 8; i++)
        o[i] = s[i];
    return d->magic == GB_PR_MAGIC && d->end <= c->arena_size;
}

/* Advances the directory's generation (one thread of the team, after a team
 * sync): the team's writes first, for any block that sees the new value. */
GB_HD void gb_pr_bump_gen(const gb_grain_ctx_t *c)
{
#if defined(__CUDA_ARCH__)
    __threadfence();
    atomicAdd((unsigned long long *)(c->arena + GB_PR_GEN_OFF), 1ull);
#else
    __atomic_fetch_add((uint64_t *)(c->arena + GB_PR_GEN_OFF), 1, __ATOMIC_RELEASE);
#endif
}

GB_HD uint64_t gb_pr_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
GB_HD uint32_t gb_pr_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
GB_HD double gb_pr_f64(const unsigned char *p) { double v; memcpy(&v, p, 8); return v; }

/* Record builders (the bridge's codec, and the tests and bench_pr_rounds,
 * which talk to the grains without it). Each returns the record's length. */
GB_HD uint32_t gb_pr_rec_pair(unsigned char *rec, uint64_t a, uint64_t b)
{
    memcpy(rec, &a, 8);
    memcpy(rec + 8, &b, 8);
    return 16;
}

/* GB_PR_CHUNK_HDR, then count entries of esz bytes from data. */
GB_HD uint32_t gb_pr_rec_chunk(unsigned char *rec, uint64_t first, uint32_t count, const void *data, uint32_t esz)
{
    const uint32_t zero = 0;
    memcpy(rec, &first, 8);
    memcpy(rec + 8, &count, 4);
    memcpy(rec + 12, &zero, 4);
    if (count && esz)
        memcpy(rec + GB_PR_CHUNK_HDR, data, (size_t)count * esz);
    return GB_PR_CHUNK_HDR + count * esz;
}

GB_HD uint32_t gb_pr_rec_start(unsigned char *rec, uint32_t it, uint32_t flags, double damping, double dangling,
                               uint64_t n)
{
    memcpy(rec, &it, 4);
    memcpy(rec + 4, &flags, 4);
    memcpy(rec + 8, &damping, 8);
    memcpy(rec + 16, &dangling, 8);
    memcpy(rec + 24, &n, 8);
    return GB_PR_START_LEN;
}

GB_HD void gb_pr_reply(unsigned char *out, double a, double b, uint64_t nodes, double next_dangling,
                       uint32_t *out_len)
{
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
    memcpy(out + 16, &nodes, 8);
    memcpy(out + 24, &next_dangling, 8);
    *out_len = GB_PR_REPLY_LEN;
}

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
#else
        __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
        *(volatile uint64_t *)c->arena = GB_PR_MAGIC;
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

/* x[u], or 0 for an edge whose source was never loaded (in_src is not
 * cleared when a graph is laid out, so it may hold anything). */
GB_HD float gb_pr_x(const float *x, uint32_t u, uint64_t n) { return u < n ? GB_LOAD_SHARED(&x[u]) : 0.0f; }

/* Sum of x over the in-edges [e0, e1) of one vertex (the CPU's pull); four
 * independent gathers in flight. */
GB_HD float gb_pr_pull(const float *x, const uint32_t *src, uint64_t n, uint64_t e0, uint64_t e1)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    uint64_t e = e0;
    for (; e + 4 <= e1; e += 4) {
        s0 += gb_pr_x(x, src[e], n);
        s1 += gb_pr_x(x, src[e + 1], n);
        s2 += gb_pr_x(x, src[e + 2], n);
        s3 += gb_pr_x(x, src[e + 3], n);
    }
    for (; e < e1; e++)
        s0 += gb_pr_x(x, src[e], n);
    return (s0 + s1) + (s2 + s3);
}

#if defined(__CUDA_ARCH__)
/* Before the first START after in_off changed: checks that in_off does not
 * decrease over the partition, and on the GPU writes in_dst[e] = v for every
 * in-edge e of its vertices. Lane per vertex; a vertex with many in-edges is
 * written by the whole warp. Returns 1 on every thread when in_off is good.
 * Offsets are clamped to m (records running at the same time may change
 * them): what is written stays inside in_dst. Partitions a client lays out
 * with gaps or overlaps may write each other's in_dst entries; the pull
 * skips entries that name a vertex outside its own partition. */
static __device__ int gb_pr_prepare(const gb_grain_ctx_t *c, const gb_pr_dir_t *d, uint64_t first, uint64_t end)
{
    const uint64_t *in_off = (const uint64_t *)(c->arena + d->off_in_off);
    uint32_t *dst = (uint32_t *)(c->arena + d->off_in_dst);
    const uint32_t lane = c->rank & 31, warp = c->rank >> 5, nwarps = c->size >> 5;
    int bad = 0;
    for (uint64_t b = first + (uint64_t)warp * 32; b < end; b += (uint64_t)nwarps * 32) {
        const uint64_t v = b + lane;
        const bool mine = v < end;
        const uint64_t e0 = mine ? min(GB_LOAD_SHARED(&in_off[v]), d->m) : 0;
        const uint64_t e1 = mine ? min(GB_LOAD_SHARED(&in_off[v + 1]), d->m) : 0;
        bad |= e1 < e0;
        const bool big = e1 > e0 + 32;
        if (!big)
            for (uint64_t e = e0; e < e1; e++)
                dst[e] = (uint32_t)v;
        unsigned hubs = __ballot_sync(0xffffffffu, big);
        while (hubs) {
            const int j = __ffs(hubs) - 1;
            hubs &= hubs - 1;
            const uint64_t f0 = __shfl_sync(0xffffffffu, e0, j), f1 = __shfl_sync(0xffffffffu, e1, j);
            for (uint64_t e = f0 + lane; e < f1; e += 32)
                dst[e] = (uint32_t)(b + j);
        }
    }
    return !gb_team_any(c, bad);
}

/* Adds x[src[e]] to acc[dst[e]] for every in-edge of the partition (edges
 * [in_off[first], in_off[end]), which only this partition's vertices
 * receive). The block walks the edges in order, GB_PR_EDGES consecutive
 * edges per thread: its src and dst come in 16-byte loads past L1 (a warp's
 * load is 512 contiguous bytes), its GB_PR_EDGES gathers of x are in flight
 * together, and it sums runs of equal dst in a register, adding each run to
 * acc at L2 (one atomic per run and thread, not per edge). Every thread gets
 * the same number of edges however the degrees are spread. The range is
 * widened to 8-edge boundaries (the layout leaves room past in_src and
 * in_dst); edges outside it, and in_dst entries naming a vertex outside the
 * partition (see gb_pr_prepare), are skipped: every atomic lands in the
 * partition's own accumulators.
 * Measured on an H100 (bench_pr_rounds): about 70 G edges/s at scale 22, the
 * same as a warp-per-32-edges version with a segmented scan, with L2
 * eviction hints (streams first out, x last) or without, and with the
 * gathers through L1 (safe: the worker's acquire drops the SM's L1) or past
 * it: the gathers' L2 sector rate, not the instruction count or DRAM, sets
 * the pace. */
#define GB_PR_EDGES 8
static __device__ void gb_pr_pull_edges(const gb_grain_ctx_t *c, const gb_pr_dir_t *d, const float *x,
                                        uint64_t first, uint64_t end)
{
    const uint64_t *in_off = (const uint64_t *)(c->arena + d->off_in_off);
    const uint32_t *src = (const uint32_t *)(c->arena + d->off_in_src);
    const uint32_t *dst = (const uint32_t *)(c->arena + d->off_in_dst);
    float *acc = (float *)(c->arena + d->off_sum);
    const uint64_t p0 = min(GB_LOAD_SHARED(&in_off[first]), d->m), p1 = min(GB_LOAD_SHARED(&in_off[end]), d->m);
    const uint64_t n = d->n;
    const uint32_t lo = (uint32_t)first, count = (uint32_t)(end - first); /* n < 2^32 */
    const uint64_t step = (uint64_t)c->size * GB_PR_EDGES;
    for (uint64_t e0 = (p0 & ~(uint64_t)(GB_PR_EDGES - 1)) + (uint64_t)c->rank * GB_PR_EDGES; e0 < p1; e0 += step) {
        const uint4 s0 = __ldcg((const uint4 *)&src[e0]), s1 = __ldcg((const uint4 *)&src[e0 + 4]);
        const uint4 d0 = __ldcg((const uint4 *)&dst[e0]), d1 = __ldcg((const uint4 *)&dst[e0 + 4]);
        const uint32_t u[GB_PR_EDGES] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        uint32_t r[GB_PR_EDGES] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
        float val[GB_PR_EDGES];
#pragma unroll
        for (int j = 0; j < GB_PR_EDGES; j++) {
            const bool in = e0 + j >= p0 && e0 + j < p1 && r[j] - lo < count;
            r[j] = in ? r[j] : 0xffffffffu;
            val[j] = in ? gb_pr_x(x, u[j], n) : 0.0f;
        }
        uint32_t cur = 0xffffffffu;
        float run = 0.0f;
#pragma unroll
        for (int j = 0; j < GB_PR_EDGES; j++) {
            if (r[j] != cur) {
                if (cur != 0xffffffffu)
                    atomicAdd(&acc[cur], run);
                cur = r[j];
                run = 0.0f;
            }
            run += val[j];
        }
        if (cur != 0xffffffffu)
            atomicAdd(&acc[cur], run);
    }
    gb_team_sync(c); /* every edge added before any vertex reads its sum */
}
#else
static int gb_pr_prepare(const gb_grain_ctx_t *c, const gb_pr_dir_t *d, uint64_t first, uint64_t end)
{
    const uint64_t *in_off = (const uint64_t *)(c->arena + d->off_in_off);
    for (uint64_t v = first; v < end; v++)
        if (in_off[v + 1] < in_off[v])
            return 0;
    return 1;
}
#endif

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
