/* Control messages: activate, deactivate, terminate a grain type; its status
 * and telemetry; the list of grain types; the mode decision. Each is answered
 * at once with one Reply whose payload names its type in message_type. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authority.h"
#include "codec.h"
#include "grain_registry.h"
#include "log.h"
#include "server_internal.h"

static int placement_of(gb_placement p)
{
    switch (p) {
    case GB_PLACEMENT_MAPPED: return GPUBRIDGE__PLACEMENT__PLACEMENT_MAPPED;
    case GB_PLACEMENT_DEVICE_PINNED:
    case GB_PLACEMENT_DEVICE_MALLOC: return GPUBRIDGE__PLACEMENT__PLACEMENT_DEVICE_STAGING;
    case GB_PLACEMENT_HOST: return GPUBRIDGE__PLACEMENT__PLACEMENT_HOST;
    }
    return GPUBRIDGE__PLACEMENT__PLACEMENT_UNSPECIFIED;
}

static int state_of(const gb_rk_status_t *st)
{
    switch (st->state) {
    case GB_RK_RUNNING:
        return st->active ? GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_ACTIVE : GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_INACTIVE;
    case GB_RK_TERMINATED: return GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_TERMINATED;
    case GB_RK_FAILED: return GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_FAILED;
    default: return GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_UNSPECIFIED;
    }
}

typedef struct ctl_ctx {
    gb_server_t *s;
    const uint8_t *id;
    uint8_t id_len, delim;
    uint64_t corr;
} ctl_ctx_t;

__attribute__((format(printf, 3, 4)))
static void fail(const ctl_ctx_t *c, int status, const char *fmt, ...)
{
    char err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, sizeof err, fmt, ap);
    va_end(ap);
    gbi_reply(c->s, c->id, c->id_len, c->delim, c->corr, status, err, 0, NULL, 0);
}

/* Packs msg (a protobuf-c message) into a buffer and replies with it. A
 * reply too large for the stack (Limits of types with many message types)
 * is packed on the heap. */
static void reply_msg(const ctl_ctx_t *c, const ProtobufCMessage *msg, uint32_t mt)
{
    uint8_t stack[8192];
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = len > sizeof stack ? malloc(len) : stack;
    if (!buf) {
        fail(c, GPUBRIDGE__STATUS__STATUS_INTERNAL, "the bridge is out of memory for this %zu-byte reply", len);
        return;
    }
    protobuf_c_message_pack(msg, buf);
    gbi_reply(c->s, c->id, c->id_len, c->delim, c->corr, GPUBRIDGE__STATUS__STATUS_OK, NULL, mt, buf, len);
    if (buf != stack)
        free(buf);
}

static void fill_status(const ctl_ctx_t *c, const gb_engine_type_t *t, Gpubridge__GrainTypeStatus *m,
                        gb_rk_status_t *st)
{
    gb_rk_status(t->rk, st);
    m->grain_type = (char *)t->name;
    m->mode = (char *)gb_mode_name(st->mode);
    m->state = (Gpubridge__GrainState)state_of(st);
    m->paused = st->state == GB_RK_RUNNING && !gb_rk_is_active(t->rk);
    m->placement = (Gpubridge__Placement)placement_of(st->placement);
    m->exit_reason = (Gpubridge__ExitReason)st->exit_reason;
    m->last_error_code = st->last_error;
    m->last_error_name = st->last_error_name;
    m->heartbeat = st->heartbeat;
    /* The health check of the ring's owner (another I/O thread's copy of the
     * ring, with several) saw the heartbeat change at hb_seen_ns: unchanged
     * since, it is stale for that long. */
    const size_t i = (size_t)(t - c->s->engine->types); /* rings[i] serves types[i] */
    const gb_server_t *own = c->s->front ? c->s->front->shards[i % (size_t)c->s->front->n_io] : c->s;
    const uint64_t seen = __atomic_load_n(&own->rings[i].hb_seen, __ATOMIC_RELAXED);
    const uint64_t seen_ns = __atomic_load_n(&own->rings[i].hb_seen_ns, __ATOMIC_RELAXED);
    const uint64_t now = gb_now_ns();
    if (st->heartbeat == seen && seen_ns && now > seen_ns)
        m->heartbeat_age_ns = now - seen_ns;
    m->device = st->mode == GB_MODE_CPU ? -1 : c->s->engine->devs[t->dev].device;
    m->device_number = t->dev;
    m->queue_capacity = st->capacity;
    m->slot_size = st->slot_size;
    m->lanes = st->lanes;
    m->max_message_size = c->s->cfg->max_message_size < gb_rk_large_max(t->rk) ? c->s->cfg->max_message_size
                                                                              : gb_rk_large_max(t->rk);
}

