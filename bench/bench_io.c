/* I/O threads benchmark: batched vecadd throughput of the bridge (in this
 * process, as bench_bridge runs it) with io_threads = 1 and with more, side
 * by side in one run, from C client connections at once (one client's frames
 * all go to one I/O thread, so several are needed to spread the work).
 * Prints a table and a JSON line.
 *
 *   bench_io [--mode cpu|persistent|relaunch] [--threads 1,2,4] [--clients C]
 *            [--seconds S] [--window F] [--rounds R] [--ipc] [--devices 0,1]
 *            [--thread-load]
 *
 * --devices: each io_threads value also with the bridge on those devices
 * (`devices` in the config), beside the first device alone.
 * Each client keeps F frames of 64 requests in flight (to 64 keys) and checks
 * every reply; rows give the median over rounds, the io_threads values taking
 * turns within a round so that a noisy moment hits each. */
#include <dirent.h>
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

#define MAX_CLIENTS 16
#define MAX_VALUES 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The CPU time of each thread of this process (/proc/self/task), by name. */
#define MAX_TASKS 256
typedef struct tload {
    int n;
    int tid[MAX_TASKS];
    char name[MAX_TASKS][20];
    double cpu_s[MAX_TASKS];
    double at;
} tload_t;

static void tload_read(tload_t *t)
{
    t->n = 0;
    t->at = now_s();
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    const double tick = (double)sysconf(_SC_CLK_TCK);
    for (struct dirent *e; (e = readdir(d)) && t->n < MAX_TASKS;) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[len] = 0;
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        unsigned long ut = 0, st = 0;
        /* after the name: state, then fields 4..13, then utime and stime */
        if (!open || !close || sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
            continue;
        const int k = t->n++;
        t->tid[k] = atoi(e->d_name);
        snprintf(t->name[k], sizeof t->name[k], "%.*s", (int)(close - open - 1), open + 1);
        t->cpu_s[k] = (double)(ut + st) / tick;
    }
    closedir(d);
}

/* Each thread's share of one core between snapshots a and b, busiest first. */
static void tload_print(const tload_t *a, const tload_t *b, int io, size_t devs)
{
    const double span = b->at - a->at;
    int order[MAX_TASKS];
    double pct[MAX_TASKS];
    int n = 0;
    for (int i = 0; i < b->n; i++)
        for (int j = 0; j < a->n; j++)
            if (a->tid[j] == b->tid[i]) {
                pct[i] = span > 0 ? 100.0 * (b->cpu_s[i] - a->cpu_s[j]) / span : 0;
                order[n++] = i;
                break;
            }
    for (int i = 1; i < n; i++) /* a few dozen threads: insertion sort */
        for (int j = i; j > 0 && pct[order[j]] > pct[order[j - 1]]; j--) {
            const int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    printf("  threads, io_threads %d, %zu device(s), %% of a core:", io, devs);
    for (int i = 0; i < n; i++)
        if (pct[order[i]] >= 1.0)
            printf(" %s %.0f", b->name[order[i]], pct[order[i]]);
    printf("\n");
}

typedef struct bridge_thr {
    gb_config_t cfg;
    gb_facts_t facts;
    gb_selection_t sel;
    gb_engine_t *engine;
    gb_server_t *server;
    volatile sig_atomic_t stop;
    pthread_t thread;
} bridge_thr_t;

static void *bridge_main(void *arg)
{
    bridge_thr_t *b = arg;
    pthread_setname_np(pthread_self(), "gb-front");
    gb_server_run(b->server, &b->stop, 5000);
    return NULL;
}

static size_t make_batch(uint8_t *buf)
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
    for (int i = 0; i < 64; i++) {
        gpubridge__grain_id__init(&g[i]);
        g[i].type = "vecadd";
        g[i].key = (uint64_t)i;
        gpubridge__envelope__init(&envs[i]);
        envs[i].correlation_id = 1 + (uint64_t)i;
        envs[i].grain = &g[i];
        envs[i].kind = GPUBRIDGE__KIND__KIND_REQUEST;
        envs[i].message_type = 1;
        envs[i].payload.data = pl;
        envs[i].payload.len = pl_len;
        ptrs[i] = &envs[i];
    }
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    Gpubridge__Batch batch = GPUBRIDGE__BATCH__INIT;
    batch.n_envelopes = 64;
    batch.envelopes = ptrs;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    f.batch = &batch;
    return gpubridge__client_frame__pack(&f, buf);
}

