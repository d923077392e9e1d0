#!/bin/bash
# store_powerloss.sh [ROUNDS] [BUILD_DIR]: ROUNDS simulated power losses
# (default 300) of the store during ingest, each followed by recovery and a
# check that every acknowledged sample is there with its exact value: the
# unit test unit_store_powerloss (tests/unit/test_store_powerloss.c, on
# tests/faultfs) with more rounds than ctest gives it. Prints the test's
# summary line, how many recoveries cut a torn WAL tail, and the time.
# MW_POWERLOSS_SEED=N repeats a run. Exits 1, keeping the log, on a miss.
# Never a timed test; results in docs/benchmarks.md.
set -u
ROUNDS=${1:-300}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${2:-$here/../build}
BIN=$BUILD/unit_store_powerloss
[ -x "$BIN" ] || { echo "no $BIN: build first (make)" >&2; exit 2; }
SEED=${MW_POWERLOSS_SEED:-$(( $(date +%s) % 1000000 ))}
LOG=$(mktemp /tmp/store-powerloss-XXXXXX.log)
t0=$(date +%s.%N)
MW_POWERLOSS_ROUNDS=$ROUNDS MW_POWERLOSS_SEED=$SEED "$BIN" >"$LOG" 2>&1
rc=$?
t1=$(date +%s.%N)
echo "seed $SEED, $ROUNDS rounds, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
grep -h "power losses:" "$LOG"
echo "recoveries that cut a torn WAL record: $(grep -c 'warn store: WAL segment' "$LOG")"
echo "other warnings at recovery: $(grep 'warn store' "$LOG" | grep -vc 'WAL segment')"
if [ $rc -ne 0 ]; then
    grep -E "missing|series [0-9]+ has|ERROR|FAILED|Failure" "$LOG" | head -20
    echo "FAILED (seed $SEED); log: $LOG"
    exit 1
fi
rm -f "$LOG"
