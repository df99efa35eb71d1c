/* The supervisor (`gpubridge --supervise`): keeps the public ZeroMQ socket in
 * a process that never touches CUDA, and runs the GPU side in a worker
 * process it restarts when it dies.
 *
 * Why a process: a sticky CUDA error (an illegal address, 700) poisons the
 * CUDA context for the rest of the process; only a fresh process gets a fresh
 * context. So the worker is this same program, bound to a private ipc
 * endpoint; it exits with GB_EXIT_GPU_FAILED once a kernel failed (after
 * answering what it can), and a crash or a kill ends it too.
 *
 * The worker's endpoint is plaintext (CURVE is the front's business), so it
 * must be reachable by the supervisor only: it lives in a directory made by
 * mkdtemp (0700, owner checked), nobody else can bind or read it, and the
 * worker admits connections from its parent's pid only (ZMQ_IPC_FILTER_PID),
 * so a client of the same uid cannot go around CURVE either. The endpoint is
 * passed on the worker's command line (--worker-endpoint), never through
 * the environment.
 *
 * A worker that stops answering (stopped, or stuck in a driver call) is a
 * failure too: a heartbeat (a ListGrainTypes control request on a DEALER of
 * its own) goes out every second, and a worker with no answer for
 * GB_SUP_HEARTBEAT_TIMEOUT_MS is killed, its requests answered and a new
 * one started.
 *
 * The front proxies frames unchanged: one DEALER per client towards the
 * worker, with the client's routing id as its own, so the worker sees each
 * client as itself. It decodes each ClientFrame only to note the correlation
 * ids that expect a reply, and each ServerFrame to strike them. Each frame
 * goes with a tag, noted with its ids, so that a frame the worker refuses
 * whole (not decoded: no ids in its reply) is struck by its tag
 * (server_internal.h, GBI_TAG_LEN). Frames over max_message_size are
 * answered here and not passed on. When the
 * worker dies, whatever it had not answered is answered here with
 * STATUS_GPU_ERROR, the DEALERs are closed (their queued requests were just
 * answered), and a new worker starts; requests that arrive meanwhile wait in
 * fresh DEALERs and are served by the new worker. So every request gets
 * exactly one reply, and the service comes back by itself.
 *
 * Ownership: one thread; all state below lives in gbi_sup_t. */
#include "supervisor.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "authority.h"
#include "clock.h"
#include "fdguard.h"
#include "gpubridge.pb-c.h"
#include "log.h"
#include "metrics.h"
#include "pb_reply.h"
#include "router_ids.h"
#include "server_internal.h"
#include "sup_ids.h"
#include "sup_notes.h"
#include "sup_state.h"
#include "test_hooks.h"
#include "zq_bytes.h"

#define MAX_PEERS 1024
/* Places past MAX_PEERS for clients with authority whose frame changes a
 * type's state (admin_frame, peer_of). */
#define CONTROL_PEERS 16
/* In the worker's private directory: its socket, and the config every
 * worker loads (the supervisor's; see gb_supervise). */
#define WORKER_SOCK "worker.sock"
#define WORKER_CONFIG "config.cfg"
#define ID_MAX 256

typedef struct peer {
    uint8_t id[ID_MAX];
    size_t id_len;
    uint8_t delim;  /* the client frames with an empty delimiter (REQ style) */
    bool reserve;   /* holds one of the CONTROL_PEERS places: control requests only */
    void *dealer;   /* towards the worker; NULL until the next request */
    uint64_t last_ns; /* last frame either way: idle peers with nothing pending are dropped */
    gbi_ids_t ids;  /* correlation ids awaiting a reply, with their frames' tags */
    /* Requests with correlation id 0 awaiting a reply: counted, not kept in
     * ids, since a reply with id 0 may also stand for a whole frame (the
     * worker answers a frame of id-0 errors with one), so the count is not
     * exact. It only keeps an idle client from being forgotten, for
     * ZERO_HOLD_NS at most and never when a new client needs the place;
     * lowered by every reply with id 0, cleared when the connection closes. */
    uint64_t zero_owed;
    /* Its connection closed (the socket monitor says so) since its last
     * frame: its replies have nowhere to go unless it connects again with
     * its routing id, so a new client may take its place (peers_evict). */
    bool closed;
    uint64_t tag;   /* of the last frame forwarded (GBI_TAG_LEN) */
    /* Replies the client's queue would not take yet (it reads slowly): the
     * worker's (one; its DEALER is not read meanwhile, and the client's new
     * frames are refused here) and the supervisor's own, in bytes. */
    zmq_msg_t *out_msg;
    gbi_outq_t *own_head, *own_tail;
    size_t own_mem;
    uint64_t refused_owed; /* frames refused while it did not read: BUSY replies still to send */
    size_t stall_fwd;      /* bytes of its frames forwarded while its replies waited */
    size_t down_fwd;       /* bytes of its frames forwarded while no worker read, not yet known taken */
    uint64_t down_tag;     /* the tag of the last of those frames */
    /* Its frames with requests that await replies, passed to the worker and
     * not yet shown taken (a reply or refusal of that frame or a later one):
     * their tags and sizes, oldest first (SUP_FWD_MAX). */
    struct fwd_ent { uint64_t tag; size_t len; } *fwd;
    size_t fwd_cap, fwd_head, fwd_n, fwd_bytes;
} peer_t;

typedef struct gbi_sup {
    const gb_config_t *cfg;
    void *zctx, *router;
    char dir[GB_PATH_LEN];       /* private directory of the worker's socket */
    char worker_ep[GB_PATH_LEN + 32];
    char ep_arg[GB_PATH_LEN + 64]; /* "--worker-endpoint=..." */
    char mms_arg[48];              /* "--max-message-size=...": ours, whatever the file says by then */
    char cfg_file[GB_PATH_LEN + 16]; /* the config every worker loads ("": none, embedded defaults) */
    char cfg_arg[GB_PATH_LEN + 32];  /* "--config=<cfg_file>" */
    char **wargv;                /* the worker's command line */
    pid_t worker;
    uint64_t started_ns, spawns;
    /* Heartbeat of the current worker: its own DEALER, the last request
     * sent and the last answer seen (0: none yet, the worker is starting). */
    void *hb;
    uint64_t hb_sent_ns, hb_ok_ns, hb_seq;
    gbi_sup_state_t tstate; /* the types' control state, kept across workers (sup_state.h) */
    gbi_zq_t *zq;           /* large reply frames queued in ZeroMQ per client (zq_bytes.h) */
    uint64_t run_ns, ran_ns; /* the worker's main thread's CPU time, and when it last grew */
    uint64_t hb_timeout_ms; /* GB_SUP_HEARTBEAT_TIMEOUT_MS (shorter with a test hook) */
    bool hung; /* the worker was killed for not answering */
    bool up;   /* the current worker has answered something */
    uint64_t alive_ns; /* when it last answered anything (heartbeat or reply) */
    gb_server_t *curve; /* the CURVE/ZAP state (curve.c works on a gb_server_t) */
    peer_t *peers;
    size_t n_peers;
    zmq_pollitem_t *items; /* poll set: the ROUTER, the heartbeat, one DEALER per peer */
    peer_t **owner;        /* the peer of each item (NULL: ROUTER or heartbeat) */
    /* Backpressure: a frame the worker's side would not take yet (its DEALER
     * is at its high-water mark). While one is held, the ROUTER is not read,
     * so ZeroMQ pushes back on the clients. */
    peer_t *stall_peer;
    zmq_msg_t stall_msg;
    uint64_t stall_tag;
    size_t stall_noted; /* the held frame's ids noted (it counts in fwd_total once passed on) */
    size_t stall_counted, down_counted; /* what the held frame added to its budgets */
    uint64_t conns; /* peers made so far: each one's tags start at conns << 32 */
    uint64_t too_large_logged_ns, too_large_unlogged, too_large, too_large_noted_ns;
    uint64_t replies_fwd, replies_own; /* replies that reached clients: from workers, from here */
    gbi_sup_notes_t notes; /* counts of what was answered here, for the worker's Telemetry and metrics */
    uint64_t counts_sent_ns; /* when they were last noted */
    bool closing; /* the worker is gone for good: frames read are noted, answered SHUTTING_DOWN */
    bool stopping; /* stop was sent to the worker: it drains (and is not heartbeat-checked) */
    size_t down_total; /* the down_fwd of all clients together (SUP_DOWN_MAX) */
    size_t fwd_total;  /* the fwd_bytes of all clients together */
    size_t fwd_max;    /* its bound (SUP_FWD_MAX) */
    size_t ids_bytes;  /* memory of all clients' id sets (SUP_IDS_BYTES) */
    size_t noted;      /* ids the last frame passed to note_requests added */
    volatile sig_atomic_t *reload; /* set by SIGHUP: passed on to the worker */
    gb_reload_t *rl;               /* reloads the supervisor's own keys; NULL: none */
    gbi_frame_t scratch; /* decoding a client frame for its correlation ids */
    gb_fdguard_t fdg;    /* descriptors near the limit: refuse new connections */
    gb_ipc_files_t ipc_files; /* socket files of its ipc endpoints, removed at close */
    uint64_t nodealer_logged_ns, nodealer_unlogged; /* frames refused for want of a DEALER: logged once a second */
    size_t drop_bytes; /* test hook: frames of this size fail to pass, as if the worker's connection closed */
    size_t max_peers;  /* MAX_PEERS (fewer with a test hook) */
    /* Client connections that closed with replies owed, and replies
     * discarded for clients gone: in all, and not yet noted to the worker
     * (GBI_NOTE_DROPPED, for its Telemetry); the log's rate limit. */
    gb_connwatch_t cw;
    uint64_t conns_dropped, replies_undelivered;
    uint64_t dropped_logged_ns, dropped_unlogged;
} gbi_sup_t;

/* Frames queued towards the worker per client. While the worker reads this
 * is what the supervisor holds for a client (ZeroMQ counts messages: up to
 * DEALER_HWM x max_message_size bytes); past it the ROUTER is not read. */
#define DEALER_HWM 256
/* A client whose replies wait: bytes of its frames still forwarded; past
 * that they are refused here rather than queued towards a worker that would
 * refuse them (its own per-client bound, GBI_CLIENT_MIN) and noted here. */
#define STALL_FWD_MAX (1u << 20)
#define DOWN_FWD_MAX (4u << 20) /* bytes of a client's frames forwarded while no worker reads them */
#define LATE_NS (3000000000ull) /* a worker silent this long (3 heartbeats) may not be reading: DOWN_FWD_MAX */
#define OWN_MAX (1u << 20)   /* bytes of the supervisor's own refusals kept for a client that does not read */
/* Memory of the correlation ids a client's requests wait with (sup_ids.h:
 * 24 bytes a slot, 1 to 3 slots an id); past it, its frames are refused,
 * unless none waits (a frame alone is always taken). */
#define PEER_IDS_BYTES (4u << 20)
/* Supervisor-wide: bytes forwarded while no worker reads, and the ids' memory,
 * across all clients (MAX_PEERS clients each at their own bound is too much). */
