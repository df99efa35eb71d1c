/* Runtime cases about dispatch windows and threads, part of GB_RUNTIME_CASES
 * (runtime_cases.h includes this after its own cases and helpers): many
 * grains of one table partition activated in one window, one kernel thread
 * holding two requests of a grain, and a producer thread beside the consumer. */
#ifndef GB_TEST_RUNTIME_WINDOW_CASES_H
#define GB_TEST_RUNTIME_WINDOW_CASES_H

#include <pthread.h>

/* Publishes n requests at once (one window on a GPU): key keys[i], type types[i]. */
static void send_burst(gb_rk_t *rk, const uint64_t *keys, const uint16_t *types, uint32_t n, uint64_t corr0)
{
    for (uint32_t i = 0; i < n; i++) {
        gb_slot_hdr_t *s = gb_rk_claim(rk);
        assert_non_null(s);
        s->key = keys[i];
        s->corr = corr0 + i;
        s->type = types[i];
        s->len = types[i] == GB_ECHO_MSG_ECHO ? 1 : 0;
        gb_slot_payload(s)[0] = 'x';
    }
    gb_rk_publish(rk);
}

/* Activations and deactivations of many grains of one table partition in one
 * window: on a GPU they run in one dispatch round, at once, and must neither
 * share an entry nor lose one. Each grain's count (aux) tells. */
