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

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-tls-token.c2lnbmF0dXJl
source "$(dirname "$0")/kube_lib.sh"

make_ca ca
make_ca wrong-ca
issue srv ca 127.0.0.1 serverAuth 'subjectAltName=IP:127.0.0.1
'

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

no_token() { # LOG
    if grep -q "fake-tls-token" "$WORK/$1"; then fail "the token is in $1"; fi
    ok
}

# 1. certificate-authority: a file next to the kubeconfig.
start_api file --cert "$WORK/srv.crt" --key "$WORK/srv.key"
kubeconfig file "certificate-authority: $WORK/ca.crt"
run_agent file
await_wl train-0 "PyTorchJob bert-large"
await_wl train-3 "StatefulSet ray-worker"
expect_eq "first request over TLS (file)" '{"kind":"list","n":1}' "$(head -1 "$WORK/file.jsonl" | jq -c .)"
stop_agent file
no_token file.log

# 2. certificate-authority-data: the CA inline, base64.
start_api data --cert "$WORK/srv.crt" --key "$WORK/srv.key"
kubeconfig data "certificate-authority-data: $(base64 -w0 "$WORK/ca.crt")"
run_agent data
await_wl train-0 "PyTorchJob bert-large"
await_wl train-3 "StatefulSet ray-worker"
expect_eq "first request over TLS (data)" '{"kind":"list","n":1}' "$(head -1 "$WORK/data.jsonl" | jq -c .)"
stop_agent data
no_token data.log

# 3. A CA that did not sign the server's certificate: every handshake fails
# (the list is retried with backoff 1 s, 2 s...), one warning says so.
start_api wrong --cert "$WORK/srv.crt" --key "$WORK/srv.key"
kubeconfig wrong "certificate-authority: $WORK/wrong-ca.crt"
run_agent wrong
wait_for 8 logged wrong tls-error 2 || fail "no two failed handshakes: $(cat "$WORK/wrong.jsonl" 2>&1)"
expect_eq "requests past a failed handshake" 0 "$(grep -vc tls-error "$WORK/wrong.jsonl" || true)"
await_idle_samples "without the pod list"
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
