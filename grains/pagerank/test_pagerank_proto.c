/* test_pagerank_proto.c: pagerank.proto (the PageRank grains' messages)
 * through protobuf-c, with the checks of proto_check.h (tests/) on every
 * encoding, and every message of the schema covered. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagerank.pb-c.h"

#include "gpubridge/ring.h"

static const ProtobufCMessageDescriptor *const all_descriptors[] = {
    &gpubridge__start_iteration_command__descriptor,
    &gpubridge__node_rank_update__descriptor,
    &gpubridge__page_rank_contribution__descriptor,
    &gpubridge__rank_aggregation_result__descriptor,
    &gpubridge__graph_edge_info__descriptor,
    &gpubridge__node_rank_update_batch__descriptor,
    &gpubridge__page_rank_contribution_batch__descriptor,
    &gpubridge__graph_edge_info_batch__descriptor,
    &gpubridge__graph_init__descriptor,
    &gpubridge__partition_init__descriptor,
    &gpubridge__out_degree_chunk__descriptor,
    &gpubridge__in_offset_chunk__descriptor,
    &gpubridge__in_edge_chunk__descriptor,
    &gpubridge__rank_query__descriptor,
    &gpubridge__job_end__descriptor,
};
#define N_DESCRIPTORS (sizeof all_descriptors / sizeof all_descriptors[0])

#include "proto_check.h"

static void cmp_node_rank_update(const Gpubridge__NodeRankUpdate *a,
                                 const Gpubridge__NodeRankUpdate *b)
{
    assert_int_equal(a->node_id, b->node_id);
    assert_double_bits(a->rank, b->rank);
}

static void test_pagerank_single(void **state)
{
    (void)state;
    Gpubridge__StartIterationCommand sic = GPUBRIDGE__START_ITERATION_COMMAND__INIT, *sico;
    sic.iteration = UINT32_MAX;
    sic.damping = 0.85;
    sic.tolerance = 1e-12;
    sic.node_count = UINT64_MAX;
    sic.dangling_rank = DBL_MIN;
    sic.report_ranks = 1;
    ROUND_TRIP(gpubridge__start_iteration_command, &sic, sico);
    assert_int_equal(sico->iteration, sic.iteration);
    assert_double_bits(sico->damping, sic.damping);
    assert_double_bits(sico->tolerance, sic.tolerance);
    assert_int_equal(sico->node_count, sic.node_count);
    assert_double_bits(sico->dangling_rank, sic.dangling_rank);
    assert_int_equal(sico->report_ranks, 1);
    gpubridge__start_iteration_command__free_unpacked(sico, NULL);

    Gpubridge__NodeRankUpdate nru = GPUBRIDGE__NODE_RANK_UPDATE__INIT, *nruo;
    nru.node_id = UINT64_MAX;
    nru.rank = 1.0 / 3.0;
    ROUND_TRIP(gpubridge__node_rank_update, &nru, nruo);
    cmp_node_rank_update(&nru, nruo);
    gpubridge__node_rank_update__free_unpacked(nruo, NULL);
    nru.node_id = 0; /* a zero rank with node 0 is all defaults but still valid */
    nru.rank = -0.0;
    ROUND_TRIP(gpubridge__node_rank_update, &nru, nruo);
    assert_int_equal(nruo->node_id, 0);
    assert_true(nruo->rank == 0.0);
    gpubridge__node_rank_update__free_unpacked(nruo, NULL);

    Gpubridge__PageRankContribution prc = GPUBRIDGE__PAGE_RANK_CONTRIBUTION__INIT, *prco;
    prc.target_node = UINT64_MAX;
    prc.contribution = DBL_MAX;
    prc.iteration = 17;
    ROUND_TRIP(gpubridge__page_rank_contribution, &prc, prco);
    assert_int_equal(prco->target_node, prc.target_node);
    assert_double_bits(prco->contribution, prc.contribution);
    assert_int_equal(prco->iteration, prc.iteration);
    gpubridge__page_rank_contribution__free_unpacked(prco, NULL);

    Gpubridge__RankAggregationResult rar = GPUBRIDGE__RANK_AGGREGATION_RESULT__INIT, *raro;
    rar.iteration = 3;
    rar.l1_delta = 1.25e-7;
    rar.nodes = UINT64_MAX;
    ROUND_TRIP(gpubridge__rank_aggregation_result, &rar, raro); /* no ranks */
    assert_int_equal(raro->iteration, 3);
    assert_double_bits(raro->l1_delta, rar.l1_delta);
    assert_int_equal(raro->nodes, UINT64_MAX);
    assert_int_equal(raro->n_ranks, 0);
    gpubridge__rank_aggregation_result__free_unpacked(raro, NULL);
    enum { NR = 100 };
    Gpubridge__NodeRankUpdate ranks[NR];
    Gpubridge__NodeRankUpdate *rankp[NR];
    for (size_t i = 0; i < NR; i++) {
        Gpubridge__NodeRankUpdate r = GPUBRIDGE__NODE_RANK_UPDATE__INIT;
        ranks[i] = r;
        ranks[i].node_id = i == 0 ? UINT64_MAX : i * 1000003u;
        ranks[i].rank = 1.0 / (double)(i + 1);
        rankp[i] = &ranks[i];
    }
    rar.n_ranks = NR;
    rar.ranks = rankp;
    ROUND_TRIP(gpubridge__rank_aggregation_result, &rar, raro);
    assert_int_equal(raro->n_ranks, NR);
    for (size_t i = 0; i < NR; i++)
        cmp_node_rank_update(&ranks[i], raro->ranks[i]);
    gpubridge__rank_aggregation_result__free_unpacked(raro, NULL);

    Gpubridge__GraphEdgeInfo gei = GPUBRIDGE__GRAPH_EDGE_INFO__INIT, *geio;
    uint64_t targets[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
    gei.source = UINT64_MAX;
    gei.n_targets = sizeof targets / sizeof targets[0];
    gei.targets = targets;
    gei.out_degree = UINT32_MAX; /* a partial list: the full degree is larger */
    ROUND_TRIP(gpubridge__graph_edge_info, &gei, geio);
    assert_int_equal(geio->source, gei.source);
    assert_u64s_eq(targets, gei.n_targets, geio->targets, geio->n_targets);
    assert_int_equal(geio->out_degree, gei.out_degree);
    gpubridge__graph_edge_info__free_unpacked(geio, NULL);
    gei.source = 5; /* dangling vertex: no targets, out-degree 0 */
    gei.n_targets = 0;
    gei.targets = NULL;
    gei.out_degree = 0;
    ROUND_TRIP(gpubridge__graph_edge_info, &gei, geio);
    assert_int_equal(geio->source, 5);
    assert_int_equal(geio->n_targets, 0);
    assert_int_equal(geio->out_degree, 0);
    gpubridge__graph_edge_info__free_unpacked(geio, NULL);
}

