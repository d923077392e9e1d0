#!/usr/bin/env bash
# gpu_node_condition.sh - the GPU collector's verdict on the Node (issue 30,
# docs/gpu.md "The GPUHealthy Node condition"): the agent with
# --kubernetes --kubernetes-node-condition against the fake API server
# (tests/fakeapi/fake_apiserver.py, kube_lib.sh's seven A100s) sends
#   1. at its first verdict (seconds after the start, not the 30 s wait for
#      a judge nor the heartbeat): True / GPUsHealthy;
#   2. GPU 3 lost: False / GPULost, a new lastTransitionTime;
#   3. a critical XID 79 (NVML event) on GPU 5 too: False / GPULost (GPU 3
#      first), 2 unhealthy, the transition time of 2 kept;
#   4. GPU 3 back: False / XID79 (GPU 5), the transition time kept;
#   5. the driver hangs: Unknown / NoReading after the stale limit;
# each PATCH exact (path, content type, body but its times), and no other
# PATCH (heartbeat 1h).
source "$(dirname "$0")/lib.sh"

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-sa-token.c2lnbmF0dXJl
source "$(dirname "$0")/kube_lib.sh"
healthy=$(cat "$WORK/scenario.txt")
scenario() { # LINES...: kube_lib's seven healthy GPUs, then LINES
    printf '%s\n' "$healthy" "$@" >"$WORK/scenario.tmp"
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}
start_api api
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster: {server: "http://127.0.0.1:$API_PORT"}
contexts:
- name: test
  context: {cluster: fake, user: sa}
users:
- name: sa
  user: {token: $TOKEN}
EOF

t0=$(date +%s.%N)
# --gpu-kernel-log none: the fixture's kernel log has no XID; NVML's
# events feed health instead.
start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu --nvml-library "$fake" \
    --rocm-library none --gpu-kernel-log none --interval 200ms --gpu-process-interval 200ms \
    --node-name gpu-node-1 --kubernetes --kubeconfig "$WORK/kubeconfig" \
    --kubernetes-node-condition --kubernetes-node-condition-heartbeat 1h

patches() { grep -c '"kind": "patch"' "$WORK/api.jsonl" || true; }
has_patches() { [ "$(patches)" -ge "$1" ]; }
# check N STATUS REASON MESSAGE: the Nth PATCH (1-based) exactly.
check() {
    python3 - "$WORK/api.jsonl" "$@" <<'PY' || fail "PATCH $1 is not as expected"
import json, re, sys
log, n, status, reason, message = sys.argv[1:]
p = [json.loads(l) for l in open(log) if '"kind": "patch"' in l][int(n) - 1]
assert p["path"] == "/api/v1/nodes/gpu-node-1/status", p["path"]
assert p["content_type"] == "application/strategic-merge-patch+json", p["content_type"]
body = re.sub(r'"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"T"', p["body"])
want = json.dumps({"status": {"conditions": [{
    "type": "GPUHealthy", "status": status, "reason": reason, "message": message,
    "lastHeartbeatTime": "T", "lastTransitionTime": "T"}]}}, separators=(",", ":"))
assert body == want, body
PY
    ok
}
cond() { # N FIELD: a field of the Nth PATCH's condition
    python3 -c '
import json, sys
p = [json.loads(l) for l in open(sys.argv[1]) if "\"kind\": \"patch\"" in l][int(sys.argv[2]) - 1]
print(json.loads(p["body"])["status"]["conditions"][0][sys.argv[3]])' "$WORK/api.jsonl" "$1" "$2"
}
sent_after() { # N: seconds from the agent's start to the Nth PATCH
    python3 -c '
import json, sys
p = [json.loads(l) for l in open(sys.argv[1]) if "\"kind\": \"patch\"" in l][int(sys.argv[2]) - 1]
print(int(p["t"] - float(sys.argv[3])))' "$WORK/api.jsonl" "$1" "$t0"
}

# 1. Healthy, at the first verdict: no Unknown first.
wait_for 20 has_patches 1 || fail "no PATCH: $(tail -5 "$WORK/agent.log")"
check 1 True GPUsHealthy "7 GPUs: 7 healthy, 0 degraded, 0 unhealthy, 0 unknown"
awk -v s="$(sent_after 1)" 'BEGIN { exit !(s < 15) }' ||
    fail "the first PATCH came $(sent_after 1) s after the start (the 30 s wait for a judge?)"
ok
tr1=$(cond 1 lastTransitionTime)

# 2. GPU 3 lost.
scenario 'gpu 3 lost=1'
wait_for 10 has_patches 2 || fail "no PATCH for the lost GPU: $(grep patch "$WORK/api.jsonl")"
check 2 False GPULost \
    "GPU 3: gpu_lost, recommended action: reboot_node (7 GPUs: 6 healthy, 0 degraded, 1 unhealthy, 0 unknown)"
tr2=$(cond 2 lastTransitionTime)
# Whole seconds: the change is at least 1 s after the first PATCH only on
# most runs, so compare as times, not strings.
[ "$tr2" \> "$tr1" ] || [ "$tr2" = "$tr1" ] || fail "transition time went back: $tr1 -> $tr2"
ok

# 3. A critical XID on GPU 5 while GPU 3 is still lost: the reason stays
# the first GPU's (same state and action), the message counts 2 unhealthy,
# the status and its transition time stay.
scenario 'gpu 3 lost=1' 'event gpu=5 xid=79 id=1'
wait_for 10 has_patches 3 || fail "no PATCH for XID 79: $(grep patch "$WORK/api.jsonl")"
check 3 False GPULost \
    "GPU 3: gpu_lost, recommended action: reboot_node (7 GPUs: 5 healthy, 0 degraded, 2 unhealthy, 0 unknown)"
expect_eq "transition time kept (False -> False)" "$tr2" "$(cond 3 lastTransitionTime)"

# 4. GPU 3 back: XID 79 holds GPU 5 (until it is seen reset).
scenario 'event gpu=5 xid=79 id=1'
wait_for 10 has_patches 4 || fail "no PATCH for GPU 3 back: $(grep patch "$WORK/api.jsonl")"
check 4 False XID79 \
    "GPU 5: xid_79, recommended action: reboot_node (7 GPUs: 6 healthy, 0 degraded, 1 unhealthy, 0 unknown)"
expect_eq "transition time kept" "$tr2" "$(cond 4 lastTransitionTime)"
sleep 1
expect_eq "PATCHes (heartbeat 1h: changes only)" 4 "$(patches)"

# 5. The driver stops answering (a process listing hangs): after the stale
# limit (10 s) no verdict is known: Unknown / NoReading, a new transition.
scenario 'event gpu=5 xid=79 id=1' 'gpu 0 procs_delay_ms=60000'
wait_for 25 has_patches 5 || fail "no PATCH for a hung driver: $(grep patch "$WORK/api.jsonl")"
check 5 Unknown NoReading "no GPU poll has completed recently (a driver call hangs?)"
expect_eq "PATCHes" 5 "$(patches)"
expect_eq "warnings" "" "$(grep -E ' warn ' "$WORK/agent.log" | grep node-condition || true)"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exit status"
done_ok
