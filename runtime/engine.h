/* The engine: every configured grain type's ring kernel on this host, in the
 * selected mode. The server feeds and drains them; the engine owns them.
 * Grain types in the config without a handler in this build are listed as
 * unavailable (requests to them get STATUS_UNKNOWN_GRAIN_TYPE with a reason). */
#ifndef GB_ENGINE_H
#define GB_ENGINE_H

#include "config.h"
#include "error.h"
#include "mail.h"
#include "runtime.h"

typedef struct gb_engine_type {
    char name[GB_NAME_LEN];
    int kind;        /* the type's handle (grain_registry.h); 0: no handler in this build */
    gb_rk_t *rk;     /* NULL when kind is 0 */
    /* The grain types its handler sends to (gb_grain_desc_t.targets),
     * resolved at start: target i is types[target[i]], or -1 when this
     * bridge does not serve it (messages to it are undeliverable). */
    uint32_t n_targets;
    int8_t target[GB_MAIL_MAX_TARGETS];
} gb_engine_type_t;

typedef struct gb_engine {
    gb_mode mode;
    int device;
    unsigned char *arena; /* shared by the team grain types (PageRank); NULL if none */
    uint64_t arena_size;
    size_t n_types;
    gb_engine_type_t types[GB_MAX_GRAIN_TYPES];
} gb_engine_t;

/* Creates and launches a ring kernel for each grain type of cfg that has a
 * handler, in mode (not AUTO) on device. On error nothing is left running. */
gb_err gb_engine_new(const gb_config_t *cfg, gb_mode mode, int device, gb_engine_t **out);
/* Terminates every ring kernel (timeout_ms each) and frees them; takes NULL. */
void gb_engine_destroy(gb_engine_t **e, int timeout_ms);
/* The entry of grain type name, or NULL; _n: a name of len bytes, not
 * NUL-terminated (as it comes off the wire). */
gb_engine_type_t *gb_engine_find(gb_engine_t *e, const char *name);
gb_engine_type_t *gb_engine_find_n(gb_engine_t *e, const void *name, size_t len);

#endif
