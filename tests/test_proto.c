/* test_proto.c: the protobuf schemas through protobuf-c, for real: the
 * bridge's (proto/); each built-in grain's test_<name>_proto.c does the same
 * for its own schema (grains/<name>/<name>.proto), with proto_check.h.
 *
 * Every message type of every .proto file there is packed with its typed
 * *__pack, unpacked with *__unpack, compared field by field and freed with
 * *__free_unpacked, with the checks of proto_check.h on each encoding.
 * Then: oneof cases, empty repeated fields, extreme values, open enums,
 * unknown fields, hand-made garbage that must be refused, random garbage
 * for every message type, and a check that no message of a schema was missed.
 *
 * Decisions the checks pin down (what the bridge can rely on):
 *   - decoding never crashes and returns NULL on malformed input;
 *   - a submessage field sent empty decodes non-NULL, an absent one NULL
 *     (Envelope.grain / Envelope.control: "missing field" is the NULL case);
 *   - enum values outside the schema survive decoding (proto3 open enums),
 *     so code must range-check Status / Kind / Op before using them;
 *   - protobuf-c does not validate UTF-8 in strings, Python does: only valid
 *     UTF-8 may go into string fields. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.pb-c.h"
#include "gpubridge.pb-c.h"
#include "vecadd.pb-c.h" /* a grain payload inside an envelope (test_envelope_request) */

#include "gpubridge/ring.h"

/* ------------------------------------------------------------------------ */
/* Every message type, for coverage, random garbage and the schema check.   */

static const ProtobufCMessageDescriptor *const all_descriptors[] = {
    /* gpubridge.proto */
    &gpubridge__grain_id__descriptor,
    &gpubridge__envelope__descriptor,
    &gpubridge__reply__descriptor,
    &gpubridge__batch__descriptor,
    &gpubridge__reply_batch__descriptor,
    &gpubridge__client_frame__descriptor,
    &gpubridge__server_frame__descriptor,
    /* control.proto */
    &gpubridge__control__descriptor,
    &gpubridge__activate__descriptor,
    &gpubridge__deactivate__descriptor,
    &gpubridge__terminate__descriptor,
    &gpubridge__status_request__descriptor,
    &gpubridge__telemetry_request__descriptor,
    &gpubridge__list_grain_types__descriptor,
    &gpubridge__detect_request__descriptor,
    &gpubridge__deactivate_grain__descriptor,
    &gpubridge__grain_type_status__descriptor,
    &gpubridge__telemetry__descriptor,
    &gpubridge__grain_type_list__descriptor,
    &gpubridge__detect_report__descriptor,
    &gpubridge__limits_request__descriptor,
    &gpubridge__message_type_limits__descriptor,
    &gpubridge__grain_type_limits__descriptor,
    &gpubridge__limits__descriptor,
};
#define N_DESCRIPTORS (sizeof all_descriptors / sizeof all_descriptors[0])

#include "proto_check.h"

/* ------------------------------------------------------------------------ */
/* Field comparisons.                                                        */


static void cmp_grain_id(const Gpubridge__GrainId *a, const Gpubridge__GrainId *b)
{
    if (a == NULL || b == NULL) {
        assert_ptr_equal(a, b);
        return;
    }
    assert_str_eq(a->type, b->type);
    assert_int_equal(a->key, b->key);
}

static void cmp_control(const Gpubridge__Control *a, const Gpubridge__Control *b)
{
    if (a == NULL || b == NULL) {
        assert_ptr_equal(a, b);
        return;
    }
    assert_int_equal(a->op_case, b->op_case);
    switch (a->op_case) {
    case GPUBRIDGE__CONTROL__OP_ACTIVATE:
        assert_str_eq(a->activate->grain_type, b->activate->grain_type);
        break;
    case GPUBRIDGE__CONTROL__OP_DEACTIVATE:
        assert_str_eq(a->deactivate->grain_type, b->deactivate->grain_type);
        break;
    case GPUBRIDGE__CONTROL__OP_TERMINATE:
        assert_str_eq(a->terminate->grain_type, b->terminate->grain_type);
        break;
    case GPUBRIDGE__CONTROL__OP_STATUS_REQUEST:
        assert_str_eq(a->status_request->grain_type, b->status_request->grain_type);
        break;
    case GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST:
        assert_str_eq(a->telemetry_request->grain_type, b->telemetry_request->grain_type);
        break;
    case GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES:
        assert_non_null(b->list_grain_types);
        break;
    case GPUBRIDGE__CONTROL__OP_DETECT_REQUEST:
        assert_non_null(b->detect_request);
        break;
    case GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST:
        assert_non_null(b->limits_request);
        break;
    case GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN:
        assert_str_eq(a->deactivate_grain->grain_type, b->deactivate_grain->grain_type);
        assert_int_equal(a->deactivate_grain->key, b->deactivate_grain->key);
        break;
    default:
        break;
    }
}

static void cmp_envelope(const Gpubridge__Envelope *a, const Gpubridge__Envelope *b)
{
    assert_int_equal(a->correlation_id, b->correlation_id);
    cmp_grain_id(a->grain, b->grain);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->message_type, b->message_type);
    assert_bytes_eq(a->payload, b->payload);
    cmp_control(a->control, b->control);
}

static void cmp_reply(const Gpubridge__Reply *a, const Gpubridge__Reply *b)
{
    assert_int_equal(a->correlation_id, b->correlation_id);
    assert_int_equal(a->status, b->status);
    assert_str_eq(a->error, b->error);
    assert_int_equal(a->message_type, b->message_type);
    assert_bytes_eq(a->payload, b->payload);
}

static void cmp_batch(const Gpubridge__Batch *a, const Gpubridge__Batch *b)
{
    assert_int_equal(a->n_envelopes, b->n_envelopes);
    for (size_t i = 0; i < a->n_envelopes; i++)
        cmp_envelope(a->envelopes[i], b->envelopes[i]);
}

