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

make_ca() { # NAME: a self-signed CA in $WORK/NAME.crt (key NAME.key)
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$WORK/$1.key" -out "$WORK/$1.crt" -subj "/CN=mlwatch test $1" -days 2 \
        2>/dev/null || fail "openssl: cannot make CA $1"
}
issue() { # NAME CA CN USAGE [SAN]: $WORK/NAME.crt and NAME.key signed by CA
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/$1.key" \
        -out "$WORK/$1.csr" -subj "/CN=$3" 2>/dev/null || fail "openssl: $1 CSR"
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=%s\n%s' "$4" "${5:-}" >"$WORK/$1.ext"
    openssl x509 -req -in "$WORK/$1.csr" -CA "$WORK/$2.crt" -CAkey "$WORK/$2.key" \
        -CAcreateserial -out "$WORK/$1.crt" -days 2 -extfile "$WORK/$1.ext" 2>/dev/null ||
        fail "openssl: $1 certificate"
}
make_ca ca
make_ca client-ca
make_ca other-ca
issue srv ca 127.0.0.1 serverAuth 'subjectAltName=IP:127.0.0.1
'
issue node client-ca system:node:gpu-node-1 clientAuth
issue stranger other-ca system:node:gpu-node-1 clientAuth

TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-mtls-token.c2lnbmF0dXJl

start_api() { # NAME: sets API_PID, API_PORT; requests in $WORK/NAME.jsonl
    python3 "$MLWATCH_SRC/tests/fakeapi/fake_apiserver.py" --fixtures "$MLWATCH_FIXTURES/kube" \
        --token "$TOKEN" --node gpu-node-1 --log "$WORK/$1.jsonl" --port-file "$WORK/$1.port" \
        --cert "$WORK/srv.crt" --key "$WORK/srv.key" --client-ca "$WORK/client-ca.crt" &
    API_PID=$!
    PIDS+=("$API_PID")
    local deadline=$((SECONDS + 10))
    until [ -s "$WORK/$1.port" ]; do
        [ $SECONDS -lt $deadline ] || fail "$1: fake API server did not start"
        sleep 0.1
    done
    API_PORT=$(cat "$WORK/$1.port")
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

run_agent() { # NAME
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
wl() { # POD: "kind workload" of the pod's idle-seconds sample
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
    local deadline=$((SECONDS + 10))
    until [ "$(grep -c tls-error "$WORK/$1.jsonl" 2>/dev/null)" -ge "$2" ]; do
        [ $SECONDS -lt $deadline ] || fail "$1: no $2 failed handshakes: $(cat "$WORK/$1.jsonl" 2>&1)"
        sleep 0.1
    done
}

# 1. client-certificate and client-key files, no token.
start_api file
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
start_api data
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
start_api none
kubeconfig none
run_agent none
deadline=$((SECONDS + 10))
until [ "$(grep -c unauthorized "$WORK/none.jsonl" 2>/dev/null)" -ge 3 ]; do
    [ $SECONDS -lt $deadline ] || fail "no 3 refused requests: $(cat "$WORK/none.jsonl" 2>&1)"
    sleep 0.1
done
gaps=$(jq -r 'select(.kind == "unauthorized") | .t' "$WORK/none.jsonl" | head -3 |
    awk 'NR > 1 { printf "%s%.0f", sep, ($1 - prev) * 10; sep = " " } { prev = $1 }')
read -r g1 g2 <<<"$gaps"
# Tenths of a second: about 10 then about 20 (plus a TLS handshake, slow
# under ASan on a loaded machine).
[ "$g1" -ge 9 ] && [ "$g1" -le 25 ] && [ "$g2" -ge 19 ] && [ "$g2" -le 35 ] ||
    fail "retry gaps (0.1 s): '$gaps', expected about 10 and 20"
ok
# Sessions are still reported without the API server (workload unknown);
# the first ones may take a few cycles on a loaded machine.
deadline=$((SECONDS + 15))
until curl -sf "$AGENT_URL/metrics" | grep -q '^mlwatch_gpu_idle_seconds{'; do
    [ $SECONDS -lt $deadline ] || fail "no idle samples"
    sleep 0.2
done
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
start_api stranger
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
