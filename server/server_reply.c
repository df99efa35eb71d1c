/* Replies out: each reply is encoded as it is queued, straight into the
 * outbox of its client, and the outbox goes out as one ServerFrame.
 *
 * gpubridge.proto makes this cheap: ReplyBatch is `repeated Reply replies =
 * 1` and ServerFrame is `oneof { Reply reply = 1; ReplyBatch batch = 2; }`,
 * so the record `0x0a len Reply` is a ReplyBatch entry and, on its own, a
 * complete ServerFrame{reply}. Several records become ServerFrame{batch} by
 * a `0x12 len` prefix, written into room kept in front of them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "pb_reply.h"
#include "server_internal.h"
#include "zq_bytes.h"
#include "server_metrics.h"

/* ServerFrame.reply and ReplyBatch.replies (both field 1), ServerFrame.batch. */
#define TAG_REPLY ((GB_PB_FRAME_REPLY << 3) | GB_PB_LEN)
#define TAG_BATCH ((GB_PB_FRAME_BATCH << 3) | GB_PB_LEN)

const char *gbi_status_name(int status)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&gpubridge__status__descriptor, status);
    return v ? v->name : "STATUS_?";
}

int gbi_outbox_init(gbi_outbox_t *o)
{
    memset(o, 0, sizeof *o);
    o->buf = malloc(GBI_FRAME_PREFIX + GBI_ARENA_SIZE);
    return o->buf ? 0 : -1;
}

void gbi_outbox_fini(gbi_outbox_t *o)
{
    free(o->buf);
    memset(o, 0, sizeof *o);
}

/* ---- per-client records ---------------------------------------------- */

static size_t bucket_of(const uint8_t *id, uint8_t id_len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < id_len; i++)
        h = (h ^ id[i]) * 16777619u;
    return h % GBI_CLIENT_BUCKETS;
}

gbi_client_t *gbi_client_find(gb_server_t *s, const uint8_t *id, uint8_t id_len)
{
    if (!s->n_clients)
        return NULL;
    for (gbi_client_t *c = s->buckets[bucket_of(id, id_len)]; c; c = c->hnext)
        if (c->id_len == id_len && memcmp(c->id, id, id_len) == 0)
            return c;
    return NULL;
}

gbi_client_t *gbi_client_get(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim)
{
    gbi_client_t *c = gbi_client_find(s, id, id_len);
    if (c)
        return c;
    if (!(c = calloc(1, sizeof *c)))
        return NULL;
    memcpy(c->id, id, id_len);
    c->id_len = id_len;
    c->delim = delim;
    size_t b = bucket_of(id, id_len);
    c->hnext = s->buckets[b];
    s->buckets[b] = c;
    c->next = s->clients;
    if (s->clients)
        s->clients->prev = c;
    s->clients = c;
    s->n_clients++;
    return c;
}

