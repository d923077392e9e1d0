#!/usr/bin/env bash
# gpu_agent.sh - the agent with the fake NVML library while the world
# changes under it: a GPU lost and back (the others keep reporting), an
# energy counter reset, a driver that takes seconds per process listing
# (scrapes and collection cycles stay fast), and the agent with no library
# or a driver/library mismatch (one log line, no GPU metrics, the rest
# works). The scenario file is replaced atomically; the fake re-reads it.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
root=$MLWATCH_FIXTURES/gpu-node
export FAKE_NVML_SCENARIO=$WORK/scenario.txt

base='gpu 0 util=10 memtotal=1000 memused=100 energy_mj=5000000 temp=40
gpu 1 util=20 memtotal=1000 memused=200 energy_mj=1000 temp=41
gpu 2 util=30 memtotal=1000 memused=300 energy_mj=1000 temp=42
gpu 3 util=40 memtotal=1000 memused=400 energy_mj=1000 temp=43
proc gpu=2 pid=4001 mem=100'

scenario() { # replace the scenario atomically
    printf '%s\n' "$base" "$@" >"$WORK/scenario.tmp"
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}

# value NAME LABELS: the value of NAME{...LABELS...} in a fresh scrape
value() {
    curl -sf "$AGENT_URL/metrics" >"$WORK/value.txt" || true
    awk -v n="$1" -v l="$2" 'index($0, n "{") == 1 && index($0, l) && !done { print $NF; done = 1 }' \
        "$WORK/value.txt"
}

value_is() { [ "$(value "$1" "$2")" = "$3" ]; } # NAME LABELS EXPECTED

# await NAME LABELS EXPECTED: until the scrape shows it (5 s at most)
await() {
    wait_for 5 value_is "$1" "$2" "$3" || fail "$1{$2}: expected $3, got '$(value "$1" "$2")'"
    ok
}

scenario
start_agent --root "$root" --collectors cgroup,gpu --nvml-library "$fake" --rocm-library none \
    --interval 200ms --gpu-process-interval 200ms
await mlwatch_gpu_lost 'gpu="1"' 0
await mlwatch_gpu_utilization_ratio 'gpu="1"' 0.2
curl -sf "$AGENT_URL/metrics" >"$WORK/m1.txt"
promtool check metrics <"$WORK/m1.txt" || fail "promtool check metrics"
ok
for g in 0 1 2 3; do
    grep -q "^mlwatch_collector_duration_seconds{collector=\"gpu\",gpu=\"$g\",node=\"t1\"} " "$WORK/m1.txt" ||
        fail "no collection time of GPU $g"
    ok
done
await mlwatch_container_gpu_memory_used_bytes 'pod="notebook-a"' 100

# GPU 1 falls off the bus; the others go on; it comes back.
scenario 'gpu 1 lost=1' 'gpu 0 util=11'
await mlwatch_gpu_lost 'gpu="1"' 1
await mlwatch_gpu_utilization_ratio 'gpu="0"' 0.11
[ -z "$(value mlwatch_gpu_utilization_ratio 'gpu="1"')" ] || fail "a lost GPU still reports utilization"
ok
expect_eq "GPU 3 while GPU 1 is lost" 0.4 "$(value mlwatch_gpu_utilization_ratio 'gpu="3"')"
scenario 'gpu 1 util=21'
await mlwatch_gpu_lost 'gpu="1"' 0
await mlwatch_gpu_utilization_ratio 'gpu="1"' 0.21

# Energy: 5000 J, then the driver reloads and counts from 2 J: 5002 J.
scenario 'gpu 0 energy_mj=2000'
await mlwatch_gpu_energy_joules_total 'gpu="0"' 5002

# A driver that spends 1.5 s in every process listing: scrapes stay fast and
# collection cycles do not wait for it.
scenario 'gpu 2 procs_delay_ms=1500'
sleep 2
worst=0
for i in $(seq 1 10); do
    t=$(curl -sf -o /dev/null -w '%{time_total}' "$AGENT_URL/metrics")
    worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
    sleep 0.1
done
awk -v w="$worst" 'BEGIN { exit !(w < 0.5) }' || fail "a scrape took $worst s behind a slow driver"
ok
d=$(value mlwatch_collector_duration_seconds 'collector="gpu",node="t1"}')
awk -v d="$d" 'BEGIN { exit !(d != "" && d < 0.1) }' || fail "the gpu collector's cycle took $d s"
ok
scenario
kill -TERM "$AGENT_PID"
set +e
wait "$AGENT_PID"
rc=$?
set -e
PIDS=()
expect_eq "exit status after SIGTERM" 0 "$rc"
expect_eq "gpu log lines" 1 "$(grep -c ' gpu: ' "$WORK/agent.log")"

# No library, a version mismatch, no GPU: one informative line, the rest works.
check_off() { # WHAT EXPECTED_IN_LOG AGENT_ARGS...
    local what=$1 want=$2
    shift 2
    start_agent --root "$root" --collectors cgroup,gpu --rocm-library none --interval 200ms "$@"
    sleep 0.5
    curl -sf "$AGENT_URL/metrics" >"$WORK/off.txt"
    if grep -q '^mlwatch_gpu_' "$WORK/off.txt"; then fail "$what: GPU metrics without a GPU library"; fi
    ok
    grep -q '^mlwatch_container_cpu_seconds_total{namespace="ml-team",pod="train-0"' "$WORK/off.txt" ||
        fail "$what: the cgroup collector does not report"
    ok
    expect_eq "$what: gpu log lines" 1 "$(grep -c ' gpu: ' "$WORK/agent.log")"
    grep ' gpu: ' "$WORK/agent.log" | grep -q "$want" || fail "$what: log line lacks '$want': $(grep ' gpu: ' "$WORK/agent.log")"
    ok
    kill -TERM "$AGENT_PID"
    wait "$AGENT_PID" || true
    PIDS=()
}
check_off "no library" "cannot open shared object file" --nvml-library /nonexistent/libnvidia-ml.so.1
scenario 'system init=LIB_RM_VERSION_MISMATCH'
check_off "mismatch" "version mismatch" --nvml-library "$fake"
printf '# no GPU\n' >"$WORK/scenario.txt"
check_off "no GPU" "reports no GPUs" --nvml-library "$fake"
done_ok
