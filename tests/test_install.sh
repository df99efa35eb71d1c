#!/usr/bin/env bash
# cmake --install into a temporary prefix: the daemon, gbctl, the default
# config under etc/gpubridge/, the systemd unit and both man pages are there;
# the installed daemon accepts the installed config; the pages render without
# warnings (where groff is installed); the unit reloads with SIGHUP.
#   test_install.sh BUILD_DIR
set -uo pipefail
BUILD=$1
T=$(mktemp -d /tmp/gbinst.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cmake --install "$BUILD" --prefix "$T" > "$T/install.log" 2>&1 || { cat "$T/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/gpubridge bin/gbctl etc/gpubridge/gpubridge.cfg lib/systemd/system/gpubridge.service \
         share/man/man8/gpubridge.8 share/man/man1/gbctl.1; do
  [ -s "$T/$f" ] || fail "$f not installed"
done
[ -x "$T/bin/gpubridge" ] && [ -x "$T/bin/gbctl" ] || fail "binaries not executable"
"$T/bin/gpubridge" --config "$T/etc/gpubridge/gpubridge.cfg" --check-config > /dev/null ||
  fail "the installed daemon rejects the installed config"
"$T/bin/gbctl" --help > /dev/null || fail "the installed gbctl does not run"
U="$T/lib/systemd/system/gpubridge.service"
grep -qx 'Type=simple' "$U" || fail "unit: no Type=simple"
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$U" || fail "unit: no ExecReload"
grep -q '^ExecStart=/.*/gpubridge --config /.*/gpubridge/gpubridge.cfg$' "$U" || fail "unit: ExecStart"
! grep -q '@' "$U" "$T/share/man/man8/gpubridge.8" "$T/share/man/man1/gbctl.1" ||
  fail "an @VARIABLE@ left unfilled"
if command -v groff > /dev/null; then
  for p in share/man/man8/gpubridge.8 share/man/man1/gbctl.1; do
    out=$(groff -man -Tutf8 -ww -z "$T/$p" 2>&1)
    [ -z "$out" ] || fail "$p: $out"
  done
fi
if [ $fails = 0 ]; then echo "PASS: install"; exit 0; fi
exit 1