/* Replies in one ServerFrame, every one STATUS_OK with a payload; -1 else. */
static int replies_ok(const uint8_t *p, size_t len)
{
    gb_pb_reply_iter_t it;
    gb_pb_reply_view_t v;
    int n = 0;
    if (gb_pb_reply_frame_open(&it, p, len) != 0)
        return -1;
    for (; gb_pb_reply_frame_next(&it, &v); n++)
        if (v.status != 0 || v.payload_len == 0)
            return -1;
    return n;
}

typedef struct client {
    void *ctx;
    const char *endpoint;
    const uint8_t *frame;
    size_t frame_len;
    int window;
    double seconds;
    uint64_t replies;
    double elapsed;
    int failed;
    int index;
} client_t;

static void *client_main(void *arg)
{
    client_t *c = arg;
    char name[16];
    snprintf(name, sizeof name, "client-%d", c->index);
    pthread_setname_np(pthread_self(), name);
    void *s = zmq_socket(c->ctx, ZMQ_DEALER);
    int to = 10000, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, c->endpoint);
    uint64_t sent = 0, recvd = 0;
    double t0 = now_s(), t1;
    int stopping = 0;
    while (!stopping || recvd < sent) {
        while (!stopping && sent - recvd < (uint64_t)c->window * 64) {
            zmq_send(s, c->frame, c->frame_len, 0);
            sent += 64;
        }
        zmq_msg_t m;
        zmq_msg_init(&m);
        int n = zmq_msg_recv(&m, s, 0) < 0 ? -1 : replies_ok(zmq_msg_data(&m), zmq_msg_size(&m));
        zmq_msg_close(&m);
        if (n < 0) {
            c->failed = 1;
            break;
        }
        recvd += (uint64_t)n;
        t1 = now_s();
        stopping = t1 - t0 >= c->seconds;
    }
    c->elapsed = now_s() - t0;
    c->replies = recvd;
    zmq_close(s);
    return NULL;
}

/* The devices of a run: n of them (1: the first alone). */
typedef struct devset {
    size_t n;
    int dev[GB_MAX_DEVICES];
} devset_t;

static int bridge_start(bridge_thr_t *b, gb_mode mode, const char *mode_name, const char *endpoint, int io,
                        const devset_t *ds)
{
    char err[256] = "";
    memset(b, 0, sizeof *b);
    gb_config_defaults(&b->cfg);
    b->cfg.n_endpoints = 1;
    snprintf(b->cfg.endpoints[0], sizeof b->cfg.endpoints[0], "%s", endpoint);
    b->cfg.mode = mode;
    b->cfg.io_threads = (uint32_t)io;
    b->cfg.device = ds->dev[0];
    b->cfg.n_devices = ds->n > 1 ? ds->n : 0;
    memcpy(b->cfg.devices, ds->dev, sizeof ds->dev);
    gb_engine_dev_t devs[GB_MAX_DEVICES];
    size_t n = 0;
    if (gb_detect_run(&b->cfg, "/", mode_name, &b->facts, &b->sel, err, sizeof err) != GB_OK ||
        gb_detect_devices(&b->cfg, "/", mode_name, &b->facts, &b->sel, devs, &n, err, sizeof err) != GB_OK) {
        fprintf(stderr, "bench_io: %s\n", err);
        return -1;
    }
    if (gb_engine_new_devs(&b->cfg, devs, n, &b->engine) != GB_OK ||
        gb_server_new(&b->cfg, b->engine, &b->facts, &b->sel, &b->server, err, sizeof err) != GB_OK) {
        fprintf(stderr, "bench_io: cannot start the bridge in %s mode: %s\n", mode_name, err);
        return -1;
    }
    pthread_create(&b->thread, NULL, bridge_main, b);
    usleep(100000);
    return 0;
}

