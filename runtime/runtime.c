/* The backend-independent half of the runtime: object lifecycle, the host side
 * of the rings (credit, claim/publish, peek/consume) and status. */
#include "runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "grain_registry.h"
#include "log.h"
#include "test_hooks.h"

const char *gb_placement_name(gb_placement p)
{
    switch (p) {
    case GB_PLACEMENT_HOST: return "host";
    case GB_PLACEMENT_MAPPED: return "mapped";
    case GB_PLACEMENT_DEVICE_PINNED: return "device+pinned-staging";
    case GB_PLACEMENT_DEVICE_MALLOC: return "device+malloc-staging";
    }
    return "?";
}

const char *gb_exit_reason_name(int reason)
{
    switch (reason) {
    case GB_EXIT_NONE: return "none";
    case GB_EXIT_TERMINATED: return "terminated";
    case GB_EXIT_BUDGET_SPENT: return "budget spent";
    case GB_EXIT_INPUT_EMPTY: return "input empty";
    case GB_EXIT_OUTPUT_FULL: return "output full";
    case GB_EXIT_ERROR: return "error";
    }
    return "?";
}

const char *gb_rk_state_name(gb_rk_state s)
{
    switch (s) {
    case GB_RK_CREATED: return "created";
    case GB_RK_RUNNING: return "running";
    case GB_RK_TERMINATED: return "terminated";
    case GB_RK_FAILED: return "failed";
    }
    return "?";
}

int gb_test_faults_enabled(void)
{
    const char *v = gb_test_hook(GB_HOOK_TEST_FAULTS);
    return v && strcmp(v, "1") == 0;
}

#define GB_ARENA_HDR 4096 /* cpu arenas: one page before the arena holds the mapping's length */

gb_err gb_arena_new(gb_mode mode, int device, uint64_t bytes, unsigned char **out)
{
    *out = NULL;
    if (bytes == 0)
        return GB_ERR_INVALID;
    if (mode == GB_MODE_CPU) {
        /* Anonymous pages are only committed as the graph fills them (calloc
         * under TSan would write them all). The first page keeps the size. */
        if (bytes > SIZE_MAX - GB_ARENA_HDR)
            return GB_ERR_NOMEM;
        size_t len = (size_t)bytes + GB_ARENA_HDR;
        unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return GB_ERR_NOMEM;
        memcpy(m, &len, sizeof len);
        *out = m + GB_ARENA_HDR;
        return GB_OK;
    }
#ifdef GB_HAVE_CUDA
    return gbi_cuda_arena_new(device, bytes, out);
#else
    (void)device;
    return GB_ERR_NODEV;
#endif
}

void gb_arena_free(gb_mode mode, unsigned char *arena)
{
    if (!arena)
        return;
    if (mode == GB_MODE_CPU) {
        size_t len;
        memcpy(&len, arena - GB_ARENA_HDR, sizeof len);
        munmap(arena - GB_ARENA_HDR, len);
        return;
    }
#ifdef GB_HAVE_CUDA
    gbi_cuda_arena_free(arena);
#endif
}

int gb_arena_peers(const int *devices, size_t n, char *why, size_t why_len)
{
#ifdef GB_HAVE_CUDA
    return gbi_cuda_arena_peers(devices, n, why, why_len);
#else
    (void)devices;
    (void)n;
    snprintf(why, why_len, "this build has no CUDA");
    return 0;
#endif
}

gb_err gb_rk_params_from_config(const gb_config_t *cfg, const char *type, gb_mode mode,
                                gb_rk_params_t *out)
{
    const gb_grain_config_t *g = gb_config_grain(cfg, type);
    if (!g)
        return GB_ERR_UNKNOWN_TYPE;
    memset(out, 0, sizeof *out);
    out->type = g->type;
    out->mode = mode;
    out->grain = *g;
    out->device = cfg->device;
    out->idle_spin_polls = cfg->idle_spin_polls;
    out->idle_backoff_max_ns = cfg->idle_backoff_max_ns;
    out->heartbeat_deadline_ms = cfg->heartbeat_deadline_ms;
    out->max_messages_per_launch = cfg->max_messages_per_launch;
    out->force_fallback_placement = cfg->force_fallback_placement;
    out->large_max = cfg->max_message_size;
    return GB_OK;
}

