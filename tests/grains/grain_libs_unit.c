/* The grain registry and library loader, in-process (grain_registry.h,
 * grain_libs.h): what the daemon's tests cannot reach on a host without a
 * GPU, and the descriptor checks.
 *   grain_libs_unit LIBDIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "grain_libs.h"
#include "grain_registry.h"

static const char *g_libdir;

static void lib_config(gb_config_t *cfg, const char *lib)
{
    gb_config_defaults(cfg);
    cfg->n_libs = 1;
    snprintf(cfg->libs[0].path, sizeof cfg->libs[0].path, "%s/%s", g_libdir, lib);
    snprintf(cfg->libs[0].file, sizeof cfg->libs[0].file, "x.cfg");
    cfg->libs[0].line = 3;
    cfg->libs[0].index = 1;
}

/* A library of cpu-only types on a mode that runs ring kernels. */
static void test_no_gpu_code(void **st)
{
    (void)st;
    gb_config_t cfg;
    char err[768] = "";
    lib_config(&cfg, "libgbt_counter.so");
    assert_int_equal(gb_grain_libs_load(&cfg, true, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "x.cfg:3: grains[1].library: "));
    assert_non_null(strstr(err, "grain type 'test.counter' has no GPU code"));
    assert_int_equal(gb_grain_kind_of("test.counter"), 0); /* nothing registered */
}

/* In cpu mode it loads: the type is registered and added to the config. */
static void test_cpu_ok(void **st)
{
    (void)st;
    gb_config_t cfg;
    char err[768] = "";
    lib_config(&cfg, "libgbt_counter.so");
    const size_t n = cfg.n_grains;
    assert_int_equal(gb_grain_libs_load(&cfg, false, err, sizeof err), GB_OK);
    const int k = gb_grain_kind_of("test.counter");
    assert_true(k > 0);
    assert_string_equal(gb_grain_get(k)->name, "test.counter");
    assert_int_equal(gb_grain_state_size(k), 8);
    assert_false(gb_grain_is_team(k));
    assert_int_equal(cfg.n_grains, n + 1);
    assert_non_null(gb_config_grain(&cfg, "test.counter"));
}

static uint16_t nop(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in, uint32_t in_len,
                    unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx, (void)state, (void)type, (void)in, (void)in_len, (void)out, (void)out_cap, (void)aux;
    *out_len = 0;
    return GB_SLOT_OK;
}

/* Descriptors the registry refuses, each with its reason. */
static void test_register_checks(void **st)
{
    (void)st;
    static const gb_grain_msg_t msgs[] = {{1, "One"}};
    static const gb_grain_msg_t bad_msgs[] = {{0xFF00, "Reserved"}};
    gb_grain_desc_t d = {GB_GRAIN_ABI, sizeof d, "unit.ok", 24, 0, msgs, 1, 0, nop, NULL, NULL, NULL, 0, 0};
    char err[256];
    const int k = gb_grain_register(&d, err, sizeof err);
    assert_true(k > 0);
    assert_int_equal(gb_grain_kind_of("unit.ok"), k);
    assert_int_equal(gb_grain_state_size(k), 24);
    assert_int_equal(gb_grain_register(&d, err, sizeof err), 0);
    assert_non_null(strstr(err, "duplicate grain type 'unit.ok'"));
    gb_grain_desc_t e = d;
    e.name = "echo";
    assert_int_equal(gb_grain_register(&e, err, sizeof err), 0);
    assert_non_null(strstr(err, "duplicate grain type 'echo'"));
    e = d, e.name = "unit.abi", e.abi = 7;
    assert_int_equal(gb_grain_register(&e, err, sizeof err), 0);
    assert_non_null(strstr(err, "grain ABI 7"));
    e = d, e.name = "bad name";
    assert_int_equal(gb_grain_register(&e, err, sizeof err), 0);
    assert_non_null(strstr(err, "is not valid"));
    e = d, e.name = "unit.state", e.state_size = 0;
    assert_int_equal(gb_grain_register(&e, err, sizeof err), 0);
    assert_non_null(strstr(err, "state size 0"));
    e = d, e.name = "unit.msgs", e.msgs = bad_msgs;
    assert_int_equal(gb_grain_register(&e, err, sizeof err), 0);
    assert_non_null(strstr(err, "message type 65280 is out of range"));
    assert_int_equal(gb_grain_kind_of("unit.abi"), 0);
}

/* The built-in types are registered like any other. */
static void test_builtins(void **st)
{
    (void)st;
    const char *names[] = {"echo", "vecadd", "pagerank.sender", "pagerank.aggregator"};
    for (size_t i = 0; i < 4; i++) {
        const int k = gb_grain_kind_of(names[i]);
        assert_true(k > 0);
        assert_non_null(gb_grain_get(k)->hooks);
        assert_int_equal(gb_grain_is_team(k), i >= 2);
    }
    assert_int_equal(gb_grain_kind_of("no.such"), 0);
    assert_null(gb_grain_get(0));
    assert_null(gb_grain_get(gb_grain_count() + 1));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBDIR\n", argv[0]);
        return 2;
    }
    g_libdir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins),
        cmocka_unit_test(test_no_gpu_code),
        cmocka_unit_test(test_cpu_ok),
        cmocka_unit_test(test_register_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
