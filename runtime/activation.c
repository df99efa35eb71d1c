/* Activation collection (see activation.h): which keys are in the table, the
 * spill store of evicted states, and the sweep that moves states between
 * them while the grain type is quiesced. Producer-side: gbi_act_publish runs
 * on the thread that publishes requests. */
#include "activation.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime_internal.h"

/* ---- a small open-addressing map of keys ------------------------------- */

enum { AM_EMPTY = 0, AM_USED = 1, AM_TOMB = 2 };

typedef struct amap_entry {
    uint64_t key;
    uint64_t last;  /* res: when the key was last sent a message (gb_now_ns) */
    uint32_t flag;  /* AM_* */
    uint32_t part;  /* the key's table partition */
    /* val_size bytes follow (spill: the state) */
} amap_entry_t;

typedef struct amap {
    unsigned char *e;
    size_t cap, used, tombs; /* cap: any size below 2^32 (a bound in bytes sets the spill store's) */
    size_t max;              /* the most entries it may grow to; 0: no bound */
    uint32_t esize;          /* sizeof(amap_entry_t) + value bytes, a multiple of 8 */
} amap_t;

static amap_entry_t *am_at(const amap_t *m, size_t i) { return (amap_entry_t *)(m->e + i * m->esize); }
static unsigned char *am_val(amap_entry_t *x) { return (unsigned char *)(x + 1); }
static size_t am_home(const amap_t *m, uint64_t key)
{
    return (size_t)(((uint64_t)(uint32_t)gb_key_mix(key) * m->cap) >> 32);
}
static size_t am_next(const amap_t *m, size_t i) { return i + 1 == m->cap ? 0 : i + 1; }

static int am_init(amap_t *m, size_t cap, uint32_t val_size, size_t max)
{
    m->esize = (uint32_t)((sizeof(amap_entry_t) + val_size + 7) & ~7u);
    m->max = max;
    m->cap = max && cap > max ? max : cap;
    m->used = m->tombs = 0;
    m->e = calloc(m->cap, m->esize);
    return m->e ? 0 : -1;
}

static amap_entry_t *am_find(const amap_t *m, uint64_t key)
{
    for (size_t i = am_home(m, key), n = 0; n < m->cap; i = am_next(m, i), n++) {
        amap_entry_t *x = am_at(m, i);
        if (x->flag == AM_EMPTY)
            return NULL;
        if (x->flag == AM_USED && x->key == key)
            return x;
    }
    return NULL;
}

/* Rehashes into cap entries (drops tombstones). */
static int am_rehash(amap_t *m, size_t cap)
{
    amap_t n;
    if (am_init(&n, cap, m->esize - (uint32_t)sizeof(amap_entry_t), m->max) != 0)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        amap_entry_t *x = am_at(m, i);
        if (x->flag != AM_USED)
            continue;
        size_t j = am_home(&n, x->key);
        while (am_at(&n, j)->flag != AM_EMPTY)
            j = am_next(&n, j);
        memcpy(am_at(&n, j), x, m->esize);
        n.used++;
    }
    free(m->e);
    *m = n;
    return 0;
}

/* The entry of key, inserted (zeroed, flag USED) when absent; NULL when out
 * of memory, or at m->max entries past three quarters full. */
static amap_entry_t *am_put(amap_t *m, uint64_t key)
{
    amap_entry_t *x = am_find(m, key);
    if (x)
        return x;
    if ((m->used + m->tombs + 1) * 4 > m->cap * 3) {
        size_t cap = (m->used + 1) * 2 > m->cap / 2 ? m->cap * 2 : m->cap;
        if (m->max && cap > m->max)
            cap = m->max;
        if ((m->used + 1) * 4 > cap * 3 || am_rehash(m, cap) != 0)
            return NULL;
    }
    size_t i = am_home(m, key);
    while (am_at(m, i)->flag == AM_USED)
        i = am_next(m, i);
    x = am_at(m, i);
    if (x->flag == AM_TOMB)
        m->tombs--;
    memset(x, 0, m->esize);
    x->key = key;
    x->flag = AM_USED;
    m->used++;
    return x;
}

