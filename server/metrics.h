/* The Prometheus endpoint: an HTTP server (libmicrohttpd, its own thread)
 * that serves GET /metrics in the text exposition format (version 0.0.4).
 *
 * Threads: the bridge thread counts into a gb_metrics_snap_t of its own
 * (plain fields, one writer) and publishes a copy now and then
 * (gb_metrics_publish, under the mutex); the HTTP thread copies the published
 * one under the same mutex and renders its copy. Nothing else is shared.
 *
 * libmicrohttpd is optional at build time: without it gb_metrics_available()
 * is false, the config loader refuses metrics.enabled = true, and
 * gb_metrics_start fails with a sentence saying why. */
#ifndef GB_METRICS_H
#define GB_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "config.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_METRICS_N_STATUS 32  /* reply statuses counted (proto Status numbers) */
#define GB_METRICS_N_BUCKETS 16 /* latency buckets; the last is +Inf */

/* Upper bounds of the latency buckets in ns (the last is UINT64_MAX: +Inf). */
extern const uint64_t gb_metrics_bucket_ns[GB_METRICS_N_BUCKETS];

/* One grain type's numbers (on one device). Counters only grow; gauges are set on publish. */
typedef struct gb_metrics_type {
    char name[GB_NAME_LEN];
    gb_mode mode;             /* the mode it runs in (relaunch after a fallback) */
    int labelled_dev;         /* the bridge has several devices: label device="dev" */
    int dev;                  /* its device's number among them */
    int running;              /* it has a ring kernel (0: no handler in this build) */
    uint64_t requests;        /* fed into its ring */
    uint64_t replies;         /* answered out of its ring, any status */
    uint64_t errors[GB_METRICS_N_STATUS]; /* of those, by status (index 0 unused) */
    uint64_t deactivations;   /* DeactivateGrain answered OK */
    uint64_t lat_bucket[GB_METRICS_N_BUCKETS]; /* per bucket, not cumulative */
    uint64_t lat_count, lat_sum_ns;
    /* gauges and kernel counters, read at publish time */
    uint64_t in_flight, held_bytes, active;
    uint64_t heartbeat, launches, processed;
    uint64_t activations, evicted, evictions, restores; /* activation table (activation.h) */
    uint64_t evicted_bytes, evicted_max_bytes, evicted_max; /* its store of evicted states */
    uint64_t mail_sent, mail_forwarded, mail_held, mail_undeliverable; /* messages between grains */
    uint64_t mail_linked; /* of mail_forwarded, by device links */
} gb_metrics_type_t;

typedef struct gb_metrics_snap {
    gb_mode mode;                      /* the bridge's */
    uint64_t frames;                   /* client frames read */
    uint64_t replies[GB_METRICS_N_STATUS]; /* every reply sent, by status */
    uint64_t reloads, reload_failures;
    size_t n_types;
    gb_metrics_type_t types[GB_MAX_RINGS];
} gb_metrics_snap_t;

typedef struct gb_metrics gb_metrics_t;

/* Starts the HTTP thread on mc->listen. On error err holds a sentence. */
gb_err gb_metrics_start(const gb_metrics_config_t *mc, gb_metrics_t **out, char *err,
                        size_t errlen);
/* The port it listens on (the one chosen when the config said 0). */
unsigned gb_metrics_port(const gb_metrics_t *m);
/* Stops the thread and frees everything; takes NULL. */
void gb_metrics_stop(gb_metrics_t **m);

/* Bridge thread: makes snap what the next scrape shows (copied). */
void gb_metrics_publish(gb_metrics_t *m, const gb_metrics_snap_t *snap);

/* Writes snap in the Prometheus text format. */
void gb_metrics_render(const gb_metrics_snap_t *snap, FILE *out);

/* Bridge thread: counts one latency sample into t. */
void gb_metrics_observe(gb_metrics_type_t *t, uint64_t ns);

#ifdef __cplusplus
}
#endif
#endif
