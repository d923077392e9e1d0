#!/usr/bin/env bash
# ns_scope.sh - namespace-scoped reads (docs/security.md, issue 24 item 2):
#   - a token bound to namespaces by --access-policy sees only their series
#     through every read API: query (selectors, {__name__=~".+"},
#     {namespace!=...}, count, count by, count_values, absent,
#     absent_over_time, label_replace onto namespace, or/unless across
#     namespaces, subqueries, error texts), query_range, series, labels,
#     label values, metadata, the store's count and export, findings;
#   - node-level series (no namespace label) hidden or visible per binding;
#   - a user and groups from a --trusted-proxy's headers map to namespaces;
#     an unknown user gets 403; from any other address the headers are
#     ignored; namespaces are exact strings (regex metacharacters escaped);
#   - a plain --read-token-file token sees everything;
#   - a rewritten policy takes effect without a restart;
#   - a malformed policy stops the agent at start, naming file and line.
source "$(dirname "$0")/lib.sh"
HERE="$MLWATCH_SRC/tests/integration"
LOADER="$WORK/promql_load"
cc -O1 -o "$LOADER" "$HERE/promql_load.c" -lsnappy -lcurl || fail "cannot compile the loader"

T0=1700000000
cat >"$WORK/data.txt" <<DATA
cpu_seconds{namespace="team-a",pod="a1"} ${T0}000 10
cpu_seconds{namespace="team-a",pod="a2"} ${T0}000 20
cpu_seconds{namespace="team-b",pod="b1"} ${T0}000 30
cpu_seconds{namespace="tab",pod="t1"} ${T0}000 40
secret_metric{namespace="team-b",pod="b1"} ${T0}000 1
node_temp{sensor="cpu"} ${T0}000 50
#meta cpu_seconds 1 seconds CPU time.
#meta secret_metric 2 - Only team-b has it.
#meta node_temp 2 celsius Node temperature.
DATA

READ=read-token-AAAAAAAAAAAAAAAAAAAA
TEAMA=team-a-token-BBBBBBBBBBBBBBBBBB
printf '%s\n' "$READ" >"$WORK/read.tok"
printf '%s\n' "$TEAMA" >"$WORK/team-a.tok"
cat >"$WORK/policy.yaml" <<YAML
bindings:
  - token_file: $WORK/team-a.tok
    namespaces: [team-a]
    node_series: hidden
  - user: alice
    namespaces: [team-a]
    node_series: visible
  - group: bteam
    namespaces: ["team-b"]
  - user: carol
    namespaces: [t.b]
YAML

# --query-url: a server that does not know the scope (nothing listens there:
# a scoped reader must be refused before any forwarding).
start_agent --interval 10s --disable-collectors gpu --query-max-queued 32 --read-token-file "$WORK/read.tok" \
    --access-policy "$WORK/policy.yaml" --trusted-proxy 127.0.0.1/32 --query-url "http://127.0.0.1:$(free_port)"
expect_eq "remote write" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/data.txt")"

# call [CURL-ARGS...] PATH: prints "STATUS BODY".
call() {
    local p=${*: -1}
    curl -s -o "$WORK/body" -w '%{http_code}' "${@:1:$#-1}" "$AGENT_URL$p" >"$WORK/code"
    echo "$(cat "$WORK/code") $(cat "$WORK/body")"
}
# q WHO QUERY: an instant query at T0+30 as WHO (a token, or user:NAME[:GROUPS]).
who_args() {
    case $1 in
    user:*)
        local u=${1#user:} g=""
        case $u in *:*) g=${u#*:} u=${u%%:*} ;; esac
        WHO=(-H "X-Forwarded-User: $u")
        if [ -n "$g" ]; then WHO+=(-H "X-Forwarded-Groups: $g"); fi
        ;;
    *) WHO=(-H "Authorization: Bearer $1") ;;
    esac
}
q() {
    who_args "$1"
    call "${WHO[@]}" --get --data-urlencode "query=$2" --data-urlencode "time=$((T0 + 30))" /api/v1/query
}
vec() { echo "200 {\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[$1]}}"; }
EMPTY=$(vec "")
TS=1700000030
A1='{"metric":{"__name__":"cpu_seconds","namespace":"team-a","pod":"a1"},"value":[1700000030,"10"]}'
A2='{"metric":{"__name__":"cpu_seconds","namespace":"team-a","pod":"a2"},"value":[1700000030,"20"]}'
one() { vec "{\"metric\":{$1},\"value\":[$TS,\"$2\"]}"; }

