#!/usr/bin/python3
"""test_fake_server.py: checks gpubridge_client against a fake bridge.

A tiny ROUTER server in a thread (FakeBridge) speaks the wire of
proto/gpubridge.proto: it answers grain requests with STATUS_OK (vecadd and
echo computed as the real grains do, other known types echo the payload back),
unknown grain types with STATUS_UNKNOWN_GRAIN_TYPE, bad frames and envelopes
with the documented error statuses, and control operations with made-up
GrainTypeStatus / Telemetry / GrainTypeList / DetectReport. It answers a Batch
out of order, split over one Reply frame and several ReplyBatch frames, as the
real bridge may. Then the client's call / send / poll / wait / flush, typed
helpers, control helpers, timeouts, CURVE, and message_passing.py (both modes,
as subprocesses) are run against it. No bridge binary and no GPU needed.

    /usr/bin/python3 examples/python/test_fake_server.py [--gen DIR] [-v]

Without --gen / GPUBRIDGE_PY_GEN and without a build, it generates the
protobuf modules into a temporary directory with protoc. Exit 0: all passed.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpubridge_client as gbc  # noqa: E402  (first: it names the right interpreter)

import numpy as np  # noqa: E402
import zmq  # noqa: E402

PY = sys.executable


# ----------------------------------------------------------------- fake bridge

def varint_len(v):
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def frame_payload_max(max_message, grain_type, message_type):
    """The largest payload of a one-envelope ClientFrame within max_message
    whatever its correlation id and key (Limits.max_payload, as the bridge
    computes it)."""
    pb = gbc.gpubridge_pb2
    env = pb.Envelope(correlation_id=2**64 - 1, kind=pb.KIND_REQUEST, message_type=message_type)
    env.grain.type, env.grain.key = grain_type, 2**64 - 1
    p = max(0, max_message - pb.ClientFrame(envelope=env).ByteSize())
    while p > 0:
        env.payload = bytes(p)
        if pb.ClientFrame(envelope=env).ByteSize() <= max_message:
            break
        p -= 1
    return p


def vecadd_max(large_max, payload):
    """The most elements of a VectorAddRequest (op add: unset) whose record
    (8 + 8 n bytes) fits large_max and whose encoding fits payload bytes."""
    n = max(0, (large_max - 8) // 8)
    while n > 0 and 2 * (1 + varint_len(4 * n) + 4 * n) > payload:
        n -= 1
    return n



class FakeBridge(threading.Thread):
    """A ROUTER socket in a thread that answers like a (small) bridge.

    Grain types: vecadd, echo (as the real grains: a slot of `slot_payload`
    payload bytes, larger messages out of line up to `max_message` bytes),
    test.echo (answers STATUS_OK with the
    payload and message_type echoed), test.blackhole (never answers),
    test.slow (answers like test.echo after `slow_ms`). Anything else is
    STATUS_UNKNOWN_GRAIN_TYPE. Requests to a deactivated type are answered
    STATUS_INACTIVE, or with hold_inactive=True held until its Activate.
    """

    TYPES = ("vecadd", "echo", "test.echo", "test.blackhole", "test.slow")

    def __init__(self, curve_secret_key=None, slot_payload=32, slow_ms=300, seed=1,
                 hold_inactive=False, max_message=1048576):
        super().__init__(daemon=True)
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        if curve_secret_key is not None:
            self.sock.setsockopt(zmq.CURVE_SERVER, 1)
            self.sock.setsockopt(zmq.CURVE_SECRETKEY, curve_secret_key)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = "tcp://127.0.0.1:%d" % port
        self.slot_payload = slot_payload
        self.max_message = max_message
        self.slow_ms = slow_ms
        self.rng = random.Random(seed)
        self.state = {t: gbc.control_pb2.GRAIN_STATE_ACTIVE for t in self.TYPES}
        self.counts = {}         # (type, key) -> messages handled (the grain state)
        self.processed = {t: 0 for t in self.TYPES}
        self.errors = {t: 0 for t in self.TYPES}
        self.delayed = []        # (due monotonic time, identity, Reply)
        self.hold_inactive = hold_inactive
        self.held = []           # (identity, Envelope) held while their type is inactive
        self.frames_in = 0
        self.batches_in = 0
        self._quit = threading.Event()

    def stop(self):
        """Stop the thread and close the socket."""
        self._quit.set()
        self.join(5)

    # -- the loop

    def run(self):
        try:
            while not self._quit.is_set():
                if self.sock.poll(10, zmq.POLLIN):
                    while True:
                        try:
                            ident, data = self.sock.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self.frames_in += 1
                        self.handle(ident, data)
                now = time.monotonic()
                due = [d for d in self.delayed if d[0] <= now]
                self.delayed = [d for d in self.delayed if d[0] > now]
                for _, ident, reply in due:
                    self.send_replies(ident, [reply])
        finally:
            self.sock.close(linger=0)

    def send_replies(self, ident, replies):
        """Send replies shuffled: the first alone, the rest in ReplyBatch frames of <= 3."""
        pb = gbc.gpubridge_pb2
        replies = list(replies)
        self.rng.shuffle(replies)
        if replies:
            self.sock.send_multipart([ident, pb.ServerFrame(reply=replies[0]).SerializeToString()])
        rest = replies[1:]
        for i in range(0, len(rest), 3):
            f = pb.ServerFrame()
            f.batch.replies.extend(rest[i:i + 3])
            self.sock.send_multipart([ident, f.SerializeToString()])

    def handle(self, ident, data):
        """Decode one ClientFrame and answer it."""
        pb = gbc.gpubridge_pb2
        if len(data) > self.max_message:
            self.send_replies(ident, [self.error(0, pb.STATUS_TOO_LARGE, "frame of %d bytes exceeds "
                                                 "max_message_size (%d)" % (len(data), self.max_message))])
            return
        frame = pb.ClientFrame()
        try:
            frame.ParseFromString(data)
        except Exception:
            self.send_replies(ident, [self.error(0, pb.STATUS_MALFORMED, "frame is not a ClientFrame")])
            return
        which = frame.WhichOneof("body")
        if which is None:
            self.send_replies(ident, [self.error(0, pb.STATUS_MALFORMED, "ClientFrame has no body")])
            return
        envs = [frame.envelope] if which == "envelope" else list(frame.batch.envelopes)
        if which == "batch":
            self.batches_in += 1
        replies = []
        for env in envs:
            if (self.hold_inactive and env.kind == pb.KIND_REQUEST and
                    self.state.get(env.grain.type) == gbc.control_pb2.GRAIN_STATE_INACTIVE):
                self.held.append((ident, env))
                continue
            if env.grain.type == "test.slow" and env.kind == pb.KIND_REQUEST:
                r = pb.Reply(correlation_id=env.correlation_id, status=pb.STATUS_OK,
                             message_type=env.message_type, payload=env.payload)
                self.delayed.append((time.monotonic() + self.slow_ms / 1000.0, ident, r))
                continue
            r = self.process(env)
            if r is not None:
                replies.append(r)
        self.send_replies(ident, replies)
        if which == "envelope" and frame.envelope.control.HasField("activate"):
            t = frame.envelope.control.activate.grain_type
            for ident2, env in [h for h in self.held if h[1].grain.type == t]:
                self.held.remove((ident2, env))
                self.send_replies(ident2, [self.process(env)])

    # -- envelopes

    @staticmethod
    def error(cid, status, text):
        return gbc.gpubridge_pb2.Reply(correlation_id=cid, status=status, error=text)

    def process(self, env):
        """The Reply to one envelope, or None (one-way success, blackhole)."""
        pb = gbc.gpubridge_pb2
        cid = env.correlation_id
        if env.kind == pb.KIND_CONTROL:
            return self.control(env)
        if env.kind not in (pb.KIND_REQUEST, pb.KIND_ONE_WAY):
            return self.error(cid, pb.STATUS_MISSING_FIELD, "envelope has no kind")
        reply = self.request(env)
        if env.grain.type in self.errors and reply is not None and reply.status != pb.STATUS_OK:
            self.errors[env.grain.type] += 1
        if env.kind == pb.KIND_ONE_WAY:
            if reply is None or reply.status == pb.STATUS_OK or cid == 0:
                return None
        return reply

    def request(self, env):
        pb, cpb = gbc.gpubridge_pb2, gbc.control_pb2
        cid, g, mt = env.correlation_id, env.grain, env.message_type
        if not env.HasField("grain") or not g.type:
            return self.error(cid, pb.STATUS_MISSING_FIELD, "request has no grain")
        if g.type not in self.TYPES:
            return self.error(cid, pb.STATUS_UNKNOWN_GRAIN_TYPE, "no grain type '%s'" % g.type)
        if mt == 0 or mt >= 0xFF00:
            return self.error(cid, pb.STATUS_UNKNOWN_MESSAGE_TYPE, "message type %d" % mt)
        st = self.state[g.type]
        if st == cpb.GRAIN_STATE_INACTIVE:
            return self.error(cid, pb.STATUS_INACTIVE, "%s is deactivated" % g.type)
        if st == cpb.GRAIN_STATE_TERMINATED:
            return self.error(cid, pb.STATUS_TERMINATED, "%s is terminated" % g.type)
        if g.type == "test.blackhole":
            return None
        ok = pb.Reply(correlation_id=cid, status=pb.STATUS_OK)
        if g.type == "test.echo":
            ok.message_type, ok.payload = mt, env.payload
        elif g.type == "vecadd":
            if mt != gbc.VECADD_REQUEST:
                return self.error(cid, pb.STATUS_UNKNOWN_MESSAGE_TYPE, "vecadd has no type %d" % mt)
            req = gbc.vecadd_pb2.VectorAddRequest()
            try:
                req.ParseFromString(env.payload)
            except Exception:
                return self.error(cid, pb.STATUS_MALFORMED, "payload is not a VectorAddRequest")
            if len(req.a) != len(req.b):
                return self.error(cid, pb.STATUS_MALFORMED, "vectors differ in length")
            if len(req.a) > (self.max_message - 8) // 8:
                return self.error(cid, pb.STATUS_TOO_LARGE, "vectors exceed the largest vecadd message")
            a = np.array(req.a, dtype=np.float32)
            b = np.array(req.b, dtype=np.float32)
            with np.errstate(all="ignore"):
                r = [a + b, a - b, a * b, a / b][req.op]
            ok.message_type = gbc.VECADD_RESPONSE
            ok.payload = gbc.vecadd_pb2.VectorAddResponse(result=r.tolist()).SerializeToString()
        elif g.type == "echo":
            if mt != gbc.ECHO_REQUEST:
                return self.error(cid, pb.STATUS_UNKNOWN_MESSAGE_TYPE, "echo has no type %d" % mt)
            req = gbc.echo_pb2.EchoRequest()
            try:
                req.ParseFromString(env.payload)
            except Exception:
                return self.error(cid, pb.STATUS_MALFORMED, "payload is not an EchoRequest")
            if len(env.payload) > self.max_message:
                return self.error(cid, pb.STATUS_TOO_LARGE, "EchoRequest exceeds the largest echo message")
            n = self.counts.get((g.type, g.key), 0) + 1
            self.counts[(g.type, g.key)] = n
            resp = gbc.echo_pb2.EchoResponse(sequence=req.sequence, data=req.data,
                                             client_time_ns=req.client_time_ns, grain_count=n)
            ok.message_type, ok.payload = gbc.ECHO_RESPONSE, resp.SerializeToString()
        self.counts.setdefault((g.type, g.key), 0)
        self.processed[g.type] += 1
        return ok

    def control(self, env):
        pb, cpb = gbc.gpubridge_pb2, gbc.control_pb2
        cid = env.correlation_id
        op = env.control.WhichOneof("op")
        if op is None:
            return self.error(cid, pb.STATUS_MISSING_FIELD, "control has no op")
        ok = pb.Reply(correlation_id=cid, status=pb.STATUS_OK)
        if op == "list_grain_types":
            ok.message_type = cpb.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST
            ok.payload = cpb.GrainTypeList(grain_types=self.TYPES).SerializeToString()
            return ok
        if op == "limits_request":
            ok.message_type = cpb.CONTROL_MESSAGE_TYPE_LIMITS
            cap = self.slot_payload
            lim = cpb.Limits(max_message_size=self.max_message, hold_bound=64 << 20, max_replies_per_frame=256)
            va_payload = frame_payload_max(self.max_message, "vecadd", gbc.VECADD_REQUEST)
            echo_payload = frame_payload_max(self.max_message, "echo", gbc.ECHO_REQUEST)
            for t, mt, name, size, n in (("vecadd", gbc.VECADD_REQUEST, "VectorAddRequest", va_payload,
                                          vecadd_max(self.max_message, va_payload)),
                                         ("echo", gbc.ECHO_REQUEST, "EchoRequest",
                                          min(self.max_message, echo_payload), 0)):
                g = lim.grain_types.add(grain_type=t, slot_size=cap + 32, record_size=cap,
                                        queue_capacity=4096, max_grains=65536)
                g.message_types.add(message_type=mt, name=name, max_payload=size, max_elements=n)
            ok.payload = lim.SerializeToString()
            return ok
        if op == "detect_request":
            ok.message_type = cpb.CONTROL_MESSAGE_TYPE_DETECT_REPORT
            ok.payload = cpb.DetectReport(mode="cpu", rule_fired="fake bridge",
                                          device=-1).SerializeToString()
            return ok
        msg = getattr(env.control, op)
        t = msg.grain_type
        if not t:
            return self.error(cid, pb.STATUS_MISSING_FIELD, "%s has no grain_type" % op)
        if t not in self.TYPES:
            return self.error(cid, pb.STATUS_UNKNOWN_GRAIN_TYPE, "no grain type '%s'" % t)
        if op == "deactivate_grain":
            if (t, msg.key) not in self.counts:
                return self.error(cid, pb.STATUS_NO_ACTIVATION, "no activation of key %d" % msg.key)
            del self.counts[(t, msg.key)]
            return ok
        if op == "telemetry_request":
            ok.message_type = cpb.CONTROL_MESSAGE_TYPE_TELEMETRY
            ok.payload = cpb.Telemetry(grain_type=t, messages_processed=self.processed[t],
                                       errors=self.errors[t], launches=1, queue_capacity=4096,
                                       timestamp_ns=time.monotonic_ns()).SerializeToString()
            return ok
        if op == "activate":
            self.state[t] = cpb.GRAIN_STATE_ACTIVE
        elif op == "deactivate":
            self.state[t] = cpb.GRAIN_STATE_INACTIVE
        elif op == "terminate":
            self.state[t] = cpb.GRAIN_STATE_TERMINATED
        ok.message_type = cpb.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS
        ok.payload = cpb.GrainTypeStatus(
            grain_type=t, mode="cpu", state=self.state[t], placement=cpb.PLACEMENT_HOST,
            device=-1, queue_capacity=4096, slot_size=self.slot_payload + 32,
            max_message_size=self.max_message).SerializeToString()
        return ok


# ----------------------------------------------------------------------- tests

def expect_bridge_error(fn, status_name, text=None):
    """Run fn; it must raise BridgeError with this status (and error text part)."""
    try:
        fn()
    except gbc.BridgeError as e:
        assert e.status_name == status_name, "got %s, expected %s" % (e.status_name, status_name)
        assert text is None or text in e.error, "error text %r lacks %r" % (e.error, text)
        assert status_name in str(e)
        return e
    raise AssertionError("no BridgeError (expected %s)" % status_name)


def test_call_ok_echoes_payload(srv, c):
    r = c.call("test.echo", 5, 42, b"hello bridge")
    assert r.status == 0 and r.payload == b"hello bridge" and r.message_type == 42


def test_unknown_grain_type(srv, c):
    e = expect_bridge_error(lambda: c.call("no.such", 1, 1, b""), "STATUS_UNKNOWN_GRAIN_TYPE",
                            "no.such")
    assert e.status == gbc.gpubridge_pb2.STATUS_UNKNOWN_GRAIN_TYPE and e.correlation_id != 0


def test_unknown_message_type(srv, c):
    expect_bridge_error(lambda: c.call("vecadd", 1, 999, b""), "STATUS_UNKNOWN_MESSAGE_TYPE")


def test_vecadd_helper_float32(srv, c):
    a = [1.1, 2.2, 1e30]
    b = [3.3, -0.1, 1e10]
    for op, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                  ("/", np.divide), (2, np.multiply)):
        got = c.vecadd(7, op, a, b)
        with np.errstate(over="ignore"):
            exp = f(np.float32(a), np.float32(b)).tolist()
        assert got == exp, (op, got, exp)
    assert c.vecadd(7, "add", [], []) == []
    expect_bridge_error(lambda: c.vecadd(7, "add", [1.0, 2.0], [1.0]), "STATUS_MALFORMED")
    assert c.vecadd(7, "add", [1.0] * 4, [1.0] * 4) == [2.0] * 4  # past the slot: out of line
    try:
        c.vecadd(7, "pow", a, b)
        raise AssertionError("op 'pow' accepted")
    except ValueError:
        pass


def test_echo_helper_counts(srv, c):
    for i in range(1, 4):
        r = c.echo(99, b"abc")
        assert r.data == b"abc" and r.grain_count == i, r
        assert r.client_time_ns > 0 and r.sequence > 0
    assert c.echo(100, b"x", sequence=77).sequence == 77
    assert c.echo(99, b"y" * 64).data == b"y" * 64  # past the slot: out of line


def test_pipelined_send_poll_batches(srv, c):
    """1000 sends in batches of 64, replies shuffled and split: all matched once."""
    frames0, batches0 = srv.frames_in, srv.batches_in
    want = {}
    for i in range(1000):
        payload = b"msg-%d" % i
        want[c.send("test.echo", i % 13, 1, payload)] = payload
    assert c.queued == 1000 % 64, c.queued
    got = {}
    deadline = time.monotonic() + 10
    while len(got) < len(want) and time.monotonic() < deadline:
        for r in c.poll(timeout_ms=100):
            assert r.correlation_id not in got, "duplicate reply %d" % r.correlation_id
            got[r.correlation_id] = r
    assert set(got) == set(want), "missing %d replies" % (len(want) - len(got))
    for cid, r in got.items():
        assert r.status == 0 and r.payload == want[cid]
    time.sleep(0.05)
    frames = srv.frames_in - frames0
    assert frames == 16 and srv.batches_in - batches0 == 16, (frames, srv.batches_in - batches0)
    assert c.poll(0) == []


def test_wait_mixed_batch(srv, c):
    """wait() returns every reply of a batch, errors included, by correlation id."""
    ids = [c.send("test.echo", 1, 3, b"a"), c.send("nope", 1, 1, b""),
           c.send("vecadd", 1, 1, gbc.encode_vecadd("mul", [2, 3], [4, 5])),
           c.send("vecadd", 1, 7, b"")]
    rs = c.wait(ids)
    pb = gbc.gpubridge_pb2
    assert [rs[i].status for i in ids] == [pb.STATUS_OK, pb.STATUS_UNKNOWN_GRAIN_TYPE,
                                           pb.STATUS_OK, pb.STATUS_UNKNOWN_MESSAGE_TYPE]
    assert gbc.decode_vecadd(rs[ids[2]]) == [8.0, 15.0]


def test_call_flushes_queue_first(srv, c):
    """A call after send()s sees the grain's messages in issue order."""
    for _ in range(5):
        c.send("echo", 555, gbc.ECHO_REQUEST, gbc.encode_echo(b""))
    assert c.echo(555).grain_count == 6
    assert len(c.poll(timeout_ms=1000)) >= 1
    time.sleep(0.05)
    c.poll(0)


