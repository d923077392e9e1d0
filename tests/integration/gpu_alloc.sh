#!/usr/bin/env bash
# gpu_alloc.sh - GPUs allocated beyond the device plugin, and fractions of
# GPUs: the agent with --kubernetes against the fake API server (pods with
# KAI annotations, ResourceSlices, ResourceClaims: tests/fixtures/kube-dra),
# the fake kubelet pod-resources server (device-plugin replicas, DRA dynamic
# resources, GetAllocatableResources) and the fake NVML library:
#   GPU 0  KAI gpu-fraction 0.5 each: shared/notebook-a (SM samples 49) and
#          notebook-b (1) on a GPU at 50 %: requested 0.5/0.5, measured
#          0.49/0.01, notebook-b idle, notebook-a not
#   GPU 1  time-slicing, 4 replicas: train-0 holds ::0 and runs (80 %),
#          train-1 holds ::1,::2 with no process: requested 0.25 / 0.5;
#          train-1 is idle although the GPU is busy (its fraction is idle)
#   GPU 2  DRA through the kubelet (gpu.nvidia.com/gpu-node-1/gpu-2),
#          resolved by the slice's uuid: train-2 container main, idle, 1
#   GPU 3  DRA known only from a ResourceClaim (reservedFor train-3): its
#          container from the pod spec (resources.claims of the generated
#          claim, status.resourceClaimStatuses), main, idle, 1
#   GPU 4  KAI gpu-memory 20480 MiB of 80 GiB: notebook-c requested 0.25,
#          measured 0.3 (busy)
#   GPU 5  KAI pods with no process yet, placed by their runai-gpu-group's
#          reservation pod (run.ai/reserve_for_gpu_index): notebook-d
#          gpu-fraction 0.25 (container main), notebook-e gpu-memory 8192
#          MiB = 0.1 (container lab): requested, no measured share, both
#          idle although the GPU is at 60 %; notebook-f's reservation pod
#          has not said its GPU: nothing; the reservation pod holding
#          GPU 5 through the device plugin is neither a session nor a row,
#          not even while the pod list is late (--list-delay: pod-resources
#          names the reservation pod before the watcher knows it)
# and the GPUHealthy Node condition (--kubernetes-node-condition): the
# exact PATCH (path, content type, body: the six healthy GPUs' verdict),
# sent again only at the heartbeat (tests/integration/gpu_node_condition.sh
# has unhealthy GPUs).
source "$(dirname "$0")/lib.sh"

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-sa-token.c2lnbmF0dXJl
: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
/usr/bin/python3 -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
u() { printf 'GPU-%08d-0000-4000-8000-000000000000' "$1"; }
{
    echo "system driver=550.54.15"
    for i in 0 1 2 3 4 5; do
        printf 'gpu %d name="NVIDIA H100 80GB HBM3" uuid=%s bus=00000000:%02x:00.0\n' "$i" "$(u $i)" $((0x18 + 0x10 * i))
    done
    echo "gpu 0 util=50 memtotal=85899345920 memused=4294967296 power_mw=300000"
    echo "proc gpu=0 pid=4001 mem=3221225472 sm=49"
    echo "proc gpu=0 pid=4002 mem=1073741824 sm=1"
    echo "gpu 1 util=80 memtotal=85899345920 memused=2147483648 power_mw=500000"
    echo "proc gpu=1 pid=3000 mem=2147483648 sm=80"
    echo "gpu 2 util=0 memtotal=85899345920 memused=0 power_mw=70000"
    echo "gpu 3 util=0 memtotal=85899345920 memused=0 power_mw=70000"
    echo "gpu 4 util=30 memtotal=85899345920 memused=2147483648 power_mw=200000"
    echo "proc gpu=4 pid=4003 mem=2147483648 sm=30"
    echo "gpu 5 util=60 memtotal=85899345920 memused=0 power_mw=90000"
} >"$WORK/scenario.txt"

root=$WORK/root
cp -a "$MLWATCH_FIXTURES/gpu-node" "$root"
sock=$root/var/lib/kubelet/pod-resources/kubelet.sock
mkdir -p "$(dirname "$sock")"
/usr/bin/python3 "$MLWATCH_SRC/tests/fakeapi/fake_podresources.py" --socket "$sock" \
    --alloc "ml-team/train-0/main=nvidia.com/gpu:$(u 1)::0" \
    --alloc "ml-team/train-1/main=nvidia.com/gpu:$(u 1)::1,$(u 1)::2" \
    --alloc "kai-resource-reservation/gpu-reservation-gpu-node-1-q7x2m/resource-reservation=nvidia.com/gpu:$(u 5)" \
    --dra "ml-team/train-2/main=ml-team/train-2-gpu-x7k2p:gpu.nvidia.com/gpu-node-1/gpu-2" \
    --allocatable "nvidia.com/gpu:$(u 1)::0,$(u 1)::1,$(u 1)::2,$(u 1)::3,$(u 0)" &
