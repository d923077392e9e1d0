#!/usr/bin/env bash
# rules_alertmanager.sh - the shipped rules (deploy/prometheus/mlwatch-rules.yml,
# built in, loaded by default) evaluated by the agent alone on a fixture node
# with the fake NVML, their alerts sent to a real Alertmanager (Debian's
# prometheus-alertmanager) that routes them to a webhook receiver (issue 26,
# Deliver 5):
#   - MlwatchIdleGPUSession (shared/notebook-a holds GPU 0 idle past a 2 s
#     window) and MlwatchGPUUnhealthy (GPU 1's row remapping failed) go
#     pending, then fire exactly `for` (1m) after activeAt, on an
#     evaluation: the last pending ALERTS sample is 59 s after it;
#   - the agent is stopped (SIGTERM) in the middle of the `for` and started
#     again: activeAt moves by the time it was down (ALERTS_FOR_STATE before
#     and after), so the `for` is neither lost nor restarted; the idle
#     episode survives too, though no built-in receiver is configured;
#   - a broken rule file on POST /-/reload and on SIGHUP, in the middle of
#     the `for`: one error line each, the rules in force still evaluated;
#   - the webhook gets each alert exactly once firing and, after the
#     scenario changes (GPU 0 busy, the remapping failure gone), exactly
#     once resolved, with the labels and annotations the rules make: at
#     once, as in a Prometheus scraping the agent, though the health series
#     that fired (reason="row_remap_failure") is simply no longer collected
#     (the store marks it stale).
# integ_rules_agent covers the same guarantees with synthetic rules and
# kill -9; this test is about the shipped rules and the real Alertmanager.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
AM=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -n "$AM" ] || fail "prometheus-alertmanager not installed (scripts/install-deps.sh test)"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt

# scenario UTIL0 REMAP_FAILURE1: GPU 0's utilization (notebook-a holds it),
# GPU 1's row-remapping failure flag (train-1 holds it, busy).
scenario() {
    cat >"$WORK/scenario.tmp" <<EOF
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=$1 memtotal=85520809984 memused=2147483648 power_mw=100000
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-11111111-0000-4000-8000-000000000001 bus=00000000:28:00.0
gpu 1 util=80 memtotal=85520809984 memused=4294967296 power_mw=600000 remapped=0,0,0,$2
proc gpu=0 pid=4001 mem=1073741824
proc gpu=1 pid=3001 mem=4000000000
EOF
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}

# The webhook receiver and the Alertmanager routing every alert to it.
python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port-file "$WORK/rx.port" \
    --out "$WORK/got.jsonl" &
PIDS+=($!)
wait_for 10 test -s "$WORK/rx.port" || fail "webhook receiver did not start"
AMPORT=$(free_port)
cat >"$WORK/am.yml" <<EOF
route:
  receiver: hook
  group_by: [alertname]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$(cat "$WORK/rx.port")/am
        send_resolved: true
EOF
"$AM" --config.file="$WORK/am.yml" --storage.path="$WORK/am-data" \
    --web.listen-address="127.0.0.1:$AMPORT" --cluster.listen-address= >"$WORK/am.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$AMPORT/-/ready" 20

# One rule file of the operator's besides the shipped rules: the one that
# breaks on reload.
RULES=$WORK/extra.yml
cat >"$RULES" <<EOF
groups:
  - name: extra
    rules:
      - record: extra:one
        expr: vector(1)
EOF
agent_args=(--root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu --nvml-library "$fake"
    --rocm-library none --interval 1s --gpu-process-interval 1s --idle-window 2s
    --idle-busy-period 1s --rules-evaluation-interval 1s --rule-file "$RULES"
    --alertmanager-url "http://127.0.0.1:$AMPORT")
IDLE=MlwatchIdleGPUSession
GPU=MlwatchGPUUnhealthy

# Raw samples of a selector over the last 5 minutes: "t_ms value alertstate".
samples() {
    curl -s "$AGENT_URL/api/v1/query" --data-urlencode "query=$1[5m]" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["data"]["result"]:
    for t, v in s["values"]:
        print(round(t * 1000), v, s["metric"].get("alertstate", ""))' | sort -n
}
# alert NAME FIELD: a field of the alert NAME in /api/v1/alerts (activeAt in ms).
alert() {
    curl -s "$AGENT_URL/api/v1/alerts" | python3 -c '
import json, sys, datetime
for a in json.load(sys.stdin)["data"]["alerts"]:
    if a["labels"]["alertname"] == sys.argv[1]:
        v = a[sys.argv[2]]
        if sys.argv[2] == "activeAt": # with or without a fraction of a second
            v = round(datetime.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1000)
        print(v)' "$1" "$2"
}
pending() { [ "$(alert "$1" state)" = pending ]; }
# hooks NAME STATUS: webhook notifications carrying alert NAME with STATUS.
hooks() { got_count "(.path == \"/am\") and ([.body.alerts[] | select(.labels.alertname == \"$1\" and .status == \"$2\")] | length > 0)"; }
hooks_at_least() { [ "$(hooks "$1" "$2")" -ge "$3" ]; }
# hook NAME STATUS JQ: JQ of the alert in the first such notification.
hook() {
    jq -c "select(.path == \"/am\") | .body.alerts[] | select(.labels.alertname == \"$1\" and .status == \"$2\") | $3" \
        "$WORK/got.jsonl" | head -1
}
ms() { python3 -c 'import sys, datetime; print(round(datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp() * 1000))' "$1"; }

