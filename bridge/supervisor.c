/* The supervisor (`gpubridge --supervise`): keeps the public ZeroMQ socket in
 * a process that never touches CUDA, and runs the GPU side in a worker
 * process it restarts when it dies.
 *
 * Why a process: a sticky CUDA error (an illegal address, 700) poisons the
 * CUDA context for the rest of the process; only a fresh process gets a fresh
 * context. So the worker is this same program, bound to a private ipc
 * endpoint; it exits with GB_EXIT_GPU_FAILED once a kernel failed (after
 * answering what it can), and a crash or a kill ends it too.
 *
 * The front proxies frames unchanged: one DEALER per client towards the
 * worker, with the client's routing id as its own, so the worker sees each
 * client as itself. It decodes each ClientFrame only to note the correlation
 * ids that expect a reply, and each ServerFrame to strike them. When the
 * worker dies, whatever it had not answered is answered here with
 * STATUS_GPU_ERROR, the DEALERs are closed (their queued requests were just
 * answered), and a new worker starts; requests that arrive meanwhile wait in
 * fresh DEALERs and are served by the new worker. So every request gets
 * exactly one reply, and the service comes back by itself.
 *
 * Ownership: one thread; all state below lives in gbi_sup_t. */
#include "supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "gpubridge.pb-c.h"
#include "log.h"
#include "server_internal.h"

#define MAX_PEERS 1024
#define ID_MAX 256

typedef struct peer {
    uint8_t id[ID_MAX];
    size_t id_len;
    uint8_t delim;  /* the client frames with an empty delimiter (REQ style) */
    void *dealer;   /* towards the worker; NULL until the next request */
    uint64_t *ids;  /* correlation ids awaiting a reply (open addressing; 0 = empty, ~0 = deleted) */
    size_t cap, n, used;
} peer_t;

typedef struct gbi_sup {
    const gb_config_t *cfg;
    void *zctx, *router;
    char worker_ep[GB_PATH_LEN];
    pid_t worker;
    uint64_t started_ns, spawns;
    gb_server_t *curve; /* the CURVE/ZAP state (curve.c works on a gb_server_t) */
    peer_t *peers;
    size_t n_peers;
    char *const *worker_argv;
} gbi_sup_t;

/* ---- the pending-id set of a peer --------------------------------------- */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static int set_grow(peer_t *p)
{
    size_t nc = p->cap ? p->cap * 2 : 256;
    uint64_t *old = p->ids, oc = p->cap;
    p->ids = calloc(nc, sizeof *p->ids);
    if (!p->ids) {
        p->ids = old;
        return -1;
    }
    p->cap = nc;
    p->n = p->used = 0;
    for (size_t i = 0; i < oc; i++) {
        uint64_t v = old[i];
        if (v && v != ~0ull) {
            size_t j = mix(v) & (nc - 1);
            while (p->ids[j])
                j = (j + 1) & (nc - 1);
            p->ids[j] = v;
            p->n++;
            p->used++;
        }
    }
    free(old);
    return 0;
}

static void set_add(peer_t *p, uint64_t id)
{
    if (id == 0 || id == ~0ull)
        return; /* unanswerable ids: the worker answers them itself, if at all */
    if ((p->used + 1) * 2 > p->cap && set_grow(p) != 0)
        return;
    size_t j = mix(id) & (p->cap - 1);
    while (p->ids[j] && p->ids[j] != ~0ull) {
        if (p->ids[j] == id)
            return;
        j = (j + 1) & (p->cap - 1);
    }
    if (!p->ids[j])
        p->used++;
    p->ids[j] = id;
    p->n++;
}

static void set_del(peer_t *p, uint64_t id)
{
    if (!p->cap || id == 0)
        return;
    size_t j = mix(id) & (p->cap - 1);
    while (p->ids[j]) {
        if (p->ids[j] == id) {
            p->ids[j] = ~0ull;
            p->n--;
            return;
        }
        j = (j + 1) & (p->cap - 1);
    }
}

/* ---- frames -------------------------------------------------------------- */