#define SUP_DOWN_MAX (64u << 20)
#define SUP_IDS_BYTES (64u << 20)
/* Supervisor-wide while the worker reads: bytes of frames passed on and not
 * yet shown taken, all clients together, 128 frames of max_message_size
 * (128 MiB by default; a frame is taken when none waits); past it, frames
 * are refused BUSY rather than queued. */
#define SUP_FWD_FRAMES 128
#define PEER_IDLE_NS (10ull * 1000000000ull)
/* How long requests with correlation id 0 keep an idle client's place at
 * most (peers_evict): long enough for a paused type's wait, bounded since
 * their count is not exact. */
#define ZERO_HOLD_NS (600ull * 1000000000ull)
#define HB_INTERVAL_NS 1000000000ull
/* How often the frames and replies answered here are noted to the worker:
 * its metrics are published about every 100 ms too. */
#define COUNTS_NS 100000000ull
/* A heartbeat its pipe refused is tried again this much later. */
#define HB_RETRY_NS 10000000ull
/* A worker that runs without answering is killed after this many heartbeat
 * timeouts all the same. */
#define HUNG_RUNNING_TIMEOUTS 3
/* The heartbeat's routing id towards the worker: refused as a client's
 * (peer_of), so that no client's DEALER can take its place there. */
static const char HB_ID[] = "\0gb-supervisor-heartbeat";

/* ---- the pending-id set of a peer (sup_ids.c) ---------------------------- */

/* Strikes the ids of the frames tagged first..last (the worker refused them
 * whole); returns how many frames that was. */
static uint64_t set_del_tags(peer_t *p, uint64_t first, uint64_t last)
{
    if (last < first || last > p->tag)
        return 0; /* not ours: this connection never sent those */
    gbi_ids_del_tags(&p->ids, first, last);
    return last - first + 1;
}

/* The worker has read p's frames up to tag (a reply or a refusal of one
 * shows it; a client's frames reach it in order): those forwarded while it
 * did not read no longer wait here. Frames that bring no reply (one-way, or
 * no correlation ids) show nothing: they stay counted until a later frame's
 * reply, a worker exit or the peer's end, so the budget errs on the safe side. */
static void down_taken(gbi_sup_t *s, peer_t *p, uint64_t tag)
{
    if (!p->down_fwd || tag < p->down_tag)
        return;
    s->down_total -= s->down_total >= p->down_fwd ? p->down_fwd : s->down_total;
    p->down_fwd = 0;
}

/* The worker has taken p's frames up to tag: they leave the forwarded bytes. */
static void fwd_taken(gbi_sup_t *s, peer_t *p, uint64_t tag)
{
    while (p->fwd_n && p->fwd[p->fwd_head].tag <= tag) {
        const size_t len = p->fwd[p->fwd_head].len;
        p->fwd_bytes -= len;
        s->fwd_total -= len;
        p->fwd_head = (p->fwd_head + 1) % p->fwd_cap;
        p->fwd_n--;
    }
}

/* Every frame p passed on is taken or gone (the worker exited, or p goes). */
static void fwd_clear(gbi_sup_t *s, peer_t *p)
{
    s->fwd_total -= p->fwd_bytes;
    p->fwd_bytes = p->fwd_n = p->fwd_head = 0;
    if (p->fwd_cap > 64) { /* a large one goes; a small one stays for the next frames */
        free(p->fwd);
        p->fwd = NULL;
        p->fwd_cap = 0;
    }
}

/* Notes a frame passed on (tag, len bytes). Out of memory: not counted. */
static void fwd_note(gbi_sup_t *s, peer_t *p, uint64_t tag, size_t len)
{
    if (p->fwd_n == p->fwd_cap) {
        const size_t cap = p->fwd_cap ? 2 * p->fwd_cap : 16;
        struct fwd_ent *e = malloc(cap * sizeof *e);
        if (!e)
            return;
        for (size_t i = 0; i < p->fwd_n; i++)
            e[i] = p->fwd[(p->fwd_head + i) % p->fwd_cap];
        free(p->fwd);
        p->fwd = e;
        p->fwd_cap = cap;
        p->fwd_head = 0;
    }
    p->fwd[(p->fwd_head + p->fwd_n++) % p->fwd_cap] = (struct fwd_ent){tag, len};
    p->fwd_bytes += len;
    s->fwd_total += len;
}

/* ---- frames -------------------------------------------------------------- */

/* Notes the ids of the frame's requests that expect a reply (s->noted: how
 * many). -1 (nothing noted): their memory would take p past PEER_IDS_BYTES,
 * and some already wait; -2: all clients' past SUP_IDS_BYTES, and some
 * already wait; -3: out of memory. */
static int note_requests(gbi_sup_t *s, peer_t *p, const uint8_t *buf, size_t len, uint64_t tag)
{
    char err[160];
    size_t k = 0, zeros = 0;
    s->noted = 0;
    if (gbi_frame_decode(&s->scratch, buf, len, err, sizeof err) != 0)
        return 0; /* the worker answers undecodable frames (correlation id 0) */
    for (size_t i = 0; i < s->scratch.n; i++) { /* every request and control message is owed a reply */
        const bool owed = s->scratch.envs[i].kind != GPUBRIDGE__KIND__KIND_ONE_WAY;
        k += owed && s->scratch.envs[i].corr != 0;
        zeros += owed && s->scratch.envs[i].corr == 0;
    }
    if (!k) {
        p->zero_owed += zeros;
        return 0;
    }
    const size_t now = gbi_ids_bytes(&p->ids), after = gbi_ids_bytes_after(&p->ids, k);
    if (p->ids.n && after > PEER_IDS_BYTES)
        return -1;
    if (s->ids_bytes && s->ids_bytes - now + after > SUP_IDS_BYTES)
        return -2;
    if (gbi_ids_reserve(&p->ids, k) != 0)
        return -3;
    for (size_t i = 0; i < s->scratch.n; i++) {
        const gbi_env_t *e = &s->scratch.envs[i];
        if (e->kind != GPUBRIDGE__KIND__KIND_ONE_WAY && e->corr != 0)
            s->noted += (size_t)gbi_ids_add(&p->ids, e->corr, tag);
        if (e->kind == GPUBRIDGE__KIND__KIND_CONTROL && e->has_control && e->corr != 0)
            gbi_sup_state_asked(&s->tstate, tag >> 32, e->corr, e->control, e->control_len);
    }
    p->zero_owed += zeros;
    return 0;
}

/* Strikes the frame's replies off p's pending set; returns how many it held. */
static size_t note_replies(gbi_sup_t *s, peer_t *p, const uint8_t *buf, size_t len)
{
    gb_pb_reply_iter_t it;
    gb_pb_reply_view_t v;
    size_t n = 0;
    uint64_t seen = 0;
    if (gb_pb_reply_frame_open(&it, buf, len) != 0)
        return 0;
    for (; gb_pb_reply_frame_next(&it, &v); n++) {
        if (v.corr == 0) {
            p->zero_owed -= p->zero_owed > 0;
            continue;
        }
        const uint64_t tag = gbi_ids_del(&p->ids, v.corr);
        seen = tag > seen ? tag : seen;
        gbi_sup_state_answered(&s->tstate, p->tag >> 32, v.corr, v.status);
    }
    if (seen) {
        down_taken(s, p, seen);
        fwd_taken(s, p, seen);
    }
    return n;
}

/* The replies of a frame made here, as it goes to ZeroMQ: counted by
 * status in the worker's metrics (a refusal kept for a client that does not
 * read counts once sent, with the status it then has). */
static void own_sent(gbi_sup_t *s, const void *buf, size_t len)
{
    gb_pb_reply_iter_t it;
    gb_pb_reply_view_t v;
    if (gb_pb_reply_frame_open(&it, buf, len) != 0)
        return;
    while (gb_pb_reply_frame_next(&it, &v))
        if (v.status >= 0 && v.status < GB_METRICS_N_STATUS)
            gbi_notes_add(&s->notes, (gbi_nc)(GBI_NC_OWN + v.status), 1);
}

/* One note of kind k with the counts ka and kb (kb < 0: none), or for
 * GBI_NOTE_REPLIES_HERE the status st and the count ka. */
static void note_send(gbi_sup_t *s, char k, gbi_nc ka, int kb, uint64_t st)
{
    gbi_sup_notes_t *n = &s->notes;
    const uint64_t b = kb >= 0 ? n->fresh[kb] : 0;
    if (!n->fresh[ka] && !b)
        return;
    uint8_t note[GBI_NOTE_LEN];
    if (k == GBI_NOTE_REPLIES_HERE)
        gbi_note_make(note, k, st, n->fresh[ka]);
    else
        gbi_note_make(note, k, n->fresh[ka], b);
    if (zmq_send(s->hb, note, sizeof note, ZMQ_DONTWAIT) != (int)sizeof note)
        return; /* kept for the next call */
    gbi_notes_sent(n, ka);
    if (kb >= 0)
        gbi_notes_sent(n, (gbi_nc)kb);
}

/* Tells the worker, for its Telemetry and metrics, what was answered here
 * since the last call (on the heartbeat's connection; kept while there is
 * none, or while its pipe is full; sup_notes.h). */
static void notes_send(gbi_sup_t *s, uint64_t now)
{
    s->counts_sent_ns = now;
    if (!s->hb)
        return;
    note_send(s, GBI_NOTE_REFUSED_HERE, GBI_NC_TOO_LARGE, GBI_NC_UNREAD, 0);
    note_send(s, GBI_NOTE_DROPPED, GBI_NC_DROPPED, GBI_NC_UNDELIVERED, 0);
    note_send(s, GBI_NOTE_FRAMES_HERE, GBI_NC_FRAMES, -1, 0);
    for (int st = 0; st < GB_METRICS_N_STATUS; st++)
        note_send(s, GBI_NOTE_REPLIES_HERE, (gbi_nc)(GBI_NC_OWN + st), -1, (uint64_t)st);
}

/* Sends [id][delim?][payload] on the ROUTER. 0: sent, or discarded for a
 * vanished client (counted); -1: the client's queue is full (ROUTER_MANDATORY). */
static int to_client(gbi_sup_t *s, const peer_t *p, const void *buf, size_t len)
{
    const int r = gbi_zq_send(s->zq, s->router, p->id, p->id_len, p->delim, buf, len);
    if (r == 1) {
        const size_t n = gbi_reply_count(buf, len);
        s->replies_undelivered += n;
        gbi_notes_add(&s->notes, GBI_NC_UNDELIVERED, n);
    }
    return r < 0 ? -1 : 0;
}

/* The supervisor's own reply frame: sent, or kept (in order) until the
 * client's queue takes it. */