static int is_pow2(uint32_t x) { return x && !(x & (x - 1)); }

void gbi_rk_bind_region(gb_rk_t *rk, unsigned char *region)
{
    rk->region = region;
    rk->ctl = (gb_control_t *)(region + gb_region_ctl_off());
    rk->idx = (gb_ring_indices_t *)(region + gb_region_idx_off());
    rk->in = region + gb_region_in_off();
    rk->out = region + gb_region_out_off(rk->geom);
}

gb_err gb_rk_new(const gb_rk_params_t *params, gb_rk_t **out)
{
    *out = NULL;
    const gb_grain_config_t *g = &params->grain;
    if (!params->type || !is_pow2(g->queue_capacity) || g->queue_capacity < 2 ||
        !is_pow2(g->slot_size) || g->slot_size < GB_SLOT_MIN || g->max_grains == 0 ||
        g->messages_per_iteration == 0)
        return GB_ERR_INVALID;
    int kind = gb_grain_kind_of(params->type);
    if (kind == 0) {
        GB_ERROR("ring kernel: unknown grain type '%s'", params->type);
        return GB_ERR_UNKNOWN_TYPE;
    }
    const gbi_backend_ops_t *ops;
    switch (params->mode) {
    case GB_MODE_CPU:
        ops = &gbi_backend_cpu;
        break;
    case GB_MODE_PERSISTENT:
    case GB_MODE_RELAUNCH:
#ifdef GB_HAVE_CUDA
        ops = &gbi_backend_cuda;
        break;
#else
        GB_ERROR("ring kernel '%s': mode %s needs the CUDA backend, which this build lacks",
                 params->type, gb_mode_name(params->mode));
        return GB_ERR_NODEV;
#endif
    default:
        return GB_ERR_INVALID;
    }
    gb_rk_t *rk = aligned_alloc(GB_LINE, (sizeof *rk + GB_LINE - 1) / GB_LINE * GB_LINE);
    if (!rk)
        return GB_ERR_NOMEM;
    memset(rk, 0, sizeof *rk);
    rk->p = *params;
    snprintf(rk->type_name, sizeof rk->type_name, "%s", params->type);
    rk->p.type = rk->type_name;
    rk->kind = kind;
    rk->geom.cap = g->queue_capacity;
    rk->geom.slot_size = g->slot_size;
    if (rk->p.large_max == 0)
        rk->p.large_max = GB_LARGE_DEFAULT_MAX;
    if (rk->p.large_max > GB_LARGE_MAX_CAP)
        rk->p.large_max = GB_LARGE_MAX_CAP;
    rk->large_size = gbi_large_area_size(rk->p.large_max);
    rk->ops = ops;
    gb_err err = ops->create(rk);
    if (err == GB_OK && (err = gbi_large_new(rk)) != GB_OK)
        ops->destroy(rk);
    if (err != GB_OK) {
        free(rk);
        return err;
    }
    err = gbi_act_new(rk, &rk->act);
    if (err != GB_OK) {
        ops->destroy(rk);
        free(rk);
        return err;
    }
    pthread_mutex_init(&rk->act_lock, NULL);
    GB_CTL_STORE(&rk->ctl->is_active, 1);
    GB_CTL_STORE(&rk->ctl->active_seen, 1);
    GB_CTL_STORE(&rk->ctl->test_flags, params->test_flags);
    *out = rk;
    return GB_OK;
}

void gb_rk_destroy(gb_rk_t **prk)
{
    if (!prk || !*prk)
        return;
    gb_rk_t *rk = *prk;
    if (rk->state == GB_RK_RUNNING) {
        gb_err err = gb_rk_terminate(rk, 2000);
        if (err != GB_OK)
            GB_WARN("ring kernel '%s': terminate on destroy: %s", rk->type_name, gb_strerror(err));
    }
    rk->ops->destroy(rk);
    gbi_act_destroy(&rk->act);
    pthread_mutex_destroy(&rk->act_lock);
    gbi_large_free(rk);
    free(rk);
    *prk = NULL;
}

