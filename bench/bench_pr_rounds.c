/* PageRank rounds without the bridge: a Kronecker graph loaded into the
 * pagerank.sender / pagerank.aggregator grains through the runtime (no
 * ZeroMQ, no protobuf), then each round (START to every partition, every
 * reply awaited) timed on its own. Set beside the example driver's time per
 * iteration through the bridge, it says how much of an iteration is the
 * grains' own work and how much is the trip through the bridge. Prints a
 * table, then one JSON line.
 *
 *   bench_pr_rounds [--mode persistent|relaunch|cpu] [--scale S]
 *                   [--edgefactor E] [--partitions P] [--iters N] [--log LEVEL]
 *
 * Partitions: 0 (default) takes the aggregator's lanes (one per worker block
 * on a GPU), as the driver does. The ranks' L1 delta is checked to fall.
 * Iterations alternate between the two ways the driver can run one: even
 * ones a senders' round, then aggregators that also write the next
 * contributions (GB_PR_START_NEXT), odd ones plain aggregators (their
 * contributions are the previous round's). So "senders + aggregators" and
 * "aggregators writing the next contributions" are compared in one run. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "graph.h"
#include "log.h"
#include "pagerank.h"
#include "runtime.h"

#define SLOT 16384u
#define CAP 1024u

typedef struct batch {
    gb_rk_t *rk;
    uint64_t sent, got;
    double a, rank_sum, next; /* START replies summed (next: an aggregator's next dangling rank) */
    int failed;
} batch_t;

/* Milliseconds on the bridge's clock. */
static double now_ms(void) { return (double)gb_now_ns() / 1e6; }

static int take(batch_t *b)
{
    static unsigned char buf[SLOT];
    gb_reply_t r;
    const double end = now_ms() + 60000;
    gb_err err;
    while ((err = gb_rk_recv(b->rk, &r, buf, sizeof buf)) == GB_ERR_EMPTY) {
        if (gb_rk_poll(b->rk) != GB_OK || now_ms() > end) {
            fprintf(stderr, "bench_pr_rounds: no reply within 60 s\n");
            return -1;
        }
    }
    if (err != GB_OK) {
        fprintf(stderr, "bench_pr_rounds: receiving: %s\n", gb_strerror(err));
        return -1;
    }
    if (r.status != GB_SLOT_OK) {
        fprintf(stderr, "bench_pr_rounds: request %llu: slot status %u\n", (unsigned long long)r.corr, r.status);
        return -1;
    }
    if (r.type == GB_PR_MSG_START && r.len == GB_PR_REPLY_LEN) {
        const gb_pr_result_t res = gb_pr_reply_read(buf);
        b->a += res.a;
        b->rank_sum += res.rank_sum;
        b->next += res.next_dangling;
    }
    b->got++;
    return 0;
}

static int send_rec(batch_t *b, uint64_t key, uint16_t type, const void *rec, uint32_t len)
{
    gb_err e;
    while ((e = gb_rk_send(b->rk, key, b->sent, type, rec, len)) == GB_ERR_FULL)
        if (take(b) != 0)
            return -1;
    if (e != GB_OK) {
        fprintf(stderr, "bench_pr_rounds: send: %s\n", gb_strerror(e));
        return -1;
    }
    b->sent++;
    return 0;
}

static int finish(batch_t *b)
{
    while (b->got < b->sent)
        if (take(b) != 0)
            return -1;
    return 0;
}

