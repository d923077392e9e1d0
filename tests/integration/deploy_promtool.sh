#!/usr/bin/env bash
# deploy_promtool.sh - the Prometheus side of deploy/, with the real promtool:
#   - deploy/prometheus/scrape-config.yml passes `promtool check config`;
#   - so does the scrape job the Prometheus operator makes of the manifest's
#     ServiceMonitor (role endpoints, the operator's own relabelling, then
#     the ServiceMonitor's relabelings, translated as the operator does);
#   - the PrometheusRule's rules, taken from the manifest, pass `promtool
#     check rules` and the rules' unit tests (tests/prometheus/*.test.yml)
#     run against that copy.
# Debian's Prometheus is built without Kubernetes service discovery, so its
# promtool refuses kubernetes_sd_configs: the checked copies have a
# file_sd_configs in its place (everything else as written), and the
# kubernetes_sd_configs blocks are checked here against the fields
# Prometheus documents for them.
source "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || fail "promtool not installed (scripts/install-deps.sh test)"
PY=/usr/bin/python3
$PY -c 'import yaml' 2>/dev/null || fail "python3-yaml not installed"
manifest=$MLWATCH_SRC/deploy/kubernetes/mlwatch.yaml

# The Secrets the ServiceMonitor reads, as scripts/make-secrets.sh makes them.
"$MLWATCH_SRC/scripts/make-secrets.sh" "$WORK/secrets" >/dev/null || fail "scripts/make-secrets.sh failed"
# Both configurations, kubernetes_sd_configs checked and replaced.
$PY - "$MLWATCH_SRC/deploy/prometheus/scrape-config.yml" "$manifest" "$WORK" <<'EOF' ||
import re, sys, yaml
src, manifest, work = sys.argv[1:]
# Prometheus 2.x kubernetes_sd_config fields (docs: configuration.md).
SD = {"role", "api_server", "kubeconfig_file", "namespaces", "selectors", "attach_metadata",
      "basic_auth", "authorization", "oauth2", "bearer_token", "bearer_token_file", "tls_config",
      "proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header",
      "follow_redirects", "enable_http2"}
ROLES = {"node", "service", "pod", "endpoints", "endpointslice", "ingress"}

def check_sd(sd):
    for s in sd:
        assert set(s) <= SD, f"unknown kubernetes_sd_configs fields {set(s) - SD}"
        assert s["role"] in ROLES, s["role"]
        ns = s.get("namespaces", {})
        assert set(ns) <= {"names", "own_namespace"}, ns
        for sel in s.get("selectors", []):
            assert set(sel) <= {"role", "label", "field"} and sel["role"] in ROLES, sel

def to_file_sd(job):
    check_sd(job.pop("kubernetes_sd_configs"))
    job["file_sd_configs"] = [{"files": [work + "/targets.json"]}]

c = yaml.safe_load(open(src))
c.pop("rule_files", None)  # checked on its own below
for job in c["scrape_configs"]:
    to_file_sd(job)
    # HTTPS with the metrics token, the Secrets' files where this test has
    # them (promtool checks that they exist).
    assert job["scheme"] == "https" and job["tls_config"]["server_name"] == "mlwatch", job
    assert job["tls_config"]["ca_file"] == "/etc/prometheus/secrets/mlwatch-tls/ca.crt", job
    assert job["authorization"] == {"type": "Bearer", "credentials_file": "/etc/prometheus/secrets/mlwatch-tokens/metrics"}, job
    job["tls_config"]["ca_file"] = work + "/secrets/ca.crt"
    job["authorization"]["credentials_file"] = work + "/secrets/metrics"
yaml.safe_dump(c, open(work + "/plain.yml", "w"))