static void test_pagerank_batches(void **state)
{
    (void)state;
    enum { N = 10000 };
    uint64_t *ids = malloc(N * sizeof *ids);
    double *vals = malloc(N * sizeof *vals);
    uint32_t *degs = malloc(N * sizeof *degs);
    uint32_t *counts = malloc(N * sizeof *counts);
    uint64_t *targets = malloc(3 * N * sizeof *targets);
    assert_non_null(ids);
    assert_non_null(vals);
    assert_non_null(degs);
    assert_non_null(counts);
    assert_non_null(targets);
    size_t nt = 0;
    for (size_t i = 0; i < N; i++) {
        ids[i] = i == N - 1 ? UINT64_MAX : (uint64_t)i * 2654435761u;
        vals[i] = i == 0 ? 0.0 : 1.0 / (double)i;
        counts[i] = (uint32_t)(i % 4);
        degs[i] = counts[i] + (uint32_t)(i % 2);
        for (uint32_t k = 0; k < counts[i]; k++)
            targets[nt++] = (ids[i] + k) ^ 0x5555;
    }

    /* Empty, then full. */
    Gpubridge__NodeRankUpdateBatch nb = GPUBRIDGE__NODE_RANK_UPDATE_BATCH__INIT, *nbo;
    ROUND_TRIP(gpubridge__node_rank_update_batch, &nb, nbo);
    assert_int_equal(nbo->n_node_ids, 0);
    assert_int_equal(nbo->n_ranks, 0);
    gpubridge__node_rank_update_batch__free_unpacked(nbo, NULL);
    nb.iteration = UINT32_MAX;
    nb.n_node_ids = N;
    nb.node_ids = ids;
    nb.n_ranks = N;
    nb.ranks = vals;
    ROUND_TRIP(gpubridge__node_rank_update_batch, &nb, nbo);
    assert_int_equal(nbo->iteration, UINT32_MAX);
    assert_u64s_eq(ids, N, nbo->node_ids, nbo->n_node_ids);
    assert_doubles_eq(vals, N, nbo->ranks, nbo->n_ranks);
    gpubridge__node_rank_update_batch__free_unpacked(nbo, NULL);
    /* Packed: one tag and length for the whole array, then 8 bytes a double
     * (unpacked would cost a tag per element). */
    Gpubridge__NodeRankUpdateBatch only_ranks = GPUBRIDGE__NODE_RANK_UPDATE_BATCH__INIT;
    only_ranks.n_ranks = N;
    only_ranks.ranks = vals;
    assert_int_equal(gpubridge__node_rank_update_batch__get_packed_size(&only_ranks),
                     1 + 3 + 8 * (size_t)N);

    Gpubridge__PageRankContributionBatch cb = GPUBRIDGE__PAGE_RANK_CONTRIBUTION_BATCH__INIT, *cbo;
    ROUND_TRIP(gpubridge__page_rank_contribution_batch, &cb, cbo);
    assert_int_equal(cbo->n_target_nodes, 0);
    assert_int_equal(cbo->n_contributions, 0);
    gpubridge__page_rank_contribution_batch__free_unpacked(cbo, NULL);
    cb.iteration = 9;
    cb.n_target_nodes = N;
    cb.target_nodes = ids;
    cb.n_contributions = N - 1; /* unequal lengths pass the wire; the handler rejects them */
    cb.contributions = vals;
    ROUND_TRIP(gpubridge__page_rank_contribution_batch, &cb, cbo);
    assert_int_equal(cbo->iteration, 9);
    assert_u64s_eq(ids, N, cbo->target_nodes, cbo->n_target_nodes);
    assert_doubles_eq(vals, N - 1, cbo->contributions, cbo->n_contributions);
    gpubridge__page_rank_contribution_batch__free_unpacked(cbo, NULL);

    Gpubridge__GraphEdgeInfoBatch eb = GPUBRIDGE__GRAPH_EDGE_INFO_BATCH__INIT, *ebo;
    ROUND_TRIP(gpubridge__graph_edge_info_batch, &eb, ebo);
    assert_int_equal(ebo->n_sources, 0);
    assert_int_equal(ebo->n_targets, 0);
    gpubridge__graph_edge_info_batch__free_unpacked(ebo, NULL);
    eb.n_sources = N;
    eb.sources = ids;
    eb.n_out_degrees = N;
    eb.out_degrees = degs;
    eb.n_target_counts = N;
    eb.target_counts = counts;
    eb.n_targets = nt;
    eb.targets = targets;
    ROUND_TRIP(gpubridge__graph_edge_info_batch, &eb, ebo);
    assert_u64s_eq(ids, N, ebo->sources, ebo->n_sources);
    assert_u32s_eq(degs, N, ebo->out_degrees, ebo->n_out_degrees);
    assert_u32s_eq(counts, N, ebo->target_counts, ebo->n_target_counts);
    assert_u64s_eq(targets, nt, ebo->targets, ebo->n_targets);
    gpubridge__graph_edge_info_batch__free_unpacked(ebo, NULL);

    free(ids);
    free(vals);
    free(degs);
    free(counts);
    free(targets);
}

