/* Internal to the server: its state and the helpers its files share
 * (server.c: the loop and the rings; server_control.c: control messages;
 * curve.c: CURVE and the ZAP handler). */
#ifndef GB_SERVER_INTERNAL_H
#define GB_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "connwatch.h"
#include "control.pb-c.h"
#include "fdguard.h"
#include "gpubridge.pb-c.h"
#include "ipc_file.h"
#include "server.h"
#include "wire.h"

#define GBI_ID_MAX 255        /* ZeroMQ routing ids are at most 255 bytes */
_Static_assert(GB_MAX_RINGS <= 32, "gb_server.unpublished is a 32-bit mask of rings");

#define GBI_BATCH_MAX 256     /* replies per ReplyBatch frame */
#define GBI_WATCH_NS 5000ull  /* GPU replies awaited: socket looked at this often */
#define GBI_ARENA_SIZE (1u << 20) /* encoded replies per outbox frame */
#define GBI_FRAME_PREFIX 16        /* room for the ReplyBatch key and length */
/* Bounds (docs/protocol.md, "Backpressure, bounds and oversized frames"). */
#define GBI_FLUSH_AT (64u << 10)   /* an outbox frame goes out once it holds this much */
#define GBI_SNDHWM 32              /* ZeroMQ: reply frames queued per client */
#define GBI_RCVHWM 256             /* ZeroMQ: frames not yet read, per client, at most (gbi_rcvhwm) */
#define GBI_RCV_BYTES (16u << 20)  /* ... and about this many bytes of them at max_message_size */
#define GBI_FRAME_ERR_BUDGET (64u << 10) /* error replies of one frame with their texts */
#define GBI_CLIENT_MIN (8u << 20)  /* per-client bound on held frames + unsent replies */
#define GBI_MSG_TEST_SPIN 0xFF7E   /* test hook: the server loop spins (GPUBRIDGE_TEST_SPIN=1) */
#define GBI_CLIENT_BUCKETS 256

/* Between the supervisor and its worker (supervisor.c). Each client frame
 * goes to the worker after a part of GBI_TAG_LEN bytes, its tag: a number
 * the supervisor counts up per client connection, kept with the frame's
 * correlation ids. A frame the worker refuses whole (its client left its
 * replies unread) is not decoded, so the worker names it by its tag
 * instead: it keeps the refused tags as runs and, where it would send the
 * frames' BUSY replies, sends one note per run, [GBI_NOTE_REFUSED][first
 * tag][last tag]. The supervisor strikes those frames' ids and sends the
 * BUSY replies itself (one per frame, correlation id 0). The other way,
 * [GBI_NOTE_REFUSED_HERE][too large][unread] tells the worker to count frames
 * the supervisor refused itself: as too large (Telemetry.frames_too_large),
 * and because their client left its replies unread
 * (Telemetry.frames_refused_unread). A note
 * starts with a zero byte, which no encoded ServerFrame or ClientFrame does
 * (field number 0); numbers are little-endian. */
#define GBI_TAG_LEN 8
#define GBI_NOTE_LEN 18
#define GBI_NOTE_REFUSED 'R'
#define GBI_NOTE_REFUSED_HERE 'L'
/* [GBI_NOTE_DROPPED][connections][replies]: the supervisor saw that many
 * client connections close with replies owed, and discarded that many
 * replies for clients gone (Telemetry.connections_dropped, replies_undelivered). */
#define GBI_NOTE_DROPPED 'D'
/* [GBI_NOTE_FRAMES_HERE][frames][0]: client frames the supervisor answered
 * itself, never passed on; [GBI_NOTE_REPLIES_HERE][status][replies]: replies
 * it made itself with that status (the metrics' frames and replies). */
#define GBI_NOTE_FRAMES_HERE 'F'
#define GBI_NOTE_REPLIES_HERE 'S'
#define GBI_REFUSED_RUNS 4 /* runs a worker keeps per client; when full, it refuses on (one run grows) */

static inline void gbi_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t gbi_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A note of kind k with a and b; 1 when buf (len bytes) is one, filling a, b. */
static inline void gbi_note_make(uint8_t note[GBI_NOTE_LEN], char k, uint64_t a, uint64_t b)
{
    note[0] = 0;
    note[1] = (uint8_t)k;
    gbi_put_u64(note + 2, a);
    gbi_put_u64(note + 10, b);
}

