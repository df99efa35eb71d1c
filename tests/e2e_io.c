/* End-to-end tests of a bridge with several I/O threads (io_threads; see
 * e2e_harness.h): many clients, each with many keys, send batches that mix
 * grain types into rings small enough that frames wait for room. Checked:
 * the requests of one client to one grain are handled in the order sent
 * (the echo grain counts its messages: the n-th to a key sees count n),
 * every request gets exactly one reply, control messages answer under
 * load, and SIGTERM drains: every request sent before it gets one reply,
 * OK or SHUTTING_DOWN, and the bridge exits 0. */
#include "e2e_harness.h"
#include "gpu_skip.h"

#define N_CLIENTS 8
#define N_KEYS 8       /* per client */
#define BATCH 32       /* envelopes per frame */
#define WINDOW 4       /* frames a client has unanswered at most */
#define VECADD_EVERY 8 /* every 8th envelope goes to vecadd: frames touch two rings */

#define REPLY_MS (30000 * E2E_SLOW)

typedef struct req {
    uint64_t key;
    uint64_t seq;  /* echo: the n-th message to key (1, 2, ...); 0: vecadd */
    uint8_t replies;
    uint8_t status_ok;
} req_t;

typedef struct client {
    void *sock;
    req_t *reqs;        /* by correlation id - 1 */
    uint64_t n_sent;    /* requests sent; the next correlation id is n_sent + 1 */
    uint64_t n_replies; /* replies seen */
    uint64_t key_seq[N_KEYS];
    uint64_t ok, shutting_down, other, dup, bad_order;
    int marked; /* the reply to its MARK control came */
} client_t;

/* The correlation id of a control request that shows its client's earlier
 * frames were all read (a connection's frames are read in order). */
#define MARK (1ull << 62)

static bridge_t g_b;

static int stop_bridge(void **state)
{
    (void)state;
    if (g_b.pid)
        bridge_stop(&g_b, SIGKILL, 5000);
    return 0;
}

static void start(int io_threads)
{
    char cfg[512];
    /* Small rings: frames are held for room, and resumed, in every shard. */
    snprintf(cfg, sizeof cfg,
             "io_threads = %d;\n"
             "grains = ( { type = \"echo\"; queue_capacity = 64; slot_size = 64; max_grains = 4096; },\n"
             "           { type = \"vecadd\"; queue_capacity = 64; slot_size = 128; } );\n",
             io_threads);
    assert_int_equal(bridge_start(&g_b, cfg), 0);
    if (io_threads > 1) {
        uint64_t end = e2e_ms() + 10000 * E2E_SLOW;
        while (!log_contains(&g_b, "I/O threads") && e2e_ms() < end)
            usleep(10000);
        assert_true(log_contains(&g_b, "I/O threads"));
    }
}

static void client_init(client_t *c, int idx, uint64_t max_reqs)
{
    memset(c, 0, sizeof *c);
    c->sock = client_open(g_b.endpoint);
    int hwm = 0;
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    c->reqs = calloc(max_reqs, sizeof *c->reqs);
    assert_non_null(c->reqs);
    (void)idx;
}

static void client_fini(client_t *c)
{
    zmq_close(c->sock);
    free(c->reqs);
}

static uint64_t key_of(int client, int k) { return (uint64_t)(client + 1) * 1000u + (uint64_t)k; }

/* One frame of BATCH envelopes: echo to the client's keys in turn (each
 * with its per-key sequence number), every VECADD_EVERY-th to vecadd. */
