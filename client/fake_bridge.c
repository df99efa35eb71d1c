/* fake_bridge.c: the fake bridge of test_client.c.
 *
 * A fake bridge is a ROUTER socket on an ipc endpoint served by a thread. It
 * decodes every ClientFrame and answers like a bridge would:
 *   "test"    OK, payload echoed back, message_type + 1
 *   "vecadd"  VectorAdd as vecadd.proto says (IEEE division; MALFORMED for
 *             unequal lengths; TOO_LARGE over 3 elements, the 64-byte slot)
 *   "echo"    EchoResponse with a per-key count
 *   "silent"  never answers
 *   "garbage" an undecodable frame first, then an OK reply
 *   control   GrainTypeStatus / Telemetry / GrainTypeList / DetectReport
 *   others    STATUS_UNKNOWN_GRAIN_TYPE with a text
 * Replies to a Batch come back in two ReplyBatch frames, second half first,
 * so the client must match by correlation id. The fake counts frames and
 * checks that correlation ids arrive strictly increasing (the order of one
 * client's requests on one endpoint is kept). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "control.pb-c.h"
#include "echo.pb-c.h"
#include "fake_bridge.h"
#include "gpubridge.pb-c.h"
#include "vecadd.pb-c.h"

/* cmocka's asserts jump back into the test; the fake runs in its own thread. */
#define FAKE_CHECK(x)                                                   \
    do {                                                                \
        if (!(x)) {                                                     \
            fprintf(stderr, "fake bridge: check failed: %s\n", #x);     \
            abort();                                                    \
        }                                                               \
    } while (0)

/* ------------------------------------------------------------------------ */
/* The fake bridge.                                                          */


static int g_seq;


void endpoint_name(char *buf, size_t len)
{
    snprintf(buf, len, "ipc:///tmp/gbc-test-%d-%d.sock", (int)getpid(), g_seq++);
}

static void send_frame(fake_t *f, zmq_msg_t *id, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    FAKE_CHECK(buf);
    protobuf_c_message_pack(msg, buf);
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, id);
    zmq_msg_send(&copy, f->sock, ZMQ_SNDMORE);
    zmq_send(f->sock, buf, len, 0);
    free(buf);
}

static void set_payload(Gpubridge__Reply *r, const ProtobufCMessage *msg, uint32_t type)
{
    r->payload.len = protobuf_c_message_get_packed_size(msg);
    r->payload.data = malloc(r->payload.len ? r->payload.len : 1);
    protobuf_c_message_pack(msg, r->payload.data);
    r->message_type = type;
}

static void control_reply(const Gpubridge__Control *ctl, Gpubridge__Reply *r)
{
    Gpubridge__GrainTypeStatus st = GPUBRIDGE__GRAIN_TYPE_STATUS__INIT;
    st.mode = "cpu";
    st.placement = GPUBRIDGE__PLACEMENT__PLACEMENT_HOST;
    st.device = -1;
    st.queue_capacity = 1024;
    st.slot_size = 64;
    st.lanes = 3;
    const uint32_t status_type = GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS;
    switch (ctl ? ctl->op_case : GPUBRIDGE__CONTROL__OP__NOT_SET) {
    case GPUBRIDGE__CONTROL__OP_ACTIVATE:
        st.grain_type = ctl->activate->grain_type;
        st.state = GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_ACTIVE;
        set_payload(r, &st.base, status_type);
        break;
    case GPUBRIDGE__CONTROL__OP_DEACTIVATE:
        st.grain_type = ctl->deactivate->grain_type;
        st.state = GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_INACTIVE;
        set_payload(r, &st.base, status_type);
        break;
    case GPUBRIDGE__CONTROL__OP_TERMINATE:
        st.grain_type = ctl->terminate->grain_type;
        st.state = GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_TERMINATED;
        st.exit_reason = GPUBRIDGE__EXIT_REASON__EXIT_REASON_TERMINATED;
        set_payload(r, &st.base, status_type);
        break;
    case GPUBRIDGE__CONTROL__OP_STATUS_REQUEST:
        st.grain_type = ctl->status_request->grain_type;
        st.state = GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_ACTIVE;
        st.heartbeat = 42;
        set_payload(r, &st.base, status_type);
        break;
    case GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST: {
        Gpubridge__Telemetry t = GPUBRIDGE__TELEMETRY__INIT;
        t.grain_type = ctl->telemetry_request->grain_type;
        t.messages_processed = 1000;
        t.errors = 3;
        t.queue_capacity = 1024;
        set_payload(r, &t.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_TELEMETRY);
        break;
    }
    case GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES: {
        char *names[] = {"echo", "vecadd", "test"};
        Gpubridge__GrainTypeList l = GPUBRIDGE__GRAIN_TYPE_LIST__INIT;
        l.n_grain_types = 3;
        l.grain_types = names;
        set_payload(r, &l.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST);
        break;
    }
    case GPUBRIDGE__CONTROL__OP_DETECT_REQUEST: {
        Gpubridge__DetectReport d = GPUBRIDGE__DETECT_REPORT__INIT;
        d.mode = "cpu";
        d.rule_fired = "no-device -> cpu";
        d.device = -1;
        set_payload(r, &d.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_DETECT_REPORT);
        break;
    }
    case GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST: {
        Gpubridge__MessageTypeLimits m = GPUBRIDGE__MESSAGE_TYPE_LIMITS__INIT, *mp = &m;
        m.message_type = 1;
        m.name = "VectorAddRequest";
        m.max_payload = 65536;
        m.max_elements = 3;
        Gpubridge__GrainTypeLimits g = GPUBRIDGE__GRAIN_TYPE_LIMITS__INIT, *gp = &g;
        g.grain_type = "vecadd";
        g.slot_size = 64;
        g.record_size = 32;
        g.queue_capacity = 1024;
        g.max_grains = 4096;
        g.n_message_types = 1;
        g.message_types = &mp;
        Gpubridge__Limits l = GPUBRIDGE__LIMITS__INIT;
        l.max_message_size = 1u << 20;
        l.hold_bound = 64u << 20;
        l.max_replies_per_frame = 256;
        l.n_grain_types = 1;
        l.grain_types = &gp;
        set_payload(r, &l.base, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_LIMITS);
        break;
    }
    case GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN:
        if (ctl->deactivate_grain->key == 0) {
            r->status = GPUBRIDGE__STATUS__STATUS_NO_ACTIVATION;
            r->error = strdup("no activation");
        }
        break;
    default:
        r->status = GPUBRIDGE__STATUS__STATUS_MISSING_FIELD;
        r->error = strdup("control op missing");
        break;
    }
}

