/* control.c: bridge control operations (proto/control.proto) and their
 * replies, copied into the plain C structs of gpubridge_client.h so that
 * users need no protobuf headers for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "control.pb-c.h"

/* A string of the peer's into a field of ours, truncated, with no byte that
 * acts on a terminal it is printed to (gbci_text_clean). */
#define COPY(dst, src) (snprintf((dst), sizeof(dst), "%s", (src) ? (src) : ""), gbci_text_clean(dst))

static gbc_err check_ep(const gbc_client_t *c, size_t i, bool all_ok)
{
    if (!c)
        return gbci_fail(GBC_ERR_INVALID, "client is NULL");
    if (i < c->n || (all_ok && i == GBC_ALL_ENDPOINTS))
        return GBC_OK;
    return gbci_fail(GBC_ERR_INVALID, "endpoint index %zu out of range (client has %zu)", i,
                     c->n);
}

static gbc_err check_type(const char *type)
{
    if (!type || !type[0])
        return gbci_fail(GBC_ERR_INVALID, "grain type is NULL or empty");
    return GBC_OK;
}

/* One control operation on endpoint i; *r holds the OK reply (message type
 * checked against want; an empty payload comes with type 0). */
static gbc_err ctl_call(gbc_client_t *c, size_t i, Gpubridge__Control *ctl, uint32_t want,
                        gbc_reply_t *r, int timeout_ms)
{
    Gpubridge__Envelope env = GPUBRIDGE__ENVELOPE__INIT;
    env.kind = GPUBRIDGE__KIND__KIND_CONTROL;
    env.control = ctl;
    gbc_err err = gbci_call_env(c, i, &env, r, timeout_ms);
    if (err)
        return err;
    if (r->message_type != want && !(r->message_type == 0 && r->payload_len == 0))
        return gbci_fail(GBC_ERR_PROTO, "%s: control reply has message type %u, expected %u",
                         c->eps[i].addr, r->message_type, want);
    return GBC_OK;
}

/* Writes a report into the caller's struct: as many bytes as its
 * struct_size says (0: the 0.2 size), never past ours; struct_size stays. */
static void copy_out(void *out, const void *full, size_t v02, size_t ours)
{
    size_t n = gbci_struct_size(*(const size_t *)out, v02, ours);
    if (n > sizeof(size_t))
        memcpy((char *)out + sizeof(size_t), (const char *)full + sizeof(size_t), n - sizeof(size_t));
}

/* Decodes a GrainTypeStatus payload into *out (if not NULL). */
static gbc_err decode_status(const gbc_client_t *c, const gbc_reply_t *r,
                             gbc_grain_status_t *out)
{
    Gpubridge__GrainTypeStatus *s =
        (Gpubridge__GrainTypeStatus *)gbci_pb_unpack(&gpubridge__grain_type_status__descriptor, r->payload_len, r->payload);
    if (!s)
        return gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as GrainTypeStatus",
                         c->eps[r->endpoint].addr);
    if (out) {
        gbc_grain_status_t full;
        memset(&full, 0, sizeof full);
        COPY(full.grain_type, s->grain_type);
        COPY(full.mode, s->mode);
        full.state = (int)s->state;
        full.placement = (int)s->placement;
        full.exit_reason = (int)s->exit_reason;
        full.last_error_code = s->last_error_code;
        COPY(full.last_error_name, s->last_error_name);
        full.heartbeat = s->heartbeat;
        full.heartbeat_age_ns = s->heartbeat_age_ns;
        full.device = s->device;
        full.queue_capacity = s->queue_capacity;
        full.slot_size = s->slot_size;
        full.lanes = s->lanes;
        full.max_message_size = s->max_message_size;
        full.device_number = s->device_number;
        for (size_t d = 0; d < s->n_devices && d < GBC_MAX_DEVICES; d++) {
            const Gpubridge__GrainTypeStatus *ds = s->devices[d];
            gbc_device_status_t *o = &full.devices[full.n_devices++];
            o->device = ds->device;
            o->device_number = ds->device_number;
            COPY(o->mode, ds->mode);
            o->state = (int)ds->state;
            o->exit_reason = (int)ds->exit_reason;
            o->last_error_code = ds->last_error_code;
            o->heartbeat = ds->heartbeat;
            o->heartbeat_age_ns = ds->heartbeat_age_ns;
        }
        copy_out(out, &full, GBCI_GRAIN_STATUS_V02_SIZE, sizeof full);
    }
    gpubridge__grain_type_status__free_unpacked(s, NULL);
    return GBC_OK;
}

