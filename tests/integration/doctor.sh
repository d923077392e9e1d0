#!/usr/bin/env bash
# doctor.sh - `mlwatch doctor` on the gpu-node fixture with the fake NVML:
# sampling in-process when no agent answers (a healthy node: exit 0, nothing
# found; a GPU time-shared by three pods: gpu_shared for each, exit 1), the
# filters (--pod, --namespace, --pid), plain text and --json, and the agent's
# history through /api/v1/findings, with mlwatch_finding in /metrics.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
root=$MLWATCH_FIXTURES/gpu-node
scenarios=$MLWATCH_SRC/tests/fakenvml/scenarios
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
nobody=127.0.0.1:$(free_port) # no agent there: the doctor samples itself
common=(--root "$root" --collectors cgroup,gpu --nvml-library "$fake" --rocm-library none)

# doctor ARGS...: runs it, sets RC, output in $WORK/out.txt and $WORK/err.txt
doctor() {
    RC=0
    "$MLWATCH_BIN" doctor "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || RC=$?
}

# A healthy node: eight H100s, one pod each, nothing wrong.
cp "$scenarios/h100x8.txt" "$FAKE_NVML_SCENARIO"
doctor --listen "$nobody" "${common[@]}" --window 1s --interval 250ms
expect_eq "healthy: exit status" 0 "$RC"
expect_eq "healthy: report" \
    "mlwatch doctor: nothing found over the last 1 s (sampled in-process every 250 ms)." \
    "$(cat "$WORK/out.txt")"
grep -q "no agent answers on $nobody: sampling for 1s" "$WORK/err.txt" || fail "no sampling note"
ok
doctor --listen "$nobody" "${common[@]}" --window 1s --interval 500ms --json
expect_eq "healthy --json: exit status" 0 "$RC"
expect_eq "healthy --json: findings" 0 "$(jq '.findings | length' "$WORK/out.txt")"
expect_eq "healthy --json: source" sampled "$(jq -r .source "$WORK/out.txt")"

# One A10 time-shared by three pods (and a process outside Kubernetes).
cp "$scenarios/timeshare.txt" "$FAKE_NVML_SCENARIO"
doctor --listen "$nobody" "${common[@]}" --window 1s --interval 500ms
expect_eq "shared: exit status" 1 "$RC"
head -1 "$WORK/out.txt" | grep -qx \
    'mlwatch doctor: 3 findings over the last 1 s (sampled in-process every 500 ms), worst first.' ||
    fail "shared: headline: $(head -1 "$WORK/out.txt")"
ok
for p in a b c; do
    grep -qx "[0-9]. WARNING gpu_shared: pod shared/notebook-$p, container main, GPU 0" \
        "$WORK/out.txt" || fail "shared: no finding for notebook-$p: $(cat "$WORK/out.txt")"
    ok
done
grep -q '   what to do: Another workload uses the same GPU' "$WORK/out.txt" || fail "no advice"
ok
grep -q '   evidence: workloads_on_gpu=3 gpu_memory_used_bytes=4294967296 ' "$WORK/out.txt" ||
    fail "no evidence for notebook-a"
ok

doctor --listen "$nobody" "${common[@]}" --window 1s --interval 500ms --json --pod notebook-b
expect_eq "--pod: exit status" 1 "$RC"
expect_eq "--pod: findings" "gpu_shared shared notebook-b main 0 warning" \
    "$(jq -r '.findings[] | "\(.kind) \(.namespace) \(.pod) \(.container) \(.gpu) \(.severity)"' \
        "$WORK/out.txt")"
expect_eq "--pod: evidence" 3 "$(jq '.findings[0].evidence.workloads_on_gpu' "$WORK/out.txt")"
# PID 4004 is the second process of notebook-c.
doctor --listen "$nobody" "${common[@]}" --window 1s --interval 500ms --json --pid 4004
expect_eq "--pid: exit status" 1 "$RC"
expect_eq "--pid: findings" "notebook-c" "$(jq -r '.findings[].pod' "$WORK/out.txt")"
doctor --listen "$nobody" "${common[@]}" --window 1s --interval 500ms --namespace ml-team
expect_eq "--namespace without findings: exit status" 0 "$RC"

# Errors: a usage error exits 2, a process in no container 3.
doctor --listen "$nobody" "${common[@]}" --pid abc
expect_eq "--pid abc: exit status" 2 "$RC"
expect_eq "--pid abc: message" \
    "mlwatch doctor: --pid: must be a process ID from 1 to 4194304, got 'abc'" "$(cat "$WORK/err.txt")"
doctor --listen "$nobody" "${common[@]}" --pid 99999
expect_eq "--pid 99999: exit status" 3 "$RC"
grep -q -- "--pid 99999: no such process in any container or cgroup mlwatch knows" "$WORK/err.txt" ||
    fail "--pid 99999: $(cat "$WORK/err.txt")"
