/* The grain types this process knows: the built-in ones and those of the
 * grain libraries the config names (gpubridge/grain.h). Each type is
 * registered once, under its name, and gets a handle (its "kind", 1..n) that
 * the runtime, server and codecs use from then on: the name is looked up
 * when a ring kernel is created, never on the hot path.
 *
 * Types are only added, never removed; registration takes a lock, lookups
 * by handle take none. */
#ifndef GB_GRAIN_REGISTRY_H
#define GB_GRAIN_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/grain.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_MAX_REGISTERED_GRAINS 64

/* Registers d (not copied: it must outlive the process's use of it, as a
 * loaded library's does). Returns its handle (> 0), or 0 with a sentence in
 * err: a wrong ABI, a bad name, state size or message type, a duplicate
 * name, a full registry. The built-in types are registered first. */
int gb_grain_register(const gb_grain_desc_t *d, char *err, size_t errlen);
/* The handle of the type named type; 0 when none has that name. */
int gb_grain_kind_of(const char *type);
/* The descriptor of handle kind, or NULL. */
const gb_grain_desc_t *gb_grain_get(int kind);
/* The first of kind's targets (grain types its handler sends to) that no
 * registered type is named, or NULL. */
const char *gb_grain_unknown_target(int kind);
/* Handles run 1..gb_grain_count(). */
int gb_grain_count(void);
/* Whether kind is a team grain type; its state bytes (a multiple of 8). */
int gb_grain_is_team(int kind);
/* A team type that runs on every device (GB_GRAIN_DEVICES). */
int gb_grain_spans_devices(int kind);
uint32_t gb_grain_state_size(int kind);

/* The built-in grain types (builtin_grains.c). */
extern const gb_grain_desc_t *const gb_builtin_grains[];
extern const size_t gb_n_builtin_grains;

#ifdef __cplusplus
}
#endif
#endif
