/* gpubridge/client.h: libgpubridge, the C client of gpubridge bridges.
 *
 * A client holds one ZeroMQ DEALER socket per bridge endpoint and speaks the
 * wire of proto/gpubridge.proto: it sends ClientFrames (one Envelope, or a
 * Batch) and matches ServerFrame replies by correlation id only.
 *
 * Placement: a grain (type, key) always goes to endpoint
 * gbc_placement(type, key, n) of the n endpoints given to gbc_client_new, so
 * its turns stay on one bridge (one GPU) while different keys spread over
 * all of them. The hash is fixed (see gbc_placement), so every client,
 * whatever its language, places a key on the same endpoint; changing n moves
 * keys (their grain state starts afresh on the new bridge).
 *
 * A bridge that dies (docs/operations.md "Several bridges"): requests
 * already sent to it fail as soon as the client sees the connection end,
 * whatever their deadline, since no reply can come on a new connection
 * (gbc_call: GBC_ERR_TIMEOUT; gbc_send: a STATUS_TIMEOUT reply in gbc_poll;
 * both texts say "connection to the bridge lost"); they may have run. Requests made
 * while it is down are never sent: gbc_call fails with GBC_ERR_CONNECT at
 * its deadline, a gbc_send request completes with STATUS_TIMEOUT ("not
 * sent ..., so not processed") and is dropped. Keys on the other bridges
 * are served meanwhile, and gbc_poll hands over their replies without
 * waiting for the dead one. Nothing is re-placed on another bridge. Once
 * the bridge is back on its endpoint the client reconnects by itself; the
 * grains there start afresh.
 *
 * Use: gbc_call for one synchronous round trip; gbc_send + gbc_poll to keep
 * many requests in flight (pipelining): sends are queued per endpoint into
 * Batch frames, flushed when a batch is full, on gbc_flush or on gbc_poll.
 * Control helpers (activate, status, ...) sit on top; typed helpers for
 * the demo grains (vecadd, echo) are in <gpubridge/demo.h>. Every call to one grain is delivered in the order it was made.
 *
 * Threads: a client belongs to one thread at a time (ZeroMQ sockets are not
 * thread-safe); use one client per thread. gbc_last_error() and
 * gbc_last_status() are per thread.
 *
 * Errors: every fallible function returns gbc_err (GBC_OK is 0) and, on
 * failure, leaves a sentence in gbc_last_error(). A reply with a non-OK
 * status is GBC_ERR_STATUS; its status is in the reply (or gbc_last_status())
 * and the bridge's text in the reply's error (and in gbc_last_error()).
 *
 * Timeouts (every int timeout_ms argument, and options.timeout_ms): > 0
 * milliseconds; 0 or GBC_TIMEOUT_DEFAULT the default (the client's
 * options.timeout_ms; in the options, 5000 ms); GBC_TIMEOUT_NOWAIT do not
 * wait (send only if it can go at once, take only a reply already there);
 * GBC_TIMEOUT_FOREVER no deadline. Other negative values are the default.
 *
 * Structs that can grow: gbc_options_t and the control reports
 * (gbc_grain_status_t, gbc_telemetry_t, gbc_detect_report_t) start with
 * struct_size. Set it to sizeof the struct (gbc_options_init and the
 * GBC_*_INIT initialisers do); the library reads or writes only that many
 * bytes, so a program built against an older header keeps working with a
 * newer library. 0 stands for the layout of version 0.2, where the field
 * came in. Arrays of reports (GBC_ALL_ENDPOINTS) are strided by the first
 * element's struct_size.
 *
 * Versions: GBC_VERSION_MAJOR/MINOR/PATCH are the header's, gbc_version()
 * the library's; a library serves programs built against an older header
 * of the same major version.
 *
 * Include: <gpubridge/client.h> (the old <gpubridge_client.h> includes it
 * and <gpubridge/demo.h>). Link: CMake `find_package(gpubridge)` +
 * `gpubridge::client`, or pkg-config `gpubridge`. The generated protobuf-c code
 * of every schema (proto/ and the built-in grains', grains/<name>/) is part of
 * the library and its headers are installed in include/gpubridge (e.g.
 * <gpubridge/pagerank.pb-c.h>) for payloads of other grain types; the schemas
 * themselves in share/gpubridge/proto. */
