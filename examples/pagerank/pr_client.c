/* The PageRank driver's conversation with the bridge (pr_client.h). */
#include "pr_client.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pagerank.pb-c.h"

/* The grain of partition q of this run's job. */
static uint64_t key_of(const pr_t *p, uint32_t q) { return p->key[q]; }

double pr_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- requests ------------------------------------------------------------ */

volatile sig_atomic_t pr_interrupted;

/* Takes one reply; every reply must be OK. Passes it to p->on_reply. */
static int take_reply(pr_t *p)
{
    if (pr_interrupted) {
        fprintf(stderr, PROG ": interrupted\n");
        return -1;
    }
    gbc_reply_t r;
    gbc_err e = gbc_poll(p->c, &r, p->o->timeout_ms);
    if (e == GBC_ERR_STATUS) {
        fprintf(stderr, PROG ": request %" PRIu64 " failed: %s: %s%s\n", r.correlation_id,
                gbc_status_name(r.status), r.error ? r.error : "(no text)",
                r.error && strstr(r.error, "activation table full")
                    ? " (this run holds a grain of each PageRank type per partition: lower --partitions)"
                    : "");
        gbc_reply_clear(&r);
        p->inflight--; /* answered: pr_end_job waits for the rest only */
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

/* Sends one encoded message, keeping at most p->window in flight. */
static int send_bytes(pr_t *p, const char *type, uint64_t key, uint32_t mt, const uint8_t *buf, size_t len,
                      uint64_t *corr)
{
    while (p->inflight >= p->window)
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
uint64_t *pr_partition(const gb_pull_t *g, uint32_t parts)
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

/* A job id: random, never 0 (job 0 is what clients without jobs use). */
static uint32_t new_job_id(void)
{
    uint32_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &v, sizeof v) != (ssize_t)sizeof v)
            v = 0;
        close(fd);
    }
    if (!v)
        v = (uint32_t)getpid() * 2654435761u ^ (uint32_t)(pr_now_s() * 1e6);
    return v ? v : 1;
}

/* Frees the activation of this job's grain of type at partition q. Without
 * it an activation stays in the bridge's table for its grain type's
 * collection age (900 s by default), then in its store of evicted
 * activations until the bridge restarts: after a few runs with many
 * partitions every later GraphInit gets STATUS_BUSY. A key without an
 * activation (STATUS_NO_ACTIVATION) is fine. Returns -1 when the bridge did
 * not answer or refused. */
static int release_key(pr_t *p, const char *type, uint32_t q)
{
    const gbc_err e = gbc_ctl_deactivate_grain(p->c, type, key_of(p, q), pr_ctl_ms(p->o));
    return e == GBC_OK || (e == GBC_ERR_STATUS && gbc_last_status() == GBC_STATUS_NO_ACTIVATION) ? 0 : -1;
}

/* pr_client.h. */
int pr_plan(pr_t *p, const gb_pull_t *g, const uint64_t *first, uint32_t parts)
{
    const uint32_t nd = p->n_devs ? p->n_devs : 1, w = p->lanes ? p->lanes : 1;
    const uint32_t used = p->o->first_device ? 1 : nd;
    uint64_t next[GBC_MAX_DEVICES] = {0};
    for (uint32_t d = 0; d < GBC_MAX_DEVICES; d++) {
        p->m_dev[d] = 0;
        p->lead[d] = UINT32_MAX;
    }
    for (uint32_t q = 0; q < parts; q++) {
        const uint32_t d = q % used;
        uint64_t key = (uint64_t)p->job << 32 | q;
        if (nd > 1) {
            uint64_t lo = next[d];
            while (lo <= UINT32_MAX && (gbc_device_of_key((uint64_t)p->job << 32 | lo, nd) != d ||
                                        ((uint64_t)p->job << 32 | lo) % w != (q / used) % w))
                lo++;
            if (lo > UINT32_MAX) { /* the hash reaches every residue long before: a broken hash */
                fprintf(stderr, PROG ": no key of job %u lands partition %u on device %u\n", p->job, q, d);
                return -1;
            }
            next[d] = lo + 1;
            key = (uint64_t)p->job << 32 | lo;
        }
        p->key[q] = key;
        if (p->lead[d] == UINT32_MAX)
            p->lead[d] = q;
        p->shift[q] = (int64_t)p->m_dev[d] - (int64_t)g->in_off[first[q]];
        p->m_dev[d] += g->in_off[first[q + 1]] - g->in_off[first[q]];
    }
    return 0;
}