static void bridge_stop(bridge_thr_t *b)
{
    __atomic_store_n(&b->stop, 1, __ATOMIC_RELAXED); /* read atomically by the server thread */
    pthread_join(b->thread, NULL);
    gb_server_destroy(&b->server);
    gb_engine_destroy(&b->engine, 2000);
}

/* One run: the bridge with io threads, n_clients clients for `seconds`.
 * Replies per second, or -1. */
static double run_once(gb_mode mode, const char *mode_name, const char *endpoint, int io, const devset_t *ds,
                       int n_clients, int window, double seconds, int thread_load)
{
    static bridge_thr_t b;
    if (bridge_start(&b, mode, mode_name, endpoint, io, ds) != 0)
        return -1;
    uint8_t frame[16384];
    size_t len = make_batch(frame);
    void *ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_THREAD_NAME_PREFIX, 2); /* the clients' ZeroMQ threads: 2/ZMQbg/... */
    client_t cs[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS];
    for (int i = 0; i < n_clients; i++) {
        cs[i] = (client_t){ctx, endpoint, frame, len, window, seconds, 0, 0, 0, i};
        pthread_create(&th[i], NULL, client_main, &cs[i]);
    }
    if (thread_load) {
        tload_t *ta = malloc(sizeof *ta), *tb = malloc(sizeof *tb);
        if (ta && tb) {
            usleep((useconds_t)(seconds * 250000));
            tload_read(ta);
            usleep((useconds_t)(seconds * 500000));
            tload_read(tb);
            tload_print(ta, tb, io, ds->n);
        }
        free(ta);
        free(tb);
    }
    uint64_t total = 0;
    double longest = 0;
    int failed = 0;
    for (int i = 0; i < n_clients; i++) {
        pthread_join(th[i], NULL);
        total += cs[i].replies;
        longest = cs[i].elapsed > longest ? cs[i].elapsed : longest;
        failed |= cs[i].failed;
    }
    zmq_ctx_term(ctx);
    bridge_stop(&b);
    if (failed) {
        fprintf(stderr, "bench_io: a bad or missing reply with io_threads = %d\n", io);
        return -1;
    }
    return (double)total / longest;
}

/* Comma-separated integers of list (may be NULL) into v; how many. */
static int parse_list(const char *list, int *v, int max)
{
    int n = 0;
    for (const char *p = list; p && *p && n < max;) {
        v[n++] = atoi(p);
        if (!(p = strchr(p, ',')))
            break;
        p++;
    }
    return n;
}

/* The table: each row's median over the rounds, left in rate[d][i][0]. */
static void print_results(double rate[2][MAX_VALUES][15], const devset_t *sets, int n_sets, const int *values,
                          int n_values, int rounds)
{
    printf("\n%-12s %8s %16s %10s\n", "io_threads", "devices", "batch-64 msg/s", "vs first");
    for (int d = 0; d < n_sets; d++)
        for (int i = 0; i < n_values; i++) {
            double *r = rate[d][i];
            qsort(r, (size_t)rounds, sizeof *r, cmp_d);
            r[0] = rounds % 2 ? r[rounds / 2] : (r[rounds / 2 - 1] + r[rounds / 2]) / 2;
            printf("%-12d %8zu %16.0f %9.2fx\n", values[i], sets[d].n, r[0], r[0] / rate[0][0][0]);
        }
}

