/* test_echo_proto.c: echo.proto (EchoRequest, EchoResponse)
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

#include "echo.pb-c.h"

static const ProtobufCMessageDescriptor *const all_descriptors[] = {
    &gpubridge__echo_request__descriptor,
    &gpubridge__echo_response__descriptor,
};
#define N_DESCRIPTORS (sizeof all_descriptors / sizeof all_descriptors[0])

#include "proto_check.h"

static void test_echo(void **state)
{
    (void)state;
    enum { DATA = 65536 };
    uint8_t *data = malloc(DATA);
    assert_non_null(data);
    for (size_t i = 0; i < DATA; i++)
        data[i] = (uint8_t)(i ^ (i >> 8));

    Gpubridge__EchoRequest in = GPUBRIDGE__ECHO_REQUEST__INIT, *out;
    in.sequence = UINT64_MAX;
    in.data.len = DATA;
    in.data.data = data;
    in.client_time_ns = UINT64_MAX - 1;
    ROUND_TRIP(gpubridge__echo_request, &in, out);
    assert_int_equal(out->sequence, in.sequence);
    assert_bytes_eq(in.data, out->data);
    assert_int_equal(out->client_time_ns, in.client_time_ns);
    gpubridge__echo_request__free_unpacked(out, NULL);

    in.data.len = 0; /* empty data */
    in.data.data = NULL;
    in.sequence = 1;
    ROUND_TRIP(gpubridge__echo_request, &in, out);
    assert_int_equal(out->sequence, 1);
    assert_int_equal(out->data.len, 0);
    gpubridge__echo_request__free_unpacked(out, NULL);

    Gpubridge__EchoResponse rin = GPUBRIDGE__ECHO_RESPONSE__INIT, *rout;
    rin.sequence = 12345;
    rin.data.len = 1000;
    rin.data.data = data;
    rin.client_time_ns = 1700000000123456789ull;
    rin.grain_count = UINT64_MAX;
    ROUND_TRIP(gpubridge__echo_response, &rin, rout);
    assert_int_equal(rout->sequence, rin.sequence);
    assert_bytes_eq(rin.data, rout->data);
    assert_int_equal(rout->client_time_ns, rin.client_time_ns);
    assert_int_equal(rout->grain_count, rin.grain_count);
    gpubridge__echo_response__free_unpacked(rout, NULL);

    /* Schema evolution: an EchoResponse read as an EchoRequest keeps the
     * shared fields and carries grain_count as an unknown field, which is
     * packed again unchanged. */
    size_t len;
    uint8_t *bytes = pack_new(&rin.base, &len);
    out = gpubridge__echo_request__unpack(NULL, len, bytes);
    assert_non_null(out);
    assert_int_equal(out->sequence, rin.sequence);
    assert_bytes_eq(rin.data, out->data);
    assert_int_equal(out->client_time_ns, rin.client_time_ns);
    assert_int_equal(out->base.n_unknown_fields, 1);
    check_repack(&out->base, bytes, len);
    gpubridge__echo_request__free_unpacked(out, NULL);
    free(bytes);
    free(data);
}


/* Malformed encodings: refused by every decoder of the schema, and the
 * schema's own cases by their typed decoders. */
static void test_garbage_refused(void **state)
{
    (void)state;
    pc_garbage_refused();
    static const uint8_t echo_data_cut[] = {0x08, 0x01, 0x12, 0x10, 'h', 'i'};
    assert_null(gpubridge__echo_request__unpack(NULL, sizeof echo_data_cut, echo_data_cut));
}

/* Every `message X` of grains/echo/ is in all_descriptors and went through
 * ROUND_TRIP. */
static void test_every_message_covered(void **state)
{
    (void)state;
    static const char *const dirs[] = {"grains/echo"};
    pc_check_covered(dirs, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(pc_random_garbage),
        cmocka_unit_test(test_every_message_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
