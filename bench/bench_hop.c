/* Hop benchmark: the cost of one grain-to-grain message. The bridge runs in
 * this process (engine + server on a thread, as bench_bridge) with the
 * ping-pong grains of examples/pipeline (pingpong.ping <-> pingpong.pong,
 * each forwarding to the other); a client sends {hops} to pingpong.ping and
 * the grain that finds it at 0 answers. A request of 0 hops is a plain round
 * trip (the floor of this method); one of N hops adds N grain-to-grain
 * messages, so
 *
 *   hop = (median round trip of N hops - median of 0 hops) / N
 *
 * Then the throughput of grain-to-grain messages: KEYS requests of HOPS hops
 * each (--rate KEYSxHOPS), to as many keys, in one batch frame, all replies
 * awaited, round after round for a second: forwards a second.
 *
 * Prints a table and a JSON line.
 *
 *   bench_hop [--mode cpu|persistent|relaunch] [--lib PATH] [--iters N] [--hops a,b,...] [--links on|off]
 *             [--rate KEYSxHOPS,...]
 *
 * On a GPU it first measures the floor beside it: a bare ping-pong of a
 * sequence number in device memory between two resident kernels
 * (hop_floor.h), and prints the hop's ratio to it. --links off routes every
 * message by the host (messaging.device_links = false), for comparison.
 *
 * --lib: the pipeline example's libpipeline_grains.so (default: this build's). */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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
#include "grain_libs.h"
#include "links.h"
#include "log.h"
#include "server.h"
#if GB_HAVE_CUDA
#include "hop_floor.h"
#endif

#ifndef GB_PIPELINE_LIB
#define GB_PIPELINE_LIB "libpipeline_grains.so"
#endif

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

/* e: a request {*hops} to pingpong.ping `key` (g is its grain id). */
static void ping_envelope(Gpubridge__Envelope *e, Gpubridge__GrainId *g, uint64_t key, uint64_t corr,
                          const uint32_t *hops)
{
    gpubridge__grain_id__init(g);
    g->type = "pingpong.ping";
    g->key = key;
    gpubridge__envelope__init(e);
    e->correlation_id = corr;
    e->grain = g;
    e->kind = GPUBRIDGE__KIND__KIND_REQUEST;
    e->message_type = 1; /* PINGPONG_MSG_HOPS */
    e->payload.data = (uint8_t *)hops;
    e->payload.len = 4;
}

/* A request {hops} to pingpong.ping key 1, encoded into buf. */
static size_t make_frame(uint8_t *buf, uint32_t hops)
{
    Gpubridge__GrainId g;
    Gpubridge__Envelope e;
    ping_envelope(&e, &g, 1, 1, &hops);
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    f.envelope = &e;
    return gpubridge__client_frame__pack(&f, buf);
}

/* One round trip of `hops`; its time in us, or -1 when the reply is not
 * the hops made. */
static double round_trip(void *s, const uint8_t *frame, size_t len, uint32_t hops)
{
    uint8_t buf[512];
    const double t0 = now_us();
    zmq_send(s, frame, len, 0);
    int n = zmq_recv(s, buf, sizeof buf, 0);
    const double t = now_us() - t0;
    Gpubridge__ServerFrame *f = n > 0 ? gpubridge__server_frame__unpack(NULL, (size_t)n, buf) : NULL;
    int ok = f && f->body_case == GPUBRIDGE__SERVER_FRAME__BODY_REPLY && f->reply->status == 0 &&
             f->reply->payload.len == 4 && memcmp(f->reply->payload.data, &hops, 4) == 0;
    if (f && !ok)
        fprintf(stderr, "bench_hop: %u hops: status %d %s\n", hops, f->reply ? (int)f->reply->status : -1,
                f->reply && f->reply->error ? f->reply->error : "");
    if (f)
        gpubridge__server_frame__free_unpacked(f, NULL);
    return ok ? t : -1;
}

/* Median and p99 of iters round trips of `hops` (after a warm-up). */
static int measure(void *s, uint32_t hops, int iters, double *median, double *p99)
{
    uint8_t frame[128];
    size_t len = make_frame(frame, hops);
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < iters / 10 + 10; i++)
        if (round_trip(s, frame, len, hops) < 0)
            return free(t), -1;
    for (int i = 0; i < iters; i++)
        if ((t[i] = round_trip(s, frame, len, hops)) < 0)
            return free(t), -1;
    qsort(t, (size_t)iters, sizeof *t, cmp_d);
    *median = t[iters / 2];
    *p99 = t[(size_t)((double)iters * 0.99)];
    free(t);
    return 0;
}

