/* The embedding API (include/gpubridge/runtime.h): lifecycle, registration,
 * control and telemetry, on the engine the daemon uses (engine.h). */
#include "api_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detect.h"
#include "grain_libs.h"
#include "grain_registry.h"
#include "log.h"
#include "runtime.h"

static _Thread_local char g_msg[768];

gpubridge_err gbe_fail(gpubridge_err code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *gpubridge_last_error(void) { return g_msg; }

const char *gpubridge_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = GB_EMBED_VERSION_MAJOR;
    if (minor)
        *minor = GB_EMBED_VERSION_MINOR;
    if (patch)
        *patch = GB_EMBED_VERSION_PATCH;
    return GB_VERSION;
}

const char *gpubridge_strerror(gpubridge_err err)
{
    switch (err) {
    case GPUBRIDGE_OK: return "ok";
    case GPUBRIDGE_ERR_INVALID: return "invalid argument";
    case GPUBRIDGE_ERR_NOMEM: return "out of memory";
    case GPUBRIDGE_ERR_CONFIG: return "invalid or missing configuration";
    case GPUBRIDGE_ERR_GRAIN: return "grain type or library refused";
    case GPUBRIDGE_ERR_UNKNOWN_TYPE: return "unknown grain type or message type";
    case GPUBRIDGE_ERR_TOO_LARGE: return "too large";
    case GPUBRIDGE_ERR_FULL: return "ring full (poll replies, then retry)";
    case GPUBRIDGE_ERR_TIMEOUT: return "timed out";
    case GPUBRIDGE_ERR_EMPTY: return "no reply waiting";
    case GPUBRIDGE_ERR_STATE: return "not valid in the runtime's state";
    case GPUBRIDGE_ERR_TERMINATED: return "grain type terminated";
    case GPUBRIDGE_ERR_NODEV: return "no GPU for this mode";
    case GPUBRIDGE_ERR_GPU: return "GPU error";
    case GPUBRIDGE_ERR_INTERNAL: return "internal error";
    case GPUBRIDGE_ERR__COUNT: break;
    }
    return "unknown error";
}

gpubridge_err gbe_err_of(gb_err e)
{
    switch (e) {
    case GB_OK: return GPUBRIDGE_OK;
    case GB_ERR_NOMEM: return GPUBRIDGE_ERR_NOMEM;
    case GB_ERR_INVALID: return GPUBRIDGE_ERR_INVALID;
    case GB_ERR_CONFIG: case GB_ERR_IO: return GPUBRIDGE_ERR_CONFIG;
    case GB_ERR_FULL: case GB_ERR_NOSPACE: return GPUBRIDGE_ERR_FULL;
    case GB_ERR_EMPTY: return GPUBRIDGE_ERR_EMPTY;
    case GB_ERR_TIMEOUT: return GPUBRIDGE_ERR_TIMEOUT;
    case GB_ERR_NODEV: case GB_ERR_UNSUPPORTED: return GPUBRIDGE_ERR_NODEV;
    case GB_ERR_CUDA: return GPUBRIDGE_ERR_GPU;
    case GB_ERR_UNKNOWN_TYPE: return GPUBRIDGE_ERR_UNKNOWN_TYPE;
    case GB_ERR_TOO_LARGE: return GPUBRIDGE_ERR_TOO_LARGE;
    case GB_ERR_TERMINATED: return GPUBRIDGE_ERR_TERMINATED;
    case GB_ERR_STATE: return GPUBRIDGE_ERR_STATE;
    default: return GPUBRIDGE_ERR_INTERNAL;
    }
}

const char *gpubridge_mode_name(gpubridge_mode mode)
{
    return mode >= GPUBRIDGE_MODE_AUTO && mode <= GPUBRIDGE_MODE_CPU ? gb_mode_name((gb_mode)mode) : "?";
}

