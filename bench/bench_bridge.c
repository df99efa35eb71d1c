/* Bridge benchmark: round trip and throughput of vecadd requests through the
 * gpubridge daemon over ZeroMQ, side by side with a raw ZeroMQ ROUTER/DEALER
 * echo on the same endpoint type (the floor), for ipc and tcp. The bridge runs
 * in this process (engine + server on their own thread), as the daemon does.
 * Prints a table and a JSON line.
 *
 *   bench_bridge [--mode cpu|persistent|relaunch] [--iters N] [--seconds S]
 *
 * Latency as libzmq's local_lat/remote_lat: one message out, its reply back,
 * N times after a warm-up; median and p99. Throughput as remote_thr, but
 * round trips: a window of frames in flight, each one request (echo floor:
 * one message) or a Batch of 64, every reply checked. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "config.h"
#include "detect.h"
#include "engine.h"
#include "gpubridge.pb-c.h"
#include "log.h"
#include "pb_reply.h"
#include "server.h"
#include "vecadd.pb-c.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- the floor: a raw ROUTER echo ------------------------------------- */

/* The echo has a ZeroMQ context (and so an I/O thread) of its own, as the
 * bridge has: sharing the client's context would let one I/O thread serve
 * both ends of the connection, sparing the floor the cross-thread wake-ups
 * every real server (libzmq's local_lat in its own process) pays. */
typedef struct echo_srv {
    void *ctx;
    char endpoint[256];
    volatile int stop;
} echo_srv_t;

static void *echo_main(void *arg)
{
    echo_srv_t *e = arg;
    void *r = zmq_socket(e->ctx, ZMQ_ROUTER);
    int to = 100;
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &to, sizeof to);
    zmq_bind(r, e->endpoint);
    while (!e->stop) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, r, 0) >= 0 && zmq_msg_recv(&body, r, 0) >= 0) {
            zmq_msg_send(&id, r, ZMQ_SNDMORE);
            zmq_msg_send(&body, r, 0);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    zmq_close(r);
    return NULL;
}

/* ---- the bridge in a thread ------------------------------------------- */

typedef struct bridge_thr {
    gb_config_t cfg;
    gb_facts_t facts;
    gb_selection_t sel;
    gb_engine_t *engine;
    gb_server_t *server;
    volatile sig_atomic_t stop;
} bridge_thr_t;

static void *bridge_main(void *arg)
{
    bridge_thr_t *b = arg;
    gb_server_run(b->server, &b->stop, 5000);
    return NULL;
}

/* ---- requests ------------------------------------------------------------ */

/* Grains a batch frame's requests go to: envelope i to key i % g_keys. An
 * actor system's batch reaches many grains; one grain's messages run one at a
 * time (turn order), so --keys 1 measures a single grain's handler instead. */
static int g_keys = 64;
/* Batch frames kept in flight by the throughput run (single messages: 256). */
static int g_window = 64;

static size_t make_frame(uint8_t *buf, uint64_t first_corr, int n)
{
    static float a[3] = {1, 2, 3}, b[3] = {0.5f, 0.25f, 0.125f};
    uint8_t pl[64];
    Gpubridge__VectorAddRequest v = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    v.n_a = v.n_b = 3;
    v.a = a;
    v.b = b;
    size_t pl_len = gpubridge__vector_add_request__pack(&v, pl);
    Gpubridge__GrainId g[64];
    Gpubridge__Envelope envs[64], *ptrs[64];
    for (int i = 0; i < n; i++) {
        gpubridge__grain_id__init(&g[i]);
        g[i].type = "vecadd";
        g[i].key = (uint64_t)(i % g_keys);
        gpubridge__envelope__init(&envs[i]);
        envs[i].correlation_id = first_corr + (uint64_t)i;
        envs[i].grain = &g[i];
        envs[i].kind = GPUBRIDGE__KIND__KIND_REQUEST;
        envs[i].message_type = 1;
        envs[i].payload.data = pl;
        envs[i].payload.len = pl_len;
        ptrs[i] = &envs[i];
    }
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    if (n == 1) {
        f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
        f.envelope = &envs[0];
    } else {
        batch.n_envelopes = (size_t)n;
        batch.envelopes = ptrs;
        f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
        f.batch = &batch;
    }
    return gpubridge__client_frame__pack(&f, buf);
}

/* Replies are read in place (pb_reply.h), not with protobuf-c: unpacking
 * allocates per reply, and on this side of the throughput runs that cost was
 * the client's share of the numbers rather than the bridge's. */

enum { VECADD_RESULT = 1 }; /* VectorAddResponse.result (vecadd.proto) */

