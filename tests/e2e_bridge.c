/* End-to-end tests of the gpubridge daemon over ZeroMQ (see e2e_harness.h):
 * the message-passing test, every kind of bad input (each answered with a
 * clear error while the bridge keeps serving), backpressure with a
 * deactivated grain type under a flooding client, SIGTERM under load with
 * nothing lost, control messages, CURVE accept/reject, and activation
 * collection. */
#include "e2e_harness.h"
#include "gpu_skip.h"

static const char *SMALL_RINGS =
    "grains = ( { type = \"vecadd\"; queue_capacity = 64; slot_size = 128; },\n"
    "           { type = \"echo\"; queue_capacity = 64; slot_size = 64; } );\n"
    "max_message_size = 65536;\n";

static bridge_t g_b;
static void *g_s;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(bridge_start(&g_b, SMALL_RINGS), 0);
    g_s = client_open(g_b.endpoint);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zmq_close(g_s);
    int st = bridge_stop(&g_b, SIGTERM, 20000);
    if (st != 0)
        fprintf(stderr, "bridge exit status %d (log %s)\n", st, g_b.log);
    return st == 0 ? 0 : -1;
}

/* As the seed's MessagePassingTest: add, sub, mul, div, every result checked. */
static void test_message_passing(void **state)
{
    (void)state;
    uint64_t corr = 1;
    for (int op = 0; op < 4; op++) {
        for (int i = 0; i < 50; i++) {
            float a[8], b[8], r[8];
            for (int k = 0; k < 8; k++) {
                a[k] = (float)(i * 8 + k) * 0.5f - 3.0f;
                b[k] = (float)((i + k) % 7) + 0.25f;
            }
            call_vecadd(g_s, corr++, (uint64_t)i, op, a, b, 8, r);
            for (int k = 0; k < 8; k++) {
                float want = op == 0 ? a[k] + b[k] : op == 1 ? a[k] - b[k] : op == 2 ? a[k] * b[k] : a[k] / b[k];
                assert_true(r[k] == want);
            }
        }
    }
}

static Gpubridge__Reply *expect_error(Gpubridge__ServerFrame **f, int status, const char *needle)
{
    Gpubridge__Reply *r = recv_reply(g_s, f, 10000);
    if ((int)r->status != status)
        fail_msg("expected status %d, got %d (%s)", status, r->status, r->error);
    if (needle && !strstr(r->error, needle))
        fail_msg("error '%s' does not mention '%s'", r->error, needle);
    return r;
}

static void test_bad_input(void **state)
{
    (void)state;
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r;
    uint8_t buf[4096];

    /* Bytes that are not a protobuf ClientFrame. */
    send_raw(g_s, "\xff\xff\xff garbage", 11);
    r = expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, "not a ClientFrame");
    assert_int_equal(r->correlation_id, 0);
    gpubridge__server_frame__free_unpacked(f, NULL);
    still_serves(g_s);

    /* A ClientFrame with no body; an extra message part. */
    send_raw(g_s, "", 0);
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);
    zmq_send(g_s, "a", 1, ZMQ_SNDMORE);
    zmq_send(g_s, "b", 1, 0);
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, "one message part");
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* Missing fields: no kind; no grain. */
    Gpubridge__Envelope *e = make_env(11, "vecadd", 1, 1, NULL, 0);
    e->kind = GPUBRIDGE__KIND__KIND_UNSPECIFIED;
    send_env(g_s, e);
    r = expect_error(&f, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "kind");
    assert_int_equal(r->correlation_id, 11);
    gpubridge__server_frame__free_unpacked(f, NULL);
    e = make_env(12, "vecadd", 1, 1, NULL, 0);
    e->grain = NULL;
    send_env(g_s, e);
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "grain");
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* Unknown grain type; unknown message type; payload not a VectorAddRequest. */
    send_env(g_s, make_env(13, "no.such.grain", 1, 1, NULL, 0));
    r = expect_error(&f, GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "no.such.grain");
    assert_int_equal(r->correlation_id, 13);
    gpubridge__server_frame__free_unpacked(f, NULL);
    send_env(g_s, make_env(14, "vecadd", 1, 77, NULL, 0));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE, "77");
    gpubridge__server_frame__free_unpacked(f, NULL);
    /* A message type past 32 bits: refused naming the value sent, not the
     * 2^32 - 1 it reads as. The envelope's field 4 again (the last wins). */
    {
        uint8_t env[96], frame[100];
        size_t el = gpubridge__envelope__pack(make_env(18, "vecadd", 1, 1, NULL, 0), env);
        const uint8_t wide[] = {0x20, 0x81, 0x80, 0x80, 0x80, 0x10}; /* 2^32 + 1 */
        assert_true(el + sizeof wide <= sizeof env);
        memcpy(env + el, wide, sizeof wide);
        el += sizeof wide;
        frame[0] = 0x0a; /* ClientFrame.envelope */
        frame[1] = (uint8_t)el;
        memcpy(frame + 2, env, el);
        send_raw(g_s, frame, el + 2);
        r = expect_error(&f, GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE, "no message type 4294967297");
        assert_int_equal(r->correlation_id, 18);
        gpubridge__server_frame__free_unpacked(f, NULL);
    }
    send_env(g_s, make_env(15, "vecadd", 1, 1, (const uint8_t *)"\xff\xff\xff", 3));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, "VectorAddRequest");
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* Vectors of different lengths; more elements than the slot holds (out of
     * line: answered, see e2e_large.c). */
    float a[64] = {0}, b[64] = {0};
    Gpubridge__VectorAddRequest v = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    v.n_a = 3;
    v.a = a;
    v.n_b = 2;
    v.b = b;
    size_t len = gpubridge__vector_add_request__pack(&v, buf);
    send_env(g_s, make_env(16, "vecadd", 1, 1, buf, len));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, "length");
    gpubridge__server_frame__free_unpacked(f, NULL);
    len = pack_vecadd(buf, 0, a, b, 64);
    send_env(g_s, make_env(17, "vecadd", 1, 1, buf, len));
    r = expect_error(&f, GPUBRIDGE__STATUS__STATUS_OK, NULL);
    assert_int_equal(r->payload.len, 3 + 4 * 64); /* VectorAddResponse: 64 packed floats */
    gpubridge__server_frame__free_unpacked(f, NULL);
    v.n_b = 3;
    v.op = (Gpubridge__VectorAddRequest__Op)9;
    len = gpubridge__vector_add_request__pack(&v, buf);
    send_env(g_s, make_env(18, "vecadd", 1, 1, buf, len));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, "op");
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* A frame over max_message_size (64 KiB here): refused before decoding. */
    size_t big = 100000;
    uint8_t *junk = calloc(1, big);
    send_raw(g_s, junk, big);
    free(junk);
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_TOO_LARGE, "max_message_size");
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* A control message without an operation. */
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    send_env(g_s, make_control(19, &c));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "operation");
    gpubridge__server_frame__free_unpacked(f, NULL);
    assert_int_equal(control_simple(g_s, 20, GPUBRIDGE__CONTROL__OP_ACTIVATE, "nope"),
                     GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE);

    still_serves(g_s);
}

