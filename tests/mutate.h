/* Deterministic random mutations of an encoding (byte flips, inserts,
 * deletions), for the differential tests of the wire (tests/test_wire.c) and
 * of the built-in grains' codecs (grains/<name>/test_*_codec.c). */
#ifndef GB_TEST_MUTATE_H
#define GB_TEST_MUTATE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static inline uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)g_rng;
}

static inline size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    int edits = 1 + (int)(rnd() % 3);
    for (int e = 0; e < edits && len; e++) {
        size_t at = rnd() % len;
        switch (rnd() % 4) {
        case 0: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: buf[at] = (uint8_t)rnd(); break;
        case 2:
            if (len < cap) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = (uint8_t)rnd();
                len++;
            }
            break;
        default:
            memmove(buf + at, buf + at + 1, len - at - 1);
            len--;
            break;
        }
    }
    return len;
}

#endif
