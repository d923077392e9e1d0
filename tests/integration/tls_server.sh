#!/usr/bin/env bash
# tls_server.sh - the agent serving HTTPS (docs/security.md, issue 24 item 1),
# with certificates made here by openssl:
#   - --tls-cert-file/--tls-key-file: curl --cacert verifies it, plain HTTP
#     gets no answer;
#   - a certificate rotated on disk is served from the next handshake on,
#     without a restart; a certificate whose key has not followed yet keeps
#     the previous pair (and says so in the log);
#   - --tls-client-ca-file: without a client certificate, or with one of
#     another CA, guarded routes answer 403 and /-/healthy stays open; with
#     a certificate of that CA they serve;
#   - mismatched or missing files stop the agent at start with a message;
#   - an agent remote-writes to a "hub" agent over HTTPS with a bearer token
#     from a file, as in the manifests; without the token nothing arrives.
source "$(dirname "$0")/lib.sh"

ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'
for ca in ca other-ca; do
    # shellcheck disable=SC2086
    openssl req -x509 $ec -keyout "$WORK/$ca.key" -out "$WORK/$ca.pem" -days 1 \
        -subj "/CN=mlwatch test $ca" 2>>"$WORK/openssl.log" || fail "openssl: cannot make $ca"
done
# sign NAME CA CN EXT: NAME.key and NAME.pem signed by CA.
sign() {
    # shellcheck disable=SC2086
    openssl req -new $ec -keyout "$WORK/$1.key" -out "$WORK/$1.csr" -subj "/CN=$3" \
        2>>"$WORK/openssl.log" || fail "openssl: cannot make the key of $1"
    printf '%s\nbasicConstraints=CA:FALSE\n' "$4" >"$WORK/$1.ext"
    openssl x509 -req -in "$WORK/$1.csr" -CA "$WORK/$2.pem" -CAkey "$WORK/$2.key" \
        -CAcreateserial -days 1 -extfile "$WORK/$1.ext" -out "$WORK/$1.pem" \
        2>>"$WORK/openssl.log" || fail "openssl: cannot sign $1"
}
server_ext='subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth'
sign server ca "first server" "$server_ext"
sign rotated ca "rotated server" "$server_ext"
sign client ca "a client" "extendedKeyUsage=clientAuth"
sign stranger other-ca "a stranger" "extendedKeyUsage=clientAuth"
cp "$WORK/server.pem" "$WORK/tls.crt"
cp "$WORK/server.key" "$WORK/tls.key"

# start_tls_agent ARGS...: start_agent for an agent serving HTTPS.
start_tls_agent() {
    : >"$WORK/agent.log"
    "$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
        --tls-cert-file "$WORK/tls.crt" --tls-key-file "$WORK/tls.key" "$@" >"$WORK/agent.log" 2>&1 &
    AGENT_PID=$!
    PIDS+=("$AGENT_PID")
    wait_for 20 agent_started || true
    [ -n "$(agent_port)" ] || fail "the TLS agent does not listen: $(head -c 600 "$WORK/agent.log")"
    AGENT_URL="https://127.0.0.1:$(agent_port)"
    https_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" "$AGENT_URL/-/ready")" = 200 ]; }
    wait_for 20 https_ready || fail "no HTTPS answer from $AGENT_URL/-/ready"
}
code() { curl -s -o "$WORK/body" -w '%{http_code}' --cacert "$WORK/ca.pem" "$@"; }
served_subject() {
    openssl s_client -connect "127.0.0.1:$(agent_port)" </dev/null 2>/dev/null |
        openssl x509 -noout -subject -nameopt RFC2253 2>/dev/null
}

# 1. HTTPS, verified by the CA.
start_tls_agent --interval 200ms
grep -q " info agent: mlwatch .* listening on 127.0.0.1:0 (port [0-9]*) with TLS, " "$WORK/agent.log" ||
    fail "the log does not say TLS"
ok
expect_eq "GET /metrics over HTTPS" 200 "$(code "$AGENT_URL/metrics")"
expect_eq "a query over HTTPS" 200 "$(code "$AGENT_URL/api/v1/query?query=up")"
expect_eq "plain HTTP on the TLS port" 000 "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$(agent_port)/metrics")"
expect_eq "a client without the CA" 000 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/metrics")"
expect_eq "served certificate" "subject=CN=first server" "$(served_subject)"

