/* The engine: every configured grain type's ring kernel on this host, in the
 * selected mode, on each of its devices. The server feeds and drains them;
 * the engine owns them. Grain types in the config without a handler in this
 * build are listed as unavailable (requests to them get
 * STATUS_UNKNOWN_GRAIN_TYPE with a reason).
 *
 * With several devices a grain type has one ring kernel per device, and a
 * key's messages always go to the same one (gb_device_of_key), so that the
 * grain's state stays put. Team types that may span devices
 * (GB_GRAIN_DEVICES) have an arena on each device, and their handlers reach
 * the other devices' arenas (gb_grain_ctx_t.peers); where the devices cannot
 * reach each other's memory (no peer access), a device cannot hold an arena,
 * or their rings would pass GB_MAX_RINGS, they run on the first device only,
 * as other team types always do. */
#ifndef GB_ENGINE_H
#define GB_ENGINE_H

#include "config.h"
#include "detect.h"
#include "error.h"
#include "gpubridge/device/link.h"
#include "gpubridge/mail.h"
#include "runtime.h"

/* One ring kernel: a grain type on one device. */
typedef struct gb_engine_type {
    char name[GB_NAME_LEN];
    int kind;        /* the type's handle (grain_registry.h); 0: no handler in this build */
    gb_rk_t *rk;     /* NULL when kind is 0 */
    uint16_t type_idx; /* its grain type: the config's entry, and types[type_idx] its first device's ring */
    uint16_t dev;      /* its device: devs[dev] */
    /* The grain types its handler sends to (gb_grain_desc_t.targets),
     * resolved at start: target i is types[target[i]] (on the first device;
     * gb_engine_at picks the key's), or -1 when this bridge does not serve
     * it (messages to it are undeliverable). */
    uint32_t n_targets;
    int8_t target[GB_MAIL_MAX_TARGETS];
} gb_engine_type_t;

typedef struct gb_engine {
    gb_mode mode; /* the first device's */
    int device;   /* the first device's */
    size_t n_devs;
    gb_engine_dev_t devs[GB_MAX_DEVICES];
    /* The team grain types' arena on each device they run on (arenas[0]
     * alone unless teams_span), arena_size bytes each; NULL if none. */
    unsigned char *arenas[GB_MAX_DEVICES];
    uint64_t arena_size;
    bool teams_span; /* team types run on every device, each with its arena */
    size_t n_names; /* grain types: types[0..n_names) are their first device's rings, in config order */
    size_t n_types; /* rings: the first n_names, then the other devices' */
    gb_engine_type_t types[GB_MAX_RINGS];
    /* ring_of[t][d]: types[] index of grain type t on device d (a type on
     * the first device alone: its ring for every d). */
    uint8_t ring_of[GB_MAX_GRAIN_TYPES][GB_MAX_DEVICES];
    struct gb_links *links; /* device links between its ring kernels (links.h); NULL: none */
} gb_engine_t;

/* The device of key among n (docs/protocol.md, "Several devices"): fixed
 * for all versions, independent of the grain type so that a key's grains of
 * every type share a device, and of the client's placement over bridges
 * (gbc_placement hashes the type with FNV-1a), so that a bridge's keys
 * spread over all its devices. splitmix64's output function. */
static inline uint32_t gb_device_of_key(uint64_t key, uint32_t n) { return gb_link_device_of_key(key, n); }

/* Creates and launches a ring kernel for each grain type of cfg that has a
 * handler, in mode (not AUTO) on device. On error nothing is left running. */
gb_err gb_engine_new(const gb_config_t *cfg, gb_mode mode, int device, gb_engine_t **out);
/* The same on n devices (devs[i]: index and mode), each grain type on each
 * (team types on devs[0] only without peer access). GB_ERR_CONFIG when the rings would pass
 * GB_MAX_RINGS (logged). */
gb_err gb_engine_new_devs(const gb_config_t *cfg, const gb_engine_dev_t *devs, size_t n, gb_engine_t **out);
/* The rings of t's grain type, one per device (a type on the first device
 * alone has one): n of them in out, the first device's first. */
size_t gb_engine_rings(const gb_engine_t *e, const gb_engine_type_t *t, gb_engine_type_t *out[GB_MAX_DEVICES]);
/* Life-cycle changes of one ring (gb_engine_ring_change). */
typedef enum gb_ring_change { GB_RING_ACTIVATE, GB_RING_DEACTIVATE, GB_RING_TERMINATE } gb_ring_change;
/* Activates, deactivates or terminates ring r (timeout_ms for its kernel's
 * acknowledgement); terminating first closes the device links into it. */
gb_err gb_engine_ring_change(gb_engine_t *e, gb_engine_type_t *r, gb_ring_change change, int timeout_ms);
/* The ring of t's grain type that serves key. */
static inline gb_engine_type_t *gb_engine_at(gb_engine_t *e, const gb_engine_type_t *t, uint64_t key)
{
    return &e->types[e->ring_of[t->type_idx][gb_device_of_key(key, (uint32_t)e->n_devs)]];
}
/* Terminates every ring kernel (timeout_ms each) and frees them; takes NULL. */
void gb_engine_destroy(gb_engine_t **e, int timeout_ms);
/* The entry of grain type name (its first device's ring), or NULL; _n: a name of len bytes, not
 * NUL-terminated (as it comes off the wire). */
gb_engine_type_t *gb_engine_find(gb_engine_t *e, const char *name);
gb_engine_type_t *gb_engine_find_n(gb_engine_t *e, const void *name, size_t len);

#endif