static void vecadd_reply(const Gpubridge__Envelope *e, Gpubridge__Reply *r)
{
    Gpubridge__VectorAddRequest *q =
        gpubridge__vector_add_request__unpack(NULL, e->payload.len, e->payload.data);
    if (!q || q->n_a != q->n_b) {
        r->status = GPUBRIDGE__STATUS__STATUS_MALFORMED;
        r->error = strdup("vector length mismatch");
    } else if (q->n_a > 3) {
        r->status = GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
        r->error = strdup("vectors exceed the vecadd slot (at most 3)");
    } else {
        float res[3] = {0};
        for (size_t i = 0; i < q->n_a; i++) {
            float a = q->a[i], b = q->b[i];
            switch (q->op) {
            case 0: res[i] = a + b; break;
            case 1: res[i] = a - b; break;
            case 2: res[i] = a * b; break;
            default: res[i] = a / b; break;
            }
        }
        Gpubridge__VectorAddResponse resp = GPUBRIDGE__VECTOR_ADD_RESPONSE__INIT;
        resp.n_result = q->n_a;
        resp.result = res;
        set_payload(r, &resp.base, 2);
    }
    if (q)
        gpubridge__vector_add_request__free_unpacked(q, NULL);
}

/* Fills *r for envelope e; false when no reply is due. */
static bool answer(fake_t *f, const Gpubridge__Envelope *e, Gpubridge__Reply *r, bool *garbage)
{
    r->correlation_id = e->correlation_id;
    if (e->kind == GPUBRIDGE__KIND__KIND_CONTROL) {
        control_reply(e->control, r);
        return true;
    }
    const char *type = e->grain ? e->grain->type : "";
    if (strcmp(type, "silent") == 0)
        return false;
    if (strcmp(type, "vecadd") == 0) {
        vecadd_reply(e, r);
    } else if (strcmp(type, "echo") == 0) {
        Gpubridge__EchoRequest *q =
            gpubridge__echo_request__unpack(NULL, e->payload.len, e->payload.data);
        FAKE_CHECK(q);
        Gpubridge__EchoResponse resp = GPUBRIDGE__ECHO_RESPONSE__INIT;
        resp.sequence = q->sequence;
        resp.data = q->data;
        resp.client_time_ns = q->client_time_ns;
        resp.grain_count = ++f->echo_count[e->grain->key % 16];
        set_payload(r, &resp.base, 2);
        gpubridge__echo_request__free_unpacked(q, NULL);
    } else if (strcmp(type, "test") == 0 || strcmp(type, "garbage") == 0) {
        *garbage |= strcmp(type, "garbage") == 0;
        r->payload.len = e->payload.len;
        r->payload.data = malloc(e->payload.len + 1);
        if (e->payload.len)
            memcpy(r->payload.data, e->payload.data, e->payload.len);
        r->message_type = e->message_type + 1;
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "no grain type '%s'", type);
        r->status = GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE;
        r->error = strdup(msg);
    }
    return true;
}

static void free_reply(Gpubridge__Reply *r)
{
    free(r->payload.data);
    if (r->error != protobuf_c_empty_string)
        free(r->error);
}

