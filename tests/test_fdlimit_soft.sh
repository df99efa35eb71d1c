#!/usr/bin/env bash
# Descriptors (cpu mode): started with a soft limit of 256 under a higher
# hard limit, the bridge raises its soft limit to the hard one (its log line
# and /proc/PID/limits say so) and serves more connections at once than the
# old soft limit would let it.
#   test_fdlimit_soft.sh BUILD_DIR [--supervise]
set -uo pipefail
BUILD=$1 SUP=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
/usr/bin/python3 -c 'import zmq, google.protobuf' 2>/dev/null || { echo "SKIP: no python3-zmq / python3-protobuf"; exit 77; }
SOFT=256 CLIENTS=600
HARD=$(ulimit -H -n)
[ "$HARD" = unlimited ] && HARD=4096
[ "$HARD" -gt 4096 ] && HARD=4096
# Under --supervise each connection takes about three descriptors.
[ "$HARD" -ge 2048 ] || { echo "SKIP: hard descriptor limit $HARD is too low to show the raise"; exit 77; }
T=$(mktemp -d /tmp/gbfds.XXXXXX)
B=""
trap '[ -n "$B" ] && { pkill -KILL -P $B 2>/dev/null; kill -KILL $B 2>/dev/null; }; rm -rf "$T"' EXIT
. "$ROOT/tests/fdlimit_common.sh"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\n' "$EP" > "$T/bridge.cfg"
# The soft limit first (it must stay under the hard one), then the hard one.
( ulimit -S -n $SOFT && ulimit -H -n "$HARD" && exec "$BUILD/bridge/gpubridge" --config "$T/bridge.cfg" $SUP ) \
    2> "$T/bridge.log" &
B=$!
wait_up

grep "descriptors: limit" "$T/bridge.log"
grep -q "descriptors: limit $HARD (hard $HARD)" "$T/bridge.log" || fail "no log line of the soft limit raised to $HARD"
limits=$(grep "^Max open files" "/proc/$B/limits")
echo "$limits"
read -r soft hard < <(echo "$limits" | awk '{print $4, $5}')
[ "$soft" = "$HARD" ] && [ "$hard" = "$HARD" ] || fail "soft limit $soft, hard $hard: expected both $HARD"

# More clients than the old soft limit, all connected at once, each served
# (a call each, then a second round with all still open).
/usr/bin/python3 - "$EP" "$ROOT/examples/python" "$GEN" "$CLIENTS" > "$T/clients.out" 2>&1 <<'PY'
import resource, sys, time, zmq
ep, lib, gen, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
sys.path.insert(0, lib)
import gpubridge_client as g
g.load_protos(gen)
ctx = zmq.Context()
ctx.set(zmq.MAX_SOCKETS, n + 64)
clients = [g.Client(ep, timeout_ms=20000, context=ctx) for _ in range(n)]
payload = g.encode_vecadd("add", [1, 2, 3], [10, 20, 30])
served = 0
for rnd in range(2):
    # All send, then all wait, for 20 s in all: a refused connection shows
    # as a missing reply, not as a long wait per client.
    for i, c in enumerate(clients):
        c.send("vecadd", i, g.VECADD_REQUEST, payload)
        c.flush()
    waiting, end = set(range(n)), time.monotonic() + 20
    while waiting and time.monotonic() < end:
        for i in list(waiting):
            for r in clients[i].poll(0):
                waiting.discard(i)
                served += r.status == 0 and g.decode_vecadd(r) == [11.0, 22.0, 33.0]
        time.sleep(0.01)
    if waiting:
        print("round %d: %d of %d clients got no reply" % (rnd, len(waiting), n))
print("served %d of %d calls from %d clients open at once" % (served, 2 * n, n))
for c in clients:
    c.close()
ctx.term()
PY
cat "$T/clients.out"
grep -q "^served $((2 * CLIENTS)) of $((2 * CLIENTS)) calls" "$T/clients.out" || fail "not every client was served"
! grep -q "descriptors nearly exhausted" "$T/bridge.log" || fail "descriptors ran short under the raised limit"

kill -TERM $B; wait $B || fail "exit $?"
B=""
if [ $fails = 0 ]; then echo "PASS: soft descriptor limit raised${SUP:+ (supervised)}"; exit 0; fi
tail -20 "$T/bridge.log"
exit 1
