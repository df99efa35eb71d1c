/* Several I/O threads (io_threads > 1; docs/design.md, "I/O threads").
 *
 * The front, the thread that runs gb_server_run, owns the ROUTER socket and
 * what the bridge keeps per client for sending: unsent reply frames, the
 * refusals owed to clients that left replies unread, the supervisor's tags.
 * It reads each frame, makes the checks that need no decoding (a client past
 * its bound, a frame too large), and hands the frame over an inproc pair to
 * the shard its routing id hashes to: all frames of one client go to one
 * shard, in order. A shard decodes the frame, feeds the rings, drains the
 * rings it owns (ring i: shard i % n), encodes the replies and sends them to
 * the front, which sends them on or keeps them for a slow client.
 *
 * Rings are shared by the shards: every producer-side ring call of a shard
 * on ring i is made holding ring_locks[i] (gbi_ring_take), so each ring
 * keeps one producer at a time. Only the owner drains a ring, so the replies
 * of one ring leave in ring order through one pair; it needs the lock only
 * where peeking acts for the producer too (drain_owned, server.c). */
#include "server_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "links.h"
#include "log.h"
#include "server_metrics.h"

#define IO_PAIR_HWM 64 /* frames queued towards a shard: past it the front waits for the shard */

static uint64_t now_ms(void) { return gb_now_ns() / 1000000ull; }

void gbi_totals(gb_server_t *s, size_t ring, gbi_totals_t *t)
{
    gb_server_t *root = s->front ? s->front : s;
    memset(t, 0, sizeof *t);
    for (int k = -1; k < root->n_io; k++) {
        gb_server_t *x = k < 0 ? root : root->shards[k];
        t->frames_in += GBI_LOAD(x->frames_in);
        t->frames_too_large += GBI_LOAD(x->frames_too_large);
        t->requests_busy += GBI_LOAD(x->requests_busy);
        t->frames_refused_unread += GBI_LOAD(x->frames_refused_unread);
        t->conns_dropped += GBI_LOAD(x->conns_dropped);
        t->replies_undelivered += GBI_LOAD(x->replies_undelivered);
        t->requests += GBI_LOAD(x->requests);
        t->replies += GBI_LOAD(x->replies);
        t->error_replies += GBI_LOAD(x->error_replies);
        t->held_bytes += GBI_LOAD(x->held_bytes);
        t->out_mem += GBI_LOAD(x->out_mem);
        t->mail_bytes += GBI_LOAD(x->mail_bytes);
        const gbi_ring_t *r = &x->rings[ring];
        t->mail_sent += GBI_LOAD(r->mail_sent);
        t->mail_forwarded += GBI_LOAD(r->mail_forwarded);
        t->mail_held += GBI_LOAD(r->mail_held);
        t->mail_undeliverable += GBI_LOAD(r->mail_undeliverable);
    }
    uint64_t taken, refused; /* forwards by device links, and those answered undeliverable on the device */
    gb_links_counts(root->engine->links, ring, &taken, &refused);
    t->mail_linked = taken;
    t->mail_forwarded += taken;
    t->mail_undeliverable += refused;
}

/* [id][delim, admin, refusing][frame]: the frame's message moves, uncopied. */
void gbi_io_forward(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, void *body)
{
    int k = (int)(gbi_id_hash(id, id_len) % (uint32_t)s->n_shards);
    uint8_t meta[3] = {delim, (uint8_t)s->peer_admin, (uint8_t)s->shutting_down};
    /* The pair may be full: the front waits for the shard, and a signal
     * (SIGTERM, SIGHUP) may cut the wait short, so each part is retried. */
    while (zmq_send(s->pairs[k], id, id_len, ZMQ_SNDMORE) < 0 && errno == EINTR)
        ;
    while (zmq_send(s->pairs[k], meta, sizeof meta, ZMQ_SNDMORE) < 0 && errno == EINTR)
        ;
    while (zmq_msg_send(body, s->pairs[k], 0) < 0)
        if (errno != EINTR) {
            GB_ERROR("cannot hand a frame to I/O thread %d: %s", k, zmq_strerror(errno));
            return;
        }
    s->forwarded[k]++;
}

void gbi_io_ring_bell(gb_server_t *s, size_t i)
{
    gb_server_t *owner = s->front->shards[i % (size_t)s->front->n_io];
    /* Pairs with the owner's store of `sleeping` before it looks at its
     * rings: either it sees the request published, or this sees it asleep. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&owner->sleeping, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        if (write(owner->bell, &one, sizeof one) < 0) { /* full counter: it is woken already */
        }
    }
}

