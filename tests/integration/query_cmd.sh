#!/usr/bin/env bash
# query_cmd.sh - `mlwatch query` against the agent's own query API: the
# table shows the value the API returns, --json passes the server's `data`
# through, errors and usage mistakes get their exit codes; then the same
# command against Debian's Prometheus scraping the agent.
source "$(dirname "$0")/lib.sh"

root=$(fixture_copy rapl-cpufreq)
start_agent --root "$root" --interval 200ms

# Wait until the store has a few cycles of samples.
stored() {
    [ "$(curl -s --get --data-urlencode 'query=count_over_time(mlwatch_load1[1m])' \
        "$AGENT_URL/api/v1/query" | jq -r '.data.result[0].value[1] // 0')" -ge 3 ]
}
WAIT_EVERY=0.2 wait_for 20 stored || fail "the agent's store never had 3 samples of mlwatch_load1"

# Instant query at a fixed time so the table and curl see the same sample;
# a second ahead, so the samples of this second are within the lookback.
now=$(($(date +%s) + 1))
want=$(curl -s --get --data-urlencode 'query=mlwatch_load1' --data-urlencode "time=$now" \
    "$AGENT_URL/api/v1/query" | jq -r '.data.result[0].value[1]')
[ -n "$want" ] && [ "$want" != null ] || fail "the API returned no mlwatch_load1"
out=$("$MLWATCH_BIN" query --url "$AGENT_URL" --time "$now" 'mlwatch_load1')
expect_eq "table line for mlwatch_load1" "mlwatch_load1{node=\"t1\"} $want" "$out"

# Labels in PromQL notation, sorted; one line per series.
out=$("$MLWATCH_BIN" query --url "$AGENT_URL/" --time "$now" 'label_replace(vector(2), "b", "x\"y", "", "")')
expect_eq "label set notation" '{b="x\"y"} 2' "$out"
out=$("$MLWATCH_BIN" query --url "$AGENT_URL" 'scalar(vector(1.5))')
expect_eq "scalar result" "1.5" "$out"