static void reply_status(const ctl_ctx_t *c, gb_engine_type_t *t)
{
    gb_engine_type_t *rs[GB_MAX_DEVICES] = {t};
    const size_t n = gb_engine_rings(c->s->engine, t, rs); /* each taken in turn: another I/O thread may own it */
    gb_rk_status_t st[GB_MAX_DEVICES];
    Gpubridge__GrainTypeStatus m, per[GB_MAX_DEVICES] = {GPUBRIDGE__GRAIN_TYPE_STATUS__INIT}, *perp[GB_MAX_DEVICES];
    for (size_t d = 0; d < n; d++) {
        gbi_ring_take(c->s, &c->s->rings[rs[d] - c->s->engine->types]);
        per[d] = (Gpubridge__GrainTypeStatus)GPUBRIDGE__GRAIN_TYPE_STATUS__INIT;
        fill_status(c, rs[d], &per[d], &st[d]);
        perp[d] = &per[d];
    }
    m = per[0]; /* the first device's, with the list when there are several */
    m.n_devices = n > 1 ? n : 0;
    m.devices = perp;
    reply_msg(c, &m.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS);
}

static void fill_telemetry(const ctl_ctx_t *c, const gb_engine_type_t *t, Gpubridge__Telemetry *m)
{
    gb_rk_status_t st;
    gb_rk_status(t->rk, &st);
    m->grain_type = (char *)t->name;
    m->messages_processed = st.processed;
    m->errors = st.errors;
    m->launches = st.launches;
    m->iterations = st.iterations;
    /* A stopped ring's requests were answered by the host (STATUS_TERMINATED
     * or the failure's status): none is left for a kernel to handle.
     * Replies the kernel wrote before it stopped still count in
     * queue_depth_out. */
    const int stopped = st.state == GB_RK_TERMINATED || st.state == GB_RK_FAILED;
    m->queue_depth_in = (uint32_t)(!stopped && st.sent > st.processed ? st.sent - st.processed : 0);
    m->queue_depth_out = (uint32_t)(st.processed > st.received ? st.processed - st.received : 0);
    m->queue_capacity = st.capacity;
    m->timestamp_ns = gb_now_ns();
    m->device = st.mode == GB_MODE_CPU ? -1 : c->s->engine->devs[t->dev].device;
    m->device_number = t->dev;
    gbi_totals_t tot;
    gbi_totals(c->s, (size_t)(t - c->s->engine->types), &tot); /* rings[i] serves types[i] */
    m->frames_too_large = tot.frames_too_large;
    m->requests_busy = tot.requests_busy;
    m->frames_refused_unread = tot.frames_refused_unread;
    m->held_bytes = tot.held_bytes;
    m->reply_backlog_bytes = tot.out_mem;
    m->connections_dropped = tot.conns_dropped;
    m->replies_undelivered = tot.replies_undelivered;
    m->mail_sent = tot.mail_sent;
    m->mail_forwarded = tot.mail_forwarded;
    m->mail_linked = tot.mail_linked;
    m->mail_held = tot.mail_held;
    m->mail_undeliverable = tot.mail_undeliverable;
    m->mail_outbox_bytes = tot.mail_bytes;
}