/* 0 when v is the answer every request here gets: STATUS_OK and a
 * VectorAddResponse whose `result` is 3 packed floats with result[0] 1.5 and
 * result[2] 3.125; -1 for anything else. */
static int reply_ok(const gb_pb_reply_view_t *v)
{
    if (v->status != 0 || v->payload_len == 0)
        return -1;
    const uint8_t *q = v->payload, *qend = v->payload + v->payload_len;
    gb_pb_field_t f;
    int r;
    float res[3];
    int seen = 0;
    while ((r = gb_pb_next(&q, qend, &f)) > 0) {
        if (f.num != VECADD_RESULT)
            continue;
        /* One packed run of exactly 3 floats; the unpacked form or several
         * runs would be legal protobuf, but the bridge does not send them. */
        if (f.wt != GB_PB_LEN || f.len != sizeof res || seen++)
            return -1;
        memcpy(res, f.p, sizeof res);
    }
    return r == 0 && seen && res[0] == 1.5f && res[2] == 3.125f ? 0 : -1;
}

/* Checks one ServerFrame; returns its number of replies, or -1 when it is
 * malformed, sets no body, or holds a wrong reply. */
static int frame_checked(const uint8_t *p, size_t len)
{
    gb_pb_reply_iter_t it;
    gb_pb_reply_view_t v;
    int n = 0;
    if (gb_pb_reply_frame_open(&it, p, len) != 0)
        return -1;
    for (; gb_pb_reply_frame_next(&it, &v); n++)
        if (reply_ok(&v) != 0)
            return -1;
    return n;
}

/* Receives one frame; for the bridge, checks its replies and returns their count. */
static int recv_checked(void *s, int bridge)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    int n = bridge ? frame_checked(zmq_msg_data(&m), zmq_msg_size(&m)) : 1;
    zmq_msg_close(&m);
    return n;
}

/* Median of n values (sorts a copy). */
static double median_of(const double *v, int n)
{
    double t[15];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

typedef struct result {
    char name[64];
    double median_us, p99_us, rate_single, rate_batch;
} result_t;

static void *open_dealer(void *ctx, const char *endpoint)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int to = 10000, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, endpoint);
    return s;
}

/* One round trip of a single request on s; its time in us, or -1. */
static double round_trip(void *s, int bridge, const uint8_t *one, size_t one_len)
{
    double t0 = now_us();
    zmq_send(s, one, one_len, 0);
    if (recv_checked(s, bridge) != 1)
        return -1;
    return now_us() - t0;
}

/* Throughput: keep `window` frames' worth of requests in flight. The bridge
 * may merge replies of several frames into one ReplyBatch, so count
 * replies, not frames. */
static int throughput(void *s, int bridge, double seconds, result_t *r)
{
    uint8_t one[256], batch[16384];
    size_t one_len = make_frame(one, 1, 1), batch_len = make_frame(batch, 1, 64);
    for (int mode = 0; mode < 2; mode++) {
        const uint8_t *frame = mode ? batch : one;
        size_t len = mode ? batch_len : one_len;
        uint64_t per = mode ? 64 : 1, window = mode ? (uint64_t)g_window : 256, sent = 0, recvd = 0;
        double t0 = now_us(), t1;
        do {
            while (sent - recvd < window * per) {
                zmq_send(s, frame, len, 0);
                sent += per;
            }
            int n = recv_checked(s, bridge);
            if (n < 0)
                return -1;
            recvd += bridge ? (uint64_t)n : per;
            t1 = now_us();
        } while (t1 - t0 < seconds * 1e6);
        while (recvd < sent) {
            int n = recv_checked(s, bridge);
            if (n < 0)
                return -1;
            recvd += bridge ? (uint64_t)n : per;
        }
        t1 = now_us();
        if (mode)
            r->rate_batch = (double)recvd / ((t1 - t0) / 1e6);
        else
            r->rate_single = (double)recvd / ((t1 - t0) / 1e6);
    }
    return 0;
}

/* The echo floor and the bridge on one endpoint kind. Round trips
 * alternate between the two (which goes first alternates too), so that both
 * see the same moment of a noisy host; then each one's throughput. */
