#!/usr/bin/env bash
# Signals that reach a worker while it starts: the supervisor passes SIGTERM
# and SIGHUP on to its worker at once, also while the worker is still
# loading its config and starting its devices. Both are handled (a drain and
# exit 0; a reload), never the default action that kills it; also when the
# worker gets a signal of its own besides (INT: a Ctrl-C reaches the whole
# process group).
#   test_signal_at_start.sh BUILD_DIR
set -uo pipefail
BUILD=$1
T=$(mktemp -d /tmp/gbsig.XXXXXX)
B=""
trap '[ -n "$B" ] && { pkill -KILL -P $B 2>/dev/null; kill -KILL $B 2>/dev/null; }; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
EP="ipc://$T/b.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP" > "$T/b.cfg"
up() { "$BUILD/client/gbctl" --endpoint "$EP" --timeout 1000 list >/dev/null 2>&1; }
child_of() { local c; c=$(cat "/proc/$1/task/$1/children" 2>/dev/null); echo "${c%% *}"; }

for sig in TERM HUP INT; do
  "$BUILD/bridge/gpubridge" --config "$T/b.cfg" --supervise 2> "$T/$sig.log" &
  B=$!
  W=""
  for _ in $(seq 20000); do W=$(child_of $B) && [ -n "$W" ] && break; done
  if [ -z "$W" ]; then
    fail "$sig: no worker started"
    kill -KILL $B; wait $B; B=""
    continue
  fi
  if [ $sig = INT ]; then
    kill -INT "$W" # as a Ctrl-C: the worker too, not only through the supervisor
    kill -INT $B
  else
    kill -$sig $B # the supervisor passes it on to the worker, which is starting
  fi
  if [ $sig = HUP ]; then
    ok=0
    for _ in $(seq 100); do up && { ok=1; break; }; sleep 0.1; done
    [ $ok = 1 ] || fail "SIGHUP at the worker's start: not serving"
    kill -TERM $B
  fi
  wait $B
  rc=$?
  B=""
  [ $rc = 0 ] || fail "SIG$sig at the worker's start: exit $rc"
  if grep -q "killed by signal" "$T/$sig.log"; then
    fail "SIG$sig at the worker's start killed it: $(grep -m1 'killed by signal' "$T/$sig.log")"
  fi
  [ -e "$T/b.sock" ] && fail "SIG$sig: the socket file is left behind"
done
[ $fails = 0 ] && echo "PASS" || { cat "$T"/*.log; exit 1; }
