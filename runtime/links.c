/* Device links: which pairs of ring kernels get one, and their memory
 * (gpubridge/device/link.h says what lives where). */
#include "links.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "grain_registry.h"
#include "gpubridge/device/link.h"
#include "log.h"

#define GB_MAX_LINKS (GB_MAX_RINGS * GB_MAIL_MAX_TARGETS)
_Static_assert(GB_MAX_RINGS <= 64, "a reply's status names its ring in 6 bits (gb_slot_from)");

typedef struct gbi_link_pair {
    uint8_t from, target, to, dev; /* sender ring, its target index, target ring, engine device */
    uint8_t closed;
    size_t off;                    /* its gb_link_t in its device's block */
} gbi_link_pair_t;

struct gb_links {
    size_t n;
    gbi_link_pair_t pair[GB_MAX_LINKS];
    int16_t of[GB_MAX_RINGS][GB_MAIL_MAX_TARGETS]; /* pair index, or -1 */
    gb_link_host_t *host;                          /* n entries: host view */
    gb_link_host_t *host_dev;                      /* their device view */
    gbi_links_mem_t mem[GB_MAX_DEVICES];
};

static size_t align128(size_t n) { return (n + 127) & ~(size_t)127; }

/* The pairs: each sending ring's targets on its own device, where both
 * kernels can take part and the target has room for another link. */
static void find_pairs(gb_links_t *l, gb_engine_t *e)
{
    uint32_t n_in[GB_MAX_RINGS] = {0};
    for (size_t i = 0; i < e->n_types; i++) {
        const gb_engine_type_t *t = &e->types[i];
        if (!t->rk || t->n_targets == 0 || !gbi_links_eligible(t->rk))
            continue;
        for (uint32_t j = 0; j < t->n_targets; j++) {
            if (t->target[j] < 0)
                continue;
            const size_t to = e->ring_of[e->types[t->target[j]].type_idx][t->dev];
            const gb_engine_type_t *tt = &e->types[to];
            const gb_grain_desc_t *td = tt->kind ? gb_grain_get(tt->kind) : NULL;
            if (!tt->rk || tt->dev != t->dev || !gbi_links_eligible(tt->rk) || (td && td->hooks && td->hooks->reply_max))
                continue; /* a reply_max hook may want an out-of-line reply, which only the host path makes */
            if (n_in[to] == GB_LINK_IN_MAX) {
                GB_INFO("grain type '%s': more than %d links into it; messages from '%s' take the host path",
                        tt->name, GB_LINK_IN_MAX, t->name);
                continue;
            }
            n_in[to]++;
            l->of[i][j] = (int16_t)l->n;
            l->pair[l->n++] = (gbi_link_pair_t){.from = (uint8_t)i, .target = (uint8_t)j, .to = (uint8_t)to, .dev = (uint8_t)t->dev};
        }
    }
}

/* A slot of pair k's link: the origin, then a slot of its target's ring. */
static uint32_t link_slot_size(const gb_links_t *l, const gb_engine_t *e, size_t k)
{
    return (uint32_t)sizeof(gb_link_origin_t) + gb_rk_payload_cap(e->types[l->pair[k].to].rk) + GB_SLOT_HDR_SIZE;
}

