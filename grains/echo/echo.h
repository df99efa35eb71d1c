/* The echo grain: the latency probe. It returns its request payload unchanged
 * and counts the messages its activation has handled.
 *
 * Message GB_ECHO_MSG_ECHO (1): any payload. Reply: the same bytes; reply aux =
 * this activation's message count including this one (1, 2, 3, ...), which lets
 * a client check turn order: the n-th message sent to a key must see aux == n.
 * State: uint64 count. */
#ifndef GB_ECHO_H
#define GB_ECHO_H

#include <string.h>

#include "gpubridge/ring.h"

#define GB_ECHO_STATE_SIZE 8
enum { GB_ECHO_MSG_ECHO = 1 };

GB_HD uint16_t gb_echo_on_message(void *state, uint16_t type,
                                  const unsigned char *in, uint32_t in_len,
                                  unsigned char *out, uint32_t out_cap,
                                  uint32_t *out_len, uint32_t *aux)
{
    *out_len = 0;
    if (type != GB_ECHO_MSG_ECHO)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if (in_len > out_cap)
        return GB_SLOT_TOO_LARGE;
    uint64_t *count = (uint64_t *)state;
    *count += 1;
    *aux = (uint32_t)*count;
#if defined(__CUDA_ARCH__)
    /* Whole 16-byte words: both buffers are aligned and hold out_cap bytes
     * (in_len <= out_cap, a multiple of 16); bytes past in_len are padding. */
    for (uint32_t i = 0; i < in_len; i += 16)
        *(uint4 *)(out + i) = *(const uint4 *)(in + i);
#else
    memcpy(GB_ALIGNED(out), GB_ALIGNED(in), in_len);
#endif
    *out_len = in_len;
    return GB_SLOT_OK;
}

#endif
