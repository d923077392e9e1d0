#!/usr/bin/env bash
# energy_restart.sh - every exported energy total (node sources, the node's
# components, each share, each container and workload, CO2) continues across a restart
# of the agent: a clean stop, a kill -9, and a kill -9 with energy the
# agent never collected (exactly that energy is lost, nothing else). The
# state lives in DATA_DIR/state (written every interval); an older agent's
# file in --state-dir is migrated once. The RAPL package counter, the
# node's CPU time and one pod's CPU time (its pause container, b0b0...) are changed together while the
# agent is stopped (SIGSTOP), so each change lands in one interval: the pod
# ran all of the node's busy time and gets the whole package energy (idle
# floor set to 0 W), CO2 at 400 g/kWh.
source "$(dirname "$0")/lib.sh"

root=$(fixture_copy k8s-v2-systemd)
rapl=$MLWATCH_FIXTURES/rapl-cpufreq/sys
mkdir -p "$root/sys/class/powercap" "$root/sys/devices/virtual/powercap"
cp -a "$rapl/devices/virtual/powercap/." "$root/sys/devices/virtual/powercap/"
cp -a "$rapl/class/powercap/." "$root/sys/class/powercap/"
zone=$root/sys/devices/virtual/powercap/intel-rapl/intel-rapl:0
pod=$root/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaaaaaa_0000_4000_8000_000000000002.slice/cri-containerd-b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0.scope
pkg_uj=$(cat "$zone/energy_uj")
pod_us=40000
ticks=34567890 # cpu0 user, USER_HZ 100

args=(--root "$root" --interval 200ms --carbon-intensity 400 --energy-idle-watts cpu=0
    --nvml-library none --rocm-library none --freeipmi-library none
    --disable-collectors hwmon,ipmi)

# work JOULES: the package, the node's CPU0 and the pod advance together by
# JOULES J and JOULES / 100 s of CPU (the agent stopped meanwhile, if up).
work() {
    local j=$1 up=${2:-1}
    [ "$up" = 1 ] && kill -STOP "$AGENT_PID"
    pkg_uj=$((pkg_uj + j * 1000000))
    pod_us=$((pod_us + j * 10000))
    ticks=$((ticks + j))
    # In place (the collectors keep their files open): not sed -i.
    echo "$pkg_uj" >"$zone/energy_uj"
    sed "s/^usage_usec .*/usage_usec $pod_us/" "$pod/cpu.stat" >"$WORK/cpu.stat"
    cat "$WORK/cpu.stat" >"$pod/cpu.stat"
    sed "s/^cpu0 [0-9]*/cpu0 $ticks/; s/^cpu  [0-9]*/cpu  $((131604924 + ticks - 34567890))/" \
        "$root/proc/stat" >"$WORK/stat"
    cat "$WORK/stat" >"$root/proc/stat"
    [ "$up" = 1 ] && kill -CONT "$AGENT_PID"
    return 0
}

scrape() { curl -sf "$AGENT_URL/metrics" >"$WORK/$1.prom"; }

# The energy and CO2 totals of a scrape, one "series value" a line, sorted.
totals() {
    grep -E '^mlwatch_(node_energy_joules|energy_component_joules|energy_share_joules|container_energy_joules|container_co2_grams|energy_share_co2_grams|node_co2_grams|workload_energy_joules|workload_co2_grams|workload_gpu_seconds)_total' \
        "$WORK/$1.prom" | sort
}

intervals() {
    curl -sf "$AGENT_URL/metrics" | awk '/^mlwatch_energy_intervals_total/ { print $2 }'
}
intervals_at_least() { [ "$(intervals)" -ge "$1" ] 2>/dev/null; }

