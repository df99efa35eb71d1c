/* The PageRank driver's conversation with the bridge: requests in flight,
 * loading a graph into the grains, iterating, reading the ranks back
 * (pr_client.c). examples/pagerank/pagerank.c parses the options and reports.
 *
 * An iteration sends a StartIterationCommand to every sender (it writes
 * rank/out-degree of its vertices into device memory and reports its
 * dangling rank), then to every aggregator with the summed dangling rank (it
 * pulls the contributions, writes its vertices' new ranks and reports its L1
 * delta). The contributions never cross to the host. The aggregators need
 * every sender's contributions, but sender q of the next iteration needs only
 * aggregator q's ranks: it is sent as soon as aggregator q answers (the
 * grains keep two contribution buffers, by iteration parity), so an
 * iteration waits for one round of messages, not two.
 * By default there is no senders' round after the first: the aggregators'
 * START asks them to write the next iteration's contributions themselves
 * (next_contributions), which halves the messages per iteration;
 * --two-rounds keeps the senders' round.
 *
 * On a bridge with several devices (the aggregator's status lists them) the
 * partitions alternate between the devices (--first-device: all on the
 * first, still with keys the hash sends there): partition q's grains get a key
 * that the bridge's device hash (gbc_device_of_key) sends to device
 * q % devices and, there, to worker block q / devices of the team kernel.
 * Each device gets a GraphInit of its own, sized for the in-edges of its
 * partitions, whose offsets are sent relative to that device's edges; the
 * grains copy their contributions to the other devices themselves. */
#ifndef GB_PR_CLIENT_H
#define GB_PR_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpubridge/client.h"
#include "graph.h"

#define PROG "pagerank"
#define SENDER "pagerank.sender"
#define AGGREGATOR "pagerank.aggregator"
/* Requests in flight at most: WINDOW, or the partition count when larger,
 * so that a round's STARTs all go out at once (pr_window). Past what the
 * rings take, the bridge holds them (backpressure). */
#define WINDOW 256

/* The largest frame the driver's client sends (its gbc_options_t.max_frame_bytes):
 * a chunk is fitted to it as well as to the bridge's limits. */
#define PR_FRAME_BYTES (1u << 20)

typedef struct pr_opts {
    const char *endpoint, *graph, *ranks_out, *edges_out, *csr_out, *ranks_bin;
    unsigned kron_scale, edgefactor;
    uint64_t seed;
    uint32_t partitions, chunk, max_iter, top;
    double damping, tolerance, max_error;
    int timeout_ms;
    bool quiet, json, allow_unconverged, two_rounds, first_device;
} pr_opts_t;

#define NO_TAG UINT64_MAX

/* A control call's deadline: the reply deadline, from 1 s to 10 s (status,
 * limits and deactivations answer at once, or the bridge is gone; the first
 * one also waits for the connection). */
static inline int pr_ctl_ms(const pr_opts_t *o)
{
    return o->timeout_ms < 1000 ? 1000 : o->timeout_ms < 10000 ? o->timeout_ms : 10000;
}

typedef struct pr pr_t;
struct pr {
    gbc_client_t *c;
    const pr_opts_t *o;
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
    uint32_t window; /* requests in flight at most: pr_window(agg_parts) */
    double *ranks; /* fetch_ranks */
    uint32_t n;
    size_t got;
    /* This run's job (pagerank.proto): the upper half of every key; replies
     * must name it. job_live: GraphInit claimed it on some device and no
     * JobEnd went yet; claimed: those devices (bit d: device d). */
    uint32_t job;
    bool job_live;
    bool late_init; /* a GraphInit timed out: the bridge may carry it out late (JobEnd waits for it) */
    uint32_t claimed;
    uint32_t keys; /* partitions whose grains the job may have activated: released after JobEnd */
    const uint64_t *first; /* partition q holds [first[q], first[q+1]) */
    /* The bridge's devices and the team kernel's worker blocks (its status);
     * partition q's grains have key[q]; on its device its edges start at
     * in_off[first[q]] + shift[q]. Device d holds m_dev[d] edges; lead[d]:
     * its first partition (it gets the device's GraphInit and JobEnd), or
     * UINT32_MAX when it has none. Set by pr_load. */
    uint32_t n_devs, lanes;
    uint64_t *key;
    int64_t *shift;
    uint64_t m_dev[GBC_MAX_DEVICES];
    uint32_t lead[GBC_MAX_DEVICES];
    /* Entries a message: --chunk (in-offsets: half of it), at most what the
     * bridge takes (pr_fit_chunks). */
    uint32_t chunk_deg, chunk_off, chunk_edge, chunk_query;
    uint32_t frame_bytes; /* the largest frame its client sends: PR_FRAME_BYTES, or the bridge's
                           * max_message_size when smaller */
};

