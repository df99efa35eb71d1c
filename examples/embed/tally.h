/* embed.tally: a grain type defined in the embedding program itself. One
 * grain per key keeps a running total. Raw payloads (all little-endian):
 *   TALLY_ADD (1): int64 amount        reply: tally_reply_t
 *   TALLY_GET (2): empty               reply: tally_reply_t
 * An ADD whose record is not one int64 is refused: status
 * GB_SLOT_HANDLER_ERROR, aux TALLY_E_RECORD. */
#ifndef TALLY_H
#define TALLY_H

#include <stdint.h>

#include <gpubridge/grain.h>

enum { TALLY_ADD = 1, TALLY_GET = 2 };
enum { TALLY_E_RECORD = 1 };

typedef struct tally_state {
    int64_t total;
    uint64_t count; /* ADDs applied */
} tally_state_t;

typedef tally_state_t tally_reply_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Defined by GB_DEFINE_GRAIN in tally.c. */
extern const gb_grain_desc_t gb_grain_embed_tally;
#ifdef __cplusplus
}
#endif

#endif
