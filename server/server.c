/* The server loop: reading frames, draining rings, waiting, start-up and
 * shutdown. Feeding rings is in server_feed.c, replies in server_reply.c,
 * control messages in server_control.c. See server.h. */
#include "server_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "authority.h"
#include "codec.h"
#include "links.h"
#include "log.h"
#include "metrics.h"
#include "router_ids.h"
#include "server_metrics.h"
#include "test_hooks.h"
#include "zq_bytes.h"

static uint64_t now_ms(void) { return gb_now_ns() / 1000000ull; }

/* A frame over max_message_size: one TOO_LARGE reply, counted, and logged at
 * most once a second (a client can send many). */
static void refuse_too_large(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, size_t size)
{
    char err[160];
    GBI_ADD(s->frames_too_large, 1);
    s->too_large_unlogged++;
    uint64_t now = gb_now_ns();
    if (now - s->too_large_logged_ns >= 1000000000ull) {
        GB_WARN("refused %llu frame(s) over max_message_size (%u bytes); the last of %zu bytes",
                (unsigned long long)s->too_large_unlogged, s->cfg->max_message_size, size);
        s->too_large_logged_ns = now;
        s->too_large_unlogged = 0;
    }
    snprintf(err, sizeof err, "frame of %zu bytes exceeds max_message_size (%u)", size, s->cfg->max_message_size);
    gbi_reply(s, id, id_len, delim, 0, GPUBRIDGE__STATUS__STATUS_TOO_LARGE, err, 0, NULL, 0);
}

/* Keeps the tag of a refused frame in c's runs (see GBI_TAG_LEN). While the
 * runs are full every frame is refused, so the last one grows. */
static void refuse_tagged(gbi_client_t *c, uint64_t tag)
{
    uint8_t n = c->n_runs;
    if (n && (c->run_last[n - 1] + 1 == tag || n == GBI_REFUSED_RUNS)) {
        c->run_last[n - 1] = tag;
        return;
    }
    c->run_first[n] = c->run_last[n] = tag;
    c->n_runs++;
}

/* A tagged frame from c: a tag that does not follow the last one comes from
 * a new connection of the supervisor's, which dropped the old one only with
 * no correlation id waiting, so the old runs stand for frames without ids:
 * they are owed plain BUSY replies. */
static void tag_seen(gbi_client_t *c, uint64_t tag)
{
    if (c->last_tag && tag != c->last_tag + 1) {
        for (uint8_t i = 0; i < c->n_runs; i++)
            c->refused_owed += c->run_last[i] - c->run_first[i] + 1;
        c->n_runs = 0;
    }
    c->last_tag = tag;
}

/* All clients' unsent replies are past reply_backlog_mb, and client c has
 * some of its own: its frame is refused like one past its own bound. A
 * client that reads has none kept, and is served. */
static int total_refuses(gb_server_t *s, const gbi_client_t *c)
{
    return c->out_mem && gbi_out_total_over(s);
}

void gbi_handle_frame(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *data,
                      size_t size)
{
    if (!(s->tagged && gbi_sup_own_id(id, id_len))) /* the supervisor's heartbeat is no client's */
        GBI_ADD(s->frames_in, 1);
    /* A client that leaves its replies unread past its bound: its frames are
     * not decoded; each gets one BUSY reply, sent once it reads again (a
     * count here, so that its memory stays bounded however long it sends;
     * from the supervisor, a run of tags). */
    gbi_client_t *c = gbi_client_find(s, id, id_len);
    if (c && s->frame_tag)
        tag_seen(c, s->frame_tag);
    if (!c && s->out_hash && gbi_out_of(s, id, id_len, 0) > s->client_limit)
        c = gbi_client_get(s, id, id_len, delim); /* its replies are on their way from a shard */
    if (c && (gbi_out_of(s, id, id_len, c->out_mem) > s->client_limit || total_refuses(s, c) ||
              (s->frame_tag && c->n_runs == GBI_REFUSED_RUNS))) {
        if (s->frame_tag)
            refuse_tagged(c, s->frame_tag);
        else
            c->refused_owed++;
        GBI_ADD(s->frames_refused_unread, 1);
        return;
    }
    if (size > s->cfg->max_message_size) {
        refuse_too_large(s, id, id_len, delim, size);
        return;
    }
    if (s->n_shards && s->cur_body) {
        gbi_io_forward(s, id, id_len, delim, s->cur_body);
        return;
    }
    gbi_decode_feed(s, id, id_len, delim, data, size, s->shutting_down);
}

void gbi_decode_feed(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *data,
                     size_t size, int refusing_now)
{
    char err[160] = "";
    gbi_frame_t *f = &s->scratch;
    if (gbi_frame_decode(f, data, size, err, sizeof err) != 0 || !f->has_body) {
        gbi_reply(s, id, id_len, delim, 0, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                  err[0] ? err : "ClientFrame has neither an envelope nor a batch", 0, NULL, 0);
        return;
    }
    /* Replies it is owed: one per request with a correlation id (each gets
     * exactly one, which gbi_reply counts off; a one-way message gets one
     * only when it fails, so it is not counted). */
    int64_t owed = 0;
    for (size_t i = 0; i < f->n; i++)
        owed += f->envs[i].corr != 0 && f->envs[i].kind != GPUBRIDGE__KIND__KIND_ONE_WAY;
    if (owed)
        gbi_owed_note(s, id, id_len, owed);
    /* During the drain frames are still read: each request is refused. */
    int refusing = s->refusing;
    s->refusing |= refusing_now;
    gbi_feed_frame(s, f, 0, id, id_len, delim, size, NULL);
    s->refusing = refusing;
}

