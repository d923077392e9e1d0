#!/usr/bin/env bash
# alertmanager_routing.sh - deploy/prometheus/mlwatch-rules.yml passes
# `promtool check rules` and its unit tests (`promtool test rules`
# tests/prometheus/*.test.yml); deploy/alertmanager/alertmanager.yml, with
# only its addresses, secret files and timings pointed at local peers, routes
# alerts posted to the real Alertmanager's API v2: an idle-GPU alert to the
# "Mattermost" webhook (tests/receivers/webhook_receiver.py) and a lost GPU
# by e-mail over STARTTLS (tests/receivers/smtp_sink.py) and to the channel.
source "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || fail "promtool not installed"
AM=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -n "$AM" ] || fail "prometheus-alertmanager not installed (scripts/install-deps.sh test)"

promtool check rules "$MLWATCH_SRC/deploy/prometheus/mlwatch-rules.yml" >"$WORK/check.txt" 2>&1 ||
    fail "promtool check rules: $(cat "$WORK/check.txt")"
grep -q "SUCCESS: 13 rules found" "$WORK/check.txt" || fail "rules: $(cat "$WORK/check.txt")"
ok
for t in "$MLWATCH_SRC"/tests/prometheus/*.test.yml; do
    (cd "$(dirname "$t")" && promtool test rules "$(basename "$t")") >"$WORK/test.txt" 2>&1 ||
        fail "promtool test rules $t: $(cat "$WORK/test.txt")"
    ok
done

# Peers: the webhook receiver and the SMTP sink (STARTTLS, AUTH).
python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port-file "$WORK/rx.port" \
    --out "$WORK/hooks.jsonl" &
PIDS+=($!)
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
printf 'am-Sm7p-pw' >"$WORK/smtp-password" # Alertmanager 0.25 keeps a trailing newline
/usr/bin/python3 "$MLWATCH_SRC/tests/receivers/smtp_sink.py" --cert "$WORK/cert.pem" \
    --key "$WORK/key.pem" --out "$WORK/mail.jsonl" --port-file "$WORK/smtp.port" \
    --user mlwatch-alerts --password-file "$WORK/smtp-password" 2>"$WORK/smtp.log" &
PIDS+=($!)
for f in rx.port smtp.port; do
    wait_for 10 test -s "$WORK/$f" || fail "$f: peer did not start"
done
printf 'http://127.0.0.1:%s/hooks/mm-secret\n' "$(cat "$WORK/rx.port")" >"$WORK/mm-url"

# The example, with local addresses, files and short timings.
python3 - "$MLWATCH_SRC/deploy/alertmanager/alertmanager.yml" "$WORK/am.yml" "$WORK" \
    "$(cat "$WORK/smtp.port")" <<'EOF'
import sys, yaml
src, dst, work, port = sys.argv[1:]
c = yaml.safe_load(open(src))
c["global"]["smtp_smarthost"] = "127.0.0.1:" + port
c["global"]["smtp_auth_password_file"] = work + "/smtp-password"
c["route"]["group_wait"] = "0s"
c["route"]["group_interval"] = "1s"
for r in c["receivers"]:
    for s in r.get("slack_configs", []):
        s["api_url_file"] = work + "/mm-url"
    for e in r.get("email_configs", []):
        e["tls_config"]["ca_file"] = work + "/cert.pem"
yaml.safe_dump(c, open(dst, "w"))
EOF
amtool check-config "$WORK/am.yml" >/dev/null || fail "amtool check-config"
ok
port=$(free_port)
"$AM" --config.file="$WORK/am.yml" --storage.path="$WORK/am-data" \
    --web.listen-address="127.0.0.1:$port" --cluster.listen-address= >"$WORK/am.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$port/-/ready" 20

now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
curl -sf -XPOST -H 'Content-Type: application/json' "http://127.0.0.1:$port/api/v2/alerts" -d '[
 {"labels": {"alertname": "MlwatchIdleGPUSession", "severity": "warning", "instance": "n1",
   "namespace": "shared", "pod": "nb-0", "container": "main", "gpu": "0"},
  "annotations": {"summary": "Idle GPU 0 on n1 held by shared/nb-0",
   "description": "Pod shared/nb-0 holds GPU 0 and has kept it idle for 31m."},
  "startsAt": "'"$now"'"},
 {"labels": {"alertname": "MlwatchGPULost", "severity": "critical", "instance": "n1", "gpu": "3"},
  "annotations": {"summary": "GPU 3 (0000:48:00.0) on n1 is lost",
   "description": "The driver answers GPU_IS_LOST for GPU GPU-3."},
  "startsAt": "'"$now"'"}]' >/dev/null || fail "posting alerts"
ok

delivered() { # a mail and both messages in the channel
    [ -s "$WORK/mail.jsonl" ] && [ -s "$WORK/hooks.jsonl" ] &&
        [ "$(wc -l <"$WORK/hooks.jsonl")" -ge 2 ]
}
WAIT_EVERY=0.2 wait_for 20 delivered ||
    fail "no delivery: hooks $(cat "$WORK/hooks.jsonl" 2>/dev/null); mail $(cat "$WORK/mail.jsonl" 2>/dev/null); $(tail -5 "$WORK/am.log")"
sleep 1
expect_eq "mattermost messages" 2 "$(wc -l <"$WORK/hooks.jsonl")"
expect_eq "mattermost path" '"/hooks/mm-secret"' "$(head -1 "$WORK/hooks.jsonl" | jq -c .path)"
expect_eq "idle alert in the channel" 1 \
    "$(jq -c 'select(.body.channel == "gpu-capacity" and .body.attachments[0].title == "Idle GPU 0 on n1 held by shared/nb-0")' "$WORK/hooks.jsonl" | wc -l)"
expect_eq "lost GPU in the channel" 1 \
    "$(jq -c 'select(.body.attachments[0].title == "GPU 3 (0000:48:00.0) on n1 is lost")' "$WORK/hooks.jsonl" | wc -l)"
expect_eq "mails" 1 "$(wc -l <"$WORK/mail.jsonl")"
m=$(head -1 "$WORK/mail.jsonl")
expect_eq "mail over TLS" true "$(jq -r .tls <<<"$m")"
expect_eq "mail authenticated" mlwatch-alerts "$(jq -r .user <<<"$m")"
expect_eq "mail to" '["gpu-oncall@example.org"]' "$(jq -c .to <<<"$m")"
data=$(jq -r .data <<<"$m")
grep -q '^Subject: \[FIRING\] GPU 3 (0000:48:00.0) on n1 is lost' <<<"$data" ||
    fail "mail subject: $(grep -i '^subject' <<<"$data")"
ok
done_ok
