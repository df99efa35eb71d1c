/* See connwatch.h. */
#include "connwatch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

#define FD_MAX (1 << 22) /* descriptors above this are not tracked */

int gb_connwatch_start(gb_connwatch_t *w, void *zctx, void *router,
                       void (*closed)(void *ctx, const uint8_t *id, size_t id_len), void *ctx)
{
    char ep[64];
    memset(w, 0, sizeof *w);
    snprintf(ep, sizeof ep, "inproc://gb-connwatch-%p", router);
    if (zmq_socket_monitor(router, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
        return -1;
    void *m = zmq_socket(zctx, ZMQ_PAIR);
    /* No high-water mark: ZeroMQ's I/O thread would block on a full monitor
     * pipe, and events are few (one per closed connection), read each turn. */
    int none = 0, linger = 0;
    if (!m || zmq_setsockopt(m, ZMQ_RCVHWM, &none, sizeof none) != 0 ||
        zmq_setsockopt(m, ZMQ_LINGER, &linger, sizeof linger) != 0 || zmq_connect(m, ep) != 0) {
        const int e = zmq_errno();
        if (m)
            zmq_close(m);
        zmq_socket_monitor(router, NULL, 0);
        errno = e;
        return -1;
    }
    w->router = router;
    w->mon = m;
    w->closed = closed;
    w->ctx = ctx;
    return 0;
}

/* by_fd's mark of a descriptor whose connection closed before any frame of
 * it was read: the first frame read from it later names the client. */
static uint8_t g_closed_mark;
#define CLOSED (&g_closed_mark)

static void forget(gb_connwatch_t *w, int fd)
{
    if (fd >= 0 && (size_t)fd < w->n_fd) {
        if (w->by_fd[fd] != CLOSED)
            free(w->by_fd[fd]);
        w->by_fd[fd] = NULL;
    }
}

/* Room in by_fd for fd; 0, or -1 out of memory. */
static int grow(gb_connwatch_t *w, int fd)
{
    if ((size_t)fd < w->n_fd)
        return 0;
    size_t n = w->n_fd ? w->n_fd : 64;
    while (n <= (size_t)fd)
        n *= 2;
    uint8_t **t = realloc(w->by_fd, n * sizeof *t);
    if (!t)
        return -1;
    memset(t + w->n_fd, 0, (n - w->n_fd) * sizeof *t);
    w->by_fd = t;
    w->n_fd = n;
    return 0;
}

int gb_connwatch_poll(gb_connwatch_t *w)
{
    int n = 0;
    if (!w->mon)
        return 0;
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, w->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return n;
        }
        /* [event: u16][value: u32], then the endpoint (ZeroMQ 4.x). */
        uint16_t event = 0;
        int32_t fd = -1;
        if (zmq_msg_size(&ev) == 6) {
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&fd, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
        }
        const int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, w->mon, 0);
            zmq_msg_close(&addr);
        }
        if (event == ZMQ_EVENT_ACCEPTED) {
            /* A new connection: a name left on its descriptor is stale (a
             * frame of the one before, read after its close was handled). */
            forget(w, fd);
            continue;
        }
        if (event != ZMQ_EVENT_DISCONNECTED || fd < 0 || fd >= FD_MAX)
            continue;
        if ((size_t)fd >= w->n_fd || !w->by_fd[fd] || w->by_fd[fd] == CLOSED) {
            /* No frame of it read yet (the loop may not have read its
             * burst): its first one read later names the client. */
            if (grow(w, fd) == 0)
                w->by_fd[fd] = CLOSED;
            continue;
        }
        uint8_t *e = w->by_fd[fd];
        w->by_fd[fd] = NULL;
        w->closed(w->ctx, e + 1, e[0]);
        free(e);
        n++;
    }
}

void gb_connwatch_seen(gb_connwatch_t *w, zmq_msg_t *part, const uint8_t *id, size_t id_len)
{
    if (!w->mon || id_len > 255)
        return;
    const int fd = zmq_msg_get(part, ZMQ_SRCFD);
    if (fd < 0 || fd >= FD_MAX)
        return;
    if ((size_t)fd < w->n_fd && w->by_fd[fd] && w->by_fd[fd] != CLOSED && w->by_fd[fd][0] == id_len &&
        memcmp(w->by_fd[fd] + 1, id, id_len) == 0)
        return;
    /* A new connection on fd: the close of the one before it (whose
     * descriptor this reuses) was reported before this frame came, so it
     * is handled first, against the client it belonged to. */
    gb_connwatch_poll(w);
    if (grow(w, fd) != 0)
        return;
    if (w->by_fd[fd] == CLOSED) {
        /* Its connection closed before this frame, read late, could name
         * it; no ACCEPTED came since, so the frame is that connection's. */
        w->by_fd[fd] = NULL;
        w->closed(w->ctx, id, id_len);
        return;
    }
    forget(w, fd);
    uint8_t *e = malloc(1 + id_len);
    if (!e)
        return;
    e[0] = (uint8_t)id_len;
    memcpy(e + 1, id, id_len);
    w->by_fd[fd] = e;
}

void gb_connwatch_stop(gb_connwatch_t *w)
{
    for (size_t i = 0; i < w->n_fd; i++)
        if (w->by_fd[i] != CLOSED)
            free(w->by_fd[i]);
    free(w->by_fd);
    if (w->mon) {
        zmq_socket_monitor(w->router, NULL, 0); /* before its reader goes */
        zmq_close(w->mon);
    }
    memset(w, 0, sizeof *w);
}

void gb_connwatch_id_hex(const uint8_t *id, size_t id_len, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "0x");
    for (size_t i = 0; i < id_len && i < 32 && o + 3 < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%02x", id[i]);
    if (id_len > 32 && o + 4 < len)
        snprintf(buf + o, len - o, "...");
}

void gb_connwatch_log_closed(const char *who, const uint8_t *id, size_t id_len, uint64_t pending, uint64_t kept,
                             long long cap, uint64_t *last_ns, uint64_t *unlogged)
{
    (*unlogged)++;
    const uint64_t now = gb_now_ns();
    if (now - *last_ns < 1000000000ull)
        return;
    char hex[80];
    gb_connwatch_id_hex(id, id_len, hex, sizeof hex);
    GB_WARN("%sclient %s: its connection closed with %llu reply(ies) owed (%llu request(s) not yet answered, %llu "
            "reply(ies) waiting to be sent), discarded unless it connects again with the same routing id; ZeroMQ "
            "closes the connection of a client that sends a frame over %lld bytes (max(64 MiB, 4 x "
            "max_message_size)), and a client or the network may close one (%llu such connection(s) since the "
            "last report)",
            who, hex, (unsigned long long)(pending + kept), (unsigned long long)pending, (unsigned long long)kept, cap,
            (unsigned long long)*unlogged);
    *last_ns = now;
    *unlogged = 0;
}
