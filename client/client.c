/* client.c: the client object (create, destroy, options), placement, error
 * texts and time. Sending and receiving live in transport.c and request.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "client_internal.h"

_Static_assert((int)GBC_STATUS_UNDELIVERABLE == (int)GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE,
               "gbc_status must keep gpubridge.Status numbers");
_Static_assert((int)GBC_STATUS_NO_ACTIVATION == (int)GPUBRIDGE__STATUS__STATUS_NO_ACTIVATION,
               "gbc_status must keep gpubridge.Status numbers");
_Static_assert((int)GBC_STATUS_HANDLER_ERROR == (int)GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR,
               "gbc_status must keep gpubridge.Status numbers");

_Static_assert(sizeof(gbc_options_t) >= GBCI_OPTIONS_V02_SIZE &&
                   sizeof(gbc_grain_status_t) >= GBCI_GRAIN_STATUS_V02_SIZE &&
                   sizeof(gbc_telemetry_t) >= GBCI_TELEMETRY_V02_SIZE &&
                   sizeof(gbc_detect_report_t) >= GBCI_DETECT_REPORT_V02_SIZE,
               "structs only grow (x86-64 sizes)");

/* ---- errors ---- */

/* Per thread: a client belongs to one thread, and gbc_client_new has no
 * client to hold its failure. */
static _Thread_local char last_error[512];
static _Thread_local int last_status;

const char *gbc_strerror(gbc_err err)
{
    switch (err) {
    case GBC_OK: return "ok";
    case GBC_ERR_NOMEM: return "out of memory";
    case GBC_ERR_INVALID: return "invalid argument";
    case GBC_ERR_TIMEOUT: return "timed out waiting for a reply";
    case GBC_ERR_CONNECT: return "not connected to the bridge";
    case GBC_ERR_AUTH: return "CURVE handshake failed";
    case GBC_ERR_STATUS: return "the bridge answered with an error status";
    case GBC_ERR_PROTO: return "malformed or unexpected reply";
    case GBC_ERR_TOO_LARGE: return "message too large";
    case GBC_ERR_EMPTY: return "nothing in flight";
    case GBC_ERR_UNSUPPORTED: return "not supported by this libzmq";
    case GBC_ERR_IO: return "ZeroMQ error";
    case GBC_ERR__COUNT: break;
    }
    return "unknown error";
}

const char *gbc_status_name(int status)
{
    static const char *const names[] = {
        "STATUS_OK", "STATUS_MALFORMED", "STATUS_UNKNOWN_GRAIN_TYPE",
        "STATUS_UNKNOWN_MESSAGE_TYPE", "STATUS_TOO_LARGE", "STATUS_MISSING_FIELD",
        "STATUS_TERMINATED", "STATUS_INACTIVE", "STATUS_BUSY", "STATUS_GPU_ERROR",
        "STATUS_INTERNAL", "STATUS_UNAUTHORIZED", "STATUS_TIMEOUT",
        "STATUS_SHUTTING_DOWN", "STATUS_HANDLER_ERROR", "STATUS_NO_ACTIVATION", "STATUS_UNDELIVERABLE",
    };
    if (status >= 0 && (size_t)status < sizeof names / sizeof names[0])
        return names[status];
    return "STATUS_?";
}

const char *gbc_last_error(void) { return last_error; }
int gbc_last_status(void) { return last_status; }

void gbci_clear_error(void)
{
    last_error[0] = '\0';
    last_status = GBC_STATUS_OK;
}

gbc_err gbci_fail(gbc_err err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return err;
}

gbc_err gbci_fail_status(const gbc_client_t *c, const gbc_reply_t *r)
{
    const char *ep = c && r->endpoint < c->n ? c->eps[r->endpoint].addr : "bridge";
    last_status = r->status;
    if (r->status >= 0 && r->status <= GBC_STATUS_UNDELIVERABLE)
        snprintf(last_error, sizeof last_error, "%s: %s%s%s", ep, gbc_status_name(r->status),
                 r->error ? ": " : "", r->error ? r->error : "");
    else
        snprintf(last_error, sizeof last_error, "%s: status %d%s%s", ep, r->status,
                 r->error ? ": " : "", r->error ? r->error : "");
    gbci_text_clean(last_error); /* the text is the peer's */
    return GBC_ERR_STATUS;
}

char *gbci_text_clean(char *s)
{
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return s;
}

/* ---- time ---- */