# The pod's CPU energy, the RAPL package's total, the node's CO2.
pod_j() {
    awk '/^mlwatch_container_energy_joules_total/ && /pod="jupyter-alice",container="POD"/ && /component="cpu"/ && /kind="dynamic"/ && /method="measured"/ { print $2 }' "$WORK/$1.prom"
}
rapl_j() { awk '/^mlwatch_node_energy_joules_total\{source="rapl",zone="package-0",/ { print $2 }' "$WORK/$1.prom"; }
co2() { awk '/^mlwatch_node_co2_grams_total/ { print $2 }' "$WORK/$1.prom"; }
# The counters hold some 84000 J: differences are exact to about 1e-9 J.
pod_is() {
    scrape now && awk -v g="$(pod_j now)" -v w="$1" 'BEGIN { exit !(g != "" && (g - w) ^ 2 < 1e-12) }'
}

# compare BEFORE AFTER DELTA: every series of BEFORE is in AFTER with its
# value plus DELTA x its share (energy: the pod and every sum it is in get
# DELTA J, CO2 DELTA x 400 / 3.6e6 g; the rest unchanged).
compare() {
    python3 - "$WORK/$1.prom" "$WORK/$2.prom" "$3" <<'PY'
import re, sys
def load(p):
    out = {}
    for line in open(p):
        if re.match(r'mlwatch_(node_energy_joules|energy_component_joules|energy_share_joules|container_energy_joules|container_co2_grams|energy_share_co2_grams|node_co2_grams|workload_energy_joules|workload_co2_grams|workload_gpu_seconds)_total', line):
            k, v = line.rsplit(' ', 1)
            out[k] = float(v)
    return out
before, after, d = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
grew = {
    'mlwatch_node_energy_joules_total{source="rapl",zone="package-0",method="measured",node="t1"}': d,
    'mlwatch_energy_component_joules_total{component="cpu",kind="dynamic",method="measured",node="t1"}': d,
    'mlwatch_node_co2_grams_total{node="t1"}': d * 400 / 3.6e6,
}
bad = []
assert before, "no totals before"
assert any('workload="jupyter-alice"' in k for k in before), "no workload totals"
for k, v in before.items():
    want = v + grew.get(k, 0)
    if 'pod="jupyter-alice",container="POD"' in k:
        want = v + (d if 'component="cpu",kind="dynamic"' in k else d * 400 / 3.6e6 if 'co2' in k else 0)
    if 'workload_kind="Pod",namespace="research",workload="jupyter-alice"' in k:
        want = v + (d if 'energy' in k and 'method="measured"' in k else d * 400 / 3.6e6 if 'co2' in k else 0)
    got = after.get(k)
    if got is None or abs(got - want) > 1e-6 * max(1, abs(want)):
        bad.append(f"{k}: before {v}, after {got}, want {want}")
if bad:
    sys.exit("\n".join(bad))
PY
}

# An older agent's state in --state-dir: migrated once into DATA_DIR/state.
mkdir -p "$WORK/state"
cat >"$WORK/state/energy-state.json" <<'JSON'
{"format":"mlwatch-energy-state","version":1,"identity":"unknown","saved_ms":1,"containers":[{"namespace":"ml","pod":"old","container":"main","joules":{"cpu":{"dynamic":1000,"idle":0},"dram":{"dynamic":0,"idle":0},"gpu":{"dynamic":0,"idle":0},"other":{"dynamic":0,"idle":0}},"co2_grams":2}],"node":[]}
JSON

start_agent "${args[@]}" --state-dir "$WORK/state"
grep -q "warn agent: --state-dir is deprecated" "$WORK/agent.log" || fail "no deprecation warning"
grep -q "energy totals migrated from $WORK/state/energy-state.json to $WORK/data/state/energy-state.json" "$WORK/agent.log" ||
    fail "no migration: $(cat "$WORK/agent.log")"
[ -f "$WORK/state/energy-state.json.migrated" ] && [ -f "$WORK/data/state/energy-state.json" ] ||
    fail "the old file was not migrated: $(ls -l "$WORK/state" "$WORK/data/state")"