static void send_batch(client_t *c, int idx)
{
    Gpubridge__Envelope envs[BATCH], *ptrs[BATCH];
    Gpubridge__GrainId gids[BATCH];
    uint8_t pl[BATCH][32];
    float a[2] = {1, 2}, b[2] = {3, 4};
    for (int j = 0; j < BATCH; j++) {
        uint64_t corr = ++c->n_sent;
        req_t *r = &c->reqs[corr - 1];
        gpubridge__envelope__init(&envs[j]);
        gpubridge__grain_id__init(&gids[j]);
        envs[j].correlation_id = corr;
        envs[j].kind = GPUBRIDGE__KIND__KIND_REQUEST;
        envs[j].grain = &gids[j];
        int k = (int)(corr % N_KEYS);
        r->key = gids[j].key = key_of(idx, k);
        if (corr % VECADD_EVERY == 0) {
            gids[j].type = "vecadd";
            envs[j].message_type = GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST;
            envs[j].payload.len = pack_vecadd(pl[j], 0, a, b, 2);
        } else {
            Gpubridge__EchoRequest e = GPUBRIDGE__ECHO_REQUEST__INIT;
            r->seq = e.sequence = ++c->key_seq[k];
            gids[j].type = "echo";
            envs[j].message_type = GPUBRIDGE__ECHO_MESSAGE_TYPE__ECHO_MESSAGE_TYPE_REQUEST;
            envs[j].payload.len = gpubridge__echo_request__pack(&e, pl[j]);
        }
        envs[j].payload.data = pl[j];
        ptrs[j] = &envs[j];
    }
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.n_envelopes = BATCH;
    batch.envelopes = ptrs;
    Gpubridge__ClientFrame fr = GPUBRIDGE__CLIENT_FRAME__INIT;
    fr.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    fr.batch = &batch;
    send_frame(c->sock, &fr);
}

static void check_reply(client_t *c, const Gpubridge__Reply *rp)
{
    if (rp->correlation_id == MARK) {
        c->marked = 1;
        return;
    }
    if (rp->correlation_id == 0 || rp->correlation_id > c->n_sent) {
        fail_msg("reply with correlation id %llu (sent %llu), status %d: %s",
                 (unsigned long long)rp->correlation_id, (unsigned long long)c->n_sent, rp->status,
                 rp->error ? rp->error : "");
    }
    req_t *r = &c->reqs[rp->correlation_id - 1];
    c->n_replies++;
    if (r->replies++) {
        c->dup++;
        return;
    }
    if (rp->status == GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN) {
        c->shutting_down++;
        return;
    }
    if (rp->status != GPUBRIDGE__STATUS__STATUS_OK) {
        print_error("request %llu: status %d: %s\n", (unsigned long long)rp->correlation_id, rp->status,
                    rp->error ? rp->error : "");
        c->other++;
        return;
    }
    c->ok++;
    r->status_ok = 1;
    if (!r->seq)
        return;
    Gpubridge__EchoResponse *e = gpubridge__echo_response__unpack(NULL, rp->payload.len, rp->payload.data);
    assert_non_null(e);
    /* The n-th message to a key is that grain's n-th: handled in order. */
    if (e->sequence != r->seq || e->grain_count != r->seq) {
        if (!c->bad_order)
            print_error("key %llu: message %llu handled as the grain's %llu-th (sequence %llu)\n",
                        (unsigned long long)r->key, (unsigned long long)r->seq,
                        (unsigned long long)e->grain_count, (unsigned long long)e->sequence);
        c->bad_order++;
    }
    gpubridge__echo_response__free_unpacked(e, NULL);
}

/* Takes every frame waiting on any client, waiting up to timeout_ms for
 * the first. Returns how many replies came. */
static uint64_t collect(client_t *cs, int n, int timeout_ms)
{
    zmq_pollitem_t items[N_CLIENTS];
    for (int i = 0; i < n; i++)
        items[i] = (zmq_pollitem_t){cs[i].sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(items, n, timeout_ms) <= 0)
        return 0;
    uint64_t got = 0;
    for (int i = 0; i < n; i++) {
        Gpubridge__ServerFrame *f;
        while ((f = recv_frame(cs[i].sock, 0))) {
            size_t k;
            Gpubridge__Reply **rs = frame_replies(f, &k);
            for (size_t j = 0; j < k; j++)
                check_reply(&cs[i], rs[j]);
            got += k;
            gpubridge__server_frame__free_unpacked(f, NULL);
        }
    }
    return got;
}

