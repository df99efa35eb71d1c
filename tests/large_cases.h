/* Runtime cases for messages larger than a slot (large_payload.h), run on
 * every backend through GB_RUNTIME_CASES: requests and replies out of line,
 * the upstream message-passing cases, vectors of 1,000 and 100,000 elements
 * checked element by element, the large area filling up and wrapping, and
 * the size limit. Included by runtime_cases.h. */
#ifndef GB_TEST_LARGE_CASES_H
#define GB_TEST_LARGE_CASES_H

/* Sends, and on GB_ERR_FULL (ring or large area) waits for a reply into
 * replies[*got] first. */
static void large_send(gb_rk_t *rk, uint64_t key, uint64_t corr, uint16_t type, const void *p, uint32_t len,
                       gb_reply_t *replies, float **bufs, uint32_t buf_cap, int *got)
{
    for (;;) {
        gb_err err = gb_rk_send(rk, key, corr, type, p, len);
        if (err == GB_OK)
            return;
        assert_int_equal(err, GB_ERR_FULL);
        recv_one(rk, &replies[*got], bufs[*got], buf_cap, 20000);
        (*got)++;
    }
}

/* A vecadd request of n elements: a[i] = i + 0.5, b[i] = 3 - i (exact in float). */
static unsigned char *large_vec(uint32_t op, uint32_t n)
{
    unsigned char *rec = malloc(gb_vecadd_request_len(n));
    assert_non_null(rec);
    float *a = (float *)(rec + 8), *b = a + n;
    memcpy(rec, &op, 4);
    memcpy(rec + 4, &n, 4);
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)i + 0.5f;
        b[i] = 3.0f - (float)i;
    }
    return rec;
}

static void check_vec(const float *r, uint32_t n, uint32_t op)
{
    for (uint32_t i = 0; i < n; i++) {
        float a = (float)i + 0.5f, b = 3.0f - (float)i;
        float want = op == GB_VECADD_ADD ? a + b : op == GB_VECADD_SUB ? a - b : op == GB_VECADD_MUL ? a * b : a / b;
        if (r[i] != want)
            fail_msg("element %u of %u (op %u): %g, expected %g", i, n, op, (double)r[i], (double)want);
    }
}

/* The upstream MessagePassingTest: 4 elements, add, sub, mul and div. */
static void test_large_upstream_cases(void **state)
{
    (void)state;
    gb_rk_t *rk = start("vecadd", 64, 64, 1024);
    assert_int_equal(gb_rk_payload_cap(rk), 32); /* 4 elements (40 bytes) do not fit the slot */
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    const float want[4][4] = {{11, 22, 33, 44}, {-9, -18, -27, -36}, {10, 40, 90, 160}, {0.1f, 0.1f, 0.1f, 0.1f}};
    unsigned char rec[40];
    for (uint32_t op = 0; op <= GB_VECADD_DIV; op++) {
        put_vec(rec, op, 4, a, b);
        assert_int_equal(gb_rk_send(rk, 7, op, GB_VECADD_MSG_REQUEST, rec, sizeof rec), GB_OK);
        gb_reply_t r;
        float res[4];
        recv_one(rk, &r, res, sizeof res, 10000);
        assert_int_equal(r.corr, op);
        assert_int_equal(r.status, GB_SLOT_OK);
        assert_int_equal(r.len, 16);
        assert_int_equal(r.aux, op + 1); /* one grain, in order */
        for (int i = 0; i < 4; i++)
            assert_true(res[i] == want[op][i] || (op == GB_VECADD_DIV && res[i] == a[i] / b[i]));
    }
    assert_int_equal(gb_rk_in_flight(rk), 0);
    gb_rk_destroy(&rk);
}

/* 1,000 and 100,000 elements, every op, every element checked; echo of
 * 100,000 bytes; then small messages again on the one-slot path. */
static void test_large_vectors(void **state)
{
    (void)state;
    gb_rk_t *rk = start("vecadd", 64, 64, 1024);
    const uint32_t sizes[2] = {1000, 100000};
    float *res = malloc(4u * 100000);
    assert_non_null(res);
    for (int k = 0; k < 2; k++) {
        for (uint32_t op = 0; op <= GB_VECADD_DIV; op++) {
            const uint32_t n = sizes[k];
            unsigned char *rec = large_vec(op, n);
            assert_int_equal(gb_rk_send(rk, 9, 100 + op, GB_VECADD_MSG_REQUEST, rec, gb_vecadd_request_len(n)),
                             GB_OK);
            free(rec);
            gb_reply_t r;
            recv_one(rk, &r, res, 4u * n, 60000);
            assert_int_equal(r.corr, 100 + op);
            assert_int_equal(r.status, GB_SLOT_OK);
            assert_int_equal(r.len, 4u * n);
            check_vec(res, n, op);
        }
    }
    /* Small ones still take the slot and answer as before. */
    unsigned char small[32];
    const float a3[3] = {1, 2, 3}, b3[3] = {4, 5, 6};
    put_vec(small, GB_VECADD_ADD, 3, a3, b3);
    assert_int_equal(gb_rk_send(rk, 9, 7, GB_VECADD_MSG_REQUEST, small, sizeof small), GB_OK);
    gb_reply_t r;
    recv_one(rk, &r, res, 12, 10000);
    assert_int_equal(r.len, 12);
    assert_true(res[0] == 5 && res[1] == 7 && res[2] == 9);
    assert_int_equal(r.aux, 9); /* the grain's ninth request: large and small share its turns */
    free(res);
    gb_rk_destroy(&rk);

    rk = start("echo", 64, 64, 1024);
    unsigned char *blob = malloc(100000), *back = malloc(100000);
    assert_non_null(blob);
    assert_non_null(back);
    for (uint32_t i = 0; i < 100000; i++)
        blob[i] = (unsigned char)(i * 7 + 3);
    assert_int_equal(gb_rk_send(rk, 1, 1, GB_ECHO_MSG_ECHO, blob, 100000), GB_OK);
    recv_one(rk, &r, back, 100000, 30000);
    assert_int_equal(r.status, GB_SLOT_OK);
    assert_int_equal(r.len, 100000);
    assert_memory_equal(back, blob, 100000);
    free(blob);
    free(back);
    gb_rk_destroy(&rk);
}

