/* See fdguard.h. The accept() and accept4() the daemon defines are in
 * fdguard_accept.c, linked into the daemon only. */
#include "fdguard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

/* Process-wide: the wrappers run in libzmq's I/O threads. */
static atomic_int g_cap;          /* descriptors from here up are not for connections; 0: no guard */
static atomic_int g_reserve = -1; /* kept open to refuse a connection when none is left */
static atomic_uint_least64_t g_refused;
static atomic_uint_least64_t g_accepts; /* accept calls while guarded: a spin makes millions */
static atomic_uint_least64_t g_starved; /* calls that left a connection queued: no descriptor at all */

int gb_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

uint64_t gb_fdguard_refused(void)
{
    return atomic_load_explicit(&g_refused, memory_order_relaxed);
}

/* Closes an accepted connection with a reset (the client sees it refused at
 * once and reconnects later); libzmq skips ECONNABORTED and accepts the next. */
static int refuse(int c)
{
    struct linger lg = {1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(c);
    atomic_fetch_add_explicit(&g_refused, 1, memory_order_relaxed);
    errno = ECONNABORTED;
    return -1;
}

static void reserve_refill(void)
{
    if (atomic_load(&g_reserve) >= 0)
        return;
    int r = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int none = -1;
    if (r >= 0 && !atomic_compare_exchange_strong(&g_reserve, &none, r))
        close(r);
}

int gb_fdguard_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int c = (int)syscall(SYS_accept4, fd, addr, len, flags);
    const int cap = atomic_load_explicit(&g_cap, memory_order_relaxed);
    if (cap <= 0)
        return c;
    atomic_fetch_add_explicit(&g_accepts, 1, memory_order_relaxed);
    if (c >= cap)
        return refuse(c); /* every descriptor below it is in use */
    if (c < 0 && (errno == EMFILE || errno == ENFILE)) {
        /* Something else took the headroom: the queued connection would keep
         * the listener readable, so refuse it with the reserve's descriptor.
         * The caller never sees EMFILE: with the reserve gone too (taken by
         * another thread), the connection stays queued for the next call. */
        int r = atomic_exchange(&g_reserve, -1), err = EMFILE;
        if (r >= 0) {
            close(r);
            c = (int)syscall(SYS_accept4, fd, NULL, NULL, flags);
            err = c >= 0 ? ECONNABORTED : errno; /* EAGAIN: nothing was queued */
            if (c >= 0)
                refuse(c);
            reserve_refill();
        }
        if (err == EMFILE || err == ENFILE) {
            atomic_fetch_add_explicit(&g_starved, 1, memory_order_relaxed);
            err = ECONNABORTED;
        }
        errno = err;
        return -1;
    }
    return c;
}

/* The share of the limit connections never take; the rest from here. */
static void set_limit(gb_fdguard_t *g, int limit)
{
    g->limit = limit;
    g->headroom = g->limit / 16 > 32 ? g->limit / 16 : 32;
    if (g->headroom > g->limit / 2)
        g->headroom = g->limit / 2;
    g->warn_at = g->limit - g->limit / 4;
    g->resume_at = g->limit - g->headroom - g->headroom / 2;
    atomic_store(&g_cap, g->limit - g->headroom);
}

static int soft_limit(void)
{
    struct rlimit rl;
    return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 30) ? (int)rl.rlim_cur : 1 << 30;
}

void gb_fdguard_init(gb_fdguard_t *g, const char *who)
{
    memset(g, 0, sizeof *g);
    g->who = who;
    reserve_refill();
    set_limit(g, soft_limit());
}

/* The lowest free descriptor: all below it are in use (descriptors are
 * handed out lowest first, so it reaches the limit only when all are). */
static int lowest_free(int limit)
{
    const int r = atomic_load(&g_reserve);
    int fd = r >= 0 ? fcntl(r, F_DUPFD_CLOEXEC, 0) : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == EMFILE || errno == ENFILE ? limit : 0;
    close(fd);
    return fd;
}

bool gb_fdguard_room(const gb_fdguard_t *g, int n)
{
    return g->limit <= 0 || lowest_free(g->limit) + n <= g->limit - g->headroom / 2;
}

void gb_fdguard_check(gb_fdguard_t *g, uint64_t now_ns)
{
    if (g->limit <= 0 || now_ns < g->next_ns)
        return;
    g->next_ns = now_ns + 100000000ull;
    const int limit = soft_limit(); /* raised meanwhile (prlimit): connections may take more */
    if (limit != g->limit) {
        set_limit(g, limit);
        GB_INFO("%s: descriptor limit now %d: new connections are refused past %d", g->who, limit,
                limit - g->headroom);
    }
    reserve_refill();
    const int low = lowest_free(g->limit), cap = g->limit - g->headroom;
    const uint64_t refused = gb_fdguard_refused();
    if (!g->refusing && (refused > g->refused_seen || low >= cap)) {
        g->refusing = true;
        GB_WARN("%s: descriptors nearly exhausted (%d of %d in use): new connections are refused until some "
                "close; raise the limit (ulimit -Hn, LimitNOFILE=)", g->who, gb_fd_count(), g->limit);
    } else if (g->refusing && low < g->resume_at && refused == g->refused_seen) {
        /* well below the headroom, and none refused since the last check */
        g->refusing = g->warned = false;
        GB_INFO("%s: %d of %d descriptors in use: new connections are taken again", g->who, gb_fd_count(),
                g->limit);
    } else if (!g->refusing && !g->warned && low >= g->warn_at) {
        g->warned = true;
        GB_WARN("%s: %d of %d descriptors in use (each connection takes one); new connections are refused "
                "past %d", g->who, gb_fd_count(), g->limit, cap);
    } else if (low < g->warn_at - g->limit / 8) {
        g->warned = false;
    }
    g->refused_seen = refused;
}

uint64_t gb_fdguard_accepts(void)
{
    return atomic_load_explicit(&g_accepts, memory_order_relaxed);
}

uint64_t gb_fdguard_starved(void)
{
    return atomic_load_explicit(&g_starved, memory_order_relaxed);
}

void gb_fdguard_report(const gb_fdguard_t *g)
{
    if (g->limit > 0)
        GB_INFO("%s: descriptor guard: %llu accept() call(s), %llu connection(s) refused, %llu found no "
                "descriptor to refuse with", g->who, (unsigned long long)gb_fdguard_accepts(),
                (unsigned long long)gb_fdguard_refused(), (unsigned long long)gb_fdguard_starved());
}
