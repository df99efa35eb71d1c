/* Relaunch mode on the GPU: the runtime cases with mapped placement and both
 * fallback placements, and the run-time fallback from a persistent kernel
 * that shows no heartbeat to relaunch mode, losing nothing. */
#include "gpu_skip.h"
#include "runtime_cases.h"

static void test_heartbeat_fallback(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for("echo", 64, 64, 64);
    p.mode = GB_MODE_PERSISTENT;
    p.heartbeat_deadline_ms = 200;
    p.test_flags = GB_TEST_SKIP_HEARTBEAT;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    /* In flight before the launch: must survive the fallback. */
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(gb_rk_send(rk, 5, i, GB_ECHO_MSG_ECHO, &i, sizeof i), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.mode, GB_MODE_RELAUNCH);
    assert_true(strstr(st.fallback_reason, "heartbeat") != NULL);
    assert_int_equal(st.state, GB_RK_RUNNING);
    for (uint64_t i = 10; i < 20; i++)
        assert_int_equal(gb_rk_send(rk, 5, i, GB_ECHO_MSG_ECHO, &i, sizeof i), GB_OK);
    for (uint64_t i = 0; i < 20; i++) {
        gb_reply_t r;
        uint64_t v;
        recv_one(rk, &r, &v, sizeof v, 5000);
        assert_int_equal(r.corr, i);
        assert_int_equal(v, i);
        assert_int_equal(r.aux, i + 1); /* turn order kept across the switch */
    }
    gb_rk_status(rk, &st);
    assert_int_equal(st.processed, 20);
    assert_true(st.launches >= 1);
    gb_rk_destroy(&rk);
}

/* Every relaunch reports why it stopped; a budget smaller than the batch
 * takes several launches and loses nothing. */
static void test_budget_exits(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for("echo", 256, 64, 1024);
    p.max_messages_per_launch = 16;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    for (uint64_t i = 0; i < 200; i++)
        assert_int_equal(gb_rk_send(rk, i % 7, i, GB_ECHO_MSG_ECHO, &i, sizeof i), GB_OK);
    for (uint64_t i = 0; i < 200; i++) {
        gb_reply_t r;
        uint64_t v;
        recv_one(rk, &r, &v, sizeof v, 5000);
        assert_int_equal(r.corr, i);
    }
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_true(st.launches >= 200 / 16);
    assert_true(st.exit_reason == GB_EXIT_INPUT_EMPTY || st.exit_reason == GB_EXIT_BUDGET_SPENT);
    assert_int_equal(st.processed, 200);
    gb_rk_destroy(&rk);
}

/* Inline launches (up to 16 requests in the kernel's parameters) and ring
 * kernel launches take turns on one grain type. Each burst is published while
 * the grain type is deactivated, so activation hands the backend all of it at
 * once: bursts of up to 16 go out as one inline launch, larger ones as ring
 * kernel launches. Bursts over two keys put one grain's requests several
 * times into one inline launch; now and then a request of an unknown type
 * gets an error reply. Every reply comes in order, with its grain's turn
 * count, and the counters match. */
static void test_inline_bursts(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {1, 2, 16, 17, 3, 1, 40, 15, 16, 5, 33, 1, 4};
    gb_rk_t *rk = start("echo", 256, 64, 1024);
    uint32_t count[8] = {0};
    uint64_t corr = 0, bad = 0;
    for (int round = 0; round < 4; round++) {
        for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
            const uint32_t n = sizes[b], keys = (b + round) % 2 ? 8 : 2;
            assert_int_equal(gb_rk_deactivate(rk, 5000), GB_OK);
            for (uint32_t i = 0; i < n; i++) {
                const uint64_t c = corr + i, key = (c * 7) % keys;
                const uint16_t type = c % 11 == 5 ? 99 : GB_ECHO_MSG_ECHO;
                assert_int_equal(gb_rk_send(rk, key, c, type, &c, sizeof c), GB_OK);
            }
            assert_int_equal(gb_rk_activate(rk, 5000), GB_OK);
            for (uint32_t i = 0; i < n; i++, corr++) {
                gb_reply_t r;
                uint64_t v = 0;
                recv_one(rk, &r, &v, sizeof v, 5000);
                assert_int_equal(r.corr, corr);
                assert_int_equal(r.key, (corr * 7) % keys);
                if (corr % 11 == 5) {
                    assert_int_equal(r.status, GB_SLOT_UNKNOWN_MESSAGE_TYPE);
                    bad++;
                    continue;
                }
                assert_int_equal(r.status, GB_SLOT_OK);
                assert_int_equal(v, corr);
                assert_int_equal(r.aux, ++count[r.key]);
            }
        }
    }
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.processed, corr);
    assert_int_equal(st.errors, bad);
    assert_int_equal(st.received, corr);
    gb_rk_destroy(&rk);
}

