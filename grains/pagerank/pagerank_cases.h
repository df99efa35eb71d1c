/* PageRank grain cases shared by every backend: test_pagerank.c runs them on
 * the cpu backend (CI), test_gpu_pagerank.c on the team kernel in persistent
 * and relaunch modes and with the fallback placement. They drive
 * pagerank.sender / pagerank.aggregator through the runtime (records, no
 * ZeroMQ) and compare the ranks with a double-precision power iteration done
 * here, the networkx recurrence. The including file sets g_mode etc. */
#ifndef GB_TEST_PAGERANK_CASES_H
#define GB_TEST_PAGERANK_CASES_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph.h"
#include "builtin.h"
#include "rk_wait.h"
#include "runtime.h"

static gb_mode g_mode = GB_MODE_CPU;
static uint32_t g_job = 0; /* the job pr_send / pr_call address: key and records (pagerank_layout.h) */
static int g_force_fallback = 0;
static uint32_t g_lanes = 0;

typedef struct prfx {
    unsigned char *arena;
    gb_rk_t *snd, *agg;
    uint64_t corr;
} prfx_t;

#define PR_ARENA (64u << 20)
#define PR_SLOT 4096u

static gb_rk_t *pr_start(const char *type, unsigned char *arena)
{
    gb_rk_params_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    p.mode = g_mode;
    snprintf(p.grain.type, sizeof p.grain.type, "%s", type);
    p.grain.queue_capacity = 64; /* small: wraps many times, and fills (backpressure) */
    p.grain.slot_size = PR_SLOT;
    p.grain.messages_per_iteration = 256;
    p.grain.max_grains = 1024;
    p.grain.cpu_threads = g_lanes;
    p.idle_spin_polls = 256;
    p.idle_backoff_max_ns = 20000;
    p.heartbeat_deadline_ms = 2000;
    p.max_messages_per_launch = 16; /* relaunch: several launches per round */
    p.force_fallback_placement = g_force_fallback;
    p.arena = arena;
    p.arena_size = PR_ARENA;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    return rk;
}

static int pr_setup(void **state)
{
    prfx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(gb_arena_new(g_mode, 0, PR_ARENA, &f->arena), GB_OK);
    f->snd = pr_start("pagerank.sender", f->arena);
    f->agg = pr_start("pagerank.aggregator", f->arena);
    *state = f;
    return 0;
}

static int pr_teardown(void **state)
{
    prfx_t *f = *state;
    gb_rk_destroy(&f->snd);
    gb_rk_destroy(&f->agg);
    gb_arena_free(g_mode, f->arena);
    free(f);
    return 0;
}

/* Pipelined requests: sends, taking replies (in order) whenever the ring is
 * full. Each reply's status is checked against want; payloads go to sink. */
typedef struct pr_batch {
    gb_rk_t *rk;
    uint64_t sent, got;
    uint16_t want;
    void (*sink)(const gb_reply_t *r, const unsigned char *pl, void *ctx);
    void *ctx;
} pr_batch_t;

static void pr_take(pr_batch_t *b)
{
    static unsigned char buf[PR_SLOT];
    gb_reply_t r;
    recv_one(b->rk, &r, buf, sizeof buf, 20000);
    assert_int_equal(r.corr, b->got);
    if (r.status != b->want)
        fail_msg("reply %llu: status %u (aux %#x), want %u", (unsigned long long)r.corr, r.status, r.aux, b->want);
    if (r.status == GB_SLOT_OK)
        assert_int_equal(r.aux, g_job); /* the job whose slice answered */
    if (b->sink)
        b->sink(&r, buf, b->ctx);
    b->got++;
}

/* Key and record of g_job (the record is the caller's, written by a builder). */
static uint64_t job_key(uint64_t key, uint16_t type, const void *rec, uint32_t len)
{
    if (len >= gb_pr_job_at(type) + 4 && type != 999)
        gb_pr_rec_set_job((unsigned char *)rec, type, g_job);
    return (uint64_t)g_job << 32 | key;
}

