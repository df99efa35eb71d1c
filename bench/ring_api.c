/* bench_ring through the embedding API (ring_api.h). */
#include "ring_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/runtime.h"

#include "ring_load.h"

/* A runtime serving vecadd only, with the geometry start_ring gives its
 * rings (bench_ring.c). */
static gpubridge_runtime_t *api_runtime(gb_mode mode, int window)
{
    char cfg[640];
    snprintf(cfg, sizeof cfg,
             "log_level = \"warn\";\n"
             "persistent = { idle_spin_polls = 1073741824; idle_backoff_max_ns = 1000; heartbeat_deadline_ms = 2000; };\n"
             "relaunch = { max_messages_per_launch = 4096; };\n"
             "grains = ( { type = \"vecadd\"; queue_capacity = 8192; slot_size = 64; messages_per_iteration = %d;\n"
             "             max_grains = 65536; cpu_threads = 1; } );\n",
             window);
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode = (gpubridge_mode)mode;
    o.config_text = cfg;
    o.flags = GPUBRIDGE_NO_CPU_FALLBACK;
    gpubridge_runtime_t *rt = NULL;
    gpubridge_err e = gpubridge_runtime_new(&o, &rt);
    if (e == GPUBRIDGE_OK)
        e = gpubridge_runtime_start(rt);
    if (e != GPUBRIDGE_OK) {
        fprintf(stderr, "bench: api %s: %s: %s\n", gb_mode_name(mode), gpubridge_strerror(e), gpubridge_last_error());
        gpubridge_runtime_destroy(&rt);
    }
    return rt;
}

/* Request i's record and its call; 0 when the reply is request i's. */
static int call_one(gpubridge_runtime_t *rt, uint64_t i)
{
    unsigned char slot[64];
    gb_slot_hdr_t *s = (gb_slot_hdr_t *)slot;
    rl_fill_request(s, i);
    unsigned char reply[GB_SLOT_HDR_SIZE + 32];
    gb_slot_hdr_t *h = (gb_slot_hdr_t *)reply;
    gpubridge_reply_t r;
    gpubridge_err e = gpubridge_call(rt, "vecadd", s->key, s->type, gb_slot_payload(s), s->len, &r,
                                     reply + GB_SLOT_HDR_SIZE, sizeof reply - GB_SLOT_HDR_SIZE, 5000);
    if (e != GPUBRIDGE_OK) {
        fprintf(stderr, "bench: api call %llu: %s\n", (unsigned long long)i, gpubridge_last_error());
        return -1;
    }
    memset(h, 0, sizeof *h);
    h->corr = i; /* a call's reply carries no correlation id: the check wants request i's */
    h->status = (uint16_t)r.status;
    h->len = r.len;
    if (!rl_check_reply(h, i)) {
        fprintf(stderr, "bench: api call %llu: wrong reply\n", (unsigned long long)i);
        return -1;
    }
    return 0;
}

int ra_call_round_trips(gb_mode mode, int window, int warmup, int iters, double *median, double *p99,
                        char *placement, size_t cap)
{
    gpubridge_runtime_t *rt = api_runtime(mode, window);
    double *s = calloc((size_t)iters, sizeof *s);
    int rc = rt && s ? 0 : -1;
    for (int k = 0; k < warmup + iters && rc == 0; k++) {
        double t0 = rl_now_us();
        rc = call_one(rt, (uint64_t)k);
        if (k >= warmup)
            s[k - warmup] = rl_now_us() - t0;
    }
    gpubridge_telemetry_t t;
    if (rc == 0 && gpubridge_telemetry(rt, "vecadd", &t) == GPUBRIDGE_OK) {
        static const char *const names[] = {"auto", "host", "mapped", "staging"};
        snprintf(placement, cap, "%s", t.placement <= GPUBRIDGE_PLACEMENT_STAGING ? names[t.placement] : "?");
        if (t.processed != (uint64_t)(warmup + iters)) {
            fprintf(stderr, "bench: api: %llu processed, %d sent\n", (unsigned long long)t.processed, warmup + iters);
            rc = -1;
        }
    }
    if (rc == 0) {
        qsort(s, (size_t)iters, sizeof *s, rl_cmp_double);
        *median = s[iters / 2];
        *p99 = s[(int)((double)iters * 0.99)];
    }
    free(s);
    gpubridge_runtime_destroy(&rt);
    return rc;
}
