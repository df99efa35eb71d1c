/* gpubridge grain SDK: how a grain type is defined.
 *
 * A grain type is a state (state_size bytes per key, zeroed on first use),
 * a handler, and the message types it accepts. The handler is one GB_HD
 * function that runs on the host (cpu mode) and inside the type's ring kernel
 * (persistent and relaunch modes):
 *
 *   GB_HD uint16_t my_on_message(const gb_grain_ctx_t *ctx, void *state, uint16_t type,
 *                                const unsigned char *in, uint32_t in_len,
 *                                unsigned char *out, uint32_t out_cap,
 *                                uint32_t *out_len, uint32_t *aux);
 *
 * It returns a gb_slot_status (GB_SLOT_OK, or an error such as
 * GB_SLOT_HANDLER_ERROR with a detail code in *aux); what it writes to out
 * (at most out_cap bytes; *out_len) is the reply. One key's messages run one
 * at a time, in the order they were sent (turn semantics); different keys run
 * in parallel. docs/writing-grains.md has the rules and a walk-through.
 *
 * One macro then defines the type, in the grain's own translation unit:
 *
 *   static const gb_grain_msg_t my_msgs[] = {{1, "Deposit"}, {2, "Withdraw"}};
 *   GB_DEFINE_GRAIN(my_grain, "my.grain", sizeof(my_state_t), 0, my_on_message, my_msgs, NULL)
 *
 * Compiled by nvcc (a .cu file, or gpubridge_add_grain_library), it
 * instantiates the type's kernels, each a template specialised on this
 * handler; compiled as C it gives a cpu-only type. Either way it defines the
 * descriptor `gb_grain_<ident>` and registers it with the library's entry
 * point gb_grain_library(), which the daemon reads when it loads the library
 * (config: grains = ( { library = "/path/libmy.so"; } )).
 *
 * A handler may message other grains (gb_grain_send, gb_grain_forward below)
 * of the types its descriptor lists as targets (GB_DEFINE_GRAIN_TARGETS). */
#ifndef GPUBRIDGE_GRAIN_H
#define GPUBRIDGE_GRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/mail.h" /* gb_grain_mail_t: messages to other grains */
#include "gpubridge/ring.h" /* GB_HD, gb_slot_hdr_t, gb_slot_status */
#include "gpubridge/team.h" /* gb_grain_ctx_t, gb_team_sync, gb_team_sum, gb_team_any */

