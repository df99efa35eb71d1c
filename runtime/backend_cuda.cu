/* The CUDA backend, host side: placement of the region, the persistent kernel's
 * launch, health checks, staging copies, and stop.
 *
 * Placement. Mapped pinned host memory by default: the kernel reads requests
 * and writes replies over PCIe, the host uses plain loads and stores, and
 * feeding or draining a ring makes no CUDA call. When mapped allocation fails
 * (or the test switch forces it), the region lives in device memory and the
 * host works on a staging copy: publish copies new slots and then in_head to
 * the device, pull copies out_head and new replies back, all on a dedicated
 * non-blocking copy stream (pinned staging, or malloc staging with the copy
 * waited for at once when pinned memory cannot be had).
 *
 * Streams are non-blocking and nothing is issued on the legacy default stream
 * while a kernel is resident: that stream would wait for the kernel forever. */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grain_registry.h"
#include "log.h"
#include "gpubridge/device/ring_kernel.h"
#include "backend_cuda.h"
#include "backend_cuda_internal.h"
#include "test_hooks.h"

int gbi_cuda_fail(gb_rk_t *rk, cudaError_t err, const char *what)
{
    /* The thread's last error is this thread's for every device it serves:
     * left set, another device's next launch check would report it. */
    cudaGetLastError();
    rk->last_error = (int)err;
    snprintf(rk->last_error_name, sizeof rk->last_error_name, "%s", cudaGetErrorName(err));
    GB_ERROR("ring kernel '%s': %s: %s (%d): %s", rk->type_name, what, cudaGetErrorName(err), (int)err,
             cudaGetErrorString(err));
    return 0;
}

bool gbi_cuda_staging(const gb_rk_t *rk)
{
    return rk->placement == GB_PLACEMENT_DEVICE_PINNED || rk->placement == GB_PLACEMENT_DEVICE_MALLOC;
}

/* cudaFree and cudaFreeHost synchronize the whole device: called while any
 * ring kernel is resident (other grain types keep theirs running) they would
 * wait forever. So the memory of a stopped ring kernel is freed only when none
 * of ours is resident; until then it waits on a deferred list. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_resident;                    /* ring kernels of this process that may be running */
static cuda_backend_t *g_deferred;        /* stopped kernels' memory awaiting a safe moment */

static void free_now(cuda_backend_t *b)
{
    cudaSetDevice(b->device);
    /* After a sticky error these fail; the context is unusable anyway. */
    if (b->placement == GB_PLACEMENT_MAPPED) {
        cudaFreeHost(b->host);
    } else {
        cudaFree(b->dev);
        if (b->placement == GB_PLACEMENT_DEVICE_PINNED)
            cudaFreeHost(b->host);
        else
            free(b->host);
    }
    gbi_relaunch_free(b);
    cudaFree(b->kstate);
    cudaFree(b->tab.entries);
    free(b->tab_host);
    cudaFree(b->mirror);
    cudaFree(b->team);
    cudaFree(b->peers);
    if (b->kstream)
        cudaStreamDestroy(b->kstream);
    if (b->cstream)
        cudaStreamDestroy(b->cstream);
    cudaGetLastError();
    pthread_mutex_destroy(&b->relaunch_lock);
    free(b);
}

/* Arenas freed while a kernel is resident wait here (cudaFree would block). */
#define MAX_DEFERRED_ARENAS 64
static unsigned char *g_deferred_arenas[MAX_DEFERRED_ARENAS];
static int g_n_deferred_arenas;

/* With g_lock held: frees the deferred list once nothing is resident. Its
 * frees switch to their memory's device: the caller's current device is put
 * back (it may be in the middle of an op on another device). */
static void flush_deferred_locked(void)
{
    if (g_resident != 0 || (g_n_deferred_arenas == 0 && !g_deferred))
        return;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = -1;
    while (g_n_deferred_arenas > 0)
        cudaFree(g_deferred_arenas[--g_n_deferred_arenas]); /* unified addressing: any device's */
    while (g_deferred) {
        cuda_backend_t *b = g_deferred;
        g_deferred = b->next_deferred;
        free_now(b);
    }
    if (prev >= 0)
        cudaSetDevice(prev);
}

void gbi_cuda_set_resident(cuda_backend_t *b, int on)
{
    pthread_mutex_lock(&g_lock);
    if (on != b->resident) {
        b->resident = on;
        g_resident += on ? 1 : -1;
    }
    flush_deferred_locked();
    pthread_mutex_unlock(&g_lock);
}

