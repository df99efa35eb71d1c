#!/usr/bin/env bash
# Supervision (gpubridge --supervise): a worker killed by SIGKILL under load
# from several clients (every mode), and on a GPU a sticky CUDA error (an
# illegal address from the test-only fault hook) under load, and a worker
# stopped with SIGSTOP (found by the heartbeat). Every request
# must get exactly one reply (a right result or STATUS_GPU_ERROR), a new
# worker must start by itself and serve new requests, and SIGTERM must stop
# both processes with exit 0.
#   test_supervise.sh BUILD_DIR [MODE]
set -uo pipefail
BUILD=$1 MODE=${2:-cpu}
if [ "$MODE" != cpu ] && ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no GPU"; exit 77; fi
T=$(mktemp -d /tmp/gbsup.XXXXXX)
EP="ipc://$T/bridge.sock"
printf 'endpoints = [ "%s" ];\nmode = "%s";\n' "$EP" "$MODE" > "$T/bridge.cfg"
GPUBRIDGE_TEST_FAULTS=1 "$BUILD/bridge/gpubridge-test" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
trap 'kill -KILL $SUP 2>/dev/null; pkill -KILL -P $SUP 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
up() { "$BUILD/client/gbctl" --endpoint "$EP" --timeout 300 list >/dev/null 2>&1; }
for _ in $(seq 100); do up && break; sleep 0.1; done
up || { cat "$T/sup.log"; "$BUILD/client/gbctl" --endpoint "$EP" --timeout 300 list; echo "FAIL: not serving"; exit 1; }
worker() { cat /proc/$SUP/task/$SUP/children 2>/dev/null | tr -d ' '; }
W1=$(worker)
[ -n "$W1" ] || fail "no worker process"

"$BUILD/bench/soak" --endpoint "$EP" --clients 4 --seconds 6 --probe 1 --expect-restart > "$T/soak.out" 2>&1 &
SOAK=$!
sleep 3
t0=$(date +%s.%N)
kill -KILL "$W1"
until up; do sleep 0.02; done
t1=$(date +%s.%N)
W2=$(worker)
wait $SOAK; src=$?
tail -2 "$T/soak.out" | head -1
[ $src = 0 ] || { cat "$T/soak.out"; fail "requests lost or wrong across the restart"; }
[ -n "$W2" ] && [ "$W2" != "$W1" ] || fail "worker not replaced ($W1 -> $W2)"
echo "worker $W1 killed, $W2 serving after $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s"
"$BUILD/examples/message_passing" --endpoint "$EP" -n 20 > "$T/mp.out" 2>&1 || { cat "$T/mp.out"; fail "new requests fail"; }
tail -1 "$T/mp.out"
grep -q "STATUS_GPU_ERROR" "$T/sup.log" || fail "the supervisor did not say what it answered"

if [ "$MODE" != cpu ]; then
  # A sticky CUDA error (700) in the pagerank.sender kernel, under load on vecadd.
  "$BUILD/bench/soak" --endpoint "$EP" --clients 4 --seconds 6 --probe 1 --expect-restart > "$T/soak2.out" 2>&1 &
  SOAK=$!
  sleep 3
  W3=$(worker)
  t0=$(date +%s.%N)
  "$BUILD/client/gbctl" --endpoint "$EP" --timeout 5000 send pagerank.sender 1 65407 > "$T/fault.out" 2>&1
  grep -q "GPU_ERROR" "$T/fault.out" || { cat "$T/fault.out"; fail "the faulting request did not get STATUS_GPU_ERROR"; }
  for _ in $(seq 500); do [ "$(worker)" != "$W3" ] && [ -n "$(worker)" ] && up && break; sleep 0.02; done
  t1=$(date +%s.%N)
  wait $SOAK; src=$?
  tail -2 "$T/soak2.out" | head -1
  [ $src = 0 ] || { cat "$T/soak2.out"; fail "requests lost or wrong across the CUDA-error restart"; }
  echo "sticky CUDA error: worker $W3 replaced by $(worker) in $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s"
  grep -E "cudaError|a CUDA error|illegal" "$T/sup.log" | head -3
  "$BUILD/examples/message_passing" --endpoint "$EP" -n 20 > "$T/mp2.out" 2>&1 || { cat "$T/mp2.out"; fail "new requests fail after the CUDA error"; }
  tail -1 "$T/mp2.out"