#ifndef GPUBRIDGE_CLIENT_API_H
#define GPUBRIDGE_CLIENT_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GBC_API __attribute__((visibility("default")))
#else
#define GBC_API
#endif

#define GBC_VERSION_MAJOR 0
#define GBC_VERSION_MINOR 2
#define GBC_VERSION_PATCH 0
#define GBC_VERSION "0.2.0"
/* One number per version, ordered: GBC_MAKE_VERSION(0, 2, 0). */
#define GBC_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define GBC_VERSION_NUMBER GBC_MAKE_VERSION(GBC_VERSION_MAJOR, GBC_VERSION_MINOR, GBC_VERSION_PATCH)

#define GBC_TIMEOUT_DEFAULT (-1)
#define GBC_TIMEOUT_FOREVER (-2)
#define GBC_TIMEOUT_NOWAIT (-3)
/* gbc_ctl_activate / _deactivate / _terminate: every endpoint of the client. */
#define GBC_ALL_ENDPOINTS ((size_t)-1)

typedef enum gbc_err {
    GBC_OK = 0,
    GBC_ERR_NOMEM,       /* an allocation failed */
    GBC_ERR_INVALID,     /* a bad argument (NULL, empty type, bad endpoint, bad key) */
    GBC_ERR_TIMEOUT,     /* no reply before the deadline, or none can come (the connection
                            ended with it in flight); request sent, it may have run */
    GBC_ERR_CONNECT,     /* not connected: the request could not be sent before the deadline */
    GBC_ERR_AUTH,        /* the CURVE handshake failed (wrong server key, client key not allowed) */
    GBC_ERR_STATUS,      /* the bridge answered with a non-OK status (see the reply) */
    GBC_ERR_PROTO,       /* a reply that cannot be decoded or does not fit the request */
    GBC_ERR_TOO_LARGE,   /* one envelope larger than options.max_frame_bytes */
    GBC_ERR_EMPTY,       /* gbc_poll: nothing in flight and nothing received */
    GBC_ERR_UNSUPPORTED, /* this libzmq lacks CURVE */
    GBC_ERR_IO,          /* a ZeroMQ call failed unexpectedly */
    GBC_ERR__COUNT
} gbc_err;

/* Reply status: the numbers of gpubridge.Status (proto/gpubridge.proto). The
 * wire enum is open: a newer bridge may send numbers not listed here. */
typedef enum gbc_status {
    GBC_STATUS_OK = 0,
    GBC_STATUS_MALFORMED = 1,
    GBC_STATUS_UNKNOWN_GRAIN_TYPE = 2,
    GBC_STATUS_UNKNOWN_MESSAGE_TYPE = 3,
    GBC_STATUS_TOO_LARGE = 4,
    GBC_STATUS_MISSING_FIELD = 5,
    GBC_STATUS_TERMINATED = 6,
    GBC_STATUS_INACTIVE = 7,
    GBC_STATUS_BUSY = 8,
    GBC_STATUS_GPU_ERROR = 9,
    GBC_STATUS_INTERNAL = 10,
    GBC_STATUS_UNAUTHORIZED = 11,
    GBC_STATUS_TIMEOUT = 12,
    GBC_STATUS_SHUTTING_DOWN = 13,
    GBC_STATUS_HANDLER_ERROR = 14,
    GBC_STATUS_NO_ACTIVATION = 15,
    GBC_STATUS_UNDELIVERABLE = 16 /* a grain's forward could not reach its target */
} gbc_status;

