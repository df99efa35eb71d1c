/* bank.account: a grain type per account key, built out of tree against an
 * installed gpubridge (see CMakeLists.txt and docs/writing-grains.md).
 *
 * Raw payloads: the request's bytes are the record below, the reply's bytes
 * the reply record; no codec. All fields little-endian.
 *   BANK_DEPOSIT  (1): int64 amount (> 0)          reply: bank_reply_t
 *   BANK_WITHDRAW (2): int64 amount (> 0)          reply: bank_reply_t, or
 *                      refused (status HANDLER_ERROR, aux BANK_E_FUNDS) when
 *                      amount exceeds the balance: nothing changes
 *   BANK_BALANCE  (3): empty                       reply: bank_reply_t
 * Shared by the grain (bank.c) and its clients (bank_client.c). */
#ifndef BANK_H
#define BANK_H

#include <stdint.h>

enum { BANK_DEPOSIT = 1, BANK_WITHDRAW = 2, BANK_BALANCE = 3 };
/* The aux of a refused request. */
enum { BANK_E_RECORD = 1, BANK_E_FUNDS = 2, BANK_E_OVERFLOW = 3 };

/* One account: 16 bytes (a state of up to 16 bytes stays in registers while
 * the handler runs on the GPU). */
typedef struct bank_state {
    int64_t balance;
    uint64_t ops; /* deposits and withdrawals applied */
} bank_state_t;

typedef struct bank_reply {
    int64_t balance;
    uint64_t ops;
} bank_reply_t;

#endif
