#!/usr/bin/env bash
# promql_api_endpoints.sh - the query API's endpoints around the queries
# (issue 25), with Prometheus's exact answers: label-name validation, JSON
# errors for unknown paths and methods under /api/, /api/v1/format_query,
# /api/v1/query_exemplars (no exemplars: [] or null), /api/v1/status/*,
# /api/v1/targets, /api/v1/features, stats=all, and gzip when the client
# takes it (decoded, the same bytes as the plain answer).
source "$(dirname "$0")/lib.sh"
HERE="$MLWATCH_SRC/tests/integration"
LOADER="$WORK/promql_load"
cc -O1 -o "$LOADER" "$HERE/promql_load.c" -lsnappy -lcurl || fail "cannot compile the loader"

T0=1700000000
cat >"$WORK/data.txt" <<DATA
api_req_total{job="api",instance="a"} ${T0}000 10
api_req_total{job="api",instance="a"} $((T0 + 60))000 70
api_req_total{job="api",instance="b"} ${T0}000 1.5
api_req_total{job="api",instance="b"} $((T0 + 60))000 stale
utf_total{job="utf",a.b="x"} ${T0}000 1
DATA
start_agent --interval 10s --disable-collectors gpu
expect_eq "remote write" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/data.txt")"

# call CURL-ARGS...: prints "STATUS BODY".
call() {
    curl -s -o "$WORK/body" -w '%{http_code}' "$@" >"$WORK/code"
    echo "$(cat "$WORK/code") $(cat "$WORK/body")"
}

# Label names (Prometheus 3's: any non-empty UTF-8, "U__" escaped in the
# path) and Prometheus's JSON errors.
expect_eq "a name Prometheus 2 refused" '200 {"status":"success","data":[]}' \
    "$(call "$AGENT_URL/api/v1/label/0bad/values")"
expect_eq "a UTF-8 label name, as it is" '200 {"status":"success","data":["x"]}' \
    "$(call "$AGENT_URL/api/v1/label/a.b/values")"
expect_eq "a UTF-8 label name, U__ escaped" '200 {"status":"success","data":["x"]}' \
    "$(call "$AGENT_URL/api/v1/label/U__a_2e_b/values")"
expect_eq "invalid UTF-8 in a label name" \
    '400 {"status":"error","errorType":"bad_data","error":"invalid label name: \"a\\xffb\""}' \
    "$(call "$AGENT_URL/api/v1/label/a%FFb/values")"
expect_eq "valid label name" '200 {"status":"success","data":["a","b"]}' \
    "$(call --get --data-urlencode 'match[]=api_req_total' "$AGENT_URL/api/v1/label/instance/values")"
expect_eq "unknown API path" \
    '404 {"status":"error","errorType":"not_found","error":"no such path: /api/v1/nope"}' \
    "$(call "$AGENT_URL/api/v1/nope")"
expect_eq "method not allowed" \
    '405 {"status":"error","errorType":"bad_data","error":"method DELETE not allowed on /api/v1/query"}' \
    "$(call -X DELETE "$AGENT_URL/api/v1/query")"
expect_eq "outside /api/ still text" '404 no such path: /nope' "$(call "$AGENT_URL/nope")"

# format_query: Prometheus's String() form.
expect_eq "format_query" \
    '200 {"status":"success","data":"sum by (job, x) (rate(foo{a=~\"y\",b=\"x\"}[1m30s] offset 1d)) / on (a) group_left (b) -bar > bool 1000000"}' \
    "$(call --get --data-urlencode 'query=sum by(job,x)(rate(foo{b="x",a=~"y"}[90s] offset 1d)) / on(a) group_left(b) -bar > bool 1e6' "$AGENT_URL/api/v1/format_query")"