static void am_del(amap_t *m, amap_entry_t *x)
{
    x->flag = AM_TOMB;
    m->used--;
    m->tombs++;
}

static void am_clear(amap_t *m)
{
    memset(m->e, 0, m->cap * m->esize);
    m->used = m->tombs = 0;
}

/* ---- the tracker --------------------------------------------------------- */

struct gbi_act {
    amap_t res;      /* keys in the table, or on their way there (requests in flight) */
    amap_t spill;    /* evicted keys and their states (the spill store) */
    amap_t fly;      /* during a sweep: keys of the requests in flight */
    uint32_t *count; /* per partition: keys in res (at least the entries in use) */
    uint64_t *retry; /* per partition, when full: no sweep for it before this time */
    unsigned char *blocked; /* per partition, since the last full sweep: idle activations stayed
                             * because the spill store was full */
    size_t spill_lim;       /* the spill store's bound in keys: half its entries (see gbi_act_new) */
    uint64_t age_ns;
    uint64_t backoff_ns; /* see RETRY_MIN_NS */
    unsigned char *tmp; /* one partition's entries, for compaction */
    uint32_t *mark;     /* sweep_restore: partitions fetched (== mark_gen) */
    uint32_t *parts;    /* sweep_restore: which, in order */
    uint32_t mark_gen;
    gbi_act_stats_t st;   /* the producer's */
    gbi_act_stats_t snap; /* a copy for gb_rk_status on any thread (relaxed atomics) */
};

/* Within a full partition, the soonest that another sweep is worth it: 1 ms,
 * or ten times what the last full sweep took, so that sweeps take at most
 * about a tenth of the time under sustained pressure. */
#define RETRY_MIN_NS 1000000ull

