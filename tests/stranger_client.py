#!/usr/bin/python3
"""A client written from docs/protocol.md and the .proto files alone.

It checks that the wire documentation is enough to talk to a bridge: every
expectation below comes from a sentence of protocol.md (or a .proto comment),
quoted or named next to the check, never from the bridge's source. It uses no
code of the project: the Python modules are generated here with protoc from
the schemas' folders, as protocol.md says.

    stranger_client.py ENDPOINT PROTO_DIRS [--no-arena]

PROTO_DIRS: the folders of the .proto files, separated by ':' (proto/ and
each grain's folder grains/<name>/, or an install's share/gpubridge/proto/).

--no-arena: the bridge runs with arena_mb = 0, so its PageRank types are
configured but not served; checks only that.

Exit 0 when every check passes, 1 on the first failure, 77 when python3-zmq,
python3-protobuf or protoc is missing.
"""
import importlib
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import zmq
    import google.protobuf  # noqa: F401  (python3-protobuf)
except ImportError as e:
    print(f"SKIP: {e} (install python3-zmq and python3-protobuf)")
    sys.exit(77)

# A guard against a hang, not a speed check: a reply that does not come within
# this long fails the test instead of blocking it.
GUARD_MS = 15000


def gen_modules(proto_dirs):
    """protocol.md: 'protoc --python_out=gen -I proto -I grains/echo ...
    proto/*.proto grains/*/*.proto'; gpubridge.proto imports control.proto,
    so generate all together."""
    if not shutil.which("protoc"):
        print("SKIP: no protoc (install protobuf-compiler)")
        sys.exit(77)
    gen = tempfile.mkdtemp(prefix="gbstranger.")
    dirs = [d for d in proto_dirs.split(":") if d]
    protos = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d)
                    if f.endswith(".proto"))
    incs = [a for d in dirs for a in ("-I", d)]
    subprocess.run(["protoc", f"--python_out={gen}"] + incs + protos,
                   check=True)
    sys.path.insert(0, gen)
    return gen


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


# --- hand encoding, for frames the generated code refuses to build ---------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, body):
    """One protobuf field: wire 0 varint (body an int), 2 length-delimited."""
    if wire == 0:
        return varint(num << 3) + varint(body)
    return varint((num << 3) | 2) + varint(len(body)) + body


