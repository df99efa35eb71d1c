/* The embedding API (gpubridge/runtime.h) through libgpubridge-runtime, as a
 * program uses it: this file includes the public header only. Bad input
 * everywhere gets its code and a sentence, and the runtime keeps serving.
 * cpu mode by default; GB_API_MODE=persistent|relaunch runs the same cases
 * on the GPU (77 without one).
 *   test_runtime_api [GRAIN_LIB_DIR]   (tests/grains: libgbt_counter.so) */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpubridge/runtime.h>

/* test.tally (api_tally.c): adds int64s per key (message 1), reads the
 * total and count (2). */
extern const gb_grain_desc_t gb_grain_test_tally;

static const char *g_libdir;
static const char *g_mode = "cpu";

static void expect_msg(const char *part)
{
    if (!strstr(gpubridge_last_error(), part))
        fail_msg("error '%s' lacks '%s'", gpubridge_last_error(), part);
}

/* A started runtime serving test.tally only, with config text cfg (may be
 * NULL). */
static gpubridge_runtime_t *tally_runtime_with(const char *cfg)
{
    gpubridge_options_t o;
    gpubridge_options_init(&o);
    o.mode_name = g_mode;
    o.flags = GPUBRIDGE_NO_CONFIG_GRAINS | GPUBRIDGE_NO_CPU_FALLBACK;
    o.log_level = "warn";
    o.config_text = cfg;
    gpubridge_runtime_t *rt = NULL;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_register_grain(rt, &gb_grain_test_tally), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_runtime_start(rt), GPUBRIDGE_OK);
    return rt;
}

static gpubridge_runtime_t *tally_runtime(void) { return tally_runtime_with(NULL); }

/* Adds v to grain key; returns the total. */
static int64_t add(gpubridge_runtime_t *rt, uint64_t key, int64_t v)
{
    int64_t out[2] = {0, 0};
    gpubridge_reply_t r;
    assert_int_equal(gpubridge_call(rt, "test.tally", key, 1, &v, sizeof v, &r, out, sizeof out, 10000),
                     GPUBRIDGE_OK);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.len, 16);
    assert_int_equal(r.key, key);
    assert_string_equal(r.type, "test.tally");
    return out[0];
}

static void test_version(void **st)
{
    (void)st;
    int a = -1, b = -1, c = -1;
    const char *v = gpubridge_version(&a, &b, &c);
    assert_int_equal(a, GPUBRIDGE_VERSION_MAJOR);
    assert_int_equal(b, GPUBRIDGE_VERSION_MINOR);
    assert_int_equal(c, GPUBRIDGE_VERSION_PATCH);
    assert_string_equal(v, GPUBRIDGE_VERSION_STRING);
    assert_non_null(gpubridge_version(NULL, NULL, NULL));
    for (int e = 0; e <= GPUBRIDGE_ERR__COUNT; e++)
        assert_true(strlen(gpubridge_strerror((gpubridge_err)e)) > 0);
}

static void test_bad_options(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = (gpubridge_runtime_t *)&rt;
    assert_int_equal(gpubridge_runtime_new(NULL, NULL), GPUBRIDGE_ERR_INVALID);
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode_name = "warp";
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_INVALID);
    assert_null(rt);
    expect_msg("unknown mode 'warp' (valid: auto, persistent, relaunch, cpu)");
    gpubridge_mode m;
    assert_int_equal(gpubridge_mode_parse("Persistent!", &m), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_mode_parse("relaunch", &m), GPUBRIDGE_OK);
    assert_int_equal(m, GPUBRIDGE_MODE_RELAUNCH);
    o = (gpubridge_options_t)GPUBRIDGE_OPTIONS_INIT;
    o.mode = (gpubridge_mode)9;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_INVALID);
    expect_msg("mode 9");
    o = (gpubridge_options_t)GPUBRIDGE_OPTIONS_INIT;
    o.size = 8;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_INVALID);
    expect_msg("GPUBRIDGE_OPTIONS_INIT");
    o = (gpubridge_options_t)GPUBRIDGE_OPTIONS_INIT;
    o.flags = 0x80;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_INVALID);
    o = (gpubridge_options_t)GPUBRIDGE_OPTIONS_INIT;
    o.device = -7;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_INVALID);
    expect_msg("device -7");
    o = (gpubridge_options_t)GPUBRIDGE_OPTIONS_INIT;
    o.log_level = "loud";
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_INVALID);
    expect_msg("unknown log level 'loud'");
    assert_null(rt);
}