def test_timeout_and_late_reply_dropped(srv, c):
    t0 = time.monotonic()
    try:
        c.call("test.blackhole", 1, 1, b"", timeout_ms=100)
        raise AssertionError("no TimeoutError")
    except TimeoutError as e:
        assert "100 ms" in str(e)
    dt = time.monotonic() - t0
    assert 0.09 <= dt < 1.0, dt
    try:
        c.call("test.slow", 1, 1, b"late", timeout_ms=50)
        raise AssertionError("no TimeoutError")
    except TimeoutError:
        pass
    assert c.call("test.echo", 1, 1, b"next").payload == b"next"
    time.sleep(srv.slow_ms / 1000.0 + 0.1)
    assert c.poll(timeout_ms=50) == [], "late reply of an abandoned call surfaced"
    assert c.call("test.echo", 1, 1, b"after").payload == b"after"


def test_flooding_peer_bounded(srv, c):
    """A peer that sends reply batches without end (ids never sent, and id 0)
    keeps no call past its deadline, and what the client keeps stays bounded."""
    import zmq
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    stop = threading.Event()

    def flood():
        ident = router.recv_multipart()[0]
        body = gbc.gpubridge_pb2.ServerFrame()
        for i in range(2000):
            body.batch.replies.add(correlation_id=(10 ** 9 + i) if i % 2 else 0)
        frame = body.SerializeToString()
        n = 0
        while not stop.is_set():
            router.send_multipart([ident, frame])
            n += 1
            if n % 50 == 0:  # new ids each round: the stash would grow without its bound
                body = gbc.gpubridge_pb2.ServerFrame()
                for i in range(2000):
                    body.batch.replies.add(correlation_id=(10 ** 9 + n * 2000 + i) if i % 2 else 0)
                frame = body.SerializeToString()

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    try:
        with gbc.Client("tcp://127.0.0.1:%d" % port, timeout_ms=500) as fc:
            t0 = time.monotonic()
            try:
                fc.call("test.echo", 1, 1, b"x")
                raise AssertionError("no TimeoutError")
            except TimeoutError:
                pass
            dt = time.monotonic() - t0
            assert dt < 3.0, "call held %.1f s past its 0.5 s timeout" % dt
            # Replies to ids never sent are not kept; refusals up to a bound.
            assert not fc._stash, "%d replies to ids never sent kept" % len(fc._stash)
            assert fc.replies_dropped > 0 and len(fc._extra) <= fc.MAX_EXTRA
    finally:
        stop.set()
        t.join(5)
        router.close(0)


