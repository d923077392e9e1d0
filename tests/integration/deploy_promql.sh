#!/usr/bin/env bash
# deploy_promql.sh - every PromQL expression of the alerting and recording
# rules (as shipped in the manifest's PrometheusRule) and of the Grafana
# dashboards (deploy/grafana/*.json, whichever exist) runs against a real
# Prometheus (Debian's) that scrapes mlwatch agents, and returns data.
#
# The agents (on 127.0.0.1, free ports):
#   gpu    tests/fixtures/gpu-node with the fake NVML library: GPU 0 held
#          by shared/notebook-a at 0 % (an idle session after the 1 s
#          --idle-window), GPU 1 lost, GPU 2 busy under ml-team/train-0,
#          throttled for heat (sw_thermal_slowdown) and with an XID 79,
#          GPU 3 free, in MIG mode with one idle instance; NVLink 0 of
#          GPU 2 with 3 replays (the GPUs page's MIG and NVLink panels);
#          a GPU reading that fails every cycle (collector errors);
#   host   tests/fixtures/rapl-cpufreq (RAPL, cpufreq with governors);
#   pods   tests/fixtures/k8s-v2-systemd (containers, CPU throttling).
# All three use a carbon-intensity schedule whose only row is from 2020,
# so CO2 is counted and the intensity is older than an hour.
# Prometheus finds them through file_sd targets that carry the
# __meta_kubernetes_* labels Kubernetes SD would give, and relabels them with
# deploy/prometheus/scrape-config.yml's own relabel_configs (Debian's
# Prometheus is built without Kubernetes SD): the series must come out with
# instance = the node name, node = the agent's own label (untouched), and a
# pod that is not Running is dropped.
#
# The same agents remote-write to `mlwatch hub` and to Debian's
# VictoriaMetrics, and then every expression must answer the same on the
# three backends at one instant (tests/deploy/promql_exprs.py --compare):
# the same series (less instance and job, which only the scrape adds, and
# __name__) with the same values, exactly, except for moving values: rates
# and increases (every range window set to 20 s, all of it scraped) within
# 7.5 %, counters and time-growing gauges read at an instant within 10 %
# (the scrape's samples and the agents' are up to a second apart; the run
# prints the largest difference let through, 4 % and 6 % at most so far).
# Where a backend truly differs, the KNOWN table there says how (one entry:
# VictoriaMetrics' X / (Y > 0) with Y = 0 on the CPU throttling panel).
# The answers that must be equal exactly (no rate, counter or growing
# gauge) must also be tests/golden/deploy_promql.txt's, series by series:
# the fixtures' figures (regenerate after an intended change with
# UPDATE_GOLDEN=1 and review the diff).
# Conditions the test cannot make hold, whose queries must only succeed
# (and are printed with 0 series): none of the alert expressions at present;
# `for:` durations are not waited for (the expressions are queried, not the
# alerts' firing state), and the rule groups must evaluate without error.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
command -v prometheus >/dev/null || fail "prometheus not installed (scripts/install-deps.sh test)"
command -v victoria-metrics >/dev/null || fail "victoria-metrics is not installed (scripts/install-deps.sh test)"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || fail "python3-yaml not installed"
manifest=$MLWATCH_SRC/deploy/kubernetes/mlwatch.yaml
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
cat >"$WORK/scenario.txt" <<'EOF'
system driver=550.54.15
gpu 0 name="NVIDIA A100-SXM4-80GB" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=0 memutil=0 memtotal=85899345920 memused=2147483648 power_mw=90000 energy_mj=1000000 temp=35 sm_mhz=1410 sm_max_mhz=1410 mem_mhz=1593 mem_max_mhz=1593
proc gpu=0 pid=4001 mem=1073741824
gpu 1 name="NVIDIA A100-SXM4-80GB" uuid=GPU-11111111-0000-4000-8000-000000000001 bus=00000000:28:00.0
gpu 1 lost=1
gpu 2 name="NVIDIA A100-SXM4-80GB" uuid=GPU-22222222-0000-4000-8000-000000000002 bus=00000000:38:00.0
gpu 2 util=80 memutil=40 memtotal=85899345920 memused=42949672960 power_mw=350000 energy_mj=5000000 temp=88 sm_mhz=1100 sm_max_mhz=1410 mem_mhz=1593 mem_max_mhz=1593 reasons=0x20
gpu 2 fail=pcie_gen:UNKNOWN
proc gpu=2 pid=3000 mem=40000000000 sm=80
event gpu=2 xid=79 id=1
gpu 3 name="NVIDIA A100-SXM4-80GB" uuid=GPU-33333333-0000-4000-8000-000000000003 bus=00000000:48:00.0
gpu 3 util=0 memtotal=85899345920 memused=0 power_mw=60000 energy_mj=1000 temp=30 mig=1
mig gpu=3 index=0 uuid=MIG-33333333-aaaa-5bbb-8ccc-000000000000 name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" gi=7 ci=0 memtotal=10200547328 memused=0 util=0
nvlink gpu=2 link=0 replay=3
EOF
printf 'TIME,GRAMS\n2020-01-01T00:00:00Z,300\n' >"$WORK/carbon.csv"