gb_err gb_rk_launch(gb_rk_t *rk)
{
    if (rk->state != GB_RK_CREATED)
        return GB_ERR_STATE;
    gb_err err = rk->ops->launch(rk);
    if (err != GB_OK)
        return err;
    if (rk->state == GB_RK_CREATED)
        rk->state = GB_RK_RUNNING;
    /* Requests sent before the launch: a relaunch backend starts on them now. */
    if (rk->ops->publish && __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE))
        rk->ops->publish(rk);
    return GB_OK;
}

static gb_err set_active(gb_rk_t *rk, int on, int timeout_ms)
{
    if (rk->state == GB_RK_TERMINATED || rk->state == GB_RK_FAILED)
        return GB_ERR_TERMINATED;
    pthread_mutex_lock(&rk->act_lock); /* not in the middle of an activation sweep */
    GB_CTL_STORE(&rk->ctl->is_active, on);
    if (rk->ops->control)
        rk->ops->control(rk);
    pthread_mutex_unlock(&rk->act_lock);
    if (rk->state == GB_RK_CREATED) {
        GB_CTL_STORE(&rk->ctl->active_seen, on);
        return GB_OK;
    }
    /* Wait for the kernel's acknowledgement, so that once deactivate returns no
     * request is taken any more. */
    uint64_t deadline = gb_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (GB_CTL_LOAD(&rk->ctl->active_seen) != on) {
        gb_err err = gb_rk_poll(rk);
        if (err != GB_OK)
            return err;
        if (gb_now_ns() > deadline)
            return GB_ERR_TIMEOUT;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return GB_OK;
}

gb_err gb_rk_activate(gb_rk_t *rk, int timeout_ms) { return set_active(rk, 1, timeout_ms); }
gb_err gb_rk_deactivate(gb_rk_t *rk, int timeout_ms) { return set_active(rk, 0, timeout_ms); }

gb_err gb_rk_terminate(gb_rk_t *rk, int timeout_ms)
{
    if (rk->state == GB_RK_TERMINATED)
        return GB_OK;
    if (rk->state == GB_RK_CREATED) {
        rk->state = GB_RK_TERMINATED;
        return GB_OK;
    }
    GB_CTL_STORE(&rk->ctl->should_terminate, 1);
    if (rk->ops->control)
        rk->ops->control(rk);
    gb_err err = rk->ops->stop(rk, timeout_ms);
    /* Atomic: a consumer thread apart (gb_rk_consumer_apart) reads it. */
    if (rk->state != GB_RK_FAILED && err == GB_OK)
        __atomic_store_n(&rk->state, GB_RK_TERMINATED, __ATOMIC_RELEASE);
    return err;
}

uint32_t gb_rk_payload_cap(const gb_rk_t *rk) { return gb_slot_payload_cap(rk->geom); }
uint32_t gb_rk_capacity(const gb_rk_t *rk) { return rk->geom.cap; }
gb_rk_state gb_rk_state_of(const gb_rk_t *rk) { return __atomic_load_n(&rk->state, __ATOMIC_ACQUIRE); }
int gb_rk_is_active(const gb_rk_t *rk)
{
    return rk->state == GB_RK_RUNNING && __atomic_load_n(&rk->ctl->is_active, __ATOMIC_RELAXED) != 0;
}
uint64_t gb_rk_next_pos(const gb_rk_t *rk) { return rk->in_head; }

uint32_t gb_rk_free_slots(const gb_rk_t *rk)
{
    uint64_t tail = __atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE);
    return rk->geom.cap - (uint32_t)(rk->in_head - tail);
}

uint64_t gb_rk_in_flight(const gb_rk_t *rk)
{
    return __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE) -
           __atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE);
}

gb_slot_hdr_t *gb_rk_claim(gb_rk_t *rk)
{
    /* Credit: request p may be written once reply p - cap was consumed, which
     * implies the kernel is done with request slot p - cap and that out slot p
     * is free. Acquire pairs with the consumer's release in gb_rk_consume.
     * out_tail, the consumer's line, is read only when the cached credit is
     * used up: with producer and consumer on different cores, a read per
     * request would move that line between them on every message. */
    if (rk->in_head - rk->credit_tail >= rk->geom.cap) {
        rk->credit_tail = __atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE);
        if (rk->in_head - rk->credit_tail >= rk->geom.cap)
            return NULL;
    }
    gb_slot_hdr_t *s = gb_slot_at(rk->in, rk->geom, rk->in_head);
    rk->in_head++;
    s->status = 0; /* the caller may mark it GB_REQ_LARGE */
    s->aux = 0;
    return s;
}

