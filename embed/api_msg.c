/* The embedding API's messages: send, poll and call. Replies leave the rings
 * in gbe_drain, run by whichever thread polls or calls: a call's reply goes
 * straight into its caller's buffer, a sent request's into the queue that
 * gpubridge_poll reads, a one-way request's nowhere. */
#include "api_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "grain_registry.h"
#include "runtime.h"

void gbe_queue_free(gpubridge_runtime_t *rt)
{
    while (rt->q_head) {
        gbe_node_t *n = rt->q_head;
        rt->q_head = n->next;
        free(n);
    }
    rt->q_tail = NULL;
    rt->q_len = 0;
}

static gbe_waiter_t *find_waiter(gpubridge_runtime_t *rt, uint64_t corr)
{
    for (gbe_waiter_t *w = rt->waiters; w; w = w->next)
        if (w->corr == corr)
            return w;
    return NULL;
}

static void fill_reply(gpubridge_reply_t *r, const gb_engine_type_t *t, const gb_slot_hdr_t *h, uint32_t len)
{
    r->type = t->name;
    r->key = h->key;
    r->corr = h->corr & GBE_TAG_CALL ? 0 : h->corr;
    r->msg_type = h->type;
    r->status = h->status;
    r->aux = h->aux;
    r->len = len;
}

/* Takes reply h (payload p, len bytes) of type t; 0 when it must stay in
 * its ring (no memory for it now). */
static int take(gpubridge_runtime_t *rt, const gb_engine_type_t *t, const gb_slot_hdr_t *h, const unsigned char *p,
                uint32_t len)
{
    if (h->corr & GBE_TAG_CALL) {
        gbe_waiter_t *w = find_waiter(rt, h->corr);
        if (w) { /* else a call that timed out: dropped */
            fill_reply(w->reply, t, h, len);
            w->err = len > w->cap ? GPUBRIDGE_ERR_TOO_LARGE : GPUBRIDGE_OK;
            if (len && w->cap)
                memcpy(w->buf, p, len < w->cap ? len : w->cap);
            w->done = 1;
        }
        return 1;
    }
    if (h->corr & GBE_TAG_ONE_WAY)
        return 1;
    /* Queued whatever the count: gpubridge_send keeps it near q_max, and a
     * reply left in its ring would hold up the calls' replies behind it. */
    gbe_node_t *n = malloc(sizeof *n + len);
    if (!n)
        return 0; /* left in the ring: taken when memory comes back */
    n->next = NULL;
    fill_reply(&n->r, t, h, len);
    if (len)
        memcpy(n->payload, p, len);
    if (rt->q_tail)
        rt->q_tail->next = n;
    else
        rt->q_head = n;
    rt->q_tail = n;
    rt->q_len++;
    return 1;
}

void gbe_drain(gpubridge_runtime_t *rt)
{
    for (size_t i = 0; i < rt->engine->n_types; i++) {
        gb_engine_type_t *t = &rt->engine->types[i];
        if (!t->rk || gb_rk_in_flight(t->rk) == 0)
            continue;
        gb_rk_poll(t->rk); /* relaunches, staging copies, failure detection */
        const gb_slot_hdr_t *h;
        while ((h = gb_rk_peek(t->rk)) != NULL) {
            const unsigned char *p = gb_rk_reply_payload(t->rk, h);
            gb_slot_hdr_t bad;
            if (!p || (p == (const unsigned char *)(h + 1) && h->len > gb_rk_payload_cap(t->rk))) {
                /* A length past its room (the handler's *out_len): nothing
                 * trustworthy to copy, and the caller must not read OK. */
                bad = *h;
                bad.len = 0;
                if (bad.status == GB_SLOT_OK)
                    bad.status = GB_SLOT_TOO_LARGE;
                h = &bad;
            }
            if (!take(rt, t, h, p, h->len))
                break;
            gb_rk_consume(t->rk);
        }
    }
}

/* Waiting between drains: spin, then yield, then sleep up to 200 us. */
static void backoff(unsigned *round)
{
    unsigned n = (*round)++;
    if (n < 64)
        return;
    if (n < 2048) {
        sched_yield();
        return;
    }
    long ns = 1000L << ((n - 2048) / 64 < 8 ? (n - 2048) / 64 : 8);
    struct timespec ts = {0, ns < 200000 ? ns : 200000};
    nanosleep(&ts, NULL);
}

static uint64_t deadline_of(int timeout_ms)
{
    return timeout_ms < 0 ? UINT64_MAX : gb_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* Checks a request's arguments against type t (lock held). */
static gpubridge_err check_request(gb_engine_type_t *t, uint32_t msg_type, const void *payload, size_t len)
{
    if (!payload && len)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "a payload of %zu bytes at NULL", len);
    if (msg_type == 0 || (msg_type >= GB_MSG_DEACTIVATE_KEY && msg_type != GPUBRIDGE_MSG_DEACTIVATE_KEY))
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "message type %u is out of range (1..%u, or "
                        "GPUBRIDGE_MSG_DEACTIVATE_KEY)", msg_type, GB_MSG_DEACTIVATE_KEY - 1u);
    const gb_grain_desc_t *d = gb_grain_get(t->kind);
    if (d && d->n_msgs && msg_type != GPUBRIDGE_MSG_DEACTIVATE_KEY) {
        char list[384] = "";
        size_t n = 0;
        for (uint32_t i = 0; i < d->n_msgs; i++) {
            if (d->msgs[i].type == msg_type)
                goto known;
            if (n < sizeof list)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%u (%s)", i ? ", " : "", d->msgs[i].type,
                                      d->msgs[i].name ? d->msgs[i].name : "?");
        }
        return gbe_fail(GPUBRIDGE_ERR_UNKNOWN_TYPE, "grain type '%s' has no message type %u (it takes %s)", t->name,
                        msg_type, list);
    }