# 2. Rotation on disk: the certificate first (its key not yet), then the key.
cp "$WORK/rotated.pem" "$WORK/tls.crt"
warned() { served_subject >/dev/null; grep -q "warn tls: TLS certificate not reloaded: $WORK/tls.key is not the key of the certificate in $WORK/tls.crt; serving the previous one" "$WORK/agent.log"; }
WAIT_EVERY=0.3 wait_for 10 warned || fail "no warning for a certificate without its key: $(tail -2 "$WORK/agent.log")"
ok
expect_eq "served while the key lags" "subject=CN=first server" "$(served_subject)"
expect_eq "still verified while the key lags" 200 "$(code "$AGENT_URL/metrics")"
cp "$WORK/rotated.key" "$WORK/tls.key"
is_rotated() { [ "$(served_subject)" = "subject=CN=rotated server" ]; }
WAIT_EVERY=0.3 wait_for 10 is_rotated || fail "the rotated certificate is not served: $(served_subject)"
ok
expect_eq "verified after rotation" 200 "$(code "$AGENT_URL/metrics")"
expect_eq "the same process" "$AGENT_PID" "$(pgrep -f -- "--state-dir $WORK/state" | head -1)"
grep -q "info tls: TLS certificate $WORK/tls.crt re-read$" "$WORK/agent.log" || fail "no log line for the rotation"
ok
stop_process "$AGENT_PID"

# 3. Mutual TLS.
cp "$WORK/server.pem" "$WORK/tls.crt"
cp "$WORK/server.key" "$WORK/tls.key"
start_tls_agent --interval 200ms --tls-client-ca-file "$WORK/ca.pem"
expect_eq "/metrics without a client certificate" 403 "$(code "$AGENT_URL/metrics")"
expect_eq "message" "this path needs a client certificate signed by the CA of --tls-client-ca-file" "$(cat "$WORK/body")"
expect_eq "a query without a client certificate" 403 "$(code "$AGENT_URL/api/v1/query?query=up")"
expect_eq "/-/healthy without a client certificate" 200 "$(code "$AGENT_URL/-/healthy")"
expect_eq "/metrics with a client certificate" 200 "$(code --cert "$WORK/client.pem" --key "$WORK/client.key" "$AGENT_URL/metrics")"
expect_eq "/metrics with another CA's client certificate" 403 "$(code --cert "$WORK/stranger.pem" --key "$WORK/stranger.key" "$AGENT_URL/metrics")"
# The client CA rotated on disk: the other CA's clients from then on, without
# a restart, and no longer the first CA's; a broken file keeps the last good CA.
cp "$WORK/ca.pem" "$WORK/client-ca.pem"
stop_process "$AGENT_PID"
start_tls_agent --interval 200ms --tls-client-ca-file "$WORK/client-ca.pem"
expect_eq "the first CA's client" 200 "$(code --cert "$WORK/client.pem" --key "$WORK/client.key" "$AGENT_URL/metrics")"
cp "$WORK/other-ca.pem" "$WORK/client-ca.pem.new"
mv "$WORK/client-ca.pem.new" "$WORK/client-ca.pem"
stranger_in() { [ "$(code --cert "$WORK/stranger.pem" --key "$WORK/stranger.key" "$AGENT_URL/metrics")" = 200 ]; }
WAIT_EVERY=0.3 wait_for 10 stranger_in || fail "the rotated client CA is not used: $(tail -3 "$WORK/agent.log")"
ok
expect_eq "the first CA's client after the rotation" 403 "$(code --cert "$WORK/client.pem" --key "$WORK/client.key" "$AGENT_URL/metrics")"
grep -q "info tls: client CA $WORK/client-ca.pem re-read$" "$WORK/agent.log" || fail "no log line for the client CA"
ok
printf 'not a certificate\n' >"$WORK/client-ca.pem"
warned_ca() { code "$AGENT_URL/metrics" >/dev/null; grep -q "warn tls: client CA not reloaded: $WORK/client-ca.pem: no PEM CA certificate in it: No certificate was found.; verifying with the previous one" "$WORK/agent.log"; }
WAIT_EVERY=0.3 wait_for 10 warned_ca || fail "no warning for a broken client CA: $(tail -2 "$WORK/agent.log")"
ok
expect_eq "the other CA's client with a broken file" 200 "$(code --cert "$WORK/stranger.pem" --key "$WORK/stranger.key" "$AGENT_URL/metrics")"
expect_eq "the same process" "$AGENT_PID" "$(pgrep -f -- "--tls-client-ca-file $WORK/client-ca.pem" | head -1)"
stop_process "$AGENT_PID"

