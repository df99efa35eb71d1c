/* Requests into rings: decoding envelopes into ring slots, and holding
 * frames, in order, per grain type while its ring is full. See server.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "codec.h"
#include "log.h"
#include "server_internal.h"
#include "server_metrics.h"

/* Puts one request into ring r; out of line when its record or its reply
 * (up to reply_max bytes) does not fit a slot (large_payload.h). */
static int enqueue(gb_server_t *s, gbi_ring_t *r, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr,
                   uint64_t key, uint16_t slot_type, const unsigned char *rec, uint32_t rec_len, uint32_t reply_max,
                   int one_way)
{
    gb_rk_t *rk = r->t->rk;
    /* No room, or older frames for this ring wait: queue behind them. */
    if (gb_rk_free_slots(rk) == 0 || (r->held_head && r->held_head != s->resuming)) {
        s->blocked = r;
        return NEEDS_ROOM;
    }
    uint64_t pos = gb_rk_next_pos(rk);
    const uint32_t cap = gb_rk_payload_cap(rk);
    if (rec_len > cap || reply_max > cap) {
        gb_err err = gb_rk_claim_large(rk, key, pos, slot_type, rec, rec_len, reply_max);
        if (err == GB_ERR_FULL) { /* the large area is full: wait for replies, as for a slot */
            s->blocked = r;
            return NEEDS_ROOM;
        }
        if (err != GB_OK) {
            char e[200];
            snprintf(e, sizeof e, "message of %u bytes (reply up to %u) cannot go to grain type '%s': %s "
                     "(largest: %u bytes, max_message_size)", rec_len, reply_max, r->t->name, gb_strerror(err),
                     gb_rk_large_max(rk));
            if (!(one_way && corr == 0))
                gbi_reply(s, id, id_len, delim, corr,
                          err == GB_ERR_TOO_LARGE ? GPUBRIDGE__STATUS__STATUS_TOO_LARGE
                                                  : GPUBRIDGE__STATUS__STATUS_GPU_ERROR, e, 0, NULL, 0);
            return HANDLED;
        }
    } else {
        gb_slot_hdr_t *slot = gb_rk_claim(rk);
        __atomic_store_n(&slot->key, key, __ATOMIC_RELEASE); /* as gb_rk_send: the lap-behind check reads it */
        slot->corr = pos;
        slot->type = slot_type;
        slot->len = rec_len;
        if (rec_len)
            memcpy(gb_slot_payload(slot), rec, rec_len);
    }
    gbi_pending_t *p = &r->pending[pos & (gb_rk_capacity(rk) - 1)];
    p->corr = corr;
    p->hops = 0;
    p->link = 0;
    p->id_len = id_len;
    p->delim = delim;
    p->one_way = (uint8_t)one_way;
    memcpy(p->id, id, id_len);
    s->unpublished |= 1u << (r - s->rings);
    GBI_ADD(s->requests, 1);
    if (s->stats)
        gbi_stats_request(s, r, pos);
    return HANDLED;
}

/* Publishes what enqueue claimed, once per frame rather than per request: a
 * GPU that polls the ring then sees a client's batch as one window (one PCIe
 * round for all of it) and a relaunch or staging ring copies and launches
 * once. Also called before a control operation, so that it acts on a ring
 * whose claimed requests are all published. */
static void publish_all(gb_server_t *s)
{
    while (s->unpublished) {
        int i = __builtin_ctz(s->unpublished);
        s->unpublished &= s->unpublished - 1;
        gb_rk_publish(s->rings[i].t->rk);
        if (s->front && !gbi_owns(s, (size_t)i))
            gbi_io_ring_bell(s, (size_t)i);
    }
    for (uint32_t m = s->locked & ~s->pinned; m; m &= m - 1) /* a shard lets go of its rings */
        pthread_mutex_unlock(&s->ring_locks[__builtin_ctz(m)]);
    s->locked &= s->pinned;
}

