#!/usr/bin/env bash
# Command lines. gbctl: keys, message types and timeouts are decimal ("010"
# is 10; no hex "0x10", sign or spaces, which strtoull would take), an
# empty grain type is a usage error (exit 2), and a good command still works.
# gpubridge: a grain type in the config that nothing defines (a misspelt
# name) is warned of by --check-config and at start, and refused per request.
#   test_cli.sh BUILD_DIR
set -uo pipefail
BUILD=$1
T=$(mktemp -d /tmp/gbctl.XXXXXX)
B=""
trap '[ -n "$B" ] && kill -KILL $B 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
EP="ipc://$T/b.sock"
printf 'endpoints = [ "%s" ];\nmode = "cpu";\ngrains = ( { type = "ecoh"; } );\n' "$EP" > "$T/b.cfg"
out=$("$BUILD/bridge/gpubridge" --config "$T/b.cfg" --check-config 2>&1) || fail "--check-config: exit $?: $out"
grep -qF "gpubridge: warning: grain type 'ecoh' is not built in and no grain library defines it" <<< "$out" ||
  fail "--check-config did not warn of the misspelt type: $out"
# An unknown GPUBRIDGE_MODE fails --check-config as it fails the start (exit 2).
out=$(GPUBRIDGE_MODE=bogus "$BUILD/bridge/gpubridge" --config "$T/b.cfg" --check-config 2>&1); rc=$?
[ $rc = 2 ] && grep -qF "GPUBRIDGE_MODE: unknown mode 'bogus'" <<< "$out" || fail "GPUBRIDGE_MODE=bogus --check-config: exit $rc: $out"
"$BUILD/bridge/gpubridge" --config "$T/b.cfg" 2> "$T/b.log" &
B=$!
ctl() { "$BUILD/client/gbctl" --endpoint "$EP" --timeout 5000 "$@"; }
for _ in $(seq 100); do ctl list > /dev/null 2>&1 && break; sleep 0.1; done
ctl list > /dev/null 2>&1 || { tail -5 "$T/b.log"; echo "FAIL: not serving"; exit 1; }

usage() { # expects exit 2 and a line naming what is wrong
  local want=$1
  shift
  local out rc
  out=$(ctl "$@" 2>&1)
  rc=$?
  [ $rc = 2 ] || fail "gbctl $*: exit $rc, not 2: $out"
  grep -qF "$want" <<< "$out" || fail "gbctl $*: no '$want' in: $out"
}
for key in 0x10 +5 " 5" -1 "" 18446744073709551616 5x; do
  usage "key '$key' is not an unsigned decimal integer below 2^64" send echo "$key" hi
done
usage "expected a message type number" send some.type 1 0x1
usage "send echo KEY TEXT, or send echo KEY MSGTYPE HEX" send echo 1
usage "send vecadd KEY OP A B, or send vecadd KEY MSGTYPE [HEX]" send vecadd 1 add 1,2
usage "expected a message type number" send some.type 1 +1
for cmd in status telemetry activate deactivate terminate; do
  usage "'$cmd': the grain type is empty" $cmd ""
done
usage "'send': the grain type is empty" send "" 1
out=$("$BUILD/client/gbctl" --endpoint "$EP" --timeout 0x10 list 2>&1); rc=$?
[ $rc = 2 ] || fail "--timeout 0x10: exit $rc: $out"

out=$(ctl send echo 18446744073709551615 hello 2>&1) || fail "the largest key: $out"
grep -q "hello" <<< "$out" || fail "echo with the largest key: $out"
# Leading zeros are decimal too: 010 is key 10, not octal 8. Echo counts
# the messages each grain got.
out=$(ctl send echo 10 hi 2>&1) || fail "key 10: $out"
grep -q "grain count 1," <<< "$out" || fail "key 10, first message: $out"
out=$(ctl send echo 010 hi 2>&1) || fail "key 010: $out"
grep -q "grain count 2," <<< "$out" || fail "key 010 is not key 10: $out"
# The generic form works for the built-in types too: echo with MSGTYPE HEX
# (EchoRequest{sequence 5, data "hi"}), vecadd with MSGTYPE alone (empty vectors).
out=$(ctl send echo 12 1 080512026869 2>&1) || fail "generic send to echo: $out"
grep -q "^STATUS_OK, message type 2, 8 bytes: 080512026869" <<< "$out" || fail "generic send to echo: $out"
out=$(ctl send vecadd 12 1 2>&1) && grep -q "^STATUS_OK, message type 2, 0 bytes" <<< "$out" \
  || fail "generic send to vecadd, no payload: $out"