static void note_requests(peer_t *p, const uint8_t *buf, size_t len)
{
    Gpubridge__ClientFrame *f = gpubridge__client_frame__unpack(NULL, len, buf);
    if (!f)
        return; /* the worker answers undecodable frames (correlation id 0) */
    Gpubridge__Envelope **envs = NULL;
    size_t n = 0;
    if (f->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE && f->envelope) {
        envs = &f->envelope;
        n = 1;
    } else if (f->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_BATCH && f->batch) {
        envs = f->batch->envelopes;
        n = f->batch->n_envelopes;
    }
    for (size_t i = 0; i < n; i++)
        if (envs[i] && envs[i]->kind != GPUBRIDGE__KIND__KIND_ONE_WAY)
            set_add(p, envs[i]->correlation_id);
    gpubridge__client_frame__free_unpacked(f, NULL);
}

static void note_replies(peer_t *p, const uint8_t *buf, size_t len)
{
    Gpubridge__ServerFrame *f = gpubridge__server_frame__unpack(NULL, len, buf);
    if (!f)
        return;
    if (f->body_case == GPUBRIDGE__SERVER_FRAME__BODY_REPLY && f->reply)
        set_del(p, f->reply->correlation_id);
    else if (f->body_case == GPUBRIDGE__SERVER_FRAME__BODY_BATCH && f->batch)
        for (size_t i = 0; i < f->batch->n_replies; i++)
            if (f->batch->replies[i])
                set_del(p, f->batch->replies[i]->correlation_id);
    gpubridge__server_frame__free_unpacked(f, NULL);
}

/* Sends [id][delim?][payload] on the ROUTER; a vanished client is skipped. */
static void to_client(gbi_sup_t *s, const peer_t *p, const void *buf, size_t len)
{
    if (zmq_send(s->router, p->id, p->id_len, ZMQ_SNDMORE) < 0)
        return;
    if (p->delim)
        zmq_send(s->router, "", 0, ZMQ_SNDMORE);
    zmq_send(s->router, buf, len, 0);
}

/* Answers every id p still waits for with STATUS_GPU_ERROR. */
static size_t answer_pending(gbi_sup_t *s, peer_t *p, const char *why)
{
    size_t done = 0;
    while (p->n > 0) {
        enum { CHUNK = 256 };
        Gpubridge__Reply rs[CHUNK], *rp[CHUNK];
        size_t k = 0;
        for (size_t j = 0; j < p->cap && k < CHUNK; j++) {
            uint64_t v = p->ids[j];
            if (!v || v == ~0ull)
                continue;
            gpubridge__reply__init(&rs[k]);
            rs[k].correlation_id = v;
            rs[k].status = GPUBRIDGE__STATUS__STATUS_GPU_ERROR;
            rs[k].error = (char *)why;
            rp[k] = &rs[k];
            p->ids[j] = ~0ull;
            p->n--;
            k++;
        }
        Gpubridge__ReplyBatch b = GPUBRIDGE__REPLY_BATCH__INIT;
        b.n_replies = k;
        b.replies = rp;
        Gpubridge__ServerFrame f = GPUBRIDGE__SERVER_FRAME__INIT;
        f.body_case = GPUBRIDGE__SERVER_FRAME__BODY_BATCH;
        f.batch = &b;
        size_t len = gpubridge__server_frame__get_packed_size(&f);
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
            break;
        gpubridge__server_frame__pack(&f, buf);
        to_client(s, p, buf, len);
        free(buf);
        done += k;
    }
    return done;
}

/* ---- the worker ------------------------------------------------------------ */

