/* PageRank's pull: the sum of the contributions over a vertex's in-edges.
 * On the CPU one vertex at a time (gb_pr_pull); on the GPU a block walks its
 * partition's edges in order (gb_pr_pull_edges), after gb_pr_prepare built
 * each edge's target (in_dst). Used by the aggregator (pagerank.h). */
#ifndef GB_PAGERANK_PULL_H
#define GB_PAGERANK_PULL_H

#include "pagerank_layout.h"

/* x[u], or 0 for an edge whose source was never loaded (in_src is not
 * cleared when a graph is laid out, so it may hold anything). */
GB_HD float gb_pr_x(const float *x, uint32_t u, uint64_t n) { return u < n ? GB_LOAD_SHARED(&x[u]) : 0.0f; }

/* Sum of x over the in-edges [e0, e1) of one vertex (the CPU's pull), in
 * double; four independent gathers in flight. */
GB_HD double gb_pr_pull(const float *x, const uint32_t *src, uint64_t n, uint64_t e0, uint64_t e1)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
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

/* Adds x[src[e]] to acc[dst[e]] (double) for every in-edge of the partition (edges
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
 * The sums are double: a hub's float sum of many small contributions loses
 * the tolerance.
 * L2's rate for random 4-byte gathers sets the pace (docs/performance.md),
 * not the instruction count or DRAM, so the loop stays a plain one: a warp
 * per 32 edges with a segmented scan or gathers through L1 leave that rate
 * as it is. The edge arrays are read once a round and stream through L2
 * evict-first (__ldcs), so that x and the sums, which the gathers and
 * atomics hit again and again, keep their place there once the graph
 * outgrows L2. */
#define GB_PR_EDGES 8
static __device__ void gb_pr_pull_edges(const gb_grain_ctx_t *c, const gb_pr_dir_t *d, const float *x,
                                        uint64_t first, uint64_t end)
{
    const uint64_t *in_off = (const uint64_t *)(c->arena + d->off_in_off);
    const uint32_t *src = (const uint32_t *)(c->arena + d->off_in_src);
    const uint32_t *dst = (const uint32_t *)(c->arena + d->off_in_dst);
    double *acc = (double *)(c->arena + d->off_sum);
    const uint64_t p0 = min(GB_LOAD_SHARED(&in_off[first]), d->m), p1 = min(GB_LOAD_SHARED(&in_off[end]), d->m);
    const uint64_t n = d->n;
    const uint32_t lo = (uint32_t)first, count = (uint32_t)(end - first); /* n < 2^32 */
    const uint64_t step = (uint64_t)c->size * GB_PR_EDGES;
    for (uint64_t e0 = (p0 & ~(uint64_t)(GB_PR_EDGES - 1)) + (uint64_t)c->rank * GB_PR_EDGES; e0 < p1; e0 += step) {
        const uint4 s0 = __ldcs((const uint4 *)&src[e0]), s1 = __ldcs((const uint4 *)&src[e0 + 4]);
        const uint4 d0 = __ldcs((const uint4 *)&dst[e0]), d1 = __ldcs((const uint4 *)&dst[e0 + 4]);
        const uint32_t u[GB_PR_EDGES] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        uint32_t r[GB_PR_EDGES] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
        double val[GB_PR_EDGES];
#pragma unroll
        for (int j = 0; j < GB_PR_EDGES; j++) {
            const bool in = e0 + j >= p0 && e0 + j < p1 && r[j] - lo < count;
            r[j] = in ? r[j] : 0xffffffffu;
            val[j] = in ? (double)gb_pr_x(x, u[j], n) : 0.0;
        }
        uint32_t cur = 0xffffffffu;
        double run = 0.0;
#pragma unroll
        for (int j = 0; j < GB_PR_EDGES; j++) {
            if (r[j] != cur) {
                if (cur != 0xffffffffu)
                    atomicAdd(&acc[cur], run);
                cur = r[j];
                run = 0.0;
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

#endif
