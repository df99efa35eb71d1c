/* request.c: requests and replies: gbc_call (synchronous), gbc_send /
 * gbc_flush / gbc_poll (pipelined, batched), and the envelope path that
 * control operations share with gbc_call. */
#include <stdio.h>
#include <string.h>

#include "client_internal.h"

/* Queues env on endpoint i with the next correlation id, sending the queued
 * batch first when env would overfill it. *mark_len / *mark_count: the batch
 * just before env's record (to take it back). */
static gbc_err enqueue(gbc_client_t *c, size_t i, Gpubridge__Envelope *env, int64_t deadline,
                       size_t *mark_len, size_t *mark_count)
{
    gbci_batch_t *b = &c->eps[i].batch;
    env->correlation_id = c->next_corr;
    size_t env_len = gpubridge__envelope__get_packed_size(env);
    const gbci_batch_t none = {0};
    if (gbci_batch_frame_len_with(&none, env_len) > c->max_frame)
        return gbci_fail(GBC_ERR_TOO_LARGE,
                         "a %zu-byte envelope is over the %zu-byte frame limit (max_frame_bytes)",
                         env_len, c->max_frame);
    if (b->count >= c->max_batch || gbci_batch_frame_len_with(b, env_len) > c->max_frame) {
        gbc_err err = gbci_flush_ep(c, i, deadline);
        if (err)
            return err;
    }
    *mark_len = b->len;
    *mark_count = b->count;
    if (gbci_batch_append(b, env, env_len) != GBC_OK)
        return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    b->last_id = env->correlation_id;
    c->next_corr++;
    return GBC_OK;
}

static gbc_err check_request(const gbc_client_t *c, const char *type, const void *payload,
                             size_t len)
{
    if (!c)
        return gbci_fail(GBC_ERR_INVALID, "client is NULL");
    if (!type || !type[0])
        return gbci_fail(GBC_ERR_INVALID, "grain type is NULL or empty");
    if (!payload && len)
        return gbci_fail(GBC_ERR_INVALID, "payload is NULL but len is %zu", len);
    return GBC_OK;
}

gbc_err gbci_call_env(gbc_client_t *c, size_t i, Gpubridge__Envelope *env, gbc_reply_t *out,
                      int timeout_ms)
{
    memset(out, 0, sizeof *out);
    int64_t deadline = gbci_deadline(c, timeout_ms);
    size_t mark_len = 0, mark_count = 0;
    gbc_err err = enqueue(c, i, env, deadline, &mark_len, &mark_count);
    if (err)
        return err;
    uint64_t id = env->correlation_id;
    /* Queued sends to this endpoint go out in the same frame, before this
     * call: the order of one grain's messages is the order of the calls. */
    if ((err = gbci_flush_ep(c, i, deadline)) != GBC_OK) {
        gbci_batch_truncate(&c->eps[i].batch, mark_len, mark_count);
        return err;
    }
    if (gbci_pump(c, deadline, id, i, out, &err)) {
        if (out->status != GBC_STATUS_OK)
            return gbci_fail_status(c, out);
        return GBC_OK;
    }
    gbc_reply_clear(out);
    /* A late reply must not surface in gbc_poll. */
    if (gbci_idset_put(&c->ids, id, GBCI_ID_ABANDONED) != 0 && !err)
        err = gbci_fail(GBC_ERR_NOMEM, "out of memory");
    if (err)
        return err;
    gbci_endpoint_t *ep = &c->eps[i];
    gbci_monitor_drain(ep);
    if (ep->lost_upto >= id)
        return gbci_fail(GBC_ERR_TIMEOUT, "%s: connection to the bridge lost with request %llu in flight: no reply "
                         "can come; it may or may not have been processed", ep->addr, (unsigned long long)id);
    return gbci_fail(GBC_ERR_TIMEOUT, "%s: no reply to request %llu within %d ms%s", ep->addr,
                     (unsigned long long)id, gbci_timeout_ms(c, timeout_ms),
                     ep->connected ? "" : " (connection to the bridge lost)");
}

static void request_env(Gpubridge__Envelope *env, Gpubridge__GrainId *g, const char *type,
                        uint64_t key, uint32_t message_type, const void *payload, size_t len)
{
    gpubridge__grain_id__init(g);
    g->type = (char *)type;
    g->key = key;
    gpubridge__envelope__init(env);
    env->grain = g;
    env->kind = GPUBRIDGE__KIND__KIND_REQUEST;
    env->message_type = message_type;
    env->payload.data = (uint8_t *)payload;
    env->payload.len = len;
}

gbc_err gbc_call(gbc_client_t *c, const char *type, uint64_t key, uint32_t message_type,
                 const void *payload, size_t len, gbc_reply_t *out, int timeout_ms)
{
    gbci_clear_error();
    if (!out)
        return gbci_fail(GBC_ERR_INVALID, "gbc_call: out is NULL");
    memset(out, 0, sizeof *out);
    gbc_err err = check_request(c, type, payload, len);
    if (err)
        return err;
    Gpubridge__GrainId g;
    Gpubridge__Envelope env;
    request_env(&env, &g, type, key, message_type, payload, len);
    return gbci_call_env(c, gbc_placement(type, key, c->n), &env, out, timeout_ms);
}

