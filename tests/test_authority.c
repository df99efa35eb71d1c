/* Control authority (authority.h): what counts as a local peer, which
 * operations need authority, and the supervisor's refusal of a whole frame. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "authority.h"
#include "control.pb-c.h"
#include "gpubridge.pb-c.h"

static void test_local_address(void **state)
{
    (void)state;
    const char *local[] = {"127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1", "localhost:1000:1000:42"};
    const char *remote[] = {"10.0.0.1", "192.0.2.2", "fd00::2", "::ffff:10.0.0.1", "128.0.0.1", "", "x"};
    for (size_t i = 0; i < sizeof local / sizeof *local; i++)
        assert_true(gb_authority_local_address(local[i]));
    for (size_t i = 0; i < sizeof remote / sizeof *remote; i++)
        assert_false(gb_authority_local_address(remote[i]));
    assert_false(gb_authority_local_address(NULL));
}

static void test_ops(void **state)
{
    (void)state;
    assert_true(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_ACTIVATE));
    assert_true(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_DEACTIVATE));
    assert_true(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_TERMINATE));
    assert_false(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_STATUS_REQUEST));
    assert_false(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST));
    assert_false(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES));
    assert_false(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_DETECT_REQUEST));
    assert_false(gb_authority_op_changes_state(GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN));
}

/* A message with no metadata is an inproc one: local, unless admin keys are
 * required (it has no CURVE key). */
static void test_peer_inproc(void **state)
{
    (void)state;
    gb_config_t cfg;
    gb_config_defaults(&cfg);
    zmq_msg_t m;
    zmq_msg_init_size(&m, 1);
    assert_true(gb_authority_peer(&cfg, &m));
    cfg.curve.enabled = true;
    cfg.curve.n_admin = 1;
    memset(cfg.curve.admin_clients[0], 'a', 40);
    assert_false(gb_authority_peer(&cfg, &m));
    zmq_msg_close(&m);
}

static size_t pack_batch(uint8_t *buf, int with_terminate)
{
    Gpubridge__Envelope e[3];
    Gpubridge__Envelope *ep[3] = {&e[0], &e[1], &e[2]};
    for (int i = 0; i < 3; i++)
        gpubridge__envelope__init(&e[i]);
    Gpubridge__GrainId g = GPUBRIDGE__GRAIN_ID__INIT;
    g.type = "vecadd";
    e[0].correlation_id = 5;
    e[0].kind = GPUBRIDGE__KIND__KIND_REQUEST;
    e[0].grain = &g;
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__Terminate t = GPUBRIDGE__TERMINATE__INIT;
    Gpubridge__StatusRequest q = GPUBRIDGE__STATUS_REQUEST__INIT;
    t.grain_type = q.grain_type = "vecadd";
    if (with_terminate) {
        c.op_case = GPUBRIDGE__CONTROL__OP_TERMINATE;
        c.terminate = &t;
    } else {
        c.op_case = GPUBRIDGE__CONTROL__OP_STATUS_REQUEST;
        c.status_request = &q;
    }
    e[1].correlation_id = 6;
    e[1].kind = GPUBRIDGE__KIND__KIND_CONTROL;
    e[1].control = &c;
    e[2].kind = GPUBRIDGE__KIND__KIND_ONE_WAY; /* no correlation id: no reply */
    e[2].grain = &g;
    Gpubridge__Batch b = GPUBRIDGE__BATCH__INIT;
    b.n_envelopes = 3;
    b.envelopes = ep;
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    f.batch = &b;
    return gpubridge__client_frame__pack(&f, buf);
}

static void test_refusal(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t len = pack_batch(buf, 0), out_len = 0, n = 0;
    assert_null(gb_authority_refusal(buf, len, &out_len, &n));
    assert_null(gb_authority_refusal((const uint8_t *)"\xff\xff", 2, &out_len, &n));
    len = pack_batch(buf, 1);
    uint8_t *out = gb_authority_refusal(buf, len, &out_len, &n);
    assert_non_null(out);
    assert_int_equal(n, 2);
    Gpubridge__ServerFrame *sf = gpubridge__server_frame__unpack(NULL, out_len, out);
    assert_non_null(sf);
    assert_int_equal(sf->body_case, GPUBRIDGE__SERVER_FRAME__BODY_BATCH);
    assert_int_equal(sf->batch->n_replies, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(sf->batch->replies[i]->correlation_id, 5 + i);
        assert_int_equal(sf->batch->replies[i]->status, GPUBRIDGE__STATUS__STATUS_UNAUTHORIZED);
        assert_non_null(strstr(sf->batch->replies[i]->error, "curve.admin_clients"));
    }
    gpubridge__server_frame__free_unpacked(sf, NULL);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_address),
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_peer_inproc),
        cmocka_unit_test(test_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
