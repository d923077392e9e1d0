#!/bin/bash
# store.sh - the store and its remote-write receiver through the real agent
# binary: statuses and exact messages (204, 400 malformed, 415, 400 out of
# order, 429 series limit), kill -9 during ingest with every acknowledged
# sample found after the restart, and a full disk (a 3 MiB tmpfs mounted
# here; where mounting is not allowed the test fails, as CI runs as root):
# 503 with a clear log line, nothing stored is damaged, ingest resumes when
# space returns.
. "$(dirname "$0")/lib.sh"

CLIENT=$WORK/client
cc -O1 -o "$CLIENT" "$MLWATCH_SRC/tests/integration/store_rw_client.c" -lsnappy -lcurl ||
    fail "cannot compile the remote-write client"
# 12 hours back: the kill -9 rounds write up to T0 + 8.6 h, and the store
# refuses samples more than 5 minutes ahead of its clock.
T0=$(( $(date +%s) * 1000 - 12 * 3600000 ))

start_store_agent() { # DATADIR ARGS...
    local dd=$1
    shift
    start_agent --data-dir "$dd" --interval 200ms --disable-collectors gpu "$@"
}

count_of() { curl -s "$AGENT_URL/api/v1/store/count?match=$1" | awk '/^samples/{print $2}'; }

# --- statuses and messages ---
start_store_agent "$WORK/d1"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" up job a "$T0" 1)
expect_eq "valid write" "204 " "$out"
expect_eq "stored" 1 "$(count_of up)"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" up job a "$T0" 1)
expect_eq "exact duplicate is accepted" "204 " "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" up job a $((T0 - 1)) 1)
expect_eq "out of order" "400 out of order sample for series {__name__=\"up\", job=\"a\"}: timestamp $((T0 - 1)) is before the newest stored or sent timestamp $T0; nothing of this request was stored" "$out"
code=$(curl -s -o "$WORK/body" -w '%{http_code}' --data-binary 'not snappy at all' \
    -H 'Content-Encoding: snappy' -H 'Content-Type: application/x-protobuf' "$AGENT_URL/api/v1/write")
expect_eq "garbage status" 400 "$code"
expect_eq "garbage message" "malformed remote-write body: snappy: corrupt compressed data; nothing was stored" "$(cat "$WORK/body")"
code=$(curl -s -o "$WORK/body" -w '%{http_code}' --data-binary 'x' -H 'Content-Encoding: gzip' \
    -H 'Content-Type: application/x-protobuf' "$AGENT_URL/api/v1/write")
expect_eq "gzip status" 415 "$code"
expect_eq "gzip message" "unsupported Content-Encoding 'gzip': remote write 1.0 bodies are snappy blocks" "$(cat "$WORK/body")"
code=$(curl -s -o /dev/null -w "%{http_code}" -X PUT "$AGENT_URL/api/v1/write")
expect_eq "PUT on the write path" 405 "$code"
expect_eq "nothing more stored" 1 "$(count_of up)"
# the agent's own samples go in every interval, and /metrics shows the
# refusals from the cycle after them (polled: a loaded machine, or ASan,
# can take longer than a few intervals to reach the next cycle)
for _ in $(seq 1 100); do
    own=$(count_of mlwatch_store_active_series)
    metrics=$(curl -s "$AGENT_URL/metrics")
    refused_ooo=$(echo "$metrics" | awk '/^mlwatch_store_refused_requests_total\{reason="out_of_order",node="t1"\}/{print $2}')
    refused_bad=$(echo "$metrics" | awk '/^mlwatch_store_refused_requests_total\{reason="malformed",node="t1"\}/{print $2}')
    [ "${own:-0}" -ge 2 ] && [ "$refused_ooo" = 1 ] && [ "$refused_bad" = 2 ] && break
    sleep 0.1
done
[ "${own:-0}" -ge 2 ] || fail "the agent's own samples are not in the store ($own)"
ok
expect_eq "refused: out of order" 1 "$refused_ooo"
expect_eq "refused: malformed" 2 "$refused_bad"
kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true

# --- limits ---
start_store_agent "$WORK/d2" --store-max-series 2 --store-max-label-value-length 8
"$CLIENT" one "$AGENT_URL/api/v1/write" a job x "$T0" 1 >/dev/null
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" b job x "$T0" 1)
expect_eq "second series" "204 " "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" c job x "$T0" 1)
expect_eq "series limit" "429 active series limit of 2 reached (2 active, this request adds 1); nothing of this request was stored" "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" a job 123456789 "$T0" 1)
expect_eq "label value limit" "400 series 0: the value of label job is 9 bytes long, more than the limit of 8" "$out"
kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true

# --- kill -9 during ingest: every acknowledged sample is found ---
for round in 1 2 3; do
    start_store_agent "$WORK/d3"
    "$CLIENT" send "$AGENT_URL/api/v1/write" 2000 1000 250 $((T0 + round * 10000000)) >"$WORK/acks$round" &
    CPID=$!
    # The kill comes at a random point after the first acknowledgement (a
    # fixed 0.3-0.9 s after the start could come before it on a loaded
    # machine, and then the round tests nothing).
    wait_for 20 grep -q '^ACK' "$WORK/acks$round" || fail "round $round: no request acknowledged in 20 s"
    sleep "0.$((RANDOM % 7))"
    kill -9 "$AGENT_PID"
    wait "$CPID" 2>/dev/null || true
    start_store_agent "$WORK/d3"
    curl -s "$AGENT_URL/api/v1/store/export?match=crash_test" >"$WORK/export"
    python3 - "$WORK/export" "$round" $((T0)) "$WORK"/acks* <<'PY' || fail "acknowledged samples missing after kill -9 (round $round)"
