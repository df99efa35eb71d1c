/* The bridge's hand-written wire decoding (server/wire.c, server/codec.c)
 * against protobuf-c, the reference: valid encodings decode to the same
 * fields, and every truncated or mutated encoding is refused by both or
 * decoded by both to the same fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "echo.pb-c.h"
#include "builtin.h"
#include "gpubridge.pb-c.h"
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
    assert_int_equal(a->kind, (uint32_t)b->kind);
    assert_int_equal(a->message_type, b->message_type);
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

/* Deterministic random mutations: byte flips, inserts, deletions. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)g_rng;
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    int edits = 1 + (int)(rnd() % 3);
    for (int e = 0; e < edits && len; e++) {
        size_t at = rnd() % len;
        switch (rnd() % 4) {
        case 0: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: buf[at] = (uint8_t)rnd(); break;
        case 2:
            if (len < cap) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = (uint8_t)rnd();
                len++;
            }
            break;
        default:
            memmove(buf + at, buf + at + 1, len - at - 1);
            len--;
            break;
        }
    }
    return len;
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

/* ---- grain payload codecs ------------------------------------------------ */

/* Our vecadd request codec against protobuf-c plus the rules of vecadd.proto. */
static void vecadd_differential(const uint8_t *pb, size_t len, uint32_t cap)
{
    unsigned char rec[4096];
    uint32_t rec_len = 0;
    uint16_t slot_type = 0;
    char err[256] = "";
    int st = gbi_codec_request(GB_GRAIN_VECADD, 1, pb, len, rec, cap, &rec_len, &slot_type, err, sizeof err);
    Gpubridge__VectorAddRequest *m = gpubridge__vector_add_request__unpack(NULL, len, pb);
    if (!m) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_MALFORMED);
        assert_non_null(strstr(err, "not a VectorAddRequest"));
        return;
    }
    if (m->n_a != m->n_b || (uint32_t)m->op > GB_VECADD_DIV) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_MALFORMED);
    } else if (m->n_a > (cap - GB_VECADD_HDR) / 8) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_TOO_LARGE);
    } else {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_OK);
        uint32_t op, n;
        memcpy(&op, rec, 4);
        memcpy(&n, rec + 4, 4);
        assert_int_equal(op, (uint32_t)m->op);
        assert_int_equal(n, m->n_a);
        assert_int_equal(rec_len, gb_vecadd_request_len(n));
        if (n) {
            assert_memory_equal(rec + 8, m->a, 4u * n);
            assert_memory_equal(rec + 8 + 4u * n, m->b, 4u * n);
        }
    }
    gpubridge__vector_add_request__free_unpacked(m, NULL);
}

static void test_vecadd_request_codec(void **state)
{
    (void)state;
    float a[5] = {1, -2, 3.5f, 1e30f, 0}, b[5] = {0.5f, 4, -1, 2, 7};
    Gpubridge__VectorAddRequest v = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    uint8_t base[256], buf[300];
    for (size_t n = 0; n <= 5; n++) {
        v.n_a = v.n_b = n;
        v.a = a;
        v.b = b;
        v.op = (Gpubridge__VectorAddRequest__Op)(n % 4);
        size_t len = gpubridge__vector_add_request__pack(&v, base);
        vecadd_differential(base, len, 1024);
        vecadd_differential(base, len, 16); /* too large for a tiny slot */
    }
    /* Unpacked floats (wire type 5) and split runs concatenate. */
    const uint8_t unpacked[] = {0x08, 0x02, 0x15, 0, 0, 0x80, 0x3f, 0x12, 0x04, 0, 0, 0, 0x40,
                                0x1a, 0x08, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40};
    vecadd_differential(unpacked, sizeof unpacked, 1024);
    for (int i = 0; i < 20000; i++) {
        v.n_a = v.n_b = 1 + (size_t)i % 5;
        size_t len = gpubridge__vector_add_request__pack(&v, base);
        memcpy(buf, base, len);
        len = mutate(buf, len, sizeof buf);
        vecadd_differential(buf, len, 1024);
    }
}

