/* Ring benchmark: round trip and batched throughput of 64-byte vecadd messages
 * through the runtime, per backend, beside the floors measured in the same
 * run (bench_floor.h). Prints a table, then one JSON line.
 *
 *   bench_ring [--modes cpu,persistent,...] [--iters N] [--warmup N]
 *              [--seconds S] [--fallback]
 *
 * Round trip: one request published, its reply awaited, N times after a
 * warm-up (median, p99). Throughput: batches of B requests published together,
 * then their replies drained, for about S seconds; then streaming (batches
 * published while earlier ones are in flight, as far as the ring allows, by a
 * producer thread or by the receiving thread itself: --stream-threads); then
 * the drain rate, the kernel's own with the host out of the way (a full ring
 * queued while deactivated, then activated). Load generators: ring_load.h.
 * Each mode's "api" row is the same round trip and batches through the
 * embedding API (gpubridge_call; gpubridge_send then gpubridge_poll;
 * ring_api.c) on the same ring geometry.
 * --sizes 64,1024,65536 measures echo messages of those payload sizes instead,
 * in one slot and out of line (ring_sizes.c).
 * Every result is checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "ring_api.h"
#include "ring_load.h"
#include "ring_sizes.h"
#include "vecadd.h"
#ifdef GB_HAVE_CUDA
#include "backend_cuda.h"
#include "bench_floor.h"
#include "ring_profiled.h"
#endif

#define MAX_ROWS 48

typedef struct row {
    char name[48];
    double median_us, p99_us;      /* latency rows */
    double batch_rate[4];          /* throughput rows: msg/s at batch 1,16,256,4096 */
    double stream_rate[2];         /* streaming: batches of 256 / 4096 kept in flight */
    double drain_rate;             /* a full ring drained by the kernel (rl_drain) */
    int has_lat, has_tput, has_stream, has_drain;
} row_t;

static const uint32_t BATCHES[4] = {1, 16, 256, 4096};
static row_t g_rows[MAX_ROWS];
static int g_nrows;

static void stats(double *s, int n, double *median, double *p99)
{
    qsort(s, (size_t)n, sizeof *s, rl_cmp_double);
    *median = s[n / 2];
    *p99 = s[(int)((double)n * 0.99)];
}

static row_t *add_row(const char *name)
{
    row_t *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static int g_window = 1024;
/* The grain type the rings run: the shipped vecadd, or its benchmark build
 * (--profile, and the --variants rows: ring_profiled.h). */
static const char *g_type = "vecadd";
static const uint32_t STREAM_BATCHES[2] = {256, 4096};
#define RING_CAP 8192u

static gb_rk_t *start_ring(const char *label, gb_mode mode, int fallback, uint32_t cap)
{
    gb_rk_params_t p;
    memset(&p, 0, sizeof p);
    p.type = g_type;
    p.mode = mode;
    snprintf(p.grain.type, sizeof p.grain.type, "%s", g_type);
    p.grain.queue_capacity = cap;
    p.grain.slot_size = 64;
    p.grain.messages_per_iteration = (uint32_t)g_window;
    p.grain.max_grains = 65536;
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
        fprintf(stderr, "bench: %s: %s\n", label, gb_strerror(err));
        gb_rk_destroy(&rk);
    }
    return rk;
}

/* Checks the kernel's counters against what was sent, stops it, prints where
 * its time went (GPU modes; the kernel's own profile with --profile and in
 * the --variants rows) and destroys it. */
