/* pagerank: the PageRank example, a client of a running bridge.
 *
 * Reads a SNAP-style edge list (or generates a Graph500 Kronecker graph),
 * loads it into the bridge's pagerank.sender / pagerank.aggregator grains
 * (pagerank.proto: GraphInit, PartitionInit, then the out-degrees and the
 * in-edges in chunks), iterates until the summed L1 delta falls below the
 * tolerance, and prints iterations, time per iteration, edges per second and
 * the top-k vertices. Graph semantics are networkx's DiGraph: duplicate edges
 * merged, self-loops kept, dangling vertices' rank spread over all vertices.
 *
 * The conversation with the bridge (loading, iterating, reading the ranks
 * back) is in pr_client.c; pr_client.h says how an iteration runs.
 *
 * Each run is a job of its own on the bridge (pagerank.proto): drivers
 * running at the same time do not disturb each other. Every reply must name
 * this run's job, and the ranks read back are checked on the host: one
 * power iteration in double gives the residual r = ||G(x) - x||_1, and the
 * exact PageRank x* is within r / (1 - d) of x (L1), the error bound printed.
 * The run stops when the L1 step between iterations is below the tolerance;
 * the error bound says how far that leaves the ranks from x* (at most about
 * d / (1 - d) times the step, plus the float32 rounding of the ranks).
 *
 * Exit status: 0 converged (or --max-iter reached with --allow-unconverged),
 * 1 an error (ranks failing the check included), 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/client.h"
#include "graph.h"
#include "pr_client.h"
#include "pr_output.h"

static const char usage_text[] =
    "usage: " PROG " [OPTIONS] (--graph FILE | --kron SCALE)\n"
    "\n"
    "PageRank through a running bridge's pagerank.sender / pagerank.aggregator grains.\n"
    "\n"
    "  -g, --graph FILE        SNAP-style edge list ('#' comments, 'src dst' per line)\n"
    "  -K, --kron SCALE        generate a Graph500 Kronecker graph of 2^SCALE vertices\n"
    "  -E, --edgefactor N      Kronecker edges per vertex (default 16)\n"
    "  -S, --seed S            Kronecker seed (default 1)\n"
    "  -e, --endpoint E        bridge endpoint (default tcp://127.0.0.1:5555)\n"
    "  -p, --partitions P      grains per type, at most the vertex count (default: on a\n"
    "                          GPU one per worker block of the grain type, as its status\n"
    "                          reports (128 if it does not); 4 in cpu mode)\n"
    "  -d, --damping D         damping factor (default 0.85)\n"
    "  -t, --tolerance T       stop when the summed L1 delta is below T (default 1e-6)\n"
    "      --max-error E       fail unless the host-verified L1 error bound of the ranks\n"
    "                          is at most E (default: 100 x the tolerance, at least 1e-4)\n"
    "  -m, --max-iter N        at most N iterations (default 100)\n"
    "  -k, --top K             print the K highest-ranked vertices (default 10)\n"
    "  -o, --ranks FILE        write 'vertex rank' lines for every vertex\n"
    "  -w, --write-edges FILE  write the graph as an edge list (for check_networkx.py)\n"
    "      --write-csr FILE    write the merged graph in binary (bench/bench_pagerank.py):\n"
    "                          'GBPRCSR1', u64 n, u64 m, u64 in_off[n+1], u32 in_src[m],\n"
    "                          u32 outdeg[n], little-endian\n"
    "      --ranks-bin FILE    write f64 ranks[n] in dense-id order (the CSR's ids)\n"
    "  -c, --chunk N           entries per loading message (default 4000: fits the\n"
    "                          default 16 KiB slot; lower it for smaller slots)\n"
    "  -T, --timeout MS        reply deadline (default 60000)\n"
    "  -q, --quiet             no per-iteration progress\n"
    "  -j, --json              print a JSON line last\n"
    "      --allow-unconverged exit 0 when --max-iter is reached first\n"
    "      --two-rounds        a senders' round in every iteration (default: the\n"
    "                          aggregators write the next contributions themselves)\n"
    "  -h, --help              this text\n";


static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min && v <= max))
        return false;
    *out = v;
    return true;
}

/* ---- main ------------------------------------------------------------------ */

