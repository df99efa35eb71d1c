/* The activation table of one grain type: (key -> state) for every active grain.
 *
 * It is partitioned: a grain's key picks its partition (gb_grain_lane). A
 * cpu worker thread owns its partitions, and a team kernel's worker block its
 * own: there one thread at a time touches a partition. A ring kernel runs a
 * window's requests in rounds, one request per key per round (rounds
 * separated by barriers), so several threads may look up different keys of
 * one partition at once: activations claim entries atomically there (see
 * gb_grain_find). Either way one grain never runs twice at once (turn
 * semantics). Within a partition: open addressing with linear probing;
 * deactivation leaves a tombstone that a later insert reuses. The table
 * lives in device memory for the CUDA backend and in host memory for the cpu
 * backend; the code below is the same for both. Activation collection
 * (activation.c) evicts idle entries and restores evicted ones from the
 * host, only while no kernel or worker touches the table. */
#ifndef GB_GRAIN_TABLE_H
#define GB_GRAIN_TABLE_H

#include <stdint.h>
#include <string.h>

#include "gpubridge/ring.h"

/* BUSY: on the GPU, an entry being activated (see gb_grain_find). */
enum { GB_ENTRY_EMPTY = 0, GB_ENTRY_USED = 1, GB_ENTRY_TOMB = 2, GB_ENTRY_BUSY = 3 };

/* One entry: the key, its use flag and the grain's state, together, so that a
 * lookup is one memory round trip (on the GPU, one L2 access) and the state
 * comes with it. */
typedef struct gb_grain_entry {
    uint64_t key;
    uint32_t used; /* GB_ENTRY_* */
    uint32_t _pad;
    /* state_size bytes of state follow */
} gb_grain_entry_t;

typedef struct gb_grain_table {
    unsigned char *entries; /* lanes * per_lane entries of entry_size bytes, zeroed */
    uint32_t lanes;         /* partitions: one per owner lane */
    uint32_t per_lane;      /* entries per partition, power of two */
    uint32_t state_size;    /* bytes, multiple of 8 */
    uint32_t entry_size;    /* sizeof(gb_grain_entry_t) + state_size, multiple of 16 */
    uint32_t concurrent;    /* GPU: other threads may activate keys of the same partition at once;
                             * 2: the same, matches unverified (GBK_F_NO_VERIFY, a benchmark
                             * switch that reopens the gap gb_grain_verify closes) */
    uint32_t _pad;
} gb_grain_table_t;

GB_HD uint32_t gb_grain_entry_size(uint32_t state_size)
{
    return (uint32_t)((sizeof(gb_grain_entry_t) + state_size + 15u) & ~15u);
}

GB_HD gb_grain_entry_t *gb_grain_entry(gb_grain_table_t *t, uint64_t e)
{
    return (gb_grain_entry_t *)(t->entries + (size_t)e * t->entry_size);
}

/* A 64-bit mixer (splitmix64's finaliser): keys are often small consecutive
 * integers, and lanes and probe positions must both spread them. */
GB_HD uint64_t gb_key_mix(uint64_t k)
{
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    k ^= k >> 31;
    return k;
}

/* The lane that owns key among lanes: the high half of the mix scaled to
 * [0, lanes) by a multiply (Lemire's range reduction). A `%` by a lanes known
 * only at run time is a division, some 20 dependent instructions on the GPU,
 * on every message's path. */
GB_HD uint32_t gb_grain_lane(uint64_t key, uint32_t lanes)
{
    return (uint32_t)(((gb_key_mix(key) >> 32) * (uint64_t)lanes) >> 32);
}

/* Entries per partition so that lanes partitions hold max_grains in all. */
GB_HD uint32_t gb_grain_per_lane(uint32_t max_grains, uint32_t lanes)
{
    uint32_t need = (max_grains + lanes - 1) / lanes, p = 1;
    while (p < need)
        p <<= 1;
    return p;
}

/* Entries per partition for max_grains over parts partitions: the share,
 * plus four standard deviations of how hashing spreads keys (share + 4 *
 * sqrt(share) + 8), and at least twice the share; a power of two. Exactly
 * the share (gb_grain_per_lane) would refuse keys well before max_grains
 * (with 1,024 grains over 256 partitions, about 11 of 1,024 keys). */
GB_HD uint32_t gb_grain_partition_entries(uint32_t max_grains, uint32_t parts)
{
    uint64_t share = ((uint64_t)max_grains + parts - 1) / parts, root = 0;
    while ((root + 1) * (root + 1) <= share)
        root++;
    uint64_t need = share + 4 * (root + 1) + 8;
    if (need < 2 * share)
        need = 2 * share;
    uint32_t p = 1;
    while (p < need && p < (1u << 30))
        p <<= 1;
    return p;
}

