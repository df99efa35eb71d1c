#!/usr/bin/env bash
# The end-to-end suites leave no temporary folders behind, also when a test
# fails (a daemon that cannot start): run them with GB_E2E_TMP pointing at an
# empty folder and check it is empty afterwards.
#   test_e2e_tmp.sh E2E_AUTHORITY_BIN GPUBRIDGE_BIN
set -uo pipefail
T=$(mktemp -d /tmp/gbtmp.XXXXXX)
trap 'rm -rf "$T"' EXIT
GB_E2E_TMP=$T GB_BRIDGE_BIN=$2 GB_E2E_MODE=cpu "$1" > "$T.out" 2>&1
rc=$?
# A binary that cannot be a bridge: every test fails at start-up.
GB_E2E_TMP=$T GB_BRIDGE_BIN=/bin/false GB_E2E_MODE=cpu "$1" >> "$T.out" 2>&1
left=$(ls -A "$T")
if [ $rc -ne 0 ]; then cat "$T.out"; rm -f "$T.out"; echo "FAIL: the suite failed"; exit 1; fi
rm -f "$T.out"
[ -z "$left" ] || { echo "FAIL: left behind in $T: $left"; exit 1; }
echo PASS
