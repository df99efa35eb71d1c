/* ClientFrame decoding without per-envelope allocation. See wire.h. */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.pb-c.h"
#include "pb_wire.h"

/* Field numbers of proto/gpubridge.proto. */
enum { CF_ENVELOPE = 1, CF_BATCH = 2 };
enum { BATCH_ENVELOPES = 1 };
enum { ENV_CORR = 1, ENV_GRAIN = 2, ENV_KIND = 3, ENV_MESSAGE_TYPE = 4, ENV_PAYLOAD = 5, ENV_CONTROL = 6 };
enum { GRAIN_TYPE = 1, GRAIN_KEY = 2 };

#define BAD(...)                                \
    do {                                        \
        snprintf(err, errlen, __VA_ARGS__);     \
        return -1;                              \
    } while (0)

/* A known field must come with its declared wire type (protobuf-c refuses
 * the message otherwise). */
static int wrong_type(const gb_pb_field_t *fd, uint32_t want) { return fd->wt != want; }

static int grain_parse(gbi_env_t *e, const uint8_t *p, const uint8_t *end, char *err, size_t errlen)
{
    gb_pb_field_t fd;
    int r;
    e->has_grain = 1;
    while ((r = gb_pb_next(&p, end, &fd)) > 0) {
        if (fd.num == GRAIN_TYPE) {
            if (wrong_type(&fd, GB_PB_LEN) || fd.len > UINT32_MAX)
                BAD("GrainId.type is not a string");
            e->type = fd.p;
            e->type_len = (uint32_t)fd.len;
        } else if (fd.num == GRAIN_KEY) {
            if (wrong_type(&fd, GB_PB_VARINT))
                BAD("GrainId.key is not a varint");
            e->key = fd.v;
        }
    }
    if (r < 0)
        BAD("GrainId is not valid protobuf");
    return 0;
}

/* Control envelopes are rare: protobuf-c checks them (and decodes them
 * again when they are handled), so that a frame is refused as a whole for a
 * bad control as for any other bad field. */
static int control_valid(const uint8_t *p, size_t len)
{
    Gpubridge__Control *c = gpubridge__control__unpack(NULL, len, p);
    if (c)
        gpubridge__control__free_unpacked(c, NULL);
    return c != NULL;
}

/* Whether the string fields of a message of descriptor d (bytes p..end)
 * and of its sub-messages hold no NUL byte: 1 yes, 0 no, -1 bytes this
 * reader refuses (a field number past protobuf's 2^29 - 1, which protobuf-c
 * skips: what follows it must be checked too). protobuf-c ends its strings
 * at the first NUL, so a control naming grain type "T\0x" would act on
 * type T. */
static int strings_clean(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end)
{
    gb_pb_field_t fd;
    int r;
    while ((r = gb_pb_next(&p, end, &fd)) > 0) {
        const ProtobufCFieldDescriptor *f = fd.wt == GB_PB_LEN ? protobuf_c_message_descriptor_get_field(d, fd.num)
                                                               : NULL;
        if (!f)
            continue;
        if (f->type == PROTOBUF_C_TYPE_STRING && memchr(fd.p, 0, fd.len))
            return 0;
        const int sub = f->type == PROTOBUF_C_TYPE_MESSAGE ? strings_clean(f->descriptor, fd.p, fd.p + fd.len) : 1;
        if (sub != 1)
            return sub;
    }
    return r < 0 ? -1 : 1;
}

/* Parses one Envelope's fields into e, on top of what e holds (merge). */
static int env_parse(gbi_env_t *e, const uint8_t *p, const uint8_t *end, char *err, size_t errlen)
{
    gb_pb_field_t fd;
    int r;
    while ((r = gb_pb_next(&p, end, &fd)) > 0) {
        switch (fd.num) {
        case ENV_CORR:
            if (wrong_type(&fd, GB_PB_VARINT))
                BAD("Envelope.correlation_id is not a varint");
            e->corr = fd.v;
            break;
        case ENV_GRAIN:
            if (wrong_type(&fd, GB_PB_LEN))
                BAD("Envelope.grain is not a message");
            if (grain_parse(e, fd.p, fd.p + fd.len, err, errlen) != 0)
                return -1;
            break;
        case ENV_KIND:
            if (wrong_type(&fd, GB_PB_VARINT))
                BAD("Envelope.kind is not a varint");
            /* Past 32 bits: no kind (protobuf would keep the low bits). */
            e->kind = fd.v > UINT32_MAX ? UINT32_MAX : (uint32_t)fd.v;
            break;
        case ENV_MESSAGE_TYPE:
            if (wrong_type(&fd, GB_PB_VARINT))
                BAD("Envelope.message_type is not a varint");
            /* Past 32 bits: a type no grain takes, not the low bits
             * (kept whole for the error text). */
            e->message_type = fd.v;
            break;
        case ENV_PAYLOAD:
            if (wrong_type(&fd, GB_PB_LEN))
                BAD("Envelope.payload is not bytes");
            e->payload = fd.p;
            e->payload_len = fd.len;
            break;
        case ENV_CONTROL:
            if (wrong_type(&fd, GB_PB_LEN))
                BAD("Envelope.control is not a message");
            /* Merging two encodings would need a copy; nobody sends this. */
            if (e->has_control)
                BAD("Envelope has two control fields");
            e->has_control = 1;
            e->control = fd.p;
            e->control_len = fd.len;
            if (!control_valid(fd.p, fd.len))
                BAD("Envelope.control is not a Control message");
            r = strings_clean(&gpubridge__control__descriptor, fd.p, fd.p + fd.len);
            if (r == 0)
                BAD("Envelope.control has a string with a NUL byte in it");
            if (r < 0)
                BAD("Envelope.control is not a Control message");
            break;
        default:
            break; /* unknown field: skipped */
        }
    }
    if (r < 0)
        BAD("Envelope is not valid protobuf");
    return 0;
}