/* Appends to the JSON line in buf (cap bytes, *len used): what does not fit
 * is cut, never written past the end. */
static void json_add(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void json_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < cap - 1 ? *len + (size_t)n : cap - 1;
}

/* Grain-to-grain throughput: `keys` requests of `hops` hops each, to keys
 * 1..keys, in one batch frame, all replies awaited, round after round for
 * `seconds`. Returns forwards a second (keys * hops per round), or -1. */
static double measure_rate(void *s, uint32_t keys, uint32_t hops, double seconds, uint64_t *forwards)
{
    Gpubridge__GrainId *g = calloc(keys, sizeof *g);
    Gpubridge__Envelope *e = calloc(keys, sizeof *e), **ep = calloc(keys, sizeof *ep);
    const size_t cap = 1u << 20;
    uint8_t *frame = malloc(cap), *buf = malloc(cap);
    double rate = -1;
    if (!g || !e || !ep || !frame || !buf)
        goto out;
    for (uint32_t i = 0; i < keys; i++) {
        ping_envelope(&e[i], &g[i], 1000 + i, i + 1, &hops);
        ep[i] = &e[i];
    }
    Gpubridge__Batch bt = GPUBRIDGE__BATCH__INIT;
    bt.n_envelopes = keys;
    bt.envelopes = ep;
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    f.batch = &bt;
    if (gpubridge__client_frame__get_packed_size(&f) > cap)
        goto out;
    const size_t len = gpubridge__client_frame__pack(&f, frame);
    uint64_t rounds = 0;
    const double t0 = now_us();
    double t = t0;
    while (t - t0 < seconds * 1e6 || rounds < 2) {
        if (zmq_send(s, frame, len, 0) < 0) {
            fprintf(stderr, "bench_hop: rate: cannot send: %s\n", zmq_strerror(zmq_errno()));
            goto out;
        }
        for (uint32_t got = 0; got < keys;) {
            const int n = zmq_recv(s, buf, cap, 0);
            Gpubridge__ServerFrame *r =
                n > 0 && (size_t)n <= cap ? gpubridge__server_frame__unpack(NULL, (size_t)n, buf) : NULL;
            if (!r) {
                fprintf(stderr, "bench_hop: rate: %s after %u of %u replies\n",
                        n < 0 ? "no reply within 20 s" : "a reply frame that does not decode", got, keys);
                goto out;
            }
            Gpubridge__Reply *one[1] = {r->reply};
            Gpubridge__Reply **reps = r->body_case == GPUBRIDGE__SERVER_FRAME__BODY_BATCH ? r->batch->replies : one;
            const size_t nr = r->body_case == GPUBRIDGE__SERVER_FRAME__BODY_BATCH ? r->batch->n_replies : 1;
            for (size_t k = 0; k < nr; k++) {
                const Gpubridge__Reply *q = reps[k];
                if (!q || q->status != 0 || q->payload.len != 4 || memcmp(q->payload.data, &hops, 4) != 0) {
                    fprintf(stderr, "bench_hop: rate: status %d %s\n", q ? (int)q->status : -1,
                            q && q->error ? q->error : "");
                    gpubridge__server_frame__free_unpacked(r, NULL);
                    goto out;
                }
            }
            got += (uint32_t)nr;
            gpubridge__server_frame__free_unpacked(r, NULL);
        }
        rounds++;
        t = now_us();
    }
    *forwards += rounds * keys * (uint64_t)hops;
    rate = (double)rounds * keys * hops / ((t - t0) / 1e6);
out:
    free(g), free(e), free(ep), free(frame), free(buf);
    return rate;
}

/* --rate's keys: pingpong's activation tables hold 1,024 grains each (its
 * default max_grains) beside the latency rows' key. */
#define RATE_MAX_KEYS 1000u