static int parse_args(int argc, char **argv, pr_opts_t *o)
{
    enum { OPT_ALLOW = 256, OPT_CSR, OPT_RBIN, OPT_TWO, OPT_MAXERR };
    static const struct option lopts[] = {
        {"graph", required_argument, 0, 'g'},      {"kron", required_argument, 0, 'K'},
        {"edgefactor", required_argument, 0, 'E'}, {"seed", required_argument, 0, 'S'},
        {"endpoint", required_argument, 0, 'e'},   {"partitions", required_argument, 0, 'p'},
        {"damping", required_argument, 0, 'd'},    {"tolerance", required_argument, 0, 't'},
        {"max-iter", required_argument, 0, 'm'},   {"top", required_argument, 0, 'k'},
        {"ranks", required_argument, 0, 'o'},      {"write-edges", required_argument, 0, 'w'},
        {"chunk", required_argument, 0, 'c'},      {"timeout", required_argument, 0, 'T'},
        {"quiet", no_argument, 0, 'q'},            {"json", no_argument, 0, 'j'},
        {"allow-unconverged", no_argument, 0, OPT_ALLOW}, {"help", no_argument, 0, 'h'},
        {"write-csr", required_argument, 0, OPT_CSR},      {"ranks-bin", required_argument, 0, OPT_RBIN},
        {"two-rounds", no_argument, 0, OPT_TWO},   {"max-error", required_argument, 0, OPT_MAXERR},
        {0, 0, 0, 0}};
    *o = (pr_opts_t){.endpoint = "tcp://127.0.0.1:5555", .edgefactor = 16, .seed = 1, .partitions = 0,
                  .chunk = 4000, .max_iter = 100, .top = 10, .damping = 0.85, .tolerance = 1e-6,
                  .timeout_ms = 60000};
    int ch;
    uint64_t v;
    while ((ch = getopt_long(argc, argv, "g:K:E:S:e:p:d:t:m:k:o:w:c:T:qjh", lopts, NULL)) != -1) {
        switch (ch) {
        case 'g': o->graph = optarg; break;
        case 'K':
            if (!parse_u64(optarg, 1, 30, &v))
                goto bad;
            o->kron_scale = (unsigned)v;
            break;
        case 'E':
            if (!parse_u64(optarg, 1, 1024, &v))
                goto bad;
            o->edgefactor = (unsigned)v;
            break;
        case 'S':
            if (!parse_u64(optarg, 0, UINT64_MAX, &o->seed))
                goto bad;
            break;
        case 'e': o->endpoint = optarg; break;
        case 'p':
            if (!parse_u64(optarg, 0, 65536, &v))
                goto bad;
            o->partitions = (uint32_t)v; /* 0: chosen by mode once connected */
            break;
        case 'd':
            if (!parse_f64(optarg, 0.0, 1.0, &o->damping))
                goto bad;
            break;
        case 't':
            if (!parse_f64(optarg, 0.0, 1.0, &o->tolerance))
                goto bad;
            break;
        case 'm':
            if (!parse_u64(optarg, 1, 1000000, &v))
                goto bad;
            o->max_iter = (uint32_t)v;
            break;
        case 'k':
            if (!parse_u64(optarg, 0, 1000000, &v))
                goto bad;
            o->top = (uint32_t)v;
            break;
        case 'o': o->ranks_out = optarg; break;
        case 'w': o->edges_out = optarg; break;
        case 'c':
            if (!parse_u64(optarg, 2, 1u << 20, &v))
                goto bad;
            o->chunk = (uint32_t)v;
            break;
        case 'T':
            if (!parse_u64(optarg, 1, 3600000, &v))
                goto bad;
            o->timeout_ms = (int)v;
            break;
        case 'q': o->quiet = true; break;
        case 'j': o->json = true; break;
        case OPT_ALLOW: o->allow_unconverged = true; break;
        case OPT_CSR: o->csr_out = optarg; break;
        case OPT_RBIN: o->ranks_bin = optarg; break;
        case OPT_TWO: o->two_rounds = true; break;
        case OPT_MAXERR:
            if (!parse_f64(optarg, 0.0, 2.0, &o->max_error))
                goto bad;
            break;
        case 'h': fputs(usage_text, stdout); exit(0);
        default: fputs(usage_text, stderr); return -1;
        }
    }
    if (o->max_error == 0)
        o->max_error = o->tolerance * 100 > 1e-4 ? o->tolerance * 100 : 1e-4;
    if (optind != argc || (!o->graph) == (!o->kron_scale)) {
        fprintf(stderr, PROG ": give exactly one of --graph FILE and --kron SCALE\n%s", usage_text);
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, PROG ": bad value '%s' for -%c (see --help)\n", optarg, ch);
    return -1;
}

