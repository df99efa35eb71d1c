/* The PageRank grains' wire records and arena layout (the grains are in
 * pagerank.h; the bridge's codec, the tests and bench_pr_rounds build
 * records with the builders here).
 *
 * Jobs. Each run of a driver is a job, with a 32-bit id: the upper half of
 * the grains' keys (key = job << 32 | partition; the codec copies it into
 * every record). The arena starts with a table of jobs (GB_PR_TABLE_BYTES,
 * zeroed when the arena is allocated); GRAPH_INIT gives its job a slice of
 * the arena of its own and every other record works in its job's slice, so
 * that concurrent jobs never see each other's graph or ranks. A slice lives
 * until JOB_END (or a GRAPH_INIT of the same job that needs more room); when
 * the arena has no room left, or GB_PR_MAX_JOBS jobs hold slices, GRAPH_INIT
 * is refused (see gb_pr_err). A partition grain remembers the slice
 * (serial) its PARTITION_INIT was for: a job ended and begun again needs
 * PARTITION_INIT again.
 *
 * The graph and the rank vectors of a job live in its slice (device memory
 * on the GPU), shared by both grain types, laid out by GRAPH_INIT:
 *
 *   gb_pr_dir_t | rank f32[n] | x f32[2n] | sum f64[n] | outdeg u32[n] | in_off u64[n+1]
 *   | in_src u32[m] | in_dst u32[m]
 *
 * 32 bytes a vertex and 8 an edge (gb_pr_layout says exactly). On several
 * devices each device's slice has the vertex arrays whole and its own
 * partitions' edges: m, in_off and in_src number those (pagerank.h).
 * in_off/in_src are the in-edges in CSR form (by target). The GPU aggregator
 * also keeps in_dst (each edge's target, built from in_off at its first START
 * after in_off changed) and sum (per-vertex accumulators, double: a hub's
 * sum of many small contributions loses the tolerance in float), so that a
 * block walks its partition's edges in order, 8 consecutive edges per thread,
 * whatever the degrees.
 *
 * Records (little-endian; slot types; u64 fields 8-aligned; job: the job id):
 *   START (1), both:     u32 iteration, u32 flags, f64 damping, f64 dangling, u32 n, u32 job
 *                        (32 bytes: with its slot's header, the 64 bytes the team kernel's
 *                        reader copies in one round; longer records cost a round trip each)
 *     sender reply:      f64 dangling_sum, f64 rank_sum, u64 nodes, f64 0
 *     aggregator reply:  f64 l1_delta,    f64 rank_sum, u64 nodes, f64 next_dangling
 *     flags: GB_PR_START_RANKS (the client wants the ranks; the grains ignore
 *     it), GB_PR_START_NEXT (aggregator: see pagerank.h; next_dangling is the
 *     dangling rank of its new ranks, 0 without the flag)
 *   GRAPH_INIT (9), sender:      u64 n, u64 m, u32 job, u32 flags (lays out the job's slice; ranks
 *                                1/n; flags GB_PR_INIT_NEW: refuse when the job has a slice already)
 *   PARTITION_INIT (10), both:   u64 first, u64 count, u32 job, u32 0 (sender: its ranks to 1/n)
 *   OUT_DEGREES (11), sender:    u64 first, u32 count, u32 job, u32 deg[count]
 *   IN_OFFSETS (12), aggregator: u64 first, u32 count, u32 job, u64 off[count]
 *   IN_EDGES (13), aggregator:   u64 first_edge, u32 count, u32 job, u32 src[count]
 *   RANK_QUERY (14), aggregator: u64 first, u32 count, u32 job -> u64 first, f32 rank[count]
 *   JOB_END (15), sender:        u64 0, u64 0, u32 job, u32 0 (frees the job's slice)
 * Every reply that succeeds carries the job whose slice it used in the slot
 * header's aux (the driver checks it). Every index is checked against n and
 * m before use, and a partition's in_off must not decrease: a bad record gets
 * GB_SLOT_HANDLER_ERROR with a gb_pr_err in aux, and nothing outside the
 * arrays is touched. */
