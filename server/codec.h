/* Translation between a grain's protobuf messages (what clients send) and the
 * compact binary records its handler reads and writes in ring slots. The
 * kernel never parses protobuf: the bridge does it here, on the host. */
#ifndef GB_CODEC_H
#define GB_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge.pb-c.h"
#include "gpubridge/grain.h"
#include "gpubridge/ring.h"

/* kind: a grain type's handle (grain_registry.h). Each function goes through
 * its descriptor's codec; a type without one has raw payloads (the bytes are
 * the record, the message type the slot's). */

/* Encodes request payload (protobuf bytes of message_type) for grain kind into
 * rec (cap bytes). Returns a Gpubridge__Status (STATUS_OK on success) and, on
 * error, a sentence in err. *slot_type is the ring message type to use. */
int gbi_codec_request(int kind, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                      uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen);
/* The same for the envelope's key (a grain's codec may read it: a team's
 * records carry their job in its upper half); gbi_codec_request is this with key 0. */
int gbi_codec_request_key(int kind, uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len,
                          unsigned char *rec, uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err,
                          size_t errlen);

/* Decodes a reply record into the grain's protobuf reply; writes the bytes
 * into out (cap bytes), sets *out_len and *message_type. Returns 0, or -1 if
 * out is too small or the record is malformed (an internal error). */
int gbi_codec_reply(int kind, const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap,
                    size_t *out_len, uint32_t *message_type);

/* A grain-specific text for an error reply (status hdr->status, detail in
 * hdr->aux), written into buf; NULL when the grain gives none. */
const char *gbi_codec_error(int kind, const gb_slot_hdr_t *hdr, char *buf, size_t cap);

/* Largest protobuf reply for a record of rec_len bytes (for buffer sizing). */
size_t gbi_codec_reply_bound(int kind, uint32_t rec_len);

/* One request message type of a grain type and the most it accepts. */
typedef gb_grain_limit_t gbi_msg_limit_t;

/* The request types of grain kind, into out (max entries); returns how many
 * there are (codec_limits.c). cap: record bytes per slot; large_max: the
 * largest record (and reply) out of line, gb_rk_large_max; type_len: bytes
 * of the grain type's name (the frame carries it). */
size_t gbi_codec_limits(int kind, uint32_t cap, uint32_t large_max, uint32_t max_message_size, uint32_t type_len,
                        gbi_msg_limit_t *out, size_t max);

/* The largest Envelope.payload of a ClientFrame of one envelope that fits
 * max_message_size, whatever its correlation id and key, for a grain type
 * name of type_len bytes and that message type. */
uint32_t gbi_frame_payload_max(uint32_t max_message_size, uint32_t type_len, uint32_t message_type);

#endif
