/* deadline.c: pipelined requests (gbc_send) expire after the client's
 * timeout, as a gbc_call does: a request whose bridge died (or never
 * answers) completes with a STATUS_TIMEOUT reply made here, instead of
 * staying in flight for ever. One still queued in the client is taken
 * out of its batch, never to be sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

int gbci_deadlines_push(gbci_deadlines_t *q, uint64_t id, int64_t at, size_t ep)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        gbci_deadline_t *d = malloc(cap * sizeof *d);
        if (!d)
            return -1;
        for (size_t i = 0; i < q->n; i++)
            d[i] = q->d[(q->head + i) % q->cap];
        free(q->d);
        q->d = d;
        q->cap = cap;
        q->head = 0;
    }
    q->d[(q->head + q->n) % q->cap] = (gbci_deadline_t){id, at, ep};
    q->n++;
    return 0;
}

void gbci_deadlines_free(gbci_deadlines_t *q)
{
    free(q->d);
    memset(q, 0, sizeof *q);
}

/* The reply of a request that expired, or was lost with its connection
 * (lost): made here, not by a bridge. */
static int expired_reply(gbc_client_t *c, const gbci_deadline_t *d, bool lost)
{
    gbc_reply_t r;
    memset(&r, 0, sizeof r);
    r.correlation_id = d->id;
    r.status = GBC_STATUS_TIMEOUT;
    r.endpoint = d->ep;
    gbci_endpoint_t *ep = &c->eps[d->ep];
    gbci_monitor_drain(ep);
    char text[256];
    /* One still queued here (the bridge down or full) is taken out, so it
     * is never sent later, and the caller knows it did not run. */
    if (lost)
        snprintf(text, sizeof text, "connection to the bridge lost with the request in flight: no reply can come; it "
                 "may or may not have been processed");
    else if (gbci_batch_drop_first(&ep->batch, d->id))
        snprintf(text, sizeof text, "not sent within %d ms (the client's timeout), so not processed: %s", c->timeout_ms,
                 ep->connected ? "the bridge accepted no more requests (backpressure)"
                 : ep->ever_connected ? "not connected (connection to the bridge lost)"
                                      : "not connected to the bridge");
    else
        snprintf(text, sizeof text, "no reply within %d ms (the client's timeout); the request may or may not have "
                 "been processed%s", c->timeout_ms, ep->connected ? "" : " (connection to the bridge lost)");
    r.error = strdup(text);
    if (!r.error || gbci_replyq_push(&c->ready, &r) != 0) {
        gbc_reply_clear(&r);
        return -1;
    }
    return 0;
}

/* Completes the async requests sent on connections that have ended, at
 * once: their replies cannot come. The replies that came before are read
 * first. Entries stay in the queue (no longer async: skipped later). */
static void complete_lost(gbc_client_t *c)
{
    bool any = false;
    for (size_t i = 0; i < c->n; i++) {
        gbci_monitor_drain(&c->eps[i]);
        if (c->eps[i].lost_new) {
            (void)gbci_drain_ep(c, i); /* a failure here shows at the next read */
            any = true;
        }
    }
    if (!any)
        return;
    gbci_deadlines_t *q = &c->deadlines;
    for (size_t k = 0; k < q->n; k++) {
        const gbci_deadline_t *d = &q->d[(q->head + k) % q->cap];
        const gbci_endpoint_t *ep = &c->eps[d->ep];
        if (ep->lost_new && d->id <= ep->lost_upto && gbci_idset_get(&c->ids, d->id) == GBCI_ID_ASYNC) {
            if (expired_reply(c, d, true) != 0)
                return; /* out of memory: try again at the next poll */
            gbci_idset_put(&c->ids, d->id, GBCI_ID_ABANDONED);
            c->async_in_flight--;
        }
    }
    for (size_t i = 0; i < c->n; i++)
        c->eps[i].lost_new = false;
}

int64_t gbci_expire(gbc_client_t *c, int64_t now, bool check_lost)
{
    if (check_lost)
        complete_lost(c);
    gbci_deadlines_t *q = &c->deadlines;
    while (q->n) {
        const gbci_deadline_t *d = &q->d[q->head];
        if (gbci_idset_get(&c->ids, d->id) == GBCI_ID_ASYNC) {
            if (d->at > now)
                return d->at;
            if (expired_reply(c, d, false) != 0)
                return now; /* out of memory: try again at the next poll */
            /* A late reply is dropped, as for a gbc_call that gave up. */
            gbci_idset_put(&c->ids, d->id, GBCI_ID_ABANDONED);
            c->async_in_flight--;
        }
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    return INT64_MAX;
}
