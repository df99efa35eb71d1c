/* The runtime on the cpu backend: four worker lanes (grains spread over
 * threads: turn order must still hold), one, and inline on the caller's
 * thread. */
#include <pthread.h>
#include <sched.h>

#include "gpubridge/detail/grain_table.h"
#include "grain_registry.h"
#include "runtime_cases.h"

/* test.gate: message GATE_HOLD holds its lane's window until released, so a
 * test can pause the grain type while one lane is mid-window; any other
 * message answers at once. */
enum { GATE_HOLD = 1, GATE_PASS = 2 };
static int g_gate_entered, g_gate_open; /* atomic */

static uint16_t gate_handler(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                             uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx, (void)state, (void)in, (void)in_len, (void)out, (void)out_cap, (void)aux;
    if (type == GATE_HOLD) {
        __atomic_store_n(&g_gate_entered, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&g_gate_open, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    *out_len = 0;
    return GB_SLOT_OK;
}

typedef struct deactivation {
    gb_rk_t *rk;
    gb_err err;
    int returned; /* atomic */
} deactivation_t;

static void *deactivate_thread(void *arg)
{
    deactivation_t *d = arg;
    d->err = gb_rk_deactivate(d->rk, 5000);
    __atomic_store_n(&d->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A key of the given lane, other than `not`. */
static uint64_t key_on_lane(uint32_t lane, uint32_t lanes, uint64_t not)
{
    for (uint64_t k = 1;; k++)
        if (k != not && gb_grain_lane(k, lanes) == lane)
            return k;
}

/* With several lanes, a deactivation is acknowledged only once every lane's
 * window that began active has ended: a request published after
 * gb_rk_deactivate returned must wait for gb_rk_activate, even on a lane that
 * was mid-window (lane 0 alone used to acknowledge, and that lane then took
 * the request while paused). */
static void test_deactivate_waits_for_every_lane(void **state)
{
    (void)state;
    const uint32_t lanes = g_lanes ? g_lanes : 1;
    gb_rk_t *rk = start("test.gate", 64, 64, 1024);
    __atomic_store_n(&g_gate_entered, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_gate_open, 0, __ATOMIC_RELAXED);
    const uint64_t held = key_on_lane(lanes - 1, lanes, 0), probe = key_on_lane(lanes - 1, lanes, held);
    assert_int_equal(gb_rk_send(rk, held, 1, GATE_HOLD, NULL, 0), GB_OK);
    if (g_lanes == 0) { /* inline: the window runs in this thread's peek */
        __atomic_store_n(&g_gate_open, 1, __ATOMIC_RELEASE);
        gb_reply_t r;
        recv_one(rk, &r, NULL, 0, 5000);
        gb_rk_destroy(&rk);
        return;
    }
    while (!__atomic_load_n(&g_gate_entered, __ATOMIC_ACQUIRE))
        sched_yield();
    deactivation_t d = {rk, GB_OK, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, deactivate_thread, &d), 0);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    /* The held lane's window is still running: the deactivation waits for it. */
    const int early = __atomic_load_n(&d.returned, __ATOMIC_ACQUIRE);
    if (early) /* the request the held window would take if it could */
        assert_int_equal(gb_rk_send(rk, probe, 2, GATE_PASS, NULL, 0), GB_OK);
    __atomic_store_n(&g_gate_open, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(d.err, GB_OK);
    if (!early)
        assert_int_equal(gb_rk_send(rk, probe, 2, GATE_PASS, NULL, 0), GB_OK);
    gb_reply_t r;
    recv_one(rk, &r, NULL, 0, 5000);
    assert_int_equal(r.corr, 1);
    assert_true(no_reply_for(rk, 100)); /* the probe waits while paused */
    assert_int_equal(early, 0);
    assert_int_equal(gb_rk_activate(rk, 5000), GB_OK);
    recv_one(rk, &r, NULL, 0, 5000);
    assert_int_equal(r.corr, 2);
    assert_int_equal(r.status, GB_SLOT_OK);
    gb_rk_destroy(&rk);
}

int main(void)
{
    static const gb_grain_msg_t gate_msgs[] = {{GATE_HOLD, "Hold"}, {GATE_PASS, "Pass"}};
    static const gb_grain_desc_t gate = {GB_GRAIN_ABI, sizeof(gb_grain_desc_t), "test.gate", 8, 0, gate_msgs, 2, 0,
                                         gate_handler, NULL, NULL, NULL, 0, 0};
    char err[256];
    if (gb_grain_register(&gate, err, sizeof err) < 0) {
        fprintf(stderr, "test_runtime: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {GB_RUNTIME_CASES, cmocka_unit_test(test_deactivate_waits_for_every_lane)};
    g_mode = GB_MODE_CPU;
    g_lanes = 4;
    int failed = cmocka_run_group_tests_name("runtime cpu, 4 lanes", tests, NULL, NULL);
    g_lanes = 1;
    failed += cmocka_run_group_tests_name("runtime cpu, 1 lane", tests, NULL, NULL);
    g_lanes = 0;
    failed += cmocka_run_group_tests_name("runtime cpu, inline (no worker thread)", tests, NULL, NULL);
    return failed ? 1 : 0;
}
