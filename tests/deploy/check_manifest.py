#!/usr/bin/python3
"""check_manifest.py - what a schema cannot say about deploy/kubernetes/mlwatch.yaml
(tests/integration/deploy_manifests.sh): the objects fit together and the
DaemonSet takes exactly the privileges docs/deploy.md explains.

  check_manifest.py base MANIFEST RULES GRAFANA_DIR IMAGE
  check_manifest.py kubeflow BUILT_OVERLAY.yaml IMAGE   (kustomize's output)
  check_manifest.py args MANIFEST OUT_DIR            (the agent's config
      and args, for the test to run the real agent with: OUT_DIR/agent.yaml,
      OUT_DIR/args one per line)
Prints one line per failed check and exits 1 when any failed."""
import glob
import hashlib
import json
import os
import re
import sys

import yaml

FAILS = []
# kubectl apply (client side) keeps the object in an annotation of at most
# 256 KiB; a bigger object needs --server-side.
LAST_APPLIED_MAX = 262144


def check(cond, what):
    if not cond:
        FAILS.append(what)
    return cond


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    check(len(found) == 1, f"exactly one {kind}{' ' + name if name else ''}: found {len(found)}")
    return found[0] if found else {}


def daemonset_checks(docs, ns, image):
    ds = one(docs, "DaemonSet", "mlwatch")
    pod = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    check(ds["spec"]["selector"]["matchLabels"].items() <= labels.items(),
          "DaemonSet selector matches its pod template")
    check(pod.get("hostPID") is True, "hostPID: true")
    check(pod.get("hostNetwork") is True and pod.get("dnsPolicy") == "ClusterFirstWithHostNet",
          "hostNetwork with dnsPolicy ClusterFirstWithHostNet")
    check(pod.get("priorityClassName") == "system-node-critical", "priorityClassName")
    check(pod.get("serviceAccountName") == "mlwatch", "serviceAccountName mlwatch")
    check(pod.get("tolerations") == [{"operator": "Exists"}], "tolerates every taint (operator: Exists)")
    check(pod.get("nodeSelector") == {"kubernetes.io/os": "linux"}, "nodeSelector kubernetes.io/os: linux")
    (c,) = pod["containers"]
    check(c.get("image") == image, f"image {c.get('image')}: not {image}, what scripts/build-image.sh builds")
    sc = c["securityContext"]
    check(sc.get("privileged") is False, "not privileged")
    check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation false")
    check(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    check(sc.get("capabilities") == {"drop": ["ALL"]}, "capabilities: drop ALL, add none")
    check(sc.get("runAsUser") == 0, "runAsUser 0 (docs/deploy.md says why)")
    r = c.get("resources", {})
    check(set(r.get("requests", {})) == {"cpu", "memory"} and set(r.get("limits", {})) == {"cpu", "memory"},
          "cpu and memory requests and limits")
    env = {e["name"]: e for e in c.get("env", [])}
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          "NODE_NAME from the downward API")
    check(env.get("NVIDIA_VISIBLE_DEVICES", {}).get("value") == "all", "NVIDIA_VISIBLE_DEVICES=all")
    check(env.get("NVIDIA_DRIVER_CAPABILITIES", {}).get("value") == "utility",
          "NVIDIA_DRIVER_CAPABILITIES=utility")
    check("nvidia.com/gpu" not in json.dumps(r), "no nvidia.com/gpu resource (it would take a GPU)")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ports.get("http") == 10230, "port http 10230")
    check(c["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "http", "scheme": "HTTPS"}, "liveness /-/healthy")
    check(c["readinessProbe"]["httpGet"] == {"path": "/-/ready", "port": "http", "scheme": "HTTPS"}, "readiness /-/ready")
    args = c["args"]
    check(args[0] == "agent" and "--kubernetes" in args, "args: agent --kubernetes")

    def flag(name):
        return args[args.index(name) + 1] if name in args else None

    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for m in c["volumeMounts"]:
        check(m["name"] in vols, f"volume {m['name']} exists")
    data = flag("--data-dir")
    check(data in mounts and "hostPath" in vols.get(mounts[data]["name"], {}),
          "--data-dir is a hostPath mount")
    check(flag("--state-dir") in mounts, "--state-dir is mounted")
    for path, m in mounts.items():
        v = vols.get(m["name"], {})
        if "hostPath" in v and path not in (data, flag("--state-dir")):
            check(m.get("readOnly") is True, f"host mount {path} is read-only")
            check(path == "/host" + v["hostPath"]["path"],
                  f"host path {v['hostPath']['path']} mounted at /host{v['hostPath']['path']}")
            check(v["hostPath"].get("type") in ("Directory", "DirectoryOrCreate", "File"),
                  f"hostPath {v['hostPath']['path']} has a type (never creates a file or folder where the host has none by accident)")
    want = {"/proc", "/sys", "/var/log/pods", "/var/log/containers", "/var/lib/kubelet/pod-resources"}
    have = {v["hostPath"]["path"] for v in vols.values() if "hostPath" in v}
    check(want <= have, f"host mounts {sorted(want - have)} missing")
    cm_name = vols.get(mounts.get(os.path.dirname(flag("--config")), {}).get("name"), {}).get(
        "configMap", {}).get("name")
    cm = one(docs, "ConfigMap", cm_name)
    conf = yaml.safe_load(cm.get("data", {}).get(os.path.basename(flag("--config")), "")) or {}
    check(conf.get("root") == "/host", "config root: /host")
    # A new config rolls the pods: the pod template changes with it.
    digest = hashlib.sha256(cm.get("data", {}).get(os.path.basename(flag("--config")), "").encode()).hexdigest()
    check(ds["spec"]["template"]["metadata"].get("annotations", {}).get("checksum/config") == digest,
          "pod template annotation checksum/config is the sha256 of the agent's config")
    check(str(conf.get("listen", "")).endswith(":10230"), "config listen on port 10230")
    for d in docs:
        spec = d.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            check(c.get("image") == image, f"{d['kind']}/{d['metadata']['name']} runs {c.get('image')}, not {image}")
        if d["kind"] != "ClusterRole" and d["kind"] != "ClusterRoleBinding":
            check(d["metadata"].get("namespace", ns) == ns or d["kind"] == "Namespace",
                  f"{d['kind']}/{d['metadata']['name']} in namespace {ns}")
    return ds, labels


def rbac_checks(docs, ns):
    role = one(docs, "ClusterRole", "mlwatch")
    check(role.get("rules") == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                                {"apiGroups": ["resource.k8s.io"],
                                 "resources": ["resourceslices", "resourceclaims"], "verbs": ["list"]}],
          "ClusterRole: pods list and watch, DRA slices and claims list, nothing else "
          "(src/kube/kube.c and dra.c call nothing else)")
    b = one(docs, "ClusterRoleBinding", "mlwatch")
    check(b.get("roleRef", {}).get("name") == "mlwatch", "binding refers to the role")
    check(b.get("subjects") == [{"kind": "ServiceAccount", "name": "mlwatch", "namespace": ns}],
          f"binding's subject is the service account in {ns}")
    one(docs, "ServiceAccount", "mlwatch")


def service_checks(docs, labels):
    svc = one(docs, "Service", "mlwatch")
    check(svc["spec"]["selector"].items() <= labels.items(), "Service selects the agent's pods")
    sm = one(docs, "ServiceMonitor", "mlwatch")
    check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
          "ServiceMonitor selects the Service")
    ports = {p["name"] for p in svc["spec"]["ports"]}
    check(all(e["port"] in ports for e in sm["spec"]["endpoints"]), "ServiceMonitor port is the Service's")
    check("namespaceSelector" not in sm["spec"], "ServiceMonitor looks in its own namespace")
    access_checks(docs, sm)


