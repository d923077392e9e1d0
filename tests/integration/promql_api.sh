#!/usr/bin/env bash
# promql_api.sh - the Prometheus query API of the agent as Grafana calls it:
# envelope, value encoding (Go's shortest fixed notation, 1e100 and
# 1.5e-300 written out in full), GET and form POST, RFC 3339 and float times,
# duration and float steps, series/labels/label values, buildinfo, metadata,
# and the error types and status codes of bad queries and parameters;
# Prometheus 3's warnings and infos.
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
api_temp{instance="a"} ${T0}000 0.1
#meta api_req_total 1 - Requests served, by "job".
#meta api_temp 2 celsius Temperature of the host.
DATA
start_agent --interval 10s --disable-collectors gpu
expect_eq "remote write" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/data.txt")"

# call CURL-ARGS...: prints "STATUS BODY".
call() {
    curl -s -o "$WORK/body" -w '%{http_code}' "$@" >"$WORK/code"
    echo "$(cat "$WORK/code") $(cat "$WORK/body")"
}

expect_eq "instant vector" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"api_req_total","instance":"a","job":"api"},"value":[1700000060,"70"]}]}}' \
    "$(call --get --data-urlencode 'query=api_req_total' --data-urlencode "time=$((T0 + 60))" "$AGENT_URL/api/v1/query")"
expect_eq "RFC 3339 time, fractional" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1700000030.5,"0.1"]}]}}' \
    "$(call --get --data-urlencode 'query=sum by (instance) (api_temp)' --data-urlencode 'time=2023-11-14T22:13:50.5Z' "$AGENT_URL/api/v1/query")"
expect_eq "RFC 3339 with an offset" \
    '200 {"status":"success","data":{"resultType":"scalar","result":[1700000000,"1700000000"]}}' \
    "$(call --get --data-urlencode 'query=time()' --data-urlencode 'time=2023-11-15T00:13:20+02:00' "$AGENT_URL/api/v1/query")"
expect_eq "string" \
    '200 {"status":"success","data":{"resultType":"string","result":[1700000000,"hi"]}}' \
    "$(call --get --data-urlencode 'query="hi"' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
# Values as Go's strconv.FormatFloat(v, 'f', -1, 64) writes them, however
# long: 1e100 is 1 and 100 zeros, 1.5e-300 is "0.", 299 zeros and 15.
e100="1$(printf '%0100d' 0)"
e_300="0.$(printf '%0299d' 0)15"
expect_eq "vector(1e100), instant" \
    "200 {\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1700000000,\"$e100\"]}]}}" \
    "$(call --get --data-urlencode 'query=vector(1e100)' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "vector(1.5e-300), instant" \
    "200 {\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1700000000,\"$e_300\"]}]}}" \
    "$(call --get --data-urlencode 'query=vector(1.5e-300)' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "scalar -1e100, instant" \
    "200 {\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1700000000,\"-$e100\"]}}" \
    "$(call --get --data-urlencode 'query=-1e100' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "vector(1e100) and vector(1.5e-300), range" \
    "200 {\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},\"values\":[[1700000000,\"$e100\"],[1700000060,\"$e100\"]]},{\"metric\":{\"a\":\"b\"},\"values\":[[1700000000,\"$e_300\"],[1700000060,\"$e_300\"]]}]}}" \
    "$(call --get --data-urlencode 'query=vector(1e100) or label_replace(vector(1.5e-300), "a", "b", "", "")' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" --data-urlencode 'step=60' "$AGENT_URL/api/v1/query_range")"
expect_eq "count_values label of 1e100" \
    "200 {\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{\"v\":\"$e100\"},\"value\":[1700000000,\"1\"]}]}}" \
    "$(call --get --data-urlencode 'query=count_values("v", vector(1e100))' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "mlwatch query prints them as the API answers" "$e100" \
    "$("$MLWATCH_BIN" query --url "$AGENT_URL" --time "$T0" 'scalar(vector(1e100))')"
expect_eq "range query by form POST, duration step" \
    '200 {"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"api_req_total","instance":"a","job":"api"},"values":[[1700000000,"10"],[1700000030,"10"],[1700000060,"70"]]},{"metric":{"__name__":"api_req_total","instance":"b","job":"api"},"values":[[1700000000,"1.5"],[1700000030,"1.5"]]}]}}' \
    "$(call --data-urlencode 'query=api_req_total' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" --data-urlencode 'step=30s' "$AGENT_URL/api/v1/query_range")"
expect_eq "range query, float step, scalar" \
    '200 {"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"2"],[1700000045,"2"]]}]}}' \
    "$(call --get --data-urlencode 'query=1+1' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" --data-urlencode 'step=45.0' "$AGENT_URL/api/v1/query_range")"
expect_eq "parse error" \
    '400 {"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:13: parse error: unexpected end of input in aggregation, expected \",\" or \")\""}' \
    "$(call --get --data-urlencode 'query=sum(api_temp' "$AGENT_URL/api/v1/query")"
