# shellcheck shell=bash
# kube_lib.sh - what the pod-watch tests share (idle_kube*.sh): seven pods
# each holding an idle GPU of the fake NVML library, a throwaway CA and
# certificates, the fake API server, and reading a pod's workload off the
# agent's idle samples. Sourced after lib.sh; callers set TOKEN.

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
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
    command -v openssl >/dev/null || fail "openssl not installed"
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$WORK/$1.key" -out "$WORK/$1.crt" -subj "/CN=mlwatch test $1" -days 2 \
        2>/dev/null || fail "openssl: cannot make CA $1"
}
issue() { # NAME CA CN USAGE [EXT]: $WORK/NAME.crt and NAME.key signed by CA
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/$1.key" \
        -out "$WORK/$1.csr" -subj "/CN=$3" 2>/dev/null || fail "openssl: $1 CSR"
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=%s\n%s' "$4" "${5:-}" >"$WORK/$1.ext"
    openssl x509 -req -in "$WORK/$1.csr" -CA "$WORK/$2.crt" -CAkey "$WORK/$2.key" \
        -CAcreateserial -out "$WORK/$1.crt" -days 2 -extfile "$WORK/$1.ext" 2>/dev/null ||
        fail "openssl: $1 certificate"
}

wait_port_file() { # FILE WHAT: until FILE (written by a helper server) is there
    wait_for 10 test -s "$1" || fail "$2 did not start"
}
logged() { # NAME KIND N: the fake API server logged N requests of KIND (or more)
    [ "$(grep -c "$2" "$WORK/$1.jsonl" 2>/dev/null)" -ge "$3" ]
}

# start_api NAME [ARGS...]: a fresh fake API server (its scripted list/watch
# sequence starts over) with the extra ARGS (--cert, --client-ca...); sets
# API_PID, API_PORT; requests in $WORK/NAME.jsonl.
start_api() {
    local name=$1
    shift
    python3 "$MLWATCH_SRC/tests/fakeapi/fake_apiserver.py" --fixtures "$MLWATCH_FIXTURES/kube" \
        --token "$TOKEN" --node gpu-node-1 --log "$WORK/$name.jsonl" \
        --port-file "$WORK/$name.port" "$@" &
    API_PID=$!
    PIDS+=("$API_PID")
    wait_port_file "$WORK/$name.port" "$name: fake API server"
    API_PORT=$(cat "$WORK/$name.port")
}

# run_agent NAME: the agent against the kubeconfig $WORK/NAME.kubeconfig;
# its log is $WORK/NAME.log once stop_agent ran.
run_agent() {
    start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu \
        --nvml-library "$fake" --rocm-library none --interval 200ms \
        --gpu-process-interval 200ms --idle-window 1s --idle-busy-period 1s --kubernetes \
        --kubeconfig "$WORK/$1.kubeconfig" --node-name gpu-node-1 --data-dir "$WORK/data-$1"
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
        sed -n 's/^mlwatch_gpu_idle_seconds{namespace="[^"]*",pod="'"$1"'",container="main",gpu="[0-9]*",workload_kind="\([^"]*\)",workload="\([^"]*\)",owner="[^"]*",node="[^"]*"} .*/\1 \2/p'
}
# The whole page first: grep -q stops at the match, and curl, still writing,
# would fail the pipeline with SIGPIPE (pipefail).
has_idle_samples() {
    local page
    page=$(curl -sf "$AGENT_URL/metrics") && grep -q '^mlwatch_gpu_idle_seconds{' <<<"$page"
}
await_idle_samples() { # WHAT: until the agent reports idle sessions (within 15 s);
    # the first cycles with an idle GPU may be late on a loaded machine.
    wait_for 15 has_idle_samples || fail "no idle samples $1"
}
wl_is() { [ "$(wl "$1")" = "$2" ]; }
await_wl() { # POD EXPECTED
    wait_for 8 wl_is "$1" "$2" ||
        fail "workload of $1: expected '$2', got '$(wl "$1")' (log: $(cat "$WORK/agent.log"))"
    ok
}