static void test_bad_config(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = NULL;
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.config_path = "/nonexistent/gpubridge-embed.cfg";
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_CONFIG);
    assert_null(rt);
    expect_msg("/nonexistent/gpubridge-embed.cfg");
    o.config_path = NULL;
    o.config_text = "mode = \"cpu\";\nqueue_capacity = ;\n";
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_CONFIG);
    expect_msg("<config_text>:2");
    o.config_text = "grains = ( { library = \"/nonexistent/libnone.so\"; } );\n";
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_GRAIN);
    expect_msg("<config_text>:1: grains[0].library: cannot load '/nonexistent/libnone.so'");
    assert_null(rt);
    /* Several devices are the daemon's: refused, unless the options pick one. */
    o.config_text = "devices = [0, 1];\n";
    o.mode_name = "cpu";
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_ERR_CONFIG);
    expect_msg("the embedding API runs on one device");
    assert_null(rt);
    o.device = 1;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_OK);
    gpubridge_runtime_destroy(&rt);
}

static void test_register(void **st)
{
    (void)st;
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode_name = g_mode;
    o.flags = GPUBRIDGE_NO_CONFIG_GRAINS | GPUBRIDGE_NO_CPU_FALLBACK;
    gpubridge_runtime_t *rt = NULL;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_register_grain(NULL, &gb_grain_test_tally), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_register_grain(rt, NULL), GPUBRIDGE_ERR_INVALID);
    expect_msg("descriptor is NULL");
    gb_grain_desc_t d = gb_grain_test_tally;
    d.name = "echo"; /* a built-in's name: refused */
    assert_int_equal(gpubridge_register_grain(rt, &d), GPUBRIDGE_ERR_GRAIN);
    expect_msg("duplicate grain type 'echo'");
    d = gb_grain_test_tally;
    d.abi = 99, d.name = "test.abi";
    assert_int_equal(gpubridge_register_grain(rt, &d), GPUBRIDGE_ERR_GRAIN);
    expect_msg("grain ABI 99");
    static const gb_grain_msg_t twice[] = {{1, "Add"}, {1, "AddAgain"}};
    d = gb_grain_test_tally;
    d.name = "test.twice", d.msgs = twice, d.n_msgs = 2;
    assert_int_equal(gpubridge_register_grain(rt, &d), GPUBRIDGE_ERR_GRAIN);
    expect_msg("grain type 'test.twice': message type 1 is declared twice ('Add' and 'AddAgain')");
    assert_int_equal(gpubridge_serve(rt, "no.such"), GPUBRIDGE_ERR_UNKNOWN_TYPE);
    expect_msg("no grain type 'no.such' is registered");
    assert_int_equal(gpubridge_register_library(rt, "/nonexistent/libx.so"), GPUBRIDGE_ERR_GRAIN);
    expect_msg("cannot load '/nonexistent/libx.so'");
    assert_int_equal(gpubridge_register_library(rt, NULL), GPUBRIDGE_ERR_INVALID);
    /* The same descriptor twice (and from other runtimes): fine. */
    assert_int_equal(gpubridge_register_grain(rt, &gb_grain_test_tally), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_register_grain(rt, &gb_grain_test_tally), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_type_count(rt), 1);
    assert_string_equal(gpubridge_type_name(rt, 0), "test.tally");
    assert_null(gpubridge_type_name(rt, 1));
    int64_t v = 1;
    gpubridge_reply_t r;
    assert_int_equal(gpubridge_call(rt, "test.tally", 1, 1, &v, 8, &r, NULL, 0, 100), GPUBRIDGE_ERR_STATE);
    expect_msg("gpubridge_runtime_start");
    assert_int_equal(gpubridge_runtime_start(rt), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_runtime_start(rt), GPUBRIDGE_ERR_STATE);
    assert_int_equal(gpubridge_register_grain(rt, &gb_grain_test_tally), GPUBRIDGE_ERR_STATE);
    expect_msg("register grain types before gpubridge_runtime_start");
    assert_int_equal(gpubridge_serve(rt, "echo"), GPUBRIDGE_ERR_STATE);
    assert_int_equal(add(rt, 1, 5), 5); /* still serving */
    gpubridge_runtime_destroy(&rt);
    assert_null(rt);
    gpubridge_runtime_destroy(&rt); /* twice: nothing happens */
    gpubridge_runtime_destroy(NULL);
}

