#!/usr/bin/env bash
# An ipc:// endpoint is bound only where nothing else is (libzmq itself
# unlinks whatever is at the path and binds anew): a second bridge (plain or
# --supervise) on the path of one that serves is refused and leaves the
# first one serving, its socket file untouched; so is one on the path of a
# datagram socket; a path holding a regular file is refused, the file kept;
# a socket file left by a killed bridge is bound again.
#   test_ipc_endpoint.sh BUILD_DIR
set -uo pipefail
BUILD=$1
T=$(mktemp -d /tmp/gbipc.XXXXXX)
A="" B=""
trap 'for p in $A $B; do pkill -KILL -P $p 2>/dev/null; kill -KILL $p 2>/dev/null; done; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
GB="$BUILD/bridge/gpubridge"
EP="ipc://$T/b.sock"
cfg() { printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$1" > "$2"; }
up() { "$BUILD/client/gbctl" --endpoint "$1" --timeout 5000 list >/dev/null 2>&1; }
wait_up() { for _ in $(seq 100); do up "$1" && return 0; sleep 0.1; done; return 1; }
cfg "$EP" "$T/b.cfg"

for sup in "" --supervise; do
  name=${sup:-plain}
  "$GB" --config "$T/b.cfg" $sup 2> "$T/a-$name.log" &
  A=$!
  wait_up "$EP" || fail "$name: the first bridge does not serve: $(tail -3 "$T/a-$name.log")"
  ino=$(stat -c %i "$T/b.sock")
  for sup2 in "" --supervise; do
    "$GB" --config "$T/b.cfg" $sup2 > "$T/b.out" 2>&1 &
    B=$!
    ok=0
    for _ in $(seq 100); do kill -0 $B 2>/dev/null || { ok=1; break; }; sleep 0.1; done
    if [ $ok = 0 ]; then
      kill -KILL $B; pkill -KILL -P $B
      fail "$name: a second bridge (${sup2:-plain}) on its path still runs"
    fi
    wait $B
    rc=$?
    B=""
    [ $rc != 0 ] || fail "$name: a second bridge (${sup2:-plain}) exited 0"
    grep -q "cannot bind $EP: another process listens there" "$T/b.out" ||
      fail "$name: the second bridge (${sup2:-plain}) did not say why: $(tail -3 "$T/b.out")"
    [ "$(stat -c %i "$T/b.sock" 2>/dev/null)" = "$ino" ] || fail "$name: the socket file was replaced or removed"
    up "$EP" || fail "$name: the first bridge stopped serving after a second (${sup2:-plain}) tried its path"
  done
  kill -TERM $A
  wait $A || fail "$name: the first bridge exited $?"
  A=""
  [ ! -e "$T/b.sock" ] || fail "$name: the socket file is left after a clean stop"
done

# A regular file at the path: refused, kept.
echo "keep me" > "$T/file"
cfg "ipc://$T/file" "$T/f.cfg"
timeout 20 "$GB" --config "$T/f.cfg" > "$T/f.out" 2>&1 && fail "a bridge bound over a regular file"
grep -q "cannot bind ipc://$T/file: $T/file exists and is not a socket" "$T/f.out" ||
  fail "no reason for the regular file: $(tail -3 "$T/f.out")"
[ "$(cat "$T/file")" = "keep me" ] || fail "the regular file was changed"

# A datagram socket at the path (connecting to it says EPROTOTYPE): refused.
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
time.sleep(30)' "$T/d.sock" &
  D=$!
  for _ in $(seq 50); do [ -S "$T/d.sock" ] && break; sleep 0.1; done
  cfg "ipc://$T/d.sock" "$T/d.cfg"
  ino=$(stat -c %i "$T/d.sock")
  timeout 20 "$GB" --config "$T/d.cfg" > "$T/d.out" 2>&1 && fail "a bridge bound over a datagram socket"
  grep -q "cannot bind ipc://$T/d.sock: another process listens there" "$T/d.out" ||
    fail "no reason for the datagram socket: $(tail -3 "$T/d.out")"
  [ "$(stat -c %i "$T/d.sock" 2>/dev/null)" = "$ino" ] || fail "the datagram socket's file was replaced"
  kill $D 2>/dev/null
  wait $D 2>/dev/null
fi

# A socket file left by a killed bridge: bound again.
"$GB" --config "$T/b.cfg" 2> "$T/k.log" &
A=$!
wait_up "$EP" || fail "no bridge to kill"
kill -KILL $A
wait $A 2>/dev/null
[ -S "$T/b.sock" ] || fail "a killed bridge left no socket file (the case is not tested)"
"$GB" --config "$T/b.cfg" 2> "$T/c.log" &
A=$!
wait_up "$EP" || fail "a bridge does not bind over a stale socket file: $(tail -3 "$T/c.log")"
kill -TERM $A
wait $A
A=""

# A wildcard port: the log says which one ZeroMQ bound, plain and supervised.
for sup in "" --supervise; do
  cfg "tcp://127.0.0.1:*" "$T/w.cfg"
  "$GB" --config "$T/w.cfg" $sup 2> "$T/w.log" &
  A=$!
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9][0-9]*\) (port [0-9]* chosen for tcp:\/\/127\.0\.0\.1:\*).*/\1/p' "$T/w.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    fail "${sup:-plain}: no bound port in the log: $(tail -3 "$T/w.log")"
  else
    wait_up "tcp://127.0.0.1:$port" || fail "${sup:-plain}: nothing serves on the port logged, $port"
  fi
  kill -TERM $A
  wait $A
  A=""
done

if [ $fails = 0 ]; then echo "PASS: ipc endpoints are bound only where nothing listens"; exit 0; fi
exit 1
