#!/usr/bin/env bash
# remote_write_outage.sh - both receivers (Debian's Prometheus and
# VictoriaMetrics) are stopped for RW_OUTAGE_S seconds (default 20; the
# issue's two minutes: RW_OUTAGE_S=120) while the agent keeps collecting,
# and the agent itself is restarted in the middle of the outage. Once the
# receivers are back and the queue has drained, every sample the agent
# generated (what its own store holds) must be on each receiver with its
# value, nothing dropped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh test)"
command -v victoria-metrics >/dev/null || fail "victoria-metrics is not installed (scripts/install-deps.sh test)"
outage=${RW_OUTAGE_S:-20}
interval_ms=200

start_prom "$WORK/prom"
start_vm "$WORK/vm"
root=$(fixture_copy rapl-cpufreq)
cat >"$WORK/mlwatch.yml" <<YAML
external_labels: {node: outage}
remote_write:
YAML
for r in "$PROM" "$VM"; do
    cat >>"$WORK/mlwatch.yml" <<YAML
  - url: $r/api/v1/write
    queue_config: {batch_send_deadline: 200ms, max_backoff: 1s, capacity: 64MiB}
    write_relabel_configs:
      - {source_labels: [__name__], regex: 'mlwatch_load1|mlwatch_cpu_seconds_total', action: keep}
YAML
done
agent_args=(--root "$root" --interval "${interval_ms}ms" --data-dir "$WORK/data" --config "$WORK/mlwatch.yml")
start_agent "${agent_args[@]}"
sleep 2
wait_drained 30

stop_pid "$PROM_PID"
stop_pid "$VM_PID"
sleep $((outage / 2))
# The agent restarts while the receivers are down: its queue must survive.
pending_before=$(agent_metric mlwatch_remote_write_samples_pending)
[ "$pending_before" -gt 0 ] || fail "nothing queued during the outage"
stop_pid "$AGENT_PID"
start_agent "${agent_args[@]}"
sleep $((outage - outage / 2))
[ "$(agent_metric mlwatch_remote_write_samples_pending)" -gt 0 ] || fail "queue lost at restart"
ok
start_prom "$WORK/prom" "$PROM_PORT"
start_vm "$WORK/vm" "$VM_PORT"
wait_drained 90
highest=$(curl -s "$AGENT_URL/metrics" | awk '/^mlwatch_remote_write_highest_sent_timestamp_seconds/ {print $NF}' | sort -n | head -1)
expect_eq "samples dropped" 0 "$(agent_metric mlwatch_remote_write_samples_dropped_total 'reason="queue_full"')"
expect_eq "samples failed" 0 "$(agent_metric mlwatch_remote_write_samples_failed_total)"
[ "$(agent_metric mlwatch_remote_write_samples_retried_total)" -gt 0 ] || fail "no retries counted"
sleep 1

# Every sample the agent generated up to the newest one both receivers
# acknowledged is on each receiver, with its value. The agent's own store
# holds what it generated (a late cycle on a loaded machine is a gap in
# time, not a lost sample, so gaps alone would not say).
curl -s --get --data-urlencode 'query={__name__=~"mlwatch_load1|mlwatch_cpu_seconds_total"}[15m]' \
    --data-urlencode "time=$highest" "$AGENT_URL/api/v1/query" >"$WORK/generated.json"
for r in "$PROM" "$VM"; do
    # node: the agent's own label (t1, start_agent's), which an external
    # label of that name does not replace (as in Prometheus).
    curl -s --get --data-urlencode "query={node=\"t1\"}[15m]" --data-urlencode "time=$highest" \
        "$r/api/v1/query" >"$WORK/samples.json"
    python3 - "$WORK/generated.json" "$WORK/samples.json" "$r" <<'PY' || fail "samples missing on $r"
import json, sys
def series(path, drop):
    out = {}
    for r in json.load(open(path))['data']['result']:
        key = tuple(sorted((k, v) for k, v in r['metric'].items() if k != drop))
        out[key] = {float(t): v for t, v in r['values']}
    return out
gen = series(sys.argv[1], 'node')
got = series(sys.argv[2], 'node')
load = [k for k in gen if ('__name__', 'mlwatch_load1') in k]
cpu = [k for k in gen if ('__name__', 'mlwatch_cpu_seconds_total') in k]
if len(load) != 1 or len(cpu) < 8:
    sys.exit('generated: %d load1 and %d cpu series' % (len(load), len(cpu)))
missing = wrong = total = 0
for k, samples in gen.items():
    have = got.get(k, {})
    for t, v in samples.items():
        total += 1
        if t not in have:
            missing += 1
        elif float(have[t]) != float(v):
            wrong += 1
print('%s: %d series, %d samples generated, %d missing, %d with another value'
      % (sys.argv[3], len(gen), total, missing, wrong))
if missing or wrong or total < 100:
    sys.exit('lost samples')
PY
    ok
done
done_ok
