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

/* The index slot of id: its entry's, or the empty one that ends the probe
 * (*free_slot gets the first struck or empty slot on the way). */
static size_t find(const gbi_ids_t *s, uint64_t id, size_t *free_slot)
{
    const size_t mask = 2 * s->cap - 1;
    size_t j = mix(id) & mask;
    *free_slot = SIZE_MAX;
    for (; s->index[j]; j = (j + 1) & mask) {
        if (s->index[j] == STRUCK) {
            if (*free_slot == SIZE_MAX)
                *free_slot = j;
        } else if (s->ent[s->index[j] - 1].id == id) {
            return j;
        }
    }
    if (*free_slot == SIZE_MAX)
        *free_slot = j;
    return j;
}

/* Moves the waiting ids, in order, into room for newcap (0: frees all). */
static int rebuild(gbi_ids_t *s, size_t newcap)
{
    gbi_ids_ent_t *ent = NULL;
    uint32_t *index = NULL;
    if (newcap) {
        ent = malloc(newcap * sizeof *ent);
        index = calloc(2 * newcap, sizeof *index);
        if (!ent || !index) {
            free(ent);
            free(index);
            return -1;
        }
    }
    size_t m = 0;
    for (size_t i = s->lo; i < s->hi && newcap; i++) {
        if (!s->ent[i].id)
            continue;
        ent[m] = s->ent[i];
        size_t j = mix(ent[m].id) & (2 * newcap - 1);
        while (index[j])
            j = (j + 1) & (2 * newcap - 1);
        index[j] = (uint32_t)(m + 1);
        m++;
    }
    if (s->total)
        *s->total = *s->total - gbi_ids_bytes(s) + newcap * GBI_IDS_BYTES_PER_SLOT;
    free(s->ent);
    free(s->index);
    s->ent = ent;
    s->index = index;
    s->cap = newcap;
    s->lo = 0;
    s->hi = s->n = m;
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
    if (id == 0 || id == ~0ull || s->hi >= s->cap)
        return 0; /* unanswerable ids: the worker answers them itself, if at all */
    size_t slot, j = find(s, id, &slot);
    if (s->index[j])
        return 0; /* already waiting (a client reusing an id) */
    s->ent[s->hi] = (gbi_ids_ent_t){id, tag};
    s->index[slot] = (uint32_t)(s->hi + 1);
    s->hi++;
    s->n++;
    return 1;
}

/* Strikes the entry at i (waiting). */
static void strike(gbi_ids_t *s, size_t i)
{
    const size_t mask = 2 * s->cap - 1;
    size_t j = mix(s->ent[i].id) & mask;
    while (s->index[j] != i + 1)
        j = (j + 1) & mask;
    s->index[j] = STRUCK;
    s->ent[i].id = 0;
    s->n--;
    while (s->lo < s->hi && !s->ent[s->lo].id)
        s->lo++;
}

uint64_t gbi_ids_del(gbi_ids_t *s, uint64_t id)
{
    if (!s->n || id == 0)
        return 0;
    size_t slot, j = find(s, id, &slot);
    if (!s->index[j])
        return 0;
    const size_t i = s->index[j] - 1;
    const uint64_t tag = s->ent[i].tag;
    strike(s, i);
    gbi_ids_trim(s);
    return tag;
}

/* The first entry in lo..hi whose tag is not below tag. */
static size_t first_of(const gbi_ids_t *s, uint64_t tag)
{
    size_t a = s->lo, b = s->hi;
    while (a < b) {
        const size_t m = a + (b - a) / 2;
        if (s->ent[m].tag < tag)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

size_t gbi_ids_take(gbi_ids_t *s, uint64_t first, uint64_t last, size_t *cursor, uint64_t *out, size_t max)
{
    size_t k = 0, i = *cursor == SIZE_MAX ? first_of(s, first) : *cursor;
    for (; i < s->hi && s->ent[i].tag <= last && k < max; i++) {
        if (!s->ent[i].id)
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