# The default URL is the agent on --listen (":PORT" means 127.0.0.1).
port=${AGENT_URL##*:}
out=$("$MLWATCH_BIN" query --listen ":$port" --time "$now" 'mlwatch_load1')
expect_eq "default URL from --listen" "mlwatch_load1{node=\"t1\"} $want" "$out"

# Range query: 5 points from start to end at a 1s step; --json is `data`.
"$MLWATCH_BIN" query --url "$AGENT_URL" --json --start $((now - 4)) --end "$now" --step 1s \
    'vector(7)' >"$WORK/range.json"
expect_eq "range resultType" matrix "$(jq -r .resultType "$WORK/range.json")"
expect_eq "range step count" 5 "$(jq '.result[0].values | length' "$WORK/range.json")"
expect_eq "range first timestamp" "$((now - 4))" "$(jq '.result[0].values[0][0]' "$WORK/range.json")"
# The table form of the same query: the label set, then `timestamp value` lines.
"$MLWATCH_BIN" query --url "$AGENT_URL" --start $((now - 1)) --end "$now" --step 1 'vector(7)' \
    >"$WORK/range.txt"
expect_eq "range table" "$(printf '{}\n  %d.000 7\n  %d.000 7' $((now - 1)) "$now")" \
    "$(cat "$WORK/range.txt")"

# Annotations go to stderr, one line each, the answer to stdout.
err=$("$MLWATCH_BIN" query --url "$AGENT_URL" --start $((now - 1)) --end "$now" --step 1 \
    'sort(quantile(2, vector(7)))' 2>&1 >/dev/null)
expect_eq "warnings on stderr" \
    "$(printf '%s\n%s' 'mlwatch query: warning: PromQL warning: sort is ineffective for range queries since results are always ordered by labels (1:1)' \
        'mlwatch query: warning: PromQL warning: quantile value should be between 0 and 1, got 2 (1:15)')" "$err"
err=$("$MLWATCH_BIN" query --url "$AGENT_URL" --time "$now" 'rate(mlwatch_load1[5m])' 2>&1 >/dev/null)
expect_eq "an info on stderr" \
    'mlwatch query: info: PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: "mlwatch_load1" (1:6)' "$err"

# A malformed query: the server's errorType and error on one line, exit 1.
set +e
err=$("$MLWATCH_BIN" query --url "$AGENT_URL" 'sum(' 2>&1 >/dev/null)
rc=$?
set -e
expect_eq "malformed query exit" 1 "$rc"
api_err=$(curl -s --get --data-urlencode 'query=sum(' "$AGENT_URL/api/v1/query" | jq -r .error)
expect_eq "malformed query message" "mlwatch query: bad_data: $api_err" "$err"

# check_exit WHAT CODE ARGS...: exit status and a one-line message on stderr.
check_exit() {
    local what=$1 code=$2 rc
    shift 2
    set +e
    "$MLWATCH_BIN" query "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    set -e
    expect_eq "$what: exit" "$code" "$rc"
    expect_eq "$what: stderr lines" 1 "$(wc -l <"$WORK/err")"
    expect_eq "$what: stdout" "" "$(cat "$WORK/out")"
}
dead=$(free_port)
check_exit "unreachable URL" 1 --url "http://127.0.0.1:$dead" up
grep -q "http://127.0.0.1:$dead/api/v1/query: Couldn't connect" "$WORK/err" || fail "unreachable: $(cat "$WORK/err")"
ok
check_exit "missing EXPR" 2 --url "$AGENT_URL"
check_exit "two EXPRs" 2 --url "$AGENT_URL" up up
check_exit "bad --step" 2 --url "$AGENT_URL" --start 1 --end 2 --step 5x up
check_exit "zero --step" 2 --url "$AGENT_URL" --start 1 --end 2 --step 0 up
check_exit "bad --time" 2 --url "$AGENT_URL" --time yesterday up
check_exit "--start without --step" 2 --url "$AGENT_URL" --start 1 --end 2 up
check_exit "--time with a range" 2 --url "$AGENT_URL" --time 1 --start 1 --end 2 --step 1 up
check_exit "--end before --start" 2 --url "$AGENT_URL" --start 2 --end 1 --step 1 up

# Debian's Prometheus scraping the agent: the same command reads it.
if command -v prometheus >/dev/null; then
    start_scraper "${AGENT_URL#http://}" 1s
    target_up() {
        [ "$("$MLWATCH_BIN" query --url "$PROM" 'up{job="mlwatch"}' 2>/dev/null || true)" = \
            "up{instance=\"${AGENT_URL#http://}\", job=\"mlwatch\"} 1" ]
    }
    WAIT_EVERY=0.5 wait_for 30 target_up || fail "Prometheus: $("$MLWATCH_BIN" query --url "$PROM" up 2>&1)"
    ok
    # A whole second ahead: the scraped sample is within the lookback,
    # whatever the scrape's millisecond timestamp.
    t=$(($(date +%s) + 1))
    want=$(curl -s --get --data-urlencode 'query=mlwatch_load1' --data-urlencode "time=$t" \
        "$PROM/api/v1/query" | jq -r '.data.result[0].value[1]')
    out=$("$MLWATCH_BIN" query --url "$PROM" --time "$t" 'mlwatch_load1')
    expect_eq "Prometheus table line" \
        "mlwatch_load1{instance=\"${AGENT_URL#http://}\", job=\"mlwatch\", node=\"t1\"} $want" "$out"
    set +e
    err=$("$MLWATCH_BIN" query --url "$PROM" 'sum(' 2>&1 >/dev/null)
    rc=$?
    set -e
    expect_eq "Prometheus malformed query exit" 1 "$rc"
    case "$err" in "mlwatch query: bad_data: "*) ok ;; *) fail "Prometheus error line: $err" ;; esac
fi
done_ok
