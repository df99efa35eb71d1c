/* Bounded decoding of a peer's protobuf replies. protobuf-c's unpack
 * recurses once per nested message with no limit, and GrainTypeStatus and
 * Telemetry contain themselves (`devices`): a 40 KB reply nesting them
 * 10,000 deep overflows the caller's stack. A bridge nests them one level;
 * this scan, guided by the message's descriptor, refuses anything deeper
 * than GBCI_PB_MAX_DEPTH before unpack sees it. */
#include "client_internal.h"
#include "pb_wire.h"

/* Whether message d in p[0, len) nests its submessages at most `left`
 * levels deeper. Malformed bytes pass: unpack refuses them itself. */
static bool pb_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, unsigned left)
{
    const uint8_t *at = p, *end = p + len;
    gb_pb_field_t f;
    while (gb_pb_next(&at, end, &f) == 1) {
        if (f.wt != GB_PB_LEN)
            continue;
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(d, f.num);
        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE &&
            (left == 0 || !pb_depth_ok(fd->descriptor, f.p, f.len, left - 1)))
            return false;
    }
    return true;
}

ProtobufCMessage *gbci_pb_unpack(const ProtobufCMessageDescriptor *d, size_t len, const uint8_t *data)
{
    if (!pb_depth_ok(d, data, len, GBCI_PB_MAX_DEPTH))
        return NULL;
    return protobuf_c_message_unpack(d, NULL, len, data);
}
