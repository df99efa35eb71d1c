#!/usr/bin/env bash
# End to end: a live bridge in MODE (cpu in CI; persistent / relaunch on a GPU
# machine), the pagerank driver against it on graphs with dangling vertices,
# self-loops and duplicate edges, the shipped karate graph and a Kronecker
# scale-12 graph, each checked against networkx (L1 <= 1e-4); two drivers
# at once on different graphs, both exact; malformed inputs give
# line-numbered errors (binary bytes escaped, a directory named); chunks
# larger than a slot are carried (out of line) and the bridge keeps serving;
# an arena too small gets an error naming it; SIGTERM stops it with exit 0.
# Graphs a stranger may give (one vertex, huge or sparse ids, CRLF, tabs, a
# byte order mark, a 100k in-degree hub, a chain, a star, damping 0 to
# 0.999), each against networkx; every kind of bad line named; bad option
# values; files written whole or not at all (size limit, unwritable path,
# not converged, stdout closed).
#   test_pagerank_e2e.sh BUILD_DIR SOURCE_DIR MODE
# Exit 77 (skipped) for GPU modes without a GPU.
set -uo pipefail
BUILD=$1 SRC=$2 MODE=$3
if [ "$MODE" != cpu ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU for mode $MODE"; exit 77
fi
PY=""
for p in ${GB_PYTHON:-} /usr/bin/python3 python3; do
  if "$p" -c 'import networkx' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "FAIL: no python with networkx (scripts/setup installs python3-networkx)"; exit 1; }

