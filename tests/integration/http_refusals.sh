#!/usr/bin/env bash
# http_refusals.sh - what the HTTP server refuses is counted, by bounded
# reason, in mlwatch_http_requests_refused_total (docs/http.md), exactly:
#   - 401 (no token, unknown token), 403 (a token without the role), 415
#     (a browser-postable Content-Type), 413 (a body over 16 MiB), 503 (the
#     query lane full), deadline (headers past --http-header-timeout, a
#     body past --http-body-timeout, an answer not read within
#     --http-write-timeout), connection_limit;
#   - requests without a valid token never take a query lane slot: with the
#     only lane thread busy and no queue, they get 401, never 503;
#   - a client that stops reading an answer is closed by
#     --http-write-timeout;
#   - per_ip_limit: connections from an address past
#     --http-max-connections-per-ip are closed at once and counted one by
#     one, other addresses are still served, and the address gets its slots
#     back once its connections close.
source "$(dirname "$0")/lib.sh"

for r in read write metrics; do printf '%s-token-for-refusals-0123\n' "$r" >"$WORK/$r.tok"; done
read_tok=$(cat "$WORK/read.tok")
write_tok=$(cat "$WORK/write.tok")
metrics_tok=$(cat "$WORK/metrics.tok")

# The UI proxy's upstream answers after 3 s: a request through it holds the
# one lane thread that long.
cat >"$WORK/slow.py" <<'EOF'
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(3)
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
python3 "$WORK/slow.py" "$WORK/slow.port" &
PIDS+=($!)
wait_for 10 test -s "$WORK/slow.port" || fail "the slow upstream did not start"

root=$(fixture_copy rapl-cpufreq)
start_agent --root "$root" --interval 200ms --read-token-file "$WORK/read.tok" \
    --write-token-file "$WORK/write.tok" --metrics-token-file "$WORK/metrics.tok" \
    --query-max-concurrency 1 --query-max-queued 0 --http-header-timeout 1s --http-body-timeout 2s \
    --http-write-timeout 1s --http-max-connections 40 --http-max-connections-per-ip 30 --query-max-points 100000000 \
    --query-url "http://127.0.0.1:$(cat "$WORK/slow.port")"
port=${AGENT_URL##*:}
code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }
refused() { # REASON: the count in the latest /metrics
    curl -s -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics" |
        sed -n "s/^mlwatch_http_requests_refused_total{node=\"t1\",reason=\"$1\"} //p;s/^mlwatch_http_requests_refused_total{reason=\"$1\",node=\"t1\"} //p"
}
closed() {
    curl -s -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics" |
        sed -n "s/^mlwatch_http_connections_closed_total{node=\"t1\",reason=\"$1\"} //p;s/^mlwatch_http_connections_closed_total{reason=\"$1\",node=\"t1\"} //p"
}
# counts_are REASON=N...: every count as given, once a cycle has published them.
counts_are() {
    local kv
    for kv in "$@"; do [ "$(refused "${kv%%=*}")" = "${kv#*=}" ] || return 1; done
}
expect_counts() {
    WAIT_EVERY=0.2 wait_for 5 counts_are "$@" || {
        curl -s -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics" | grep '^mlwatch_http_' >&2
        fail "refusal counts are not $*"
    }
    ok
}
all_zero=(unauthenticated=0 forbidden=0 unsupported_media_type=0 too_large=0 query_queue_full=0 per_ip_limit=0 deadline=0 connection_limit=0)
expect_counts "${all_zero[@]}"

# 401, 403, 415, 413.
for _ in 1 2 3; do expect_eq "a query without a token" 401 "$(code "$AGENT_URL/api/v1/query?query=up")"; done
expect_eq "an unknown token" 401 "$(code -H 'Authorization: Bearer no-such-token-0123456789' "$AGENT_URL/api/v1/query?query=up")"
for _ in 1 2; do expect_eq "a query with the write token" 403 "$(code -H "Authorization: Bearer $write_tok" "$AGENT_URL/api/v1/query?query=up")"; done
expect_eq "a write as text/plain" 415 "$(code -H "Authorization: Bearer $write_tok" -H 'Content-Type: text/plain' --data-binary x "$AGENT_URL/api/v1/write")"
head -c $((17 << 20)) /dev/zero >"$WORK/big.bin"
expect_eq "a 17 MiB write" 413 "$(code -H "Authorization: Bearer $write_tok" -H 'Content-Type: application/x-protobuf' --data-binary @"$WORK/big.bin" "$AGENT_URL/api/v1/write")"
expect_eq "a query with the read token" 200 "$(code -H "Authorization: Bearer $read_tok" "$AGENT_URL/api/v1/query?query=up")"
expect_counts unauthenticated=4 forbidden=2 unsupported_media_type=1 too_large=1 query_queue_full=0

