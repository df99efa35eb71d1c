/* The bridge's configuration: loaded from a libconfig file (config/gpubridge.cfg
 * documents every key) or taken from the embedded defaults when no file is given.
 *
 * gb_config_t is a plain value with fixed-size tables: loading fills a temporary
 * and copies it out only when everything validated, so a failed load leaves the
 * caller's config untouched (nothing half-loaded). */
#ifndef GB_CONFIG_H
#define GB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "log.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_MAX_ENDPOINTS 8
#define GB_MAX_GRAIN_TYPES 16
#define GB_MAX_GRAIN_LIBS 8
#define GB_MAX_IO_THREADS 16
#define GB_MAX_HOSTS 16
#define GB_MAX_DEVICES 8     /* devices one bridge drives (`devices`) */
/* Ring kernels of one bridge, grain types on all devices together (the
 * server keeps 32-bit masks of rings). */
#define GB_MAX_RINGS 32
#define GB_MAX_CLIENT_KEYS 32
#define GB_NAME_LEN 64
#define GB_PATH_LEN 256
#define GB_KEY_LEN 41 /* Z85-encoded CURVE key (40 chars) + NUL */

typedef enum gb_mode {
    GB_MODE_AUTO = 0,
    GB_MODE_PERSISTENT,
    GB_MODE_RELAUNCH,
    GB_MODE_CPU,
} gb_mode;

/* "auto", "persistent", "relaunch", "cpu". */
const char *gb_mode_name(gb_mode mode);
/* Returns 0 and sets *out when name is a valid mode, -1 otherwise. */
int gb_mode_parse(const char *name, gb_mode *out);

/* Per grain type ring settings (the `grains` list). */
typedef struct gb_grain_config {
    char type[GB_NAME_LEN];          /* grain type name, e.g. "bank.account" */
    uint32_t queue_capacity;         /* slots per ring, power of two, 2..1<<24 */
    uint32_t slot_size;              /* bytes per slot incl. 32-byte header, power of two, 64..65536 */
    uint32_t messages_per_iteration; /* dispatch window of the kernel/threads, 1..4096 */
    uint32_t max_grains;             /* activations held at once (state table size), 1..1<<24 */
    uint32_t cpu_threads;            /* worker threads in cpu mode, 1..256 */
    uint32_t collection_age_s;       /* idle seconds before an activation may be collected (activation.h) */
    uint32_t max_evicted_kb;         /* host memory for evicted activations' states, KiB; 0 (params
                                      * built by hand): GB_MAX_EVICTED_KB_DEFAULT */
} gb_grain_config_t;

/* Orleans' default collection age: 15 minutes. */
#define GB_COLLECTION_AGE_S_DEFAULT 900u
/* The settings of the built-in grain types (grains/builtin_grains.c), the
 * defaults of a config: a type the config does not list keeps its own. */
extern const gb_grain_config_t gb_builtin_grain_configs[];
extern const size_t gb_n_builtin_grain_configs;
/* The default bound of a grain type's store of evicted states: 64 MiB. */
#define GB_MAX_EVICTED_KB_DEFAULT 65536u
#define GB_MAX_EVICTED_KB_MAX (64u << 20) /* 64 GiB */
/* A grain library (a `grains` entry with `library`): a shared object of grain
 * types built with the grain SDK (gpubridge/grain.h), loaded at start
 * (grain_libs.h). Where it was given, for error messages. */
typedef struct gb_grain_lib_config {
    char path[GB_PATH_LEN]; /* absolute, or relative to the config file's folder when given so */
    char file[GB_PATH_LEN]; /* the config file that names it */
    uint32_t line;
    uint32_t index; /* its entry in the grains list */
} gb_grain_lib_config_t;

/* A per-host override (the `hosts` list): first entry whose fnmatch(3) pattern
 * matches the hostname wins. */
typedef struct gb_host_config {
    char pattern[GB_NAME_LEN];
    gb_mode mode;
    bool has_device;
    int device; /* CUDA device index override when has_device */
} gb_host_config_t;

typedef struct gb_curve_config {
    bool enabled;
    char server_secret_key_file[GB_PATH_LEN]; /* file holding the Z85 secret key; must not be group/world readable */
    char server_public_key[GB_KEY_LEN];
    size_t n_allowed;
    char allowed_clients[GB_MAX_CLIENT_KEYS][GB_KEY_LEN]; /* Z85 public keys */
    size_t n_admin;
    char admin_clients[GB_MAX_CLIENT_KEYS][GB_KEY_LEN]; /* may change state (authority.h); admitted too */
} gb_curve_config_t;

/* The Prometheus endpoint (metrics.c): off by default. */
typedef struct gb_metrics_config {
    bool enabled;
    char listen[GB_NAME_LEN]; /* "ADDR:PORT" or "[ADDR6]:PORT"; port 0: any free port (logged) */
} gb_metrics_config_t;

