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
            libjansson-dev libssl-dev libfreeipmi17)
# The test suite: unit tests, fuzzers, lint, and the real peers it runs
# against (Prometheus, promtool, Alertmanager, VictoriaMetrics, an SMTP sink).
test_pkgs=(libcmocka-dev clang libclang-rt-14-dev clang-format cppcheck prometheus
           prometheus-alertmanager victoria-metrics curl python3 python3-aiosmtpd procps
           openssl jq python3-grpcio)
# Benchmarks: the tools mlwatch is compared with.
bench_pkgs=(prometheus-node-exporter bc)

pkgs=("${build_pkgs[@]}")
[ "$what" = test ] && pkgs+=("${test_pkgs[@]}")
[ "$what" = bench ] && pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