static void test_bad_send(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = tally_runtime();
    int64_t v = 2;
    assert_int_equal(gpubridge_send(NULL, "test.tally", 1, 1, &v, 8, 0, 0), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_send(rt, NULL, 1, 1, &v, 8, 0, 0), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_send(rt, "no.such", 1, 1, &v, 8, 0, 0), GPUBRIDGE_ERR_UNKNOWN_TYPE);
    expect_msg("grain type 'no.such' is not served by this runtime (served: test.tally)");
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 9, &v, 8, 0, 0), GPUBRIDGE_ERR_UNKNOWN_TYPE);
    expect_msg("grain type 'test.tally' has no message type 9 (it takes 1 (Add), 2 (Get))");
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 0, &v, 8, 0, 0), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 0xFF7F, &v, 8, 0, 0), GPUBRIDGE_ERR_INVALID);
    expect_msg("message type 65407 is out of range");
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 1, NULL, 8, 0, 0), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 1, &v, 8, GPUBRIDGE_CORR_MAX + 1, 0), GPUBRIDGE_ERR_INVALID);
    expect_msg("GPUBRIDGE_CORR_MAX");
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 1, &v, 8, 0, 0x10), GPUBRIDGE_ERR_INVALID);
    gpubridge_telemetry_t t;
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    const size_t big = (size_t)t.max_payload + 1;
    unsigned char *p = calloc(1, big);
    assert_non_null(p);
    assert_int_equal(gpubridge_send(rt, "test.tally", 1, 1, p, big, 0, 0), GPUBRIDGE_ERR_TOO_LARGE);
    expect_msg("max_message_size");
    free(p);
    assert_int_equal(gpubridge_telemetry(rt, "no.such", &t), GPUBRIDGE_ERR_UNKNOWN_TYPE);
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", NULL), GPUBRIDGE_ERR_INVALID);
    gpubridge_reply_t r;
    assert_int_equal(gpubridge_poll(rt, &r, NULL, 0, 0), GPUBRIDGE_ERR_EMPTY); /* nothing sent */
    assert_int_equal(add(rt, 1, 3), 3); /* still serving; none of the refused requests ran */
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    assert_int_equal(t.processed, 1);
    assert_int_equal(t.sent, 1);
    gpubridge_runtime_destroy(&rt);
}

/* A refused reply, a reply past the caller's buffer, in call and poll. */
static void test_replies(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = tally_runtime();
    int64_t out[2];
    gpubridge_reply_t r;
    char text[160];
    assert_int_equal(gpubridge_call(rt, "test.tally", 4, 1, "x", 1, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
    assert_int_equal(r.status, GB_SLOT_HANDLER_ERROR);
    assert_int_equal(r.aux, 3);
    assert_non_null(strstr(gpubridge_reply_text(rt, &r, text, sizeof text), "refused the request (detail 3)"));
    int64_t v = 6;
    assert_int_equal(gpubridge_call(rt, "test.tally", 4, 1, &v, 8, &r, out, 4, 10000), GPUBRIDGE_ERR_TOO_LARGE);
    assert_int_equal(r.len, 16);
    expect_msg("truncated");
    assert_int_equal(gpubridge_send(rt, "test.tally", 4, 1, &v, 8, 77, 0), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_poll(rt, &r, out, 4, 10000), GPUBRIDGE_ERR_TOO_LARGE);
    assert_int_equal(r.len, 16);
    expect_msg("stays first in line");
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 0), GPUBRIDGE_OK);
    assert_int_equal(r.corr, 77);
    assert_int_equal(out[0], 12);
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 0), GPUBRIDGE_ERR_EMPTY);
    gpubridge_runtime_destroy(&rt);
}