static int measure_pair(void *ctx, const char *ep_echo, const char *ep_bridge, int iters, double seconds,
                        result_t *re, result_t *rb)
{
    void *se = open_dealer(ctx, ep_echo), *sb = open_dealer(ctx, ep_bridge);
    uint8_t one[256];
    size_t one_len = make_frame(one, 1, 1);
    int warm = iters / 10 + 100, rc = -1;
    static double lat_e[1000000], lat_b[1000000];
    if (iters > 1000000)
        iters = 1000000;
    for (int i = 0; i < warm + iters; i++) {
        double te, tb;
        if (i & 1) {
            tb = round_trip(sb, 1, one, one_len);
            te = round_trip(se, 0, one, one_len);
        } else {
            te = round_trip(se, 0, one, one_len);
            tb = round_trip(sb, 1, one, one_len);
        }
        if (te < 0 || tb < 0) {
            fprintf(stderr, "bench_bridge: bad or missing reply (%s)\n", te < 0 ? re->name : rb->name);
            goto out;
        }
        if (i >= warm) {
            lat_e[i - warm] = te;
            lat_b[i - warm] = tb;
        }
    }
    qsort(lat_e, (size_t)iters, sizeof *lat_e, cmp_d);
    qsort(lat_b, (size_t)iters, sizeof *lat_b, cmp_d);
    re->median_us = lat_e[iters / 2];
    re->p99_us = lat_e[(int)(iters * 0.99)];
    rb->median_us = lat_b[iters / 2];
    rb->p99_us = lat_b[(int)(iters * 0.99)];
    if (throughput(se, 0, seconds, re) != 0 || throughput(sb, 1, seconds, rb) != 0) {
        fprintf(stderr, "bench_bridge: bad or missing reply in a throughput run\n");
        goto out;
    }
    rc = 0;
out:
    zmq_close(se);
    zmq_close(sb);
    return rc;
}

