#!/usr/bin/env bash
# Operations, against the real daemon (cpu mode):
#   - the metrics endpoint scraped with curl: counters move after requests,
#     errors are counted by status, histograms are cumulative, a bad path gets
#     404 and a POST 405, and the bridge keeps serving;
#   - log_format = "json": every line of stderr parses with python3's json;
#   - SIGHUP: a log level changed in the file takes effect (info lines stop
#     at warn and come back at info),
#     a restart-only key that changed is named, a broken file is refused and
#     the bridge keeps serving.
# A build without libmicrohttpd runs the last two only.
#   test_ops.sh BUILD_DIR
set -uo pipefail
BUILD=$1
BIN="$BUILD/bridge/gpubridge" CTL="$BUILD/client/gbctl"
PY=/usr/bin/python3
command -v curl >/dev/null || { echo "SKIP: no curl (scripts/setup installs it)"; exit 77; }
T=$(mktemp -d /tmp/gbops.XXXXXX)
EP="ipc://$T/bridge.sock"
PID=
trap '[ -n "$PID" ] && kill -KILL $PID 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ctl() { "$CTL" --endpoint "$EP" --timeout 5000 "$@"; }

write_cfg() { # $1: log level, $2: max_message_size
  cat > "$T/bridge.cfg.new" <<CFG
endpoints = [ "$EP" ];
mode = "cpu";
arena_mb = 0;
log_level = "$1";
max_message_size = $2;
log_format = "json";
$METRICS
# A small activation table for echo (32 entries): more keys get STATUS_BUSY
# out of the ring.
grains = ( { type = "echo"; max_grains = 1; } );
CFG
  mv "$T/bridge.cfg.new" "$T/bridge.cfg"
}

if ! "$BIN" --help >/dev/null; then echo "FAIL: no daemon"; exit 1; fi
METRICS='metrics = { enabled = true; listen = "127.0.0.1:0"; };'
write_cfg info 1048576
if ! "$BIN" --config "$T/bridge.cfg" --check-config > "$T/check.out" 2>&1; then
  grep -q "built without libmicrohttpd" "$T/check.out" || { cat "$T/check.out"; echo "FAIL: --check-config"; exit 1; }
  echo "NOTE: this build has no metrics endpoint (libmicrohttpd-dev missing): testing logs and SIGHUP only"
  METRICS=
  write_cfg info 1048576
fi
"$BIN" --config "$T/bridge.cfg" 2> "$T/bridge.log" &
PID=$!
up() { ctl list >/dev/null 2>&1; }
for _ in $(seq 100); do up && break; sleep 0.1; done
up || { cat "$T/bridge.log"; echo "FAIL: not serving"; exit 1; }
ADDR=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/bridge.log" | head -1)
[ -n "$ADDR" ] || [ -z "$METRICS" ] || { cat "$T/bridge.log"; echo "FAIL: the metrics address is not logged"; exit 1; }
BASE=${ADDR%/metrics}