static inline int gbi_note_read(const uint8_t *buf, size_t len, char k, uint64_t *a, uint64_t *b)
{
    if (len != GBI_NOTE_LEN || buf[0] != 0 || buf[1] != (uint8_t)k)
        return 0;
    *a = gbi_get_u64(buf + 2);
    *b = gbi_get_u64(buf + 10);
    return 1;
}

/* Routing ids of more than 5 bytes that start with a zero byte and "gb-"
 * are the supervisor's own (its heartbeat's towards the worker); it refuses
 * them to clients. 5 bytes: the ids ZeroMQ makes (0 and a counter). */
static inline int gbi_sup_own_id(const uint8_t *id, size_t len)
{
    return len > 5 && memcmp(id, "\0gb-", 4) == 0;
}

/* Who asked for the request in ring position p (pending[p & (cap - 1)]). */
typedef struct gbi_pending {
    uint64_t corr;
    uint32_t hops;   /* grains the request passed through before this one (server_route.c) */
    uint16_t link;   /* 1 + the device link whose pair's order waits for its delivery (links.h), or 0 */
    uint8_t id_len;
    uint8_t delim;   /* the client sent an empty delimiter frame (REQ-style) */
    uint8_t one_way;
    uint8_t id[GBI_ID_MAX];
} gbi_pending_t;

/* A frame read but not fully fed: the ring its next envelope needs is full.
 * It waits in that ring's FIFO; later frames for the same grain type queue
 * behind it, so requests keep their order. */
struct gbi_client;

typedef struct gbi_held {
    struct gbi_held *next;
    gbi_frame_t *frame; /* owned: gbi_frame_hold's copy */
    size_t next_env;    /* index of the first envelope not yet handled */
    size_t bytes;    /* memory this hold takes (record, envelopes, bytes), for the hold bounds */
    struct gbi_client *client; /* whose share it counts against */
    uint8_t id[GBI_ID_MAX];
    uint8_t id_len;
    uint8_t delim;
    uint8_t admin;      /* its sender may change state (authority.h) */
    int err_corr0;      /* the frame's error budget so far, kept across resumes */
    size_t err_bytes;   /* (gb_server.frame_err_bytes, frame_corr0) */
    uint32_t rings;     /* bit i: its envelopes go through rings[i] (counted in its client's ring_holds) */
} gbi_held_t;

/* A message between grains waiting for room in its target's ring
 * (server_route.c): the outbox, one FIFO per target type. */
typedef struct gbi_mail {
    struct gbi_mail *next;
    gbi_pending_t origin; /* a forward: the caller; a send: nobody (one_way, corr 0) */
    uint64_t key;
    uint64_t since_ns;   /* when it began to wait */
    size_t bytes;        /* memory it takes, for the outbox bound */
    uint32_t len;
    uint16_t type;
    uint8_t from;        /* the sender's ring */
    uint8_t forward;
    unsigned char rec[];
} gbi_mail_t;

typedef struct gbi_ring {
    gb_engine_type_t *t;
    gbi_pending_t *pending;
    gbi_held_t *held_head, *held_tail; /* frames waiting for room in this ring */
    gbi_mail_t *mail_head, *mail_tail; /* messages from grains waiting for room in this ring */
    uint64_t mail_held;                /* how many */
    /* Messages its grains made: one-way sends, forwards, and of those the
     * ones that could not be delivered (Telemetry). */
    uint64_t mail_sent, mail_forwarded, mail_undeliverable;
    /* The kernel's heartbeat as the health check last saw it change, and
     * when (GrainTypeStatus.heartbeat_age_ns). */
    uint64_t hb_seen, hb_seen_ns;
    int failed_seen; /* the health check has reported its GB_RK_FAILED */
} gbi_ring_t;

/* Replies waiting to go to one client, flushed as one frame. They are
 * encoded as they come (server_reply.c): buf holds GBI_FRAME_PREFIX free
 * bytes, then len bytes of ReplyBatch entries. */
typedef struct gbi_outbox {
    uint8_t id[GBI_ID_MAX];
    uint8_t id_len;
    uint8_t delim;
    size_t n;
    size_t len;
    uint8_t *buf;
} gbi_outbox_t;