void gbi_io_room_bell(gb_server_t *s)
{
    gb_server_t *f = s->front;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int k = 0; k < f->n_io; k++) {
        gb_server_t *o = f->shards[k];
        if (o != s && __atomic_load_n(&o->sleeping, __ATOMIC_SEQ_CST) &&
            __atomic_load_n(&o->wants_room, __ATOMIC_RELAXED)) {
            uint64_t one = 1;
            if (write(o->bell, &one, sizeof one) < 0) { /* full counter: it is woken already */
            }
        }
    }
}

/* A shard: one frame from its front, if there is one. */
static int shard_read(gb_server_t *s)
{
    zmq_msg_t id, meta, body;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, s->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return 0;
    }
    zmq_msg_init(&meta);
    zmq_msg_init(&body);
    zmq_msg_recv(&meta, s->sock, 0);
    zmq_msg_recv(&body, s->sock, 0);
    const uint8_t *m = zmq_msg_data(&meta);
    /* Before the count that tells the front the frame is handled: a front
     * that sees the count sees this pass as not quiet. */
    __atomic_store_n(&s->quiet, 0, __ATOMIC_RELEASE);
    if (zmq_msg_size(&meta) == 3) {
        s->peer_admin = m[1];
        gbi_decode_feed(s, zmq_msg_data(&id), (uint8_t)zmq_msg_size(&id), m[0], zmq_msg_data(&body),
                        zmq_msg_size(&body), m[2]);
    }
    __atomic_store_n(&s->taken, s->taken + 1, __ATOMIC_RELEASE);
    zmq_msg_close(&body);
    zmq_msg_close(&meta);
    zmq_msg_close(&id);
    return 1;
}

/* A shard with nothing to do: spins briefly while its rings have requests
 * in flight, then sleeps on its pair and the notifying rings it owns. Frames
 * held for a ring it does not own wait for that ring's owner: it looks again
 * every millisecond. */