int64_t gbci_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t gbci_deadline(const gbc_client_t *c, int timeout_ms)
{
    if (timeout_ms == GBC_TIMEOUT_NOWAIT)
        return gbci_now_ns();
    if (timeout_ms <= 0 && timeout_ms != GBC_TIMEOUT_FOREVER)
        timeout_ms = c->timeout_ms; /* never NOWAIT; FOREVER or > 0 */
    if (timeout_ms == GBC_TIMEOUT_FOREVER)
        return INT64_MAX;
    return gbci_now_ns() + (int64_t)timeout_ms * 1000000;
}

int gbci_timeout_ms(const gbc_client_t *c, int timeout_ms)
{
    if (timeout_ms == GBC_TIMEOUT_NOWAIT)
        return 0;
    return timeout_ms > 0 || timeout_ms == GBC_TIMEOUT_FOREVER ? timeout_ms : c->timeout_ms;
}

/* ---- version ---- */

int gbc_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = GBC_LIB_VERSION_MAJOR;
    if (minor)
        *minor = GBC_LIB_VERSION_MINOR;
    if (patch)
        *patch = GBC_LIB_VERSION_PATCH;
    return GBC_MAKE_VERSION(GBC_LIB_VERSION_MAJOR, GBC_LIB_VERSION_MINOR, GBC_LIB_VERSION_PATCH);
}

/* ---- structs that grow (struct_size first) ---- */

size_t gbci_struct_size(size_t given, size_t v02, size_t ours)
{
    if (given == 0)
        given = v02;
    return given < ours ? given : ours;
}

/* ---- options, create, destroy ---- */

void gbc_options_init(gbc_options_t *opt)
{
    if (!opt)
        return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->timeout_ms = GBCI_DEFAULT_TIMEOUT_MS;
    opt->max_batch = GBCI_DEFAULT_MAX_BATCH;
    opt->max_frame_bytes = GBCI_DEFAULT_MAX_FRAME;
}

static bool set(const char *s) { return s && s[0]; }

static gbc_err check_key(const char *what, const char *key)
{
    if (strlen(key) != 40)
        return gbci_fail(GBC_ERR_INVALID, "%s must be a 40-character Z85 key", what);
    uint8_t bin[32];
    if (!zmq_z85_decode(bin, key))
        return gbci_fail(GBC_ERR_INVALID, "%s is not valid Z85", what);
    return GBC_OK;
}

/* CURVE settings: all absent, or a server key with both client keys or none
 * (then an ephemeral pair). Fills pub/sec with the client pair to use. */
static gbc_err curve_keys(const gbc_options_t *o, char pub[GBCI_KEY_LEN],
                          char sec[GBCI_KEY_LEN])
{
    bool srv = set(o->curve_server_key), p = set(o->curve_public_key),
         s = set(o->curve_secret_key);
    if (!srv && (p || s))
        return gbci_fail(GBC_ERR_INVALID, "CURVE client keys given without curve_server_key");
    if (!srv)
        return GBC_OK;
    if (!zmq_has("curve"))
        return gbci_fail(GBC_ERR_UNSUPPORTED, "this libzmq was built without CURVE");
    if (p != s)
        return gbci_fail(GBC_ERR_INVALID,
                         "give both curve_public_key and curve_secret_key, or neither");
    gbc_err err = check_key("curve_server_key", o->curve_server_key);
    if (err)
        return err;
    if (!p)
        return zmq_curve_keypair(pub, sec) == 0
                   ? GBC_OK
                   : gbci_fail(GBC_ERR_IO, "zmq_curve_keypair: %s", zmq_strerror(zmq_errno()));
    if ((err = check_key("curve_public_key", o->curve_public_key)) ||
        (err = check_key("curve_secret_key", o->curve_secret_key)))
        return err;
    memcpy(pub, o->curve_public_key, GBCI_KEY_LEN);
    memcpy(sec, o->curve_secret_key, GBCI_KEY_LEN);
    return GBC_OK;
}

