#!/usr/bin/env bash
# auth.sh - who may use which route (docs/security.md, issue 24 item 1):
#   - with a token file per role, every guarded route answers 401 with
#     WWW-Authenticate: Bearer without a token or with an unknown one, 403
#     with a token of another role, and serves the right role; /-/healthy
#     and /-/ready stay open;
#   - a token file rewritten on disk (as a Kubernetes Secret is: a new file
#     renamed over the old) takes effect without a restart, the old token
#     refused; a malformed rewrite keeps the last good tokens;
#   - no token, good or bad, appears in the log or in /metrics;
#   - a malformed token file stops the agent at start, naming file and line;
#   - without token files, on a loopback --listen everything is open; on
#     any other address writes and admin are refused (403) and reads and
#     /metrics stay open;
#   - a browser page cannot post to /api/v1/write or the admin routes
#     without a preflight: text/plain, forms and multipart get 415, and no
#     response carries a CORS header.
source "$(dirname "$0")/lib.sh"

CLIENT=$WORK/client
cc -O1 -o "$CLIENT" "$MLWATCH_SRC/tests/integration/store_rw_client.c" -lsnappy -lcurl ||
    fail "cannot compile the remote-write client"
T0=$(( $(date +%s) * 1000 ))

READ=read-token-AAAAAAAAAAAAAAAAAAAA
READ2=read-token-rotated-BBBBBBBBBBBB
WRITE=write-token-CCCCCCCCCCCCCCCCCCC
ADMIN=admin-token-DDDDDDDDDDDDDDDDDDD
METRICS=metrics-token-EEEEEEEEEEEEEEEEE
WRONG=nobody-token-FFFFFFFFFFFFFFFFFF
printf '%s\n' "$READ" >"$WORK/read.tok"
printf '# the hub'"'"'s writers\n\n  %s  \n' "$WRITE" >"$WORK/write.tok"
printf '%s\r\n' "$ADMIN" >"$WORK/admin.tok"
printf '%s\n' "$METRICS" >"$WORK/metrics.tok"

# status METHOD PATH TOKEN [CURL ARGS...]: the HTTP status.
status() {
    local m=$1 p=$2 t=$3
    shift 3
    local auth=()
    [ -n "$t" ] && auth=(-H "Authorization: Bearer $t")
    curl -s -o "$WORK/body" -D "$WORK/headers" -w '%{http_code}' -X "$m" "${auth[@]}" "$@" \
        "$AGENT_URL$p"
}
header() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$WORK/headers"; }

start_agent --interval 200ms --read-token-file "$WORK/read.tok" --write-token-file "$WORK/write.tok" \
    --admin-token-file "$WORK/admin.tok" --metrics-token-file "$WORK/metrics.tok"

# 1. Every guarded route: none, unknown, wrong role, right role.
check_route() { # ROLE-TOKEN METHOD PATH WANT [CURL ARGS...]
    local good=$1 m=$2 p=$3 want=$4
    shift 4
    expect_eq "$m $p without a token" 401 "$(status "$m" "$p" "" "$@")"
    expect_eq "$m $p: WWW-Authenticate" 'Bearer realm="mlwatch"' "$(header WWW-Authenticate)"
    expect_eq "$m $p: body without a token" "no Authorization header: this path needs a bearer token with the $role role" "$(cat "$WORK/body")"
    expect_eq "$m $p with an unknown token" 401 "$(status "$m" "$p" "$WRONG" "$@")"
    expect_eq "$m $p: WWW-Authenticate (unknown)" 'Bearer realm="mlwatch"' "$(header WWW-Authenticate)"
    expect_eq "$m $p: body (unknown)" "unknown bearer token: this path needs a bearer token with the $role role" "$(cat "$WORK/body")"
    local other=$READ
    [ "$good" = "$READ" ] && other=$WRITE
    expect_eq "$m $p with a token of another role" 403 "$(status "$m" "$p" "$other" "$@")"
    expect_eq "$m $p: body (other role)" "this bearer token does not have the $role role" "$(cat "$WORK/body")"
    expect_eq "$m $p: no WWW-Authenticate on 403" "" "$(header WWW-Authenticate)"
    expect_eq "$m $p with its role's token" "$want" "$(status "$m" "$p" "$good" "$@")"
}
role="read"
for p in "/api/v1/query?query=up" "/api/v1/query_range?query=up&start=1&end=2&step=1" \
    "/api/v1/series?match[]=up" /api/v1/labels /api/v1/label/__name__/values /api/v1/metadata \
    /api/v1/status/buildinfo /api/v1/findings /api/v1/gpu/events "/api/v1/store/count?match=up" /ui/config.json; do
    check_route "$READ" GET "$p" 200