#ifndef GB_PAGERANK_LAYOUT_H
#define GB_PAGERANK_LAYOUT_H

#include <string.h>

#include "gpubridge/ring.h"
#include "gpubridge/team.h"

enum {
    GB_PR_MSG_START = 1,
    GB_PR_MSG_GRAPH_INIT = 9,
    GB_PR_MSG_PARTITION_INIT = 10,
    GB_PR_MSG_OUT_DEGREES = 11,
    GB_PR_MSG_IN_OFFSETS = 12,
    GB_PR_MSG_IN_EDGES = 13,
    GB_PR_MSG_RANK_QUERY = 14,
    GB_PR_MSG_JOB_END = 15,
};

/* Why a record was refused: the aux of a GB_SLOT_HANDLER_ERROR reply is
 * code | MiB << 8, MiB the arena size a graph needs for the GB_PR_E_ARENA_*
 * codes (the bridge's codec turns it into a sentence). */
enum gb_pr_err {
    GB_PR_E_RECORD = 1,      /* length or fields malformed */
    GB_PR_E_NO_GRAPH = 2,    /* the job has no graph laid out (GRAPH_INIT first) */
    GB_PR_E_RANGE = 3,       /* an index or value past the graph's n or m */
    GB_PR_E_ARENA_SMALL = 4, /* the graph needs more than the whole arena */
    GB_PR_E_ARENA_FULL = 5,  /* the room is held by other jobs */
    GB_PR_E_JOBS_FULL = 6,   /* GB_PR_MAX_JOBS jobs hold slices */
    GB_PR_E_JOB_EXISTS = 7,  /* GRAPH_INIT with GB_PR_INIT_NEW for a job that has a slice */
    GB_PR_E_PARTITION = 8,   /* no PARTITION_INIT for this job's slice, or its range is past n */
    GB_PR_E_NODE_COUNT = 9,  /* START's n is not the GRAPH_INIT's */
    GB_PR_E_OFFSETS = 10,    /* in_off decreases inside the partition, or inside one chunk */
    GB_PR_E_PARAM = 11,      /* damping or dangling rank out of range */
    GB_PR_E_NOT_MINE = 12,   /* several devices: a chunk or query outside the grain's own partition */
};

enum { GB_PR_INIT_NEW = 1u };
#define GB_PR_MAX_JOBS 16
#define GB_PR_TABLE_BYTES 4096u /* the job table's room at the arena's start; slices follow */

enum {
    GB_PR_START_RANKS = 1u,
    GB_PR_START_NEXT = 2u,
};

#define GB_PR_MAGIC 0x70616765726e6b31ull /* "pagernk1" */
#define GB_PR_STATE_SIZE 32
#define GB_PR_START_LEN 32
#define GB_PR_PAIR_LEN 24
#define GB_PR_CHUNK_HDR 16 /* first + count + job */
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
    uint64_t serial;  /* the serial of the job slice its PARTITION_INIT was for; 0: none */
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
    d->off_outdeg = gb_pr_align(d->off_sum + 8 * n);
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
    if (d->magic != GB_PR_MAGIC || d->n == 0 || d->n > 0xffffffffull || d->m > (1ull << 40))
        return 0;
    /* Every offset as n and m lay them out: a directory read while another
     * record rewrote it (or another device's) never sends a write astray. */
    gb_pr_dir_t w;
    gb_pr_layout(&w, d->n, d->m);
    return d->off_rank == w.off_rank && d->off_x == w.off_x && d->off_sum == w.off_sum &&
           d->off_outdeg == w.off_outdeg && d->off_in_off == w.off_in_off && d->off_in_src == w.off_in_src &&
           d->off_in_dst == w.off_in_dst && d->end == w.end && d->end <= c->arena_size;
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

/* ---- the job table ---------------------------------------------------------
 * At the arena's start. An entry is free while serial is 0; it is written
 * under the table's lock (by GRAPH_INIT and JOB_END, one thread of a team)
 * and read without it, seqlock-style: serial, the fields, serial again. */
typedef struct gb_pr_job {
    uint64_t serial; /* 0: free; else unique to this slice among all the arena ever had */
    uint32_t job, _pad;
    uint64_t off, size; /* the slice: arena bytes [off, off + size) */
} gb_pr_job_t;

