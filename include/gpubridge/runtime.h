/* gpubridge embedding API: host grains in your own process, no daemon and no
 * ZeroMQ. docs/embedding.md has the walk-through; in short:
 *
 *   gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;   (mode, device, config)
 *   gpubridge_runtime_t *rt;
 *   gpubridge_runtime_new(&o, &rt);
 *   gpubridge_register_grain(rt, &gb_grain_my_type);  (GB_DEFINE_GRAIN(my_type, ...))
 *   gpubridge_runtime_start(rt);                       (one ring kernel per type)
 *   gpubridge_call(rt, "my.type", key, 1, &req, sizeof req, &reply, buf, sizeof buf, 1000);
 *   gpubridge_runtime_destroy(&rt);
 *
 * Payloads are raw bytes: a request is the record the grain's handler reads
 * (its `in`), a reply what the handler wrote (its `out`). No codec runs here,
 * not even a built-in type's (their records: echo.h, vecadd.h).
 *
 * Errors: every fallible call returns a gpubridge_err (GPUBRIDGE_OK is 0);
 * gpubridge_strerror() names the code, gpubridge_last_error() gives the
 * sentence of the calling thread's last failure (what, and why).
 *
 * Threading: every call may come from any thread once gpubridge_runtime_new
 * has returned; the runtime serialises them with a lock, and a waiting
 * gpubridge_call or gpubridge_poll does not hold it while it waits. Only
 * gpubridge_runtime_destroy must not overlap any other call on the same
 * runtime. Replies are made progress on by gpubridge_poll and gpubridge_call
 * (no thread of the runtime's own moves them): in relaunch mode a grain type
 * runs requests only while some thread polls or calls.
 *
 * Ownership: the caller owns every buffer it passes and gets; the runtime
 * copies payloads on send and into the caller's buffer on poll or call. Strings
 * the runtime returns (gpubridge_reply_t.type, names) live until
 * gpubridge_runtime_destroy; gpubridge_last_error()'s until the thread's next
 * call. Grain descriptors passed to gpubridge_register_grain are borrowed for
 * the life of the process (a GB_DEFINE_GRAIN descriptor is static). */
#ifndef GPUBRIDGE_RUNTIME_H
#define GPUBRIDGE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/grain.h"   /* gb_grain_desc_t, GB_DEFINE_GRAIN, gb_slot_status */
#include "gpubridge/version.h" /* GPUBRIDGE_VERSION_MAJOR / _MINOR / _PATCH (generated) */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUBRIDGE_API __attribute__((visibility("default")))
#else
#define GPUBRIDGE_API
#endif

/* The version of the library in use (the macros give the headers'); returns
 * "MAJOR.MINOR.PATCH". Any pointer may be NULL. */
GPUBRIDGE_API const char *gpubridge_version(int *major, int *minor, int *patch);

typedef enum gpubridge_err {
    GPUBRIDGE_OK = 0,
    GPUBRIDGE_ERR_INVALID,      /* a bad argument: NULL, out of range, an unknown mode name */
    GPUBRIDGE_ERR_NOMEM,        /* out of memory */
    GPUBRIDGE_ERR_CONFIG,       /* the config file is missing or invalid */
    GPUBRIDGE_ERR_GRAIN,        /* a grain type or library refused: wrong ABI, duplicate name, no GPU code, ... */
    GPUBRIDGE_ERR_UNKNOWN_TYPE, /* no such grain type served, or a message type it does not accept */
    GPUBRIDGE_ERR_TOO_LARGE,    /* a payload past the type's maximum, or a reply past the caller's buffer */
    GPUBRIDGE_ERR_FULL,         /* no room in the type's ring now: poll replies, then retry */
    GPUBRIDGE_ERR_TIMEOUT,      /* no reply (or acknowledgement) within the timeout */
    GPUBRIDGE_ERR_EMPTY,        /* gpubridge_poll: no reply waiting */
    GPUBRIDGE_ERR_STATE,        /* the call does not fit the runtime's state (started or not) */
    GPUBRIDGE_ERR_TERMINATED,   /* the grain type's ring kernel has stopped */
    GPUBRIDGE_ERR_NODEV,        /* the mode needs a GPU and there is none (or CUDA is not built in) */
    GPUBRIDGE_ERR_GPU,          /* a CUDA error: the grain type has failed */
    GPUBRIDGE_ERR_INTERNAL,     /* anything else: a bug; gpubridge_last_error() says what */
    GPUBRIDGE_ERR__COUNT
} gpubridge_err;

