#!/usr/bin/env bash
# node_exporter_compare.sh - mlwatch and Debian's prometheus-node-exporter
# side by side on this host, in one run.
#
#   bench/node_exporter_compare.sh [SCRAPES]       (default 1000)
#
# For each exporter: CPU seconds consumed per scrape over SCRAPES scrapes
# (utime+stime from /proc/PID/stat before and after; the agent keeps
# collecting every second meanwhile, and that cost is included), RSS after
# the run, and the number of series exposed. Scrapes ask for gzip, as
# Prometheus does, over one keep-alive connection.
set -euo pipefail
cd "$(dirname "$0")/.."
scrapes=${1:-1000}
command -v prometheus-node-exporter >/dev/null || { echo "apt-get install prometheus-node-exporter" >&2; exit 1; }
[ -x build/mlwatch ] || make >/dev/null

ne_port=19100
mw_port=19230
prometheus-node-exporter --web.listen-address=127.0.0.1:$ne_port >/dev/null 2>&1 &
ne_pid=$!
./build/mlwatch agent --listen 127.0.0.1:$mw_port --log-level error &
mw_pid=$!
trap 'kill $ne_pid $mw_pid 2>/dev/null || true' EXIT
for url in http://127.0.0.1:$ne_port/metrics http://127.0.0.1:$mw_port/metrics; do
    for _ in $(seq 100); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
done
sleep 2 # let both settle (the agent's first cycles, node_exporter's first scrape)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
series() { curl -s "$1" | grep -vc '^#'; }

measure() { # name pid url
    local name=$2 pid=$3 url=$4 t0 t1 w0 w1 args=()
    for _ in $(seq "$scrapes"); do args+=(-o /dev/null "$url"); done
    t0=$(cpu_ticks "$pid")
    w0=$(date +%s.%N)
    curl -s --compressed "${args[@]}"
    w1=$(date +%s.%N)
    t1=$(cpu_ticks "$pid")
    local hz
    hz=$(getconf CLK_TCK)
    eval "$1_cpu=$(echo "($t1 - $t0) / $hz / $scrapes" | bc -l)"
    eval "$1_wall=$(echo "($w1 - $w0)" | bc -l)"
    eval "$1_rss=$(rss_kb "$pid")"
    eval "$1_series=$(series "$url")"
    printf '%-14s cpu/scrape=%.6f s  rss=%s KiB  series=%s  wall for %s scrapes=%.2f s\n' "$name" \
        "$(eval echo \$$1_cpu)" "$(eval echo \$$1_rss)" "$(eval echo \$$1_series)" "$scrapes" "$(eval echo \$$1_wall)"
}

measure ne node_exporter $ne_pid http://127.0.0.1:$ne_port/metrics
measure mw mlwatch $mw_pid http://127.0.0.1:$mw_port/metrics
echo "ratios (mlwatch / node_exporter):"
printf '  cpu per scrape  %.4f   (target <= 0.1)\n' "$(echo "$mw_cpu / $ne_cpu" | bc -l)"
printf '  RSS             %.3f   (target <= 0.333)\n' "$(echo "$mw_rss / $ne_rss" | bc -l)"
printf '  series          %.2f   (target >= 1)\n' "$(echo "$mw_series / $ne_series" | bc -l)"
echo "node_exporter $(prometheus-node-exporter --version 2>&1 | head -1 | awk '{print $3}'), mlwatch $(./build/mlwatch --version | awk '{print $2}'), $(nproc) CPUs, $(uname -r)"