/* A deactivated type holds requests: a call times out, and its request runs
 * (once) after activate; the late reply is dropped. */
static void test_deactivated(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = tally_runtime();
    assert_int_equal(add(rt, 9, 1), 1);
    assert_int_equal(gpubridge_deactivate(rt, "test.tally"), GPUBRIDGE_OK);
    gpubridge_telemetry_t t;
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    assert_int_equal(t.active, 0);
    int64_t v = 10, out[2];
    gpubridge_reply_t r;
    assert_int_equal(gpubridge_call(rt, "test.tally", 9, 1, &v, 8, &r, out, sizeof out, 100), GPUBRIDGE_ERR_TIMEOUT);
    expect_msg("it is deactivated");
    assert_int_equal(gpubridge_send(rt, "test.tally", 9, 1, &v, 8, 5, 0), GPUBRIDGE_OK); /* held too */
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 50), GPUBRIDGE_ERR_EMPTY);
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    assert_int_equal(t.in_flight, 2);
    assert_int_equal(gpubridge_deactivate(rt, "no.such"), GPUBRIDGE_ERR_UNKNOWN_TYPE);
    assert_int_equal(gpubridge_activate(rt, NULL), GPUBRIDGE_ERR_INVALID);
    assert_int_equal(gpubridge_activate(rt, "test.tally"), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
    assert_int_equal(r.corr, 5);
    assert_int_equal(out[0], 21); /* 1, the timed-out call's 10, then 10 */
    assert_int_equal(add(rt, 9, 1), 22);
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 0), GPUBRIDGE_ERR_EMPTY); /* the late reply dropped */
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    assert_int_equal(t.active, 1);
    assert_int_equal(t.in_flight, 0);
    assert_int_equal(t.processed, 4);
    gpubridge_runtime_destroy(&rt);
}

/* One-way requests run in order and leave no reply. */
static void test_one_way(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = tally_runtime();
    int64_t v = 2;
    for (int i = 0; i < 50; i++)
        assert_int_equal(gpubridge_send(rt, "test.tally", 3, 1, &v, 8, 0, GPUBRIDGE_ONE_WAY), GPUBRIDGE_OK);
    int64_t out[2];
    gpubridge_reply_t r;
    assert_int_equal(gpubridge_call(rt, "test.tally", 3, 2, NULL, 0, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
    assert_int_equal(out[0], 100);
    assert_int_equal(out[1], 50);
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 0), GPUBRIDGE_ERR_EMPTY);
    /* Deactivating a key frees its state: the next message starts from zero. */
    assert_int_equal(gpubridge_call(rt, "test.tally", 3, GPUBRIDGE_MSG_DEACTIVATE_KEY, NULL, 0, &r, out, sizeof out,
                                    10000), GPUBRIDGE_OK);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(add(rt, 3, 1), 1);
    gpubridge_runtime_destroy(&rt);
}

typedef struct worker {
    gpubridge_runtime_t *rt;
    uint64_t key;
    int ok;
    int sends; /* also a send per call, whose reply the test polls */
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    int64_t v = 1, out[2];
    gpubridge_reply_t r;
    w->ok = 1;
    for (int i = 1; i <= 300 && w->ok; i++) {
        w->ok = gpubridge_call(w->rt, "test.tally", w->key, 1, &v, 8, &r, out, sizeof out, 10000) == GPUBRIDGE_OK &&
                out[0] == i && r.key == w->key;
        /* and a send, whose reply waits in the queue for the poll after the join */
        w->ok = w->ok && (!w->sends || gpubridge_send(w->rt, "test.tally", 1000 + w->key, 1, &v, 8, w->key, 0) ==
                                           GPUBRIDGE_OK);
    }
    return NULL;
}

/* Calls from several threads at once, each getting its own replies. */
static void test_threads(void **st)
{
    (void)st;
    gpubridge_runtime_t *rt = tally_runtime();
    pthread_t th[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){rt, (uint64_t)i + 10, 0, 1};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(w[i].ok);
    }
    int64_t out[2];
    gpubridge_reply_t r;
    int n = 0;
    while (gpubridge_poll(rt, &r, out, sizeof out, 10000) == GPUBRIDGE_OK) {
        assert_int_equal(r.key, 1000 + r.corr);
        n++;
    }
    assert_int_equal(n, 4 * 300);
    gpubridge_runtime_destroy(&rt);
}

