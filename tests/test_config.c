/* Config loader tests: defaults, the shipped files, every error class (with
 * its line number and text), nothing half-loaded, print -> reload. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

/* ------------------------------------------------------------ helpers */

static const char *source_dir(void)
{
    const char *d = getenv("GB_SOURCE_DIR");
    return d ? d : ".";
}

/* A config that differs from the defaults everywhere it can, so that an
 * unchanged-after-failure check means something. */
static void nondefault(gb_config_t *cfg)
{
    char err[256];
    gb_config_defaults(cfg);
    gb_err rc = gb_config_load_string(
        "log_level = \"debug\"; endpoints = [\"inproc://x\"]; device = 3; mode = \"cpu\";\n"
        "hosts = ( { pattern = \"h*\"; mode = \"relaunch\"; } );\n"
        "grains = ( { type = \"extra\"; } );\n",
        "nondefault", cfg, err, sizeof err);
    assert_int_equal(rc, GB_OK);
}

/* Loads text named "t.cfg" and asserts it fails with "t.cfg:LINE: " and what
 * in the message, leaving the config byte-for-byte unchanged. */
static void expect_error(const char *text, unsigned line, const char *what)
{
    gb_config_t cfg, before;
    nondefault(&cfg);
    before = cfg;
    char err[512];
    gb_err rc = gb_config_load_string(text, "t.cfg", &cfg, err, sizeof err);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t.cfg:%u: ", line);
    if (rc != GB_ERR_CONFIG || strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, what))
        print_error("config:\n%s\nexpected \"%s...%s\", got rc %d: \"%s\"\n", text, prefix,
                    what, (int)rc, err);
    assert_int_equal(rc, GB_ERR_CONFIG);
    assert_memory_equal(err, prefix, strlen(prefix));
    assert_non_null(strstr(err, what));
    assert_memory_equal(&cfg, &before, sizeof cfg);
}

static void load_ok(const char *text, gb_config_t *cfg)
{
    char err[512] = "";
    gb_config_defaults(cfg);
    gb_err rc = gb_config_load_string(text, "ok.cfg", cfg, err, sizeof err);
    if (rc != GB_OK)
        print_error("unexpected error: %s\n", err);
    assert_int_equal(rc, GB_OK);
}

/* Prints cfg and loads the text back. */
static void print_reload(const gb_config_t *cfg, gb_config_t *back)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    gb_config_print(cfg, f);
    fclose(f);
    char err[512] = "";
    gb_config_defaults(back);
    gb_err rc = gb_config_load_string(buf, "printed", back, err, sizeof err);
    if (rc != GB_OK)
        print_error("reload failed: %s\n%s\n", err, buf);
    assert_int_equal(rc, GB_OK);
    free(buf);
    /* source says where it came from; everything else must match. */
    memset(back->source, 0, sizeof back->source);
    memcpy(back->source, cfg->source, sizeof back->source);
}

/* ------------------------------------------------------------ defaults */

static void test_defaults(void **state)
{
    (void)state;
    gb_config_t c;
    gb_config_defaults(&c);
    assert_string_equal(c.source, "<defaults>");
    assert_int_equal(c.log_level, GB_LOG_INFO);
    assert_int_equal(c.n_endpoints, 2);
    assert_string_equal(c.endpoints[0], "tcp://127.0.0.1:5555");
    assert_string_equal(c.endpoints[1], "ipc:///tmp/gpubridge.sock");
    assert_int_equal(c.device, 0);
    assert_int_equal(c.mode, GB_MODE_AUTO);
    assert_int_equal(c.max_message_size, 1048576);
    assert_int_equal(c.idle_spin_polls, 2048);
    assert_int_equal(c.idle_backoff_max_ns, 20000);
    assert_int_equal(c.heartbeat_deadline_ms, 2000);
    assert_int_equal(c.max_messages_per_launch, 4096);
    assert_false(c.force_fallback_placement);
    assert_int_equal(c.n_grains, 4);
    const char *big[] = {"vecadd", "echo"};
    for (int i = 0; i < 2; i++) {
        const gb_grain_config_t *g = gb_config_grain(&c, big[i]);
        assert_non_null(g);
        assert_int_equal(g->queue_capacity, 4096);
        assert_int_equal(g->slot_size, 64);
        assert_int_equal(g->messages_per_iteration, 1024);
        assert_int_equal(g->max_grains, 65536);
        assert_int_equal(g->cpu_threads, 0);
    }
    const char *pr[] = {"pagerank.sender", "pagerank.aggregator"};
    for (int i = 0; i < 2; i++) {
        const gb_grain_config_t *g = gb_config_grain(&c, pr[i]);
        assert_non_null(g);
        assert_int_equal(g->queue_capacity, 512);
        assert_int_equal(g->slot_size, 16384);
        assert_int_equal(g->messages_per_iteration, 256);
        assert_int_equal(g->max_grains, 4096);
        assert_int_equal(g->cpu_threads, 0);
    }
    assert_int_equal(c.arena_mb, 1024);
    assert_int_equal(c.shutdown_drain_ms, 10000);
    assert_int_equal(c.io_threads, gb_config_io_threads_default());
    assert_true(c.io_threads >= 1 && c.io_threads <= 4);
    assert_null(gb_config_grain(&c, "nope"));
    assert_null(gb_config_grain(&c, NULL));
    assert_int_equal(c.n_hosts, 0);
    assert_false(c.curve.enabled);
    assert_int_equal(c.curve.n_allowed, 0);
}

static void test_mode_names(void **state)
{
    (void)state;
    const char *names[] = {"auto", "persistent", "relaunch", "cpu"};
    for (int i = 0; i < 4; i++) {
        gb_mode m = GB_MODE_CPU;
        assert_string_equal(gb_mode_name((gb_mode)i), names[i]);
        assert_int_equal(gb_mode_parse(names[i], &m), 0);
        assert_int_equal(m, i);
    }
    gb_mode m = GB_MODE_RELAUNCH;
    assert_int_equal(gb_mode_parse("Auto", &m), -1);
    assert_int_equal(gb_mode_parse("", &m), -1);
    assert_int_equal(gb_mode_parse(NULL, &m), -1);
    assert_int_equal(m, GB_MODE_RELAUNCH);
    assert_string_equal(gb_mode_name((gb_mode)42), "?");
}

