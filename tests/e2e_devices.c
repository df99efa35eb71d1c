/* End-to-end: one bridge with several devices (the config's `devices`,
 * docs/protocol.md "Several devices"), through libgpubridge:
 * - a key's device follows the documented hash (its test vectors), and a
 *   key's state lives on that device only: each device's telemetry counts
 *   exactly its keys' messages, echo's grain count goes on across rounds;
 * - DeactivateGrain reaches the key's device;
 * - Deactivate and Activate act on every device: requests to either wait
 *   while paused and are answered after;
 * - a team type (PageRank) runs on the first device only;
 * - a request forwarded grain to grain along keys crosses devices and its
 *   reply reaches the caller;
 * - too many rings for the devices is refused at start with a sentence.
 * GB_E2E_MODE: cpu (CI, each device its own threads), persistent or
 * relaunch (a GPU; GB_E2E_DEVICES "[0, 0]" lists one GPU twice). */
#include <stdbool.h>

#include "e2e_harness.h"
#include "gpu_skip.h"
#include "gpubridge/client.h"
#include "gpubridge/demo.h"
#include "grains/mail_grains.h"

#define NKEYS 64
#define ROUNDS 3
#define NDEV 2
#define WAIT_MS (10000 * E2E_SLOW)

static bridge_t g_b;

/* docs/protocol.md "Several devices": splitmix64's output function of the
 * key, modulo the number of devices. Written here from the document. */
static uint64_t mix(uint64_t key)
{
    uint64_t z = key + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t device_of(uint64_t key) { return (uint32_t)(mix(key) % NDEV); }

static const char *devices_cfg(void)
{
    const char *d = getenv("GB_E2E_DEVICES");
    return d && *d ? d : "[0, 1]";
}

static int setup(void **state)
{
    (void)state;
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "devices = %s;\narena_mb = 16;\n"
             "grains = ( { type = \"vecadd\"; }, { type = \"echo\"; },\n"
             "           { type = \"pagerank.sender\"; }, { type = \"pagerank.aggregator\"; } );\n",
             devices_cfg());
    if (bridge_start(&g_b, cfg) != 0) {
        bridge_print_log(&g_b);
        fail_msg("the bridge did not start");
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int st = g_b.pid ? bridge_stop(&g_b, SIGTERM, 20000 * E2E_SLOW) : 0;
    if (st != 0)
        bridge_print_log(&g_b);
    return st == 0 ? 0 : -1;
}

static gbc_client_t *client(void)
{
    const char *eps[1] = {g_b.endpoint};
    gbc_client_t *c = NULL;
    assert_int_equal(gbc_client_new(eps, 1, NULL, &c), GBC_OK);
    return c;
}

/* echo: grain (echo, key)'s count after this turn. */
static uint64_t echo_count(gbc_client_t *c, uint64_t key)
{
    gbc_echo_result_t er;
    gbc_err err = gbc_echo(c, key, "x", 1, &er, WAIT_MS);
    if (err)
        fail_msg("echo key %llu: %s: %s", (unsigned long long)key, gbc_strerror(err), gbc_last_error());
    return er.grain_count;
}

/* vecadd: a + b for key, checked. */
static void vecadd(gbc_client_t *c, uint64_t key)
{
    const float a[4] = {1, 2, 3, (float)(key % 1000)}, b[4] = {10, 20, 30, 40};
    float r[4];
    gbc_err err = gbc_vecadd(c, key, GBC_VECADD_ADD, a, b, 4, r, WAIT_MS);
    if (err)
        fail_msg("vecadd key %llu: %s: %s", (unsigned long long)key, gbc_strerror(err), gbc_last_error());
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == a[i] + b[i]);
}

static void telemetry(gbc_client_t *c, const char *type, gbc_telemetry_t *t)
{
    *t = (gbc_telemetry_t)GBC_TELEMETRY_INIT;
    if (gbc_ctl_telemetry(c, 0, type, t, WAIT_MS) != GBC_OK)
        fail_msg("telemetry %s: %s", type, gbc_last_error());
}

static void status(gbc_client_t *c, const char *type, gbc_grain_status_t *s)
{
    *s = (gbc_grain_status_t)GBC_GRAIN_STATUS_INIT;
    if (gbc_ctl_status(c, 0, type, s, WAIT_MS) != GBC_OK)
        fail_msg("status %s: %s", type, gbc_last_error());
}