import re, sys
export, rounds, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
have = {}
for line in open(export):
    m = re.match(r'\{__name__="crash_test",s="(\d+)"\} (-?\d+) (\S+)', line)
    if m:
        have[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
missing = 0
acked = 0
for k, path in enumerate(sys.argv[4:], start=1):
    base = t0 + k * 10000000
    for line in open(path):
        f = line.split()
        if f[0] != 'ACK':
            continue
        r, a, b = int(f[1]), int(f[2]), int(f[3])
        for s in range(a, b + 1):
            acked += 1
            if have.get((s, base + r * 1000)) != float(r * 100000 + s):
                missing += 1
print("acknowledged %d samples, all found" % acked if not missing else "%d of %d missing" % (missing, acked))
sys.exit(1 if missing else 0)
PY
    ok
    kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
done

# --- disk full ---
FULL=$WORK/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=3m tmpfs "$FULL" 2>/dev/null; then
    # shellcheck disable=SC2154 # rc is the trap's own
    trap 'rc=$?; stop_process "$AGENT_PID" || rc=1; umount "$FULL" 2>/dev/null; cleanup "$rc"' EXIT
    start_store_agent "$FULL/d"
    "$CLIENT" send "$AGENT_URL/api/v1/write" 100 5 100 "$T0" >"$WORK/before"
    expect_eq "before the disk fills" 5 "$(grep -c '^ACK' "$WORK/before")"
    before=$(count_of crash_test)
    # fill the disk, then write until refused
    dd if=/dev/zero of="$FULL/filler" bs=64k 2>/dev/null || true
    "$CLIENT" send "$AGENT_URL/api/v1/write" 3000 20 1000 $((T0 + 100000)) >"$WORK/full_out"
    grep -q '^FAIL 503 storage unavailable: cannot make the samples durable in .*: No space left on device; retry later' "$WORK/full_out" ||
        grep -q '^FAIL 503 storage unavailable: cannot write the WAL in .*: No space left on device; retry later' "$WORK/full_out" ||
        fail "no 503 on a full disk: $(head -c 300 "$WORK/full_out")"
    ok
    grep -q 'error store: cannot write the WAL in .*No space left on device' "$WORK/agent.log" ||
        fail "no clear log line for the full disk"
    ok
    # /metrics shows the snapshot of the last cycle: wait for the next one.
    for _ in $(seq 1 50); do
        full=$(curl -s "$AGENT_URL/metrics" | awk '/^mlwatch_store_disk_full{node="t1"} /{print $2}')
        [ "$full" = 1 ] && break
        sleep 0.1
    done
    expect_eq "disk_full gauge" 1 "$full"
    after_ok=$(grep -c '^ACK' "$WORK/full_out" || true)
    # nothing stored before is damaged
    [ "$(count_of crash_test)" -ge $((before + after_ok * 1000)) ] || fail "samples lost on a full disk"
    ok
    rm -f "$FULL/filler"
    for i in $(seq 1 50); do
        out=$("$CLIENT" one "$AGENT_URL/api/v1/write" resumed job a "$T0" 1)
        [ "$out" = "204 " ] && break
        sleep 0.2
    done
    expect_eq "ingest resumes when space returns" "204 " "$out"
    grep -q 'info store: the WAL in .* is writable again; ingest resumes' "$WORK/agent.log" ||
        fail "no log line when ingest resumes"
    ok
    kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
    start_store_agent "$FULL/d"
    [ "$(count_of crash_test)" -ge $((before + after_ok * 1000)) ] || fail "acknowledged samples lost after the full disk and kill -9"
    ok
    expect_eq "resumed sample" 1 "$(count_of resumed)"
    stop_process "$AGENT_PID"
    umount "$FULL"
    trap cleanup EXIT
else
    fail "cannot mount a tmpfs here (not root?): the disk-full part cannot run"
fi

# --- a file size limit (RLIMIT_FSIZE, ulimit -f): a write past it fails with
# EFBIG, which the store treats as a full disk; the agent is not killed by
# SIGXFSZ (src/agent/agent.c ignores it) and resumes when the limit goes. ---
start_store_agent "$WORK/dfsize"
prlimit --pid "$AGENT_PID" --fsize=262144:unlimited || fail "prlimit cannot set the agent's file size limit"
"$CLIENT" send "$AGENT_URL/api/v1/write" 3000 20 1000 $((T0 + 200000)) >"$WORK/fsize_out" || true
grep -q '^FAIL 503 storage unavailable: .*: File too large; retry later' "$WORK/fsize_out" ||
    fail "no 503 past the file size limit: $(head -c 300 "$WORK/fsize_out")"
ok
exited "$AGENT_PID" && fail "the agent died past the file size limit: $(tail -c 400 "$WORK/agent.log")"
grep -q 'error store: cannot write the WAL in .*: File too large' "$WORK/agent.log" ||
    fail "no clear log line past the file size limit"
ok
prlimit --pid "$AGENT_PID" --fsize=unlimited:unlimited
for i in $(seq 1 50); do
    out=$("$CLIENT" one "$AGENT_URL/api/v1/write" fsize_resumed job a "$(date +%s)000" 1)
    [ "$out" = "204 " ] && break
    sleep 0.2
done
expect_eq "ingest resumes when the file size limit goes" "204 " "$out"
expect_eq "resumed sample past the limit" 1 "$(count_of fsize_resumed)"
done_ok
