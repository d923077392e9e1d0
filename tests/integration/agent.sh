#!/usr/bin/env bash
# agent.sh - the agent serves both exposition formats (and gzip) from its
# latest snapshot while one collector keeps failing, logs that failure once,
# recovers when the file is fixed, and stops cleanly on SIGTERM.
source "$(dirname "$0")/lib.sh"

root=$(fixture_copy bare-vm)
printf 'this is not a loadavg file\n' >"$root/proc/loadavg"
start_agent --root "$root" --interval 200ms
sleep 1 # several cycles, all failing for loadavg

# Prometheus text format 0.0.4
curl -sf -D "$WORK/h.txt" -o "$WORK/m.txt" "$AGENT_URL/metrics"
expect_eq "text content type" "text/plain; version=0.0.4; charset=utf-8" \
    "$(grep -i '^content-type:' "$WORK/h.txt" | cut -d' ' -f2- | tr -d '\r')"
promtool check metrics <"$WORK/m.txt" || fail "promtool check metrics rejected the text exposition"
ok
errors=$(awk '$1 == "mlwatch_collector_errors_total{collector=\"loadavg\",node=\"t1\"}" {print $2}' "$WORK/m.txt")
[ -n "$errors" ] && [ "$errors" -ge 3 ] || fail "loadavg errors not counted (got '$errors')"
ok
if grep -q '^mlwatch_load1[{ ]' "$WORK/m.txt"; then fail "a malformed loadavg still produced mlwatch_load1"; fi
ok
grep -q '^mlwatch_build_info{' "$WORK/m.txt" || fail "build_info missing"
ok
for family in $(grep '^# TYPE ' "$WORK/m.txt" | awk '{print $3}'); do
    grep -q "^# HELP $family " "$WORK/m.txt" || fail "family $family has no HELP"
done
ok

# The failure is logged once, with its path, not once per cycle.
expect_eq "log lines about proc/loadavg" 1 "$(grep -c 'loadavg: proc/loadavg' "$WORK/agent.log")"

# OpenMetrics, negotiated with the Accept header Prometheus 2.42 sends.
accept='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
curl -sf -H "Accept: $accept" -D "$WORK/h.om" -o "$WORK/m.om" "$AGENT_URL/metrics"
expect_eq "OpenMetrics content type" "application/openmetrics-text; version=1.0.0; charset=utf-8" \
    "$(grep -i '^content-type:' "$WORK/h.om" | cut -d' ' -f2- | tr -d '\r')"
expect_eq "OpenMetrics last line" "# EOF" "$(tail -n1 "$WORK/m.om")"
grep -q '^# TYPE mlwatch_collector_errors counter$' "$WORK/m.om" || fail "counter family name in OpenMetrics"
ok
grep -q '^mlwatch_collector_errors_total{collector="loadavg",node="t1"} ' "$WORK/m.om" || fail "counter sample name in OpenMetrics"
ok
grep -q '^# TYPE mlwatch_build info$' "$WORK/m.om" || fail "info family in OpenMetrics"
ok
grep -q '^# UNIT mlwatch_collector_duration_seconds seconds$' "$WORK/m.om" || fail "UNIT line missing"
ok

# gzip when asked, and the same bytes once inflated.
curl -sf -H 'Accept-Encoding: gzip' -D "$WORK/h.gz" -o "$WORK/m.gz" "$AGENT_URL/metrics"
expect_eq "Content-Encoding" "gzip" "$(grep -i '^content-encoding:' "$WORK/h.gz" | cut -d' ' -f2 | tr -d '\r')"
gzip -dc "$WORK/m.gz" >"$WORK/m.gunzip" || fail "body is not gzip"
grep -q '^# TYPE mlwatch_collector_errors_total counter$' "$WORK/m.gunzip" || fail "inflated body is not the text exposition"
ok
curl -sf -H 'Accept-Encoding: gzip;q=0' -D "$WORK/h.nogz" -o /dev/null "$AGENT_URL/metrics"
if grep -qi '^content-encoding:' "$WORK/h.nogz"; then fail "gzip;q=0 was compressed"; fi
ok

# Other paths
expect_eq "/-/healthy" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/-/healthy")"
expect_eq "unknown path" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/nope")"
expect_eq "POST /metrics" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$AGENT_URL/metrics")"

# Fix the file: the next cycle reports it; the error counter never goes back.
printf '0.50 0.25 0.10 2/200 777\n' >"$root/proc/loadavg"
sleep 0.6
curl -sf -o "$WORK/m2.txt" "$AGENT_URL/metrics"
expect_eq "mlwatch_load1 after the fix" 'mlwatch_load1{node="t1"} 0.5' "$(grep '^mlwatch_load1{' "$WORK/m2.txt")"
errors2=$(awk '$1 == "mlwatch_collector_errors_total{collector=\"loadavg\",node=\"t1\"}" {print $2}' "$WORK/m2.txt")
[ "$errors2" -ge "$errors" ] || fail "error counter went backwards ($errors -> $errors2)"
ok

# Many concurrent scrapes while collecting every 200 ms: all succeed.
for i in $(seq 1 8); do
    (for j in $(seq 1 25); do curl -sf -o /dev/null "$AGENT_URL/metrics" || exit 1; done) &
    PIDS+=($!)
done
for p in "${PIDS[@]:1}"; do wait "$p" || fail "a concurrent scrape failed"; done
PIDS=("$AGENT_PID")
ok

# expect_clean_stop SIG WHAT: the agent exits with status 0 and logs that
# SIG stopped it.
expect_clean_stop() {
    local rc=0
    wait "$AGENT_PID" || rc=$?
    PIDS=()
    expect_eq "exit status after $2" 0 "$rc"
    grep -q "info agent: stopping on SIG$1\$" "$WORK/agent.log" || fail "no clean stop on SIG$1 logged"
    ok
}

kill -TERM "$AGENT_PID"
expect_clean_stop TERM SIGTERM

# A signal the kernel hands to another thread than the main one (kill(2) on
# that thread's id makes it the one) stops the agent too, long before the
# end of its 10-minute interval; it once stopped only then. SIGINT as well.
for sig in TERM INT; do
    start_agent --root "$root" --interval 10m
    tid=
    for t in /proc/"$AGENT_PID"/task/*; do [ "${t##*/}" = "$AGENT_PID" ] || tid=${t##*/}; done
    [ -n "$tid" ] || fail "the agent has no thread besides the main one"
    kill -"$sig" "$tid"
    wait_for 30 exited "$AGENT_PID" || fail "SIG$sig to thread $tid ($(cat "/proc/$AGENT_PID/task/$tid/comm")): the agent still runs"
    expect_clean_stop "$sig" "SIG$sig to a thread"
done
done_ok