/* Reads one multipart message if there is one: [id][(empty)][frame]. */
int gbi_read_one(gb_server_t *s)
{
    zmq_msg_t part;
    uint8_t id[GBI_ID_MAX];
    size_t id_len = 0;
    int parts = 0, more = 0, delim = 0, bad = 0;
    uint64_t tag = 0, count, second;
    zmq_msg_t body;
    zmq_msg_init(&body);
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, s->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&part);
        zmq_msg_close(&body);
        return 0;
    }
    id_len = zmq_msg_size(&part) < sizeof id ? zmq_msg_size(&part) : sizeof id;
    memcpy(id, zmq_msg_data(&part), id_len);
    more = zmq_msg_more(&part);
    while (more) {
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, s->sock, 0) < 0)
            break;
        more = zmq_msg_more(&part);
        parts++;
        if (parts == 1 && !delim && zmq_msg_size(&part) == 0 && more) {
            delim = 1; /* one REQ-style empty delimiter: keep it in replies */
            parts = 0;
            continue;
        }
        if (s->tagged && !tag && parts == 1 && zmq_msg_size(&part) == GBI_TAG_LEN && more) {
            tag = gbi_get_u64(zmq_msg_data(&part)); /* from the supervisor: the frame's tag */
            parts = 0;
            continue;
        }
        if (parts == 1)
            zmq_msg_move(&body, &part);
        else
            bad = 1;
    }
    zmq_msg_close(&part);
    if (parts == 1)
        gb_connwatch_seen(&s->cw, &body, id, id_len);
    if (parts == 0 || bad) {
        GBI_ADD(s->frames_in, 1);
        gbi_reply(s, id, (uint8_t)id_len, (uint8_t)delim, 0, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                  "a request is one message part holding an encoded ClientFrame", 0, NULL, 0);
    } else if (s->tagged && !tag &&
               gbi_note_read(zmq_msg_data(&body), zmq_msg_size(&body), GBI_NOTE_REFUSED_HERE, &count, &second)) {
        GBI_ADD(s->frames_too_large, count); /* refused by the supervisor, counted here (Telemetry) */
        GBI_ADD(s->frames_refused_unread, second);
    } else if (s->tagged && !tag &&
               gbi_note_read(zmq_msg_data(&body), zmq_msg_size(&body), GBI_NOTE_DROPPED, &count, &second)) {
        GBI_ADD(s->conns_dropped, count); /* seen by the supervisor, counted here (Telemetry) */
        GBI_ADD(s->replies_undelivered, second);
    } else if (s->tagged && !tag &&
               gbi_note_read(zmq_msg_data(&body), zmq_msg_size(&body), GBI_NOTE_FRAMES_HERE, &count, &second)) {
        GBI_ADD(s->frames_in, count); /* answered by the supervisor, counted here (metrics) */
    } else if (s->tagged && !tag &&
               gbi_note_read(zmq_msg_data(&body), zmq_msg_size(&body), GBI_NOTE_REPLIES_HERE, &count, &second)) {
        GBI_ADD(s->replies, second); /* made by the supervisor, counted here (metrics) */
        gbi_count_replies(s, count < GB_METRICS_N_STATUS ? (int)count : -1, second);
    } else {
        s->peer_admin = gb_authority_peer(s->cfg, &body);
        s->frame_tag = tag;
        s->cur_body = &body; /* several I/O threads: the frame moves on to its shard */
        gbi_handle_frame(s, id, (uint8_t)id_len, (uint8_t)delim, zmq_msg_data(&body), zmq_msg_size(&body));
        s->cur_body = NULL;
        s->frame_tag = 0;
    }
    zmq_msg_close(&body);
    return 1;
}

/* ---- replies out of rings --------------------------------------------- */

static const char *slot_error(int st)
{
    switch (st) {
    case GB_SLOT_UNKNOWN_MESSAGE_TYPE: return "the grain has no such message type";
    case GB_SLOT_TOO_LARGE: return "the grain refused the record for its size: larger than it takes, not a size "
                                   "it takes, or with a reply that would not fit its out buffer";
    case GB_SLOT_GRAIN_TABLE_FULL: return "activation table full: every activation of this grain type that "
                                          "shares this key's partition was used within its collection age or "
                                          "has requests in flight; retry later, raise grains.max_grains, lower "
                                          "grains.collection_age_s, or deactivate grains you are done with";
    case GB_SLOT_HANDLER_ERROR: return "the grain's handler rejected the message";
    case GB_SLOT_NOT_ACTIVE: return "no activation of that key";
    case GB_SLOT_BAD_TARGET: return "the grain's handler sent a message to a target index its grain type does not "
                                    "declare (gb_grain_desc_t.targets)";
    case GB_SLOT_MAIL_FULL: return "the grain's handler made more messages, or larger ones, than its out buffer "
                                   "holds beside its reply (at most 64 a turn)";
    case GB_SLOT_FORWARDED: return "the grain's handler returned GB_SLOT_FORWARDED without forwarding the request";
    case GB_SLOT_LINK_HELD: return "a message between grains could not be delivered: it waited in a device link "
                                   "past messaging.hold_ms while its target grain type was deactivated";
    case GB_SLOT_LINKED: return "the grain wrote a reply to a request it had forwarded";
    default: return "error";
    }
}

int gbi_slot_status(int st)
{
    switch (st) {
    case GB_SLOT_EVICTED_FULL: return GPUBRIDGE__STATUS__STATUS_BUSY;
    case GB_SLOT_BAD_TARGET: return GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE;
    case GB_SLOT_MAIL_FULL: return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    case GB_SLOT_FORWARDED: return GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR;
    case GB_SLOT_MAIL: return GPUBRIDGE__STATUS__STATUS_INTERNAL;
    case GB_SLOT_LINK_HELD: return GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE;
    case GB_SLOT_LINK_STOPPED: return GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE;
    case GB_SLOT_LINKED: return GPUBRIDGE__STATUS__STATUS_INTERNAL;
    default: return st;
    }
}

