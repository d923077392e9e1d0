#!/usr/bin/env bash
# gpu_health.sh - GPU health end to end (issue 30, docs/gpu.md "Health"):
# the agent with the fake NVML and a kernel log under --root (records from
# before the start, one appended after it), health on /metrics per GPU and
# for the node, the event history at /api/v1/gpu/events (hidden from a
# namespace-scoped reader), a GPU that is lost, NVML XID events when the
# kernel log is not read, a driver that stops answering (/-/ready 503 and
# every GPU unknown), and a catalog error with file:line:col.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
root=$(fixture_copy gpu-node)
mkdir -p "$root/dev"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
base='gpu 0 util=10 memtotal=1000 memused=100 energy_mj=5000 temp=40 bus=00000000:18:00.0 uuid=GPU-00000000-0000-0000-0000-000000000000
gpu 1 util=20 memtotal=1000 memused=200 energy_mj=1000 temp=41 bus=00000000:28:00.0 uuid=GPU-00000000-0000-0000-0000-000000000001
gpu 2 util=30 memtotal=1000 memused=300 energy_mj=1000 temp=42 bus=00000000:38:00.0 uuid=GPU-00000000-0000-0000-0000-000000000002
gpu 3 util=40 memtotal=1000 memused=400 energy_mj=1000 temp=43 bus=00000000:48:00.0 uuid=GPU-00000000-0000-0000-0000-000000000003'
scenario() {
    printf '%s\n' "$base" "$@" >"$WORK/scenario.tmp"
    mv "$WORK/scenario.tmp" "$WORK/scenario.txt"
}
# Kernel timestamps on this machine's clock (seconds ago), as /dev/kmsg has them.
up_us() { awk -v ago="$1" '{ printf "%.0f", ($1 - ago) * 1000000 }' /proc/uptime; }
cat >"$root/dev/kmsg" <<KMSG
6,500,$(up_us 60),-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15
4,501,$(up_us 50),-;NVRM: Xid (PCI:0000:18:00): 45, pid=4721, name=torchrun, Ch 00000010
6,502,$(up_us 40),-;NVRM: GPU at PCI:0000:28:00: GPU-00000000-0000-0000-0000-000000000001
4,503,$(up_us 40),-;NVRM: Xid (PCI:0000:28:00): 79, pid=2841, name=python3, GPU has fallen off the bus.
 SUBSYSTEM=pci
6,510,$(up_us 30),-;eth0: Link is Up - 25Gbps/Full
KMSG

value() {
    curl -sf "${AUTH[@]}" "$AGENT_URL/metrics" >"$WORK/value.txt" || true
    awk -v n="$1" -v l="$2" 'index($0, n "{") == 1 && index($0, l) && !done { print $NF; done = 1 }' \
        "$WORK/value.txt"
}
AUTH=()
value_is() { [ "$(value "$1" "$2")" = "$3" ]; }
await() {
    wait_for 5 value_is "$1" "$2" "$3" || fail "$1{$2}: expected $3, got '$(value "$1" "$2")'"
    ok
}
events() { curl -sf "$AGENT_URL/api/v1/gpu/events" "$@"; }

READ=read-token-AAAAAAAAAAAAAAAAAAAA
TEAMA=team-a-token-BBBBBBBBBBBBBBBBBB
printf '%s\n' "$READ" >"$WORK/read.tok"
printf '%s\n' "$TEAMA" >"$WORK/team-a.tok"
cat >"$WORK/policy.yaml" <<YAML
bindings:
  - token_file: $WORK/team-a.tok
    namespaces: [team-a]
    node_series: hidden
YAML

scenario
start_agent --root "$root" --collectors cgroup,gpu --nvml-library "$fake" --rocm-library none \
    --interval 200ms --gpu-process-interval 200ms --read-token-file "$WORK/read.tok" \
    --metrics-token-file "$WORK/read.tok" \
    --access-policy "$WORK/policy.yaml"
AUTH=(-H "Authorization: Bearer $READ")
await mlwatch_gpu_health 'gpu="1",uuid="GPU-00000000-0000-0000-0000-000000000001",state="unhealthy",reason="xid_79",action="reboot_node"' 1
await mlwatch_gpu_health 'gpu="0",uuid="GPU-00000000-0000-0000-0000-000000000000",state="healthy",reason="none",action="none"' 1
await mlwatch_gpu_node_health 'state="unhealthy",reason="xid_79",action="reboot_node"' 1
await mlwatch_gpu_recent_hardware_events 'gpu="1"' 1
await mlwatch_gpu_kernel_log_lost_records_total '' 6
grep -q 'XIDs from the kernel log (/dev/kmsg)' "$WORK/agent.log" || fail "the gpu line says nothing of the kernel log"
ok

