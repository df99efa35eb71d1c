/* Grain types that message grains, for the messaging tests (tests/e2e_mail.c):
 * mt.a and mt.b bounce messages between them, mt.sink counts what reaches it.
 * Raw payloads; records are little-endian uint32/uint64. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <string.h>
#include <time.h>

#include "gpubridge/grain.h"
#include "mail_grains.h"

/* mt.a and mt.b: target 0 is the other one; mt.a's target 1 is mt.sink. */
GB_HD uint16_t mt_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                             uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)state;
    const uint64_t self = gb_grain_self_key(ctx);
    uint32_t v[2] = {0, 0};
    *out_len = 0;
    if (type == MT_BYTES) { /* a record larger than mt.b's slot arrives out of line */
        v[0] = in_len;
        for (uint32_t i = 0; i < in_len; i++)
            v[1] += in[i];
        memcpy(out, v, 8);
        *out_len = 8;
        return GB_SLOT_OK;
    }
    if (in_len > sizeof v)
        return GB_SLOT_TOO_LARGE;
    memcpy(v, in, in_len);
    switch (type) {
    case MT_HOPS: /* {left, made}: forwarded to the other until left is 0, then {made} */
        if (v[0] == 0) {
            memcpy(out, &v[1], 4);
            *out_len = 4;
            *aux = v[1];
            return GB_SLOT_OK;
        }
        v[0]--, v[1]++;
        return gb_grain_forward(ctx, MT_TO_OTHER, self, MT_HOPS, v, 8);
    case MT_WALK: /* as MT_HOPS, to key self + 1 each hop (so, with several devices, across them) */
        if (v[0] == 0) {
            memcpy(out, &v[1], 4);
            *out_len = 4;
            *aux = (uint32_t)self;
            return GB_SLOT_OK;
        }
        v[0]--, v[1]++;
        return gb_grain_forward(ctx, MT_TO_OTHER, self + 1, MT_WALK, v, 8);
    case MT_SEND: { /* {n, first}: n notes to mt.sink, numbered first.., then the reply {n} */
        for (uint32_t i = 0; i < v[0]; i++) {
            const uint64_t seq = (uint64_t)v[1] + i;
            const uint16_t st = gb_grain_send(ctx, MT_TARGET_SINK, self, MT_NOTE, &seq, 8);
            if (st != GB_SLOT_OK)
                return st;
        }
        memcpy(out, &v[0], 4);
        *out_len = 4;
        return GB_SLOT_OK;
    }
    case MT_BAD_TARGET:
        return gb_grain_forward(ctx, 9, self, MT_HOPS, v, 8);
    case MT_OVERSIZED: /* a record as large as the whole out buffer */
        return gb_grain_forward(ctx, MT_TO_OTHER, self, MT_HOPS, out, out_cap);
    case MT_CYCLE: /* forwarded to the other, which forwards it back, forever */
        return gb_grain_forward(ctx, MT_TO_OTHER, self, MT_CYCLE, NULL, 0);
    case MT_FANOUT: { /* the same, and a one-way copy each time: the messages double every hop */
        const uint16_t st = gb_grain_send(ctx, MT_TO_OTHER, self, MT_FANOUT, NULL, 0);
        return st != GB_SLOT_OK ? st : gb_grain_forward(ctx, MT_TO_OTHER, self, MT_FANOUT, NULL, 0);
    }
    case MT_FWD_SEQ: { /* a numbered note, forwarded: the sink sees whether a pair's forwards keep order */
        uint64_t seq;
        if (in_len != 8)
            return GB_SLOT_HANDLER_ERROR;
        memcpy(&seq, v, 8);
        return gb_grain_forward(ctx, MT_TARGET_SINK, self, MT_NOTE, &seq, 8);
    }
    case MT_BAD_STATUS: /* the caller must get an error, and the type's later replies must flow */
        if (in_len == 4) { /* a status of the record's choosing: one a handler may not return */
            uint32_t st;
            memcpy(&st, v, 4);
            return (uint16_t)st;
        }
        return GB_SLOT_LINKED;
    case MT_TO_SINK: /* the caller gets mt.sink's reply */
        return gb_grain_forward(ctx, MT_TARGET_SINK, self, MT_NOTE, NULL, 0);
    case MT_BIG: /* built in out, forwarded from there */
        if (v[0] > out_cap)
            return GB_SLOT_TOO_LARGE;
        for (uint32_t i = 0; i < v[0]; i++)
            out[i] = (unsigned char)(i * 7);
        return gb_grain_forward(ctx, MT_TO_OTHER, self, MT_BYTES, out, v[0]);
    case MT_SCRIBBLE: { /* writes past its reply, over the message's header (what the rules forbid) */
        const uint64_t seq = 0;
        const uint16_t st = gb_grain_send(ctx, MT_TARGET_SINK, self, MT_NOTE, &seq, 8);
        if (st != GB_SLOT_OK)
            return st;
        gb_mail_msg_t *m = (gb_mail_msg_t *)(out + (out_cap & ~15u) - 16u - gb_mail_pad16(8));
        m->flags = GB_MAIL_FORWARD;
        memcpy(out, "own", 3);
        *out_len = 3;
        return GB_SLOT_OK;
    }
    case MT_LOST_FWD: { /* ignores the forward's refusal */
        const uint64_t seq = 0;
        const uint16_t st = gb_grain_send(ctx, MT_TARGET_SINK, self, MT_NOTE, &seq, 8);
        if (st != GB_SLOT_OK)
            return st;
        (void)gb_grain_forward(ctx, MT_TO_OTHER, self, MT_HOPS, out, out_cap); /* MAIL_FULL */
        return GB_SLOT_FORWARDED;
    }
    default:
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    }
}

