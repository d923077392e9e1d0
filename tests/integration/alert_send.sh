#!/usr/bin/env bash
# alert_send.sh - rule alerts from the agent to a real Alertmanager (API v2)
# and to the built-in receivers (Mattermost-style webhook), issue 26:
#   - an idle-session alert and a GPU alert fire, then resolve: the
#     Alertmanager's webhook receiver gets each firing and each resolved
#     exactly once, and so do the built-in chat webhook and the built-in
#     receiver of Alertmanager's webhook payload (one message per group:
#     alertname and node);
#   - the Alertmanager is down when they fire: they reach it once it is up
#     (queue and retry), counted in mlwatch_alertmanager_*;
#   - a restarted agent sends nothing twice through the built-in receivers,
#     neither the firing messages nor the resolved ones (state file);
#   - the bearer token and the webhook URL's secret are in no log, metric or
#     state file.
# The rule evaluator is on another branch: tests/alertfeed/alert_feeder runs
# the agent and hands it the alerts of $WORK/feed.json every 200 ms, as the
# evaluator hands on each evaluation's (feed() below writes them). With the
# evaluator in, drop MLWATCH_BIN's wrapper, pass --rule-file with the two
# rules, and make feed() change the series they read.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
FEEDER=$MLWATCH_BUILD/tests/alertfeed/alert_feeder
[ -x "$FEEDER" ] || fail "alert feeder not built: $FEEDER"
AM=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -n "$AM" ] || fail "prometheus-alertmanager not installed (scripts/install-deps.sh test)"

# start_agent runs "$MLWATCH_BIN agent FLAGS": the feeder takes the flags.
printf '#!/bin/sh\nshift\nexec "%s" "%s" "$@"\n' "$FEEDER" "$WORK/feed.json" >"$WORK/agent.sh"
chmod +x "$WORK/agent.sh"
MLWATCH_BIN=$WORK/agent.sh

NOW=$(($(date +%s) * 1000))
IDLE='"alertname": "MlwatchIdleGPUSession", "gpu": "0", "namespace": "shared", "node": "t1", "pod": "nb-0", "severity": "warning"'
LOST='"alertname": "MlwatchGPULost", "gpu": "3", "node": "t1", "severity": "critical"'
# feed firing|resolved|none: the alerts the "evaluator" hands on.
feed() {
    case $1 in
    none) rm -f "$WORK/feed.json" ;;
    firing | resolved)
        local r=false ends=0
        [ "$1" = resolved ] && r=true ends=$(date +%s%3N)
        cat >"$WORK/feed.tmp" <<EOF
[{"labels": {$IDLE}, "annotations": {"summary": "Idle GPU 0 on t1 held by shared/nb-0",
   "description": "Pod shared/nb-0 holds GPU 0 and has kept it idle for 31m."},
  "startsAt": $NOW, "endsAt": $ends, "resolved": $r, "generatorURL": "http://t1:9400/graph"},
 {"labels": {$LOST}, "annotations": {"summary": "GPU 3 on t1 is lost"},
  "startsAt": $NOW, "endsAt": $ends, "resolved": $r}]
EOF
        mv "$WORK/feed.tmp" "$WORK/feed.json"
        ;;
    esac
}

# The peers: one webhook receiver for both Alertmanager and the chat.
python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port-file "$WORK/rx.port" \
    --out "$WORK/got.jsonl" &
PIDS+=($!)
wait_for 10 test -s "$WORK/rx.port" || fail "webhook receiver did not start"
RX=http://127.0.0.1:$(cat "$WORK/rx.port")
SECRET=chat-T0KEN-5e1d9a
printf '%s/hooks/%s\n' "$RX" "$SECRET" >"$WORK/chat-url"
TOKEN=am-B3ARER-77c2f1
printf '%s\n' "$TOKEN" >"$WORK/am-token"

AMPORT=$(free_port)
cat >"$WORK/am.yml" <<EOF
route:
  receiver: hook
  group_by: [alertname, node]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: $RX/am
        send_resolved: true
EOF
start_am() {
    "$AM" --config.file="$WORK/am.yml" --storage.path="$WORK/am-data" \
        --web.listen-address="127.0.0.1:$AMPORT" --cluster.listen-address= >>"$WORK/am.log" 2>&1 &
    PIDS+=($!)
    wait_http "http://127.0.0.1:$AMPORT/-/ready" 20
}