static void test_echo_request_codec(void **state)
{
    (void)state;
    uint8_t data[40], base[128], buf[160];
    /* A field 4 that is not a varint would clash with the reply's count. */
    const uint8_t clash[] = {0x08, 0x01, 0x22, 0x00};
    unsigned char rec0[64];
    uint32_t rl0 = 0;
    uint16_t st0 = 0;
    char err0[256];
    assert_int_equal(gbi_codec_request(GB_GRAIN_ECHO, 1, clash, sizeof clash, rec0, sizeof rec0, &rl0, &st0, err0,
                                       sizeof err0),
                     GPUBRIDGE__STATUS__STATUS_MALFORMED);
    memset(data, 'x', sizeof data);
    Gpubridge__EchoRequest e = GPUBRIDGE__ECHO_REQUEST__INIT;
    e.sequence = 77;
    e.client_time_ns = 123456789;
    e.data.data = data;
    e.data.len = sizeof data;
    for (int i = 0; i < 20000; i++) {
        size_t len = gpubridge__echo_request__pack(&e, base);
        memcpy(buf, base, len);
        if (i)
            len = mutate(buf, len, sizeof buf);
        unsigned char rec[256];
        uint32_t rec_len = 0;
        uint16_t slot_type = 0;
        char err[256];
        int st = gbi_codec_request(GB_GRAIN_ECHO, 1, buf, len, rec, sizeof rec, &rec_len, &slot_type, err,
                                   sizeof err);
        /* The reference: protobuf-c's EchoRequest, and the reply (the request
         * plus a varint field 4) must decode as an EchoResponse. */
        Gpubridge__EchoRequest *m = gpubridge__echo_request__unpack(NULL, len, buf);
        int ok = m != NULL;
        if (m) {
            uint8_t reply[200];
            memcpy(reply, buf, len);
            reply[len] = 0x20;
            reply[len + 1] = 0x05;
            Gpubridge__EchoResponse *r = gpubridge__echo_response__unpack(NULL, len + 2, reply);
            ok = r != NULL;
            if (r) {
                assert_int_equal(r->grain_count, 5);
                gpubridge__echo_response__free_unpacked(r, NULL);
            }
            gpubridge__echo_request__free_unpacked(m, NULL);
        }
        assert_int_equal(st, ok ? GPUBRIDGE__STATUS__STATUS_OK : GPUBRIDGE__STATUS__STATUS_MALFORMED);
        if (ok)
            assert_int_equal(rec_len, len);
    }
}

static void test_vecadd_reply_codec(void **state)
{
    (void)state;
    for (uint32_t n = 0; n <= 300; n += 37) {
        unsigned char rec[2048];
        float x[300];
        for (uint32_t i = 0; i < n; i++)
            x[i] = (float)i * 0.5f - 3;
        memcpy(rec, x, 4u * n);
        gb_slot_hdr_t h = {0};
        h.len = 4u * n;
        uint8_t out[4096];
        size_t out_len = 0;
        uint32_t mt = 0;
        assert_int_equal(gbi_codec_reply(GB_GRAIN_VECADD, &h, rec, out, sizeof out, &out_len, &mt), 0);
        assert_int_equal(mt, GPUBRIDGE__VECTOR_ADD_MESSAGE_TYPE__VECTOR_ADD_MESSAGE_TYPE_RESPONSE);
        Gpubridge__VectorAddResponse *r = gpubridge__vector_add_response__unpack(NULL, out_len, out);
        assert_non_null(r);
        assert_int_equal(r->n_result, n);
        if (n)
            assert_memory_equal(r->result, x, 4u * n);
        gpubridge__vector_add_response__free_unpacked(r, NULL);
    }
    gb_slot_hdr_t odd = {0};
    odd.len = 6; /* not whole floats: the grain wrote garbage */
    uint8_t out[64], rec[8] = {0};
    size_t out_len;
    uint32_t mt;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_VECADD, &odd, rec, out, sizeof out, &out_len, &mt), -1);
}

/* Our StartIterationCommand decoding against protobuf-c plus the codec's
 * rules (damping in [0, 1], dangling in [0, 2], node_count in 1..2^32-1). */