static void pr_send(pr_batch_t *b, uint64_t key, uint16_t type, const void *rec, uint32_t len)
{
    gb_err e;
    key = job_key(key, type, rec, len);
    while ((e = gb_rk_send(b->rk, key, b->sent, type, rec, len)) == GB_ERR_FULL)
        pr_take(b);
    assert_int_equal(e, GB_OK);
    b->sent++;
}

static void pr_finish(pr_batch_t *b)
{
    while (b->got < b->sent)
        pr_take(b);
}

/* The last pr_call's reply aux: the job on success, a gb_pr_err (| MiB << 8)
 * on GB_SLOT_HANDLER_ERROR. */
static uint32_t g_aux;

/* One request, one reply: returns its status. */
static uint16_t pr_call(gb_rk_t *rk, uint64_t key, uint16_t type, const void *rec, uint32_t len,
                        unsigned char *out, uint32_t *out_len)
{
    static uint64_t corr = 1u << 30;
    static unsigned char buf[PR_SLOT];
    key = job_key(key, type, rec, len);
    assert_int_equal(gb_rk_send(rk, key, ++corr, type, rec, len), GB_OK);
    gb_reply_t r;
    recv_one(rk, &r, buf, sizeof buf, 20000);
    assert_int_equal(r.corr, corr);
    g_aux = r.aux;
    if (out)
        memcpy(out, buf, r.len);
    if (out_len)
        *out_len = r.len;
    return r.status;
}

/* Queries vertices 0..7 (test_pr_bad_input's graph of 8): all must still be
 * 1/8. Returns the reply's length. */
static uint32_t ranks_of_8(prfx_t *f)
{
    unsigned char rec[64], out[PR_SLOT];
    uint32_t len = 0;
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_RANK_QUERY, rec, gb_pr_rec_chunk(rec, 0, 8, NULL, 0), out, &len),
                     GB_SLOT_OK);
    for (int i = 0; i < 8; i++) {
        float r;
        memcpy(&r, out + 8 + 4 * i, 4);
        assert_true(r == 0.125f);
    }
    return len;
}

/* Bad records get error replies, nothing is written out of bounds, and the
 * grains keep serving (the ranks case runs on the same fixture afterwards). */