agent_args=(--root "$MLWATCH_FIXTURES/bare-vm" --collectors loadavg --nvml-library none
    --rocm-library none --interval 200ms --node-name t1
    --alertmanager-url "http://127.0.0.1:$AMPORT/" --alertmanager-bearer-token-file "$WORK/am-token"
    --notify-webhook "file:$WORK/chat-url" --notify-alertmanager-webhook "$RX/v4"
    --notify-group-wait 500ms --notify-group-interval 1s)

AMF='(.path == "/am")'
CHAT='(.path == "/hooks/'$SECRET'")'
# am_count NAME STATUS: Alertmanager notifications carrying alert NAME with STATUS.
am_count() { got_count "$AMF and ([.body.alerts[] | select(.labels.alertname == \"$1\" and .status == \"$2\")] | length > 0)"; }
chat_count() { got_count "$CHAT and (.body.text | startswith(\"$1\"))"; }
# v4_count NAME STATUS: built-in Alertmanager-payload messages of group NAME.
v4_count() { got_count "(.path == \"/v4\") and .body.groupLabels.alertname == \"$1\" and .body.status == \"$2\""; }
metric() { curl -sf "$AGENT_URL/metrics" | awk -v m="$1" 'index($0, m) == 1 { print $2 }'; }
# For wait_for, which runs a command again and again:
am_at_least() { [ "$(am_count "$1" "$2")" -ge "$3" ]; }
chat_at_least() { [ "$(chat_count "$1")" -ge "$2" ]; }
metric_ge() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }
metric_eq() { [ "$(metric "$1")" = "$2" ]; }
SHOWN=http://127.0.0.1:$AMPORT

# 1. The alerts fire while the Alertmanager is down: queued and retried.
feed firing
start_agent "${agent_args[@]}"
wait_for 10 metric_ge "mlwatch_alertmanager_errors_total{alertmanager=\"$SHOWN\"" 1 ||
    fail "no failed send counted while the Alertmanager is down"
ok
expect_eq "Alertmanagers" 1 "$(metric 'mlwatch_alertmanager_discovered{')"
expect_eq "queue capacity" 10000 "$(metric "mlwatch_alertmanager_queue_capacity{alertmanager=\"$SHOWN\"")"
q=$(metric "mlwatch_alertmanager_queue_length{alertmanager=\"$SHOWN\"")
[ "${q:-0}" -ge 2 ] || fail "queue length while down: '$q'"
ok
# The built-in receiver needs no Alertmanager: one message per group.
wait_for 10 chat_at_least '[FIRING:1] MlwatchIdleGPUSession on t1' 1 || true
expect_eq "chat: idle firing" 1 "$(chat_count '[FIRING:1] MlwatchIdleGPUSession on t1')"
wait_for 5 chat_at_least '[FIRING:1] MlwatchGPULost on t1' 1 || true
expect_eq "chat: GPU lost firing" 1 "$(chat_count '[FIRING:1] MlwatchGPULost on t1')"
t=$(jq -r "select($CHAT and (.body.text | contains(\"Idle\"))) | .body.text" "$WORK/got.jsonl")
for want in "- Idle GPU 0 on t1 held by shared/nb-0" \
    "  Pod shared/nb-0 holds GPU 0 and has kept it idle for 31m." \
    "  Labels: gpu=0 namespace=shared pod=nb-0 severity=warning" "  Source: http://t1:9400/graph"; do
    grep -qxF -- "$want" <<<"$t" || fail "chat message lacks '$want': $t"
    ok
done

# The "evaluator" stops re-sending: only the queue can bring them now.
feed none
sleep 0.5
start_am
wait_for 15 am_at_least MlwatchGPULost firing 1 || true
wait_for 5 am_at_least MlwatchIdleGPUSession firing 1 || true
sleep 2 # queued many times over: Alertmanager must notify nothing more
expect_eq "Alertmanager: idle firing" 1 "$(am_count MlwatchIdleGPUSession firing)"
expect_eq "Alertmanager: GPU lost firing" 1 "$(am_count MlwatchGPULost firing)"
a=$(jq -c "select($AMF and .body.groupLabels.alertname == \"MlwatchIdleGPUSession\") | .body.alerts[0]" "$WORK/got.jsonl" | head -1)
expect_eq "labels through Alertmanager" "{$IDLE}" "$(jq -cS .labels <<<"$a" | sed 's/,/, /g; s/:/: /g')"
expect_eq "startsAt through Alertmanager" "$(date -u -d "@$((NOW / 1000))" +%Y-%m-%dT%H:%M:%SZ)" \
    "$(jq -r .startsAt <<<"$a")"