/* ------------------------------------------------------- shipped files */

static void test_default_file_equals_defaults(void **state)
{
    (void)state;
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/config/gpubridge.cfg", source_dir());
    gb_config_t loaded, def;
    gb_config_defaults(&def);
    nondefault(&loaded);
    gb_err rc = gb_config_load(path, &loaded, err, sizeof err);
    if (rc != GB_OK)
        print_error("%s\n", err);
    assert_int_equal(rc, GB_OK);
    assert_string_equal(loaded.source, path);
    memset(loaded.source, 0, sizeof loaded.source);
    strcpy(loaded.source, "<defaults>");
    assert_memory_equal(&loaded, &def, sizeof def);
}

static void test_examples_load(void **state)
{
    (void)state;
    const char *names[] = {"wsl2.cfg", "cpu-only.cfg", "multi-host.cfg"};
    gb_config_t c[3];
    for (int i = 0; i < 3; i++) {
        char path[1024], err[512] = "";
        snprintf(path, sizeof path, "%s/config/examples/%s", source_dir(), names[i]);
        gb_config_defaults(&c[i]);
        gb_err rc = gb_config_load(path, &c[i], err, sizeof err);
        if (rc != GB_OK)
            print_error("%s\n", err);
        assert_int_equal(rc, GB_OK);
        /* Each must also survive print -> reload. */
        gb_config_t back;
        print_reload(&c[i], &back);
        assert_memory_equal(&back, &c[i], sizeof back);
    }
    assert_int_equal(c[0].mode, GB_MODE_RELAUNCH);
    assert_int_equal(c[1].mode, GB_MODE_CPU);
    assert_int_equal(gb_config_grain(&c[1], "vecadd")->cpu_threads, 4);
    /* keys the example leaves out keep the type's defaults */
    assert_int_equal(gb_config_grain(&c[1], "vecadd")->queue_capacity, 4096);
    assert_int_equal(c[2].mode, GB_MODE_AUTO);
    assert_true(c[2].n_hosts >= 2);
    assert_string_equal(c[2].hosts[0].pattern, "*-wsl*");
    assert_int_equal(c[2].hosts[0].mode, GB_MODE_RELAUNCH);
    assert_true(c[2].curve.enabled);
}

/* ------------------------------------------------------ valid configs */

static void test_missing_keys_keep_defaults(void **state)
{
    (void)state;
    gb_config_t c, def;
    gb_config_defaults(&def);
    load_ok("", &c);
    strcpy(c.source, "<defaults>");
    memset(c.source + strlen("<defaults>"), 0, sizeof c.source - strlen("<defaults>"));
    assert_memory_equal(&c, &def, sizeof c);

    load_ok("persistent = { idle_spin_polls = 7; };\n", &c);
    assert_int_equal(c.idle_spin_polls, 7);
    assert_int_equal(c.idle_backoff_max_ns, 20000);
    assert_int_equal(c.heartbeat_deadline_ms, 2000);
    assert_string_equal(c.source, "ok.cfg");
}

static void test_full_valid(void **state)
{
    (void)state;
    gb_config_t c;
    load_ok("log_level = \"diag\";\n"
            "endpoints = [ \"tcp://*:6000\", \"ipc:///tmp/a\", \"inproc://b\" ];\n"
            "device = 2;\n"
            "mode = \"persistent\";\n"
            "max_message_size = 65536L;\n" /* int64 */
            "shutdown_drain_ms = 2500;\n"
            "io_threads = 3;\n"
            "persistent = { idle_spin_polls = 0; idle_backoff_max_ns = 0x400;\n"
            "               heartbeat_deadline_ms = 50; };\n"
            "relaunch = { max_messages_per_launch = 1; };\n"
            "placement = { force_fallback = true; };\n"
            "hosts = ( { pattern = \"*-wsl*\"; mode = \"relaunch\"; device = 1; },\n"
            "          { pattern = \"*\"; mode = \"auto\"; } );\n"
            "curve = { enabled = true; server_secret_key_file = \"/k\";\n"
            "  server_public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\";\n"
            "  allowed_clients = [ \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\" ]; };\n",
            &c);
    assert_int_equal(c.log_level, GB_LOG_DIAG);
    assert_int_equal(c.n_endpoints, 3);
    assert_string_equal(c.endpoints[2], "inproc://b");
    assert_int_equal(c.device, 2);
    assert_int_equal(c.mode, GB_MODE_PERSISTENT);
    assert_int_equal(c.max_message_size, 65536);
    assert_int_equal(c.shutdown_drain_ms, 2500);
    assert_int_equal(c.io_threads, 3);
    assert_int_equal(c.idle_spin_polls, 0);
    assert_int_equal(c.idle_backoff_max_ns, 1024);
    assert_int_equal(c.heartbeat_deadline_ms, 50);
    assert_int_equal(c.max_messages_per_launch, 1);
    assert_true(c.force_fallback_placement);
    assert_int_equal(c.n_hosts, 2);
    assert_true(c.hosts[0].has_device);
    assert_int_equal(c.hosts[0].device, 1);
    assert_int_equal(c.hosts[0].mode, GB_MODE_RELAUNCH);
    assert_false(c.hosts[1].has_device);
    assert_int_equal(c.hosts[1].mode, GB_MODE_AUTO);
    assert_true(c.curve.enabled);
    assert_string_equal(c.curve.server_secret_key_file, "/k");
    assert_int_equal(c.curve.n_allowed, 1);
    assert_string_equal(c.curve.allowed_clients[0], "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID");
    /* fewer endpoints than the defaults: no stale ones behind */
    load_ok("endpoints = [ \"inproc://only\" ];", &c);
    assert_int_equal(c.n_endpoints, 1);
    assert_string_equal(c.endpoints[1], "");
}