gbc_err gbc_send(gbc_client_t *c, const char *type, uint64_t key, uint32_t message_type,
                 const void *payload, size_t len, uint64_t *corr_out)
{
    gbci_clear_error();
    gbc_err err = check_request(c, type, payload, len);
    if (err)
        return err;
    Gpubridge__GrainId g;
    Gpubridge__Envelope env;
    request_env(&env, &g, type, key, message_type, payload, len);
    size_t i = gbc_placement(type, key, c->n), mark_len = 0, mark_count = 0;
    uint64_t id = c->next_corr;
    if (gbci_idset_put(&c->ids, id, GBCI_ID_ASYNC) != 0)
        return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    if ((err = enqueue(c, i, &env, gbci_deadline(c, GBC_TIMEOUT_DEFAULT), &mark_len,
                       &mark_count)) != GBC_OK) {
        gbci_idset_take(&c->ids, id);
        return err;
    }
    if (gbci_deadlines_push(&c->deadlines, id, gbci_deadline(c, GBC_TIMEOUT_DEFAULT), i) != 0) {
        gbci_batch_truncate(&c->eps[i].batch, mark_len, mark_count);
        gbci_idset_take(&c->ids, id);
        c->next_corr--;
        return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    }
    c->async_in_flight++;
    if (corr_out)
        *corr_out = id;
    /* A full batch goes out now if it can without waiting; otherwise it
     * stays queued and the next send, flush or poll waits for room. */
    if (c->eps[i].batch.count >= c->max_batch) {
        gbci_flush_ep(c, i, gbci_now_ns());
        gbci_clear_error();
    }
    return GBC_OK;
}

/* Flushes every endpoint; the first failure wins, the rest are still tried. */
static gbc_err flush_all(gbc_client_t *c, int64_t deadline)
{
    gbc_err first = GBC_OK;
    char why[512] = "";
    for (size_t i = 0; i < c->n; i++) {
        gbc_err err = gbci_flush_ep(c, i, deadline);
        if (err && !first) {
            first = err;
            snprintf(why, sizeof why, "%s", gbc_last_error());
        }
    }
    if (first)
        return gbci_fail(first, "%s", why);
    return GBC_OK;
}

gbc_err gbc_flush(gbc_client_t *c)
{
    gbci_clear_error();
    if (!c)
        return gbci_fail(GBC_ERR_INVALID, "client is NULL");
    return flush_all(c, gbci_deadline(c, GBC_TIMEOUT_DEFAULT));
}

gbc_err gbc_poll(gbc_client_t *c, gbc_reply_t *out, int timeout_ms)
{
    gbci_clear_error();
    if (!out)
        return gbci_fail(GBC_ERR_INVALID, "gbc_poll: out is NULL");
    memset(out, 0, sizeof *out);
    if (!c)
        return gbci_fail(GBC_ERR_INVALID, "client is NULL");
    int64_t deadline = gbci_deadline(c, timeout_ms);
    /* A request past its own deadline completes now (gbci_expire), so wait
     * no longer than the first one due. */
    int64_t due = gbci_expire(c, gbci_now_ns(), c->ready.n == 0);
    /* Batches that cannot go at once (a bridge down or full) go out while
     * replies are awaited below: waiting for room here would hold back
     * the replies of the other bridges. */
    gbc_err ferr = flush_all(c, gbci_now_ns());
    gbc_err err = GBC_OK;
    while (c->ready.n == 0 && (c->async_in_flight || ferr)) {
        gbci_pump(c, due < deadline ? due : deadline, 0, SIZE_MAX, NULL, &err);
        due = gbci_expire(c, gbci_now_ns(), true);
        if (err || gbci_now_ns() >= deadline)
            break;
    }
    if (gbci_replyq_pop(&c->ready, out)) {
        if (out->correlation_id == 0 && c->unmatched)
            c->unmatched--;
        gbci_clear_error();
        return out->status == GBC_STATUS_OK ? GBC_OK : gbci_fail_status(c, out);
    }
    if (err)
        return err;
    /* Why requests are still queued, as of now. */
    ferr = GBC_OK;
    bool lasting = false;
    for (size_t i = 0; i < c->n && !lasting; i++) {
        if (!c->eps[i].batch.count)
            continue;
        lasting = gbci_handshake_failed_for_good(c, i);
        if (!ferr || lasting)
            ferr = gbci_send_failure(c, i);
    }
    char why[512] = "";
    snprintf(why, sizeof why, "%s", gbc_last_error());
    if (ferr) {
        /* Unsent requests are no failure of the poll: each completes at its
         * own deadline (a bridge still connecting, or one that is down, or
         * full). A handshake that failed for good (CURVE refused, not a
         * gpubridge endpoint) is passed on, from whichever endpoint. */
        if ((ferr == GBC_ERR_CONNECT || ferr == GBC_ERR_TIMEOUT) && !lasting) {
            if (timeout_ms == GBC_TIMEOUT_NOWAIT)
                return gbci_fail(GBC_ERR_TIMEOUT, "nothing received yet; requests still queued (%s)", why);
            return gbci_fail(GBC_ERR_TIMEOUT, "no reply within %d ms; requests still queued (%s)",
                             gbci_timeout_ms(c, timeout_ms), why);
        }
        return gbci_fail(ferr, "%s", why);
    }
    if (c->async_in_flight == 0)
        return gbci_fail(GBC_ERR_EMPTY, "gbc_poll: no request in flight");
    return gbci_fail(GBC_ERR_TIMEOUT, "no reply within %d ms (%zu requests in flight)",
                     gbci_timeout_ms(c, timeout_ms), c->async_in_flight);
}
