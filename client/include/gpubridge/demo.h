/* gpubridge/demo.h: typed helpers for the demo grain types of gpubridge,
 * vecadd and echo (grains/vecadd/vecadd.proto, grains/echo/echo.proto), on
 * top of <gpubridge/client.h>. Other grain types use gbc_call / gbc_send with
 * their own protobuf messages. */
#ifndef GPUBRIDGE_DEMO_H
#define GPUBRIDGE_DEMO_H

#include "gpubridge/client.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gbc_vecadd_op {
    GBC_VECADD_ADD = 0,
    GBC_VECADD_SUB = 1,
    GBC_VECADD_MUL = 2,
    GBC_VECADD_DIV = 3
} gbc_vecadd_op;

/* result[i] = a[i] op b[i] for i < n, computed by grain ("vecadd", key);
 * division is IEEE 754 (x/0 is +-inf). a, b, result may be NULL when n is 0.
 * A reply of the wrong length is GBC_ERR_PROTO. The bridge's max_message_size
 * bounds n (1 MiB: n up to about 131,000; vectors past a slot go out of line;
 * a larger frame is STATUS_TOO_LARGE). */
GBC_API gbc_err gbc_vecadd(gbc_client_t *c, uint64_t key, gbc_vecadd_op op,
                           const float *a, const float *b, size_t n, float *result,
                           int timeout_ms);
/* The same, pipelined: gbc_vecadd_send queues it (see gbc_send);
 * gbc_vecadd_result decodes a polled OK reply into result[n]. */
GBC_API gbc_err gbc_vecadd_send(gbc_client_t *c, uint64_t key, gbc_vecadd_op op,
                                const float *a, const float *b, size_t n,
                                uint64_t *corr_out);
GBC_API gbc_err gbc_vecadd_result(const gbc_reply_t *reply, float *result, size_t n);

typedef struct gbc_echo_result {
    uint64_t sequence;       /* the request's sequence number, echoed */
    uint64_t grain_count;    /* messages grain ("echo", key) has seen, this one included */
    uint64_t client_time_ns; /* CLOCK_MONOTONIC at send, echoed */
    uint64_t rtt_ns;         /* round trip: CLOCK_MONOTONIC at decode - client_time_ns */
    size_t data_len;         /* bytes echoed */
} gbc_echo_result_t;

/* Sends data (len bytes, NULL when 0) to grain ("echo", key) and checks
 * that it comes back unchanged (else GBC_ERR_PROTO). out may be NULL. */
GBC_API gbc_err gbc_echo(gbc_client_t *c, uint64_t key, const void *data, size_t len,
                         gbc_echo_result_t *out, int timeout_ms);
/* The same, pipelined; sequence numbers count per client from 1. */
GBC_API gbc_err gbc_echo_send(gbc_client_t *c, uint64_t key, const void *data,
                              size_t len, uint64_t *corr_out);
GBC_API gbc_err gbc_echo_result(const gbc_reply_t *reply, gbc_echo_result_t *out);

#ifdef __cplusplus
}
#endif
#endif