# 1. A token bound to team-a (node-level series hidden).
expect_eq "selector" "$(vec "$A1,$A2")" "$(q "$TEAMA" 'cpu_seconds')"
expect_eq "every name" "$(vec "$A1,$A2")" "$(q "$TEAMA" '{__name__=~".+"}')"
expect_eq "count of every series" "$(one "" 2)" "$(q "$TEAMA" 'count({__name__=~".+"})')"
expect_eq "count by namespace" "$(one '"namespace":"team-a"' 2)" "$(q "$TEAMA" 'count by (namespace) ({__name__=~".+"})')"
expect_eq "namespace!=" "$EMPTY" "$(q "$TEAMA" '{__name__=~".+",namespace!="team-a"}')"
expect_eq "namespace=~.+" "$(one "" 2)" "$(q "$TEAMA" 'count({namespace=~".+"})')"
expect_eq "namespace=~.*" "$(one "" 2)" "$(q "$TEAMA" 'count({__name__=~"c.*|s.*|n.*",namespace=~".*"})')"
expect_eq "another namespace, counted" "$EMPTY" "$(q "$TEAMA" 'count(cpu_seconds{namespace="team-b"})')"
expect_eq "absent says nothing" "$(one '"namespace":"team-b"' 1)" "$(q "$TEAMA" 'absent(cpu_seconds{namespace="team-b"})')"
expect_eq "absent_over_time says nothing" "$(one "" 1)" "$(q "$TEAMA" 'absent_over_time(secret_metric[1h])')"
expect_eq "label_replace onto namespace" "$(one "" 30)" "$(q "$TEAMA" 'sum(label_replace(cpu_seconds, "namespace", "team-b", "namespace", ".*"))')"
expect_eq "label_join onto namespace" "$(one "" 2)" "$(q "$TEAMA" 'count(label_join(cpu_seconds, "namespace", "", "pod"))')"
expect_eq "or across namespaces" "$(one "" 30)" "$(q "$TEAMA" 'sum(cpu_seconds or on() secret_metric)')"
expect_eq "unless across namespaces" "$(one "" 2)" "$(q "$TEAMA" 'count(cpu_seconds unless on(pod) cpu_seconds{namespace="team-b"})')"
expect_eq "group_left onto another namespace" "$EMPTY" "$(q "$TEAMA" 'cpu_seconds * on() group_left secret_metric')"
expect_eq "count_values" "$(vec "{\"metric\":{\"v\":\"10\"},\"value\":[$TS,\"1\"]},{\"metric\":{\"v\":\"20\"},\"value\":[$TS,\"1\"]}")" \
    "$(q "$TEAMA" 'count_values("v", cpu_seconds)')"
expect_eq "subquery" "$(one "" 2)" "$(q "$TEAMA" 'max_over_time(count({__name__=~".+"})[10m:10s])')"
expect_eq "timestamp() of another namespace" "$EMPTY" "$(q "$TEAMA" 'timestamp(secret_metric)')"
expect_eq "node-level series hidden" "$EMPTY" "$(q "$TEAMA" 'count(node_temp)')"
# The scope is exact strings: team.a would match team-a as a regex.
expect_eq "an error echoes nothing of others" \
    '422 {"status":"error","errorType":"execution","error":"vector cannot contain metrics with the same labelset"}' \
    "$(q "$TEAMA" 'label_replace(cpu_seconds, "pod", "x", "", "")')"
expect_eq "query_range" \
    '200 {"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"2"],[1700000030,"2"],[1700000060,"2"]]}]}}' \
    "$(who_args "$TEAMA"; call "${WHO[@]}" --get --data-urlencode 'query=count({__name__=~".+"})' -d start=$T0 -d end=$((T0 + 60)) -d step=30 /api/v1/query_range)"