# The rules as shipped: the PrometheusRule's spec, from the manifest.
/usr/bin/python3 - "$manifest" "$WORK/rules.yml" <<'EOF' || fail "no PrometheusRule in $manifest"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
rule = [d for d in docs if d["kind"] == "PrometheusRule"]
assert len(rule) == 1
yaml.safe_dump(rule[0]["spec"], open(sys.argv[2], "w"))
EOF

# HTTPS and the metrics token, as the manifests run the agents (the Secrets
# as scripts/make-secrets.sh makes them); the scrape configuration's own
# scheme, tls_config and authorization reach them.
"$MLWATCH_SRC/scripts/make-secrets.sh" "$WORK/secrets" >/dev/null || fail "scripts/make-secrets.sh failed"
# The same agents also remote-write to a hub and to VictoriaMetrics.
start_vm "$WORK/vm"
hport=$(free_port)
"$MLWATCH_BIN" hub --listen "127.0.0.1:$hport" --data-dir "$WORK/hub-data" --state-dir "$WORK/hub-state" \
    --node-name hub-1 --interval 500ms >"$WORK/hub.log" 2>&1 &
PIDS+=($!)
HUB=http://127.0.0.1:$hport
wait_http "$HUB/-/ready" 30
cat >"$WORK/rw.yml" <<YAML
remote_write:
  - {url: $HUB/api/v1/write, name: hub, queue_config: {batch_send_deadline: 200ms}}
  - {url: $VM/api/v1/write, name: vm, queue_config: {batch_send_deadline: 200ms}}
YAML
common=(--config "$WORK/rw.yml" --interval 500ms --carbon-intensity "$WORK/carbon.csv" --rocm-library none
    --freeipmi-library none --store=false --tls-cert-file "$WORK/secrets/tls.crt"
    --tls-key-file "$WORK/secrets/tls.key" --metrics-token-file "$WORK/secrets/metrics")
declare -A URLS
run_agent() { # NAME ARGS...: start one agent, its URL in URLS[NAME]
    local name=$1 port
    shift
    port=$(free_port)
    "$MLWATCH_BIN" agent --listen "127.0.0.1:$port" --data-dir "$WORK/data-$name" \
        --state-dir "$WORK/state-$name" "${common[@]}" "$@" >"$WORK/agent-$name.log" 2>&1 &
    PIDS+=($!)
    URLS[$name]=127.0.0.1:$port
}
run_agent gpu --root "$MLWATCH_FIXTURES/gpu-node" --nvml-library "$fake" \
    --gpu-process-interval 500ms --idle-window 1s --idle-busy-period 1s --node-name gpu-node-1
run_agent host --root "$MLWATCH_FIXTURES/rapl-cpufreq" --nvml-library none --node-name cpu-node-2
pods_root=$(fixture_copy k8s-v2-systemd)
# The processes collector (the Overview's "busiest processes" panels) reads
# /proc/PID/stat; the fixture's process 1700 has only its cgroup file.
printf '1700 (trainer) S 1 1700 1700 0 -1 4194560 100 0 0 0 500 100 0 0 20 0 1 0 900 104857600 25600 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n' \
    >"$pods_root/proc/1700/stat"
