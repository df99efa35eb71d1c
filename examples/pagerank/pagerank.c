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
 * When the step stops shrinking (STALL_ITERS), the ranks are at their float32
 * rounding floor and the run stops there.
 *
 * Exit status: 0 converged, or stopped at the rounding floor, or --max-iter
 * reached with --allow-unconverged, with the error bound within --max-error;
 * 1 an error (ranks failing the check included), 2 usage. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpubridge/client.h"
#include "graph.h"
#include "pr_client.h"
#include "pr_output.h"

static const char usage_text[] =
    "usage: " PROG " [OPTIONS] (--graph FILE | --kron SCALE)\n"
    "\n"
    "PageRank through a running bridge's pagerank.sender / pagerank.aggregator grains.\n"
    "\n"
    "  -g, --graph FILE        edge list: a line 'source target' per edge, two unsigned\n"
    "                          decimal ids (< 2^64) separated by blanks; '#' or '%'\n"
    "                          comment lines, blank lines (docs/pagerank.md)\n"
    "  -K, --kron SCALE        generate a Graph500 Kronecker graph of 2^SCALE vertices\n"
    "                          (1..30)\n"
    "  -E, --edgefactor N      Kronecker edges per vertex (1..1024, default 16)\n"
    "  -S, --seed S            Kronecker seed (0..2^64-1, default 1)\n"
    "  -e, --endpoint E        bridge endpoint (default tcp://127.0.0.1:5555)\n"
    "  -p, --partitions P      grains per type (0..65536), at most the vertex count (0, the\n"
    "                          default: on a GPU one per worker block of the grain type,\n"
    "                          as its status reports (128 if it does not); 4 in cpu mode;\n"
    "                          times the bridge's devices)\n"
    "  -d, --damping D         damping factor, 0 <= D < 1 (default 0.85)\n"
    "  -t, --tolerance T       stop when the summed L1 delta is below T, 0..1 (default 1e-6),\n"
    "                          and small enough for --max-error (d/(1-d) x delta <= E/2);\n"
    "                          0: until a step changes nothing or stalls, which may take\n"
    "                          more than the default --max-iter\n"
    "      --max-error E       fail unless the host-verified L1 error bound of the ranks\n"
    "                          is at most E, 0 < E <= 2 (default: 100 x the tolerance, at\n"
    "                          least 1e-4, at most 2)\n"
    "  -m, --max-iter N        at most N iterations (1..1000000, default 100)\n"
    "  -k, --top K             print the K highest-ranked vertices (0..1000000, default\n"
    "                          10)\n"
    "  -o, --ranks FILE        write '# vertex pagerank', then 'vertex rank' for every\n"
    "                          vertex (in order of first appearance; only on exit 0)\n"
    "  -w, --write-edges FILE  write the graph as an edge list (for check_networkx.py)\n"
    "      --write-csr FILE    write the merged graph in binary (bench/bench_pagerank.py):\n"
    "                          'GBPRCSR1', u64 n, u64 m, u64 in_off[n+1], u32 in_src[m],\n"
    "                          u32 outdeg[n], little-endian\n"
    "      --ranks-bin FILE    write f64 ranks[n] in dense-id order (the CSR's ids)\n"
    "  -c, --chunk N           entries per loading message (2..1048576, default 4000: fits\n"
    "                          the default 16 KiB slot; lower it for smaller slots), at\n"
    "                          most what the bridge's limits let a message carry\n"
    "  -T, --timeout MS        reply deadline (1..3600000, default 60000; control\n"
    "                          requests, the first of which finds the bridge, wait\n"
    "                          1 to 10 s; JobEnd after a GraphInit that timed out\n"
    "                          waits at least 10 s)\n"
    "  -q, --quiet             no per-iteration progress\n"
    "  -j, --json              print a JSON line last\n"
    "      --allow-unconverged exit 0 when --max-iter is reached first, if the ranks'\n"
    "                          error bound is within --max-error\n"
    "      --two-rounds        a senders' round in every iteration (default: the\n"
    "                          aggregators write the next contributions themselves)\n"
    "      --first-device      on a bridge with several devices, every partition on\n"
    "                          the first (default: spread over all; for small graphs\n"
    "                          one device is faster, with half the messages a round)\n"
    "  -h, --help              this text\n"
    "\n"
    "A run whose L1 delta stops shrinking for 50 iterations (float32 ranks at their\n"
    "rounding floor, which a damping near 1 magnifies) stops there; it exits 0 when\n"
    "the error bound is within --max-error.\n"
    "Files are written whole or not at all. Exit status: 0 converged, 1 an error,\n"
    "2 usage.\n";

