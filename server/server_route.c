/* Messages between grains, routed by the host (docs/design.md, "Messages
 * between grains"). A handler's gb_grain_send / gb_grain_forward leave with
 * its reply (mail.h); here, as the reply ring is drained, each message goes
 * into its target type's request ring like a client's request, with a
 * pending entry that says who gets the target's reply: the original caller
 * for a forward, nobody for a one-way send.
 *
 * Rules:
 * - The server loop and the kernels never wait for a target's room: a
 *   message whose target ring is full (or has older messages waiting) waits
 *   in the outbox, a FIFO per target type, fed before client frames as
 *   replies make room. Messages from one sender type to one target type
 *   thus keep their order.
 * - A message is undeliverable when its target type is not served, has
 *   stopped (terminated or failed), when the outbox is at its bound
 *   (messaging.outbox_kb), when it waited past messaging.hold_ms (a target
 *   paused or stuck), or when its request was passed on more than
 *   messaging.max_hops times (a cycle of forwards). A forward's caller then gets
 *   STATUS_UNDELIVERABLE with a sentence; a send is counted. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "codec.h"
#include "grain_registry.h"
#include "links.h"
#include "log.h"
#include "gpubridge/mail.h"
#include "server_internal.h"
#include "server_metrics.h"

/* Counts an undeliverable message of sender ring `from` and tells a
 * forward's caller why. */
static void undeliverable(gb_server_t *s, gbi_ring_t *from, const gbi_pending_t *o, int forward, const char *why)
{
    GBI_ADD(from->mail_undeliverable, 1);
    if (o->link) /* given up: its pair's order waits for it no longer */
        gb_links_delivered(s->engine->links, o->link - 1);
    GB_DEBUG("%s from grain type '%s' undeliverable: %s", forward ? "forward" : "send", from->t->name, why);
    if (forward && !(o->one_way && o->corr == 0)) {
        char e[400];
        snprintf(e, sizeof e, "a message from grain type '%s' could not be delivered: %s", from->t->name, why);
        gbi_reply(s, o->id, o->id_len, o->delim, o->corr, GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE, e, 0, NULL, 0);
    }
}

/* Why ring `to` can take no message now and never will, or NULL. */
static const char *stopped(const gbi_ring_t *to, char *buf, size_t cap)
{
    gb_rk_state st = gb_rk_state_of(to->t->rk);
    if (st != GB_RK_TERMINATED && st != GB_RK_FAILED)
        return NULL;
    snprintf(buf, cap, "grain type '%s' is %s", to->t->name, st == GB_RK_FAILED ? "failed" : "terminated");
    return buf;
}

/* Puts a message into ring `to` now: HANDLED (in the ring, or answered
 * undeliverable) or NEEDS_ROOM. */
static int put(gb_server_t *s, gbi_ring_t *to, gbi_ring_t *from, const gbi_pending_t *o, int forward, uint64_t key,
               uint16_t type, const unsigned char *rec, uint32_t len)
{
    gb_rk_t *rk = to->t->rk;
    char why[200];
    if (!gbi_ring_take(s, to)) /* a shard draining another ring: its lock is busy */
        return NEEDS_ROOM;
    if (stopped(to, why, sizeof why)) {
        undeliverable(s, from, o, forward, why);
        return HANDLED;
    }
    /* A deactivated target takes no message into its ring: it waits in the
     * outbox, where messaging.hold_ms bounds its wait. */
    if (gb_rk_free_slots(rk) == 0 || !gb_rk_is_active(rk))
        return NEEDS_ROOM;
    const uint64_t pos = gb_rk_next_pos(rk);
    const uint32_t cap = gb_rk_payload_cap(rk), reply_max = gb_grain_reply_max(to->t->kind, type, rec, len);
    if (len > cap || reply_max > cap) {
        gb_err err = gb_rk_claim_large(rk, key, pos, type, rec, len, reply_max);
        if (err == GB_ERR_FULL)
            return NEEDS_ROOM;
        if (err != GB_OK) {
            snprintf(why, sizeof why, "a record of %u bytes (reply up to %u) cannot go to grain type '%s': %s",
                     len, reply_max, to->t->name, gb_strerror(err));
            undeliverable(s, from, o, forward, why);
            return HANDLED;
        }
    } else {
        gb_slot_hdr_t *slot = gb_rk_claim(rk);
        __atomic_store_n(&slot->key, key, __ATOMIC_RELEASE); /* as gb_rk_send: the lap-behind check reads it */
        slot->corr = pos;
        slot->type = type;
        slot->len = len;
        if (len)
            memcpy(gb_slot_payload(slot), rec, len);
    }
    gbi_pending_t *p = &to->pending[pos & (gb_rk_capacity(rk) - 1)];
    p->corr = o->corr;
    p->hops = o->hops;
    p->link = o->link;
    p->id_len = o->id_len;
    p->delim = o->delim;
    p->one_way = o->one_way;
    memcpy(p->id, o->id, o->id_len);
    s->unpublished |= 1u << (to - s->rings);
    if (s->stats)
        gbi_stats_request(s, to, pos);
    return HANDLED;
}

