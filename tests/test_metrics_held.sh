#!/usr/bin/env bash
# The metrics' gpubridge_grain_held_bytes, summed over the types, is
# Telemetry.held_bytes: frames of a client that wait behind its own held
# frame (io_threads = 1) and frames held in the shards (io_threads = 2)
# count too.
#   test_metrics_held.sh GPUBRIDGE_BIN GBCTL
set -uo pipefail
BIN=$1 GBCTL=$2
PY=/usr/bin/python3
"$PY" -c 'import zmq' 2>/dev/null || { echo "SKIP: $PY lacks zmq (python3-zmq)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
T=$(mktemp -d /tmp/gbheld.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill -KILL $PID 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/bridge.log"; exit 1; }
for io in 1 2; do
  EP="ipc://$T/bridge$io.sock"
  cat > "$T/bridge.cfg" <<CFG
endpoints = [ "$EP" ];
mode = "cpu";
io_threads = $io;
grains = ( { type = "echo"; queue_capacity = 64; } );
metrics = { enabled = true; listen = "127.0.0.1:0"; };
CFG
  if ! "$BIN" --config "$T/bridge.cfg" --check-config > "$T/check.out" 2>&1; then
    grep -q "built without libmicrohttpd" "$T/check.out" && { echo "SKIP: no metrics endpoint in this build"; exit 77; }
    cat "$T/check.out"; fail "--check-config"
  fi
  "$BIN" --config "$T/bridge.cfg" 2> "$T/bridge.log" &
  PID=$!
  for _ in $(seq 100); do "$GBCTL" -e "$EP" -t 3000 list >/dev/null 2>&1 && break; sleep 0.1; done
  ADDR=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/bridge.log" | head -1)
  [ -n "$ADDR" ] || fail "the metrics address is not logged"
  "$GBCTL" -e "$EP" deactivate echo > /dev/null || fail "deactivate echo"
  # 20 frames of 50 echo requests from one client: 64 fill the ring, the
  # first frame that does not fit is held, the later ones wait behind it.
  PYTHONDONTWRITEBYTECODE=1 GB_TESTS_DIR=$(dirname "$0") "$PY" - "$EP" > "$T/client.out" 2>&1 <<'PYEOF' &
import os, sys, zmq
sys.path.insert(0, os.environ["GB_TESTS_DIR"])
from raw_frames import batch, echo_env
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.RCVTIMEO, 20000)
s.connect(sys.argv[1])
cid = 1
for f in range(20):
    s.send(batch([echo_env(cid + j, j % 5, b"x" * 200) for j in range(50)]))
    cid += 50
s.recv()  # once Activate lets the held frames in
print("ok")
PYEOF
  CL=$!
  tel= met=
  for _ in $(seq 50); do
    sleep 0.2
    tel=$("$GBCTL" -e "$EP" telemetry | sed -n 's/.*held_bytes: \([0-9]*\).*/\1/p' | head -1)
    met=$(curl -sf --max-time 10 "$ADDR" | awk '$1 ~ /^gpubridge_grain_held_bytes/ { n += $2 } END { print n + 0 }')
    [ -n "$tel" ] && [ "$tel" -gt 0 ] && [ "$tel" = "$met" ] && break
  done
  [ -n "$tel" ] && [ "$tel" -gt 10000 ] || fail "io_threads $io: Telemetry.held_bytes is '${tel}' with frames held"
  [ "$tel" = "$met" ] || fail "io_threads $io: Telemetry.held_bytes is $tel, the metrics' sum of gpubridge_grain_held_bytes $met"
  "$GBCTL" -e "$EP" activate echo > /dev/null || fail "activate echo"
  wait $CL || { cat "$T/client.out"; fail "io_threads $io: the client got no reply after Activate"; }
  kill -TERM $PID
  wait $PID || fail "io_threads $io: the bridge exited $?"
  PID=
  echo "io_threads $io: held_bytes $tel in Telemetry and in the metrics"
done
echo "PASS: the metrics' held bytes add up to Telemetry's"