int gbi_ring_take(gb_server_t *s, gbi_ring_t *r)
{
    const uint32_t bit = 1u << (r - s->rings);
    if (!s->front || (s->locked & bit))
        return 1;
    pthread_mutex_t *m = &s->ring_locks[r - s->rings];
    if (s->pinned || s->draining) {
        if (pthread_mutex_trylock(m) != 0)
            return 0;
    } else if ((s->locked & ~(bit - 1)) == 0) {
        /* Past every ring it holds: waiting keeps the order in which rings
         * are waited for, so a frame whose keys span rings (devices, types)
         * keeps them all until it is published. */
        pthread_mutex_lock(m);
    } else if (pthread_mutex_trylock(m) != 0) {
        /* Before a ring it holds: it lets go of them all first, so that no
         * two shards wait on each other. */
        publish_all(s);
        pthread_mutex_lock(m);
    }
    s->locked |= bit;
    return 1;
}

void gbi_publish_all(gb_server_t *s) { publish_all(s); }

/* A control envelope: decoded with protobuf-c (rare, small), answered by
 * server_control.c, except DeactivateGrain, which goes through the grain
 * type's ring so that it keeps its place among the key's messages. */
static int handle_control(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const gbi_env_t *env)
{
    char err[256], name[100];
    if (!env->has_control) {
        gbi_reply(s, id, id_len, delim, env->corr, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD,
                  "control envelope without a control message", 0, NULL, 0);
        return HANDLED;
    }
    publish_all(s);
    Gpubridge__Control *ctl = gpubridge__control__unpack(NULL, env->control_len, env->control);
    if (!ctl) {
        gbi_reply(s, id, id_len, delim, env->corr, GPUBRIDGE__STATUS__STATUS_MALFORMED,
                  "Envelope.control is not a Control message", 0, NULL, 0);
        return HANDLED;
    }
    int ret = HANDLED;
    if (ctl->op_case != GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN) {
        gbi_control(s, id, id_len, delim, env->corr, ctl);
    } else {
        const Gpubridge__DeactivateGrain *d = ctl->deactivate_grain;
        gb_engine_type_t *t = d->grain_type ? gb_engine_find(s->engine, d->grain_type) : NULL;
        if (t)
            t = gb_engine_at(s->engine, t, d->key); /* the key's device */
        gbi_ring_t *r = t ? &s->rings[t - s->engine->types] : NULL; /* rings[i] serves types[i] */
        if (!d->grain_type || !d->grain_type[0]) {
            gbi_reply(s, id, id_len, delim, env->corr, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD,
                      "control operation without a grain_type", 0, NULL, 0);
        } else if (!r || !r->t->rk) {
            const char *n = d->grain_type ? d->grain_type : "";
            gbi_name_print(name, sizeof name, (const uint8_t *)n, strlen(n));
            snprintf(err, sizeof err, "unknown grain type '%s'", name);
            gbi_reply(s, id, id_len, delim, env->corr, GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, err, 0, NULL, 0);
        } else if (gbi_ring_take(s, r) && gb_rk_state_of(r->t->rk) == GB_RK_TERMINATED) {
            /* as a grain message: a stopped ring would answer it "before answering" */
            snprintf(err, sizeof err, "grain type '%s' is terminated", r->t->name);
            gbi_reply(s, id, id_len, delim, env->corr, GPUBRIDGE__STATUS__STATUS_TERMINATED, err, 0, NULL, 0);
        } else {
            ret = enqueue(s, r, id, id_len, delim, env->corr, d->key, GB_MSG_DEACTIVATE_KEY, NULL, 0, 0, 0);
        }
    }
    gpubridge__control__free_unpacked(ctl, NULL);
    if (ret == HANDLED)
        publish_all(s); /* the rings a control operation took */
    return ret;
}

/* Test hook (GPUBRIDGE_TEST_SPIN=1): the loop runs without reading, as a
 * worker spinning in a driver call would, so that the supervisor's heartbeat
 * must find it. Bounded, so that a test whose kill path is broken ends. */
static void test_spin(void)
{
    GB_WARN("test hook: the server loop spins for 60 s without reading");
    volatile uint64_t turns = 0;
    for (uint64_t end = gb_now_ns() + 60000000000ull; gb_now_ns() < end;)
        turns++;
}

