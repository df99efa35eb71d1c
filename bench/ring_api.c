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

/* 0 when reply r (payload p) is request i's; i also stands in for the
 * correlation id a call's reply does not carry. */
static int check(const gpubridge_reply_t *r, const unsigned char *p, uint64_t i)
{
    unsigned char buf[GB_SLOT_HDR_SIZE + 32];
    gb_slot_hdr_t *h = (gb_slot_hdr_t *)buf;
    memset(buf, 0, sizeof buf);
    h->corr = i;
    h->status = (uint16_t)r->status;
    h->len = r->len;
    memcpy(buf + GB_SLOT_HDR_SIZE, p, r->len < 32 ? r->len : 32);
    if ((r->corr != i && r->corr != 0) || !rl_check_reply(h, i)) {
        fprintf(stderr, "bench: api: wrong reply for request %llu\n", (unsigned long long)i);
        return -1;
    }
    return 0;
}

/* Request i through gpubridge_call (call) or gpubridge_send. */
static int request(gpubridge_runtime_t *rt, uint64_t i, int call)
{
    unsigned char slot[64], out[32];
    gb_slot_hdr_t *s = (gb_slot_hdr_t *)slot;
    rl_fill_request(s, i);
    gpubridge_reply_t r;
    gpubridge_err e = call ? gpubridge_call(rt, "vecadd", s->key, s->type, gb_slot_payload(s), s->len, &r, out,
                                            sizeof out, 5000)
                           : gpubridge_send(rt, "vecadd", s->key, s->type, gb_slot_payload(s), s->len, i, 0);
    if (e != GPUBRIDGE_OK) {
        fprintf(stderr, "bench: api request %llu: %s\n", (unsigned long long)i, gpubridge_last_error());
        return -1;
    }
    return call ? check(&r, out, i) : 0;
}

static int poll_one(gpubridge_runtime_t *rt, uint64_t i)
{
    unsigned char out[32];
    gpubridge_reply_t r;
    if (gpubridge_poll(rt, &r, out, sizeof out, 5000) != GPUBRIDGE_OK) {
        fprintf(stderr, "bench: api: no reply for request %llu: %s\n", (unsigned long long)i, gpubridge_last_error());
        return -1;
    }
    return check(&r, out, i);
}

/* Batches of `batch` sends, then their replies polled, for `seconds`;
 * requests from *ip on. */
static int batches(gpubridge_runtime_t *rt, uint32_t batch, double seconds, uint64_t *ip, double *rate)
{
    double t0 = rl_now_us(), t1;
    uint64_t done = 0;
    int rc = 0;
    do {
        for (uint32_t k = 0; k < batch && rc == 0; k++)
            rc = request(rt, *ip + k, 0);
        for (uint32_t k = 0; k < batch && rc == 0; k++)
            rc = poll_one(rt, *ip + k);
        *ip += batch;
        done += batch;
        t1 = rl_now_us();
    } while (rc == 0 && t1 - t0 < seconds * 1e6);
    *rate = (double)done / ((t1 - t0) / 1e6);
    return rc;
}

/* The type's counters against what was sent, and its placement. */
static int finish(gpubridge_runtime_t *rt, uint64_t sent, ra_result_t *out)
{
    static const char *const names[] = {"auto", "host", "mapped", "staging"};
    gpubridge_telemetry_t t;
    if (gpubridge_telemetry(rt, "vecadd", &t) != GPUBRIDGE_OK)
        return -1;
    snprintf(out->placement, sizeof out->placement, "%s",
             t.placement <= GPUBRIDGE_PLACEMENT_STAGING ? names[t.placement] : "?");
    if (t.processed != sent || t.errors != 0) {
        fprintf(stderr, "bench: api: %llu processed (%llu errors), %llu sent\n", (unsigned long long)t.processed,
                (unsigned long long)t.errors, (unsigned long long)sent);
        return -1;
    }
    return 0;
}

int ra_bench(gb_mode mode, int window, int warmup, int iters, double seconds, ra_result_t *out)
{
    static const uint32_t sizes[4] = {1, 16, 256, 4096};
    memset(out, 0, sizeof *out);
    gpubridge_runtime_t *rt = api_runtime(mode, window);
    double *s = calloc((size_t)iters, sizeof *s);
    int rc = rt && s ? 0 : -1;
    uint64_t i = 0;
    for (; (int)i < warmup + iters && rc == 0; i++) {
        double t0 = rl_now_us();
        rc = request(rt, i, 1);
        if ((int)i >= warmup)
            s[i - (uint64_t)warmup] = rl_now_us() - t0;
    }
    if (rc == 0) {
        qsort(s, (size_t)iters, sizeof *s, rl_cmp_double);
        out->median_us = s[iters / 2];
        out->p99_us = s[(int)((double)iters * 0.99)];
    }
    for (int b = 0; b < 4 && rc == 0; b++)
        rc = batches(rt, sizes[b], seconds, &i, &out->batch_rate[b]);
    if (rc == 0)
        rc = finish(rt, i, out);
    free(s);
    gpubridge_runtime_destroy(&rt);
    return rc;
}
