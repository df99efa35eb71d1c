/* Codec of the PageRank grains (used by codec.c): pagerank.proto messages to
 * and from the records of grains/pagerank/pagerank.h. Same contracts as codec.h. */
#ifndef GB_CODEC_PAGERANK_H
#define GB_CODEC_PAGERANK_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge.pb-c.h"
#include "gpubridge/ring.h"

/* key: the envelope's; its upper 32 bits are the job (pagerank_layout.h). */
int gbi_codec_pr_request(int sender, uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len,
                         unsigned char *rec, uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err,
                         size_t errlen);
int gbi_codec_pr_reply(int sender, const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                       size_t *out_len, uint32_t *message_type);
size_t gbi_codec_pr_reply_bound(uint32_t rec_len);
/* The text of a GB_SLOT_HANDLER_ERROR reply (its aux holds a gb_pr_err),
 * written into buf; NULL when aux names no reason. */
const char *gbi_codec_pr_error(int sender, const gb_slot_hdr_t *hdr, char *buf, size_t cap);
/* The arena's size, for the messages above (its hooks' set_arena). */
void gbi_codec_pr_set_arena(uint64_t bytes);
/* Most ranks one RankQuery may ask for with cap payload bytes per slot. */
size_t gbi_codec_pr_max_query(uint32_t cap);

#endif