/* A control request on its own client while the others load the bridge. */
static void control_under_load(void)
{
    void *s = client_open(g_b.endpoint);
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__ListGrainTypes l = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    c.op_case = GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES;
    c.list_grain_types = &l;
    send_env(s, make_control(7, &c));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(s, &f, REPLY_MS);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(r->correlation_id, 7);
    gpubridge__server_frame__free_unpacked(f, NULL);
    Gpubridge__TelemetryRequest t = GPUBRIDGE__TELEMETRY_REQUEST__INIT;
    t.grain_type = "echo";
    c.op_case = GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST;
    c.telemetry_request = &t;
    send_env(s, make_control(8, &c));
    r = recv_reply(s, &f, REPLY_MS);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(r->correlation_id, 8);
    gpubridge__server_frame__free_unpacked(f, NULL);
    zmq_close(s);
}

/* Every client sends `frames` frames, at most WINDOW unanswered, and reads
 * every reply. */
static void order_run(int io_threads, int frames)
{
    start(io_threads);
    client_t cs[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++)
        client_init(&cs[i], i, (uint64_t)frames * BATCH);
    const uint64_t total = (uint64_t)N_CLIENTS * frames * BATCH;
    uint64_t got = 0;
    int control_done = 0;
    uint64_t end = e2e_ms() + REPLY_MS * 4;
    while (got < total && e2e_ms() < end) {
        for (int i = 0; i < N_CLIENTS; i++)
            while (cs[i].n_sent < (uint64_t)frames * BATCH && cs[i].n_sent - cs[i].n_replies < WINDOW * BATCH)
                send_batch(&cs[i], i);
        got += collect(cs, N_CLIENTS, 100);
        if (!control_done && got > total / 2) {
            control_under_load();
            control_done = 1;
        }
    }
    assert_int_equal(got, total);
    for (int i = 0; i < N_CLIENTS; i++) {
        assert_int_equal(cs[i].dup, 0);
        assert_int_equal(cs[i].bad_order, 0);
        assert_int_equal(cs[i].other, 0);
        assert_int_equal(cs[i].ok, (uint64_t)frames * BATCH);
        client_fini(&cs[i]);
    }
    assert_true(control_done);
    assert_int_equal(bridge_stop(&g_b, SIGTERM, 20000 * E2E_SLOW), 0);
}

/* SIGTERM while every client has frames in flight: each request sent
 * before the signal gets exactly one reply, and the bridge exits 0. */
static void sigterm_run(int io_threads)
{
    start(io_threads);
    client_t cs[N_CLIENTS];
    const int frames = 40;
    for (int i = 0; i < N_CLIENTS; i++)
        client_init(&cs[i], i, (uint64_t)frames * BATCH);
    for (int round = 0; round < frames; round++)
        for (int i = 0; i < N_CLIENTS; i++)
            send_batch(&cs[i], i);
    /* Every frame read before the signal (on a loaded machine some would
     * still be on their way, and a frame the bridge never read is owed no
     * reply): each client's ListGrainTypes, sent after its frames, answered. */
    Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__ListGrainTypes lg = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    ctl.op_case = GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES;
    ctl.list_grain_types = &lg;
    for (int i = 0; i < N_CLIENTS; i++)
        send_env(cs[i].sock, make_control(MARK, &ctl));
    uint64_t got = 0;
    for (uint64_t end = e2e_ms() + REPLY_MS;;) {
        int marked = 0;
        for (int i = 0; i < N_CLIENTS; i++)
            marked += cs[i].marked;
        if (marked == N_CLIENTS || e2e_ms() > end)
            break;
        got += collect(cs, N_CLIENTS, 50);
    }
    for (int i = 0; i < N_CLIENTS; i++)
        assert_true(cs[i].marked);
    got -= N_CLIENTS; /* the MARK replies */
    kill(g_b.pid, SIGTERM);
    const uint64_t total = (uint64_t)N_CLIENTS * frames * BATCH;
    uint64_t end = e2e_ms() + REPLY_MS;
    while (got < total && e2e_ms() < end)
        got += collect(cs, N_CLIENTS, 100);
    int st = 0;
    assert_int_equal(waitpid(g_b.pid, &st, 0), g_b.pid);
    e2e_live(g_b.pid, 0);
    g_b.pid = 0;
    /* Replies the bridge sent as it exited may still be on their way (a
     * sanitized bridge under load can drain past REPLY_MS). */
    for (uint64_t after = e2e_ms() + 5000; got < total && e2e_ms() < after;)
        got += collect(cs, N_CLIENTS, 100);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(got, total);
    uint64_t ok = 0, sd = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        assert_int_equal(cs[i].dup, 0);
        assert_int_equal(cs[i].bad_order, 0);
        assert_int_equal(cs[i].other, 0);
        ok += cs[i].ok;
        sd += cs[i].shutting_down;
        client_fini(&cs[i]);
    }
    print_message("sigterm with %d I/O threads: %llu OK, %llu SHUTTING_DOWN\n", io_threads, (unsigned long long)ok,
                  (unsigned long long)sd);
    assert_int_equal(ok + sd, total);
}