/* Decimal only: "010" is ten, not eight. */
static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
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
    if (errno == ERANGE && fabs(v) <= DBL_MIN)
        errno = 0; /* an underflow, as 1e-400: the nearest double (0 or subnormal) stands */
    if (errno || end == s || *end || !(v >= min && v <= max) || strpbrk(s, "xX") || isspace((unsigned char)s[0]))
        return false; /* decimal only: strtod also takes hexadecimal, and skips leading blanks */
    *out = v;
    return true;
}

/* ---- main ------------------------------------------------------------------ */

enum { OPT_ALLOW = 256, OPT_CSR, OPT_RBIN, OPT_TWO, OPT_MAXERR, OPT_FIRST };
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
    {"first-device", no_argument, 0, OPT_FIRST}, {0, 0, 0, 0}};

/* One option's value into o; false when it is out of range (or an empty
 * path). */
static bool set_opt(pr_opts_t *o, int ch, const char *arg)
{
    uint64_t v = 0;
    switch (ch) {
    case 'g': o->graph = arg; return arg[0] != 0;
    case 'K': return parse_u64(arg, 1, 30, &v) && (o->kron_scale = (unsigned)v);
    case 'E': return parse_u64(arg, 1, 1024, &v) && (o->edgefactor = (unsigned)v);
    case 'S': return parse_u64(arg, 0, UINT64_MAX, &o->seed);
    case 'e': o->endpoint = arg; return arg[0] != 0;
    case 'p': /* 0: chosen by mode once connected */
        return parse_u64(arg, 0, 65536, &v) && ((o->partitions = (uint32_t)v), true);
    case 'd': return parse_f64(arg, 0.0, 1.0, &o->damping) && o->damping < 1.0; /* 1: no unique PageRank */
    case 't': return parse_f64(arg, 0.0, 1.0, &o->tolerance);
    case 'm': return parse_u64(arg, 1, 1000000, &v) && (o->max_iter = (uint32_t)v);
    case 'k': return parse_u64(arg, 0, 1000000, &v) && ((o->top = (uint32_t)v), true);
    case 'o': o->ranks_out = arg; return arg[0] != 0;
    case 'w': o->edges_out = arg; return arg[0] != 0;
    case 'c': return parse_u64(arg, 2, 1u << 20, &v) && (o->chunk = (uint32_t)v);
    case 'T': return parse_u64(arg, 1, 3600000, &v) && (o->timeout_ms = (int)v);
    case OPT_CSR: o->csr_out = arg; return arg[0] != 0;
    case OPT_RBIN: o->ranks_bin = arg; return arg[0] != 0;
    case OPT_MAXERR: return parse_f64(arg, 0.0, 2.0, &o->max_error) && o->max_error > 0;
    default: return false;
    }
}

static int parse_args(int argc, char **argv, pr_opts_t *o)
{
    *o = (pr_opts_t){.endpoint = "tcp://127.0.0.1:5555", .edgefactor = 16, .seed = 1, .partitions = 0,
                  .chunk = 4000, .max_iter = 100, .top = 10, .damping = 0.85, .tolerance = 1e-6,
                  .timeout_ms = 60000};
    int ch;
    while ((ch = getopt_long(argc, argv, "g:K:E:S:e:p:d:t:m:k:o:w:c:T:qjh", lopts, NULL)) != -1) {
        switch (ch) {
        case 'q': o->quiet = true; break;
        case 'j': o->json = true; break;
        case OPT_ALLOW: o->allow_unconverged = true; break;
        case OPT_TWO: o->two_rounds = true; break;
        case OPT_FIRST: o->first_device = true; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case '?': fputs(usage_text, stderr); return -1;
        default:
            if (!set_opt(o, ch, optarg)) {
                const char *name = "?";
                for (const struct option *l = lopts; l->name; l++)
                    if (l->val == ch)
                        name = l->name;
                if (optarg[0])
                    fprintf(stderr, PROG ": bad value '%s' for --%s (see --help for its range)\n", optarg, name);
                else
                    fprintf(stderr, PROG ": --%s needs a value, not an empty string\n", name);
                return -1;
            }
        }
    }
    if (o->max_error == 0)
        o->max_error = o->tolerance * 100 > 2 ? 2 : o->tolerance * 100 > 1e-4 ? o->tolerance * 100 : 1e-4;
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s' (options only; see --help)\n", argv[optind]);
        return -1;
    }
    if ((!o->graph) == (!o->kron_scale)) {
        fprintf(stderr, PROG ": give exactly one of --graph FILE and --kron SCALE\n%s", usage_text);
        return -1;
    }
    return 0;
}

