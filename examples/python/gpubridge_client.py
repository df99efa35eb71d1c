"""gpubridge_client: a small Python client for a gpubridge bridge.

The wire (proto/gpubridge.proto): a ZeroMQ DEALER socket; every message sent
is one frame holding an encoded ``gpubridge.ClientFrame`` (one ``Envelope`` or
a ``Batch``), every message received is one frame holding an encoded
``ServerFrame`` (one ``Reply`` or a ``ReplyBatch``). Replies are matched to
requests by ``correlation_id`` only: they may come in any order and in any
grouping.

Use Debian's interpreter, ``/usr/bin/python3`` (python3-zmq, python3-protobuf,
python3-numpy live there). The protobuf modules are generated at build time
(``cmake --build build`` writes ``build/examples/python/gen``); this module
finds them through, in order (an installed package puts this module and its
``gen/`` in ``share/gpubridge/python/``): the ``gen_dir`` argument of ``load_protos`` (the
scripts' ``--gen DIR``), the ``GPUBRIDGE_PY_GEN`` environment variable, then
``build/examples/python/gen`` under the repository root. By hand:
``protoc --python_out=DIR -I proto -I grains/echo -I grains/vecadd
-I grains/pagerank proto/*.proto grains/*/*.proto`` (the bridge's schemas are in
``proto/``, each built-in grain's in its folder ``grains/<name>/``; an installed
package has them all in ``share/gpubridge/proto/``).

Synchronous use::

    c = Client("tcp://127.0.0.1:5555")
    c.activate("vecadd")
    c.vecadd(key=1, op="add", a=[1, 2, 3], b=[4, 5, 6])   # -> [5.0, 7.0, 9.0]

Pipelined use (requests are batched into one frame per ``max_batch``)::

    ids = [c.send("vecadd", k, VECADD_REQUEST, encode_vecadd("mul", a, b))
           for k in range(1000)]
    replies = c.wait(ids)            # {correlation_id: Reply}
    # or: c.flush(); then c.poll(timeout_ms) repeatedly, as replies arrive
"""

import importlib
import itertools
import os
import sys
import time

try:
    import zmq
except ImportError as e:  # pragma: no cover - depends on the interpreter
    raise ImportError(
        "gpubridge_client needs python3-zmq: run it with /usr/bin/python3 "
        "(Debian's interpreter), not %s" % sys.executable) from e

# Filled in by load_protos(): the generated modules.
gpubridge_pb2 = None
control_pb2 = None
vecadd_pb2 = None
echo_pb2 = None

# Message type numbers (Envelope.message_type) of the grain types, copied from
# their .proto enums so that callers need not import the generated modules.
VECADD_REQUEST = 1   # VECTOR_ADD_MESSAGE_TYPE_REQUEST
VECADD_RESPONSE = 2  # VECTOR_ADD_MESSAGE_TYPE_RESPONSE
ECHO_REQUEST = 1     # ECHO_MESSAGE_TYPE_REQUEST
ECHO_RESPONSE = 2    # ECHO_MESSAGE_TYPE_RESPONSE

_OPS = {"add": 0, "+": 0, "sub": 1, "-": 1, "mul": 2, "*": 2, "div": 3, "/": 3}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# An installed client (share/gpubridge/python) has its modules beside it in gen/.
_INSTALLED_GEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen")
DEFAULT_GEN_DIR = (_INSTALLED_GEN_DIR if os.path.isdir(_INSTALLED_GEN_DIR)
                   else os.path.join(REPO_ROOT, "build", "examples", "python", "gen"))


# ---------------------------------------------------------------- generated code

def proto_files(root=REPO_ROOT):
    """The .proto files of a source tree: the bridge's (proto/) and each
    built-in grain's (grains/<name>/), sorted; protoc takes each file's folder
    as an -I path."""
    dirs = [os.path.join(root, "proto")]
    grains = os.path.join(root, "grains")
    if os.path.isdir(grains):
        dirs += sorted(os.path.join(grains, d) for d in os.listdir(grains))
    return sorted(os.path.join(d, f) for d in dirs if os.path.isdir(d)
                  for f in os.listdir(d) if f.endswith(".proto"))


