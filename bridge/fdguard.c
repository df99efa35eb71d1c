/* See fdguard.h. */
#include "fdguard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

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

void gb_fdguard_init(gb_fdguard_t *g, const char *who)
{
    memset(g, 0, sizeof *g);
    g->who = who;
    for (int i = 0; i < GB_FDGUARD_RESERVE; i++)
        g->reserve[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct rlimit rl;
    g->limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 30) ? (int)rl.rlim_cur : 1 << 30;
    int margin = g->limit / 16 > 16 ? g->limit / 16 : 16;
    g->warn_at = g->limit - g->limit / 4;
    g->refuse_at = g->limit - margin;
    g->resume_at = g->refuse_at - margin;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && g->n < GB_FDGUARD_MAX) {
        int fd = atoi(e->d_name), listening = 0, domain = 0;
        socklen_t len = sizeof listening, dlen = sizeof domain;
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening &&
            getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) == 0 && (domain == AF_INET || domain == AF_INET6)) {
            /* drain_queued must never block; libzmq takes EAGAIN from accept() in its stride */
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            g->listeners[g->n++] = fd;
        }
    }
    closedir(d);
}

/* The lowest free descriptor: all below it are in use (descriptors are
 * handed out lowest first, so it reaches the limit only when all are). */
static int lowest_free(const gb_fdguard_t *g)
{
    int fd = g->reserve[0] >= 0 ? fcntl(g->reserve[0], F_DUPFD_CLOEXEC, 0) : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == EMFILE ? 1 << 30 : 0;
    close(fd);
    return fd;
}

static void set_refusing(gb_fdguard_t *g, bool on)
{
    struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_fprog prog = {1, &drop};
    int dummy = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (on)
            setsockopt(g->listeners[i], SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
        else
            setsockopt(g->listeners[i], SOL_SOCKET, SO_DETACH_FILTER, &dummy, sizeof dummy);
    }
    g->refusing = on;
}

/* Connections that completed before the filter sat in the listeners'
 * queues keep them readable, and libzmq retrying accept() at EMFILE spins:
 * take them with the reserve descriptors and close them (their clients
 * reconnect later). libzmq's own accept may take a freed descriptor first:
 * several reserves, topped up at every check, keep one for the next drain. */
static void drain_queued(gb_fdguard_t *g)
{
    int freed = 0;
    for (int i = 0; i < GB_FDGUARD_RESERVE; i++)
        if (g->reserve[i] >= 0) {
            close(g->reserve[i]);
            g->reserve[i] = -1;
            freed++;
        }
    for (size_t i = 0; freed && i < g->n; i++) {
        int fd;
        while ((fd = accept4(g->listeners[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
            close(fd);
    }
    for (int i = 0; i < GB_FDGUARD_RESERVE; i++)
        g->reserve[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void gb_fdguard_check(gb_fdguard_t *g, uint64_t now_ns)
{
    if (now_ns < g->next_ns)
        return;
    g->next_ns = now_ns + 100000000ull;
    if (g->refusing) {
        drain_queued(g);
        if (now_ns < g->next_count_ns)
            return;
        g->next_count_ns = now_ns + 1000000000ull;
        int n = gb_fd_count();
        if (n >= 0 && n < g->resume_at) {
            set_refusing(g, false);
            g->warned = false;
            GB_INFO("%s: %d of %d descriptors in use: new connections are taken again", g->who, n, g->limit);
        }
        return;
    }
    int low = lowest_free(g);
    if (low >= g->refuse_at) {
        set_refusing(g, true);
        g->next_count_ns = now_ns + 1000000000ull;
        GB_WARN("%s: descriptors nearly exhausted (%d or more of %d in use): %s until some close; raise the hard "
                "limit (ulimit -Hn, LimitNOFILE=)", g->who, g->refuse_at, g->limit,
                g->n ? "new TCP connections are held off" : "no TCP endpoint to hold off");
        drain_queued(g);
    } else if (low >= g->warn_at && !g->warned) {
        g->warned = true;
        GB_WARN("%s: %d of %d descriptors in use (each connection takes one); new connections are held off "
                "past %d", g->who, gb_fd_count(), g->limit, g->refuse_at);
    } else if (low < g->warn_at - g->limit / 8) {
        g->warned = false;
    }
}