gbc_err gbc_client_new(const char *const *endpoints, size_t n, const gbc_options_t *opt,
                       gbc_client_t **out)
{
    gbci_clear_error();
    if (!out)
        return gbci_fail(GBC_ERR_INVALID, "gbc_client_new: out is NULL");
    *out = NULL;
    if (!endpoints || n == 0)
        return gbci_fail(GBC_ERR_INVALID, "gbc_client_new: no endpoints");
    for (size_t i = 0; i < n; i++)
        if (!set(endpoints[i]))
            return gbci_fail(GBC_ERR_INVALID, "gbc_client_new: endpoint %zu is empty", i);
    gbc_options_t o;
    memset(&o, 0, sizeof o);
    if (opt) {
        /* Only the bytes the caller's struct has; newer fields keep their defaults. */
        size_t have = gbci_struct_size(opt->struct_size, GBCI_OPTIONS_V02_SIZE, sizeof o);
        if (have < offsetof(gbc_options_t, timeout_ms) + sizeof o.timeout_ms)
            return gbci_fail(GBC_ERR_INVALID, "options struct_size %zu is too small", opt->struct_size);
        memcpy(&o, opt, have);
    }
    if (o.timeout_ms == GBC_TIMEOUT_NOWAIT)
        return gbci_fail(GBC_ERR_INVALID, "timeout_ms: the client's default deadline cannot be GBC_TIMEOUT_NOWAIT");
    if (o.timeout_ms < 0 && o.timeout_ms != GBC_TIMEOUT_FOREVER && o.timeout_ms != GBC_TIMEOUT_DEFAULT)
        return gbci_fail(GBC_ERR_INVALID, "timeout_ms must be > 0, 0 (the default) or GBC_TIMEOUT_FOREVER");
    char pub[GBCI_KEY_LEN] = "", sec[GBCI_KEY_LEN] = "";
    gbc_err err = curve_keys(&o, pub, sec);
    if (err)
        return err;

    gbc_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return gbci_fail(GBC_ERR_NOMEM, "out of memory");
    c->timeout_ms = o.timeout_ms > 0 || o.timeout_ms == GBC_TIMEOUT_FOREVER ? o.timeout_ms : GBCI_DEFAULT_TIMEOUT_MS;
    c->max_batch = o.max_batch ? o.max_batch : GBCI_DEFAULT_MAX_BATCH;
    c->max_frame = o.max_frame_bytes ? o.max_frame_bytes : GBCI_DEFAULT_MAX_FRAME;
    c->curve = set(o.curve_server_key);
    c->next_corr = 1;
    c->echo_seq = 1;
    c->n = n;
    c->eps = calloc(n, sizeof *c->eps);
    c->items = calloc(2 * n, sizeof *c->items);
    c->ctx = zmq_ctx_new();
    if (!c->eps || !c->items || !c->ctx) {
        err = c->ctx ? gbci_fail(GBC_ERR_NOMEM, "out of memory")
                     : gbci_fail(GBC_ERR_IO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        err = gbci_endpoint_open(c, i, endpoints[i], c->curve ? o.curve_server_key : NULL,
                                 pub, sec);
        if (err)
            goto fail;
    }
    memset(sec, 0, sizeof sec);
    *out = c;
    return GBC_OK;
fail:
    memset(sec, 0, sizeof sec);
    gbc_client_destroy(&c);
    return err;
}

void gbc_client_destroy(gbc_client_t **p)
{
    if (!p || !*p)
        return;
    gbc_client_t *c = *p;
    for (size_t i = 0; c->eps && i < c->n; i++)
        gbci_endpoint_close(&c->eps[i]);
    /* A signal in the caller interrupts the term (EINTR): restarted, or
     * ZeroMQ's threads would be left behind. */
    while (c->ctx && zmq_ctx_term(c->ctx) != 0 && zmq_errno() == EINTR)
        ;
    free(c->eps);
    free(c->items);
    gbci_idset_free(&c->ids);
    gbci_replyq_free(&c->ready);
    gbci_deadlines_free(&c->deadlines);
    free(c);
    *p = NULL;
}

size_t gbc_endpoint_count(const gbc_client_t *c) { return c ? c->n : 0; }

const char *gbc_endpoint(const gbc_client_t *c, size_t i)
{
    return c && i < c->n ? c->eps[i].addr : NULL;
}

size_t gbc_in_flight(const gbc_client_t *c) { return c ? c->async_in_flight : 0; }

/* ---- placement ---- */

size_t gbc_placement(const char *type, uint64_t key, size_t n)
{
    if (n <= 1)
        return 0;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *s = (const unsigned char *)(type ? type : ""); *s; s++)
        h = (h ^ *s) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++)
        h = (h ^ ((key >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    /* splitmix64's finaliser: FNV alone leaves the low bits of small keys
     * poorly mixed, and % n reads mostly those. */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return (size_t)(h % n);
}

/* The bridge's own function (gb_link_device_of_key), written again here: the
 * client library stands alone, and the hash is fixed by protocol.md. */
uint32_t gbc_device_of_key(uint64_t key, uint32_t n)
{
    if (n <= 1)
        return 0;
    uint64_t z = key + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z % n);
}

size_t gbc_endpoint_of(const gbc_client_t *c, const char *type, uint64_t key)
{
    return c ? gbc_placement(type, key, c->n) : 0;
}

/* ---- replies ---- */

void gbc_reply_clear(gbc_reply_t *r)
{
    if (!r)
        return;
    free(r->error);
    free(r->payload);
    memset(r, 0, sizeof *r);
}