who_args "$TEAMA"
expect_eq "series" \
    '200 {"status":"success","data":[{"__name__":"cpu_seconds","namespace":"team-a","pod":"a1"},{"__name__":"cpu_seconds","namespace":"team-a","pod":"a2"}]}' \
    "$(call "${WHO[@]}" --get --data-urlencode 'match[]={__name__=~".+"}' /api/v1/series)"
expect_eq "labels" '200 {"status":"success","data":["__name__","namespace","pod"]}' "$(call "${WHO[@]}" /api/v1/labels)"
expect_eq "label values: namespace" '200 {"status":"success","data":["team-a"]}' "$(call "${WHO[@]}" /api/v1/label/namespace/values)"
expect_eq "label values: __name__" '200 {"status":"success","data":["cpu_seconds"]}' "$(call "${WHO[@]}" /api/v1/label/__name__/values)"
expect_eq "label values: pod, matched on another namespace" '200 {"status":"success","data":[]}' \
    "$(call "${WHO[@]}" --get --data-urlencode 'match[]=secret_metric' /api/v1/label/pod/values)"
expect_eq "metadata" '200 {"status":"success","data":{"cpu_seconds":[{"type":"counter","help":"CPU time.","unit":"seconds"}]}}' \
    "$(call "${WHO[@]}" /api/v1/metadata)"
expect_eq "metadata of another namespace's metric" '200 {"status":"success","data":{}}' \
    "$(call "${WHO[@]}" /api/v1/metadata?metric=secret_metric)"
expect_eq "store count of another namespace" "200 series 0
samples 0" "$(call "${WHO[@]}" '/api/v1/store/count?match=secret_metric')"
expect_eq "store count" "200 series 2
samples 2" "$(call "${WHO[@]}" '/api/v1/store/count?match=cpu_seconds')"
expect_eq "the store's totals" '403 {"status":"error","errorType":"execution","error":"a namespace-scoped reader cannot see the store'"'"'s totals (docs/security.md)"}' \
    "$(call "${WHO[@]}" /api/v1/status/tsdb)"
for p in runtimeinfo flags config walreplay; do
    expect_eq "status/$p" '403 {"status":"error","errorType":"execution","error":"a namespace-scoped reader cannot see the agent'"'"'s configuration and state (docs/security.md)"}' \
        "$(call "${WHO[@]}" /api/v1/status/$p)"
done
expect_eq "status/buildinfo (Grafana's probe)" 200 "$(call "${WHO[@]}" /api/v1/status/buildinfo | cut -d' ' -f1)"
expect_eq "the UI's --query-url proxy" "403" "$(call "${WHO[@]}" '/ui/api/v1/query?query=up' | cut -d' ' -f1)"
expect_eq "store export of another namespace" "200 " "$(call "${WHO[@]}" '/api/v1/store/export?match=secret_metric')"

# 2. The read token sees everything.
expect_eq "unscoped: status/flags" 200 "$(call -H "Authorization: Bearer $READ" /api/v1/status/flags | cut -d' ' -f1)"
expect_eq "unscoped: the UI's --query-url proxy (nothing listens there)" 502 "$(call -H "Authorization: Bearer $READ" '/ui/api/v1/query?query=up' | cut -d' ' -f1)"
expect_eq "unscoped: count by namespace" \
    "$(vec "{\"metric\":{\"namespace\":\"tab\"},\"value\":[$TS,\"1\"]},{\"metric\":{\"namespace\":\"team-a\"},\"value\":[$TS,\"2\"]},{\"metric\":{\"namespace\":\"team-b\"},\"value\":[$TS,\"2\"]},{\"metric\":{},\"value\":[$TS,\"1\"]}")" \
    "$(q "$READ" 'count by (namespace) ({__name__=~".+"})')"
expect_eq "unscoped: another namespace" "$(one "" 1)" "$(q "$READ" 'count(cpu_seconds{namespace="team-b"})')"
expect_eq "unscoped: secret metadata" '200 {"status":"success","data":{"secret_metric":[{"type":"gauge","help":"Only team-b has it.","unit":""}]}}' \
    "$(call -H "Authorization: Bearer $READ" /api/v1/metadata?metric=secret_metric)"

