/* The handler side of messages between grains (gpubridge/mail.h, the SDK's
 * gb_grain_send / gb_grain_forward): what a turn lays down, the layout the
 * router reads, and the errors a handler gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "gpubridge/detail/dispatch.h"
#include "gpubridge/grain.h"

#define CAP 256

static _Alignas(16) unsigned char out[CAP];

static gb_grain_ctx_t ctx_with(gb_grain_mail_t *m, uint32_t n_targets)
{
    memset(out, 0xEE, sizeof out);
    gb_mail_begin(m, 77, out, CAP, n_targets);
    gb_grain_ctx_t c = {NULL, 0, 0, 1, NULL, m, NULL, 1, 0};
    return c;
}

static void test_reply_and_sends(void **state)
{
    (void)state;
    gb_grain_mail_t m;
    gb_grain_ctx_t c = ctx_with(&m, 2);
    assert_int_equal(gb_grain_self_key(&c), 77);
    const uint64_t one = 1;
    assert_int_equal(gb_grain_send(&c, 0, 5, 3, &one, 8), GB_SLOT_OK);
    assert_int_equal(gb_grain_send(&c, 1, 6, 4, "hello", 5), GB_SLOT_OK);
    memcpy(out, "reply!", 6); /* the handler's own reply, written after its sends */
    uint32_t len = 6;
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_OK, &len), GB_SLOT_MAIL);
    assert_int_equal(len, 16 + 32 + 32 + 16);
    assert_memory_equal(out, "reply!", 6);
    const gb_mail_msg_t *msgs[GB_MAIL_MAX_MSGS];
    gb_mail_trailer_t t;
    assert_int_equal(gb_mail_parse(out, len, &t, msgs), 2);
    assert_int_equal(t.magic, GB_MAIL_MAGIC);
    assert_int_equal(t.status, GB_SLOT_OK);
    assert_int_equal(t.reply_len, 6);
    assert_int_equal(t.n, 2);
    /* in the order sent */
    assert_int_equal(msgs[1]->target, 1);
    assert_int_equal(msgs[1]->key, 6);
    assert_int_equal(msgs[1]->type, 4);
    assert_memory_equal((const unsigned char *)(msgs[1] + 1), "hello", 5);
    assert_int_equal(msgs[0]->target, 0);
    assert_int_equal(msgs[0]->len, 8);
    assert_int_equal(msgs[0]->flags, 0);
}

static void test_forward_from_out(void **state)
{
    (void)state;
    gb_grain_mail_t m;
    gb_grain_ctx_t c = ctx_with(&m, 1);
    /* The record built in out, as large as the room allows: it overlaps
     * where the message goes. */
    const uint32_t len = CAP - 16 - 16;
    for (uint32_t i = 0; i < len; i++)
        out[i] = (unsigned char)i;
    assert_int_equal(gb_grain_forward(&c, 0, 9, 2, out, len), GB_SLOT_FORWARDED);
    uint32_t olen = 0;
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_FORWARDED, &olen), GB_SLOT_MAIL);
    const gb_mail_msg_t *msgs[GB_MAIL_MAX_MSGS];
    gb_mail_trailer_t t;
    assert_int_equal(gb_mail_parse(out, olen, &t, msgs), 1);
    assert_int_equal(t.status, GB_SLOT_FORWARDED);
    assert_int_equal(msgs[0]->flags, GB_MAIL_FORWARD);
    assert_int_equal(msgs[0]->len, len);
    for (uint32_t i = 0; i < len; i++)
        assert_int_equal(((const unsigned char *)(msgs[0] + 1))[i], (unsigned char)i);
}

static void test_errors(void **state)
{
    (void)state;
    gb_grain_mail_t m;
    gb_grain_ctx_t c = ctx_with(&m, 1);
    assert_int_equal(gb_grain_send(&c, 1, 1, 1, NULL, 0), GB_SLOT_BAD_TARGET);
    assert_int_equal(gb_grain_forward(&c, 0, 1, 1, NULL, CAP), GB_SLOT_MAIL_FULL);
    assert_int_equal(gb_grain_forward(&c, 0, 1, 1, NULL, 0), GB_SLOT_FORWARDED);
    assert_int_equal(gb_grain_forward(&c, 0, 1, 1, NULL, 0), GB_SLOT_HANDLER_ERROR); /* one forward a turn */
    gb_grain_ctx_t none = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0}; /* a type without targets */
    assert_int_equal(gb_grain_send(&none, 0, 1, 1, NULL, 0), GB_SLOT_BAD_TARGET);
    assert_int_equal(gb_grain_self_key(&none), 0);
    /* Room runs out: the message count, then the bytes. */
    c = ctx_with(&m, 1);
    int ok = 0;
    while (gb_grain_send(&c, 0, 1, 1, NULL, 0) == GB_SLOT_OK)
        ok++;
    assert_int_equal(ok, (CAP - 16) / 16);
    /* A reply that ran into the messages fails the turn. */
    c = ctx_with(&m, 1);
    assert_int_equal(gb_grain_send(&c, 0, 1, 1, out + 128, 100), GB_SLOT_OK);
    uint32_t len = CAP - 64;
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_OK, &len), GB_SLOT_MAIL_FULL);
    assert_int_equal(len, 0);
    /* FORWARDED without a forward is a handler error; no messages, no change. */
    c = ctx_with(&m, 1);
    len = 3;
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_FORWARDED, &len), GB_SLOT_HANDLER_ERROR);
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_OK, &len), GB_SLOT_OK);
    assert_int_equal(len, 3);
    /* FORWARDED after a send, with no forward accepted (one that failed for
     * room, say): the caller gets the error, and the send still leaves. */
    c = ctx_with(&m, 1);
    assert_int_equal(gb_grain_send(&c, 0, 1, 1, NULL, 0), GB_SLOT_OK);
    assert_int_equal(gb_grain_forward(&c, 0, 1, 1, NULL, CAP), GB_SLOT_MAIL_FULL);
    len = 0;
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_FORWARDED, &len), GB_SLOT_MAIL);
    gb_mail_trailer_t t;
    const gb_mail_msg_t *msgs[GB_MAIL_MAX_MSGS];
    assert_int_equal(gb_mail_parse(out, len, &t, msgs), 1);
    assert_int_equal(t.status, GB_SLOT_HANDLER_ERROR);
    assert_int_equal(msgs[0]->flags & GB_MAIL_FORWARD, 0);
    /* Type 0 and the bridge's reserved types (DeactivateKey) cannot be sent. */
    c = ctx_with(&m, 1);
    assert_int_equal(gb_grain_send(&c, 0, 1, 0, NULL, 0), GB_SLOT_UNKNOWN_MESSAGE_TYPE);
    assert_int_equal(gb_grain_send(&c, 0, 1, GB_MSG_DEACTIVATE_KEY, NULL, 0), GB_SLOT_UNKNOWN_MESSAGE_TYPE);
    assert_int_equal(gb_grain_forward(&c, 0, 1, 0xFFFF, NULL, 0), GB_SLOT_UNKNOWN_MESSAGE_TYPE);
    assert_int_equal(gb_grain_send(&c, 0, 1, 0xFEFF, NULL, 0), GB_SLOT_OK);
}

