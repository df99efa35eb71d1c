/* The embedding API's runtime object (include/gpubridge/runtime.h), shared
 * by its two halves: api.c (lifecycle, registration, control, telemetry)
 * and api_msg.c (send, poll, call). Internal: never installed. */
#ifndef GBE_API_INTERNAL_H
#define GBE_API_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpubridge/runtime.h"

#include "config.h"
#include "engine.h"
#include "error.h"

/* The two top bits of a slot's correlation id: a gpubridge_call's request
 * (the rest is the call's number), or a one-way request (reply dropped). */
#define GBE_TAG_CALL (UINT64_C(1) << 63)
#define GBE_TAG_ONE_WAY (UINT64_C(1) << 62)

/* A reply taken from a ring, waiting for gpubridge_poll. */
typedef struct gbe_node {
    struct gbe_node *next;
    gpubridge_reply_t r;
    unsigned char payload[];
} gbe_node_t;

/* A gpubridge_call waiting for its reply: whoever drains it copies it here. */
typedef struct gbe_waiter {
    struct gbe_waiter *next;
    uint64_t corr;
    gpubridge_reply_t *reply;
    void *buf;
    size_t cap;
    int done;
    gpubridge_err err;
} gbe_waiter_t;

struct gpubridge_runtime {
    pthread_mutex_t lock; /* every call but destroy holds it, never while waiting */
    gb_config_t cfg;      /* the settings of every type; its libraries loaded */
    gb_mode mode;         /* never AUTO */
    int device;
    size_t n_served;
    char served[GB_MAX_GRAIN_TYPES][GB_NAME_LEN];
    gb_engine_t *engine; /* NULL until gpubridge_runtime_start */
    gbe_node_t *q_head, *q_tail;
    uint64_t q_len, q_max;
    gbe_waiter_t *waiters;
    uint64_t calls; /* gpubridge_call numbers */
};

/* Sets the calling thread's message (printf style) and returns code. */
gpubridge_err gbe_fail(gpubridge_err code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The public code of an internal one. */
gpubridge_err gbe_err_of(gb_err e);
/* The served type `type` with a ring kernel, or NULL with the error set
 * (*code): not started, unknown, without a ring kernel. Lock held. */
gb_engine_type_t *gbe_type(gpubridge_runtime_t *rt, const char *type, gpubridge_err *code);
/* Moves every ready reply out of the rings (to waiters or the queue) and
 * drives relaunches. Lock held. */
void gbe_drain(gpubridge_runtime_t *rt);
/* Frees the queued replies. */
void gbe_queue_free(gpubridge_runtime_t *rt);

#endif
