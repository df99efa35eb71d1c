/* See fdguard.h. Without _GNU_SOURCE: glibc's accept() then takes a plain
 * struct sockaddr pointer (not a transparent union), as the wrappers do. */
#undef _GNU_SOURCE
#define _DEFAULT_SOURCE 1
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

int accept4(int fd, struct sockaddr *restrict addr, socklen_t *restrict len, int flags);

/* Process-wide: the wrappers run in libzmq's I/O threads. */
static atomic_int g_cap;          /* descriptors from here up are not for connections; 0: no guard */
static atomic_int g_reserve = -1; /* kept open to refuse a connection when none is left */
static atomic_uint_least64_t g_refused;

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

static int guarded_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int c = (int)syscall(SYS_accept4, fd, addr, len, flags);
    const int cap = atomic_load_explicit(&g_cap, memory_order_relaxed);
    if (cap <= 0)
        return c;
    if (c >= cap)
        return refuse(c); /* every descriptor below it is in use */
    if (c < 0 && (errno == EMFILE || errno == ENFILE)) {
        /* Something else took the headroom: the queued connection would keep
         * the listener readable, so refuse it with the reserve's descriptor. */
        const int err = errno;
        int r = atomic_exchange(&g_reserve, -1);
        if (r < 0) {
            errno = err;
            return -1;
        }
        close(r);
        c = (int)syscall(SYS_accept4, fd, NULL, NULL, flags);
        const int err2 = errno;
        if (c >= 0)
            refuse(c);
        reserve_refill();
        errno = c >= 0 ? ECONNABORTED : err2;
        return -1;
    }
    return c;
}

int accept4(int fd, struct sockaddr *restrict addr, socklen_t *restrict len, int flags)
{
    return guarded_accept(fd, addr, len, flags);
}

int accept(int fd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
    return guarded_accept(fd, addr, len, 0);
}

void gb_fdguard_init(gb_fdguard_t *g, const char *who)
{
    memset(g, 0, sizeof *g);
    g->who = who;
    struct rlimit rl;
    g->limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 30) ? (int)rl.rlim_cur : 1 << 30;
    g->headroom = g->limit / 16 > 32 ? g->limit / 16 : 32;
    if (g->headroom > g->limit / 2)
        g->headroom = g->limit / 2;
    g->warn_at = g->limit - g->limit / 4;
    g->resume_at = g->limit - g->headroom - g->headroom / 2;
    reserve_refill();
    atomic_store(&g_cap, g->limit - g->headroom);
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