/* Many large requests in flight among small ones, over several keys: the
 * large area fills (GB_ERR_FULL, then room again as replies are consumed)
 * and wraps; every reply is right and each grain's turn order holds. */
static void test_large_pipeline(void **state)
{
    (void)state;
    gb_rk_t *rk = start("vecadd", 64, 64, 1024);
    enum { MSGS = 96, BIG = 20000 };
    gb_reply_t replies[MSGS];
    float *bufs[MSGS];
    for (int i = 0; i < MSGS; i++) {
        bufs[i] = malloc(4u * BIG);
        assert_non_null(bufs[i]);
    }
    int got = 0;
    unsigned char *big = large_vec(GB_VECADD_ADD, BIG);
    unsigned char small[32];
    const float a3[3] = {1, 2, 3}, b3[3] = {4, 5, 6};
    put_vec(small, GB_VECADD_MUL, 3, a3, b3);
    for (int i = 0; i < MSGS; i++) {
        if (i % 3 == 2)
            large_send(rk, (uint64_t)(i % 4), (uint64_t)i, GB_VECADD_MSG_REQUEST, small, sizeof small, replies,
                       bufs, 4u * BIG, &got);
        else
            large_send(rk, (uint64_t)(i % 4), (uint64_t)i, GB_VECADD_MSG_REQUEST, big, gb_vecadd_request_len(BIG),
                       replies, bufs, 4u * BIG, &got);
    }
    while (got < MSGS) {
        recv_one(rk, &replies[got], bufs[got], 4u * BIG, 60000);
        got++;
    }
    uint32_t seen[4] = {0};
    for (int i = 0; i < MSGS; i++) {
        assert_int_equal(replies[i].corr, (uint64_t)i); /* replies come in request order */
        assert_int_equal(replies[i].status, GB_SLOT_OK);
        assert_int_equal(replies[i].aux, ++seen[i % 4]);
        if (i % 3 == 2) {
            assert_int_equal(replies[i].len, 12);
            assert_true(bufs[i][0] == 4 && bufs[i][1] == 10 && bufs[i][2] == 18);
        } else {
            assert_int_equal(replies[i].len, 4u * BIG);
            check_vec(bufs[i], BIG, GB_VECADD_ADD);
        }
    }
    free(big);
    for (int i = 0; i < MSGS; i++)
        free(bufs[i]);
    assert_int_equal(gb_rk_in_flight(rk), 0);
    gb_rk_destroy(&rk);
}

/* Past the largest message: refused on the host, nothing enqueued; the ring
 * keeps serving. */
static void test_large_limit(void **state)
{
    (void)state;
    gb_rk_params_t p = params_for("echo", 64, 64, 1024);
    p.large_max = 4096;
    gb_rk_t *rk = NULL;
    assert_int_equal(gb_rk_new(&p, &rk), GB_OK);
    assert_int_equal(gb_rk_launch(rk), GB_OK);
    assert_int_equal(gb_rk_large_max(rk), 4096);
    unsigned char buf[4097];
    memset(buf, 0x5a, sizeof buf);
    assert_int_equal(gb_rk_send(rk, 1, 1, GB_ECHO_MSG_ECHO, buf, 4097), GB_ERR_TOO_LARGE);
    assert_int_equal(gb_rk_in_flight(rk), 0);
    assert_int_equal(gb_rk_send(rk, 1, 2, GB_ECHO_MSG_ECHO, buf, 4096), GB_OK);
    gb_reply_t r;
    unsigned char back[4096];
    recv_one(rk, &r, back, sizeof back, 10000);
    assert_int_equal(r.corr, 2);
    assert_int_equal(r.len, 4096);
    assert_memory_equal(back, buf, 4096);
    gb_rk_destroy(&rk);
}

#define GB_LARGE_CASES                                    \
    cmocka_unit_test(test_large_upstream_cases),          \
    cmocka_unit_test(test_large_vectors),                 \
    cmocka_unit_test(test_large_pipeline),                \
    cmocka_unit_test(test_large_limit)

#endif
