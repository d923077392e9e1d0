#!/usr/bin/env bash
# http_query_priority.sh - the query lane's threads run at nice +10 from the
# agent's own (capped at 19), so that heavy queries cannot take the CPU from
# scrapes on a small node (docs/http.md); libmicrohttpd's threads, which
# serve /metrics, health, readiness and remote write, and every other
# thread keep the agent's priority. Read from /proc/PID/task/*/stat.
source "$(dirname "$0")/lib.sh"

# threads_by_nice: "COMM NICE" for each thread of the agent, sorted and
# counted ("N COMM NICE").
threads_by_nice() {
    local t
    for t in /proc/"$AGENT_PID"/task/*; do
        # stat's 19th field; after the ") " that ends the name, the 17th.
        echo "$(cat "$t/comm") $(proc_stat "$AGENT_PID/task/${t##*/}" | awk '{print $17}')"
    done | sort | uniq -c | awk '{print $1, $2, $3}'
}
query_threads() { [ "$(threads_by_nice | awk '$2 == "mlwatch-query" { n += $1 } END { print n + 0 }')" = "$1" ]; }

root=$(fixture_copy rapl-cpufreq)
# BASE EXPECTED_QUERY_NICE: an agent started at nice BASE.
check_at() {
    local base=$1 want=$2 got
    NODE_NAME=t1 start_agent_nice "$base" --root "$root" --interval 200ms --query-max-concurrency 3
    WAIT_EVERY=0.1 wait_for 5 query_threads 3 || fail "3 query threads are not up: $(threads_by_nice | tr '\n' ';')"
    # A query answered on the lane: the threads that serve are the niced ones.
    expect_eq "a query at nice $base" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/api/v1/query?query=mlwatch_load1")"
    got=$(threads_by_nice)
    expect_eq "the query threads at nice $base" "3 mlwatch-query $want" "$(grep ' mlwatch-query ' <<<"$got")"
    expect_eq "libmicrohttpd's threads at nice $base" "4 MHD-worker $base" "$(grep ' MHD-worker ' <<<"$got")"
    expect_eq "threads at another nice than $base, other than the query threads" "" \
        "$(grep -v ' mlwatch-query ' <<<"$got" | awk -v b="$base" '$3 != b' | tr '\n' ';')"
    stop_process "$AGENT_PID"
}
# start_agent at a given nice (nice(1) adds to the test's own, which is 0
# unless the runner is niced: checked).
start_agent_nice() {
    local base=$1
    shift
    [ "$(nice)" = 0 ] || fail "the test runs at nice $(nice), not 0"
    MLWATCH_BIN_REAL=$MLWATCH_BIN
    MLWATCH_BIN="$WORK/nice-mlwatch"
    printf '#!/bin/sh\nexec nice -n %s "%s" "$@"\n' "$base" "$MLWATCH_BIN_REAL" >"$MLWATCH_BIN"
    chmod +x "$MLWATCH_BIN"
    start_agent "$@"
    MLWATCH_BIN=$MLWATCH_BIN_REAL
}

check_at 0 10
check_at 5 15
check_at 15 19
done_ok