/* The vectors of docs/protocol.md agree with the formula written here. */
static void test_device_vectors(void **state)
{
    (void)state;
    static const struct {
        uint64_t key, h;
        uint32_t of2, of3, of4;
    } v[] = {
        {0, 0xe220a8397b1dcdafull, 1, 1, 3},
        {1, 0x910a2dec89025cc1ull, 1, 2, 1},
        {2, 0x975835de1c9756ceull, 0, 1, 2},
        {42, 0xbdd732262feb6e95ull, 1, 1, 1},
        {UINT64_MAX, 0xe4d971771b652c20ull, 0, 2, 0},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_int_equal(mix(v[i].key), v[i].h);
        assert_int_equal(v[i].h % 2, v[i].of2);
        assert_int_equal(v[i].h % 3, v[i].of3);
        assert_int_equal(v[i].h % 4, v[i].of4);
    }
}

/* Keys of two types over several rounds: each device's telemetry counts
 * exactly the messages of its keys, and a key's state goes on. */
static void test_keys_stay_on_their_device(void **state)
{
    (void)state;
    gbc_client_t *c = client();
    static const char *types[2] = {"echo", "vecadd"};
    uint64_t before[2][NDEV], per[NDEV] = {0};
    for (int t = 0; t < 2; t++) {
        gbc_telemetry_t tm;
        telemetry(c, types[t], &tm);
        assert_int_equal(tm.n_devices, NDEV);
        for (uint32_t d = 0; d < NDEV; d++) {
            assert_int_equal(tm.devices[d].device_number, d);
            before[t][d] = tm.devices[d].messages_processed;
        }
    }
    for (int round = 0; round < ROUNDS; round++)
        for (uint64_t k = 0; k < NKEYS; k++) {
            const uint64_t key = k * 0x10001ull; /* spread, not only small keys */
            assert_int_equal(echo_count(c, key), (uint64_t)round + 1); /* every turn met the same state */
            vecadd(c, key);
            per[device_of(key)]++;
        }
    for (int t = 0; t < 2; t++) {
        gbc_telemetry_t tm;
        telemetry(c, types[t], &tm);
        uint64_t sum = 0;
        for (uint32_t d = 0; d < NDEV; d++) {
            assert_true(per[d] > 0);
            if (tm.devices[d].messages_processed - before[t][d] != per[d])
                fail_msg("%s device #%u: %llu messages, expected %llu", types[t], d,
                         (unsigned long long)(tm.devices[d].messages_processed - before[t][d]),
                         (unsigned long long)per[d]);
            sum += tm.devices[d].messages_processed;
        }
        assert_int_equal(tm.messages_processed, sum); /* the top level sums the devices */
    }
    gbc_client_destroy(&c);
}

/* DeactivateGrain of a key on each device frees that key's state only. */
static void test_deactivate_grain_on_its_device(void **state)
{
    (void)state;
    gbc_client_t *c = client();
    uint64_t on[NDEV] = {0}, other[NDEV] = {0};
    bool found[NDEV] = {false};
    for (uint64_t k = 1000; k < 1100; k++) /* a key and a neighbour on each device */
        if (!found[device_of(k)] && device_of(k + 5000) == device_of(k)) {
            found[device_of(k)] = true;
            on[device_of(k)] = k;
            other[device_of(k)] = k + 5000;
        }
    for (int d = 0; d < NDEV; d++) {
        assert_true(found[d]);
        assert_int_equal(echo_count(c, on[d]), 1);
        assert_int_equal(echo_count(c, on[d]), 2);
        assert_int_equal(echo_count(c, other[d]), 1);
    }
    for (int d = 0; d < NDEV; d++)
        assert_int_equal(gbc_ctl_deactivate_grain(c, "echo", on[d], WAIT_MS), GBC_OK);
    for (int d = 0; d < NDEV; d++) {
        assert_int_equal(echo_count(c, on[d]), 1);    /* fresh */
        assert_int_equal(echo_count(c, other[d]), 2); /* kept */
        gbc_err err = gbc_ctl_deactivate_grain(c, "echo", other[d] + 1, WAIT_MS);
        assert_int_equal(err, GBC_ERR_STATUS); /* never activated: STATUS_NO_ACTIVATION from its device */
    }
    gbc_client_destroy(&c);
}

/* Deactivate pauses the type on every device: requests to keys on both wait,
 * in order, and are answered after Activate. */
