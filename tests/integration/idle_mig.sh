#!/usr/bin/env bash
# idle_mig.sh - idle sessions per MIG instance. An H100 in MIG mode (the
# fake NVML's GPM gives each GPU instance its own activity): instance GI 7
# is used by inference/infer-0 at 0 %, GI 8 by inference/infer-1 at 60 %;
# GI 9 is allocated by the kubelet (fake pod-resources server) to
# shared/notebook-z, which has no process on it, at 0 %; GI 10 is allocated
# to ml-team/train-1 at 70 %. After the 2 s window exactly the idle slices
# have open sessions, one per instance, labelled like the MIG families;
# the busy slices of the same GPU have none. A local webhook receiver gets
# one message per idle slice, naming the slice, and a resolved one when GI 7
# gets busy. Then the GPU's energy moves: the allocated, unused slices
# reserve their memory fraction of its idle energy (0.11875 each).
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
/usr/bin/python3 -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
M="name=\"NVIDIA H100 80GB HBM3 MIG 1g.10gb\" ci=0 memtotal=10200547328"
cat >"$WORK/scenario.txt" <<EOF2
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-h100h100-0000-4000-8000-000000000000 bus=00000000:18:00.0 mig=1 gpm=1
gpu 0 memtotal=85899345920 memused=3000000000 power_mw=200000 gpm_graphics=30
mig gpu=0 index=0 uuid=MIG-10000000-aaaa-5bbb-8ccc-000000000000 $M gi=7 memused=550502400 graphics=0
proc gpu=0 pid=5000 mem=536870912 gi=7 ci=0
mig gpu=0 index=1 uuid=MIG-10000001-aaaa-5bbb-8ccc-000000000001 $M gi=8 memused=1087373312 graphics=60
proc gpu=0 pid=5001 mem=1073741824 gi=8 ci=0
mig gpu=0 index=2 uuid=MIG-10000002-aaaa-5bbb-8ccc-000000000002 $M gi=9 memused=13631488 graphics=0
mig gpu=0 index=3 uuid=MIG-10000003-aaaa-5bbb-8ccc-000000000003 $M gi=10 memused=13631488 graphics=70
EOF2

root=$WORK/root
cp -a "$MLWATCH_FIXTURES/gpu-node" "$root"
sock=$root/var/lib/kubelet/pod-resources/kubelet.sock
mkdir -p "$(dirname "$sock")"
/usr/bin/python3 "$MLWATCH_SRC/tests/fakeapi/fake_podresources.py" --socket "$sock" \
    --alloc "shared/notebook-z/main=nvidia.com/gpu:MIG-10000002-aaaa-5bbb-8ccc-000000000002" \
    --alloc "ml-team/train-1/main=nvidia.com/gpu:MIG-10000003-aaaa-5bbb-8ccc-000000000003" \
    --alloc "inference/infer-0/main=nvidia.com/gpu:MIG-10000000-aaaa-5bbb-8ccc-000000000000" &
PIDS+=($!)
wait_for 10 test -S "$sock" || fail "fake pod-resources server did not start"

RPORT=$(free_port)
python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port "$RPORT" --out "$WORK/got.jsonl" &
PIDS+=($!)
wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$RPORT/" || fail "receiver did not start"
start_agent --root "$root" --collectors cgroup,gpu --nvml-library "$fake" --rocm-library none \
    --interval 200ms --gpu-process-interval 200ms --idle-window 2s --idle-busy-period 1s \
    --node-name gpu-node-1 --notify-webhook "http://127.0.0.1:$RPORT/hooks/x" \
    --notify-repeat-interval 1h --state-dir "$WORK/state" --energy-idle-watts gpu=100
idle_slices() { # in a fresh scrape, kept in $WORK/m.txt: infer-0's and notebook-z's
    curl -sf "$AGENT_URL/metrics" >"$WORK/m.txt" || true
    [ "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="inference",node="gpu-node-1"\}/ { print $2 }' "$WORK/m.txt")" = 1 ] &&
        [ "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="shared",node="gpu-node-1"\}/ { print $2 }' "$WORK/m.txt")" = 1 ]
}
WAIT_EVERY=0.2 wait_for 15 idle_slices || fail "no idle MIG sessions: $(grep idle "$WORK/m.txt")"
expect_eq "idle sessions in ml-team (busy allocated slice)" 0 \
    "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="ml-team",node="gpu-node-1"\}/ { print $2 }' "$WORK/m.txt")"