static void test_grain_merge(void **state)
{
    (void)state;
    gb_config_t c;
    load_ok("grains = (\n"
            "  { type = \"echo\"; slot_size = 128; },\n"
            "  { type = \"new.type\"; max_grains = 5L; collection_age_s = 0; max_evicted_kb = 1; },\n"
            "  { type = \"pagerank.sender\"; queue_capacity = 2; slot_size = 65536;\n"
            "    messages_per_iteration = 4096; max_grains = 16777216; cpu_threads = 256; }\n"
            ");\n",
            &c);
    assert_int_equal(c.n_grains, 5);
    /* listed built-in: given keys replaced, the rest keep the type's defaults */
    const gb_grain_config_t *e = gb_config_grain(&c, "echo");
    assert_int_equal(e->slot_size, 128);
    assert_int_equal(e->queue_capacity, 4096);
    assert_int_equal(e->max_grains, 65536);
    /* unlisted built-ins untouched */
    assert_int_equal(gb_config_grain(&c, "vecadd")->slot_size, 64);
    assert_int_equal(gb_config_grain(&c, "pagerank.aggregator")->queue_capacity, 512);
    /* new type: generic defaults */
    const gb_grain_config_t *n = gb_config_grain(&c, "new.type");
    assert_non_null(n);
    assert_int_equal(n->max_grains, 5);
    assert_int_equal(n->queue_capacity, 1024);
    assert_int_equal(n->slot_size, 256);
    assert_int_equal(n->messages_per_iteration, 256);
    assert_int_equal(n->cpu_threads, 0);
    assert_int_equal(n->collection_age_s, 0);
    assert_int_equal(e->collection_age_s, 900); /* the default: Orleans' 15 minutes */
    assert_int_equal(n->max_evicted_kb, 1);
    assert_int_equal(e->max_evicted_kb, 65536); /* the default: 64 MiB */
    /* upper bounds are inclusive */
    const gb_grain_config_t *s = gb_config_grain(&c, "pagerank.sender");
    assert_int_equal(s->queue_capacity, 2);
    assert_int_equal(s->slot_size, 65536);
    assert_int_equal(s->messages_per_iteration, 4096);
    assert_int_equal(s->max_grains, 16777216);
    assert_int_equal(s->cpu_threads, 256);

    /* exactly the table size is fine: 4 built-ins + 12 new */
    char text[4096] = "grains = (";
    for (int i = 0; i < GB_MAX_GRAIN_TYPES - 4; i++) {
        char one[64];
        snprintf(one, sizeof one, "%s{ type = \"t%d\"; }", i ? "," : "", i);
        strcat(text, one);
    }
    strcat(text, ");");
    load_ok(text, &c);
    assert_int_equal(c.n_grains, GB_MAX_GRAIN_TYPES);
}

/* ------------------------------------------------------------ errors */

/* devices: a list or "all", printed and read back; bad ones name the entry. */
static void test_devices(void **state)
{
    (void)state;
    gb_config_t cfg, back;
    load_ok("devices = [1, 0, 1];\n", &cfg);
    assert_int_equal(cfg.n_devices, 3);
    assert_int_equal(cfg.devices[0], 1);
    assert_int_equal(cfg.devices[2], 1);
    assert_int_equal(cfg.device, 1); /* the first, for what reads one device */
    assert_false(cfg.devices_all);
    print_reload(&cfg, &back);
    assert_memory_equal(&cfg, &back, sizeof cfg);
    load_ok("devices = \"all\";\n", &cfg);
    assert_true(cfg.devices_all);
    print_reload(&cfg, &back);
    assert_memory_equal(&cfg, &back, sizeof cfg);
    load_ok("device = 2;\n", &cfg);
    assert_int_equal(cfg.n_devices, 0);
    assert_int_equal(cfg.device, 2);

    expect_error("mode = \"cpu\";\ndevices = [];\n", 2, "devices: 0 entries; give 1 to 8");
    expect_error("devices = [0, 1, 2, 3, 4, 5, 6, 7, 0];\n", 1, "devices: 9 entries; give 1 to 8");
    expect_error("devices = \"some\";\n", 1, "devices: expected \"all\" or a list");
    expect_error("devices = 3;\n", 1, "devices: expected \"all\" or a list of device indexes like [0, 1], got an integer");
    expect_error("devices = [0, 1024];\n", 1, "devices[1]: 1024 is out of range (0..1023)");
    expect_error("devices = (0, \"one\");\n", 1, "devices[1]: expected a device index, got a string");
    expect_error("device = 0;\ndevices = [0, 1];\n", 2, "give either device (one) or devices (a list), not both");
}

static void test_err_syntax(void **state)
{
    (void)state;
    expect_error("log_level = \"info\";\n\ndevice = ;\n", 3, "syntax error");
    expect_error("device = 1;\npersistent = {\n  idle_spin_polls = 3 4;\n};\n", 3, "syntax error");
    expect_error("mode = \"cpu\";\nmode = \"cpu\";\n", 2, "duplicate key 'mode'");
    expect_error("curve = {\n  enabled = false;\n  enabled = true;\n};\n", 3, "duplicate key 'enabled'");
    /* Both on one line, or the line sets other keys first: still the key set twice. */
    expect_error("curve = { enabled = false; enabled = true; };\n", 1, "duplicate key 'enabled'");
    expect_error("grains = ( { type = \"echo\"; max_grains = 5; max_grains = 6; } );\n", 1,
                 "duplicate key 'max_grains'");
    expect_error("mode = \"cpu\";\nio_threads = 1; mode = \"cpu\";\n", 2, "duplicate key 'mode'");
    expect_error("endpoints = [ \"tcp://a:1\", 5 ];\n", 1, "mismatched element type in array");
}

