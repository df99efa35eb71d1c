/* Large reply frames counted in bytes per client (server/zq_bytes.c): past
 * GBI_ZQ_MAX of a client's frames over GBI_ZQ_LARGE queued in ZeroMQ, the
 * next large one is not sent (the caller keeps it); one frame always goes;
 * small frames are not counted; the bytes come back as the client reads,
 * per client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "zq_bytes.h"

typedef struct pair {
    void *ctx, *router, *a, *b; /* a and b: two clients that do not read yet */
} pair_t;

static void *client(void *ctx, const char *ep, const char *id)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int one = 1, small = 4096, linger = 0;
    zmq_setsockopt(d, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(d, ZMQ_RCVBUF, &small, sizeof small);
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_ROUTING_ID, id, strlen(id));
    assert_int_equal(zmq_connect(d, ep), 0);
    assert_int_equal(zmq_send(d, "hi", 2, 0), 2); /* the router learns its id */
    return d;
}

static int setup(void **state)
{
    pair_t *p = calloc(1, sizeof *p);
    char ep[64];
    snprintf(ep, sizeof ep, "ipc:///tmp/gb-zq-%d.sock", (int)getpid());
    p->ctx = zmq_ctx_new();
    p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
    int mandatory = 1, linger = 0, sndbuf = 4096;
    zmq_setsockopt(p->router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    zmq_setsockopt(p->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(p->router, ZMQ_SNDBUF, &sndbuf, sizeof sndbuf);
    assert_int_equal(zmq_bind(p->router, ep), 0);
    p->a = client(p->ctx, ep, "client-a");
    p->b = client(p->ctx, ep, "client-b");
    char buf[64];
    for (int i = 0; i < 2; i++) { /* both hellos: both ids known */
        assert_true(zmq_recv(p->router, buf, sizeof buf, 0) > 0);
        assert_true(zmq_recv(p->router, buf, sizeof buf, 0) > 0);
    }
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    pair_t *p = *state;
    zmq_close(p->a);
    zmq_close(p->b);
    zmq_close(p->router);
    zmq_ctx_term(p->ctx);
    free(p);
    return 0;
}

/* Sends large frames to id until one is held back; how many went. */
static int fill(gbi_zq_t *zq, void *router, const char *id, const void *frame, size_t len)
{
    int sent = 0;
    while (sent < 1000 && gbi_zq_send(zq, router, (const uint8_t *)id, strlen(id), 0, frame, len) == 0)
        sent++;
    return sent;
}

static void test_large_frames_bounded_per_client(void **state)
{
    pair_t *p = *state;
    gbi_zq_t *zq = gbi_zq_new();
    assert_non_null(zq);
    const size_t len = 512 << 10;
    char *frame = calloc(1, len);
    assert_non_null(frame);
    usleep(100000);
    /* GBI_ZQ_MAX / len frames held (and one or two ZeroMQ has already
     * written into the socket buffers), not the 32 the queue would take. */
    const int a = fill(zq, p->router, "client-a", frame, len);
    assert_true(a >= (int)(GBI_ZQ_MAX / len) && a <= (int)(GBI_ZQ_MAX / len) + 3);
    /* Another client has its own bound. */
    const int b = fill(zq, p->router, "client-b", frame, len);
    assert_true(b >= (int)(GBI_ZQ_MAX / len) && b <= (int)(GBI_ZQ_MAX / len) + 3);
    /* Small frames are not counted: the queue's own bound holds them. */
    assert_int_equal(gbi_zq_send(zq, p->router, (const uint8_t *)"client-a", 8, 0, "small", 5), 0);
    /* A's reading gives its bytes back: more go. */
    zmq_msg_t m;
    zmq_msg_init(&m);
    for (int i = 0; i < a; i++)
        assert_true(zmq_msg_recv(&m, p->a, 0) >= 0);
    usleep(100000);
    assert_true(fill(zq, p->router, "client-a", frame, len) >= 1);
    /* A client gone: nothing sent, said as such. */
    assert_int_equal(gbi_zq_send(zq, p->router, (const uint8_t *)"nobody", 6, 0, frame, len), 1);
    zmq_msg_close(&m);
    gbi_zq_destroy(&zq);
    assert_null(zq);
    gbi_zq_destroy(&zq);
    free(frame);
}

/* A frame larger than the bound still goes, alone. */
static void test_one_frame_always(void **state)
{
    pair_t *p = *state;
    gbi_zq_t *zq = gbi_zq_new();
    const size_t len = 3 * GBI_ZQ_MAX;
    char *frame = calloc(1, len);
    assert_non_null(frame);
    assert_int_equal(gbi_zq_send(zq, p->router, (const uint8_t *)"client-b", 8, 0, frame, len), 0);
    gbi_zq_destroy(&zq); /* its count lives on until ZeroMQ frees the frame */
    free(frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_frames_bounded_per_client),
        cmocka_unit_test(test_one_frame_always),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
