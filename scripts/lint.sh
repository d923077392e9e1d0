#!/usr/bin/env bash
# Style and static analysis over all C sources and the one C++ file
# (src/core/regex.cc): clang-format (the repo's .clang-format), cppcheck,
# and the layering of src/'s folders (scripts/check_layering.py: no #include
# against the flow). Exits non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc' | grep -v '^fuzz/corpus/')
status=0
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/mlwatch-format.log; then
    echo "clang-format: these files need formatting (make format):"
    grep -oE '^[^ :][^:]*\.(c|h|cc):[0-9]+' /tmp/mlwatch-format.log | cut -d: -f1 | sort -u
    status=1
fi
if ! cppcheck --enable=warning,performance,portability --error-exitcode=1 -q --inline-suppr \
    --suppress=missingIncludeSystem -D__GNUC__ -I src "${files[@]}"; then
    status=1
fi
if ! python3 scripts/check_layering.py; then
    status=1
fi
[ $status -eq 0 ] && echo "lint: clang-format, cppcheck and layering clean (${#files[@]} files)"
exit $status