static int handle_envelope(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, const gbi_env_t *env)
{
    char err[256], name[100];
    uint64_t corr = env->corr;
    int one_way = env->kind == GPUBRIDGE__KIND__KIND_ONE_WAY;
#define FAIL(st, ...)                                                        \
    do {                                                                     \
        snprintf(err, sizeof err, __VA_ARGS__);                              \
        if (!(one_way && corr == 0))                                         \
            gbi_reply(s, id, id_len, delim, corr, st, err, 0, NULL, 0);      \
        return HANDLED;                                                      \
    } while (0)

    if (s->refusing)
        FAIL(GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN, "the bridge is shutting down");
    if (env->kind == GPUBRIDGE__KIND__KIND_CONTROL)
        return handle_control(s, id, id_len, delim, env);
    if (env->kind != GPUBRIDGE__KIND__KIND_REQUEST && !one_way)
        FAIL(GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "envelope kind must be REQUEST, ONE_WAY or CONTROL");
    if (!env->has_grain || env->type_len == 0)
        FAIL(GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "envelope has no grain type");
    gb_engine_type_t *t = gb_engine_find_n(s->engine, env->type, env->type_len);
    if (!t || !t->rk)
        gbi_name_print(name, sizeof name, env->type, env->type_len);
    if (!t)
        FAIL(GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "unknown grain type '%s'", name);
    if (!t->rk)
        FAIL(GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "grain type '%s' is configured but %s", name,
             gbi_unserved_why(t));
    t = gb_engine_at(s->engine, t, env->key); /* the ring of the key's device */
    gbi_ring_t *r = &s->rings[t - s->engine->types]; /* rings[i] serves engine->types[i] */
    gbi_ring_take(s, r); /* a shard: every ring call below under the ring's lock */
    gb_rk_state state = gb_rk_state_of(t->rk);
    if (state == GB_RK_TERMINATED)
        FAIL(GPUBRIDGE__STATUS__STATUS_TERMINATED, "grain type '%s' is terminated", t->name);
    if (state == GB_RK_FAILED) {
        gb_rk_status_t st;
        gb_rk_status(t->rk, &st);
        FAIL(GPUBRIDGE__STATUS__STATUS_GPU_ERROR, "grain type '%s' failed: %s (%d)", t->name,
             st.last_error_name[0] ? st.last_error_name : "kernel stopped", st.last_error);
    }
    unsigned char rec[65536], *big = NULL;
    uint32_t rec_len = 0, cap = gb_rk_payload_cap(t->rk), large_max = gb_rk_large_max(t->rk);
    uint16_t slot_type = 0;
    int status;
    if (env->message_type > UINT32_MAX)
        FAIL(GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE,
             "%s has no message type %" PRIu64 " (message_type is a 32-bit field; a value past 32 bits is no type)",
             t->name, env->message_type);
    if (s->test_spin && env->message_type == GBI_MSG_TEST_SPIN)
        test_spin();
    if (s->test_faults && env->message_type == GB_MSG_TEST_FAULT) {
        /* Test hook (GPUBRIDGE_TEST_FAULTS=1): the kernel writes through a bad
         * pointer, a sticky CUDA error; supervision tests recover from it. */
        slot_type = GB_MSG_TEST_FAULT;
        status = GPUBRIDGE__STATUS__STATUS_OK;
    } else {
        status = gbi_codec_request_key(t->kind, env->key, env->message_type, env->payload, env->payload_len, rec, cap,
                                   &rec_len, &slot_type, err, sizeof err);
        if (status == GPUBRIDGE__STATUS__STATUS_TOO_LARGE && large_max > cap) {
            /* Larger than a slot: encoded again for the large area (its pages
             * are touched only as far as the record goes). */
            if (!(big = malloc(large_max)))
                FAIL(GPUBRIDGE__STATUS__STATUS_BUSY, "the bridge is out of memory; retry later");
            status = gbi_codec_request_key(t->kind, env->key, env->message_type, env->payload, env->payload_len, big, large_max,
                                       &rec_len, &slot_type, err, sizeof err);
        }
    }
    if (status != GPUBRIDGE__STATUS__STATUS_OK) {
        free(big);
        if (!(one_way && corr == 0))
            gbi_reply(s, id, id_len, delim, corr, status, err, 0, NULL, 0);
        return HANDLED;
    }
    const unsigned char *rp = big ? big : rec;
    int ret = enqueue(s, r, id, id_len, delim, corr, env->key, slot_type, rp, rec_len,
                      gb_grain_reply_max(t->kind, slot_type, rp, rec_len), one_way);
    free(big);
    return ret;
#undef FAIL
}

