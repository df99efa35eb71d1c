/* The cpu backend: the dispatch loop on host threads, with the same handlers
 * and the same region layout as the GPU. For hosts without a GPU, and CI.
 *
 * Each worker thread is one owner lane. Every worker walks every input
 * position, reads the slot's key, and handles only the requests whose key it
 * owns (gb_grain_lane), writing the reply into out slot p. So one grain's
 * requests run on one thread in arrival order, different grains in parallel,
 * with no lock and no hand-off between threads.
 *
 * A worker that finds a slot already stamped for a later lap skips it: the
 * host could only reuse the slot after consuming its reply, so the request
 * belonged to another lane and is done. */
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/detail/dispatch.h"
#include "grain_registry.h"
#include "log.h"
#include "runtime_internal.h"

typedef struct cpu_worker {
    gb_rk_t *rk;
    uint32_t lane;
    pthread_t thread;
    int started;
    uint64_t *done; /* positions handled in the current window, stamped together */
    uint64_t pos;   /* next input position this lane looks at */
    pthread_mutex_t table; /* held while the lane runs a window: an activation sweep takes every lane's */
} cpu_worker_t;

typedef struct cpu_backend {
    uint32_t wake_seq; /* eventcount: bumped to wake sleeping workers */
    uint32_t sleepers; /* workers asleep or about to be */
    uint32_t armed;    /* the consumer sleeps on notify_fd: write it after replies */
    int notify_fd;     /* eventfd, readable when replies arrived while armed */
    gb_grain_table_t tab;
    uint32_t lanes;          /* worker threads; 0: inline on the consumer's thread */
    cpu_worker_t *workers;   /* lanes entries (one, unthreaded, when inline) */
} cpu_backend_t;

static void cpu_destroy(gb_rk_t *rk)
{
    cpu_backend_t *b = rk->be;
    if (b) {
        if (b->notify_fd >= 0)
            close(b->notify_fd);
        free(b->tab.entries);
        for (uint32_t i = 0; b->workers && i < (b->lanes ? b->lanes : 1); i++) {
            free(b->workers[i].done);
            pthread_mutex_destroy(&b->workers[i].table);
        }
        free(b->workers);
        free(b);
    }
    free(rk->region);
    rk->be = NULL;
    rk->region = NULL;
}

static int cpu_notify_fd(gb_rk_t *rk) { return ((cpu_backend_t *)rk->be)->notify_fd; }

static void cpu_arm(gb_rk_t *rk, int on)
{
    cpu_backend_t *b = rk->be;
    /* Arm before the consumer's last look at the ring (seq_cst pairs with the
     * worker's fence after its stamps): either it sees the reply or the worker
     * sees the flag and writes the fd. */
    __atomic_store_n(&b->armed, (uint32_t)on, __ATOMIC_SEQ_CST);
    if (!on) {
        uint64_t v;
        while (read(b->notify_fd, &v, sizeof v) > 0)
            ;
    }
}

static gb_err cpu_create(gb_rk_t *rk)
{
    cpu_backend_t *b = calloc(1, sizeof *b);
    if (!b)
        return GB_ERR_NOMEM;
    rk->be = b;
    b->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->notify_fd < 0) {
        free(b);
        rk->be = NULL;
        return GB_ERR_IO;
    }
    b->lanes = rk->p.grain.cpu_threads;
    const uint32_t nw = b->lanes ? b->lanes : 1; /* inline runs as lane 0 */
    b->tab.lanes = nw;
    rk->lanes = nw;
    b->tab.per_lane = gb_grain_partition_entries(rk->p.grain.max_grains, nw);
    b->tab.state_size = gb_grain_state_size(rk->kind);
    b->tab.entry_size = gb_grain_entry_size(b->tab.state_size);
    size_t entries = (size_t)b->tab.lanes * b->tab.per_lane;
    b->tab.entries = calloc(entries, b->tab.entry_size);
    b->workers = calloc(nw, sizeof *b->workers);
    for (uint32_t i = 0; b->workers && i < nw; i++)
        pthread_mutex_init(&b->workers[i].table, NULL);
    size_t size = (gbi_rk_region_size(rk) + GB_LINE - 1) / GB_LINE * GB_LINE;
    unsigned char *region = aligned_alloc(GB_LINE, size);
    if (!b->tab.entries || !b->workers || !region) {
        if (!b->tab.entries)
            GB_ERROR("grain type '%s': its activation table needs %zu MiB (max_grains %u with %u-byte states, "
                     "room for twice as many): lower max_grains or the state size", rk->type_name,
                     (entries * b->tab.entry_size) >> 20, rk->p.grain.max_grains, b->tab.state_size);
        free(region);
        cpu_destroy(rk);
        return GB_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < nw; i++) {
        b->workers[i].rk = rk;
        b->workers[i].lane = i;
        b->workers[i].done = calloc(rk->p.grain.messages_per_iteration, sizeof(uint64_t));
        if (!b->workers[i].done) {
            free(region);
            cpu_destroy(rk);
            return GB_ERR_NOMEM;
        }
    }
    memset(region, 0, size);
    gbi_rk_bind_region(rk, region);
    rk->placement = GB_PLACEMENT_HOST;
    rk->tab_geom = b->tab;
    return GB_OK;
}

