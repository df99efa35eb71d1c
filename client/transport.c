/* transport.c: the sockets. One DEALER per endpoint, plus a PAIR that reads
 * that DEALER's monitor events (to tell "bridge down" from "bridge busy" and
 * to spot refused CURVE handshakes); sending with a deadline; reading and
 * routing replies. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "client_internal.h"

#define MON_EVENTS                                                                 \
    (ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |                      \
     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |  \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

static gbc_err zfail(gbc_err err, const char *what, const char *addr)
{
    return gbci_fail(err, "%s: %s: %s", addr, what, zmq_strerror(zmq_errno()));
}

static int setopt_int(void *s, int opt, int v) { return zmq_setsockopt(s, opt, &v, sizeof v); }

/* Opens endpoint i's DEALER and its monitor, and starts connecting. */
static gbc_err endpoint_socket(gbc_client_t *c, size_t i)
{
    gbci_endpoint_t *ep = &c->eps[i];
    const char *addr = ep->addr;
    ep->sock = zmq_socket(c->ctx, ZMQ_DEALER);
    if (!ep->sock)
        return zfail(GBC_ERR_IO, "zmq_socket", addr);
    /* LINGER 0: destroy never blocks on a dead bridge. IMMEDIATE: queue only
     * on a finished handshake, so a send to a bridge that is down waits (and
     * fails as GBC_ERR_CONNECT) instead of vanishing into a dead pipe.
     * RCVHWM 0: replies the application has not read yet are never dropped
     * here (their number is bounded by the requests it sent).
     * RECONNECT_IVL: a new connection comes no sooner than this after one
     * ends, which lets try_send read the monitor only every
     * GBCI_MON_EVERY_NS (far below it). MAXMSGSIZE: no bridge sends a
     * frame past twice its largest max_message_size; a peer that does is
     * not one, and its connection is closed rather than read. */
    int64_t max_frame = (int64_t)GBCI_MAX_FRAME;
    if (zmq_setsockopt(ep->sock, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame) != 0)
        return zfail(GBC_ERR_IO, "zmq_setsockopt", addr);
    if (setopt_int(ep->sock, ZMQ_LINGER, 0) || setopt_int(ep->sock, ZMQ_IMMEDIATE, 1) ||
        setopt_int(ep->sock, ZMQ_RCVHWM, 0) || setopt_int(ep->sock, ZMQ_RECONNECT_IVL, GBCI_RECONNECT_IVL_MS) ||
        setopt_int(ep->sock, ZMQ_IPV6, 1)) /* tcp://[IPV6]:PORT endpoints */
        return zfail(GBC_ERR_IO, "zmq_setsockopt", addr);
    if (ep->keys[0]) {
        /* Z85 keys go in as 41 bytes: 40 characters and the NUL. */
        if (zmq_setsockopt(ep->sock, ZMQ_CURVE_SERVERKEY, ep->keys[0], 41) ||
            zmq_setsockopt(ep->sock, ZMQ_CURVE_PUBLICKEY, ep->keys[1], 41) ||
            zmq_setsockopt(ep->sock, ZMQ_CURVE_SECRETKEY, ep->keys[2], 41))
            return zfail(GBC_ERR_INVALID, "CURVE keys", addr);
    }
    char mon_addr[112];
    snprintf(mon_addr, sizeof mon_addr, "inproc://gbc-monitor-%p-%zu-%u", (void *)c, i, ep->generation++);
    if (zmq_socket_monitor(ep->sock, mon_addr, MON_EVENTS) != 0)
        return zfail(GBC_ERR_IO, "zmq_socket_monitor", addr);
    ep->mon = zmq_socket(c->ctx, ZMQ_PAIR);
    /* RCVHWM 0: the monitor's sender would block the I/O thread on a full pipe. */
    if (!ep->mon || setopt_int(ep->mon, ZMQ_LINGER, 0) || setopt_int(ep->mon, ZMQ_RCVHWM, 0) ||
        zmq_connect(ep->mon, mon_addr) != 0)
        return zfail(GBC_ERR_IO, "monitor socket", addr);
    if (strncmp(addr, "tcp://", 6) == 0) {
        /* ZeroMQ takes any number here, and the connection then never
         * comes: say so now rather than at the first deadline. */
        const char *colon = strrchr(addr, ':');
        const unsigned long port = colon[1] >= '0' && colon[1] <= '9' ? strtoul(colon + 1, NULL, 10) : 1;
        if (port == 0 || port > 65535)
            return gbci_fail(GBC_ERR_INVALID, "endpoint '%s': port %s is out of range (1 to 65535)", addr,
                             colon + 1);
    }
    if (zmq_connect(ep->sock, addr) != 0)
        return gbci_fail(GBC_ERR_INVALID, "endpoint '%s': %s (expected tcp://host:port or "
                         "ipc:///path)", addr, zmq_strerror(zmq_errno()));
    c->items[i].socket = ep->sock;
    return GBC_OK;
}

