/* The PageRank grains' wire records and arena layout (the grains are in
 * pagerank.h; the bridge's codec, the tests and bench_pr_rounds build
 * records with the builders here).
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
 * whatever the degrees.
 *
 * Records (little-endian; slot types; u64 fields 8-aligned):
 *   START (1), both:     u32 iteration, u32 flags, f64 damping, f64 dangling, u64 n
 *     sender reply:      f64 dangling_sum, f64 rank_sum, u64 nodes, f64 0
 *     aggregator reply:  f64 l1_delta,    f64 rank_sum, u64 nodes, f64 next_dangling
 *     flags: GB_PR_START_RANKS (the client wants the ranks; the grains ignore
 *     it), GB_PR_START_NEXT (aggregator: see pagerank.h; next_dangling is the
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
#ifndef GB_PAGERANK_LAYOUT_H
#define GB_PAGERANK_LAYOUT_H

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
#if defined(__CUDA_ARCH__)
        o[i] = s[i];
#else
        o[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE); /* host: gen moves by atomic add */
#endif
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

/* A START reply (GB_PR_REPLY_LEN bytes) as gb_pr_reply wrote it: a is the
 * aggregator's L1 delta or the sender's dangling rank. */
typedef struct gb_pr_result {
    double a, rank_sum, next_dangling;
    uint64_t nodes;
} gb_pr_result_t;

GB_HD gb_pr_result_t gb_pr_reply_read(const unsigned char *rec)
{
    gb_pr_result_t r;
    memcpy(&r.a, rec, 8);
    memcpy(&r.rank_sum, rec + 8, 8);
    memcpy(&r.nodes, rec + 16, 8);
    memcpy(&r.next_dangling, rec + 24, 8);
    return r;
}

#endif