/* Activation sweeps (activation.c): every lane's table lock, in lane order,
 * so that no window runs; the table is host memory, used in place. */
static gb_err cpu_quiesce(gb_rk_t *rk, int on)
{
    cpu_backend_t *b = rk->be;
    const uint32_t nw = b->lanes ? b->lanes : 1;
    for (uint32_t i = 0; i < nw; i++) {
        if (on)
            pthread_mutex_lock(&b->workers[i].table);
        else
            pthread_mutex_unlock(&b->workers[nw - 1 - i].table);
    }
    return GB_OK;
}

static unsigned char *cpu_table_get(gb_rk_t *rk, uint32_t part, uint32_t n)
{
    (void)part;
    (void)n;
    return ((cpu_backend_t *)rk->be)->tab.entries;
}

static gb_err cpu_table_put(gb_rk_t *rk, uint32_t part, uint32_t n)
{
    (void)rk;
    (void)part;
    (void)n;
    return GB_OK;
}

/* Idle: spin with a pause for idle_spin_polls polls, yield a little, then
 * sleep on an eventcount (a futex) until the producer or a control change
 * wakes us. The producer pays one load per publish while nobody sleeps, and
 * an idle cpu grain type costs no CPU. A 100 ms timeout is a safety net. */
typedef struct idle {
    uint32_t polls;
} idle_t;

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static void cpu_wake(gb_rk_t *rk)
{
    cpu_backend_t *b = rk->be;
    if (b->lanes == 0)
        return; /* inline: no worker to wake, and no fence on every publish */
    /* Pairs with the sleeper's fence: either it sees our stamp, or we see it
     * registered and wake it. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&b->sleepers, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&b->wake_seq, 1, __ATOMIC_RELEASE);
        futex(&b->wake_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
    }
}

static int has_news(gb_rk_t *rk, uint64_t pos, int was_active)
{
    gb_slot_hdr_t *in = gb_slot_at(rk->in, rk->geom, pos);
    /* Written for pos, or already a later lap (another lane's, to skip). */
    return (int32_t)(__atomic_load_n(&in->seq, __ATOMIC_ACQUIRE) - gb_stamp(pos)) >= 0 ||
           __atomic_load_n(&rk->ctl->should_terminate, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&rk->ctl->is_active, __ATOMIC_ACQUIRE) != was_active;
}

static void idle_wait(idle_t *w, gb_rk_t *rk, uint64_t pos, int active)
{
    cpu_backend_t *b = rk->be;
    /* Spin for idle_spin_polls (a few tens of microseconds by default): long
     * spins take the core a server or client needs on small machines. */
    uint32_t spin = rk->p.idle_spin_polls;
    if (++w->polls < spin) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    if (w->polls < spin + 16) {
        sched_yield();
        return;
    }
    uint32_t seq = __atomic_load_n(&b->wake_seq, __ATOMIC_ACQUIRE);
    __atomic_fetch_add(&b->sleepers, 1, __ATOMIC_SEQ_CST);
    if (!has_news(rk, pos, active)) {
        struct timespec ts = {0, 100000000};
        futex(&b->wake_seq, FUTEX_WAIT_PRIVATE, seq, &ts);
    }
    __atomic_fetch_sub(&b->sleepers, 1, __ATOMIC_RELAXED);
}

/* One dispatch window of lane w: up to messages_per_iteration ready requests
 * from w->pos. Replies are written first and stamped last, after the
 * counters, so that a host that sees a reply sees counters that include it.
 * Returns the positions walked (0: nothing ready, or deactivated). */