static int start_bridge(bridge_thr_t *b, const char *mode_name, const char *lib, const char *endpoint, int links)
{
    char err[1024];
    gb_config_defaults(&b->cfg);
    b->cfg.log_level = GB_LOG_WARN;
    b->cfg.n_endpoints = 1;
    snprintf(b->cfg.endpoints[0], sizeof b->cfg.endpoints[0], "%s", endpoint);
    b->cfg.n_libs = 1;
    snprintf(b->cfg.libs[0].path, sizeof b->cfg.libs[0].path, "%s", lib);
    snprintf(b->cfg.libs[0].file, sizeof b->cfg.libs[0].file, "--lib");
    b->cfg.mail_max_hops = 1u << 20;
    b->cfg.mail_device_links = links != 0;
    gb_mode mode = GB_MODE_AUTO;
    gb_mode_parse(mode_name, &mode);
    b->cfg.mode = mode;
    if (gb_grain_libs_load(&b->cfg, mode != GB_MODE_CPU, err, sizeof err) != GB_OK ||
        gb_detect_run(&b->cfg, "/", mode_name, &b->facts, &b->sel, err, sizeof err) != GB_OK ||
        gb_engine_new(&b->cfg, b->sel.mode, b->sel.device, &b->engine) != GB_OK ||
        gb_server_new(&b->cfg, b->engine, &b->facts, &b->sel, &b->server, err, sizeof err) != GB_OK) {
        fprintf(stderr, "bench_hop: cannot start the bridge in %s mode: %s\n", mode_name, err);
        return -1;
    }
    return 0;
}

#define USAGE                                                                                                  \
    "usage: bench_hop [--mode cpu|persistent|relaunch] [--lib PATH] [--iters N] [--hops a,b,...]\n"            \
    "                 [--links on|off] [--rate KEYSxHOPS,...]\n"                                               \
    "  Round trips through a chain of grain-to-grain messages (the pipeline example's\n"                        \
    "  ping-pong grains), median per hop count (default 0,1,16,64; --iters default\n"                          \
    "  2000, at least 10); --lib: libpipeline_grains.so (default: this build's); --links off:\n"             \
    "  every message by the host. On a GPU, the floor first: a bare ping-pong between two kernels.\n"         \
    "  --rate: throughput rows, KEYS (1..1000) requests of HOPS hops each in flight at once\n"           \
    "  (default 256x64).\n"