/* A client that leaves with requests in flight affects nobody. */
static void test_client_disconnects(void **state)
{
    (void)state;
    void *c = client_open(g_b.endpoint);
    float a[3] = {1, 2, 3};
    uint8_t buf[128];
    size_t len = pack_vecadd(buf, 0, a, a, 3);
    Gpubridge__ClientFrame fr = GPUBRIDGE__CLIENT_FRAME__INIT;
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    Gpubridge__Envelope envs[50], *ptrs[50];
    for (int i = 0; i < 50; i++) {
        envs[i] = *make_env((uint64_t)i + 1, "vecadd", (uint64_t)i, 1, buf, len);
        ptrs[i] = &envs[i];
    }
    batch.n_envelopes = 50;
    batch.envelopes = ptrs;
    fr.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    fr.batch = &batch;
    for (int k = 0; k < 20; k++)
        send_frame(c, &fr);
    zmq_close(c);
    usleep(100000);
    still_serves(g_s);
}

static long rss_kib_of(pid_t pid)
{
    char path[64], line[256];
    long v = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
            break;
    fclose(f);
    return v;
}

static long bridge_rss_kib(void) { return rss_kib_of(g_b.pid); }

/* Client faults: half a batch (truncated in flight), a client that leaves
 * with requests in flight and comes back under the same routing id, and
 * many clients that flood and vanish. The bridge answers what it can,
 * nobody else is affected, and its memory stays bounded. */
static void test_client_faults(void **state)
{
    (void)state;
    float a[3] = {1, 2, 3};
    uint8_t buf[128];
    size_t len = pack_vecadd(buf, 0, a, a, 3);
    Gpubridge__Envelope envs[50], *ptrs[50];
    for (int i = 0; i < 50; i++) {
        envs[i] = *make_env((uint64_t)i + 1, "vecadd", (uint64_t)i, 1, buf, len);
        ptrs[i] = &envs[i];
    }
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.n_envelopes = 50;
    batch.envelopes = ptrs;
    Gpubridge__ClientFrame fr = GPUBRIDGE__CLIENT_FRAME__INIT;
    fr.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    fr.batch = &batch;
    size_t flen = gpubridge__client_frame__get_packed_size(&fr);
    uint8_t *frame = malloc(flen);
    assert_non_null(frame);
    gpubridge__client_frame__pack(&fr, frame);

    /* Half a batch: one error reply (correlation id 0), no envelope run. */
    send_raw(g_s, frame, flen / 2);
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = expect_error(&f, GPUBRIDGE__STATUS__STATUS_MALFORMED, "not a ClientFrame");
    assert_int_equal(r->correlation_id, 0);
    gpubridge__server_frame__free_unpacked(f, NULL);
    still_serves(g_s);

    /* Leave with 250 requests in flight, come back under the same id: the
     * new connection works (stale replies may arrive first; skip them). */
    for (int round = 0; round < 2; round++) {
        void *c = zmq_socket(g_zctx, ZMQ_DEALER);
        int linger = 0;
        zmq_setsockopt(c, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(c, ZMQ_ROUTING_ID, "returning-client", 16);
        assert_int_equal(zmq_connect(c, g_b.endpoint), 0);
        if (round == 0) {
            for (int k = 0; k < 5; k++)
                send_frame(c, &fr);
        } else {
            float b[3] = {4, 5, 6};
            uint8_t one[128];
            size_t ol = pack_vecadd(one, 0, a, b, 3);
            send_env(c, make_env(777777, "vecadd", 3, 1, one, ol));
            uint64_t until = e2e_ms() + 10000;
            int found = 0;
            while (!found && e2e_ms() < until) {
                Gpubridge__ServerFrame *g = recv_frame(c, 1000);
                size_t n = 0;
                Gpubridge__Reply **rs = g ? frame_replies(g, &n) : NULL;
                for (size_t i = 0; i < n; i++)
                    if (rs[i]->correlation_id == 777777) {
                        assert_int_equal(rs[i]->status, GPUBRIDGE__STATUS__STATUS_OK);
                        found = 1;
                    }
                if (g)
                    gpubridge__server_frame__free_unpacked(g, NULL);
            }
            assert_true(found);
        }
        zmq_close(c);
        usleep(50000);
    }

    /* 100 clients flood and vanish; memory comes back to where it was. */
    long rss0 = bridge_rss_kib();
    for (int k = 0; k < 100; k++) {
        void *c = client_open(g_b.endpoint);
        for (int j = 0; j < 10; j++)
            send_frame(c, &fr);
        if (k % 3 == 0)
            send_raw(c, frame, flen / 3); /* and a broken one */
        zmq_close(c);
    }
    usleep(500000);
    still_serves(g_s);
    long rss1 = bridge_rss_kib();
    print_message("bridge RSS %ld KiB before 100 vanishing clients, %ld KiB after\n", rss0, rss1);
    assert_true(rss1 - rss0 < RSS_BOUND_KIB(32 * 1024));
    free(frame);
}

/* Deactivated grain type + flooding client: requests queue (ring full, then
 * the socket is not read), none is answered or lost; after activation every
 * one is answered exactly once. */
static void test_backpressure(void **state)
{
    (void)state;
    enum { N = 2000 };
    void *c = client_open(g_b.endpoint);
    assert_int_equal(control_simple(c, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "echo"), GPUBRIDGE__STATUS__STATUS_OK);
    uint8_t buf[64];
    for (uint64_t i = 0; i < N; i++) {
        Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
        er.sequence = i;
        size_t len = gpubridge__echo_request__pack(&er, buf);
        send_env(c, make_env(100 + i, "echo", i % 5, 1, buf, len));
    }
    Gpubridge__ServerFrame *f = recv_frame(c, 300);
    assert_null(f); /* nothing answered while deactivated */
    assert_int_equal(control_simple(g_s, 2, GPUBRIDGE__CONTROL__OP_ACTIVATE, "echo"), GPUBRIDGE__STATUS__STATUS_OK);
    static uint8_t seen[N];
    memset(seen, 0, sizeof seen);
    uint64_t per_key_count[5] = {0};
    size_t got = 0;
    uint64_t end = e2e_ms() + 30000;
    while (got < N && e2e_ms() < end) {
        f = recv_frame(c, 1000);
        if (!f)
            continue;
        size_t n;
        Gpubridge__Reply **rs = frame_replies(f, &n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(rs[i]->status, GPUBRIDGE__STATUS__STATUS_OK);
            uint64_t id = rs[i]->correlation_id - 100;
            assert_true(id < N);
            assert_int_equal(seen[id], 0);
            seen[id] = 1;
            Gpubridge__EchoResponse *er =
                gpubridge__echo_response__unpack(NULL, rs[i]->payload.len, rs[i]->payload.data);
            assert_non_null(er);
            assert_int_equal(er->sequence, id);
            /* turn order per grain: the k-th request to a key is its k-th message */
            per_key_count[id % 5]++;
            assert_int_equal(er->grain_count, per_key_count[id % 5]);
            gpubridge__echo_response__free_unpacked(er, NULL);
            got++;
        }
        gpubridge__server_frame__free_unpacked(f, NULL);
    }
    assert_int_equal(got, N);
    zmq_close(c);
}

static void test_control(void **state)
{
    (void)state;
    Gpubridge__ServerFrame *f;
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__ListGrainTypes l = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    c.op_case = GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES;
    c.list_grain_types = &l;
    send_env(g_s, make_control(31, &c));
    Gpubridge__Reply *r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    Gpubridge__GrainTypeList *gl = gpubridge__grain_type_list__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(gl);
    int has_vecadd = 0;
    for (size_t i = 0; i < gl->n_grain_types; i++)
        has_vecadd |= strcmp(gl->grain_types[i], "vecadd") == 0;
    assert_true(has_vecadd);
    gpubridge__grain_type_list__free_unpacked(gl, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);

    Gpubridge__TelemetryRequest t = GPUBRIDGE__TELEMETRY_REQUEST__INIT;
    t.grain_type = "vecadd";
    c.op_case = GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST;
    c.telemetry_request = &t;
    send_env(g_s, make_control(32, &c));
    r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    Gpubridge__Telemetry *tm = gpubridge__telemetry__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(tm);
    assert_true(tm->messages_processed >= 200); /* the message-passing test's */
    assert_int_equal(tm->queue_capacity, 64);
    gpubridge__telemetry__free_unpacked(tm, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);

    Gpubridge__DetectRequest d = GPUBRIDGE__DETECT_REQUEST__INIT;
    c.op_case = GPUBRIDGE__CONTROL__OP_DETECT_REQUEST;
    c.detect_request = &d;
    send_env(g_s, make_control(33, &c));
    r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    Gpubridge__DetectReport *dr = gpubridge__detect_report__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(dr);
    assert_string_equal(dr->mode, e2e_mode());
    gpubridge__detect_report__free_unpacked(dr, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* Deactivate one grain: its state goes (count restarts); twice: no activation. */
    Gpubridge__DeactivateGrain dg = GPUBRIDGE__DEACTIVATE_GRAIN__INIT;
    dg.grain_type = "echo";
    dg.key = 4242;
    c.op_case = GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN;
    c.deactivate_grain = &dg;
    uint8_t buf[32];
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    size_t len = gpubridge__echo_request__pack(&er, buf);
    send_env(g_s, make_env(34, "echo", 4242, 1, buf, len));
    gpubridge__server_frame__free_unpacked(f = recv_frame(g_s, 10000), NULL);
    send_env(g_s, make_control(35, &c));
    r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    gpubridge__server_frame__free_unpacked(f, NULL);
    send_env(g_s, make_control(36, &c));
    r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_NO_ACTIVATION);
    gpubridge__server_frame__free_unpacked(f, NULL);

    /* An empty grain_type is a missing field, as control.proto says, for
     * deactivate_grain as for every op that names a grain type. */
    dg.grain_type = "";
    send_env(g_s, make_control(37, &c));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "grain_type");
    gpubridge__server_frame__free_unpacked(f, NULL);
    assert_int_equal(control_simple(g_s, 38, GPUBRIDGE__CONTROL__OP_DEACTIVATE, ""),
                     GPUBRIDGE__STATUS__STATUS_MISSING_FIELD);
}

