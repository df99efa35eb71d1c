#!/bin/sh
# The kernel profile exists only in benchmark builds of a grain type's
# kernels (GB_KERNEL_PROFILE): bench_ring --profile runs vecadd's benchmark
# build, whose kernels count a profile and honour the kernel switches; the
# shipped vecadd counts none. Needs a GPU (exits 77 without one).
#   test_bench_profile.sh BUILD_DIR
set -u
RING="$1/bench/bench_ring"
ARGS="--iters 300 --warmup 30 --seconds 0.05 --pairs 0"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

"$RING" --modes persistent,relaunch $ARGS --profile >"$T/prof.out" 2>&1
rc=$?
if grep -q "^bench_ring: GPU none\|needs the CUDA build" "$T/prof.out"; then
    echo "SKIP: no GPU (or a build without CUDA)"
    exit 77
fi
fail=0
[ $rc -eq 0 ] || { echo "FAIL: bench_ring --profile exited $rc"; fail=1; }
for m in persistent relaunch; do
    grep -q "^profile $m (mapped) round trip: [1-9][0-9]* busy windows" "$T/prof.out" ||
        { echo "FAIL: no kernel profile for $m with --profile"; fail=1; }
done

"$RING" --modes persistent,relaunch $ARGS >"$T/ship.out" 2>&1 || { echo "FAIL: bench_ring exited $?"; fail=1; }
if grep -q "^profile " "$T/ship.out"; then
    echo "FAIL: the shipped kernels counted a profile:"
    grep "^profile " "$T/ship.out"
    fail=1
fi

# A kernel switch (GBK_F_NO_FAST: every request through the block's window)
# on the benchmark build: its rows are there and every reply checked.
"$RING" --modes persistent $ARGS --variants 0,1 >"$T/var.out" 2>&1 || { echo "FAIL: --variants exited $?"; fail=1; }
grep -q "^persistent (mapped) flags 1 " "$T/var.out" || { echo "FAIL: no 'flags 1' row"; fail=1; }
grep -q "^profile persistent (mapped) flags 1 round trip: [1-9][0-9]* busy windows" "$T/var.out" ||
    { echo "FAIL: no kernel profile in the --variants rows"; fail=1; }

[ $fail -eq 0 ] || { echo "--- outputs"; cat "$T/prof.out" "$T/ship.out" "$T/var.out"; }
exit $fail