int main(int argc, char **argv)
{
    const char *mode_name = "cpu", *lib = GB_PIPELINE_LIB, *hops_list = "0,1,16,64", *rate_list = "256x64";
    int iters = 2000, links = 1;
    for (int i = 1; i < argc; i += 2) {
        const int has = i + 1 < argc;
        if (!strcmp(argv[i], "--mode") && has)
            mode_name = argv[i + 1];
        else if (!strcmp(argv[i], "--lib") && has)
            lib = argv[i + 1];
        else if (!strcmp(argv[i], "--iters") && has)
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hops") && has)
            hops_list = argv[i + 1];
        else if (!strcmp(argv[i], "--rate") && has)
            rate_list = argv[i + 1];
        else if (!strcmp(argv[i], "--links") && has && (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off")))
            links = !strcmp(argv[i + 1], "on");
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_hop: unknown option or missing value: '%s'\n" USAGE, argv[i]);
            return 2;
        }
    }
    if (iters < 10)
        iters = 10;
    char dir[] = "/tmp/gbhop.XXXXXX", ep[128];
    if (!mkdtemp(dir))
        return 1;
    snprintf(ep, sizeof ep, "ipc://%s/bridge.sock", dir);
    /* The floor before the bridge: its kernels load while the device is idle. */
    double floor_med = 0, floor_p99 = 0, clock_med = 0, cas_med = 0, unused;
#if GB_HAVE_CUDA
    if (strcmp(mode_name, "cpu") != 0 &&
        (gb_hop_floor(0, GB_HOP_FLOOR_BARE, 1000, 400, &floor_med, &floor_p99) != 0 ||
         gb_hop_floor(0, GB_HOP_FLOOR_CLOCK, 1000, 200, &clock_med, &unused) != 0 ||
         gb_hop_floor(0, GB_HOP_FLOOR_CAS, 1000, 200, &cas_med, &unused) != 0))
        floor_med = floor_p99 = clock_med = cas_med = 0;
#else
    (void)unused;
#endif
    static bridge_thr_t b;
    if (start_bridge(&b, mode_name, lib, ep, links) != 0)
        return 1;
    pthread_t bt;
    pthread_create(&bt, NULL, bridge_main, &b);
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    int to = 20000, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, ep);
    printf("bench_hop: mode %s (%s), device links %s, %d round trips per row, %ld cores\n",
           gb_mode_name(b.sel.mode), b.sel.why, links ? "on" : "off", iters, sysconf(_SC_NPROCESSORS_ONLN));
    if (floor_med > 0)
        printf("floor: bare ping-pong between two kernels, %.3f us a hop (p99 %.3f); with a clock read "
               "%.3f, with a compare-and-swap %.3f\n",
               floor_med / 1e3, floor_p99 / 1e3, clock_med / 1e3, cas_med / 1e3);
    printf("%8s %14s %11s %14s\n", "hops", "round trip us", "p99 us", "us per hop");
    char json[2048];
    size_t jl = 0;
    json_add(json, sizeof json, &jl,
                      "{\"bench\":\"hop\",\"mode\":\"%s\",\"links\":%s,\"iters\":%d,\"floor_us\":%.4f,"
                      "\"floor_p99_us\":%.4f,\"floor_clock_us\":%.4f,\"floor_cas_us\":%.4f,\"rows\":[",
                      gb_mode_name(b.sel.mode), links ? "true" : "false", iters, floor_med / 1e3, floor_p99 / 1e3,
                      clock_med / 1e3, cas_med / 1e3);
    double base = 0, hop_us = 0;
    uint64_t want_linked = 0; /* hops asked for: each a forward (warm-ups included) */
    int rc = 0, first = 1;
    for (const char *p = hops_list; *p && rc == 0; p = strchr(p, ',') ? strchr(p, ',') + 1 : "") {
        const uint32_t hops = (uint32_t)strtoul(p, NULL, 10);
        double med, p99;
        if (measure(s, hops, iters, &med, &p99) != 0) {
            rc = 1;
            break;
        }
        want_linked += (uint64_t)hops * (uint64_t)(iters + iters / 10 + 10);
        if (hops == 0)
            base = med;
        const double per = hops ? (med - base) / hops : 0;
        if (hops)
            hop_us = per; /* the longest chain's, the last row */
        printf("%8u %14.2f %11.2f %14.3f\n", hops, med, p99, per);
        json_add(json, sizeof json, &jl,
                       "%s{\"hops\":%u,\"median_us\":%.3f,\"p99_us\":%.3f,\"hop_us\":%.4f}", first ? "" : ",", hops,
                       med, p99, per);
        first = 0;
    }
    if (rc == 0 && floor_med > 0)
        printf("hop / floor: %.2f\n", hop_us * 1e3 / floor_med);
    json_add(json, sizeof json, &jl, "],\"rates\":[");
    first = 1;
    if (rc == 0 && *rate_list)
        printf("%8s %8s %18s\n", "keys", "hops", "forwards M msg/s");
    for (const char *p = rate_list; *p && rc == 0; p = strchr(p, ',') ? strchr(p, ',') + 1 : "") {
        char *x, *y = NULL;
        const unsigned long keys = strtoul(p, &x, 10), hops = *x == 'x' ? strtoul(x + 1, &y, 10) : 0;
        if (keys == 0 || keys > RATE_MAX_KEYS || hops == 0 || hops > UINT32_MAX || !y || (*y && *y != ',')) {
            fprintf(stderr, "bench_hop: --rate wants KEYSxHOPS[,...], keys 1..%u and hops > 0: '%s'\n",
                    RATE_MAX_KEYS, p);
            rc = 2;
            break;
        }
        const double r = measure_rate(s, (uint32_t)keys, (uint32_t)hops, 1.0, &want_linked);
        if (r < 0) {
            rc = 1;
            break;
        }
        printf("%8lu %8lu %18.3f\n", keys, hops, r / 1e6);
        json_add(json, sizeof json, &jl, "%s{\"keys\":%lu,\"hops\":%lu,\"forwards_per_s\":%.0f}",
                       first ? "" : ",", keys, hops, r);
        first = 0;
    }
    if (rc == 0)
        printf("%s],\"hop_us\":%.4f,\"hop_per_floor\":%.3f}\n", json, hop_us,
               floor_med > 0 ? hop_us * 1e3 / floor_med : 0.0);
    zmq_close(s);
    zmq_ctx_term(ctx);
    __atomic_store_n(&b.stop, 1, __ATOMIC_RELAXED); /* the server thread reads it */
    pthread_join(bt, NULL);
    /* Once idle (kernels publish their link counts then): how many hops went kernel to kernel. */
    uint64_t linked = 0;
    for (size_t i = 0; i < b.engine->n_types; i++) {
        uint64_t taken = 0, refused = 0;
        gb_links_counts(b.engine->links, i, &taken, &refused);
        linked += taken;
    }
    if (rc == 0)
        printf("forwards by device link: %llu of %llu\n", (unsigned long long)linked,
               (unsigned long long)want_linked);
    gb_server_destroy(&b.server);
    gb_engine_destroy(&b.engine, 2000);
    char sock[160];
    snprintf(sock, sizeof sock, "%s/bridge.sock", dir);
    unlink(sock);
    rmdir(dir);
    return rc;
}
