/* The built-in grain types' handlers, which run inside ring kernels and cpu
 * workers. Each is defined as a grain type (gpubridge/grain.h) in its
 * *_grain.c file, as a user's grain is.
 *
 * A handler is plain C marked GB_HD, so one source serves host and device:
 *
 *   uint16_t on_message(void *state, uint16_t type,
 *                       const unsigned char *in, uint32_t in_len,
 *                       unsigned char *out, uint32_t out_cap,
 *                       uint32_t *out_len, uint32_t *aux);
 *
 * (the dispatcher also passes a gb_grain_ctx_t: the arena and the team, team.h)
 *
 * `state` is this grain's (type, key) activation, zeroed on first use (virtual
 * activation, as in Orleans). The handler returns a gb_slot_status; the payload
 * it writes to `out` becomes the reply. Payloads are compact binary records
 * (the bridge decodes protobuf on the host): the kernel never parses protobuf.
 * Each grain's record layout is documented in its header. */
#ifndef GB_GRAIN_H
#define GB_GRAIN_H

#include "ring.h"

#include "echo.h"
#include "pagerank.h"
#include "team.h"
#include "vecadd.h"

#endif
