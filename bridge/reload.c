/* SIGHUP reload (see reload.h). Runs on the server thread (in a supervisor,
 * its loop), which is the only writer of the live config; the ZAP thread
 * reads the allow-list under gb_curve_lock (server.h). */
#include "reload.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "detect.h"
#include "grain_libs.h"
#include "grain_registry.h"
#include "log.h"

/* Keys read only at start: changed ones need a restart. */
typedef struct restart_key {
    const char *name;
    size_t off, size;
} restart_key_t;

#define RK(name, field) {name, offsetof(gb_config_t, field), sizeof(((gb_config_t *)0)->field)}
static const restart_key_t g_restart_keys[] = {
    RK("endpoints", endpoints),
    RK("endpoints", n_endpoints),
    RK("device", device),
    RK("devices", devices),
    RK("devices", n_devices),
    RK("devices", devices_all),
    RK("mode", mode),
    RK("max_message_size", max_message_size),
    RK("shutdown_drain_ms", shutdown_drain_ms),
    RK("arena_mb", arena_mb),
    RK("io_threads", io_threads),
    RK("reply_backlog_mb", reply_backlog_mb),
    RK("persistent.idle_spin_polls", idle_spin_polls),
    RK("persistent.idle_backoff_max_ns", idle_backoff_max_ns),
    RK("persistent.heartbeat_deadline_ms", heartbeat_deadline_ms),
    RK("relaunch.max_messages_per_launch", max_messages_per_launch),
    RK("placement.force_fallback", force_fallback_placement),
    RK("grains", grains),
    RK("grains", n_grains),
    RK("curve.enabled", curve.enabled),
    RK("curve.server_secret_key_file", curve.server_secret_key_file),
    RK("curve.server_public_key", curve.server_public_key),
    RK("metrics.enabled", metrics.enabled),
    RK("metrics.listen", metrics.listen),
    RK("messaging.outbox_kb", mail_outbox_kb),
    RK("messaging.hold_ms", mail_hold_ms),
    RK("messaging.max_hops", mail_max_hops),
    RK("messaging.device_links", mail_device_links),
    RK("messaging.link_slots", mail_link_slots),
};

/* The same grain libraries, by path (where each was given does not count). */
static bool same_libs(const gb_config_t *a, const gb_config_t *b)
{
    if (a->n_libs != b->n_libs)
        return false;
    for (size_t i = 0; i < a->n_libs; i++)
        if (strcmp(a->libs[i].path, b->libs[i].path) != 0)
            return false;
    return true;
}

/* WARNs once per restart-only key that changed; returns how many. */
static int restart_keys(const gb_config_t *live, const gb_config_t *next, const char *who)
{
    int n = 0;
    const char *last = NULL;
    bool grains_said = false;
    for (size_t i = 0; i < sizeof g_restart_keys / sizeof g_restart_keys[0]; i++) {
        const restart_key_t *k = &g_restart_keys[i];
        if (memcmp((const char *)live + k->off, (const char *)next + k->off, k->size) == 0)
            continue;
        if (last && strcmp(last, k->name) == 0)
            continue; /* a table and its count: one line */
        GB_WARN("%sreload: %s changed; it takes effect only after a restart", who, k->name);
        last = k->name;
        grains_said |= strcmp(k->name, "grains") == 0;
        n++;
    }
    if (!same_libs(live, next) && !grains_said) {
        GB_WARN("%sreload: grains changed; it takes effect only after a restart", who);
        n++;
    }
    return n;
}

/* What the hosts entries choose for this host, as text ("" when none matches). */
static void host_choice(const gb_config_t *cfg, const char *hostname, char *out, size_t len)
{
    int i = gb_host_match(cfg, hostname);
    if (i < 0) {
        snprintf(out, len, "no entry");
        return;
    }
    const gb_host_config_t *h = &cfg->hosts[i];
    snprintf(out, len, "entry '%s': mode %s, device %s%d", h->pattern, gb_mode_name(h->mode),
             h->has_device ? "" : "default ", h->has_device ? h->device : cfg->device);
}

/* -1: the hosts entries are the same; 0: they changed, not what they choose
 * for this host; 1: that too (a restart). before, after: each choice. */
