#!/usr/bin/env bash
# alert_send_tls.sh - the Alertmanager sender's TLS and credentials
# (docs/alerting.md), against Debian's prometheus-alertmanager serving HTTPS
# that requires a client certificate, and a recording receiver standing in
# for an Alertmanager behind an authenticating proxy:
#   - with --alertmanager-ca-file and a client certificate, the alerts are in
#     the Alertmanager (its API v2 lists them); without the certificate
#     nothing arrives and the failures are counted;
#   - the bearer token and the basic-auth password are sent from their files
#     (a rotated token from the next POST on), to BASE/api/v2/alerts as
#     JSON, and are in no log or metric.
# The rule evaluator is stood in for by tests/alertfeed (see alert_send.sh).
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
FEEDER=$MLWATCH_BUILD/tests/alertfeed/alert_feeder
[ -x "$FEEDER" ] || fail "alert feeder not built: $FEEDER"
AM=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -n "$AM" ] || fail "prometheus-alertmanager not installed (scripts/install-deps.sh test)"
printf '#!/bin/sh\nshift\nexec "%s" "%s" "$@"\n' "$FEEDER" "$WORK/feed.json" >"$WORK/agent.sh"
chmod +x "$WORK/agent.sh"
MLWATCH_BIN=$WORK/agent.sh
NOW=$(date +%s%3N)
cat >"$WORK/feed.json" <<EOF
[{"labels": {"alertname": "MlwatchIdleGPUSession", "gpu": "0", "node": "t1", "pod": "nb-0"},
  "annotations": {"summary": "Idle GPU 0 on t1"}, "startsAt": $NOW},
 {"labels": {"alertname": "MlwatchGPULost", "gpu": "3", "node": "t1"},
  "annotations": {"summary": "GPU 3 on t1 is lost"}, "startsAt": $NOW}]
EOF

ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'
# shellcheck disable=SC2086
openssl req -x509 $ec -keyout "$WORK/ca.key" -out "$WORK/ca.pem" -days 1 -subj "/CN=am test ca" \
    2>>"$WORK/openssl.log" || fail "openssl: cannot make the CA"
sign() { # NAME CN EXT
    # shellcheck disable=SC2086
    openssl req -new $ec -keyout "$WORK/$1.key" -out "$WORK/$1.csr" -subj "/CN=$2" \
        2>>"$WORK/openssl.log" || fail "openssl: cannot make the key of $1"
    printf '%s\nbasicConstraints=CA:FALSE\n' "$3" >"$WORK/$1.ext"
    openssl x509 -req -in "$WORK/$1.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
        -CAcreateserial -days 1 -extfile "$WORK/$1.ext" -out "$WORK/$1.pem" \
        2>>"$WORK/openssl.log" || fail "openssl: cannot sign $1"
}
sign server "alertmanager" $'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'
sign client "mlwatch" "extendedKeyUsage=clientAuth"

AMPORT=$(free_port)
printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\n  client_auth_type: %s\n  client_ca_file: %s\n' \
    "$WORK/server.pem" "$WORK/server.key" RequireAndVerifyClientCert "$WORK/ca.pem" >"$WORK/web.yml"
printf 'route: {receiver: none}\nreceivers: [{name: none}]\n' >"$WORK/am.yml"
"$AM" --config.file="$WORK/am.yml" --storage.path="$WORK/am-data" --web.config.file="$WORK/web.yml" \
    --web.listen-address="127.0.0.1:$AMPORT" --cluster.listen-address= >"$WORK/am.log" 2>&1 &
PIDS+=($!)
AMURL=https://127.0.0.1:$AMPORT
am_curl() { curl -sf --cacert "$WORK/ca.pem" --cert "$WORK/client.pem" --key "$WORK/client.key" "$@"; }
wait_for 20 am_curl -o /dev/null "$AMURL/-/ready" || fail "no HTTPS answer from the Alertmanager"
if curl -s -o /dev/null --cacert "$WORK/ca.pem" "$AMURL/-/ready"; then
    fail "the Alertmanager answers without a client certificate"
fi
ok