class Stranger:
    def __init__(self, endpoint):
        self.pb = importlib.import_module("gpubridge_pb2")
        self.ctl = importlib.import_module("control_pb2")
        self.va = importlib.import_module("vecadd_pb2")
        self.ec = importlib.import_module("echo_pb2")
        self.ctx = zmq.Context()
        self.endpoint = endpoint
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.next_id = 1
        self.replies = {}       # correlation id -> Reply not yet claimed
        self.seen = set()       # every correlation id answered so far
        self.sent = set()       # every correlation id sent
        self.zero = []          # replies with correlation id 0 (frame refusals)
        self.max_batch = 256    # Limits.max_replies_per_frame, learnt later
        self.max_frame = None   # Limits.max_message_size, learnt later

    # --- framing ------------------------------------------------------------

    def new_id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def env(self, kind, grain_type=None, key=0, message_type=0, payload=b"",
            control=None, cid=None):
        pb = self.pb
        e = pb.Envelope(correlation_id=self.new_id() if cid is None else cid,
                        kind=kind, message_type=message_type, payload=payload)
        self.sent.add(e.correlation_id)
        if grain_type is not None:
            e.grain.CopyFrom(pb.GrainId(type=grain_type, key=key))
        if control is not None:
            e.control.CopyFrom(control)
        return e

    def send_env(self, e):
        self.sock.send(self.pb.ClientFrame(envelope=e).SerializeToString())

    def send_batch(self, envs):
        f = self.pb.ClientFrame()
        f.batch.envelopes.extend(envs)
        self.sock.send(f.SerializeToString())

    def pump(self, timeout_ms=GUARD_MS):
        """Reads one ServerFrame ('either one Reply or a ReplyBatch ... A
        client must accept both bodies at any time'). False on timeout."""
        if not self.sock.poll(timeout_ms, zmq.POLLIN):
            return False
        parts = self.sock.recv_multipart()
        # 'Every message the bridge sends back has one part (plus the
        # delimiter if the client used one)'.
        if len(parts) == 2:
            check(parts[0] == b"", f"a two-part reply without an empty delimiter: {parts[0]!r}")
        else:
            check(len(parts) == 1, f"a reply of {len(parts)} parts")
        frame = self.pb.ServerFrame.FromString(parts[-1])
        body = frame.WhichOneof("body")
        check(body in ("reply", "batch"), "a ServerFrame with neither body")
        rs = [frame.reply] if body == "reply" else list(frame.batch.replies)
        # 'a ReplyBatch of up to 256 replies (Limits.max_replies_per_frame)'
        check(len(rs) <= self.max_batch,
              f"a ReplyBatch of {len(rs)} replies, above max_replies_per_frame {self.max_batch}")
        for r in rs:
            if r.correlation_id == 0:
                self.zero.append(r)
                continue
            # 'exactly one Reply' per request: a second reply to an id is a bug
            check(r.correlation_id not in self.seen and r.correlation_id in self.sent,
                  f"a second or unexpected reply for id {r.correlation_id}")
            self.seen.add(r.correlation_id)
            self.replies[r.correlation_id] = r
        return True

    def wait(self, ids):
        """The replies to these ids, matched by correlation id only."""
        ids = list(ids)
        while any(i not in self.replies for i in ids):
            missing = [i for i in ids if i not in self.replies]
            check(self.pump(), f"no reply to ids {missing[:5]} ({len(missing)} missing)")
        return [self.replies.pop(i) for i in ids]

    def wait_zero(self):
        """The next reply with correlation id 0 (a frame refused as a whole)."""
        while not self.zero:
            check(self.pump(), "no correlation-id-0 reply to a refused frame")
        return self.zero.pop(0)

    def call(self, e):
        self.send_env(e)
        return self.wait([e.correlation_id])[0]

    # --- grain and control calls ---------------------------------------------

    def vecadd(self, op, a, b, key=1, cid=None):
        va = self.va
        req = va.VectorAddRequest(op=op, a=a, b=b)
        return self.env(self.pb.KIND_REQUEST, "vecadd", key,
                        va.VECTOR_ADD_MESSAGE_TYPE_REQUEST, req.SerializeToString(), cid=cid)

    def echo(self, key=1, seq=0, data=b"", kind=None):
        ec = self.ec
        req = ec.EchoRequest(sequence=seq, data=data, client_time_ns=seq * 1000 + 7)
        return self.env(self.pb.KIND_REQUEST if kind is None else kind, "echo", key,
                        ec.ECHO_MESSAGE_TYPE_REQUEST, req.SerializeToString())

    def control(self, **op):
        c = self.ctl.Control(**op)
        return self.env(self.pb.KIND_CONTROL, control=c)

    def control_ok(self, want_type, **op):
        """A control call that must succeed; its payload decoded by the
        Reply.message_type ('a ControlMessageType naming the message in
        payload, so a client can decode it without remembering what it
        asked')."""
        r = self.call(self.control(**op))
        check(r.status == self.pb.STATUS_OK, f"control {op}: {self.status(r)}")
        check(r.message_type == want_type,
              f"control {op}: reply message_type {r.message_type}, want {want_type}")
        ctl = self.ctl
        by_type = {ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS: ctl.GrainTypeStatus,
                   ctl.CONTROL_MESSAGE_TYPE_TELEMETRY: ctl.Telemetry,
                   ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST: ctl.GrainTypeList,
                   ctl.CONTROL_MESSAGE_TYPE_DETECT_REPORT: ctl.DetectReport,
                   ctl.CONTROL_MESSAGE_TYPE_LIMITS: ctl.Limits}
        if r.message_type == 0:
            check(r.payload == b"", "message_type 0 with a payload")
            return None
        return by_type[r.message_type].FromString(r.payload)

    def status(self, r):
        name = self.pb.Status.Name(r.status) if r.status in self.pb.Status.values() else r.status
        return f"{name} {r.error!r}"

    def telemetry(self, t):
        return self.control_ok(self.ctl.CONTROL_MESSAGE_TYPE_TELEMETRY,
                               telemetry_request=self.ctl.TelemetryRequest(grain_type=t))

    def grain_status(self, t):
        return self.control_ok(self.ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS,
                               status_request=self.ctl.StatusRequest(grain_type=t))

    def expect(self, r, status, what):
        check(r.status == status,
              f"{what}: got {self.status(r)}, want {self.pb.Status.Name(status)}")
        if status != self.pb.STATUS_OK:
            # 'error (3, a sentence when the status is not OK) ... payload
            # (5, ...; empty on errors)'
            check(r.error != "", f"{what}: an error reply without a sentence")
            check(r.payload == b"", f"{what}: an error reply with a payload")

    def alive(self, what):
        """The bridge still serves: an echo round trip on this connection."""
        r = self.call(self.echo(key=424242, seq=1, data=b"still there?"))
        self.expect(r, self.pb.STATUS_OK, f"serving after {what}")
        resp = self.ec.EchoResponse.FromString(r.payload)
        check(resp.data == b"still there?", f"serving after {what}: echo data")


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same_floats(got, want):
    return len(got) == len(want) and all(
        (math.isnan(g) and math.isnan(w)) or g == w for g, w in zip(got, want))


OPS = {0: lambda x, y: x + y, 1: lambda x, y: x - y, 2: lambda x, y: x * y,
       3: lambda x, y: x / y if y != 0 else (math.nan if x == 0 or math.isnan(x)
                                             else math.copysign(math.inf, x) * math.copysign(1, y))}


def want_vec(op, a, b):
    """'result[i] = a[i] op b[i], float32, IEEE division'."""
    return [f32(OPS[op](f32(x), f32(y))) for x, y in zip(a, b)]