/* A short name of err ("invalid argument", ...); never NULL. */
GPUBRIDGE_API const char *gpubridge_strerror(gpubridge_err err);
/* The sentence of the calling thread's last failed call ("" when none). */
GPUBRIDGE_API const char *gpubridge_last_error(void);

typedef enum gpubridge_mode {
    GPUBRIDGE_MODE_AUTO = 0,   /* decide from the host: GPU persistent, relaunch, or cpu */
    GPUBRIDGE_MODE_PERSISTENT, /* a resident ring kernel per grain type */
    GPUBRIDGE_MODE_RELAUNCH,   /* ring kernels launched while requests wait */
    GPUBRIDGE_MODE_CPU,        /* the same handlers on host threads */
} gpubridge_mode;

/* "auto", "persistent", "relaunch", "cpu" ("?" otherwise). */
GPUBRIDGE_API const char *gpubridge_mode_name(gpubridge_mode mode);
/* GPUBRIDGE_ERR_INVALID for any other name. */
GPUBRIDGE_API gpubridge_err gpubridge_mode_parse(const char *name, gpubridge_mode *out);

typedef enum gpubridge_placement {
    GPUBRIDGE_PLACEMENT_AUTO = 0, /* options: mapped pinned memory where the host has it */
    GPUBRIDGE_PLACEMENT_HOST,     /* cpu mode: plain host memory */
    GPUBRIDGE_PLACEMENT_MAPPED,   /* mapped pinned host memory, zero-copy */
    GPUBRIDGE_PLACEMENT_STAGING,  /* device memory fed from a host staging copy */
} gpubridge_placement;

/* gpubridge_options_t.flags */
#define GPUBRIDGE_NO_CONFIG_GRAINS 1u /* serve only the types registered or named by gpubridge_serve, not the
                                       * config's grains list (the defaults' is echo, vecadd and PageRank's two) */
#define GPUBRIDGE_NO_CPU_FALLBACK 2u /* persistent or relaunch on a host without a GPU fails (GPUBRIDGE_ERR_NODEV)
                                      * instead of running in cpu mode */

typedef struct gpubridge_options {
    uint32_t size;          /* sizeof(gpubridge_options_t): set by the initialiser */
    gpubridge_mode mode;    /* AUTO: GPUBRIDGE_MODE, the config's hosts and mode, then detection */
    const char *mode_name;  /* when not NULL, beats mode: "auto", "persistent", "relaunch" or "cpu" */
    int device;             /* CUDA device index; -1: the config's (0 by default) */
    gpubridge_placement placement; /* AUTO, or STAGING to keep rings in device memory */
    const char *config_path;  /* a libconfig file (config/gpubridge.cfg documents it); NULL: defaults */
    const char *config_text;  /* or the same as a string (used when config_path is NULL) */
    const char *log_level;    /* "error", "warn", "info", "debug"; NULL: with a config (path or
                               * text), its log_level ("info" when it sets none); without, "warn"
                               * (process-wide: the log goes to stderr) */
    uint32_t flags;           /* GPUBRIDGE_NO_CONFIG_GRAINS, GPUBRIDGE_NO_CPU_FALLBACK */
} gpubridge_options_t;

#define GPUBRIDGE_OPTIONS_INIT                                                                                       \
    {(uint32_t)sizeof(gpubridge_options_t), GPUBRIDGE_MODE_AUTO, NULL, -1, GPUBRIDGE_PLACEMENT_AUTO, NULL, NULL,    \
     NULL, 0u}
/* The same as GPUBRIDGE_OPTIONS_INIT, for code that builds options at run time. */
GPUBRIDGE_API void gpubridge_options_init(gpubridge_options_t *o);

typedef struct gpubridge_runtime gpubridge_runtime_t;

/* Creates a runtime: reads the config (and loads the grain libraries it
 * names), decides the mode. Nothing runs until gpubridge_runtime_start.
 * opts NULL: all defaults. On error *out is NULL. */
GPUBRIDGE_API gpubridge_err gpubridge_runtime_new(const gpubridge_options_t *opts, gpubridge_runtime_t **out);
/* Stops every ring kernel (replies not yet polled are dropped), frees the
 * runtime and sets *rt to NULL. Takes NULL and a pointer to NULL. */