static void cmp_reply_batch(const Gpubridge__ReplyBatch *a, const Gpubridge__ReplyBatch *b)
{
    assert_int_equal(a->n_replies, b->n_replies);
    for (size_t i = 0; i < a->n_replies; i++)
        cmp_reply(a->replies[i], b->replies[i]);
}

static void cmp_grain_type_status(const Gpubridge__GrainTypeStatus *a,
                                  const Gpubridge__GrainTypeStatus *b)
{
    assert_str_eq(a->grain_type, b->grain_type);
    assert_str_eq(a->mode, b->mode);
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->placement, b->placement);
    assert_int_equal(a->exit_reason, b->exit_reason);
    assert_int_equal(a->last_error_code, b->last_error_code);
    assert_str_eq(a->last_error_name, b->last_error_name);
    assert_int_equal(a->heartbeat, b->heartbeat);
    assert_int_equal(a->heartbeat_age_ns, b->heartbeat_age_ns);
    assert_int_equal(a->device, b->device);
    assert_int_equal(a->queue_capacity, b->queue_capacity);
    assert_int_equal(a->slot_size, b->slot_size);
    assert_int_equal(a->lanes, b->lanes);
}

static void cmp_telemetry(const Gpubridge__Telemetry *a, const Gpubridge__Telemetry *b)
{
    assert_str_eq(a->grain_type, b->grain_type);
    assert_int_equal(a->messages_processed, b->messages_processed);
    assert_int_equal(a->errors, b->errors);
    assert_int_equal(a->launches, b->launches);
    assert_int_equal(a->iterations, b->iterations);
    assert_int_equal(a->queue_depth_in, b->queue_depth_in);
    assert_int_equal(a->queue_depth_out, b->queue_depth_out);
    assert_int_equal(a->queue_capacity, b->queue_capacity);
    assert_int_equal(a->timestamp_ns, b->timestamp_ns);
}

static void cmp_grain_type_list(const Gpubridge__GrainTypeList *a, const Gpubridge__GrainTypeList *b)
{
    assert_int_equal(a->n_grain_types, b->n_grain_types);
    for (size_t i = 0; i < a->n_grain_types; i++)
        assert_str_eq(a->grain_types[i], b->grain_types[i]);
}

static void cmp_detect_report(const Gpubridge__DetectReport *a, const Gpubridge__DetectReport *b)
{
    assert_int_equal(a->cuda_device_count, b->cuda_device_count);
    assert_str_eq(a->device_name, b->device_name);
    assert_int_equal(a->wsl2, b->wsl2);
    assert_int_equal(a->wsl1, b->wsl1);
    assert_int_equal(a->kernel_exec_timeout, b->kernel_exec_timeout);
    assert_int_equal(a->mapped_pinned_ok, b->mapped_pinned_ok);
    assert_int_equal(a->concurrent_managed_access, b->concurrent_managed_access);
    assert_int_equal(a->cooperative_launch, b->cooperative_launch);
    assert_int_equal(a->host_native_atomics, b->host_native_atomics);
    assert_str_eq(a->rule_fired, b->rule_fired);
    assert_str_eq(a->mode, b->mode);
    assert_str_eq(a->mode_requested, b->mode_requested);
    assert_str_eq(a->mode_source, b->mode_source);
    assert_int_equal(a->cuda_built, b->cuda_built);
    assert_int_equal(a->device, b->device);
    assert_int_equal(a->compute_capability_major, b->compute_capability_major);
    assert_int_equal(a->compute_capability_minor, b->compute_capability_minor);
    assert_int_equal(a->dev_dxg, b->dev_dxg);
    assert_str_eq(a->os_release, b->os_release);
    assert_str_eq(a->fallback_reason, b->fallback_reason);
}

/* ------------------------------------------------------------------------ */
/* gpubridge.proto                                                           */

static void test_grain_id(void **state)
{
    (void)state;
    Gpubridge__GrainId in = GPUBRIDGE__GRAIN_ID__INIT, *out;
    in.type = "pagerank.aggregator";
    in.key = UINT64_MAX;
    ROUND_TRIP(gpubridge__grain_id, &in, out);
    cmp_grain_id(&in, out);
    gpubridge__grain_id__free_unpacked(out, NULL);

    /* UINT64_MAX is a 10-byte varint: tag + 10, plus the string. */
    in.type = "";
    assert_int_equal(gpubridge__grain_id__get_packed_size(&in), 11);

    /* All defaults: nothing on the wire, defaults back. */
    in.key = 0;
    assert_int_equal(gpubridge__grain_id__get_packed_size(&in), 0);
    ROUND_TRIP(gpubridge__grain_id, &in, out);
    assert_string_equal(out->type, "");
    assert_int_equal(out->key, 0);
    gpubridge__grain_id__free_unpacked(out, NULL);
}

/* A KIND_REQUEST envelope carrying an encoded VectorAddRequest, decoded all
 * the way down as the bridge would. */
