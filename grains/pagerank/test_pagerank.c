/* The PageRank grains on the cpu backend: inline (cpu_threads 0) and with
 * worker threads; and the copy of contributions between devices' arenas. */
#include "pagerank_cases.h"

#include "pagerank.h"

/* gb_pr_share on host arenas (the handler called directly): a sender's START
 * copies its contributions into the job's slice on every other device that
 * holds the job with the same vertex count, wherever that slice lies there,
 * and touches nothing else: not another job's slice, not a device where the
 * job has another vertex count, not one without the job. And on several
 * devices a grain takes chunks and queries of its own partition only. */
#define SH_ARENA (1u << 20)
#define SH_DEVS 4

static uint32_t sh_aux;

static uint16_t sh_role(const gb_grain_ctx_t *c, int sender, void *st, uint16_t type, unsigned char *rec,
                        uint32_t len, uint32_t job)
{
    unsigned char out[256];
    uint32_t out_len = 0;
    gb_pr_rec_set_job(rec, type, job);
    return gb_pr_on_message(c, sender, st, type, rec, len, out, sizeof out, &out_len, &sh_aux);
}

static uint16_t sh_run(const gb_grain_ctx_t *c, void *st, uint16_t type, unsigned char *rec, uint32_t len,
                       uint32_t job)
{
    return sh_role(c, 1, st, type, rec, len, job);
}

static void sh_graph(const gb_grain_ctx_t *c, uint32_t job, uint64_t n, uint64_t m)
{
    unsigned char rec[64];
    gb_pr_part_t st = {0};
    const uint32_t len = gb_pr_rec_pair(rec, n, m);
    assert_int_equal(sh_run(c, &st, GB_PR_MSG_GRAPH_INIT, rec, len, job), GB_SLOT_OK);
}

/* job's x, half 0, in arena a (n vertices) */
static const float *sh_x(unsigned char *a, uint32_t job)
{
    gb_grain_ctx_t c = {a, SH_ARENA, 0, 1, NULL, NULL, NULL, 1, 0}, jc = c;
    uint64_t serial;
    gb_pr_dir_t d;
    assert_true(gb_pr_job_find(&c, job, &jc, &serial));
    assert_true(gb_pr_dir_read(&jc, &d));
    return (const float *)(jc.arena + d.off_x);
}

