/* Messages larger than a slot: their payload goes out of line.
 *
 * Each ring kernel's region ends in a *large area* (ring.h), in the same
 * placement as the rings: mapped pinned memory, device memory fed from a host
 * staging copy, or host memory (cpu). A request whose record, or whose reply,
 * may not fit a slot keeps its one slot, with status GB_REQ_LARGE and a
 * descriptor as its payload: where its record lies in the area, and where
 * the handler writes its reply. The handler runs on those bytes directly, so
 * handlers need no change; small messages take the one-slot path as before.
 *
 * The host allocates the area in request order and frees it in reply order
 * (a byte FIFO, large_payload.c): a request's record and reply space are one
 * contiguous allocation, freed when its reply is consumed.
 *
 * Shared by the host (C11) and the kernels (CUDA). */
#ifndef GB_LARGE_PAYLOAD_H
#define GB_LARGE_PAYLOAD_H

#include <string.h>

#include "gpubridge/ring.h"

/* The payload of a GB_REQ_LARGE request slot. Addresses are the kernel's view
 * (a device pointer; host memory in cpu mode), 16-byte aligned. */
typedef struct gb_large_desc {
    uint64_t in;      /* the request's record */
    uint64_t out;     /* room for the reply */
    uint32_t in_len;  /* record bytes */
    uint32_t out_cap; /* reply bytes at out, a multiple of 16 */
} gb_large_desc_t;

GB_STATIC_ASSERT(sizeof(gb_large_desc_t) == 24, "the descriptor is 24 bytes");
GB_STATIC_ASSERT(GB_SLOT_HDR_SIZE + 24 <= GB_SNAPSHOT, "the descriptor comes with the stamp's line");

/* Whether request in carries a descriptor. */
GB_HD int gbi_is_large(const gb_slot_hdr_t *in)
{
    return in->status == GB_REQ_LARGE && in->len == sizeof(gb_large_desc_t);
}

/* Points a handler's input and output at the large area. */
GB_HD void gbi_large_resolve(const unsigned char *desc, const unsigned char **in_pl, uint32_t *in_len,
                             unsigned char **out_pl, uint32_t *out_cap)
{
    gb_large_desc_t d;
    memcpy(&d, desc, sizeof d);
    *in_pl = (const unsigned char *)(uintptr_t)d.in;
    *in_len = d.in_len;
    *out_pl = (unsigned char *)(uintptr_t)d.out;
    *out_cap = d.out_cap;
#if defined(__CUDA_ARCH__)
    /* The area is reused: this SM's L1 may still hold what an earlier message
     * left at these addresses. fence.sc.sys drops L1 (ldst.cuh). */
    __threadfence_system();
#endif
}

#endif