expect_eq "activity of GI 9" 0 "$(awk '/^mlwatch_mig_utilization_ratio\{.*gpu_instance="9"/ { print $2 }' "$WORK/m.txt")"
expect_eq "activity of GI 8" 0.6 "$(awk '/^mlwatch_mig_utilization_ratio\{.*gpu_instance="8"/ { print $2 }' "$WORK/m.txt")"
ok
L='container="main",gpu="0",mig_profile="1g.10gb"'
grep -q "^mlwatch_gpu_idle_seconds{namespace=\"inference\",pod=\"infer-0\",$L,gpu_instance=\"7\",compute_instance=\"0\",workload_kind=\"\",workload=\"\",owner=\"inference\",node=\"gpu-node-1\"} [1-9]" "$WORK/m.txt" ||
    fail "infer-0 on GI 7 not idle: $(grep idle_seconds "$WORK/m.txt")"
grep -q "^mlwatch_gpu_idle_seconds{namespace=\"shared\",pod=\"notebook-z\",$L,gpu_instance=\"9\",compute_instance=\"0\",workload_kind=\"\",workload=\"\",owner=\"shared\",node=\"gpu-node-1\"} [1-9]" "$WORK/m.txt" ||
    fail "notebook-z on GI 9 (allocated only) not idle: $(grep idle_seconds "$WORK/m.txt")"
expect_eq "infer-1 on GI 8 (busy)" \
    "mlwatch_gpu_idle_seconds{namespace=\"inference\",pod=\"infer-1\",$L,gpu_instance=\"8\",compute_instance=\"0\",workload_kind=\"\",workload=\"\",owner=\"inference\",node=\"gpu-node-1\"} 0" \
    "$(grep '^mlwatch_gpu_idle_seconds{namespace="inference",pod="infer-1"' "$WORK/m.txt")"
expect_eq "train-1 on GI 10 (allocated, busy)" \
    "mlwatch_gpu_idle_seconds{namespace=\"ml-team\",pod=\"train-1\",$L,gpu_instance=\"10\",compute_instance=\"0\",workload_kind=\"\",workload=\"\",owner=\"ml-team\",node=\"gpu-node-1\"} 0" \
    "$(grep '^mlwatch_gpu_idle_seconds{namespace="ml-team",pod="train-1"' "$WORK/m.txt")"
# Allocation and processes on the same instance are one session.
expect_eq "sessions of infer-0" 1 "$(grep -c '^mlwatch_gpu_idle_seconds{namespace="inference",pod="infer-0"' "$WORK/m.txt")"
expect_eq "idle-seconds samples" 4 "$(grep -c '^mlwatch_gpu_idle_seconds{' "$WORK/m.txt")"
grep -q "idle session: shared/notebook-z container main GPU 0 MIG 1g.10gb GI 9 CI 0 below 5%" "$WORK/agent.log" ||
    fail "no log of the MIG idle session: $(grep idle "$WORK/agent.log" | tail -5)"
ok

# One message per idle slice, naming it; none about the busy ones.
Z='(.body.text // "" | contains("pod shared/notebook-z"))'
I0='(.body.text // "" | contains("pod inference/infer-0"))'
messages_sent() { got_at_least "$Z" 1 && got_at_least "$I0" 1; }
wait_for 8 messages_sent || fail "no messages: $(cat "$WORK/got.jsonl" 2>&1)"
t=$(jq -r "select($Z) | .body.text" "$WORK/got.jsonl")
for want in "Idle GPU: GPU 0 (NVIDIA H100 80GB HBM3 MIG 1g.10gb, GI 9 CI 0) on gpu-node-1 held by pod shared/notebook-z" \
    "MIG-10000002-aaaa-5bbb-8ccc-000000000002"; do
    grep -qF "$want" <<<"$t" || fail "message lacks '$want': $t"
    ok
