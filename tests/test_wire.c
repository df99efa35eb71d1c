/* The bridge's hand-written wire decoding (server/wire.c, server/codec.c)
 * against protobuf-c, the reference: valid encodings decode to the same
 * fields, and every truncated or mutated encoding is refused by both or
 * decoded by both to the same fields. Each built-in grain's codec has its
 * own test in its folder (grains/<name>/test_*_codec.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "grain_registry.h"
#include "echo.pb-c.h"
#include "builtin.h"
#include "gpubridge.pb-c.h"
#include "mutate.h"
#include "pagerank.h"
#include "pagerank.pb-c.h"
#include "vecadd.pb-c.h"
#include "runtime.h" /* gb_grain_reply_max */
#include "wire.h"

/* The built-in grain types' handles (grain_registry.h). */
#define GB_GRAIN_NONE 0
#define GB_GRAIN_ECHO gb_grain_kind_of("echo")
#define GB_GRAIN_VECADD gb_grain_kind_of("vecadd")
#define GB_GRAIN_PR_SENDER gb_grain_kind_of("pagerank.sender")
#define GB_GRAIN_PR_AGGREGATOR gb_grain_kind_of("pagerank.aggregator")

/* ---- frames ------------------------------------------------------------- */

/* Compares our view of envelope i with protobuf-c's. */
static void same_env(const gbi_env_t *a, const Gpubridge__Envelope *b)
{
    assert_int_equal(a->corr, b->correlation_id);
    /* A kind past 32 bits is none (UINT32_MAX) here, a message type is kept
     * whole (refused by server_feed.c); protobuf-c keeps their low bits. */
    if (a->kind != UINT32_MAX)
        assert_int_equal(a->kind, (uint32_t)b->kind);
    assert_int_equal((uint32_t)a->message_type, b->message_type);
    assert_int_equal(a->payload_len, b->payload.len);
    if (a->payload_len)
        assert_memory_equal(a->payload, b->payload.data, a->payload_len);
    assert_int_equal(a->has_grain, b->grain != NULL);
    if (b->grain) {
        assert_int_equal(a->key, b->grain->key);
        size_t tl = strlen(b->grain->type);
        /* protobuf-c's strings end at a NUL inside them; ours keep the bytes. */
        assert_true(a->type_len >= tl);
        if (tl)
            assert_memory_equal(a->type, b->grain->type, tl);
    }
    assert_int_equal(a->has_control, b->control != NULL);
}

/* Decodes data both ways; returns 1 when both accept (fields compared), 0
 * when both refuse, -1 for two control fields (the difference wire.h
 * documents); fails the test when they disagree otherwise. */
static int differential(const uint8_t *data, size_t len)
{
    static gbi_frame_t f;
    char err[160];
    int ours = gbi_frame_decode(&f, data, len, err, sizeof err) == 0;
    Gpubridge__ClientFrame *ref = gpubridge__client_frame__unpack(NULL, len, data);
    if (!ours && ref && strcmp(err, "Envelope has two control fields") == 0) {
        /* The documented difference (wire.h): protobuf-c merges them. */
        gpubridge__client_frame__free_unpacked(ref, NULL);
        return -1;
    }
    if (ours != (ref != NULL)) {
        fprintf(stderr, "disagree on %zu bytes: ours %s (%s), protobuf-c %s\n", len, ours ? "accepts" : "refuses",
                ours ? "" : err, ref ? "accepts" : "refuses");
        for (size_t i = 0; i < len; i++)
            fprintf(stderr, "%02x%s", data[i], i + 1 == len ? "\n" : " ");
    }
    assert_int_equal(ours, ref != NULL);
    if (!ref) {
        assert_true(err[0] != '\0');
        return 0;
    }
    assert_int_equal(f.has_body, ref->body_case != GPUBRIDGE__CLIENT_FRAME__BODY__NOT_SET);
    if (ref->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE) {
        assert_int_equal(f.n, 1);
        same_env(&f.envs[0], ref->envelope);
    } else if (ref->body_case == GPUBRIDGE__CLIENT_FRAME__BODY_BATCH) {
        assert_int_equal(f.n, ref->batch->n_envelopes);
        for (size_t i = 0; i < f.n; i++)
            same_env(&f.envs[i], ref->batch->envelopes[i]);
    } else {
        assert_int_equal(f.n, 0);
    }
    gpubridge__client_frame__free_unpacked(ref, NULL);
    return 1;
}

