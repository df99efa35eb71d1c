/* Runtime cases about activation collection (activation.h), part of
 * GB_RUNTIME_CASES (runtime_cases.h includes this after the window cases,
 * whose send_burst it uses): ten times max_grains keys through a small
 * table, every key's state intact; and activations churned by deactivations
 * and collection in windows of many keys of one table partition, where a
 * lookup must never take another key's entry (grain_table.h). */
#ifndef GB_TEST_RUNTIME_ACTIVATION_CASES_H
#define GB_TEST_RUNTIME_ACTIVATION_CASES_H

/* A ring kernel of echo grains with collection age age_s. */
static gb_rk_t *start_collecting(uint32_t cap, uint32_t max_grains, uint32_t window, uint32_t age_s)
{
    gb_rk_params_t p = params_for("echo", cap, 64, max_grains);
    p.grain.messages_per_iteration = window;
    p.grain.collection_age_s = age_s;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    return rk;
}

/* 640 keys through a table for 64 (a few hundred entries with the
 * partitions' slack), collection age 0: each round sends every key one
 * message, in bursts of 32 published at once, in an order that changes from
 * round to round. Every reply is OK and counts the key's messages (echo's
 * aux): an activation collected between its messages came back with its
 * state. Then a deactivation of a collected key: it was active (OK), and
 * its next message counts from 1. */
