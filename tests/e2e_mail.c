/* Grains that message grains, end to end against the real daemon with the
 * test grains of tests/grains/mail_grains.c (GB_MAIL_LIB names the library):
 * forwards keep the caller's correlation id, one-way sends are counted and
 * all arrive in order through a full inbox, cycles end in error replies
 * without hanging the bridge, and undeliverable messages (bad target index,
 * oversized, a target paused past its hold, a stopped target) answer the
 * caller with a sentence while the bridge keeps serving. Each test runs its
 * own bridge. GB_E2E_MODE: cpu (CI), persistent or relaunch (skip without
 * a GPU). */
#include "e2e_harness.h"

#include "gpu_skip.h"
#include "grains/mail_grains.h"

#define WAIT_MS (20000 * E2E_SLOW)

/* Small rings, so that messages wait for room; a small outbox and hop
 * limit, so that cycles reach them soon (outbox_kb, hold_ms: 0 for 64 KiB
 * and 300 ms). */
static void start_cfg(bridge_t *b, unsigned outbox_kb, unsigned hold_ms, const char *messaging);

static void start_with(bridge_t *b, unsigned outbox_kb, unsigned hold_ms) { start_cfg(b, outbox_kb, hold_ms, ""); }

#define SINK_DEFAULT "{ type = \"mt.sink\"; queue_capacity = 2; slot_size = 64; }"

/* sink: mt.sink's ring settings; messaging: more keys of the messaging
 * group (for example "link_slots = 2;"). */
static void start_sink(bridge_t *b, const char *sink, unsigned outbox_kb, unsigned hold_ms, const char *messaging)
{
    const char *lib = getenv("GB_MAIL_LIB");
    assert_non_null(lib);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "grains = (\n"
             "  { library = \"%s\"; },\n"
             /* mt.sink first: the bridge drains its replies (making room)
              * before it routes mt.a's new messages, which must still queue
              * behind those waiting */
             "  %s,\n"
             "  { type = \"mt.b\"; queue_capacity = 8; slot_size = 256; },\n"
             "  { type = \"mt.a\"; queue_capacity = 8; slot_size = 2048; }\n"
             ");\n"
             "messaging = { outbox_kb = %u; hold_ms = %u; max_hops = 24; %s };\n",
             lib, sink, outbox_kb ? outbox_kb : 64, hold_ms ? hold_ms : 300, messaging);
    if (bridge_start(b, cfg) != 0) {
        bridge_print_log(b);
        fail_msg("the bridge did not start");
    }
}

static void start_cfg(bridge_t *b, unsigned outbox_kb, unsigned hold_ms, const char *messaging)
{
    start_sink(b, SINK_DEFAULT, outbox_kb, hold_ms, messaging);
}

static void start(bridge_t *b) { start_with(b, 0, 0); }

static void stop(bridge_t *b)
{
    int st = bridge_stop(b, SIGTERM, 20000 * E2E_SLOW);
    if (st != 0)
        bridge_print_log(b);
    assert_int_equal(st, 0);
}

static void send_to(void *s, uint64_t corr, const char *type, uint64_t key, uint32_t mt, const void *rec, size_t len)
{
    send_env(s, make_env(corr, type, key, mt, rec, len));
}

/* The next reply (of any frame); the caller frees *f once done with it. */
typedef struct replies {
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply **r;
    size_t n, i;
} replies_t;

static Gpubridge__Reply *next_reply(void *s, replies_t *q)
{
    while (!q->f || q->i == q->n) {
        if (q->f)
            gpubridge__server_frame__free_unpacked(q->f, NULL);
        q->f = recv_frame(s, WAIT_MS);
        if (!q->f)
            fail_msg("no reply within %d ms", WAIT_MS);
        q->r = frame_replies(q->f, &q->n);
        q->i = 0;
    }
    return q->r[q->i++];
}

static void replies_free(replies_t *q)
{
    if (q->f)
        gpubridge__server_frame__free_unpacked(q->f, NULL);
    memset(q, 0, sizeof *q);
}

/* One request, one reply: returns its status, copying its error text and payload. */
static int call(void *s, const char *type, uint64_t key, uint32_t mt, const void *rec, size_t len, char *err,
                size_t errcap, void *pl, size_t plcap)
{
    static uint64_t corr = 1u << 20;
    corr++;
    send_to(s, corr, type, key, mt, rec, len);
    replies_t q = {0};
    Gpubridge__Reply *r = next_reply(s, &q);
    assert_int_equal(r->correlation_id, corr);
    int st = r->status;
    if (err)
        snprintf(err, errcap, "%s", r->error ? r->error : "");
    if (pl && r->payload.len <= plcap)
        memcpy(pl, r->payload.data, r->payload.len);
    replies_free(&q);
    return st;
}

