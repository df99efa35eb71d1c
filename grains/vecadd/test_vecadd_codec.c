/* The vecadd grain's codec (grains/vecadd/vecadd_codec.c, through the
 * server's codec dispatch) against protobuf-c, the reference: requests valid,
 * mutated and too large for the slot; replies read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "gpubridge.pb-c.h"
#include "mutate.h"
#include "runtime.h" /* gb_grain_kind_of */
#include "vecadd.h"
#include "vecadd.pb-c.h"

#define GB_GRAIN_VECADD gb_grain_kind_of("vecadd")

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vecadd_request_codec),
        cmocka_unit_test(test_vecadd_reply_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
