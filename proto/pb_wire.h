/* Protobuf wire format by hand, for the hot paths that must not allocate:
 * the bridge decodes ClientFrames and encodes ServerFrames with it
 * (server/wire.c), the client library builds Batch frames and reads reply
 * frames with it (client/batch.c, client/transport.c). protobuf-c stays the
 * codec for everything else (control messages, PageRank records, tests).
 *
 * Reading follows protobuf's rules as protobuf-c applies them: fields in any
 * order, unknown fields skipped, the last value of a repeated scalar field
 * wins; a truncated value, a varint longer than 10 bytes, a key longer than
 * 5, field number 0 and wire types 3, 4, 6, 7 (groups, reserved) make the
 * input malformed.
 * Header-only: the bridge and the client are separate libraries. */
#ifndef GB_PB_WIRE_H
#define GB_PB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The reader is a few instructions per field once inlined into a caller's
 * loop (a call per field cost a quarter of the bridge thread at batch 64). */
#if defined(__GNUC__)
#define GB_PB_INLINE static inline __attribute__((always_inline))
#else
#define GB_PB_INLINE static inline
#endif

enum { GB_PB_VARINT = 0, GB_PB_I64 = 1, GB_PB_LEN = 2, GB_PB_I32 = 5 };

/* Bytes of v as a varint (1..10). */
static inline size_t gb_pb_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes v as a varint at p; returns the bytes written. */
static inline size_t gb_pb_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Writes the key of field num with wire type wt; returns the bytes written. */
static inline size_t gb_pb_key_put(uint8_t *p, uint32_t num, uint32_t wt)
{
    return gb_pb_varint_put(p, ((uint64_t)num << 3) | wt);
}

/* Reads a varint from [*pp, end) into *v and advances *pp. Returns 0, or -1
 * when it is truncated or longer than 10 bytes. */
GB_PB_INLINE int gb_pb_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t x = 0;
    if (p < end && *p < 0x80) { /* keys, small ints and lengths: one byte */
        *v = *p;
        *pp = p + 1;
        return 0;
    }
    for (unsigned shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/* One field as read: its number, wire type, and value (varints and fixed
 * values in v; length-delimited bytes as p/len, pointing into the input). */
typedef struct gb_pb_field {
    uint32_t num;
    uint32_t wt;
    uint64_t v;
    const uint8_t *p;
    size_t len;
} gb_pb_field_t;

/* Reads the next field from [*pp, end). Returns 1 with *f filled, 0 at the
 * end of the input, -1 when the input is malformed. */
GB_PB_INLINE int gb_pb_next(const uint8_t **pp, const uint8_t *end, gb_pb_field_t *f)
{
    uint64_t key;
    const uint8_t *start = *pp;
    if (*pp >= end)
        return 0;
    /* A key is at most 5 bytes (protobuf-c refuses longer ones). */
    if (gb_pb_varint_get(pp, end, &key) != 0 || *pp - start > 5 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return -1;
    f->num = (uint32_t)(key >> 3);
    f->wt = (uint32_t)(key & 7);
    f->v = 0;
    f->p = NULL;
    f->len = 0;
    switch (f->wt) {
    case GB_PB_VARINT:
        return gb_pb_varint_get(pp, end, &f->v) == 0 ? 1 : -1;
    case GB_PB_I64:
        if (end - *pp < 8)
            return -1;
        memcpy(&f->v, *pp, 8); /* little-endian hosts only, as the ring layout */
        *pp += 8;
        return 1;
    case GB_PB_I32: {
        uint32_t w;
        if (end - *pp < 4)
            return -1;
        memcpy(&w, *pp, 4);
        f->v = w;
        *pp += 4;
        return 1;
    }
    case GB_PB_LEN: {
        uint64_t n;
        if (gb_pb_varint_get(pp, end, &n) != 0 || n > (uint64_t)(end - *pp))
            return -1;
        f->p = *pp;
        f->len = (size_t)n;
        *pp += n;
        return 1;
    }
    default:
        return -1;
    }
}

#endif
