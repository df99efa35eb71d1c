#!/usr/bin/env bash
# The out-of-tree grain end to end: install gpubridge from BUILD into a
# temporary prefix, build this example against it (find_package), load
# libbank.so into the installed daemon from a config, and run the C client
# (and the Python one when its generated modules are there) in MODE.
#   test_bank_e2e.sh BUILD_DIR MODE [PY_GEN_DIR]
# MODE cpu builds the grain without GPU code (quick); persistent and relaunch
# build its kernels and skip (77) where no GPU is present.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
MODE=$2
PYGEN=${3:-}
SRC=$(cd "$(dirname "$0")" && pwd)
if [ "$MODE" != cpu ] && ! (nvidia-smi -L 2>/dev/null | grep -q GPU); then
  echo "SKIP: no GPU for mode $MODE"
  exit 77
fi
T=$(mktemp -d /tmp/gbbank.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$T"' EXIT
die() { echo "FAIL: $*"; [ -f "$T/daemon.log" ] && tail -20 "$T/daemon.log"; exit 1; }

cmake --install "$BUILD" --prefix "$T/prefix" > "$T/install.log" 2>&1 || { cat "$T/install.log"; die "install"; }
extra=()
if [ "$MODE" = cpu ]; then
  extra+=(-DBANK_CPU_ONLY=ON)
else # the nvcc gpubridge was built with
  nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  [ -n "$nvcc" ] && extra+=(-DCMAKE_CUDA_COMPILER="$nvcc")
fi
cmake -S "$SRC" -B "$T/ex" -DCMAKE_PREFIX_PATH="$T/prefix" "${extra[@]}" > "$T/cmake.log" 2>&1 ||
  { cat "$T/cmake.log"; die "configure the example against the install"; }
cmake --build "$T/ex" -j2 > "$T/make.log" 2>&1 || { cat "$T/make.log"; die "build the example"; }

cat > "$T/bank.cfg" <<CFG
endpoints = [ "ipc://$T/sock" ];
grains = (
  { library = "$T/ex/libbank.so"; type = "bank.account"; queue_capacity = 1024; slot_size = 64; }
);
CFG
"$T/prefix/bin/gpubridge" --config "$T/bank.cfg" --mode "$MODE" --check-config > /dev/null 2> "$T/check.log" ||
  { cat "$T/check.log"; die "--check-config"; }
"$T/prefix/bin/gpubridge" --config "$T/bank.cfg" --mode "$MODE" > "$T/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -S "$T/sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[ -S "$T/sock" ] || die "the daemon did not start"
grep -q "grain type 'bank.account' from $T/ex/libbank.so" "$T/daemon.log" || die "libbank.so not loaded"
if [ "$MODE" != cpu ]; then
  grep -q "mode $MODE" "$T/daemon.log" || die "not running in mode $MODE"
fi
"$T/ex/bank_client" "ipc://$T/sock" || die "the C client"
if [ -n "$PYGEN" ] && [ -f "$PYGEN/gpubridge_pb2.py" ]; then
  if /usr/bin/python3 -c 'import zmq, google.protobuf' 2> /dev/null; then
    /usr/bin/python3 "$SRC/bank.py" "ipc://$T/sock" --gen "$PYGEN" || die "the Python client"
  else # a GPU host without Debian's python3-zmq (scripts/setup installs it)
    echo "note: the Python client not run: /usr/bin/python3 lacks python3-zmq or python3-protobuf"
  fi
fi
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ $rc = 0 ] || die "the daemon exited $rc"
echo "PASS: custom grain ($MODE)"