def test_nested_control_reply(srv, c):
    """A peer's GrainTypeStatus that nests its devices 20,000 deep is a
    ProtocolError, not an exception from inside protobuf."""
    import zmq
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    nested = b""
    for _ in range(20000):  # field 16 (devices), length-delimited: key 0x82 0x01, then the length
        n, ln = len(nested), bytearray()
        while True:
            ln.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                break
        nested = b"\x82\x01" + bytes(ln) + nested

    def answer():
        parts = router.recv_multipart()
        env = gbc.gpubridge_pb2.ClientFrame.FromString(parts[-1]).envelope
        rep = gbc.gpubridge_pb2.Reply(correlation_id=env.correlation_id, message_type=1, payload=nested)
        router.send_multipart(parts[:-1] + [gbc.gpubridge_pb2.ServerFrame(reply=rep).SerializeToString()])

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        with gbc.Client("tcp://127.0.0.1:%d" % port, timeout_ms=5000) as fc:
            try:
                fc.status("echo")
                raise AssertionError("a reply nested 20,000 deep decoded")
            except gbc.ProtocolError as e:
                assert "GrainTypeStatus payload does not decode" in str(e), e
    finally:
        t.join(5)
        router.close(0)


def test_garbage_frame_answered_id0(srv, c):
    pb = gbc.gpubridge_pb2
    c.send_raw(b"\x0a\x7fgarbage")
    r = c.wait([0])[0]
    assert r.status == pb.STATUS_MALFORMED and r.correlation_id == 0
    c.send_raw(b"")
    assert c.wait([0])[0].status == pb.STATUS_MALFORMED