static void reply_telemetry(const ctl_ctx_t *c, gb_engine_type_t *t)
{
    gb_engine_type_t *rs[GB_MAX_DEVICES] = {t};
    const size_t n = gb_engine_rings(c->s->engine, t, rs); /* each taken in turn: another I/O thread may own it */
    Gpubridge__Telemetry m, per[GB_MAX_DEVICES] = {GPUBRIDGE__TELEMETRY__INIT}, *perp[GB_MAX_DEVICES];
    for (size_t d = 0; d < n; d++) {
        gbi_ring_take(c->s, &c->s->rings[rs[d] - c->s->engine->types]);
        per[d] = (Gpubridge__Telemetry)GPUBRIDGE__TELEMETRY__INIT;
        fill_telemetry(c, rs[d], &per[d]);
        perp[d] = &per[d];
    }
    m = per[0];
    for (size_t d = 1; d < n; d++) { /* the type's counters, summed over its devices */
        m.messages_processed += per[d].messages_processed;
        m.errors += per[d].errors;
        m.launches += per[d].launches;
        m.iterations += per[d].iterations;
        m.queue_depth_in += per[d].queue_depth_in;
        m.queue_depth_out += per[d].queue_depth_out;
        m.mail_sent += per[d].mail_sent;
        m.mail_forwarded += per[d].mail_forwarded;
        m.mail_linked += per[d].mail_linked;
        m.mail_held += per[d].mail_held;
        m.mail_undeliverable += per[d].mail_undeliverable;
    }
    m.n_devices = n > 1 ? n : 0;
    m.devices = perp;
    reply_msg(c, &m.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_TELEMETRY);
}

static void reply_detect(const ctl_ctx_t *c)
{
    const gb_facts_t *f = c->s->facts;
    const gb_selection_t *sel = c->s->sel;
    Gpubridge__DetectReport m = GPUBRIDGE__DETECT_REPORT__INIT;
    if (f) {
        m.cuda_device_count = f->cuda_device_count;
        m.device_name = (char *)f->device_name;
        m.wsl2 = f->wsl2;
        m.wsl1 = f->wsl1;
        m.kernel_exec_timeout = f->kernel_exec_timeout;
        m.mapped_pinned_ok = f->mapped_pinned_ok;
        m.concurrent_managed_access = f->concurrent_managed_access;
        m.cooperative_launch = f->cooperative_launch;
        m.host_native_atomics = f->host_native_atomic_supported;
        m.cuda_built = f->cuda_built;
        m.device = f->cuda_device_count > 0 ? f->device : -1; /* -1: none */
        m.compute_capability_major = f->cc_major;
        m.compute_capability_minor = f->cc_minor;
        m.dev_dxg = f->dev_dxg;
        m.os_release = (char *)f->osrelease;
    }
    if (sel) {
        m.rule_fired = (char *)gb_rule_name(sel->decision.rule);
        m.mode = (char *)gb_mode_name(sel->mode);
        m.mode_requested = (char *)gb_mode_name(sel->requested);
        m.mode_source = (char *)sel->source_text;
        m.fallback_reason = (char *)sel->warning;
    }
    reply_msg(c, &m.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_DETECT_REPORT);
}

/* One grain type's request types in the Limits reply: every one its codec
 * (or descriptor) declares, however many. */
#define LIMITS_STACK 8 /* the built-in types have fewer */
typedef struct msg_limits {
    gbi_msg_limit_t *lim; /* more than LIMITS_STACK: the heap copy */
    Gpubridge__MessageTypeLimits *ml, **mlp;
} msg_limits_t;

static void msg_limits_free(msg_limits_t *b)
{
    free(b->lim);
    free(b->ml);
    free(b->mlp);
}

/* Sets g's message types from grain type t's, into b (freed by the caller).
 * 0, or -1 when memory is short. */
