/* Bounded decoding of a peer's protobuf replies. protobuf-c's unpack
 * recurses once per nested message with no limit, and GrainTypeStatus and
 * Telemetry contain themselves (`devices`): a 40 KB reply nesting them
 * 10,000 deep overflows the caller's stack. A bridge nests them one level;
 * this scan, guided by the message's descriptor, refuses anything deeper
 * than GBCI_PB_MAX_DEPTH before unpack sees it. */
#include "client_internal.h"

/* One varint at p[*i] (of len bytes) into *v; false when it runs past the
 * end or past 10 bytes. */
static bool pb_varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70 && *i < len; shift += 7) {
        const uint8_t b = p[(*i)++];
        x |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Whether message d in p[0, len) nests its submessages at most `left`
 * levels deeper. Malformed bytes pass: unpack refuses them itself. */
static bool pb_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, unsigned left)
{
    size_t i = 0;
    while (i < len) {
        uint64_t key, n;
        if (!pb_varint(p, len, &i, &key))
            return true;
        switch (key & 7) {
        case 0:
            if (!pb_varint(p, len, &i, &n))
                return true;
            break;
        case 1:
            if (len - i < 8)
                return true;
            i += 8;
            break;
        case 5:
            if (len - i < 4)
                return true;
            i += 4;
            break;
        case 2: {
            if (!pb_varint(p, len, &i, &n) || n > len - i)
                return true;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                (left == 0 || !pb_depth_ok(f->descriptor, p + i, (size_t)n, left - 1)))
                return false;
            i += (size_t)n;
            break;
        }
        default:
            return true; /* groups and invalid wire types: unpack's to refuse */
        }
    }
    return true;
}

ProtobufCMessage *gbci_pb_unpack(const ProtobufCMessageDescriptor *d, size_t len, const uint8_t *data)
{
    if (!pb_depth_ok(d, data, len, GBCI_PB_MAX_DEPTH))
        return NULL;
    return protobuf_c_message_unpack(d, NULL, len, data);
}