/* Device d's block: its links, then their slots. */
static gb_err place_device(gb_links_t *l, gb_engine_t *e, const gb_config_t *cfg, size_t d)
{
    size_t n = 0, bytes = 0;
    for (size_t k = 0; k < l->n; k++)
        n += l->pair[k].dev == d;
    if (n == 0)
        return GB_OK;
    bytes = align128(n * sizeof(gb_link_t));
    size_t slots_at[GB_MAX_LINKS];
    for (size_t k = 0; k < l->n; k++) {
        if (l->pair[k].dev != d)
            continue;
        slots_at[k] = bytes;
        bytes += align128((size_t)cfg->mail_link_slots * link_slot_size(l, e, k));
    }
    gbi_links_mem_t *m = &l->mem[d];
    m->device = e->devs[d].device;
    m->bytes = bytes;
    gb_link_t *init = calloc(n, sizeof *init);
    if (!init)
        return GB_ERR_NOMEM;
    gb_err err = gbi_links_alloc(m);
    for (size_t k = 0, i = 0; err == GB_OK && k < l->n; k++) {
        if (l->pair[k].dev != d)
            continue;
        gb_link_t *L = &init[i];
        L->slots = m->dev + slots_at[k];
        L->host = &l->host_dev[k];
        L->cap = cfg->mail_link_slots;
        L->slot_size = link_slot_size(l, e, k);
        L->pl_cap = gb_rk_payload_cap(e->types[l->pair[k].to].rk);
        l->pair[k].off = i++ * sizeof(gb_link_t);
    }
    if (err == GB_OK)
        err = gbi_links_upload(m, init, n * sizeof *init);
    free(init);
    return err;
}

/* Each kernel's links into its arguments. */
static void give(gb_links_t *l, gb_engine_t *e, const gb_config_t *cfg)
{
    for (size_t i = 0; i < e->n_types; i++) {
        gb_engine_type_t *t = &e->types[i];
        if (!t->rk)
            continue;
        void *out[GB_MAIL_MAX_TARGETS] = {0}, *in[GB_LINK_IN_MAX] = {0};
        uint32_t n_out = 0, n_in = 0;
        for (size_t k = 0; k < l->n; k++) {
            void *L = l->mem[l->pair[k].dev].dev + l->pair[k].off;
            if (l->pair[k].from == i) {
                out[l->pair[k].target] = L;
                n_out++;
            }
            if (l->pair[k].to == i)
                in[n_in++] = L;
        }
        if (n_out || n_in)
            gbi_links_give(t->rk, out, GB_MAIL_MAX_TARGETS, in, n_in, (uint32_t)i, n_out ? (uint32_t)e->n_devs : 0,
                           t->dev, cfg->mail_max_hops, (uint64_t)cfg->mail_hold_ms * 1000000ull);
    }
}

gb_err gb_links_new(gb_engine_t *e, const gb_config_t *cfg, gb_links_t **out)
{
    *out = NULL;
    if (!cfg->mail_device_links)
        return GB_OK;
    gb_links_t *l = calloc(1, sizeof *l);
    if (!l)
        return GB_ERR_NOMEM;
    memset(l->of, 0xff, sizeof l->of);
    find_pairs(l, e);
    if (l->n == 0) {
        free(l);
        return GB_OK;
    }
    void *hv = NULL, *dv = NULL;
    gb_err err = gbi_links_host_alloc(l->n * sizeof(gb_link_host_t), &hv, &dv);
    l->host = hv;
    l->host_dev = dv;
    for (size_t d = 0; err == GB_OK && d < e->n_devs; d++)
        err = place_device(l, e, cfg, d);
    if (err != GB_OK) {
        GB_WARN("cannot allocate the device links between grain types (%s); set messaging.device_links = false "
                "to route every message by the host without trying", gb_strerror(err));
        gb_links_destroy(&l);
        return err;
    }
    give(l, e, cfg);
    for (size_t k = 0; k < l->n; k++)
        GB_DEBUG("device link: '%s' -> '%s' (%u slots)", e->types[l->pair[k].from].name,
                 e->types[l->pair[k].to].name, cfg->mail_link_slots);
    GB_INFO("%zu device link%s between grain types (messaging.link_slots = %u)", l->n, l->n == 1 ? "" : "s",
            cfg->mail_link_slots);
    *out = l;
    return GB_OK;
}

static int close_pair(gb_links_t *l, size_t k)
{
    if (l->pair[k].closed)
        return 0;
    l->pair[k].closed = 1;
    const gbi_links_mem_t *m = &l->mem[l->pair[k].dev];
    if (gbi_links_close(m->device, m->dev + l->pair[k].off) != GB_OK) {
        GB_WARN("a device link into ring %u cannot be closed: messages it takes are not answered", l->pair[k].to);
        return -1;
    }
    return 1;
}

