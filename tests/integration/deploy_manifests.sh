#!/usr/bin/env bash
# deploy_manifests.sh - deploy/kubernetes: the kustomize layout (base,
# overlays/kube-prometheus, overlays/kubeflow) and the one-file mlwatch.yaml:
#   - the committed files are what scripts/gen_manifest.py writes, and the
#     generator picks up a new dashboard (with text YAML cannot hold as a
#     block) exactly, into the kube-prometheus overlay and the one file; a
#     new agent config changes the pods' checksum/config annotation; the
#     image's tag follows src/mlwatch.h;
#   - the image every workload runs is what scripts/build-image.sh builds
#     (ghcr.io/mlwatch/mlwatch:MLWATCH_VERSION);
#   - every object passes the API's schema (kubernetes-models and
#     @kubernetes-models/prometheus-operator from npm, tests/deploy/) and
#     has no field the API does not know (python3-kubernetes' models);
#   - the objects fit together and the DaemonSet takes exactly the
#     privileges docs/deploy.md explains (tests/deploy/check_manifest.py);
#   - every kustomization's resources and patches exist, base +
#     kube-prometheus's own objects are mlwatch.yaml; with kubectl
#     (kustomize; Debian and npm have none) each builds, base and
#     kube-prometheus build exactly base/mlwatch.yaml and mlwatch.yaml, and
#     the Kubeflow overlay passes the same checks;
#   - the opt-in node-condition component grants patch on nodes/status
#     only, and base + it adds exactly that and --kubernetes-node-condition;
#   - tokens and TLS are wired: node address, token and certificate files
#     from Secrets mounted as folders, no write or admin token, HTTPS probes,
#     the ServiceMonitor's CA, serverName and token (check_manifest.py);
#   - the real agent starts with the ConfigMap's config and the DaemonSet's
#     args (only paths and the port overridden, the Secrets made by
#     scripts/make-secrets.sh, NODE_NAME in the
#     environment as the downward API sets it), watches its node's pods
#     through the fake API server, and learns a GPU allocation through the
#     kubelet's pod-resources socket mounted READ-ONLY, as in the
#     DaemonSet (where this test may mount; it says so where it may not).
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
deps=$MLWATCH_SRC/tests/deploy
command -v node >/dev/null || fail "node is not installed (scripts/install-deps.sh test)"
for m in kubernetes-models @kubernetes-models/prometheus-operator; do
    [ -d "$deps/node_modules/$m" ] ||
        fail "schema validator $m missing: run scripts/install-deps.sh test (npm ci in tests/deploy)"
done
/usr/bin/python3 -c 'import yaml, kubernetes.client' 2>/dev/null ||
    fail "python3-yaml and python3-kubernetes are needed (scripts/install-deps.sh test)"
PY=/usr/bin/python3
kube=$MLWATCH_SRC/deploy/kubernetes
manifest=$kube/mlwatch.yaml
# The image: its name and tag in one place each (the script, src/mlwatch.h).
image=$("$MLWATCH_SRC/scripts/build-image.sh" --print-ref) || fail "scripts/build-image.sh --print-ref"
version=$(sed -n 's/^#define MLWATCH_VERSION "\(.*\)"$/\1/p' "$MLWATCH_SRC/src/mlwatch.h")
expect_eq "the image scripts/build-image.sh builds" "ghcr.io/mlwatch/mlwatch:$version" "$image"