static void endpoint_socket_close(gbci_endpoint_t *ep)
{
    if (ep->sock) {
        if (ep->mon)
            zmq_socket_monitor(ep->sock, NULL, 0);
        zmq_close(ep->sock);
    }
    if (ep->mon)
        zmq_close(ep->mon);
    ep->sock = ep->mon = NULL;
}

gbc_err gbci_endpoint_open(gbc_client_t *c, size_t i, const char *addr,
                           const char *server_key, const char *public_key,
                           const char *secret_key)
{
    gbci_endpoint_t *ep = &c->eps[i];
    ep->addr = strdup(addr);
    if (!ep->addr)
        return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    if (server_key) {
        const char *k[3] = {server_key, public_key, secret_key};
        for (int j = 0; j < 3; j++)
            if (!(ep->keys[j] = strdup(k[j])))
                return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    }
    return endpoint_socket(c, i);
}

/* Replaces endpoint i's socket, whose connection ended, by a fresh one,
 * once the replies that connection brought are read (into c->ready, or
 * dropped for calls given up). A socket connects its first time at once.
 * Its reconnections are not used: on one of them, libzmq (4.3.4) at times
 * never wrote a frame sent right after the handshake, and the call waited
 * for ever on a connection that was up. A fresh socket also carries
 * nothing of the old connection's queue onto the new one. */
static gbc_err endpoint_renew(gbc_client_t *c, size_t i)
{
    gbc_err err = gbci_drain_ep(c, i);
    if (err)
        return err;
    endpoint_socket_close(&c->eps[i]);
    c->eps[i].ended = false;
    c->eps[i].connected = false;
    return endpoint_socket(c, i);
}

void gbci_endpoint_close(gbci_endpoint_t *ep)
{
    endpoint_socket_close(ep);
    free(ep->addr);
    for (int j = 0; j < 3; j++)
        free(ep->keys[j]);
    gbci_batch_free(&ep->batch);
    memset(ep, 0, sizeof *ep);
}

void gbci_monitor_drain(gbci_endpoint_t *ep)
{
    if (!ep->mon)
        return;
    ep->mon_read_ns = gbci_now_ns();
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, ep->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        /* Frame 1: uint16 event + uint32 value; frame 2: the address. */
        uint16_t ev = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&m) >= 6) {
            memcpy(&ev, zmq_msg_data(&m), 2);
            memcpy(&value, (const char *)zmq_msg_data(&m) + 2, 4);
        }
        while (zmq_msg_more(&m) && zmq_msg_recv(&m, ep->mon, 0) >= 0) {
        }
        zmq_msg_close(&m);
        switch (ev) {
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
            ep->connected = ep->ever_connected = true;
            ep->handshake_failed = false;
            break;
        case ZMQ_EVENT_DISCONNECTED:
            ep->connected = false;
            ep->ended = true;
            if (ep->sent_upto > ep->lost_upto) {
                ep->lost_upto = ep->sent_upto;
                ep->lost_new = true;
            }
            break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            ep->connected = false;
            ep->handshake_failed = true;
            ep->handshake_event = ev;
            ep->handshake_errno = (int)value;
            break;
        default:
            break;
        }
    }
}

/* A reset reads as ECONNRESET, or as EPIPE when libzmq was writing its
 * greeting when it came. With CURVE, EPIPE is also how a bridge that
 * refused the client's HELLO (a wrong server key) closes: an auth error. */
static bool reset_before_handshake(const gbc_client_t *c, const gbci_endpoint_t *ep)
{
    const int e = ep->handshake_errno;
    return ep->handshake_event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL &&
           (e == ECONNRESET || (!c->curve && (e == EPIPE || e == ECONNABORTED)));
}