static void test_err_unknown_keys(void **state)
{
    (void)state;
    expect_error("log_level = \"info\";\nlog_levle = \"info\";\n", 2,
                 "unknown key 'log_levle' at top level; did you mean 'log_level'?");
    expect_error("grain = ();\n", 1, "unknown key 'grain' at top level; did you mean 'grains'?");
    expect_error("persistent = {\n  idle_spin_pols = 3;\n};\n", 2,
                 "unknown key 'idle_spin_pols' in persistent; did you mean 'idle_spin_polls'?");
    expect_error("relaunch = { max_message_per_launch = 3; };\n", 1,
                 "did you mean 'max_messages_per_launch'?");
    expect_error("placement = {\n force_fallbak = true; };\n", 2,
                 "unknown key 'force_fallbak' in placement; did you mean 'force_fallback'?");
    expect_error("grains = (\n { type = \"echo\"; },\n { type = \"vecadd\";\n  slotsize = 64; }\n);\n",
                 4, "unknown key 'slotsize' in grains[1]; did you mean 'slot_size'?");
    expect_error("hosts = ( { pattern = \"x\"; mode = \"cpu\";\n devcie = 1; } );\n", 2,
                 "unknown key 'devcie' in hosts[0]; did you mean 'device'?");
    expect_error("curve = {\n enabled = false;\n allowed_client = [];\n};\n", 3,
                 "unknown key 'allowed_client' in curve; did you mean 'allowed_clients'?");
    /* nothing close: list the valid keys instead of a wild guess */
    expect_error("\n\nfrobnicate = 1;\n", 3,
                 "unknown key 'frobnicate' at top level; valid keys: log_level, endpoints, "
                 "device, mode, max_message_size, arena_mb, shutdown_drain_ms, persistent, relaunch, placement, grains, "
                 "hosts, curve");
}

static void test_err_types(void **state)
{
    (void)state;
    expect_error("device = \"0\";\n", 1, "device: expected an integer, got a string");
    expect_error("\nmax_message_size = 1024.0;\n", 2,
                 "max_message_size: expected an integer, got a float");
    expect_error("persistent = {\n  heartbeat_deadline_ms = true;\n};\n", 2,
                 "persistent.heartbeat_deadline_ms: expected an integer, got a boolean");
    expect_error("grains = ( { type = \"echo\";\n slot_size = [64]; } );\n", 2,
                 "grains[0].slot_size: expected an integer, got an array");
    expect_error("placement = { force_fallback = 1; };\n", 1,
                 "placement.force_fallback: expected a boolean (true or false), got an integer");
    expect_error("log_level = 3;\n", 1, "log_level: expected a string, got an integer");
    expect_error("mode = auto;\n", 1, "syntax error"); /* unquoted: libconfig's own error */
    expect_error("persistent = 5;\n", 1, "persistent: expected a group { ... }, got an integer");
    expect_error("endpoints = \"tcp://a:1\";\n", 1,
                 "endpoints: expected an array [ \"...\", ... ], got a string");
    expect_error("grains = { type = \"echo\"; };\n", 1,
                 "grains: expected a list ( { ... }, ... ), got a group");
    expect_error("grains = ( \"echo\" );\n", 1, "grains[0]: expected a group");
    expect_error("hosts = ( { pattern = \"x\";\n mode = 1; } );\n", 2,
                 "hosts[0].mode: expected a string, got an integer");
    expect_error("curve = { enabled = \"yes\"; };\n", 1,
                 "curve.enabled: expected a boolean (true or false), got a string");
    expect_error("curve = {\n allowed_clients = [ 1 ]; };\n", 2,
                 "curve.allowed_clients[0]: expected a string, got an integer");
}

static void test_err_range(void **state)
{
    (void)state;
    expect_error("device = -1;\n", 1, "device: -1 is out of range (0..1023)");
    expect_error("io_threads = 0;\n", 1, "io_threads: 0 is out of range (1..16)");
    expect_error("io_threads = 17;\n", 1, "io_threads: 17 is out of range (1..16)");
    expect_error("max_message_size = 8;\n", 1,
                 "max_message_size: 8 is out of range (64..67108864)");
    expect_error("max_message_size = 67108865;\n", 1,
                 "max_message_size: 67108865 is out of range (64..67108864)");
    expect_error("max_message_size = 4294967360L;\n", 1,
                 "max_message_size: 4294967360 is out of range (64..67108864)");
    expect_error("persistent = {\n idle_backoff_max_ns = 1000001; };\n", 2,
                 "persistent.idle_backoff_max_ns: 1000001 is out of range (0..1000000)");
    expect_error("persistent = { heartbeat_deadline_ms = 0; };\n", 1,
                 "persistent.heartbeat_deadline_ms: 0 is out of range (1..600000)");
    expect_error("relaunch = { max_messages_per_launch = 0; };\n", 1,
                 "relaunch.max_messages_per_launch: 0 is out of range (1..16777216)");
    expect_error("grains = ( { type = \"echo\";\n\n messages_per_iteration = 4097; } );\n", 3,
                 "grains[0].messages_per_iteration: 4097 is out of range (1..4096)");
    expect_error("grains = ( { type = \"echo\"; cpu_threads = 257; } );\n", 1,
                 "grains[0].cpu_threads: 257 is out of range (0..256)");
    expect_error("grains = ( { type = \"echo\"; collection_age_s = 1073741825; } );\n", 1,
                 "grains[0].collection_age_s: 1073741825 is out of range (0..1073741824)");
    expect_error("grains = ( { type = \"echo\"; max_evicted_kb = 0; } );\n", 1,
                 "grains[0].max_evicted_kb: 0 is out of range (1..67108864)");
    expect_error("grains = ( { type = \"echo\"; max_evicted_kb = 67108865; } );\n", 1,
                 "grains[0].max_evicted_kb: 67108865 is out of range (1..67108864)");
    expect_error("grains = ( { type = \"echo\"; max_grains = 16777217; } );\n", 1,
                 "grains[0].max_grains: 16777217 is out of range (1..16777216)");
    expect_error("grains = ( { type = \"echo\"; queue_capacity = 1; } );\n", 1,
                 "grains[0].queue_capacity: 1 is out of range (2..16777216)");
    expect_error("grains = ( { type = \"echo\"; slot_size = 32; } );\n", 1,
                 "grains[0].slot_size: 32 is out of range (64..65536)");
    expect_error("hosts = ( { pattern = \"x\"; mode = \"cpu\"; device = 1024; } );\n", 1,
                 "hosts[0].device: 1024 is out of range (0..1023)");
}

