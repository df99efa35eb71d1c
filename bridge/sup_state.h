/* sup_state.h: the grain types' control state across supervised worker
 * restarts (`gpubridge --supervise`).
 *
 * A type deactivated or terminated by a client's control request stays so
 * when its worker dies and a new one starts. The supervisor learns the
 * states from its heartbeat (a ListGrainTypes and a StatusRequest per type,
 * every second: the worker's own truth, so only requests the worker took
 * count), writes them to a file in the worker's private directory before
 * each start, and the new worker applies them before it serves its first
 * frame. A change in the last second before a worker dies may be missed. */
#ifndef GB_SUP_STATE_H
#define GB_SUP_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define GBI_SUP_STATE_FILE "types.state" /* in the worker's private directory */
#define GBI_SUP_STATE_TYPES 256          /* types remembered at most */

typedef enum gbi_kept {
    GBI_KEPT_NONE = 0,   /* active (or failed: a new worker starts it afresh) */
    GBI_KEPT_INACTIVE,   /* Deactivate */
    GBI_KEPT_TERMINATED, /* Terminate */
} gbi_kept;

typedef struct gbi_sup_state {
    char *names[GBI_SUP_STATE_TYPES]; /* owned; NULL past n */
    gbi_kept kept[GBI_SUP_STATE_TYPES];
    size_t n;
} gbi_sup_state_t;

/* The heartbeat's frame: a batch of ListGrainTypes and a StatusRequest per
 * known type, correlation ids from seq on. Returns its length, 0 when it
 * does not fit cap. */
size_t gbi_sup_state_request(const gbi_sup_state_t *st, uint64_t seq, uint8_t *buf, size_t cap);

/* Takes what a heartbeat reply frame says (others are ignored). */
void gbi_sup_state_reply(gbi_sup_state_t *st, const uint8_t *buf, size_t len);

/* Writes the types to keep to path (atomically: a temporary file renamed
 * over it); none: removes it. 0, or -1 with errno. */
int gbi_sup_state_write(const gbi_sup_state_t *st, const char *path);

/* Frees the names; st is empty after. */
void gbi_sup_state_clear(gbi_sup_state_t *st);

/* In a new worker, before it serves: applies the file its supervisor wrote
 * (a missing file: nothing to do). Returns how many types it changed. */
size_t gbi_worker_state_apply(const char *path, gb_engine_t *e);

#endif
