/* The bridge's side of the wire (proto/gpubridge.proto) on the hot path:
 * ClientFrames decoded into envelope views without allocating per envelope,
 * and ServerFrames encoded straight into the outbox (server_reply.c). Built on
 * proto/pb_wire.h; protobuf-c still decodes the rare parts (Control).
 *
 * A gbi_env_t points into the frame's bytes: it lives as long as they do.
 * A frame that must wait for ring room is copied with gbi_frame_hold. */
#ifndef GB_WIRE_H
#define GB_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* One Envelope, as views into its frame's bytes. Unset fields read as
 * protobuf defaults (0, empty); has_grain / has_control tell set from empty. */
typedef struct gbi_env {
    uint64_t corr;
    uint64_t key;          /* grain.key */
    uint32_t kind;         /* Gpubridge__Kind; any number (open enum) */
    uint64_t message_type; /* as sent: past 32 bits is no message type (server_feed.c) */
    uint8_t has_grain;
    uint8_t has_control;
    uint32_t type_len;
    const uint8_t *type;   /* grain.type, not NUL-terminated */
    const uint8_t *payload;
    size_t payload_len;
    const uint8_t *control; /* an encoded Control */
    size_t control_len;
} gbi_env_t;

/* A decoded ClientFrame: its envelopes (one for the envelope body, any number
 * for a batch, none for an empty batch). */
typedef struct gbi_frame {
    const uint8_t *bytes;
    size_t size;
    gbi_env_t *envs;
    size_t n;
    size_t cap;    /* envs allocated (a decode scratch frame grows it) */
    int has_body;  /* the frame set envelope or batch */
} gbi_frame_t;

/* Decodes size bytes at data into f, whose envs array is reused and grown
 * (start from a zeroed frame; release with gbi_frame_fini). Returns 0, or -1
 * with a sentence in err: malformed protobuf, or out of memory. Decoding
 * follows protobuf-c: the last envelope/batch field replaces any earlier one,
 * a repeated grain field merges. Differences: an Envelope with two
 * `control` fields is refused; in a repeated grain field, a key written as 0
 * overrides an earlier key (protobuf-c's merge keeps the earlier non-zero
 * one, as it cannot tell a written 0 from an absent one). */
int gbi_frame_decode(gbi_frame_t *f, const uint8_t *data, size_t size, char *err, size_t errlen);
void gbi_frame_fini(gbi_frame_t *f);

/* A copy of envelopes [from, n) of f and of the bytes they point into, in one
 * allocation (free it with free); NULL when out of memory. */
gbi_frame_t *gbi_frame_hold(const gbi_frame_t *f, size_t from);

/* Writes name (len bytes, untrusted) for an error message: printable ASCII
 * as is, anything else as \xNN, at most 64 bytes of it. Always valid UTF-8. */
void gbi_name_print(char *out, size_t cap, const uint8_t *name, size_t len);

#endif
