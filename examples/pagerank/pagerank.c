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
 * One iteration is two rounds of messages, one per partition each:
 * StartIterationCommand to the senders (they write rank/out-degree into
 * device memory and report their dangling rank), then to the aggregators
 * with the summed dangling rank (they pull the contributions, write the new
 * ranks and report their L1 delta). The contributions never cross to the host.
 *
 * Exit status: 0 converged (or --max-iter reached with --allow-unconverged),
 * 1 an error, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge_client.h"
#include "graph.h"
#include "pr_output.h"
#include "pagerank.pb-c.h"

#define PROG "pagerank"
#define SENDER "pagerank.sender"
#define AGGREGATOR "pagerank.aggregator"
#define WINDOW 256 /* loading requests in flight at most */

typedef struct opts {
    const char *endpoint, *graph, *ranks_out, *edges_out, *csr_out, *ranks_bin;
    unsigned kron_scale, edgefactor;
    uint64_t seed;
    uint32_t partitions, chunk, max_iter, top;
    double damping, tolerance;
    int timeout_ms;
    bool quiet, json, allow_unconverged;
} opts_t;

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
    "  -p, --partitions P      grains per type, at most the vertex count (default: 128 on\n"
    "                          a GPU, where each runs on a thread block; 4 in cpu mode)\n"
    "  -d, --damping D         damping factor (default 0.85)\n"
    "  -t, --tolerance T       stop when the summed L1 delta is below T (default 1e-6)\n"
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
    "  -h, --help              this text\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

/* ---- requests ------------------------------------------------------------ */

typedef struct pr pr_t;
struct pr {
    gbc_client_t *c;
    const opts_t *o;
    size_t inflight;
    /* What replies carry, while a round or a rank fetch is under way. */
    int (*on_reply)(pr_t *p, const gbc_reply_t *r);
    const char *type;
    double a_sum, rank_sum; /* round_of */
    double *ranks;          /* fetch_ranks */
    uint32_t n;
    size_t got;
};

/* Takes one reply; every reply must be OK. Passes it to p->on_reply. */
static int take_reply(pr_t *p)
{
    gbc_reply_t r;
    gbc_err e = gbc_poll(p->c, &r, p->o->timeout_ms);
    if (e == GBC_ERR_STATUS) {
        fprintf(stderr, PROG ": request %" PRIu64 " failed: %s: %s\n", r.correlation_id,
                gbc_status_name(r.status), r.error ? r.error : "(no text)");
        gbc_reply_clear(&r);
        return -1;
    }
    if (e != GBC_OK) {
        fprintf(stderr, PROG ": waiting for a reply: %s (%s)\n", gbc_strerror(e), gbc_last_error());
        return -1;
    }
    p->inflight--;
    int rc = p->on_reply ? p->on_reply(p, &r) : 0;
    gbc_reply_clear(&r);
    return rc;
}

/* Sends one packed message, keeping at most WINDOW in flight. */
static int send_msg(pr_t *p, const char *type, uint64_t key, uint32_t mt, const ProtobufCMessage *m)
{
    static uint8_t *buf;
    static size_t cap;
    size_t len = protobuf_c_message_get_packed_size(m);
    if (len > cap) {
        free(buf);
        cap = len * 2;
        buf = malloc(cap);
        if (!buf) {
            fprintf(stderr, PROG ": out of memory\n");
            return -1;
        }
    }
    protobuf_c_message_pack(m, buf);
    while (p->inflight >= WINDOW)
        if (take_reply(p) != 0)
            return -1;
    gbc_err e;
    while ((e = gbc_send(p->c, type, key, mt, buf, len, NULL)) == GBC_ERR_TIMEOUT && p->inflight > 0)
        if (take_reply(p) != 0) /* backpressure: make room */
            return -1;
    if (e != GBC_OK) {
        fprintf(stderr, PROG ": sending to %s: %s (%s)\n", type, gbc_strerror(e), gbc_last_error());
        return -1;
    }
    p->inflight++;
    return 0;
}

static int drain(pr_t *p)
{
    while (p->inflight > 0)
        if (take_reply(p) != 0)
            return -1;
    return 0;
}

