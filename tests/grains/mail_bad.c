/* A grain library whose type sends to a type nobody defines: the bridge
 * refuses it at start (test_grain_libs.sh). */
#include "gpubridge/grain.h"

GB_HD uint16_t bad_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                              uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)state, (void)type, (void)in, (void)in_len, (void)out, (void)out_cap, (void)aux;
    *out_len = 0;
    return gb_grain_send(ctx, 0, 1, 1, NULL, 0);
}

static const gb_grain_msg_t bad_msgs[] = {{1, "Any"}};
static const char *const bad_targets[] = {"no.such.type"};
GB_DEFINE_GRAIN_TARGETS(mt_bad, "mt.bad", 8, 0, bad_on_message, bad_msgs, NULL, bad_targets)