scenario 0 1
start_agent "${agent_args[@]}"
expect_eq "the shipped rules by default, and the rule file" "mlwatch-idle.recording mlwatch.alerts extra" \
    "$(curl -s "$AGENT_URL/api/v1/rules" | jq -r '[.data.groups[].name] | join(" ")')"
wait_for 15 pending "$IDLE" || fail "$IDLE not pending: $(curl -s "$AGENT_URL/api/v1/alerts")"
wait_for 5 pending "$GPU" || fail "$GPU not pending: $(curl -s "$AGENT_URL/api/v1/alerts")"
ok

# --- a restart in the middle of the `for` ---
sleep 10
declare -A before after
for a in "$IDLE" "$GPU"; do
    before[$a]=$(alert "$a" activeAt)
    expect_eq "$a: ALERTS_FOR_STATE is activeAt in seconds" "$((before[$a] / 1000))" \
        "$(samples "ALERTS_FOR_STATE{alertname=\"$a\"}" | tail -1 | cut -d' ' -f2)"
done
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || { tail -20 "$WORK/agent.log" >&2; fail "agent exit status"; }
cat "$WORK/agent.log" >>"$WORK/agents.log"
sleep 3 # down for a while: activeAt must move by as much
start_agent "${agent_args[@]}"
restart_ms=$(date +%s%3N)
for a in "$IDLE" "$GPU"; do
    again() { samples "ALERTS_FOR_STATE{alertname=\"$1\"}" | awk -v r="$restart_ms" '$1 > r' | grep -q .; }
    wait_for 10 again "$a" || fail "$a: no ALERTS_FOR_STATE after the restart"
    # The last sample before the gap (the agent's last evaluation) and the
    # first after, one interval after the evaluation that restored it.
    read -r down_ms v_old first_ms v_new < <(samples "ALERTS_FOR_STATE{alertname=\"$a\"}" |
        awk 'p && $1 - pt > 2500 { print pt, pv, $1, $2; exit } { p = 1; pt = $1; pv = $2 }')
    [ -n "$first_ms" ] || fail "$a: no gap in ALERTS_FOR_STATE: $(samples "ALERTS_FOR_STATE{alertname=\"$a\"}")"
    expect_eq "$a: activeAt before the stop" "$((before[$a] / 1000))" "$v_old"
    after[$a]=$(alert "$a" activeAt)
    # Prometheus's restoration: activeAt (whole seconds) + the time it was
    # down (restoring evaluation - last evaluation in whole seconds).
    expect_eq "$a: activeAt moved by the time down (ms)" \
        "$((before[$a] / 1000 * 1000 + first_ms - 1000 - down_ms / 1000 * 1000))" "${after[$a]}"
    expect_eq "$a: ALERTS_FOR_STATE after the restart" "$((after[$a] / 1000))" "$v_new"
    [ $((after[$a] - before[$a])) -ge 2000 ] || fail "$a: activeAt moved by only $((after[$a] - before[$a])) ms"
    [ $((first_ms - after[$a])) -lt 60000 ] || fail "$a: its for was reset"
    expect_eq "$a: still pending after the restart" pending "$(alert "$a" state)"
done
expect_eq "idle episode kept across the restart" "" "$(grep 'idle session: shared/notebook-a' "$WORK/agent.log" || true)"

# --- a broken rule file while they are pending ---
sed -i 's/expr: vector(1)/expr: vector(1/' "$RULES"
code=$(curl -s -o "$WORK/reload.txt" -w '%{http_code}' -X POST "$AGENT_URL/-/reload")
expect_eq "reload of a broken file" 500 "$code"
why="$RULES:5:15: could not parse expression: 1:9: parse error: unexpected end of input in function call, expected \",\" or \")\""
expect_eq "reload message" "failed to reload rules: $why" "$(cat "$WORK/reload.txt")"
kill -HUP "$AGENT_PID"
line="error rules: reload failed, the previous rules stay in force: $why"
two_lines() { [ "$(grep -c -F "$line" "$WORK/agent.log")" = 2 ]; }
wait_for 10 two_lines || fail "expected the error line twice (POST, SIGHUP): $(grep rules "$WORK/agent.log")"
broken_ms=$(date +%s%3N)
recorded() { samples 'extra:one' | awk -v b="$broken_ms" '$1 > b' | grep -q .; }
wait_for 5 recorded || fail "the rules in force are no longer evaluated"
ok
expect_eq "no other rules error" 2 "$(grep -c 'error rules' "$WORK/agent.log")"

