/* The per-message step of the dispatch loop, shared by every backend: validate
 * the request header, find or activate the grain, run its handler, fill in the
 * reply header. The loops around it (ring kernel, relaunch kernel, cpu worker)
 * differ in how they read and publish slots; this is what they share. */
#ifndef GB_DISPATCH_H
#define GB_DISPATCH_H

#include "gpubridge/detail/grain_table.h"
#include "gpubridge/detail/large_payload.h"
#include "gpubridge/mail.h"
#include "gpubridge/ring.h"
#include "gpubridge/team.h"

/* What the handler of a large request returned; failed: see gbi_mail_failed. */
typedef struct gbi_large_ret {
    uint32_t st, out_len, aux, failed;
} gbi_large_ret_t;

/* Whether a GB_SLOT_MAIL reply (payload pl, len bytes) is a failed turn:
 * the handler's status in its trailer is an error. Its messages still go
 * (mail.h), but the turn counts with the errors as any other refusal. */
GB_HD int gbi_mail_failed(uint32_t st, const unsigned char *pl, uint32_t len)
{
    if (st != GB_SLOT_MAIL || !pl || len < sizeof(gb_mail_trailer_t))
        return 0;
    const gb_mail_trailer_t *t = (const gb_mail_trailer_t *)(pl + len - sizeof *t);
    return t->status != GB_SLOT_OK && t->status != GB_SLOT_FORWARDED;
}

/* The step before the handler: checks the header, handles the reserved types,
 * finds or activates the grain. Returns GBI_RUN_HANDLER with *state set, or
 * the reply's status. copy16: see gb_grain_find. Team kernels run it on one
 * thread, then the handler on the whole team. */
#define GBI_RUN_HANDLER 0xFFFFu
GB_HD uint32_t gbi_dispatch_pre(gb_grain_table_t *tab, uint32_t lane, const gb_slot_hdr_t *in, uint32_t pl_cap,
                                uint32_t test_flags, void **state, uint64_t *copy16)
{
    (void)test_flags;
    if (in->status != 0 && in->status != GB_REQ_LARGE) /* the host refused it, or carried it out
                                                         * (activation.c): no state touched */
        return in->status == GB_REQ_ANSWERED ? (uint32_t)GB_SLOT_OK : in->status;
    if (in->len > pl_cap)
        return GB_SLOT_TOO_LARGE; /* the length is the producer's claim; never trust it past the slot */
    if (in->type == GB_MSG_DEACTIVATE_KEY)
        return gb_grain_remove(tab, lane, in->key) ? GB_SLOT_OK : GB_SLOT_NOT_ACTIVE;
    if (in->type == GB_MSG_TEST_FAULT) {
#if defined(__CUDA_ARCH__)
        if (test_flags & GB_TEST_ALLOW_FAULT) {
            /* Test hook: an illegal address, which makes the context's error sticky (700). */
            volatile int *bad = (volatile int *)(uintptr_t)0x10;
            *bad = 1;
        }
#endif
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    }
    int64_t e = gb_grain_find(tab, lane, in->key, 1, copy16);
    if (e < 0)
        return GB_SLOT_GRAIN_TABLE_FULL;
    *state = gb_grain_state(tab, e);
    return GBI_RUN_HANDLER;
}

/* What a handler returned, as the reply's status: the statuses a handler
 * may return (grain.h; those gb_grain_send and gb_grain_forward hand it,
 * mail.h; with mail, for a type that declares targets, GB_SLOT_FORWARDED
 * too, which gb_mail_finish checks) pass, anything else becomes
 * GB_SLOT_HANDLER_ERROR. The rest are the dispatch's own or the bridge's:
 * as a reply's status they would tell the client of a full table, a failed
 * GPU or a reply that never comes (LINKED), and GB_SLOT_FROM statuses name
 * another type. */
GB_HD uint32_t gbi_handler_status(uint32_t st, int mail)
{
    return st == GB_SLOT_OK || st == GB_SLOT_HANDLER_ERROR || st == GB_SLOT_UNKNOWN_MESSAGE_TYPE ||
                   st == GB_SLOT_TOO_LARGE || st == GB_SLOT_BAD_TARGET || st == GB_SLOT_MAIL_FULL ||
                   (mail && st == GB_SLOT_FORWARDED)
               ? st
               : (uint32_t)GB_SLOT_HANDLER_ERROR;
}

/* The reply's header, all but seq, once the handler has run (or not). Returns
 * 1 when the reply is an error (for the errors counter). */
