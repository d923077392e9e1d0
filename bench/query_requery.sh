#!/bin/bash
# query_requery.sh DATA_DIR MLWATCH_BIN [BASE_BIN]: the query phase of
# query_compare.sh again, on the stores a run with SAVE_DATA=DATA_DIR kept
# (mlwatch's and VictoriaMetrics'; loading 1M series takes about an hour
# here), so that a new build is measured against VictoriaMetrics and, with
# BASE_BIN, against the build before, on the same data in one run.
# Each server gets its own copy of the stores (DATA_DIR is not changed).
# With BASE_BIN the new build's answers are compared with the base's point
# by point. Prometheus is not part of it: its comparison with mlwatch was
# made by the run that loaded the data. Never a timed test.
set -u
SAVE=${1:?usage: query_requery.sh DATA_DIR MLWATCH_BIN [BASE_BIN]}
MLWATCH=${2:?usage: query_requery.sh DATA_DIR MLWATCH_BIN [BASE_BIN]}
BASE=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-5}
read -r start end nseries <"$SAVE/window" || { echo "no $SAVE/window" >&2; exit 1; }
# shellcheck source=query_lib.sh
source "$here/query_lib.sh"
qc_workdir query-requery
start_mlwatch() { # NAME BIN
    local port
    port=$(free_port)
    cp -a "$SAVE/ml" "$D/$1-data"
    "$2" agent --listen "127.0.0.1:$port" --data-dir "$D/$1-data" --interval 10s \
        --disable-collectors gpu --query-max-samples 500000000 >"$D/$1.log" 2>&1 &
    PIDS+=("$!")
    wait_ready "http://127.0.0.1:$port/-/ready" "$!"
    SERVERS="$SERVERS $1:$!:$port"
}
SERVERS=""
start_mlwatch mlwatch "$MLWATCH"
QC_REF=none
if [ -n "$BASE" ]; then
    start_mlwatch mlbase "$BASE"
    QC_REF=mlbase
fi
VP=$(free_port)
cp -a "$SAVE/vm" "$D/vm"
victoria-metrics -storageDataPath="$D/vm" -httpListenAddr="127.0.0.1:$VP" -search.latencyOffset=0s \
    -search.maxSamplesPerQuery=2000000000 -search.disableCache >"$D/v.log" 2>&1 &
PIDS+=("$!")
wait_ready "http://127.0.0.1:$VP/health" "$!"
SERVERS="$SERVERS vm:$!:$VP"
SERVERS=${SERVERS# }
echo "# $(date -u +%FT%TZ) $(nproc) cores; requery of $SAVE (series=$nseries) window start=$start end=$end step=15 runs=$RUNS"
# A first query of each kind warms every server's caches of the copied
# files alike (the load run's servers had them warm too).
for s in $SERVERS; do
    IFS=: read -r _ _ port <<<"$s"
    for q in "${QUERIES[@]}"; do
        curl -s -o /dev/null "http://127.0.0.1:$port/api/v1/query_range" \
            --data-urlencode "query=$q" -d "start=$start" -d "end=$end" -d step=15
    done
done
qc_run_queries
qc_table