static void own_reply(gbi_sup_t *s, peer_t *p, const void *buf, size_t len)
{
    if (!p->own_head && to_client(s, p, buf, len) == 0) {
        own_sent(s, buf, len);
        return;
    }
    gbi_outq_t *q = malloc(sizeof *q + len);
    if (!q) {
        GB_ERROR("supervisor: out of memory keeping a reply for a slow client");
        return;
    }
    q->next = NULL;
    q->len = len;
    memcpy(q->data, buf, len);
    if (p->own_tail)
        p->own_tail->next = q;
    else
        p->own_head = q;
    p->own_tail = q;
    p->own_mem += sizeof *q + len;
}

static int peer_stalled(const peer_t *p) { return p->out_msg || p->own_head || p->refused_owed; }

/* Replies p holds here for its client: a frame waiting for room, the
 * supervisor's own, refusals owed. */
static uint64_t peer_kept(const peer_t *p)
{
    uint64_t kept = p->refused_owed;
    if (p->out_msg)
        kept += gbi_reply_count(zmq_msg_data(p->out_msg), zmq_msg_size(p->out_msg));
    for (const gbi_outq_t *q = p->own_head; q; q = q->next)
        kept += gbi_reply_count(q->data, q->len);
    return kept;
}

/* A client connection closed (connwatch.h): what its client was owed (ids
 * awaiting the worker's replies, replies kept here) will find it gone and be
 * discarded; logged at most once a second, and counted. */
static void sup_conn_closed(void *ctx, const uint8_t *id, size_t id_len)
{
    gbi_sup_t *s = ctx;
    peer_t *p = NULL;
    for (size_t i = 0; i < s->n_peers && !p; i++)
        if (s->peers[i].id_len == id_len && memcmp(s->peers[i].id, id, id_len) == 0)
            p = &s->peers[i];
    if (!p)
        return;
    p->zero_owed = 0; /* nobody to take those replies now */
    p->closed = true;
    const uint64_t kept = peer_kept(p);
    const uint64_t pending = p->ids.n;
    if (!pending && !kept)
        return;
    s->conns_dropped++;
    gbi_notes_add(&s->notes, GBI_NC_DROPPED, 1);
    notes_send(s, gb_now_ns());
    gb_connwatch_log_closed("supervisor: ", id, id_len, pending, kept,
                            (long long)gbi_frame_hard_cap(s->cfg->max_message_size), &s->dropped_logged_ns,
                            &s->dropped_unlogged);
}

/* Answers the ids p still waits for (those of one frame's tag, or all:
 * tag 0) with status; the texts of the first 64 KiB only, as the bridge does
 * for one frame's errors (a client that does not read may have many). */
static size_t answer_tagged(gbi_sup_t *s, peer_t *p, int status, const char *why, uint64_t tag)
{
    enum { CHUNK = 256 };
    size_t done = 0, text = 0, cursor = SIZE_MAX, k;
    uint64_t ids[CHUNK];
    while ((k = gbi_ids_take(&p->ids, tag ? tag : 0, tag ? tag : UINT64_MAX, &cursor, ids, CHUNK)) > 0) {
        Gpubridge__Reply rs[CHUNK], *rp[CHUNK];
        for (size_t j = 0; j < k; j++) {
            gpubridge__reply__init(&rs[j]);
            rs[j].correlation_id = ids[j];
            rs[j].status = status;
            rs[j].error = (char *)(text < GBI_FRAME_ERR_BUDGET ? why : "");
            text += strlen(why);
            rp[j] = &rs[j];
        }
        Gpubridge__ReplyBatch b = GPUBRIDGE__REPLY_BATCH__INIT;
        b.n_replies = k;
        b.replies = rp;
        Gpubridge__ServerFrame f = GPUBRIDGE__SERVER_FRAME__INIT;
        f.body_case = GPUBRIDGE__SERVER_FRAME__BODY_BATCH;
        f.batch = &b;
        size_t len = gpubridge__server_frame__get_packed_size(&f);
        uint8_t *buf = malloc(len ? len : 1);
        if (buf) {
            gpubridge__server_frame__pack(&f, buf);
            own_reply(s, p, buf, len);
            free(buf);
        } else {
            GB_ERROR("supervisor: out of memory answering %zu request(s)", k);
        }
        done += k;
        s->replies_own += k;
    }
    gbi_ids_trim(&p->ids);
    return done;
}

static size_t answer_pending(gbi_sup_t *s, peer_t *p, int status, const char *why)
{
    return answer_tagged(s, p, status, why, 0);
}

/* ---- the worker ------------------------------------------------------------ */

static int refresh_worker_side(gbi_sup_t *s);

