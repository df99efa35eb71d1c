/* Hosting grains in-process with the embedding API (gpubridge/runtime.h): no
 * daemon, no ZeroMQ. Creates a runtime, registers embed.tally (tally.c,
 * defined in this program with GB_DEFINE_GRAIN), calls it, sends a burst
 * and polls its replies, reads the telemetry, and exits.
 *
 *   embed_example [auto|cpu|persistent|relaunch]     (default: auto)
 *
 * Exit status: 0 when every reply was right; 77 when a GPU mode was asked
 * for on a host without a GPU; 1 otherwise. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <gpubridge/runtime.h>

#include "tally.h"

#define BURST 1000

static int fail(const char *what, gpubridge_err e)
{
    fprintf(stderr, "embed: %s: %s: %s\n", what, gpubridge_strerror(e), gpubridge_last_error());
    return 1;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* 100 calls to grain 7, each waiting for its reply: totals 1..100. */
static int calls(gpubridge_runtime_t *rt)
{
    tally_reply_t r;
    gpubridge_reply_t rep;
    double t0 = now_us();
    for (int64_t i = 1; i <= 100; i++) {
        gpubridge_err e = gpubridge_call(rt, "embed.tally", 7, TALLY_ADD, &i, sizeof i, &rep, &r, sizeof r, 5000);
        if (e != GPUBRIDGE_OK)
            return fail("call", e);
        if (rep.status != GB_SLOT_OK || rep.len != sizeof r || r.total != i * (i + 1) / 2 || r.count != (uint64_t)i) {
            fprintf(stderr, "embed: call %" PRId64 ": status %u, total %" PRId64 " (want %" PRId64 ")\n", i,
                    rep.status, r.total, i * (i + 1) / 2);
            return 1;
        }
    }
    printf("100 calls: total %" PRId64 ", %.1f us a round trip\n", r.total, (now_us() - t0) / 100);
    /* A refused request: the grain's reply says why. */
    char text[128];
    uint8_t bad = 1;
    gpubridge_err e = gpubridge_call(rt, "embed.tally", 7, TALLY_ADD, &bad, 1, &rep, &r, sizeof r, 5000);
    if (e != GPUBRIDGE_OK || rep.status != GB_SLOT_HANDLER_ERROR || rep.aux != TALLY_E_RECORD)
        return fail("refused call", e);
    printf("a one-byte Add is refused: %s\n", gpubridge_reply_text(rt, &rep, text, sizeof text));
    return 0;
}

/* BURST requests to keys 0..99 sent at once, then their replies polled. */
static int burst(gpubridge_runtime_t *rt)
{
    int64_t one = 1;
    size_t sent = 0, got = 0;
    while (got < BURST) {
        while (sent < BURST) {
            gpubridge_err e = gpubridge_send(rt, "embed.tally", 1000 + sent % 100, TALLY_ADD, &one, sizeof one, sent, 0);
            if (e == GPUBRIDGE_ERR_FULL)
                break; /* the ring is full: take replies first */
            if (e != GPUBRIDGE_OK)
                return fail("send", e);
            sent++;
        }
        tally_reply_t r;
        gpubridge_reply_t rep;
        gpubridge_err e = gpubridge_poll(rt, &rep, &r, sizeof r, 5000);
        if (e != GPUBRIDGE_OK)
            return fail("poll", e);
        if (rep.status != GB_SLOT_OK || rep.key != 1000 + rep.corr % 100 || r.count != rep.corr / 100 + 1) {
            fprintf(stderr, "embed: reply %" PRIu64 " of key %" PRIu64 ": count %" PRIu64 "\n", rep.corr, rep.key,
                    r.count);
            return 1;
        }
        got++;
    }
    printf("%d requests sent and polled, every count in order\n", BURST);
    return 0;
}

/* want: the mode asked for (AUTO: any). */
static int report(gpubridge_runtime_t *rt, gpubridge_mode want)
{
    gpubridge_telemetry_t t;
    gpubridge_err e = gpubridge_telemetry(rt, "embed.tally", &t);
    if (e != GPUBRIDGE_OK)
        return fail("telemetry", e);
    printf("telemetry: mode %s, processed %" PRIu64 ", errors %" PRIu64 ", in flight %" PRIu64 ", grains %" PRIu64
           ", %u slots of %u bytes\n", gpubridge_mode_name(t.mode), t.processed, t.errors, t.in_flight,
           t.activations, t.capacity, t.slot_size);
    if (want != GPUBRIDGE_MODE_AUTO && t.mode != want) {
        fprintf(stderr, "embed: asked for mode %s, ran %s %s\n", gpubridge_mode_name(want),
                gpubridge_mode_name(t.mode), t.fallback_reason);
        return 1;
    }
    if (t.processed != 101 + BURST || t.errors != 1 || t.in_flight != 0 || t.activations != 101) {
        fprintf(stderr, "embed: telemetry does not add up\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int major, minor, patch;
    printf("gpubridge %s (headers %s)\n", gpubridge_version(&major, &minor, &patch), GPUBRIDGE_VERSION_STRING);
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode_name = argc > 1 ? argv[1] : "auto";
    o.flags = GPUBRIDGE_NO_CONFIG_GRAINS; /* only embed.tally: no built-in types */
    if (strcmp(o.mode_name, "persistent") == 0 || strcmp(o.mode_name, "relaunch") == 0)
        o.flags |= GPUBRIDGE_NO_CPU_FALLBACK;
    gpubridge_mode want;
    gpubridge_err e = gpubridge_mode_parse(o.mode_name, &want);
    if (e != GPUBRIDGE_OK)
        return fail("mode", e);
    gpubridge_runtime_t *rt = NULL;
    e = gpubridge_runtime_new(&o, &rt);
    if (e == GPUBRIDGE_ERR_NODEV) {
        printf("SKIP: %s\n", gpubridge_last_error());
        return 77;
    }
    if (e != GPUBRIDGE_OK)
        return fail("runtime", e);
    printf("runtime: mode %s, device %d\n", gpubridge_mode_name(gpubridge_runtime_mode(rt)),
           gpubridge_runtime_device(rt));
    int rc = 1;
    if ((e = gpubridge_register_grain(rt, &gb_grain_embed_tally)) != GPUBRIDGE_OK)
        fail("register", e);
    else if ((e = gpubridge_runtime_start(rt)) != GPUBRIDGE_OK)
        fail("start", e);
    else
        rc = calls(rt) || burst(rt) || report(rt, want);
    gpubridge_runtime_destroy(&rt);
    printf("%s\n", rc ? "FAIL" : "ok");
    return rc;
}