typedef struct gb_config {
    char source[GB_PATH_LEN]; /* the file it came from, or "<defaults>" */
    gb_log_level log_level;
    gb_log_format log_format;
    gb_metrics_config_t metrics;
    size_t n_endpoints;
    char endpoints[GB_MAX_ENDPOINTS][GB_PATH_LEN];
    int device;     /* CUDA device index */
    /* `devices`: the devices every grain type runs on, keys spread over them
     * (gb_device_of_key). n_devices 0: `device` alone. devices_all: "all",
     * the host's CUDA devices, known only once detected. */
    size_t n_devices;
    int devices[GB_MAX_DEVICES];
    bool devices_all;
    gb_mode mode;   /* global mode before host overrides */
    uint32_t max_message_size;        /* bytes of one ZeroMQ frame, checked before decoding */
    uint32_t arena_mb;                /* MiB of bulk memory for team grains (their shared data); 0: none */
    uint32_t shutdown_drain_ms;       /* after SIGTERM: how long in-flight requests may still finish */
    uint32_t io_threads;              /* bridge threads that decode, feed rings and encode (1: one loop) */
    uint32_t reply_backlog_mb;        /* bound on all clients' unsent replies (docs/protocol.md) */
    /* persistent mode */
    uint32_t idle_spin_polls;         /* polls before the kernel starts to back off */
    uint32_t idle_backoff_max_ns;     /* longest __nanosleep of an idle kernel */
    uint32_t heartbeat_deadline_ms;   /* a kernel must show a heartbeat this soon after launch */
    /* relaunch mode */
    uint32_t max_messages_per_launch; /* budget of one relaunch */
    /* messages between grains (docs/design.md, "Messages between grains") */
    uint32_t mail_outbox_kb;          /* bound on messages waiting for room in their target's ring */
    uint32_t mail_hold_ms;            /* longest a message waits there before it is undeliverable */
    uint32_t mail_max_hops;           /* grains one request may pass through (forwards and sends) */
    bool mail_device_links;           /* persistent mode: forwards between kernels of one GPU by device links */
    uint32_t mail_link_slots;         /* slots of each device link (a power of two) */
    /* placement */
    bool force_fallback_placement;    /* test switch: act as if mapped pinned memory failed */
    size_t n_grains;
    gb_grain_config_t grains[GB_MAX_GRAIN_TYPES];
    size_t n_libs;
    gb_grain_lib_config_t libs[GB_MAX_GRAIN_LIBS];
    size_t n_hosts;
    gb_host_config_t hosts[GB_MAX_HOSTS];
    gb_curve_config_t curve;
    bool remote_control; /* any peer may Activate/Deactivate/Terminate (authority.h) */
    int ipc_peer_pid; /* not a key: a supervised worker admits connections from this pid only */
} gb_config_t;

/* Fills *cfg with the embedded defaults (the same values as config/gpubridge.cfg). */
void gb_config_defaults(gb_config_t *cfg);
/* io_threads when the file names none: half the host's cores, at most 4, at
 * least 1 (docs/operations.md). */
uint32_t gb_config_io_threads_default(void);

/* Loads and validates path. On error returns GB_ERR_CONFIG (or GB_ERR_IO), leaves
 * *cfg unchanged, and writes "file:line: what is wrong" into err (errlen bytes). */
gb_err gb_config_load(const char *path, gb_config_t *cfg, char *err, size_t errlen);

/* Same as gb_config_load, from a string. name (may be NULL) is used in error
 * messages and, unless NULL or in angle brackets ("<config_text>"), as the
 * file's path: relative paths in the text are joined to its folder (the
 * working directory when it has none). */
gb_err gb_config_load_string(const char *text, const char *name, gb_config_t *cfg,
                             char *err, size_t errlen);

/* The grain settings for type, or NULL when the config has no such grain type. */
const gb_grain_config_t *gb_config_grain(const gb_config_t *cfg, const char *type);
/* Adds type with the generic settings (a loaded library's type the config
 * does not list); returns its entry (the existing one when listed), or NULL
 * when the table is full. */
gb_grain_config_t *gb_config_add_grain(gb_config_t *cfg, const char *type);

/* With CURVE enabled: reads curve.server_secret_key_file (a regular file owned
 * by this user or root, mode 0600 or stricter) and checks that it is the
 * secret key of curve.server_public_key. Copies the key (41 bytes) into
 * secret_out when not NULL. GB_OK when CURVE is off. (curve.c) */
gb_err gb_config_check_curve(const gb_config_t *cfg, char *secret_out, char *err, size_t errlen);

/* Writes the effective config in libconfig syntax (what --check-config prints). */
void gb_config_print(const gb_config_t *cfg, FILE *out);

/* The metrics group's listen address (the server's Prometheus endpoint,
 * server/metrics.h), checked here with the rest of the config. */
#define GB_METRICS_DEFAULT_LISTEN "127.0.0.1:9464"
/* Checks "IPV4:PORT" or "[IPV6]:PORT" (numeric addresses, port 0..65535);
 * fills *out when not NULL. Returns 0, or -1 with a reason in why. */
/* Whether this build has libmicrohttpd. */
bool gb_metrics_available(void);
struct sockaddr_storage;
int gb_metrics_parse_listen(const char *listen, struct sockaddr_storage *out, char *why,
                            size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
