#!/usr/bin/env bash
# --supervise with the metrics endpoint: gpubridge_frames_total and
# gpubridge_replies_total count clients' frames and the replies they get,
# whichever process answers them. The supervisor's own heartbeat (a
# ListGrainTypes a second) is not client traffic; the frames it refuses
# itself (too large, more than one part) and its replies to them are.
#   test_supervise_metrics.sh GPUBRIDGE_BIN
set -uo pipefail
BIN=$1
PY=/usr/bin/python3
"$PY" -c 'import zmq' 2>/dev/null || { echo "SKIP: $PY lacks zmq (python3-zmq)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
T=$(mktemp -d /tmp/gbsupmet.XXXXXX)
EP="ipc://$T/bridge.sock"
cat > "$T/bridge.cfg" <<CFG
endpoints = [ "$EP" ];
mode = "cpu";
max_message_size = 4096;
metrics = { enabled = true; listen = "127.0.0.1:0"; };
CFG
if ! "$BIN" --config "$T/bridge.cfg" --check-config > "$T/check.out" 2>&1; then
  grep -q "built without libmicrohttpd" "$T/check.out" && { echo "SKIP: no metrics endpoint in this build"; rm -rf "$T"; exit 77; }
  cat "$T/check.out"; echo "FAIL: --check-config"; rm -rf "$T"; exit 1
fi
"$BIN" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
trap 'kill -KILL $SUP 2>/dev/null; pkill -KILL -P $SUP 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/sup.log"; exit 1; }
for _ in $(seq 100); do grep -q "answers its heartbeat" "$T/sup.log" && break; sleep 0.1; done
ADDR=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/sup.log" | head -1)
[ -n "$ADDR" ] || fail "the metrics address is not logged"
metric() { # the value of the series $1 (exact name and labels), 0 when absent
  curl -sf --max-time 10 "$ADDR" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}
replies() { curl -sf --max-time 10 "$ADDR" | awk '$1 ~ /^gpubridge_replies_total/ { n += $2 } END { print n + 0 }'; }

# Idle: heartbeats go to the worker (and are answered) every second.
f0=$(metric gpubridge_frames_total) r0=$(replies)
sleep 3.5
f1=$(metric gpubridge_frames_total) r1=$(replies)
[ "$f1" = "$f0" ] || fail "gpubridge_frames_total went from $f0 to $f1 with no client sending (heartbeats counted)"
[ "$r1" = "$r0" ] || fail "gpubridge_replies_total went from $r0 to $r1 with no client sending (heartbeats counted)"

# A frame over max_message_size and a frame of two parts: the supervisor
# answers both itself; then one echo call the worker answers.
"$PY" - "$EP" <<'PYEOF' || fail "the client did not get its three replies"
import sys, zmq
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.RCVTIMEO, 10000)
s.connect(sys.argv[1])
s.send(b"\x0a" * 8000)
s.send_multipart([b"\x0a\x00", b"\x0a\x00"])
# ClientFrame{envelope{correlation_id 7, grain {type "echo", key 5}, KIND_REQUEST,
# message_type 1, payload EchoRequest{sequence 1}}}
env = b"\x08\x07\x12\x08\x0a\x04echo\x10\x05\x18\x01\x20\x01\x2a\x02\x08\x01"
s.send(b"\x0a" + bytes([len(env)]) + env)
for _ in range(3):
    s.recv()
PYEOF
want_f=$((f1 + 3))
for _ in $(seq 60); do
  f2=$(metric gpubridge_frames_total)
  tl=$(metric 'gpubridge_replies_total{status="STATUS_TOO_LARGE"}')
  ml=$(metric 'gpubridge_replies_total{status="STATUS_MALFORMED"}')
  [ "$f2" = "$want_f" ] && [ "$tl" = 1 ] && [ "$ml" = 1 ] && break
  sleep 0.1
done
[ "$f2" = "$want_f" ] || fail "gpubridge_frames_total is $f2 after 3 client frames, expected $want_f"
[ "$tl" = 1 ] || fail "gpubridge_replies_total{status=\"STATUS_TOO_LARGE\"} is $tl, expected 1"
[ "$ml" = 1 ] || fail "gpubridge_replies_total{status=\"STATUS_MALFORMED\"} is $ml, expected 1"
r2=$(replies)
[ "$r2" = $((r1 + 3)) ] || fail "gpubridge_replies_total is $r2 after 3 replies, expected $((r1 + 3))"
kill -TERM $SUP
wait $SUP || fail "the supervisor exited $?"
echo "PASS: under --supervise the metrics count clients' frames and replies, not the heartbeat"