PIDS+=($!)
python3 "$MLWATCH_SRC/tests/fakeapi/fake_apiserver.py" --static --list-delay 1.5 \
    --fixtures "$MLWATCH_FIXTURES/kube-dra" --token "$TOKEN" --node gpu-node-1 \
    --log "$WORK/api.jsonl" --port-file "$WORK/api.port" &
PIDS+=($!)
wait_for 10 test -S "$sock" || fail "fake pod-resources server did not start"
wait_for 10 test -s "$WORK/api.port" || fail "fake API server did not start"
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster: {server: "http://127.0.0.1:$(cat "$WORK/api.port")"}
contexts:
- name: test
  context: {cluster: fake, user: sa}
users:
- name: sa
  user: {token: $TOKEN}
EOF

start_agent --root "$root" --collectors cgroup,gpu --nvml-library "$fake" --rocm-library none \
    --interval 200ms --gpu-process-interval 200ms --idle-window 1s --idle-busy-period 1s \
    --node-name gpu-node-1 --kubernetes --kubeconfig "$WORK/kubeconfig" \
    --kubernetes-node-condition --kubernetes-node-condition-heartbeat 2s \
    --state-dir "$WORK/state"

N='node="gpu-node-1"'
req() { # NS POD CTR GPU SOURCE: the fraction requested, from $WORK/m.txt
    awk -v k="mlwatch_container_gpu_fraction_requested{namespace=\"$1\",pod=\"$2\",container=\"$3\",gpu=\"$4\",source=\"$5\",$N}" \
        '$1 == k { print $2 }' "$WORK/m.txt"
}
idle_s() { # NS POD CTR GPU: idle seconds of the session
    sed -n 's/^mlwatch_gpu_idle_seconds{namespace="'"$1"'",pod="'"$2"'",container="'"$3"'",gpu="'"$4"'",[^}]*} //p' "$WORK/m.txt"
}
all_there() {
    curl -sf "$AGENT_URL/metrics" >"$WORK/m.txt" || return 1
    [ "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="ml-team"/ { print $2 }' "$WORK/m.txt")" = 3 ] &&
        [ "$(awk '/^mlwatch_idle_gpu_sessions\{namespace="shared"/ { print $2 }' "$WORK/m.txt")" = 3 ] &&
        [ -n "$(req shared notebook-c main 4 kai-memory)" ]
}
WAIT_EVERY=0.2 wait_for 20 all_there ||
    fail "sessions never settled: $(grep -E 'idle_gpu_sessions|fraction_requested' "$WORK/m.txt")"

# Requested next to measured: KAI fractions on one GPU.
expect_eq "notebook-a requested" 0.5 "$(req shared notebook-a main 0 kai)"
expect_eq "notebook-b requested" 0.5 "$(req shared notebook-b main 0 kai)"
share() { awk -v k="mlwatch_container_gpu_utilization_ratio{namespace=\"$1\",pod=\"$2\",container=\"main\",gpu=\"$3\",$N}" '$1 == k { print $2 }' "$WORK/m.txt"; }
expect_eq "notebook-a measured" 0.49 "$(share shared notebook-a 0)"
expect_eq "notebook-b measured" 0.01 "$(share shared notebook-b 0)"
expect_eq "notebook-a not idle" 0 "$(idle_s shared notebook-a main 0)"
awk -v v="$(idle_s shared notebook-b main 0)" 'BEGIN { exit !(v > 0) }' ||
    fail "notebook-b (0.01 of its 0.5) is not idle: '$(idle_s shared notebook-b main 0)'"
ok
expect_eq "notebook-c requested by memory" 0.25 "$(req shared notebook-c main 4 kai-memory)"
expect_eq "notebook-c measured" 0.3 "$(share shared notebook-c 4)"
expect_eq "notebook-c not idle" 0 "$(idle_s shared notebook-c main 4)"

# KAI pods without a process, on their reservation pod's GPU.
expect_eq "notebook-d requested (no process)" 0.25 "$(req shared notebook-d main 5 kai)"
expect_eq "notebook-e requested by memory (no process)" 0.1 "$(req shared notebook-e lab 5 kai-memory)"
expect_eq "notebook-d measured (none)" "" "$(share shared notebook-d 5)"
for s in "notebook-d main" "notebook-e lab"; do
    set -- $s
    awk -v v="$(idle_s shared "$1" "$2" 5)" 'BEGIN { exit !(v > 0) }' ||
        fail "$1's fraction without a process is not idle on a busy GPU: '$(idle_s shared "$1" "$2" 5)'"
    ok