static void test_envelope_request(void **state)
{
    (void)state;
    float a[] = {1.0f, -2.5f, FLT_MAX};
    float b[] = {4.0f, 0.5f, FLT_MIN};
    Gpubridge__VectorAddRequest vin = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    vin.op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_MUL;
    vin.n_a = 3;
    vin.a = a;
    vin.n_b = 3;
    vin.b = b;
    size_t plen;
    uint8_t *payload = pack_new(&vin.base, &plen);

    Gpubridge__GrainId grain = GPUBRIDGE__GRAIN_ID__INIT;
    grain.type = "vecadd";
    grain.key = UINT64_MAX;
    Gpubridge__Envelope in = GPUBRIDGE__ENVELOPE__INIT, *out;
    in.correlation_id = UINT64_MAX;
    in.grain = &grain;
    in.kind = GPUBRIDGE__KIND__KIND_REQUEST;
    in.message_type = GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST;
    in.payload.len = plen;
    in.payload.data = payload;
    ROUND_TRIP(gpubridge__envelope, &in, out);
    cmp_envelope(&in, out);
    assert_null(out->control);

    Gpubridge__VectorAddRequest *vout =
        gpubridge__vector_add_request__unpack(NULL, out->payload.len, out->payload.data);
    assert_non_null(vout);
    assert_int_equal(vout->op, GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_MUL);
    assert_floats_eq(a, 3, vout->a, vout->n_a);
    assert_floats_eq(b, 3, vout->b, vout->n_b);
    gpubridge__vector_add_request__free_unpacked(vout, NULL);
    gpubridge__envelope__free_unpacked(out, NULL);

    /* One-way, maximal message type, empty payload. */
    in.kind = GPUBRIDGE__KIND__KIND_ONE_WAY;
    in.message_type = UINT32_MAX;
    in.payload.len = 0;
    in.payload.data = NULL;
    ROUND_TRIP(gpubridge__envelope, &in, out);
    cmp_envelope(&in, out);
    gpubridge__envelope__free_unpacked(out, NULL);
    free(payload);
}

/* Unset vs empty submessages, and the all-default envelope. */
static void test_envelope_defaults(void **state)
{
    (void)state;
    Gpubridge__Envelope in = GPUBRIDGE__ENVELOPE__INIT, *out;
    assert_int_equal(gpubridge__envelope__get_packed_size(&in), 0);
    ROUND_TRIP(gpubridge__envelope, &in, out);
    assert_int_equal(out->correlation_id, 0);
    assert_null(out->grain);    /* absent: the bridge's "missing field" */
    assert_int_equal(out->kind, GPUBRIDGE__KIND__KIND_UNSPECIFIED);
    assert_int_equal(out->message_type, 0);
    assert_int_equal(out->payload.len, 0);
    assert_null(out->control);
    gpubridge__envelope__free_unpacked(out, NULL);

    /* Present but empty submessages stay present. */
    Gpubridge__GrainId grain = GPUBRIDGE__GRAIN_ID__INIT;
    Gpubridge__Control control = GPUBRIDGE__CONTROL__INIT;
    in.grain = &grain;
    in.control = &control;
    ROUND_TRIP(gpubridge__envelope, &in, out);
    assert_non_null(out->grain);
    assert_string_equal(out->grain->type, "");
    assert_int_equal(out->grain->key, 0);
    assert_non_null(out->control);
    assert_int_equal(out->control->op_case, GPUBRIDGE__CONTROL__OP__NOT_SET);
    gpubridge__envelope__free_unpacked(out, NULL);
}

/* KIND_CONTROL envelopes with each Control op (the oneof's every case), and
 * each op message on its own. */
