/* The types' control state the supervisor keeps across worker restarts
 * (bridge/sup_state.c): a change counts once the worker answers it OK, for
 * that client's request only; the file lists what to keep, one type a line,
 * and is removed when nothing is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "control.pb-c.h"
#include "gpubridge.pb-c.h"
#include "sup_state.h"

/* An encoded Control of op (ACTIVATE, DEACTIVATE or TERMINATE) on type. */
static size_t control(uint8_t *buf, Gpubridge__Control__OpCase op, const char *type)
{
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__Activate a = GPUBRIDGE__ACTIVATE__INIT;
    Gpubridge__Deactivate d = GPUBRIDGE__DEACTIVATE__INIT;
    Gpubridge__Terminate t = GPUBRIDGE__TERMINATE__INIT;
    a.grain_type = d.grain_type = t.grain_type = (char *)type;
    c.op_case = op; /* the op's members share a union: set the one */
    if (op == GPUBRIDGE__CONTROL__OP_ACTIVATE)
        c.activate = &a;
    else if (op == GPUBRIDGE__CONTROL__OP_DEACTIVATE)
        c.deactivate = &d;
    else
        c.terminate = &t;
    return gpubridge__control__pack(&c, buf);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_changes_count_when_answered_ok(void **state)
{
    (void)state;
    static gbi_sup_state_t st;
    memset(&st, 0, sizeof st);
    uint8_t buf[128];
    char path[64];
    snprintf(path, sizeof path, "/tmp/gb-sup-state-%d", (int)getpid());
    const int OK = GPUBRIDGE__STATUS__STATUS_OK, TERMINATED = GPUBRIDGE__STATUS__STATUS_TERMINATED;
    gbi_sup_state_asked(&st, 1, 10, buf, control(buf, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "echo"));
    gbi_sup_state_asked(&st, 1, 11, buf, control(buf, GPUBRIDGE__CONTROL__OP_TERMINATE, "vecadd"));
    gbi_sup_state_asked(&st, 2, 10, buf, control(buf, GPUBRIDGE__CONTROL__OP_TERMINATE, "other"));
    assert_int_equal(gbi_sup_state_write(&st, path), 0); /* nothing answered yet: nothing kept */
    assert_null(slurp(path));
    gbi_sup_state_answered(&st, 1, 10, OK);
    gbi_sup_state_answered(&st, 1, 11, OK);
    gbi_sup_state_answered(&st, 2, 10, TERMINATED); /* refused: not taken */
    gbi_sup_state_answered(&st, 3, 11, OK);         /* another connection's id 11: no such request */
    assert_int_equal(gbi_sup_state_write(&st, path), 0);
    assert_string_equal(slurp(path), "inactive echo\nterminated vecadd\n");
    /* Activate answered OK: echo is kept no more; a second answer to the
     * same id counts nothing. */
    gbi_sup_state_asked(&st, 1, 12, buf, control(buf, GPUBRIDGE__CONTROL__OP_ACTIVATE, "echo"));
    gbi_sup_state_answered(&st, 1, 12, OK);
    gbi_sup_state_answered(&st, 1, 10, OK);
    assert_int_equal(gbi_sup_state_write(&st, path), 0);
    assert_string_equal(slurp(path), "terminated vecadd\n");
    gbi_sup_state_asked(&st, 1, 13, buf, control(buf, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"));
    gbi_sup_state_answered(&st, 1, 13, OK);
    assert_int_equal(gbi_sup_state_write(&st, path), 0);
    assert_null(slurp(path)); /* nothing kept: no file */
    /* Not a state change, or not a Control at all: nothing noted. */
    gbi_sup_state_asked(&st, 1, 14, (const uint8_t *)"\xff\xff", 2);
    assert_int_equal(st.n_asked, 0);
}

/* More requests than the ring holds: the oldest are forgotten, the newest
 * still count. */
static void test_ring_forgets_the_oldest(void **state)
{
    (void)state;
    static gbi_sup_state_t st;
    memset(&st, 0, sizeof st);
    uint8_t buf[128];
    const size_t len = control(buf, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "echo");
    for (uint64_t i = 1; i <= GBI_SUP_STATE_ASKED + 5; i++)
        gbi_sup_state_asked(&st, 1, i, buf, len);
    assert_int_equal(st.n_asked, GBI_SUP_STATE_ASKED);
    gbi_sup_state_answered(&st, 1, 1, GPUBRIDGE__STATUS__STATUS_OK); /* forgotten */
    assert_int_equal(st.n, 0);
    gbi_sup_state_answered(&st, 1, GBI_SUP_STATE_ASKED + 5, GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(st.n, 1);
    assert_int_equal(st.kept[0], GBI_KEPT_INACTIVE);
    assert_int_equal(st.n_asked, GBI_SUP_STATE_ASKED - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_changes_count_when_answered_ok),
        cmocka_unit_test(test_ring_forgets_the_oldest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