static int spawn_worker(gbi_sup_t *s)
{
    if (refresh_worker_side(s) != 0)
        return -1;
    /* The types clients deactivated or terminated, as the last worker
     * answered (sup_state.h): the new one starts so. */
    char state[GB_PATH_LEN + 32];
    snprintf(state, sizeof state, "%s/" GBI_SUP_STATE_FILE, s->dir);
    if (gbi_sup_state_write(&s->tstate, state) != 0) {
        GB_WARN("supervisor: %s: %s; the new worker starts every grain type active", state, strerror(errno));
        unlink(state);
    }
    const pid_t parent = getpid();
    /* Blocked from before the fork through the exec until the worker's
     * handlers are set (main.c): a SIGTERM, SIGHUP or SIGUSR1 passed on
     * while it starts then waits for them instead of killing it, or of
     * meeting this process's handlers in the child before the exec (which
     * would lose it). The supervisor's own mask is restored at once. */
    sigset_t stop_sigs, was;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGHUP);
    sigaddset(&stop_sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, &was);
    pid_t pid = fork();
    if (pid < 0) {
        pthread_sigmask(SIG_SETMASK, &was, NULL);
        GB_ERROR("supervisor: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a killed supervisor takes its worker along */
        if (getppid() != parent)
            _exit(127); /* it died before the line above */
        execv("/proc/self/exe", s->wargv);
        _exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    s->worker = pid;
    s->started_ns = gb_now_ns();
    s->spawns++;
    s->hb_ok_ns = s->hb_sent_ns = s->run_ns = s->ran_ns = 0;
    s->hung = false;
    s->up = false;
    GB_INFO("supervisor: worker %d started (endpoint %s)", (int)pid, s->worker_ep);
    return 0;
}

static void peer_drop(gbi_sup_t *s, size_t i)
{
    peer_t *p = &s->peers[i];
    if (p->dealer)
        zmq_close(p->dealer);
    gbi_ids_free(&p->ids);
    fwd_clear(s, p);
    free(p->fwd);
    s->down_total -= s->down_total >= p->down_fwd ? p->down_fwd : s->down_total;
    if (p->out_msg) {
        zmq_msg_close(p->out_msg);
        free(p->out_msg);
    }
    for (gbi_outq_t *q = p->own_head, *nq; q; q = nq) {
        nq = q->next;
        own_sent(s, q->data, q->len); /* made, and discarded: counted as the worker counts its own */
        free(q);
    }
    s->n_peers--;
    if (i != s->n_peers) {
        s->peers[i] = s->peers[s->n_peers]; /* the last one moves into the hole */
        if (s->stall_peer == &s->peers[s->n_peers])
            s->stall_peer = &s->peers[i];
    }
    memset(&s->peers[s->n_peers], 0, sizeof s->peers[s->n_peers]);
}

/* Drops the peers idle since before now - PEER_IDLE_NS with nothing in
 * flight (each holds a DEALER; clients come and go with fresh routing ids).
 * need_room: a new client needs a place, and requests with id 0 do not keep
 * one (their count may be stuck: the worker may answer a frame of them with
 * one reply; otherwise they keep it for ZERO_HOLD_NS at most), nor do the
 * requests of a client whose connection closed: else clients that leave
 * with requests waiting (for a paused type, say) could take every place,
 * control frames' too, until the worker ends. Returns how many of those
 * closed ones went. */
static size_t peers_evict(gbi_sup_t *s, uint64_t now, bool need_room)
{
    size_t closed_dropped = 0;
    for (size_t i = 0; i < s->n_peers;) {
        peer_t *p = &s->peers[i];
        const bool zeros = p->zero_owed && !need_room && now - p->last_ns <= ZERO_HOLD_NS;
        const bool idle = p->ids.n == 0 && !zeros && !peer_stalled(p) && now - p->last_ns > PEER_IDLE_NS;
        const bool gone = need_room && p->closed && (p->ids.n || peer_stalled(p));
        if (p != s->stall_peer && (idle || gone)) {
            if (gone && !idle) { /* its replies, owed or kept, now reach nobody: counted as discarded */
                const uint64_t n = p->ids.n + peer_kept(p);
                s->replies_undelivered += n;
                gbi_notes_add(&s->notes, GBI_NC_UNDELIVERED, n);
                closed_dropped++;
            }
            peer_drop(s, i);
        } else {
            i++;
        }
    }
    return closed_dropped;
}

/* Whether frame m may take a place past the table's: small (control
 * requests are), from a peer with authority, holding control requests
 * alone, one of them a state change (Activate, Deactivate, Terminate): the
 * client that resumes a paused type while every place waits for it. */
#define ADMIN_FRAME_MAX 4096
static bool admin_frame(gbi_sup_t *s, zmq_msg_t *m)
{
    char err[160];
    if (zmq_msg_size(m) > ADMIN_FRAME_MAX || !gb_authority_peer(s->cfg, m) ||
        gbi_frame_decode(&s->scratch, zmq_msg_data(m), zmq_msg_size(m), err, sizeof err) != 0)
        return false;
    bool control = s->scratch.n > 0, changes = false;
    for (size_t i = 0; i < s->scratch.n && control; i++) {
        const gbi_env_t *e = &s->scratch.envs[i];
        control = e->kind == GPUBRIDGE__KIND__KIND_CONTROL && e->has_control;
        Gpubridge__Control *c = control ? gpubridge__control__unpack(NULL, e->control_len, e->control) : NULL;
        changes = changes || (c && gb_authority_op_changes_state(c->op_case));
        gpubridge__control__free_unpacked(c, NULL);
    }
    return control && changes;
}


static peer_t *peer_find(gbi_sup_t *s, const uint8_t *id, size_t len)
{
    for (size_t i = 0; i < s->n_peers; i++)
        if (s->peers[i].id_len == len && memcmp(s->peers[i].id, id, len) == 0)
            return &s->peers[i];
    return NULL;
}

/* The client's place in the table, found or made. admin: its frame is an
 * admin_frame; then CONTROL_PEERS places past the table's are open to it
 * too (such a peer may send control requests alone while it holds one). */
static peer_t *peer_of(gbi_sup_t *s, const uint8_t *id, size_t len, bool admin)
{
    peer_t *found = peer_find(s, id, len);
    if (found)
        return found;
    if (len > ID_MAX || gbi_sup_own_id(id, len))
        return NULL;
    if (s->n_peers >= s->max_peers) {
        gb_connwatch_poll(&s->cw); /* closes reported so far count before evicting */
        const size_t gone = peers_evict(s, gb_now_ns() + PEER_IDLE_NS, true); /* any idle one will do */
        if (gone) {
            GB_WARN("supervisor: %zu client(s) whose connections closed with replies owed gave their places to "
                    "new clients (at most %zu at once); their replies are discarded", gone, s->max_peers);
            notes_send(s, gb_now_ns());
        }
    }
    if (s->n_peers >= s->max_peers + (admin ? CONTROL_PEERS : 0))
        return NULL;
    peer_t *p = &s->peers[s->n_peers++];
    memset(p, 0, sizeof *p);
    memcpy(p->id, id, len);
    p->id_len = len;
    p->tag = ++s->conns << 32; /* a new connection's tags never follow an old one's */
    p->ids.total = &s->ids_bytes;
    p->reserve = s->n_peers > s->max_peers;
    return p;
}

static void *dealer_of(gbi_sup_t *s, peer_t *p)
{
    if (p->dealer)
        return p->dealer;
    if (!gb_fdguard_room(&s->fdg, 2)) { /* its eventfd and its connection */
        errno = EMFILE;
        return NULL;
    }
    void *d = zmq_socket(s->zctx, ZMQ_DEALER);
    int linger = 0, hwm = DEALER_HWM, rhwm = GBI_SNDHWM; /* replies: a client that does not read stops them */
    if (!d)
        return NULL;
    zmq_setsockopt(d, ZMQ_ROUTING_ID, p->id, p->id_len);
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(d, ZMQ_RCVHWM, &rhwm, sizeof rhwm); /* replies: bounded by the requests taken */
    if (zmq_connect(d, s->worker_ep) != 0) {
        zmq_close(d);
        return NULL;
    }
    p->dealer = d;
    return d;
}

/* The encoding of a refusal of a whole frame: one Reply, correlation id 0,
 * into buf (cap bytes); its length, or 0 when it does not fit. */
static size_t refusal_encode(int status, const char *why, uint8_t *buf, size_t cap)
{
    Gpubridge__Reply r = GPUBRIDGE__REPLY__INIT;
    r.status = status;
    r.error = (char *)why;
    Gpubridge__ServerFrame f = GPUBRIDGE__SERVER_FRAME__INIT;
    f.body_case = GPUBRIDGE__SERVER_FRAME__BODY_REPLY;
    f.reply = &r;
    const size_t len = gpubridge__server_frame__get_packed_size(&f);
    if (len > cap)
        return 0;
    gpubridge__server_frame__pack(&f, buf);
    return len;
}

/* An error frame (correlation id 0) for a frame the supervisor refuses. */
static void refuse_frame(gbi_sup_t *s, peer_t *p, int status, const char *why)
{
    if (p->own_mem > OWN_MAX) {
        p->refused_owed++; /* it does not read: a count, not more memory */
        return;
    }
    uint8_t buf[512];
    const size_t len = refusal_encode(status, why, buf, sizeof buf);
    if (len)
        own_reply(s, p, buf, len);
}

/* A frame over max_message_size: not forwarded; one TOO_LARGE reply
 * (correlation id 0), as the bridge gives, logged at most once a second. */
static void refuse_too_large(gbi_sup_t *s, peer_t *p, size_t size)
{
    char why[160];
    const uint64_t now = gb_now_ns();
    s->too_large++;
    s->too_large_unlogged++;
    gbi_notes_add(&s->notes, GBI_NC_TOO_LARGE, 1);
    if (now - s->too_large_logged_ns >= 1000000000ull) {
        GB_WARN("supervisor: refused %llu frame(s) over max_message_size (%u bytes); the last of %zu bytes",
                (unsigned long long)s->too_large_unlogged, s->cfg->max_message_size, size);
        s->too_large_logged_ns = now;
        s->too_large_unlogged = 0;
    }
    /* Before the reply, so that a client that asks for Telemetry next sees it
     * counted; at most one such note each HB_RETRY_NS, so that a flood of
     * them leaves the heartbeat its room (the rest go with the others). */
    if (s->hb && now - s->too_large_noted_ns >= HB_RETRY_NS) {
        s->too_large_noted_ns = now;
        note_send(s, GBI_NOTE_REFUSED_HERE, GBI_NC_TOO_LARGE, GBI_NC_UNREAD, 0);
    }
    snprintf(why, sizeof why, "frame of %zu bytes exceeds max_message_size (%u)", size, s->cfg->max_message_size);
    s->replies_own++;
    refuse_frame(s, p, GPUBRIDGE__STATUS__STATUS_TOO_LARGE, why);
}

/* Once the drain began, a refusal kept for a client that does not read says
 * SHUTTING_DOWN, as one made now would (docs/protocol.md, "Shutdown"): the
 * frame refusals (one reply, correlation id 0) kept as STATUS_BUSY are made
 * again. Those ZeroMQ already queued are past changing. */
static void kept_busy_to_shutdown(gbi_sup_t *s)
{
    static const char why[] = "the bridge is shutting down; the frame was not processed";
    for (size_t i = 0; i < s->n_peers; i++) {
        peer_t *p = &s->peers[i];
        for (gbi_outq_t **at = &p->own_head; *at; at = &(*at)->next) {
            gbi_outq_t *q = *at;
            gb_pb_reply_iter_t it;
            gb_pb_reply_view_t v;
            if (gb_pb_reply_frame_open(&it, q->data, q->len) != 0 || !gb_pb_reply_frame_next(&it, &v) ||
                v.corr != 0 || v.status != GPUBRIDGE__STATUS__STATUS_BUSY || gb_pb_reply_frame_next(&it, &v))
                continue;
            uint8_t buf[128];
            const size_t len = refusal_encode(GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN, why, buf, sizeof buf);
            gbi_outq_t *nq = len ? malloc(sizeof *nq + len) : NULL;
            if (!nq)
                continue; /* it stays BUSY */
            memcpy(nq->data, buf, len);
            nq->len = len;
            nq->next = q->next;
            if (p->own_tail == q)
                p->own_tail = nq;
            p->own_mem = p->own_mem - q->len + len;
            free(q);
            *at = nq;
        }
    }
}

/* The status of a frame refused here: BUSY (retry later), or, once the
 * worker was told to stop or is gone for good, SHUTTING_DOWN with *why
 * replaced, as the bridge answers every request during its drain
 * (docs/protocol.md "Shutdown"). */
static int refusal_status(const gbi_sup_t *s, const char **why)
{
    if (!s->stopping && !s->closing)
        return GPUBRIDGE__STATUS__STATUS_BUSY;
    *why = "the bridge is shutting down; the frame was not processed";
    return GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN;
}

/* A frame not passed on whose requests got no reply of their own (none was
 * noted: no correlation ids, or it does not decode) gets one, correlation
 * id 0, as the worker would answer it: MALFORMED if it does not decode, else
 * the refusal (BUSY, SHUTTING_DOWN once stopping), unless the worker would
 * not answer it either (an empty batch, fire-and-forget one-way requests). */
static void refuse_unnoted(gbi_sup_t *s, peer_t *p, const void *buf, size_t len, const char *why)
{
    char err[160] = "";
    gbi_frame_t *f = &s->scratch;
    if (gbi_frame_decode(f, buf, len, err, sizeof err) != 0 || !f->has_body) {
        s->replies_own++;
        refuse_frame(s, p, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                     err[0] ? err : "ClientFrame has neither an envelope nor a batch");
        return;
    }
    for (size_t i = 0; i < f->n; i++)
        if (f->envs[i].kind != GPUBRIDGE__KIND__KIND_ONE_WAY || f->envs[i].corr != 0) {
            s->replies_own++;
            refuse_frame(s, p, refusal_status(s, &why), why);
            return;
        }
}

/* Sends what p has waiting, while its queue takes it: the supervisor's own
 * replies, the BUSY replies owed, then the held worker reply. Returns 1 once
 * nothing waits. */
static int peer_flush(gbi_sup_t *s, peer_t *p)
{
    gbi_outq_t *q;
    while ((q = p->own_head)) {
        if (to_client(s, p, q->data, q->len) != 0)
            return 0;
        own_sent(s, q->data, q->len);
        p->own_head = q->next;
        if (!p->own_head)
            p->own_tail = NULL;
        p->own_mem -= sizeof *q + q->len;
        free(q);
    }
    while (p->refused_owed && !p->own_head) {
        p->refused_owed--;
        const char *why = "frame refused: its client had left its replies unread past the bridge's bound; read "
                          "replies, then resend";
        s->replies_own++;
        refuse_frame(s, p, refusal_status(s, &why), why);
    }
    if (p->own_head)
        return 0;
    if (p->out_msg) {
        if (to_client(s, p, zmq_msg_data(p->out_msg), zmq_msg_size(p->out_msg)) != 0)
            return 0;
        zmq_msg_close(p->out_msg);
        free(p->out_msg);
        p->out_msg = NULL;
    }
    return 1;
}

/* Forwards whatever replies the worker's side has for p right now. */
static int forward_replies(gbi_sup_t *s, peer_t *p)
{
    int n = 0;
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (p->dealer && n < 1024 && peer_flush(s, p) && zmq_msg_recv(&m, p->dealer, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_size(&m) == 0 && zmq_msg_more(&m))
            continue; /* the delimiter: to_client adds it back */
        uint64_t first, last;
        if (gbi_note_read(zmq_msg_data(&m), zmq_msg_size(&m), GBI_NOTE_REFUSED, &first, &last)) {
            /* Frames the worker refused whole: their ids get no reply from
             * it; the client gets one BUSY per frame, as from the bridge. */
            p->refused_owed += set_del_tags(p, first, last);
            down_taken(s, p, last);
            fwd_taken(s, p, last);
            n++;
            continue;
        }
        s->replies_fwd += note_replies(s, p, zmq_msg_data(&m), zmq_msg_size(&m));
        s->up = s->worker > 0;
        s->alive_ns = gb_now_ns();
        if (to_client(s, p, zmq_msg_data(&m), zmq_msg_size(&m)) != 0 && (p->out_msg = malloc(sizeof *p->out_msg))) {
            zmq_msg_init(p->out_msg);
            zmq_msg_move(p->out_msg, &m); /* sent by peer_flush when the client reads */
        }
        p->last_ns = gb_now_ns();
        n++;
    }
    zmq_msg_close(&m);
    return n;
}

/* The held frame, never passed on, is dropped with its worker: its ids are
 * answered st, or, with none, the frame gets one refusal. */
static size_t drop_held(gbi_sup_t *s, int st, const char *why)
{
    peer_t *p = s->stall_peer;
    if (!p)
        return 0;
    s->stall_peer = NULL;
    gbi_notes_add(&s->notes, GBI_NC_FRAMES, 1);
    size_t n = answer_tagged(s, p, st, why, s->stall_tag);
    if (!n)
        refuse_unnoted(s, p, zmq_msg_data(&s->stall_msg), zmq_msg_size(&s->stall_msg),
                       "the frame could not be passed to the GPU worker (it stopped) and was not processed; retry");
    zmq_msg_close(&s->stall_msg);
    return n;
}

/* After the worker exited: its last replies may still be on their way
 * through the ipc sockets; forward until they stay quiet, then answer the
 * rest, and close the DEALERs (what they still queued was just answered). */
static size_t worker_gone(gbi_sup_t *s, int status, bool final)
{
    char why[220];
    if (s->hung)
        snprintf(why, sizeof why, "the GPU worker stopped answering (no heartbeat for %d ms) and was killed; the "
                 "request may not have been processed", (int)s->hb_timeout_ms);
    else if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "the GPU worker was killed by signal %d before answering; the request may not "
                 "have been processed", WTERMSIG(status));
    else
        snprintf(why, sizeof why, "the GPU worker stopped (exit %d%s) before answering; the request may not have "
                 "been processed", WEXITSTATUS(status),
                 WEXITSTATUS(status) == GB_EXIT_GPU_FAILED ? ": a CUDA error"
                 : WEXITSTATUS(status) == GB_EXIT_WORKER_START ? ": it could not start; the bridge log says why"
                                                                : "");
    uint64_t quiet_since = gb_now_ns(), give_up = quiet_since + 1000000000ull;
    while (gb_now_ns() - quiet_since < 50000000ull && gb_now_ns() < give_up) {
        int moved = 0;
        for (size_t i = 0; i < s->n_peers; i++)
            moved += forward_replies(s, &s->peers[i]);
        if (moved)
            quiet_since = gb_now_ns();
        else {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    /* At shutdown what the worker did not take is refused as shutting down
     * (as the bridge itself does); otherwise it hit a dead GPU side. */
    const bool stopping = final && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const int st = stopping ? GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN : GPUBRIDGE__STATUS__STATUS_GPU_ERROR;
    if (stopping)
        snprintf(why, sizeof why, "the bridge is shutting down; the request was not processed");
    size_t answered = drop_held(s, st, why);
    for (size_t i = 0; i < s->n_peers; i++) {
        peer_t *p = &s->peers[i];
        answered += answer_pending(s, p, st, why);
        p->zero_owed = 0; /* unanswerable: a reply with id 0 stands for a frame */
        if (p->dealer) {
            zmq_close(p->dealer);
            p->dealer = NULL;
        }
        p->down_fwd = 0; /* its DEALER's queue went with it */
        fwd_clear(s, p);
    }
    s->down_total = 0;
    s->worker = 0;
    s->up = false;
    if (s->hb) {
        zmq_close(s->hb);
        s->hb = NULL;
    }
    gbi_notes_worker_gone(&s->notes); /* what it may not have read goes to the next one */
    if (stopping)
        GB_INFO("supervisor: the worker exited cleanly; %zu request(s) it had not taken answered STATUS_SHUTTING_DOWN",
                answered);
    else
        GB_WARN("supervisor: %s; answered %zu waiting request(s) with STATUS_GPU_ERROR%s", why, answered,
                final ? "" : "; restarting it");
    return answered;
}

/* Whether the worker reads what is passed on: it is up and has answered
 * something lately (a draining one answers no heartbeat: it may be late). */
static bool worker_reading(const gbi_sup_t *s)
{
    return s->up && gb_now_ns() - s->alive_ns < LATE_NS;
}

/* Refuses a frame that would wait for a worker that does not read. */
static void refuse_unread(gbi_sup_t *s, peer_t *p, const char *why)
{
    s->replies_own++;
    refuse_frame(s, p, refusal_status(s, &why), why);
}

/* The held frame is not passed on after all: its bytes leave the budgets. */
static void uncount_held(gbi_sup_t *s, peer_t *p)
{
    p->stall_fwd -= p->stall_fwd >= s->stall_counted ? s->stall_counted : p->stall_fwd;
    p->down_fwd -= p->down_fwd >= s->down_counted ? s->down_counted : p->down_fwd;
    s->down_total -= s->down_total >= s->down_counted ? s->down_counted : s->down_total;
}

/* Refuses the held frame BUSY (correlation id 0) instead of passing it on:
 * its ids are struck and its bytes leave the budgets. */
static void refuse_held(gbi_sup_t *s, const char *why)
{
    peer_t *p = s->stall_peer;
    zmq_msg_close(&s->stall_msg);
    s->stall_peer = NULL;
    set_del_tags(p, s->stall_tag, s->stall_tag);
    p->tag = s->stall_tag - 1; /* it never reached the worker: no gap in the tags it sees */
    uncount_held(s, p);
    gbi_notes_add(&s->notes, GBI_NC_FRAMES, 1);
    refuse_unread(s, p, why);
}

/* The held frame could not be passed on: its requests are answered why
 * (BUSY, SHUTTING_DOWN once stopping) with their ids, or the frame, with
 * none noted, gets one refusal; it is released. */
static void not_passed(gbi_sup_t *s, const char *why)
{
    peer_t *p = s->stall_peer;
    const char *text = why;
    s->stall_peer = NULL;
    gbi_notes_add(&s->notes, GBI_NC_FRAMES, 1);
    if (!answer_tagged(s, p, refusal_status(s, &text), text, s->stall_tag))
        refuse_unnoted(s, p, zmq_msg_data(&s->stall_msg), zmq_msg_size(&s->stall_msg), why);
    zmq_msg_close(&s->stall_msg);
}

/* Tries to hand the held frame to its DEALER. Returns 1 once nothing is held. */
static int unstall(gbi_sup_t *s)
{
    if (!s->stall_peer)
        return 1;
    void *d = dealer_of(s, s->stall_peer);
    if (!d) {
        /* Out of sockets or descriptors: refuse the frame rather than hold
         * every client. Without a DEALER the peer has nothing else in flight. */
        const int err = zmq_errno();
        const uint64_t now = gb_now_ns();
        s->nodealer_unlogged++;
        if (now - s->nodealer_logged_ns >= 1000000000ull) { /* at most once a second: a client can send many */
            GB_WARN("supervisor: cannot open a connection to the worker: %s; %llu frame(s) refused",
                    zmq_strerror(err), (unsigned long long)s->nodealer_unlogged);
            s->nodealer_logged_ns = now;
            s->nodealer_unlogged = 0;
        }
        uncount_held(s, s->stall_peer);
        not_passed(s, "the supervisor cannot take more connections now (out of descriptors); retry later");
        return 1;
    }
    /* [tag][frame]: the client's delimiter stays here (to_client adds it). */
    uint8_t tag[GBI_TAG_LEN];
    gbi_put_u64(tag, s->stall_tag);
    const size_t len = zmq_msg_size(&s->stall_msg);
    const bool drop = s->drop_bytes && len == s->drop_bytes; /* a test hook */
    if (!drop && zmq_send(d, tag, sizeof tag, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        if (worker_reading(s))
            return 0; /* it reads: ZeroMQ pushes back on the clients meanwhile */
        /* Nobody reads the queue: holding the frame would stop the ROUTER
         * for every client until the worker is back or killed. */
        refuse_held(s, "frame refused: the GPU worker is restarting or not answering, and this client's frames "
                       "waiting for it fill its queue; retry later");
        return 1;
    }
    /* The pipe took the first part, so it takes the next, unless the
     * worker's connection went meanwhile: then ZeroMQ drops the message,
     * and its requests are answered here at once. Never a blocking send:
     * the worker is reaped and restarted by this loop. */
    if (drop || zmq_msg_send(&s->stall_msg, d, ZMQ_DONTWAIT) < 0) {
        peer_t *p = s->stall_peer;
        not_passed(s, "the request could not be passed to the GPU worker (its connection closed) and was not "
                      "processed; retry");
        p->tag = s->stall_tag - 1; /* the message is atomic: the worker saw neither part */
    } else if (s->stall_noted) {
        fwd_note(s, s->stall_peer, s->stall_tag, len); /* until a reply shows the worker took it */
    }
    s->stall_peer = NULL;
    return 1;
}

/* A control request from a peer without authority: refused here (the
 * worker sees only this process). Returns 1 when it was. */
static int refused_control(gbi_sup_t *s, peer_t *p, zmq_msg_t *m)
{
    size_t nlen = 0, nrep = 0;
    uint8_t *no = gb_authority_peer(s->cfg, m)
                      ? NULL
                      : gb_authority_refusal(zmq_msg_data(m), zmq_msg_size(m), &nlen, &nrep);
    if (!no)
        return 0;
    s->replies_own += nrep;
    own_reply(s, p, no, nlen); /* in order after replies kept for it, and kept if its queue is full */
    free(no);
    return 1;
}

/* A client frame the supervisor answers itself, not passing it on: from a
 * client that leaves its replies unread, too large, past the budget while no
 * worker reads, refused control, or past the waiting requests' bound.
 * Returns 1 when it was; else its ids are noted (tag p->tag + 1). */
static int answered_here(gbi_sup_t *s, peer_t *p, zmq_msg_t *m)
{
    const size_t len = zmq_msg_size(m);
    const bool stalled = peer_stalled(p), reading = s->closing || worker_reading(s);
    if (!stalled) {
        p->stall_fwd = 0;
    } else if (p->refused_owed || p->stall_fwd + len > STALL_FWD_MAX) {
        /* It leaves its replies unread: refused here (one BUSY each, sent
         * once it reads), neither forwarded nor noted, rather than queued
         * towards a worker that would refuse it past its own bound. */
        p->refused_owed++;
        gbi_notes_add(&s->notes, GBI_NC_UNREAD, 1); /* noted to the worker within COUNTS_NS */
        return 1;
    }
    if (len > s->cfg->max_message_size) {
        refuse_too_large(s, p, len);
        return 1;
    }
    if (!reading && (p->down_fwd + len > DOWN_FWD_MAX || s->down_total + len > SUP_DOWN_MAX)) {
        /* No worker reads (it is restarting, or its heartbeat is late): what
         * is forwarded waits in this process, so each client gets a byte
         * budget, not DEALER_HWM frames of up to the hard cap each, and all
         * clients together one more. */
        refuse_unread(s, p,
                     p->down_fwd + len > DOWN_FWD_MAX
                         ? "frame refused: the GPU worker is restarting or not answering, and this client's frames "
                           "waiting for it passed the supervisor's bound; retry later"
                         : "frame refused: the GPU worker is restarting or not answering, and all clients' frames "
                           "waiting for it passed the supervisor's bound; retry later");
        return 1;
    }
    if (reading && s->fwd_total && s->fwd_total + len > s->fwd_max) {
        /* The worker reads, but slower than clients send: what it has not
         * taken waits in this process (each client's queue holds up to
         * DEALER_HWM frames), so all clients together get a byte budget. */
        refuse_unread(s, p, "frame refused: all clients' frames passed to the GPU worker and not yet answered "
                            "passed the supervisor's bound; retry later");
        return 1;
    }
    if (refused_control(s, p, m))
        return 1;
    const int noted = note_requests(s, p, zmq_msg_data(m), len, p->tag + 1);
    if (noted != 0) {
        const char *why = noted == -1 ? "frame refused: its client's requests waiting for replies would take more "
                                        "of the supervisor's memory than it keeps for one client (4 MiB); read "
                                        "replies, then resend"
                          : noted == -2 ? "frame refused: the requests waiting for replies would take more of the "
                                          "supervisor's memory than it keeps for all clients (64 MiB); retry later"
                                        : "frame refused: the supervisor is out of memory; retry later";
        s->replies_own++;
        gbi_notes_add(&s->notes, GBI_NC_UNREAD, noted == -1); /* its own replies unread: frames_refused_unread */
        refuse_frame(s, p, refusal_status(s, &why), why);
        return 1;
    }
    /* Passed on: its bytes count now, not when refused above. */
    s->stall_counted = stalled ? len : 0;
    s->down_counted = reading ? 0 : len;
    p->stall_fwd += s->stall_counted;
    p->down_fwd += s->down_counted;
    s->down_total += s->down_counted;
    if (!reading)
        p->down_tag = p->tag + 1;
    return 0;
}

/* A new client the table has no place for (or whose id is the
 * supervisor's): one refusal, correlation id 0, saying why. */
static void refuse_stranger(gbi_sup_t *s, peer_t *tmp, int extra)
{
    if (!tmp->id_len)
        return;
    s->replies_own++;
    if (extra) {
        refuse_frame(s, tmp, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                     "a request is one message part holding an encoded ClientFrame");
    } else if (gbi_sup_own_id(tmp->id, tmp->id_len)) {
        refuse_frame(s, tmp, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                     "routing ids of more than 5 bytes that start with a zero byte and 'gb-' are the "
                     "supervisor's own: set another ZMQ_ROUTING_ID, or none");
    } else {
        const char *why = "the supervisor serves too many clients at once";
        refuse_frame(s, tmp, refusal_status(s, &why), why);
    }
    if (tmp->own_head) { /* at most one: dropped if its queue is full */
        own_sent(s, tmp->own_head->data, tmp->own_head->len); /* made, as the worker counts its own */
        free(tmp->own_head);
    }
}

/* Whether p's frame m goes on: it is refused (and answered) when it has
 * extra parts, or when p holds a place past the table's and m is not
 * control requests alone while the table is still full. */
static bool peer_admits(gbi_sup_t *s, peer_t *p, zmq_msg_t *m, int extra, uint8_t delim)
{
    p->closed = false; /* before _seen, which may report its old connection closed */
    gb_connwatch_seen(&s->cw, m, p->id, p->id_len);
    if (!extra && !(p->reserve && s->n_peers > s->max_peers && !admin_frame(s, m)))
        return true;
    p->delim = delim;
    s->replies_own++;
    if (extra)
        refuse_frame(s, p, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                     "a request is one message part holding an encoded ClientFrame");
    else
        refuse_frame(s, p, GPUBRIDGE__STATUS__STATUS_BUSY,
                     "the supervisor serves too many clients at once; this client holds a place kept for "
                     "Activate, Deactivate and Terminate, and may send only those until a place is free");
    return false;
}

/* Reads one client frame from the ROUTER and forwards it. Returns 0 when
 * nothing was there. */
static int from_client(gbi_sup_t *s)
{
    zmq_msg_t idm, m;
    zmq_msg_init(&idm);
    if (zmq_msg_recv(&idm, s->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&idm);
        return 0;
    }
    peer_t *p = peer_find(s, zmq_msg_data(&idm), zmq_msg_size(&idm));
    peer_t tmp; /* a client we cannot take: answer it anyway */
    const size_t id_len = zmq_msg_size(&idm);
    if (!p) {
        memset(&tmp, 0, sizeof tmp);
        tmp.id_len = id_len <= ID_MAX ? id_len : 0;
        memcpy(tmp.id, zmq_msg_data(&idm), tmp.id_len);
    }
    zmq_msg_close(&idm);
    zmq_msg_init(&m);
    zmq_msg_recv(&m, s->router, 0);
    uint8_t delim = 0;
    if (zmq_msg_size(&m) == 0 && zmq_msg_more(&m)) {
        delim = 1;
        zmq_msg_close(&m);
        zmq_msg_init(&m);
        zmq_msg_recv(&m, s->router, 0);
    }
    int extra = 0;
    while (zmq_msg_more(&m)) { /* extra parts: refused below, as the worker would */
        extra = 1;
        zmq_msg_close(&m);
        zmq_msg_init(&m);
        zmq_msg_recv(&m, s->router, 0);
    }
    if (!p && !extra && id_len <= ID_MAX)
        p = peer_of(s, tmp.id, tmp.id_len, s->n_peers >= s->max_peers && admin_frame(s, &m));
    bool here = true; /* answered here, not passed on: counted for the worker's metrics */
    if (!p) {
        tmp.delim = delim;
        refuse_stranger(s, &tmp, extra);
    } else if (peer_admits(s, p, &m, extra, delim)) {
        p->delim = delim;
        p->last_ns = gb_now_ns();
        here = answered_here(s, p, &m);
        if (!here && s->closing) { /* its ids are answered SHUTTING_DOWN with the rest; with none, the frame is */
            if (!s->noted)
                refuse_unnoted(s, p, zmq_msg_data(&m), zmq_msg_size(&m), "the bridge is shutting down; the "
                               "request was not processed");
            here = true;
        }
    }
    if (here) { /* else the worker counts it (or not_passed counts it here) */
        gbi_notes_add(&s->notes, GBI_NC_FRAMES, 1);
        zmq_msg_close(&m);
        return 1;
    }
    p->tag++; /* a frame the worker will see (or whose tag is taken back) */
    s->stall_peer = p;
    s->stall_tag = p->tag;
    s->stall_noted = s->noted;
    zmq_msg_init(&s->stall_msg);
    zmq_msg_move(&s->stall_msg, &m); /* unstall sends (and so releases) it */
    zmq_msg_close(&m);
    unstall(s);
    return 1;
}


/* calloc for what the supervisor needs to start, with an error that says
 * what it was for. A test build fails the Nth call when
 * GPUBRIDGE_TEST_SUP_NOMEM=N (test_supervise_nomem). */
static void *sup_calloc(size_t n, size_t size, const char *what)
{
    static unsigned long calls;
    const char *fail = gb_test_hook(GB_HOOK_SUP_NOMEM);
    void *p = fail && strtoul(fail, NULL, 10) == ++calls ? NULL : calloc(n, size);
    if (!p)
        GB_ERROR("supervisor: out of memory (%s); not starting", what);
    return p;
}

/* ---- the worker's private directory ---------------------------------------- */

/* Removes the directories that supervisors of this user left behind when
 * they were killed together with their worker (pids no longer running). */
static void sweep_stale_dirs(void)
{
    DIR *d = opendir("/tmp");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = 0, n = 0;
        if (sscanf(e->d_name, "gpubridge-%d-%*6[A-Za-z0-9]%n", &pid, &n) != 1 || e->d_name[n] || pid <= 0)
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue; /* its supervisor is alive (or not ours to judge) */
        char dir[GB_PATH_LEN + 8];
        struct stat st;
        snprintf(dir, sizeof dir, "/tmp/%s", e->d_name);
        if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (gb_sup_remove_dir(dir) == 0)
            GB_INFO("supervisor: removed %s, left by a supervisor that was killed", dir);
    }
    closedir(d);
}

/* Writes the running config (s->rl->live) where every worker loads it from:
 * a file that is complete before it has the name. 0, or -1 (said). */
static int write_worker_config(gbi_sup_t *s)
{
    if (!s->cfg_file[0])
        return 0;
    char tmp[sizeof s->cfg_file + 8];
    snprintf(tmp, sizeof tmp, "%s.new", s->cfg_file);
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL;
    if (f) {
        gb_config_print(s->rl->live, f);
        ok = fflush(f) == 0 && !ferror(f);
        ok = fclose(f) == 0 && ok;
        ok = ok && rename(tmp, s->cfg_file) == 0;
    }
    if (ok)
        return 0;
    GB_ERROR("supervisor: cannot write the workers' config %s: %s", s->cfg_file, strerror(errno));
    unlink(tmp);
    return -1;
}

/* Before each start of a worker: its directory and config copy, which a
 * /tmp cleaner or an operator may have removed since the last start. */
static int refresh_worker_side(gbi_sup_t *s)
{
    if (mkdir(s->dir, 0700) != 0 && errno != EEXIST) {
        GB_ERROR("supervisor: cannot make the worker's directory %s again: %s", s->dir, strerror(errno));
        return -1;
    }
    if (gb_sup_check_private_dir(s->dir) != 0) {
        GB_ERROR("supervisor: %s is not a private directory (owner %d, mode 0700 wanted); not using it", s->dir,
                 (int)geteuid());
        return -1;
    }
    return write_worker_config(s);
}

/* Makes the worker's directory and endpoint, and its command line: ours with
 * --worker-endpoint, --max-message-size and --config added (the caller left
 * --supervise out). */
static gb_err make_worker_side(gbi_sup_t *s, char *const *argv)
{
    sweep_stale_dirs();
    snprintf(s->dir, sizeof s->dir, "/tmp/gpubridge-%d-XXXXXX", (int)getpid());
    if (!mkdtemp(s->dir)) {
        GB_ERROR("supervisor: cannot make a private directory for the worker's socket: %s", strerror(errno));
        s->dir[0] = '\0';
        return GB_ERR_IO;
    }
    if (gb_sup_check_private_dir(s->dir) != 0) {
        GB_ERROR("supervisor: %s is not a private directory (owner %d, mode 0700 wanted); not using it",
                 s->dir, (int)geteuid());
        s->dir[0] = '\0';
        return GB_ERR_IO;
    }
    snprintf(s->worker_ep, sizeof s->worker_ep, "ipc://%s/" WORKER_SOCK, s->dir);
    snprintf(s->ep_arg, sizeof s->ep_arg, "--worker-endpoint=%s", s->worker_ep);
    size_t n = 0;
    while (argv[n])
        n++;
    /* The supervisor's bound on frames must stay the worker's bound too, or
     * frames it passes on are refused whole there, their ids never
     * answered. */
    snprintf(s->mms_arg, sizeof s->mms_arg, "--max-message-size=%u", s->cfg->max_message_size);
    /* A worker does not read the user's file: a restarted one would meet
     * whatever the file holds by then (a half-edited file, one a reload
     * refused, keys that need a restart), fail or differ. Every worker loads
     * the config this process runs (written before each start and at each
     * reload it takes). */
    if (s->rl && s->rl->path) {
        snprintf(s->cfg_file, sizeof s->cfg_file, "%s/" WORKER_CONFIG, s->dir);
        snprintf(s->cfg_arg, sizeof s->cfg_arg, "--config=%s", s->cfg_file);
        GB_INFO("supervisor: workers load the config it runs (from %s), kept in %s", s->rl->path, s->cfg_file);
    }
    s->wargv = sup_calloc(n + 4, sizeof *s->wargv, "the worker's command line");
    if (!s->wargv)
        return GB_ERR_NOMEM;
    /* Ours after the caller's options, where the last one counts, and before
     * a "--" that would make them operands. */
    size_t w = 0, i = 0;
    s->wargv[w++] = argv[0];
    s->wargv[w++] = s->ep_arg;
    for (i = 1; i < n && strcmp(argv[i], "--") != 0; i++)
        s->wargv[w++] = argv[i];
    s->wargv[w++] = s->mms_arg;
    if (s->cfg_file[0])
        s->wargv[w++] = s->cfg_arg;
    for (; i < n; i++)
        s->wargv[w++] = argv[i];
    s->wargv[w] = NULL;
    return GB_OK;
}

static void remove_worker_side(gbi_sup_t *s)
{
    if (s->dir[0])
        gb_sup_remove_dir(s->dir); /* a killed worker leaves its socket file behind */
    free(s->wargv);
    s->wargv = NULL;
}

int gb_sup_remove_dir(const char *dir)
{
    static const char *const left[] = {WORKER_SOCK, WORKER_CONFIG, WORKER_CONFIG ".new", GBI_SUP_STATE_FILE,
                                       GBI_SUP_STATE_FILE ".new"};
    char path[GB_PATH_LEN + 32];
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, left[i]);
        unlink(path);
    }
    return rmdir(dir);
}