# The lane: one thread, no queue, held for 3 s by a proxied query. Requests
# without a token are answered 401 at once (they never wait for the slot);
# one with the token gets 503.
curl -s -o "$WORK/held.body" -w '%{http_code}' -H "Authorization: Bearer $read_tok" \
    "$AGENT_URL/ui/api/v1/query?query=up" >"$WORK/held.code" &
held=$!
lane_busy() {
    curl -s -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics" |
        grep -q '^mlwatch_http_query_lane_running{node="t1"} 1$'
}
WAIT_EVERY=0.1 wait_for 3 lane_busy || fail "the proxied query does not hold the lane"
ok
t0=$(date +%s%N)
for _ in $(seq 10); do
    expect_eq "no token while the lane is full" 401 "$(code "$AGENT_URL/api/v1/query?query=up")"
    expect_eq "no token, UI proxy, while the lane is full" 401 "$(code "$AGENT_URL/ui/api/v1/query?query=up")"
done
expect_eq "with the token while the lane is full" 503 "$(code -H "Authorization: Bearer $read_tok" "$AGENT_URL/api/v1/query?query=up")"
expect_eq "Retry-After" "Retry-After: 1" "$(curl -s -D - -o /dev/null -H "Authorization: Bearer $read_tok" "$AGENT_URL/api/v1/query?query=up" | tr -d '\r' | grep -i '^retry-after')"
elapsed_ms=$((($(date +%s%N) - t0) / 1000000))
[ "$elapsed_ms" -lt 2500 ] || fail "the refusals took ${elapsed_ms} ms: they waited for the lane"
ok
wait "$held"
expect_eq "the held query" 200 "$(cat "$WORK/held.code")"
expect_counts unauthenticated=24 query_queue_full=2 deadline=0

# Deadline: a request line, then no headers for longer than 1 s.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /metrics HTTP/1.1\r\n' >&3
expect_counts deadline=1
exec 3>&-

# Deadline: a write whose body stops after 10 of its 100 bytes, for longer
# than 2 s (--http-body-timeout).
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /api/v1/write HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\n0123456789' "$write_tok" >&3
expect_counts deadline=2
WAIT_EVERY=0.2 wait_for 5 test "$(closed body_timeout)" = 1 || fail "body_timeout closes: $(closed body_timeout)"
ok
expect_eq "what the server sent the stalled write" "" "$(timeout 5 cat <&3 | head -c 200)"
exec 3>&-

# A client that stops reading a large answer (tens of MB: every series at
# 1000 steps) is closed 1 s (--http-write-timeout) after its answer was ready.
end=$(($(date +%s) - 1))
python3 - "$port" "$read_tok" "$end" >"$WORK/reader.out" <<'EOF'
import socket, sys, time
port, tok, now = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
q = "/api/v1/query_range?query=%%7B__name__%%3D~%%22mlwatch_.%%2B%%22%%7D&start=%d&end=%d&step=0.01" % (now - 10, now)
s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % (q, tok)).encode())
s.recv(100)  # the answer has begun
time.sleep(4)  # not reading: past the write deadline
got, t0 = 0, time.time()
try:
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        got += len(b)
except ConnectionResetError:
    pass
print("closed" if time.time() - t0 < 5 else "still-open", got)
EOF
read -r state got <"$WORK/reader.out"
expect_eq "a client that stopped reading" closed "$state"
full=$(curl -s -o /dev/null -w '%{size_download}' -H "Authorization: Bearer $read_tok" --get \
    --data-urlencode 'query={__name__=~"mlwatch_.+"}' --data-urlencode "start=$((end - 10))" \
    --data-urlencode "end=$end" --data-urlencode step=0.01 "$AGENT_URL/api/v1/query_range")
echo "the slow reader got $got bytes of an answer of $full (with headers, chunked)"
[ "$got" -lt "$full" ] || fail "the reader got $got bytes of $full: the answer was not cut"
ok
WAIT_EVERY=0.2 wait_for 5 test "$(closed write_timeout)" = 1 || fail "write_timeout closes: $(closed write_timeout)"
ok
expect_counts deadline=3
grep -q 'warn http: closed 1 connections whose answer took longer than --http-write-timeout to be read' "$WORK/agent.log" ||
    fail "no log line for the slow reader"
