/* test_client.c: libgpubridge against fake bridges in this process
 * (fake_bridge.c: a ROUTER thread that answers like a bridge, splits batch
 * replies over frames out of order, and counts what it received): round
 * trips, pipelining and batching, timeouts, connection and CURVE failures,
 * error replies, placement over two endpoints, typed and control helpers,
 * bad arguments. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "fake_bridge.h"
#include "gpubridge_client.h"

static gbc_client_t *client_for(fake_t *const *fakes, size_t n, const gbc_options_t *opt)
{
    const char *eps[4];
    for (size_t i = 0; i < n; i++)
        eps[i] = fakes[i]->endpoint;
    gbc_client_t *c = NULL;
    assert_int_equal(gbc_client_new(eps, n, opt, &c), GBC_OK);
    assert_non_null(c);
    return c;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* Tests.                                                                    */

static void test_call_round_trip(void **state)
{
    (void)state;
    fake_t *f = fake_start(NULL, NULL);
    gbc_client_t *c = client_for(&f, 1, NULL);
    gbc_reply_t r;
    assert_int_equal(gbc_call(c, "test", 7, 5, "hello", 5, &r, 2000), GBC_OK);
    assert_int_equal(r.correlation_id, 1);
    assert_int_equal(r.status, GBC_STATUS_OK);
    assert_null(r.error);
    assert_int_equal(r.message_type, 6);
    assert_int_equal(r.payload_len, 5);
    assert_memory_equal(r.payload, "hello", 5);
    assert_int_equal(r.endpoint, 0);
    gbc_reply_clear(&r);
    assert_null(r.payload);
    gbc_reply_clear(&r); /* twice is fine */
    /* Empty payload; ids grow by one; 0 means the default timeout. */
    assert_int_equal(gbc_call(c, "test", 7, 1, NULL, 0, &r, 0), GBC_OK);
    assert_int_equal(r.correlation_id, 2);
    assert_int_equal(r.payload_len, 0);
    assert_null(r.payload);
    gbc_reply_clear(&r);
    /* A lone call travels as ClientFrame{envelope}. */
    assert_int_equal(atomic_load(&f->frames_envelope), 2);
    assert_int_equal(atomic_load(&f->frames_batch), 0);
    gbc_client_destroy(&c);
    assert_null(c);
    assert_int_equal(atomic_load(&f->bad_order), 0);
    fake_stop(&f);
}

