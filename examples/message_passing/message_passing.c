/* message_passing: the message-passing test (the seed's MessagePassingTest)
 * against a running bridge, through libgpubridge.
 *
 *   1. activate `vecadd`; the upstream cases: (1,2,3,4) op (10,20,30,40)
 *      for add, sub, mul and div, then vectors of 1,000 and 100,000 elements
 *      (--large), every element checked; vectors larger than a slot go out
 *      of line in the bridge, and lengths whose frame would pass the bridge's
 *      max_message_size are skipped with a note;
 *   2. --count requests of each op (add, sub, mul, div), one call at a time,
 *      every result checked bit for bit, round-trip latency of each;
 *   3. the same requests pipelined (gbc_vecadd_send / gbc_poll, in Batch
 *      frames), checked again;
 *   4. deactivate `vecadd` and send one request: the bridge must hold it
 *      (control.proto: kept, in order, answered after Activate); activate
 *      again: the held request and new ones must come back right;
 *   5. with --terminate, terminate `vecadd` (it then stays terminated until
 *      the bridge restarts its GPU side, so by default it is left running).
 * Operands are k/8 for integers |k| <= 1000, so sums, differences and
 * products are exact in float; quotients are compared with C's a / b (IEEE
 * single precision, correctly rounded on CPU and GPU alike).
 * Exit status: 0 only if every result was right; 1 otherwise; 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/client.h"
#include "gpubridge/demo.h"

#define PROG "message_passing"
#define MAX_LEN 1024
#define WINDOW 1024 /* pipelined requests in flight at most */

typedef struct tcase {
    gbc_vecadd_op op;
    float *a, *b, *want; /* len elements each */
} tcase_t;

static const char *const op_names[] = {"add", "sub", "mul", "div"};

static const char usage_text[] =
    "usage: " PROG " [OPTIONS]\n"
    "\n"
    "The message-passing test: vecadd add/sub/mul/div through a running bridge,\n"
    "every result checked, with round-trip latencies.\n"
    "\n"
    "  -e, --endpoint E   bridge endpoint (default tcp://127.0.0.1:5555)\n"
    "  -n, --count N      requests of each op (default 100)\n"
    "  -l, --length L     elements per vector of phases 2-4 (default 3: fits a 64-byte slot)\n"
    "      --large LIST   lengths of the large vectors, comma-separated (default 1000,100000;\n"
    "                     \"\" for none)\n"
    "  -k, --key K        grain key (default 7)\n"
    "  -s, --seed S       operand seed (default 1)\n"
    "  -t, --timeout MS   reply deadline (default 5000)\n"
    "      --terminate    terminate the vecadd type at the end\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 if every result was right, 1 otherwise, 2 usage error.\n";

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic operands from --seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static float operand(bool nonzero)
{
    int k = (int)(rng() % 2001) - 1000;
    if (nonzero && k == 0)
        k = 1;
    return (float)k / 8.0f;
}

static void make_case(tcase_t *t, gbc_vecadd_op op, size_t len)
{
    t->op = op;
    for (size_t j = 0; j < len; j++) {
        float a = operand(false), b = operand(op == GBC_VECADD_DIV);
        t->a[j] = a;
        t->b[j] = b;
        switch (op) {
        case GBC_VECADD_ADD: t->want[j] = a + b; break;
        case GBC_VECADD_SUB: t->want[j] = a - b; break;
        case GBC_VECADD_MUL: t->want[j] = a * b; break;
        case GBC_VECADD_DIV: t->want[j] = a / b; break;
        }
    }
}

/* Bit-for-bit equal (so -0 and 0 differ, and nothing is "close enough"). */
static bool check(const tcase_t *t, const float *got, size_t len, size_t idx, const char *phase)
{
    if (memcmp(got, t->want, len * sizeof *got) == 0)
        return true;
    for (size_t j = 0; j < len; j++)
        if (memcmp(&got[j], &t->want[j], sizeof *got) != 0) {
            fprintf(stderr, PROG ": %s request %zu (%s) element %zu: %.9g %s %.9g = %.9g, "
                    "bridge said %.9g\n", phase, idx, op_names[t->op], j, (double)t->a[j],
                    op_names[t->op], (double)t->b[j], (double)t->want[j], (double)got[j]);
            break;
        }
    return false;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

static bool parse_num(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || v > max)
        return false;
    *out = v;
    return true;
}