extern "C" gb_err gbi_cuda_arena_new(int device, uint64_t bytes, unsigned char **out)
{
    *out = NULL;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc((void **)out, (size_t)bytes) != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        /* a warning: past the first device the engine carries on without it */
        GB_WARN("arena: cannot allocate %llu MiB of device memory on CUDA device %d",
                (unsigned long long)(bytes >> 20), device);
        return GB_ERR_NOMEM;
    }
    /* Only the directory must start zeroed (no graph laid out yet). On a
     * stream of its own: kernels of other grain types may be resident, and
     * the legacy stream or a device sync would wait for them forever. */
    cudaStream_t st;
    cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
        e = cudaMemsetAsync(*out, 0, bytes < 4096 ? (size_t)bytes : 4096, st);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(st);
        cudaStreamDestroy(st);
    }
    if (e != cudaSuccess) {
        GB_ERROR("arena: clearing it failed: %s", cudaGetErrorName(e));
        cudaFree(*out);
        *out = NULL;
        return GB_ERR_CUDA;
    }
    return GB_OK;
}

extern "C" int gbi_cuda_arena_peers(const int *devices, size_t n, char *why, size_t why_len)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            if (devices[i] == devices[j])
                continue;
            int can = 0;
            if (cudaDeviceCanAccessPeer(&can, devices[i], devices[j]) != cudaSuccess || !can) {
                cudaGetLastError();
                snprintf(why, why_len, "CUDA device %d has no peer access to device %d", devices[i], devices[j]);
                return 0;
            }
            cudaError_t e = cudaSetDevice(devices[i]);
            if (e == cudaSuccess)
                e = cudaDeviceEnablePeerAccess(devices[j], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled)
                e = cudaSuccess;
            cudaGetLastError(); /* "already enabled" is not sticky, but would stay as the last error */
            if (e != cudaSuccess) {
                snprintf(why, why_len, "enabling peer access from CUDA device %d to %d failed: %s", devices[i],
                         devices[j], cudaGetErrorName(e));
                return 0;
            }
        }
    return 1;
}

extern "C" void gbi_cuda_arena_free(unsigned char *arena)
{
    pthread_mutex_lock(&g_lock);
    if (g_n_deferred_arenas < MAX_DEFERRED_ARENAS)
        g_deferred_arenas[g_n_deferred_arenas++] = arena;
    else
        GB_ERROR("arena: too many deferred frees; leaking one");
    flush_deferred_locked();
    pthread_mutex_unlock(&g_lock);
}

static void cuda_destroy(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (!b)
        return;
    rk->be = NULL;
    rk->region = NULL;
    if (b->resident) {
        /* It did not stop: its memory may still be in use by the kernel. */
        GB_ERROR("ring kernel '%s': destroyed while its kernel may still run; leaking its memory",
                 rk->type_name);
        return;
    }
    pthread_mutex_lock(&g_lock);
    b->next_deferred = g_deferred;
    g_deferred = b;
    flush_deferred_locked();
    pthread_mutex_unlock(&g_lock);
}

/* Benchmark switches for the ring kernel (GBK_F_* in ring_kernel.h), from
 * GPUBRIDGE_KERNEL_FLAGS (a test hook); 0 in production. */
static uint32_t kernel_flags(void)
{
    const char *v = gb_test_hook(GB_HOOK_KERNEL_FLAGS);
    return v ? (uint32_t)strtoul(v, NULL, 0) : 0;
}

int gbi_cuda_multi_device;

/* Loads the kernels of every registered grain type not loaded yet on the
 * current device, device (see gb_grain_gpu_t.preload): all before the
 * first of them is resident there. Modules load per device, so each device
 * counts its own. Notes a second device (gbi_cuda_multi_device). */
static cudaError_t preload_all(int device)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int loaded[1024]; /* per device (config: 0..1023): handles 1..loaded are */
    static int first_device = -1;
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&lock);
    if (first_device < 0)
        first_device = device;
    else if (device != first_device)
        __atomic_store_n(&gbi_cuda_multi_device, 1, __ATOMIC_RELAXED);
    int *n = &loaded[device & 1023];
    for (; *n < gb_grain_count() && e == cudaSuccess; (*n)++) {
        const gb_grain_desc_t *d = gb_grain_get(*n + 1);
        if (d->gpu)
            e = d->gpu->preload();
    }
    pthread_mutex_unlock(&lock);
    return e;
}