static void test_pr_bad_input(void **state)
{
    prfx_t *f = *state;
    unsigned char rec[PR_SLOT];
    /* Before any graph: everything but GRAPH_INIT is refused. */
    assert_int_equal(pr_call(f->agg, 0, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 8), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_NO_GRAPH);
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_PARTITION_INIT, rec, gb_pr_rec_pair(rec, 0, 4), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(pr_call(f->agg, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 8, 10), NULL, NULL),
                     GB_SLOT_UNKNOWN_MESSAGE_TYPE);
    assert_int_equal(pr_call(f->snd, 0, 999, rec, 0, NULL, NULL), GB_SLOT_UNKNOWN_MESSAGE_TYPE);
    /* A graph that does not fit the arena: the reply says how much it needs. */
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 100000000, 10), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    gb_pr_dir_t big;
    assert_int_equal(g_aux, GB_PR_E_ARENA_SMALL |
                                ((gb_pr_layout(&big, 100000000, 10) + GB_PR_TABLE_BYTES + (1u << 20) - 1) >> 20) << 8);
    /* A record that lies about its length. */
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 8, 10) - 1, NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_RECORD);
    /* A large graph laid out first: its ranks (1/n, far above any vertex
     * number as bits) stay where the small graph's in_src goes, never loaded
     * below. */
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 100000, 16), NULL, NULL),
                     GB_SLOT_OK);
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 8, 10), NULL, NULL), GB_SLOT_OK);
    /* Ranges past n (or m), values past n (or m), lengths that lie. */
    assert_int_equal(pr_call(f->snd, 1, GB_PR_MSG_PARTITION_INIT, rec, gb_pr_rec_pair(rec, 5, 4), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    uint32_t srcs[3] = {1, 8, 2};
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_EDGES, rec, gb_pr_rec_chunk(rec, 0, 3, srcs, 4), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_RANGE);
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_EDGES, rec, gb_pr_rec_chunk(rec, 8, 3, srcs, 4), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    uint64_t offs[2] = {0, 11};
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, 0, 2, offs, 8), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    uint32_t degs[2] = {1, 2};
    assert_int_equal(pr_call(f->snd, 1, GB_PR_MSG_OUT_DEGREES, rec, gb_pr_rec_chunk(rec, 0, 2, degs, 4) - 1, NULL,
                             NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_RANK_QUERY, rec, gb_pr_rec_chunk(rec, 6, 3, NULL, 0), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    /* START on a partition that was never initialised, and with a wrong n. */
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 8), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_PARTITION);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_PARTITION_INIT, rec, gb_pr_rec_pair(rec, 0, 8), NULL, NULL),
                     GB_SLOT_OK);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 9), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_NODE_COUNT);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 1.5, 0, 8), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    /* A valid query: all ranks still 1/n. */
    assert_int_equal(ranks_of_8(f), 8 + 8 * 4);
    /* in_off that decreases across two chunks, each in order: START refuses
     * it before updating anything, and serves again once the offsets are
     * good (in_src was never loaded: whatever it holds must not be read out
     * of bounds). */
    const uint64_t head[3] = {0, 4, 4}, tail_bad[6] = {2, 6, 7, 8, 9, 10}, tail_good[6] = {6, 6, 7, 8, 9, 10};
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, 0, 3, head, 8), NULL, NULL),
                     GB_SLOT_OK);
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, 3, 6, tail_bad, 8), NULL,
                             NULL),
                     GB_SLOT_OK);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 8), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_OFFSETS);
    ranks_of_8(f);
    /* A refused chunk writes none of it: its first offset alone would have
     * mended the order. */
    const uint64_t mend_past[2] = {6, 11}, mend_decreasing[6] = {6, 6, 7, 8, 9, 5};
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, 3, 2, mend_past, 8), NULL,
                             NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_RANGE);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 8), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_OFFSETS);
    /* Offsets that decrease inside one chunk: refused as it comes. */
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, 3, 6, mend_decreasing, 8),
                             NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_OFFSETS);
    ranks_of_8(f);
    assert_int_equal(pr_call(f->agg, 1, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, 3, 6, tail_good, 8), NULL,
                             NULL),
                     GB_SLOT_OK);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 8), NULL, NULL),
                     GB_SLOT_OK);
    /* A smaller graph laid out over it: partition 2 still says [0, 8). */
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 4, 2), NULL, NULL), GB_SLOT_OK);
    assert_int_equal(pr_call(f->agg, 2, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 4), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
}

/* ---- a full run against a double-precision reference ---------------------- */

typedef struct pr_sums {
    double a, sum, next; /* next: the 4th reply field, an aggregator's next dangling rank */
} pr_sums_t;

static void sum_sink(const gb_reply_t *r, const unsigned char *pl, void *ctx)
{
    pr_sums_t *s = ctx;
    assert_int_equal(r->len, GB_PR_REPLY_LEN);
    const gb_pr_result_t res = gb_pr_reply_read(pl);
    s->a += res.a;
    s->sum += res.rank_sum;
    s->next += res.next_dangling;
}

typedef struct rank_sink_ctx {
    float *ranks;
    uint32_t n;
} rank_sink_ctx_t;

static void rank_sink(const gb_reply_t *r, const unsigned char *pl, void *ctx)
{
    rank_sink_ctx_t *c = ctx;
    uint64_t first;
    assert_true(r->len >= 8);
    memcpy(&first, pl, 8);
    uint32_t cnt = (r->len - 8) / 4;
    assert_true(first + cnt <= c->n);
    memcpy(c->ranks + first, pl + 8, (size_t)cnt * 4);
}

/* networkx's recurrence in double precision, `iters` iterations; iters < 0:
 * until it no longer moves (L1 step below 1e-15). */
