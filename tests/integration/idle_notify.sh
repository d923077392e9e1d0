#!/usr/bin/env bash
# idle_notify.sh - idle GPU sessions end to end: the agent with the fake NVML
# library (scenario rewritten between cycles), a 2 s idle window, and a
# local webhook receiver taking both the Mattermost/Slack payload and the
# Alertmanager (version 4) payload.
#   - shared/notebook-a holds an idle GPU past the window: exactly one
#     message per receiver, then one resolved message when it gets busy;
#   - ml-team/train-1 is busy: no message;
#   - shared/notebook-b flaps around the threshold: one episode;
#   - with the receiver down, a new episode is delivered once it is back;
#   - a restarted agent sends nothing twice (state in DATA_DIR/state);
#   - the webhook URLs (secrets) are in neither the log nor /metrics.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt

# scenario U0 U1 U2: utilization of GPU 0 (notebook-a), 1 (train-1), 2 (notebook-b)
scenario() {
    cat >"$WORK/scenario.tmp" <<EOF
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=$1 memtotal=85520809984 memused=2147483648 power_mw=100000
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-11111111-0000-4000-8000-000000000001 bus=00000000:28:00.0
gpu 1 util=$2 memtotal=85520809984 memused=4294967296 power_mw=600000
gpu 2 name="NVIDIA H100 80GB HBM3" uuid=GPU-22222222-0000-4000-8000-000000000002 bus=00000000:38:00.0
gpu 2 util=$3 memtotal=85520809984 memused=2147483648 power_mw=120000
proc gpu=0 pid=4001 mem=1073741824
proc gpu=1 pid=3001 mem=4000000000
proc gpu=2 pid=4002 mem=1073741824
EOF
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}

RPORT=$(free_port)
start_receiver() {
    python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port "$RPORT" --out "$WORK/got.jsonl" &
    RECEIVER_PID=$!
    PIDS+=("$RECEIVER_PID")
    wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$RPORT/" || fail "receiver did not start"
}
stop_receiver() {
    kill "$RECEIVER_PID"
    wait "$RECEIVER_PID" 2>/dev/null || true
}

# await_count WHAT FILTER N [SECONDS]
await_count() {
    wait_for "${4:-8}" got_at_least "$2" "$3" || true
    expect_eq "$1" "$3" "$(got_count "$2")"
}

SECRET1=hooks-T0KEN-4f9a2c7e
SECRET2=am-S3CRET-81b7d0
printf 'http://127.0.0.1:%s/hooks/%s\n' "$RPORT" "$SECRET1" >"$WORK/webhook-url"
export MLWATCH_TEST_AM_URL="http://127.0.0.1:$RPORT/am/$SECRET2"
CHAT='.path == "/hooks/'$SECRET1'"'
AM='.path == "/am/'$SECRET2'"'
A='(.body.text // "" | contains("pod shared/notebook-a"))'
B='(.body.text // "" | contains("pod shared/notebook-b"))'

agent_args=(--root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu --nvml-library "$fake"
    --rocm-library none --interval 200ms --gpu-process-interval 200ms --idle-window 2s
    --idle-busy-period 3s --notify-webhook "file:$WORK/webhook-url"
    --notify-alertmanager-webhook env:MLWATCH_TEST_AM_URL
    --notify-repeat-interval 1h --node-name gpu-node-1)

scenario 0 80 0
start_receiver
start_agent "${agent_args[@]}"

# Both idle sessions open after the window: one chat message each, and one
# Alertmanager payload each.
await_count "firing chat messages for notebook-a" "$CHAT and $A" 1
await_count "firing chat messages for notebook-b" "$CHAT and $B" 1
await_count "alertmanager payloads" "$AM" 2
t=$(jq -r "select($CHAT and $A) | .body.text" "$WORK/got.jsonl")
for want in "Idle GPU: GPU 0 (NVIDIA H100 80GB HBM3) on gpu-node-1 held by pod shared/notebook-a" \
    "Owner: shared" "Pod: shared/notebook-a (container main)" "GPU memory held: 1.0 GiB" \
    "GPU-00000000-0000-4000-8000-000000000000" "Idle (below 5% utilization) since" "GPU-hours"; do
    grep -qF "$want" <<<"$t" || fail "chat message lacks '$want': $t"
    ok