typedef struct gb_pr_table {
    uint32_t lock, _pad;
    uint64_t serials; /* the last serial handed out */
    uint64_t _pad2[6];
    gb_pr_job_t jobs[GB_PR_MAX_JOBS];
} gb_pr_table_t;

GB_STATIC_ASSERT(sizeof(gb_pr_table_t) <= GB_PR_TABLE_BYTES, "the job table fits its room");

/* The arena of job's slice as a context of its own (every record but
 * GRAPH_INIT and JOB_END runs in it): 1 and *jc, *serial; 0 when the job has
 * no slice. */
GB_HD int gb_pr_job_find(const gb_grain_ctx_t *c, uint32_t job, gb_grain_ctx_t *jc, uint64_t *serial)
{
    if (!c->arena || c->arena_size <= GB_PR_TABLE_BYTES)
        return 0;
    volatile gb_pr_job_t *t = ((volatile gb_pr_table_t *)c->arena)->jobs;
    for (int i = 0; i < GB_PR_MAX_JOBS; i++) {
        const uint64_t s = t[i].serial;
        if (!s || t[i].job != job)
            continue;
        const uint64_t off = t[i].off, size = t[i].size;
#if defined(__CUDA_ARCH__)
        __threadfence();
#else
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
        if (t[i].serial != s || off < GB_PR_TABLE_BYTES || off > c->arena_size || size > c->arena_size - off)
            continue;
        *jc = *c;
        jc->arena = c->arena + off;
        jc->arena_size = size;
        *serial = s;
        return 1;
    }
    return 0;
}

