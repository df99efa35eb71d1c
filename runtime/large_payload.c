/* The host side of large messages (large_payload.h): the large area's
 * allocator, the producer's claim of a large request, and the consumer's view
 * of a large reply.
 *
 * The area is a byte FIFO. The producer allocates a request's record and its
 * reply space as one contiguous piece at `head` (skipping the area's end when
 * the piece would wrap) and pushes an entry {position, end}; the consumer,
 * when it consumes the reply at that position, moves `tail` to its end.
 * Replies are consumed in request order, so pieces are freed in the order
 * they were allocated. An entry per request in flight at most: the FIFO has
 * the ring's capacity and never overflows.
 *
 * Sizing: the area holds 4 x large_max (+ a little), so a piece of a
 * largest record and a largest reply (2 x large_max) fits whenever the area
 * is empty, wherever head stands. */
#include "gpubridge/detail/large_payload.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime_internal.h"

typedef struct gbi_large_entry {
    uint64_t pos;     /* ring position of the request */
    uint64_t end;     /* head after its piece: tail moves here when its reply is consumed */
    uint64_t out_off; /* its reply, as an offset in the area */
    uint32_t out_cap;
    uint32_t _pad;
} gbi_large_entry_t;

struct gbi_large {
    unsigned char *host; /* the host's view of the area */
    uint64_t dev;        /* the kernel's view (a device address in GPU modes) */
    uint64_t size;
    uint32_t max;        /* largest record, and largest reply */
    uint32_t mask;       /* FIFO entries - 1 */
    gbi_large_entry_t *fifo;
    /* Producer-owned. */
    __attribute__((aligned(GB_LINE))) uint64_t head; /* bytes allocated, monotonic */
    uint64_t pushed;                                  /* entries pushed (release) */
    uint64_t tail_seen;                               /* the consumer's tail as last read */
    /* Consumer-owned. */
    __attribute__((aligned(GB_LINE))) uint64_t tail; /* bytes freed (release) */
    uint64_t popped;
    uint64_t pushed_seen; /* `pushed` as read with `published` (gbi_large_refresh) */
};

static uint64_t round16(uint64_t n) { return (n + 15) & ~(uint64_t)15; }

uint64_t gbi_large_area_size(uint32_t large_max)
{
    return large_max ? (4ull * large_max + 64 + 4095) & ~4095ull : 0;
}

gb_err gbi_large_new(gb_rk_t *rk)
{
    if (rk->large_size == 0)
        return GB_OK;
    gbi_large_t *L = aligned_alloc(GB_LINE, (sizeof *L + GB_LINE - 1) / GB_LINE * GB_LINE);
    if (!L)
        return GB_ERR_NOMEM;
    memset(L, 0, sizeof *L);
    L->fifo = calloc(rk->geom.cap, sizeof *L->fifo);
    if (!L->fifo) {
        free(L);
        return GB_ERR_NOMEM;
    }
    const size_t off = gb_region_large_off(rk->geom);
    L->host = rk->region + off;
    L->dev = (uint64_t)(uintptr_t)rk->region + off;
#ifdef GB_HAVE_CUDA
    if (rk->p.mode != GB_MODE_CPU)
        L->dev = (uint64_t)(uintptr_t)gbi_cuda_region_dev(rk) + off;
#endif
    L->size = rk->large_size;
    L->max = rk->p.large_max;
    L->mask = rk->geom.cap - 1;
    rk->large = L;
    return GB_OK;
}

void gbi_large_free(gb_rk_t *rk)
{
    if (!rk->large)
        return;
    free(rk->large->fifo);
    free(rk->large);
    rk->large = NULL;
}

uint32_t gb_rk_large_max(const gb_rk_t *rk) { return rk->large ? rk->large->max : 0; }

/* With the producer's credit: a free request slot (as gb_rk_claim checks it). */
static int slot_free(gb_rk_t *rk)
{
    if (rk->in_head - rk->credit_tail < rk->geom.cap)
        return 1;
    rk->credit_tail = __atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE);
    return rk->in_head - rk->credit_tail < rk->geom.cap;
}

/* Where a piece of `bytes` starts (absolute), or UINT64_MAX when the area has
 * no room for it now. */