static void test_pause_every_device(void **state)
{
    (void)state;
    gbc_client_t *c = client();
    gbc_grain_status_t st[1] = {GBC_GRAIN_STATUS_INIT}; /* struct_size: the client writes what it says */
    assert_int_equal(gbc_ctl_deactivate(c, GBC_ALL_ENDPOINTS, "echo", st, WAIT_MS), GBC_OK);
    assert_int_equal(st[0].n_devices, NDEV);
    for (uint32_t d = 0; d < NDEV; d++)
        assert_int_equal(st[0].devices[d].state, GBC_GRAIN_STATE_INACTIVE);
    uint64_t key[NDEV];
    for (uint64_t k = 0, n = 0; n < NDEV; k++)
        if (device_of(k) == n)
            key[n++] = k;
    for (int d = 0; d < NDEV; d++)
        assert_int_equal(gbc_send(c, "echo", key[d], 1, NULL, 0, NULL), GBC_OK);
    gbc_reply_t r;
    assert_int_equal(gbc_poll(c, &r, 300), GBC_ERR_TIMEOUT); /* neither device answers while paused */
    assert_int_equal(gbc_ctl_activate(c, GBC_ALL_ENDPOINTS, "echo", st, WAIT_MS), GBC_OK);
    for (uint32_t d = 0; d < NDEV; d++)
        assert_int_equal(st[0].devices[d].state, GBC_GRAIN_STATE_ACTIVE);
    for (int d = 0; d < NDEV; d++) {
        gbc_err err = gbc_poll(c, &r, WAIT_MS);
        if (err)
            fail_msg("reply %d after activate: %s: %s", d, gbc_strerror(err), gbc_last_error());
        gbc_reply_clear(&r);
    }
    gbc_client_destroy(&c);
}

/* Status names each device, for team types too: they span the devices (cpu
 * threads, or GPUs with peer access; without it the log says they stay on
 * the first). */
static void test_status_per_device(void **state)
{
    (void)state;
    gbc_client_t *c = client();
    gbc_grain_status_t s;
    status(c, "vecadd", &s);
    assert_int_equal(s.n_devices, NDEV);
    for (uint32_t d = 0; d < NDEV; d++) {
        assert_int_equal(s.devices[d].device_number, d);
        assert_string_equal(s.devices[d].mode, e2e_mode());
        assert_int_equal(s.devices[d].state, GBC_GRAIN_STATE_ACTIVE);
    }
    assert_int_equal(s.device_number, 0);
    status(c, "pagerank.sender", &s);
    if (strcmp(e2e_mode(), "cpu") != 0 && log_contains(&g_b, "run on the first device only"))
        assert_int_equal(s.n_devices, 0);
    else
        assert_int_equal(s.n_devices, NDEV);
    assert_int_equal(s.device_number, 0);
    gbc_type_list_t l;
    assert_int_equal(gbc_ctl_list(c, 0, &l, WAIT_MS), GBC_OK);
    assert_int_equal(l.n, 4); /* every type once, not once per device */
    gbc_type_list_clear(&l);
    gbc_client_destroy(&c);
}

/* gpubridge --detect names each device and its mode. */
static void test_detect_lists_devices(void **state)
{
    (void)state;
    char dir[256], cfg[300], cmd[1024], line[512];
    e2e_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/detect.cfg", dir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "devices = %s;\n", devices_cfg());
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s --config %s --mode %s --detect 2>/dev/null", getenv("GB_BRIDGE_BIN"), cfg,
             e2e_mode());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int seen[NDEV] = {0};
    char want[64];
    while (fgets(line, sizeof line, p))
        for (int d = 0; d < NDEV; d++) {
            snprintf(want, sizeof want, "#%d: ", d);
            if (strstr(line, want) && strstr(line, e2e_mode()))
                seen[d] = 1;
        }
    assert_int_equal(pclose(p), 0);
    for (int d = 0; d < NDEV; d++)
        if (!seen[d])
            fail_msg("gpubridge --detect lists no device #%d in mode %s", d, e2e_mode());
}

/* A request forwarded grain to grain along keys 0, 1, 2, ... (so from
 * device to device, through the bridge): the last grain's reply reaches the
 * caller, and each device handled exactly its keys' hops. */