# Concurrent requests of both identities: each answer has its own scope
# (24 at once: the agent above queues up to 32, so none is refused 503).
par=()
for i in $(seq 1 12); do
    curl -s -H "Authorization: Bearer $TEAMA" --get --data-urlencode 'query=count({__name__=~".+"})' \
        -d time=$TS "$AGENT_URL/api/v1/query" >"$WORK/par-a-$i" &
    par+=($!)
    curl -s -H "Authorization: Bearer $READ" --get --data-urlencode 'query=count({__name__=~".+"})' \
        -d time=$TS "$AGENT_URL/api/v1/query" >"$WORK/par-r-$i" &
    par+=($!)
done
wait "${par[@]}"
expect_eq "concurrent: scoped answers" 12 "$(grep -l '"value":\[1700000030,"2"\]' "$WORK"/par-a-* | wc -l)"
expect_eq "concurrent: unscoped answers" 12 "$(grep -l '"value":\[1700000030,"6"\]' "$WORK"/par-r-* | wc -l)"

# 3. Users and groups from the trusted proxy (127.0.0.1).
expect_eq "user alice: team-a and node-level" \
    "$(vec "{\"metric\":{\"namespace\":\"team-a\"},\"value\":[$TS,\"2\"]},{\"metric\":{},\"value\":[$TS,\"1\"]}")" \
    "$(q user:alice 'count by (namespace) ({__name__=~".+"})')"
expect_eq "user bob in group bteam" "$(one '"namespace":"team-b"' 2)" "$(q 'user:bob:x, bteam' 'count by (namespace) ({__name__=~".+"})')"
expect_eq "group names are exact" "$EMPTY" "$(q 'user:alice:bteamx' 'count(cpu_seconds{namespace="team-b"})')"
expect_eq "an unknown user" "403 user 'mallory' has no namespaces in the access policy (--access-policy)" \
    "$(q user:mallory 'count(cpu_seconds)')"
expect_eq "namespaces are exact strings (t.b is not tab)" "$EMPTY" "$(q user:carol 'count(cpu_seconds)')"
expect_eq "no identity" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/api/v1/labels")"

# 4. A rewritten policy takes effect without a restart.
sed 's/namespaces: \[team-a\]$/namespaces: [team-b]/' "$WORK/policy.yaml" >"$WORK/policy.new"
mv "$WORK/policy.new" "$WORK/policy.yaml"
sleep 1.2
expect_eq "re-read policy" "$(one '"namespace":"team-b"' 2)" "$(q "$TEAMA" 'count by (namespace) ({__name__=~".+"})')"
printf 'bindings:\n  - user: x\n    namespace: [a]\n' >"$WORK/policy.new"
mv "$WORK/policy.new" "$WORK/policy.yaml"
sleep 1.2
expect_eq "a malformed rewrite keeps the last policy" "$(one '"namespace":"team-b"' 2)" "$(q "$TEAMA" 'count by (namespace) ({__name__=~".+"})')"
expect_eq "and says why" 1 "$(grep -c "access policy $WORK/policy.yaml:3:5: unknown key 'namespace' (token_file, user, group, namespaces, node_series); keeping the last policy" "$WORK/agent.log")"
stop_process "$AGENT_PID"

# 5. From an address that is not a trusted proxy, the headers are ignored.
cat >"$WORK/policy.yaml" <<YAML
bindings:
  - token_file: $WORK/team-a.tok
    namespaces: [team-a]
  - user: alice
    namespaces: [team-b, tab]
YAML
start_agent --interval 10s --disable-collectors gpu --access-policy "$WORK/policy.yaml" --trusted-proxy 10.0.0.0/8
expect_eq "untrusted: a user header alone" 401 "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-User: alice' "$AGENT_URL/api/v1/labels")"
expect_eq "untrusted: a token with a user header" "$(one '"namespace":"team-a"' 2)" \
    "$(call -H "Authorization: Bearer $TEAMA" -H 'X-Forwarded-User: alice' --get --data-urlencode 'query=count by (namespace) ({__name__=~".+"})' -d time=$TS /api/v1/query)"