static int hosts_change(const gb_config_t *live, const gb_config_t *next, const char *hostname, char *before,
                        char *after, size_t len)
{
    if (live->n_hosts == next->n_hosts &&
        memcmp(live->hosts, next->hosts, sizeof live->hosts[0] * live->n_hosts) == 0)
        return -1;
    host_choice(live, hostname, before, len);
    host_choice(next, hostname, after, len);
    return strcmp(before, after) != 0;
}

/* Returns 1 when what the entries choose for this host changed (a restart). */
static int apply_hosts(gb_config_t *live, const gb_config_t *next, const char *hostname)
{
    char before[160], after[160];
    const int change = hosts_change(live, next, hostname, before, after, sizeof before);
    if (change < 0)
        return 0;
    live->n_hosts = next->n_hosts;
    memcpy(live->hosts, next->hosts, sizeof live->hosts);
    GB_INFO("reload: hosts: %zu entries; for this host (%s): %s", live->n_hosts,
            hostname ? hostname : "?", after);
    if (!change)
        return 0;
    GB_WARN("reload: the hosts entry for this host changed (was %s); the mode and device it "
            "chooses take effect only after a restart", before);
    return 1;
}

/* Who may connect and who may change state: applied where the public
 * socket is (who: "" in the bridge, "supervisor: " in a supervisor). */
static void apply_access(gb_config_t *live, const gb_config_t *next, const char *who)
{
    if (next->curve.n_allowed != live->curve.n_allowed ||
        memcmp(next->curve.allowed_clients, live->curve.allowed_clients,
               sizeof next->curve.allowed_clients) != 0) {
        gb_curve_lock();
        memcpy(live->curve.allowed_clients, next->curve.allowed_clients,
               sizeof live->curve.allowed_clients);
        live->curve.n_allowed = next->curve.n_allowed;
        gb_curve_unlock();
        GB_INFO("%sreload: curve.allowed_clients: %zu key(s)%s", who, live->curve.n_allowed,
                live->curve.n_allowed ? "" : " (any client with the server key)");
    }
    if (next->curve.n_admin != live->curve.n_admin ||
        memcmp(next->curve.admin_clients, live->curve.admin_clients, sizeof next->curve.admin_clients) != 0) {
        gb_curve_lock();
        memcpy(live->curve.admin_clients, next->curve.admin_clients, sizeof live->curve.admin_clients);
        live->curve.n_admin = next->curve.n_admin;
        gb_curve_unlock();
        GB_INFO("%sreload: curve.admin_clients: %zu key(s)", who, live->curve.n_admin);
    }
    if (next->remote_control != live->remote_control) {
        live->remote_control = next->remote_control;
        GB_INFO("%sreload: remote_control %s", who, live->remote_control ? "true" : "false");
    }
}

int gb_reload_apply(gb_config_t *live, const gb_config_t *next, bool keep_log_level,
                    const char *hostname)
{
    if (next->log_level != live->log_level) {
        if (keep_log_level) {
            GB_INFO("reload: log_level %s in the file; --log-level %s stays",
                    gb_log_level_name(next->log_level), gb_log_level_name(live->log_level));
        } else {
            /* Said at the more verbose of the two levels, so that it shows. */
            gb_log_level was = live->log_level;
            if (next->log_level > was)
                gb_log_set_level(next->log_level);
            GB_INFO("reload: log_level %s -> %s", gb_log_level_name(was),
                    gb_log_level_name(next->log_level));
            live->log_level = next->log_level;
            gb_log_set_level(live->log_level);
        }
    }
    if (next->log_format != live->log_format) {
        live->log_format = next->log_format;
        gb_log_set_format(live->log_format);
        GB_INFO("reload: log_format %s", gb_log_format_name(live->log_format));
    }
    int restart = apply_hosts(live, next, hostname);
    apply_access(live, next, "");
    return restart + restart_keys(live, next, "");
}

/* --max-message-size beats the file's value, on reload too: said once for
 * each value the file gives, not at every SIGHUP, and not as a change that a
 * restart would apply (a supervisor passes its own to each worker). */
static void keep_cli_max_message_size(gb_reload_t *r, gb_config_t *next)
{
    if (!r->cli_max_message_size)
        return;
    if (next->max_message_size != r->cli_max_message_size && next->max_message_size != r->mms_said)
        GB_INFO("reload: max_message_size %u in the file; --max-message-size %u stays in force",
                next->max_message_size, r->cli_max_message_size);
    r->mms_said = next->max_message_size;
    next->max_message_size = r->live->max_message_size;
}