static void test_envelope_control_ops(void **state)
{
    (void)state;
    Gpubridge__Activate act = GPUBRIDGE__ACTIVATE__INIT;
    Gpubridge__Deactivate deact = GPUBRIDGE__DEACTIVATE__INIT;
    Gpubridge__Terminate term = GPUBRIDGE__TERMINATE__INIT;
    Gpubridge__StatusRequest st = GPUBRIDGE__STATUS_REQUEST__INIT;
    Gpubridge__TelemetryRequest tel = GPUBRIDGE__TELEMETRY_REQUEST__INIT;
    Gpubridge__ListGrainTypes list = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    Gpubridge__DetectRequest det = GPUBRIDGE__DETECT_REQUEST__INIT;
    Gpubridge__DeactivateGrain dg = GPUBRIDGE__DEACTIVATE_GRAIN__INIT;
    Gpubridge__LimitsRequest lim = GPUBRIDGE__LIMITS_REQUEST__INIT;
    act.grain_type = "vecadd";
    deact.grain_type = "echo";
    term.grain_type = "pagerank.sender";
    st.grain_type = "pagerank.aggregator";
    tel.grain_type = "vecadd";
    dg.grain_type = "echo";
    dg.key = UINT64_MAX;

    /* Each op message alone. */
    {
        Gpubridge__Activate *o;
        ROUND_TRIP(gpubridge__activate, &act, o);
        assert_string_equal(o->grain_type, "vecadd");
        gpubridge__activate__free_unpacked(o, NULL);
    }
    {
        Gpubridge__Deactivate *o;
        ROUND_TRIP(gpubridge__deactivate, &deact, o);
        assert_string_equal(o->grain_type, "echo");
        gpubridge__deactivate__free_unpacked(o, NULL);
    }
    {
        Gpubridge__Terminate *o;
        ROUND_TRIP(gpubridge__terminate, &term, o);
        assert_string_equal(o->grain_type, "pagerank.sender");
        gpubridge__terminate__free_unpacked(o, NULL);
    }
    {
        Gpubridge__StatusRequest *o;
        ROUND_TRIP(gpubridge__status_request, &st, o);
        assert_string_equal(o->grain_type, "pagerank.aggregator");
        gpubridge__status_request__free_unpacked(o, NULL);
    }
    {
        Gpubridge__TelemetryRequest *o;
        ROUND_TRIP(gpubridge__telemetry_request, &tel, o);
        assert_string_equal(o->grain_type, "vecadd");
        gpubridge__telemetry_request__free_unpacked(o, NULL);
    }
    {
        Gpubridge__ListGrainTypes *o;
        assert_int_equal(gpubridge__list_grain_types__get_packed_size(&list), 0);
        ROUND_TRIP(gpubridge__list_grain_types, &list, o);
        gpubridge__list_grain_types__free_unpacked(o, NULL);
    }
    {
        Gpubridge__DetectRequest *o;
        assert_int_equal(gpubridge__detect_request__get_packed_size(&det), 0);
        ROUND_TRIP(gpubridge__detect_request, &det, o);
        gpubridge__detect_request__free_unpacked(o, NULL);
    }
    {
        Gpubridge__DeactivateGrain *o;
        ROUND_TRIP(gpubridge__deactivate_grain, &dg, o);
        assert_string_equal(o->grain_type, "echo");
        assert_int_equal(o->key, UINT64_MAX);
        gpubridge__deactivate_grain__free_unpacked(o, NULL);
    }
    {
        Gpubridge__LimitsRequest *o;
        assert_int_equal(gpubridge__limits_request__get_packed_size(&lim), 0);
        ROUND_TRIP(gpubridge__limits_request, &lim, o);
        gpubridge__limits_request__free_unpacked(o, NULL);
    }

    /* Inside Control, inside an Envelope. */
    static const Gpubridge__Control__OpCase cases[] = {
        GPUBRIDGE__CONTROL__OP_ACTIVATE,          GPUBRIDGE__CONTROL__OP_DEACTIVATE,
        GPUBRIDGE__CONTROL__OP_TERMINATE,         GPUBRIDGE__CONTROL__OP_STATUS_REQUEST,
        GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST, GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES,
        GPUBRIDGE__CONTROL__OP_DETECT_REQUEST,    GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN,
        GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST,    GPUBRIDGE__CONTROL__OP__NOT_SET,
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT, *cout;
        ctl.op_case = cases[i];
        switch (cases[i]) {
        case GPUBRIDGE__CONTROL__OP_ACTIVATE: ctl.activate = &act; break;
        case GPUBRIDGE__CONTROL__OP_DEACTIVATE: ctl.deactivate = &deact; break;
        case GPUBRIDGE__CONTROL__OP_TERMINATE: ctl.terminate = &term; break;
        case GPUBRIDGE__CONTROL__OP_STATUS_REQUEST: ctl.status_request = &st; break;
        case GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST: ctl.telemetry_request = &tel; break;
        case GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES: ctl.list_grain_types = &list; break;
        case GPUBRIDGE__CONTROL__OP_DETECT_REQUEST: ctl.detect_request = &det; break;
        case GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN: ctl.deactivate_grain = &dg; break;
        case GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST: ctl.limits_request = &lim; break;
        default: break;
        }
        ROUND_TRIP(gpubridge__control, &ctl, cout);
        cmp_control(&ctl, cout);
        gpubridge__control__free_unpacked(cout, NULL);

        Gpubridge__Envelope in = GPUBRIDGE__ENVELOPE__INIT, *out;
        in.correlation_id = 1000 + i;
        in.kind = GPUBRIDGE__KIND__KIND_CONTROL;
        in.control = &ctl;
        ROUND_TRIP(gpubridge__envelope, &in, out);
        cmp_envelope(&in, out);
        assert_null(out->grain);
        assert_non_null(out->control);
        assert_int_equal(out->control->op_case, cases[i]);
        gpubridge__envelope__free_unpacked(out, NULL);
    }
}

/* Every Status value, the error text, and an unknown (future) status. */
static void test_reply(void **state)
{
    (void)state;
    uint8_t bytes[300];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)(i * 7u);
    for (int s = GPUBRIDGE__STATUS__STATUS_OK; s <= GPUBRIDGE__STATUS__STATUS_NO_ACTIVATION; s++) {
        Gpubridge__Reply in = GPUBRIDGE__REPLY__INIT, *out;
        in.correlation_id = UINT64_MAX - (uint64_t)s;
        in.status = (Gpubridge__Status)s;
        in.error = s ? "vecadd: division by zero at index 3" : "";
        in.message_type = s ? 0 : UINT32_MAX;
        in.payload.len = s ? 0 : sizeof bytes;
        in.payload.data = s ? NULL : bytes;
        ROUND_TRIP(gpubridge__reply, &in, out);
        cmp_reply(&in, out);
        gpubridge__reply__free_unpacked(out, NULL);
    }
    /* A status this build does not know survives: proto3 enums are open. */
    Gpubridge__Reply in = GPUBRIDGE__REPLY__INIT, *out;
    in.status = (Gpubridge__Status)1000;
    ROUND_TRIP(gpubridge__reply, &in, out);
    assert_int_equal(out->status, 1000);
    gpubridge__reply__free_unpacked(out, NULL);
}

