/* Load for the ring benchmark (bench_ring.c): 64-byte vecadd requests and
 * the check of their replies, streaming, and drains of a full ring. Every
 * reply is checked; a wrong or missing one is reported on stderr and makes the
 * call return -1. */
#ifndef GB_BENCH_RING_LOAD_H
#define GB_BENCH_RING_LOAD_H

#include <stdint.h>

#include "runtime.h"

extern uint64_t rl_keys;        /* distinct grain keys the requests cycle over (default 4096) */
extern int rl_stream_threads;   /* rl_stream: 1 or 2 host threads (see there) */

double rl_now_us(void);
int rl_cmp_double(const void *a, const void *b); /* for qsort */

/* Request i: op add, n = 3, key i % rl_keys, corr i. */
void rl_fill_request(gb_slot_hdr_t *s, uint64_t i);
/* 1 when r is request i's correct reply. */
int rl_check_reply(const gb_slot_hdr_t *r, uint64_t i);
/* Waits (up to 5 s) for the next reply, checks it is request i's, consumes it. */
int rl_wait_reply(gb_rk_t *rk, uint64_t i);

/* Streaming for `seconds` in batches of up to `batch` (see ring_load.c);
 * requests from *ip on, *ip advanced past the last reply; *rate in msg/s.
 * Prints where the host's time went. */
int rl_stream(gb_rk_t *rk, uint32_t batch, double seconds, uint64_t *ip, double *rate);
/* The kernel's own rate over `rounds` drains of `count` requests (see
 * ring_load.c); *rate is their median, in msg/s. */
int rl_drain(gb_rk_t *rk, uint64_t *ip, int rounds, uint32_t count, double *rate);

#endif