fi

# A worker that stops answering (SIGSTOP): the heartbeat finds it, its
# requests get STATUS_GPU_ERROR, and a new worker serves.
W4=$(worker)
kill -STOP "$W4"
"$BUILD/client/gbctl" --endpoint "$EP" --timeout 40000 send vecadd 7 add 1,2,3 10,20,30 > "$T/hung.out" 2>&1
grep -q "GPU_ERROR" "$T/hung.out" || { cat "$T/hung.out"; fail "a request to a stopped worker did not get STATUS_GPU_ERROR"; }
grep -q "stopped answering" "$T/sup.log" || fail "the supervisor did not say the worker stopped answering"
for _ in $(seq 300); do [ -n "$(worker)" ] && [ "$(worker)" != "$W4" ] && up && break; sleep 0.1; done
[ "$(worker)" != "$W4" ] && up || fail "no new worker after the stopped one"
"$BUILD/client/gbctl" --endpoint "$EP" send vecadd 7 add 1,2,3 10,20,30 > "$T/after.out" 2>&1 ||
  { cat "$T/after.out"; fail "no service after the stopped worker was replaced"; }
echo "stopped worker $W4 replaced by $(worker)"

# Control state across a restart: a type a client deactivated stays
# deactivated in the next worker, a terminated one stays terminated (as the
# worker last answered the requests that changed them); Activate brings the
# first back.
"$BUILD/client/gbctl" --endpoint "$EP" deactivate echo > /dev/null || fail "deactivate echo"
"$BUILD/client/gbctl" --endpoint "$EP" terminate vecadd > /dev/null || fail "terminate vecadd"
for _ in $(seq 100); do   # the supervisor has taken both (at once, as their replies pass)
  grep -q "'echo' is deactivated; a restarted" "$T/sup.log" && grep -q "'vecadd' is terminated; a restarted" "$T/sup.log" && break
  sleep 0.1
done
W5=$(worker)
kill -KILL "$W5"
for _ in $(seq 300); do [ -n "$(worker)" ] && [ "$(worker)" != "$W5" ] && up && break; sleep 0.05; done
st=$("$BUILD/client/gbctl" --endpoint "$EP" status echo 2>&1)
grep -q "^echo: inactive" <<<"$st" || fail "echo not kept deactivated across the restart: $st"
st=$("$BUILD/client/gbctl" --endpoint "$EP" status vecadd 2>&1)
grep -q "^vecadd: terminated" <<<"$st" || fail "vecadd not kept terminated across the restart: $st"
grep -q "grain type 'echo' starts deactivated, as it was before the restart" "$T/sup.log" ||
  fail "the new worker did not say it keeps echo deactivated"
"$BUILD/client/gbctl" --endpoint "$EP" activate echo > /dev/null || fail "activate echo after the restart"
"$BUILD/client/gbctl" --endpoint "$EP" send echo 7 hello > "$T/echo.out" 2>&1 || { cat "$T/echo.out"; fail "echo after activate"; }
echo "worker $W5 replaced by $(worker): echo kept deactivated, vecadd terminated"

# SIGHUP to the supervisor: passed on to the worker, which reloads its file.
printf 'endpoints = [ "%s" ];\nmode = "%s";\nlog_level = "diag";\n' "$EP" "$MODE" > "$T/bridge.cfg"
kill -HUP $SUP
for _ in $(seq 50); do grep -q "reload: log_level" "$T/sup.log" && break; sleep 0.1; done
grep -q "SIGHUP passed to worker" "$T/sup.log" || fail "the supervisor did not pass SIGHUP on"
grep -q "reload: log_level info -> diag" "$T/sup.log" || fail "the worker did not reload after SIGHUP"
kill -0 $SUP 2>/dev/null || fail "SIGHUP ended the supervisor"

kill -TERM $SUP
wait $SUP; rc=$?
[ $rc = 0 ] || { tail -5 "$T/sup.log"; fail "supervisor exit $rc"; }
[ -z "$(worker)" ] || fail "worker left behind"
if [ $fails = 0 ]; then echo "PASS: supervision"; exit 0; fi
exit 1
