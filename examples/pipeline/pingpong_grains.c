/* pingpong.ping and pingpong.pong: a request {uint32 hops} to either bounces
 * between the two, each handler forwarding it to the other with one hop
 * fewer, until a grain finds it at 0 and replies {uint32 hops made} to the
 * caller. bench/bench_hop.c times it: (time of N hops - time of 0) / N is
 * the cost of one grain-to-grain hop. */
#include <string.h>

#include "gpubridge/grain.h"
#include "pipeline.h"

GB_HD uint16_t pingpong_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                   uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                   uint32_t *aux)
{
    uint64_t *made = (uint64_t *)state; /* hops this grain saw: {left, made} travel in the record */
    uint32_t left, hops = 0;
    *out_len = 0;
    if (type != PINGPONG_MSG_HOPS)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if ((in_len != 4 && in_len != 8) || out_cap < 8)
        return GB_SLOT_TOO_LARGE;
    memcpy(&left, in, 4);
    if (in_len == 8)
        memcpy(&hops, in + 4, 4);
    *made += 1;
    if (left == 0) {
        *aux = hops;
        memcpy(out, &hops, 4);
        *out_len = 4;
        return GB_SLOT_OK;
    }
    const uint32_t rec[2] = {left - 1, hops + 1};
    return gb_grain_forward(ctx, PINGPONG_TO_OTHER, gb_grain_self_key(ctx), PINGPONG_MSG_HOPS, rec, 8);
}

static const gb_grain_msg_t pingpong_msgs[] = {{PINGPONG_MSG_HOPS, "Hops"}};
static const char *const ping_targets[] = {"pingpong.pong"};
static const char *const pong_targets[] = {"pingpong.ping"};

GB_DEFINE_GRAIN_TARGETS(pingpong_ping, "pingpong.ping", 8, 0, pingpong_on_message, pingpong_msgs, NULL, ping_targets)
GB_DEFINE_GRAIN_TARGETS(pingpong_pong, "pingpong.pong", 8, 0, pingpong_on_message, pingpong_msgs, NULL, pong_targets)
