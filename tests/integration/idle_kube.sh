#!/usr/bin/env bash
# idle_kube.sh - workload identity from the Kubernetes API: the agent with
# --kubernetes and a kubeconfig (bearer token) against the fake API server
# (tests/fakeapi/fake_apiserver.py, recorded pod JSON), the fake NVML library
# with seven pods each holding an idle GPU, and a webhook receiver.
#   - workload_kind/workload for a Kubeflow Notebook, a PyTorchJob, a
#     TrainJob, a Job, a StatefulSet, a Deployment and a bare pod;
#   - the owner from an annotation (--owner-from), in the message;
#   - the watch: a MODIFIED event applies; a dropped watch resumes from the
#     last resourceVersion; an ERROR 410 (Gone) lists again;
#   - the token is not in the log.
source "$(dirname "$0")/lib.sh"

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-sa-token.c2lnbmF0dXJl
source "$(dirname "$0")/kube_lib.sh"
python3 "$MLWATCH_SRC/tests/fakeapi/fake_apiserver.py" --fixtures "$MLWATCH_FIXTURES/kube" \
    --token "$TOKEN" --node gpu-node-1 --log "$WORK/api.jsonl" --port-file "$WORK/api.port" &
PIDS+=($!)
python3 "$MLWATCH_SRC/tests/receivers/webhook_receiver.py" --port-file "$WORK/rx.port" \
    --out "$WORK/got.jsonl" &
PIDS+=($!)
wait_port_file "$WORK/api.port" "fake API server"
wait_port_file "$WORK/rx.port" "webhook receiver"
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: other
  cluster: {server: "http://127.0.0.1:1"}
- name: fake
  cluster:
    server: http://127.0.0.1:$(cat "$WORK/api.port")/
contexts:
- name: test
  context: {cluster: fake, user: sa, namespace: default}
users:
- name: sa
  user:
    token: $TOKEN
EOF

start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu --nvml-library "$fake" \
    --rocm-library none --interval 200ms --gpu-process-interval 200ms --idle-window 1s \
    --idle-busy-period 1s --kubernetes --kubeconfig "$WORK/kubeconfig" --node-name gpu-node-1 \
    --owner-from annotation:notebooks.kubeflow.org/creator --state-dir "$WORK/state" \
    --notify-webhook "http://127.0.0.1:$(cat "$WORK/rx.port")/hooks/x"

# After the watch's MODIFIED event notebook-c is a Notebook; the relist
# after the 410 keeps it (the recorded list after it says so too).
await_wl notebook-a "Notebook alice-nb"
await_wl train-0 "PyTorchJob bert-large"
await_wl train-1 "TrainJob llama-ft"
await_wl train-2 "Job eval-nightly-28470120"
await_wl train-3 "StatefulSet ray-worker"
await_wl notebook-b "Deployment debug-shell"

# The watch sequence the fake server saw.
third_watch() { [ "$(jq -c 'select(.kind == "watch" and .n == 3)' "$WORK/api.jsonl" | wc -l)" = 1 ]; }
wait_for 10 third_watch || fail "no third watch: $(cat "$WORK/api.jsonl")"
expect_eq "requests" \
    '{"kind":"list","n":1} {"kind":"watch","n":1,"rv":"2000","bookmarks":true} {"kind":"watch","n":2,"rv":"2001","bookmarks":true} {"kind":"list","n":2} {"kind":"watch","n":3,"rv":"2600","bookmarks":true}' \
    "$(jq -c 'select(.kind == "list" or .kind == "watch")' "$WORK/api.jsonl" | head -5 | tr '\n' ' ' | sed 's/ $//')"
await_wl notebook-c "Pod notebook-c" # the relisted pod list has it as a bare pod

# The owner label of the idle samples: the annotation where the pod has it,
# else the namespace.
owner_of() {
    curl -sf "$AGENT_URL/metrics" |
        sed -n 's/^mlwatch_gpu_idle_seconds{namespace="[^"]*",pod="'"$1"'",.*,owner="\([^"]*\)",node="[^"]*"} .*/\1/p'
}
[ "$(owner_of notebook-a)" = "alice@example.org" ] && ok || fail "owner label of notebook-a: $(owner_of notebook-a)"
[ "$(owner_of train-0)" = "ml-team" ] && ok || fail "owner label of train-0: $(owner_of train-0)"

# The owner in the notification of the notebook: from the annotation.
wait_for 8 grep -qs 'pod shared/notebook-a' "$WORK/got.jsonl" ||
    fail "no message for notebook-a: $(cat "$WORK/got.jsonl" "$WORK/agent.log")"
t=$(jq -r 'select(.body.text | contains("pod shared/notebook-a")) | .body.text' "$WORK/got.jsonl")
grep -qF "Owner: alice@example.org" <<<"$t" || fail "owner: $t"
ok
grep -qF "Workload: Notebook alice-nb" <<<"$t" || fail "workload: $t"
ok
t=$(jq -r 'select(.body.text | contains("pod ml-team/train-0")) | .body.text' "$WORK/got.jsonl")
grep -qF "Owner: ml-team" <<<"$t" || fail "owner without the annotation: $t"
ok
if grep -q "fake-sa-token" "$WORK/agent.log"; then fail "the token is in the log"; fi
ok
done_ok
