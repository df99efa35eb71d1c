/* Several devices in one process: in-process vecadd throughput (64-byte
 * requests streamed into the ring and every reply checked, as bench_ring's
 * streaming rows) on the first device alone, and on every listed device at
 * once, one host thread per device, side by side in each round. Prints a
 * table and a JSON line.
 *
 *   bench_devices [--mode persistent|relaunch|cpu] [--devices 0,1] [--seconds S]
 *                 [--rounds R] [--batch B]
 *
 * The engine is the daemon's (`devices` in the config): each device runs its
 * own vecadd ring kernel; a device listed twice runs two on one GPU. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "detect.h"
#include "engine.h"
#include "log.h"
#include "ring_load.h"

typedef struct lane {
    gb_rk_t *rk;
    uint32_t batch;
    double seconds;
    uint64_t next; /* the next request's number on this ring */
    double rate;
    int rc;
} lane_t;

static void *lane_main(void *arg)
{
    lane_t *l = arg;
    l->rc = rl_stream(l->rk, l->batch, l->seconds, &l->next, &l->rate);
    return NULL;
}

/* An engine of vecadd (and the other default types, PageRank's without an
 * arena) on devs[0..n). NULL after a message. */
static gb_engine_t *engine_on(const char *mode_name, const int *devs, size_t n)
{
    gb_config_t cfg;
    gb_config_defaults(&cfg);
    cfg.arena_mb = 0;
    cfg.device = devs[0];
    cfg.n_devices = n > 1 ? n : 0;
    memcpy(cfg.devices, devs, n * sizeof *devs);
    gb_facts_t facts;
    gb_selection_t sel;
    char err[512] = "";
    gb_engine_dev_t ed[GB_MAX_DEVICES];
    size_t got = 0;
    gb_engine_t *e = NULL;
    if (gb_detect_run(&cfg, "/", mode_name, &facts, &sel, err, sizeof err) != GB_OK ||
        gb_detect_devices(&cfg, "/", mode_name, &facts, &sel, ed, &got, err, sizeof err) != GB_OK) {
        fprintf(stderr, "bench_devices: %s\n", err);
        return NULL;
    }
    if (gb_engine_new_devs(&cfg, ed, got, &e) != GB_OK) {
        fprintf(stderr, "bench_devices: cannot start vecadd on %zu device(s) in %s mode\n", got, mode_name);
        return NULL;
    }
    return e;
}

/* Streams into vecadd's ring on each of the engine's devices at once; the
 * sum of their rates, or -1. */
static double run(gb_engine_t *e, uint32_t batch, double seconds)
{
    const gb_engine_type_t *t = gb_engine_find(e, "vecadd");
    if (!t || !t->rk)
        return -1;
    lane_t lanes[GB_MAX_DEVICES];
    pthread_t th[GB_MAX_DEVICES];
    for (size_t d = 0; d < e->n_devs; d++) {
        lanes[d] = (lane_t){e->types[e->ring_of[t->type_idx][d]].rk, batch, seconds, 0, 0, 0};
        pthread_create(&th[d], NULL, lane_main, &lanes[d]);
    }
    double sum = 0;
    int rc = 0;
    for (size_t d = 0; d < e->n_devs; d++) {
        pthread_join(th[d], NULL);
        sum += lanes[d].rate;
        rc |= lanes[d].rc;
    }
    return rc ? -1 : sum;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, rl_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    const char *mode_name = "cpu", *list = "0,1";
    double seconds = 1.0;
    int rounds = 3;
    long batch = 256;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--mode") && a + 1 < argc)
            mode_name = argv[++a];
        else if (!strcmp(argv[a], "--devices") && a + 1 < argc)
            list = argv[++a];
        else if (!strcmp(argv[a], "--seconds") && a + 1 < argc)
            seconds = atof(argv[++a]);
        else if (!strcmp(argv[a], "--rounds") && a + 1 < argc)
            rounds = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--batch") && a + 1 < argc)
            batch = atol(argv[++a]);
        else {
            printf("usage: bench_devices [--mode persistent|relaunch|cpu] [--devices 0,1] [--seconds S] [--rounds R]\n"
                   "                     [--batch B]\n"
                   "  In-process vecadd streaming throughput (64-byte requests, batches of B, default 256,\n"
                   "  every reply checked) on the first listed device alone and on all of them at once,\n"
                   "  one host thread per device; the median over R rounds (default 3) of S seconds.\n");
            return strcmp(argv[a], "--help") ? 2 : 0;
        }
    }
    int devs[GB_MAX_DEVICES];
    size_t n = 0;
    for (const char *p = list; *p && n < GB_MAX_DEVICES;) {
        devs[n++] = atoi(p);
        if (!(p = strchr(p, ',')))
            break;
        p++;
    }
    gb_mode mode;
    if (gb_mode_parse(mode_name, &mode) != 0 || mode == GB_MODE_AUTO || n < 2 || rounds < 1 || rounds > 15 ||
        seconds <= 0 || batch < 1 || batch > 4096) {
        fprintf(stderr, "bench_devices: --mode persistent|relaunch|cpu, --devices with 2 to %d entries, "
                        "--rounds 1..15, --batch 1..4096\n", GB_MAX_DEVICES);
        return 2;
    }
    gb_log_set_level(GB_LOG_WARN);
    printf("bench_devices: mode %s, devices %s, batches of %ld, %.1f s a run, %d round(s), %ld cores\n", mode_name,
           list, batch, seconds, rounds, sysconf(_SC_NPROCESSORS_ONLN));
    double one[15], all[15];
    for (int r = 0; r < rounds; r++) {
        for (int which = 0; which < 2; which++) {
            gb_engine_t *e = engine_on(mode_name, devs, which ? n : 1);
            double rate = e ? run(e, (uint32_t)batch, seconds) : -1;
            gb_engine_destroy(&e, 2000);
            if (rate < 0) {
                fprintf(stderr, "bench_devices: a wrong or missing reply on %s\n", which ? "all devices" : "one");
                return 1;
            }
            (which ? all : one)[r] = rate;
        }
    }
    const double m1 = median(one, rounds), mn = median(all, rounds);
    printf("\n%-10s %18s %10s\n", "devices", "vecadd msg/s", "vs one");
    printf("%-10d %18.0f %9.2fx\n", 1, m1, 1.0);
    printf("%-10zu %18.0f %9.2fx\n", n, mn, mn / m1);
    printf("{\"bench\":\"devices\",\"mode\":\"%s\",\"devices\":\"%s\",\"batch\":%ld,\"rounds\":%d,"
           "\"one_msgs_per_s\":%.0f,\"all_msgs_per_s\":%.0f,\"ratio\":%.3f}\n",
           mode_name, list, batch, rounds, m1, mn, mn / m1);
    return 0;
}
