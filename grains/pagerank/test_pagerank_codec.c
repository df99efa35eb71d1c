/* The PageRank grains' codec (grains/pagerank/pagerank_codec.c, through the
 * server's codec dispatch) against protobuf-c, the reference:
 * StartIterationCommand valid and mutated, RankAggregationResult read back,
 * and jobs (the key's upper half in, the reply's job out, refusals). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "gpubridge.pb-c.h"
#include "mutate.h"
#include "pb_wire.h"
#include "runtime.h" /* gb_grain_kind_of */
#include "pagerank.h"
#include "pagerank.pb-c.h"

#define GB_GRAIN_PR_SENDER gb_grain_kind_of("pagerank.sender")
#define GB_GRAIN_PR_AGGREGATOR gb_grain_kind_of("pagerank.aggregator")

/* Whether field 2 (damping) is in pb (a message protobuf-c took): proto3's
 * implicit presence hides it from protobuf-c, whose 0 may be absent (0.85)
 * or written. Read with the wire reader the codec uses, which tests/test_wire.c
 * checks against protobuf-c. */
static int damping_present(const uint8_t *pb, size_t len)
{
    const uint8_t *p = pb, *end = len ? pb + len : pb;
    gb_pb_field_t f;
    int seen = 0;
    while (gb_pb_next(&p, end, &f) > 0)
        seen |= f.num == 2;
    return seen;
}

/* Our StartIterationCommand decoding against protobuf-c plus the codec's
 * rules (damping in [0, 1], 0.85 when absent; dangling in [0, 2];
 * node_count in 1..2^32-1). */
static void start_differential(int kind, const uint8_t *pb, size_t len)
{
    unsigned char rec[256];
    uint32_t rec_len = 0;
    uint16_t slot_type = 0;
    char err[256] = "";
    const uint32_t mt = GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION;
    int st = gbi_codec_request(kind, mt, pb, len, rec, sizeof rec, &rec_len, &slot_type, err, sizeof err);
    Gpubridge__StartIterationCommand *m = gpubridge__start_iteration_command__unpack(NULL, len, pb);
    if (!m) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_MALFORMED);
        assert_non_null(strstr(err, "not a StartIterationCommand"));
        return;
    }
    if (!damping_present(pb, len))
        m->damping = 0.85;
    if (!(m->damping >= 0.0 && m->damping <= 1.0) || !(m->dangling_rank >= 0.0 && m->dangling_rank <= 2.0) ||
        m->node_count == 0 || m->node_count > UINT32_MAX) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_MALFORMED);
        /* The value at fault as sent, not rounded into the range. */
        double named = 0.0;
        if (!(m->damping >= 0.0 && m->damping <= 1.0)) {
            assert_int_equal(sscanf(err, "damping %lf is outside", &named), 1);
            assert_true(named == m->damping || isnan(m->damping));
        } else if (!(m->dangling_rank >= 0.0 && m->dangling_rank <= 2.0)) {
            assert_int_equal(sscanf(err, "dangling_rank %lf is outside", &named), 1);
            assert_true(named == m->dangling_rank || isnan(m->dangling_rank));
        }
        if (m->node_count > UINT32_MAX && m->damping >= 0.0 && m->damping <= 1.0 && m->dangling_rank >= 0.0 &&
            m->dangling_rank <= 2.0)
            assert_non_null(strstr(err, "node_count"));
    } else {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_OK);
        assert_int_equal(slot_type, GB_PR_MSG_START);
        assert_int_equal(rec_len, GB_PR_START_LEN);
        uint32_t it, flags, n, job;
        double d, dr;
        memcpy(&it, rec, 4);
        memcpy(&flags, rec + 4, 4);
        memcpy(&d, rec + 8, 8);
        memcpy(&dr, rec + 16, 8);
        memcpy(&n, rec + 24, 4);
        memcpy(&job, rec + 28, 4);
        assert_int_equal(job, 0); /* gbi_codec_request: key 0, job 0 */
        assert_int_equal(it, m->iteration);
        assert_int_equal(flags, (m->report_ranks ? GB_PR_START_RANKS : 0) | (m->next_contributions ? GB_PR_START_NEXT : 0));
        assert_memory_equal(&d, &m->damping, 8);
        assert_memory_equal(&dr, &m->dangling_rank, 8);
        assert_int_equal(n, m->node_count);
    }
    gpubridge__start_iteration_command__free_unpacked(m, NULL);
}