done
check_route "$READ" POST /api/v1/query 200 --data-urlencode query=up
role="metrics"
check_route "$METRICS" GET /metrics 200
role="admin"
check_route "$ADMIN" POST /api/v1/store/snapshot 200
check_route "$ADMIN" POST /api/v1/store/compact 200
role="write"
check_route "$WRITE" POST /api/v1/write 400 -H 'Content-Type: application/x-protobuf' --data-binary x
expect_eq "write with the token" "204 " "$(RW_AUTHORIZATION="Bearer $WRITE" "$CLIENT" one "$AGENT_URL/api/v1/write" up job a "$T0" 1)"
expect_eq "write without a token" "401 no Authorization header: this path needs a bearer token with the write role" "$("$CLIENT" one "$AGENT_URL/api/v1/write" up job b "$T0" 1)"
expect_eq "write with a read token" "403 this bearer token does not have the write role" "$(RW_AUTHORIZATION="Bearer $READ" "$CLIENT" one "$AGENT_URL/api/v1/write" up job c "$T0" 1)"
expect_eq "basic auth is not a bearer token" 401 "$(curl -s -o "$WORK/body" -w '%{http_code}' -u "x:$READ" "$AGENT_URL/api/v1/labels")"
expect_eq "basic auth: message" "the Authorization header is not a bearer token: this path needs a bearer token with the read role" "$(cat "$WORK/body")"
expect_eq "the scheme is case-insensitive" 200 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: bearer $READ" "$AGENT_URL/api/v1/labels")"
expect_eq "a token's prefix is no token" 401 "$(status GET /api/v1/labels "${READ%A}")"
expect_eq "a token with more is no token" 401 "$(status GET /api/v1/labels "${READ}A")"
expect_eq "one stored sample (the refused writes stored nothing)" "$(printf 'series 1\nsamples 1')" \
    "$(curl -s -H "Authorization: Bearer $READ" "$AGENT_URL/api/v1/store/count?match=up" | grep -E '^(series|samples) ')"
for p in /-/healthy /-/ready; do
    expect_eq "$p is open" 200 "$(status GET $p "")"
done
# A refused request with a body is answered without reading it.
big=$WORK/big
head -c $((8 << 20)) /dev/zero >"$big"
expect_eq "a refused 8 MiB write" 401 "$(status POST /api/v1/write "" -H 'Content-Type: application/x-protobuf' --data-binary @"$big")"

# 2. Rotation: a new file renamed over the old one.
printf '%s\n' "$READ2" >"$WORK/read.tok.new"
mv "$WORK/read.tok.new" "$WORK/read.tok"
rotated() { [ "$(status GET /api/v1/labels "$READ2")" = 200 ]; }
wait_for 10 rotated || fail "the rotated read token is not accepted: $(cat "$WORK/body")"
ok
expect_eq "the old token after rotation" 401 "$(status GET /api/v1/labels "$READ")"
grep -q "info auth: token file $WORK/read.tok re-read: 1 token(s)$" "$WORK/agent.log" ||
    fail "no log line for the re-read token file"
ok
# A malformed rewrite (a space inside a token) keeps the last good tokens.
printf 'has a space-inside-it-0123456789\n' >"$WORK/read.tok.new"
mv "$WORK/read.tok.new" "$WORK/read.tok"
kept() { status GET /api/v1/labels "$READ2" >/dev/null; grep -q "warn auth: token file $WORK/read.tok:1: a token must be 16 to 255 characters of A-Z a-z 0-9 - . _ ~ + / (then = padding); keeping its last tokens" "$WORK/agent.log"; }
wait_for 10 kept || fail "no warning for the malformed token file: $(tail -3 "$WORK/agent.log")"
ok
expect_eq "the last good token after a malformed rewrite" 200 "$(status GET /api/v1/labels "$READ2")"

# 3. No token in the log or in /metrics.
curl -s -H "Authorization: Bearer $METRICS" "$AGENT_URL/metrics" >"$WORK/metrics.txt"
grep -q '^mlwatch_' "$WORK/metrics.txt" || fail "/metrics with its token is empty"
for t in "$READ" "$READ2" "$WRITE" "$ADMIN" "$METRICS" "$WRONG" "space-inside-it"; do
    expect_eq "lines of the log with a token" 0 "$(grep -c -- "$t" "$WORK/agent.log" || true)"
    expect_eq "lines of /metrics with a token" 0 "$(grep -c -- "$t" "$WORK/metrics.txt" || true)"
done
stop_process "$AGENT_PID"

# 4. A malformed token file at start.
printf '%s\nshort\n' "$READ" >"$WORK/bad.tok"
rc=0
"$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
    --write-token-file "$WORK/bad.tok" >"$WORK/bad.log" 2>&1 || rc=$?