done
am=$(jq -c "select($AM and .body.alerts[0].labels.pod == \"notebook-a\") | .body" "$WORK/got.jsonl")
expect_eq "alertmanager version" '"4"' "$(jq -c .version <<<"$am")"
expect_eq "alertmanager status" '"firing"' "$(jq -c .status <<<"$am")"
expect_eq "alertmanager labels" \
    '{"alertname":"IdleGPUSession","container":"main","gpu":"0","model":"NVIDIA H100 80GB HBM3","namespace":"shared","node":"gpu-node-1","owner":"shared","pod":"notebook-a","severity":"warning","workload":"","workload_kind":""}' \
    "$(jq -cS '.alerts[0].labels' <<<"$am")"
expect_eq "alertmanager endsAt" '"0001-01-01T00:00:00Z"' "$(jq -c '.alerts[0].endsAt' <<<"$am")"

# The busy pod: no session, no message; its idle seconds are 0.
expect_eq "messages about train-1" 0 "$(got_count '(.body | tostring | contains("train-1"))')"
curl -sf "$AGENT_URL/metrics" >"$WORK/m1.txt"
grep -q '^mlwatch_gpu_idle_seconds{namespace="ml-team",pod="train-1",container="main",gpu="1",workload_kind="",workload="",owner="ml-team",node="gpu-node-1"} 0$' "$WORK/m1.txt" ||
    fail "train-1 idle seconds: $(grep train-1 "$WORK/m1.txt" | grep idle)"
ok
expect_eq "idle sessions in shared" 2 \
    "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="shared",node="gpu-node-1"\}/ { print $2 }' "$WORK/m1.txt")"
promtool check metrics <"$WORK/m1.txt" || fail "promtool check metrics"
ok

# notebook-b flaps: 0.4 s at 30 %, 0.4 s at 0 %, for 5 s (spikes shorter
# than the 3 s busy period, with room for a loaded machine that stretches
# a spike: with a 1 s period, one in a few runs under load ended the
# episode): still one episode, no resolved message.
for i in $(seq 1 6); do
    scenario 0 80 30
    sleep 0.4
    scenario 0 80 0
    sleep 0.4
done
sleep 1
expect_eq "chat messages for flapping notebook-b" 1 "$(got_count "$CHAT and $B")"

# notebook-a gets busy: one resolved message per receiver.
scenario 90 80 0
await_count "resolved chat message for notebook-a" "$CHAT and $A and (.body.text | startswith(\"Resolved\"))" 1
await_count "resolved alertmanager payload" "$AM and .body.status == \"resolved\"" 1
expect_eq "chat messages for notebook-a" 2 "$(got_count "$CHAT and $A")"
expect_eq "resolved payload endsAt is set" 1 \
    "$(got_count "$AM and .body.status == \"resolved\" and .body.alerts[0].endsAt != \"0001-01-01T00:00:00Z\"")"

# The receiver goes down; notebook-a goes idle again (a new episode): the
# message arrives once the receiver is back.
stop_receiver
scenario 0 80 0
sleep 4
expect_eq "nothing delivered while down" 2 "$(got_count "$CHAT and $A")"
start_receiver
await_count "new episode delivered after the receiver came back" "$CHAT and $A" 3 12
curl -sf "$AGENT_URL/metrics" >"$WORK/m2.txt"
failed=$(awk '/^mlwatch_notifications_total\{receiver="webhook",result="failed",node="gpu-node-1"\}/ { print $2 }' "$WORK/m2.txt")
awk -v f="$failed" 'BEGIN { exit !(f >= 1) }' || fail "failed deliveries not counted: '$failed'"
ok

# A restart: the open episodes (notebook-a, notebook-b) continue; nothing
# is sent again.
before=$(got_count 'true')
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || { tail -40 "$WORK/agent.log" >&2; fail "agent exit status"; }
cp "$WORK/agent.log" "$WORK/agent1.log"
PIDS=("$RECEIVER_PID")
[ -s "$WORK/data/state/idle-notifications.json" ] || fail "no state file"
ok
start_agent "${agent_args[@]}"
sleep 3
expect_eq "messages after a restart" "$before" "$(got_count 'true')"
curl -sf "$AGENT_URL/metrics" >"$WORK/m3.txt"
a=$(awk '/^mlwatch_gpu_idle_seconds\{namespace="shared",pod="notebook-a"/ { print $2 }' "$WORK/m3.txt")
awk -v a="$a" 'BEGIN { exit !(a >= 5) }' || fail "notebook-a's episode did not continue: idle $a s"
ok

# Secrets: not in the logs, not in the exposition, not in the state file.
for f in "$WORK/agent1.log" "$WORK/agent.log" "$WORK/m1.txt" "$WORK/m2.txt" "$WORK/m3.txt" \
    "$WORK/data/state/idle-notifications.json"; do
    if grep -q -e "$SECRET1" -e "$SECRET2" "$f"; then fail "a secret in $f"; fi
    ok
done
done_ok