GB_HD void gb_pr_table_lock(gb_pr_table_t *t)
{
#if defined(__CUDA_ARCH__)
    while (atomicCAS(&t->lock, 0u, 1u) != 0u)
        ;
    __threadfence();
#else
    uint32_t want = 0;
    while (!__atomic_compare_exchange_n(&t->lock, &want, 1u, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        want = 0;
#endif
}

GB_HD void gb_pr_table_unlock(gb_pr_table_t *t)
{
#if defined(__CUDA_ARCH__)
    __threadfence();
    atomicExch(&t->lock, 0u);
#else
    __atomic_store_n(&t->lock, 0u, __ATOMIC_RELEASE);
#endif
}

/* Frees entry i (under the lock). */
GB_HD void gb_pr_job_free(volatile gb_pr_table_t *t, int i)
{
    t->jobs[i].serial = 0;
}

/* An offset for need bytes that no other slice overlaps, or 0 (under the
 * lock). Candidates: the table's end and every slice's end; the lowest fits. */
GB_HD uint64_t gb_pr_job_place(const volatile gb_pr_table_t *t, uint64_t arena_size, uint64_t need)
{
    uint64_t best = 0;
    for (int k = -1; k < GB_PR_MAX_JOBS; k++) {
        uint64_t at = GB_PR_TABLE_BYTES;
        if (k >= 0) {
            if (!t->jobs[k].serial)
                continue;
            at = gb_pr_align(t->jobs[k].off + t->jobs[k].size);
        }
        if (at > arena_size || need > arena_size - at || (best && at >= best))
            continue;
        int clash = 0;
        for (int i = 0; i < GB_PR_MAX_JOBS && !clash; i++)
            clash = t->jobs[i].serial && t->jobs[i].off < at + need && at < t->jobs[i].off + t->jobs[i].size;
        if (!clash)
            best = at;
    }
    return best;
}

/* Volatile under the lock too: entries other SMs wrote must not come from
 * this SM's L1. */

/* GRAPH_INIT's claim (one thread): job's slice of at least need bytes. The
 * slice the job has is kept when it is large enough (and flags has no
 * GB_PR_INIT_NEW); else a new one is placed. Returns 0, with *fresh set when
 * the slice is new, or a gb_pr_err. */
GB_HD uint32_t gb_pr_job_claim(const gb_grain_ctx_t *c, uint32_t job, uint32_t flags, uint64_t need, int *fresh)
{
    volatile gb_pr_table_t *t = (volatile gb_pr_table_t *)c->arena;
    uint32_t err = 0;
    *fresh = 0;
    if (c->arena_size <= GB_PR_TABLE_BYTES)
        return GB_PR_E_ARENA_SMALL;
    gb_pr_table_lock((gb_pr_table_t *)c->arena);
    int have = -1, free_slot = -1;
    for (int i = 0; i < GB_PR_MAX_JOBS; i++) {
        if (t->jobs[i].serial && t->jobs[i].job == job)
            have = i;
        else if (!t->jobs[i].serial && free_slot < 0)
            free_slot = i;
    }
    if (have >= 0 && (flags & GB_PR_INIT_NEW)) {
        err = GB_PR_E_JOB_EXISTS; /* before any size: a driver that drew a job id in use learns it */
    } else if (need > c->arena_size - GB_PR_TABLE_BYTES) {
        err = GB_PR_E_ARENA_SMALL;
    } else if (have < 0 || t->jobs[have].size < need) {
        if (have >= 0) { /* too small: give it up, take a larger one */
            gb_pr_job_free(t, have);
            free_slot = have;
        }
        const uint64_t at = free_slot < 0 ? 0 : gb_pr_job_place(t, c->arena_size, need);
        if (free_slot < 0) {
            err = GB_PR_E_JOBS_FULL;
        } else if (!at) {
            err = GB_PR_E_ARENA_FULL;
        } else {
            volatile gb_pr_job_t *e = &t->jobs[free_slot];
            e->job = job;
            e->off = at;
            e->size = need;
#if defined(__CUDA_ARCH__)
            __threadfence();
#else
            __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
            t->serials = t->serials + 1;
            e->serial = t->serials;
            *fresh = 1;
        }
    }
    gb_pr_table_unlock((gb_pr_table_t *)c->arena);
    return err;
}

/* JOB_END (one thread): frees job's slice, if it has one. */
GB_HD void gb_pr_job_end(const gb_grain_ctx_t *c, uint32_t job)
{
    volatile gb_pr_table_t *t = (volatile gb_pr_table_t *)c->arena;
    gb_pr_table_lock((gb_pr_table_t *)c->arena);
    for (int i = 0; i < GB_PR_MAX_JOBS; i++)
        if (t->jobs[i].serial && t->jobs[i].job == job)
            gb_pr_job_free(t, i);
    gb_pr_table_unlock((gb_pr_table_t *)c->arena);
}

GB_HD uint64_t gb_pr_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
GB_HD uint32_t gb_pr_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
GB_HD double gb_pr_f64(const unsigned char *p) { double v; memcpy(&v, p, 8); return v; }

/* Record builders (the bridge's codec, and the tests and bench_pr_rounds,
 * which talk to the grains without it). Each returns the record's length. */
GB_HD uint32_t gb_pr_rec_pair(unsigned char *rec, uint64_t a, uint64_t b)
{
    memset(rec + 16, 0, 8); /* job 0, no flags */
    memcpy(rec, &a, 8);
    memcpy(rec + 8, &b, 8);
    return GB_PR_PAIR_LEN;
}

/* Where a record of slot type `type` holds its job id (bytes from its start). */
GB_HD uint32_t gb_pr_job_at(uint16_t type)
{
    return type == GB_PR_MSG_START ? 28u : type == GB_PR_MSG_GRAPH_INIT || type == GB_PR_MSG_PARTITION_INIT ||
                                                   type == GB_PR_MSG_JOB_END ? 16u : 12u;
}

/* Puts job into a record the builders here wrote (their job is 0). */
GB_HD void gb_pr_rec_set_job(unsigned char *rec, uint16_t type, uint32_t job)
{
    memcpy(rec + gb_pr_job_at(type), &job, 4);
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
                               uint32_t n)
{
    memcpy(rec, &it, 4);
    memcpy(rec + 4, &flags, 4);
    memcpy(rec + 8, &damping, 8);
    memcpy(rec + 16, &dangling, 8);
    memcpy(rec + 24, &n, 4);
    memset(rec + 28, 0, 4);
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