/* Inline launches queue behind one another (mapped placement: up to 64 in
 * flight), and a ring kernel launch behind them. Requests sent one at a time
 * without waiting for replies each go out as a launch of their own (with two
 * in flight at most, every third waited for the stream instead); bursts of
 * 20, more than an inline launch carries, go between them. Three keys: every
 * reply comes in order with its grain's turn count, and the counters match. */
static void test_inline_queue(void **state)
{
    (void)state;
    gb_rk_t *rk = start("echo", 1024, 64, 1024);
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    const int queues = st.placement == GB_PLACEMENT_MAPPED && !getenv("GPUBRIDGE_KERNEL_FLAGS");
    uint32_t count[3] = {0};
    uint64_t sent = 0, got = 0;
    for (int round = 0; round < 6; round++) {
        const uint64_t launches0 = st.launches;
        const uint32_t singles = round == 0 ? 40 : 7 + 5 * (uint32_t)round;
        for (uint32_t i = 0; i < singles; i++, sent++)
            assert_int_equal(gb_rk_send(rk, sent % 3, sent, GB_ECHO_MSG_ECHO, &sent, sizeof sent), GB_OK);
        gb_rk_status(rk, &st);
        if (queues && round == 0)
            assert_int_equal(st.launches - launches0, singles);
        if (round % 2) { /* a burst, published at once */
            for (uint32_t i = 0; i < 20; i++, sent++) {
                gb_slot_hdr_t *s = gb_rk_claim(rk);
                assert_non_null(s);
                s->key = sent % 3;
                s->corr = sent;
                s->type = GB_ECHO_MSG_ECHO;
                s->len = sizeof sent;
                memcpy(gb_slot_payload(s), &sent, sizeof sent);
            }
            gb_rk_publish(rk);
        }
        for (; got < sent; got++) {
            gb_reply_t r;
            uint64_t v = 0;
            recv_one(rk, &r, &v, sizeof v, 5000);
            assert_int_equal(r.corr, got);
            assert_int_equal(r.status, GB_SLOT_OK);
            assert_int_equal(v, got);
            assert_int_equal(r.aux, ++count[got % 3]);
        }
        gb_rk_status(rk, &st);
    }
    assert_int_equal(st.processed, sent);
    assert_int_equal(st.errors, 0);
    gb_rk_destroy(&rk);
}

int main(void)
{
    gb_require_gpu();
    const struct CMUnitTest tests[] = {GB_RUNTIME_CASES, cmocka_unit_test(test_budget_exits),
                                       cmocka_unit_test(test_inline_bursts), cmocka_unit_test(test_inline_queue)};
    const struct CMUnitTest fallback[] = {cmocka_unit_test(test_heartbeat_fallback)};
    g_mode = GB_MODE_RELAUNCH;
    g_force_fallback = 0;
    int failed = cmocka_run_group_tests_name("relaunch, mapped", tests, NULL, NULL);
    g_force_fallback = 1;
    g_cycles = 20; /* the 100-cycle run is the mapped group's */
    failed += cmocka_run_group_tests_name("relaunch, device + pinned staging", tests, NULL, NULL);
    /* Inline replies through device memory and a copy node, where no mapped
     * outbox can be had (GBK_F_OUTBOX_COPY). */
    setenv("GPUBRIDGE_KERNEL_FLAGS", "8", 1);
    failed += cmocka_run_group_tests_name("relaunch, device + pinned staging, outbox copied", tests, NULL, NULL);
    unsetenv("GPUBRIDGE_KERNEL_FLAGS");
    setenv("GPUBRIDGE_FORCE_MALLOC_STAGING", "1", 1);
    failed += cmocka_run_group_tests_name("relaunch, device + malloc staging", tests, NULL, NULL);
    unsetenv("GPUBRIDGE_FORCE_MALLOC_STAGING");
    g_force_fallback = 0;
    g_cycles = 20;
    /* The ring kernel's own single-request path, which inline launches
     * otherwise take over (GBK_F_NO_INLINE). */
    setenv("GPUBRIDGE_KERNEL_FLAGS", "2", 1);
    failed += cmocka_run_group_tests_name("relaunch, mapped, no inline launches", tests, NULL, NULL);
    unsetenv("GPUBRIDGE_KERNEL_FLAGS");
    failed += cmocka_run_group_tests_name("persistent -> relaunch on missing heartbeat, mapped", fallback, NULL,
                                          NULL);
    g_force_fallback = 1;
    failed += cmocka_run_group_tests_name("persistent -> relaunch on missing heartbeat, staging", fallback,
                                          NULL, NULL);
    return failed ? 1 : 0;
}
