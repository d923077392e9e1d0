#!/bin/bash
# rw_bomb.sh - remote-write decompression bombs against the agent's
# receiver (issue 24): 32 M empty TimeSeries in a 3 MiB snappy body (refused
# from the snappy header), and 16 M of them in 1.5 MiB (inside the
# decompressed limit, refused once the walk has counted past the decoding
# budget). Each gets its exact 400, the agent keeps serving /metrics and
# storing, and its peak RSS (VmHWM, reset before each bomb through
# /proc/PID/clear_refs) grows by less than the 64 MiB per HTTP thread that
# docs/store.md promises; three of the smaller bombs at once leave a scrape
# answered within a second.
. "$(dirname "$0")/lib.sh"

CLIENT=$WORK/client
cc -O1 -o "$CLIENT" "$MLWATCH_SRC/tests/integration/store_rw_client.c" -lsnappy -lcurl ||
    fail "cannot compile the remote-write client"
T0=$(( $(date +%s) * 1000 - 3600000 ))
start_agent --data-dir "$WORK/d" --interval 200ms --disable-collectors gpu

hwm_kb() { awk '/^VmHWM:/{print $2}' "/proc/$AGENT_PID/status"; }
reset_hwm() { echo 5 >"/proc/$AGENT_PID/clear_refs"; }
LIMIT_KB=$((64 * 1024))

# bomb NSERIES EXPECTED_BODY: one bomb, its answer and the RSS it cost.
bomb() {
    reset_hwm
    local before after out
    before=$(hwm_kb)
    out=$("$CLIENT" bomb "$AGENT_URL/api/v1/write" "$1")
    after=$(hwm_kb)
    expect_eq "bomb of $1 series" "$2" "$out"
    echo "bomb of $1 series: VmHWM grew by $((after - before)) KiB" >&2
    [ $((after - before)) -lt $LIMIT_KB ] ||
        fail "bomb of $1 series: VmHWM grew by $((after - before)) KiB, more than $LIMIT_KB"
    ok
    http_ok "$AGENT_URL/metrics" || fail "no /metrics after the bomb of $1 series"
    ok
}

bomb 33554432 "400 oversized remote-write body: snappy: the body would decompress to 67108864 bytes, more than the limit of 33554432; nothing was stored"
# 48 MiB budget - 32 MiB decompressed = 16 MiB for 96-byte series: the
# 174,763rd is the one that does not fit.
bomb 16777216 "400 oversized remote-write body: the request needs more than the decoding budget of 50331648 bytes (33554432 decompressed bytes; counted before the budget ran out: 174763 series, 0 labels, 0 samples); nothing was stored"

# Three at once while a scraper asks for /metrics.
reset_hwm
before=$(hwm_kb)
BOMBS=()
for i in 1 2 3; do
    "$CLIENT" bomb "$AGENT_URL/api/v1/write" 16777216 >"$WORK/bomb$i" &
    BOMBS+=($!)
done
worst=0
running() { local p; for p in "${BOMBS[@]}"; do ! exited "$p" && return 0; done; return 1; }
while running; do
    ms=$(curl -s -o /dev/null -w '%{time_total}' "$AGENT_URL/metrics" | awk '{printf "%d", $1 * 1000}')
    [ "$ms" -gt "$worst" ] && worst=$ms
done
wait "${BOMBS[@]}"
after=$(hwm_kb)
for i in 1 2 3; do
    grep -q '^400 oversized remote-write body: the request needs more than the decoding budget' "$WORK/bomb$i" ||
        fail "concurrent bomb $i: $(head -c 300 "$WORK/bomb$i")"
    ok
done
echo "three bombs at once: slowest scrape $worst ms, VmHWM grew by $((after - before)) KiB" >&2
[ "$worst" -lt 1000 ] || fail "a scrape took $worst ms during three bombs"
ok
[ $((after - before)) -lt $((3 * LIMIT_KB)) ] || fail "three bombs: VmHWM grew by $((after - before)) KiB"
ok

# The receiver still stores what a writer sends.
expect_eq "a valid write after the bombs" "204 " "$("$CLIENT" one "$AGENT_URL/api/v1/write" after_bomb job a "$T0" 1)"
expect_eq "stored" 1 "$(curl -s "$AGENT_URL/api/v1/store/count?match=after_bomb" | awk '/^samples/{print $2}')"
done_ok