int gb_sup_check_private_dir(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0777) != 0700)
        return -1;
    return 0;
}

/* ---- the heartbeat ------------------------------------------------------------ */

static void hb_send(gbi_sup_t *s, uint64_t now)
{
    if (!s->hb) {
        void *d = zmq_socket(s->zctx, ZMQ_DEALER);
        int linger = 0, hwm = 64; /* the heartbeat, and room for the notes beside it */
        if (!d)
            return;
        zmq_setsockopt(d, ZMQ_ROUTING_ID, HB_ID, sizeof HB_ID - 1);
        zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(d, ZMQ_SNDHWM, &hwm, sizeof hwm);
        if (zmq_connect(d, s->worker_ep) != 0) {
            zmq_close(d);
            return;
        }
        s->hb = d;
    }
    Gpubridge__ListGrainTypes lt = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES;
    ctl.list_grain_types = &lt;
    Gpubridge__Envelope env = GPUBRIDGE__ENVELOPE__INIT;
    env.kind = GPUBRIDGE__KIND__KIND_CONTROL;
    env.correlation_id = ++s->hb_seq;
    env.control = &ctl;
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    f.envelope = &env;
    uint8_t buf[64];
    size_t len = gpubridge__client_frame__get_packed_size(&f);
    if (len <= sizeof buf) {
        gpubridge__client_frame__pack(&f, buf);
        /* a full pipe: the worker is not reading; tried again soon */
        if (zmq_send(s->hb, buf, len, ZMQ_DONTWAIT) != (int)len) {
            s->hb_sent_ns = now - HB_INTERVAL_NS + HB_RETRY_NS;
            return;
        }
        gbi_notes_heartbeat(&s->notes, s->hb_seq); /* its answer shows the notes before it read */
    }
    s->hb_sent_ns = now;
    notes_send(s, now);
}

