/* The per-message step of the dispatch loop, shared by every backend: validate
 * the request header, find or activate the grain, run its handler, fill in the
 * reply header. The loops around it (ring kernel, relaunch kernel, cpu worker)
 * differ in how they read and publish slots; this is what they share. */
#ifndef GB_DISPATCH_H
#define GB_DISPATCH_H

#include "grain.h"
#include "grain_table.h"
#include "ring.h"

/* The step before the handler: checks the header, handles the reserved types,
 * finds or activates the grain. Returns GBI_RUN_HANDLER with *state set, or
 * the reply's status. Team kernels run it on one thread, then the handler on
 * the whole team. */
#define GBI_RUN_HANDLER 0xFFFFu
GB_HD uint32_t gbi_dispatch_pre(gb_grain_table_t *tab, uint32_t lane, const gb_slot_hdr_t *in, uint32_t pl_cap,
                                uint32_t test_flags, void **state)
{
    (void)test_flags;
    if (in->len > pl_cap)
        return GB_SLOT_TOO_LARGE; /* the length is the producer's claim; never trust it past the slot */
    if (in->type == GB_MSG_DEACTIVATE_KEY)
        return gb_grain_remove(tab, lane, in->key) ? GB_SLOT_OK : GB_SLOT_NOT_ACTIVE;
    if (in->type == GB_MSG_TEST_FAULT) {
#if defined(__CUDA_ARCH__)
        if (test_flags & GB_TEST_ALLOW_FAULT) {
            /* Test hook: an illegal address, which makes the context's error sticky (700). */
            volatile int *bad = (volatile int *)(uintptr_t)0x10;
            *bad = 1;
        }
#endif
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    }
    int64_t e = gb_grain_find(tab, lane, in->key, 1);
    if (e < 0)
        return GB_SLOT_GRAIN_TABLE_FULL;
    *state = gb_grain_state(tab, e);
    return GBI_RUN_HANDLER;
}

#if defined(__CUDA_ARCH__)
/* Device lookup for states of up to 16 bytes (32-byte entries, the common
 * case): each probe loads the entry's header and its state in two 16-byte
 * loads issued together, so a hit costs one memory round trip, where
 * gb_grain_find + the handler's state access cost three dependent ones (used,
 * then key, then state: ~0.8 us on an H200). Returns the entry (its state in
 * *st; zero for a new activation), or -1 when the partition is full. */
static __device__ __forceinline__ int64_t gbi_find_small(gb_grain_table_t *t, uint32_t lane, uint64_t key, uint4 *st)
{
    const uint64_t base = (uint64_t)lane * t->per_lane;
    const uint32_t mask = t->per_lane - 1, h = (uint32_t)gb_key_mix(key);
    int64_t tomb = -1;
    for (uint32_t i = 0; i < t->per_lane; i++) {
        const uint64_t e = base + ((h + i) & mask);
        const uint4 *p = (const uint4 *)gb_grain_entry(t, e); /* entries are 16-byte aligned */
        const uint4 hd = p[0], s = p[1];
        const uint64_t k = (uint64_t)hd.x | (uint64_t)hd.y << 32;
        if (hd.z == GB_ENTRY_USED && k == key) {
            *st = s;
            return (int64_t)e;
        }
        if (hd.z == GB_ENTRY_TOMB && tomb < 0)
            tomb = (int64_t)e;
        if (hd.z == GB_ENTRY_EMPTY) {
            if (tomb < 0)
                tomb = (int64_t)e;
            break;
        }
    }
    if (tomb < 0)
        return -1;
    gb_grain_entry_t *en = gb_grain_entry(t, (uint64_t)tomb);
    en->key = key;
    en->used = GB_ENTRY_USED;
    *st = make_uint4(0, 0, 0, 0); /* written back after the handler */
    return tomb;
}
#endif

/* Handles request `in` (header + payload, already read) and writes the reply's
 * header (all but seq) into *out and its payload into out_pl. Returns 1 when
 * the reply is an error (for the errors counter). */
GB_HD int gbi_dispatch_one(int kind, const gb_grain_ctx_t *ctx, gb_grain_table_t *tab, uint32_t lane,
                           const gb_slot_hdr_t *in, const unsigned char *in_pl,
                           gb_slot_hdr_t *out, unsigned char *out_pl,
                           uint32_t pl_cap, uint32_t test_flags)
{
    uint32_t out_len = 0, aux = 0, st;
    out->key = in->key;
    out->corr = in->corr;
    out->type = in->type;
#if defined(__CUDA_ARCH__)
    if (tab->entry_size == 32 && in->type != GB_MSG_DEACTIVATE_KEY && in->type != GB_MSG_TEST_FAULT &&
        in->len <= pl_cap) {
        /* The state in registers, written back once. */
        uint4 small;
        const int64_t e = gbi_find_small(tab, lane, in->key, &small);
        if (e < 0) {
            st = GB_SLOT_GRAIN_TABLE_FULL;
        } else {
            st = gb_grain_on_message(kind, ctx, &small, in->type, in_pl, in->len, out_pl, pl_cap, &out_len, &aux);
            *(uint4 *)gb_grain_state(tab, e) = small;
        }
        out->status = (uint16_t)st;
        out->len = st == GB_SLOT_OK ? out_len : 0;
        out->aux = aux;
        return st != GB_SLOT_OK;
    }
#endif
    void *state = NULL;
    st = gbi_dispatch_pre(tab, lane, in, pl_cap, test_flags, &state);
    if (st == GBI_RUN_HANDLER)
        st = gb_grain_on_message(kind, ctx, state, in->type, in_pl, in->len, out_pl, pl_cap, &out_len, &aux);
    out->status = (uint16_t)st;
    out->len = st == GB_SLOT_OK ? out_len : 0;
    out->aux = aux;
    return st != GB_SLOT_OK;
}

#endif
