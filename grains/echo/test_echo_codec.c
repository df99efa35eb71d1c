/* The echo grain's codec (grains/echo/echo_codec.c, through the server's
 * codec dispatch) against protobuf-c, the reference: valid and mutated
 * requests, and the reply (the request plus its count) as an EchoResponse. */
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
#include "gpubridge.pb-c.h"
#include "mutate.h"
#include "runtime.h" /* gb_grain_kind_of */

#define GB_GRAIN_ECHO gb_grain_kind_of("echo")

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_request_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
