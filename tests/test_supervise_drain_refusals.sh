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
PYTHONDONTWRITEBYTECODE=1 GB_TESTS_DIR=$(dirname "$0") "$PY" - "$EP" "$SUP" "$GBCTL" <<'PYEOF' || fail "see above"
import os, re, signal, subprocess, sys, time, zmq
sys.path.insert(0, os.environ["GB_TESTS_DIR"])
from raw_frames import batch, echo_env, replies
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.RCVHWM, 1)
s.setsockopt(zmq.RCVBUF, 4096)
s.setsockopt(zmq.LINGER, 0)
s.connect(sys.argv[1])
def refused():
    out = subprocess.run([sys.argv[3], "-e", sys.argv[1], "-t", "5000", "telemetry", "echo"],
                         capture_output=True, text=True).stdout
    m = re.search(r"frames_refused_unread: (\d+)", out)
    return m is not None and int(m.group(1)) > 0
# It sends, without reading, until refusals are kept for it (Telemetry
# counts them): however fast the worker answers, its replies fill the
# pipes, and the frames after that are refused.
cid = 1
end = time.time() + 150
while not refused():
    if time.time() > end:
        print("FAIL: no frame was refused for the client's unread replies before SIGTERM"); sys.exit(1)
    for i in range(40):
        try:
            s.send(batch([echo_env(cid + j, j, b"y" * 30000) for j in range(4)]), zmq.NOBLOCK)
        except zmq.Again:
            break
        cid += 4
    time.sleep(0.2)
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