expect_eq "generatorURL through Alertmanager" "http://t1:9400/graph" "$(jq -r .generatorURL <<<"$a")"
wait_for 5 metric_eq "mlwatch_alertmanager_queue_length{alertmanager=\"$SHOWN\"" 0 ||
    fail "queue not drained"
ok
sent=$(metric "mlwatch_alertmanager_notifications_total{alertmanager=\"$SHOWN\"")
[ "${sent:-0}" -ge 2 ] || fail "alerts sent: '$sent'"
ok
expect_eq "dropped" 0 "$(metric "mlwatch_alertmanager_dropped_total{alertmanager=\"$SHOWN\"")"
feed firing

# 2. A restart while they fire: the built-in receiver gets nothing again.
restart_agent() {
    feed none
    sleep 0.5 # the feeder's last batch is in
    kill -TERM "$AGENT_PID"
    wait "$AGENT_PID" || { tail -40 "$WORK/agent.log" >&2; fail "agent exit status"; }
    cat "$WORK/agent.log" >>"$WORK/agents.log"
    feed "$1"
    start_agent "${agent_args[@]}"
}
before=$(got_count "$CHAT")
restart_agent firing
sleep 3
expect_eq "chat messages after a restart while firing" "$before" "$(got_count "$CHAT")"
expect_eq "Alertmanager: idle firing after a restart" 1 "$(am_count MlwatchIdleGPUSession firing)"

# 3. They resolve: each resolved exactly once, everywhere.
feed resolved
wait_for 10 am_at_least MlwatchIdleGPUSession resolved 1 || true
wait_for 5 am_at_least MlwatchGPULost resolved 1 || true
wait_for 5 chat_at_least '[RESOLVED] MlwatchGPULost on t1' 1 || true
wait_for 5 chat_at_least '[RESOLVED] MlwatchIdleGPUSession on t1' 1 || true
sleep 2
expect_eq "Alertmanager: idle resolved" 1 "$(am_count MlwatchIdleGPUSession resolved)"
expect_eq "Alertmanager: GPU lost resolved" 1 "$(am_count MlwatchGPULost resolved)"
expect_eq "chat: idle resolved" 1 "$(chat_count '[RESOLVED] MlwatchIdleGPUSession on t1')"
expect_eq "chat: GPU lost resolved" 1 "$(chat_count '[RESOLVED] MlwatchGPULost on t1')"
expect_eq "Alertmanager: firing still once" 1 "$(am_count MlwatchIdleGPUSession firing)"
expect_eq "chat messages in all" 4 "$(got_count "$CHAT")"
# The same through the built-in receiver of Alertmanager's webhook payload.
for name in MlwatchIdleGPUSession MlwatchGPULost; do
    for status in firing resolved; do
        expect_eq "payload v4: $name $status" 1 "$(v4_count $name $status)"
    done
done
expect_eq "payload v4 groupKey" '{}:{alertname="MlwatchGPULost", node="t1"}' \
    "$(jq -r 'select(.path == "/v4") | .body.groupKey' "$WORK/got.jsonl" | sort -u | head -1)"

# 4. A restart while the evaluator still re-sends the resolved alerts: no
#    resolved message again.
restart_agent resolved
sleep 3
expect_eq "chat messages after a restart when resolved" 4 "$(got_count "$CHAT")"
expect_eq "payload v4 messages after a restart when resolved" 4 "$(got_count '.path == "/v4"')"
feed none
sleep 0.5

# Secrets: in no log, exposition or state file.
curl -sf "$AGENT_URL/metrics" >"$WORK/m.txt"
cat "$WORK/agent.log" >>"$WORK/agents.log"
for f in "$WORK/agents.log" "$WORK/m.txt" "$WORK/state/idle-notifications.json"; do
    if grep -q -e "$SECRET" -e "$TOKEN" "$f"; then fail "a secret in $f"; fi
    ok
done
done_ok