ok
wait_for 10 intervals_at_least 2 || fail "no energy intervals"
scrape m
grep -q '^mlwatch_container_energy_joules_total{namespace="ml",pod="old",container="main",component="cpu",kind="dynamic",method="measured",node="t1"} 1000$' "$WORK/m.prom" ||
    fail "migrated total not exported: $(grep pod=\"old\" "$WORK/m.prom")"
ok

# 100 J in one interval, all the pod's.
work 100
wait_for 10 pod_is 100 || fail "pod energy: $(pod_j now), want 100"
ok
scrape a
awk -v g="$(rapl_j a)" 'BEGIN { exit !((g - 100) ^ 2 < 1e-12) }' || fail "RAPL package total $(rapl_j a), want 100"
ok
# The migrated 2 g, then 100 J at 400 g/kWh.
awk -v g="$(co2 a)" 'BEGIN { exit !((g - 2 - 100 * 400 / 3.6e6) ^ 2 < 1e-18) }' || fail "node CO2 $(co2 a)"
ok
# Parts add up: the components' total is the pod's plus the shares'.
python3 - "$WORK/a.prom" <<'PY' || fail "parts do not add up"
import sys
c = w = s = 0
for line in open(sys.argv[1]):
    if line.startswith('mlwatch_energy_component_joules_total'): c += float(line.split()[-1])
    if line.startswith('mlwatch_container_energy_joules_total'): w += float(line.split()[-1])
    if line.startswith('mlwatch_energy_share_joules_total'): s += float(line.split()[-1])
assert abs(c - (w + s)) < 1e-9 and abs(c - 1100) < 1e-9, (c, w, s)  # the migrated 1000 J too
PY
ok

# kill -9 after the agent collected the 100 J: nothing is lost.
kill -KILL "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
start_agent "${args[@]}"
wait_for 10 intervals_at_least 2 || fail "no energy intervals after kill -9"
scrape b
compare a b 0 || fail "totals changed across kill -9"
ok
# ... and they continue by exactly the next work.
work 50
wait_for 10 pod_is 150 || fail "pod energy after restart: $(pod_j now), want 150"
scrape c
compare b c 50 || fail "totals did not continue by 50 J"
ok

# A clean stop (SIGTERM) and start: unchanged.
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
start_agent "${args[@]}"
wait_for 10 intervals_at_least 2 || fail "no energy intervals after restart"
scrape d
compare c d 0 || fail "totals changed across a clean restart"
ok

# kill -9 with 30 J the agent never collected (it was stopped when they
# happened): exactly those 30 J are lost (they belong to the interval under
# way, and the restarted agent takes the counters as new baselines).
kill -STOP "$AGENT_PID"
work 30 0
kill -KILL "$AGENT_PID"
kill -CONT "$AGENT_PID" 2>/dev/null || true
wait "$AGENT_PID" 2>/dev/null || true
start_agent "${args[@]}"
wait_for 10 intervals_at_least 2 || fail "no energy intervals after the second kill -9"
scrape e
compare d e 0 || fail "totals after losing the uncollected interval"
ok
work 20
wait_for 10 pod_is 170 || fail "pod energy: $(pod_j now), want 170 (150 + 20; the 30 J lost)"
scrape f
compare e f 20 || fail "totals did not continue by 20 J"
ok

# Two agents with different data folders share nothing: a fresh one starts
# at 0 even with the same --state-dir.
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
: >"$WORK/agent.log" # emptied first, as start_agent does: it held the last agent's port
"$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data2" --state-dir "$WORK/state" \
    "${args[@]}" >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
PIDS+=("$AGENT_PID")
wait_for 20 agent_started || fail "second agent did not start"
AGENT_URL="http://127.0.0.1:$(agent_port)"
wait_http "$AGENT_URL/-/ready"
wait_for 10 intervals_at_least 2 || fail "no energy intervals in the second agent"
scrape g
[ -z "$(pod_j g)" ] || [ "$(pod_j g)" = 0 ] || fail "the other data folder's totals leaked: $(pod_j g)"
ok
done_ok