/* Replies left unpolled past the runtime's bound: sends get FULL, and calls
 * still get their replies (queued behind the unpolled ones in the ring). */
static void test_calls_past_unpolled(void **st)
{
    (void)st;
    if (strcmp(g_mode, "cpu") != 0)
        skip();
    gpubridge_runtime_t *rt = tally_runtime_with("grains = ( { type = \"test.tally\"; queue_capacity = 16; } );\n");
    int64_t v = 1, out[2];
    gpubridge_reply_t r;
    uint64_t sent = 0, full = 0;
    for (int i = 0; i < 200; i++) {
        gpubridge_err e = gpubridge_send(rt, "test.tally", 1, 1, &v, 8, (uint64_t)i, 0);
        if (e == GPUBRIDGE_OK)
            sent++;
        else {
            assert_int_equal(e, GPUBRIDGE_ERR_FULL);
            full++;
        }
        assert_int_equal(gpubridge_call(rt, "test.tally", 2, 1, &v, 8, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
        assert_int_equal(out[0], i + 1); /* grain 2's own count: every call answered, in order */
    }
    assert_true(full > 0); /* the bound was reached */
    gpubridge_telemetry_t t;
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    assert_true(t.queued <= 4u * 16u);
    for (uint64_t k = 0; k < sent; k++)
        assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 0), GPUBRIDGE_ERR_EMPTY);
    gpubridge_runtime_destroy(&rt);
}

/* cpu mode with worker threads (cpu_threads from the config's entry for the
 * type): calls, a burst of sends polled back, calls from several threads. */