/* The loading and query messages of the bridge's PageRank grains. */
static void test_pagerank_loading(void **state)
{
    (void)state;
    Gpubridge__GraphInit gi = GPUBRIDGE__GRAPH_INIT__INIT, *gio;
    gi.node_count = 4194304;
    gi.edge_count = UINT64_MAX;
    gi.new_job = 1;
    ROUND_TRIP(gpubridge__graph_init, &gi, gio);
    assert_int_equal(gio->node_count, gi.node_count);
    assert_true(gio->edge_count == UINT64_MAX);
    assert_true(gio->new_job);
    gpubridge__graph_init__free_unpacked(gio, NULL);

    Gpubridge__PartitionInit pi = GPUBRIDGE__PARTITION_INIT__INIT, *pio;
    pi.first_node = 12345;
    pi.node_count = 678;
    ROUND_TRIP(gpubridge__partition_init, &pi, pio);
    assert_int_equal(pio->first_node, 12345);
    assert_int_equal(pio->node_count, 678);
    gpubridge__partition_init__free_unpacked(pio, NULL);

    uint32_t degs[] = {0, 1, 7, UINT32_MAX};
    Gpubridge__OutDegreeChunk oc = GPUBRIDGE__OUT_DEGREE_CHUNK__INIT, *oco;
    oc.first_node = 9;
    oc.n_out_degrees = 4;
    oc.out_degrees = degs;
    ROUND_TRIP(gpubridge__out_degree_chunk, &oc, oco);
    assert_int_equal(oco->first_node, 9);
    assert_u32s_eq(degs, 4, oco->out_degrees, oco->n_out_degrees);
    gpubridge__out_degree_chunk__free_unpacked(oco, NULL);

    uint64_t offs[] = {0, 3, 3, UINT64_MAX};
    Gpubridge__InOffsetChunk ic = GPUBRIDGE__IN_OFFSET_CHUNK__INIT, *ico;
    ic.first_node = 1;
    ic.n_offsets = 4;
    ic.offsets = offs;
    ROUND_TRIP(gpubridge__in_offset_chunk, &ic, ico);
    assert_int_equal(ico->first_node, 1);
    assert_u64s_eq(offs, 4, ico->offsets, ico->n_offsets);
    gpubridge__in_offset_chunk__free_unpacked(ico, NULL);

    uint32_t srcs[] = {5, 0, 5, 1u << 31};
    Gpubridge__InEdgeChunk ec = GPUBRIDGE__IN_EDGE_CHUNK__INIT, *eco;
    ec.first_edge = 1ull << 33;
    ec.n_sources = 4;
    ec.sources = srcs;
    ROUND_TRIP(gpubridge__in_edge_chunk, &ec, eco);
    assert_true(eco->first_edge == 1ull << 33);
    assert_u32s_eq(srcs, 4, eco->sources, eco->n_sources);
    gpubridge__in_edge_chunk__free_unpacked(eco, NULL);

    Gpubridge__RankQuery rq = GPUBRIDGE__RANK_QUERY__INIT, *rqo;
    rq.first_node = 77;
    rq.count = 4000;
    ROUND_TRIP(gpubridge__rank_query, &rq, rqo);
    assert_int_equal(rqo->first_node, 77);
    assert_int_equal(rqo->count, 4000);
    gpubridge__rank_query__free_unpacked(rqo, NULL);

    Gpubridge__JobEnd je = GPUBRIDGE__JOB_END__INIT, *jeo;
    ROUND_TRIP(gpubridge__job_end, &je, jeo);
    gpubridge__job_end__free_unpacked(jeo, NULL);
}


