#!/usr/bin/env bash
# hub_ingest.sh - where one hub stops being enough (docs/benchmarks.md, "Hub
# ingest"): NODES simulated node agents remote-writing to `mlwatch hub`, and
# the same load to VictoriaMetrics and Prometheus (Debian's), one after the
# other in one run.
#
# One node is the GPU benchmark node: tests/fixtures/generate-node.sh 299
# (100 pods, 299 containers, host series) with 8 fake-NVML H100s (18 NVLinks
# each, 104 GPU processes of the node's pods); its agent (every collector
# and module) is scraped once, and bench/hub_load.c replays that exposition
# under NODES node names, ROUNDS rounds 15 s apart (timestamps in the past,
# sent as fast as the receiver takes them, one request per node per round,
# 4 connections), after a first round that creates the series (its CPU and
# wall time apart). For each receiver: its CPU seconds over the ROUNDS
# rounds and 5 s after (utime+stime from /proc), RSS at the end and its
# peak, and the rate; the CPU per round divided by the interval is the
# share of a core the receiver needs at that interval in steady state.
#
#   bench/hub_ingest.sh [MLWATCH_BIN]          NODES="50 500" ROUNDS=8
#   ONLY=mlwatch NODES=500 bench/hub_ingest.sh build-rel/mlwatch
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/mlwatch}")
FAKE=$(dirname "$BIN")/tests/fakenvml/libnvidia-ml.so.1
NODES=${NODES:-50 500}
ROUNDS=${ROUNDS:-8}
ONLY=${ONLY:-mlwatch victoria-metrics prometheus}
work=$(mktemp -d /tmp/mlwatch-hub-bench.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_url() { for _ in $(seq 600); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }

cc -O2 -o "$work/hub_load" bench/hub_load.c -lsnappy -lcurl -lpthread

# The node and its exposition.
tests/fixtures/generate-node.sh 299 "$work/node" >/dev/null
mapfile -t node_pids < <(find "$work/node/sys/fs/cgroup" -name cgroup.procs -path '*pod*' -exec cat {} + |
    grep -E '^[0-9]+$' | head -104)
{
    for g in 0 1 2 3 4 5 6 7; do
        printf 'gpu %d name="NVIDIA H100 80GB HBM3" uuid=GPU-%08d bus=00000000:%02X:00.0 numa=%d util=%d memutil=30 memtotal=85520809984 memused=40000000000 power_mw=500000 limit_mw=700000 energy_mj=123456789 temp=50 sm_mhz=1980 sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 reasons=1\n' \
            "$g" "$g" $((0x18 + g)) $((g / 4)) $((50 + g))
        for l in $(seq 0 17); do printf 'nvlink gpu=%d link=%d crc_flit=%d\n' "$g" "$l" "$l"; done
        for p in $(seq 0 12); do
            printf 'proc gpu=%d pid=%s mem=268435456 sm=%d\n' "$g" "${node_pids[$(((g * 13 + p) % ${#node_pids[@]}))]}" $((p + 1))
        done
    done
} >"$work/scenario.txt"
port=$(free_port)
FAKE_NVML_SCENARIO=$work/scenario.txt "$BIN" agent --root "$work/node" --nvml-library "$FAKE" \
    --rocm-library none --listen "127.0.0.1:$port" --interval 500ms --data-dir "$work/agent" \
    --state-dir "$work/agent" --carbon-intensity 300 --node-name bench-node --log-level error &
agent=$!
pids+=("$agent")
wait_url "http://127.0.0.1:$port/-/ready"
sleep 3
curl -sf "http://127.0.0.1:$port/metrics" >"$work/exposition.prom"
kill "$agent"
wait "$agent" 2>/dev/null || true
series=$(grep -vc '^#' "$work/exposition.prom")
echo "one node: $series series ($(grep -c '^mlwatch_gpu_info' "$work/exposition.prom") GPUs)"

cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; } # clock ticks of 10 ms
rss_of() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

run() { # RECEIVER NODES
    local name=$1 n=$2 port url pid
    port=$(free_port)
    rm -rf "$work/data"
    mkdir -p "$work/data"
    case $name in
    mlwatch)
        "$BIN" hub --listen "127.0.0.1:$port" --data-dir "$work/data" --state-dir "$work/data" \
            --interval 15s --log-level error &
        pid=$!
        url=http://127.0.0.1:$port
        ready=$url/-/ready ;;
    victoria-metrics)
        victoria-metrics -httpListenAddr "127.0.0.1:$port" -storageDataPath "$work/data" \
            -loggerLevel=ERROR >/dev/null 2>&1 &
        pid=$!
        url=http://127.0.0.1:$port
        ready=$url/health ;;
    prometheus)
        printf 'global:\n  scrape_interval: 1m\n' >"$work/prom.yml"
        prometheus --config.file="$work/prom.yml" --storage.tsdb.path="$work/data" \
            --web.listen-address="127.0.0.1:$port" --web.enable-remote-write-receiver \
            --log.level=error >/dev/null 2>&1 &
        pid=$!
        url=http://127.0.0.1:$port
        ready=$url/-/ready ;;
    esac
    pids+=("$pid")
    wait_url "$ready"
    # Round 0 creates the series; rounds 1..ROUNDS are measured.
    local c0 out c1 wall end t_create c_create
    end=$(($(date +%s) * 1000))
    c_create=$(cpu_of "$pid")
    out=$("$work/hub_load" "$url/api/v1/write" "$work/exposition.prom" "$n" 1 15000 4 $((end - ROUNDS * 15000)))
    t_create=$(awk '$1 == "wall_seconds" {print $2}' <<<"$out")
    c0=$(cpu_of "$pid")
    c_create=$(awk -v a="$c_create" -v b="$c0" 'BEGIN {print b - a}')
    out=$("$work/hub_load" "$url/api/v1/write" "$work/exposition.prom" "$n" "$ROUNDS" 15000 4 "$end")
    sleep 5
    c1=$(cpu_of "$pid")
    wall=$(awk '$1 == "wall_seconds" {print $2}' <<<"$out")
    local rss hwm samples
    rss=$(rss_of "$pid" VmRSS)
    hwm=$(rss_of "$pid" VmHWM)
    samples=$(awk '$1 == "samples" {print $2}' <<<"$out")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    awk -v r="$name" -v n="$n" -v s="$samples" -v c0="$c0" -v c1="$c1" -v w="$wall" \
        -v rss="$rss" -v hwm="$hwm" -v rounds="$ROUNDS" -v series=$((series * n)) \
        -v cc="$c_create" -v tc="$t_create" 'BEGIN {
        cpu = c1 - c0; per_round = cpu / rounds
        printf "| %s | %d | %d | %.1f s (%.1f s) | %.2f | %.0f | %.3f | %.1f %% | %.0f %% | %.0f | %.0f | %.0f |\n",
            r, n, series, cc, tc, w, s / cpu, per_round, per_round / 15 * 100, per_round / 1 * 100,
            rss / 1024, hwm / 1024, rss * 1024 / series }'
}

echo "| receiver | nodes | active series | creating them: CPU (wall) | wall s, $ROUNDS rounds | samples per CPU-s | CPU s per round | of a core at 15 s | of a core at 1 s | RSS MiB | peak RSS MiB | RSS B per series |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for n in $NODES; do
    for r in $ONLY; do run "$r" "$n"; done
done