static void test_forward_across_devices(void **state)
{
    (void)state;
    const char *mail = getenv("GB_MAIL_LIB");
    assert_non_null(mail);
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "devices = %s;\ngrains = ( { library = \"%s\"; } );\n", devices_cfg(), mail);
    bridge_t b;
    if (bridge_start(&b, cfg) != 0) {
        bridge_print_log(&b);
        fail_msg("the bridge with the mail grains did not start");
    }
    const char *eps[1] = {b.endpoint};
    gbc_client_t *c = NULL;
    assert_int_equal(gbc_client_new(eps, 1, NULL, &c), GBC_OK);
    enum { HOPS = 15 };
    uint64_t want[NDEV] = {0};
    for (uint64_t k = 0; k <= HOPS; k++) /* key k's grain is mt.a for even k, mt.b for odd */
        want[device_of(k)]++;
    const uint32_t walk[2] = {HOPS, 0};
    gbc_reply_t r;
    gbc_err err = gbc_call(c, "mt.a", 0, MT_WALK, walk, sizeof walk, &r, WAIT_MS);
    if (err)
        fail_msg("walk: %s: %s", gbc_strerror(err), gbc_last_error());
    assert_int_equal(r.payload_len, 4);
    uint32_t made;
    memcpy(&made, r.payload, 4);
    assert_int_equal(made, HOPS);
    gbc_reply_clear(&r);
    /* A hop between keys of one device may go kernel to kernel (a device
     * link, persistent mode): counted as the sender's mail_linked on that
     * device, not in its messages_processed. Kernels publish those counts
     * once their links fall idle: read until they add up. */
    uint64_t got[NDEV] = {0};
    for (uint64_t end = e2e_ms() + 5000;;) {
        memset(got, 0, sizeof got);
        for (int t = 0; t < 2; t++) {
            gbc_telemetry_t tm;
            telemetry(c, t ? "mt.b" : "mt.a", &tm);
            assert_int_equal(tm.n_devices, NDEV);
            for (uint32_t d = 0; d < NDEV; d++)
                got[d] += tm.devices[d].messages_processed + tm.devices_mail_linked[d];
        }
        if (memcmp(got, want, sizeof got) == 0 || e2e_ms() > end)
            break;
        usleep(10000);
    }
    for (uint32_t d = 0; d < NDEV; d++) {
        assert_true(want[d] > 0);
        if (got[d] != want[d])
            fail_msg("device #%u handled %llu hops, expected %llu", d, (unsigned long long)got[d],
                     (unsigned long long)want[d]);
    }
    gbc_client_destroy(&c);
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000 * E2E_SLOW), 0);
}

/* More rings than a bridge keeps (GB_MAX_RINGS, 32): the bridge refuses to
 * start (exit 2), and its log says why: 5 grain types on 7 devices, and the
 * two PageRank types on the first, make 37 (on every device they would make
 * 49, so they stay on the first). 6 devices make 32: accepted, the PageRank
 * types on the first device, as the log says. */
static void test_too_many_rings(void **state)
{
    (void)state;
    const char *mail = getenv("GB_MAIL_LIB");
    assert_non_null(mail);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "devices = [0, 0, 0, 0, 0, 0, 0];\n"
             "grains = ( { library = \"%s\"; }, { type = \"vecadd\"; }, { type = \"echo\"; } );\n", mail);
    bridge_t b;
    assert_int_equal(bridge_start(&b, cfg), 2); /* a usage error */
    if (!log_contains(&b, "7 grain types on 7 devices make 37 ring kernels, more than 32")) {
        bridge_print_log(&b);
        fail_msg("no sentence about the rings in the log");
    }
    /* On 6 devices the same types make 32: the most a bridge keeps. (Not in
     * persistent mode: 30 resident kernels on the one GPU the test lists six
     * times is no configuration to start for a test.) */
    if (strcmp(e2e_mode(), "persistent") == 0)
        return;
    snprintf(cfg, sizeof cfg,
             "devices = [0, 0, 0, 0, 0, 0];\n"
             "grains = ( { library = \"%s\"; }, { type = \"vecadd\"; }, { type = \"echo\"; } );\n", mail);
    if (bridge_start(&b, cfg) != 0) {
        bridge_print_log(&b);
        fail_msg("32 ring kernels refused");
    }
    if (!log_contains(&b, "the team grain types run on the first device only: on every device they would make 42 "
                          "ring kernels, more than 32")) {
        bridge_print_log(&b);
        fail_msg("no sentence about the team types staying on the first device");
    }
    assert_int_equal(bridge_stop(&b, SIGTERM, 20000 * E2E_SLOW), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_vectors),
        cmocka_unit_test(test_keys_stay_on_their_device),
        cmocka_unit_test(test_deactivate_grain_on_its_device),
        cmocka_unit_test(test_pause_every_device),
        cmocka_unit_test(test_status_per_device),
        cmocka_unit_test(test_detect_lists_devices),
        cmocka_unit_test(test_forward_across_devices),
        cmocka_unit_test(test_too_many_rings),
    };
    if (argc > 1) /* a test name or pattern: only those (test_e2e_tmp.sh) */
        cmocka_set_test_filter(argv[1]);
    if (strcmp(e2e_mode(), "cpu") != 0)
        gb_require_gpu();
    return cmocka_run_group_tests(tests, setup, teardown);
}
