/* The pipeline example's C client: sends text to pipeline.parse and gets the
 * answer from pipeline.sum, three grains later (pipeline_grains.c).
 *   pipeline_client ENDPOINT [TEXT]
 * With TEXT: prints the sum of the squares of its numbers. Without: checks
 * a few requests (the sum, the running total per key, the correlation ids of
 * pipelined requests, a parse error) and exits 0 when all hold. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpubridge/client.h>

#include "pipeline.h"

static int fails;
#define CHECK(cond, ...)                                                                                            \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
            fprintf(stderr, __VA_ARGS__);                                                                            \
            fputc('\n', stderr);                                                                                     \
            fails++;                                                                                                 \
        }                                                                                                            \
    } while (0)

/* One request to pipeline.parse; on success *sum and *total. Returns the status (-1: no reply). */
static int run(gbc_client_t *c, uint64_t key, const char *text, int64_t *sum, int64_t *total, char *why, size_t cap)
{
    gbc_reply_t r;
    gbc_err e = gbc_call(c, "pipeline.parse", key, PIPELINE_MSG_TEXT, text, strlen(text), &r, GBC_TIMEOUT_DEFAULT);
    if (e != GBC_OK && e != GBC_ERR_STATUS) {
        snprintf(why, cap, "%s", gbc_strerror(e));
        return -1;
    }
    int st = r.status;
    snprintf(why, cap, "%s", r.error ? r.error : "");
    if (st == GBC_STATUS_OK && r.payload_len == 16) {
        memcpy(sum, r.payload, 8);
        memcpy(total, (const char *)r.payload + 8, 8);
    } else if (st == GBC_STATUS_OK) {
        st = -2;
    }
    gbc_reply_clear(&r);
    return st;
}

/* Pipelined requests: each reply comes back with its own correlation id
 * and its own sum (request i sends "i", so its sum is i*i). */
static void pipelined(gbc_client_t *c, uint64_t key)
{
    enum { N = 200 };
    uint64_t corr[N + 1] = {0};
    char text[32];
    for (int i = 1; i <= N; i++) {
        snprintf(text, sizeof text, "%d", i);
        CHECK(gbc_send(c, "pipeline.parse", key + (uint64_t)i % 7, PIPELINE_MSG_TEXT, text, strlen(text),
                       &corr[i]) == GBC_OK, "send %d: %s", i, gbc_last_error());
    }
    for (int got = 0; got < N && !fails; got++) {
        gbc_reply_t r;
        gbc_err e = gbc_poll(c, &r, 30000);
        if (e != GBC_OK && e != GBC_ERR_STATUS) {
            CHECK(0, "no reply (%d of %d)", got, N);
            return;
        }
        int64_t sum = -1;
        if (r.payload_len == 16)
            memcpy(&sum, r.payload, 8);
        int i = 1;
        while (i <= N && corr[i] != r.correlation_id)
            i++;
        CHECK(i <= N, "a reply with correlation id %" PRIu64 " that no request had", r.correlation_id);
        CHECK(r.status == GBC_STATUS_OK && sum == (int64_t)i * i, "request %d: status %d, sum %" PRId64 " (%s)", i,
              r.status, sum, r.error ? r.error : "");
        if (i <= N)
            corr[i] = 0; /* each id answered once */
        gbc_reply_clear(&r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s ENDPOINT [TEXT]\n", argv[0]);
        return 2;
    }
    gbc_client_t *c;
    const char *ep = argv[1];
    if (gbc_client_new(&ep, 1, NULL, &c) != GBC_OK) {
        fprintf(stderr, "cannot connect to %s: %s\n", ep, gbc_last_error());
        return 1;
    }
    char why[512];
    int64_t sum = 0, total = 0;
    if (argc > 2) {
        int st = run(c, 1, argv[2], &sum, &total, why, sizeof why);
        if (st == GBC_STATUS_OK)
            printf("%" PRId64 "\n", sum);
        else
            fprintf(stderr, "%s: %s\n", gbc_status_name(st), why);
        gbc_client_destroy(&c);
        return st == GBC_STATUS_OK ? 0 : 1;
    }
    const uint64_t key = 4000 + (uint64_t)(rand() % 1000);
    CHECK(run(c, key, "1 2 3", &sum, &total, why, sizeof why) == GBC_STATUS_OK && sum == 14 && total == 14,
          "1 2 3: sum %" PRId64 " total %" PRId64 " %s", sum, total, why);
    CHECK(run(c, key, "-4,10", &sum, &total, why, sizeof why) == GBC_STATUS_OK && sum == 116 && total == 130,
          "-4,10: sum %" PRId64 " total %" PRId64 " %s", sum, total, why);
    int st = run(c, key, "1 2x", &sum, &total, why, sizeof why);
    CHECK(st == GBC_STATUS_HANDLER_ERROR && strstr(why, "not a number at offset 3"), "1 2x: status %d (%s)", st, why);
    /* 56 numbers fit parse's out buffer beside the forward's header; 57 and
     * 100 are valid texts that do not. */
    char many[201];
    for (int i = 0; i < 100; i++)
        memcpy(many + 2 * i, "1 ", 2);
    many[2 * 56 - 1] = '\0';
    CHECK(run(c, key, many, &sum, &total, why, sizeof why) == GBC_STATUS_OK && sum == 56 && total == 186,
          "56 numbers: sum %" PRId64 " total %" PRId64 " %s", sum, total, why);
    many[2 * 56 - 1] = ' ';
    many[2 * 57 - 1] = '\0';
    st = run(c, key, many, &sum, &total, why, sizeof why);
    CHECK(st == GBC_STATUS_TOO_LARGE, "57 numbers: status %d (%s)", st, why);
    many[2 * 57 - 1] = ' ';
    many[199] = '\0';
    st = run(c, key, many, &sum, &total, why, sizeof why);
    CHECK(st == GBC_STATUS_TOO_LARGE, "100 numbers: status %d (%s)", st, why);
    CHECK(run(c, key, "2", &sum, &total, why, sizeof why) == GBC_STATUS_OK && sum == 4 && total == 190,
          "2 after the refused texts: sum %" PRId64 " total %" PRId64 " %s", sum, total, why);
    pipelined(c, 9000);
    gbc_client_destroy(&c);
    if (fails)
        return 1;
    printf("PASS: pipeline from C\n");
    return 0;
}
