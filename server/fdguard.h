/* Descriptors: every connection takes one (about three under --supervise).
 * At the limit (EMFILE) libzmq's listener would retry accept() in a loop:
 * the connection stays queued, the listening socket stays readable, the
 * process spins and new clients starve. So libzmq never gets there:
 *
 * - accept() and accept4() are wrapped: the daemon defines them
 *   (fdguard_accept.c, linked into the daemon only, not into gb_core: tests
 *   keep libc's and the sanitizers'), and its definitions come before libc's
 *   for libzmq and libmicrohttpd too. A connection accepted
 *   into one of the top `headroom` descriptors is closed at once with a reset
 *   and libzmq is told ECONNABORTED, which it skips: the queue drains, the
 *   client sees the connection refused and reconnects later. Descriptors are
 *   handed out lowest first, so that one test, made at every accept, keeps
 *   connections out of the headroom whatever the rate they come at.
 * - The headroom is left for what else needs descriptors (the supervisor's
 *   connection to the worker for each active client, libzmq's own, logs).
 * - gb_fdguard_check, called from the main loop, logs: a warning at 75% use,
 *   one when connections start being refused, one when they are taken again.
 *   It re-reads the soft limit, so that one raised with prlimit counts.
 * - The caller of accept never sees EMFILE: with no descriptor left at all,
 *   one kept in reserve takes the connection to refuse it.
 *
 * Connections already made are untouched; ipc endpoints are guarded alike. */
#ifndef GB_FDGUARD_H
#define GB_FDGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct gb_fdguard {
    int limit;     /* the soft limit, RLIMIT_NOFILE */
    int headroom;  /* top descriptors connections never take */
    int warn_at, resume_at;
    bool warned, refusing;
    uint64_t next_ns;
    uint64_t refused_seen; /* connections refused, at the last check */
    const char *who;       /* for the log: "bridge", "supervisor" */
} gb_fdguard_t;

/* Reads the limit and turns the guard on for this process (one per process). */
void gb_fdguard_init(gb_fdguard_t *g, const char *who);
/* Call often (it does its work at most every 100 ms). */
void gb_fdguard_check(gb_fdguard_t *g, uint64_t now_ns);
/* Whether n more descriptors may be opened for other things than accepted
 * connections (the supervisor's DEALER towards the worker takes two):
 * they may use half of the headroom. */
bool gb_fdguard_room(const gb_fdguard_t *g, int n);
/* accept4(2), guarded: what the daemon's accept() and accept4() call. */
int gb_fdguard_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags);
/* Connections refused so far in this process. */
uint64_t gb_fdguard_refused(void);
/* accept calls made while guarded; those that found no descriptor, not even
 * the reserve, to take the connection off the queue (it is tried again). */
uint64_t gb_fdguard_accepts(void);
uint64_t gb_fdguard_starved(void);
/* Logs the three counts (at exit). */
void gb_fdguard_report(const gb_fdguard_t *g);
/* Descriptors this process has open. */
int gb_fd_count(void);

#endif
