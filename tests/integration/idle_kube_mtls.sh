#!/usr/bin/env bash
# idle_kube_mtls.sh - the pod watcher authenticating with a client
# certificate (x509 client auth, as kubeadm's admin.conf and many node
# kubeconfigs do): the fake API server behind TLS requires a certificate
# signed by its client CA (tests/fakeapi/fake_apiserver.py --client-ca).
#   - client-certificate / client-key (files): the pods are learned without
#     any token, the server saw the certificate's CN;
#   - client-certificate-data / client-key-data (base64): the same;
#   - no credentials: 401, retried with backoff (1 s, then 2 s), one
#     warning that says which credentials were offered (none);
#   - a certificate without its key: refused when the kubeconfig is read;
#   - a certificate from another CA: one warning that the server rejected it;
# and no key material in any log.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/kube_lib.sh"

make_ca ca
make_ca client-ca
make_ca other-ca
issue srv ca 127.0.0.1 serverAuth 'subjectAltName=IP:127.0.0.1
'
issue node client-ca system:node:gpu-node-1 clientAuth
issue stranger other-ca system:node:gpu-node-1 clientAuth

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-mtls-token.c2lnbmF0dXJl

mtls_api() { # NAME: the fake API server asking for client certificates
    start_api "$1" --cert "$WORK/srv.crt" --key "$WORK/srv.key" --client-ca "$WORK/client-ca.crt"
}

kubeconfig() { # NAME USER-LINES...: $WORK/NAME.kubeconfig
    local name=$1
    shift
    {
        cat <<EOF
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $WORK/ca.crt
contexts:
- name: test
  context: {cluster: fake, user: node}
users:
- name: node
  user:
EOF
        for l in "$@"; do printf '    %s\n' "$l"; done
    } >"$WORK/$name.kubeconfig"
}

no_secrets() { # LOG: no key material, no token
    local k
    for k in node stranger; do
        if grep -qF -- "$(sed -n 2p "$WORK/$k.key")" "$WORK/$1"; then fail "$k.key is in $1"; fi
        if grep -qF -- "$(base64 -w0 "$WORK/$k.key" | cut -c1-40)" "$WORK/$1"; then
            fail "$k.key (base64) is in $1"
        fi
    done
    if grep -q "fake-mtls-token" "$WORK/$1"; then fail "the token is in $1"; fi
    ok
}
await_tls_errors() { # NAME N: N failed handshakes logged by the server
    wait_for 10 logged "$1" tls-error "$2" ||
        fail "$1: no $2 failed handshakes: $(cat "$WORK/$1.jsonl" 2>&1)"
}

# 1. client-certificate and client-key files, no token.
mtls_api file
kubeconfig file "client-certificate: $WORK/node.crt" "client-key: $WORK/node.key"
run_agent file
await_wl train-0 "PyTorchJob bert-large"
await_wl train-3 "StatefulSet ray-worker"
expect_eq "first request (files)" '{"kind":"list","n":1,"user":"system:node:gpu-node-1"}' \
    "$(head -1 "$WORK/file.jsonl" | jq -c .)"
expect_eq "unauthorized requests (files)" 0 "$(grep -c unauthorized "$WORK/file.jsonl" || true)"
stop_agent file
no_secrets file.log

# 2. The same inline, base64 (client-certificate-data, client-key-data).
mtls_api data
kubeconfig data "client-certificate-data: $(base64 -w0 "$WORK/node.crt")" \
    "client-key-data: $(base64 -w0 "$WORK/node.key")"
run_agent data
await_wl train-0 "PyTorchJob bert-large"
expect_eq "first request (data)" '{"kind":"list","n":1,"user":"system:node:gpu-node-1"}' \
    "$(head -1 "$WORK/data.jsonl" | jq -c .)"
stop_agent data
no_secrets data.log

# 3. No client certificate (and no token): the API server answers 401 (it
# asks for a certificate but, like kube-apiserver, does not require one);
# retried after 1 s, then 2 s; one precise warning.
mtls_api none
kubeconfig none
run_agent none
wait_for 10 logged none unauthorized 3 ||
    fail "no 3 refused requests: $(cat "$WORK/none.jsonl" 2>&1)"
gaps=$(jq -r 'select(.kind == "unauthorized") | .t' "$WORK/none.jsonl" | head -3 |
    awk 'NR > 1 { printf "%s%.0f", sep, ($1 - prev) * 10; sep = " " } { prev = $1 }')
read -r g1 g2 <<<"$gaps"
# Tenths of a second: about 10 then about 20 (plus a TLS handshake, slow
# under ASan on a loaded machine).
[ "$g1" -ge 9 ] && [ "$g1" -le 25 ] && [ "$g2" -ge 19 ] && [ "$g2" -le 35 ] ||
    fail "retry gaps (0.1 s): '$gaps', expected about 10 and 20"
ok
# Sessions are still reported without the API server (workload unknown).
await_idle_samples "without the API server"
ok
stop_agent none
expect_eq "warnings without credentials" 1 "$(grep -c 'kube: listing pods' "$WORK/none.log")"
expect_eq "the warning" "listing pods: HTTP 401 Unauthorized: the API server accepted none of the credentials (none: the kubeconfig's user has no token and no client certificate)" \
    "$(grep -o 'listing pods: .*' "$WORK/none.log")"
no_secrets none.log

# 3b. A client certificate without its key: refused when the kubeconfig is read.
kubeconfig halfpair "client-certificate: $WORK/node.crt"
start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup --kubernetes \
    --kubeconfig "$WORK/halfpair.kubeconfig" --node-name gpu-node-1 --state-dir "$WORK/state-hp"
kill "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
mv "$WORK/agent.log" "$WORK/halfpair.log"
grep -q "kubeconfig: user 'node' has a client certificate but no client-key or client-key-data" "$WORK/halfpair.log" ||
    fail "half pair: $(cat "$WORK/halfpair.log")"
ok

# 4. A certificate the server's client CA did not sign.
mtls_api stranger
kubeconfig stranger "client-certificate: $WORK/stranger.crt" "client-key: $WORK/stranger.key"
run_agent stranger
await_tls_errors stranger 2
stop_agent stranger
expect_eq "warnings with a foreign certificate" 1 "$(grep -c 'kube: listing pods' "$WORK/stranger.log")"
grep 'kube: listing pods' "$WORK/stranger.log" | grep -q 'it did not accept the kubeconfig.s client certificate; is it signed by the server.s client CA' ||
    fail "warning: $(grep kube "$WORK/stranger.log")"
ok
no_secrets stranger.log
done_ok