static uint32_t cpu_window(cpu_worker_t *w)
{
    gb_rk_t *rk = w->rk;
    cpu_backend_t *b = rk->be;
    gb_control_t *ctl = rk->ctl;
    const gb_ring_geom_t g = rk->geom;
    const uint32_t pl_cap = gb_slot_payload_cap(g), lane = w->lane, lanes = b->lanes ? b->lanes : 1;
    const uint32_t window = rk->p.grain.messages_per_iteration;
    /* Read under the lane's table lock: cpu_control acknowledges a change
     * once every lane's window that read the old value has ended. */
    int active = __atomic_load_n(&ctl->is_active, __ATOMIC_ACQUIRE);
    if (lane == 0)
        __atomic_store_n(&ctl->heartbeat, ctl->heartbeat + 1, __ATOMIC_RELAXED);
    if (!active)
        return 0;
    uint32_t n = 0, mine = 0;
    uint64_t bad = 0, pos = w->pos;
    const gb_grain_ctx_t ctx = {rk->p.arena, rk->p.arena_size, 0, 1, NULL, NULL, /* a team of one */
                                rk->p.n_peers > 1 ? rk->p.peers : NULL, rk->p.n_peers > 1 ? rk->p.n_peers : 1,
                                rk->p.peer_self};
    const gb_grain_handler_fn handler = gb_grain_get(rk->kind)->cpu;
    const uint32_t n_targets = gb_grain_get(rk->kind)->n_targets;
    for (; n < window; n++, pos++) {
        gb_slot_hdr_t *in = gb_slot_at(rk->in, g, pos);
        uint32_t seq = __atomic_load_n(&in->seq, __ATOMIC_ACQUIRE);
        if (seq != gb_stamp(pos)) {
            if ((int32_t)(seq - gb_stamp(pos)) > 0)
                continue; /* lapped: another lane's request, already answered */
            break;        /* not written yet */
        }
        if (lanes > 1) {
            /* Seqlock-style re-check: a slot owned by another lane may be
             * reused by the host while we read its key (an atomic store in
             * gb_rk_send). Acquire keeps the re-read of seq after the key. */
            uint64_t key = __atomic_load_n(&in->key, __ATOMIC_ACQUIRE);
            if (__atomic_load_n(&in->seq, __ATOMIC_RELAXED) != gb_stamp(pos) || gb_grain_lane(key, lanes) != lane)
                continue;
            /* A lane a lap behind can read the key of request pos + cap while
             * the stamp still says pos (the host writes it first). The host
             * reused the slot only after consuming reply pos, and the key's
             * release store carries that: out_tail shows pos is done. */
            if (__atomic_load_n(&rk->out_tail, __ATOMIC_ACQUIRE) > pos)
                continue;
        }
        gb_slot_hdr_t *out = gb_slot_at(rk->out, g, pos);
        gb_slot_hdr_t hdr;
        bad += (uint64_t)gbi_dispatch_one_fn(handler, n_targets, &ctx, &b->tab, lane, in, gb_slot_payload(in), &hdr,
                                          gb_slot_payload(out), pl_cap, GB_CTL_LOAD(&ctl->test_flags));
        memcpy(out, &hdr, offsetof(gb_slot_hdr_t, seq));
        w->done[mine++] = pos;
    }
    w->pos = pos;
    if (n == 0)
        return 0;
    /* Counters shared by the lanes: RMW is fine here (host memory, host threads). */
    if (mine)
        __atomic_fetch_add(&ctl->processed, mine, __ATOMIC_RELAXED);
    if (bad)
        __atomic_fetch_add(&ctl->errors, bad, __ATOMIC_RELAXED);
    if (lane == 0) {
        __atomic_fetch_add(&ctl->iterations, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&ctl->consumed, pos, __ATOMIC_RELAXED);
    }
    /* Release: reply and counters before the stamp the host polls. */
    for (uint32_t k = 0; k < mine; k++)
        __atomic_store_n(&gb_slot_at(rk->out, g, w->done[k])->seq, gb_stamp(w->done[k]), __ATOMIC_RELEASE);
    if (mine && b->lanes) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&b->armed, __ATOMIC_RELAXED)) {
            uint64_t one = 1;
            ssize_t wr = write(b->notify_fd, &one, sizeof one);
            (void)wr; /* EAGAIN: the counter is already non-zero */
        }
    }
    return n;
}

