#!/bin/bash
# store_compare.sh SERIES ROUNDS [MLWATCH_BIN]: the same remote-write load
# (../shared/bench/rwload.c, or $RWLOAD_SRC) into mlwatch's store,
# Prometheus and VictoriaMetrics (Debian packages), one after the other in
# one run, and for each: RSS per active series, samples per CPU-second of
# the server, restart time after kill -9 (until ready) and how many of the
# acknowledged samples are still there, and disk bytes per sample (after a
# forced compaction for mlwatch, a forced flush for VictoriaMetrics; the
# Prometheus figure is its WAL and head chunks, as it compacts only 2 h
# blocks), and the blocks alone for mlwatch (`mlwatch store inspect`, with
# its codec mix) and Prometheus (its 2 h blocks and the samples their
# meta.json counts). RWLOAD_VALUES=telemetry is passed on to rwload. Prints
# one line per store and the ratios. Never a timed test.
# ONLY=mlwatch runs mlwatch alone (no ratios).
set -u
N=${1:-1000000} R=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
MLWATCH=${3:-$here/../build-rel/mlwatch}
RWLOAD_SRC=${RWLOAD_SRC:-$here/../../shared/bench/rwload.c}
D=$(mktemp -d /tmp/store-compare-XXXXXX)
RW=$D/rwload
cc -O2 -o "$RW" "$RWLOAD_SRC" -lsnappy -lcurl -lm || exit 1
METRICS="gpu_utilization_ratio gpu_power_watts gpu_memory_used_bytes gpu_temperature_celsius gpu_sm_clock_hz container_cpu_seconds_total container_memory_working_set_bytes container_energy_joules_total node_cpu_frequency_hz container_co2_grams_total"
now_ms() { date +%s%3N; }
wait_ready() { # url -> ms until it answers 2xx
    local t0; t0=$(now_ms)
    until curl -sf -o /dev/null "$1"; do sleep 0.05; done
    echo $(( $(now_ms) - t0 ))
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
count_promql() { # base url: samples summed over the ten rwload metrics
    local total=0 m v
    for m in $METRICS; do
        v=$(curl -s "$1/api/v1/query" --data-urlencode "query=sum(count_over_time($m[1d]))" |
            sed -n 's/.*"value":\[[^,]*,"\([0-9.e+]*\)".*/\1/p')
        total=$(python3 -c "print(int($total + float('${v:-0}')))")
    done
    echo "$total"
}
count_mlwatch() {
    local total=0 m v
    for m in $METRICS; do
        v=$(curl -s "$1/api/v1/store/count?match=$m" | awk '/^samples/{print $2}')
        total=$((total + ${v:-0}))
    done
    echo "$total"
}
report() { # name pid cpu0 cpu1 out
    local rss; rss=$(awk '/VmRSS/{print $2}' "/proc/$2/status")
    local cpu=$(( $4 - $3 ))
    local rate; rate=$(python3 -c "print(int($N*$R*100/max($cpu,1)))")
    echo "$1 series=$N rounds=$R $5 server_cpu_s=$(python3 -c "print($cpu/100)") rss_MB=$((rss / 1024)) bytes_per_series=$((rss * 1024 / N)) samples_per_cpu_s=$rate" | tee -a "$D/summary"
}

# --- mlwatch ---
ML="$MLWATCH agent --listen 127.0.0.1:19230 --data-dir $D/ml --interval 10s --disable-collectors gpu"
$ML >"$D/ml.log" 2>&1 & P=$!
wait_ready http://127.0.0.1:19230/-/ready >/dev/null
sleep 2
c0=$(cpu_ticks $P); out=$($RW http://127.0.0.1:19230/api/v1/write "$N" "$R" 5000 15000); sleep 5; c1=$(cpu_ticks $P)
report mlwatch $P "$c0" "$c1" "$out"
kill -9 $P; wait $P 2>/dev/null
$ML >>"$D/ml.log" 2>&1 & P=$!
ms=$(wait_ready http://127.0.0.1:19230/-/ready)
after=$(count_mlwatch http://127.0.0.1:19230)
echo "mlwatch restart_ms=$ms samples_acked=$((N * R)) counted_after_kill9=$after lost=$((N * R - after))" | tee -a "$D/summary"
t0=$(now_ms); curl -s -XPOST http://127.0.0.1:19230/api/v1/store/compact >/dev/null; t1=$(now_ms)
disk=$(du -sk "$D/ml/data" | cut -f1)
echo "mlwatch compaction_ms=$((t1 - t0)) disk_MB=$((disk / 1024)) disk_bytes_per_sample=$(python3 -c "print(round($disk*1024/($N*$R),2))")" | tee -a "$D/summary"
# The blocks alone (what compaction wrote), from `mlwatch store inspect`
# (MLWATCH_INSPECT=a build that has it, for a build before it).
"${MLWATCH_INSPECT:-$MLWATCH}" store inspect "$D/ml" >"$D/inspect.txt"
blk=$(sed -n 's/.* samples, \([0-9]*\) bytes, \([0-9.]*\) bytes per sample/\1 \2/p' "$D/inspect.txt")
echo "mlwatch blocks_bytes=${blk% *} blocks_bytes_per_sample=${blk#* }" | tee -a "$D/summary"
sed -n '/^codec mix/,$p' "$D/inspect.txt"
grep "store: opened" "$D/ml.log" | tail -1
kill $P; wait $P 2>/dev/null

if [ "${ONLY:-}" = mlwatch ]; then rm -rf "$D"; exit 0; fi

# --- Prometheus ---
start_prom() { prometheus --config.file=/dev/null --storage.tsdb.path="$D/prom" --web.listen-address=127.0.0.1:19090 --web.enable-remote-write-receiver --query.max-samples=500000000 >>"$D/prom.log" 2>&1 & P=$!; }
start_prom; wait_ready http://127.0.0.1:19090/-/ready >/dev/null; sleep 2
c0=$(cpu_ticks $P); out=$($RW http://127.0.0.1:19090/api/v1/write "$N" "$R" 5000 15000); sleep 5; c1=$(cpu_ticks $P)
report prometheus $P "$c0" "$c1" "$out"
kill -9 $P; wait $P 2>/dev/null
start_prom; ms=$(wait_ready http://127.0.0.1:19090/-/ready)
after=$(count_promql http://127.0.0.1:19090)
disk=$(du -sk "$D/prom" | cut -f1)
echo "prometheus restart_ms=$ms samples_acked=$((N * R)) counted_after_kill9=$after lost=$((N * R - after)) disk_MB=$((disk / 1024)) disk_bytes_per_sample=$(python3 -c "print(round($disk*1024/($N*$R),2))")" | tee -a "$D/summary"
# Its 2-hour blocks alone: bytes and the samples their meta.json counts.
pblk=$(python3 - "$D/prom" <<'PY'
import glob, json, os, sys
b = s = 0
for meta in glob.glob(os.path.join(sys.argv[1], '*', 'meta.json')):
    d = os.path.dirname(meta)
    s += json.load(open(meta))['stats']['numSamples']
    for root, _, files in os.walk(d):
        b += sum(os.path.getsize(os.path.join(root, f)) for f in files)
print(b, s, round(b / s, 3) if s else 0)
PY
)
read -r pb ps pbs <<<"$pblk"
echo "prometheus blocks_bytes=$pb blocks_samples=$ps blocks_bytes_per_sample=$pbs" | tee -a "$D/summary"
kill $P; wait $P 2>/dev/null
rm -rf "$D/prom"

# --- VictoriaMetrics ---
start_vm() { victoria-metrics -storageDataPath="$D/vm" -httpListenAddr=127.0.0.1:18428 -retentionPeriod=1y -search.latencyOffset=0s >>"$D/vm.log" 2>&1 & P=$!; }
start_vm; wait_ready http://127.0.0.1:18428/health >/dev/null; sleep 2
c0=$(cpu_ticks $P); out=$($RW http://127.0.0.1:18428/api/v1/write "$N" "$R" 5000 15000); sleep 5; c1=$(cpu_ticks $P)
report victoria-metrics $P "$c0" "$c1" "$out"
kill -9 $P; wait $P 2>/dev/null
start_vm; ms=$(wait_ready http://127.0.0.1:18428/health)
sleep 2
after=$(count_promql http://127.0.0.1:18428)
curl -s http://127.0.0.1:18428/internal/force_flush >/dev/null; sleep 2
disk=$(du -sk "$D/vm" | cut -f1)
echo "victoria-metrics restart_ms=$ms samples_acked=$((N * R)) counted_after_kill9=$after lost=$((N * R - after)) disk_MB=$((disk / 1024)) disk_bytes_per_sample=$(python3 -c "print(round($disk*1024/($N*$R),2))")" | tee -a "$D/summary"
kill $P; wait $P 2>/dev/null

python3 - "$D/summary" <<'PY'
import re, sys
v = {}
for line in open(sys.argv[1]):
    name = line.split()[0]
    for k, x in re.findall(r'(\w+)=([0-9.]+)', line):
        v.setdefault(name, {})[k] = float(x)
m, p, vm = v['mlwatch'], v['prometheus'], v['victoria-metrics']
print("ratios: RSS/series mlwatch/prometheus=%.2f mlwatch/vm=%.2f; samples per CPU-s mlwatch/vm=%.2f mlwatch/prometheus=%.2f; restart mlwatch/prometheus=%.2f"
      % (m['bytes_per_series'] / p['bytes_per_series'], m['bytes_per_series'] / vm['bytes_per_series'],
         m['samples_per_cpu_s'] / vm['samples_per_cpu_s'], m['samples_per_cpu_s'] / p['samples_per_cpu_s'],
         m['restart_ms'] / max(p['restart_ms'], 1)))
print("bytes per sample: mlwatch blocks %.3f (whole folder %.2f), prometheus blocks %.3f (whole folder %.2f), victoria-metrics %.3f; mlwatch blocks / vm = %.2f, / prometheus blocks = %.2f"
      % (m['blocks_bytes_per_sample'], m['disk_bytes_per_sample'], p['blocks_bytes_per_sample'], p['disk_bytes_per_sample'],
         vm['disk_bytes_per_sample'], m['blocks_bytes_per_sample'] / vm['disk_bytes_per_sample'],
         m['blocks_bytes_per_sample'] / max(p['blocks_bytes_per_sample'], 1e-9)))
PY
rm -rf "$D"
