#!/usr/bin/env bash
# --supervise: what the supervisor answers itself while its worker is dead
# is counted in the next worker's Telemetry. Frames over max_message_size
# sent right after the worker is killed (before the supervisor has seen it
# go) are noted towards the dead worker; those notes are sent again to the
# new one, so Telemetry.frames_too_large counts every refusal.
#   test_supervise_notes_restart.sh GPUBRIDGE_BIN GBCTL
set -uo pipefail
BIN=$1 GBCTL=$2
PY=/usr/bin/python3
"$PY" -c 'import zmq' 2>/dev/null || { echo "SKIP: $PY lacks zmq (python3-zmq)"; exit 77; }
T=$(mktemp -d /tmp/gbsupnotes.XXXXXX)
EP="ipc://$T/bridge.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\nmax_message_size = 4096;\n' "$EP" > "$T/bridge.cfg"
"$BIN" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
trap 'kill -KILL $SUP 2>/dev/null; pkill -KILL -P $SUP 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/sup.log"; exit 1; }
too_large() { "$GBCTL" -e "$EP" -t 3000 telemetry echo | sed -n 's/.*frames_too_large: \([0-9]*\).*/\1/p' | head -1; }
for round in 1 2 3; do
  for _ in $(seq 150); do "$GBCTL" -e "$EP" -t 1000 list >/dev/null 2>&1 && break; sleep 0.1; done
  W=$(pgrep -P $SUP | head -1)
  [ -n "$W" ] || fail "round $round: no worker"
  "$PY" - "$EP" "$W" <<'PYEOF' || fail "round $round: the client did not get its 10 refusals"
import os, signal, sys, time, zmq
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.RCVTIMEO, 10000)
s.connect(sys.argv[1])
time.sleep(0.2)  # connected: the frames follow the kill at once
os.kill(int(sys.argv[2]), signal.SIGKILL)
for _ in range(10):
    s.send(b"\x0a" * 8000)
for _ in range(10):
    s.recv()
PYEOF
  n=
  for _ in $(seq 100); do
    n=$(too_large)
    [ "${n:-0}" -ge 10 ] && break
    sleep 0.1
  done
  sleep 2.5 # nothing more comes: not 11 either (and a heartbeat confirms the notes)
  n=$(too_large)
  [ "$n" = 10 ] || fail "round $round: Telemetry.frames_too_large is ${n:-none} in the new worker, 10 frames refused since the last one died"
  echo "round $round: 10 of 10 counted"
done
grep -q "answers its heartbeat" "$T/sup.log" || fail "no worker answered"
kill -TERM $SUP
wait $SUP || fail "the supervisor exited $?"
echo "PASS: refusals noted towards a dead worker are counted by the next"