/* Appends h to ring r's FIFO of held frames. */
static void push_held(gbi_ring_t *r, gbi_held_t *h)
{
    if (r->held_tail)
        r->held_tail->next = h;
    else
        r->held_head = h;
    r->held_tail = h;
}

/* Refuses envelopes [from, n) of f with STATUS_BUSY (the frame cannot be
 * held: a bound, or out of memory). */
static void refuse_rest(gb_server_t *s, const gbi_frame_t *f, size_t from, const uint8_t *id, uint8_t id_len,
                        uint8_t delim, const char *why)
{
    for (size_t i = from; i < f->n; i++) {
        if (!(f->envs[i].kind == GPUBRIDGE__KIND__KIND_ONE_WAY && f->envs[i].corr == 0))
            gbi_reply(s, id, id_len, delim, f->envs[i].corr, GPUBRIDGE__STATUS__STATUS_BUSY, why, 0, NULL, 0);
        GBI_ADD(s->requests_busy, 1);
    }
}

/* Memory a hold of envelopes [from, n) of f takes (gbi_frame_hold's copy). */
static size_t hold_mem(const gbi_frame_t *f, size_t from)
{
    return sizeof(gbi_held_t) + sizeof(gbi_frame_t) + (f->n - from) * sizeof(gbi_env_t) + f->size + 32;
}

/* The rings envelopes [from, n) of f go through: requests and one-way
 * messages to a served type, and DeactivateGrain (which travels through its
 * type's ring). The other control operations act when read. */
static uint32_t frame_rings(gb_server_t *s, const gbi_frame_t *f, size_t from)
{
    uint32_t rings = 0;
    for (size_t i = from; i < f->n; i++) {
        const gbi_env_t *e = &f->envs[i];
        const gb_engine_type_t *t = NULL;
        if (e->kind == GPUBRIDGE__KIND__KIND_CONTROL) {
            Gpubridge__Control *ctl = e->has_control ? gpubridge__control__unpack(NULL, e->control_len, e->control)
                                                     : NULL;
            if (ctl && ctl->op_case == GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN && ctl->deactivate_grain->grain_type &&
                (t = gb_engine_find(s->engine, ctl->deactivate_grain->grain_type)))
                t = gb_engine_at(s->engine, t, ctl->deactivate_grain->key);
            gpubridge__control__free_unpacked(ctl, NULL);
        } else if (e->has_grain && (t = gb_engine_find_n(s->engine, e->type, e->type_len))) {
            t = gb_engine_at(s->engine, t, e->key);
        }
        if (t)
            rings |= 1u << (t - s->engine->types);
    }
    return rings;
}

static void count_holds(gbi_client_t *c, uint32_t rings, int d)
{
    for (size_t b = 0; b < GB_MAX_RINGS; b++)
        if (rings >> b & 1u)
            c->ring_holds[b] += (uint32_t)d;
}

/* Whether frame f (from envelope from) must wait behind client c's held
 * frames: it goes through a ring one of them has yet to reach. */
static int waits_behind(gb_server_t *s, const gbi_client_t *c, const gbi_frame_t *f, size_t from)
{
    const uint32_t rings = frame_rings(s, f, from);
    for (size_t b = 0; b < GB_MAX_RINGS; b++)
        if ((rings >> b & 1u) && c->ring_holds[b])
            return 1;
    return 0;
}

/* Copies envelopes [i, n) of a fresh frame to wait in s->blocked's FIFO (or,
 * behind set, after the client's older held frames), if the bounds let it:
 * the client's share, and all holds together. */
