/* The supervisor's set of correlation ids awaiting replies (bridge/sup_ids.c):
 * memory counted in bytes allocated, per set and for all; a set that empties
 * frees its memory, one that falls well below its room shrinks; a run of
 * tags is struck alone, whatever else waits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sup_ids.h"

static void test_bytes_counted_and_freed(void **state)
{
    (void)state;
    size_t total = 0;
    gbi_ids_t a = {.total = &total}, b = {.total = &total};
    enum { N = 100000 };
    const size_t want = gbi_ids_bytes_after(&a, N);
    assert_int_equal(gbi_ids_reserve(&a, N), 0);
    assert_int_equal(gbi_ids_bytes(&a), want); /* the prediction is what it takes */
    for (uint64_t i = 1; i <= N; i++)
        assert_int_equal(gbi_ids_add(&a, i, 1 + i / 1000), 1);
    assert_int_equal(a.n, N);
    assert_int_equal(gbi_ids_bytes(&a), a.cap * GBI_IDS_BYTES_PER_SLOT);
    assert_true(a.cap >= N && a.cap <= 3 * N); /* room: at most 3 slots an id */
    assert_int_equal(gbi_ids_reserve(&b, 10), 0);
    assert_int_equal(gbi_ids_add(&b, 7, 1), 1);
    assert_int_equal(total, gbi_ids_bytes(&a) + gbi_ids_bytes(&b));
    /* Every id counts, each time it is noted: 0, 2^64-1 and a reused one. */
    assert_int_equal(gbi_ids_reserve(&b, 4), 0);
    assert_int_equal(gbi_ids_add(&b, 7, 2), 1);
    assert_int_equal(gbi_ids_add(&b, 0, 2), 1);
    assert_int_equal(gbi_ids_add(&b, ~0ull, 3), 1);
    assert_int_equal(gbi_ids_add(&b, 7, 4), 1);
    assert_int_equal(b.n, 5);
    /* A reused id is struck once per reply, the one noted first first. */
    assert_int_equal(gbi_ids_del(&b, 7), 1);
    assert_int_equal(gbi_ids_del(&b, 7), 2);
    assert_int_equal(gbi_ids_del(&b, 7), 4);
    assert_int_equal(gbi_ids_del(&b, 7), 0);
    assert_int_equal(gbi_ids_del(&b, ~0ull), 3);
    assert_int_equal(gbi_ids_del(&b, 0), 2);
    assert_int_equal(b.n, 0);
    assert_int_equal(gbi_ids_reserve(&b, 1), 0);
    assert_int_equal(gbi_ids_add(&b, 7, 5), 1);
    /* Replies strike ids; below an eighth of its room the set shrinks. */
    const size_t big = gbi_ids_bytes(&a);
    for (uint64_t i = 1; i <= N - 100; i++)
        assert_int_equal(gbi_ids_del(&a, i), 1 + i / 1000);
    assert_int_equal(a.n, 100);
    assert_true(gbi_ids_bytes(&a) <= big / 64);
    assert_int_equal(gbi_ids_del(&a, 5), 0); /* no longer waiting */
    for (uint64_t i = N - 99; i <= N; i++)
        assert_int_equal(gbi_ids_del(&a, i), 1 + i / 1000);
    /* Empty: nothing held. */
    assert_int_equal(a.n, 0);
    assert_int_equal(gbi_ids_bytes(&a), 0);
    assert_null(a.ent);
    assert_int_equal(total, gbi_ids_bytes(&b));
    gbi_ids_free(&b);
    assert_int_equal(total, 0);
}

static void test_tags_struck_alone(void **state)
{
    (void)state;
    size_t total = 0;
    gbi_ids_t s = {.total = &total};
    /* Tags 1..100, 50 ids each; a few answered in between. */
    for (uint64_t t = 1; t <= 100; t++) {
        assert_int_equal(gbi_ids_reserve(&s, 50), 0);
        for (uint64_t i = 0; i < 50; i++)
            assert_int_equal(gbi_ids_add(&s, t * 1000 + i, t), 1);
        if (t % 10 == 0)
            assert_int_equal(gbi_ids_del(&s, t * 1000), t);
    }
    assert_int_equal(s.n, 5000 - 10);
    /* Tags 20..29: 500 ids, one (20,000) answered already. */
    assert_int_equal(gbi_ids_del_tags(&s, 20, 29), 499);
    assert_int_equal(s.n, 5000 - 10 - 499);
    assert_int_equal(gbi_ids_del(&s, 25003), 0);
    assert_int_equal(gbi_ids_del(&s, 19049), 19);
    assert_int_equal(gbi_ids_del(&s, 30001), 30);
    assert_int_equal(gbi_ids_del_tags(&s, 20, 29), 0);
    /* A tag taken in chunks, with a cursor. */
    uint64_t out[16];
    size_t cursor = SIZE_MAX, got = 0, k;
    while ((k = gbi_ids_take(&s, 42, 42, &cursor, out, 16)) > 0) {
        for (size_t i = 0; i < k; i++)
            assert_true(out[i] >= 42000 && out[i] < 42050);
        got += k;
    }
    assert_int_equal(got, 50);
    gbi_ids_trim(&s);
    /* The rest, all tags. */
    cursor = SIZE_MAX;
    got = 0;
    while ((k = gbi_ids_take(&s, 0, UINT64_MAX, &cursor, out, 16)) > 0)
        got += k;
    assert_int_equal(got, 5000 - 10 - 499 - 2 - 50);
    gbi_ids_trim(&s);
    assert_int_equal(s.n, 0);
    assert_int_equal(total, 0);
    /* An id answered can wait again under a later tag. */
    assert_int_equal(gbi_ids_reserve(&s, 1), 0);
    assert_int_equal(gbi_ids_add(&s, 42000, 200), 1);
    assert_int_equal(gbi_ids_del_tags(&s, 42, 42), 0);
    assert_int_equal(gbi_ids_del_tags(&s, 200, 200), 1);
    gbi_ids_free(&s);
}

/* Many additions and replies in turn: the room follows what waits. */
static void test_churn_stays_small(void **state)
{
    (void)state;
    size_t total = 0, most = 0;
    gbi_ids_t s = {.total = &total};
    for (uint64_t f = 1; f <= 20000; f++) {
        assert_int_equal(gbi_ids_reserve(&s, 10), 0);
        for (uint64_t i = 0; i < 10; i++)
            gbi_ids_add(&s, f * 10 + i, f);
        if (f > 3)
            gbi_ids_del_tags(&s, f - 3, f - 3);
        most = total > most ? total : most;
    }
    assert_int_equal(s.n, 30);
    assert_true(most <= 64 * GBI_IDS_BYTES_PER_SLOT);
    gbi_ids_free(&s);
    assert_int_equal(total, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_counted_and_freed),
        cmocka_unit_test(test_tags_struck_alone),
        cmocka_unit_test(test_churn_stays_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