# 3b. `mlwatch query` and `mlwatch doctor` against an HTTPS agent that
# takes reads only with a token: --ca-file, --token-file, and
# --tls-server-name for a certificate that names the agent "mlwatch" (as
# the manifests' does) reached at 127.0.0.1.
sign named ca "named server" "subjectAltName=DNS:mlwatch
extendedKeyUsage=serverAuth"
cp "$WORK/named.pem" "$WORK/tls.crt"
cp "$WORK/named.key" "$WORK/tls.key"
printf 'reader-token-for-the-cli-0123\n' >"$WORK/read.tok"
: >"$WORK/agent.log"
"$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
    --tls-cert-file "$WORK/tls.crt" --tls-key-file "$WORK/tls.key" --read-token-file "$WORK/read.tok" \
    --interval 200ms >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
PIDS+=("$AGENT_PID")
wait_for 20 agent_started || fail "the agent does not listen: $(head -c 600 "$WORK/agent.log")"
port=$(agent_port)
named_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" --resolve "mlwatch:$port:127.0.0.1" "https://mlwatch:$port/-/ready")" = 200 ]; }
wait_for 20 named_ready || fail "no HTTPS answer for the name mlwatch"
cli=(--listen "127.0.0.1:$port" --ca-file "$WORK/ca.pem" --tls-server-name mlwatch)
# run_cli NAME ARGS...: NAME's exit status in $rc, stdout in $out, stderr in $err.
run_cli() {
    rc=0
    "$MLWATCH_BIN" "$@" >"$WORK/cli.out" 2>"$WORK/cli.err" || rc=$?
    out=$(cat "$WORK/cli.out")
    err=$(cat "$WORK/cli.err")
}
run_cli query "${cli[@]}" --token-file "$WORK/read.tok" 'vector(3)'
expect_eq "query with CA, server name and token: exit" 0 "$rc"
expect_eq "query with CA, server name and token" "{} 3" "$out"
run_cli query "${cli[@]}" 'vector(3)'
expect_eq "query without the token: exit" 1 "$rc"
case $err in *401*) ok ;; *) fail "query without the token: no 401 in: $err" ;; esac
run_cli query --listen "127.0.0.1:$port" --ca-file "$WORK/ca.pem" --token-file "$WORK/read.tok" 'vector(3)'
expect_eq "query without --tls-server-name (the certificate names mlwatch): exit" 1 "$rc"
case $err in "mlwatch query: https://127.0.0.1:$port/api/v1/query: "*) ok ;; *) fail "no TLS failure: $err" ;; esac
run_cli query --url "https://127.0.0.1:$port/" --tls-server-name mlwatch --token-file "$WORK/read.tok" 'vector(3)'
expect_eq "query without --ca-file: exit" 1 "$rc"
run_cli query --url "https://127.0.0.1:$port/" --ca-file "$WORK/ca.pem" --tls-server-name mlwatch \
    --token-file "$WORK/read.tok" 'vector(4)'
expect_eq "query with --url and --tls-server-name" "{} 4" "$out"
run_cli query "${cli[@]}" --token-file "$WORK/nope.tok" 'vector(3)'
expect_eq "a missing token file: exit" 2 "$rc"
expect_eq "a missing token file: message" "mlwatch query: $WORK/nope.tok: No such file or directory" "$err"
run_cli doctor "${cli[@]}" --token-file "$WORK/read.tok"
case $rc in 0 | 1) ok ;; *) fail "doctor with the token: exit $rc: $err" ;; esac
grep -q "the agent's history, https://mlwatch:$port/api/v1/findings" "$WORK/cli.out" ||
    fail "doctor did not read the agent's findings over HTTPS: $out $err"