void gbi_reply_slot_error(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h, const gbi_pending_t *p)
{
    char why[320];
    const char *text = gbi_codec_error(r->t->kind, h, why, sizeof why);
    gbi_reply(s, p->id, p->id_len, p->delim, p->corr, gbi_slot_status(h->status), text ? text : slot_error(h->status),
              0, NULL, 0);
}

/* The payload of OK reply h: in the slot, or out of line; NULL when its
 * length runs past the slot. */
static const unsigned char *reply_rec(gbi_ring_t *r, const gb_slot_hdr_t *h)
{
    const unsigned char *rec = gb_rk_reply_payload(r->t->rk, h);
    if (rec == (const unsigned char *)(h + 1) && h->len > gb_rk_payload_cap(r->t->rk))
        rec = NULL;
    return rec;
}

/* Encodes and queues OK reply record rec (h->len bytes; NULL: malformed) of
 * ring r for p. */
void gbi_reply_record(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h, const unsigned char *rec,
                      const gbi_pending_t *p)
{
    static _Thread_local uint8_t pb_buf[65536 + 64]; /* one per I/O thread */
    uint8_t *pb = pb_buf;
    const size_t cap = sizeof pb_buf;
    size_t len = 0;
    uint32_t mt = 0;
    const size_t bound = rec ? gbi_codec_reply_bound(r->t->kind, h->len) : 0;
    uint8_t *out = bound <= cap ? pb : malloc(bound);
    if (!out)
        gbi_reply(s, p->id, p->id_len, p->delim, p->corr, GPUBRIDGE__STATUS__STATUS_BUSY,
                  "the bridge is out of memory for this reply; retry later", 0, NULL, 0);
    else if (rec && gbi_codec_reply(r->t->kind, h, rec, out, bound, &len, &mt) == 0)
        gbi_reply(s, p->id, p->id_len, p->delim, p->corr, GPUBRIDGE__STATUS__STATUS_OK, NULL, mt, out, len);
    else {
        /* A grain library's fault, not the bridge's: name the type. A raw
         * type's reply always encodes; only a codec refuses one. */
        char why[192];
        if (!rec)
            snprintf(why, sizeof why, "grain type '%s' wrote a reply record of %u bytes, more than its slot holds",
                     r->t->name, (unsigned)h->len);
        else
            snprintf(why, sizeof why, "grain type '%s' wrote a reply record (type %u, %u bytes) its codec could not "
                     "decode", r->t->name, (unsigned)h->type, (unsigned)h->len);
        gbi_reply(s, p->id, p->id_len, p->delim, p->corr, GPUBRIDGE__STATUS__STATUS_INTERNAL, why, 0, NULL, 0);
    }
    if (out != pb)
        free(out);
}

/* STATUS_BUSY for a new key refused at the bound of the store of evicted
 * states (activation.c): names the bound and what to raise. */
static void reply_evicted_full(gb_server_t *s, gbi_ring_t *r, const gbi_pending_t *p)
{
    uint64_t max_bytes = 0, evicted = 0;
    gb_rk_evicted_store(r->t->rk, &max_bytes, &evicted); /* the drainer may hold no lock */
    char why[400];
    snprintf(why, sizeof why,
             "activation table full, and the store of evicted activations of grain type '%s' reached its bound "
             "(grains.max_evicted_kb = %llu KiB, %llu evicted grains): a new key needs an idle activation "
             "evicted; raise grains.max_evicted_kb or grains.max_grains, or deactivate grains you are done with",
             r->t->name, (unsigned long long)(max_bytes / 1024), (unsigned long long)evicted);
    gbi_reply(s, p->id, p->id_len, p->delim, p->corr, GPUBRIDGE__STATUS__STATUS_BUSY, why, 0, NULL, 0);
}

/* The ring whose grain wrote reply h into ring r: r itself, or, for a
 * forward's last grain over device links (gpubridge/device/link.h), the one
 * its status names (NULL: not a ring of this bridge). */
static gbi_ring_t *reply_from(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h)
{
    if (!(h->status & GB_SLOT_FROM))
        return r;
    const size_t from = (h->status & ~GB_SLOT_FROM) >> GB_SLOT_FROM_SHIFT;
    return from < s->engine->n_types && s->rings[from].t && s->rings[from].t->rk &&
                   gb_links_is_target(s->engine->links, from)
               ? &s->rings[from]
               : NULL;
}

/* Answers reply h (written by ring from's grain) of ring r for p. Returns
 * its proto status. */