static void test_batches(void **state)
{
    (void)state;
    /* Empty batches: zero bytes, zero entries. */
    Gpubridge__Batch b = GPUBRIDGE__BATCH__INIT, *bout;
    assert_int_equal(gpubridge__batch__get_packed_size(&b), 0);
    ROUND_TRIP(gpubridge__batch, &b, bout);
    assert_int_equal(bout->n_envelopes, 0);
    gpubridge__batch__free_unpacked(bout, NULL);
    Gpubridge__ReplyBatch rb = GPUBRIDGE__REPLY_BATCH__INIT, *rbout;
    ROUND_TRIP(gpubridge__reply_batch, &rb, rbout);
    assert_int_equal(rbout->n_replies, 0);
    gpubridge__reply_batch__free_unpacked(rbout, NULL);

    /* 64 mixed envelopes / replies, including an all-default one. */
    enum { N = 64 };
    Gpubridge__GrainId grains[N];
    Gpubridge__Envelope envs[N];
    Gpubridge__Envelope *envp[N];
    Gpubridge__Reply reps[N];
    Gpubridge__Reply *repp[N];
    Gpubridge__Activate act = GPUBRIDGE__ACTIVATE__INIT;
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    act.grain_type = "echo";
    ctl.op_case = GPUBRIDGE__CONTROL__OP_ACTIVATE;
    ctl.activate = &act;
    uint8_t data[16] = {0, 1, 2, 0xFF};
    for (size_t i = 0; i < N; i++) {
        Gpubridge__GrainId g = GPUBRIDGE__GRAIN_ID__INIT;
        Gpubridge__Envelope e = GPUBRIDGE__ENVELOPE__INIT;
        Gpubridge__Reply r = GPUBRIDGE__REPLY__INIT;
        grains[i] = g;
        grains[i].type = (i % 2) ? "echo" : "vecadd";
        grains[i].key = i * 0x0123456789ABCDEFull;
        envs[i] = e;
        if (i != 5) {
            envs[i].correlation_id = i + 1;
            envs[i].kind = (Gpubridge__Kind)(1 + i % 3);
            if (envs[i].kind == GPUBRIDGE__KIND__KIND_CONTROL) {
                envs[i].control = &ctl;
            } else {
                envs[i].grain = &grains[i];
                envs[i].message_type = 1;
                envs[i].payload.len = i % sizeof data;
                envs[i].payload.data = data;
            }
        }
        envp[i] = &envs[i];
        reps[i] = r;
        reps[i].correlation_id = i + 1;
        reps[i].status = (Gpubridge__Status)(i % 16);
        reps[i].error = reps[i].status ? "failed" : "";
        reps[i].payload.len = i % sizeof data;
        reps[i].payload.data = data;
        repp[i] = &reps[i];
    }
    b.n_envelopes = N;
    b.envelopes = envp;
    ROUND_TRIP(gpubridge__batch, &b, bout);
    cmp_batch(&b, bout);
    gpubridge__batch__free_unpacked(bout, NULL);
    rb.n_replies = N;
    rb.replies = repp;
    ROUND_TRIP(gpubridge__reply_batch, &rb, rbout);
    cmp_reply_batch(&rb, rbout);
    gpubridge__reply_batch__free_unpacked(rbout, NULL);
}

/* ClientFrame: each oneof case, an empty batch, and no body. */
static void test_client_frame(void **state)
{
    (void)state;
    Gpubridge__GrainId grain = GPUBRIDGE__GRAIN_ID__INIT;
    grain.type = "echo";
    grain.key = 42;
    Gpubridge__Envelope env = GPUBRIDGE__ENVELOPE__INIT;
    env.correlation_id = 7;
    env.grain = &grain;
    env.kind = GPUBRIDGE__KIND__KIND_REQUEST;
    env.message_type = 1;
    Gpubridge__Envelope *envp[2] = {&env, &env};
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.n_envelopes = 2;
    batch.envelopes = envp;

    Gpubridge__ClientFrame in = GPUBRIDGE__CLIENT_FRAME__INIT, *out;
    in.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    in.envelope = &env;
    ROUND_TRIP(gpubridge__client_frame, &in, out);
    assert_int_equal(out->body_case, GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE);
    cmp_envelope(&env, out->envelope);
    gpubridge__client_frame__free_unpacked(out, NULL);

    in.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    in.batch = &batch;
    ROUND_TRIP(gpubridge__client_frame, &in, out);
    assert_int_equal(out->body_case, GPUBRIDGE__CLIENT_FRAME__BODY_BATCH);
    cmp_batch(&batch, out->batch);
    gpubridge__client_frame__free_unpacked(out, NULL);

    /* An empty batch is still a batch (two bytes: tag, length 0). */
    Gpubridge__Batch empty = GPUBRIDGE__BATCH__INIT;
    in.batch = &empty;
    assert_int_equal(gpubridge__client_frame__get_packed_size(&in), 2);
    ROUND_TRIP(gpubridge__client_frame, &in, out);
    assert_int_equal(out->body_case, GPUBRIDGE__CLIENT_FRAME__BODY_BATCH);
    assert_non_null(out->batch);
    assert_int_equal(out->batch->n_envelopes, 0);
    gpubridge__client_frame__free_unpacked(out, NULL);

    /* No body: zero bytes, NOT_SET (the bridge answers STATUS_MALFORMED). */
    Gpubridge__ClientFrame none = GPUBRIDGE__CLIENT_FRAME__INIT;
    assert_int_equal(gpubridge__client_frame__get_packed_size(&none), 0);
    ROUND_TRIP(gpubridge__client_frame, &none, out);
    assert_int_equal(out->body_case, GPUBRIDGE__CLIENT_FRAME__BODY__NOT_SET);
    gpubridge__client_frame__free_unpacked(out, NULL);
}