/* ---- loading ------------------------------------------------------------- */

/* Partition q holds vertices [first[q], first[q+1]), balanced by in-edges
 * plus vertices (the aggregators' work). */
static uint64_t *partition(const gb_pull_t *g, uint32_t parts)
{
    uint64_t *first = malloc(((size_t)parts + 1) * sizeof *first);
    if (!first)
        return NULL;
    const double per = (double)(g->m + g->n) / parts;
    uint32_t q = 0;
    first[0] = 0;
    for (uint32_t v = 0; v < g->n && q + 1 < parts; v++) {
        double done = (double)(g->in_off[v + 1] + v + 1);
        /* leave at least one vertex for each remaining partition */
        if (done >= per * (q + 1) || g->n - (v + 1) <= parts - (q + 1))
            first[++q] = v + 1;
    }
    while (q + 1 < parts)
        first[++q] = g->n;
    first[parts] = g->n;
    return first;
}

static int load(pr_t *p, const gb_pull_t *g, const uint64_t *first, uint32_t parts)
{
    const uint32_t chunk = p->o->chunk, ochunk = chunk / 2 ? chunk / 2 : 1;
    double t0 = now_s();
    Gpubridge__GraphInit gi = GPUBRIDGE__GRAPH_INIT__INIT;
    gi.node_count = g->n;
    gi.edge_count = g->m;
    if (send_msg(p, SENDER, 0, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT, &gi.base) ||
        drain(p))
        return -1;
    for (uint32_t q = 0; q < parts; q++) {
        Gpubridge__PartitionInit pi = GPUBRIDGE__PARTITION_INIT__INIT;
        pi.first_node = first[q];
        pi.node_count = first[q + 1] - first[q];
        if (send_msg(p, SENDER, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT,
                     &pi.base) ||
            send_msg(p, AGGREGATOR, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT,
                     &pi.base))
            return -1;
    }
    uint64_t sent_edges = 0, next_report = 0;
    for (uint32_t q = 0; q < parts; q++) {
        for (uint64_t v = first[q]; v < first[q + 1]; v += chunk) {
            Gpubridge__OutDegreeChunk oc = GPUBRIDGE__OUT_DEGREE_CHUNK__INIT;
            oc.first_node = v;
            oc.n_out_degrees = first[q + 1] - v < chunk ? first[q + 1] - v : chunk;
            oc.out_degrees = g->outdeg + v;
            if (send_msg(p, SENDER, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES,
                         &oc.base))
                return -1;
        }
        /* offsets of vertices first[q] .. first[q+1] (the last partition also sends offset n) */
        const uint64_t oend = q + 1 == parts ? (uint64_t)g->n + 1 : first[q + 1];
        for (uint64_t v = first[q]; v < oend; v += ochunk) {
            Gpubridge__InOffsetChunk ic = GPUBRIDGE__IN_OFFSET_CHUNK__INIT;
            ic.first_node = v;
            ic.n_offsets = oend - v < ochunk ? oend - v : ochunk;
            ic.offsets = g->in_off + v;
            if (send_msg(p, AGGREGATOR, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS,
                         &ic.base))
                return -1;
        }
        const uint64_t e1 = g->in_off[first[q + 1]];
        for (uint64_t e = g->in_off[first[q]]; e < e1; e += chunk) {
            Gpubridge__InEdgeChunk ec = GPUBRIDGE__IN_EDGE_CHUNK__INIT;
            ec.first_edge = e;
            ec.n_sources = e1 - e < chunk ? e1 - e : chunk;
            ec.sources = g->in_src + e;
            if (send_msg(p, AGGREGATOR, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES,
                         &ec.base))
                return -1;
            sent_edges += ec.n_sources;
        }
        if (!p->o->quiet && sent_edges >= next_report) {
            fprintf(stderr, "\rloading: %5.1f%% of %" PRIu64 " edges", g->m ? 100.0 * sent_edges / g->m : 100.0,
                    g->m);
            next_report = sent_edges + g->m / 50 + 1;
        }
    }
    if (drain(p))
        return -1;
    if (!p->o->quiet)
        fprintf(stderr, "\rloading: %u vertices, %" PRIu64 " edges, %u partitions in %.2f s\n", g->n, g->m, parts,
                now_s() - t0);
    return 0;
}

