/* Grain libraries: shared objects of grain types built against the installed
 * grain SDK (gpubridge/grain.h, gpubridge_add_grain_library), named by the
 * config's `grains = ( { library = "..."; } )` entries. */
#ifndef GB_GRAIN_LIBS_H
#define GB_GRAIN_LIBS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "error.h"
#include "gpubridge/grain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads every library cfg names (dlopen; they stay loaded for the process),
 * checks its grain ABI, registers its grain types (grain_registry.h) and adds
 * each one the config does not list to cfg->grains with the generic
 * settings. gpu: the mode runs ring kernels, so every type needs GPU code.
 * On the first problem returns GB_ERR_CONFIG with "FILE:LINE:
 * grains[i].library: what is wrong" in err: a missing or unloadable library,
 * one without the entry point, a wrong ABI, a duplicate type name, a type
 * without GPU code on a GPU mode, too many types. */
gb_err gb_grain_libs_load(gb_config_t *cfg, bool gpu, char *err, size_t errlen);
/* A reload's check of the libraries cfg names that running does not: each
 * must be a readable ELF file. Loading one runs its code, which a reload
 * does not do; this catches a missing or mistyped path, so that a reload
 * does not take a file that a restart would refuse. GB_ERR_CONFIG with
 * "FILE:LINE: grains[i].library: ..." in err. */
gb_err gb_grain_libs_check_files(const gb_config_t *cfg, const gb_config_t *running, char *err, size_t errlen);

/* One library, by path (the embedding API's gpubridge_register_library):
 * the same checks, the reason without FILE:LINE in why. again_ok: types this
 * library registered before (loaded again by another runtime) are fine.
 * head_out (may be NULL): the library's list of types. The types it sends
 * to are not checked here (they may come from a library loaded later). */
gb_err gb_grain_lib_load(gb_config_t *cfg, const char *path, bool gpu, bool again_ok, const gb_grain_node_t **head_out,
                         char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