/* Registered grain types that run a one-block ring kernel on the GPU: the
 * team kernels leave an SM for each (built-in and loaded ones alike). */
static uint32_t ring_kernel_types(void)
{
    uint32_t n = 0;
    for (int h = 1; h <= gb_grain_count(); h++) {
        const gb_grain_desc_t *d = gb_grain_get(h);
        n += d && d->gpu && !d->gpu->team;
    }
    return n;
}

/* The region's memory: mapped pinned host memory when it can be had, else
 * device memory with a pinned (or, failing that, malloc'd) host copy that
 * staging copies keep in step. Sets rk->placement. */
static gb_err alloc_region(gb_rk_t *rk, cuda_backend_t *b)
{
    const size_t size = gbi_rk_region_size(rk);
    if (!rk->p.force_fallback_placement &&
        cudaHostAlloc((void **)&b->host, size, cudaHostAllocMapped) == cudaSuccess) {
        memset(b->host, 0, size);
        CK(cudaHostGetDevicePointer((void **)&b->dev, b->host, 0), "cudaHostGetDevicePointer");
        rk->placement = b->placement = GB_PLACEMENT_MAPPED;
        gbi_rk_bind_region(rk, b->host);
        return GB_OK;
    }
    cudaGetLastError(); /* a failed host allocation is not sticky: clear it */
    if (!rk->p.force_fallback_placement)
        GB_WARN("ring kernel '%s': mapped pinned memory unavailable; using device memory + staging", rk->type_name);
    rk->placement = b->placement = GB_PLACEMENT_DEVICE_MALLOC; /* until staging is known */
    CK(cudaMalloc((void **)&b->dev, size), "cudaMalloc(region)");
    CK(cudaMemsetAsync(b->dev, 0, size, b->cstream), "cudaMemsetAsync(region)");
    {
        const char *force_malloc = gb_test_hook(GB_HOOK_FORCE_MALLOC_STAGING);
        if (!(force_malloc && *force_malloc == '1') &&
            cudaHostAlloc((void **)&b->host, size, cudaHostAllocDefault) == cudaSuccess) {
            rk->placement = GB_PLACEMENT_DEVICE_PINNED;
        } else {
            cudaGetLastError();
            b->host = (unsigned char *)malloc(size);
            if (!b->host)
                return GB_ERR_NOMEM;
            rk->placement = GB_PLACEMENT_DEVICE_MALLOC;
        }
    }
    memset(b->host, 0, size);
    gbi_rk_bind_region(rk, b->host);
    b->placement = rk->placement;
    return GB_OK;
fail:
    return GB_ERR_CUDA;
}

/* The activation table and the kernel's state. Team grains: one partition
 * per worker block of the team kernel (one per SM). Ring kernels: a round of
 * a window runs one request per key on any thread, so partitions only bound
 * the probe sequences: up to GBK_MAX_PARTITIONS of them, each still
 * expecting 8 or more grains; every partition gets room for what uneven
 * hashing may send it (gb_grain_partition_entries). */