/* The limits a LimitsRequest reports of one grain type (NULL if none). */
static const Gpubridge__GrainTypeLimits *type_limits(const Gpubridge__Limits *l, const char *type)
{
    for (size_t i = 0; i < l->n_grain_types; i++)
        if (strcmp(l->grain_types[i]->grain_type, type) == 0)
            return l->grain_types[i];
    return NULL;
}

/* The Limits reply matches the config, and each reported bound is exact: a
 * request at the bound passes, one past it gets STATUS_TOO_LARGE. */
static void test_limits(void **state)
{
    (void)state;
    Gpubridge__ServerFrame *f, *f2;
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__LimitsRequest lr = GPUBRIDGE__LIMITS_REQUEST__INIT;
    c.op_case = GPUBRIDGE__CONTROL__OP_LIMITS_REQUEST;
    c.limits_request = &lr;
    send_env(g_s, make_control(61, &c));
    Gpubridge__Reply *r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(r->message_type, GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_LIMITS);
    Gpubridge__Limits *l = gpubridge__limits__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(l);
    assert_int_equal(l->max_message_size, 65536);
    assert_int_equal(l->hold_bound, 64u << 20); /* 64 frames of 64 KiB is below the 64 MiB floor */
    assert_true(l->max_replies_per_frame > 0);
    const Gpubridge__GrainTypeLimits *va = type_limits(l, "vecadd"), *ec = type_limits(l, "echo");
    assert_non_null(va);
    assert_non_null(ec);
    assert_int_equal(va->slot_size, 128);
    assert_int_equal(va->record_size, 96);
    assert_int_equal(va->queue_capacity, 64);
    assert_int_equal(va->max_grains, 65536);
    assert_int_equal(va->n_message_types, 1);
    assert_int_equal(va->message_types[0]->message_type, 1);
    assert_string_equal(va->message_types[0]->name, "VectorAddRequest");
    /* The frame binds (a record past its slot goes out of line): 65,536
     * bytes less a ClientFrame's own bytes with the largest correlation id
     * and key (44 for "vecadd", 42 for "echo"); a and b take 8 bytes an
     * element and 4 each of tag and length. */
    assert_int_equal(va->message_types[0]->max_payload, 65536 - 44);
    const uint32_t n = va->message_types[0]->max_elements;
    assert_int_equal(n, (65536 - 44 - 8) / 8);
    assert_int_equal(ec->n_message_types, 1);
    const uint32_t echo_max = ec->message_types[0]->max_payload;
    assert_int_equal(echo_max, 65536 - 42);

    /* At each bound with those ids: answered; one element or byte more: the
     * frame is refused (correlation id 0). */
    float *a = calloc(n + 1, sizeof *a);
    uint8_t *buf = malloc(65536 + 64), *data = calloc(1, 65536);
    assert_non_null(a);
    assert_non_null(buf);
    assert_non_null(data);
    for (uint32_t extra = 0; extra < 2; extra++) {
        size_t len = pack_vecadd(buf, 0, a, a, n + extra);
        assert_int_equal(len, extra ? 65536 - 44 + 8 - 4 : 65536 - 44 - 4);
        send_env(g_s, make_env(UINT64_MAX, "vecadd", UINT64_MAX, 1, buf, len));
        r = recv_reply(g_s, &f2, 10000);
        if (r->status != (extra ? GPUBRIDGE__STATUS__STATUS_TOO_LARGE : GPUBRIDGE__STATUS__STATUS_OK))
            fail_msg("vecadd of %u elements: status %d (%s)", n + extra, r->status, r->error);
        assert_int_equal(r->correlation_id, extra ? 0 : UINT64_MAX);
        if (!extra) {
            Gpubridge__VectorAddResponse *v =
                gpubridge__vector_add_response__unpack(NULL, r->payload.len, r->payload.data);
            assert_non_null(v);
            assert_int_equal(v->n_result, n);
            gpubridge__vector_add_response__free_unpacked(v, NULL);
        }
        gpubridge__server_frame__free_unpacked(f2, NULL);
    }

    /* EchoRequest { data }: tag and a 3-byte length take 4 bytes. */
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    er.data.data = data;
    for (uint32_t extra = 0; extra < 2; extra++) {
        er.data.len = echo_max - 4 + extra;
        size_t len = gpubridge__echo_request__pack(&er, buf);
        assert_int_equal(len, echo_max + extra);
        send_env(g_s, make_env(UINT64_MAX, "echo", UINT64_MAX, 1, buf, len));
        r = recv_reply(g_s, &f2, 10000);
        if (r->status != (extra ? GPUBRIDGE__STATUS__STATUS_TOO_LARGE : GPUBRIDGE__STATUS__STATUS_OK))
            fail_msg("echo of %zu bytes: status %d (%s)", len, r->status, r->error);
        assert_int_equal(r->correlation_id, extra ? 0 : UINT64_MAX);
        gpubridge__server_frame__free_unpacked(f2, NULL);
    }
    free(a);
    free(buf);
    free(data);
    gpubridge__limits__free_unpacked(l, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);
}