# --- the checks, in order ----------------------------------------------------

def t_discovery(s):
    ctl = s.ctl
    lst = s.control_ok(ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST,
                       list_grain_types=ctl.ListGrainTypes())
    names = list(lst.grain_types)
    check("vecadd" in names and "echo" in names, f"ListGrainTypes: {names}")
    lim = s.control_ok(ctl.CONTROL_MESSAGE_TYPE_LIMITS, limits_request=ctl.LimitsRequest())
    # 'grain_types[]: one GrainTypeLimits per hosted type, in configuration
    # order' and ListGrainTypes: 'the names, in configuration order'
    check([g.grain_type for g in lim.grain_types] == names,
          f"Limits types {[g.grain_type for g in lim.grain_types]} != list {names}")
    check(lim.max_message_size >= 64, f"max_message_size {lim.max_message_size}")
    check(1 <= lim.max_replies_per_frame <= 256,
          f"max_replies_per_frame {lim.max_replies_per_frame}")
    s.max_frame = lim.max_message_size
    s.max_batch = lim.max_replies_per_frame
    s.limits = {g.grain_type: g for g in lim.grain_types}
    for g in lim.grain_types:
        check(g.record_size == g.slot_size - 32, f"{g.grain_type}: record_size != slot_size - 32")
    va = s.limits["vecadd"]
    mts = {m.message_type: m for m in va.message_types}
    check(1 in mts and mts[1].name == "VectorAddRequest", f"vecadd message types {list(mts)}")
    s.vec_max = mts[1]
    # the upstream case sends 100,000 elements; 'at 1 MiB: vecadd 131,065'
    check(s.vec_max.max_elements >= 100000 or s.max_frame < 1048576,
          f"vecadd max_elements {s.vec_max.max_elements}")
    s.echo_max = {m.message_type: m for m in s.limits["echo"].message_types}[1]
    st = s.grain_status("vecadd")
    # 'GrainTypeStatus ... carries it in field 14, max_message_size'
    check(st.max_message_size == s.max_frame, "status and Limits disagree on max_message_size")
    check(st.grain_type == "vecadd" and st.mode == "cpu", f"status {st}")
    check(st.state == ctl.GRAIN_STATE_ACTIVE, f"vecadd state {st.state}")
    check(st.placement == ctl.PLACEMENT_HOST and st.device == -1, "cpu mode placement/device")
    det = s.control_ok(ctl.CONTROL_MESSAGE_TYPE_DETECT_REPORT, detect_request=ctl.DetectRequest())
    check(det.mode == "cpu", f"DetectReport mode {det.mode!r}")
    return f"types {names}, max_message_size {s.max_frame}, vecadd max_elements {s.vec_max.max_elements}"


def t_echo(s):
    r = s.call(s.echo(key=7001, seq=11, data=b"\x00hello\xff"))
    s.expect(r, s.pb.STATUS_OK, "echo")
    check(r.message_type == s.ec.ECHO_MESSAGE_TYPE_RESPONSE, f"echo reply type {r.message_type}")
    e = s.ec.EchoResponse.FromString(r.payload)
    check((e.sequence, e.data, e.client_time_ns) == (11, b"\x00hello\xff", 11007), f"echo {e}")
    check(e.grain_count == 1, f"a new key's first message: grain_count {e.grain_count}")
    e = s.ec.EchoResponse.FromString(s.call(s.echo(key=7001, seq=12)).payload)
    check(e.grain_count == 2, f"second message: grain_count {e.grain_count}")
    # 'the key of the grain (any uint64, 0 included)'
    for key in (0, 2**64 - 1):
        s.expect(s.call(s.echo(key=key)), s.pb.STATUS_OK, f"echo key {key}")


def vec_call(s, op, a, b, what, key=1, cid=None):
    r = s.call(s.vecadd(op, a, b, key=key, cid=cid))
    s.expect(r, s.pb.STATUS_OK, what)
    check(r.message_type == s.va.VECTOR_ADD_MESSAGE_TYPE_RESPONSE, f"{what}: reply type")
    got = list(s.va.VectorAddResponse.FromString(r.payload).result)
    check(same_floats(got, want_vec(op, a, b)), f"{what}: wrong result {got[:8]}")


def t_vecadd(s):
    Op = s.va.VectorAddRequest
    a, b = [1, 2, 3, 4], [10, 20, 30, 40]
    for op in (Op.OP_ADD, Op.OP_SUB, Op.OP_MUL, Op.OP_DIV):
        vec_call(s, op, a, b, f"vecadd {Op.Op.Name(op)}")
    r = s.call(s.vecadd(Op.OP_ADD, a, b))
    check(list(s.va.VectorAddResponse.FromString(r.payload).result) == [11, 22, 33, 44], "1..4 + 10..40")
    for n in (1000, 100000):
        a = [i * 0.5 for i in range(n)]
        b = [(i % 97) + 1.25 for i in range(n)]
        for op in (Op.OP_ADD, Op.OP_SUB, Op.OP_MUL, Op.OP_DIV):
            vec_call(s, op, a, b, f"vecadd {n} {Op.Op.Name(op)}", key=n)
    # 'Division follows IEEE 754 ...: x/0 is +-inf, 0/0 is nan'
    vec_call(s, Op.OP_DIV, [1, -1, 0], [0, 0, 0], "vecadd division by zero")
    # 'Empty vectors give an empty result'
    vec_call(s, Op.OP_ADD, [], [], "vecadd empty vectors")


