/* The embedding API: starting the ring kernels, activate / deactivate,
 * telemetry and the texts of refused replies. */
#include "api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grain_registry.h"
#include "runtime.h"

/* Messages between grains are routed by the daemon's server; an embedded
 * runtime has none, so a type that declares targets is refused here rather
 * than have its sends lost. */
static gpubridge_err check_no_mail(const gpubridge_runtime_t *rt)
{
    for (size_t i = 0; i < rt->n_served; i++) {
        const gb_grain_desc_t *d = gb_grain_get(gb_grain_kind_of(rt->served[i]));
        if (d && d->n_targets)
            return gbe_fail(GPUBRIDGE_ERR_GRAIN, "grain type '%s' sends to other grain types (GB_DEFINE_GRAIN_TARGETS), "
                            "which an embedded runtime does not route: serve it from the gpubridge daemon",
                            rt->served[i]);
    }
    return GPUBRIDGE_OK;
}

gpubridge_err gpubridge_runtime_start(gpubridge_runtime_t *rt)
{
    if (!rt)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_runtime_start: the runtime is NULL");
    gb_config_t *ecfg = malloc(sizeof *ecfg); /* the served types, each with its settings */
    if (!ecfg)
        return gbe_fail(GPUBRIDGE_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&rt->lock);
    gpubridge_err e = GPUBRIDGE_OK;
    if (rt->engine) {
        e = gbe_fail(GPUBRIDGE_ERR_STATE, "gpubridge_runtime_start: the runtime has started already");
        goto out;
    }
    if ((e = check_no_mail(rt)) != GPUBRIDGE_OK)
        goto out;
    *ecfg = rt->cfg;
    ecfg->n_grains = 0;
    for (size_t i = 0; i < rt->n_served; i++) {
        const gb_grain_config_t *src = gb_config_grain(&rt->cfg, rt->served[i]);
        gb_grain_config_t *dst = gb_config_add_grain(ecfg, rt->served[i]);
        if (dst && src)
            *dst = *src;
    }
    gb_err ge = gb_engine_new(ecfg, rt->mode, rt->device < 0 ? 0 : rt->device, &rt->engine);
    if (ge != GB_OK) {
        e = gbe_fail(gbe_err_of(ge), "cannot start the grain types in %s mode: %s (the log says which and why)",
                     gb_mode_name(rt->mode), gb_strerror(ge));
        goto out;
    }
    /* Replies waiting for gpubridge_poll, with those on their way: past
     * this many, gpubridge_send returns GPUBRIDGE_ERR_FULL until the program
     * polls (calls go on). */
    rt->q_max = 0;
    for (size_t i = 0; i < rt->engine->n_types; i++)
        if (rt->engine->types[i].rk)
            rt->q_max += 4ull * gb_rk_capacity(rt->engine->types[i].rk);
out:
    pthread_mutex_unlock(&rt->lock);
    free(ecfg);
    return e;
}

gpubridge_mode gpubridge_runtime_mode(const gpubridge_runtime_t *rt)
{
    return rt ? (gpubridge_mode)rt->mode : GPUBRIDGE_MODE_AUTO;
}

int gpubridge_runtime_device(const gpubridge_runtime_t *rt) { return rt ? rt->device : -1; }

/* The served list grows only before the start, under the lock. */
size_t gpubridge_type_count(const gpubridge_runtime_t *crt)
{
    if (!crt)
        return 0;
    gpubridge_runtime_t *rt = (gpubridge_runtime_t *)crt; /* the lock is not part of its value */
    pthread_mutex_lock(&rt->lock);
    const size_t n = rt->n_served;
    pthread_mutex_unlock(&rt->lock);
    return n;
}

const char *gpubridge_type_name(const gpubridge_runtime_t *rt, size_t i)
{
    return i < gpubridge_type_count(rt) ? rt->served[i] : NULL;
}

gb_engine_type_t *gbe_type(gpubridge_runtime_t *rt, const char *type, gpubridge_err *code)
{
    if (!rt->engine) {
        *code = gbe_fail(GPUBRIDGE_ERR_STATE, "the runtime has not started: call gpubridge_runtime_start first");
        return NULL;
    }
    gb_engine_type_t *t = gb_engine_find(rt->engine, type);
    if (!t) {
        char names[512] = "";
        size_t n = 0;
        for (size_t i = 0; i < rt->n_served && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", rt->served[i]);
        *code = gbe_fail(GPUBRIDGE_ERR_UNKNOWN_TYPE, "grain type '%s' is not served by this runtime (served: %s)",
                         type, rt->n_served ? names : "none");
        return NULL;
    }
    if (!t->rk) {
        *code = gbe_fail(GPUBRIDGE_ERR_UNKNOWN_TYPE, "grain type '%s' has no ring kernel: no handler is "
                         "registered for it, or it is a team type and arena_mb is 0", type);
        return NULL;
    }
    return t;
}

/* Deactivate (on 0) or activate (on 1) type. */
static gpubridge_err set_active(gpubridge_runtime_t *rt, const char *type, int on)
{
    const char *what = on ? "gpubridge_activate" : "gpubridge_deactivate";
    if (!rt || !type)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "%s: %s is NULL", what, rt ? "the grain type" : "the runtime");
    gpubridge_err e = GPUBRIDGE_OK;
    pthread_mutex_lock(&rt->lock);
    gb_engine_type_t *t = gbe_type(rt, type, &e);
    if (t) {
        gb_err ge = on ? gb_rk_activate(t->rk, 5000) : gb_rk_deactivate(t->rk, 5000);
        if (ge != GB_OK)
            e = gbe_fail(gbe_err_of(ge), "%s '%s': %s", what, type, gb_strerror(ge));
    }
    pthread_mutex_unlock(&rt->lock);
    return e;
}