expect_eq "exit status with a bad token file" 1 "$rc"
expect_eq "message" "mlwatch: --write-token-file $WORK/bad.tok:2: a token must be 16 to 255 characters of A-Z a-z 0-9 - . _ ~ + / (then = padding)" "$(cat "$WORK/bad.log")"
rc=0
"$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
    --read-token-file "$WORK/missing.tok" >"$WORK/bad.log" 2>&1 || rc=$?
expect_eq "exit status with a missing token file" 1 "$rc"
expect_eq "message" "mlwatch: --read-token-file $WORK/missing.tok: No such file or directory" "$(cat "$WORK/bad.log")"
printf '# nothing\n\n' >"$WORK/empty.tok"
rc=0
"$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
    --admin-token-file "$WORK/empty.tok" >"$WORK/bad.log" 2>&1 || rc=$?
expect_eq "exit status with an empty token file" 1 "$rc"
expect_eq "message" "mlwatch: --admin-token-file $WORK/empty.tok: no token in the file" "$(cat "$WORK/bad.log")"

# 5. No token files, loopback: open; and no browser-postable writes.
start_agent --interval 200ms
expect_eq "loopback: write" "204 " "$("$CLIENT" one "$AGENT_URL/api/v1/write" up job a "$T0" 1)"
expect_eq "loopback: compact" 200 "$(status POST /api/v1/store/compact "")"
expect_eq "loopback: query" 200 "$(status GET "/api/v1/query?query=up" "")"
for ct in text/plain 'text/plain;charset=UTF-8' application/x-www-form-urlencoded 'multipart/form-data; boundary=x' application/json; do
    expect_eq "write as $ct" 415 "$(status POST /api/v1/write "" -H "Content-Type: $ct" --data-binary x)"
    expect_eq "message ($ct)" "remote write needs Content-Type: application/x-protobuf (got '$ct')" "$(cat "$WORK/body")"
done
expect_eq "write without Content-Type" 415 "$(status POST /api/v1/write "" -H "Content-Type:" --data-binary x)"
expect_eq "message (none)" "remote write needs Content-Type: application/x-protobuf (got 'none')" "$(cat "$WORK/body")"
for ct in text/plain application/x-www-form-urlencoded 'multipart/form-data; boundary=x'; do
    expect_eq "compact as $ct" 415 "$(status POST /api/v1/store/compact "" -H "Content-Type: $ct" --data-binary x)"
    expect_eq "message ($ct)" "Content-Type '$ct' is refused here: a browser page may post it without a CORS preflight" "$(cat "$WORK/body")"
done
expect_eq "nothing of the refused writes stored" "samples 1" \
    "$(curl -s "$AGENT_URL/api/v1/store/count?match=up" | grep '^samples ')"
# A preflight gets no permission, and no answer carries a CORS header.
status OPTIONS /api/v1/write "" -H 'Origin: http://evil.example' \
    -H 'Access-Control-Request-Method: POST' >/dev/null
expect_eq "CORS headers on a preflight" "" "$(grep -i '^access-control-' "$WORK/headers" || true)"
status POST /api/v1/write "" -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' --data-binary x >/dev/null
expect_eq "CORS headers on a refused write" "" "$(grep -i '^access-control-' "$WORK/headers" || true)"
stop_process "$AGENT_PID"

# 6. No token files, all interfaces: writes and admin refused.
start_agent --interval 200ms --listen 0.0.0.0:0
expect_eq "all interfaces: write" "403 write requests are refused: mlwatch listens on 0.0.0.0:0, not a loopback address, and --write-token-file is not set (docs/security.md)" "$("$CLIENT" one "$AGENT_URL/api/v1/write" up job a "$T0" 1)"
expect_eq "all interfaces: compact" 403 "$(status POST /api/v1/store/compact "")"
expect_eq "message" "admin requests are refused: mlwatch listens on 0.0.0.0:0, not a loopback address, and --admin-token-file is not set (docs/security.md)" "$(cat "$WORK/body")"
expect_eq "all interfaces: query" 200 "$(status GET "/api/v1/query?query=up" "")"
expect_eq "all interfaces: /metrics" 200 "$(status GET /metrics "")"
stop_process "$AGENT_PID"
# ... until a write token file is given.
start_agent --interval 200ms --listen 0.0.0.0:0 --write-token-file "$WORK/write.tok"
expect_eq "all interfaces, write token" "204 " "$(RW_AUTHORIZATION="Bearer $WRITE" "$CLIENT" one "$AGENT_URL/api/v1/write" up job z "$T0" 1)"
expect_eq "all interfaces, write token: admin still refused" 403 "$(status POST /api/v1/store/compact "$WRITE")"
done_ok
