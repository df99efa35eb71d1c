"""Hand-encoded gpubridge frames for the shell tests that need no generated
protobuf modules (tests/test_metrics_held.sh, test_supervise_drain_refusals.sh):
ClientFrames of echo requests out, and the (correlation id, status) of each
Reply of a ServerFrame back."""


def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7f) | 0x80])
        n >>= 7
    return out + bytes([n])


def field(number, data):
    """A length-delimited field."""
    return bytes([number << 3 | 2]) + varint(len(data)) + data


def echo_env(corr, key, data):
    """Envelope{correlation_id, grain{"echo", key}, KIND_REQUEST, message_type 1,
    payload EchoRequest{data}}."""
    grain = field(1, b"echo") + b"\x10" + varint(key)
    return (b"\x08" + varint(corr) + field(2, grain) + b"\x18\x01\x20\x01"
            + field(5, field(2, data)))


def batch(envs):
    """ClientFrame{batch{envelopes}}."""
    return field(2, b"".join(field(1, e) for e in envs))


def _varint_at(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return n, i


def _reply(buf):
    corr = status = 0
    i = 0
    while i < len(buf):
        key, i = _varint_at(buf, i)
        if key & 7 == 0:
            value, i = _varint_at(buf, i)
            if key >> 3 == 1:
                corr = value
            elif key >> 3 == 2:
                status = value
        elif key & 7 == 2:
            n, i = _varint_at(buf, i)
            i += n
        else:
            raise ValueError("wire type %d in a Reply" % (key & 7))
    return corr, status


def replies(frame):
    """(correlation id, status) of each Reply in a ServerFrame (field 1: one
    Reply; field 2: a ReplyBatch of Replies in its field 1)."""
    key, i = _varint_at(frame, 0)
    n, i = _varint_at(frame, i)
    body = frame[i:i + n]
    if key >> 3 == 1:
        return [_reply(body)]
    out, j = [], 0
    while j < len(body):
        _, j = _varint_at(body, j)
        n, j = _varint_at(body, j)
        out.append(_reply(body[j:j + n]))
        j += n
    return out
