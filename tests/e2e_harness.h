/* End-to-end harness: starts the real gpubridge binary on an ipc endpoint in a
 * private temporary folder, talks to it with a raw DEALER socket and the
 * generated protobuf-c code (deliberately not through libgpubridge, so the
 * wire protocol itself is what is tested), and stops it with a signal.
 * GB_BRIDGE_BIN names the binary; GB_E2E_MODE the mode (cpu by default). */
#ifndef GB_E2E_HARNESS_H
#define GB_E2E_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "control.pb-c.h"
#include "echo.pb-c.h"
#include "gpubridge.pb-c.h"
#include "vecadd.pb-c.h"

#pragma GCC diagnostic ignored "-Wunused-function"

typedef struct bridge {
    pid_t pid;
    char dir[256];
    char endpoint[320];
    char cfg[320];
    char log[320];
} bridge_t;

/* Waits for the bridge are this many times longer in a sanitized build: a
 * sanitized bridge on a loaded machine is several times slower. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define E2E_SLOW 3
#else
#define E2E_SLOW 1
#endif

/* The bridge's resident memory is a bound only in a plain build: a
 * sanitizer's allocator keeps freed memory in quarantine and adds shadow
 * memory. Sanitizer builds check the bridge's own accounting (telemetry)
 * and that it keeps serving, not its RSS. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_BOUND_KIB(kib) ((void)(kib), 1L << 40)
#define SANITIZED 1
#else
#define RSS_BOUND_KIB(kib) ((long)(kib))
#define SANITIZED 0
#endif

static void *g_zctx;
static const char *g_extra_endpoint; /* set: bridge_start binds it as well */

/* Every temporary folder made (bridge_start, e2e_tmpdir); removed with its
 * files at exit, also after a failed assertion (cmocka returns to main). */
static char g_tmpdirs[64][256];
static int g_n_tmpdirs;
/* Bridges started and not yet stopped: killed at exit, so that a failed
 * assertion leaves no daemon behind. */
static pid_t g_live[16];

static void e2e_live(pid_t pid, int on)
{
    for (int i = 0; i < 16; i++)
        if (on ? g_live[i] == 0 : g_live[i] == pid) {
            g_live[i] = on ? pid : 0;
            return;
        }
}

static void e2e_rm_tmpdirs(void)
{
    for (int i = 0; i < 16; i++)
        if (g_live[i] > 0) {
            kill(g_live[i], SIGKILL);
            waitpid(g_live[i], NULL, 0);
        }
    for (int i = 0; i < g_n_tmpdirs; i++) {
        DIR *d = opendir(g_tmpdirs[i]);
        struct dirent *e;
        char path[600];
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if ((size_t)snprintf(path, sizeof path, "%.255s/%.255s", g_tmpdirs[i], e->d_name) < sizeof path)
                unlink(path);
        }
        if (d)
            closedir(d);
        rmdir(g_tmpdirs[i]);
    }
    g_n_tmpdirs = 0;
}

/* A fresh private folder $GB_E2E_TMP/gb-e2e-XXXXXX (default /tmp) into dir
 * (256 bytes), removed at exit. */
static void e2e_tmpdir(char *dir)
{
    const char *base = getenv("GB_E2E_TMP");
    snprintf(dir, 256, "%.64s/gb-e2e-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(dir));
    if (g_n_tmpdirs == 0)
        atexit(e2e_rm_tmpdirs);
    assert_true(g_n_tmpdirs < 64);
    snprintf(g_tmpdirs[g_n_tmpdirs++], 256, "%s", dir);
}

/* A fresh folder (dir, 256 bytes) holding server.key: the Z85 secret key
 * (40 characters), mode 0600; its path into keyfile (300 bytes). */
static void e2e_server_key(const char *secret, char *dir, char *keyfile)
{
    e2e_tmpdir(dir);
    snprintf(keyfile, 300, "%s/server.key", dir);
    int fd = open(keyfile, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, secret, 40), 40);
    close(fd);
}

