#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite: the ordinary
# build, the same suite under ASan+UBSan, and a short run of every fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
jobs=$(nproc)
fail=0

echo "== lint"
scripts/lint.sh || fail=1

echo "== build and test"
make
ctest --test-dir build --output-on-failure -j "$jobs" || fail=1

echo "== ASan+UBSan build and test"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMLWATCH_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" || fail=1

echo "== fuzz smoke (${FUZZ_SECONDS:-5}s per target)"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLWATCH_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs"
for f in build-fuzz/fuzz_*; do
    name=$(basename "$f"); name=${name#fuzz_}
    work=$(mktemp -d)
    cp -r "fuzz/corpus/$name/." "$work/" 2>/dev/null || true
    if ! "$f" -max_total_time="${FUZZ_SECONDS:-5}" -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$work/" "$work" >"$work.log" 2>&1; then
        echo "fuzz target $name FAILED:"; tail -40 "$work.log"; fail=1
    else
        echo "fuzz target $name: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" | awk '{print $2}') runs)"
    fi
    rm -rf "$work" "$work.log"
done

total=$(ctest --test-dir build -N | awk '/Total Tests:/ {print $3}')
if [ "$fail" -ne 0 ]; then
    echo "FAILED: see the output above"
    exit 1
fi
echo "all suites passed ($total tests, each also under ASan+UBSan; fuzzers clean)"
