/* control.c: bridge control operations (proto/control.proto) and their
 * replies, copied into the plain C structs of gpubridge_client.h so that
 * users need no protobuf headers for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "control.pb-c.h"

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src) ? (src) : "")

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

/* Decodes a GrainTypeStatus payload into *out (if not NULL). */
static gbc_err decode_status(const gbc_client_t *c, const gbc_reply_t *r,
                             gbc_grain_status_t *out)
{
    Gpubridge__GrainTypeStatus *s =
        gpubridge__grain_type_status__unpack(NULL, r->payload_len, r->payload);
    if (!s)
        return gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as GrainTypeStatus",
                         c->eps[r->endpoint].addr);
    if (out) {
        memset(out, 0, sizeof *out);
        COPY(out->grain_type, s->grain_type);
        COPY(out->mode, s->mode);
        out->state = (int)s->state;
        out->placement = (int)s->placement;
        out->exit_reason = (int)s->exit_reason;
        out->last_error_code = s->last_error_code;
        COPY(out->last_error_name, s->last_error_name);
        out->heartbeat = s->heartbeat;
        out->heartbeat_age_ns = s->heartbeat_age_ns;
        out->device = s->device;
        out->queue_capacity = s->queue_capacity;
        out->slot_size = s->slot_size;
        out->lanes = s->lanes;
        out->max_message_size = s->max_message_size;
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
        err = status_op_one(c, i, op, type, out ? &out[i] : NULL, timeout_ms);
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
    if (!err && !(t = gpubridge__telemetry__unpack(NULL, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as Telemetry",
                        c->eps[endpoint].addr);
    if (t && out) {
        memset(out, 0, sizeof *out);
        COPY(out->grain_type, t->grain_type);
        out->messages_processed = t->messages_processed;
        out->errors = t->errors;
        out->launches = t->launches;
        out->iterations = t->iterations;
        out->queue_depth_in = t->queue_depth_in;
        out->queue_depth_out = t->queue_depth_out;
        out->queue_capacity = t->queue_capacity;
        out->timestamp_ns = t->timestamp_ns;
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
    if (!err && !(gl = gpubridge__grain_type_list__unpack(NULL, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as GrainTypeList",
                        c->eps[endpoint].addr);
    if (gl && gl->n_grain_types) {
        out->names = calloc(gl->n_grain_types, sizeof *out->names);
        for (size_t i = 0; out->names && i < gl->n_grain_types; i++) {
            if (!(out->names[i] = strdup(gl->grain_types[i] ? gl->grain_types[i] : "")))
                break;
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
    if (!err && !(d = gpubridge__detect_report__unpack(NULL, r.payload_len, r.payload)))
        err = gbci_fail(GBC_ERR_PROTO, "%s: reply does not decode as DetectReport",
                        c->eps[endpoint].addr);
    if (d && out) {
        memset(out, 0, sizeof *out);
        out->cuda_device_count = d->cuda_device_count;
        COPY(out->device_name, d->device_name);
        out->wsl2 = d->wsl2;
        out->wsl1 = d->wsl1;
        out->kernel_exec_timeout = d->kernel_exec_timeout;
        out->mapped_pinned_ok = d->mapped_pinned_ok;
        out->concurrent_managed_access = d->concurrent_managed_access;
        out->cooperative_launch = d->cooperative_launch;
        out->host_native_atomics = d->host_native_atomics;
        COPY(out->rule_fired, d->rule_fired);
        COPY(out->mode, d->mode);
        COPY(out->mode_requested, d->mode_requested);
        COPY(out->mode_source, d->mode_source);
        out->cuda_built = d->cuda_built;
        out->device = d->device;
        out->compute_capability_major = d->compute_capability_major;
        out->compute_capability_minor = d->compute_capability_minor;
        out->dev_dxg = d->dev_dxg;
        COPY(out->os_release, d->os_release);
        COPY(out->fallback_reason, d->fallback_reason);
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
