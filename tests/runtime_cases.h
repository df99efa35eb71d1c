/* Runtime test cases shared by every backend: test_runtime.c runs them on the
 * cpu backend (CI), test_gpu_runtime.c on the CUDA backend in persistent mode,
 * with mapped and with forced fallback placement. The including file sets
 * g_mode and g_force_fallback before running the group. */
#ifndef GB_TEST_RUNTIME_CASES_H
#define GB_TEST_RUNTIME_CASES_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Each including program runs some of these cases. */
#pragma GCC diagnostic ignored "-Wunused-function"

#include "echo.h"
#include "rk_wait.h"
#include "runtime.h"
#include "vecadd.h"

static gb_mode g_mode = GB_MODE_CPU;
static int g_force_fallback = 0;
static uint32_t g_lanes = 4; /* cpu threads for the cpu backend */
static int g_cycles = 100;   /* launch/terminate cycles in test_cycles */

/* GB_TEST_SHORT=1 shortens the long cases (for compute-sanitizer runs). */
static int scaled(int n)
{
    const char *s = getenv("GB_TEST_SHORT");
    return s && *s == '1' ? n / 10 : n;
}

static gb_rk_params_t params_for(const char *type, uint32_t cap, uint32_t slot, uint32_t max_grains)
{
    gb_rk_params_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    p.mode = g_mode;
    snprintf(p.grain.type, sizeof p.grain.type, "%s", type);
    p.grain.queue_capacity = cap;
    p.grain.slot_size = slot;
    p.grain.messages_per_iteration = 256;
    p.grain.max_grains = max_grains;
    p.grain.cpu_threads = g_lanes;
    p.idle_spin_polls = 256;
    p.idle_backoff_max_ns = 20000;
    p.heartbeat_deadline_ms = 2000;
    p.max_messages_per_launch = 4096;
    p.force_fallback_placement = g_force_fallback;
    return p;
}

static gb_rk_t *start(const char *type, uint32_t cap, uint32_t slot, uint32_t max_grains)
{
    gb_rk_params_t p = params_for(type, cap, slot, max_grains);
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_non_null(rk);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    return rk;
}

/* True if no reply arrives within ms. */
static int no_reply_for(gb_rk_t *rk, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
        if (gb_rk_peek(rk))
            return 0;
        gb_rk_poll(rk);
    }
    return 1;
}

static void test_lifecycle(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for("echo", 64, 64, 1024);
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.state, GB_RK_CREATED);
    assert_true(st.lanes >= 1);
    if (g_mode == GB_MODE_CPU)
        assert_int_equal(st.lanes, g_lanes ? g_lanes : 1);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_ERR_STATE);
    /* Replies visible by themselves (cpu, a persistent kernel on mapped
     * memory): a consumer thread may drain with no lock against producers. */
    gb_rk_status(rk, &st);
    assert_int_equal(gb_rk_consumer_apart(rk),
                     st.placement == GB_PLACEMENT_HOST ||
                         (st.mode == GB_MODE_PERSISTENT && st.placement == GB_PLACEMENT_MAPPED && !st.fallback_reason[0]));

    const char msg[] = "hello ring";
    assert_int_equal(gb_rk_send(rk, 7, 99, GB_ECHO_MSG_ECHO, msg, sizeof msg), GB_OK);
    gb_reply_t r;
    char buf[64];
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.corr, 99);
    assert_int_equal(r.key, 7);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.len, sizeof msg);
    assert_memory_equal(buf, msg, sizeof msg);
    assert_int_equal(r.aux, 1);

    assert_int_equal(gb_rk_deactivate(rk, 5000), GB_OK);
    gb_rk_status(rk, &st);
    assert_false(st.active);
    assert_int_equal(gb_rk_activate(rk, 5000), GB_OK);
    gb_rk_status(rk, &st);
    assert_true(st.active);
    assert_int_equal(st.state, GB_RK_RUNNING);

    assert_int_equal(gb_rk_terminate(rk, 5000), GB_OK);
    gb_rk_status(rk, &st);
    assert_int_equal(st.state, GB_RK_TERMINATED);
    assert_int_equal(st.exit_reason, GB_EXIT_TERMINATED);
    assert_int_equal(gb_rk_send(rk, 7, 100, GB_ECHO_MSG_ECHO, msg, sizeof msg), GB_ERR_TERMINATED);
    assert_int_equal(gb_rk_activate(rk, 100), GB_ERR_TERMINATED);
    gb_rk_destroy(&rk);
    assert_null(rk);
    gb_rk_destroy(&rk); /* NULL is fine */
}

