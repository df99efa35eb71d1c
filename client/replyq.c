/* replyq.c: replies that arrived for gbc_send requests, waiting for gbc_poll
 * (a ring that grows; replies move in and out without copying payloads). */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

int gbci_replyq_push(gbci_replyq_t *q, gbc_reply_t *r)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        gbc_reply_t *nr = malloc(cap * sizeof *nr);
        if (!nr)
            return -1;
        /* Unwrap the ring into the new array. */
        for (size_t i = 0; i < q->n; i++)
            nr[i] = q->r[(q->head + i) % q->cap];
        free(q->r);
        q->r = nr;
        q->cap = cap;
        q->head = 0;
    }
    q->r[(q->head + q->n) % q->cap] = *r;
    q->n++;
    memset(r, 0, sizeof *r);
    return 0;
}

bool gbci_replyq_pop(gbci_replyq_t *q, gbc_reply_t *out)
{
    if (q->n == 0)
        return false;
    *out = q->r[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return true;
}

void gbci_replyq_free(gbci_replyq_t *q)
{
    gbc_reply_t r;
    while (gbci_replyq_pop(q, &r))
        gbc_reply_clear(&r);
    free(q->r);
    memset(q, 0, sizeof *q);
}
