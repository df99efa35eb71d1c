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

#endif