# 1. Fresh, and the generator picks up new dashboards.
$PY "$MLWATCH_SRC/scripts/gen_manifest.py" --check >"$WORK/stale.txt" 2>&1 || {
    head -40 "$WORK/stale.txt" >&2
    fail "deploy/kubernetes/mlwatch.yaml is stale: run scripts/gen_manifest.py"
}
ok
mkdir -p "$WORK/tree/scripts" "$WORK/tree/src" "$WORK/tree/deploy/grafana"
cp "$MLWATCH_SRC/scripts/gen_manifest.py" "$MLWATCH_SRC/scripts/build-image.sh" "$WORK/tree/scripts/"
cp "$MLWATCH_SRC/src/mlwatch.h" "$WORK/tree/src/"
cp -r "$MLWATCH_SRC/deploy/kubernetes" "$MLWATCH_SRC/deploy/prometheus" "$WORK/tree/deploy/"
cp "$MLWATCH_SRC"/deploy/grafana/*.json "$WORK/tree/deploy/grafana/" 2>/dev/null || true
printf '{"title": "New \\u00e9", "panels": [],\n  "x": "trailing space "  \n}\n\t\n' \
    >"$WORK/tree/deploy/grafana/New Board.json"
# A new config and a new version too.
printf '# a change\n' >>"$WORK/tree/deploy/kubernetes/src/agent.yaml"
sed -i 's/^#define MLWATCH_VERSION ".*"$/#define MLWATCH_VERSION "9.8.7"/' "$WORK/tree/src/mlwatch.h"
$PY "$WORK/tree/scripts/gen_manifest.py" >/dev/null || fail "generator with a new dashboard, config and version"
t=$WORK/tree/deploy/kubernetes
$PY - "$t/mlwatch.yaml" "$WORK/tree/deploy/grafana/New Board.json" "$t/overlays/kube-prometheus/monitoring.yaml" \
    "$t/base/mlwatch.yaml" "$t/src/agent.yaml" "$manifest" <<'EOF' ||
import hashlib, sys, yaml
def load(p): return [d for d in yaml.safe_load_all(open(p)) if d]
for path in sys.argv[1], sys.argv[3]:
    (cm,) = [d for d in load(path) if d["metadata"]["name"] == "mlwatch-dashboard-new-board"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"]["New Board.json"] == open(sys.argv[2]).read(), path
assert not [d for d in load(sys.argv[4]) if d["metadata"]["name"] == "mlwatch-dashboard-new-board"], "in the base"
def pod(p): return [d for d in load(p) if d["kind"] == "DaemonSet"][0]["spec"]["template"]
new, old = pod(sys.argv[1]), pod(sys.argv[6])
want = hashlib.sha256(open(sys.argv[5], "rb").read()).hexdigest()
assert new["metadata"]["annotations"]["checksum/config"] == want, "checksum/config is not the new config's"
assert old["metadata"]["annotations"]["checksum/config"] != want, "checksum/config did not change"
assert new["spec"]["containers"][0]["image"] == "ghcr.io/mlwatch/mlwatch:9.8.7", new["spec"]["containers"][0]["image"]
EOF
    fail "a new dashboard, config or version is not in the manifests exactly"
ok

# 2. Schema and strict fields, 3. consistency: the manifest...
validate() { # LABEL YAML
    $PY -c 'import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))' \
        "$2" >"$WORK/$1.json" || fail "$1: not YAML"
    (cd "$deps" && node validate.mjs <"$WORK/$1.json") >"$WORK/$1.schema" 2>&1 || {
        cat "$WORK/$1.schema" >&2
        fail "$1: schema check failed"
    }
    sed "s/^/  $1: /" "$WORK/$1.schema"
    ok
    $PY "$deps/strict_fields.py" <"$WORK/$1.json" >"$WORK/$1.strict" 2>&1 || {
        cat "$WORK/$1.strict" >&2
        fail "$1: unknown fields"
    }
    ok
}
validate base "$manifest"
expect_eq "objects validated" "$($PY -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$WORK/base.json")" \
    "$(grep -c '^valid ' "$WORK/base.schema")"
$PY "$deps/check_manifest.py" base "$manifest" "$MLWATCH_SRC/deploy/prometheus/mlwatch-rules.yml" \
    "$MLWATCH_SRC/deploy/grafana" "$image" || fail "manifest checks"
ok
# ... and the validator does fail on a broken object (a validator that
# passes everything would make the checks above worthless).
$PY - "$WORK/base.json" "$WORK/broken.json" <<'EOF'
import json, sys
docs = json.load(open(sys.argv[1]))
for d in docs:
    if d["kind"] == "DaemonSet":
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "10230"
json.dump(docs, open(sys.argv[2], "w"))
EOF
(cd "$deps" && node validate.mjs <"$WORK/broken.json") >"$WORK/broken.out" 2>&1 &&
    fail "the schema check passed a string containerPort"
grep -q 'INVALID DaemonSet/mlwatch.*containerPort must be integer' "$WORK/broken.out" ||
    fail "schema check: $(cat "$WORK/broken.out")"
ok

# 4. The kustomize layout: every file a kustomization names is there
# (kustomize loads no file outside its folder: other folders only as
# kustomizations), every patch has its target, and base + the objects
# kube-prometheus adds are the one-file manifest, in its order.
$PY - "$kube" <<'EOF' || fail "kustomize layout"
import os, sys, yaml
kube = sys.argv[1]
def load(p): return [d for d in yaml.safe_load_all(open(p)) if d]
def compose(root):
    k = yaml.safe_load(open(os.path.join(root, "kustomization.yaml")))
    docs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(root, r))
        if os.path.isdir(p):
            assert os.path.isfile(os.path.join(p, "kustomization.yaml")), f"{root}: {r} is no kustomization"
            docs += compose(p)
        else:
            assert os.path.isfile(p) and os.path.dirname(p) == root, f"{root}: {r}: no such file in the folder"
            docs += load(p)
    for p in k.get("patches", []):
        f = os.path.join(root, p["path"])
        assert os.path.isfile(f), f"{root}: patch {p['path']}: no such file"
        doc = yaml.safe_load(open(f))
        if isinstance(doc, list):
            assert "target" in p and all(op["op"] in ("add", "replace", "remove") for op in doc), p["path"]
        t = p.get("target") or doc
        kind, name = t["kind"], t.get("name") or t["metadata"]["name"]
        assert [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name], \
            f"{root}: patch {p['path']}: {kind}/{name} is not in its resources"
    return docs
for d in ("base", "overlays/kube-prometheus", "overlays/kubeflow"):
    print(f"{d}: {len(compose(os.path.join(kube, d)))} objects before patches")
assert compose(os.path.join(kube, "base")) == load(os.path.join(kube, "base", "mlwatch.yaml"))
operator = [d["kind"] for d in load(os.path.join(kube, "base", "mlwatch.yaml"))
            if d["apiVersion"].startswith("monitoring.coreos.com/")]
assert not operator, f"the base holds objects of the Prometheus operator: {operator}"
assert compose(os.path.join(kube, "overlays/kube-prometheus")) == load(os.path.join(kube, "mlwatch.yaml")), \
    "base + overlays/kube-prometheus are not mlwatch.yaml"
EOF
ok
if command -v kubectl >/dev/null; then
    echo "kustomize: $(kubectl version --client 2>/dev/null | grep -i kustomize)"
    for o in base overlays/kube-prometheus overlays/kubeflow; do
        kubectl kustomize "$kube/$o" >"$WORK/$(basename "$o").yaml" 2>"$WORK/kustomize.err" ||
            fail "kubectl kustomize $o: $(cat "$WORK/kustomize.err")"
        ok
    done
    # What kustomize builds is the generated files, object for object.
    $PY - "$WORK/base.yaml" "$kube/base/mlwatch.yaml" "$WORK/kube-prometheus.yaml" "$manifest" <<'EOF' ||
import sys, yaml
def objs(p):
    key = lambda d: (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
    return sorted((d for d in yaml.safe_load_all(open(p)) if d), key=key)
assert objs(sys.argv[1]) == objs(sys.argv[2]), "kubectl kustomize base is not base/mlwatch.yaml"
assert objs(sys.argv[3]) == objs(sys.argv[4]), "kubectl kustomize overlays/kube-prometheus is not mlwatch.yaml"
EOF
        fail "kustomize's builds differ from the generated files"
    ok
    validate kubeflow "$WORK/kubeflow.yaml"
    $PY "$deps/check_manifest.py" kubeflow "$WORK/kubeflow.yaml" "$image" || fail "Kubeflow overlay checks"
    ok
else
    echo "NOTE: no kubectl (kustomize) here; Debian and npm have none: the overlays' builds were not run, only their files, patch targets and composition checked"
fi

# 4b. The opt-in node condition (components/node-condition): patch on
# nodes/status and nothing else, for the agents' service account; with
# kubectl, base + the component builds and adds --kubernetes-node-condition
# to the agents' args and nothing else to the base.
nc=$kube/components/node-condition
$PY - "$nc" <<'EOF' || fail "node-condition component"
import os, sys, yaml
nc = sys.argv[1]
k = yaml.safe_load(open(os.path.join(nc, "kustomization.yaml")))
assert k["kind"] == "Component" and k["resources"] == ["rbac.yaml"], k
docs = [d for d in yaml.safe_load_all(open(os.path.join(nc, "rbac.yaml"))) if d]
role = [d for d in docs if d["kind"] == "ClusterRole"]
assert len(docs) == 2 and len(role) == 1, [d["kind"] for d in docs]
assert role[0]["rules"] == [{"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}], role[0]["rules"]
b = [d for d in docs if d["kind"] == "ClusterRoleBinding"][0]
assert b["roleRef"]["name"] == "mlwatch-node-condition", b
assert b["subjects"] == [{"kind": "ServiceAccount", "name": "mlwatch", "namespace": "mlwatch"}], b
EOF
ok
if command -v kubectl >/dev/null; then
    mkdir -p "$WORK/with-nc"
    printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n' \
        "$(realpath --relative-to="$WORK/with-nc" "$kube/base")" \
        "$(realpath --relative-to="$WORK/with-nc" "$nc")" >"$WORK/with-nc/kustomization.yaml"
    kubectl kustomize "$WORK/with-nc" >"$WORK/with-nc.yaml" 2>"$WORK/kustomize.err" ||
        fail "kubectl kustomize base + node-condition: $(cat "$WORK/kustomize.err")"
    $PY - "$WORK/with-nc.yaml" "$kube/base/mlwatch.yaml" <<'EOF' || fail "base + node-condition"
import sys, yaml
key = lambda d: (d["kind"], d["metadata"]["name"])
got = {key(d): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
base = {key(d): d for d in yaml.safe_load_all(open(sys.argv[2])) if d}
assert set(got) - set(base) == {("ClusterRole", "mlwatch-node-condition"),
                                ("ClusterRoleBinding", "mlwatch-node-condition")}, set(got) - set(base)
args = got[("DaemonSet", "mlwatch")]["spec"]["template"]["spec"]["containers"][0]["args"]
want = base[("DaemonSet", "mlwatch")]["spec"]["template"]["spec"]["containers"][0]["args"]
assert args == want + ["--kubernetes-node-condition"], args
for k in base:
    if k != ("DaemonSet", "mlwatch"):
        assert got[k] == base[k], k
EOF
    ok
fi

# 5. The real agent with the manifest's config and args.
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
$PY -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed"
$PY "$deps/check_manifest.py" args "$manifest" "$WORK" || fail "no config or args in the manifest"
mapfile -t args <"$WORK/args"
# The Secrets as scripts/make-secrets.sh makes them, where the pod mounts them.
"$MLWATCH_SRC/scripts/make-secrets.sh" "$WORK/secrets" >"$WORK/secrets.cmds" ||
    fail "scripts/make-secrets.sh failed"
for i in "${!args[@]}"; do # the ConfigMap's file where the pod mounts it
    case ${args[$i]} in
    --config) args[i + 1]=$WORK/agent.yaml ;;
    # Not loopback, as the node's address is not (reached here on 127.0.0.1).
    --listen) args[i + 1]=${args[i + 1]/\$(NODE_IP):10230/0.0.0.0:0} ;;
    --*-token-file | --tls-*-file) args[i + 1]=$WORK/secrets/$(basename "${args[i + 1]}") ;;
    esac
done
expect_eq "secrets: kubectl commands" 3 "$(grep -c '^kubectl -n mlwatch create secret generic mlwatch-\(tls\|hub-tls\|tokens\) ' "$WORK/secrets.cmds")"
# The hub of the manifest, with its args and the Secrets where its pod
# mounts them (tokens; its own certificate, hub.crt/hub.key of
# make-secrets.sh), on every interface as in the manifest (":10230").
mapfile -t hub_args <"$WORK/hub-args"
for i in "${!hub_args[@]}"; do
    case ${hub_args[$i]} in
    --*-token-file) hub_args[i + 1]=$WORK/secrets/$(basename "${hub_args[i + 1]}") ;;
    --tls-cert-file) hub_args[i + 1]=$WORK/secrets/hub.crt ;;
    --tls-key-file) hub_args[i + 1]=$WORK/secrets/hub.key ;;
    --listen) hub_args[i + 1]=0.0.0.0:0 ;;
    --data-dir | --state-dir) hub_args[i + 1]=$WORK/hub ;;
    esac
done
NODE_NAME=hub-node "$MLWATCH_BIN" "${hub_args[@]}" >"$WORK/hub.log" 2>&1 &
PIDS+=($!)
hub_port() { sed -n 's/.* hub listening on .* (port \([0-9]*\)) with TLS.*/\1/p' "$WORK/hub.log"; }
hub_started() { [ -n "$(hub_port)" ]; }
wait_for 20 hub_started || fail "the hub does not start with the manifest's args over TLS: $(cat "$WORK/hub.log")"
hub_port=$(hub_port)
# The agents' remote_write as the ConfigMap has it, but for the address
# here: the connection goes to 127.0.0.1, the hub's certificate is checked
# for the name in the manifest's URL (tls_config.server_name), the files
# are where this test has the Secrets.
hub_name=$($PY -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["remote_write"][0]["url"].split("/")[2].split(":")[0])' "$WORK/agent.yaml")
expect_eq "the hub's name in the agents' config" mlwatch-hub "$hub_name"
$PY - "$WORK/agent.yaml" "$WORK/secrets" "$hub_port" <<'EOF' || fail "cannot point the agent's remote_write at the test's hub"
import sys, yaml
path, secrets, port = sys.argv[1:]
text = open(path).read()
c = yaml.safe_load(text)
(rw,) = c["remote_write"]
host = rw["url"].split("/")[2].split(":")[0]
rw["url"] = rw["url"].replace(f"//{host}:", "//127.0.0.1:").rsplit(":", 1)[0] + f":{port}/api/v1/write"
rw["tls_config"]["server_name"] = host
rw["tls_config"]["ca_file"] = secrets + "/ca.crt"
rw["bearer_token_file"] = secrets + "/write"
rw["queue_config"] = {"batch_send_deadline": "200ms", "min_backoff": "10ms", "max_backoff": "200ms"}
open(path, "w").write(yaml.safe_dump(c))
EOF
root=$WORK/root
cp -a "$MLWATCH_FIXTURES/gpu-node" "$root"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
cat >"$WORK/scenario.txt" <<'EOF'
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=0 memtotal=85520809984 memused=0 power_mw=70000
EOF
TOKEN=eyJhbGciOiJSUzI1NiJ9.fake-sa-token.c2lnbmF0dXJl
$PY "$MLWATCH_SRC/tests/fakeapi/fake_apiserver.py" --fixtures "$MLWATCH_FIXTURES/kube" \
    --token "$TOKEN" --node gpu-node-1 --log "$WORK/api.jsonl" --port-file "$WORK/api.port" &
