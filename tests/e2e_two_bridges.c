/* End-to-end: two bridge processes on one host (cpu mode), one libgpubridge
 * client over both endpoints (docs/operations.md "Several bridges"):
 * - the placement hash gives the test vectors of docs/protocol.md;
 * - every (type, key) of three grain types lands on the bridge
 *   gbc_placement names, and its state lives there only (test.counter's
 *   count, echo's grain_count, each bridge's telemetry);
 * - a bridge killed (SIGKILL) with requests in flight: its callers get
 *   errors (those in flight as soon as the connection ends, those not sent
 *   at their deadline), none hangs, each request completes once, and the
 *   other bridge keeps answering correctly meanwhile;
 * - the bridge restarted on the same endpoint: its keys are served again,
 *   with fresh state. */
#include <stdbool.h>

#include "e2e_harness.h"
#include "gpubridge/client.h"
#include "gpubridge/demo.h"

#define NKEYS 48
#define ROUNDS 3
#define COUNTER "test.counter"

static bridge_t g_b[2];
static char g_cfg[1024];

/* (Re)starts bridge i on its endpoint: the ipc file a killed bridge left
 * behind is removed first, so its return shows the new bridge is bound. */
static void start_bridge(int i, bool again)
{
    if (!again) {
        assert_int_equal(bridge_start(&g_b[i], g_cfg), 0);
        return;
    }
    bridge_t *b = &g_b[i];
    char sock[300];
    snprintf(sock, sizeof sock, "%s/bridge.sock", b->dir);
    unlink(sock);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *lg = freopen(b->log, "w", stderr);
        (void)lg;
        const char *bin = getenv("GB_BRIDGE_BIN");
        execl(bin, bin, "--config", b->cfg, "--mode", e2e_mode(), (char *)NULL);
        _exit(127);
    }
    b->pid = pid;
    e2e_live(pid, 1);
    uint64_t end = e2e_ms() + 20000 * E2E_SLOW;
    struct stat sb;
    while (stat(sock, &sb) != 0) {
        int st;
        assert_int_not_equal(waitpid(pid, &st, WNOHANG), pid);
        assert_true(e2e_ms() < end);
        usleep(10000);
    }
}

static int setup(void **state)
{
    (void)state;
    const char *lib = getenv("GB_COUNTER_LIB");
    assert_non_null(lib);
    snprintf(g_cfg, sizeof g_cfg,
             "grains = ( { library = \"%s\"; }, { type = \"vecadd\"; }, { type = \"echo\"; } );\n", lib);
    start_bridge(0, false);
    start_bridge(1, false);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < 2; i++)
        if (g_b[i].pid && bridge_stop(&g_b[i], SIGTERM, 20000 * E2E_SLOW) != 0)
            bad = -1;
    return bad;
}

/* A client over both bridges (timeout_ms 0: the default). */
static gbc_client_t *client_both(int timeout_ms)
{
    const char *eps[2] = {g_b[0].endpoint, g_b[1].endpoint};
    gbc_options_t o;
    gbc_options_init(&o);
    if (timeout_ms)
        o.timeout_ms = timeout_ms;
    gbc_client_t *c = NULL;
    assert_int_equal(gbc_client_new(eps, 2, &o, &c), GBC_OK);
    return c;
}

static gbc_client_t *client_one(int i)
{
    const char *eps[1] = {g_b[i].endpoint};
    gbc_client_t *c = NULL;
    assert_int_equal(gbc_client_new(eps, 1, NULL, &c), GBC_OK);
    return c;
}

/* test.counter: adds add to (COUNTER, key)'s count, returns the count. */
static uint64_t counter_add(gbc_client_t *c, uint64_t key, uint64_t add, size_t *endpoint)
{
    gbc_reply_t r;
    gbc_err err = gbc_call(c, COUNTER, key, 1, &add, sizeof add, &r, 10000 * E2E_SLOW);
    if (err)
        fail_msg("counter key %llu: %s: %s", (unsigned long long)key, gbc_strerror(err), gbc_last_error());
    assert_int_equal(r.payload_len, 8);
    uint64_t count;
    memcpy(&count, r.payload, 8);
    if (endpoint)
        *endpoint = r.endpoint;
    gbc_reply_clear(&r);
    return count;
}

static uint64_t processed(gbc_client_t *c, size_t ep, const char *type)
{
    gbc_telemetry_t t = GBC_TELEMETRY_INIT;
    gbc_err err = gbc_ctl_telemetry(c, ep, type, &t, 10000 * E2E_SLOW);
    if (err)
        fail_msg("telemetry %s on %zu: %s", type, ep, gbc_last_error());
    return t.messages_processed;
}

/* The hash of docs/protocol.md "Placement over several bridges": h itself
 * (h % SIZE_MAX is h for these), and its index among 2 and 3. */
