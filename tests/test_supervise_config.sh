#!/usr/bin/env bash
# Under --supervise every worker runs the config the supervisor runs, not
# whatever the file holds when the worker starts: a file broken after start
# (and refused by SIGHUP) must not stop a restarted worker from serving, and
# keys that need a restart must not come in with a worker restart. A reload
# the supervisor takes reaches the worker and the workers after it. The copy
# is written again before each start (a /tmp cleaner may remove it); a
# relative library path is the config file's folder's also when the file is
# named without one; "--" on the command line and SIGUSR1 from anyone but
# the supervisor change nothing.
#   test_supervise_config.sh BUILD_DIR
set -uo pipefail
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d /tmp/gbsupcfg.XXXXXX)
SUP=""
trap '[ -n "$SUP" ] && { pkill -KILL -P $SUP 2>/dev/null; kill -KILL $SUP 2>/dev/null; }; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
EP="ipc://$T/b.sock"
GBCTL="$BUILD/client/gbctl"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\narena_mb = 64;\n' "$EP" > "$T/b.cfg"
"$BUILD/bridge/gpubridge" --config "$T/b.cfg" --supervise -- 2> "$T/sup.log" &
SUP=$!
up() { "$GBCTL" --endpoint "$EP" --timeout 1000 list >/dev/null 2>&1; }
worker() { local c; c=$(cat "/proc/$SUP/task/$SUP/children" 2>/dev/null); echo "${c%% *}"; }
serves() { # a vecadd request answered right
  local out
  out=$("$GBCTL" --endpoint "$EP" --timeout 20000 send vecadd 7 add 1,2,3 10,20,30 2>&1) &&
    grep -q "11" <<< "$out"
}
replace_worker() { # kills the worker; waits for a new one that serves
  local w=$1
  [ -n "$w" ] || { echo "no worker to kill"; return 1; }
  kill -KILL "$w"
  for _ in $(seq 300); do
    local n
    n=$(worker)
    [ -n "$n" ] && [ "$n" != "$w" ] && up && return 0
    sleep 0.1
  done
  return 1
}
for _ in $(seq 100); do up && break; sleep 0.1; done
up || { cat "$T/sup.log"; echo "FAIL: not serving"; exit 1; }
grep -q "supervisor: workers load the config it runs (from $T/b.cfg)" "$T/sup.log" ||
  fail "the supervisor did not say where workers load their config: $(grep supervisor "$T/sup.log")"
copy=$(sed -n 's/.*workers load the config it runs .*, kept in \(.*\)$/\1/p' "$T/sup.log")
[ -f "$copy" ] || fail "no config copy at '$copy'"

# 1. A broken file: SIGHUP is refused, and a worker started after it serves
# with the running config.
printf 'endpoints = [ "%s" ];\nmode = "cpu"\narena_mb = ;\n' "$EP" > "$T/b.cfg"
kill -HUP $SUP
for _ in $(seq 100); do grep -q "keeps the running configuration" "$T/sup.log" && break; sleep 0.1; done
grep -q "supervisor: reload: .*b.cfg.*; the running configuration stays" "$T/sup.log" ||
  fail "the refused reload was not said: $(grep reload "$T/sup.log")"
grep -q "supervisor: the worker keeps the running configuration" "$T/sup.log" ||
  fail "the supervisor did not say the worker keeps its config"
! grep -q "SIGHUP passed to worker" "$T/sup.log" || fail "a refused reload was passed to the worker"
for _ in $(seq 50); do grep -q "reload: the supervisor could not load the config file" "$T/sup.log" && break; sleep 0.1; done
grep -q "error.*reload: the supervisor could not load the config file" "$T/sup.log" ||
  fail "the worker did not count the refused reload"
W1=$(worker)
replace_worker "$W1" || fail "no worker serves after the file broke: $(tail -5 "$T/sup.log")"
serves || fail "a worker started after the file broke does not serve"
! grep -q "exit 2" "$T/sup.log" || fail "a worker failed to start: $(grep -m3 'exit 2\|gpubridge:' "$T/sup.log")"

