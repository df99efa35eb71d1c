#!/usr/bin/env bash
# Descriptors (cpu mode): under a hard limit of 256, 300 idle connections
# must not starve the bridge silently nor make it spin. It warns, holds off
# new TCP connections near the limit, and serves new clients again once the
# idle ones close.
#   test_fdlimit.sh BUILD_DIR [--supervise]
set -uo pipefail
BUILD=$1 SUP=${2:-}
/usr/bin/python3 -c 'import zmq' 2>/dev/null || { echo "SKIP: no python3-zmq"; exit 77; }
T=$(mktemp -d /tmp/gbfd.XXXXXX)
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EP="tcp://127.0.0.1:$PORT"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP" > "$T/bridge.cfg"
( ulimit -n 256 && exec "$BUILD/bridge/gpubridge" --config "$T/bridge.cfg" $SUP ) 2> "$T/bridge.log" &
B=$!
trap 'kill -KILL $B 2>/dev/null; pkill -KILL -P $B 2>/dev/null; kill $FLOOD 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
up() { "$BUILD/client/gbctl" --endpoint "$EP" --timeout 1000 list >/dev/null 2>&1; }
for _ in $(seq 100); do up && break; sleep 0.1; done
up || { cat "$T/bridge.log"; echo "FAIL: not serving"; exit 1; }

# 300 idle clients, held open until $T/release exists.
/usr/bin/python3 - "$EP" "$T" <<'PY' &
import sys, os, time, zmq
ep, t = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
socks = []
for i in range(300):
    s = ctx.socket(zmq.DEALER); s.setsockopt(zmq.LINGER, 0); s.connect(ep); socks.append(s)
open(os.path.join(t, "flooding"), "w").close()
while not os.path.exists(os.path.join(t, "release")):
    time.sleep(0.1)
for s in socks:
    s.close()
ctx.term()
PY
FLOOD=$!
for _ in $(seq 100); do [ -e "$T/flooding" ] && break; sleep 0.1; done
for _ in $(seq 100); do grep -q "descriptors nearly exhausted" "$T/bridge.log" && break; sleep 0.1; done
grep -q "descriptors nearly exhausted" "$T/bridge.log" || fail "no warning near the descriptor limit"
grep "descriptors" "$T/bridge.log" | head -3
# Held off rather than spinning on accept(): CPU time over 2 s (a spin takes
# most of a core; an idle bridge next to none).
cpu() { awk '{ print $14 + $15 }' /proc/$B/stat; }
c0=$(cpu); sleep 2; c1=$(cpu)
ticks=$((c1 - c0)) hz=$(getconf CLK_TCK)
echo "bridge CPU while at the limit: $ticks ticks in 2 s (CLK_TCK $hz)"
[ $ticks -lt $hz ] || fail "the bridge spins at the descriptor limit ($ticks ticks in 2 s)"
# The idle clients go: service comes back for new clients.
touch "$T/release"
wait $FLOOD
ok=0
for _ in $(seq 100); do up && { ok=1; break; }; sleep 0.1; done
[ $ok = 1 ] || fail "new clients not served after the idle ones closed"
"$BUILD/client/gbctl" --endpoint "$EP" send vecadd 7 add 1,2,3 10,20,30 > "$T/v.out" 2>&1 || { cat "$T/v.out"; fail "vecadd fails after"; }
grep -q "taken again" "$T/bridge.log" || fail "no log line when connections are taken again"
kill -TERM $B; wait $B || fail "exit $?"
if [ $fails = 0 ]; then echo "PASS: descriptor limit${SUP:+ (supervised)}"; exit 0; fi
tail -20 "$T/bridge.log"
exit 1
