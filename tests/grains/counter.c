/* A grain library for the loader's tests (test_grain_libs.sh): one cpu-only
 * type, test.counter (raw payloads). Message 1 adds the request's uint64 to
 * the key's count and replies with the count; message 2 fails with aux 7.
 * With GB_TEST_MANY_MSGS it declares twenty request types (3..20 act as 1),
 * all of which the Limits reply lists, and the C client keeps. */
#include <string.h>

#include "gpubridge/grain.h"

GB_HD uint16_t counter_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                  uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                  uint32_t *aux)
{
    (void)ctx;
    uint64_t *count = (uint64_t *)state, add = 0;
    *out_len = 0;
    if (type == 2) {
        *aux = 7;
        return GB_SLOT_HANDLER_ERROR;
    }
    if (in_len != 8 || out_cap < 8)
        return GB_SLOT_HANDLER_ERROR;
    memcpy(&add, in, 8);
    *count += add;
    memcpy(out, count, 8);
    *out_len = 8;
    return GB_SLOT_OK;
}

#ifdef GB_TEST_MANY_MSGS
static const gb_grain_msg_t counter_msgs[] = {
    {1, "Add"}, {2, "Fail"}, {3, "M3"},   {4, "M4"},   {5, "M5"},   {6, "M6"},   {7, "M7"},
    {8, "M8"},  {9, "M9"},   {10, "M10"}, {11, "M11"}, {12, "M12"}, {13, "M13"}, {14, "M14"},
    {15, "M15"}, {16, "M16"}, {17, "M17"}, {18, "M18"}, {19, "M19"}, {20, "M20"}};
#else
static const gb_grain_msg_t counter_msgs[] = {{1, "Add"}, {2, "Fail"}};
#endif
GB_DEFINE_GRAIN(test_counter, GB_TEST_TYPE_NAME, sizeof(uint64_t), 0, counter_on_message, counter_msgs, NULL)
