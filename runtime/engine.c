#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "grain_registry.h"
#include "links.h"
#include "log.h"

/* A team type's ring on device d: its arena, the other devices' (when
 * teams span them), and the GPU it shares (one-block ring kernels, and the
 * same GPU listed several times, which splits its SMs between the team
 * kernels of each). */
static void team_params(const gb_engine_t *e, size_t d, int kind, gb_rk_params_t *p)
{
    p->arena = e->arenas[d];
    p->arena_size = e->arena_size;
    if (e->teams_span && gb_grain_spans_devices(kind)) {
        p->n_peers = (uint32_t)e->n_devs;
        p->peer_self = (uint32_t)d;
        for (size_t k = 0; k < e->n_devs; k++) {
            p->peers[k] = e->arenas[k];
            p->team_copies += e->devs[k].device == e->devs[d].device;
        }
    }
    for (size_t j = 0; j < e->n_types; j++) /* the ring kernels it runs beside, on its GPU */
        p->ring_kernels += e->types[j].rk && !gb_grain_is_team(e->types[j].kind) &&
                           e->devs[e->types[j].dev].device == e->devs[d].device;
}

/* Creates the ring kernel of grain type t (config entry i) on device d of e. */
static gb_err create_type(gb_engine_t *e, const gb_config_t *cfg, size_t d, gb_engine_type_t *t, size_t i)
{
    const gb_mode mode = e->devs[d].mode;
    snprintf(t->name, sizeof t->name, "%s", cfg->grains[i].type);
    t->type_idx = (uint16_t)i;
    t->dev = (uint16_t)d;
    t->kind = gb_grain_kind_of(t->name);
    if (!t->kind) {
        if (d == 0)
            GB_WARN("grain type '%s' is not built in and no grain library defines it: requests to it are "
                    "refused (a misspelt name?)", t->name);
        return GB_OK;
    }
    if (gb_grain_is_team(t->kind) && !e->arenas[d]) {
        GB_INFO("grain type '%s': arena_mb is 0, so it has no memory; requests to it are refused", t->name);
        t->kind = 0;
        return GB_OK;
    }
    gb_rk_params_t p;
    gb_err err = gb_rk_params_from_config(cfg, t->name, mode, &p);
    p.device = e->devs[d].device;
    if (gb_test_faults_enabled())
        p.test_flags |= GB_TEST_ALLOW_FAULT;
    if (gb_grain_is_team(t->kind))
        team_params(e, d, t->kind, &p);
    if (err == GB_OK)
        err = gb_rk_new(&p, &t->rk);
    if (err != GB_OK)
        GB_ERROR("grain type '%s': cannot create its ring kernel in %s mode on device %d: %s", t->name,
                 gb_mode_name(mode), e->devs[d].device, gb_strerror(err));
    return err;
}

/* Launches t's ring kernel, if it has one. */
static gb_err launch_type(gb_engine_t *e, gb_engine_type_t *t)
{
    if (!t->rk)
        return GB_OK;
    const size_t d = t->dev;
    const gb_mode mode = e->devs[d].mode;
    gb_err err = gb_rk_launch(t->rk);
    if (err != GB_OK) {
        GB_ERROR("grain type '%s': cannot start its ring kernel in %s mode on device %d: %s", t->name,
                 gb_mode_name(mode), e->devs[d].device, gb_strerror(err));
        return err;
    }
    gb_rk_status_t st;
    gb_rk_status(t->rk, &st);
    char where[48] = "";
    if (e->n_devs > 1)
        snprintf(where, sizeof where, mode == GB_MODE_CPU ? " on device #%zu" : " on device #%zu (CUDA %d)", d,
                 e->devs[d].device);
    GB_INFO("grain type '%s': ring kernel running%s (%s, %s placement, %u slots of %u bytes)%s%s", t->name, where,
            gb_mode_name(st.mode), gb_placement_name(st.placement), st.capacity, st.slot_size,
            st.fallback_reason[0] ? "; fell back: " : "", st.fallback_reason);
    return GB_OK;
}

