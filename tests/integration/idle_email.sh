#!/usr/bin/env bash
# idle_email.sh - idle-GPU e-mail over SMTP with STARTTLS: a local SMTP sink
# (tests/receivers/smtp_sink.py, Debian's python3-aiosmtpd) with a
# self-signed certificate that refuses mail before STARTTLS and requires
# AUTH; the agent with the fake NVML library, one pod holding an idle GPU.
# One message arrives, over TLS, authenticated, with the headers and the
# text the issue asks for; then the resolved one. The password is not in
# the log or the exposition.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
/usr/bin/python3 -c 'import aiosmtpd' 2>/dev/null || fail "python3-aiosmtpd is not installed (scripts/install-deps.sh test)"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt

scenario() {
    cat >"$WORK/scenario.tmp" <<EOF
gpu 0 name="NVIDIA L40S" uuid=GPU-40404040-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=$1 memtotal=48305799168 memused=25769803776 power_mw=80000
proc gpu=0 pid=4001 mem=24696061952
EOF
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null ||
    fail "openssl could not make a certificate"
PASSWORD=pw-Sm7pS3cr3t-0d4e
printf '%s\n' "$PASSWORD" >"$WORK/password"
/usr/bin/python3 "$MLWATCH_SRC/tests/receivers/smtp_sink.py" --cert "$WORK/cert.pem" \
    --key "$WORK/key.pem" --out "$WORK/mail.jsonl" --port-file "$WORK/smtp.port" \
    --user mlwatch --password-file "$WORK/password" 2>"$WORK/smtp.log" &
PIDS+=($!)
wait_for 10 test -s "$WORK/smtp.port" || fail "SMTP sink did not start: $(cat "$WORK/smtp.log")"

scenario 0
export MLWATCH_TEST_SMTP_PASSWORD=$PASSWORD
start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu --nvml-library "$fake" \
    --rocm-library none --interval 200ms --gpu-process-interval 200ms --idle-window 1s \
    --idle-busy-period 600ms --state-dir "$WORK/state" --node-name gpu-node-7 \
    --notify-smtp-server "smtp://127.0.0.1:$(cat "$WORK/smtp.port")" \
    --notify-smtp-ca-file "$WORK/cert.pem" --notify-smtp-from "mlwatch <mlwatch@example.org>" \
    --notify-smtp-to "ml-admins@example.org, alice@example.org" --notify-smtp-username mlwatch \
    --notify-smtp-password env:MLWATCH_TEST_SMTP_PASSWORD

mails_at_least() { [ -s "$WORK/mail.jsonl" ] && [ "$(wc -l <"$WORK/mail.jsonl")" -ge "$1" ]; }
await_mail() { # N
    wait_for 10 mails_at_least "$1" || fail "expected $1 mails; log: $(cat "$WORK/agent.log")"
    expect_eq "mails" "$1" "$(wc -l <"$WORK/mail.jsonl")"
}
await_mail 1
m=$(head -1 "$WORK/mail.jsonl")
expect_eq "over TLS" true "$(jq -r .tls <<<"$m")"
expect_eq "authenticated as" mlwatch "$(jq -r .user <<<"$m")"
expect_eq "envelope from" "mlwatch@example.org" "$(jq -r .from <<<"$m")"
expect_eq "envelope to" '["ml-admins@example.org","alice@example.org"]' "$(jq -c .to <<<"$m")"
body=$(jq -r .data <<<"$m")
for want in "Subject: [mlwatch] Idle GPU: GPU 0 (NVIDIA L40S) on gpu-node-7 held by pod shared/notebook-a" \
    "To: ml-admins@example.org, alice@example.org" "Owner: shared" "GPU memory held: 23.0 GiB" \
    "Pod: shared/notebook-a (container main)" "Content-Type: text/plain; charset=utf-8"; do
    grep -qF "$want" <<<"$body" || fail "mail lacks '$want': $body"
    ok
done
grep -q '^Message-ID: <[0-9a-f]\{16\}\.firing\.[0-9]*@mlwatch>' <<<"$body" || fail "Message-ID: $body"
ok

scenario 70
await_mail 2
body=$(sed -n 2p "$WORK/mail.jsonl" | jq -r .data)
grep -qF "Subject: [mlwatch] Resolved: GPU 0 (NVIDIA L40S) on gpu-node-7 is no longer idle (busy again): pod shared/notebook-a" <<<"$body" ||
    fail "resolved mail: $body"
ok
delivered() {
    curl -sf "$AGENT_URL/metrics" >"$WORK/m.txt"
    awk '/^mlwatch_notifications_total\{receiver="email",result="delivered",node="gpu-node-7"\}/ { print $2 }' "$WORK/m.txt"
}
delivered_are() { [ "$(delivered)" = "$1" ]; }
wait_for 3 delivered_are 2 || true
expect_eq "delivered mails counted" 2 "$(delivered)"
for f in "$WORK/agent.log" "$WORK/m.txt"; do
    if grep -q "$PASSWORD" "$f"; then fail "the SMTP password is in $f"; fi
    ok
done
done_ok
