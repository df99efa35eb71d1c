/* test_proto.c: the protobuf schemas through protobuf-c, for real: the
 * bridge's (proto/) and the built-in grains' (grains/<name>/<name>.proto).
 *
 * Every message type of every .proto file there is packed with its typed
 * *__pack, unpacked with *__unpack, compared field by field and freed with
 * *__free_unpacked. Each round trip also
 *   - repacks the decoded message and expects the very same bytes,
 *   - decodes every prefix of the encoding from an exactly sized heap copy
 *     (so ASan sees any over-read) and expects the one-byte-short prefix to
 *     fail: the last byte always belongs to the last field,
 *   - decodes byte-flipped copies, which must either fail or free cleanly.
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
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.pb-c.h"
#include "echo.pb-c.h"
#include "gpubridge.pb-c.h"
#include "pagerank.pb-c.h"
#include "vecadd.pb-c.h"

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
    /* vecadd.proto */
    &gpubridge__vector_add_request__descriptor,
    &gpubridge__vector_add_response__descriptor,
    /* echo.proto */
    &gpubridge__echo_request__descriptor,
    &gpubridge__echo_response__descriptor,
    /* pagerank.proto */
    &gpubridge__start_iteration_command__descriptor,
    &gpubridge__node_rank_update__descriptor,
    &gpubridge__page_rank_contribution__descriptor,
    &gpubridge__rank_aggregation_result__descriptor,
    &gpubridge__graph_edge_info__descriptor,
    &gpubridge__node_rank_update_batch__descriptor,
    &gpubridge__page_rank_contribution_batch__descriptor,
    &gpubridge__graph_edge_info_batch__descriptor,
    &gpubridge__graph_init__descriptor,
    &gpubridge__partition_init__descriptor,
    &gpubridge__out_degree_chunk__descriptor,
    &gpubridge__in_offset_chunk__descriptor,
    &gpubridge__in_edge_chunk__descriptor,
    &gpubridge__rank_query__descriptor,
    &gpubridge__job_end__descriptor,
};
#define N_DESCRIPTORS (sizeof all_descriptors / sizeof all_descriptors[0])

/* Which descriptors went through ROUND_TRIP (tests run in order, in one
 * process; the last test checks that all did). */
static int round_tripped[N_DESCRIPTORS];

static void note_round_trip(const ProtobufCMessageDescriptor *d)
{
    for (size_t i = 0; i < N_DESCRIPTORS; i++) {
        if (all_descriptors[i] == d) {
            round_tripped[i] = 1;
            return;
        }
    }
    fail_msg("%s is missing from all_descriptors", d->name);
}

/* Decodes len bytes of data from an exactly sized heap copy: any read past
 * the end is a heap overflow that ASan reports. */
static ProtobufCMessage *unpack_exact(const ProtobufCMessageDescriptor *d, const uint8_t *data,
                                     size_t len)
{
    static const uint8_t nothing[1];
    if (len == 0)
        return protobuf_c_message_unpack(d, NULL, 0, nothing);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, data, len);
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, copy);
    free(copy);
    return m;
}

/* Packing the decoded message again gives the same bytes. */
static void check_repack(const ProtobufCMessage *m, const uint8_t *want, size_t n)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    assert_int_equal(len, n);
    uint8_t *buf = malloc(len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), len);
    if (len > 0)
        assert_memory_equal(buf, want, len);
    free(buf);
}

/* Every prefix decodes or fails without harm; the prefix one byte short always
 * fails. Long encodings are sampled (about 1000 cuts plus the last 64). */
static void check_truncations(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t n)
{
    size_t stride = n > 2048 ? n / 1024 : 1;
    for (size_t k = 0; k < n; k++) {
        if (k % stride != 0 && k + 64 < n)
            continue;
        ProtobufCMessage *m = unpack_exact(d, buf, k);
        if (k + 1 == n && m != NULL)
            fail_msg("%s: %zu of %zu bytes decoded", d->name, k, n);
        if (m)
            protobuf_c_message_free_unpacked(m, NULL);
    }
}

/* Single-byte corruptions of the first 256 bytes: decode or fail, never crash
 * or leak. */
