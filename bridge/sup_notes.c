#include "sup_notes.h"

#include <string.h>

void gbi_notes_heartbeat(gbi_sup_notes_t *n, uint64_t seq)
{
    if (n->hb_seq || !seq)
        return;
    memcpy(n->at_hb, n->unconf, sizeof n->at_hb);
    n->hb_seq = seq;
}

void gbi_notes_answered(gbi_sup_notes_t *n, uint64_t seq)
{
    if (!n->hb_seq || seq < n->hb_seq)
        return;
    for (int k = 0; k < GBI_NC_N; k++)
        n->unconf[k] -= n->at_hb[k]; /* unconf only grew since the snapshot */
    memset(n->at_hb, 0, sizeof n->at_hb);
    n->hb_seq = 0;
}

void gbi_notes_worker_gone(gbi_sup_notes_t *n)
{
    for (int k = 0; k < GBI_NC_N; k++)
        n->fresh[k] += n->unconf[k];
    memset(n->unconf, 0, sizeof n->unconf);
    memset(n->at_hb, 0, sizeof n->at_hb);
    n->hb_seq = 0;
}