done
expect_eq "messages about notebook-z" 1 "$(got_count "$Z")"
expect_eq "messages about infer-0" 1 "$(got_count "$I0")"
expect_eq "messages about busy slices" 0 "$(got_count '(.body | tostring | test("infer-1|train-1"))')"

# GI 7 gets busy: its episode ends after the busy period, GI 9's stays.
sed -i 's/gi=7 memused=550502400 graphics=0/gi=7 memused=550502400 graphics=50/' "$WORK/scenario.txt"
gi7_ended() { # in a fresh scrape, kept in $WORK/m2.txt
    curl -sf "$AGENT_URL/metrics" >"$WORK/m2.txt" || true
    [ "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="inference",node="gpu-node-1"\}/ { print $2 }' "$WORK/m2.txt")" = 0 ]
}
WAIT_EVERY=0.2 wait_for 10 gi7_ended || fail "GI 7 episode did not end: $(grep idle "$WORK/m2.txt")"
expect_eq "idle sessions in shared after GI 7 got busy" 1 \
    "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="shared",node="gpu-node-1"\}/ { print $2 }' "$WORK/m2.txt")"
grep -q "idle session ended (busy): inference/infer-0 container main GPU 0 MIG 1g.10gb GI 7 CI 0" "$WORK/agent.log" ||
    fail "no log of the end: $(grep idle "$WORK/agent.log" | tail -5)"
ok
wait_for 8 got_at_least "$I0" 2 || fail "no resolved message for infer-0: $(cat "$WORK/got.jsonl")"
expect_eq "messages about notebook-z (still open)" 1 "$(got_count "$Z")"

# Energy: the GPU's counter moves (250 W); under the default requests
# policy each slice allocated to a pod and used by no process, GI 9
# (notebook-z) and GI 10 (train-1), reserves its memory fraction of the
# GPU's idle energy, 10200547328 / 85899345920 = 0.11875 of the node's GPU
# idle joules in every interval, so of their sum (docs/energy.md).
cp "$WORK/scenario.txt" "$WORK/base.txt"
(for i in $(seq 1 400); do
    { cat "$WORK/base.txt"; echo "gpu 0 energy_mj=$((1000000 + i * 25000))"; } >"$WORK/sc.tmp"
    mv "$WORK/sc.tmp" "$WORK/scenario.txt"
    sleep 0.1
done) &
PIDS+=($!)
gpu_idle() { # POD: its GPU idle joules in $WORK/m3.txt
    awk -v p="pod=\"$1\"" 'index($0, "mlwatch_container_energy_joules_total{") == 1 && index($0, p) &&
        /component="gpu"/ && /kind="idle"/ { s += $2 } END { printf "%.12g", s }' "$WORK/m3.txt"
}
reserved() {
    curl -sf "$AGENT_URL/metrics" >"$WORK/m3.txt" || return 1
    awk 'BEGIN { exit !(ARGV[1] > 20) }' "$(gpu_idle notebook-z)"
}
WAIT_EVERY=0.3 wait_for 20 reserved || fail "no GPU idle energy reserved by notebook-z: $(grep -E 'energy_component_joules_total|container_energy_joules_total|memory_total|mig_enabled|energy_intervals' "$WORK/m3.txt")"
node_idle=$(awk '/^mlwatch_energy_component_joules_total\{/ && /component="gpu"/ && /kind="idle"/ { s += $2 } END { printf "%.12g", s }' "$WORK/m3.txt")
python3 - "$(gpu_idle notebook-z)" "$(gpu_idle train-1)" "$node_idle" <<'PY' || fail "MIG reservations: notebook-z $(gpu_idle notebook-z) J, train-1 $(gpu_idle train-1) J, GPU idle $node_idle J"
import sys
z, t, node = map(float, sys.argv[1:])
assert node > 0 and abs(z / node - 0.11875) < 1e-9, (z, node, z / node)
assert abs(t / node - 0.11875) < 1e-9, (t, node, t / node)
PY
expect_eq "notebook-z's GPU dynamic energy (no process on its slice)" 0 \
    "$(awk 'index($0, "mlwatch_container_energy_joules_total{") == 1 && /pod="notebook-z"/ && /component="gpu"/ && /kind="dynamic"/ { s += $2 } END { print s + 0 }' "$WORK/m3.txt")"
done_ok
