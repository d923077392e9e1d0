#!/usr/bin/env bash
# idle_allocated.sh - a GPU held by allocation only: the kubelet allocated
# GPU 0 to shared/notebook-z (fake pod-resources server on the kubelet's
# socket under --root), none of its processes is on it, and its
# utilization is 0: after the 2 s idle window it is exactly one idle
# session. ml-team/train-1 is allocated GPU 1 and also has a process on it
# (busy): one session, not two, and not idle. With the flag off, or without
# the server (no socket), nothing of it is reported and nothing is logged;
# a server that fails is logged once and breaks nothing. The allocation is
# also an energy reservation: GPU 0's idle energy is notebook-z's.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
/usr/bin/python3 -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
cat >"$WORK/scenario.txt" <<EOF2
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=0 memtotal=85520809984 memused=0 power_mw=70000 unsupported=energy
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-11111111-0000-4000-8000-000000000001 bus=00000000:28:00.0
gpu 1 util=80 memtotal=85520809984 memused=4294967296 power_mw=600000
proc gpu=1 pid=3001 mem=4000000000
EOF2

# The fixture node, copied so that the kubelet's socket can live in it.
root=$WORK/root
cp -a "$MLWATCH_FIXTURES/gpu-node" "$root"
sock=$root/var/lib/kubelet/pod-resources/kubelet.sock
mkdir -p "$(dirname "$sock")"

start_fake() {
    /usr/bin/python3 "$MLWATCH_SRC/tests/fakeapi/fake_podresources.py" --socket "$sock" "$@" &
    FAKE_PID=$!
    PIDS+=("$FAKE_PID")
    wait_for 10 test -S "$sock" || fail "fake pod-resources server did not start"
}
stop_fake() {
    kill "$FAKE_PID"
    wait "$FAKE_PID" 2>/dev/null || true
    rm -f "$sock"
}
stop_agent() {
    kill -TERM "$AGENT_PID"
    wait "$AGENT_PID" || { tail -40 "$WORK/agent.log" >&2; fail "agent exit status"; }
}

agent_args=(--root "$root" --collectors cgroup,gpu --nvml-library "$fake" --rocm-library none
    --interval 200ms --gpu-process-interval 200ms --idle-window 2s --idle-busy-period 1s
    --node-name gpu-node-1)
Z='mlwatch_gpu_idle_seconds{namespace="shared",pod="notebook-z",container="main",gpu="0",workload_kind="",workload="",owner="shared",node="gpu-node-1"}'

start_fake --alloc "shared/notebook-z/main=nvidia.com/gpu:GPU-00000000-0000-4000-8000-000000000000" \
    --alloc "ml-team/train-1/main=nvidia.com/gpu:GPU-11111111-0000-4000-8000-000000000001" \
    --alloc "shared/notebook-z/main=cpu:0,1"
rm -rf "$WORK/data" # a fresh agent: the energy totals it restores would name notebook-z
start_agent "${agent_args[@]}"
shared_sessions() { awk '/^mlwatch_idle_gpu_sessions\{namespace="shared",node="gpu-node-1"\}/ { print $2 }' "$WORK/m1.txt"; }
one_shared_session() { # in a fresh scrape, kept in $WORK/m1.txt
    curl -sf "$AGENT_URL/metrics" >"$WORK/m1.txt" || true
    [ "$(shared_sessions)" = 1 ]
}
WAIT_EVERY=0.2 wait_for 10 one_shared_session || fail "no idle session for notebook-z: $(grep idle "$WORK/m1.txt")"
expect_eq "idle sessions in shared" 1 "$(shared_sessions)"
z=$(grep -F "$Z " "$WORK/m1.txt" | awk '{ print $2 }')
awk -v z="$z" 'BEGIN { exit !(z > 0) }' || fail "notebook-z idle seconds: '$z'"
ok
expect_eq "sessions of notebook-z" 1 "$(grep -c '^mlwatch_gpu_idle_seconds{namespace="shared",pod="notebook-z"' "$WORK/m1.txt")"
expect_eq "sessions of train-1 (process and allocation are one)" \
    'mlwatch_gpu_idle_seconds{namespace="ml-team",pod="train-1",container="main",gpu="1",workload_kind="",workload="",owner="ml-team",node="gpu-node-1"} 0' \
    "$(grep '^mlwatch_gpu_idle_seconds{namespace="ml-team",pod="train-1"' "$WORK/m1.txt")"