scrape() { curl -sf --max-time 10 "$ADDR" > "$T/m.txt"; }
metric() { # the value of the series $1 (exact name and labels), or "absent"
  awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "absent" }' "$T/m.txt"
}
# Snapshots are published about every 100 ms: wait for a value, bounded.
wait_metric() { # series, expected value
  [ -n "$METRICS" ] || return 0
  for _ in $(seq 100); do scrape && [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.05; done
  fail "$1 is $(metric "$1"), expected $2"
  return 1
}

wait_log() { # pattern, count: wait for that many lines, bounded
  for _ in $(seq 200); do [ "$(grep -c -- "$1" "$T/bridge.log")" -ge "$2" ] && return 0; sleep 0.05; done
  fail "fewer than $2 log lines match $1"
}

E='{grain_type="echo",mode="cpu"}'
if [ -n "$METRICS" ]; then
scrape || fail "first scrape"
grep -q '^# TYPE gpubridge_grain_latency_seconds histogram$' "$T/m.txt" || fail "no histogram TYPE line"
[ "$(metric "gpubridge_grain_requests_total$E")" = 0 ] || fail "echo requests before any: $(metric "gpubridge_grain_requests_total$E")"
fi

for k in 1 2 3 4 5; do ctl send echo 1 hello$k > /dev/null || fail "echo $k"; done
busy=0 # keys past the table's size: errors out of the ring
for k in $(seq 2 40); do ctl send echo $k x > "$T/send.out" 2>&1 || { grep -q STATUS_BUSY "$T/send.out" && busy=$((busy + 1)); }; done
[ $busy -gt 0 ] || fail "no STATUS_BUSY from a full activation table"
ctl send nosuch 1 1 > /dev/null 2>&1 # no such grain type: an error before any ring
wait_metric "gpubridge_grain_requests_total$E" 44
wait_metric "gpubridge_grain_replies_total$E" 44
wait_metric 'gpubridge_grain_errors_total{grain_type="echo",mode="cpu",status="STATUS_BUSY"}' $busy
wait_metric 'gpubridge_replies_total{status="STATUS_UNKNOWN_GRAIN_TYPE"}' 1
wait_metric 'gpubridge_grain_latency_seconds_count{grain_type="echo",mode="cpu"}' 44
wait_metric 'gpubridge_grain_latency_seconds_bucket{grain_type="echo",mode="cpu",le="+Inf"}' 44
if [ -n "$METRICS" ]; then
[ "$(metric "gpubridge_grain_in_flight$E")" = 0 ] || fail "in flight after all replies"
[ "$(metric "gpubridge_grain_active$E")" = 1 ] || fail "echo not active"
act=$(metric "gpubridge_grain_activations$E")
[ "$act" != absent ] && [ "$act" -ge 1 ] && [ "$act" -le 40 ] || fail "echo activations: $act"
[ "$(metric "gpubridge_grain_evictions_total$E")" = 0 ] || fail "evictions with collection_age_s 900"
[ "$(metric "gpubridge_grain_evicted_max_bytes$E")" = 67108864 ] || fail "evicted store bound: $(metric "gpubridge_grain_evicted_max_bytes$E")"
# 64 MiB at 4 x (24 + 8) bytes an echo grain (operations.md)
[ "$(metric "gpubridge_grain_evicted_max$E")" = 524288 ] || fail "evicted store bound in grains: $(metric "gpubridge_grain_evicted_max$E")"
eb=$(metric "gpubridge_grain_evicted_bytes$E")
[ "$eb" != absent ] && [ "$eb" -gt 0 ] && [ "$eb" -le 67108864 ] || fail "evicted store bytes: $eb"
[ "$(metric "gpubridge_kernel_launches_total$E")" != absent ] || fail "no launches series"
# Buckets are cumulative: never decreasing, ending at _count.
$PY - "$T/m.txt" <<'PYEOF' || fail "histogram buckets not cumulative"
import re, sys
last = {}
for line in open(sys.argv[1]):
    m = re.match(r'gpubridge_grain_latency_seconds_bucket\{(.*),le="([^"]+)"\} (\d+)$', line)
    if m:
        k, v = m.group(1), int(m.group(3))
        assert v >= last.get(k, 0), line
        last[k] = v
assert last, "no buckets"
PYEOF

# Bad HTTP: 404 and 405, and the bridge and the endpoint keep serving.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$BASE/nope")
[ "$code" = 404 ] || fail "GET /nope gave $code, expected 404"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$BASE/metrics/../../etc/passwd")
[ "$code" = 404 ] || fail "a traversal path gave $code, expected 404"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$BASE/metrics%00x")
[ "$code" = 404 ] || fail "GET /metrics%00x gave $code, expected 404 (a NUL ended the path)"
# A raw NUL byte in the request line (curl cannot send one): the path ends
# there for the HTTP library, but it is not /metrics.
raw_get() { # $1: the request line's path, printf escapes allowed
  local hp=${BASE#http://}
  exec 3<>"/dev/tcp/${hp%:*}/${hp##*:}" || return 1
  printf "GET $1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" >&3
  timeout 10 head -1 <&3 | tr -d '\r'
  exec 3<&-
}
# 404 here; newer libmicrohttpd refuses such a line itself (400, or the
# connection closed): anything but the metrics.
for p in '/metrics\x00x' '/metrics\x00' '/metrics\x00/../../etc'; do
  line=$(raw_get "$p")
  grep -q " 200 " <<< "$line" && fail "GET $p (a raw NUL) gave '$line', expected no metrics"
done
for p in /metrics '/metrics?name=x'; do
  line=$(raw_get "$p")
  grep -q " 200 " <<< "$line" || fail "GET $p by hand gave '$line', expected 200"
done
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$BASE/metric%73")
[ "$code" = 200 ] || fail "GET /metric%73 (an escaped s) gave $code, expected 200"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST -d x=1 "$ADDR")
[ "$code" = 405 ] || fail "POST gave $code, expected 405"
ctl send echo 1 still > /dev/null || fail "the bridge stopped serving after bad HTTP"
wait_metric "gpubridge_grain_requests_total$E" 45
fi

# SIGHUP: lower the level to warn and change a restart-only key. Activate
# and deactivate log at info: their lines stop, then come back at info.
toggle() { ctl deactivate echo > /dev/null || fail "deactivate"; ctl activate echo > /dev/null || fail "activate"; }
activated() { grep -c "grain type 'echo': activated" "$T/bridge.log"; }
toggle
n0=$(activated)
[ "$n0" = 1 ] || fail "activate at info logged $n0 lines"
write_cfg warn 2097152
kill -HUP $PID
wait_log 'reload: max_message_size changed' 1
wait_metric gpubridge_config_reloads_total 1
grep -q 'reload: log_level info -> warn' "$T/bridge.log" || fail "no log_level change logged"
grep -q '"level":"warn".*reload: max_message_size changed; it takes effect only after a restart' \
  "$T/bridge.log" || fail "the restart-only key was not named"
toggle
[ "$(activated)" = "$n0" ] || fail "info lines still logged at warn"
write_cfg info 2097152
kill -HUP $PID
wait_log 'reload: log_level warn -> info' 1
wait_metric gpubridge_config_reloads_total 2
toggle
[ "$(activated)" = $((n0 + 1)) ] || fail "info lines not back after reloading info"
# A file that no longer loads changes nothing.
echo 'log_level = "loud";' > "$T/bridge.cfg"
kill -HUP $PID
wait_log 'the running configuration stays' 1
wait_metric gpubridge_config_reload_failures_total 1
grep -q 'reload: .*unknown log level .loud.*the running configuration stays' "$T/bridge.log" ||
  fail "a broken file on reload was not reported"
ctl send echo 8 after > /dev/null || fail "not serving after a failed reload"

kill -TERM $PID
wait $PID; rc=$?
PID=
[ $rc = 0 ] || fail "exit $rc after SIGTERM"
# Every line is one JSON object with time, level and message.
$PY - "$T/bridge.log" <<'PYEOF' || fail "log lines are not JSON"
import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    o = json.loads(line)
    assert set(("time", "level", "message")) <= o.keys(), line
    n += 1
assert n > 10, n
PYEOF
if [ $fails = 0 ]; then echo "PASS: JSON logs, SIGHUP${METRICS:+, metrics}"; exit 0; fi
tail -20 "$T/bridge.log"
exit 1