/* Options of gbc_client_new. Zero in a field means its default, so a
 * zero-initialised struct (or NULL) gives all defaults; gbc_options_init
 * fills the explicit values and struct_size. */
typedef struct gbc_options {
    size_t struct_size;     /* sizeof(gbc_options_t); 0: the 0.2 layout */
    int timeout_ms;         /* default deadline of calls, of sending and of each
                               gbc_send request; 0: 5000; GBC_TIMEOUT_FOREVER: none */
    size_t max_batch;       /* envelopes per Batch frame; 0: 256; 1: no batching */
    size_t max_frame_bytes; /* largest frame sent; 0: 1 MiB (the bridge's default
                               max_message_size) */
    /* CURVE, all Z85 (40 characters). NULL or "": plain connections. With a
     * server key and no client keys, an ephemeral client key pair is made
     * (fine when the bridge has no allow-list). */
    const char *curve_server_key; /* the bridge's public key */
    const char *curve_public_key; /* this client's public key */
    const char *curve_secret_key; /* this client's secret key */
} gbc_options_t;

/* One reply. Filled by gbc_call / gbc_poll, which treat *out as
 * uninitialised and always leave it initialised (zeroed when there is no
 * reply); release it with gbc_reply_clear before reusing or dropping it. */
typedef struct gbc_reply {
    uint64_t correlation_id; /* the request's id (0: the bridge could not decode a frame) */
    int status;              /* gbc_status */
    char *error;             /* the bridge's error text, NUL-terminated, C0 controls and DEL as '?'; NULL when none */
    uint32_t message_type;   /* type of payload (grain message or ControlMessageType) */
    uint8_t *payload;        /* the reply message, protobuf-encoded; NULL when empty */
    size_t payload_len;
    size_t endpoint;         /* index of the endpoint that answered */
} gbc_reply_t;

typedef struct gbc_client gbc_client_t;

/* ---- version ----------------------------------------------------------- */

/* The library's version (each pointer may be NULL); returns
 * GBC_MAKE_VERSION of it. */
GBC_API int gbc_version(int *major, int *minor, int *patch);

/* ---- errors ------------------------------------------------------------ */

/* A short text for err; never NULL. */
GBC_API const char *gbc_strerror(gbc_err err);
/* "STATUS_INACTIVE" etc.; "STATUS_?" for numbers this library does not know. */
GBC_API const char *gbc_status_name(int status);
/* A sentence about this thread's last failure (endpoint, status, the
 * bridge's text); "" before any. Valid until the next gbc_ call. */
GBC_API const char *gbc_last_error(void);
/* The status of this thread's last GBC_ERR_STATUS (GBC_STATUS_OK if none). */
GBC_API int gbc_last_status(void);

/* ---- client ------------------------------------------------------------ */

/* Fills *opt with the defaults (explicit values of what zero means). */
GBC_API void gbc_options_init(gbc_options_t *opt);

/* Connects to n >= 1 bridge endpoints ("tcp://host:port", "ipc:///path").
 * Connecting is asynchronous: a bridge that is down only shows as
 * GBC_ERR_CONNECT when a request cannot be sent before its deadline. The
 * strings are copied. opt may be NULL. */
GBC_API gbc_err gbc_client_new(const char *const *endpoints, size_t n,
                               const gbc_options_t *opt, gbc_client_t **out);
/* Closes the sockets; queued sends that were not flushed are dropped and
 * replies still in flight are lost. Takes NULL; clears *p. */
GBC_API void gbc_client_destroy(gbc_client_t **p);

GBC_API size_t gbc_endpoint_count(const gbc_client_t *c);
/* The i-th endpoint string; NULL when out of range. */
GBC_API const char *gbc_endpoint(const gbc_client_t *c, size_t i);

/* The endpoint index of grain (type, key) among n (0 when n is 0):
 *   h = FNV-1a-64 over the bytes of type, then over the 8 bytes of key
 *       (little-endian); h = splitmix64 finaliser of h; index = h % n.
 * Stable across processes, machines and library versions. */
