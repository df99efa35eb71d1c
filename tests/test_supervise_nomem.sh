#!/usr/bin/env bash
# gpubridge --supervise when an allocation it needs to start fails (the test
# hook GPUBRIDGE_TEST_SUP_NOMEM=N fails the Nth): it exits 1 with an ERROR
# line that says what the memory was for, starts no worker and leaves no
# directory behind. 1-3: its tables; 4: the worker's command line; 5: the
# CURVE state (with CURVE on).
#   test_supervise_nomem.sh GPUBRIDGE_TEST
set -uo pipefail
TBIN=$1
T=$(mktemp -d /tmp/gbnomem.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
printf 'endpoints = [ "ipc://%s/b.sock" ];\nmode = "cpu";\n' "$T" > "$T/plain.cfg"
CASES="1 2 3 4"
if /usr/bin/python3 -c 'import zmq' 2>/dev/null; then
  read -r SPUB SSEC < <(/usr/bin/python3 -c '
import zmq
s = zmq.curve_keypair()
print(s[0].decode(), s[1].decode())')
  printf '%s' "$SSEC" > "$T/server.key"; chmod 600 "$T/server.key"
  printf 'endpoints = [ "ipc://%s/c.sock" ];\nmode = "cpu";\ncurve = { enabled = true; server_secret_key_file = "%s"; server_public_key = "%s"; };\n' \
    "$T" "$T/server.key" "$SPUB" > "$T/curve.cfg"
  CASES="$CASES 5"
else
  echo "SKIP part: no python3-zmq for CURVE keys"
fi
for n in $CASES; do
  cfg=$T/plain.cfg
  [ "$n" = 5 ] && cfg=$T/curve.cfg
  GPUBRIDGE_TEST_SUP_NOMEM=$n timeout 15 "$TBIN" --config "$cfg" --supervise 2> "$T/$n.log" &
  pid=$!
  wait $pid; rc=$?
  [ $rc = 1 ] || { cat "$T/$n.log"; fail "allocation $n: exit $rc, not 1"; }
  grep -q "error .*supervisor: out of memory (.*); not starting" "$T/$n.log" ||
    { cat "$T/$n.log"; fail "allocation $n: no ERROR line saying what ran out"; }
  grep -q "worker .*started\|serving" "$T/$n.log" && { cat "$T/$n.log"; fail "allocation $n: it served anyway"; }
  ls -d /tmp/gpubridge-$pid-* >/dev/null 2>&1 && fail "allocation $n: /tmp/gpubridge-$pid-* left behind"
done
if [ $fails = 0 ]; then echo "PASS: the supervisor fails cleanly when an allocation fails ($CASES)"; exit 0; fi
exit 1