def test_too_large_refused_locally(srv, c):
    """A frame over max_frame_bytes is not sent: BridgeError, STATUS_TOO_LARGE,
    at once; a queue of envelopes goes out in frames within the bound."""
    pb = gbc.gpubridge_pb2
    before = srv.frames_in
    t0 = time.monotonic()
    for attempt in (lambda: c.call("test.echo", 1, 1, bytes(2 << 20)),
                    lambda: c.send("test.echo", 1, 1, bytes(2 << 20))):
        try:
            attempt()
            raise AssertionError("a 2 MiB frame was sent")
        except gbc.BridgeError as e:
            assert e.status == pb.STATUS_TOO_LARGE and "max_frame_bytes" in e.error, e
    assert time.monotonic() - t0 < 1.5  # nothing waited for the 2 s timeout
    assert c.queued == 0 and c.call("test.echo", 1, 1, b"still").payload == b"still"
    with gbc.Client(srv.endpoint, timeout_ms=2000, max_frame_bytes=4096) as small:
        frames = srv.frames_in
        ids = [small.send("test.echo", k, 1, bytes(1000)) for k in range(10)]
        got = small.wait(ids)
        assert all(got[i].status == pb.STATUS_OK for i in ids)
        assert srv.frames_in - frames >= 3, "10 envelopes of 1000 bytes in fewer than 3 frames of 4096"
    assert srv.frames_in - before >= 4