ctl status echo > /dev/null || fail "status echo after the bad commands"
grep -q "warn .*grain type 'ecoh' is not built in and no grain library defines it" "$T/b.log" ||
  fail "no WARN at start for the misspelt type: $(grep ecoh "$T/b.log")"
out=$(ctl send ecoh 1 1 2>&1) && fail "a request to the misspelt type was served: $out"
ctl send echo 11 still > /dev/null || fail "not serving after a request to the misspelt type"
kill -TERM $B
wait $B || fail "the bridge exited $?"
B=""
# A frame the bridge refuses whole (here: over max_message_size) is gbctl's
# own: its one frame in flight. The refusal is reported at once, not as a
# timeout.
printf 'endpoints = [ "%s" ];\nmode = "cpu";\nmax_message_size = 64;\n' "$EP" > "$T/s.cfg"
"$BUILD/bridge/gpubridge" --config "$T/s.cfg" 2> "$T/s.log" &
B=$!
for _ in $(seq 100); do ctl list > /dev/null 2>&1 && break; sleep 0.1; done
t0=$(date +%s%N)
out=$("$BUILD/client/gbctl" --endpoint "$EP" --timeout 20000 send echo 1 "$(printf 'x%.0s' $(seq 100))" 2>&1); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 1 ] && grep -q "STATUS_TOO_LARGE" <<< "$out" && grep -q "exceeds max_message_size (64)" <<< "$out" \
  || fail "frame over max_message_size: exit $rc after $ms ms: $out"
[ $ms -lt 10000 ] || fail "frame over max_message_size: reported after $ms ms, as a timeout would be"
kill -TERM $B
wait $B || fail "the small bridge exited $?"
B=""
# A peer that answers without end (batches of replies to ids never sent)
# does not keep gbctl past its deadline.
/usr/bin/python3 - "ipc://$T/flood.sock" <<'PY' > "$T/flood.log" 2>&1 &
import sys, time, zmq
s = zmq.Context().socket(zmq.ROUTER)
s.bind(sys.argv[1])
ident = s.recv_multipart()[0]
reply = bytes([0x0a, 0x03, 0x08, 0xe7, 0x07])  # Reply{correlation_id 999}
body = reply * 2000
frame = bytes([0x12]) + bytes([0x80 | (len(body) & 0x7f), len(body) >> 7]) + body  # ServerFrame{batch}
t_end = time.time() + 30
while time.time() < t_end:
    s.send_multipart([ident, frame])
PY
F=$!
t0=$(date +%s%N)
out=$(timeout 60 "$BUILD/client/gbctl" --endpoint "ipc://$T/flood.sock" --timeout 1000 status echo 2>&1); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill $F 2>/dev/null; wait $F 2>/dev/null
[ $rc = 1 ] && grep -q "no reply to request" <<< "$out" || fail "flooding peer: exit $rc after $ms ms: $out"
[ $ms -lt 10000 ] || fail "flooding peer: gbctl returned after $ms ms, its timeout 1000 ms"
# A peer's error text reaches the terminal without bytes that act on it.
/usr/bin/python3 - "ipc://$T/esc.sock" <<'PY' > "$T/esc.log" 2>&1 &
import sys, time, zmq
s = zmq.Context().socket(zmq.ROUTER)
s.bind(sys.argv[1])
for _ in range(2):
    ident = s.recv_multipart()[0]
    text = b"\x1b[31mred\r\n\x07"
    reply = bytes([0x08, 0x01, 0x10, 0x05, 0x1a, len(text)]) + text  # Reply{id 1, status 5, error}
    s.send_multipart([ident, bytes([0x0a, len(reply)]) + reply])
time.sleep(60)  # until killed: an exit could close the connection before the last reply is written
PY
F=$!
out=$("$BUILD/client/gbctl" --endpoint "ipc://$T/esc.sock" --timeout 5000 status echo 2>&1); rc=$?
out2=$("$BUILD/client/gbctl" --endpoint "ipc://$T/esc.sock" --timeout 5000 send echo 1 1 2>&1)
kill $F 2>/dev/null; wait $F 2>/dev/null
[ $rc = 1 ] && grep -q "red" <<< "$out" || fail "peer's error text: exit $rc: $out"
if printf '%s%s' "$out" "$out2" | grep -q $'[\x01-\x08\x0b-\x1f\x7f]'; then
  fail "a peer's control bytes reached the terminal: $(printf '%s' "$out$out2" | od -c | head -3)"