/* The files asked for, opened before any work so that a path that cannot be
 * written fails at once; each is renamed into place when complete. */
typedef struct outs {
    pr_out_t ranks, edges, csr, ranks_bin;
} outs_t;

static outs_t *sig_outs;
static volatile sig_atomic_t job_started;

/* Until the job starts there is nothing on the bridge to end: stop at once
 * (reading or generating a graph can take minutes), removing the temporary
 * files. Then: stop at the next reply and end the job, which frees its
 * arena for others. */
static void on_signal(int sig)
{
    (void)sig;
    if (job_started) {
        pr_interrupted = 1;
        pr_out_cancelled = 1;
        return;
    }
    if (sig_outs) {
        pr_out_unlink_tmp(&sig_outs->ranks);
        pr_out_unlink_tmp(&sig_outs->edges);
        pr_out_unlink_tmp(&sig_outs->csr);
        pr_out_unlink_tmp(&sig_outs->ranks_bin);
    }
    static const char msg[] = PROG ": interrupted\n";
    const ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* The graph, read or generated, merged (pg), and the files of it asked for. */
static int prepare_graph(const pr_opts_t *o, outs_t *out, gb_graph_t **g, gb_pull_t *pg)
{
    char err[512];
    double t0 = pr_now_s();
    memset(pg, 0, sizeof *pg);
    /* A Kronecker graph's peak in this driver: edges, CSR and pull arrays (16
     * bytes an edge), vertex arrays (48 a vertex). Past the host's memory
     * the allocations may still succeed (overcommit) and the writes then
     * get the driver killed: refuse first. */
    const double kron_n = o->kron_scale ? ldexp(1.0, (int)o->kron_scale) : 0;
    const double need = kron_n * (16.0 * o->edgefactor + 48),
                 have = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have) {
        fprintf(stderr, PROG ": --kron %u --edgefactor %u needs about %.1f GiB of memory; this host has %.1f GiB\n",
                o->kron_scale, o->edgefactor, need / (1u << 30), have / (1u << 30));
        return -1;
    }
    if (!o->quiet && o->graph) /* a large file takes a while before the next line */
        fprintf(stderr, "reading %s\n", o->graph);
    int rc = o->graph ? gb_graph_load_snap(o->graph, g, err, sizeof err)
                      : gb_graph_kronecker(o->kron_scale, o->edgefactor, o->seed, g, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return -1;
    }
    if (o->edges_out && write_edges(&out->edges, *g) != 0)
        return -1;
    if (gb_graph_pull(*g, pg) != 0) {
        fprintf(stderr, PROG ": out of memory preparing the graph\n");
        return -1;
    }
    if (o->csr_out && write_csr(&out->csr, pg) != 0)
        return -1;
    if (!o->quiet)
        fprintf(stderr, "graph: %u vertices, %" PRIu64 " edges (%" PRIu64 " after merging duplicates), "
                        "prepared in %.2f s\n", (*g)->n, (*g)->m, pg->m, pr_now_s() - t0);
    return 0;
}