def test_bridge_refusal_ends_lone_call(srv, c):
    """A bridge whose max_message_size is below the client's max_frame_bytes
    refuses the frame whole (id 0): a lone call gets that refusal at once,
    not a timeout; with other requests in flight it cannot be told apart."""
    pb = gbc.gpubridge_pb2
    s2 = FakeBridge(max_message=4096)
    s2.start()
    try:
        with gbc.Client(s2.endpoint, timeout_ms=3000) as c2:
            t0 = time.monotonic()
            try:
                c2.call("test.echo", 1, 1, bytes(8000))
                raise AssertionError("no BridgeError")
            except gbc.BridgeError as e:
                assert e.status == pb.STATUS_TOO_LARGE, e
            assert time.monotonic() - t0 < 2.5, "the call waited out its 3 s timeout"
            # A one-way frame's refusal is not a later lone call's reply.
            c2.send("test.echo", 3, 1, bytes(8000), one_way=True)
            c2.flush()
            assert c2.call("test.echo", 3, 1, b"mine").payload == b"mine"
            assert [r.status for r in c2.poll(timeout_ms=500)] == [pb.STATUS_TOO_LARGE]
            c2.send("test.blackhole", 1, 1, b"")  # in flight, never answered
            c2.flush()
            try:
                c2.call("test.echo", 1, 1, bytes(8000), timeout_ms=300)
                raise AssertionError("a refusal was given to a call with others in flight")
            except TimeoutError:
                pass
            assert [r.status for r in c2.poll(timeout_ms=100)] == [pb.STATUS_TOO_LARGE]
            assert c2.call("test.echo", 2, 1, b"ok").payload == b"ok"
    finally:
        s2.stop()


