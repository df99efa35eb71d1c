/* sup_state.c: the grain types' control state across supervised worker
 * restarts (sup_state.h). */
#include "sup_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "engine.h"
#include "gpubridge.pb-c.h"
#include "log.h"

void gbi_sup_state_asked(gbi_sup_state_t *st, uint64_t conn, uint64_t corr, const uint8_t *control, size_t len)
{
    Gpubridge__Control *c = gpubridge__control__unpack(NULL, len, control);
    const char *type = NULL;
    gbi_kept to = GBI_KEPT_NONE;
    if (c && c->op_case == GPUBRIDGE__CONTROL__OP_ACTIVATE && c->activate)
        type = c->activate->grain_type, to = GBI_KEPT_NONE;
    else if (c && c->op_case == GPUBRIDGE__CONTROL__OP_DEACTIVATE && c->deactivate)
        type = c->deactivate->grain_type, to = GBI_KEPT_INACTIVE;
    else if (c && c->op_case == GPUBRIDGE__CONTROL__OP_TERMINATE && c->terminate)
        type = c->terminate->grain_type, to = GBI_KEPT_TERMINATED;
    if (type && *type && strlen(type) < GB_NAME_LEN && corr) {
        gbi_sup_asked_t *a = &st->asked[st->next];
        st->n_asked += a->corr == 0;
        *a = (gbi_sup_asked_t){.conn = conn, .corr = corr, .to = to};
        memcpy(a->type, type, strlen(type) + 1);
        st->next = (st->next + 1) % GBI_SUP_STATE_ASKED;
    }
    gpubridge__control__free_unpacked(c, NULL);
}

/* Type's entry, made if need be; NULL when the table is full. */
static gbi_kept *kept_of(gbi_sup_state_t *st, const char *type)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->names[i], type) == 0)
            return &st->kept[i];
    if (st->n == GBI_SUP_STATE_TYPES)
        return NULL;
    memcpy(st->names[st->n], type, strlen(type) + 1);
    st->kept[st->n] = GBI_KEPT_NONE;
    return &st->kept[st->n++];
}

void gbi_sup_state_answered(gbi_sup_state_t *st, uint64_t conn, uint64_t corr, int status)
{
    if (!st->n_asked || !corr)
        return;
    for (size_t i = 0; i < GBI_SUP_STATE_ASKED; i++) {
        gbi_sup_asked_t *a = &st->asked[i];
        if (a->corr != corr || a->conn != conn)
            continue;
        gbi_kept *k = status == GPUBRIDGE__STATUS__STATUS_OK ? kept_of(st, a->type) : NULL;
        if (k && *k != a->to) {
            GB_INFO("supervisor: grain type '%s' is %s; a restarted worker starts it so", a->type,
                    a->to == GBI_KEPT_TERMINATED ? "terminated" : a->to == GBI_KEPT_INACTIVE ? "deactivated" : "active");
            *k = a->to;
        }
        a->corr = 0;
        st->n_asked--;
        return;
    }
}

int gbi_sup_state_write(const gbi_sup_state_t *st, const char *path)
{
    size_t kept = 0;
    for (size_t i = 0; i < st->n; i++)
        kept += st->kept[i] != GBI_KEPT_NONE;
    if (!kept)
        return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.new", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    for (size_t i = 0; i < st->n; i++)
        if (st->kept[i] != GBI_KEPT_NONE && !strpbrk(st->names[i], "\n\r")) /* a line a name */
            fprintf(f, "%s %s\n", st->kept[i] == GBI_KEPT_INACTIVE ? "inactive" : "terminated", st->names[i]);
    int e = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e) {
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* Deactivates or terminates type name on every device; whether it could. */
static int apply_one(gb_engine_t *e, const char *name, int terminate)
{
    gb_engine_type_t *t = gb_engine_find(e, name), *rs[GB_MAX_DEVICES];
    if (!t || !t->rk)
        return 0;
    gb_err first = GB_OK;
    for (size_t d = 0, n = gb_engine_rings(e, t, rs); d < n; d++) {
        const gb_err err = gb_engine_ring_change(e, rs[d], terminate ? GB_RING_TERMINATE : GB_RING_DEACTIVATE, 5000);
        if (first == GB_OK)
            first = err;
    }
    if (first != GB_OK) {
        GB_WARN("worker: grain type '%s' could not be %s as before the restart: %s", name,
                terminate ? "terminated" : "deactivated", gb_strerror(first));
        return 0;
    }
    GB_INFO("worker: grain type '%s' starts %s, as it was before the restart", name,
            terminate ? "terminated" : "deactivated");
    return 1;
}

size_t gbi_worker_state_apply(const char *path, gb_engine_t *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    size_t changed = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "inactive ", 9) == 0)
            changed += (size_t)apply_one(e, line + 9, 0);
        else if (strncmp(line, "terminated ", 11) == 0)
            changed += (size_t)apply_one(e, line + 11, 1);
    }
    fclose(f);
    return changed;
}