GPUBRIDGE_API void gpubridge_runtime_destroy(gpubridge_runtime_t **rt);

/* Before gpubridge_runtime_start (GPUBRIDGE_ERR_STATE after it).
 * register_grain: a descriptor defined with GB_DEFINE_GRAIN (pass
 * &gb_grain_<ident>): registered in the process (once; registering the same
 * descriptor again, from this or another runtime, is fine) and served by
 * this runtime. A different descriptor of a name already registered is
 * GPUBRIDGE_ERR_GRAIN. In a GPU mode the descriptor needs GPU code (its
 * file compiled by nvcc). */
GPUBRIDGE_API gpubridge_err gpubridge_register_grain(gpubridge_runtime_t *rt, const gb_grain_desc_t *desc);
/* A grain library (gpubridge_add_grain_library), loaded once per process:
 * its types are registered and served. */
GPUBRIDGE_API gpubridge_err gpubridge_register_library(gpubridge_runtime_t *rt, const char *path);
/* Serves a type registered already (a built-in such as "echo", or one a
 * library brought); for GPUBRIDGE_NO_CONFIG_GRAINS runtimes. */
GPUBRIDGE_API gpubridge_err gpubridge_serve(gpubridge_runtime_t *rt, const char *type);
/* Starts one ring kernel per served type (settings: the config's `grains`
 * entry of the type, or the generic ones). On error nothing runs and the
 * runtime may be destroyed, or started again. */
GPUBRIDGE_API gpubridge_err gpubridge_runtime_start(gpubridge_runtime_t *rt);

/* The mode and device the runtime runs in (decided by gpubridge_runtime_new:
 * never AUTO; device -1 in cpu mode). */
GPUBRIDGE_API gpubridge_mode gpubridge_runtime_mode(const gpubridge_runtime_t *rt);
GPUBRIDGE_API int gpubridge_runtime_device(const gpubridge_runtime_t *rt);

/* gpubridge_send flags */
#define GPUBRIDGE_ONE_WAY 1u /* no reply is kept: the handler's is dropped */
/* Correlation ids of gpubridge_send run 0..GPUBRIDGE_CORR_MAX (the runtime
 * keeps the two top bits for its own calls). */
#define GPUBRIDGE_CORR_MAX ((UINT64_C(1) << 62) - 1)
/* The message type that frees grain `key`'s state (its activation): reply
 * status GB_SLOT_NOT_ACTIVE when it had none. */
#define GPUBRIDGE_MSG_DEACTIVATE_KEY 0xFF00u

/* After start. Sends one request to grain (type, key): msg_type is one of the
 * type's message types (1..0xFEFF, or GPUBRIDGE_MSG_DEACTIVATE_KEY), payload
 * its record (len bytes, copied; NULL when len is 0). Without
 * GPUBRIDGE_ONE_WAY its reply comes back from gpubridge_poll with corr.
 * GPUBRIDGE_ERR_FULL: the ring is full (poll replies, retry); a deactivated
 * type still takes requests: they wait, in order, for gpubridge_activate. */
GPUBRIDGE_API gpubridge_err gpubridge_send(gpubridge_runtime_t *rt, const char *type, uint64_t key, uint32_t msg_type,
                                           const void *payload, size_t len, uint64_t corr, unsigned flags);

typedef struct gpubridge_reply {
    const char *type; /* the grain type (the runtime's string) */
    uint64_t key;
    uint64_t corr;     /* the request's (gpubridge_send), or 0 (gpubridge_call) */
    uint32_t msg_type; /* the handler's reply type (the request's message type) */
    uint32_t status;   /* gb_slot_status: GB_SLOT_OK, or the handler's or the runtime's refusal */
    uint32_t aux;      /* the handler's detail value (an error code with a refusal) */
    uint32_t len;      /* payload bytes: copied into the caller's buffer when they fit */
} gpubridge_reply_t;

/* Takes the next reply of a request sent with gpubridge_send, waiting up to
 * timeout_ms for one (0: do not wait; -1: wait for ever); its payload goes
 * into buf (cap bytes). GPUBRIDGE_ERR_EMPTY: none came in time (at once
 * when no request is in flight).
 * GPUBRIDGE_ERR_TOO_LARGE: reply->len is larger than cap; the reply stays
 * first in line for a call with a larger buffer. */