/* A reply frame ZeroMQ would not take yet (the client's queue is full). */
typedef struct gbi_outq {
    struct gbi_outq *next;
    size_t len;
    uint8_t data[];
} gbi_outq_t;

/* What the bridge keeps for one client beyond ZeroMQ's queues: its held
 * frames' memory and its replies not yet taken by ZeroMQ. A record lives
 * while any of it is non-zero (server_reply.c). */
typedef struct gbi_client {
    struct gbi_client *hnext;       /* hash chain */
    struct gbi_client *prev, *next; /* every record */
    size_t held_mem;                /* memory of its held frames */
    size_t out_mem;                 /* memory of its unsent reply frames */
    gbi_outq_t *out_head, *out_tail;
    uint64_t refused_owed;          /* frames refused while it did not read: BUSY replies still to send */
    /* Supervised worker: tagged frames refused while it did not read, as
     * runs of tags [first, last], noted to the supervisor instead of BUSY
     * replies; and the last tag seen from it. */
    uint64_t run_first[GBI_REFUSED_RUNS], run_last[GBI_REFUSED_RUNS];
    uint8_t n_runs;
    uint64_t last_tag;
    /* Its frames that came while an older one of its frames was held and
     * that go through a ring the older one has yet to reach: they wait,
     * whole and in order, until that one is fed (server_feed.c), so that no
     * later frame overtakes it there. */
    struct gbi_held *wait_head, *wait_tail;
    /* Per ring, its held and waiting frames that still go through it: a new
     * frame waits behind them only if it goes through one of those rings. */
    uint32_t ring_holds[GB_MAX_RINGS];
    uint8_t id[GBI_ID_MAX];
    uint8_t id_len;
    uint8_t delim;
} gbi_client_t;

typedef struct gbi_stats gbi_stats_t; /* server_metrics.c */

/* Counters read by other I/O threads (Telemetry, metrics, the drain): one
 * writer each, so a relaxed load and store, no read-modify-write. */
