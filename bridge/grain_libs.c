#include "grain_libs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "grain_registry.h"
#include "log.h"

typedef uint32_t (*gbi_library_fn)(const gb_grain_node_t **head);

/* "FILE:LINE: grains[i].library: " then the reason. */
static gb_err fail(const gb_grain_lib_config_t *l, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s:%u: grains[%u].library: %s", l->file, l->line, l->index, what);
    return GB_ERR_CONFIG;
}

static gb_err register_types(gb_config_t *cfg, const gb_grain_lib_config_t *l, const gb_grain_node_t *head,
                             bool gpu, char *err, size_t errlen)
{
    char why[512];
    if (!head) {
        snprintf(why, sizeof why, "%s defines no grain type (no GB_DEFINE_GRAIN)", l->path);
        return fail(l, err, errlen, why);
    }
    for (const gb_grain_node_t *n = head; n; n = n->next) {
        const gb_grain_desc_t *d = n->desc;
        if (gpu && d->abi == GB_GRAIN_ABI && !d->gpu) {
            snprintf(why, sizeof why, "%s: grain type '%s' has no GPU code (built without nvcc), and this host "
                     "runs ring kernels on the GPU; build it with gpubridge_add_grain_library, or run in cpu mode",
                     l->path, d->name ? d->name : "?");
            return fail(l, err, errlen, why);
        }
        char rerr[384];
        if (!gb_grain_register(d, rerr, sizeof rerr)) {
            snprintf(why, sizeof why, "%s: %s", l->path, rerr);
            return fail(l, err, errlen, why);
        }
        if (!gb_config_add_grain(cfg, d->name)) {
            snprintf(why, sizeof why, "%s: grain type '%s': too many grain types (at most %d)", l->path, d->name,
                     GB_MAX_GRAIN_TYPES);
            return fail(l, err, errlen, why);
        }
        GB_INFO("grain type '%s' from %s%s", d->name, l->path, d->gpu ? "" : " (cpu only)");
    }
    return GB_OK;
}

gb_err gb_grain_libs_load(gb_config_t *cfg, bool gpu, char *err, size_t errlen)
{
    char why[768];
    const gb_grain_node_t *libs[GB_MAX_GRAIN_LIBS] = {NULL};
    for (size_t i = 0; i < cfg->n_libs; i++) {
        const gb_grain_lib_config_t *l = &cfg->libs[i];
        /* RTLD_LOCAL: two libraries may use the same internal names. */
        void *h = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(why, sizeof why, "cannot load '%s': %s", l->path, e ? e : "unknown error");
            return fail(l, err, errlen, why);
        }
        gbi_library_fn entry;
        *(void **)&entry = dlsym(h, "gb_grain_library");
        if (!entry) {
            snprintf(why, sizeof why, "%s is not a grain library (no gb_grain_library symbol; define its types "
                     "with GB_DEFINE_GRAIN from gpubridge/grain.h)", l->path);
            return fail(l, err, errlen, why);
        }
        const gb_grain_node_t *head = NULL;
        const uint32_t abi = entry(&head);
        if (abi != GB_GRAIN_ABI) {
            snprintf(why, sizeof why, "%s was built for grain ABI %u, this gpubridge has ABI %u: rebuild it "
                     "against this gpubridge's installed headers", l->path, abi, GB_GRAIN_ABI);
            return fail(l, err, errlen, why);
        }
        gb_err e = register_types(cfg, l, head, gpu, err, errlen);
        if (e != GB_OK)
            return e;
        libs[i] = head;
    }
    /* Targets once every library is in: a type may send to one loaded later. */
    for (size_t i = 0; i < cfg->n_libs; i++) {
        for (const gb_grain_node_t *n = libs[i]; n; n = n->next) {
            const char *t = gb_grain_unknown_target(gb_grain_kind_of(n->desc->name));
            if (t) {
                snprintf(why, sizeof why, "%s: grain type '%s' sends to grain type '%s', which no built-in type "
                         "or loaded library defines", cfg->libs[i].path, n->desc->name, t);
                return fail(&cfg->libs[i], err, errlen, why);
            }
        }
    }
    return GB_OK;
}
