/* Grain types: the handlers that run inside ring kernels and cpu workers.
 *
 * A handler is plain C marked GB_HD, so one source serves host and device:
 *
 *   uint16_t on_message(void *state, uint16_t type,
 *                       const unsigned char *in, uint32_t in_len,
 *                       unsigned char *out, uint32_t out_cap,
 *                       uint32_t *out_len, uint32_t *aux);
 *
 * (the dispatcher also passes a gb_grain_ctx_t: the arena and the team, team.h)
 *
 * `state` is this grain's (type, key) activation, zeroed on first use (virtual
 * activation, as in Orleans). The handler returns a gb_slot_status; the payload
 * it writes to `out` becomes the reply. Payloads are compact binary records
 * (the bridge decodes protobuf on the host): the kernel never parses protobuf.
 * Each grain's record layout is documented in its header. */
#ifndef GB_GRAIN_H
#define GB_GRAIN_H

#include "ring.h"

typedef enum gb_grain_kind {
    GB_GRAIN_NONE = 0,
    GB_GRAIN_ECHO = 1,
    GB_GRAIN_VECADD = 2,
    GB_GRAIN_PR_SENDER = 3,     /* pagerank.sender (team grain) */
    GB_GRAIN_PR_AGGREGATOR = 4, /* pagerank.aggregator (team grain) */
} gb_grain_kind;

#include "echo.h"
#include "pagerank.h"
#include "team.h"
#include "vecadd.h"

/* Team grains run each message on a team of threads (a GPU block: the team
 * kernel) and use the family's arena; see team.h. */
GB_HD int gb_grain_is_team(int kind) { return kind == GB_GRAIN_PR_SENDER || kind == GB_GRAIN_PR_AGGREGATOR; }

/* State bytes of one activation of kind (a multiple of 8). */
GB_HD uint32_t gb_grain_state_size(int kind)
{
    switch (kind) {
    case GB_GRAIN_ECHO: return GB_ECHO_STATE_SIZE;
    case GB_GRAIN_VECADD: return GB_VECADD_STATE_SIZE;
    case GB_GRAIN_PR_SENDER:
    case GB_GRAIN_PR_AGGREGATOR: return GB_PR_STATE_SIZE;
    default: return 8;
    }
}

/* Runs the handler of kind. The switch is uniform across a kernel (one kind per
 * ring kernel), so it costs no divergence. */
GB_HD uint16_t gb_grain_on_message(int kind, const gb_grain_ctx_t *ctx, void *state, uint16_t type,
                                   const unsigned char *in, uint32_t in_len,
                                   unsigned char *out, uint32_t out_cap,
                                   uint32_t *out_len, uint32_t *aux)
{
    switch (kind) {
    case GB_GRAIN_ECHO:
        return gb_echo_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
    case GB_GRAIN_VECADD:
        return gb_vecadd_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
    case GB_GRAIN_PR_SENDER:
    case GB_GRAIN_PR_AGGREGATOR:
        return gb_pr_on_message(ctx, kind == GB_GRAIN_PR_SENDER, state, type, in, in_len, out, out_cap, out_len,
                                aux);
    default:
        *out_len = 0;
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    }
}

#endif