GBC_API size_t gbc_placement(const char *type, uint64_t key, size_t n);
/* The device of a bridge's n devices (its config's `devices`; a grain
 * type's gbc_grain_status_t.n_devices) that serves key, of every grain
 * type (docs/protocol.md, "Several devices"; 0 when n <= 1):
 *   z = key + 0x9e3779b97f4a7c15; z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
 *   z = (z ^ z >> 27) * 0x94d049bb133111eb; z ^= z >> 31; index = z % n.
 * A client that spreads one job's grains over the devices (the PageRank
 * driver) picks its keys with it. Stable across versions. */
GBC_API uint32_t gbc_device_of_key(uint64_t key, uint32_t n);
/* gbc_placement over this client's endpoints. */
GBC_API size_t gbc_endpoint_of(const gbc_client_t *c, const char *type, uint64_t key);

/* ---- messages ---------------------------------------------------------- */

/* One request to grain (type, key), waiting for its reply. payload is the
 * grain's own message, protobuf-encoded (may be NULL when len is 0).
 * Returns GBC_OK (out holds the reply), GBC_ERR_STATUS (out holds the error
 * reply), or an error without a reply (out zeroed). */
GBC_API gbc_err gbc_call(gbc_client_t *c, const char *type, uint64_t key,
                         uint32_t message_type, const void *payload, size_t len,
                         gbc_reply_t *out, int timeout_ms);

/* Queues one request (payload copied) and returns at once with its
 * correlation id in *corr_out (may be NULL). Ids are per client, start at 1
 * and grow by one per request (calls and control operations included).
 * Returns GBC_ERR_CONNECT or GBC_ERR_TIMEOUT when the endpoint's batch is
 * full and cannot be sent before the default deadline (backpressure):
 * nothing was queued; poll for replies and retry. */
GBC_API gbc_err gbc_send(gbc_client_t *c, const char *type, uint64_t key,
                         uint32_t message_type, const void *payload, size_t len,
                         uint64_t *corr_out);

/* Sends every queued batch (waits up to the default deadline for room). */
GBC_API gbc_err gbc_flush(gbc_client_t *c);

/* Flushes, then returns the next reply to a gbc_send request, in arrival
 * order (not send order). GBC_OK or GBC_ERR_STATUS: *out holds a reply (its
 * correlation_id says which request). GBC_ERR_TIMEOUT: none came in time,
 * also while requests wait unsent (a bridge still connecting, down or full:
 * gbc_last_error() says which); GBC_ERR_AUTH or GBC_ERR_CONNECT: an
 * endpoint with requests queued failed its handshake for good (CURVE
 * refused; not a gpubridge endpoint); GBC_ERR_EMPTY: nothing is in flight;
 * GBC_ERR_IO, GBC_ERR_NOMEM: ZeroMQ or an allocation failed. GBC_TIMEOUT_NOWAIT only takes what
 * has already arrived.
 * Each gbc_send request has a deadline: the client's timeout
 * (options.timeout_ms) from gbc_send. One with no reply by then completes
 * here with a reply made by the client: status GBC_STATUS_TIMEOUT, an error
 * text that says so (and whether the connection was lost), its
 * correlation_id; a late reply from the bridge is then dropped. So a bridge
 * that dies never leaves requests in flight for ever; one sent on a
 * connection that ends completes at once, the same way (text: "connection
 * to the bridge lost with the request in flight"). A request that could
 * not even be sent by then (bridge down, or full) is taken out of the queue,
 * never to be sent, and its text says "not sent". */
GBC_API gbc_err gbc_poll(gbc_client_t *c, gbc_reply_t *out, int timeout_ms);

/* gbc_send requests not yet answered (queued ones included). A reply
 * received, or made at the deadline, counts as answered before gbc_poll
 * hands it over: to take every reply, poll until GBC_ERR_EMPTY. */