def test_one_way(srv, c):
    c.send("test.echo", 1, 1, b"quiet", one_way=True)
    bad = c.send("no.such", 1, 1, b"", one_way=True)
    rs = c.poll(timeout_ms=1000)
    assert [r.correlation_id for r in rs] == [bad], rs
    assert rs[0].status == gbc.gpubridge_pb2.STATUS_UNKNOWN_GRAIN_TYPE


def test_control_helpers(srv, c):
    cpb = gbc.control_pb2
    assert "vecadd" in c.list_grain_types()
    assert c.detect().mode == "cpu"
    lim = c.limits()
    assert lim.max_message_size == 1 << 20 and lim.hold_bound == 64 << 20
    va = gbc.message_limits(lim, "vecadd", gbc.VECADD_REQUEST)
    # Past a slot, messages go out of line: the frame binds, 1 MiB less the
    # ClientFrame's 44 bytes with the largest ids; 8 bytes an element, 8 of
    # tags and lengths.
    n = va.max_elements
    assert va.name == "VectorAddRequest" and va.max_payload == (1 << 20) - 44
    assert n == ((1 << 20) - 44 - 8) // 8, n
    assert c.vecadd(1, "add", [1] * n, [2] * n) == [3.0] * n
    # Two elements more (16 bytes) pass the frame's bound whatever the
    # correlation id: refused as a frame, with correlation id 0 (by the
    # bridge, once the client's own bound lets the frame go).
    c.max_frame_bytes = 2 << 20
    c.send("vecadd", 2**64 - 1, gbc.VECADD_REQUEST, gbc.encode_vecadd("add", [1] * (n + 2), [2] * (n + 2)))
    rs = c.poll(timeout_ms=5000)
    assert [(r.correlation_id, r.status) for r in rs] == [(0, gbc.gpubridge_pb2.STATUS_TOO_LARGE)], rs
    assert gbc.message_limits(lim, "echo", gbc.ECHO_REQUEST).max_payload == (1 << 20) - 42
    assert gbc.message_limits(lim, "echo", 99) is None
    st = c.status("vecadd")
    assert st.grain_type == "vecadd" and st.state == cpb.GRAIN_STATE_ACTIVE
    assert c.deactivate("vecadd").state == cpb.GRAIN_STATE_INACTIVE
    expect_bridge_error(lambda: c.vecadd(1, "add", [1], [2]), "STATUS_INACTIVE")
    assert c.activate("vecadd").state == cpb.GRAIN_STATE_ACTIVE
    assert c.vecadd(1, "add", [1], [2]) == [3.0]
    assert c.terminate("echo").state == cpb.GRAIN_STATE_TERMINATED
    expect_bridge_error(lambda: c.echo(1), "STATUS_TERMINATED")
    c.activate("echo")
    c.echo(4242)
    assert c.deactivate_grain("echo", 4242) is None
    expect_bridge_error(lambda: c.deactivate_grain("echo", 4242), "STATUS_NO_ACTIVATION")
    tel = c.telemetry("vecadd")
    assert tel.grain_type == "vecadd" and tel.messages_processed > 0
    expect_bridge_error(lambda: c.status("nope"), "STATUS_UNKNOWN_GRAIN_TYPE")
    expect_bridge_error(lambda: c.status(""), "STATUS_MISSING_FIELD")