static void start_differential(int kind, const uint8_t *pb, size_t len)
{
    unsigned char rec[256];
    uint32_t rec_len = 0;
    uint16_t slot_type = 0;
    char err[256] = "";
    const uint32_t mt = GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_START_ITERATION;
    int st = gbi_codec_request(kind, mt, pb, len, rec, sizeof rec, &rec_len, &slot_type, err, sizeof err);
    Gpubridge__StartIterationCommand *m = gpubridge__start_iteration_command__unpack(NULL, len, pb);
    if (!m) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_MALFORMED);
        assert_non_null(strstr(err, "not a StartIterationCommand"));
        return;
    }
    if (!(m->damping >= 0.0 && m->damping <= 1.0) || !(m->dangling_rank >= 0.0 && m->dangling_rank <= 2.0) ||
        m->node_count == 0 || m->node_count > UINT32_MAX) {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_MALFORMED);
        if (m->node_count > UINT32_MAX && m->damping >= 0.0 && m->damping <= 1.0 && m->dangling_rank >= 0.0 &&
            m->dangling_rank <= 2.0)
            assert_non_null(strstr(err, "node_count"));
    } else {
        assert_int_equal(st, GPUBRIDGE__STATUS__STATUS_OK);
        assert_int_equal(slot_type, GB_PR_MSG_START);
        assert_int_equal(rec_len, GB_PR_START_LEN);
        uint32_t it, flags, n, job;
        double d, dr;
        memcpy(&it, rec, 4);
        memcpy(&flags, rec + 4, 4);
        memcpy(&d, rec + 8, 8);
        memcpy(&dr, rec + 16, 8);
        memcpy(&n, rec + 24, 4);
        memcpy(&job, rec + 28, 4);
        assert_int_equal(job, 0); /* gbi_codec_request: key 0, job 0 */
        assert_int_equal(it, m->iteration);
        assert_int_equal(flags, (m->report_ranks ? GB_PR_START_RANKS : 0) | (m->next_contributions ? GB_PR_START_NEXT : 0));
        assert_memory_equal(&d, &m->damping, 8);
        assert_memory_equal(&dr, &m->dangling_rank, 8);
        assert_int_equal(n, m->node_count);
    }
    gpubridge__start_iteration_command__free_unpacked(m, NULL);
}