T=$(mktemp -d /tmp/gbpr.XXXXXX)
SOCK="ipc://$T/bridge.sock"
cat > "$T/bridge.cfg" <<CFG
endpoints = [ "$SOCK" ];
mode = "$MODE";
arena_mb = 256;
CFG
# GB_E2E_DEVICES (e.g. "[0, 1]"): the bridge spreads the grains over those
# devices, and each job's partitions with them.
[ -n "${GB_E2E_DEVICES:-}" ] && echo "devices = $GB_E2E_DEVICES;" >> "$T/bridge.cfg"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$BUILD/bridge/gpubridge" --config "$T/bridge.cfg" 2> "$T/bridge.log" &
PID=$!
cleanup() { kill -KILL $PID ${PID2:-} 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
for _ in $(seq 200); do
  "$BUILD/client/gbctl" --endpoint "$SOCK" --timeout 200 list >/dev/null 2>&1 && break
  kill -0 $PID 2>/dev/null || { cat "$T/bridge.log"; echo "FAIL: bridge did not start"; exit 1; }
  sleep 0.1
done
PR="$BUILD/examples/pagerank/pagerank"

run_check() { # name, then driver args; the edge list is written to $T/name.edges
  local name=$1
  shift
  if ! "$PR" -e "$SOCK" -q -k 3 -o "$T/$name.ranks" -w "$T/$name.edges" "$@" > "$T/$name.out" 2>&1; then
    cat "$T/$name.out"; fail "$name: the driver failed"; return
  fi
  head -2 "$T/$name.out"
  if ! "$PY" "$SRC/examples/pagerank/check_networkx.py" "$T/$name.edges" "$T/$name.ranks"; then
    fail "$name: ranks differ from networkx"
  fi
}

printf '# dangling 5 6 7, self-loops 2 4, duplicates 1->2 and 4->4\n1 2\n1 2\n2 2\n3 1\n3 2\n2 1\n4 4\n4 4\n4 1\n5 1\n6 7\n1 3\n' > "$T/small.txt"
run_check small -g "$T/small.txt" -p 3
run_check karate -g "$SRC/examples/pagerank/data/karate.txt"
run_check kron12 --kron 12 --edgefactor 16 --seed 3
run_check kron12_few -g "$T/kron12.edges" -p 5   # the same graph through the edge-list reader, 5 partitions
run_check kron12_two -g "$T/kron12.edges" --two-rounds   # a senders' round every iteration
run_check kron12_first -g "$T/kron12.edges" --first-device   # several devices: every partition on the first

# Drivers at once on one bridge, different graphs: each is a job of its own,
# and every one must match networkx. A runs a larger graph while B runs three
# smaller ones, one after the other (so that B's loads fall into A's
# iterations), and C runs beside both. Each runs 80 iterations (a tolerance
# never met), so that they overlap long.
LONG="-t 1e-12 -m 80 --allow-unconverged"
"$PR" -e "$SOCK" -q -k 3 -o "$T/ja.ranks" -w "$T/ja.edges" --kron 14 --seed 11 $LONG > "$T/ja.out" 2>&1 &
pa=$!
"$PR" -e "$SOCK" -q -k 3 -o "$T/jc.ranks" -w "$T/jc.edges" --kron 13 --seed 12 -p 5 $LONG > "$T/jc.out" 2>&1 &
pc=$!
( for i in 1 2 3; do
    "$PR" -e "$SOCK" -q -k 3 -o "$T/jb$i.ranks" -w "$T/jb$i.edges" --kron 11 --edgefactor 8 --seed $((20 + i)) \
      -p 3 $LONG > "$T/jb$i.out" 2>&1 || echo "exit $?" >> "$T/jb$i.out"
  done ) &
pb=$!
wait $pa; ra=$?
wait $pc; rc_=$?
wait $pb
[ $ra = 0 ] || { cat "$T/ja.out"; fail "concurrent driver a: exit $ra"; }
[ $rc_ = 0 ] || { cat "$T/jc.out"; fail "concurrent driver c: exit $rc_"; }
for j in a c b1 b2 b3; do
  if grep -q "^exit" "$T/j$j.out"; then
    cat "$T/j$j.out"; fail "concurrent driver $j failed"
  elif ! "$PY" "$SRC/examples/pagerank/check_networkx.py" "$T/j$j.edges" "$T/j$j.ranks"; then
    fail "concurrent driver $j: ranks differ from networkx"
  fi
done

# Graphs a stranger may give, read as they are (check_networkx.py reads the
# same file): each within networkx's ranks.
run_file() { # name, file, then driver args
  local name=$1 file=$2
  shift 2
  if ! "$PR" -e "$SOCK" -q -k 3 -o "$T/$name.ranks" -g "$file" "$@" > "$T/$name.out" 2>&1; then
    cat "$T/$name.out"; fail "$name: the driver failed"; return
  fi
  local damping=0.85
  [ "${1:-}" = -d ] && damping=$2
  "$PY" "$SRC/examples/pagerank/check_networkx.py" "$file" "$T/$name.ranks" --damping $damping \
    || fail "$name: ranks differ from networkx"
}
printf '5 5\n' > "$T/one.txt"                        # a single vertex (a self-loop)
printf '0 1\n' > "$T/two.txt"                        # two vertices, one dangling
printf '0 10000000\n' > "$T/sparse.txt"              # sparse ids
printf '18446744073709551615 9223372036854775808\n4294967296 18446744073709551615\n' > "$T/bigids.txt"
printf '\xef\xbb\xbf# Universit\xe9 (Latin-1)\r\n\r\n10\t20\r\n  20   30 \t\r\n%% c\n30 10 \n\t40 10\n' > "$T/fmt.txt"
printf '0 1\n1 0\n2 3\n3 4\n5 5\n6 7\n6 7\n' > "$T/parts.txt"   # components, a loop, a duplicate
printf '# exported\r5 6\n1 2\n2 3\n3 1\n' > "$T/crnote.txt"    # a lone \r inside a comment: still the comment
awk 'BEGIN { for (i = 1; i <= 100000; i++) print i, 0; print 0, 1 }' > "$T/hub.txt"   # 100k in-edges
awk 'BEGIN { for (i = 0; i < 3000; i++) print i, i + 1 }' > "$T/chain.txt"
awk 'BEGIN { for (i = 1; i <= 500; i++) print 0, i }' > "$T/star.txt"
for f in one two sparse bigids fmt parts crnote hub chain star; do
  run_file "$f" "$T/$f.txt" -p 3
done
run_file one1 "$T/one.txt"        # more partitions asked than vertices
run_file damp0 "$T/parts.txt" -d 0
run_file damp5 "$T/star.txt" -d 0.5
# A damping near 1 magnifies the step into the error (d / (1 - d)): the
# driver iterates on until the ranks meet --max-error.
run_check k4 --kron 12 --edgefactor 4 -p 3
run_file damp999 "$T/k4.edges" -d 0.999
# Ranks that stop changing in float32 short of --max-error: the message
# names the rounding, not a wrong PageRank.
out=$("$PR" -e "$SOCK" -q -g "$T/star.txt" --damping 0.999999 2>&1); rc=$?
[ $rc = 1 ] && grep -q "stopped changing in float32 .* raise --max-error to at least" <<<"$out" \
  || fail "rounding floor at step 0: rc $rc, '$out'"
# A --max-error below float32's rounding on a graph that converges at once:
# the same advice, not "not this graph's PageRank".
printf '0 1\n1 2\n2 0\n' > "$T/cycle3.txt"
out=$("$PR" -e "$SOCK" -q -g "$T/cycle3.txt" --max-error 1e-20 2>&1); rc=$?
[ $rc = 1 ] && grep -q "raise --max-error to at least" <<<"$out" && ! grep -q "not this graph" <<<"$out" \
  || fail "max-error below the rounding: rc $rc, '$out'"
# ... and on one that converges by the stopping rule at a damping near 1.
out=$("$PR" -e "$SOCK" -q -g "$T/k4.edges" -d 0.99 --max-error 5e-7 -m 10000 2>&1); rc=$?
[ $rc = 1 ] && grep -q "raise --max-error to at least" <<<"$out" && ! grep -q "not this graph" <<<"$out" \
  || fail "max-error below the rounding, damping 0.99: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" --damping 1 2>&1); rc=$?
