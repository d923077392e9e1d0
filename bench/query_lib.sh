#!/bin/bash
# query_lib.sh - the query phase shared by query_compare.sh (load, then
# query) and query_requery.sh (query stores saved by an earlier load):
# four dashboard-shaped range queries, RUNS runs each going round-robin
# over the servers, then per query and server the median latency, peak
# RSS and its growth, the series count, a point-by-point comparison with a
# reference server, and a Markdown table. Sourced, never run alone.
#
# Inputs: D (work folder, qc_workdir), SERVERS ("name:pid:port ..."; names mlwatch,
# mlbase, prometheus, vm), QC_REF (the server whose answers the mlwatch
# builds are compared with), start, end, RUNS, EXTRA_QUERY (optional).
#
# Latency is curl's time_total (request sent to last byte read), without
# the start of the curl process itself that a wall clock around curl
# includes (~5-10 ms here); that wall clock is printed too
# (wall_median_ms), as ../shared/bench/query_anchor.sh measures it.
# Memory: before each query's runs the server's peak RSS is reset
# (/proc/PID/clear_refs 5, needs root; without it the peak is the
# lifetime VmHWM), after them VmHWM is read.

# The work folder D (removed at exit) and the servers started, PIDS
# (killed at exit).
qc_workdir() { # PREFIX
    D=$(mktemp -d "/tmp/$1-XXXXXX")
    PIDS=()
    trap qc_cleanup EXIT
}
qc_cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$D"
}
wait_ready() { # URL PID: until it answers; fails when the server died (a port in use)
    until curl -sf -o /dev/null "$1"; do
        kill -0 "$2" 2>/dev/null || { echo "server for $1 exited; see $D/*.log" >&2; exit 1; }
        sleep 0.1
    done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/{print $2}' "/proc/$1/status"; }

QUERIES=('sum by (namespace) (rate(container_cpu_seconds_total[5m]))'
    'topk(10, avg_over_time(gpu_power_watts[5m]))'
    'gpu_utilization_ratio{pod="train-7-worker-3"}'
    'sum(gpu_memory_used_bytes) by (instance)')
if [ -n "${EXTRA_QUERY:-}" ]; then QUERIES+=("$EXTRA_QUERY"); fi

# The median of a list of numbers.
qc_median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }

qc_run_queries() {
    local q qi=0 s name pid port t0 code tt mj
    : >"$D/results"
    for q in "${QUERIES[@]}"; do
        qi=$((qi + 1))
        declare -A before=() times=() walls=() errors=()
        for s in $SERVERS; do
            IFS=: read -r name pid port <<<"$s"
            before[$name]=$(rss_kb "$pid")
            echo 5 >"/proc/$pid/clear_refs" 2>/dev/null
            times[$name]=""
            walls[$name]=""
            errors[$name]=0
        done
        for _ in $(seq "$RUNS"); do
            for s in $SERVERS; do
                IFS=: read -r name pid port <<<"$s"
                t0=$(date +%s%N)
                read -r code tt < <(curl -s -o "$D/$name.json" -w '%{http_code} %{time_total}' \
                    "http://127.0.0.1:$port/api/v1/query_range" \
                    --data-urlencode "query=$q" -d "start=$start" -d "end=$end" -d step=15)
                walls[$name]="${walls[$name]} $((($(date +%s%N) - t0) / 1000000))"
                times[$name]="${times[$name]} $(awk -v t="$tt" 'BEGIN{printf "%.1f", t * 1000}')"
                if [ "$code" != 200 ]; then
                    echo "$name HTTP $code: $(head -c 300 "$D/$name.json")"
                    errors[$name]=$((${errors[$name]} + 1))
                fi
            done
        done
        for s in $SERVERS; do
            IFS=: read -r name pid port <<<"$s"
            local hwm nser runs
            hwm=$(hwm_kb "$pid")
            nser=$(grep -o '"metric"' "$D/$name.json" | wc -l)
            runs=$(echo "${times[$name]}" | sed 's/^ //' | tr ' ' ,)
            # shellcheck disable=SC2086 # the runs' times, split into words
            echo "q$qi $name median_ms=$(qc_median ${times[$name]}) wall_median_ms=$(qc_median ${walls[$name]}) runs_ms=$runs series_out=$nser errors=${errors[$name]} peak_MB=$((hwm / 1024)) growth_MB=$(((hwm - ${before[$name]}) / 1024))" |
                tee -a "$D/results"
        done
        # Beyond the series count: each mlwatch build's answer against the
        # reference's, label sets and every point (values within 1e-9).
        for mj in mlwatch mlbase; do
            [ "$mj" != "$QC_REF" ] && [ -f "$D/$mj.json" ] && [ -f "$D/$QC_REF.json" ] || continue
            if [ "${errors[$mj]:-0}" != 0 ] || [ "${errors[$QC_REF]:-0}" != 0 ]; then
                echo "q$qi $mj compare_with_$QC_REF skipped: an error answer"
                continue
            fi
            python3 - "$D/$mj.json" "$D/$QC_REF.json" <<'PY' | sed "s/^/q$qi $mj /"
import json, math, sys
def load(f):
    r = json.load(open(f))["data"]["result"]
    return {tuple(sorted(s["metric"].items())): s["values"] for s in r}
m, p = load(sys.argv[1]), load(sys.argv[2])
bad = len(set(m) ^ set(p))
for k in set(m) & set(p):
    a, b = m[k], p[k]
    if [x[0] for x in a] != [x[0] for x in b]:
        bad += 1; continue
    for (_, x), (_, y) in zip(a, b):
        x, y = float(x), float(y)
        if not (x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9 * max(abs(x), abs(y))):
            bad += 1; break
print("compare_with_%s series=%d differing=%d" % (sys.argv[2].split("/")[-1][:-5], len(m), bad))
PY
        done
        echo "q$qi = $q" | tee -a "$D/results"
    done
}

# The table: one latency column per server, ratios of mlwatch to each other
# server, peak memory (growth) per server.
qc_table() {
    python3 - "$D/results" "$SERVERS" <<'PY'
import re, sys
order = [s.split(":")[0] for s in sys.argv[2].split()]
rows, names = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r'(q\d+) = (.*)', line)
    if m:
        names[m.group(1)] = m.group(2).strip(); continue
    f = line.split()
    rows.setdefault(f[0], {})[f[1]] = dict(re.findall(r'(\w+)=(-?[0-9.]+)', line))
title = {"mlwatch": "mlwatch", "mlbase": "mlwatch (base)", "prometheus": "Prometheus", "vm": "VM"}
others = [o for o in order if o != "mlwatch"]
print()
print("| query | " + " | ".join(title[o] + " ms" for o in order) + " | " +
      " | ".join("mlwatch/" + title[o] for o in others) + " | peak MB (growth) " +
      " / ".join(title[o] for o in order) + " | series |")
print("|---|" + "---:|" * (len(order) + len(others)) + "---|---|")
for q in sorted(rows):
    r = rows[q]
    ms = lambda o: float(r[o]['median_ms'])
    # a server that refused the query (any run not 200) has no latency
    ok = lambda o: r[o].get('errors', '0') == '0'
    cell = lambda o: "%.1f" % ms(o) if ok(o) else "refused"
    ratio = lambda o: "%.2f" % (ms("mlwatch") / max(ms(o), 0.1)) if ok(o) and ok("mlwatch") else "-"
    mem = " / ".join("%s (%s)" % (r[o]['peak_MB'], r[o]['growth_MB']) for o in order)
    series = "/".join(r[o]['series_out'] for o in order)
    print("| `%s` | %s | %s | %s | %s |" % (
        names[q], " | ".join(cell(o) for o in order),
        " | ".join(ratio(o) for o in others), mem, series))
PY
}