metric() { curl -sf "$AGENT_URL/metrics" | awk -v m="$1" 'index($0, m) == 1 { print $2 }'; }
metric_ge() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }
stop_agent() {
    mv "$WORK/feed.json" "$WORK/feed.json.off" # no batch meets a sink being removed
    sleep 0.5
    kill -TERM "$AGENT_PID"
    wait "$AGENT_PID" || fail "agent exit status"
    cat "$WORK/agent.log" >>"$WORK/agents.log"
    mv "$WORK/feed.json.off" "$WORK/feed.json"
}
common=(--root "$MLWATCH_FIXTURES/bare-vm" --collectors loadavg --nvml-library none
    --rocm-library none --interval 200ms --node-name t1)
SHOWN=https://127.0.0.1:$AMPORT

# Without a client certificate: refused, counted, nothing in the Alertmanager.
start_agent "${common[@]}" --alertmanager-url "$AMURL" --alertmanager-ca-file "$WORK/ca.pem"
wait_for 10 metric_ge "mlwatch_alertmanager_errors_total{alertmanager=\"$SHOWN\"" 1 ||
    fail "no failure counted without a client certificate"
ok
expect_eq "sent without a certificate" 0 \
    "$(metric "mlwatch_alertmanager_notifications_total{alertmanager=\"$SHOWN\"")"
expect_eq "alerts in the Alertmanager" 0 "$(am_curl "$AMURL/api/v2/alerts" | jq length)"
stop_agent

# With it: both alerts are there.
start_agent "${common[@]}" --alertmanager-url "$AMURL" --alertmanager-ca-file "$WORK/ca.pem" \
    --alertmanager-cert-file "$WORK/client.pem" --alertmanager-key-file "$WORK/client.key"
wait_for 10 metric_ge "mlwatch_alertmanager_notifications_total{alertmanager=\"$SHOWN\"" 2 ||
    fail "nothing sent with a client certificate: $(tail -5 "$WORK/agent.log")"
ok
expect_eq "alerts in the Alertmanager" '["MlwatchGPULost","MlwatchIdleGPUSession"]' \
    "$(am_curl "$AMURL/api/v2/alerts" | jq -c '[.[].labels.alertname] | sort')"
expect_eq "their state" '["active","active"]' \
    "$(am_curl "$AMURL/api/v2/alerts" | jq -c '[.[].status.state]')"
stop_agent

# Credentials, seen by a recording receiver.
python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port-file "$WORK/rx.port" \
    --out "$WORK/got.jsonl" &
PIDS+=($!)
wait_for 10 test -s "$WORK/rx.port" || fail "receiver did not start"
RX=http://127.0.0.1:$(cat "$WORK/rx.port")
TOKEN1=tok-ONE-3b8e01
TOKEN2=tok-TWO-c4d2aa
PASSWORD=pw-S3cret-9f1d
printf '%s\n' "$TOKEN1" >"$WORK/token"
printf '%s\n' "$PASSWORD" >"$WORK/password"
start_agent "${common[@]}" --alertmanager-url "$RX/prefix/" \
    --alertmanager-bearer-token-file "$WORK/token"
wait_for 10 got_at_least ".authorization == \"Bearer $TOKEN1\"" 1 || fail "no POST with the token"
ok
expect_eq "path" /prefix/api/v2/alerts "$(jq -r .path "$WORK/got.jsonl" | sort -u)"
expect_eq "content type" application/json "$(jq -r .content_type "$WORK/got.jsonl" | sort -u)"
expect_eq "a batch" '["MlwatchGPULost","MlwatchIdleGPUSession"]' \
    "$(jq -c '[.body[].labels.alertname] | sort' "$WORK/got.jsonl" | head -1)"
printf '%s\n' "$TOKEN2" >"$WORK/token.tmp"
mv "$WORK/token.tmp" "$WORK/token"
wait_for 10 got_at_least ".authorization == \"Bearer $TOKEN2\"" 1 ||
    fail "the rotated token is not used"
ok
stop_agent
start_agent "${common[@]}" --alertmanager-url "$RX" --alertmanager-basic-auth-username mlwatch \
    --alertmanager-basic-auth-password-file "$WORK/password"
BASIC="Basic $(printf 'mlwatch:%s' "$PASSWORD" | base64)"
wait_for 10 got_at_least ".authorization == \"$BASIC\"" 1 || fail "no POST with basic auth"
ok
curl -sf "$AGENT_URL/metrics" >"$WORK/m.txt"
stop_agent
for f in "$WORK/agents.log" "$WORK/m.txt"; do
    if grep -q -e "$TOKEN1" -e "$TOKEN2" -e "$PASSWORD" "$f"; then fail "a secret in $f"; fi
    ok
done
done_ok