def test_curve(srv, c):
    pub, sec = zmq.curve_keypair()
    s2 = FakeBridge(curve_secret_key=sec)
    s2.start()
    try:
        with gbc.Client(s2.endpoint, timeout_ms=2000, curve=pub.decode()) as cc:
            assert cc.call("test.echo", 1, 1, b"secret").payload == b"secret"
        cpub, csec = zmq.curve_keypair()
        with gbc.Client(s2.endpoint, timeout_ms=2000,
                        curve={"server_public_key": pub, "public_key": cpub,
                               "secret_key": csec}) as cc:
            assert cc.vecadd(1, "sub", [5], [2]) == [3.0]
        wrong, _ = zmq.curve_keypair()
        with gbc.Client(s2.endpoint, timeout_ms=300, curve=wrong) as cc:
            try:
                cc.call("test.echo", 1, 1, b"x")
                raise AssertionError("wrong server key got through")
            except TimeoutError:
                pass
    finally:
        s2.stop()


def test_missing_gen_dir_message(srv, c):
    code = ("import sys; sys.path.insert(0, %r); import gpubridge_client as g\n"
            "try:\n  g.load_protos('/nonexistent/gen')\nexcept ImportError as e:\n"
            "  print(e); sys.exit(3)\n" % HERE)
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3 and "GPUBRIDGE_PY_GEN" in p.stdout, (p.returncode, p.stdout, p.stderr)