/* Any reply on the heartbeat's DEALER shows the worker's loop is turning. */
static void hb_recv(gbi_sup_t *s)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (s->hb && zmq_msg_recv(&m, s->hb, ZMQ_DONTWAIT) >= 0) {
        gb_pb_reply_iter_t it;
        gb_pb_reply_view_t v;
        if (gb_pb_reply_frame_open(&it, zmq_msg_data(&m), zmq_msg_size(&m)) == 0)
            while (gb_pb_reply_frame_next(&it, &v))
                gbi_notes_answered(&s->notes, v.corr);
        if (!s->hb_ok_ns)
            GB_INFO("supervisor: worker %d answers its heartbeat", (int)s->worker);
        s->hb_ok_ns = s->alive_ns = gb_now_ns();
        s->up = true;
    }
    zmq_msg_close(&m);
}

/* The worker's main thread (the one that reads the socket): whether it is
 * stopped (SIGSTOP, a debugger), and the CPU time it has run so far. */
static bool worker_state(pid_t pid, uint64_t *run_ns)
{
    char path[64], buf[512];
    bool stopped = false;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fgets(buf, sizeof buf, f)) {
            const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
            stopped = p && (p[2] == 'T' || p[2] == 't');
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    unsigned long long ns = 0;
    if ((f = fopen(path, "r"))) {
        if (fscanf(f, "%llu", &ns) != 1)
            ns = 0;
        fclose(f);
    }
    *run_ns = ns;
    return stopped;
}