static int msg_limits_fill(const gb_server_t *s, const gb_engine_type_t *t, Gpubridge__GrainTypeLimits *g,
                           msg_limits_t *b)
{
    const uint32_t large = gb_rk_large_max(t->rk), type_len = (uint32_t)strlen(t->name);
    gbi_msg_limit_t first[LIMITS_STACK];
    const gbi_msg_limit_t *lim = first;
    /* It returns how many there are, also past max (gb_grain_limit_put). */
    size_t n = gbi_codec_limits(t->kind, g->record_size, large, s->cfg->max_message_size, type_len, first,
                                LIMITS_STACK);
    if (n > LIMITS_STACK) {
        if (!(b->lim = calloc(n, sizeof *b->lim)))
            return -1;
        const size_t again =
            gbi_codec_limits(t->kind, g->record_size, large, s->cfg->max_message_size, type_len, b->lim, n);
        n = again < n ? again : n;
        lim = b->lim;
    }
    if (n == 0)
        return 0;
    b->ml = calloc(n, sizeof *b->ml);
    b->mlp = calloc(n, sizeof *b->mlp);
    if (!b->ml || !b->mlp)
        return -1;
    for (size_t j = 0; j < n; j++) {
        Gpubridge__MessageTypeLimits *x = &b->ml[j];
        *x = (Gpubridge__MessageTypeLimits)GPUBRIDGE__MESSAGE_TYPE_LIMITS__INIT;
        x->message_type = lim[j].message_type;
        x->name = (char *)lim[j].name;
        x->max_payload = lim[j].max_payload;
        x->max_elements = lim[j].max_elements;
        b->mlp[j] = x;
    }
    g->n_message_types = n;
    g->message_types = b->mlp;
    return 0;
}

/* The size limits a client needs before it sends: the frame bound, the hold
 * bound, and per grain type what each request type accepts (codec_limits.c). */
static void reply_limits(const ctl_ctx_t *c)
{
    const gb_server_t *s = c->s;
    Gpubridge__Limits m = GPUBRIDGE__LIMITS__INIT;
    Gpubridge__GrainTypeLimits gl[GB_MAX_GRAIN_TYPES], *glp[GB_MAX_GRAIN_TYPES];
    msg_limits_t bufs[GB_MAX_GRAIN_TYPES];
    int short_of_memory = 0;
    memset(bufs, 0, sizeof bufs);
    m.max_message_size = s->cfg->max_message_size;
    m.hold_bound = (s->front ? s->front : s)->held_limit; /* the total: shards split it */
    m.max_replies_per_frame = GBI_BATCH_MAX;
    for (size_t i = 0; i < s->engine->n_names; i++) { /* per grain type: its first device's ring */
        const gb_engine_type_t *t = &s->engine->types[i];
        if (!t->rk)
            continue;
        Gpubridge__GrainTypeLimits *g = &gl[m.n_grain_types];
        *g = (Gpubridge__GrainTypeLimits)GPUBRIDGE__GRAIN_TYPE_LIMITS__INIT;
        g->grain_type = (char *)t->name;
        g->record_size = gb_rk_payload_cap(t->rk);
        g->slot_size = g->record_size + GB_SLOT_HDR_SIZE;
        g->queue_capacity = gb_rk_capacity(t->rk);
        for (size_t k = 0; k < s->cfg->n_grains; k++)
            if (strcmp(s->cfg->grains[k].type, t->name) == 0)
                g->max_grains = s->cfg->grains[k].max_grains;
        if (msg_limits_fill(s, t, g, &bufs[m.n_grain_types]) != 0)
            short_of_memory = 1;
        glp[m.n_grain_types++] = g;
    }
    m.grain_types = glp;
    if (short_of_memory)
        fail(c, GPUBRIDGE__STATUS__STATUS_INTERNAL, "the bridge is out of memory for the limits reply%s", "");
    else
        reply_msg(c, &m.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_LIMITS);
    for (size_t i = 0; i < m.n_grain_types; i++)
        msg_limits_free(&bufs[i]);
}

/* The grain type an operation names, or NULL after an error reply. */
static gb_engine_type_t *target(const ctl_ctx_t *c, const char *name)
{
    if (!name || !name[0]) {
        fail(c, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "control operation without a grain_type%s", "");
        return NULL;
    }
    gb_engine_type_t *t = gb_engine_find(c->s->engine, name);
    char shown[100];
    gbi_name_print(shown, sizeof shown, (const uint8_t *)name, strlen(name));
    if (!t)
        fail(c, GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "unknown grain type '%s'", shown);
    else if (!t->rk)
        fail(c, GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "grain type '%s' %s", shown, gbi_unserved_why(t));
    if (!t || !t->rk)
        return NULL;
    gbi_ring_take(c->s, &c->s->rings[t - c->s->engine->types]); /* until the frame's publish */
    return t;
}

/* Activates, deactivates or terminates grain type t on every device; the
 * first error, after every device was tried. */