static void client_free(gb_server_t *s, gbi_client_t *c)
{
    gbi_client_t **pp = &s->buckets[bucket_of(c->id, c->id_len)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    for (gbi_outq_t *q = c->out_head, *n; q; q = n) {
        n = q->next;
        free(q);
    }
    for (gbi_held_t *w = c->wait_head, *n; w; w = n) { /* frames that waited behind a held one (shutdown) */
        n = w->next;
        gbi_held_free(w);
    }
    GBI_ADD(s->out_mem, -c->out_mem);
    gbi_out_note(s, c->id, c->id_len, -(int64_t)c->out_mem);
    gbi_kept_note(s, c->id, c->id_len, -(int64_t)c->out_mem);
    s->n_clients--;
    free(c);
}

void gbi_client_release(gb_server_t *s, gbi_client_t *c)
{
    if (c && !c->held_mem && !c->wait_head && !c->out_head && !c->refused_owed && !c->n_runs)
        client_free(s, c);
}

void gbi_clients_fini(gb_server_t *s)
{
    while (s->clients)
        client_free(s, s->clients);
}

/* ---- sending ------------------------------------------------------------ */

size_t gbi_reply_count(const uint8_t *frame, size_t len)
{
    gb_pb_reply_iter_t it;
    gb_pb_reply_view_t v;
    size_t n = 0;
    if (gb_pb_reply_frame_open(&it, frame, len) != 0)
        return 0;
    while (gb_pb_reply_frame_next(&it, &v))
        n++;
    return n;
}

/* A client connection closed (connwatch.h). Replies still owed to its
 * client (requests read and not yet answered, by its routing id's bucket,
 * and reply frames kept for it) will find it gone and be discarded
 * (send_frame): the close is logged, at most once a second, and counted. */
void gbi_conn_closed(void *ctx, const uint8_t *id, size_t id_len)
{
    gb_server_t *s = ctx;
    const uint8_t n = (uint8_t)id_len;
    int64_t pending = s->owed_hash ? __atomic_load_n(&s->owed_hash[gbi_id_hash(id, n) % GBI_OUT_HASH],
                                                     __ATOMIC_RELAXED)
                                   : 0;
    uint64_t kept = 0;
    const gbi_client_t *c = gbi_client_find(s, id, n);
    for (const gbi_outq_t *q = c ? c->out_head : NULL; q; q = q->next)
        kept += gbi_reply_count(q->data, q->len);
    if (c)
        kept += c->refused_owed;
    if (s->out.n && s->out.id_len == n && memcmp(s->out.id, id, n) == 0)
        kept += s->out.n;
    if (pending < 0)
        pending = 0;
    if (!pending && !kept)
        return; /* nothing owed: a client that left when done */
    GBI_ADD(s->conns_dropped, 1);
    gb_connwatch_log_closed("", id, id_len, (uint64_t)pending, kept, (long long)gbi_frame_hard_cap(s->cfg->max_message_size),
                            &s->dropped_logged_ns, &s->dropped_unlogged);
}

/* One ServerFrame to a client. 0: sent, or dropped because the client is
 * gone (ROUTER_MANDATORY says EHOSTUNREACH); -1: its queue is full. */
static int send_frame(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *frame,
                      size_t len)
{
    if (s->front) {
        /* A shard: to its front, which sends it or keeps it for the client.
         * The pair has no high-water mark: this never blocks. */
        gbi_out_note(s, id, id_len, (int64_t)len); /* the front takes it off when it has it */
        zmq_send(s->sock, id, id_len, ZMQ_SNDMORE);
        zmq_send(s->sock, &delim, 1, ZMQ_SNDMORE);
        zmq_send(s->sock, frame, len, 0);
        return 0;
    }
    const int r = gbi_zq_send(s->zq, s->sock, id, id_len, delim, frame, len);
    if (r == 1 && !s->tagged)
        /* Its connection is gone: the replies are discarded, and counted
         * (a supervised worker's peer is the supervisor, which counts the
         * clients' own and sends its counts over). */
        GBI_ADD(s->replies_undelivered, gbi_reply_count(frame, len));
    return r < 0 ? -1 : 0;
}

/* Keeps a frame the client's queue would not take, after its earlier ones. */
static void backlog_push(gb_server_t *s, gbi_client_t *c, const uint8_t *frame, size_t len)
{
    gbi_outq_t *q = malloc(sizeof *q + len);
    if (!q) {
        GB_ERROR("out of memory keeping replies for a slow client; %zu bytes of replies lost", len);
        return;
    }
    q->next = NULL;
    q->len = len;
    memcpy(q->data, frame, len);
    if (c->out_tail)
        c->out_tail->next = q;
    else
        c->out_head = q;
    c->out_tail = q;
    c->out_mem += sizeof *q + len;
    GBI_ADD(s->out_mem, sizeof *q + len);
    gbi_out_note(s, c->id, c->id_len, (int64_t)(sizeof *q + len));
    gbi_kept_note(s, c->id, c->id_len, (int64_t)(sizeof *q + len));
    if (!s->out_over_logged && gbi_out_total_over(s)) {
        GB_WARN("%zu bytes of replies wait for clients that do not read them, past reply_backlog_mb (%zu MiB): "
                "frames of clients with replies waiting are refused STATUS_BUSY until they read",
                s->out_mem, s->out_limit >> 20);
        s->out_over_logged = 1;
    }
}

/* Sends what c has waiting, in order, while ZeroMQ takes it. 1: all of it. */
static int client_drain(gb_server_t *s, gbi_client_t *c, int *sent)
{
    gbi_outq_t *q;
    while ((q = c->out_head)) {
        if (send_frame(s, c->id, c->id_len, c->delim, q->data, q->len) != 0)
            return 0;
        c->out_head = q->next;
        if (!c->out_head)
            c->out_tail = NULL;
        c->out_mem -= sizeof *q + q->len;
        GBI_ADD(s->out_mem, -(sizeof *q + q->len));
        gbi_out_note(s, c->id, c->id_len, -(int64_t)(sizeof *q + q->len));
        gbi_kept_note(s, c->id, c->id_len, -(int64_t)(sizeof *q + q->len));
        free(q);
        if (s->out_mem <= s->out_limit / 2)
            s->out_over_logged = 0; /* well below again: the next time it passes is said again */
        (*sent)++;
    }
    return 1;
}

/* The supervisor's worker: notes for c's runs of refused tags, in order,
 * while its queue takes them. */
static void send_runs(gb_server_t *s, gbi_client_t *c, int *sent)
{
    uint8_t note[GBI_NOTE_LEN], i = 0;
    for (; i < c->n_runs; i++) {
        gbi_note_make(note, GBI_NOTE_REFUSED, c->run_first[i], c->run_last[i]);
        if (send_frame(s, c->id, c->id_len, 0, note, sizeof note) != 0)
            break;
        (*sent)++;
    }
    memmove(c->run_first, c->run_first + i, (c->n_runs - i) * sizeof c->run_first[0]);
    memmove(c->run_last, c->run_last + i, (c->n_runs - i) * sizeof c->run_last[0]);
    c->n_runs -= i;
}

int gbi_send_backlog(gb_server_t *s)
{
    int sent = 0;
    for (gbi_client_t *c = s->clients, *next; c; c = next) {
        next = c->next;
        if (!c->out_head && !c->refused_owed && !c->n_runs)
            continue;
        gbi_flush(s); /* the outbox may hold c's replies: they go first */
        while (client_drain(s, c, &sent) && c->refused_owed) {
            /* It reads again: the refusals it is owed, a batch at a time. */
            uint64_t k = c->refused_owed < GBI_BATCH_MAX ? c->refused_owed : GBI_BATCH_MAX;
            c->refused_owed -= k;
            /* During the drain every refusal says so (docs/protocol.md "Shutdown"). */
            for (uint64_t i = 0; i < k; i++)
                gbi_reply(s, c->id, c->id_len, c->delim, 0,
                          s->shutting_down ? GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN : GPUBRIDGE__STATUS__STATUS_BUSY,
                          s->shutting_down ? "the bridge is shutting down; the frame was not processed"
                                           : "frame refused: its client had left its replies unread past the "
                                             "bridge's bound; read replies, then resend",
                          0, NULL, 0);
            gbi_flush(s);
        }
        if (!c->out_head && !c->refused_owed && c->n_runs)
            send_runs(s, c, &sent);
        next = c->next;
        gbi_client_release(s, c);
    }
    return sent;
}

/* Sends a frame of n replies to a client, or keeps it after the client's
 * earlier frames when its queue is full (it reads slowly, or not at all),
 * counted against its bound; a client that is gone gets nothing
 * (ROUTER_MANDATORY: EHOSTUNREACH). */
void gbi_deliver(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const uint8_t *frame,
                 size_t len, size_t n)
{
    gbi_client_t *c = gbi_client_find(s, id, id_len);
    if ((c && c->out_head) || send_frame(s, id, id_len, delim, frame, len) != 0) {
        if (!c)
            c = gbi_client_get(s, id, id_len, delim);
        if (c)
            backlog_push(s, c, frame, len);
        else
            GB_ERROR("out of memory keeping replies for a slow client; %zu reply(ies) lost", n);
    }
}

void gbi_flush(gb_server_t *s)
{
    gbi_outbox_t *o = &s->out;
    if (o->n == 0)
        return;
    uint8_t *frame = o->buf + GBI_FRAME_PREFIX;
    size_t len = o->len;
    if (o->n > 1) {
        uint8_t hdr[GBI_FRAME_PREFIX];
        hdr[0] = TAG_BATCH;
        size_t h = 1 + gb_pb_varint_put(hdr + 1, len);
        frame -= h;
        memcpy(frame, hdr, h);
        len += h;
    }
    gbi_deliver(s, o->id, o->id_len, o->delim, frame, len, o->n);
    if (!(s->tagged && gbi_sup_own_id(o->id, o->id_len))) /* the heartbeat's reply is no client's */
        GBI_ADD(s->replies, o->n);
    o->n = 0;
    o->len = 0;
}

/* Bytes of a Reply's fields (proto3: defaults are not written). */
static size_t reply_len(uint64_t corr, int status, size_t elen, uint32_t mt, size_t len)
{
    size_t n = 0;
    if (corr)
        n += 1 + gb_pb_varint_len(corr);
    if (status)
        n += 1 + gb_pb_varint_len((uint64_t)status);
    if (elen)
        n += 1 + gb_pb_varint_len(elen) + elen;
    if (mt)
        n += 1 + gb_pb_varint_len(mt);
    if (len)
        n += 1 + gb_pb_varint_len(len) + len;
    return n;
}

/* Writes the ServerFrame{reply} record of a Reply of `body` bytes at p. */
static void put_reply(uint8_t *p, size_t body, uint64_t corr, int status, const char *error, size_t elen,
                      uint32_t message_type, const uint8_t *payload, size_t len)
{
    *p++ = TAG_REPLY;
    p += gb_pb_varint_put(p, body);
    if (corr) {
        p += gb_pb_key_put(p, GB_PB_REPLY_CORR, GB_PB_VARINT);
        p += gb_pb_varint_put(p, corr);
    }
    if (status) {
        p += gb_pb_key_put(p, GB_PB_REPLY_STATUS, GB_PB_VARINT);
        p += gb_pb_varint_put(p, (uint64_t)status);
    }
    if (elen) {
        p += gb_pb_key_put(p, GB_PB_REPLY_ERROR, GB_PB_LEN);
        p += gb_pb_varint_put(p, elen);
        memcpy(p, error, elen);
        p += elen;
    }
    if (message_type) {
        p += gb_pb_key_put(p, GB_PB_REPLY_MESSAGE_TYPE, GB_PB_VARINT);
        p += gb_pb_varint_put(p, message_type);
    }
    if (len) {
        p += gb_pb_key_put(p, GB_PB_REPLY_PAYLOAD, GB_PB_LEN);
        p += gb_pb_varint_put(p, len);
        memcpy(p, payload, len);
    }
}

/* A reply larger than the outbox (a large message's, large_payload.h): a
 * frame of its own, after the replies queued before it, kept like any other
 * frame when the client's queue is full. */
static void send_alone(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr, int status,
                       const char *error, size_t elen, uint32_t message_type, const uint8_t *payload, size_t len)
{
    gbi_flush(s);
    size_t body = reply_len(corr, status, elen, message_type, len);
    size_t rec = 1 + gb_pb_varint_len(body) + body;
    uint8_t *buf = malloc(rec);
    if (!buf) {
        if (corr)
            gbi_owed_note(s, id, id_len, 1); /* gbi_reply counted this reply off already */
        gbi_reply(s, id, id_len, delim, corr, GPUBRIDGE__STATUS__STATUS_BUSY,
                  "the bridge is out of memory for this reply; retry later", 0, NULL, 0);
        return;
    }
    put_reply(buf, body, corr, status, error, elen, message_type, payload, len);
    gbi_deliver(s, id, id_len, delim, buf, rec, 1);
    free(buf);
    if (!(s->tagged && gbi_sup_own_id(id, id_len))) { /* the heartbeat's reply is no client's */
        GBI_ADD(s->replies, 1);
        gbi_count_replies(s, status, 1);
    }
}

void gbi_reply(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr, int status,
               const char *error, uint32_t message_type, const uint8_t *payload, size_t len)
{
    gbi_outbox_t *o = &s->out;
    size_t elen = error ? strlen(error) : 0;
    if (corr)
        gbi_owed_note(s, id, id_len, -1);
    if (s->feeding && status != GPUBRIDGE__STATUS__STATUS_OK) {
        /* One frame's error replies stay bounded: past the budget they lose
         * their texts, and those without a correlation id (which a client
         * cannot tell apart) are folded into the frame's first one. */
        if (corr == 0 && s->frame_corr0++) {
            s->errors_folded++;
            return;
        }
        if (s->frame_err_bytes > GBI_FRAME_ERR_BUDGET)
            elen = 0;
        s->frame_err_bytes += elen + 24;
    }
    if (len + elen + 64 > GBI_ARENA_SIZE) {
        send_alone(s, id, id_len, delim, corr, status, error, elen, message_type, payload, len);
        return;
    }
    size_t body = reply_len(corr, status, elen, message_type, len);
    size_t rec = 1 + gb_pb_varint_len(body) + body;
    if (o->n && (o->id_len != id_len || memcmp(o->id, id, id_len) != 0 || o->delim != delim ||
                 o->n == GBI_BATCH_MAX || o->len + rec > GBI_FLUSH_AT))
        gbi_flush(s);
    if (o->n == 0) {
        memcpy(o->id, id, id_len);
        o->id_len = id_len;
        o->delim = delim;
    }
    put_reply(o->buf + GBI_FRAME_PREFIX + o->len, body, corr, status, error, elen, message_type, payload, len);
    o->len += rec;
    o->n++;
    if (!(s->tagged && gbi_sup_own_id(id, id_len))) /* the heartbeat's reply is no client's */
        gbi_count_replies(s, status, 1);
}

void gbi_count_replies(gb_server_t *s, int status, uint64_t n)
{
    if (status != GPUBRIDGE__STATUS__STATUS_OK)
        GBI_ADD(s->error_replies, n);
    if (s->stats)
        gbi_stats_reply(s, status, n);
}
