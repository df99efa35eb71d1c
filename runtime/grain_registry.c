#include "grain_registry.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "config.h" /* GB_NAME_LEN */
#include "gpubridge/ring.h"
#include "runtime.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const gb_grain_desc_t *g_types[GB_MAX_REGISTERED_GRAINS + 1]; /* by handle; [0] unused */
static int g_count;                                                  /* read with acquire */

static int valid_name(const char *v)
{
    size_t n = 0;
    for (const char *p = v; *p; p++, n++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-'))
            return 0;
    }
    return n > 0 && n < GB_NAME_LEN;
}

/* Why d cannot be registered, or NULL. */
static const char *check(const gb_grain_desc_t *d, char *err, size_t errlen)
{
    if (d->abi != GB_GRAIN_ABI || d->size != sizeof(gb_grain_desc_t)) {
        snprintf(err, errlen, "grain ABI %u (descriptor of %u bytes), this build has ABI %u (%zu bytes): rebuild "
                 "it against this gpubridge", d->abi, d->size, GB_GRAIN_ABI, sizeof(gb_grain_desc_t));
        return err;
    }
    if (!d->name || !valid_name(d->name)) {
        snprintf(err, errlen, "grain type name '%s' is not valid (1 to %d letters, digits, '.', '_', '-')",
                 d->name ? d->name : "(null)", GB_NAME_LEN - 1);
        return err;
    }
    if (d->state_size == 0 || d->state_size > 65536) {
        snprintf(err, errlen, "grain type '%s': state size %u is out of range (1..65536)", d->name, d->state_size);
        return err;
    }
    if (!d->cpu || (d->n_msgs && !d->msgs)) {
        snprintf(err, errlen, "grain type '%s': no handler or no message list", d->name);
        return err;
    }
    if (d->n_targets > GB_MAIL_MAX_TARGETS || (d->n_targets && !d->targets)) {
        snprintf(err, errlen, "grain type '%s': %u targets (at most %d)", d->name, d->n_targets, GB_MAIL_MAX_TARGETS);
        return err;
    }
    if ((d->flags & GB_GRAIN_DEVICES) && !(d->flags & GB_GRAIN_TEAM)) {
        snprintf(err, errlen, "grain type '%s': GB_GRAIN_DEVICES is for team grain types (GB_GRAIN_TEAM)", d->name);
        return err;
    }
    if (d->n_targets && (d->flags & GB_GRAIN_TEAM)) {
        snprintf(err, errlen, "grain type '%s': a team grain type cannot message other grains (no targets)", d->name);
        return err;
    }
    for (uint32_t i = 0; i < d->n_targets; i++) {
        if (!d->targets[i] || !valid_name(d->targets[i])) {
            snprintf(err, errlen, "grain type '%s': target %u ('%s') is not a valid grain type name", d->name, i,
                     d->targets[i] ? d->targets[i] : "(null)");
            return err;
        }
    }
    for (uint32_t i = 0; i < d->n_msgs; i++) {
        if (d->msgs[i].type == 0 || d->msgs[i].type >= GB_MSG_DEACTIVATE_KEY) {
            snprintf(err, errlen, "grain type '%s': message type %u is out of range (1..%u)", d->name,
                     d->msgs[i].type, GB_MSG_DEACTIVATE_KEY - 1u);
            return err;
        }
        for (uint32_t j = 0; j < i; j++)
            if (d->msgs[j].type == d->msgs[i].type) {
                snprintf(err, errlen, "grain type '%s': message type %u is declared twice ('%s' and '%s')", d->name,
                         d->msgs[i].type, d->msgs[j].name ? d->msgs[j].name : "", d->msgs[i].name ? d->msgs[i].name : "");
                return err;
            }
    }
    return NULL;
}

static int add_locked(const gb_grain_desc_t *d, char *err, size_t errlen)
{
    if (check(d, err, errlen))
        return 0;
    for (int k = 1; k <= g_count; k++) {
        if (strcmp(g_types[k]->name, d->name) == 0) {
            snprintf(err, errlen, "duplicate grain type '%s' (already registered)", d->name);
            return 0;
        }
    }
    if (g_count >= GB_MAX_REGISTERED_GRAINS) {
        snprintf(err, errlen, "grain type '%s': too many grain types (at most %d)", d->name,
                 GB_MAX_REGISTERED_GRAINS);
        return 0;
    }
    g_types[g_count + 1] = d;
    __atomic_store_n(&g_count, g_count + 1, __ATOMIC_RELEASE);
    return g_count;
}

static void register_builtins(void)
{
    char err[256];
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < gb_n_builtin_grains; i++)
        if (!add_locked(gb_builtin_grains[i], err, sizeof err))
            fprintf(stderr, "gpubridge: built-in %s\n", err); /* a build error: never in a release */
    pthread_mutex_unlock(&g_lock);
}

int gb_grain_register(const gb_grain_desc_t *d, char *err, size_t errlen)
{
    pthread_once(&g_once, register_builtins);
    pthread_mutex_lock(&g_lock);
    int k = add_locked(d, err, errlen);
    pthread_mutex_unlock(&g_lock);
    return k;
}

int gb_grain_count(void)
{
    pthread_once(&g_once, register_builtins);
    return __atomic_load_n(&g_count, __ATOMIC_ACQUIRE);
}

const gb_grain_desc_t *gb_grain_get(int kind)
{
    return kind >= 1 && kind <= gb_grain_count() ? g_types[kind] : NULL;
}

int gb_grain_kind_of(const char *type)
{
    const int n = gb_grain_count();
    for (int k = 1; type && k <= n; k++)
        if (strcmp(g_types[k]->name, type) == 0)
            return k;
    return 0;
}

const char *gb_grain_unknown_target(int kind)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    for (uint32_t i = 0; d && i < d->n_targets; i++)
        if (!gb_grain_kind_of(d->targets[i]))
            return d->targets[i];
    return NULL;
}

int gb_grain_is_team(int kind)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    return d && (d->flags & GB_GRAIN_TEAM);
}

int gb_grain_spans_devices(int kind)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    return d && (d->flags & GB_GRAIN_TEAM) && (d->flags & GB_GRAIN_DEVICES);
}

uint32_t gb_grain_state_size(int kind)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    return d ? (d->state_size + 7u) & ~7u : 8;
}

uint32_t gb_grain_reply_max(int kind, uint16_t type, const void *rec, uint32_t len)
{
    const gb_grain_desc_t *d = gb_grain_get(kind);
    if (d && d->hooks && d->hooks->reply_max)
        return d->hooks->reply_max(type, rec, len);
    return len; /* a grain whose reply is no larger than its request */
}
