#!/usr/bin/env bash
# remote_write_compare.sh - remote-write cost of mlwatch and of Prometheus's
# own remote write, same series, same receiver, one run.
#
#   bench/remote_write_compare.sh [SECONDS] [INTERVAL]   (default 60, 100ms)
#
# Receiver: Debian's victoria-metrics on 127.0.0.1. Three processes run
# side by side for SECONDS on the same fixture host (tests/fixtures):
#   mlwatch-rw    mlwatch agent --remote-write VM     (collects and ships)
#   mlwatch-base  mlwatch agent, no remote write      (collects only)
#   prometheus    Prometheus in agent mode (--enable-feature=agent: scrape,
#                 WAL, remote write, no TSDB) scraping a third, identical
#                 agent's /metrics every INTERVAL and remote-writing to VM
# Samples sent come from each sender's own counter (mlwatch's
# samples_sent_total, Prometheus's
# prometheus_remote_storage_samples_total). CPU from /proc/PID/stat.
# mlwatch's shipping cost is mlwatch-rw minus mlwatch-base; Prometheus's
# figure includes its scraping (its remote write cannot run without it).
# Then memory with a full queue: an agent shipping to a closed port with an
# 8 MiB queue until the oldest data is being dropped, RSS compared with
# mlwatch-base.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
iv=${2:-100ms}
bin=${MLWATCH_BIN:-build/mlwatch}
[ -x "$bin" ] || make >/dev/null
work=$(mktemp -d /tmp/mlwatch-rwbench-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; sleep 1; rm -rf "$work"' EXIT
root=tests/fixtures/k8s-v2-systemd
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer: $1" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
metric() { curl -s "$1" | awk -v n="$2" '$1 ~ "^"n"({|$)" { s += $NF } END { printf "%d\n", s }'; }

vmp=$(port); rwp=$(port); basep=$(port); scrp=$(port); promp=$(port); fullp=$(port); dead=$(port)
victoria-metrics -httpListenAddr 127.0.0.1:$vmp -storageDataPath "$work/vm" -loggerLevel=ERROR >/dev/null 2>&1 &
pids+=($!)
wait_up http://127.0.0.1:$vmp/health
"$bin" agent --listen 127.0.0.1:$rwp --root $root --interval $iv --log-level error --store=false \
    --data-dir "$work/rw" --remote-write http://127.0.0.1:$vmp/api/v1/write &
rw_pid=$!; pids+=($rw_pid)
"$bin" agent --listen 127.0.0.1:$basep --root $root --interval $iv --log-level error --store=false &
base_pid=$!; pids+=($base_pid)
"$bin" agent --listen 127.0.0.1:$scrp --root $root --interval $iv --log-level error --store=false &
pids+=($!)
cat >"$work/prom.yml" <<YAML
global: {scrape_interval: $iv, scrape_timeout: $iv}
scrape_configs: [{job_name: m, static_configs: [{targets: ['127.0.0.1:$scrp']}]}]
remote_write: [{url: 'http://127.0.0.1:$vmp/api/v1/write'}]
YAML
prometheus --enable-feature=agent --config.file="$work/prom.yml" --storage.agent.path="$work/prom" \
    --web.listen-address=127.0.0.1:$promp --log.level=error >/dev/null 2>&1 &
prom_pid=$!; pids+=($prom_pid)
wait_up http://127.0.0.1:$rwp/-/ready; wait_up http://127.0.0.1:$basep/-/ready; wait_up http://127.0.0.1:$promp/-/ready
sleep 5
s_mw0=$(metric http://127.0.0.1:$rwp/metrics mlwatch_remote_write_samples_sent_total)
s_pr0=$(metric http://127.0.0.1:$promp/metrics prometheus_remote_storage_samples_total)
t_rw0=$(ticks $rw_pid); t_base0=$(ticks $base_pid); t_pr0=$(ticks $prom_pid)
sleep "$secs"
s_mw1=$(metric http://127.0.0.1:$rwp/metrics mlwatch_remote_write_samples_sent_total)
s_pr1=$(metric http://127.0.0.1:$promp/metrics prometheus_remote_storage_samples_total)
t_rw1=$(ticks $rw_pid); t_base1=$(ticks $base_pid); t_pr1=$(ticks $prom_pid)
hz=$(getconf CLK_TCK)
rss_rw=$(rss_kb $rw_pid); rss_base=$(rss_kb $base_pid); rss_pr=$(rss_kb $prom_pid)
python3 - "$hz" "$secs" "$s_mw0" "$s_mw1" "$s_pr0" "$s_pr1" "$t_rw0" "$t_rw1" "$t_base0" "$t_base1" \
    "$t_pr0" "$t_pr1" "$rss_rw" "$rss_base" "$rss_pr" <<'PY'
import sys
hz, secs, mw0, mw1, pr0, pr1, rw0, rw1, b0, b1, p0, p1, rss_rw, rss_base, rss_pr = map(float, sys.argv[1:])
mw, pr = mw1 - mw0, pr1 - pr0
cpu_rw, cpu_base, cpu_pr = (rw1 - rw0) / hz, (b1 - b0) / hz, (p1 - p0) / hz
ship = max(cpu_rw - cpu_base, 1.0 / hz)
print('samples sent in %ds: mlwatch %d (%.0f/s), prometheus %d (%.0f/s)' % (secs, mw, mw / secs, pr, pr / secs))
print('CPU s: mlwatch-rw %.2f, mlwatch-base %.2f (shipping %.2f), prometheus agent %.2f' % (cpu_rw, cpu_base, ship, cpu_pr))
print('samples per CPU-second: mlwatch shipping %.0f, mlwatch collect+ship %.0f, prometheus scrape+ship %.0f' % (mw / ship, mw / cpu_rw, pr / cpu_pr))
print('ratio mlwatch/prometheus: shipping only %.1fx, whole process %.1fx' % ((mw / ship) / (pr / cpu_pr), (mw / cpu_rw) / (pr / cpu_pr)))
print('RSS KiB: mlwatch-rw %d, mlwatch-base %d, prometheus agent %d' % (rss_rw, rss_base, rss_pr))
PY

# Memory with a full queue: ship to a closed port until drops start.
"$bin" agent --listen 127.0.0.1:$fullp --root $root --interval 20ms --log-level error --store=false \
    --data-dir "$work/full" --config <(printf 'remote_write:\n  - url: http://127.0.0.1:%s/api/v1/write\n    queue_config: {capacity: 8MiB}\n' $dead) &
full_pid=$!; pids+=($full_pid)
wait_up http://127.0.0.1:$fullp/-/ready
for _ in $(seq 600); do
    [ "$(curl -s http://127.0.0.1:$fullp/metrics | awk '/^mlwatch_remote_write_samples_dropped_total.*queue_full/ {print $NF}')" != 0 ] && break
    sleep 0.5
done
sleep 5
echo "full queue: $(metric http://127.0.0.1:$fullp/metrics mlwatch_remote_write_queue_bytes) bytes queued," \
    "$(metric http://127.0.0.1:$fullp/metrics mlwatch_remote_write_samples_pending) samples pending," \
    "$(curl -s http://127.0.0.1:$fullp/metrics | awk '/^mlwatch_remote_write_samples_dropped_total.*queue_full/ {print $NF}') dropped; RSS $(rss_kb $full_pid) KiB (mlwatch-base $(rss_kb $base_pid) KiB)"
echo "mlwatch $("$bin" --version | awk '{print $2}'), $(prometheus --version 2>&1 | head -1 | awk '{print $3}') prometheus, victoria-metrics $(dpkg-query -W -f='${Version}' victoria-metrics), $(nproc) CPUs"
