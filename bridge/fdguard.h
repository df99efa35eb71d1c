/* Descriptors: every connection takes one (about three under --supervise),
 * and at the limit (EMFILE) libzmq's listener retries accept() in a loop:
 * new clients starve and the process spins. The guard watches how many are
 * in use, warns as they near the limit, and near it holds off new TCP
 * connections (a drop-all socket filter on the listening sockets: the
 * kernel ignores new handshakes, clients retry; those already queued are
 * accepted and closed with a descriptor kept in reserve) until enough close.
 * Connections already made are untouched. ipc endpoints are not guarded. */
#ifndef GB_FDGUARD_H
#define GB_FDGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GB_FDGUARD_MAX 16
#define GB_FDGUARD_RESERVE 4

typedef struct gb_fdguard {
    int listeners[GB_FDGUARD_MAX]; /* TCP listening sockets of this process */
    size_t n;
    int reserve[GB_FDGUARD_RESERVE]; /* descriptors kept free to accept and close what is queued; -1: none */
    int limit, warn_at, refuse_at, resume_at;
    bool warned, refusing;
    uint64_t next_ns, next_count_ns;
    const char *who; /* for the log: "bridge", "supervisor" */
} gb_fdguard_t;

/* Call after the endpoints are bound: finds the TCP listening sockets. */
void gb_fdguard_init(gb_fdguard_t *g, const char *who);
/* Call often (it does its work at most every 100 ms). */
void gb_fdguard_check(gb_fdguard_t *g, uint64_t now_ns);
/* Descriptors this process has open. */
int gb_fd_count(void);

#endif