/* The devices that hold a partition: GraphInit and JobEnd go to each. */
static uint32_t dev_count(const pr_t *p) { return p->n_devs ? p->n_devs : 1; }

/* "E0 + E1 + ... edges" of the devices, for the progress line ("" on one). */
static const char *devs_text(const pr_t *p)
{
    static char t[256];
    t[0] = 0;
    for (uint32_t d = 0, at = 0; dev_count(p) > 1 && d < dev_count(p) && at < sizeof t - 32; d++)
        at += (uint32_t)snprintf(t + at, sizeof t - at, "%s%" PRIu64 "%s", d ? " + " : "", p->m_dev[d],
                                 d + 1 == dev_count(p) ? " edges" : "");
    return t;
}

/* One ProtobufC message m of type mt to device d's lead sender, waiting up
 * to ms for its reply (*r, to be cleared). */
static gbc_err lead_call(pr_t *p, uint32_t d, uint32_t mt, const ProtobufCMessage *m, gbc_reply_t *r, int ms)
{
    uint8_t buf[64]; /* GraphInit and JobEnd: a few varints */
    const size_t len = protobuf_c_message_pack(m, buf);
    return gbc_call(p->c, SENDER, key_of(p, p->lead[d]), mt, buf, len, r, ms);
}

/* JobEnd after a GraphInit whose reply timed out waits at least this
 * long: it frees the job's arena slice for others, and queues behind that
 * GraphInit on the same grain. */
#define JOB_END_MIN_MS 10000

static int job_end_on(pr_t *p, uint32_t d)
{
    Gpubridge__JobEnd je = GPUBRIDGE__JOB_END__INIT;
    gbc_reply_t r;
    const int ms = p->late_init && p->o->timeout_ms < JOB_END_MIN_MS ? JOB_END_MIN_MS : p->o->timeout_ms;
    gbc_err e = lead_call(p, d, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_JOB_END, &je.base, &r, ms);
    if (e != GBC_OK)
        fprintf(stderr,
                PROG ": warning: JobEnd for job %u%s: %s (if the bridge did not carry it out, the job's arena "
                     "slice stays held until the bridge restarts)\n",
                p->job, dev_count(p) > 1 ? " on one of the bridge's devices" : "",
                e == GBC_ERR_STATUS && r.error ? r.error : gbc_strerror(e));
    gbc_reply_clear(&r);
    return e == GBC_OK || e == GBC_ERR_STATUS ? 0 : -1;
}

/* GraphInit with new_job on each device that holds a partition, under fresh
 * job ids until one is free on all (another driver may hold the id drawn). */
static int graph_init(pr_t *p, const gb_pull_t *g, const uint64_t *first, uint32_t parts)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        p->job = new_job_id();
        if (pr_plan(p, g, first, parts) != 0)
            return -1;
        bool in_use = false;
        for (uint32_t d = 0; d < dev_count(p); d++) {
            if (p->lead[d] == UINT32_MAX)
                continue;
            Gpubridge__GraphInit gi = GPUBRIDGE__GRAPH_INIT__INIT;
            gi.node_count = g->n;
            gi.edge_count = p->m_dev[d];
            gi.new_job = true;
            gbc_reply_t r;
            gbc_err e = lead_call(p, d, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT, &gi.base, &r,
                                  p->o->timeout_ms);
            in_use = e == GBC_ERR_STATUS && r.error && strstr(r.error, "in use");
            if (e == GBC_OK) {
                gbc_reply_clear(&r);
                p->job_live = true;
                p->claimed |= 1u << d;
                continue;
            }
            if (!in_use) {
                for (uint32_t k = 0; k < dev_count(p); k++) /* the devices claimed have their lead activated */
                    if ((p->claimed >> k & 1u) && p->lead[k] + 1 > p->keys)
                        p->keys = p->lead[k] + 1;
                fprintf(stderr, PROG ": GraphInit (%u vertices, %" PRIu64 " edges%s) failed: %s%s%s (job %u)\n",
                        g->n, p->m_dev[d], dev_count(p) > 1 ? " of one device's partitions" : "",
                        e == GBC_ERR_STATUS ? gbc_status_name(r.status) : gbc_strerror(e),
                        e == GBC_ERR_STATUS ? ": " : " ",
                        e == GBC_ERR_STATUS && r.error ? r.error : gbc_last_error(), p->job);
                gbc_reply_clear(&r);
                /* Refused (no room, say): its sender was activated all the same.
                 * No reply (a timeout): the bridge may yet carry it out, so
                 * JobEnd goes there too, after it on the same grain. Either
                 * way pr_end_job frees what was claimed, and the grains. */
                p->keys = p->lead[d] + 1 > p->keys ? p->lead[d] + 1 : p->keys;
                p->job_live = true;
                if (e == GBC_ERR_TIMEOUT) {
                    p->claimed |= 1u << d;
                    p->late_init = true;
                }
                return -1;
            }
            gbc_reply_clear(&r);
            break;
        }
        if (!in_use)
            return 0;
        for (uint32_t d = 0; d < dev_count(p); d++) /* in use on one device: give the others back, draw again */
            if (p->claimed >> d & 1u) {
                job_end_on(p, d);
                release_key(p, SENDER, p->lead[d]);
            }
        p->claimed = 0;
        p->job_live = false;
    }
    fprintf(stderr, PROG ": every job id tried is in use on the bridge\n");
    return -1;
}

