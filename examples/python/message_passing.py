#!/usr/bin/python3
"""message_passing.py: the message-passing test, from Python.

Normal mode: connect to a bridge, activate `vecadd`, run the upstream
MessagePassingTest's cases ((1,2,3,4) op (10,20,30,40) for add, sub, mul and
div) and vectors of 1,000 and 100,000 elements (--large; each element
checked; vectors larger than a slot go out of line in the bridge, and lengths
past the bridge's max_message_size are skipped with a note), then send add/sub/mul/div
requests (--count of each, deterministic float32 values of --length elements)
one call at a time and verify every result bit for bit against numpy float32
arithmetic, with round-trip latency stats; then the same requests again,
pipelined through send()/poll() in Batch frames; then deactivate `vecadd`,
send a request (the bridge holds it and answers it correctly after the
re-activation) and activate it again (requests must succeed again). Exit
0 only when everything was right. Last line, e.g.:

    message_passing.py: 800/800 correct, median 120.3 us (400 calls, 400 pipelined)

--bad-input mode: send garbage bytes, an unknown grain type, unknown message
types and other bad envelopes, check each gets the documented error status,
and check the bridge keeps serving (a normal call afterwards succeeds).

Run with Debian's interpreter (python3-zmq / python3-protobuf live there):

    /usr/bin/python3 examples/python/message_passing.py --endpoint tcp://127.0.0.1:5555
    /usr/bin/python3 examples/python/message_passing.py --bad-input
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpubridge_client as gbc  # noqa: E402  (first: it names the right interpreter)

import numpy as np  # noqa: E402

OPS = ("add", "sub", "mul", "div")
PROG = "message_passing.py"


def make_cases(count, length, seed):
    """Deterministic test cases: [(op, a, b, expected)] with float32 arrays.

    `count` cases per op. Operands are float32 in +-[0.25, 1000); divisors are
    never zero. Expected results use numpy float32 arithmetic, which rounds
    like the grain's C/CUDA float ops (IEEE 754 round-to-nearest).
    """
    rng = np.random.default_rng(seed)
    cases = []
    for op in OPS:
        for _ in range(count):
            mag = rng.uniform(0.25, 1000.0, size=(2, length))
            sign = rng.choice(np.array([-1.0, 1.0]), size=(2, length))
            a, b = (mag * sign).astype(np.float32)
            if op == "add":
                exp = a + b
            elif op == "sub":
                exp = a - b
            elif op == "mul":
                exp = a * b
            else:
                exp = a / b
            assert exp.dtype == np.float32
            cases.append((op, a, b, exp))
    return cases


def same_f32(result, expected):
    """True when result (list of float) equals expected (float32 array) bit for bit."""
    got = np.asarray(result, dtype=np.float32)
    return got.shape == expected.shape and np.array_equal(got.view(np.uint32),
                                                          expected.view(np.uint32))


def describe_mismatch(op, a, b, result, expected):
    """One line saying what went wrong with a vecadd result."""
    return "%s a=%s b=%s: got %s, expected %s" % (
        op, a.tolist(), b.tolist(), list(result), expected.tolist())


def latency_stats(ns):
    """(median, p99, mean, min, max) in microseconds of a list of nanoseconds."""
    us = np.asarray(ns, dtype=np.float64) / 1000.0
    return (float(np.median(us)), float(np.percentile(us, 99)), float(us.mean()),
            float(us.min()), float(us.max()))


class Checker:
    """Counts named checks and prints each failure."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s%s" % (what, (": " + detail) if detail else ""))
        return ok

    def expect_status(self, reply, want, what):
        """Check reply.status is in want (a status or a tuple); print it."""
        want = want if isinstance(want, tuple) else (want,)
        got = gbc.status_name(reply.status)
        ok = reply.status in want
        print("%s %-44s -> %s%s" % ("ok  " if ok else "FAIL", what, got,
                                    (" (%s)" % reply.error) if reply.error else ""))
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("     expected %s" % " or ".join(gbc.status_name(s) for s in want))
        return ok


# ---------------------------------------------------------------- normal mode