static double *reference(const gb_pull_t *g, double d, int iters)
{
    const uint32_t n = g->n;
    double *r = malloc(n * sizeof *r), *x = malloc(n * sizeof *x);
    assert_true(r && x);
    for (uint32_t v = 0; v < n; v++)
        r[v] = 1.0 / n;
    double step = 1;
    for (int it = 0; iters < 0 ? step > 1e-13 && it < 1000 : it < iters; it++) { /* error <= 5.7 x step */
        double dangling = 0;
        step = 0;
        for (uint32_t v = 0; v < n; v++) {
            x[v] = g->outdeg[v] ? r[v] / g->outdeg[v] : 0;
            if (!g->outdeg[v])
                dangling += r[v];
        }
        for (uint32_t v = 0; v < n; v++) {
            double s = 0;
            for (uint64_t e = g->in_off[v]; e < g->in_off[v + 1]; e++)
                s += x[g->in_src[e]];
            const double nr = (1 - d) / n + d * (s + dangling / n);
            step += fabs(nr - r[v]);
            r[v] = nr;
        }
    }
    free(x);
    return r;
}

enum {
    RG_NO_GRAPH_INIT = 1,     /* the arena is laid out for g's n and m already (ranks are not reset) */
    RG_NO_PARTITION_INIT = 2, /* the partitions are set up for g's n already */
    RG_STAGGER = 4,           /* see run_graph */
    RG_NEXT = 8,              /* see run_graph */
    RG_NO_LOAD = 16,          /* the job has g loaded and partitioned already: iterate only */
    RG_CONVERGE = 32,         /* see run_graph */
};

/* The driver's stopping rule (examples/pagerank): the L1 step below the
 * tolerance. */
#define PR_TOL 1e-6
static int pr_converged(double l1_step) { return l1_step < PR_TOL; }

/* Loads g into parts partitions (equal vertex ranges), runs iters iterations,
 * compares the ranks with the reference.
 * RG_STAGGER: as the example driver may, each partition's sender for the next
 * iteration runs right after that partition's aggregator, before the other
 * aggregators of the iteration run (one request at a time, so the order is
 * exactly that).
 * RG_NEXT: no senders' round after the first; the aggregators' STARTs carry
 * GB_PR_START_NEXT and their replies the next iteration's dangling rank. With
 * RG_STAGGER too, iterations alternate between the two ways.
 * RG_CONVERGE: iters is the most; it stops by the driver's rule
 * (pr_converged), which must be met, and the ranks must be within PR_TOL
 * (L1) of the exact PageRank (the reference run until it no longer moves):
 * float32 sums of a vertex's in-edges met neither.
 * Every request goes to job g_job. */