void gb_rk_publish(gb_rk_t *rk)
{
    /* Keys, room in the activation table, statuses (activation.h). */
    gbi_act_publish(rk, rk->published, rk->in_head);
    for (uint64_t pos = rk->published; pos < rk->in_head; pos++) {
        gb_slot_hdr_t *s = gb_slot_at(rk->in, rk->geom, pos);
        /* Release: the header and payload stores above become visible before
         * the stamp (on x86 a plain store; the compiler barrier is what matters). */
        __atomic_store_n(&s->seq, gb_stamp(pos), __ATOMIC_RELEASE);
    }
    /* Read by the consumer thread (in-flight count); release for tidiness. */
    __atomic_store_n(&rk->published, rk->in_head, __ATOMIC_RELEASE);
    /* in_head after the stamps: a kernel that sees it may read up to it
     * without checking for half-written slots. */
    __atomic_store_n(&rk->idx->in_head, rk->in_head, __ATOMIC_RELEASE);
    if (rk->ops->publish)
        rk->ops->publish(rk);
}

gb_err gb_rk_send(gb_rk_t *rk, uint64_t key, uint64_t corr, uint16_t type,
                  const void *payload, uint32_t len)
{
    if (rk->state == GB_RK_TERMINATED || rk->state == GB_RK_FAILED)
        return GB_ERR_TERMINATED;
    const uint32_t cap = gb_slot_payload_cap(rk->geom), reply_max = gb_grain_reply_max(rk->kind, type, payload, len);
    if (len > cap || reply_max > cap) {
        gb_err err = gb_rk_claim_large(rk, key, corr, type, payload, len, reply_max);
        if (err == GB_OK)
            gb_rk_publish(rk);
        return err;
    }
    gb_slot_hdr_t *s = gb_rk_claim(rk);
    if (!s)
        return GB_ERR_FULL;
    /* Atomic, release: cpu workers a lap behind read the key of a slot being
     * reused, and must then see the out_tail that freed it (backend_cpu.c). */
    __atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
    s->corr = corr;
    s->type = type;
    s->len = len;
    if (len)
        memcpy(gb_slot_payload(s), payload, len);
    gb_rk_publish(rk);
    return GB_OK;
}

/* The next reply's slot; *stamped says whether its stamp is there yet.
 * NULL when nothing is in flight. Acquire pairs with the writer's release
 * (cpu) or system fence (GPU) before the stamp: the payload read after this
 * is the one written for the slot's position. */
static gb_slot_hdr_t *next_reply(gb_rk_t *rk, int *stamped)
{
    uint64_t pos = rk->out_tail;
    /* The same for the consumer: the producer's line is read only when the
     * cached count of published requests is used up. */
    if (pos == rk->seen_published) {
        rk->seen_published = __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE);
        if (rk->large)
            gbi_large_refresh(rk); /* entries of the requests just seen published */
        if (pos == rk->seen_published)
            return NULL;
    }
    gb_slot_hdr_t *s = gb_slot_at(rk->out, rk->geom, pos);
    *stamped = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == gb_stamp(pos);
    return s;
}

const gb_slot_hdr_t *gb_rk_peek(gb_rk_t *rk)
{
    int stamped = 0;
    gb_slot_hdr_t *s = next_reply(rk, &stamped);
    if (!s || stamped)
        return s;
    if (rk->ops->pull && rk->ops->pull(rk) &&
        __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == gb_stamp(rk->out_tail))
        return s;
    return NULL;
}

int gb_rk_reply_visible(gb_rk_t *rk)
{
    if (rk->placement == GB_PLACEMENT_DEVICE_PINNED || rk->placement == GB_PLACEMENT_DEVICE_MALLOC)
        return -1; /* staging: replies reach host memory only when copied */
    int stamped = 0;
    return next_reply(rk, &stamped) && stamped;
}

void gb_rk_evicted_store(const gb_rk_t *rk, uint64_t *max_bytes, uint64_t *evicted)
{
    gbi_act_stats_t as;
    gbi_act_stats(rk->act, &as); /* a snapshot of atomic counters */
    *max_bytes = as.spill_max_bytes;
    *evicted = as.spilled;
}

