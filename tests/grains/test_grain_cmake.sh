#!/usr/bin/env bash
# gpubridge_add_grain_library: a source shared by a CPU_ONLY grain library
# and one with GPU code in one directory is refused at configure time, in
# either order (a source has one language per directory, so one of them
# would silently get the other's code). Needs nvcc.
# Usage: test_grain_cmake.sh SOURCE_DIR NVCC
set -u
SRC=$1
NVCC=${2:-}
[ -x "$NVCC" ] || { echo "SKIP: no nvcc"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
echo 'int x;' > "$T/g.c"
try() { # name, then the two calls
  mkdir -p "$T/$1"
  cat > "$T/$1/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.22)
project(t LANGUAGES C CUDA)
add_library(gpubridge::grain INTERFACE IMPORTED)
include($SRC/cmake/GpubridgeGrain.cmake)
$2
$3
CM
  out=$(cmake -S "$T/$1" -B "$T/$1/b" -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGPUBRIDGE_CUDA_ARCHITECTURES=90 2>&1); rc=$?
  out=$(tr '\n' ' ' <<< "$out" | tr -s ' ') # CMake wraps its messages
}
try cpu_first "gpubridge_add_grain_library(a CPU_ONLY $T/g.c)" "gpubridge_add_grain_library(b $T/g.c)"
[ $rc != 0 ] && grep -q "which a CPU_ONLY grain library in this directory compiles as C" <<< "$out" \
  || { echo "FAIL: CPU_ONLY first: rc $rc"; echo "$out" | tail -5; fails=1; }
try gpu_first "gpubridge_add_grain_library(b $T/g.c)" "gpubridge_add_grain_library(a CPU_ONLY $T/g.c)"
[ $rc != 0 ] && grep -q "which a grain library with GPU code in this directory compiles with nvcc" <<< "$out" \
  || { echo "FAIL: GPU first: rc $rc"; echo "$out" | tail -5; fails=1; }
echo 'int y;' > "$T/h.c"
try apart "gpubridge_add_grain_library(b $T/g.c)" "gpubridge_add_grain_library(a CPU_ONLY $T/h.c)"
[ $rc = 0 ] || { echo "FAIL: separate sources refused: $out" | tail -5; fails=1; }
[ $fails = 0 ] && echo "PASS: grain library sources" && exit 0
exit 1