# The ServiceMonitor as the operator renders it (the parts that matter to
# promtool: role endpoints in its namespace, keep the selected Service's
# labels and the named port, the operator's target labels, then the
# ServiceMonitor's relabelings with their fields renamed).
docs = [d for d in yaml.safe_load_all(open(manifest)) if d]
(sm,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
ns = sm["metadata"]["namespace"]
jobs = []
camel = lambda k: re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), k)
for i, ep in enumerate(sm["spec"]["endpoints"]):
    keep = [{"source_labels": ["__meta_kubernetes_service_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k),
                               "__meta_kubernetes_service_labelpresent_" + re.sub(r"[^a-zA-Z0-9_]", "_", k)],
             "regex": f"({v});true", "action": "keep"}
            for k, v in sm["spec"]["selector"]["matchLabels"].items()]
    keep.append({"source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": ep["port"],
                 "action": "keep"})
    targets = [{"source_labels": [f"__meta_kubernetes_{m}"], "target_label": t}
               for m, t in [("namespace", "namespace"), ("service_name", "service"),
                            ("pod_name", "pod"), ("pod_container_name", "container")]]
    targets += [{"target_label": "endpoint", "replacement": ep["port"]},
                {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job",
                 "replacement": "${1}"}]
    user = [{camel(k): v for k, v in r.items()} for r in ep.get("relabelings", [])]
    for r in user:
        if "action" in r:
            r["action"] = r["action"].lower()
    job = {"job_name": f"serviceMonitor/{ns}/{sm['metadata']['name']}/{i}",
           "honor_labels": ep.get("honorLabels", False),
           "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": [ns]}}],
           "metrics_path": ep.get("path", "/metrics"),
           "relabel_configs": keep + targets + user}
    if "interval" in ep:
        job["scrape_interval"] = ep["interval"]
    if "scrapeTimeout" in ep:
        job["scrape_timeout"] = ep["scrapeTimeout"]
    # HTTPS and the token: the operator mounts the Secrets' keys as files.
    if "scheme" in ep:
        job["scheme"] = ep["scheme"]
    if "tlsConfig" in ep:
        t = ep["tlsConfig"]
        assert set(t) <= {"ca", "serverName"}, t
        job["tls_config"] = {"ca_file": work + "/secrets/ca.crt", "server_name": t["serverName"]}
    if "authorization" in ep:
        a = ep["authorization"]
        job["authorization"] = {"type": a["type"], "credentials_file": work + "/secrets/" + a["credentials"]["key"]}
    to_file_sd(job)
    jobs.append(job)
yaml.safe_dump({"scrape_configs": jobs}, open(work + "/servicemonitor.yml", "w"))

(pr,) = [d for d in docs if d["kind"] == "PrometheusRule"]
yaml.safe_dump(pr["spec"], open(work + "/rules.yml", "w"))
EOF
    fail "the scrape configurations or the manifest do not have the expected shape"
ok
echo '[]' >"$WORK/targets.json"
for f in plain servicemonitor; do
    promtool check config "$WORK/$f.yml" >"$WORK/$f.txt" 2>&1 ||
        fail "promtool check config ($f): $(cat "$WORK/$f.txt")"
    grep -q SUCCESS "$WORK/$f.txt" || fail "promtool ($f): $(cat "$WORK/$f.txt")"
    echo "promtool check config: $f: $(grep -c . "$WORK/$f.yml") lines, SUCCESS"
    ok
done
# The same file as shipped, rule file included, with Kubernetes SD: Debian's
# promtool must refuse it for that reason only (if it starts to accept it,
# drop the substitution above).
(cd "$MLWATCH_SRC/deploy/prometheus" && promtool check config scrape-config.yml) >"$WORK/asis.txt" 2>&1 &&
    echo "promtool check config: scrape-config.yml as is: SUCCESS" ||
    grep -q -e 'field kubernetes_sd_configs not found' -e 'stat /etc/prometheus/secrets/mlwatch-tokens/metrics: no such file' "$WORK/asis.txt" ||
    fail "promtool check config scrape-config.yml: $(cat "$WORK/asis.txt")"
ok

promtool check rules "$WORK/rules.yml" >"$WORK/rules.txt" 2>&1 ||
    fail "promtool check rules (PrometheusRule): $(cat "$WORK/rules.txt")"
n=$($PY -c 'import sys, yaml; print(sum(len(g["rules"]) for g in yaml.safe_load(open(sys.argv[1]))["groups"]))' "$WORK/rules.yml")
grep -q "SUCCESS: $n rules found" "$WORK/rules.txt" || fail "rules: $(cat "$WORK/rules.txt")"
echo "promtool check rules: PrometheusRule: $n rules, SUCCESS"
ok
mkdir -p "$WORK/unit"
for t in "$MLWATCH_SRC"/tests/prometheus/*.test.yml; do
    $PY - "$t" "$WORK/unit/$(basename "$t")" "$WORK/rules.yml" <<'EOF'
import sys, yaml
t = yaml.safe_load(open(sys.argv[1]))
t["rule_files"] = [sys.argv[3]]
yaml.safe_dump(t, open(sys.argv[2], "w"))
EOF
    promtool test rules "$WORK/unit/$(basename "$t")" >"$WORK/unit.txt" 2>&1 ||
        fail "promtool test rules $(basename "$t") on the PrometheusRule's rules: $(cat "$WORK/unit.txt")"
    echo "promtool test rules: $(basename "$t") on the PrometheusRule's rules: SUCCESS"
    ok
done
done_ok
