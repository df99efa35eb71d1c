/* bench_ring --sizes: echo messages of given payload sizes (64 B, 1 KiB and
 * 64 KiB by default) through the runtime, per backend, two ways where both
 * exist: in one slot large enough for the message ("slot"), and out of line
 * from a 64-byte slot, the default configuration ("large", large_payload.h).
 * Round trip (median, p99) and pipelined throughput (as many in flight as
 * the ring and the large area take). Every reply is checked. Prints a table,
 * then one JSON line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "echo.h"
#include "ring_load.h"
#include "ring_sizes.h"
#include "runtime.h"

#define MAX_SIZE_ROWS 64

typedef struct size_row {
    char path[64];
    uint32_t bytes;
    double median_us, p99_us, msgs_per_s, mb_per_s;
} size_row_t;

static size_row_t g_srows[MAX_SIZE_ROWS];
static int g_nsrows;

static gb_rk_t *start_echo(gb_mode mode, int fallback, uint32_t slot)
{
    gb_rk_params_t p;
    memset(&p, 0, sizeof p);
    p.type = "echo";
    p.mode = mode;
    snprintf(p.grain.type, sizeof p.grain.type, "echo");
    p.grain.queue_capacity = 256;
    p.grain.slot_size = slot;
    p.grain.messages_per_iteration = 256;
    p.grain.max_grains = 4096;
    p.grain.cpu_threads = 1;
    p.idle_spin_polls = 1u << 30; /* never sleep during a measurement */
    p.idle_backoff_max_ns = 1000;
    p.heartbeat_deadline_ms = 2000;
    p.max_messages_per_launch = 4096;
    p.force_fallback_placement = fallback;
    gb_rk_t *rk = NULL;
    gb_err err = gb_rk_new(&p, &rk);
    if (err == GB_OK)
        err = gb_rk_launch(rk);
    if (err != GB_OK) {
        fprintf(stderr, "bench: echo ring (slot %u): %s\n", slot, gb_strerror(err));
        gb_rk_destroy(&rk);
    }
    return rk;
}

/* The next reply, checked against the payload of request i (pattern i). */
static int recv_check(gb_rk_t *rk, uint64_t i, unsigned char *buf, uint32_t bytes)
{
    gb_reply_t r;
    for (;;) {
        gb_err err = gb_rk_recv(rk, &r, buf, bytes);
        if (err == GB_OK)
            break;
        if (err != GB_ERR_EMPTY || gb_rk_poll(rk) != GB_OK) {
            fprintf(stderr, "bench: echo reply %llu: %s\n", (unsigned long long)i, gb_strerror(err));
            return -1;
        }
    }
    if (r.corr != i || r.status != GB_SLOT_OK || r.len != bytes || buf[0] != (unsigned char)i ||
        buf[bytes - 1] != (unsigned char)(i + 1)) {
        fprintf(stderr, "bench: echo reply %llu of %u bytes is wrong (corr %llu, status %u, len %u)\n",
                (unsigned long long)i, bytes, (unsigned long long)r.corr, r.status, r.len);
        return -1;
    }
    return 0;
}

static gb_err send_one(gb_rk_t *rk, uint64_t i, unsigned char *msg, uint32_t bytes)
{
    msg[0] = (unsigned char)i;
    msg[bytes - 1] = (unsigned char)(i + 1);
    return gb_rk_send(rk, i % 64, i, GB_ECHO_MSG_ECHO, msg, bytes);
}

/* One row: round trips, then pipelined for `seconds`. */
static int measure(const char *path, gb_mode mode, int fallback, uint32_t slot, uint32_t bytes, int warmup,
                   int iters, double seconds)
{
    gb_rk_t *rk = start_echo(mode, fallback, slot);
    if (!rk)
        return -1;
    unsigned char *msg = calloc(1, bytes), *buf = malloc(bytes);
    double *lat = malloc((size_t)iters * sizeof *lat);
    int rc = msg && buf && lat ? 0 : -1;
    uint64_t i = 0;
    for (int k = 0; rc == 0 && k < warmup + iters; k++, i++) {
        double t0 = rl_now_us();
        if (send_one(rk, i, msg, bytes) != GB_OK || recv_check(rk, i, buf, bytes) != 0)
            rc = -1;
        else if (k >= warmup)
            lat[k - warmup] = rl_now_us() - t0;
    }
    size_row_t *w = &g_srows[g_nsrows];
    memset(w, 0, sizeof *w);
    if (rc == 0) {
        qsort(lat, (size_t)iters, sizeof *lat, rl_cmp_double);
        w->median_us = lat[iters / 2];
        w->p99_us = lat[(int)((double)iters * 0.99)];
        /* Pipelined: send until the ring or the large area is full, then take a reply. */
        uint64_t next = i, done = i;
        double t0 = rl_now_us(), t1 = t0;
        while (rc == 0 && (t1 - t0 < seconds * 1e6 || done < next)) {
            gb_err err = t1 - t0 < seconds * 1e6 ? send_one(rk, next, msg, bytes) : GB_ERR_FULL;
            if (err == GB_OK)
                next++;
            else if (err != GB_ERR_FULL || recv_check(rk, done++, buf, bytes) != 0)
                rc = -1;
            t1 = rl_now_us();
        }
        w->msgs_per_s = (double)(done - i) / ((t1 - t0) / 1e6);
        w->mb_per_s = w->msgs_per_s * bytes / 1e6;
    }
    if (rc == 0) {
        snprintf(w->path, sizeof w->path, "%s", path);
        w->bytes = bytes;
        g_nsrows++;
    } else {
        fprintf(stderr, "bench: %s, %u bytes: failed\n", path, bytes);
    }
    free(msg);
    free(buf);
    free(lat);
    gb_rk_destroy(&rk);
    return rc;
}