static gb_rk_t *grain(const char *type, gb_mode mode, unsigned char *arena, uint64_t arena_size)
{
    gb_rk_params_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    p.mode = mode;
    snprintf(p.grain.type, sizeof p.grain.type, "%s", type);
    p.grain.queue_capacity = CAP;
    p.grain.slot_size = SLOT;
    p.grain.messages_per_iteration = 256;
    p.grain.max_grains = 4096;
    p.grain.cpu_threads = 2;
    p.idle_spin_polls = 2048;
    p.idle_backoff_max_ns = 20000;
    p.heartbeat_deadline_ms = 5000;
    p.max_messages_per_launch = 4096;
    p.arena = arena;
    p.arena_size = arena_size;
    gb_rk_t *rk = NULL;
    gb_err e = gb_rk_new(&p, &rk);
    if (e == GB_OK && (e = gb_rk_launch(rk)) != GB_OK)
        gb_rk_destroy(&rk);
    if (e != GB_OK)
        fprintf(stderr, "bench_pr_rounds: %s in mode %s: %s\n", type, gb_mode_name(mode), gb_strerror(e));
    return rk;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    gb_mode mode = GB_MODE_PERSISTENT;
    unsigned scale = 20, ef = 16;
    uint32_t parts = 0;
    int iters = 20;
    static const struct option lopts[] = {
        {"mode", required_argument, 0, 'm'},       {"scale", required_argument, 0, 's'},
        {"edgefactor", required_argument, 0, 'e'}, {"partitions", required_argument, 0, 'p'},
        {"iters", required_argument, 0, 'n'},      {"help", no_argument, 0, 'h'},
        {"log", required_argument, 0, 'l'},        {0, 0, 0, 0}};
    int ch;
    gb_log_level level;
    while ((ch = getopt_long(argc, argv, "m:s:e:p:n:l:h", lopts, NULL)) != -1) {
        switch (ch) {
        case 'm':
            if (gb_mode_parse(optarg, &mode) != 0 || mode == GB_MODE_AUTO) {
                fprintf(stderr, "bench_pr_rounds: --mode: persistent, relaunch or cpu\n");
                return 2;
            }
            break;
        case 's': scale = (unsigned)atoi(optarg); break;
        case 'e': ef = (unsigned)atoi(optarg); break;
        case 'p': parts = (uint32_t)atoi(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'l':
            if (gb_log_level_parse(optarg, &level) != 0) {
                fprintf(stderr, "bench_pr_rounds: --log: error, warn, info, debug or diag\n");
                return 2;
            }
            gb_log_set_level(level);
            break;
        default:
            fprintf(stderr, "usage: bench_pr_rounds [--mode persistent|relaunch|cpu] [--scale S] [--edgefactor E]\n"
                            "                       [--partitions P] [--iters N] [--log LEVEL]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    if (scale < 4 || scale > 26 || ef < 1 || ef > 64 || iters < 4 || iters > 10000) {
        fprintf(stderr, "bench_pr_rounds: scale 4..26, edge factor 1..64, iters 4..10000 (half of each kind)\n");
        return 2;
    }
    gb_graph_t *g = NULL;
    char err[256] = "out of memory";
    gb_pull_t pg;
    if (gb_graph_kronecker(scale, ef, 1, &g, err, sizeof err) != 0 || gb_graph_pull(g, &pg) != 0) {
        fprintf(stderr, "bench_pr_rounds: graph: %s\n", err);
        return 1;
    }
    gb_pr_dir_t d;
    const uint64_t arena_size = gb_pr_layout(&d, pg.n, pg.m) + (1u << 20);
    unsigned char *arena = NULL;
    if (gb_arena_new(mode, 0, arena_size, &arena) != GB_OK)
        return 1;
    gb_rk_t *snd = grain("pagerank.sender", mode, arena, arena_size);
    gb_rk_t *agg = snd ? grain("pagerank.aggregator", mode, arena, arena_size) : NULL;
    if (!agg)
        return 1;
    gb_rk_status_t st;
    gb_rk_status(agg, &st);
    if (!parts)
        parts = mode == GB_MODE_CPU ? 4 : st.lanes;
    if (parts > pg.n)
        parts = pg.n;

    /* Load: partitions of equal vertex count, the in-edges in chunks. */
    static unsigned char rec[SLOT];
    const uint32_t chunk = (SLOT - GB_SLOT_HDR_SIZE - GB_PR_CHUNK_HDR) / 8;
    batch_t bs = {.rk = snd}, ba = {.rk = agg};
    int rc = send_rec(&bs, 0, GB_PR_MSG_GRAPH_INIT, rec, gb_pr_rec_pair(rec, pg.n, pg.m)) || finish(&bs);
    const double tl = now_ms();
    for (uint32_t q = 0; q < parts && !rc; q++) {
        const uint64_t f = (uint64_t)pg.n * q / parts, e = (uint64_t)pg.n * (q + 1) / parts;
        const uint32_t pl = gb_pr_rec_pair(rec, f, e - f);
        rc |= send_rec(&bs, q, GB_PR_MSG_PARTITION_INIT, rec, pl) ||
              send_rec(&ba, q, GB_PR_MSG_PARTITION_INIT, rec, pl);
        for (uint64_t v = f; v < e && !rc; v += chunk) {
            const uint32_t c = (uint32_t)(e - v < chunk ? e - v : chunk);
            rc |= send_rec(&bs, q, GB_PR_MSG_OUT_DEGREES, rec, gb_pr_rec_chunk(rec, v, c, pg.outdeg + v, 4));
        }
        const uint64_t oend = q + 1 == parts ? (uint64_t)pg.n + 1 : e;
        for (uint64_t v = f; v < oend && !rc; v += chunk) {
            const uint32_t c = (uint32_t)(oend - v < chunk ? oend - v : chunk);
            rc |= send_rec(&ba, q, GB_PR_MSG_IN_OFFSETS, rec, gb_pr_rec_chunk(rec, v, c, pg.in_off + v, 8));
        }
        for (uint64_t x = pg.in_off[f]; x < pg.in_off[e] && !rc; x += chunk) {
            const uint32_t c = (uint32_t)(pg.in_off[e] - x < chunk ? pg.in_off[e] - x : chunk);
            rc |= send_rec(&ba, q, GB_PR_MSG_IN_EDGES, rec, gb_pr_rec_chunk(rec, x, c, pg.in_src + x, 4));
        }
    }
    rc = rc || finish(&bs) || finish(&ba);
    const double load_ms = now_ms() - tl;

    /* Iterate: each round alone, replies summed (the first aggregator round
     * also builds the edge targets: reported apart). */
    const int half = iters / 2; /* timed rounds of each kind */
    double *ts = calloc((size_t)half, sizeof *ts), *ta = calloc((size_t)half, sizeof *ta);
    double *tn = calloc((size_t)half, sizeof *tn), first_agg = 0, l1_first = 0, l1_last = 0, dangling = 0;
    if (!ts || !ta || !tn) {
        fprintf(stderr, "bench_pr_rounds: out of memory\n");
        rc = 1;
    }
    gb_rk_status_t st0s, st0a, st1s, st1a; /* launches per round, in relaunch mode */
    gb_rk_status(snd, &st0s);
    gb_rk_status(agg, &st0a);
    for (int it = 0; it < 2 * half && !rc; it++) {
        const int even = it % 2 == 0;
        bs.a = bs.rank_sum = ba.a = ba.rank_sum = ba.next = 0;
        double t0 = now_ms();
        if (even) {
            for (uint32_t q = 0; q < parts && !rc; q++)
                rc |= send_rec(&bs, q, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, (uint32_t)it, 0, 0.85, 0, pg.n));
            rc = rc || finish(&bs);
            dangling = bs.a;
        }
        double t1 = now_ms();
        const uint32_t flags = even ? GB_PR_START_NEXT : 0;
        for (uint32_t q = 0; q < parts && !rc; q++)
            rc |= send_rec(&ba, q, GB_PR_MSG_START, rec,
                           gb_pr_rec_start(rec, (uint32_t)it, flags, 0.85, dangling, pg.n));
        rc = rc || finish(&ba);
        double t2 = now_ms();
        dangling = ba.next;
        if (even) {
            ts[it / 2] = t1 - t0;
            tn[it / 2] = t2 - t1;
        } else {
            ta[it / 2] = t2 - t1;
        }
        if (it == 0) {
            first_agg = t2 - t1;
            l1_first = ba.a;
        }
        l1_last = ba.a;
        if (fabs(ba.rank_sum - 1.0) > 1e-3) {
            fprintf(stderr, "bench_pr_rounds: ranks sum to %.6f after iteration %d\n", ba.rank_sum, it + 1);
            rc = 1;
        }
    }
    if (!rc && !(l1_last < l1_first)) {
        fprintf(stderr, "bench_pr_rounds: L1 delta did not fall (%.3e -> %.3e)\n", l1_first, l1_last);
        rc = 1;
    }
    if (!rc) {
        /* the first round, which also builds the edge targets, is left out */
        const double ms_s = median(ts, half), ms_a = median(ta, half), ms_n = median(tn + 1, half - 1);
        printf("bench_pr_rounds: mode %s, Kronecker scale %u (%u vertices, %llu edges), %u partitions, "
               "loaded in %.0f ms\n\n",
               gb_mode_name(mode), scale, pg.n, (unsigned long long)pg.m, parts, load_ms);
        printf("round                                       median ms\n");
        printf("senders (rank / out-degree)                   %7.3f\n", ms_s);
        printf("aggregators (pull, new ranks)                 %7.3f\n", ms_a);
        printf("aggregators writing the next contributions    %7.3f  (first, building edge targets: %.3f)\n",
               ms_n, first_agg);
        printf("an iteration, two rounds (senders + aggr.)    %7.3f  (%.1f G edges/s)\n", ms_s + ms_a,
               (double)pg.m / ((ms_s + ms_a) * 1e6));
        printf("an iteration, one round (aggr. with next)     %7.3f  (%.1f G edges/s)\n\n", ms_n,
               (double)pg.m / (ms_n * 1e6));
        gb_rk_status(snd, &st1s);
        gb_rk_status(agg, &st1a);
        if (mode == GB_MODE_RELAUNCH)
            printf("kernel launches per round: senders %.1f, aggregators %.1f\n\n",
                   (double)(st1s.launches - st0s.launches) / half, (double)(st1a.launches - st0a.launches) / (2 * half));
        printf("{\"bench\":\"pr_rounds\",\"mode\":\"%s\",\"scale\":%u,\"edges\":%llu,\"partitions\":%u,"
               "\"sender_ms\":%.4f,\"aggregator_ms\":%.4f,\"aggregator_next_ms\":%.4f,\"aggregator_first_ms\":%.4f}\n",
               gb_mode_name(mode), scale, (unsigned long long)pg.m, parts, ms_s, ms_a, ms_n, first_agg);
    }
    free(ts);
    free(ta);
    free(tn);
    gb_rk_destroy(&snd);
    gb_rk_destroy(&agg);
    gb_arena_free(mode, arena);
    gb_pull_free(&pg);
    gb_graph_destroy(&g);
    return rc ? 1 : 0;
}