stop_process "$AGENT_PID"

# 6. A malformed policy stops the agent at start, naming file and line.
bad_policy() { # TEXT: prints the agent's message
    printf '%b' "$1" >"$WORK/bad.yaml"
    local rc=0
    "$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
        --access-policy "$WORK/bad.yaml" >"$WORK/bad.log" 2>&1 || rc=$?
    echo "$rc $(cat "$WORK/bad.log")"
}
expect_eq "an unknown key" "1 mlwatch: --access-policy $WORK/bad.yaml:3:5: unknown key 'namespace' (token_file, user, group, namespaces, node_series)" \
    "$(bad_policy 'bindings:\n  - user: x\n    namespace: [a]\n')"
expect_eq "two subjects" "1 mlwatch: --access-policy $WORK/bad.yaml:3:5: a binding has exactly one of token_file, user and group" \
    "$(bad_policy 'bindings:\n  - user: x\n    group: y\n    namespaces: [a]\n')"
expect_eq "node_series" "1 mlwatch: --access-policy $WORK/bad.yaml:3:18: node_series must be visible or hidden" \
    "$(bad_policy 'bindings:\n  - user: x\n    node_series: yes\n    namespaces: [a]\n')"
expect_eq "sees nothing" "1 mlwatch: --access-policy $WORK/bad.yaml:2:5: namespaces is empty and node_series hidden: this binding would see nothing" \
    "$(bad_policy 'bindings:\n  - user: x\n    namespaces: []\n')"
expect_eq "a missing token file" "1 mlwatch: --access-policy $WORK/bad.yaml:2: token_file $WORK/none.tok: No such file or directory" \
    "$(bad_policy "bindings:\\n  - token_file: $WORK/none.tok\\n    namespaces: [a]\\n")"
expect_eq "no bindings" "1 mlwatch: --access-policy $WORK/bad.yaml:1:11: bindings is empty (the policy binds no one)" \
    "$(bad_policy 'bindings: []\n')"
expect_eq "syntax" "1 mlwatch: --access-policy $WORK/bad.yaml:3:1: YAML syntax error: did not find expected ',' or ']'" \
    "$(bad_policy 'bindings:\n  - user: [x\n')"
rc=0
"$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" --state-dir "$WORK/state" \
    --trusted-proxy 10.0.0.0/33 >"$WORK/bad.log" 2>&1 || rc=$?
expect_eq "a bad proxy address" "1 mlwatch: --trusted-proxy: '10.0.0.0/33' is not an address or CIDR (a.b.c.d/n, x::/n), or more than 32 of them" \
    "$rc $(cat "$WORK/bad.log")"

# 7. Findings: the gpu-node fixture's GPU shared by three pods of namespace
# "shared" (tests/integration/doctor.sh) gives three findings.
: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
cp "$MLWATCH_SRC/tests/fakenvml/scenarios/timeshare.txt" "$FAKE_NVML_SCENARIO"
SHARED=shared-token-CCCCCCCCCCCCCCCCCCCC
printf '%s\n' "$SHARED" >"$WORK/shared.tok"
cat >"$WORK/policy.yaml" <<YAML
bindings:
  - token_file: $WORK/team-a.tok
    namespaces: [ml-team]
    node_series: visible
  - token_file: $WORK/shared.tok
    namespaces: [shared]
YAML
start_agent --root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu \
    --nvml-library "$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1" --rocm-library none \
    --interval 200ms --gpu-process-interval 200ms --access-policy "$WORK/policy.yaml"
findings() { curl -sf -H "Authorization: Bearer $1" "$AGENT_URL/api/v1/findings" | jq -r '[.findings[].pod] | join(",")'; }
three() { [ "$(findings "$SHARED" | tr ',' '\n' | grep -c .)" = 3 ]; }
WAIT_EVERY=0.2 wait_for 10 three || true
expect_eq "findings of its namespace" "notebook-a,notebook-b,notebook-c" "$(findings "$SHARED" | tr ',' '\n' | sort | paste -sd,)"
expect_eq "findings of another namespace" "" "$(findings "$TEAMA")"
done_ok