#if defined(__CUDA_ARCH__)
/* An entry's `used` flag at GPU scope: other threads of the block may claim
 * or free entries of the same partition (see gb_grain_find). */
static __device__ __forceinline__ void gb_grain_set_used(gb_grain_entry_t *en, uint32_t used)
{
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(__cvta_generic_to_global(&en->used)), "r"(used)
                 : "memory");
}

/* gb_grain_find's activation when t->concurrent: claims the first free entry
 * from slot `from` of the partition at `base` on (EMPTY or TOMB -> BUSY by
 * compare-and-swap; one another thread took first is passed over: the key
 * is absent, any free entry will do), writes the key (and, zero_state, a
 * zero state), then marks it USED. Returns the entry, or -1 when the
 * partition is full. */
static __device__ __forceinline__ int64_t gb_grain_claim(gb_grain_table_t *t, uint64_t base, uint32_t mask,
                                                         uint32_t from, uint64_t key, int zero_state)
{
    for (uint32_t n = 0; n < t->per_lane; n++) {
        const uint64_t e = base + ((from + n) & mask);
        gb_grain_entry_t *en = gb_grain_entry(t, e);
        uint32_t u;
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(u) : "l"(__cvta_generic_to_global(&en->used))
                     : "memory");
        if ((u != GB_ENTRY_EMPTY && u != GB_ENTRY_TOMB) || atomicCAS((unsigned int *)&en->used, u, GB_ENTRY_BUSY) != u)
            continue;
        en->key = key;
        if (zero_state)
            memset(en + 1, 0, t->state_size);
        __threadfence_block(); /* the key and state before USED */
        gb_grain_set_used(en, GB_ENTRY_USED);
        return (int64_t)e;
    }
    return -1;
}
#endif

#if defined(__CUDA_ARCH__)
/* Whether the entry that one 16-byte load showed as (key, USED) really holds
 * key. The PTX memory model lets a vector load read its words at different
 * moments, so while another thread of the block claims the entry (an EMPTY
 * one, or a TOMB that kept an old key: gb_grain_claim writes the key, then
 * USED), the load may pair the new USED with the key from before: a lookup
 * of key 0, or of the tombstoned key, would take another grain's entry.
 * Re-reading `used` with acquire (block scope: every thread that activates
 * entries of this table at once is in this block) and then the key closes
 * that: seeing USED, the key read after it is the claimer's, or later. Only
 * one thread looks up a given key at a time (turn semantics), so no other
 * thread writes this key anywhere meanwhile, and a match is its own entry.
 * Only lookups with t->concurrent pay for it (window rounds); the lone
 * request's path does not. */
static __device__ __forceinline__ bool gb_grain_verify(const gb_grain_entry_t *en, uint64_t key)
{
    uint32_t u;
    uint64_t k;
    asm volatile("ld.acquire.cta.global.u32 %0, [%1];" : "=r"(u) : "l"(__cvta_generic_to_global(&en->used))
                 : "memory");
    asm volatile("ld.relaxed.cta.global.u64 %0, [%1];" : "=l"(k) : "l"(__cvta_generic_to_global(&en->key))
                 : "memory");
    return u == GB_ENTRY_USED && k == key;
}
#endif

#if defined(__CUDACC__)
/* A 32-byte entry's two halves, key and flag then the state, by two 16-byte
 * loads issued together (see gb_grain_find for why asm). */
static __device__ __forceinline__ void gb_grain_load32(const gb_grain_entry_t *en, uint4 *hd, uint4 *sv)
{
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%8];\n\t"
                 "ld.global.v4.u32 {%4,%5,%6,%7}, [%8+16];"
                 : "=r"(hd->x), "=r"(hd->y), "=r"(hd->z), "=r"(hd->w), "=r"(sv->x), "=r"(sv->y), "=r"(sv->z),
                   "=r"(sv->w)
                 : "l"(__cvta_generic_to_global(en))
                 : "memory");
}
#endif