static uint8_t g_pl[] = {0x12, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0x1a, 0x04, 0, 0, 0x40, 0x40};

/* A batch frame of n envelopes with every field kind set somewhere. */
static size_t sample_batch(uint8_t *buf, size_t n)
{
    static Gpubridge__Envelope envs[8];
    static Gpubridge__Envelope *ptrs[8];
    static Gpubridge__GrainId g = GPUBRIDGE__GRAIN_ID__INIT, g2 = GPUBRIDGE__GRAIN_ID__INIT;
    static Gpubridge__Control ctl = GPUBRIDGE__CONTROL__INIT;
    static Gpubridge__StatusRequest sr = GPUBRIDGE__STATUS_REQUEST__INIT;
    g.type = "vecadd";
    g.key = 123456789012345ull;
    g2.type = "echo";
    sr.grain_type = "vecadd";
    ctl.op_case = GPUBRIDGE__CONTROL__OP_STATUS_REQUEST;
    ctl.status_request = &sr;
    for (size_t i = 0; i < n; i++) {
        gpubridge__envelope__init(&envs[i]);
        envs[i].correlation_id = 1000 + i * 300;
        envs[i].kind = (Gpubridge__Kind)(1 + i % 3);
        envs[i].message_type = (uint32_t)(i % 2 ? 1 : 70000);
        if (i % 3 != 2) {
            envs[i].grain = i % 2 ? &g2 : &g;
            envs[i].payload.data = g_pl;
            envs[i].payload.len = sizeof g_pl - (i % 4);
        } else {
            envs[i].control = &ctl;
        }
        ptrs[i] = &envs[i];
    }
    Gpubridge__Batch b = GPUBRIDGE__BATCH__INIT;
    b.n_envelopes = n;
    b.envelopes = ptrs;
    Gpubridge__ClientFrame cf = GPUBRIDGE__CLIENT_FRAME__INIT;
    if (n == 1) {
        cf.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
        cf.envelope = &envs[0];
    } else {
        cf.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
        cf.batch = &b;
    }
    return gpubridge__client_frame__pack(&cf, buf);
}

static void test_valid_frames(void **state)
{
    (void)state;
    uint8_t buf[4096];
    for (size_t n = 1; n <= 8; n++)
        assert_int_equal(differential(buf, sample_batch(buf, n)), 1);
    /* No body: zero bytes. An empty batch: a body without envelopes. */
    assert_int_equal(differential(buf, 0), 1);
    const uint8_t empty_batch[] = {0x12, 0x00};
    assert_int_equal(differential(empty_batch, sizeof empty_batch), 1);
}

/* Repeated fields as protobuf-c reads them: the last envelope or batch
 * wins, a repeated grain merges; unknown fields are skipped. */
static void test_merge_rules(void **state)
{
    (void)state;
    uint8_t one[512], two[512], both[1100];
    size_t l1 = sample_batch(one, 1), l2 = sample_batch(two, 5);
    memcpy(both, one, l1);
    memcpy(both + l1, one, l1);
    assert_int_equal(differential(both, 2 * l1), 1); /* envelope twice */
    memcpy(both, two, l2);
    memcpy(both + l2, two, l2);
    assert_int_equal(differential(both, 2 * l2), 1); /* batch twice */
    /* Two different envelopes; an envelope whose grain comes twice. */
    const uint8_t e2[] = {0x0a, 0x0e, 0x08, 0x07, 0x12, 0x06, 0x0a, 0x04, 'e', 'c', 'h', 'o', 0x12, 0x02, 0x10, 0x09};
    memcpy(both, one, l1);
    memcpy(both + l1, e2, sizeof e2);
    assert_int_equal(differential(both, l1 + sizeof e2), 1);
    static gbi_frame_t f;
    char err[160];
    assert_int_equal(gbi_frame_decode(&f, e2, sizeof e2, err, sizeof err), 0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.envs[0].key, 9);
    assert_int_equal(f.envs[0].type_len, 4);
    gbi_frame_fini(&f);
    memcpy(both, one, l1);
    memcpy(both + l1, two, l2);
    assert_int_equal(differential(both, l1 + l2), 1); /* envelope, then batch */
    memcpy(both, two, l2);
    memcpy(both + l2, one, l1);
    assert_int_equal(differential(both, l1 + l2), 1); /* batch, then envelope */
    /* Unknown fields of every wire type, before and after. */
    const uint8_t unk[] = {0x78, 0x05, 0x81, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x8a, 0x01, 0x02, 0xaa, 0xbb, 0x95, 0x01, 1, 2, 3, 4};
    memcpy(both, unk, sizeof unk);
    memcpy(both + sizeof unk, two, l2);
    memcpy(both + sizeof unk + l2, unk, sizeof unk);
    assert_int_equal(differential(both, l2 + 2 * sizeof unk), 1);
}