static void test_pagerank_start_codec(void **state)
{
    (void)state;
    Gpubridge__StartIterationCommand sc = GPUBRIDGE__START_ITERATION_COMMAND__INIT;
    uint8_t base[128], buf[160];
    const double damp[] = {0.85, 0.0, 1.0, 1.5, -0.1, 1.0000001, -1e-300},
                 dang[] = {0.0, 0.3, 2.0, 2.5, 2.0000001};
    for (int i = 0; i < 70; i++) {
        sc.iteration = (uint32_t)i * 0x1234567u;
        sc.damping = damp[i % 7]; /* 0.0: absent, 0.85 */
        sc.dangling_rank = dang[i % 5];
        sc.tolerance = i % 3 ? 1e-6 : 0.0;
        sc.node_count = i % 7 ? (uint64_t)i << (i % 40) : 0;
        sc.report_ranks = i % 2;
        sc.next_contributions = i % 3 == 1;
        size_t len = gpubridge__start_iteration_command__pack(&sc, base);
        start_differential(GB_GRAIN_PR_AGGREGATOR, base, len);
        start_differential(GB_GRAIN_PR_SENDER, base, len);
    }
    start_differential(GB_GRAIN_PR_SENDER, NULL, 0); /* all defaults: node_count 0 */
    /* Repeated fields (the last wins), a known field of the wrong wire type. */
    const uint8_t twice[] = {0x20, 0x05, 0x20, 0x07, 0x11, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f};
    start_differential(GB_GRAIN_PR_SENDER, twice, sizeof twice);
    const uint8_t wrong[] = {0x20, 0x05, 0x15, 0, 0, 0, 0};
    start_differential(GB_GRAIN_PR_SENDER, wrong, sizeof wrong);
    /* protobuf-c reads a bool from any wire type; a varint past 32 bits gives a uint32 its low bits */
    const uint8_t quirks[][12] = {
        {0x20, 0x05, 0x31, 0x80, 0, 0, 0, 0, 0, 0, 0x01}, /* report_ranks as fixed64 */
        {0x20, 0x05, 0x32, 0x01, 0x80},                   /* as bytes: only 0x80 inside */
        {0x20, 0x05, 0x35, 0x80, 0x80, 0x80, 0x80},       /* as fixed32 with no low bits */
        {0x20, 0x05, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
        {0x20, 0x05, 0x3a, 0x01, 0x02, 0x30, 0x00},       /* next_contributions as bytes, then report_ranks 0 */
        {0x20, 0x05, 0x38, 0x01, 0x38, 0x00, 0x30, 0x01}, /* next_contributions twice: the last wins */
    };
    const size_t quirk_len[] = {11, 5, 7, 12, 7, 8};
    for (size_t i = 0; i < sizeof quirk_len / sizeof *quirk_len; i++)
        start_differential(GB_GRAIN_PR_AGGREGATOR, quirks[i], quirk_len[i]);
    sc.damping = 0.85;
    sc.dangling_rank = 0.25;
    sc.node_count = 1000;
    for (int i = 0; i < 30000; i++) {
        sc.iteration = (uint32_t)i;
        sc.report_ranks = i % 3 == 0;
        sc.next_contributions = i % 5 < 2;
        size_t len = gpubridge__start_iteration_command__pack(&sc, base);
        memcpy(buf, base, len);
        len = mutate(buf, len, sizeof buf);
        start_differential(i % 2 ? GB_GRAIN_PR_SENDER : GB_GRAIN_PR_AGGREGATOR, buf, len);
    }
}

/* Our RankAggregationResult encoding, read back by protobuf-c. */
static void test_pagerank_result_codec(void **state)
{
    (void)state;
    const double vals[] = {0.0, -0.0, 1e-300, 0.5, 1.0, 3e10, 1.0 / 0.0};
    const uint64_t nodes[] = {0, 1, 300, 1ull << 40, UINT64_MAX};
    for (int sender = 0; sender < 2; sender++)
        for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
            for (size_t j = 0; j < sizeof vals / sizeof *vals; j++)
                for (size_t k = 0; k < sizeof nodes / sizeof *nodes; k++) {
                    unsigned char rec[GB_PR_REPLY_LEN];
                    /* the 4th field, an aggregator's next dangling rank: a third value */
                    const double next = vals[(i + j + k) % (sizeof vals / sizeof *vals)];
                    memcpy(rec, &vals[i], 8);
                    memcpy(rec + 8, &vals[j], 8);
                    memcpy(rec + 16, &nodes[k], 8);
                    memcpy(rec + 24, &next, 8);
                    gb_slot_hdr_t h = {0};
                    h.type = GB_PR_MSG_START;
                    h.len = GB_PR_REPLY_LEN;
                    uint8_t out[256];
                    size_t out_len = 0;
                    uint32_t mt = 0;
                    const int kind = sender ? GB_GRAIN_PR_SENDER : GB_GRAIN_PR_AGGREGATOR;
                    assert_int_equal(gbi_codec_reply(kind, &h, rec, out, sizeof out, &out_len, &mt), 0);
                    assert_int_equal(mt, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_AGGREGATION_RESULT);
                    Gpubridge__RankAggregationResult *r =
                        gpubridge__rank_aggregation_result__unpack(NULL, out_len, out);
                    assert_non_null(r);
                    if (sender) { /* the 4th field is not the sender's */
                        assert_true(r->dangling_rank == vals[i]);
                        assert_true(r->l1_delta == 0.0);
                    } else {
                        assert_true(r->l1_delta == vals[i]);
                        assert_true(r->dangling_rank == next);
                    }
                    assert_true(r->rank_sum == vals[j]);
                    assert_int_equal(r->nodes, nodes[k]);
                    gpubridge__rank_aggregation_result__free_unpacked(r, NULL);
                }
    /* A record of the wrong length is the grain's bug: no reply is made up. */
    gb_slot_hdr_t h = {0};
    h.type = GB_PR_MSG_START;
    h.len = GB_PR_REPLY_LEN - 8;
    uint8_t out[256], rec[GB_PR_REPLY_LEN] = {0};
    size_t out_len;
    uint32_t mt;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_PR_SENDER, &h, rec, out, sizeof out, &out_len, &mt), -1);
}