done
expect_eq "notebook-f (reservation without a GPU yet)" 0 "$(grep -c 'pod="notebook-f"' "$WORK/m.txt" || true)"
# The reservation pod holds GPU 5 through the device plugin for its group:
# neither a session nor an allocation of its own.
expect_eq "reservation pods (not sessions, no fraction)" 0 "$(grep -c 'namespace="kai-resource-reservation"' "$WORK/m.txt" || true)"

# Time-slicing replicas: 1 and 2 of 4.
expect_eq "train-0 requested" 0.25 "$(req ml-team train-0 main 1 time-slicing)"
expect_eq "train-1 requested" 0.5 "$(req ml-team train-1 main 1 time-slicing)"
expect_eq "train-0 measured" 0.8 "$(share ml-team train-0 1)"
expect_eq "train-0 not idle" 0 "$(idle_s ml-team train-0 main 1)"
awk -v v="$(idle_s ml-team train-1 main 1)" 'BEGIN { exit !(v > 0) }' ||
    fail "train-1's idle replicas are not an idle session: '$(idle_s ml-team train-1 main 1)'"
ok

# DRA: through the kubelet (container main) and from a claim only (no container).
expect_eq "train-2 requested (DRA)" 1 "$(req ml-team train-2 main 2 dra)"
expect_eq "train-3 requested (claim, its container from the pod spec)" 1 "$(req ml-team train-3 main 3 dra)"
expect_eq "train-3 without a container" "" "$(req ml-team train-3 "" 3 dra)"
for s in "train-2 main 2" "train-3 main 3"; do
    eval "set -- $s"
    awk -v v="$(idle_s ml-team "$1" "$2" "$3")" 'BEGIN { exit !(v > 0) }' ||
        fail "DRA GPU $3 of $1 is not an idle session: '$(idle_s ml-team "$1" "$2" "$3")'"
    ok
done
expect_eq "fraction series (no MIG, no others)" 9 "$(grep -c '^mlwatch_container_gpu_fraction_requested{' "$WORK/m.txt")"
expect_eq "train-1 requested one series" 1 "$(grep -c '^mlwatch_container_gpu_fraction_requested{namespace="ml-team",pod="train-1"' "$WORK/m.txt")"

# The Node condition: the first PATCH exactly, then heartbeats only.
patches() { grep -c '"kind": "patch"' "$WORK/api.jsonl" || true; }
two_patches() { [ "$(patches)" -ge 2 ]; }
wait_for 10 two_patches || fail "no heartbeat PATCH: $(grep patch "$WORK/api.jsonl")"
python3 - "$WORK/api.jsonl" <<'PY' || fail "PATCH requests are not as expected"
import json, re, sys
p = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "patch"' in l]
first = p[0]
assert first["path"] == "/api/v1/nodes/gpu-node-1/status", first["path"]
assert first["content_type"] == "application/strategic-merge-patch+json", first["content_type"]
body = re.sub(r'"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"T"', first["body"])
want = ('{"status":{"conditions":[{"type":"GPUHealthy","status":"True",'
        '"reason":"GPUsHealthy","message":"6 GPUs: 6 healthy, 0 degraded, 0 unhealthy, 0 unknown",'
        '"lastHeartbeatTime":"T","lastTransitionTime":"T"}]}}')
assert body == want, body
# Heartbeats: the same condition, its transition time kept, at least 1.5 s apart
# (--kubernetes-node-condition-heartbeat 2s; nothing changed in between).
tr = json.loads(first["body"])["status"]["conditions"][0]["lastTransitionTime"]
for a, b in zip(p, p[1:]):
    assert b["t"] - a["t"] >= 1.5, (a["t"], b["t"])
    assert json.loads(b["body"])["status"]["conditions"][0]["lastTransitionTime"] == tr
PY
ok
expect_eq "requests to other nodes or paths" 0 "$(grep -c 'bad-selector\|unauthorized' "$WORK/api.jsonl" || true)"
expect_eq "resourceslices listed" 1 "$([ "$(grep -c '"kind": "resourceslices"' "$WORK/api.jsonl")" -ge 1 ] && echo 1)"
expect_eq "warnings" "" "$(grep -E ' warn ' "$WORK/agent.log" | grep -E 'dra|podresources|node-condition' || true)"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exit status"
done_ok
