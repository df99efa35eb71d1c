/* fake_bridge.h: an in-process fake gpubridge for test_client (see
 * fake_bridge.c for what it answers). */
#ifndef GBC_FAKE_BRIDGE_H
#define GBC_FAKE_BRIDGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fake {
    char endpoint[128];
    void *ctx, *sock;
    pthread_t thread;
    atomic_int stop;
    atomic_int frames_envelope, frames_batch, envelopes, max_batch, max_frame, bad_order;
    uint64_t last_id;
    uint64_t echo_count[16];
} fake_t;

/* A fresh ipc endpoint name (unique in this process). */
void endpoint_name(char *buf, size_t len);
/* Starts a fake on endpoint (a fresh one when NULL); a CURVE server when
 * secret_key (Z85) is given. */
fake_t *fake_start(const char *endpoint, const char *secret_key);
/* Stops it, removes its ipc file, frees it, clears *pf. */
void fake_stop(fake_t **pf);

#endif