/* A fresh, zeroed envelope at the end of f->envs. */
static gbi_env_t *env_push(gbi_frame_t *f)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        gbi_env_t *ne = realloc(f->envs, cap * sizeof *ne);
        if (!ne)
            return NULL;
        f->envs = ne;
        f->cap = cap;
    }
    gbi_env_t *e = &f->envs[f->n++];
    memset(e, 0, sizeof *e);
    return e;
}

int gbi_frame_decode(gbi_frame_t *f, const uint8_t *data, size_t size, char *err, size_t errlen)
{
    const uint8_t *p = data, *end = size ? data + size : data; /* data may be NULL when empty */
    gb_pb_field_t fd;
    int r;
    f->bytes = data;
    f->size = size;
    f->n = 0;
    f->has_body = 0;
    while ((r = gb_pb_next(&p, end, &fd)) > 0) {
        if (fd.num != CF_ENVELOPE && fd.num != CF_BATCH)
            continue;
        if (wrong_type(&fd, GB_PB_LEN))
            BAD("ClientFrame body is not a message");
        /* A oneof member that comes again replaces what came before, as in
         * protobuf-c (the reference our tests hold us to). */
        f->n = 0;
        f->has_body = 1;
        if (fd.num == CF_ENVELOPE) {
            gbi_env_t *e = env_push(f);
            if (!e)
                BAD("out of memory decoding a frame");
            if (env_parse(e, fd.p, fd.p + fd.len, err, errlen) != 0)
                return -1;
            continue;
        }
        const uint8_t *bp = fd.p, *bend = fd.p + fd.len;
        gb_pb_field_t bf;
        int br;
        while ((br = gb_pb_next(&bp, bend, &bf)) > 0) {
            if (bf.num != BATCH_ENVELOPES)
                continue;
            if (wrong_type(&bf, GB_PB_LEN))
                BAD("Batch.envelopes is not a message");
            gbi_env_t *e = env_push(f);
            if (!e)
                BAD("out of memory decoding a frame");
            if (env_parse(e, bf.p, bf.p + bf.len, err, errlen) != 0)
                return -1;
        }
        if (br < 0)
            BAD("Batch is not valid protobuf");
    }
    if (r < 0)
        BAD("bytes are not a ClientFrame (protobuf decode failed)");
    return 0;
}

void gbi_frame_fini(gbi_frame_t *f)
{
    free(f->envs);
    memset(f, 0, sizeof *f);
}

/* Moves a view from the old bytes to the copy. */
static const uint8_t *rebase(const uint8_t *v, const uint8_t *from, const uint8_t *to)
{
    return v ? to + (v - from) : NULL;
}

gbi_frame_t *gbi_frame_hold(const gbi_frame_t *f, size_t from)
{
    size_t n = from < f->n ? f->n - from : 0;
    gbi_frame_t *h = malloc(sizeof *h + n * sizeof(gbi_env_t) + f->size);
    if (!h)
        return NULL;
    gbi_env_t *envs = (gbi_env_t *)(h + 1);
    uint8_t *bytes = (uint8_t *)(envs + n);
    if (f->size)
        memcpy(bytes, f->bytes, f->size);
    for (size_t i = 0; i < n; i++) {
        envs[i] = f->envs[from + i];
        envs[i].type = rebase(envs[i].type, f->bytes, bytes);
        envs[i].payload = rebase(envs[i].payload, f->bytes, bytes);
        envs[i].control = rebase(envs[i].control, f->bytes, bytes);
    }
    *h = (gbi_frame_t){.bytes = bytes, .size = f->size, .envs = envs, .n = n, .cap = n, .has_body = f->has_body};
    return h;
}

void gbi_name_print(char *out, size_t cap, const uint8_t *name, size_t len)
{
    size_t o = 0;
    if (!cap)
        return;
    for (size_t i = 0; i < len && i < 64 && o + 5 < cap; i++) {
        uint8_t c = name[i];
        if (c >= 0x20 && c < 0x7f)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o] = '\0';
}
