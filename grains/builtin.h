/* The built-in grain types' handlers and records (echo.h, vecadd.h,
 * pagerank.h), for the codecs and tests that use them. Each type is defined
 * in its grains/<type>/<type>_grain.c with GB_DEFINE_GRAIN
 * (gpubridge/grain.h), as a user's grain is, on a handler of the SDK's
 * signature:
 *
 *   GB_HD uint16_t on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type,
 *                             const unsigned char *in, uint32_t in_len,
 *                             unsigned char *out, uint32_t out_cap,
 *                             uint32_t *out_len, uint32_t *aux);
 *
 * which calls the function in the type's header: echo's and vecadd's take no
 * ctx (they use neither team nor arena), pagerank's does (team.h).
 *
 * `state` is this grain's (type, key) activation, zeroed on first use (virtual
 * activation, as in Orleans). The handler returns a gb_slot_status; the payload
 * it writes to `out` becomes the reply. Payloads are compact binary records
 * (the bridge decodes protobuf on the host): the kernel never parses protobuf.
 * Each grain's record layout is documented in its header. */
#ifndef GB_BUILTIN_H
#define GB_BUILTIN_H

#include "gpubridge/ring.h"

#include "echo.h"
#include "pagerank.h"
#include "gpubridge/team.h"
#include "vecadd.h"

#endif