static gb_err alloc_table(gb_rk_t *rk, cuda_backend_t *b)
{
    if (gb_grain_is_team(rk->kind)) {
        const uint32_t rings = rk->p.ring_kernels ? rk->p.ring_kernels : ring_kernel_types();
        b->tab.lanes = b->gpu->team_workers(b->device, rk->geom.slot_size, rings);
        /* The GPU listed N times runs N families of resident team kernels:
         * each keeps 1/N of the blocks that fit (lanes + 1 of them, the
         * reader included). */
        if (rk->p.team_copies > 1)
            b->tab.lanes = (b->tab.lanes + 1) / rk->p.team_copies > 1 ? (b->tab.lanes + 1) / rk->p.team_copies - 1 : 1;
        b->tab.per_lane = gb_grain_per_lane(rk->p.grain.max_grains, b->tab.lanes);
    } else {
        uint32_t parts = 1;
        while (parts < GBK_MAX_PARTITIONS && rk->p.grain.max_grains / (2ull * parts) >= 8)
            parts *= 2;
        b->tab.lanes = parts;
        b->tab.per_lane = gb_grain_partition_entries(rk->p.grain.max_grains, parts);
    }
    rk->lanes = b->tab.lanes;
    b->tab.state_size = gb_grain_state_size(rk->kind);
    b->tab.entry_size = gb_grain_entry_size(b->tab.state_size);
    rk->tab_mod = gb_grain_is_team(rk->kind); /* team workers own key % workers */
    {
        const size_t entries = (size_t)b->tab.lanes * b->tab.per_lane;
        gb_kstate_t ks0;
        CK(cudaMalloc((void **)&b->tab.entries, entries * b->tab.entry_size), "cudaMalloc(grain table)");
        CK(cudaMemsetAsync(b->tab.entries, 0, entries * b->tab.entry_size, b->cstream), "cudaMemsetAsync(table)");
        rk->tab_geom = b->tab;
        CK(cudaMalloc((void **)&b->kstate, sizeof(gb_kstate_t)), "cudaMalloc(kstate)");
        /* active_seen -1: the kernel's first window always reports what it sees. */
        memset(&ks0, 0, sizeof ks0);
        ks0.active_seen = -1;
        CK(cudaMemcpyAsync(b->kstate, &ks0, sizeof ks0, cudaMemcpyHostToDevice, b->cstream), "kstate init");
        CK(cudaStreamSynchronize(b->cstream), "sync after create");
    }
    return GB_OK;
fail:
    return GB_ERR_CUDA;
}

/* The kernel's arguments; for a team type, its mirror and team state too. */
static gb_err set_args(gb_rk_t *rk, cuda_backend_t *b)
{
    const uint32_t maxw = b->gpu->max_window(b->device, rk->geom.slot_size);
    b->args.region = b->dev;
    b->args.kstate = b->kstate;
    b->args.tab = b->tab;
    b->args.geom = rk->geom;
    b->args.kind = rk->kind;
    b->args.staging = gbi_cuda_staging(rk);
    b->args.window = rk->p.grain.messages_per_iteration < maxw ? rk->p.grain.messages_per_iteration : maxw;
    if (b->args.window > rk->geom.cap)
        b->args.window = rk->geom.cap;
    b->args.idle_spin_polls = rk->p.idle_spin_polls;
    b->args.idle_backoff_max_ns = rk->p.idle_backoff_max_ns;
    b->args.budget = 0; /* persistent; relaunch sets its budget in gbi_relaunch_setup */
    b->args.flags = kernel_flags();
    if (!gb_grain_is_team(rk->kind))
        return GB_OK;
    if (!rk->p.arena) {
        GB_ERROR("ring kernel '%s': team grains need an arena (arena_mb > 0)", rk->type_name);
        return GB_ERR_CONFIG;
    }
    {
        const size_t tsize = GBK_TEAM_STATE_SIZE(b->tab.lanes);
        CK(cudaMalloc((void **)&b->mirror, (size_t)rk->geom.cap * rk->geom.slot_size), "cudaMalloc(mirror)");
        CK(cudaMalloc((void **)&b->team, tsize), "cudaMalloc(team state)");
        CK(cudaMemsetAsync(b->team, 0, tsize, b->cstream), "cudaMemsetAsync(team state)");
        if (rk->p.n_peers > 1) {
            const size_t psize = rk->p.n_peers * sizeof *b->peers;
            CK(cudaMalloc((void **)&b->peers, psize), "cudaMalloc(peer arenas)");
            CK(cudaMemcpyAsync(b->peers, rk->p.peers, psize, cudaMemcpyHostToDevice, b->cstream),
               "cudaMemcpyAsync(peer arenas)");
        }
        CK(cudaStreamSynchronize(b->cstream), "sync after team setup");
    }
    b->args.team_workers = b->tab.lanes;
    b->args.mirror = b->mirror;
    b->args.team = b->team;
    b->args.arena = rk->p.arena;
    b->args.arena_size = rk->p.arena_size;
    b->args.peers = b->peers;
    b->args.n_peers = b->peers ? rk->p.n_peers : 1;
    b->args.peer_self = b->peers ? rk->p.peer_self : 0;
    GB_INFO("ring kernel '%s': team kernel of 1 reader + %u worker blocks", rk->type_name, b->tab.lanes);
    return GB_OK;
fail:
    return GB_ERR_CUDA;
}