PIDS+=($!)
# The kubelet's socket in a folder of its own, bind-mounted read-only where
# the DaemonSet mounts it (/var/lib/kubelet/pod-resources under --root).
sockdir=$WORK/kubelet-pod-resources
mkdir -p "$sockdir" "$root/var/lib/kubelet/pod-resources"
$PY "$MLWATCH_SRC/tests/fakeapi/fake_podresources.py" --socket "$sockdir/kubelet.sock" \
    --alloc "shared/notebook-z/main=nvidia.com/gpu:GPU-00000000-0000-4000-8000-000000000000" &
PIDS+=($!)
peers_up() { [ -s "$WORK/api.port" ] && [ -S "$sockdir/kubelet.sock" ]; }
wait_for 10 peers_up || fail "fake API server or pod-resources server did not start"
ro_mount=0
if mount --bind "$sockdir" "$root/var/lib/kubelet/pod-resources" 2>/dev/null; then
    umount_ro() { umount "$root/var/lib/kubelet/pod-resources" 2>/dev/null || true; }
    # shellcheck disable=SC2154 # rc is the trap's own
    trap 'rc=$?; umount_ro; cleanup "$rc"' EXIT
    mount -o remount,bind,ro "$root/var/lib/kubelet/pod-resources" ||
        fail "cannot make the bind mount read-only"
    touch "$root/var/lib/kubelet/pod-resources/x" 2>/dev/null && fail "the mount is writable"
    ro_mount=1
    echo "pod-resources socket: through a read-only bind mount"