static int answer(gb_server_t *s, gbi_ring_t *r, gbi_ring_t *from, const gb_slot_hdr_t *h, const gbi_pending_t *p)
{
    int status = h->status & GB_SLOT_STATUS_MASK; /* slot statuses use the proto's numbers */
    gb_slot_hdr_t fh = *h;
    fh.status = (uint16_t)status;
    if (!from) {
        status = GPUBRIDGE__STATUS__STATUS_INTERNAL;
        if (!(p->one_way && p->corr == 0))
            gbi_reply(s, p->id, p->id_len, p->delim, p->corr, status,
                      "a grain wrote a reply that names no grain type of this bridge", 0, NULL, 0);
    } else if (status == GB_SLOT_OK) {
        if (!p->one_way) {
            if (h->type == GB_MSG_DEACTIVATE_KEY)
                gbi_reply(s, p->id, p->id_len, p->delim, p->corr, status, NULL, 0, NULL, 0);
            else
                gbi_reply_record(s, from, &fh, reply_rec(r, h), p);
        }
    } else if (status == GB_SLOT_MAIL) {
        gbi_route_reply(s, from, &fh, reply_rec(r, h), p);
        status = GPUBRIDGE__STATUS__STATUS_OK;
    } else if (status == GB_SLOT_EVICTED_FULL) {
        status = GPUBRIDGE__STATUS__STATUS_BUSY;
        if (!(p->one_way && p->corr == 0))
            reply_evicted_full(s, from, p);
    } else if (status == GB_SLOT_LINK_STOPPED || status == GB_SLOT_LINK_HELD) {
        /* a forward undeliverable on the device; `from` is its target */
        char why[400];
        if (status == GB_SLOT_LINK_STOPPED)
            snprintf(why, sizeof why, "a message between grains could not be delivered: grain type '%s' is terminated",
                     from->t->name);
        else
            snprintf(why, sizeof why, "a message between grains could not be delivered: grain type '%s' had no room "
                     "for %u ms (messaging.hold_ms; it is deactivated)", from->t->name,
                     (unsigned)(s->mail_hold_ns / 1000000ull));
        if (!(p->one_way && p->corr == 0))
            gbi_reply(s, p->id, p->id_len, p->delim, p->corr, GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE, why, 0, NULL, 0);
    } else if (!(p->one_way && p->corr == 0)) {
        gbi_reply_slot_error(s, from, &fh, p);
    }
    return gbi_slot_status(status);
}

/* p's request is answered: if it was a message of a linked pair that took
 * the host path, the pair's order waits for it no longer (links.h). */
static void pending_done(gb_server_t *s, gbi_pending_t *p)
{
    if (p->link) {
        gb_links_delivered(s->engine->links, p->link - 1);
        p->link = 0;
    }
}

/* Answers the reply h that gb_rk_peek just gave for ring r, and consumes it. */
static void answer_peeked(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h)
{
    gb_rk_t *rk = r->t->rk;
    gbi_pending_t *p = &r->pending[h->corr & (gb_rk_capacity(rk) - 1)];
    const int status = answer(s, r, reply_from(s, r, h), h, p);
    pending_done(s, p);
    if (s->stats)
        gbi_stats_ring_reply(s, r, h->corr, status, h->type);
    gb_rk_consume(rk);
}

/* Ring r stopped (st): every request still in flight is answered, in
 * order, by its reply where its grain wrote one, else with an error.
 * Called holding the ring's lock, so the stop happened before these peeks:
 * no reply lands after them. Returns how many it answered. */
static int answer_stopped(gb_server_t *s, gbi_ring_t *r, const gb_rk_status_t *st)
{
    gb_rk_t *rk = r->t->rk;
    const uint32_t mask = gb_rk_capacity(rk) - 1;
    int status = st->state == GB_RK_FAILED ? GPUBRIDGE__STATUS__STATUS_GPU_ERROR : GPUBRIDGE__STATUS__STATUS_TERMINATED;
    char err[256];
    snprintf(err, sizeof err, "grain type '%s' %s before answering%s%s", r->t->name,
             st->state == GB_RK_FAILED ? "failed" : "was terminated", st->last_error_name[0] ? ": " : "",
             st->last_error_name);
    int n = 0;
    for (uint64_t pos = st->received; gb_rk_in_flight(rk) > 0; pos++, n++) {
        const gb_slot_hdr_t *h = gb_rk_peek(rk);
        if (h) { /* written before the stop (several cpu lanes stamp out of order) */
            answer_peeked(s, r, h);
            continue;
        }
        gbi_pending_t *p = &r->pending[pos & mask];
        if (!(p->one_way && p->corr == 0))
            gbi_reply(s, p->id, p->id_len, p->delim, p->corr, status, err, 0, NULL, 0);
        pending_done(s, p);
        if (s->stats)
            gbi_stats_ring_reply(s, r, pos, status, 0);
        gb_rk_consume(rk);
    }
    return n;
}

/* Sends the replies that are ready in ring r; answers, with an error, the
 * requests a stopped kernel will never answer. Returns how many it handled. */
static int drain_ring(gb_server_t *s, gbi_ring_t *r)
{
    gb_rk_t *rk = r->t->rk;
    const gb_slot_hdr_t *h = NULL;
    int n = 0;
    while (n < 4096 && (h = gb_rk_peek(rk))) {
        answer_peeked(s, r, h);
        n++;
    }
    if (!h && gb_rk_in_flight(rk) > 0 && gbi_ring_take(s, r)) { /* its lock: the state; else next pass */
        gb_rk_status_t st;
        gb_rk_status(rk, &st);
        if (st.state == GB_RK_TERMINATED || st.state == GB_RK_FAILED) {
            const uint32_t was = s->pinned; /* routing a reply's messages publishes: keep this lock */
            if (s->front)
                s->pinned |= 1u << (r - s->rings);
            n += answer_stopped(s, r, &st);
            s->pinned = was;
        }
    }
    return n;
}

/* A shard drains a ring it owns. Where the ring's consumer side may run
 * apart from its producers (gb_rk_consumer_apart), with no lock: the other
 * shards go on feeding the ring while this one encodes its replies. Else
 * under the ring's lock, kept (pinned) meanwhile. Either way routing the
 * replies' messages only tries the rings' locks. */