/* Many keys, interleaved, pipelined: each key's n-th reply must report count n
 * (one grain's messages handled one at a time, in order), and every request
 * gets exactly one reply with its own correlation id. */
static void test_turn_order(void **state)
{
    (void)state;
    enum { KEYS = 97, MAX_TOTAL = 20000 };
    const uint64_t TOTAL = (uint64_t)scaled(MAX_TOTAL);
    gb_rk_t *rk = start("echo", 256, 64, 4096);
    uint32_t sent_count[KEYS] = {0}, seen_count[KEYS] = {0};
    static uint8_t replied[MAX_TOTAL];
    memset(replied, 0, sizeof replied);
    uint64_t sent = 0, got = 0, seed = 12345;
    while (got < TOTAL) {
        while (sent < TOTAL) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t key = (seed >> 33) % KEYS;
            uint64_t payload[2] = {key, sent};
            gb_err err = gb_rk_send(rk, key, sent, GB_ECHO_MSG_ECHO, payload, sizeof payload);
            if (err == GB_ERR_FULL)
                break;
            assert_int_equal(err, GB_OK);
            sent_count[key]++;
            sent++;
        }
        gb_reply_t r;
        uint64_t pl[2];
        gb_err err = gb_rk_recv(rk, &r, pl, sizeof pl);
        if (err == GB_ERR_EMPTY) {
            assert_int_equal(gb_rk_poll(rk), GB_OK);
            continue;
        }
        assert_int_equal(err, GB_OK);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_true(r.corr < TOTAL);
        assert_int_equal(replied[r.corr], 0);
        replied[r.corr] = 1;
        assert_int_equal(pl[1], r.corr);
        assert_int_equal(pl[0], r.key);
        seen_count[r.key]++;
        assert_int_equal(r.aux, seen_count[r.key]);
        got++;
    }
    for (int k = 0; k < KEYS; k++)
        assert_int_equal(seen_count[k], sent_count[k]);
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.processed, TOTAL);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.sent, TOTAL);
    assert_int_equal(st.received, TOTAL);
    gb_rk_destroy(&rk);
}

/* Deactivated: requests stay queued, none processed; a full ring refuses more
 * (backpressure) and drops nothing; after activation every reply arrives. */
static void test_deactivate_backpressure(void **state)
{
    (void)state;
    enum { CAP = 16 };
    gb_rk_t *rk = start("echo", CAP, 64, 64);
    assert_int_equal(gb_rk_deactivate(rk, 5000), GB_OK);
    uint32_t accepted = 0;
    for (uint32_t i = 0; i < CAP * 3; i++) {
        uint32_t v = i;
        gb_err err = gb_rk_send(rk, 1, i, GB_ECHO_MSG_ECHO, &v, sizeof v);
        if (err == GB_ERR_FULL)
            continue;
        assert_int_equal(err, GB_OK);
        accepted++;
    }
    assert_int_equal(accepted, CAP);
    assert_int_equal(gb_rk_free_slots(rk), 0);
    assert_true(no_reply_for(rk, 100));
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.processed, 0);
    assert_int_equal(gb_rk_in_flight(rk), CAP);

    assert_int_equal(gb_rk_activate(rk, 5000), GB_OK);
    for (uint32_t i = 0; i < CAP; i++) {
        gb_reply_t r;
        uint32_t v;
        recv_one(rk, &r, &v, sizeof v, 5000);
        assert_int_equal(r.corr, i);
        assert_int_equal(v, i);
        assert_int_equal(r.aux, i + 1);
    }
    assert_int_equal(gb_rk_free_slots(rk), CAP);
    gb_rk_destroy(&rk);
}