else
    ln -s "$sockdir/kubelet.sock" "$root/var/lib/kubelet/pod-resources/kubelet.sock"
    echo "NOTE: no privilege to mount here: the pod-resources socket is reached through a symbolic link, the read-only mount is not tested"
fi
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: fake
clusters:
- name: fake
  cluster: {server: "http://127.0.0.1:$(cat "$WORK/api.port")"}
contexts:
- name: fake
  context: {cluster: fake, user: sa}
users:
- name: sa
  user: {token: $TOKEN}
EOF
# NODE_NAME as the downward API sets it; only what a test must change is
# overridden: paths, the port, the GPU library, and a 1 s idle window.
# HTTPS with the Secret's certificate, verified as the ServiceMonitor does
# (its CA, serverName mlwatch), with the metrics token.
: >"$WORK/agent.log"
NODE_NAME=gpu-node-1 "$MLWATCH_BIN" agent "${args[@]:1}" --root "$root" --kubeconfig "$WORK/kubeconfig" \
    --nvml-library "$fake" --rocm-library none --interval 200ms --gpu-process-interval 200ms \
    --idle-window 1s --data-dir "$WORK/data" --state-dir "$WORK/state" >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
PIDS+=("$AGENT_PID")
wait_for 20 agent_started || true
[ -n "$(agent_port)" ] || fail "the agent does not listen: $(head -c 600 "$WORK/agent.log")"
port=$(agent_port)
AGENT_URL=https://mlwatch:$port
scrape() { curl -s --cacert "$WORK/secrets/ca.crt" --resolve "mlwatch:$port:127.0.0.1" "$@"; }
ready() { [ "$(scrape -o /dev/null -w '%{http_code}' "$AGENT_URL/-/ready")" = 200 ]; }
wait_for 20 ready || fail "no HTTPS answer from /-/ready with the Secret's CA"
ok
metrics_token=$(cat "$WORK/secrets/metrics")
expect_eq "/metrics without the token" 401 "$(scrape -o /dev/null -w '%{http_code}' "$AGENT_URL/metrics")"
expect_eq "a query without the read token" 401 "$(scrape -o /dev/null -w '%{http_code}' "$AGENT_URL/api/v1/query?query=up")"
expect_eq "a query with the read token" 200 "$(scrape -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/secrets/read")" "$AGENT_URL/api/v1/query?query=up")"
expect_eq "a write with the write token (the agents take none)" 403 "$(scrape -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/secrets/write")" -H 'Content-Type: application/x-protobuf' --data-binary x "$AGENT_URL/api/v1/write")"
expect_eq "a write without a token" 403 "$(scrape -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' --data-binary x "$AGENT_URL/api/v1/write")"
expect_eq "why" "write requests are refused: mlwatch listens on 0.0.0.0:0, not a loopback address, and --write-token-file is not set (docs/security.md)" "$(cat "$WORK/body")"
expect_eq "compaction" 403 "$(scrape -o /dev/null -w '%{http_code}' -X POST "$AGENT_URL/api/v1/store/compact")"
idle_session() {
    scrape -f -H "Authorization: Bearer $metrics_token" "$AGENT_URL/metrics" >"$WORK/m.txt" &&
        grep -q '^mlwatch_idle_gpu_sessions{namespace="shared",node="gpu-node-1"} 1$' "$WORK/m.txt"
}
if ! WAIT_EVERY=0.2 wait_for 15 idle_session; then
    tail -20 "$WORK/agent.log" >&2
    fail "no idle session of shared/notebook-z (allocated through the pod-resources socket)"