/* Keeps a message for ring `to` in the outbox, within its bound. */
static void hold(gb_server_t *s, gbi_ring_t *to, gbi_ring_t *from, const gbi_pending_t *o, int forward, uint64_t key,
                 uint16_t type, const unsigned char *rec, uint32_t len)
{
    const size_t bytes = sizeof(gbi_mail_t) + len;
    char why[200];
    if (s->mail_bytes + bytes > s->mail_limit) {
        snprintf(why, sizeof why, "grain type '%s' has no room and the outbox is at its bound "
                 "(messaging.outbox_kb = %zu)", to->t->name, s->mail_limit >> 10);
        undeliverable(s, from, o, forward, why);
        return;
    }
    gbi_mail_t *m = malloc(bytes);
    if (!m) {
        undeliverable(s, from, o, forward, "the bridge is out of memory");
        return;
    }
    m->next = NULL;
    memcpy(&m->origin, o, offsetof(gbi_pending_t, id) + o->id_len);
    m->key = key;
    m->since_ns = gb_now_ns();
    m->bytes = bytes;
    m->len = len;
    m->type = type;
    m->from = (uint8_t)(from - s->rings);
    m->forward = (uint8_t)forward;
    if (len)
        memcpy(m->rec, rec, len);
    if (to->mail_tail)
        to->mail_tail->next = m;
    else
        to->mail_head = m;
    to->mail_tail = m;
    GBI_ADD(to->mail_held, 1);
    GBI_ADD(s->mail_bytes, bytes);
}

/* Routes one message of sender ring r, made while handling request p after
 * it passed `hops` grains by device links. */
static void route_one(gb_server_t *s, gbi_ring_t *r, const gbi_pending_t *p, uint32_t hops, const gb_mail_msg_t *m)
{
    const unsigned char *rec = (const unsigned char *)(m + 1);
    const int forward = (m->flags & GB_MAIL_FORWARD) != 0;
    gbi_pending_t o;
    char why[200];
    memcpy(&o, p, offsetof(gbi_pending_t, id) + p->id_len);
    o.hops = p->hops + hops + 1;
    const int link = m->flags & GB_MAIL_HELD ? gb_links_find(s->engine->links, (size_t)(r - s->rings), m->target) : -1;
    o.link = (uint16_t)(link + 1);
    if (!forward) { /* nobody waits for a send's reply */
        o.corr = 0;
        o.id_len = 0;
        o.delim = 0;
        o.one_way = 1;
    }
    if (forward)
        GBI_ADD(r->mail_forwarded, 1);
    else
        GBI_ADD(r->mail_sent, 1);
    if (m->target >= r->t->n_targets) {
        snprintf(why, sizeof why, "target index %u, and the type declares %u targets", m->target, r->t->n_targets);
        undeliverable(s, r, &o, forward, why);
    } else if (m->type == 0 || m->type >= GB_MAIL_TYPE_RESERVED) {
        snprintf(why, sizeof why, "message type %u is reserved to the bridge", m->type);
        undeliverable(s, r, &o, forward, why);
    } else if (r->t->target[m->target] < 0) {
        snprintf(why, sizeof why, "grain type '%s' is not served by this bridge",
                 gb_grain_get(r->t->kind)->targets[m->target]);
        undeliverable(s, r, &o, forward, why);
    } else if (o.hops > s->mail_max_hops) {
        snprintf(why, sizeof why, "the request was forwarded more than %u times (messaging.max_hops): a cycle?", s->mail_max_hops);
        undeliverable(s, r, &o, forward, why);
    } else {
        const gb_engine_type_t *tt = gb_engine_at(s->engine, &s->engine->types[r->t->target[m->target]], m->key);
        gbi_ring_t *to = &s->rings[tt - s->engine->types]; /* the key's device */
        if (to->mail_head || put(s, to, r, &o, forward, m->key, m->type, rec, m->len) == NEEDS_ROOM)
            hold(s, to, r, &o, forward, m->key, m->type, rec, m->len);
    }
}