/* ---- iterating ----------------------------------------------------------- */

static int on_result(pr_t *p, const gbc_reply_t *r)
{
    Gpubridge__RankAggregationResult *m = gpubridge__rank_aggregation_result__unpack(NULL, r->payload_len, r->payload);
    if (!m) {
        fprintf(stderr, PROG ": %s sent a reply that is not a RankAggregationResult\n", p->type);
        return -1;
    }
    p->a_sum += strcmp(p->type, SENDER) == 0 ? m->dangling_rank : m->l1_delta;
    p->rank_sum += m->rank_sum;
    gpubridge__rank_aggregation_result__free_unpacked(m, NULL);
    return 0;
}

/* One round: START to every grain of type; sums the replies (senders: the
 * dangling rank; aggregators: the L1 delta) and their rank sums. */
static int round_of(pr_t *p, const char *type, uint32_t parts, uint32_t it, double dangling, uint32_t n,
                    double *a_sum, double *rank_sum)
{
    Gpubridge__StartIterationCommand sc = GPUBRIDGE__START_ITERATION_COMMAND__INIT;
    sc.iteration = it;
    sc.damping = p->o->damping;
    sc.tolerance = p->o->tolerance;
    sc.node_count = n;
    sc.dangling_rank = dangling;
    p->on_reply = on_result;
    p->type = type;
    p->a_sum = p->rank_sum = 0;
    int rc = 0;
    for (uint32_t q = 0; q < parts && rc == 0; q++)
        rc = send_msg(p, type, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION,
                      &sc.base);
    if (rc == 0)
        rc = drain(p);
    p->on_reply = NULL;
    *a_sum = p->a_sum;
    *rank_sum = p->rank_sum;
    return rc;
}

static int on_ranks(pr_t *p, const gbc_reply_t *r)
{
    Gpubridge__NodeRankUpdateBatch *b = gpubridge__node_rank_update_batch__unpack(NULL, r->payload_len, r->payload);
    if (!b || b->first_node > p->n || b->n_ranks > p->n - b->first_node) {
        fprintf(stderr, PROG ": a RankQuery reply is malformed or out of range\n");
        if (b)
            gpubridge__node_rank_update_batch__free_unpacked(b, NULL);
        return -1;
    }
    if (b->n_ranks)
        memcpy(p->ranks + b->first_node, b->ranks, b->n_ranks * sizeof *p->ranks);
    p->got += b->n_ranks;
    gpubridge__node_rank_update_batch__free_unpacked(b, NULL);
    return 0;
}