/* Phase 1: the upstream MessagePassingTest's cases, 4 elements. */
static bool upstream_cases(gbc_client_t *c, uint64_t key, int timeout_ms)
{
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    bool ok = true;
    for (int op = 0; op < 4; op++) {
        float want[4], got[4], vals[12];
        for (int j = 0; j < 4; j++)
            want[j] = op == 0 ? a[j] + b[j] : op == 1 ? a[j] - b[j] : op == 2 ? a[j] * b[j] : a[j] / b[j];
        tcase_t t = {.op = (gbc_vecadd_op)op, .a = vals, .b = vals + 4, .want = vals + 8};
        memcpy(t.a, a, sizeof a);
        memcpy(t.b, b, sizeof b);
        memcpy(t.want, want, sizeof want);
        if (gbc_vecadd(c, key, t.op, a, b, 4, got, timeout_ms) != GBC_OK) {
            fprintf(stderr, PROG ": upstream case %s: %s\n", op_names[op], gbc_last_error());
            ok = false;
        } else if (!check(&t, got, 4, (size_t)op, "upstream")) {
            ok = false;
        } else {
            printf("upstream %s: (1,2,3,4) %s (10,20,30,40) = (%g,%g,%g,%g)\n", op_names[op], op_names[op],
                   (double)got[0], (double)got[1], (double)got[2], (double)got[3]);
        }
    }
    return ok;
}

/* Phase 1, large vectors: every op at each length of `list`, every element
 * checked. Lengths whose frame would exceed max_message_size (when the
 * bridge says it) are skipped. */
static bool large_cases(gbc_client_t *c, uint64_t key, const char *list, uint32_t max_message_size,
                        int timeout_ms)
{
    bool ok = true;
    for (const char *p = list; *p;) {
        char *end;
        errno = 0;
        unsigned long n = strtoul(p, &end, 10);
        if (end == p || errno || n == 0 || n > 100000000ul) {
            fprintf(stderr, PROG ": bad --large list '%s'\n", list);
            return false;
        }
        p = *end == ',' ? end + 1 : end;
        if (max_message_size && 8.0 * (double)n + 256 > (double)max_message_size) {
            printf("large %lu: skipped (a frame of about %.0f bytes exceeds the bridge's max_message_size %u)\n",
                   n, 8.0 * (double)n + 64, max_message_size);
            continue;
        }
        float *vals = malloc(4 * n * sizeof *vals);
        if (!vals) {
            fprintf(stderr, PROG ": out of memory for %lu elements\n", n);
            return false;
        }
        for (int op = 0; op < 4; op++) {
            tcase_t t = {.a = vals, .b = vals + n, .want = vals + 2 * n};
            float *got = vals + 3 * n;
            make_case(&t, (gbc_vecadd_op)op, n);
            int64_t t0 = now_ns();
            if (gbc_vecadd(c, key, t.op, t.a, t.b, n, got, timeout_ms) != GBC_OK) {
                fprintf(stderr, PROG ": large %lu %s: %s\n", n, op_names[op], gbc_last_error());
                ok = false;
            } else if (check(&t, got, n, (size_t)op, "large")) {
                printf("large %lu %s: all %lu elements correct (%.1f ms)\n", n, op_names[op], n,
                       (double)(now_ns() - t0) / 1e6);
            } else {
                ok = false;
            }
        }
        free(vals);
    }
    return ok;
}

/* Phase 3: pipelined, at most WINDOW in flight; ids map back to cases. */
static size_t pipelined(gbc_client_t *c, uint64_t key, const tcase_t *cases, size_t n,
                        size_t len, int timeout_ms, double *rate)
{
    uint64_t *ids = calloc(n, sizeof *ids);
    float got[MAX_LEN];
    size_t sent = 0, done = 0, correct = 0;
    if (!ids)
        return 0;
    int64_t t0 = now_ns();
    while (done < n) {
        while (sent < n && sent - done < WINDOW) {
            gbc_err err = gbc_vecadd_send(c, key, cases[sent].op, cases[sent].a, cases[sent].b,
                                          len, &ids[sent]);
            if (err == GBC_ERR_TIMEOUT)
                break; /* backpressure: read replies first */
            if (err) {
                fprintf(stderr, PROG ": pipelined send: %s\n", gbc_last_error());
                goto out;
            }
            sent++;
        }
        gbc_reply_t r;
        gbc_err err = gbc_poll(c, &r, timeout_ms);
        if (err != GBC_OK && err != GBC_ERR_STATUS) {
            fprintf(stderr, PROG ": pipelined poll (%zu of %zu answered): %s\n", done, n,
                    gbc_last_error());
            goto out;
        }
        done++;
        /* Ids are consecutive from the first one. */
        size_t idx = (size_t)(r.correlation_id - ids[0]);
        if (idx >= n || ids[idx] != r.correlation_id) {
            fprintf(stderr, PROG ": reply with unexpected id %llu\n",
                    (unsigned long long)r.correlation_id);
        } else if (gbc_vecadd_result(&r, got, len) != GBC_OK) {
            fprintf(stderr, PROG ": pipelined request %zu: %s\n", idx, gbc_last_error());
        } else if (check(&cases[idx], got, len, idx, "pipelined")) {
            correct++;
        }
        gbc_reply_clear(&r);
    }
out:
    *rate = (double)done / ((double)(now_ns() - t0) / 1e9);
    free(ids);
    return correct;
}

