/* zq_bytes.h: bytes of large reply frames each client has queued in ZeroMQ.
 *
 * A ROUTER's send high-water mark counts frames, not bytes: 32 frames of a
 * 1 MiB reply (64 MiB at the largest max_message_size) queue 32 MiB (2 GiB)
 * for a client that does not read, outside every bound the bridge keeps.
 * Frames up to GBI_ZQ_LARGE stay as they are (32 of them: 2 MiB); a larger
 * one goes to ZeroMQ only while the client's larger frames already there
 * hold less than GBI_ZQ_MAX bytes (or none: one frame always may), and
 * otherwise waits where the caller keeps what ZeroMQ would not take, under
 * its own bounds. ZeroMQ gives the bytes back as it writes them out: each
 * large frame is sent from a buffer of ours whose free function, called on
 * ZeroMQ's I/O thread, subtracts them.
 *
 * One thread sends (the server's, or the supervisor's); the counts are
 * atomics shared with ZeroMQ's I/O threads. */
#ifndef GB_ZQ_BYTES_H
#define GB_ZQ_BYTES_H

#include <stddef.h>
#include <stdint.h>

#define GBI_ZQ_LARGE (64u << 10)
#define GBI_ZQ_MAX (2u << 20)

typedef struct gbi_zq gbi_zq_t;

/* NULL when out of memory. */
gbi_zq_t *gbi_zq_new(void);
/* Frees the table; frames still queued keep their counts until ZeroMQ frees
 * them. Takes NULL; clears *zq. */
void gbi_zq_destroy(gbi_zq_t **zq);

/* Sends id, an empty delimiter when delim, and frame to ROUTER sock, none
 * blocking. 0: sent; 1: the client is gone (ROUTER_MANDATORY: nothing
 * sent); -1: not now (its queue is full, or its large frames hold
 * GBI_ZQ_MAX): nothing sent, keep the frame and try again later. */
int gbi_zq_send(gbi_zq_t *zq, void *sock, const uint8_t *id, size_t id_len, int delim, const void *frame,
                size_t len);

#endif