# --- they fire: `for` to the interval ---
for a in "$IDLE" "$GPU"; do
    wait_for 75 hooks_at_least "$a" firing 1 ||
        fail "$a never reached the webhook: $(curl -s "$AGENT_URL/api/v1/alerts"); $(tail -5 "$WORK/am.log")"
    last_pending=$(samples "ALERTS{alertname=\"$a\",alertstate=\"pending\"}" | tail -1 | cut -d' ' -f1)
    first_firing=$(samples "ALERTS{alertname=\"$a\",alertstate=\"firing\"}" | head -1 | cut -d' ' -f1)
    expect_eq "$a: last pending sample after activeAt (ms)" 59000 $((last_pending - after[$a]))
    expect_eq "$a: first firing sample after activeAt (ms)" 60000 $((first_firing - after[$a]))
    expect_eq "$a: startsAt is when it fired" "$first_firing" "$(ms "$(hook "$a" firing .startsAt | tr -d '"')")"
    expect_eq "$a: activeAt once firing" "${after[$a]}" "$(alert "$a" activeAt)"
done
expect_eq "$IDLE labels" '{"alertname":"MlwatchIdleGPUSession","container":"main","gpu":"0","namespace":"shared","node":"t1","owner":"shared","pod":"notebook-a","severity":"warning"}' \
    "$(hook "$IDLE" firing '.labels')"
expect_eq "$IDLE summary" '"Idle GPU 0 on t1 held by shared/notebook-a"' "$(hook "$IDLE" firing .annotations.summary)"
# $value | humanizeDuration: the idle time when it fired (window, for and
# the time down, give or take a collection cycle).
desc=$(hook "$IDLE" firing .annotations.description)
[[ $desc =~ ^\"Pod\ shared/notebook-a\ \(container\ main\)\ holds\ GPU\ 0\ and\ has\ kept\ it\ idle\ for\ 1m\ ([0-9]+)s\.\"$ ]] ||
    fail "$IDLE description: $desc"
if [ "${BASH_REMATCH[1]}" -lt 2 ] || [ "${BASH_REMATCH[1]}" -gt 20 ]; then
    fail "$IDLE idle for 1m ${BASH_REMATCH[1]}s"
fi
ok
expect_eq "$GPU labels" '{"action":"drain_and_contact_support","alertname":"MlwatchGPUUnhealthy","gpu":"1","node":"t1","reason":"row_remap_failure","severity":"critical","state":"unhealthy","uuid":"GPU-11111111-0000-4000-8000-000000000001"}' \
    "$(hook "$GPU" firing '.labels')"
expect_eq "$GPU annotations" '{"description":"GPU GPU-11111111-0000-4000-8000-000000000001 is unhealthy (row_remap_failure); recommended action: drain_and_contact_support.","summary":"GPU 1 on t1 is unhealthy (row_remap_failure)"}' \
    "$(hook "$GPU" firing '.annotations')"

# --- they resolve ---
scenario 80 0
for a in "$IDLE" "$GPU"; do
    wait_for 20 hooks_at_least "$a" resolved 1 ||
        fail "$a never resolved at the webhook: $(curl -s "$AGENT_URL/api/v1/alerts"); $(tail -5 "$WORK/am.log")"
    ends=$(ms "$(hook "$a" resolved .endsAt | tr -d '"')")
    # resolved on an evaluation of its group, after it fired
    expect_eq "$a: endsAt on an evaluation" 0 $(((ends - after[$a]) % 1000))
    [ "$ends" -gt $((after[$a] + 60000)) ] || fail "$a: endsAt $ends before it fired"
    ok
done
sleep 4 # resends of the resolved alerts, group intervals: nothing more
for a in "$IDLE" "$GPU"; do
    expect_eq "$a: firing notifications" 1 "$(hooks "$a" firing)"
    expect_eq "$a: resolved notifications" 1 "$(hooks "$a" resolved)"
done
expect_eq "notifications in all" 4 "$(got_count '.path == "/am"')"
expect_eq "alerts left" '[]' "$(curl -s "$AGENT_URL/api/v1/alerts" | jq -c '[.data.alerts[] | select(.state == "firing")]')"
done_ok
