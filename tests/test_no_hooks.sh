#!/usr/bin/env bash
# The shipped daemon has no test hooks: none of their environment names is in
# the binary (so nothing can read them), and setting them changes nothing that
# --check-config and --help show. gpubridge-test, built for the tests, has them.
#   test_no_hooks.sh GPUBRIDGE GPUBRIDGE_TEST
set -uo pipefail
BIN=$1 TBIN=$2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
HOOKS="GPUBRIDGE_TEST_FAULTS GPUBRIDGE_KERNEL_FLAGS GPUBRIDGE_FORCE_MALLOC_STAGING GPUBRIDGE_FORCE_FALLBACK
  GPUBRIDGE_TEST_SPIN GPUBRIDGE_TEST_HEARTBEAT_MS GPUBRIDGE_TEST_SUP_DROP_BYTES GPUBRIDGE_TEST_SUP_NOMEM"
for h in $HOOKS; do
  grep -aq "$h" "$BIN" && fail "$BIN contains the test hook name $h"
  grep -aq "$h" "$TBIN" || fail "$TBIN lacks the test hook $h"
  "$TBIN" --help | grep -q "$h" || fail "gpubridge-test --help does not list $h"
  "$BIN" --help | grep -q "$h" && fail "gpubridge --help lists the test hook $h"
done
# Every environment variable the shipped daemon reads is in its --help (but
# the one the supervisor sets for its own worker, not for operators).
for v in $(grep -aoE 'GPUBRIDGE(_[A-Z]+)+' "$BIN" | sort -u); do
  "$BIN" --help | grep -q "$v" || fail "gpubridge reads $v but --help does not say so"
done
[ $fails -eq 0 ] && echo "PASS" || exit 1
