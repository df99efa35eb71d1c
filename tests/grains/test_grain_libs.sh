#!/usr/bin/env bash
# Grain libraries named by the config (runtime/grain_libs.c): each error says
# FILE:LINE and what is wrong, from --check-config and from the daemon at
# start (both non-zero); a good library's types are served in cpu mode.
#   test_grain_libs.sh GPUBRIDGE LIBDIR
set -uo pipefail
BIN=$1
LIB=$(cd "$2" && pwd)
GBCTL=$(dirname "$BIN")/../client/gbctl
T=$(mktemp -d /tmp/gbgl.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error NAME CONFIG_BODY TEXT [ARGS...]: both --check-config and a
# start exit non-zero with "CFG:LINE: ... TEXT".
expect_error() {
  local name=$1 body=$2 text=$3
  shift 3
  printf '%s\n' "$body" > "$T/$name.cfg"
  local out rc
  out=$("$BIN" --config "$T/$name.cfg" --check-config --mode cpu "$@" 2>&1 >/dev/null) # cpu: the test libraries have no GPU code
  rc=$?
  [ $rc -ne 0 ] || fail "$name: --check-config exited 0"
  grep -qF "$T/$name.cfg:2: grains[0].library: " <<< "$out" || fail "$name: no FILE:LINE in: $out"
  grep -qF "$text" <<< "$out" || fail "$name: expected '$text' in: $out"
  out=$(timeout 20 "$BIN" --config "$T/$name.cfg" --mode cpu "$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$name: the daemon started (rc $rc)"
  grep -qF "$text" <<< "$out" || fail "$name: start: expected '$text' in: $out"
  out=$(timeout 20 "$BIN" --config "$T/$name.cfg" --mode cpu --supervise "$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$name: the supervisor started (rc $rc)"
  grep -qF "$text" <<< "$out" || fail "$name: --supervise: expected '$text' in: $out"
}

expect_error missing $'grains = (\n  { library = "'"$T"'/nope.so"; } );' "cannot load '$T/nope.so'"
expect_error abi $'grains = (\n  { library = "'"$LIB"'/libgbt_wrong_abi.so"; } );' \
  "was built for grain ABI 999, this gpubridge has ABI 5"
expect_error oldabi $'grains = (\n  { library = "'"$LIB"'/libgbt_old_abi.so"; } );' \
  "was built for grain ABI 3, this gpubridge has ABI 5"
expect_error dup $'grains = (\n  { library = "'"$LIB"'/libgbt_dup.so"; } );' "duplicate grain type 'echo'"
expect_error none $'grains = (\n  { library = "'"$LIB"'/libgbt_not_grains.so"; } );' "is not a grain library"
expect_error unknown_target $'grains = (\n  { library = "'"$LIB"'/libgbt_mail_bad.so"; } );' \
  "grain type 'mt.bad' sends to grain type 'no.such.type', which no built-in type or loaded library defines"
# A library of cpu-only types where the mode runs ring kernels on the GPU.
printf 'grains = (\n  { library = "%s/libgbt_counter.so"; } );\n' "$LIB" > "$T/nogpu.cfg"
# (A host without a CUDA device falls back to cpu mode, where the library is
# fine: grain_libs_unit checks this refusal there.)
out=$("$BIN" --config "$T/nogpu.cfg" --check-config --mode persistent 2>&1 >/dev/null)
rc=$?
if ! grep -q "fell back to cpu" <<< "$out"; then
  [ $rc -ne 0 ] || fail "nogpu: --check-config --mode persistent exited 0"
  grep -qF "$T/nogpu.cfg:2: grains[0].library: " <<< "$out" && grep -qF "has no GPU code" <<< "$out" ||
    fail "nogpu: $out"
fi
# The same library twice: a config error at its line.
printf 'grains = (\n  { library = "%s/libgbt_counter.so"; },\n  { library = "%s/libgbt_counter.so"; } );\n' \
  "$LIB" "$LIB" > "$T/twice.cfg"
out=$("$BIN" --config "$T/twice.cfg" --check-config 2>&1 >/dev/null) && fail "twice: exited 0"
grep -qF "twice.cfg:3: grains[1].library: " <<< "$out" && grep -qF "already given by grains[0]" <<< "$out" ||
  fail "twice: $out"

# A good library, by a path relative to the config's folder, with settings
# for its type: --check-config lists the library and the type.
cp "$LIB/libgbt_counter.so" "$T/"
cat > "$T/ok.cfg" <<CFG
endpoints = [ "ipc://$T/sock" ];
grains = (
  { library = "libgbt_counter.so"; },
  { type = "test.counter"; queue_capacity = 64; slot_size = 64; }
);
CFG
out=$("$BIN" --config "$T/ok.cfg" --check-config --mode cpu 2>&1) || fail "ok: --check-config: $out"
grep -qF "library = \"$T/libgbt_counter.so\"" <<< "$out" || fail "ok: the library is not listed: $out"
grep -qE 'type = "test.counter"; queue_capacity = 64;' <<< "$out" || fail "ok: the type is not listed: $out"

# Served in cpu mode, called generically (raw payloads) with gbctl; the
# types with the generic settings (no entry of their own).
cp "$LIB/libgbt_many.so" "$T/"
cat > "$T/serve.cfg" <<CFG
endpoints = [ "ipc://$T/sock" ];
grains = ( { library = "libgbt_counter.so"; }, { library = "libgbt_many.so"; } );
CFG
if [ -x "$GBCTL" ]; then
  "$BIN" --config "$T/serve.cfg" --mode cpu > "$T/daemon.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$T/sock" ] && break; sleep 0.1; done
  E="ipc://$T/sock"
  out=$("$GBCTL" -e "$E" send test.counter 5 1 0500000000000000 2>&1) || fail "add: $out"
  grep -qF "OK, message type 1, 8 bytes: 0500000000000000" <<< "$out" || fail "add 5: $out"
  out=$("$GBCTL" -e "$E" send test.counter 5 1 0300000000000000 2>&1) || fail "add: $out"
  grep -qF "0800000000000000" <<< "$out" || fail "add 3 (turns keep the state): $out"
  out=$("$GBCTL" -e "$E" send test.counter 5 9 2>&1) && fail "type 9 accepted: $out"
  grep -qF "test.counter has no message type 9 (Add is 1, Fail is 2)" <<< "$out" || fail "type 9: $out"
  out=$("$GBCTL" -e "$E" limits 2>&1) || fail "limits: $out"
  grep -q "test.counter" <<< "$out" || fail "limits lists no test.counter: $out"
  # Every request type a type declares, however many: test.many's twenty
  # (more than the C client once kept).
  many=$(awk '/^test\.many:/ { on = 1; next } /^[^ ]/ { on = 0 } on' <<< "$out")
  [ "$(grep -c 'payload <= ' <<< "$many")" = 20 ] && grep -qE '^  20 M20: payload <= [0-9]+ B$' <<< "$many" ||
    fail "limits of test.many lack some of its 20 message types: $out"
  # SIGHUP with the file unchanged: nothing to restart for (the library's
  # type is added to the reloaded config as at start).
  kill -HUP "$pid"
  for _ in $(seq 100); do grep -q "reload: .* applied" "$T/daemon.log" && break; sleep 0.1; done
  grep -q "reload: $T/serve.cfg applied$" "$T/daemon.log" || fail "reload: $(grep reload "$T/daemon.log")"
  ! grep -q "changed; it takes effect only after a restart" "$T/daemon.log" ||
    fail "reload of an unchanged file: $(grep reload "$T/daemon.log")"
  kill "$pid"
  wait "$pid" 2>/dev/null
  rc=$?
  pid=""
  [ $rc = 0 ] || fail "the daemon exited $rc: $(tail -5 "$T/daemon.log")"
else
  fail "no gbctl at $GBCTL"
fi
if [ $fails = 0 ]; then echo "PASS: grain libraries"; exit 0; fi
exit 1
