# lib.sh - shared helpers for integration tests (sourced, not run).
# Environment from ctest: MLWATCH_BIN, MLWATCH_SRC, MLWATCH_BUILD, MLWATCH_FIXTURES.
# -E: the ERR trap below also sees failures inside functions.
set -Eeuo pipefail

: "${MLWATCH_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${MLWATCH_BIN:=$MLWATCH_SRC/build/mlwatch}"
: "${MLWATCH_FIXTURES:=$MLWATCH_SRC/tests/fixtures}"

TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "/tmp/mlwatch-it-$TEST_NAME-XXXXXX")
PIDS=()
CHECKS=0

cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "FAIL [$TEST_NAME]: $*" >&2
    # what the agent said last: the failure's cause is often there
    if [ -s "$WORK/agent.log" ]; then
        echo "--- the last lines of $WORK/agent.log:" >&2
        tail -n 20 "$WORK/agent.log" >&2
    fi
    exit 1
}

# A command that set -e stops the test on says so, with where: without this
# the test ends with status 1 and no word (CI showed only "Failed 0.06 sec").
# Commands under set +e, and tests of if/while/||/&&, do not come here.
on_error() { # STATUS COMMAND FILE LINE
    [[ $- == *e* ]] || return 0
    echo "FAIL [$TEST_NAME]: \`$2\` ended with status $1 at $(basename "$3"):$4, stopping the test (set -e)" >&2
}
trap 'on_error $? "$BASH_COMMAND" "${BASH_SOURCE[0]}" "$LINENO"' ERR

ok() {
    CHECKS=$((CHECKS + 1))
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
    [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
    ok
}

# A TCP port nobody listens on (the kernel's choice, released again).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_for SECONDS CMD [ARGS...]: until CMD succeeds, trying every 0.1 s
# (WAIT_EVERY=0.5 wait_for ...: less often, for checks that run a query or
# start a process); status 1 when SECONDS pass first, so that the caller
# says what did not happen, with what it sees then:
# wait_for 10 test -s "$f" || fail "...".
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep "${WAIT_EVERY:-0.1}"
    done
}

# got_count FILTER: the messages in $WORK/got.jsonl (what
# tests/receivers/webhook_receiver.py --out wrote) that match a jq filter;
# got_at_least FILTER N: at least N of them (for wait_for).
got_count() {
    [ -f "$WORK/got.jsonl" ] || { echo 0; return; }
    jq -c "select($1)" "$WORK/got.jsonl" | wc -l
}
got_at_least() { [ "$(got_count "$1")" -ge "$2" ]; }

http_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" = 200 ]; }

# wait_http URL [SECONDS]: until URL answers 200.
wait_http() {
    wait_for "${2:-20}" http_ok "$1" || fail "no answer from $1"
}

# start_scraper HOST:PORT INTERVAL [TIMEOUT]: Debian's Prometheus scraping
# one target as job "mlwatch"; sets PROM; logs in $WORK/prometheus.log.
start_scraper() {
    local port
    port=$(free_port)
    {
        printf 'global:\n  scrape_interval: %s\n' "$2"
        [ -n "${3:-}" ] && printf '  scrape_timeout: %s\n' "$3"
        printf "scrape_configs:\n  - job_name: mlwatch\n    static_configs:\n      - targets: ['%s']\n" "$1"
    } >"$WORK/prometheus.yml"
    prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom-data" \
        --web.listen-address="127.0.0.1:$port" >"$WORK/prometheus.log" 2>&1 &
    PIDS+=($!)
    PROM="http://127.0.0.1:$port"
    wait_http "$PROM/-/ready" 60
}

# start_agent ARGS...: sets AGENT_PID, AGENT_URL; logs in $WORK/agent.log.
# The agent keeps its store and state in the test's folder, never in
# /var/lib/mlwatch (ARGS may override: later flags win).
start_agent() {
    local port
    port=$(free_port)
    "$MLWATCH_BIN" agent --listen "127.0.0.1:$port" --data-dir "$WORK/data" \
        --state-dir "$WORK/state" "$@" >"$WORK/agent.log" 2>&1 &
    AGENT_PID=$!
    PIDS+=("$AGENT_PID")
    AGENT_URL="http://127.0.0.1:$port"
    wait_http "$AGENT_URL/-/ready"
}

# Copy a fixture tree into the work folder and print its path.
fixture_copy() {
    local dst="$WORK/root-$1"
    mkdir -p "$dst"
    cp -a "$MLWATCH_FIXTURES/$1/." "$dst/"
    echo "$dst"
}

# Samples of the exposition that change from run to run (timings, the
# agent's own process, build identity) are dropped before comparing.
stable_samples() {
    # uname_info is the kernel the test runs on, whatever the --root.
    grep -v '^#' | grep -Ev '^(mlwatch_collector_duration_seconds|mlwatch_process_|mlwatch_start_time_seconds|mlwatch_build_info|mlwatch_filesystem_|mlwatch_uname_info)' || true
}

done_ok() {
    echo "PASS [$TEST_NAME]: $CHECKS checks"
}