def find_gen_dir(gen_dir=None):
    """Return the directory to load the generated *_pb2 modules from.

    Order: ``gen_dir`` if given, else ``$GPUBRIDGE_PY_GEN`` if set, else
    ``gen/`` beside this module (installed), else ``build/examples/python/gen``
    under the repository root.
    """
    if gen_dir:
        return os.path.abspath(gen_dir)
    env = os.environ.get("GPUBRIDGE_PY_GEN")
    if env:
        return os.path.abspath(env)
    return DEFAULT_GEN_DIR


def load_protos(gen_dir=None):
    """Import the generated protobuf modules (once) and return the gen dir used.

    Raises ImportError with instructions when they are not there. Safe to call
    more than once; only the first call imports.
    """
    global gpubridge_pb2, control_pb2, vecadd_pb2, echo_pb2
    d = find_gen_dir(gen_dir)
    if gpubridge_pb2 is not None:
        return d
    if not os.path.isfile(os.path.join(d, "gpubridge_pb2.py")):
        raise ImportError(
            "generated protobuf modules not found in %s: build them "
            "(cmake -S . -B build && cmake --build build --target gb_python_proto), "
            "or run `protoc --python_out=DIR` on proto/*.proto and grains/*/*.proto "
            "(each file's folder an -I path) and pass "
            "--gen DIR / set GPUBRIDGE_PY_GEN=DIR" % d)
    if d not in sys.path:
        # gpubridge_pb2 does `import control_pb2`: the dir must be on sys.path.
        sys.path.insert(0, d)
    gpubridge_pb2 = importlib.import_module("gpubridge_pb2")
    control_pb2 = importlib.import_module("control_pb2")
    vecadd_pb2 = importlib.import_module("vecadd_pb2")
    echo_pb2 = importlib.import_module("echo_pb2")
    return d


def add_gen_argument(parser):
    """Add the scripts' common ``--gen DIR`` option to an argparse parser."""
    parser.add_argument(
        "--gen", metavar="DIR", default=None,
        help="directory of the generated *_pb2.py modules (default: "
             "$GPUBRIDGE_PY_GEN, else build/examples/python/gen)")


def status_name(status):
    """Name of a gpubridge.Status number, e.g. 'STATUS_UNKNOWN_GRAIN_TYPE'."""
    load_protos()
    try:
        return gpubridge_pb2.Status.Name(status)
    except ValueError:
        return "STATUS_%d" % status


# ---------------------------------------------------------------------- errors

class BridgeError(Exception):
    """The bridge answered with a non-OK status.

    Attributes: ``status`` (the Status number), ``status_name`` (e.g.
    'STATUS_INACTIVE'), ``error`` (the bridge's text), ``reply`` (the Reply).
    """

    def __init__(self, reply):
        self.reply = reply
        self.status = reply.status
        self.status_name = status_name(reply.status)
        self.error = reply.error
        self.correlation_id = reply.correlation_id
        msg = self.status_name
        if reply.error:
            msg += ": " + reply.error
        super().__init__(msg)


class ProtocolError(Exception):
    """The bridge sent something that is not an encoded ServerFrame, or a
    reply payload that does not decode as the message it should be."""


def _parse(cls, data, what):
    """data decoded as protobuf message cls, or ProtocolError naming `what`
    (bytes that are not one, or nest deeper than protobuf's recursion limit)."""
    msg = cls()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError
        raise ProtocolError("%s payload does not decode (%d bytes): %s" % (what, len(data), e)) from e
    return msg


# --------------------------------------------------------------- grain codecs

def op_number(op):
    """VectorAddRequest.Op number of op: 0..3, or 'add'/'sub'/'mul'/'div', '+-*/'."""
    if isinstance(op, str):
        try:
            return _OPS[op.lower()]
        except KeyError:
            raise ValueError("unknown vecadd op %r (add, sub, mul, div)" % op) from None
    return int(op)


def encode_vecadd(op, a, b):
    """Encoded VectorAddRequest (payload for message type VECADD_REQUEST)."""
    load_protos()
    req = vecadd_pb2.VectorAddRequest(op=op_number(op))
    req.a.extend(float(x) for x in a)
    req.b.extend(float(x) for x in b)
    return req.SerializeToString()


