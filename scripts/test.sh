#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite: the ordinary
# build, the same suite under ASan+UBSan, and a short run of every fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
jobs=$(nproc)
fail=0
passed=0
failed=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# count LOG: add ctest's "N tests failed out of M" summary to the totals.
count() {
    local f t
    # ctest's own list ("The following tests FAILED:"), kept for the last lines
    sed -n '/The following tests FAILED:/,$p' "$1" | grep -E '^[[:space:]]+[0-9]+ - ' |
        sed "s/^[[:space:]]*/$(basename "$1"): /" >>"$logs/failures" || true
    read -r f t < <(sed -n 's/.* \([0-9]*\) tests failed out of \([0-9]*\)$/\1 \2/p' "$1" | tail -n1) || true
    passed=$((passed + ${t:-0} - ${f:-0}))
    failed=$((failed + ${f:-0}))
    [ -n "${t:-}" ] || failed=$((failed + 1)) # ctest did not even report
}

echo "== lint"
if scripts/lint.sh; then passed=$((passed + 1)); else
    fail=1; failed=$((failed + 1)); echo "lint" >>"$logs/failures"
fi

echo "== build and test"
make
# pipefail: the pipeline fails when ctest does
ctest --test-dir build --output-on-failure -j "$jobs" 2>&1 | tee "$logs/plain" || fail=1
count "$logs/plain"

echo "== ASan+UBSan build and test"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMLWATCH_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
# integ_image is left out here: the image compiles mlwatch itself (its
# Debian build stage), so under ASan it would only build the same image
# again, cold (about 90 s), testing nothing more.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^integ_image$' 2>&1 | tee "$logs/asan" || fail=1
count "$logs/asan"

echo "== fuzz smoke (${FUZZ_SECONDS:-5}s per target)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLWATCH_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs"
for f in build-fuzz/fuzz_*; do
    name=$(basename "$f"); name=${name#fuzz_}
    work=$(mktemp -d)
    cp -r "fuzz/corpus/$name/." "$work/" 2>/dev/null || true
    if ! "$f" -max_total_time="${FUZZ_SECONDS:-5}" -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$work/" "$work" >"$work.log" 2>&1; then
        echo "fuzz target $name FAILED:"; tail -40 "$work.log"; fail=1
        echo "fuzz: $name" >>"$logs/failures"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
        echo "fuzz target $name: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" | awk '{print $2}') runs)"
    fi
    rm -rf "$work" "$work.log"
done

# One line for CI: ctest tests twice (plain and ASan+UBSan) plus fuzz targets.
if [ "$fail" -ne 0 ]; then
    # CI keeps only the tail of this output: name what failed, and each failed
    # test's own FAIL lines, here at the end.
    echo "FAILED: see the output above (lint, a test or a fuzzer). What failed:"
    cat "$logs/failures" 2>/dev/null || true
    for log in "$logs/plain" "$logs/asan"; do
        [ -f "$log" ] && grep -E 'FAIL|Failed|Timeout|Exception|ERROR|[Ee]rror:' "$log" |
            grep -v -e 'tests failed out of' -e 'The following tests FAILED' -e '^[[:space:]]*[0-9]* - ' | tail -n 15 | sed "s/^/$(basename "$log"): /" || true
    done
    echo "mlwatch: $passed passed, $failed failed"
    exit 1
fi
echo "mlwatch: $passed passed, $failed failed"
