#!/usr/bin/env bash
# The wire documentation is enough to write a client: runs
# tests/stranger_client.py, written from docs/protocol.md and the .proto files
# alone (proto/ and grains/<name>/), against a real bridge in cpu mode, then stops the bridge with
# SIGTERM ('The bridge then exits 0').
#   test_stranger_client.sh GPUBRIDGE_BIN SOURCE_DIR [BRIDGE_OPTION]...
# (e.g. --supervise: the same client through the supervisor)
set -uo pipefail
BIN=$1 SRC=$2
shift 2
PY=/usr/bin/python3
"$PY" -c 'import zmq, google.protobuf' 2>/dev/null \
  || { echo "SKIP: $PY lacks zmq or protobuf (python3-zmq, python3-protobuf)"; exit 77; }
command -v protoc >/dev/null || { echo "SKIP: no protoc (protobuf-compiler)"; exit 77; }
T=$(mktemp -d /tmp/gbstranger.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill -KILL $PID 2>/dev/null; rm -rf "$T"' EXIT
# run_client ARENA_MB [CLIENT_OPTION]: a bridge with that arena, the client
# against it, then SIGTERM.
run_client() {
  rm -f "$T/bridge.sock"
  cat > "$T/bridge.cfg" <<CFG
endpoints = [ "ipc://$T/bridge.sock" ];
arena_mb = $1;
CFG
  shift
  "$BIN" --config "$T/bridge.cfg" --mode cpu "${OPTS[@]}" 2> "$T/bridge.log" &
  PID=$!
  for _ in $(seq 100); do
    [ -S "$T/bridge.sock" ] && break
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  [ -S "$T/bridge.sock" ] || { cat "$T/bridge.log"; echo "FAIL: the bridge did not start"; exit 1; }
  "$PY" "$SRC/tests/stranger_client.py" "ipc://$T/bridge.sock" "$PROTO_DIRS" "$@"
  rc=$?
  kill -TERM $PID
  wait $PID
  brc=$?
  PID=
  if [ $rc -ne 0 ]; then tail -20 "$T/bridge.log"; exit $rc; fi
  [ $brc -eq 0 ] || { tail -20 "$T/bridge.log"; echo "FAIL: the bridge exited $brc after SIGTERM"; exit 1; }
}
OPTS=("$@")
PROTO_DIRS=$SRC/proto
for d in "$SRC"/grains/*/; do
  ls "$d"*.proto > /dev/null 2>&1 && PROTO_DIRS=$PROTO_DIRS:${d%/}
done
run_client 16
run_client 0 --no-arena
echo PASS
