#!/usr/bin/env bash
# Supervision of a worker that spins (gpubridge-test --supervise, any mode):
# its main loop runs without reading (the GPUBRIDGE_TEST_SPIN hook, message
# type 0xFF7E), so it answers no heartbeat although it keeps running. The
# supervisor must kill it once its running grace is used up (3 heartbeat
# timeouts; GPUBRIDGE_TEST_HEARTBEAT_MS shortens them), answer the requests
# in flight with STATUS_GPU_ERROR, start a new worker that serves, and stop
# with exit 0 on SIGTERM.
#   test_supervise_hung.sh BUILD_DIR [MODE]
set -uo pipefail
BUILD=$1 MODE=${2:-cpu}
if [ "$MODE" != cpu ] && ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no GPU"; exit 77; fi
GBCTL="$BUILD/client/gbctl"
T=$(mktemp -d /tmp/gbhung.XXXXXX)
EP="ipc://$T/bridge.sock"
printf 'endpoints = [ "%s" ];\nmode = "%s";\n' "$EP" "$MODE" > "$T/bridge.cfg"
GPUBRIDGE_TEST_SPIN=1 GPUBRIDGE_TEST_HEARTBEAT_MS=2000 \
  "$BUILD/bridge/gpubridge-test" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
worker() { cat /proc/$SUP/task/$SUP/children 2>/dev/null | tr -d ' '; }
cleanup() {
  local w
  w=$(worker)
  kill -KILL $SUP 2>/dev/null
  [ -n "$w" ] && kill -KILL "$w" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
up() { "$GBCTL" --endpoint "$EP" --timeout 300 list >/dev/null 2>&1; }
# The worker's heartbeat answers counted in the log: the hung check applies
# to a worker that has answered one.
answered() { grep -c "answers its heartbeat" "$T/sup.log"; }
serving=0
for _ in $(seq 300); do up && [ "$(answered)" -ge 1 ] && serving=1 && break; sleep 0.1; done
[ $serving = 1 ] || { cat "$T/sup.log"; echo "FAIL: not serving"; exit 1; }
W1=$(worker)
[ -n "$W1" ] || fail "no worker process"

# The spinning request, then one that waits behind it, unread by the worker.
"$GBCTL" --endpoint "$EP" --timeout 30000 send pagerank.sender 1 65406 > "$T/spin.out" 2>&1 &
SPIN=$!
for _ in $(seq 100); do grep -q "server loop spins" "$T/sup.log" && break; sleep 0.1; done
grep -q "server loop spins" "$T/sup.log" || fail "the worker did not start spinning"
"$GBCTL" --endpoint "$EP" --timeout 30000 send vecadd 7 add 1,2,3 10,20,30 > "$T/inflight.out" 2>&1
wait $SPIN
grep -q "GPU_ERROR" "$T/spin.out" || { cat "$T/spin.out"; fail "the spinning request did not get STATUS_GPU_ERROR"; }
grep -q "GPU_ERROR" "$T/inflight.out" ||
  { cat "$T/inflight.out"; fail "a request in flight to the spinning worker did not get STATUS_GPU_ERROR"; }
grep -q "it runs but does not answer" "$T/sup.log" || fail "the supervisor did not kill the running, silent worker"
grep -q "stopped answering" "$T/inflight.out" || fail "the error reply does not say the worker stopped answering"

# A new worker serves.
for _ in $(seq 300); do [ -n "$(worker)" ] && [ "$(worker)" != "$W1" ] && up && break; sleep 0.1; done
W2=$(worker)
[ -n "$W2" ] && [ "$W2" != "$W1" ] || fail "worker not replaced ($W1 -> $W2)"
"$GBCTL" --endpoint "$EP" send vecadd 7 add 1,2,3 10,20,30 > "$T/after.out" 2>&1
grep -q "11,22,33" "$T/after.out" || { cat "$T/after.out"; fail "no service after the spinning worker was replaced"; }
echo "spinning worker $W1 replaced by $W2"

kill -TERM $SUP
wait $SUP; rc=$?
[ $rc = 0 ] || { tail -5 "$T/sup.log"; fail "supervisor exit $rc"; }
if [ $fails = 0 ]; then echo "PASS: a spinning worker is killed and replaced"; exit 0; fi
grep -v " debug " "$T/sup.log" | tail -30
exit 1