/* The operations answered with a GrainTypeStatus. */
enum lifecycle { OP_ACTIVATE, OP_DEACTIVATE, OP_TERMINATE, OP_STATUS };

static gbc_err status_op_one(gbc_client_t *c, size_t i, enum lifecycle op, const char *type,
                             gbc_grain_status_t *out, int timeout_ms)
{
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    /* The four request messages have the same shape: one grain_type. */
    Gpubridge__Activate act = GPUBRIDGE__ACTIVATE__INIT;
    Gpubridge__Deactivate deact = GPUBRIDGE__DEACTIVATE__INIT;
    Gpubridge__Terminate term = GPUBRIDGE__TERMINATE__INIT;
    Gpubridge__StatusRequest st = GPUBRIDGE__STATUS_REQUEST__INIT;
    switch (op) {
    case OP_ACTIVATE:
        act.grain_type = (char *)type;
        ctl.op_case = GPUBRIDGE__CONTROL__OP_ACTIVATE;
        ctl.activate = &act;
        break;
    case OP_DEACTIVATE:
        deact.grain_type = (char *)type;
        ctl.op_case = GPUBRIDGE__CONTROL__OP_DEACTIVATE;
        ctl.deactivate = &deact;
        break;
    case OP_TERMINATE:
        term.grain_type = (char *)type;
        ctl.op_case = GPUBRIDGE__CONTROL__OP_TERMINATE;
        ctl.terminate = &term;
        break;
    case OP_STATUS:
        st.grain_type = (char *)type;
        ctl.op_case = GPUBRIDGE__CONTROL__OP_STATUS_REQUEST;
        ctl.status_request = &st;
        break;
    }
    gbc_reply_t r;
    gbc_err err = ctl_call(c, i, &ctl,
                           GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS,
                           &r, timeout_ms);
    if (!err)
        err = decode_status(c, &r, out);
    gbc_reply_clear(&r);
    return err;
}

static gbc_err status_op(gbc_client_t *c, size_t endpoint, enum lifecycle op, const char *type,
                         gbc_grain_status_t *out, int timeout_ms)
{
    gbci_clear_error();
    gbc_err err = check_ep(c, endpoint, op != OP_STATUS);
    if (err || (err = check_type(type)))
        return err;
    if (endpoint != GBC_ALL_ENDPOINTS)
        return status_op_one(c, endpoint, op, type, out, timeout_ms);
    /* Every endpoint, each with the full timeout; keep the first failure's text. */
    gbc_err first = GBC_OK;
    char why[512] = "";
    for (size_t i = 0; i < c->n; i++) {
        /* Strided by the caller's struct size (an older header's may be smaller). */
        size_t stride = out ? gbci_struct_size(out->struct_size, GBCI_GRAIN_STATUS_V02_SIZE, SIZE_MAX) : 0;
        gbc_grain_status_t *o = out ? (gbc_grain_status_t *)((char *)out + i * stride) : NULL;
        if (o && i > 0)
            o->struct_size = out->struct_size;
        err = status_op_one(c, i, op, type, o, timeout_ms);
        if (err && !first) {
            first = err;
            snprintf(why, sizeof why, "%s", gbc_last_error());
        }
    }
    if (first)
        return gbci_fail(first, "%s", why);
    return GBC_OK;
}

gbc_err gbc_ctl_activate(gbc_client_t *c, size_t endpoint, const char *type,
                         gbc_grain_status_t *out, int timeout_ms)
{
    return status_op(c, endpoint, OP_ACTIVATE, type, out, timeout_ms);
}

gbc_err gbc_ctl_deactivate(gbc_client_t *c, size_t endpoint, const char *type,
                           gbc_grain_status_t *out, int timeout_ms)
{
    return status_op(c, endpoint, OP_DEACTIVATE, type, out, timeout_ms);
}

gbc_err gbc_ctl_terminate(gbc_client_t *c, size_t endpoint, const char *type,
                          gbc_grain_status_t *out, int timeout_ms)
{
    return status_op(c, endpoint, OP_TERMINATE, type, out, timeout_ms);
}

gbc_err gbc_ctl_status(gbc_client_t *c, size_t endpoint, const char *type,
                       gbc_grain_status_t *out, int timeout_ms)
{
    return status_op(c, endpoint, OP_STATUS, type, out, timeout_ms);
}

