/* The PageRank grain types (pagerank.h): pagerank.sender and
 * pagerank.aggregator, team grains sharing the family's arena, defined as
 * any grain type is. */
#include "gpubridge/grain.h"

#include "builtin_codecs.h"
#include "pagerank.h"

/* A START (every iteration's message to every partition) is copied with its
 * header in the team kernel reader's first round (GB_SNAPSHOT bytes); a
 * longer one costs each slot a PCIe round trip in the reader, one slot after
 * another. */
GB_STATIC_ASSERT(GB_SLOT_HDR_SIZE + GB_PR_START_LEN <= GB_SNAPSHOT, "a START fits the reader's first round");

GB_HD uint16_t gb_pr_sender_handler(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                    uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                    uint32_t *aux)
{
    return gb_pr_on_message(ctx, 1, state, type, in, in_len, out, out_cap, out_len, aux);
}

GB_HD uint16_t gb_pr_aggregator_handler(const gb_grain_ctx_t *ctx, void *state, uint16_t type,
                                        const unsigned char *in, uint32_t in_len, unsigned char *out,
                                        uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    return gb_pr_on_message(ctx, 0, state, type, in, in_len, out, out_cap, out_len, aux);
}

static const gb_grain_msg_t sender_msgs[] = {
    {GB_PR_MSG_START, "StartIterationCommand"}, {GB_PR_MSG_GRAPH_INIT, "GraphInit"},
    {GB_PR_MSG_PARTITION_INIT, "PartitionInit"}, {GB_PR_MSG_OUT_DEGREES, "OutDegreeChunk"},
    {GB_PR_MSG_JOB_END, "JobEnd"}};
static const gb_grain_msg_t aggregator_msgs[] = {
    {GB_PR_MSG_START, "StartIterationCommand"}, {GB_PR_MSG_PARTITION_INIT, "PartitionInit"},
    {GB_PR_MSG_IN_OFFSETS, "InOffsetChunk"}, {GB_PR_MSG_IN_EDGES, "InEdgeChunk"},
    {GB_PR_MSG_RANK_QUERY, "RankQuery"}};
static const gb_grain_hooks_t sender_hooks = {&gbi_codec_pr_sender, gbi_codec_pr_sender_error, gbi_pr_reply_max,
                                              gbi_codec_pr_set_arena};
static const gb_grain_hooks_t aggregator_hooks = {&gbi_codec_pr_aggregator, gbi_codec_pr_aggregator_error,
                                                  gbi_pr_reply_max, gbi_codec_pr_set_arena};

GB_DEFINE_GRAIN(pagerank_sender, "pagerank.sender", GB_PR_STATE_SIZE, GB_GRAIN_TEAM | GB_GRAIN_DEVICES,
                gb_pr_sender_handler, sender_msgs, &sender_hooks)
GB_DEFINE_GRAIN(pagerank_aggregator, "pagerank.aggregator", GB_PR_STATE_SIZE, GB_GRAIN_TEAM | GB_GRAIN_DEVICES,
                gb_pr_aggregator_handler, aggregator_msgs, &aggregator_hooks)