static void test_err_power_of_two(void **state)
{
    (void)state;
    expect_error("grains = (\n { type = \"vecadd\";\n   queue_capacity = 1000; } );\n", 3,
                 "grains[0].queue_capacity: 1000 is not a power of two (2..16777216)");
    expect_error("grains = ( { type = \"echo\"; },\n { type = \"vecadd\"; slot_size = 96; } );\n",
                 2, "grains[1].slot_size: 96 is not a power of two (64..65536)");
}

static void test_err_names(void **state)
{
    (void)state;
    expect_error("\nmode = \"fast\";\n", 2,
                 "mode: unknown mode 'fast'; valid modes: auto, persistent, relaunch, cpu");
    expect_error("hosts = ( { pattern = \"x\";\n mode = \"gpu\"; } );\n", 2,
                 "hosts[0].mode: unknown mode 'gpu'; valid modes: auto, persistent, relaunch, cpu");
    expect_error("log_level = \"verbose\";\n", 1,
                 "log_level: unknown log level 'verbose'; valid levels: error, warn, info, "
                 "debug, diag");
}

static void test_err_tables(void **state)
{
    (void)state;
    char text[8192];
    /* endpoints: 9 > 8 */
    strcpy(text, "endpoints = [");
    for (int i = 0; i <= GB_MAX_ENDPOINTS; i++) {
        char one[64];
        snprintf(one, sizeof one, "%s\"tcp://h:%d\"", i ? ", " : "", 1000 + i);
        strcat(text, one);
    }
    strcat(text, "];\n");
    expect_error(text, 1, "endpoints: too many entries (9, at most 8)");

    /* hosts: 17 > 16 */
    strcpy(text, "\nhosts = (");
    for (int i = 0; i <= GB_MAX_HOSTS; i++) {
        char one[96];
        snprintf(one, sizeof one, "%s{ pattern = \"h%d\"; mode = \"cpu\"; }\n", i ? "," : "", i);
        strcat(text, one);
    }
    strcat(text, ");\n");
    expect_error(text, 2, "hosts: too many entries (17, at most 16)");

    /* grain types: 4 built-in + 13 new = 17 > 16; the 13th new one is at line 14 */
    strcpy(text, "grains = (\n");
    for (int i = 0; i < GB_MAX_GRAIN_TYPES - 3; i++) {
        char one[64];
        snprintf(one, sizeof one, "%s{ type = \"t%d\"; }\n", i ? "," : "", i);
        strcat(text, one);
    }
    strcat(text, ");\n");
    expect_error(text, 14, "grains: too many grain types (at most 16");

    /* allowed clients: 33 > 32 */
    strcpy(text, "curve = {\n allowed_clients = [");
    for (int i = 0; i <= GB_MAX_CLIENT_KEYS; i++) {
        strcat(text, i ? ", " : "");
        strcat(text, "\"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\"");
    }
    strcat(text, "];\n};\n");
    expect_error(text, 2, "curve.allowed_clients: too many entries (33, at most 32)");
}

static void test_err_grains(void **state)
{
    (void)state;
    expect_error("grains = (\n { type = \"echo\"; slot_size = 128; },\n"
                 " { type = \"vecadd\"; },\n { type = \"echo\"; }\n);\n",
                 4, "grains[2]: duplicate grain type 'echo' (first given at line 2)");
    expect_error("grains = (\n { slot_size = 128; }\n);\n", 2,
                 "grains[0]: missing required key 'type'");
    expect_error("grains = ( { type = \"\"; } );\n", 1,
                 "grains[0].type: '' is not a valid grain type name");
    expect_error("grains = ( { type = \"a b\"; } );\n", 1,
                 "grains[0].type: 'a b' is not a valid grain type name");
    expect_error("grains = ( { type = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"; } );\n",
                 1, "grains[0].type: too long (64 characters, at most 63)");
}

static void test_err_endpoints(void **state)
{
    (void)state;
    expect_error("log_level = \"info\";\nendpoints = [];\n", 2,
                 "endpoints: the list is empty; give at least one endpoint");
    expect_error("endpoints = ( );\n", 1, "endpoints: the list is empty");
    expect_error("endpoints = [\n  \"tcp://a:1\",\n  \"udp://b:2\" ];\n", 3,
                 "endpoints[1]: 'udp://b:2' must start with tcp://, ipc:// or inproc://");
    expect_error("endpoints = [ \"127.0.0.1:5555\" ];\n", 1,
                 "endpoints[0]: '127.0.0.1:5555' must start with tcp://, ipc:// or inproc://");
    expect_error("endpoints = [ \"tcp://\" ];\n", 1,
                 "endpoints[0]: 'tcp://' has no address after the scheme");
    /* ZeroMQ would bind port 99999 modulo 65536 */
    expect_error("endpoints = [ \"tcp://127.0.0.1:99999\" ];\n", 1,
                 "endpoints[0]: 'tcp://127.0.0.1:99999' needs a port from 0 to 65535 (or *) after the host");
    expect_error("endpoints = [ \"tcp://127.0.0.1\" ];\n", 1, "needs a port from 0 to 65535");
    expect_error("endpoints = [ \"tcp://h:12x\" ];\n", 1, "needs a port from 0 to 65535");
    /* Bound twice, the second bind would fail after --check-config passed. */
    expect_error("endpoints = [ \"ipc:///tmp/a.sock\",\n  \"tcp://127.0.0.1:5\",\n  \"ipc:///tmp/a.sock\" ];\n", 3,
                 "endpoints[2]: 'ipc:///tmp/a.sock' takes the address of endpoints[0] 'ipc:///tmp/a.sock' "
                 "(each address is bound once)");
    expect_error("endpoints = [ \"tcp://*:5555\", \"tcp://127.0.0.1:05555\" ];\n", 1,
                 "endpoints[1]: 'tcp://127.0.0.1:05555' takes the address of endpoints[0] 'tcp://*:5555'");
    expect_error("endpoints = [ \"tcp://127.0.0.1:7\", \"tcp://0.0.0.0:7\" ];\n", 1, "takes the address of endpoints[0]");
    gb_config_t cfg;
    char err[256];
    gb_config_defaults(&cfg);
    /* Fresh ports and names each time bind again and again; one port binds
     * on two hosts. */
    assert_int_equal(gb_config_load_string("endpoints = [ \"tcp://*:5555\", \"tcp://[::1]:65535\", \"tcp://*:*\", \"tcp://*:*\", "
                                           "\"tcp://*:0\", \"tcp://*:0\", \"ipc://*\", \"ipc://*\" ];\n",
                                           "t.cfg", &cfg, err, sizeof err),
                     GB_OK);
    assert_int_equal(gb_config_load_string("endpoints = [ \"tcp://127.0.0.1:5556\", \"tcp://127.0.0.2:5556\" ];\n",
                                           "t.cfg", &cfg, err, sizeof err),
                     GB_OK);
}

