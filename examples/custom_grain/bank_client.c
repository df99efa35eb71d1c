/* The bank.account grain end to end, through the C client (raw payloads:
 * gbc_call with the message type and the record's bytes).
 *   bank_client ENDPOINT
 * Checks deposits, withdrawals and balances on one account, that a
 * withdrawal past the balance is refused with its reason, and that
 * thousands of concurrent deposits to one account lose no update. Exit 0
 * when all hold. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpubridge/client.h>

#include "bank.h"

#define TYPE "bank.account"
#define CLIENTS 4
#define PER_CLIENT 1000
#define WINDOW 128 /* requests in flight per client */

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

/* One request; fills *r (balance and ops) on success. Returns the status. */
static int call(gbc_client_t *c, uint64_t account, uint32_t type, int64_t amount, bank_reply_t *r, char *why,
                size_t cap)
{
    gbc_reply_t rep;
    gbc_err e = gbc_call(c, TYPE, account, type, &amount, type == BANK_BALANCE ? 0 : sizeof amount, &rep,
                         GBC_TIMEOUT_DEFAULT);
    if (e != GBC_OK && e != GBC_ERR_STATUS) {
        snprintf(why, cap, "%s", gbc_strerror(e));
        return -1;
    }
    int st = rep.status;
    snprintf(why, cap, "%s", rep.error ? rep.error : "");
    if (st == GBC_STATUS_OK && rep.payload_len == sizeof *r)
        memcpy(r, rep.payload, sizeof *r);
    else if (st == GBC_STATUS_OK)
        st = -2;
    gbc_reply_clear(&rep);
    return st;
}

static void basics(gbc_client_t *c)
{
    bank_reply_t r = {0, 0};
    char why[256];
    CHECK(call(c, 1, BANK_DEPOSIT, 100, &r, why, sizeof why) == GBC_STATUS_OK && r.balance == 100,
          "deposit 100: %s", why);
    CHECK(call(c, 1, BANK_WITHDRAW, 30, &r, why, sizeof why) == GBC_STATUS_OK && r.balance == 70,
          "withdraw 30: %s", why);
    int st = call(c, 1, BANK_WITHDRAW, 71, &r, why, sizeof why);
    CHECK(st == GBC_STATUS_HANDLER_ERROR, "withdraw 71 of 70: status %d", st);
    CHECK(strstr(why, "insufficient funds") != NULL, "withdraw 71 of 70: error text '%s'", why);
    CHECK(call(c, 1, BANK_BALANCE, 0, &r, why, sizeof why) == GBC_STATUS_OK && r.balance == 70 && r.ops == 2,
          "balance after the refusal: %" PRId64 " (ops %" PRIu64 ") %s", r.balance, r.ops, why);
    st = call(c, 1, BANK_DEPOSIT, -5, &r, why, sizeof why);
    CHECK(st == GBC_STATUS_HANDLER_ERROR && strstr(why, "greater than 0"), "deposit -5: %d '%s'", st, why);
    st = call(c, 2, 9, 1, &r, why, sizeof why);
    CHECK(st == GBC_STATUS_UNKNOWN_MESSAGE_TYPE && strstr(why, "Deposit is 1"), "message type 9: %d '%s'", st, why);
    CHECK(call(c, 2, BANK_BALANCE, 0, &r, why, sizeof why) == GBC_STATUS_OK && r.balance == 0,
          "a new account: %" PRId64, r.balance);
}

/* CLIENTS connections send PER_CLIENT deposits of 1 each to one account, up
 * to WINDOW in flight each; a BUSY refusal is sent again. Every deposit must
 * see its own balance: 1..N, each once. */
static void concurrent(const char *endpoint)
{
    const uint64_t account = 7;
    const int n = CLIENTS * PER_CLIENT;
    gbc_client_t *cl[CLIENTS] = {0};
    int sent[CLIENTS] = {0}, done[CLIENTS] = {0}, inflight[CLIENTS] = {0};
    unsigned char *seen = calloc((size_t)n + 1, 1);
    const int64_t one = 1;
    gbc_options_t opt;
    gbc_options_init(&opt);
    opt.timeout_ms = 60000; /* a slow (sanitized, loaded) bridge still answers */
    for (int k = 0; k < CLIENTS; k++)
        CHECK(gbc_client_new(&endpoint, 1, &opt, &cl[k]) == GBC_OK, "client %d", k);
    for (int busy = 0, left = n; left > 0 && !fails;) {
        for (int k = 0; k < CLIENTS; k++) {
            while (sent[k] < PER_CLIENT && inflight[k] < WINDOW) {
                if (gbc_send(cl[k], TYPE, account, BANK_DEPOSIT, &one, sizeof one, NULL) != GBC_OK)
                    break;
                sent[k]++, inflight[k]++;
            }
            gbc_reply_t r;
            gbc_err e = GBC_ERR_TIMEOUT;
            while (inflight[k] &&
                   ((e = gbc_poll(cl[k], &r, k == 0 ? 10 : GBC_TIMEOUT_NOWAIT)) == GBC_OK || e == GBC_ERR_STATUS)) {
                inflight[k]--;
                if (r.status == GBC_STATUS_BUSY) {
                    sent[k]--, busy++; /* refused before it ran: send it again */
                } else if (r.status == GBC_STATUS_OK && r.payload_len == sizeof(bank_reply_t)) {
                    bank_reply_t b;
                    memcpy(&b, r.payload, sizeof b);
                    CHECK(b.balance >= 1 && b.balance <= n && !seen[b.balance], "deposit saw balance %" PRId64,
                          b.balance);
                    if (b.balance >= 1 && b.balance <= n)
                        seen[b.balance] = 1;
                    done[k]++, left--;
                } else {
                    CHECK(0, "deposit: status %d (%s)", r.status, r.error ? r.error : "");
                }
                gbc_reply_clear(&r);
            }
            CHECK(e == GBC_OK || e == GBC_ERR_STATUS || e == GBC_ERR_TIMEOUT, "poll: %s (%s)", gbc_strerror(e),
                  gbc_last_error());
        }
        (void)busy;
    }
    bank_reply_t b = {0, 0};
    char why[256];
    CHECK(call(cl[0], account, BANK_BALANCE, 0, &b, why, sizeof why) == GBC_STATUS_OK, "balance: %s", why);
    CHECK(b.balance == n && b.ops == (uint64_t)n, "%d concurrent deposits of 1: balance %" PRId64 ", ops %" PRIu64,
          n, b.balance, b.ops);
    for (int k = 0; k < CLIENTS; k++)
        gbc_client_destroy(&cl[k]);
    free(seen);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s ENDPOINT\n", argv[0]);
        return 2;
    }
    const char *ep = argv[1];
    gbc_client_t *c = NULL;
    gbc_options_t opt;
    gbc_options_init(&opt);
    opt.timeout_ms = 60000;
    if (gbc_client_new(&ep, 1, &opt, &c) != GBC_OK) {
        fprintf(stderr, "cannot create a client for %s\n", ep);
        return 1;
    }
    basics(c);
    gbc_client_destroy(&c);
    if (!fails)
        concurrent(ep);
    if (fails)
        return 1;
    printf("PASS: bank.account (%d concurrent deposits to one account, none lost)\n", CLIENTS * PER_CLIENT);
    return 0;
}