gbc_err gbc_ctl_telemetry(gbc_client_t *c, size_t endpoint, const char *type,
                          gbc_telemetry_t *out, int timeout_ms)
{
    gbci_clear_error();
    gbc_err err = check_ep(c, endpoint, false);
    if (err || (err = check_type(type)))
        return err;
    Gpubridge__TelemetryRequest tr = GPUBRIDGE__TELEMETRY_REQUEST__INIT;
    tr.grain_type = (char *)type;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST;
    ctl.telemetry_request = &tr;
    gbc_reply_t r;
    err = ctl_call(c, endpoint, &ctl,
                   GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_TELEMETRY, &r, timeout_ms);
    Gpubridge__Telemetry *t = NULL;
    if (!err && !(t = (Gpubridge__Telemetry *)gbci_pb_unpack(&gpubridge__telemetry__descriptor, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as Telemetry",
                        c->eps[endpoint].addr);
    if (t && out) {
        gbc_telemetry_t full;
        memset(&full, 0, sizeof full);
        COPY(full.grain_type, t->grain_type);
        full.messages_processed = t->messages_processed;
        full.errors = t->errors;
        full.launches = t->launches;
        full.iterations = t->iterations;
        full.queue_depth_in = t->queue_depth_in;
        full.queue_depth_out = t->queue_depth_out;
        full.queue_capacity = t->queue_capacity;
        full.timestamp_ns = t->timestamp_ns;
        full.mail_sent = t->mail_sent;
        full.mail_forwarded = t->mail_forwarded;
        full.mail_linked = t->mail_linked;
        full.mail_held = t->mail_held;
        full.mail_undeliverable = t->mail_undeliverable;
        full.device = t->device;
        for (size_t d = 0; d < t->n_devices && d < GBC_MAX_DEVICES; d++) {
            const Gpubridge__Telemetry *dt = t->devices[d];
            gbc_device_telemetry_t *o = &full.devices[full.n_devices++];
            o->device = dt->device;
            o->device_number = dt->device_number;
            o->messages_processed = dt->messages_processed;
            o->errors = dt->errors;
            o->launches = dt->launches;
            o->queue_depth_in = dt->queue_depth_in;
            o->queue_depth_out = dt->queue_depth_out;
            full.devices_mail_linked[d] = dt->mail_linked;
        }
        full.connections_dropped = t->connections_dropped;
        full.replies_undelivered = t->replies_undelivered;
        full.held_bytes = t->held_bytes;
        full.reply_backlog_bytes = t->reply_backlog_bytes;
        full.frames_too_large = t->frames_too_large;
        full.frames_refused_unread = t->frames_refused_unread;
        copy_out(out, &full, GBCI_TELEMETRY_V02_SIZE, sizeof full);
    }
    if (t)
        gpubridge__telemetry__free_unpacked(t, NULL);
    gbc_reply_clear(&r);
    return err;
}

void gbc_type_list_clear(gbc_type_list_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; l->names && i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    l->names = NULL;
    l->n = 0;
}

gbc_err gbc_ctl_list(gbc_client_t *c, size_t endpoint, gbc_type_list_t *out, int timeout_ms)
{
    gbci_clear_error();
    if (!out)
        return gbci_fail(GBC_ERR_INVALID, "gbc_ctl_list: out is NULL");
    memset(out, 0, sizeof *out);
    gbc_err err = check_ep(c, endpoint, false);
    if (err)
        return err;
    Gpubridge__ListGrainTypes lt = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES;
    ctl.list_grain_types = &lt;
    gbc_reply_t r;
    err = ctl_call(c, endpoint, &ctl,
                   GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST, &r,
                   timeout_ms);
    Gpubridge__GrainTypeList *gl = NULL;
    if (!err && !(gl = (Gpubridge__GrainTypeList *)gbci_pb_unpack(&gpubridge__grain_type_list__descriptor, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as GrainTypeList",
                        c->eps[endpoint].addr);
    if (gl && gl->n_grain_types) {
        out->names = calloc(gl->n_grain_types, sizeof *out->names);
        for (size_t i = 0; out->names && i < gl->n_grain_types; i++) {
            if (!(out->names[i] = strdup(gl->grain_types[i] ? gl->grain_types[i] : "")))
                break;
            gbci_text_clean(out->names[i]);
            out->n++;
        }
        if (out->n != gl->n_grain_types) {
            gbc_type_list_clear(out);
            err = gbci_fail(GBC_ERR_NOMEM, "out of memory");
        }
    }
    if (gl)
        gpubridge__grain_type_list__free_unpacked(gl, NULL);
    gbc_reply_clear(&r);
    return err;
}

gbc_err gbc_ctl_detect(gbc_client_t *c, size_t endpoint, gbc_detect_report_t *out,
                       int timeout_ms)
{
    gbci_clear_error();
    gbc_err err = check_ep(c, endpoint, false);
    if (err)
        return err;
    Gpubridge__DetectRequest dr = GPUBRIDGE__DETECT_REQUEST__INIT;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_DETECT_REQUEST;
    ctl.detect_request = &dr;
    gbc_reply_t r;
    err = ctl_call(c, endpoint, &ctl,
                   GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_DETECT_REPORT, &r,
                   timeout_ms);
    Gpubridge__DetectReport *d = NULL;
    if (!err && !(d = (Gpubridge__DetectReport *)gbci_pb_unpack(&gpubridge__detect_report__descriptor, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as DetectReport",
                        c->eps[endpoint].addr);
    if (d && out) {
        gbc_detect_report_t full;
        memset(&full, 0, sizeof full);
        full.cuda_device_count = d->cuda_device_count;
        COPY(full.device_name, d->device_name);
        full.wsl2 = d->wsl2;
        full.wsl1 = d->wsl1;
        full.kernel_exec_timeout = d->kernel_exec_timeout;
        full.mapped_pinned_ok = d->mapped_pinned_ok;
        full.concurrent_managed_access = d->concurrent_managed_access;
        full.cooperative_launch = d->cooperative_launch;
        full.host_native_atomics = d->host_native_atomics;
        COPY(full.rule_fired, d->rule_fired);
        COPY(full.mode, d->mode);
        COPY(full.mode_requested, d->mode_requested);
        COPY(full.mode_source, d->mode_source);
        full.cuda_built = d->cuda_built;
        full.device = d->device;
        full.compute_capability_major = d->compute_capability_major;
        full.compute_capability_minor = d->compute_capability_minor;
        full.dev_dxg = d->dev_dxg;
        COPY(full.os_release, d->os_release);
        COPY(full.fallback_reason, d->fallback_reason);
        copy_out(out, &full, GBCI_DETECT_REPORT_V02_SIZE, sizeof full);
    }
    if (d)
        gpubridge__detect_report__free_unpacked(d, NULL);
    gbc_reply_clear(&r);
    return err;
}

gbc_err gbc_ctl_deactivate_grain(gbc_client_t *c, const char *type, uint64_t key,
                                 int timeout_ms)
{
    gbci_clear_error();
    gbc_err err = check_ep(c, 0, false);
    if (err || (err = check_type(type)))
        return err;
    Gpubridge__DeactivateGrain dg = GPUBRIDGE__DEACTIVATE_GRAIN__INIT;
    dg.grain_type = (char *)type;
    dg.key = key;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN;
    ctl.deactivate_grain = &dg;
    gbc_reply_t r;
    /* The grain lives where its requests go. */
    err = ctl_call(c, gbc_placement(type, key, c->n), &ctl,
                   GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_UNSPECIFIED, &r,
                   timeout_ms);
    gbc_reply_clear(&r);
    return err;
}

void gbc_limits_clear(gbc_limits_t *l)
{
    if (!l)
        return;
    free(l->types); /* one block: the types, then every type's full list (limits_block) */
    memset(l, 0, sizeof *l);
}

/* gbc_limits_t.types is one allocation: n_types gbc_type_limits_t, then one
 * limits_span_t per type, then every type's message limits in a row (the
 * struct keeps the first GBC_LIMITS_MAX_MESSAGES; gbc_limits_messages all). */
typedef struct limits_span {
    size_t first, n;
} limits_span_t;

static limits_span_t *limits_spans(const gbc_limits_t *l)
{
    return (limits_span_t *)(void *)((char *)l->types + l->n_types * sizeof *l->types);
}

static gbc_msg_limits_t *limits_msgs(const gbc_limits_t *l)
{
    return (gbc_msg_limits_t *)(void *)(limits_spans(l) + l->n_types);
}

/* Copies one GrainTypeLimits into *out, its message limits to all[]. */
static void copy_type_limits(gbc_type_limits_t *out, gbc_msg_limits_t *all, const Gpubridge__GrainTypeLimits *g)
{
    COPY(out->grain_type, g->grain_type);
    out->slot_size = g->slot_size;
    out->record_size = g->record_size;
    out->queue_capacity = g->queue_capacity;
    out->max_grains = g->max_grains;
    for (size_t j = 0; j < g->n_message_types; j++) {
        gbc_msg_limits_t *m = &all[j];
        m->message_type = g->message_types[j]->message_type;
        COPY(m->name, g->message_types[j]->name);
        m->max_payload = g->message_types[j]->max_payload;
        m->max_elements = g->message_types[j]->max_elements;
        if (j < GBC_LIMITS_MAX_MESSAGES)
            out->messages[out->n_messages++] = *m;
    }
}

/* Fills out from the decoded reply l (one block, see limits_spans). */
static gbc_err limits_fill(gbc_limits_t *out, const Gpubridge__Limits *l)
{
    out->max_message_size = l->max_message_size;
    out->hold_bound = l->hold_bound;
    out->max_replies_per_frame = l->max_replies_per_frame;
    if (!l->n_grain_types)
        return GBC_OK;
    size_t total = 0;
    for (size_t i = 0; i < l->n_grain_types; i++)
        total += l->grain_types[i]->n_message_types;
    const size_t size = l->n_grain_types * (sizeof(gbc_type_limits_t) + sizeof(limits_span_t)) +
                        total * sizeof(gbc_msg_limits_t);
    if (!(out->types = calloc(1, size)))
        return gbci_fail(GBC_ERR_NOMEM, "out of memory for the limits of %zu grain types", l->n_grain_types);
    out->n_types = l->n_grain_types;
    limits_span_t *span = limits_spans(out);
    gbc_msg_limits_t *msgs = limits_msgs(out);
    for (size_t i = 0, at = 0; i < l->n_grain_types; i++) {
        span[i] = (limits_span_t){at, l->grain_types[i]->n_message_types};
        copy_type_limits(&out->types[i], msgs + at, l->grain_types[i]);
        at += span[i].n;
    }
    return GBC_OK;
}

gbc_err gbc_ctl_limits(gbc_client_t *c, size_t endpoint, gbc_limits_t *out, int timeout_ms)
{
    gbci_clear_error();
    if (!out)
        return gbci_fail(GBC_ERR_INVALID, "gbc_ctl_limits: out is NULL");
    memset(out, 0, sizeof *out);
    gbc_err err = check_ep(c, endpoint, false);
    if (err)
        return err;
    Gpubridge__LimitsRequest lr = GPUBRIDGE__LIMITS_REQUEST__INIT;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST;
    ctl.limits_request = &lr;
    gbc_reply_t r;
    err = ctl_call(c, endpoint, &ctl, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_LIMITS, &r,
                   timeout_ms);
    Gpubridge__Limits *l = NULL;
    if (!err && !(l = (Gpubridge__Limits *)gbci_pb_unpack(&gpubridge__limits__descriptor, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as Limits", c->eps[endpoint].addr);
    if (l) {
        err = limits_fill(out, l);
        gpubridge__limits__free_unpacked(l, NULL);
    }
    gbc_reply_clear(&r);
    return err;
}

const gbc_msg_limits_t *gbc_limits_messages(const gbc_limits_t *l, size_t i, size_t *n)
{
    if (n)
        *n = 0;
    if (!l || !l->types || i >= l->n_types)
        return NULL;
    const limits_span_t *span = &limits_spans(l)[i];
    if (n)
        *n = span->n;
    return limits_msgs(l) + span->first;
}

const gbc_msg_limits_t *gbc_limits_find(const gbc_limits_t *l, const char *type, uint32_t message_type)
{
    for (size_t i = 0; l && type && i < l->n_types; i++) {
        if (strcmp(l->types[i].grain_type, type) != 0)
            continue;
        size_t n;
        const gbc_msg_limits_t *m = gbc_limits_messages(l, i, &n);
        for (size_t j = 0; j < n; j++)
            if (m[j].message_type == message_type)
                return &m[j];
    }
    return NULL;
}

const char *gbc_grain_state_name(int state)
{
    static const char *const n[] = {"unspecified", "active", "inactive", "terminated", "failed"};
    return state >= 0 && state < 5 ? n[state] : "?";
}

const char *gbc_placement_name(int placement)
{
    static const char *const n[] = {"unspecified", "mapped", "device-staging", "host"};
    return placement >= 0 && placement < 4 ? n[placement] : "?";
}

const char *gbc_exit_reason_name(int reason)
{
    static const char *const n[] = {"none",         "terminated",  "budget-spent",
                                    "input-empty",  "output-full", "error"};
    return reason >= 0 && reason < 6 ? n[reason] : "?";
}
