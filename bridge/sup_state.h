/* sup_state.h: the grain types' control state across supervised worker
 * restarts (`gpubridge --supervise`).
 *
 * A type deactivated or terminated by a client's control request stays so
 * when its worker dies and a new one starts. The supervisor sees every
 * request and reply pass: it notes each Activate, Deactivate and Terminate
 * a client sends, and takes the change when the worker answers it
 * STATUS_OK (so only changes the worker made count, with the client's
 * authority checked there). Before each start it writes the types to keep
 * to a file in the worker's private directory, and the new worker applies
 * it before it serves its first frame. */
#ifndef GB_SUP_STATE_H
#define GB_SUP_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"

#define GBI_SUP_STATE_FILE "types.state" /* in the worker's private directory */
#define GBI_SUP_STATE_TYPES GB_MAX_GRAIN_TYPES /* types kept at most: all a bridge serves */
#define GBI_SUP_STATE_ASKED 256 /* state changes awaiting their replies at most (past it, the oldest is forgotten) */

typedef enum gbi_kept {
    GBI_KEPT_NONE = 0,   /* active */
    GBI_KEPT_INACTIVE,   /* Deactivate */
    GBI_KEPT_TERMINATED, /* Terminate */
} gbi_kept;

typedef struct gbi_sup_asked {
    uint64_t conn, corr; /* the client's connection (its tags' upper half) and the request's id; 0: free */
    gbi_kept to;
    char type[GB_NAME_LEN];
} gbi_sup_asked_t;

typedef struct gbi_sup_state {
    char names[GBI_SUP_STATE_TYPES][GB_NAME_LEN];
    gbi_kept kept[GBI_SUP_STATE_TYPES];
    size_t n;
    gbi_sup_asked_t asked[GBI_SUP_STATE_ASKED];
    size_t next, n_asked; /* the ring's next slot; slots in use */
} gbi_sup_state_t;

/* A client's envelope passing to the worker: notes it when it is an
 * Activate, Deactivate or Terminate (control: its encoded Control). */
void gbi_sup_state_asked(gbi_sup_state_t *st, uint64_t conn, uint64_t corr, const uint8_t *control, size_t len);

/* A reply passing to that client: takes the change it answers, when OK. */
void gbi_sup_state_answered(gbi_sup_state_t *st, uint64_t conn, uint64_t corr, int status);

/* Writes the types to keep to path (atomically: a temporary file renamed
 * over it); none: removes it. 0, or -1 with errno. */
int gbi_sup_state_write(const gbi_sup_state_t *st, const char *path);

/* In a new worker, before it serves: applies the file its supervisor wrote
 * (a missing file: nothing to do). Returns how many types it changed. */
size_t gbi_worker_state_apply(const char *path, gb_engine_t *e);

#endif
