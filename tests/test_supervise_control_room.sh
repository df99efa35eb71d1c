#!/usr/bin/env bash
# --supervise with every client place taken by clients waiting on a paused
# grain type: the client that resumes it is still served (Activate,
# Deactivate and Terminate from a client with authority have places of
# their own), and the waiting clients get their replies; a client in such a
# place may send nothing else while the table is full. The place count is
# lowered to 4 by a test hook (GPUBRIDGE_TEST_SUP_PEERS) instead of 1,024; a
# client with nothing in flight (the one that paused the type) gives its
# place to a new one when the table is full.
#   test_supervise_control_room.sh GPUBRIDGE_TEST_BIN GBCTL
set -uo pipefail
BIN=$1 GBCTL=$2
T=$(mktemp -d /tmp/gbsuproom.XXXXXX)
EP="ipc://$T/bridge.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP" > "$T/bridge.cfg"
GPUBRIDGE_TEST_SUP_PEERS=4 "$BIN" --config "$T/bridge.cfg" --supervise 2> "$T/sup.log" &
SUP=$!
trap 'kill -KILL $SUP 2>/dev/null; pkill -KILL -P $SUP 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for _ in $(seq 100); do "$GBCTL" -e "$EP" -t 300 list >/dev/null 2>&1 && break; sleep 0.1; done
"$GBCTL" -e "$EP" deactivate echo > /dev/null || fail "deactivate echo"
pids=()
for k in 1 2 3 4; do   # every place: clients waiting on the paused type
  "$GBCTL" -e "$EP" -t 30000 send echo $k "waiting $k" > "$T/w$k.out" 2>&1 &
  pids+=($!)
done
sleep 1
# Another client's request has no place (its frame refused whole, which
# gbctl reports as its own: its one frame in flight), nor has a status
# request (control, but no state change).
out=$("$GBCTL" -e "$EP" -t 2000 send vecadd 1 add 1 2 2>&1)
grep -q "STATUS_BUSY: the supervisor serves too many clients at once" <<<"$out" \
  || fail "a request past the places: '$out'"
out=$("$GBCTL" -e "$EP" -t 2000 status echo 2>&1)
grep -q "STATUS_BUSY: the supervisor serves too many clients at once" <<<"$out" \
  || fail "a status request past the places: '$out'"
out=$("$GBCTL" -e "$EP" -t 5000 activate echo 2>&1) || fail "activate refused with every place waiting: '$out'"
for k in 1 2 3 4; do
  wait "${pids[$((k - 1))]}" || fail "waiting client $k: $(cat "$T/w$k.out")"
  grep -q "waiting $k" "$T/w$k.out" || fail "waiting client $k got '$(cat "$T/w$k.out")'"
done
"$GBCTL" -e "$EP" send vecadd 1 add 1 2 > /dev/null || fail "no service after"
kill -TERM $SUP
wait $SUP; rc=$?
[ $rc = 0 ] || { tail -5 "$T/sup.log"; fail "supervisor exit $rc"; }
if [ $fails = 0 ]; then echo "PASS: control frames have room"; exit 0; fi
exit 1
