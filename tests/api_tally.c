/* test.tally, the grain type of test_runtime_api.c: compiled by nvcc when the
 * build has CUDA (its ring kernels for the GPU runs), as C otherwise.
 * Message 1 adds an int64 to the key's total (aux 3 when the record is not
 * one int64); message 2 reads it. Reply: {int64 total, int64 adds}. */
#include <string.h>

#include <gpubridge/grain.h>

GB_HD uint16_t tally(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in, uint32_t in_len,
                     unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx;
    int64_t *s = (int64_t *)state, v = 0;
    *out_len = 0;
    if (type == 1) {
        if (in_len != 8) {
            *aux = 3;
            return GB_SLOT_HANDLER_ERROR;
        }
        memcpy(&v, in, 8);
        s[0] += v;
        s[1]++;
    }
    if (out_cap < 16)
        return GB_SLOT_TOO_LARGE;
    memcpy(out, s, 16);
    *out_len = 16;
    return GB_SLOT_OK;
}

static const gb_grain_msg_t tally_msgs[] = {{1, "Add"}, {2, "Get"}};
GB_DEFINE_GRAIN(test_tally, "test.tally", 16, 0, tally, tally_msgs, NULL)