#ifdef __cplusplus
extern "C" {
#endif

/* The grain ABI: the descriptor's layout, the handler's context and the
 * kernels' arguments. A library built against another ABI is refused when
 * loaded. */
#define GB_GRAIN_ABI 5u

/* gb_grain_desc_t.flags */
#define GB_GRAIN_TEAM 1u /* each message runs on a team of threads (a GPU block); see team.h */
/* A team type that runs on every device of a bridge with several, each
 * device with its own arena, its handler reaching the others' through
 * gb_grain_ctx_t.peers (PageRank). Without it a team type runs on the first
 * device only, where all its keys share one arena. */
#define GB_GRAIN_DEVICES 2u

/* One request message type a grain accepts, and its name (for the Limits
 * control reply and error texts). */
typedef struct gb_grain_msg {
    uint32_t type; /* 1..0xFEFF: the GB_MSG_* of gpubridge/ring.h are reserved */
    const char *name;
} gb_grain_msg_t;

/* One request message type's limits (the Limits control reply). */
typedef struct gb_grain_limit {
    uint32_t message_type;
    const char *name;      /* the request message, e.g. "VectorAddRequest" */
    uint32_t max_payload;  /* bytes of Envelope.payload */
    uint32_t max_elements; /* entries of its repeated field; 0: none */
} gb_grain_limit_t;

/* A codec: between the protobuf messages clients send and the records the
 * handler reads (host side only). A grain without one has raw payloads: the
 * request's bytes are the record, the reply's record is the reply, and the
 * envelope's message type is the slot's. Statuses are Gpubridge__Status
 * values (proto/gpubridge.proto). */
typedef struct gb_grain_codec {
    /* Encodes pb (len bytes of message_type) into rec (cap bytes): sets
     * *rec_len and *slot_type; returns 0 (STATUS_OK) or a status with a
     * sentence in err. */
    int (*request)(uint64_t key, uint32_t message_type, const uint8_t *pb, size_t len, unsigned char *rec,
                   uint32_t cap, uint32_t *rec_len, uint16_t *slot_type, char *err, size_t errlen);
    /* Decodes reply record rec (hdr->len bytes) into out (cap bytes); 0, or
     * -1 when it does not fit or is malformed. */
    int (*reply)(const gb_slot_hdr_t *hdr, const unsigned char *rec, uint8_t *out, size_t cap, size_t *out_len,
                 uint32_t *message_type);
    /* Largest reply for a record of rec_len bytes (buffer sizing). */
    size_t (*reply_bound)(uint32_t rec_len);
    /* The request types' limits, into out (max entries); returns how many.
     * rec_cap: the largest record (slot or large area); payload_max: the
     * largest Envelope.payload a frame carries. NULL: payload_max for each
     * of the descriptor's message types. */
    size_t (*limits)(uint32_t rec_cap, uint32_t payload_max, gb_grain_limit_t *out, size_t max);
} gb_grain_codec_t;

/* For a codec's limits: sets entry n of out (when n < max) and returns
 * n + 1, so that a codec can count past max and say how many it has. */
static inline size_t gb_grain_limit_put(gb_grain_limit_t *out, size_t n, size_t max, uint32_t message_type,
                                        const char *name, uint32_t max_payload, uint32_t max_elements)
{
    if (n < max) {
        out[n].message_type = message_type;
        out[n].name = name;
        out[n].max_payload = max_payload;
        out[n].max_elements = max_elements;
    }
    return n + 1;
}

/* Optional host-side hooks of a grain type (any may be NULL). */
typedef struct gb_grain_hooks {
    const gb_grain_codec_t *codec; /* NULL: raw payloads */
    /* A text for an error reply (hdr->status, detail in hdr->aux), written
     * into buf; NULL: the status's generic text. */
    const char *(*error_text)(const gb_slot_hdr_t *hdr, char *buf, size_t cap);
    /* The largest reply to a request record (type, rec, len), when it can be
     * larger than the request (sizes the reply space of a large message).
     * NULL: no larger than the request. */
    uint32_t (*reply_max)(uint16_t type, const void *rec, uint32_t len);
    /* Team grains: bytes of the family's arena the type uses (0: none). */
    void (*set_arena)(uint64_t arena_size);
} gb_grain_hooks_t;

struct gb_grain_gpu; /* the kernels' entry points (gpubridge/device/ring_kernel.h: installed, not a stable API) */

/* A grain type. */
typedef struct gb_grain_desc {
    uint32_t abi;  /* GB_GRAIN_ABI */
    uint32_t size; /* sizeof(gb_grain_desc_t) */
    const char *name; /* letters, digits, '.', '_', '-'; at most 63 */
    uint32_t state_size; /* bytes per activation: 1..65536, rounded up to 8 */
    uint32_t flags;      /* GB_GRAIN_TEAM, GB_GRAIN_DEVICES */
    const gb_grain_msg_t *msgs;
    uint32_t n_msgs;
    uint32_t _pad;
    gb_grain_handler_fn cpu;         /* the handler, host copy */
    const struct gb_grain_gpu *gpu;  /* NULL: built without nvcc (cpu mode only) */
    const gb_grain_hooks_t *hooks;   /* NULL: raw payloads, no hooks */
    /* The grain types its handler sends to (gb_grain_send, gb_grain_forward
     * name them by index into this list), resolved to handles when the
     * bridge starts. At most GB_MAIL_MAX_TARGETS; none for team types. */
    const char *const *targets;
    uint32_t n_targets;
    uint32_t _pad2;
} gb_grain_desc_t;

/* ---- Messaging other grains (docs/writing-grains.md) -------------------
 *
 * From inside a handler, to grain (targets[target], key) of the types the
 * descriptor declares. The messages of a turn leave when the handler
 * returns, in the order it made them; each enters the target type's ring
 * like a client's request (turn semantics hold), and the messages from one
 * sender type to one target type arrive in the order they were sent. rec
 * (len bytes) is copied at once; it may lie in out. */

/* The key of the grain handling this turn (for a type that declares
 * targets; 0 otherwise). */
GB_HD uint64_t gb_grain_self_key(const gb_grain_ctx_t *ctx) { return ctx->mail ? ctx->mail->self_key : 0; }

/* A one-way message: nobody gets its reply. Returns GB_SLOT_OK, or
 * GB_SLOT_BAD_TARGET (an index the type does not declare), GB_SLOT_MAIL_FULL
 * (the turn's messages and reply must fit the out buffer, at most
 * GB_MAIL_MAX_MSGS of them). A send that is accepted here and cannot be
 * delivered later is counted (Telemetry.mail_undeliverable). */
GB_HD uint16_t gb_grain_send(const gb_grain_ctx_t *ctx, uint32_t target, uint64_t key, uint16_t type, const void *rec,
                             uint32_t len)
{
    return gb_mail_put(ctx->mail, target, key, type, 0, rec, len);
}

/* Passes this turn's request on as message `type` with record rec: the
 * target's reply goes to the original caller, with its correlation id.
 * Returns what the handler returns: GB_SLOT_FORWARDED, or the error above
 * (then the caller gets that error). One forward per turn; once forwarded,
 * the handler's reply is not sent. If the message cannot be delivered the
 * caller gets STATUS_UNDELIVERABLE with a sentence saying why. */
GB_HD uint16_t gb_grain_forward(const gb_grain_ctx_t *ctx, uint32_t target, uint64_t key, uint16_t type,
                                const void *rec, uint32_t len)
{
    const uint16_t st = gb_mail_put(ctx->mail, target, key, type, GB_MAIL_FORWARD, rec, len);
    return st == GB_SLOT_OK ? (uint16_t)GB_SLOT_FORWARDED : st;
}

/* The registration list of one library (or program): every GB_DEFINE_GRAIN
 * adds its descriptor when the library is loaded. */
typedef struct gb_grain_node {
    const gb_grain_desc_t *desc;
    struct gb_grain_node *next;
} gb_grain_node_t;

#if defined(__GNUC__)
/* One list per shared object: weak definitions merge across its translation
 * units, hidden ones are not seen by (nor taken from) the program. */
__attribute__((weak, visibility("hidden"))) gb_grain_node_t *gb_grain_list_head_;

/* The library's entry point, which the daemon looks up after dlopen: the
 * grain ABI the library was built for, and its grain types. */
uint32_t gb_grain_library(const gb_grain_node_t **head);
__attribute__((weak, visibility("default"))) uint32_t gb_grain_library(const gb_grain_node_t **head)
{
    *head = gb_grain_list_head_;
    return GB_GRAIN_ABI;
}
#endif

#ifdef __cplusplus
}
#endif