static void test_pagerank_start_codec(void **state)
{
    (void)state;
    Gpubridge__StartIterationCommand sc = GPUBRIDGE__START_ITERATION_COMMAND__INIT;
    uint8_t base[128], buf[160];
    const double damp[] = {0.85, 0.0, 1.0, 1.5, -0.1}, dang[] = {0.0, 0.3, 2.0, 2.5};
    for (int i = 0; i < 40; i++) {
        sc.iteration = (uint32_t)i * 0x1234567u;
        sc.damping = damp[i % 5];
        sc.dangling_rank = dang[i % 4];
        sc.tolerance = i % 3 ? 1e-6 : 0.0;
        sc.node_count = i % 7 ? (uint64_t)i << (i % 40) : 0;
        sc.report_ranks = i % 2;
        sc.next_contributions = i % 3 == 1;
        size_t len = gpubridge__start_iteration_command__pack(&sc, base);
        start_differential(GB_GRAIN_PR_AGGREGATOR, base, len);
        start_differential(GB_GRAIN_PR_SENDER, base, len);
    }
    start_differential(GB_GRAIN_PR_SENDER, NULL, 0); /* all defaults: node_count 0 */
    /* Repeated fields (the last wins), a known field of the wrong wire type. */
    const uint8_t twice[] = {0x20, 0x05, 0x20, 0x07, 0x11, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f};
    start_differential(GB_GRAIN_PR_SENDER, twice, sizeof twice);
    const uint8_t wrong[] = {0x20, 0x05, 0x15, 0, 0, 0, 0};
    start_differential(GB_GRAIN_PR_SENDER, wrong, sizeof wrong);
    /* protobuf-c reads a bool from any wire type; a varint past 32 bits gives a uint32 its low bits */
    const uint8_t quirks[][12] = {
        {0x20, 0x05, 0x31, 0x80, 0, 0, 0, 0, 0, 0, 0x01}, /* report_ranks as fixed64 */
        {0x20, 0x05, 0x32, 0x01, 0x80},                   /* as bytes: only 0x80 inside */
        {0x20, 0x05, 0x35, 0x80, 0x80, 0x80, 0x80},       /* as fixed32 with no low bits */
        {0x20, 0x05, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
        {0x20, 0x05, 0x3a, 0x01, 0x02, 0x30, 0x00},       /* next_contributions as bytes, then report_ranks 0 */
        {0x20, 0x05, 0x38, 0x01, 0x38, 0x00, 0x30, 0x01}, /* next_contributions twice: the last wins */
    };
    const size_t quirk_len[] = {11, 5, 7, 12, 7, 8};
    for (size_t i = 0; i < sizeof quirk_len / sizeof *quirk_len; i++)
        start_differential(GB_GRAIN_PR_AGGREGATOR, quirks[i], quirk_len[i]);
    sc.damping = 0.85;
    sc.dangling_rank = 0.25;
    sc.node_count = 1000;
    for (int i = 0; i < 30000; i++) {
        sc.iteration = (uint32_t)i;
        sc.report_ranks = i % 3 == 0;
        sc.next_contributions = i % 5 < 2;
        size_t len = gpubridge__start_iteration_command__pack(&sc, base);
        memcpy(buf, base, len);
        len = mutate(buf, len, sizeof buf);
        start_differential(i % 2 ? GB_GRAIN_PR_SENDER : GB_GRAIN_PR_AGGREGATOR, buf, len);
    }
}

/* Our RankAggregationResult encoding, read back by protobuf-c. */
static void test_pagerank_result_codec(void **state)
{
    (void)state;
    const double vals[] = {0.0, -0.0, 1e-300, 0.5, 1.0, 3e10, 1.0 / 0.0};
    const uint64_t nodes[] = {0, 1, 300, 1ull << 40, UINT64_MAX};
    for (int sender = 0; sender < 2; sender++)
        for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
            for (size_t j = 0; j < sizeof vals / sizeof *vals; j++)
                for (size_t k = 0; k < sizeof nodes / sizeof *nodes; k++) {
                    unsigned char rec[GB_PR_REPLY_LEN];
                    /* the 4th field, an aggregator's next dangling rank: a third value */
                    const double next = vals[(i + j + k) % (sizeof vals / sizeof *vals)];
                    memcpy(rec, &vals[i], 8);
                    memcpy(rec + 8, &vals[j], 8);
                    memcpy(rec + 16, &nodes[k], 8);
                    memcpy(rec + 24, &next, 8);
                    gb_slot_hdr_t h = {0};
                    h.type = GB_PR_MSG_START;
                    h.len = GB_PR_REPLY_LEN;
                    uint8_t out[256];
                    size_t out_len = 0;
                    uint32_t mt = 0;
                    const int kind = sender ? GB_GRAIN_PR_SENDER : GB_GRAIN_PR_AGGREGATOR;
                    assert_int_equal(gbi_codec_reply(kind, &h, rec, out, sizeof out, &out_len, &mt), 0);
                    assert_int_equal(mt, GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_AGGREGATION_RESULT);
                    Gpubridge__RankAggregationResult *r =
                        gpubridge__rank_aggregation_result__unpack(NULL, out_len, out);
                    assert_non_null(r);
                    if (sender) { /* the 4th field is not the sender's */
                        assert_true(r->dangling_rank == vals[i]);
                        assert_true(r->l1_delta == 0.0);
                    } else {
                        assert_true(r->l1_delta == vals[i]);
                        assert_true(r->dangling_rank == next);
                    }
                    assert_true(r->rank_sum == vals[j]);
                    assert_int_equal(r->nodes, nodes[k]);
                    gpubridge__rank_aggregation_result__free_unpacked(r, NULL);
                }
    /* A record of the wrong length is the grain's bug: no reply is made up. */
    gb_slot_hdr_t h = {0};
    h.type = GB_PR_MSG_START;
    h.len = GB_PR_REPLY_LEN - 8;
    uint8_t out[256], rec[GB_PR_REPLY_LEN] = {0};
    size_t out_len;
    uint32_t mt;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_PR_SENDER, &h, rec, out, sizeof out, &out_len, &mt), -1);
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