/* Connects to the bridge; *parts: the partitions for its grains' mode. */
static int connect_bridge(const pr_opts_t *o, uint32_t n, gbc_client_t **c, char mode[16], uint32_t *parts,
                          uint32_t *devs, uint32_t *lanes, uint32_t *frame_bytes, gbc_limits_t *l)
{
    gbc_options_t copt;
    gbc_options_init(&copt);
    copt.timeout_ms = o->timeout_ms;
    copt.max_frame_bytes = PR_FRAME_BYTES;
    if (gbc_client_new(&o->endpoint, 1, &copt, c) != GBC_OK) {
        fprintf(stderr, PROG ": cannot connect to %s: %s\n", o->endpoint, gbc_last_error());
        return -1;
    }
    /* Connecting shows only as a reply or none: an ipc socket that is not
     * there is said at once, and the first request waits 10 s at most, not
     * the whole reply deadline. */
    struct stat sb;
    if (strncmp(o->endpoint, "ipc://", 6) == 0 && o->endpoint[6] != '@' /* '@': Linux's abstract sockets */ &&
        stat(o->endpoint + 6, &sb) != 0) {
        fprintf(stderr, PROG ": no bridge at %s: %s: %s (is the bridge running there?)\n", o->endpoint,
                o->endpoint + 6, strerror(errno));
        return -1;
    }
    /* The grains' mode: it also picks the default partition count. */
    gbc_grain_status_t gs = GBC_GRAIN_STATUS_INIT;
    if (gbc_ctl_status(*c, 0, AGGREGATOR, &gs, pr_ctl_ms(o)) != GBC_OK) {
        fprintf(stderr, PROG ": the bridge at %s has no usable %s: %s\n", o->endpoint, AGGREGATOR,
                gbc_last_error());
        return -1;
    }
    snprintf(mode, 16, "%s", gs.mode);
    /* The bridge's limits (*l; none from a bridge without LimitsRequest),
     * for pr_fit_chunks. One that reads frames smaller than the driver's
     * gets a client whose frames (batches of messages) fit. */
    const gbc_err e = gbc_ctl_limits(*c, 0, l, pr_ctl_ms(o));
    if (e != GBC_OK) {
        memset(l, 0, sizeof *l);
        if (e != GBC_ERR_STATUS) {
            fprintf(stderr, PROG ": asking the bridge for its limits: %s (%s)\n", gbc_strerror(e),
                    gbc_last_error());
            return -1;
        }
    }
    *frame_bytes = PR_FRAME_BYTES;
    if (l->max_message_size && l->max_message_size < PR_FRAME_BYTES) {
        *frame_bytes = l->max_message_size;
        copt.max_frame_bytes = l->max_message_size;
        gbc_client_destroy(c);
        if (gbc_client_new(&o->endpoint, 1, &copt, c) != GBC_OK) {
            fprintf(stderr, PROG ": cannot connect to %s: %s\n", o->endpoint, gbc_last_error());
            return -1;
        }
    }
    /* cpu: a few per core. GPU: one per worker block of the team kernel (one
     * per SM): a partition's message runs on one block, partition q on block
     * q mod lanes, so any other count leaves some blocks with one more
     * partition than the rest, and the round waits for them. */
    *devs = gs.n_devices ? gs.n_devices : 1; /* the grains span the bridge's devices (pr_client.h) */
    *lanes = gs.lanes;
    const uint32_t used = o->first_device ? 1 : *devs;
    *parts = o->partitions ? o->partitions : used * (strcmp(mode, "cpu") == 0 ? 4 : gs.lanes ? gs.lanes : 128);
    if (*parts > n)
        *parts = n;
    return 0;
}

typedef struct run_stats {
    uint32_t it;
    double delta, total_s, agg_total_s, goal;
    bool converged;
    bool stalled; /* the step stopped shrinking: the float32 ranks' rounding floor */
} run_stats_t;

/* Iterations without a new smallest step after which the step has stalled.
 * In exact arithmetic the L1 step shrinks at every iteration (by a factor d
 * at least); float32 ranks at their rounding floor flip between a few states
 * instead, and no number of iterations brings the step lower. */
#define STALL_ITERS 50

/* Iterates until the L1 step is below the goal (the tolerance, or less where
 * the damping would magnify it past --max-error: the error bound is about
 * d / (1 - d) times the step) or --max-iter. */
