/* router_ids.h: unpredictable routing ids for the clients that set none.
 *
 * A ROUTER names each peer that sets no ZMQ_ROUTING_ID 0x00 plus a 32-bit
 * counter, and libzmq 4.3 aborts the process (an assertion in
 * socket_base.cpp) when the id it generates is one that a client already
 * chose for itself. The counter starts at rand(), which nothing seeds: the
 * same value in every process, so a client could take the next ids in
 * advance and crash the bridge with the next plain client. Seeding rand()
 * from the kernel's random source before each ROUTER is made leaves an
 * attacker who holds k ids a chance of k in 2^32 per later connection. */
#ifndef GB_ROUTER_IDS_H
#define GB_ROUTER_IDS_H

/* Seeds rand() for the next ROUTER's id counter; call right before
 * zmq_socket(ZMQ_ROUTER). */
void gbi_router_ids_seed(void);

#endif
