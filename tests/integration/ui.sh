#!/usr/bin/env bash
# ui.sh - the built-in web UI end to end, in Debian's chromium (headless,
# driven by playwright-core from ui/node_modules; tests/integration/ui/check.js).
#   1. the agent on a GPU node fixture (gpu-node, with the CPU frequency,
#      NUMA, RAPL and pressure files of rapl-cpufreq) and the fake NVML
#      library; tests/integration/ui/world.py moves its counters. GPU 0
#      (shared/notebook-a) and GPU 2 (shared/notebook-b) are idle past a 2 s
#      window, GPU 1 (ml-team/train-1) is busy;
#   2. HTTP: / redirects to /ui/, the CSP and caching headers, gzip, 304;
#   3. every page in the browser: each chart has points, each stat its exact
#      value, each table its exact rows; the URL keeps namespace, workload
#      and range across a reload; screenshots in $MLWATCH_BUILD/artifacts/ui (CI keeps them);
#   4. --query-url: a second agent without a store shows the same pages from
#      a real Prometheus (Debian's) scraping the first; a dead upstream gives
#      502 with the reason.
# Missing chromium or node_modules fail the test: CI installs them.
source "$(dirname "$0")/lib.sh"
: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
command -v node >/dev/null || fail "node is not installed (scripts/install-deps.sh test)"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/install-deps.sh test)"
[ -d "$MLWATCH_SRC/ui/node_modules/playwright-core" ] ||
    fail "ui/node_modules is missing: run 'npm ci' in ui/ (scripts/install-deps.sh test)"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh test)"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