int gb_rk_consumer_apart(const gb_rk_t *rk)
{
    return !rk->ops->consumer_apart || rk->ops->consumer_apart(rk);
}

void gb_rk_consume(gb_rk_t *rk)
{
    if (rk->large)
        gbi_large_consume(rk); /* frees a large reply's piece of the area */
    __atomic_store_n(&rk->out_tail, rk->out_tail + 1, __ATOMIC_RELEASE);
}

gb_err gb_rk_recv(gb_rk_t *rk, gb_reply_t *out, void *payload, uint32_t cap)
{
    const gb_slot_hdr_t *s = gb_rk_peek(rk);
    if (!s)
        return rk->state == GB_RK_FAILED ? GB_ERR_TERMINATED : GB_ERR_EMPTY;
    out->key = s->key;
    out->corr = s->corr;
    out->type = s->type;
    out->status = s->status;
    out->aux = s->aux;
    const unsigned char *src = gb_rk_reply_payload(rk, s);
    uint32_t len = s->len;
    if (!src || (src == (const unsigned char *)(s + 1) && len > gb_slot_payload_cap(rk->geom)))
        len = 0; /* a length past its room: nothing trustworthy to copy */
    out->len = len;
    gb_err err = GB_OK;
    if (len > cap) {
        len = cap;
        err = GB_ERR_TOO_LARGE;
    }
    if (len)
        memcpy(payload, src, len);
    gb_rk_consume(rk);
    return err;
}

gb_err gb_rk_poll(gb_rk_t *rk)
{
    if (rk->state == GB_RK_FAILED)
        return rk->last_error ? GB_ERR_CUDA : GB_ERR_TERMINATED;
    if (rk->state == GB_RK_TERMINATED)
        return GB_ERR_TERMINATED;
    if (rk->state == GB_RK_CREATED || !rk->ops->poll)
        return GB_OK;
    return rk->ops->poll(rk);
}

void gb_rk_status(const gb_rk_t *rk, gb_rk_status_t *st)
{
    const gb_control_t *c = rk->ctl;
    memset(st, 0, sizeof *st);
    st->state = rk->state;
    st->mode = rk->p.mode;
    st->placement = rk->placement;
    st->active = GB_CTL_LOAD(&c->active_seen) != 0;
    st->exit_reason = GB_CTL_LOAD(&c->exit_reason);
    st->last_error = rk->last_error ? rk->last_error : GB_CTL_LOAD(&c->last_error);
    snprintf(st->last_error_name, sizeof st->last_error_name, "%s", rk->last_error_name);
    snprintf(st->fallback_reason, sizeof st->fallback_reason, "%s", rk->fallback_reason);
    st->heartbeat = GB_CTL_LOAD(&c->heartbeat);
    st->processed = GB_CTL_LOAD(&c->processed);
    st->errors = GB_CTL_LOAD(&c->errors);
    st->iterations = GB_CTL_LOAD(&c->iterations);
    st->launches = GB_CTL_LOAD(&c->launches);
    st->sent = __atomic_load_n(&rk->published, __ATOMIC_ACQUIRE);
    st->received = __atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE);
    st->capacity = rk->geom.cap;
    st->slot_size = rk->geom.slot_size;
    st->lanes = rk->lanes;
    gbi_act_stats_t as;
    gbi_act_stats(rk->act, &as);
    st->activations = as.resident;
    st->evicted = as.spilled;
    st->evictions = as.evictions;
    st->restores = as.restores;
    st->refused = as.refused;
    st->refused_evicted_full = as.refused_full;
    st->evicted_bytes = as.spilled_bytes;
    st->evicted_max_bytes = as.spill_max_bytes;
    st->evicted_max = as.spill_max;
}

const char *gb_rk_type(const gb_rk_t *rk) { return rk->type_name; }

int gb_rk_notify_fd(gb_rk_t *rk) { return rk->ops->notify_fd ? rk->ops->notify_fd(rk) : -1; }

void gb_rk_arm(gb_rk_t *rk, int on)
{
    if (rk->ops->arm)
        rk->ops->arm(rk, on);
}
