/* Load for the ring benchmark: requests, replies, streaming and drains (see
 * ring_load.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ring_load.h"
#include "vecadd.h"

double rl_now_us(void) { return (double)gb_now_ns() / 1e3; }

int rl_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

uint64_t rl_keys = 4096; /* distinct grain keys the requests cycle over */

/* A 64-byte slot's vecadd request: op add, n = 3. */
void rl_fill_request(gb_slot_hdr_t *s, uint64_t i)
{
    uint32_t op = GB_VECADD_ADD, n = 3;
    float ab[6] = {(float)(i & 1023), 1, 2, 0.5f, 0.25f, 0.125f};
    unsigned char *p = gb_slot_payload(s);
    memcpy(p, &op, 4);
    memcpy(p + 4, &n, 4);
    memcpy(p + 8, ab, sizeof ab);
    s->key = i % rl_keys;
    s->corr = i;
    s->type = GB_VECADD_MSG_REQUEST;
    s->len = gb_vecadd_request_len(3);
}

int rl_check_reply(const gb_slot_hdr_t *r, uint64_t i)
{
    float res[3];
    memcpy(res, (const unsigned char *)r + GB_SLOT_HDR_SIZE, sizeof res);
    return r->corr == i && r->status == GB_SLOT_OK && r->len == 12 && res[0] == (float)(i & 1023) + 0.5f &&
           res[1] == 1.25f && res[2] == 2.125f;
}

int rl_wait_reply(gb_rk_t *rk, uint64_t i)
{
    const gb_slot_hdr_t *r;
    double deadline = rl_now_us() + 5e6;
    while (!(r = gb_rk_peek(rk))) {
        if (gb_rk_poll(rk) != GB_OK || rl_now_us() > deadline) {
            fprintf(stderr, "bench: no reply for request %llu\n", (unsigned long long)i);
            return -1;
        }
    }
    int ok = rl_check_reply(r, i);
    gb_rk_consume(rk);
    if (!ok) {
        fprintf(stderr, "bench: wrong reply for request %llu\n", (unsigned long long)i);
        return -1;
    }
    return 0;
}


/* Streaming throughput, as libzmq's remote_thr and local_thr measure it: the
 * sender and the receiver are separate (here a producer thread and this
 * thread, as runtime.h allows). The producer publishes batches for `seconds`
 * as far as the ring has room; the receiver drains and checks every reply. */
typedef struct stream {
    gb_rk_t *rk;
    uint32_t batch;
    double seconds;
    uint64_t first;
    uint64_t sent; /* published so far (release; read by the receiver) */
    int done;      /* the producer has stopped (release) */
    double send_us; /* producer time in steps that published something */
    uint64_t publishes; /* those steps */
    double recv_us; /* receiver time in drains that found replies */
} stream_t;

/* One producer step: claims and fills up to a batch, publishes what it got.
 * Returns how many it published (0: no credit). */
static uint32_t stream_send(stream_t *S, uint64_t sent)
{
    uint32_t k = 0;
    gb_slot_hdr_t *slot;
    while (k < S->batch && (slot = gb_rk_claim(S->rk)))
        rl_fill_request(slot, sent + k++);
    if (k)
        gb_rk_publish(S->rk);
    return k;
}

