#!/usr/bin/env bash
# rules_agent.sh - the rule evaluator in the real agent: `for` honoured to
# the interval (the last pending and the first firing ALERTS sample are
# `for` - 1 interval and `for` after activeAt); kill -9 in the middle of a
# `for` and a restart neither lose nor reset it (activeAt moves by the time
# the agent was down, as Prometheus restores it from ALERTS_FOR_STATE) and
# a firing alert is firing again at once; a group over its limit fails with
# Prometheus's message, health err and a counted failure; a broken rule
# file on POST /-/reload and on SIGHUP keeps the rules in force with one
# exact error line each; a fixed file is then loaded, the pending state
# kept; /api/v1/rules filters and /api/v1/alerts exact bodies.
source "$(dirname "$0")/lib.sh"

RULES=$WORK/rules.yml
write_rules() { # EXTRA_RULE_YAML
    cat >"$RULES" <<EOF
groups:
  - name: agent
    interval: 1s
    rules:
      - record: agent:one
        expr: vector(1)
      - alert: ForFour
        expr: vector(1)
        for: 4s
      - alert: ForLong
        expr: vector(1)
        for: 40s
$1
  - name: limited
    interval: 1s
    limit: 1
    rules:
      - alert: TwoSeries
        expr: label_replace(vector(1), "i", "1", "", "") or label_replace(vector(1), "i", "2", "", "")
EOF
}
write_rules ""
ARGS=(--interval 1s --disable-collectors gpu --shipped-rules off --rule-file "$RULES")
start_agent "${ARGS[@]}"

# Raw samples of a selector over the last 5 minutes: "t_ms value labels" lines.
samples() {
    curl -s "$AGENT_URL/api/v1/query" --data-urlencode "query=$1[5m]" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["data"]["result"]:
    m = s["metric"]
    for t, v in s["values"]:
        print(round(t * 1000), v, m.get("alertstate", ""))' | sort -n
}
active_at_ms() { # ALERTNAME: activeAt of its alert in /api/v1/alerts, in ms
    curl -s "$AGENT_URL/api/v1/alerts" | python3 -c '
import json, sys, datetime
for a in json.load(sys.stdin)["data"]["alerts"]:
    if a["labels"]["alertname"] == sys.argv[1]:
        # with or without a fraction of a second (RFC 3339, zeros trimmed)
        t = datetime.datetime.fromisoformat(a["activeAt"].replace("Z", "+00:00"))
        print(round(t.timestamp() * 1000))' "$1"
}
firing() { samples "ALERTS{alertname=\"$1\",alertstate=\"firing\"}" | grep -q .; }

# --- `for` to the interval ---
wait_for 20 firing ForFour || fail "ForFour never fired: $(curl -s "$AGENT_URL/api/v1/alerts")"
at=$(active_at_ms ForFour)
last_pending=$(samples 'ALERTS{alertname="ForFour",alertstate="pending"}' | tail -1 | cut -d' ' -f1)
first_firing=$(samples 'ALERTS{alertname="ForFour",alertstate="firing"}' | head -1 | cut -d' ' -f1)
expect_eq "last pending sample after activeAt (ms)" 3000 $((last_pending - at))
expect_eq "first firing sample after activeAt (ms)" 4000 $((first_firing - at))
expect_eq "ALERTS_FOR_STATE is activeAt in seconds" "$((at / 1000))" \
    "$(samples 'ALERTS_FOR_STATE{alertname="ForFour"}' | tail -1 | cut -d' ' -f2)"

# --- limit ---
body=$(curl -s "$AGENT_URL/api/v1/rules?rule_group[]=limited" |
    sed -E -e 's/"(lastEvaluation|activeAt)":"[^"]*"/"\1":"T"/g' -e 's/"evaluationTime":[0-9.e+-]*/"evaluationTime":0/g')
expect_eq "group over its limit" '{"status":"success","data":{"groups":[{"name":"limited","file":"'"$RULES"'","rules":[{"state":"inactive","name":"TwoSeries","query":"label_replace(vector(1), \"i\", \"1\", \"\", \"\") or label_replace(vector(1), \"i\", \"2\", \"\", \"\")","duration":0,"keepFiringFor":0,"labels":{},"annotations":{},"alerts":[],"health":"err","lastError":"exceeded limit of 1 with 2 alerts","evaluationTime":0,"lastEvaluation":"T","type":"alerting"}],"interval":1,"limit":1,"evaluationTime":0,"lastEvaluation":"T"}]}}' "$body"
failures=$(curl -s "$AGENT_URL/metrics" | sed -n 's/^mlwatch_rule_evaluation_failures_total{rule_group="limited",file="[^"]*",node="t1"} \([0-9]*\)$/\1/p')
[ "${failures:-0}" -ge 1 ] || fail "failures of the limited group not counted: '$failures'"
ok

# --- filters and exact bodies ---
blank() { sed -E -e 's/"(lastEvaluation|activeAt)":"[^"]*"/"\1":"T"/g' -e 's/"evaluationTime":[0-9.e+-]*/"evaluationTime":0/g'; }
expect_eq "rule_name[] and type=record" '{"status":"success","data":{"groups":[{"name":"agent","file":"'"$RULES"'","rules":[{"name":"agent:one","query":"vector(1)","health":"ok","evaluationTime":0,"lastEvaluation":"T","type":"recording"}],"interval":1,"limit":0,"evaluationTime":0,"lastEvaluation":"T"}]}}' \
    "$(curl -s "$AGENT_URL/api/v1/rules?type=record&rule_name[]=agent:one&rule_name[]=ForFour" | blank)"
expect_eq "no group of that name" '{"status":"success","data":{"groups":[]}}' \
    "$(curl -s "$AGENT_URL/api/v1/rules?rule_group[]=nope")"