known:;
    const uint32_t max = gb_rk_large_max(t->rk);
    if (len > max)
        return gbe_fail(GPUBRIDGE_ERR_TOO_LARGE, "a payload of %zu bytes is larger than grain type '%s' takes "
                        "(%u bytes: the config's max_message_size)", len, t->name, max);
    return GPUBRIDGE_OK;
}

/* The state error of a stopped ring kernel, else OK. */
static gpubridge_err check_running(const gb_engine_type_t *t)
{
    gb_rk_state s = gb_rk_state_of(t->rk);
    if (s == GB_RK_FAILED) {
        gb_rk_status_t st;
        gb_rk_status(t->rk, &st);
        return gbe_fail(st.last_error ? GPUBRIDGE_ERR_GPU : GPUBRIDGE_ERR_TERMINATED, "grain type '%s' failed: %s",
                        t->name, st.last_error_name[0] ? st.last_error_name : "its ring kernel stopped");
    }
    if (s == GB_RK_TERMINATED)
        return gbe_fail(GPUBRIDGE_ERR_TERMINATED, "grain type '%s' is terminated", t->name);
    return GPUBRIDGE_OK;
}

/* Sends one request with slot correlation id corr (lock held). */
static gpubridge_err send_locked(gpubridge_runtime_t *rt, const char *type, uint64_t key, uint32_t msg_type,
                                 const void *payload, size_t len, uint64_t corr, gb_engine_type_t **tp)
{
    gpubridge_err e = GPUBRIDGE_OK;
    gb_engine_type_t *t = gbe_type(rt, type, &e);
    if (!t)
        return e;
    if ((e = check_request(t, msg_type, payload, len)) != GPUBRIDGE_OK || (e = check_running(t)) != GPUBRIDGE_OK)
        return e;
    gb_err ge = gb_rk_send(t->rk, key, corr, (uint16_t)msg_type, payload, (uint32_t)len);
    if (ge == GB_ERR_FULL)
        return gbe_fail(GPUBRIDGE_ERR_FULL, "grain type '%s': no room in its ring now (%u slots, %llu requests in "
                        "flight): poll replies, then retry", type, gb_rk_capacity(t->rk),
                        (unsigned long long)gb_rk_in_flight(t->rk));
    if (ge != GB_OK)
        return gbe_fail(gbe_err_of(ge), "grain type '%s': send: %s", type, gb_strerror(ge));
    if (tp)
        *tp = t;
    return GPUBRIDGE_OK;
}

/* Requests in every ring, replies included that wait to be drained (lock
 * held): a bound on the replies still to come to the queue. */
static uint64_t in_flight(const gpubridge_runtime_t *rt)
{
    uint64_t n = 0;
    for (size_t i = 0; i < rt->engine->n_types; i++)
        if (rt->engine->types[i].rk)
            n += gb_rk_in_flight(rt->engine->types[i].rk);
    return n;
}

gpubridge_err gpubridge_send(gpubridge_runtime_t *rt, const char *type, uint64_t key, uint32_t msg_type,
                             const void *payload, size_t len, uint64_t corr, unsigned flags)
{
    if (!rt || !type)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_send: %s is NULL", rt ? "the grain type" : "the runtime");
    if (flags & ~GPUBRIDGE_ONE_WAY)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_send: unknown flags 0x%x", flags);
    if (!(flags & GPUBRIDGE_ONE_WAY) && corr > GPUBRIDGE_CORR_MAX)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "correlation id %llu is past GPUBRIDGE_CORR_MAX",
                        (unsigned long long)corr);
    if (flags & GPUBRIDGE_ONE_WAY)
        corr = GBE_TAG_ONE_WAY;
    pthread_mutex_lock(&rt->lock);
    gpubridge_err e = GPUBRIDGE_OK;
    uint64_t owed;
    if (!(flags & GPUBRIDGE_ONE_WAY) && rt->engine && (owed = rt->q_len + in_flight(rt)) >= rt->q_max)
        e = gbe_fail(GPUBRIDGE_ERR_FULL, "%llu replies unpolled or on their way (at most %llu): poll replies, then "
                     "retry", (unsigned long long)owed, (unsigned long long)rt->q_max);
    else
        e = send_locked(rt, type, key, msg_type, payload, len, corr, NULL);
    pthread_mutex_unlock(&rt->lock);
    return e;
}