static uint64_t e2e_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *e2e_mode(void)
{
    const char *m = getenv("GB_E2E_MODE");
    return m && *m ? m : "cpu";
}

/* Starts the bridge with extra config text appended (may be ""). Returns 0,
 * or the bridge's exit status if it exited during start-up (then b->pid = 0). */
/* Whether file path has a line containing needle. */
static int e2e_log_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static int bridge_start(bridge_t *b, const char *extra_cfg)
{
    const char *bin = getenv("GB_BRIDGE_BIN");
    assert_non_null(bin);
    memset(b, 0, sizeof *b);
    e2e_tmpdir(b->dir);
    snprintf(b->endpoint, sizeof b->endpoint, "ipc://%s/bridge.sock", b->dir);
    snprintf(b->cfg, sizeof b->cfg, "%s/bridge.cfg", b->dir);
    snprintf(b->log, sizeof b->log, "%s/bridge.log", b->dir);
    FILE *f = fopen(b->cfg, "w");
    assert_non_null(f);
    fprintf(f, "endpoints = [\"%s\"%s%s%s];\nlog_level = \"debug\";\n%s\n", b->endpoint,
            g_extra_endpoint ? ", \"" : "", g_extra_endpoint ? g_extra_endpoint : "",
            g_extra_endpoint ? "\"" : "", extra_cfg);
    /* GB_E2E_IO_THREADS: the same suite with that many I/O threads. */
    const char *io = getenv("GB_E2E_IO_THREADS");
    if (io && *io && !strstr(extra_cfg, "io_threads"))
        fprintf(f, "io_threads = %s;\n", io);
    /* GB_E2E_DEVICES: the same suite with every grain type on those devices
     * (e.g. "[0, 1]"; a GPU host with one GPU: "[0, 0]"). */
    const char *devs = getenv("GB_E2E_DEVICES");
    const int add_devs = devs && *devs && !strstr(extra_cfg, "device =") && !strstr(extra_cfg, "devices =");
    if (add_devs)
        fprintf(f, "devices = %s;\n", devs);
    fclose(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *lg = freopen(b->log, "w", stderr);
        (void)lg;
        const char *sup = getenv("GB_E2E_SUPERVISE"); /* the same suite through gpubridge --supervise */
        if (sup && *sup == '1')
            execl(bin, bin, "--config", b->cfg, "--mode", e2e_mode(), "--supervise", (char *)NULL);
        else
            execl(bin, bin, "--config", b->cfg, "--mode", e2e_mode(), (char *)NULL);
        _exit(127);
    }
    b->pid = pid;
    e2e_live(pid, 1);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/bridge.sock", b->dir);
    uint64_t end = e2e_ms() + 20000 * E2E_SLOW;
    while (e2e_ms() < end) {
        struct stat sb;
        if (stat(sock, &sb) == 0) {
            /* The suite runs on several devices indeed (logged before the bind). */
            if (add_devs && !e2e_log_has(b->log, "device #1:"))
                fail_msg("GB_E2E_DEVICES=%s: the bridge does not say it runs a device #1 (log: %s)", devs, b->log);
            return 0;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            e2e_live(pid, 0);
            b->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    fail_msg("bridge did not start within %d s (log: %s)", 20 * E2E_SLOW, b->log);
    return -1;
}

/* A bridge that exited with an error: its log goes with its temporary
 * folder, so the part that says why is printed here. From the first
 * sanitizer report on (a race makes the exit status 66), else the end. */
static void bridge_print_log(const bridge_t *b)
{
    FILE *f = fopen(b->log, "r");
    if (!f)
        return;
    char line[1024];
    long lines = 0, from = -1, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (from < 0 && strstr(line, "Sanitizer"))
            from = lines;
        lines++;
    }
    if (from < 0)
        from = lines > 30 ? lines - 30 : 0;
    rewind(f);
    fprintf(stderr, "--- %s, from line %ld of %ld:\n", b->log, from + 1, lines);
    while (fgets(line, sizeof line, f) && n < from + 300)
        if (n++ >= from)
            fputs(line, stderr);
    fclose(f);
}

/* Sends sig and waits for the exit; returns the exit status (-1: timeout). */
static int bridge_stop(bridge_t *b, int sig, int timeout_ms)
{
    if (!b->pid)
        return -1;
    kill(b->pid, sig);
    uint64_t end = e2e_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int st;
        if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
            e2e_live(b->pid, 0);
            b->pid = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
                bridge_print_log(b);
            /* A bridge that stopped cleanly leaves no socket file behind: a
             * client would wait for it instead of failing at once. */
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && strncmp(b->endpoint, "ipc://", 6) == 0 &&
                access(b->endpoint + 6, F_OK) == 0) {
                fprintf(stderr, "e2e: the bridge exited 0 and left its socket file %s\n", b->endpoint + 6);
                return 99;
            }
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (e2e_ms() > end) {
            kill(b->pid, SIGKILL);
            waitpid(b->pid, &st, 0);
            e2e_live(b->pid, 0);
            b->pid = 0;
            return -1;
        }
        usleep(5000);
    }
}

