#!/usr/bin/env bash
# native_histograms_api.sh - native histograms end to end: sent by remote
# write 1.0 (TimeSeries.histograms, through the loader), answered by the
# query API in Prometheus's shape ("histogram" in a vector; "values" and
# "histograms" side by side in a matrix; buckets with their boundary rule,
# empty ones left out), and a function of them.
source "$(dirname "$0")/lib.sh"
HERE="$MLWATCH_SRC/tests/integration"
LOADER="$WORK/promql_load"
cc -O1 -o "$LOADER" "$HERE/promql_load.c" -lsnappy -lcurl || fail "cannot compile the loader"

T0=1700000000
# H|schema|hint|zero_threshold|zero_count|count|sum|POS|NEG|CUSTOM
cat >"$WORK/data.txt" <<DATA
h ${T0}000 H|0|0|0.001|1|6|5|0,1,2,0,1|0,1|
m ${T0}000 1
m $((T0 + 60))000 H|0|0|0|0|1|2|0,1||
DATA
start_agent --interval 10s --disable-collectors gpu
expect_eq "remote write" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/data.txt")"

call() {
    curl -s -o "$WORK/body" -w '%{http_code}' "$@" >"$WORK/code"
    echo "$(cat "$WORK/code") $(cat "$WORK/body")"
}

expect_eq "instant vector of a histogram" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"h"},"histogram":[1700000000,{"count":"6","sum":"5","buckets":[[1,"-1","-0.5","1"],[3,"-0.001","0.001","1"],[0,"0.5","1","1"],[0,"1","2","2"],[0,"4","8","1"]]}]}]}}' \
    "$(call --get --data-urlencode 'query=h' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "floats and histograms of one series in a range answer" \
    '200 {"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"m"},"values":[[1700000000,"1"]],"histograms":[[1700000060,{"count":"1","sum":"2","buckets":[[0,"0.5","1","1"]]}]]}]}}' \
    "$(call --get --data-urlencode 'query=m' --data-urlencode "start=$T0" --data-urlencode "end=$((T0 + 60))" --data-urlencode 'step=60' "$AGENT_URL/api/v1/query_range")"
expect_eq "histogram_count" \
    '200 {"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"6"]}]}}' \
    "$(call --get --data-urlencode 'query=histogram_count(h)' --data-urlencode "time=$T0" "$AGENT_URL/api/v1/query")"
expect_eq "a malformed histogram is refused" \
    400 "$(printf 'x %s000 H|9|0|0|0|1|1|0,1||\n' "$T0" >"$WORK/bad.txt"; "$LOADER" "$AGENT_URL/api/v1/write" "$WORK/bad.txt" | tail -1)"
done_ok