expect_eq "idle sessions in ml-team" 0 \
    "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="ml-team",node="gpu-node-1"\}/ { print $2 }' "$WORK/m1.txt")"
grep -q "idle session: shared/notebook-z container main GPU 0" "$WORK/agent.log" ||
    fail "no log of the idle session: $(tail -5 "$WORK/agent.log")"
ok
expect_eq "pod-resources warnings" 0 "$(grep -c podresources "$WORK/agent.log" || true)"
# The allocation is a reservation (energy, default idle policy requests):
# GPU 0's idle energy (its floor, learnt at its idle 70 W) is notebook-z's;
# its dynamic energy, none of whose processes used it, is not.
zj() { awk -v k="$1" '$1 == "mlwatch_container_energy_joules_total{namespace=\"shared\",pod=\"notebook-z\",container=\"main\",component=\"gpu\",kind=\"" k "\",method=\"measured\",node=\"gpu-node-1\"}" { print $2 }' "$WORK/m1.txt"; }
z_reserved() { curl -sf "$AGENT_URL/metrics" >"$WORK/m1.txt" || true; awk -v z="$(zj idle)" 'BEGIN { exit !(z > 0) }'; }
WAIT_EVERY=0.2 wait_for 10 z_reserved || fail "notebook-z's GPU idle energy: '$(zj idle)': $(grep -E 'energy_share|idle_floor|component_joules' "$WORK/m1.txt")"
d=$(zj dynamic)
expect_eq "notebook-z's GPU dynamic energy (no series: none)" 0 "${d:-0}"
stop_agent

# --kubelet-pod-resources=false: the socket is not asked.
rm -rf "$WORK/data" # a fresh agent: the energy totals it restores would name notebook-z
start_agent "${agent_args[@]}" --kubelet-pod-resources=false
sleep 3
curl -sf "$AGENT_URL/metrics" >"$WORK/m0.txt"
expect_eq "notebook-z with the flag off" 0 "$(grep -c 'pod="notebook-z"' "$WORK/m0.txt" || true)"
stop_agent
stop_fake

# No socket: no allocation-only session, no warning.
rm -rf "$WORK/data" # a fresh agent: the energy totals it restores would name notebook-z
start_agent "${agent_args[@]}"
sleep 3
curl -sf "$AGENT_URL/metrics" >"$WORK/m2.txt"
expect_eq "notebook-z without the kubelet socket" 0 "$(grep -c 'pod="notebook-z"' "$WORK/m2.txt" || true)"
expect_eq "train-1 still seen by its process" 1 "$(grep -c '^mlwatch_gpu_idle_seconds{namespace="ml-team",pod="train-1"' "$WORK/m2.txt")"
expect_eq "pod-resources log lines without a socket" 0 "$(grep -c podresources "$WORK/agent.log" || true)"
stop_agent

# A kubelet that answers UNAVAILABLE (14): one warning naming the status.
start_fake --fail 14
rm -rf "$WORK/data" # a fresh agent: the energy totals it restores would name notebook-z
start_agent "${agent_args[@]}"
sleep 2
curl -sf "$AGENT_URL/metrics" >"$WORK/m3.txt"
expect_eq "notebook-z with a failing kubelet" 0 "$(grep -c 'pod="notebook-z"' "$WORK/m3.txt" || true)"
expect_eq "warnings of a failing kubelet" 1 "$(grep -c 'kubelet pod-resources List: .*grpc-status 14: fake failure' "$WORK/agent.log" || true)"
stop_agent
done_ok