/* Telemetry of a grain type (caller frees). */
static Gpubridge__Telemetry *telemetry(void *s, const char *type)
{
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__TelemetryRequest t = GPUBRIDGE__TELEMETRY_REQUEST__INIT;
    t.grain_type = (char *)type;
    c.op_case = GPUBRIDGE__CONTROL__OP_TELEMETRY_REQUEST;
    c.telemetry_request = &t;
    send_env(s, make_control(77, &c));
    replies_t q = {0};
    Gpubridge__Reply *r = next_reply(s, &q);
    assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    Gpubridge__Telemetry *m = gpubridge__telemetry__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(m);
    replies_free(&q);
    return m;
}

/* Whether forwards between the test types may take device links. */
static int linked_mode(void)
{
    const char *m = getenv("GB_E2E_MODE");
    return m && strcmp(m, "persistent") == 0;
}

/* A request forwarded hop by hop comes back from the last grain with the
 * caller's correlation id; many at once, each with its own. */
static void test_forward_keeps_correlation(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    enum { N = 64 };
    for (uint32_t i = 0; i < N; i++) {
        uint32_t rec[2] = {i % 9, 0};
        send_to(s, 5000 + i, "mt.a", i % 5, MT_HOPS, rec, sizeof rec);
    }
    int seen[N] = {0};
    replies_t q = {0};
    for (int k = 0; k < N; k++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        assert_true(r->correlation_id >= 5000 && r->correlation_id < 5000 + N);
        const uint32_t i = (uint32_t)(r->correlation_id - 5000);
        if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
            fail_msg("request %u: status %d: %s", i, r->status, r->error);
        uint32_t made = 0;
        assert_int_equal(r->payload.len, 4);
        memcpy(&made, r->payload.data, 4);
        assert_int_equal(made, i % 9);
        assert_int_equal(seen[i], 0);
        seen[i] = 1;
    }
    replies_free(&q);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    assert_true(t->mail_forwarded > 0);
    assert_int_equal(t->mail_undeliverable, 0);
    /* Persistent mode: the hops went kernel to kernel (device links), so
     * these lone forwards never met the host; elsewhere the host routes. */
    if (linked_mode())
        assert_true(t->mail_linked > 0);
    else
        assert_int_equal(t->mail_linked, 0);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* A forwarded record larger than the target's slot (mt.b: 256 bytes) goes
 * out of line and arrives whole. */
static void test_forward_larger_than_target_slot(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    const uint32_t sizes[] = {0, 200, 224, 225, 1000, 1950};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint32_t n = sizes[k], got[2] = {0, 0}, sum = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += (unsigned char)(i * 7);
        char err[512];
        int status = call(s, "mt.a", 5, MT_BIG, &n, 4, err, sizeof err, got, sizeof got);
        if (status != 0)
            fail_msg("%u bytes: status %d: %s", n, status, err);
        assert_int_equal(got[0], n);
        assert_int_equal(got[1], sum);
    }
    zmq_close(s);
    stop(&b);
}

/* mt.sink's count and out-of-order notes for key, once count reaches want
 * (or WAIT_MS passes). */
static uint64_t sink_wait(void *s, uint64_t key, uint64_t want, uint64_t *disorder)
{
    uint64_t got[2] = {0, 0};
    for (uint64_t end = e2e_ms() + WAIT_MS; e2e_ms() < end;) {
        assert_int_equal(call(s, "mt.sink", key, MT_GET, NULL, 0, NULL, 0, got, sizeof got), 0);
        if (got[0] >= want)
            break;
        usleep(2000);
    }
    *disorder = got[1];
    return got[0];
}

enum { REQS = 20, PER = 50 };

/* REQS requests to mt.a key 42, each sending PER numbered notes to mt.sink
 * key 42, and after each, `direct` notes from this client to the same grain. */
static void send_notes(void *s, uint32_t direct)
{
    for (uint32_t i = 0; i < REQS; i++) {
        uint32_t rec[2] = {PER, i * PER};
        send_to(s, 100 + i, "mt.a", 42, MT_SEND, rec, sizeof rec);
        for (uint32_t k = 0; k < direct; k++)
            send_to(s, 10000 + i * direct + k, "mt.sink", 42, MT_NOTE, NULL, 0);
    }
    replies_t q = {0};
    for (uint32_t k = 0; k < REQS * (1 + direct); k++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
            fail_msg("send request %llu: status %d: %s", (unsigned long long)r->correlation_id, r->status, r->error);
    }
    replies_free(&q);
}

