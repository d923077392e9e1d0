#!/bin/bash
# http_slow_clients.sh - idle and slow clients against the agent's HTTP
# server (issue 24): 300 idle connections, 260 that drip one header line a
# second, 100 that drip the request line a byte every two seconds, 100 from one
# address, and 300 against a total limit of 100. Each time /metrics, /-/ready
# and a remote write still answer while the hostile connections are held,
# and the server closes the hostile ones by their total deadline (bytes that
# trickle in do not extend it). slow_clients.py holds the connections and
# reports what the server did to them. Expectations are status codes and
# counts of connections, never speed: curl waits up to 20 s (the machine
# may be loaded) where an unloaded agent answers in milliseconds.
. "$(dirname "$0")/lib.sh"

SLOW="python3 $MLWATCH_SRC/tests/integration/slow_clients.py"
CLIENT=$WORK/client
cc -O1 -o "$CLIENT" "$MLWATCH_SRC/tests/integration/store_rw_client.c" -lsnappy -lcurl ||
    fail "cannot compile the remote-write client"
T0=$(( $(date +%s) * 1000 - 60000 ))
# Every 127/8 address reaches the loopback listener: each is a client
# address of its own for the per-address limit (64 by default).
SIX=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7

# hostile COUNT MODE SECONDS SOURCES: starts slow_clients.py in the
# background (HOSTILE_PID) and returns once every connection is attempted.
hostile() {
    rm -f "$WORK/ready" "$WORK/report"
    $SLOW "$AGENT_PORT" "$1" "$2" "$3" "$WORK/ready" "$WORK/report" "$4" &
    HOSTILE_PID=$!
    PIDS+=("$HOSTILE_PID")
    wait_for 60 test -s "$WORK/ready" || fail "slow_clients.py did not open its $1 connections"
    expect_eq "$1 $2 connections opened" "$1" "$(cat "$WORK/ready")"
}
report() { awk -v k="$1" '$1 == k {print $2}' "$WORK/report"; }
end_hostile() { wait "$HOSTILE_PID" || fail "slow_clients.py failed"; }

# still_serving WHAT: /metrics, /-/ready and a remote write answer.
WRITES=0
still_serving() {
    expect_eq "/metrics $1" 200 "$(curl -s -m 20 -o /dev/null -w '%{http_code}' "$AGENT_URL/metrics")"
    expect_eq "/-/ready $1" 200 "$(curl -s -m 20 -o /dev/null -w '%{http_code}' "$AGENT_URL/-/ready")"
    WRITES=$((WRITES + 1))
    expect_eq "remote write $1" "204 " \
        "$("$CLIENT" one "$AGENT_URL/api/v1/write" slow_clients_write n "$WRITES" "$((T0 + WRITES * 1000))" "$WRITES")"
}

start_agent --data-dir "$WORK/d" --interval 1s --disable-collectors gpu \
    --http-idle-timeout 25s --http-header-timeout 3s
AGENT_PORT=${AGENT_URL##*:}

# 1. 300 idle connections, 50 per address: inside the total limit (512),
# they cost the server nothing, and the idle deadline ends them. (With
# room for 256, a new connection waited in the kernel's backlog until idle
# ones timed out: 25 s here, longer than curl's 20.)
hostile 300 idle 30 "$SIX"
still_serving "with 300 idle connections open"
end_hostile
expect_eq "idle connections closed by the server" 300 "$(report closed_by_server)"

# 2. 260 slowloris connections (a header line a second, never the end of
# the headers): the header deadline (3 s, total) closes every one of them,
# although each line restarts libmicrohttpd's idle timer.
hostile 260 drip 15 "$SIX"
still_serving "with 260 connections dripping headers"
end_hostile
expect_eq "dripping connections closed by the server" 260 "$(report closed_by_server)"
expect_eq "dripping connections left open" 0 "$(report open_at_end)"
expect_eq "log lines about slow clients" 1 "$(grep -c 'whose headers took longer than --http-header-timeout' "$WORK/agent.log")"

# 3. 100 connections sending the request line a byte every two seconds:
# the idle deadline (25 s from the connection's start, total) ends them
# before the line is complete (23 bytes, 46 s).
hostile 100 line 30 "$SIX"
still_serving "with 100 connections dripping the request line"
end_hostile
expect_eq "request-line drippers closed by the server" 100 "$(report closed_by_server)"

# 4. 100 connections from one address: 64 are held, the rest closed at once.
hostile 100 idle 2 127.0.0.8
still_serving "with 64 connections from one address"
end_hostile
expect_eq "connections over the per-address limit closed" 36 "$(report closed_by_server)"
expect_eq "connections from one address held" 64 "$(report open_at_end)"

# The writes of the agent's lifetime were all stored.
expect_eq "writes stored" "$WRITES" "$(curl -s "$AGENT_URL/api/v1/store/count?match=slow_clients_write" | awk '/^samples/{print $2}')"
stop_process "$AGENT_PID" || fail "the agent did not stop"

# 5. A total limit of 100 and 300 idle connections from six addresses: each
# new connection past the limit closes the oldest one that has not sent a
# request, so the limit never locks out a scrape or a health check. The
# connections of the curls below may evict one more of the 300.
start_agent --data-dir "$WORK/d" --interval 1s --disable-collectors gpu --http-max-connections 100
AGENT_PORT=${AGENT_URL##*:}
hostile 300 idle 4 "$SIX"
still_serving "with 300 idle connections against a limit of 100"
expect_eq "/-/healthy at the limit" 200 "$(curl -s -m 20 -o /dev/null -w '%{http_code}' "$AGENT_URL/-/healthy")"
end_hostile
evicted=$(report closed_by_server)
if [ "$evicted" -lt 200 ] || [ "$evicted" -gt 204 ]; then
    fail "the server closed $evicted of 300 idle connections at a limit of 100; expected 200 (up to 204 with the curls' own)"
fi
ok
http_ok "$AGENT_URL/metrics" || fail "no /metrics after the hostile connections ended"
ok
done_ok