static int iterate(pr_t *p, const pr_opts_t *o, uint32_t parts, uint32_t n, run_stats_t *st)
{
    const double d = o->damping;
    *st = (run_stats_t){.delta = INFINITY, .goal = o->tolerance};
    if (d > 0 && (1 - d) * o->max_error / (2 * d) < st->goal)
        st->goal = (1 - d) * o->max_error / (2 * d);
    /* Each iteration's time runs from its aggregators' START to the last
     * reply it waits for; the first sender round counts in iteration 1. */
    double ts = pr_now_s();
    if (pr_senders_first(p, parts, n) != 0)
        return -1;
    double min_delta = INFINITY;
    uint32_t since_min = 0;
    for (st->it = 0; st->it < o->max_iter && !st->converged && !st->stalled; st->it++) {
        const double dangling = p->snd_dangling;
        double agg_s;
        if (pr_iterate(p, parts, st->it, n, st->it + 1 < o->max_iter, &agg_s) != 0)
            return -1;
        const double te = pr_now_s(), dt = te - ts;
        st->total_s += dt;
        st->agg_total_s += agg_s - ts;
        st->delta = p->agg_l1;
        if (!(fabs(p->agg_rank - 1.0) < 1e-3)) { /* float32 ranks, double sums: far less than this */
            fprintf(stderr,
                    PROG ": the ranks sum to %.6f after iteration %u, not 1: the grains did not run the "
                         "iteration this driver asked for (a bridge that predates next_contributions? "
                         "--two-rounds works with one)\n",
                    p->agg_rank, st->it + 1);
            return -1;
        }
        st->converged = st->delta < st->goal || st->delta == 0;
        if (st->delta < min_delta) {
            min_delta = st->delta;
            since_min = 0;
        } else if (++since_min >= STALL_ITERS) {
            st->stalled = true;
        }
        if (!o->quiet)
            fprintf(stderr,
                    "iteration %3u: L1 delta %.3e  rank sum %.6f  dangling %.3e  %8.3f ms (aggregators done at %.3f)\n",
                    st->it + 1, st->delta, p->agg_rank, dangling, dt * 1e3, (agg_s - ts) * 1e3);
        ts = te;
    }
    return 0;
}

/* The ranks as read back, checked against the graph on the host; 0 when
 * their error bound is within --max-error. */
static int check_bound(const pr_opts_t *o, const gb_pull_t *pg, const double *ranks, const run_stats_t *st,
                       double *bound)
{
    *bound = pr_residual(pg, ranks, o->damping) / (1 - o->damping);
    if (*bound <= o->max_error)
        return 0;
    if (st->stalled && *bound * 1.05 <= 2.0)
        fprintf(stderr, PROG ": the L1 step stopped shrinking at %.3e (goal %.1e) after %u iterations: the "
                        "float32 rounding of the ranks, which damping %g magnifies, and more iterations do not "
                        "help; L1 error bound %.3e exceeds %.1e (--max-error): raise --max-error to at least "
                        "%.1e, or lower --damping\n", st->delta, st->goal, st->it, o->damping, *bound,
                o->max_error, *bound * 1.05);
    else if (st->stalled)
        fprintf(stderr, PROG ": the L1 step stopped shrinking at %.3e (goal %.1e) after %u iterations: the "
                        "float32 rounding of the ranks, which damping %g magnifies; L1 error bound %.3e is past "
                        "what --max-error takes (2): lower --damping\n", st->delta, st->goal, st->it, o->damping,
                *bound);
    else if (st->converged && st->delta == 0 && *bound * 1.05 <= 2.0 && *bound <= 100 * 1e-7 / (1 - o->damping))
        fprintf(stderr, PROG ": the ranks stopped changing in float32 after %u iteration(s) (L1 step 0), but "
                        "their L1 error bound %.3e (from the host's residual) exceeds %.1e (--max-error): the "
                        "float32 rounding of the ranks, which damping %g magnifies (about 1e-7 / (1 - d)); raise "
                        "--max-error to at least %.1e, or lower --damping\n", st->it, *bound, o->max_error,
                o->damping, *bound * 1.05);
    else if (st->converged && *bound * 1.05 <= 2.0 && *bound <= 10 * 1e-7 / (1 - o->damping))
        fprintf(stderr, PROG ": converged after %u iteration(s) (L1 step %.3e), but the ranks' L1 error bound "
                        "%.3e (from the host's residual) exceeds %.1e (--max-error), within what the float32 "
                        "rounding of the ranks comes to at damping %g (about 1e-7 / (1 - d)); raise --max-error "
                        "to at least %.1e, or lower --damping\n", st->it, st->delta, *bound, o->max_error,
                o->damping, *bound * 1.05);
    else if (!st->converged)
        fprintf(stderr, PROG ": not converged within %u iterations (L1 delta %.3e, goal %.1e): L1 error bound "
                        "%.3e exceeds %.1e (--max-error); raise --max-iter\n", o->max_iter, st->delta, st->goal,
                *bound, o->max_error);
    else
        fprintf(stderr, PROG ": the ranks read back are not this graph's PageRank: L1 error bound %.3e (from the "
                        "host's residual) exceeds %.1e (--max-error)%s\n", *bound, o->max_error,
                o->damping > 0.99 ? "; a damping this close to 1 magnifies the float32 rounding of the ranks "
                                    "(about 1e-7 / (1 - d)): raise --max-error" : "");
    return -1;
}

