#!/usr/bin/env bash
# cmake --install into a temporary prefix: the daemon, gbctl, the default
# config under etc/gpubridge/, the systemd unit, both man pages and every
# wire schema (share/gpubridge/proto/, the grains' as well) are there;
# the installed daemon accepts the installed config; the pages render without
# warnings (where groff is installed); the unit reloads with SIGHUP; a
# program built against the installed package (find_package) hosts a grain
# of its own with the embedding API (gpubridge::runtime) in cpu mode; the
# installed headers compile alone.
#   test_install.sh BUILD_DIR
set -uo pipefail
BUILD=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/gbinst.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cmake --install "$BUILD" --prefix "$T" > "$T/install.log" 2>&1 || { cat "$T/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/gpubridge bin/gbctl etc/gpubridge/gpubridge.cfg lib/systemd/system/gpubridge.service \
         share/man/man8/gpubridge.8 share/man/man1/gbctl.1; do
  [ -s "$T/$f" ] || fail "$f not installed"
done
for f in gpubridge control echo vecadd pagerank; do
  [ -s "$T/share/gpubridge/proto/$f.proto" ] || fail "share/gpubridge/proto/$f.proto not installed"
done
if command -v protoc > /dev/null; then # the installed folder alone is enough to generate a client's code
  P="$T/share/gpubridge/proto"
  mkdir -p "$T/pygen" && protoc --python_out="$T/pygen" -I "$P" "$P"/*.proto > "$T/protoc.log" 2>&1 ||
    { cat "$T/protoc.log"; fail "protoc on share/gpubridge/proto"; }
fi
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
embed_check() {
  for f in include/gpubridge/runtime.h include/gpubridge/version.h; do
    [ -s "$T/$f" ] || fail "$f not installed"
  done
  ls "$T"/lib*/libgpubridge-runtime.so > /dev/null 2>&1 || ls "$T"/lib/*/libgpubridge-runtime.so > /dev/null 2>&1 ||
    fail "libgpubridge-runtime.so not installed"
  mkdir -p "$T/app"
  cat > "$T/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(embed_app LANGUAGES C)
find_package(gpubridge 0.2 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE gpubridge::runtime)
CM
  cat > "$T/app/app.c" <<'APP'
#include <stdio.h>
#include <string.h>
#include <gpubridge/runtime.h>
GB_HD uint16_t inc(const gb_grain_ctx_t *ctx, void *state, uint16_t type, const unsigned char *in, uint32_t in_len,
                   unsigned char *out, uint32_t out_cap, uint32_t *out_len, uint32_t *aux)
{
    (void)ctx, (void)type, (void)in, (void)in_len, (void)out_cap, (void)aux;
    uint64_t *n = (uint64_t *)state;
    ++*n;
    memcpy(out, n, 8);
    *out_len = 8;
    return GB_SLOT_OK;
}
static const gb_grain_msg_t msgs[] = {{1, "Inc"}};
GB_DEFINE_GRAIN(app_inc, "app.inc", 8, 0, inc, msgs, NULL)
int main(void)
{
    gpubridge_options_t o = GPUBRIDGE_OPTIONS_INIT;
    o.mode = GPUBRIDGE_MODE_CPU;
    o.flags = GPUBRIDGE_NO_CONFIG_GRAINS;
    gpubridge_runtime_t *rt = NULL;
    uint64_t n = 0;
    gpubridge_reply_t r;
    if (gpubridge_runtime_new(&o, &rt) || gpubridge_register_grain(rt, &gb_grain_app_inc) ||
        gpubridge_runtime_start(rt))
        return printf("runtime: %s\n", gpubridge_last_error()), 1;
    for (int i = 0; i < 3; i++)
        if (gpubridge_call(rt, "app.inc", 1, 1, NULL, 0, &r, &n, sizeof n, 5000))
            return printf("call: %s\n", gpubridge_last_error()), 1;
    gpubridge_runtime_destroy(&rt);
    printf("app.inc %llu, gpubridge %s\n", (unsigned long long)n, gpubridge_version(NULL, NULL, NULL));
    return n == 3 && GPUBRIDGE_VERSION_MAJOR >= 0 ? 0 : 1;
}
APP
  cmake -S "$T/app" -B "$T/app/build" -DCMAKE_PREFIX_PATH="$T" ${GB_APP_SANITIZE:+"-DCMAKE_C_FLAGS=$GB_APP_SANITIZE"} \
    ${GB_APP_SANITIZE:+"-DCMAKE_EXE_LINKER_FLAGS=$GB_APP_SANITIZE"} > "$T/app.log" 2>&1 &&
    cmake --build "$T/app/build" >> "$T/app.log" 2>&1 || { cat "$T/app.log"; fail "build a program against gpubridge::runtime"; return; }
  out=$("$T/app/build/app" 2>&1) || { echo "$out"; fail "the embedding program failed"; return; }
  echo "$out" | grep -q "^app.inc 3, gpubridge " || fail "the embedding program: $out"
  # The same program built with pkg-config and cc alone.
  local pc
  pc=$(ls -d "$T"/lib*/pkgconfig "$T"/lib/*/pkgconfig 2>/dev/null | head -1)
  flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs gpubridge-runtime) || { fail "pkg-config gpubridge-runtime"; return; }
  # shellcheck disable=SC2086 # flags are words
  cc $GB_APP_SANITIZE -o "$T/app/app_pc" "$T/app/app.c" $flags -Wl,-rpath,"$(dirname "$pc")" 2> "$T/app_pc.log" ||
    { cat "$T/app_pc.log"; fail "build a program with pkg-config gpubridge-runtime"; return; }
  out=$("$T/app/app_pc" 2>&1) || { echo "$out"; fail "the program built with pkg-config failed"; return; }
  echo "$out" | grep -q "^app.inc 3, gpubridge " || fail "the program built with pkg-config: $out"
}
# The installed headers are self-contained: each C header compiles alone from
# the prefix, and where nvcc is found, the custom grain's kernels (the device/
# templates) compile from the prefix too, GPU or not.
sdk_check() {
  local h
  for h in "$T"/include/gpubridge/*.h "$T"/include/gpubridge/detail/*.h; do
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$T/include" -include "$h" -x c /dev/null 2> "$T/hdr.log" ||
      { cat "$T/hdr.log"; fail "${h#"$T"/} does not compile alone from the prefix"; }
  done
  [ -s "$T/include/gpubridge/device/grain_kernels.cuh" ] || fail "the kernels (include/gpubridge/device) not installed"
  local nvcc
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || return 0
  "$nvcc" -x cu -std=c++17 -arch=sm_90 -c "$SRC/examples/custom_grain/bank.c" -I"$T/include" \
    -o "$T/bank.o" 2> "$T/nvcc.log" || { cat "$T/nvcc.log"; fail "the custom grain's kernels do not compile from the prefix"; }
}
embed_check
sdk_check
if [ $fails = 0 ]; then echo "PASS: install"; exit 0; fi
exit 1