bool gbci_handshake_failed_for_good(const gbc_client_t *c, size_t i)
{
    const gbci_endpoint_t *ep = &c->eps[i];
    return !ep->connected && ep->handshake_failed && !reset_before_handshake(c, ep);
}

gbc_err gbci_send_failure(gbc_client_t *c, size_t i)
{
    gbci_endpoint_t *ep = &c->eps[i];
    gbci_monitor_drain(ep);
    const int e = ep->handshake_errno;
    if (!ep->connected && ep->handshake_failed && reset_before_handshake(c, ep))
        return gbci_fail(GBC_ERR_CONNECT, "%s: the connection was reset before the ZeroMQ handshake (a bridge "
                         "near its descriptor limit refuses new connections so, and the client retries; or the "
                         "bridge uses CURVE and this client has no keys)", ep->addr);
    if (!ep->connected && ep->handshake_failed) {
        const char *why = ep->handshake_event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                              ? "the bridge refused this client's key"
                              : "wrong server key, or not a gpubridge endpoint";
        if (c->curve)
            return gbci_fail(GBC_ERR_AUTH, "%s: CURVE handshake failed (%s)", ep->addr, why);
        return gbci_fail(GBC_ERR_CONNECT,
                         "%s: ZeroMQ handshake failed (%s; is the bridge using CURVE, or is this "
                         "not a gpubridge endpoint?)",
                         ep->addr, ep->handshake_event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && e ? strerror(e)
                                                                                                   : "protocol error");
    }
    if (!ep->connected)
        return gbci_fail(GBC_ERR_CONNECT, "%s: not connected%s (is the bridge running there?)",
                         ep->addr, ep->ever_connected ? " (connection lost)" : "");
    return gbci_fail(GBC_ERR_TIMEOUT,
                     "%s: the bridge accepts no more requests before the deadline "
                     "(backpressure: read replies, then retry)", ep->addr);
}

/* Copies one wire reply into *r (heap-owned fields). */
static gbc_err copy_reply(const gb_pb_reply_view_t *in, size_t ep, gbc_reply_t *r)
{
    memset(r, 0, sizeof *r);
    r->correlation_id = in->corr;
    r->status = in->status;
    r->message_type = in->message_type;
    r->endpoint = ep;
    /* The text up to a NUL, if any: where protobuf-c's C string ended, so
     * error stays what it was (NULL when empty). */
    size_t elen = 0;
    if (in->error_len) {
        const uint8_t *nul = memchr(in->error, 0, in->error_len);
        elen = nul ? (size_t)(nul - in->error) : in->error_len;
    }
    if (elen) {
        if (!(r->error = malloc(elen + 1)))
            return GBC_ERR_NOMEM;
        memcpy(r->error, in->error, elen);
        r->error[elen] = '\0';
        gbci_text_clean(r->error);
    }
    if (in->payload_len) {
        r->payload = malloc(in->payload_len);
        if (!r->payload) {
            gbc_reply_clear(r);
            return GBC_ERR_NOMEM;
        }
        memcpy(r->payload, in->payload, in->payload_len);
        r->payload_len = in->payload_len;
    }
    return GBC_OK;
}

/* Routes one reply: the awaited one into *got, async ones to c->ready,
 * replies to given-up calls and unknown ids away. */
static gbc_err route(gbc_client_t *c, const gb_pb_reply_view_t *in, size_t ep, uint64_t want,
                     gbc_reply_t *got, bool *found)
{
    uint64_t id = in->corr;
    if (want && id == want && !*found) {
        *found = true;
        return copy_reply(in, ep, got);
    }
    if (id == 0 && want && !*found && c->ids.n == 0 && ep == c->want_ep) {
        /* The bridge refused a frame whole, and nothing of ours is in
         * flight but the awaited call's: its frame was the one. (An id
         * abandoned after a timeout stays in ids until its late reply:
         * until then refusals go to gbc_poll, unattributed.) */
        *found = true;
        return copy_reply(in, ep, got);
    }
    uint8_t kind = gbci_idset_take(&c->ids, id);
    /* id 0: the bridge could not decode one of our frames; no request can be
     * matched, so hand it to gbc_poll for the application to see (a few:
     * a peer that sends them without end is not a bridge). */
    if (kind != GBCI_ID_ASYNC && id != 0)
        return GBC_OK;
    if (id == 0 && c->unmatched >= GBCI_MAX_UNMATCHED) {
        c->bad_frames++;
        return GBC_OK;
    }
    c->unmatched += id == 0;
    if (kind == GBCI_ID_ASYNC)
        c->async_in_flight--;
    gbc_reply_t r;
    gbc_err err = copy_reply(in, ep, &r);
    if (!err && gbci_replyq_push(&c->ready, &r) != 0)
        err = GBC_ERR_NOMEM;
    gbc_reply_clear(&r);
    return err;
}

