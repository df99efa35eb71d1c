/* A sticky CUDA error (illegal address, 700) from a test-only faulting
 * message: detected, reported with its code and name, status shows the
 * kernel failed, nothing hangs, and sends are refused. The context is
 * unusable afterwards, so each case runs in its own process:
 *   test_gpu_sticky                 echo on a ring kernel, persistent
 *   test_gpu_sticky team-relaunch   pagerank.aggregator on a team kernel,
 *                                   relaunched: the test flags must reach
 *                                   its worker blocks (team_kernel.cuh hands
 *                                   them over in device memory) */
#include "gpu_skip.h"
#include "runtime_cases.h"

#include "pagerank.h"

static int g_team;

static void test_sticky_error(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for(g_team ? "pagerank.aggregator" : "echo", 64, g_team ? 256 : 64, 64);
    unsigned char *arena = NULL;
    const size_t arena_size = 1 << 20;
    if (g_team) {
        assert_int_equal(gb_arena_new(g_mode, 0, arena_size, &arena), GB_OK);
        p.arena = arena;
        p.arena_size = arena_size;
    }
    p.test_flags = GB_TEST_ALLOW_FAULT;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    gb_reply_t r;
    char buf[64];
    if (g_team) {
        /* a served request first: a START before any graph is an error reply */
        unsigned char rec[GB_PR_START_LEN];
        assert_int_equal(gb_rk_send(rk, 1, 1, GB_PR_MSG_START, rec, gb_pr_rec_start(rec, 0, 0, 0.85, 0, 8)), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.status, GB_SLOT_HANDLER_ERROR);
    } else {
        assert_int_equal(gb_rk_send(rk, 1, 1, GB_ECHO_MSG_ECHO, "ok", 2), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
    }

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
    if (arena)
        gb_arena_free(g_mode, arena); /* fails quietly in the broken context; the process ends next */
}

int main(int argc, char **argv)
{
    gb_require_gpu();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sticky_error)};
    g_team = argc > 1 && strcmp(argv[1], "team-relaunch") == 0;
    if (argc > 1 && !g_team) {
        fprintf(stderr, "usage: test_gpu_sticky [team-relaunch]\n");
        return 2;
    }
    g_mode = g_team ? GB_MODE_RELAUNCH : GB_MODE_PERSISTENT;
    return cmocka_run_group_tests_name(g_team ? "sticky CUDA error, team kernel, relaunch" : "sticky CUDA error",
                                       tests, NULL, NULL);
}