GBC_API size_t gbc_in_flight(const gbc_client_t *c);

/* Frees what r holds and zeroes it. Takes NULL and cleared replies. */
GBC_API void gbc_reply_clear(gbc_reply_t *r);

/* ---- control (proto/control.proto) --------------------------------------
 * Each operation goes to one endpoint by index. Activate, deactivate and
 * terminate also take GBC_ALL_ENDPOINTS: then out (if not NULL) is an array
 * of gbc_endpoint_count() entries, one per endpoint, and the first failure
 * is returned (the others are still attempted).
 * Strings below are copied from the reply, truncated to their arrays and
 * always NUL-terminated (the bridge's own limits fit). Set each report's
 * struct_size before the call (GBC_GRAIN_STATUS_INIT etc.); the rest of it
 * is filled. */

typedef enum gbc_grain_state {
    GBC_GRAIN_STATE_UNSPECIFIED = 0,
    GBC_GRAIN_STATE_ACTIVE = 1,
    GBC_GRAIN_STATE_INACTIVE = 2,
    GBC_GRAIN_STATE_TERMINATED = 3,
    GBC_GRAIN_STATE_FAILED = 4
} gbc_grain_state;

/* A bridge with several devices (its config's `devices`) reports each of a
 * grain type's devices (docs/protocol.md, "Several devices"). */
#define GBC_MAX_DEVICES 8

typedef struct gbc_device_status {  /* control.GrainTypeStatus.devices[i] */
    int32_t device;                 /* CUDA device index; -1 in cpu mode */
    uint32_t device_number;         /* its place in the bridge's devices list */
    char mode[16];
    int state;                      /* gbc_grain_state */
    int exit_reason;
    int32_t last_error_code;
    uint64_t heartbeat;
    uint64_t heartbeat_age_ns;
} gbc_device_status_t;

typedef struct gbc_device_telemetry { /* control.Telemetry.devices[i] */
    int32_t device;                 /* CUDA device index; -1 in cpu mode */
    uint32_t device_number;
    uint64_t messages_processed;
    uint64_t errors;
    uint64_t launches;
    uint32_t queue_depth_in;
    uint32_t queue_depth_out;
} gbc_device_telemetry_t;

typedef struct gbc_grain_status {   /* control.GrainTypeStatus */
    size_t struct_size;             /* sizeof(gbc_grain_status_t); 0: the 0.2 layout */
    char grain_type[64];
    char mode[16];                  /* "persistent", "relaunch" or "cpu" */
    int state;                      /* gbc_grain_state */
    int placement;                  /* 1 mapped, 2 device staging, 3 host */
    int exit_reason;                /* control.ExitReason number */
    int32_t last_error_code;
    char last_error_name[64];
    uint64_t heartbeat;
    uint64_t heartbeat_age_ns;
    int32_t device;
    uint32_t queue_capacity;
    uint32_t slot_size;
    uint32_t lanes;                 /* keys are spread over this many (worker blocks of a team
                                     * kernel, table partitions, cpu threads) */
    uint32_t max_message_size;      /* largest frame taken; larger-than-slot messages go out
                                     * of line up to it (0: a bridge that does not say) */
    /* Several devices (0.4): the fields above are then the first device's;
     * n_devices 0 with one device. */
    uint32_t device_number;
    uint32_t n_devices;
    gbc_device_status_t devices[GBC_MAX_DEVICES];
} gbc_grain_status_t;