#define GBI_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define GBI_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct gb_server {
    const gb_config_t *cfg;
    gb_engine_t *engine;
    const gb_facts_t *facts;
    const gb_selection_t *sel;
    void *zctx;
    void *sock;
    struct gbi_zq *zq; /* large reply frames queued in ZeroMQ per client (zq_bytes.h); NULL in a shard */
    pthread_t zap_thread;
    void *zap_sock;
    int zap_running;
    gbi_ring_t rings[GB_MAX_RINGS];
    gbi_outbox_t out;
    gbi_frame_t scratch; /* the frame being decoded; its envs array is reused */
    size_t held_bytes;   /* memory of all rings' held frames */
    size_t held_limit;   /* bound on held_bytes: frames that would pass it are refused STATUS_BUSY */
    size_t client_limit; /* bound on one client's held frames + unsent replies */
    gbi_client_t *buckets[GBI_CLIENT_BUCKETS];
    gbi_client_t *clients; /* every record */
    size_t n_clients;
    size_t out_mem;        /* all clients' unsent reply frames */
    size_t out_limit;      /* bound on out_mem (reply_backlog_mb): past it a client with unsent replies is refused */
    int out_over_logged;   /* the front: the total passed out_limit, said once until half of it is left */
    /* The frame being fed: its error replies so far (GBI_FRAME_ERR_BUDGET). */
    int feeding;
    size_t frame_err_bytes;
    int frame_corr0;
    uint64_t too_large_logged_ns, too_large_unlogged;
    gb_fdguard_t fdg;    /* descriptors near the limit: refuse new connections */
    gb_ipc_files_t ipc_files; /* socket files of its ipc endpoints, removed at close */
    gbi_ring_t *blocked;  /* set with NEEDS_ROOM: the ring that had no room */
    gbi_held_t *resuming; /* the held frame being fed, if any */
    uint32_t unpublished; /* rings[i] has requests claimed, not yet published (bit i) */
    int shutting_down;   /* no more reading from the socket */
    int exit_on_gpu_failure; /* supervised worker: a failed kernel ends the process (gb_server_run) */
    int tagged;          /* supervised worker: frames come tagged, notes go both ways (GBI_TAG_LEN) */
    uint64_t frame_tag;  /* the tag of the frame being handled; 0: none */
    int gpu_failed;
    int test_faults; /* GPUBRIDGE_TEST_FAULTS=1: message type GB_MSG_TEST_FAULT reaches the kernel */
    int test_spin;   /* GPUBRIDGE_TEST_SPIN=1: message type GBI_MSG_TEST_SPIN spins this loop */
    int refusing;        /* envelopes still to feed get SHUTTING_DOWN */
    int peer_admin;      /* the frame being fed comes from a peer with control authority */
    uint64_t frames_in, requests, replies, error_replies;
    uint64_t frames_too_large, requests_busy, frames_refused_unread, errors_folded;
    /* Connections that closed while their client was owed replies, and
     * replies discarded because their client's connection was gone. */
    uint64_t conns_dropped, replies_undelivered;
    uint64_t dropped_logged_ns, dropped_unlogged;
    gb_connwatch_t cw; /* the front: closed client connections (connwatch.h) */
    /* Replies owed per client by hash of routing id (GBI_OUT_HASH buckets,
     * atomic, shared by the shards): requests with a correlation id read and
     * not yet answered. Read when a client's connection closes. */
    int64_t *owed_hash;

    size_t mail_bytes;     /* memory of the outbox (messages between grains waiting for room) */
    size_t mail_limit;     /* its bound (messaging.outbox_kb) */
    uint64_t mail_hold_ns; /* longest a message waits (messaging.hold_ms) */
    uint32_t mail_max_hops;

    gbi_stats_t *stats; /* metrics counting; NULL: no endpoint */
    volatile sig_atomic_t *reload_flag; /* set by SIGHUP: call reload_fn (gb_server_on_reload) */
    void (*reload_fn)(void *ctx, gb_server_t *s);
    void *reload_ctx;

    /* Several I/O threads (server_io.c, io_threads > 1). The front, the
     * thread of gb_server_run, owns the socket and the clients' unsent
     * replies; it hands each frame to a shard by its client's routing id, so
     * a client's frames stay in order. A shard decodes, feeds rings, drains
     * the rings it owns and encodes replies, sent back to the front over its
     * inproc pair (s->sock in a shard). Rings are shared: a ring's lock
     * covers every producer-side ring call of a shard on it (ring_locks[i]);
     * its drainer needs it only where the consumer side is not apart. */
    gb_server_t *front;          /* a shard: its front; NULL otherwise */
    void *cur_body;              /* the front: the zmq_msg_t of the frame being read */
    gb_server_t *shards[GB_MAX_IO_THREADS];
    void *pairs[GB_MAX_IO_THREADS];     /* the front's end of each shard's pair */
    uint64_t forwarded[GB_MAX_IO_THREADS]; /* frames handed to each shard */
    int n_io;        /* shards started (the front, for totals) */
    int n_shards;    /* shards frames go to now (0 once they stopped) */
    int shard_idx;
    pthread_t thread;
    int running;                 /* a shard: its thread was started and not yet joined */
    pthread_mutex_t *ring_locks; /* the front's, one per ring */
    uint32_t locked;             /* a shard: rings whose lock it holds */
    uint32_t pinned;             /* a shard: the ring it drains (its lock stays held) */
    int draining;                /* a shard: draining a ring; other locks are only tried */
    uint64_t taken;              /* a shard: frames fully handled (atomic) */
    int quiet;                   /* a shard: passes in a row with nothing to do (atomic) */
    int io_shutting, io_stop, io_abort; /* the front's word to its shards (atomic) */
    /* Replies not yet taken by ZeroMQ per client, by hash of routing id
     * (GBI_OUT_HASH buckets, atomic): on their way from a shard, or kept by
     * the front. A shard checks a client's bound with it. */
    uint64_t *out_hash;
    /* Of those, the bytes the front keeps (not on their way): whether a
     * client has unsent replies, for the total bound (gbi_out_total_over). */
    uint64_t *kept_hash;
    uint64_t out_total; /* the front: the sum of out_hash (atomic), for the total bound */
    int bell;     /* a shard: eventfd that wakes it when another shard fed a ring it drains */
    int sleeping; /* a shard: in its poll (atomic) */
    int wants_room; /* a shard: it holds frames or messages for rings (atomic) */
};