static void test_concurrent_activation(void **state)
{
    (void)state;
    enum { KEYS = 24 }; /* one partition of 32 entries (4 grains' worth, see above) */
    uint32_t lanes_save = g_lanes;
    g_lanes = 1;
    gb_rk_t *rk = start("echo", 256, 64, 4);
    g_lanes = lanes_save;
    uint64_t keys[3 * KEYS];
    uint16_t types[3 * KEYS];
    gb_reply_t r;
    unsigned char buf[32];
    uint64_t corr = 0;
    for (int pass = 1; pass <= 2; pass++) { /* activate all at once, then count 2 */
        for (uint32_t i = 0; i < KEYS; i++) {
            keys[i] = 1000 + 7 * i;
            types[i] = GB_ECHO_MSG_ECHO;
        }
        send_burst(rk, keys, types, KEYS, corr);
        for (uint32_t i = 0; i < KEYS; i++) {
            recv_one(rk, &r, buf, sizeof buf, 5000);
            assert_int_equal(r.corr, corr + i);
            assert_int_equal(r.status, GB_SLOT_OK);
            assert_int_equal(r.aux, (uint32_t)pass);
        }
        corr += KEYS;
    }
    /* One window: deactivate the even grains while the odd ones count 3;
     * then message every grain: the even ones start again at 1. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < KEYS; i++) {
        keys[n] = 1000 + 7 * i;
        types[n++] = i % 2 ? GB_ECHO_MSG_ECHO : GB_MSG_DEACTIVATE_KEY;
    }
    for (uint32_t i = 0; i < KEYS; i++) {
        keys[n] = 1000 + 7 * i;
        types[n++] = GB_ECHO_MSG_ECHO;
    }
    send_burst(rk, keys, types, n, corr);
    for (uint32_t i = 0; i < n; i++) {
        recv_one(rk, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.corr, corr + i);
        assert_int_equal(r.status, GB_SLOT_OK);
        uint32_t k = i % KEYS, odd = k % 2;
        if (i < KEYS && odd)
            assert_int_equal(r.aux, 3);
        if (i >= KEYS)
            assert_int_equal(r.aux, odd ? 4 : 1);
    }
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.errors, 0);
    gb_rk_destroy(&rk);
}

/* One burst of 1,536 requests over 512 grains, published at once, so that a
 * GPU window holds 1,024 of them: the ring kernel's thread t then holds
 * requests t and t + 512, of the same grain, and must run them in two
 * rounds, in order. Each grain's count (aux) tells. */
static void test_window_same_grain_per_thread(void **state)
{
    (void)state;
    enum { N = 1536, GRAINS = 512 };
    gb_rk_params_t p = params_for("echo", 4096, 64, 4096);
    p.grain.messages_per_iteration = 1024;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    static uint64_t keys[N];
    static uint16_t types[N];
    for (uint32_t i = 0; i < N; i++) {
        keys[i] = 77 + i % GRAINS;
        types[i] = GB_ECHO_MSG_ECHO;
    }
    for (int burst = 0; burst < 3; burst++) {
        send_burst(rk, keys, types, N, (uint64_t)burst * N);
        for (uint32_t i = 0; i < N; i++) {
            gb_reply_t r;
            unsigned char buf[8];
            recv_one(rk, &r, buf, sizeof buf, 5000);
            assert_int_equal(r.corr, (uint64_t)burst * N + i);
            assert_int_equal(r.status, GB_SLOT_OK);
            assert_int_equal(r.key, keys[i]);
            assert_int_equal(r.aux, (uint32_t)(burst * (N / GRAINS) + i / GRAINS + 1));
        }
    }
    gb_rk_destroy(&rk);
}

/* A producer thread and a consumer thread (runtime.h allows them to differ):
 * the producer sends as fast as credit allows, the consumer checks every
 * reply. Per-key order (aux counts each grain's requests) must hold with
 * windows of up to 1,024 requests, where a dispatch thread holds several
 * requests and one partition's requests span rounds; a small ring makes the
 * producer run out of credit again and again. */
typedef struct stream_case {
    gb_rk_t *rk;
    uint64_t total, keys;
    int failed; /* the producer saw an error other than GB_ERR_FULL */
} stream_case_t;

static void *stream_case_producer(void *arg)
{
    stream_case_t *c = arg;
    for (uint64_t i = 0; i < c->total;) {
        uint64_t payload[2] = {i % c->keys, i * 3 + 1};
        gb_err err = gb_rk_send(c->rk, i % c->keys, i, GB_ECHO_MSG_ECHO, payload, sizeof payload);
        if (err == GB_ERR_FULL)
            continue;
        if (err != GB_OK) {
            c->failed = 1;
            break;
        }
        i++;
    }
    return NULL;
}

static void stream_threads(uint32_t cap, uint32_t window, uint64_t keys, uint64_t total)
{
    gb_rk_params_t p = params_for("echo", cap, 64, 4096);
    p.grain.messages_per_iteration = window;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    stream_case_t c = {rk, total, keys, 0};
    uint32_t *seen = calloc(keys, sizeof *seen);
    assert_non_null(seen);
    pthread_t producer;
    assert_int_equal(pthread_create(&producer, NULL, stream_case_producer, &c), 0);
    uint64_t got = 0, last_progress = now_ms();
    while (got < total) {
        gb_reply_t r;
        uint64_t pl[2];
        gb_err err = gb_rk_recv(rk, &r, pl, sizeof pl);
        if (err == GB_ERR_EMPTY) {
            assert_int_equal(gb_rk_poll(rk), GB_OK);
            assert_true(now_ms() - last_progress < 10000); /* stalled */
            continue;
        }
        last_progress = now_ms();
        assert_int_equal(err, GB_OK);
        assert_int_equal(r.status, GB_SLOT_OK);
        /* One producer: replies come back in the order it sent them. */
        assert_int_equal(r.corr, got);
        assert_int_equal(r.key, got % keys);
        assert_int_equal(pl[0], r.key);
        assert_int_equal(pl[1], got * 3 + 1);
        assert_int_equal(r.aux, ++seen[r.key]);
        got++;
    }
    assert_int_equal(pthread_join(producer, NULL), 0);
    assert_int_equal(c.failed, 0);
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.sent, total);
    assert_int_equal(st.received, total);
    free(seen);
    gb_rk_destroy(&rk);
}

static void test_producer_consumer_threads(void **state)
{
    (void)state;
    stream_threads(64, 64, 7, (uint64_t)scaled(5000));        /* credit runs out every 64 */
    stream_threads(4096, 1024, 300, (uint64_t)scaled(30000));  /* big windows, rounds per grain */
    stream_threads(4096, 1024, 3000, (uint64_t)scaled(12000)); /* activations at once in each partition */
}

