/* zq_bytes.c: bytes of large reply frames each client has queued in
 * ZeroMQ (zq_bytes.h). */
#include "zq_bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* One client's count. refs: the table's (while listed) plus one per frame
 * ZeroMQ holds; whoever drops the last frees it. */
typedef struct zq_ent {
    size_t bytes; /* atomic */
    int refs;     /* atomic */
    uint8_t id_len;
    uint8_t id[255];
} zq_ent_t;

struct gbi_zq {
    zq_ent_t **ents;
    size_t n, cap;
};

/* The buffer a large frame is sent from: its entry and length before it. */
typedef struct zq_buf {
    zq_ent_t *ent;
    size_t len;
    max_align_t data[];
} zq_buf_t;

static void ent_unref(zq_ent_t *e)
{
    if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(e);
}

/* ZeroMQ's free function, on its I/O thread: the frame is written out. */
static void frame_done(void *data, void *hint)
{
    (void)data;
    zq_buf_t *b = hint;
    /* Acquire: what the sending thread wrote into b before it handed b to
     * ZeroMQ (a sanitizer does not see ZeroMQ's own synchronisation). */
    const size_t len = __atomic_load_n(&b->len, __ATOMIC_ACQUIRE);
    __atomic_sub_fetch(&b->ent->bytes, len, __ATOMIC_RELEASE);
    ent_unref(b->ent);
    free(b);
}

gbi_zq_t *gbi_zq_new(void) { return calloc(1, sizeof(gbi_zq_t)); }

void gbi_zq_destroy(gbi_zq_t **zq)
{
    if (!zq || !*zq)
        return;
    for (size_t i = 0; i < (*zq)->n; i++)
        ent_unref((*zq)->ents[i]);
    free((*zq)->ents);
    free(*zq);
    *zq = NULL;
}

/* Drops the entries of clients with nothing queued, so the table holds
 * only clients whose large frames ZeroMQ still has. */
static void sweep(gbi_zq_t *zq)
{
    size_t w = 0;
    for (size_t i = 0; i < zq->n; i++) {
        if (__atomic_load_n(&zq->ents[i]->bytes, __ATOMIC_ACQUIRE) == 0)
            ent_unref(zq->ents[i]);
        else
            zq->ents[w++] = zq->ents[i];
    }
    zq->n = w;
}

static zq_ent_t *find(gbi_zq_t *zq, const uint8_t *id, size_t id_len)
{
    for (size_t i = 0; i < zq->n; i++)
        if (zq->ents[i]->id_len == id_len && memcmp(zq->ents[i]->id, id, id_len) == 0)
            return zq->ents[i];
    return NULL;
}

static zq_ent_t *find_or_add(gbi_zq_t *zq, const uint8_t *id, size_t id_len)
{
    zq_ent_t *e = find(zq, id, id_len);
    if (e || id_len > sizeof e->id)
        return e;
    if (zq->n == zq->cap) {
        sweep(zq);
        if (zq->n == zq->cap) {
            size_t cap = zq->cap ? zq->cap * 2 : 16;
            zq_ent_t **ents = realloc(zq->ents, cap * sizeof *ents);
            if (!ents)
                return NULL;
            zq->ents = ents;
            zq->cap = cap;
        }
    }
    if (!(e = calloc(1, sizeof *e)))
        return NULL;
    e->refs = 1;
    e->id_len = (uint8_t)id_len;
    memcpy(e->id, id, id_len);
    zq->ents[zq->n++] = e;
    return e;
}

/* The frame part: copied by ZeroMQ when small (or untracked), else from a
 * buffer of ours that counts against the client until written out. */
static void send_body(zq_ent_t *e, void *sock, const void *frame, size_t len)
{
    zq_buf_t *b = e ? malloc(sizeof *b + len) : NULL;
    zmq_msg_t m;
    if (!b || zmq_msg_init_data(&m, memcpy(b->data, frame, len), len, frame_done, b) != 0) {
        free(b);
        zmq_send(sock, frame, len, ZMQ_DONTWAIT);
        return;
    }
    b->ent = e;
    __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->bytes, len, __ATOMIC_RELAXED);
    __atomic_store_n(&b->len, len, __ATOMIC_RELEASE); /* last: frame_done's acquire */
    if (zmq_msg_send(&m, sock, ZMQ_DONTWAIT) < 0)
        zmq_msg_close(&m); /* frame_done gives the bytes back */
}

int gbi_zq_send(gbi_zq_t *zq, void *sock, const uint8_t *id, size_t id_len, int delim, const void *frame,
                size_t len)
{
    zq_ent_t *e = NULL;
    if (len > GBI_ZQ_LARGE && zq) {
        /* Out of memory for the count: sent untracked, as before. */
        e = find_or_add(zq, id, id_len);
        const size_t held = e ? __atomic_load_n(&e->bytes, __ATOMIC_ACQUIRE) : 0;
        if (held && held + len > GBI_ZQ_MAX)
            return -1;
    }
    if (zmq_send(sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return zmq_errno() == EAGAIN ? -1 : 1;
    /* The first part took a place in the queue: the others follow it. */
    if (delim)
        zmq_send(sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    send_body(e, sock, frame, len);
    return 0;
}