typedef struct gbc_telemetry {      /* control.Telemetry */
    size_t struct_size;             /* sizeof(gbc_telemetry_t); 0: the 0.2 layout */
    char grain_type[64];
    uint64_t messages_processed;
    uint64_t errors;
    uint64_t launches;
    uint64_t iterations;
    uint32_t queue_depth_in;
    uint32_t queue_depth_out;
    uint32_t queue_capacity;
    uint64_t timestamp_ns;
    /* Messages between grains (0.3): sent, forwarded and undeliverable by
     * this type's grains; held: waiting for room in this type's ring. */
    uint64_t mail_sent;
    uint64_t mail_forwarded;
    uint64_t mail_held;
    uint64_t mail_undeliverable;
    /* Several devices (0.4): the counters and depths above are then sums
     * over them; n_devices 0 with one device. */
    int32_t device;
    uint32_t n_devices;
    gbc_device_telemetry_t devices[GBC_MAX_DEVICES];
    /* Device links (0.5): of mail_forwarded, the forwards that went kernel to
     * kernel through device memory (persistent mode), in all and on each of
     * devices[] (whose messages_processed does not count them). */
    uint64_t mail_linked;
    uint64_t devices_mail_linked[GBC_MAX_DEVICES];
    /* Clients (0.6): connections that closed with replies owed, and the
     * replies discarded for them (bridge-wide, the same in every type's). */
    uint64_t connections_dropped;
    uint64_t replies_undelivered;
    /* Bridge-wide (0.7): memory of frames held for full rings and of
     * replies waiting for clients that read slowly, now; frames refused as
     * too large, and for their client's unread replies. */
    uint64_t held_bytes;
    uint64_t reply_backlog_bytes;
    uint64_t frames_too_large;
    uint64_t frames_refused_unread;
} gbc_telemetry_t;

typedef struct gbc_type_list {      /* control.GrainTypeList; free with gbc_type_list_clear */
    size_t n;
    char **names;
} gbc_type_list_t;

typedef struct gbc_detect_report {  /* control.DetectReport */
    size_t struct_size;             /* sizeof(gbc_detect_report_t); 0: the 0.2 layout */
    int32_t cuda_device_count;
    char device_name[256];
    int wsl2, wsl1, kernel_exec_timeout, mapped_pinned_ok;
    int concurrent_managed_access, cooperative_launch, host_native_atomics;
    char rule_fired[256];
    char mode[16];
    char mode_requested[16];
    char mode_source[256];
    int cuda_built;
    int32_t device;
    int32_t compute_capability_major, compute_capability_minor;
    int dev_dxg;
    char os_release[256];
    char fallback_reason[768];
} gbc_detect_report_t;

/* The control calls below decode the bridge's reply into these structs.
 * Every string in them (and in gbc_type_list_t, gbc_limits_t, a reply's
 * error and gbc_last_error) is the peer's, with its C0 control bytes and
 * DEL replaced by '?', so that printing it sends a terminal no escape or
 * control sequence; a bridge's names never hold such bytes. A reply that
 * does not decode, or nests its messages more than 8 levels deep (a
 * bridge's nest 1), is GBC_ERR_PROTO. */
#define GBC_GRAIN_STATUS_INIT {.struct_size = sizeof(gbc_grain_status_t)}
#define GBC_TELEMETRY_INIT {.struct_size = sizeof(gbc_telemetry_t)}
#define GBC_DETECT_REPORT_INIT {.struct_size = sizeof(gbc_detect_report_t)}

GBC_API gbc_err gbc_ctl_activate(gbc_client_t *c, size_t endpoint, const char *type,
                                 gbc_grain_status_t *out, int timeout_ms);
GBC_API gbc_err gbc_ctl_deactivate(gbc_client_t *c, size_t endpoint, const char *type,
                                   gbc_grain_status_t *out, int timeout_ms);
/* Activate resumes a paused type; deactivate pauses it (its requests wait,
 * in order, until the next activate); terminate stops its kernel and returns
 * once it has stopped (the type then answers STATUS_TERMINATED until the
 * bridge restarts its GPU side). */
GBC_API gbc_err gbc_ctl_terminate(gbc_client_t *c, size_t endpoint, const char *type,
                                  gbc_grain_status_t *out, int timeout_ms);
