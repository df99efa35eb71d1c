/* The descriptor guard (fdguard.h) at the accept() libzmq calls (the
 * daemon's accept() and accept4() call gb_fdguard_accept): under a soft
 * limit of 128, a connection that would take one of the top descriptors is
 * refused (reset) and accept() says ECONNABORTED, which libzmq skips; with no
 * descriptor left at all (EMFILE) the queued connection is still taken off
 * the queue and refused, with the descriptor kept in reserve. Either way the
 * listening socket does not stay readable, which is what made libzmq spin.
 * The caller never sees EMFILE, and a limit raised later is taken. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "fdguard.h"

#define LIMIT 128

static int fillers[LIMIT], n_fillers;

static int listener(struct sockaddr_in *addr)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    *addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof *addr;
    assert_int_equal(bind(l, (struct sockaddr *)addr, sizeof *addr), 0);
    assert_int_equal(listen(l, 16), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)addr, &len), 0);
    return l;
}

/* A client connection: complete (queued on the listener) when it returns. */
static int client(const struct sockaddr_in *addr)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    assert_int_equal(connect(c, (const struct sockaddr *)addr, sizeof *addr), 0);
    return c;
}

/* Opens descriptors until the lowest free one is `upto` (or none is left). */
static void fill(int upto)
{
    for (;;) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            assert_int_equal(errno, EMFILE);
            return;
        }
        fillers[n_fillers++] = fd;
        if (fd + 1 >= upto)
            return;
    }
}

static void unfill(void)
{
    while (n_fillers)
        close(fillers[--n_fillers]);
}

/* The client end learns of the refusal: a reset (or end of stream). */
static void assert_refused(int c)
{
    struct pollfd p = {c, POLLIN, 0};
    assert_int_equal(poll(&p, 1, -1), 1);
    char b;
    ssize_t n = read(c, &b, 1);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    close(c);
}

static void test_accept_guarded(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(rl.rlim_max >= LIMIT);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &(struct rlimit){LIMIT, rl.rlim_max}), 0);
    gb_fdguard_t g;
    gb_fdguard_init(&g, "test");
    assert_int_equal(g.limit, LIMIT);
    const int cap = g.limit - g.headroom; /* 96: the top 32 are the headroom */
    struct sockaddr_in addr;
    int l = listener(&addr);

    /* Below the headroom: taken as usual. */
    int c = client(&addr);
    int a = gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(a >= 0 && a < cap);
    close(a);
    close(c);
    assert_true(gb_fdguard_room(&g, 2));

    /* Every descriptor below the headroom in use: refused, the queue empties. */
    c = client(&addr);
    fill(cap);
    const uint64_t refused = gb_fdguard_refused();
    errno = 0;
    assert_int_equal(gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC), -1);
    assert_int_equal(errno, ECONNABORTED);
    assert_int_equal(gb_fdguard_refused(), refused + 1);
    errno = 0;
    assert_int_equal(gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC), -1);
    assert_int_equal(errno, EAGAIN); /* nothing left queued: not readable */
    assert_refused(c);
    assert_true(gb_fdguard_room(&g, 2));

    /* None left at all (other uses took the headroom): refused all the same,
     * and the reserve is open again afterwards. */
    int c2 = client(&addr);
    fill(LIMIT);
    assert_false(gb_fdguard_room(&g, 2));
    errno = 0;
    assert_int_equal(gb_fdguard_accept(l, NULL, NULL, 0), -1);
    assert_int_equal(errno, ECONNABORTED);
    assert_int_equal(gb_fdguard_refused(), refused + 2);
    assert_true(open("/dev/null", O_RDONLY) < 0 && errno == EMFILE);
    errno = 0;
    assert_int_equal(gb_fdguard_accept(l, NULL, NULL, 0), -1);
    assert_int_equal(errno, EAGAIN);
    unfill();
    assert_refused(c2);

    /* Descriptors free again: connections are taken. */
    c = client(&addr);
    a = gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(a >= 0 && a < cap);
    close(a);
    close(c);
    close(l);
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* No descriptor at all, not even the reserve (none was free when the guard
 * started): the caller is told ECONNABORTED, not EMFILE, and the connection
 * stays queued until a descriptor frees up. Runs first: the reserve is
 * process-wide and opened at the first init. */
static void test_no_reserve(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(rl.rlim_max >= LIMIT);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &(struct rlimit){LIMIT, rl.rlim_max}), 0);
    struct sockaddr_in addr;
    int l = listener(&addr);
    int c = client(&addr);
    fill(LIMIT);
    gb_fdguard_t g;
    gb_fdguard_init(&g, "test");
    const uint64_t starved = gb_fdguard_starved();
    errno = 0;
    assert_int_equal(gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC), -1);
    assert_int_equal(errno, ECONNABORTED);
    assert_int_equal(gb_fdguard_starved(), starved + 1);
    unfill();
    int a = gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC); /* still queued: taken now */
    assert_true(a >= 0);
    close(a);
    close(c);
    close(l);
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* The soft limit raised while guarded (prlimit): the next check takes it, and
 * connections may take the descriptors it adds. */
static void test_limit_raised(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(rl.rlim_max >= 2 * LIMIT);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &(struct rlimit){LIMIT, rl.rlim_max}), 0);
    gb_fdguard_t g;
    gb_fdguard_init(&g, "test");
    const int cap = g.limit - g.headroom;
    struct sockaddr_in addr;
    int l = listener(&addr);
    int c = client(&addr);
    fill(cap);
    errno = 0;
    assert_int_equal(gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC), -1);
    assert_int_equal(errno, ECONNABORTED);
    assert_refused(c);

    assert_int_equal(setrlimit(RLIMIT_NOFILE, &(struct rlimit){2 * LIMIT, rl.rlim_max}), 0);
    gb_fdguard_check(&g, UINT64_MAX / 2);
    assert_int_equal(g.limit, 2 * LIMIT);
    c = client(&addr);
    int a = gb_fdguard_accept(l, NULL, NULL, SOCK_CLOEXEC);
    assert_int_equal(a, cap); /* the lowest free one, past the old cap */
    close(a);
    close(c);
    unfill();
    close(l);
    setrlimit(RLIMIT_NOFILE, &rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_reserve),
        cmocka_unit_test(test_limit_raised),
        cmocka_unit_test(test_accept_guarded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