def t_limits_edge(s):
    """'A request within both bounds is not refused as too large': max_elements
    in its shortest encoding (op add, unset), with 10-byte id and key."""
    n = s.vec_max.max_elements
    a = [1.0] * n
    e = s.vecadd(s.va.VectorAddRequest.OP_ADD, a, a, key=2**64 - 1, cid=2**64 - 1)
    check(len(e.payload) <= s.vec_max.max_payload,
          f"{n} elements make {len(e.payload)} bytes > max_payload {s.vec_max.max_payload}")
    vec_call(s, 0, a, a, f"vecadd of max_elements ({n})", key=2**64 - 1, cid=2**64 - 1)
    # One more, with the same 10-byte id and key: past the frame's bound, so
    # 'the whole frame is refused (correlation id 0)'. (With smaller ids 'a
    # few bytes more pass', so max_elements + 1 is not refused then.)
    a.append(1.0)
    e = s.vecadd(0, a, a, key=2**64 - 1, cid=2**64 - 3)
    s.send_env(e)
    while e.correlation_id not in s.replies and not s.zero:
        check(s.pump(), "no reply to max_elements + 1")
    r = s.replies.pop(e.correlation_id) if e.correlation_id in s.replies else s.zero.pop(0)
    s.expect(r, s.pb.STATUS_TOO_LARGE, "vecadd of max_elements + 1")
    # echo: a payload of exactly max_payload comes back whole
    m = s.echo_max.max_payload
    rest = len(s.ec.EchoRequest(client_time_ns=7).SerializeToString())
    data = b"x" * (m - rest - 1 - len(varint(m)))   # data's tag and length
    e = s.echo(key=2**64 - 1, data=data)
    e.correlation_id = 2**64 - 2
    s.sent.add(e.correlation_id)
    check(len(e.payload) == m, f"echo payload {len(e.payload)} != max_payload {m}")
    r = s.call(e)
    s.expect(r, s.pb.STATUS_OK, "echo of max_payload")
    check(s.ec.EchoResponse.FromString(r.payload).data == data, "echo of max_payload: data")
    return f"vecadd {n} elements, echo {m} bytes"