auth=(-H "Authorization: Bearer $READ")
events "${auth[@]}" >"$WORK/ev.json"
q() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; print(eval(sys.argv[2]))' "$WORK/ev.json" "$1"; }
expect_eq "events" 2 "$(q 'len(d["events"])')"
expect_eq "xid 79" "79 1 2841 python3 True kernel_log bus unhealthy reboot_node GPU-00000000-0000-0000-0000-000000000001 0000:28:00" \
    "$(q '" ".join(str(e[k]) for e in d["events"] if e["code"] == 79 for k in ("code","gpu","pid","process","before_start","source","class","state","action","uuid","pci_bus_id"))')"
expect_eq "xid 45" "application healthy torchrun" \
    "$(q '" ".join(str(e[k]) for e in d["events"] if e["code"] == 45 for k in ("class","state","process"))')"
expect_eq "node" "unhealthy xid_79 1" "$(q '" ".join((d["node"]["state"], d["node"]["reason"], d["node"]["gpu"]))')"
expect_eq "kernel log" "True 5 6" "$(q '" ".join(str(d[k]) for k in ("kernel_log","kernel_log_records","kernel_log_lost"))')"
events -H "Authorization: Bearer $TEAMA" >"$WORK/ev.json"
expect_eq "scoped reader" "0 True" "$(q 'str(len(d["events"])) + " " + str("hidden" in d and "node" not in d)')"
expect_eq "no token" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/api/v1/gpu/events")"

# A record after the start: not before_start; 20 XID 13 within the window
# escalate GPU 2 to degraded.
for i in $(seq 1 20); do
    printf '4,%d,%s,-;NVRM: Xid (PCI:0000:38:00): 13, pid=%d, name=a, Graphics SM Warp Exception\n' \
        $((600 + i)) "$(up_us 0)" $((900 + i)) >>"$root/dev/kmsg"
done
await mlwatch_gpu_health 'gpu="2",uuid="GPU-00000000-0000-0000-0000-000000000002",state="degraded",reason="xid_13",action="reset_gpu"' 1
events "${auth[@]}" >"$WORK/ev.json"
expect_eq "xid 13 after the start" "20 False 901" \
    "$(q '" ".join(str(e[k]) for e in d["events"] if e["code"] == 13 for k in ("count","before_start","pid"))')"
await mlwatch_gpu_kernel_log_lost_records_total '' 96 # 504-509, 511-600

# GPU 3 falls off the bus.
scenario 'gpu 3 lost=1'
await mlwatch_gpu_health 'gpu="3",uuid="GPU-00000000-0000-0000-0000-000000000003",state="unhealthy",reason="gpu_lost",action="reboot_node"' 1
scenario
await mlwatch_gpu_health 'gpu="3",uuid="GPU-00000000-0000-0000-0000-000000000003",state="healthy",reason="none",action="none"' 1

# The driver stops answering: not ready, every GPU unknown.
scenario 'gpu 0 procs_delay_ms=60000'
wait_for 20 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' $AGENT_URL/-/ready)\" = 503 ]" ||
    fail "/-/ready does not say the GPU stack hangs"
ok
curl -s "$AGENT_URL/-/ready" | grep '^mlwatch is not ready: gpu: no GPU poll has completed for [0-9]* s (a driver call hangs?)$' >/dev/null ||
    fail "/-/ready: $(curl -s "$AGENT_URL/-/ready")"
ok
await mlwatch_gpu_health 'gpu="1",uuid="GPU-00000000-0000-0000-0000-000000000001",state="unknown",reason="no_reading",action="none"' 1
await mlwatch_gpu_node_health 'state="unknown",reason="no_reading"' 1
kill -KILL "$AGENT_PID" # the poller sleeps in the fake driver for a minute
wait "$AGENT_PID" || true
PIDS=()
AUTH=()

# Without the kernel log: NVML's XID events.
scenario 'event gpu=2 xid=48 id=1' 'event gpu=2 xid=48 id=2'
start_agent --root "$root" --collectors gpu --nvml-library "$fake" --rocm-library none \
    --interval 200ms --gpu-process-interval 200ms --gpu-kernel-log none
await mlwatch_gpu_health 'gpu="2",uuid="GPU-00000000-0000-0000-0000-000000000002",state="unhealthy",reason="xid_48",action="reset_gpu"' 1
events >"$WORK/ev.json"
expect_eq "nvml events" "48 2 nvml 2 False" \
    "$(q '" ".join(str(e[k]) for e in d["events"] for k in ("code","gpu","source","count","before_start"))')"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || true
PIDS=()

# A catalog with an error does not start.
printf 'xids:\n  - {code: 45, state: broken}\n' >"$WORK/bad.yaml"
rc=0
"$MLWATCH_BIN" metrics --root "$root" --collectors gpu --gpu-xid-catalog "$WORK/bad.yaml" \
    >"$WORK/bad.log" 2>&1 || rc=$?
expect_eq "bad catalog status" 2 "$rc"
grep -q "$WORK/bad.yaml:2:23: state must be one of healthy, degraded, unhealthy" "$WORK/bad.log" ||
    fail "bad catalog: $(cat "$WORK/bad.log")"
ok
done_ok