static void test_activation_collection(void **state)
{
    (void)state;
    enum { MAX = 64, KEYS = 10 * MAX, ROUNDS = 4, BURST = 32 };
    gb_rk_t *rk = start_collecting(256, MAX, 256, 0);
    static uint64_t keys[BURST];
    static uint16_t types[BURST];
    uint64_t corr = 0;
    for (uint32_t round = 1; round <= ROUNDS; round++) {
        for (uint32_t i = 0; i < KEYS; i += BURST) {
            for (uint32_t j = 0; j < BURST; j++) {
                /* a permutation of the keys that differs per round */
                static const uint32_t mul[ROUNDS] = {3, 7, 11, 13}; /* prime to KEYS */
                keys[j] = 5000 + ((i + j) * mul[round - 1] + round * 17) % KEYS;
                types[j] = GB_ECHO_MSG_ECHO;
            }
            send_burst(rk, keys, types, BURST, corr);
            for (uint32_t j = 0; j < BURST; j++) {
                gb_reply_t r;
                unsigned char buf[8];
                recv_one(rk, &r, buf, sizeof buf, 10000);
                assert_int_equal(r.corr, corr + j);
                assert_int_equal(r.key, keys[j]);
                if (r.status != GB_SLOT_OK || r.aux != round)
                    fail_msg("key %llu, round %u: status %u, count %u", (unsigned long long)r.key, round,
                             r.status, r.aux);
            }
            corr += BURST;
        }
    }
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.refused, 0);
    assert_true(st.restores > 0);
    assert_true(st.evicted > 0);
    assert_true(st.evictions >= st.evicted);
    assert_int_equal(st.activations + st.evicted, KEYS);

    /* The first key of the last round was collected by the sweep of a later
     * burst: a deactivation still finds it. */
    const uint64_t key = 5000 + (ROUNDS * 17) % KEYS;
    gb_reply_t r;
    unsigned char buf[8];
    assert_int_equal(gb_rk_send(rk, key, corr++, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 10000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(gb_rk_send(rk, key, corr++, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 10000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.aux, 1);
    gb_rk_destroy(&rk);
}

/* Random bursts of echoes and deactivations over a pool of keys, each burst
 * published at once (a GPU window: many keys of one partition activated,
 * deactivated and looked up in the same rounds, tombstones reused while
 * their old keys are looked up). A model of each key's count checks every
 * reply. Phases 1 and 2: a pool that fits the table, no collection (churn
 * by deactivation alone), in one partition, then in eight. Phase 3: a pool
 * of four times max_grains with collection age 0, so sweeps evict and
 * restore between bursts too. On a GPU this is the stress test of the
 * table's concurrent lookups (gb_grain_verify). */
static void churn(uint32_t max_grains, uint32_t pool, uint32_t age_s, uint32_t burst_max, uint32_t bursts,
                  uint64_t seed)
{
    enum { BURST = 256 };
    assert_true(burst_max <= BURST);
    gb_rk_t *rk = start_collecting(1024, max_grains, 1024, age_s);
    uint32_t *count = calloc(pool, sizeof *count);
    assert_non_null(count);
    static uint64_t keys[BURST];
    static uint16_t types[BURST];
    static uint32_t want[BURST]; /* expected aux; 0: a deactivation (want_st) */
    static uint16_t want_st[BURST];
    uint64_t corr = 0;
    for (uint32_t b = 0; b < bursts; b++) {
        const uint32_t n = 1 + (uint32_t)(seed >> 40) % burst_max;
        for (uint32_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t k = (uint32_t)(seed >> 33) % pool;
            keys[i] = k; /* small keys: key 0 included (an EMPTY entry's key) */
            if ((seed >> 20) % 4 == 0) {
                types[i] = GB_MSG_DEACTIVATE_KEY;
                want[i] = 0;
                want_st[i] = count[k] ? GB_SLOT_OK : GB_SLOT_NOT_ACTIVE;
                count[k] = 0;
            } else {
                types[i] = GB_ECHO_MSG_ECHO;
                want[i] = ++count[k];
                want_st[i] = GB_SLOT_OK;
            }
        }
        send_burst(rk, keys, types, n, corr);
        for (uint32_t i = 0; i < n; i++) {
            gb_reply_t r;
            unsigned char buf[8];
            recv_one(rk, &r, buf, sizeof buf, 10000);
            assert_int_equal(r.corr, corr + i);
            if (r.status != want_st[i] || (want[i] && r.aux != want[i]))
                fail_msg("burst %u, request %u (key %llu, type %u): status %u count %u, want %u count %u", b, i,
                         (unsigned long long)keys[i], types[i], r.status, r.aux, want_st[i], want[i]);
        }
        corr += n;
    }
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.refused, 0);
    free(count);
    gb_rk_destroy(&rk);
}

static void test_activation_churn(void **state)
{
    (void)state;
    const uint32_t bursts = (uint32_t)scaled(g_mode == GB_MODE_CPU ? 200 : 2000);
    /* Bursts of up to 64 in phase 2: no partition of the table (32 entries
     * or more) ever gets more keys in flight than it holds, so nothing is
     * refused. */
    churn(4, 24, 1u << 30, 256, bursts, 7); /* one partition of 32 entries on a GPU */
    churn(64, 48, 1u << 30, 256, bursts, 42);
    churn(64, 256, 0, 64, bursts / 2, 4242);
}

/* One echo to key, its reply checked: status st and, when OK, count aux. */
static void echo_one(gb_rk_t *rk, uint64_t key, uint64_t *corr, uint16_t st, uint32_t aux)
{
    gb_reply_t r;
    unsigned char buf[8];
    assert_int_equal(gb_rk_send(rk, key, *corr, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
    recv_one(rk, &r, buf, sizeof buf, 10000);
    assert_int_equal(r.corr, *corr);
    ++*corr;
    if (r.status != st || (st == GB_SLOT_OK && r.aux != aux))
        fail_msg("key %llu: status %u count %u, want status %u count %u", (unsigned long long)key, r.status,
                 r.aux, st, aux);
}

/* echo_one(..., GB_SLOT_OK, aux), sent again while the table is full but a
 * sweep may not run yet (its back-off after the last one, activation.c). */
static void echo_retry(gb_rk_t *rk, uint64_t key, uint64_t *corr, uint32_t aux)
{
    gb_reply_t r;
    unsigned char buf[8];
    for (int tries = 0;; tries++) {
        assert_true(tries < 10000);
        assert_int_equal(gb_rk_send(rk, key, *corr, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 10000);
        assert_int_equal(r.corr, *corr);
        ++*corr;
        if (r.status != GB_SLOT_GRAIN_TABLE_FULL)
            break;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (r.status != GB_SLOT_OK || r.aux != aux)
        fail_msg("key %llu: status %u count %u, want count %u", (unsigned long long)key, r.status, r.aux, aux);
}

/* One table partition (max_grains 4: 32 entries on a GPU, a few dozen on one
 * cpu lane), collection age 0, store of evicted states max_evicted_kb. */
static gb_rk_t *start_one_partition(uint32_t max_evicted_kb)
{
    uint32_t lanes_save = g_lanes;
    g_lanes = 1;
    gb_rk_params_t p = params_for("echo", 256, 64, 4);
    g_lanes = lanes_save;
    p.grain.messages_per_iteration = 256;
    p.grain.collection_age_s = 0;
    p.grain.max_evicted_kb = max_evicted_kb;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    return rk;
}

/* New keys 100, 101, ... one at a time, each activated with a count of 1,
 * until one is refused GB_SLOT_EVICTED_FULL (the table and the store of
 * evicted states full). Returns the keys accepted. */
static uint64_t fill_to_store_bound(gb_rk_t *rk, uint64_t *corr)
{
    gb_reply_t r;
    unsigned char buf[8];
    for (uint64_t n = 0;; n++) {
        assert_true(n < 4096);
        assert_int_equal(gb_rk_send(rk, 100 + n, (*corr)++, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 10000);
        if (r.status == GB_SLOT_EVICTED_FULL)
            return n;
        if (r.status != GB_SLOT_OK || r.aux != 1)
            fail_msg("new key %llu: status %u count %u", (unsigned long long)(100 + n), r.status, r.aux);
    }
}

/* The store of evicted states is bounded (grains.max_evicted_kb, 2 KiB here:
 * 16 echo states, rehashes included). New keys, one at a time, each collect the idle ones until
 * the store is full; the next new key is refused GB_SLOT_EVICTED_FULL (not
 * lost: refused again, and activated later with a fresh state). Every key
 * accepted before keeps its state, evicted ones included: each comes back in
 * exchange for an idle activation, the store at its bound throughout. A
 * deactivation of an evicted grain frees a place in the store, and the
 * refused key gets in; every other key still counts on. */
static void test_activation_store_bound(void **state)
{
    (void)state;
    gb_rk_t *rk = start_one_partition(2);
    uint64_t corr = 0;
    gb_reply_t r;
    unsigned char buf[8];
    const uint64_t n = fill_to_store_bound(rk, &corr), refused = 100 + n;
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    assert_int_equal(st.evicted_max_bytes, 2048);
    assert_true(st.evicted_bytes <= st.evicted_max_bytes);
    assert_int_equal(st.evicted, 16);
    assert_int_equal(st.evicted_max, st.evicted); /* at the bound, as the refusal below says */
    assert_int_equal(st.activations + st.evicted, n);
    assert_int_equal(st.refused, 1);
    assert_int_equal(st.refused_evicted_full, 1);
    echo_one(rk, refused, &corr, GB_SLOT_EVICTED_FULL, 0);

    /* Every key keeps its count; the evicted ones come back. */
    for (uint64_t i = 0; i < n; i++)
        echo_one(rk, 100 + i, &corr, GB_SLOT_OK, 2);
    gb_rk_status(rk, &st);
    assert_int_equal(st.evicted, 16);
    assert_true(st.evicted_bytes <= st.evicted_max_bytes);
    assert_true(st.restores >= 16);
    assert_int_equal(st.refused, 2);

    /* Deactivations, from the first key on, until one finds its grain
     * evicted: it drops that state from the store (the table still full). */
    uint64_t d = 0;
    for (;; d++) {
        assert_true(d < n);
        assert_int_equal(gb_rk_send(rk, 100 + d, corr++, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 10000);
        assert_int_equal(r.status, GB_SLOT_OK);
        gb_rk_status(rk, &st);
        if (st.evicted < 16)
            break;
    }
    assert_int_equal(st.evicted, 15);
    /* Room in the store again: the refused key gets in once a sweep may run. */
    echo_retry(rk, refused, &corr, 1);
    for (uint64_t i = d + 1; i < n; i++)
        echo_one(rk, 100 + i, &corr, GB_SLOT_OK, 3);
    echo_one(rk, refused, &corr, GB_SLOT_OK, 2);
    /* The deactivated keys are new keys again, the store full again. */
    for (uint64_t i = 0; i <= d; i++) {
        assert_int_equal(gb_rk_send(rk, 100 + i, corr++, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 10000);
        if (!(r.status == GB_SLOT_OK && r.aux == 1) && r.status != GB_SLOT_EVICTED_FULL)
            fail_msg("deactivated key %llu: status %u count %u", (unsigned long long)(100 + i), r.status, r.aux);
    }
    gb_rk_status(rk, &st);
    assert_true(st.evicted <= 16);
    assert_true(st.evicted_bytes <= st.evicted_max_bytes);
    gb_rk_destroy(&rk);
}

/* With collection_age_s = 0 and one request at a time, no activation is
 * ever in use past its turn, so a refusal never says so: a new key that
 * finds the table full right after a sweep (whose one eviction went to an
 * evicted key coming back, the store near its bound) hears of the store's
 * bound (GB_SLOT_EVICTED_FULL), not GB_SLOT_GRAIN_TABLE_FULL. */
static void test_activation_refusal_names_store(void **state)
{
    (void)state;
    gb_rk_t *rk = start_one_partition(2);
    uint64_t corr = 0;
    gb_reply_t r;
    unsigned char buf[8];
    const uint64_t n = fill_to_store_bound(rk, &corr); /* the table and the store full */
    for (uint64_t d = 0; d < n; d += 2) { /* places free in the table and in the store */
        assert_int_equal(gb_rk_send(rk, 100 + d, corr++, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
        recv_one(rk, &r, buf, sizeof buf, 10000);
    }
    uint64_t table_full = 0;
    for (uint64_t i = 1; i < n; i += 2) { /* an old key (evicted ones come back), then a new one */
        for (int k = 0; k < 2; k++) {
            assert_int_equal(gb_rk_send(rk, k ? 100000 + i : 100 + i, corr++, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
            recv_one(rk, &r, buf, sizeof buf, 10000);
            table_full += r.status == GB_SLOT_GRAIN_TABLE_FULL;
            if (r.status != GB_SLOT_OK && r.status != GB_SLOT_EVICTED_FULL)
                assert_int_equal(r.status, k ? GB_SLOT_EVICTED_FULL : GB_SLOT_OK);
        }
    }
    assert_int_equal(table_full, 0);
    gb_rk_destroy(&rk);
}

/* DeactivateGrain of an evicted grain drops its state from host memory and
 * needs no room in the table. Keys A are activated one at a time; with the
 * grain type paused, new keys B fill the table (their requests in flight, so
 * none can be collected) and push every A out into the store, until a B is
 * refused. A deactivation of each A is then answered OK, the table still
 * full; afterwards each A counts from 1 and each B kept its state. */
static void test_deactivate_evicted(void **state)
{
    (void)state;
    enum { A = 64 };
    gb_rk_t *rk = start_one_partition(GB_MAX_EVICTED_KB_DEFAULT);
    uint64_t corr = 0;
    for (uint64_t k = 0; k < A; k++)
        echo_one(rk, 1000 + k, &corr, GB_SLOT_OK, 1);
    assert_int_equal(gb_rk_deactivate(rk, 5000), GB_OK);
    gb_rk_status_t st;
    uint64_t nb = 0;
    for (;; nb++) {
        assert_true(nb < 200);
        assert_int_equal(gb_rk_send(rk, 5000 + nb, corr + nb, GB_ECHO_MSG_ECHO, "x", 1), GB_OK);
        gb_rk_status(rk, &st);
        if (st.refused)
            break;
    }
    nb++;
    assert_int_equal(st.evicted, A);
    for (uint64_t k = 0; k < A; k++)
        assert_int_equal(gb_rk_send(rk, 1000 + k, corr + nb + k, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_OK);
    gb_rk_status(rk, &st);
    assert_int_equal(st.refused, 1);
    assert_int_equal(st.evicted, 0);
    assert_int_equal(gb_rk_activate(rk, 5000), GB_OK);
    for (uint64_t i = 0; i < nb + A; i++) {
        gb_reply_t r;
        unsigned char buf[8];
        recv_one(rk, &r, buf, sizeof buf, 10000);
        assert_int_equal(r.corr, corr + i);
        const uint16_t want = i == nb - 1 ? GB_SLOT_GRAIN_TABLE_FULL : GB_SLOT_OK;
        if (r.status != want || (i < nb - 1 && r.aux != 1))
            fail_msg("request %llu (key %llu): status %u count %u, want status %u", (unsigned long long)i,
                     (unsigned long long)r.key, r.status, r.aux, want);
    }
    corr += nb + A;
    for (uint64_t k = 0; k < A; k++)
        echo_retry(rk, 1000 + k, &corr, 1);
    for (uint64_t b = 0; b + 1 < nb; b++)
        echo_retry(rk, 5000 + b, &corr, 2);
    gb_rk_destroy(&rk);
}

#endif