def decode_vecadd(reply):
    """The result list of a vecadd Reply (raises BridgeError when not OK)."""
    _check(reply)
    if reply.message_type != VECADD_RESPONSE:
        raise ProtocolError("vecadd reply has message_type %d, not %d"
                            % (reply.message_type, VECADD_RESPONSE))
    return list(_parse(vecadd_pb2.VectorAddResponse, reply.payload, "vecadd reply").result)


def encode_echo(data, sequence=0, client_time_ns=None):
    """Encoded EchoRequest (payload for message type ECHO_REQUEST)."""
    load_protos()
    if client_time_ns is None:
        client_time_ns = time.monotonic_ns()
    return echo_pb2.EchoRequest(sequence=sequence, data=bytes(data),
                                client_time_ns=client_time_ns).SerializeToString()


def decode_echo(reply):
    """The EchoResponse of an echo Reply (raises BridgeError when not OK)."""
    _check(reply)
    if reply.message_type != ECHO_RESPONSE:
        raise ProtocolError("echo reply has message_type %d, not %d"
                            % (reply.message_type, ECHO_RESPONSE))
    return _parse(echo_pb2.EchoResponse, reply.payload, "echo reply")


def _check(reply):
    """Return reply if its status is OK, else raise BridgeError."""
    if reply.status != gpubridge_pb2.STATUS_OK:
        raise BridgeError(reply)
    return reply


def _decode_control(reply):
    """Decode a control Reply's payload by its ControlMessageType (None if empty)."""
    cls = {
        control_pb2.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_STATUS: control_pb2.GrainTypeStatus,
        control_pb2.CONTROL_MESSAGE_TYPE_TELEMETRY: control_pb2.Telemetry,
        control_pb2.CONTROL_MESSAGE_TYPE_GRAIN_TYPE_LIST: control_pb2.GrainTypeList,
        control_pb2.CONTROL_MESSAGE_TYPE_DETECT_REPORT: control_pb2.DetectReport,
        control_pb2.CONTROL_MESSAGE_TYPE_LIMITS: control_pb2.Limits,
    }.get(reply.message_type)
    if cls is None:
        return None
    return _parse(cls, reply.payload, cls.__name__)


# ---------------------------------------------------------------------- client