void pr_end_job(pr_t *p)
{
    if (!p->job_live)
        return;
    p->job_live = false;
    while (p->inflight > 0) { /* replies to requests abandoned on an error */
        gbc_reply_t r;
        if (gbc_poll(p->c, &r, p->o->timeout_ms) != GBC_OK && r.correlation_id == 0)
            break;
        gbc_reply_clear(&r);
        p->inflight--;
    }
    int answered = 0;
    for (uint32_t d = 0; d < dev_count(p); d++)
        if ((p->claimed >> d & 1u) && job_end_on(p, d) != 0)
            answered = -1;
    p->claimed = 0;
    /* The job's grains, unless the bridge stopped answering (each would wait
     * its deadline). */
    for (uint32_t q = 0; q < p->keys && answered == 0; q++)
        if (release_key(p, SENDER, q) != 0 || release_key(p, AGGREGATOR, q) != 0) {
            fprintf(stderr, PROG ": warning: releasing job %u's grains: %s (the rest stay activated: for the "
                            "bridge's collection age, then evicted until it restarts)\n", p->job, gbc_last_error());
            break;
        }
    p->keys = 0;
}

double pr_residual(const gb_pull_t *g, const double *x, double d)
{
    double dangling = 0, res = 0;
    for (uint32_t v = 0; v < g->n; v++)
        if (!g->outdeg[v])
            dangling += x[v];
    const double base = (1 - d) / g->n + d * dangling / g->n;
    for (uint32_t v = 0; v < g->n; v++) {
        double s = 0;
        for (uint64_t e = g->in_off[v]; e < g->in_off[v + 1]; e++)
            s += x[g->in_src[e]] / g->outdeg[g->in_src[e]];
        res += fabs(base + d * s - x[v]);
    }
    return res;
}

/* At most want entries of `bytes` bytes each (a packed varint's most) in a
 * message of type mt, as the limits say (none: want), in a frame the
 * client sends (frame bytes). */
static uint32_t fit(const gbc_limits_t *l, const char *type, uint32_t mt, uint32_t want, uint32_t bytes,
                    uint32_t frame)
{
    const gbc_msg_limits_t *m = gbc_limits_find(l, type, mt);
    if (!m)
        return want;
    const uint64_t room = frame > 256 ? frame - 256 : 0;
    const uint64_t payload = m->max_payload < room ? m->max_payload : room;
    uint64_t most = payload > 64 ? (payload - 64) / bytes : 1; /* 64: the other fields (256: the envelope's) */
    if (m->max_elements && m->max_elements < most)
        most = m->max_elements;
    return most < 1 ? 1 : want < most ? want : (uint32_t)most;
}

void pr_fit_chunks(pr_t *p, const gbc_limits_t *l)
{
    const uint32_t chunk = p->o->chunk, F = p->frame_bytes ? p->frame_bytes : PR_FRAME_BYTES;
    p->chunk_off = chunk / 2 ? chunk / 2 : 1;
    p->chunk_deg = fit(l, SENDER, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES, chunk, 5, F);
    p->chunk_off = fit(l, AGGREGATOR, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS,
                       p->chunk_off, 10, F);
    p->chunk_edge = fit(l, AGGREGATOR, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES, chunk, 5, F);
    /* a query's limit is on the ranks it asks for (its reply's size) */
    p->chunk_query = fit(l, AGGREGATOR, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY, chunk, 1, F);
}

