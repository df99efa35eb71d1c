/* The supervisor's set of correlation ids awaiting a reply, for one client
 * (supervisor.c): each id with the tag of the frame that brought it.
 *
 * Every correlation id counts, 0 and 2^64-1 included, and an id noted twice
 * (a client reusing one while it is in flight) waits twice: each request is
 * owed its reply.
 *
 * Ids sit in an array in the order noted, so in the order of their tags (a
 * client's tags never decrease), and an open-addressing index finds them by
 * id. So a reply strikes its id in O(1), and the frames tagged first..last
 * (a run the worker refused whole) are struck in proportion to their own
 * ids, whatever the set holds. Struck entries stay in the array until it is
 * rebuilt: when it is full (it then grows, or just compacts), and when the
 * set falls to an eighth of its room (it shrinks); an empty set frees all.
 *
 * Memory is counted in bytes actually allocated (GBI_IDS_BYTES_PER_SLOT per
 * slot of room), per set and, through `total`, for all sets together. */
#ifndef GB_SUP_IDS_H
#define GB_SUP_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gbi_ids_ent {
    uint64_t id;
    uint64_t tag;  /* GBI_IDS_STRUCK set: struck (the tag kept below it, for the order) */
    uint32_t next; /* the entry (+1) noted next with the same id, or 0 */
    uint32_t tail; /* in an id's first entry: its last entry (+1) */
} gbi_ids_ent_t;

typedef struct gbi_ids {
    gbi_ids_ent_t *ent; /* ent[lo..hi): in the order noted; tags never decrease */
    uint32_t *index;    /* 2 * cap slots: 0 empty, UINT32_MAX struck, else an id's first entry + 1 */
    size_t cap;         /* room of ent (a power of two, or 0) */
    size_t lo, hi, n;   /* n: ids waiting */
    size_t *total;      /* bytes of all sets together, kept up to date (or NULL) */
} gbi_ids_t;

#define GBI_IDS_STRUCK (1ull << 63) /* tags stay below it */

/* One slot of room: an entry and two index slots. */
#define GBI_IDS_BYTES_PER_SLOT (sizeof(gbi_ids_ent_t) + 2 * sizeof(uint32_t))

/* Bytes the set holds now. */
size_t gbi_ids_bytes(const gbi_ids_t *s);
/* Bytes it would hold once k more ids are noted (gbi_ids_reserve(s, k)). */
size_t gbi_ids_bytes_after(const gbi_ids_t *s, size_t k);
/* Makes room for k more ids; -1: out of memory (nothing changed). */
int gbi_ids_reserve(gbi_ids_t *s, size_t k);
/* Notes id with tag (room reserved before; tag below GBI_IDS_STRUCK, above
 * 0 and not below the last one). Returns 1 when noted, 0 without room. */
int gbi_ids_add(gbi_ids_t *s, uint64_t id, uint64_t tag);
/* Strikes id (of an id waiting more than once, the one noted first);
 * returns its tag, or 0 when it was not waiting. */
uint64_t gbi_ids_del(gbi_ids_t *s, uint64_t id);
/* Strikes the ids of tags first..last; returns how many. */
size_t gbi_ids_del_tags(gbi_ids_t *s, uint64_t first, uint64_t last);
/* Strikes up to max ids of tags first..last into out, from *cursor on
 * (SIZE_MAX the first time); returns how many. The set is not rebuilt
 * between calls: gbi_ids_trim after the last one. */
size_t gbi_ids_take(gbi_ids_t *s, uint64_t first, uint64_t last, size_t *cursor, uint64_t *out, size_t max);
/* Frees an empty set, shrinks one that fell to an eighth of its room. */
void gbi_ids_trim(gbi_ids_t *s);
void gbi_ids_free(gbi_ids_t *s);

#endif