expect_eq "format_query: subquery, @, strings, without, topk" \
    '200 {"status":"success","data":"topk without (a) (3, max_over_time(x[1w:5m] @ 1700000000.000)) or label_replace(y @ end(), \"d\", \"a\\tb\\\"\", \"s\", \"(.*)\")"}' \
    "$(call --data-urlencode 'query=topk without(a)(3,max_over_time(x[7d:5m] @ 1700000000)) or label_replace(y @ end(),"d","a\tb\"","s","(.*)")' "$AGENT_URL/api/v1/format_query")"
expect_eq "format_query: a duration as a number" \
    '200 {"status":"success","data":"predict_linear(x[1h], 1h30m) > bool -2m"}' \
    "$(call --get --data-urlencode 'query=predict_linear(x[1h], 90m) > bool -2m' "$AGENT_URL/api/v1/format_query")"
expect_eq "format_query: anchored, smoothed, info" \
    '200 {"status":"success","data":"rate(x[5m] anchored @ 10.000 offset 1m) + (y @ 20.000 smoothed offset 30s) + info(z, {__name__=~\".+_info\",a=~\".*\"})"}' \
    "$(call --get --data-urlencode 'query=rate(x[5m] anchored @ 10 offset 1m) + (y @ 20 offset 30s smoothed) + info(z, {a=~".*", __name__=~".+_info"})' "$AGENT_URL/api/v1/format_query")"
expect_eq "format_query: parse error" \
    '400 {"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unexpected end of input"}' \
    "$(call --get --data-urlencode 'query=sum(' "$AGENT_URL/api/v1/format_query")"

# query_exemplars: none stored.
expect_eq "exemplars of a selector" '200 {"status":"success","data":[]}' \
    "$(call --get --data-urlencode 'query=rate(api_req_total[5m])' "$AGENT_URL/api/v1/query_exemplars")"
expect_eq "exemplars without a selector (Prometheus 2.42: 204, no body)" '204 ' \
    "$(call --get --data-urlencode 'query=1 + 1' "$AGENT_URL/api/v1/query_exemplars")"
expect_eq "exemplars: end before start" \
    '400 {"status":"error","errorType":"bad_data","error":"end timestamp must not be before start timestamp"}' \
    "$(call --get --data-urlencode 'query=up' --data-urlencode start=20 --data-urlencode end=10 "$AGENT_URL/api/v1/query_exemplars")"

# Status endpoints and targets.
expect_eq "flags" \
    '200 {"status":"success","data":{"query.timeout":"2m","query.lookback-delta":"5m","query.max-samples":"20000000"}}' \
    "$(call "$AGENT_URL/api/v1/status/flags")"
expect_eq "config" '200 {"status":"success","data":{"yaml":""}}' "$(call "$AGENT_URL/api/v1/status/config")"
expect_eq "walreplay" '200 {"status":"success","data":{"min":0,"max":0,"current":0}}' \
    "$(call "$AGENT_URL/api/v1/status/walreplay")"
expect_eq "targets" \
    '200 {"status":"success","data":{"activeTargets":[],"droppedTargets":[],"droppedTargetCounts":{}}}' \
    "$(call "$AGENT_URL/api/v1/targets")"
out=$(call "$AGENT_URL/api/v1/status/tsdb")
case "$out" in
'200 {"status":"success","data":{"headStats":{"numSeries":'[1-9]*'},"seriesCountByMetricName":[],"labelValueCountByLabelName":[],"memoryInBytesByLabelName":[],"seriesCountByLabelValuePair":[]}}') ok ;;
*) fail "tsdb: $out" ;;
esac
out=$(call "$AGENT_URL/api/v1/status/runtimeinfo")
case "$out" in
'200 {"status":"success","data":{"startTime":"20'*'Z","serverTime":"20'*'Z","CWD":"'*'","reloadConfigSuccess":true,"lastConfigTime":"'*'","corruptionCount":0,"GOMAXPROCS":'[1-9]*'}}') ok ;;
*) fail "runtimeinfo: $out" ;;
esac
curl -s "$AGENT_URL/api/v1/features" >"$WORK/features.json"
python3 - "$WORK/features.json" <<'PY' || fail "features"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "success", d
f = d["data"]
for name in ("sin", "atanh", "pi", "holt_winters", "double_exponential_smoothing", "rate", "label_replace"):
    assert f["promql_functions"].get(name) is True, name
