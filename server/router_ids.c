/* router_ids.c: unpredictable routing ids for the clients that set none
 * (router_ids.h). */
#include "router_ids.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void gbi_router_ids_seed(void)
{
    unsigned int seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        /* No entropy yet (early boot): the clock and pid still differ per start. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (unsigned int)ts.tv_nsec ^ (unsigned int)ts.tv_sec ^ ((unsigned int)getpid() << 16);
    }
    srand(seed);
}