int pr_load(pr_t *p, const gb_pull_t *g, const uint64_t *first, uint32_t parts)
{
    const uint32_t chunk = p->chunk_deg, ochunk = p->chunk_off, echunk = p->chunk_edge;
    double t0 = pr_now_s();
    p->first = first;
    uint64_t *offs = malloc((size_t)ochunk * sizeof *offs); /* one chunk's offsets, shifted */
    if (!offs) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    if (graph_init(p, g, first, parts) != 0)
        goto fail;
    for (uint32_t q = 0; q < parts; q++) {
        p->keys = q + 1; /* the grains this job may have activated: released at its end */
        Gpubridge__PartitionInit pi = GPUBRIDGE__PARTITION_INIT__INIT;
        pi.first_node = first[q];
        pi.node_count = first[q + 1] - first[q];
        if (send_msg(p, SENDER, key_of(p, q), GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT,
                     &pi.base) ||
            send_msg(p, AGGREGATOR, key_of(p, q), GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT,
                     &pi.base))
            goto fail;
    }
    uint64_t sent_edges = 0, next_report = 0;
    const bool tty = isatty(STDERR_FILENO); /* a log gets the last line, not 50 overwritten ones */
    for (uint32_t q = 0; q < parts; q++) {
        for (uint64_t v = first[q]; v < first[q + 1]; v += chunk) {
            Gpubridge__OutDegreeChunk oc = GPUBRIDGE__OUT_DEGREE_CHUNK__INIT;
            oc.first_node = v;
            oc.n_out_degrees = first[q + 1] - v < chunk ? first[q + 1] - v : chunk;
            oc.out_degrees = g->outdeg + v;
            if (send_msg(p, SENDER, key_of(p, q), GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES,
                         &oc.base))
                goto fail;
        }
        /* offsets of vertices first[q] .. first[q+1], its end included (on
         * its device the next vertex may belong to no partition there), as
         * edge indexes of its device (pr_client.h) */
        const uint64_t oend = first[q + 1] + 1;
        for (uint64_t v = first[q]; v < oend; v += ochunk) {
            Gpubridge__InOffsetChunk ic = GPUBRIDGE__IN_OFFSET_CHUNK__INIT;
            ic.first_node = v;
            ic.n_offsets = oend - v < ochunk ? oend - v : ochunk;
            ic.offsets = g->in_off + v;
            if (p->shift[q]) {
                for (size_t i = 0; i < ic.n_offsets; i++)
                    offs[i] = (uint64_t)((int64_t)g->in_off[v + i] + p->shift[q]);
                ic.offsets = offs;
            }
            if (send_msg(p, AGGREGATOR, key_of(p, q), GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS,
                         &ic.base))
                goto fail;
        }
        const uint64_t e1 = g->in_off[first[q + 1]];
        for (uint64_t e = g->in_off[first[q]]; e < e1; e += echunk) {
            Gpubridge__InEdgeChunk ec = GPUBRIDGE__IN_EDGE_CHUNK__INIT;
            ec.first_edge = (uint64_t)((int64_t)e + p->shift[q]);
            ec.n_sources = e1 - e < echunk ? e1 - e : echunk;
            ec.sources = g->in_src + e;
            if (send_msg(p, AGGREGATOR, key_of(p, q), GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES,
                         &ec.base))
                goto fail;
            sent_edges += ec.n_sources;
        }
        if (!p->o->quiet && tty && sent_edges >= next_report) {
            fprintf(stderr, "\rloading: %5.1f%% of %" PRIu64 " edges", g->m ? 100.0 * sent_edges / g->m : 100.0,
                    g->m);
            next_report = sent_edges + g->m / 50 + 1;
        }
    }
    free(offs);
    offs = NULL;
    if (drain(p))
        return -1;
    if (!p->o->quiet)
        fprintf(stderr, "%sloading: %u vertices, %" PRIu64 " edges, %u partitions%s%s in %.2f s (job %u)\n",
                tty ? "\r" : "", g->n, g->m, parts,
                dev_count(p) > 1 && !p->o->first_device ? " over the bridge's devices: " : "",
                p->o->first_device ? "" : devs_text(p), pr_now_s() - t0, p->job);
    return 0;
fail:
    free(offs);
    return -1;
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
    const uint64_t nodes = p->first[part + 1] - p->first[part];
    if (m->job != p->job || m->nodes != nodes) {
        fprintf(stderr, PROG ": %s %u answered for job %u with %" PRIu64 " vertices, not job %u's %" PRIu64
                        ": the grains hold another run's data\n", sender ? SENDER : AGGREGATOR, part, m->job,
                m->nodes, p->job, nodes);
        gpubridge__rank_aggregation_result__free_unpacked(m, NULL);
        return -1;
    }
    if (sender) {
        p->snd_dangling += m->dangling_rank;
        p->snd_got++;
    } else {
        p->agg_l1 += m->l1_delta;
        p->agg_rank += m->rank_sum;
        p->snd_dangling += m->dangling_rank; /* next_contributions: the next iteration's; else 0 */
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

static void start_encode(start_msg_t *sm, const pr_opts_t *o, uint32_t it, double dangling, uint32_t n,
                         bool next_contributions)
{
    Gpubridge__StartIterationCommand sc = GPUBRIDGE__START_ITERATION_COMMAND__INIT;
    sc.iteration = it;
    sc.next_contributions = next_contributions;
    sc.damping = o->damping;
    sc.tolerance = o->tolerance;
    sc.node_count = n;
    sc.dangling_rank = dangling;
    sm->len = protobuf_c_message_pack(&sc.base, sm->buf); /* at most 6 fields of <= 10 bytes: fits */
    if (o->damping == 0.0) { /* left out, it would read as 0.85 (pagerank.proto): written by hand */
        static const uint8_t zero[9] = {0x11};
        memcpy(sm->buf + sm->len, zero, sizeof zero);
        sm->len += sizeof zero;
    }
}

static int start_send(pr_t *p, bool sender, uint32_t q, const start_msg_t *sm)
{
    uint64_t corr = 0;
    if (send_bytes(p, sender ? SENDER : AGGREGATOR, key_of(p, q),
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
int pr_senders_first(pr_t *p, uint32_t parts, uint32_t n)
{
    start_msg_t sm;
    start_encode(&sm, p->o, 0, 0.0, n, false);
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

/* Iteration it: the aggregators' round with the senders' dangling rank.
 * When next, iteration it + 1's contributions too: by default the
 * aggregators write them (next_contributions; the partitions are the same for
 * both grain types), with --two-rounds iteration it + 1's senders, each sent
 * when its partition's aggregator has answered. agg_s is when the last
 * aggregator answered. */
int pr_iterate(pr_t *p, uint32_t parts, uint32_t it, uint32_t n, bool next, double *agg_s)
{
    const bool senders = next && p->o->two_rounds;
    start_msg_t agg, snd;
    start_encode(&agg, p->o, it, p->snd_dangling, n, next && !senders);
    if (senders)
        start_encode(&snd, p->o, it + 1, 0.0, n, false);
    p->on_reply = on_result;
    p->agg_l1 = p->agg_rank = p->snd_dangling = 0;
    p->agg_got = p->snd_got = p->n_next = 0;
    *agg_s = 0;
    uint32_t snd_sent = 0;
    for (uint32_t q = 0; q < parts; q++)
        if (start_send(p, false, q, &agg) != 0)
            return -1;
    while (p->agg_got < parts || snd_sent < (senders ? parts : 0) || p->snd_got < snd_sent) {
        while (senders && snd_sent < p->n_next)
            if (start_send(p, true, p->next_senders[snd_sent++], &snd) != 0)
                return -1;
        if (p->inflight && take_reply(p) != 0)
            return -1;
        if (!*agg_s && p->agg_got == parts)
            *agg_s = pr_now_s();
    }
    p->on_reply = NULL;
    return 0;
}

static int on_ranks(pr_t *p, const gbc_reply_t *r)
{
    Gpubridge__NodeRankUpdateBatch *b = gpubridge__node_rank_update_batch__unpack(NULL, r->payload_len, r->payload);
    if (!b || b->first_node > p->n || b->n_ranks > p->n - b->first_node || b->job != p->job) {
        fprintf(stderr, PROG ": a RankQuery reply is malformed, out of range or for another job\n");
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
int pr_fetch_ranks(pr_t *p, const uint64_t *first, uint32_t parts, double *ranks, uint32_t n)
{
    const uint32_t per = p->chunk_query;
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
            rc = send_msg(p, AGGREGATOR, key_of(p, q), GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY,
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
