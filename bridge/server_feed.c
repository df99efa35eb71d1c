/* Requests into rings: decoding envelopes into ring slots, and holding
 * frames, in order, per grain type while its ring is full. See server.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "log.h"
#include "server_internal.h"

static gbi_ring_t *ring_of(gb_server_t *s, const char *type)
{
    for (size_t i = 0; i < s->engine->n_types; i++)
        if (s->rings[i].t && strcmp(s->rings[i].t->name, type) == 0)
            return &s->rings[i];
    return NULL;
}

/* Puts one request into ring r. */
static int enqueue(gb_server_t *s, gbi_ring_t *r, const uint8_t *id, uint8_t id_len, uint8_t delim,
                   const Gpubridge__Envelope *env, uint16_t slot_type, const unsigned char *rec,
                   uint32_t rec_len, int one_way)
{
    gb_rk_t *rk = r->t->rk;
    /* No room, or older frames for this ring wait: queue behind them. */
    if (gb_rk_free_slots(rk) == 0 || (r->held_head && r->held_head != s->resuming)) {
        s->blocked = r;
        return NEEDS_ROOM;
    }
    uint64_t pos = gb_rk_next_pos(rk);
    gb_slot_hdr_t *slot = gb_rk_claim(rk);
    slot->key = env->grain ? env->grain->key : 0;
    slot->corr = pos;
    slot->type = slot_type;
    slot->len = rec_len;
    if (rec_len)
        memcpy(gb_slot_payload(slot), rec, rec_len);
    gbi_pending_t *p = &r->pending[pos & (gb_rk_capacity(rk) - 1)];
    p->corr = env->correlation_id;
    p->id_len = id_len;
    p->delim = delim;
    p->one_way = (uint8_t)one_way;
    memcpy(p->id, id, id_len);
    gb_rk_publish(rk);
    s->requests++;
    return HANDLED;
}

static int handle_envelope(gb_server_t *s, const uint8_t *id, uint8_t id_len, uint8_t delim,
                           const Gpubridge__Envelope *env)
{
    char err[256];
    uint64_t corr = env->correlation_id;
#define FAIL(st, ...)                                                        \
    do {                                                                     \
        snprintf(err, sizeof err, __VA_ARGS__);                              \
        if (!(env->kind == GPUBRIDGE__KIND__KIND_ONE_WAY && corr == 0))      \
            gbi_reply(s, id, id_len, delim, corr, st, err, 0, NULL, 0);      \
        return HANDLED;                                                      \
    } while (0)

    if (s->refusing)
        FAIL(GPUBRIDGE__STATUS__STATUS_SHUTTING_DOWN, "the bridge is shutting down");
    if (env->kind == GPUBRIDGE__KIND__KIND_CONTROL) {
        if (!env->control)
            FAIL(GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "control envelope without a control message");
        if (env->control->op_case != GPUBRIDGE__CONTROL__OP_DEACTIVATE_GRAIN) {
            gbi_control(s, id, id_len, delim, env);
            return HANDLED;
        }
        const Gpubridge__DeactivateGrain *d = env->control->deactivate_grain;
        gbi_ring_t *r = d->grain_type ? ring_of(s, d->grain_type) : NULL;
        if (!r || !r->t->rk)
            FAIL(GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "unknown grain type '%s'",
                 d->grain_type ? d->grain_type : "");
        Gpubridge__GrainId g = GPUBRIDGE__GRAIN_ID__INIT;
        g.key = d->key;
        Gpubridge__Envelope e2 = *env;
        e2.grain = &g;
        return enqueue(s, r, id, id_len, delim, &e2, GB_MSG_DEACTIVATE_KEY, NULL, 0, 0);
    }
    if (env->kind != GPUBRIDGE__KIND__KIND_REQUEST && env->kind != GPUBRIDGE__KIND__KIND_ONE_WAY)
        FAIL(GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "envelope kind must be REQUEST, ONE_WAY or CONTROL");
    if (!env->grain || !env->grain->type || !env->grain->type[0])
        FAIL(GPUBRIDGE__STATUS__STATUS_MISSING_FIELD, "envelope has no grain type");
    gb_engine_type_t *t = gb_engine_find(s->engine, env->grain->type);
    if (!t)
        FAIL(GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE, "unknown grain type '%.64s'", env->grain->type);
    if (!t->rk)
        FAIL(GPUBRIDGE__STATUS__STATUS_UNKNOWN_GRAIN_TYPE,
             "grain type '%.64s' is configured but has no handler in this build", env->grain->type);
    gb_rk_state state = gb_rk_state_of(t->rk);
    if (state == GB_RK_TERMINATED)
        FAIL(GPUBRIDGE__STATUS__STATUS_TERMINATED, "grain type '%s' is terminated", t->name);
    if (state == GB_RK_FAILED) {
        gb_rk_status_t st;
        gb_rk_status(t->rk, &st);
        FAIL(GPUBRIDGE__STATUS__STATUS_GPU_ERROR, "grain type '%s' failed: %s (%d)", t->name,
             st.last_error_name[0] ? st.last_error_name : "kernel stopped", st.last_error);
    }
    unsigned char rec[65536];
    uint32_t rec_len = 0, cap = gb_rk_payload_cap(t->rk);
    uint16_t slot_type = 0;
    if (env->payload.len > cap + 64u && env->payload.len > sizeof rec)
        FAIL(GPUBRIDGE__STATUS__STATUS_TOO_LARGE, "payload of %zu bytes exceeds the '%s' slot (%u bytes)",
             env->payload.len, t->name, cap);
    int status;
    if (s->test_faults && env->message_type == GB_MSG_TEST_FAULT) {
        /* Test hook (GPUBRIDGE_TEST_FAULTS=1): the kernel writes through a bad
         * pointer, a sticky CUDA error; supervision tests recover from it. */
        slot_type = GB_MSG_TEST_FAULT;
        status = GPUBRIDGE__STATUS__STATUS_OK;
    } else {
        status = gbi_codec_request(t->kind, env->message_type, env->payload.data, env->payload.len, rec, cap,
                                   &rec_len, &slot_type, err, sizeof err);
    }
    if (status != GPUBRIDGE__STATUS__STATUS_OK) {
        if (!(env->kind == GPUBRIDGE__KIND__KIND_ONE_WAY && corr == 0))
            gbi_reply(s, id, id_len, delim, corr, status, err, 0, NULL, 0);
        return HANDLED;
    }
    gbi_ring_t *r = &s->rings[t - s->engine->types]; /* rings[i] serves engine->types[i] */
    return enqueue(s, r, id, id_len, delim, env, slot_type, rec, rec_len,
                   env->kind == GPUBRIDGE__KIND__KIND_ONE_WAY);
#undef FAIL
}