/* GB_SUP_HEARTBEAT_TIMEOUT_MS, or a test's GPUBRIDGE_TEST_HEARTBEAT_MS (at
 * least two heartbeat intervals: a running worker gets one of grace). */
static uint64_t hb_timeout_ms(void)
{
    const char *v = gb_test_hook(GB_HOOK_HEARTBEAT_MS);
    char *end;
    unsigned long long ms = v ? strtoull(v, &end, 10) : 0;
    if (!v || *end || ms < 2 * HB_INTERVAL_NS / 1000000)
        return GB_SUP_HEARTBEAT_TIMEOUT_MS;
    GB_WARN("supervisor: test hook: heartbeat timeout %llu ms", ms);
    return ms;
}

/* Sends the heartbeat when due; kills a worker that has not answered in time
 * (its start, CUDA and kernels included, gets GB_SUP_START_TIMEOUT_MS). One
 * that is stopped, or blocked without running (a driver call), is killed
 * after GB_SUP_HEARTBEAT_TIMEOUT_MS. One whose main thread still runs gets a
 * grace while it does (a long burst of work between two reads), but at most
 * HUNG_RUNNING_TIMEOUTS times that in all: a thread spinning in a CUDA
 * synchronisation runs without ever answering. */
static void hb_check(gbi_sup_t *s, uint64_t now)
{
    if (s->worker <= 0 || s->hung)
        return;
    if (now - s->hb_sent_ns < HB_INTERVAL_NS)
        return;
    hb_send(s, now);
    uint64_t run = 0;
    const bool stopped = worker_state(s->worker, &run);
    if (run != s->run_ns && !stopped) {
        s->run_ns = run;
        s->ran_ns = now;
    }
    uint64_t since = s->hb_ok_ns ? s->hb_ok_ns : s->started_ns;
    const bool capped = s->hb_ok_ns && now > s->hb_ok_ns &&
                        now - s->hb_ok_ns > HUNG_RUNNING_TIMEOUTS * s->hb_timeout_ms * 1000000ull;
    if (s->hb_ok_ns && s->ran_ns > since + HB_INTERVAL_NS && !capped)
        since = s->ran_ns - HB_INTERVAL_NS; /* running: a second's grace per look */
    const uint64_t limit_ms = s->hb_ok_ns ? s->hb_timeout_ms : GB_SUP_START_TIMEOUT_MS;
    if (now < since || now - since <= limit_ms * 1000000ull) /* now: taken before a spawn */
        return;
    GB_ERROR("supervisor: worker %d has not answered for %llu ms (%s); killing it and starting another",
             (int)s->worker, (unsigned long long)((now - (s->hb_ok_ns ? s->hb_ok_ns : s->started_ns)) / 1000000),
             !s->hb_ok_ns ? "it never came up" : stopped ? "it is stopped"
                          : capped ? "it runs but does not answer" : "it is stuck, not running");
    s->hung = true;
    kill(s->worker, SIGKILL);
}

/* ---- setup, the loop, teardown ----------------------------------------------- */

/* The public socket: options, CURVE, binds. */
static gb_err open_front(gbi_sup_t *s)
{
    const gb_config_t *cfg = s->cfg;
    s->zctx = zmq_ctx_new();
    if (s->zctx)
        zmq_ctx_set(s->zctx, ZMQ_MAX_SOCKETS, MAX_PEERS + CONTROL_PEERS + 64);
    gbi_router_ids_seed();
    s->router = s->zctx ? zmq_socket(s->zctx, ZMQ_ROUTER) : NULL;
    s->zq = gbi_zq_new();
    if (!s->router || !s->zq) {
        GB_ERROR("supervisor: cannot create its socket: %s", s->zq ? zmq_strerror(zmq_errno()) : "out of memory");
        return GB_ERR_IO;
    }
    /* As the worker does: small queues per client, a full one reported
     * (mandatory), and a hard cap well above max_message_size, so that
     * frames between the two get a TOO_LARGE reply (from_client). */
    int linger = 1000, sndhwm = GBI_SNDHWM, rcvhwm = gbi_rcvhwm(cfg->max_message_size), mandatory = 1, ipv6 = 1;
    int64_t hard = gbi_frame_hard_cap(cfg->max_message_size);
    zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s->router, ZMQ_IPV6, &ipv6, sizeof ipv6); /* as the bridge's socket */
    zmq_setsockopt(s->router, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    zmq_setsockopt(s->router, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt(s->router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &hard, sizeof hard);
    if (cfg->curve.enabled) {
        char msg[512];
        s->curve = sup_calloc(1, sizeof *s->curve, "the CURVE state");
        if (!s->curve)
            return GB_ERR_NOMEM;
        s->curve->cfg = cfg;
        s->curve->zctx = s->zctx;
        s->curve->sock = s->router;
        if (gbi_curve_setup(s->curve, msg, sizeof msg) != GB_OK) {
            GB_ERROR("supervisor: %s", msg);
            if (s->curve->zap_running)
                gbi_curve_stop(s->curve); /* the handler thread owns (and closes) its socket */
            else if (s->curve->zap_sock)
                zmq_close(s->curve->zap_sock);
            free(s->curve);
            s->curve = NULL;
            return GB_ERR_CONFIG;
        }
    }
    if (gb_connwatch_start(&s->cw, s->zctx, s->router, sup_conn_closed, s) != 0)
        GB_WARN("supervisor: cannot watch client connections (%s): a connection ZeroMQ closes is not reported",
                zmq_strerror(zmq_errno()));
    gb_fdguard_init(&s->fdg, "supervisor"); /* before the binds: it guards every accept */
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        char why[GB_PATH_LEN + 160];
        if (gb_ipc_check_free(cfg->endpoints[i], why, sizeof why) != 0) {
            GB_ERROR("supervisor: %s", why);
            return GB_ERR_IO;
        }
        if (zmq_bind(s->router, cfg->endpoints[i]) != 0) {
            GB_ERROR("supervisor: cannot bind %s: %s", cfg->endpoints[i], zmq_strerror(zmq_errno()));
            return GB_ERR_IO;
        }
        gb_ipc_files_note(&s->ipc_files, cfg->endpoints[i]);
        gbi_log_listening(s->router, "supervisor: ", cfg->endpoints[i], cfg->curve.enabled);
    }
    return GB_OK;
}

/* SIGHUP: the supervisor reads the file and applies the public socket's keys
 * (the CURVE lists, remote_control); the worker reloads its copy. */