gpubridge_err gpubridge_mode_parse(const char *name, gpubridge_mode *out)
{
    gb_mode m;
    if (!out)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_mode_parse: out is NULL");
    if (!name || gb_mode_parse(name, &m) != 0)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "unknown mode '%s' (valid: auto, persistent, relaunch, cpu)",
                        name ? name : "(null)");
    *out = (gpubridge_mode)m;
    return GPUBRIDGE_OK;
}

void gpubridge_options_init(gpubridge_options_t *o)
{
    if (o)
        *o = (gpubridge_options_t)GPUBRIDGE_OPTIONS_INIT;
}

/* The config of o (file, text or defaults) and the log level. */
static gpubridge_err load_config(const gpubridge_options_t *o, gb_config_t *cfg)
{
    char err[512] = "";
    gb_config_defaults(cfg);
    gb_err e = GB_OK;
    if (o->config_path)
        e = gb_config_load(o->config_path, cfg, err, sizeof err);
    else if (o->config_text)
        e = gb_config_load_string(o->config_text, "<config_text>", cfg, err, sizeof err);
    if (e != GB_OK)
        return gbe_fail(GPUBRIDGE_ERR_CONFIG, "config: %s", err[0] ? err : gb_strerror(e));
    gb_log_level level = o->config_path || o->config_text ? cfg->log_level : GB_LOG_WARN;
    if (o->log_level && gb_log_level_parse(o->log_level, &level) != 0)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "unknown log level '%s' (valid: error, warn, info, debug, diag)",
                        o->log_level);
    gb_log_set_level(level);
    if (o->device < -1)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "device %d: a CUDA device index (0, 1, ...) or -1 wanted",
                        o->device);
    if (o->device >= 0) {
        cfg->device = o->device;
        cfg->n_devices = 0;
        cfg->devices_all = false;
    } else if (cfg->n_devices > 1 || cfg->devices_all) {
        return gbe_fail(GPUBRIDGE_ERR_CONFIG, "%s: the embedding API runs on one device, and the config's devices "
                        "lists several: set options.device, or give the config one device", cfg->source);
    }
    if (o->placement == GPUBRIDGE_PLACEMENT_STAGING)
        cfg->force_fallback_placement = true;
    else if (o->placement != GPUBRIDGE_PLACEMENT_AUTO && o->placement != GPUBRIDGE_PLACEMENT_MAPPED)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "placement %d: AUTO, MAPPED or STAGING wanted", (int)o->placement);
    return GPUBRIDGE_OK;
}

/* The mode this host runs for o (and the config's hosts entries, GPUBRIDGE_MODE). */
static gpubridge_err decide_mode(const gpubridge_options_t *o, gpubridge_runtime_t *rt)
{
    gpubridge_mode m = o->mode;
    const char *cli = NULL;
    if (o->mode_name) {
        gpubridge_err pe = gpubridge_mode_parse(o->mode_name, &m);
        if (pe != GPUBRIDGE_OK)
            return pe;
        cli = gpubridge_mode_name(m);
    } else if (m != GPUBRIDGE_MODE_AUTO) {
        if (m < GPUBRIDGE_MODE_AUTO || m > GPUBRIDGE_MODE_CPU)
            return gbe_fail(GPUBRIDGE_ERR_INVALID, "mode %d: GPUBRIDGE_MODE_AUTO, _PERSISTENT, _RELAUNCH or _CPU "
                            "wanted", (int)m);
        cli = gpubridge_mode_name(m);
    }
    gb_facts_t facts;
    gb_selection_t sel;
    char err[512] = "";
    if (gb_detect_run(&rt->cfg, "/", cli, &facts, &sel, err, sizeof err) != GB_OK)
        return gbe_fail(GPUBRIDGE_ERR_CONFIG, "%s", err);
    if (sel.fell_back && (o->flags & GPUBRIDGE_NO_CPU_FALLBACK))
        return gbe_fail(GPUBRIDGE_ERR_NODEV, "mode %s needs a GPU, and GPUBRIDGE_NO_CPU_FALLBACK forbids cpu "
                        "mode: %s", cli ? cli : "auto", sel.decision.why);
    rt->mode = sel.mode;
    rt->device = sel.mode == GB_MODE_CPU ? -1 : sel.device;
    return GPUBRIDGE_OK;
}

