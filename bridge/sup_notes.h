/* sup_notes.h: the counts the supervisor notes to its worker
 * (`gpubridge --supervise`).
 *
 * What the supervisor answers itself (frames too large, refused while a
 * client does not read, its own replies by status, connections that closed
 * with replies owed) is counted in the worker's Telemetry and metrics: the
 * supervisor sends the counts as notes (server_internal.h, GBI_NOTE_*) on
 * its heartbeat's connection. A note the pipe took is not yet a note the
 * worker read: a worker that dies leaves the notes queued towards it
 * unread. So a count sent stays *unconfirmed* until the worker answers a
 * heartbeat sent after it (it reads that connection in order), and what is
 * unconfirmed when the worker dies is noted again to the next one. */
#ifndef GB_SUP_NOTES_H
#define GB_SUP_NOTES_H

#include <stdint.h>

#include "metrics.h"

typedef enum gbi_nc {
    GBI_NC_TOO_LARGE,   /* frames over max_message_size (Telemetry.frames_too_large) */
    GBI_NC_UNREAD,      /* frames refused, their client not reading (frames_refused_unread) */
    GBI_NC_DROPPED,     /* connections closed with replies owed (connections_dropped) */
    GBI_NC_UNDELIVERED, /* replies discarded for clients gone (replies_undelivered) */
    GBI_NC_FRAMES,      /* client frames answered here (the metrics' frames) */
    GBI_NC_OWN,         /* replies made here, one count per status from here on */
    GBI_NC_N = GBI_NC_OWN + GB_METRICS_N_STATUS,
} gbi_nc;

typedef struct gbi_sup_notes {
    uint64_t fresh[GBI_NC_N];  /* not yet sent */
    uint64_t unconf[GBI_NC_N]; /* sent, not yet shown read */
    uint64_t at_hb[GBI_NC_N];  /* unconf as heartbeat hb_seq left */
    uint64_t hb_seq;           /* that heartbeat's correlation id; 0: none waits */
} gbi_sup_notes_t;

static inline void gbi_notes_add(gbi_sup_notes_t *n, gbi_nc k, uint64_t v) { n->fresh[k] += v; }

/* A note carrying fresh[k] was taken by the pipe. */
static inline void gbi_notes_sent(gbi_sup_notes_t *n, gbi_nc k)
{
    n->unconf[k] += n->fresh[k];
    n->fresh[k] = 0;
}

/* Heartbeat seq was sent after every note so far: once answered, they were
 * read. One waits at a time (a later one is not snapshotted meanwhile). */
void gbi_notes_heartbeat(gbi_sup_notes_t *n, uint64_t seq);
/* The worker answered heartbeat seq. */
void gbi_notes_answered(gbi_sup_notes_t *n, uint64_t seq);
/* The worker is gone: what it may not have read is noted again. */
void gbi_notes_worker_gone(gbi_sup_notes_t *n);

#endif