/* A reply's payload comes from a kernel: the parser trusts none of it. */
static void test_parse_malformed(void **state)
{
    (void)state;
    gb_grain_mail_t m;
    gb_grain_ctx_t c = ctx_with(&m, 1);
    assert_int_equal(gb_grain_send(&c, 0, 5, 3, "abc", 3), GB_SLOT_OK);
    assert_int_equal(gb_grain_send(&c, 0, 5, 3, "defg", 4), GB_SLOT_OK);
    uint32_t len = 0;
    assert_int_equal(gb_mail_finish(&m, out, GB_SLOT_OK, &len), GB_SLOT_MAIL);
    const gb_mail_msg_t *msgs[GB_MAIL_MAX_MSGS];
    gb_mail_trailer_t t;
    assert_int_equal(gb_mail_parse(out, len, &t, msgs), 2);
    _Alignas(16) unsigned char bad[CAP];
    assert_int_equal(gb_mail_parse(NULL, len, &t, msgs), -1);
    assert_int_equal(gb_mail_parse(out, len - 1, &t, msgs), -1); /* not 16-aligned */
    assert_int_equal(gb_mail_parse(out, 0, &t, msgs), -1);
    const size_t trailer = len - 16;
    struct { size_t off; uint32_t v; } cases[] = {
        {trailer + 12, 0},          /* magic */
        {trailer + 10, 3},          /* count above the messages */
        {trailer + 10, 1},          /* count below */
        {trailer + 10, 0},          /* none */
        {trailer + 4, 48},          /* messages' length not what the payload holds */
        {trailer + 0, 1000},        /* reply longer than the payload */
        {12, 1000},                 /* a record running past the messages */
        {12, 0xFFFFFFF0u},          /* one that wraps */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, out, len);
        if (cases[i].off == trailer + 10 || cases[i].off == trailer + 8) {
            const uint16_t v = (uint16_t)cases[i].v;
            memcpy(bad + cases[i].off, &v, 2);
        } else {
            memcpy(bad + cases[i].off, &cases[i].v, 4);
        }
        assert_int_equal(gb_mail_parse(bad, len, &t, msgs), -1);
    }
}

/* The dispatch step gives a handler its mail only when its type declares
 * targets, and a MAIL reply keeps its length. */
static uint16_t sends_one(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                          uint32_t in_len, unsigned char *o, uint32_t cap, uint32_t *out_len, uint32_t *aux)
{
    (void)state, (void)type, (void)in, (void)in_len, (void)o, (void)cap, (void)aux;
    *out_len = 0;
    return gb_grain_send(ctx, 0, 1, 1, NULL, 0);
}

static void test_dispatch(void **state)
{
    (void)state;
    static _Alignas(16) unsigned char tab_mem[16 * 32];
    gb_grain_table_t tab = {tab_mem, 1, 16, 8, gb_grain_entry_size(8), 0, 0};
    gb_slot_hdr_t in = {3, 4, 1, 0, 0, 0, 0}, o;
    const gb_grain_ctx_t ctx = {NULL, 0, 0, 1, NULL, NULL, NULL, 1, 0};
    assert_int_equal(gbi_dispatch_one_fn(sends_one, 1, &ctx, &tab, 0, &in, NULL, &o, out, CAP, 0), 0);
    assert_int_equal(o.status, GB_SLOT_MAIL);
    assert_int_equal(o.len, 16 + 16);
    assert_int_equal(gbi_dispatch_one_fn(sends_one, 0, &ctx, &tab, 0, &in, NULL, &o, out, CAP, 0), 1);
    assert_int_equal(o.status, GB_SLOT_BAD_TARGET);
    assert_int_equal(o.len, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_and_sends),
        cmocka_unit_test(test_forward_from_out),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests_name("messages between grains: the handler side", tests, NULL, NULL);
}