static gb_err change_state(gb_server_t *s, const gb_engine_type_t *t, Gpubridge__Control__OpCase op)
{
    gb_engine_type_t *rs[GB_MAX_DEVICES];
    gb_err first = GB_OK;
    const gb_ring_change change = op == GPUBRIDGE__CONTROL__OP_ACTIVATE     ? GB_RING_ACTIVATE
                                  : op == GPUBRIDGE__CONTROL__OP_DEACTIVATE ? GB_RING_DEACTIVATE
                                                                            : GB_RING_TERMINATE;
    for (size_t d = 0, n = gb_engine_rings(s->engine, t, rs); d < n; d++) {
        gbi_ring_take(s, &s->rings[rs[d] - s->engine->types]);
        const gb_err err = gb_engine_ring_change(s->engine, rs[d], change, 5000);
        if (first == GB_OK)
            first = err;
    }
    return first;
}

/* Why a configured grain type has no ring kernel, for its refusals. */
const char *gbi_unserved_why(const gb_engine_type_t *t)
{
    const int kind = gb_grain_kind_of(t->name);
    return kind && gb_grain_is_team(kind) ? "has no memory: arena_mb is 0" : "has no handler in this build";
}

void gbi_control(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim, uint64_t corr,
                 const Gpubridge__Control *op)
{
    const ctl_ctx_t c = {s, id, id_len, delim, corr};
    gb_engine_type_t *t;
    gb_err err;
    switch (op->op_case) {
    case GPUBRIDGE__CONTROL__OP_ACTIVATE:
    case GPUBRIDGE__CONTROL__OP_DEACTIVATE:
    case GPUBRIDGE__CONTROL__OP_TERMINATE: {
        const char *name = op->op_case == GPUBRIDGE__CONTROL__OP_ACTIVATE     ? op->activate->grain_type
                           : op->op_case == GPUBRIDGE__CONTROL__OP_DEACTIVATE ? op->deactivate->grain_type
                                                                              : op->terminate->grain_type;
        if (!s->peer_admin) {
            fail(&c, GPUBRIDGE__STATUS__STATUS_UNAUTHORIZED, "%s", GB_AUTHORITY_REFUSED);
            return;
        }
        if (!(t = target(&c, name)))
            return;
        err = change_state(s, t, op->op_case);
        if (err == GB_ERR_TERMINATED) {
            fail(&c, GPUBRIDGE__STATUS__STATUS_TERMINATED, "grain type '%s' is terminated", t->name);
            return;
        }
        if (err != GB_OK) {
            fail(&c, err == GB_ERR_TIMEOUT ? GPUBRIDGE__STATUS__STATUS_TIMEOUT : GPUBRIDGE__STATUS__STATUS_GPU_ERROR,
                 "%s", gb_strerror(err));
            return;
        }
        GB_INFO("grain type '%s': %s", t->name,
                op->op_case == GPUBRIDGE__CONTROL__OP_ACTIVATE     ? "activated"
                : op->op_case == GPUBRIDGE__CONTROL__OP_DEACTIVATE ? "deactivated (requests stay queued)"
                                                                   : "terminated");
        reply_status(&c, t);
        return;
    }
    case GPUBRIDGE__CONTROL__OP_STATUS_REQUEST:
        if ((t = target(&c, op->status_request->grain_type)))
            reply_status(&c, t);
        return;
    case GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST:
        if ((t = target(&c, op->telemetry_request->grain_type)))
            reply_telemetry(&c, t);
        return;
    case GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES: {
        char *names[GB_MAX_GRAIN_TYPES];
        Gpubridge__GrainTypeList m = GPUBRIDGE__GRAIN_TYPE_LIST__INIT;
        for (size_t i = 0; i < s->engine->n_names; i++)
            if (s->engine->types[i].rk)
                names[m.n_grain_types++] = s->engine->types[i].name;
        m.grain_types = names;
        reply_msg(&c, &m.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST);
        return;
    }
    case GPUBRIDGE__CONTROL__OP_DETECT_REQUEST:
        reply_detect(&c);
        return;
    case GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST:
        reply_limits(&c);
        return;
    default:
        fail(&c, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "control message without an operation%s", "");
        return;
    }
}