static void test_err_hosts(void **state)
{
    (void)state;
    expect_error("hosts = (\n { mode = \"cpu\"; } );\n", 2, "hosts[0]: missing required key 'pattern'");
    expect_error("hosts = (\n { pattern = \"gpu-*\"; } );\n", 2,
                 "hosts[0]: missing required key 'mode' (one of auto, persistent, relaunch, cpu)");
    expect_error("hosts = ( { pattern = \"\"; mode = \"cpu\"; } );\n", 1, "hosts[0]: pattern is empty");
    expect_error("hosts = ( { pattern = \"a*\"; mode = \"cpu\"; },\n"
                 "          { pattern = \"a*\"; mode = \"relaunch\"; } );\n",
                 2, "hosts[1]: duplicate host pattern 'a*'");
}

static void test_err_curve(void **state)
{
    (void)state;
    expect_error("curve = {\n  enabled = true;\n  server_public_key = "
                 "\"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\";\n};\n",
                 2, "curve.enabled is true but curve.server_secret_key_file is not set");
    expect_error("curve = {\n  enabled = true;\n  server_secret_key_file = \"/k\";\n};\n", 2,
                 "curve.enabled is true but curve.server_public_key is not set");
    expect_error("curve = {\n  server_public_key = \"short\";\n};\n", 2,
                 "curve.server_public_key: not a Z85 CURVE key");
    expect_error("curve = { allowed_clients = [\n \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\\\"\" ]; };\n",
                 2, "curve.allowed_clients[0]: not a Z85 CURVE key");
    /* disabled: keys may be absent */
    gb_config_t c;
    load_ok("curve = { enabled = false; };", &c);
    assert_false(c.curve.enabled);
}

/* Errors from a real file name the file; a missing file is GB_ERR_IO. */
static void test_file_errors(void **state)
{
    (void)state;
    char path[] = "/tmp/gb_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char bad[] = "log_level = \"info\";\n# comment\ngrains = ( { type = \"echo\"; slot_size = 100; } );\n";
    assert_int_equal(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);

    gb_config_t c, before;
    nondefault(&c);
    before = c;
    char err[512], want[600];
    assert_int_equal(gb_config_load(path, &c, err, sizeof err), GB_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:3: grains[0].slot_size: 100 is not a power of two", path);
    assert_non_null(strstr(err, want));
    assert_memory_equal(&c, &before, sizeof c);

    /* a syntax error names the file and line too */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("device = 0;\n\nmode = \"cpu\";\nlog_level = = \"info\";\n", f);
    fclose(f);
    assert_int_equal(gb_config_load(path, &c, err, sizeof err), GB_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:4: syntax error", path);
    assert_string_equal(err, want);
    assert_memory_equal(&c, &before, sizeof c);
    unlink(path);

    /* missing file */
    assert_int_equal(gb_config_load(path, &c, err, sizeof err), GB_ERR_IO);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "No such file or directory"));
    assert_memory_equal(&c, &before, sizeof c);

    /* a tiny error buffer truncates, never overflows */
    char tiny[8];
    assert_int_equal(gb_config_load_string("device = \"x\";", "t.cfg", &c, tiny, sizeof tiny),
                     GB_ERR_CONFIG);
    assert_string_equal(tiny, "t.cfg:1");
    assert_int_equal(gb_config_load_string("device = \"x\";", "t.cfg", &c, NULL, 0),
                     GB_ERR_CONFIG);
    assert_memory_equal(&c, &before, sizeof c);
}

/* Loader edge cases: only regular files (a FIFO must not block), a size cap,
 * long tokens refused before libconfig's quadratic scanner sees them, integer
 * literals past 64 bits, @include. */