def t_batch(s):
    envs, want = [], {}
    for i in range(150):   # 3 fresh keys, 50 messages each, in order
        e = s.echo(key=8000 + i % 3, seq=i)
        envs.append(e)
        want[e.correlation_id] = ("echo", i, i // 3 + 1)
    for i in range(150):
        a, b = [float(i), 2.0], [3.0, float(i)]
        e = s.vecadd(2, a, b, key=i % 5)
        envs.append(e)
        want[e.correlation_id] = ("vecadd", want_vec(2, a, b), None)
    s.send_batch(envs)
    for r in s.wait(want):
        kind, x, count = want[r.correlation_id]
        s.expect(r, s.pb.STATUS_OK, f"batch {kind}")
        if kind == "echo":
            e = s.ec.EchoResponse.FromString(r.payload)
            # 'One grain, one client connection: messages are handled in the
            # order the client sent them'
            check(e.sequence == x and e.grain_count == count,
                  f"batch echo seq {e.sequence} count {e.grain_count}, want {x} {count}")
        else:
            check(same_floats(list(s.va.VectorAddResponse.FromString(r.payload).result), x),
                  "batch vecadd result")
    # 'each envelope in it is handled, and answered, exactly as if it had
    # come alone': one bad envelope among good ones
    good1, bad, good2 = s.echo(key=8100), s.echo(), s.echo(key=8100)
    bad.grain.type = "vecad"
    s.send_batch([good1, bad, good2])
    r1, rb, r2 = s.wait([good1.correlation_id, bad.correlation_id, good2.correlation_id])
    s.expect(r1, s.pb.STATUS_OK, "batch good 1")
    s.expect(rb, s.pb.STATUS_UNKNOWN_GRAIN_TYPE, "batch bad")
    s.expect(r2, s.pb.STATUS_OK, "batch good 2")
    # 'An empty Batch carries nothing and gets no reply'
    s.send_batch([])
    s.alive("an empty batch")
    check(not s.zero, f"an empty batch was answered: {s.zero}")
    return "300 envelopes"


def t_one_way(s):
    pb = s.pb
    s.send_env(s.echo(key=8200, seq=1, kind=pb.KIND_ONE_WAY))
    e = s.ec.EchoResponse.FromString(s.call(s.echo(key=8200, seq=2)).payload)
    check(e.grain_count == 2, f"a one-way then a request: grain_count {e.grain_count}")
    # 'a failed one gets an error reply only if its correlation id is non-zero'
    bad = s.echo(kind=pb.KIND_ONE_WAY)
    bad.grain.type = "no.such.type"
    s.expect(s.call(bad), pb.STATUS_UNKNOWN_GRAIN_TYPE, "a failed one-way")
    bad.correlation_id = 0
    s.send_env(bad)
    s.alive("a failed one-way with id 0")


def t_bad_envelopes(s):
    pb, ctl = s.pb, s.ctl
    cases = []

    def case(what, env, status):
        cases.append((what, env, status))

    e = s.echo(); e.grain.type = "vecad"
    case("unknown grain type", e, pb.STATUS_UNKNOWN_GRAIN_TYPE)
    for mt in (2, 7, 0, 0xFF00, 0xFFFF, 0x10000, 2**32 - 1):
        e = s.vecadd(0, [1], [2]); e.message_type = mt
        case(f"vecadd message type {mt:#x}", e, pb.STATUS_UNKNOWN_MESSAGE_TYPE)
    e = s.vecadd(0, [1], [2]); e.payload = b"\xff\xff\xff"
    case("a payload that is not a VectorAddRequest", e, pb.STATUS_MALFORMED)
    case("vectors of different lengths", s.vecadd(0, [1, 2, 3], [1, 2]), pb.STATUS_MALFORMED)
    e = s.vecadd(0, [1], [2]); e.payload = field(1, 0, 7) + field(2, 2, struct.pack("<f", 1)) \
        + field(3, 2, struct.pack("<f", 2))
    case("unknown op 7", e, pb.STATUS_MALFORMED)
    e = s.echo(); e.kind = pb.KIND_UNSPECIFIED
    case("kind unset", e, pb.STATUS_MISSING_FIELD)
    e = s.echo(); e.kind = 9
    case("kind 9", e, pb.STATUS_MISSING_FIELD)
    e = s.echo(); e.ClearField("grain")
    case("no grain", e, pb.STATUS_MISSING_FIELD)
    e = s.echo(); e.grain.type = ""
    case("empty grain type", e, pb.STATUS_MISSING_FIELD)
    case("control envelope without control", s.env(pb.KIND_CONTROL), pb.STATUS_MISSING_FIELD)
    case("control without an operation", s.env(pb.KIND_CONTROL, control=ctl.Control()),
         pb.STATUS_MISSING_FIELD)
    for op, msg in (("status_request", ctl.StatusRequest), ("telemetry_request", ctl.TelemetryRequest),
                    ("activate", ctl.Activate), ("deactivate", ctl.Deactivate),
                    ("terminate", ctl.Terminate), ("deactivate_grain", ctl.DeactivateGrain)):
        case(f"{op} without grain_type", s.control(**{op: msg()}), pb.STATUS_MISSING_FIELD)
        case(f"{op} of an unknown type", s.control(**{op: msg(grain_type="nope")}),
             pb.STATUS_UNKNOWN_GRAIN_TYPE)
    for what, e, status in cases:
        s.expect(s.call(e), status, what)
        s.alive(what)
    # 'control (6): ... ignored otherwise'; a control envelope needs 'no grain'
    e = s.echo(); e.control.CopyFrom(ctl.Control(list_grain_types=ctl.ListGrainTypes()))
    s.expect(s.call(e), pb.STATUS_OK, "a request with a stray control")
    e = s.control(list_grain_types=ctl.ListGrainTypes()); e.grain.type = "echo"
    s.expect(s.call(e), pb.STATUS_OK, "a control with a stray grain")
    return f"{len(cases)} bad envelopes"


def frame_refused(s, parts, status, what):
    """A frame refused as a whole: one reply, correlation id 0."""
    s.sock.send_multipart(parts)
    r = s.wait_zero()
    s.expect(r, status, what)
    s.alive(what)


def t_bad_frames(s):
    pb = s.pb
    before = s.telemetry("echo").frames_too_large
    # 'A frame larger than max_message_size is refused before it is decoded:
    # STATUS_TOO_LARGE ... correlation id 0'; the id inside is never answered
    big = s.echo(data=b"y" * s.max_frame)
    s.sent.discard(big.correlation_id)
    frame_refused(s, [pb.ClientFrame(envelope=big).SerializeToString()], pb.STATUS_TOO_LARGE,
                  "an oversized frame")
    check(s.telemetry("echo").frames_too_large == before + 1, "Telemetry.frames_too_large")
    # 'bytes that are not protobuf ... one reply with correlation id 0 and
    # STATUS_MALFORMED'
    for junk in (b"\xff\xff\xff\xff\xff", b"\x0a\x05abc", b"GET / HTTP/1.1\r\n\r\n",
                 bytes(range(256)) * 4):
        frame_refused(s, [junk], pb.STATUS_MALFORMED, f"garbage {junk[:8]!r}")
    # 'a ClientFrame with neither body is refused (STATUS_MALFORMED,
    # correlation id 0)'; an empty message decodes as such a frame
    frame_refused(s, [b""], pb.STATUS_MALFORMED, "an empty frame")
    frame_refused(s, [field(7, 0, 1)], pb.STATUS_MALFORMED, "a frame of unknown fields only")
    # 'A message with more parts is refused'
    one = pb.ClientFrame(envelope=pb.Envelope(correlation_id=999001, kind=pb.KIND_REQUEST)).SerializeToString()
    frame_refused(s, [one, one], pb.STATUS_MALFORMED, "two parts")
    frame_refused(s, [b"", one, one], pb.STATUS_MALFORMED, "a delimiter and two parts")
    frame_refused(s, [b"", b"", one], pb.STATUS_MALFORMED, "two delimiters")
    # 'A known field with the wrong wire type ... make the whole frame
    # undecodable ... none of its envelopes is handled'
    env_bad = field(1, 0, 999002) + field(3, 2, b"\x01")
    frame_refused(s, [field(1, 2, env_bad)], pb.STATUS_MALFORMED, "Envelope.kind as bytes")
    good = s.echo(key=8300); s.sent.discard(good.correlation_id)
    batch = field(1, 2, good.SerializeToString()) + field(1, 2, env_bad)
    frame_refused(s, [field(2, 2, batch)], pb.STATUS_MALFORMED, "a batch with one bad envelope")
    ctl_bad = field(1, 0, 999003) + field(3, 0, pb.KIND_CONTROL) + field(6, 0, 1)
    frame_refused(s, [field(1, 2, ctl_bad)], pb.STATUS_MALFORMED, "Envelope.control as varint")
    for junk, what in ((field(1, 2, b"")[:1] + varint(2**63) + b"abc", "a length of 2^63"),
                       (b"\x0a" + b"\xff" * 10 + b"\x01", "an overlong varint"),
                       (field(2, 2, b"\x0a" + varint(2**32 + 5)), "an envelope length past the batch")):
        frame_refused(s, [junk], pb.STATUS_MALFORMED, what)
    # 'Errors for requests without a correlation id ... are folded into the
    # frame's first such reply'
    f = pb.ClientFrame()
    for _ in range(50000):
        f.batch.envelopes.add()
    frame_refused(s, [f.SerializeToString()], pb.STATUS_MISSING_FIELD, "50,000 empty envelopes")
    return "oversized, garbage, empty, multipart, wrong wire types, bad lengths"


def t_decoding(s):
    """'unknown fields are skipped; a field that comes twice takes its last
    value; of two oneof members the last wins'."""
    pb = s.pb
    e = s.echo(key=8400, seq=5)
    raw = e.SerializeToString() + field(99, 0, 5) + field(100, 2, b"xyz")
    s.sock.send(field(1, 2, raw) + field(15, 2, b"ignored"))
    r = s.wait([e.correlation_id])[0]
    s.expect(r, pb.STATUS_OK, "unknown fields")
    e2 = s.echo(key=8400, seq=6)
    s.sent.discard(e2.correlation_id)
    last = 999100
    s.sent.add(last)
    s.sock.send(field(1, 2, e2.SerializeToString() + field(1, 0, last)))
    s.expect(s.wait([last])[0], pb.STATUS_OK, "a correlation id given twice")
    # envelope then batch: the batch wins, the envelope is not handled
    lone = s.echo(key=8400); s.sent.discard(lone.correlation_id)
    inb = s.echo(key=8400)
    s.sock.send(field(1, 2, lone.SerializeToString())
                + field(2, 2, field(1, 2, inb.SerializeToString())))
    s.expect(s.wait([inb.correlation_id])[0], pb.STATUS_OK, "oneof: last member")
    # Payloads follow the same protobuf rules: repeated floats packed or not
    va = s.va
    unpacked = b"".join(varint((2 << 3) | 5) + struct.pack("<f", x) for x in (1, 2, 3)) \
        + field(3, 2, struct.pack("<fff", 10, 20, 30))
    e = s.vecadd(0, [], [])
    e.payload = unpacked
    r = s.call(e)
    s.expect(r, pb.STATUS_OK, "vecadd with unpacked floats")
    check(list(va.VectorAddResponse.FromString(r.payload).result) == [11, 22, 33], "unpacked floats")
    # 'Strings are not checked for UTF-8': a grain type that is not gets an error,
    # and the reply's own text stays valid UTF-8 (Reply.error's comment)
    cid = 999200
    s.sent.add(cid)
    bad = field(1, 0, cid) + field(2, 2, field(1, 2, b"ech\xff\xfe") + field(2, 0, 1)) \
        + field(3, 0, pb.KIND_REQUEST) + field(4, 0, 1)
    s.sock.send(field(1, 2, bad))
    r = s.wait([cid])[0]
    s.expect(r, pb.STATUS_UNKNOWN_GRAIN_TYPE, "a grain type that is not UTF-8")
    s.alive("a grain type that is not UTF-8")
    return f"non-UTF-8 type: {s.status(r)}"


def t_delimiter(s):
    """'A REQ-style empty delimiter part before it is accepted and echoed back
    in the replies, so REQ sockets work'."""
    pb = s.pb
    e = s.echo(key=8500)
    s.sock.send_multipart([b"", pb.ClientFrame(envelope=e).SerializeToString()])
    check(s.sock.poll(GUARD_MS, zmq.POLLIN), "no reply to a frame with a delimiter")
    parts = s.sock.recv_multipart()
    check(len(parts) == 2 and parts[0] == b"", f"the delimiter was not echoed: {len(parts)} parts")
    r = pb.ServerFrame.FromString(parts[1]).reply
    check(r.correlation_id == e.correlation_id and r.status == pb.STATUS_OK, "delimiter reply")
    s.seen.add(e.correlation_id)
    req = s.ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(s.endpoint)
    e = s.echo(key=8500)
    s.sent.discard(e.correlation_id)
    req.send(pb.ClientFrame(envelope=e).SerializeToString())
    check(req.poll(GUARD_MS, zmq.POLLIN), "no reply on a REQ socket")
    r = pb.ServerFrame.FromString(req.recv()).reply
    check(r.correlation_id == e.correlation_id and r.status == pb.STATUS_OK, "REQ reply")
    req.close()


def t_pause(s):
    """Deactivate: 'pauses a type; its requests wait, in order, until
    Activate'; STATUS_INACTIVE: 'not sent by the bridge'."""
    ctl, pb = s.ctl, s.pb
    st = s.control_ok(ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS,
                      deactivate=ctl.Deactivate(grain_type="echo"))
    check(st.grain_type == "echo" and st.state == ctl.GRAIN_STATE_INACTIVE,
          f"Deactivate answered state {st.state}")
    check(s.grain_status("echo").state == ctl.GRAIN_STATE_INACTIVE, "status after Deactivate")
    held = [s.echo(key=8600, seq=i) for i in range(5)]
    for e in held:
        s.send_env(e)
    # 'The bridge reads its socket all the time: no client ... can stop
    # control messages, other grain types': served while echo waits
    vec_call(s, 0, [1, 2], [3, 4], "vecadd while echo is paused")
    t = s.telemetry("echo")
    waiting = [e.correlation_id for e in held if e.correlation_id in s.replies]
    check(not waiting, f"requests to a paused type were answered: {[s.status(s.replies[i]) for i in waiting]}")
    st = s.control_ok(ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS,
                      activate=ctl.Activate(grain_type="echo"))
    check(st.state == ctl.GRAIN_STATE_ACTIVE, f"Activate answered state {st.state}")
    for i, r in enumerate(s.wait([e.correlation_id for e in held])):
        check(r.status != pb.STATUS_INACTIVE, "STATUS_INACTIVE was sent")
        s.expect(r, pb.STATUS_OK, "a request held while paused")
        e = s.ec.EchoResponse.FromString(r.payload)
        check(e.sequence == i and e.grain_count == i + 1, f"held request {i}: {e}")
    return f"queue_depth_in while paused: {t.queue_depth_in}"


def t_deactivate_grain(s):
    ctl, pb = s.ctl, s.pb
    for i in (1, 2):
        c = s.ec.EchoResponse.FromString(s.call(s.echo(key=8700)).payload).grain_count
        check(c == i, f"grain_count {c}")
    dg = s.control(deactivate_grain=ctl.DeactivateGrain(grain_type="echo", key=8700))
    r = s.call(dg)
    s.expect(r, pb.STATUS_OK, "DeactivateGrain")
    check(r.message_type == 0 and r.payload == b"", "DeactivateGrain: 'empty (0)'")
    c = s.ec.EchoResponse.FromString(s.call(s.echo(key=8700)).payload).grain_count
    check(c == 1, f"after DeactivateGrain: grain_count {c} ('a fresh, zeroed one')")
    r = s.call(s.control(deactivate_grain=ctl.DeactivateGrain(grain_type="echo", key=8799)))
    s.expect(r, pb.STATUS_NO_ACTIVATION, "DeactivateGrain of an unused key")
    # 'DeactivateGrain travels through the grain type's ring, so it takes its
    # place among the messages to that key'
    a, d, b = (s.echo(key=8701),
               s.control(deactivate_grain=ctl.DeactivateGrain(grain_type="echo", key=8701)),
               s.echo(key=8701))
    s.send_batch([a, d, b])
    ra, rd, rb = s.wait([a.correlation_id, d.correlation_id, b.correlation_id])
    s.expect(rd, pb.STATUS_OK, "DeactivateGrain in a batch")
    counts = [s.ec.EchoResponse.FromString(r.payload).grain_count for r in (ra, rb)]
    check(counts == [1, 1], f"echo, DeactivateGrain, echo: counts {counts}")


def t_telemetry(s):
    t0 = s.telemetry("vecadd")
    check(t0.grain_type == "vecadd", "telemetry grain_type")
    check(t0.queue_capacity == s.limits["vecadd"].queue_capacity, "telemetry queue_capacity")
    envs = [s.vecadd(0, [1], [2]) for _ in range(20)]
    s.send_batch(envs)
    s.wait([e.correlation_id for e in envs])
    t1 = s.telemetry("vecadd")
    check(t1.messages_processed >= t0.messages_processed + 20,
          f"messages_processed {t0.messages_processed} -> {t1.messages_processed}")
    check(t1.timestamp_ns >= t0.timestamp_ns, "timestamp_ns went back")
    return f"processed {t1.messages_processed}, errors {t1.errors}"


def t_terminate(s):
    """Terminate: 'queued and later requests get STATUS_TERMINATED until the
    bridge restarts'; Activate: 'a terminated ... type stays so'."""
    ctl, pb = s.ctl, s.pb
    # requests waiting in the ring of a paused type when it is terminated
    s.control_ok(ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS, deactivate=ctl.Deactivate(grain_type="echo"))
    queued = [s.echo(key=8800, seq=i) for i in range(5)]
    for e in queued:
        s.send_env(e)
    check(s.telemetry("echo").queue_depth_in == len(queued), "queue_depth_in of a paused type")
    st = s.control_ok(ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS,
                      terminate=ctl.Terminate(grain_type="echo"))
    check(st.state == ctl.GRAIN_STATE_TERMINATED, f"Terminate answered state {st.state}")
    for r in s.wait([e.correlation_id for e in queued]):
        s.expect(r, pb.STATUS_TERMINATED, "a request queued at Terminate")
    # 'fed to the ring and not yet handled': none is left to handle
    depth = s.telemetry("echo").queue_depth_in
    check(depth == 0, f"queue_depth_in after Terminate answered the queue: {depth}")
    s.expect(s.call(s.echo(key=1)), pb.STATUS_TERMINATED, "echo after Terminate")
    # A stopped kernel's heartbeat stands still, so its heartbeat_age_ns ('how
    # long since the bridge saw it change (staleness)') grows from 0.
    ages, tries = [], 0
    while len(ages) < 2:
        st = s.grain_status("echo")
        if st.heartbeat_age_ns > 0:
            ages.append(st.heartbeat_age_ns)
        else:
            tries += 1
            check(tries < GUARD_MS // 20, "heartbeat_age_ns of a terminated type stays 0")
            s.sock.poll(20, zmq.POLLIN)   # paces the loop; nothing is owed
    check(ages[1] > ages[0], f"heartbeat_age_ns of a stopped kernel does not grow: {ages}")
    s.expect(s.call(s.control(activate=ctl.Activate(grain_type="echo"))), pb.STATUS_TERMINATED,
             "Activate after Terminate")
    vec_call(s, 0, [1], [2], "vecadd after echo's Terminate")


def t_quiet(s):
    """Nothing left over: no reply to a frame that should have had none, no
    reply twice (pump checks each reply against the ids sent)."""
    vec_call(s, 0, [1], [1], "a last round trip")
    while s.pump(300):
        pass
    check(not s.zero, f"stray correlation-id-0 replies: {[s.status(r) for r in s.zero]}")
    check(not s.replies, f"unclaimed replies: {list(s.replies)}")


def t_no_arena(s):
    """PageRank: 'Unavailable when arena_mb is 0'; ListGrainTypes leaves out
    a type it cannot serve, and a request to it gets
    STATUS_UNKNOWN_GRAIN_TYPE, whose text says why."""
    ctl, pb = s.ctl, s.pb
    names = list(s.control_ok(ctl.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST,
                              list_grain_types=ctl.ListGrainTypes()).grain_types)
    check("pagerank.sender" not in names and "echo" in names, f"ListGrainTypes: {names}")
    e = s.echo(); e.grain.type = "pagerank.sender"
    for what, env in (("a request", e), ("a status request", s.control(
            status_request=ctl.StatusRequest(grain_type="pagerank.sender")))):
        r = s.call(env)
        s.expect(r, pb.STATUS_UNKNOWN_GRAIN_TYPE, f"{what} to a PageRank type without an arena")
        check("arena_mb" in r.error, f"{what}: the error does not say why: {r.error!r}")
    s.alive("a type without an arena")


TESTS = [t_discovery, t_echo, t_vecadd, t_limits_edge, t_batch, t_one_way, t_bad_envelopes,
         t_bad_frames, t_decoding, t_delimiter, t_pause, t_deactivate_grain, t_telemetry,
         t_terminate, t_quiet]


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--no-arena"]):
        print(__doc__)
        return 2
    gen = gen_modules(sys.argv[2])
    try:
        s = Stranger(sys.argv[1])
        for t in (TESTS if len(sys.argv) == 3 else [t_no_arena]):
            try:
                note = t(s)
            except Fail as e:
                print(f"FAIL {t.__name__}: {e}")
                return 1
            print(f"ok   {t.__name__}" + (f": {note}" if note else ""))
        print("PASS")
        return 0
    finally:
        shutil.rmtree(gen, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