/* ServerFrame: each oneof case, with a control reply inside a Reply payload. */
static void test_server_frame(void **state)
{
    (void)state;
    Gpubridge__GrainTypeList list = GPUBRIDGE__GRAIN_TYPE_LIST__INIT;
    char *names[] = {"vecadd", "echo", "pagerank.sender", "pagerank.aggregator"};
    list.n_grain_types = 4;
    list.grain_types = names;
    size_t plen;
    uint8_t *payload = pack_new(&list.base, &plen);

    Gpubridge__Reply rep = GPUBRIDGE__REPLY__INIT;
    rep.correlation_id = UINT64_MAX;
    rep.message_type = GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST;
    rep.payload.len = plen;
    rep.payload.data = payload;
    Gpubridge__Reply err = GPUBRIDGE__REPLY__INIT;
    err.status = GPUBRIDGE__STATUS__STATUS_MALFORMED;
    err.error = "frame could not be decoded";
    Gpubridge__Reply *repp[2] = {&rep, &err};
    Gpubridge__ReplyBatch rb = GPUBRIDGE__REPLY_BATCH__INIT;
    rb.n_replies = 2;
    rb.replies = repp;

    Gpubridge__ServerFrame in = GPUBRIDGE__SERVER_FRAME__INIT, *out;
    in.body_case = GPUBRIDGE__SERVER_FRAME__BODY_REPLY;
    in.reply = &rep;
    ROUND_TRIP(gpubridge__server_frame, &in, out);
    assert_int_equal(out->body_case, GPUBRIDGE__SERVER_FRAME__BODY_REPLY);
    cmp_reply(&rep, out->reply);
    Gpubridge__GrainTypeList *lout = gpubridge__grain_type_list__unpack(
        NULL, out->reply->payload.len, out->reply->payload.data);
    assert_non_null(lout);
    cmp_grain_type_list(&list, lout);
    gpubridge__grain_type_list__free_unpacked(lout, NULL);
    gpubridge__server_frame__free_unpacked(out, NULL);

    in.body_case = GPUBRIDGE__SERVER_FRAME__BODY_BATCH;
    in.batch = &rb;
    ROUND_TRIP(gpubridge__server_frame, &in, out);
    assert_int_equal(out->body_case, GPUBRIDGE__SERVER_FRAME__BODY_BATCH);
    cmp_reply_batch(&rb, out->batch);
    gpubridge__server_frame__free_unpacked(out, NULL);

    Gpubridge__ReplyBatch empty = GPUBRIDGE__REPLY_BATCH__INIT;
    in.batch = &empty;
    ROUND_TRIP(gpubridge__server_frame, &in, out);
    assert_int_equal(out->body_case, GPUBRIDGE__SERVER_FRAME__BODY_BATCH);
    assert_int_equal(out->batch->n_replies, 0);
    gpubridge__server_frame__free_unpacked(out, NULL);

    Gpubridge__ServerFrame none = GPUBRIDGE__SERVER_FRAME__INIT;
    ROUND_TRIP(gpubridge__server_frame, &none, out);
    assert_int_equal(out->body_case, GPUBRIDGE__SERVER_FRAME__BODY__NOT_SET);
    gpubridge__server_frame__free_unpacked(out, NULL);
    free(payload);
}

/* Two encodings back to back are one message to protobuf; for a oneof the
 * last member wins, and the loser must be freed (ASan/LSan checks). */
static void test_oneof_last_wins(void **state)
{
    (void)state;
    Gpubridge__Envelope env = GPUBRIDGE__ENVELOPE__INIT;
    env.correlation_id = 9;
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    Gpubridge__ClientFrame fe = GPUBRIDGE__CLIENT_FRAME__INIT;
    fe.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    fe.envelope = &env;
    Gpubridge__ClientFrame fb = GPUBRIDGE__CLIENT_FRAME__INIT;
    fb.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    fb.batch = &batch;
    size_t le, lb;
    uint8_t *be = pack_new(&fe.base, &le);
    uint8_t *bb = pack_new(&fb.base, &lb);
    uint8_t *both = malloc(le + lb);
    assert_non_null(both);

    memcpy(both, be, le);
    memcpy(both + le, bb, lb);
    Gpubridge__ClientFrame *out = gpubridge__client_frame__unpack(NULL, le + lb, both);
    assert_non_null(out);
    assert_int_equal(out->body_case, GPUBRIDGE__CLIENT_FRAME__BODY_BATCH);
    assert_int_equal(out->batch->n_envelopes, 0);
    gpubridge__client_frame__free_unpacked(out, NULL);

    memcpy(both, bb, lb);
    memcpy(both + lb, be, le);
    out = gpubridge__client_frame__unpack(NULL, le + lb, both);
    assert_non_null(out);
    assert_int_equal(out->body_case, GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE);
    assert_int_equal(out->envelope->correlation_id, 9);
    gpubridge__client_frame__free_unpacked(out, NULL);
    free(both);
    free(be);
    free(bb);
}

/* ------------------------------------------------------------------------ */
/* control.proto replies                                                     */