int main(int argc, char **argv)
{
    const char *mode_name = "cpu";
    int iters = 10000, rounds = 3;
    double seconds = 1.0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--mode") && a + 1 < argc)
            mode_name = argv[++a];
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--seconds") && a + 1 < argc)
            seconds = atof(argv[++a]);
        else if (!strcmp(argv[a], "--rounds") && a + 1 < argc)
            rounds = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--keys") && a + 1 < argc)
            g_keys = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--window") && a + 1 < argc)
            g_window = atoi(argv[++a]);
        else {
            printf("usage: bench_bridge [--mode cpu|persistent|relaunch] [--iters N] [--seconds S] [--rounds R]\n"
                   "                    [--keys K] [--window F]\n"
                   "  A batch's 64 requests go to K grains (default 64): envelope i to vecadd key i %% K.\n"
                   "  The batch throughput run keeps F frames in flight (default 64: the 4,096 requests\n"
                   "  a vecadd ring holds; single messages: 256 in flight).\n"
                   "  Each round, on ipc and on tcp: single round trips alternate between the raw ZeroMQ\n"
                   "  echo and the bridge, then each one's throughput; rows give the median over rounds\n"
                   "  (default 3), so a noisy moment hits both sides.\n");
            return strcmp(argv[a], "--help") ? 2 : 0;
        }
    }
    gb_mode mode;
    if (gb_mode_parse(mode_name, &mode) != 0 || mode == GB_MODE_AUTO || iters < 100 || rounds < 1 || rounds > 15 ||
        g_keys < 1 || g_keys > 64 || g_window < 1 || g_window > 1024) {
        fprintf(stderr, "bench_bridge: --mode cpu|persistent|relaunch, --iters >= 100, --rounds 1..15, --keys 1..64, --window 1..1024\n");
        return 2;
    }
    gb_log_set_level(GB_LOG_WARN);
    char dir[] = "/tmp/gb-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    const char *kinds[2] = {"ipc", "tcp"};
    char ep_bridge[2][128], ep_echo[2][128];
    snprintf(ep_bridge[0], sizeof ep_bridge[0], "ipc://%s/bridge.sock", dir);
    snprintf(ep_echo[0], sizeof ep_echo[0], "ipc://%s/echo.sock", dir);
    snprintf(ep_bridge[1], sizeof ep_bridge[1], "tcp://127.0.0.1:%d", 25600 + (getpid() % 1000));
    snprintf(ep_echo[1], sizeof ep_echo[1], "tcp://127.0.0.1:%d", 26600 + (getpid() % 1000));

    static bridge_thr_t b;
    gb_config_defaults(&b.cfg);
    b.cfg.n_endpoints = 2;
    snprintf(b.cfg.endpoints[0], sizeof b.cfg.endpoints[0], "%s", ep_bridge[0]);
    snprintf(b.cfg.endpoints[1], sizeof b.cfg.endpoints[1], "%s", ep_bridge[1]);
    b.cfg.mode = mode;
    char err[256];
    if (gb_detect_run(&b.cfg, "/", mode_name, &b.facts, &b.sel, err, sizeof err) != GB_OK ||
        gb_engine_new(&b.cfg, b.sel.mode, b.sel.device, &b.engine) != GB_OK ||
        gb_server_new(&b.cfg, b.engine, &b.facts, &b.sel, &b.server, err, sizeof err) != GB_OK) {
        fprintf(stderr, "bench_bridge: cannot start the bridge in %s mode: %s\n", mode_name, err);
        return 1;
    }
    pthread_t bt;
    pthread_create(&bt, NULL, bridge_main, &b);
    void *ctx = zmq_ctx_new();
    echo_srv_t echo[2];
    pthread_t et[2];
    for (int k = 0; k < 2; k++) {
        echo[k].ctx = zmq_ctx_new();
        echo[k].stop = 0;
        snprintf(echo[k].endpoint, sizeof echo[k].endpoint, "%s", ep_echo[k]);
        pthread_create(&et[k], NULL, echo_main, &echo[k]);
    }
    usleep(200000);
    printf("bench_bridge: mode %s (%s), %d round trips, %.1f s per throughput run, %d round(s), %ld cores\n",
           gb_mode_name(b.sel.mode), b.sel.why, iters, seconds, rounds, sysconf(_SC_NPROCESSORS_ONLN));
    result_t res[4], per[4][15];
    double delta[2][15];
    int rc = 0;
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < 2 && rc == 0; k++) {
            snprintf(per[2 * k][r].name, sizeof per[2 * k][r].name, "raw zmq echo, %s", kinds[k]);
            snprintf(per[2 * k + 1][r].name, sizeof per[2 * k + 1][r].name, "bridge, %s", kinds[k]);
            rc |= measure_pair(ctx, ep_echo[k], ep_bridge[k], iters, seconds, &per[2 * k][r], &per[2 * k + 1][r]);
            delta[k][r] = per[2 * k + 1][r].median_us - per[2 * k][r].median_us;
        }
    }
    for (int i = 0; i < 4 && rc == 0; i++) {
        snprintf(res[i].name, sizeof res[i].name, i % 2 ? "bridge %s, %s" : "raw zmq echo, %s%.0s",
                 i % 2 ? gb_mode_name(b.sel.mode) : kinds[i / 2], kinds[i / 2]);
        double v[4][15];
        for (int r = 0; r < rounds; r++) {
            v[0][r] = per[i][r].median_us;
            v[1][r] = per[i][r].p99_us;
            v[2][r] = per[i][r].rate_single;
            v[3][r] = per[i][r].rate_batch;
        }
        res[i].median_us = median_of(v[0], rounds);
        res[i].p99_us = median_of(v[1], rounds);
        res[i].rate_single = median_of(v[2], rounds);
        res[i].rate_batch = median_of(v[3], rounds);
    }
    __atomic_store_n(&b.stop, 1, __ATOMIC_RELAXED); /* the server thread reads it */
    pthread_join(bt, NULL);
    for (int k = 0; k < 2; k++) {
        echo[k].stop = 1;
        pthread_join(et[k], NULL);
        zmq_ctx_term(echo[k].ctx);
    }
    gb_server_destroy(&b.server);
    gb_engine_destroy(&b.engine, 2000);
    if (rc) {
        zmq_ctx_term(ctx);
        return 1;
    }
    printf("\n%-28s %10s %10s %14s %16s\n", "path", "median us", "p99 us", "single msg/s", "batch-64 msg/s");
    for (int i = 0; i < 4; i++)
        printf("%-28s %10.1f %10.1f %14.0f %16.0f\n", res[i].name, res[i].median_us, res[i].p99_us,
               res[i].rate_single, res[i].rate_batch);
    for (int k = 0; k < 2; k++) {
        printf("%s: bridge - echo median %+.1f us (rounds:", kinds[k], median_of(delta[k], rounds));
        for (int r = 0; r < rounds; r++)
            printf(" %+.1f", delta[k][r]);
        printf("); bridge batch-64 rate / echo single rate %.2fx\n", res[2 * k + 1].rate_batch / res[2 * k].rate_single);
    }
    printf("{\"bench\":\"bridge\",\"mode\":\"%s\",\"rounds\":%d,\"keys\":%d,\"rows\":[", gb_mode_name(b.sel.mode),
           rounds, g_keys);
    for (int i = 0; i < 4; i++)
        printf("%s{\"path\":\"%s\",\"median_us\":%.2f,\"p99_us\":%.2f,\"single_msgs_per_s\":%.0f,"
               "\"batch64_msgs_per_s\":%.0f}",
               i ? "," : "", res[i].name, res[i].median_us, res[i].p99_us, res[i].rate_single, res[i].rate_batch);
    printf("]}\n");
    zmq_ctx_term(ctx);
    return 0;
}