class Client:
    """A connection to one bridge endpoint over a ZeroMQ DEALER socket.

    Args:
        endpoint: e.g. 'tcp://127.0.0.1:5555' or 'ipc:///tmp/gpubridge.sock'.
        timeout_ms: default time to wait for a reply in call()/wait(), and for
            a send to be queued (SNDTIMEO) when the bridge pushes back.
        curve: None for a plain connection; for CURVE, the server's Z85 public
            key (str), or a dict with 'server_public_key' and optionally
            'public_key' and 'secret_key' (the client's Z85 keypair; a fresh
            one is generated when absent, fine when the bridge has no
            allow-list).
        max_batch: send() flushes its queue as one Batch frame once this many
            envelopes wait.
        max_batch_bytes: ... or once they exceed this many encoded bytes (keep
            it under the bridge's max_message_size, 1 MiB by default).
        max_frame_bytes: the largest frame sent (default 1 MiB, the bridge's
            default max_message_size; Client.limits() gives the bridge's). A
            frame over it is not sent: BridgeError, STATUS_TOO_LARGE, at once.
        context: a zmq.Context to use (default: the process-wide instance).

    Not thread-safe (ZeroMQ sockets are not): use one Client per thread.
    """

    def __init__(self, endpoint, timeout_ms=5000, curve=None, max_batch=64,
                 max_batch_bytes=256 * 1024, context=None, max_frame_bytes=1 << 20):
        load_protos()
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self.max_batch = max(1, int(max_batch))
        self.max_batch_bytes = int(max_batch_bytes)
        self.max_frame_bytes = int(max_frame_bytes)
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.IPV6, 1)  # tcp://[IPV6]:PORT endpoints
        self._sock.setsockopt(zmq.SNDTIMEO, int(timeout_ms))
        if curve is not None:
            self._setup_curve(curve)
        self._sock.connect(endpoint)
        self._ids = itertools.count(1)  # correlation ids: never 0
        self._queue = []                # Envelopes waiting for flush()
        self._queue_bytes = 0
        self._stash = {}                # correlation_id -> Reply, received, not handed out
        self._extra = []                # replies with id 0 or a duplicate id
        self._abandoned = set()         # ids whose caller timed out: drop late replies
        self._pending = set()           # ids sent that a reply is owed to
        self._unsure_until = 0.0        # until then a refusal (id 0) may be an untracked frame's
        self._refusals = 0              # refusals of whole frames (id 0, an error) kept in _extra
        self.replies_dropped = 0        # ids never sent, or past MAX_EXTRA: a peer that is not a bridge
        self._max_sent = 0              # the highest correlation id sent
        self._echo_seq = itertools.count(1)
        self.frames_sent = 0
        self.frames_received = 0

    def _setup_curve(self, curve):
        if isinstance(curve, (str, bytes)):
            curve = {"server_public_key": curve}
        server = curve["server_public_key"]
        public, secret = curve.get("public_key"), curve.get("secret_key")
        if not public or not secret:
            public, secret = zmq.curve_keypair()
        enc = lambda k: k.encode("ascii") if isinstance(k, str) else k  # noqa: E731
        self._sock.setsockopt(zmq.CURVE_SERVERKEY, enc(server))
        self._sock.setsockopt(zmq.CURVE_PUBLICKEY, enc(public))
        self._sock.setsockopt(zmq.CURVE_SECRETKEY, enc(secret))

    # -- life cycle

    def close(self):
        """Close the socket (pending sends are dropped: LINGER 0)."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- envelopes and frames

    def next_id(self):
        """A fresh non-zero correlation id."""
        return next(self._ids)

    def make_envelope(self, grain_type, key, message_type, payload, kind=None,
                      correlation_id=None):
        """Build a request Envelope (kind defaults to KIND_REQUEST)."""
        env = gpubridge_pb2.Envelope(
            correlation_id=self.next_id() if correlation_id is None else correlation_id,
            kind=gpubridge_pb2.KIND_REQUEST if kind is None else kind,
            message_type=message_type,
            payload=bytes(payload))
        env.grain.type = grain_type
        env.grain.key = key
        return env

    def send_raw(self, frame_bytes):
        """Send one frame of arbitrary bytes (for tests of bad input)."""
        try:  # the ids it carries, when it decodes, may be answered
            f = gpubridge_pb2.ClientFrame.FromString(frame_bytes)
            envs = [f.envelope] if f.HasField("envelope") else list(f.batch.envelopes)
        except Exception:  # google.protobuf.message.DecodeError: answered with id 0
            envs = []
        self._send_frame(frame_bytes, envs)

    def send_frame(self, frame):
        """Send a ClientFrame (or an Envelope, wrapped) as one frame, now."""
        if isinstance(frame, gpubridge_pb2.Envelope):
            frame = gpubridge_pb2.ClientFrame(envelope=frame)
        envs = [frame.envelope] if frame.HasField("envelope") else list(frame.batch.envelopes)
        self._send_frame(self._checked(frame, envs), envs)

    def send_batch(self, envelopes):
        """Send envelopes as one Batch frame, now (not through the queue)."""
        f = gpubridge_pb2.ClientFrame()
        f.batch.envelopes.extend(envelopes)
        self._send_frame(self._checked(f, f.batch.envelopes), f.batch.envelopes)

    def _checked(self, frame, envs):
        """The frame's bytes; BridgeError (STATUS_TOO_LARGE) when they pass
        max_frame_bytes: the bridge would refuse the frame whole."""
        data = frame.SerializeToString()
        if len(data) > self.max_frame_bytes:
            r = gpubridge_pb2.Reply(
                correlation_id=envs[0].correlation_id if len(envs) == 1 else 0,
                status=gpubridge_pb2.STATUS_TOO_LARGE,
                error="a frame of %d bytes is over the client's max_frame_bytes (%d); not sent: split "
                      "the message or the batch, or raise max_frame_bytes up to the bridge's "
                      "max_message_size (limits())" % (len(data), self.max_frame_bytes))
            raise BridgeError(r)
        return data

    def _send_frame(self, data, envs=()):
        try:
            self._sock.send(data, copy=len(data) < 8192)
        except zmq.Again:
            raise TimeoutError("send to %s not queued within %d ms (bridge not "
                               "reachable, or pushing back)"
                               % (self.endpoint, self.timeout_ms)) from None
        self.frames_sent += 1
        now = time.monotonic()
        if not envs:  # not decodable: refused with id 0
            self._unsure(now)
        for e in envs:
            self._max_sent = max(self._max_sent, e.correlation_id)
            if e.correlation_id and e.kind != gpubridge_pb2.KIND_ONE_WAY:
                self._pending.add(e.correlation_id)
            else:  # no reply confirms it: a refusal of its frame may come
                self._unsure(now)
        if len(self._pending) > self.MAX_PENDING:  # frames refused whole leave their ids
            self._pending.clear()
            self._unsure(now)

    def _unsure(self, now, timeout_ms=None):
        """For the next timeout, a refusal with id 0 may be a frame's that
        no lone call can claim."""
        t = self.timeout_ms if timeout_ms is None else timeout_ms
        self._unsure_until = max(self._unsure_until, now + max(t, 0) / 1000.0)

    # -- synchronous calls

    def call(self, grain_type, key, message_type, payload_bytes, timeout_ms=None):
        """Send one request and wait for its Reply.

        Returns the Reply (status OK). Raises BridgeError on a non-OK status and
        TimeoutError when no reply comes within timeout_ms (default: the
        client's). Envelopes queued by send() are flushed first, so that a
        grain sees its messages in the order they were issued.
        """
        env = self.make_envelope(grain_type, key, message_type, payload_bytes)
        return _check(self.call_envelope(env, timeout_ms))

    def call_envelope(self, env, timeout_ms=None):
        """Send a prepared Envelope alone and return its Reply, whatever its status.

        When nothing else of this client's can be refused (no request in
        flight, no one-way or raw frame nor abandoned call within the
        timeout), a refusal of a whole frame (id 0: too large, undecodable,
        STATUS_BUSY) that arrives after this frame was sent is its reply.
        """
        self.flush()
        self._receive(0)  # what is at hand came before this frame
        lone = (not self._pending and time.monotonic() >= self._unsure_until
                and env.correlation_id != 0 and env.kind != gpubridge_pb2.KIND_ONE_WAY)
        mark = self._refusals
        self.send_frame(env)
        return self.wait([env.correlation_id], timeout_ms,
                         _refusal_after=mark if lone else None)[env.correlation_id]

    # -- pipelining

    def send(self, grain_type, key, message_type, payload_bytes, one_way=False):
        """Queue a request; return its correlation id. Nothing waits for a reply.

        The queue goes out as one Batch frame when it reaches max_batch
        envelopes or max_batch_bytes, or on flush(), poll(), wait() or call().
        one_way=True sends KIND_ONE_WAY: no reply on success, an error Reply
        (with this id) when the bridge rejects it.
        """
        kind = gpubridge_pb2.KIND_ONE_WAY if one_way else gpubridge_pb2.KIND_REQUEST
        env = self.make_envelope(grain_type, key, message_type, payload_bytes, kind=kind)
        self.queue(env)
        return env.correlation_id

    def queue(self, env):
        """Queue a prepared Envelope for the next batch (flushing when full)."""
        size = env.ByteSize() + 4  # in a Batch: its tag and length, at most 5 bytes
        self._checked(gpubridge_pb2.ClientFrame(envelope=env), [env])  # alone, it passes the bound
        if self._queue and self._queue_bytes + size + 6 > self.max_frame_bytes:
            self.flush()  # with it, the batch would (6: the Batch's own tag and length)
        self._queue.append(env)
        self._queue_bytes += size
        if len(self._queue) >= self.max_batch or self._queue_bytes >= self.max_batch_bytes:
            self.flush()

    def flush(self):
        """Send the queued envelopes: one Envelope frame, or one Batch frame."""
        if not self._queue:
            return
        q, self._queue, self._queue_bytes = self._queue, [], 0
        if len(q) == 1:
            self.send_frame(q[0])
        else:
            self.send_batch(q)

    @property
    def queued(self):
        """Envelopes queued by send() and not yet flushed."""
        return len(self._queue)

    def poll(self, timeout_ms=0):
        """Flush, then return the replies that have arrived (list of Reply).

        Waits up to timeout_ms for the first reply when none is at hand
        (0: do not wait; negative: wait without limit), then takes everything
        else already received. Replies of any status are returned as they are
        (check reply.status); call() / wait() replies never show up here.
        """
        self.flush()
        if not self._stash and not self._extra:
            self._receive(timeout_ms)
        self._receive(0)
        out = self._extra + list(self._stash.values())
        self._stash.clear()
        self._extra = []
        return out

    def wait(self, correlation_ids, timeout_ms=None, _refusal_after=None):
        """Flush, then wait for the replies of these ids; return {id: Reply}.

        Replies of any status are returned. Raises TimeoutError when not all
        arrive within timeout_ms (default: the client's); the missing ids are
        then abandoned (their late replies are dropped) and those that did
        arrive stay available to poll(). Id 0 waits for one reply to an
        undecodable frame.
        """
        self.flush()
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000.0
        want = list(correlation_ids)
        got = {}
        while True:
            for cid in want:
                if cid not in got:
                    r = self._take(cid)
                    if r is not None:
                        got[cid] = r
            if _refusal_after is not None and not got and self._refusals > _refusal_after:
                r = self._take_refusal()
                if r is not None:  # the refusal of its frame, the only one that could be refused
                    self._pending.discard(want[0])
                    got[want[0]] = r
            if len(got) == len(want):
                return got
            left_ms = (deadline - time.monotonic()) * 1000.0
            if left_ms <= 0:
                missing = [c for c in want if c not in got]
                self._abandoned.update(missing)
                for cid in missing:
                    self._pending.discard(cid)
                self._unsure(time.monotonic(), timeout_ms)  # their refusals may still come
                for cid, r in got.items():  # give back what did arrive
                    self._stash.setdefault(cid, r)
                raise TimeoutError(
                    "no reply from %s within %d ms for %d of %d request(s) "
                    "(correlation id %s%s)"
                    % (self.endpoint, timeout_ms, len(missing), len(want),
                       missing[0], ", ..." if len(missing) > 1 else ""))
            self._receive(max(1, int(left_ms)))

    def _take(self, cid):
        """Remove and return the stashed Reply of cid, or None."""
        r = self._stash.pop(cid, None)
        if r is None:
            for i, x in enumerate(self._extra):
                if x.correlation_id == cid:
                    return self._extra.pop(i)
        return r

    def _take_refusal(self):
        """Remove and return the newest refusal of a whole frame (id 0, an
        error status: a bridge never confirms a frame with id 0), or None."""
        for i in range(len(self._extra) - 1, -1, -1):
            x = self._extra[i]
            if x.correlation_id == 0 and x.status != gpubridge_pb2.STATUS_OK:
                return self._extra.pop(i)
        return None

    # A bridge answers each request once, with its id: replies to ids never
    # sent, and whole-frame refusals (id 0) past MAX_EXTRA not yet taken,
    # come from a peer that is not one, and are dropped (replies_dropped).
    MAX_EXTRA = 1024
    # Ids owed a reply that the client tracks for claiming refusals; past it
    # (frames refused whole never answer their ids) it forgets them.
    MAX_PENDING = 65536
    # Frames one _receive reads before its caller looks at the deadline.
    MAX_FRAMES_AT_ONCE = 4096

    def _receive(self, timeout_ms):
        """Wait up to timeout_ms for a frame, then read the frames at hand:
        at most MAX_FRAMES_AT_ONCE and, with a timeout_ms above 0, none
        started after it has passed (a peer that sends without end holds no
        caller past its deadline by more than one frame's decoding).

        Replies go to the stash; late replies of abandoned ids are dropped.
        Returns the number of replies stashed.
        """
        end = time.monotonic() + max(timeout_ms, 0) / 1000.0
        if timeout_ms != 0 and not self._sock.poll(None if timeout_ms < 0 else timeout_ms,
                                                   zmq.POLLIN):
            return 0
        n = 0
        for i in range(self.MAX_FRAMES_AT_ONCE):
            if i and timeout_ms > 0 and time.monotonic() > end:
                return n
            try:
                data = self._sock.recv(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return n
            self.frames_received += 1
            frame = gpubridge_pb2.ServerFrame()
            try:
                frame.ParseFromString(data)
            except Exception as e:  # google.protobuf.message.DecodeError
                raise ProtocolError("undecodable ServerFrame (%d bytes): %s" % (len(data), e)) from e
            which = frame.WhichOneof("body")
            if which == "reply":
                replies = [frame.reply]
            elif which == "batch":
                replies = frame.batch.replies
            else:
                raise ProtocolError("ServerFrame with no body")
            for r in replies:
                cid = r.correlation_id
                self._pending.discard(cid)
                if cid in self._abandoned:
                    self._abandoned.discard(cid)
                    continue
                if cid > self._max_sent:
                    self.replies_dropped += 1
                    continue
                if cid == 0 or cid in self._stash:
                    if len(self._extra) >= self.MAX_EXTRA:
                        self.replies_dropped += 1
                        continue
                    self._extra.append(r)
                    if cid == 0 and r.status != gpubridge_pb2.STATUS_OK:
                        self._refusals += 1  # the newest in _extra arrived after any mark below it
                else:
                    self._stash[cid] = r
                n += 1
        return n

    # -- typed helpers

    def vecadd(self, key, op, a, b, timeout_ms=None):
        """result[i] = a[i] op b[i] on the vecadd grain `key` (float32); a list."""
        reply = self.call("vecadd", key, VECADD_REQUEST, encode_vecadd(op, a, b), timeout_ms)
        return decode_vecadd(reply)

    def echo(self, key, data=b"", sequence=None, timeout_ms=None):
        """Round trip through the echo grain `key`; returns the EchoResponse."""
        seq = next(self._echo_seq) if sequence is None else sequence
        reply = self.call("echo", key, ECHO_REQUEST, encode_echo(data, seq), timeout_ms)
        return decode_echo(reply)

    # -- control

    def control(self, field, msg, timeout_ms=None):
        """Send a control op (Control.<field> = msg); return the decoded reply payload.

        Returns a GrainTypeStatus / Telemetry / GrainTypeList / DetectReport /
        Limits by the reply's message_type, or None for an empty payload. Raises
        BridgeError on a non-OK status.
        """
        env = gpubridge_pb2.Envelope(correlation_id=self.next_id(),
                                     kind=gpubridge_pb2.KIND_CONTROL)
        getattr(env.control, field).CopyFrom(msg)
        return _decode_control(_check(self.call_envelope(env, timeout_ms)))

    def activate(self, grain_type):
        """Activate (or relaunch) a grain type; returns its GrainTypeStatus."""
        return self.control("activate", control_pb2.Activate(grain_type=grain_type))

    def deactivate(self, grain_type):
        """Pause a grain type (its requests wait, in order, until activate); GrainTypeStatus."""
        return self.control("deactivate", control_pb2.Deactivate(grain_type=grain_type))

    def terminate(self, grain_type):
        """Stop a grain type's ring kernel; returns its GrainTypeStatus once stopped."""
        return self.control("terminate", control_pb2.Terminate(grain_type=grain_type))

    def status(self, grain_type):
        """A grain type's GrainTypeStatus."""
        return self.control("status_request", control_pb2.StatusRequest(grain_type=grain_type))

    def telemetry(self, grain_type):
        """A grain type's Telemetry counters."""
        return self.control("telemetry_request",
                            control_pb2.TelemetryRequest(grain_type=grain_type))

    def list_grain_types(self):
        """Names of the grain types this bridge hosts (list of str)."""
        return list(self.control("list_grain_types", control_pb2.ListGrainTypes()).grain_types)

    def detect(self):
        """The bridge host's DetectReport (facts and mode decision)."""
        return self.control("detect_request", control_pb2.DetectRequest())

    def limits(self):
        """The bridge's Limits: max_message_size, hold_bound and, per grain
        type, what each request message type accepts (max_payload bytes,
        max_elements entries)."""
        return self.control("limits_request", control_pb2.LimitsRequest())

    def deactivate_grain(self, grain_type, key):
        """Free the activation (grain_type, key); BridgeError STATUS_NO_ACTIVATION if none."""
        self.control("deactivate_grain",
                     control_pb2.DeactivateGrain(grain_type=grain_type, key=key))


def message_limits(limits, grain_type, message_type):
    """The MessageTypeLimits of (grain_type, message_type) in a Limits reply, or None."""
    for t in limits.grain_types:
        if t.grain_type == grain_type:
            for m in t.message_types:
                if m.message_type == message_type:
                    return m
    return None


def enum_name(enum_type, value):
    """Name of an enum value of a generated enum wrapper, or the number."""
    try:
        return enum_type.Name(value)
    except ValueError:
        return str(value)