void gbi_route_reply(gb_server_t *s, gbi_ring_t *r, const gb_slot_hdr_t *h, const unsigned char *pl,
                     const gbi_pending_t *p)
{
    gb_mail_trailer_t t;
    const gb_mail_msg_t *msgs[GB_MAIL_MAX_MSGS];
    int n = gb_mail_parse(pl, h->len, &t, msgs);
    /* The trailer is the sender's word: a FORWARDED turn must carry exactly
     * one forward and any other none, or its caller would get no reply, or
     * two. */
    int forwards = 0;
    for (int i = 0; i < n; i++)
        forwards += (msgs[i]->flags & GB_MAIL_FORWARD) != 0;
    if (n >= 0 && forwards != (t.status == GB_SLOT_FORWARDED))
        n = -1;
    if (n < 0) {
        GBI_ADD(r->mail_undeliverable, 1); /* at least one message lost; the count is not to be trusted */
        if (!(p->one_way && p->corr == 0))
            gbi_reply(s, p->id, p->id_len, p->delim, p->corr, GPUBRIDGE__STATUS__STATUS_INTERNAL,
                      "the grain wrote a malformed reply with messages (none was delivered)", 0, NULL, 0);
        gbi_publish_all(s);
        return;
    }
    for (int i = 0; i < n; i++)
        route_one(s, r, p, t.hops, msgs[i]);
    gbi_publish_all(s);
    if (t.status == GB_SLOT_FORWARDED || (p->one_way && (t.status == GB_SLOT_OK || p->corr == 0)))
        return;
    gb_slot_hdr_t rh = *h; /* the handler's own reply */
    rh.status = t.status;
    rh.len = t.status == GB_SLOT_OK ? t.reply_len : 0;
    if (t.status == GB_SLOT_OK)
        gbi_reply_record(s, r, &rh, pl, p);
    else
        gbi_reply_slot_error(s, r, &rh, p);
}

/* Feeds ring `to`'s waiting messages while it has room; answers those past
 * their hold, or all of them once it stopped. */
static int pump_ring(gb_server_t *s, gbi_ring_t *to, uint64_t now)
{
    int moved = 0;
    gbi_mail_t *m;
    char why[200];
    while ((m = to->mail_head)) {
        gbi_ring_t *from = &s->rings[m->from];
        gbi_ring_take(s, to); /* not draining: always taken */
        if (now - m->since_ns > s->mail_hold_ns) {
            snprintf(why, sizeof why, "grain type '%s' had no room for %llu ms (messaging.hold_ms%s)", to->t->name,
                     (unsigned long long)((now - m->since_ns) / 1000000ull),
                     gb_rk_is_active(to->t->rk) ? "" : "; it is deactivated");
            undeliverable(s, from, &m->origin, m->forward, why);
        } else if (put(s, to, from, &m->origin, m->forward, m->key, m->type, m->rec, m->len) == NEEDS_ROOM) {
            break;
        }
        to->mail_head = m->next;
        if (!to->mail_head)
            to->mail_tail = NULL;
        GBI_ADD(to->mail_held, -1);
        GBI_ADD(s->mail_bytes, -m->bytes);
        free(m);
        moved++;
    }
    return moved;
}

int gbi_route_pump(gb_server_t *s)
{
    int moved = 0;
    const uint64_t now = gb_now_ns();
    for (size_t i = 0; i < s->engine->n_types; i++)
        if (s->rings[i].mail_head)
            moved += pump_ring(s, &s->rings[i], now);
    gbi_publish_all(s);
    return moved;
}

void gbi_route_fini(gb_server_t *s, int answer)
{
    for (size_t i = 0; i < GB_MAX_RINGS; i++) {
        gbi_ring_t *to = &s->rings[i];
        gbi_mail_t *m;
        while ((m = to->mail_head)) {
            to->mail_head = m->next;
            if (answer)
                undeliverable(s, &s->rings[m->from], &m->origin, m->forward, "the bridge is shutting down");
            GBI_ADD(s->mail_bytes, -m->bytes);
            free(m);
        }
        to->mail_tail = NULL;
        GBI_ADD(to->mail_held, -to->mail_held);
    }
}