GB_HD int gbi_dispatch_post(const gb_slot_hdr_t *in, gb_slot_hdr_t *out, uint32_t st, uint32_t out_len,
                            uint32_t aux)
{
    out->key = in->key;
    out->corr = in->corr;
    out->type = in->type;
    out->status = (uint16_t)st;
    out->len = st == GB_SLOT_OK || st == GB_SLOT_MAIL ? out_len : 0; /* a MAIL reply: mail.h */
    out->aux = aux;
    return st != GB_SLOT_OK && st != GB_SLOT_MAIL && st != GB_SLOT_LINKED;
}

#if defined(__CUDACC__)
#include "gpubridge/device/link.cuh"

/* Target types a grain's traits declare (G::n_targets; 0 when it has none). */
template <typename G, typename = void> struct gbi_n_targets {
    static constexpr uint32_t value = 0;
};
template <typename G> struct gbi_n_targets<G, decltype((void)G::n_targets)> {
    static constexpr uint32_t value = G::n_targets;
};

/* Runs G's handler; for a type that declares targets, with this turn's mail
 * (mail.h), which leaves with the reply, or, on the device with links (lt
 * and lt->out not NULL), a lone forward by its link (device/link.cuh: the turn then
 * answers GB_SLOT_LINKED). A type without targets runs as before: no mail,
 * nothing added to its kernels. */
template <typename G>
GB_HD uint32_t gbi_run_handler(const gb_grain_ctx_t *ctx, uint64_t key, void *state, uint16_t type,
                               const unsigned char *in, uint32_t in_len, unsigned char *out, uint32_t out_cap,
                               uint32_t *out_len, uint32_t *aux, const gb_link_turn_t *lt = NULL)
{
    if constexpr (gbi_n_targets<G>::value == 0) {
        (void)key;
        return gbi_handler_status(G::on_message(ctx, state, type, in, in_len, out, out_cap, out_len, aux), 0);
    } else {
        gb_grain_mail_t m;
        gb_mail_begin(&m, key, out, out_cap, gbi_n_targets<G>::value);
        gb_grain_ctx_t c = *ctx;
        c.mail = &m;
        const uint32_t st =
            gbi_handler_status(G::on_message(&c, state, type, in, in_len, out, out_cap, out_len, aux), 1);
#if defined(__CUDA_ARCH__)
        if (lt && lt->out) {
            if (m.n == 1 && m.forwarded && gbk_link_forward(lt, &m)) {
                *out_len = 0;
                return GB_SLOT_LINKED;
            }
            if (m.n)
                m.hops = gbk_link_hold(lt->out, lt->cache, lt->n_devs, lt->dev, lt->origin.hops, m.top, m.used,
                                       m.n_targets);
        }
#else
        (void)lt;
#endif
        return gb_mail_finish(&m, out, st, out_len);
    }
}

/* The per-type form the kernels use: G is a grain's traits (G::on_message, a
 * __forceinline__ handler; gpubridge/grain.h makes them), so the handler is
 * compiled into the kernel with no switch on a kind.
 *
 * The large path is not inlined on the GPU: the ring kernel keeps the
 * one-slot path's code and registers, and saves what is live around this
 * call only on the large path. */
template <typename G>
static __host__ __device__ __noinline__ gbi_large_ret_t gbi_large_run(gb_grain_ctx_t ctx, uint64_t key, void *state,
                                                                      uint16_t type, const unsigned char *desc)
{
    const unsigned char *in;
    unsigned char *out;
    uint32_t in_len, out_cap;
    gbi_large_ret_t r = {GB_SLOT_UNKNOWN_MESSAGE_TYPE, 0, 0, 0};
    gbi_large_resolve(desc, &in, &in_len, &out, &out_cap);
    r.st = gbi_run_handler<G>(&ctx, key, state, type, in, in_len, out, out_cap, &r.out_len, &r.aux);
    if constexpr (gbi_n_targets<G>::value != 0)
        r.failed = (uint32_t)gbi_mail_failed(r.st, out, r.out_len);
    return r;
}

/* Handles request `in` (header + payload, already read) and writes the reply's
 * header (all but seq) into *out and its payload into out_pl (a large
 * request's: where its descriptor says). lt: the turn's device links
 * (lt->out NULL: none to use, as for a large request), or NULL. Returns 1 when the reply is an
 * error (for the errors counter). */