/* Finds key in lane's partition; activates it (zeroed state) when absent and
 * create is set. Returns the entry index, or -1 (absent, or partition full).
 *
 * copy16, for tables of 32-byte entries (states of up to 16 bytes), may ask
 * for the state as well: it is loaded with the probe and copied out (zero for
 * a new activation), so that a GPU lookup costs one memory round trip rather
 * than three dependent ones (used, then key, then the handler's state). The
 * caller writes the copy back. copy16 is 16-byte
 * aligned; NULL: no copy.
 *
 * t->concurrent (GPU): lookups of different keys may run at once in one
 * partition (the ring kernel's window rounds serialise requests per key, not
 * per partition), so an activation claims its entry with a compare-and-swap
 * of `used` (EMPTY or TOMB -> BUSY), writes the key, and only then marks it
 * USED: a lookup that sees USED and its key checks the pair once more
 * (gb_grain_verify), and a BUSY entry is some other key's (no two lookups of
 * one key run at once). A key present before the
 * round cannot sit behind an EMPTY entry of its probe sequence (entries never
 * become EMPTY again), so a concurrent activation never hides it. */
GB_HD int64_t gb_grain_find(gb_grain_table_t *t, uint32_t lane, uint64_t key, int create, uint64_t *copy16)
{
    uint64_t base = (uint64_t)lane * t->per_lane;
    uint32_t mask = t->per_lane - 1, h = (uint32_t)gb_key_mix(key);
    int64_t tomb = -1;
    for (uint32_t i = 0; i < t->per_lane; i++) {
        uint64_t e = base + ((h + i) & mask);
        const gb_grain_entry_t *en = gb_grain_entry(t, e);
        uint64_t k;
        uint32_t u;
#if defined(__CUDA_ARCH__)
        /* Two 16-byte loads (entries are 16-byte aligned, in device
         * memory), issued together. Plain loads: other threads of the block
         * may be activating entries of this partition (t->concurrent), but a
         * stale view is harmless: a free entry is claimed by
         * compare-and-swap, which reports the truth, and a match is verified
         * (gb_grain_verify) before it is trusted. Not loads at GPU scope
         * (ld.relaxed.gpu): those wait on the stores to host memory before
         * them, which lengthens every round trip.
         * As plain C the compiler sinks the state's load into the branch that
         * uses it, after the compare: a second, dependent trip to L2 on
         * every message. asm volatile
         * keeps both where they are; "memory" keeps them after the previous
         * message's write-back of the same state. */
        uint4 hd, sv = make_uint4(0, 0, 0, 0);
        if (copy16)
            gb_grain_load32(en, &hd, &sv);
        else
            asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(hd.x), "=r"(hd.y), "=r"(hd.z), "=r"(hd.w)
                         : "l"(__cvta_generic_to_global(en))
                         : "memory");
        k = (uint64_t)hd.x | (uint64_t)hd.y << 32;
        u = hd.z;
#else
        k = en->key;
        u = en->used;
#endif
        if (u == GB_ENTRY_USED && k == key) {
#if defined(__CUDA_ARCH__)
            if (t->concurrent == 1 && !gb_grain_verify(en, key))
                continue; /* another key's fresh activation, seen with a stale key */
            if (copy16)
                *(uint4 *)copy16 = sv;
#else
            if (copy16)
                memcpy(copy16, en + 1, 2 * sizeof *copy16);
#endif
            return (int64_t)e;
        }
        if (u == GB_ENTRY_TOMB && tomb < 0)
            tomb = (int64_t)e;
        if (u == GB_ENTRY_EMPTY) {
            if (tomb < 0)
                tomb = (int64_t)e;
            break;
        }
    }
    if (!create || tomb < 0)
        return -1;
#if defined(__CUDA_ARCH__)
    if (t->concurrent)
        tomb = gb_grain_claim(t, base, mask, (uint32_t)(tomb - (int64_t)base), key, copy16 == NULL);
    else
#endif
    {
        gb_grain_entry_t *en = gb_grain_entry(t, (uint64_t)tomb);
        en->key = key;
        en->used = GB_ENTRY_USED;
        if (!copy16)
            memset(en + 1, 0, t->state_size);
    }
    if (tomb >= 0 && copy16)
        copy16[0] = copy16[1] = 0; /* the caller's write-back zeroes the state */
    return tomb;
}

GB_HD void *gb_grain_state(gb_grain_table_t *t, int64_t entry)
{
    return gb_grain_entry(t, (uint64_t)entry) + 1;
}

/* Deactivates key: frees its entry. Returns 1 if it was active. */
GB_HD int gb_grain_remove(gb_grain_table_t *t, uint32_t lane, uint64_t key)
{
    int64_t e = gb_grain_find(t, lane, key, 0, NULL);
    if (e < 0)
        return 0;
#if defined(__CUDA_ARCH__)
    gb_grain_set_used(gb_grain_entry(t, (uint64_t)e), GB_ENTRY_TOMB);
#else
    gb_grain_entry(t, (uint64_t)e)->used = GB_ENTRY_TOMB;
#endif
    return 1;
}

#endif