/* Resolves the targets of every served type to the engine's entries. */
static void resolve_targets(gb_engine_t *e)
{
    for (size_t i = 0; i < e->n_types; i++) {
        gb_engine_type_t *t = &e->types[i];
        const gb_grain_desc_t *d = t->kind ? gb_grain_get(t->kind) : NULL;
        t->n_targets = d ? d->n_targets : 0;
        for (uint32_t j = 0; j < t->n_targets; j++) {
            const gb_engine_type_t *to = gb_engine_find(e, d->targets[j]);
            t->target[j] = to && to->rk ? (int8_t)(to - e->types) : (int8_t)-1;
            if (t->target[j] < 0 && t->dev == 0)
                GB_WARN("grain type '%s' sends to '%s', which this bridge does not serve: such messages are "
                        "undeliverable", t->name, d->targets[j]);
        }
    }
}

/* The rings of grain type i: one on each device, or the first device's
 * alone (one without a handler, or a team type that does not span the
 * devices). */
static int spread(const gb_engine_t *e, const gb_config_t *cfg, size_t i)
{
    const int kind = gb_grain_kind_of(cfg->grains[i].type);
    return kind != 0 && (!gb_grain_is_team(kind) || (e->teams_span && gb_grain_spans_devices(kind)));
}

/* Ring kernels of cfg's types on e's devices. */
static size_t ring_count(const gb_engine_t *e, const gb_config_t *cfg)
{
    size_t n = cfg->n_grains;
    for (size_t d = 1; d < e->n_devs; d++)
        for (size_t i = 0; i < cfg->n_grains; i++)
            n += spread(e, cfg, i) != 0;
    return n;
}

/* Whether the team types that may span devices (GB_GRAIN_DEVICES) run on
 * every device: each device's kernels must write the others' arenas, so all
 * cpu threads, or GPUs with peer access between every two; and their rings
 * must fit GB_MAX_RINGS. Otherwise they stay on the first device, as before
 * they could span, and the log says why. */
static void teams_span(gb_engine_t *e, const gb_config_t *cfg)
{
    int spans = 0, cpu = 0;
    for (size_t i = 0; i < cfg->n_grains; i++)
        spans |= gb_grain_spans_devices(gb_grain_kind_of(cfg->grains[i].type));
    if (e->n_devs < 2 || !spans || cfg->arena_mb == 0)
        return;
    int cuda[GB_MAX_DEVICES];
    for (size_t d = 0; d < e->n_devs; d++) {
        cpu += e->devs[d].mode == GB_MODE_CPU;
        cuda[d] = e->devs[d].device;
    }
    char why[160] = "some devices run in cpu mode and others on a GPU";
    e->teams_span = (size_t)cpu == e->n_devs || (cpu == 0 && gb_arena_peers(cuda, e->n_devs, why, sizeof why));
    const size_t rings = e->teams_span ? ring_count(e, cfg) : 0;
    if (rings > GB_MAX_RINGS) {
        snprintf(why, sizeof why, "on every device they would make %zu ring kernels, more than %d", rings,
                 GB_MAX_RINGS);
        e->teams_span = false;
    }
    if (!e->teams_span)
        GB_WARN("the team grain types run on the first device only: %s", why);
}

/* Lays out types[] and ring_of: the config's types on the first device, in
 * its order; then, type by type, each spread type's rings on the other
 * devices. */
static gb_err lay_out(gb_engine_t *e, const gb_config_t *cfg)
{
    const size_t n = ring_count(e, cfg);
    if (n > GB_MAX_RINGS) {
        GB_ERROR("%zu grain types on %zu devices make %zu ring kernels, more than %d: list fewer devices or "
                 "grain types", cfg->n_grains, e->n_devs, n, GB_MAX_RINGS);
        return GB_ERR_CONFIG;
    }
    e->n_names = cfg->n_grains;
    e->n_types = cfg->n_grains;
    for (size_t i = 0; i < cfg->n_grains; i++) {
        for (size_t d = 0; d < e->n_devs; d++)
            e->ring_of[i][d] = (uint8_t)(d > 0 && spread(e, cfg, i) ? e->n_types++ : i);
    }
    for (size_t i = 0; i < cfg->n_grains; i++)
        for (size_t d = 0; d < e->n_devs; d++) {
            e->types[e->ring_of[i][d]].type_idx = (uint16_t)i;
            e->types[e->ring_of[i][d]].dev = (uint16_t)(e->ring_of[i][d] == i ? 0 : d);
        }
    return GB_OK;
}