ok

# hold.py ADDR N: N connections from source address ADDR (any address of
# 127/8 is this host), one after the other; prints how many the server
# closed at once and which, then holds the rest until $WORK/release exists.
cat >"$WORK/hold.py" <<'PY'
import os, socket, sys, time
addr, n, port, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
work = os.path.dirname(out)
socks = []
for _ in range(n):
    s = socket.socket()
    s.bind((addr, 0))
    s.connect(("127.0.0.1", port))
    socks.append(s)
    time.sleep(0.005)  # accepted in order: the first ones are those kept
time.sleep(1)
closed = []
for i, s in enumerate(socks):
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            closed.append(i)
    except BlockingIOError:
        pass
    except ConnectionResetError:
        closed.append(i)
with open(out + ".tmp", "w") as f:
    f.write("%d %s\n" % (len(closed), ",".join(map(str, closed))))
os.rename(out + ".tmp", out)
while not os.path.exists(os.path.join(work, "release")):
    time.sleep(0.05)
for s in socks:
    s.close()
PY
HOLD_PIDS=()
hold() { # ADDR N: starts holding, returns once the closed ones are known
    local out="$WORK/hold-$1.out"
    rm -f "$out" "$WORK/release"
    python3 "$WORK/hold.py" "$1" "$2" "$port" "$out" &
    HOLD_PIDS+=($!)
    PIDS+=($!)
    wait_for 15 test -s "$out" || fail "hold.py $1 $2 did not finish connecting"
}
release() { # every hold.py closes its connections
    touch "$WORK/release"
    wait "${HOLD_PIDS[@]}"
    HOLD_PIDS=()
}
connections_at_most() {
    local n
    n=$(curl -s -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics" |
        sed -n 's/^mlwatch_http_connections{node="t1"} //p')
    [ -n "$n" ] && [ "$n" -le "$1" ]
}
expect_settled() { # the held connections are closed and no longer counted
    WAIT_EVERY=0.2 wait_for 5 connections_at_most 1 || fail "the held connections are still counted"
    ok
}

# per_ip_limit: 35 connections from 127.0.0.2 against a limit of 30 per
# address: the last 5 are closed at once, the first 30 stay open.
hold 127.0.0.2 35
expect_eq "connections from 127.0.0.2 closed past the per-address limit" "5 30,31,32,33,34" "$(cat "$WORK/hold-127.0.0.2.out")"
# Other addresses are served meanwhile: a scrape, and 9 connections from
# 127.0.0.3 (30 + 9 stays under --http-max-connections 40).
expect_eq "a scrape from 127.0.0.1 while 127.0.0.2 is at its limit" 200 "$(code -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics")"
hold 127.0.0.3 9
expect_eq "9 connections from 127.0.0.3 while 127.0.0.2 holds 30" "0 " "$(cat "$WORK/hold-127.0.0.3.out")"
release
expect_counts per_ip_limit=5 connection_limit=0
# Once its connections have closed, the address has its 30 slots again.
expect_settled
hold 127.0.0.2 30
expect_eq "30 connections from 127.0.0.2 after its first ones closed" "0 " "$(cat "$WORK/hold-127.0.0.2.out")"
release
expect_counts per_ip_limit=5
expect_eq "log lines for 5 per-address refusals (one per quiet period)" 1 \
    "$(grep -c 'warn http: closed a new connection from an address that already holds --http-max-connections-per-ip 30$' "$WORK/agent.log" || true)"

# connection_limit: 41 idle connections against a limit of 40, from two
# addresses each under its own limit of 30: the oldest is evicted.
# (Closed before the count is read: each /metrics request would be one more.)
expect_settled
hold 127.0.0.4 30
hold 127.0.0.5 11
release
expect_eq "connections closed at once from 127.0.0.4 and 127.0.0.5 (the eviction comes later)" "0 ;0 " \
    "$(cat "$WORK/hold-127.0.0.4.out");$(cat "$WORK/hold-127.0.0.5.out")"
expect_counts unauthenticated=24 forbidden=2 unsupported_media_type=1 too_large=1 query_queue_full=2 per_ip_limit=5 deadline=3 connection_limit=1
# No token in a label or the log.
expect_eq "tokens in /metrics or the log" 0 "$( (curl -s -H "Authorization: Bearer $metrics_tok" "$AGENT_URL/metrics"; cat "$WORK/agent.log") | grep -c -e "$read_tok" -e "$write_tok" -e "$metrics_tok" || true)"
done_ok
