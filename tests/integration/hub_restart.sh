#!/usr/bin/env bash
# hub_restart.sh - a hub killed with SIGKILL while two agents ship to it
# (issue 23, item 7): the agents keep collecting and queueing, the hub
# comes back on the same data folder and port, the queues drain, and every
# sample each agent generated (what its own store holds) up to the newest
# one it sent is at the hub with its value: none of what the hub had
# acknowledged before the kill is lost (it acknowledges only once a request
# is in its WAL), none of what it had not is dropped (the agents resend).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"

hport=$(free_port)
HUB=http://127.0.0.1:$hport
start_hub() {
    : >"$WORK/hub.log"
    NODE_NAME=hub "$MLWATCH_BIN" hub --listen "127.0.0.1:$hport" --data-dir "$WORK/hub" \
        --state-dir "$WORK/hub" --interval 1s >>"$WORK/hub.log" 2>&1 &
    HUB_PID=$!
    PIDS+=("$HUB_PID")
    wait_http "$HUB/-/ready"
}
start_hub
cat >"$WORK/ship.yml" <<YAML
remote_write:
  - url: $HUB/api/v1/write
    name: hub
    queue_config: {batch_send_deadline: 100ms, min_backoff: 20ms, max_backoff: 300ms}
    write_relabel_configs:
      - {source_labels: [__name__], regex: 'mlwatch_(load1|load5|cpu_seconds_total|memory_.*)', action: keep}
YAML
declare -A URL
for n in n1 n2; do
    root=$(fixture_copy "$([ $n = n1 ] && echo rapl-cpufreq || echo bare-vm)")
    NODE_NAME=$n start_agent --root "$root" --interval 200ms --config "$WORK/ship.yml" \
        --data-dir "$WORK/data-$n" --state-dir "$WORK/state-$n"
    URL[$n]=$AGENT_URL
    cp "$WORK/agent.log" "$WORK/agent-$n.log"
done
hub_count() { curl -s --get --data-urlencode "query=count_over_time(mlwatch_load1{node=\"$1\"}[10m])" "$HUB/api/v1/query" | jq -r '.data.result[0].value[1] // 0'; }
shipping() { [ "$(hub_count n1)" -ge 5 ] && [ "$(hub_count n2)" -ge 5 ]; }
WAIT_EVERY=0.2 wait_for 20 shipping || fail "the agents do not ship to the hub"
ok

# SIGKILL mid-run: no clean stop, no last WAL sync of its own.
kill -KILL "$HUB_PID"
wait "$HUB_PID" 2>/dev/null || true
sleep 3
for n in n1 n2; do
    AGENT_URL=${URL[$n]}
    [ "$(agent_metric mlwatch_remote_write_samples_pending)" -gt 0 ] || fail "$n queued nothing while the hub was down"
done
ok
start_hub
grep -q 'info store: opened .* WAL records replayed' "$WORK/hub.log" || fail "the hub did not replay its WAL: $(head -5 "$WORK/hub.log")"
ok
sleep 2
for n in n1 n2; do
    AGENT_URL=${URL[$n]}
    wait_drained 30
    expect_eq "$n: samples dropped (queue full)" 0 "$(agent_metric mlwatch_remote_write_samples_dropped_total 'reason="queue_full"')"
    expect_eq "$n: samples failed" 0 "$(agent_metric mlwatch_remote_write_samples_failed_total)"
    [ "$(agent_metric mlwatch_remote_write_samples_retried_total)" -gt 0 ] || fail "$n: no retries counted"
    ok
done

# Sample by sample: each agent's store against the hub, up to the newest
# timestamp the agent has sent.
for n in n1 n2; do
    AGENT_URL=${URL[$n]}
    highest=$(curl -s "$AGENT_URL/metrics" | awk '/^mlwatch_remote_write_highest_sent_timestamp_seconds/ {print $NF}')
    q='{__name__=~"mlwatch_(load1|load5|cpu_seconds_total|memory_.*)"}[10m]'
    curl -s --get --data-urlencode "query=$q" --data-urlencode "time=$highest" "$AGENT_URL/api/v1/query" >"$WORK/gen-$n.json"
    curl -s --get --data-urlencode "query={node=\"$n\",${q#\{}" --data-urlencode "time=$highest" "$HUB/api/v1/query" >"$WORK/hub-$n.json"
    python3 - "$WORK/gen-$n.json" "$WORK/hub-$n.json" "$n" <<'PY' || fail "samples of $n missing at the hub"
import json, sys
def series(path):
    out = {}
    for r in json.load(open(path))['data']['result']:
        key = tuple(sorted(r['metric'].items()))
        out[key] = {float(t): v for t, v in r['values']}
    return out
gen, got = series(sys.argv[1]), series(sys.argv[2])
missing = wrong = total = 0
for k, samples in gen.items():
    have = got.get(k, {})
    for t, v in samples.items():
        total += 1
        if t not in have:
            missing += 1
        elif float(have[t]) != float(v):
            wrong += 1
extra = sum(len(v) for v in got.values()) - (total - missing)
print('%s: %d series, %d samples generated, %d at the hub, %d missing, %d with another value, %d the agent does not have'
      % (sys.argv[3], len(gen), total, sum(len(v) for v in got.values()), missing, wrong, extra))
if missing or wrong or extra or total < 200 or len(gen) != len(got):
    sys.exit('lost samples')
PY
    ok
done
done_ok
