#!/usr/bin/env bash
# cluster_three.sh - a simulated three-node cluster on one hub, page by page.
# Three agents, each on its own copy of tests/fixtures/gpu-node holding only
# its node's pods (a pod is on one node), with the fake NVML library,
# remote-write to `mlwatch hub` and to Debian's VictoriaMetrics. Headless
# chromium (tests/integration/cluster/check.js with cluster/three.json), on
# the hub's UI and then on a store-less hub's UI reading VictoriaMetrics
# (--query-url), checks every panel of every page (Cluster, Overview, Workloads, GPUs, Sustainability,
# Node, Why is it slow?) for all nodes and then with each node picked in the
# node selector, which must narrow every panel (no other node named).
#   node-a  3 x H100: GPU 0 shared/notebook-a idle (0 %), GPU 1 ml-team/train-1
#           busy (80 %), GPU 2 shared/notebook-b idle: two idle sessions;
#   node-b  2 x A100: GPU 0 ml-team/train-0 busy (70 %), hot (88 C, SM clock
#           1100 of 1980 MHz, sw_thermal_slowdown): the doctor's
#           gpu_thermal_throttle finding; GPU 1 free; pod ml-team/train-2
#           has no GPU;
#   node-c  1 x H100 in MIG mode: GI 7 inference/infer-0 idle (0 %), GI 8
#           inference/infer-1 at 60 %.
# Cluster page, all / node-a / node-b / node-c: GPUs 6 / 3 / 2 / 1, allocated
# 5 / 3 / 1 / 1, busy 3 / 1 / 1 / 1 (the MIG GPU is busy through its slice:
# it reports no utilization of its own), idle 3 / 2 / 0 / 1; the idle-session
# table notebook-a, notebook-b (node-a), infer-0 (node-c); open sessions by
# namespace shared 2, inference 1, ml-team 0. Per node, exactly: each pod's
# working set (100 MiB), GPU utilization (train-1 0.8, train-0 0.7, the
# notebooks 0; MIG pods have none) and GPU memory (train-* 4e9 B,
# notebooks 1 GiB, infer-0 512 MiB, infer-1 1 GiB); each GPU's temperature
# (40 C, node-b GPU 0 88, node-c 50), power (100 W, node-c 200; no limit
# reported: 0), SM clock (1900 - 10 x index MHz; node-b GPU 0 1100, node-c
# 1700) and memory clock (2619 MHz) with their maxima, memory used, health
# (healthy) and clock event reasons (only node-b GPU 0 sw_thermal_slowdown);
# the MIG slices (node-c GPU 0 GI 7 0, GI 8 0.6); the one finding with its
# evidence from node-b's own GPU (SM clock 1100 MHz, not another node's GPU
# 0). The fixture's CPU and energy counters do not move: every CPU, power
# and energy figure is 0. Not stated: reclaimable GPU-hours and idle times
# (they grow with the time idle). Panels with nothing to draw (no CO2
# configured, no NUMA, cpufreq or pressure collectors, no XID, NVLink) must
# be empty, never in error; a panel added to a page fails this test until
# its figures are stated in three.json. Every page also passes the UI
# test's readability checks (tests/integration/ui/layout.js) at 1400 and
# 800 px, each node picked too, with screenshots in
# $MLWATCH_BUILD/artifacts/ui/cluster/ (CI keeps them).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"
source "$(dirname "$0")/cluster/cluster_lib.sh"
: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
command -v victoria-metrics >/dev/null || fail "victoria-metrics is not installed (scripts/install-deps.sh test)"
command -v node >/dev/null || fail "node is not installed (scripts/install-deps.sh test)"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/install-deps.sh test)"
[ -d "$MLWATCH_SRC/ui/node_modules/playwright-core" ] ||
    fail "ui/node_modules is missing: run 'npm ci' in ui/ (scripts/install-deps.sh test)"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"

H100="NVIDIA H100 80GB HBM3"
A100="NVIDIA A100-SXM4-80GB"
{
    echo "system driver=550.54.15"
    gpu_lines 0 "$H100" 0 2147483648 a
    gpu_lines 1 "$H100" 80 4294967296 a
    gpu_lines 2 "$H100" 0 2147483648 a
    echo "proc gpu=0 pid=4001 mem=1073741824"
    echo "proc gpu=1 pid=3001 mem=4000000000"
    echo "proc gpu=2 pid=4002 mem=1073741824"
} >"$WORK/scenario-a.txt"
{
    echo "system driver=550.54.15"
    gpu_lines 0 "$A100" 70 4294967296 b
    gpu_lines 1 "$A100" 0 0 b
    echo "gpu 0 temp=88 sm_mhz=1100 reasons=0x20"
    echo "proc gpu=0 pid=3000 mem=4000000000"
} >"$WORK/scenario-b.txt"
M="name=\"$H100 MIG 1g.10gb\" ci=0 memtotal=10200547328"
cat >"$WORK/scenario-c.txt" <<SCN
system driver=550.54.15
gpu 0 name="$H100" uuid=GPU-c0000000-0000-4000-8000-000000000000 bus=00000000:18:00.0 mig=1 gpm=1
gpu 0 memtotal=85899345920 memused=3000000000 power_mw=200000 energy_mj=1000000 temp=50 sm_mhz=1700 sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 gpm_graphics=30
mig gpu=0 index=0 uuid=MIG-c0000000-aaaa-5bbb-8ccc-000000000000 $M gi=7 memused=550502400 graphics=0
proc gpu=0 pid=5000 mem=536870912 gi=7 ci=0
mig gpu=0 index=1 uuid=MIG-c0000001-aaaa-5bbb-8ccc-000000000001 $M gi=8 memused=1087373312 graphics=60
proc gpu=0 pid=5001 mem=1073741824 gi=8 ci=0
SCN