static void test_worker_threads(void **st)
{
    (void)st;
    if (strcmp(g_mode, "cpu") != 0)
        skip();
    gpubridge_runtime_t *rt =
        tally_runtime_with("grains = ( { type = \"test.tally\"; cpu_threads = 2; queue_capacity = 64; } );\n");
    gpubridge_telemetry_t t;
    assert_int_equal(gpubridge_telemetry(rt, "test.tally", &t), GPUBRIDGE_OK);
    assert_int_equal(t.lanes, 2);
    assert_int_equal(t.capacity, 64);
    assert_int_equal(add(rt, 1, 4), 4);
    int64_t v = 1, out[2];
    gpubridge_reply_t r;
    int full = 0, got = 0;
    for (uint64_t i = 0; i < 200; i++) { /* more than the ring holds: FULL until polled */
        gpubridge_err e;
        while ((e = gpubridge_send(rt, "test.tally", 50 + i % 4, 1, &v, 8, i, 0)) == GPUBRIDGE_ERR_FULL) {
            full = 1;
            assert_int_equal(gpubridge_poll(rt, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
            got++;
        }
        assert_int_equal(e, GPUBRIDGE_OK);
    }
    while (gpubridge_poll(rt, &r, out, sizeof out, 10000) == GPUBRIDGE_OK) {
        assert_int_equal(r.key, 50 + r.corr % 4);
        assert_int_equal(out[1], (int64_t)(r.corr / 4) + 1); /* each key's adds in order */
        got++;
    }
    assert_true(full);
    assert_int_equal(got, 200);
    pthread_t th[3];
    worker_t w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (worker_t){rt, (uint64_t)i + 20, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_true(w[i].ok);
    }
    gpubridge_runtime_destroy(&rt);
}

/* The config's grain types (the defaults: the built-ins) and a grain
 * library, in two runtimes of one process. */
static void test_builtins_and_library(void **st)
{
    (void)st;
    for (int round = 0; round < 2; round++) {
        gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
        o.mode_name = g_mode;
        o.flags = GPUBRIDGE_NO_CPU_FALLBACK;
        gpubridge_runtime_t *rt = NULL;
        assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_OK);
        const int lib = g_libdir && strcmp(g_mode, "cpu") == 0; /* the library is cpu-only */
        char path[512];
        snprintf(path, sizeof path, "%s/libgbt_counter.so", g_libdir ? g_libdir : ".");
        if (lib)
            assert_int_equal(gpubridge_register_library(rt, path), GPUBRIDGE_OK);
        assert_int_equal(gpubridge_runtime_start(rt), GPUBRIDGE_OK);
        unsigned char out[64];
        gpubridge_reply_t r;
        assert_int_equal(gpubridge_call(rt, "echo", 1, 1, "hello", 5, &r, out, sizeof out, 10000), GPUBRIDGE_OK);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_int_equal(r.len, 5);
        assert_memory_equal(out, "hello", 5);
        if (lib) {
            uint64_t v = 40, count = 0;
            assert_int_equal(gpubridge_call(rt, "test.counter", 2, 1, &v, 8, &r, &count, 8, 10000), GPUBRIDGE_OK);
            assert_int_equal(count, 40);
        }
        gpubridge_runtime_destroy(&rt);
    }
}

/* A type that sends to other types: an embedded runtime does not route its
 * messages, so the start refuses it and says why. */
static void test_mail_refused(void **st)
{
    (void)st;
    if (!g_libdir || strcmp(g_mode, "cpu") != 0)
        skip();
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode_name = g_mode;
    o.flags = GPUBRIDGE_NO_CPU_FALLBACK;
    gpubridge_runtime_t *rt = NULL;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/libgbt_mail.so", g_libdir);
    assert_int_equal(gpubridge_register_library(rt, path), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_runtime_start(rt), GPUBRIDGE_ERR_GRAIN);
    expect_msg("does not route");
    gpubridge_runtime_destroy(&rt);
}

/* A type the config lists with no handler: served, but it cannot run. */
static void test_unavailable(void **st)
{
    (void)st;
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode_name = g_mode;
    o.flags = GPUBRIDGE_NO_CPU_FALLBACK;
    o.config_text = "log_level = \"error\";\ngrains = ( { type = \"no.handler\"; } );\n";
    gpubridge_runtime_t *rt = NULL;
    assert_int_equal(gpubridge_runtime_new(&o, &rt), GPUBRIDGE_OK);
    assert_int_equal(gpubridge_runtime_start(rt), GPUBRIDGE_OK);
    gpubridge_telemetry_t t;
    assert_int_equal(gpubridge_telemetry(rt, "no.handler", &t), GPUBRIDGE_OK);
    assert_int_equal(t.state, GPUBRIDGE_TYPE_UNAVAILABLE);
    assert_int_equal(gpubridge_send(rt, "no.handler", 1, 1, NULL, 0, 0, 0), GPUBRIDGE_ERR_UNKNOWN_TYPE);
    expect_msg("has no ring kernel");
    gpubridge_runtime_destroy(&rt);
}

int main(int argc, char **argv)
{
    g_libdir = argc > 1 ? argv[1] : NULL;
    const char *m = getenv("GB_API_MODE");
    if (m && *m)
        g_mode = m;
    if (strcmp(g_mode, "cpu") != 0) { /* a GPU mode: skip without a GPU */
        gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
        o.mode_name = g_mode;
        o.flags = GPUBRIDGE_NO_CONFIG_GRAINS | GPUBRIDGE_NO_CPU_FALLBACK;
        gpubridge_runtime_t *rt = NULL;
        gpubridge_err e = gpubridge_runtime_new(&o, &rt);
        if (e == GPUBRIDGE_ERR_NODEV) {
            printf("SKIP: %s\n", gpubridge_last_error());
            return 77;
        }
        gpubridge_runtime_destroy(&rt);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),  cmocka_unit_test(test_bad_options), cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_register), cmocka_unit_test(test_mail_refused), cmocka_unit_test(test_bad_send),    cmocka_unit_test(test_replies),
        cmocka_unit_test(test_deactivated), cmocka_unit_test(test_one_way),  cmocka_unit_test(test_threads), cmocka_unit_test(test_calls_past_unpolled),
        cmocka_unit_test(test_worker_threads),
        cmocka_unit_test(test_builtins_and_library), cmocka_unit_test(test_unavailable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