static int drain_owned(gb_server_t *s, gbi_ring_t *r)
{
    if (!s->front)
        return drain_ring(s, r);
    if (gb_rk_in_flight(r->t->rk) == 0)
        return 0;
    if (!gb_rk_consumer_apart(r->t->rk)) {
        gbi_ring_take(s, r); /* before draining is set: waits as any take */
        s->pinned = 1u << (r - s->rings);
    }
    s->draining = 1;
    int n = drain_ring(s, r);
    s->pinned = 0;
    s->draining = 0;
    gbi_publish_all(s);
    const gb_rk_state state = gb_rk_state_of(r->t->rk);
    if (gb_rk_in_flight(r->t->rk) > 0 && (state == GB_RK_TERMINATED || state == GB_RK_FAILED)) {
        /* Stopped, and its lock was busy: wait for it now, holding none,
         * rather than leave its callers until the next pass; kept while
         * routing tries the others, as above. */
        gbi_ring_take(s, r);
        s->pinned = 1u << (r - s->rings);
        s->draining = 1;
        n += drain_ring(s, r);
        s->pinned = 0;
        s->draining = 0;
        gbi_publish_all(s);
    }
    if (n)
        gbi_io_room_bell(s);
    return n;
}

int gbi_pump(gb_server_t *s)
{
    int progress = 0;
    for (size_t i = 0; i < s->engine->n_types; i++)
        if (s->rings[i].t && s->rings[i].t->rk && gbi_owns(s, i))
            progress += drain_owned(s, &s->rings[i]);
    if (s->mail_bytes) /* messages between grains before client frames: they are work under way */
        progress += gbi_route_pump(s);
    for (size_t i = 0; i < s->engine->n_types; i++)
        if (s->rings[i].held_head)
            progress += gbi_resume_held(s, &s->rings[i]);
    return progress;
}

uint64_t gbi_total_in_flight(gb_server_t *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->engine->n_types; i++)
        if (s->rings[i].t && s->rings[i].t->rk)
            n += gb_rk_in_flight(s->rings[i].t->rk);
    return n;
}

/* The drain's work as an operator counts it: requests in rings, frames held
 * for them, and messages between grains waiting in the outbox (forwards owe
 * their caller a reply too). */