ok
run_cli doctor "${cli[@]}"
expect_eq "doctor without the token: exit" 3 "$rc"
case $err in "mlwatch doctor: https://mlwatch:$port/api/v1/findings: HTTP 401: "*) ok ;; *) fail "doctor without the token: $err" ;; esac
expect_eq "the token is in no log or output" 0 "$(cat "$WORK/agent.log" "$WORK/cli.out" "$WORK/cli.err" | grep -c reader-token || true)"
stop_process "$AGENT_PID"
cp "$WORK/server.pem" "$WORK/tls.crt"
cp "$WORK/server.key" "$WORK/tls.key"

# 4. Bad files at start.
bad_start() { # WANT-MESSAGE ARGS...
    local want=$1 rc=0
    shift
    "$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
        "$@" >"$WORK/bad.log" 2>&1 || rc=$?
    expect_eq "exit status ($want)" 1 "$rc"
    expect_eq "message" "$want" "$(cat "$WORK/bad.log")"
}
bad_start "mlwatch: $WORK/client.key is not the key of the certificate in $WORK/server.pem" \
    --tls-cert-file "$WORK/server.pem" --tls-key-file "$WORK/client.key"
bad_start "mlwatch: --tls-cert-file and --tls-key-file go together" --tls-cert-file "$WORK/server.pem"
bad_start "mlwatch: $WORK/nope.pem: No such file or directory" \
    --tls-cert-file "$WORK/nope.pem" --tls-key-file "$WORK/server.key"
bad_start "mlwatch: $WORK/server.key: not a PEM certificate (chain of at most 16): No certificate was found." \
    --tls-cert-file "$WORK/server.key" --tls-key-file "$WORK/server.key"
bad_start "mlwatch: $WORK/server.csr: no PEM CA certificate in it: ASN1 parser: Error in TAG." --tls-cert-file "$WORK/server.pem" \
    --tls-key-file "$WORK/server.key" --tls-client-ca-file "$WORK/server.csr"

# 5. An agent shipping to a hub over HTTPS with a token (the manifests' way).
printf 'hub-writer-token-0123456789\n' >"$WORK/write.tok"
start_tls_agent --interval 1s --data-dir "$WORK/hub" --state-dir "$WORK/hub-state" \
    --write-token-file "$WORK/write.tok" --listen 0.0.0.0:0
HUB=$AGENT_URL
mv "$WORK/agent.log" "$WORK/hub.log" # the hub writes on there
qc='queue_config: {batch_send_deadline: 200ms, max_shards: 1, min_backoff: 10ms, max_backoff: 200ms}'
cp "$WORK/write.tok" "$WORK/sender.tok"
printf 'wrong-token-for-the-hub-000000\n' >"$WORK/wrong.tok"
cat >"$WORK/ship.yml" <<YAML
remote_write:
  - {url: '$HUB/api/v1/write', name: hub, bearer_token_file: '$WORK/sender.tok',
     tls_config: {ca_file: '$WORK/ca.pem'}, $qc}
  - {url: '$HUB/api/v1/write', name: wrong, bearer_token_file: '$WORK/wrong.tok',
     tls_config: {ca_file: '$WORK/ca.pem'}, $qc}
YAML
start_agent --interval 200ms --collectors loadavg --data-dir "$WORK/node" --config "$WORK/ship.yml" --store=false
hub_has() { [ "$(curl -s --cacert "$WORK/ca.pem" "$HUB/api/v1/store/count?match=mlwatch_load1" | awk '/^samples/{print $2}')" -gt 0 ] 2>/dev/null; }
wait_for 20 hub_has || fail "nothing arrived at the hub: $(grep -i 'remote' "$WORK/agent.log" | tail -3)"
ok
refused() { grep -q 'remote-write: .*wrong.*401' "$WORK/agent.log"; }
wait_for 10 refused || fail "the endpoint with the wrong token was not refused with 401: $(grep -i wrong "$WORK/agent.log" | tail -3)"
ok
expect_eq "the hub's token is not in the sender's log" 0 "$(grep -c hub-writer-token "$WORK/agent.log" || true)"
expect_eq "tokens are not in the hub's log" 0 "$(grep -c -e hub-writer-token -e wrong-token "$WORK/hub.log" || true)"
done_ok
