#!/usr/bin/env bash
# remote_write_filters.sh - the agent remote-writes to a real Prometheus and
# a real VictoriaMetrics (Debian's), each endpoint with its own
# write_relabel_configs; each receiver must hold exactly the series an
# independent implementation (Python's re and hashlib) says the rules keep.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh test)"
command -v victoria-metrics >/dev/null || fail "victoria-metrics is not installed (scripts/install-deps.sh test)"

start_prom "$WORK/prom"
start_vm "$WORK/vm"
root=$(fixture_copy rapl-cpufreq)
cat >"$WORK/mlwatch.yml" <<YAML
external_labels: {node: '\${MLWATCH_TEST_NODE}'}   # from the environment, as a DaemonSet does
remote_write:
  - url: $PROM/api/v1/write
    name: prom
    queue_config: {batch_send_deadline: 200ms, max_shards: 3}
    write_relabel_configs:
      - source_labels: [__name__]
        regex: 'mlwatch_(cpu_seconds_total|load\d+|rapl_.*)'
        action: keep
      - source_labels: [mode]
        regex: 'guest|steal'
        action: drop
      - source_labels: [cpu, mode]
        regex: '(\d+);(.*)'
        target_label: cpu_mode
        replacement: 'c\$1-\$2'
      - regex: 'mode'
        action: labeldrop
  - url: $VM/api/v1/write
    name: vm
    external_labels: {node: n2, site: '\$\$s'}
    queue_config: {batch_send_deadline: 200ms}
    write_relabel_configs:
      - source_labels: [__name__]
        regex: 'mlwatch_(collector|process|remote_write|filesystem)_.*'
        action: drop
      - source_labels: [__name__, node]
        modulus: 4
        target_label: __tmp_shard
        action: hashmod
      - source_labels: [__tmp_shard]
        regex: '0|2'
        action: keep
      - regex: '__tmp_.*'
        action: labeldrop
YAML
export MLWATCH_TEST_NODE=n1
start_agent --root "$root" --interval 300ms --data-dir "$WORK/data" \
    --config "$WORK/mlwatch.yml"
sleep 2
curl -s "$AGENT_URL/metrics" >"$WORK/exposition.txt"
wait_drained 30
sleep 1

# Expected series of each endpoint, from the exposition and Python's own
# relabelling; actual series from each receiver's series API.
python3 - "$WORK/exposition.txt" "$WORK/expected" <<'PY'
import hashlib, json, re, sys
series = set()
for line in open(sys.argv[1]):
    if line.startswith('#') or not line.strip():
        continue
    m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ', line)
    labels = {'__name__': m.group(1)}
    for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''):
        v = v.replace('\\"', '"').replace('\\n', '\n').replace('\\\\', '\\')
        if v:
            labels[k] = v
    series.add(json.dumps(labels, sort_keys=True))
def prom(ls):
    ls = dict({'node': 'n1'}, **ls)  # a series' own label wins
    if not re.fullmatch(r'mlwatch_(cpu_seconds_total|load[0-9]+|rapl_.*)', ls['__name__']): return None
    if re.fullmatch('guest|steal', ls.get('mode', '')): return None
    m = re.fullmatch(r'([0-9]+);(.*)', ls.get('cpu', '') + ';' + ls.get('mode', ''))
    if m: ls['cpu_mode'] = 'c%s-%s' % (m.group(1), m.group(2))
    ls.pop('mode', None)
    return ls
def vm(ls):
    ls = dict({'node': 'n2', 'site': '$s'}, **ls)
    if re.fullmatch('mlwatch_(collector|process|remote_write|filesystem)_.*', ls['__name__']): return None
    h = int.from_bytes(hashlib.md5((ls['__name__'] + ';' + ls['node']).encode()).digest()[8:], 'big') % 4
    return ls if h in (0, 2) else None
for name, f in (('prom', prom), ('vm', vm)):
    out = set()
    for s in series:
        r = f(json.loads(s))
        if r: out.add(json.dumps(r, sort_keys=True))
    open(sys.argv[2] + '.' + name, 'w').write('\n'.join(sorted(out)) + '\n')
PY

actual() { # URL FILE
    curl -s --get --data-urlencode 'match[]={__name__=~".+"}' --data-urlencode "start=0" "$1/api/v1/series" |
        python3 -c 'import json,sys; print("\n".join(sorted(json.dumps(s, sort_keys=True) for s in json.load(sys.stdin)["data"])))' >"$2"
}
actual "$PROM" "$WORK/actual.prom"
actual "$VM" "$WORK/actual.vm"
for r in prom vm; do
    n=$(wc -l <"$WORK/expected.$r")
    [ "$n" -gt 5 ] || fail "$r: only $n series expected: the fixture changed?"
    diff "$WORK/expected.$r" "$WORK/actual.$r" >&2 || fail "$r: series differ (< expected, > on the receiver)"
    ok
done
# Some series were dropped by each filter, and the agent counted them.
[ "$(agent_metric mlwatch_remote_write_samples_dropped_total 'reason="relabel"')" -gt 0 ] || fail "relabel drops not counted"
expect_eq "failed samples" 0 "$(agent_metric mlwatch_remote_write_samples_failed_total)"
echo "prom: $(wc -l <"$WORK/expected.prom") series, vm: $(wc -l <"$WORK/expected.vm") series"
done_ok
