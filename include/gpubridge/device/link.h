/* Device links: a forward from one grain type's ring kernel to another's on
 * the same GPU, through device memory, with no host thread in the path
 * (docs/design.md, "Messages between grains"). Shared by the host (C11),
 * which lays links out, and the kernels (link.cuh), which use them.
 *
 * What lives where, and why:
 * - gb_link_t and its slots: device memory. The sender's kernel (one block)
 *   claims a position in its shared memory (gb_link_cache_t), writes the
 *   slot and swaps its stamp in at GPU scope, from the stamp of the lap
 *   before: a target that stopped has swapped a tombstone in first, and the
 *   forward takes the host path. The target's kernel is the one consumer and
 *   publishes `tail`. Atomics and polls stay in the GPU's L2: none crosses
 *   PCIe.
 * - gb_link_host_t: mapped pinned host memory, one writer per line. The
 *   host counts the pair's messages that took the host path and were
 *   delivered (`delivered`); the target's kernel counts what it took from
 *   the link and what it answered undeliverable, for telemetry.
 *
 * A link only carries a forward whose turn made no other message, whose
 * record fits the target's slot, and whose caller's reply slot is in mapped
 * memory with room for any reply the target may write: the forward's last
 * grain writes the reply straight into that slot (GB_SLOT_FROM below), so
 * the host reads it as the caller's ring's own reply. Anything else, and a
 * full link, takes the host path (mail.h), which keeps its bounds. Once a
 * pair has messages on the host path (its `held` ahead of `delivered`), its
 * forwards stay there until the host has delivered them, so a pair's order
 * holds across both paths. */
#ifndef GB_DEVICE_LINK_H
#define GB_DEVICE_LINK_H

#include <stdint.h>

#include "gpubridge/mail.h"
#include "gpubridge/ring.h"

/* Links into one ring kernel that it polls; senders past it use the host path. */
/* gb_link_t.head's top bit: set by the target's kernel as it stops. A
 * sender's kernel is launched once, with its links (a kernel that falls back
 * to relaunch gets none): its claims start at 0 and count in its shared
 * memory, so head holds no position. */
#define GB_LINK_CLOSED (1ull << 63)
#define GB_LINK_IN_MAX 16

/* Who gets the reply of a forward that travels by links: 32 bytes ahead of
 * each link slot's request header. */
typedef struct gb_link_origin {
    uint64_t out_slot; /* device address of the caller's reply slot (a gb_slot_hdr_t) */
    uint64_t pos;      /* the caller's ring position: the reply's corr and stamp */
    uint64_t since_ns; /* %globaltimer when it entered the link: the hold bound of a paused target */
    uint32_t hops;     /* grains passed on the device since the host's count (mail.h trailer) */
    uint32_t out_cap;  /* payload bytes the caller's slot holds */
} gb_link_origin_t;

/* A link's host lines (mapped pinned host memory). */
typedef struct gb_link_host {
    volatile uint64_t delivered; /* host: the pair's GB_MAIL_HELD messages delivered or given up */
    uint64_t _pad0[GB_LINE / 8 - 1];
    volatile uint64_t taken;   /* target's kernel: messages taken from the link */
    volatile uint64_t refused; /* target's kernel: messages it answered undeliverable */
    uint64_t _pad1[GB_LINE / 8 - 2];
} gb_link_host_t;

/* One link (device memory): sender type -> target type, one device. */
typedef struct gb_link {
    /* the sender's kernel (its own bookkeeping is in its shared memory: gb_link_cache_t) */
    unsigned long long head; /* GB_LINK_CLOSED once the target stopped (claims count in the sender's shared memory) */
    uint64_t _pad0[GB_LINE / 8 - 1];
    /* the target's kernel */
    unsigned long long tail;    /* positions taken */
    unsigned long long refused; /* messages it answered undeliverable */
    uint64_t _pad1[GB_LINE / 8 - 2];
    /* set at start */
    unsigned char *slots;   /* cap slots of slot_size bytes: origin, request header, record */
    gb_link_host_t *host;   /* device view of its host lines */
    uint32_t cap;           /* power of two */
    uint32_t slot_size;     /* 32 + the target's slot size */
    uint32_t pl_cap;        /* the target's payload room: the largest record, and the largest reply */
    /* 1: the target's kernel stops, or does not poll it (it fell back to
     * relaunch): senders take the host path (set by the host). */
    volatile uint32_t closed;
    uint32_t _pad3;
    uint64_t _pad2[GB_LINE / 8 - 5];
} gb_link_t;

GB_STATIC_ASSERT(sizeof(gb_link_origin_t) == 32, "a link origin is 32 bytes");
GB_STATIC_ASSERT(sizeof(gb_link_host_t) == 2 * GB_LINE, "a link's host part is two lines");
GB_STATIC_ASSERT(sizeof(gb_link_t) == 3 * GB_LINE, "a link is three lines");

/* A sending kernel's view of its links, in its shared memory (one block
 * sends into a link, so no other agent needs it): by target index, the
 * next position to claim and the last tail read (claims start there, with
 * no L2 load first), and the pair's messages that took the host path
 * (held) against those the host has said delivered (seen). */
typedef struct gb_link_cache {
    gb_link_t *out[GB_MAIL_MAX_TARGETS]; /* the kernel's gb_kargs_t.link_out: no turn takes the arguments' address */
    uint32_t cap[GB_MAIL_MAX_TARGETS];    /* each link's cap and pl_cap, fixed for its life */
    uint32_t pl_cap[GB_MAIL_MAX_TARGETS];
    unsigned long long head[GB_MAIL_MAX_TARGETS];
    unsigned long long tail[GB_MAIL_MAX_TARGETS];
    unsigned long long held[GB_MAIL_MAX_TARGETS];
    unsigned long long seen[GB_MAIL_MAX_TARGETS];
    uint32_t next_in; /* links in: where the next pass starts looking (ring_links.cuh) */
} gb_link_cache_t;

/* What a turn on the device needs to forward by a link. */
typedef struct gb_link_turn {
    gb_link_t *const *out;   /* by target index (gb_link_cache_t.out, in shared memory) */
    gb_link_cache_t *cache;  /* the kernel's (shared memory) */
    gb_link_origin_t origin; /* the caller's slot */
    uint32_t closed;         /* bit t: link t's closed hint, loaded as the turn began (gbk_link_closed) */
    uint32_t n_devs, dev;    /* a link serves keys of its own device only (gb_link_device_of_key) */
    uint32_t max_hops;       /* messaging.max_hops */
    uint32_t self;           /* the kernel's ring index: a foreign reply's GB_SLOT_FROM */
} gb_link_turn_t;

/* Replies written by a forward's last grain into its caller's slot carry,
 * in their status, the ring that wrote them: the host encodes the record
 * with that type's codec. */
#define GB_SLOT_FROM 0x8000u
#define GB_SLOT_FROM_SHIFT 9
#define GB_SLOT_STATUS_MASK 0x1FFu
GB_HD uint16_t gb_slot_from(uint32_t ring, uint32_t status)
{
    return (uint16_t)(GB_SLOT_FROM | ring << GB_SLOT_FROM_SHIFT | (status & GB_SLOT_STATUS_MASK));
}

/* The device of key among n (docs/protocol.md, "Several devices"): fixed
 * for all versions; splitmix64's output function. */
GB_HD uint32_t gb_link_device_of_key(uint64_t key, uint32_t n)
{
    if (n <= 1)
        return 0;
    uint64_t z = key + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z % n);
}

#endif
