#!/usr/bin/env bash
# The metrics endpoint past descriptor 1023 (cpu mode): with 1100 clients
# connected, a scrape's connection takes a descriptor past FD_SETSIZE, which
# a select()-based libmicrohttpd drops; the daemon's (epoll or poll) serves it.
#   test_metrics_fd.sh BUILD_DIR
set -uo pipefail
BUILD=$1
/usr/bin/python3 -c 'import zmq' 2>/dev/null || { echo "SKIP: no python3-zmq"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4096 ] || { echo "SKIP: hard descriptor limit under 4096"; exit 77; }
T=$(mktemp -d /tmp/gbmfd.XXXXXX)
B="" HOLD=""
trap '[ -n "$HOLD" ] && kill $HOLD 2>/dev/null; [ -n "$B" ] && kill -KILL $B 2>/dev/null; rm -rf "$T"' EXIT
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'endpoints = [ "tcp://127.0.0.1:%s" ];\nmode = "cpu";\nmetrics = { enabled = true; listen = "127.0.0.1:0"; };\n' \
    "$PORT" > "$T/bridge.cfg"
if ! "$BUILD/bridge/gpubridge" --config "$T/bridge.cfg" --check-config > "$T/check.out" 2>&1; then
    grep -q "built without libmicrohttpd" "$T/check.out" && { echo "SKIP: no metrics endpoint in this build"; exit 77; }
    cat "$T/check.out"; echo "FAIL: --check-config"; exit 1
fi
( ulimit -n 4096 && exec "$BUILD/bridge/gpubridge" --config "$T/bridge.cfg" ) 2> "$T/bridge.log" &
B=$!
for _ in $(seq 100); do grep -q "http://127.0.0.1:[0-9]*/metrics" "$T/bridge.log" && break; sleep 0.1; done
ADDR=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/bridge.log" | head -1)
[ -n "$ADDR" ] || { cat "$T/bridge.log"; echo "FAIL: no metrics address logged"; exit 1; }
/usr/bin/python3 - "$PORT" "$T" <<'PY' &
import os, sys, time, zmq
port, t = sys.argv[1:3]
ctx = zmq.Context()
ctx.set(zmq.MAX_SOCKETS, 4096)
socks = []
for _ in range(1100):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect("tcp://127.0.0.1:%s" % port)
    socks.append(s)
while not os.path.exists(os.path.join(t, "release")):
    time.sleep(0.1)
for s in socks:
    s.close()
ctx.term()
PY
HOLD=$!
# Until the bridge holds more than 1100 descriptors: the next one is past 1023.
n=0
for _ in $(seq 600); do
    n=$(ls /proc/$B/fd 2>/dev/null | wc -l)
    [ "$n" -gt 1100 ] && break
    sleep 0.1
done
fails=0
[ "$n" -gt 1100 ] || { echo "FAIL: the bridge holds only $n descriptors"; fails=1; }
code=$(curl -sS -o "$T/scrape" -w '%{http_code}' --max-time 30 "$ADDR")
echo "bridge descriptors: $n; scrape: HTTP $code"
[ "$code" = 200 ] && grep -q "^gpubridge_" "$T/scrape" || { echo "FAIL: a scrape past descriptor 1023 is not served"; fails=1; }
touch "$T/release"
wait $HOLD
HOLD=""
kill -TERM $B; wait $B || { echo "FAIL: exit $?"; fails=1; }
B=""
[ $fails = 0 ] && { echo "PASS: metrics past descriptor 1023"; exit 0; }
tail -20 "$T/bridge.log"
exit 1
