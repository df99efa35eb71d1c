/* The echo grain type (echo.h), defined as any grain type is. */
#include "gpubridge/grain.h"

#include "builtin_codecs.h"
#include "echo.h"

GB_HD uint16_t gb_echo_handler(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                               uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx;
    return gb_echo_on_message(state, type, in, in_len, out, out_cap, out_len, aux);
}

static const gb_grain_msg_t echo_msgs[] = {{GB_ECHO_MSG_ECHO, "EchoRequest"}};
static const gb_grain_hooks_t echo_hooks = {&gbi_codec_echo, NULL, NULL, NULL};

GB_DEFINE_GRAIN(echo, "echo", GB_ECHO_STATE_SIZE, 0, gb_echo_handler, echo_msgs, &echo_hooks)