static int hold_fresh(gb_server_t *s, const gbi_frame_t *f, size_t i, const uint8_t *id, uint8_t id_len,
                      uint8_t delim, int behind)
{
    size_t mem = hold_mem(f, i);
    gbi_client_t *c = gbi_client_get(s, id, id_len, delim);
    if (c && c->held_mem + gbi_out_of(s, id, id_len, c->out_mem) + mem > s->client_limit) {
        refuse_rest(s, f, i, id, id_len, delim,
                    "the bridge holds as much as one client may have waiting (grain type paused or busy); "
                    "retry later");
        gbi_client_release(s, c);
        return HANDLED;
    }
    if (c && s->held_bytes + mem > s->held_limit) {
        refuse_rest(s, f, i, id, id_len, delim,
                    "the bridge holds as many waiting requests as it may (grain types paused or busy); retry later");
        gbi_client_release(s, c);
        return HANDLED;
    }
    gbi_held_t *nh = c ? calloc(1, sizeof *nh) : NULL;
    gbi_frame_t *copy = nh ? gbi_frame_hold(f, i) : NULL;
    if (!copy) {
        free(nh);
        GB_ERROR("out of memory holding a frame; its remaining requests are refused");
        refuse_rest(s, f, i, id, id_len, delim, "the bridge is out of memory; retry later");
        gbi_client_release(s, c);
        return HANDLED;
    }
    nh->frame = copy;
    nh->bytes = mem;
    nh->client = c;
    nh->next_env = 0;
    memcpy(nh->id, id, id_len);
    nh->id_len = id_len;
    nh->delim = delim;
    nh->admin = (uint8_t)s->peer_admin;
    nh->err_bytes = s->frame_err_bytes;
    nh->err_corr0 = s->frame_corr0;
    nh->rings = frame_rings(s, copy, 0);
    count_holds(c, nh->rings, 1);
    GBI_ADD(s->held_bytes, mem);
    c->held_mem += mem;
    if (!behind) {
        push_held(s->blocked, nh);
    } else {
        if (c->wait_tail)
            c->wait_tail->next = nh;
        else
            c->wait_head = nh;
        c->wait_tail = nh;
    }
    return NEEDS_ROOM;
}

/* The client's held frames and unsent replies are past its bound: it does
 * not read, and each request fed could add a reply of up to large_max. */
static int client_over(gb_server_t *s, const uint8_t *id, uint8_t id_len)
{
    if (s->refusing)
        return 0;
    /* Past reply_backlog_mb, all clients together: one with replies kept
     * for it gets no more requests fed (a small request can ask for a large
     * reply). */
    if (s->front) { /* a shard: the front keeps the client's replies */
        gbi_client_t *c = gbi_client_find(s, id, id_len);
        return (c ? c->held_mem : 0) + gbi_out_of(s, id, id_len, 0) > s->client_limit ||
               (gbi_out_total_over(s) && gbi_has_kept(s, id, id_len, 0));
    }
    if (!s->out_mem) /* no client has unsent replies: held_mem alone stays within */
        return 0;
    gbi_client_t *c = gbi_client_find(s, id, id_len);
    return c && (c->held_mem + c->out_mem > s->client_limit || (c->out_mem && gbi_out_total_over(s)));
}

