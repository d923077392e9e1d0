#!/usr/bin/env bash
# metrics_doc.sh - docs/metrics.md lists exactly what mlwatch exposes on the
# fixtures (regenerate with: scripts/metrics_doc.py build/mlwatch > docs/metrics.md).
source "$(dirname "$0")/lib.sh"
python3 "$MLWATCH_SRC/scripts/metrics_doc.py" "$MLWATCH_BIN" >"$WORK/metrics.md"
diff -u "$MLWATCH_SRC/docs/metrics.md" "$WORK/metrics.md" >"$WORK/diff" ||
    fail "docs/metrics.md is stale; regenerate it:
$(head -30 "$WORK/diff")"
ok
# Every family follows the naming conventions.
python3 - "$WORK/metrics.md" <<'PY' || fail "naming conventions"
import re, sys
bad = []
for line in open(sys.argv[1]):
    if not line.startswith("| `"):
        continue
    # Every row has a type: a row without one would pass every check below.
    m = re.match(r"\| `(\w+)` \| (counter|gauge|info|histogram|summary|stateset|unknown) \| (\w*) \|", line)
    if not m:
        bad.append(f"a row without a known type: {line.strip()[:120]}")
        continue
    name, typ, unit = m.groups()
    if not name.startswith("mlwatch_"): bad.append(f"{name}: no mlwatch_ prefix")
    if typ == "counter" and not name.endswith("_total"): bad.append(f"{name}: counter without _total")
    if typ != "counter" and name.endswith("_total"): bad.append(f"{name}: _total on a {typ}")
    base = name[:-6] if typ == "counter" else name
    if unit and not base.endswith("_" + unit): bad.append(f"{name}: unit {unit} is not its suffix")
    for u in ("milliseconds", "microseconds", "kilobytes", "megabytes", "percent", "celcius", "mhz", "kb"):
        if "_" + u in name: bad.append(f"{name}: non-base unit {u}")
if bad:
    print("\n".join(bad)); sys.exit(1)
PY
ok
done_ok