/* Appends h to ring r's FIFO of held frames. */
static void push_held(gbi_ring_t *r, gbi_held_t *h)
{
    if (r->held_tail)
        r->held_tail->next = h;
    else
        r->held_head = h;
    r->held_tail = h;
}

/* Feeds a frame's envelopes from index `from`. When a ring has no room, a new
 * frame (h NULL) is held at the tail of that ring's FIFO; a held frame (h)
 * only records where it stopped, and resume_held moves it. Returns HANDLED
 * once every envelope is handled (the frame is then freed, h is not). */
int gbi_feed_frame(gb_server_t *s, Gpubridge__ClientFrame *f, size_t from, const uint8_t *id, uint8_t id_len,
                      uint8_t delim, size_t bytes, gbi_held_t *h)
{
    size_t n = 0;
    Gpubridge__Envelope **envs = gbi_frame_envelopes(f, &n);
    s->resuming = h;
    for (size_t i = from; i < n; i++) {
        if (handle_envelope(s, id, id_len, delim, envs[i]) != NEEDS_ROOM)
            continue;
        s->resuming = NULL;
        if (h) {
            h->next_env = i;
            return NEEDS_ROOM;
        }
        gbi_held_t *nh = calloc(1, sizeof *nh);
        if (!nh) {
            GB_ERROR("out of memory holding a frame; its remaining requests are refused");
            for (; i < n; i++)
                if (!(envs[i]->kind == GPUBRIDGE__KIND__KIND_ONE_WAY && envs[i]->correlation_id == 0))
                    gbi_reply(s, id, id_len, delim, envs[i]->correlation_id, GPUBRIDGE__STATUS__STATUS_BUSY,
                              "the bridge is out of memory; retry later", 0, NULL, 0);
            break;
        }
        nh->frame = f;
        nh->bytes = bytes;
        nh->next_env = i;
        memcpy(nh->id, id, id_len);
        nh->id_len = id_len;
        nh->delim = delim;
        s->held_bytes += bytes;
        push_held(s->blocked, nh);
        return NEEDS_ROOM;
    }
    s->resuming = NULL;
    gpubridge__client_frame__free_unpacked(f, NULL);
    return HANDLED;
}

static gbi_held_t *pop_held(gbi_ring_t *r)
{
    gbi_held_t *h = r->held_head;
    r->held_head = h->next;
    if (!r->held_head)
        r->held_tail = NULL;
    h->next = NULL;
    return h;
}

/* Feeds the frames waiting on ring r, in order, while it has room. */
int gbi_resume_held(gb_server_t *s, gbi_ring_t *r)
{
    int progress = 0;
    gbi_held_t *h;
    while ((h = r->held_head) && gb_rk_free_slots(r->t->rk) > 0) {
        size_t before = h->next_env;
        if (gbi_feed_frame(s, h->frame, h->next_env, h->id, h->id_len, h->delim, h->bytes, h) == HANDLED) {
            pop_held(r);
            s->held_bytes -= h->bytes;
            free(h);
            progress++;
            continue;
        }
        progress += h->next_env != before;
        if (s->blocked == r)
            break; /* full again: it stays at the head */
        /* Now it waits on another ring: move it to the tail of that FIFO. */
        pop_held(r);
        push_held(s->blocked, h);
        progress++;
    }
    return progress;
}

/* Answers the envelopes of held frames that will not be fed (shutdown). */
void gbi_refuse_held(gb_server_t *s)
{
    s->refusing = 1; /* handle_envelope now answers SHUTTING_DOWN */
    for (size_t i = 0; i < GB_MAX_GRAIN_TYPES; i++) {
        gbi_ring_t *r = &s->rings[i];
        while (r->held_head) {
            gbi_held_t *h = r->held_head;
            r->held_head = h->next;
            gbi_feed_frame(s, h->frame, h->next_env, h->id, h->id_len, h->delim, h->bytes, NULL);
            s->held_bytes -= h->bytes;
            free(h);
        }
        r->held_tail = NULL;
    }
}