/* PageRank jobs in the codec: the key's upper half goes into the record, the
 * grain's aux comes back as the reply's job; loads answer with message type
 * 0 (empty payload); a refusal's aux becomes a sentence. */
static void test_pagerank_job_codec(void **state)
{
    (void)state;
    Gpubridge__PartitionInit pi = GPUBRIDGE__PARTITION_INIT__INIT;
    pi.first_node = 5;
    pi.node_count = 7;
    uint8_t pb[64], out[256];
    unsigned char rec[64];
    const size_t len = gpubridge__partition_init__pack(&pi, pb);
    uint32_t rec_len = 0, job = 0, mt = 99;
    uint16_t slot_type = 0;
    char err[256];
    assert_int_equal(gbi_codec_request_key(GB_GRAIN_PR_AGGREGATOR, 0xabcd1234ull << 32 | 3,
                                           GPUBRIDGE__PAGE_RANK_MESSAGE_TYPE__PAGE_RANK_MESSAGE_TYPE_PARTITION_INIT,
                                           pb, len, rec, sizeof rec, &rec_len, &slot_type, err, sizeof err),
                     GPUBRIDGE__STATUS__STATUS_OK);
    assert_int_equal(rec_len, GB_PR_PAIR_LEN);
    memcpy(&job, rec + gb_pr_job_at(slot_type), 4);
    assert_int_equal(job, 0xabcd1234u);
    gb_slot_hdr_t h = {0};
    h.type = GB_PR_MSG_PARTITION_INIT;
    size_t out_len = 1;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_PR_AGGREGATOR, &h, rec, out, sizeof out, &out_len, &mt), 0);
    assert_int_equal(out_len, 0);
    assert_int_equal(mt, 0);
    /* START's reply carries the job */
    unsigned char res[GB_PR_REPLY_LEN] = {0};
    h.type = GB_PR_MSG_START;
    h.len = GB_PR_REPLY_LEN;
    h.aux = 0xabcd1234u;
    assert_int_equal(gbi_codec_reply(GB_GRAIN_PR_AGGREGATOR, &h, res, out, sizeof out, &out_len, &mt), 0);
    Gpubridge__RankAggregationResult *r = gpubridge__rank_aggregation_result__unpack(NULL, out_len, out);
    assert_non_null(r);
    assert_int_equal(r->job, 0xabcd1234u);
    gpubridge__rank_aggregation_result__free_unpacked(r, NULL);
    /* refusals */
    char buf[320];
    h.status = GB_SLOT_HANDLER_ERROR;
    h.aux = GB_PR_E_ARENA_SMALL | 630u << 8;
    const char *why = gbi_codec_error(GB_GRAIN_PR_SENDER, &h, buf, sizeof buf);
    assert_non_null(why);
    assert_non_null(strstr(why, "needs 630 MiB"));
    assert_non_null(strstr(why, "arena_mb"));
    h.aux = GB_PR_E_RANGE;
    assert_non_null(gbi_codec_error(GB_GRAIN_PR_AGGREGATOR, &h, buf, sizeof buf));
    h.aux = 0;
    assert_null(gbi_codec_error(GB_GRAIN_PR_AGGREGATOR, &h, buf, sizeof buf));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pagerank_job_codec),
        cmocka_unit_test(test_valid_frames),
        cmocka_unit_test(test_merge_rules),
        cmocka_unit_test(test_truncated_frames),
        cmocka_unit_test(test_mutated_frames),
        cmocka_unit_test(test_two_controls_refused),
        cmocka_unit_test(test_hold_copies),
        cmocka_unit_test(test_name_print),
        cmocka_unit_test(test_vecadd_request_codec),
        cmocka_unit_test(test_echo_request_codec),
        cmocka_unit_test(test_vecadd_reply_codec),
        cmocka_unit_test(test_pagerank_start_codec),
        cmocka_unit_test(test_pagerank_result_codec),
        cmocka_unit_test(test_codec_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