/* The arena of the team types on each of their devices, before any kernel:
 * allocating device memory once kernels are resident would have to avoid
 * every implicit device synchronisation. A device past the first that
 * cannot hold one keeps the team types on the first device (logged). */
static gb_err arena_new(gb_engine_t *e, const gb_config_t *cfg)
{
    int teams = 0;
    for (size_t i = 0; i < cfg->n_grains; i++)
        teams |= gb_grain_is_team(gb_grain_kind_of(cfg->grains[i].type));
    if (!teams || cfg->arena_mb == 0)
        return GB_OK;
    e->arena_size = (uint64_t)cfg->arena_mb << 20;
    const size_t n = e->teams_span ? e->n_devs : 1;
    for (size_t d = 0; d < n; d++) {
        gb_err aerr = gb_arena_new(e->devs[d].mode, e->devs[d].device, e->arena_size, &e->arenas[d]);
        if (aerr != GB_OK && d > 0) {
            GB_WARN("the team grain types run on the first device only: device #%zu cannot hold a %u MiB arena "
                    "too (%s; lower arena_mb)", d, cfg->arena_mb, gb_strerror(aerr));
            for (size_t k = 1; k < d; k++) {
                gb_arena_free(e->devs[k].mode, e->arenas[k]);
                e->arenas[k] = NULL;
            }
            e->teams_span = false;
            break;
        }
        if (aerr != GB_OK) {
            GB_ERROR("cannot allocate the %u MiB arena of the team grains: %s (lower arena_mb)", cfg->arena_mb,
                     gb_strerror(aerr));
            return aerr;
        }
    }
    if (e->teams_span)
        GB_INFO("team grain arenas: %u MiB on each of %zu devices", cfg->arena_mb, n);
    else
        GB_INFO("team grain arena: %u MiB", cfg->arena_mb);
    for (int k = 1; k <= gb_grain_count(); k++) {
        const gb_grain_desc_t *d = gb_grain_get(k);
        if ((d->flags & GB_GRAIN_TEAM) && d->hooks && d->hooks->set_arena)
            d->hooks->set_arena(e->arena_size);
    }
    return GB_OK;
}

static void arenas_free(gb_engine_t *e)
{
    for (size_t d = 0; d < e->n_devs; d++)
        gb_arena_free(e->devs[d].mode, e->arenas[d]);
}

/* Creates (launch 0) or launches (1) every ring kernel: one-block ring
 * kernels first, team kernels last, in both passes. Persistent team kernels
 * are sized to leave an SM for each ring kernel type (gbk_team_workers), and
 * a ring kernel launched after them could find no SM with room. */
static gb_err for_each_ring(gb_engine_t *e, const gb_config_t *cfg, int launch)
{
    for (int team = 0; team <= 1; team++)
        for (size_t r = 0; r < e->n_types; r++) {
            gb_engine_type_t *t = &e->types[r];
            const int kind = gb_grain_kind_of(cfg->grains[t->type_idx].type);
            if ((kind != 0 && gb_grain_is_team(kind)) != team)
                continue;
            gb_err err = launch ? launch_type(e, t) : create_type(e, cfg, t->dev, t, t->type_idx);
            if (err != GB_OK)
                return err;
        }
    return GB_OK;
}