ok

# The agent: its history answers, no sampling.
start_agent "${common[@]}" --interval 200ms --gpu-process-interval 200ms
findings() { curl -sf "$AGENT_URL/api/v1/findings" | jq '.findings | length' 2>/dev/null || echo 0; }
findings_are() { [ "$(findings)" = "$1" ]; }
WAIT_EVERY=0.2 wait_for 10 findings_are 3 || true
expect_eq "agent: findings" 3 "$(findings)"
expect_eq "agent: ?pod=notebook-a" "notebook-a" \
    "$(curl -sf "$AGENT_URL/api/v1/findings?pod=notebook-a" | jq -r '.findings[].pod')"
expect_eq "agent: ?namespace=ml-team" 0 \
    "$(curl -sf "$AGENT_URL/api/v1/findings?namespace=ml-team" | jq '.findings | length')"
expect_eq "agent: ?window=bad" 400 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/api/v1/findings?window=bad")"
curl -sf "$AGENT_URL/metrics" >"$WORK/metrics.txt"
grep -qx 'mlwatch_finding{kind="gpu_shared",severity="warning",namespace="shared",pod="notebook-c",container="main",gpu="0",node="t1"} 1' \
    "$WORK/metrics.txt" || fail "no mlwatch_finding for notebook-c"
ok
expect_eq "agent: mlwatch_finding samples" 3 "$(grep -c '^mlwatch_finding{' "$WORK/metrics.txt")"
promtool check metrics <"$WORK/metrics.txt" || fail "promtool check metrics"
ok

agent_listen=${AGENT_URL#http://}
doctor --listen "$agent_listen" --json --pod notebook-c
expect_eq "doctor via agent: exit status" 1 "$RC"
expect_eq "doctor via agent: source" agent "$(jq -r .source "$WORK/out.txt")"
expect_eq "doctor via agent: findings" "gpu_shared notebook-c" \
    "$(jq -r '.findings[] | "\(.kind) \(.pod)"' "$WORK/out.txt")"
[ ! -s "$WORK/err.txt" ] || fail "doctor via agent sampled: $(cat "$WORK/err.txt")"
ok
doctor --listen "$agent_listen" --window 2s
expect_eq "doctor via agent, text: exit status" 1 "$RC"
head -1 "$WORK/out.txt" | grep -q "^mlwatch doctor: 3 findings over the last 2 s (the agent's history, http://$agent_listen/api/v1/findings?window=2000ms), worst first.$" ||
    fail "doctor via agent: headline: $(head -1 "$WORK/out.txt")"
ok

# The agent says which root it watches; a doctor with a --root of its own
# samples that root when the agent on --listen watches another, and fails
# when the agent it was told to ask (--url) does.
expect_eq "agent: root" "$root" "$(curl -sf "$AGENT_URL/api/v1/findings" | jq -r .root)"
bare=$MLWATCH_FIXTURES/bare-vm
doctor --listen "$agent_listen" --root "$bare" --collectors cgroup --window 1s --interval 500ms --json
expect_eq "--root of its own: exit status" 0 "$RC"
expect_eq "--root of its own: source" sampled "$(jq -r .source "$WORK/out.txt")"
expect_eq "--root of its own: findings" 0 "$(jq '.findings | length' "$WORK/out.txt")"
grep -qF "the agent on $agent_listen watches the root '$root', not '$bare': sampling for 1s" \
    "$WORK/err.txt" || fail "--root of its own: note: $(cat "$WORK/err.txt")"
ok
doctor --listen "$agent_listen" --root "$root" --json
expect_eq "--root the agent's: source" agent "$(jq -r .source "$WORK/out.txt")"
expect_eq "--root the agent's: findings" 3 "$(jq '.findings | length' "$WORK/out.txt")"
doctor --listen "$nobody" --url "$AGENT_URL" --root "$root" --json
expect_eq "--url, same root: exit status" 1 "$RC"
expect_eq "--url, same root: source" agent "$(jq -r .source "$WORK/out.txt")"
expect_eq "--url, same root: findings" 3 "$(jq '.findings | length' "$WORK/out.txt")"
doctor --url "$AGENT_URL/" --root "$bare"
expect_eq "--url, another root: exit status" 3 "$RC"
expect_eq "--url, another root: message" \
    "mlwatch doctor: the agent at $AGENT_URL/api/v1/findings watches the root '$root', not '$bare' (--root); leave out --url to sample $bare" \
    "$(cat "$WORK/err.txt")"
expect_eq "--url, another root: stdout" "" "$(cat "$WORK/out.txt")"
doctor --url "http://$nobody" --root "$root"
expect_eq "--url, no agent: exit status" 3 "$RC"
expect_eq "--url, no agent: message" \
    "mlwatch doctor: no agent answers at http://$nobody/api/v1/findings (--url)" "$(cat "$WORK/err.txt")"

done_ok