static void test_pr_share_peers(void **state)
{
    (void)state;
    unsigned char *a[SH_DEVS];
    for (int i = 0; i < SH_DEVS; i++)
        a[i] = calloc(1, SH_ARENA);
    unsigned char *const *peers = a;
    gb_grain_ctx_t c[SH_DEVS];
    for (uint32_t i = 0; i < SH_DEVS; i++)
        c[i] = (gb_grain_ctx_t){a[i], SH_ARENA, 0, 1, NULL, NULL, peers, SH_DEVS, i};
    sh_graph(&c[1], 7, 8, 2); /* device 1: another job first, so job 5's slice lies elsewhere there */
    sh_graph(&c[0], 5, 8, 4);
    sh_graph(&c[1], 5, 8, 3);
    sh_graph(&c[2], 5, 9, 3); /* device 2: job 5 with another vertex count; device 3: no job 5 */
    unsigned char rec[64];
    gb_pr_part_t st = {0};
    uint32_t len = gb_pr_rec_pair(rec, 0, 4);
    assert_int_equal(sh_run(&c[0], &st, GB_PR_MSG_PARTITION_INIT, rec, len, 5), GB_SLOT_OK);
    const uint32_t deg[4] = {1, 2, 0, 4};
    len = gb_pr_rec_chunk(rec, 0, 4, deg, 4);
    assert_int_equal(sh_run(&c[0], &st, GB_PR_MSG_OUT_DEGREES, rec, len, 5), GB_SLOT_OK);
    len = gb_pr_rec_start(rec, 0, 0, 0.85, 0.0, 8);
    assert_int_equal(sh_run(&c[0], &st, GB_PR_MSG_START, rec, len, 5), GB_SLOT_OK);
    const float *x0 = sh_x(a[0], 5), *x1 = sh_x(a[1], 5), *x7 = sh_x(a[1], 7), *x2 = sh_x(a[2], 5);
    assert_ptr_not_equal((const unsigned char *)x1 - a[1], (const unsigned char *)x0 - a[0]);
    for (int v = 0; v < 8; v++) {
        const float want = v < 4 && deg[v] ? 0.125f / (float)deg[v] : 0.0f; /* ranks 1/n */
        assert_true(x0[v] == want);
        assert_true(x1[v] == want); /* copied into device 1's slice of job 5 */
        assert_true(x7[v] == 0.0f); /* job 7's untouched */
        assert_true(x2[v] == 0.0f); /* another vertex count: not copied */
    }
    /* On several devices a chunk or query outside the grain's partition is
     * refused (it would fill or read a copy nothing uses); on one it is not. */
    len = gb_pr_rec_chunk(rec, 4, 2, deg, 4);
    assert_int_equal(sh_run(&c[0], &st, GB_PR_MSG_OUT_DEGREES, rec, len, 5), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(sh_aux & 0xff, GB_PR_E_NOT_MINE);
    len = gb_pr_rec_chunk(rec, 3, 2, deg, 4); /* straddles its end */
    assert_int_equal(sh_run(&c[0], &st, GB_PR_MSG_OUT_DEGREES, rec, len, 5), GB_SLOT_HANDLER_ERROR);
    gb_pr_part_t agg = {0};
    len = gb_pr_rec_pair(rec, 0, 4);
    assert_int_equal(sh_role(&c[0], 0, &agg, GB_PR_MSG_PARTITION_INIT, rec, len, 5), GB_SLOT_OK);
    const uint64_t offs[5] = {0, 1, 2, 2, 4};
    len = gb_pr_rec_chunk(rec, 0, 5, offs, 8); /* its end offset included */
    assert_int_equal(sh_role(&c[0], 0, &agg, GB_PR_MSG_IN_OFFSETS, rec, len, 5), GB_SLOT_OK);
    const uint32_t srcs[4] = {1, 2, 3, 0};
    len = gb_pr_rec_chunk(rec, 0, 4, srcs, 4);
    assert_int_equal(sh_role(&c[0], 0, &agg, GB_PR_MSG_IN_EDGES, rec, len, 5), GB_SLOT_OK);
    len = gb_pr_rec_chunk(rec, 2, 3, srcs, 4); /* past the partition's last edge */
    assert_int_equal(sh_role(&c[0], 0, &agg, GB_PR_MSG_IN_EDGES, rec, len, 5), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(sh_aux & 0xff, GB_PR_E_NOT_MINE);
    len = gb_pr_rec_chunk(rec, 4, 1, NULL, 0);
    assert_int_equal(sh_role(&c[0], 0, &agg, GB_PR_MSG_RANK_QUERY, rec, len, 5), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(sh_aux & 0xff, GB_PR_E_NOT_MINE);
    gb_pr_part_t fresh = {0}; /* no PartitionInit: refused before any range */
    len = gb_pr_rec_chunk(rec, 0, 1, NULL, 0);
    assert_int_equal(sh_role(&c[0], 0, &fresh, GB_PR_MSG_RANK_QUERY, rec, len, 5), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(sh_aux & 0xff, GB_PR_E_PARTITION);
    gb_grain_ctx_t one = c[0];
    one.peers = NULL;
    one.n_peers = 1;
    len = gb_pr_rec_chunk(rec, 4, 1, NULL, 0);
    assert_int_equal(sh_role(&one, 0, &agg, GB_PR_MSG_RANK_QUERY, rec, len, 5), GB_SLOT_OK);
    /* Nor for a job on this device alone (a client that keeps one key). */
    sh_graph(&c[3], 9, 8, 4);
    len = gb_pr_rec_chunk(rec, 4, 1, NULL, 0);
    assert_int_equal(sh_role(&c[3], 0, &fresh, GB_PR_MSG_RANK_QUERY, rec, len, 9), GB_SLOT_OK);
    for (int i = 0; i < SH_DEVS; i++)
        free(a[i]);
}


/* GraphInit with new_job for a job id in use says so, even for a graph too
 * large for the arena: the driver draws another id, and does not take the
 * refusal as its own (releasing grains the other driver's keys share). */
static void test_pr_claim_in_use(void **state)
{
    (void)state;
    unsigned char *a = calloc(1, SH_ARENA);
    const gb_grain_ctx_t c = {a, SH_ARENA, 0, 1, NULL, NULL, NULL, 1, 0};
    sh_graph(&c, 5, 8, 4);
    unsigned char rec[64];
    gb_pr_part_t st = {0};
    uint32_t len = gb_pr_rec_pair(rec, 1u << 20, 1u << 20); /* 40 MiB: past the 1 MiB arena */
    memset(rec + 20, 0, 4);
    rec[20] = GB_PR_INIT_NEW;
    assert_int_equal(sh_run(&c, &st, GB_PR_MSG_GRAPH_INIT, rec, len, 5), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(sh_aux & 0xff, GB_PR_E_JOB_EXISTS);
    len = gb_pr_rec_pair(rec, 1u << 20, 1u << 20); /* another id: too large, said so */
    rec[20] = GB_PR_INIT_NEW;
    assert_int_equal(sh_run(&c, &st, GB_PR_MSG_GRAPH_INIT, rec, len, 6), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(sh_aux & 0xff, GB_PR_E_ARENA_SMALL);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {GB_PAGERANK_CASES};
    g_mode = GB_MODE_CPU;
    g_lanes = 0;
    int failed = cmocka_run_group_tests_name("pagerank grains, cpu inline", tests, NULL, NULL);
    g_lanes = 3;
    failed += cmocka_run_group_tests_name("pagerank grains, cpu 3 workers", tests, NULL, NULL);
    const struct CMUnitTest direct[] = {cmocka_unit_test(test_pr_share_peers), cmocka_unit_test(test_pr_claim_in_use)};
    failed += cmocka_run_group_tests_name("pagerank grains, arenas of several devices", direct, NULL, NULL);
    return failed ? 1 : 0;
}
