/* Activation collection: the host side of a grain type's activation table.
 *
 * The table (grain_table.h) has a fixed number of entries per partition. The
 * host sees every request before the kernel does (gb_rk_publish), so it keeps
 * track of the keys in the table and when each was last sent a message, and
 * makes room before a request needs it:
 *   - a request for a key that is not resident, to a partition that may be
 *     full, triggers a sweep: every activation idle for collection_age_s and
 *     with no request in flight is evicted, its state copied into host
 *     memory (the spill store);
 *   - a request for an evicted key triggers the same sweep, which writes the
 *     key's state back into the table before the request is published;
 *   - a request that still finds no room is refused (STATUS_BUSY, the table
 *     is full of activations in use) before it is published: its state
 *     stays where it was, nothing is lost silently.
 * The spill store is bounded in bytes (grains.max_evicted_kb). At the bound
 * idle activations stay in the table; a new key that needs room is refused
 * with GB_SLOT_EVICTED_FULL (STATUS_BUSY naming the bound), and an evicted
 * key comes back in exchange for its partition's longest-idle activation.
 * A deactivation of an evicted key drops its state from the store before it
 * is published (GB_REQ_ANSWERED: the kernel answers OK, no table entry).
 * A sweep runs while the grain type is quiesced (the backend's quiesce: no
 * kernel launch, no worker and no resident kernel touches the table), so an
 * eviction never races with a message for the same key, and the kernels'
 * hot path does nothing for it but check the request's status word. */
#ifndef GB_ACTIVATION_H
#define GB_ACTIVATION_H

#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_rk gb_rk_t;
typedef struct gbi_act gbi_act_t;

/* Counters of one grain type's activation collection (gb_rk_status_t). */
typedef struct gbi_act_stats {
    uint64_t resident;  /* keys the host counts as in the table (an upper bound) */
    uint64_t spilled;   /* evicted keys whose state waits in host memory */
    uint64_t evictions; /* activations collected so far */
    uint64_t restores;  /* evicted activations brought back */
    uint64_t refused;   /* requests refused for want of room */
    uint64_t refused_full;    /* of those, new keys refused because the spill store is full */
    uint64_t spilled_bytes;   /* host memory the spill store holds */
    uint64_t spill_max_bytes; /* its bound (grains.max_evicted_kb) */
    uint64_t spill_max;       /* evicted keys it holds at that bound */
    uint64_t sweeps;
} gbi_act_stats_t;

/* Creates the tracker for rk, after the backend created its table
 * (rk->tab_geom). */
gb_err gbi_act_new(gb_rk_t *rk, gbi_act_t **out);
void gbi_act_destroy(gbi_act_t **a);
/* Called by gb_rk_publish on the claimed requests [from, to) before their
 * stamps: notes their keys, sweeps when room or an evicted state is needed,
 * and refuses (sets the request's status) what cannot be served. */
void gbi_act_publish(gb_rk_t *rk, uint64_t from, uint64_t to);
void gbi_act_stats(const gbi_act_t *a, gbi_act_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