# node_root NAME POD...: a copy of the gpu-node fixture holding only the
# named pods, by the two hex digits that end their UIDs and container IDs
# (09 = shared/notebook-a): a pod runs on one node, as in a cluster. The
# fixture's systemd service goes too, so that every workload is a pod.
node_root() {
    local root=$WORK/root-$1 f id
    shift
    cp -a "$MLWATCH_FIXTURES/gpu-node" "$root"
    for f in "$root"/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/*.slice \
        "$root"/var/log/containers/*.log "$root"/var/log/pods/*; do
        id=${f%.slice}
        id=${id%.log}
        [[ " $* " == *" ${id: -2} "* ]] || rm -rf "$f"
    done
    rm -rf "$root/sys/fs/cgroup/system.slice/gpu-burn.service"
}
node_root a 09 02 0a
node_root b 01 03
node_root c 0c 0d

start_vm "$WORK/vm"
launch hub hub --data-dir "$WORK/hub-data" --state-dir "$WORK/hub-state" --node-name hub-1 --interval 250ms
HUB=$URL_hub
wait_http "$HUB/-/ready"
for n in a b c; do
    cat >"$WORK/agent-$n.yml" <<YAML
remote_write:
  - {url: $HUB/api/v1/write, name: hub, queue_config: {batch_send_deadline: 200ms}}
  - {url: $VM/api/v1/write, name: vm, queue_config: {batch_send_deadline: 200ms}}
YAML
    FAKE_NVML_SCENARIO=$WORK/scenario-$n.txt launch agent-$n agent --node-name node-$n \
        --config "$WORK/agent-$n.yml" --root "$WORK/root-$n" --data-dir "$WORK/data-$n" \
        --state-dir "$WORK/state-$n" --store=false --collectors cgroup,gpu \
        --nvml-library "$fake" --rocm-library none --interval 250ms --gpu-process-interval 250ms \
        --idle-window 2s --idle-busy-period 1s
done
q() { # URL EXPR: the instant query's result, compact JSON
    curl -s --get --data-urlencode "query=$2" "$1/api/v1/query" | jq -c '.data.result'
}
qv_is() { [ "$(q "$1" "$2" | jq -r '.[0].value[1] // ""')" = "$3" ]; }
for url in "$HUB" "$VM"; do
    WAIT_EVERY=0.3 wait_for 40 qv_is "$url" 'count(mlwatch_gpu_idle_seconds > 0)' 3 ||
        fail "$url: the three idle sessions never came: $(q "$url" 'mlwatch_gpu_idle_seconds')"
    WAIT_EVERY=0.3 wait_for 40 qv_is "$url" 'count(mlwatch_finding == 1)' 1 ||
        fail "$url: node-b's thermal finding never came: $(q "$url" 'mlwatch_finding')"
    expect_eq "$url: nodes" '["node-a","node-b","node-c"]' \
        "$(q "$url" 'count by (node) (mlwatch_gpu_info)' | jq -c '[.[].metric.node] | sort')"
done
ok
SHOTS=$(cd "$MLWATCH_BUILD" && pwd)/artifacts/ui/cluster # kept by CI (.ci/run)
rm -rf "$SHOTS"
(cd "$WORK" && timeout 120 node "$MLWATCH_SRC/tests/integration/cluster/check.js" "$HUB" \
    "$MLWATCH_SRC/tests/integration/cluster/three.json" "$SHOTS") || fail "the browser check of the hub failed"
expect_eq "screenshots" 14 "$(find "$SHOTS" -name '*.png' | wc -l)"
ok
launch viewer hub --store=false --query-url "$VM/" --node-name viewer
(cd "$WORK" && timeout 120 node "$MLWATCH_SRC/tests/integration/cluster/check.js" "$URL_viewer" \
    "$MLWATCH_SRC/tests/integration/cluster/three.json") || fail "the browser check of VictoriaMetrics failed"
ok
done_ok