static void test_truncated_frames(void **state)
{
    (void)state;
    uint8_t buf[4096];
    size_t len = sample_batch(buf, 7);
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++)
        refused += differential(buf, cut) == 0;
    assert_true(refused > (int)len / 2); /* most prefixes end inside a field */
}

static void test_mutated_frames(void **state)
{
    (void)state;
    uint8_t base[4096], buf[4200];
    int accepted = 0, refused = 0;
    for (int i = 0; i < 30000; i++) {
        size_t len = sample_batch(base, 1 + (size_t)i % 8);
        memcpy(buf, base, len);
        len = mutate(buf, len, sizeof buf);
        int r = differential(buf, len);
        accepted += r == 1;
        refused += r == 0;
    }
    fprintf(stderr, "mutated frames: %d accepted by both, %d refused by both\n", accepted, refused);
    assert_true(accepted > 1000 && refused > 1000);
}

static void test_two_controls_refused(void **state)
{
    (void)state;
    /* ClientFrame{envelope{kind CONTROL, control{}, control{}}} */
    const uint8_t f[] = {0x0a, 0x06, 0x18, 0x03, 0x32, 0x00, 0x32, 0x00};
    gbi_frame_t fr = {0};
    char err[160];
    assert_int_equal(gbi_frame_decode(&fr, f, sizeof f, err, sizeof err), -1);
    assert_string_equal(err, "Envelope has two control fields");
    gbi_frame_fini(&fr);
}

/* kind and message_type past 32 bits are not taken for their low bits:
 * kind 2^32 + 1 is no REQUEST, message_type 2^32 + 1 stays whole (no type 1;
 * server_feed.c refuses it naming the value). */
static void test_wide_numbers_refused(void **state)
{
    (void)state;
    /* ClientFrame{envelope{correlation_id 1, kind 2^32+1, message_type 2^32+1}} */
    const uint8_t f[] = {0x0a, 0x0e, 0x08, 0x01, 0x18, 0x81, 0x80, 0x80, 0x80, 0x10,
                         0x20, 0x81, 0x80, 0x80, 0x80, 0x10};
    gbi_frame_t fr = {0};
    char err[160];
    assert_int_equal(gbi_frame_decode(&fr, f, sizeof f, err, sizeof err), 0);
    assert_int_equal(fr.n, 1);
    assert_int_not_equal(fr.envs[0].kind, GPUBRIDGE__KIND__KIND_REQUEST);
    assert_int_equal(fr.envs[0].kind, UINT32_MAX);
    assert_int_equal(fr.envs[0].message_type, (1ull << 32) + 1);
    gbi_frame_fini(&fr);
}

/* A control's strings keep their bytes: Deactivate{"echo\0x"} is refused,
 * not taken for echo (protobuf-c's strings end at a NUL). */
static void test_control_nul_refused(void **state)
{
    (void)state;
    /* ClientFrame{envelope{correlation_id 1, kind CONTROL, control{deactivate{grain_type}}}} */
    uint8_t f[] = {0x0a, 0x10, 0x08, 0x01, 0x18, 0x03, 0x32, 0x0a, 0x12, 0x08,
                   0x0a, 0x06, 'e', 'c', 'h', 'o', 0x00, 'x'};
    gbi_frame_t fr = {0};
    char err[160];
    assert_int_equal(gbi_frame_decode(&fr, f, sizeof f, err, sizeof err), -1);
    assert_string_equal(err, "Envelope.control has a string with a NUL byte in it");
    f[16] = 'o'; /* "echoox": a name, refused later as unknown, not here */
    assert_int_equal(gbi_frame_decode(&fr, f, sizeof f, err, sizeof err), 0);
    /* A field number past 2^29 - 1 before the string (protobuf-c skips it):
     * Deactivate{field 2^29: varint 0, grain_type "echo\0x"} is refused. */
    const uint8_t g[] = {0x0a, 0x16, 0x08, 0x01, 0x18, 0x03, 0x32, 0x10, 0x12, 0x0e,
                         0x80, 0x80, 0x80, 0x80, 0x10, 0x00, /* key: field 2^29, varint */
                         0x0a, 0x06, 'e', 'c', 'h', 'o', 0x00, 'x'};
    assert_int_equal(gbi_frame_decode(&fr, g, sizeof g, err, sizeof err), -1);
    gbi_frame_fini(&fr);
}

