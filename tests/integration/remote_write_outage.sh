#!/usr/bin/env bash
# remote_write_outage.sh - both receivers (Debian's Prometheus and
# VictoriaMetrics) are stopped for RW_OUTAGE_S seconds (default 20; the
# issue's two minutes: RW_OUTAGE_S=120) while the agent keeps collecting,
# and the agent itself is restarted in the middle of the outage. Once the
# receivers are back and the queue has drained, every sample the agent
# generated must be on each receiver: one sample per cycle, no gap but the
# agent's own restart, nothing dropped.
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

# Every cycle up to the newest sample both receivers acknowledged: the
# load1 series has one sample per interval; the only longer gap is the
# agent's restart; every cpu series has as many samples as load1.
for r in "$PROM" "$VM"; do
    curl -s --get --data-urlencode "query={node=\"outage\"}[15m]" --data-urlencode "time=$highest" \
        "$r/api/v1/query" >"$WORK/samples.json"
    python3 - "$WORK/samples.json" "$interval_ms" "$r" <<'PY' || fail "samples missing on $r"
import json, sys
res = json.load(open(sys.argv[1]))['data']['result']
iv = int(sys.argv[2]) / 1000.0
load = [r for r in res if r['metric']['__name__'] == 'mlwatch_load1']
assert len(load) == 1, 'load1 series: %d' % len(load)
ts = [float(v[0]) for v in load[0]['values']]
gaps = [b - a for a, b in zip(ts, ts[1:])]
long_gaps = [g for g in gaps if g > 1.5 * iv]
bad = [g for g in gaps if g < 0.5 * iv]
print('%s: %d samples over %.1f s, gaps > 1.5 interval: %s' % (sys.argv[3], len(ts), ts[-1] - ts[0], long_gaps))
if len(long_gaps) > 1 or bad or (long_gaps and long_gaps[0] > 10):
    sys.exit('lost samples: gaps %s' % (long_gaps + bad))
cpu = [r for r in res if r['metric']['__name__'] == 'mlwatch_cpu_seconds_total']
counts = {len(r['values']) for r in cpu}
if len(cpu) < 8 or counts != {len(ts)}:
    sys.exit('cpu series: %d, sample counts %s, load1 %d' % (len(cpu), counts, len(ts)))
PY
    ok
done
done_ok
