# shellcheck shell=bash
# rw_lib.sh - helpers of the remote-write integration tests (sourced after
# lib.sh): real receivers from Debian's packages on 127.0.0.1, and queries.

# start_vm DATADIR [PORT]: VictoriaMetrics; sets VM_PID, VM_PORT, VM.
# Exact-duplicate samples (a batch sent again after a restart) are
# deduplicated, as a production VictoriaMetrics would with -dedup.
start_vm() {
    VM_PORT=${2:-$(free_port)}
    victoria-metrics -httpListenAddr "127.0.0.1:$VM_PORT" -storageDataPath "$1" \
        -search.latencyOffset=0s -dedup.minScrapeInterval=1ms -loggerLevel=ERROR \
        >>"$WORK/vm.log" 2>&1 &
    VM_PID=$!
    PIDS+=("$VM_PID")
    VM="http://127.0.0.1:$VM_PORT"
    wait_http "$VM/health" 30
}

# start_prom DATADIR [PORT]: Prometheus with the remote-write receiver on;
# sets PROM_PID, PROM_PORT, PROM.
start_prom() {
    PROM_PORT=${2:-$(free_port)}
    printf 'global:\n  scrape_interval: 1m\n' >"$WORK/prom-empty.yml"
    prometheus --config.file="$WORK/prom-empty.yml" --storage.tsdb.path="$1" \
        --web.listen-address="127.0.0.1:$PROM_PORT" --web.enable-remote-write-receiver \
        >>"$WORK/prometheus.log" 2>&1 &
    PROM_PID=$!
    PIDS+=("$PROM_PID")
    PROM="http://127.0.0.1:$PROM_PORT"
    wait_http "$PROM/-/ready" 60
}

# stop_pid PID: SIGTERM and wait.
stop_pid() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# agent_metric NAME [LABEL_FILTER]: sum of a metric on the agent's /metrics.
agent_metric() {
    curl -s "$AGENT_URL/metrics" | awk -v n="$1" -v f="${2:-}" '
        $1 ~ "^"n"({|$)" && index($0, f) { s += $NF } END { printf "%d\n", s }'
}

drained() { [ "$(agent_metric mlwatch_remote_write_samples_pending)" = 0 ]; }
# wait_drained [SECONDS]: until the agent's queues hold no sample.
wait_drained() {
    WAIT_EVERY=0.2 wait_for "${1:-60}" drained ||
        fail "remote-write queue not drained: $(curl -s "$AGENT_URL/metrics" | grep remote_write_samples_pending)"
}