static gb_err cuda_create(gb_rk_t *rk)
{
    const gb_grain_desc_t *desc = gb_grain_get(rk->kind);
    const gb_grain_gpu_t *gpu = desc ? desc->gpu : NULL;
    if (!gpu || gpu->abi != GB_GRAIN_ABI) {
        GB_ERROR("ring kernel '%s': the grain type has no GPU code (its library was built without nvcc); "
                 "it runs in cpu mode only", rk->type_name);
        return GB_ERR_NODEV;
    }
    cuda_backend_t *b = (cuda_backend_t *)calloc(1, sizeof *b);
    if (!b)
        return GB_ERR_NOMEM;
    rk->be = b;
    b->gpu = gpu;
    pthread_mutex_init(&b->relaunch_lock, NULL);
    b->device = rk->p.device;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= b->device) {
        GB_ERROR("ring kernel '%s': no CUDA device %d (%d present)", rk->type_name, b->device, count);
        cudaGetLastError();
        pthread_mutex_destroy(&b->relaunch_lock);
        free(b);
        rk->be = NULL;
        return GB_ERR_NODEV;
    }
    gb_err err = GB_ERR_CUDA;
    CK(cudaSetDevice(b->device), "cudaSetDevice");
    CK(preload_all(b->device), "loading the ring kernels"); /* before any of ours can be resident there */
    CK(cudaStreamCreateWithFlags(&b->kstream, cudaStreamNonBlocking), "kernel stream");
    CK(cudaStreamCreateWithFlags(&b->cstream, cudaStreamNonBlocking), "copy stream");
    if ((err = alloc_region(rk, b)) != GB_OK || (err = alloc_table(rk, b)) != GB_OK ||
        (err = set_args(rk, b)) != GB_OK)
        goto fail;
    GB_DEBUG("ring kernel '%s': placement %s, window %u, %u lanes x %u grains", rk->type_name,
             gb_placement_name(rk->placement), b->args.window, b->tab.lanes, b->tab.per_lane);
    return GB_OK;
fail:
    cuda_destroy(rk);
    return err;
}

/* Staging: copy host-written control line (and kstate's activation) down. */
static void cuda_control(gb_rk_t *rk)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (rk->state == GB_RK_FAILED)
        return;
    if (b->relaunch) {
        gbi_relaunch_control(rk); /* no kernel between launches */
        return;
    }
    if (!gbi_cuda_staging(rk))
        return;
    cudaError_t e = cudaMemcpyAsync(b->dev + gb_region_ctl_off(), rk->ctl, GB_LINE, cudaMemcpyHostToDevice,
                                    b->cstream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess)
        gbi_cuda_fail(rk, e, "control copy");
}

static int cuda_pull(gb_rk_t *rk);

/* Waits for a persistent kernel's first heartbeat. Returns 1 when it beat, 0
 * when the deadline passed, -1 when the kernel died. */
static int await_heartbeat(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    uint64_t deadline = gb_now_ns() + (uint64_t)rk->p.heartbeat_deadline_ms * 1000000ull;
    for (;;) {
        if (gbi_cuda_staging(rk))
            cuda_pull(rk);
        if (rk->ctl->heartbeat != 0)
            return 1;
        cudaError_t e = cudaStreamQuery(b->kstream);
        if (e != cudaErrorNotReady) {
            if (e != cudaSuccess)
                gbi_cuda_fail(rk, e, "persistent kernel failed at start");
            return -1;
        }
        if (gb_now_ns() > deadline)
            return 0;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* A persistent kernel that shows no heartbeat by the deadline is stopped and
 * the grain type continues in relaunch mode on the same region and progress
 * (kstate): requests already queued are handled by the first relaunch. */
static gb_err fall_back_to_relaunch(gb_rk_t *rk)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    snprintf(rk->fallback_reason, sizeof rk->fallback_reason,
             "no heartbeat within %u ms of launch (persistent kernel not running as expected)",
             rk->p.heartbeat_deadline_ms);
    GB_WARN("ring kernel '%s': %s; stopping it and continuing in relaunch mode", rk->type_name,
            rk->fallback_reason);
    rk->ctl->should_terminate = 1;
    cuda_control(rk);
    uint64_t deadline = gb_now_ns() + 2000000000ull;
    cudaError_t e;
    while ((e = cudaStreamQuery(b->kstream)) == cudaErrorNotReady) {
        if (gb_now_ns() > deadline) {
            GB_ERROR("ring kernel '%s': the silent persistent kernel does not stop; giving up", rk->type_name);
            __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
            return GB_ERR_TIMEOUT;
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    gbi_cuda_set_resident(b, 0);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "persistent kernel failed");
        return GB_ERR_CUDA;
    }
    if (gbi_cuda_staging(rk))
        cuda_pull(rk);
    rk->ctl->should_terminate = 0;
    rk->ctl->has_terminated = 0;
    rk->ctl->exit_reason = GB_EXIT_NONE;
    rk->p.mode = GB_MODE_RELAUNCH;
    b->launches = 1;
    /* No device links in relaunch mode (the engine closes those into it). */
    b->args.n_devs = 0;
    b->args.n_link_in = 0;
    gb_err err = gbi_relaunch_setup(rk);
    if (err != GB_OK)
        return err;
    rk->state = GB_RK_RUNNING;
    return gbi_relaunch_kick(rk);
}

static gb_err cuda_launch(gb_rk_t *rk)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (rk->p.mode == GB_MODE_RELAUNCH) {
        gb_err err = gbi_relaunch_setup(rk);
        if (err != GB_OK)
            return err;
        /* gb_rk_launch marks it running once this returns; requests queued
         * before launch go out with the first publish or poll. */
        return GB_OK;
    }
    rk->ctl->launches = 1;
    cuda_control(rk);
    cudaError_t e = b->gpu->launch(&b->args, b->kstream);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "launch");
        return GB_ERR_CUDA;
    }
    gbi_cuda_set_resident(b, 1);
    int beat = await_heartbeat(rk);
    if (beat > 0)
        return GB_OK;
    if (beat < 0) {
        gbi_cuda_set_resident(b, 0);
        return GB_ERR_CUDA;
    }
    return fall_back_to_relaunch(rk);
}

