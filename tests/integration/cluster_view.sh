#!/usr/bin/env bash
# cluster_view.sh - the cluster view across nodes, past one agent: two
# agents on their own fixture roots (copies of tests/fixtures/gpu-node, each
# with its own fake NVML scenario) and node names remote-write to
#   (a) `mlwatch hub` (collects nothing; its store, query API and UI), and
#   (b) Debian's VictoriaMetrics, viewed by a store-less hub with --query-url.
# Known values (--idle-window 2s):
#   node-a  3 × H100: GPU 0 shared/notebook-a idle, GPU 1 ml-team/train-1
#           busy (80 %), GPU 2 shared/notebook-b idle;
#   node-b  4 × A100: GPU 0 ml-team/train-0 busy (70 %), GPU 1
#           shared/notebook-c idle, GPU 2 inference/infer-0 idle, GPU 3 free.
# Both ways, asserted through the query API and in headless chromium
# (tests/integration/cluster/check.js): every series carries its agent's
# node label and nothing else names a node; the Cluster page's stats are
# 7 GPUs, 6 allocated, 2 busy, 4 idle; the idle-session table has the four
# sessions (no "duplicate series"); the Node page's legends are unique and
# name their node; selecting node-b in the node selector narrows every
# Cluster stat to 4 / 3 / 1 / 2 and the table to node-b's two sessions.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"
: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
command -v victoria-metrics >/dev/null || fail "victoria-metrics is not installed (scripts/install-deps.sh test)"
command -v node >/dev/null || fail "node is not installed (scripts/install-deps.sh test)"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/install-deps.sh test)"
[ -d "$MLWATCH_SRC/ui/node_modules/playwright-core" ] ||
    fail "ui/node_modules is missing: run 'npm ci' in ui/ (scripts/install-deps.sh test)"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"

source "$(dirname "$0")/cluster/cluster_lib.sh"

{
    echo "system driver=550.54.15"
    gpu_lines 0 "NVIDIA H100 80GB HBM3" 0 2147483648 a
    gpu_lines 1 "NVIDIA H100 80GB HBM3" 80 4294967296 a
    gpu_lines 2 "NVIDIA H100 80GB HBM3" 0 2147483648 a
    echo "proc gpu=0 pid=4001 mem=1073741824"
    echo "proc gpu=1 pid=3001 mem=4000000000"
    echo "proc gpu=2 pid=4002 mem=1073741824"
} >"$WORK/scenario-a.txt"
{
    echo "system driver=550.54.15"
    gpu_lines 0 "NVIDIA A100-SXM4-80GB" 70 4294967296 b
    gpu_lines 1 "NVIDIA A100-SXM4-80GB" 0 2147483648 b
    gpu_lines 2 "NVIDIA A100-SXM4-80GB" 0 2147483648 b
    gpu_lines 3 "NVIDIA A100-SXM4-80GB" 0 0 b
    echo "proc gpu=0 pid=3000 mem=4000000000"
    echo "proc gpu=1 pid=4003 mem=1073741824"
    echo "proc gpu=2 pid=5000 mem=1073741824"
} >"$WORK/scenario-b.txt"

start_vm "$WORK/vm"
launch hub hub --data-dir "$WORK/hub-data" --state-dir "$WORK/hub-state" --node-name hub-1 \
    --interval 250ms
HUB=$URL_hub
wait_http "$HUB/-/ready"
# The hub collects nothing: no series of its own about a host.
expect_eq "hub's build_info" "" "$(curl -s "$HUB/metrics" | grep '^mlwatch_build_info' || true)"

# The agents: the documented external_labels (node: ${NODE_NAME}) on one,
# --node-name on the other; both ship to the hub and to VictoriaMetrics.
for n in a b; do
    cat >"$WORK/agent-$n.yml" <<YAML
external_labels: {node: '\${NODE_NAME}'}
remote_write:
  - {url: $HUB/api/v1/write, name: hub, queue_config: {batch_send_deadline: 200ms}}
  - {url: $VM/api/v1/write, name: vm, queue_config: {batch_send_deadline: 200ms}}
YAML
    root=$(fixture_copy gpu-node)
    mv "$root" "$WORK/root-$n"
done
NODE_NAME=node-a FAKE_NVML_SCENARIO=$WORK/scenario-a.txt launch agent-a agent \
    --config "$WORK/agent-a.yml" --root "$WORK/root-a" --data-dir "$WORK/data-a" \
    --state-dir "$WORK/state-a" --store=false --collectors cgroup,gpu \
    --nvml-library "$fake" --rocm-library none --interval 250ms --gpu-process-interval 250ms \
    --idle-window 2s --idle-busy-period 1s
NODE_NAME=elsewhere FAKE_NVML_SCENARIO=$WORK/scenario-b.txt launch agent-b agent --node-name node-b \
    --config "$WORK/agent-b.yml" --root "$WORK/root-b" --data-dir "$WORK/data-b" \
    --state-dir "$WORK/state-b" --store=false --collectors cgroup,gpu \
    --nvml-library "$fake" --rocm-library none --interval 250ms --gpu-process-interval 250ms \
    --idle-window 2s --idle-busy-period 1s
launch viewer hub --store=false --query-url "$VM/" --node-name viewer
VIEWER=$URL_viewer