/* One-way requests: processed, never answered on success; an error is
 * answered only when the request carries a correlation id. */
static void test_one_way(void **state)
{
    (void)state;
    uint8_t buf[32];
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    size_t len = gpubridge__echo_request__pack(&er, buf);
    Gpubridge__Envelope *e = make_env(0, "echo", 777, 1, buf, len);
    e->kind = GPUBRIDGE__KIND__KIND_ONE_WAY;
    send_env(g_s, e);
    e = make_env(51, "echo", 777, 1, buf, len);
    e->kind = GPUBRIDGE__KIND__KIND_ONE_WAY;
    send_env(g_s, e);
    e = make_env(0, "no.such.grain", 1, 1, NULL, 0);
    e->kind = GPUBRIDGE__KIND__KIND_ONE_WAY;
    send_env(g_s, e); /* an error without a correlation id: nobody to tell */
    e = make_env(52, "no.such.grain", 1, 1, NULL, 0);
    e->kind = GPUBRIDGE__KIND__KIND_ONE_WAY;
    send_env(g_s, e);
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->correlation_id, 52);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE);
    gpubridge__server_frame__free_unpacked(f, NULL);
    /* Both one-way echoes ran: the grain's third message counts 3. */
    send_env(g_s, make_env(53, "echo", 777, 1, buf, len));
    r = recv_reply(g_s, &f, 10000);
    assert_int_equal(r->correlation_id, 53);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    Gpubridge__EchoResponse *resp = gpubridge__echo_response__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(resp);
    assert_int_equal(resp->grain_count, 3);
    gpubridge__echo_response__free_unpacked(resp, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);
    assert_null(recv_frame(g_s, 200)); /* and nothing else came */
}

