#!/usr/bin/env bash
# lib_selftest.sh - lib.sh's own guarantees, which every other test leans on:
# cleanup never signals a process that is not the test's own (a PID in PIDS
# whose number the kernel gave to another process), a process that ignores
# SIGTERM fails the test with its stacks and is killed, and a test that hangs
# is ended by the watchdog with its processes listed, before ctest's timeout.
source "$(dirname "$0")/lib.sh"

# run_case NAME BODY [ENV...]: a test made of lib.sh and BODY, run as its own
# script; its output in $WORK/NAME.out, its status printed.
run_case() {
    local name=$1 body=$2 rc=0
    shift 2
    printf 'source %q\n%s\n' "$MLWATCH_SRC/tests/integration/lib.sh" "$body" >"$WORK/$name.sh"
    env "$@" bash "$WORK/$name.sh" >"$WORK/$name.out" 2>&1 || rc=$?
    echo "$rc"
}

# 1. A PID in PIDS that belongs to another process (here one this test
# started in a subshell of its own, as a parallel test would have): cleanup
# leaves it running and the test passes.
(sleep 60 & echo $! >"$WORK/foreign.pid")
foreign=$(cat "$WORK/foreign.pid")
PIDS+=("$foreign") # so that this test's own cleanup tries it too
expect_eq "status with a foreign PID in PIDS" 0 "$(run_case foreign "PIDS+=($foreign); done_ok")"
exited "$foreign" && fail "cleanup signalled a process that was not its test's: $(cat "$WORK/foreign.out")"
ok

# 2. A child that ignores SIGTERM: reported with its stacks, status 1, and
# killed with what it started (which would hold ctest's output pipe open).
expect_eq "status with a child that ignores SIGTERM" 1 \
    "$(run_case stuck "sh -c 'trap \"\" TERM; echo \$\$ >$WORK/stuck.pid; sleep 299; :' & PIDS+=(\$!)
wait_for 10 test -s $WORK/stuck.pid
done_ok" STOP_WAIT_S=1)"
grep -q "^FAIL \[stuck\]: process [0-9]* (sh -c trap \"\" TERM; .*) still running 1 s after SIGTERM; its threads:$" \
    "$WORK/stuck.out" || fail "no report of the stuck child: $(cat "$WORK/stuck.out")"
ok
exited "$(cat "$WORK/stuck.pid")" || fail "the stuck child was not killed"
ok
wait_for 5 sh -c '! pgrep -f "^sleep 299$" >/dev/null' || fail "the stuck child's own child was left running"
ok

# 3. A test that hangs: the watchdog lists its processes, ends them, and the
# test fails long before it would have ended.
start=$SECONDS
rc=$(run_case hang "sleep 300 & PIDS+=(\$!); echo \$! >$WORK/hang.pids
sleep 301 & echo \$! >>$WORK/hang.pids; wait \$!
done_ok" TEST_WATCHDOG_S=5)
[ "$rc" -ne 0 ] || fail "a hanging test passed"
ok
[ $((SECONDS - start)) -lt 60 ] || fail "the watchdog did not end the hanging test"
ok
grep -q '^FAIL \[hang\]: still running after 5 s; its processes:$' "$WORK/hang.out" ||
    fail "no watchdog report: $(cat "$WORK/hang.out")"
ok
for cmd in 'sleep 300' 'sleep 301'; do
    grep -q "^ *[0-9]* [A-Z][A-Za-z+<]* *[0-9]* $cmd\$" "$WORK/hang.out" || fail "'$cmd' not listed: $(cat "$WORK/hang.out")"
    ok
done
# Its own two processes, by PID: a machine-wide pgrep also saw any other
# "sleep 300" on a shared CI machine.
gone() { local p; for p in $(cat "$WORK/hang.pids"); do exited "$p" || return 1; done; }
[ "$(wc -l <"$WORK/hang.pids")" -eq 2 ] || fail "the hanging test did not start its two processes: $(cat "$WORK/hang.out")"
wait_for 20 gone || fail "the hanging test's processes were left running: $(ps -o pid=,stat=,args= -p "$(paste -sd, "$WORK/hang.pids")")"
ok

kill "$foreign"
done_ok