gb_err gb_engine_new_devs(const gb_config_t *cfg, const gb_engine_dev_t *devs, size_t n, gb_engine_t **out)
{
    *out = NULL;
    if (n == 0 || n > GB_MAX_DEVICES)
        return GB_ERR_INVALID;
    gb_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return GB_ERR_NOMEM;
    e->n_devs = n;
    memcpy(e->devs, devs, n * sizeof *devs);
    e->mode = devs[0].mode;
    e->device = devs[0].device;
    teams_span(e, cfg);
    gb_err err = arena_new(e, cfg); /* first: it may keep the team types on the first device */
    if (err == GB_OK)
        err = lay_out(e, cfg);
    if (err != GB_OK) {
        arenas_free(e);
        free(e);
        return err;
    }
    /* Every ring kernel is created before any is launched: the device
     * links between them need all their rings, and allocating beside
     * resident kernels would have to avoid every implicit synchronisation. */
    err = for_each_ring(e, cfg, 0);
    if (err == GB_OK) {
        resolve_targets(e);
        if (gb_links_new(e, cfg, &e->links) != GB_OK)
            GB_WARN("messages between grain types take the host path"); /* gb_links_new said why */
    }
    if (err == GB_OK)
        err = for_each_ring(e, cfg, 1);
    if (err != GB_OK) {
        gb_engine_destroy(&e, 2000);
        return err;
    }
    gb_links_check(e->links, e);
    *out = e;
    return GB_OK;
}

gb_err gb_engine_new(const gb_config_t *cfg, gb_mode mode, int device, gb_engine_t **out)
{
    const gb_engine_dev_t one = {device, mode};
    return gb_engine_new_devs(cfg, &one, 1, out);
}

void gb_engine_destroy(gb_engine_t **pe, int timeout_ms)
{
    if (!pe || !*pe)
        return;
    gb_engine_t *e = *pe;
    /* Every kernel stops before any region is freed: a forward's last grain
     * writes its reply into another type's ring (device links). */
    gb_links_close_into(e->links, SIZE_MAX);
    for (size_t i = 0; i < e->n_types; i++) {
        if (e->types[i].rk) {
            gb_err err = gb_rk_terminate(e->types[i].rk, timeout_ms);
            if (err != GB_OK && err != GB_ERR_TERMINATED)
                GB_WARN("grain type '%s': terminate: %s", e->types[i].name, gb_strerror(err));
        }
    }
    for (size_t i = 0; i < e->n_types; i++)
        gb_rk_destroy(&e->types[i].rk);
    gb_links_destroy(&e->links);
    arenas_free(e); /* after every kernel that used them stopped (peers' included) */
    free(e);
    *pe = NULL;
}

size_t gb_engine_rings(const gb_engine_t *e, const gb_engine_type_t *t, gb_engine_type_t *out[GB_MAX_DEVICES])
{
    size_t n = 1;
    out[0] = (gb_engine_type_t *)&e->types[e->ring_of[t->type_idx][0]];
    for (size_t d = 1; d < e->n_devs; d++) {
        gb_engine_type_t *r = (gb_engine_type_t *)&e->types[e->ring_of[t->type_idx][d]];
        if (r != out[0]) /* a type on the first device alone maps every device there */
            out[n++] = r;
    }
    return n;
}

gb_err gb_engine_ring_change(gb_engine_t *e, gb_engine_type_t *r, gb_ring_change change, int timeout_ms)
{
    if (change == GB_RING_TERMINATE)
        gb_links_close_into(e->links, (size_t)(r - e->types));
    return change == GB_RING_ACTIVATE     ? gb_rk_activate(r->rk, timeout_ms)
           : change == GB_RING_DEACTIVATE ? gb_rk_deactivate(r->rk, timeout_ms)
                                          : gb_rk_terminate(r->rk, timeout_ms);
}

gb_engine_type_t *gb_engine_find_n(gb_engine_t *e, const void *name, size_t len)
{
    for (size_t i = 0; i < e->n_names; i++)
        if (strlen(e->types[i].name) == len && memcmp(e->types[i].name, name, len) == 0)
            return &e->types[i];
    return NULL;
}

gb_engine_type_t *gb_engine_find(gb_engine_t *e, const char *name) { return gb_engine_find_n(e, name, strlen(name)); }