static void run_graph(prfx_t *f, const gb_pull_t *g, uint32_t parts, int iters, int flags)
{
    const uint32_t n = g->n, chunk = (PR_SLOT - 32 - 16) / 8;
    unsigned char rec[PR_SLOT];
    if (flags & RG_NO_LOAD)
        flags |= RG_NO_GRAPH_INIT | RG_NO_PARTITION_INIT;
    if (!(flags & RG_NO_GRAPH_INIT))
        assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, n, g->m), NULL, NULL),
                         GB_SLOT_OK);
    pr_batch_t bs = {f->snd, 0, 0, GB_SLOT_OK, NULL, NULL}, ba = {f->agg, 0, 0, GB_SLOT_OK, NULL, NULL};
    /* correlation ids restart per batch: pr_take checks them in order */
    uint64_t *first = malloc((parts + 1) * sizeof *first);
    for (uint32_t q = 0; q <= parts; q++)
        first[q] = (uint64_t)n * q / parts;
    for (uint32_t q = 0; q < parts && !(flags & RG_NO_LOAD); q++) {
        if (!(flags & RG_NO_PARTITION_INIT)) {
            pr_send(&bs, q, GB_PR_MSG_PARTITION_INIT, rec, gb_pr_rec_pair(rec, first[q], first[q + 1] - first[q]));
            pr_send(&ba, q, GB_PR_MSG_PARTITION_INIT, rec, gb_pr_rec_pair(rec, first[q], first[q + 1] - first[q]));
        }
        for (uint64_t v = first[q]; v < first[q + 1]; v += chunk) {
            uint32_t c = (uint32_t)(first[q + 1] - v < chunk ? first[q + 1] - v : chunk);
            pr_send(&bs, q, GB_PR_MSG_OUT_DEGREES, rec, gb_pr_rec_chunk(rec, v, c, g->outdeg + v, 4));
        }
        uint64_t oend = q + 1 == parts ? (uint64_t)n + 1 : first[q + 1];
        for (uint64_t v = first[q]; v < oend; v += chunk) {
            uint32_t c = (uint32_t)(oend - v < chunk ? oend - v : chunk);
            pr_send(&ba, q, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, v, c, g->in_off + v, 8));
        }
        for (uint64_t e = g->in_off[first[q]]; e < g->in_off[first[q + 1]]; e += chunk) {
            uint64_t e1 = g->in_off[first[q + 1]];
            uint32_t c = (uint32_t)(e1 - e < chunk ? e1 - e : chunk);
            pr_send(&ba, q, GB_PR_MSG_IN_EDGES, rec, gb_pr_rec_chunk(rec, e, c, g->in_src + e, 4));
        }
    }
    pr_finish(&bs);
    pr_finish(&ba);

    double *ref = reference(g, 0.85, flags & RG_CONVERGE ? -1 : iters);
    int converged = 0;
    pr_sums_t ss = {0, 0, 0};
    pr_batch_t b1 = {f->snd, bs.sent, bs.sent, GB_SLOT_OK, sum_sink, &ss};
    for (uint32_t q = 0; q < parts; q++)
        pr_send(&b1, q, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, n));
    pr_finish(&b1);
    assert_true(ss.next == 0.0); /* senders never fill the 4th field */
    for (int it = 0; it < iters && !converged; it++) {
        assert_true(fabs(ss.sum - 1.0) < 1e-4); /* ranks sum to 1 */
        pr_sums_t sa = {0, 0, 0}, sn = {0, 0, 0};
        /* fused: this iteration's aggregators write the next contributions */
        const int fused = (flags & RG_NEXT) && (!(flags & RG_STAGGER) || it % 2 == 0);
        const int next = it + 1 < iters && !fused;
        const uint32_t sf = fused && it + 1 < iters ? GB_PR_START_NEXT : 0;
        pr_batch_t b2 = {f->agg, ba.sent, ba.sent, GB_SLOT_OK, sum_sink, &sa};
        b1 = (pr_batch_t){f->snd, b1.sent, b1.sent, GB_SLOT_OK, sum_sink, &sn};
        for (uint32_t q = 0; q < parts; q++) {
            pr_send(&b2, q, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, (uint32_t)it, sf, 0.85, ss.a, n));
            if (flags & RG_STAGGER) {
                pr_finish(&b2);
                if (next) {
                    pr_send(&b1, q, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, (uint32_t)it + 1, 0, 0.85, 0, n));
                    pr_finish(&b1);
                }
            }
        }
        pr_finish(&b2);
        for (uint32_t q = 0; next && !(flags & RG_STAGGER) && q < parts; q++)
            pr_send(&b1, q, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, (uint32_t)it + 1, 0, 0.85, 0, n));
        pr_finish(&b1);
        assert_true(fabs(sa.sum - 1.0) < 1e-4);
        if (!sf)
            assert_true(sa.next == 0.0);
        ba.sent = ba.got = b2.sent;
        ss = sf ? (pr_sums_t){sa.next, sa.sum, 0} : sn;
        converged = (flags & RG_CONVERGE) && pr_converged(sa.a);
        if (getenv("PR_TRACE"))
            printf("iteration %d: L1 step %.3e\n", it + 1, sa.a);
        if (converged)
            printf("converged after %d iterations: L1 step %.3e\n", it + 1, sa.a);
    }
    if (flags & RG_CONVERGE)
        assert_true(converged);
    float *ranks = calloc(n, sizeof *ranks);
    rank_sink_ctx_t rc = {ranks, n};
    pr_batch_t bq = {f->agg, ba.sent, ba.sent, GB_SLOT_OK, rank_sink, &rc};
    const uint32_t qchunk = (PR_SLOT - 32 - 8) / 4;
    for (uint32_t v = 0; v < n; v += qchunk)
        pr_send(&bq, v / 97 % parts, GB_PR_MSG_RANK_QUERY, rec,
                gb_pr_rec_chunk(rec, v, n - v < qchunk ? n - v : qchunk, NULL, 0));
    pr_finish(&bq);
    double l1 = 0;
    for (uint32_t v = 0; v < n; v++)
        l1 += fabs(ranks[v] - ref[v]);
    printf("pagerank %u vertices, %llu edges, %u partitions, %d iterations: L1 to reference %.3e (%.2f s)\n", n,
           (unsigned long long)g->m, parts, iters, l1, (double)clock() / CLOCKS_PER_SEC);
    assert_true(l1 < (flags & RG_CONVERGE ? PR_TOL : 1e-5));
    if (8 + 4ull * n > PR_SLOT - 32) {
        /* Every rank in one query: the reply is larger than a slot, so the
         * request goes out of line with room for it (large_payload.h). */
        unsigned char *all = malloc(8 + 4ull * n);
        assert_non_null(all);
        assert_int_equal(gb_rk_send(f->agg, 0, 777, GB_PR_MSG_RANK_QUERY, rec, gb_pr_rec_chunk(rec, 0, n, NULL, 0)),
                         GB_OK);
        gb_reply_t r;
        recv_one(f->agg, &r, all, 8 + 4 * n, 20000);
        assert_int_equal(r.corr, 777);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_int_equal(r.len, 8 + 4 * n);
        assert_memory_equal(all + 8, ranks, 4ull * n);
        free(all);
    }
    free(ranks);
    free(ref);
    free(first);
}

