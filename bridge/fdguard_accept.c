/* The daemon's accept() and accept4(): libzmq's and libmicrohttpd's calls
 * resolve to these (an executable's definitions come before libc's), which
 * guard them (fdguard.h). Only the daemon's executables link this file:
 * tests and tools that link gb_core keep libc's, and the sanitizers'.
 * Without _GNU_SOURCE glibc's accept() takes a plain struct sockaddr pointer
 * (not a transparent union), as these do. */
#undef _GNU_SOURCE
#define _DEFAULT_SOURCE 1
#include <sys/socket.h>

#include "fdguard.h"

int accept4(int fd, struct sockaddr *restrict addr, socklen_t *restrict len, int flags);

int accept4(int fd, struct sockaddr *restrict addr, socklen_t *restrict len, int flags)
{
    return gb_fdguard_accept(fd, addr, len, flags);
}

int accept(int fd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
    return gb_fdguard_accept(fd, addr, len, 0);
}