expect_eq "bad time" \
    '400 {"status":"error","errorType":"bad_data","error":"invalid parameter \"time\": cannot parse \"yesterday\" to a valid timestamp"}' \
    "$(call --get --data-urlencode 'query=1' --data-urlencode 'time=yesterday' "$AGENT_URL/api/v1/query")"
expect_eq "negative step" \
    '400 {"status":"error","errorType":"bad_data","error":"invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer"}' \
    "$(call --get --data-urlencode 'query=1' --data-urlencode 'start=0' --data-urlencode 'end=1' --data-urlencode 'step=-1' "$AGENT_URL/api/v1/query_range")"
expect_eq "too many points" \
    '400 {"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"}' \
    "$(call --get --data-urlencode 'query=1' --data-urlencode 'start=0' --data-urlencode 'end=20000' --data-urlencode 'step=1' "$AGENT_URL/api/v1/query_range")"
expect_eq "end before start" \
    '400 {"status":"error","errorType":"bad_data","error":"invalid parameter \"end\": end timestamp must not be before start time"}' \
    "$(call --get --data-urlencode 'query=1' --data-urlencode 'start=10' --data-urlencode 'end=1' --data-urlencode 'step=1' "$AGENT_URL/api/v1/query_range")"
expect_eq "execution error" \
    '422 {"status":"error","errorType":"execution","error":"found duplicate series for the match group {job=\"api\"} on the right hand-side of the operation: [{__name__=\"api_req_total\", instance=\"a\", job=\"api\"}, {__name__=\"api_req_total\", instance=\"b\", job=\"api\"}];many-to-many matching not allowed: matching labels must be unique on one side"}' \
    "$(call --get --data-urlencode 'query=api_req_total + on(job) api_req_total' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "series" \
    '200 {"status":"success","data":[{"__name__":"api_req_total","instance":"a","job":"api"},{"__name__":"api_req_total","instance":"b","job":"api"}]}' \
    "$(call --get --data-urlencode 'match[]=api_req_total' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" "$AGENT_URL/api/v1/series")"
expect_eq "series, two selectors by POST" \
    '200 {"status":"success","data":[{"__name__":"api_req_total","instance":"b","job":"api"},{"__name__":"api_temp","instance":"a"}]}' \
    "$(call --data-urlencode 'match[]=api_req_total{instance="b"}' --data-urlencode 'match[]=api_temp' "$AGENT_URL/api/v1/series")"
expect_eq "series without match[]" \
    '400 {"status":"error","errorType":"bad_data","error":"no match[] parameter provided"}' \
    "$(call "$AGENT_URL/api/v1/series")"
expect_eq "labels" \
    '200 {"status":"success","data":["__name__","instance","job"]}' \
    "$(call --get --data-urlencode 'match[]={__name__=~"api_.*"}' "$AGENT_URL/api/v1/labels")"
expect_eq "label values" \
    '200 {"status":"success","data":["a","b"]}' \
    "$(call --get --data-urlencode 'match[]={__name__=~"api_.*"}' "$AGENT_URL/api/v1/label/instance/values")"
# metadata: what remote-write senders sent, and the agent's own families
expect_eq "metadata of one metric" \
    '200 {"status":"success","data":{"api_req_total":[{"type":"counter","help":"Requests served, by \"job\".","unit":""}]}}' \
    "$(call "$AGENT_URL/api/v1/metadata?metric=api_req_total")"
expect_eq "metadata with a unit" \
    '200 {"status":"success","data":{"api_temp":[{"type":"gauge","help":"Temperature of the host.","unit":"celsius"}]}}' \
    "$(call "$AGENT_URL/api/v1/metadata?metric=api_temp")"
expect_eq "metadata limit (sorted by name)" \
    '200 {"status":"success","data":{"api_req_total":[{"type":"counter","help":"Requests served, by \"job\".","unit":""}]}}' \
    "$(call "$AGENT_URL/api/v1/metadata?limit=1")"
expect_eq "metadata limit 0" '200 {"status":"success","data":{}}' "$(call "$AGENT_URL/api/v1/metadata?limit=0")"
expect_eq "metadata of an unknown metric" '200 {"status":"success","data":{}}' \
    "$(call "$AGENT_URL/api/v1/metadata?metric=nope")"
expect_eq "metadata bad limit" \
    '400 {"status":"error","errorType":"bad_data","error":"limit must be a number"}' \
    "$(call "$AGENT_URL/api/v1/metadata?limit=ten")"
out=$(call "$AGENT_URL/api/v1/status/buildinfo")
case "$out" in
'200 {"status":"success","data":{"version":"3.14.0",'*) ok ;;
*) fail "buildinfo: $out" ;;
esac
# the agent's own samples are queryable too
sleep 0.5
out=$(call --get --data-urlencode 'query=count(mlwatch_build_info) > 0' "$AGENT_URL/api/v1/query")
case "$out" in
'200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":['*',"1"]}]}}') ok ;;
*) fail "own samples: $out" ;;
esac
expect_eq "metadata of the agent's own families" \
    '200 {"status":"success","data":{"mlwatch_build_info":[{"type":"info","help":"Version of the running mlwatch; the value is always 1.","unit":""}]}}' \
    "$(call "$AGENT_URL/api/v1/metadata?metric=mlwatch_build_info")"
