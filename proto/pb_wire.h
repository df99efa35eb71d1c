/* Protobuf wire-format varints, for the two places that write encodings by
 * hand instead of through protobuf-c: the bridge's echo reply (one appended
 * field, bridge/codec.c) and the client's Batch frames built envelope by
 * envelope (client/batch.c). Header-only: the bridge and the client library
 * are separate libraries. */
#ifndef GB_PB_WIRE_H
#define GB_PB_WIRE_H

#include <stddef.h>
#include <stdint.h>

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

#endif