fi
ok
grep -q 'kube: watching the pods of node gpu-node-1' "$WORK/agent.log" ||
    fail "the agent does not watch NODE_NAME's pods: $(grep kube "$WORK/agent.log")"
ok
# The fake API server answers only spec.nodeName=gpu-node-1 (else it logs
# bad-selector) and only with the token.
grep -q '"kind": "list"' "$WORK/api.jsonl" || fail "no list of the node's pods: $(cat "$WORK/api.jsonl")"
ok
expect_eq "refused API requests" 0 "$(grep -cE 'bad-selector|unauthorized' "$WORK/api.jsonl" || true)"
expect_eq "pod-resources warnings" 0 "$(grep -c podresources "$WORK/agent.log" || true)"
[ "$ro_mount" = 1 ] && echo "the agent read the kubelet's socket through a read-only mount"

# The agent's series arrive at the hub over HTTPS with the write token (the
# hub checked the token; the agent checked the hub's certificate for the
# name in the manifest's URL); without the token the hub refuses.
hub_q() { curl -s --cacert "$WORK/secrets/ca.crt" --resolve "$hub_name:$hub_port:127.0.0.1" "$@"; }
hub_has_node() {
    hub_q -H "Authorization: Bearer $(cat "$WORK/secrets/read")" --get \
        --data-urlencode 'query=count({node="gpu-node-1",__name__="mlwatch_idle_gpu_sessions"})' \
        "https://$hub_name:$hub_port/api/v1/query" | jq -e '.data.result[0].value[1] == "1"' >/dev/null
}
WAIT_EVERY=0.3 wait_for 20 hub_has_node || {
    grep -i remote "$WORK/agent.log" | tail -5 >&2
    fail "the agent's series did not arrive at the hub"
}
ok
stored=$(hub_q -H "Authorization: Bearer $(cat "$WORK/secrets/read")" --get \
    --data-urlencode 'query=count({node="gpu-node-1"})' "https://$hub_name:$hub_port/api/v1/query" |
    jq -r '.data.result[0].value[1]')