static void test_pr_small_graph(void **state)
{
    /* dangling vertices (5, 6, 7), self-loops (2, 4), duplicate edges (1 2) */
    const char text[] = "1 2\n1 2\n2 2\n3 1\n3 2\n2 1\n4 4\n4 1\n5 1\n6 7\n1 3\n";
    gb_graph_t *g = NULL;
    char err[256];
    assert_int_equal(gb_graph_parse_snap(text, sizeof text - 1, "small", &g, err, sizeof err), 0);
    gb_pull_t p;
    assert_int_equal(gb_graph_pull(g, &p), 0);
    run_graph(*state, &p, 3, 40, 0);
    /* again, the aggregators writing the next contributions; then the two
     * ways alternating */
    run_graph(*state, &p, 3, 40, RG_NEXT);
    run_graph(*state, &p, 3, 41, RG_NEXT | RG_STAGGER);
    gb_pull_free(&p);
    gb_graph_destroy(&g);
    /* The same vertices and edge count, every edge reversed, loaded over it
     * with IN_OFFSETS and IN_EDGES only (no GRAPH_INIT, no PARTITION_INIT):
     * the new offsets alone must make the grains drop what they derived from
     * the old ones. The ranks start from the old graph's, so more iterations. */
    const char rev[] = "2 1\n2 1\n2 2\n1 3\n2 3\n1 2\n4 4\n1 4\n1 5\n7 6\n3 1\n";
    assert_int_equal(gb_graph_parse_snap(rev, sizeof rev - 1, "reversed", &g, err, sizeof err), 0);
    assert_int_equal(gb_graph_pull(g, &p), 0);
    assert_int_equal(p.n, 7);
    assert_int_equal(p.m, 10);
    run_graph(*state, &p, 3, 120, RG_NO_GRAPH_INIT | RG_NO_PARTITION_INIT);
    gb_pull_free(&p);
    gb_graph_destroy(&g);
    /* Two graphs of 256 vertices, one after the other into the same
     * partitions (no PARTITION_INIT for the second): what the grains derived
     * from the first graph's offsets (the GPU's edge targets) must not be
     * reused. */
    for (int seed = 3; seed <= 4; seed++) {
        assert_int_equal(gb_graph_kronecker(8, 8, (uint64_t)seed, &g, err, sizeof err), 0);
        assert_int_equal(gb_graph_pull(g, &p), 0);
        run_graph(*state, &p, 3, 30, seed == 3 ? 0 : RG_NO_PARTITION_INIT | RG_STAGGER);
        gb_pull_free(&p);
        gb_graph_destroy(&g);
    }
}