/* Staging: copy newly published slots, then in_head (the kernel trusts slots
 * up to in_head; stream order makes the head land after the slots). */
static void cuda_publish(gb_rk_t *rk)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (b->relaunch) {
        if (rk->state == GB_RK_RUNNING)
            gbi_relaunch_progress(rk);
        return;
    }
    if (!gbi_cuda_staging(rk) || rk->state == GB_RK_FAILED)
        return;
    uint64_t from = b->copied_in, to = rk->published;
    cudaError_t e = cudaSuccess;
    size_t in_off = gb_region_in_off(), S = rk->geom.slot_size;
    while (from < to && e == cudaSuccess) {
        uint64_t first = from & (rk->geom.cap - 1), n = to - from;
        if (first + n > rk->geom.cap)
            n = rk->geom.cap - first; /* up to the wrap */
        size_t off = in_off + first * S;
        e = cudaMemcpyAsync(b->dev + off, rk->region + off, n * S, cudaMemcpyHostToDevice, b->cstream);
        from += n;
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(b->dev + gb_region_idx_off(), (const void *)&rk->idx->in_head, sizeof(uint64_t),
                            cudaMemcpyHostToDevice, b->cstream);
    /* Wait for the copies: the next publish rewrites in_head, the source of
     * the head copy, and a head that ran ahead of its slots' copy would hand
     * the kernel stale slots. (Fallback placement: correctness over speed.) */
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess)
        gbi_cuda_fail(rk, e, "staging copy in");
    b->copied_in = to;
}

/* Staging: fetch the kernel's control line and out_head; then the new replies.
 * Copied straight into the ring, which is safe here and not in relaunch mode
 * (put_replies in relaunch.cu): pull and poll run on the consumer thread
 * (runtime.h), the only reader of replies, and the copy completes before
 * they return. */
static int cuda_pull(gb_rk_t *rk)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (b->relaunch)
        return rk->state == GB_RK_RUNNING ? gbi_relaunch_progress(rk) > 0 : 0;
    if (!gbi_cuda_staging(rk) || rk->state == GB_RK_FAILED)
        return 0;
    const size_t kline = gb_region_ctl_off() + GB_LINE;
    const size_t out_head_off = gb_region_idx_off() + GB_LINE;
    /* out_head first, then the control line: the kernel writes counters
     * before stamps and out_head after, so counters copied later are at least
     * as new as the replies out_head covers. */
    cudaError_t e = cudaMemcpyAsync(rk->region + out_head_off, b->dev + out_head_off, sizeof(uint64_t),
                                    cudaMemcpyDeviceToHost, b->cstream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(rk->region + kline, b->dev + kline, GB_LINE, cudaMemcpyDeviceToHost, b->cstream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "staging copy out");
        return 0;
    }
    uint64_t from = b->pulled_out, to = rk->idx->out_head;
    size_t out_off = gb_region_out_off(rk->geom), S = rk->geom.slot_size;
    if (to == from)
        return 0;
    while (from < to && e == cudaSuccess) {
        uint64_t first = from & (rk->geom.cap - 1), n = to - from;
        if (first + n > rk->geom.cap)
            n = rk->geom.cap - first;
        size_t off = out_off + first * S;
        e = cudaMemcpyAsync(rk->region + off, b->dev + off, n * S, cudaMemcpyDeviceToHost, b->cstream);
        from += n;
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "staging copy out");
        return 0;
    }
    b->pulled_out = to;
    return 1;
}