/* Loads r->path into next; -1 (said) when it cannot be read. who: as above. */
static int load_next(gb_reload_t *r, gb_config_t *next, const char *who)
{
    if (!r->path) {
        GB_WARN("%sreload: no --config file was given; nothing to reload", who);
        return -1;
    }
    char err[512];
    if (gb_config_load(r->path, next, err, sizeof err) != GB_OK ||
        gb_grain_libs_check_files(next, r->live, err, sizeof err) != GB_OK) {
        GB_ERROR("%sreload: %s; the running configuration stays", who, err);
        return -1;
    }
    keep_cli_max_message_size(r, next);
    return 0;
}

/* A supervised worker serves a private ipc socket without CURVE: the public
 * socket's keys are its supervisor's, which applies them and says so. */
static void keep_supervisor_keys(const gb_config_t *live, gb_config_t *next)
{
    memcpy(next->endpoints, live->endpoints, sizeof next->endpoints);
    next->n_endpoints = live->n_endpoints;
    next->curve = live->curve;
    next->remote_control = live->remote_control;
}

/* The same libraries add the same types (grain_libs.c): as at start, so that
 * an unchanged file reads as unchanged. */
static void keep_library_types(const gb_config_t *live, gb_config_t *next)
{
    if (!same_libs(live, next))
        return;
    for (size_t i = 0; i < live->n_grains; i++)
        if (!gb_config_grain(next, live->grains[i].type) && gb_grain_kind_of(live->grains[i].type))
            gb_config_add_grain(next, live->grains[i].type);
}

int gb_reload_file(gb_reload_t *r)
{
    gb_config_t next;
    if (load_next(r, &next, "") != 0)
        return -1;
    if (r->supervised)
        keep_supervisor_keys(r->live, &next);
    keep_library_types(r->live, &next);
    int n = gb_reload_apply(r->live, &next, r->cli_log_level, r->hostname);
    GB_INFO("reload: %s applied%s", r->path, n ? "; some changes need a restart (see above)" : "");
    return n;
}

int gb_reload_supervisor(gb_reload_t *r)
{
    gb_config_t next;
    if (!r->path)
        return -1; /* the worker says so */
    if (load_next(r, &next, "supervisor: ") != 0)
        return -1;
    /* Its own log level and format follow the file as the worker's do (the
     * worker says so); its lines here at the more verbose of the two levels. */
    const gb_log_level level = r->cli_log_level ? r->live->log_level : next.log_level;
    if (level > r->live->log_level)
        gb_log_set_level(level);
    if (next.log_format != r->live->log_format) {
        r->live->log_format = next.log_format;
        gb_log_set_format(next.log_format);
    }
    apply_access(r->live, &next, "supervisor: ");
    /* Every worker runs the supervisor's config (see gb_supervise), so the
     * supervisor names every key that needs a restart. */
    keep_library_types(r->live, &next);
    int n = restart_keys(r->live, &next, "supervisor: ");
    /* The hosts entries matter only at start: the workers keep the ones the
     * supervisor started with. */
    char before[160], after[160];
    if (hosts_change(r->live, &next, r->hostname, before, after, sizeof before) > 0) {
        GB_WARN("supervisor: reload: the hosts entry for this host (%s) changed (was %s, now %s); the mode and "
                "device it chooses take effect only after a restart", r->hostname ? r->hostname : "?", before,
                after);
        n++;
    }
    r->live->log_level = level;
    gb_log_set_level(level);
    return n;
}

void gb_reload_run(void *ctx, gb_server_t *s)
{
    gb_reload_t *r = ctx;
    if (r->refusals && *r->refusals != r->refusals_seen) {
        r->refusals_seen = *r->refusals;
        GB_ERROR("reload: the supervisor could not load the config file (its log says why); the running "
                 "configuration stays");
        gb_server_count_reload(s, 0);
    }
    if (r->hups && *r->hups == r->hups_seen)
        return;
    if (r->hups)
        r->hups_seen = *r->hups;
    gb_server_count_reload(s, gb_reload_file(r) >= 0);
}