[ $rc = 2 ] && grep -q "bad value '1' for --damping" <<<"$out" || fail "damping 1: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" --damping 0x0.8 2>&1); rc=$?   # decimal only
[ $rc = 2 ] && grep -q "bad value '0x0.8' for --damping" <<<"$out" || fail "hex damping: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" --damping 1e-400 --tolerance 1e-320 2>&1); rc=$?   # underflow: 0, subnormal
[ $rc = 0 ] || fail "damping and tolerance that underflow: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" --tolerance 1e400 2>&1); rc=$?
[ $rc = 2 ] && grep -q "bad value '1e400' for --tolerance" <<<"$out" || fail "tolerance 1e400: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" stray 2>&1); rc=$?
[ $rc = 2 ] && grep -q "unexpected argument 'stray'" <<<"$out" || fail "stray argument: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" --max-error 0 2>&1); rc=$?
[ $rc = 2 ] && grep -q "for --max-error" <<<"$out" || fail "max-error 0: rc $rc, '$out'"
out=$("$PR" -e "ipc://$T/none.sock" -q -g "$T/two.txt" 2>&1); rc=$?   # no bridge there: said at once
[ $rc = 1 ] && grep -qF "no bridge at ipc://$T/none.sock: $T/none.sock: No such file or directory" <<<"$out" \
  || fail "no bridge: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q --kron 30 --edgefactor 1024 2>&1); rc=$?   # 17 TB: refused before allocating
[ $rc = 1 ] && grep -q -- "--kron 30 --edgefactor 1024 needs about 16[0-9]*\.[0-9] GiB of memory; this host has" <<<"$out" \
  || fail "kron past the host's memory: rc $rc, '$out'"
# SIGINT before the job starts (generating a graph, waiting for a bridge
# that is not there) stops the driver at once, its temporary files removed.
"$PR" -e tcp://127.0.0.1:1 --kron 20 -o "$T/int.ranks" > "$T/int.out" 2>&1 &
pi=$!
sleep 0.3
kill -INT $pi
wait $pi; rc=$?
[ $rc = 1 ] && grep -q "^pagerank: interrupted" "$T/int.out" && ! grep -q "no usable" "$T/int.out" \
  && ! ls "$T"/int.ranks* >/dev/null 2>&1 || { cat "$T/int.out"; fail "SIGINT before the job: rc $rc"; }
out=$("$PR" -e "$SOCK" -q -g "$T/two.txt" -o '' 2>&1); rc=$?
[ $rc = 2 ] && grep -q -- "--ranks needs a value" <<<"$out" || fail "empty --ranks path: rc $rc, '$out'"
n=$("$PR" -e "$SOCK" -q -g "$T/star.txt" --top 010 | grep -c '^  [0-9]')   # decimal, not octal
[ "$n" = 10 ] || fail "--top 010 printed $n vertices"