static void *cpu_worker_main(void *arg)
{
    cpu_worker_t *w = arg;
    gb_rk_t *rk = w->rk;
    idle_t idle = {0};
    while (!__atomic_load_n(&rk->ctl->should_terminate, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&w->table);
        const uint32_t n = cpu_window(w);
        pthread_mutex_unlock(&w->table);
        if (n == 0) {
            idle_wait(&idle, rk, w->pos, __atomic_load_n(&rk->ctl->is_active, __ATOMIC_ACQUIRE));
            continue;
        }
        idle.polls = 0;
    }
    return NULL;
}

/* Inline (cpu_threads = 0): the consumer runs the dispatch window itself when
 * it looks for replies, so a request and its reply never change threads.
 * Lowest latency on small machines; no parallelism across grains. */
static int cpu_pull_inline(gb_rk_t *rk)
{
    cpu_backend_t *b = rk->be;
    if (b->lanes || gb_rk_state_of(rk) != GB_RK_RUNNING || GB_CTL_LOAD(&rk->ctl->should_terminate))
        return 0;
    pthread_mutex_lock(&b->workers[0].table);
    /* Again under the lock: a terminate acknowledged (cpu_control) between
     * the check above and the lock must see no window after it. */
    const uint32_t n = GB_CTL_LOAD(&rk->ctl->should_terminate) ? 0 : cpu_window(&b->workers[0]);
    pthread_mutex_unlock(&b->workers[0].table);
    return n > 0;
}

static gb_err cpu_launch(gb_rk_t *rk)
{
    cpu_backend_t *b = rk->be;
    GB_CTL_STORE(&rk->ctl->launches, 1);
    for (uint32_t i = 0; i < b->lanes; i++) {
        cpu_worker_t *w = &b->workers[i];
        w->rk = rk;
        w->lane = i;
        if (pthread_create(&w->thread, NULL, cpu_worker_main, w) != 0) {
            GB_ERROR("ring kernel '%s': cannot start cpu worker %u", rk->type_name, i);
            GB_CTL_STORE(&rk->ctl->should_terminate, 1);
            for (uint32_t j = 0; j < i; j++) {
                pthread_join(b->workers[j].thread, NULL);
                b->workers[j].started = 0;
            }
            return GB_ERR_IO;
        }
        w->started = 1;
        char name[16]; /* what top -H shows: the type's first letters and the lane */
        snprintf(name, sizeof name, "gb-%.7s-%u", rk->type_name, i % 1000u);
        pthread_setname_np(w->thread, name);
    }
    return GB_OK;
}

static gb_err cpu_stop(gb_rk_t *rk, int timeout_ms)
{
    (void)timeout_ms; /* workers check should_terminate every window: join is bounded */
    cpu_backend_t *b = rk->be;
    for (uint32_t i = 0; i < b->lanes; i++) {
        if (b->workers[i].started) {
            pthread_join(b->workers[i].thread, NULL);
            b->workers[i].started = 0;
        }
    }
    GB_CTL_STORE(&rk->ctl->exit_reason, GB_EXIT_TERMINATED);
    GB_CTL_STORE(&rk->ctl->has_terminated, 1);
    return GB_OK;
}

/* Control changes. is_active is read at the start of each window, under the
 * lane's table lock, so taking every lane's lock in turn waits out each
 * window that read the old value; only then is the change acknowledged. A
 * lane's own acknowledgement would not do: with several lanes, lane 0 could
 * acknowledge a deactivation while another lane still walks a window begun
 * active, and take a request published after gb_rk_deactivate returned.
 * Inline (no worker), the window runs in the consumer's gb_rk_peek, which may
 * be on another thread (gb_rk_consumer_apart): the same lock covers it. */
static void cpu_control(gb_rk_t *rk)
{
    cpu_quiesce(rk, 1);
    GB_CTL_STORE(&rk->ctl->active_seen, GB_CTL_LOAD(&rk->ctl->is_active));
    cpu_quiesce(rk, 0);
    cpu_wake(rk); /* sleeping workers see the change (or a termination) */
}

const gbi_backend_ops_t gbi_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .launch = cpu_launch,
    .publish = cpu_wake,
    .pull = cpu_pull_inline,
    .control = cpu_control,
    .notify_fd = cpu_notify_fd,
    .arm = cpu_arm,
    .poll = NULL,
    .stop = cpu_stop,
    .destroy = cpu_destroy,
    .quiesce = cpu_quiesce,
    .table_get = cpu_table_get,
    .table_put = cpu_table_put,
};
