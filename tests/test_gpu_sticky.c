/* A sticky CUDA error (illegal address, 700) from a test-only faulting
 * message: detected, reported with its code and name, status shows the
 * kernel failed, nothing hangs, and sends are refused. The context is
 * unusable afterwards, so this runs in its own process. */
#include "gpu_skip.h"
#include "runtime_cases.h"

static void test_sticky_error(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for("echo", 64, 64, 64);
    p.test_flags = GB_TEST_ALLOW_FAULT;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    gb_reply_t r;
    char buf[32];
    assert_int_equal(gb_rk_send(rk, 1, 1, GB_ECHO_MSG_ECHO, "ok", 2), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);

    assert_int_equal(gb_rk_send(rk, 1, 2, GB_MSG_TEST_FAULT, NULL, 0), GB_OK);
    uint64_t end = now_ms() + 10000;
    gb_err err = GB_OK;
    while ((err = gb_rk_poll(rk)) == GB_OK && now_ms() < end)
        ;
    assert_int_equal(err, GB_ERR_CUDA);
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.state, GB_RK_FAILED);
    assert_int_equal(st.last_error, 700);
    assert_string_equal(st.last_error_name, "cudaErrorIllegalAddress");
    assert_int_equal(gb_rk_send(rk, 1, 3, GB_ECHO_MSG_ECHO, "x", 1), GB_ERR_TERMINATED);
    assert_int_equal(gb_rk_recv(rk, &r, buf, sizeof buf), GB_ERR_TERMINATED);
    assert_int_equal(gb_rk_terminate(rk, 1000), GB_OK);
    gb_rk_destroy(&rk);
}

int main(void)
{
    gb_require_gpu();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sticky_error)};
    g_mode = GB_MODE_PERSISTENT;
    return cmocka_run_group_tests_name("sticky CUDA error", tests, NULL, NULL);
}