static int log_contains(const bridge_t *b, const char *needle) { return e2e_log_has(b->log, needle); }

static void *client_open(const char *endpoint)
{
    if (!g_zctx)
        g_zctx = zmq_ctx_new();
    void *s = zmq_socket(g_zctx, ZMQ_DEALER);
    int linger = 0, ipv6 = 1; /* tcp://[::1]:PORT too */
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_IPV6, &ipv6, sizeof ipv6);
    assert_int_equal(zmq_connect(s, endpoint), 0);
    return s;
}

static void send_raw(void *s, const void *data, size_t len) { assert_true(zmq_send(s, data, len, 0) >= 0); }

static void send_frame(void *s, const Gpubridge__ClientFrame *f)
{
    size_t len = gpubridge__client_frame__get_packed_size(f);
    uint8_t *buf = malloc(len ? len : 1);
    gpubridge__client_frame__pack(f, buf);
    send_raw(s, buf, len);
    free(buf);
}

static void send_env(void *s, Gpubridge__Envelope *e)
{
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_ENVELOPE;
    f.envelope = e;
    send_frame(s, &f);
}

/* Next ServerFrame within timeout_ms, or NULL. */
static Gpubridge__ServerFrame *recv_frame(void *s, int timeout_ms)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return NULL;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) {
        zmq_msg_close(&m);
        return NULL;
    }
    Gpubridge__ServerFrame *f = gpubridge__server_frame__unpack(NULL, zmq_msg_size(&m), zmq_msg_data(&m));
    zmq_msg_close(&m);
    assert_non_null(f);
    return f;
}

/* The replies a ServerFrame carries: one Reply, or a ReplyBatch's. */
static Gpubridge__Reply **frame_replies(Gpubridge__ServerFrame *f, size_t *n)
{
    if (f->body_case == GPUBRIDGE__SERVER_FRAME__BODY_BATCH) {
        *n = f->batch->n_replies;
        return f->batch->replies;
    }
    *n = 1;
    return &f->reply;
}

/* Exactly one reply expected: returns it (caller frees the frame). */
static Gpubridge__Reply *recv_reply(void *s, Gpubridge__ServerFrame **frame, int timeout_ms)
{
    *frame = recv_frame(s, timeout_ms);
    if (!*frame)
        fail_msg("no reply within %d ms", timeout_ms);
    assert_int_equal((*frame)->body_case, GPUBRIDGE__SERVER_FRAME__BODY_REPLY);
    return (*frame)->reply;
}

