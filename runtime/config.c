/* Config loading: libconfig parses, this file validates every key against a
 * schema and reports the first problem as "FILE:LINE: what is wrong".
 *
 * Decisions (the design card is silent on them):
 * - The first error stops the load; a message names the key path
 *   (e.g. "grains[1].slot_size") so the user needs nothing but the message.
 * - Grain entries merge by type name into the defaults; a type that has no
 *   defaults (not one of the built-in grain types) starts from
 *   gbi_generic_grain. Which types have handlers is the server's business.
 * - A hosts entry must give `mode` (gb_host_config_t has no "mode unset"), and
 *   two entries with the same pattern are an error: the second could never win.
 * - CURVE keys are checked for shape (40 Z85 characters) here; whether they are
 *   real keys is the server's business at bind time. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config_file.h"

/* ---------------------------------------------------------------- modes */

static const char *const g_mode_names[] = {"auto", "persistent", "relaunch", "cpu"};
#define GBI_MODE_LIST "auto, persistent, relaunch, cpu"
#define GBI_LEVEL_LIST "error, warn, info, debug, diag"

const char *gb_mode_name(gb_mode mode)
{
    return (unsigned)mode <= GB_MODE_CPU ? g_mode_names[mode] : "?";
}

int gb_mode_parse(const char *name, gb_mode *out)
{
    for (int i = 0; name && i <= GB_MODE_CPU; i++) {
        if (strcmp(name, g_mode_names[i]) == 0) {
            *out = (gb_mode)i;
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------- defaults */

/* Zero-filling every buffer (strncpy pads) keeps configs memcmp-comparable. */
static void gbi_copy_str(char *dst, size_t cap, const char *src)
{
    strncpy(dst, src, cap - 1);
    dst[cap - 1] = '\0';
}

/* Orleans' default collection age: 15 minutes. */

static const gb_grain_config_t gbi_generic_grain = {
    .type = "", .queue_capacity = 1024, .slot_size = 256,
    .messages_per_iteration = 256, .max_grains = 1024, .cpu_threads = 0,
    .collection_age_s = GB_COLLECTION_AGE_S_DEFAULT, .max_evicted_kb = GB_MAX_EVICTED_KB_DEFAULT,
};


uint32_t gb_config_io_threads_default(void)
{
    /* One: a round trip through an I/O thread adds two thread hand-offs, and
     * where cores are few (the cpu grain workers, ZeroMQ's own I/O thread)
     * more threads are slower (docs/performance.md, "I/O threads"). A host
     * with many clients and cores to spare raises it. */
    return 1;
}

void gb_config_defaults(gb_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    gbi_copy_str(cfg->source, sizeof cfg->source, "<defaults>");
    cfg->log_level = GB_LOG_INFO;
    cfg->n_endpoints = 2;
    gbi_copy_str(cfg->endpoints[0], GB_PATH_LEN, "tcp://127.0.0.1:5555");
    gbi_copy_str(cfg->endpoints[1], GB_PATH_LEN, "ipc:///tmp/gpubridge.sock");
    cfg->device = 0;
    cfg->mode = GB_MODE_AUTO;
    cfg->max_message_size = 1048576;
    cfg->arena_mb = 1024;
    cfg->shutdown_drain_ms = 10000;
    cfg->reply_backlog_mb = 64;
    cfg->io_threads = gb_config_io_threads_default();
    cfg->idle_spin_polls = 2048;
    cfg->idle_backoff_max_ns = 20000;
    cfg->heartbeat_deadline_ms = 2000;
    cfg->max_messages_per_launch = 4096;
    cfg->mail_outbox_kb = 4096;
    cfg->mail_hold_ms = 10000;
    cfg->mail_max_hops = 64;
    cfg->mail_device_links = true;
    cfg->mail_link_slots = 256;
    cfg->force_fallback_placement = false;
    cfg->n_grains = gb_n_builtin_grain_configs;
    for (size_t i = 0; i < gb_n_builtin_grain_configs; i++)
        cfg->grains[i] = gb_builtin_grain_configs[i];
    cfg->n_hosts = 0;
    cfg->curve.enabled = false;
    cfg->curve.n_allowed = 0;
    cfg->log_format = GB_LOG_TEXT;
    cfg->metrics.enabled = false;
    gbi_copy_str(cfg->metrics.listen, GB_NAME_LEN, GB_METRICS_DEFAULT_LISTEN);
}

const gb_grain_config_t *gb_config_grain(const gb_config_t *cfg, const char *type)
{
    if (!cfg || !type)
        return NULL;
    for (size_t i = 0; i < cfg->n_grains; i++)
        if (strcmp(cfg->grains[i].type, type) == 0)
            return &cfg->grains[i];
    return NULL;
}

gb_grain_config_t *gb_config_add_grain(gb_config_t *cfg, const char *type)
{
    gb_grain_config_t *g = (gb_grain_config_t *)gb_config_grain(cfg, type);
    if (g || cfg->n_grains >= GB_MAX_GRAIN_TYPES)
        return g;
    g = &cfg->grains[cfg->n_grains++];
    *g = gbi_generic_grain;
    gbi_copy_str(g->type, sizeof g->type, type);
    return g;
}

/* ------------------------------------------------------------ reporting */

typedef struct gbi_ctx {
    const char *name; /* file name for messages when libconfig has none */
    char *err;
    size_t errlen;
    bool from_file; /* name is the file's path: relative paths in it are joined to its folder */
} gbi_ctx;

static const char *gbi_setting_file(const gbi_ctx *c, const config_setting_t *s)
{
    const char *f = s ? config_setting_source_file(s) : NULL;
    return f ? f : c->name;
}

/* Always returns -1 so that callers can `return gbi_fail(...)`. */
static int gbi_fail(gbi_ctx *c, const config_setting_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int gbi_fail(gbi_ctx *c, const config_setting_t *s, const char *fmt, ...)
{
    if (!c->err || c->errlen == 0)
        return -1;
    int n = snprintf(c->err, c->errlen, "%s:%u: ", gbi_setting_file(c, s),
                     s ? (unsigned)config_setting_source_line(s) : 0u);
    if (n >= 0 && (size_t)n < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *gbi_type_name(int type)
{
    switch (type) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT: return "an integer";
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    default: return "nothing";
    }
}

/* ------------------------------------------------------ key validation */

/* Optimal string alignment distance: Levenshtein plus adjacent transpositions,
 * since swapped letters are the commonest typo. */
static size_t gbi_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return (size_t)-1;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* Rejects any member of group s that is not in keys (NULL-terminated). */
static int gbi_check_keys(gbi_ctx *c, const config_setting_t *s, const char *where,
                          const char *const *keys)
{
    int n = config_setting_length(s);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
        const char *name = config_setting_name(m);
        if (!name)
            continue;
        const char *best = NULL;
        size_t best_d = (size_t)-1;
        bool known = false;
        for (const char *const *k = keys; *k; k++) {
            if (strcmp(name, *k) == 0) {
                known = true;
                break;
            }
            size_t dist = gbi_edit_distance(name, *k);
            if (dist < best_d) {
                best_d = dist;
                best = *k;
            }
        }
        if (known)
            continue;
        /* Suggest only a plausible typo; otherwise list what is allowed. */
        if (best && best_d <= 2 + strlen(name) / 4)
            return gbi_fail(c, m, "unknown key '%s' %s; did you mean '%s'?", name, where, best);
        char list[512] = "";
        size_t used = 0;
        for (const char *const *k = keys; *k && used < sizeof list; k++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", k == keys ? "" : ", ", *k);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        return gbi_fail(c, m, "unknown key '%s' %s; valid keys: %s", name, where, list);
    }
    return 0;
}

/* ----------------------------------------------------------- value getters */

/* Reads an integer member in [lo, hi]; absent leaves *out alone. */
static int gbi_get_int(gbi_ctx *c, const config_setting_t *grp, const char *key,
                       const char *path, int64_t lo, int64_t hi, bool pow2, int64_t *out)
{
    const config_setting_t *s = config_setting_get_member(grp, key);
    if (!s)
        return 0;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
        return gbi_fail(c, s, "%s: expected an integer, got %s", path, gbi_type_name(t));
    int64_t v = t == CONFIG_TYPE_INT ? config_setting_get_int(s) : config_setting_get_int64(s);
    if (v < lo || v > hi)
        return gbi_fail(c, s, "%s: %" PRId64 " is out of range (%" PRId64 "..%" PRId64 ")",
                        path, v, lo, hi);
    if (pow2 && (v & (v - 1)) != 0)
        return gbi_fail(c, s, "%s: %" PRId64 " is not a power of two (%" PRId64 "..%" PRId64 ")",
                        path, v, lo, hi);
    *out = v;
    return 0;
}

static int gbi_get_u32(gbi_ctx *c, const config_setting_t *grp, const char *key,
                       const char *path, int64_t lo, int64_t hi, bool pow2, uint32_t *out)
{
    int64_t v = *out;
    if (gbi_get_int(c, grp, key, path, lo, hi, pow2, &v) != 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int gbi_get_bool(gbi_ctx *c, const config_setting_t *grp, const char *key,
                        const char *path, bool *out)
{
    const config_setting_t *s = config_setting_get_member(grp, key);
    if (!s)
        return 0;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_BOOL)
        return gbi_fail(c, s, "%s: expected a boolean (true or false), got %s", path,
                        gbi_type_name(t));
    *out = config_setting_get_bool(s) != 0;
    return 0;
}

/* Checks that s is a string shorter than cap; sets *out to it. */
static int gbi_string_value(gbi_ctx *c, const config_setting_t *s, const char *path,
                            size_t cap, const char **out)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_STRING)
        return gbi_fail(c, s, "%s: expected a string, got %s", path, gbi_type_name(t));
    const char *v = config_setting_get_string(s);
    if (strlen(v) >= cap)
        return gbi_fail(c, s, "%s: too long (%zu characters, at most %zu)", path, strlen(v),
                        cap - 1);
    *out = v;
    return 0;
}

/* Reads a string member; absent leaves *out alone (and returns 0). */
static int gbi_get_str(gbi_ctx *c, const config_setting_t *grp, const char *key,
                       const char *path, size_t cap, const char **out)
{
    const config_setting_t *s = config_setting_get_member(grp, key);
    return s ? gbi_string_value(c, s, path, cap, out) : 0;
}

static int gbi_get_mode(gbi_ctx *c, const config_setting_t *grp, const char *path,
                        gb_mode *out)
{
    const char *v = NULL;
    if (gbi_get_str(c, grp, "mode", path, GB_NAME_LEN, &v) != 0)
        return -1;
    if (v && gb_mode_parse(v, out) != 0)
        return gbi_fail(c, config_setting_get_member(grp, "mode"),
                        "%s: unknown mode '%s'; valid modes: " GBI_MODE_LIST, path, v);
    return 0;
}

/* Returns the group member key, NULL when absent; a non-group is an error. */
static int gbi_get_group(gbi_ctx *c, const config_setting_t *parent, const char *key,
                         const config_setting_t **out)
{
    const config_setting_t *s = config_setting_get_member(parent, key);
    *out = NULL;
    if (!s)
        return 0;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_GROUP)
        return gbi_fail(c, s, "%s: expected a group { ... }, got %s", key, gbi_type_name(t));
    *out = s;
    return 0;
}

/* Returns a list/array member for a table (sequence of entries). */
static int gbi_get_seq(gbi_ctx *c, const config_setting_t *parent, const char *key,
                       const char *path, bool want_groups, const config_setting_t **out)
{
    const config_setting_t *s = config_setting_get_member(parent, key);
    *out = NULL;
    if (!s)
        return 0;
    int t = config_setting_type(s);
    if (want_groups && t != CONFIG_TYPE_LIST)
        return gbi_fail(c, s, "%s: expected a list ( { ... }, ... ), got %s", path,
                        gbi_type_name(t));
    if (!want_groups && t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return gbi_fail(c, s, "%s: expected an array [ \"...\", ... ], got %s", path,
                        gbi_type_name(t));
    *out = s;
    return 0;
}

/* ----------------------------------------------------------- sections */

static const char *const gbi_top_keys[] = {
    "log_level", "endpoints", "device", "mode", "max_message_size", "arena_mb", "shutdown_drain_ms", "persistent",
    "relaunch", "placement", "grains", "hosts", "curve", "log_format", "metrics", "remote_control", "messaging", "io_threads",
    "reply_backlog_mb", "devices", NULL};
static const char *const gbi_persistent_keys[] = {
    "idle_spin_polls", "idle_backoff_max_ns", "heartbeat_deadline_ms", NULL};
static const char *const gbi_relaunch_keys[] = {"max_messages_per_launch", NULL};
static const char *const gbi_messaging_keys[] = {"outbox_kb", "hold_ms", "max_hops", "device_links", "link_slots",
                                                 NULL};
static const char *const gbi_placement_keys[] = {"force_fallback", NULL};
static const char *const gbi_grain_keys[] = {
    "library", "type", "queue_capacity", "slot_size", "messages_per_iteration", "max_grains",
    "cpu_threads", "collection_age_s", "max_evicted_kb", NULL};
static const char *const gbi_host_keys[] = {"pattern", "mode", "device", NULL};
static const char *const gbi_metrics_keys[] = {"enabled", "listen", NULL};
static const char *const gbi_curve_keys[] = {
    "enabled", "server_secret_key_file", "server_public_key", "allowed_clients", "admin_clients",
    NULL};

#define GBI_MAX_DEVICE 1023

/* A TCP port: decimal digits only, 0..65535. 0, or -1. */
static int port_parse(const char *p, unsigned long *port)
{
    char *end = NULL;
    errno = 0;
    *port = strtoul(p, &end, 10);
    return p[0] >= '0' && p[0] <= '9' && !*end && !errno && *port <= 65535 ? 0 : -1;
}

/* Whether a tcp endpoint's host (len bytes) binds every address. */
static bool tcp_any_host(const char *host, size_t len)
{
    return (len == 1 && host[0] == '*') || (len == 7 && strncmp(host, "0.0.0.0", 7) == 0);
}

/* Whether binding endpoint a and then b (both checked) fails because they
 * take the same address: the same ipc or inproc name (but the ipc wildcard,
 * a fresh name each time); tcp, the same port (not 0 or the wildcard, a
 * fresh port each time) on the same host, or on any host where either is a
 * wildcard. */
static bool endpoints_clash(const char *a, const char *b)
{
    if (strncmp(a, "tcp://", 6) != 0 || strncmp(b, "tcp://", 6) != 0)
        return strcmp(a, b) == 0 && strcmp(a, "ipc://*") != 0;
    const char *ca = strrchr(a, ':'), *cb = strrchr(b, ':');
    unsigned long pa, pb;
    if (port_parse(ca + 1, &pa) != 0 || port_parse(cb + 1, &pb) != 0 || pa == 0 || pa != pb)
        return false; /* a '*' port, or different ports */
    const size_t la = (size_t)(ca - a) - 6, lb = (size_t)(cb - b) - 6;
    return tcp_any_host(a + 6, la) || tcp_any_host(b + 6, lb) || (la == lb && strncmp(a + 6, b + 6, la) == 0);
}

static int gbi_load_endpoints(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    const config_setting_t *s;
    if (gbi_get_seq(c, root, "endpoints", "endpoints", false, &s) != 0)
        return -1;
    if (!s)
        return 0;
    int n = config_setting_length(s);
    if (n == 0)
        return gbi_fail(c, s, "endpoints: the list is empty; give at least one endpoint "
                              "(tcp://HOST:PORT, ipc://PATH or inproc://NAME)");
    if (n > GB_MAX_ENDPOINTS)
        return gbi_fail(c, s, "endpoints: too many entries (%d, at most %d)", n,
                        GB_MAX_ENDPOINTS);
    char path[64];
    memset(cfg->endpoints, 0, sizeof cfg->endpoints);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const char *v;
        snprintf(path, sizeof path, "endpoints[%d]", i);
        if (gbi_string_value(c, e, path, GB_PATH_LEN, &v) != 0)
            return -1;
        const char *rest = NULL;
        if (strncmp(v, "tcp://", 6) == 0 || strncmp(v, "ipc://", 6) == 0)
            rest = v + 6;
        else if (strncmp(v, "inproc://", 9) == 0)
            rest = v + 9;
        if (!rest)
            return gbi_fail(c, e, "%s: '%s' must start with tcp://, ipc:// or inproc://", path,
                            v);
        if (*rest == '\0')
            return gbi_fail(c, e, "%s: '%s' has no address after the scheme", path, v);
        if (strncmp(v, "tcp://", 6) == 0) { /* ZeroMQ would take a port past 65535 modulo 65536 */
            const char *colon = strrchr(rest, ':');
            unsigned long port;
            if (!colon || (strcmp(colon + 1, "*") != 0 && port_parse(colon + 1, &port) != 0))
                return gbi_fail(c, e, "%s: '%s' needs a port from 0 to 65535 (or *) after the host: tcp://HOST:PORT",
                                path, v);
        }
        /* A second bind of one address fails at start, after --check-config
         * passed. */
        for (int j = 0; j < i; j++)
            if (endpoints_clash(cfg->endpoints[j], v))
                return gbi_fail(c, e, "%s: '%s' takes the address of endpoints[%d] '%s' (each address is bound once)",
                                path, v, j, cfg->endpoints[j]);
        gbi_copy_str(cfg->endpoints[i], GB_PATH_LEN, v);
    }
    cfg->n_endpoints = (size_t)n;
    return 0;
}

static bool gbi_valid_type_name(const char *v)
{
    if (!*v)
        return false;
    for (const char *p = v; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* Path v of setting s into out: a relative one joined to the folder of the
 * config file that gives it (a daemon under systemd runs in /, so the working
 * directory says nothing about where the config's files are), made absolute
 * when that folder is relative, so that a printed config (--check-config)
 * names the same file wherever it is loaded again. -1 (an error naming what)
 * when the joined path does not fit. */
static int gbi_config_path(gbi_ctx *c, const config_setting_t *s, const char *what, const char *v, char *out,
                           size_t outlen)
{
    const char *file = gbi_setting_file(c, s);
    if (v[0] == '/' || !c->from_file) {
        gbi_copy_str(out, outlen, v); /* absolute, or a config given as text: nothing to join */
        return 0;
    }
    /* A file named without a folder ("b.cfg") is in the working directory. */
    const char *slash = strrchr(file, '/');
    const int dir_len = slash ? (int)(slash - file) : 0;
    char cwd[GB_PATH_LEN] = "";
    if (file[0] != '/' && !getcwd(cwd, sizeof cwd))
        return gbi_fail(c, s, "%s: '%s' is relative to the config's folder '%.*s', and the working directory "
                              "is unknown (%s)", what, v, dir_len, slash ? file : ".", strerror(errno));
    int n = snprintf(out, outlen, "%s%s%.*s/%s", cwd, cwd[0] && slash ? "/" : "", dir_len, file, v);
    if (n < 0 || (size_t)n >= outlen)
        return gbi_fail(c, s, "%s: '%s' is too long once joined to the config's folder (at most %zu characters)",
                        what, v, outlen - 1);
    return 0;
}

/* The `library` of grains entry g, if any: recorded with where it was given,
 * relative paths taken from the config file's folder. Returns 1 (given),
 * 0 (none), or -1 (an error). Whether it loads is checked at start
 * (grain_libs.c), not here: loading runs the library's code. */
static int gbi_load_library(gbi_ctx *c, const config_setting_t *g, const char *path, int index, gb_config_t *cfg)
{
    const char *v = NULL;
    char lpath[112];
    snprintf(lpath, sizeof lpath, "%s.library", path);
    if (gbi_get_str(c, g, "library", lpath, GB_PATH_LEN, &v) != 0)
        return -1;
    if (!v)
        return 0;
    const config_setting_t *s = config_setting_get_member(g, "library");
    if (!*v)
        return gbi_fail(c, s, "%s: empty path", lpath);
    if (cfg->n_libs >= GB_MAX_GRAIN_LIBS)
        return gbi_fail(c, s, "%s: too many grain libraries (at most %d)", lpath, GB_MAX_GRAIN_LIBS);
    gb_grain_lib_config_t *l = &cfg->libs[cfg->n_libs];
    const char *file = gbi_setting_file(c, s);
    if (gbi_config_path(c, s, lpath, v, l->path, sizeof l->path) != 0)
        return -1;
    for (size_t k = 0; k < cfg->n_libs; k++)
        if (strcmp(cfg->libs[k].path, l->path) == 0)
            return gbi_fail(c, s, "%s: '%s' is already given by grains[%u]", lpath, v, cfg->libs[k].index);
    gbi_copy_str(l->file, sizeof l->file, file ? file : "");
    l->line = (uint32_t)config_setting_source_line(s);
    l->index = (uint32_t)index;
    cfg->n_libs++;
    return 1;
}

static int gbi_load_grains(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    const config_setting_t *s;
    if (gbi_get_seq(c, root, "grains", "grains", true, &s) != 0)
        return -1;
    if (!s)
        return 0;
    int n = config_setting_length(s);
    /* Line of each type as given, to name the first one of a duplicate pair. */
    unsigned seen_line[GB_MAX_GRAIN_TYPES + 1];
    const char *seen_type[GB_MAX_GRAIN_TYPES + 1];
    int n_seen = 0;
    char path[96];
    for (int i = 0; i < n; i++) {
        const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
        snprintf(path, sizeof path, "grains[%d]", i);
        if (config_setting_type(g) != CONFIG_TYPE_GROUP)
            return gbi_fail(c, g, "%s: expected a group { type = \"...\"; ... }, got %s", path,
                            gbi_type_name(config_setting_type(g)));
        char where[112];
        snprintf(where, sizeof where, "in %s", path);
        if (gbi_check_keys(c, g, where, gbi_grain_keys) != 0)
            return -1;
        int lib = gbi_load_library(c, g, path, i, cfg);
        if (lib < 0)
            return -1;
        const char *type = NULL;
        char tpath[112];
        snprintf(tpath, sizeof tpath, "%s.type", path);
        if (gbi_get_str(c, g, "type", tpath, GB_NAME_LEN, &type) != 0)
            return -1;
        if (!type && lib)
            continue; /* a library alone: its types get the generic settings */
        if (!type)
            return gbi_fail(c, g, "%s: missing required key 'type' (or 'library')", path);
        if (!gbi_valid_type_name(type))
            return gbi_fail(c, config_setting_get_member(g, "type"),
                            "%s: '%s' is not a valid grain type name (letters, digits, '.', "
                            "'_', '-'; not empty)", tpath, type);
        for (int k = 0; k < n_seen; k++)
            if (strcmp(seen_type[k], type) == 0)
                return gbi_fail(c, g, "%s: duplicate grain type '%s' (first given at line %u)",
                                path, type, seen_line[k]);

        gb_grain_config_t *dst = NULL;
        for (size_t k = 0; k < cfg->n_grains; k++)
            if (strcmp(cfg->grains[k].type, type) == 0)
                dst = &cfg->grains[k];
        if (!dst) {
            if (cfg->n_grains >= GB_MAX_GRAIN_TYPES)
                return gbi_fail(c, g, "grains: too many grain types (at most %d, counting "
                                      "the %zu built-in types)", GB_MAX_GRAIN_TYPES,
                                gb_n_builtin_grain_configs);
            dst = &cfg->grains[cfg->n_grains++];
            *dst = gbi_generic_grain;
            gbi_copy_str(dst->type, sizeof dst->type, type);
        }
        if (n_seen < GB_MAX_GRAIN_TYPES) {
            seen_type[n_seen] = dst->type;
            seen_line[n_seen++] = config_setting_source_line(g);
        }

        /* Field paths name the type: easier to find than an index. */
        char fp[GB_NAME_LEN + 64];
#define GBI_GRAIN_FIELD(key, lo, hi, p2)                                                  \
        do {                                                                               \
            snprintf(fp, sizeof fp, "grains[%d].%s", i, #key);                              \
            if (gbi_get_u32(c, g, #key, fp, lo, hi, p2, &dst->key) != 0)                   \
                return -1;                                                                 \
        } while (0)
        GBI_GRAIN_FIELD(queue_capacity, 2, 1 << 24, true);
        GBI_GRAIN_FIELD(slot_size, 64, 65536, true);
        GBI_GRAIN_FIELD(messages_per_iteration, 1, 4096, false);
        GBI_GRAIN_FIELD(max_grains, 1, 1 << 24, false);
        GBI_GRAIN_FIELD(cpu_threads, 0, 256, false);
        GBI_GRAIN_FIELD(collection_age_s, 0, 1 << 30, false);
        GBI_GRAIN_FIELD(max_evicted_kb, 1, GB_MAX_EVICTED_KB_MAX, false);
#undef GBI_GRAIN_FIELD
    }
    return 0;
}

static int gbi_load_hosts(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    const config_setting_t *s;
    if (gbi_get_seq(c, root, "hosts", "hosts", true, &s) != 0)
        return -1;
    if (!s)
        return 0;
    int n = config_setting_length(s);
    if (n > GB_MAX_HOSTS)
        return gbi_fail(c, s, "hosts: too many entries (%d, at most %d)", n, GB_MAX_HOSTS);
    memset(cfg->hosts, 0, sizeof cfg->hosts);
    char path[64], fp[96];
    for (int i = 0; i < n; i++) {
        const config_setting_t *h = config_setting_get_elem(s, (unsigned)i);
        gb_host_config_t *dst = &cfg->hosts[i];
        snprintf(path, sizeof path, "hosts[%d]", i);
        if (config_setting_type(h) != CONFIG_TYPE_GROUP)
            return gbi_fail(c, h, "%s: expected a group { pattern = \"...\"; mode = \"...\"; }, "
                                  "got %s", path, gbi_type_name(config_setting_type(h)));
        snprintf(fp, sizeof fp, "in %s", path);
        if (gbi_check_keys(c, h, fp, gbi_host_keys) != 0)
            return -1;
        const char *pattern = NULL;
        snprintf(fp, sizeof fp, "%s.pattern", path);
        if (gbi_get_str(c, h, "pattern", fp, GB_NAME_LEN, &pattern) != 0)
            return -1;
        if (!pattern || !*pattern)
            return gbi_fail(c, pattern ? config_setting_get_member(h, "pattern") : h,
                            "%s: %s", path, pattern ? "pattern is empty"
                                                    : "missing required key 'pattern'");
        for (int k = 0; k < i; k++)
            if (strcmp(cfg->hosts[k].pattern, pattern) == 0)
                return gbi_fail(c, h, "%s: duplicate host pattern '%s' (hosts[%d] already has "
                                      "it; the first match wins)", path, pattern, k);
        gbi_copy_str(dst->pattern, sizeof dst->pattern, pattern);
        if (!config_setting_get_member(h, "mode"))
            return gbi_fail(c, h, "%s: missing required key 'mode' (one of " GBI_MODE_LIST ")",
                            path);
        snprintf(fp, sizeof fp, "%s.mode", path);
        if (gbi_get_mode(c, h, fp, &dst->mode) != 0)
            return -1;
        int64_t dev = -1;
        snprintf(fp, sizeof fp, "%s.device", path);
        if (gbi_get_int(c, h, "device", fp, 0, GBI_MAX_DEVICE, false, &dev) != 0)
            return -1;
        dst->has_device = dev >= 0;
        dst->device = dev >= 0 ? (int)dev : 0;
    }
    cfg->n_hosts = (size_t)n;
    return 0;
}

/* A CURVE key as ZeroMQ prints it: 40 characters of the Z85 alphabet. */
static bool gbi_is_z85_key(const char *v)
{
    static const char z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              ".-:+=^!/*?&<>()[]{}@%$#";
    if (strlen(v) != GB_KEY_LEN - 1)
        return false;
    for (const char *p = v; *p; p++)
        if (!strchr(z85, *p))
            return false;
    return true;
}

/* A list of Z85 public keys, curve.<key>; absent leaves the table alone. */
static int gbi_load_keys(gbi_ctx *c, const config_setting_t *g, const char *key,
                         char keys[GB_MAX_CLIENT_KEYS][GB_KEY_LEN], size_t *n_out)
{
    const config_setting_t *s;
    char path[64];
    snprintf(path, sizeof path, "curve.%s", key);
    if (gbi_get_seq(c, g, key, path, false, &s) != 0)
        return -1;
    if (!s)
        return 0;
    int n = config_setting_length(s);
    if (n > GB_MAX_CLIENT_KEYS)
        return gbi_fail(c, s, "%s: too many entries (%d, at most %d)", path, n,
                        GB_MAX_CLIENT_KEYS);
    memset(keys, 0, sizeof(char[GB_MAX_CLIENT_KEYS][GB_KEY_LEN]));
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const char *v;
        snprintf(path, sizeof path, "curve.%s[%d]", key, i);
        if (gbi_string_value(c, e, path, 256, &v) != 0)
            return -1;
        if (!gbi_is_z85_key(v))
            return gbi_fail(c, e, "%s: not a Z85 CURVE key (40 characters, as printed by "
                                  "zmq_curve_keypair)", path);
        gbi_copy_str(keys[i], GB_KEY_LEN, v);
    }
    *n_out = (size_t)n;
    return 0;
}

static int gbi_load_curve(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    const config_setting_t *g;
    if (gbi_get_group(c, root, "curve", &g) != 0)
        return -1;
    if (!g)
        return 0;
    gb_curve_config_t *cv = &cfg->curve;
    if (gbi_check_keys(c, g, "in curve", gbi_curve_keys) != 0 ||
        gbi_get_bool(c, g, "enabled", "curve.enabled", &cv->enabled) != 0)
        return -1;
    const char *v = NULL;
    if (gbi_get_str(c, g, "server_secret_key_file", "curve.server_secret_key_file",
                    GB_PATH_LEN, &v) != 0)
        return -1;
    if (v && *v &&
        gbi_config_path(c, config_setting_get_member(g, "server_secret_key_file"), "curve.server_secret_key_file", v,
                        cv->server_secret_key_file, GB_PATH_LEN) != 0)
        return -1;
    v = NULL;
    if (gbi_get_str(c, g, "server_public_key", "curve.server_public_key", 256, &v) != 0)
        return -1;
    if (v && *v && !gbi_is_z85_key(v))
        return gbi_fail(c, config_setting_get_member(g, "server_public_key"),
                        "curve.server_public_key: not a Z85 CURVE key (40 characters, as "
                        "printed by zmq_curve_keypair)");
    if (v)
        gbi_copy_str(cv->server_public_key, GB_KEY_LEN, v);

    if (gbi_load_keys(c, g, "allowed_clients", cv->allowed_clients, &cv->n_allowed) != 0 ||
        gbi_load_keys(c, g, "admin_clients", cv->admin_clients, &cv->n_admin) != 0)
        return -1;
    if (cv->enabled) {
        const config_setting_t *en = config_setting_get_member(g, "enabled");
        if (!en)
            en = g;
        if (!cv->server_secret_key_file[0])
            return gbi_fail(c, en, "curve.enabled is true but curve.server_secret_key_file "
                                   "is not set");
        if (!cv->server_public_key[0])
            return gbi_fail(c, en, "curve.enabled is true but curve.server_public_key is not "
                                   "set");
    }
    return 0;
}

/* log_format and the metrics group (operations: docs/operations.md). */
static int gbi_load_ops(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    const char *v = NULL;
    if (gbi_get_str(c, root, "log_format", "log_format", GB_NAME_LEN, &v) != 0)
        return -1;
    if (v && gb_log_format_parse(v, &cfg->log_format) != 0)
        return gbi_fail(c, config_setting_get_member(root, "log_format"),
                        "log_format: unknown log format '%s'; valid formats: text, json", v);
    const config_setting_t *g;
    if (gbi_get_group(c, root, "metrics", &g) != 0)
        return -1;
    if (!g)
        return 0;
    v = NULL;
    if (gbi_check_keys(c, g, "in metrics", gbi_metrics_keys) != 0 ||
        gbi_get_bool(c, g, "enabled", "metrics.enabled", &cfg->metrics.enabled) != 0 ||
        gbi_get_str(c, g, "listen", "metrics.listen", GB_NAME_LEN, &v) != 0)
        return -1;
    char why[160];
    if (v && gb_metrics_parse_listen(v, NULL, why, sizeof why) != 0)
        return gbi_fail(c, config_setting_get_member(g, "listen"), "metrics.listen: %s", why);
    if (v)
        gbi_copy_str(cfg->metrics.listen, GB_NAME_LEN, v);
    if (cfg->metrics.enabled && !gb_metrics_available())
        return gbi_fail(c, config_setting_get_member(g, "enabled"),
                        "metrics.enabled: this gpubridge was built without libmicrohttpd, so it "
                        "has no metrics endpoint (install libmicrohttpd-dev and rebuild, or set "
                        "metrics.enabled = false)");
    return 0;
}

/* `devices = [0, 1]` or `devices = "all"`; not beside `device`. */
static int gbi_load_devices(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    const config_setting_t *s = config_setting_get_member(root, "devices");
    if (!s)
        return 0;
    if (config_setting_get_member(root, "device"))
        return gbi_fail(c, s, "devices: give either device (one) or devices (a list), not both");
    cfg->n_devices = 0;
    cfg->devices_all = false;
    const int t = config_setting_type(s);
    if (t == CONFIG_TYPE_STRING) {
        if (strcmp(config_setting_get_string(s), "all") != 0)
            return gbi_fail(c, s, "devices: expected \"all\" or a list of device indexes like [0, 1], got \"%s\"",
                            config_setting_get_string(s));
        cfg->devices_all = true;
        return 0;
    }
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return gbi_fail(c, s, "devices: expected \"all\" or a list of device indexes like [0, 1], got %s",
                        gbi_type_name(t));
    const int n = config_setting_length(s);
    if (n == 0 || n > GB_MAX_DEVICES)
        return gbi_fail(c, s, "devices: %d entries; give 1 to %d device indexes", n, GB_MAX_DEVICES);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const int et = config_setting_type(e);
        if (et != CONFIG_TYPE_INT && et != CONFIG_TYPE_INT64)
            return gbi_fail(c, e, "devices[%d]: expected a device index, got %s", i, gbi_type_name(et));
        const long long v = et == CONFIG_TYPE_INT ? config_setting_get_int(e) : config_setting_get_int64(e);
        if (v < 0 || v > GBI_MAX_DEVICE)
            return gbi_fail(c, e, "devices[%d]: %lld is out of range (0..%d)", i, v, GBI_MAX_DEVICE);
        cfg->devices[cfg->n_devices++] = (int)v;
    }
    cfg->device = cfg->devices[0];
    return 0;
}

static int gbi_load_root(gbi_ctx *c, const config_setting_t *root, gb_config_t *cfg)
{
    if (gbi_check_keys(c, root, "at top level", gbi_top_keys) != 0)
        return -1;

    const char *v = NULL;
    if (gbi_get_str(c, root, "log_level", "log_level", GB_NAME_LEN, &v) != 0)
        return -1;
    if (v && gb_log_level_parse(v, &cfg->log_level) != 0)
        return gbi_fail(c, config_setting_get_member(root, "log_level"),
                        "log_level: unknown log level '%s'; valid levels: " GBI_LEVEL_LIST, v);

    if (gbi_load_endpoints(c, root, cfg) != 0)
        return -1;

    int64_t dev = cfg->device;
    if (gbi_get_int(c, root, "device", "device", 0, GBI_MAX_DEVICE, false, &dev) != 0)
        return -1;
    cfg->device = (int)dev;
    if (gbi_load_devices(c, root, cfg) != 0)
        return -1;
    if (gbi_get_mode(c, root, "mode", &cfg->mode) != 0)
        return -1;
    /* Smallest useful frame holds an envelope header; the largest is the
     * largest message carried out of line (GB_LARGE_MAX_CAP, 64 MiB): the
     * bounds derived from it (hard frame cap, large areas) scale with it. */
    if (gbi_get_u32(c, root, "max_message_size", "max_message_size", 64, 64u << 20, false,
                    &cfg->max_message_size) != 0)
        return -1;
    if (gbi_get_u32(c, root, "arena_mb", "arena_mb", 0, 1 << 20, false, &cfg->arena_mb) != 0)
        return -1;
    if (gbi_get_u32(c, root, "shutdown_drain_ms", "shutdown_drain_ms", 0, 3600000, false,
                    &cfg->shutdown_drain_ms) != 0)
        return -1;
    if (gbi_get_u32(c, root, "io_threads", "io_threads", 1, GB_MAX_IO_THREADS, false, &cfg->io_threads) != 0)
        return -1;
    if (gbi_get_u32(c, root, "reply_backlog_mb", "reply_backlog_mb", 1, 65536, false, &cfg->reply_backlog_mb) != 0)
        return -1;

    const config_setting_t *g;
    if (gbi_get_group(c, root, "persistent", &g) != 0)
        return -1;
    if (g) {
        /* __nanosleep sleeps at most about 1 ms, so longer backoffs are meaningless. */
        if (gbi_check_keys(c, g, "in persistent", gbi_persistent_keys) != 0 ||
            gbi_get_u32(c, g, "idle_spin_polls", "persistent.idle_spin_polls", 0, 1 << 30,
                        false, &cfg->idle_spin_polls) != 0 ||
            gbi_get_u32(c, g, "idle_backoff_max_ns", "persistent.idle_backoff_max_ns", 0,
                        1000000, false, &cfg->idle_backoff_max_ns) != 0 ||
            gbi_get_u32(c, g, "heartbeat_deadline_ms", "persistent.heartbeat_deadline_ms", 1,
                        600000, false, &cfg->heartbeat_deadline_ms) != 0)
            return -1;
    }
    if (gbi_get_group(c, root, "relaunch", &g) != 0)
        return -1;
    if (g) {
        if (gbi_check_keys(c, g, "in relaunch", gbi_relaunch_keys) != 0 ||
            gbi_get_u32(c, g, "max_messages_per_launch", "relaunch.max_messages_per_launch", 1,
                        1 << 24, false, &cfg->max_messages_per_launch) != 0)
            return -1;
    }
    if (gbi_get_group(c, root, "messaging", &g) != 0)
        return -1;
    if (g) {
        if (gbi_check_keys(c, g, "in messaging", gbi_messaging_keys) != 0 ||
            gbi_get_u32(c, g, "outbox_kb", "messaging.outbox_kb", 1, 1u << 22, false, &cfg->mail_outbox_kb) != 0 ||
            gbi_get_u32(c, g, "hold_ms", "messaging.hold_ms", 1, 3600000, false, &cfg->mail_hold_ms) != 0 ||
            gbi_get_u32(c, g, "max_hops", "messaging.max_hops", 1, 1u << 20, false, &cfg->mail_max_hops) != 0 ||
            gbi_get_bool(c, g, "device_links", "messaging.device_links", &cfg->mail_device_links) != 0 ||
            gbi_get_u32(c, g, "link_slots", "messaging.link_slots", 2, 1u << 16, true, &cfg->mail_link_slots) != 0)
            return -1;
    }
    if (gbi_get_group(c, root, "placement", &g) != 0)
        return -1;
    if (g) {
        if (gbi_check_keys(c, g, "in placement", gbi_placement_keys) != 0 ||
            gbi_get_bool(c, g, "force_fallback", "placement.force_fallback",
                         &cfg->force_fallback_placement) != 0)
            return -1;
    }
    if (gbi_load_grains(c, root, cfg) != 0 || gbi_load_hosts(c, root, cfg) != 0 ||
        gbi_load_curve(c, root, cfg) != 0 || gbi_load_ops(c, root, cfg) != 0)
        return -1;
    if (gbi_get_bool(c, root, "remote_control", "remote_control", &cfg->remote_control) != 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------ loading */

static gb_err gbi_finish(config_t *lc, int read_ok, const char *src, const char *name, bool from_file,
                         gb_config_t *cfg, char *err, size_t errlen)
{
    gbi_ctx c = {name, err, errlen, from_file};
    if (err && errlen)
        err[0] = '\0';
    if (!read_ok) {
        const char *file = config_error_file(lc) ? config_error_file(lc) : name;
        const char *text = config_error_text(lc) ? config_error_text(lc) : "cannot be read";
        gb_err rc = config_error_type(lc) == CONFIG_ERR_FILE_IO ? GB_ERR_IO : GB_ERR_CONFIG;
        char key[GB_NAME_LEN];
        gbi_config_key_at_line(src, config_error_line(lc), key, sizeof key);
        if (err && errlen && strcmp(text, "duplicate setting name") == 0 && key[0])
            snprintf(err, errlen, "%s:%d: duplicate key '%s' (already set earlier in the same group)", file,
                     config_error_line(lc), key);
        else if (err && errlen)
            snprintf(err, errlen, "%s:%d: %s", file, config_error_line(lc), text);
        config_destroy(lc);
        return rc;
    }
    /* Parse into a local value; the caller's copy changes only on success. */
    gb_config_t tmp;
    gb_config_defaults(&tmp);
    int rc = gbi_load_root(&c, config_root_setting(lc), &tmp);
    config_destroy(lc);
    if (rc != 0)
        return GB_ERR_CONFIG;
    memset(tmp.source, 0, sizeof tmp.source);
    gbi_copy_str(tmp.source, sizeof tmp.source, name);
    *cfg = tmp;
    return GB_OK;
}

/* text: len bytes and a NUL after them. */
static gb_err gbi_load_text(const char *text, size_t len, const char *name, bool from_file, gb_config_t *cfg,
                            char *err, size_t errlen)
{
    char scratch[8];
    if (gbi_config_prescan(text, len, name, err && errlen ? err : scratch,
                           err && errlen ? errlen : sizeof scratch) != 0)
        return GB_ERR_CONFIG;
    config_t lc;
    config_init(&lc);
    int ok = config_read_string(&lc, text) == CONFIG_TRUE;
    return gbi_finish(&lc, ok, text, name, from_file, cfg, err, errlen);
}

gb_err gb_config_load(const char *path, gb_config_t *cfg, char *err, size_t errlen)
{
    if (!path || !cfg) {
        if (err && errlen)
            snprintf(err, errlen, "gb_config_load: no path or config given");
        return GB_ERR_INVALID;
    }
    /* Read it ourselves: regular files only (a FIFO would block), capped;
     * libconfig's "file I/O error" would not say why. */
    char *text = NULL, scratch[8];
    size_t len = 0;
    gb_err rc = gbi_read_regular_file(path, "config file", GBI_CONFIG_MAX_BYTES, &text, &len,
                                      err && errlen ? err : scratch, err && errlen ? errlen : sizeof scratch);
    if (rc != GB_OK)
        return rc;
    rc = gbi_load_text(text, len, path, true, cfg, err, errlen);
    free(text);
    return rc;
}

gb_err gb_config_load_string(const char *text, const char *name, gb_config_t *cfg,
                             char *err, size_t errlen)
{
    if (!text || !cfg) {
        if (err && errlen)
            snprintf(err, errlen, "gb_config_load_string: no text or config given");
        return GB_ERR_INVALID;
    }
    const bool is_file = name && name[0] != '<';
    return gbi_load_text(text, strlen(text), name ? name : "<string>", is_file, cfg, err, errlen);
}

/* ------------------------------------------------------------ printing */

static void gbi_print_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\x%02x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* `device`, or `devices` when the config lists several or "all". */
static void gbi_print_devices(const gb_config_t *cfg, FILE *out)
{
    if (cfg->devices_all) {
        fprintf(out, "devices = \"all\";\n");
    } else if (cfg->n_devices) {
        fprintf(out, "devices = [");
        for (size_t i = 0; i < cfg->n_devices; i++)
            fprintf(out, "%s%d", i ? ", " : " ", cfg->devices[i]);
        fprintf(out, " ];\n");
    } else {
        fprintf(out, "device = %d;\n", cfg->device);
    }
}

void gb_config_print(const gb_config_t *cfg, FILE *out)
{
    fprintf(out, "# gpubridge effective configuration (from %s)\n", cfg->source);
    fprintf(out, "log_level = ");
    gbi_print_str(out, gb_log_level_name(cfg->log_level));
    fprintf(out, ";\nendpoints = [");
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        fputs(i ? ", " : " ", out);
        gbi_print_str(out, cfg->endpoints[i]);
    }
    fprintf(out, " ];\n");
    gbi_print_devices(cfg, out);
    fprintf(out, "mode = \"%s\";\n", gb_mode_name(cfg->mode));
    fprintf(out, "max_message_size = %" PRIu32 ";\n", cfg->max_message_size);
    fprintf(out, "arena_mb = %" PRIu32 ";\n", cfg->arena_mb);
    fprintf(out, "shutdown_drain_ms = %" PRIu32 ";\n", cfg->shutdown_drain_ms);
    fprintf(out, "io_threads = %" PRIu32 ";\n", cfg->io_threads);
    fprintf(out, "reply_backlog_mb = %" PRIu32 ";\n", cfg->reply_backlog_mb);
    fprintf(out, "persistent = {\n  idle_spin_polls = %" PRIu32 ";\n"
                 "  idle_backoff_max_ns = %" PRIu32 ";\n  heartbeat_deadline_ms = %" PRIu32
                 ";\n};\n",
            cfg->idle_spin_polls, cfg->idle_backoff_max_ns, cfg->heartbeat_deadline_ms);
    fprintf(out, "relaunch = {\n  max_messages_per_launch = %" PRIu32 ";\n};\n",
            cfg->max_messages_per_launch);
    fprintf(out, "messaging = {\n  outbox_kb = %" PRIu32 ";\n  hold_ms = %" PRIu32 ";\n  max_hops = %" PRIu32
                 ";\n  device_links = %s;\n  link_slots = %" PRIu32 ";\n};\n", cfg->mail_outbox_kb, cfg->mail_hold_ms,
            cfg->mail_max_hops, cfg->mail_device_links ? "true" : "false", cfg->mail_link_slots);
    fprintf(out, "placement = {\n  force_fallback = %s;\n};\n",
            cfg->force_fallback_placement ? "true" : "false");
    fprintf(out, "grains = (");
    for (size_t i = 0; i < cfg->n_libs; i++) {
        fprintf(out, "%s\n  { library = ", i ? "," : "");
        gbi_print_str(out, cfg->libs[i].path);
        fprintf(out, "; }");
    }
    for (size_t i = 0; i < cfg->n_grains; i++) {
        const gb_grain_config_t *g = &cfg->grains[i];
        fprintf(out, "%s\n  { type = ", i || cfg->n_libs ? "," : "");
        gbi_print_str(out, g->type);
        fprintf(out, "; queue_capacity = %" PRIu32 "; slot_size = %" PRIu32
                     "; messages_per_iteration = %" PRIu32 "; max_grains = %" PRIu32
                     "; cpu_threads = %" PRIu32 "; collection_age_s = %" PRIu32
                     "; max_evicted_kb = %" PRIu32 "; }",
                g->queue_capacity, g->slot_size, g->messages_per_iteration, g->max_grains,
                g->cpu_threads, g->collection_age_s, g->max_evicted_kb);
    }
    fprintf(out, "\n);\n");
    fprintf(out, "hosts = (");
    for (size_t i = 0; i < cfg->n_hosts; i++) {
        const gb_host_config_t *h = &cfg->hosts[i];
        fprintf(out, "%s\n  { pattern = ", i ? "," : "");
        gbi_print_str(out, h->pattern);
        fprintf(out, "; mode = \"%s\";", gb_mode_name(h->mode));
        if (h->has_device)
            fprintf(out, " device = %d;", h->device);
        fprintf(out, " }");
    }
    fprintf(out, "%s);\n", cfg->n_hosts ? "\n" : "");
    fprintf(out, "curve = {\n  enabled = %s;\n  server_secret_key_file = ",
            cfg->curve.enabled ? "true" : "false");
    gbi_print_str(out, cfg->curve.server_secret_key_file);
    fprintf(out, ";\n  server_public_key = ");
    gbi_print_str(out, cfg->curve.server_public_key);
    fprintf(out, ";\n  allowed_clients = [");
    for (size_t i = 0; i < cfg->curve.n_allowed; i++) {
        fputs(i ? ", " : " ", out);
        gbi_print_str(out, cfg->curve.allowed_clients[i]);
    }
    fprintf(out, "%s];\n  admin_clients = [", cfg->curve.n_allowed ? " " : "");
    for (size_t i = 0; i < cfg->curve.n_admin; i++) {
        fputs(i ? ", " : " ", out);
        gbi_print_str(out, cfg->curve.admin_clients[i]);
    }
    fprintf(out, "%s];\n};\n", cfg->curve.n_admin ? " " : "");
    fprintf(out, "remote_control = %s;\n", cfg->remote_control ? "true" : "false");
    fprintf(out, "log_format = \"%s\";\nmetrics = {\n  enabled = %s;\n  listen = ",
            gb_log_format_name(cfg->log_format), cfg->metrics.enabled ? "true" : "false");
    gbi_print_str(out, cfg->metrics.listen);
    fprintf(out, ";\n};\n");
}

int gb_metrics_parse_listen(const char *listen, struct sockaddr_storage *out, char *why,
                            size_t whylen)
{
    char host[GB_NAME_LEN];
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    size_t hl = colon ? (size_t)(colon - listen) : 0;
    if (!colon || hl == 0 || hl >= sizeof host || !colon[1]) {
        snprintf(why, whylen, "'%s' is not ADDRESS:PORT (e.g. \"%s\")", listen ? listen : "",
                 GB_METRICS_DEFAULT_LISTEN);
        return -1;
    }
    unsigned long port;
    if (port_parse(colon + 1, &port) != 0) {
        snprintf(why, whylen, "'%s': the port must be a number 0..65535", listen);
        return -1;
    }
    memcpy(host, listen, hl);
    host[hl] = '\0';
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (host[0] == '[' && host[hl - 1] == ']') {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        host[hl - 1] = '\0';
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1) {
            snprintf(why, whylen, "'%s': '%s' is not a numeric IPv6 address", listen, host + 1);
            return -1;
        }
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
            snprintf(why, whylen, "'%s': '%s' is not a numeric IPv4 address (IPv6: "
                                  "\"[::1]:9464\")", listen, host);
            return -1;
        }
    }
    if (out)
        *out = ss;
    return 0;
}

bool gb_metrics_available(void)
{
#ifdef GB_HAVE_MHD
    return true;
#else
    return false;
#endif
}
