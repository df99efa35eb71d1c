#include "grain_libs.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grain_registry.h"
#include "log.h"

typedef uint32_t (*gbi_library_fn)(const gb_grain_node_t **head);

/* "FILE:LINE: grains[i].library: " then the reason. */
static gb_err fail(const gb_grain_lib_config_t *l, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s:%u: grains[%u].library: %s", l->file, l->line, l->index, what);
    return GB_ERR_CONFIG;
}

/* Registers the types of library path (head: its list). again_ok: a type
 * whose name is registered to this very descriptor (the library loaded
 * before, by another runtime of the process) is taken as it is. */
static gb_err register_types(gb_config_t *cfg, const char *path, const gb_grain_node_t *head, bool gpu,
                             bool again_ok, char *why, size_t whylen)
{
    if (!head) {
        snprintf(why, whylen, "%s defines no grain type (no GB_DEFINE_GRAIN)", path);
        return GB_ERR_CONFIG;
    }
    for (const gb_grain_node_t *n = head; n; n = n->next) {
        const gb_grain_desc_t *d = n->desc;
        if (gpu && d->abi == GB_GRAIN_ABI && !d->gpu) {
            snprintf(why, whylen, "%s: grain type '%s' has no GPU code (built without nvcc), and this host "
                     "runs ring kernels on the GPU; build it with gpubridge_add_grain_library, or run in cpu mode",
                     path, d->name ? d->name : "?");
            return GB_ERR_CONFIG;
        }
        char rerr[384];
        const bool again = again_ok && d->name && gb_grain_get(gb_grain_kind_of(d->name)) == d;
        if (!again && !gb_grain_register(d, rerr, sizeof rerr)) {
            snprintf(why, whylen, "%s: %s", path, rerr);
            return GB_ERR_CONFIG;
        }
        if (!gb_config_add_grain(cfg, d->name)) {
            snprintf(why, whylen, "%s: grain type '%s': too many grain types (at most %d)", path, d->name,
                     GB_MAX_GRAIN_TYPES);
            return GB_ERR_CONFIG;
        }
        GB_INFO("grain type '%s' from %s%s", d->name, path, d->gpu ? "" : " (cpu only)");
    }
    return GB_OK;
}

gb_err gb_grain_lib_load(gb_config_t *cfg, const char *path, bool gpu, bool again_ok, const gb_grain_node_t **head_out,
                         char *why, size_t whylen)
{
    /* RTLD_LOCAL: two libraries may use the same internal names. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whylen, "cannot load '%s': %s", path, e ? e : "unknown error");
        return GB_ERR_CONFIG;
    }
    gbi_library_fn entry;
    *(void **)&entry = dlsym(h, "gb_grain_library");
    if (!entry) {
        snprintf(why, whylen, "%s is not a grain library (no gb_grain_library symbol; define its types "
                 "with GB_DEFINE_GRAIN from gpubridge/grain.h)", path);
        return GB_ERR_CONFIG;
    }
    const gb_grain_node_t *head = NULL;
    const uint32_t abi = entry(&head);
    if (abi != GB_GRAIN_ABI) {
        snprintf(why, whylen, "%s was built for grain ABI %u, this gpubridge has ABI %u: rebuild it "
                 "against this gpubridge's installed headers", path, abi, GB_GRAIN_ABI);
        return GB_ERR_CONFIG;
    }
    if (head_out)
        *head_out = head;
    return register_types(cfg, path, head, gpu, again_ok, why, whylen);
}

static bool running_has(const gb_config_t *running, const char *path)
{
    for (size_t i = 0; running && i < running->n_libs; i++)
        if (strcmp(running->libs[i].path, path) == 0)
            return true;
    return false;
}

gb_err gb_grain_libs_check_files(const gb_config_t *cfg, const gb_config_t *running, char *err, size_t errlen)
{
    char why[GB_PATH_LEN + 96];
    for (size_t i = 0; i < cfg->n_libs; i++) {
        const gb_grain_lib_config_t *l = &cfg->libs[i];
        if (running_has(running, l->path))
            continue;
        /* Non-blocking: a FIFO at the path must not stall the reload. */
        int fd = open(l->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        unsigned char magic[4] = {0};
        if (fd < 0) {
            snprintf(why, sizeof why, "cannot open '%s': %s", l->path, strerror(errno));
        } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            snprintf(why, sizeof why, "'%s' is not a regular file", l->path);
        } else if (read(fd, magic, sizeof magic) != (ssize_t)sizeof magic || memcmp(magic, "\177ELF", 4) != 0) {
            snprintf(why, sizeof why, "'%s' is not a shared library (no ELF header)", l->path);
        } else {
            close(fd);
            continue;
        }
        if (fd >= 0)
            close(fd);
        return fail(l, err, errlen, why);
    }
    return GB_OK;
}

gb_err gb_grain_libs_load(gb_config_t *cfg, bool gpu, char *err, size_t errlen)
{
    char why[768];
    const gb_grain_node_t *libs[GB_MAX_GRAIN_LIBS] = {NULL};
    for (size_t i = 0; i < cfg->n_libs; i++) {
        const gb_grain_lib_config_t *l = &cfg->libs[i];
        if (gb_grain_lib_load(cfg, l->path, gpu, false, &libs[i], why, sizeof why) != GB_OK)
            return fail(l, err, errlen, why);
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