static uint64_t place(gbi_large_t *L, uint64_t bytes)
{
    uint64_t start = L->head, off = start % L->size;
    if (off + bytes > L->size)
        start += L->size - off; /* never wrap a piece: start the next lap */
    if (start + bytes - L->tail_seen > L->size) {
        L->tail_seen = __atomic_load_n(&L->tail, __ATOMIC_ACQUIRE);
        if (start + bytes - L->tail_seen > L->size)
            return UINT64_MAX;
    }
    return start;
}

gb_err gb_rk_claim_large(gb_rk_t *rk, uint64_t key, uint64_t corr, uint16_t type, const void *rec, uint32_t len,
                         uint32_t reply_max)
{
    gbi_large_t *L = rk->large;
    if (rk->state == GB_RK_TERMINATED || rk->state == GB_RK_FAILED)
        return GB_ERR_TERMINATED;
    if (!L || len > L->max || reply_max > L->max)
        return GB_ERR_TOO_LARGE;
    const uint64_t in_bytes = round16(len), out_bytes = round16(reply_max), bytes = in_bytes + out_bytes;
    if (!slot_free(rk))
        return GB_ERR_FULL;
    const uint64_t start = place(L, bytes ? bytes : 16);
    if (start == UINT64_MAX)
        return GB_ERR_FULL;
    const uint64_t off = start % L->size;
    if (len)
        memcpy(L->host + off, rec, len);
#ifdef GB_HAVE_CUDA
    /* Staging: the record goes to the device before its slot can be seen. */
    if (rk->placement == GB_PLACEMENT_DEVICE_PINNED || rk->placement == GB_PLACEMENT_DEVICE_MALLOC) {
        gb_err err = gbi_cuda_region_copy(rk, gb_region_large_off(rk->geom) + off, in_bytes, 1);
        if (err != GB_OK)
            return err;
    }
#endif
    const uint64_t pos = rk->in_head;
    gb_slot_hdr_t *s = gb_rk_claim(rk); /* non-NULL: slot_free said so */
    __atomic_store_n(&s->key, key, __ATOMIC_RELEASE); /* as gb_rk_send: the lap-behind check reads it */
    s->corr = corr;
    s->type = type;
    s->status = GB_REQ_LARGE;
    s->len = sizeof(gb_large_desc_t);
    gb_large_desc_t d = {L->dev + off, L->dev + off + in_bytes, len, (uint32_t)out_bytes};
    memcpy(gb_slot_payload(s), &d, sizeof d);
    gbi_large_entry_t *e = &L->fifo[L->pushed & L->mask];
    e->pos = pos;
    e->end = start + (bytes ? bytes : 16);
    e->out_off = off + in_bytes;
    e->out_cap = (uint32_t)out_bytes;
    L->head = e->end;
    /* Before the slot's publish: a consumer that sees the request published
     * sees its entry (gbi_large_refresh). */
    __atomic_store_n(&L->pushed, L->pushed + 1, __ATOMIC_RELEASE);
    return GB_OK;
}

void gbi_large_refresh(gb_rk_t *rk)
{
    rk->large->pushed_seen = __atomic_load_n(&rk->large->pushed, __ATOMIC_ACQUIRE);
}

/* The entry of the reply at the consumer's position, or NULL: it is not large. */
static const gbi_large_entry_t *front(const gb_rk_t *rk)
{
    const gbi_large_t *L = rk->large;
    if (!L || L->popped == L->pushed_seen)
        return NULL;
    const gbi_large_entry_t *e = &L->fifo[L->popped & L->mask];
    return e->pos == rk->out_tail ? e : NULL;
}

void gbi_large_consume(gb_rk_t *rk)
{
    const gbi_large_entry_t *e = front(rk);
    if (!e)
        return;
    gbi_large_t *L = rk->large;
    L->popped++;
    __atomic_store_n(&L->tail, e->end, __ATOMIC_RELEASE);
}

const unsigned char *gb_rk_reply_payload(gb_rk_t *rk, const gb_slot_hdr_t *h)
{
    const gbi_large_entry_t *e = front(rk);
    if (!e)
        return (const unsigned char *)(h + 1);
    if (h->len > e->out_cap)
        return NULL; /* the handler claims more than it had room for */
#ifdef GB_HAVE_CUDA
    if (h->len && (rk->placement == GB_PLACEMENT_DEVICE_PINNED || rk->placement == GB_PLACEMENT_DEVICE_MALLOC) &&
        gbi_cuda_region_copy(rk, gb_region_large_off(rk->geom) + e->out_off, round16(h->len), 0) != GB_OK)
        return NULL;
#endif
    return rk->large->host + e->out_off;
}