int gbi_feed_frame(gb_server_t *s, const gbi_frame_t *f, size_t from, const uint8_t *id, uint8_t id_len,
                   uint8_t delim, size_t bytes, gbi_held_t *h)
{
    (void)bytes;
    s->resuming = h;
    if (h)
        s->peer_admin = h->admin;
    s->feeding = 1;
    s->frame_err_bytes = h ? h->err_bytes : 0;
    s->frame_corr0 = h ? h->err_corr0 : 0;
    int ret = HANDLED;
    gbi_client_t *older = h || s->refusing ? NULL : gbi_client_find(s, id, id_len);
    if (older && older->held_mem && waits_behind(s, older, f, from)) {
        /* an older frame of its client is held at a ring this one goes through: it waits behind */
        ret = hold_fresh(s, f, from, id, id_len, delim, 1);
        s->resuming = NULL;
        s->feeding = 0;
        return ret;
    }
    for (size_t i = from; i < f->n; i++) {
        if (client_over(s, id, id_len)) {
            refuse_rest(s, f, i, id, id_len, delim,
                        "the client's unread replies are past the bridge's bound; read replies, then resend");
            break;
        }
        if (handle_envelope(s, id, id_len, delim, &f->envs[i]) != NEEDS_ROOM)
            continue;
        publish_all(s);
        s->resuming = NULL;
        if (h) {
            h->next_env = i;
            h->err_bytes = s->frame_err_bytes;
            h->err_corr0 = s->frame_corr0;
            s->feeding = 0;
            return NEEDS_ROOM;
        }
        /* A fresh frame's envelopes point into bytes that are about to go:
         * the rest of the frame is copied to wait. */
        ret = hold_fresh(s, f, i, id, id_len, delim, 0);
        break;
    }
    publish_all(s);
    s->resuming = NULL;
    s->feeding = 0;
    return ret;
}

static gbi_held_t *pop_held(gbi_ring_t *r)
{
    gbi_held_t *h = r->held_head;
    r->held_head = h->next;
    if (!r->held_head)
        r->held_tail = NULL;
    h->next = NULL;
    return h;
}

void gbi_held_free(gbi_held_t *h)
{
    free(h->frame);
    free(h);
}

/* A held frame fully handled: out of the bounds, and freed. Its client's
 * frames that waited behind it go on, in order, until one needs room. */
static void unhold(gb_server_t *s, gbi_held_t *h)
{
    gbi_client_t *c = h->client;
    GBI_ADD(s->held_bytes, -h->bytes);
    c->held_mem -= h->bytes;
    count_holds(c, h->rings, -1);
    gbi_held_free(h);
    while (c->wait_head) {
        gbi_held_t *w = c->wait_head;
        c->wait_head = w->next;
        if (!c->wait_head)
            c->wait_tail = NULL;
        w->next = NULL;
        if (gbi_feed_frame(s, w->frame, w->next_env, w->id, w->id_len, w->delim, w->bytes, w) == NEEDS_ROOM) {
            push_held(s->blocked, w);
            break;
        }
        GBI_ADD(s->held_bytes, -w->bytes);
        c->held_mem -= w->bytes;
        count_holds(c, w->rings, -1);
        gbi_held_free(w);
    }
    gbi_client_release(s, c);
}

/* Feeds the frames waiting on ring r, in order, while it has room. */
int gbi_resume_held(gb_server_t *s, gbi_ring_t *r)
{
    int progress = 0;
    gbi_held_t *h;
    while ((h = r->held_head) && gbi_ring_take(s, r) && gb_rk_free_slots(r->t->rk) > 0) {
        size_t before = h->next_env;
        if (gbi_feed_frame(s, h->frame, h->next_env, h->id, h->id_len, h->delim, h->bytes, h) == HANDLED) {
            pop_held(r);
            unhold(s, h);
            progress++;
            continue;
        }
        progress += h->next_env != before;
        if (s->blocked == r)
            break; /* full again: it stays at the head */
        /* Now it waits on another ring: move it to the tail of that FIFO. */
        pop_held(r);
        push_held(s->blocked, h);
        progress++;
    }
    publish_all(s);
    return progress;
}

/* Answers the envelopes of held frames that will not be fed (shutdown). */
void gbi_refuse_held(gb_server_t *s)
{
    s->refusing = 1; /* handle_envelope now answers SHUTTING_DOWN */
    for (size_t i = 0; i < GB_MAX_RINGS; i++) {
        gbi_ring_t *r = &s->rings[i];
        while (r->held_head) {
            gbi_held_t *h = r->held_head;
            r->held_head = h->next;
            gbi_feed_frame(s, h->frame, h->next_env, h->id, h->id_len, h->delim, h->bytes, NULL);
            unhold(s, h);
        }
        r->held_tail = NULL;
    }
}