/* Runs a command line; returns its exit status. */
static int run_cmd(const char *cmd)
{
    fprintf(stderr, "e2e: %s\n", cmd);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The message-passing example through libgpubridge, and the Python client's
 * message-passing and bad-input checks (where Debian's python3-zmq is). */
static void test_examples(void **state)
{
    (void)state;
    const char *mp = getenv("GB_MP_BIN"), *src = getenv("GB_SOURCE_DIR"), *gen = getenv("GB_PYGEN");
    char cmd[2048];
    if (mp) {
        snprintf(cmd, sizeof cmd, "%s --endpoint %s --count 50", mp, g_b.endpoint);
        assert_int_equal(run_cmd(cmd), 0);
    }
    if (!src || !gen || run_cmd("/usr/bin/python3 -c 'import zmq, google.protobuf' 2>/dev/null") != 0) {
        fprintf(stderr, "e2e: no python3-zmq here: the Python client runs in CI only\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/examples/python/message_passing.py --endpoint %s --gen %s --count 25",
             src, g_b.endpoint, gen);
    assert_int_equal(run_cmd(cmd), 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/examples/python/message_passing.py --endpoint %s --gen %s --bad-input",
             src, g_b.endpoint, gen);
    assert_int_equal(run_cmd(cmd), 0);
}

/* Terminate a grain type: later requests get STATUS_TERMINATED, others serve. */
static void test_terminated_grain_type(void **state)
{
    (void)state;
    assert_int_equal(control_simple(g_s, 41, GPUBRIDGE__CONTROL__OP_TERMINATE, "echo"), GPUBRIDGE__STATUS__STATUS_OK);
    uint8_t buf[32];
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    size_t len = gpubridge__echo_request__pack(&er, buf);
    send_env(g_s, make_env(42, "echo", 1, 1, buf, len));
    Gpubridge__ServerFrame *f;
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_TERMINATED, "terminated");
    gpubridge__server_frame__free_unpacked(f, NULL);
    assert_int_equal(control_simple(g_s, 43, GPUBRIDGE__CONTROL__OP_ACTIVATE, "echo"),
                     GPUBRIDGE__STATUS__STATUS_TERMINATED);
    /* DeactivateGrain after the Terminate: not "terminated before answering"
     * (which says it may have run), the type is terminated */
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__DeactivateGrain dg = GPUBRIDGE__DEACTIVATE_GRAIN__INIT;
    dg.grain_type = (char *)"echo";
    dg.key = 1;
    c.op_case = GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN;
    c.deactivate_grain = &dg;
    send_env(g_s, make_control(44, &c));
    expect_error(&f, GPUBRIDGE__STATUS__STATUS_TERMINATED, "grain type 'echo' is terminated");
    gpubridge__server_frame__free_unpacked(f, NULL);
    still_serves(g_s);
}

/* Records the replies of f (each id once, OK or SHUTTING_DOWN) and frees it. */
static void take_replies(Gpubridge__ServerFrame *f, uint8_t *seen, uint64_t max_id, uint64_t *got)
{
    size_t n;
    Gpubridge__Reply **rs = frame_replies(f, &n);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = rs[i]->correlation_id;
        assert_true(id >= 1 && id <= max_id);
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
        /* Processed; refused by the drain; or, past shutdown_drain_ms, still
         * in a ring (docs/protocol.md "Shutdown"). */
        const int allowed = rs[i]->status == GPUBRIDGE__STATUS__STATUS_OK ||
                             rs[i]->status == GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN ||
                             rs[i]->status == GPUBRIDGE__STATUS__STATUS_TERMINATED;
        if (!allowed)
            fprintf(stderr, "e2e: id %llu answered status %d: %s\n", (unsigned long long)id, (int)rs[i]->status,
                    rs[i]->error ? rs[i]->error : "");
        assert_true(allowed);
        (*got)++;
    }
    gpubridge__server_frame__free_unpacked(f, NULL);
}

/* SIGTERM while a client streams batches: the bridge drains (it processes
 * what it accepted, and keeps reading, answering later requests
 * STATUS_SHUTTING_DOWN) and exits 0; the client gets every reply the bridge
 * (or, supervised, the supervisor) reports having sent, and never one twice.
 * Frames that reach the bridge only after it exits get nothing, so the count
 * is the bridge's, not the client's 40,000. */
static void test_sigterm_under_load(void **state)
{
    (void)state;
    bridge_t b;
    assert_int_equal(bridge_start(&b, SMALL_RINGS), 0);
    void *c = client_open(b.endpoint);
    float a[3] = {1, 2, 3};
    uint8_t buf[128];
    size_t len = pack_vecadd(buf, 0, a, a, 3);
    enum { BATCH = 100, FRAMES = 400 };
    static Gpubridge__Envelope envs[BATCH];
    Gpubridge__Envelope *ptrs[BATCH];
    static uint8_t seen[BATCH * FRAMES + 1];
    memset(seen, 0, sizeof seen);
    Gpubridge__ClientFrame fr = GPUBRIDGE__CLIENT_FRAME__INIT;
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.envelopes = ptrs;
    batch.n_envelopes = BATCH;
    fr.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    fr.batch = &batch;
    uint64_t got = 0;
    Gpubridge__ServerFrame *f;
    for (int k = 0; k < FRAMES; k++) {
        for (int i = 0; i < BATCH; i++) {
            envs[i] = *make_env((uint64_t)(k * BATCH + i + 1), "vecadd", (uint64_t)i, 1, buf, len);
            ptrs[i] = &envs[i];
        }
        send_frame(c, &fr);
        if (k == FRAMES / 2) {
            /* Under load: replies are flowing when the signal comes. */
            while (got < 1000 && (f = recv_frame(c, 10000)))
                take_replies(f, seen, BATCH * FRAMES, &got);
            assert_true(got >= 1000);
            kill(b.pid, SIGTERM);
        }
    }
    while ((f = recv_frame(c, 3000)))
        take_replies(f, seen, BATCH * FRAMES, &got);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
    assert_true(got > 0);
    /* The bridge's own count of replies sent equals what arrived. */
    char needle[64];
    snprintf(needle, sizeof needle, "%llu replies", (unsigned long long)got);
    if (!log_contains(&b, needle))
        fail_msg("client got %llu replies; bridge log %s says otherwise", (unsigned long long)got, b.log);
    zmq_close(c);
}

/* Clients that never read, asking for replies of 1 MiB: ZeroMQ's queue for
 * each counts frames (32 of them), so its large frames are held to 2 MiB a
 * client there by byte count (zq_bytes.h), and the rest waits within the
 * bridge's own bounds, refused past them: the bridge grows by a bounded
 * amount a client, not by 32 MiB. */
static void test_unread_large_replies(void **state)
{
    (void)state;
    enum { CLIENTS = 12, EACH = 40, DATA = 1 << 20 };
    bridge_t b;
    /* glibc's mmap threshold fixed (it otherwise rises to the largest block
     * freed, and a burst of 1 MiB frames then stays resident in its heaps
     * after it is answered): the bridge's RSS then follows what it holds,
     * which is what this test bounds. */
    setenv("MALLOC_MMAP_THRESHOLD_", "131072", 1);
    const int started = bridge_start(&b, "max_message_size = 2097152;\nreply_backlog_mb = 8;\n");
    unsetenv("MALLOC_MMAP_THRESHOLD_");
    assert_int_equal(started, 0);
    uint8_t *data = calloc(1, DATA), *pl = malloc(DATA + 64);
    assert_non_null(data);
    assert_non_null(pl);
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    er.data.data = data;
    er.data.len = DATA - 256;
    const size_t pl_len = gpubridge__echo_request__pack(&er, pl);
    void *probe = client_open(b.endpoint);
    still_serves(probe);
    const long rss0 = rss_kib_of(b.pid);
    void *hog[CLIENTS];
    for (int c = 0; c < CLIENTS; c++) {
        /* Its own queue and socket buffer small: what it does not read
         * stays on the bridge's side. */
        int one = 1, small = 4096, linger = 0;
        hog[c] = zmq_socket(g_zctx, ZMQ_DEALER);
        zmq_setsockopt(hog[c], ZMQ_RCVHWM, &one, sizeof one);
        zmq_setsockopt(hog[c], ZMQ_RCVBUF, &small, sizeof small);
        zmq_setsockopt(hog[c], ZMQ_LINGER, &linger, sizeof linger);
        assert_int_equal(zmq_connect(hog[c], b.endpoint), 0);
        for (int k = 0; k < EACH; k++)
            send_env(hog[c], make_env((uint64_t)k + 1, "echo", (uint64_t)c, 1, pl, pl_len));
    }
    long peak = rss0;
    for (int t = 0; t < 30; t++) { /* 3 s: the bridge answers what it will */
        usleep(100000);
        const long r = rss_kib_of(b.pid);
        peak = r > peak ? r : peak;
    }
    still_serves(probe);
    print_message("bridge RSS %ld KiB before %d clients that do not read 1 MiB replies, %ld KiB at most after\n",
                  rss0, CLIENTS, peak);
    /* The bounds (operations.md, "Limits and bounds"): frames held for full
     * rings, 128 MiB in all here (64 frames of max_message_size); unsent
     * replies, reply_backlog_mb in all plus the replies of requests already
     * in the ring; and in ZeroMQ's queue a client, 2 MiB of large replies and
     * one more. On top, an allowance of 8 MiB a client for what is on its way
     * and not yet counted: frames ZeroMQ read ahead of the bridge, and the
     * request and reply of the frame in hand. Supervised, the supervisor also
     * takes up to 32 frames a client from the worker while that client does
     * not read. Without zq_bytes.h's byte bound ZeroMQ alone would keep 32
     * MiB a client, past this bound. Checked in cpu mode only: in GPU modes
     * more than the reply path (the same code in every mode) grows with this
     * load. And with one device only: with several, each device's worker
     * threads allocate from glibc arenas of their own, and the peak varies
     * from run to run by more than the bounds. */
    const char *sup = getenv("GB_E2E_SUPERVISE"), *devs = getenv("GB_E2E_DEVICES");
    const long all_clients = (128 + 8) * 1024;
    const long per = (sup && *sup == '1' ? 8 : 0) * 1024 + (3 + 8) * 1024;
    if (strcmp(e2e_mode(), "cpu") == 0 && !(devs && *devs))
        assert_true(peak - rss0 < RSS_BOUND_KIB(all_clients + CLIENTS * per));
    for (int c = 0; c < CLIENTS; c++)
        zmq_close(hog[c]);
    zmq_close(probe);
    free(data);
    free(pl);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
}

/* Clients that send frames slower to serve than to send (1 MiB of empty
 * envelopes, each an error the bridge must decode and answer) faster than
 * the bridge takes them: ZeroMQ's receive queue for each holds what the
 * bridge has not read, counted in frames. Its high-water mark is sized in
 * bytes (gbi_rcvhwm: 16 MiB of frames of max_message_size), so the bridge
 * grows by a bounded amount a client, not by 256 frames of 1 MiB. */
static void test_slow_frames_bounded(void **state)
{
    (void)state;
    enum { CLIENTS = 4, FRAME = 1 << 20 };
    if (SANITIZED) { /* no RSS bound there, and each frame takes seconds to decode */
        print_message("sanitizer build: skipped\n");
        return;
    }
    bridge_t b;
    setenv("MALLOC_MMAP_THRESHOLD_", "131072", 1); /* see test_unread_large_replies */
    const int started = bridge_start(&b, "");
    unsetenv("MALLOC_MMAP_THRESHOLD_");
    assert_int_equal(started, 0);
    /* ClientFrame{batch: Batch{envelopes: empty Envelope, ...}}: field 2,
     * then as many (field 1, length 0) pairs as fit in max_message_size. */
    const size_t pairs = (FRAME - 8) / 2;
    uint8_t *frame = malloc(FRAME);
    assert_non_null(frame);
    size_t n = 0;
    frame[n++] = 0x12;
    size_t v = pairs * 2; /* the Batch's length, a varint */
    for (; v >= 0x80; v >>= 7)
        frame[n++] = (uint8_t)(v | 0x80);
    frame[n++] = (uint8_t)v;
    for (size_t k = 0; k < pairs; k++) {
        frame[n++] = 0x0a;
        frame[n++] = 0x00;
    }
    void *probe = client_open(b.endpoint);
    still_serves(probe);
    const long rss0 = rss_kib_of(b.pid);
    void *hog[CLIENTS];
    int sent = 0;
    for (int c = 0; c < CLIENTS; c++) {
        int queue = 32, linger = 0; /* past the bridge's 16, short of its old 256 */
        hog[c] = zmq_socket(g_zctx, ZMQ_DEALER);
        zmq_setsockopt(hog[c], ZMQ_SNDHWM, &queue, sizeof queue);
        zmq_setsockopt(hog[c], ZMQ_LINGER, &linger, sizeof linger);
        assert_int_equal(zmq_connect(hog[c], b.endpoint), 0);
    }
    long peak = rss0;
    for (int t = 0; t < 40; t++) { /* 4 s of sending as fast as the sockets take it */
        for (int c = 0; c < CLIENTS; c++)
            while (zmq_send(hog[c], frame, n, ZMQ_DONTWAIT) == (int)n && ++sent % 64)
                ;
        usleep(100000);
        const long r = rss_kib_of(b.pid);
        peak = r > peak ? r : peak;
    }
    still_serves(probe);
    print_message("bridge RSS %ld KiB before %d clients sent %d frames of %zu empty envelopes, %ld KiB at most "
                  "after\n",
                  rss0, CLIENTS, sent, pairs, peak);
    /* A client: 16 MiB of frames in ZeroMQ's queue, and 8 MiB to spare for
     * the socket's buffer and the frame it is reading; in all, 64 MiB for
     * the frame in hand decoded (half a million envelopes), its replies and
     * the allocator's slack. Before the bound: 256 MiB a client. Not
     * supervised: the supervisor's queue towards the worker keeps 256 frames
     * a client (protocol.md, "Supervised mode"); nor with several devices
     * (see test_unread_large_replies). */
    const char *sup = getenv("GB_E2E_SUPERVISE"), *devs = getenv("GB_E2E_DEVICES");
    if (strcmp(e2e_mode(), "cpu") == 0 && !(sup && *sup == '1') && !(devs && *devs))
        assert_true(peak - rss0 < RSS_BOUND_KIB(64 * 1024 + CLIENTS * (16 + 8) * 1024));
    for (int c = 0; c < CLIENTS; c++)
        zmq_close(hog[c]);
    zmq_close(probe);
    free(frame);
    assert_int_equal(bridge_stop(&b, SIGTERM, 30000), 0);
}

/* Under --supervise, routing ids of more than 5 bytes that start with a
 * zero byte and "gb-" are the supervisor's own (its heartbeat's among
 * them): a client's frame with one is refused, saying so, and the others
 * are served, 5-byte ones (ZeroMQ's own form) included. */
static void test_reserved_ids(void **state)
{
    (void)state;
    const char *sup = getenv("GB_E2E_SUPERVISE");
    if (!sup || *sup != '1') {
        print_message("not supervised: nothing reserved\n");
        return;
    }
    static const char *const ids[] = {"\0gb-supervisor-heartbeat", "\0gb-xy"};
    static const size_t lens[] = {24, 6};
    float a[3] = {1, 2, 3};
    uint8_t buf[128];
    const size_t len = pack_vecadd(buf, 0, a, a, 3);
    for (size_t i = 0; i < 2; i++) {
        void *c = zmq_socket(g_zctx, ZMQ_DEALER);
        int linger = 0;
        zmq_setsockopt(c, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(c, ZMQ_ROUTING_ID, ids[i], lens[i]);
        assert_int_equal(zmq_connect(c, g_b.endpoint), 0);
        send_env(c, make_env(99, "vecadd", 1, 1, buf, len));
        Gpubridge__ServerFrame *f = recv_frame(c, 10000);
        assert_non_null(f);
        size_t n = 0;
        Gpubridge__Reply **rs = frame_replies(f, &n);
        assert_int_equal(n, 1);
        if (rs[0]->status != GPUBRIDGE__STATUS__STATUS_MALFORMED || !strstr(rs[0]->error, "the supervisor's own"))
            fail_msg("id %zu: status %d, '%s'", i, rs[0]->status, rs[0]->error);
        gpubridge__server_frame__free_unpacked(f, NULL);
        zmq_close(c);
    }
    /* 5 bytes, as ZeroMQ makes them for clients that set none: served. */
    void *c = zmq_socket(g_zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(c, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c, ZMQ_ROUTING_ID, "\0gb-x", 5);
    assert_int_equal(zmq_connect(c, g_b.endpoint), 0);
    still_serves(c);
    zmq_close(c);
    still_serves(g_s);
}

/* Clients that take, as their own routing ids, the ids a ROUTER makes for
 * clients that set none (0x00 and a counter starting at rand(); unseeded,
 * 0x6b8b4567 in every process): a plain client after them would get an id
 * already held, which libzmq 4.3 does not survive (an assertion). The
 * bridge seeds rand() before making its ROUTER (router_ids.h), so plain
 * clients after them are served. */
static void test_routing_id_squatters(void **state)
{
    (void)state;
    enum { SQUAT = 256 };
    bridge_t b;
    assert_int_equal(bridge_start(&b, SMALL_RINGS), 0);
    void *sq[SQUAT];
    for (int k = 0; k < SQUAT; k++) {
        const uint32_t n = 0x6b8b4567u + (uint32_t)k;
        const uint8_t id[5] = {0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
        sq[k] = zmq_socket(g_zctx, ZMQ_DEALER);
        int linger = 0;
        zmq_setsockopt(sq[k], ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(sq[k], ZMQ_ROUTING_ID, id, sizeof id);
        assert_int_equal(zmq_connect(sq[k], b.endpoint), 0);
    }
    still_serves(sq[SQUAT - 1]); /* connected, and served */
    for (int k = 0; k < 8; k++) { /* plain clients after them */
        void *c = client_open(b.endpoint);
        still_serves(c);
        zmq_close(c);
    }
    assert_int_equal(kill(b.pid, 0), 0);
    for (int k = 0; k < SQUAT; k++)
        zmq_close(sq[k]);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
}

/* CURVE: an allow-listed client is served; another key and a plain client
 * get nothing; a world-readable secret key file is refused at start. */
static void test_curve(void **state)
{
    (void)state;
    char spub[41], ssec[41], apub[41], asec[41], bpub[41], bsec[41];
    assert_int_equal(zmq_curve_keypair(spub, ssec), 0);
    assert_int_equal(zmq_curve_keypair(apub, asec), 0);
    assert_int_equal(zmq_curve_keypair(bpub, bsec), 0);
    char keydir[256], keyfile[300];
    e2e_server_key(ssec, keydir, keyfile);
    chmod(keyfile, 0600);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "curve = { enabled = true; server_secret_key_file = \"%s\"; server_public_key = \"%s\";\n"
             "          allowed_clients = [ \"%s\" ]; };\n",
             keyfile, spub, apub);
    bridge_t b;
    assert_int_equal(bridge_start(&b, cfg), 0);

    void *ok = zmq_socket(g_zctx, ZMQ_DEALER), *bad = zmq_socket(g_zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(ok, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(bad, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ok, ZMQ_CURVE_SERVERKEY, spub, 40);
    zmq_setsockopt(ok, ZMQ_CURVE_PUBLICKEY, apub, 40);
    zmq_setsockopt(ok, ZMQ_CURVE_SECRETKEY, asec, 40);
    zmq_setsockopt(bad, ZMQ_CURVE_SERVERKEY, spub, 40);
    zmq_setsockopt(bad, ZMQ_CURVE_PUBLICKEY, bpub, 40);
    zmq_setsockopt(bad, ZMQ_CURVE_SECRETKEY, bsec, 40);
    assert_int_equal(zmq_connect(ok, b.endpoint), 0);
    assert_int_equal(zmq_connect(bad, b.endpoint), 0);
    void *plain = client_open(b.endpoint);
    float a[3] = {1, 2, 3}, r[3];
    call_vecadd(ok, 1, 1, 2, a, a, 3, r);
    assert_true(r[2] == 9);
    uint8_t buf[128];
    size_t len = pack_vecadd(buf, 0, a, a, 3);
    /* Without a completed handshake a DEALER may have no pipe to send on:
     * never block; refused either way. */
    Gpubridge__ClientFrame cf = GPUBRIDGE__CLIENT_FRAME__INIT;
    cf.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    cf.envelope = make_env(2, "vecadd", 1, 1, buf, len);
    uint8_t fb[256];
    size_t fl = gpubridge__client_frame__pack(&cf, fb);
    zmq_send(bad, fb, fl, ZMQ_DONTWAIT);
    zmq_send(plain, fb, fl, ZMQ_DONTWAIT);
    Gpubridge__ServerFrame *f = recv_frame(bad, 1000);
    assert_null(f);
    f = recv_frame(plain, 500);
    assert_null(f);
    assert_true(log_contains(&b, "refused client key"));
    zmq_close(ok);
    zmq_close(bad);
    zmq_close(plain);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);

    chmod(keyfile, 0644);
    int st = bridge_start(&b, cfg);
    assert_int_equal(st, 2);
    assert_true(log_contains(&b, "chmod 600"));
    unlink(keyfile);
}

/* One echo to (echo, key) with sequence seq: the reply's status, and the
 * grain's message count (echo's grain_count) or the error text. */
static int call_echo(void *s, uint64_t corr, uint64_t key, uint64_t *count, char *err, size_t errlen)
{
    uint8_t buf[64];
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    er.sequence = corr;
    size_t len = gpubridge__echo_request__pack(&er, buf);
    send_env(s, make_env(corr, "echo", key, 1, buf, len));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(s, &f, 10000);
    assert_int_equal(r->correlation_id, corr);
    int st = r->status;
    if (st == GPUBRIDGE__STATUS__STATUS_OK) {
        Gpubridge__EchoResponse *e = gpubridge__echo_response__unpack(NULL, r->payload.len, r->payload.data);
        assert_non_null(e);
        assert_int_equal(e->sequence, corr);
        *count = e->grain_count;
        gpubridge__echo_response__free_unpacked(e, NULL);
    } else if (err) {
        snprintf(err, errlen, "%s", r->error ? r->error : "");
    }
    gpubridge__server_frame__free_unpacked(f, NULL);
    return st;
}

/* Activation collection through the daemon: 640 echo grains on a table for
 * 64 (collection age 0) keep their message counts over three rounds; with an
 * age nothing reaches, the full table answers new keys STATUS_BUSY with an
 * error that says what to do, and the grains already there keep counting. */
static void test_activation_collection(void **state)
{
    (void)state;
    enum { KEYS = 640, ROUNDS = 3 };
    bridge_t b;
    assert_int_equal(bridge_start(&b, "grains = ( { type = \"echo\"; queue_capacity = 256; slot_size = 64;\n"
                                      "  max_grains = 64; cpu_threads = 2; collection_age_s = 0; } );\n"),
                     0);
    void *c = client_open(b.endpoint);
    uint64_t corr = 1, count = 0;
    char err[512];
    for (uint64_t round = 1; round <= ROUNDS; round++) {
        for (uint64_t i = 0; i < KEYS; i++) {
            static const uint64_t mul[ROUNDS] = {3, 7, 9}; /* prime to KEYS: each round a permutation */
            const uint64_t key = (i * mul[round - 1]) % KEYS;
            int st = call_echo(c, corr++, 100000 + key, &count, err, sizeof err);
            if (st != GPUBRIDGE__STATUS__STATUS_OK || count != round)
                fail_msg("round %llu key %llu: status %d (%s), count %llu", (unsigned long long)round,
                         (unsigned long long)key, st, st ? err : "", (unsigned long long)count);
        }
    }
    zmq_close(c);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);

    assert_int_equal(bridge_start(&b, "grains = ( { type = \"echo\"; queue_capacity = 256; slot_size = 64;\n"
                                      "  max_grains = 64; collection_age_s = 1000000; } );\n"),
                     0);
    c = client_open(b.endpoint);
    uint64_t key = 0;
    int st;
    while ((st = call_echo(c, corr++, key, &count, err, sizeof err)) == GPUBRIDGE__STATUS__STATUS_OK) {
        assert_int_equal(count, 1);
        key++;
        assert_true(key < 4096);
    }
    assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_BUSY);
    if (!strstr(err, "max_grains") || !strstr(err, "collection_age_s"))
        fail_msg("the error does not say what to do: %s", err);
    for (uint64_t k = 0; k < key; k++) {
        assert_int_equal(call_echo(c, corr++, k, &count, err, sizeof err), GPUBRIDGE__STATUS__STATUS_OK);
        assert_int_equal(count, 2);
    }
    zmq_close(c);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
}

/* DeactivateGrain of one key; returns the reply's status. */
static int deactivate_grain(void *s, uint64_t corr, const char *type, uint64_t key)
{
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__DeactivateGrain dg = GPUBRIDGE__DEACTIVATE_GRAIN__INIT;
    dg.grain_type = (char *)type;
    dg.key = key;
    c.op_case = GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN;
    c.deactivate_grain = &dg;
    send_env(s, make_control(corr, &c));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(s, &f, 10000);
    assert_int_equal(r->correlation_id, corr);
    int st = r->status;
    gpubridge__server_frame__free_unpacked(f, NULL);
    return st;
}

/* The store of evicted states through the daemon (max_evicted_kb = 2: 16
 * echo states). New keys until one is refused STATUS_BUSY with an error that
 * names the bound; every key accepted before keeps its count, evicted ones
 * included; DeactivateGrain of every key, evicted ones included, answers OK
 * with the table full; then the refused key gets in. */
static void test_evicted_store_bound(void **state)
{
    (void)state;
    bridge_t b;
    assert_int_equal(bridge_start(&b, "grains = ( { type = \"echo\"; queue_capacity = 256; slot_size = 64;\n"
                                      "  max_grains = 4; collection_age_s = 0; max_evicted_kb = 2; } );\n"),
                     0);
    void *c = client_open(b.endpoint);
    uint64_t corr = 1, count = 0, n = 0;
    char err[512];
    int st;
    while ((st = call_echo(c, corr++, 100 + n, &count, err, sizeof err)) == GPUBRIDGE__STATUS__STATUS_OK) {
        assert_int_equal(count, 1);
        n++;
        assert_true(n < 4096);
    }
    assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_BUSY);
    if (!strstr(err, "max_evicted_kb = 2 KiB") || !strstr(err, "16 evicted grains"))
        fail_msg("the error does not name the bound: %s", err);
    const uint64_t refused = 100 + n;
    assert_true(n > 16);
    for (uint64_t k = 0; k < n; k++) {
        st = call_echo(c, corr++, 100 + k, &count, err, sizeof err);
        if (st != GPUBRIDGE__STATUS__STATUS_OK || count != 2)
            fail_msg("key %llu: status %d (%s), count %llu", (unsigned long long)(100 + k), st, st ? err : "",
                     (unsigned long long)count);
    }
    for (uint64_t k = 0; k < n; k++)
        assert_int_equal(deactivate_grain(c, corr++, "echo", 100 + k), GPUBRIDGE__STATUS__STATUS_OK);
    for (int tries = 0;; tries++) { /* BUSY within a sweep's back-off (activation.c) */
        assert_true(tries < 10000);
        st = call_echo(c, corr++, refused, &count, err, sizeof err);
        if (st == GPUBRIDGE__STATUS__STATUS_OK)
            break;
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_BUSY);
        usleep(200);
    }
    assert_int_equal(count, 1);
    zmq_close(c);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
}

/* A client's requests cannot flood the bridge's log: 500 PageRank GraphInits
 * the arena cannot hold each get their error, naming arena_mb, while the
 * log's warning about them is rate-limited (10 lines per 10 s window). */
static void test_refusals_do_not_flood_the_log(void **state)
{
    (void)state;
    bridge_t b;
    assert_int_equal(bridge_start(&b, "arena_mb = 1;\n"), 0);
    void *c = client_open(b.endpoint);
    /* GraphInit{node_count: 2^31}: 64 GiB of arena */
    const uint8_t init[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x08};
    enum { N = 500, PER_FRAME = 50 };
    const uint64_t t0 = e2e_ms();
    for (uint64_t corr = 1; corr <= N; corr += PER_FRAME) {
        Gpubridge__Envelope envs[PER_FRAME], *pe[PER_FRAME];
        Gpubridge__GrainId g = GPUBRIDGE__GRAIN_ID__INIT;
        g.type = (char *)"pagerank.sender";
        for (int i = 0; i < PER_FRAME; i++) {
            gpubridge__envelope__init(&envs[i]);
            envs[i].correlation_id = corr + (uint64_t)i;
            envs[i].grain = &g;
            envs[i].kind = GPUBRIDGE__KIND__KIND_REQUEST;
            envs[i].message_type = 9;
            envs[i].payload.data = (uint8_t *)init;
            envs[i].payload.len = sizeof init;
            pe[i] = &envs[i];
        }
        Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
        batch.n_envelopes = PER_FRAME;
        batch.envelopes = pe;
        Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
        f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
        f.batch = &batch;
        send_frame(c, &f);
        for (int got = 0; got < PER_FRAME;) {
            Gpubridge__ServerFrame *sf = recv_frame(c, 10000 * E2E_SLOW);
            assert_non_null(sf);
            size_t n;
            Gpubridge__Reply **rs = frame_replies(sf, &n);
            for (size_t k = 0; k < n; k++, got++) {
                assert_int_equal(rs[k]->status, GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR);
                assert_non_null(strstr(rs[k]->error, "arena_mb"));
            }
            gpubridge__server_frame__free_unpacked(sf, NULL);
        }
    }
    still_serves(c);
    const uint64_t elapsed = e2e_ms() - t0;
    zmq_close(c);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000), 0);
    FILE *f = fopen(b.log, "r");
    assert_non_null(f);
    char line[2048];
    unsigned lines = 0;
    while (fgets(line, sizeof line, f))
        lines += strstr(line, "PageRank job") != NULL && strstr(line, "refused") != NULL;
    fclose(f);
    const unsigned bound = 10 * (unsigned)(elapsed / 10000 + 2);
    if (lines == 0 || lines > bound)
        fail_msg("%u log lines for %d refused GraphInits in %llu ms (at most %u)", lines, N,
                 (unsigned long long)elapsed, bound);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message_passing),   cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_client_disconnects), cmocka_unit_test(test_client_faults),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_control),            cmocka_unit_test(test_one_way),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_terminated_grain_type),
        cmocka_unit_test(test_reserved_ids),
    };
    const struct CMUnitTest standalone[] = {
        cmocka_unit_test(test_sigterm_under_load),
        cmocka_unit_test(test_routing_id_squatters),
        cmocka_unit_test(test_unread_large_replies),
        cmocka_unit_test(test_slow_frames_bounded),
        cmocka_unit_test(test_curve),
        cmocka_unit_test(test_activation_collection),
        cmocka_unit_test(test_evicted_store_bound),
        cmocka_unit_test(test_refusals_do_not_flood_the_log),
    };
    if (argc > 1) /* a test name or pattern: only those (test_e2e_tmp.sh) */
        cmocka_set_test_filter(argv[1]);
    printf("e2e: mode %s\n", e2e_mode());
    if (strcmp(e2e_mode(), "cpu") != 0)
        gb_require_gpu();
    int failed = cmocka_run_group_tests_name("bridge end to end", tests, setup, teardown);
    failed += cmocka_run_group_tests_name("bridge end to end, own bridge", standalone, NULL, NULL);
    /* No zmq_ctx_term: after a failed assertion a socket may still be open,
     * and terminating would wait for it forever. Exit frees everything. */
    return failed ? 1 : 0;
}
