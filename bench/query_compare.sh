#!/bin/bash
# query_compare.sh SERIES [ROUNDS] [MLWATCH_BIN]: PromQL range-query latency
# and memory of mlwatch side by side with Prometheus and VictoriaMetrics
# (Debian packages), on the same data, same machine, same run. It is
# ../shared/bench/query_anchor.sh with mlwatch added: one hour of rwload
# data (ROUNDS=240 at 15 s) remote-written into each of the three (mlwatch
# through its agent's /api/v1/write, VictoriaMetrics with its result cache
# off), then four dashboard-shaped range queries (one hour, 15 s step). The
# five runs of each query go round-robin over the three servers, so a
# disturbance on this shared machine hits all three alike; the median of
# curl's time_total is printed (request to last byte, without the start of
# the curl process that the anchor's wall clock includes, ~5-10 ms here:
# that is printed too, as wall_median_ms). Memory: before each query's runs the server's peak RSS is reset
# (/proc/PID/clear_refs 5), after them VmHWM is read; printed are the peak
# during the query and its growth over the RSS before. Also checks that
# mlwatch returns as many series as Prometheus. Prints a table and the
# ratios mlwatch/VM and mlwatch/Prometheus. Never a timed test.
# Needs root for clear_refs (without it, peak is the lifetime VmHWM).
set -u
N=${1:-100000} R=${2:-240}
here=$(cd "$(dirname "$0")" && pwd)
MLWATCH=${3:-$here/../build-qperf/mlwatch}
RWLOAD_SRC=${RWLOAD_SRC:-$here/../../shared/bench/rwload.c}
RUNS=${RUNS:-5}
D=$(mktemp -d /tmp/query-compare-XXXXXX)
RW=$D/rwload
cc -O2 -o "$RW" "$RWLOAD_SRC" -lsnappy -lcurl -lm || exit 1
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
wait_ready() { # URL PID: until it answers; fails when the server died (a port in use)
    until curl -sf -o /dev/null "$1"; do
        kill -0 "$2" 2>/dev/null || { echo "server for $1 exited; see $D/*.log" >&2; exit 1; }
        sleep 0.1
    done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MP=$(free_port) PP=$(free_port) VP=$(free_port)
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/{print $2}' "/proc/$1/status"; }

"$MLWATCH" agent --listen "127.0.0.1:$MP" --data-dir "$D/ml" --interval 10s \
    --disable-collectors gpu --query-max-samples 500000000 >"$D/ml.log" 2>&1 &
ML=$!
PIDS+=("$ML")
prometheus --config.file=/dev/null --storage.tsdb.path="$D/prom" --web.listen-address="127.0.0.1:$PP" \
    --web.enable-remote-write-receiver --query.max-samples=500000000 >"$D/p.log" 2>&1 &
PR=$!
PIDS+=("$PR")
victoria-metrics -storageDataPath="$D/vm" -httpListenAddr="127.0.0.1:$VP" -search.latencyOffset=0s \
    -search.maxSamplesPerQuery=2000000000 -search.disableCache >"$D/v.log" 2>&1 &
VM=$!
PIDS+=("$VM")
wait_ready "http://127.0.0.1:$MP/-/ready" "$ML"
# MLWATCH_BASE=path: a second agent (e.g. the build before a change),
# loaded and queried alongside, so that both builds see the same data and
# the same disturbances; reported as mlbase. MLWATCH_BASE_ARGS: flags for
# it (a build older than --query-max-samples has its 20M default).
SERVERS="mlwatch:$ML:$MP prometheus:$PR:$PP vm:$VM:$VP"
if [ -n "${MLWATCH_BASE:-}" ]; then
    BP=$(free_port)
    "$MLWATCH_BASE" agent --listen "127.0.0.1:$BP" --data-dir "$D/mlb" --interval 10s \
        --disable-collectors gpu ${MLWATCH_BASE_ARGS:-} >"$D/mlb.log" 2>&1 &
    MB=$!
    PIDS+=("$MB")
    wait_ready "http://127.0.0.1:$BP/-/ready" "$MB"
    SERVERS="$SERVERS mlbase:$MB:$BP"
fi
wait_ready "http://127.0.0.1:$PP/-/ready" "$PR"
wait_ready "http://127.0.0.1:$VP/health" "$VM"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(awk '/MemTotal/{print int($2/1048576)}' /proc/meminfo) GiB; series=$N rounds=$R runs=$RUNS"
# The three loads run at once: rwload stamps its samples back from the
# moment it starts, so this gives all three stores the same timestamps
# (one after the other, the later stores would hold newer data and the
# query window would not see the same samples everywhere).
T_LAST=$(date +%s) # rwload's newest samples are stamped (about) now
$RW "http://127.0.0.1:$PP/api/v1/write" "$N" "$R" 10000 15000 >"$D/ing.p" &
L1=$!
$RW "http://127.0.0.1:$VP/api/v1/write" "$N" "$R" 10000 15000 >"$D/ing.v" &
L2=$!
$RW "http://127.0.0.1:$MP/api/v1/write" "$N" "$R" 10000 15000 >"$D/ing.m" &
L3=$!
L4=
if [ -n "${MLWATCH_BASE:-}" ]; then
    $RW "http://127.0.0.1:$BP/api/v1/write" "$N" "$R" 10000 15000 >"$D/ing.b" &
    L4=$!
fi
wait $L1 $L2 $L3 $L4
sed 's/^/prometheus ingest: /' "$D/ing.p"
sed 's/^/vm ingest: /' "$D/ing.v"
sed 's/^/mlwatch ingest: /' "$D/ing.m"
for f in "$D"/ing.?; do
    grep -q 'failed_requests=0 ' "$f" || echo "WARNING: an ingest had failed requests; the stores do not hold the same data"
done
sleep 5
curl -s "http://127.0.0.1:$VP/internal/force_flush" >/dev/null
sleep 2
# The window ends at the newest samples (ingest takes minutes here), so
# that every step of the hour has data.
end=$T_LAST
start=$((end - 3300))
echo "window start=$start end=$end step=15"
echo "rss_MB_after_ingest mlwatch=$(($(rss_kb $ML) / 1024)) prometheus=$(($(rss_kb $PR) / 1024)) vm=$(($(rss_kb $VM) / 1024))"

QUERIES=('sum by (namespace) (rate(container_cpu_seconds_total[5m]))'
    'topk(10, avg_over_time(gpu_power_watts[5m]))'
    'gpu_utilization_ratio{pod="train-7-worker-3"}'
    'sum(gpu_memory_used_bytes) by (instance)')
if [ -n "${EXTRA_QUERY:-}" ]; then QUERIES+=("$EXTRA_QUERY"); fi
: >"$D/results"
qi=0
for q in "${QUERIES[@]}"; do
    qi=$((qi + 1))
    declare -A before=() times=() walls=()
    for s in $SERVERS; do
        IFS=: read -r name pid port <<<"$s"
        before[$name]=$(rss_kb "$pid")
        echo 5 >"/proc/$pid/clear_refs" 2>/dev/null
        times[$name]=""
        walls[$name]=""
    done
    for _ in $(seq "$RUNS"); do
        for s in $SERVERS; do
            IFS=: read -r name pid port <<<"$s"
            t0=$(date +%s%N)
            read -r code tt < <(curl -s -o "$D/$name.json" -w '%{http_code} %{time_total}' \
                "http://127.0.0.1:$port/api/v1/query_range" \
                --data-urlencode "query=$q" -d "start=$start" -d "end=$end" -d step=15)
            walls[$name]="${walls[$name]} $((($(date +%s%N) - t0) / 1000000))"
            times[$name]="${times[$name]} $(awk -v t="$tt" 'BEGIN{printf "%.1f", t * 1000}')"
            [ "$code" = 200 ] || echo "$name HTTP $code: $(head -c 300 "$D/$name.json")"
        done
    done
    for s in $SERVERS; do
        IFS=: read -r name pid port <<<"$s"
        # shellcheck disable=SC2086 # the runs' times, split into lines
        med=$(printf '%s\n' ${times[$name]} | sort -g | sed -n "$(((RUNS + 1) / 2))p")
        # shellcheck disable=SC2086
        wmed=$(printf '%s\n' ${walls[$name]} | sort -n | sed -n "$(((RUNS + 1) / 2))p")
        hwm=$(hwm_kb "$pid")
        nser=$(grep -o '"metric"' "$D/$name.json" | wc -l)
        runs=$(echo "${times[$name]}" | sed 's/^ //' | tr ' ' ,)
        echo "q$qi $name median_ms=$med wall_median_ms=$wmed runs_ms=$runs series_out=$nser peak_MB=$((hwm / 1024)) growth_MB=$(((hwm - ${before[$name]}) / 1024))" |
            tee -a "$D/results"
    done
    # Beyond the series count: mlwatch's answer against Prometheus's, label
    # sets and every point (values within 1e-9 relative).
    for mj in mlwatch ${MLWATCH_BASE:+mlbase}; do
    python3 - "$D/$mj.json" "$D/prometheus.json" <<'PY' | sed "s/^/q$qi $mj /"
import json, math, sys
def load(f):
    r = json.load(open(f))["data"]["result"]
    return {tuple(sorted(s["metric"].items())): s["values"] for s in r}
m, p = load(sys.argv[1]), load(sys.argv[2])
bad = len(set(m) ^ set(p))
for k in set(m) & set(p):
    a, b = m[k], p[k]
    if [x[0] for x in a] != [x[0] for x in b]:
        bad += 1; continue
    for (_, x), (_, y) in zip(a, b):
        x, y = float(x), float(y)
        if not (x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9 * max(abs(x), abs(y))):
            bad += 1; break
print("compare_with_prometheus series=%d differing=%d" % (len(m), bad))
PY
    done
    echo "q$qi = $q" | tee -a "$D/results"
done

python3 - "$D/results" <<'PY'
import re, sys
rows, names = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r'(q\d+) = (.*)', line)
    if m:
        names[m.group(1)] = m.group(2).strip(); continue
    f = line.split()
    if f[1] == 'mlbase': print("%s mlbase median_ms=%s" % (f[0], re.search(r'median_ms=([0-9.]+)', line).group(1)))
    rows.setdefault(f[0], {})[f[1]] = dict(re.findall(r'(\w+)=(-?[0-9.]+)', line))
print()
print("| query | mlwatch ms | Prometheus ms | VM ms | mlwatch/VM | mlwatch/Prom | peak MB (growth) mlwatch / Prom / VM | series mlwatch/Prom |")
print("|---|---:|---:|---:|---:|---:|---|---|")
for q in sorted(rows):
    r = rows[q]; m, p, v = r['mlwatch'], r['prometheus'], r['vm']
    ms = lambda x: float(x['median_ms'])
    mem = " / ".join("%s (%s)" % (x['peak_MB'], x['growth_MB']) for x in (m, p, v))
    same = "same" if m['series_out'] == p['series_out'] else "DIFFERENT"
    print("| `%s` | %.1f | %.1f | %.1f | %.2f | %.2f | %s | %s %s/%s |" % (
        names[q], ms(m), ms(p), ms(v), ms(m) / max(ms(v), 0.1), ms(m) / max(ms(p), 0.1), mem, same,
        m['series_out'], p['series_out']))
PY