static void test_error_replies(void **state)
{
    (void)state;
    fake_t *f = fake_start(NULL, NULL);
    gbc_client_t *c = client_for(&f, 1, NULL);
    gbc_reply_t r;
    assert_int_equal(gbc_call(c, "nosuch", 1, 1, "x", 1, &r, 2000), GBC_ERR_STATUS);
    assert_int_equal(r.status, GBC_STATUS_UNKNOWN_GRAIN_TYPE);
    assert_string_equal(r.error, "no grain type 'nosuch'");
    assert_int_equal(gbc_last_status(), GBC_STATUS_UNKNOWN_GRAIN_TYPE);
    assert_non_null(strstr(gbc_last_error(), "STATUS_UNKNOWN_GRAIN_TYPE"));
    assert_non_null(strstr(gbc_last_error(), "no grain type 'nosuch'"));
    gbc_reply_clear(&r);
    /* Through a typed helper: the status and text come from gbc_last_*. */
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 1, 1}, res[4];
    assert_int_equal(gbc_vecadd(c, 3, GBC_VECADD_ADD, a, b, 4, res, 2000), GBC_ERR_STATUS);
    assert_int_equal(gbc_last_status(), GBC_STATUS_TOO_LARGE);
    assert_non_null(strstr(gbc_last_error(), "exceed the vecadd slot"));
    /* IEEE division: x/0 is inf, no error. */
    assert_int_equal(gbc_vecadd(c, 3, GBC_VECADD_DIV, a, b, 2, res, 2000), GBC_OK);
    assert_true(res[0] == 1 && isinf(res[1]));
    /* Through send/poll. */
    uint64_t id;
    assert_int_equal(gbc_send(c, "nosuch", 2, 1, NULL, 0, &id), GBC_OK);
    assert_int_equal(gbc_poll(c, &r, 2000), GBC_ERR_STATUS);
    assert_int_equal(r.correlation_id, id);
    assert_int_equal(r.status, GBC_STATUS_UNKNOWN_GRAIN_TYPE);
    gbc_reply_clear(&r);
    /* A success clears the last error. */
    assert_int_equal(gbc_call(c, "test", 1, 1, NULL, 0, &r, 2000), GBC_OK);
    assert_string_equal(gbc_last_error(), "");
    assert_int_equal(gbc_last_status(), GBC_STATUS_OK);
    gbc_reply_clear(&r);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_timeouts(void **state)
{
    (void)state;
    fake_t *f = fake_start(NULL, NULL);
    gbc_client_t *c = client_for(&f, 1, NULL);
    gbc_reply_t r;
    int64_t t0 = now_ms();
    assert_int_equal(gbc_call(c, "silent", 1, 1, NULL, 0, &r, 200), GBC_ERR_TIMEOUT);
    int64_t dt = now_ms() - t0;
    assert_true(dt >= 195 && dt < 1000);
    assert_null(r.payload);
    assert_non_null(strstr(gbc_last_error(), "no reply"));
    /* Pipelined: a silent request stays in flight; poll times out. */
    assert_int_equal(gbc_send(c, "silent", 1, 1, NULL, 0, NULL), GBC_OK);
    t0 = now_ms();
    assert_int_equal(gbc_poll(c, &r, 150), GBC_ERR_TIMEOUT);
    dt = now_ms() - t0;
    assert_true(dt >= 145 && dt < 1000);
    assert_int_equal(gbc_poll(c, &r, 0), GBC_ERR_TIMEOUT);
    assert_int_equal(gbc_in_flight(c), 1);
    /* The client stays usable. */
    assert_int_equal(gbc_call(c, "test", 1, 1, "a", 1, &r, 2000), GBC_OK);
    gbc_reply_clear(&r);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_not_connected(void **state)
{
    (void)state;
    char ep[128];
    endpoint_name(ep, sizeof ep);
    const char *eps[1] = {ep};
    gbc_options_t opt = {.timeout_ms = 150};
    gbc_client_t *c = NULL;
    assert_int_equal(gbc_client_new(eps, 1, &opt, &c), GBC_OK);
    gbc_reply_t r;
    int64_t t0 = now_ms();
    assert_int_equal(gbc_call(c, "test", 1, 1, NULL, 0, &r, GBC_TIMEOUT_DEFAULT), GBC_ERR_CONNECT);
    int64_t dt = now_ms() - t0;
    assert_true(dt >= 145 && dt < 1000);
    assert_non_null(strstr(gbc_last_error(), "not connected"));
    uint64_t id;
    assert_int_equal(gbc_send(c, "test", 1, 1, "q", 1, &id), GBC_OK); /* queued */
    assert_int_equal(gbc_flush(c), GBC_ERR_CONNECT);
    assert_int_equal(gbc_poll(c, &r, 0), GBC_ERR_TIMEOUT);
    /* The bridge comes up: the queued request and new calls go through. */
    fake_t *f = fake_start(ep, NULL);
    assert_int_equal(gbc_poll(c, &r, 3000), GBC_OK);
    assert_int_equal(r.correlation_id, id);
    assert_memory_equal(r.payload, "q", 1);
    gbc_reply_clear(&r);
    assert_int_equal(gbc_call(c, "test", 1, 1, NULL, 0, &r, 2000), GBC_OK);
    gbc_reply_clear(&r);
    /* The failed call was never sent. */
    assert_int_equal(atomic_load(&f->envelopes), 2);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_pipelining(void **state)
{
    (void)state;
    enum { N = 1000 };
    fake_t *f = fake_start(NULL, NULL);
    gbc_options_t opt = {.max_batch = 64};
    gbc_client_t *c = client_for(&f, 1, &opt);
    /* The first id is 1; later ones follow. */
    for (uint64_t i = 0; i < N; i++) {
        uint64_t id = 0, v = i * 7919;
        assert_int_equal(gbc_send(c, "test", i % 13, 9, &v, sizeof v, &id), GBC_OK);
        assert_int_equal(id, i + 1);
    }
    assert_int_equal(gbc_in_flight(c), N);
    static bool seen[N + 1];
    memset(seen, 0, sizeof seen);
    gbc_reply_t r;
    for (int k = 0; k < N; k++) {
        assert_int_equal(gbc_poll(c, &r, 3000), GBC_OK);
        assert_true(r.correlation_id >= 1 && r.correlation_id <= N);
        assert_false(seen[r.correlation_id]);
        seen[r.correlation_id] = true;
        uint64_t v;
        assert_int_equal(r.payload_len, sizeof v);
        memcpy(&v, r.payload, sizeof v);
        assert_int_equal(v, (r.correlation_id - 1) * 7919);
        assert_int_equal(r.message_type, 10);
        gbc_reply_clear(&r);
    }
    assert_int_equal(gbc_in_flight(c), 0);
    assert_int_equal(gbc_poll(c, &r, 100), GBC_ERR_EMPTY);
    /* Batches, never over max_batch. */
    assert_int_equal(atomic_load(&f->envelopes), N);
    assert_true(atomic_load(&f->frames_batch) >= N / 64);
    assert_int_equal(atomic_load(&f->max_batch), 64);
    assert_int_equal(atomic_load(&f->bad_order), 0);
    /* A call after queued sends to the same grain goes out behind them. */
    uint64_t ids[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(gbc_send(c, "test", 5, 1, NULL, 0, &ids[i]), GBC_OK);
    assert_int_equal(gbc_call(c, "test", 5, 1, NULL, 0, &r, 2000), GBC_OK);
    assert_int_equal(r.correlation_id, ids[2] + 1);
    gbc_reply_clear(&r);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gbc_poll(c, &r, 2000), GBC_OK);
        gbc_reply_clear(&r);
    }
    assert_int_equal(atomic_load(&f->bad_order), 0);
    gbc_client_destroy(&c);

    /* Many more in flight, default batches: every id comes back once. */
    enum { M = 20000 };
    c = client_for(&f, 1, NULL);
    static bool seen2[M + 1];
    memset(seen2, 0, sizeof seen2);
    for (uint64_t i = 0; i < M; i++)
        assert_int_equal(gbc_send(c, "test", i, 2, &i, sizeof i, NULL), GBC_OK);
    for (int k = 0; k < M; k++) {
        assert_int_equal(gbc_poll(c, &r, 3000), GBC_OK);
        assert_false(seen2[r.correlation_id]);
        seen2[r.correlation_id] = true;
        gbc_reply_clear(&r);
    }
    assert_int_equal(gbc_in_flight(c), 0);
    assert_int_equal(atomic_load(&f->max_batch), 256);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_no_batching_and_frame_limit(void **state)
{
    (void)state;
    fake_t *f = fake_start(NULL, NULL);
    gbc_options_t opt = {.max_batch = 1, .max_frame_bytes = 4096};
    gbc_client_t *c = client_for(&f, 1, &opt);
    static uint8_t big[8192];
    gbc_reply_t r;
    assert_int_equal(gbc_send(c, "test", 1, 1, big, sizeof big, NULL), GBC_ERR_TOO_LARGE);
    assert_int_equal(gbc_call(c, "test", 1, 1, big, sizeof big, &r, 1000), GBC_ERR_TOO_LARGE);
    for (int i = 0; i < 20; i++)
        assert_int_equal(gbc_send(c, "test", 1, 1, big, 500, NULL), GBC_OK);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(gbc_poll(c, &r, 2000), GBC_OK);
        gbc_reply_clear(&r);
    }
    assert_int_equal(atomic_load(&f->frames_batch), 0);
    assert_int_equal(atomic_load(&f->frames_envelope), 20);
    gbc_client_destroy(&c);
    /* Batching by bytes: frames stay within max_frame_bytes. */
    opt.max_batch = 0;
    c = client_for(&f, 1, &opt);
    for (int i = 0; i < 100; i++)
        assert_int_equal(gbc_send(c, "test", 1, 1, big, 500, NULL), GBC_OK);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(gbc_poll(c, &r, 2000), GBC_OK);
        assert_int_equal(r.payload_len, 500);
        gbc_reply_clear(&r);
    }
    assert_true(atomic_load(&f->max_frame) <= 4096);
    assert_true(atomic_load(&f->frames_batch) >= 100 * 500 / 4096);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_placement(void **state)
{
    (void)state;
    /* Fixed values: the hash is part of the wire contract between clients. */
    assert_int_equal(gbc_placement("vecadd", 7, 1), 0);
    assert_int_equal(gbc_placement("vecadd", 7, 0), 0);
    /* Computed by an independent implementation of the documented hash. */
    static const size_t golden4[8] = {1, 3, 0, 0, 1, 0, 3, 0};
    static const size_t golden2[8] = {0, 0, 1, 0, 0, 1, 1, 1};
    for (uint64_t k = 0; k < 8; k++) {
        assert_int_equal(gbc_placement("vecadd", k, 4), golden4[k]);
        assert_int_equal(gbc_placement("test", k, 2), golden2[k]);
    }
    fake_t *f[2] = {fake_start(NULL, NULL), fake_start(NULL, NULL)};
    gbc_client_t *c = client_for(f, 2, NULL);
    assert_int_equal(gbc_endpoint_count(c), 2);
    assert_string_equal(gbc_endpoint(c, 1), f[1]->endpoint);
    assert_null(gbc_endpoint(c, 2));
    size_t per[2] = {0, 0};
    gbc_reply_t r;
    for (uint64_t k = 0; k < 200; k++) {
        size_t e = gbc_endpoint_of(c, "test", k);
        assert_int_equal(e, gbc_placement("test", k, 2));
        assert_int_equal(gbc_call(c, "test", k, 1, &k, sizeof k, &r, 2000), GBC_OK);
        assert_int_equal(r.endpoint, e);
        gbc_reply_clear(&r);
        per[e]++;
        /* Pipelined requests land on the same endpoint. */
        assert_int_equal(gbc_send(c, "test", k, 1, &k, sizeof k, NULL), GBC_OK);
    }
    for (int k = 0; k < 200; k++) {
        assert_int_equal(gbc_poll(c, &r, 2000), GBC_OK);
        uint64_t key;
        memcpy(&key, r.payload, sizeof key);
        assert_int_equal(r.endpoint, gbc_placement("test", key, 2));
        gbc_reply_clear(&r);
    }
    assert_true(per[0] >= 60 && per[1] >= 60);
    assert_int_equal(atomic_load(&f[0]->envelopes), 2 * per[0]);
    assert_int_equal(atomic_load(&f[1]->envelopes), 2 * per[1]);
    /* The grain type is part of the hash. */
    int differ = 0;
    for (uint64_t k = 0; k < 64; k++)
        differ += gbc_placement("a", k, 2) != gbc_placement("b", k, 2);
    assert_true(differ > 0);
    gbc_client_destroy(&c);
    fake_stop(&f[0]);
    fake_stop(&f[1]);
}

static void test_typed_helpers(void **state)
{
    (void)state;
    fake_t *f = fake_start(NULL, NULL);
    gbc_client_t *c = client_for(&f, 1, NULL);
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, res[3];
    assert_int_equal(gbc_vecadd(c, 7, GBC_VECADD_ADD, a, b, 3, res, 2000), GBC_OK);
    assert_true(res[0] == 5 && res[1] == 7 && res[2] == 9);
    assert_int_equal(gbc_vecadd(c, 7, GBC_VECADD_MUL, a, b, 3, res, 2000), GBC_OK);
    assert_true(res[0] == 4 && res[1] == 10 && res[2] == 18);
    assert_int_equal(gbc_vecadd(c, 7, GBC_VECADD_ADD, NULL, NULL, 0, NULL, 2000), GBC_OK);
    uint64_t id;
    assert_int_equal(gbc_vecadd_send(c, 8, GBC_VECADD_SUB, a, b, 3, &id), GBC_OK);
    gbc_reply_t r;
    assert_int_equal(gbc_poll(c, &r, 2000), GBC_OK);
    assert_int_equal(r.correlation_id, id);
    assert_int_equal(gbc_vecadd_result(&r, res, 3), GBC_OK);
    assert_true(res[0] == -3 && res[1] == -3 && res[2] == -3);
    assert_int_equal(gbc_vecadd_result(&r, res, 2), GBC_ERR_PROTO); /* wrong length */
    gbc_reply_clear(&r);
    gbc_echo_result_t e;
    assert_int_equal(gbc_echo(c, 3, "hello", 5, &e, 2000), GBC_OK);
    assert_int_equal(e.grain_count, 1);
    assert_int_equal(e.sequence, 1);
    assert_int_equal(e.data_len, 5);
    assert_int_equal(gbc_echo(c, 3, "again", 5, &e, 2000), GBC_OK);
    assert_int_equal(e.grain_count, 2);
    assert_int_equal(gbc_echo(c, 3, NULL, 0, NULL, 2000), GBC_OK);
    assert_int_equal(gbc_echo_send(c, 3, "x", 1, &id), GBC_OK);
    assert_int_equal(gbc_poll(c, &r, 2000), GBC_OK);
    assert_int_equal(gbc_echo_result(&r, &e), GBC_OK);
    assert_int_equal(e.grain_count, 4);
    assert_int_equal(e.sequence, 4);
    gbc_reply_clear(&r);
    /* A reply of the wrong message type is refused. */
    assert_int_equal(gbc_call(c, "test", 1, 7, "x", 1, &r, 2000), GBC_OK);
    assert_int_equal(gbc_vecadd_result(&r, res, 1), GBC_ERR_PROTO);
    gbc_reply_clear(&r);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_control(void **state)
{
    (void)state;
    fake_t *f[2] = {fake_start(NULL, NULL), fake_start(NULL, NULL)};
    gbc_client_t *c = client_for(f, 2, NULL);
    gbc_grain_status_t s, all[2];
    assert_int_equal(gbc_ctl_activate(c, 0, "vecadd", &s, 2000), GBC_OK);
    assert_string_equal(s.grain_type, "vecadd");
    assert_int_equal(s.state, GBC_GRAIN_STATE_ACTIVE);
    assert_string_equal(s.mode, "cpu");
    assert_int_equal(s.device, -1);
    assert_int_equal(gbc_ctl_deactivate(c, GBC_ALL_ENDPOINTS, "vecadd", all, 2000), GBC_OK);
    assert_int_equal(all[0].state, GBC_GRAIN_STATE_INACTIVE);
    assert_int_equal(all[1].state, GBC_GRAIN_STATE_INACTIVE);
    assert_int_equal(gbc_ctl_terminate(c, 1, "vecadd", NULL, 2000), GBC_OK);
    assert_int_equal(gbc_ctl_status(c, 1, "echo", &s, 2000), GBC_OK);
    assert_int_equal(s.heartbeat, 42);
    assert_string_equal(gbc_grain_state_name(s.state), "active");
    gbc_telemetry_t t;
    assert_int_equal(gbc_ctl_telemetry(c, 0, "echo", &t, 2000), GBC_OK);
    assert_int_equal(t.messages_processed, 1000);
    assert_int_equal(t.errors, 3);
    gbc_type_list_t l;
    assert_int_equal(gbc_ctl_list(c, 0, &l, 2000), GBC_OK);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.names[1], "vecadd");
    gbc_type_list_clear(&l);
    assert_null(l.names);
    gbc_detect_report_t d;
    assert_int_equal(gbc_ctl_detect(c, 1, &d, 2000), GBC_OK);
    assert_string_equal(d.mode, "cpu");
    assert_string_equal(d.rule_fired, "no-device -> cpu");
    assert_int_equal(gbc_ctl_deactivate_grain(c, "vecadd", 5, 2000), GBC_OK);
    assert_int_equal(gbc_ctl_deactivate_grain(c, "vecadd", 0, 2000), GBC_ERR_STATUS);
    assert_int_equal(gbc_last_status(), GBC_STATUS_NO_ACTIVATION);
    /* Control replies never leak into gbc_poll. */
    gbc_reply_t r;
    assert_int_equal(gbc_poll(c, &r, 0), GBC_ERR_EMPTY);
    gbc_client_destroy(&c);
    fake_stop(&f[0]);
    fake_stop(&f[1]);
}

static void test_garbage_from_bridge(void **state)
{
    (void)state;
    fake_t *f = fake_start(NULL, NULL);
    gbc_client_t *c = client_for(&f, 1, NULL);
    gbc_reply_t r;
    assert_int_equal(gbc_call(c, "garbage", 1, 1, "z", 1, &r, 2000), GBC_OK);
    assert_memory_equal(r.payload, "z", 1);
    gbc_reply_clear(&r);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_curve(void **state)
{
    (void)state;
    if (!zmq_has("curve"))
        skip();
    char spub[41], ssec[41], cpub[41], csec[41], wpub[41], wsec[41];
    assert_int_equal(zmq_curve_keypair(spub, ssec), 0);
    assert_int_equal(zmq_curve_keypair(cpub, csec), 0);
    assert_int_equal(zmq_curve_keypair(wpub, wsec), 0);
    fake_t *f = fake_start(NULL, ssec);
    gbc_options_t opt = {.curve_server_key = spub, .curve_public_key = cpub,
                         .curve_secret_key = csec, .timeout_ms = 300};
    gbc_client_t *c = client_for(&f, 1, &opt);
    gbc_reply_t r;
    assert_int_equal(gbc_call(c, "test", 1, 1, "s", 1, &r, 2000), GBC_OK);
    gbc_reply_clear(&r);
    gbc_client_destroy(&c);
    /* An ephemeral client key pair. */
    opt.curve_public_key = opt.curve_secret_key = NULL;
    c = client_for(&f, 1, &opt);
    assert_int_equal(gbc_call(c, "test", 1, 1, "s", 1, &r, 2000), GBC_OK);
    gbc_reply_clear(&r);
    gbc_client_destroy(&c);
    /* The wrong server key: the handshake fails, clearly. */
    opt.curve_server_key = wpub;
    c = client_for(&f, 1, &opt);
    assert_int_equal(gbc_call(c, "test", 1, 1, "s", 1, &r, 1000), GBC_ERR_AUTH);
    assert_non_null(strstr(gbc_last_error(), "CURVE handshake failed"));
    /* A CURVE bridge seen without CURVE: a handshake failure too. */
    gbc_client_destroy(&c);
    c = client_for(&f, 1, NULL);
    assert_int_equal(gbc_call(c, "test", 1, 1, "s", 1, &r, 1000), GBC_ERR_CONNECT);
    gbc_client_destroy(&c);
    fake_stop(&f);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    gbc_client_t *c = (gbc_client_t *)1;
    const char *good[1] = {"ipc:///tmp/gbc-test-unused.sock"};
    const char *empty[1] = {""};
    const char *bad[1] = {"nonsense://x"};
    assert_int_equal(gbc_client_new(NULL, 1, NULL, &c), GBC_ERR_INVALID);
    assert_null(c);
    assert_int_equal(gbc_client_new(good, 0, NULL, &c), GBC_ERR_INVALID);
    assert_int_equal(gbc_client_new(good, 1, NULL, NULL), GBC_ERR_INVALID);
    assert_int_equal(gbc_client_new(empty, 1, NULL, &c), GBC_ERR_INVALID);
    assert_int_equal(gbc_client_new(bad, 1, NULL, &c), GBC_ERR_INVALID);
    assert_non_null(strstr(gbc_last_error(), "nonsense://x"));
    gbc_options_t opt = {.timeout_ms = -5};
    assert_int_equal(gbc_client_new(good, 1, &opt, &c), GBC_ERR_INVALID);
    opt = (gbc_options_t){.curve_server_key = "short"};
    assert_int_equal(gbc_client_new(good, 1, &opt, &c), GBC_ERR_INVALID);
    opt = (gbc_options_t){.curve_public_key = "x"};
    assert_int_equal(gbc_client_new(good, 1, &opt, &c), GBC_ERR_INVALID);
    assert_null(c);
    gbc_client_destroy(NULL);
    gbc_client_destroy(&c);

    assert_int_equal(gbc_client_new(good, 1, NULL, &c), GBC_OK);
    gbc_reply_t r;
    uint64_t id;
    assert_int_equal(gbc_call(NULL, "test", 1, 1, NULL, 0, &r, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_call(c, NULL, 1, 1, NULL, 0, &r, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_call(c, "", 1, 1, NULL, 0, &r, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_call(c, "test", 1, 1, NULL, 3, &r, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_call(c, "test", 1, 1, NULL, 0, NULL, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_send(NULL, "test", 1, 1, NULL, 0, &id), GBC_ERR_INVALID);
    assert_int_equal(gbc_send(c, "", 1, 1, NULL, 0, &id), GBC_ERR_INVALID);
    assert_int_equal(gbc_send(c, "test", 1, 1, NULL, 1, &id), GBC_ERR_INVALID);
    assert_int_equal(gbc_poll(c, NULL, 0), GBC_ERR_INVALID);
    assert_int_equal(gbc_poll(NULL, &r, 0), GBC_ERR_INVALID);
    assert_int_equal(gbc_poll(c, &r, 0), GBC_ERR_EMPTY);
    assert_int_equal(gbc_flush(NULL), GBC_ERR_INVALID);
    assert_int_equal(gbc_flush(c), GBC_OK); /* nothing queued */
    float v[2] = {1, 2};
    assert_int_equal(gbc_vecadd(c, 1, (gbc_vecadd_op)9, v, v, 2, v, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_vecadd(c, 1, GBC_VECADD_ADD, NULL, v, 2, v, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_vecadd(c, 1, GBC_VECADD_ADD, v, v, 2, NULL, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_echo(c, 1, NULL, 4, NULL, 10), GBC_ERR_INVALID);
    gbc_grain_status_t s;
    assert_int_equal(gbc_ctl_status(c, 1, "vecadd", &s, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_ctl_status(c, GBC_ALL_ENDPOINTS, "vecadd", &s, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_ctl_activate(c, 0, "", &s, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_ctl_list(c, 0, NULL, 10), GBC_ERR_INVALID);
    assert_int_equal(gbc_in_flight(c), 0);
    assert_int_equal(gbc_in_flight(NULL), 0);
    gbc_client_destroy(&c);
    assert_null(c);

    assert_string_equal(gbc_strerror(GBC_OK), "ok");
    assert_string_equal(gbc_strerror((gbc_err)999), "unknown error");
    assert_string_equal(gbc_status_name(GBC_STATUS_INACTIVE), "STATUS_INACTIVE");
    assert_string_equal(gbc_status_name(99), "STATUS_?");
    for (int e = 0; e < GBC_ERR__COUNT; e++)
        assert_string_not_equal(gbc_strerror((gbc_err)e), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_round_trip),
        cmocka_unit_test(test_error_replies),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_not_connected),
        cmocka_unit_test(test_pipelining),
        cmocka_unit_test(test_no_batching_and_frame_limit),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_typed_helpers),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_garbage_from_bridge),
        cmocka_unit_test(test_curve),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
