#!/usr/bin/env bash
# staleness.sh - a container that ends stops being counted at once, on the
# node and past it. An agent on a copy of the k8s-v2-systemd fixture ships
# (remote write) to `mlwatch hub`, to Debian's Prometheus and to Debian's
# VictoriaMetrics. Pod debug-shell (two containers, 13 series each but the
# energy totals, which outlive a workload by design) is deleted from the
# cgroup tree; from the next round on, the agent's own store and all three
# receivers answer `count({pod="debug-shell"})` with only the two energy
# totals, because the agent wrote a staleness marker (StaleNaN) for each of
# the 24 other series, as a Prometheus scrape does. Without the markers
# every receiver kept showing the pod for the 5-minute lookback (the
# Cluster page counted an ended job's GPU as allocated).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh test)"
command -v victoria-metrics >/dev/null || fail "victoria-metrics is not installed (scripts/install-deps.sh test)"

start_prom "$WORK/prom"
start_vm "$WORK/vm"
hport=$(free_port)
HUB=http://127.0.0.1:$hport
NODE_NAME=hub "$MLWATCH_BIN" hub --listen "127.0.0.1:$hport" --data-dir "$WORK/hub" \
    --interval 1s >"$WORK/hub.log" 2>&1 &
PIDS+=($!)
wait_http "$HUB/-/ready"

root=$(fixture_copy k8s-v2-systemd)
{
    echo "remote_write:"
    for r in "hub $HUB" "prom $PROM" "vm $VM"; do
        set -- $r
        printf '  - url: %s/api/v1/write\n    name: %s\n' "$2" "$1"
        printf '    queue_config: {batch_send_deadline: 100ms}\n'
    done
} >"$WORK/ship.yml"
NODE_NAME=n1 start_agent --root "$root" --interval 500ms --nvml-library none --config "$WORK/ship.yml"

# count(SELECTOR) at the newest time each backend has the pod's data for.
count_at() { # URL SELECTOR
    curl -s --get --data-urlencode "query=count by (__name__) ($2)" "$1/api/v1/query" |
        jq -r '[.data.result[] | "\(.metric.__name__)=\(.value[1])"] | sort | join(" ")'
}
ALL="mlwatch_container_cpu_seconds_total=2 mlwatch_container_energy_joules_total=2 mlwatch_container_info=2 mlwatch_container_memory_rss_bytes=2 mlwatch_container_memory_usage_bytes=2 mlwatch_container_memory_working_set_bytes=2 mlwatch_container_pressure_stalled_seconds_total=6 mlwatch_container_pressure_waiting_seconds_total=6 mlwatch_container_processes=2"
ENERGY="mlwatch_container_energy_joules_total=2"
declare -A URLS=([agent]=$AGENT_URL [hub]=$HUB [prometheus]=$PROM [victoriametrics]=$VM)
sel='{pod="debug-shell",node="n1"}'
has_all() { for b in "${!URLS[@]}"; do [ "$(count_at "${URLS[$b]}" "$sel")" = "$ALL" ] || return 1; done; }
WAIT_EVERY=0.3 wait_for 30 has_all || true
for b in agent hub prometheus victoriametrics; do
    expect_eq "$b: the running pod's series" "$ALL" "$(count_at "${URLS[$b]}" "$sel")"
done
expect_eq "no markers while nothing ended" 0 "$(agent_metric mlwatch_remote_write_staleness_markers_total)"

rm -rf "$root/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podaaaaaaaa_0000_4000_8000_000000000003.slice"
# Two rounds for the agent to notice; then the queues drain.
sleep 1.2
wait_drained 30
ended() { for b in "${!URLS[@]}"; do [ "$(count_at "${URLS[$b]}" "$sel")" = "$ENERGY" ] || return 1; done; }
WAIT_EVERY=0.3 wait_for 10 ended || true
for b in agent hub prometheus victoriametrics; do
    expect_eq "$b: the ended pod's series (only its energy totals stay)" "$ENERGY" "$(count_at "${URLS[$b]}" "$sel")"
done
# 24 series ended, for each of the three endpoints, once.
expect_eq "markers sent (3 endpoints x 24 series)" 72 \
    "$(agent_metric mlwatch_remote_write_staleness_markers_total)"
sleep 1.2
expect_eq "and no more after the next rounds" 72 \
    "$(agent_metric mlwatch_remote_write_staleness_markers_total)"
# The other pods are untouched: still all their containers on every backend.
for b in agent hub prometheus victoriametrics; do
    expect_eq "$b: the other pods' containers" 12 \
        "$(curl -s --get --data-urlencode 'query=count(mlwatch_container_info{node="n1"})' "${URLS[$b]}/api/v1/query" | jq -r '.data.result[0].value[1]')"
done
# The ended series' samples before the end are all still there (a marker
# ends a series; it deletes nothing).
expect_eq "hub: the pod's CPU samples kept" 2 \
    "$(curl -s --get --data-urlencode 'query=count(count_over_time(mlwatch_container_cpu_seconds_total{pod="debug-shell"}[5m]) > 2)' "$HUB/api/v1/query" | jq -r '.data.result[0].value[1]')"
done_ok