static void test_file_edge_cases(void **state)
{
    (void)state;
    char dir[] = "/tmp/gb_test_cfgdir_XXXXXX", path[300], err[512];
    assert_non_null(mkdtemp(dir));
    gb_config_t c, before;
    nondefault(&c);
    before = c;

    assert_int_equal(gb_config_load(dir, &c, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "is a directory; the config file must be a regular file"));
    assert_null(strstr(err, "file I/O error"));

    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(gb_config_load(path, &c, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "is a FIFO"));
    unlink(path);

    snprintf(path, sizeof path, "%s/big.cfg", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < (1 << 20) / 16 + 1; i++)
        fputs("# padding line.\n", f);
    fclose(f);
    assert_int_equal(gb_config_load(path, &c, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "holds at most 1048576"));

    f = fopen(path, "w");
    fputs("device = 0;\n", f);
    fputc(0, f);
    fputs("mode = \"cpu\";\n", f);
    fclose(f);
    assert_int_equal(gb_config_load(path, &c, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "NUL byte"));
    unlink(path);
    assert_memory_equal(&c, &before, sizeof c);
    rmdir(dir);

    /* One long token: a string, a name, a number, a comment. */
    size_t n = 64 * 1024;
    char *text = malloc(n + 64);
    assert_non_null(text);
    const char *const pre[] = {"log_level = \"", "", "device = 1", "# "};
    const char *const post[] = {"\";\n", " = 1;\n", ";\n", "\n"};
    char *filler = malloc(n + 1);
    for (int k = 0; k < 4; k++) {
        memset(filler, k == 2 ? '0' : 'x', n);
        filler[n] = '\0';
        snprintf(text, n + 64, "%s%s%s", pre[k], filler, post[k]);
        assert_int_equal(gb_config_load_string(text, "t.cfg", &c, err, sizeof err), GB_ERR_CONFIG);
        assert_non_null(strstr(err, "t.cfg:1: "));
        if (!strstr(err, "longer than 4096 characters") && !(k == 2 && strstr(err, "does not fit in 64 bits")))
            fail_msg("shape %d: %s", k, err);
    }
    /* a string over several lines counts whole */
    for (size_t i = 0; i < n; i += 64)
        memcpy(filler + i, "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\n", 64);
    snprintf(text, n + 64, "device = 0;\nlog_level = \"%s\";\n", filler);
    assert_int_equal(gb_config_load_string(text, "t.cfg", &c, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "t.cfg:2: string longer than 4096 characters"));
    free(filler);
    free(text);
    assert_memory_equal(&c, &before, sizeof c);

    expect_error("device = 99999999999999999999;\n", 1, "integer 99999999999999999999 does not fit in 64 bits");
    expect_error("mode = \"cpu\";\ndevice = -9223372036854775809;\n", 2, "does not fit in 64 bits");
    expect_error("device = 0x10000000000000000;\n", 1, "does not fit in 64 bits");
    expect_error("device = 0x8000000000000000;\n", 1, "does not fit in 64 bits");
    expect_error("device = 9223372036854775807L;\n", 1, "9223372036854775807 is out of range (0..1023)");
    expect_error("device = -9223372036854775808L;\n", 1, "-9223372036854775808 is out of range (0..1023)");
    /* without L libconfig wraps to 32 bits: 4294967297 would read as 1 */
    expect_error("device = 4294967297;\n", 1, "integer 4294967297 does not fit in 32 bits (write it with an L");
    expect_error("device = 0x100000001;\n", 1, "does not fit in 32 bits");
    expect_error("device = 2147483648;\n", 1, "does not fit in 32 bits");
    expect_error("device = -2147483648;\n", 1, "-2147483648 is out of range (0..1023)");
    expect_error("device = 2147483647;\n", 1, "2147483647 is out of range (0..1023)");
    expect_error("device = 1;\n@include \"/etc/passwd\"\n", 2, "@include is not supported");
    /* numbers inside names, strings and comments, and floats, are no integers */
    load_ok("# 99999999999999999999\nendpoints = [ \"tcp://h99999999999999999999:1\" ];\n"
            "/* 99999999999999999999 */ grains = ( { type = \"x99999999999999999999\"; } );\n",
            &c);
}

/* ------------------------------------------------------------ printing */

static void test_print_roundtrip(void **state)
{
    (void)state;
    gb_config_t c, back;
    gb_config_defaults(&c);
    print_reload(&c, &back);
    assert_memory_equal(&back, &c, sizeof c);

    load_ok("log_level = \"warn\";\n"
            "endpoints = [ \"tcp://*:7000\", \"ipc:///tmp/with \\\"quote\\\" and \\\\\" ];\n"
            "device = 5; mode = \"relaunch\"; max_message_size = 4096;\n"
            "persistent = { idle_spin_polls = 1; idle_backoff_max_ns = 2; heartbeat_deadline_ms = 3; };\n"
            "relaunch = { max_messages_per_launch = 9; };\n"
            "placement = { force_fallback = true; };\n"
            "grains = ( { type = \"echo\"; slot_size = 1024; }, { type = \"x_y-z\"; cpu_threads = 8; } );\n"
            "hosts = ( { pattern = \"a[0-9]*\"; mode = \"cpu\"; device = 3; },\n"
            "          { pattern = \"*\\tb\"; mode = \"persistent\"; } );\n"
            "curve = { enabled = true; server_secret_key_file = \"/etc/k\";\n"
            "  server_public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\";\n"
            "  allowed_clients = [ \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\",\n"
            "                      \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\" ]; };\n",
            &c);
    assert_string_equal(c.endpoints[1], "ipc:///tmp/with \"quote\" and \\");
    assert_string_equal(c.hosts[1].pattern, "*\tb");
    print_reload(&c, &back);
    assert_memory_equal(&back, &c, sizeof c);

    /* and through a file, as --check-config output would be used */
    char path[] = "/tmp/gb_test_print_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    gb_config_print(&c, f);
    fclose(f);
    char err[512] = "";
    gb_config_t fromfile;
    gb_config_defaults(&fromfile);
    assert_int_equal(gb_config_load(path, &fromfile, err, sizeof err), GB_OK);
    unlink(path);
    memset(fromfile.source, 0, sizeof fromfile.source);
    strcpy(fromfile.source, c.source);
    assert_memory_equal(&fromfile, &c, sizeof c);
}

/* Grain libraries (grains_libs.c loads them): where each was given, paths
 * relative to the config file's folder, a library alone or with its type's
 * settings; the errors. */
