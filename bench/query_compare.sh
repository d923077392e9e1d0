#!/bin/bash
# query_compare.sh SERIES [ROUNDS] [MLWATCH_BIN]: PromQL range-query latency
# and memory of mlwatch side by side with Prometheus and VictoriaMetrics
# (Debian packages), on the same data, same machine, same run. It is
# ../shared/bench/query_anchor.sh with mlwatch added: one hour of rwload
# data (ROUNDS=240 at 15 s) remote-written into each of the three (mlwatch
# through its agent's /api/v1/write, VictoriaMetrics with its result cache
# off), then four dashboard-shaped range queries (one hour, 15 s step). The
# five runs of each query go round-robin over the three servers, so a
# disturbance on this shared machine hits all three alike (the query phase,
# its measures and the comparison of mlwatch's answers with Prometheus'
# point by point are in query_lib.sh). Prints a table and the ratios
# mlwatch/VM and mlwatch/Prometheus. Never a timed test.
# Needs root for clear_refs (without it, peak is the lifetime VmHWM).
set -u
N=${1:-100000} R=${2:-240}
here=$(cd "$(dirname "$0")" && pwd)
MLWATCH=${3:-$here/../build-qperf/mlwatch}
RWLOAD_SRC=${RWLOAD_SRC:-$here/../../shared/bench/rwload.c}
RUNS=${RUNS:-5}
# shellcheck source=query_lib.sh
source "$here/query_lib.sh"
qc_workdir query-compare
RW=$D/rwload
cc -O2 -o "$RW" "$RWLOAD_SRC" -lsnappy -lcurl -lm || exit 1
MP=$(free_port) PP=$(free_port) VP=$(free_port)

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
    # A base that knows --query-max-samples gets the same limit as mlwatch
    # (left at its 20M default, every heavy 1M-series query was refused,
    # and its "latency" was that of the refusal: seen on 2026-12-04).
    if [ -z "${MLWATCH_BASE_ARGS+x}" ] && "$MLWATCH_BASE" help 2>&1 | grep -q -- '--query-max-samples'; then
        MLWATCH_BASE_ARGS="--query-max-samples 500000000"
    fi
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
T_LAST=$(date +%s) # rwload's newest samples are stamped with it, in every store
# (each rwload is given it: left to their own clocks, a load started in the
# next second stamped every sample 1 s later, and its store's answers
# differed from Prometheus' everywhere; seen on the base build at 100k)
$RW "http://127.0.0.1:$PP/api/v1/write" "$N" "$R" 10000 15000 "$((T_LAST * 1000))" >"$D/ing.p" &
L1=$!
$RW "http://127.0.0.1:$VP/api/v1/write" "$N" "$R" 10000 15000 "$((T_LAST * 1000))" >"$D/ing.v" &
L2=$!
$RW "http://127.0.0.1:$MP/api/v1/write" "$N" "$R" 10000 15000 "$((T_LAST * 1000))" >"$D/ing.m" &
L3=$!
L4=
if [ -n "${MLWATCH_BASE:-}" ]; then
    $RW "http://127.0.0.1:$BP/api/v1/write" "$N" "$R" 10000 15000 "$((T_LAST * 1000))" >"$D/ing.b" &
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
# SAVE_DATA=dir: keep copies of mlwatch's and VictoriaMetrics' stores and
# the window, for query_requery.sh (a 1M-series load takes an hour here).
if [ -n "${SAVE_DATA:-}" ]; then
    mkdir -p "$SAVE_DATA"
    curl -s -XPOST "http://127.0.0.1:$MP/api/v1/store/snapshot" >/dev/null
    snap=$(curl -s "http://127.0.0.1:$VP/snapshot/create" | python3 -c 'import json, sys; print(json.load(sys.stdin)["snapshot"])')
    cp -aL "$D/vm/snapshots/$snap" "$SAVE_DATA/vm" && cp -a "$D/ml" "$SAVE_DATA/ml" &&
        echo "$start $end $N" >"$SAVE_DATA/window" && echo "stores saved in $SAVE_DATA"
fi
# MLWATCH_COMPACT=1: compact mlwatch's store (and the base's) before the
# queries, so that they read blocks rather than the head (the block codec's
# decoding is then what is measured).
if [ -n "${MLWATCH_COMPACT:-}" ]; then
    for port in $MP ${BP:-}; do
        curl -s -XPOST "http://127.0.0.1:$port/api/v1/store/compact" >/dev/null
    done
    echo "mlwatch compacted: $("$MLWATCH" store inspect "$D/ml" | grep ' blocks (')"
fi
echo "rss_MB_after_ingest mlwatch=$(($(rss_kb $ML) / 1024)) prometheus=$(($(rss_kb $PR) / 1024)) vm=$(($(rss_kb $VM) / 1024))"

QC_REF=prometheus
qc_run_queries
qc_table