static void reload(gbi_sup_t *s)
{
    const int rn = s->rl ? gb_reload_supervisor(s->rl) : -1;
    /* Without a file the worker says there is nothing to reload. */
    if (!s->cfg_file[0] || (rn >= 0 && write_worker_config(s) == 0)) {
        if (s->worker > 0) {
            kill(s->worker, SIGHUP);
            GB_INFO("supervisor: SIGHUP passed to worker %d, which reloads the config", (int)s->worker);
        }
        return;
    }
    /* SIGUSR1: the worker counts a failed reload in its metrics. */
    if (s->worker > 0)
        kill(s->worker, SIGUSR1);
    if (rn < 0)
        GB_WARN("supervisor: the worker keeps the running configuration, as do workers started later");
    else
        GB_WARN("supervisor: the reload is not passed on to the worker (its copy of the config could not be "
                "written): it keeps its log level and format; a worker started later gets the new config");
}

/* Reaps the worker if it exited; returns true when the loop must end. */
static bool reap_worker(gbi_sup_t *s, bool stopping, uint64_t *next_spawn, int *backoff_ms, gb_err *result)
{
    int status;
    if (s->worker <= 0 || waitpid(s->worker, &status, WNOHANG) != s->worker)
        return false;
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    worker_gone(s, status, stopping);
    if (stopping) {
        if (!clean)
            *result = GB_ERR_STATE;
        return true;
    }
    /* quick restarts, slower when it keeps dying young */
    uint64_t lived_ms = (gb_now_ns() - s->started_ns) / 1000000;
    *backoff_ms = lived_ms > 10000 ? 0 : (*backoff_ms ? *backoff_ms * 2 : 200);
    if (*backoff_ms > 5000)
        *backoff_ms = 5000;
    *next_spawn = gb_now_ns() + (uint64_t)*backoff_ms * 1000000;
    return false;
}

/* One poll over the ROUTER, the heartbeat and the DEALERs, and what it found. */
static gb_err poll_once(gbi_sup_t *s, bool held)
{
    int slow = 0; /* a client with replies waiting: look again soon */
    for (size_t i = 0; i < s->n_peers; i++)
        if (peer_stalled(&s->peers[i]))
            slow |= !peer_flush(s, &s->peers[i]);
    size_t n = 0;
    /* Backpressure: while a frame is held, read no more. While the worker
     * drains the socket is still read: it answers new requests
     * STATUS_SHUTTING_DOWN. */
    s->items[n] = (zmq_pollitem_t){s->router, 0, (short)(held ? 0 : ZMQ_POLLIN), 0};
    s->owner[n++] = NULL;
    if (s->hb) {
        s->items[n] = (zmq_pollitem_t){s->hb, 0, ZMQ_POLLIN, 0};
        s->owner[n++] = NULL;
    }
    const size_t first_peer = n;
    for (size_t i = 0; i < s->n_peers; i++) {
        if (!s->peers[i].dealer)
            continue;
        short ev = (short)((peer_stalled(&s->peers[i]) ? 0 : ZMQ_POLLIN) |
                           (&s->peers[i] == s->stall_peer ? ZMQ_POLLOUT : 0));
        s->items[n] = (zmq_pollitem_t){s->peers[i].dealer, 0, ev, 0};
        s->owner[n++] = &s->peers[i];
    }
    if (zmq_poll(s->items, (int)n, held ? 5 : slow ? 1 : 50) < 0 && zmq_errno() != EINTR) {
        GB_ERROR("supervisor: zmq_poll: %s", zmq_strerror(zmq_errno()));
        return GB_ERR_IO;
    }
    if (first_peer == 2 && (s->items[1].revents & ZMQ_POLLIN))
        hb_recv(s);
    for (size_t i = first_peer; i < n; i++)
        if (s->items[i].revents & ZMQ_POLLIN)
            forward_replies(s, s->owner[i]);
    if (s->items[0].revents & ZMQ_POLLIN)
        for (int k = 0; k < 256 && !s->stall_peer && from_client(s); k++)
            ;
    return GB_OK;
}

/* Serves until *stop and the worker has drained (or was killed). */
static gb_err serve(gbi_sup_t *s, volatile sig_atomic_t *stop)
{
    uint64_t next_spawn = 0, stop_sent_ns = 0, last_evict = gb_now_ns();
    int backoff_ms = 0;
    gb_err result = GB_OK;
    for (;;) {
        const uint64_t now = gb_now_ns();
        if (reap_worker(s, *stop || stop_sent_ns, &next_spawn, &backoff_ms, &result))
            break;
        if (s->worker == 0 && !*stop && now >= next_spawn && spawn_worker(s) != 0)
            next_spawn = now + 1000000000ull;
        if (s->reload && *s->reload) {
            *s->reload = 0;
            reload(s);
        }
        if (*stop && !stop_sent_ns) {
            GB_INFO("supervisor: stopping; the worker drains and answers what is in flight");
            stop_sent_ns = now;
            if (s->worker <= 0)
                break;
            kill(s->worker, SIGTERM);
        }
        if (stop_sent_ns && s->worker > 0 && now - stop_sent_ns > (s->cfg->shutdown_drain_ms + 10000ull) * 1000000ull) {
            /* It drains for at most shutdown_drain_ms; past that it is stuck (e.g. in a CUDA call). */
            GB_WARN("supervisor: the worker did not stop within %u ms; killing it", s->cfg->shutdown_drain_ms + 10000);
            kill(s->worker, SIGKILL);
            stop_sent_ns = now; /* the next check reaps it */
        }
        if (stop_sent_ns && !s->stopping)
            kept_busy_to_shutdown(s);
        s->stopping = stop_sent_ns != 0; /* draining: frames refused here get SHUTTING_DOWN, as from it */
        if (!stop_sent_ns)
            hb_check(s, now); /* draining: bounded by the drain's deadline above instead */
        gb_fdguard_check(&s->fdg, now);
        if (now - last_evict > 1000000000ull) {
            peers_evict(s, now, false);
            last_evict = now;
        }
        const bool held = !unstall(s);
        if ((result = poll_once(s, held)) != GB_OK)
            break;
        gb_connwatch_poll(&s->cw);
        const uint64_t t = gb_now_ns();
        if (t - s->counts_sent_ns >= COUNTS_NS)
            notes_send(s, t);
    }
    return result;
}

/* Answers what is still waiting, stops the worker, frees everything. */
static void close_all(gbi_sup_t *s)
{
    kept_busy_to_shutdown(s); /* stopped while no worker ran: serve did not */
    /* A frame held for the worker: its requests, or the frame, answered. */
    size_t left = s->router ? drop_held(s, GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN,
                                        "the bridge is shutting down; the request was not processed")
                            : 0;
    if (s->stall_peer) {
        zmq_msg_close(&s->stall_msg);
        s->stall_peer = NULL;
    }
    if (s->router) {
        /* Whatever is still waiting gets its one reply: frames already here too. */
        s->closing = true;
        for (int k = 0; k < 100000 && from_client(s); k++)
            ;
    }
    for (size_t i = 0; i < s->n_peers; i++)
        left += answer_pending(s, &s->peers[i], GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN,
                               "the bridge is shutting down; the request was not processed");
    if (left)
        GB_WARN("supervisor: answered %zu request(s) left at shutdown with STATUS_SHUTTING_DOWN", left);
    /* Replies kept for slow clients get a last chance to go out. */
    for (uint64_t end = gb_now_ns() + 1000000000ull; s->router && gb_now_ns() < end;) {
        int waiting = 0;
        for (size_t i = 0; i < s->n_peers; i++)
            waiting |= peer_stalled(&s->peers[i]) && !peer_flush(s, &s->peers[i]);
        if (!waiting)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (s->worker > 0) {
        kill(s->worker, SIGKILL);
        waitpid(s->worker, NULL, 0);
    }
    while (s->n_peers)
        peer_drop(s, s->n_peers - 1);
    if (s->hb)
        zmq_close(s->hb);
    free(s->items);
    free(s->owner);
    free(s->peers);
    gbi_frame_fini(&s->scratch);
    gb_connwatch_stop(&s->cw);
    if (s->router)
        zmq_close(s->router);
    if (s->curve) {
        gbi_curve_stop(s->curve);
        free(s->curve);
    }
    /* Restarted when a signal interrupts it (see gb_server_destroy). */
    while (s->zctx && zmq_ctx_term(s->zctx) != 0 && errno == EINTR)
        ;
    gb_ipc_files_remove(&s->ipc_files);
    remove_worker_side(s);
    gbi_zq_destroy(&s->zq);
}

gb_err gb_supervise(const gb_config_t *cfg, char *const *argv, volatile sig_atomic_t *stop,
                    volatile sig_atomic_t *reload, gb_reload_t *rl)
{
    gbi_sup_t s;
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.reload = reload;
    s.rl = rl;
    s.hb_timeout_ms = hb_timeout_ms();
    s.fwd_max = (size_t)cfg->max_message_size * SUP_FWD_FRAMES;
    const char *drop = gb_test_hook(GB_HOOK_SUP_DROP_BYTES);
    s.drop_bytes = drop ? strtoul(drop, NULL, 10) : 0;
    const char *peers = gb_test_hook(GB_HOOK_SUP_PEERS);
    s.max_peers = peers && strtoul(peers, NULL, 10) >= 1 && strtoul(peers, NULL, 10) <= MAX_PEERS
                      ? strtoul(peers, NULL, 10)
                      : MAX_PEERS;
    /* One at a time: a failed one says which, and close_all frees the others. */
    s.peers = sup_calloc(MAX_PEERS + CONTROL_PEERS, sizeof *s.peers, "the client table");
    s.items = s.peers ? sup_calloc(MAX_PEERS + CONTROL_PEERS + 2, sizeof *s.items, "the poll table") : NULL;
    s.owner = s.items ? sup_calloc(MAX_PEERS + CONTROL_PEERS + 2, sizeof *s.owner, "the poll table") : NULL;
    gb_err err = s.owner ? GB_OK : GB_ERR_NOMEM;
    if (err == GB_OK)
        err = make_worker_side(&s, argv);
    if (err == GB_OK)
        err = open_front(&s);
    if (err == GB_OK) {
        GB_INFO("supervisor: serving %zu endpoint(s); the GPU side runs in a worker process it restarts",
                cfg->n_endpoints);
        if (spawn_worker(&s) != 0)
            err = GB_ERR_IO;
    }
    const bool served = err == GB_OK;
    if (served)
        err = serve(&s, stop);
    close_all(&s);
    /* After close_all: it answers the requests still waiting at the end. */
    if (served)
        GB_INFO("supervisor: stopped: %llu replies to clients (%llu from workers, %llu answered here, %llu of "
                "them frames too large); %llu restart(s) of the worker; %llu connection(s) closed with replies "
                "owed, %llu reply(ies) discarded for clients gone",
                (unsigned long long)(s.replies_fwd + s.replies_own), (unsigned long long)s.replies_fwd,
                (unsigned long long)s.replies_own, (unsigned long long)s.too_large,
                (unsigned long long)(s.spawns ? s.spawns - 1 : 0), (unsigned long long)s.conns_dropped,
                (unsigned long long)s.replies_undelivered);
    gb_fdguard_report(&s.fdg);
    return err;
}