static void test_grain_libraries(void **state)
{
    (void)state;
    gb_config_t c;
    char err[512] = "";
    gb_config_defaults(&c);
    const size_t n = c.n_grains;
    assert_int_equal(gb_config_load_string("grains = (\n  { library = \"/opt/libx.so\"; },\n"
                                           "  { library = \"liby.so\"; type = \"y.t\"; slot_size = 128; } );\n",
                                           "/etc/gb/main.cfg", &c, err, sizeof err),
                     GB_OK);
    assert_int_equal(c.n_libs, 2);
    assert_string_equal(c.libs[0].path, "/opt/libx.so");
    assert_string_equal(c.libs[0].file, "/etc/gb/main.cfg");
    assert_int_equal(c.libs[0].line, 2);
    assert_int_equal(c.libs[0].index, 0);
    assert_string_equal(c.libs[1].path, "/etc/gb/liby.so");
    assert_int_equal(c.libs[1].line, 3);
    assert_int_equal(c.libs[1].index, 1);
    assert_int_equal(c.n_grains, n + 1); /* the library alone adds no type */
    assert_int_equal(gb_config_grain(&c, "y.t")->slot_size, 128);
    assert_int_equal(gb_config_add_grain(&c, "z.t")->slot_size, 256); /* a loaded type: generic settings */
    assert_int_equal(c.n_grains, n + 2);
    /* A config named without a folder is in the working directory; text
     * named in angle brackets (the embedding API's) is no file. */
    char cwd[512], want[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "%s/lib/libz.so", cwd);
    gb_config_defaults(&c);
    assert_int_equal(gb_config_load_string("grains = ( { library = \"lib/libz.so\"; } );\n", "b.cfg", &c, err,
                                           sizeof err),
                     GB_OK);
    assert_string_equal(c.libs[0].path, want);
    gb_config_defaults(&c);
    assert_int_equal(gb_config_load_string("grains = ( { library = \"libz.so\"; } );\n", "<config_text>", &c,
                                           err, sizeof err),
                     GB_OK);
    assert_string_equal(c.libs[0].path, "libz.so");
    expect_error("grains = ( { library = \"\"; } );\n", 1, "grains[0].library: empty path");
    expect_error("grains = ( { library = 5; } );\n", 1, "grains[0].library");
    expect_error("grains = ( { library = \"/a.so\"; },\n { library = \"/a.so\"; } );\n", 2,
                 "grains[1].library: '/a.so' is already given by grains[0]");
    expect_error("grains = ( { slot_size = 64; } );\n", 1, "missing required key 'type' (or 'library')");
}

/* curve.server_secret_key_file: a relative path is the config file's
 * folder's, as a library's (a daemon under systemd runs in /). */
static void test_curve_key_path(void **state)
{
    (void)state;
    gb_config_t c;
    char err[512] = "";
    gb_config_defaults(&c);
    assert_int_equal(gb_config_load_string("curve = { server_secret_key_file = \"keys/server.key\"; };\n",
                                           "/etc/gb/main.cfg", &c, err, sizeof err),
                     GB_OK);
    assert_string_equal(c.curve.server_secret_key_file, "/etc/gb/keys/server.key");
    gb_config_defaults(&c);
    assert_int_equal(gb_config_load_string("curve = { server_secret_key_file = \"/srv/k\"; };\n",
                                           "/etc/gb/main.cfg", &c, err, sizeof err),
                     GB_OK);
    assert_string_equal(c.curve.server_secret_key_file, "/srv/k");
    /* A config given by a relative path: the key's path is made absolute, so
     * that a printed config names the same file wherever it is loaded. */
    char cwd[512], want[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "%s/conf/keys/server.key", cwd);
    gb_config_defaults(&c);
    assert_int_equal(gb_config_load_string("curve = { server_secret_key_file = \"keys/server.key\"; };\n",
                                           "conf/gb.cfg", &c, err, sizeof err),
                     GB_OK);
    assert_string_equal(c.curve.server_secret_key_file, want);
    char *longp = malloc(GB_PATH_LEN + 64);
    assert_non_null(longp);
    int n = snprintf(longp, GB_PATH_LEN + 64, "curve = { server_secret_key_file = \"");
    memset(longp + n, 'a', GB_PATH_LEN - 8);
    strcpy(longp + n + GB_PATH_LEN - 8, "\"; };\n");
    gb_config_defaults(&c);
    assert_int_not_equal(gb_config_load_string(longp, "/etc/gb/main.cfg", &c, err, sizeof err), GB_OK);
    assert_non_null(strstr(err, "curve.server_secret_key_file: '"));
    assert_non_null(strstr(err, "too long once joined to the config's folder"));
    free(longp);
}

/* messaging = { ... }: the bounds of messages between grains. */
static void test_messaging(void **state)
{
    (void)state;
    gb_config_t c;
    load_ok("messaging = { outbox_kb = 8; hold_ms = 5; max_hops = 3; };\n", &c);
    assert_int_equal(c.mail_outbox_kb, 8);
    assert_int_equal(c.mail_hold_ms, 5);
    assert_int_equal(c.mail_max_hops, 3);
    gb_config_defaults(&c);
    assert_int_equal(c.mail_outbox_kb, 4096);
    assert_int_equal(c.mail_hold_ms, 10000);
    assert_int_equal(c.mail_max_hops, 64);
    expect_error("\nmessaging = { max_hops = 0; };\n", 2, "messaging.max_hops");
    expect_error("messaging = { outbox = 1; };\n", 1, "unknown key 'outbox' in messaging");
}

/* reply_backlog_mb: the bound on all clients' unsent replies. */
static void test_reply_backlog(void **state)
{
    (void)state;
    gb_config_t c;
    gb_config_defaults(&c);
    assert_int_equal(c.reply_backlog_mb, 64);
    load_ok("reply_backlog_mb = 2;\n", &c);
    assert_int_equal(c.reply_backlog_mb, 2);
    expect_error("\nreply_backlog_mb = 0;\n", 2, "reply_backlog_mb");
    expect_error("reply_backlog_mb = 65537;\n", 1, "reply_backlog_mb");
    expect_error("reply_backlog_kb = 1;\n", 1, "did you mean 'reply_backlog_mb'?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_mode_names),
        cmocka_unit_test(test_default_file_equals_defaults),
        cmocka_unit_test(test_examples_load),
        cmocka_unit_test(test_curve_key_path),
        cmocka_unit_test(test_messaging),
        cmocka_unit_test(test_reply_backlog),
        cmocka_unit_test(test_missing_keys_keep_defaults),
        cmocka_unit_test(test_full_valid),
        cmocka_unit_test(test_grain_merge),
        cmocka_unit_test(test_err_syntax),
        cmocka_unit_test(test_file_edge_cases),
        cmocka_unit_test(test_err_unknown_keys),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_err_types),
        cmocka_unit_test(test_err_range),
        cmocka_unit_test(test_err_power_of_two),
        cmocka_unit_test(test_err_names),
        cmocka_unit_test(test_err_tables),
        cmocka_unit_test(test_err_grains),
        cmocka_unit_test(test_err_endpoints),
        cmocka_unit_test(test_err_hosts),
        cmocka_unit_test(test_err_curve),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_print_roundtrip),
        cmocka_unit_test(test_grain_libraries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
