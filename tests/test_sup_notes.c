/* The counts the supervisor notes to its worker (bridge/sup_notes.c): a
 * count sent stays unconfirmed until a heartbeat sent after it is answered;
 * what is unconfirmed when the worker dies is noted again, once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sup_notes.h"

static void test_confirmed_by_a_later_heartbeat(void **state)
{
    (void)state;
    gbi_sup_notes_t n = {0};
    gbi_notes_add(&n, GBI_NC_TOO_LARGE, 3);
    gbi_notes_sent(&n, GBI_NC_TOO_LARGE);
    assert_int_equal(n.fresh[GBI_NC_TOO_LARGE], 0);
    assert_int_equal(n.unconf[GBI_NC_TOO_LARGE], 3);
    gbi_notes_heartbeat(&n, 7);
    gbi_notes_add(&n, GBI_NC_TOO_LARGE, 2); /* after the heartbeat: not confirmed by its answer */
    gbi_notes_sent(&n, GBI_NC_TOO_LARGE);
    gbi_notes_heartbeat(&n, 8); /* one waits at a time: 7's snapshot stays */
    gbi_notes_answered(&n, 6);  /* an older answer confirms nothing */
    assert_int_equal(n.unconf[GBI_NC_TOO_LARGE], 5);
    gbi_notes_answered(&n, 7);
    assert_int_equal(n.unconf[GBI_NC_TOO_LARGE], 2);
    assert_int_equal(n.hb_seq, 0);
    gbi_notes_heartbeat(&n, 9);
    gbi_notes_answered(&n, 9);
    assert_int_equal(n.unconf[GBI_NC_TOO_LARGE], 0);
}

static void test_worker_gone_sends_again(void **state)
{
    (void)state;
    gbi_sup_notes_t n = {0};
    gbi_notes_add(&n, GBI_NC_UNREAD, 4);
    gbi_notes_add(&n, GBI_NC_OWN + 4, 1);
    gbi_notes_sent(&n, GBI_NC_UNREAD);
    gbi_notes_sent(&n, GBI_NC_OWN + 4);
    gbi_notes_heartbeat(&n, 1);
    gbi_notes_answered(&n, 1); /* read */
    gbi_notes_add(&n, GBI_NC_UNREAD, 5);
    gbi_notes_sent(&n, GBI_NC_UNREAD); /* queued to a worker that then dies */
    gbi_notes_add(&n, GBI_NC_FRAMES, 2); /* not sent at all */
    gbi_notes_heartbeat(&n, 2);        /* never answered */
    gbi_notes_worker_gone(&n);
    assert_int_equal(n.fresh[GBI_NC_UNREAD], 5);
    assert_int_equal(n.fresh[GBI_NC_FRAMES], 2);
    assert_int_equal(n.fresh[GBI_NC_OWN + 4], 0);
    assert_int_equal(n.unconf[GBI_NC_UNREAD], 0);
    assert_int_equal(n.hb_seq, 0);
    gbi_notes_answered(&n, 2); /* the dead worker's heartbeat: nothing to confirm */
    assert_int_equal(n.fresh[GBI_NC_UNREAD], 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_confirmed_by_a_later_heartbeat),
        cmocka_unit_test(test_worker_gone_sends_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
