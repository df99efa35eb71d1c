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
 * (config: grains = ( { library = "/path/libmy.so"; } )). */
#ifndef GPUBRIDGE_GRAIN_H
#define GPUBRIDGE_GRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "ring.h" /* GB_HD, gb_slot_hdr_t, gb_slot_status */
#include "team.h" /* gb_grain_ctx_t, gb_team_sync, gb_team_sum, gb_team_any */

#ifdef __cplusplus
extern "C" {
#endif

/* The grain ABI: the descriptor's layout and the kernels' arguments. A
 * library built against another ABI is refused when loaded. */
#define GB_GRAIN_ABI 1u

/* gb_grain_desc_t.flags */
#define GB_GRAIN_TEAM 1u /* each message runs on a team of threads (a GPU block); see team.h */

/* One request message type a grain accepts, and its name (for the Limits
 * control reply and error texts). */
typedef struct gb_grain_msg {
    uint32_t type; /* 1..0xFEFF: GB_MSG_* above are reserved */
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

struct gb_grain_gpu; /* the kernels' entry points (internal: ring_kernel.h) */

/* A grain type. */
typedef struct gb_grain_desc {
    uint32_t abi;  /* GB_GRAIN_ABI */
    uint32_t size; /* sizeof(gb_grain_desc_t) */
    const char *name; /* letters, digits, '.', '_', '-'; at most 63 */
    uint32_t state_size; /* bytes per activation: 1..65536, rounded up to 8 */
    uint32_t flags;      /* GB_GRAIN_TEAM */
    const gb_grain_msg_t *msgs;
    uint32_t n_msgs;
    uint32_t _pad;
    gb_grain_handler_fn cpu;         /* the handler, host copy */
    const struct gb_grain_gpu *gpu;  /* NULL: built without nvcc (cpu mode only) */
    const gb_grain_hooks_t *hooks;   /* NULL: raw payloads, no hooks */
} gb_grain_desc_t;

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

#if defined(__CUDACC__)
#include "grain_kernels.cuh"
/* The traits the kernels are specialised on, and the type's GPU entry points. */
#define GB_GRAIN_GPU_(ident, flags, handler)                                                                         \
    struct gb_grain_traits_##ident {                                                                                 \
        static constexpr bool team = ((flags) & GB_GRAIN_TEAM) != 0;                                                \
        static __host__ __device__ __forceinline__ uint16_t on_message(GB_GRAIN_ARGS_)                               \
        {                                                                                                            \
            return handler(GB_GRAIN_PASS_);                                                                          \
        }                                                                                                            \
    };                                                                                                               \
    GBK_GRAIN_GPU(gb_grain_traits_##ident, gb_grain_gpu_##ident);
#define GB_GRAIN_GPU_PTR_(ident) (&gb_grain_gpu_##ident)
#define GB_GRAIN_EXTERN_ extern "C"
#else
#define GB_GRAIN_GPU_(ident, flags, handler)
#define GB_GRAIN_GPU_PTR_(ident) NULL
#define GB_GRAIN_EXTERN_
#endif

/* Defines grain type `name` (a string) as C identifier ident: its kernels
 * (under nvcc), its host path, its descriptor gb_grain_<ident> and its
 * registration. msgs: an array of gb_grain_msg_t (not a pointer); hooks: a
 * const gb_grain_hooks_t * or NULL. */
#define GB_DEFINE_GRAIN(ident, name, state_size, flags, handler, msgs, hooks)                                        \
    GB_GRAIN_GPU_(ident, flags, handler)                                                                             \
    static uint16_t gb_grain_cpu_##ident(GB_GRAIN_ARGS_) { return handler(GB_GRAIN_PASS_); }                        \
    GB_GRAIN_EXTERN_ const gb_grain_desc_t gb_grain_##ident;                                                          \
    GB_GRAIN_EXTERN_ const gb_grain_desc_t gb_grain_##ident = {                                                       \
        GB_GRAIN_ABI, (uint32_t)sizeof(gb_grain_desc_t), name, (uint32_t)(state_size), (uint32_t)(flags), msgs,      \
        (uint32_t)(sizeof(msgs) / sizeof((msgs)[0])), 0, gb_grain_cpu_##ident, GB_GRAIN_GPU_PTR_(ident), hooks};    \
    static gb_grain_node_t gb_grain_node_##ident = {&gb_grain_##ident, NULL};                                        \
    __attribute__((constructor)) static void gb_grain_register_##ident(void)                                        \
    {                                                                                                                \
        gb_grain_node_##ident.next = gb_grain_list_head_;                                                            \
        gb_grain_list_head_ = &gb_grain_node_##ident;                                                                \
    }

#endif