/* Health: a kernel that stopped by itself has failed; a CUDA error on its
 * stream (sticky, e.g. 700) is recorded with its code and name. Rate-limited
 * to one stream query a millisecond. */
static gb_err cuda_poll(gb_rk_t *rk)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (b->relaunch) {
        /* Not rate-limited: this is what moves a relaunch grain type on. */
        if (gbi_relaunch_progress(rk) < 0)
            return GB_ERR_CUDA;
        return GB_OK;
    }
    uint64_t now = gb_now_ns();
    if (now - b->last_query_ns < 1000000ull)
        return GB_OK;
    b->last_query_ns = now;
    if (gbi_cuda_staging(rk))
        cuda_pull(rk);
    cudaError_t e = cudaStreamQuery(b->kstream);
    if (e == cudaErrorNotReady)
        return GB_OK;
    if (e == cudaSuccess) {
        gbi_cuda_set_resident(b, 0);
        if (rk->ctl->should_terminate)
            return GB_OK;
        GB_ERROR("ring kernel '%s': kernel exited unexpectedly (reason %s)", rk->type_name,
                 gb_exit_reason_name(rk->ctl->exit_reason));
        __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
        return GB_ERR_TERMINATED;
    }
    gbi_cuda_fail(rk, e, "kernel failed");
    gbi_cuda_set_resident(b, 0);
    rk->ctl->exit_reason = GB_EXIT_ERROR;
    __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
    return GB_ERR_CUDA;
}

static gb_err cuda_stop(gb_rk_t *rk, int timeout_ms)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (b->relaunch) {
        gb_err err = gbi_relaunch_wait(rk, timeout_ms);
        if (err == GB_ERR_TIMEOUT)
            return err;
        rk->ctl->has_terminated = 1;
        if (rk->state != GB_RK_FAILED)
            rk->ctl->exit_reason = GB_EXIT_TERMINATED;
        return GB_OK;
    }
    uint64_t deadline = gb_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        cudaError_t e = cudaStreamQuery(b->kstream);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady) {
            gbi_cuda_fail(rk, e, "kernel failed");
            gbi_cuda_set_resident(b, 0);
            __atomic_store_n(&rk->state, GB_RK_FAILED, __ATOMIC_RELEASE);
            return GB_OK; /* stopped, by failure; status says so */
        }
        if (gb_now_ns() > deadline) {
            GB_ERROR("ring kernel '%s': did not stop within %d ms", rk->type_name, timeout_ms);
            return GB_ERR_TIMEOUT;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    gbi_cuda_set_resident(b, 0);
    if (gbi_cuda_staging(rk))
        cuda_pull(rk);
    return GB_OK;
}

/* Persistent: waits until the kernel acknowledges is_active == v (it writes
 * active_seen only where it takes no request), or it stopped. */