static void on_signal(int sig)
{
    (void)sig;
    pr_interrupted = 1;
}

int main(int argc, char **argv)
{
    pr_opts_t o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    /* Stop at the next reply and end the job: its arena is freed for others. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    char err[512];
    gb_graph_t *g = NULL;
    double t0 = pr_now_s();
    int rc = o.graph ? gb_graph_load_snap(o.graph, &g, err, sizeof err)
                     : gb_graph_kronecker(o.kron_scale, o.edgefactor, o.seed, &g, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (o.edges_out && write_edges(o.edges_out, g) != 0)
        return 1;
    gb_pull_t pg;
    if (gb_graph_pull(g, &pg) != 0) {
        fprintf(stderr, PROG ": out of memory preparing the graph\n");
        return 1;
    }
    if (o.csr_out && write_csr(o.csr_out, &pg) != 0)
        return 1;
    if (!o.quiet)
        fprintf(stderr, "graph: %u vertices, %" PRIu64 " edges (%" PRIu64 " after merging duplicates), "
                        "prepared in %.2f s\n", g->n, g->m, pg.m, pr_now_s() - t0);
    gbc_client_t *c = NULL;
    gbc_options_t copt;
    gbc_options_init(&copt);
    copt.timeout_ms = o.timeout_ms;
    if (gbc_client_new(&o.endpoint, 1, &copt, &c) != GBC_OK) {
        fprintf(stderr, PROG ": cannot connect to %s: %s\n", o.endpoint, gbc_last_error());
        return 1;
    }
    /* The grains' mode: it also picks the default partition count. */
    gbc_grain_status_t gs = GBC_GRAIN_STATUS_INIT;
    char mode[16] = "?";
    if (gbc_ctl_status(c, 0, AGGREGATOR, &gs, o.timeout_ms) != GBC_OK) {
        fprintf(stderr, PROG ": the bridge at %s has no usable %s: %s\n", o.endpoint, AGGREGATOR,
                gbc_last_error());
        gbc_client_destroy(&c);
        return 1;
    }
    snprintf(mode, sizeof mode, "%s", gs.mode);
    /* cpu: a few per core. GPU: one per worker block of the team kernel (one
     * per SM): a partition's message runs on one block, partition q on block
     * q mod lanes, so any other count leaves some blocks with one more
     * partition than the rest, and the round waits for them. */
    uint32_t parts = o.partitions               ? o.partitions
                     : strcmp(mode, "cpu") == 0 ? 4
                     : gs.lanes                 ? gs.lanes
                                                : 128;
    if (parts > pg.n)
        parts = pg.n;
    uint64_t *first = pr_partition(&pg, parts);
    double *ranks = calloc(pg.n, sizeof *ranks);
    if (!first || !ranks) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    pr_t p = {.c = c, .o = &o, .next_senders = malloc(parts * sizeof *p.next_senders), .agg_parts = parts};
    p.n_tags = 1024;
    while (p.n_tags < 2ull * parts + WINDOW)
        p.n_tags *= 2;
    p.tag = malloc(p.n_tags * sizeof *p.tag);
    int status = 1;
    if (p.tag)
        for (uint64_t i = 0; i < p.n_tags; i++)
            p.tag[i].corr = NO_TAG;
    if (!p.next_senders || !p.tag) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    if (pr_load(&p, &pg, first, parts) != 0)
        goto out;

    /* Each iteration's time runs from its aggregators' START to the last
     * reply it waits for; the first sender round counts in iteration 1. */
    uint32_t it = 0;
    double delta = INFINITY, total_s = 0, agg_total_s = 0, rank_sum = 0;
    bool converged = false;
    double ts = pr_now_s();
    if (o.max_iter && pr_senders_first(&p, parts, pg.n) != 0)
        goto out;
    for (it = 0; it < o.max_iter && !converged; it++) {
        const double dangling = p.snd_dangling;
        double agg_s;
        if (pr_iterate(&p, parts, it, pg.n, it + 1 < o.max_iter, &agg_s) != 0)
            goto out;
        const double te = pr_now_s(), dt = te - ts;
        total_s += dt;
        agg_total_s += agg_s - ts;
        delta = p.agg_l1;
        rank_sum = p.agg_rank;
        if (!(fabs(rank_sum - 1.0) < 1e-3)) { /* float32 ranks, double sums: far less than this */
            fprintf(stderr,
                    PROG ": the ranks sum to %.6f after iteration %u, not 1: the grains did not run the "
                         "iteration this driver asked for (a bridge that predates next_contributions? "
                         "--two-rounds works with one)\n",
                    rank_sum, it + 1);
            goto out;
        }
        converged = delta < o.tolerance;
        if (!o.quiet)
            fprintf(stderr,
                    "iteration %3u: L1 delta %.3e  rank sum %.6f  dangling %.3e  %8.3f ms (aggregators done at %.3f)\n",
                    it + 1, delta, rank_sum, dangling, dt * 1e3, (agg_s - ts) * 1e3);
        ts = te;
    }
    if (pr_fetch_ranks(&p, first, parts, ranks, pg.n) != 0)
        goto out;
    pr_end_job(&p);
    /* The ranks as read back, checked against the graph on the host. */
    const double bound = pr_residual(&pg, ranks, o.damping) / (1 - o.damping);
    if (!(bound <= o.max_error)) {
        fprintf(stderr, PROG ": the ranks read back are not this graph's PageRank: L1 error bound %.3e (from the "
                        "host's residual) exceeds %.1e (--max-error)\n", bound, o.max_error);
        goto out;
    }
    const double per_iter = it ? total_s / it : 0, per_agg = it ? agg_total_s / it : 0;
    printf("pagerank: %u vertices, %" PRIu64 " edges, %u partitions, mode %s\n", pg.n, pg.m, parts, mode);
    printf("%s after %u iterations (L1 delta %.3e, tolerance %.1e; error bound %.3e); %.3f ms per iteration "
           "(aggregators done at %.3f), %.3f G edges/s\n",
           converged ? "converged" : "NOT converged", it, delta, o.tolerance, bound, per_iter * 1e3, per_agg * 1e3,
           per_iter > 0 ? pg.m / per_iter / 1e9 : 0.0);
    print_top(g, ranks, o.top);
    if (o.ranks_out && write_ranks(o.ranks_out, g, ranks) != 0)
        goto out;
    if (o.ranks_bin) {
        FILE *f = fopen(o.ranks_bin, "wb");
        bool ok = f && fwrite(ranks, sizeof *ranks, pg.n, f) == pg.n;
        if (!f || fclose(f) != 0 || !ok) {
            fprintf(stderr, PROG ": %s: cannot write\n", o.ranks_bin);
            goto out;
        }
    }
    if (o.json)
        printf("{\"bench\":\"pagerank\",\"mode\":\"%s\",\"vertices\":%u,\"edges\":%" PRIu64 ",\"partitions\":%u,"
               "\"iterations\":%u,\"converged\":%s,\"l1_delta\":%.6e,\"error_bound\":%.6e,\"ms_per_iter\":%.4f,\"aggregators_done_ms\":%.4f,"
               "\"edges_per_s\":%.6e}\n",
               mode, pg.n, pg.m, parts, it, converged ? "true" : "false", delta, bound, per_iter * 1e3, per_agg * 1e3,
               per_iter > 0 ? pg.m / per_iter : 0.0);
    status = converged || o.allow_unconverged ? 0 : 1;
    if (!converged)
        fprintf(stderr, PROG ": not converged within %u iterations\n", o.max_iter);
out:
    pr_end_job(&p);
    gbc_client_destroy(&c);
    free(p.next_senders);
    free(p.tag);
    free(first);
    free(ranks);
    gb_pull_free(&pg);
    gb_graph_destroy(&g);
    return status;
}
