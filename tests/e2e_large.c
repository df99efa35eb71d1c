/* End to end, messages larger than a slot (large_payload.h) through the real
 * daemon with its default configuration (64-byte vecadd and echo slots,
 * max_message_size 1 MiB): the upstream message-passing cases of 4 elements,
 * vectors of 100,000 elements checked element by element, a large echo, a
 * batch of large requests among small ones answered in order, a frame past
 * max_message_size refused with a clear error, and the message-passing
 * examples (C and Python) against that bridge. */
#include "e2e_harness.h"
#include "gpu_skip.h"

static bridge_t g_b;
static void *g_s;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(bridge_start(&g_b, ""), 0); /* the defaults: config/gpubridge.cfg */
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

/* A packed VectorAddRequest of n elements (malloc'd; *len its size). */
static uint8_t *pack_big(int op, const float *a, const float *b, size_t n, size_t *len)
{
    Gpubridge__VectorAddRequest r = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    r.op = (Gpubridge__VectorAddRequest__Op)op;
    r.n_a = r.n_b = n;
    r.a = (float *)a;
    r.b = (float *)b;
    uint8_t *buf = malloc(gpubridge__vector_add_request__get_packed_size(&r));
    assert_non_null(buf);
    *len = gpubridge__vector_add_request__pack(&r, buf);
    return buf;
}

static float apply(int op, float a, float b) { return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b; }

/* Checks reply r to a vecadd of a op b, n elements, every one. */
static void check_result(const Gpubridge__Reply *r, int op, const float *a, const float *b, size_t n)
{
    if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
        fail_msg("vecadd of %zu: status %d: %s", n, r->status, r->error);
    Gpubridge__VectorAddResponse *v = gpubridge__vector_add_response__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(v);
    assert_int_equal(v->n_result, n);
    for (size_t i = 0; i < n; i++)
        if (v->result[i] != apply(op, a[i], b[i]))
            fail_msg("element %zu of %zu (op %d): %g, expected %g", i, n, op, (double)v->result[i],
                     (double)apply(op, a[i], b[i]));
    gpubridge__vector_add_response__free_unpacked(v, NULL);
}

/* The upstream MessagePassingTest: 4 elements do not fit a 64-byte vecadd slot. */
static void test_upstream_cases(void **state)
{
    (void)state;
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    const float want[3][4] = {{11, 22, 33, 44}, {-9, -18, -27, -36}, {10, 40, 90, 160}};
    for (int op = 0; op < 4; op++) {
        float r[4];
        call_vecadd(g_s, 100 + (uint64_t)op, 7, op, a, b, 4, r);
        for (int i = 0; i < 4; i++)
            assert_true(r[i] == (op < 3 ? want[op][i] : a[i] / b[i]));
    }
}

static void test_large_vectors(void **state)
{
    (void)state;
    const size_t n = 100000;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.25f - 100.0f;
        b[i] = (float)(i % 97) + 0.5f;
    }
    for (int op = 0; op < 4; op++) {
        size_t len;
        uint8_t *buf = pack_big(op, a, b, n, &len);
        send_env(g_s, make_env(200 + (uint64_t)op, "vecadd", 8, 1, buf, len));
        free(buf);
        Gpubridge__ServerFrame *f;
        Gpubridge__Reply *r = recv_reply(g_s, &f, 60000);
        assert_int_equal(r->correlation_id, 200 + (uint64_t)op);
        check_result(r, op, a, b, n);
        gpubridge__server_frame__free_unpacked(f, NULL);
    }
    free(a);
    free(b);
}

