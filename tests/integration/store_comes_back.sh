#!/bin/bash
# store_comes_back.sh - a store that cannot open because its disk is full
# comes back by itself once there is room, without a restart (issue 24,
# item 6): meanwhile /-/ready, writes and queries answer 503 with the
# reason and mlwatch_store_up is 0; after, /-/ready is 200, writes are
# stored and the agent's own samples too. Then a WAL that cannot be written
# while the agent runs makes /-/ready say so, until space returns.
# The full disk is a 3 MiB tmpfs: the test needs root, as CI runs it, and
# fails without it. (The file-size limit, RLIMIT_FSIZE, would also fail the
# agent's log, and its SIGXFSZ kills the agent.)
. "$(dirname "$0")/lib.sh"

CLIENT=$WORK/client
cc -O1 -o "$CLIENT" "$MLWATCH_SRC/tests/integration/store_rw_client.c" -lsnappy -lcurl ||
    fail "cannot compile the remote-write client"
T0=$(( $(date +%s) * 1000 - 3600000 ))
FULL=$WORK/full
mkdir -p "$FULL"
count_of() { curl -s "$AGENT_URL/api/v1/store/count?match=$1" | awk '/^samples/{print $2}'; }
metric() { curl -s "$AGENT_URL/metrics" | awk -v n="$1{node=\"t1\"}" '$1 == n {print $2}'; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }
ready_is() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/-/ready")" = "$1" ]; }

mount -t tmpfs -o size=3m tmpfs "$FULL" ||
    fail "cannot mount a 3 MiB tmpfs at $FULL: this test needs root (CI runs it as root)"
# shellcheck disable=SC2154 # rc is the trap's own
trap 'rc=$?; stop_process "${AGENT_PID:-}" || rc=1; umount "$FULL" 2>/dev/null; cleanup "$rc"' EXIT
dd if=/dev/zero of="$FULL/filler" bs=64k 2>/dev/null || true
AGENT_WAIT_FOR=/-/healthy start_agent --data-dir "$FULL/d" --interval 200ms --disable-collectors gpu
make_room() { rm -f "$FULL/filler"; }
PID_BEFORE=$AGENT_PID

# --- disabled: 503 with the reason everywhere ---
grep -q "error store: store disabled: .*No space left on device.*; retrying every 1 s" "$WORK/agent.log" ||
    fail "no log line for the disabled store: $(grep store "$WORK/agent.log" | head -c 400)"
ok
reason=$(sed -n 's/.* error store: store disabled: \(.*\); retrying every 1 s$/\1/p' "$WORK/agent.log")
body=$(curl -s -w ' %{http_code}' "$AGENT_URL/-/ready")
expect_eq "/-/ready while disabled" "mlwatch is not ready: store: store unavailable: $reason
 503" "$body"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" back job a "$T0" 1)
expect_eq "write while disabled" "503 store unavailable: $reason" "$out"
body=$(curl -s -w ' %{http_code}' "$AGENT_URL/api/v1/query?query=up")
expect_eq "query while disabled" '{"status":"error","errorType":"unavailable","error":"store unavailable"} 503' "$body"
body=$(curl -s -w ' %{http_code}' "$AGENT_URL/api/v1/series?match[]=up")
expect_eq "series while disabled" '{"status":"error","errorType":"unavailable","error":"store unavailable"} 503' "$body"
wait_for 20 metric_is mlwatch_store_up 0 || fail "mlwatch_store_up while disabled: '$(metric mlwatch_store_up)'"
ok
curl -s "$AGENT_URL/metrics" | grep '^# TYPE mlwatch_store_up gauge$' >/dev/null || fail "no TYPE line for mlwatch_store_up"
ok

# --- space returns: the same process serves again ---
make_room
wait_for 20 ready_is 200 || fail "/-/ready after space returned: $(curl -s "$AGENT_URL/-/ready")"
ok
expect_eq "the same agent" "$PID_BEFORE" "$AGENT_PID"
exited "$AGENT_PID" && fail "the agent exited"
ok
grep -q "info store: store enabled after [0-9]* attempts: $FULL/d/data is usable again" "$WORK/agent.log" ||
    fail "no log line when the store came back: $(grep store "$WORK/agent.log" | tail -c 400)"
ok
lines=$(grep -c 'store still disabled' "$WORK/agent.log" || true)
[ "$lines" -le 1 ] || fail "$lines lines for the same cause while disabled (one per 10 minutes)"
ok
expect_eq "write after space returned" "204 " "$("$CLIENT" one "$AGENT_URL/api/v1/write" back job a "$T0" 1)"
expect_eq "stored" 1 "$(count_of back)"
wait_for 20 metric_is mlwatch_store_up 1 || fail "mlwatch_store_up after: '$(metric mlwatch_store_up)'"
ok
has_own() { [ "$(count_of mlwatch_store_up)" -ge 1 ]; }
wait_for 20 has_own || fail "the agent's own samples are not stored after space returned"
ok
body=$(curl -s -w ' %{http_code}' "$AGENT_URL/api/v1/query?query=back")
[[ $body == '{"status":"success","data":{"resultType":"vector","result":'*' 200' ]] ||
    fail "query after space returned: $body"
ok

# --- the WAL cannot be written while running: /-/ready says why ---
dd if=/dev/zero of="$FULL/filler" bs=64k 2>/dev/null || true
"$CLIENT" send "$AGENT_URL/api/v1/write" 3000 20 1000 $((T0 + 100000)) >"$WORK/full_out"
grep -q '^FAIL 503 storage unavailable' "$WORK/full_out" || fail "no 503 on a full disk: $(head -c 300 "$WORK/full_out")"
ok
body=$(curl -s -w ' %{http_code}' "$AGENT_URL/-/ready")
expect_eq "/-/ready while the WAL cannot be written" "mlwatch is not ready: store: store unavailable: cannot write the WAL in $FULL/d/data: No space left on device
 503" "$body"
wait_for 20 metric_is mlwatch_store_up 0 || fail "mlwatch_store_up while the WAL cannot be written: '$(metric mlwatch_store_up)'"
ok
make_room
wait_for 20 ready_is 200 || fail "/-/ready after space returned again: $(curl -s "$AGENT_URL/-/ready")"
ok
done_ok
