# Sourced by test_fdlimit.sh and test_fdlimit_soft.sh once BUILD, ROOT and T
# are set. Gives GEN (the protos' Python modules, built or made here), EP (a
# free loopback TCP endpoint), fail (counts in $fails), up (the bridge
# answers a list) and wait_up (until it does, or the test ends).
GEN=$BUILD/examples/python/gen
if [ ! -f "$GEN/gpubridge_pb2.py" ]; then
    GEN=$T/gen && mkdir -p "$GEN"
    # The bridge's schemas (proto/) and each built-in grain's (grains/<name>/).
    INC=() && for d in "$ROOT"/proto "$ROOT"/grains/*/; do INC+=(-I "${d%/}"); done
    protoc --python_out="$GEN" "${INC[@]}" "$ROOT"/proto/*.proto "$ROOT"/grains/*/*.proto || { echo "SKIP: no protoc"; exit 77; }
fi
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EP="tcp://127.0.0.1:$PORT"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
up() { "$BUILD/client/gbctl" --endpoint "$EP" --timeout 1000 list >/dev/null 2>&1; }
wait_up() {
    for _ in $(seq 100); do up && break; sleep 0.1; done
    up || { cat "$T/bridge.log"; echo "FAIL: not serving"; exit 1; }
}