/* Phase 4: deactivate, one request, activate; true if all went right. */
static bool deactivate_cycle(gbc_client_t *c, uint64_t key, size_t len, int timeout_ms)
{
    gbc_grain_status_t s = GBC_GRAIN_STATUS_INIT;
    float got[MAX_LEN], vals[3 * MAX_LEN];
    tcase_t t = {.a = vals, .b = vals + len, .want = vals + 2 * len};
    make_case(&t, GBC_VECADD_ADD, len);
    if (gbc_ctl_deactivate(c, 0, "vecadd", &s, timeout_ms) != GBC_OK) {
        fprintf(stderr, PROG ": deactivate: %s\n", gbc_last_error());
        return false;
    }
    printf("deactivated: vecadd %s\n", gbc_grain_state_name(s.state));
    bool ok = s.state == GBC_GRAIN_STATE_INACTIVE;
    if (!ok)
        fprintf(stderr, PROG ": deactivate left vecadd %s\n", gbc_grain_state_name(s.state));
    uint64_t id;
    gbc_reply_t r = {0};
    bool held = false;
    if (gbc_vecadd_send(c, key, t.op, t.a, t.b, len, &id) != GBC_OK) {
        fprintf(stderr, PROG ": send while inactive: %s\n", gbc_last_error());
        ok = false;
    } else {
        gbc_err err = gbc_poll(c, &r, 300);
        if (err == GBC_ERR_TIMEOUT) {
            printf("while inactive: request held by the bridge\n");
            held = true;
        } else {
            fprintf(stderr, PROG ": while inactive: expected the request to be held, got %s "
                    "(%s)\n", gbc_strerror(err), err ? gbc_last_error() : "an answer");
            ok = false;
        }
        gbc_reply_clear(&r);
    }
    if (gbc_ctl_activate(c, 0, "vecadd", &s, timeout_ms) != GBC_OK) {
        fprintf(stderr, PROG ": re-activate: %s\n", gbc_last_error());
        return false;
    }
    printf("re-activated: vecadd %s\n", gbc_grain_state_name(s.state));
    if (held) {
        if (gbc_poll(c, &r, timeout_ms) != GBC_OK || r.correlation_id != id ||
            gbc_vecadd_result(&r, got, len) != GBC_OK || !check(&t, got, len, 0, "held")) {
            fprintf(stderr, PROG ": the held request: %s\n", gbc_last_error());
            ok = false;
        } else {
            printf("held request answered after re-activation, correct\n");
        }
        gbc_reply_clear(&r);
    }
    if (gbc_vecadd(c, key, t.op, t.a, t.b, len, got, timeout_ms) != GBC_OK ||
        !check(&t, got, len, 0, "after re-activation")) {
        fprintf(stderr, PROG ": request after re-activation: %s\n", gbc_last_error());
        ok = false;
    }
    return ok;
}