assert f["promql_operators"]["atan2"] is True and f["promql_operators"]["topk"] is True
assert f["api"] == {"query_exemplars": True, "format_query": True, "stats": True}, f["api"]
assert f["promql"]["native_histograms"] is True
PY
ok

# stats=all: timings and the samples read from the store (4: both series'
# two samples in the lookback window) and the peak in memory.
curl -s --get --data-urlencode 'query=api_req_total' --data-urlencode "time=$((T0 + 60))" \
    --data-urlencode stats=all "$AGENT_URL/api/v1/query" >"$WORK/stats.json"
python3 - "$WORK/stats.json" <<'PY' || fail "stats=all: $(cat "$WORK/stats.json")"
import json, sys
d = json.load(open(sys.argv[1]))["data"]
assert d["result"] == [{"metric": {"__name__": "api_req_total", "instance": "a", "job": "api"}, "value": [1700000060, "70"]}]
st = d["stats"]
assert sorted(st["timings"]) == sorted(["evalTotalTime", "resultSortTime", "queryPreparationTime", "innerEvalTime", "execQueueTime", "execTotalTime"])
assert all(isinstance(v, float) and 0 <= v < 10 for v in st["timings"].values()), st
assert st["samples"] == {"totalQueryableSamples": 4, "peakSamples": 5}, st
PY
ok
expect_eq "no stats without stats=" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"api_req_total","instance":"a","job":"api"},"value":[1700000060,"70"]}]}}' \
    "$(call --get --data-urlencode 'query=api_req_total' --data-urlencode "time=$((T0 + 60))" "$AGENT_URL/api/v1/query")"

# gzip: a 121-point range answer (about 2.5 KB) is gzip'd when asked and
# decodes to the plain answer; not when not asked, nor below 1 KiB.
args=(--get --data-urlencode 'query=vector(1)' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 7200))" --data-urlencode step=60)
curl -s -D "$WORK/plain.h" -o "$WORK/plain" "${args[@]}" "$AGENT_URL/api/v1/query_range"
curl -s -H 'Accept-Encoding: gzip' -D "$WORK/gz.h" -o "$WORK/gz" "${args[@]}" "$AGENT_URL/api/v1/query_range"
grep -qi '^Content-Encoding: gzip' "$WORK/gz.h" || fail "no Content-Encoding: gzip: $(cat "$WORK/gz.h")"
grep -qi '^Vary: Accept-Encoding' "$WORK/gz.h" || fail "no Vary: Accept-Encoding"
grep -qi '^Content-Encoding' "$WORK/plain.h" && fail "gzip'd without Accept-Encoding"
[ "$(stat -c %s "$WORK/plain")" -gt 2000 ] || fail "the plain answer is only $(stat -c %s "$WORK/plain") bytes"
[ "$(stat -c %s "$WORK/gz")" -lt "$(($(stat -c %s "$WORK/plain") / 4))" ] || fail "gzip: $(stat -c %s "$WORK/gz") bytes"
expect_eq "gunzip gives the plain answer" "$(cat "$WORK/plain")" "$(gunzip -c "$WORK/gz")"
curl -s -H 'Accept-Encoding: gzip;q=0' -D "$WORK/q0.h" -o /dev/null "${args[@]}" "$AGENT_URL/api/v1/query_range"
grep -qi '^Content-Encoding' "$WORK/q0.h" && fail "gzip'd with q=0"
curl -s -H 'Accept-Encoding: gzip' -D "$WORK/small.h" -o /dev/null "$AGENT_URL/api/v1/status/flags"
grep -qi '^Content-Encoding' "$WORK/small.h" && fail "a small answer gzip'd"
ok
done_ok
