#!/bin/bash
# rw_poison.sh - a remote writer cannot break the agent (issue 24, item 5):
# a sample more than 5 minutes ahead of the clock is refused with a 400
# naming its series; a write into one of the agent's own series is refused
# even when its timestamps are near; one request poisoning every own series
# ten years ahead (what stopped the agent's own storage for good, across a
# kill -9 restart) is refused, and the agent's own series keep being stored,
# also after a kill -9 restart. Own series refused every cycle (the label
# limit) give one log line per cause, not one per series per cycle.
. "$(dirname "$0")/lib.sh"

CLIENT=$WORK/client
LOADER=$WORK/loader
cc -O1 -o "$CLIENT" "$MLWATCH_SRC/tests/integration/store_rw_client.c" -lsnappy -lcurl ||
    fail "cannot compile the remote-write client"
cc -O1 -o "$LOADER" "$MLWATCH_SRC/tests/integration/promql_load.c" -lsnappy -lcurl ||
    fail "cannot compile the loader"
count_of() { curl -s "$AGENT_URL/api/v1/store/count?match=$1" | awk '/^samples/{print $2}'; }
OWN=mlwatch_store_active_series
more_own_than() { [ "$(count_of $OWN)" -gt "$1" ]; }

start_agent --data-dir "$WORK/d" --interval 200ms --disable-collectors gpu --node-name n1
wait_for 20 more_own_than 1 || fail "the agent's own samples are not stored"
ok
now_ms=$(( $(date +%s) * 1000 ))
TEN_YEARS=$(( now_ms + 10 * 365 * 86400 * 1000 ))

out=$("$CLIENT" one "$AGENT_URL/api/v1/write" $OWN x "" "$TEN_YEARS" 1)
expect_eq "ten years ahead" "400 sample too far in the future for series {__name__=\"$OWN\"}: timestamp $TEN_YEARS is more than 300000 ms after the store's clock; nothing of this request was stored" "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" other_series x "" $((now_ms + 600000)) 1)
expect_eq "ten minutes ahead" "400 sample too far in the future for series {__name__=\"other_series\"}: timestamp $((now_ms + 600000)) is more than 300000 ms after the store's clock; nothing of this request was stored" "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" other_series x "" $((now_ms + 60000)) 1)
expect_eq "a minute ahead is accepted" "204 " "$out"
# The agent's own series carry its node label: another node's are not its own.
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" $OWN node n1 $((now_ms + 60000)) 1)
expect_eq "into an own series" "400 series {__name__=\"$OWN\", node=\"n1\"} is the agent's own: remote writes may not add to it; nothing of this request was stored" "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" $OWN node n2 $((now_ms + 60000)) 1)
expect_eq "into another node's series of that name" "204 " "$out"

# Every series of the agent's exposition, ten years ahead, in one request;
# then the same a minute ahead.
poison() { # OFFSET_MS FILE
    curl -s "$AGENT_URL/metrics" | grep -v '^#' | sed -E "s/ [^ ]+\$/ $1 1/" |
        sed -E 's/^([a-zA-Z_:][a-zA-Z0-9_:]*) /\1{} /' >"$2"
}
poison "$TEN_YEARS" "$WORK/poison"
[ "$(wc -l <"$WORK/poison")" -gt 100 ] || fail "too few series to poison: $(wc -l <"$WORK/poison")"
ok
# The loader prints the answer's body (curl's default), then the status.
out=$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/poison")
expect_eq "every own series ten years ahead" 400 "$(tail -n 1 <<<"$out")"
[[ $(head -n 1 <<<"$out") =~ ^sample\ too\ far\ in\ the\ future\ for\ series\ \{__name__=\"mlwatch_[a-z_]+\".*\}:\ timestamp\ $TEN_YEARS\ is\ more\ than\ 300000\ ms\ after\ the\ store\'s\ clock\;\ nothing\ of\ this\ request\ was\ stored$ ]] ||
    fail "ten years ahead: $(head -c 300 <<<"$out")"
ok
poison $((now_ms + 60000)) "$WORK/poison_near"
out=$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/poison_near")
expect_eq "every own series a minute ahead" 400 "$(tail -n 1 <<<"$out")"
[[ $(head -n 1 <<<"$out") =~ ^series\ \{__name__=\"mlwatch_[a-z_]+\".*\}\ is\ the\ agent\'s\ own:\ remote\ writes\ may\ not\ add\ to\ it\;\ nothing\ of\ this\ request\ was\ stored$ ]] ||
    fail "a minute ahead: $(head -c 300 <<<"$out")"
ok

# The agent keeps storing its own samples, and after a kill -9 restart.
have=$(count_of $OWN)
wait_for 20 more_own_than $((have + 2)) || fail "own samples stopped after the poisoning ($(count_of $OWN), had $have)"
ok
expect_eq "no own sample refused before the restart" 0 "$(grep -c 'own sample not stored' "$WORK/agent.log" || true)"
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
start_agent --data-dir "$WORK/d" --interval 200ms --disable-collectors gpu
have=$(count_of $OWN)
wait_for 20 more_own_than $((have + 2)) || fail "own samples not stored after the restart ($(count_of $OWN), had $have)"
ok
expect_eq "no own sample refused after it" 0 "$(grep -c 'own sample not stored' "$WORK/agent.log" || true)"
kill "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true

# Own series refused every cycle for one cause: one line in 10 s (the quiet
# period is 10 minutes), where there was one per series.
start_agent --data-dir "$WORK/d2" --interval 200ms --disable-collectors gpu --store-max-labels 1
sleep 10
lines=$(grep -c 'own sample not stored' "$WORK/agent.log" || true)
expect_eq "log lines for own series over the label limit in 10 s" 1 "$lines"
grep -q 'warn store: own sample not stored: series {.*} has [0-9]* labels, more than the limit of 1$' "$WORK/agent.log" ||
    fail "the line says why: $(grep 'own sample' "$WORK/agent.log" | head -c 300)"
ok
kill "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true

# --store-max-future sets the window: with 1h, ten minutes ahead is stored
# and two hours ahead is refused, naming the window in milliseconds.
start_agent --data-dir "$WORK/d3" --interval 200ms --disable-collectors gpu --store-max-future 1h
now_ms=$(($(date +%s) * 1000))
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" other_series x "" $((now_ms + 600000)) 1)
expect_eq "ten minutes ahead with --store-max-future 1h" "204 " "$out"
out=$("$CLIENT" one "$AGENT_URL/api/v1/write" other_series x "" $((now_ms + 7200000)) 1)
expect_eq "two hours ahead with --store-max-future 1h" "400 sample too far in the future for series {__name__=\"other_series\"}: timestamp $((now_ms + 7200000)) is more than 3600000 ms after the store's clock; nothing of this request was stored" "$out"
ok
done_ok