int main(int argc, char **argv)
{
    enum { OPT_TERMINATE = 256, OPT_LARGE };
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, 'e'}, {"count", required_argument, NULL, 'n'},
        {"length", required_argument, NULL, 'l'},   {"key", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 's'},     {"timeout", required_argument, NULL, 't'},
        {"terminate", no_argument, NULL, OPT_TERMINATE}, {"help", no_argument, NULL, 'h'},
        {"large", required_argument, NULL, OPT_LARGE},
        {NULL, 0, NULL, 0},
    };
    const char *endpoint = "tcp://127.0.0.1:5555", *large = "1000,100000";
    uint64_t count = 100, len = 3, key = 7, seed = 1, timeout = 5000, v;
    bool terminate = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "e:n:l:k:s:t:h", longopts, NULL)) != -1) {
        uint64_t *dst = NULL, max = UINT64_MAX;
        switch (ch) {
        case 'e': endpoint = optarg; continue;
        case 'n': dst = &count, max = 1000000; break;
        case 'l': dst = &len, max = MAX_LEN; break;
        case 'k': dst = &key; break;
        case 's': dst = &seed; break;
        case 't': dst = &timeout, max = 3600000; break;
        case OPT_TERMINATE: terminate = true; continue;
        case OPT_LARGE: large = optarg; continue;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fprintf(stderr, "(" PROG " --help for usage)\n"); return 2;
        }
        if (!parse_num(optarg, max, &v) || ((dst == &count || dst == &timeout) && v == 0)) {
            fprintf(stderr, PROG ": bad value '%s' for -%c (" PROG " --help for usage)\n",
                    optarg, ch);
            return 2;
        }
        *dst = v;
    }
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    int tmo = (int)timeout;
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t n = (size_t)count * 4;
    tcase_t *cases = malloc(n * sizeof *cases);
    float *vals = malloc((3 * n * len + 1) * sizeof *vals);
    int64_t *lat = malloc(n * sizeof *lat);
    if (!cases || !vals || !lat) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        float *p = vals + 3 * len * i;
        cases[i] = (tcase_t){.a = p, .b = p + len, .want = p + 2 * len};
        make_case(&cases[i], (gbc_vecadd_op)(i % 4), len);
    }

    gbc_options_t opt = {.timeout_ms = tmo};
    gbc_client_t *c = NULL;
    if (gbc_client_new(&endpoint, 1, &opt, &c) != GBC_OK) {
        fprintf(stderr, PROG ": %s\n", gbc_last_error());
        return 2;
    }
    int rc = 1;
    gbc_grain_status_t s = GBC_GRAIN_STATUS_INIT;
    if (gbc_ctl_activate(c, 0, "vecadd", &s, tmo) != GBC_OK) {
        fprintf(stderr, PROG ": activate vecadd: %s\n", gbc_last_error());
        goto out;
    }
    printf("activated: vecadd %s, mode %s, device %d, slot %u B, max_message_size %u B\n",
           gbc_grain_state_name(s.state), s.mode, (int)s.device, s.slot_size, s.max_message_size);

    /* Phase 1: the upstream cases and the large vectors. */
    bool upstream_ok = upstream_cases(c, key, tmo);
    upstream_ok = large_cases(c, key, large, s.max_message_size, tmo) && upstream_ok;

    /* Phase 2: one call at a time. */
    size_t correct = 0, failed_calls = 0;
    float got[MAX_LEN];
    for (size_t i = 0; i < n; i++) {
        int64_t t0 = now_ns();
        gbc_err err = gbc_vecadd(c, key, cases[i].op, cases[i].a, cases[i].b, len, got, tmo);
        lat[i] = now_ns() - t0;
        if (err) {
            if (failed_calls++ < 5)
                fprintf(stderr, PROG ": call %zu (%s): %s\n", i, op_names[cases[i].op],
                        gbc_last_error());
            if (err == GBC_ERR_CONNECT || err == GBC_ERR_AUTH)
                goto out; /* no bridge: no point in going on */
            continue;
        }
        correct += check(&cases[i], got, len, i, "call");
    }
    qsort(lat, n, sizeof *lat, cmp_i64);
    double med = (double)lat[n / 2] / 1e3, p99 = (double)lat[(n * 99) / 100] / 1e3;
    printf("calls: %zu/%zu correct; latency min %.1f us, median %.1f us, p99 %.1f us, "
           "max %.1f us\n", correct, n, (double)lat[0] / 1e3, med, p99,
           (double)lat[n - 1] / 1e3);

    /* Phase 3: pipelined. */
    double rate = 0;
    size_t correct_p = pipelined(c, key, cases, n, len, tmo, &rate);
    printf("pipelined: %zu/%zu correct, %.0f msg/s\n", correct_p, n, rate);

    /* Phase 4: deactivate and re-activate. */
    bool cycle_ok = deactivate_cycle(c, key, len, tmo);

    if (terminate) {
        if (gbc_ctl_terminate(c, 0, "vecadd", &s, tmo) != GBC_OK) {
            fprintf(stderr, PROG ": terminate: %s\n", gbc_last_error());
            cycle_ok = false;
        } else {
            printf("terminated: vecadd %s\n", gbc_grain_state_name(s.state));
        }
    }
    printf(PROG ": %zu/%zu correct, median %.1f us, p99 %.1f us (%zu calls, %zu pipelined%s%s)\n",
           correct + correct_p, 2 * n, med, p99, n, n, cycle_ok ? "" : "; deactivate cycle FAILED",
           upstream_ok ? "" : "; upstream or large cases FAILED");
    rc = correct + correct_p == 2 * n && cycle_ok && upstream_ok ? 0 : 1;
out:
    gbc_client_destroy(&c);
    free(cases);
    free(vals);
    free(lat);
    return rc;
}