static void publish_stats(gbi_act_t *a)
{
    a->st.resident = a->res.used;
    a->st.spilled = a->spill.used;
    a->st.spilled_bytes = (uint64_t)a->spill.cap * a->spill.esize;
    const uint64_t *src = (const uint64_t *)&a->st;
    uint64_t *dst = (uint64_t *)&a->snap;
    for (size_t i = 0; i < sizeof a->st / sizeof(uint64_t); i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

/* At the bound: new keys refused so far for want of room in the spill store. */
static void warn_full(const gb_rk_t *rk, const gbi_act_t *a)
{
    const uint64_t n = a->st.refused_full;
    if ((n & (n - 1)) == 0) /* logged at 1, 2, 4, 8, ... */
        GB_WARN("ring kernel '%s': %llu new keys refused so far: the activation table is full and the store of "
                "evicted activations is at its bound (grains.max_evicted_kb = %llu KiB: %zu grains); raise "
                "max_evicted_kb or max_grains, or deactivate grains you are done with",
                rk->type_name, (unsigned long long)n, (unsigned long long)(a->st.spill_max_bytes / 1024),
                a->spill_lim);
}

static uint32_t part_of(const gb_rk_t *rk, uint64_t key)
{
    return rk->tab_mod ? (uint32_t)(key % rk->tab_geom.lanes) : gb_grain_lane(key, rk->tab_geom.lanes);
}

gb_err gbi_act_new(gb_rk_t *rk, gbi_act_t **out)
{
    const gb_grain_table_t *g = &rk->tab_geom;
    gbi_act_t *a = calloc(1, sizeof *a);
    *out = NULL;
    if (!a)
        return GB_ERR_NOMEM;
    size_t fly = 16;
    while (fly < 2ull * rk->geom.cap)
        fly <<= 1;
    a->age_ns = (uint64_t)rk->p.grain.collection_age_s * 1000000000ull;
    a->backoff_ns = RETRY_MIN_NS;
    /* The spill store holds at most max_evicted_kb of memory, its rehashes
     * included (they hold the old entries and the new at once): half of it
     * in entries, filled to at most half, so that its tombstones (one per
     * key that comes back) make it rehash in place only once per quarter of
     * its entries. */
    const uint64_t kb = rk->p.grain.max_evicted_kb ? rk->p.grain.max_evicted_kb : GB_MAX_EVICTED_KB_DEFAULT;
    const uint64_t esize = (sizeof(amap_entry_t) + g->state_size + 7) & ~7ull;
    uint64_t max = kb * 1024 / (2 * esize);
    if (max > UINT32_MAX)
        max = UINT32_MAX;
    if (max < 8) {
        GB_ERROR("grain type '%s': grains.max_evicted_kb = %llu KiB holds fewer than 4 evicted states of %u "
                 "bytes; give it at least %llu", rk->type_name, (unsigned long long)kb, g->state_size,
                 (unsigned long long)((16 * esize + 1023) / 1024));
        gbi_act_destroy(&a);
        return GB_ERR_CONFIG;
    }
    a->spill_lim = (size_t)(max / 2);
    a->st.spill_max_bytes = kb * 1024;
    a->st.spill_max = a->spill_lim;
    a->count = calloc(g->lanes, sizeof *a->count);
    a->retry = calloc(g->lanes, sizeof *a->retry);
    a->blocked = calloc(g->lanes, 1);
    a->tmp = malloc((size_t)g->per_lane * g->entry_size);
    a->mark = calloc(g->lanes, sizeof *a->mark);
    a->parts = calloc(g->lanes, sizeof *a->parts);
    if (!a->count || !a->retry || !a->blocked || !a->tmp || !a->mark || !a->parts ||
        am_init(&a->res, 1024, 0, 0) != 0 || am_init(&a->spill, 1024, g->state_size, (size_t)max) != 0 ||
        am_init(&a->fly, fly, 0, 0) != 0) {
        gbi_act_destroy(&a);
        return GB_ERR_NOMEM;
    }
    publish_stats(a);
    *out = a;
    return GB_OK;
}

void gbi_act_destroy(gbi_act_t **pa)
{
    gbi_act_t *a = *pa;
    if (!a)
        return;
    free(a->res.e);
    free(a->spill.e);
    free(a->fly.e);
    free(a->count);
    free(a->retry);
    free(a->blocked);
    free(a->tmp);
    free(a->mark);
    free(a->parts);
    free(a);
    *pa = NULL;
}

void gbi_act_stats(const gbi_act_t *a, gbi_act_stats_t *out)
{
    const uint64_t *src = (const uint64_t *)&a->snap;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* Whether the kernel would activate the grain of request s at all. */
static int activates(const gb_rk_t *rk, const gb_slot_hdr_t *s)
{
    return s->len <= gb_slot_payload_cap(rk->geom) && s->type != GB_MSG_TEST_FAULT;
}

/* Evicts every activation idle for the collection age with no request in
 * flight, while the spill store has room (past it they stay: blocked);
 * forgets keys that left the table (deactivated, or refused). */
static int evict_idle(gb_rk_t *rk, gb_grain_table_t *t, uint64_t now)
{
    gbi_act_t *a = rk->act;
    memset(a->blocked, 0, t->lanes);
    for (size_t i = 0; i < a->res.cap; i++) {
        amap_entry_t *r = am_at(&a->res, i);
        if (r->flag != AM_USED)
            continue;
        const int64_t e = gb_grain_find(t, r->part, r->key, 0, NULL);
        const int busy = am_find(&a->fly, r->key) != NULL;
        if (e < 0) {
            if (!busy)
                am_del(&a->res, r);
            continue;
        }
        if (busy || now - r->last < a->age_ns)
            continue;
        if (a->spill.used >= a->spill_lim) {
            a->blocked[r->part] = 1;
            continue;
        }
        amap_entry_t *sp = am_put(&a->spill, r->key);
        if (!sp)
            return -1; /* out of host memory: keep the rest where they are */
        memcpy(am_val(sp), gb_grain_state(t, e), t->state_size);
        gb_grain_entry(t, (uint64_t)e)->used = GB_ENTRY_TOMB;
        am_del(&a->res, r);
        a->st.evictions++;
    }
    return 0;
}

/* Rewrites each partition with tombstones without them (probe sequences stay
 * short under churn), and adopts any entry the host did not know of. */
static void compact(gb_rk_t *rk, gb_grain_table_t *t, uint64_t now)
{
    gbi_act_t *a = rk->act;
    const uint32_t E = t->entry_size;
    for (uint32_t p = 0; p < t->lanes; p++) {
        unsigned char *base = t->entries + (size_t)p * t->per_lane * E;
        uint32_t live = 0, tombs = 0;
        for (uint32_t i = 0; i < t->per_lane; i++) {
            const gb_grain_entry_t *en = (const gb_grain_entry_t *)(base + (size_t)i * E);
            if (en->used == GB_ENTRY_USED)
                memcpy(a->tmp + (size_t)live++ * E, en, E);
            else if (en->used != GB_ENTRY_EMPTY)
                tombs++;
        }
        if (tombs) {
            memset(base, 0, (size_t)t->per_lane * E);
            for (uint32_t i = 0; i < live; i++) {
                const gb_grain_entry_t *en = (const gb_grain_entry_t *)(a->tmp + (size_t)i * E);
                int64_t e = gb_grain_find(t, p, en->key, 1, NULL);
                memcpy(gb_grain_state(t, e), en + 1, t->state_size);
            }
        }
        for (uint32_t i = 0; i < live; i++) {
            const uint64_t key = ((const gb_grain_entry_t *)(a->tmp + (size_t)i * E))->key;
            if (!am_find(&a->res, key)) {
                amap_entry_t *r = am_put(&a->res, key);
                if (r) {
                    r->part = p;
                    r->last = now;
                }
            }
        }
    }
}

/* count from res, and in retry when each partition's oldest activation with
 * nothing in flight reaches the collection age (see limit_retries). */
static void recount(gb_rk_t *rk)
{
    gbi_act_t *a = rk->act;
    const uint32_t lanes = rk->tab_geom.lanes;
    memset(a->count, 0, lanes * sizeof *a->count);
    for (uint32_t p = 0; p < lanes; p++)
        a->retry[p] = UINT64_MAX;
    for (size_t i = 0; i < a->res.cap; i++) {
        const amap_entry_t *r = am_at(&a->res, i);
        if (r->flag != AM_USED)
            continue;
        a->count[r->part]++;
        if (!am_find(&a->fly, r->key) && r->last + a->age_ns < a->retry[r->part])
            a->retry[r->part] = r->last + a->age_ns;
    }
}

/* After a sweep: a partition that is still full is swept again only once an
 * activation there can have become idle (at least a->backoff_ns later:
 * what is in flight may be answered by then), so that a table full of
 * activations in use refuses new keys without a sweep per request. A
 * deactivation sent to a key clears its partition's wait (publish). */
static void limit_retries(gb_rk_t *rk, uint64_t now)
{
    gbi_act_t *a = rk->act;
    for (uint32_t p = 0; p < rk->tab_geom.lanes; p++) {
        if (a->count[p] < rk->tab_geom.per_lane)
            a->retry[p] = 0;
        else if (a->retry[p] < now + a->backoff_ns || a->retry[p] == UINT64_MAX)
            a->retry[p] = now + a->backoff_ns;
    }
}

/* Partition p is full and blocked (its idle activations stayed for want of
 * room in the spill store): evicts p's activation idle the longest (nothing
 * in flight) to make room for an evicted key, which leaves the store in
 * exchange; so evicted keys come back at the store's bound. Returns 0 when
 * it did; the fly set must be current. */
static int swap_out(gb_rk_t *rk, gb_grain_table_t *t, uint32_t p, uint64_t now)
{
    gbi_act_t *a = rk->act;
    const uint64_t base = (uint64_t)p * t->per_lane;
    int64_t v = -1;
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 0; i < t->per_lane; i++) {
        const gb_grain_entry_t *en = gb_grain_entry(t, base + i);
        const amap_entry_t *r;
        if (en->used != GB_ENTRY_USED || am_find(&a->fly, en->key) || !(r = am_find(&a->res, en->key)) ||
            now - r->last < a->age_ns || r->last >= oldest)
            continue;
        oldest = r->last;
        v = (int64_t)(base + i);
    }
    if (v < 0)
        return -1;
    gb_grain_entry_t *en = gb_grain_entry(t, (uint64_t)v);
    amap_entry_t *sp = am_put(&a->spill, en->key); /* one past spill_lim until the restore */
    if (!sp)
        return -1;
    memcpy(am_val(sp), gb_grain_state(t, v), t->state_size);
    am_del(&a->res, am_find(&a->res, en->key));
    en->used = GB_ENTRY_TOMB;
    a->count[p]--;
    a->st.evictions++;
    return 0;
}

/* Writes back key's evicted state sp into its partition p (which has room). */
static void restore_key(gb_rk_t *rk, gb_grain_table_t *t, amap_entry_t *sp, uint32_t p, uint64_t now)
{
    gbi_act_t *a = rk->act;
    const uint64_t key = sp->key;
    amap_entry_t *r = am_put(&a->res, key);
    if (!r)
        return;
    const int64_t e = gb_grain_find(t, p, key, 1, NULL);
    if (e < 0) { /* cannot be: count bounds the entries in use */
        am_del(&a->res, r);
        return;
    }
    memcpy(gb_grain_state(t, e), am_val(sp), t->state_size);
    r->part = p;
    r->last = now;
    am_del(&a->spill, sp);
    a->count[p]++;
    a->st.restores++;
}

/* Writes back the states of the evicted keys that requests [from, to) need,
 * where their partitions have room. */
static void restore(gb_rk_t *rk, gb_grain_table_t *t, uint64_t from, uint64_t to, uint64_t now)
{
    gbi_act_t *a = rk->act;
    for (uint64_t pos = from; pos < to; pos++) {
        const gb_slot_hdr_t *s = gb_slot_at(rk->in, rk->geom, pos);
        amap_entry_t *sp;
        if (!activates(rk, s) || !(sp = am_find(&a->spill, s->key)))
            continue;
        const uint32_t p = part_of(rk, s->key);
        const uint64_t key = s->key;
        if (a->count[p] >= t->per_lane && (!a->blocked[p] || swap_out(rk, t, p, now) != 0))
            continue;
        if ((sp = am_find(&a->spill, key)) && a->count[p] < t->per_lane) /* found again: swap_out may move it */
            restore_key(rk, t, sp, p, now);
    }
}

/* The keys of the requests in flight, [out_tail, to): never evicted. */
static void note_in_flight(gb_rk_t *rk, uint64_t to)
{
    gbi_act_t *a = rk->act;
    am_clear(&a->fly);
    for (uint64_t pos = __atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE); pos < to; pos++)
        am_put(&a->fly, gb_slot_at(rk->in, rk->geom, pos)->key);
}

/* The full sweep: evict, compact, recount, restore; the whole table. */
static gb_err sweep_all(gb_rk_t *rk, uint64_t from, uint64_t to, uint64_t now)
{
    const uint32_t lanes = rk->tab_geom.lanes;
    unsigned char *entries = rk->ops->table_get(rk, 0, lanes);
    if (!entries)
        return GB_ERR_CUDA;
    gb_grain_table_t t = rk->tab_geom;
    t.entries = entries;
    t.concurrent = 0;
    note_in_flight(rk, to);
    if (evict_idle(rk, &t, now) != 0)
        GB_WARN("ring kernel '%s': out of host memory for evicted activations", rk->type_name);
    compact(rk, &t, now);
    recount(rk);
    restore(rk, &t, from, to, now);
    limit_retries(rk, now);
    return rk->ops->table_put(rk, 0, lanes);
}

/* Restores only: the evicted keys of [from, to) whose partitions have room,
 * or are full but blocked (swap_out), copying just those partitions (a table
 * of 65,536 grains is some 8 MiB; one partition, a few KiB). */
static gb_err sweep_restore(gb_rk_t *rk, uint64_t from, uint64_t to, uint64_t now)
{
    gbi_act_t *a = rk->act;
    gb_grain_table_t t = rk->tab_geom;
    uint32_t n = 0;
    int fly = 0; /* the fly set is current */
    t.concurrent = 0;
    if (++a->mark_gen == 0) {
        memset(a->mark, 0, rk->tab_geom.lanes * sizeof *a->mark);
        a->mark_gen = 1;
    }
    for (uint64_t pos = from; pos < to; pos++) {
        const gb_slot_hdr_t *s = gb_slot_at(rk->in, rk->geom, pos);
        amap_entry_t *sp;
        if (!activates(rk, s) || !(sp = am_find(&a->spill, s->key)))
            continue;
        const uint32_t p = part_of(rk, s->key);
        const uint64_t key = s->key;
        if (a->count[p] >= t.per_lane && !a->blocked[p])
            continue;
        if (a->mark[p] != a->mark_gen) {
            if (!(t.entries = rk->ops->table_get(rk, p, 1)))
                return GB_ERR_CUDA;
            a->mark[p] = a->mark_gen;
            a->parts[n++] = p;
        }
        if (a->count[p] >= t.per_lane) {
            if (!fly) {
                note_in_flight(rk, to);
                fly = 1;
            }
            if (swap_out(rk, &t, p, now) != 0)
                continue;
            sp = am_find(&a->spill, key); /* swap_out may have moved it */
        }
        restore_key(rk, &t, sp, p, now);
    }
    for (uint32_t i = 0; i < n; i++) {
        gb_err err = rk->ops->table_put(rk, a->parts[i], 1);
        if (err != GB_OK)
            return err;
    }
    return GB_OK;
}

/* A sweep (full, or restores only) with the grain type quiesced. Returns 0,
 * or -1 when the table could not be reached. */
static int sweep(gb_rk_t *rk, uint64_t from, uint64_t to, uint64_t now, int full)
{
    gbi_act_t *a = rk->act;
    if (rk->state != GB_RK_RUNNING && rk->state != GB_RK_CREATED)
        return -1;
    pthread_mutex_lock(&rk->act_lock);
    gb_err err = rk->ops->quiesce(rk, 1);
    if (err == GB_OK)
        err = full ? sweep_all(rk, from, to, now) : sweep_restore(rk, from, to, now);
    a->st.sweeps++;
    if (full) {
        const uint64_t took = gb_now_ns() - now;
        a->backoff_ns = took * 10 > RETRY_MIN_NS ? took * 10 : RETRY_MIN_NS;
    }
    gb_err qerr = rk->ops->quiesce(rk, 0); /* also after a failed quiesce(1): it undoes what that did */
    pthread_mutex_unlock(&rk->act_lock);
    if (err != GB_OK || qerr != GB_OK) {
        GB_WARN("ring kernel '%s': activation sweep failed (%s); requests that need room are refused",
                rk->type_name, gb_strerror(err != GB_OK ? err : qerr));
        return -1;
    }
    GB_DIAG("ring kernel '%s': activation sweep: %zu resident, %zu evicted in host memory", rk->type_name,
            a->res.used, a->spill.used);
    return 0;
}

/* Refuses request s, before the kernel sees it: its partition p has no room
 * (or its evicted state could not come back; it stays in the spill store).
 * A new key that only an eviction could make room for, where the last sweep
 * left idle activations for want of room in the store (blocked), hears of
 * the store's bound: the store may be one below it since, when that sweep's
 * one eviction went to an evicted key coming back, and the back-off keeps
 * the next sweep away. */
static void refuse(gb_rk_t *rk, gb_slot_hdr_t *s, uint32_t p, int evicted)
{
    gbi_act_t *a = rk->act;
    a->st.refused++;
    if (!evicted && a->blocked[p]) {
        s->status = GB_SLOT_EVICTED_FULL;
        a->st.refused_full++;
        warn_full(rk, a);
        return;
    }
    s->status = GB_SLOT_GRAIN_TABLE_FULL;
    const uint64_t n = a->st.refused - a->st.refused_full;
    if ((n & (n - 1)) == 0) /* logged at 1, 2, 4, 8, ... */
        GB_WARN("ring kernel '%s': %llu requests refused so far: the activation table is full of grains "
                "used within collection_age_s = %u (or with requests in flight); raise max_grains or "
                "lower collection_age_s",
                rk->type_name, (unsigned long long)n, rk->p.grain.collection_age_s);
}

/* A deactivation of an evicted key: its state leaves the spill store here,
 * with no table entry needed, and the kernel answers OK (GB_REQ_ANSWERED).
 * The key has nothing in flight but refused requests: none touch state. */
static void drop_evicted(gbi_act_t *a, gb_slot_hdr_t *s, amap_entry_t *sp, uint32_t lanes)
{
    if (a->spill.used >= a->spill_lim) /* the store has room again: full partitions may sweep */
        memset(a->retry, 0, lanes * sizeof *a->retry);
    am_del(&a->spill, sp);
    s->status = GB_REQ_ANSWERED;
}

void gbi_act_publish(gb_rk_t *rk, uint64_t from, uint64_t to)
{
    gbi_act_t *a = rk->act;
    if (from == to)
        return;
    const uint32_t per = rk->tab_geom.per_lane;
    const uint64_t now = gb_now_ns();
    int full = 0, light = 0, changed = 0; /* sweeps done for this batch */
    for (uint64_t pos = from; pos < to; pos++) {
        gb_slot_hdr_t *s = gb_slot_at(rk->in, rk->geom, pos);
        if (!activates(rk, s))
            continue;
        amap_entry_t *r = am_find(&a->res, s->key);
        if (r) {
            r->last = now;
            if (s->type == GB_MSG_DEACTIVATE_KEY)
                a->retry[r->part] = 0; /* room soon: let the next key that needs it sweep */
            continue;
        }
        amap_entry_t *sp = am_find(&a->spill, s->key);
        if (s->type == GB_MSG_DEACTIVATE_KEY) {
            if (sp) {
                drop_evicted(a, s, sp, rk->tab_geom.lanes);
                changed = 1;
            }
            continue; /* else nothing to deactivate: the kernel says so */
        }
        const uint32_t p = part_of(rk, s->key);
        const int room = a->count[p] < per;
        /* 2: a full sweep (evicts); 1: a light one (restores, into room or by swap_out) */
        int kind = 0;
        if (!room && !full && now >= a->retry[p])
            kind = 2;
        else if (sp && (room || a->blocked[p]) && !light && !full)
            kind = 1;
        if (kind) {
            full |= kind == 2;
            light |= kind == 1;
            if (sweep(rk, pos, to, now, kind == 2) == 0 && (r = am_find(&a->res, s->key))) {
                r->last = now; /* restored */
                continue;
            }
            sp = am_find(&a->spill, s->key);
        }
        if (sp || a->count[p] >= per || !(r = am_put(&a->res, s->key))) {
            refuse(rk, s, p, sp != NULL);
            changed = 1;
            continue;
        }
        r->part = p;
        r->last = now;
        a->count[p]++;
        changed = 1;
    }
    if (changed || full || light)
        publish_stats(a);
}