/* One ServerFrame: checked whole first, then its replies routed straight
 * from the frame's bytes (no protobuf-c unpack: no allocation but the
 * replies handed to the application). */
static gbc_err handle_frame(gbc_client_t *c, size_t ep, const void *data, size_t len,
                            uint64_t want, gbc_reply_t *got, bool *found)
{
    gb_pb_reply_iter_t it;
    if (gb_pb_reply_frame_open(&it, data, len) != 0) {
        c->bad_frames++;
        return GBC_OK;
    }
    gbc_err err = GBC_OK;
    gb_pb_reply_view_t v;
    while (!err && gb_pb_reply_frame_next(&it, &v))
        err = route(c, &v, ep, want, got, found);
    return err;
}

/* Reads the frames already waiting on endpoint i, up to max (stops early
 * once the awaited reply is found): GBCI_DRAIN_MAX while the peer may
 * still send, so that a caller whose peer sends without end gets back to
 * its deadline; SIZE_MAX once its connection ended (what is queued then is
 * finite, and must all be read before requests are counted lost). */
static gbc_err drain(gbc_client_t *c, size_t i, uint64_t want, gbc_reply_t *got, bool *found, size_t max)
{
    void *sock = c->eps[i].sock;
    for (size_t n = 0; n < max; n++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno();
            zmq_msg_close(&m);
            if (e == EAGAIN || e == EINTR)
                return GBC_OK;
            return zfail(GBC_ERR_IO, "receive", c->eps[i].addr);
        }
        bool more = zmq_msg_more(&m);
        gbc_err err = GBC_OK;
        if (!more)
            err = handle_frame(c, i, zmq_msg_data(&m), zmq_msg_size(&m), want, got, found);
        else
            c->bad_frames++; /* the wire has one-part messages only */
        while (more && zmq_msg_recv(&m, sock, 0) >= 0)
            more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        if (err)
            return gbci_fail(err, "%s: receiving a reply: %s", c->eps[i].addr,
                             gbc_strerror(err));
        if (*found)
            return GBC_OK;
    }
    return GBC_OK;
}

static long poll_ms(int64_t deadline)
{
    if (deadline == INT64_MAX)
        return -1;
    int64_t left = deadline - gbci_now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (long)ms;
}

/* One try at sending endpoint i's queued batch, not waiting: 1 sent, 0 no
 * room or no connection (it stays queued), -1 a ZeroMQ failure. */
static int try_send(gbc_client_t *c, size_t i)
{
    gbci_endpoint_t *ep = &c->eps[i];
    /* An ended connection is noted before sending: what goes out now may
     * travel on a new one, so it must not count as lost with the old. An
     * empty read of the monitor is a system call, so a sender of many
     * frames reads it at most every GBCI_MON_EVERY_NS: a new connection
     * takes far longer to come (GBCI_RECONNECT_IVL_MS at least),
     * and a request sent in that gap that is counted lost gets the lost
     * error, whose text says it may have been processed. */
    if (gbci_now_ns() - ep->mon_read_ns >= GBCI_MON_EVERY_NS)
        gbci_monitor_drain(ep);
    if (ep->ended) /* a fresh socket, not connected yet */
        return endpoint_renew(c, i) == GBC_OK ? 0 : -1;
    const uint8_t *data;
    size_t len;
    gbci_batch_frame(&ep->batch, &data, &len);
    if (zmq_send(ep->sock, data, len, ZMQ_DONTWAIT) >= 0) {
        ep->sent_upto = ep->batch.last_id;
        gbci_batch_truncate(&ep->batch, 0, 0);
        return 1;
    }
    return zmq_errno() == EAGAIN || zmq_errno() == EINTR ? 0 : -1;
}

/* Waits for input on every endpoint and its monitor, room on endpoint
 * `out_ep` (when it is < n) and on every other endpoint with a queued batch,
 * until deadline; then sends those batches that have room and drains what
 * came in. So a bridge that is down or full delays only its own requests,
 * and a connection that ends wakes the caller. */