void gbi_log_drain(gb_server_t *s, int drain_ms, bool at_start)
{
    gbi_totals_t t = {0};
    if (s->engine->n_types)
        gbi_totals(s, 0, &t);
    const unsigned long long n = (unsigned long long)gbi_total_in_flight(s);
    if (at_start)
        GB_INFO("shutting down: new requests are answered STATUS_SHUTTING_DOWN; %llu in flight, %llu bytes of "
                "frames held, %llu bytes of messages between grains waiting; draining for up to %d ms",
                n, (unsigned long long)t.held_bytes, (unsigned long long)t.mail_bytes, drain_ms);
    else
        GB_WARN("shutdown: %llu request(s) in flight, %llu bytes of frames held and %llu bytes of messages "
                "between grains waiting after %d ms; terminating: they are answered with errors",
                n, (unsigned long long)t.held_bytes, (unsigned long long)t.mail_bytes, drain_ms);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Waiting for GPU replies: watches the rings' next stamps (one load each)
 * until one shows or until `until`, then the loop looks at the socket again.
 * A loop pass (socket read attempt, sched_yield: about a microsecond) would
 * otherwise sit between a GPU's reply and its sending. */
static void watch_rings(gb_server_t *s, uint64_t until)
{
    do {
        for (size_t i = 0; i < s->engine->n_types; i++) {
            gb_rk_t *rk = s->rings[i].t ? s->rings[i].t->rk : NULL;
            if (!rk || gb_rk_in_flight(rk) == 0)
                continue;
            int v = gb_rk_reply_visible(rk);
            if (v < 0)
                sched_yield(); /* staging: the loop's copies bring its replies */
            if (v != 0)
                return;
        }
        for (int k = 0; k < 16; k++)
            cpu_relax();
    } while (gb_now_ns() < until);
}

/* Health: sticky CUDA errors and dead kernels are noticed here; relaunch
 * grain types are moved on here too. */
void gbi_check_health(gb_server_t *s)
{
    for (size_t i = 0; i < s->engine->n_types; i++) {
        gbi_ring_t *r = &s->rings[i];
        if (!r->t || !r->t->rk || !gbi_owns(s, i))
            continue;
        gbi_ring_take(s, r);
        gb_rk_status_t before;
        gb_rk_status(r->t->rk, &before);
        if (before.heartbeat != r->hb_seen || !r->hb_seen_ns) {
            /* Atomic: another I/O thread's status request reads them. */
            __atomic_store_n(&r->hb_seen, before.heartbeat, __ATOMIC_RELAXED);
            __atomic_store_n(&r->hb_seen_ns, gb_now_ns(), __ATOMIC_RELAXED);
        }
        const gb_err perr = gb_rk_poll(r->t->rk);
        const gb_rk_state state = gb_rk_state_of(r->t->rk);
        /* A relaunch type may have failed in a call before this one (a feed
         * or a reply poll kicks its launches): its state tells. */
        const int failed_now = state == GB_RK_FAILED && !r->failed_seen;
        if ((perr != GB_OK && before.state == GB_RK_RUNNING) || failed_now) {
            gb_rk_status_t st;
            gb_rk_status(r->t->rk, &st);
            r->failed_seen = state == GB_RK_FAILED;
            char where[48] = "";
            if (s->engine->n_devs > 1)
                snprintf(where, sizeof where, " on device #%u (%d)", r->t->dev, s->engine->devs[r->t->dev].device);
            GB_ERROR("grain type '%s'%s stopped: %s%s%s; %llu request(s) in flight get an error reply", r->t->name,
                     where, gb_rk_state_name(st.state), st.last_error_name[0] ? ", " : "", st.last_error_name,
                     (unsigned long long)gb_rk_in_flight(r->t->rk));
        }
        if (state == GB_RK_FAILED && s->exit_on_gpu_failure && !s->gpu_failed) {
            /* A supervised worker: the CUDA context is likely poisoned
             * (sticky error); answer what we can and let the supervisor
             * start a fresh process. */
            GB_ERROR("GPU side failed: shutting this worker down for a restart");
            __atomic_store_n(&s->gpu_failed, 1, __ATOMIC_RELAXED); /* a shard's: read by its front */
        }
        gbi_publish_all(s); /* a shard holds one ring at a time here: polls may take a while */
    }
}

/* After the loop: whatever kernels will no longer answer gets an error
 * reply, frames that came meanwhile are refused, and replies kept for slow
 * clients get a last chance to go out. */
void gbi_finish(gb_server_t *s)
{
    gb_links_close_into(s->engine->links, SIZE_MAX);
    for (size_t i = 0; i < s->engine->n_types; i++) {
        gbi_ring_t *r = &s->rings[i];
        if (r->t && r->t->rk) {
            gb_rk_terminate(r->t->rk, 2000);
            drain_ring(s, r);
        }
    }
    gbi_route_fini(s, 1); /* what replies routed meanwhile, or was waiting, will not be delivered */
    for (int k = 0; k < 100000 && gbi_read_one(s); k++)
        ;
    gbi_flush(s);
    /* Replies kept for clients go out while the clients take them: until a
     * second passes with none taken, or ten in all. */
    for (uint64_t last = now_ms(), end = last + 10000; s->n_clients && now_ms() - last < 1000 && now_ms() < end;) {
        if (gbi_send_backlog(s)) {
            last = now_ms();
        } else {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (s->out_mem)
        GB_WARN("stopped with %zu bytes of replies unsent: their clients did not read them", s->out_mem);
    gbi_totals_t t;
    gbi_totals(s, 0, &t);
    GB_INFO("stopped: %llu frames, %llu requests, %llu replies (%llu errors); refused: %llu frame(s) too large, "
            "%llu request(s) BUSY (hold bounds), %llu frame(s) BUSY (replies left unread); %llu connection(s) "
            "closed with replies owed, %llu reply(ies) discarded for clients gone",
            (unsigned long long)t.frames_in, (unsigned long long)t.requests, (unsigned long long)t.replies,
            (unsigned long long)t.error_replies, (unsigned long long)t.frames_too_large,
            (unsigned long long)t.requests_busy, (unsigned long long)t.frames_refused_unread,
            (unsigned long long)t.conns_dropped, (unsigned long long)t.replies_undelivered);
    gb_fdguard_report(&s->fdg);
}

/* Watches the clients' connections (connwatch.h), except in a supervised
 * worker: its clients are the supervisor's connections, which watches its
 * own clients'. Without it the bridge serves on, and says so. */
static void gbi_watch_start(gb_server_t *s)
{
    if (s->tagged || s->cw.mon)
        return;
    if (gb_connwatch_start(&s->cw, s->zctx, s->sock, gbi_conn_closed, s) != 0)
        GB_WARN("cannot watch client connections (%s): a connection ZeroMQ closes is not reported",
                zmq_strerror(errno));
}

gb_err gb_server_run(gb_server_t *s, volatile sig_atomic_t *stop, int drain_ms)
{
    uint64_t last_health = now_ms(), drain_deadline = 0;
    uint64_t spin_until = 0; /* end of the current no-sleep polling spell */
    gbi_watch_start(s);
    if (s->cfg->io_threads > 1)
        return gbi_io_run(s, stop, drain_ms);
    GB_INFO("serving %zu endpoint(s); %zu grain type(s)", s->cfg->n_endpoints, s->engine->n_names);
    for (;;) {
        /* An atomic read: a program may stop the server from another thread
         * (the daemon's signal handler runs on this one). */
        if ((__atomic_load_n(stop, __ATOMIC_RELAXED) || s->gpu_failed) && !s->shutting_down) {
            /* Frames already read (held ones too) still go through, until
             * the drain deadline; frames read from now on are refused. */
            gbi_log_drain(s, drain_ms, true);
            s->shutting_down = 1;
            drain_deadline = now_ms() + (uint64_t)drain_ms;
        }
        int progress = gbi_pump(s);
        /* The socket is always read: bounds are kept by refusing (BUSY,
         * SHUTTING_DOWN), so that control messages and other clients flow. */
        for (int k = 0; k < 256 && gbi_read_one(s); k++)
            progress++;
        gbi_flush(s);
        gb_connwatch_poll(&s->cw);
        if (s->n_clients)
            progress += gbi_send_backlog(s);
        uint64_t now = now_ms();
        if (now - last_health >= 100) {
            gbi_check_health(s);
            gb_fdguard_check(&s->fdg, gb_now_ns());
            last_health = now;
            if (s->reload_flag && *s->reload_flag) {
                *s->reload_flag = 0;
                s->reload_fn(s->reload_ctx, s);
            }
            if (s->stats)
                gbi_stats_publish(s);
        }
        if (s->shutting_down) {
            if (gbi_total_in_flight(s) == 0 && s->held_bytes == 0 && s->mail_bytes == 0)
                break;
            if (now > drain_deadline) {
                gbi_log_drain(s, drain_ms, false);
                gbi_refuse_held(s);
                gbi_route_fini(s, 1);
                break;
            }
        }
        if (progress) {
            spin_until = 0;
            continue;
        }
        uint64_t in_flight = gbi_total_in_flight(s);
        /* Sleep until a frame or a reply arrives. Rings that can notify (cpu
         * workers) are armed and polled as file descriptors; rings that
         * cannot (a GPU writes no eventfd) are polled: spin briefly, then
         * wake every millisecond. */
        int must_poll = 0;
        for (size_t i = 0; i < s->engine->n_types && in_flight; i++) {
            gb_rk_t *rk = s->rings[i].t ? s->rings[i].t->rk : NULL;
            if (rk && gb_rk_in_flight(rk) > 0 && gb_rk_notify_fd(rk) < 0 && gb_rk_is_active(rk))
                must_poll = 1; /* a deactivated ring answers nothing until an Activate (a frame) */
        }
        /* Replies are due soon: poll without sleeping for a moment first. A
         * sleep-and-wake handoff costs tens of microseconds (more in a VM);
         * a long spin takes the core a cpu worker needs, so keep it short
         * when workers can notify us. */
        uint64_t now_ns = gb_now_ns();
        if (in_flight && !spin_until)
            spin_until = now_ns + (must_poll ? 2000000ull : 50000ull);
        if (in_flight && now_ns < spin_until) {
            if (must_poll)
                watch_rings(s, now_ns + GBI_WATCH_NS);
            else
                sched_yield();
            continue;
        }
        zmq_pollitem_t items[1 + GB_MAX_RINGS];
        gb_rk_t *armed[GB_MAX_RINGS];
        int n_items = 0, n_armed = 0, ready = 0;
        items[n_items++] = (zmq_pollitem_t){s->sock, 0, ZMQ_POLLIN, 0};
        for (size_t i = 0; i < s->engine->n_types && in_flight; i++) {
            gb_rk_t *rk = s->rings[i].t ? s->rings[i].t->rk : NULL;
            int fd = rk && gb_rk_in_flight(rk) > 0 ? gb_rk_notify_fd(rk) : -1;
            if (fd < 0)
                continue;
            gb_rk_arm(rk, 1);
            armed[n_armed++] = rk;
            items[n_items++] = (zmq_pollitem_t){NULL, fd, ZMQ_POLLIN, 0};
            ready |= gb_rk_peek(rk) != NULL; /* arrived before we armed */
        }
        if (!ready) {
            /* Unsent replies: ZeroMQ says nothing when a client's queue
             * has room again, so look every millisecond. */
            int timeout = must_poll || s->out_mem ? 1 : 100;
            if (n_items == 0) {
                struct timespec ts = {0, (long)timeout * 1000000L};
                nanosleep(&ts, NULL);
            } else if (zmq_poll(items, n_items, timeout) < 0 && errno != EINTR) {
                GB_ERROR("zmq_poll: %s", zmq_strerror(errno));
                return GB_ERR_IO;
            }
        }
        for (int i = 0; i < n_armed; i++)
            gb_rk_arm(armed[i], 0);
        if (must_poll)
            gbi_check_health(s); /* relaunch grain types move on here */
        spin_until = 0;
    }
    gbi_finish(s);
    return s->gpu_failed ? GB_ERR_CUDA : GB_OK;
}

void gb_server_exit_on_gpu_failure(gb_server_t *s, int on)
{
    s->exit_on_gpu_failure = on;
    s->tagged = on; /* only the supervisor's worker does: its frames come from the supervisor */
}

void gb_server_on_reload(gb_server_t *s, volatile sig_atomic_t *flag,
                         void (*fn)(void *ctx, gb_server_t *s), void *ctx)
{
    s->reload_flag = flag;
    s->reload_fn = fn;
    s->reload_ctx = ctx;
}


/* server_internal.h. */
void gbi_log_listening(void *sock, const char *who, const char *endpoint, bool curve)
{
    char bound[1024] = "";
    size_t len = sizeof bound - 1, n = strlen(endpoint);
    const bool other = zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, bound, &len) == 0 && bound[0] &&
                       strcmp(bound, endpoint) != 0;
    const char *port = other && n > 2 && strcmp(endpoint + n - 2, ":*") == 0 ? strrchr(bound, ':') : NULL;
    if (port) /* tcp://host:* as tcp://host:PORT (ZeroMQ's own form may be an IPv6-mapped address) */
        GB_INFO("%slistening on %.*s%s (port %s chosen for %s)%s", who, (int)(n - 2), endpoint, port, port + 1,
                endpoint, curve ? " (CURVE)" : "");
    else if (other && strncmp(endpoint, "ipc://", 6) == 0)
        GB_INFO("%slistening on %s (path chosen for %s)%s", who, bound, endpoint, curve ? " (CURVE)" : "");
    else
        GB_INFO("%slistening on %s%s", who, endpoint, curve ? " (CURVE)" : "");
}

/* Binds the config's endpoints; -1 with err on the first that fails (those
 * bound are closed, and their socket files removed, by gb_server_destroy). */
static int bind_endpoints(gb_server_t *s, char *err, size_t errlen)
{
    const gb_config_t *cfg = s->cfg;
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        if (gb_ipc_check_free(cfg->endpoints[i], err, errlen) != 0)
            return -1;
        if (zmq_bind(s->sock, cfg->endpoints[i]) != 0) {
            snprintf(err, errlen, "cannot bind %s: %s", cfg->endpoints[i], zmq_strerror(errno));
            return -1;
        }
        gb_ipc_files_note(&s->ipc_files, cfg->endpoints[i]);
        gbi_log_listening(s->sock, "", cfg->endpoints[i], cfg->curve.enabled);
    }
    return 0;
}

gb_err gb_server_new(const gb_config_t *cfg, gb_engine_t *engine, const gb_facts_t *facts,
                     const gb_selection_t *sel, gb_server_t **out, char *err, size_t errlen)
{
    *out = NULL;
    gb_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return GB_ERR_NOMEM;
    s->cfg = cfg;
    s->test_faults = gb_test_faults_enabled();
    const char *spin = gb_test_hook(GB_HOOK_TEST_SPIN);
    s->test_spin = spin && strcmp(spin, "1") == 0;
    s->engine = engine;
    s->facts = facts;
    s->sel = sel;
    int out_ok = gbi_outbox_init(&s->out) == 0 && (s->owed_hash = calloc(GBI_OUT_HASH, sizeof *s->owed_hash));
    /* Memory of frames held for full rings: in all, 64 frames of the
     * largest size, at least 64 MiB; per client an eighth of that, at least
     * 8 MiB (with its unsent replies). Past them requests get STATUS_BUSY. */
    s->held_limit = (size_t)cfg->max_message_size * 64 > (64u << 20) ? (size_t)cfg->max_message_size * 64
                                                                     : (64u << 20);
    s->client_limit = s->held_limit / 8 > GBI_CLIENT_MIN ? s->held_limit / 8 : GBI_CLIENT_MIN;
    s->out_limit = (size_t)cfg->reply_backlog_mb << 20;
    s->mail_limit = (size_t)cfg->mail_outbox_kb << 10;
    s->mail_hold_ns = (uint64_t)cfg->mail_hold_ms * 1000000ull;
    s->mail_max_hops = cfg->mail_max_hops;
    gb_err e = out_ok ? GB_OK : GB_ERR_NOMEM;
    for (size_t i = 0; i < engine->n_types && e == GB_OK; i++) {
        s->rings[i].t = &engine->types[i];
        if (engine->types[i].rk) {
            s->rings[i].pending = calloc(gb_rk_capacity(engine->types[i].rk), sizeof(gbi_pending_t));
            if (!s->rings[i].pending)
                e = GB_ERR_NOMEM;
        }
    }
    if (e != GB_OK) {
        snprintf(err, errlen, "out of memory");
        gb_server_destroy(&s);
        return e;
    }
    s->zctx = zmq_ctx_new();
    gbi_router_ids_seed();
    s->sock = s->zctx ? zmq_socket(s->zctx, ZMQ_ROUTER) : NULL;
    s->zq = gbi_zq_new();
    if (!s->sock || !s->zq) {
        snprintf(err, errlen, "cannot create the ZeroMQ socket: %s", s->zq ? zmq_strerror(errno) : "out of memory");
        gb_server_destroy(&s);
        return GB_ERR_IO;
    }
    /* Queues in frames per client, small: their bytes count against the
     * bounds (docs/protocol.md). A full send queue is reported (mandatory)
     * rather than dropping the reply: it waits in the client's backlog. */
    int linger = 1000, sndhwm = GBI_SNDHWM, rcvhwm = gbi_rcvhwm(cfg->max_message_size), mandatory = 1, ipv6 = 1;
    zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger);
    /* "[IPV6]:PORT" endpoints bind, and a wildcard host takes both families
     * (ZeroMQ falls back to IPv4 where the host has no IPv6). */
    zmq_setsockopt(s->sock, ZMQ_IPV6, &ipv6, sizeof ipv6);
    zmq_setsockopt(s->sock, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    zmq_setsockopt(s->sock, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt(s->sock, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    int64_t hard = gbi_frame_hard_cap(cfg->max_message_size);
    zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &hard, sizeof hard);
    if (cfg->curve.enabled && (e = gbi_curve_setup(s, err, errlen)) != GB_OK) {
        gb_server_destroy(&s);
        return e;
    }
    if (cfg->ipc_peer_pid > 0 && zmq_setsockopt(s->sock, ZMQ_IPC_FILTER_PID, &cfg->ipc_peer_pid,
                                                sizeof cfg->ipc_peer_pid) != 0) {
        snprintf(err, errlen, "cannot restrict the worker's socket to its supervisor: %s", zmq_strerror(errno));
        gb_server_destroy(&s);
        return GB_ERR_IO;
    }
    gb_fdguard_init(&s->fdg, "bridge"); /* before the binds: it guards every accept */
    if (bind_endpoints(s, err, errlen) != 0) {
        gb_server_destroy(&s);
        return GB_ERR_IO;
    }
    *out = s;
    return GB_OK;
}

void gb_server_destroy(gb_server_t **ps)
{
    if (!ps || !*ps)
        return;
    gb_server_t *s = *ps;
    gbi_io_destroy(s);
    gbi_route_fini(s, 0);
    for (size_t i = 0; i < GB_MAX_RINGS; i++) {
        while (s->rings[i].held_head) {
            gbi_held_t *h = s->rings[i].held_head;
            s->rings[i].held_head = h->next;
            gbi_held_free(h);
        }
    }
    gb_connwatch_stop(&s->cw);
    if (s->sock)
        zmq_close(s->sock);
    gbi_curve_stop(s);
    /* A signal (a second SIGTERM) interrupts the term while the socket
     * lingers; restarted, or the I/O threads would be left unjoined. */
    while (s->zctx && zmq_ctx_term(s->zctx) != 0 && errno == EINTR)
        ;
    gb_ipc_files_remove(&s->ipc_files); /* the listeners are closed once the context is */
    for (size_t i = 0; i < GB_MAX_RINGS; i++)
        free(s->rings[i].pending);
    gbi_clients_fini(s);
    gbi_outbox_fini(&s->out);
    free(s->owed_hash);
    gbi_frame_fini(&s->scratch);
    gbi_stats_free(s);
    gbi_zq_destroy(&s->zq);
    free(s);
    *ps = NULL;
}