/* Busy for ms milliseconds: the GPU thread spins on the global timer, a
 * CPU thread sleeps. */
GB_HD void sink_busy(uint32_t ms)
{
#ifdef __CUDA_ARCH__
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < (unsigned long long)ms * 1000000ull);
#else
    const struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
#endif
}

/* mt.sink: NOTE counts (and checks that a key's numbered notes come in
 * order), GET replies {count, notes out of order}. */
GB_HD uint16_t sink_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                               uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                               uint32_t *aux)
{
    (void)ctx;
    uint64_t *s = (uint64_t *)state; /* count, last number seen + 1, out of order */
    *out_len = 0;
    if (out_cap < 16)
        return GB_SLOT_TOO_LARGE;
    if (type == MT_NOTE) {
        s[0]++;
        if (in_len == 8) {
            uint64_t seq;
            memcpy(&seq, in, 8);
            s[2] += seq + 1 <= s[1];
            s[1] = seq + 1;
        }
    } else if (type == MT_SLOW) {
        uint32_t ms;
        if (in_len != 4)
            return GB_SLOT_HANDLER_ERROR;
        memcpy(&ms, in, 4);
        sink_busy(ms > 5000 ? 5000 : ms);
    } else if (type != MT_GET) {
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    }
    *aux = (uint32_t)s[0];
    memcpy(out, &s[0], 8);
    memcpy(out + 8, &s[2], 8);
    *out_len = 16;
    return GB_SLOT_OK;
}

static const gb_grain_msg_t mt_msgs[] = {{MT_HOPS, "Hops"},         {MT_SEND, "Send"},     {MT_BAD_TARGET, "BadTarget"},
                                         {MT_OVERSIZED, "Oversized"}, {MT_CYCLE, "Cycle"}, {MT_FANOUT, "Fanout"},
                                         {MT_TO_SINK, "ToSink"},     {MT_BIG, "Big"},       {MT_BYTES, "Bytes"},
                                         {MT_SCRIBBLE, "Scribble"},  {MT_LOST_FWD, "LostForward"},
                                         {MT_WALK, "Walk"},          {MT_FWD_SEQ, "ForwardNumbered"},
                                         {MT_BAD_STATUS, "BadStatus"}};
static const gb_grain_msg_t sink_msgs[] = {{MT_NOTE, "Note"}, {MT_GET, "Get"}, {MT_SLOW, "Slow"}};
static const char *const a_targets[] = {"mt.b", "mt.sink"};
static const char *const b_targets[] = {"mt.a"};

GB_DEFINE_GRAIN_TARGETS(mt_a, "mt.a", 8, 0, mt_on_message, mt_msgs, NULL, a_targets)
GB_DEFINE_GRAIN_TARGETS(mt_b, "mt.b", 8, 0, mt_on_message, mt_msgs, NULL, b_targets)
GB_DEFINE_GRAIN(mt_sink, "mt.sink", 24, 0, sink_on_message, sink_msgs, NULL)
