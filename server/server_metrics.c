/* Counting for the metrics endpoint, on the bridge thread only: the counters
 * below are plain fields with one writer; the HTTP thread sees only the
 * copies gbi_stats_publish hands to gb_metrics_publish. */
#include "server_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "ring.h"

struct gbi_stats {
    gb_metrics_t *m;
    gb_metrics_snap_t live;
    uint64_t *t_fed[GB_MAX_GRAIN_TYPES]; /* when each ring position was fed (ns) */
};

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
        st->live.types[i].mode = s->engine->mode;
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
    for (size_t i = 0; i < GB_MAX_GRAIN_TYPES; i++)
        free(s->stats->t_fed[i]);
    free(s->stats);
    s->stats = NULL;
}

void gbi_stats_request(gb_server_t *s, const gbi_ring_t *r, uint64_t pos)
{
    size_t i = (size_t)(r - s->rings);
    s->stats->live.types[i].requests++;
    s->stats->t_fed[i][pos & (gb_rk_capacity(r->t->rk) - 1)] = gb_now_ns();
}

void gbi_stats_ring_reply(gb_server_t *s, const gbi_ring_t *r, uint64_t pos, int status,
                          unsigned msg_type)
{
    size_t i = (size_t)(r - s->rings);
    gb_metrics_type_t *t = &s->stats->live.types[i];
    uint64_t fed = s->stats->t_fed[i][pos & (gb_rk_capacity(r->t->rk) - 1)];
    t->replies++;
    if (status > 0 && status < GB_METRICS_N_STATUS)
        t->errors[status]++;
    if (status == 0 && msg_type == GB_MSG_DEACTIVATE_KEY)
        t->deactivations++;
    if (fed)
        gb_metrics_observe(t, gb_now_ns() - fed);
}

void gbi_stats_reply(gb_server_t *s, int status)
{
    if (status >= 0 && status < GB_METRICS_N_STATUS)
        s->stats->live.replies[status]++;
}

void gbi_stats_publish(gb_server_t *s)
{
    gbi_stats_t *st = s->stats;
    st->live.frames = s->frames_in;
    for (size_t i = 0; i < st->live.n_types; i++) {
        gb_metrics_type_t *t = &st->live.types[i];
        const gbi_ring_t *r = &s->rings[i];
        t->held_bytes = 0;
        for (const gbi_held_t *h = r->held_head; h; h = h->next)
            t->held_bytes += h->bytes;
        t->mail_sent = r->mail_sent;
        t->mail_forwarded = r->mail_forwarded;
        t->mail_held = r->mail_held;
        t->mail_undeliverable = r->mail_undeliverable;
        if (!r->t || !r->t->rk)
            continue;
        gb_rk_status_t rs;
        gb_rk_status(r->t->rk, &rs);
        t->running = 1;
        t->mode = rs.mode;
        t->in_flight = gb_rk_in_flight(r->t->rk);
        t->active = rs.state == GB_RK_RUNNING && gb_rk_is_active(r->t->rk);
        t->heartbeat = rs.heartbeat;
        t->launches = rs.launches;
        t->processed = rs.processed;
        t->activations = rs.activations;
        t->evicted = rs.evicted;
        t->evicted_bytes = rs.evicted_bytes;
        t->evicted_max_bytes = rs.evicted_max_bytes;
        t->evictions = rs.evictions;
        t->restores = rs.restores;
    }
    gb_metrics_publish(st->m, &st->live);
}

void gb_server_count_reload(gb_server_t *s, int ok)
{
    if (!s->stats)
        return;
    if (ok)
        s->stats->live.reloads++;
    else
        s->stats->live.reload_failures++;
}
