#!/usr/bin/env bash
# image.sh - the container image (scripts/build-image.sh, docs/deploy.md):
#   - it builds from this tree with Debian's tools (mmdebstrap, umoci,
#     skopeo); a rebuild gives the same manifest digest;
#   - at most 40 MB compressed (what a node downloads), measured here from
#     the archive's own blobs;
#   - its reference is ghcr.io/mlwatch/mlwatch:MLWATCH_VERSION, what every
#     manifest under deploy/kubernetes runs; entrypoint mlwatch, user
#     65532, version label from src/mlwatch.h;
#   - only mlwatch, the Debian packages of the libraries it links and
#     dlopens (in the image's package database), the CA certificates: no
#     shell, no package manager, no other program; every library resolves
#     with the image's own loader;
#   - in a container (podman with runc and vfs storage; crun cannot create
#     containers on this machine's hybrid cgroup hierarchy), as uid 12345
#     and as the default user, on a read-only root filesystem with every
#     capability dropped: `mlwatch --version` is the source's version,
#     `mlwatch metrics --root` on a fixture node is the reviewed golden
#     exposition, and `mlwatch agent` with a config file serves node metrics
#     and the web UI, remote-writes (with hashmod relabelling) to a real
#     Prometheus, and answers PromQL from its store, with no library missing.
# The image's packages and build are cached in MLWATCH_BUILD/image between
# runs; a cold run (clean clone) downloads the packages and compiles mlwatch.
# A cold run compiles mlwatch and downloads the packages: ctest gives this
# test 600 s (CMakeLists.txt), the watchdog 560.
export TEST_WATCHDOG_S=${TEST_WATCHDOG_S:-560}
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
for tool in mmdebstrap umoci skopeo podman runc promtool prometheus python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh test)"
done
[ "$(id -u)" -eq 0 ] || fail "podman with vfs storage and host networking runs as root here (CI does)"

out=$MLWATCH_BUILD/image
version=$(sed -n 's/^#define MLWATCH_VERSION "\(.*\)"$/\1/p' "$MLWATCH_SRC/src/mlwatch.h")
ref=$("$MLWATCH_SRC/scripts/build-image.sh" --print-ref)
expect_eq "image reference" "ghcr.io/mlwatch/mlwatch:$version" "$ref"

# 1. Build (twice: the second from the cache, the same digest).
t0=$SECONDS
"$MLWATCH_SRC/scripts/build-image.sh" --out "$out" >"$WORK/build.log" 2>&1 ||
    fail "scripts/build-image.sh: $(tail -20 "$WORK/build.log")"
sed 's/^/  /' "$WORK/build.log"
echo "image built in $((SECONDS - t0)) s"
archive=$out/mlwatch-$version.oci.tar
[ -s "$archive" ] || fail "no archive $archive"
digest=$(cat "$out/digest")
"$MLWATCH_SRC/scripts/build-image.sh" --out "$out" >"$WORK/build2.log" 2>&1 ||
    fail "scripts/build-image.sh (again): $(tail -20 "$WORK/build2.log")"
expect_eq "digest of a rebuild" "$digest" "$(cat "$out/digest")"

# 2. The archive as a registry or a node sees it: reference, digest, size,
# config; the layer unpacked for the content checks.
mkdir -p "$WORK/archive" "$WORK/rootfs"
tar -C "$WORK/archive" -xf "$archive"
python3 - "$WORK/archive" "$ref" "$digest" "$version" "$WORK/layers" >"$WORK/archive.txt" 2>&1 <<'EOF' ||
import hashlib, json, os, sys
root, ref, digest, version, layers = sys.argv[1:]
def blob(d):
    p = os.path.join(root, "blobs", *d.split(":"))
    data = open(p, "rb").read()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == d, f"blob {d} does not match its digest"
    return p, data