/* A REQUEST envelope to (type, key) with a packed payload (static storage). */
static Gpubridge__Envelope *make_env(uint64_t corr, const char *type, uint64_t key, uint32_t mt, const uint8_t *pl,
                                     size_t len)
{
    static Gpubridge__Envelope e;
    static Gpubridge__GrainId g;
    gpubridge__envelope__init(&e);
    gpubridge__grain_id__init(&g);
    g.type = (char *)type;
    g.key = key;
    e.correlation_id = corr;
    e.grain = &g;
    e.kind = GPUBRIDGE__KIND__KIND_REQUEST;
    e.message_type = mt;
    e.payload.data = (uint8_t *)pl;
    e.payload.len = len;
    return &e;
}

static size_t pack_vecadd(uint8_t *buf, int op, const float *a, const float *b, size_t n)
{
    Gpubridge__VectorAddRequest r = GPUBRIDGE__VECTOR_ADD_REQUEST__INIT;
    r.op = (Gpubridge__VectorAddRequest__Op)op;
    r.n_a = r.n_b = n;
    r.a = (float *)a;
    r.b = (float *)b;
    return gpubridge__vector_add_request__pack(&r, buf);
}

/* One vecadd call; checks status OK and returns the result (n floats). */
static void call_vecadd(void *s, uint64_t corr, uint64_t key, int op, const float *a, const float *b, size_t n,
                        float *out)
{
    uint8_t buf[512];
    size_t len = pack_vecadd(buf, op, a, b, n);
    send_env(s, make_env(corr, "vecadd", key, 1, buf, len));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(s, &f, 10000 * E2E_SLOW);
    assert_int_equal(r->correlation_id, corr);
    if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
        fail_msg("vecadd: status %d: %s", r->status, r->error);
    Gpubridge__VectorAddResponse *v = gpubridge__vector_add_response__unpack(NULL, r->payload.len, r->payload.data);
    assert_non_null(v);
    assert_int_equal(v->n_result, n);
    memcpy(out, v->result, n * sizeof(float));
    gpubridge__vector_add_response__free_unpacked(v, NULL);
    gpubridge__server_frame__free_unpacked(f, NULL);
}

/* The bridge still serves: a good vecadd call works. */
static void still_serves(void *s)
{
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, r[3];
    call_vecadd(s, 999999, 1, 0, a, b, 3, r);
    assert_true(r[0] == 5 && r[1] == 7 && r[2] == 9);
}

/* A control envelope; op set by the caller through the returned pointer. */
static Gpubridge__Envelope *make_control(uint64_t corr, Gpubridge__Control *c)
{
    static Gpubridge__Envelope e;
    gpubridge__envelope__init(&e);
    e.correlation_id = corr;
    e.kind = GPUBRIDGE__KIND__KIND_CONTROL;
    e.control = c;
    return &e;
}

static int control_simple(void *s, uint64_t corr, int op, const char *type)
{
    Gpubridge__Control c = GPUBRIDGE__CONTROL__INIT;
    Gpubridge__Activate a = GPUBRIDGE__ACTIVATE__INIT;
    Gpubridge__Deactivate d = GPUBRIDGE__DEACTIVATE__INIT;
    Gpubridge__Terminate t = GPUBRIDGE__TERMINATE__INIT;
    c.op_case = (Gpubridge__Control__OpCase)op;
    a.grain_type = d.grain_type = t.grain_type = (char *)type;
    c.activate = &a;
    if (op == GPUBRIDGE__CONTROL__OP_DEACTIVATE)
        c.deactivate = &d;
    if (op == GPUBRIDGE__CONTROL__OP_TERMINATE)
        c.terminate = &t;
    send_env(s, make_control(corr, &c));
    Gpubridge__ServerFrame *f;
    Gpubridge__Reply *r = recv_reply(s, &f, 10000 * E2E_SLOW);
    assert_int_equal(r->correlation_id, corr);
    int st = r->status;
    gpubridge__server_frame__free_unpacked(f, NULL);
    return st;
}

#endif