static int is_gpu(const gpubridge_runtime_t *rt) { return rt->mode == GB_MODE_PERSISTENT || rt->mode == GB_MODE_RELAUNCH; }

/* Adds type to the served list (once). */
static gpubridge_err serve(gpubridge_runtime_t *rt, const char *type)
{
    for (size_t i = 0; i < rt->n_served; i++)
        if (strcmp(rt->served[i], type) == 0)
            return GPUBRIDGE_OK;
    if (rt->n_served >= GB_MAX_GRAIN_TYPES)
        return gbe_fail(GPUBRIDGE_ERR_GRAIN, "grain type '%s': a runtime serves at most %d grain types", type,
                        GB_MAX_GRAIN_TYPES);
    snprintf(rt->served[rt->n_served++], GB_NAME_LEN, "%s", type);
    return GPUBRIDGE_OK;
}

/* The config's grain libraries, each with its FILE:LINE on error. */
static gpubridge_err load_config_libs(gpubridge_runtime_t *rt)
{
    char why[768];
    for (size_t i = 0; i < rt->cfg.n_libs; i++) {
        const gb_grain_lib_config_t *l = &rt->cfg.libs[i];
        if (gb_grain_lib_load(&rt->cfg, l->path, is_gpu(rt), true, NULL, why, sizeof why) != GB_OK)
            return gbe_fail(GPUBRIDGE_ERR_GRAIN, "%s:%u: grains[%u].library: %s", l->file, l->line, l->index, why);
    }
    return GPUBRIDGE_OK;
}

gpubridge_err gpubridge_runtime_new(const gpubridge_options_t *opts, gpubridge_runtime_t **out)
{
    if (!out)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_runtime_new: out is NULL");
    *out = NULL;
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    if (opts) {
        if (opts->size != sizeof o)
            return gbe_fail(GPUBRIDGE_ERR_INVALID, "options of %u bytes, this library's are %zu: initialise them "
                            "with GPUBRIDGE_OPTIONS_INIT or gpubridge_options_init", opts->size, sizeof o);
        o = *opts;
    }
    if (o.flags & ~(GPUBRIDGE_NO_CONFIG_GRAINS | GPUBRIDGE_NO_CPU_FALLBACK))
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "unknown flags 0x%x", o.flags);
    gpubridge_runtime_t *rt = calloc(1, sizeof *rt);
    if (!rt)
        return gbe_fail(GPUBRIDGE_ERR_NOMEM, "out of memory");
    gpubridge_err e = load_config(&o, &rt->cfg);
    if (e == GPUBRIDGE_OK)
        e = decide_mode(&o, rt);
    if (e == GPUBRIDGE_OK)
        e = load_config_libs(rt);
    for (size_t i = 0; e == GPUBRIDGE_OK && !(o.flags & GPUBRIDGE_NO_CONFIG_GRAINS) && i < rt->cfg.n_grains; i++)
        e = serve(rt, rt->cfg.grains[i].type);
    if (e != GPUBRIDGE_OK) {
        free(rt);
        return e;
    }
    pthread_mutex_init(&rt->lock, NULL);
    *out = rt;
    return GPUBRIDGE_OK;
}

void gpubridge_runtime_destroy(gpubridge_runtime_t **prt)
{
    if (!prt || !*prt)
        return;
    gpubridge_runtime_t *rt = *prt;
    gb_engine_destroy(&rt->engine, 2000);
    gbe_queue_free(rt);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
    *prt = NULL;
}

/* Locks rt for a registration: GPUBRIDGE_OK with the lock held, or an error
 * (rt NULL, started) without it. */
static gpubridge_err lock_unstarted(gpubridge_runtime_t *rt, const char *what)
{
    if (!rt)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "%s: the runtime is NULL", what);
    pthread_mutex_lock(&rt->lock);
    if (rt->engine) {
        pthread_mutex_unlock(&rt->lock);
        return gbe_fail(GPUBRIDGE_ERR_STATE, "%s: the runtime has started; register grain types before "
                        "gpubridge_runtime_start", what);
    }
    return GPUBRIDGE_OK;
}

