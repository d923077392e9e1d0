#!/usr/bin/env bash
# http_under_load.sh - /metrics latency of mlwatch and of Debian's
# prometheus-node-exporter while both are under attack, in one run
# (issue 24, item 8).
#
#   bench/http_under_load.sh [SCRAPES]       (default 300)
#
# Load, the same for both and all at once: 260 slowloris connections to
# each (tests/integration/slow_clients.py: a request line, then a header
# line a second, never the end of the headers; reopened as the server cuts
# them), from five client addresses, and four heavy PromQL range queries in
# a loop against mlwatch (a subquery over 20,000 series at 121 steps; the
# CPUs are shared, so node_exporter feels them too). Measured: SCRAPES
# scrapes of each exporter's /metrics, one after the other, each on a new
# connection, idle and under load; the latency is curl's time_total.
set -euo pipefail
cd "$(dirname "$0")/.."
scrapes=${1:-300}
command -v prometheus-node-exporter >/dev/null || { echo "apt-get install prometheus-node-exporter" >&2; exit 1; }
[ -x build/mlwatch ] || make >/dev/null
work=$(mktemp -d)
cc -O1 -o "$work/client" tests/integration/store_rw_client.c -lsnappy -lcurl

ne_port=19101
mw_port=19231
prometheus-node-exporter --web.listen-address=127.0.0.1:$ne_port >/dev/null 2>&1 &
ne_pid=$!
./build/mlwatch agent --listen 127.0.0.1:$mw_port --log-level error --data-dir "$work/data" \
    --state-dir "$work/state" --disable-collectors gpu &
mw_pid=$!
loaders=()
stop_all() {
    for p in "${loaders[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
    kill $ne_pid $mw_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap stop_all EXIT
for url in http://127.0.0.1:$ne_port/metrics http://127.0.0.1:$mw_port/metrics; do
    for _ in $(seq 100); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
done
now=$(date +%s)
"$work/client" send "http://127.0.0.1:$mw_port/api/v1/write" 20000 70 5000 $(((now - 70) * 1000)) | tail -1 >/dev/null

# latency NAME URL: SCRAPES scrapes; prints "p50 p99 max failed" in ms.
latency() {
    local i out=$work/lat-$1
    : >"$out"
    for i in $(seq "$scrapes"); do
        curl -s -m 30 -o /dev/null -w '%{http_code} %{time_total}\n' "$2" >>"$out" || echo "000 30" >>"$out"
    done
    awk '$1 != 200 {failed++} {print $2 * 1000}' "$out" | sort -n | awk -v n="$scrapes" \
        '{v[NR] = $1} END {i50 = int(n * 0.50 + 0.5); i99 = int(n * 0.99 + 0.5); if (i99 > n) i99 = n;
          printf "%.1f %.1f %.1f", v[i50], v[i99], v[NR]}'
    printf ' %s\n' "$(awk '$1 != 200' "$out" | wc -l)"
}

report() { # PHASE
    local ne mw
    ne=$(latency ne http://127.0.0.1:$ne_port/metrics)
    mw=$(latency mw http://127.0.0.1:$mw_port/metrics)
    # shellcheck disable=SC2086
    printf '%-10s node_exporter p50 %s ms  p99 %s ms  max %s ms  failed %s\n' "$1" $ne
    # shellcheck disable=SC2086
    printf '%-10s mlwatch       p50 %s ms  p99 %s ms  max %s ms  failed %s\n' "$1" $mw
}

report idle

# The load.
for port in $ne_port $mw_port; do
    setsid bash -c "while :; do python3 tests/integration/slow_clients.py $port 260 drip 12 \
        $work/ready-$port-\$\$ $work/rep-$port-\$\$ 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6 \
        2>/dev/null; done" &
    loaders+=($!)
done
for _ in 1 2 3 4; do
    setsid bash -c "while :; do curl -s -o /dev/null --data-urlencode 'query=sum(rate(crash_test[10m:1s]))' \
        --data-urlencode start=$((now - 60)) --data-urlencode end=$now --data-urlencode step=0.5 \
        http://127.0.0.1:$mw_port/api/v1/query_range; done" &
    loaders+=($!)
done
sleep 3 # the slow connections open, the queries start
report "under load"
echo "mlwatch $(./build/mlwatch --version | awk '{print $2}'), node_exporter $(prometheus-node-exporter --version 2>&1 | head -1 | awk '{print $3}'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