static void check_mutations(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t n)
{
    static const uint8_t xors[] = {0xFF, 0x80, 0x01, 0x07};
    size_t lim = n < 256 ? n : 256;
    uint8_t *copy = malloc(n + 1);
    assert_non_null(copy);
    for (size_t i = 0; i < lim; i++) {
        for (size_t x = 0; x < sizeof xors; x++) {
            memcpy(copy, buf, n);
            copy[i] ^= xors[x];
            ProtobufCMessage *m = unpack_exact(d, copy, n);
            if (m)
                protobuf_c_message_free_unpacked(m, NULL);
        }
    }
    free(copy);
}

/* Packs *in with prefix##__pack, decodes with prefix##__unpack into out (the
 * caller compares and frees it with prefix##__free_unpacked), and runs the
 * generic checks above on the encoding. */
#define ROUND_TRIP(prefix, in, out)                                                 \
    do {                                                                            \
        size_t rt_len = prefix##__get_packed_size(in);                              \
        uint8_t *rt_buf = malloc(rt_len + 1);                                       \
        assert_non_null(rt_buf);                                                    \
        assert_int_equal(prefix##__pack((in), rt_buf), rt_len);                     \
        (out) = prefix##__unpack(NULL, rt_len, rt_buf);                             \
        assert_non_null(out);                                                       \
        assert_true(protobuf_c_message_check(&(out)->base));                        \
        check_repack(&(out)->base, rt_buf, rt_len);                                 \
        check_truncations((in)->base.descriptor, rt_buf, rt_len);                   \
        check_mutations((in)->base.descriptor, rt_buf, rt_len);                     \
        note_round_trip((in)->base.descriptor);                                     \
        free(rt_buf);                                                               \
    } while (0)

/* Packs m into a new buffer (free it); *len gets the size. */
static uint8_t *pack_new(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Field comparisons.                                                        */

static const char *str_or_empty(const char *s) { return s ? s : ""; }

static void assert_str_eq(const char *a, const char *b)
{
    assert_string_equal(str_or_empty(a), str_or_empty(b));
}

static void assert_bytes_eq(ProtobufCBinaryData a, ProtobufCBinaryData b)
{
    assert_int_equal(a.len, b.len);
    if (a.len > 0)
        assert_memory_equal(a.data, b.data, a.len);
}

/* Bitwise, so NaN payloads and -0.0 count. */
static void assert_floats_eq(const float *a, size_t na, const float *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

static void assert_doubles_eq(const double *a, size_t na, const double *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

static void assert_double_bits(double a, double b) { assert_doubles_eq(&a, 1, &b, 1); }

static void assert_u64s_eq(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

static void assert_u32s_eq(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

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

static void cmp_node_rank_update(const Gpubridge__NodeRankUpdate *a,
                                 const Gpubridge__NodeRankUpdate *b)
{
    assert_int_equal(a->node_id, b->node_id);
    assert_double_bits(a->rank, b->rank);
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
/* vecadd.proto                                                              */

static void test_vecadd(void **state)
{
    (void)state;
    float a[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, FLT_MIN,
                 FLT_TRUE_MIN, 1.5f};
    float b[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 0.0f};
    const size_t n = sizeof a / sizeof a[0];
    for (int op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_ADD;
         op <= GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_DIV; op++) {
        Gpubridge__VectorAddRequest in = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT, *out;
        in.op = (Gpubridge__VectorAddRequest__Op)op;
        in.n_a = n;
        in.a = a;
        in.n_b = n;
        in.b = b;
        ROUND_TRIP(gpubridge__vector_add_request, &in, out);
        assert_int_equal(out->op, op);
        assert_floats_eq(a, n, out->a, out->n_a);
        assert_floats_eq(b, n, out->b, out->n_b);
        gpubridge__vector_add_request__free_unpacked(out, NULL);
    }

    /* Packed on the wire: op(2) + a: tag, len, 4n + b: tag, len, 4n. */
    Gpubridge__VectorAddRequest in = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT, *out;
    in.op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_SUB;
    in.n_a = n;
    in.a = a;
    in.n_b = n;
    in.b = b;
    assert_int_equal(gpubridge__vector_add_request__get_packed_size(&in), 2 + 2 * (2 + 4 * n));

    /* Empty vectors (and lengths that differ: the wire allows it, the handler
     * rejects it). */
    in.n_a = 0;
    in.a = NULL;
    ROUND_TRIP(gpubridge__vector_add_request, &in, out);
    assert_int_equal(out->n_a, 0);
    assert_floats_eq(b, n, out->b, out->n_b);
    gpubridge__vector_add_request__free_unpacked(out, NULL);
    in.n_b = 0;
    in.b = NULL;
    in.op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_ADD;
    assert_int_equal(gpubridge__vector_add_request__get_packed_size(&in), 0);
    ROUND_TRIP(gpubridge__vector_add_request, &in, out);
    assert_int_equal(out->op, GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_ADD);
    assert_int_equal(out->n_a, 0);
    assert_int_equal(out->n_b, 0);
    gpubridge__vector_add_request__free_unpacked(out, NULL);

    /* Parsers must take unpacked repeated scalars too (Python may send
     * either): a = [1, 2] unpacked, then [3] packed, appends. */
    static const uint8_t mixed[] = {0x15, 0x00, 0x00, 0x80, 0x3f, 0x15, 0x00, 0x00, 0x00, 0x40,
                                    0x12, 0x04, 0x00, 0x00, 0x40, 0x40};
    out = gpubridge__vector_add_request__unpack(NULL, sizeof mixed, mixed);
    assert_non_null(out);
    const float want[] = {1.0f, 2.0f, 3.0f};
    assert_floats_eq(want, 3, out->a, out->n_a);
    gpubridge__vector_add_request__free_unpacked(out, NULL);

    /* An op this build does not know survives (the handler must reject it). */
    static const uint8_t op1000[] = {0x08, 0xE8, 0x07};
    out = gpubridge__vector_add_request__unpack(NULL, sizeof op1000, op1000);
    assert_non_null(out);
    assert_int_equal(out->op, 1000);
    gpubridge__vector_add_request__free_unpacked(out, NULL);

    /* Response: full, large and empty. */
    Gpubridge__VectorAddResponse rin = GPUBRIDGE__VECTOR_ADD_RESPONSE__INIT, *rout;
    rin.n_result = n;
    rin.result = a;
    ROUND_TRIP(gpubridge__vector_add_response, &rin, rout);
    assert_floats_eq(a, n, rout->result, rout->n_result);
    gpubridge__vector_add_response__free_unpacked(rout, NULL);
    enum { BIG = 100000 };
    float *big = malloc(BIG * sizeof *big);
    assert_non_null(big);
    for (size_t i = 0; i < BIG; i++)
        big[i] = (float)i * 0.25f - 1000.0f;
    rin.n_result = BIG;
    rin.result = big;
    ROUND_TRIP(gpubridge__vector_add_response, &rin, rout);
    assert_floats_eq(big, BIG, rout->result, rout->n_result);
    gpubridge__vector_add_response__free_unpacked(rout, NULL);
    free(big);
    rin.n_result = 0;
    rin.result = NULL;
    ROUND_TRIP(gpubridge__vector_add_response, &rin, rout);
    assert_int_equal(rout->n_result, 0);
    gpubridge__vector_add_response__free_unpacked(rout, NULL);
}

/* ------------------------------------------------------------------------ */
/* echo.proto                                                                */

static void test_echo(void **state)
{
    (void)state;
    enum { DATA = 65536 };
    uint8_t *data = malloc(DATA);
    assert_non_null(data);
    for (size_t i = 0; i < DATA; i++)
        data[i] = (uint8_t)(i ^ (i >> 8));

    Gpubridge__EchoRequest in = GPUBRIDGE__ECHO_REQUEST__INIT, *out;
    in.sequence = UINT64_MAX;
    in.data.len = DATA;
    in.data.data = data;
    in.client_time_ns = UINT64_MAX - 1;
    ROUND_TRIP(gpubridge__echo_request, &in, out);
    assert_int_equal(out->sequence, in.sequence);
    assert_bytes_eq(in.data, out->data);
    assert_int_equal(out->client_time_ns, in.client_time_ns);
    gpubridge__echo_request__free_unpacked(out, NULL);

    in.data.len = 0; /* empty data */
    in.data.data = NULL;
    in.sequence = 1;
    ROUND_TRIP(gpubridge__echo_request, &in, out);
    assert_int_equal(out->sequence, 1);
    assert_int_equal(out->data.len, 0);
    gpubridge__echo_request__free_unpacked(out, NULL);

    Gpubridge__EchoResponse rin = GPUBRIDGE__ECHO_RESPONSE__INIT, *rout;
    rin.sequence = 12345;
    rin.data.len = 1000;
    rin.data.data = data;
    rin.client_time_ns = 1700000000123456789ull;
    rin.grain_count = UINT64_MAX;
    ROUND_TRIP(gpubridge__echo_response, &rin, rout);
    assert_int_equal(rout->sequence, rin.sequence);
    assert_bytes_eq(rin.data, rout->data);
    assert_int_equal(rout->client_time_ns, rin.client_time_ns);
    assert_int_equal(rout->grain_count, rin.grain_count);
    gpubridge__echo_response__free_unpacked(rout, NULL);

    /* Schema evolution: an EchoResponse read as an EchoRequest keeps the
     * shared fields and carries grain_count as an unknown field, which is
     * packed again unchanged. */
    size_t len;
    uint8_t *bytes = pack_new(&rin.base, &len);
    out = gpubridge__echo_request__unpack(NULL, len, bytes);
    assert_non_null(out);
    assert_int_equal(out->sequence, rin.sequence);
    assert_bytes_eq(rin.data, out->data);
    assert_int_equal(out->client_time_ns, rin.client_time_ns);
    assert_int_equal(out->base.n_unknown_fields, 1);
    check_repack(&out->base, bytes, len);
    gpubridge__echo_request__free_unpacked(out, NULL);
    free(bytes);
    free(data);
}

/* ------------------------------------------------------------------------ */
/* pagerank.proto                                                            */

static void test_pagerank_single(void **state)
{
    (void)state;
    Gpubridge__StartIterationCommand sic = GPUBRIDGE__START_ITERATION_COMMAND__INIT, *sico;
    sic.iteration = UINT32_MAX;
    sic.damping = 0.85;
    sic.tolerance = 1e-12;
    sic.node_count = UINT64_MAX;
    sic.dangling_rank = DBL_MIN;
    sic.report_ranks = 1;
    ROUND_TRIP(gpubridge__start_iteration_command, &sic, sico);
    assert_int_equal(sico->iteration, sic.iteration);
    assert_double_bits(sico->damping, sic.damping);
    assert_double_bits(sico->tolerance, sic.tolerance);
    assert_int_equal(sico->node_count, sic.node_count);
    assert_double_bits(sico->dangling_rank, sic.dangling_rank);
    assert_int_equal(sico->report_ranks, 1);
    gpubridge__start_iteration_command__free_unpacked(sico, NULL);

    Gpubridge__NodeRankUpdate nru = GPUBRIDGE__NODE_RANK_UPDATE__INIT, *nruo;
    nru.node_id = UINT64_MAX;
    nru.rank = 1.0 / 3.0;
    ROUND_TRIP(gpubridge__node_rank_update, &nru, nruo);
    cmp_node_rank_update(&nru, nruo);
    gpubridge__node_rank_update__free_unpacked(nruo, NULL);
    nru.node_id = 0; /* a zero rank with node 0 is all defaults but still valid */
    nru.rank = -0.0;
    ROUND_TRIP(gpubridge__node_rank_update, &nru, nruo);
    assert_int_equal(nruo->node_id, 0);
    assert_true(nruo->rank == 0.0);
    gpubridge__node_rank_update__free_unpacked(nruo, NULL);

    Gpubridge__PageRankContribution prc = GPUBRIDGE__PAGE_RANK_CONTRIBUTION__INIT, *prco;
    prc.target_node = UINT64_MAX;
    prc.contribution = DBL_MAX;
    prc.iteration = 17;
    ROUND_TRIP(gpubridge__page_rank_contribution, &prc, prco);
    assert_int_equal(prco->target_node, prc.target_node);
    assert_double_bits(prco->contribution, prc.contribution);
    assert_int_equal(prco->iteration, prc.iteration);
    gpubridge__page_rank_contribution__free_unpacked(prco, NULL);

    Gpubridge__RankAggregationResult rar = GPUBRIDGE__RANK_AGGREGATION_RESULT__INIT, *raro;
    rar.iteration = 3;
    rar.l1_delta = 1.25e-7;
    rar.nodes = UINT64_MAX;
    ROUND_TRIP(gpubridge__rank_aggregation_result, &rar, raro); /* no ranks */
    assert_int_equal(raro->iteration, 3);
    assert_double_bits(raro->l1_delta, rar.l1_delta);
    assert_int_equal(raro->nodes, UINT64_MAX);
    assert_int_equal(raro->n_ranks, 0);
    gpubridge__rank_aggregation_result__free_unpacked(raro, NULL);
    enum { NR = 100 };
    Gpubridge__NodeRankUpdate ranks[NR];
    Gpubridge__NodeRankUpdate *rankp[NR];
    for (size_t i = 0; i < NR; i++) {
        Gpubridge__NodeRankUpdate r = GPUBRIDGE__NODE_RANK_UPDATE__INIT;
        ranks[i] = r;
        ranks[i].node_id = i == 0 ? UINT64_MAX : i * 1000003u;
        ranks[i].rank = 1.0 / (double)(i + 1);
        rankp[i] = &ranks[i];
    }
    rar.n_ranks = NR;
    rar.ranks = rankp;
    ROUND_TRIP(gpubridge__rank_aggregation_result, &rar, raro);
    assert_int_equal(raro->n_ranks, NR);
    for (size_t i = 0; i < NR; i++)
        cmp_node_rank_update(&ranks[i], raro->ranks[i]);
    gpubridge__rank_aggregation_result__free_unpacked(raro, NULL);

    Gpubridge__GraphEdgeInfo gei = GPUBRIDGE__GRAPH_EDGE_INFO__INIT, *geio;
    uint64_t targets[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
    gei.source = UINT64_MAX;
    gei.n_targets = sizeof targets / sizeof targets[0];
    gei.targets = targets;
    gei.out_degree = UINT32_MAX; /* a partial list: the full degree is larger */
    ROUND_TRIP(gpubridge__graph_edge_info, &gei, geio);
    assert_int_equal(geio->source, gei.source);
    assert_u64s_eq(targets, gei.n_targets, geio->targets, geio->n_targets);
    assert_int_equal(geio->out_degree, gei.out_degree);
    gpubridge__graph_edge_info__free_unpacked(geio, NULL);
    gei.source = 5; /* dangling vertex: no targets, out-degree 0 */
    gei.n_targets = 0;
    gei.targets = NULL;
    gei.out_degree = 0;
    ROUND_TRIP(gpubridge__graph_edge_info, &gei, geio);
    assert_int_equal(geio->source, 5);
    assert_int_equal(geio->n_targets, 0);
    assert_int_equal(geio->out_degree, 0);
    gpubridge__graph_edge_info__free_unpacked(geio, NULL);
}

static void test_pagerank_batches(void **state)
{
    (void)state;
    enum { N = 10000 };
    uint64_t *ids = malloc(N * sizeof *ids);
    double *vals = malloc(N * sizeof *vals);
    uint32_t *degs = malloc(N * sizeof *degs);
    uint32_t *counts = malloc(N * sizeof *counts);
    uint64_t *targets = malloc(3 * N * sizeof *targets);
    assert_non_null(ids);
    assert_non_null(vals);
    assert_non_null(degs);
    assert_non_null(counts);
    assert_non_null(targets);
    size_t nt = 0;
    for (size_t i = 0; i < N; i++) {
        ids[i] = i == N - 1 ? UINT64_MAX : (uint64_t)i * 2654435761u;
        vals[i] = i == 0 ? 0.0 : 1.0 / (double)i;
        counts[i] = (uint32_t)(i % 4);
        degs[i] = counts[i] + (uint32_t)(i % 2);
        for (uint32_t k = 0; k < counts[i]; k++)
            targets[nt++] = (ids[i] + k) ^ 0x5555;
    }

    /* Empty, then full. */
    Gpubridge__NodeRankUpdateBatch nb = GPUBRIDGE__NODE_RANK_UPDATE_BATCH__INIT, *nbo;
    ROUND_TRIP(gpubridge__node_rank_update_batch, &nb, nbo);
    assert_int_equal(nbo->n_node_ids, 0);
    assert_int_equal(nbo->n_ranks, 0);
    gpubridge__node_rank_update_batch__free_unpacked(nbo, NULL);
    nb.iteration = UINT32_MAX;
    nb.n_node_ids = N;
    nb.node_ids = ids;
    nb.n_ranks = N;
    nb.ranks = vals;
    ROUND_TRIP(gpubridge__node_rank_update_batch, &nb, nbo);
    assert_int_equal(nbo->iteration, UINT32_MAX);
    assert_u64s_eq(ids, N, nbo->node_ids, nbo->n_node_ids);
    assert_doubles_eq(vals, N, nbo->ranks, nbo->n_ranks);
    gpubridge__node_rank_update_batch__free_unpacked(nbo, NULL);
    /* Packed: one tag and length for the whole array, then 8 bytes a double
     * (unpacked would cost a tag per element). */
    Gpubridge__NodeRankUpdateBatch only_ranks = GPUBRIDGE__NODE_RANK_UPDATE_BATCH__INIT;
    only_ranks.n_ranks = N;
    only_ranks.ranks = vals;
    assert_int_equal(gpubridge__node_rank_update_batch__get_packed_size(&only_ranks),
                     1 + 3 + 8 * (size_t)N);

    Gpubridge__PageRankContributionBatch cb = GPUBRIDGE__PAGE_RANK_CONTRIBUTION_BATCH__INIT, *cbo;
    ROUND_TRIP(gpubridge__page_rank_contribution_batch, &cb, cbo);
    assert_int_equal(cbo->n_target_nodes, 0);
    assert_int_equal(cbo->n_contributions, 0);
    gpubridge__page_rank_contribution_batch__free_unpacked(cbo, NULL);
    cb.iteration = 9;
    cb.n_target_nodes = N;
    cb.target_nodes = ids;
    cb.n_contributions = N - 1; /* unequal lengths pass the wire; the handler rejects them */
    cb.contributions = vals;
    ROUND_TRIP(gpubridge__page_rank_contribution_batch, &cb, cbo);
    assert_int_equal(cbo->iteration, 9);
    assert_u64s_eq(ids, N, cbo->target_nodes, cbo->n_target_nodes);
    assert_doubles_eq(vals, N - 1, cbo->contributions, cbo->n_contributions);
    gpubridge__page_rank_contribution_batch__free_unpacked(cbo, NULL);

    Gpubridge__GraphEdgeInfoBatch eb = GPUBRIDGE__GRAPH_EDGE_INFO_BATCH__INIT, *ebo;
    ROUND_TRIP(gpubridge__graph_edge_info_batch, &eb, ebo);
    assert_int_equal(ebo->n_sources, 0);
    assert_int_equal(ebo->n_targets, 0);
    gpubridge__graph_edge_info_batch__free_unpacked(ebo, NULL);
    eb.n_sources = N;
    eb.sources = ids;
    eb.n_out_degrees = N;
    eb.out_degrees = degs;
    eb.n_target_counts = N;
    eb.target_counts = counts;
    eb.n_targets = nt;
    eb.targets = targets;
    ROUND_TRIP(gpubridge__graph_edge_info_batch, &eb, ebo);
    assert_u64s_eq(ids, N, ebo->sources, ebo->n_sources);
    assert_u32s_eq(degs, N, ebo->out_degrees, ebo->n_out_degrees);
    assert_u32s_eq(counts, N, ebo->target_counts, ebo->n_target_counts);
    assert_u64s_eq(targets, nt, ebo->targets, ebo->n_targets);
    gpubridge__graph_edge_info_batch__free_unpacked(ebo, NULL);

    free(ids);
    free(vals);
    free(degs);
    free(counts);
    free(targets);
}

/* The loading and query messages of the bridge's PageRank grains. */
static void test_pagerank_loading(void **state)
{
    (void)state;
    Gpubridge__GraphInit gi = GPUBRIDGE__GRAPH_INIT__INIT, *gio;
    gi.node_count = 4194304;
    gi.edge_count = UINT64_MAX;
    gi.new_job = 1;
    ROUND_TRIP(gpubridge__graph_init, &gi, gio);
    assert_int_equal(gio->node_count, gi.node_count);
    assert_true(gio->edge_count == UINT64_MAX);
    assert_true(gio->new_job);
    gpubridge__graph_init__free_unpacked(gio, NULL);

    Gpubridge__PartitionInit pi = GPUBRIDGE__PARTITION_INIT__INIT, *pio;
    pi.first_node = 12345;
    pi.node_count = 678;
    ROUND_TRIP(gpubridge__partition_init, &pi, pio);
    assert_int_equal(pio->first_node, 12345);
    assert_int_equal(pio->node_count, 678);
    gpubridge__partition_init__free_unpacked(pio, NULL);

    uint32_t degs[] = {0, 1, 7, UINT32_MAX};
    Gpubridge__OutDegreeChunk oc = GPUBRIDGE__OUT_DEGREE_CHUNK__INIT, *oco;
    oc.first_node = 9;
    oc.n_out_degrees = 4;
    oc.out_degrees = degs;
    ROUND_TRIP(gpubridge__out_degree_chunk, &oc, oco);
    assert_int_equal(oco->first_node, 9);
    assert_u32s_eq(degs, 4, oco->out_degrees, oco->n_out_degrees);
    gpubridge__out_degree_chunk__free_unpacked(oco, NULL);

    uint64_t offs[] = {0, 3, 3, UINT64_MAX};
    Gpubridge__InOffsetChunk ic = GPUBRIDGE__IN_OFFSET_CHUNK__INIT, *ico;
    ic.first_node = 1;
    ic.n_offsets = 4;
    ic.offsets = offs;
    ROUND_TRIP(gpubridge__in_offset_chunk, &ic, ico);
    assert_int_equal(ico->first_node, 1);
    assert_u64s_eq(offs, 4, ico->offsets, ico->n_offsets);
    gpubridge__in_offset_chunk__free_unpacked(ico, NULL);

    uint32_t srcs[] = {5, 0, 5, 1u << 31};
    Gpubridge__InEdgeChunk ec = GPUBRIDGE__IN_EDGE_CHUNK__INIT, *eco;
    ec.first_edge = 1ull << 33;
    ec.n_sources = 4;
    ec.sources = srcs;
    ROUND_TRIP(gpubridge__in_edge_chunk, &ec, eco);
    assert_true(eco->first_edge == 1ull << 33);
    assert_u32s_eq(srcs, 4, eco->sources, eco->n_sources);
    gpubridge__in_edge_chunk__free_unpacked(eco, NULL);

    Gpubridge__RankQuery rq = GPUBRIDGE__RANK_QUERY__INIT, *rqo;
    rq.first_node = 77;
    rq.count = 4000;
    ROUND_TRIP(gpubridge__rank_query, &rq, rqo);
    assert_int_equal(rqo->first_node, 77);
    assert_int_equal(rqo->count, 4000);
    gpubridge__rank_query__free_unpacked(rqo, NULL);

    Gpubridge__JobEnd je = GPUBRIDGE__JOB_END__INIT, *jeo;
    ROUND_TRIP(gpubridge__job_end, &je, jeo);
    gpubridge__job_end__free_unpacked(jeo, NULL);
}

/* ------------------------------------------------------------------------ */
/* Negative tests                                                            */

/* Hand-made malformed encodings that every decoder must refuse. */
static void test_garbage_refused(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
    } any[] = {
        {"wire type 7", {0x0F}, 1},
        {"wire type 6", {0x0E}, 1},
        {"group (wire type 3)", {0x4B, 0x4C}, 2},
        {"field number 0", {0x00, 0x01}, 2},
        {"tag varint of 11 bytes", {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}, 11},
        {"tag only", {0x08}, 1},
        {"unterminated varint", {0x08, 0x80}, 2},
        {"length past the end", {0x0A, 0x05, 'a'}, 3},
        {"length 2^63", {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, 10},
        {"fixed64 cut short", {0x09, 1, 2, 3}, 4},
        {"fixed32 cut short", {0x0D, 1, 2}, 3},
        {"unknown field, length past the end", {0xFA, 0x3F, 0x10, 1, 2}, 5},
    };
    for (size_t d = 0; d < N_DESCRIPTORS; d++) {
        for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
            ProtobufCMessage *m = unpack_exact(all_descriptors[d], any[i].bytes, any[i].len);
            if (m) {
                protobuf_c_message_free_unpacked(m, NULL);
                fail_msg("%s decoded \"%s\"", all_descriptors[d]->name, any[i].what);
            }
        }
    }

    /* Schema-specific: the typed decoders of the wire and grain messages. */
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

    static const uint8_t floats_len3[] = {0x12, 0x03, 1, 2, 3}; /* packed floats, 3 bytes */
    assert_null(gpubridge__vector_add_request__unpack(NULL, sizeof floats_len3, floats_len3));
    static const uint8_t result_len7[] = {0x0A, 0x07, 1, 2, 3, 4, 5, 6, 7};
    assert_null(gpubridge__vector_add_response__unpack(NULL, sizeof result_len7, result_len7));
    static const uint8_t doubles_len12[] = {0x1A, 0x0C, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_null(gpubridge__node_rank_update_batch__unpack(NULL, sizeof doubles_len12, doubles_len12));
    static const uint8_t varints_cut[] = {0x12, 0x02, 0x01, 0x80}; /* packed uint64, last cut */
    assert_null(gpubridge__graph_edge_info__unpack(NULL, sizeof varints_cut, varints_cut));
    static const uint8_t rank_short[] = {0x11, 0, 0, 0, 0, 0, 0, 0xF0}; /* double, 7 bytes */
    assert_null(gpubridge__node_rank_update__unpack(NULL, sizeof rank_short, rank_short));
    static const uint8_t echo_data_cut[] = {0x08, 0x01, 0x12, 0x10, 'h', 'i'};
    assert_null(gpubridge__echo_request__unpack(NULL, sizeof echo_data_cut, echo_data_cut));
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Random bytes into every decoder: any result, no crash, no leak. */
static void test_random_garbage(void **state)
{
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    uint8_t buf[96];
    size_t decoded = 0, refused = 0;
    for (size_t d = 0; d < N_DESCRIPTORS; d++) {
        for (int round = 0; round < 2000; round++) {
            size_t len = (size_t)(xorshift(&x) % sizeof buf);
            for (size_t i = 0; i < len; i++) {
                uint64_t r = xorshift(&x);
                buf[i] = (uint8_t)(r >> 24);
                /* Small field numbers with valid wire types now and then, so
                 * the decoders get past the first tag. */
                if (i == 0 && (r & 1))
                    buf[i] = (uint8_t)((((r >> 8) % 8 + 1) << 3) | ((r >> 16) % 3));
            }
            ProtobufCMessage *m = unpack_exact(all_descriptors[d], buf, len);
            if (m) {
                decoded++;
                protobuf_c_message_free_unpacked(m, NULL);
            } else {
                refused++;
            }
        }
    }
    assert_true(refused > 0);
    print_message("random garbage: %zu decoded, %zu refused\n", decoded, refused);
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
    /* Grain message types fit the slot's 16-bit type below the reserved range. */
    assert_true((int)GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_EDGE_INFO_BATCH <
                (int)GB_MSG_DEACTIVATE_KEY);
    /* The Status numbers clients already use. */
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_MALFORMED, 1);
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_BUSY, 8);
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_INTERNAL, 10);
    assert_int_equal(GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN, 13);
}

/* Counts the `message X` lines of the .proto files in dir (nested ones
 * included) and fails on one that is not in all_descriptors. */
static size_t messages_of_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return 0;
    size_t messages = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 7 || strcmp(de->d_name + n - 6, ".proto") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char name[128];
            if (sscanf(line, " message %127[A-Za-z0-9_]", name) != 1)
                continue;
            messages++;
            int found = 0;
            for (size_t i = 0; i < N_DESCRIPTORS; i++)
                found |= strcmp(all_descriptors[i]->short_name, name) == 0;
            if (!found)
                fail_msg("%s: message %s has no round-trip test", path, name);
        }
        fclose(f);
    }
    closedir(dp);
    return messages;
}

/* Every `message X` in the .proto files of proto/ and of each grain's folder
 * (grains/<name>/) is in all_descriptors, and every descriptor there went
 * through ROUND_TRIP. */
static void test_every_message_covered(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_DESCRIPTORS; i++) {
        if (!round_tripped[i])
            fail_msg("%s was never round-tripped", all_descriptors[i]->name);
    }

    const char *src = getenv("GB_SOURCE_DIR");
    if (src == NULL) {
        print_message("GB_SOURCE_DIR unset: schema coverage not checked\n");
        return;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/proto", src);
    size_t messages = messages_of_dir(dir);
    assert_true(messages > 0);
    snprintf(dir, sizeof dir, "%s/grains", src);
    DIR *gp = opendir(dir);
    assert_non_null(gp);
    struct dirent *de;
    size_t grain_messages = 0;
    while ((de = readdir(gp)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        grain_messages += messages_of_dir(sub);
    }
    closedir(gp);
    assert_true(grain_messages > 0);
    assert_int_equal(messages + grain_messages, N_DESCRIPTORS);
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
        cmocka_unit_test(test_vecadd),
        cmocka_unit_test(test_echo),
        cmocka_unit_test(test_pagerank_single),
        cmocka_unit_test(test_pagerank_batches),
        cmocka_unit_test(test_pagerank_loading),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(test_random_garbage),
        cmocka_unit_test(test_numbers_match_ring_h),
        cmocka_unit_test(test_every_message_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