/* One-way sends through a full inbox (mt.sink has 2 slots): every one
 * arrives, in the order sent, and each is counted. The client's own notes
 * to the same grain interleave with them one turn at a time: none is lost. */
static void test_sends_counted_nothing_lost(void **st)
{
    (void)st;
    bridge_t b;
    start_with(&b, 4096, 60000);
    void *s = client_open(b.endpoint);
    send_notes(s, 5);
    uint64_t disorder = 99;
    assert_int_equal(sink_wait(s, 42, REQS * PER + REQS * 5, &disorder), REQS * PER + REQS * 5);
    assert_int_equal(disorder, 0);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    assert_int_equal(t->mail_sent, REQS * PER);
    assert_int_equal(t->mail_undeliverable, 0);
    gpubridge__telemetry__free_unpacked(t, NULL);
    t = telemetry(s, "mt.sink");
    assert_int_equal(t->mail_held, 0);
    assert_int_equal(t->mail_outbox_bytes, 0);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* Past the outbox's bound (4 KiB, about a dozen notes waiting: fewer than
 * one turn's 50, however fast the sink drains) sends are undeliverable and
 * counted; every other one arrives, in order. */
static void test_sends_past_outbox_bound(void **st)
{
    (void)st;
    bridge_t b;
    start_with(&b, 4, 60000);
    void *s = client_open(b.endpoint);
    send_notes(s, 0);
    uint64_t got = 0, lost = 0, disorder = 0;
    for (uint64_t end = e2e_ms() + WAIT_MS; e2e_ms() < end && got + lost < REQS * PER;) {
        Gpubridge__Telemetry *t = telemetry(s, "mt.a");
        lost = t->mail_undeliverable;
        assert_int_equal(t->mail_sent, REQS * PER);
        gpubridge__telemetry__free_unpacked(t, NULL);
        got = sink_wait(s, 42, 0, &disorder);
        usleep(2000);
    }
    assert_int_equal(got + lost, REQS * PER);
    assert_true(lost > 0);
    assert_int_equal(disorder, 0);
    zmq_close(s);
    stop(&b);
}

/* Cycles: a forward bounced between two types ends at the hop limit; one
 * that doubles every hop fills the outbox. Each caller gets
 * STATUS_UNDELIVERABLE, and the bridge keeps serving. */
static void test_cycles_end(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    char err[512];
    assert_int_equal(call(s, "mt.a", 1, MT_CYCLE, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE);
    assert_non_null(strstr(err, "messaging.max_hops"));
    enum { N = 8 };
    for (uint32_t i = 0; i < N; i++)
        send_to(s, 300 + i, "mt.a", i, MT_FANOUT, NULL, 0);
    replies_t q = {0};
    for (int k = 0; k < N; k++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        if (r->status != GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE)
            fail_msg("fan-out %llu: status %d: %s", (unsigned long long)r->correlation_id, r->status, r->error);
        /* the outbox's bound or the hop limit; on a slow machine a wait past hold_ms */
        assert_true(strstr(r->error, "outbox") || strstr(r->error, "max_hops") || strstr(r->error, "hold_ms"));
    }
    replies_free(&q);
    /* The one-way copies go on until each reaches the hop limit or the
     * outbox's bound; meanwhile a forward may be refused the same way, and
     * once they are gone it goes through. */
    uint32_t rec[2] = {3, 0}, made = 0;
    int status = -1;
    for (uint64_t end = e2e_ms() + WAIT_MS; status != 0 && e2e_ms() < end;) {
        status = call(s, "mt.a", 2, MT_HOPS, rec, sizeof rec, err, sizeof err, &made, sizeof made);
        if (status != 0 && status != GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE)
            fail_msg("during the fan-out: status %d: %s", status, err);
    }
    assert_int_equal(status, 0);
    assert_int_equal(made, 3);
    Gpubridge__Telemetry *ta = telemetry(s, "mt.a"), *tb = telemetry(s, "mt.b");
    assert_true(ta->mail_undeliverable + tb->mail_undeliverable >= N + 1);
    gpubridge__telemetry__free_unpacked(ta, NULL);
    gpubridge__telemetry__free_unpacked(tb, NULL);
    zmq_close(s);
    stop(&b);
}

/* A handler's mistakes: a target index it does not declare, a record larger
 * than its out buffer. Clear errors; the bridge keeps serving. */
static void test_bad_input(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    char err[512];
    assert_int_equal(call(s, "mt.a", 1, MT_BAD_TARGET, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE);
    assert_non_null(strstr(err, "target index"));
    assert_int_equal(call(s, "mt.a", 1, MT_OVERSIZED, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_TOO_LARGE);
    assert_non_null(strstr(err, "out buffer"));
    /* A status that is the dispatch's own (a reply slot marked so would never
     * be written, and the type's later replies would wait behind it). */
    assert_int_equal(call(s, "mt.a", 1, MT_BAD_STATUS, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR);
    /* ... and any status a handler may not return (a proto status number,
     * the table-full or evicted-full slot statuses, one past them all):
     * STATUS_HANDLER_ERROR, not a status that says something else. */
    const uint32_t odd[] = {1, 2, 5, 8, 9, 16, 42, 0x108 /* EVICTED_FULL */, 0x112 /* FORWARDED */, 0xFFFF};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
        if (call(s, "mt.a", 1, MT_BAD_STATUS, &odd[i], 4, err, sizeof err, NULL, 0) !=
            GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR)
            fail_msg("a handler's status %u: not STATUS_HANDLER_ERROR ('%s')", odd[i], err);
    uint32_t rec[2] = {2, 0}, made = 0;
    assert_int_equal(call(s, "mt.a", 1, MT_HOPS, rec, sizeof rec, err, sizeof err, &made, sizeof made), 0);
    assert_int_equal(made, 2);
    zmq_close(s);
    stop(&b);
}

/* Numbered forwards from one grain to one grain arrive in order, each
 * answered once, while the link between the types (2 slots) and the sink's
 * ring (2 slots) overflow: some go by the link, some by the host, and a
 * pair's forward never overtakes one the host still holds. */
static void test_forward_order_across_paths(void **st)
{
    (void)st;
    bridge_t b;
    start_cfg(&b, 4096, 60000, "link_slots = 2;");
    void *s = client_open(b.endpoint);
    enum { N = 3000, BATCH = 250 }; /* batches: a supervisor bounds a client's frames in its queue */
    int *seen = calloc(N, sizeof *seen);
    assert_non_null(seen);
    replies_t q = {0};
    for (uint64_t from = 0; from < N; from += BATCH) {
        for (uint64_t i = from; i < from + BATCH; i++)
            send_to(s, 70000 + i, "mt.a", 7, MT_FWD_SEQ, &i, 8);
        for (int k = 0; k < BATCH; k++) {
            Gpubridge__Reply *r = next_reply(s, &q);
            if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
                fail_msg("forward %llu: status %d: %s", (unsigned long long)r->correlation_id, r->status, r->error);
            assert_true(r->correlation_id >= 70000 + from && r->correlation_id < 70000 + from + BATCH);
            assert_int_equal(seen[r->correlation_id - 70000]++, 0);
            assert_int_equal(r->payload.len, 16); /* the sink's reply, in the sink's record */
        }
    }
    free(seen);
    replies_free(&q);
    uint64_t disorder = 99;
    assert_int_equal(sink_wait(s, 7, N, &disorder), N);
    assert_int_equal(disorder, 0);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    assert_int_equal(t->mail_forwarded, N);
    assert_int_equal(t->mail_undeliverable, 0);
    print_message("forwards: %llu, by device link: %llu\n", (unsigned long long)t->mail_forwarded,
                  (unsigned long long)t->mail_linked);
    if (linked_mode()) /* the 2-slot link keeps working lap after lap */
        assert_true(t->mail_linked > 16);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* Many grains' numbered forwards at once into roomy links: a persistent
 * target takes a link's messages of distinct keys in one pass, on several
 * lanes, and a repeated key's later message in a later pass. Each sink key
 * must see its own numbers in order and each exactly once. */
static void test_forward_order_many_keys(void **st)
{
    (void)st;
    bridge_t b;
    start_sink(&b, "{ type = \"mt.sink\"; queue_capacity = 64; slot_size = 64; }", 0, 0, "link_slots = 256;");
    void *s = client_open(b.endpoint);
    enum { KEYS = 48, NUMS = 30 };
    replies_t q = {0};
    for (uint64_t n = 0; n < NUMS; n++) {
        for (uint64_t k = 0; k < KEYS; k++) /* round after round: each key's next number */
            send_to(s, 200000 + n * KEYS + k, "mt.a", 500 + k, MT_FWD_SEQ, &n, 8);
        if (n % 5 == 4) /* bounded frames in flight (a supervisor's queue) */
            for (int r = 0; r < 5 * KEYS; r++) {
                Gpubridge__Reply *rp = next_reply(s, &q);
                if (rp->status != GPUBRIDGE__STATUS__STATUS_OK)
                    fail_msg("forward %llu: status %d: %s", (unsigned long long)rp->correlation_id, rp->status,
                             rp->error ? rp->error : "");
            }
    }
    replies_free(&q);
    for (uint64_t k = 0; k < KEYS; k++) {
        uint64_t disorder = 99;
        assert_int_equal(sink_wait(s, 500 + k, NUMS, &disorder), NUMS);
        assert_int_equal(disorder, 0);
    }
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    print_message("forwards: %llu, by device link: %llu\n", (unsigned long long)t->mail_forwarded,
                  (unsigned long long)t->mail_linked);
    assert_int_equal(t->mail_forwarded, KEYS * NUMS);
    if (linked_mode())
        assert_true(t->mail_linked > 0);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* mt.sink paused: forwards to it wait in the outbox, not in its ring (which
 * has room for two), past messaging.hold_ms, and are answered undeliverable.
 * Activated, it takes them again. */
static void test_target_paused_past_hold(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    assert_int_equal(control_simple(s, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "mt.sink"), 0);
    for (uint32_t i = 0; i < 6; i++)
        send_to(s, 600 + i, "mt.a", 9, MT_TO_SINK, NULL, 0);
    /* None enters the paused ring, even with room there: each waits its
     * hold, then its caller hears why. */
    replies_t q = {0};
    for (int k = 0; k < 6; k++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        if (r->status != GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE) {
            bridge_print_log(&b);
            fail_msg("forward %llu to the paused sink: status %d: %s", (unsigned long long)r->correlation_id,
                     r->status, r->error ? r->error : "");
        }
        assert_true(r->correlation_id >= 600 && r->correlation_id < 606);
        assert_non_null(strstr(r->error, "deactivated"));
    }
    replies_free(&q);
    assert_int_equal(control_simple(s, 2, GPUBRIDGE__CONTROL__OP_ACTIVATE, "mt.sink"), 0);
    char err[512];
    assert_int_equal(call(s, "mt.a", 9, MT_TO_SINK, NULL, 0, err, sizeof err, NULL, 0), 0);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    assert_int_equal(t->mail_undeliverable, 6);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* SIGTERM while forwards wait in the outbox for a paused target: the drain's
 * log counts them (an operator reading "0 in flight" would think nothing is
 * owed), and at its deadline they are answered. */
static void test_drain_counts_waiting_mail(void **st)
{
    (void)st;
    if (strcmp(e2e_mode(), "cpu") != 0)
        skip(); /* the log line is the same code in every mode; the wait is long on a device */
    bridge_t b;
    start_with(&b, 0, 60000);
    void *s = client_open(b.endpoint);
    assert_int_equal(control_simple(s, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "mt.sink"), 0);
    for (uint32_t i = 0; i < 6; i++)
        send_to(s, 700 + i, "mt.a", 9, MT_TO_SINK, NULL, 0);
    uint64_t held = 0;
    for (int tries = 0; tries < 500 && held < 6; tries++) {
        Gpubridge__Telemetry *t = telemetry(s, "mt.sink");
        held = t->mail_held;
        gpubridge__telemetry__free_unpacked(t, NULL);
        if (held < 6)
            usleep(10000);
    }
    assert_int_equal(held, 6);
    zmq_close(s);
    stop(&b);
    if (!log_contains(&b, "bytes of messages between grains waiting") ||
        log_contains(&b, " 0 bytes of messages between grains waiting; draining")) {
        bridge_print_log(&b);
        fail_msg("the drain's log does not count the forwards waiting in the outbox");
    }
}

/* One frame to mt.sink: a busy message (busy_ms) at key 40, then notes at
 * keys 41 and 42; correlation ids 900-902. With a window of one, a
 * persistent kernel takes the busy message alone and stays in its window
 * loop with the notes queued. */
static void sink_busy_frame(void *s, uint32_t busy_ms)
{
    static uint32_t ms;
    static const uint64_t note = 5;
    ms = busy_ms;
    Gpubridge__Envelope envs[3], *ep[3];
    Gpubridge__GrainId gids[3];
    for (int i = 0; i < 3; i++) {
        gpubridge__envelope__init(&envs[i]);
        gpubridge__grain_id__init(&gids[i]);
        gids[i].type = (char *)"mt.sink";
        gids[i].key = 40 + (uint64_t)i;
        envs[i].grain = &gids[i];
        envs[i].correlation_id = 900 + (uint64_t)i;
        envs[i].kind = GPUBRIDGE__KIND__KIND_REQUEST;
        envs[i].message_type = i == 0 ? MT_SLOW : MT_NOTE;
        envs[i].payload.data = i == 0 ? (uint8_t *)&ms : (uint8_t *)&note;
        envs[i].payload.len = i == 0 ? 4 : 8;
        ep[i] = &envs[i];
    }
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.n_envelopes = 3;
    batch.envelopes = ep;
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    f.batch = &batch;
    send_frame(s, &f);
}

#define SINK_WINDOW_1 "{ type = \"mt.sink\"; queue_capacity = 8; slot_size = 64; messages_per_iteration = 1; }"

/* A pair's order the other way round: forwards that wait in a device link
 * (the sink busy), each followed by a one-way send of the same pair, which
 * takes the host path. The send leaves with its turn's reply, behind the
 * forward's reply slot in the sender's ring, so the host routes it only
 * once the sink took the forward: the sink sees every number in order. */
static void test_send_after_linked_forward_keeps_order(void **st)
{
    (void)st;
    bridge_t b;
    start_sink(&b, SINK_WINDOW_1, 0, 10000, ""); /* a hold well past the busy time: messages in the outbox wait */
    void *s = client_open(b.endpoint);
    sink_busy_frame(s, 800);
    usleep(200 * 1000); /* the busy message is running */
    enum { PAIRS = 8 };
    for (uint64_t i = 0; i < PAIRS; i++) {
        const uint64_t seq = 2 * i;
        const uint32_t send[2] = {1, (uint32_t)(2 * i + 1)}; /* one note, numbered 2i + 1 */
        send_to(s, 960 + 2 * i, "mt.a", 11, MT_FWD_SEQ, &seq, 8);
        send_to(s, 961 + 2 * i, "mt.a", 11, MT_SEND, send, 8);
    }
    replies_t q = {0};
    for (int k = 0; k < 3 + 2 * PAIRS; k++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
            fail_msg("reply %llu: status %d: %s", (unsigned long long)r->correlation_id, r->status,
                     r->error ? r->error : "");
    }
    replies_free(&q);
    uint64_t disorder = 99;
    assert_int_equal(sink_wait(s, 11, 2 * PAIRS, &disorder), 2 * PAIRS);
    assert_int_equal(disorder, 0);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    print_message("forwards: %llu, by device link: %llu\n", (unsigned long long)t->mail_forwarded,
                  (unsigned long long)t->mail_linked);
    if (linked_mode()) /* the first forward waits in the link while the sink is busy */
        assert_true(t->mail_linked >= 1);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* A few grains' numbered forwards, interleaved, pile up in a device link
 * while the sink is busy: a pass then takes the link's messages of distinct
 * keys at once and leaves a repeated key's for the next pass. Each sink key
 * must count every number once, in order (two lanes on one key would lose
 * counts or order). */
static void test_link_pass_repeated_keys(void **st)
{
    (void)st;
    bridge_t b;
    start_sink(&b, "{ type = \"mt.sink\"; queue_capacity = 64; slot_size = 64; }", 0, 10000, "link_slots = 256;");
    void *s = client_open(b.endpoint);
    sink_busy_frame(s, 600);
    usleep(100 * 1000); /* the busy message is running */
    enum { KEYS = 3, NUMS = 20 };
    for (uint64_t n = 0; n < NUMS; n++)
        for (uint64_t k = 0; k < KEYS; k++)
            send_to(s, 300000 + n * KEYS + k, "mt.a", 700 + k, MT_FWD_SEQ, &n, 8);
    replies_t q = {0};
    for (int r = 0; r < 3 + KEYS * NUMS; r++) {
        Gpubridge__Reply *rp = next_reply(s, &q);
        if (rp->status != GPUBRIDGE__STATUS__STATUS_OK)
            fail_msg("reply %llu: status %d: %s", (unsigned long long)rp->correlation_id, rp->status,
                     rp->error ? rp->error : "");
    }
    replies_free(&q);
    for (uint64_t k = 0; k < KEYS; k++) {
        uint64_t disorder = 99;
        assert_int_equal(sink_wait(s, 700 + k, NUMS, &disorder), NUMS);
        assert_int_equal(disorder, 0);
    }
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    print_message("forwards: %llu, by device link: %llu\n", (unsigned long long)t->mail_forwarded,
                  (unsigned long long)t->mail_linked);
    if (linked_mode())
        assert_true(t->mail_linked > 0);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* mt.sink paused while requests wait in its ring: a persistent kernel then
 * polls from its window loop, not its poll phase, and must still refuse
 * the forwards waiting in its device links once they pass the hold (else
 * they, and every later reply of their sender, wait for Activate). A
 * second client deactivates the sink while it is busy. In cpu and
 * relaunch modes the forwards wait in the outbox and end the same way. */
static void test_paused_with_queue_refuses_links(void **st)
{
    (void)st;
    bridge_t b;
    start_sink(&b, SINK_WINDOW_1, 0, 0, "");
    void *s = client_open(b.endpoint), *admin = client_open(b.endpoint);
    sink_busy_frame(s, 1500);
    usleep(300 * 1000); /* the busy message is running */
    /* Answered once the kernel saw it, after the busy message. */
    assert_int_equal(control_simple(admin, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "mt.sink"), 0);
    for (uint64_t i = 0; i < 2; i++)
        send_to(s, 950 + i, "mt.a", 9, MT_TO_SINK, NULL, 0);
    replies_t q = {0};
    int refused = 0, frame = 0; /* replies of the first frame: any time (the pause may come before them) */
    while (refused < 2) {
        Gpubridge__Reply *r = next_reply(s, &q);
        if (r->correlation_id >= 900 && r->correlation_id <= 902) {
            assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
            frame++;
        } else if (r->correlation_id == 950 || r->correlation_id == 951) {
            if (r->status != GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE) {
                bridge_print_log(&b);
                fail_msg("forward %llu to the paused sink: status %d: %s", (unsigned long long)r->correlation_id,
                         r->status, r->error ? r->error : "");
            }
            assert_non_null(strstr(r->error, "deactivated"));
            refused++;
        } else {
            fail_msg("reply %llu (status %d) while mt.sink is paused", (unsigned long long)r->correlation_id,
                     r->status);
        }
    }
    replies_free(&q);
    /* Any queued notes run once the sink is activated, and the type serves. */
    assert_int_equal(control_simple(admin, 2, GPUBRIDGE__CONTROL__OP_ACTIVATE, "mt.sink"), 0);
    for (; frame < 3; frame++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        assert_true(r->correlation_id >= 900 && r->correlation_id <= 902);
        assert_int_equal(r->status, GPUBRIDGE__STATUS__STATUS_OK);
    }
    replies_free(&q);
    char err[512];
    assert_int_equal(call(s, "mt.a", 9, MT_TO_SINK, NULL, 0, err, sizeof err, NULL, 0), 0);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    assert_int_equal(t->mail_undeliverable, 2);
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(admin);
    zmq_close(s);
    stop(&b);
}

/* A handler that breaks the rules: one that scribbles a forward flag onto
 * its send and replies too, one that returns FORWARDED after its forward was
 * refused. Each caller gets exactly one reply, an error, never none or two. */
static void test_trailer_checked(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    char err[512];
    assert_int_equal(call(s, "mt.a", 3, MT_SCRIBBLE, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_INTERNAL);
    assert_non_null(strstr(err, "malformed"));
    Gpubridge__Telemetry *t0 = telemetry(s, "mt.a");
    assert_int_equal(call(s, "mt.a", 3, MT_LOST_FWD, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR);
    /* A turn that sent a message, then failed, counts as an error. */
    Gpubridge__Telemetry *t1 = telemetry(s, "mt.a");
    assert_int_equal(t1->errors - t0->errors, 1);
    gpubridge__telemetry__free_unpacked(t0, NULL);
    gpubridge__telemetry__free_unpacked(t1, NULL);
    /* No second reply to either: the next call's reply is its own. */
    uint32_t rec[2] = {1, 0}, made = 0;
    assert_int_equal(call(s, "mt.a", 3, MT_HOPS, rec, sizeof rec, err, sizeof err, &made, sizeof made), 0);
    assert_int_equal(made, 1);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    assert_true(t->mail_undeliverable >= 1); /* the scribbled turn's message */
    gpubridge__telemetry__free_unpacked(t, NULL);
    zmq_close(s);
    stop(&b);
}

/* mt.sink terminated while forwards to it wait: it is paused first (a
 * paused kernel takes nothing from its links; the hold is long), so in
 * persistent mode they wait in its device link, and the kernel, as it
 * stops, answers them; elsewhere they wait in the outbox. Every caller gets
 * exactly one reply, and the bridge serves on. Distinct keys: several of
 * mt.a's threads forward at once. */
static void test_target_terminated_in_flight(void **st)
{
    (void)st;
    bridge_t b;
    start_with(&b, 0, 30000);
    void *s = client_open(b.endpoint), *c = client_open(b.endpoint);
    assert_int_equal(control_simple(c, 1, GPUBRIDGE__CONTROL__OP_DEACTIVATE, "mt.sink"), 0);
    enum { N = 64 };
    for (uint64_t i = 0; i < N; i++)
        send_to(s, 80000 + i, "mt.a", 100 + i, MT_FWD_SEQ, &i, 8);
    usleep(200 * 1000); /* the forwards reach the link or the outbox */
    assert_int_equal(control_simple(c, 2, GPUBRIDGE__CONTROL__OP_TERMINATE, "mt.sink"), 0);
    int seen[N] = {0};
    replies_t q = {0};
    for (int k = 0; k < N; k++) {
        Gpubridge__Reply *r = next_reply(s, &q);
        assert_true(r->correlation_id >= 80000 && r->correlation_id < 80000 + N);
        assert_int_equal(seen[r->correlation_id - 80000]++, 0);
        if (r->status != GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE)
            fail_msg("forward %llu: status %d: %s", (unsigned long long)r->correlation_id, r->status,
                     r->error ? r->error : "");
        assert_non_null(strstr(r->error, "'mt.sink' is terminated"));
    }
    replies_free(&q);
    Gpubridge__ServerFrame *f = recv_frame(s, 300); /* no reply twice */
    assert_null(f);
    Gpubridge__Telemetry *t = telemetry(s, "mt.a");
    print_message("undeliverable: %llu, of them by device link: %llu\n", (unsigned long long)t->mail_undeliverable,
                  (unsigned long long)t->mail_linked);
    assert_int_equal(t->mail_undeliverable, N);
    if (linked_mode()) /* some waited in the link, answered by the stopping kernel */
        assert_true(t->mail_linked > 0);
    gpubridge__telemetry__free_unpacked(t, NULL);
    char err[512];
    uint32_t rec[2] = {1, 0}, made = 0;
    assert_int_equal(call(s, "mt.a", 9, MT_HOPS, rec, sizeof rec, err, sizeof err, &made, sizeof made), 0);
    zmq_close(c);
    zmq_close(s);
    stop(&b);
}

/* mt.sink terminated: a forward to it is undeliverable at once. */
static void test_target_terminated(void **st)
{
    (void)st;
    bridge_t b;
    start(&b);
    void *s = client_open(b.endpoint);
    assert_int_equal(control_simple(s, 1, GPUBRIDGE__CONTROL__OP_TERMINATE, "mt.sink"), 0);
    char err[512];
    assert_int_equal(call(s, "mt.a", 1, MT_TO_SINK, NULL, 0, err, sizeof err, NULL, 0),
                     GPUBRIDGE__STATUS__STATUS_UNDELIVERABLE);
    assert_non_null(strstr(err, "'mt.sink' is terminated"));
    uint32_t rec[2] = {1, 0}, made = 0;
    assert_int_equal(call(s, "mt.a", 1, MT_HOPS, rec, sizeof rec, err, sizeof err, &made, sizeof made), 0);
    zmq_close(s);
    stop(&b);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_keeps_correlation), cmocka_unit_test(test_sends_counted_nothing_lost),
        cmocka_unit_test(test_sends_past_outbox_bound),   cmocka_unit_test(test_forward_larger_than_target_slot),
        cmocka_unit_test(test_cycles_end),                cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_target_paused_past_hold),   cmocka_unit_test(test_target_terminated),
        cmocka_unit_test(test_drain_counts_waiting_mail),
        cmocka_unit_test(test_target_terminated_in_flight),
        cmocka_unit_test(test_trailer_checked),           cmocka_unit_test(test_forward_order_across_paths),
        cmocka_unit_test(test_paused_with_queue_refuses_links),
        cmocka_unit_test(test_send_after_linked_forward_keeps_order),
        cmocka_unit_test(test_forward_order_many_keys),   cmocka_unit_test(test_link_pass_repeated_keys),
    };
    if (argc > 1) /* a test name or pattern: only those (test_e2e_tmp.sh) */
        cmocka_set_test_filter(argv[1]);
    printf("e2e messages between grains: mode %s\n", e2e_mode());
    if (strcmp(e2e_mode(), "cpu") != 0)
        gb_require_gpu();
    return cmocka_run_group_tests_name("messages between grains end to end", tests, NULL, NULL) ? 1 : 0;
}
