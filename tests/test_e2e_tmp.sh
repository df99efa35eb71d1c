#!/usr/bin/env bash
# The end-to-end suites leave no temporary folders behind: every suite that
# uses tests/e2e_harness.h runs (one quick test each, by cmocka's test
# filter), plain and through --supervise, with GB_E2E_TMP pointing at an
# empty folder, which must be empty after each run. Three ways to end:
#   - passing tests (group set-up and tear-down, a test's own bridges, the
#     folders tests make for keys);
#   - failing ones, every bridge failing at start-up (/bin/false);
#   - a failing assertion while a bridge still runs: a fake bridge that
#     makes its socket file and never answers (the harness kills it at exit;
#     its folder holds the config, the log, the socket and key files).
#   test_e2e_tmp.sh BUILD_DIR
set -uo pipefail
B=$1
T=$(mktemp -d /tmp/gbtmp.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir "$T/e2e"
export GB_E2E_TMP=$T/e2e GB_E2E_MODE=cpu GB_BRIDGE_TEST_BIN=$B/bridge/gpubridge-test \
  GB_MAIL_LIB=$B/tests/grains/libgbt_mail.so GB_COUNTER_LIB=$B/tests/grains/libgbt_counter.so
# A bridge that seems to start (its socket file appears) and never answers.
cat > "$T/fake" <<'FAKE'
#!/bin/sh
[ "$1" = --config ] && : > "$(dirname "$2")/bridge.sock"
exec sleep 600
FAKE
chmod +x "$T/fake"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run EXPECT(pass|fail) BRIDGE SUPERVISE SUITE TEST
run() {
  GB_BRIDGE_BIN=$2 GB_E2E_SUPERVISE=$3 "$B/tests/$4" "$5" > "$T/out" 2>&1
  local rc=$? what="$4 $5 (supervise $3, bridge $(basename "$2"))"
  if [ "$1" = pass ] && { [ $rc -ne 0 ] || ! grep -q "PASSED  \] 1 test" "$T/out"; }; then
    cat "$T/out"; fail "$what: the test did not pass"
  fi
  [ "$1" = fail ] && [ $rc -eq 0 ] && { cat "$T/out"; fail "$what: passed with a bridge that cannot serve"; }
  local left
  left=$(ls -A "$T/e2e" | tr "\n" " ")
  [ -z "$left" ] || { fail "$what left behind: $left"; rm -rf "${T:?}/e2e/"*; }
}
SUITES="e2e_authority:test_admin_keys e2e_bridge:test_one_way e2e_bridge:test_curve e2e_large:test_large_echo
  e2e_mail:test_forward_keeps_correlation e2e_io:test_order_2 e2e_pressure:test_oversized_frames
  e2e_two_bridges:test_placement_vectors"
for st in $SUITES; do
  suite=${st%%:*} test=${st#*:}
  for sup in 0 1; do
    [ $suite = e2e_two_bridges ] && [ $sup = 1 ] && continue # it starts its bridges itself, never supervised
    run pass "$B/bridge/gpubridge" $sup $suite $test
    run fail /bin/false $sup $suite $test
  done
done
run fail "$T/fake" 0 e2e_authority test_admin_keys
[ $fails -eq 0 ] && echo "PASS: no temporary folder left behind" || exit 1
