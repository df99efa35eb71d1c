/* Test helpers for waiting on a ring kernel's replies (runtime_cases.h,
 * grains/pagerank/pagerank_cases.h). Include after cmocka.h. */
#ifndef GB_TEST_RK_WAIT_H
#define GB_TEST_RK_WAIT_H

#include <stdint.h>
#include <time.h>

#include "runtime.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Receives one reply within timeout_ms; fails the test otherwise. */
static void recv_one(gb_rk_t *rk, gb_reply_t *r, void *buf, uint32_t cap, int timeout_ms)
{
    uint64_t end = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        gb_err err = gb_rk_recv(rk, r, buf, cap);
        if (err == GB_OK)
            return;
        assert_int_equal(err, GB_ERR_EMPTY);
        assert_int_equal(gb_rk_poll(rk), GB_OK);
        if (now_ms() > end)
            fail_msg("no reply within %d ms", timeout_ms);
    }
}

#endif