static void test_control_replies(void **state)
{
    (void)state;
    Gpubridge__GrainTypeStatus st = GPUBRIDGE__GRAIN_TYPE_STATUS__INIT, *stout;
    st.grain_type = "vecadd";
    st.mode = "relaunch";
    st.state = GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_FAILED;
    st.placement = GPUBRIDGE__PLACEMENT__PLACEMENT_DEVICE_STAGING;
    st.exit_reason = GPUBRIDGE__EXIT_REASON__EXIT_REASON_ERROR;
    st.last_error_code = 700;
    st.last_error_name = "cudaErrorIllegalAddress";
    st.heartbeat = UINT64_MAX;
    st.heartbeat_age_ns = UINT64_MAX - 1;
    st.device = -1; /* negative int32: a 10-byte varint on the wire */
    st.queue_capacity = 1u << 24;
    st.slot_size = 65536;
    st.lanes = 4096;
    ROUND_TRIP(gpubridge__grain_type_status, &st, stout);
    cmp_grain_type_status(&st, stout);
    gpubridge__grain_type_status__free_unpacked(stout, NULL);
    /* Every state, placement and exit reason. */
    for (int i = 0; i <= 5; i++) {
        st.state = (Gpubridge__GrainState)(i % 5);
        st.placement = (Gpubridge__Placement)(i % 4);
        st.exit_reason = (Gpubridge__ExitReason)i;
        st.last_error_code = INT32_MIN + i;
        ROUND_TRIP(gpubridge__grain_type_status, &st, stout);
        cmp_grain_type_status(&st, stout);
        gpubridge__grain_type_status__free_unpacked(stout, NULL);
    }

    Gpubridge__Telemetry tel = GPUBRIDGE__TELEMETRY__INIT, *telout;
    tel.grain_type = "echo";
    tel.messages_processed = UINT64_MAX;
    tel.errors = 1;
    tel.launches = UINT64_MAX / 3;
    tel.iterations = 1ull << 63;
    tel.queue_depth_in = UINT32_MAX;
    tel.queue_depth_out = 0;
    tel.queue_capacity = 1024;
    tel.timestamp_ns = 123456789012345ull;
    ROUND_TRIP(gpubridge__telemetry, &tel, telout);
    cmp_telemetry(&tel, telout);
    gpubridge__telemetry__free_unpacked(telout, NULL);

    Gpubridge__GrainTypeList list = GPUBRIDGE__GRAIN_TYPE_LIST__INIT, *lout;
    ROUND_TRIP(gpubridge__grain_type_list, &list, lout); /* empty list */
    assert_int_equal(lout->n_grain_types, 0);
    gpubridge__grain_type_list__free_unpacked(lout, NULL);
    char *names[] = {"vecadd", "", "pagerank.aggregator"}; /* an empty name stays an entry */
    list.n_grain_types = 3;
    list.grain_types = names;
    ROUND_TRIP(gpubridge__grain_type_list, &list, lout);
    cmp_grain_type_list(&list, lout);
    gpubridge__grain_type_list__free_unpacked(lout, NULL);

    Gpubridge__DetectReport det = GPUBRIDGE__DETECT_REPORT__INIT, *dout;
    ROUND_TRIP(gpubridge__detect_report, &det, dout); /* everything false / empty */
    cmp_detect_report(&det, dout);
    gpubridge__detect_report__free_unpacked(dout, NULL);
    det.cuda_device_count = 8;
    det.device_name = "NVIDIA H100 80GB HBM3";
    det.wsl2 = 1;
    det.wsl1 = 1;
    det.kernel_exec_timeout = 1;
    det.mapped_pinned_ok = 1;
    det.concurrent_managed_access = 1;
    det.cooperative_launch = 1;
    det.host_native_atomics = 1;
    det.rule_fired = "wsl2 -> relaunch";
    det.mode = "relaunch";
    det.mode_requested = "auto";
    det.mode_source = "host:gpu-*";
    det.cuda_built = 1;
    det.device = 7;
    det.compute_capability_major = 9;
    det.compute_capability_minor = 0;
    det.dev_dxg = 1;
    det.os_release = "5.15.153.1-microsoft-standard-WSL2";
    det.fallback_reason = "no heartbeat within 2000 ms";
    ROUND_TRIP(gpubridge__detect_report, &det, dout);
    cmp_detect_report(&det, dout);
    gpubridge__detect_report__free_unpacked(dout, NULL);
    det.cuda_device_count = -1;
    det.device = INT32_MIN;
    ROUND_TRIP(gpubridge__detect_report, &det, dout);
    cmp_detect_report(&det, dout);
    gpubridge__detect_report__free_unpacked(dout, NULL);

    /* Limits: nested repeated messages, the largest values each field takes. */
    Gpubridge__MessageTypeLimits m[2] = {GPUBRIDGE__MESSAGE_TYPE_LIMITS__INIT, GPUBRIDGE__MESSAGE_TYPE_LIMITS__INIT};
    Gpubridge__MessageTypeLimits *mp[2] = {&m[0], &m[1]}, *mout;
    m[0].message_type = 0xFEFF;
    m[0].name = "VectorAddRequest";
    m[0].max_payload = UINT32_MAX;
    m[0].max_elements = 8186;
    m[1].name = "";
    ROUND_TRIP(gpubridge__message_type_limits, &m[0], mout);
    assert_int_equal(mout->message_type, 0xFEFF);
    assert_string_equal(mout->name, "VectorAddRequest");
    assert_int_equal(mout->max_payload, UINT32_MAX);
    assert_int_equal(mout->max_elements, 8186);
    gpubridge__message_type_limits__free_unpacked(mout, NULL);
    Gpubridge__GrainTypeLimits g = GPUBRIDGE__GRAIN_TYPE_LIMITS__INIT, *gp = &g, *gout;
    g.grain_type = "vecadd";
    g.slot_size = 65536;
    g.record_size = 65504;
    g.queue_capacity = 1u << 24;
    g.max_grains = 1u << 24;
    g.n_message_types = 2;
    g.message_types = mp;
    ROUND_TRIP(gpubridge__grain_type_limits, &g, gout);
    assert_string_equal(gout->grain_type, "vecadd");
    assert_int_equal(gout->record_size, 65504);
    assert_int_equal(gout->max_grains, 1u << 24);
    assert_int_equal(gout->n_message_types, 2);
    assert_string_equal(gout->message_types[0]->name, "VectorAddRequest");
    assert_int_equal(gout->message_types[1]->max_elements, 0);
    gpubridge__grain_type_limits__free_unpacked(gout, NULL);
    Gpubridge__Limits l = GPUBRIDGE__LIMITS__INIT, *limout;
    ROUND_TRIP(gpubridge__limits, &l, limout); /* no grain types */
    assert_int_equal(limout->n_grain_types, 0);
    gpubridge__limits__free_unpacked(limout, NULL);
    l.max_message_size = 1u << 30;
    l.hold_bound = 64ull << 30;
    l.max_replies_per_frame = 256;
    l.n_grain_types = 1;
    l.grain_types = &gp;
    ROUND_TRIP(gpubridge__limits, &l, limout);
    assert_int_equal(limout->max_message_size, 1u << 30);
    assert_int_equal(limout->hold_bound, 64ull << 30);
    assert_int_equal(limout->max_replies_per_frame, 256);
    assert_int_equal(limout->n_grain_types, 1);
    assert_int_equal(limout->grain_types[0]->n_message_types, 2);
    gpubridge__limits__free_unpacked(limout, NULL);
}

/* ------------------------------------------------------------------------ */
/* Negative tests                                                            */

