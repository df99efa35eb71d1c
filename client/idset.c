/* idset.c: the set of correlation ids awaiting a reply, with a small value
 * (async request, or a call that gave up and whose late reply is dropped).
 * Thousands of ids may be in flight, so lookups must not be linear. */
#include <stdlib.h>

#include "client_internal.h"

static size_t slot_of(uint64_t id, size_t cap)
{
    /* Ids are consecutive; a multiplicative hash spreads them over the table. */
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static int grow(gbci_idset_t *s)
{
    size_t cap = s->cap ? s->cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint8_t *vals = calloc(cap, 1);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->keys[i])
            continue;
        size_t j = slot_of(s->keys[i], cap);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = s->keys[i];
        vals[j] = s->vals[i];
    }
    free(s->keys);
    free(s->vals);
    s->keys = keys;
    s->vals = vals;
    s->cap = cap;
    return 0;
}

int gbci_idset_put(gbci_idset_t *s, uint64_t id, uint8_t val)
{
    if (id == 0)
        return 0;
    /* Keep the load under a half so probe runs stay short. */
    if ((s->n + 1) * 2 > s->cap && grow(s) != 0)
        return -1;
    size_t j = slot_of(id, s->cap);
    while (s->keys[j] && s->keys[j] != id)
        j = (j + 1) & (s->cap - 1);
    if (!s->keys[j])
        s->n++;
    s->keys[j] = id;
    s->vals[j] = val;
    return 0;
}

uint8_t gbci_idset_take(gbci_idset_t *s, uint64_t id)
{
    if (id == 0 || s->cap == 0)
        return 0;
    size_t mask = s->cap - 1, j = slot_of(id, s->cap);
    while (s->keys[j] != id) {
        if (!s->keys[j])
            return 0;
        j = (j + 1) & mask;
    }
    uint8_t val = s->vals[j];
    /* Backward-shift deletion: move later entries of the run into the hole
     * when their home slot does not lie (cyclically) between hole and them. */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; s->keys[k]; k = (k + 1) & mask) {
        size_t home = slot_of(s->keys[k], s->cap);
        if (((k - home) & mask) >= ((k - hole) & mask)) {
            s->keys[hole] = s->keys[k];
            s->vals[hole] = s->vals[k];
            hole = k;
        }
    }
    s->keys[hole] = 0;
    s->vals[hole] = 0;
    s->n--;
    return val;
}

uint8_t gbci_idset_get(const gbci_idset_t *s, uint64_t id)
{
    if (id == 0 || s->cap == 0)
        return 0;
    for (size_t j = slot_of(id, s->cap); s->keys[j]; j = (j + 1) & (s->cap - 1))
        if (s->keys[j] == id)
            return s->vals[j];
    return 0;
}

void gbci_idset_free(gbci_idset_t *s)
{
    free(s->keys);
    free(s->vals);
    s->keys = NULL;
    s->vals = NULL;
    s->cap = s->n = 0;
}
