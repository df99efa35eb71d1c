/* The Prometheus endpoint (see metrics.h): listen address parsing, the text
 * exposition, and the libmicrohttpd server when the build has it. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "control.pb-c.h"
#include "gpubridge.pb-c.h"
#include "log.h"

#ifdef GB_HAVE_MHD
#include <microhttpd.h>
#endif

/* 10 us .. 1 s: a cpu-mode round trip takes tens of microseconds, a GPU round trip
 * a few, a relaunch or a team's step milliseconds. */
const uint64_t gb_metrics_bucket_ns[GB_METRICS_N_BUCKETS] = {
    10000ull,    25000ull,    50000ull,     100000ull,    250000ull,    500000ull,
    1000000ull,  2500000ull,  5000000ull,   10000000ull,  25000000ull,  50000000ull,
    100000000ull, 250000000ull, 1000000000ull, UINT64_MAX};

void gb_metrics_observe(gb_metrics_type_t *t, uint64_t ns)
{
    int b = 0;
    while (ns > gb_metrics_bucket_ns[b])
        b++; /* the last bound is UINT64_MAX */
    t->lat_bucket[b]++;
    t->lat_count++;
    t->lat_sum_ns += ns;
}

/* ------------------------------------------------------------ rendering */

static const char *status_name(int status)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&gpubridge__status__descriptor, status);
    return v ? v->name : "STATUS_UNKNOWN";
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values: grain type names are [A-Za-z0-9._-], but escape anyway. */
static void labels(FILE *out, const gb_metrics_type_t *t)
{
    fputs("{grain_type=\"", out);
    for (const char *p = t->name; *p; p++) {
        if (*p == '\\' || *p == '"')
            fputc('\\', out);
        if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
    fprintf(out, "\",mode=\"%s\"", gb_mode_name(t->mode));
    if (t->labelled_dev)
        fprintf(out, ",device=\"%d\"", t->dev);
}

typedef struct per_type {
    const char *name, *type, *help;
    size_t off; /* of a uint64_t in gb_metrics_type_t */
} per_type_t;

#define PT(n, ty, field, h) {n, ty, h, offsetof(gb_metrics_type_t, field)}
static const per_type_t g_per_type[] = {
    PT("gpubridge_grain_requests_total", "counter", requests, "Requests fed into the grain type's ring."),
    PT("gpubridge_grain_replies_total", "counter", replies, "Replies out of the grain type's ring, any status."),
    PT("gpubridge_grain_in_flight", "gauge", in_flight, "Requests in the ring not yet answered."),
    PT("gpubridge_grain_held_bytes", "gauge", held_bytes, "Bytes of client frames waiting for room in the ring."),
    PT("gpubridge_grain_active", "gauge", active, "1 while the grain type takes requests, 0 when deactivated or stopped."),
    PT("gpubridge_grain_deactivations_total", "counter", deactivations, "DeactivateGrain requests that freed an activation."),
    PT("gpubridge_grain_activations", "gauge", activations, "Activations in the table (keys with requests in flight included)."),
    PT("gpubridge_grain_evicted", "gauge", evicted, "Collected activations whose state waits in host memory."),
    PT("gpubridge_grain_evicted_bytes", "gauge", evicted_bytes, "Host memory held by the store of evicted activation states."),
    PT("gpubridge_grain_evicted_max_bytes", "gauge", evicted_max_bytes, "Bound of that store (grains.max_evicted_kb)."),
    PT("gpubridge_grain_evicted_max", "gauge", evicted_max,
       "Evicted activations that store holds at its bound: new keys are refused once gpubridge_grain_evicted reaches it."),
    PT("gpubridge_grain_evictions_total", "counter", evictions, "Activations collected (evicted to host memory)."),
    PT("gpubridge_grain_restores_total", "counter", restores, "Evicted activations brought back by a message."),
    PT("gpubridge_grain_mail_sent_total", "counter", mail_sent, "One-way messages its grains sent to grains."),
    PT("gpubridge_grain_mail_forwarded_total", "counter", mail_forwarded, "Requests its grains forwarded to grains."),
    PT("gpubridge_grain_mail_linked_total", "counter", mail_linked,
       "Of those, forwards that went kernel to kernel through device memory (device links)."),
    PT("gpubridge_grain_mail_held", "gauge", mail_held, "Messages from grains waiting for room in its ring (the outbox)."),
    PT("gpubridge_grain_mail_undeliverable_total", "counter", mail_undeliverable, "Messages its grains made that could not be delivered."),
    PT("gpubridge_kernel_heartbeats_total", "counter", heartbeat, "The ring kernel's heartbeat counter."),
    PT("gpubridge_kernel_launches_total", "counter", launches, "Kernel launches (relaunch mode: one per budget)."),
    PT("gpubridge_kernel_processed_total", "counter", processed, "Messages the kernel or cpu workers processed."),
};

static void render_types(const gb_metrics_snap_t *s, FILE *out)
{
    for (size_t f = 0; f < sizeof g_per_type / sizeof g_per_type[0]; f++) {
        const per_type_t *p = &g_per_type[f];
        family(out, p->name, p->type, p->help);
        for (size_t i = 0; i < s->n_types; i++) {
            const gb_metrics_type_t *t = &s->types[i];
            fputs(p->name, out);
            labels(out, t);
            fprintf(out, "} %llu\n",
                    (unsigned long long)*(const uint64_t *)((const char *)t + p->off));
        }
    }
    family(out, "gpubridge_kernel_relaunches_total", "counter",
           "Launches after the first (relaunch mode, or a restarted kernel).");
    for (size_t i = 0; i < s->n_types; i++) {
        fputs("gpubridge_kernel_relaunches_total", out);
        labels(out, &s->types[i]);
        fprintf(out, "} %llu\n", (unsigned long long)(s->types[i].launches ? s->types[i].launches - 1 : 0));
    }
    family(out, "gpubridge_grain_errors_total", "counter",
           "Error replies out of the grain type's ring, by status.");
    for (size_t i = 0; i < s->n_types; i++)
        for (int st = 1; st < GB_METRICS_N_STATUS; st++)
            if (s->types[i].errors[st]) {
                fputs("gpubridge_grain_errors_total", out);
                labels(out, &s->types[i]);
                fprintf(out, ",status=\"%s\"} %llu\n", status_name(st),
                        (unsigned long long)s->types[i].errors[st]);
            }
}

static void render_latency(const gb_metrics_snap_t *s, FILE *out)
{
    family(out, "gpubridge_grain_latency_seconds", "histogram",
           "From feeding a request into the ring to taking its reply out.");
    for (size_t i = 0; i < s->n_types; i++) {
        const gb_metrics_type_t *t = &s->types[i];
        uint64_t cum = 0;
        for (int b = 0; b < GB_METRICS_N_BUCKETS; b++) {
            cum += t->lat_bucket[b];
            fputs("gpubridge_grain_latency_seconds_bucket", out);
            labels(out, t);
            if (b == GB_METRICS_N_BUCKETS - 1)
                fprintf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
            else
                fprintf(out, ",le=\"%g\"} %llu\n", (double)gb_metrics_bucket_ns[b] / 1e9,
                        (unsigned long long)cum);
        }
        fputs("gpubridge_grain_latency_seconds_sum", out);
        labels(out, t);
        fprintf(out, "} %.9f\n", (double)t->lat_sum_ns / 1e9);
        fputs("gpubridge_grain_latency_seconds_count", out);
        labels(out, t);
        fprintf(out, "} %llu\n", (unsigned long long)t->lat_count);
    }
}

void gb_metrics_render(const gb_metrics_snap_t *s, FILE *out)
{
    family(out, "gpubridge_info", "gauge", "Always 1; the labels say the version and the mode.");
    fprintf(out, "gpubridge_info{version=\"%s\",mode=\"%s\"} 1\n", GB_VERSION, gb_mode_name(s->mode));
    family(out, "gpubridge_frames_total", "counter", "Client frames read from the socket.");
    fprintf(out, "gpubridge_frames_total %llu\n", (unsigned long long)s->frames);
    family(out, "gpubridge_replies_total", "counter",
           "Every reply sent, by status (errors before a ring included).");
    for (int st = 0; st < GB_METRICS_N_STATUS; st++)
        if (s->replies[st] || st == 0)
            fprintf(out, "gpubridge_replies_total{status=\"%s\"} %llu\n", status_name(st),
                    (unsigned long long)s->replies[st]);
    family(out, "gpubridge_config_reloads_total", "counter", "SIGHUP reloads applied.");
    fprintf(out, "gpubridge_config_reloads_total %llu\n", (unsigned long long)s->reloads);
    family(out, "gpubridge_config_reload_failures_total", "counter",
           "SIGHUP reloads refused (the file did not load; nothing changed).");
    fprintf(out, "gpubridge_config_reload_failures_total %llu\n",
            (unsigned long long)s->reload_failures);
    render_types(s, out);
    render_latency(s, out);
}

/* ------------------------------------------------------------ the server */

struct gb_metrics {
    pthread_mutex_t mu;
    gb_metrics_snap_t snap; /* the published copy (under mu) */
    unsigned port;
#ifdef GB_HAVE_MHD
    struct MHD_Daemon *d;
#endif
};

void gb_metrics_publish(gb_metrics_t *m, const gb_metrics_snap_t *snap)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->snap = *snap;
    pthread_mutex_unlock(&m->mu);
}