static void report(const pr_opts_t *o, const gb_graph_t *g, const gb_pull_t *pg, const double *ranks,
                   uint32_t parts, const char *mode, const run_stats_t *st, double bound)
{
    const double per_iter = st->it ? st->total_s / st->it : 0, per_agg = st->it ? st->agg_total_s / st->it : 0;
    printf("pagerank: %u vertices, %" PRIu64 " edges, %u partitions, mode %s\n", pg->n, pg->m, parts, mode);
    printf("%s after %u iterations (L1 delta %.3e, tolerance %.1e",
           st->converged ? "converged" : st->stalled ? "stopped at the float32 rounding floor" : "NOT converged",
           st->it, st->delta, o->tolerance);
    if (st->goal < o->tolerance)
        printf(", below %.1e for --max-error", st->goal);
    printf("; error bound %.3e); %.3f ms per iteration (aggregators done at %.3f), %.3f G edges/s\n", bound,
           per_iter * 1e3, per_agg * 1e3, per_iter > 0 ? pg->m / per_iter / 1e9 : 0.0);
    print_top(g, ranks, o->top);
}

/* --json: the run's one JSON line, printed last (after ranks written to stdout too). */
static void report_json(const gb_pull_t *pg, uint32_t parts, const char *mode, uint32_t job, const run_stats_t *st,
                        double bound)
{
    const double per_iter = st->it ? st->total_s / st->it : 0, per_agg = st->it ? st->agg_total_s / st->it : 0;
    printf("{\"bench\":\"pagerank\",\"mode\":\"%s\",\"job\":%u,\"vertices\":%u,\"edges\":%" PRIu64
           ",\"partitions\":%u,\"iterations\":%u,\"converged\":%s,\"stalled\":%s,\"l1_delta\":%.6e,"
           "\"error_bound\":%.6e,\"ms_per_iter\":%.4f,\"aggregators_done_ms\":%.4f,\"edges_per_s\":%.6e}\n",
           mode, job, pg->n, pg->m, parts, st->it, st->converged ? "true" : "false", st->stalled ? "true" : "false",
           st->delta, bound, per_iter * 1e3, per_agg * 1e3, per_iter > 0 ? pg->m / per_iter : 0.0);
    fflush(stdout);
}

/* A signal after the job ended (checking the ranks and writing them can
 * take seconds): the run stops with no ranks file, as during the job. */
static bool stopped(void)
{
    if (!pr_interrupted)
        return false;
    fprintf(stderr, PROG ": interrupted\n");
    return true;
}

