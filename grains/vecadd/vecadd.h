/* The vecadd grain: the message-passing test's VectorAdd.
 *
 * Message GB_VECADD_MSG_REQUEST (1), record (little-endian, 4-byte aligned):
 *   uint32 op   (GB_VECADD_ADD, _SUB, _MUL, _DIV)
 *   uint32 n    (elements per vector)
 *   float  a[n]
 *   float  b[n]
 * Reply: float result[n] with result[i] = a[i] op b[i] (IEEE semantics: x/0 is
 * inf or nan, as the seed's test expects from a GPU). Reply aux = this grain's
 * request count. Errors: a length that does not match n, or an unknown op, give
 * GB_SLOT_HANDLER_ERROR. A 64-byte slot (32-byte header) carries n = 3.
 * State: uint64 count. */
#ifndef GB_VECADD_H
#define GB_VECADD_H

#include <string.h>

#include "gpubridge/ring.h"

#define GB_VECADD_STATE_SIZE 8
#define GB_VECADD_HDR 8 /* op + n */
enum { GB_VECADD_MSG_REQUEST = 1 };
enum { GB_VECADD_ADD = 0, GB_VECADD_SUB = 1, GB_VECADD_MUL = 2, GB_VECADD_DIV = 3 };

/* Bytes of a request record with n elements per vector. */
GB_HD uint32_t gb_vecadd_request_len(uint32_t n) { return GB_VECADD_HDR + 8u * n; }

GB_HD uint16_t gb_vecadd_on_message(void *state, uint16_t type,
                                    const unsigned char *in, uint32_t in_len,
                                    unsigned char *out, uint32_t out_cap,
                                    uint32_t *out_len, uint32_t *aux)
{
    in = (const unsigned char *)GB_ALIGNED(in);
    out = (unsigned char *)GB_ALIGNED(out);
    *out_len = 0;
    if (type != GB_VECADD_MSG_REQUEST)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if (in_len < GB_VECADD_HDR)
        return GB_SLOT_HANDLER_ERROR;
    uint32_t op, n;
    memcpy(&op, in, 4);
    memcpy(&n, in + 4, 4);
    /* n is checked against in_len before any multiplication can overflow. */
    if (n > (in_len - GB_VECADD_HDR) / 8 || in_len != gb_vecadd_request_len(n) || op > GB_VECADD_DIV)
        return GB_SLOT_HANDLER_ERROR;
    if (4u * n > out_cap)
        return GB_SLOT_TOO_LARGE;
    /* Typed access (the payloads have no declared type: ring slots or
     * shared-memory copies); the compiler keeps the words as words. */
    const float *a = (const float *)(in + GB_VECADD_HDR), *b = a + n;
    float *r = (float *)out;
    /* One loop per op: no branch inside the loop. */
    switch (op) {
    case GB_VECADD_ADD:
        for (uint32_t i = 0; i < n; i++)
            r[i] = a[i] + b[i];
        break;
    case GB_VECADD_SUB:
        for (uint32_t i = 0; i < n; i++)
            r[i] = a[i] - b[i];
        break;
    case GB_VECADD_MUL:
        for (uint32_t i = 0; i < n; i++)
            r[i] = a[i] * b[i];
        break;
    default:
        for (uint32_t i = 0; i < n; i++)
            r[i] = a[i] / b[i];
        break;
    }
    *out_len = 4u * n;
    uint64_t *count = (uint64_t *)state;
    *count += 1;
    *aux = (uint32_t)*count;
    return GB_SLOT_OK;
}

#endif
