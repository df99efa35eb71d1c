/* Log rate limiting (log.h): a burst per window, then silence, then one line
 * that says how many were dropped. Time is given, so nothing here waits. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "log.h"

static void test_rate_limit(void **state)
{
    (void)state;
    gb_log_rate_t r = {0};
    const unsigned long long s = 1000000000ull, t0 = 5 * s;
    unsigned long long dropped = 99;
    unsigned allowed = 0;
    /* 3,000 refused handshakes in 5 s: 10 lines. */
    for (int i = 0; i < 3000; i++) {
        if (gb_log_rate_allow(&r, t0 + (unsigned long long)i * (5 * s / 3000), 10, 10 * s, &dropped)) {
            allowed++;
            assert_int_equal(dropped, 0);
        }
    }
    assert_int_equal(allowed, 10);
    /* The next window: a line again, which carries the count. */
    assert_true(gb_log_rate_allow(&r, t0 + 10 * s, 10, 10 * s, &dropped));
    assert_int_equal(dropped, 2990);
    assert_true(gb_log_rate_allow(&r, t0 + 10 * s + 1, 10, 10 * s, &dropped));
    assert_int_equal(dropped, 0);
    /* A fresh limiter lets the first line through at any clock value. */
    gb_log_rate_t z = {0};
    assert_true(gb_log_rate_allow(&z, 0, 1, 10 * s, &dropped));
    assert_false(gb_log_rate_allow(&z, 1, 1, 10 * s, &dropped));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rate_limit)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