/* Hand-made malformed encodings that every decoder must refuse. */
static void test_garbage_refused(void **state)
{
    (void)state;
    pc_garbage_refused();

    /* Schema-specific: the typed decoders of the wire messages. */
    static const uint8_t env_wire_type[] = {0x0A, 0x00};          /* correlation_id as bytes */
    static const uint8_t env_grain_varint[] = {0x10, 0x01};       /* grain as varint */
    static const uint8_t env_kind_fixed[] = {0x1D, 1, 0, 0, 0};   /* kind as fixed32 */
    static const uint8_t env_bad_grain[] = {0x12, 0x01, 0x0F};    /* garbage inside grain */
    static const uint8_t env_bad_ctl[] = {0x32, 0x03, 0x0A, 0x01, 0x0F}; /* ... inside control.activate */
    assert_null(gpubridge__envelope__unpack(NULL, sizeof env_wire_type, env_wire_type));
    assert_null(gpubridge__envelope__unpack(NULL, sizeof env_grain_varint, env_grain_varint));
    assert_null(gpubridge__envelope__unpack(NULL, sizeof env_kind_fixed, env_kind_fixed));
    assert_null(gpubridge__envelope__unpack(NULL, sizeof env_bad_grain, env_bad_grain));
    assert_null(gpubridge__envelope__unpack(NULL, sizeof env_bad_ctl, env_bad_ctl));

    static const uint8_t frame_bad_env[] = {0x0A, 0x02, 0x08, 0x80};        /* cut varint inside */
    static const uint8_t frame_bad_batch[] = {0x12, 0x04, 0x0A, 0x02, 0x0F, 0x00};
    static const uint8_t frame_text[] = "GET / HTTP/1.1\r\n\r\n";
    assert_null(gpubridge__client_frame__unpack(NULL, sizeof frame_bad_env, frame_bad_env));
    assert_null(gpubridge__client_frame__unpack(NULL, sizeof frame_bad_batch, frame_bad_batch));
    assert_null(gpubridge__client_frame__unpack(NULL, sizeof frame_text - 1, frame_text));
    static const uint8_t sframe_bad_reply[] = {0x0A, 0x03, 0x1A, 0x05, 'x'}; /* error past the end */
    assert_null(gpubridge__server_frame__unpack(NULL, sizeof sframe_bad_reply, sframe_bad_reply));
}

/* ------------------------------------------------------------------------ */
/* Numbering shared with gpubridge/ring.h, and coverage of the schemas.    */

static void test_numbers_match_ring_h(void **state)
{
    (void)state;
    /* "Values match proto Status where they overlap" (ring.h). */
    assert_int_equal(GB_SLOT_OK, GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(GB_SLOT_UNKNOWN_MESSAGE_TYPE, GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE);
    assert_int_equal(GB_SLOT_TOO_LARGE, GPUBRIDGE__STATUS__STATUS_TOO_LARGE);
    assert_int_equal(GB_SLOT_HANDLER_ERROR, GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR);
    assert_int_equal(GB_SLOT_NOT_ACTIVE, GPUBRIDGE__STATUS__STATUS_NO_ACTIVATION);
    /* ExitReason is numbered as gb_exit_reason. */
    assert_int_equal(GB_EXIT_NONE, GPUBRIDGE__EXIT_REASON__EXIT_REASON_NONE);
    assert_int_equal(GB_EXIT_TERMINATED, GPUBRIDGE__EXIT_REASON__EXIT_REASON_TERMINATED);
    assert_int_equal(GB_EXIT_BUDGET_SPENT, GPUBRIDGE__EXIT_REASON__EXIT_REASON_BUDGET_SPENT);
    assert_int_equal(GB_EXIT_INPUT_EMPTY, GPUBRIDGE__EXIT_REASON__EXIT_REASON_INPUT_EMPTY);
    assert_int_equal(GB_EXIT_OUTPUT_FULL, GPUBRIDGE__EXIT_REASON__EXIT_REASON_OUTPUT_FULL);
    assert_int_equal(GB_EXIT_ERROR, GPUBRIDGE__EXIT_REASON__EXIT_REASON_ERROR);
    /* The Status numbers clients already use. */
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_MALFORMED, 1);
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_BUSY, 8);
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_INTERNAL, 10);
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN, 13);
}

/* Whether folder dir holds a .proto file. */
static int has_proto(const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(dp)) != NULL) {
        size_t n = strlen(de->d_name);
        found = n > 6 && strcmp(de->d_name + n - 6, ".proto") == 0;
    }
    closedir(dp);
    return found;
}

/* Each built-in grain's folder with a .proto file has its schema's
 * round-trip test (test_<name>_proto.c, proto_check.h), which checks that
 * every message of the folder's .proto files is covered. */
static void check_grain_schema_tests(const char *src)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/grains", src);
    DIR *gp = opendir(dir);
    assert_non_null(gp);
    struct dirent *de;
    size_t schemas = 0;
    while ((de = readdir(gp)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!has_proto(path))
            continue;
        schemas++;
        snprintf(path, sizeof path, "%s/%s/test_%s_proto.c", dir, de->d_name, de->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            fail_msg("grains/%s has a .proto file but no round-trip test: %s is missing", de->d_name, path);
    }
    closedir(gp);
    assert_true(schemas > 0);
}

/* Every `message X` in the .proto files of proto/ is in all_descriptors and
 * went through ROUND_TRIP; each grain's schema has its own test. */
static void test_every_message_covered(void **state)
{
    (void)state;
    static const char *const dirs[] = {"proto"};
    pc_check_covered(dirs, 1);
    const char *src = getenv("GB_SOURCE_DIR");
    if (src)
        check_grain_schema_tests(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grain_id),
        cmocka_unit_test(test_envelope_request),
        cmocka_unit_test(test_envelope_defaults),
        cmocka_unit_test(test_envelope_control_ops),
        cmocka_unit_test(test_reply),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_client_frame),
        cmocka_unit_test(test_server_frame),
        cmocka_unit_test(test_oneof_last_wins),
        cmocka_unit_test(test_control_replies),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(pc_random_garbage),
        cmocka_unit_test(test_numbers_match_ring_h),
        cmocka_unit_test(test_every_message_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