static void test_placement_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        uint64_t key, h;
        size_t of2, of3;
    } v[] = {
        {"echo", 0, 0xa4d2056a8323a5a9ull, 1, 1},
        {"echo", 1, 0x1307b076877da735ull, 1, 2},
        {"vecadd", 42, 0x01e7c28794adc155ull, 1, 2},
        {COUNTER, 7, 0x2be5aef9c0b3f194ull, 0, 0},
        {"vecadd", UINT64_MAX, 0x3dacb03d2dbbb60bull, 1, 1},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_int_equal(gbc_placement(v[i].type, v[i].key, SIZE_MAX), v[i].h);
        assert_int_equal(gbc_placement(v[i].type, v[i].key, 2), v[i].of2);
        assert_int_equal(gbc_placement(v[i].type, v[i].key, 3), v[i].of3);
    }
    assert_int_equal(gbc_placement("echo", 5, 1), 0);
}

/* Keys of three types, several rounds, synchronous and pipelined: each
 * lands on its placed bridge, and only that bridge has its state. */
static void test_key_stays_on_its_bridge(void **state)
{
    (void)state;
    gbc_client_t *c = client_both(0), *one[2] = {client_one(0), client_one(1)};
    static const char *types[3] = {"vecadd", "echo", COUNTER};
    uint64_t before[2][3], per[2][3] = {{0}};
    for (size_t e = 0; e < 2; e++)
        for (int t = 0; t < 3; t++)
            before[e][t] = processed(c, e, types[t]);
    for (int round = 0; round < ROUNDS; round++) {
        for (uint64_t k = 0; k < NKEYS; k++) {
            size_t at;
            assert_int_equal(counter_add(c, k, k + 1, &at), (uint64_t)(round + 1) * (k + 1));
            assert_int_equal(at, gbc_placement(COUNTER, k, 2));
            per[at][2]++;
            gbc_echo_result_t er;
            assert_int_equal(gbc_echo(c, k, "x", 1, &er, 10000 * E2E_SLOW), GBC_OK);
            /* Its count goes on: every turn met the same state. */
            assert_int_equal(er.grain_count, (uint64_t)round + 1);
            per[gbc_placement("echo", k, 2)][1]++;
        }
        /* vecadd pipelined: every reply from the placed endpoint, right. */
        float a[4], b[4] = {1, 2, 3, 4}, res[4];
        for (uint64_t k = 0; k < NKEYS; k++) {
            for (int j = 0; j < 4; j++)
                a[j] = (float)(k * 10 + (uint64_t)j);
            assert_int_equal(gbc_vecadd_send(c, k, GBC_VECADD_ADD, a, b, 4, NULL), GBC_OK);
            per[gbc_placement("vecadd", k, 2)][0]++;
        }
        for (int n = 0; n < NKEYS; n++) {
            gbc_reply_t r;
            assert_int_equal(gbc_poll(c, &r, 10000 * E2E_SLOW), GBC_OK);
            assert_int_equal(gbc_vecadd_result(&r, res, 4), GBC_OK);
            uint64_t k = (uint64_t)(res[0] - 1.0f) / 10; /* a[0] + b[0] = 10k + 1 */
            assert_true(k < NKEYS);
            assert_int_equal(r.endpoint, gbc_placement("vecadd", k, 2));
            for (int j = 0; j < 4; j++)
                assert_true(res[j] == (float)(k * 10 + (uint64_t)j) + b[j]);
            gbc_reply_clear(&r);
        }
    }
    /* Both bridges got keys of every type, and each exactly its own. */
    for (size_t e = 0; e < 2; e++)
        for (int t = 0; t < 3; t++) {
            assert_true(per[e][t] > 0);
            assert_int_equal(processed(c, e, types[t]) - before[e][t], per[e][t]);
        }
    /* Asked directly (adding 0), a key's count is on its bridge only. */
    for (uint64_t k = 0; k < NKEYS; k++) {
        size_t home = gbc_placement(COUNTER, k, 2);
        assert_int_equal(counter_add(one[home], k, 0, NULL), ROUNDS * (k + 1));
        assert_int_equal(counter_add(one[1 - home], k, 0, NULL), 0);
    }
    gbc_client_destroy(&c);
    gbc_client_destroy(&one[0]);
    gbc_client_destroy(&one[1]);
}

/* Keys 1000.. of COUNTER placed on bridge e: n of them into keys[]. */
static void keys_on(size_t e, uint64_t *keys, int n)
{
    for (uint64_t k = 1000; n > 0; k++)
        if (gbc_placement(COUNTER, k, 2) == e) {
            *keys++ = k;
            n--;
        }
}

static void send_add(gbc_client_t *c, uint64_t key, uint64_t add, uint64_t *id)
{
    assert_int_equal(gbc_send(c, COUNTER, key, 1, &add, sizeof add, id), GBC_OK);
}

/* A reply to the dead bridge's request: STATUS_TIMEOUT made by the client,
 * at once for one in flight ("no reply can come"; on a machine slow enough,
 * its deadline may come first), at its deadline for one never sent. */