GBC_API gbc_err gbc_ctl_status(gbc_client_t *c, size_t endpoint, const char *type,
                               gbc_grain_status_t *out, int timeout_ms);
GBC_API gbc_err gbc_ctl_telemetry(gbc_client_t *c, size_t endpoint, const char *type,
                                  gbc_telemetry_t *out, int timeout_ms);
/* Fills *out (treated as uninitialised); free with gbc_type_list_clear. */
GBC_API gbc_err gbc_ctl_list(gbc_client_t *c, size_t endpoint, gbc_type_list_t *out,
                             int timeout_ms);
GBC_API void gbc_type_list_clear(gbc_type_list_t *l);
GBC_API gbc_err gbc_ctl_detect(gbc_client_t *c, size_t endpoint, gbc_detect_report_t *out,
                               int timeout_ms);
typedef struct gbc_msg_limits {    /* control.MessageTypeLimits */
    uint32_t message_type;          /* Envelope.message_type */
    char name[64];                  /* the request message, e.g. "VectorAddRequest" */
    uint32_t max_payload;           /* bytes of Envelope.payload at most */
    uint32_t max_elements;          /* entries of its repeated field at most; 0: none */
} gbc_msg_limits_t;

#define GBC_LIMITS_MAX_MESSAGES 16
typedef struct gbc_type_limits {   /* control.GrainTypeLimits */
    char grain_type[64];
    uint32_t slot_size;             /* bytes per ring slot, 32-byte header included */
    uint32_t record_size;           /* slot_size - 32 */
    uint32_t queue_capacity;
    uint32_t max_grains;            /* activations held at once */
    size_t n_messages;              /* request types kept here: the first GBC_LIMITS_MAX_MESSAGES
                                     * (gbc_limits_messages gives all) */
    gbc_msg_limits_t messages[GBC_LIMITS_MAX_MESSAGES];
} gbc_type_limits_t;

typedef struct gbc_limits {        /* control.Limits; free with gbc_limits_clear */
    uint32_t max_message_size;      /* largest frame the bridge reads */
    uint64_t hold_bound;            /* bytes of frames held for full rings, all clients; past it: STATUS_BUSY */
    uint32_t max_replies_per_frame;
    size_t n_types;
    gbc_type_limits_t *types;
} gbc_limits_t;

/* The bridge's size limits (endpoint i): frame size, hold bound and, per
 * grain type, what each request message type accepts. Fills *out (treated as
 * uninitialised); free with gbc_limits_clear. */
GBC_API gbc_err gbc_ctl_limits(gbc_client_t *c, size_t endpoint, gbc_limits_t *out,
                               int timeout_ms);
GBC_API void gbc_limits_clear(gbc_limits_t *l);
/* Every request type grain type l->types[i] accepts (however many; the
 * struct keeps the first GBC_LIMITS_MAX_MESSAGES): *n of them, owned by l
 * (valid until gbc_limits_clear). NULL and *n 0 when i is out of range. */
GBC_API const gbc_msg_limits_t *gbc_limits_messages(const gbc_limits_t *l, size_t i, size_t *n);
/* The limits of (type, message_type) in l (among all its request types), or
 * NULL when l has none. */
GBC_API const gbc_msg_limits_t *gbc_limits_find(const gbc_limits_t *l, const char *type,
                                                uint32_t message_type);

/* Frees grain (type, key)'s state slot on the endpoint that hosts it;
 * GBC_ERR_STATUS with GBC_STATUS_NO_ACTIVATION when it had none. */
GBC_API gbc_err gbc_ctl_deactivate_grain(gbc_client_t *c, const char *type, uint64_t key,
                                         int timeout_ms);

/* Names for the numbers above ("active", "mapped", "terminated", ...; "?"). */
GBC_API const char *gbc_grain_state_name(int state);
GBC_API const char *gbc_placement_name(int placement);
GBC_API const char *gbc_exit_reason_name(int reason);

#ifdef __cplusplus
}
#endif
#endif