/* Echo of 600,000 bytes: the reply carries them all, and the grain's count. */
static void test_large_echo(void **state)
{
    (void)state;
    const size_t n = 600000;
    uint8_t *data = malloc(n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 13 + 1);
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    er.sequence = 5;
    er.data.data = data;
    er.data.len = n;
    uint8_t *buf = malloc(gpubridge__echo_request__get_packed_size(&er));
    assert_non_null(buf);
    size_t len = gpubridge__echo_request__pack(&er, buf);
    send_env(g_s, make_env(300, "echo", 3, 1, buf, len));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(g_s, &f, 60000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    Gpubridge__EchoResponse *e = gpubridge__echo_response__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(e);
    assert_int_equal(e->sequence, 5);
    assert_int_equal(e->grain_count, 1);
    assert_int_equal(e->data.len, n);
    assert_memory_equal(e->data.data, data, n);
    gpubridge__echo_response__free_unpacked(e, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);
    free(buf);
    free(data);
}

/* One Batch frame: large and small requests to one grain alternate; every
 * reply comes, in order, right. */
static void test_large_batch(void **state)
{
    (void)state;
    enum { N = 10, BIG = 10000 };
    float *a = malloc(BIG * sizeof *a), *b = malloc(BIG * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < BIG; i++) {
        a[i] = (float)i;
        b[i] = 2.0f;
    }
    uint8_t *bufs[N];
    Gpubridge__Envelope envs[N], *ptrs[N];
    Gpubridge__GrainId gid = GPUBRIDGE__GRAIN_ID__INIT;
    gid.type = "vecadd";
    gid.key = 11;
    for (int i = 0; i < N; i++) {
        size_t len;
        bufs[i] = pack_big(2, a, b, i % 2 ? 3 : BIG, &len);
        gpubridge__envelope__init(&envs[i]);
        envs[i].correlation_id = 400 + (uint64_t)i;
        envs[i].grain = &gid;
        envs[i].kind = GPUBRIDGE__KIND__KIND_REQUEST;
        envs[i].message_type = 1;
        envs[i].payload.data = bufs[i];
        envs[i].payload.len = len;
        ptrs[i] = &envs[i];
    }
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.n_envelopes = N;
    batch.envelopes = ptrs;
    Gpubridge__ClientFrame fr = GPUBRIDGE__CLIENT_FRAME__INIT;
    fr.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    fr.batch = &batch;
    send_frame(g_s, &fr);
    int got = 0;
    while (got < N) {
        Gpubridge__ServerFrame *f = recv_frame(g_s, 60000);
        if (!f)
            fail_msg("%d of %d replies", got, N);
        size_t n;
        Gpubridge__Reply **rs = frame_replies(f, &n);
        for (size_t k = 0; k < n; k++, got++) {
            assert_int_equal(rs[k]->correlation_id, 400 + (uint64_t)got);
            check_result(rs[k], 2, a, b, got % 2 ? 3 : BIG);
        }
        gpubridge__server_frame__free_unpacked(f, NULL);
    }
    for (int i = 0; i < N; i++)
        free(bufs[i]);
    free(a);
    free(b);
}

/* Past max_message_size (1 MiB): STATUS_TOO_LARGE that says why; the bridge
 * keeps serving large messages. */
static void test_over_max_message_size(void **state)
{
    (void)state;
    const size_t n = 140000; /* about 1.12 MB on the wire */
    float *a = calloc(n, sizeof *a);
    assert_non_null(a);
    size_t len;
    uint8_t *buf = pack_big(0, a, a, n, &len);
    assert_true(len > 1048576);
    send_env(g_s, make_env(500, "vecadd", 1, 1, buf, len));
    free(buf);
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(g_s, &f, 20000);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_TOO_LARGE);
    if (!strstr(r->error, "max_message_size") || !strstr(r->error, "1048576"))
        fail_msg("unclear error: '%s'", r->error);
    gpubridge__server_frame__free_unpacked(f, NULL);
    float r4[4];
    const float b4[4] = {1, 2, 3, 4};
    call_vecadd(g_s, 501, 1, 0, b4, b4, 4, r4);
    assert_true(r4[3] == 8);
    free(a);
}

/* Runs a command line; returns its exit status. */
static int run_cmd(const char *cmd)
{
    fprintf(stderr, "e2e: %s\n", cmd);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The message-passing examples: upstream cases, 1,000 and 100,000 elements. */
static void test_examples_large(void **state)
{
    (void)state;
    const char *mp = getenv("GB_MP_BIN"), *src = getenv("GB_SOURCE_DIR"), *gen = getenv("GB_PYGEN");
    char cmd[2048];
    if (mp) {
        snprintf(cmd, sizeof cmd, "%s --endpoint %s --count 10 --timeout 60000 > %s/mp.out 2>&1; st=$?; "
                 "cat %s/mp.out; grep -q 'large 100000 div: all 100000 elements correct' %s/mp.out && exit $st; "
                 "exit 1", mp, g_b.endpoint, g_b.dir, g_b.dir, g_b.dir);
        assert_int_equal(run_cmd(cmd), 0);
    }
    if (!src || !gen || run_cmd("/usr/bin/python3 -c 'import zmq, google.protobuf' 2>/dev/null") != 0) {
        fprintf(stderr, "e2e: no python3-zmq here: the Python client runs in CI only\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/examples/python/message_passing.py --endpoint %s --gen %s "
             "--count 10 > %s/py.out 2>&1; st=$?; cat %s/py.out; "
             "grep -q 'large 100000 div: all 100000 elements correct' %s/py.out && exit $st; exit 1",
             src, g_b.endpoint, gen, g_b.dir, g_b.dir, g_b.dir);
    assert_int_equal(run_cmd(cmd), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upstream_cases),     cmocka_unit_test(test_large_vectors),
        cmocka_unit_test(test_large_echo),         cmocka_unit_test(test_large_batch),
        cmocka_unit_test(test_over_max_message_size), cmocka_unit_test(test_examples_large),
    };
    if (argc > 1) /* a test name or pattern: only those (test_e2e_tmp.sh) */
        cmocka_set_test_filter(argv[1]);
    printf("e2e large messages: mode %s\n", e2e_mode());
    if (strcmp(e2e_mode(), "cpu") != 0)
        gb_require_gpu();
    return cmocka_run_group_tests_name("large messages end to end", tests, setup, teardown) ? 1 : 0;
}