static void test_pr_kronecker(void **state)
{
    gb_graph_t *g = NULL;
    char err[256];
    assert_int_equal(gb_graph_kronecker(12, 8, 5, &g, err, sizeof err), 0);
    gb_pull_t p;
    assert_int_equal(gb_graph_pull(g, &p), 0);
    /* more partitions than a GPU has SMs: several grains per block */
    run_graph(*state, &p, 300, 20, 0);
    run_graph(*state, &p, 300, 20, RG_NEXT);
    gb_pull_free(&p);
    gb_graph_destroy(&g);
}

/* Jobs: each has its own slice of the arena, so two drivers' graphs live side
 * by side (pagerank_layout.h). Job 7 is loaded and run, job 9 (another graph,
 * other sizes) is loaded and run, job 7 runs on from where it was: its graph
 * and ranks are untouched. The arena's refusals name their reason. */
static void test_pr_jobs(void **state)
{
    prfx_t *f = *state;
    unsigned char rec[PR_SLOT];
    gb_graph_t *ga = NULL, *gb = NULL;
    char err[256];
    const char text[] = "1 2\n1 2\n2 2\n3 1\n3 2\n2 1\n4 4\n4 1\n5 1\n6 7\n1 3\n";
    assert_int_equal(gb_graph_kronecker(8, 8, 3, &ga, err, sizeof err), 0);
    assert_int_equal(gb_graph_parse_snap(text, sizeof text - 1, "small", &gb, err, sizeof err), 0);
    gb_pull_t a, b;
    assert_int_equal(gb_graph_pull(ga, &a), 0);
    assert_int_equal(gb_graph_pull(gb, &b), 0);
    g_job = 7;
    run_graph(f, &a, 3, 100, 0);
    g_job = 9;
    run_graph(f, &b, 2, 100, RG_NEXT);
    g_job = 7;
    run_graph(f, &a, 3, 100, RG_NO_LOAD); /* from its converged ranks: still the same PageRank */
    g_job = 9;
    run_graph(f, &b, 2, 100, RG_NO_LOAD | RG_CONVERGE);
    /* A job id in use is refused to a GraphInit with new_job, and kept. */
    uint32_t len = gb_pr_rec_pair(rec, 8, 8), flags = GB_PR_INIT_NEW;
    memcpy(rec + 20, &flags, 4);
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, len, NULL, NULL), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_JOB_EXISTS);
    run_graph(f, &b, 2, 100, RG_NO_LOAD | RG_CONVERGE);
    /* Ended: its records are refused, the other job runs on. */
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_JOB_END, rec, gb_pr_rec_pair(rec, 0, 0), NULL, NULL), GB_SLOT_OK);
    assert_int_equal(pr_call(f->agg, 0, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, b.n), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_NO_GRAPH);
    /* Begun again under the same id: its partitions need PARTITION_INIT again. */
    len = gb_pr_rec_pair(rec, b.n, b.m);
    memcpy(rec + 20, &flags, 4);
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, len, NULL, NULL), GB_SLOT_OK);
    assert_int_equal(g_aux, 9);
    assert_int_equal(pr_call(f->agg, 0, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, b.n), NULL, NULL),
                     GB_SLOT_HANDLER_ERROR);
    assert_int_equal(g_aux, GB_PR_E_PARTITION);
    g_job = 7;
    run_graph(f, &a, 3, 100, RG_NO_LOAD | RG_CONVERGE);
    /* The arena (64 MiB) held by two jobs of 24 MiB: a third that would fit
     * alone is refused as "held by others", with the MiB it needs. */
    const uint64_t nv = 700000;
    gb_pr_dir_t d;
    const uint32_t mib = (uint32_t)((gb_pr_layout(&d, nv, 0) + (1u << 20) - 1) >> 20);
    for (uint32_t j = 20; j < 23; j++) {
        g_job = j;
        uint16_t st = pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, nv, 0), NULL, NULL);
        if (j < 22) {
            assert_int_equal(st, GB_SLOT_OK);
        } else {
            assert_int_equal(st, GB_SLOT_HANDLER_ERROR);
            assert_int_equal(g_aux, GB_PR_E_ARENA_FULL | mib << 8);
        }
    }
    g_job = 20;
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_JOB_END, rec, gb_pr_rec_pair(rec, 0, 0), NULL, NULL), GB_SLOT_OK);
    g_job = 22;
    assert_int_equal(pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, nv, 0), NULL, NULL),
                     GB_SLOT_OK);
    /* At most GB_PR_MAX_JOBS at once (7, 9, 21, 22 hold slices already). */
    for (uint32_t j = 100; j < 100 + GB_PR_MAX_JOBS - 3; j++) {
        g_job = j;
        uint16_t st = pr_call(f->snd, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, 4, 4), NULL, NULL);
        assert_int_equal(st, j < 100 + GB_PR_MAX_JOBS - 4 ? GB_SLOT_OK : GB_SLOT_HANDLER_ERROR);
    }
    assert_int_equal(g_aux, GB_PR_E_JOBS_FULL);
    /* job 7 was never disturbed */
    g_job = 7;
    run_graph(f, &a, 3, 100, RG_NO_LOAD | RG_CONVERGE);
    g_job = 0;
    gb_pull_free(&a);
    gb_pull_free(&b);
    gb_graph_destroy(&ga);
    gb_graph_destroy(&gb);
}

