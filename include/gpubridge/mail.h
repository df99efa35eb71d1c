/* Messages between grains: what a handler's gb_grain_send / gb_grain_forward
 * (gpubridge/grain.h) lay down, shared by the host (C11) and the kernels.
 *
 * Transport. The messages of one turn travel with the turn's reply: the
 * handler's calls write them below the end of its out buffer, and once it
 * returns, the dispatch step (dispatch.h) moves them behind the reply and
 * marks the reply GB_SLOT_MAIL. The host's router (server/server_route.c)
 * reads them when it drains the reply ring and puts each into its target
 * type's request ring, as it does a client's request. So a kernel never waits
 * for a target's room. On a GPU in persistent mode a turn's lone forward can
 * instead leave by a device link (device/link.h) and never reach the host;
 * whatever a link cannot take comes here (docs/design.md, "Messages between
 * grains").
 *
 * A GB_SLOT_MAIL reply's payload (len bytes, every part 16-byte aligned):
 *
 *   [reply: trailer.reply_len bytes, padded to 16]
 *   [messages: trailer.mail_len bytes, the LAST sent first]
 *   [gb_mail_trailer_t]
 *
 * each message a gb_mail_msg_t then its record, padded to 16. */
#ifndef GB_MAIL_H
#define GB_MAIL_H

#include <stdint.h>

#include "gpubridge/ring.h"

#define GB_MAIL_FORWARD 1u  /* gb_mail_msg_t.flags: the turn's request, passed on */
/* gb_mail_msg_t.flags: its sender type has a device link to its target
 * (device/link.h), so the host counts it delivered to keep the pair's order. */
#define GB_MAIL_HELD 2u
#define GB_MAIL_MAX_MSGS 64 /* messages of one turn */
#define GB_MAIL_MAX_TARGETS 16 /* target types one grain type may declare */
#define GB_MAIL_MAGIC 0x4D4Cu /* "ML" */
/* Message types from here up are the bridge's (gpubridge/grain.h GB_MSG_*,
 * e.g. DeactivateKey): a grain may not send them. */
#define GB_MAIL_TYPE_RESERVED 0xFF00u

/* One message: 16 bytes, then len bytes of record, padded to 16. */
typedef struct gb_mail_msg {
    uint64_t key;   /* the target grain */
    uint16_t type;  /* its message type */
    uint8_t target; /* index into the sender type's targets */
    uint8_t flags;  /* GB_MAIL_FORWARD */
    uint32_t len;
} gb_mail_msg_t;

/* The last 16 bytes of a GB_SLOT_MAIL reply. */
typedef struct gb_mail_trailer {
    uint32_t reply_len; /* the handler's reply, at the payload's start */
    uint32_t mail_len;  /* bytes of messages after it */
    uint16_t status;    /* the handler's reply status, or GB_SLOT_FORWARDED */
    uint16_t n;         /* messages */
    uint16_t hops;      /* grains the turn's request passed by device links since the host counted */
    uint16_t magic;     /* GB_MAIL_MAGIC */
} gb_mail_trailer_t;

GB_STATIC_ASSERT(sizeof(gb_mail_msg_t) == 16, "a message header is 16 bytes");
GB_STATIC_ASSERT(sizeof(gb_mail_trailer_t) == 16, "the trailer is 16 bytes");

/* One turn's outgoing messages (gb_grain_ctx_t.mail): written by the
 * handler's calls, finished by the dispatch step. */
typedef struct gb_grain_mail {
    uint64_t self_key;  /* the key of the grain handling this turn */
    unsigned char *top; /* end of the out buffer (16-aligned): messages grow down from it */
    uint32_t room;      /* bytes the messages may take in all */
    uint32_t used;
    uint16_t n;
    uint16_t n_targets; /* the sender type's declared targets */
    uint16_t forwarded; /* 1 once the turn's request was forwarded */
    uint16_t hops;      /* the trailer's hops (device links) */
} gb_grain_mail_t;

GB_HD uint32_t gb_mail_pad16(uint32_t n) { return (n + 15u) & ~15u; }

/* memmove for either side (no libc on the device); n is small. */
GB_HD void gb_mail_move(unsigned char *dst, const unsigned char *src, uint32_t n)
{
    if (dst == src || n == 0)
        return;
    if (dst < src)
        for (uint32_t i = 0; i < n; i++)
            dst[i] = src[i];
    else
        for (uint32_t i = n; i-- > 0;)
            dst[i] = src[i];
}

/* Lays down one message; returns GB_SLOT_OK or why not (no mail here or a
 * bad target index: GB_SLOT_BAD_TARGET; type 0 or a reserved type:
 * GB_SLOT_UNKNOWN_MESSAGE_TYPE; no room: GB_SLOT_MAIL_FULL; a second
 * forward: GB_SLOT_HANDLER_ERROR). */
