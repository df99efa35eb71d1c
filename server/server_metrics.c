/* Counting for the metrics endpoint, on the bridge thread: the counters
 * below are plain fields; with several I/O threads (server_io.c) every
 * hook takes the set's lock. The HTTP thread sees only the copies
 * gbi_stats_publish hands to gb_metrics_publish. */
#include "server_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "gpubridge/ring.h"

struct gbi_stats {
    gb_metrics_t *m;
    gb_metrics_snap_t live;
    uint64_t *t_fed[GB_MAX_RINGS]; /* when each ring position was fed (ns) */
    int shared;
    pthread_mutex_t lock;
};

static void stats_lock(gbi_stats_t *st)
{
    if (st->shared)
        pthread_mutex_lock(&st->lock);
}

static void stats_unlock(gbi_stats_t *st)
{
    if (st->shared)
        pthread_mutex_unlock(&st->lock);
}

void gbi_stats_share(gb_server_t *s)
{
    pthread_mutex_init(&s->stats->lock, NULL);
    s->stats->shared = 1;
}

gb_err gb_server_set_metrics(gb_server_t *s, gb_metrics_t *m)
{
    gbi_stats_t *st = calloc(1, sizeof *st);
    if (!st)
        return GB_ERR_NOMEM;
    st->m = m;
    st->live.mode = s->engine->mode;
    st->live.n_types = s->engine->n_types;
    for (size_t i = 0; i < s->engine->n_types; i++) {
        const gb_engine_type_t *t = &s->engine->types[i];
        snprintf(st->live.types[i].name, sizeof st->live.types[i].name, "%s", t->name);
        st->live.types[i].mode = s->engine->devs[t->dev].mode;
        st->live.types[i].labelled_dev = s->engine->n_devs > 1;
        st->live.types[i].dev = (int)t->dev;
        if (t->rk && !(st->t_fed[i] = calloc(gb_rk_capacity(t->rk), sizeof(uint64_t)))) {
            s->stats = st;
            gbi_stats_free(s);
            return GB_ERR_NOMEM;
        }
    }
    s->stats = st;
    gbi_stats_publish(s);
    return GB_OK;
}

void gbi_stats_free(gb_server_t *s)
{
    if (!s->stats)
        return;
    for (size_t i = 0; i < GB_MAX_RINGS; i++)
        free(s->stats->t_fed[i]);
    if (s->stats->shared)
        pthread_mutex_destroy(&s->stats->lock);
    free(s->stats);
    s->stats = NULL;
}

void gbi_stats_request(gb_server_t *s, const gbi_ring_t *r, uint64_t pos)
{
    size_t i = (size_t)(r - s->rings);
    uint64_t now = gb_now_ns();
    stats_lock(s->stats);
    s->stats->live.types[i].requests++;
    s->stats->t_fed[i][pos & (gb_rk_capacity(r->t->rk) - 1)] = now;
    stats_unlock(s->stats);
}

void gbi_stats_ring_reply(gb_server_t *s, const gbi_ring_t *r, uint64_t pos, int status,
                          unsigned msg_type)
{
    size_t i = (size_t)(r - s->rings);
    gb_metrics_type_t *t = &s->stats->live.types[i];
    uint64_t now = gb_now_ns();
    stats_lock(s->stats);
    uint64_t fed = s->stats->t_fed[i][pos & (gb_rk_capacity(r->t->rk) - 1)];
    t->replies++;
    if (status > 0 && status < GB_METRICS_N_STATUS)
        t->errors[status]++;
    if (status == 0 && msg_type == GB_MSG_DEACTIVATE_KEY)
        t->deactivations++;
    if (fed)
        gb_metrics_observe(t, now - fed);
    stats_unlock(s->stats);
}

void gbi_stats_reply(gb_server_t *s, int status, uint64_t n)
{
    if (status < 0 || status >= GB_METRICS_N_STATUS)
        return;
    stats_lock(s->stats);
    s->stats->live.replies[status] += n;
    stats_unlock(s->stats);
}

/* A ring's status, read under its lock when shards share it: before the
 * set's lock, which a shard takes while it holds a ring's. */
typedef struct ring_view {
    gb_rk_status_t rs;
    uint64_t in_flight;
    int active;
} ring_view_t;

void gbi_stats_publish(gb_server_t *s)
{
    gbi_stats_t *st = s->stats;
    ring_view_t v[GB_MAX_RINGS];
    for (size_t i = 0; i < st->live.n_types; i++) {
        const gbi_ring_t *r = &s->rings[i];
        if (!r->t || !r->t->rk)
            continue;
        if (s->ring_locks)
            pthread_mutex_lock(&s->ring_locks[i]);
        gb_rk_status(r->t->rk, &v[i].rs);
        v[i].in_flight = gb_rk_in_flight(r->t->rk);
        v[i].active = v[i].rs.state == GB_RK_RUNNING && gb_rk_is_active(r->t->rk);
        if (s->ring_locks)
            pthread_mutex_unlock(&s->ring_locks[i]);
    }
    gbi_totals_t tot;
    gbi_totals(s, 0, &tot);
    /* Held frames that no one ring holds (with several I/O threads, those
     * held in the shards; with one, a client's frames waiting behind its
     * held frame) count in the first type, so that the types' sum is
     * Telemetry's held_bytes. */
    uint64_t held_rest = tot.held_bytes;
    for (size_t i = 0; i < st->live.n_types; i++)
        for (const gbi_held_t *h = s->rings[i].held_head; h; h = h->next)
            held_rest -= held_rest >= h->bytes ? h->bytes : held_rest;
    stats_lock(st);
    st->live.frames = tot.frames_in;
    for (size_t i = 0; i < st->live.n_types; i++) {
        gb_metrics_type_t *t = &st->live.types[i];
        const gbi_ring_t *r = &s->rings[i];
        t->held_bytes = i == 0 ? held_rest : 0;
        for (const gbi_held_t *h = r->held_head; h; h = h->next)
            t->held_bytes += h->bytes;
        gbi_totals(s, i, &tot);
        t->mail_sent = tot.mail_sent;
        t->mail_forwarded = tot.mail_forwarded;
        t->mail_linked = tot.mail_linked;
        t->mail_held = tot.mail_held;
        t->mail_undeliverable = tot.mail_undeliverable;
        if (!r->t || !r->t->rk)
            continue;
        const gb_rk_status_t *rs = &v[i].rs;
        t->running = 1;
        t->mode = rs->mode;
        t->in_flight = v[i].in_flight;
        t->active = v[i].active;
        t->heartbeat = rs->heartbeat;
        t->launches = rs->launches;
        t->processed = rs->processed;
        t->activations = rs->activations;
        t->evicted = rs->evicted;
        t->evicted_bytes = rs->evicted_bytes;
        t->evicted_max_bytes = rs->evicted_max_bytes;
        t->evicted_max = rs->evicted_max;
        t->evictions = rs->evictions;
        t->restores = rs->restores;
    }
    gb_metrics_publish(st->m, &st->live);
    stats_unlock(st);
}

void gb_server_count_reload(gb_server_t *s, int ok)
{
    if (!s->stats)
        return;
    stats_lock(s->stats);
    if (ok)
        s->stats->live.reloads++;
    else
        s->stats->live.reload_failures++;
    stats_unlock(s->stats);
}