# 2. A file with a restart-only change and a reloadable one: the reloadable
# one reaches the worker; the restart-only one is named, and a restarted
# worker still runs without it.
printf 'endpoints = [ "%s" ];\nmode = "cpu";\narena_mb = 96;\nlog_level = "diag";\n' "$EP" > "$T/b.cfg"
kill -HUP $SUP
for _ in $(seq 100); do grep -q "reload: log_level info -> diag" "$T/sup.log" && break; sleep 0.1; done
grep -q "SIGHUP passed to worker" "$T/sup.log" || fail "a good reload was not passed to the worker"
grep -q "reload: log_level info -> diag" "$T/sup.log" || fail "the worker did not take the new log level"
grep -q "supervisor: reload: arena_mb changed; it takes effect only after a restart" "$T/sup.log" ||
  fail "the supervisor did not name arena_mb: $(grep reload "$T/sup.log")"
grep -q "^arena_mb = 64;" "$copy" || fail "the workers' config took a restart-only key: $(grep arena "$copy")"
grep -q '^log_level = "diag";' "$copy" || fail "the workers' config lacks the reloaded log level"
W2=$(worker)
replace_worker "$W2" || fail "no worker serves after the second restart"
serves || fail "the third worker does not serve"

# 3. A grain library the file names that does not exist: the reload is
# refused (a restart would refuse the file), and a restarted worker serves.
printf 'endpoints = [ "%s" ];\nmode = "cpu";\narena_mb = 64;\ngrains = ( { library = "%s/nope.so"; } );\n' \
  "$EP" "$T" > "$T/b.cfg"
kill -HUP $SUP
for _ in $(seq 100); do grep -q "grains\[0\].library: cannot open" "$T/sup.log" && break; sleep 0.1; done
grep -q "supervisor: reload: $T/b.cfg:4: grains\[0\].library: cannot open '$T/nope.so': No such file or directory; the running configuration stays" "$T/sup.log" ||
  fail "the missing library was not refused: $(grep reload "$T/sup.log" | tail -3)"
W3=$(worker)
replace_worker "$W3" || fail "no worker serves after a missing library was named"
serves || fail "the fourth worker does not serve"
! grep -q "nope.so" "$copy" || fail "the workers' config names the missing library"

# 4. The copy removed (a /tmp cleaner): written again for the next worker.
rm -f "$copy"
W4=$(worker)
replace_worker "$W4" || fail "no worker serves after the copy was removed: $(tail -3 "$T/sup.log")"
[ -f "$copy" ] || fail "the copy was not written again"

# 5. SIGUSR1 from anyone but the supervisor: the supervisor ignores it, the
# worker does not count it as a refused reload.
n_refused=$(grep -c "reload: the supervisor could not load" "$T/sup.log")
kill -USR1 $SUP
kill -USR1 "$(worker)"
sleep 0.5
kill -0 $SUP 2>/dev/null || fail "SIGUSR1 ended the supervisor"
serves || fail "not serving after SIGUSR1"
[ "$(grep -c "reload: the supervisor could not load" "$T/sup.log")" = "$n_refused" ] ||
  fail "a SIGUSR1 from outside counted as a refused reload"

# SIGTERM: both stop, exit 0, and nothing is left in the private directory.
dir=$(dirname "$copy")
kill -TERM $SUP
wait $SUP
rc=$?
SUP=""
[ $rc = 0 ] || fail "the supervisor exited $rc"
[ ! -e "$dir" ] || fail "the worker's directory is left: $(ls -la "$dir")"
# A config named without a folder, from its folder, naming a library by a
# relative path: the workers' copy names it by its full path.
LIB="$BUILD/tests/grains/libgbt_counter.so"
if [ -f "$LIB" ]; then
  mkdir -p "$T/rel/lib"
  cp "$LIB" "$T/rel/lib/"
  EP2="ipc://$T/rel.sock"
  printf 'endpoints = [ "%s" ];\nmode = "cpu";\ngrains = ( { library = "lib/libgbt_counter.so"; } );\n' "$EP2" \
    > "$T/rel/r.cfg"
  (cd "$T/rel" && exec "$BUILD/bridge/gpubridge" --config r.cfg --supervise) 2> "$T/rel.log" &
  SUP=$!
  ok=0
  for _ in $(seq 100); do
    out=$("$GBCTL" --endpoint "$EP2" --timeout 1000 send test.counter 5 1 0500000000000000 2>&1) && { ok=1; break; }
    sleep 0.1
  done
  [ $ok = 1 ] || fail "a relative library under --supervise: $out $(grep -m3 'cannot load\|gpubridge:' "$T/rel.log")"
  kill -TERM $SUP
  wait $SUP
  SUP=""
else
  fail "no $LIB"
fi
if [ $fails = 0 ]; then echo "PASS: supervised workers run the supervisor's config"; exit 0; fi
cat "$T/sup.log" | tail -30
exit 1