run_agent pods --root "$pods_root" --nvml-library none --node-name cpu-node-3
https_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/secrets/ca.crt" --resolve "mlwatch:${1##*:}:127.0.0.1" "https://mlwatch:${1##*:}/-/ready")" = 200 ]; }
for n in gpu host pods; do wait_for 30 https_ready "${URLS[$n]}" || fail "no HTTPS answer from ${URLS[$n]}"; done

# The fixtures are still pictures; counters must move for rate() to see
# anything: every 250 ms the GPUs' energy counters advance as their power
# says (the fake NVML re-reads a replaced scenario), and one container of
# the pods node runs 10 more CFS periods, 3 of them throttled (written in
# place: the agent keeps cgroup files open).
cg=$pods_root/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice
cg=$cg/kubepods-burstable-podaaaaaaaa_0000_4000_8000_000000000005.slice
cg=$cg/cri-containerd-e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1.scope
[ -f "$cg/cpu.stat" ] || fail "fixture changed: no $cg/cpu.stat"
/usr/bin/python3 - "$WORK/scenario.txt" "$cg/cpu.stat" <<'EOF' &
import os, re, sys, time
scen, stat = sys.argv[1:]
base = open(scen).read()
power = {int(g): int(w) for g, w in re.findall(r"gpu (\d+) .*power_mw=(\d+)", base)}
tick = 0
while True:
    tick += 1
    extra = "".join(f"gpu {g} energy_mj={1000000 + tick * w // 4}\n" for g, w in power.items())
    with open(scen + ".tmp", "w") as f:
        f.write(base + extra)
    os.replace(scen + ".tmp", scen)
    text = (f"usage_usec {1000000 + tick * 200000}\nuser_usec {750000 + tick * 150000}\n"
            f"system_usec {250000 + tick * 50000}\ncore_sched.force_idle_usec 0\n"
            f"nr_periods {tick * 10}\nnr_throttled {tick * 3}\nthrottled_usec {tick * 30000}\n"
            "nr_bursts 0\nburst_usec 0\n")
    fd = os.open(stat, os.O_WRONLY)
    os.pwrite(fd, text.encode(), 0)  # only ever longer: no truncation needed
    os.close(fd)
    time.sleep(0.25)
EOF
PIDS+=($!)

# Targets as Kubernetes SD (role pod) would list the DaemonSet's pods, one
# extra that is not Running (must be dropped by the relabelling).
/usr/bin/python3 - "$WORK/targets.json" "${URLS[gpu]}" "${URLS[host]}" "${URLS[pods]}" \
    "127.0.0.1:$(free_port)" <<'EOF'
import json, sys
out, gpu, host, pods, pending = sys.argv[1:]
def t(addr, node, phase="Running"):
    return {"targets": [addr], "labels": {
        "__meta_kubernetes_namespace": "mlwatch",
        "__meta_kubernetes_pod_name": "mlwatch-" + node[-5:],
        "__meta_kubernetes_pod_node_name": node,
        "__meta_kubernetes_pod_phase": phase,
        "__meta_kubernetes_pod_container_name": "mlwatch",
        "__meta_kubernetes_pod_container_port_name": "http",
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": "mlwatch"}}
json.dump([t(gpu, "gpu-node-1"), t(host, "cpu-node-2"), t(pods, "cpu-node-3"),
           t(pending, "new-node-4", "Pending")], open(out, "w"))
EOF
# deploy/prometheus/scrape-config.yml with scrape and rule intervals of 1 s,
# the kubernetes_sd_configs replaced by the file above and the rules file.
/usr/bin/python3 - "$MLWATCH_SRC/deploy/prometheus/scrape-config.yml" "$WORK/prometheus.yml" \
    "$WORK/targets.json" "$WORK/rules.yml" "$WORK/secrets" <<'EOF'
import sys, yaml
src, out, targets, rules, secrets = sys.argv[1:]
c = yaml.safe_load(open(src))
# The Secrets where this test has them, nothing else of the job changed.
(j,) = c["scrape_configs"]
assert j["scheme"] == "https" and j["tls_config"]["server_name"] == "mlwatch", j
assert j["tls_config"]["ca_file"].endswith("/mlwatch-tls/ca.crt"), j
assert j["authorization"]["credentials_file"].endswith("/mlwatch-tokens/metrics"), j
j["tls_config"]["ca_file"] = secrets + "/ca.crt"
j["authorization"]["credentials_file"] = secrets + "/metrics"
c["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
c["rule_files"] = [rules]
(job,) = c["scrape_configs"]
assert job.pop("kubernetes_sd_configs")[0]["role"] == "pod"
job["file_sd_configs"] = [{"files": [targets], "refresh_interval": "1s"}]
job["scrape_interval"] = "1s"
job["scrape_timeout"] = "1s"
yaml.safe_dump(c, open(out, "w"))
EOF
promtool check config "$WORK/prometheus.yml" >"$WORK/check.txt" 2>&1 ||
    fail "promtool check config: $(cat "$WORK/check.txt")"
ok
pport=$(free_port)
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
PROM=http://127.0.0.1:$pport
wait_http "$PROM/-/ready" 30

q() { # EXPR: the instant query's result as JSON
    curl -sf --data-urlencode "query=$1" "$PROM/api/v1/query" | jq -c '.data.result'
}
# Until every agent has been scraped a few times and the idle session,
# the XID and the rules are in (rate() needs two samples).
all_in() {
    [ "$(q 'count(count_over_time(up[1m]) >= 4)' | jq -r '.[0].value[1] // 0')" = 3 ] &&
        [ "$(q 'count(mlwatch_gpu_idle_seconds > 0)' | jq -r '.[0].value[1] // 0')" -ge 1 ] &&
        [ "$(q 'count(mlwatch_gpu_xid_errors_total)' | jq -r '.[0].value[1] // 0')" -ge 1 ] &&
        [ "$(q 'count(namespace:mlwatch_idle_gpus:rate1h)' | jq -r '.[0].value[1] // 0')" -ge 1 ]
}
if ! WAIT_EVERY=0.5 wait_for 25 all_in; then
    tail -5 "$WORK"/agent-*.log "$WORK/prometheus.log" >&2
    fail "no data in Prometheus after 25 s: up=$(q up)"
fi
ok

# The relabelling: instance and node are the node names, the Pending pod
# was dropped, and no series carries the agent pod's own namespace.
expect_eq "targets" "cpu-node-2 cpu-node-3 gpu-node-1" \
    "$(q 'up == 1' | jq -r '[.[].metric.instance] | sort | join(" ")')"
expect_eq "node label" "cpu-node-2 cpu-node-3 gpu-node-1" \
    "$(q 'count by (node) (mlwatch_build_info)' | jq -r '[.[].metric.node] | sort | join(" ")')"
expect_eq "series of namespace mlwatch" "[]" "$(q 'count({namespace="mlwatch"})')"
# The agent's node label comes through the scrape as it is: not renamed
# (exported_node) by a target label, on every series.
expect_eq "series with exported_node" "[]" "$(q 'count({exported_node!=""})')"
expect_eq "series without node" "[]" "$(q 'count({__name__=~"mlwatch_.+", node=""})')"
expect_eq "idle session of notebook-a" \
    '{"container":"main","gpu":"0","namespace":"shared","pod":"notebook-a"}' \
    "$(q 'mlwatch_gpu_idle_seconds > 0' | jq -c '.[0].metric | {container, gpu, namespace, pod}')"

# The rule groups evaluate without error.
curl -sf "$PROM/api/v1/rules" >"$WORK/rules.json"
expect_eq "rule health" "ok" \
    "$(jq -r '[.data.groups[].rules[].health] | unique | join(",")' "$WORK/rules.json")"
expect_eq "rule count" \
    "$(/usr/bin/python3 -c 'import sys, yaml; print(sum(len(g["rules"]) for g in yaml.safe_load(open(sys.argv[1]))["groups"]))' "$WORK/rules.yml")" \
    "$(jq '[.data.groups[].rules[]] | length' "$WORK/rules.json")"

# Every expression, with its series count.
grafana=$MLWATCH_SRC/deploy/grafana
ndash=$(find "$grafana" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l)
echo "dashboards: $ndash file(s) in deploy/grafana"
/usr/bin/python3 "$MLWATCH_SRC/tests/deploy/promql_exprs.py" --url "$PROM" \
    --rules "$WORK/rules.yml" --grafana "$grafana" >"$WORK/exprs.txt" 2>&1 || {
    cat "$WORK/exprs.txt" >&2
    fail "some expressions failed or returned nothing"
}
cat "$WORK/exprs.txt"
ok

# The same expressions on the three backends at one instant.
rw_in() { # URL: the three nodes' series and the idle session are there
    local u=$1
    [ "$(curl -s --data-urlencode 'query=count(count by (node) (mlwatch_build_info))' "$u/api/v1/query" | jq -r '.data.result[0].value[1] // 0')" = 3 ] &&
        [ "$(curl -s --data-urlencode 'query=count(mlwatch_gpu_idle_seconds > 0)' "$u/api/v1/query" | jq -r '.data.result[0].value[1] // 0')" -ge 1 ]
}
for u in "$HUB" "$VM"; do WAIT_EVERY=0.5 wait_for 20 rw_in "$u" || fail "$u: the agents' series never came"; done
# Each compared window (20 s, ending 3 s ago) within what Prometheus
# scraped: 24 s of scrapes (one a second) of every agent.
scraped_24s() { [ "$(q 'count(count_over_time(up[24s]) >= 23)' | jq -r '.[0].value[1] // 0')" = 3 ]; }
WAIT_EVERY=0.5 wait_for 40 scraped_24s || fail "Prometheus does not scrape every second: $(q 'count_over_time(up[24s])')"
/usr/bin/python3 "$MLWATCH_SRC/tests/deploy/promql_exprs.py" --url "$PROM" --compare "hub=$HUB" --compare "vm=$VM" \
    --golden "$MLWATCH_SRC/tests/golden/deploy_promql.txt" \
    --rules "$WORK/rules.yml" --grafana "$grafana" >"$WORK/compare.txt" 2>&1 || {
    cat "$WORK/compare.txt" >&2
    fail "the backends answer differently"
}
cat "$WORK/compare.txt"
ok
done_ok
