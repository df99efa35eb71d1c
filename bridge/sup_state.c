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
#include "links.h"
#include "log.h"

size_t gbi_sup_state_request(const gbi_sup_state_t *st, uint64_t seq, uint8_t *buf, size_t cap)
{
    Gpubridge__Envelope envs[1 + GBI_SUP_STATE_TYPES], *ep[1 + GBI_SUP_STATE_TYPES];
    Gpubridge__Control ctl[1 + GBI_SUP_STATE_TYPES];
    Gpubridge__StatusRequest sr[GBI_SUP_STATE_TYPES];
    Gpubridge__ListGrainTypes lt = GPUBRIDGE__LIST_GRAIN_TYPES__INIT;
    const size_t n = 1 + st->n;
    for (size_t i = 0; i < n; i++) {
        gpubridge__envelope__init(&envs[i]);
        gpubridge__control__init(&ctl[i]);
        envs[i].kind = GPUBRIDGE__KIND__KIND_CONTROL;
        envs[i].correlation_id = seq + i;
        envs[i].control = &ctl[i];
        ep[i] = &envs[i];
        if (i == 0) {
            ctl[i].op_case = GPUBRIDGE__CONTROL__OP_LIST_GRAIN_TYPES;
            ctl[i].list_grain_types = &lt;
        } else {
            gpubridge__status_request__init(&sr[i - 1]);
            sr[i - 1].grain_type = st->names[i - 1];
            ctl[i].op_case = GPUBRIDGE__CONTROL__OP_STATUS_REQUEST;
            ctl[i].status_request = &sr[i - 1];
        }
    }
    Gpubridge__Batch b = GPUBRIDGE__BATCH__INIT;
    b.n_envelopes = n;
    b.envelopes = ep;
    Gpubridge__ClientFrame f = GPUBRIDGE__CLIENT_FRAME__INIT;
    f.body_case = GPUBRIDGE__CLIENT_FRAME__BODY_BATCH;
    f.batch = &b;
    const size_t len = gpubridge__client_frame__get_packed_size(&f);
    if (len > cap)
        return 0;
    gpubridge__client_frame__pack(&f, buf);
    return len;
}

/* The list's names replace the known ones; a type still listed keeps what
 * it was kept as. */
static void take_list(gbi_sup_state_t *st, const Gpubridge__GrainTypeList *l)
{
    gbi_sup_state_t next = {0};
    for (size_t i = 0; i < l->n_grain_types && next.n < GBI_SUP_STATE_TYPES; i++) {
        const char *name = l->grain_types[i];
        gbi_kept kept = GBI_KEPT_NONE;
        for (size_t j = 0; j < st->n; j++)
            if (strcmp(st->names[j], name) == 0)
                kept = st->kept[j];
        if (!(next.names[next.n] = strdup(name)))
            break; /* out of memory: fewer types kept, none wrong */
        next.kept[next.n++] = kept;
    }
    gbi_sup_state_clear(st);
    *st = next;
}

static void take_status(gbi_sup_state_t *st, const Gpubridge__GrainTypeStatus *g)
{
    for (size_t j = 0; j < st->n; j++) {
        if (!g->grain_type || strcmp(st->names[j], g->grain_type) != 0)
            continue;
        /* A failed type is the reason for a restart, not a choice to keep. */
        st->kept[j] = g->state == GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_INACTIVE     ? GBI_KEPT_INACTIVE
                      : g->state == GPUBRIDGE__GRAIN_STATE__GRAIN_STATE_TERMINATED ? GBI_KEPT_TERMINATED
                                                                                   : GBI_KEPT_NONE;
    }
}

static void take_reply(gbi_sup_state_t *st, const Gpubridge__Reply *r)
{
    if (r->status != GPUBRIDGE__STATUS__STATUS_OK)
        return;
    if (r->message_type == GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST) {
        Gpubridge__GrainTypeList *l = gpubridge__grain_type_list__unpack(NULL, r->payload.len, r->payload.data);
        if (l)
            take_list(st, l);
        gpubridge__grain_type_list__free_unpacked(l, NULL);
    } else if (r->message_type == GPUBRIDGE__CONTROL_MESSAGE_TYPE__CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS) {
        Gpubridge__GrainTypeStatus *g = gpubridge__grain_type_status__unpack(NULL, r->payload.len, r->payload.data);
        if (g)
            take_status(st, g);
        gpubridge__grain_type_status__free_unpacked(g, NULL);
    }
}

void gbi_sup_state_reply(gbi_sup_state_t *st, const uint8_t *buf, size_t len)
{
    Gpubridge__ServerFrame *f = gpubridge__server_frame__unpack(NULL, len, buf);
    if (!f)
        return;
    if (f->body_case == GPUBRIDGE__SERVER_FRAME__BODY_REPLY && f->reply)
        take_reply(st, f->reply);
    else if (f->body_case == GPUBRIDGE__SERVER_FRAME__BODY_BATCH && f->batch)
        for (size_t i = 0; i < f->batch->n_replies; i++)
            take_reply(st, f->batch->replies[i]);
    gpubridge__server_frame__free_unpacked(f, NULL);
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

void gbi_sup_state_clear(gbi_sup_state_t *st)
{
    for (size_t i = 0; i < st->n; i++)
        free(st->names[i]);
    memset(st, 0, sizeof *st);
}

/* Deactivates or terminates type name on every device; whether it could. */
static int apply_one(gb_engine_t *e, const char *name, int terminate)
{
    gb_engine_type_t *t = gb_engine_find(e, name), *rs[GB_MAX_DEVICES];
    if (!t || !t->rk)
        return 0;
    gb_err first = GB_OK;
    for (size_t d = 0, n = gb_engine_rings(e, t, rs); d < n; d++) {
        if (terminate)
            gb_links_close_into(e->links, (size_t)(rs[d] - e->types));
        const gb_err err = terminate ? gb_rk_terminate(rs[d]->rk, 5000) : gb_rk_deactivate(rs[d]->rk, 5000);
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
