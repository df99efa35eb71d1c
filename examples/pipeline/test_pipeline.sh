#!/usr/bin/env bash
# The pipeline example end to end: the daemon loads libpipeline_grains.so
# from a config and runs in MODE; the C client (and the Python one where
# /usr/bin/python3 has python3-zmq) checks its answers; gbctl telemetry
# shows the forwards.
#   test_pipeline.sh GPUBRIDGE LIBDIR CLIENT MODE [PY_GEN_DIR]
set -uo pipefail
BIN=$1
LIB=$(cd "$2" && pwd)
CLIENT=$3
MODE=$4
PYGEN=${5:-}
SRC=$(cd "$(dirname "$0")" && pwd)
GBCTL=$(dirname "$BIN")/../client/gbctl
if [ "$MODE" != cpu ] && ! (nvidia-smi -L 2>/dev/null | grep -q GPU); then
  echo "SKIP: no GPU for mode $MODE"
  exit 77
fi
T=$(mktemp -d /tmp/gbpipe.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$T"' EXIT
die() { echo "FAIL: $*"; [ -f "$T/daemon.log" ] && tail -20 "$T/daemon.log"; exit 1; }

sed "s#libpipeline_grains.so#$LIB/libpipeline_grains.so#" "$LIB/pipeline.cfg" > "$T/pipeline.cfg"
echo "endpoints = [ \"ipc://$T/sock\" ];" >> "$T/pipeline.cfg"
"$BIN" --config "$T/pipeline.cfg" --mode "$MODE" > "$T/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -S "$T/sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[ -S "$T/sock" ] || die "the daemon did not start"
if [ "$MODE" != cpu ]; then
  grep -q "mode $MODE" "$T/daemon.log" || die "not running in mode $MODE"
fi
"$CLIENT" "ipc://$T/sock" || die "the C client"
[ "$("$CLIENT" "ipc://$T/sock" "3 4")" = 25 ] || die "the C client's one-shot form"
if [ -n "$PYGEN" ] && [ -f "$PYGEN/gpubridge_pb2.py" ]; then
  if /usr/bin/python3 -c 'import zmq, google.protobuf' 2> /dev/null; then
    /usr/bin/python3 "$SRC/pipeline.py" "ipc://$T/sock" --gen "$PYGEN" || die "the Python client"
  else
    echo "note: the Python client not run: /usr/bin/python3 lacks python3-zmq or python3-protobuf"
  fi
fi
if [ -x "$GBCTL" ]; then
  out=$("$GBCTL" -e "ipc://$T/sock" telemetry pipeline.parse 2>&1) || die "gbctl telemetry: $out"
  grep -qE 'mail_forwarded: *[1-9]' <<< "$out" || die "gbctl telemetry shows no forwards: $out"
fi
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ $rc = 0 ] || die "the daemon exited $rc"
echo "PASS: pipeline ($MODE)"