echo "the hub holds $stored series of node gpu-node-1"
[ "$stored" -gt 100 ] || fail "only $stored series of gpu-node-1 at the hub"
ok
expect_eq "a write to the hub without the token" 401 "$(hub_q -o /dev/null -w '%{http_code}' -H 'Content-Type: application/x-protobuf' --data-binary x "https://$hub_name:$hub_port/api/v1/write")"
expect_eq "a write to the hub with the read token" 403 "$(hub_q -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/secrets/read")" -H 'Content-Type: application/x-protobuf' --data-binary x "https://$hub_name:$hub_port/api/v1/write")"
expect_eq "a query to the hub without the token" 401 "$(hub_q -o /dev/null -w '%{http_code}' "https://$hub_name:$hub_port/api/v1/query?query=up")"
# The agents' certificate is not the hub's: a hub started with it would not
# pass the agents' check for the name mlwatch-hub.
expect_eq "the agents' certificate for the hub's name" 000 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/secrets/ca.crt" --resolve "$hub_name:$port:127.0.0.1" "https://$hub_name:$port/-/healthy")"
# An agent whose token the hub does not know: refused (401) and nothing of
# its node arrives.
sed -e "s|bearer_token_file: .*|bearer_token_file: $WORK/wrong.tok|" -e 's|^root: .*|root: /nonexistent|' "$WORK/agent.yaml" >"$WORK/wrong.yaml"
printf 'a-token-the-hub-does-not-know-0123\n' >"$WORK/wrong.tok"
NODE_NAME=wrong-node "$MLWATCH_BIN" agent --config "$WORK/wrong.yaml" --root "$root" --listen 127.0.0.1:0 \
    --nvml-library none --rocm-library none --interval 200ms --data-dir "$WORK/wrong-data" \
    --state-dir "$WORK/wrong-state" >"$WORK/wrong.log" 2>&1 &
PIDS+=($!)
refused_401() { grep -q 'remote-write: .*hub.*401' "$WORK/wrong.log"; }
wait_for 15 refused_401 || fail "the hub did not refuse the unknown token: $(grep -i remote "$WORK/wrong.log" | tail -3)"
ok
expect_eq "series of the refused agent at the hub" 0 "$(hub_q -H "Authorization: Bearer $(cat "$WORK/secrets/read")" --get --data-urlencode 'query=count({node="wrong-node"})' "https://$hub_name:$hub_port/api/v1/query" | jq '.data.result | length')"
done_ok