template <typename G>
GB_HD int gbi_dispatch_one(const gb_grain_ctx_t *ctx, gb_grain_table_t *tab, uint32_t lane, const gb_slot_hdr_t *in,
                           const unsigned char *in_pl, gb_slot_hdr_t *out, unsigned char *out_pl, uint32_t pl_cap,
                           uint32_t test_flags, const gb_link_turn_t *lt = NULL)
{
    uint32_t out_len = 0, aux = 0, st;
    int failed = 0; /* a GB_SLOT_MAIL turn whose handler failed */
    void *state = NULL;
#if defined(__CUDA_ARCH__)
    if (tab->entry_size == 32) {
        /* A state of up to 16 bytes comes with the lookup's loads; the
         * handler runs on a copy in registers (a call site of its own, so the
         * copy never needs an address), written back once. */
        __align__(16) uint64_t copy[2];
        st = gbi_dispatch_pre(tab, lane, in, pl_cap, test_flags, &state, copy);
        if (st == GBI_RUN_HANDLER && gbi_is_large(in)) {
            /* On the state in the table: the copy keeps no address. */
            const gbi_large_ret_t r = gbi_large_run<G>(*ctx, in->key, state, in->type, in_pl);
            st = r.st, out_len = r.out_len, aux = r.aux, failed = (int)r.failed;
        } else if (st == GBI_RUN_HANDLER) {
            st = gbi_run_handler<G>(ctx, in->key, copy, in->type, in_pl, in->len, out_pl, pl_cap, &out_len, &aux,
                                    lt);
            *(uint4 *)state = *(const uint4 *)copy;
            if constexpr (gbi_n_targets<G>::value != 0)
                failed = gbi_mail_failed(st, out_pl, out_len);
        }
    } else
#endif
    {
        st = gbi_dispatch_pre(tab, lane, in, pl_cap, test_flags, &state, NULL);
        if (st == GBI_RUN_HANDLER && gbi_is_large(in)) {
            const gbi_large_ret_t r = gbi_large_run<G>(*ctx, in->key, state, in->type, in_pl);
            st = r.st, out_len = r.out_len, aux = r.aux, failed = (int)r.failed;
        } else if (st == GBI_RUN_HANDLER) {
            st = gbi_run_handler<G>(ctx, in->key, state, in->type, in_pl, in->len, out_pl, pl_cap, &out_len, &aux,
                                    lt);
            if constexpr (gbi_n_targets<G>::value != 0)
                failed = gbi_mail_failed(st, out_pl, out_len);
        }
    }
    return gbi_dispatch_post(in, out, st, out_len, aux) | failed;
}
#endif

/* The host's form (the cpu backend): the handler through its descriptor's
 * function pointer; n_targets: the targets it declares (0: no mail). */
static inline int gbi_dispatch_one_fn(gb_grain_handler_fn fn, uint32_t n_targets, const gb_grain_ctx_t *ctx,
                                      gb_grain_table_t *tab, uint32_t lane, const gb_slot_hdr_t *in, const unsigned char *in_pl,
                                      gb_slot_hdr_t *out, unsigned char *out_pl, uint32_t pl_cap, uint32_t test_flags)
{
    uint32_t out_len = 0, aux = 0;
    void *state = NULL;
    uint32_t st = gbi_dispatch_pre(tab, lane, in, pl_cap, test_flags, &state, NULL);
    if (st == GBI_RUN_HANDLER) {
        const unsigned char *ipl = in_pl;
        unsigned char *opl = out_pl;
        uint32_t ilen = in->len, ocap = pl_cap;
        if (gbi_is_large(in))
            gbi_large_resolve(in_pl, &ipl, &ilen, &opl, &ocap);
        if (n_targets == 0) {
            st = gbi_handler_status(fn(ctx, state, in->type, ipl, ilen, opl, ocap, &out_len, &aux), 0);
        } else {
            gb_grain_mail_t m;
            gb_mail_begin(&m, in->key, opl, ocap, n_targets);
            gb_grain_ctx_t c = *ctx;
            c.mail = &m;
            st = gb_mail_finish(&m, opl, gbi_handler_status(fn(&c, state, in->type, ipl, ilen, opl, ocap, &out_len, &aux), 1),
                                &out_len);
        }
        return gbi_dispatch_post(in, out, st, out_len, aux) | gbi_mail_failed(st, opl, out_len);
    }
    return gbi_dispatch_post(in, out, st, out_len, aux);
}

#endif
