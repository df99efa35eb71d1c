/* Device links between the engine's ring kernels (gpubridge/device/link.h):
 * which pairs get one, their memory, and the host's counters. */
#ifndef GB_LINKS_H
#define GB_LINKS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gb_engine;
typedef struct gb_links gb_links_t;

/* Lays out the links of e's ring kernels (created, not yet launched) and
 * gives each kernel its own: one for each target of a sending ring whose
 * target ring is on the same device, and both rings one-block persistent
 * kernels in mapped memory. *out stays NULL when there is none (cpu or
 * relaunch mode, messaging.device_links off, no type that sends). */
gb_err gb_links_new(struct gb_engine *e, const gb_config_t *cfg, gb_links_t **out);
/* After the launches: the links into a ring whose kernel does not run
 * persistently (it fell back to relaunch) are closed, and their senders
 * take the host path. */
void gb_links_check(gb_links_t *l, struct gb_engine *e);
/* Before ring `to`'s kernel is terminated (SIZE_MAX: every ring's): closes
 * the links into it, so that senders take the host path, and its kernel,
 * as it stops, answers what they hold. */
void gb_links_close_into(gb_links_t *l, size_t to);
/* Frees them, once every ring kernel has stopped. Takes NULL. */
void gb_links_destroy(gb_links_t **l);
/* Whether ring `ring` takes messages from links (only such a ring writes
 * replies into other rings). */
int gb_links_is_target(const gb_links_t *l, size_t ring);
/* The link of ring `from`'s target index i, or -1. */
int gb_links_find(const gb_links_t *l, size_t from, uint32_t target);
/* One more GB_MAIL_HELD message of link was delivered or given up (any thread). */
void gb_links_delivered(gb_links_t *l, int link);
/* Of ring `from`'s forwards by link: those its targets took, and those they
 * answered undeliverable. */
void gb_links_counts(const gb_links_t *l, size_t from, uint64_t *taken, uint64_t *refused);

/* The backend's part (links_cuda.cu; without CUDA, links.c refuses). */
typedef struct gbi_links_mem {
    int device;
    size_t bytes;
    unsigned char *dev; /* device memory: the gb_link_t array, then the slots */
} gbi_links_mem_t;
/* m->bytes of zeroed device memory on m->device into m->dev. */
gb_err gbi_links_alloc(gbi_links_mem_t *m);
/* bytes of init to the start of m->dev (before any kernel runs). */
gb_err gbi_links_upload(gbi_links_mem_t *m, const void *init, size_t bytes);
void gbi_links_free(gbi_links_mem_t *m);
/* Mapped pinned host memory seen by every device: *host and its device view. */
gb_err gbi_links_host_alloc(size_t bytes, void **host, void **dev);
void gbi_links_host_free(void *host);
/* Writes closed = 1 into the gb_link_t at dev (device memory of device), beside running kernels. */
gb_err gbi_links_close(int device, void *dev_link);
struct gb_rk;
/* Whether rk's kernel can take part: one-block, persistent, mapped memory. */
int gbi_links_eligible(struct gb_rk *rk);
/* Whether it still runs persistently (after its launch). */
int gbi_links_persistent(struct gb_rk *rk);
/* Hands rk's kernel its links (before its launch); see gb_kargs_t. */
void gbi_links_give(struct gb_rk *rk, void *const out[], uint32_t n_out, void *const in[], uint32_t n_in,
                    uint32_t self, uint32_t n_devs, uint32_t dev, uint32_t max_hops, uint64_t hold_ns);

#ifdef __cplusplus
}
#endif
#endif