static void test_order_2(void **state)
{
    (void)state;
    order_run(2, 64);
}

static void test_order_4(void **state)
{
    (void)state;
    order_run(4, 64);
}

/* vecadd deactivated: its ring fills and frames are held at their first
 * vecadd envelope. The client's next frames must not overtake them at the
 * echo ring; once vecadd is active again every request is answered, in
 * order. Deactivate and Activate go through the control path as well. */
static void paused_run(int io_threads)
{
    start(io_threads);
    void *ctl = client_open(g_b.endpoint);
    assert_int_equal(control_simple(ctl, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "vecadd"),
                     GPUBRIDGE__STATUS__STATUS_OK);
    client_t cs[N_CLIENTS];
    const int frames = 12;
    for (int i = 0; i < N_CLIENTS; i++)
        client_init(&cs[i], i, (uint64_t)frames * BATCH);
    for (int round = 0; round < frames; round++)
        for (int i = 0; i < N_CLIENTS; i++)
            send_batch(&cs[i], i);
    const uint64_t total = (uint64_t)N_CLIENTS * frames * BATCH;
    uint64_t got = 0, end = e2e_ms() + 500;
    while (e2e_ms() < end) /* the echo requests that can go, go; the rest wait */
        got += collect(cs, N_CLIENTS, 50);
    assert_true(got < total);
    assert_int_equal(control_simple(ctl, 2, GPUBRIDGE__CONTROL__OP_ACTIVATE, "vecadd"), GPUBRIDGE__STATUS__STATUS_OK);
    end = e2e_ms() + REPLY_MS;
    while (got < total && e2e_ms() < end)
        got += collect(cs, N_CLIENTS, 100);
    assert_int_equal(got, total);
    for (int i = 0; i < N_CLIENTS; i++) {
        assert_int_equal(cs[i].dup, 0);
        assert_int_equal(cs[i].bad_order, 0);
        assert_int_equal(cs[i].other, 0);
        client_fini(&cs[i]);
    }
    zmq_close(ctl);
    assert_int_equal(bridge_stop(&g_b, SIGTERM, 20000 * E2E_SLOW), 0);
}

static void test_paused_1(void **state)
{
    (void)state;
    paused_run(1);
}

static void test_paused_2(void **state)
{
    (void)state;
    paused_run(2);
}

static void test_paused_4(void **state)
{
    (void)state;
    paused_run(4);
}

/* One I/O thread, the drain as with several. */
static void test_sigterm_1(void **state)
{
    (void)state;
    sigterm_run(1);
}

static void test_sigterm_2(void **state)
{
    (void)state;
    sigterm_run(2);
}

static void test_sigterm_4(void **state)
{
    (void)state;
    sigterm_run(4);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    atexit(e2e_rm_tmpdirs);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_order_2, stop_bridge),
        cmocka_unit_test_teardown(test_order_4, stop_bridge),
        cmocka_unit_test_teardown(test_paused_1, stop_bridge),
        cmocka_unit_test_teardown(test_paused_2, stop_bridge),
        cmocka_unit_test_teardown(test_paused_4, stop_bridge),
        cmocka_unit_test_teardown(test_sigterm_1, stop_bridge),
        cmocka_unit_test_teardown(test_sigterm_2, stop_bridge),
        cmocka_unit_test_teardown(test_sigterm_4, stop_bridge),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    if (strcmp(e2e_mode(), "cpu") != 0)
        gb_require_gpu();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (g_zctx && rc == 0) /* a failed test may leave sockets open: the term would wait for them */
        zmq_ctx_term(g_zctx);
    return rc;
}
