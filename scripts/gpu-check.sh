#!/usr/bin/env bash
# gpu-check.sh - run mlwatch once against the real GPU driver and record what
# docs/benchmarks.md needs (issue 3, item 8): the exposition, whether it
# passes `promtool check metrics`, the collection cost per GPU and per cycle,
# and the agent's memory.
#
#   scripts/gpu-check.sh [OUTDIR]          (default: gpu-check-<host>-<date>)
#
# Needs an NVIDIA (or AMD) GPU, its driver, and a built mlwatch (make). Runs
# as the user you are: root is not needed for NVML's readings, but without
# hostPID-like visibility of /proc the per-pod attribution shows processes as
# unattributed. Environment: MLWATCH_BIN (default build/mlwatch),
# NVML_LIBRARY (default libnvidia-ml.so.1), SECONDS_TO_RUN (default 30).
# Writes OUTDIR/{exposition.prom,promtool.txt,agent.log,summary.txt} and
# prints the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MLWATCH_BIN:-build/mlwatch}
nvml=${NVML_LIBRARY:-libnvidia-ml.so.1}
run_s=${SECONDS_TO_RUN:-30}
out=${1:-gpu-check-$(hostname)-$(date +%Y%m%d-%H%M%S)}
[ -x "$bin" ] || make
mkdir -p "$out"

# 1. One collection, GPU collector only (plus the process map's source).
"$bin" metrics --collectors cgroup,gpu --nvml-library "$nvml" >"$out/exposition.prom" \
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

# 2. The agent for a while, every collector on; scrape, time the scrapes.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" agent --listen "127.0.0.1:$port" --nvml-library "$nvml" --interval 1s >"$out/agent.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep "$run_s"
worst=0
for i in $(seq 1 10); do
    t=$(curl -sf -o "$out/scrape.prom" -w '%{time_total}' "http://127.0.0.1:$port/metrics")
    worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
done
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
kill "$pid"
wait "$pid" 2>/dev/null || true
trap - EXIT

gpus=$(grep -c '^mlwatch_gpu_info{' "$out/exposition.prom")
procs=$(awk '/^mlwatch_gpu_processes\{/ {s += $NF} END {print s + 0}' "$out/scrape.prom")
{
    echo "host: $(hostname), $(uname -r), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mlwatch: $("$bin" --version)"
    grep '^mlwatch_gpu_info{' "$out/exposition.prom" | sed 's/^/gpu: /'
    grep ' gpu: ' "$out/agent.log" | head -3 | sed 's/^/log: /'
    echo "$lint"
    echo "GPUs: $gpus, compute processes: $procs"
    echo "poll time per GPU on the GPU thread (seconds, last poll; fast readings, plus process"
    echo "lists/MIG/ECC/NVLink when that poll included them):"
    grep '^mlwatch_collector_duration_seconds{collector="gpu",gpu=' "$out/scrape.prom" | sed 's/^/  /'
    echo "collection cycle, main thread:"
    grep -E '^mlwatch_collector_duration_seconds\{collector="(gpu|cgroup)"\}' "$out/scrape.prom" | sed 's/^/  /'
    echo "slowest of 10 scrapes: ${worst} s"
    echo "agent RSS after ${run_s} s: $((rss / 1024)) MiB (peak $((hwm / 1024)) MiB), all collectors"
    echo "samples: $(grep -vc '^#' "$out/scrape.prom"), GPU samples: $(grep -Ec '^mlwatch_(gpu|mig|container_gpu|container_mig)_' "$out/scrape.prom")"
} >"$out/summary.txt"
cat "$out/summary.txt"
echo "files in $out/: exposition.prom (paste into docs/benchmarks.md), summary.txt"
