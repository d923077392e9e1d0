# shellcheck shell=bash
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

# dump_stacks PID: what each of its threads is doing (gdb when installed,
# else the kernel's wait channel per thread).
dump_stacks() {
    if command -v gdb >/dev/null; then
        timeout 30 gdb -batch -nx -p "$1" -ex 'thread apply all bt 15' 2>&1 |
            grep -E '^(Thread |#)' | head -n 200 || true
    else
        local t
        for t in /proc/"$1"/task/*; do
            echo "thread $(basename "$t") ($(cat "$t/comm" 2>/dev/null)): $(cat "$t/wchan" 2>/dev/null)"
        done
    fi
}

# proc_stat PID: the fields of /proc/PID/stat after the command name (state,
# parent, ...); status 1 when there is no such process.
proc_stat() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null; }

# exited PID: the process is gone, or a zombie waiting to be reaped.
exited() {
    local st
    st=$(proc_stat "$1") || return 0
    [ "${st%% *}" = Z ]
}

# our_child PID: PID is a child of this test's shell. PIDS keeps the numbers
# of agents stopped and reaped long before cleanup runs, and the kernel gives
# numbers out again once it wraps around pid_max (32768 here; the suite
# starts some 15,000 processes a run): cleanup must not signal what took one.
our_child() {
    local st state ppid
    st=$(proc_stat "$1") || return 1
    read -r state ppid _ <<<"$st"
    [ "$ppid" = "$$" ] && [ -n "$state" ]
}

# stop_process PID: SIGTERM, then up to STOP_WAIT_S (20) seconds for it to
# exit. One still running is a hang worth a report (a stuck agent loses what
# it has not written): its threads' stacks, SIGKILL, and status 1. A PID
# that is no longer this shell's child is left alone.
stop_process() {
    local i
    our_child "$1" || { wait "$1" 2>/dev/null || true; return 0; }
    kill "$1" 2>/dev/null || { wait "$1" 2>/dev/null || true; return 0; }
    for ((i = 0; i < ${STOP_WAIT_S:-20} * 10; i++)); do
        exited "$1" && { wait "$1" 2>/dev/null || true; return 0; }
        sleep 0.1
    done
    echo "FAIL [$TEST_NAME]: process $1 ($(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | cut -c1-300)) still running ${STOP_WAIT_S:-20} s after SIGTERM; its threads:" >&2
    dump_stacks "$1" >&2
    kill_tree "$1"
    wait "$1" 2>/dev/null || true
    return 1
}

# descendants PID: the processes under PID.
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END { for (p in parent) for (q = parent[p]; q > 1; q = parent[q]) if (q == root) { print p; break } }'
}

# kill_tree PID: SIGKILL to PID and everything under it (a child left
# behind would hold the test's output open, and ctest waits for it).
kill_tree() {
    local p
    for p in $(descendants "$1") "$1"; do kill -KILL "$p" 2>/dev/null || true; done
}

# A test that hangs is stopped here, before ctest's TIMEOUT (300 s) ends it
# with no word on where: after TEST_WATCHDOG_S (200) seconds the watchdog
# prints the test's processes and the stacks of mlwatch's, and ends them.
watchdog() {
    set +e
    trap - ERR
    local sp='' me=$BASHPID test_pid=$1 procs p
    trap '[ -z "$sp" ] || kill "$sp" 2>/dev/null; exit 0' TERM
    sleep "${TEST_WATCHDOG_S:-200}" &
    sp=$!
    wait "$sp"
    trap '' TERM # the test's cleanup must not end the report
    procs=$(descendants "$test_pid" | grep -vx -e "$me" -e "$sp")
    echo "FAIL [$TEST_NAME]: still running after ${TEST_WATCHDOG_S:-200} s; its processes:" >&2
    for p in $procs; do
        ps -o pid=,stat=,etimes=,args= -p "$p" 2>/dev/null | cut -c1-300 >&2
    done
    for p in $procs; do
        if tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q mlwatch; then
            echo "--- threads of $p:" >&2
            dump_stacks "$p" >&2
        fi
    done
    for p in $procs; do kill -KILL "$p" 2>/dev/null; done
    kill -TERM "$test_pid" 2>/dev/null
    # What the test started while the list was made (a loaded machine) is
    # ended too: a process left behind holds ctest's output open.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.5
        procs=$(descendants "$test_pid" | grep -vx -e "$me")
        [ -n "$procs" ] || break
        for p in $procs; do kill -KILL "$p" 2>/dev/null; done
    done
    exit 0
}
watchdog $$ &
WATCHDOG_PID=$!

# cleanup [STATUS]: the EXIT trap (a test that adds to it passes the status
# it saw: trap 'rc=$?; ...; cleanup "$rc"' EXIT).
cleanup() {
    local rc=${1:-$?} p
    kill "$WATCHDOG_PID" 2>/dev/null || true
    for p in "${PIDS[@]:-}"; do
        [ -z "$p" ] || stop_process "$p" || rc=1
    done
    rm -rf "$WORK"
    exit "$rc"
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

agent_port() { sed -n 's/.* info agent: .* listening on .* (port \([0-9]*\)).*/\1/p' "$WORK/agent.log"; }
agent_started() { [ -n "$(agent_port)" ] || exited "$AGENT_PID"; }

# start_agent ARGS...: sets AGENT_PID, AGENT_URL; logs in $WORK/agent.log.
# The agent keeps its store and state in the test's folder (--data-dir), never in
# /var/lib/mlwatch (ARGS may override: later flags win).
# It listens on a port of the kernel's choice, read from its log: a port
# picked free beforehand may be taken (a parallel test's connection) by then.
# Its node label is "t1" (\$NODE_NAME, unless the caller sets it or passes
# --node-name), not the name of the machine the test runs on.
start_agent() {
    local port
    # Emptied here, not only by the child's redirection: until the child
    # runs, the log is the previous agent's, with its port.
    : >"$WORK/agent.log"
    NODE_NAME=${NODE_NAME:-t1} "$MLWATCH_BIN" agent --listen 127.0.0.1:0 --data-dir "$WORK/data" \
        "$@" >"$WORK/agent.log" 2>&1 &
    AGENT_PID=$!
    PIDS+=("$AGENT_PID")
    wait_for 20 agent_started || true
    port=$(agent_port)
    if [ -z "$port" ]; then
        local rc=0
        exited "$AGENT_PID" || fail "the agent does not listen after 20 s: $(head -c 600 "$WORK/agent.log")"
        wait "$AGENT_PID" || rc=$?
        fail "the agent exited with status $rc before it listened: $(head -c 600 "$WORK/agent.log")"
    fi
    AGENT_URL="http://127.0.0.1:$port"
    # AGENT_WAIT_FOR=/-/healthy: for an agent that is not meant to be ready
    wait_http "$AGENT_URL${AGENT_WAIT_FOR:-/-/ready}"
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