static int finish_ring(gb_rk_t **rkp, const char *name, const char *phase, gb_mode mode, uint64_t sent, int rc)
{
    gb_rk_t *rk = *rkp;
    gb_rk_status_t st;
    /* Counters are written with the replies; allow the last window's to land. */
    for (int w = 0; w < 1000; w++) {
        gb_rk_status(rk, &st);
        if (st.processed >= sent)
            break;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    if (rc == 0 && (st.processed != sent || st.errors != 0)) {
        fprintf(stderr, "bench: %s: processed %llu of %llu, errors %llu\n", name, (unsigned long long)st.processed,
                (unsigned long long)sent, (unsigned long long)st.errors);
        rc = -1;
    }
#ifdef GB_HAVE_CUDA
    gbi_relaunch_prof_t rp = {0, 0, 0, 0};
    if (mode == GB_MODE_RELAUNCH && gbi_cuda_relaunch_prof(rk, &rp) == GB_OK && rp.launches)
        printf("host %s %s: %llu launches, launch call %.2f us each; %.1f stream queries a launch, %.2f us each\n",
               name, phase, (unsigned long long)rp.launches, (double)rp.launch_ns / (double)rp.launches / 1e3,
               (double)rp.queries / (double)rp.launches,
               rp.queries ? (double)rp.query_ns / (double)rp.queries / 1e3 : 0.0);
    gb_kstate_t ks;
    if (mode != GB_MODE_CPU && gb_rk_terminate(rk, 2000) == GB_OK && gbi_cuda_kstate(rk, &ks) == GB_OK) {
        double khz = gbi_cuda_clock_khz(0);
        if (ks.prof_ns > 0)
            khz = (double)ks.prof_clk / (double)ks.prof_ns * 1e6; /* the SM clock it really ran at */
        if (rp.launches && ks.prof_ns > 0)
            printf("profile %s %s: the kernel ran %.2f us a launch\n", name, phase,
                   (double)ks.prof_ns / (double)rp.launches / 1e3);
        if (ks.prof_windows && khz > 0) {
            double w = (double)ks.prof_windows, us = 1e3 / khz;
            printf("profile %s %s: SM clock %.0f MHz (rated %d); handler %.2f us per window (single-message path)\n", name,
                   phase, khz / 1e3, gbi_cuda_clock_khz(0) / 1000, (double)ks.prof_handler / w * us);
            printf("profile %s %s: %llu busy windows, %.1f msgs/window; per window us: read %.2f "
                   "dispatch %.2f write %.2f; idle total %.1f ms\n",
                   name, phase, (unsigned long long)ks.prof_windows, (double)ks.prof_msgs / w,
                   (double)ks.prof_read / w * us, (double)ks.prof_dispatch / w * us,
                   (double)ks.prof_write / w * us, (double)ks.prof_idle * us / 1e3);
            if (ks.prof_big_windows) {
                w = (double)ks.prof_big_windows;
                printf("profile %s %s: %llu windows of >= 64, %.1f msgs/window; per window us: read %.2f "
                       "dispatch %.2f (%.2f rounds, bidding %.2f) write %.2f\n",
                       name, phase, (unsigned long long)ks.prof_big_windows, (double)ks.prof_big_msgs / w,
                       (double)ks.prof_big_read / w * us, (double)ks.prof_big_dispatch / w * us,
                       (double)ks.prof_big_rounds / w, (double)ks.prof_big_bid / w * us,
                       (double)ks.prof_big_write / w * us);
            }
        }
    }
#else
    (void)mode;
    (void)phase;
#endif
    gb_rk_destroy(rkp);
    return rc;
}

/* The drain rate (rl_drain), on a ring of its own: its kernel profile is its
 * own. The ring is large so that activation, which waits for the kernel's
 * acknowledgement with 20 us sleeps, ends long before the drain does
 * (relaunch: launches of 4096, the benchmark's max_messages_per_launch). */
#define DRAIN_COUNT 32768u
static int drain_row(const char *label, gb_mode mode, int fallback, const char *name, row_t *row)
{
    if (fallback)
        return 0; /* staging: the host's copies are part of the kernel's work there */
    gb_rk_t *rk = start_ring(label, mode, fallback, DRAIN_COUNT);
    if (!rk)
        return -1;
    uint64_t i = 0;
    int rc = rl_drain(rk, &i, 9, DRAIN_COUNT, &row->drain_rate);
    row->has_drain = rc == 0;
    return finish_ring(&rk, name, "drain", mode, i, rc);
}

/* warmup + iters round trips, one request each, requests from *ip on;
 * samples[] gets the last iters, in us. */
static int round_trips(gb_rk_t *rk, uint64_t *ip, int warmup, int iters, double *samples)
{
    int rc = 0;
    for (int k = 0; k < warmup + iters && rc == 0; k++, (*ip)++) {
        double t0 = rl_now_us();
        gb_slot_hdr_t *s = gb_rk_claim(rk);
        rl_fill_request(s, *ip);
        gb_rk_publish(rk);
        rc = rl_wait_reply(rk, *ip);
        if (k >= warmup)
            samples[k - warmup] = rl_now_us() - t0;
    }
    return rc;
}

/* Paired round-trip ratios (paired_ratio), printed after the table. */
typedef struct pair {
    char what[64];
    int rounds, iters;
    double median, min, max;
} pair_t;
static pair_t g_pairs[3];
static int g_npairs;

#ifdef GB_HAVE_CUDA
/* The round-trip ratio the targets name, taken in paired rounds: each round
 * measures the floor (persistent: the fenced echo; relaunch: the empty
 * graph, or with staging placement the one-slot copy graph), then the
 * runtime on a fresh ring (no kernel of ours runs while the floor does),
 * `iters` each after a warm-up; the ratio of their medians. The median, min
 * and max of the round ratios are printed: on a host whose floor itself
 * moves between runs, a ratio of two rows taken seconds apart is not one
 * number. */
static int paired_ratio(const char *label, gb_mode mode, int fallback, int rounds, int iters)
{
    double *s = calloc((size_t)iters, sizeof *s), *ratio = calloc((size_t)rounds, sizeof *ratio);
    int rc = s && ratio ? 0 : -1;
    double fm = 0, fp = 0, rm = 0, rp = 0;
    const char *placement = "";
    for (int r = 0; r < rounds && rc == 0; r++) {
        rc = mode == GB_MODE_PERSISTENT ? gbk_floor_echo(0, 1, iters / 5, iters, s)
                                        : gbk_floor_graph(0, fallback ? 1 : 0, iters / 5, iters, s);
        if (rc != 0)
            break;
        stats(s, iters, &fm, &fp);
        gb_rk_t *rk = start_ring(label, mode, fallback, RING_CAP);
        if (!rk) {
            rc = -1;
            break;
        }
        gb_rk_status_t st;
        gb_rk_status(rk, &st);
        placement = gb_placement_name(st.placement);
        uint64_t i = 0;
        rc = round_trips(rk, &i, iters / 5, iters, s);
        gb_rk_terminate(rk, 2000);
        gb_rk_destroy(&rk);
        if (rc != 0)
            break;
        stats(s, iters, &rm, &rp);
        ratio[r] = rm / fm;
    }
    if (rc == 0) {
        qsort(ratio, (size_t)rounds, sizeof *ratio, rl_cmp_double);
        pair_t *p = &g_pairs[g_npairs++];
        snprintf(p->what, sizeof p->what, "%s (%s) / %s floor", label, placement,
                 mode == GB_MODE_PERSISTENT ? "echo" : fallback ? "copy-graph" : "empty-graph");
        p->rounds = rounds;
        p->iters = iters;
        p->median = ratio[rounds / 2];
        p->min = ratio[0];
        p->max = ratio[rounds - 1];
    } else {
        fprintf(stderr, "bench: paired ratio %s failed\n", label);
    }
    free(s);
    free(ratio);
    return rc;
}
#endif

static int bench_backend(const char *label, gb_mode mode, int fallback, int warmup, int iters,
                         double seconds, int lat_only)
{
    gb_rk_t *rk = start_ring(label, mode, fallback, RING_CAP);
    if (!rk)
        return -1;
    gb_rk_status_t st;
    gb_rk_status(rk, &st);
    char name[48];
    const char *kflags = getenv("GPUBRIDGE_KERNEL_FLAGS");
    if (kflags && mode != GB_MODE_CPU)
        snprintf(name, sizeof name, "%s (%s) flags %s", label, gb_placement_name(st.placement), kflags);
    else
        snprintf(name, sizeof name, "%s (%s)", label, gb_placement_name(st.placement));
    row_t *row = add_row(name);

    /* Round trip, on a ring of its own so that its kernel profile is its own. */
    double *samples = calloc((size_t)iters, sizeof *samples);
    uint64_t i = 0;
    int rc = round_trips(rk, &i, warmup, iters, samples);
    if (rc == 0) {
        stats(samples, iters, &row->median_us, &row->p99_us);
        row->has_lat = 1;
    }
    free(samples);
    rc = finish_ring(&rk, name, "round trip", mode, i, rc);
    if (rc != 0)
        return rc;
    if (lat_only)
        return mode == GB_MODE_CPU ? 0 : drain_row(label, mode, fallback, name, row);

    /* Throughput per batch size. */
    if (!(rk = start_ring(label, mode, fallback, RING_CAP)))
        return -1;
    i = 0;
    for (int b = 0; b < 4 && rc == 0; b++) {
        uint32_t batch = BATCHES[b];
        double t0 = rl_now_us(), t1, send_us = 0;
        uint64_t done = 0;
        do {
            double ts = rl_now_us();
            for (uint32_t k = 0; k < batch; k++) {
                gb_slot_hdr_t *s = gb_rk_claim(rk);
                rl_fill_request(s, i + k);
            }
            gb_rk_publish(rk);
            send_us += rl_now_us() - ts;
            for (uint32_t k = 0; k < batch && rc == 0; k++)
                rc = rl_wait_reply(rk, i + k);
            i += batch;
            done += batch;
            t1 = rl_now_us();
        } while (rc == 0 && t1 - t0 < seconds * 1e6);
        row->batch_rate[b] = (double)done / ((t1 - t0) / 1e6);
        printf("host %s batch %u: %.1f ns/msg writing requests, %.1f ns/msg waiting+reading replies\n", label,
               batch, send_us * 1e3 / (double)done, (t1 - t0 - send_us) * 1e3 / (double)done);
    }
    row->has_tput = rc == 0;
    rc = finish_ring(&rk, name, "batches", mode, i, rc);
    if (rc != 0)
        return rc;

    /* Streaming, on a ring of its own: its kernel profile is its own. */
    if (!(rk = start_ring(label, mode, fallback, RING_CAP)))
        return -1;
    i = 0;
    for (int b = 0; b < 2 && rc == 0; b++)
        rc = rl_stream(rk, STREAM_BATCHES[b], seconds, &i, &row->stream_rate[b]);
    row->has_stream = rc == 0;
    rc = finish_ring(&rk, name, "streaming", mode, i, rc);
    if (rc != 0)
        return rc;
    return drain_row(label, mode, fallback, name, row);
}

/* The same through the embedding API (ring_api.c): a row of its own beside
 * the runtime's. */
static int bench_api(const char *label, gb_mode mode, int warmup, int iters, double seconds)
{
    ra_result_t a;
    int rc = ra_bench(mode, g_window, warmup, iters, seconds, &a);
    if (rc == 0) {
        char name[48];
        snprintf(name, sizeof name, "%s api (%s)", label, a.placement);
        row_t *r = add_row(name);
        r->median_us = a.median_us;
        r->p99_us = a.p99_us;
        r->has_lat = 1;
        memcpy(r->batch_rate, a.batch_rate, sizeof r->batch_rate);
        r->has_tput = 1;
    }
    return rc;
}

/* CPU the host side spends on an idle ring kernel over one second, when an
 * event loop polls it every millisecond (what the bridge does). */
static double idle_cpu_percent(gb_mode mode)
{
    gb_rk_params_t p;
    memset(&p, 0, sizeof p);
    p.type = "echo";
    p.mode = mode;
    snprintf(p.grain.type, sizeof p.grain.type, "echo");
    p.grain.queue_capacity = 64;
    p.grain.slot_size = 64;
    p.grain.messages_per_iteration = 64;
    p.grain.max_grains = 64;
    p.grain.cpu_threads = 1;
    p.idle_spin_polls = 64;
    p.idle_backoff_max_ns = 20000;
    p.heartbeat_deadline_ms = 2000;
    p.max_messages_per_launch = 4096;
    gb_rk_t *rk = NULL;
    if (gb_rk_new(&p, &rk) != GB_OK || gb_rk_launch(rk) != GB_OK) {
        gb_rk_destroy(&rk);
        return -1;
    }
    struct timespec c0, c1, w = {0, 1000000};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = rl_now_us();
    while (rl_now_us() - t0 < 1e6) {
        gb_rk_poll(rk);
        nanosleep(&w, NULL);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu_us = (double)(c1.tv_sec - c0.tv_sec) * 1e6 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e3;
    double wall = rl_now_us() - t0;
    gb_rk_destroy(&rk);
    return 100.0 * cpu_us / wall;
}

#ifdef GB_HAVE_CUDA
static void bench_floors(int warmup, int iters)
{
    double *s = calloc((size_t)iters, sizeof *s);
    struct {
        const char *name;
        int kind, arg;
    } floors[] = {
        {"floor: echo 64B, fence", 0, 1},
        {"floor: echo 64B, no fence", 0, 0},
        {"floor: empty graph", 1, 0},
        {"floor: copy graph 1x64B", 1, 1},
        {"floor: copy graph 4096x64B", 1, 4096},
    };
    for (size_t f = 0; f < sizeof floors / sizeof floors[0]; f++) {
        int rc = floors[f].kind == 0 ? gbk_floor_echo(0, floors[f].arg, warmup, iters, s)
                                     : gbk_floor_graph(0, floors[f].arg, warmup, iters, s);
        if (rc != 0) {
            fprintf(stderr, "bench: %s failed (%d)\n", floors[f].name, rc);
            continue;
        }
        row_t *r = add_row(floors[f].name);
        stats(s, iters, &r->median_us, &r->p99_us);
        r->has_lat = 1;
    }
    free(s);
    /* Not a floor: where a graph round trip's time goes on the host. */
    for (int slots = 0; slots <= 1; slots++) {
        gbk_graph_probe_t gp;
        if (gbk_probe_graph(0, slots, warmup, iters / 4, &gp) == 0)
            printf("probe: %s graph: launch call %.2f us; launch + synchronize %.2f us; launch + query until "
                   "done %.2f us (%.1f queries)\n",
                   slots ? "copy" : "empty", gp.launch_us, gp.sync_us, gp.poll_us, gp.queries);
    }
    /* Not a floor: the handler step alone (gbi_dispatch_one), to take a round
     * trip apart. Back to back, and with the idle gap of a round trip. */
    static const struct {
        int part, keys, gap_ns;
        const char *what;
    } probes[] = {{GBK_PROBE_DISPATCH, 16, 0, "gbi_dispatch_one"},   {GBK_PROBE_DISPATCH, 4096, 0, "gbi_dispatch_one"},
                  {GBK_PROBE_DISPATCH, 16, 4000, "gbi_dispatch_one"}, {GBK_PROBE_LOOKUP, 16, 0, "table step alone"},
                  {GBK_PROBE_LOOKUP, 4096, 0, "table step alone"},   {GBK_PROBE_HANDLER, 16, 0, "handler alone"}};
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
        double cyc = 0, mhz = 0;
        int rc = gbk_probe_dispatch(0, probes[k].part, probes[k].keys, probes[k].gap_ns, 20000, &cyc, &mhz);
        if (rc == 0)
            printf("probe: %s, vecadd, %d keys, %d ns idle before each: median %.0f cycles "
                   "(%.2f us at %.0f MHz)\n",
                   probes[k].what, probes[k].keys, probes[k].gap_ns, cyc, mhz > 0 ? cyc / mhz : 0, mhz);
        else
            fprintf(stderr, "bench: dispatch probe failed (%d)\n", rc);
    }
}

/* A row from n rounds' medians and p99s: the median of each. */
static void add_rounds_row(const char *name, double *med, double *p99, int n)
{
    if (!n)
        return;
    row_t *r = add_row(name);
    double unused;
    stats(med, n, &r->median_us, &unused);
    stats(p99, n, &r->p99_us, &unused);
    r->has_lat = 1;
}

/* The echo floor with the ring kernel's steps added one at a time
 * (gbk_floor_ladder), rounds interleaved: each row is the median of its
 * rounds' medians. */
static void bench_ladder(int warmup, int iters)
{
    static const struct {
        unsigned feat;
        const char *name;
    } steps[] = {
        {0, "ladder: echo, stamp in header"},
        {GBK_LADDER_V4, "ladder: + 16-byte lanes"},
        {GBK_LADDER_V4 | GBK_LADDER_POLL3, "ladder: + in_head, control"},
        {GBK_LADDER_V4 | GBK_LADDER_POLL3 | GBK_LADDER_COUNTERS, "ladder: + counters, beat"},
        {GBK_LADDER_V4 | GBK_LADDER_POLL3 | GBK_LADDER_COUNTERS | GBK_LADDER_TABLE, "ladder: + table access"},
        {GBK_LADDER_V4 | GBK_LADDER_POLL3 | GBK_LADDER_COUNTERS | GBK_LADDER_DISPATCH, "ladder: + dispatch_one"},
        {GBK_LADDER_V4 | GBK_LADDER_DISPATCH, "ladder: 16-byte + dispatch_one"},
        {GBK_LADDER_ACQ_REL, "ladder: echo, fence.acq_rel"},
        {GBK_LADDER_ONE_FENCE, "ladder: echo, lane 0 fences"},
        {GBK_LADDER_ONE_FENCE | GBK_LADDER_ACQ_REL, "ladder: echo, lane 0 acq_rel"},
        {GBK_LADDER_ST_RELEASE, "ladder: echo, st.release.sys"},
        {GBK_LADDER_V4 | GBK_LADDER_POLL3 | GBK_LADDER_COUNTERS | GBK_LADDER_DISPATCH | GBK_LADDER_ST_RELEASE,
         "ladder: dispatch_one, st.release"},
    };
    enum { NSTEPS = sizeof steps / sizeof steps[0], ROUNDS = 3 };
    double med[NSTEPS][ROUNDS], p99[NSTEPS][ROUNDS];
    double *s = calloc((size_t)iters, sizeof *s);
    int ok[NSTEPS] = {0};
    for (int round = 0; round < ROUNDS && s; round++)
        for (int k = 0; k < NSTEPS; k++) {
            int rc = gbk_floor_ladder(0, steps[k].feat, warmup, iters, s);
            if (rc != 0) {
                fprintf(stderr, "bench: %s failed (%d)\n", steps[k].name, rc);
                continue;
            }
            stats(s, iters, &med[k][ok[k]], &p99[k][ok[k]]);
            ok[k]++;
        }
    for (int k = 0; k < NSTEPS; k++)
        add_rounds_row(steps[k].name, med[k], p99[k], ok[k]);
    static const char *rl_names[] = {"ladder: graph, empty, sync",    "ladder: graph, reply by stamp",
                                     "ladder: graph, + params set",   "ladder: graph, + dispatch_one",
                                     "ladder: graph, 1.2 KiB params", "ladder: graph, kind at run time"};
    enum { NRL = sizeof rl_names / sizeof rl_names[0] };
    double rmed[NRL][ROUNDS], rp99[NRL][ROUNDS];
    int rok[NRL] = {0};
    for (int round = 0; round < ROUNDS && s; round++)
        for (int k = 0; k < NRL; k++) {
            double launch_us = 0, kernel_us = 0;
            int rc = gbk_floor_relaunch_ladder(0, k, warmup / 4, iters / 4, s, &launch_us, &kernel_us);
            if (rc != 0) {
                fprintf(stderr, "bench: %s failed (%d)\n", rl_names[k], rc);
                continue;
            }
            printf("%s: launch call %.2f us, kernel %.2f us (round %d)\n", rl_names[k], launch_us, kernel_us,
                   round);
            stats(s, iters / 4, &rmed[k][rok[k]], &rp99[k][rok[k]]);
            rok[k]++;
        }
    free(s);
    for (int k = 0; k < NRL; k++)
        add_rounds_row(rl_names[k], rmed[k], rp99[k], rok[k]);
}
#endif

static void usage(void)
{
    printf("usage: bench_ring [--modes cpu,persistent,relaunch] [--iters N] [--warmup N] [--seconds S] [--window N]\n"
           "                  [--fallback] [--variants F1,F2] [--keys N] [--stream-threads 1|2] [--ladder]\n"
           "                  [--pairs N] [--profile]\n"
           "  --modes     backends to measure (default: cpu, plus persistent and relaunch with a GPU)\n"
           "  --iters     round trips measured (default 20000), after --warmup (default 2000)\n"
           "  --seconds   time per throughput batch size (default 0.5)\n"
           "  --window    requests per dispatch window (default 1024)\n"
           "  --fallback  also measure the fallback placements (device memory + staging)\n"
           "  --keys      distinct grain keys the requests cycle over (default 4096)\n"
           "  --variants  kernel switch sets (GPUBRIDGE_KERNEL_FLAGS values, e.g. 0,1,2): round trip rows on\n"
           "              vecadd's benchmark build (GB_KERNEL_PROFILE), whose set 0 is their baseline\n"
           "  --profile   every ring on vecadd's benchmark build, which prints the kernel's profile (the\n"
           "              shipped kernels count none); the rows then measure that build\n"
           "  --ladder    also the echo floor with the ring kernel's steps added one at a time\n"
           "  --pairs     rounds of floor and round trip alternated for the target ratios (default 7, 0: none)\n"
           "  --sizes     echo payload sizes in bytes instead, e.g. 64,1024,65536: in one slot and out of\n"
           "              line from a 64-byte slot (large messages), round trip and pipelined rate\n"
           "  --stream-threads  streaming rows: 2 = a producer thread beside the receiver (default\n"
           "              with 4 or more CPUs), 1 = one thread alternates\n");
}

int main(int argc, char **argv)
{
    int iters = 20000, warmup = 2000, fallback = 0, ladder = 0, pairs = 7, profile = 0;
    rl_stream_threads = sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? 2 : 1;
    double seconds = 0.5;
    const char *modes = NULL, *variants = NULL, *sizes = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--warmup") && a + 1 < argc)
            warmup = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--seconds") && a + 1 < argc)
            seconds = atof(argv[++a]);
        else if (!strcmp(argv[a], "--modes") && a + 1 < argc)
            modes = argv[++a];
        else if (!strcmp(argv[a], "--window") && a + 1 < argc)
            g_window = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--keys") && a + 1 < argc)
            rl_keys = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--variants") && a + 1 < argc)
            variants = argv[++a];
        else if (!strcmp(argv[a], "--pairs") && a + 1 < argc)
            pairs = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--stream-threads") && a + 1 < argc)
            rl_stream_threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--sizes") && a + 1 < argc)
            sizes = argv[++a];
        else if (!strcmp(argv[a], "--fallback"))
            fallback = 1;
        else if (!strcmp(argv[a], "--ladder"))
            ladder = 1;
        else if (!strcmp(argv[a], "--profile"))
            profile = 1;
        else {
            usage();
            return strcmp(argv[a], "--help") ? 2 : 0;
        }
    }
    if (iters < 100 || warmup < 0 || seconds <= 0 || g_window < 1 || g_window > 4096 || rl_keys < 1 ||
        rl_keys > 65536 || rl_stream_threads < 1 || rl_stream_threads > 2 || pairs < 0 || pairs > 100) {
        fprintf(stderr, "bench: --iters must be >= 100, --seconds > 0, --window 1..4096, --keys 1..65536, "
                        "--stream-threads 1 or 2, --pairs 0..100\n");
        return 2;
    }
    gb_log_set_level(GB_LOG_WARN);
    char gpu[128] = "none";
    int have_gpu = 0;
#ifdef GB_HAVE_CUDA
    have_gpu = gbk_device_name(0, gpu, sizeof gpu) == 0;
    if (bench_profiled_register() != 0)
        return 1;
    if (profile)
        g_type = GB_BENCH_PROFILED_TYPE;
#else
    if (profile) {
        fprintf(stderr, "bench: --profile needs the CUDA build\n");
        return 2;
    }
#endif
    if (!modes)
        modes = have_gpu ? "cpu,persistent,relaunch" : "cpu";
    printf("bench_ring: GPU %s, %d round trips after %d warm-up, %.2f s per batch size, window %d, %llu keys, "
           "streaming on %d host thread%s, grain type %s\n",
           gpu, iters, warmup, seconds, g_window, (unsigned long long)rl_keys, rl_stream_threads,
           rl_stream_threads > 1 ? "s" : "", g_type);
    if (sizes)
        return bench_sizes(modes, fallback, sizes, warmup, iters, seconds, gpu);
    int rc = 0;
#ifdef GB_HAVE_CUDA
    if (have_gpu)
        bench_floors(warmup, iters);
    if (have_gpu && ladder)
        bench_ladder(warmup, iters);
#else
    (void)ladder;
#endif
    if (strstr(modes, "cpu")) {
        rc |= bench_backend("cpu", GB_MODE_CPU, 0, warmup, iters, seconds, 0);
        rc |= bench_api("cpu", GB_MODE_CPU, warmup, iters, seconds);
    }
    if (strstr(modes, "persistent")) {
        rc |= bench_backend("persistent", GB_MODE_PERSISTENT, 0, warmup, iters, seconds, 0);
        rc |= bench_api("persistent", GB_MODE_PERSISTENT, warmup, iters, seconds);
        if (fallback)
            rc |= bench_backend("persistent", GB_MODE_PERSISTENT, 1, warmup, iters / 10, seconds, 0);
    }
    if (strstr(modes, "relaunch")) {
        rc |= bench_backend("relaunch", GB_MODE_RELAUNCH, 0, warmup, iters, seconds, 0);
        rc |= bench_api("relaunch", GB_MODE_RELAUNCH, warmup, iters, seconds);
        if (fallback) {
            rc |= bench_backend("relaunch", GB_MODE_RELAUNCH, 1, warmup, iters / 4, seconds, 0);
            setenv("GPUBRIDGE_FORCE_MALLOC_STAGING", "1", 1);
            rc |= bench_backend("relaunch", GB_MODE_RELAUNCH, 1, warmup / 4, iters / 20, seconds, 0);
            unsetenv("GPUBRIDGE_FORCE_MALLOC_STAGING");
        }
        printf("idle host CPU, relaunch, polled every ms: %.2f%% of a core\n", idle_cpu_percent(GB_MODE_RELAUNCH));
    }
    /* Kernel switches (GBK_F_* in ring_kernel.h), round trip only, side by side. */
    for (const char *v = variants; v && *v && have_gpu;) {
        char f[16];
        size_t len = strcspn(v, ",");
        snprintf(f, sizeof f, "%.*s", (int)(len < 15 ? len : 15), v);
        setenv("GPUBRIDGE_KERNEL_FLAGS", f, 1);
#ifdef GB_HAVE_CUDA
        g_type = GB_BENCH_PROFILED_TYPE; /* the switches exist in the benchmark build only */
#endif
        if (strstr(modes, "persistent"))
            rc |= bench_backend("persistent", GB_MODE_PERSISTENT, 0, warmup, iters, seconds, 1);
        if (strstr(modes, "relaunch"))
            rc |= bench_backend("relaunch", GB_MODE_RELAUNCH, 0, warmup, iters, seconds, 1);
        if (strstr(modes, "relaunch") && fallback)
            rc |= bench_backend("relaunch", GB_MODE_RELAUNCH, 1, warmup, iters / 4, seconds, 1);
        unsetenv("GPUBRIDGE_KERNEL_FLAGS");
#ifdef GB_HAVE_CUDA
        g_type = profile ? GB_BENCH_PROFILED_TYPE : "vecadd";
#endif
        v += len + (v[len] == ',');
    }
#ifdef GB_HAVE_CUDA
    if (have_gpu && pairs > 0 && strstr(modes, "persistent"))
        rc |= paired_ratio("persistent", GB_MODE_PERSISTENT, 0, pairs, 2000);
    if (have_gpu && pairs > 0 && strstr(modes, "relaunch"))
        rc |= paired_ratio("relaunch", GB_MODE_RELAUNCH, 0, pairs, 2000);
    if (have_gpu && pairs > 0 && strstr(modes, "relaunch") && fallback)
        rc |= paired_ratio("relaunch", GB_MODE_RELAUNCH, 1, pairs, 1000);
#endif
    if (strstr(modes, "cpu"))
        printf("idle host CPU, cpu backend (its worker backs off), polled every ms: %.2f%% of a core\n",
               idle_cpu_percent(GB_MODE_CPU));

    printf("\n%-36s %10s %10s %12s %12s %12s %12s %12s %12s %12s\n", "path", "median us", "p99 us", "b=1 M/s",
           "b=16 M/s", "b=256 M/s", "b=4096 M/s", "s256 M/s", "s4096 M/s", "drain M/s");
    for (int r = 0; r < g_nrows; r++) {
        row_t *w = &g_rows[r];
        printf("%-36s", w->name);
        if (w->has_lat)
            printf(" %10.2f %10.2f", w->median_us, w->p99_us);
        else
            printf(" %10s %10s", "-", "-");
        for (int b = 0; b < 4; b++) {
            if (w->has_tput)
                printf(" %12.2f", w->batch_rate[b] / 1e6);
            else
                printf(" %12s", "-");
        }
        for (int b = 0; b < 2; b++) {
            if (w->has_stream)
                printf(" %12.2f", w->stream_rate[b] / 1e6);
            else
                printf(" %12s", "-");
        }
        if (w->has_drain)
            printf(" %12.2f", w->drain_rate / 1e6);
        else
            printf(" %12s", "-");
        printf("\n");
    }
    /* Ratios against the fenced echo floor, where both exist. */
    double floor_echo = 0;
    for (int r = 0; r < g_nrows; r++)
        if (!strcmp(g_rows[r].name, "floor: echo 64B, fence"))
            floor_echo = g_rows[r].median_us;
    double floor_graph = 0, floor_copy = 0, floor_copy4096 = 0;
    for (int r = 0; r < g_nrows; r++) {
        if (!strcmp(g_rows[r].name, "floor: empty graph"))
            floor_graph = g_rows[r].median_us;
        if (!strcmp(g_rows[r].name, "floor: copy graph 1x64B"))
            floor_copy = g_rows[r].median_us;
        if (!strcmp(g_rows[r].name, "floor: copy graph 4096x64B")) {
            floor_copy4096 = g_rows[r].median_us;
            printf("floor: copy graph moves 4096 slots at %.1f M msg/s\n", 4096.0 / g_rows[r].median_us);
        }
    }
    for (int r = 0; r < g_nrows; r++) {
        row_t *w = &g_rows[r];
        if (!w->has_lat)
            continue;
        if (floor_echo > 0 && !strncmp(w->name, "persistent", 10))
            printf("ratio %s / echo floor: %.3f\n", w->name, w->median_us / floor_echo);
        if (floor_graph > 0 && !strncmp(w->name, "relaunch (mapped)", 17))
            printf("ratio %s / empty-graph floor: %.3f\n", w->name, w->median_us / floor_graph);
        if (floor_copy > 0 && !strncmp(w->name, "relaunch (device", 16))
            printf("ratio %s / copy-graph floor: %.3f\n", w->name, w->median_us / floor_copy);
    }
    for (int k = 0; k < g_npairs; k++)
        printf("paired ratio %s, %d rounds of %d: median %.3f, min %.3f, max %.3f\n", g_pairs[k].what,
               g_pairs[k].rounds, g_pairs[k].iters, g_pairs[k].median, g_pairs[k].min, g_pairs[k].max);
    for (int r = 0; r < g_nrows; r++)
        if (g_rows[r].has_drain && floor_copy4096 > 0 && strncmp(g_rows[r].name, "cpu", 3))
            printf("ratio %s drain / copy graph moving 4096 slots: %.3f\n", g_rows[r].name,
                   g_rows[r].drain_rate / 1e6 / (4096.0 / floor_copy4096));

    printf("{\"bench\":\"ring\",\"gpu\":\"%s\",\"rows\":[", gpu);
    for (int r = 0; r < g_nrows; r++) {
        row_t *w = &g_rows[r];
        printf("%s{\"path\":\"%s\"", r ? "," : "", w->name);
        if (w->has_lat)
            printf(",\"median_us\":%.3f,\"p99_us\":%.3f", w->median_us, w->p99_us);
        if (w->has_tput)
            for (int b = 0; b < 4; b++)
                printf(",\"batch_%u_msgs_per_s\":%.0f", BATCHES[b], w->batch_rate[b]);
        if (w->has_stream)
            for (int b = 0; b < 2; b++)
                printf(",\"stream_%u_msgs_per_s\":%.0f", STREAM_BATCHES[b], w->stream_rate[b]);
        if (w->has_drain)
            printf(",\"drain_msgs_per_s\":%.0f", w->drain_rate);
        printf("}");
    }
    printf("],\"paired_ratios\":[");
    for (int k = 0; k < g_npairs; k++)
        printf("%s{\"what\":\"%s\",\"rounds\":%d,\"median\":%.4f,\"min\":%.4f,\"max\":%.4f}", k ? "," : "",
               g_pairs[k].what, g_pairs[k].rounds, g_pairs[k].median, g_pairs[k].min, g_pairs[k].max);
    printf("]}\n");
    return rc ? 1 : 0;
}