/* Requests in flight at most for parts partitions: one round whole (a START
 * held back until an earlier one is answered would add a partition's whole
 * time to the round). */
static inline uint32_t pr_window(uint32_t parts) { return parts > WINDOW ? parts : WINDOW; }

/* Set by SIGINT / SIGTERM: the driver stops at its next reply (and ends its
 * job, freeing its arena). */
extern volatile sig_atomic_t pr_interrupted;

/* Seconds on the monotonic clock. */
double pr_now_s(void);

/* Partition q holds vertices [first[q], first[q+1]) (parts + 1 entries,
 * malloc'd; NULL when out of memory), balanced by in-edges plus vertices. */
uint64_t *pr_partition(const gb_pull_t *g, uint32_t parts);

/* p->chunk_*: --chunk, lowered to what the bridge's limits l (LimitsRequest;
 * zeroed from a bridge without it: --chunk as given) let one message of each
 * kind carry in a frame of p->frame_bytes, so that no --chunk in its range
 * makes a message the bridge refuses. */
void pr_fit_chunks(pr_t *p, const gbc_limits_t *l);

/* This job's keys and each device's share of the edges (p->key, shift,
 * m_dev, lead), from p->job, n_devs, lanes and o->first_device. One device:
 * key job << 32 | q. Several: partition q goes to device d = q % used
 * (used: every device, or the first alone), with the lowest free low half
 * whose key the device hash sends to d and whose key modulo the worker
 * blocks is q / used modulo them, so that each device's blocks take its
 * partitions in turn. 0, or -1 (said) when no low half fits. */
int pr_plan(pr_t *p, const gb_pull_t *g, const uint64_t *first, uint32_t parts);

/* Lays the graph out in the grains under a new job id (a few tries when the
 * id is in use) and loads it, with progress on stderr unless quiet. 0, or -1
 * with the reason on stderr (as every call below). */
int pr_load(pr_t *p, const gb_pull_t *g, const uint64_t *first, uint32_t parts);

/* Frees the job's slice of the arena (JobEnd), when it holds one, and the
 * activations of its grains (DeactivateGrain). */
void pr_end_job(pr_t *p);

/* The L1 norm of G(x) - x, G one power iteration of the exact recurrence, in
 * double on the host: ||x - x*||_1 <= it / (1 - d) for the PageRank x*. */
double pr_residual(const gb_pull_t *g, const double *x, double d);

/* Iteration 0's senders, before the first iteration: p->snd_dangling. */
int pr_senders_first(pr_t *p, uint32_t parts, uint32_t n);

/* Iteration it: the aggregators (p->agg_l1, p->agg_rank), and when next,
 * iteration it + 1's contributions, by the aggregators or (o->two_rounds) the
 * senders (p->snd_dangling). *agg_s: when the last aggregator answered. */
int pr_iterate(pr_t *p, uint32_t parts, uint32_t it, uint32_t n, bool next, double *agg_s);

/* Every rank, read back from the aggregators into ranks[n]. */
int pr_fetch_ranks(pr_t *p, const uint64_t *first, uint32_t parts, double *ranks, uint32_t n);

#endif
