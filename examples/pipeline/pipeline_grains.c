/* A three-stage pipeline of grains that message grains (docs/writing-grains.md,
 * "Messaging other grains"): a client sends text to pipeline.parse, whose
 * handler forwards the numbers to pipeline.square, which forwards their
 * squares to pipeline.sum, whose reply (this request's sum and the key's
 * running total) goes to the client with the client's correlation id.
 *
 *   "1 2 3" -> parse -> [1,2,3] -> square -> [1,4,9] -> sum -> {14, total}
 *
 * Raw payloads (no codec): the request is the text, the reply two
 * little-endian int64. Built as a grain library (gpubridge_add_grain_library):
 * with nvcc the handlers also run in the types' ring kernels. */
#include <stdio.h>
#include <string.h>

#include "gpubridge/grain.h"
#include "pipeline.h"

#define PARSE_TOO_MANY INT64_MIN

/* Parses signed decimal numbers separated by spaces, commas or newlines into
 * out (at most max). Returns how many, -1 - (offset of the bad byte), or
 * PARSE_TOO_MANY. */
GB_HD int64_t parse_numbers(const unsigned char *in, uint32_t len, int64_t *out, uint32_t max)
{
    int64_t n = 0;
    uint32_t i = 0;
    while (i < len) {
        const unsigned char c = in[i];
        if (c == ' ' || c == ',' || c == '\n' || c == '\t') {
            i++;
            continue;
        }
        const int neg = c == '-';
        uint32_t j = i + (uint32_t)neg, digits = 0;
        int64_t v = 0;
        for (; j < len && in[j] >= '0' && in[j] <= '9' && digits < 18; j++, digits++)
            v = v * 10 + (in[j] - '0');
        const int ends = j == len || in[j] == ' ' || in[j] == ',' || in[j] == '\n' || in[j] == '\t';
        if (digits == 0 || !ends)
            return -1 - (int64_t)j;
        if ((uint64_t)n >= max)
            return PARSE_TOO_MANY;
        out[n++] = neg ? -v : v;
        i = j;
    }
    return n;
}

/* A forward's cost in the out buffer besides its record: its header and the
 * buffer's trailer (gpubridge/mail.h). */
#define FORWARD_OVERHEAD (sizeof(gb_mail_msg_t) + sizeof(gb_mail_trailer_t))

/* pipeline.parse: text in, its numbers forwarded to pipeline.square. They
 * are built in out and forwarded from there, so a text holds at most
 * (out_cap - FORWARD_OVERHEAD) / 8 numbers (56 with the example's slot_size
 * of 512): more are refused STATUS_TOO_LARGE. */
GB_HD uint16_t parse_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                uint32_t *aux)
{
    (void)state;
    *out_len = 0;
    if (type != PIPELINE_MSG_TEXT)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    /* The numbers are built in out, then forwarded from there. */
    const uint32_t max = out_cap > FORWARD_OVERHEAD ? (uint32_t)(out_cap - FORWARD_OVERHEAD) / 8 : 0;
    const int64_t n = parse_numbers(in, in_len, (int64_t *)GB_ALIGNED(out), max);
    if (n == PARSE_TOO_MANY)
        return GB_SLOT_TOO_LARGE;
    if (n < 0) {
        *aux = (uint32_t)(-1 - n); /* where the text went wrong */
        return GB_SLOT_HANDLER_ERROR;
    }
    return gb_grain_forward(ctx, PIPELINE_PARSE_TO_SQUARE, gb_grain_self_key(ctx), PIPELINE_MSG_VALUES, out,
                            (uint32_t)n * 8);
}

/* pipeline.square: int64 values in, their squares forwarded to pipeline.sum. */
GB_HD uint16_t square_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                                 uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len,
                                 uint32_t *aux)
{
    (void)state, (void)aux;
    *out_len = 0;
    if (type != PIPELINE_MSG_VALUES)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if (in_len % 8 || in_len > out_cap)
        return GB_SLOT_TOO_LARGE;
    for (uint32_t i = 0; i < in_len / 8; i++) {
        int64_t v;
        memcpy(&v, in + 8 * i, 8);
        v *= v;
        memcpy(out + 8 * i, &v, 8);
    }
    return gb_grain_forward(ctx, PIPELINE_SQUARE_TO_SUM, gb_grain_self_key(ctx), PIPELINE_MSG_VALUES, out, in_len);
}

/* pipeline.sum: int64 values in; replies {their sum, the key's running total}. */
GB_HD uint16_t sum_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in,
                              uint32_t in_len, unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx;
    int64_t *total = (int64_t *)state, sum = 0;
    *out_len = 0;
    if (type != PIPELINE_MSG_VALUES && type != PIPELINE_MSG_TOTAL)
        return GB_SLOT_UNKNOWN_MESSAGE_TYPE;
    if (in_len % 8 || out_cap < 16)
        return GB_SLOT_TOO_LARGE;
    for (uint32_t i = 0; type == PIPELINE_MSG_VALUES && i < in_len / 8; i++) {
        int64_t v;
        memcpy(&v, in + 8 * i, 8);
        sum += v;
    }
    *total += sum;
    *aux = in_len / 8;
    memcpy(out, &sum, 8);
    memcpy(out + 8, total, 8);
    *out_len = 16;
    return GB_SLOT_OK;
}

/* The text a client gets when pipeline.parse refuses its text (host side):
 * aux holds the offset of the byte where the numbers went wrong. */
static const char *parse_error_text(const gb_slot_hdr_t *hdr, char *buf, size_t cap)
{
    if (hdr->status != GB_SLOT_HANDLER_ERROR)
        return NULL;
    snprintf(buf, cap,
             "not a number at offset %u of the text (from 0): pipeline.parse takes decimal int64s (at most 18 digits) "
             "separated by spaces, commas, tabs or newlines",
             (unsigned)hdr->aux);
    return buf;
}

static const gb_grain_msg_t parse_msgs[] = {{PIPELINE_MSG_TEXT, "Text"}};
static const gb_grain_hooks_t parse_hooks = {NULL /* raw payloads */, parse_error_text, NULL, NULL};
static const gb_grain_msg_t square_msgs[] = {{PIPELINE_MSG_VALUES, "Values"}};
static const gb_grain_msg_t sum_msgs[] = {{PIPELINE_MSG_VALUES, "Values"}, {PIPELINE_MSG_TOTAL, "Total"}};
/* Each stage names the next; the handler says PIPELINE_*_TO_* (its index). */
static const char *const parse_targets[] = {"pipeline.square"};
static const char *const square_targets[] = {"pipeline.sum"};

GB_DEFINE_GRAIN_TARGETS(pipeline_parse, "pipeline.parse", 8, 0, parse_on_message, parse_msgs, &parse_hooks,
                        parse_targets)
GB_DEFINE_GRAIN_TARGETS(pipeline_square, "pipeline.square", 8, 0, square_on_message, square_msgs, NULL,
                        square_targets)
GB_DEFINE_GRAIN(pipeline_sum, "pipeline.sum", 8, 0, sum_on_message, sum_msgs, NULL)