fi
# A peer's names and status strings reach the terminal without bytes that act
# on it (list, status), and a reply that nests GrainTypeStatus 20,000 deep is
# refused as undecodable, not unpacked until the stack runs out.
/usr/bin/python3 - "ipc://$T/peer.sock" <<'PY' > "$T/peer.log" 2>&1 &
import sys, time, zmq
def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7f) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
def ld(field, body):  # a length-delimited field
    return varint(field << 3 | 2) + varint(len(body)) + body
def reply(mt, payload):  # ServerFrame{reply: Reply{id 1, message_type mt, payload}}
    return ld(1, bytes([0x08, 0x01, 0x20, mt]) + ld(5, payload))
def nest(field, depth):  # a message inside itself, depth levels below the top
    m = b""
    for _ in range(depth):
        m = ld(field, m)
    return m
answers = [
    reply(3, ld(1, b"ok") + ld(1, b"\x1b]0;pwned\x07\x1b[2J\rX")),           # GrainTypeList
    reply(1, ld(1, b"e\x1b[31m") + ld(2, b"m\x1b[2J") + bytes([0x30, 0x05])
          + ld(7, b"\x1b[31mRED")),                                            # GrainTypeStatus
    reply(1, ld(1, b"echo") + nest(16, 20000)),  # GrainTypeStatus.devices, 20,000 deep
    reply(1, ld(1, b"echo") + nest(16, 8)),      # at the client's bound: decoded
    reply(1, ld(1, b"echo") + nest(16, 9)),      # one past it
    reply(2, ld(1, b"echo") + nest(22, 9)),      # Telemetry.devices, one past it
]
s = zmq.Context().socket(zmq.ROUTER)
s.bind(sys.argv[1])
for a in answers:
    ident = s.recv_multipart()[0]
    s.send_multipart([ident, a])
time.sleep(60)  # until killed: an exit could close the connection before the last reply is written
PY
F=$!
out=$("$BUILD/client/gbctl" --endpoint "ipc://$T/peer.sock" --timeout 5000 list 2>&1); rc=$?
out2=$("$BUILD/client/gbctl" --endpoint "ipc://$T/peer.sock" --timeout 5000 status echo 2>&1); rc2=$?
out3=$("$BUILD/client/gbctl" --endpoint "ipc://$T/peer.sock" --timeout 5000 status echo 2>&1); rc3=$?
out4=$("$BUILD/client/gbctl" --endpoint "ipc://$T/peer.sock" --timeout 5000 status echo 2>&1); rc4=$?
out5=$("$BUILD/client/gbctl" --endpoint "ipc://$T/peer.sock" --timeout 5000 status echo 2>&1); rc5=$?
out6=$("$BUILD/client/gbctl" --endpoint "ipc://$T/peer.sock" --timeout 5000 telemetry echo 2>&1); rc6=$?
kill $F 2>/dev/null; wait $F 2>/dev/null
[ $rc4 = 0 ] || fail "status nested 8 deep (the bound): exit $rc4: $out4"
[ $rc5 = 1 ] && grep -q "does not decode as GrainTypeStatus" <<< "$out5" || fail "status nested 9 deep: exit $rc5: $out5"
[ $rc6 = 1 ] && grep -q "does not decode as Telemetry" <<< "$out6" || fail "telemetry nested 9 deep: exit $rc6: $out6"
[ $rc = 0 ] && grep -q "pwned" <<< "$out" || fail "peer's list: exit $rc: $out"
[ $rc2 = 0 ] && grep -q "RED" <<< "$out2" || fail "peer's status: exit $rc2: $out2"
if printf '%s%s' "$out" "$out2" | grep -q $'[\x01-\x08\x0b-\x1f\x7f]'; then
  fail "a peer's names reached the terminal raw: $(printf '%s' "$out$out2" | od -c | head -4)"
fi
[ $rc3 = 1 ] && grep -q "does not decode as GrainTypeStatus" <<< "$out3" ||
  fail "status nested 20000 deep: exit $rc3: $(head -c 300 <<< "$out3")"
if [ $fails = 0 ]; then echo "PASS: command lines"; exit 0; fi
exit 1