static void put_vec(unsigned char *rec, uint32_t op, uint32_t n, const float *a, const float *b)
{
    memcpy(rec, &op, 4);
    memcpy(rec + 4, &n, 4);
    memcpy(rec + 8, a, 4 * n);
    memcpy(rec + 8 + 4 * n, b, 4 * n);
}

#include "large_cases.h"

static void test_vecadd_ops(void **state)
{
    (void)state;
    gb_rk_t *rk = start("vecadd", 64, 128, 1024);
    /* Every op at lengths 1 to 4 and 8 (the loops' remainders and a full
     * unrolled pass), with a division by zero in each. */
    const float a[8] = {1, 0, 3, 4, 5.5f, -6, 7, 1e30f};
    const float b[8] = {0, 4, 0.5f, -1, 2, 3, 0, 1e10f};
    static const uint32_t lens[] = {1, 2, 3, 4, 8};
    for (uint32_t t = 0; t < 4 * 5; t++) {
        const uint32_t op = t % 4, n = lens[t / 4];
        unsigned char rec[8 + 64];
        put_vec(rec, op, n, a, b);
        assert_int_equal(gb_rk_send(rk, 42, t, GB_VECADD_MSG_REQUEST, rec, gb_vecadd_request_len(n)), GB_OK);
        gb_reply_t r;
        float res[8];
        recv_one(rk, &r, res, sizeof res, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_int_equal(r.len, 4 * n);
        for (uint32_t i = 0; i < n; i++) {
            float want = op == 0 ? a[i] + b[i] : op == 1 ? a[i] - b[i] : op == 2 ? a[i] * b[i] : a[i] / b[i];
            if (isinf(want))
                assert_true(isinf(res[i]) && signbit(res[i]) == signbit(want));
            else
                assert_true(res[i] == want);
        }
    }
    gb_rk_destroy(&rk);
}

/* Bad slots get error replies and the ring keeps serving. */
static void test_bad_slots(void **state)
{
    (void)state;
    gb_rk_t *rk = start("vecadd", 64, 64, 1024);
    gb_reply_t r;
    unsigned char buf[64];
    uint32_t cap = gb_rk_payload_cap(rk);
    assert_int_equal(cap, 32);

    /* Larger than the largest message (a slot's worth more goes out of line,
     * large_cases.h): refused on the host, nothing enqueued. */
    unsigned char *big = calloc(1, gb_rk_large_max(rk) + 1);
    assert_non_null(big);
    assert_int_equal(gb_rk_send(rk, 1, 1, GB_VECADD_MSG_REQUEST, big, gb_rk_large_max(rk) + 1), GB_ERR_TOO_LARGE);
    free(big);
    assert_int_equal(gb_rk_in_flight(rk), 0);

    /* A slot that lies about its length (zero-copy path): the kernel refuses it. */
    gb_slot_hdr_t *s = gb_rk_claim(rk);
    assert_non_null(s);
    s->key = 1;
    s->corr = 2;
    s->type = GB_VECADD_MSG_REQUEST;
    s->len = 100000;
    gb_rk_publish(rk);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.corr, 2);
    assert_int_equal(r.status, GB_SLOT_TOO_LARGE);
    assert_int_equal(r.len, 0);

    /* Unknown message type. */
    assert_int_equal(gb_rk_send(rk, 1, 3, 77, NULL, 0), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.corr, 3);
    assert_int_equal(r.status, GB_SLOT_UNKNOWN_MESSAGE_TYPE);

    /* Malformed record: n says 3 but the length says otherwise; bad op. */
    unsigned char rec[32];
    float v3[3] = {1, 2, 3};
    put_vec(rec, GB_VECADD_ADD, 3, v3, v3);
    assert_int_equal(gb_rk_send(rk, 1, 4, GB_VECADD_MSG_REQUEST, rec, 20), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_HANDLER_ERROR);
    put_vec(rec, 9, 3, v3, v3);
    assert_int_equal(gb_rk_send(rk, 1, 5, GB_VECADD_MSG_REQUEST, rec, 32), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_HANDLER_ERROR);
    /* n so large that 8n overflows 32 bits. */
    uint32_t huge[4] = {0, 0x40000001u, 0, 0};
    assert_int_equal(gb_rk_send(rk, 1, 6, GB_VECADD_MSG_REQUEST, huge, 16), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_HANDLER_ERROR);
    /* A test fault without the test hook is just an unknown type. */
    assert_int_equal(gb_rk_send(rk, 1, 7, GB_MSG_TEST_FAULT, NULL, 0), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_UNKNOWN_MESSAGE_TYPE);

    /* Still serving: a good 64-byte message. */
    put_vec(rec, GB_VECADD_MUL, 3, v3, v3);
    assert_int_equal(gb_rk_send(rk, 1, 8, GB_VECADD_MSG_REQUEST, rec, 32), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);
    float out[3];
    memcpy(out, buf, sizeof out);
    assert_true(out[0] == 1 && out[1] == 4 && out[2] == 9);

    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.processed, 7);
    assert_int_equal(st.errors, 6);
    gb_rk_destroy(&rk);
}

