#!/usr/bin/env bash
# idle_kube_tls.sh - the pod watcher over HTTPS, as against a real API
# server: a throwaway CA and a server certificate for 127.0.0.1 (openssl,
# EC P-256), the fake API server (tests/fakeapi/fake_apiserver.py) behind
# TLS, the fake NVML library with seven pods each holding an idle GPU.
#   - kubeconfig with certificate-authority (a file): the pod list is
#     learned (workload labels on mlwatch_gpu_idle_seconds), token not logged;
#   - the same with certificate-authority-data (base64 of the CA);
#   - a wrong CA: one certificate verification warning however many
#     retries, no secret in it; the agent keeps serving /metrics.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
command -v openssl >/dev/null || fail "openssl not installed"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt

# GPU i held by the pod with PID pids[i] (tests/fixtures/make-gpu-node.sh).
pids=(4001 3000 3001 3002 3003 4002 4003)
{
    echo "system driver=550.54.15"
    for i in "${!pids[@]}"; do
        printf 'gpu %d name="NVIDIA A100-SXM4-80GB" uuid=GPU-%08d-0000-4000-8000-000000000000 bus=00000000:%02x:00.0\n' "$i" "$i" $((0x18 + 0x10 * i))
        printf 'gpu %d util=0 memtotal=85899345920 memused=2147483648 power_mw=90000\n' "$i"
        printf 'proc gpu=%d pid=%d mem=1073741824\n' "$i" "${pids[$i]}"
    done
} >"$WORK/scenario.txt"

# make_ca NAME: a self-signed CA in $WORK/NAME.crt (key NAME.key).
make_ca() {
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$WORK/$1.key" -out "$WORK/$1.crt" -subj "/CN=mlwatch test $1" -days 2 \
        2>/dev/null || fail "openssl: cannot make CA $1"
}
make_ca ca
make_ca wrong-ca
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/srv.key" \
    -out "$WORK/srv.csr" -subj "/CN=127.0.0.1" 2>/dev/null || fail "openssl: server CSR"
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    >"$WORK/srv.ext"
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" \
    -CAcreateserial -out "$WORK/srv.crt" -days 2 -extfile "$WORK/srv.ext" 2>/dev/null ||
    fail "openssl: server certificate"

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-tls-token.c2lnbmF0dXJl

# start_api NAME: a fresh TLS fake API server (its scripted list/watch
# sequence starts over); sets API_PID, API_PORT; requests in $WORK/NAME.jsonl.
start_api() {
    python3 "$MLWATCH_SRC/tests/fakeapi/fake_apiserver.py" --fixtures "$MLWATCH_FIXTURES/kube" \
        --token "$TOKEN" --node gpu-node-1 --log "$WORK/$1.jsonl" --port-file "$WORK/$1.port" \
        --cert "$WORK/srv.crt" --key "$WORK/srv.key" &
    API_PID=$!
    PIDS+=("$API_PID")
    local deadline=$((SECONDS + 10))
    until [ -s "$WORK/$1.port" ]; do
        [ $SECONDS -lt $deadline ] || fail "$1: fake API server did not start"
        sleep 0.1
    done
    API_PORT=$(cat "$WORK/$1.port")
}

# kubeconfig NAME CA-LINE: $WORK/NAME.kubeconfig for https://127.0.0.1:API_PORT.
kubeconfig() {
    cat >"$WORK/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:$API_PORT
    $2
contexts:
- name: test
  context: {cluster: fake, user: sa}
users:
- name: sa
  user:
    token: $TOKEN
EOF
}

# run_agent NAME: the agent against the kubeconfig NAME; its log is
# $WORK/NAME.log once stop_agent ran.
run_agent() {
    start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu \
        --nvml-library "$fake" --rocm-library none --interval 200ms \
        --gpu-process-interval 200ms --idle-window 1s --idle-busy-period 1s --kubernetes \
        --kubeconfig "$WORK/$1.kubeconfig" --node-name gpu-node-1 --state-dir "$WORK/state-$1"
}
stop_agent() { # NAME
    kill "$AGENT_PID"
    wait "$AGENT_PID" 2>/dev/null || true
    mv "$WORK/agent.log" "$WORK/$1.log"
    kill "$API_PID"
    wait "$API_PID" 2>/dev/null || true
}

# wl POD: "kind workload" of the pod's idle-seconds sample
wl() {
    curl -sf "$AGENT_URL/metrics" |
        sed -n 's/^mlwatch_gpu_idle_seconds{namespace="[^"]*",pod="'"$1"'",container="main",gpu="[0-9]*",workload_kind="\([^"]*\)",workload="\([^"]*\)",owner="[^"]*"} .*/\1 \2/p'
}
await_wl() { # POD EXPECTED
    local deadline=$((SECONDS + 8)) v
    while [ $SECONDS -lt $deadline ]; do
        v=$(wl "$1")
        [ "$v" = "$2" ] && { ok; return 0; }
        sleep 0.1
    done
    fail "workload of $1: expected '$2', got '$v' (log: $(cat "$WORK/agent.log"))"
}
no_token() { # LOG
    if grep -q "fake-tls-token" "$WORK/$1"; then fail "the token is in $1"; fi
    ok
}

# 1. certificate-authority: a file next to the kubeconfig.
start_api file
kubeconfig file "certificate-authority: $WORK/ca.crt"
run_agent file
await_wl train-0 "PyTorchJob bert-large"
await_wl train-3 "StatefulSet ray-worker"
expect_eq "first request over TLS (file)" '{"kind":"list","n":1}' "$(head -1 "$WORK/file.jsonl" | jq -c .)"
stop_agent file
no_token file.log

# 2. certificate-authority-data: the CA inline, base64.
start_api data
kubeconfig data "certificate-authority-data: $(base64 -w0 "$WORK/ca.crt")"
run_agent data
await_wl train-0 "PyTorchJob bert-large"
await_wl train-3 "StatefulSet ray-worker"
expect_eq "first request over TLS (data)" '{"kind":"list","n":1}' "$(head -1 "$WORK/data.jsonl" | jq -c .)"
stop_agent data
no_token data.log

# 3. A CA that did not sign the server's certificate: every handshake fails
# (the list is retried with backoff 1 s, 2 s...), one warning says so.
start_api wrong
kubeconfig wrong "certificate-authority: $WORK/wrong-ca.crt"
run_agent wrong
deadline=$((SECONDS + 8))
until [ "$(grep -c tls-error "$WORK/wrong.jsonl" 2>/dev/null)" -ge 2 ]; do
    [ $SECONDS -lt $deadline ] || fail "no two failed handshakes: $(cat "$WORK/wrong.jsonl" 2>&1)"
    sleep 0.1
done
expect_eq "requests past a failed handshake" 0 "$(grep -vc tls-error "$WORK/wrong.jsonl" || true)"
curl -sf "$AGENT_URL/metrics" | grep -q '^mlwatch_gpu_idle_seconds{' ||
    fail "no idle samples without the pod list"
ok
# The sample is there with empty workload_kind and workload labels.
expect_eq "workload without the pod list" " " "$(wl train-0)"
stop_agent wrong
expect_eq "certificate warnings" 1 "$(grep -ci 'certificate' "$WORK/wrong.log")"
grep -i 'certificate' "$WORK/wrong.log" | grep -q 'kube' || fail "warning: $(cat "$WORK/wrong.log")"
ok
no_token wrong.log
if grep -qF -- "$(sed -n 2p "$WORK/wrong-ca.crt")" "$WORK/wrong.log"; then fail "the CA is in the log"; fi
ok
done_ok