unsigned gb_metrics_port(const gb_metrics_t *m) { return m ? m->port : 0; }

#ifdef GB_HAVE_MHD
static enum MHD_Result respond(struct MHD_Connection *c, unsigned code, const char *type, char *body,
                               size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

/* libmicrohttpd's own unescaping, except that a %00 is kept as it is: the
 * NUL it makes would end the path early ("/metrics%00x" read as "/metrics"). */
static size_t unescape_no_nul(void *cls, struct MHD_Connection *c, char *uri)
{
    (void)cls, (void)c;
    for (const char *p = uri; (p = strchr(p, '%')) != NULL; p++)
        if (p[1] == '0' && p[2] == '0')
            return strlen(uri);
    return MHD_http_unescape(uri);
}

/* The raw URI's length as libmicrohttpd read it, up to its first NUL byte,
 * before it is split or unescaped: on_request gets it as *con_cls. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls, (void)c;
    return (void *)(uintptr_t)((uri ? strlen(uri) : 0) + 1);
}

/* Whether the request line's URI held a raw NUL byte, which ends `url`
 * early ("/metrics\0x" read as "/metrics"). libmicrohttpd keeps the URI and
 * the version in the request line's buffer, the version right after the
 * URI and the space it ended at; a URI whose first NUL comes before that
 * space had a raw one. Only a version found where that layout puts it is
 * compared, so another layout refuses nothing here (newer libmicrohttpd
 * refuses a request line with a NUL before it gets this far). */
static bool uri_had_nul(const char *url, const char *version, uintptr_t seen)
{
    if (seen == 0 || !version || version <= url || (size_t)(version - url) > 65536)
        return false;
    const size_t raw = (size_t)(version - url) - 1; /* the URI's bytes up to the space */
    return version[-1] == '\0' && strncmp(version, "HTTP/", 5) == 0 && seen - 1 < raw;
}

/* The HTTP thread: GET /metrics renders a copy of the published snapshot. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)upload;
    gb_metrics_t *m = cls;
    static char not_found[] = "not found: the metrics are at /metrics\n";
    static char bad_method[] = "only GET and HEAD\n";
    if (*upload_size)
        *upload_size = 0; /* ignore any body */
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", bad_method,
                       sizeof bad_method - 1, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") != 0 || uri_had_nul(url, version, (uintptr_t)*con_cls))
        return respond(c, MHD_HTTP_NOT_FOUND, "text/plain", not_found, sizeof not_found - 1,
                       MHD_RESPMEM_PERSISTENT);
    gb_metrics_snap_t *copy = malloc(sizeof *copy);
    char *body = NULL;
    size_t len = 0;
    FILE *f = copy ? open_memstream(&body, &len) : NULL;
    if (!f) {
        free(copy);
        return MHD_NO;
    }
    pthread_mutex_lock(&m->mu);
    *copy = m->snap;
    pthread_mutex_unlock(&m->mu);
    gb_metrics_render(copy, f);
    free(copy);
    if (fclose(f) != 0 || !body) {
        free(body);
        return MHD_NO;
    }
    return respond(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
                   MHD_RESPMEM_MUST_FREE);
}
#endif