def _run_script(srv, gen, *extra):
    p = subprocess.run([PY, os.path.join(HERE, "message_passing.py"), "--endpoint", srv.endpoint,
                        "--gen", gen, "--timeout-ms", "3000", *extra],
                       capture_output=True, text=True, timeout=120)
    if VERBOSE or p.returncode != 0:
        print(p.stdout + p.stderr)
    assert p.returncode == 0, "message_passing.py %s exited %d" % (" ".join(extra), p.returncode)
    return p.stdout.strip().splitlines()[-1]


def test_message_passing_script(srv, c):
    last = _run_script(srv, GEN)
    assert last.startswith("message_passing.py: 800/800 correct, median "), last
    print("     " + last)


def test_message_passing_held_while_inactive(srv, c):
    """A bridge that holds requests to a deactivated type passes too."""
    s2 = FakeBridge(hold_inactive=True)
    s2.start()
    try:
        last = _run_script(s2, GEN, "--count", "10", "--inactive-wait-ms", "200")
        assert last.startswith("message_passing.py: 80/80 correct, median "), last
    finally:
        s2.stop()


def test_message_passing_bad_input(srv, c):
    last = _run_script(srv, GEN, "--bad-input")
    assert last.startswith("message_passing.py --bad-input: ") and "FAILED" not in last, last
    print("     " + last)


TESTS = [v for k, v in list(globals().items()) if k.startswith("test_")]
VERBOSE = False
GEN = None


def ensure_gen(gen):
    """A directory with generated modules: gen, $GPUBRIDGE_PY_GEN, the build, or protoc now."""
    d = gbc.find_gen_dir(gen)
    if os.path.isfile(os.path.join(d, "gpubridge_pb2.py")):
        return d, None
    protoc = shutil.which("protoc")
    if not protoc:
        raise SystemExit("no generated modules in %s and no protoc to make them" % d)
    tmp = tempfile.mkdtemp(prefix="gpubridge_py_gen_")
    protos = gbc.proto_files()
    incs = [a for d in sorted({os.path.dirname(p) for p in protos}) for a in ("-I", d)]
    subprocess.run([protoc, "--python_out=" + tmp, *incs, *protos], check=True)
    print("generated the protobuf modules into %s" % tmp)
    return tmp, tmp


def main():
    global VERBOSE, GEN
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    gbc.add_gen_argument(ap)
    ap.add_argument("-v", "--verbose", action="store_true", help="show the scripts' output")
    ap.add_argument("-k", metavar="SUBSTRING", help="run only tests whose name contains this")
    args = ap.parse_args()
    VERBOSE = args.verbose
    GEN, tmp = ensure_gen(args.gen)
    gbc.load_protos(GEN)
    srv = FakeBridge()
    srv.start()
    failed = 0
    tests = [t for t in TESTS if not args.k or args.k in t.__name__]
    try:
        for t in tests:
            with gbc.Client(srv.endpoint, timeout_ms=2000) as c:
                t0 = time.monotonic()
                try:
                    t(srv, c)
                    print("ok   %-40s %6.0f ms" % (t.__name__, (time.monotonic() - t0) * 1e3))
                except Exception:
                    failed += 1
                    print("FAIL %s" % t.__name__)
                    traceback.print_exc()
    finally:
        srv.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print("test_fake_server.py: %d/%d passed" % (len(tests) - failed, len(tests)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
