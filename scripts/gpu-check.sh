#!/usr/bin/env bash
# gpu-check.sh - run mlwatch once against the real GPU driver and record what
# docs/benchmarks.md needs (issue 3, item 8): the exposition, whether it
# passes `promtool check metrics`, the collection cost per GPU and per cycle,
# and the agent's memory.
#
#   scripts/gpu-check.sh [OUTDIR]          (default: gpu-check-<host>-<date>)
#
# Needs an NVIDIA (or AMD) GPU, its driver, and a built mlwatch (make; on a
# machine without its libraries, MLWATCH_BIN=.device/mlwatch from
# scripts/device-bundle.sh), bash, awk, python3 (curl and promtool when
# there; nvidia-smi's view is kept when it is installed). Runs
# as the user you are: root is not needed for NVML's readings, but without
# hostPID-like visibility of /proc the per-pod attribution shows processes as
# unattributed. Environment: MLWATCH_BIN (default build/mlwatch),
# NVML_LIBRARY (default libnvidia-ml.so.1), SECONDS_TO_RUN (default 30),
# READY_WAIT_S (how long the agent may take to start; default 30),
# STOP_WAIT_S (how long it may take to stop; default 20), KERNEL_LOG (the
# kernel log read for XID lines, default /dev/kmsg: reading it needs root or
# CAP_SYSLOG where kernel.dmesg_restrict=1).
# Writes OUTDIR/{exposition.prom,promtool.txt,agent.log,scrape.prom,summary.txt,
# gpu-events.json (the health module's event history), ready.txt},
# with nvidia-smi's view when it is installed (nvidia-smi-q.txt,
# nvidia-smi.csv, nvidia-smi-L.txt), and prints the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MLWATCH_BIN:-build/mlwatch}
nvml=${NVML_LIBRARY:-libnvidia-ml.so.1}
run_s=${SECONDS_TO_RUN:-30}
stop_s=${STOP_WAIT_S:-20}
ready_s=${READY_WAIT_S:-30}
kmsg=${KERNEL_LOG:-/dev/kmsg}
out=${1:-gpu-check-$(uname -n)-$(date +%Y%m%d-%H%M%S)}
[ -x "$bin" ] || make
mkdir -p "$out"

# 1. One collection, GPU collector only (plus the process map's source).
"$bin" metrics --collectors cgroup,gpu --nvml-library "$nvml" --gpu-kernel-log "$kmsg" \
    >"$out/exposition.prom" \
    2>"$out/metrics.log"
if ! grep -q '^mlwatch_gpu_info{' "$out/exposition.prom"; then
    echo "no GPU found by mlwatch:" >&2
    cat "$out/metrics.log" >&2
    exit 1
fi
if command -v promtool >/dev/null; then
    promtool check metrics <"$out/exposition.prom" >"$out/promtool.txt" 2>&1 &&
        lint="promtool check metrics: clean" || lint="promtool check metrics: FAILED (see promtool.txt)"
else
    lint="promtool not installed: not checked"
fi

# The driver's own view, to compare values with by eye (power, clocks,
# memory, PCI bus ids, MIG profiles): nvidia-smi reads the same NVML.
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1 || true
    nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,utilization.gpu,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.max.sm,clocks.mem,pstate \
        --format=csv >"$out/nvidia-smi.csv" 2>&1 || true
    nvidia-smi -L >"$out/nvidia-smi-L.txt" 2>&1 || true
fi

# 2. The agent for a while, every collector on; scrape, time the scrapes.
# The store and state in a folder of their own, removed at the end: not the
# host's /var/lib/mlwatch (another agent's, or not writable for this user).
data=$(mktemp -d "${TMPDIR:-/tmp}/mlwatch-gpu-check-XXXXXX")
# Emptied before the start: in a reused OUTDIR the log is the last run's,
# with its port, until the child's redirection has run.
: >"$out/agent.log"
"$bin" agent --listen 127.0.0.1:0 --nvml-library "$nvml" --gpu-kernel-log "$kmsg" --interval 1s \
    --data-dir "$data" --state-dir "$data" >"$out/agent.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$data"' EXIT
# gone, or a zombie not yet reaped
stopped() { st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || return 0; [ "${st%% *}" = Z ]; }
# get PATH FILE: GET PATH from the agent into FILE, print the seconds it took.
# curl when there is one; else Python's urllib (a GPU machine's image may
# lack curl).
get() {
    if command -v curl >/dev/null; then
        curl -sf -m 10 -o "$2" -w '%{time_total}' "http://127.0.0.1:$port$1"
    else
        python3 - "$port" "$1" "$2" <<'PY'
import sys, time, urllib.request
t = time.monotonic()
try:
    body = urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=10).read()
except OSError as e:
    sys.stderr.write("python3: %s\n" % e)
    sys.exit(7)
open(sys.argv[3], "wb").write(body)
print("%.6f" % (time.monotonic() - t))
PY
    fi
}
# Its port (the kernel's choice, from its log), then ready: up to
# READY_WAIT_S, so that a slow start does not eat into the run.
port=
for _ in $(seq 1 $((ready_s * 10))); do
    port=$(sed -n 's/.* listening on .* (port \([0-9]*\)).*/\1/p' "$out/agent.log")
    if [ -n "$port" ] && get /-/ready /dev/null >/dev/null 2>&1; then break; fi
    stopped && break
    sleep 0.1