static int run(const pr_opts_t *o, outs_t *out)
{
    gb_graph_t *g = NULL;
    gb_pull_t pg;
    gbc_client_t *c = NULL;
    gbc_limits_t limits = {0};
    char mode[16] = "?";
    uint32_t parts = 0, devs = 1, lanes = 0, frame_bytes = PR_FRAME_BYTES;
    uint64_t *first = NULL;
    double *ranks = NULL;
    pr_t p = {.o = o};
    int status = 1;
    if (prepare_graph(o, out, &g, &pg) != 0 || connect_bridge(o, pg.n, &c, mode, &parts, &devs, &lanes, &frame_bytes, &limits) != 0)
        goto out;
    first = pr_partition(&pg, parts);
    ranks = calloc(pg.n, sizeof *ranks);
    p = (pr_t){.c = c, .o = o, .next_senders = malloc(parts * sizeof *p.next_senders), .agg_parts = parts,
               .n_devs = devs, .lanes = lanes, .frame_bytes = frame_bytes, .key = malloc(parts * sizeof *p.key),
               .shift = malloc(parts * sizeof *p.shift)};
    p.n_tags = 1024;
    p.window = pr_window(parts);
    while (p.n_tags < 2ull * parts + p.window)
        p.n_tags *= 2;
    p.tag = malloc(p.n_tags * sizeof *p.tag);
    if (p.tag)
        for (uint64_t i = 0; i < p.n_tags; i++)
            p.tag[i].corr = NO_TAG;
    if (!first || !ranks || !p.next_senders || !p.tag || !p.key || !p.shift) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    run_stats_t st;
    double bound;
    pr_fit_chunks(&p, &limits);
    job_started = 1; /* from GraphInit on, a signal ends the job first */
    if (pr_load(&p, &pg, first, parts) != 0 || iterate(&p, o, parts, pg.n, &st) != 0 ||
        pr_fetch_ranks(&p, first, parts, ranks, pg.n) != 0)
        goto out;
    pr_end_job(&p);
    if (stopped() || check_bound(o, &pg, ranks, &st, &bound) != 0 || stopped())
        goto out;
    report(o, g, &pg, ranks, parts, mode, &st, bound);
    /* A stalled run whose bound passed check_bound is as close as float32
     * ranks get: more iterations would not change it. */
    const bool take = st.converged || st.stalled || o->allow_unconverged;
    if (!take)
        fprintf(stderr, PROG ": not converged within %u iterations (L1 delta %.3e, goal %.1e): raise --max-iter, "
                        "or --allow-unconverged to take these ranks (no files written)\n", o->max_iter, st.delta,
                st.goal);
    /* Both files written before either is put in place. */
    if (take) {
        const bool failed = (o->ranks_out && write_ranks(&out->ranks, g, ranks) != 0) ||
                            (o->ranks_bin && write_ranks_bin(&out->ranks_bin, ranks, pg.n) != 0);
        if (failed || pr_interrupted || pr_out_place(&out->ranks) != 0 || pr_out_place(&out->ranks_bin) != 0) {
            stopped(); /* says so when a signal stopped it */
            goto out;
        }
    }
    if (o->json)
        report_json(&pg, parts, mode, p.job, &st, bound);
    status = take ? 0 : 1;
out:
    pr_end_job(&p);
    gbc_limits_clear(&limits);
    gbc_client_destroy(&c);
    free(p.next_senders);
    free(p.tag);
    free(p.key);
    free(p.shift);
    free(first);
    free(ranks);
    gb_pull_free(&pg);
    gb_graph_destroy(&g);
    return status;
}

int main(int argc, char **argv)
{
    pr_opts_t o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    outs_t out = {0};
    sig_outs = &out;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction hup;
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) /* nohup: keep running */
        sigaction(SIGHUP, &sa, NULL); /* its terminal closed: end the job all the same */
    /* A file past the size limit (ulimit -f) fails its write, said, rather
     * than killing the driver with its job still held. */
    signal(SIGXFSZ, SIG_IGN);
    /* stdout closed early (| head): the files asked for are still written. */
    signal(SIGPIPE, SIG_IGN);
    int status = 1;
    if (pr_out_open(&out.ranks, o.ranks_out, false) == 0 && pr_out_open(&out.edges, o.edges_out, false) == 0 &&
        pr_out_open(&out.csr, o.csr_out, true) == 0 && pr_out_open(&out.ranks_bin, o.ranks_bin, true) == 0)
        status = run(&o, &out);
    pr_out_drop(&out.ranks);
    pr_out_drop(&out.edges);
    pr_out_drop(&out.csr);
    pr_out_drop(&out.ranks_bin);
    return status;
}
