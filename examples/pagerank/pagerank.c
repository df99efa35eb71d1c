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
 * An iteration is a StartIterationCommand to every sender (it writes
 * rank/out-degree of its vertices into device memory and reports its
 * dangling rank), then to every aggregator with the summed dangling rank (it
 * pulls the contributions, writes its vertices' new ranks and reports its L1
 * delta). The contributions never cross to the host. The aggregators need
 * every sender's contributions, but sender q of the next iteration needs only
 * aggregator q's ranks: it is sent as soon as aggregator q answers (the
 * grains keep two contribution buffers, by iteration parity), so an
 * iteration waits for one round of messages, not two.
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
    "  -p, --partitions P      grains per type, at most the vertex count (default: on a\n"
    "                          GPU one per worker block of the grain type, as its status\n"
    "                          reports (128 if it does not); 4 in cpu mode)\n"
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

#define NO_TAG UINT64_MAX

typedef struct pr pr_t;
struct pr {
    gbc_client_t *c;
    const opts_t *o;
    size_t inflight;
    /* What replies carry, while iterating or fetching ranks. */
    int (*on_reply)(pr_t *p, const gbc_reply_t *r);
    /* iterating: which START a reply answers (by correlation id; n_tags
     * slots, a power of two above the STARTs one iterate() has in flight,
     * all answered before it returns), the sums of the replies so far, and
     * the partitions whose aggregator answered and whose next sender START
     * is still to be sent */
    struct tag {
        uint64_t corr; /* NO_TAG: free */
        uint32_t part;
        bool sender;
    } *tag;
    uint64_t n_tags;
    double agg_l1, agg_rank, snd_dangling;
    uint32_t agg_got, snd_got, *next_senders, n_next, agg_parts; /* next_senders: agg_parts entries */
    double *ranks; /* fetch_ranks */
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

/* Sends one encoded message, keeping at most WINDOW in flight. */
static int send_bytes(pr_t *p, const char *type, uint64_t key, uint32_t mt, const uint8_t *buf, size_t len,
                      uint64_t *corr)
{
    while (p->inflight >= WINDOW)
        if (take_reply(p) != 0)
            return -1;
    gbc_err e;
    while ((e = gbc_send(p->c, type, key, mt, buf, len, corr)) == GBC_ERR_TIMEOUT && p->inflight > 0)
        if (take_reply(p) != 0) /* backpressure: make room */
            return -1;
    if (e != GBC_OK) {
        fprintf(stderr, PROG ": sending to %s: %s (%s)\n", type, gbc_strerror(e), gbc_last_error());
        return -1;
    }
    p->inflight++;
    return 0;
}

/* Packs m and sends it. */
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
    return send_bytes(p, type, key, mt, buf, len, NULL);
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

/* A START's reply: which grain answered it (by its tag), and its sums. */
static int on_result(pr_t *p, const gbc_reply_t *r)
{
    struct tag *t = &p->tag[r->correlation_id & (p->n_tags - 1)];
    if (r->correlation_id == NO_TAG || t->corr != r->correlation_id ||
        (!t->sender && p->n_next >= p->agg_parts)) {
        fprintf(stderr, PROG ": a reply to request %" PRIu64 ", which was not sent while iterating\n",
                r->correlation_id);
        return -1;
    }
    const bool sender = t->sender;
    const uint32_t part = t->part;
    t->corr = NO_TAG;
    Gpubridge__RankAggregationResult *m = gpubridge__rank_aggregation_result__unpack(NULL, r->payload_len, r->payload);
    if (!m) {
        fprintf(stderr, PROG ": %s sent a reply that is not a RankAggregationResult\n", sender ? SENDER : AGGREGATOR);
        return -1;
    }
    if (sender) {
        p->snd_dangling += m->dangling_rank;
        p->snd_got++;
    } else {
        p->agg_l1 += m->l1_delta;
        p->agg_rank += m->rank_sum;
        p->agg_got++;
        p->next_senders[p->n_next++] = part;
    }
    gpubridge__rank_aggregation_result__free_unpacked(m, NULL);
    return 0;
}

/* A StartIterationCommand, encoded once for all partitions of a round. */
typedef struct start_msg {
    uint8_t buf[64];
    size_t len;
} start_msg_t;

static void start_encode(start_msg_t *sm, const opts_t *o, uint32_t it, double dangling, uint32_t n)
{
    Gpubridge__StartIterationCommand sc = GPUBRIDGE__START_ITERATION_COMMAND__INIT;
    sc.iteration = it;
    sc.damping = o->damping;
    sc.tolerance = o->tolerance;
    sc.node_count = n;
    sc.dangling_rank = dangling;
    sm->len = protobuf_c_message_pack(&sc.base, sm->buf); /* at most 5 fields of <= 10 bytes: fits */
}

static int start_send(pr_t *p, bool sender, uint32_t q, const start_msg_t *sm)
{
    uint64_t corr = 0;
    if (send_bytes(p, sender ? SENDER : AGGREGATOR, q,
                   GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION, sm->buf, sm->len,
                   &corr) != 0)
        return -1;
    struct tag *t = &p->tag[corr & (p->n_tags - 1)];
    if (t->corr != NO_TAG) { /* cannot happen with the client's ids; refuse rather than mix replies up */
        fprintf(stderr, PROG ": requests %" PRIu64 " and %" PRIu64 " share a tag slot\n", t->corr, corr);
        return -1;
    }
    *t = (struct tag){corr, q, sender};
    return 0;
}

/* Iteration 0's senders, before the first iteration. */
static int senders_first(pr_t *p, uint32_t parts, uint32_t n)
{
    start_msg_t sm;
    start_encode(&sm, p->o, 0, 0.0, n);
    p->on_reply = on_result;
    p->snd_dangling = 0;
    p->snd_got = 0;
    p->n_next = 0;
    for (uint32_t q = 0; q < parts; q++)
        if (start_send(p, true, q, &sm) != 0)
            return -1;
    while (p->snd_got < parts)
        if (take_reply(p) != 0)
            return -1;
    p->on_reply = NULL;
    return 0;
}

/* Iteration it: the aggregators' round with the senders' dangling rank,
 * and (when next) iteration it + 1's senders, each sent when its partition's
 * aggregator has answered. agg_s is when the last aggregator answered. */
static int iterate(pr_t *p, uint32_t parts, uint32_t it, uint32_t n, bool next, double *agg_s)
{
    start_msg_t agg, snd;
    start_encode(&agg, p->o, it, p->snd_dangling, n);
    start_encode(&snd, p->o, it + 1, 0.0, n);
    p->on_reply = on_result;
    p->agg_l1 = p->agg_rank = p->snd_dangling = 0;
    p->agg_got = p->snd_got = p->n_next = 0;
    *agg_s = 0;
    uint32_t snd_sent = 0;
    for (uint32_t q = 0; q < parts; q++)
        if (start_send(p, false, q, &agg) != 0)
            return -1;
    while (p->agg_got < parts || snd_sent < (next ? parts : 0) || p->snd_got < snd_sent) {
        while (next && snd_sent < p->n_next)
            if (start_send(p, true, p->next_senders[snd_sent++], &snd) != 0)
                return -1;
        if (p->inflight && take_reply(p) != 0)
            return -1;
        if (!*agg_s && p->agg_got == parts)
            *agg_s = now_s();
    }
    p->on_reply = NULL;
    return 0;
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
    uint64_t *first = partition(&pg, parts);
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
    if (load(&p, &pg, first, parts) != 0)
        goto out;

    /* Each iteration's time runs from its aggregators' START to the last
     * reply it waits for; the first sender round counts in iteration 1. */
    uint32_t it = 0;
    double delta = INFINITY, total_s = 0, agg_total_s = 0, rank_sum = 0;
    bool converged = false;
    double ts = now_s();
    if (o.max_iter && senders_first(&p, parts, pg.n) != 0)
        goto out;
    for (it = 0; it < o.max_iter && !converged; it++) {
        const double dangling = p.snd_dangling;
        double agg_s;
        if (iterate(&p, parts, it, pg.n, it + 1 < o.max_iter, &agg_s) != 0)
            goto out;
        const double te = now_s(), dt = te - ts;
        total_s += dt;
        agg_total_s += agg_s - ts;
        delta = p.agg_l1;
        rank_sum = p.agg_rank;
        converged = delta < o.tolerance;
        if (!o.quiet)
            fprintf(stderr,
                    "iteration %3u: L1 delta %.3e  rank sum %.6f  dangling %.3e  %8.3f ms (aggregators done at %.3f)\n",
                    it + 1, delta, rank_sum, dangling, dt * 1e3, (agg_s - ts) * 1e3);
        ts = te;
    }
    if (fetch_ranks(&p, first, parts, ranks, pg.n) != 0)
        goto out;
    const double per_iter = it ? total_s / it : 0, per_agg = it ? agg_total_s / it : 0;
    printf("pagerank: %u vertices, %" PRIu64 " edges, %u partitions, mode %s\n", pg.n, pg.m, parts, mode);
    printf("%s after %u iterations (L1 delta %.3e, tolerance %.1e); %.3f ms per iteration (aggregators done at "
           "%.3f), %.3f G edges/s\n",
           converged ? "converged" : "NOT converged", it, delta, o.tolerance, per_iter * 1e3, per_agg * 1e3,
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
               "\"iterations\":%u,\"converged\":%s,\"l1_delta\":%.6e,\"ms_per_iter\":%.4f,\"aggregators_done_ms\":%.4f,"
               "\"edges_per_s\":%.6e}\n",
               mode, pg.n, pg.m, parts, it, converged ? "true" : "false", delta, per_iter * 1e3, per_agg * 1e3,
               per_iter > 0 ? pg.m / per_iter : 0.0);
    status = converged || o.allow_unconverged ? 0 : 1;
    if (!converged)
        fprintf(stderr, PROG ": not converged within %u iterations\n", o.max_iter);
out:
    gbc_client_destroy(&c);
    free(p.next_senders);
    free(p.tag);
    free(first);
    free(ranks);
    gb_pull_free(&pg);
    gb_graph_destroy(&g);
    return status;
}