/* A consumer thread drains a ring whose consumer side runs apart from its
 * producer (gb_rk_consumer_apart; in cpu mode without worker threads the
 * grains run in its gb_rk_recv), while this thread deactivates the type: a
 * request published once gb_rk_deactivate has returned waits for
 * gb_rk_activate, even when a window that began before the deactivation
 * still has requests to walk. Large echo requests make that window long. */
typedef struct pause_case {
    gb_rk_t *rk;
    int stop;            /* atomic */
    uint64_t got;        /* replies of the large requests (atomic) */
    uint64_t probe_seen; /* the probe's reply came (atomic) */
    int bad;             /* a reply that is not OK (atomic) */
} pause_case_t;

#define PAUSE_PROBE (1ull << 40)
#define PAUSE_BIG (256u * 1024u)

static void *pause_case_consumer(void *arg)
{
    pause_case_t *c = arg;
    unsigned char *buf = malloc(PAUSE_BIG);
    while (buf && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        gb_reply_t r;
        gb_err err = gb_rk_recv(c->rk, &r, buf, PAUSE_BIG);
        if (err == GB_ERR_EMPTY)
            continue;
        if (err != GB_OK || r.status != GB_SLOT_OK)
            __atomic_store_n(&c->bad, 1, __ATOMIC_RELEASE);
        if (r.corr >= PAUSE_PROBE)
            __atomic_store_n(&c->probe_seen, 1, __ATOMIC_RELEASE);
        else
            __atomic_add_fetch(&c->got, 1, __ATOMIC_ACQ_REL);
    }
    free(buf);
    return NULL;
}

static void test_deactivate_with_consumer_apart(void **state)
{
    (void)state;
    enum { BIG = 8, ROUNDS = 20 };
    gb_rk_params_t p = params_for("echo", 64, 64, 1024);
    p.large_max = 4 * PAUSE_BIG; /* the area holds the BIG requests and their replies at once */
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    if (!gb_rk_consumer_apart(rk)) { /* relaunch, staging: one thread, or a lock, for both sides */
        gb_rk_destroy(&rk);
        return;
    }
    unsigned char *big = calloc(1, PAUSE_BIG);
    assert_non_null(big);
    pause_case_t c = {rk, 0, 0, 0, 0};
    pthread_t consumer;
    assert_int_equal(pthread_create(&consumer, NULL, pause_case_consumer, &c), 0);
    for (uint64_t round = 0; round < ROUNDS; round++) {
        for (uint32_t i = 0; i < BIG; i++)
            assert_int_equal(gb_rk_claim_large(rk, i, round * BIG + i, GB_ECHO_MSG_ECHO, big, PAUSE_BIG, PAUSE_BIG),
                             GB_OK);
        gb_rk_publish(rk); /* one window walks them all */
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
        assert_int_equal(gb_rk_deactivate(rk, 5000), GB_OK);
        const char probe[] = "probe";
        assert_int_equal(gb_rk_send(rk, 99, PAUSE_PROBE + round, GB_ECHO_MSG_ECHO, probe, sizeof probe), GB_OK);
        /* Whatever the running window took is answered; then a while more. */
        uint64_t end = now_ms() + 5000;
        while (__atomic_load_n(&c.got, __ATOMIC_ACQUIRE) < (round + 1) * BIG && now_ms() < end)
            nanosleep(&ts, NULL);
        ts.tv_nsec = 20000000;
        nanosleep(&ts, NULL);
        assert_int_equal(__atomic_load_n(&c.probe_seen, __ATOMIC_ACQUIRE), 0); /* ran while paused */
        assert_int_equal(gb_rk_activate(rk, 5000), GB_OK);
        end = now_ms() + 5000;
        while (!__atomic_load_n(&c.probe_seen, __ATOMIC_ACQUIRE) && now_ms() < end)
            sched_yield();
        assert_int_equal(__atomic_load_n(&c.probe_seen, __ATOMIC_ACQUIRE), 1);
        assert_int_equal(__atomic_load_n(&c.got, __ATOMIC_ACQUIRE), (round + 1) * BIG);
        __atomic_store_n(&c.probe_seen, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(consumer, NULL), 0);
    assert_int_equal(c.bad, 0);
    free(big);
    gb_rk_destroy(&rk);
}

#endif
