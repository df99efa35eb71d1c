#!/usr/bin/env bash
# --supervise, every client place taken: clients that left with requests
# owed (waiting on a paused type) give their places to new clients, and the
# replies then discarded for them are counted (Telemetry.replies_undelivered,
# as they are when no place is reused). The place count is lowered to 4 by
# a test hook (GPUBRIDGE_TEST_SUP_PEERS).
#   test_supervise_evicted_count.sh GPUBRIDGE_TEST_BIN GBCTL
set -uo pipefail
BIN=$1 GBCTL=$2
T=$(mktemp -d /tmp/gbsupev.XXXXXX)
EP="ipc://$T/bridge.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP" > "$T/bridge.cfg"
GPUBRIDGE_TEST_SUP_PEERS=4 "$BIN" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
trap 'kill -KILL $SUP 2>/dev/null; pkill -KILL -P $SUP 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/sup.log"; exit 1; }
for _ in $(seq 100); do "$GBCTL" -e "$EP" -t 3000 list >/dev/null 2>&1 && break; sleep 0.1; done
"$GBCTL" -e "$EP" deactivate echo > /dev/null || fail "deactivate echo"
for k in 1 2 3 4; do # each waits on the paused type, gives up and leaves
  "$GBCTL" -e "$EP" -t 300 send echo $k "waiting $k" > /dev/null 2>&1 && fail "a request to the paused echo was answered"
done
sleep 0.5
for k in 1 2 3; do # new clients take the places of those that left
  "$GBCTL" -e "$EP" list > /dev/null || fail "a new client was not served (round $k)"
done
"$GBCTL" -e "$EP" activate echo > /dev/null || fail "activate echo"
for _ in $(seq 50); do
  out=$("$GBCTL" -e "$EP" telemetry echo) || fail "telemetry: $out"
  n=$(sed -n 's/.*replies_undelivered: \([0-9]*\).*/\1/p' <<< "$out")
  [ "${n:-0}" -ge 4 ] && break
  sleep 0.1
done
[ "${n:-0}" -ge 4 ] || fail "replies_undelivered is ${n:-none} after 4 clients left with a reply owed each: $out"
sleep 1 # the worker's replies to the places that went must not be counted again
out=$("$GBCTL" -e "$EP" telemetry echo) || fail "telemetry: $out"
n=$(sed -n 's/.*replies_undelivered: \([0-9]*\).*/\1/p' <<< "$out")
d=$(sed -n 's/.*connections_dropped: \([0-9]*\).*/\1/p' <<< "$out")
# Each client that left owed one reply (a start-up probe that timed out too)
[ "${n:-0}" = "${d:-x}" ] || fail "replies_undelivered is ${n:-none}, connections_dropped ${d:-none}: one reply was owed to each: $out"
kill -TERM $SUP
wait $SUP || fail "the supervisor exited $?"
grep -q "gave their places" "$T/sup.log" || fail "no client's place was reused: the test did not test that"
echo "PASS: replies discarded for clients whose places were reused are counted ($n)"
