#!/usr/bin/env bash
# rules_hub.sh - the hub evaluates the shipped rules on what node agents
# remote-write (issue 26, Deliver 6): a node agent (fake NVML, GPU 1's row
# remapping failed) ships to a hub; on the hub MlwatchGPUUnhealthy is pending
# with the node's labels, and once the GPU is healthy again it is gone at
# the next evaluations: the agent ships a staleness marker for the health
# series it no longer collects (reason="row_remap_failure"), as Prometheus's
# remote write does, instead of leaving the hub its last sample for the
# 5-minute lookback. The node agent itself evaluates only its --rule-file.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
scenario() { # REMAP_FAILURE of GPU 1
    cat >"$WORK/scenario.tmp" <<EOF
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=70 memtotal=85520809984 memused=2147483648 power_mw=100000
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-11111111-0000-4000-8000-000000000001 bus=00000000:28:00.0
gpu 1 util=80 memtotal=85520809984 memused=4294967296 power_mw=600000 remapped=0,0,0,$1
EOF
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}

HUBPORT=$(free_port)
"$MLWATCH_BIN" hub --listen "127.0.0.1:$HUBPORT" --data-dir "$WORK/hub" --node-name hub \
    --interval 1s --rules-evaluation-interval 1s >"$WORK/hub.log" 2>&1 &
PIDS+=($!)
HUB=http://127.0.0.1:$HUBPORT
wait_http "$HUB/-/ready" 20

cat >"$WORK/node.yml" <<EOF
groups:
  - name: node
    rules:
      - record: node:one
        expr: vector(1)
EOF
scenario 1
NODE_NAME=n1 start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors gpu --nvml-library "$fake" \
    --rocm-library none --interval 1s --gpu-process-interval 1s --rules-evaluation-interval 1s \
    --rule-file "$WORK/node.yml" --remote-write "$HUB/api/v1/write"
expect_eq "the node agent's rules" "node" \
    "$(curl -s "$AGENT_URL/api/v1/rules" | jq -r '[.data.groups[].name] | join(" ")')"
expect_eq "the hub's rules" "mlwatch-idle.recording mlwatch.alerts" \
    "$(curl -s "$HUB/api/v1/rules" | jq -r '[.data.groups[].name] | join(" ")')"

# hub_alert NAME: the labels of alert NAME on the hub ("" when none).
hub_alert() { curl -s "$HUB/api/v1/alerts" | jq -c ".data.alerts[] | select(.labels.alertname == \"$1\") | [.state, .labels]"; }
has_alert() { [ -n "$(hub_alert "$1")" ]; }
no_alert() { [ -z "$(hub_alert "$1")" ]; }
wait_for 15 has_alert MlwatchGPUUnhealthy || fail "no MlwatchGPUUnhealthy on the hub: $(curl -s "$HUB/api/v1/alerts")"
expect_eq "on the hub, with the node's labels" '["pending",{"action":"drain_and_contact_support","alertname":"MlwatchGPUUnhealthy","gpu":"1","node":"n1","reason":"row_remap_failure","severity":"critical","state":"unhealthy","uuid":"GPU-11111111-0000-4000-8000-000000000001"}]' \
    "$(hub_alert MlwatchGPUUnhealthy)"

scenario 0
healthy_ms=$(date +%s%3N)
wait_for 10 no_alert MlwatchGPUUnhealthy || fail "still on the hub: $(hub_alert MlwatchGPUUnhealthy)"
gone_ms=$(date +%s%3N)
# the GPU thread's next poll, the shipper's next batch, the hub's next
# evaluation: seconds, not the lookback's 5 minutes
[ $((gone_ms - healthy_ms)) -lt 8000 ] || fail "gone after $((gone_ms - healthy_ms)) ms"
ok
expect_eq "the old health series on the hub" '[]' \
    "$(curl -s "$HUB/api/v1/query" --data-urlencode 'query=mlwatch_gpu_health{node="n1",reason="row_remap_failure"}' | jq -c .data.result)"
expect_eq "the new one" '[["healthy","1"]]' \
    "$(curl -s "$HUB/api/v1/query" --data-urlencode 'query=mlwatch_gpu_health{node="n1",gpu="1"} == 1' | jq -c '[.data.result[] | [.metric.state, .value[1]]]')"
expect_eq "MlwatchGPUNodeDegraded gone too" "" "$(hub_alert MlwatchGPUNodeDegraded)"
done_ok