idx = json.load(open(os.path.join(root, "index.json")))
(m,) = idx["manifests"]
assert m["annotations"]["org.opencontainers.image.ref.name"] == ref, m["annotations"]
assert m["digest"] == digest, (m["digest"], digest)
_, mdata = blob(m["digest"])
man = json.loads(mdata)
_, cdata = blob(man["config"]["digest"])
cfg = json.loads(cdata)
c = cfg["config"]
assert c["Entrypoint"] == ["/usr/bin/mlwatch"], c["Entrypoint"]
assert c["Cmd"] == ["agent"], c["Cmd"]
assert c["User"] == "65532:65532", c["User"]
assert c["Labels"]["org.opencontainers.image.version"] == version, c["Labels"]
assert (cfg["os"], cfg["architecture"]) == ("linux", "amd64"), cfg
assert len(man["layers"]) == 1, "one layer"
size = len(mdata) + len(cdata)
with open(layers, "w") as f:
    for l in man["layers"]:
        p, data = blob(l["digest"])
        assert l["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip", l["mediaType"]
        size += len(data)
        print(p, file=f)
print(size)
EOF
    fail "the archive: $(cat "$WORK/archive.txt")"
size=$(cat "$WORK/archive.txt")
expect_eq "size.txt" "$size" "$(cat "$out/size.txt")"
echo "compressed size: $size bytes (goal: at most 40 MB)"
[ "$size" -le 40000000 ] || fail "the image is $size bytes compressed, over 40 MB"
ok
while read -r layer; do tar -C "$WORK/rootfs" -xzf "$layer"; done <"$WORK/layers"
r=$WORK/rootfs

# 3. Contents: the one program, no shell or package manager.
dirs=()
for d in bin sbin usr/bin usr/sbin usr/local usr/libexec; do [ -d "$r/$d" ] && dirs+=("$d"); done
programs=$(cd "$r" && find "${dirs[@]}" -not -type d | LC_ALL=C sort | tr '\n' ' ')
expect_eq "programs in the image" "usr/bin/mlwatch " "$programs"
for f in bin/sh usr/bin/sh bin/bash usr/bin/dpkg usr/bin/apt usr/bin/perl; do
    if [ -e "$r/$f" ] || [ -L "$r/$f" ]; then fail "$f is in the image"; fi
done
ok
# The libraries' packages, as dpkg itself reads the image's database.
dpkg-query --admindir="$r/var/lib/dpkg" -W -f '${db:Status-Status} ${Package}\n' >"$WORK/pkgs.txt" ||
    fail "dpkg cannot read the image's package database"
for p in libc6 libmicrohttpd12 libjansson4 zlib1g libre2-9 libstdc++6 libcurl4 libssl3 libsnappy1v5 \
    libprotobuf-c1 libisal2 libyaml-0-2 libgnutls30 ca-certificates; do
    grep -qx "installed $p" "$WORK/pkgs.txt" || fail "package $p is not installed in the image: $(tr '\n' ' ' <"$WORK/pkgs.txt")"
done
ok
expect_eq "packages not installed" "" "$(grep -v '^installed ' "$WORK/pkgs.txt" || true)"
# Writable for any uid where nothing is mounted (the default --data-dir).
expect_eq "modes of /var/lib/mlwatch and /tmp" "1777 1777" "$(stat -c %a "$r/var/lib/mlwatch" "$r/tmp" | tr '\n' ' ' | sed 's/ $//')"
certs=$(grep -c 'BEGIN CERTIFICATE' "$r/etc/ssl/certs/ca-certificates.crt" || true)
[ "$certs" -ge 100 ] || fail "CA bundle has $certs certificates"
openssl storeutl -noout -certs "$r/etc/ssl/certs/ca-certificates.crt" >/dev/null 2>&1 ||
    fail "the CA bundle does not parse"
ok

# 4. Containers. The machine lacks CAP_SYS_RESOURCE, so podman's default
# limits (higher than ours) cannot be set: lower ones are given.
chmod 0755 "$WORK"
P=(podman --runtime runc --storage-driver vfs --root "$WORK/podman" --runroot "$WORK/podman-run")
"${P[@]}" load -i "$archive" >"$WORK/load.txt" 2>&1 || fail "podman load: $(cat "$WORK/load.txt")"
grep -q "^Loaded image: $ref$" "$WORK/load.txt" || fail "podman load: $(cat "$WORK/load.txt")"
ok
fx=$MLWATCH_FIXTURES/k8s-v2-systemd
RUN=("${P[@]}" run --rm --network host --read-only --cap-drop ALL --security-opt no-new-privileges
    --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 -v "$fx:/host:ro")

# The image's own loader resolves mlwatch's libraries and every library
# src/core/lazylib.c dlopens (the first name it tries of each).
sonames=$(sed -n 's/^LIB([a-z_]*, "[^"]*",* *"\([^"]*\)".*/\1/p; s/^    "\(lib[^"]*\)".*/\1/p' \
    "$MLWATCH_SRC/src/core/lazylib.c" | grep -v 'gnutls' | sort -u | tr '\n' ' ')
expect_eq "lazylib.c's libraries" "libcrypto.so.3 libcurl.so.4 libisal.so.2 libprotobuf-c.so.1 libsnappy.so.1 libyaml-0.so.2 " "$sonames"
for lib in /usr/bin/mlwatch $sonames; do
    case $lib in /*) path=$lib ;; *) path=/usr/lib/x86_64-linux-gnu/$lib ;; esac
    "${RUN[@]}" --entrypoint /lib64/ld-linux-x86-64.so.2 "$ref" --list "$path" >"$WORK/ldd.txt" 2>&1 ||
        fail "$path in the image: $(cat "$WORK/ldd.txt")"
    if grep -q 'not found' "$WORK/ldd.txt"; then fail "$path in the image: $(grep 'not found' "$WORK/ldd.txt")"; fi
    ok
done

got=$("${RUN[@]}" --user 12345:12345 "$ref" --version 2>&1) || fail "mlwatch --version in the image: $got"
[[ $got =~ ^mlwatch\ $version\ \(revision\ [0-9a-f]{12}[^\)]*\)$ ]] || fail "mlwatch --version in the image: '$got'"
ok
echo "in the image: $got"
for user in 12345:12345 default; do
    u=(--user "$user")
    [ "$user" = default ] && u=()
    "${RUN[@]}" "${u[@]}" "$ref" metrics --root /host --node-name k8s-v2-systemd --nvml-library none --rocm-library none \
        >"$WORK/metrics.prom" 2>"$WORK/metrics.err" || fail "mlwatch metrics in the image as $user: $(cat "$WORK/metrics.err")"
    promtool check metrics <"$WORK/metrics.prom" >"$WORK/lint.txt" 2>&1 || fail "promtool: $(cat "$WORK/lint.txt")"
    stable_samples <"$WORK/metrics.prom" >"$WORK/metrics.stable"
    diff -u "$MLWATCH_SRC/tests/golden/k8s-v2-systemd.prom" "$WORK/metrics.stable" >"$WORK/metrics.diff" ||
        fail "the image's exposition of k8s-v2-systemd (as $user) differs from the golden file: $(head -30 "$WORK/metrics.diff")"
    ok
done

# The agent in a container, through lib.sh's start_agent: its data folder
# mounted where the flags name it, owned by the container's uid.
start_prom "$WORK/prom"
mkdir -p "$WORK/data" "$WORK/state"
chown 12345:12345 "$WORK/data" "$WORK/state"
cat >"$WORK/agent.yaml" <<YAML
root: /host
interval: 300ms
nvml_library: none
rocm_library: none
remote_write:
  - url: $PROM/api/v1/write
    name: prom
    queue_config: {batch_send_deadline: 200ms}
    write_relabel_configs:
      - source_labels: [__name__]
        regex: 'mlwatch_(cpu_seconds_total|memory_.*)'
        action: keep
      - source_labels: [__name__, cpu, mode]
        modulus: 2
        target_label: shard
        action: hashmod
YAML
printf '#!/bin/sh\nexec %s --user 12345:12345 -v %s:%s -v %s:%s:ro %s "$@"\n' "${RUN[*]}" \
    "$WORK/data" "$WORK/data" "$WORK/agent.yaml" "$WORK/agent.yaml" "$ref" >"$WORK/in-image"
chmod +x "$WORK/in-image"
MLWATCH_BIN=$WORK/in-image start_agent --config "$WORK/agent.yaml" --data-dir "$WORK/data" \
    --node-name k8s-v2-systemd
curl -sf "$AGENT_URL/metrics" >"$WORK/agent.prom" || fail "no /metrics from the agent in the image"
# Node metrics of the fixture, exactly as the golden file has them.
for s in 'mlwatch_cpu_seconds_total{cpu="0",mode="user",node="k8s-v2-systemd"}' 'mlwatch_memory_total_bytes{node="k8s-v2-systemd"}'; do
    want=$(awk -v s="$s" '$1 == s' "$MLWATCH_SRC/tests/golden/k8s-v2-systemd.prom")
    [ -n "$want" ] || fail "golden file lacks $s"
    expect_eq "$s from the agent in the image" "$want" "$(awk -v s="$s" '$1 == s' "$WORK/agent.prom")"
done
# The web UI, embedded in the binary.
curl -sf "$AGENT_URL/ui/" >"$WORK/ui.html" || fail "no /ui/ from the agent in the image"
grep -q '<title>mlwatch</title>' "$WORK/ui.html" || fail "/ui/ is not the web UI: $(head -c 300 "$WORK/ui.html")"
ok
# Remote write (libcurl, snappy, protobuf-c; hashmod: libcrypto) reached
# Prometheus with the relabelled series.
in_prom() {
    curl -sf "$PROM/api/v1/query" --data-urlencode 'query=count(mlwatch_cpu_seconds_total{shard=~"0|1"})' >"$WORK/q.json" &&
        [ "$(jq -r '.data.result[0].value[1] // 0' "$WORK/q.json")" = "$(grep -c '^mlwatch_cpu_seconds_total{' "$WORK/agent.prom")" ]
}
WAIT_EVERY=0.5 wait_for 30 in_prom || fail "Prometheus did not get the image agent's CPU series with a shard label: $(cat "$WORK/q.json")"
ok
# PromQL on the image agent's own store.
stored() {
    curl -sf "$AGENT_URL/api/v1/query" --data-urlencode 'query=count(count_over_time(mlwatch_cpu_seconds_total[1m]) >= 2)' \
        >"$WORK/aq.json" && [ "$(jq -r '.data.result[0].value[1] // 0' "$WORK/aq.json")" = "$(grep -c '^mlwatch_cpu_seconds_total{' "$WORK/agent.prom")" ]
}
WAIT_EVERY=0.5 wait_for 20 stored || fail "the image agent's store: $(cat "$WORK/aq.json")"
ok
[ -n "$(ls "$WORK/data")" ] || fail "the agent wrote nothing in its data folder"
expect_eq "libraries the agent could not load" "" "$(grep 'lazylib' "$WORK/agent.log" || true)"
expect_eq "agent warnings and errors" "" "$(grep -E ' (warn|error) ' "$WORK/agent.log" || true)"

# 5. Into a node's containerd as docs/deploy-image.md says (kind, k3s:
# `ctr images import`): a containerd of the test's own, the kubelet's
# namespace k8s.io; the image keeps its name and digest, and runs.
command -v containerd >/dev/null || fail "containerd is missing (scripts/install-deps.sh test)"
c=$WORK/containerd
mkdir -p "$c"
printf 'version = 2\nroot = "%s/root"\nstate = "%s/state"\n[grpc]\n  address = "%s/sock"\n[plugins."io.containerd.grpc.v1.cri"]\n  disable = true\n' \
    "$c" "$c" "$c" >"$c/config.toml"
containerd --config "$c/config.toml" >"$c/log" 2>&1 &
PIDS+=($!)
CTR=(ctr -a "$c/sock" -n k8s.io)
ctr_up() { "${CTR[@]}" version >/dev/null 2>&1; }
WAIT_EVERY=0.2 wait_for 20 ctr_up || fail "containerd did not start: $(tail -5 "$c/log")"
"${CTR[@]}" images import "$archive" >"$WORK/import.txt" 2>&1 || fail "ctr images import: $(cat "$WORK/import.txt")"
"${CTR[@]}" images ls >"$WORK/ctr-images.txt"
awk -v r="$ref" '$1 == r {print $3}' "$WORK/ctr-images.txt" >"$WORK/ctr-digest.txt"
expect_eq "digest of $ref in containerd" "$digest" "$(cat "$WORK/ctr-digest.txt")"
got=$("${CTR[@]}" run --rm --net-host "$ref" "image-test-$$" /usr/bin/mlwatch --version 2>&1) ||
    fail "ctr run: $got"
[[ $got =~ ^mlwatch\ $version\  ]] || fail "mlwatch --version under containerd: '$got'"
ok
done_ok