static void shard_wait(gb_server_t *s, int shutting, uint64_t *spin_until)
{
    uint64_t in_flight = 0;
    int must_poll = 0;
    for (size_t i = 0; i < s->engine->n_types; i++) {
        gb_rk_t *rk = s->rings[i].t ? s->rings[i].t->rk : NULL;
        if (!rk || !gbi_owns(s, i) || gb_rk_in_flight(rk) == 0)
            continue;
        in_flight++;
        if (gb_rk_notify_fd(rk) < 0)
            must_poll = 1;
    }
    uint64_t now_ns = gb_now_ns();
    if (in_flight && !*spin_until)
        *spin_until = now_ns + (must_poll ? 2000000ull : 50000ull);
    if (in_flight && now_ns < *spin_until) {
        sched_yield();
        return;
    }
    zmq_pollitem_t items[2 + GB_MAX_RINGS];
    size_t armed[GB_MAX_RINGS];
    int n_items = 0, n_armed = 0, ready = 0;
    items[n_items++] = (zmq_pollitem_t){s->sock, 0, ZMQ_POLLIN, 0};
    items[n_items++] = (zmq_pollitem_t){NULL, s->bell, ZMQ_POLLIN, 0};
    /* Other shards feed the rings this one drains: they ring its bell once
     * it says it sleeps, and a request published before that is seen below. */
    __atomic_store_n(&s->wants_room, s->held_bytes || s->mail_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&s->sleeping, 1, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (size_t i = 0; i < s->engine->n_types && !in_flight; i++) {
        gb_rk_t *rk = s->rings[i].t ? s->rings[i].t->rk : NULL;
        if (rk && gbi_owns(s, i) && gb_rk_in_flight(rk) > 0)
            ready = 1;
    }
    for (size_t i = 0; i < s->engine->n_types && in_flight; i++) {
        gbi_ring_t *r = &s->rings[i];
        gb_rk_t *rk = r->t ? r->t->rk : NULL;
        int fd = rk && gbi_owns(s, i) && gb_rk_in_flight(rk) > 0 ? gb_rk_notify_fd(rk) : -1;
        if (fd < 0)
            continue;
        gbi_ring_take(s, r);
        gb_rk_arm(rk, 1);
        armed[n_armed++] = i;
        items[n_items++] = (zmq_pollitem_t){NULL, fd, ZMQ_POLLIN, 0};
        ready |= gb_rk_peek(rk) != NULL; /* arrived before we armed */
    }
    gbi_publish_all(s); /* no ring lock held while asleep */
    int timeout = must_poll || shutting || s->held_bytes || s->mail_bytes ? 1 : 100;
    if (!ready && zmq_poll(items, n_items, timeout) < 0 && errno != EINTR)
        GB_ERROR("zmq_poll: %s", zmq_strerror(errno));
    __atomic_store_n(&s->sleeping, 0, __ATOMIC_SEQ_CST);
    uint64_t rung;
    if (read(s->bell, &rung, sizeof rung) < 0) { /* not rung: nothing to clear */
    }
    for (int a = 0; a < n_armed; a++) {
        gbi_ring_take(s, &s->rings[armed[a]]);
        gb_rk_arm(s->rings[armed[a]].t->rk, 0);
    }
    gbi_publish_all(s);
    if (must_poll)
        gbi_check_health(s); /* relaunch grain types move on here */
    *spin_until = 0;
}

static void *shard_main(void *arg)
{
    gb_server_t *s = arg, *f = s->front;
    uint64_t last_health = now_ms(), spin_until = 0;
    while (!__atomic_load_n(&f->io_stop, __ATOMIC_ACQUIRE)) {
        int progress = gbi_pump(s);
        for (int k = 0; k < 256 && shard_read(s); k++)
            progress++;
        gbi_flush(s);
        uint64_t now = now_ms();
        if (now - last_health >= 100) {
            gbi_check_health(s);
            last_health = now;
        }
        int shutting = __atomic_load_n(&f->io_shutting, __ATOMIC_ACQUIRE);
        int idle = !progress && !s->held_bytes && !s->mail_bytes;
        __atomic_store_n(&s->quiet, idle && shutting ? s->quiet + 1 : 0, __ATOMIC_RELEASE);
        if (progress) {
            spin_until = 0;
            continue;
        }
        shard_wait(s, shutting, &spin_until);
    }
    /* What still waits is answered: at the drain deadline, or a message a
     * last turn routed after the front found this shard quiet (each does
     * nothing when empty). */
    gbi_refuse_held(s);
    gbi_route_fini(s, 1);
    if (__atomic_load_n(&f->io_abort, __ATOMIC_ACQUIRE))
        while (shard_read(s)) /* and frames handed on but not yet read (refusing) */
            ;
    gbi_flush(s);
    return NULL;
}

/* Replies the shards sent: out to their clients, or kept. */
static int from_shards(gb_server_t *s)
{
    int n = 0;
    for (int k = 0; k < s->n_io; k++) {
        for (int j = 0; j < 256; j++) {
            zmq_msg_t id, delim, frame;
            zmq_msg_init(&id);
            if (zmq_msg_recv(&id, s->pairs[k], ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&id);
                break;
            }
            zmq_msg_init(&delim);
            zmq_msg_init(&frame);
            zmq_msg_recv(&delim, s->pairs[k], 0);
            zmq_msg_recv(&frame, s->pairs[k], 0);
            gbi_flush(s); /* the front's own replies first */
            gbi_deliver(s, zmq_msg_data(&id), (uint8_t)zmq_msg_size(&id), *(const uint8_t *)zmq_msg_data(&delim),
                        zmq_msg_data(&frame), zmq_msg_size(&frame), 1);
            gbi_out_note(s, zmq_msg_data(&id), (uint8_t)zmq_msg_size(&id), -(int64_t)zmq_msg_size(&frame));
            zmq_msg_close(&frame);
            zmq_msg_close(&delim);
            zmq_msg_close(&id);
            n++;
        }
    }
    return n;
}

/* The drain is done: every frame handed on was handled, each shard made two
 * passes in a row with nothing to do and nothing held, and no ring has a
 * request in flight. In this order: a shard's count of frames handled is
 * stored after it last reset its quiet passes. */
static int drained(gb_server_t *s)
{
    for (int k = 0; k < s->n_io; k++)
        if (__atomic_load_n(&s->shards[k]->taken, __ATOMIC_ACQUIRE) != s->forwarded[k] ||
            __atomic_load_n(&s->shards[k]->quiet, __ATOMIC_ACQUIRE) < 2)
            return 0;
    return gbi_total_in_flight(s) == 0;
}

static gb_server_t *shard_new(gb_server_t *s, int k, int n)
{
    gb_server_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->cfg = s->cfg;
    h->engine = s->engine;
    h->facts = s->facts;
    h->sel = s->sel;
    h->test_faults = s->test_faults;
    h->test_spin = s->test_spin;
    h->exit_on_gpu_failure = s->exit_on_gpu_failure;
    h->stats = s->stats;
    /* The bounds on held frames and messages between grains are split
     * between the shards; a client's share stays whole (it has one shard). */
    h->held_limit = s->held_limit / (size_t)n;
    h->client_limit = s->client_limit;
    h->mail_limit = s->mail_limit / (size_t)n;
    h->mail_hold_ns = s->mail_hold_ns;
    h->mail_max_hops = s->mail_max_hops;
    h->front = s;
    h->shard_idx = k;
    h->ring_locks = s->ring_locks;
    h->out_hash = s->out_hash;
    h->kept_hash = s->kept_hash;
    h->out_limit = s->out_limit; /* one total for all: the front keeps every client's unsent replies */
    for (size_t i = 0; i < s->engine->n_types; i++) {
        h->rings[i].t = s->rings[i].t;
        h->rings[i].pending = s->rings[i].pending;
    }
    h->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->bell < 0 || gbi_outbox_init(&h->out) != 0) {
        if (h->bell >= 0)
            close(h->bell);
        free(h);
        return NULL;
    }
    return h;
}

