/* The vecadd grain type (vecadd.h), defined as any grain type is. */
#include "gpubridge/grain.h"

#include "builtin_codecs.h"
#include "vecadd.h"

GB_HD uint16_t gb_vecadd_handler(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                 uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                 uint32_t *aux)
{
    (void)ctx;
    return gb_vecadd_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
}

static const gb_grain_msg_t vecadd_msgs[] = {{GB_VECADD_MSG_REQUEST, "VectorAddRequest"}};
static const gb_grain_hooks_t vecadd_hooks = {&gbi_codec_vecadd, NULL, gbi_vecadd_reply_max, NULL};

GB_DEFINE_GRAIN(vecadd, "vecadd", GB_VECADD_STATE_SIZE, 0, gb_vecadd_handler, vecadd_msgs, &vecadd_hooks)