static int spawn_worker(gbi_sup_t *s)
{
    pid_t pid = fork();
    if (pid < 0) {
        GB_ERROR("supervisor: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setenv("GPUBRIDGE_WORKER_ENDPOINT", s->worker_ep, 1);
        execv("/proc/self/exe", s->worker_argv);
        _exit(127);
    }
    s->worker = pid;
    s->started_ns = gb_now_ns();
    s->spawns++;
    GB_INFO("supervisor: worker %d started (endpoint %s)", (int)pid, s->worker_ep);
    return 0;
}

static peer_t *peer_of(gbi_sup_t *s, const uint8_t *id, size_t len)
{
    for (size_t i = 0; i < s->n_peers; i++)
        if (s->peers[i].id_len == len && memcmp(s->peers[i].id, id, len) == 0)
            return &s->peers[i];
    if (s->n_peers == MAX_PEERS || len > ID_MAX)
        return NULL;
    peer_t *p = &s->peers[s->n_peers++];
    memset(p, 0, sizeof *p);
    memcpy(p->id, id, len);
    p->id_len = len;
    return p;
}

static void *dealer_of(gbi_sup_t *s, peer_t *p)
{
    if (p->dealer)
        return p->dealer;
    void *d = zmq_socket(s->zctx, ZMQ_DEALER);
    int linger = 0, hwm = 0;
    if (!d)
        return NULL;
    zmq_setsockopt(d, ZMQ_ROUTING_ID, p->id, p->id_len);
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(d, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (zmq_connect(d, s->worker_ep) != 0) {
        zmq_close(d);
        return NULL;
    }
    p->dealer = d;
    return d;
}

/* Forwards everything the worker already sent, then answers the rest. */
static void worker_gone(gbi_sup_t *s, int status)
{
    char why[200];
    if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "the GPU worker was killed by signal %d; the request was not processed, retry it",
                 WTERMSIG(status));
    else
        snprintf(why, sizeof why, "the GPU worker stopped (exit %d%s); the request was not processed, retry it",
                 WEXITSTATUS(status), WEXITSTATUS(status) == GB_EXIT_GPU_FAILED ? ": a CUDA error" : "");
    size_t answered = 0;
    for (size_t i = 0; i < s->n_peers; i++) {
        peer_t *p = &s->peers[i];
        if (!p->dealer)
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        while (zmq_msg_recv(&m, p->dealer, ZMQ_DONTWAIT) >= 0) {
            if (zmq_msg_size(&m) > 0) { /* skip a delimiter */
                note_replies(p, zmq_msg_data(&m), zmq_msg_size(&m));
                to_client(s, p, zmq_msg_data(&m), zmq_msg_size(&m));
            }
        }
        zmq_msg_close(&m);
        answered += answer_pending(s, p, why);
        zmq_close(p->dealer);
        p->dealer = NULL;
    }
    s->worker = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        GB_INFO("supervisor: the worker exited cleanly (%zu request(s) left unanswered, now answered)", answered);
    else
        GB_WARN("supervisor: %s; answered %zu waiting request(s) with STATUS_GPU_ERROR; restarting it", why,
                answered);
}

gb_err gb_supervise(const gb_config_t *cfg, char *const *worker_argv, volatile sig_atomic_t *stop)
{
    gbi_sup_t s;
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.worker_argv = worker_argv;
    s.peers = calloc(MAX_PEERS, sizeof *s.peers);
    snprintf(s.worker_ep, sizeof s.worker_ep, "ipc:///tmp/gpubridge-worker-%d.sock", (int)getpid());
    s.zctx = zmq_ctx_new();
    s.router = s.zctx ? zmq_socket(s.zctx, ZMQ_ROUTER) : NULL;
    if (!s.peers || !s.router) {
        GB_ERROR("supervisor: cannot create its socket");
        return GB_ERR_IO;
    }
    int linger = 1000, hwm = 0, mandatory = 0;
    int64_t hard = (int64_t)cfg->max_message_size + 4096;
    zmq_setsockopt(s.router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s.router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s.router, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s.router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    zmq_setsockopt(s.router, ZMQ_MAXMSGSIZE, &hard, sizeof hard);
    if (cfg->curve.enabled) {
        char err[512];
        s.curve = calloc(1, sizeof *s.curve);
        if (!s.curve)
            return GB_ERR_NOMEM;
        s.curve->cfg = cfg;
        s.curve->zctx = s.zctx;
        s.curve->sock = s.router;
        if (gbi_curve_setup(s.curve, err, sizeof err) != GB_OK) {
            GB_ERROR("supervisor: %s", err);
            return GB_ERR_CONFIG;
        }
    }
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        if (zmq_bind(s.router, cfg->endpoints[i]) != 0) {
            GB_ERROR("supervisor: cannot bind %s: %s", cfg->endpoints[i], zmq_strerror(zmq_errno()));
            zmq_close(s.router);
            zmq_ctx_term(s.zctx);
            return GB_ERR_IO;
        }
    }
    GB_INFO("supervisor: serving %zu endpoint(s); the GPU side runs in a worker process it restarts", cfg->n_endpoints);
    if (spawn_worker(&s) != 0)
        return GB_ERR_IO;

    uint64_t next_spawn = 0, stop_sent = 0;
    int backoff_ms = 0;
    zmq_pollitem_t *items = calloc(MAX_PEERS + 1, sizeof *items);
    peer_t **owner = calloc(MAX_PEERS + 1, sizeof *owner);
    gb_err result = GB_OK;
    for (;;) {
        /* The worker's fate. */
        int status;
        if (s.worker > 0 && waitpid(s.worker, &status, WNOHANG) == s.worker) {
            bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (*stop || (clean && stop_sent)) {
                worker_gone(&s, status);
                if (!clean)
                    result = GB_ERR_STATE;
                break;
            }
            worker_gone(&s, status);
            /* quick restarts, slower when it keeps dying young */
            uint64_t lived_ms = (gb_now_ns() - s.started_ns) / 1000000;
            backoff_ms = lived_ms > 10000 ? 0 : (backoff_ms ? backoff_ms * 2 : 200);
            if (backoff_ms > 5000)
                backoff_ms = 5000;
            next_spawn = gb_now_ns() + (uint64_t)backoff_ms * 1000000;
        }
        if (s.worker == 0 && !*stop && gb_now_ns() >= next_spawn && spawn_worker(&s) != 0)
            next_spawn = gb_now_ns() + 1000000000ull;
        if (*stop && !stop_sent) {
            GB_INFO("supervisor: stopping; the worker drains and answers what is in flight");
            if (s.worker > 0)
                kill(s.worker, SIGTERM);
            stop_sent = 1;
            if (s.worker == 0)
                break;
        }

        size_t n = 0;
        items[n].socket = s.router;
        items[n].events = ZMQ_POLLIN;
        owner[n++] = NULL;
        for (size_t i = 0; i < s.n_peers; i++) {
            if (!s.peers[i].dealer)
                continue;
            items[n].socket = s.peers[i].dealer;
            items[n].events = ZMQ_POLLIN;
            owner[n++] = &s.peers[i];
        }
        if (zmq_poll(items, (int)n, 50) < 0 && zmq_errno() != EINTR)
            break;
        if (items[0].revents & ZMQ_POLLIN) {
            /* One client frame: [id][delim?][payload]. */
            for (int k = 0; k < 256; k++) {
                zmq_msg_t idm, m;
                zmq_msg_init(&idm);
                if (zmq_msg_recv(&idm, s.router, ZMQ_DONTWAIT) < 0) {
                    zmq_msg_close(&idm);
                    break;
                }
                peer_t *p = peer_of(&s, zmq_msg_data(&idm), zmq_msg_size(&idm));
                zmq_msg_close(&idm);
                zmq_msg_init(&m);
                zmq_msg_recv(&m, s.router, 0);
                uint8_t delim = 0;
                if (zmq_msg_size(&m) == 0 && zmq_msg_more(&m)) {
                    delim = 1;
                    zmq_msg_close(&m);
                    zmq_msg_init(&m);
                    zmq_msg_recv(&m, s.router, 0);
                }
                while (zmq_msg_more(&m)) { /* extra parts: the worker never takes them; drop */
                    zmq_msg_close(&m);
                    zmq_msg_init(&m);
                    zmq_msg_recv(&m, s.router, 0);
                }
                void *d = p ? dealer_of(&s, p) : NULL;
                if (d) {
                    p->delim = delim;
                    note_requests(p, zmq_msg_data(&m), zmq_msg_size(&m));
                    if (delim)
                        zmq_send(d, "", 0, ZMQ_SNDMORE);
                    zmq_msg_send(&m, d, 0);
                }
                zmq_msg_close(&m);
            }
        }
        for (size_t i = 1; i < n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            peer_t *p = owner[i];
            zmq_msg_t m;
            zmq_msg_init(&m);
            for (int k = 0; k < 1024 && zmq_msg_recv(&m, p->dealer, ZMQ_DONTWAIT) >= 0; k++) {
                if (zmq_msg_size(&m) == 0 && zmq_msg_more(&m))
                    continue; /* the delimiter: to_client adds it back */
                note_replies(p, zmq_msg_data(&m), zmq_msg_size(&m));
                to_client(&s, p, zmq_msg_data(&m), zmq_msg_size(&m));
            }
            zmq_msg_close(&m);
        }
    }
    GB_INFO("supervisor: bye (%llu restart(s) of the worker)", (unsigned long long)(s.spawns ? s.spawns - 1 : 0));
    for (size_t i = 0; i < s.n_peers; i++) {
        if (s.peers[i].dealer)
            zmq_close(s.peers[i].dealer);
        free(s.peers[i].ids);
    }
    free(items);
    free(owner);
    free(s.peers);
    zmq_close(s.router);
    if (s.curve) {
        gbi_curve_stop(s.curve);
        free(s.curve);
    }
    zmq_ctx_term(s.zctx);
    return result;
}