#define GBI_OUT_HASH 4096
/* Routing id's hash (FNV-1a): the shard of a client, its out_hash bucket. */
static inline uint32_t gbi_id_hash(const uint8_t *id, uint8_t id_len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < id_len; i++)
        h = (h ^ id[i]) * 16777619u;
    return h;
}

static inline void gbi_out_note(gb_server_t *s, const uint8_t *id, uint8_t id_len, int64_t delta)
{
    if (s->out_hash) {
        __atomic_fetch_add(&s->out_hash[gbi_id_hash(id, id_len) % GBI_OUT_HASH], (uint64_t)delta, __ATOMIC_RELAXED);
        __atomic_fetch_add(&(s->front ? s->front : s)->out_total, (uint64_t)delta, __ATOMIC_RELAXED);
    }
}

static inline void gbi_kept_note(gb_server_t *s, const uint8_t *id, uint8_t id_len, int64_t delta)
{
    if (s->kept_hash)
        __atomic_fetch_add(&s->kept_hash[gbi_id_hash(id, id_len) % GBI_OUT_HASH], (uint64_t)delta, __ATOMIC_RELAXED);
}

static inline void gbi_owed_note(gb_server_t *s, const uint8_t *id, uint8_t id_len, int64_t delta)
{
    int64_t *h = s->front ? s->front->owed_hash : s->owed_hash;
    if (!h)
        return;
    int64_t *b = &h[gbi_id_hash(id, id_len) % GBI_OUT_HASH];
    if (delta >= 0) {
        __atomic_fetch_add(b, delta, __ATOMIC_RELAXED);
        return;
    }
    /* Never below 0: a failed one-way message's error reply is counted off
     * though its request was not counted in, and a bucket that went negative
     * would hide what its other clients are owed for good. */
    int64_t v = __atomic_load_n(b, __ATOMIC_RELAXED);
    while (v > 0 && !__atomic_compare_exchange_n(b, &v, v + delta < 0 ? 0 : v + delta, 1, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED))
        ;
}

/* Whether client (id) has replies kept for it, not yet taken by ZeroMQ: its
 * record's, or, with several I/O threads, its bucket's. */
static inline int gbi_has_kept(gb_server_t *s, const uint8_t *id, uint8_t id_len, size_t own)
{
    if (s->kept_hash)
        return __atomic_load_n(&s->kept_hash[gbi_id_hash(id, id_len) % GBI_OUT_HASH], __ATOMIC_RELAXED) != 0;
    return own != 0;
}

/* Bytes of client (id)'s replies not yet taken by ZeroMQ: its record's, or,
 * with several I/O threads, its bucket's (which clients that share it add
 * to, and which counts replies on their way from the shards). */
static inline size_t gbi_out_of(gb_server_t *s, const uint8_t *id, uint8_t id_len, size_t own)
{
    if (s->out_hash)
        return (size_t)__atomic_load_n(&s->out_hash[gbi_id_hash(id, id_len) % GBI_OUT_HASH], __ATOMIC_RELAXED);
    return own;
}

/* All clients' unsent replies past reply_backlog_mb. With several I/O
 * threads the front keeps them for every shard, so the total is one, read by
 * the shards too, and counts replies on their way to the front as well. */
static inline int gbi_out_total_over(const gb_server_t *s)
{
    const gb_server_t *root = s->front ? s->front : s;
    uint64_t total = root->out_hash ? __atomic_load_n(&root->out_total, __ATOMIC_RELAXED)
                                    : __atomic_load_n(&root->out_mem, __ATOMIC_RELAXED);
    return total > root->out_limit;
}

/* Shard or single loop: whether s drains ring i (its owner). */
static inline int gbi_owns(const gb_server_t *s, size_t i)
{
    return !s->front || (int)(i % (size_t)s->front->n_io) == s->shard_idx;
}
/* A shard: takes ring r's lock until gbi_publish_all. While it drains a ring
 * it only tries (0: busy, the caller holds its message back); otherwise it
 * waits only for a ring past every ring it holds, and else first lets go of
 * them all, so that no two shards wait on each other. Always 1 with one I/O
 * thread. */
int gbi_ring_take(gb_server_t *s, gbi_ring_t *r);