/* A held frame keeps working after the original bytes are gone. */
static void test_hold_copies(void **state)
{
    (void)state;
    uint8_t *buf = malloc(4096);
    size_t len = sample_batch(buf, 6);
    gbi_frame_t f = {0};
    char err[160];
    assert_int_equal(gbi_frame_decode(&f, buf, len, err, sizeof err), 0);
    gbi_frame_t *h = gbi_frame_hold(&f, 2);
    assert_non_null(h);
    Gpubridge__ClientFrame *ref = gpubridge__client_frame__unpack(NULL, len, buf);
    memset(buf, 0xee, len);
    free(buf);
    assert_int_equal(h->n, 4);
    for (size_t i = 0; i < h->n; i++)
        same_env(&h->envs[i], ref->batch->envelopes[2 + i]);
    gpubridge__client_frame__free_unpacked(ref, NULL);
    free(h);
    gbi_frame_fini(&f);
}

static void test_name_print(void **state)
{
    (void)state;
    char out[100];
    gbi_name_print(out, sizeof out, (const uint8_t *)"vec\xff\n", 5);
    assert_string_equal(out, "vec\\xff\\x0a");
    char big[300];
    memset(big, 0xc3, sizeof big);
    gbi_name_print(out, sizeof out, (const uint8_t *)big, sizeof big);
    assert_true(strlen(out) < sizeof out);
}

/* ---- limits (codec_limits.c) -------------------------------------------- */

/* A request of message type mt with n entries in its repeated field, packed
 * into buf (static storage; NULL for a type without one). */