void gb_links_check(gb_links_t *l, gb_engine_t *e)
{
    for (size_t k = 0; l && k < l->n; k++) {
        const gb_engine_type_t *to = &e->types[l->pair[k].to];
        if (!gbi_links_persistent(to->rk) && close_pair(l, k) > 0)
            GB_INFO("grain type '%s' does not run persistently: messages from '%s' to it take the host path", to->name,
                    e->types[l->pair[k].from].name);
    }
}

void gb_links_close_into(gb_links_t *l, size_t to)
{
    for (size_t k = 0; l && k < l->n; k++)
        if (to == SIZE_MAX || l->pair[k].to == to)
            close_pair(l, k);
}

void gb_links_destroy(gb_links_t **pl)
{
    if (!pl || !*pl)
        return;
    gb_links_t *l = *pl;
    for (size_t d = 0; d < GB_MAX_DEVICES; d++)
        if (l->mem[d].dev)
            gbi_links_free(&l->mem[d]);
    if (l->host)
        gbi_links_host_free(l->host);
    free(l);
    *pl = NULL;
}

int gb_links_is_target(const gb_links_t *l, size_t ring)
{
    for (size_t k = 0; l && k < l->n; k++)
        if (l->pair[k].to == ring)
            return 1;
    return 0;
}

int gb_links_find(const gb_links_t *l, size_t from, uint32_t target)
{
    if (!l || from >= GB_MAX_RINGS || target >= GB_MAIL_MAX_TARGETS)
        return -1;
    return l->of[from][target];
}

void gb_links_delivered(gb_links_t *l, int link)
{
    if (l && link >= 0 && (size_t)link < l->n)
        __atomic_fetch_add(&l->host[link].delivered, 1, __ATOMIC_RELEASE);
}

void gb_links_counts(const gb_links_t *l, size_t from, uint64_t *taken, uint64_t *refused)
{
    *taken = *refused = 0;
    for (size_t k = 0; l && k < l->n; k++)
        if (l->pair[k].from == from) {
            *taken += __atomic_load_n(&l->host[k].taken, __ATOMIC_ACQUIRE);
            *refused += __atomic_load_n(&l->host[k].refused, __ATOMIC_ACQUIRE);
        }
}

#if !GB_HAVE_CUDA
/* Without the CUDA backend no kernel is eligible, so none of these is reached. */
gb_err gbi_links_alloc(gbi_links_mem_t *m)
{
    (void)m;
    return GB_ERR_UNSUPPORTED;
}
gb_err gbi_links_upload(gbi_links_mem_t *m, const void *init, size_t bytes)
{
    (void)m, (void)init, (void)bytes;
    return GB_ERR_UNSUPPORTED;
}
void gbi_links_free(gbi_links_mem_t *m) { (void)m; }
gb_err gbi_links_host_alloc(size_t bytes, void **host, void **dev)
{
    (void)bytes;
    *host = *dev = NULL;
    return GB_ERR_UNSUPPORTED;
}
void gbi_links_host_free(void *host) { (void)host; }
gb_err gbi_links_close(int device, void *dev_link)
{
    (void)device, (void)dev_link;
    return GB_ERR_UNSUPPORTED;
}
int gbi_links_eligible(struct gb_rk *rk)
{
    (void)rk;
    return 0;
}
int gbi_links_persistent(struct gb_rk *rk)
{
    (void)rk;
    return 0;
}
void gbi_links_give(struct gb_rk *rk, void *const out[], uint32_t n_out, void *const in[], uint32_t n_in,
                    uint32_t self, uint32_t n_devs, uint32_t dev, uint32_t max_hops, uint64_t hold_ns)
{
    (void)rk, (void)out, (void)n_out, (void)in, (void)n_in, (void)self, (void)n_devs, (void)dev, (void)max_hops,
        (void)hold_ns;
}
#endif