gpubridge_err gpubridge_activate(gpubridge_runtime_t *rt, const char *type) { return set_active(rt, type, 1); }
gpubridge_err gpubridge_deactivate(gpubridge_runtime_t *rt, const char *type) { return set_active(rt, type, 0); }

static gpubridge_placement placement_of(gb_placement p)
{
    switch (p) {
    case GB_PLACEMENT_HOST: return GPUBRIDGE_PLACEMENT_HOST;
    case GB_PLACEMENT_MAPPED: return GPUBRIDGE_PLACEMENT_MAPPED;
    default: return GPUBRIDGE_PLACEMENT_STAGING;
    }
}

static void fill_telemetry(gpubridge_runtime_t *rt, gb_rk_t *rk, gpubridge_telemetry_t *out)
{
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    out->mode = (gpubridge_mode)st.mode; /* a persistent type that fell back runs relaunch */
    out->placement = placement_of(st.placement);
    out->state = st.state == GB_RK_TERMINATED ? GPUBRIDGE_TYPE_TERMINATED
                 : st.state == GB_RK_FAILED   ? GPUBRIDGE_TYPE_FAILED
                                              : GPUBRIDGE_TYPE_RUNNING;
    out->active = gb_rk_is_active(rk);
    out->processed = st.processed;
    out->errors = st.errors;
    out->sent = st.sent;
    out->in_flight = gb_rk_in_flight(rk);
    out->launches = st.launches;
    out->activations = st.activations;
    out->evicted = st.evicted;
    out->refused = st.refused;
    out->capacity = st.capacity;
    out->slot_size = st.slot_size;
    out->max_payload = gb_rk_large_max(rk);
    out->lanes = st.lanes;
    out->last_error = st.last_error;
    snprintf(out->last_error_name, sizeof out->last_error_name, "%s", st.last_error_name);
    snprintf(out->fallback_reason, sizeof out->fallback_reason, "%s", st.fallback_reason);
    (void)rt;
}

gpubridge_err gpubridge_telemetry(gpubridge_runtime_t *rt, const char *type, gpubridge_telemetry_t *out)
{
    if (!rt || !type || !out)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_telemetry: %s is NULL",
                        !rt ? "the runtime" : !type ? "the grain type" : "out");
    gpubridge_err e = GPUBRIDGE_OK;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&rt->lock);
    out->mode = (gpubridge_mode)rt->mode;
    out->device = rt->device;
    out->queued = rt->q_len;
    out->placement = rt->mode == GB_MODE_CPU ? GPUBRIDGE_PLACEMENT_HOST : GPUBRIDGE_PLACEMENT_AUTO;
    gb_engine_type_t *t = rt->engine ? gb_engine_find(rt->engine, type) : NULL;
    if (t && !t->rk)
        out->state = GPUBRIDGE_TYPE_UNAVAILABLE;
    else if (t)
        fill_telemetry(rt, t->rk, out);
    else
        gbe_type(rt, type, &e); /* the reason */
    pthread_mutex_unlock(&rt->lock);
    return e;
}

static const char *slot_text(uint32_t status)
{
    switch (status) {
    case GB_SLOT_OK: return "ok";
    case GB_SLOT_UNKNOWN_MESSAGE_TYPE: return "the grain type has no such message type";
    case GB_SLOT_TOO_LARGE: return "the reply does not fit";
    case GB_SLOT_GRAIN_TABLE_FULL: return "activation table full: every activation of this grain type that shares "
                                          "this key's partition was used within its collection age or has requests "
                                          "in flight; retry later, raise grains.max_grains, or deactivate grains "
                                          "you are done with";
    case GB_SLOT_HANDLER_ERROR: return "the grain's handler refused the request";
    case GB_SLOT_NOT_ACTIVE: return "no activation of that key";
    case GB_SLOT_EVICTED_FULL: return "activation table full, and the store of evicted activations reached its bound "
                                      "(grains.max_evicted_kb); retry later";
    default: return "refused";
    }
}

const char *gpubridge_reply_text(gpubridge_runtime_t *rt, const gpubridge_reply_t *r, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return "";
    buf[0] = '\0';
    if (!r)
        return buf;
    (void)rt;
    const gb_grain_desc_t *d = r->type ? gb_grain_get(gb_grain_kind_of(r->type)) : NULL;
    if (r->status != GB_SLOT_OK && d && d->hooks && d->hooks->error_text) {
        gb_slot_hdr_t h = {r->key, r->corr, (uint16_t)r->msg_type, (uint16_t)r->status, r->len, r->aux, 0};
        const char *t = d->hooks->error_text(&h, buf, cap);
        if (t) {
            if (t != buf)
                snprintf(buf, cap, "%s", t);
            return buf;
        }
    }
    if (r->status == GB_SLOT_HANDLER_ERROR)
        snprintf(buf, cap, "%s (detail %u)", slot_text(r->status), r->aux);
    else
        snprintf(buf, cap, "%s", slot_text(r->status));
    return buf;
}