static void *stream_producer(void *arg)
{
    stream_t *S = arg;
    uint64_t sent = S->first;
    double t0 = rl_now_us();
    double ts = t0;
    while (ts - t0 < S->seconds * 1e6 && !__atomic_load_n(&S->done, __ATOMIC_ACQUIRE)) {
        uint32_t k = stream_send(S, sent); /* 0: no credit until the receiver frees slots */
        double te = rl_now_us();
        sent += k;
        if (k) {
            __atomic_store_n(&S->sent, sent, __ATOMIC_RELEASE);
            S->send_us += te - ts;
            S->publishes++;
        }
        ts = te;
    }
    __atomic_store_n(&S->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* rl_stream_threads 2: a producer thread beside this one (machines with 4 or
 * more CPUs); 1: this thread alternates sending and receiving, which on a
 * 2-core machine beats three threads (cpu backend) on two cores. */
int rl_stream_threads = 1;

int rl_stream(gb_rk_t *rk, uint32_t batch, double seconds, uint64_t *ip, double *rate)
{
    stream_t S = {rk, batch, seconds, *ip, *ip, 0, 0, 0, 0};
    pthread_t producer;
    double t0 = rl_now_us(), t1 = t0, last_progress = t0;
    if (rl_stream_threads == 2 && pthread_create(&producer, NULL, stream_producer, &S) != 0) {
        fprintf(stderr, "bench: cannot start the producer thread\n");
        return -1;
    }
    uint64_t recvd = *ip;
    int rc = 0;
    for (;;) {
        t1 = rl_now_us();
        if (rl_stream_threads == 1) {
            if (t1 - t0 < seconds * 1e6) {
                uint32_t k = stream_send(&S, S.sent);
                S.sent += k;
                if (k) {
                    double te = rl_now_us();
                    S.send_us += te - t1;
                    S.publishes++;
                    t1 = te;
                }
            } else {
                S.done = 1;
            }
        }
        int done = __atomic_load_n(&S.done, __ATOMIC_ACQUIRE);
        if (done && recvd == __atomic_load_n(&S.sent, __ATOMIC_ACQUIRE))
            break;
        const gb_slot_hdr_t *r;
        uint64_t before = recvd;
        while ((r = gb_rk_peek(rk))) {
            if (!rl_check_reply(r, recvd)) {
                fprintf(stderr, "bench: wrong reply for request %llu (streaming)\n", (unsigned long long)recvd);
                rc = -1;
                break;
            }
            gb_rk_consume(rk);
            recvd++;
        }
        if (rc)
            break;
        if (recvd != before) {
            S.recv_us += rl_now_us() - t1;
            last_progress = t1;
        } else if (gb_rk_poll(rk) != GB_OK || t1 - last_progress > 5e6) {
            fprintf(stderr, "bench: streaming stalled at reply %llu of %llu\n", (unsigned long long)recvd,
                    (unsigned long long)__atomic_load_n(&S.sent, __ATOMIC_ACQUIRE));
            rc = -1;
            break;
        }
    }
    if (rl_stream_threads == 2) {
        __atomic_store_n(&S.done, 1, __ATOMIC_RELEASE);
        pthread_join(producer, NULL);
    }
    if (rc == 0 && recvd != S.sent) {
        fprintf(stderr, "bench: streaming ended with %llu replies of %llu\n", (unsigned long long)recvd,
                (unsigned long long)S.sent);
        rc = -1;
    }
    *rate = (double)(recvd - *ip) / ((t1 - t0) / 1e6);
    if (recvd > *ip)
        printf("host streaming %u: %.1f ns/msg producing (busy %.0f%% of the run, %.0f msgs a publish), "
               "%.1f ns/msg receiving (busy %.0f%%)\n",
               batch, S.send_us * 1e3 / (double)(recvd - *ip), 100 * S.send_us / (t1 - t0),
               S.publishes ? (double)(recvd - *ip) / (double)S.publishes : 0.0,
               S.recv_us * 1e3 / (double)(recvd - *ip), 100 * S.recv_us / (t1 - t0));
    *ip = recvd;
    return rc;
}

/* The kernel's own rate, with the host out of the way: `count` requests
 * (at most the ring's capacity) are written while the grain type is
 * deactivated (they stay queued), then it is activated and the host only
 * watches the processed counter until all are done; then every reply is
 * checked. What the host spends writing and reading slots is left out, as the
 * floor graph that moves 4096 slots leaves it out. Rate: the median of
 * `rounds` drains. */
int rl_drain(gb_rk_t *rk, uint64_t *ip, int rounds, uint32_t count, double *rate)
{
    double *r = calloc((size_t)rounds, sizeof *r);
    int rc = r ? 0 : -1;
    for (int k = 0; k < rounds && rc == 0; k++) {
        if (gb_rk_deactivate(rk, 2000) != GB_OK) {
            fprintf(stderr, "bench: drain: deactivate failed\n");
            rc = -1;
            break;
        }
        gb_rk_status_t st;
        gb_rk_status(rk, &st);
        const uint64_t start = st.processed, first = *ip;
        uint32_t n = 0;
        gb_slot_hdr_t *slot;
        while (n < count && (slot = gb_rk_claim(rk)))
            rl_fill_request(slot, first + n++);
        gb_rk_publish(rk);
        const double t0 = rl_now_us();
        if (gb_rk_activate(rk, 2000) != GB_OK) {
            fprintf(stderr, "bench: drain: activate failed\n");
            rc = -1;
            break;
        }
        double t1 = t0;
        do {
            if (gb_rk_poll(rk) != GB_OK || (t1 = rl_now_us()) - t0 > 5e6) {
                fprintf(stderr, "bench: drain: %llu of %u processed\n", (unsigned long long)(st.processed - start), n);
                rc = -1;
                break;
            }
            gb_rk_status(rk, &st);
        } while (st.processed - start < n);
        r[k] = (double)n / ((t1 - t0) / 1e6);
        for (uint32_t j = 0; j < n && rc == 0; j++)
            rc = rl_wait_reply(rk, first + j);
        *ip = first + n;
    }
    if (rc == 0) {
        qsort(r, (size_t)rounds, sizeof *r, rl_cmp_double);
        *rate = r[rounds / 2];
    }
    free(r);
    return rc;
}

