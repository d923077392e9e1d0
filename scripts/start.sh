#!/usr/bin/env bash
# Install what is missing, build, and start `mlwatch agent` with its defaults
# (extra arguments are passed to the agent). Run as root to read every sensor.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build
make
exec ./build/mlwatch agent "$@"