/* Both ways for one backend and size. */
static int measure_both(const char *backend, gb_mode mode, int fallback, uint32_t bytes, int warmup, int iters,
                        double seconds)
{
    char path[64];
    int rc = 0;
    /* Fewer round trips for the larger sizes, so that a run stays short. */
    int n = bytes > 4096 ? iters / 10 : iters;
    if (n < 100)
        n = 100;
    uint32_t slot = 64;
    while (slot < bytes + GB_SLOT_HDR_SIZE && slot < 65536)
        slot *= 2;
    if (bytes + GB_SLOT_HDR_SIZE <= slot) {
        snprintf(path, sizeof path, "%s, slot %u B", backend, slot);
        rc |= measure(path, mode, fallback, slot, bytes, warmup, n, seconds);
    }
    snprintf(path, sizeof path, "%s, large from 64 B slot", backend);
    rc |= measure(path, mode, fallback, 64, bytes, warmup, n, seconds);
    return rc;
}

int bench_sizes(const char *modes, int fallback, const char *sizes, int warmup, int iters, double seconds,
                const char *gpu)
{
    int rc = 0;
    for (const char *s = sizes; *s;) {
        char *end;
        unsigned long bytes = strtoul(s, &end, 10);
        if (end == s || bytes < 2 || bytes > GB_LARGE_DEFAULT_MAX) {
            fprintf(stderr, "bench: --sizes takes payload sizes of 2 to %u bytes, comma-separated\n",
                    GB_LARGE_DEFAULT_MAX);
            return 2;
        }
        s = *end == ',' ? end + 1 : end;
        if (strstr(modes, "cpu"))
            rc |= measure_both("cpu", GB_MODE_CPU, 0, (uint32_t)bytes, warmup, iters, seconds);
        if (strstr(modes, "persistent")) {
            rc |= measure_both("persistent (mapped)", GB_MODE_PERSISTENT, 0, (uint32_t)bytes, warmup, iters, seconds);
            if (fallback)
                rc |= measure_both("persistent (device+staging)", GB_MODE_PERSISTENT, 1, (uint32_t)bytes, warmup,
                                   iters / 10, seconds);
        }
        if (strstr(modes, "relaunch")) {
            rc |= measure_both("relaunch (mapped)", GB_MODE_RELAUNCH, 0, (uint32_t)bytes, warmup, iters, seconds);
            if (fallback)
                rc |= measure_both("relaunch (device+staging)", GB_MODE_RELAUNCH, 1, (uint32_t)bytes, warmup,
                                   iters / 10, seconds);
        }
    }
    printf("\n%-44s %10s %10s %10s %12s %10s\n", "echo path", "bytes", "median us", "p99 us", "pipe msg/s", "pipe MB/s");
    for (int r = 0; r < g_nsrows; r++) {
        const size_row_t *w = &g_srows[r];
        printf("%-44s %10u %10.2f %10.2f %12.0f %10.1f\n", w->path, w->bytes, w->median_us, w->p99_us, w->msgs_per_s,
               w->mb_per_s);
    }
    printf("{\"bench\":\"ring_sizes\",\"gpu\":\"%s\",\"rows\":[", gpu);
    for (int r = 0; r < g_nsrows; r++) {
        const size_row_t *w = &g_srows[r];
        printf("%s{\"path\":\"%s\",\"bytes\":%u,\"median_us\":%.3f,\"p99_us\":%.3f,\"msgs_per_s\":%.0f,"
               "\"mb_per_s\":%.2f}",
               r ? "," : "", w->path, w->bytes, w->median_us, w->p99_us, w->msgs_per_s, w->mb_per_s);
    }
    printf("]}\n");
    return rc ? 1 : 0;
}
