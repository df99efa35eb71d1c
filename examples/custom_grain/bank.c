/* The bank.account grain type: the handler and its one GB_DEFINE_GRAIN. */
#include <stdio.h>
#include <string.h>

#include <gpubridge/grain.h>

#include "bank.h"

/* Runs on the GPU (in the type's ring kernel) and on the host (cpu mode).
 * One account's messages run one at a time, in order (turn semantics): no
 * lock, no atomic, and no deposit is lost however many arrive at once. */
GB_HD uint16_t bank_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                               uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                               uint32_t *aux)
{
    (void)ctx;
    bank_state_t *acct = (bank_state_t *)state;
    int64_t amount = 0;
    *out_len = 0;
    if (type != BANK_DEPOSIT && type != BANK_WITHDRAW && type != BANK_BALANCE)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if (out_cap < sizeof(bank_reply_t))
        return GB_SLOT_TOO_LARGE;
    if (type != BANK_BALANCE) {
        if (in_len != sizeof amount) {
            *aux = BANK_E_RECORD;
            return GB_SLOT_HANDLER_ERROR;
        }
        memcpy(&amount, in, sizeof amount);
        if (amount <= 0) {
            *aux = BANK_E_RECORD;
            return GB_SLOT_HANDLER_ERROR;
        }
    }
    if (type == BANK_DEPOSIT) {
        if (acct->balance > INT64_MAX - amount) {
            *aux = BANK_E_OVERFLOW;
            return GB_SLOT_HANDLER_ERROR;
        }
        acct->balance += amount;
        acct->ops++;
    } else if (type == BANK_WITHDRAW) {
        if (amount > acct->balance) {
            *aux = BANK_E_FUNDS; /* refused: the account is left as it was */
            return GB_SLOT_HANDLER_ERROR;
        }
        acct->balance -= amount;
        acct->ops++;
    }
    bank_reply_t r = {acct->balance, acct->ops};
    memcpy(out, &r, sizeof r);
    *out_len = sizeof r;
    return GB_SLOT_OK;
}

/* The text clients get with a refused request (host side). */
static const char *bank_error_text(const gb_slot_hdr_t *hdr, char *buf, size_t cap)
{
    if (hdr->status != GB_SLOT_HANDLER_ERROR)
        return NULL;
    switch (hdr->aux) {
    case BANK_E_FUNDS: snprintf(buf, cap, "insufficient funds: the withdrawal exceeds the balance"); return buf;
    case BANK_E_RECORD: snprintf(buf, cap, "the amount must be one int64 greater than 0"); return buf;
    case BANK_E_OVERFLOW: snprintf(buf, cap, "the deposit would overflow the balance"); return buf;
    default: return NULL;
    }
}

static const gb_grain_msg_t bank_msgs[] = {{BANK_DEPOSIT, "Deposit"}, {BANK_WITHDRAW, "Withdraw"},
                                           {BANK_BALANCE, "Balance"}};
static const gb_grain_hooks_t bank_hooks = {NULL /* raw payloads */, bank_error_text, NULL, NULL};

GB_DEFINE_GRAIN(bank_account, "bank.account", sizeof(bank_state_t), 0, bank_on_message, bank_msgs, &bank_hooks)
