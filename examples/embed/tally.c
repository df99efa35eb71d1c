/* The embed.tally grain type (tally.h). Compiled by nvcc when the build has
 * CUDA (its ring kernels for persistent and relaunch modes), as C otherwise
 * (cpu mode only). */
#include <string.h>

#include "tally.h"

/* Runs in the type's ring kernel on the GPU, or on a host thread in cpu
 * mode; one key's messages one at a time, in order. */
GB_HD uint16_t tally_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                uint32_t *aux)
{
    (void)ctx;
    tally_state_t *s = (tally_state_t *)state;
    *out_len = 0;
    if (type != TALLY_ADD && type != TALLY_GET)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if (out_cap < sizeof(tally_reply_t))
        return GB_SLOT_TOO_LARGE;
    if (type == TALLY_ADD) {
        int64_t amount;
        if (in_len != sizeof amount) {
            *aux = TALLY_E_RECORD;
            return GB_SLOT_HANDLER_ERROR;
        }
        memcpy(&amount, in, sizeof amount);
        s->total += amount;
        s->count++;
    }
    memcpy(out, s, sizeof(tally_reply_t));
    *out_len = sizeof(tally_reply_t);
    return GB_SLOT_OK;
}

static const gb_grain_msg_t tally_msgs[] = {{TALLY_ADD, "Add"}, {TALLY_GET, "Get"}};

GB_DEFINE_GRAIN(embed_tally, "embed.tally", sizeof(tally_state_t), 0, tally_on_message, tally_msgs, NULL)