/* Queues a reply for client (id, delim); flushes the outbox first when it
 * holds another client's replies or is full. payload/error are copied. */
void gbi_reply(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr, int status,
               const char *error, uint32_t message_type, const uint8_t *payload, size_t len);
void gbi_flush(gb_server_t *s);
/* n replies of status to clients, for Telemetry and the metrics (status -1:
 * some error outside the metrics' range). */
void gbi_count_replies(gb_server_t *s, int status, uint64_t n);
/* How many replies a ServerFrame holds (server_reply.c). */
size_t gbi_reply_count(const uint8_t *frame, size_t len);
/* The front: client (id)'s connection closed (connwatch.h); logs and counts
 * it when the client was owed replies (server_reply.c). */
void gbi_conn_closed(void *ctx, const uint8_t *id, size_t id_len);
/* Sends a reply frame of n replies to a client, or keeps it (server_reply.c). */
void gbi_deliver(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *frame, size_t len,
                 size_t n);
/* Per-client records (server_reply.c): find one, or make it (NULL: out of
 * memory); a record with nothing left is freed by gbi_client_release. */
gbi_client_t *gbi_client_find(gb_server_t *s, const uint8_t *id, uint8_t id_len);
gbi_client_t *gbi_client_get(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim);
void gbi_client_release(gb_server_t *s, gbi_client_t *c);
/* Hands unsent reply frames to ZeroMQ as its queues take them, then the
 * BUSY replies owed for refused frames. Returns how many frames went. */
int gbi_send_backlog(gb_server_t *s);
void gbi_clients_fini(gb_server_t *s);
/* The outbox's buffer: allocated once (init returns -1 when out of memory). */
int gbi_outbox_init(gbi_outbox_t *o);
void gbi_outbox_fini(gbi_outbox_t *o);

/* server_feed.c. HANDLED: every envelope of the frame handled; NEEDS_ROOM:
 * it waits in s->blocked's FIFO (a fresh frame, h NULL, is copied there; the
 * caller keeps f either way). */
enum { HANDLED = 0, NEEDS_ROOM = 1 };
int gbi_feed_frame(gb_server_t *s, const gbi_frame_t *f, size_t from, const uint8_t *id, uint8_t id_len,
                   uint8_t delim, size_t bytes, gbi_held_t *h);
/* Frees a held frame and its copy of the envelopes. */
void gbi_held_free(gbi_held_t *h);
/* Feeds the frames waiting on ring r, in order, while it has room. */
int gbi_resume_held(gb_server_t *s, gbi_ring_t *r);
/* Answers every held frame's remaining envelopes with SHUTTING_DOWN. */
void gbi_refuse_held(gb_server_t *s);

/* server.c: decodes and feeds one frame's bytes from client (id, delim),
 * answering bad frames with an error; and one pass of draining every ring and
 * feeding held frames (returns how much it moved). Used by the loop and by
 * the fuzz target. */
void gbi_handle_frame(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *data,
                      size_t size);
int gbi_pump(gb_server_t *s);
/* server.c: decodes and feeds a frame that passed the front's checks;
 * refusing: its requests get STATUS_SHUTTING_DOWN. */
void gbi_decode_feed(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *data,
                     size_t size, int refusing);
/* server.c: one pass of health checks of the rings s owns. */
void gbi_check_health(gb_server_t *s);
/* server.c: the end of the loop (answers what is left, sends what it can). */
void gbi_finish(gb_server_t *s);
/* server_io.c: the loop with several I/O threads; a frame to its shard. */
gb_err gbi_io_run(gb_server_t *s, volatile sig_atomic_t *stop, int drain_ms);
int gbi_read_one(gb_server_t *s);
void gbi_io_forward(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, void *body);
void gbi_io_destroy(gb_server_t *s);
/* A shard published into ring i, which another shard drains: wakes it. */
void gbi_io_ring_bell(gb_server_t *s, size_t i);
/* A shard drained replies: wakes the shards that wait for room. */
void gbi_io_room_bell(gb_server_t *s);
/* Totals over the front and its shards (Telemetry, metrics; ring i's mail counts). */
typedef struct gbi_totals {
    uint64_t frames_in, frames_too_large, requests_busy, frames_refused_unread, requests, replies, error_replies;
    uint64_t conns_dropped, replies_undelivered;
    uint64_t held_bytes, out_mem, mail_bytes;
    uint64_t mail_sent, mail_forwarded, mail_held, mail_undeliverable;
    uint64_t mail_linked; /* of mail_forwarded, by device links (links.h) */
} gbi_totals_t;
void gbi_totals(gb_server_t *s, size_t ring, gbi_totals_t *t);
/* Requests in every ring, not yet answered by the kernel. */
uint64_t gbi_total_in_flight(gb_server_t *s);
/* Logs the drain's start (at_start) or its deadline passed, with what is left. */
void gbi_log_drain(gb_server_t *s, int drain_ms, bool at_start);

