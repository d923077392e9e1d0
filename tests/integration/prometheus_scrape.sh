#!/usr/bin/env bash
# prometheus_scrape.sh - a real Prometheus (Debian's) scrapes the agent. It
# negotiates OpenMetrics, so this checks that Prometheus's own parser accepts
# every sample we expose and reads the same values.
source "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh test)"

root=$(fixture_copy rapl-cpufreq)
start_agent --root "$root" --interval 500ms
agent_hostport=${AGENT_URL#http://}

start_scraper "$agent_hostport" 1s 900ms

# query EXPR: prints the value of the first result (empty if none).
query() {
    curl -s --get --data-urlencode "query=$1" "$PROM/api/v1/query" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}

target_up() { [ "$(query 'up{job="mlwatch"}')" = 1 ]; }
if ! WAIT_EVERY=0.5 wait_for 30 target_up; then
    curl -s "$PROM/api/v1/targets" >&2
    fail "Prometheus never scraped the agent successfully"
fi
ok

# Prometheus must have used OpenMetrics (the format it prefers).
curl -sf -H 'Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' \
    "$AGENT_URL/metrics" >"$WORK/m.om"
exposed=$(grep -vc '^#' "$WORK/m.om")
scraped=$(query 'scrape_samples_scraped{job="mlwatch"}')
expect_eq "samples Prometheus scraped vs samples exposed" "$exposed" "$scraped"
expect_eq "mlwatch_load1 as Prometheus reads it" \
    "$(awk '$1 == "mlwatch_load1{node=\"t1\"}" {print $2}' "$WORK/m.om")" "$(query 'mlwatch_load1{node="t1"}')"
expect_eq "collector errors seen by Prometheus" 0 "$(query 'sum(mlwatch_collector_errors_total)')"

# Metadata (TYPE/HELP/UNIT) reached Prometheus intact.
curl -s --get --data-urlencode 'metric=mlwatch_collector_duration_seconds' "$PROM/api/v1/metadata" >"$WORK/meta.json"
expect_eq "metadata of mlwatch_collector_duration_seconds" "gauge seconds" \
    "$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["data"]["mlwatch_collector_duration_seconds"][0]; print(m["type"], m["unit"])' "$WORK/meta.json")"
done_ok