/* Virtual activation: the table holds max_grains activations; deactivating a
 * key frees its entry (and its state: the count starts again). Activations
 * younger than the collection age are never collected: a full table refuses
 * new keys (STATUS_BUSY) and every activation keeps its state. */
static void test_activation_table(void **state)
{
    (void)state;
    uint32_t lanes_save = g_lanes;
    g_lanes = 1; /* one partition (as the GPU makes for so few grains): room for a few dozen */
    gb_rk_params_t p = params_for("echo", 64, 64, 4);
    p.grain.collection_age_s = 1u << 30; /* nothing is idle long enough */
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    g_lanes = lanes_save;
    gb_reply_t r;
    unsigned char buf[32];
    for (uint64_t k = 0; k < 4; k++) {
        assert_int_equal(gb_rk_send(rk, k, k, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
    }
    /* Partitions get room beyond their share (gb_grain_partition_entries); fill until full. */
    uint64_t k = 4;
    for (;; k++) {
        assert_true(k < 4096);
        assert_int_equal(gb_rk_send(rk, k, k, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 5000);
        if (r.status == GB_SLOT_GRAIN_TABLE_FULL)
            break;
        assert_int_equal(r.status, GB_SLOT_OK);
    }
    uint64_t full_key = k;
    /* Refused again; the activations already there are all still counting. */
    assert_int_equal(gb_rk_send(rk, full_key, 1000, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_GRAIN_TABLE_FULL);
    for (uint64_t j = 1; j < full_key; j++) {
        assert_int_equal(gb_rk_send(rk, j, 2000 + j, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_int_equal(r.aux, 2);
    }
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.refused, 2);
    /* Second message to key 0 still works and counts 2. */
    assert_int_equal(gb_rk_send(rk, 0, 100, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.aux, 2);
    /* Deactivate key 0: frees an entry; a fresh activation of key 0 counts from 1. */
    assert_int_equal(gb_rk_send(rk, 0, 101, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(gb_rk_send(rk, 0, 102, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_NOT_ACTIVE);
    assert_int_equal(gb_rk_send(rk, 0, 103, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.aux, 1);
    /* Deactivating a grain makes room for the key that was refused. */
    assert_int_equal(gb_rk_send(rk, 1, 104, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(gb_rk_send(rk, full_key, 105, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.aux, 1);
    gb_rk_destroy(&rk);
}

/* Launch/terminate cycles leave nothing behind (ASan/compute-sanitizer check leaks). */
static void test_cycles(void **state)
{
    (void)state;
    for (int i = 0; i < scaled(g_cycles); i++) {
        gb_rk_t *rk = start("vecadd", 16, 64, 64);
        unsigned char rec[32];
        float v[3] = {1, 2, (float)i};
        put_vec(rec, GB_VECADD_ADD, 3, v, v);
        assert_int_equal(gb_rk_send(rk, (uint64_t)i, (uint64_t)i, GB_VECADD_MSG_REQUEST, rec, 32), GB_OK);
        gb_reply_t r;
        float out[3];
        recv_one(rk, &r, out, sizeof out, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_true(out[2] == 2.0f * (float)i);
        assert_int_equal(gb_rk_terminate(rk, 5000), GB_OK);
        gb_rk_destroy(&rk);
    }
}

/* Several grain types' kernels resident at once (the bridge's normal state):
 * creating, stopping and destroying one must not wait on the others (on the
 * GPU, cudaFree would synchronize the whole device). */
static void test_concurrent_kernels(void **state)
{
    (void)state;
    const char *san = getenv("GB_TEST_SANITIZER");
    if (san && *san == '1')
        skip(); /* compute-sanitizer runs kernels one at a time: a second resident kernel never starts */
    gb_rk_t *a = start("echo", 64, 64, 64);
    gb_rk_t *b = start("vecadd", 64, 64, 64);
    gb_reply_t r;
    unsigned char buf[32];
    for (int round = 0; round < 3; round++) {
        assert_int_equal(gb_rk_send(a, 1, (uint64_t)round, GB_ECHO_MSG_ECHO, "a", 1), GB_OK);
        recv_one(a, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.aux, (uint32_t)round + 1);
        unsigned char rec[32];
        float v[3] = {1, 2, 3};
        put_vec(rec, GB_VECADD_SUB, 3, v, v);
        assert_int_equal(gb_rk_send(b, 1, 1, GB_VECADD_MSG_REQUEST, rec, 32), GB_OK);
        recv_one(b, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
        /* b stops and goes away while a keeps running; then a new b. */
        assert_int_equal(gb_rk_terminate(b, 5000), GB_OK);
        gb_rk_destroy(&b);
        b = start("vecadd", 64, 64, 64);
    }
    assert_int_equal(gb_rk_send(a, 1, 9, GB_ECHO_MSG_ECHO, "a", 1), GB_OK);
    recv_one(a, &r, buf, sizeof buf, 5000);
    assert_int_equal(r.aux, 4);
    gb_rk_destroy(&b);
    gb_rk_destroy(&a);
}

/* A window whose shared memory (40 slots of 512 bytes, in and out: 41,120
 * bytes) fits under 48 KiB but not under 48 KiB minus the ring kernel's
 * static shared memory: the kernel must opt in to more, or its launch fails
 * with cudaErrorInvalidValue. Big echo payloads, every one checked. */
static void test_window_shared_memory(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for("echo", 64, 512, 64);
    p.grain.messages_per_iteration = 40;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    unsigned char msg[400], buf[480];
    gb_reply_t r;
    for (int i = 0; i < 100; i++) {
        memset(msg, i, sizeof msg);
        assert_int_equal(gb_rk_send(rk, (uint64_t)(i % 7), (uint64_t)i, GB_ECHO_MSG_ECHO, msg, sizeof msg), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 5000);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_int_equal(r.corr, (uint64_t)i);
        assert_int_equal(r.len, sizeof msg);
        assert_memory_equal(buf, msg, sizeof msg);
    }
    assert_int_equal(gb_rk_terminate(rk, 5000), GB_OK);
    gb_rk_destroy(&rk);
}

#include "runtime_window_cases.h"
#include "runtime_activation_cases.h"

#define GB_RUNTIME_CASES                                  \
    cmocka_unit_test(test_lifecycle),                     \
    cmocka_unit_test(test_turn_order),                    \
    cmocka_unit_test(test_deactivate_backpressure),       \
    cmocka_unit_test(test_vecadd_ops),                    \
    cmocka_unit_test(test_bad_slots),                     \
    cmocka_unit_test(test_activation_table),              \
    cmocka_unit_test(test_concurrent_kernels),            \
    cmocka_unit_test(test_window_shared_memory),          \
    cmocka_unit_test(test_producer_consumer_threads),     \
    cmocka_unit_test(test_deactivate_with_consumer_apart), \
    cmocka_unit_test(test_concurrent_activation),         \
    cmocka_unit_test(test_window_same_grain_per_thread),  \
    cmocka_unit_test(test_activation_collection),         \
    cmocka_unit_test(test_activation_churn),              \
    cmocka_unit_test(test_activation_store_bound),        \
    cmocka_unit_test(test_activation_refusal_names_store), \
    cmocka_unit_test(test_deactivate_evicted),            \
    cmocka_unit_test(test_cycles),                        \
    GB_LARGE_CASES

#endif