# Files are written whole or not at all: past the size limit the write fails
# (said, exit 1), the old file stays as it was, no temporary file is left;
# a path that cannot be written fails before any work.
echo old > "$T/keep.ranks"
out=$(ulimit -f 8; "$PR" -e "$SOCK" -q -k 0 --kron 12 -o "$T/keep.ranks" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "keep.ranks: write failed: File too large" <<<"$out" && [ "$(cat "$T/keep.ranks")" = old ] \
  && ! ls "$T"/keep.ranks.tmp.* >/dev/null 2>&1 || fail "ranks past the size limit: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -k 0 -g "$T/two.txt" -o "$T/no/such/dir/r" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "no/such/dir/r: cannot write" <<<"$out" && ! grep -q "converged" <<<"$out" \
  || fail "unwritable ranks path: rc $rc, '$out'"
"$PR" -e "$SOCK" -q -k 1000 -g "$T/star.txt" -o "$T/pipe.ranks" 2>&1 | :   # stdout closed early
rc=${PIPESTATUS[0]}
[ $rc = 0 ] && [ -s "$T/pipe.ranks" ] && ! ls "$T"/pipe.ranks.tmp.* >/dev/null 2>&1 || fail "stdout closed: rc $rc"
out=$("$PR" -e "$SOCK" -q -k 0 -g "$T/chain.txt" -m 2 -o "$T/nc.ranks" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "not converged within 2 iterations" <<<"$out" && [ ! -e "$T/nc.ranks" ] \
  || fail "not converged: rc $rc, '$out'"
# --ranks naming the file stdout writes: the ranks follow the summary there
# (a second open of the path would truncate it, and stdout would write the
# summary over the ranks).
"$PR" -e "$SOCK" -q -k 0 -g "$T/parts.txt" -o /dev/stdout > "$T/so.txt" 2> "$T/so.err"; rc=$?
[ $rc = 0 ] && grep -q "^pagerank: 8 vertices" "$T/so.txt" \
  && [ "$(sed -n '/^# vertex pagerank$/,$p' "$T/so.txt" | grep -c '^[0-9]* [0-9.e-]*$')" = 8 ] \
  || { cat "$T/so.txt" "$T/so.err"; fail "--ranks /dev/stdout into a file: rc $rc"; }
# SIGHUP (the driver's terminal closed) ends the job as SIGTERM does: exit 1,
# no ranks file nor temporary file, and the job's slice freed on the bridge.
"$PR" -e "$SOCK" -k 0 -g "$T/chain.txt" -d 0.999 -t 1e-15 -m 1000000 -o "$T/hup.ranks" > "$T/hup.out" 2> "$T/hup.err" &
ph=$!
for i in $(seq 600); do grep -q "(job [0-9]*)" "$T/hup.err" && break; sleep 0.05; done
kill -HUP $ph
wait $ph; rc=$?
job=$(sed -n 's/.*(job \([0-9]*\)).*/\1/p' "$T/hup.err")
out=$("$BUILD/client/gbctl" --endpoint "$SOCK" send pagerank.aggregator "$("$PY" -c "print(${job:-0} << 32)")" 14 1001 2>&1)
[ $rc = 1 ] && [ -n "$job" ] && grep -q "interrupted" "$T/hup.err" && ! ls "$T"/hup.ranks* >/dev/null 2>&1 \
  && grep -q "job $job has no graph" <<<"$out" || { cat "$T/hup.err"; fail "SIGHUP: rc $rc, job '$job', '$out'"; }

# A GraphInit whose reply does not come in time (--timeout 1: laying out 2M
# vertices takes longer) may still be carried out: the driver ends the job
# all the same, and the bridge holds no slice for it.
awk 'BEGIN { for (i = 0; i < 2000000; i++) print i, i + 1 }' > "$T/chain2m.txt"
# (Control requests wait at least 1 s; a few tries, for a loaded machine.)
for try in 1 2 3 4 5; do
  out=$("$PR" -e "$SOCK" -q -g "$T/chain2m.txt" --timeout 1 2>&1); rc=$?
  job=$(sed -n 's/.*GraphInit .* failed: timed out.*(job \([0-9]*\))$/\1/p' <<<"$out")
  [ -n "$job" ] || [ $rc = 0 ] && break
done
if [ -n "$job" ]; then
  sleep 0.5 # the GraphInit and the JobEnd behind it, if the JobEnd too timed out
  q=$("$BUILD/client/gbctl" --endpoint "$SOCK" send pagerank.aggregator "$("$PY" -c "print($job << 32)")" 14 1001 2>&1)
  [ $rc = 1 ] && grep -q "job $job has no graph" <<<"$q" || fail "GraphInit timed out: rc $rc, '$out', then '$q'"
elif [ $rc = 0 ] && [ "$MODE" = cpu ]; then
  fail "GraphInit of 2M vertices within 1 ms: '$out'"
else
  echo "note: no GraphInit timed out in 5 tries (last: rc $rc, '$out'): not checked"
fi
rm -f "$T/chain2m.txt"

# A damping near 1 on a star: float32 ranks reach their rounding floor above
# the goal and the step stops shrinking. The run stops there, not at
# --max-iter: with the bound past --max-error it says which --max-error would
# pass (exit 1, no file); with that raised it exits 0 within it of networkx.
printf '0 1\n1 0\n0 2\n2 0\n' > "$T/stall.txt"
out=$("$PR" -e "$SOCK" -q -k 0 -g "$T/stall.txt" -d 0.99 -m 100000 -o "$T/stall.ranks" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "stopped shrinking at .* raise --max-error to at least" <<<"$out" && [ ! -e "$T/stall.ranks" ] \
  || fail "stalled step, bound past --max-error: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -k 0 -g "$T/stall.txt" -d 0.99 -m 100000 --max-error 1e-3 -o "$T/stall.ranks" 2>&1); rc=$?
[ $rc = 0 ] && grep -q "stopped at the float32 rounding floor after" <<<"$out" \
  && "$PY" "$SRC/examples/pagerank/check_networkx.py" --damping 0.99 --max-l1 1e-4 "$T/stall.txt" "$T/stall.ranks" >/dev/null \
  || fail "stalled step within --max-error: rc $rc, '$out'"
# --tolerance 0 ends at a step of 0 or at the floor, never at --max-iter.
out=$("$PR" -e "$SOCK" -q -k 0 -g "$T/star.txt" -t 0 -m 100000 2>&1); rc=$?
[ $rc = 0 ] || fail "tolerance 0: rc $rc, '$out'"

# Malformed inputs: line-numbered errors, exit 1.
printf '# ok\n1 2\n3 x\n' > "$T/bad.txt"
out=$("$PR" -e "$SOCK" -q -g "$T/bad.txt" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "bad.txt:3:" <<<"$out" || fail "malformed line: rc $rc, '$out'"
printf '1 2 3\n' > "$T/bad3.txt"
out=$("$PR" -e "$SOCK" -q -g "$T/bad3.txt" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "bad3.txt:1:" <<<"$out" || fail "three fields: rc $rc, '$out'"
out=$("$PR" -e "$SOCK" -q -g "$T/missing.txt" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "missing.txt" <<<"$out" || fail "missing file: rc $rc, '$out'"
printf '1 2\n\033[2J\377 3\n' > "$T/binary.txt"   # bytes a terminal would act on
out=$("$PR" -e "$SOCK" -q -g "$T/binary.txt" 2>&1); rc=$?
[ $rc = 1 ] && grep -qF 'binary.txt:2:' <<<"$out" && grep -qF '\x1b[2J\xff 3' <<<"$out" && ! grep -q $'\033' <<<"$out" \
  || fail "binary line: rc $rc, '$out'"
bad_line() { # name, content (printf), then what the error must say
  printf "$2" > "$T/$1.txt"
  out=$("$PR" -e "$SOCK" -q -g "$T/$1.txt" 2>&1); rc=$?
  [ $rc = 1 ] && grep -qF "$T/$1.txt$3" <<<"$out" || fail "$1: rc $rc, '$out'"
}
bad_line neg '1 2\n3 -4\n' ":2: '-4' is negative"
bad_line onecol '1 2\n\n7\n' ":3: expected two vertex ids 'source target' separated by blanks, found 1 field"
bad_line weighted '1 2 0.5\n' ":1: expected two vertex ids 'source target' separated by blanks, found 3 fields"
bad_line over64 '1 18446744073709551616\n' ":1: vertex id '18446744073709551616' is out of range"
bad_line letters 'a b\n' ":1: 'a' is not a vertex id"
bad_line cr '1 2\r3 4\r' ":1: a carriage return before or between the ids"
bad_line empty '' ": no edges"
bad_line onlycomments '# nothing\n\n' ": no edges"
out=$("$PR" -e "$SOCK" -q -g "$T" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "is a directory" <<<"$out" || fail "directory: rc $rc, '$out'"
# Endless bytes that are not text: refused at its first bad line, not read
# until memory ends.
out=$(timeout 30 "$PR" -e "$SOCK" -q -g /dev/urandom 2>&1); rc=$?
[ $rc = 1 ] && grep -q "^pagerank: /dev/urandom:[0-9]*: " <<<"$out" || fail "/dev/urandom: rc $rc, '${out:0:200}'"
out=$("$PR" -e "$SOCK" -q --kron 12 --damping 2 2>&1); rc=$?
[ $rc = 2 ] || fail "bad damping: rc $rc, '$out'"
# Chunks larger than the grains' slot: carried out of line, ranks still right
# (scale 13: rank queries of 8,192 vertices, past the 8,000 a slot's reply holds).
run_check bigchunk --kron 13 --edgefactor 4 --seed 5 -p 1 --chunk 100000
# --chunk past what one message may carry (1 MiB frames): each message takes
# what the bridge's limits allow (400,001 offsets, about 1.2 MB, and a rank
# query of 400,001 ranks were refused before, after all the iterations).
awk 'BEGIN { for (i = 0; i < 400000; i++) print i, i + 1 }' > "$T/chain400k.txt"
run_file maxchunk "$T/chain400k.txt" -p 1 --chunk 1048576
# ... and it still serves small ones.
run_check again -g "$T/small.txt" -p 2

# An arena too small for the graph: the error names the arena, the MiB
# needed and the key to raise; the bridge logs it and serves on.
# The same bridge has room for few activations (max_grains = 8): runs one
# after the other, each with as many partitions as vertices, must release
# their grains (DeactivateGrain after JobEnd), or the table fills within the
# collection age and every later GraphInit gets STATUS_BUSY. Its frames
# are at most 4 KiB (max_message_size): the driver's client sends none
# larger, and its chunks fit them.
SOCK2="ipc://$T/small.sock"
printf 'endpoints = [ "%s" ];\nmode = "%s";\narena_mb = 1;\nmax_message_size = 4096;\ngrains = ( { type = "pagerank.sender"; max_grains = 8; },
  { type = "pagerank.aggregator"; max_grains = 8; } );\n' "$SOCK2" "$MODE" > "$T/small.cfg"
"$BUILD/bridge/gpubridge" --config "$T/small.cfg" 2> "$T/small.log" &
PID2=$!
for _ in $(seq 200); do
  "$BUILD/client/gbctl" --endpoint "$SOCK2" --timeout 200 list >/dev/null 2>&1 && break
  sleep 0.1
done
out=$("$PR" -e "$SOCK2" -q --kron 14 2>&1); rc=$?
[ $rc = 1 ] && grep -q "STATUS_HANDLER_ERROR" <<<"$out" && grep -q "needs a PageRank arena of [0-9]* MiB" <<<"$out" \
  && grep -q "arena is 1 MiB" <<<"$out" && grep -q "raise arena_mb" <<<"$out" || fail "small arena: rc $rc, '$out'"
grep -q "PageRank job .* refused: the graph needs" "$T/small.log" || fail "small arena: nothing in the bridge's log"
out=$("$PR" -e "$SOCK2" -q -g "$T/small.txt" 2>&1) || fail "small arena, small graph: '$out'"
if "$PR" -e "$SOCK2" -q -k 0 -g "$T/k4.edges" -p 4 -o "$T/k4small.ranks" > "$T/k4small.out" 2>&1; then
  "$PY" "$SRC/examples/pagerank/check_networkx.py" "$T/k4.edges" "$T/k4small.ranks" \
    || fail "frames of 4 KiB: ranks differ from networkx"
else
  cat "$T/k4small.out"; fail "frames of 4 KiB: the driver failed"
fi
for i in $(seq 16); do
  out=$("$PR" -e "$SOCK2" -q -k 0 -g "$T/small.txt" -p 7 2>&1) || { fail "max_grains 8, run $i of 16: '$out'"; break; }
done
kill -TERM $PID2; wait $PID2

kill -TERM $PID
wait $PID; rc=$?
[ $rc = 0 ] || { tail -5 "$T/bridge.log"; fail "bridge exit $rc after SIGTERM"; }
if [ $fails = 0 ]; then echo "PASS: pagerank end to end, mode $MODE"; exit 0; fi
echo "$fails failure(s)"; exit 1