/* Reads every rank back (RankQuery to the aggregators). */
static int fetch_ranks(pr_t *p, const uint64_t *first, uint32_t parts, double *ranks, uint32_t n)
{
    const uint32_t per = p->o->chunk;
    p->on_reply = on_ranks;
    p->ranks = ranks;
    p->n = n;
    p->got = 0;
    int rc = 0;
    for (uint32_t q = 0; q < parts && rc == 0; q++) {
        for (uint64_t v = first[q]; v < first[q + 1] && rc == 0; v += per) {
            Gpubridge__RankQuery rq = GPUBRIDGE__RANK_QUERY__INIT;
            rq.first_node = v;
            rq.count = (uint32_t)(first[q + 1] - v < per ? first[q + 1] - v : per);
            rc = send_msg(p, AGGREGATOR, q, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY,
                          &rq.base);
        }
    }
    if (rc == 0)
        rc = drain(p);
    p->on_reply = NULL;
    if (rc == 0 && p->got != n) {
        fprintf(stderr, PROG ": got %zu ranks back, expected %u\n", p->got, n);
        return -1;
    }
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

static int parse_args(int argc, char **argv, opts_t *o)
{
    enum { OPT_ALLOW = 256, OPT_CSR, OPT_RBIN };
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
        {0, 0, 0, 0}};
    *o = (opts_t){.endpoint = "tcp://127.0.0.1:5555", .edgefactor = 16, .seed = 1, .partitions = 0,
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
        case 'h': fputs(usage_text, stdout); exit(0);
        default: fputs(usage_text, stderr); return -1;
        }
    }
    if (optind != argc || (!o->graph) == (!o->kron_scale)) {
        fprintf(stderr, PROG ": give exactly one of --graph FILE and --kron SCALE\n%s", usage_text);
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, PROG ": bad value '%s' for -%c (see --help)\n", optarg, ch);
    return -1;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    char err[512];
    gb_graph_t *g = NULL;
    double t0 = now_s();
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
                        "prepared in %.2f s\n", g->n, g->m, pg.m, now_s() - t0);
    gbc_client_t *c = NULL;
    gbc_options_t copt;
    gbc_options_init(&copt);
    copt.timeout_ms = o.timeout_ms;
    if (gbc_client_new(&o.endpoint, 1, &copt, &c) != GBC_OK) {
        fprintf(stderr, PROG ": cannot connect to %s: %s\n", o.endpoint, gbc_last_error());
        return 1;
    }
    /* The grains' mode: it also picks the default partition count. */
    gbc_grain_status_t gs;
    char mode[16] = "?";
    if (gbc_ctl_status(c, 0, AGGREGATOR, &gs, o.timeout_ms) != GBC_OK) {
        fprintf(stderr, PROG ": the bridge at %s has no usable %s: %s\n", o.endpoint, AGGREGATOR,
                gbc_last_error());
        gbc_client_destroy(&c);
        return 1;
    }
    snprintf(mode, sizeof mode, "%s", gs.mode);
    /* cpu: a few per core; GPU: about one per worker block (one per SM), so
     * that each iteration is two rounds of ~128 messages */
    uint32_t parts = o.partitions ? o.partitions : strcmp(mode, "cpu") == 0 ? 4 : 128;
    if (parts > pg.n)
        parts = pg.n;
    uint64_t *first = partition(&pg, parts);
    double *ranks = calloc(pg.n, sizeof *ranks);
    if (!first || !ranks) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    pr_t p = {.c = c, .o = &o};
    int status = 1;
    if (load(&p, &pg, first, parts) != 0)
        goto out;

    uint32_t it = 0;
    double delta = INFINITY, total_s = 0, rank_sum = 0;
    bool converged = false;
    for (it = 0; it < o.max_iter && !converged; it++) {
        double ts = now_s(), dangling, held, l1;
        if (round_of(&p, SENDER, parts, it, 0.0, pg.n, &dangling, &held) != 0 ||
            round_of(&p, AGGREGATOR, parts, it, dangling, pg.n, &l1, &rank_sum) != 0)
            goto out;
        double dt = now_s() - ts;
        total_s += dt;
        delta = l1;
        converged = delta < o.tolerance;
        if (!o.quiet)
            fprintf(stderr, "iteration %3u: L1 delta %.3e  rank sum %.6f  dangling %.3e  %8.3f ms\n", it + 1,
                    delta, rank_sum, dangling, dt * 1e3);
    }
    if (fetch_ranks(&p, first, parts, ranks, pg.n) != 0)
        goto out;
    const double per_iter = it ? total_s / it : 0;
    printf("pagerank: %u vertices, %" PRIu64 " edges, %u partitions, mode %s\n", pg.n, pg.m, parts, mode);
    printf("%s after %u iterations (L1 delta %.3e, tolerance %.1e); %.3f ms per iteration, %.3f G edges/s\n",
           converged ? "converged" : "NOT converged", it, delta, o.tolerance, per_iter * 1e3,
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
               "\"iterations\":%u,\"converged\":%s,\"l1_delta\":%.6e,\"ms_per_iter\":%.4f,\"edges_per_s\":%.6e}\n",
               mode, pg.n, pg.m, parts, it, converged ? "true" : "false", delta, per_iter * 1e3,
               per_iter > 0 ? pg.m / per_iter : 0.0);
    status = converged || o.allow_unconverged ? 0 : 1;
    if (!converged)
        fprintf(stderr, PROG ": not converged within %u iterations\n", o.max_iter);
out:
    gbc_client_destroy(&c);
    free(first);
    free(ranks);
    gb_pull_free(&pg);
    gb_graph_destroy(&g);
    return status;
}