/* PageRank jobs in the codec: the key's upper half goes into the record, the
 * grain's aux comes back as the reply's job; loads answer with message type
 * 0 (empty payload); a refusal's aux becomes a sentence. */
static void test_pagerank_job_codec(void **state)
{
    (void)state;
    Gpubridge__PartitionInit pi = GPUBRIDGE__PARTITION_INIT__INIT;
    pi.first_node = 5;
    pi.node_count = 7;
    uint8_t pb[64], out[256];
    unsigned char rec[64];
    const size_t len = gpubridge__partition_init__pack(&pi, pb);
    uint32_t rec_len = 0, job = 0, mt = 99;
    uint16_t slot_type = 0;
    char err[256];
    assert_int_equal(gbi_codec_request_key(GB_GRAIN_PR_AGGREGATOR, 0xabcd1234ull << 32 | 3,
                                           GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT,
                                           pb, len, rec, sizeof rec, &rec_len, &slot_type, err, sizeof err),
                     GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(rec_len, GB_PR_PAIR_LEN);
    memcpy(&job, rec + gb_pr_job_at(slot_type), 4);
    assert_int_equal(job, 0xabcd1234u);
    /* GraphInit's counts are checked here, each named. */
    Gpubridge__GraphInit gi = GPUBRIDGE__GRAPH_INIT__INIT;
    gi.node_count = 10;
    gi.edge_count = UINT64_MAX;
    size_t gl = gpubridge__graph_init__pack(&gi, pb);
    assert_int_equal(gbi_codec_request_key(GB_GRAIN_PR_SENDER, 1, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT,
                                           pb, gl, rec, sizeof rec, &rec_len, &slot_type, err, sizeof err),
                     GPUBRIDGE__STATUS__STATUS_MALFORMED);
    assert_non_null(strstr(err, "edge_count 18446744073709551615 is outside"));
    gi.edge_count = 1ull << 40;
    gl = gpubridge__graph_init__pack(&gi, pb);
    assert_int_equal(gbi_codec_request_key(GB_GRAIN_PR_SENDER, 1, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_GRAPH_INIT,
                                           pb, gl, rec, sizeof rec, &rec_len, &slot_type, err, sizeof err),
                     GPUBRIDGE__STATUS__STATUS_OK);
    gb_slot_hdr_t h = {0};
    h.type = GB_PR_MSG_PARTITION_INIT;
    size_t out_len = 1;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_PR_AGGREGATOR, &h, rec, out, sizeof out, &out_len, &mt), 0);
    assert_int_equal(out_len, 0);
    assert_int_equal(mt, 0);
    /* START's reply carries the job */
    unsigned char res[GB_PR_REPLY_LEN] = {0};
    h.type = GB_PR_MSG_START;
    h.len = GB_PR_REPLY_LEN;
    h.aux = 0xabcd1234u;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_PR_AGGREGATOR, &h, res, out, sizeof out, &out_len, &mt), 0);
    Gpubridge__RankAggregationResult *r = gpubridge__rank_aggregation_result__unpack(NULL, out_len, out);
    assert_non_null(r);
    assert_int_equal(r->job, 0xabcd1234u);
    gpubridge__rank_aggregation_result__free_unpacked(r, NULL);
    /* refusals */
    char buf[320];
    h.status = GB_SLOT_HANDLER_ERROR;
    h.aux = GB_PR_E_ARENA_SMALL | 630u << 8;
    const char *why = gbi_codec_error(GB_GRAIN_PR_SENDER, &h, buf, sizeof buf);
    assert_non_null(why);
    assert_non_null(strstr(why, "needs a PageRank arena of 630 MiB"));
    assert_non_null(strstr(why, "arena_mb in the bridge's config to at least 630"));
    assert_non_null(strstr(why, "arena_mb"));
    h.aux = GB_PR_E_RANGE;
    assert_non_null(gbi_codec_error(GB_GRAIN_PR_AGGREGATOR, &h, buf, sizeof buf));
    h.aux = 0;
    assert_null(gbi_codec_error(GB_GRAIN_PR_AGGREGATOR, &h, buf, sizeof buf));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pagerank_job_codec),
        cmocka_unit_test(test_pagerank_start_codec),
        cmocka_unit_test(test_pagerank_result_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
