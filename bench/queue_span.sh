#!/usr/bin/env bash
# queue_span.sh - how long a hub outage the agent's default remote-write
# queue (512 MiB on the node's disk) covers, on the GPU benchmark node of
# bench/hub_ingest.sh (generate-node.sh 299: 100 pods; 8 fake H100s with
# 104 processes): the agent writes to a hub that is down for SECONDS; the
# queue's bytes on disk per queued sample, and so the hours 512 MiB hold
# at 1 s and 15 s intervals (docs/benchmarks.md, "Hub ingest").
#
#   bench/queue_span.sh [MLWATCH_BIN] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/mlwatch}")
FAKE=$(dirname "$BIN")/tests/fakenvml/libnvidia-ml.so.1
SECS=${2:-30}
work=$(mktemp -d /tmp/mlwatch-queue-bench.XXXXXX)
agent=
trap '[ -n "$agent" ] && kill "$agent" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

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
dead=$(free_port)
port=$(free_port)
printf 'remote_write:\n  - {url: "http://127.0.0.1:%s/api/v1/write", name: hub}\n' "$dead" >"$work/agent.yml"
FAKE_NVML_SCENARIO=$work/scenario.txt "$BIN" agent --root "$work/node" --nvml-library "$FAKE" \
    --rocm-library none --listen "127.0.0.1:$port" --interval 1s --data-dir "$work/data" \
    --state-dir "$work/data" --store=false --config "$work/agent.yml" --log-level error &
agent=$!
sleep "$SECS"
m=$(curl -sf "http://127.0.0.1:$port/metrics")
pending=$(awk '/^mlwatch_remote_write_samples_pending\{/ {s += $NF} END {print s}' <<<"$m")
series=$(grep -vc '^#' <<<"$m")
bytes=$(du -sb "$work/data/remote-write/hub" | cut -f1)
awk -v p="$pending" -v b="$bytes" -v s="$series" -v t="$SECS" 'BEGIN {
    per = b / p; cap = 512 * 1048576
    printf "series per cycle %d; after %d s down: %d samples queued in %d bytes = %.1f bytes per sample\n", s, t, p, b, per
    printf "512 MiB holds %.0f samples: %.1f hours at a 1 s interval, %.1f hours (%.1f days) at 15 s\n",
        cap / per, cap / per / s / 3600, cap / per / s * 15 / 3600, cap / per / s * 15 / 86400 }'