/* Makes the pairs and the shards and starts them. */
static gb_err io_start(gb_server_t *s, int n)
{
    if (!(s->ring_locks = calloc(GB_MAX_RINGS, sizeof *s->ring_locks)) ||
        !(s->out_hash = calloc(GBI_OUT_HASH, sizeof *s->out_hash)) ||
        !(s->kept_hash = calloc(GBI_OUT_HASH, sizeof *s->kept_hash)))
        return GB_ERR_NOMEM;
    for (int i = 0; i < GB_MAX_RINGS; i++)
        pthread_mutex_init(&s->ring_locks[i], NULL);
    if (s->stats)
        gbi_stats_share(s);
    for (int k = 0; k < n; k++) {
        char ep[96];
        int hwm = IO_PAIR_HWM, none = 0;
        snprintf(ep, sizeof ep, "inproc://gpubridge-io-%p-%d", (void *)s, k);
        gb_server_t *h = shard_new(s, k, n);
        if (!h)
            return GB_ERR_NOMEM;
        s->shards[k] = h;
        s->n_io = k + 1;
        s->pairs[k] = zmq_socket(s->zctx, ZMQ_PAIR);
        h->sock = zmq_socket(s->zctx, ZMQ_PAIR);
        if (!s->pairs[k] || !h->sock)
            return GB_ERR_IO;
        /* Towards a shard bounded (the front then waits: a shard never
         * waits on its front), back unbounded (replies never wait). */
        zmq_setsockopt(s->pairs[k], ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(s->pairs[k], ZMQ_RCVHWM, &none, sizeof none);
        zmq_setsockopt(h->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(h->sock, ZMQ_SNDHWM, &none, sizeof none);
        if (zmq_bind(s->pairs[k], ep) != 0 || zmq_connect(h->sock, ep) != 0)
            return GB_ERR_IO;
    }
    for (int k = 0; k < n; k++) {
        if (pthread_create(&s->shards[k]->thread, NULL, shard_main, s->shards[k]) != 0)
            return GB_ERR_NOMEM; /* those started are stopped by io_stop */
        s->shards[k]->running = 1;
        char name[16]; /* what top -H and /proc/PID/task/TID/comm show */
        snprintf(name, sizeof name, "gb-io-%u", (unsigned)k % 1000u);
        pthread_setname_np(s->shards[k]->thread, name);
    }
    s->n_shards = n;
    return GB_OK;
}

/* Stops and joins the shards, and takes their last replies. */
static void io_stop(gb_server_t *s, int abort)
{
    __atomic_store_n(&s->io_abort, abort, __ATOMIC_RELEASE);
    __atomic_store_n(&s->io_stop, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < s->n_io; k++)
        if (s->shards[k]->running) {
            pthread_join(s->shards[k]->thread, NULL);
            s->shards[k]->running = 0;
            if (s->shards[k]->gpu_failed)
                s->gpu_failed = 1;
        }
    s->n_shards = 0; /* frames read from now on are the front's to answer */
    while (from_shards(s))
        ;
}

static int any_gpu_failed(gb_server_t *s)
{
    for (int k = 0; k < s->n_io; k++)
        if (__atomic_load_n(&s->shards[k]->gpu_failed, __ATOMIC_RELAXED))
            return 1;
    return 0;
}

/* The front's periodic work: descriptors, SIGHUP, metrics. */
static void front_tick(gb_server_t *s)
{
    gb_fdguard_check(&s->fdg, gb_now_ns());
    if (s->reload_flag && *s->reload_flag) {
        *s->reload_flag = 0;
        s->reload_fn(s->reload_ctx, s);
    }
    if (s->stats)
        gbi_stats_publish(s);
}

gb_err gbi_io_run(gb_server_t *s, volatile sig_atomic_t *stop, int drain_ms)
{
    int n = (int)s->cfg->io_threads;
    gb_err e = io_start(s, n);
    if (e != GB_OK) {
        GB_ERROR("cannot start %d I/O threads: %s", n, gb_strerror(e));
        io_stop(s, 1);
        gbi_finish(s);
        return e;
    }
    GB_INFO("serving %zu endpoint(s); %zu grain type(s); %d I/O threads", s->cfg->n_endpoints, s->engine->n_names,
            n);
    uint64_t last_tick = now_ms(), deadline = 0;
    int abort = 0;
    for (;;) {
        /* An atomic read: a program may stop the server from another thread. */
        if ((__atomic_load_n(stop, __ATOMIC_RELAXED) || any_gpu_failed(s)) && !s->shutting_down) {
            gbi_log_drain(s, drain_ms, true);
            s->shutting_down = 1;
            __atomic_store_n(&s->io_shutting, 1, __ATOMIC_RELEASE);
            deadline = now_ms() + (uint64_t)drain_ms;
        }
        int progress = from_shards(s); /* replies first: a client's bound counts them */
        for (int k = 0; k < 256 && gbi_read_one(s); k++)
            progress++;
        progress += from_shards(s);
        gbi_flush(s);
        gb_connwatch_poll(&s->cw);
        if (s->n_clients)
            progress += gbi_send_backlog(s);
        uint64_t now = now_ms();
        if (now - last_tick >= 100) {
            front_tick(s);
            last_tick = now;
        }
        if (s->shutting_down) {
            if (drained(s))
                break;
            if (now > deadline) {
                gbi_log_drain(s, drain_ms, false);
                abort = 1;
                break;
            }
        }
        if (progress)
            continue;
        zmq_pollitem_t items[1 + GB_MAX_IO_THREADS];
        items[0] = (zmq_pollitem_t){s->sock, 0, ZMQ_POLLIN, 0};
        for (int k = 0; k < n; k++)
            items[1 + k] = (zmq_pollitem_t){s->pairs[k], 0, ZMQ_POLLIN, 0};
        /* Unsent replies: ZeroMQ says nothing when a client's queue has
         * room again, so look every millisecond; so too while draining. */
        int timeout = s->out_mem || s->shutting_down ? 1 : 100;
        if (zmq_poll(items, 1 + n, timeout) < 0 && errno != EINTR) {
            GB_ERROR("zmq_poll: %s", zmq_strerror(errno));
            abort = 1;
            break;
        }
    }
    io_stop(s, abort);
    gbi_finish(s);
    return s->gpu_failed ? GB_ERR_CUDA : GB_OK;
}

void gbi_io_destroy(gb_server_t *s)
{
    if (s->n_io)
        io_stop(s, 1); /* never ran to its end: answer what is held */
    for (int k = 0; k < s->n_io; k++) {
        gb_server_t *h = s->shards[k];
        gbi_route_fini(h, 0);
        for (size_t i = 0; i < GB_MAX_RINGS; i++)
            while (h->rings[i].held_head) {
                gbi_held_t *x = h->rings[i].held_head;
                h->rings[i].held_head = x->next;
                gbi_held_free(x);
            }
        if (h->sock)
            zmq_close(h->sock);
        if (s->pairs[k])
            zmq_close(s->pairs[k]);
        gbi_clients_fini(h);
        close(h->bell);
        gbi_outbox_fini(&h->out);
        gbi_frame_fini(&h->scratch);
        free(h);
        s->shards[k] = NULL;
        s->pairs[k] = NULL;
    }
    s->n_io = 0;
    if (s->ring_locks) {
        for (int i = 0; i < GB_MAX_RINGS; i++)
            pthread_mutex_destroy(&s->ring_locks[i]);
        free(s->ring_locks);
        s->ring_locks = NULL;
    }
    free(s->out_hash);
    s->out_hash = NULL;
    free(s->kept_hash);
    s->kept_hash = NULL;
}