GB_HD uint16_t gb_mail_put(gb_grain_mail_t *m, uint32_t target, uint64_t key, uint16_t type, uint32_t flags,
                           const void *rec, uint32_t len)
{
    if (!m || target >= m->n_targets)
        return GB_SLOT_BAD_TARGET;
    if (type == 0 || type >= GB_MAIL_TYPE_RESERVED) /* 0 and the bridge's own (GB_MSG_*) */
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if ((flags & GB_MAIL_FORWARD) && m->forwarded)
        return GB_SLOT_HANDLER_ERROR;
    const uint32_t size = 16u + gb_mail_pad16(len);
    if (m->n >= GB_MAIL_MAX_MSGS || len > m->room || size > m->room - m->used)
        return GB_SLOT_MAIL_FULL;
    unsigned char *at = m->top - m->used - size;
    if (len)
        gb_mail_move(at + 16, (const unsigned char *)rec, len); /* rec may lie in the out buffer */
    gb_mail_msg_t h;
    h.key = key;
    h.type = type;
    h.target = (uint8_t)target;
    h.flags = (uint8_t)flags;
    h.len = len;
    *(gb_mail_msg_t *)at = h;
    m->used += size;
    m->n++;
    if (flags & GB_MAIL_FORWARD)
        m->forwarded = 1;
    return GB_SLOT_OK;
}

/* Sets up m for the handler of grain `key` whose out buffer is out (cap bytes). */
GB_HD void gb_mail_begin(gb_grain_mail_t *m, uint64_t key, unsigned char *out, uint32_t cap, uint32_t n_targets)
{
    const uint32_t c16 = cap & ~15u;
    m->self_key = key;
    m->top = out + c16;
    m->room = c16 >= 16 ? c16 - 16 : 0; /* the trailer's room */
    m->used = 0;
    m->n = 0;
    m->n_targets = (uint16_t)n_targets;
    m->forwarded = 0;
    m->hops = 0;
}

/* After the handler returned st with *out_len bytes of reply in out: with
 * messages, moves them behind the reply, adds the trailer and returns
 * GB_SLOT_MAIL (*out_len: the whole payload); without, returns st. A reply
 * that ran into the messages' room fails the turn (GB_SLOT_MAIL_FULL, the
 * messages dropped). */
GB_HD uint32_t gb_mail_finish(gb_grain_mail_t *m, unsigned char *out, uint32_t st, uint32_t *out_len)
{
    if (m->n == 0)
        return st == GB_SLOT_FORWARDED ? (uint32_t)GB_SLOT_HANDLER_ERROR : st; /* FORWARDED without a forward */
    if (m->forwarded)
        st = GB_SLOT_FORWARDED; /* the forward's target answers the caller */
    else if (st == GB_SLOT_FORWARDED)
        st = GB_SLOT_HANDLER_ERROR; /* FORWARDED, but no forward was accepted: the caller must hear */
    const uint32_t reply_len = st == GB_SLOT_OK ? *out_len : 0;
    const uint32_t off = gb_mail_pad16(reply_len);
    if (reply_len > m->room || off > m->room - m->used) {
        *out_len = 0;
        return GB_SLOT_MAIL_FULL;
    }
    gb_mail_move(out + off, m->top - m->used, m->used);
    gb_mail_trailer_t t;
    t.reply_len = reply_len;
    t.mail_len = m->used;
    t.status = (uint16_t)st;
    t.n = m->n;
    t.hops = m->hops;
    t.magic = GB_MAIL_MAGIC;
    *(gb_mail_trailer_t *)(out + off + m->used) = t;
    *out_len = off + m->used + 16u;
    return GB_SLOT_MAIL;
}

/* The reader's side (the host's router, or any embedding of the engine that
 * drains reply rings): checks GB_SLOT_MAIL payload pl (len bytes, as the
 * sender's kernel wrote it, so not trusted) and points msgs[i] at its
 * messages in the order they were sent (at most GB_MAIL_MAX_MSGS), each
 * record following its header. Returns how many, or -1 when malformed. */
GB_HD int gb_mail_parse(const unsigned char *pl, uint32_t len, gb_mail_trailer_t *t, const gb_mail_msg_t **msgs)
{
    if (!pl || len < sizeof *t || len % 16)
        return -1;
    *t = *(const gb_mail_trailer_t *)(pl + len - sizeof *t);
    const uint32_t off = gb_mail_pad16(t->reply_len);
    if (t->magic != GB_MAIL_MAGIC || t->n == 0 || t->n > GB_MAIL_MAX_MSGS || t->reply_len > len ||
        (uint64_t)off + t->mail_len + sizeof *t != len)
        return -1;
    const uint32_t end = off + t->mail_len;
    int n = 0;
    for (uint32_t at = off; at < end;) {
        const gb_mail_msg_t *m = (const gb_mail_msg_t *)(pl + at);
        if (n == t->n || end - at < 16 || m->len > end - at - 16)
            return -1;
        msgs[n++] = m;
        at += 16 + gb_mail_pad16(m->len);
    }
    if (n != t->n)
        return -1;
    for (int i = 0; i < n / 2; i++) { /* laid down last-sent first */
        const gb_mail_msg_t *x = msgs[i];
        msgs[i] = msgs[n - 1 - i];
        msgs[n - 1 - i] = x;
    }
    return n;
}

#endif
