/* The built-in grain types' host hooks (grains/<type>/<type>_codec.c),
 * which their grain definitions (grains/<type>/<type>_grain.c) name. */
#ifndef GB_BUILTIN_CODECS_H
#define GB_BUILTIN_CODECS_H

#include "gpubridge/grain.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const gb_grain_codec_t gbi_codec_echo, gbi_codec_vecadd, gbi_codec_pr_sender, gbi_codec_pr_aggregator;
size_t gbi_codec_echo_limits(uint32_t rec_cap, uint32_t payload_max, gb_grain_limit_t *out, size_t max);
size_t gbi_codec_vecadd_limits(uint32_t rec_cap, uint32_t payload_max, gb_grain_limit_t *out, size_t max);
size_t gbi_codec_pr_sender_limits(uint32_t rec_cap, uint32_t payload_max, gb_grain_limit_t *out, size_t max);
size_t gbi_codec_pr_aggregator_limits(uint32_t rec_cap, uint32_t payload_max, gb_grain_limit_t *out, size_t max);
const char *gbi_codec_pr_sender_error(const gb_slot_hdr_t *hdr, char *buf, size_t cap);
const char *gbi_codec_pr_aggregator_error(const gb_slot_hdr_t *hdr, char *buf, size_t cap);
/* The largest replies (gb_grain_hooks_t.reply_max). */
uint32_t gbi_vecadd_reply_max(uint16_t type, const void *rec, uint32_t len);
uint32_t gbi_pr_reply_max(uint16_t type, const void *rec, uint32_t len);
/* The PageRank arena's size, for the codec's checks (the engine sets it). */
void gbi_codec_pr_set_arena(uint64_t bytes);

static inline uint32_t gbi_min32(uint64_t a, uint64_t b) { return (uint32_t)(a < b ? a : b); }
/* A reply of the record's bytes in one field: tag and length prefixes, and
 * echo's grain_count. */
static inline size_t gbi_plain_reply_bound(uint32_t rec_len) { return (size_t)rec_len + 32; }

#ifdef __cplusplus
}
#endif
#endif