/* Whether any running type has requests in flight (lock held). */
static int any_in_flight(const gpubridge_runtime_t *rt)
{
    for (size_t i = 0; i < rt->engine->n_types; i++) {
        const gb_rk_t *rk = rt->engine->types[i].rk;
        if (rk && gb_rk_state_of(rk) == GB_RK_RUNNING && gb_rk_in_flight(rk) > 0)
            return 1;
    }
    return 0;
}

/* The first queued reply into reply and buf (lock held); EMPTY when none. */
static gpubridge_err pop(gpubridge_runtime_t *rt, gpubridge_reply_t *reply, void *buf, size_t cap)
{
    gbe_node_t *n = rt->q_head;
    if (!n)
        return GPUBRIDGE_ERR_EMPTY;
    *reply = n->r;
    if (n->r.len > cap)
        return gbe_fail(GPUBRIDGE_ERR_TOO_LARGE, "the next reply has %u bytes, the buffer %zu; it stays first in "
                        "line", n->r.len, cap);
    if (n->r.len)
        memcpy(buf, n->payload, n->r.len);
    rt->q_head = n->next;
    if (!rt->q_head)
        rt->q_tail = NULL;
    rt->q_len--;
    free(n);
    return GPUBRIDGE_OK;
}

gpubridge_err gpubridge_poll(gpubridge_runtime_t *rt, gpubridge_reply_t *reply, void *buf, size_t cap,
                             int timeout_ms)
{
    if (!rt || !reply || (!buf && cap))
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_poll: %s is NULL",
                        !rt ? "the runtime" : !reply ? "reply" : "buf");
    const uint64_t deadline = deadline_of(timeout_ms);
    unsigned round = 0;
    for (;;) {
        pthread_mutex_lock(&rt->lock);
        if (!rt->engine) {
            pthread_mutex_unlock(&rt->lock);
            return gbe_fail(GPUBRIDGE_ERR_STATE, "the runtime has not started: call gpubridge_runtime_start first");
        }
        gbe_drain(rt);
        gpubridge_err e = pop(rt, reply, buf, cap);
        const int waiting = e == GPUBRIDGE_ERR_EMPTY && any_in_flight(rt);
        pthread_mutex_unlock(&rt->lock);
        if (e != GPUBRIDGE_ERR_EMPTY)
            return e;
        if (!waiting || gb_now_ns() >= deadline)
            return gbe_fail(GPUBRIDGE_ERR_EMPTY, waiting ? "no reply within %d ms" : "no reply waiting and no "
                            "request in flight (%d ms)", timeout_ms);
        backoff(&round);
    }
}

static void unlink_waiter(gpubridge_runtime_t *rt, gbe_waiter_t *w)
{
    for (gbe_waiter_t **p = &rt->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            return;
        }
}

/* Whether call w is over: its reply came, or its type stopped (lock held). */
static int call_over(gpubridge_runtime_t *rt, gbe_waiter_t *w, const gb_engine_type_t *t)
{
    gbe_drain(rt);
    if (w->done) {
        if (w->err == GPUBRIDGE_ERR_TOO_LARGE)
            gbe_fail(w->err, "the reply has %u bytes, the buffer %zu: truncated", w->reply->len, w->cap);
        return 1;
    }
    if ((w->err = check_running(t)) != GPUBRIDGE_OK)
        return 1;
    return 0;
}

gpubridge_err gpubridge_call(gpubridge_runtime_t *rt, const char *type, uint64_t key, uint32_t msg_type,
                             const void *payload, size_t len, gpubridge_reply_t *reply, void *buf, size_t cap,
                             int timeout_ms)
{
    if (!rt || !type || !reply || (!buf && cap))
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_call: %s is NULL",
                        !rt ? "the runtime" : !type ? "the grain type" : !reply ? "reply" : "buf");
    const uint64_t deadline = deadline_of(timeout_ms);
    gbe_waiter_t w = {NULL, 0, reply, buf, cap, 0, GPUBRIDGE_OK};
    gb_engine_type_t *t = NULL;
    pthread_mutex_lock(&rt->lock);
    w.corr = GBE_TAG_CALL | (++rt->calls & ~(GBE_TAG_CALL | GBE_TAG_ONE_WAY));
    gpubridge_err e = send_locked(rt, type, key, msg_type, payload, len, w.corr, &t);
    if (e != GPUBRIDGE_OK) {
        pthread_mutex_unlock(&rt->lock);
        return e;
    }
    w.next = rt->waiters;
    rt->waiters = &w;
    unsigned round = 0;
    for (;;) {
        if (call_over(rt, &w, t))
            break;
        if (gb_now_ns() >= deadline) {
            w.err = gbe_fail(GPUBRIDGE_ERR_TIMEOUT, "no reply from grain type '%s' within %d ms%s", type,
                             timeout_ms, gb_rk_is_active(t->rk) ? "" : " (it is deactivated: its requests wait "
                             "for gpubridge_activate)");
            break;
        }
        pthread_mutex_unlock(&rt->lock);
        backoff(&round);
        pthread_mutex_lock(&rt->lock);
    }
    unlink_waiter(rt, &w);
    pthread_mutex_unlock(&rt->lock);
    return w.err;
}