GPUBRIDGE_API gpubridge_err gpubridge_poll(gpubridge_runtime_t *rt, gpubridge_reply_t *reply, void *buf, size_t cap,
                                           int timeout_ms);

/* Sends a request and waits up to timeout_ms (-1: for ever) for its reply,
 * which goes into *reply and buf (cap bytes). GPUBRIDGE_OK when the reply
 * came (reply->status says whether the grain refused it);
 * GPUBRIDGE_ERR_TIMEOUT when it did not (it is dropped when it comes later);
 * GPUBRIDGE_ERR_TOO_LARGE when it came larger than cap (truncated to cap,
 * reply->len the full size). Replies of other requests that come meanwhile
 * wait for gpubridge_poll. */
GPUBRIDGE_API gpubridge_err gpubridge_call(gpubridge_runtime_t *rt, const char *type, uint64_t key, uint32_t msg_type,
                                           const void *payload, size_t len, gpubridge_reply_t *reply, void *buf,
                                           size_t cap, int timeout_ms);

/* The grain's text for a refused reply (its error_text hook), or a generic
 * one for the status; written into buf, which is returned. */
GPUBRIDGE_API const char *gpubridge_reply_text(gpubridge_runtime_t *rt, const gpubridge_reply_t *reply, char *buf,
                                               size_t cap);

/* Deactivate: the type's ring kernel stops taking requests (they stay queued,
 * none lost) and the call returns once it has acknowledged; activate resumes.
 * Both wait up to 5 s (GPUBRIDGE_ERR_TIMEOUT). */
GPUBRIDGE_API gpubridge_err gpubridge_activate(gpubridge_runtime_t *rt, const char *type);
GPUBRIDGE_API gpubridge_err gpubridge_deactivate(gpubridge_runtime_t *rt, const char *type);

typedef enum gpubridge_type_state {
    GPUBRIDGE_TYPE_RUNNING = 0, /* active or deactivated: see telemetry.active */
    GPUBRIDGE_TYPE_TERMINATED,  /* stopped */
    GPUBRIDGE_TYPE_FAILED,      /* stopped by an error (telemetry.last_error) */
    GPUBRIDGE_TYPE_UNAVAILABLE, /* served but without a ring kernel (no handler, or a team type without arena) */
} gpubridge_type_state;

/* One grain type's counters and settings: a snapshot, never a CUDA call. */
typedef struct gpubridge_telemetry {
    gpubridge_mode mode;
    gpubridge_placement placement;
    gpubridge_type_state state;
    int device;            /* -1 in cpu mode */
    int active;            /* 1: taking requests; 0: deactivated */
    uint64_t processed;    /* requests the handler ran (replies written) */
    uint64_t errors;       /* of those, replies with a status other than GB_SLOT_OK */
    uint64_t sent;         /* requests sent */
    uint64_t in_flight;    /* sent, reply not yet taken from the ring */
    uint64_t queued;       /* replies taken from the ring, waiting for gpubridge_poll (all types) */
    uint64_t launches;     /* kernel launches (1 in persistent mode) */
    uint64_t activations;  /* grains (keys) with state in the table */
    uint64_t evicted;      /* collected grains whose state waits in host memory */
    uint64_t refused;      /* requests refused for want of room in the table */
    uint32_t capacity;     /* ring slots */
    uint32_t slot_size;    /* bytes per slot; larger payloads go out of line */
    uint32_t max_payload;  /* the largest request or reply payload */
    uint32_t lanes;        /* parallel lanes keys are spread over */
    int last_error;        /* CUDA error code, 0 if none */
    char last_error_name[64];
    char fallback_reason[128]; /* why a persistent type fell back, else "" */
} gpubridge_telemetry_t;

GPUBRIDGE_API gpubridge_err gpubridge_telemetry(gpubridge_runtime_t *rt, const char *type,
                                                gpubridge_telemetry_t *out);

/* The served types: count, and the i-th name (NULL past the end). */
GPUBRIDGE_API size_t gpubridge_type_count(const gpubridge_runtime_t *rt);
GPUBRIDGE_API const char *gpubridge_type_name(const gpubridge_runtime_t *rt, size_t i);

#ifdef __cplusplus
}
#endif
#endif
