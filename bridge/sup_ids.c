/* The supervisor's per-client set of correlation ids (see sup_ids.h). */
#include "sup_ids.h"

#include <stdlib.h>
#include <string.h>

#define STRUCK UINT32_MAX
#define ROOM_MIN 16
#define ROOM_MAX ((size_t)1 << 30) /* index slots hold ent's index + 1 in 32 bits */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Room for n ids already waiting and k more, with half of n to spare, so
 * that a rebuild is followed by many additions before the next (a frame
 * alone gets the room it needs). 0: too many. */
static size_t room_for(size_t n, size_t k)
{
    size_t want = n + k + n / 2, c = ROOM_MIN;
    while (c < want && c <= ROOM_MAX / 2)
        c *= 2;
    return c >= want ? c : 0;
}

size_t gbi_ids_bytes(const gbi_ids_t *s) { return s->cap * GBI_IDS_BYTES_PER_SLOT; }

size_t gbi_ids_bytes_after(const gbi_ids_t *s, size_t k)
{
    if (s->hi + k <= s->cap)
        return gbi_ids_bytes(s);
    const size_t c = room_for(s->n, k);
    return c ? c * GBI_IDS_BYTES_PER_SLOT : SIZE_MAX;
}

/* The first struck or empty index slot on id's probe. */
static size_t free_slot_of(const gbi_ids_t *s, uint64_t id)
{
    const size_t mask = 2 * s->cap - 1;
    size_t j = mix(id) & mask;
    while (s->index[j] && s->index[j] != STRUCK)
        j = (j + 1) & mask;
    return j;
}

/* The index slot of id's first entry still waiting, or SIZE_MAX. An id has
 * one index slot, on its first entry; its later ones are linked from it
 * (next), so that a client sending one id many times costs no longer probes.
 * Entries struck by tag (gbi_ids_take) stay linked until they reach the
 * front of their id's list, where this unlinks them. */
static size_t slot_of(gbi_ids_t *s, uint64_t id)
{
    const size_t mask = 2 * s->cap - 1;
    for (size_t j = mix(id) & mask; s->index[j]; j = (j + 1) & mask) {
        if (s->index[j] == STRUCK || s->ent[s->index[j] - 1].id != id)
            continue;
        gbi_ids_ent_t *h = &s->ent[s->index[j] - 1];
        while (h->tag & GBI_IDS_STRUCK) {
            if (!h->next) {
                s->index[j] = STRUCK;
                return SIZE_MAX;
            }
            const uint32_t tail = h->tail;
            s->index[j] = h->next;
            h = &s->ent[h->next - 1];
            h->tail = tail;
        }
        return j;
    }
    return SIZE_MAX;
}

/* Appends an entry at hi (room checked by the caller). */
static void append(gbi_ids_t *s, uint64_t id, uint64_t tag)
{
    const uint32_t e = (uint32_t)(s->hi + 1);
    s->ent[s->hi] = (gbi_ids_ent_t){.id = id, .tag = tag, .next = 0, .tail = e};
    const size_t j = slot_of(s, id);
    if (j != SIZE_MAX) {
        gbi_ids_ent_t *h = &s->ent[s->index[j] - 1];
        s->ent[h->tail - 1].next = e;
        h->tail = e;
    } else {
        s->index[free_slot_of(s, id)] = e;
    }
    s->hi++;
    s->n++;
}

/* Moves the waiting ids, in order, into room for newcap (0: frees all). */
static int rebuild(gbi_ids_t *s, size_t newcap)
{
    gbi_ids_t t = {.cap = newcap, .total = s->total};
    if (newcap) {
        t.ent = malloc(newcap * sizeof *t.ent);
        t.index = calloc(2 * newcap, sizeof *t.index);
        if (!t.ent || !t.index) {
            free(t.ent);
            free(t.index);
            return -1;
        }
    }
    for (size_t i = s->lo; i < s->hi && newcap; i++)
        if (!(s->ent[i].tag & GBI_IDS_STRUCK))
            append(&t, s->ent[i].id, s->ent[i].tag);
    if (s->total)
        *s->total = *s->total - gbi_ids_bytes(s) + newcap * GBI_IDS_BYTES_PER_SLOT;
    free(s->ent);
    free(s->index);
    *s = t;
    return 0;
}

int gbi_ids_reserve(gbi_ids_t *s, size_t k)
{
    if (s->hi + k <= s->cap)
        return 0;
    const size_t c = room_for(s->n, k);
    return c ? rebuild(s, c) : -1;
}

int gbi_ids_add(gbi_ids_t *s, uint64_t id, uint64_t tag)
{
    if (s->hi >= s->cap || tag == 0 || (tag & GBI_IDS_STRUCK))
        return 0;
    append(s, id, tag);
    return 1;
}

/* Strikes the entry at i (waiting); its id's list lets go of it lazily. */
static void strike(gbi_ids_t *s, size_t i)
{
    s->ent[i].tag |= GBI_IDS_STRUCK;
    s->n--;
    while (s->lo < s->hi && (s->ent[s->lo].tag & GBI_IDS_STRUCK))
        s->lo++;
}

uint64_t gbi_ids_del(gbi_ids_t *s, uint64_t id)
{
    if (!s->n)
        return 0;
    const size_t j = slot_of(s, id);
    if (j == SIZE_MAX)
        return 0;
    const size_t i = s->index[j] - 1;
    const uint64_t tag = s->ent[i].tag;
    strike(s, i);
    (void)slot_of(s, id); /* unlinks it at once */
    gbi_ids_trim(s);
    return tag;
}

/* The first entry in lo..hi whose tag is not below tag. */
static size_t first_of(const gbi_ids_t *s, uint64_t tag)
{
    size_t a = s->lo, b = s->hi;
    while (a < b) {
        const size_t m = a + (b - a) / 2;
        if ((s->ent[m].tag & ~GBI_IDS_STRUCK) < tag)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

size_t gbi_ids_take(gbi_ids_t *s, uint64_t first, uint64_t last, size_t *cursor, uint64_t *out, size_t max)
{
    size_t k = 0, i = *cursor == SIZE_MAX ? first_of(s, first) : *cursor;
    for (; i < s->hi && (s->ent[i].tag & ~GBI_IDS_STRUCK) <= last && k < max; i++) {
        if (s->ent[i].tag & GBI_IDS_STRUCK)
            continue;
        if (out)
            out[k] = s->ent[i].id;
        k++;
        strike(s, i);
    }
    *cursor = i;
    return k;
}

size_t gbi_ids_del_tags(gbi_ids_t *s, uint64_t first, uint64_t last)
{
    size_t cursor = SIZE_MAX, k = s->n ? gbi_ids_take(s, first, last, &cursor, NULL, SIZE_MAX) : 0;
    gbi_ids_trim(s);
    return k;
}

void gbi_ids_trim(gbi_ids_t *s)
{
    if (s->n == 0 && s->cap)
        rebuild(s, 0);
    else if (s->cap > 4 * ROOM_MIN && s->n * 8 <= s->cap)
        rebuild(s, room_for(s->n, 0)); /* kept as it is if memory is short */
}

void gbi_ids_free(gbi_ids_t *s)
{
    s->n = 0;
    rebuild(s, 0);
}