/* Why d cannot be served by rt, or GPUBRIDGE_OK once it is registered. */
static gpubridge_err register_desc(gpubridge_runtime_t *rt, const gb_grain_desc_t *d)
{
    const char *name = d->abi == GB_GRAIN_ABI && d->size == sizeof *d && d->name ? d->name : NULL;
    if (name && is_gpu(rt) && !d->gpu)
        return gbe_fail(GPUBRIDGE_ERR_GRAIN, "grain type '%s' has no GPU code (its file was compiled as C, not by "
                        "nvcc), and this runtime runs in %s mode: compile it with nvcc, or run in cpu mode", name,
                        gb_mode_name(rt->mode));
    if (name && gb_grain_get(gb_grain_kind_of(name)) == d)
        return GPUBRIDGE_OK; /* registered before (by this or another runtime) */
    char err[384];
    if (!gb_grain_register(d, err, sizeof err))
        return gbe_fail(GPUBRIDGE_ERR_GRAIN, "%s", err);
    return GPUBRIDGE_OK;
}

gpubridge_err gpubridge_register_grain(gpubridge_runtime_t *rt, const gb_grain_desc_t *desc)
{
    if (rt && !desc)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_register_grain: the descriptor is NULL");
    gpubridge_err e = lock_unstarted(rt, "gpubridge_register_grain");
    if (e != GPUBRIDGE_OK)
        return e;
    e = register_desc(rt, desc);
    if (e == GPUBRIDGE_OK)
        e = serve(rt, desc->name);
    pthread_mutex_unlock(&rt->lock);
    return e;
}

gpubridge_err gpubridge_register_library(gpubridge_runtime_t *rt, const char *path)
{
    if (rt && (!path || !*path))
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_register_library: no path");
    gpubridge_err e = lock_unstarted(rt, "gpubridge_register_library");
    if (e != GPUBRIDGE_OK)
        return e;
    gb_config_t *types = calloc(1, sizeof *types); /* the library's types, in a config of its own */
    char why[768];
    if (!types)
        e = gbe_fail(GPUBRIDGE_ERR_NOMEM, "out of memory");
    else if (gb_grain_lib_load(types, path, is_gpu(rt), true, NULL, why, sizeof why) != GB_OK)
        e = gbe_fail(GPUBRIDGE_ERR_GRAIN, "%s", why);
    for (size_t i = 0; e == GPUBRIDGE_OK && i < types->n_grains; i++)
        e = serve(rt, types->grains[i].type);
    free(types);
    pthread_mutex_unlock(&rt->lock);
    return e;
}

gpubridge_err gpubridge_serve(gpubridge_runtime_t *rt, const char *type)
{
    if (rt && !type)
        return gbe_fail(GPUBRIDGE_ERR_INVALID, "gpubridge_serve: the grain type is NULL");
    gpubridge_err e = lock_unstarted(rt, "gpubridge_serve");
    if (e != GPUBRIDGE_OK)
        return e;
    const int kind = gb_grain_kind_of(type);
    if (!kind) {
        char names[512] = "";
        size_t n = 0;
        for (int k = 1; k <= gb_grain_count() && n < sizeof names; k++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", k > 1 ? ", " : "", gb_grain_get(k)->name);
        e = gbe_fail(GPUBRIDGE_ERR_UNKNOWN_TYPE, "no grain type '%s' is registered (registered: %s; or register "
                     "it first)", type, names);
    }
    else if (is_gpu(rt) && !gb_grain_get(kind)->gpu)
        e = gbe_fail(GPUBRIDGE_ERR_GRAIN, "grain type '%s' has no GPU code, and this runtime runs in %s mode",
                     type, gb_mode_name(rt->mode));
    else
        e = serve(rt, type);
    pthread_mutex_unlock(&rt->lock);
    return e;
}
