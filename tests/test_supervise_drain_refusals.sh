#!/usr/bin/env bash
# --supervise, SIGTERM while a client that does not read has frame
# refusals kept for it: once the drain began every refusal it reads says
# STATUS_SHUTTING_DOWN, even for a frame refused just before
# (docs/protocol.md, "Shutdown"), as without --supervise.
#   test_supervise_drain_refusals.sh GPUBRIDGE_BIN GBCTL
set -uo pipefail
BIN=$1 GBCTL=$2
PY=/usr/bin/python3
"$PY" -c 'import zmq' 2>/dev/null || { echo "SKIP: $PY lacks zmq (python3-zmq)"; exit 77; }
T=$(mktemp -d /tmp/gbsupdrain.XXXXXX)
EP="ipc://$T/bridge.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\nshutdown_drain_ms = 3000;\n' "$EP" > "$T/bridge.cfg"
"$BIN" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
trap 'kill -KILL $SUP 2>/dev/null; pkill -KILL -P $SUP 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/sup.log"; exit 1; }
for _ in $(seq 100); do grep -q "answers its heartbeat" "$T/sup.log" && break; sleep 0.1; done
"$PY" - "$EP" "$SUP" "$GBCTL" <<'PYEOF' || fail "see above"
import os, re, signal, subprocess, sys, time, zmq
def v(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7f) | 0x80]); n >>= 7
    return out + bytes([n])
def ld(field, b): return bytes([field << 3 | 2]) + v(len(b)) + b
def env(cid, key):
    grain = ld(1, b"echo") + b"\x10" + v(key)
    return b"\x08" + v(cid) + ld(2, grain) + b"\x18\x01\x20\x01" + ld(5, ld(2, b"y" * 30000))
def replies(frame):
    """(correlation id, status) of each Reply in a ServerFrame."""
    out, i = [], 0
    def rv(i):
        n = s = 0
        while True:
            b = frame[i]; i += 1; n |= (b & 0x7f) << s; s += 7
            if b < 0x80: return n, i
    def reply(buf):
        corr = st = 0; j = 0
        while j < len(buf):
            key, j = rv_in(buf, j)
            if key & 7 == 0:
                val, j = rv_in(buf, j)
                if key >> 3 == 1: corr = val
                elif key >> 3 == 2: st = val
            elif key & 7 == 2:
                n, j = rv_in(buf, j); j += n
            else: raise ValueError("wire type %d" % (key & 7))
        return corr, st
    def rv_in(buf, j):
        n = s = 0
        while True:
            b = buf[j]; j += 1; n |= (b & 0x7f) << s; s += 7
            if b < 0x80: return n, j
    key, i = rv(0)
    n, i = rv(i)
    body = frame[i:i + n]
    if key >> 3 == 1:
        return [reply(body)]
    j = 0
    while j < len(body):
        k, j = rv_in(body, j)
        n, j = rv_in(body, j)
        out.append(reply(body[j:j + n])); j += n
    return out
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.RCVHWM, 1)
s.setsockopt(zmq.RCVBUF, 4096)
s.setsockopt(zmq.LINGER, 0)
s.connect(sys.argv[1])
cid = 1
for i in range(400):
    s.send(ld(2, b"".join(ld(1, env(cid + j, j)) for j in range(4))))
    cid += 4
# Refusals are kept for it before the drain begins (Telemetry counts them).
end = time.time() + 60
while time.time() < end:
    out = subprocess.run([sys.argv[3], "-e", sys.argv[1], "-t", "3000", "telemetry", "echo"],
                         capture_output=True, text=True).stdout
    m = re.search(r"frames_refused_unread: (\d+)", out)
    if m and int(m.group(1)) > 0:
        break
    time.sleep(0.2)
else:
    print("FAIL: no frame was refused for the client's unread replies before SIGTERM"); sys.exit(1)
os.kill(int(sys.argv[2]), signal.SIGTERM)
time.sleep(0.3)
seen = {}
end = time.time() + 30
while time.time() < end and s.poll(2000):
    for corr, st in replies(s.recv()):
        seen[(corr == 0, st)] = seen.get((corr == 0, st), 0) + 1
print("replies read after SIGTERM (id 0?, status): count:", seen)
refusals = sum(n for (zero, st), n in seen.items() if zero)
busy = seen.get((True, 8), 0)
if not refusals:
    print("FAIL: no frame refusal was kept for the client: the test did not test that"); sys.exit(1)
if busy:
    print("FAIL: %d frame refusal(s) read after SIGTERM say STATUS_BUSY" % busy); sys.exit(1)
PYEOF
wait $SUP || fail "the supervisor exited $?"
echo "PASS: refusals kept for a client that does not read say STATUS_SHUTTING_DOWN once the drain began"