def access_checks(docs, sm):
    """Tokens and TLS are wired (docs/security.md): the agents listen on the
    node's address over HTTPS, take their metrics and read tokens and their
    certificate from Secrets mounted as folders (so updates reach them),
    accept no writes and no admin requests, and the ServiceMonitor scrapes
    them with the CA and the metrics token."""
    ds = one(docs, "DaemonSet", "mlwatch")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = c.get("args", [])

    def flag(name):
        return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None

    check(flag("--listen") == "$(NODE_IP):10230", f"--listen $(NODE_IP):10230, not {flag('--listen')}")
    env = {e["name"]: e for e in c.get("env", [])}
    check(env.get("NODE_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.hostIP",
          "NODE_IP from status.hostIP")
    for f in ("--write-token-file", "--admin-token-file"):
        check(f not in args, f"the agents accept no writes and no admin requests: {f} is set")
    cm = one(docs, "ConfigMap", "mlwatch-agent")
    conf = yaml.safe_load(cm.get("data", {}).get("agent.yaml", "")) or {}
    for k in ("write_token_file", "admin_token_file"):
        check(k not in conf, f"the agents' config sets {k}")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = c.get("volumeMounts", [])
    for f, secret in (("--metrics-token-file", "mlwatch-tokens"), ("--read-token-file", "mlwatch-tokens"),
                      ("--tls-cert-file", "mlwatch-tls"), ("--tls-key-file", "mlwatch-tls")):
        path = flag(f)
        if not check(path is not None, f"{f} is set"):
            continue
        m = [m for m in mounts if os.path.dirname(path) == m["mountPath"]]
        if not check(len(m) == 1, f"{f} {path}: no mount of its folder"):
            continue
        check("subPath" not in m[0], f"{f}: mounted with subPath (a Secret's update would not reach it)")
        check(m[0].get("readOnly") is True, f"{f}: mount not read-only")
        v = vols.get(m[0]["name"], {}).get("secret", {})
        check(v.get("secretName") == secret, f"{f}: not from the Secret {secret}")
        keys = {i["path"]: i["key"] for i in v.get("items", [])}
        check(keys.get(os.path.basename(path)) == os.path.basename(path),
              f"{f}: key {os.path.basename(path)} of {secret} not at {path}")
        check(v.get("defaultMode") == 0o400, f"{f}: Secret files not mode 0400")
    for e in sm["spec"]["endpoints"]:
        check(e.get("scheme") == "https", "ServiceMonitor scrapes over https")
        tls = e.get("tlsConfig", {})
        check(tls.get("ca", {}).get("secret") == {"name": "mlwatch-tls", "key": "ca.crt"},
              "ServiceMonitor verifies with ca.crt of mlwatch-tls")
        check(tls.get("serverName") == "mlwatch", "ServiceMonitor serverName mlwatch (the certificate's name)")
        check("insecureSkipVerify" not in tls, "ServiceMonitor does not skip verification")
        check(e.get("authorization") == {"type": "Bearer", "credentials": {"name": "mlwatch-tokens", "key": "metrics"}},
              "ServiceMonitor sends the metrics token of mlwatch-tokens")


def mounted_secret(pod, c, path):
    """(Secret name, key) of the file at path in container c, or (None, None)."""
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        if os.path.dirname(path) == m["mountPath"] and "subPath" not in m:
            v = vols.get(m["name"], {}).get("secret", {})
            items = {i["path"]: i["key"] for i in v.get("items", [])}
            name = os.path.basename(path)
            return v.get("secretName"), items.get(name, name if not items else None)
    return None, None


def hub_checks(docs, image):
    """The hub is in the same manifest, and the agents ship to it: their
    remote_write names its Service and port over https, verifies it with
    the CA of mlwatch-tls and sends the write token of mlwatch-tokens, all
    mounted where the config says; the hub serves HTTPS with its own
    certificate (mlwatch-hub-tls) and takes writes with that token."""
    dep = one(docs, "Deployment", "mlwatch-hub")
    svc = one(docs, "Service", "mlwatch-hub")
    pvc = one(docs, "PersistentVolumeClaim", "mlwatch-hub")
    pod = dep["spec"]["template"]
    (c,) = pod["spec"]["containers"]
    check(c["image"] == image, f"the hub runs {image}")
    check(svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items(), "hub Service selects the hub")
    check(svc["spec"]["ports"][0]["targetPort"] in [p["name"] for p in c["ports"]], "hub Service port")
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    check(vols["data"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"], "hub data volume")
    args = c["args"]
    flag = lambda f: args[args.index(f) + 1] if f in args else None
    check(args[0] == "hub", "hub args")
    for f, want in (("--write-token-file", ("mlwatch-tokens", "write")),
                    ("--read-token-file", ("mlwatch-tokens", "read")),
                    ("--metrics-token-file", ("mlwatch-tokens", "metrics")),
                    ("--tls-cert-file", ("mlwatch-hub-tls", "tls.crt")),
                    ("--tls-key-file", ("mlwatch-hub-tls", "tls.key"))):
        path = flag(f)
        check(path is not None and mounted_secret(pod["spec"], c, path) == want, f"hub {f}: {want} at {path}")
    for probe in ("livenessProbe", "readinessProbe"):
        check(c[probe]["httpGet"].get("scheme") == "HTTPS", f"hub {probe} over HTTPS")
    ds = one(docs, "DaemonSet", "mlwatch")
    apod = ds["spec"]["template"]["spec"]
    ac = apod["containers"][0]
    conf = yaml.safe_load(one(docs, "ConfigMap", "mlwatch-agent")["data"]["agent.yaml"])
    rws = [r for r in conf.get("remote_write", []) if r.get("name") == "hub"]
    if not check(len(rws) == 1, "the agents' config has remote_write 'hub'"):
        return
    rw = rws[0]
    m = re.fullmatch(r"https://([a-z0-9.-]+):(\d+)/api/v1/write", rw["url"])
    if check(m is not None, f"remote_write url {rw['url']}: https://SERVICE:PORT/api/v1/write"):
        host, port = m.group(1), int(m.group(2))
        check(host.split(".")[0] == svc["metadata"]["name"], f"remote_write to the hub Service, not {host}")
        check(port == svc["spec"]["ports"][0]["port"], "remote_write to the hub Service's port")
    check(mounted_secret(apod, ac, rw.get("bearer_token_file", "")) == ("mlwatch-tokens", "write"),
          "the agents send the write token of mlwatch-tokens")
    check(mounted_secret(apod, ac, rw.get("tls_config", {}).get("ca_file", "")) == ("mlwatch-tls", "ca.crt"),
          "the agents verify the hub with ca.crt of mlwatch-tls")
    check("insecure_skip_verify" not in rw.get("tls_config", {}), "the agents verify the hub")


def base(manifest, rules, grafana, image):
    docs = load(manifest)
    ns = one(docs, "Namespace")["metadata"]["name"]
    check(ns == "mlwatch", "namespace mlwatch")
    _, labels = daemonset_checks(docs, ns, image)
    hub_checks(docs, image)
    rbac_checks(docs, ns)
    service_checks(docs, labels)
    pr = one(docs, "PrometheusRule", "mlwatch")
    with open(rules) as f:
        check(pr.get("spec") == yaml.safe_load(f), "PrometheusRule spec == deploy/prometheus/mlwatch-rules.yml")
    boards = sorted(os.path.basename(p) for p in glob.glob(os.path.join(grafana, "*.json")))
    cms = [d for d in docs if d["kind"] == "ConfigMap" and
           d["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    check(sorted(k for d in cms for k in d["data"]) == boards,
          f"one sidecar ConfigMap per dashboard: {boards}")
    for d in docs:
        size = len(json.dumps(d, separators=(",", ":")))
        check(size < LAST_APPLIED_MAX,
              f"{d['kind']}/{d['metadata']['name']}: {size} bytes, too big for kubectl apply's annotation")
    print(f"{len(docs)} objects, {len(boards)} dashboards")


def kubeflow(built, image):
    docs = load(built)
    check(not [d for d in docs if d["kind"] == "Namespace"], "the overlay creates no Namespace")
    ns = "monitoring"
    _, labels = daemonset_checks(docs, ns, image)
    rbac_checks(docs, ns)
    service_checks(docs, labels)
    ds = one(docs, "DaemonSet", "mlwatch")
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    check(args[-2:] == ["--owner-from", "annotation:notebooks.kubeflow.org/creator"],
          "owner from the notebook creator annotation")
    hub_checks(docs, image)
    check(ds["spec"]["template"]["metadata"].get("annotations", {}).get("sidecar.istio.io/inject") == "false",
          "no Istio sidecar")
    check(all(d["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "kubeflow" for d in docs),
          "every object labelled part-of kubeflow")
    print(f"{len(docs)} objects in the Kubeflow overlay")


def args(manifest, out):
    docs = load(manifest)
    ds = one(docs, "DaemonSet", "mlwatch")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    cm = one(docs, "ConfigMap", "mlwatch-agent")
    with open(os.path.join(out, "agent.yaml"), "w") as f:
        f.write(cm["data"]["agent.yaml"])
    with open(os.path.join(out, "args"), "w") as f:
        f.write("\n".join(c["args"]) + "\n")
    hub = one(docs, "Deployment", "mlwatch-hub")["spec"]["template"]["spec"]["containers"][0]
    with open(os.path.join(out, "hub-args"), "w") as f:
        f.write("\n".join(hub["args"]) + "\n")


def main():
    mode = sys.argv[1]
    {"base": base, "kubeflow": kubeflow, "args": args}[mode](*sys.argv[2:])
    for f in FAILS:
        print(f"CHECK FAILED: {f}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