expect_eq "metadata of a store family with a unit" \
    '200 {"status":"success","data":{"mlwatch_store_disk_usage_bytes":[{"type":"gauge","help":"Bytes the store uses on disk (WAL, chunks, blocks, snapshot).","unit":"bytes"}]}}' \
    "$(call "$AGENT_URL/api/v1/metadata?metric=mlwatch_store_disk_usage_bytes")"

# Prometheus 3's annotations: "warnings" and "infos" after "data", each
# text with the LINE:COL of what it names, at most 10 of each and then how
# many were left out; a key with nothing in it is absent. Loaded here, after
# the series and labels checks above, which list every name.
cat >"$WORK/queue.txt" <<DATA
api_queue{instance="a"} ${T0}000 5
api_queue{instance="a"} $((T0 + 60))000 10
DATA
expect_eq "remote write (api_queue)" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/queue.txt")"
expect_eq "info: rate of a name no counter has" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1700000060,"0.08333333333333333"]}]},"infos":["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"api_queue\" (1:6)"]}' \
    "$(call --get --data-urlencode 'query=rate(api_queue[2m])' --data-urlencode "time=$((T0 + 60))" "$AGENT_URL/api/v1/query")"
expect_eq "no annotation: rate of a counter" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a","job":"api"},"value":[1700000060,"0.5833333333333334"]}]}}' \
    "$(call --get --data-urlencode 'query=rate(api_req_total{instance="a"}[2m])' --data-urlencode "time=$((T0 + 60))" "$AGENT_URL/api/v1/query")"
expect_eq "warning: sort in a range query, on the query's second line (form POST)" \
    '200 {"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"5"],[1700000060,"10"]]}]},"warnings":["PromQL warning: sort is ineffective for range queries since results are always ordered by labels (2:3)"]}' \
    "$(call --data-urlencode $'query=sum(\n  sort(api_queue))' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" --data-urlencode 'step=60' "$AGENT_URL/api/v1/query_range")"
expect_eq "a warning and an info on a scalar answer" \
    '200 {"status":"success","data":{"resultType":"scalar","result":[1700000060,"+Inf"]},"warnings":["PromQL warning: quantile value should be between 0 and 1, got 2 (1:17)"],"infos":["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"api_queue\" (1:25)"]}' \
    "$(call --get --data-urlencode 'query=scalar(quantile(2, rate(api_queue[2m])))' --data-urlencode "time=$((T0 + 60))" "$AGENT_URL/api/v1/query")"
# q = 2 ... 12 at 11 steps, and no le: 12 warnings, 10 answered.
want=""
for q in 2 3 4 5 6 7 8 9 10 11; do
    want="$want\"PromQL warning: quantile value should be between 0 and 1, got $q (1:20)\","
done
expect_eq "at most 10 warnings, then how many more" \
    "200 {\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]},\"warnings\":[${want}\"2 more warning annotations omitted\"]}" \
    "$(call --get --data-urlencode 'query=histogram_quantile(time() - 1699999998, api_queue)' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 10))" --data-urlencode 'step=1' "$AGENT_URL/api/v1/query_range")"

# The engine's limits from the command line, on the same data: a lookback
# of 20 s no longer sees a sample 30 s old, and a budget of 5 samples
# serves an instant vector of 2 and refuses a range query of 7 steps.
kill "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
start_agent --interval 10s --disable-collectors gpu --query-lookback-delta 20s --query-max-samples 5
expect_eq "--query-lookback-delta" \
    '200 {"status":"success","data":{"resultType":"vector","result":[]}}' \
    "$(call --get --data-urlencode 'query=api_req_total' --data-urlencode "time=$((T0 + 30))" "$AGENT_URL/api/v1/query")"
expect_eq "within --query-lookback-delta" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"api_req_total","instance":"a","job":"api"},"value":[1700000010,"10"]},{"metric":{"__name__":"api_req_total","instance":"b","job":"api"},"value":[1700000010,"1.5"]}]}}' \
    "$(call --get --data-urlencode 'query=api_req_total' --data-urlencode "time=$((T0 + 10))" "$AGENT_URL/api/v1/query")"
expect_eq "--query-max-samples" \
    '422 {"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}' \
    "$(call --get --data-urlencode 'query=api_req_total' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" --data-urlencode 'step=10' "$AGENT_URL/api/v1/query_range")"
done_ok