SHOTS=$(cd "$MLWATCH_BUILD" && pwd)/artifacts/ui # kept by CI (.ci/run)
mkdir -p "$SHOTS"
rm -f "$SHOTS"/*.png # this test's, not bare/ (integ_ui_bare's)

# 1. The node: gpu-node plus the CPU side of rapl-cpufreq.
root=$(fixture_copy gpu-node)
cpu=$MLWATCH_FIXTURES/rapl-cpufreq
mkdir -p "$root/sys/class"
cp -a "$cpu/sys/devices" "$root/sys/"
cp -a "$cpu/sys/class/powercap" "$root/sys/class/"
for f in pressure stat meminfo loadavg vmstat; do cp -a "$cpu/proc/$f" "$root/proc/"; done
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
python3 "$MLWATCH_SRC/tests/integration/ui/world.py" "$root" "$FAKE_NVML_SCENARIO" 0.25 &
PIDS+=($!)
wait_for 10 test -f "$FAKE_NVML_SCENARIO" || fail "world.py wrote no scenario"
start_agent --root "$root" --nvml-library "$fake" --rocm-library none --interval 250ms \
    --gpu-process-interval 250ms --idle-window 2s --idle-busy-period 1s --carbon-intensity 400 \
    --collectors cpu,cpuinfo,cpufreq,numa,pressure,memory,rapl,cgroup,gpu,osinfo,self
A=$AGENT_URL

# 2. HTTP
hdr() { curl -s -o /dev/null -D - "$@" | tr -d '\r'; }
h=$(hdr "$A/")
grep -q '^HTTP/1.1 302' <<<"$h" || fail "/ does not redirect: $h"
expect_eq "redirect target" "Location: /ui/" "$(grep '^Location:' <<<"$h")"
h=$(hdr "$A/ui/")
if grep -q '^HTTP/1.1 503' <<<"$h"; then
    fail "this mlwatch has no web UI: $(curl -s "$A/ui/") (build after 'npm ci' in ui/)"
fi
expect_eq "index content type" "Content-Type: text/html; charset=utf-8" "$(grep '^Content-Type:' <<<"$h")"
expect_eq "CSP" "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'" \
    "$(grep '^Content-Security-Policy:' <<<"$h")"
expect_eq "nosniff" "X-Content-Type-Options: nosniff" "$(grep '^X-Content-Type-Options:' <<<"$h")"
expect_eq "cache" "Cache-Control: no-cache" "$(grep '^Cache-Control:' <<<"$h")"
etag=$(sed -n 's/^ETag: //p' <<<"$h")
[ -n "$etag" ] || fail "no ETag"
expect_eq "304" 304 "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$A/ui/")"
h=$(hdr -H 'Accept-Encoding: gzip' "$A/ui/app.js")
expect_eq "gzip" "Content-Encoding: gzip" "$(grep '^Content-Encoding:' <<<"$h")"
expect_eq "js content type" "Content-Type: text/javascript; charset=utf-8" "$(grep '^Content-Type:' <<<"$h")"
cmp -s <(curl -s --compressed "$A/ui/app.js") "$MLWATCH_SRC/ui/src/app.js" || fail "app.js differs from ui/src/app.js"
ok
cmp -s <(curl -s "$A/ui/dashboards.json") "$MLWATCH_SRC/ui/dashboards.json" || fail "dashboards.json differs"
ok
expect_eq "uPlot" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$A/ui/vendor/uPlot.iife.min.js")"
expect_eq "unknown asset" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$A/ui/nope.js")"
expect_eq "config" '{"version":"'"$("$MLWATCH_BIN" version | awk '{print $2}')"'","backend":"store","api":"../api/v1","query_url":"","interval_ms":250}' \
    "$(curl -s "$A/ui/config.json")"
expect_eq "no proxy without --query-url" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$A/ui/api/v1/query?query=1")"

# Wait for both idle sessions and a few seconds of rates.
q() { curl -s --get --data-urlencode "query=$2" "$1/api/v1/query" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'; }
q_is() { [ "$(q "$1" "$2")" = "$3" ]; } # URL EXPR VALUE
WAIT_EVERY=0.2 wait_for 20 q_is "$A" 'count(mlwatch_gpu_idle_seconds > 0)' 2 || fail "the idle sessions never opened"
# ... and the doctor's findings the why-slow page draws (notebook-a's CFS
# throttling, the powersave governor, GPU 1's thermal slowdown).
findings_in() { curl -s "$A/api/v1/findings" | jq -e '[.findings[].kind] | index("cpu_throttling") and index("cpu_governor") and index("gpu_thermal_throttle")' >/dev/null; }
WAIT_EVERY=0.3 wait_for 20 findings_in || fail "the doctor's findings: $(curl -s "$A/api/v1/findings" | jq -c '[.findings[] | [.severity, .kind, .pod]]')"
sleep 2
# Long queries go as a POST form (app.js): the store takes them too.
expect_eq "POST to the store" 3 "$(curl -s --data-urlencode 'query=count(mlwatch_gpu_info)' "$A/api/v1/query" |
    jq -r '.data.result[0].value[1]')"

# 3. The pages. Known values: 3 GPUs, all held, GPU 1 busy, 2 idle sessions.
idle_rows='[{"owner":"shared","namespace":"shared","pod":"notebook-a","container":"main","workload":"","gpu":"0","model":"NVIDIA H100 80GB HBM3"},{"owner":"shared","namespace":"shared","pod":"notebook-b","container":"main","workload":"","gpu":"2","model":"NVIDIA H100 80GB HBM3"}]'
gpu_pods='["ml-team/train-1","shared/notebook-a","shared/notebook-b"]'
cpus='["t1 cpu 0 (powersave)","t1 cpu 1 (powersave)","t1 cpu 2 (powersave)","t1 cpu 3 (powersave)","t1 cpu 4 (performance)","t1 cpu 5 (performance)","t1 cpu 6 (performance)","t1 cpu 7 (performance)"]'
cat >"$WORK/expect.json" <<JSON
{"pages": {
  "overview": {"count": 14, "mayBeEmpty": ["overview-12"], "empty": ["overview-14"], "panels": {
    "overview-14": {"why": "^No process figures: the processes collector reads /proc/PID/stat"},
    "overview-1": {"facts": {"GPUs": "^3$", "GPU models": "^NVIDIA H100 80GB HBM3$", "CPUs (threads)": "^192$"}},
    "overview-2": {"facts": {"GPUs": "^3 GPUs( \\\\(NVML, driver 550.54.15: 3 GPUs; XIDs from the kernel log \\\\(/dev/kmsg\\\\)\\\\))?$", "Energy": "^measured( \\\\(RAPL energy counters: 6 zones in sys/class/powercap\\\\)$|$)",
      "CO2": "^carbon intensity 400 g/kWh$"}},
    "overview-3": {"values": ["measured"]}, "overview-6": {"value": 2}, "overview-7": {"labels": ["measured"]},
    "overview-9": {"labelsInclude": ["ml-team/train-1"]},
    "overview-13": {"rows": [{"owner": "shared", "pod": "notebook-a", "gpu": "0"}, {"owner": "shared", "pod": "notebook-b", "gpu": "2"}]}}},
  "whyslow": {"count": 2, "panels": {
    "whyslow-1": {"findings": ["^critical cpu_throttling shared/notebook-a$", "^(warning|info) cpu_governor \\\\(the node\\\\)$",
      "^warning gpu_thermal_throttle ml-team/train-1$"],
      "evidence": {"cpu_throttling": 2, "cpu_governor": 1, "gpu_thermal_throttle": 2}},
    "whyslow-2": {"labelsInclude": ["cpu_throttling (critical)", "gpu_thermal_throttle (warning)"]}}},
  "gpu": {"count": 12, "mayBeEmpty": ["gpu-8", "gpu-9", "gpu-10", "gpu-12"], "panels": {
    "gpu-1": {"labels": ["t1 GPU 0", "t1 GPU 1", "t1 GPU 2"]}, "gpu-2": {"series": 6},
    "gpu-7": {"rows": [{"gpu": "0", "ECC errors": 0, "PCIe gen": 5, "max gen": 5, "Width": 16, "max width": 16},
      {"gpu": "1", "ECC errors": 0, "PCIe gen": 5, "max gen": 5, "Width": 16, "max width": 16},
      {"gpu": "2", "ECC errors": 12, "PCIe gen": 4, "max gen": 5, "Width": 8, "max width": 16}]},
    "gpu-11": {"rows": [{"gpu": "0", "state": "healthy", "reason": "none"}, {"gpu": "1", "state": "healthy", "reason": "none"}, {"gpu": "2", "state": "degraded", "reason": "pcie_link_degraded"}]}}},
  "workloads": {"count": 9, "panels": {
    "workloads-1": {"labels": $gpu_pods}, "workloads-2": {"labels": $gpu_pods},
    "workloads-3": {"labels": $gpu_pods}, "workloads-4": {"series": 9},
    "workloads-6": {"series": 9}, "workloads-9": {"rowCount": 19}}},
  "cluster": {"count": 8, "panels": {
    "cluster-1": {"value": 3}, "cluster-2": {"value": 3}, "cluster-3": {"value": 1},
    "cluster-4": {"value": 2}, "cluster-6": {"labels": ["allocated", "busy", "idle", "total"]},
    "cluster-7": {"rows": $idle_rows, "positive": {"Idle since": 1700000000000, "Idle for": 0, "Cost (GPU-hours)": 0}},
    "cluster-8": {"rows": [{"namespace": "ml-team", "Open sessions": 0}, {"namespace": "shared", "Open sessions": 2}]}}},
  "sustainability": {"count": 9, "panels": {
    "sustainability-1": {"labels": ["inference", "ml-team", "shared"]},
    "sustainability-7": {"labels": ["node total", "system", "unreserved", "workloads"]},
    "sustainability-3": {"rows": [{"namespace": "inference"}, {"namespace": "ml-team"}, {"namespace": "shared"}]},
    "sustainability-4": {"labels": ["grid"]}, "sustainability-5": {"labels": ["measured"]}}},
  "node": {"count": 6, "panels": {
    "node-1": {"labels": $cpus}, "node-2": {"labels": ["t1 NUMA 0", "t1 NUMA 1"]},
    "node-5": {"series": 6}}}
 },
 "scoped_gpu_memory_series": 2}
JSON
(cd "$WORK" && timeout 90 node "$MLWATCH_SRC/tests/integration/ui/check.js" "$A" "$SHOTS" "$WORK/expect.json") ||
    fail "the browser check failed (agent log: $(tail -5 "$WORK/agent.log"))"
ok

# 4. --query-url: Prometheus scrapes agent A; agent B has no store and
# shows A's data from Prometheus.
start_scraper "${A#http://}" 500ms 400ms
WAIT_EVERY=0.3 wait_for 30 q_is "$PROM" 'count(count_over_time(mlwatch_gpu_idle_seconds[1m]) > 4) or vector(0)' 3 ||
    fail "Prometheus did not scrape the agent: $(tail -3 "$WORK/prometheus.log")"
start_agent --root "$root" --collectors self --store=false --query-url "$PROM/" --query-timeout 5s \
    --data-dir "$WORK/data-b" # its own state: two agents share no folder
B=$AGENT_URL
expect_eq "config with --query-url" '"query-url" "api/v1" "'"$PROM"'"' \
    "$(curl -s "$B/ui/config.json" | jq -c '.backend, .api, .query_url' | tr '\n' ' ' | sed 's/ $//')"
expect_eq "B has no store of its own" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$B/api/v1/query?query=1")"
expect_eq "forwarded query" '"mlwatch"' \
    "$(curl -s "$B/ui/api/v1/query?query=up" | jq -c '.data.result[0].metric.job')"
expect_eq "forwarded series, two match[]" 2 \
    "$(curl -s "$B/ui/api/v1/series?match[]=mlwatch_build_info&match[]=mlwatch_os_info" | jq '[.data[].__name__] | unique | length')"
expect_eq "forwarded POST" '"mlwatch"' \
    "$(curl -s --data-urlencode 'query=up' "$B/ui/api/v1/query" | jq -c '.data.result[0].metric.job')"
expect_eq "forwarded query error" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$B/ui/api/v1/query?query=sum(")"
expect_eq "not forwarded" 404 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$B/ui/api/v1/write")"
# The findings panel asks the serving agent's doctor (B watches nothing);
# the findings over time come through Prometheus.
jq '.pages.whyslow.panels |= del(.["whyslow-1"]) | .pages.whyslow.mayBeEmpty = ["whyslow-1"]' \
    "$WORK/expect.json" >"$WORK/expect-b.json"
(cd "$WORK" && timeout 90 node "$MLWATCH_SRC/tests/integration/ui/check.js" "$B" "$WORK" "$WORK/expect-b.json") ||
    fail "the browser check through --query-url failed (agent log: $(tail -5 "$WORK/agent.log"))"
ok

# A dead upstream: 502 naming it and what failed.
dead=$(free_port)
start_agent --root "$root" --collectors self --store=false --query-url "http://127.0.0.1:$dead" \
    --data-dir "$WORK/data-c"
body=$(curl -s -w ' %{http_code}' "$AGENT_URL/ui/api/v1/query?query=up")
case "$body" in
*'"error":"query-url http://127.0.0.1:'"$dead"': Couldn'*' 502') ok ;;
*) fail "dead upstream: $body" ;;
esac
echo "ui: $CHECKS checks passed; screenshots in $SHOTS"