static size_t pack_with_entries(uint32_t mt, size_t n, uint8_t *buf)
{
    static uint64_t u64[20000];
    static uint32_t u32[20000];
    static float f[20000];
    switch (mt) {
    case 0x100 | GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_REQUEST: {
        Gpubridge__VectorAddRequest v = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
        v.n_a = v.n_b = n;
        v.a = v.b = f;
        return gpubridge__vector_add_request__pack(&v, buf);
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_OUT_DEGREES: {
        Gpubridge__OutDegreeChunk m = GPUBRIDGE__OUT_DEGREE_CHUNK__INIT;
        m.n_out_degrees = n;
        m.out_degrees = u32;
        return gpubridge__out_degree_chunk__pack(&m, buf);
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_OFFSETS: {
        Gpubridge__InOffsetChunk m = GPUBRIDGE__IN_OFFSET_CHUNK__INIT;
        m.n_offsets = n;
        m.offsets = u64;
        return gpubridge__in_offset_chunk__pack(&m, buf);
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_IN_EDGES: {
        Gpubridge__InEdgeChunk m = GPUBRIDGE__IN_EDGE_CHUNK__INIT;
        m.n_sources = n;
        m.sources = u32;
        return gpubridge__in_edge_chunk__pack(&m, buf);
    }
    case GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_RANK_QUERY: {
        Gpubridge__RankQuery m = GPUBRIDGE__RANK_QUERY__INIT;
        m.count = (uint32_t)n;
        return gpubridge__rank_query__pack(&m, buf);
    }
    default:
        fail_msg("no entries to pack for message type %u", mt);
        return 0;
    }
}

/* Every bound the Limits reply reports holds exactly in the codecs: max
 * entries pass, one more is STATUS_TOO_LARGE; every listed type is known. */
/* What the bridge does with a request (server.c and server_feed.c): a frame
 * over max_message_size is refused, measured here with the correlation id
 * and key at their largest; the record goes into the slot (cap bytes) or,
 * when that is too small, the large area (large_max), as must its reply. */
/* Bytes of a ClientFrame of one request to `type` with a payload of len
 * bytes, its correlation id and key at their largest. */
static size_t frame_size(const char *type, uint32_t mt, uint8_t *pb, size_t len)
{
    Gpubridge__GrainId g = GPUBRIDGE__GRAIN_ID__INIT;
    g.type = (char *)type;
    g.key = UINT64_MAX;
    Gpubridge__Envelope e = GPUBRIDGE__ENVELOPE__INIT;
    e.correlation_id = UINT64_MAX;
    e.grain = &g;
    e.kind = GPUBRIDGE__KIND__KIND_REQUEST;
    e.message_type = mt;
    e.payload.data = pb;
    e.payload.len = len;
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    f.envelope = &e;
    return gpubridge__client_frame__get_packed_size(&f);
}

static int bridge_accepts(int kind, const char *type, uint32_t mt, uint8_t *pb, size_t len, uint32_t cap,
                          uint32_t large_max, uint32_t max_message_size)
{
    static unsigned char rec[1 << 20];
    char err[256];
    if (frame_size(type, mt, pb, len) > max_message_size)
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    uint32_t rl = 0;
    uint16_t st = 0;
    int r = gbi_codec_request(kind, mt, pb, len, rec, cap, &rl, &st, err, sizeof err);
    if (r == GPUBRIDGE__STATUS__STATUS_TOO_LARGE && large_max > cap)
        r = gbi_codec_request(kind, mt, pb, len, rec, large_max, &rl, &st, err, sizeof err);
    if (r != GPUBRIDGE__STATUS__STATUS_OK)
        return r;
    const uint32_t reply = gb_grain_reply_max(kind, st, rec, rl);
    if ((rl > cap || reply > cap) && (rl > large_max || reply > large_max))
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    return r;
}

/* An EchoRequest of exactly len bytes (data only), into pb. */
static size_t pack_echo_of(size_t len, uint8_t *pb)
{
    static uint8_t data[1 << 20];
    Gpubridge__EchoRequest er = GPUBRIDGE__ECHO_REQUEST__INIT;
    er.data.data = data;
    for (size_t d = len > 8 ? len - 8 : 0; d <= len; d++) {
        er.data.len = d;
        if (gpubridge__echo_request__get_packed_size(&er) == len)
            return gpubridge__echo_request__pack(&er, pb);
    }
    return 0; /* no data length gives len (a varint boundary): skip */
}

/* Limits as the bridge reports them: each bound passes, one past it gets
 * STATUS_TOO_LARGE, over slot sizes, large-area sizes (0: none) and frame
 * bounds where the slot, the large area or the frame binds. */
static void test_codec_limits(void **state)
{
    (void)state;
    const int kinds[] = {GB_GRAIN_ECHO, GB_GRAIN_VECADD, GB_GRAIN_PR_SENDER, GB_GRAIN_PR_AGGREGATOR};
    static const char *names[] = {"echo", "vecadd", "pagerank.sender", "pagerank.aggregator"};
    static const uint32_t slots[] = {64, 128, 1024, 16384, 65536};
    static const uint32_t larges[] = {0, 4096, 65536};
    static const uint32_t frames[] = {256, 65536, 200000};
    static uint8_t pb[300000];
    for (size_t k = 0; k < 4; k++)
        for (size_t s = 0; s < 5; s++)
            for (size_t l = 0; l < 3; l++)
                for (size_t m = 0; m < 3; m++) {
                    const uint32_t cap = slots[s] - GB_SLOT_HDR_SIZE, M = frames[m];
                    gbi_msg_limit_t lim[8];
                    size_t n = gbi_codec_limits(kinds[k], cap, larges[l], M, (uint32_t)strlen(names[k]), lim, 8);
                    assert_true(n >= 1 && n <= 8);
                    for (size_t i = 0; i < n; i++) {
                        const uint32_t mt = lim[i].message_type;
                        const uint32_t payload = gbi_frame_payload_max(M, (uint32_t)strlen(names[k]), mt);
                        assert_true(lim[i].max_payload <= payload);
                        /* The frame's bound: a payload of `payload` bytes fits, one more does not. */
                        assert_true(frame_size(names[k], mt, pb, payload) <= M);
                        assert_true(frame_size(names[k], mt, pb, payload + 1) > M);
                        for (size_t extra = 0; extra < 2; extra++) {
                            size_t len;
                            if (lim[i].max_elements)
                                len = pack_with_entries(kinds[k] == GB_GRAIN_VECADD ? 0x100 | mt : mt,
                                                        lim[i].max_elements + extra, pb);
                            else if (kinds[k] == GB_GRAIN_ECHO)
                                len = pack_echo_of(lim[i].max_payload + extra, pb);
                            else
                                continue; /* their payload bound is the frame's, above */
                            if (len == 0)
                                continue;
                            int r = bridge_accepts(kinds[k], names[k], mt, pb, len, cap, larges[l], M);
                            if (r != (extra ? GPUBRIDGE__STATUS__STATUS_TOO_LARGE : GPUBRIDGE__STATUS__STATUS_OK))
                                fail_msg("%s at its bound + %zu (%zu bytes), slot %u, large %u, frame %u: status %d",
                                         lim[i].name, extra, len, slots[s], larges[l], M, r);
                            if (!extra && len > lim[i].max_payload)
                                fail_msg("%s: %u entries take %zu bytes, over max_payload %u", lim[i].name,
                                         lim[i].max_elements, len, lim[i].max_payload);
                        }
                    }
                }
    gbi_msg_limit_t e;
    assert_int_equal(gbi_codec_limits(GB_GRAIN_NONE, 32, 0, 256, 4, &e, 1), 0);
}

/* A grain library's codec that passes the message type on as the record
 * type, and one that maps type 5 to a reserved record type: the reserved
 * types (DeactivateKey clears a grain's state) never reach a grain from a
 * client either way. */
static int passthru_request(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                            uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen)
{
    (void)key, (void)err, (void)errlen;
    if (len > cap)
        return GPUBRIDGE__STATUS__STATUS_TOO_LARGE;
    memcpy(rec, pb, len);
    *rec_len = (uint32_t)len;
    *slot_type = (uint16_t)(message_type == 5 ? GB_MSG_DEACTIVATE_KEY : message_type);
    return GPUBRIDGE__STATUS__STATUS_OK;
}

static uint16_t passthru_handler(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                 uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                 uint32_t *aux)
{
    (void)ctx, (void)state, (void)type, (void)in, (void)in_len, (void)out, (void)out_cap, (void)aux;
    *out_len = 0;
    return GB_SLOT_OK;
}

static void test_codec_reserved_types(void **state)
{
    (void)state;
    static const gb_grain_codec_t codec = {passthru_request, NULL, NULL, NULL};
    static const gb_grain_hooks_t hooks = {&codec, NULL, NULL, NULL};
    static const gb_grain_msg_t msgs[] = {{1, "Put"}};
    static const gb_grain_desc_t d = {GB_GRAIN_ABI, sizeof(gb_grain_desc_t), "test.passthru", 8, 0, msgs, 1, 0,
                                      passthru_handler, NULL, &hooks, NULL, 0, 0};
    char err[256];
    const int kind = gb_grain_register(&d, err, sizeof err);
    assert_true(kind >= 0);
    unsigned char rec[64];
    uint32_t rec_len = 0;
    uint16_t slot = 0;
    const uint8_t pb[4] = {1, 2, 3, 4};
    assert_int_equal(gbi_codec_request_key(kind, 7, 1, pb, 4, rec, 64, &rec_len, &slot, err, sizeof err),
                     GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(slot, 1);
    const uint32_t bad[] = {0, GB_MSG_DEACTIVATE_KEY, 0xFFFF, 0x10001};
    for (size_t i = 0; i < 4; i++) {
        err[0] = 0;
        assert_int_equal(gbi_codec_request_key(kind, 7, bad[i], pb, 4, rec, 64, &rec_len, &slot, err, sizeof err),
                         GPUBRIDGE__STATUS__STATUS_UNKNOWN_MESSAGE_TYPE);
        assert_non_null(strstr(err, "test.passthru has no message type"));
    }
    assert_int_equal(gbi_codec_request_key(kind, 7, 5, pb, 4, rec, 64, &rec_len, &slot, err, sizeof err),
                     GPUBRIDGE__STATUS__STATUS_HANDLER_ERROR);
    assert_non_null(strstr(err, "test.passthru's codec gave message type 5 the record type 65280, which is reserved"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_frames),
        cmocka_unit_test(test_merge_rules),
        cmocka_unit_test(test_truncated_frames),
        cmocka_unit_test(test_mutated_frames),
        cmocka_unit_test(test_two_controls_refused),
        cmocka_unit_test(test_wide_numbers_refused),
        cmocka_unit_test(test_control_nul_refused),
        cmocka_unit_test(test_hold_copies),
        cmocka_unit_test(test_name_print),
        cmocka_unit_test(test_codec_limits),
        cmocka_unit_test(test_codec_reserved_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
