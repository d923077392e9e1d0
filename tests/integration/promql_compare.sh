#!/usr/bin/env bash
# promql_compare.sh - the same data remote-written into a real Prometheus
# (Debian's, --web.enable-remote-write-receiver) and into the agent's store;
# every query of promql/corpus.txt runs against both (instant at several
# times, range with two steps) and the results must agree: same result
# type, same label sets, same timestamps, values within 1e-9 relative.
source "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh test)"
HERE="$MLWATCH_SRC/tests/integration"

LOADER="$WORK/promql_load"
cc -O1 -o "$LOADER" "$HERE/promql_load.c" -lsnappy -lcurl || fail "cannot compile the loader"

# Data from 35 minutes ago on a minute boundary: inside Prometheus' head.
now=$(date +%s)
T0=$(((now - 2100) / 60 * 60))
python3 "$HERE/promql/gen_data.py" $((T0 * 1000)) >"$WORK/data.txt"

prom_port=$(free_port)
echo "global: {}" >"$WORK/prometheus.yml"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom-data" \
    --web.listen-address="127.0.0.1:$prom_port" --web.enable-remote-write-receiver \
    >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
PROM="http://127.0.0.1:$prom_port"

# Debian's Prometheus is 2.42: its windows include their start.
start_agent --interval 10s --disable-collectors gpu --query-closed-windows
wait_http "$PROM/-/ready" 60

expect_eq "remote write into Prometheus" 204 "$("$LOADER" "$PROM/api/v1/write" "$WORK/data.txt")"
expect_eq "remote write into mlwatch" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/data.txt")"

python3 "$HERE/promql/compare.py" "$PROM" "$AGENT_URL" "$HERE/promql/corpus.txt" "$T0" \
    >"$WORK/compare.out" || {
    cat "$WORK/compare.out" >&2
    fail "mlwatch and Prometheus disagree"
}
tail -1 "$WORK/compare.out"
ok
done_ok