/* server_route.c: a reply that carries messages (GB_SLOT_MAIL), its payload
 * pl (NULL: past its slot), written by ring r's grain for the request p:
 * routes them (into their targets' rings, or the outbox) and sends the
 * handler's own reply, if any, to p. */
void gbi_route_reply(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h, const unsigned char *pl,
                     const gbi_pending_t *p);
/* Feeds the outbox's messages into rings with room, in order; messages past
 * their hold, or for a type that stopped, become undeliverable. Returns how
 * many it moved. */
int gbi_route_pump(gb_server_t *s);
/* Answers every message in the outbox undeliverable (shutdown), and frees it. */
void gbi_route_fini(gb_server_t *s, int answer);
/* The proto status of a failed slot status (slot statuses use the proto's
 * numbers where they exist). */
int gbi_slot_status(int slot_status);
/* server.c: queues the OK reply record rec (h->len bytes) of ring r to p. */
void gbi_reply_record(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h, const unsigned char *rec,
                      const gbi_pending_t *p);
/* server.c: the error reply for slot status h->status (and h->aux) of ring r to p. */
void gbi_reply_slot_error(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h, const gbi_pending_t *p);
/* server_feed.c: publishes what was claimed in every ring. */
void gbi_publish_all(gb_server_t *s);

/* Why a configured grain type has no ring kernel (for its refusals). */
const char *gbi_unserved_why(const gb_engine_type_t *t);
/* Answers control operation op of request corr (all but DeactivateGrain,
 * which goes through the grain's ring). */
void gbi_control(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr,
                 const Gpubridge__Control *op);

/* CURVE: loads the server key pair and starts the ZAP handler (curve.c). */
gb_err gbi_curve_setup(gb_server_t *s, char *err, size_t errlen);
void gbi_curve_stop(gb_server_t *s);

const char *gbi_status_name(int status);

/* Logs an endpoint just bound on sock, as clients reach it: a wildcard
 * port (tcp://host:*) or ipc path as ZeroMQ chose it. who: a prefix. */
void gbi_log_listening(void *sock, const char *who, const char *endpoint, bool curve);

/* ZeroMQ's receive high-water mark per client, in frames (it counts
 * messages, not bytes): GBI_RCV_BYTES of frames of max_message_size, 4 to
 * GBI_RCVHWM of them. Frames a client sends faster than the bridge serves
 * them wait there, and cost bytes: 256 frames of 1 MiB would let each client
 * that sends frames slow to serve (many tiny envelopes) hold 256 MiB. Frames
 * past max_message_size (up to gbi_frame_hard_cap) are refused unread, so
 * they leave the queue as fast as the bridge reads. */
static inline int gbi_rcvhwm(uint32_t max_message_size)
{
    const uint32_t n = GBI_RCV_BYTES / (max_message_size ? max_message_size : 1);
    return n < 4 ? 4 : n > GBI_RCVHWM ? GBI_RCVHWM : (int)n;
}

/* ZeroMQ's ZMQ_MAXMSGSIZE for the public socket: ZeroMQ closes the
 * connection of a client that sends a larger frame (it cannot be read, so it
 * cannot be answered). Frames between max_message_size and this are read and
 * answered STATUS_TOO_LARGE. Also used by the supervisor. */
static inline int64_t gbi_frame_hard_cap(uint32_t max_message_size)
{
    int64_t x = (int64_t)max_message_size * 4;
    return x > ((int64_t)64 << 20) ? x : ((int64_t)64 << 20);
}

#endif