static void serve_frame(fake_t *f, zmq_msg_t *id, const void *data, size_t len)
{
    if ((int)len > atomic_load(&f->max_frame))
        atomic_store(&f->max_frame, (int)len);
    Gpubridge__ClientFrame *cf = gpubridge__client_frame__unpack(NULL, len, data);
    FAKE_CHECK(cf);
    Gpubridge__Envelope **envs = NULL;
    size_t n = 0;
    if (cf->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE) {
        atomic_fetch_add(&f->frames_envelope, 1);
        envs = &cf->envelope;
        n = 1;
    } else {
        FAKE_CHECK(cf->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_BATCH);
        atomic_fetch_add(&f->frames_batch, 1);
        envs = cf->batch->envelopes;
        n = cf->batch->n_envelopes;
        if ((int)n > atomic_load(&f->max_batch))
            atomic_store(&f->max_batch, (int)n);
    }
    atomic_fetch_add(&f->envelopes, (int)n);
    Gpubridge__Reply *replies = calloc(n, sizeof *replies);
    Gpubridge__Reply **due = calloc(n, sizeof *due);
    size_t n_due = 0;
    bool garbage = false;
    for (size_t i = 0; i < n; i++) {
        if (envs[i]->correlation_id <= f->last_id)
            atomic_fetch_add(&f->bad_order, 1);
        f->last_id = envs[i]->correlation_id;
        gpubridge__reply__init(&replies[i]);
        if (answer(f, envs[i], &replies[i], &garbage))
            due[n_due++] = &replies[i];
    }
    if (garbage) {
        zmq_msg_t copy;
        zmq_msg_init(&copy);
        zmq_msg_copy(&copy, id);
        zmq_msg_send(&copy, f->sock, ZMQ_SNDMORE);
        zmq_send(f->sock, "\xff\xff\xff", 3, 0);
    }
    if (cf->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE && n_due == 1) {
        Gpubridge__ServerFrame sf = GPUBRIDGE__SERVER_FRAME__INIT;
        sf.body_case = GPUBRIDGE__SERVER_FRAME__BODY_REPLY;
        sf.reply = due[0];
        send_frame(f, id, &sf.base);
    } else if (n_due) {
        /* Two ReplyBatch frames, the second half of the replies first. */
        size_t half = n_due / 2;
        Gpubridge__ReplyBatch b1 = GPUBRIDGE__REPLY_BATCH__INIT, b2 = GPUBRIDGE__REPLY_BATCH__INIT;
        b1.replies = due + half;
        b1.n_replies = n_due - half;
        b2.replies = due;
        b2.n_replies = half;
        Gpubridge__ServerFrame sf = GPUBRIDGE__SERVER_FRAME__INIT;
        sf.body_case = GPUBRIDGE__SERVER_FRAME__BODY_BATCH;
        sf.batch = &b1;
        send_frame(f, id, &sf.base);
        if (half) {
            sf.batch = &b2;
            send_frame(f, id, &sf.base);
        }
    }
    for (size_t i = 0; i < n; i++)
        free_reply(&replies[i]);
    free(replies);
    free(due);
    gpubridge__client_frame__free_unpacked(cf, NULL);
}

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    while (!atomic_load(&f->stop)) {
        zmq_pollitem_t it = {f->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 20) <= 0)
            continue;
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, f->sock, 0) >= 0 && zmq_msg_more(&id) &&
            zmq_msg_recv(&body, f->sock, 0) >= 0)
            serve_frame(f, &id, zmq_msg_data(&body), zmq_msg_size(&body));
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return NULL;
}

/* Starts a fake on endpoint (a fresh one when NULL); CURVE when secret_key. */
fake_t *fake_start(const char *endpoint, const char *secret_key)
{
    fake_t *f = calloc(1, sizeof *f);
    FAKE_CHECK(f);
    if (endpoint)
        snprintf(f->endpoint, sizeof f->endpoint, "%s", endpoint);
    else
        endpoint_name(f->endpoint, sizeof f->endpoint);
    f->ctx = zmq_ctx_new();
    f->sock = zmq_socket(f->ctx, ZMQ_ROUTER);
    int zero = 0, one = 1;
    zmq_setsockopt(f->sock, ZMQ_LINGER, &zero, sizeof zero);
    if (secret_key) {
        zmq_setsockopt(f->sock, ZMQ_CURVE_SERVER, &one, sizeof one);
        zmq_setsockopt(f->sock, ZMQ_CURVE_SECRETKEY, secret_key, 41);
    }
    FAKE_CHECK(zmq_bind(f->sock, f->endpoint) == 0);
    FAKE_CHECK(pthread_create(&f->thread, NULL, fake_main, f) == 0);
    return f;
}

void fake_stop(fake_t **pf)
{
    fake_t *f = *pf;
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    zmq_close(f->sock);
    zmq_ctx_term(f->ctx);
    if (strncmp(f->endpoint, "ipc://", 6) == 0)
        unlink(f->endpoint + 6);
    free(f);
    *pf = NULL;
}

