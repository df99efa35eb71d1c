#!/usr/bin/env bash
# The --supervise worker socket (cpu mode):
#  - squatting: a path taken before the supervisor starts (here the old
#    guessable /tmp/gpubridge-worker-<pid>.sock, made a directory so that it
#    cannot be removed) does not stop the service;
#  - the worker's socket sits in a directory of ours with mode 0700;
#  - bypass: with CURVE and an allow-list, a client with no keys that finds
#    the worker's socket is not served through it;
#  - GPUBRIDGE_WORKER_ENDPOINT changes nothing, and --worker-endpoint outside
#    a private directory is refused;
#  - a killed supervisor leaves no directory behind.
#   test_supervise_security.sh BUILD_DIR
set -uo pipefail
BUILD=$1
GB="$BUILD/bridge/gpubridge" CTL="$BUILD/client/gbctl"
T=$(mktemp -d /tmp/gbsupsec.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; pkill -KILL -P "$p" 2>/dev/null; done
  [ -f "$T/squat.pid" ] && rmdir "/tmp/gpubridge-worker-$(cat "$T/squat.pid").sock" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
children() { cat /proc/$1/task/$1/children 2>/dev/null | tr -d ' '; }
wait_up() { # endpoint [gbctl options...]
  local ep=$1; shift
  for _ in $(seq 150); do "$CTL" --endpoint "$ep" --timeout 300 "$@" list >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
worker_ep() { sed -n 's/.*worker [0-9]* started (endpoint \(ipc:[^)]*\)).*/\1/p' "$1" | tail -1; }

# ---- squatting, private directory, stale directory ----
EP="ipc://$T/a.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP" > "$T/a.cfg"
# The shell's pid becomes the supervisor's (exec): squat its old socket path first.
bash -c 'mkdir -p /tmp/gpubridge-worker-$$.sock && echo $$ > "$1/squat.pid" && exec "$2" --config "$3" --supervise' \
  _ "$T" "$GB" "$T/a.cfg" 2> "$T/a.log" &
SUP=$!
PIDS+=($SUP)
wait_up "$EP" || fail "not serving with the old worker path squatted"
"$CTL" --endpoint "$EP" send vecadd 7 add 1,2,3 10,20,30 > "$T/a.out" 2>&1 ||
  { cat "$T/a.out"; fail "a request fails with the old worker path squatted"; }
WEP=$(worker_ep "$T/a.log")
WDIR=$(dirname "${WEP#ipc://}")
case "$WEP" in ipc:///tmp/gpubridge-$SUP-*/worker.sock) ;; *) fail "worker endpoint '$WEP' is not in a private directory";; esac
if [ -d "$WDIR" ]; then
  [ "$(stat -c '%a %u' "$WDIR")" = "700 $(id -u)" ] || fail "$WDIR: mode/owner $(stat -c '%a %u' "$WDIR"), want 700 $(id -u)"
else
  fail "no worker directory $WDIR"
fi
# The worker admits its supervisor only: a plain client of the same uid gets nothing.
"$CTL" --endpoint "$WEP" --timeout 1500 list > "$T/direct.out" 2>&1 && fail "a client was served on the worker's socket directly"
# A killed supervisor: its worker drains, exits, and removes the directory.
W=$(children $SUP)
{ kill -KILL $SUP; wait $SUP; } 2>/dev/null
for _ in $(seq 400); do [ -d "$WDIR" ] || break; sleep 0.1; done # its drain (shutdown_drain_ms, 10 s) and exit, slower under sanitizers
[ -d "$WDIR" ] && fail "$WDIR left behind by a killed supervisor"
# (an exit can take seconds under a sanitizer: leak checks at exit)
if [ -n "$W" ]; then
  for _ in $(seq 150); do kill -0 "$W" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$W" 2>/dev/null && fail "worker $W outlived its supervisor by 15 s"
fi
# A directory left behind (supervisor and worker both killed) is swept at the next start.
STALE=/tmp/gpubridge-999999999-abcdef
mkdir -m 700 "$STALE" 2>/dev/null

# ---- the bypass, with CURVE and an allow-list ----
if /usr/bin/python3 -c 'import zmq' 2>/dev/null; then
  read -r SPUB SSEC APUB ASEC < <(/usr/bin/python3 -c '
import zmq
s = zmq.curve_keypair(); a = zmq.curve_keypair()
print(s[0].decode(), s[1].decode(), a[0].decode(), a[1].decode())')
  printf '%s' "$SSEC" > "$T/server.key"; chmod 600 "$T/server.key"
  EP2="ipc://$T/b.sock"
  printf 'endpoints = [ "%s" ];\nmode = "cpu";\ncurve = { enabled = true; server_secret_key_file = "%s"; server_public_key = "%s"; allowed_clients = [ "%s" ]; };\n' \
    "$EP2" "$T/server.key" "$SPUB" "$APUB" > "$T/b.cfg"
  "$GB" --config "$T/b.cfg" --supervise 2> "$T/b.log" &
  SUP2=$!
  PIDS+=($SUP2)
  KEYS=(--curve-server-key "$SPUB" --curve-public-key "$APUB" --curve-secret-key "$ASEC")
  wait_up "$EP2" "${KEYS[@]}" || { tail -5 "$T/b.log"; fail "CURVE: the allow-listed client is not served"; }
  WEP2=$(worker_ep "$T/b.log")
  "$CTL" --endpoint "$EP2" --timeout 1500 list > "$T/plain.out" 2>&1 && fail "CURVE: a client with no keys was served"
  for _ in 1 2; do
    "$CTL" --endpoint "$WEP2" --timeout 1500 terminate vecadd > "$T/bypass.out" 2>&1 &&
      { fail "CURVE bypass: a client with no keys terminated a grain type through the worker's socket"; break; }
  done
  "$CTL" --endpoint "$EP2" "${KEYS[@]}" send vecadd 7 add 1,2,3 10,20,30 > "$T/b.out" 2>&1 ||
    { cat "$T/b.out"; fail "CURVE: vecadd not served after the bypass attempt"; }
  [ -d /tmp/gpubridge-999999999-abcdef ] && fail "stale directory of a dead supervisor not swept"
  kill -TERM $SUP2; wait $SUP2 || fail "supervisor exit $?"
  [ -d "$(dirname "${WEP2#ipc://}")" ] && fail "worker directory left after a clean stop"
else
  echo "SKIP part: no python3-zmq for CURVE keys"
  rmdir "$STALE" 2>/dev/null
fi

# ---- no environment switch; --worker-endpoint only in a private directory ----
EP3="ipc://$T/c.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP3" > "$T/c.cfg"
GPUBRIDGE_WORKER_ENDPOINT="ipc://$T/env.sock" "$GB" --config "$T/c.cfg" 2> "$T/c.log" &
B3=$!
PIDS+=($B3)
wait_up "$EP3" || fail "GPUBRIDGE_WORKER_ENDPOINT set: the configured endpoint is not served"
[ -e "$T/env.sock" ] && fail "GPUBRIDGE_WORKER_ENDPOINT rebound the daemon"
kill -TERM $B3; wait $B3
mkdir -m 755 "$T/shared"
timeout 10 "$GB" --config "$T/c.cfg" --worker-endpoint "ipc://$T/shared/w.sock" > "$T/w.out" 2>&1; rc=$?
[ $rc = 2 ] || fail "--worker-endpoint in a shared directory: exit $rc, want 2"
[ -e "$T/shared/w.sock" ] && fail "--worker-endpoint in a shared directory was bound"

if [ $fails = 0 ]; then echo "PASS: supervisor worker socket"; exit 0; fi
exit 1