static void expect_lost(const gbc_reply_t *r, bool sent)
{
    assert_int_equal(r->endpoint, 1);
    if (r->status != GBC_STATUS_TIMEOUT)
        fail_msg("request %llu to the killed bridge: status %s (%s)", (unsigned long long)r->correlation_id,
                 gbc_status_name(r->status), r->error ? r->error : "");
    assert_non_null(r->error);
    assert_non_null(strstr(r->error, "connection to the bridge lost"));
    assert_non_null(strstr(r->error, sent ? "may or may not have been processed" : "not sent"));
}

/* Bridge 1 dies with requests in flight (its counter type paused, so none
 * can be answered before): each completes once, with STATUS_TIMEOUT, while
 * bridge 0 answers every request right. Then bridge 1 comes back on its
 * endpoint. */
static void test_bridge_dies_and_returns(void **state)
{
    (void)state;
    enum { N = 8 };
    gbc_client_t *c = client_both(5000 * E2E_SLOW);
    uint64_t live[N], dead[N];
    keys_on(0, live, N);
    keys_on(1, dead, N);
    for (int i = 0; i < N; i++) { /* both reached and known */
        assert_int_equal(counter_add(c, live[i], 1, NULL), 1);
        assert_int_equal(counter_add(c, dead[i], 1, NULL), 1);
    }
    assert_int_equal(gbc_ctl_deactivate(c, 1, COUNTER, NULL, 10000 * E2E_SLOW), GBC_OK);
    for (int i = 0; i < N; i++) {
        send_add(c, dead[i], 1, NULL);
        send_add(c, live[i], 1, NULL);
    }
    assert_int_equal(gbc_flush(c), GBC_OK);
    assert_int_equal(bridge_stop(&g_b[1], SIGKILL, 20000), 128 + SIGKILL);

    /* New requests to both after the death: the dead bridge's wait unsent. */
    uint64_t id_after_dead, id_after_live;
    send_add(c, dead[0], 1, &id_after_dead);
    send_add(c, live[0], 1, &id_after_live);
    int n_live = 0, n_dead = 0;
    bool seen_after_live = false;
    for (;;) {
        gbc_reply_t r;
        gbc_err err = gbc_poll(c, &r, 30000 * E2E_SLOW);
        if (err == GBC_ERR_EMPTY)
            break;
        if (err != GBC_OK && err != GBC_ERR_STATUS)
            fail_msg("poll: %s: %s", gbc_strerror(err), gbc_last_error());
        uint64_t id = r.correlation_id, count;
        if (r.endpoint == 0) {
            assert_int_equal(err, GBC_OK);
            assert_int_equal(r.payload_len, 8);
            memcpy(&count, r.payload, 8);
            assert_int_equal(count, id == id_after_live ? 3 : 2);
            seen_after_live |= id == id_after_live;
            n_live++;
        } else {
            assert_int_equal(err, GBC_ERR_STATUS);
            expect_lost(&r, id != id_after_dead);
            n_dead++;
        }
        gbc_reply_clear(&r);
    }
    assert_true(seen_after_live);
    assert_int_equal(n_live, N + 1);
    assert_int_equal(n_dead, N + 1);
    /* Synchronous calls: the dead bridge's keys fail by their deadline, the
     * live one's are served. */
    gbc_reply_t r;
    uint64_t one = 1;
    assert_int_equal(gbc_call(c, COUNTER, dead[1], 1, &one, 8, &r, 500), GBC_ERR_CONNECT);
    assert_non_null(strstr(gbc_last_error(), "connection lost"));
    assert_null(r.payload);
    assert_int_equal(counter_add(c, live[1], 1, NULL), 3);

    /* Back on the same endpoint: the client reconnects by itself; the keys
     * are served again, their state fresh (the last adds never ran). */
    start_bridge(1, true);
    uint64_t end = e2e_ms() + 20000 * E2E_SLOW;
    gbc_err err;
    while ((err = gbc_call(c, COUNTER, dead[0], 1, &one, 8, &r, 2000)) == GBC_ERR_CONNECT && e2e_ms() < end)
        ;
    if (err != GBC_OK)
        fail_msg("restarted bridge: %s: %s", gbc_strerror(err), gbc_last_error());
    uint64_t count;
    memcpy(&count, r.payload, 8);
    gbc_reply_clear(&r);
    assert_int_equal(count, 1);
    for (int i = 1; i < N; i++) {
        assert_int_equal(counter_add(c, dead[i], 5, NULL), 5);
        assert_int_equal(counter_add(c, live[i], 0, NULL), i == 1 ? 3 : 2);
    }
    gbc_client_destroy(&c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement_vectors),
        cmocka_unit_test(test_key_stays_on_its_bridge),
        cmocka_unit_test(test_bridge_dies_and_returns),
    };
    if (argc > 1) /* a test name or pattern: only those (test_e2e_tmp.sh) */
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, setup, teardown);
}
