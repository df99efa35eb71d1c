/* test_vecadd_proto.c: vecadd.proto (VectorAddRequest, VectorAddResponse)
 * through protobuf-c, with the checks of proto_check.h (tests/) on every
 * encoding, and every message of the schema covered. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vecadd.pb-c.h"

static const ProtobufCMessageDescriptor *const all_descriptors[] = {
    &gpubridge__vector_add_request__descriptor,
    &gpubridge__vector_add_response__descriptor,
};
#define N_DESCRIPTORS (sizeof all_descriptors / sizeof all_descriptors[0])

#include "proto_check.h"

static void test_vecadd(void **state)
{
    (void)state;
    float a[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, FLT_MIN,
                 FLT_TRUE_MIN, 1.5f};
    float b[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 0.0f};
    const size_t n = sizeof a / sizeof a[0];
    for (int op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_ADD;
         op <= GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_DIV; op++) {
        Gpubridge__VectorAddRequest in = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT, *out;
        in.op = (Gpubridge__VectorAddRequest__Op)op;
        in.n_a = n;
        in.a = a;
        in.n_b = n;
        in.b = b;
        ROUND_TRIP(gpubridge__vector_add_request, &in, out);
        assert_int_equal(out->op, op);
        assert_floats_eq(a, n, out->a, out->n_a);
        assert_floats_eq(b, n, out->b, out->n_b);
        gpubridge__vector_add_request__free_unpacked(out, NULL);
    }

    /* Packed on the wire: op(2) + a: tag, len, 4n + b: tag, len, 4n. */
    Gpubridge__VectorAddRequest in = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT, *out;
    in.op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_SUB;
    in.n_a = n;
    in.a = a;
    in.n_b = n;
    in.b = b;
    assert_int_equal(gpubridge__vector_add_request__get_packed_size(&in), 2 + 2 * (2 + 4 * n));

    /* Empty vectors (and lengths that differ: the wire allows it, the handler
     * rejects it). */
    in.n_a = 0;
    in.a = NULL;
    ROUND_TRIP(gpubridge__vector_add_request, &in, out);
    assert_int_equal(out->n_a, 0);
    assert_floats_eq(b, n, out->b, out->n_b);
    gpubridge__vector_add_request__free_unpacked(out, NULL);
    in.n_b = 0;
    in.b = NULL;
    in.op = GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_ADD;
    assert_int_equal(gpubridge__vector_add_request__get_packed_size(&in), 0);
    ROUND_TRIP(gpubridge__vector_add_request, &in, out);
    assert_int_equal(out->op, GPUBRIDGE__VECTOR_ADD_REQUEST__OP__OP_ADD);
    assert_int_equal(out->n_a, 0);
    assert_int_equal(out->n_b, 0);
    gpubridge__vector_add_request__free_unpacked(out, NULL);

    /* Parsers must take unpacked repeated scalars too (Python may send
     * either): a = [1, 2] unpacked, then [3] packed, appends. */
    static const uint8_t mixed[] = {0x15, 0x00, 0x00, 0x80, 0x3f, 0x15, 0x00, 0x00, 0x00, 0x40,
                                    0x12, 0x04, 0x00, 0x00, 0x40, 0x40};
    out = gpubridge__vector_add_request__unpack(NULL, sizeof mixed, mixed);
    assert_non_null(out);
    const float want[] = {1.0f, 2.0f, 3.0f};
    assert_floats_eq(want, 3, out->a, out->n_a);
    gpubridge__vector_add_request__free_unpacked(out, NULL);

    /* An op this build does not know survives (the handler must reject it). */
    static const uint8_t op1000[] = {0x08, 0xE8, 0x07};
    out = gpubridge__vector_add_request__unpack(NULL, sizeof op1000, op1000);
    assert_non_null(out);
    assert_int_equal(out->op, 1000);
    gpubridge__vector_add_request__free_unpacked(out, NULL);

    /* Response: full, large and empty. */
    Gpubridge__VectorAddResponse rin = GPUBRIDGE__VECTOR_ADD_RESPONSE__INIT, *rout;
    rin.n_result = n;
    rin.result = a;
    ROUND_TRIP(gpubridge__vector_add_response, &rin, rout);
    assert_floats_eq(a, n, rout->result, rout->n_result);
    gpubridge__vector_add_response__free_unpacked(rout, NULL);
    enum { BIG = 100000 };
    float *big = malloc(BIG * sizeof *big);
    assert_non_null(big);
    for (size_t i = 0; i < BIG; i++)
        big[i] = (float)i * 0.25f - 1000.0f;
    rin.n_result = BIG;
    rin.result = big;
    ROUND_TRIP(gpubridge__vector_add_response, &rin, rout);
    assert_floats_eq(big, BIG, rout->result, rout->n_result);
    gpubridge__vector_add_response__free_unpacked(rout, NULL);
    free(big);
    rin.n_result = 0;
    rin.result = NULL;
    ROUND_TRIP(gpubridge__vector_add_response, &rin, rout);
    assert_int_equal(rout->n_result, 0);
    gpubridge__vector_add_response__free_unpacked(rout, NULL);
}


/* Malformed encodings: refused by every decoder of the schema, and the
 * schema's own cases by their typed decoders. */
static void test_garbage_refused(void **state)
{
    (void)state;
    pc_garbage_refused();
    static const uint8_t floats_len3[] = {0x12, 0x03, 1, 2, 3}; /* packed floats, 3 bytes */
    assert_null(gpubridge__vector_add_request__unpack(NULL, sizeof floats_len3, floats_len3));
    static const uint8_t result_len7[] = {0x0A, 0x07, 1, 2, 3, 4, 5, 6, 7};
    assert_null(gpubridge__vector_add_response__unpack(NULL, sizeof result_len7, result_len7));
}

/* Every `message X` of grains/vecadd/ is in all_descriptors and went through
 * ROUND_TRIP. */
static void test_every_message_covered(void **state)
{
    (void)state;
    static const char *const dirs[] = {"grains/vecadd"};
    pc_check_covered(dirs, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vecadd),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(pc_random_garbage),
        cmocka_unit_test(test_every_message_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
