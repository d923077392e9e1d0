#!/bin/bash
# ingest_compare.sh SERIES ROUNDS MLWATCH_BIN... : remote-write ingest cost of
# one or more mlwatch builds and of VictoriaMetrics (Debian package), one
# after the other in one run, the same load with identical timestamps
# (../shared/bench/rwload.c, or $RWLOAD_SRC; RWLOAD_VALUES is passed on,
# e.g. telemetry). For each store: samples per server CPU-second (CPU from
# /proc/PID/stat, from the first request to 5 s after the last), RSS per
# active series after ingest; for mlwatch also what the data folder holds
# after a forced compaction (WAL, chunk files, blocks, head snapshot files).
# Prints one line per store and each mlwatch/VictoriaMetrics ratio. Never a
# timed test. NO_VM=1 leaves VictoriaMetrics out.
set -u
N=${1:?SERIES} R=${2:?ROUNDS}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
RWLOAD_SRC=${RWLOAD_SRC:-$here/../../shared/bench/rwload.c}
D=$(mktemp -d /tmp/ingest-compare-XXXXXX)
trap 'rm -rf "$D"' EXIT
cc -O2 -o "$D/rwload" "$RWLOAD_SRC" -lsnappy -lcurl -lm || exit 1
END_MS=$(( $(date +%s) * 1000 ))
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
wait_up() { until curl -sf -o /dev/null "$1"; do sleep 0.05; done; }
kb() { du -sk "$@" 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
load() { # url pid name
    local c0 c1 out
    c0=$(cpu_ticks "$2")
    out=$("$D/rwload" "$1" "$N" "$R" 5000 15000 "$END_MS")
    sleep 5
    c1=$(cpu_ticks "$2")
    echo "$3 series=$N rounds=$R $out server_cpu_s=$(python3 -c "print(($c1-$c0)/100)")" \
        "samples_per_cpu_s=$(python3 -c "print(int($N*$R*100/max($c1-$c0,1)))")" \
        "rss_bytes_per_series=$(( $(rss_kb "$2") * 1024 / N ))" | tee -a "$D/summary"
}
i=0
for bin in "$@"; do
    i=$((i + 1))
    "$bin" agent --listen 127.0.0.1:19241 --data-dir "$D/ml$i" --interval 10s \
        --disable-collectors gpu >"$D/ml$i.log" 2>&1 &
    P=$!
    wait_up http://127.0.0.1:19241/-/ready
    sleep 2
    load http://127.0.0.1:19241/api/v1/write $P "mlwatch$i($bin)"
    curl -s -XPOST http://127.0.0.1:19241/api/v1/store/compact >/dev/null
    d=$D/ml$i/data
    echo "mlwatch$i data folder after compaction, KiB: total=$(kb "$d") wal=$(kb "$d/wal")" \
        "chunks=$(kb "$d/chunks") blocks=$(kb "$d/blocks") head_snapshots=$(kb "$d"/head.snapshot*)" \
        "snapshot_files=$(ls "$d" | grep -c '^head\.snapshot') wal_segments=$(ls "$d/wal" | wc -l)" | tee -a "$D/summary"
    kill $P
    wait $P 2>/dev/null
    rm -rf "$D/ml$i"
done
if [ -z "${NO_VM:-}" ]; then
    victoria-metrics -storageDataPath="$D/vm" -httpListenAddr=127.0.0.1:18438 -retentionPeriod=100y \
        -search.latencyOffset=0s >"$D/vm.log" 2>&1 &
    P=$!
    wait_up http://127.0.0.1:18438/health
    sleep 2
    load http://127.0.0.1:18438/api/v1/write $P victoria-metrics
    kill $P
    wait $P 2>/dev/null
fi
python3 - "$D/summary" <<'PY'
import re, sys
rate = {}
for line in open(sys.argv[1]):
    m = re.search(r'samples_per_cpu_s=(\d+)', line)
    if m: rate[line.split()[0]] = int(m.group(1))
vm = rate.pop('victoria-metrics', None)
for name, r in rate.items():
    print('%s: %d samples per CPU-second%s' % (name, r, ', %.2fx VictoriaMetrics (%d)' % (r / vm, vm) if vm else ''))
PY