expect_eq "alerts" '{"status":"success","data":{"alerts":[{"labels":{"alertname":"ForFour"},"annotations":{},"state":"firing","activeAt":"T","value":"1e+00"},{"labels":{"alertname":"ForLong"},"annotations":{},"state":"pending","activeAt":"T","value":"1e+00"}]}}' \
    "$(curl -s "$AGENT_URL/api/v1/alerts" | blank)"

# --- kill -9 in the middle of ForLong's 40 s ---
long_before=$(active_at_ms ForLong)
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
sleep 2 # down for a while: activeAt must move by as much
start_agent "${ARGS[@]}"
restart_ms=$(date +%s%3N)
after() { samples 'ALERTS_FOR_STATE{alertname="ForLong"}' | awk -v r="$restart_ms" '$1 > r - 1000' | grep -q .; }
wait_for 20 after || fail "no ALERTS_FOR_STATE after the restart"
# The stored series: the last sample before the gap (when the agent went
# down) and the first after (one interval after the restoring evaluation).
read -r down_ms v_old first_ms v_new < <(samples 'ALERTS_FOR_STATE{alertname="ForLong"}' |
    awk 'p && $1 - pt > 1500 { print pt, pv, $1, $2; exit } { p = 1; pt = $1; pv = $2 }')
[ -n "$first_ms" ] || fail "no gap in ALERTS_FOR_STATE: $(samples 'ALERTS_FOR_STATE{alertname="ForLong"}')"
expect_eq "activeAt before the kill" "$((long_before / 1000))" "$v_old"
restore_ms=$((first_ms - 1000))
# Prometheus's restoration: activeAt + (restore time - down time), down
# time in whole seconds.
expect_eq "activeAt moved by the time down" \
    "$(((long_before / 1000 * 1000 + restore_ms - down_ms / 1000 * 1000) / 1000))" "$v_new"
[ "$v_new" -lt $((restore_ms / 1000)) ] || fail "ForLong's for was reset: activeAt $v_new"
expect_eq "ForLong still pending" pending \
    "$(curl -s "$AGENT_URL/api/v1/alerts" | python3 -c 'import json,sys; print([a["state"] for a in json.load(sys.stdin)["data"]["alerts"] if a["labels"]["alertname"]=="ForLong"][0])')"
# ForFour was firing: its first ALERTS sample after the restart is firing.
expect_eq "ForFour fires again at once" firing \
    "$(samples 'ALERTS{alertname="ForFour"}' | awk -v f="$first_ms" '$1 >= f - 1000 { print $3; exit }')"

# --- a broken file keeps the rules in force ---
sed -i 's/for: 4s/for: 4x/' "$RULES"
code=$(curl -s -o "$WORK/reload.txt" -w '%{http_code}' -X POST "$AGENT_URL/-/reload")
expect_eq "reload of a broken file" 500 "$code"
expect_eq "reload message" "failed to reload rules: $RULES:9:14: for: not a valid duration string: \"4x\"" \
    "$(cat "$WORK/reload.txt")"
kill -HUP "$AGENT_PID"
line="error rules: reload failed, the previous rules stay in force: $RULES:9:14: for: not a valid duration string: \"4x\""
two_lines() { [ "$(grep -c -F "$line" "$WORK/agent.log")" = 2 ]; }
wait_for 10 two_lines || fail "expected the error line twice (POST, SIGHUP): $(grep rules "$WORK/agent.log")"
exited "$AGENT_PID" && fail "SIGHUP stopped the agent"
expect_eq "old rules in force" "agent:one ForFour ForLong TwoSeries" \
    "$(curl -s "$AGENT_URL/api/v1/rules" | python3 -c 'import json,sys; print(" ".join(r["name"] for g in json.load(sys.stdin)["data"]["groups"] for r in g["rules"]))')"

# --- a fixed file with a new rule: loaded, ForLong's state kept ---
long_now=$(active_at_ms ForLong)
write_rules "      - alert: ForNew
        expr: vector(2)"
kill -HUP "$AGENT_PID"
reloaded() { curl -s "$AGENT_URL/api/v1/rules" | grep '"name":"ForNew"' >/dev/null; }
wait_for 10 reloaded || fail "the fixed file was not loaded"
expect_eq "ForLong's activeAt across the reload" "$long_now" "$(active_at_ms ForLong)"

# --- which rules run where (docs/rules.md) ---
groups() { curl -s "$AGENT_URL/api/v1/rules" | python3 -c 'import json,sys; print(" ".join(g["name"] for g in json.load(sys.stdin)["data"]["groups"]))'; }
stop_agent() { kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true; }
stop_agent
start_agent --interval 1s --disable-collectors gpu --rule-file "$RULES"
expect_eq "an agent on its own: shipped rules and its own" "mlwatch-idle.recording mlwatch.alerts agent limited" "$(groups)"
stop_agent
start_agent --interval 1s --disable-collectors gpu --rule-file "$RULES" \
    --remote-write http://127.0.0.1:9/api/v1/write
expect_eq "a node agent that ships to a hub: only what it is given" "agent limited" "$(groups)"
stop_agent
: >"$WORK/agent.log"
"$MLWATCH_BIN" hub --listen 127.0.0.1:0 --data-dir "$WORK/hub" --state-dir "$WORK/hubstate" \
    --interval 1s --remote-write http://127.0.0.1:9/api/v1/write >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
PIDS+=("$AGENT_PID")
wait_for 20 agent_started || fail "the hub does not start: $(cat "$WORK/agent.log")"
AGENT_URL="http://127.0.0.1:$(agent_port)"
wait_http "$AGENT_URL/-/ready"
expect_eq "a hub: the shipped rules" "mlwatch-idle.recording mlwatch.alerts" "$(groups)"
done_ok
