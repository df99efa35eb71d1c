/* Network helpers of the end-to-end tests: a non-loopback address of this
 * host (a "remote" peer for control authority) and a free TCP port. */
#ifndef GB_E2E_NET_H
#define GB_E2E_NET_H

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "e2e_harness.h"

/* The first IPv4 address of this host that is not loopback, or 0. */
static inline int remote_address(char *out, size_t cap)
{
    struct ifaddrs *ifs, *i;
    int found = 0;
    if (getifaddrs(&ifs) != 0)
        return 0;
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127)
            continue;
        found = inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)cap) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

/* A TCP port that was free a moment ago. */
static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    socklen_t l = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    close(fd);
    return ntohs(a.sin_port);
}

#endif