#define GB_GRAIN_ARGS_                                                                                               \
    const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in, uint32_t in_len,                \
        unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux
#define GB_GRAIN_PASS_ ctx, state, type, in, in_len, out, out_cap, out_len, aux

/* GB_KERNEL_PROFILE 1, defined before this header, builds the kernels of the types a file defines with
 * the benchmarks' profile counters and kernel switches (profile.cuh); 0, the default, everywhere else. */
#ifndef GB_KERNEL_PROFILE
#define GB_KERNEL_PROFILE 0
#endif

#if defined(__CUDACC__)
#include "gpubridge/device/grain_kernels.cuh"
/* The traits the kernels are specialised on, and the type's GPU entry points. */
#define GB_GRAIN_GPU_(ident, flags, handler, n_targets_)                                                             \
    struct gb_grain_traits_##ident {                                                                                 \
        static constexpr bool team = ((flags) & GB_GRAIN_TEAM) != 0;                                                \
        static constexpr uint32_t n_targets = (n_targets_);                                                          \
        static constexpr bool profile = (GB_KERNEL_PROFILE) != 0;                                                    \
        static __host__ __device__ __forceinline__ uint16_t on_message(GB_GRAIN_ARGS_)                               \
        {                                                                                                            \
            return handler(GB_GRAIN_PASS_);                                                                          \
        }                                                                                                            \
    };                                                                                                               \
    GBK_GRAIN_GPU(gb_grain_traits_##ident, gb_grain_gpu_##ident);
#define GB_GRAIN_GPU_PTR_(ident) (&gb_grain_gpu_##ident)
#define GB_GRAIN_EXTERN_ extern "C"
#else
#define GB_GRAIN_GPU_(ident, flags, handler, n_targets_)
#define GB_GRAIN_GPU_PTR_(ident) NULL
#ifdef __cplusplus /* a cpu-only grain in C++: the descriptor keeps its C name */
#define GB_GRAIN_EXTERN_ extern "C"
#else
#define GB_GRAIN_EXTERN_
#endif
#endif

/* Defines grain type `name` (a string) as C identifier ident: its kernels
 * (under nvcc), its host path, its descriptor gb_grain_<ident> and its
 * registration. msgs: an array of gb_grain_msg_t (not a pointer); hooks: a
 * const gb_grain_hooks_t * or NULL. */
#define GB_DEFINE_GRAIN(ident, name, state_size, flags, handler, msgs, hooks)                                        \
    GB_DEFINE_GRAIN_(ident, name, state_size, flags, handler, msgs, hooks, NULL, 0)

/* The same for a type whose handler messages other grains: targets is an
 * array of type names (not a pointer), e.g.
 *   static const char *const my_targets[] = {"shop.stock", "shop.audit"};
 * and the handler names targets[i] by i. A name no loaded type has stops the
 * bridge at start (FILE:LINE of the library). */
#define GB_DEFINE_GRAIN_TARGETS(ident, name, state_size, flags, handler, msgs, hooks, targets)                      \
    GB_DEFINE_GRAIN_(ident, name, state_size, flags, handler, msgs, hooks, targets,                                  \
                     (uint32_t)(sizeof(targets) / sizeof((targets)[0])))

#define GB_DEFINE_GRAIN_(ident, name, state_size, flags, handler, msgs, hooks, targets, n_targets)                  \
    GB_GRAIN_GPU_(ident, flags, handler, n_targets)                                                                  \
    static uint16_t gb_grain_cpu_##ident(GB_GRAIN_ARGS_) { return handler(GB_GRAIN_PASS_); }                        \
    GB_GRAIN_EXTERN_ const gb_grain_desc_t gb_grain_##ident;                                                          \
    GB_GRAIN_EXTERN_ const gb_grain_desc_t gb_grain_##ident = {                                                       \
        GB_GRAIN_ABI, (uint32_t)sizeof(gb_grain_desc_t), name, (uint32_t)(state_size), (uint32_t)(flags), msgs,      \
        (uint32_t)(sizeof(msgs) / sizeof((msgs)[0])), 0, gb_grain_cpu_##ident, GB_GRAIN_GPU_PTR_(ident), hooks,     \
        targets, n_targets, 0};                                                                                      \
    static gb_grain_node_t gb_grain_node_##ident = {&gb_grain_##ident, NULL};                                        \
    __attribute__((constructor)) static void gb_grain_register_##ident(void)                                        \
    {                                                                                                                \
        gb_grain_node_##ident.next = gb_grain_list_head_;                                                            \
        gb_grain_list_head_ = &gb_grain_node_##ident;                                                                \
    }

#endif