/* The schema's message types fit the slot's 16-bit type below the range
 * the runtime reserves (gpubridge/ring.h). */
static void test_types_below_reserved(void **state)
{
    (void)state;
    assert_true((int)GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_EDGE_INFO_BATCH <
                (int)GB_MSG_DEACTIVATE_KEY);
}


/* Malformed encodings: refused by every decoder of the schema, and the
 * schema's own cases by their typed decoders. */
static void test_garbage_refused(void **state)
{
    (void)state;
    pc_garbage_refused();
    static const uint8_t doubles_len12[] = {0x1A, 0x0C, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_null(gpubridge__node_rank_update_batch__unpack(NULL, sizeof doubles_len12, doubles_len12));
    static const uint8_t varints_cut[] = {0x12, 0x02, 0x01, 0x80}; /* packed uint64, last cut */
    assert_null(gpubridge__graph_edge_info__unpack(NULL, sizeof varints_cut, varints_cut));
    static const uint8_t rank_short[] = {0x11, 0, 0, 0, 0, 0, 0, 0xF0}; /* double, 7 bytes */
    assert_null(gpubridge__node_rank_update__unpack(NULL, sizeof rank_short, rank_short));
}

/* Every `message X` of grains/pagerank/ is in all_descriptors and went through
 * ROUND_TRIP. */
static void test_every_message_covered(void **state)
{
    (void)state;
    static const char *const dirs[] = {"grains/pagerank"};
    pc_check_covered(dirs, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pagerank_single),
        cmocka_unit_test(test_pagerank_batches),
        cmocka_unit_test(test_pagerank_loading),
        cmocka_unit_test(test_types_below_reserved),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(pc_random_garbage),
        cmocka_unit_test(test_every_message_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