done
sleep "$run_s"
worst=0
if stopped || [ -z "$port" ]; then
    echo "the agent is not serving (see agent.log): no scrapes" >&2
else
    for i in $(seq 1 10); do
        t=$(get /metrics "$out/scrape.prom") ||
            { echo "scrape $i failed (exit $?): is the agent still running? see agent.log" >&2; t=0; }
        worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
    done
    # Health (issue 30): the event history and readiness as the agent says them.
    get /api/v1/gpu/events "$out/gpu-events.json" >/dev/null ||
        echo "GET /api/v1/gpu/events failed (exit $?)" >&2
    if command -v curl >/dev/null; then
        curl -s -m 10 -o "$out/ready.txt" -w '%{http_code}\n' "http://127.0.0.1:$port/-/ready" \
            >>"$out/ready.txt" || true
    else
        get /-/ready "$out/ready.txt" >/dev/null 2>&1 || echo "not ready (or no answer)" >>"$out/ready.txt"
    fi
fi
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
agent_state="ran ${run_s} s and was stopped"
if ! stopped && kill "$pid" 2>/dev/null; then
    # A stop that hangs (a driver call that never returns) must not hold the
    # lent machine until its time runs out: STOP_WAIT_S, then SIGKILL, and say so.
    for _ in $(seq 1 $((stop_s * 10))); do stopped && break; sleep 0.1; done
    stopped || {
        agent_state="ran ${run_s} s and DID NOT STOP within ${stop_s} s of SIGTERM (killed; see agent.log)"
        kill -KILL "$pid" 2>/dev/null || true
    }
else
    agent_state="STOPPED BY ITSELF before ${run_s} s (see agent.log): figures below are missing"
fi
wait "$pid" 2>/dev/null || true
rm -rf "$data"
trap - EXIT

# The summary uses awk, never a grep that finds nothing (exit 1) nor a head that
# ends its writer early (SIGPIPE): under set -e -o pipefail either would stop
# the script before it writes what the one run on a lent GPU showed.
touch "$out/scrape.prom" "$out/gpu-events.json" "$out/ready.txt"
gpus=$(awk '/^mlwatch_gpu_info\{/ {n++} END {print n + 0}' "$out/exposition.prom")
procs=$(awk '/^mlwatch_gpu_processes\{/ {s += $NF} END {print s + 0}' "$out/scrape.prom")
{
    echo "host: $(uname -n), $(uname -r), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mlwatch: $("$bin" --version)"
    echo "agent: $agent_state"
    awk '/^mlwatch_gpu_info\{/ {print "gpu: " $0}' "$out/exposition.prom"
    awk '/ gpu: / && n++ < 3 {print "log: " $0}' "$out/agent.log"
    echo "$lint"
    echo "GPUs: $gpus, compute processes: $procs"
    echo "poll time per GPU on the GPU thread (seconds, last poll; fast readings, plus process"
    echo "lists/MIG/ECC/NVLink when that poll included them):"
    awk 'index($0, "mlwatch_collector_duration_seconds{collector=\"gpu\",gpu=") == 1 {print "  " $0}' "$out/scrape.prom"
    echo "collection cycle, main thread:"
    awk '/^mlwatch_collector_duration_seconds\{collector="(gpu|cgroup)",node="[^"]*"\}/ {print "  " $0}' "$out/scrape.prom"
    echo "slowest of 10 scrapes: ${worst} s"
    echo "health (mlwatch_gpu_health, current state per GPU; the node):"
    awk '/^mlwatch_gpu_(node_)?health\{/ && $NF == 1 {print "  " $0}' "$out/scrape.prom"
    awk '/^mlwatch_gpu_(error_records|error_events|kernel_log_lost_records)_total\{/ {print "  " $0}' "$out/scrape.prom"
    python3 - "$out/gpu-events.json" <<'PY' || echo "  gpu events: not readable (see gpu-events.json)"
import json, sys
try:
    d = json.load(open(sys.argv[1]))["data"]
except (OSError, ValueError, KeyError):
    print("  gpu events: none served (see gpu-events.json)")
    sys.exit(0)
print("  gpu events: %d (kernel log read: %s, %d records, %d lost)" % (
    len(d.get("events", [])), d.get("kernel_log"), d.get("kernel_log_records", 0),
    d.get("kernel_log_lost", 0)))
for e in d.get("events", [])[-10:]:
    print("    %s %s gpu=%s count=%d before_start=%s %s" % (
        e["kind"], e["code"], e["gpu"] or e["pci_bus_id"], e["count"], e["before_start"],
        e["message"][:60]))
PY
    echo "ready: $(awk 'NR > 1 {printf " "} {printf "%s", $0} END {print ""}' "$out/ready.txt")"
    echo "agent RSS after ${run_s} s: $((rss / 1024)) MiB (peak $((hwm / 1024)) MiB), all collectors"
    echo "samples: $(awk '!/^#/ {n++} END {print n + 0}' "$out/scrape.prom"), GPU samples: $(awk '/^mlwatch_(gpu|mig|container_gpu|container_mig)_/ {n++} END {print n + 0}' "$out/scrape.prom")"
} >"$out/summary.txt"
cat "$out/summary.txt"
[ ! -s "$out/nvidia-smi.csv" ] || { echo "nvidia-smi:"; cat "$out/nvidia-smi.csv"; }
echo "files in $out/: exposition.prom (paste into docs/benchmarks.md), summary.txt"