gb_err gb_metrics_start(const gb_metrics_config_t *mc, gb_metrics_t **out, char *err, size_t errlen)
{
    *out = NULL;
#ifndef GB_HAVE_MHD
    (void)mc;
    snprintf(err, errlen, "metrics.enabled: this gpubridge was built without libmicrohttpd "
                          "(install libmicrohttpd-dev and rebuild)");
    return GB_ERR_CONFIG;
#else
    struct sockaddr_storage ss;
    char why[160];
    if (gb_metrics_parse_listen(mc->listen, &ss, why, sizeof why) != 0) {
        snprintf(err, errlen, "metrics.listen: %s", why);
        return GB_ERR_CONFIG;
    }
    gb_metrics_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return GB_ERR_NOMEM;
    }
    pthread_mutex_init(&m->mu, NULL);
    /* epoll or poll, not select(): with the raised descriptor limit a scrape
     * may come on a descriptor past FD_SETSIZE. */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* A few scrapers at most: a small connection limit and a short timeout
     * keep a slow or hostile peer from holding the thread. */
    m->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 16u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_UNESCAPE_CALLBACK, unescape_no_nul,
                            NULL, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, NULL, MHD_OPTION_END);
    if (!m->d) {
        snprintf(err, errlen, "metrics: cannot listen on %s (address in use, or not an "
                              "address of this host)", mc->listen);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return GB_ERR_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
    m->port = di ? di->port : 0;
    *out = m;
    return GB_OK;
#endif
}

void gb_metrics_stop(gb_metrics_t **pm)
{
    if (!pm || !*pm)
        return;
    gb_metrics_t *m = *pm;
#ifdef GB_HAVE_MHD
    MHD_stop_daemon(m->d);
#endif
    pthread_mutex_destroy(&m->mu);
    free(m);
    *pm = NULL;
}