def expected(op, a, b):
    """a op b in float32, as the grain computes it."""
    return {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[op]


def run_upstream(client, ck, key):
    """The upstream MessagePassingTest: 4 elements, one call per op."""
    a = np.array([1, 2, 3, 4], dtype=np.float32)
    b = np.array([10, 20, 30, 40], dtype=np.float32)
    for op in OPS:
        exp = expected(op, a, b)
        try:
            result = client.vecadd(key, op, a, b)
        except (gbc.BridgeError, TimeoutError) as e:
            ck.check(False, "upstream %s" % op, str(e))
            continue
        if ck.check(same_f32(result, exp), "upstream %s" % op, describe_mismatch(op, a, b, result, exp)):
            print("upstream %s: (1,2,3,4) %s (10,20,30,40) = %s" % (op, op, [float(x) for x in result]))


def run_large(client, ck, key, lengths, max_message_size, seed, timeout_ms):
    """Vectors of each length in `lengths`, every op, every element checked."""
    for n in lengths:
        if max_message_size and 8 * n + 256 > max_message_size:
            print("large %d: skipped (a frame of about %d bytes exceeds the bridge's max_message_size %d)"
                  % (n, 8 * n + 64, max_message_size))
            continue
        for op, a, b, exp in make_cases(1, n, seed):
            t0 = time.perf_counter()
            try:
                result = client.vecadd(key, op, a, b, timeout_ms)
            except (gbc.BridgeError, TimeoutError) as e:
                ck.check(False, "large %d %s" % (n, op), str(e))
                continue
            got = np.asarray(result, dtype=np.float32)
            if ck.check(same_f32(result, exp), "large %d %s" % (n, op),
                        "%d of %d elements differ" % (int(np.sum(got != exp)) if got.shape == exp.shape
                                                     else n, n)):
                print("large %d %s: all %d elements correct (%.1f ms)"
                      % (n, op, n, (time.perf_counter() - t0) * 1e3))


def run_calls(client, cases, ck, key):
    """One synchronous call per case; verify; return (round-trip ns list, correct)."""
    times = []
    correct = 0
    for i, (op, a, b, exp) in enumerate(cases):
        payload = gbc.encode_vecadd(op, a, b)
        t0 = time.perf_counter_ns()
        try:
            reply = client.call("vecadd", key, gbc.VECADD_REQUEST, payload)
        except (gbc.BridgeError, TimeoutError) as e:
            ck.check(False, "call %d (%s)" % (i, op), str(e))
            continue
        times.append(time.perf_counter_ns() - t0)
        result = gbc.decode_vecadd(reply)
        correct += ck.check(same_f32(result, exp), "call %d" % i,
                            describe_mismatch(op, a, b, result, exp))
    return times, correct


def run_pipelined(client, cases, ck, keys, timeout_ms):
    """Send every case with send() (batched), collect with poll(), verify.

    Requests are spread over `keys` grains. Returns (wall seconds, correct).
    """
    t0 = time.perf_counter()
    correct = 0
    want = {}
    for i, (op, a, b, exp) in enumerate(cases):
        cid = client.send("vecadd", i % keys, gbc.VECADD_REQUEST, gbc.encode_vecadd(op, a, b))
        want[cid] = (i, op, a, b, exp)
    client.flush()
    deadline = time.monotonic() + timeout_ms / 1000.0
    while want and time.monotonic() < deadline:
        for reply in client.poll(timeout_ms=50):
            case = want.pop(reply.correlation_id, None)
            if case is None:
                ck.check(False, "pipelined reply", "unexpected correlation id %d (%s)"
                         % (reply.correlation_id, gbc.status_name(reply.status)))
                continue
            i, op, a, b, exp = case
            if reply.status != 0:
                ck.check(False, "pipelined %d (%s)" % (i, op), str(gbc.BridgeError(reply)))
                continue
            result = gbc.decode_vecadd(reply)
            correct += ck.check(same_f32(result, exp), "pipelined %d" % i,
                                describe_mismatch(op, a, b, result, exp))
    for cid in want:
        ck.check(False, "pipelined request %d" % want[cid][0], "no reply within %d ms" % timeout_ms)
    return time.perf_counter() - t0, correct


def wait_reply(client, cid, timeout_ms, ck):
    """Poll up to timeout_ms for the reply of cid; None if it has not come.

    Unlike Client.wait(), a miss does not abandon cid: its reply can still be
    collected later. Other replies are unexpected here and fail a check.
    """
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        left = int((deadline - time.monotonic()) * 1000)
        if left <= 0:
            return None
        found = None
        for r in client.poll(timeout_ms=left):
            if r.correlation_id == cid:
                found = r
            else:
                ck.check(False, "reply", "unexpected correlation id %d" % r.correlation_id)
        if found is not None:
            return found


def run_normal(client, args):
    """The message-passing test; returns the process exit code."""
    ck = Checker()
    pb = gbc.gpubridge_pb2
    cpb = gbc.control_pb2

    types = client.list_grain_types()
    print("grain types: %s" % ", ".join(types))
    if not ck.check("vecadd" in types, "list_grain_types", "no vecadd on this bridge"):
        return 1
    st = client.activate("vecadd")
    print("activate vecadd: state %s, mode %s, placement %s" % (
        gbc.enum_name(cpb.GrainState, st.state), st.mode or "?",
        gbc.enum_name(cpb.Placement, st.placement)))
    ck.check(st.state == cpb.GRAIN_STATE_ACTIVE, "activate vecadd",
             "state %s" % gbc.enum_name(cpb.GrainState, st.state))

    run_upstream(client, ck, args.key)
    run_large(client, ck, args.key, [int(x) for x in args.large.split(",") if x],
              getattr(st, "max_message_size", 0), args.seed, max(client.timeout_ms, 60000))

    cases = make_cases(args.count, args.length, args.seed)
    # Warm-up (not timed, not counted): connection set-up, first activation.
    for op, a, b, _ in cases[:min(len(cases), args.warmup)]:
        client.vecadd(args.key, op, a, b)

    times, call_ok = run_calls(client, cases, ck, args.key)
    if times:
        med, p99, mean, lo, hi = latency_stats(times)
        print("calls:     %d/%d correct; round trip median %.1f us, p99 %.1f us, "
              "mean %.1f us, min %.1f us, max %.1f us"
              % (call_ok, len(cases), med, p99, mean, lo, hi))
    else:
        med = float("nan")
        print("calls:     0/%d correct" % len(cases))

    pipe_ok = 0
    if not args.no_pipeline:
        secs, pipe_ok = run_pipelined(client, cases, ck, args.keys, client.timeout_ms)
        print("pipelined: %d/%d correct over %d grains; %.1f ms, %.0f requests/s "
              "(batches of up to %d)"
              % (pipe_ok, len(cases), args.keys, secs * 1e3, len(cases) / secs, client.max_batch))

    # Deactivate, send one request, activate. The bridge holds a request to a
    # deactivated type and answers it after Activate (control.proto); a reply
    # while deactivated must be STATUS_INACTIVE. A request never answered, or
    # answered wrongly, fails.
    st = client.deactivate("vecadd")
    ck.check(st.state == cpb.GRAIN_STATE_INACTIVE, "deactivate vecadd",
             "state %s" % gbc.enum_name(cpb.GrainState, st.state))
    op, a, b, exp = cases[0]
    cid = client.send("vecadd", args.key, gbc.VECADD_REQUEST, gbc.encode_vecadd(op, a, b))
    r = wait_reply(client, cid, args.inactive_wait_ms, ck)
    if r is not None:
        ck.expect_status(r, pb.STATUS_INACTIVE, "vecadd request while deactivated")
    st = client.activate("vecadd")
    ck.check(st.state == cpb.GRAIN_STATE_ACTIVE, "re-activate vecadd",
             "state %s" % gbc.enum_name(cpb.GrainState, st.state))
    if r is None:
        r = client.wait([cid])[cid]
        print("while deactivated: no reply within %d ms (held); answered %s after activate"
              % (args.inactive_wait_ms, gbc.status_name(r.status)))
        if ck.check(r.status == pb.STATUS_OK, "held request after re-activate",
                    str(gbc.BridgeError(r)) if r.status else ""):
            result = gbc.decode_vecadd(r)
            ck.check(same_f32(result, exp), "held request after re-activate",
                     describe_mismatch(op, a, b, result, exp))
    try:
        result = client.vecadd(args.key, op, a, b)
        ok = ck.check(same_f32(result, exp), "vecadd after re-activate",
                      describe_mismatch(op, a, b, result, exp))
    except (gbc.BridgeError, TimeoutError) as e:
        ok = ck.check(False, "vecadd after re-activate", str(e))
    print("deactivate + activate: %s" % ("ok" if ok else "FAILED"))

    tel = client.telemetry("vecadd")
    print("telemetry vecadd: %d processed, %d errors, %d launches"
          % (tel.messages_processed, tel.errors, tel.launches))

    total = len(cases) * (1 if args.no_pipeline else 2)
    correct = call_ok + pipe_ok
    if ck.failed:
        print("%d check(s) failed" % ck.failed)
    print("%s: %d/%d correct, median %.1f us (%d calls, %d pipelined)%s"
          % (PROG, correct, total, med, len(cases), 0 if args.no_pipeline else len(cases),
             "" if ck.failed == 0 else ", FAILED"))
    return 0 if ck.failed == 0 and correct == total else 1


# ------------------------------------------------------------- bad-input mode

def run_bad_input(client, args):
    """Bad input gets the documented error status; the bridge keeps serving."""
    ck = Checker()
    pb = gbc.gpubridge_pb2
    cpb = gbc.control_pb2
    good = gbc.encode_vecadd("add", [1.0, 2.0, 3.0], [0.5, 0.25, 0.125])

    client.activate("vecadd")

    def raw(data, what):
        # An undecodable frame is answered with correlation id 0.
        client.send_raw(data)
        ck.expect_status(client.wait([0])[0], pb.STATUS_MALFORMED, what)

    def env_call(env, want, what):
        ck.expect_status(client.call_envelope(env), want, what)

    def req(grain_type, key, mtype, payload):
        return client.make_envelope(grain_type, key, mtype, payload)

    raw(b"\x0a\x7fnot a protobuf", "garbage bytes (truncated field)")
    raw(b"\xff" * 12, "garbage bytes (overlong varint)")
    raw(b"", "empty frame (ClientFrame without body)")
    env_call(req("no.such.grain", 1, 1, good), pb.STATUS_UNKNOWN_GRAIN_TYPE,
             "unknown grain type 'no.such.grain'")
    env_call(req("vecadd", 1, 999, good), pb.STATUS_UNKNOWN_MESSAGE_TYPE,
             "vecadd message type 999")
    env_call(req("vecadd", 1, 0, good), pb.STATUS_UNKNOWN_MESSAGE_TYPE,
             "vecadd message type 0")
    env_call(req("vecadd", 1, 0xFF00, good), pb.STATUS_UNKNOWN_MESSAGE_TYPE,
             "vecadd message type 0xFF00 (reserved)")
    env_call(req("echo", 1, 7, b""), pb.STATUS_UNKNOWN_MESSAGE_TYPE,
             "echo message type 7")
    env_call(req("vecadd", 1, gbc.VECADD_REQUEST, b"\x0a\x7fjunk"), pb.STATUS_MALFORMED,
             "vecadd payload that is not a VectorAddRequest")
    env_call(req("vecadd", 1, gbc.VECADD_REQUEST, gbc.encode_vecadd("add", [1.0, 2.0], [1.0])),
             (pb.STATUS_MALFORMED, pb.STATUS_HANDLER_ERROR), "vecadd vectors of unequal length")
    # Past max_message_size (messages larger than a slot are carried out of
    # line): the frame is refused unread, with correlation id 0.
    n = args.too_large or (client.status("vecadd").max_message_size or 1048576) // 8 + 1000
    big = [1.0] * n
    client.send_raw(pb.ClientFrame(envelope=req("vecadd", 1, gbc.VECADD_REQUEST,
                                                gbc.encode_vecadd("add", big, big))).SerializeToString())
    r = client.wait([0])[0]
    if ck.expect_status(r, pb.STATUS_TOO_LARGE, "vecadd vectors of %d elements (past max_message_size)" % n):
        ck.check("max_message_size" in r.error, "error text names max_message_size", r.error)
    e = req("vecadd", 1, gbc.VECADD_REQUEST, good)
    e.kind = pb.KIND_UNSPECIFIED
    env_call(e, pb.STATUS_MISSING_FIELD, "envelope without kind")
    e = req("vecadd", 1, gbc.VECADD_REQUEST, good)
    e.ClearField("grain")
    env_call(e, pb.STATUS_MISSING_FIELD, "request without grain")
    env_call(pb.Envelope(correlation_id=client.next_id(), kind=pb.KIND_CONTROL),
             pb.STATUS_MISSING_FIELD, "control without op")
    e = pb.Envelope(correlation_id=client.next_id(), kind=pb.KIND_CONTROL)
    e.control.status_request.grain_type = "no.such.grain"
    env_call(e, pb.STATUS_UNKNOWN_GRAIN_TYPE, "status of unknown grain type")
    e = req("no.such.grain", 1, 1, good)
    e.kind = pb.KIND_ONE_WAY
    env_call(e, pb.STATUS_UNKNOWN_GRAIN_TYPE, "one-way to unknown grain type")

    # A batch mixing good and bad envelopes: each answered on its own.
    envs = [req("vecadd", 2, gbc.VECADD_REQUEST, good), req("no.such.grain", 2, 1, good),
            req("vecadd", 2, 999, good), req("echo", 2, gbc.ECHO_REQUEST, gbc.encode_echo(b"hi"))]
    wants = [pb.STATUS_OK, pb.STATUS_UNKNOWN_GRAIN_TYPE, pb.STATUS_UNKNOWN_MESSAGE_TYPE,
             pb.STATUS_OK]
    client.send_batch(envs)
    replies = client.wait([x.correlation_id for x in envs])
    for i, (x, w) in enumerate(zip(envs, wants)):
        ck.expect_status(replies[x.correlation_id], w, "batch envelope %d (%s)" % (i, x.grain.type))

    # Still serving: normal calls succeed and compute correctly.
    try:
        res = client.vecadd(args.key, "add", [1.0, 2.0, 3.0], [0.5, 0.25, 0.125])
        ck.check(res == [1.5, 2.25, 3.125], "vecadd after bad input", "got %s" % res)
        print("%s vecadd after bad input -> %s" % ("ok  " if res == [1.5, 2.25, 3.125] else "FAIL", res))
        er = client.echo(args.key, b"still here")
        ck.check(er.data == b"still here", "echo after bad input", "got %r" % er.data)
        print("%s echo after bad input -> %r (grain_count %d)"
              % ("ok  " if er.data == b"still here" else "FAIL", er.data, er.grain_count))
        st = client.status("vecadd")
        ck.check(st.state == cpb.GRAIN_STATE_ACTIVE, "vecadd still active",
                 gbc.enum_name(cpb.GrainState, st.state))
    except (gbc.BridgeError, TimeoutError) as e:
        ck.check(False, "call after bad input", str(e))

    total = ck.passed + ck.failed
    print("%s --bad-input: %d/%d checks passed%s"
          % (PROG, ck.passed, total, "" if ck.failed == 0 else ", FAILED"))
    return 0 if ck.failed == 0 else 1


# ----------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", default="tcp://127.0.0.1:5555",
                   help="bridge endpoint (default %(default)s)")
    gbc.add_gen_argument(p)
    p.add_argument("--bad-input", action="store_true",
                   help="check error replies to bad input instead of the normal test")
    p.add_argument("--count", type=int, default=100, help="requests per op (default 100)")
    p.add_argument("--large", default="1000,100000",
                   help="lengths of the large vectors, comma-separated (default %(default)s; '' for none)")
    p.add_argument("--length", type=int, default=3,
                   help="elements per vector (default 3: what a 64-byte vecadd slot holds)")
    p.add_argument("--key", type=int, default=1, help="vecadd grain key of the calls")
    p.add_argument("--keys", type=int, default=8, help="grains the pipelined phase spreads over")
    p.add_argument("--seed", type=int, default=20240601, help="seed of the operand values")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls first (default 20)")
    p.add_argument("--batch", type=int, default=64, help="envelopes per Batch frame (default 64)")
    p.add_argument("--no-pipeline", action="store_true", help="skip the pipelined phase")
    p.add_argument("--too-large", type=int, default=0,
                   help="--bad-input: elements of the oversized vecadd request "
                        "(default: enough to pass the bridge's max_message_size)")
    p.add_argument("--timeout-ms", type=int, default=5000, help="reply timeout (default 5000)")
    p.add_argument("--inactive-wait-ms", type=int, default=500,
                   help="how long to wait for STATUS_INACTIVE before taking the request "
                        "as held by the deactivated type (default 500)")
    p.add_argument("--curve-server-key", metavar="Z85",
                   help="connect with CURVE to a server with this public key")
    p.add_argument("--curve-public-key", metavar="Z85", help="client public key (CURVE)")
    p.add_argument("--curve-secret-key", metavar="Z85", help="client secret key (CURVE)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    gbc.load_protos(args.gen)
    curve = None
    if args.curve_server_key:
        curve = {"server_public_key": args.curve_server_key,
                 "public_key": args.curve_public_key, "secret_key": args.curve_secret_key}
    with gbc.Client(args.endpoint, timeout_ms=args.timeout_ms, curve=curve,
                    max_batch=args.batch) as client:
        try:
            if args.bad_input:
                return run_bad_input(client, args)
            return run_normal(client, args)
        except (gbc.BridgeError, TimeoutError, gbc.ProtocolError) as e:
            print("%s: FAILED: %s: %s" % (PROG, type(e).__name__, e))
            return 1


if __name__ == "__main__":
    sys.exit(main())