/* Graphs whose float32 sums missed the tolerance: a star of many leaves into
 * a dangling sink plus a chain (the sink's sum of tiny contributions), and a
 * scale-free graph (its hubs). Run by the driver's stopping rule, they must
 * converge, and to within the tolerance of the exact PageRank. */
static void test_pr_converge(void **state)
{
    const uint32_t leaves = 30000, chain = 1000;
    char *text = malloc((size_t)(leaves + chain) * 24);
    assert_non_null(text);
    size_t len = 0;
    for (uint32_t v = 1; v <= leaves; v++)
        len += (size_t)sprintf(text + len, "%u 0\n", v);
    for (uint32_t v = 0; v < chain; v++)
        len += (size_t)sprintf(text + len, "%u %u\n", leaves + 1 + v, leaves + 2 + v);
    gb_graph_t *g = NULL;
    char err[256];
    assert_int_equal(gb_graph_parse_snap(text, len, "star", &g, err, sizeof err), 0);
    free(text);
    gb_pull_t p;
    assert_int_equal(gb_graph_pull(g, &p), 0);
    run_graph(*state, &p, 4, 300, RG_CONVERGE);
    run_graph(*state, &p, 4, 300, RG_CONVERGE | RG_NEXT);
    gb_pull_free(&p);
    gb_graph_destroy(&g);
    assert_int_equal(gb_graph_kronecker(16, 16, 2, &g, err, sizeof err), 0);
    assert_int_equal(gb_graph_pull(g, &p), 0);
    run_graph(*state, &p, 8, 300, RG_CONVERGE | RG_NEXT);
    gb_pull_free(&p);
    gb_graph_destroy(&g);
}

#define GB_PAGERANK_CASES                                                                  \
    cmocka_unit_test_setup_teardown(test_pr_bad_input, pr_setup, pr_teardown),            \
        cmocka_unit_test_setup_teardown(test_pr_small_graph, pr_setup, pr_teardown),      \
        cmocka_unit_test_setup_teardown(test_pr_kronecker, pr_setup, pr_teardown),       \
        cmocka_unit_test_setup_teardown(test_pr_jobs, pr_setup, pr_teardown),            \
        cmocka_unit_test_setup_teardown(test_pr_converge, pr_setup, pr_teardown)

#endif