int main(int argc, char **argv)
{
    const char *mode_name = "cpu", *list = "1,2,4", *dev_list = NULL;
    int n_clients = 4, window = 16, rounds = 3, ipc = 0, thread_load = 0;
    double seconds = 1.0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--mode") && a + 1 < argc)
            mode_name = argv[++a];
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc)
            list = argv[++a];
        else if (!strcmp(argv[a], "--clients") && a + 1 < argc)
            n_clients = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--window") && a + 1 < argc)
            window = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--seconds") && a + 1 < argc)
            seconds = atof(argv[++a]);
        else if (!strcmp(argv[a], "--rounds") && a + 1 < argc)
            rounds = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--ipc"))
            ipc = 1;
        else if (!strcmp(argv[a], "--devices") && a + 1 < argc)
            dev_list = argv[++a];
        else if (!strcmp(argv[a], "--thread-load"))
            thread_load = 1;
        else {
            printf("usage: bench_io [--mode cpu|persistent|relaunch] [--threads 1,2,4] [--clients C] [--seconds S]\n"
                   "                [--window F] [--rounds R] [--ipc] [--devices 0,1] [--thread-load]\n"
                   "  Batched vecadd throughput (frames of 64 requests to 64 keys, F in flight per client,\n"
                   "  default 16) from C clients (default 4) over tcp loopback (--ipc: ipc), with each\n"
                   "  io_threads value of the list; the median over R rounds (default 3). --devices: each\n"
                   "  value also on those devices, beside the first device alone. --thread-load: each\n"
                   "  thread's CPU over the middle half of each run, by name.\n");
            return strcmp(argv[a], "--help") ? 2 : 0;
        }
    }
    int values[MAX_VALUES];
    const int n_values = parse_list(list, values, MAX_VALUES);
    devset_t sets[2] = {{1, {0}}, {0, {0}}};
    sets[1].n = (size_t)parse_list(dev_list, sets[1].dev, GB_MAX_DEVICES);
    sets[0].dev[0] = sets[1].dev[0];
    const int n_sets = sets[1].n > 1 ? 2 : 1;
    gb_mode mode;
    int bad = gb_mode_parse(mode_name, &mode) != 0 || mode == GB_MODE_AUTO || n_clients < 1 ||
              n_clients > MAX_CLIENTS || window < 1 || window > 1024 || rounds < 1 || rounds > 15 || seconds <= 0;
    for (int i = 0; i < n_values; i++)
        bad |= values[i] < 1 || values[i] > GB_MAX_IO_THREADS;
    if (bad || n_values == 0) {
        fprintf(stderr, "bench_io: --mode cpu|persistent|relaunch, --threads 1..%d,..., --clients 1..%d, "
                        "--window 1..1024, --rounds 1..15\n", GB_MAX_IO_THREADS, MAX_CLIENTS);
        return 2;
    }
    gb_log_set_level(GB_LOG_WARN);
    char dir[] = "/tmp/gb-bench-io-XXXXXX", endpoint[160];
    if (!mkdtemp(dir))
        return 1;
    if (ipc)
        snprintf(endpoint, sizeof endpoint, "ipc://%s/bridge.sock", dir);
    else
        snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", 27600 + (getpid() % 1000));
    printf("bench_io: mode %s, %s, %d client(s), %d frame(s) of 64 in flight each, %.1f s a run, %d round(s), "
           "%ld cores\n", mode_name, ipc ? "ipc" : "tcp", n_clients, window, seconds, rounds,
           sysconf(_SC_NPROCESSORS_ONLN));
    double rate[2][MAX_VALUES][15];
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n_values; i++)
            for (int d = 0; d < n_sets; d++)
                if ((rate[d][i][r] = run_once(mode, mode_name, endpoint, values[i], &sets[d], n_clients, window,
                                              seconds, thread_load)) < 0)
                    return 1;
    print_results(rate, sets, n_sets, values, n_values, rounds);
    printf("{\"bench\":\"io_threads\",\"mode\":\"%s\",\"endpoint\":\"%s\",\"clients\":%d,\"window\":%d,"
           "\"rounds\":%d,\"rows\":[", mode_name, ipc ? "ipc" : "tcp", n_clients, window, rounds);
    for (int d = 0; d < n_sets; d++)
        for (int i = 0; i < n_values; i++)
            printf("%s{\"io_threads\":%d,\"devices\":%zu,\"batch64_msgs_per_s\":%.0f}", d || i ? "," : "",
                   values[i], sets[d].n, rate[d][i][0]);
    printf("]}\n");
    return 0;
}