q() { # URL EXPR: the instant query's result, compact JSON
    curl -s --get --data-urlencode "query=$2" "$1/api/v1/query" | jq -c '.data.result'
}
qv() { q "$1" "$2" | jq -r '.[0].value[1] // ""'; }
qv_is() { [ "$(qv "$1" "$2")" = "$3" ]; }
for url in "$HUB" "$VM"; do
    WAIT_EVERY=0.3 wait_for 30 qv_is "$url" 'count(mlwatch_gpu_idle_seconds > 0)' 4 ||
        fail "$url: the four idle sessions never came: $(q "$url" 'mlwatch_gpu_idle_seconds')"
done
sleep 1

# Through the query API: the same answers from the hub and VictoriaMetrics.
spec=$MLWATCH_SRC/ui/dashboards.json
expr_of() { # PAGE PANEL [TARGET]: the expression with $node as All (.*)
    jq -r --arg p "$1" --argjson i "$2" --argjson t "${3:-0}" \
        '.pages[] | select(.id == $p) | .panels[] | select(.id == $i) | .targets[$t].expr' "$spec" |
        sed "s/\\\$node/${4:-.*}/g"
}
for url in "$HUB" "$VM"; do
    expect_eq "$url: nodes" '["node-a","node-b"]' \
        "$(q "$url" 'count by (node) (mlwatch_gpu_info)' | jq -c '[.[].metric.node] | sort')"
    expect_eq "$url: series without a node label" "[]" "$(q "$url" 'count({__name__=~"mlwatch_gpu.*", node=""})')"
    expect_eq "$url: series naming an instance" "[]" "$(q "$url" 'count({instance!=""})')"
    expect_eq "$url: GPUs" 7 "$(qv "$url" "$(expr_of cluster 1)")"
    expect_eq "$url: allocated" 6 "$(qv "$url" "$(expr_of cluster 2)")"
    expect_eq "$url: busy" 2 "$(qv "$url" "$(expr_of cluster 3)")"
    expect_eq "$url: idle" 4 "$(qv "$url" "$(expr_of cluster 4)")"
    expect_eq "$url: idle on node-b" 2 "$(qv "$url" "$(expr_of cluster 4 0 node-b)")"
    body=$(curl -s --get --data-urlencode "query=$(expr_of cluster 7 1)" "$url/api/v1/query")
    expect_eq "$url: idle-session table answers" success \
        "$(jq -r 'if .status == "success" then .status else "\(.status): \(.error)" end' <<<"$body")"
    expect_eq "$url: idle sessions" '["node-a/0/notebook-a","node-a/2/notebook-b","node-b/1/notebook-c","node-b/2/infer-0"]' \
        "$(jq -c '[.data.result[].metric | "\(.node)/\(.gpu)/\(.pod)"] | sort' <<<"$body")"
done

# In the browser, on the hub's UI and on the viewer's (VictoriaMetrics).
rows_all='[{"node":"node-b","namespace":"inference","pod":"infer-0","gpu":"2","model":"NVIDIA A100-SXM4-80GB"},{"node":"node-a","namespace":"shared","pod":"notebook-a","gpu":"0","model":"NVIDIA H100 80GB HBM3"},{"node":"node-a","namespace":"shared","pod":"notebook-b","gpu":"2","model":"NVIDIA H100 80GB HBM3"},{"node":"node-b","namespace":"shared","pod":"notebook-c","gpu":"1","model":"NVIDIA A100-SXM4-80GB"}]'
rows_b='[{"node":"node-b","namespace":"inference","pod":"infer-0","gpu":"2","model":"NVIDIA A100-SXM4-80GB"},{"node":"node-b","namespace":"shared","pod":"notebook-c","gpu":"1","model":"NVIDIA A100-SXM4-80GB"}]'
# All nodes: the GPUs page's temperatures (7 series; a chart draws at most 8,
# so not the Node page's 14 clocks), each legend naming its node.
temps_all=$(for n in a:0 a:1 a:2 b:0 b:1 b:2 b:3; do printf '"node-%s GPU %s",' "${n%:*}" "${n#*:}"; done)
clocks_b=$(for g in 0 1 2 3; do printf '"node-b GPU %s SM","node-b GPU %s memory",' "$g" "$g"; done)
cat >"$WORK/expect.json" <<JSON
{"nodes": ["node-a", "node-b"],
 "views": [
  {"hash": "cluster", "panels": {"cluster-1": {"value": 7}, "cluster-2": {"value": 6},
     "cluster-3": {"value": 2}, "cluster-4": {"value": 4}, "cluster-7": {"rows": $rows_all}}},
  {"hash": "gpu", "panels": {"gpu-1": {"sortedLabels": [${temps_all%,}]}}},
  {"hash": "cluster", "select": "node-b", "panels": {"cluster-1": {"value": 4},
     "cluster-2": {"value": 3}, "cluster-3": {"value": 1}, "cluster-4": {"value": 2},
     "cluster-7": {"rows": $rows_b}}},
  {"hash": "node", "select": "node-b", "panels": {"node-5": {"sortedLabels": [${clocks_b%,}]}}}
 ]}
JSON
for ui in "$HUB" "$VIEWER"; do
    (cd "$WORK" && timeout 120 node "$MLWATCH_SRC/tests/integration/cluster/check.js" "$ui" "$WORK/expect.json") ||
        fail "the browser check of $ui failed"
    ok
done
done_ok
