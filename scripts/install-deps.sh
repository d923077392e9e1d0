#!/usr/bin/env bash
# Install what mlwatch needs from Debian, only what is missing.
#   scripts/install-deps.sh build   - to build and run the agent
#   scripts/install-deps.sh test    - also what the test suite uses
#   scripts/install-deps.sh bench   - also the tools benchmarks compare against
set -euo pipefail
what=${1:-build}

# Libraries (headers; libcurl, snappy, libcrypto and FreeIPMI are loaded at
# run time only when a feature needs them, see src/core/lazylib.c).
build_pkgs=(build-essential cmake pkg-config libmicrohttpd-dev libyaml-dev zlib1g-dev
            libprotobuf-c-dev protobuf-c-compiler libsnappy-dev libcurl4-openssl-dev
            libjansson-dev libssl-dev libfreeipmi17 libisal-dev libre2-dev libzstd-dev)
# The test suite: unit tests, fuzzers, lint, and the real peers it runs
# against (Prometheus, promtool, Alertmanager, VictoriaMetrics, an SMTP sink),
# and libcurl's GnuTLS flavour (remote_write_tls_gnutls.sh); the container
# image's build and run (scripts/build-image.sh, tests/integration/image.sh);
# a D-Bus bus and a fake systemd on it (tests/integration/run_systemd.sh).
test_pkgs=(libcmocka-dev libcurl3-gnutls clang libclang-rt-14-dev clang-format cppcheck prometheus
           prometheus-alertmanager victoria-metrics curl python3 python3-aiosmtpd procps
           openssl jq strace python3-grpcio chromium python3-yaml python3-kubernetes
           mmdebstrap umoci skopeo podman runc containerd dbus-daemon python3-dbus python3-gi)
# Benchmarks: the tools mlwatch is compared with.
bench_pkgs=(prometheus-node-exporter bc)

pkgs=("${build_pkgs[@]}")
[ "$what" = test ] && pkgs+=("${test_pkgs[@]}")
[ "$what" = bench ] && pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}")

# The web UI (ui/, docs/ui.md) takes uPlot from npm at build time and the UI
# test drives chromium with playwright-core: npm (Debian's, unless one is on
# PATH) and `npm ci` in ui/ (the full lock for tests, without dev packages
# for a plain build).
command -v npm >/dev/null || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

ui=$(cd "$(dirname "$0")/.." && pwd)/ui
if [ "$what" = build ]; then
    [ -d "$ui/node_modules/uplot" ] || (cd "$ui" && npm ci --omit=dev --no-audit --no-fund)
else
    [ -d "$ui/node_modules/uplot" ] && [ -d "$ui/node_modules/playwright-core" ] ||
        (cd "$ui" && npm ci --no-audit --no-fund)
fi
# deploy/ tests: the Kubernetes schema validator (kubernetes-models from npm,
# tests/deploy/package-lock.json), tests/integration/deploy_manifests.sh.
deploy=$(cd "$(dirname "$0")/.." && pwd)/tests/deploy
if [ "$what" != build ]; then
    [ -d "$deploy/node_modules/kubernetes-models" ] &&
        [ -d "$deploy/node_modules/@kubernetes-models/prometheus-operator" ] ||
        (cd "$deploy" && npm ci --no-audit --no-fund)
fi