static gbc_err wait_and_drain(gbc_client_t *c, int64_t deadline, size_t out_ep,
                              uint64_t want, gbc_reply_t *got, bool *found, bool *writable)
{
    for (size_t i = 0; i < c->n; i++) {
        bool out = i == out_ep || c->eps[i].batch.count > 0;
        c->items[i] = (zmq_pollitem_t){c->eps[i].sock, 0, (short)(ZMQ_POLLIN | (out ? ZMQ_POLLOUT : 0)), 0};
        c->items[c->n + i] = (zmq_pollitem_t){c->eps[i].mon, 0, ZMQ_POLLIN, 0};
    }
    if (zmq_poll(c->items, (int)(2 * c->n), poll_ms(deadline)) < 0) {
        if (zmq_errno() == EINTR)
            return GBC_OK;
        return gbci_fail(GBC_ERR_IO, "zmq_poll: %s", zmq_strerror(zmq_errno()));
    }
    for (size_t i = 0; i < c->n; i++) {
        if (i == out_ep && (c->items[i].revents & ZMQ_POLLOUT))
            *writable = true;
        else if ((c->items[i].revents & ZMQ_POLLOUT) && c->eps[i].batch.count > 0 && try_send(c, i) < 0)
            return zfail(GBC_ERR_IO, "send", c->eps[i].addr);
        /* A connection that ended: the replies it brought are read first. */
        if (c->items[c->n + i].revents & ZMQ_POLLIN) {
            gbci_monitor_drain(&c->eps[i]);
            if (c->eps[i].lost_new)
                c->items[i].revents |= ZMQ_POLLIN;
        }
        if (c->items[i].revents & ZMQ_POLLIN) {
            gbc_err err = drain(c, i, want, got, found, GBCI_DRAIN_MAX);
            if (err || *found)
                return err;
        }
    }
    return GBC_OK;
}

gbc_err gbci_flush_ep(gbc_client_t *c, size_t i, int64_t deadline)
{
    gbci_endpoint_t *ep = &c->eps[i];
    if (ep->batch.count == 0)
        return GBC_OK;
    for (;;) {
        int sent = try_send(c, i);
        if (sent > 0)
            return GBC_OK;
        if (sent < 0)
            return zfail(GBC_ERR_IO, "send", ep->addr);
        if (gbci_now_ns() >= deadline)
            return gbci_send_failure(c, i);
        /* No room (or no connection yet): read replies while waiting, so a
         * bridge blocked on sending to us can make progress. */
        bool found = false, writable = false;
        gbc_err err = wait_and_drain(c, deadline, i, 0, NULL, &found, &writable);
        if (err)
            return err;
    }
}

gbc_err gbci_drain_ep(gbc_client_t *c, size_t i)
{
    bool found = false;
    return drain(c, i, 0, NULL, &found, SIZE_MAX); /* its connection ended: read all */
}

/* Whether the pump should stop for requests lost with their connection. */
static bool lost(const gbc_client_t *c, uint64_t want, size_t want_ep)
{
    if (want)
        return want_ep < c->n && c->eps[want_ep].lost_upto >= want;
    for (size_t i = 0; i < c->n; i++)
        if (c->eps[i].lost_new)
            return true;
    return false;
}

bool gbci_pump(gbc_client_t *c, int64_t deadline, uint64_t want, size_t want_ep,
               gbc_reply_t *got, gbc_err *err)
{
    bool found = false;
    *err = GBC_OK;
    c->want_ep = want ? want_ep : SIZE_MAX;
    for (size_t i = 0; i < c->n; i++) {
        if ((*err = drain(c, i, want, got, &found, GBCI_DRAIN_MAX)) != GBC_OK)
            return false;
        if (found)
            return true;
    }
    for (;;) {
        if (!want && c->ready.n)
            return true;
        if (gbci_now_ns() >= deadline)
            return false;
        for (size_t i = 0; i < c->n; i++)
            gbci_monitor_drain(&c->eps[i]);
        if (lost(c, want, want_ep)) {
            /* Its reply may have come just before the connection ended. */
            if (want && (*err = drain(c, want_ep, want, got, &found, SIZE_MAX)) == GBC_OK && found)
                return true;
            return false;
        }
        bool writable = false;
        if ((*err = wait_and_drain(c, deadline, SIZE_MAX, want, got, &found, &writable)))
            return false;
        if (found)
            return true;
    }
}