static gb_err wait_seen(gb_rk_t *rk, int32_t v)
{
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const uint64_t deadline = gb_now_ns() + 10000000000ull;
    for (;;) {
        int32_t seen = rk->ctl->active_seen;
        if (gbi_cuda_staging(rk)) {
            cudaError_t e = cudaMemcpyAsync(&seen, b->dev + offsetof(gb_control_t, active_seen), sizeof seen,
                                            cudaMemcpyDeviceToHost, b->cstream);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(b->cstream);
            if (e != cudaSuccess) {
                gbi_cuda_fail(rk, e, "activation sweep");
                return GB_ERR_CUDA;
            }
        }
        if (seen == v)
            return GB_OK;
        if (cudaStreamQuery(b->kstream) != cudaErrorNotReady)
            return GB_ERR_TERMINATED; /* cuda_poll reports how it ended */
        if (gb_now_ns() > deadline)
            return GB_ERR_TIMEOUT;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Activation sweeps (activation.c). Persistent: the kernel is deactivated
 * for the sweep (it leaves requests queued and, having acknowledged, touches
 * no grain state) and given back the host's flag after. Relaunch: no launch
 * in flight and none started. */
static gb_err cuda_quiesce(gb_rk_t *rk, int on)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    if (b->relaunch)
        return gbi_relaunch_quiesce(rk, on);
    if (on) {
        b->q_held = rk->state == GB_RK_RUNNING && b->resident;
        if (!b->q_held)
            return GB_OK; /* nothing runs */
        b->q_saved = GB_CTL_LOAD(&rk->ctl->is_active);
        GB_CTL_STORE(&rk->ctl->is_active, 0);
        cuda_control(rk);
        return wait_seen(rk, 0);
    }
    if (!b->q_held)
        return GB_OK;
    b->q_held = 0;
    GB_CTL_STORE(&rk->ctl->is_active, b->q_saved);
    cuda_control(rk);
    /* The acknowledgement too: a later sweep must not take an old one for its own. */
    return b->q_saved ? wait_seen(rk, b->q_saved) : GB_OK;
}

static unsigned char *cuda_table_get(gb_rk_t *rk, uint32_t part, uint32_t n)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const size_t pb = (size_t)b->tab.per_lane * b->tab.entry_size, off = part * pb, bytes = n * pb;
    if (rk->state == GB_RK_FAILED ||
        (!b->tab_host && !(b->tab_host = (unsigned char *)malloc(b->tab.lanes * pb))))
        return NULL;
    cudaError_t e = cudaMemcpyAsync(b->tab_host + off, b->tab.entries + off, bytes, cudaMemcpyDeviceToHost,
                                    b->cstream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "activation table copy out");
        return NULL;
    }
    return b->tab_host;
}

static gb_err cuda_table_put(gb_rk_t *rk, uint32_t part, uint32_t n)
{
    gbi_cuda_on_device((const cuda_backend_t *)rk->be);
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    const size_t pb = (size_t)b->tab.per_lane * b->tab.entry_size, off = part * pb, bytes = n * pb;
    cudaError_t e = cudaMemcpyAsync(b->tab.entries + off, b->tab_host + off, bytes, cudaMemcpyHostToDevice,
                                    b->cstream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    if (e != cudaSuccess) {
        gbi_cuda_fail(rk, e, "activation table copy in");
        return GB_ERR_CUDA;
    }
    return GB_OK;
}

/* A persistent kernel on mapped memory: its stamped replies are in host
 * memory, and cuda_pull does nothing (gb_rk_consumer_apart). */
static int cuda_consumer_apart(const gb_rk_t *rk)
{
    const cuda_backend_t *b = (const cuda_backend_t *)rk->be;
    return b && !b->relaunch && !gbi_cuda_staging(rk);
}

extern "C" const gbi_backend_ops_t gbi_backend_cuda = {
    /* notify_fd, arm: a GPU cannot write an eventfd; the server polls. */
    "cuda", cuda_create, cuda_launch, cuda_publish, cuda_pull, cuda_control, cuda_poll, NULL, NULL,
    cuda_stop, cuda_destroy, cuda_quiesce, cuda_table_get, cuda_table_put, cuda_consumer_apart,
};

extern "C" gb_err gbi_cuda_kstate(gb_rk_t *rk, gb_kstate_t *out)
{
    if (rk->ops != &gbi_backend_cuda || !rk->be)
        return GB_ERR_UNSUPPORTED;
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    gbi_cuda_on_device(b);
    cudaError_t e = cudaMemcpyAsync(out, b->kstate, sizeof *out, cudaMemcpyDeviceToHost, b->cstream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->cstream);
    return e == cudaSuccess ? GB_OK : GB_ERR_CUDA;
}

extern "C" gb_err gbi_cuda_relaunch_prof(gb_rk_t *rk, gbi_relaunch_prof_t *out)
{
    if (rk->ops != &gbi_backend_cuda || !rk->be)
        return GB_ERR_UNSUPPORTED;
    cuda_backend_t *b = (cuda_backend_t *)rk->be;
    pthread_mutex_lock(&b->relaunch_lock);
    *out = b->prof;
    pthread_mutex_unlock(&b->relaunch_lock);
    return GB_OK;
}

extern "C" int gbi_cuda_clock_khz(int device)
{
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
    return khz;
}
